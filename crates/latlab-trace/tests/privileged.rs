//! The tracer on this kernel: each event family produces samples when the test provokes it,
//! the histograms are consistent, spike stories name what held the CPU, partial runs say what
//! was skipped, and the system is left as it was. Needs root (or CAP_BPF and CAP_PERFMON);
//! without, every test says so and passes.
#![allow(clippy::unwrap_used)]

use latlab_model::trace::{Family, FamilyResult, StoryKind, TraceResult, WakeupFilter};
use latlab_trace::{EventGroup, StoryCollector, TraceConfig, Tracer, env, monotonic_ns};
use std::io::{Read, Write};
use std::sync::Mutex;
use std::time::Duration;

/// One tracer at a time: the system-state checks must not see another test's session.
static SERIAL: Mutex<()> = Mutex::new(());

fn privileged() -> bool {
    if env::may_trace(env::cap_eff()) {
        return true;
    }
    eprintln!("skipped: tracing needs root, or CAP_BPF and CAP_PERFMON");
    false
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- provocations ----

/// Write and fsync a file on disk: block I/O (BLOCK softirq, its IRQ) and writeback work.
fn write_and_fsync() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("trace-io-{}", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0x5au8; 1 << 20];
    for _ in 0..8 {
        f.write_all(&block).unwrap();
        f.sync_all().unwrap();
    }
    drop(f);
    std::fs::remove_file(&path).unwrap();
}

/// TCP and UDP traffic on loopback: NET_RX softirqs.
fn loopback_traffic() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let rx = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while c.read(&mut buf).unwrap() > 0 {}
    });
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    let chunk = vec![1u8; 1 << 16];
    for _ in 0..256 {
        c.write_all(&chunk).unwrap();
    }
    drop(c);
    rx.join().unwrap();
    latlab_testkit::udp_ping_pong(200, Duration::ZERO);
}

/// Short sleeps: hrtimer_wakeup handlers and wake-ups of this thread.
fn timer_sleeps(n: u32) {
    for _ in 0..n {
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn set_fifo(prio: i32) -> bool {
    latlab_sys::thread::set_scheduler(libc::SCHED_FIFO, prio).is_ok()
}

fn pin_to(cpu: u32) {
    latlab_sys::thread::set_affinity(&[cpu]).expect("pinning a test thread");
}

/// A SCHED_FIFO thread that sleeps and wakes: real-time wake-ups.
fn rt_sleeper() {
    std::thread::Builder::new()
        .name("latlab-rt".into())
        .spawn(|| {
            assert!(set_fifo(50), "SCHED_FIFO as root");
            timer_sleeps(200);
        })
        .unwrap()
        .join()
        .unwrap();
}

/// Network namespaces created and destroyed: expedited RCU grace periods, whose work runs as
/// kthread work.
fn netns_churn() {
    for _ in 0..4 {
        std::thread::spawn(|| {
            // SAFETY: unshare affects only this short-lived thread.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        })
        .join()
        .unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
}

// ---- checks ----

/// Every histogram of a family agrees: overall = per CPU summed = keys summed; extremes and
/// percentiles ordered.
fn check_consistent(f: &FamilyResult) {
    let name = f.family.name();
    let h = &f.histogram;
    let cpu_sum: u64 = f.per_cpu.iter().map(|c| c.histogram.count()).sum();
    let key_sum: u64 = f.keys.iter().map(|k| k.histogram.count()).sum();
    assert_eq!(h.count(), cpu_sum, "{name}: per-CPU counts");
    assert_eq!(h.count(), key_sum, "{name}: per-key counts");
    if h.count() > 0 {
        assert!(h.min() <= h.max(), "{name}: min <= max");
        assert!(
            h.percentile(50.0) <= h.percentile(99.0),
            "{name}: p50 <= p99"
        );
        assert!(h.percentile(99.0) <= h.max(), "{name}: p99 <= max");
        let cpu_max = f.per_cpu.iter().map(|c| c.histogram.max()).max().unwrap();
        assert_eq!(h.max(), cpu_max, "{name}: max is a CPU's max");
        let key_max = f.keys.iter().map(|k| k.histogram.max()).max().unwrap();
        assert_eq!(h.max(), key_max, "{name}: max is a key's max");
        let sum: u64 = f.keys.iter().map(|k| k.histogram.sum()).sum();
        assert_eq!(h.sum(), sum, "{name}: sums");
    }
    for k in &f.keys {
        let n: u64 = k.per_cpu.iter().map(|c| c.count).sum();
        assert_eq!(n, k.histogram.count(), "{name} {}: per-CPU counts", k.name);
        assert!(k.histogram.min() <= k.histogram.max());
    }
}

fn count(r: &TraceResult, f: Family) -> u64 {
    r.family(f).map_or(0, |f| f.histogram.count())
}

fn key_count(r: &TraceResult, f: Family, name: &str) -> u64 {
    r.family(f)
        .and_then(|f| f.keys.iter().find(|k| k.name == name))
        .map_or(0, |k| k.histogram.count())
}

use latlab_testkit::{bpf_stats_sysctl as stats_sysctl, tracefs_mounts};

#[test]
fn every_family_produces_samples_when_provoked_and_the_system_is_left_as_it_was() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let mounts_before = tracefs_mounts();
    let stats_before = stats_sysctl();

    let tracer = Tracer::start(&TraceConfig::default()).unwrap();
    write_and_fsync();
    loopback_traffic();
    timer_sleeps(100);
    rt_sleeper();
    netns_churn();
    let r = tracer.finish().unwrap();

    for f in &r.families {
        eprintln!(
            "{:<20} {:>7} samples, max {:>9} ns, {} keys",
            f.family.name(),
            f.histogram.count(),
            f.histogram.max(),
            f.keys.len()
        );
        check_consistent(f);
    }
    for s in &r.skipped {
        eprintln!("skipped {} ({}): {}", s.event, s.group, s.reason);
    }
    assert!(count(&r, Family::WorkqueueLatency) > 0);
    assert!(count(&r, Family::WorkqueueExecution) > 0);
    assert!(
        key_count(&r, Family::SoftirqLatency, "NET_RX") > 0,
        "loopback traffic"
    );
    assert!(key_count(&r, Family::SoftirqRuntime, "NET_RX") > 0);
    assert!(
        key_count(&r, Family::SoftirqRuntime, "BLOCK") > 0,
        "fsync'd writes"
    );
    assert!(
        count(&r, Family::KthreadLatency) > 0,
        "network namespace churn"
    );
    assert!(count(&r, Family::KthreadExecution) > 0);
    assert!(
        key_count(&r, Family::Wakeup, "rt") > 0,
        "the SCHED_FIFO sleeper"
    );
    assert!(key_count(&r, Family::Wakeup, "other") > 0);
    assert!(
        key_count(&r, Family::Hrtimer, "hrtimer_wakeup") > 0,
        "the sleeps' timers"
    );
    assert!(count(&r, Family::Hardirq) > 0, "the disk's interrupts");
    if cfg!(target_arch = "x86_64") {
        assert!(count(&r, Family::LocalTimer) > 0);
    } else {
        assert!(r.skipped.iter().any(|s| s.group == "local-timer"));
    }
    // Tasklets cannot be provoked from user space: the family is there or says why not.
    assert!(
        r.family(Family::TaskletRuntime).is_some()
            || r.skipped.iter().any(|s| s.group == "tasklet")
    );

    // latlab's own cost, per program.
    assert!(r.cost.available, "{}", r.cost.source);
    let switch = r
        .cost
        .programs
        .iter()
        .find(|p| p.program == "sched_switch")
        .unwrap();
    assert!(switch.run_count > 0 && switch.run_time_ns > 0);
    assert_eq!(
        r.cost.run_time_ns,
        r.cost.programs.iter().map(|p| p.run_time_ns).sum::<u64>()
    );
    assert!(r.cost.cpu_fraction > 0.0 && r.cost.cpu_fraction < 0.5);

    // The JSON form reads back to the same result.
    let json = serde_json::to_string(&r).unwrap();
    let back: TraceResult = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);

    // Nothing left changed: statistics back off, no tracefs mount left behind.
    assert_eq!(
        stats_sysctl(),
        stats_before,
        "kernel.bpf_stats_enabled as before"
    );
    assert_eq!(tracefs_mounts(), mounts_before, "tracefs mounts as before");
}

#[test]
fn wakeups_can_be_limited_to_rt_tasks_or_one_process() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let only = |wakeup: WakeupFilter| {
        let tracer = Tracer::start(&TraceConfig {
            groups: vec![EventGroup::Wakeup],
            wakeup,
            ..TraceConfig::default()
        })
        .unwrap();
        rt_sleeper();
        timer_sleeps(50);
        tracer.finish().unwrap()
    };
    let rt = only(WakeupFilter {
        rt_only: true,
        pid: None,
    });
    let w = rt.family(Family::Wakeup).unwrap();
    check_consistent(w);
    assert!(key_count(&rt, Family::Wakeup, "rt") > 0);
    assert_eq!(key_count(&rt, Family::Wakeup, "other"), 0, "RT only");

    let own = only(WakeupFilter {
        rt_only: false,
        pid: Some(std::process::id() as i32),
    });
    // This process: the RT thread's 200 and this thread's 50 sleeps (a timer that expires
    // before its thread slept wakes nobody), and little else.
    let n = count(&own, Family::Wakeup);
    assert!((200..2000).contains(&n), "{n} wake-ups of this process");
    assert!(key_count(&own, Family::Wakeup, "rt") >= 150);
}

/// The results cover the window they are said to: with timers firing before, during and after
/// it (detaching the programs takes a while), no family has more samples than its recording
/// program ran between the start and the end, as the cost reports it.
#[test]
fn samples_are_those_of_the_window_not_of_attaching_and_detaching() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticking = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(500));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let tracer = Tracer::start(&TraceConfig {
        groups: vec![EventGroup::Hrtimer, EventGroup::Wakeup],
        ..TraceConfig::default()
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let r = tracer.finish().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ticking.join().unwrap();
    let runs = |program: &str| {
        r.cost
            .programs
            .iter()
            .find(|p| p.program == program)
            .map_or_else(
                || panic!("no {program} in {:?}", r.cost.programs),
                |p| p.run_count,
            )
    };
    let (hrtimers, wakeups) = (count(&r, Family::Hrtimer), count(&r, Family::Wakeup));
    assert!(hrtimers > 50, "the sleeps' timers: {hrtimers}");
    assert!(
        hrtimers <= runs("hrtimer_exit"),
        "{hrtimers} samples, {:?}",
        r.cost
    );
    assert!(
        wakeups <= runs("sched_switch"),
        "{wakeups} samples, {:?}",
        r.cost
    );
}

#[test]
fn a_cpu_list_records_only_those_cpus() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let tracer = Tracer::start(&TraceConfig {
        groups: vec![EventGroup::Hrtimer, EventGroup::Wakeup],
        cpus: Some(vec![0]),
        ..TraceConfig::default()
    })
    .unwrap();
    timer_sleeps(50);
    let r = tracer.finish().unwrap();
    assert_eq!(r.cpus, [0]);
    for f in &r.families {
        check_consistent(f);
        assert!(f.per_cpu.iter().all(|c| c.cpu == 0), "{}", f.family.name());
        for k in &f.keys {
            assert!(k.per_cpu.iter().all(|c| c.cpu == 0));
        }
    }
}

#[test]
fn missing_tracepoints_skip_their_group_and_the_rest_runs() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let tracer = Tracer::start(&TraceConfig {
        groups: vec![
            EventGroup::Softirq,
            EventGroup::Tasklet,
            EventGroup::Hrtimer,
        ],
        pretend_missing: vec![
            "irq:tasklet_exit".into(),
            "timer:hrtimer_expire_exit".into(),
        ],
        ..TraceConfig::default()
    })
    .unwrap();
    assert_eq!(tracer.active_groups(), [EventGroup::Softirq]);
    loopback_traffic();
    let r = tracer.finish().unwrap();
    assert!(r.family(Family::TaskletRuntime).is_none());
    assert!(r.family(Family::Hrtimer).is_none());
    assert!(count(&r, Family::SoftirqRuntime) > 0);
    let skipped: Vec<(&str, &str)> = r
        .skipped
        .iter()
        .map(|s| (s.group.as_str(), s.event.as_str()))
        .collect();
    assert!(
        skipped.contains(&("tasklet", "irq:tasklet_exit")),
        "{skipped:?}"
    );
    assert!(
        skipped.contains(&("hrtimer", "timer:hrtimer_expire_exit")),
        "{skipped:?}"
    );
    assert!(
        r.skipped
            .iter()
            .all(|s| s.reason.contains("not in this kernel"))
    );

    // Nothing left: the error names what is missing.
    let e = Tracer::start(&TraceConfig {
        groups: vec![EventGroup::Hrtimer],
        pretend_missing: vec!["timer:hrtimer_expire_entry".into()],
        ..TraceConfig::default()
    })
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("timer:hrtimer_expire_entry"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

/// A thread pinned to `cpu` sleeps until a deadline 2 ms ahead while a SCHED_FIFO hog spins
/// 6 ms on that CPU: the thread wakes late. `on_wake(deadline, woke)` runs in the woken thread.
fn provoke_spike(cpu: u32, on_wake: impl FnOnce(u64, u64) + Send + 'static) -> (u64, u64) {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let hog = std::thread::Builder::new()
        .name("latlab-hog".into())
        .spawn(move || {
            pin_to(cpu);
            assert!(set_fifo(40));
            go_rx.recv().unwrap();
            let end = monotonic_ns() + 6_000_000;
            while monotonic_ns() < end {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let (deadline, woke) = std::thread::Builder::new()
        .name("latlab-victim".into())
        .spawn(move || {
            pin_to(cpu);
            let deadline = monotonic_ns() + 2_000_000;
            go_tx.send(()).unwrap();
            let ts = libc::timespec {
                tv_sec: (deadline / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: ts is valid; no remaining time is asked for.
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
            let woke = monotonic_ns();
            on_wake(deadline, woke);
            (deadline, woke)
        })
        .unwrap()
        .join()
        .unwrap();
    hog.join().unwrap();
    assert!(woke > deadline + 1_000_000, "the hog delayed the wake-up");
    (deadline, woke)
}

/// The story of a provoked spike names the hog that held the CPU, and ends with the woken thread.
fn check_hog_story(s: &latlab_model::trace::SpikeStory) {
    let line = s.summary();
    eprintln!("{line}");
    for e in &s.events {
        eprintln!("  {:?} {} {}ns {}", e.kind, e.name, e.overlap_ns, e.detail);
    }
    assert!(s.complete, "{line}");
    let hog = s.tasks.iter().find(|t| t.comm == "latlab-hog").unwrap();
    assert!(hog.ran_ns > 1_000_000, "{line}");
    assert_eq!(
        s.tasks[0].comm, "latlab-hog",
        "the hog held the CPU longest: {line}"
    );
    assert!(line.contains("task latlab-hog["), "{line}");
    assert!(
        s.events
            .iter()
            .any(|e| e.kind == StoryKind::Task && e.name.starts_with("latlab-victim")),
        "the story ends with the woken thread on the CPU: {line}"
    );
}

#[test]
fn a_spike_story_names_the_task_that_held_the_cpu() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let cpu = 0u32;
    let tracer = Tracer::start(&TraceConfig {
        groups: vec![],
        ring: true,
        ..TraceConfig::default()
    })
    .unwrap();
    let reader = tracer.ring_reader().unwrap();
    let (deadline, woke) = provoke_spike(cpu, |_, _| {});
    check_hog_story(&reader.story(cpu, deadline, woke).unwrap());
    drop(reader);
    let r = tracer.finish().unwrap();
    assert!(r.families.is_empty(), "no histograms asked for");
}

/// The way a measurement gets its stories: the woken thread sends a request, the collector's
/// thread reads the ring at once; histograms are kept beside the ring.
#[test]
fn the_collector_tells_the_story_of_a_requested_spike() {
    if !privileged() {
        return;
    }
    let _s = serial();
    let cpu = 0u32;
    let tracer = Tracer::start(&TraceConfig {
        groups: vec![EventGroup::Wakeup, EventGroup::Hrtimer],
        ring: true,
        ..TraceConfig::default()
    })
    .unwrap();
    let (collector, sender) =
        StoryCollector::start(tracer.ring_reader().unwrap(), 64, vec![1]).unwrap();
    let s2 = sender.clone();
    provoke_spike(cpu, move |deadline, woke| {
        assert!(s2.request(7, cpu, deadline, woke));
    });
    drop(sender);
    let got = collector.finish();
    assert_eq!(got.missed, 0);
    assert_eq!(got.stories.len(), 1);
    assert_eq!(got.stories[0].tag, 7);
    check_hog_story(&got.stories[0].story);
    let r = tracer.finish().unwrap();
    assert!(
        r.family(Family::Wakeup)
            .is_some_and(|f| f.histogram.count() > 0)
    );
    assert!(
        r.family(Family::Hrtimer)
            .is_some_and(|f| f.histogram.count() > 0)
    );
}
