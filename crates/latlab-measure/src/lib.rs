//! latlab's measuring engine: one thread per CPU (pinned) or N unpinned threads, each waiting for
//! absolute deadlines (or woken by a waker thread) and recording how late it ran into the shared
//! [`Histogram`]; a coordinating thread off the measured CPUs collects one window per period and
//! builds the [`RunResult`].
//!
//! Missed periods are never dropped: each thread counts them, and the result carries beside the
//! raw histogram a corrected one with the samples the missed periods would have produced.

mod engine;
mod os;
mod thread;
mod window;

use latlab_hist::Histogram;
use latlab_model::units::{CpuList, format_duration};
use latlab_model::{MeasureConfig, Method, Policy, RunResult, Spike, StopReason};
use latlab_sys::Sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use engine::{BeforeRelease, run_hooked};
pub use latlab_sys::thread::explain_policy_error;

/// Told of each spike by the measuring thread that saw it, in its slow path: an implementation
/// must not block or allocate (hand the request on, e.g. to a bounded queue).
pub trait SpikeHook: Send + Sync {
    /// `at_ns` is the spike's [`Spike::at_ns`]; `from` (the deadline, or the waker's wake call)
    /// and `to` (when the thread ran) are absolute times on the run's clock.
    fn spike(&self, thread: u32, at_ns: u64, from: u64, to: u64);
}

/// Errors of a measurement. `Invalid` is bad input (exit code 2); `Setup` is a failure while
/// preparing or running, e.g. a timer that could not be armed (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Setup(String),
}

/// The shared stop request: set by signals, by a `--break`, or by the caller.
#[derive(Default)]
pub struct StopSignal {
    flag: AtomicBool,
    reason: Mutex<Option<StopReason>>,
    coordinator: Mutex<Option<std::thread::Thread>>,
    /// Where a `--break` wrote its trace marker, once written.
    marker: Mutex<Option<String>>,
}

impl StopSignal {
    pub fn new() -> Arc<StopSignal> {
        Arc::new(StopSignal::default())
    }

    /// Ask every thread to stop; the first reason given is kept.
    pub fn request(&self, reason: StopReason) {
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(reason);
        }
        self.flag.store(true, Ordering::Relaxed);
        self.wake_coordinator();
    }

    #[inline(always)]
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    pub fn reason(&self) -> Option<StopReason> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }

    /// A `--break` wrote its trace marker to `path`.
    pub(crate) fn marker_written(&self, path: &std::path::Path) {
        if let Ok(mut m) = self.marker.lock() {
            m.get_or_insert_with(|| path.display().to_string());
        }
    }

    /// Where a `--break` wrote its trace marker, if it wrote one.
    pub fn marker(&self) -> Option<String> {
        self.marker.lock().ok().and_then(|m| m.clone())
    }

    fn wake_coordinator(&self) {
        if let Ok(c) = self.coordinator.lock()
            && let Some(t) = c.as_ref()
        {
            t.unpark();
        }
    }
}

/// Per-thread figures for a live view, updated as measuring starts and once per window.
#[derive(Debug, Clone, Default)]
pub struct LiveThread {
    pub label: String,
    pub count: u64,
    pub missed: u64,
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    /// Maximum of the last closed window.
    pub window_max: u64,
}

/// What the observer is shown: once as measuring starts (elapsed 0, with the set-up's
/// warnings), then as windows close.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub elapsed_ns: u64,
    pub threads: Vec<LiveThread>,
    /// At the start only: what the set-up could not do as asked (memory not locked, a thread
    /// placed elsewhere), as the result's warnings will say it. Empty afterwards.
    pub setup_warnings: Vec<String>,
}

/// Where a measurement's threads may run: per measuring thread, its label, its CPUs and, for a
/// thread wake-up method, its waker's CPUs (both run at the configured policy and priority).
pub fn placement(cfg: &MeasureConfig, online: &CpuList) -> Vec<(String, Vec<u32>, Vec<u32>)> {
    engine::plan_threads(cfg, online)
        .0
        .into_iter()
        .map(|p| {
            let waker = if cfg.method.is_wakeup() {
                p.waker_affinity
            } else {
                Vec::new()
            };
            (p.label, p.affinity, waker)
        })
        .collect()
}

/// Whether this process may give its measuring threads `cfg`'s real-time policy (fifo, rr):
/// tried on a thread of its own that ends at once, so that a refusal (no CAP_SYS_NICE, a cgroup
/// without a real-time budget) is said before a measurement is announced or anything started.
/// Deadline admission, which counts every thread, is left to the run.
pub fn policy_allowed(cfg: &MeasureConfig) -> Result<(), MeasureError> {
    if !matches!(cfg.policy, Policy::Fifo | Policy::Rr) {
        return Ok(());
    }
    let (policy, priority) = (cfg.policy, cfg.priority);
    std::thread::spawn(move || latlab_sys::thread::set_policy(policy, priority, None))
        .join()
        .unwrap_or(Ok(()))
        .map_err(|e| MeasureError::Setup(explain_policy_error(policy, priority, &e)))
}

/// Check a configuration against the online CPUs. Every problem is one line naming the accepted
/// form; nothing is touched.
pub fn validate(cfg: &MeasureConfig, online: &CpuList) -> Result<(), MeasureError> {
    let bad = |m: String| Err(MeasureError::Invalid(m));
    if cfg.method != Method::Busy && cfg.interval_ns < 1_000 {
        return bad(format!(
            "--interval {}: below the minimum (accepted: 1us or more, e.g. 100us, 1ms)",
            format_duration(cfg.interval_ns)
        ));
    }
    if cfg.policy.is_realtime() && !(1..=99).contains(&cfg.priority) {
        return bad(format!(
            "--priority {}: out of range (accepted: 1..99 for fifo and rr)",
            cfg.priority
        ));
    }
    if let Some(cpus) = &cfg.cpus {
        let list = CpuList::from_cpus(cpus.clone());
        if let Some(why) = list.not_within(online) {
            return bad(format!("--cpus {list}: {why}"));
        }
    } else if cfg.threads == 0 || cfg.threads > 1024 {
        return bad(format!(
            "--threads {}: out of range (accepted: 1..1024)",
            cfg.threads
        ));
    }
    if let Some(w) = cfg.waker_cpu
        && !cfg.method.is_wakeup()
    {
        return bad(format!(
            "--waker-cpu {w}: method {} has no waker thread (accepted: with a thread wake-up \
             method, futex, eventfd, pipe or signal)",
            cfg.method.name()
        ));
    }
    if let Some(w) = cfg.waker_cpu
        && !online.contains(w)
    {
        return bad(format!(
            "--waker-cpu {w}: absent or offline (accepted: online CPUs {online})"
        ));
    }
    if cfg.policy == Policy::Deadline {
        let Some(dl) = cfg.deadline else {
            return bad(
                "policy deadline needs --dl-runtime (accepted: e.g. --dl-runtime 100us \
                 --dl-period 1ms)"
                    .into(),
            );
        };
        if dl.runtime_ns < 1024 || dl.runtime_ns > dl.deadline_ns || dl.deadline_ns > dl.period_ns {
            return bad(format!(
                "--dl-runtime {}, --dl-deadline {}, --dl-period {}: inconsistent deadline \
                 parameters (accepted: 1us <= runtime <= deadline <= period)",
                format_duration(dl.runtime_ns),
                format_duration(dl.deadline_ns),
                format_duration(dl.period_ns)
            ));
        }
        if cfg.cpus.is_some() {
            return bad("SCHED_DEADLINE threads cannot be pinned to single CPUs \
                 (accepted: unpinned threads, -t N, with --policy deadline)"
                .into());
        }
        // A waker runs at the measuring threads' policy, pinned: the kernel refuses that.
        if cfg.method.is_wakeup() {
            return bad(format!(
                "--policy deadline with -m {}: its waker thread is pinned, and SCHED_DEADLINE \
                 threads cannot be (accepted: a timer method with deadline, e.g. -m \
                 clock-nanosleep, or --policy fifo with -m {})",
                cfg.method.name(),
                cfg.method.name()
            ));
        }
    } else if cfg.deadline.is_some() {
        return bad(
            "--dl-runtime/--dl-period need --policy deadline (accepted: --policy deadline \
             --dl-runtime 100us, or neither)"
                .into(),
        );
    }
    if cfg.window_ns < 1_000_000 {
        return bad(format!(
            "--window {}: too short (accepted: 1ms or more)",
            format_duration(cfg.window_ns)
        ));
    }
    if cfg.method != Method::Busy && cfg.window_ns < cfg.interval_ns {
        return bad(format!(
            "--window {}: shorter than --interval {} (accepted: a window of at least one \
             interval, e.g. --window {})",
            format_duration(cfg.window_ns),
            format_duration(cfg.interval_ns),
            format_duration(cfg.interval_ns)
        ));
    }
    if let Some(d) = cfg.duration_ns
        && cfg.method != Method::Busy
        && d < cfg.interval_ns
    {
        return bad(format!(
            "--duration {}: shorter than one interval, {} (accepted: at least one interval)",
            format_duration(d),
            format_duration(cfg.interval_ns)
        ));
    }
    if cfg.loops == Some(0) {
        return bad(
            "--loops 0: no period to measure (accepted: a positive number of periods)".into(),
        );
    }
    if cfg.break_threshold_ns == Some(0) {
        return bad(
            "--break 0: every wake-up takes longer, so the first would end the run (accepted: a \
             duration above 0, e.g. 500us)"
                .into(),
        );
    }
    if cfg.spike_threshold_ns == Some(0) {
        return bad(
            "--spike 0: every wake-up takes longer, so every sample would be kept as a spike \
             (accepted: a duration above 0, e.g. 50us)"
                .into(),
        );
    }
    if cfg.loops.is_some() && cfg.method == Method::Busy {
        return bad("--loops does not apply to --method busy (accepted: --duration)".into());
    }
    if cfg.relative && cfg.method != Method::ClockNanosleep && !cfg.method.always_relative() {
        return bad(format!(
            "--relative does not apply to method {} (accepted: clock-nanosleep)",
            cfg.method.name()
        ));
    }
    Ok(())
}

/// One thread's closed window with its histogram, for consumers that keep windows (the
/// monitoring daemon). Windows a stall covered come with an empty histogram.
#[derive(Debug, Clone)]
pub struct ClosedWindow {
    pub thread: u32,
    pub cpu: Option<u32>,
    pub index: u64,
    /// From the start of measuring.
    pub start_ns: u64,
    pub histogram: Histogram,
    pub missed: u64,
    /// Spikes of this window (within the run's spike limit).
    pub spikes: Vec<Spike>,
}

/// Run one measurement. `observer` sees a [`Live`] snapshot as measuring starts, then once per
/// window.
pub fn run(
    cfg: &MeasureConfig,
    sys: &Sys,
    stop: Arc<StopSignal>,
    observer: &mut dyn FnMut(&Live),
) -> Result<RunResult, MeasureError> {
    run_with_windows(cfg, sys, stop, observer, None)
}

/// [`run`], also handing every closed window with its histogram to `windows` as soon as the
/// coordinator has it (for long runs that store windows as they close).
pub fn run_with_windows(
    cfg: &MeasureConfig,
    sys: &Sys,
    stop: Arc<StopSignal>,
    observer: &mut dyn FnMut(&Live),
    windows: Option<&mut dyn FnMut(Vec<ClosedWindow>)>,
) -> Result<RunResult, MeasureError> {
    run_hooked(cfg, sys, stop, observer, windows, None, None)
}

#[cfg(test)]
mod tests;
