//! `rt-hog`: N threads spinning at a real-time policy (SCHED_RR or SCHED_FIFO) and priority —
//! what a misbehaving real-time application does to everything of lower priority.
//!
//! Guarded so it cannot lock the machine:
//! - it refuses to start when RT throttling is disabled (`sched_rt_runtime_us` = -1, read
//!   through the system root) unless forced;
//! - a watchdog stops the hogs when normal-priority work stops getting CPU: one SCHED_OTHER
//!   heartbeat thread per hogged CPU writes the time every 10 ms, and a watchdog thread at a
//!   real-time priority above the hogs checks the heartbeats; one older than the bound (default
//!   2 s) stops the hogs and leaves a warning in the report.

use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::{OptDefault, OptKind, OptionDesc};
use crate::{Ctx, Finished, LoadOptions, LoadSpec, Running};
use latlab_model::Policy;
use latlab_model::system::RtThrottling;
use latlab_model::units::format_duration;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The highest hog priority: the watchdog runs one above.
const MAX_PRIORITY: u64 = 98;

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "rt-hog",
    description: "busy threads at a real-time policy and priority (starves lower priorities; \
                  refuses to run without RT throttling unless forced; a watchdog stops it)",
    options: &[
        OptionDesc {
            name: "threads",
            kind: OptKind::Count { min: 1, max: 256 },
            default: OptDefault::OnePerCpu,
            help: "busy threads, pinned to the CPUs in turn",
        },
        OptionDesc {
            name: "policy",
            kind: OptKind::Choice(&["rr", "fifo"]),
            default: OptDefault::Value("rr"),
            help: "SCHED_RR or SCHED_FIFO",
        },
        OptionDesc {
            name: "priority",
            kind: OptKind::Count {
                min: 1,
                max: MAX_PRIORITY,
            },
            default: OptDefault::Value("1"),
            help: "real-time priority (the watchdog takes one above)",
        },
        OptionDesc {
            name: "watchdog",
            kind: OptKind::Duration {
                min: 100_000_000,
                max: 60_000_000_000,
            },
            default: OptDefault::Value("2s"),
            help: "stop the hogs when a normal-priority thread got no CPU this long",
        },
    ],
    throughput: &[("busy-loop iterations", "ops/s")],
    takes_command: false,
    validate: None,
    realtime: Some(realtime),
    supported,
    start,
};

/// Where the kernel keeps the RT throttling budget (-1: throttling disabled).
pub const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
pub const RT_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";

fn policy_of(spec: &LoadSpec) -> libc::c_int {
    match spec.choice("policy") {
        Some("fifo") => libc::SCHED_FIFO,
        _ => libc::SCHED_RR,
    }
}

fn priority_of(spec: &LoadSpec) -> i32 {
    spec.count("priority")
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(1)
}

/// The watchdog's priority: one above the hogs.
fn watchdog_priority(hogs: i32) -> i32 {
    (hogs + 1).min(99)
}

/// The highest priority of the load's threads: the watchdog's.
fn realtime(spec: &LoadSpec) -> i32 {
    watchdog_priority(priority_of(spec))
}

/// The hogs' priority, whether they take turns (SCHED_RR) and the CPUs they keep busy.
pub(crate) fn busy(spec: &LoadSpec, cpus: &[u32]) -> (u32, bool, Vec<u32>) {
    let used = hogged(spec.workers("threads", cpus.len()), cpus);
    let round_robin = policy_of(spec) == libc::SCHED_RR;
    (
        u32::try_from(priority_of(spec)).unwrap_or(0),
        round_robin,
        used,
    )
}

/// The CPUs `threads` hogs take: the first of `cpus`, one each.
fn hogged(threads: usize, cpus: &[u32]) -> Vec<u32> {
    let mut used: Vec<u32> = cpus.iter().copied().take(threads).collect();
    used.sort_unstable();
    used.dedup();
    used
}

/// Why the hogs' (or the watchdog's) real-time policy was refused, as measuring explains it.
fn privilege_hint(policy: libc::c_int, priority: i32, e: &std::io::Error) -> String {
    let policy = if policy == libc::SCHED_FIFO {
        Policy::Fifo
    } else {
        Policy::Rr
    };
    let priority = u32::try_from(priority).unwrap_or(0);
    latlab_sys::thread::explain_policy_refusal(policy, priority, e, "leave out the rt-hog load")
}

fn supported(spec: &LoadSpec, opts: &LoadOptions) -> Result<(), String> {
    let read = |path: &str| -> Result<i64, String> {
        let text = opts.sys.read_trim(path).map_err(|e| e.to_string())?;
        text.parse()
            .map_err(|_| format!("{path}: {text:?} is not a number"))
    };
    // -1 is off whatever the period; otherwise the period decides.
    let period = |runtime: i64| if runtime < 0 { Ok(0) } else { read(RT_PERIOD) };
    match read(RT_RUNTIME).and_then(|runtime| Ok((runtime, period(runtime)?))) {
        Ok((runtime, period)) if RtThrottling::off(runtime, period) && !opts.force => {
            let why = if runtime < 0 {
                format!("sched_rt_runtime_us is {runtime}")
            } else {
                format!("sched_rt_runtime_us {runtime} is not below sched_rt_period_us {period}")
            };
            return Err(format!(
                "RT throttling is disabled ({why}), so busy real-time threads could starve \
                 everything else and lock the machine; enable it (write 950000 to {RT_RUNTIME}) \
                 or pass --force"
            ));
        }
        Err(e) if !opts.force => {
            return Err(format!(
                "cannot tell whether RT throttling is on ({e}); pass --force to run anyway"
            ));
        }
        _ => {}
    }
    // Try the policy on a throw-away thread: this covers root, CAP_SYS_NICE, RLIMIT_RTPRIO and
    // cgroup limits alike.
    let policy = policy_of(spec);
    let priority = priority_of(spec);
    let probe = std::thread::Builder::new()
        .name("ll-rt-probe".into())
        .spawn(move || latlab_sys::thread::set_scheduler(policy, priority))
        .map_err(|e| format!("starting a probe thread: {e}"))?;
    match probe.join() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(privilege_hint(policy, priority, &e)),
        Err(_) => Err("the probe thread panicked".into()),
    }
}

/// How the hogs and the watchdog run (the test hooks live here too).
#[derive(Debug, Clone)]
pub(crate) struct HogConfig {
    pub threads: usize,
    pub policy: libc::c_int,
    pub priority: i32,
    pub bound: Duration,
    /// Test hook: while set, the heartbeat threads stop writing the time (as if starved).
    pub pause_heartbeat: Arc<AtomicBool>,
}

struct Hog {
    policy: libc::c_int,
    priority: i32,
    tids: Tids,
}

/// The hogs' thread ids, for putting them to SCHED_OTHER when they are to stop.
type Tids = Arc<Mutex<Vec<i32>>>;

/// Stop the hogs: the flag, and each hog put to SCHED_OTHER. Hogs of one real-time priority
/// on one CPU take turns of a round-robin slice (100 ms), so the last of ten would see the flag
/// a second late; at SCHED_OTHER they share the CPU in slices of milliseconds.
fn stop_hogs(flag: &AtomicBool, tids: &Tids) {
    flag.store(true, Ordering::Relaxed);
    if let Ok(tids) = tids.lock() {
        for &tid in tids.iter() {
            // A hog that has ended already is not there to demote.
            let _ = latlab_sys::thread::set_task_policy(tid, latlab_model::Policy::Other, 0, None);
        }
    }
}

impl Worker for Hog {
    fn setup(&mut self) -> Result<(), String> {
        latlab_sys::thread::set_scheduler(self.policy, self.priority)
            .map_err(|e| privilege_hint(self.policy, self.priority, &e))?;
        if let Ok(mut tids) = self.tids.lock() {
            tids.push(latlab_sys::thread::gettid());
        }
        Ok(())
    }

    fn pins_after_ready(&self) -> bool {
        true
    }

    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let mut loops = 0u64;
        let mut x = 1u64;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..1024 {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
            loops += 1024;
        }
        vec![loops]
    }
}

pub(crate) struct RtHog {
    pool: Option<Pool>,
    hogs_stop: Arc<AtomicBool>,
    tids: Tids,
    guards_stop: Arc<AtomicBool>,
    guards: Vec<JoinHandle<()>>,
    fired: Arc<Mutex<Option<String>>>,
}

impl RtHog {
    /// Start the heartbeats and the watchdog, then the hogs.
    pub(crate) fn start(cfg: &HogConfig, cpus: &[u32]) -> Result<RtHog, String> {
        let hogs_stop = Arc::new(AtomicBool::new(false));
        let mut hog = RtHog {
            pool: None,
            hogs_stop: hogs_stop.clone(),
            tids: Tids::default(),
            guards_stop: Arc::new(AtomicBool::new(false)),
            guards: Vec::new(),
            fired: Arc::new(Mutex::new(None)),
        };
        // The CPUs the hogs will take.
        let used = hogged(cfg.threads, cpus);
        let epoch = Instant::now();
        let since = move || u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let beats: Arc<Vec<AtomicU64>> = Arc::new(used.iter().map(|_| AtomicU64::new(0)).collect());
        for (i, &cpu) in used.iter().enumerate() {
            let (beats, stop, pause) = (
                beats.clone(),
                hog.guards_stop.clone(),
                cfg.pause_heartbeat.clone(),
            );
            let h = std::thread::Builder::new()
                .name(format!("ll-rt-beat-{cpu}").chars().take(15).collect())
                .spawn(move || {
                    let _ = latlab_sys::thread::set_affinity(&[cpu]);
                    let _ = latlab_sys::thread::set_scheduler(libc::SCHED_OTHER, 0);
                    while !stop.load(Ordering::Relaxed) {
                        if !pause.load(Ordering::Relaxed) {
                            beats[i].store(since(), Ordering::Relaxed);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                })
                .map_err(|e| format!("starting a heartbeat thread: {e}"))?;
            hog.guards.push(h);
        }

        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let bound = cfg.bound;
        let period = (bound / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let hogs_are_rt = cfg.policy != libc::SCHED_OTHER;
        let watchdog_priority = watchdog_priority(cfg.priority);
        let (stop, fired, hogs, watched, tids) = (
            hog.guards_stop.clone(),
            hog.fired.clone(),
            hogs_stop.clone(),
            used.clone(),
            hog.tids.clone(),
        );
        let h = std::thread::Builder::new()
            .name("ll-rt-watchdog".into())
            .spawn(move || {
                let _ = latlab_sys::thread::set_affinity(&watched);
                let rt = latlab_sys::thread::set_scheduler(libc::SCHED_FIFO, watchdog_priority);
                let ready = match rt {
                    Err(e) if hogs_are_rt => Err(format!(
                        "the watchdog: {}",
                        privilege_hint(libc::SCHED_FIFO, watchdog_priority, &e)
                    )),
                    _ => Ok(()),
                };
                let failed = ready.is_err();
                let _ = ready_tx.send(ready);
                if failed {
                    return;
                }
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(period);
                    let now = since();
                    let stale = watched.iter().zip(beats.iter()).find_map(|(cpu, b)| {
                        let age = now.saturating_sub(b.load(Ordering::Relaxed));
                        (age > u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX))
                            .then_some((*cpu, age))
                    });
                    if let Some((cpu, age)) = stale {
                        stop_hogs(&hogs, &tids);
                        if let Ok(mut f) = fired.lock() {
                            *f = Some(format!(
                                "watchdog: the normal-priority heartbeat on CPU {cpu} got no CPU \
                                 for {} (bound {}); the hogs were stopped early",
                                format_duration(age / 1_000_000 * 1_000_000),
                                format_duration(
                                    u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX)
                                )
                            ));
                        }
                        break;
                    }
                }
            })
            .map_err(|e| format!("starting the watchdog thread: {e}"))?;
        hog.guards.push(h);
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("the watchdog ended while starting".into()),
        }

        let workers: Vec<Box<dyn Worker>> = (0..cfg.threads)
            .map(|_| {
                Box::new(Hog {
                    policy: cfg.policy,
                    priority: cfg.priority,
                    tids: hog.tids.clone(),
                }) as Box<dyn Worker>
            })
            .collect();
        hog.pool = Some(Pool::start("rt", cpus, workers, hogs_stop)?);
        Ok(hog)
    }

    /// Whether the watchdog stopped the hogs.
    #[cfg(test)]
    pub(crate) fn watchdog_fired(&self) -> bool {
        self.fired.lock().map(|f| f.is_some()).unwrap_or(false)
    }

    /// Stop the hogs, then the heartbeats and the watchdog.
    fn stop_guards(&mut self) {
        self.guards_stop.store(true, Ordering::Relaxed);
        for h in self.guards.drain(..) {
            let _ = h.join();
        }
    }
}

impl Running for RtHog {
    fn request_stop(&self) {
        stop_hogs(&self.hogs_stop, &self.tids);
    }

    fn finish(mut self: Box<Self>) -> Finished {
        let end = self.pool.take().map(Pool::join).unwrap_or_default();
        self.stop_guards();
        let mut f = super::finished(end, &[("busy-loop iterations", "ops/s", 1.0)]);
        if let Some(w) = self.fired.lock().ok().and_then(|mut f| f.take()) {
            f.warnings.push(w);
        }
        f
    }
}

impl Drop for RtHog {
    fn drop(&mut self) {
        self.hogs_stop.store(true, Ordering::Relaxed);
        drop(self.pool.take());
        self.stop_guards();
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let cfg = HogConfig {
        threads: spec.workers("threads", ctx.cpus.len()),
        policy: policy_of(spec),
        priority: priority_of(spec),
        bound: Duration::from_nanos(spec.duration_ns("watchdog").unwrap_or(2_000_000_000)),
        pause_heartbeat: Arc::new(AtomicBool::new(false)),
    };
    Ok(Box::new(RtHog::start(&cfg, ctx.cpus)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The two tests share one CPU: run them one at a time, so neither test's hogs starve the
    /// other's threads.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// One CPU for the hogs: the last online one.
    fn one_cpu() -> Vec<u32> {
        let online = latlab_sys::Sys::default().online_cpus().unwrap();
        vec![*online.cpus().last().unwrap()]
    }

    /// As root the hogs run SCHED_RR priority 1 (on one CPU, briefly); otherwise SCHED_OTHER.
    fn config(bound: Duration, pause: bool) -> HogConfig {
        let (policy, priority) = if latlab_testkit::is_root() {
            (libc::SCHED_RR, 1)
        } else {
            eprintln!("not root: hogs at SCHED_OTHER, the watchdog logic is the same");
            (libc::SCHED_OTHER, 0)
        };
        HogConfig {
            threads: 1,
            policy,
            priority,
            bound,
            pause_heartbeat: Arc::new(AtomicBool::new(pause)),
        }
    }

    /// A refused policy is explained as measuring explains it (the cgroup's budget or the
    /// capability), with the way round it that fits a load.
    #[test]
    fn a_refused_policy_names_the_policy_and_the_way_round_it() {
        let e = std::io::Error::from_raw_os_error(libc::EPERM);
        let why = privilege_hint(libc::SCHED_RR, 7, &e);
        assert!(why.starts_with("cannot use SCHED_RR priority 7: "), "{why}");
        assert!(why.ends_with("or leave out the rt-hog load"), "{why}");
        assert!(!why.contains("--policy"), "{why}");
    }

    /// Asked to stop, every hog is put to SCHED_OTHER at once: real-time hogs of one priority
    /// on one CPU would otherwise see the flag one round-robin slice after another.
    #[test]
    fn hogs_asked_to_stop_leave_their_real_time_policy() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let mut cfg = config(Duration::from_secs(2), false);
        cfg.threads = 3;
        let hog = Box::new(RtHog::start(&cfg, &one_cpu()).unwrap());
        let tids = hog.tids.lock().unwrap().clone();
        assert_eq!(tids.len(), 3);
        // SAFETY: plain system call on a thread id of this process.
        let policy = |tid: i32| unsafe { libc::sched_getscheduler(tid) };
        for &t in &tids {
            assert_eq!(policy(t), cfg.policy, "hog {t} before the stop");
        }
        hog.request_stop();
        for &t in &tids {
            // At SCHED_OTHER, or ended already (-1: no such thread).
            let p = policy(t);
            assert!(p == libc::SCHED_OTHER || p == -1, "hog {t}: policy {p}");
        }
        hog.finish();
    }

    #[test]
    fn watchdog_stops_the_hogs_when_the_heartbeat_starves() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let cfg = config(Duration::from_millis(150), true);
        let t0 = Instant::now();
        let hog = Box::new(RtHog::start(&cfg, &one_cpu()).unwrap());
        while !hog.watchdog_fired() && t0.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let fired_after = t0.elapsed();
        assert!(hog.watchdog_fired(), "the watchdog did not fire");
        assert!(
            fired_after >= Duration::from_millis(150),
            "fired after {fired_after:?}, before the bound"
        );
        // The hogs stopped on their own: the stop flag is the watchdog's.
        assert!(hog.hogs_stop.load(Ordering::Relaxed));
        let f = hog.finish();
        assert_eq!(f.warnings.len(), 1, "{:?}", f.warnings);
        assert!(f.warnings[0].starts_with("watchdog:"), "{}", f.warnings[0]);
        assert!(f.warnings[0].contains("bound 150ms"), "{}", f.warnings[0]);
        assert!(f.throughput[0].total > 0.0);
        // They stopped about when the watchdog fired, not when finish was called.
        assert!(f.elapsed < Duration::from_secs(3));
    }

    #[test]
    fn watchdog_stays_quiet_while_the_heartbeat_beats() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let cfg = config(Duration::from_millis(1500), false);
        let hog = Box::new(RtHog::start(&cfg, &one_cpu()).unwrap());
        std::thread::sleep(Duration::from_millis(400));
        assert!(!hog.watchdog_fired());
        let f = hog.finish();
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
        assert!(f.throughput[0].rate > 0.0);
    }
}
