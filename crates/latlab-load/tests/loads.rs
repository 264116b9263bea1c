//! Every load for real, briefly: it starts, counts work (throughput above zero), stops promptly
//! and leaves nothing behind (threads joined, children gone, files removed). Loads run one at a
//! time (a lock) so the thread checks see only their own load's threads, all named `ll-*`.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_load::{LoadError, LoadOptions, LoadSet, LoadSpec, ScheduleRunner, parse_schedule};
use latlab_model::load::LoadReport;
use latlab_model::units::CpuList;
use latlab_sys::Sys;
use latlab_testkit::is_root;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads of this process started by loads (all are named `ll-...`).
fn load_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| c.starts_with("ll-"))
        .collect()
}

/// Load threads still listed once the set has stopped (after up to two seconds).
fn leftover_load_threads() -> Vec<String> {
    common::after_threads_settle(load_threads, Vec::is_empty)
}

fn opts(cpus: Option<&str>) -> LoadOptions {
    LoadOptions {
        cpus: cpus.map(|c| CpuList::parse(c).unwrap()),
        force: false,
        sys: Sys::default(),
    }
}

/// The last online CPU (rt-hog tests confine their hogs to it).
fn last_cpu() -> String {
    let online = Sys::default().online_cpus().unwrap();
    online.cpus().last().unwrap().to_string()
}

/// Run one spec for `ms`, stop it and check the stop was prompt and no thread is left.
fn run(spec: &str, o: &LoadOptions, ms: u64) -> LoadReport {
    assert_eq!(
        leftover_load_threads(),
        Vec::<String>::new(),
        "threads left over before {spec}"
    );
    let spec = LoadSpec::parse(spec).unwrap();
    let set = LoadSet::start(std::slice::from_ref(&spec), o).unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    assert!(!load_threads().is_empty(), "{spec}: no load thread runs");
    let t = Instant::now();
    let mut reports = set.stop();
    let took = t.elapsed();
    eprintln!("{spec}: stopped in {took:?}");
    assert!(
        took < Duration::from_secs(1),
        "{spec}: stopping took {took:?}"
    );
    assert_eq!(
        leftover_load_threads(),
        Vec::<String>::new(),
        "{spec}: threads left"
    );
    assert_eq!(reports.len(), 1);
    let r = reports.remove(0);
    assert_eq!(r.spec, spec.text());
    assert_eq!(r.kind, spec.kind());
    assert_eq!(r.started_ns, 0);
    eprintln!("{r:?}");
    r
}

fn assert_rates(r: &LoadReport, units: &[&str]) {
    let got: Vec<_> = r.throughput.iter().map(|t| t.unit.as_str()).collect();
    assert_eq!(got, units, "{}", r.spec);
    // Both cpu loops alternate, each rate over its own loop's time (checked by its test).
    let own_times = r.kind == "cpu" && units.len() == 2;
    for t in &r.throughput {
        assert!(t.rate > 0.0 && t.total > 0.0, "{}: {t:?}", r.spec);
        if own_times {
            continue;
        }
        // rate is total over the elapsed time.
        let secs = r.elapsed_ns as f64 / 1e9;
        assert!((t.rate * secs - t.total).abs() <= t.total * 1e-6, "{t:?}");
    }
    assert!(r.warnings.is_empty(), "{}: {:?}", r.spec, r.warnings);
}

fn elapsed_about(r: &LoadReport, ms: u64) {
    let e = r.elapsed_ns / 1_000_000;
    assert!(
        e >= ms * 9 / 10 && e < ms + 1000,
        "{}: elapsed {e} ms",
        r.spec
    );
}

#[test]
fn cpu_spins_int_and_float() {
    let _g = serial();
    let r = run("cpu", &opts(None), 400);
    assert_eq!(r.workers, Sys::default().online_cpus().unwrap().len());
    assert_eq!(r.cpus, None);
    assert_rates(&r, &["ops/s", "ops/s"]);
    elapsed_about(&r, 400);
    // The loops alternate, and each rate is per second of its own loop's time: the two times
    // (total / rate) add up to the run's, where a rate over the whole run would give twice it.
    let own: f64 = r.throughput.iter().map(|t| t.total / t.rate).sum();
    let elapsed = r.elapsed_ns as f64 / 1e9;
    assert!(
        own > 0.8 * elapsed && own < 1.05 * elapsed,
        "own loop times {own} s of {elapsed} s: {:?}",
        r.throughput
    );
    let r = run("cpu:workers=3,kind=float", &opts(Some("0")), 300);
    assert_eq!(r.workers, 3);
    assert_eq!(r.cpus, Some(vec![0]));
    assert_rates(&r, &["ops/s"]);
    assert_eq!(r.throughput[0].what, "floating-point loop iterations");
    let r = run("cpu:workers=1,kind=int", &opts(None), 300);
    assert_eq!(r.throughput[0].what, "integer loop iterations");
}

#[test]
fn matrix_multiplies() {
    let _g = serial();
    let r = run("matrix:size=64,workers=1", &opts(None), 400);
    assert_rates(&r, &["ops/s", "MFLOP/s"]);
    // 2 N³ flops per multiply.
    let (mults, mflop) = (r.throughput[0].total, r.throughput[1].total);
    assert!((mflop - mults * 2.0 * 64.0 * 64.0 * 64.0 / 1e6).abs() < 1e-6 * mflop);
    // A large matrix stopped in its first multiply still counts the rows it did.
    let r = run("matrix:size=1024,workers=1", &opts(None), 200);
    assert!(r.throughput[0].total > 0.0 && r.throughput[0].total < 1.0 + 1e-9);
}

#[test]
fn memory_maps_touches_and_unmaps() {
    let _g = serial();
    let r = run("memory:size=8M,workers=2", &opts(None), 500);
    assert_eq!(r.workers, 2);
    assert_rates(&r, &["MB/s", "cycles/s"]);
    // Each full cycle reads and writes the region once.
    let (mb, cycles) = (r.throughput[0].total, r.throughput[1].total);
    assert!(
        mb >= cycles * 2.0 * 8.0 * 1.048_576 - 1e-6,
        "{mb} MB for {cycles} cycles"
    );
}

#[test]
fn memory_larger_than_available_is_refused() {
    let _g = serial();
    let e = LoadSet::start(&[LoadSpec::parse("memory:size=1T").unwrap()], &opts(None)).unwrap_err();
    assert!(matches!(e, LoadError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("available"), "{e}");
    // In gigabytes with a decimal, not a count of kilobytes ("24052020k").
    let said = e.to_string();
    let amount = said
        .split("more than the ")
        .nth(1)
        .and_then(|r| r.split("G of memory").next())
        .unwrap_or_default();
    assert!(
        amount.parse::<f64>().is_ok() && amount.contains('.'),
        "{said}"
    );
}

fn io_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// The `latlab-load-io-*` temporary directories that exist now.
fn io_temp_dirs() -> Vec<PathBuf> {
    io_files(&std::env::temp_dir())
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("latlab-load-io-"))
        })
        .collect()
}

#[test]
fn io_writes_in_a_chosen_directory_and_removes_its_files() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("io:bs=4k,size=1M,workers=2,dir={}", dir.path().display());
    // While the load runs, its two files are open and already unlinked, so their space
    // returns however the process ends.
    let set = LoadSet::start(&[LoadSpec::parse(&spec).unwrap()], &opts(None)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(io_files(dir.path()), Vec::<PathBuf>::new(), "named files");
    let open_unlinked = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|p| p.starts_with(dir.path()) && p.to_string_lossy().ends_with(" (deleted)"))
        .count();
    assert_eq!(open_unlinked, 2);
    let r = set.stop().remove(0);
    assert_eq!(io_files(dir.path()), Vec::<PathBuf>::new(), "files left");
    assert_rates(&r, &["IOPS", "MB/s"]);
    // Every write is one 4k block.
    let (iops, mb) = (&r.throughput[0], &r.throughput[1]);
    assert!((iops.total * 4096.0 / 1e6 - mb.total).abs() < 1e-6 * mb.total);
    // Without fsync the blocks end in the page cache, and what is counted says so.
    assert_eq!(iops.what, "blocks written to the page cache");
    assert_eq!(leftover_load_threads(), Vec::<String>::new());

    let r = run(
        &format!(
            "io:bs=4k,size=256k,fsync=true,workers=1,dir={}",
            dir.path().display()
        ),
        &opts(None),
        300,
    );
    assert_rates(&r, &["IOPS", "MB/s"]);
    assert_eq!(r.throughput[0].what, "blocks written and synced");
    assert_eq!(io_files(dir.path()), Vec::<PathBuf>::new(), "files left");
}

#[test]
fn io_in_a_fresh_temporary_directory_removes_it() {
    let _g = serial();
    let before = io_temp_dirs();
    let set = LoadSet::start(
        &[LoadSpec::parse("io:bs=1M,size=8M,workers=1").unwrap()],
        &opts(None),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let during = io_temp_dirs();
    assert_eq!(during.len(), before.len() + 1, "no temporary directory");
    let r = set.stop().remove(0);
    assert_rates(&r, &["IOPS", "MB/s"]);
    assert_eq!(io_temp_dirs(), before, "temporary directory left");
}

#[test]
fn procfs_reads_files() {
    let _g = serial();
    let r = run("procfs:workers=1", &opts(None), 400);
    assert_rates(&r, &["files/s", "MB/s"]);
    // At least the system tables and this process's files on every walk.
    assert!(r.throughput[0].total > 14.0);
}

#[test]
fn messaging_over_pipes_and_sockets() {
    let _g = serial();
    let r = run("messaging:groups=2,pairs=2", &opts(None), 400);
    assert_eq!(r.workers, 8);
    assert_rates(&r, &["messages/s", "MB/s"]);
    let (msgs, mb) = (r.throughput[0].total, r.throughput[1].total);
    assert!((msgs * 100.0 / 1e6 - mb).abs() < 1e-6 * mb);
    let r = run(
        "messaging:pairs=3,transport=socket,size=1k",
        &opts(Some("0")),
        400,
    );
    assert_eq!(r.workers, 6);
    assert_rates(&r, &["messages/s", "MB/s"]);
}

fn process_exists(pid: u32) -> bool {
    // A zombie is dead but not yet reaped: count it as gone only when its parent is not us.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next());
            state != Some(Some('Z')) || stat.contains(&format!(" {} ", std::process::id()))
        }
    }
}

/// Live processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            // state ppid pgrp ...
            f.first() != Some(&"Z") && f.get(2) == Some(&pgid.to_string().as_str())
        })
        .collect()
}

#[test]
fn cmd_is_stopped_with_its_whole_process_group() {
    let _g = serial();
    let spec = LoadSpec::parse("cmd:\"sleep 30 & sleep 30; wait\"").unwrap();
    let set = LoadSet::start(&[spec], &opts(None)).unwrap();
    let pids = set.child_pids();
    assert_eq!(pids.len(), 1);
    let pid = pids[0];
    // The command's shell, its two sleeps and the watcher of latlab's pipe, in the shell's own
    // process group.
    let t = Instant::now();
    while group_members(pid).len() < 4 && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let members = group_members(pid);
    assert_eq!(members.len(), 4, "{members:?}");
    let t = Instant::now();
    let r = set.stop().remove(0);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(!process_exists(pid), "the child {pid} is still there");
    let t = Instant::now();
    while !group_members(pid).is_empty() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        group_members(pid),
        Vec::<u32>::new(),
        "members of the group left"
    );
    assert_eq!(r.kind, "cmd");
    assert_eq!(r.workers, 1);
    assert!(r.throughput.is_empty());
    assert!(r.elapsed_ns > 0);
    // Stopped by SIGTERM as asked: the normal end, no warning (every run with a `cmd:` load
    // warned of it, and the report repeated it).
    assert_eq!(r.warnings, Vec::<String>::new());
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
}

/// `pkill -f` with the command's text must find the command, not the watcher that stops the
/// group should latlab die: no other process of the group carries that text. What carries it
/// to the supervisor does not reach the command's environment.
#[test]
fn only_the_command_carries_its_text() {
    let _g = serial();
    let marker = format!("latlab-marker-{}", std::process::id());
    let spec = LoadSpec::parse(&format!("cmd:\"sleep 30; : {marker}\"")).unwrap();
    let set = LoadSet::start(&[spec], &opts(None)).unwrap();
    let pid = set.child_pids()[0];
    let t = Instant::now();
    while group_members(pid).len() < 3 && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let members = group_members(pid);
    assert_eq!(
        members.len(),
        3,
        "the shell, its sleep, the watcher: {members:?}"
    );
    let carrying: Vec<u32> = members
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
        })
        .collect();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    set.stop();
    assert_eq!(carrying, vec![pid], "only the command's shell names it");
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        !environ.contains("LATLAB_CMD"),
        "the command's environment: {environ}"
    );
}

#[test]
fn cmd_that_ignores_sigterm_is_killed_after_the_grace() {
    let _g = serial();
    let spec = LoadSpec::parse("cmd:trap '' TERM; sleep 30").unwrap();
    let set = LoadSet::start(&[spec], &opts(None)).unwrap();
    let pid = set.child_pids()[0];
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let r = set.stop().remove(0);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(!process_exists(pid));
    assert!(r.warnings[0].contains("was killed"), "{:?}", r.warnings);
    assert!(r.warnings[0].contains("SIGKILL"), "{:?}", r.warnings);
}

#[test]
fn cmd_that_ends_on_its_own_reports_its_status() {
    let _g = serial();
    let spec = LoadSpec::parse("cmd:exit 3").unwrap();
    let set = LoadSet::start(&[spec], &opts(Some("0"))).unwrap();
    let pid = set.child_pids()[0];
    std::thread::sleep(Duration::from_millis(300));
    let r = set.stop().remove(0);
    assert!(!process_exists(pid));
    assert!(r.elapsed_ns < 300_000_000, "{}", r.elapsed_ns);
    assert!(
        r.warnings[0].contains("ended on its own"),
        "{:?}",
        r.warnings
    );
    assert!(r.warnings[0].contains("exit status 3"), "{:?}", r.warnings);
    // A status above 128 is an exit status, not a signal; SIGINT is the command's to handle.
    for (line, how) in [
        ("cmd:exit 147", "exit status 147"),
        ("cmd:kill -INT $$; exit 0", "signal SIGINT"),
    ] {
        let set = LoadSet::start(&[LoadSpec::parse(line).unwrap()], &opts(Some("0"))).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let r = set.stop().remove(0);
        assert!(
            r.warnings[0].contains("ended on its own"),
            "{line}: {:?}",
            r.warnings
        );
        assert!(r.warnings[0].contains(how), "{line}: {:?}", r.warnings);
    }
}

#[test]
fn cmd_runs_on_the_load_cpus() {
    let _g = serial();
    let cpu = last_cpu();
    let spec = LoadSpec::parse("cmd:sleep 30").unwrap();
    let set = LoadSet::start(&[spec], &opts(Some(&cpu))).unwrap();
    let pid = set.child_pids()[0];
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    drop(set);
    assert_eq!(allowed, cpu);
    assert!(
        !process_exists(pid),
        "dropping the set did not end the child"
    );
}

#[test]
fn dropping_a_set_stops_everything() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<_> = [
        "cpu:workers=1".to_string(),
        "cmd:sleep 30".to_string(),
        format!("io:size=64k,workers=1,dir={}", dir.path().display()),
    ]
    .iter()
    .map(|s| LoadSpec::parse(s).unwrap())
    .collect();
    let set = LoadSet::start(&specs, &opts(None)).unwrap();
    assert_eq!(set.len(), 3);
    let pid = set.child_pids()[0];
    std::thread::sleep(Duration::from_millis(200));
    assert!(!load_threads().is_empty());
    let t = Instant::now();
    drop(set);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
    assert!(!process_exists(pid));
    assert_eq!(io_files(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn a_load_that_fails_to_start_stops_the_ones_started() {
    let _g = serial();
    // A writable directory (the check passes) where the io load's first file is already taken
    // by a directory of that name, whatever number this process gives the load (start fails).
    let dir = tempfile::tempdir().unwrap();
    for id in 0..1000 {
        let taken = format!("latlab-load-io-{}-{id}-0", std::process::id());
        std::fs::create_dir(dir.path().join(taken)).unwrap();
    }
    let io = format!("io:dir={},size=64k", dir.path().display());
    let specs: Vec<_> = ["cpu:workers=1", "cmd:sleep 30", io.as_str()]
        .iter()
        .map(|s| LoadSpec::parse(s).unwrap())
        .collect();
    let e = LoadSet::start(&specs, &opts(None)).unwrap_err();
    assert!(matches!(e, LoadError::Start { .. }), "{e:?}");
    assert!(!e.is_usage());
    assert!(
        e.to_string().starts_with(&format!(
            "io: could not start: creating {}/latlab-load-io-",
            dir.path().display()
        )),
        "{e}"
    );
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
}

#[test]
fn unsupported_and_invalid_fail_before_anything_starts() {
    let _g = serial();
    let e = LoadSet::start(
        &[
            LoadSpec::parse("cmd:sleep 30").unwrap(),
            LoadSpec::parse("io:dir=/nonexistent-dir").unwrap(),
        ],
        &opts(None),
    )
    .unwrap_err();
    assert!(e.is_usage(), "{e:?}");
    assert!(
        e.to_string()
            .contains("io:dir=/nonexistent-dir: no such directory"),
        "{e}"
    );
    assert_eq!(leftover_load_threads(), Vec::<String>::new());

    let e = LoadSet::start(&[LoadSpec::parse("cpu").unwrap()], &opts(Some("4000"))).unwrap_err();
    assert!(e.is_usage(), "{e:?}");
    assert!(
        e.to_string().contains("CPU 4000 is absent or offline"),
        "{e}"
    );
}

/// A fixture system root whose RT throttling is off (and two online CPUs).
fn rt_fixture(runtime: Option<&str>) -> tempfile::TempDir {
    let root = latlab_testkit::tree_of(&[("/sys/devices/system/cpu/online", "0-1\n")]);
    if let Some(v) = runtime {
        let kernel = "/proc/sys/kernel";
        latlab_testkit::write_file(
            root.path(),
            &format!("{kernel}/sched_rt_runtime_us"),
            format!("{v}\n"),
        );
        latlab_testkit::write_file(
            root.path(),
            &format!("{kernel}/sched_rt_period_us"),
            "1000000\n",
        );
    }
    root
}

#[test]
fn rt_hog_refuses_to_run_without_rt_throttling() {
    let _g = serial();
    let root = rt_fixture(Some("-1"));
    let spec = LoadSpec::parse("rt-hog:threads=1").unwrap();
    let mut o = LoadOptions {
        cpus: None,
        force: false,
        sys: Sys::new(root.path()),
    };
    let e = LoadSet::start(std::slice::from_ref(&spec), &o).unwrap_err();
    assert!(matches!(e, LoadError::Unsupported { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.starts_with("rt-hog: cannot run here: RT throttling is disabled"),
        "{m}"
    );
    assert!(m.contains("--force"), "{m}");
    assert_eq!(leftover_load_threads(), Vec::<String>::new());

    // A runtime as long as the period leaves no time to anything else either.
    let full = rt_fixture(Some("1000000"));
    let e = (spec.descriptor().supported)(
        &spec,
        &LoadOptions {
            sys: Sys::new(full.path()),
            ..o.clone()
        },
    )
    .unwrap_err();
    assert!(
        e.contains("RT throttling is disabled (sched_rt_runtime_us 1000000 is not below sched_rt_period_us 1000000)"),
        "{e}"
    );

    // Forced, the throttling check passes (privileges are checked next).
    o.force = true;
    let supported = (spec.descriptor().supported)(&spec, &o);
    if is_root() {
        assert_eq!(supported, Ok(()));
    } else {
        let e = supported.unwrap_err();
        assert!(e.contains("CAP_SYS_NICE"), "{e}");
    }

    // Throttling on: no refusal on that ground.
    let root = rt_fixture(Some("950000"));
    o = LoadOptions {
        cpus: None,
        force: false,
        sys: Sys::new(root.path()),
    };
    let supported = (spec.descriptor().supported)(&spec, &o);
    if is_root() {
        assert_eq!(supported, Ok(()));
    } else {
        assert!(supported.unwrap_err().contains("CAP_SYS_NICE"));
    }

    // Unknown throttling: refused unless forced.
    let root = rt_fixture(None);
    o.sys = Sys::new(root.path());
    let e = (spec.descriptor().supported)(&spec, &o).unwrap_err();
    assert!(e.contains("cannot tell whether RT throttling is on"), "{e}");
}

#[test]
fn rt_hog_runs_on_one_cpu_when_privileged() {
    let _g = serial();
    let cpu = last_cpu();
    let spec = "rt-hog:threads=2,policy=rr,priority=1";
    if !is_root() {
        let e = LoadSet::start(&[LoadSpec::parse(spec).unwrap()], &opts(Some(&cpu))).unwrap_err();
        assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
        eprintln!("skipped the real rt-hog run: not root (real-time policies need CAP_SYS_NICE)");
        return;
    }
    let r = run(spec, &opts(Some(&cpu)), 500);
    assert_eq!(r.workers, 2);
    assert_eq!(r.cpus, Some(vec![cpu.parse().unwrap()]));
    assert_rates(&r, &["ops/s"]);
    let r = run(
        "rt-hog:threads=1,policy=fifo,priority=2",
        &opts(Some(&cpu)),
        300,
    );
    assert_rates(&r, &["ops/s"]);
}

#[test]
fn schedule_runs_phases_in_order_and_records_them() {
    let _g = serial();
    let schedule = parse_schedule("idle 300ms, cpu:workers=1 300ms").unwrap();
    let origin = Instant::now();
    let runner = ScheduleRunner::start(&schedule, &opts(None), origin).unwrap();
    let t = Instant::now();
    while !runner.is_finished() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(runner.is_finished());
    // Nothing runs after the last phase.
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
    let loads = runner.stop();
    let p = &loads.phases;
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!((p[0].index, p[0].spec.as_str()), (0, "idle"));
    assert_eq!((p[1].index, p[1].spec.as_str()), (1, "cpu:workers=1"));
    let ms = |ns: u64| ns / 1_000_000;
    assert!(ms(p[0].start_ns) < 50, "{p:?}");
    assert!(
        p[0].start_ns <= p[0].end_ns && p[0].end_ns <= p[1].start_ns,
        "{p:?}"
    );
    assert!(p[1].start_ns <= p[1].end_ns, "{p:?}");
    // Boundaries at the planned times (with room for a busy machine's wake-up delays).
    assert!((290..550).contains(&ms(p[0].end_ns)), "{p:?}");
    assert!((290..550).contains(&ms(p[1].start_ns)), "{p:?}");
    assert!((590..900).contains(&ms(p[1].end_ns)), "{p:?}");
    assert_eq!(loads.reports.len(), 1);
    let r = &loads.reports[0];
    assert_eq!(r.kind, "cpu");
    assert_eq!(r.started_ns, p[1].start_ns);
    assert_rates(r, &["ops/s", "ops/s"]);
    assert!((250..500).contains(&ms(r.elapsed_ns)), "{r:?}");
}

#[test]
fn schedule_stopped_early_ends_the_phase_under_way() {
    let _g = serial();
    let schedule = parse_schedule("memory:size=4M,workers=1 10s, idle 1s").unwrap();
    let origin = Instant::now();
    let runner = ScheduleRunner::start(&schedule, &opts(None), origin).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!load_threads().is_empty());
    let t = Instant::now();
    let loads = runner.stop();
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
    assert_eq!(loads.phases.len(), 1);
    let end = loads.phases[0].end_ns / 1_000_000;
    assert!((290..1000).contains(&end), "{loads:?}");
    assert_eq!(loads.reports.len(), 1);
    assert!(loads.reports[0].throughput[0].rate > 0.0);

    // Dropping a runner stops it too.
    let runner = ScheduleRunner::start(&schedule, &opts(None), Instant::now()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    drop(runner);
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
}

#[test]
fn schedule_checks_every_phase_before_starting() {
    let _g = serial();
    let schedule = parse_schedule("cpu 1s, io:dir=/nonexistent-dir 1s").unwrap();
    let e = ScheduleRunner::start(&schedule, &opts(None), Instant::now()).unwrap_err();
    assert!(e.is_usage(), "{e:?}");
    assert_eq!(leftover_load_threads(), Vec::<String>::new());
}

#[test]
fn no_specs_is_an_empty_set_that_reads_nothing() {
    let o = LoadOptions {
        sys: Sys::new("/nonexistent-root"),
        ..LoadOptions::default()
    };
    assert_eq!(LoadSet::check(&[], &o), Ok(()));
    let set = LoadSet::start(&[], &o).unwrap();
    assert!(set.is_empty());
    assert_eq!(set.stop(), Vec::new());
    // With a spec, the missing root shows.
    let e = LoadSet::start(&[LoadSpec::parse("cpu").unwrap()], &o).unwrap_err();
    assert!(e.to_string().contains("cannot read the online CPUs"), "{e}");
}
