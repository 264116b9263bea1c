//! Results built by hand for the tests of what reads them (reports, the store): a seeded
//! generator, so a test's numbers are the same on every run, and the parts of a `RunResult`
//! every such test needs, put together by the model's own constructor.

use latlab_hist::Histogram;
use latlab_model::{
    MeasureConfig, RunHead, RunResult, Spikes, Stats, StopReason, SystemInfo, ThreadResult,
};

/// splitmix64: a small deterministic generator.
pub use latlab_model::rng::SplitMix64 as Rng;

/// A histogram of `(value, times)` pairs.
pub fn hist(values: &[(u64, u64)]) -> Histogram {
    let mut h = Histogram::new();
    for &(v, n) in values {
        h.record_n(v, n);
    }
    h
}

/// A measuring thread whose samples are `h` (its corrected histogram too: no missed period
/// added samples); the rest is left for the test to set.
pub fn thread(label: &str, cpu: Option<u32>, tid: i32, missed: u64, h: Histogram) -> ThreadResult {
    let stats = Stats::of(&h);
    ThreadResult {
        label: label.into(),
        cpu,
        tid,
        missed,
        expected_periods: None,
        max_at_ns: 0,
        stats: stats.clone(),
        corrected: stats,
        cpu_time_ns: None,
        histogram: h.clone(),
        corrected_histogram: h,
        windows: Vec::new(),
    }
}

/// A run `id` that started at `start_unix_ns` and lasted `elapsed_ns`, measured with `config`
/// on `system`, ended by its duration, of `threads` (the overall figures are theirs merged).
pub fn result(
    id: &str,
    (start_unix_ns, elapsed_ns): (u64, u64),
    config: MeasureConfig,
    system: SystemInfo,
    threads: Vec<ThreadResult>,
) -> RunResult {
    RunResult::from_threads(
        RunHead {
            id: id.into(),
            start_unix_ns,
            elapsed_ns,
            config,
            system,
            environment: Default::default(),
            stop: StopReason::Duration,
            spikes: Spikes::default(),
        },
        threads,
    )
}

/// A run `id` of one thread on CPU 0 that saw 100 samples of 5 µs, started at `start_unix_ns`
/// and lasting `elapsed_ns` (0: unknown, as for an import without them), every other part at its
/// default: for tests of what a format writes of a run's head.
pub fn one_cpu(id: &str, (start_unix_ns, elapsed_ns): (u64, u64)) -> RunResult {
    let t0 = thread("cpu0", Some(0), 10, 0, hist(&[(5_000, 100)]));
    result(
        id,
        (start_unix_ns, elapsed_ns),
        MeasureConfig::default(),
        SystemInfo::default(),
        vec![t0],
    )
}

/// A load `spec` (its kind the part before any `:`) that ran on `cpus` (`None`: every CPU)
/// for a second with one worker, beside the whole measurement.
pub fn load(spec: &str, cpus: Option<Vec<usize>>) -> latlab_model::load::LoadReport {
    latlab_model::load::LoadReport {
        spec: spec.into(),
        kind: spec.split(':').next().unwrap_or(spec).into(),
        cpus,
        workers: 1,
        started_ns: 0,
        elapsed_ns: 1_000_000_000,
        throughput: Vec::new(),
        warnings: Vec::new(),
        failed: None,
    }
}

/// One key of a traced family: its number, its name, and its samples as `(cpu, ns)`.
pub type KeySamples<'a> = (u64, &'a str, Vec<(u32, u64)>);

/// A traced family of `keys`, each `(key, name, samples)` with its samples as `(cpu, ns)`: the
/// family's histogram, its per-CPU histograms and each key's per-CPU counts agree with the
/// samples, as the tracer's are.
pub fn family(
    family: latlab_model::trace::Family,
    keys: &[KeySamples<'_>],
) -> latlab_model::trace::FamilyResult {
    use latlab_model::trace::{CpuCount, CpuHistogram, FamilyResult, KeyResult};
    use std::collections::BTreeMap;
    let mut all = Histogram::new();
    let mut per_cpu: BTreeMap<u32, Histogram> = BTreeMap::new();
    let keys = keys
        .iter()
        .map(|(key, name, samples)| {
            let mut h = Histogram::new();
            let mut cpus: BTreeMap<u32, Histogram> = BTreeMap::new();
            for &(cpu, v) in samples {
                h.record(v);
                cpus.entry(cpu).or_default().record(v);
                per_cpu.entry(cpu).or_default().record(v);
                all.record(v);
            }
            KeyResult {
                key: *key,
                name: (*name).into(),
                histogram: h,
                per_cpu: cpus
                    .into_iter()
                    .map(|(cpu, h)| CpuCount {
                        cpu,
                        count: h.count(),
                        max_ns: h.max(),
                    })
                    .collect(),
            }
        })
        .collect();
    FamilyResult {
        family,
        histogram: all,
        per_cpu: per_cpu
            .into_iter()
            .map(|(cpu, histogram)| CpuHistogram { cpu, histogram })
            .collect(),
        keys,
        dropped: 0,
    }
}

/// A trace of the event groups `events` with `families`, over one second on CPUs 0 and 1, the
/// tasklet tracepoint skipped as on a kernel without it, and its cost counted by
/// `BPF_ENABLE_STATS` at `run_count` runs taking `run_time_ns`; the rest for the test to set.
pub fn trace(
    events: &[&str],
    families: Vec<latlab_model::trace::FamilyResult>,
    (run_count, run_time_ns): (u64, u64),
) -> latlab_model::trace::TraceResult {
    use latlab_model::trace::{SkippedEvent, TraceCost, TraceResult};
    TraceResult {
        events: events.iter().map(|e| e.to_string()).collect(),
        cpus: vec![0, 1],
        wakeup_filter: Default::default(),
        start_monotonic_ns: 1_000_000_000,
        end_monotonic_ns: 2_000_000_000,
        elapsed_ns: 1_000_000_000,
        families,
        skipped: vec![SkippedEvent {
            group: "tasklet".into(),
            event: "irq:tasklet_entry".into(),
            reason: "tracepoint not in this kernel".into(),
        }],
        cost: TraceCost {
            source: "BPF_ENABLE_STATS".into(),
            available: true,
            programs: vec![],
            run_count,
            run_time_ns,
            // Over two CPUs for the second.
            cpu_fraction: run_time_ns as f64 / 2e9,
        },
        warnings: vec![],
    }
}

/// A monitoring window of `cpu` whose samples are `histogram`, with `missed` periods; no sampler
/// summary and no spikes (for the test to add).
pub fn monitor_window(
    cpu: u32,
    histogram: Histogram,
    missed: u64,
) -> latlab_model::monitor::MonitorWindow {
    latlab_model::monitor::MonitorWindow {
        cpu,
        histogram,
        missed,
        cpu_summary: None,
        spikes: Vec::new(),
    }
}

/// Window set `index`, `len_ns` long from `start_unix_ns`, of the windows `cpus`; no power,
/// thermal or cost readings (for the test to add).
pub fn window_set(
    index: u64,
    (start_unix_ns, len_ns): (u64, u64),
    cpus: Vec<latlab_model::monitor::MonitorWindow>,
) -> latlab_model::monitor::WindowSet {
    latlab_model::monitor::WindowSet {
        index,
        start_unix_ns,
        end_unix_ns: start_unix_ns + len_ns,
        cpus,
        power: None,
        thermal: None,
        cost_cpu_time_ns: None,
    }
}
