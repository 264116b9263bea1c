//! Nothing is left behind: after each load stops, this process has exactly as many threads as
//! before it started. This file holds a single test so no other test's threads come and go
//! while it counts.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_load::{LoadOptions, LoadSet, LoadSpec, ScheduleRunner, parse_schedule};
use latlab_testkit::is_root;
use std::time::{Duration, Instant};

fn tasks() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The task count once it has come back to `want` (or still is after two seconds).
fn tasks_settled(want: usize) -> usize {
    common::after_threads_settle(tasks, |&n| n == want)
}

#[test]
fn every_load_joins_its_threads_and_reaps_its_children() {
    let opts = LoadOptions::default();
    let online = opts.sys.online_cpus().unwrap();
    let last = latlab_model::units::CpuList::from_cpus(vec![*online.cpus().last().unwrap()]);
    let mut specs = vec![
        ("cpu", None),
        ("matrix:size=64", None),
        ("memory:size=4M", None),
        ("io:size=256k", None),
        ("procfs", None),
        ("messaging:pairs=2,transport=socket", None),
        ("cmd:sleep 30", None),
    ];
    if is_root() {
        specs.push(("rt-hog:threads=1", Some(last)));
    } else {
        eprintln!("skipped rt-hog: not root (real-time policies need CAP_SYS_NICE)");
    }
    for (spec, cpus) in specs {
        let o = LoadOptions {
            cpus,
            ..LoadOptions::default()
        };
        let before = tasks();
        let set = LoadSet::start(&[LoadSpec::parse(spec).unwrap()], &o).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(tasks() > before, "{spec}: no thread started");
        let children = set.child_pids();
        let r = set.stop();
        assert_eq!(tasks_settled(before), before, "{spec}: threads left");
        for pid in children {
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "{spec}: child {pid} left"
            );
        }
        assert!(r[0].elapsed_ns > 0);
    }

    let before = tasks();
    let schedule = parse_schedule("cpu 100ms, idle 100ms, procfs 100ms").unwrap();
    let runner = ScheduleRunner::start(&schedule, &opts, Instant::now()).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let loads = runner.stop();
    assert_eq!(tasks_settled(before), before, "schedule: threads left");
    assert_eq!(loads.phases.len(), 2);
}
