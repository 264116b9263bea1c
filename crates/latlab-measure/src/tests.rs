#![allow(clippy::unwrap_used)]
use super::*;
use crate::engine::{last_period, plan_threads};
use latlab_model::DeadlineParams;
use std::time::Duration;

fn cfg(method: Method) -> MeasureConfig {
    MeasureConfig {
        duration_ns: Some(300_000_000),
        cpus: Some(vec![0]),
        policy: Policy::Other,
        priority: 0,
        method,
        mlock: false,
        window_ns: 100_000_000,
        spike_limit: 100,
        ..Default::default()
    }
}

fn online() -> CpuList {
    CpuList::parse("0-1").unwrap()
}

#[test]
fn validation_rejects_bad_input_with_the_accepted_form() {
    type Change = Box<dyn Fn(&mut MeasureConfig)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|c| c.interval_ns = 999), "below the minimum"),
        (Box::new(|c| c.interval_ns = 0), "below the minimum"),
        (
            Box::new(|c| {
                c.policy = Policy::Fifo;
                c.priority = 0
            }),
            "out of range",
        ),
        (
            Box::new(|c| {
                c.policy = Policy::Fifo;
                c.priority = 100
            }),
            "out of range",
        ),
        (Box::new(|c| c.cpus = Some(vec![7])), "absent or offline"),
        (
            Box::new(|c| {
                c.method = Method::Futex;
                c.waker_cpu = Some(9)
            }),
            "absent or offline",
        ),
        (
            Box::new(|c| c.waker_cpu = Some(0)),
            "method clock-nanosleep has no waker thread",
        ),
        (
            Box::new(|c| c.policy = Policy::Deadline),
            "needs --dl-runtime",
        ),
        (
            Box::new(|c| {
                c.policy = Policy::Deadline;
                c.cpus = None;
                c.deadline = Some(DeadlineParams {
                    runtime_ns: 2_000_000,
                    deadline_ns: 1_000_000,
                    period_ns: 1_000_000,
                });
            }),
            "inconsistent deadline",
        ),
        (
            Box::new(|c| {
                c.policy = Policy::Deadline;
                c.deadline = Some(DeadlineParams {
                    runtime_ns: 100_000,
                    deadline_ns: 1_000_000,
                    period_ns: 1_000_000,
                });
            }),
            "cannot be pinned",
        ),
        (Box::new(|c| c.window_ns = 500_000), "too short"),
        (
            Box::new(|c| c.duration_ns = Some(10)),
            "shorter than one interval",
        ),
        (
            Box::new(|c| c.loops = Some(0)),
            "--loops 0: no period to measure",
        ),
        (
            Box::new(|c| c.break_threshold_ns = Some(0)),
            "--break 0: every wake-up takes longer",
        ),
        (
            Box::new(|c| c.spike_threshold_ns = Some(0)),
            "--spike 0: every wake-up takes longer, so every sample would be kept as a spike",
        ),
        (
            Box::new(|c| {
                c.method = Method::Timerfd;
                c.relative = true
            }),
            "--relative",
        ),
    ];
    for (change, want) in cases {
        let mut c = cfg(Method::ClockNanosleep);
        change(&mut c);
        let e = validate(&c, &online()).unwrap_err();
        assert!(matches!(e, MeasureError::Invalid(_)));
        assert!(e.to_string().contains(want), "{e} should say {want}");
    }
    validate(&cfg(Method::ClockNanosleep), &online()).unwrap();
}

#[test]
fn wakers_avoid_measured_cpus_when_they_can() {
    let mut c = cfg(Method::Futex);
    let (plans, free) = plan_threads(&c, &online());
    assert_eq!(free, vec![1]);
    assert_eq!(plans[0].waker_affinity, vec![1]);
    c.cpus = Some(vec![0, 1]);
    let (plans, free) = plan_threads(&c, &online());
    assert!(free.is_empty());
    assert_eq!(plans[0].waker_affinity, vec![1]);
    assert_eq!(plans[1].waker_affinity, vec![0]);
    c.waker_cpu = Some(0);
    let (plans, _) = plan_threads(&c, &online());
    assert_eq!(plans[1].waker_affinity, vec![0]);
}

#[test]
fn last_period_takes_the_tighter_bound() {
    let mut c = cfg(Method::ClockNanosleep);
    assert_eq!(last_period(&c), 300);
    c.loops = Some(50);
    assert_eq!(last_period(&c), 50);
    c.duration_ns = None;
    c.loops = None;
    assert_eq!(last_period(&c), u64::MAX);
}

/// Every method, run for real for 0.3 s at SCHED_OTHER: the result's invariants hold.
#[test]
fn every_method_measures_with_consistent_results() {
    let sys = Sys::default();
    let on = sys.online_cpus().unwrap();
    for method in Method::ALL {
        let mut c = cfg(method);
        c.cpus = Some(vec![on.cpus()[0]]);
        let r = run(&c, &sys, StopSignal::new(), &mut |_| {}).unwrap();
        let t = &r.threads[0];
        assert!(t.stats.count > 0, "{method:?}: no samples");
        assert_eq!(t.histogram.count(), t.stats.count, "{method:?}");
        assert!(
            t.stats.min <= t.stats.p50 && t.stats.p50 <= t.stats.p99 && t.stats.p99 <= t.stats.max
        );
        let win_total: u64 = t.windows.iter().map(|w| w.count).sum();
        assert_eq!(
            win_total, t.stats.count,
            "{method:?}: windows hold every sample"
        );
        if method == Method::Busy {
            assert_eq!(t.expected_periods, None);
            assert!(t.stats.count > 10_000, "busy spins: {}", t.stats.count);
        } else {
            assert_eq!(t.expected_periods, Some(300), "{method:?}");
            assert_eq!(
                t.stats.count + t.missed,
                300,
                "{method:?}: count + missed = periods"
            );
            assert_eq!(
                t.corrected.count,
                t.stats.count + t.missed,
                "{method:?}: corrected adds missed"
            );
            assert_eq!(t.windows.len(), 3, "{method:?}: one window per 100 ms");
        }
        assert_eq!(r.stop, StopReason::Duration);
    }
}

#[test]
fn break_stops_the_run_and_spikes_are_kept() {
    let sys = Sys::default();
    let mut c = cfg(Method::ClockNanosleep);
    c.duration_ns = Some(5_000_000_000);
    c.spike_threshold_ns = Some(1);
    c.break_threshold_ns = Some(1);
    let r = run(&c, &sys, StopSignal::new(), &mut |_| {}).unwrap();
    assert!(
        matches!(r.stop, StopReason::Break { thread: 0, .. }),
        "{:?}",
        r.stop
    );
    assert!(r.elapsed_ns < 1_000_000_000);
    assert!(!r.spikes.kept.is_empty());
    assert_eq!(r.threads[0].expected_periods, None);
}

#[test]
fn an_external_stop_ends_an_unbounded_run() {
    let sys = Sys::default();
    let mut c = cfg(Method::Timerfd);
    c.duration_ns = None;
    let stop = StopSignal::new();
    let s2 = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        s2.request(StopReason::Signal {
            signal: "SIGINT".into(),
        });
    });
    let r = run(&c, &sys, stop, &mut |_| {}).unwrap();
    assert_eq!(
        r.stop,
        StopReason::Signal {
            signal: "SIGINT".into()
        }
    );
    assert!(r.threads[0].stats.count > 100);
}

#[test]
fn max_at_is_when_the_maximum_happened() {
    let sys = Sys::default();
    let mut c = cfg(Method::ClockNanosleep);
    c.spike_threshold_ns = Some(1);
    c.spike_limit = 10_000;
    let r = run(&c, &sys, StopSignal::new(), &mut |_| {}).unwrap();
    let t = &r.threads[0];
    assert_eq!(r.spikes.not_kept, 0, "every sample kept as a spike");
    let first_max = r
        .spikes
        .kept
        .iter()
        .find(|s| s.value_ns == t.stats.max)
        .expect("the maximum is among the spikes");
    assert_eq!(t.max_at_ns, first_max.at_ns);
    assert_eq!(r.overall.max_at_ns, t.max_at_ns);
}

#[test]
fn closed_windows_carry_histograms_that_add_up_to_the_totals() {
    let mut c = cfg(Method::ClockNanosleep);
    c.cpus = Some(vec![0, 1]);
    c.threads = 2;
    c.spike_threshold_ns = Some(1);
    let mut closed: Vec<ClosedWindow> = Vec::new();
    let mut sink = |w: Vec<ClosedWindow>| closed.extend(w);
    let r = run_with_windows(
        &c,
        &Sys::default(),
        StopSignal::new(),
        &mut |_| {},
        Some(&mut sink),
    )
    .unwrap();
    for (t, thread) in r.threads.iter().enumerate() {
        let mine: Vec<&ClosedWindow> = closed.iter().filter(|w| w.thread == t as u32).collect();
        // 300 ms in windows of 100 ms, numbered from 0; handed out, so not also in the result.
        let indices: Vec<u64> = mine.iter().map(|w| w.index).collect();
        assert_eq!(indices, [0, 1, 2], "one per window");
        assert!(thread.windows.is_empty(), "{:?}", thread.windows);
        let mut merged = Histogram::new();
        for w in &mine {
            merged.merge(&w.histogram);
            assert_eq!(w.cpu, thread.cpu);
            assert!(w.spikes.iter().all(|s| s.thread == t as u32));
        }
        assert_eq!(merged.count(), thread.histogram.count());
        assert_eq!(merged.max(), thread.histogram.max());
        // Every sample is above the 1 ns threshold: each window carries one spike per sample.
        for w in &mine {
            assert_eq!(w.spikes.len() as u64, w.histogram.count());
        }
    }
    assert!(r.spikes.kept.is_empty(), "handed out with their windows");
}

/// Records what the hook is told.
struct Recorder {
    calls: Mutex<Vec<(u32, u64, u64, u64)>>,
}

impl SpikeHook for Recorder {
    fn spike(&self, thread: u32, at_ns: u64, from: u64, to: u64) {
        self.calls.lock().unwrap().push((thread, at_ns, from, to));
    }
}

#[test]
fn the_spike_hook_hears_every_kept_spike_with_its_interval() {
    for method in [Method::ClockNanosleep, Method::Futex] {
        let mut c = cfg(method);
        c.spike_threshold_ns = Some(1);
        c.spike_limit = 100_000;
        let rec = Arc::new(Recorder {
            calls: Mutex::new(Vec::new()),
        });
        let before = os::now(os::clock_id(c.clock));
        let r = run_hooked(
            &c,
            &Sys::default(),
            StopSignal::new(),
            &mut |_| {},
            None,
            Some(rec.clone()),
            None,
        )
        .unwrap();
        let after = os::now(os::clock_id(c.clock));
        let calls = rec.calls.lock().unwrap();
        assert!(!r.spikes.kept.is_empty(), "{method:?}: no spikes");
        assert_eq!(calls.len(), r.spikes.kept.len(), "{method:?}");
        for (s, &(thread, at, from, to)) in r.spikes.kept.iter().zip(calls.iter()) {
            assert_eq!((s.thread, s.at_ns), (thread, at), "{method:?}");
            assert_eq!(to - from, s.value_ns, "{method:?}");
            assert!(before <= from && to <= after, "{method:?}: {from}..{to}");
        }
    }
}

/// `--stagger` offsets thread i of n by i/n of the interval: every deadline of thread i (a
/// kept spike's `at_ns`, counted from the run's start) lies at i × interval / n past a period
/// boundary; without it every thread shares one phase.
#[test]
fn stagger_offsets_each_threads_deadlines_by_its_share_of_the_interval() {
    let sys = Sys::default();
    for stagger in [false, true] {
        let mut c = cfg(Method::ClockNanosleep);
        c.interval_ns = 1_000_000;
        c.duration_ns = None;
        c.loops = Some(40);
        c.cpus = None;
        c.threads = 4;
        c.spike_threshold_ns = Some(1);
        c.spike_limit = 10_000;
        c.stagger = stagger;
        let r = run(&c, &sys, StopSignal::new(), &mut |_| {}).unwrap();
        for t in 0..4u64 {
            let phases: std::collections::BTreeSet<u64> = r
                .spikes
                .kept
                .iter()
                .filter(|s| u64::from(s.thread) == t)
                .map(|s| s.at_ns % c.interval_ns)
                .collect();
            let want = if stagger { t * c.interval_ns / 4 } else { 0 };
            assert!(!phases.is_empty(), "thread {t}: no deadlines kept");
            assert_eq!(
                phases.into_iter().collect::<Vec<_>>(),
                [want],
                "thread {t}, stagger {stagger}"
            );
        }
    }
}

/// Beyond `--spike-limit` a run keeps its largest spikes, in the order of time, and counts the
/// others: the maximum is always among those kept (it was the first ones before).
#[test]
fn a_run_past_its_spike_limit_keeps_its_largest_spikes() {
    let mut c = cfg(Method::ClockNanosleep);
    c.spike_threshold_ns = Some(1);
    c.spike_limit = 10;
    let r = run(&c, &Sys::default(), StopSignal::new(), &mut |_| {}).unwrap();
    let t = &r.threads[0];
    assert_eq!(r.spikes.kept.len(), 10);
    assert_eq!(
        r.spikes.not_kept + 10,
        t.stats.count,
        "every sample is a spike"
    );
    assert!(r.spikes.kept.iter().any(|s| s.value_ns == t.stats.max));
    assert!(r.spikes.kept.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
}

/// A window's room for spikes keeps its largest ones: past it the smallest kept gives way.
#[test]
fn a_full_window_keeps_its_largest_spikes() {
    use crate::window::{SPIKES_PER_WINDOW, WindowBuf};
    let mut buf = WindowBuf::new(0);
    for i in 0..SPIKES_PER_WINDOW as u64 {
        assert!(buf.add_spike(i, 100 + i));
    }
    assert!(buf.add_spike(5000, 1_000_000), "a larger one is kept");
    assert!(!buf.add_spike(5001, 50), "a smaller one is counted");
    assert_eq!(buf.spikes_dropped, 2);
    assert_eq!(buf.spikes.len(), SPIKES_PER_WINDOW);
    let values: Vec<u64> = buf.spikes.iter().map(|s| s.value).collect();
    assert!(
        values.contains(&1_000_000) && !values.contains(&100),
        "the smallest gave way"
    );
    assert!(buf.spikes_replaced);
    // Many more, smaller and larger in turn: the largest of all stay.
    let more = |i: u64| {
        if i.is_multiple_of(2) {
            10 + i
        } else {
            10_000 + i
        }
    };
    for i in 0..4096u64 {
        buf.add_spike(6000 + i, more(i));
    }
    let mut values: Vec<u64> = buf.spikes.iter().map(|s| s.value).collect();
    values.sort_unstable();
    let mut all: Vec<u64> = (0..SPIKES_PER_WINDOW as u64).map(|i| 100 + i).collect();
    all.extend((0..4096u64).map(more));
    all.push(1_000_000);
    all.sort_unstable();
    assert_eq!(values, all[all.len() - SPIKES_PER_WINDOW..]);
    assert_eq!(buf.spikes_dropped, 2 + 4096);
}

/// What starts beside a measurement starts once, after the threads are set up and before they
/// measure; when it cannot, the threads end without measuring and its error is the run's.
#[test]
fn before_release_runs_once_and_its_error_ends_the_run_unmeasured() {
    let c = cfg(Method::ClockNanosleep);
    let mut calls = 0;
    let mut ok = || -> Result<(), String> {
        calls += 1;
        Ok(())
    };
    let r = run_hooked(
        &c,
        &Sys::default(),
        StopSignal::new(),
        &mut |_| {},
        None,
        None,
        Some(&mut ok),
    )
    .unwrap();
    assert_eq!(calls, 1);
    assert!(r.overall.stats.count > 0);
    let mut seen = Vec::new();
    let mut refuse = || -> Result<(), String> { Err("the load could not start".into()) };
    let e = run_hooked(
        &c,
        &Sys::default(),
        StopSignal::new(),
        &mut |l: &Live| seen.push(l.elapsed_ns),
        None,
        None,
        Some(&mut refuse),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        MeasureError::Setup("the load could not start".into()).to_string()
    );
    assert!(seen.is_empty(), "nothing was measured: {seen:?}");
}
