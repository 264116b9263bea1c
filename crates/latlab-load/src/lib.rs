//! latlab's load generators: background work that stresses what latency suffers from — CPU
//! time, matrix arithmetic, memory mapping and unmapping (TLB shootdowns), file writes, /proc
//! reads, real-time busy threads, message passing, or any external command — each counting its
//! own work so throughput can be reported beside latency.
//!
//! - A load is written as a spec, `KIND[:OPTION=VALUE,...]` ([`LoadSpec::parse`], pure).
//! - Every generator describes itself in one [`LoadDescriptor`] of the [`registry()`]: options
//!   with defaults and ranges, what it reports and a `supported` check saying why it cannot run.
//! - [`LoadSet::start`] checks every spec and starts them all on a CPU set (or fails with why,
//!   before anything runs); [`LoadSet::stop`] stops them and returns one [`LoadReport`] each.
//!   Dropping a `LoadSet` stops everything too: threads are joined, child processes killed and
//!   files removed on every exit path.
//! - A [`Schedule`] of phases (`"idle 30s, memory 30s, io:bs=1M 30s"`) is run by a
//!   [`ScheduleRunner`], which records the phase boundaries.
//!
//! Stopping is prompt: workers check a shared stop flag at least every millisecond or so. Beside
//! a load of real-time threads (`rt-hog`) the thread that stops it must itself get the CPU on
//! time: [`keep_time_beside`] raises it above them for as long as they run.

use latlab_model::load::{LoadReport, Throughput};
use latlab_model::units::CpuList;
use latlab_sys::Sys;
use std::time::{Duration, Instant};

mod loads;
mod os;
mod pool;
pub mod registry;
mod schedule;
pub mod spec;

pub use registry::{LoadDescriptor, registry};
pub use schedule::{Schedule, SchedulePhase, ScheduleRunner, parse_schedule, parse_schedule_named};
pub use spec::{LoadSpec, OptDefault, OptKind, OptValue, OptionDesc, parse_size};

/// Why loads could not be parsed, checked or started. Every message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Bad input: a spec, schedule or CPU list that does not parse, or CPUs that are not online.
    /// Reported before anything runs (exit code 2 in the command line).
    #[error("{0}")]
    Invalid(String),
    /// The load cannot run on this system, and why (e.g. rt-hog without privileges).
    #[error("{kind}: cannot run here: {reason}")]
    Unsupported { kind: String, reason: String },
    /// Starting failed (anything already started has been stopped).
    #[error("{kind}: could not start: {message}")]
    Start { kind: String, message: String },
}

impl LoadError {
    /// Whether this is bad input (exit code 2) rather than a failure on this system (exit 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, LoadError::Invalid(_))
    }
}

/// Where and how loads run.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// CPUs the loads run on; `None`: every online CPU (that this process may use). Workers
    /// default to one per CPU of the set and are pinned to its CPUs in turn.
    pub cpus: Option<CpuList>,
    /// Run rt-hog even when RT throttling is disabled.
    pub force: bool,
    /// The system the checks read (online CPUs, RT throttling, memory, /proc); the default is
    /// the live system at `/`.
    pub sys: Sys,
}

impl LoadOptions {
    /// The CPUs loads will use, checked against the online CPUs.
    pub fn resolve_cpus(&self) -> Result<Vec<u32>, LoadError> {
        let online = self.sys.online_cpus().map_err(|e| LoadError::Start {
            kind: "load".into(),
            message: format!("cannot read the online CPUs: {e}"),
        })?;
        match &self.cpus {
            Some(list) => {
                if let Some(why) = list.not_within(&online) {
                    return Err(LoadError::Invalid(format!("--load-cpus {list}: {why}")));
                }
                Ok(list.cpus().to_vec())
            }
            None => {
                let mut cpus = online.cpus().to_vec();
                if self.sys.is_live()
                    && let Ok(allowed) = latlab_sys::thread::process_affinity()
                {
                    let kept: Vec<u32> = cpus
                        .iter()
                        .copied()
                        .filter(|c| allowed.contains(c))
                        .collect();
                    if !kept.is_empty() {
                        cpus = kept;
                    }
                }
                if cpus.is_empty() {
                    return Err(LoadError::Start {
                        kind: "load".into(),
                        message: "no online CPU to run loads on".into(),
                    });
                }
                Ok(cpus)
            }
        }
    }

    /// The `cpus` field of a report: the set when one was given.
    fn report_cpus(&self, cpus: &[u32]) -> Option<Vec<usize>> {
        self.cpus
            .as_ref()
            .map(|_| cpus.iter().map(|&c| c as usize).collect())
    }
}

/// What a generator's `start` gets.
pub(crate) struct Ctx<'a> {
    /// The CPU set (never empty).
    pub cpus: &'a [u32],
    pub opts: &'a LoadOptions,
}

/// A started load.
pub(crate) trait Running: Send {
    /// Ask it to stop; returns at once.
    fn request_stop(&self);
    /// Wait for it to end, clean up, and say what it did.
    fn finish(self: Box<Self>) -> Finished;
    /// Child processes it runs (for `cmd`).
    fn pids(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// What a load did.
pub(crate) struct Finished {
    pub workers: usize,
    pub elapsed: Duration,
    pub throughput: Vec<Throughput>,
    pub warnings: Vec<String>,
    /// Why the load failed, where it did (a command that exited with an error on its own).
    pub failed: Option<String>,
}

/// A rate over `elapsed`: `total` divided by the seconds (0 when nothing ran).
pub(crate) fn throughput(what: &str, unit: &str, total: f64, elapsed: Duration) -> Throughput {
    let secs = elapsed.as_secs_f64();
    Throughput {
        what: what.into(),
        unit: unit.into(),
        rate: if secs > 0.0 { total / secs } else { 0.0 },
        total,
    }
}

struct Started {
    spec: LoadSpec,
    cpus: Option<Vec<usize>>,
    run: Box<dyn Running>,
}

/// Loads running together. Start them with [`LoadSet::start`], stop them with
/// [`LoadSet::stop`]; dropping the set stops them too (threads joined, children killed, files
/// removed), so error, Ctrl-C and panic paths clean up.
pub struct LoadSet {
    started: Vec<Started>,
}

impl std::fmt::Debug for LoadSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let specs: Vec<&str> = self.started.iter().map(|s| s.spec.text()).collect();
        f.debug_struct("LoadSet").field("loads", &specs).finish()
    }
}

/// A directory the user named (`io:dir=PATH`) must be one: a path that is not is bad input, as
/// a missing store is, and is said before anything starts.
fn named_dirs_exist(spec: &LoadSpec) -> Result<(), LoadError> {
    for opt in spec.descriptor().options {
        if !matches!(opt.kind, OptKind::Path) || !spec.is_given(opt.name) {
            continue;
        }
        let Some(OptValue::Path(dir)) = spec.option(opt.name) else {
            continue;
        };
        let why = match std::fs::metadata(dir) {
            // The load writes its files there: /proc is a directory it cannot write.
            Ok(m) if m.is_dir() => match latlab_sys::probe_write(dir) {
                Ok(()) => continue,
                Err(e) => format!("not writable here ({e})"),
            },
            Ok(_) => "not a directory".to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such directory".into(),
            // Other errors (permissions) say themselves when the load is checked or started.
            Err(_) => continue,
        };
        return Err(LoadError::Invalid(format!(
            "{}:{}={}: {why} (accepted: an existing directory latlab may write)",
            spec.kind(),
            opt.name,
            dir.display()
        )));
    }
    Ok(())
}

impl LoadSet {
    /// Check, without starting anything, that the CPU set is valid and every load can run here.
    /// No specs: nothing to check.
    pub fn check(specs: &[LoadSpec], opts: &LoadOptions) -> Result<(), LoadError> {
        if specs.is_empty() {
            return Ok(());
        }
        opts.resolve_cpus()?;
        for spec in specs {
            named_dirs_exist(spec)?;
            (spec.descriptor().supported)(spec, opts).map_err(|reason| LoadError::Unsupported {
                kind: spec.kind().into(),
                reason,
            })?;
        }
        Ok(())
    }

    /// Check every load (see [`LoadSet::check`]) and start them all. If one fails to start, the
    /// ones already started are stopped before the error is returned.
    ///
    /// Call it from a thread that lives until the set is stopped (the main thread, typically):
    /// child processes of `cmd` loads are killed by the kernel should that thread end first.
    /// Block SIGINT/SIGTERM in the calling thread beforehand if a signal thread takes them: the
    /// load threads inherit the mask (`cmd` children get every signal unblocked).
    pub fn start(specs: &[LoadSpec], opts: &LoadOptions) -> Result<LoadSet, LoadError> {
        if specs.is_empty() {
            return Ok(LoadSet {
                started: Vec::new(),
            });
        }
        Self::check(specs, opts)?;
        let cpus = opts.resolve_cpus()?;
        let mut set = LoadSet {
            started: Vec::with_capacity(specs.len()),
        };
        for spec in specs {
            let ctx = Ctx { cpus: &cpus, opts };
            let run =
                (spec.descriptor().start)(spec, &ctx).map_err(|message| LoadError::Start {
                    kind: spec.kind().into(),
                    message,
                })?;
            set.started.push(Started {
                spec: spec.clone(),
                cpus: opts.report_cpus(&cpus),
                run,
            });
        }
        Ok(set)
    }

    /// How many loads run.
    pub fn len(&self) -> usize {
        self.started.len()
    }

    pub fn is_empty(&self) -> bool {
        self.started.is_empty()
    }

    /// Process ids of child processes (of `cmd` loads).
    pub fn child_pids(&self) -> Vec<u32> {
        self.started.iter().flat_map(|s| s.run.pids()).collect()
    }

    /// Stop every load (all are asked at once, then each is waited for) and report, in the order
    /// of the specs. `started_ns` is 0: the loads started before measuring.
    pub fn stop(mut self) -> Vec<LoadReport> {
        self.stop_all()
    }

    fn stop_all(&mut self) -> Vec<LoadReport> {
        for s in &self.started {
            s.run.request_stop();
        }
        self.started
            .drain(..)
            .map(|s| {
                let f = s.run.finish();
                LoadReport {
                    spec: s.spec.text().to_string(),
                    kind: s.spec.kind().to_string(),
                    cpus: s.cpus,
                    workers: f.workers,
                    started_ns: 0,
                    elapsed_ns: u64::try_from(f.elapsed.as_nanos()).unwrap_or(u64::MAX),
                    throughput: f.throughput,
                    warnings: f.warnings,
                    failed: f.failed,
                }
            })
            .collect()
    }
}

impl Drop for LoadSet {
    fn drop(&mut self) {
        let _ = self.stop_all();
    }
}

/// The `SCHED_FIFO` priority at which a thread keeps running beside these loads: the highest
/// priority of their real-time threads (an `rt-hog`'s watchdog); `None` when none runs any.
pub fn keep_time_priority(specs: &[LoadSpec]) -> Option<i32> {
    specs
        .iter()
        .filter_map(|s| s.descriptor().realtime.map(|f| f(s)))
        .max()
}

/// A load's real-time threads that keep CPUs busy (an rt-hog's hogs).
#[derive(Debug, Clone)]
pub struct BusyRealtime<'a> {
    pub spec: &'a LoadSpec,
    pub priority: u32,
    /// SCHED_RR: a thread of the same priority gets the CPU when a hog's time slice ends.
    pub round_robin: bool,
    /// The CPUs they keep busy: the first of the load's CPUs, one each.
    pub cpus: Vec<u32>,
}

impl BusyRealtime<'_> {
    /// Whether a real-time thread at `priority` that may run only on `on` never runs while
    /// the hogs do: they outrank it there, or they are SCHED_FIFO at its priority (a FIFO
    /// thread keeps the CPU until it blocks; RT throttling holds every real-time thread alike).
    pub fn starves(&self, priority: u32, on: &[u32]) -> bool {
        let outranks = self.priority > priority || self.priority == priority && !self.round_robin;
        outranks && !on.is_empty() && on.iter().all(|c| self.cpus.contains(c))
    }
}

/// The CPUs the loads keep busy at a real-time priority (see [`BusyRealtime`]).
pub fn busy_realtime<'a>(specs: &'a [LoadSpec], cpus: &[u32]) -> Vec<BusyRealtime<'a>> {
    specs
        .iter()
        .filter(|s| s.descriptor().name == loads::rt_hog::DESCRIPTOR.name)
        .map(|spec| {
            let (priority, round_robin, cpus) = loads::rt_hog::busy(spec, cpus);
            BusyRealtime {
                spec,
                priority,
                round_robin,
                cpus,
            }
        })
        .collect()
}

/// Raise the calling thread to [`keep_time_priority`] until the guard is dropped, so that the
/// loads' real-time threads do not make it late: the thread that ends a measurement or a load
/// phase. At normal priority beside busy real-time threads it runs only when the kernel's RT
/// throttling lets it, up to a second later each time it wakes. `Ok(None)` when no load runs
/// real-time threads. Threads and processes the raised thread starts begin at normal priority.
pub fn keep_time_beside(
    specs: &[LoadSpec],
) -> std::io::Result<Option<latlab_sys::thread::RaisedPolicy>> {
    keep_time_priority(specs)
        .map(latlab_sys::thread::RaisedPolicy::fifo)
        .transpose()
}

/// Nanoseconds from `origin` to `t` (0 when `t` is earlier).
pub(crate) fn offset_ns(origin: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A hog starves a thread that may run only on its CPUs when it outranks it, or is fifo at
    /// its priority; an rr hog at its priority takes turns with it, and a CPU of its own is
    /// enough.
    #[test]
    fn hogs_starve_what_they_outrank_and_fifo_its_equal() {
        let specs: Vec<LoadSpec> = [
            "rt-hog:threads=1,priority=50",
            "rt-hog:threads=1,priority=50,policy=fifo",
        ]
        .iter()
        .map(|s| LoadSpec::parse(s).unwrap())
        .collect();
        let busy = busy_realtime(&specs, &[0, 1]);
        let (rr, fifo) = (&busy[0], &busy[1]);
        assert_eq!((rr.round_robin, fifo.round_robin), (true, false));
        assert_eq!(rr.cpus, vec![0]);
        assert!(rr.starves(49, &[0]) && fifo.starves(49, &[0]));
        assert!(!rr.starves(50, &[0]) && fifo.starves(50, &[0]));
        assert!(!rr.starves(51, &[0]) && !fifo.starves(51, &[0]));
        assert!(!fifo.starves(50, &[0, 1]) && !fifo.starves(50, &[]));
    }

    /// A thread keeps time above the highest real-time thread of the loads: an `rt-hog`'s
    /// watchdog, one above its hogs (99 at most); loads without real-time threads need nothing.
    #[test]
    fn the_priority_to_keep_time_at_is_the_highest_of_the_loads_real_time_threads() {
        let specs = |texts: &[&str]| -> Vec<LoadSpec> {
            texts.iter().map(|t| LoadSpec::parse(t).unwrap()).collect()
        };
        assert_eq!(keep_time_priority(&specs(&["cpu", "io", "cmd:true"])), None);
        assert_eq!(keep_time_priority(&specs(&["rt-hog"])), Some(2));
        assert_eq!(
            keep_time_priority(&specs(&["cpu", "rt-hog:priority=40", "rt-hog:priority=7"])),
            Some(41)
        );
        assert_eq!(
            keep_time_priority(&specs(&["rt-hog:priority=98"])),
            Some(99)
        );
        assert!(keep_time_beside(&specs(&["cpu"])).unwrap().is_none());
    }
}
