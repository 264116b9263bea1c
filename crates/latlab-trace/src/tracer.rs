//! The tracer: check the system, load and attach the programs, read the histograms back.

use crate::TraceError;
use crate::buckets::{merge_stats, to_histogram};
use crate::env::{self, BpfStats, Tracefs};
use crate::events::{Attach, EventGroup, Program};
use crate::layout::{self, HistKey, RING_BYTES, StatKey, StatVal};
use crate::names::Names;
use crate::story;
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::{BtfTracePoint, ProgramError, TracePoint};
use aya::{Btf, Ebpf, EbpfLoader};
use latlab_model::trace::{
    CpuCount, CpuHistogram, Family, FamilyResult, KeyResult, ProgramCost, SkippedEvent, SpikeStory,
    TraceCost, TraceResult, WakeupFilter,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

/// What to trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceConfig {
    /// Event groups whose histograms are kept.
    pub groups: Vec<EventGroup>,
    /// Record only events on these CPUs (default: every CPU).
    pub cpus: Option<Vec<u32>>,
    /// Which wake-ups the `wakeup` group measures.
    pub wakeup: WakeupFilter,
    /// Keep the per-CPU ring of recent events for spike stories ([`Tracer::ring_reader`]).
    pub ring: bool,
    /// Room for histogram buckets in the kernel (distinct family, key and bucket triples).
    pub hist_entries: u32,
    /// Tracepoints (`category:event`) to treat as absent from this kernel: for testing the
    /// partial runs of kernels that lack them.
    pub pretend_missing: Vec<String>,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            groups: EventGroup::ALL.to_vec(),
            cpus: None,
            wakeup: WakeupFilter::default(),
            ring: false,
            hist_entries: 65536,
            pretend_missing: Vec::new(),
        }
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of the BPF timestamps and of spike stories.
pub use latlab_sys::monotonic_ns;

/// An error and its causes on one line (verifier logs reduced to their last lines).
fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(ProgramError::LoadError {
        io_error,
        verifier_log,
    }) = e.downcast_ref::<ProgramError>()
    {
        let log = verifier_log.to_string();
        let tail: Vec<&str> = log
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .rev()
            .take(2)
            .collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return format!(
            "loading failed ({io_error}); verifier: {}",
            tail.join(" | ")
        );
    }
    let mut text = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        src = s.source();
    }
    text.replace('\n', " ")
}

/// A tracing session: programs attached until [`Tracer::finish`] (or drop).
pub struct Tracer {
    ebpf: Ebpf,
    requested: Vec<EventGroup>,
    active: Vec<EventGroup>,
    attached: Vec<&'static Program>,
    skipped: Vec<SkippedEvent>,
    cpus: Vec<u32>,
    online: usize,
    possible: usize,
    wakeup: WakeupFilter,
    ring: bool,
    stats: BpfStats,
    names: Arc<Names>,
    start_ns: u64,
    /// Each program's (run time, runs, recursion misses) when the window opened: what it cost
    /// while being attached is not the window's.
    baseline: HashMap<&'static str, (u64, u64, u64)>,
    warnings: Vec<String>,
}

impl Tracer {
    /// Check the system, load the programs, attach them. Events this kernel lacks are skipped
    /// (see [`Tracer::skipped`]); an error means nothing can be traced: no privileges, no BTF,
    /// or none of the requested events available.
    pub fn start(config: &TraceConfig) -> Result<Tracer, TraceError> {
        let (caps, btf) = preflight(config)?;

        let possible = aya::util::nr_cpus().map_err(|(what, e)| {
            TraceError::Load(format!("reading the possible CPUs ({what}): {e}"))
        })?;
        // The real sysfs: the CPUs the programs run on, whatever tree a test redirects to.
        let online_cpus = latlab_sys::Sys::default()
            .online_cpus()
            .map(|l| l.cpus().to_vec())
            .unwrap_or_default();
        let cpus = traced_cpus(config, possible, &online_cpus)?;

        let mut requested = config.groups.clone();
        requested.sort();
        requested.dedup();
        let wanted = wanted_programs(&requested, config.ring);

        let mut skipped: Vec<SkippedEvent> = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        let tracefs = if wanted.iter().any(|(_, p)| p.attach == Attach::Classic) {
            Some(Tracefs::acquire())
        } else {
            None
        };
        let missing = missing_programs(config, &wanted, tracefs.as_ref(), &btf, &mut skipped);
        let mut active: Vec<EventGroup> = requested
            .iter()
            .copied()
            .filter(|g| group_ok(*g, &missing))
            .collect();

        let mut ebpf = load_object(config, &btf, &active, &cpus, possible, caps)?;
        // Statistics on before the first program runs, so every run is counted.
        warnings.extend(BpfStats::put_back_left());
        let stats = BpfStats::enable();

        let (mut attached, failed_groups) = attach_wanted(
            &mut ebpf,
            &btf,
            config.ring,
            &wanted,
            &missing,
            &active,
            &mut skipped,
        );
        if let Some(t) = tracefs
            && let Err(e) = t.release()
        {
            warnings.push(e);
        }
        // A group with a program that failed to attach reports nothing: unload the rest of
        // its programs (those the ring does not need).
        if !failed_groups.is_empty() {
            active.retain(|g| !failed_groups.contains(g));
            retain_needed(&mut ebpf, &mut attached, &active, config.ring);
        }
        let ring_only = config.ring && !attached.is_empty();
        if active.is_empty() && !ring_only {
            return Err(nothing_traced(&skipped));
        }

        let names = Arc::new(Names::load());
        if names.symbols.is_empty() {
            warnings.push(
                "kernel symbols are hidden (/proc/kallsyms shows no addresses): functions are \
                 named by address"
                    .into(),
            );
        }
        let mut tracer = Tracer {
            ebpf,
            requested,
            active,
            attached,
            skipped,
            cpus,
            online: online_cpus.len().max(1),
            possible,
            wakeup: config.wakeup.clone(),
            ring: config.ring,
            stats,
            names,
            start_ns: 0,
            baseline: HashMap::new(),
            warnings,
        };
        // The window opens now: the programs record from here on, and their cost counts.
        tracer.baseline = tracer
            .program_stats()
            .into_iter()
            .map(|(p, stats)| (p.name, stats))
            .collect();
        tracer.start_ns = monotonic_ns();
        tracer.set_recording(true)?;
        Ok(tracer)
    }

    /// Open or close the traced window: the programs record only while it is open.
    fn set_recording(&mut self, on: bool) -> Result<(), TraceError> {
        let map = self
            .ebpf
            .map_mut(".bss")
            .ok_or_else(|| TraceError::Load("map .bss missing from the object".into()))?;
        let mut flag: aya::maps::Array<&mut MapData, u32> = aya::maps::Array::try_from(map)
            .map_err(|e| TraceError::Load(format!("the recording flag: {e}")))?;
        flag.set(0, u32::from(on), 0)
            .map_err(|e| TraceError::Load(format!("setting the recording flag: {e}")))
    }

    /// Events that could not be traced, with the reason.
    pub fn skipped(&self) -> &[SkippedEvent] {
        &self.skipped
    }

    /// Event groups whose histograms are being kept.
    pub fn active_groups(&self) -> &[EventGroup] {
        &self.active
    }

    /// The names used for keys (kernel symbols, IRQs), loaded when tracing started.
    pub fn names(&self) -> &Arc<Names> {
        &self.names
    }

    /// Read everything traced so far (the programs stay attached; samples recorded while the
    /// maps are read may make a histogram's exact statistics unavailable, see
    /// [`to_histogram`]).
    pub fn read(&self) -> Result<TraceResult, TraceError> {
        let end = monotonic_ns();
        let cost = self.cost(end.saturating_sub(self.start_ns));
        self.read_at(end, cost)
    }

    fn read_at(&self, end: u64, cost: TraceCost) -> Result<TraceResult, TraceError> {
        let hist: PerCpuHashMap<&MapData, HistKey, u64> =
            PerCpuHashMap::try_from(self.object_map("hist")?).map_err(read_err("hist"))?;
        let stats: PerCpuHashMap<&MapData, StatKey, StatVal> =
            PerCpuHashMap::try_from(self.object_map("stats")?).map_err(read_err("stats"))?;
        let drops: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.object_map("drops")?).map_err(read_err("drops"))?;
        let wake_stats: PerCpuArray<&MapData, StatVal> =
            PerCpuArray::try_from(self.object_map("wake_stats")?)
                .map_err(read_err("wake_stats"))?;
        let wake_hist: PerCpuArray<&MapData, layout::WakeDense> =
            PerCpuArray::try_from(self.object_map("wake_hist")?).map_err(read_err("wake_hist"))?;
        let samples = Samples::read(&hist, &stats, &wake_hist, &wake_stats)?;

        let mut families = Vec::new();
        for family in Family::ALL {
            if !self.active.iter().any(|g| g.families().contains(&family)) {
                continue;
            }
            let id = layout::family_id(family);
            let mut dropped = 0u64;
            if let Ok(values) = drops.get(&id, 0) {
                dropped = values.iter().sum();
            }
            families.push(self.family_result(family, &samples, dropped));
        }

        let elapsed = end.saturating_sub(self.start_ns);
        let mut warnings = self.warnings.clone();
        for f in &families {
            if f.dropped > 0 {
                warnings.push(format!(
                    "{}: {} samples found no room in the kernel maps",
                    f.family.name(),
                    f.dropped
                ));
            }
        }
        Ok(TraceResult {
            events: self
                .requested
                .iter()
                .map(|g| g.name().to_string())
                .collect(),
            cpus: self.cpus.clone(),
            wakeup_filter: self.wakeup.clone(),
            start_monotonic_ns: self.start_ns,
            end_monotonic_ns: end,
            elapsed_ns: elapsed,
            families,
            skipped: self.skipped.clone(),
            cost,
            warnings,
        })
    }

    /// The map `name` of the BPF object.
    fn object_map(&self, name: &str) -> Result<&aya::maps::Map, TraceError> {
        self.ebpf
            .map(name)
            .ok_or_else(|| TraceError::Read(format!("map {name} missing from the object")))
    }

    /// The result of one family from the `samples` read: its histogram over every key and
    /// CPU, per CPU, and per key (most samples first), with `dropped` samples counted.
    fn family_result(&self, family: Family, samples: &Samples, dropped: u64) -> FamilyResult {
        let id = layout::family_id(family);
        let keys = samples.keys(id);
        let empty_b = PerCpu::new();
        let empty_s = PerCpu::new();
        // Per CPU over every key: buckets and statistics.
        let mut cpu_buckets: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
        let mut cpu_stats: BTreeMap<u32, StatVal> = BTreeMap::new();
        let mut all_buckets: Vec<(u32, u64)> = Vec::new();
        let mut all_stats = StatVal::default();
        let mut key_results = Vec::new();
        for key in keys {
            let kb = samples.buckets.get(&(id, key)).unwrap_or(&empty_b);
            let ks = samples.exact.get(&(id, key)).unwrap_or(&empty_s);
            let mut kbuckets: Vec<(u32, u64)> = Vec::new();
            let mut kstats = StatVal::default();
            let mut per_cpu = Vec::new();
            for (cpu, b) in kb {
                kbuckets.extend_from_slice(b);
                cpu_buckets.entry(*cpu).or_default().extend_from_slice(b);
            }
            for (cpu, s) in ks {
                kstats = merge_stats(kstats, *s);
                let c = cpu_stats.entry(*cpu).or_default();
                *c = merge_stats(*c, *s);
                per_cpu.push(CpuCount {
                    cpu: *cpu,
                    count: s.count,
                    max_ns: s.max,
                });
            }
            all_buckets.extend_from_slice(&kbuckets);
            all_stats = merge_stats(all_stats, kstats);
            let histogram = to_histogram(&kbuckets, kstats);
            if histogram.is_empty() {
                continue;
            }
            key_results.push(KeyResult {
                key,
                name: self.names.key_name(family, key),
                histogram,
                per_cpu,
            });
        }
        key_results.sort_by(|a, b| {
            b.histogram
                .count()
                .cmp(&a.histogram.count())
                .then(a.key.cmp(&b.key))
        });
        let mut per_cpu = Vec::new();
        // CPUs with samples only: a histogram is a quarter of a megabyte.
        for (&cpu, b) in &cpu_buckets {
            let h = to_histogram(b, cpu_stats.get(&cpu).copied().unwrap_or_default());
            per_cpu.push(CpuHistogram { cpu, histogram: h });
        }
        FamilyResult {
            family,
            histogram: to_histogram(&all_buckets, all_stats),
            per_cpu,
            keys: key_results,
            dropped,
        }
    }

    /// Every attached program's (run time, runs, recursion misses) since it was loaded.
    fn program_stats(&self) -> Vec<(&'static Program, (u64, u64, u64))> {
        let mut out = Vec::new();
        for p in &self.attached {
            let Some(prog) = self.ebpf.program(p.name) else {
                continue;
            };
            let fd = match p.attach {
                Attach::Classic => <&TracePoint>::try_from(prog)
                    .ok()
                    .and_then(|t| t.fd().ok())
                    .map(|fd| fd.as_fd()),
                Attach::Btf => <&BtfTracePoint>::try_from(prog)
                    .ok()
                    .and_then(|t| t.fd().ok())
                    .map(|fd| fd.as_fd()),
            };
            let Some(fd) = fd else { continue };
            if let Ok(stats) = env::program_stats(fd) {
                out.push((*p, stats));
            }
        }
        out
    }

    /// What the programs cost since the window opened, over `elapsed_ns`.
    fn cost(&self, elapsed_ns: u64) -> TraceCost {
        let mut programs = Vec::new();
        for (p, (time, runs, misses)) in self.program_stats() {
            let (t0, r0, m0) = self.baseline.get(p.name).copied().unwrap_or_default();
            programs.push(ProgramCost {
                program: p.name.to_string(),
                event: p.tracepoint(),
                run_count: runs.saturating_sub(r0),
                run_time_ns: time.saturating_sub(t0),
                recursion_misses: Some(misses.saturating_sub(m0)),
            });
        }
        let run_time_ns: u64 = programs.iter().map(|p| p.run_time_ns).sum();
        let run_count: u64 = programs.iter().map(|p| p.run_count).sum();
        let cpu_ns = elapsed_ns as f64 * self.online as f64;
        TraceCost {
            source: self.stats.describe(),
            available: self.stats.available(),
            programs,
            run_count,
            run_time_ns,
            cpu_fraction: if cpu_ns > 0.0 {
                run_time_ns as f64 / cpu_ns
            } else {
                0.0
            },
        }
    }

    /// A reader of the per-CPU rings for spike stories (needs [`TraceConfig::ring`]). It can
    /// be moved to another thread and outlives nothing: drop it with the tracer.
    pub fn ring_reader(&self) -> Result<RingReader, TraceError> {
        if !self.ring {
            return Err(TraceError::Config(
                "the ring of recent events is off (TraceConfig::ring)".into(),
            ));
        }
        let map = self
            .ebpf
            .map("rings")
            .ok_or_else(|| TraceError::Read("map rings missing from the object".into()))?;
        let data = match map {
            aya::maps::Map::Array(d) => d,
            _ => return Err(TraceError::Read("map rings is not an array".into())),
        };
        let fd = data
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| TraceError::Read(format!("duplicating the rings' descriptor: {e}")))?;
        Ok(RingReader {
            fd,
            names: self.names.clone(),
            possible: self.possible as u32,
        })
    }

    /// The story of `cpu` between `from_ns` and `to_ns` (`CLOCK_MONOTONIC`); see
    /// [`RingReader::story`].
    pub fn story(&self, cpu: u32, from_ns: u64, to_ns: u64) -> Result<SpikeStory, TraceError> {
        self.ring_reader()?.story(cpu, from_ns, to_ns)
    }

    /// Stop tracing and read the final result: the window is closed (the programs record
    /// nothing more) and the programs detached before the maps are read, so they hold exactly
    /// what the window recorded; then everything is released (statistics off, as before).
    pub fn finish(mut self) -> Result<TraceResult, TraceError> {
        // Close the window first: detaching takes time, and nothing after this is recorded.
        let closed = self.set_recording(false);
        let end = monotonic_ns();
        let cost = self.cost(end.saturating_sub(self.start_ns));
        if let Err(e) = closed {
            self.warnings
                .push(format!("{e}: events after the end may be counted"));
        }
        for p in &self.attached {
            if let Some(prog) = self.ebpf.program_mut(p.name) {
                let _ = unload(prog, p.attach);
            }
        }
        self.read_at(end, cost)
    }
}

/// A converter of map errors into [`TraceError::Read`] errors about `what`.
fn read_err(what: &str) -> impl Fn(aya::maps::MapError) -> TraceError + use<> {
    let what = what.to_string();
    move |e: aya::maps::MapError| TraceError::Read(format!("{what}: {}", one_line(&e)))
}

/// Values by CPU.
type PerCpu<T> = BTreeMap<u32, T>;
/// Histogram buckets as (bucket index, count).
type Buckets = Vec<(u32, u64)>;

/// What the kernel maps hold, by (family id, key) then CPU: histogram buckets and exact
/// statistics.
#[derive(Default)]
struct Samples {
    buckets: HashMap<(u32, u64), PerCpu<Buckets>>,
    exact: HashMap<(u32, u64), PerCpu<StatVal>>,
}

impl Samples {
    /// Read the histogram and statistics maps, and the wake-up arrays (which keep their
    /// statistics, and the buckets below `WAKE_DENSE`, by class).
    fn read(
        hist: &PerCpuHashMap<&MapData, HistKey, u64>,
        stats: &PerCpuHashMap<&MapData, StatKey, StatVal>,
        wake_hist: &PerCpuArray<&MapData, layout::WakeDense>,
        wake_stats: &PerCpuArray<&MapData, StatVal>,
    ) -> Result<Samples, TraceError> {
        let mut samples = Samples::default();
        for item in hist.iter() {
            let (k, values) = item.map_err(read_err("hist"))?;
            for (cpu, &n) in values.iter().enumerate() {
                samples.add_bucket((k.family, k.key), cpu, k.index, n);
            }
        }
        for item in stats.iter() {
            let (k, values) = item.map_err(read_err("stats"))?;
            for (cpu, v) in values.iter().enumerate() {
                samples.add_exact((k.family, k.key), cpu, v);
            }
        }
        let wakeup = layout::family_id(Family::Wakeup);
        for class in 0..3u32 {
            let fk = (wakeup, u64::from(class));
            let dense = wake_hist.get(&class, 0).map_err(read_err("wake_hist"))?;
            for (cpu, d) in dense.iter().enumerate() {
                for (index, &n) in d.count.iter().enumerate() {
                    samples.add_bucket(fk, cpu, index as u32, u64::from(n));
                }
            }
            let st = wake_stats.get(&class, 0).map_err(read_err("wake_stats"))?;
            for (cpu, v) in st.iter().enumerate() {
                samples.add_exact(fk, cpu, v);
            }
        }
        Ok(samples)
    }

    /// Add `n` samples in bucket `index` of `fk` on `cpu` (nothing when `n` is 0).
    fn add_bucket(&mut self, fk: (u32, u64), cpu: usize, index: u32, n: u64) {
        if n > 0 {
            let b = self
                .buckets
                .entry(fk)
                .or_default()
                .entry(cpu as u32)
                .or_default();
            b.push((index, n));
        }
    }

    /// Keep the statistics `v` of `fk` on `cpu` (unless they count no sample).
    fn add_exact(&mut self, fk: (u32, u64), cpu: usize, v: &StatVal) {
        if v.count > 0 {
            self.exact.entry(fk).or_default().insert(cpu as u32, *v);
        }
    }

    /// The keys of family `id` with buckets or statistics, sorted.
    fn keys(&self, id: u32) -> Vec<u64> {
        let mut keys: Vec<u64> = self
            .buckets
            .keys()
            .chain(self.exact.keys())
            .filter(|(f, _)| *f == id)
            .map(|(_, k)| *k)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// A program wanted, with the group that wants it (`None`: only the ring of recent events).
type Wanted = (Option<EventGroup>, &'static Program);

/// What must hold before anything is loaded: a configuration that traces something, the
/// privileges to trace, and the kernel's BTF. Returns the effective capabilities and the BTF.
fn preflight(config: &TraceConfig) -> Result<(u64, Btf), TraceError> {
    if config.groups.is_empty() && !config.ring {
        return Err(TraceError::Config("no event group to trace".into()));
    }
    if config.wakeup.pid.is_some_and(|p| p <= 0) {
        return Err(TraceError::Config(
            "the wake-up PID must be positive".into(),
        ));
    }
    let caps = env::privileged()?;
    if !Path::new(env::BTF_PATH).exists() {
        return Err(TraceError::NoBtf);
    }
    let btf = Btf::from_sys_fs().map_err(|e| TraceError::Btf(one_line(&e)))?;
    Ok((caps, btf))
}

/// The CPUs traced: those of the configuration, sorted and checked against the `possible`
/// ones, or else every online CPU.
fn traced_cpus(
    config: &TraceConfig,
    possible: usize,
    online_cpus: &[u32],
) -> Result<Vec<u32>, TraceError> {
    Ok(match &config.cpus {
        Some(list) => {
            if let Some(bad) = list.iter().find(|&&c| c as usize >= possible || c >= 1024) {
                return Err(TraceError::Config(format!(
                    "CPU {bad} does not exist here (possible CPUs: 0-{})",
                    possible.saturating_sub(1)
                )));
            }
            let mut l = list.clone();
            l.sort_unstable();
            l.dedup();
            l
        }
        None => online_cpus.to_vec(),
    })
}

/// The programs wanted: those of the requested groups, and with the ring every program that
/// writes it.
fn wanted_programs(requested: &[EventGroup], ring: bool) -> Vec<Wanted> {
    let mut wanted: Vec<Wanted> = Vec::new();
    for g in requested {
        for p in g.programs() {
            wanted.push((Some(*g), p));
        }
    }
    if ring {
        for (_, p) in crate::events::all_programs() {
            if p.feeds_ring && !wanted.iter().any(|(_, w)| w.name == p.name) {
                wanted.push((None, p));
            }
        }
    }
    wanted
}

/// Note that program `p`, wanted by group `g`, is not traced, and why.
fn skip(skipped: &mut Vec<SkippedEvent>, g: Option<EventGroup>, p: &Program, why: String) {
    skipped.push(SkippedEvent {
        group: g.map_or("spike-stories", |g| g.name()).to_string(),
        event: p.tracepoint(),
        reason: why,
    });
}

/// The wanted programs whose tracepoint this kernel lacks (or is configured to pretend it
/// lacks), each also noted in `skipped`.
fn missing_programs(
    config: &TraceConfig,
    wanted: &[Wanted],
    tracefs: Option<&Tracefs>,
    btf: &Btf,
    skipped: &mut Vec<SkippedEvent>,
) -> BTreeSet<&'static str> {
    let mut missing: BTreeSet<&'static str> = BTreeSet::new();
    for (g, p) in wanted {
        if let Some(why) = missing_reason(config, p, tracefs, btf) {
            missing.insert(p.name);
            skip(skipped, *g, p, why);
        }
    }
    missing
}

/// Why the tracepoint of `p` cannot be used on this kernel, if it cannot.
fn missing_reason(
    config: &TraceConfig,
    p: &Program,
    tracefs: Option<&Tracefs>,
    btf: &Btf,
) -> Option<String> {
    let why = if config.pretend_missing.contains(&p.tracepoint()) {
        Some("tracepoint not in this kernel (pretended)".to_string())
    } else {
        None
    };
    why.or_else(|| match p.attach {
        Attach::Classic => match tracefs.and_then(|t| t.unavailable()) {
            Some(reason) => Some(format!("tracefs: {reason}")),
            None if !tracefs.is_some_and(|t| t.has_event(p.category, p.event)) => {
                Some("tracepoint not in this kernel".to_string())
            }
            None => None,
        },
        Attach::Btf => btf
            .id_by_type_name_kind(
                &format!("btf_trace_{}", p.event),
                aya_obj::btf::BtfKind::Typedef,
            )
            .is_err()
            .then(|| {
                if p.category == "irq_vectors" {
                    "tracepoint not in this kernel (x86 only)".to_string()
                } else {
                    "tracepoint not in this kernel".to_string()
                }
            }),
    })
}

/// Whether group `g` can run: none of its required programs is `missing`.
fn group_ok(g: EventGroup, missing: &BTreeSet<&str>) -> bool {
    g.programs()
        .iter()
        .all(|p| !p.required || !missing.contains(p.name))
}

/// Load the BPF object, its globals set for the `active` groups, the configuration's
/// wake-up filter and ring, and the traced `cpus`.
fn load_object(
    config: &TraceConfig,
    btf: &Btf,
    active: &[EventGroup],
    cpus: &[u32],
    possible: usize,
    caps: u64,
) -> Result<Ebpf, TraceError> {
    let mut hist_mask = 0u32;
    for g in active {
        for f in g.families() {
            hist_mask |= 1 << layout::family_id(*f);
        }
    }
    let ring_enabled = u32::from(config.ring);
    let wake_rt_only = u32::from(config.wakeup.rt_only);
    let wake_pid: i32 = config.wakeup.pid.unwrap_or(0);
    let filter_cpus = u32::from(config.cpus.is_some());
    let mut cpu_mask = [0u64; 16];
    for &c in cpus {
        cpu_mask[(c / 64) as usize] |= 1 << (c % 64);
    }
    let ring_entries = if config.ring { possible as u32 } else { 1 };

    let mut loader = EbpfLoader::new();
    loader
        .btf(Some(btf))
        // Task storage (wake-up times) has no user-space wrapper in aya; only the BPF
        // programs use it.
        .allow_unsupported_maps()
        .override_global("hist_mask", &hist_mask, true)
        .override_global("ring_enabled", &ring_enabled, true)
        .override_global("wake_rt_only", &wake_rt_only, true)
        .override_global("wake_pid", &wake_pid, true)
        .override_global("filter_cpus", &filter_cpus, true)
        .override_global("cpu_mask", &cpu_mask, true)
        .map_max_entries("rings", ring_entries)
        .map_max_entries("hist", config.hist_entries.max(1024));
    loader.load(layout::OBJECT).map_err(|e| {
        let text = one_line(&e);
        if text.contains("os error 1)") || text.contains("Operation not permitted") {
            TraceError::NoPrivilege {
                have: env::describe_caps(caps),
            }
        } else {
            TraceError::Load(text)
        }
    })
}

/// Attach the wanted programs, in order: each once, none `missing`, and only those of
/// `active` groups or (with the `ring`) those that write the ring. Failures are noted in
/// `skipped`. Returns the programs attached and the groups of required programs that failed.
fn attach_wanted(
    ebpf: &mut Ebpf,
    btf: &Btf,
    ring: bool,
    wanted: &[Wanted],
    missing: &BTreeSet<&'static str>,
    active: &[EventGroup],
    skipped: &mut Vec<SkippedEvent>,
) -> (Vec<&'static Program>, BTreeSet<EventGroup>) {
    let mut attached: Vec<&'static Program> = Vec::new();
    let mut failed_groups: BTreeSet<EventGroup> = BTreeSet::new();
    for (g, p) in wanted {
        if missing.contains(p.name) || attached.iter().any(|a| a.name == p.name) {
            continue;
        }
        if g.is_some_and(|g| !active.contains(&g)) && !(ring && p.feeds_ring) {
            continue;
        }
        match attach(ebpf, p, btf) {
            Ok(()) => attached.push(p),
            Err(why) => {
                skip(skipped, *g, p, why);
                if let Some(g) = g
                    && p.required
                {
                    failed_groups.insert(*g);
                }
            }
        }
    }
    (attached, failed_groups)
}

/// Keep attached only the programs of `active` groups and (with the `ring`) those that write
/// the ring; unload the others.
fn retain_needed(
    ebpf: &mut Ebpf,
    attached: &mut Vec<&'static Program>,
    active: &[EventGroup],
    ring: bool,
) {
    attached.retain(|p| {
        let keep = active
            .iter()
            .any(|g| g.programs().iter().any(|q| q.name == p.name))
            || (ring && p.feeds_ring);
        if !keep && let Some(prog) = ebpf.program_mut(p.name) {
            let _ = unload(prog, p.attach);
        }
        keep
    });
}

/// The error when nothing can be traced: one clause per reason, "tracepoint not in this
/// kernel: a, b; tracefs: …: c".
fn nothing_traced(skipped: &[SkippedEvent]) -> TraceError {
    let mut by_reason: Vec<(String, Vec<String>)> = Vec::new();
    for s in skipped {
        match by_reason.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, events)) => events.push(s.event.clone()),
            None => by_reason.push((s.reason.clone(), vec![s.event.clone()])),
        }
    }
    let text: Vec<String> = by_reason
        .into_iter()
        .map(|(r, e)| format!("{r}: {}", e.join(", ")))
        .collect();
    TraceError::NothingTraced(text.join("; "))
}

fn attach(ebpf: &mut Ebpf, p: &Program, btf: &Btf) -> Result<(), String> {
    let prog = ebpf
        .program_mut(p.name)
        .ok_or_else(|| format!("program {} missing from the object", p.name))?;
    match p.attach {
        Attach::Classic => {
            let tp: &mut TracePoint = prog.try_into().map_err(|e: ProgramError| one_line(&e))?;
            tp.load().map_err(|e| one_line(&e))?;
            tp.attach(p.category, p.event).map_err(|e| one_line(&e))?;
        }
        Attach::Btf => {
            let tp: &mut BtfTracePoint = prog.try_into().map_err(|e: ProgramError| one_line(&e))?;
            tp.load(p.event, btf).map_err(|e| one_line(&e))?;
            tp.attach().map_err(|e| one_line(&e))?;
        }
    }
    Ok(())
}

fn unload(prog: &mut aya::programs::Program, attach: Attach) -> Result<(), ProgramError> {
    match attach {
        Attach::Classic => <&mut TracePoint>::try_from(prog)?.unload(),
        Attach::Btf => <&mut BtfTracePoint>::try_from(prog)?.unload(),
    }
}

/// Reads the per-CPU rings of recent events and tells spike stories. `Send`: hand it to the
/// thread that records spikes.
pub struct RingReader {
    fd: OwnedFd,
    names: Arc<Names>,
    possible: u32,
}

impl RingReader {
    /// The ring of one CPU now: the count of events ever written, and those still held,
    /// oldest first (one system call copying the ring, about 300 KB).
    pub fn read(&self, cpu: u32) -> Result<(u64, Vec<layout::RingEv>), TraceError> {
        if cpu >= self.possible {
            return Err(TraceError::Config(format!("CPU {cpu} does not exist here")));
        }
        let mut buf = vec![0u8; RING_BYTES];
        env::lookup_into(self.fd.as_fd(), cpu, &mut buf)
            .map_err(|e| TraceError::Read(format!("reading the ring of CPU {cpu}: {e}")))?;
        Ok(layout::decode_ring(&buf))
    }

    /// What ran on `cpu` between `from_ns` and `to_ns` (`CLOCK_MONOTONIC`, the clock of
    /// [`monotonic_ns`]). Read soon after the interval: the ring holds the last 4096 events of
    /// the CPU, and the story says `complete: false` when the interval's start was overwritten.
    pub fn story(&self, cpu: u32, from_ns: u64, to_ns: u64) -> Result<SpikeStory, TraceError> {
        let (head, events) = self.read(cpu)?;
        Ok(story::decompose(
            &events,
            head,
            cpu,
            from_ns,
            to_ns,
            &self.names,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send<T: Send>() {}
    fn sync<T: Sync>() {}

    #[test]
    fn handles_can_move_to_other_threads() {
        send::<Tracer>();
        send::<RingReader>();
        sync::<RingReader>();
        send::<crate::StorySender>();
        send::<crate::StoryCollector>();
    }

    #[test]
    fn default_configuration_traces_every_group_without_the_ring() {
        let c = TraceConfig::default();
        assert_eq!(c.groups, EventGroup::ALL.to_vec());
        assert!(!c.ring && c.cpus.is_none() && c.pretend_missing.is_empty());
    }
}
