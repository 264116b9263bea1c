//! The engine behind [`run_hooked`]: it plans who runs where, spawns the measuring threads (and
//! their wakers) and holds them at a start barrier until every one has set itself up, coordinates
//! the run from off the measured CPUs, draining one window buffer per thread and window, and
//! assembles the [`RunResult`] once every thread has ended.
//!
//! It lives apart from the crate's public types so that each phase of a run (spawn, coordinate,
//! assemble) is a function of its own, short enough to read whole; small structs carry the state
//! from one phase to the next.

use crate::thread::{
    self, AbsSleep, Ctx, NanoSleep, Poll, PosixTimer, RelSleep, Select, TimerFd, WakeSlot,
};
use crate::window::{POOL, WindowBuf, WindowSink};
use crate::{
    ClosedWindow, Live, LiveThread, MeasureError, SpikeHook, StopSignal, explain_policy_error, os,
    validate,
};
use latlab_hist::Histogram;
use latlab_model::units::CpuList;
use latlab_model::{
    MeasureConfig, Method, Policy, RunEnvironment, RunHead, RunResult, Spike, Spikes, Stats,
    StopReason, ThreadResult, Window, rfc3339_utc,
};
use latlab_sys::Sys;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Duration;

/// Stack size of measuring and waker threads: small, so locked memory stays small.
const THREAD_STACK: usize = 256 * 1024;

/// The last period a thread measures, `u64::MAX` when unbounded.
pub(crate) fn last_period(cfg: &MeasureConfig) -> u64 {
    let by_time = cfg
        .duration_ns
        .map(|d| d / cfg.interval_ns.max(1))
        .unwrap_or(u64::MAX);
    by_time.min(cfg.loops.unwrap_or(u64::MAX))
}

/// Where one measuring thread and its waker run.
pub(crate) struct Plan {
    pub(crate) label: String,
    pub(crate) cpu: Option<u32>,
    pub(crate) affinity: Vec<u32>,
    pub(crate) waker_affinity: Vec<u32>,
}

/// Who runs where: measuring threads, their wakers, and the coordinator's CPUs.
pub(crate) fn plan_threads(cfg: &MeasureConfig, online: &CpuList) -> (Vec<Plan>, Vec<u32>) {
    let all = online.cpus().to_vec();
    let free = online.except(cfg.cpus.as_deref().unwrap_or_default());
    let waker_for = |cpu: Option<u32>| -> Vec<u32> {
        if let Some(w) = cfg.waker_cpu {
            return vec![w];
        }
        match (free.first(), cpu) {
            (Some(&f), _) => vec![f],
            (None, Some(c)) => {
                // Every CPU is measured: wake from the next CPU, so every wake crosses CPUs.
                let i = all.iter().position(|&x| x == c).unwrap_or(0);
                vec![all[(i + 1) % all.len()]]
            }
            (None, None) => all.clone(),
        }
    };
    let plans = match &cfg.cpus {
        Some(cpus) => cpus
            .iter()
            .map(|&c| Plan {
                label: latlab_model::thread_label(Some(c), 0),
                cpu: Some(c),
                affinity: vec![c],
                waker_affinity: waker_for(Some(c)),
            })
            .collect(),
        None => (0..cfg.threads)
            .map(|i| Plan {
                label: latlab_model::thread_label(None, i as usize),
                cpu: None,
                affinity: all.clone(),
                waker_affinity: waker_for(None),
            })
            .collect(),
    };
    (plans, free)
}

/// The waker CPU a run used: the one asked for, or the one every waker ran on by default;
/// `None` where each waker ran on a CPU of its own (every CPU measured: the next one).
fn waker_used(cfg: &MeasureConfig, plans: &[Plan]) -> Option<u32> {
    if !cfg.method.is_wakeup() || cfg.waker_cpu.is_some() {
        return cfg.waker_cpu;
    }
    match plans.first()?.waker_affinity.as_slice() {
        &[w] if plans.iter().all(|p| p.waker_affinity == [w]) => Some(w),
        _ => None,
    }
}

/// A timer method's loop, prepared in the measuring thread before the start barrier.
type TimerRun = Box<dyn FnMut(&Ctx, &mut WindowSink) -> std::io::Result<()>>;

/// Set up the calling thread: affinity, timer slack, policy.
fn setup_thread(cfg: &MeasureConfig, affinity: &[u32]) -> Result<(), String> {
    latlab_sys::thread::set_affinity(affinity).map_err(|e| {
        let list = CpuList::from_cpus(affinity.to_vec());
        match latlab_sys::thread::process_affinity() {
            // None of them is one this process may run on: said with the ones it may.
            Ok(allowed) if e.raw_os_error() == Some(libc::EINVAL) => format!(
                "cannot pin to {}: this process may run only on {} (this machine's, within its \
                 affinity; a tree under --sysroot may list CPUs this machine lacks)",
                list.named(),
                CpuList::from_cpus(allowed).named()
            ),
            _ => format!("cannot pin to {}: {e}", list.named()),
        }
    })?;
    os::set_timer_slack(cfg.timer_slack_ns).map_err(|e| format!("cannot set timer slack: {e}"))?;
    latlab_sys::thread::set_policy(cfg.policy, cfg.priority, cfg.deadline)
        .map_err(|e| explain_policy_error(cfg.policy, cfg.priority, &e))
}

/// Prepare the wait of a timer method in the measuring thread (before the start barrier).
fn timer_waiter(cfg: &MeasureConfig, clock: libc::clockid_t) -> Result<TimerRun, String> {
    fn boxed<W: thread::Waiter + 'static>(mut w: W) -> TimerRun {
        Box::new(move |ctx, sink| thread::timer_loop(&mut w, ctx, sink))
    }
    Ok(match cfg.method {
        Method::ClockNanosleep if cfg.relative => boxed(RelSleep(clock)),
        Method::ClockNanosleep => boxed(AbsSleep(clock)),
        Method::Nanosleep => boxed(NanoSleep),
        Method::Poll => boxed(Poll),
        Method::Select => boxed(Select),
        Method::Busy => Box::new(thread::busy_loop),
        Method::Timerfd => boxed(TimerFd::new(clock).map_err(|e| format!("timerfd_create: {e}"))?),
        Method::PosixTimer => {
            boxed(PosixTimer::new(clock).map_err(|e| format!("timer_create: {e}"))?)
        }
        Method::Futex | Method::Eventfd | Method::Pipe | Method::Signal => {
            return Err("internal: a wake-up method has no timer waiter".into());
        }
    })
}

struct ThreadEnd {
    tid: i32,
    cpu_time_ns: u64,
    /// When it stopped measuring (0: it never started): the run's end is the last of these,
    /// not when the coordinator got to run (under a real-time load that can be much later).
    ended_ns: u64,
    /// A failure after the start (a timer that could not be armed).
    error: Option<String>,
}

/// Per-thread accumulation in the coordinator.
struct Acc {
    total: Histogram,
    /// The samples missed periods would have produced; added to `total` once, at the end.
    omitted: Histogram,
    windows: Vec<Window>,
    next_window: u64,
    missed: u64,
    /// Missed periods of a stall still to be counted in the windows they were due in.
    missed_carried: u64,
    /// When the maximum (`total.max()`) happened, ns after the run's start.
    max_at: u64,
    last_window_max: u64,
}

struct Collector {
    /// Closed windows with histograms, handed out after each drain (only when asked for).
    /// Handed-out windows (and their spikes) are not also kept in the result: a run that lasts
    /// months would otherwise grow by every window and spike it ever had.
    keep_windows: bool,
    closed: Vec<ClosedWindow>,
    interval: u64,
    window: u64,
    spike_limit: u64,
    accs: Vec<Acc>,
    plans_cpu: Vec<Option<u32>>,
    spikes: Vec<Spike>,
    spikes_not_kept: u64,
}

impl Collector {
    /// Empty totals for every planned thread; `keep_windows` also keeps each closed window with
    /// its histogram for the windows sink.
    fn new(cfg: &MeasureConfig, plans: &[Plan], keep_windows: bool) -> Collector {
        Collector {
            keep_windows,
            closed: Vec::new(),
            interval: cfg.interval_ns,
            window: cfg.window_ns,
            spike_limit: u64::from(cfg.spike_limit),
            accs: (0..plans.len())
                .map(|_| Acc {
                    total: Histogram::new(),
                    omitted: Histogram::new(),
                    windows: Vec::new(),
                    next_window: 0,
                    missed: 0,
                    missed_carried: 0,
                    max_at: 0,
                    last_window_max: 0,
                })
                .collect(),
            plans_cpu: plans.iter().map(|p| p.cpu).collect(),
            spikes: Vec::new(),
            spikes_not_kept: 0,
        }
    }

    /// Periods whose deadlines fall in window `index` (windows count from the thread's start).
    fn periods_in(&self, index: u64) -> u64 {
        match self.interval {
            0 => 0,
            i => ((index + 1) * self.window) / i - (index * self.window) / i,
        }
    }

    /// Fold a closed window into its thread's totals; leaves the buffer's histogram empty.
    fn take(&mut self, buf: &mut WindowBuf) {
        let t = buf.thread as usize;
        for index in self.accs[t].next_window..buf.index {
            // Windows in which no period ended (a stall covered them): the stall's missed
            // periods that were due in them.
            let missed = self.accs[t].missed_carried.min(self.periods_in(index));
            let acc = &mut self.accs[t];
            acc.missed_carried -= missed;
            acc.missed += missed;
            if self.keep_windows {
                self.closed.push(ClosedWindow {
                    thread: buf.thread,
                    cpu: self.plans_cpu[buf.thread as usize],
                    index,
                    start_ns: index * self.window,
                    histogram: Histogram::new(),
                    missed,
                    spikes: Vec::new(),
                });
            } else {
                acc.windows.push(Window {
                    index,
                    start_ns: index * self.window,
                    count: 0,
                    min: 0,
                    max: 0,
                    p99: 0,
                    missed,
                });
            }
        }
        let acc = &mut self.accs[t];
        // What is left of an earlier stall was due in this window, before the thread ran again.
        buf.missed += std::mem::take(&mut acc.missed_carried);
        acc.missed_carried = buf.missed_beyond;
        let h = &mut buf.hist;
        let (count, min, max) = (h.count(), h.min(), h.max());
        if buf.stalls_overflowed {
            // Too many stalls to list: derive the missed samples from the buckets.
            for b in h.buckets() {
                if b.low > self.interval {
                    let m = (b.low - 1) / self.interval;
                    acc.omitted
                        .record_series(b.low - self.interval, self.interval, m, b.count);
                }
            }
        } else {
            for s in &buf.stalls {
                acc.omitted
                    .record_series(s.latency - self.interval, self.interval, s.missed, 1);
            }
        }
        if count > 0 && (acc.total.is_empty() || max > acc.total.max()) {
            acc.max_at = buf.max_at;
        }
        let kept = self.keep_windows.then(|| h.clone());
        // Merge into the total, take the window's p99, clear the buffer.
        let p99 = h.drain_into(&mut acc.total, 99.0);
        if !self.keep_windows {
            acc.windows.push(Window {
                index: buf.index,
                start_ns: buf.index * self.window,
                count,
                min,
                max,
                p99,
                missed: buf.missed,
            });
        }
        // A buffer that covered several windows stands for all of them.
        acc.next_window = acc.next_window.max(buf.index + buf.span);
        acc.missed += buf.missed;
        acc.last_window_max = max;
        if buf.spikes_replaced {
            buf.spikes.sort_unstable_by_key(|s| s.at);
        }
        let spikes = buf.spikes.iter().map(|s| Spike {
            thread: buf.thread,
            cpu: self.plans_cpu[buf.thread as usize],
            at_ns: s.at,
            value_ns: s.value,
            story: None,
        });
        self.spikes_not_kept += buf.spikes_dropped;
        match kept {
            // Handed out with their window's spikes; the run keeps neither.
            Some(histogram) => self.closed.push(ClosedWindow {
                thread: buf.thread,
                cpu: self.plans_cpu[buf.thread as usize],
                index: buf.index,
                start_ns: buf.index * self.window,
                histogram,
                missed: buf.missed,
                spikes: spikes.collect(),
            }),
            None => {
                self.spikes.extend(spikes);
                // Past twice the limit, the largest `spike_limit` stay (amortized: each spike
                // is looked at a few times at most).
                if self.spikes.len() as u64 > self.spike_limit.saturating_mul(2).max(1) {
                    self.keep_largest_spikes();
                }
            }
        }
    }

    /// Keep the largest `spike_limit` spikes, in the order of time, and count the others: a
    /// run with more spikes than its limit keeps its worst ones, never only its first.
    fn keep_largest_spikes(&mut self) {
        let limit = usize::try_from(self.spike_limit).unwrap_or(usize::MAX);
        if self.spikes.len() <= limit {
            return;
        }
        if limit > 0 {
            self.spikes
                .select_nth_unstable_by(limit - 1, |a, b| b.value_ns.cmp(&a.value_ns));
        }
        self.spikes_not_kept += (self.spikes.len() - limit) as u64;
        self.spikes.truncate(limit);
        self.spikes.sort_unstable_by_key(|s| (s.at_ns, s.thread));
    }

    fn live(&self, labels: &[String], elapsed_ns: u64) -> Live {
        Live {
            elapsed_ns,
            threads: self
                .accs
                .iter()
                .zip(labels)
                .map(|(a, l)| LiveThread {
                    label: l.clone(),
                    count: a.total.count(),
                    missed: a.missed,
                    min: a.total.min(),
                    mean: a.total.mean(),
                    max: a.total.max(),
                    window_max: a.last_window_max,
                })
                .collect(),
            setup_warnings: Vec::new(),
        }
    }
}

/// The run as every phase sees it.
struct Job<'a> {
    cfg: &'a MeasureConfig,
    clock: libc::clockid_t,
    plans: Vec<Plan>,
    /// The last period a thread measures ([`last_period`]).
    last: u64,
    stop: Arc<StopSignal>,
}

/// What every spawned thread gets a clone of: the start gate and (measuring threads) the channel
/// of full buffers.
struct Shared {
    gate: Gate,
    full_tx: SyncSender<Box<WindowBuf>>,
}

/// The way every spawned thread goes to the start: the channel of set-up reports, the start
/// barrier, the abort flag and the start the coordinator fills in.
#[derive(Clone)]
struct Gate {
    ready_tx: Sender<Result<(), String>>,
    barrier: Arc<Barrier>,
    abort: Arc<AtomicBool>,
    start_at: Arc<AtomicU64>,
}

impl Gate {
    /// Report how the thread's set-up went, wait at the barrier with every other thread, and
    /// return the start instant, or `None` when the run was aborted (some set-up failed). The
    /// report channel is dropped before the wait: the coordinator reads it until every thread
    /// has reported.
    fn pass(self, setup: Result<(), String>) -> Option<u64> {
        let _ = self.ready_tx.send(setup);
        drop(self.ready_tx);
        self.barrier.wait();
        if self.abort.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.start_at.load(Ordering::Relaxed))
    }
}

/// Every thread started and set up, waiting at the start barrier.
struct Spawned {
    handles: Vec<JoinHandle<ThreadEnd>>,
    waker_handles: Vec<JoinHandle<()>>,
    barrier: Arc<Barrier>,
    /// Set before the barrier opens: the threads end without measuring.
    abort: Arc<AtomicBool>,
    start_at: Arc<AtomicU64>,
    /// Full window buffers from every measuring thread.
    full_rx: Receiver<Box<WindowBuf>>,
    /// Per measuring thread, the way its drained buffers go back.
    empties: Vec<SyncSender<Box<WindowBuf>>>,
}

/// When measuring starts: on the run's clock, and as Unix time.
struct Start {
    mono: u64,
    unix_ns: u64,
}

/// What starts beside the measurement once its threads are set up and its memory locked, just
/// before they are let go (loads: their memory is not the measurement's to lock, and faulting
/// in thousands of load threads' stacks took half a minute). An error ends the run before it
/// measures anything.
pub type BeforeRelease<'a> = &'a mut dyn FnMut() -> Result<(), String>;

/// [`run_with_windows`](crate::run_with_windows), also telling `hook` of every spike as it
/// happens, and running `before_release` between the set-up and the start.
pub fn run_hooked(
    cfg: &MeasureConfig,
    sys: &Sys,
    stop: Arc<StopSignal>,
    observer: &mut dyn FnMut(&Live),
    windows: Option<&mut dyn FnMut(Vec<ClosedWindow>)>,
    hook: Option<Arc<dyn SpikeHook>>,
    before_release: Option<BeforeRelease<'_>>,
) -> Result<RunResult, MeasureError> {
    let online = sys
        .online_cpus()
        .map_err(|e| MeasureError::Setup(format!("cannot read the online CPUs: {e}")))?;
    validate(cfg, &online)?;
    let clock = os::clock_id(cfg.clock);
    os::block_signals(&[os::timer_signal(), os::wake_signal()]);

    let mut env = RunEnvironment {
        euid: os::euid(),
        ..Default::default()
    };
    // Read before ours is held: a request of another process is part of what is measured.
    env.warnings.extend(sys.foreign_dma_latency(cfg.pm_qos_us));
    let _pm_qos = match cfg.pm_qos_us {
        Some(us) => {
            let hold = sys.hold_pm_qos(us).map_err(|e| {
                MeasureError::Setup(format!(
                    "cannot hold PM QoS {us} us: {e}{}",
                    latlab_sys::pm_qos_hint(&e)
                ))
            })?;
            env.pm_qos_held_us = Some(us);
            Some(hold)
        }
        None => None,
    };
    let trace_marker = cfg.break_threshold_ns.and_then(|_| sys.trace_marker());
    if cfg.break_threshold_ns.is_some() && trace_marker.is_none() {
        env.warnings
            .push("tracefs is not mounted: --break will not write a trace marker".into());
    }

    let measured = cfg
        .cpus
        .clone()
        .map_or_else(|| online.clone(), CpuList::from_cpus);
    if let Some(w) = competing(cfg, sys.realtime_threads(&measured)) {
        env.warnings.push(w);
    }

    // Its own threads (wakers, the coordinator) go where this process may run, as the
    // measured CPUs do: a cpuset or taskset leaves the rest of the online CPUs to others.
    let usable = sys.usable_of(online.clone());
    let (plans, free) = plan_threads(cfg, &usable);
    let job = Job {
        cfg,
        clock,
        plans,
        last: last_period(cfg),
        stop,
    };
    let spawned = spawn(&job, trace_marker, hook)?;
    place_coordinator(cfg, &free, &mut env);

    let labels: Vec<String> = job.plans.iter().map(|p| p.label.clone()).collect();
    let mut col = Collector::new(cfg, &job.plans, windows.is_some());
    // Lock memory now that everything the measuring threads touch exists (stacks, buffers,
    // totals). The hot path never allocates, so nothing later needs locking; MCL_FUTURE would
    // only make the coordinator's later allocations fail under a small RLIMIT_MEMLOCK.
    if cfg.mlock {
        match os::lock_memory() {
            Ok(()) => env.memory_locked = true,
            Err(e) => {
                let why = format!("mlockall: {e}");
                env.warnings.push(format!(
                    "memory is not locked ({why}); page faults may add latency"
                ));
                env.mlock_error = Some(why);
            }
        }
    }

    if let Some(before) = before_release
        && let Err(e) = before()
    {
        spawned.abort();
        return Err(MeasureError::Setup(e));
    }
    let start = release(&job, &spawned);
    // The observer hears of the start now, not when the first window closes (minutes later for
    // the monitor), with what the set-up could not do.
    observer(&Live {
        setup_warnings: env.warnings.clone(),
        ..col.live(&labels, 0)
    });
    let ends = coordinate(
        &job, spawned, &mut col, &labels, start.mono, observer, windows,
    );
    if let Some(e) = ends.iter().find_map(|e| e.error.clone()) {
        return Err(MeasureError::Setup(e));
    }
    let end = ends
        .iter()
        .map(|e| e.ended_ns)
        .max()
        .filter(|&e| e > 0)
        .unwrap_or_else(|| os::now(clock));
    let elapsed_ns = end.saturating_sub(start.mono);
    Ok(assemble(
        &job,
        sys,
        env,
        col,
        ends,
        start.unix_ns,
        elapsed_ns,
    ))
}

/// Start every measuring thread and its waker, and wait for each to report its set-up. On a
/// set-up error the threads are let through the barrier without measuring and joined, and the
/// first error is returned.
fn spawn(
    job: &Job,
    trace_marker: Option<PathBuf>,
    hook: Option<Arc<dyn SpikeHook>>,
) -> Result<Spawned, MeasureError> {
    let (cfg, clock, stop, last) = (job.cfg, job.clock, &job.stop, job.last);
    let n = job.plans.len();
    let wakeup = cfg.method.is_wakeup();
    let barrier = Arc::new(Barrier::new(n * (1 + usize::from(wakeup)) + 1));
    let start_at = Arc::new(AtomicU64::new(0));
    let abort = Arc::new(AtomicBool::new(false));
    let (full_tx, full_rx): (SyncSender<Box<WindowBuf>>, Receiver<Box<WindowBuf>>) =
        sync_channel(POOL * n + 1);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let mut empties = Vec::with_capacity(n);
    let mut handles = Vec::new();
    let mut waker_handles = Vec::new();

    if let Ok(mut c) = stop.coordinator.lock() {
        *c = Some(std::thread::current());
    }

    let shared = Shared {
        gate: Gate {
            ready_tx,
            barrier,
            abort,
            start_at,
        },
        full_tx,
    };
    for (i, plan) in job.plans.iter().enumerate() {
        let (empty_tx, empty_rx) = sync_channel::<Box<WindowBuf>>(POOL);
        for _ in 1..POOL {
            let _ = empty_tx.send(Box::new(WindowBuf::new(i as u32)));
        }
        empties.push(empty_tx);
        let first = Box::new(WindowBuf::new(i as u32));
        let slot = if wakeup {
            Some(Arc::new(WakeSlot::new(cfg.method).map_err(|e| {
                MeasureError::Setup(format!("cannot create the wake-up channel: {e}"))
            })?))
        } else {
            None
        };
        // Each thread fills in `start` once the coordinator has chosen it.
        let base = Ctx {
            index: i as u32,
            clock,
            interval: cfg.interval_ns,
            start: 0,
            phase: if cfg.stagger && cfg.method != Method::Busy {
                cfg.interval_ns * i as u64 / n as u64
            } else {
                0
            },
            last_period: last,
            duration: cfg.duration_ns.unwrap_or(u64::MAX),
            window: cfg.window_ns,
            spike: cfg.spike_threshold_ns.unwrap_or(u64::MAX),
            brk: cfg.break_threshold_ns.unwrap_or(u64::MAX),
            stop: stop.clone(),
            trace_marker: trace_marker.clone(),
            label: plan.label.clone(),
            hook: hook.clone(),
        };

        // Each thread is given its real-time policy as it starts, and sets it again itself
        // (refusals are its to report): beside a busy real-time load the coordinator runs above
        // it, and a thread that began at normal priority would wait for the load to set up.
        let h = spawn_measuring(job, plan, &shared, &base, &slot, first, empty_rx)?;
        let _ = latlab_sys::thread::set_thread_policy(&h, cfg.policy, cfg.priority);
        handles.push(h);

        // Its waker, for thread-to-thread methods.
        if let Some(slot) = slot {
            let h = spawn_waker(job, plan, &shared, base, slot)?;
            let _ = latlab_sys::thread::set_thread_policy(&h, cfg.policy, cfg.priority);
            waker_handles.push(h);
        }
    }
    let Shared {
        gate:
            Gate {
                ready_tx,
                barrier,
                abort,
                start_at,
            },
        full_tx,
    } = shared;
    drop(ready_tx);
    drop(full_tx);

    // Every thread reports its set-up before anything is measured.
    let mut setup_error = None;
    for r in ready_rx.iter() {
        if let Err(e) = r {
            setup_error.get_or_insert(e);
        }
    }
    let spawned = Spawned {
        handles,
        waker_handles,
        barrier,
        abort,
        start_at,
        full_rx,
        empties,
    };
    if let Some(e) = setup_error {
        spawned.abort();
        return Err(MeasureError::Setup(e));
    }
    Ok(spawned)
}

impl Spawned {
    /// Let every thread through the barrier without measuring, and join them.
    fn abort(self) {
        self.abort.store(true, Ordering::Relaxed);
        self.barrier.wait();
        for h in self.handles {
            let _ = h.join();
        }
        for h in self.waker_handles {
            let _ = h.join();
        }
    }
}

fn spawn_err(e: std::io::Error) -> MeasureError {
    MeasureError::Setup(format!("cannot start a thread: {e}"))
}

/// Start one measuring thread: it sets itself up, reports, waits at the start barrier and runs
/// its method's loop until the run ends.
fn spawn_measuring(
    job: &Job,
    plan: &Plan,
    shared: &Shared,
    base: &Ctx,
    slot: &Option<Arc<WakeSlot>>,
    first: Box<WindowBuf>,
    empty_rx: Receiver<Box<WindowBuf>>,
) -> Result<JoinHandle<ThreadEnd>, MeasureError> {
    let (cfg, clock, stop) = (job.cfg, job.clock, &job.stop);
    let (gate, full_tx) = (shared.gate.clone(), shared.full_tx.clone());
    let cfg2 = cfg.clone();
    let affinity = plan.affinity.clone();
    let slot = slot.clone();
    let stop2 = stop.clone();
    let base = base.clone();
    std::thread::Builder::new()
        .name(latlab_model::trace::measuring_thread_name(&plan.label))
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let tid = latlab_sys::thread::gettid();
            let mut setup = setup_thread(&cfg2, &affinity);
            if let Some(s) = &slot {
                s.tid.store(tid as u32, Ordering::Relaxed);
            }
            let mut waiting = None;
            if setup.is_ok() && slot.is_none() {
                match timer_waiter(&cfg2, clock) {
                    Ok(w) => waiting = Some(w),
                    Err(e) => setup = Err(e),
                }
            }
            let Some(start) = gate.pass(setup) else {
                return ThreadEnd {
                    tid,
                    cpu_time_ns: 0,
                    ended_ns: 0,
                    error: None,
                };
            };
            let ctx = Ctx { start, ..base };
            let mut sink = WindowSink::new(first, full_tx, empty_rx);
            let mut error = None;
            match (&slot, waiting) {
                (Some(s), _) => thread::wakee_loop(&ctx, s, cfg2.method, &mut sink),
                (None, Some(mut run)) => {
                    if let Err(e) = run(&ctx, &mut sink) {
                        error = Some(format!("{}: cannot arm the timer: {e}", ctx.label));
                        // One thread without samples makes the run meaningless.
                        stop2.request(StopReason::Duration);
                    }
                }
                (None, None) => {}
            }
            let ended_ns = os::now(clock);
            let cpu_time_ns = latlab_sys::thread::cpu_time_ns();
            sink.finish();
            stop2.wake_coordinator();
            ThreadEnd {
                tid,
                cpu_time_ns,
                ended_ns,
                error,
            }
        })
        .map_err(spawn_err)
}

/// Start the waker of a thread-to-thread method's measuring thread: it sets itself up, reports,
/// waits at the start barrier and wakes its thread once per period.
fn spawn_waker(
    job: &Job,
    plan: &Plan,
    shared: &Shared,
    base: Ctx,
    slot: Arc<WakeSlot>,
) -> Result<JoinHandle<()>, MeasureError> {
    let gate = shared.gate.clone();
    let cfg2 = job.cfg.clone();
    let affinity = plan.waker_affinity.clone();
    std::thread::Builder::new()
        .name(format!("latlab-wake-{}", plan.label))
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let setup = setup_thread(&cfg2, &affinity).map_err(|e| format!("waker: {e}"));
            let Some(start) = gate.pass(setup) else {
                slot.finish();
                return;
            };
            let ctx = Ctx { start, ..base };
            thread::waker_loop(&ctx, &slot, cfg2.method);
        })
        .map_err(spawn_err)
}

/// The warning for real-time threads of other processes on the measured CPUs that can hold off
/// the measuring threads (a deadline thread outranks every other; one at or above their priority
/// delays their wake-ups), at most four processes named; `None` when there are none.
fn competing(cfg: &MeasureConfig, mut threads: Vec<latlab_sys::RealtimeThread>) -> Option<String> {
    const NAMED: usize = 4;
    threads.retain(|t| match cfg.policy {
        Policy::Deadline => t.policy == "deadline",
        Policy::Fifo | Policy::Rr => t.policy == "deadline" || t.priority >= cfg.priority,
        _ => true,
    });
    let others = latlab_sys::RealtimeProcess::of(&threads);
    let first = others.first()?;
    let mut list = others
        .iter()
        .skip(1)
        .take(NAMED - 1)
        .fold(first.to_string(), |l, p| format!("{l}; {p}"));
    if others.len() > NAMED {
        list.push_str(&format!("; {} more", others.len() - NAMED));
    }
    Some(format!("{}: {list}", latlab_model::COMPETING_WARNING))
}

/// The coordinator moves off the measured CPUs when any other CPU exists.
fn place_coordinator(cfg: &MeasureConfig, free: &[u32], env: &mut RunEnvironment) {
    if !free.is_empty() && cfg.cpus.is_some() {
        if let Err(e) = latlab_sys::thread::set_affinity(free) {
            env.warnings.push(format!(
                "coordinator could not leave the measured CPUs: {e}"
            ));
        }
    } else {
        env.coordinator_shares_measured_cpus = true;
    }
    env.coordinator_cpus = latlab_sys::thread::affinity().unwrap_or_default();
}

/// Choose the start and let every thread through the start barrier.
fn release(job: &Job, spawned: &Spawned) -> Start {
    let (cfg, clock) = (job.cfg, job.clock);
    // Start 2 ms from now, so every thread is past the barrier and asleep before the first
    // deadline; take the wall clock at the same instant.
    let mono_now = os::now(clock);
    let unix_now = os::now(libc::CLOCK_REALTIME);
    let start = mono_now + 2_000_000;
    let start_unix_ns = if cfg.clock == latlab_model::Clock::Realtime {
        start
    } else {
        unix_now + 2_000_000
    };
    spawned.start_at.store(start, Ordering::Relaxed);
    spawned.barrier.wait();
    Start {
        mono: start,
        unix_ns: start_unix_ns,
    }
}

/// The coordinator's loop: once per window (or when a thread wakes it) drain the full buffers
/// into `col`, send them back empty, show `observer` the live figures and hand the closed windows
/// to `windows`, until every measuring thread has ended; then join every thread.
fn coordinate(
    job: &Job,
    spawned: Spawned,
    col: &mut Collector,
    labels: &[String],
    start: u64,
    observer: &mut dyn FnMut(&Live),
    mut windows: Option<&mut dyn FnMut(Vec<ClosedWindow>)>,
) -> Vec<ThreadEnd> {
    let (cfg, clock) = (job.cfg, job.clock);
    let n = job.plans.len();
    let Spawned {
        handles,
        waker_handles,
        full_rx,
        empties,
        ..
    } = spawned;
    let grace = (cfg.window_ns / 20).min(20_000_000);
    let mut finished = 0;
    // Set when every thread has exited: one more drain, then stop even if a thread died
    // (a panic) without sending its last buffer.
    let mut last_round = false;
    while finished < n {
        if !last_round {
            let t = os::now(clock);
            let elapsed = t.saturating_sub(start);
            let wake_at = start + (elapsed / cfg.window_ns + 1) * cfg.window_ns + grace;
            std::thread::park_timeout(Duration::from_nanos(wake_at.saturating_sub(t)));
        }
        let mut got = false;
        while let Ok(mut buf) = full_rx.try_recv() {
            got = true;
            col.take(&mut buf);
            if buf.last {
                finished += 1;
            } else {
                let thread = buf.thread as usize;
                buf.reset();
                let _ = empties[thread].try_send(buf);
            }
        }
        if got {
            observer(&col.live(labels, os::now(clock).saturating_sub(start)));
            if let Some(sink) = windows.as_mut()
                && !col.closed.is_empty()
            {
                sink(std::mem::take(&mut col.closed));
            }
        }
        if last_round {
            break;
        }
        last_round = handles.iter().all(|h| h.is_finished());
    }
    let ends: Vec<ThreadEnd> = handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or(ThreadEnd {
                tid: 0,
                cpu_time_ns: 0,
                ended_ns: 0,
                error: Some("a measuring thread panicked".into()),
            })
        })
        .collect();
    for h in waker_handles {
        let _ = h.join();
    }
    ends
}

/// Build the result from the collector's totals, the threads' ends and the plans.
fn assemble(
    job: &Job,
    sys: &Sys,
    env: RunEnvironment,
    mut col: Collector,
    ends: Vec<ThreadEnd>,
    start_unix_ns: u64,
    elapsed_ns: u64,
) -> RunResult {
    let (cfg, plans, stop, last) = (job.cfg, &job.plans, &job.stop, job.last);
    col.keep_largest_spikes();
    let stop_reason = stop
        .reason()
        .unwrap_or(if cfg.loops.is_some_and(|l| l <= last) {
            StopReason::Loops
        } else {
            StopReason::Duration
        });
    let bounded = matches!(stop_reason, StopReason::Duration | StopReason::Loops)
        && cfg.method != Method::Busy
        && last != u64::MAX;

    let threads: Vec<ThreadResult> = col
        .accs
        .into_iter()
        .zip(plans.iter())
        .zip(ends)
        .map(|((acc, plan), end)| {
            let mut corrected = acc.total.clone();
            corrected.merge(&acc.omitted);
            ThreadResult {
                label: plan.label.clone(),
                cpu: plan.cpu,
                tid: end.tid,
                missed: acc.missed,
                expected_periods: bounded.then_some(last),
                max_at_ns: acc.max_at,
                stats: Stats::of(&acc.total),
                corrected: Stats::of(&corrected),
                cpu_time_ns: Some(end.cpu_time_ns),
                histogram: acc.total,
                corrected_histogram: corrected,
                windows: acc.windows,
            }
        })
        .collect();
    let head = RunHead {
        id: format!(
            "{}-{}",
            rfc3339_utc(start_unix_ns).replace([':', '-'], ""),
            std::process::id()
        ),
        start_unix_ns,
        elapsed_ns,
        config: MeasureConfig {
            waker_cpu: waker_used(cfg, plans),
            ..cfg.clone()
        },
        system: sys.system_info(),
        environment: RunEnvironment {
            trace_marker: stop.marker(),
            ..env
        },
        stop: stop_reason,
        spikes: Spikes {
            threshold_ns: cfg.spike_threshold_ns,
            kept: col.spikes,
            not_kept: col.spikes_not_kept,
        },
    };
    RunResult::from_threads(head, threads)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The collector keeps a run's largest spikes within the limit, in the order of time, and
    /// counts the rest: not the first ones.
    #[test]
    fn the_collector_keeps_the_largest_spikes_in_time_order() {
        let cfg = MeasureConfig {
            cpus: Some(vec![0]),
            spike_limit: 3,
            window_ns: 1_000_000_000,
            ..Default::default()
        };
        let (plans, _) = plan_threads(&cfg, &CpuList::parse("0").unwrap());
        let mut col = Collector::new(&cfg, &plans, false);
        let mut buf = WindowBuf::new(0);
        for (at, value) in [
            (1, 5),
            (2, 1),
            (3, 9),
            (4, 3),
            (5, 7),
            (6, 2),
            (7, 4),
            (8, 6),
        ] {
            buf.hist.record(value);
            buf.add_spike(at, value);
        }
        col.take(&mut buf);
        col.keep_largest_spikes();
        let kept: Vec<(u64, u64)> = col.spikes.iter().map(|s| (s.at_ns, s.value_ns)).collect();
        assert_eq!(kept, vec![(3, 9), (5, 7), (8, 6)]);
        assert_eq!(col.spikes_not_kept, 5);
    }

    #[test]
    fn a_stall_counts_its_missed_periods_in_the_windows_they_were_due_in() {
        // 1 ms periods, 10 ms windows: a wake-up late by 35.5 ms at period 9 of window 0 covers
        // the 35 periods 10 to 44: 1 more in window 0 (the thread's loop counts it there and
        // 34 beyond), 10 in each of windows 1 to 3, 4 in window 4 before the thread runs again
        // at period 45.
        let cfg = MeasureConfig {
            interval_ns: 1_000_000,
            window_ns: 10_000_000,
            ..Default::default()
        };
        let plan = Plan {
            label: "cpu0".into(),
            cpu: Some(0),
            affinity: vec![0],
            waker_affinity: vec![],
        };
        // Kept in the result (a measurement), or handed out (the monitor).
        let feed = |keep: bool| {
            let mut c = Collector::new(&cfg, std::slice::from_ref(&plan), keep);
            let mut first = WindowBuf::new(0);
            for _ in 0..8 {
                first.hist.record(20_000);
            }
            first.hist.record(35_500_000);
            first.add_stall(35_500_000, 35, 34);
            c.take(&mut first);
            let mut resumed = WindowBuf::new(0);
            resumed.index = 4;
            for _ in 45..=50 {
                resumed.hist.record(20_000);
            }
            c.take(&mut resumed);
            c
        };
        let (c, handed) = (feed(false), feed(true));
        let missed: Vec<(u64, u64, u64)> = c.accs[0]
            .windows
            .iter()
            .map(|w| (w.index, w.count, w.missed))
            .collect();
        assert_eq!(
            missed,
            [(0, 9, 1), (1, 0, 10), (2, 0, 10), (3, 0, 10), (4, 6, 4)]
        );
        assert_eq!(c.accs[0].missed, 35, "the total is the stall's");
        let closed: Vec<u64> = handed.closed.iter().map(|w| w.missed).collect();
        assert_eq!(closed, [1, 10, 10, 10, 4], "the windows the monitor stores");
        assert!(
            handed.accs[0].windows.is_empty(),
            "handed out, not also kept"
        );
        assert!(c.closed.is_empty());
        // Every period of the five windows is a sample or a missed period.
        let periods: u64 = c.accs[0].windows.iter().map(|w| w.count + w.missed).sum();
        assert_eq!(periods, 50);
    }
}
