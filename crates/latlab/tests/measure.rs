//! `latlab measure` run for real: result invariants, outputs, signals, bad input.
//! As root the runs use SCHED_FIFO; otherwise SCHED_OTHER (and say so).
#![allow(clippy::unwrap_used)]

mod common;

use latlab_testkit::process::signal_after;
use latlab_testkit::{is_root, json, latlab, policy_args, read_json, run_exit};
use std::process::Output;
use std::time::Duration;

fn run_ok(args: &[&str]) -> Output {
    latlab_testkit::run_ok(latlab!().args(args))
}

/// `latlab measure ARGS` with this machine's policy (fifo as root, else other) must succeed.
fn measure(args: &[&str]) -> Output {
    let mut all = vec!["measure"];
    all.extend_from_slice(args);
    all.extend(policy_args());
    run_ok(&all)
}

fn check_invariants(r: &serde_json::Value, periods: u64, windows: usize) {
    assert_eq!(r["schema"], "latlab.run");
    let threads = r["threads"].as_array().unwrap();
    assert!(!threads.is_empty());
    let mut total = 0;
    for t in threads {
        let s = &t["stats"];
        let count = s["count"].as_u64().unwrap();
        let missed = t["missed"].as_u64().unwrap();
        assert_eq!(
            count + missed,
            periods,
            "count + missed = duration / interval"
        );
        assert_eq!(t["expected_periods"].as_u64(), Some(periods));
        let (min, p50, p99, max) = (
            s["min"].as_u64().unwrap(),
            s["p50"].as_u64().unwrap(),
            s["p99"].as_u64().unwrap(),
            s["max"].as_u64().unwrap(),
        );
        assert!(min <= p50 && p50 <= p99 && p99 <= max, "{s}");
        let h = &t["histogram"];
        assert_eq!(h["count"].as_u64().unwrap(), count);
        let bucket_total: u64 = h["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b[1].as_u64().unwrap())
            .sum();
        assert_eq!(bucket_total, count, "histogram total = count");
        assert_eq!(h["max"].as_u64().unwrap(), max);
        let w = t["windows"].as_array().unwrap();
        assert_eq!(w.len(), windows, "one window per window period");
        let wsum: u64 = w.iter().map(|w| w["count"].as_u64().unwrap()).sum();
        assert_eq!(wsum, count);
        let wmissed: u64 = w.iter().map(|w| w["missed"].as_u64().unwrap()).sum();
        assert_eq!(wmissed, missed);
        assert_eq!(
            t["corrected"]["count"].as_u64().unwrap(),
            count + missed,
            "corrected histogram adds the missed periods"
        );
        total += count;
    }
    assert_eq!(r["overall"]["stats"]["count"].as_u64().unwrap(), total);
}

#[test]
fn a_real_run_writes_consistent_json_and_cyclictest_files() {
    let dir = tempfile::tempdir().unwrap();
    let (json, hist, ct) = (
        dir.path().join("r.json"),
        dir.path().join("h.txt"),
        dir.path().join("ct.json"),
    );
    let mut args = vec!["-D", "2s", "-i", "1ms", "--window", "500ms", "-q", "--json"];
    let (j, h, c) = (
        json.to_str().unwrap(),
        hist.to_str().unwrap(),
        ct.to_str().unwrap(),
    );
    args.extend([j, "--histfile", h, "--cyclictest-json", c]);
    let out = measure(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // -q: the latency table alone (its header row first), no opening line.
    assert!(
        stdout.starts_with("thread ") && stdout.contains("p99.9"),
        "the table alone: {stdout}"
    );
    for block in ["run:", "kernel:", "duration:", "samplers"] {
        assert!(!stdout.contains(block), "-q printed {block}: {stdout}");
    }
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("latlab: measuring"),
        "{out:?}"
    );
    let r = read_json(&json);
    check_invariants(&r, 2000, 4);
    assert_eq!(r["stop"]["reason"], "duration");
    assert_eq!(r["environment"]["memory_locked"], is_root());

    // cyclictest -h layout: a row per µs, tab-separated per-thread counts, footers.
    let text = std::fs::read_to_string(&hist).unwrap();
    let nthreads = r["threads"].as_array().unwrap().len();
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.iter().filter(|l| !l.is_empty()).count(), 400);
    assert!(rows[0].starts_with("000000 "));
    assert_eq!(rows[0].split('\t').count(), nthreads);
    for footer in [
        "# Min Latencies:",
        "# Avg Latencies:",
        "# Max Latencies:",
        "# Histogram Overflows:",
    ] {
        assert!(text.contains(footer), "{footer} missing");
    }
    let ctj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ct).unwrap()).unwrap();
    assert_eq!(ctj["num_threads"].as_u64().unwrap() as usize, nthreads);
    assert_eq!(
        ctj["thread"]["0"]["cycles"].as_u64(),
        r["threads"][0]["stats"]["count"].as_u64()
    );
    // Its "cmdline:" measures the same way again.
    let line = ctj["cmdline:"].as_str().unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[..2], ["latlab", "measure"], "{line}");
    let again = latlab_testkit::run_stdout(latlab!().args(&words[1..]).args([
        "-q",
        "--no-samplers",
        "--json",
        "-",
    ]));
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    for key in [
        "method",
        "interval_ns",
        "duration_ns",
        "cpus",
        "policy",
        "priority",
        "mlock",
        "window_ns",
    ] {
        assert_eq!(again["config"][key], r["config"][key], "{key}: {line}");
    }
}

#[test]
fn loops_bound_the_run_and_json_can_go_to_stdout() {
    let r = json(&measure(&[
        "-l", "300", "-i", "1ms", "-a", "0", "--json", "-",
    ]));
    assert_eq!(r["stop"]["reason"], "loops");
    check_invariants(&r, 300, 1);
}

#[test]
fn thread_wakeup_method_measures_from_wake_call() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut args = vec![
        "-m", "futex", "-D", "1s", "-i", "1ms", "-a", "0", "-q", "--json",
    ];
    args.push(json.to_str().unwrap());
    measure(&args);
    let r = read_json(&json);
    assert_eq!(r["config"]["method"], "futex");
    // The waker ran where the engine put it by default: the first CPU not measured (CPU 0
    // itself on a machine of one CPU). The result says so; it said nothing.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let waker = if online.trim() == "0" { 0 } else { 1 };
    assert_eq!(r["config"]["waker_cpu"], waker, "{}", r["config"]);
    let t = &r["threads"][0];
    let count = t["stats"]["count"].as_u64().unwrap();
    assert_eq!(count + t["missed"].as_u64().unwrap(), 1000);
}

#[test]
fn sigterm_ends_the_run_cleanly_and_writes_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let hist = dir.path().join("h.txt");
    let mut args = vec!["measure", "-i", "1ms", "-q", "--json"];
    args.push(json.to_str().unwrap());
    args.extend(["--histfile", hist.to_str().unwrap()]);
    args.extend(policy_args());
    let (out, _) = signal_after(
        latlab!().args(&args),
        Duration::from_millis(1500),
        libc::SIGTERM,
        Duration::from_secs(20),
    );
    latlab_testkit::assert_ok(&out);
    let r = read_json(&json);
    assert_eq!(r["stop"]["reason"], "signal");
    assert_eq!(r["stop"]["signal"], "SIGTERM");
    assert!(r["overall"]["stats"]["count"].as_u64().unwrap() > 500);
    assert!(
        std::fs::read_to_string(&hist)
            .unwrap()
            .contains("# Max Latencies:")
    );
}

#[test]
fn break_stops_the_run_with_its_reason() {
    let r = json(&measure(&[
        "-D", "10s", "-a", "0", "-b", "1ns", "--json", "-",
    ]));
    assert_eq!(r["stop"]["reason"], "break");
    assert!(r["elapsed_ns"].as_u64().unwrap() < 2_000_000_000);
    // On every CPU: each thread whose samples went over the threshold before the stop is
    // named beside the one that stopped the run, with its largest sample.
    let out = measure(&["-D", "10s", "-b", "1ns", "--json", "-"]);
    let (r, err) = (json(&out), String::from_utf8_lossy(&out.stderr));
    let line = latlab_testkit::line_with(&err, "latlab: break: ");
    let stopper = r["stop"]["thread"].as_u64().unwrap() as usize;
    let threads = r["threads"].as_array().unwrap();
    for (i, t) in threads.iter().enumerate() {
        let (label, max) = (t["label"].as_str().unwrap(), &t["stats"]["max"]);
        let max_us = latlab_model::units::format_us(max.as_u64().unwrap(), 1);
        let named = line.contains(&format!("; {label} saw {max_us} us before the stop"));
        let over = t["stats"]["count"].as_u64().unwrap() > 0
            && (i != stopper || max.as_u64() > r["stop"]["value_ns"].as_u64());
        assert_eq!(named, over, "{label}: {line}\n{t}");
    }
    assert!(line.starts_with(&format!(
        "latlab: break: {} saw ",
        threads[stopper]["label"].as_str().unwrap()
    )));
}

/// Without the rights for SCHED_FIFO, the error names the capability and suggests
/// `--policy other`. As root this drops privileges with setpriv; otherwise it runs as is.
#[test]
fn realtime_policy_without_rights_names_the_capability() {
    let Some(mut cmd) = latlab_testkit::unprivileged(env!("CARGO_BIN_EXE_latlab"), "-sys_nice")
    else {
        return;
    };
    let out = cmd
        .args(["measure", "-D", "1s", "--policy", "fifo", "--no-mlock"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        eprintln!("skipped: this user may use SCHED_FIFO (RLIMIT_RTPRIO set)");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CAP_SYS_NICE"), "{err}");
    assert!(err.contains("--policy other"), "{err}");
    // Said before a measurement is announced: the refusal is all there is.
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("latlab: measuring"), "{err}");
}

/// A process that may not lock its memory still measures, warns, and records
/// `memory_locked: false`. As root this drops to an unprivileged user with setpriv.
#[test]
fn failed_memory_lock_is_recorded_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // The unprivileged user must be able to write the result.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let Some(mut cmd) =
        latlab_testkit::unprivileged(env!("CARGO_BIN_EXE_latlab"), "-ipc_lock,-sys_nice")
    else {
        return;
    };
    latlab_testkit::run_ok(
        cmd.args([
            "measure", "-D", "1s", "-a", "0", "--policy", "other", "-q", "--json",
        ])
        .arg(&json),
    );
    let r = read_json(&json);
    if r["environment"]["memory_locked"] == true {
        eprintln!("skipped: this user may lock all of latlab's memory (RLIMIT_MEMLOCK is large)");
        return;
    }
    assert!(
        r["environment"]["mlock_error"]
            .as_str()
            .unwrap()
            .contains("mlockall")
    );
    let warnings = r["environment"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("memory is not locked"))
    );
    assert!(r["overall"]["stats"]["count"].as_u64().unwrap() > 500);
}

/// SCHED_DEADLINE threads (unpinned, as the kernel requires) measure like any other policy.
#[test]
fn deadline_policy_runs_as_root() {
    if !latlab_testkit::root_or_skip("SCHED_DEADLINE") {
        return;
    }
    let out = run_ok(&[
        "measure",
        "--policy",
        "deadline",
        "--dl-runtime",
        "200us",
        "-i",
        "1ms",
        "-D",
        "1s",
        "--json",
        "-",
    ]);
    let r = json(&out);
    assert_eq!(r["config"]["policy"], "deadline");
    assert_eq!(r["config"]["cpus"], serde_json::Value::Null, "unpinned");
    for t in r["threads"].as_array().unwrap() {
        let count = t["stats"]["count"].as_u64().unwrap();
        assert_eq!(count + t["missed"].as_u64().unwrap(), 1000);
    }
}

/// A real-time thread of another process that outranks the measuring threads on their CPU is
/// named in the result's warnings; one below their priority is not.
#[test]
fn real_time_threads_that_outrank_the_measurement_are_named() {
    if !latlab_testkit::root_or_skip("starting real-time threads")
        || !latlab_testkit::require("chrt")
    {
        return;
    }
    /// A `sleep` at SCHED_FIFO `prio`, killed when dropped.
    struct Sleeper(std::process::Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = (self.0.kill(), self.0.wait());
        }
    }
    let start = |prio: &str| {
        let child = std::process::Command::new("chrt")
            .args(["-f", prio, "sleep", "30"])
            .spawn()
            .unwrap();
        // Measure only once chrt has set the policy and become `sleep`.
        let stat = format!("/proc/{}/stat", child.id());
        latlab_testkit::process::wait_for("the sleeper", Duration::from_secs(10), || {
            std::fs::read_to_string(&stat).is_ok_and(|s| {
                let after = s.rsplit(')').next().unwrap_or("");
                let fields: Vec<&str> = after.split_whitespace().collect();
                s.contains("(sleep)") && fields.get(41 - 3) == Some(&"1")
            })
        });
        Sleeper(child)
    };
    let (above, below) = (start("96"), start("10"));
    let out = run_ok(&[
        "measure", "-D", "0.2s", "-a", "0", "-p", "95", "-q", "--json", "-",
    ]);
    let r = json(&out);
    let (above, below) = (&above.0, &below.0);
    let warnings = r["environment"]["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "PID {} sleep (1 thread, fifo 96, on CPU 0)",
            above.id()
        )),
        "{warnings}"
    );
    assert!(
        !warnings.contains(&format!("PID {} ", below.id())),
        "{warnings}"
    );
}

#[test]
fn samplers_run_beside_the_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    // Without -q: the summary with its samplers block.
    let mut args = vec!["-D", "1.1s", "--sample-period", "200ms", "--json"];
    let p = path.to_str().unwrap().to_string();
    args.push(&p);
    let out = measure(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("samplers: every 200ms"), "{text}");
    let r = read_json(&path);
    let s = &r["samples"];
    let series = s["series"].as_array().unwrap();
    // Five full periods and the partial last one; times count from the start of measuring,
    // and the first period began before it. (Another test's real-time load can keep the
    // sampling thread waiting: how long the first period lasts is not fixed.)
    assert!(series.len() >= 5, "{}", series.len());
    let first = series[0]["at_ns"].as_u64().unwrap();
    assert!(
        first > 0 && first <= series[0]["dt_ns"].as_u64().unwrap(),
        "{first}"
    );
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n_online = latlab_model::units::CpuList::parse(online.trim())
        .unwrap()
        .len();
    assert_eq!(s["cpus"].as_array().unwrap().len(), n_online);
    for c in s["cpus"].as_array().unwrap() {
        let u = c["util_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&u));
    }
    // Power is a list of sources or the reason there is none; never both, never neither.
    let power = &s["power_sources"];
    assert!(
        power.is_array() || power["unavailable"].is_string(),
        "{power}"
    );

    let out = run_ok(&[
        "measure",
        "-D",
        "0.2s",
        "--no-samplers",
        "-q",
        "--json",
        "-",
    ]);
    let r = json(&out);
    assert!(r.get("samples").is_none());
}

#[test]
fn loads_run_beside_the_measurement_and_report_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let p = path.to_str().unwrap().to_string();
    let args = [
        "-D",
        "1s",
        "--load",
        "matrix:size=64",
        "--load",
        "procfs",
        "--load-cpus",
        "0",
        "-q",
        "--json",
        &p,
    ];
    let out = measure(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("load:") && text.contains("matrix:size=64"),
        "{text}"
    );
    let r = read_json(&path);
    let reports = r["loads"]["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    for rep in reports {
        assert_eq!(rep["cpus"], serde_json::json!([0]));
        let rate = rep["throughput"][0]["rate"].as_f64().unwrap();
        assert!(rate > 0.0, "{rep}");
        // The loads ran for the whole measurement.
        assert!(
            rep["elapsed_ns"].as_u64().unwrap() >= 1_000_000_000,
            "{rep}"
        );
    }
    assert!(!r["samples"]["series"].as_array().unwrap().is_empty());
}

#[test]
fn a_load_schedule_records_its_phases() {
    let measured = |length: &[&str], schedule: &str| {
        json(&run_ok(&[
            "measure",
            length[0],
            length[1],
            "--load-schedule",
            schedule,
            "--load-cpus",
            "0",
            "--no-samplers",
            "--policy",
            "other",
            "--no-mlock",
            "-q",
            "--json",
            "-",
        ]))
    };
    let r = measured(&["-D", "0.9s"], "idle 300ms, cpu 300ms, procfs 300ms");
    let phases = r["loads"]["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3, "{phases:?}");
    let mut last_end = 0;
    for (i, p) in phases.iter().enumerate() {
        assert_eq!(p["index"].as_u64().unwrap(), i as u64);
        let (s, e) = (
            p["start_ns"].as_u64().unwrap(),
            p["end_ns"].as_u64().unwrap(),
        );
        assert!(s >= last_end && e > s, "{p}");
        last_end = e;
    }
    assert_eq!(phases[1]["spec"], "cpu");
    let reports = r["loads"]["reports"].as_array().unwrap();
    assert!(reports.iter().any(|x| x["kind"] == "cpu"));
    let warned = |r: &serde_json::Value| {
        r["environment"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("the load schedule lasts"))
    };
    assert!(!warned(&r), "the schedule fit: {}", r["environment"]);
    // A run that ends before its schedule (a loop count; a --duration shorter than the
    // schedule is refused as bad input) says which phases did not run.
    let r = measured(&["-l", "300"], "idle 300ms, cpu 300ms");
    assert!(warned(&r), "{}", r["environment"]);
}

#[test]
fn a_bad_or_impossible_load_fails_before_measuring() {
    let out = run_exit(
        latlab!().args(["measure", "-D", "1s", "--load", "matrix:size=0"]),
        2,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = run_exit(
        latlab!().args(["measure", "-D", "1s", "--load", "bogus"]),
        2,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
}

/// As root: a profile is applied for the run (the cpuidle `disable` files change while it runs)
/// and everything is back afterwards.
#[test]
fn a_profile_is_applied_for_the_run_and_restored() {
    if !latlab_testkit::root_or_skip("applying a profile") {
        return;
    }
    let snapshot = || {
        let mut v = common::idle_disable_files();
        for f in [
            "/proc/sys/kernel/timer_migration",
            "/proc/sys/vm/stat_interval",
        ] {
            if let Ok(t) = std::fs::read_to_string(f) {
                v.insert(f.into(), t);
            }
        }
        v
    };
    let before = snapshot();
    let state = tempfile::tempdir().unwrap();
    let out = run_ok(&[
        "measure",
        "-D",
        "0.5s",
        "--profile",
        "lowlatency",
        "--state-dir",
        state.path().to_str().unwrap(),
        "-q",
        "--json",
        "-",
    ]);
    assert_eq!(snapshot(), before, "the system is as it was");
    let r = json(&out);
    assert_eq!(r["environment"]["profile"], "lowlatency");
    let tuning = r["environment"]["tuning"].as_array().unwrap();
    assert!(!tuning.is_empty());
    // (Tests beside it may be measuring at real-time priority, or running a real-time load:
    // their threads are named, and the samplers they hold off said.)
    let warnings = r["environment"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().all(|w| {
            let w = w.as_str().unwrap();
            w.starts_with("real-time threads of other processes")
                || w.starts_with("the samplers took ")
        }),
        "{warnings:?}"
    );

    run_exit(
        latlab!().args(["measure", "-D", "1s", "--profile", "no-such-profile"]),
        2,
    );
}

#[test]
fn db_saves_the_run_and_a_bad_store_fails_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let out = run_ok(&[
        "measure",
        "-D",
        "0.2s",
        "--policy",
        "other",
        "--no-mlock",
        "-q",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("saved as run 1"));
    let store = latlab_store::Store::open_existing(&db).unwrap();
    let runs = store.list_runs(&Default::default()).unwrap();
    assert_eq!(runs.len(), 1);

    let not_a_store = dir.path().join("text.db");
    std::fs::write(&not_a_store, "hello, this is not SQLite at all, really").unwrap();
    let started = std::time::Instant::now();
    run_exit(
        latlab!().args(["measure", "-D", "5s", "--db", not_a_store.to_str().unwrap()]),
        2,
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refused before measuring"
    );
}

/// `latlab measure` for `duration` at fifo 90 on CPUs 0-1 beside an rt-hog at priority 50 on
/// the same CPUs, with `extra` options: its JSON. One at a time: two side by side keep each
/// other's threads off the CPUs (the samplers' last sample came 450 ms late so).
fn measured_beside_a_real_time_load(duration: &str, extra: &[&str]) -> serde_json::Value {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut args = vec![
        "measure",
        "-D",
        duration,
        "-a",
        "0-1",
        "-p",
        "90",
        "--load",
        "rt-hog:priority=50",
        "--load-cpus",
        "0-1",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-q", "--json", "-"]);
    json(&run_ok(&args))
}

/// The length a run reports is how long its threads measured, also when a real-time load on
/// every CPU could keep the coordinator waiting until RT throttling lets it run: it said 2.6 to
/// 4.0 s for a run of 2 s. And the load stops when the measurement ends.
#[test]
fn the_measured_length_is_the_threads_under_a_real_time_load() {
    if !latlab_testkit::root_or_skip("a real-time load") {
        return;
    }
    // The load and the measuring threads on every CPU, so the coordinator shares them; twice,
    // as when the coordinator gets to run varies from run to run.
    for _ in 0..2 {
        let v = measured_beside_a_real_time_load("1s", &["--no-samplers"]);
        let elapsed = v["elapsed_ns"].as_u64().unwrap();
        // The last period ends at 1 s, plus the wake-up latency of a thread above the load.
        assert!(
            (1_000_000_000..1_100_000_000).contains(&elapsed),
            "{elapsed} ns measured for 1 s"
        );
        // The load ends with the measurement: the coordinator runs above it (at normal
        // priority the load went on for 2.8 to 3.9 s).
        let load = v["loads"]["reports"][0]["elapsed_ns"].as_u64().unwrap();
        assert!(
            load < 1_500_000_000,
            "the load ran {load} ns beside a measurement of 1 s"
        );
    }
}

/// The samplers' series covers the measurement, also beside a real-time load that keeps the
/// sampling thread (normal priority) off the CPUs: it began about 0.9 s late and went on while
/// the loads stopped, so a run's idle residency counted time that was not measured.
#[test]
fn the_samplers_cover_the_measurement_under_a_real_time_load() {
    if !latlab_testkit::root_or_skip("a real-time load") {
        return;
    }
    let v = measured_beside_a_real_time_load("1.5s", &["--sample-period", "100ms"]);
    let elapsed = v["elapsed_ns"].as_u64().unwrap() as i64;
    let series = v["samples"]["series"].as_array().unwrap();
    let span = |s: &serde_json::Value| {
        let at = s["at_ns"].as_u64().unwrap() as i64;
        (at - s["dt_ns"].as_u64().unwrap() as i64, at)
    };
    // The baseline is read before measuring starts, the last sample when it has ended.
    let (first, _) = span(&series[0]);
    let (_, last) = span(series.last().unwrap());
    assert!(first <= 0, "the samplers began {first} ns after measuring");
    assert!(
        (elapsed..elapsed + 200_000_000).contains(&last),
        "the samplers ended at {last} ns, measuring at {elapsed} ns"
    );
    // One series without holes.
    for pair in series.windows(2) {
        assert_eq!(span(&pair[0]).1, span(&pair[1]).0);
    }
}

/// `sh -c script` in a mount namespace of its own (`unshare -m`), whose mounts vanish with it:
/// `$LATLAB` is latlab, `$TMPDIR` `tmp` where given.
fn in_private_mounts(script: &str, tmp: Option<&std::path::Path>) -> Output {
    let mut c = latlab_testkit::command("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", script])
        .env("LATLAB", env!("CARGO_BIN_EXE_latlab"));
    if let Some(t) = tmp {
        c.env("TMPDIR", t);
    }
    c.output().unwrap()
}

/// A `--break` writes its marker to tracefs and the result says where (the field was always
/// null). Run in a mount namespace of its own with tracefs mounted there, which vanishes with
/// it: nothing of the system is changed.
#[test]
fn a_break_marker_written_is_recorded_in_the_result() {
    if !latlab_testkit::root_or_skip("mounting tracefs in a private mount namespace")
        || !latlab_testkit::require("unshare")
    {
        return;
    }
    let out = in_private_mounts(
        "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || exit 9
         $LATLAB measure -D 10s -a 0 -b 1ns -q --no-samplers --json - || exit 8
         grep -c 'latlab: break: cpu0 latency .* us > 0 us' /sys/kernel/tracing/trace >&2",
        None,
    );
    if out.status.code() == Some(9) {
        eprintln!("skipped: tracefs cannot be mounted here");
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let r = json(&out);
    assert_eq!(r["stop"]["reason"], "break");
    assert_eq!(
        r["environment"]["trace_marker"], "/sys/kernel/tracing/trace_marker",
        "{}",
        r["environment"]
    );
    // And the marker is in the trace (grep's count, the last line of stderr).
    let count = err.lines().last().unwrap_or_default().trim();
    assert!(count.parse::<u32>().is_ok_and(|n| n >= 1), "{err}");
}

/// A run the store cannot take (its disk full) is not lost: it is written to a file of its own,
/// the error says where and how to store it, and that file stores. The store lives on a small
/// tmpfs in a mount namespace of its own, which vanishes with it.
#[test]
fn a_run_the_full_store_cannot_take_is_kept_in_a_file() {
    if !latlab_testkit::root_or_skip("mounting a small tmpfs in a private mount namespace")
        || !latlab_testkit::require("unshare")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (disk, rescue) = (dir.path().join("disk"), dir.path().join("tmp"));
    std::fs::create_dir_all(&disk).unwrap();
    std::fs::create_dir_all(&rescue).unwrap();
    // The store is made, the disk filled but for 128 KiB: enough to open the store, not to
    // save thousands of spikes.
    let script = format!(
        "mount -t tmpfs -o size=4m tmpfs {d} || exit 9
         $LATLAB measure -l 10 -q --no-samplers --policy other --db {d}/s.db 2>/dev/null >&2 || exit 7
         dd if=/dev/zero of={d}/pad bs=4k count=32 2>/dev/null
         dd if=/dev/zero of={d}/fill bs=4k 2>/dev/null
         rm {d}/pad
         $LATLAB measure -D 3s -i 100us -a 0 --spike 1ns -q --no-samplers --policy other \
           --db {d}/s.db",
        d = disk.display()
    );
    let out = in_private_mounts(&script, Some(&rescue));
    if out.status.code() == Some(9) {
        eprintln!("skipped: a tmpfs cannot be mounted here");
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("database or disk is full"), "{err}");
    let kept: Vec<_> = std::fs::read_dir(&rescue)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}: {err}");
    let file = kept[0].to_str().unwrap();
    assert!(
        file.contains("latlab-unsaved-") && err.contains(&format!("the run is kept in {file}")),
        "{err}"
    );
    let db = dir.path().join("other.db");
    run_exit(
        latlab!().args(["db", "import-json", file, "--db", db.to_str().unwrap()]),
        0,
    );
    let out = run_exit(
        latlab!().args(["db", "show", "1", "--json", "--db", db.to_str().unwrap()]),
        0,
    );
    let stored: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rescued: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(stored, rescued);
    assert!(stored["spikes"]["kept"].as_array().unwrap().len() > 1000);

    // A store on a file system with no space left at all is refused before measuring, as a
    // failure (no bad input: it may work later), and the error says the file system is full
    // (SQLite says only "disk I/O error"). A new store there is not left half made.
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs {d} || exit 9
         $LATLAB measure -l 10 -q --no-samplers --policy other --db {d}/s.db 2>/dev/null >&2 || exit 7
         dd if=/dev/zero of={d}/fill bs=4k 2>/dev/null
         $LATLAB measure -D 1s -q --no-samplers --policy other --db {d}/s.db || echo \"rc $?\" >&2
         $LATLAB measure -D 1s -q --no-samplers --policy other --db {d}/new.db
         rc=$?; ls {d} >&2; exit $rc",
        d = disk.display()
    );
    let out = in_private_mounts(&script, None);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("rc 1"), "{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("; the file system holding it is full").count(),
        2,
        "{err}"
    );
    assert!(!err.lines().any(|l| l.starts_with("new.db")), "{err}");
}

/// The summary says how many spikes a `--spike` run kept and how many it only counted beyond
/// `--spike-limit` (only the JSON said so).
#[test]
fn the_summary_says_the_spikes_kept_and_the_ones_only_counted() {
    let out = measure(&[
        "-D",
        "0.5s",
        "-a",
        "0",
        "--spike",
        "1us",
        "--spike-limit",
        "5",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("spikes:"))
        .unwrap_or_else(|| panic!("{text}"));
    // Every wake-up takes over 1 µs: five kept, the rest counted.
    assert!(
        line.starts_with("spikes:   5 above 1.0 µs kept (in the JSON and the store); ")
            && line.ends_with(
                " more counted but not kept (the largest are kept: --spike-limit 5 a run, 1024 \
                 a thread a window)"
            ),
        "{line}"
    );
}

/// Loads go on every online CPU by default, the measured ones too, and may be put on a measured
/// CPU: with `-a 1` the one load worker went to CPU 0 only (latlab had confined its own
/// coordinator to the CPUs not measured, and took that for the process's), and an rt-hog with
/// `--load-cpus 1` could not start ("not among the CPUs this process may use (0)").
#[test]
fn loads_go_on_the_measured_cpus_too() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n_online = latlab_model::units::CpuList::parse(online.trim())
        .unwrap()
        .len();
    if n_online < 2 {
        eprintln!("skipped: needs 2 online CPUs, one measured and one not");
        return;
    }
    let mut args = vec!["measure", "-a", "1", "-D", "0.5s", "--no-samplers", "-q"];
    args.extend(policy_args());
    let v = json(&run_ok(
        &[&args[..], &["--load", "cpu", "--json", "-"]].concat(),
    ));
    assert_eq!(
        v["loads"]["reports"][0]["workers"].as_u64(),
        Some(n_online as u64),
        "one worker per online CPU: {}",
        v["loads"]
    );
    if !latlab_testkit::root_or_skip("rt-hog's real-time threads") {
        return;
    }
    let v = json(&run_ok(&[
        "measure",
        "-a",
        "1",
        "-D",
        "0.5s",
        "--no-samplers",
        "-q",
        "--policy",
        "rr",
        "-p",
        "20",
        "--load",
        "rt-hog:threads=1,policy=rr,priority=1",
        "--load-cpus",
        "1",
        "--json",
        "-",
    ]));
    assert_eq!(v["loads"]["reports"][0]["workers"].as_u64(), Some(1));
}

/// The most memory `measure` held locked while it ran (`VmLck`, KiB), beside `load` if given.
fn most_locked_kib(load: Option<&str>) -> u64 {
    let mut cmd = latlab!();
    cmd.args(["measure", "-a", "0", "-D", "2s", "-q", "--no-samplers"])
        .args(policy_args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(load) = load {
        cmd.args(["--load", load, "--load-cpus", "1"]);
    }
    let mut child = cmd.spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut most = 0;
    while child.try_wait().unwrap().is_none() {
        let locked = std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmLck:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        most = most.max(locked);
        std::thread::sleep(Duration::from_millis(20));
    }
    most
}

/// Memory locking locks the measurement's memory, not a load's: 64 load threads' stacks (2 MiB
/// each) are not faulted in and locked with it. (They were: a load of 256 threads held a
/// one-second measurement for 14 s, and one of 4,096 never ended.)
#[test]
fn memory_locking_leaves_a_loads_threads_alone() {
    if !latlab_testkit::root_or_skip("mlockall beyond the default RLIMIT_MEMLOCK") {
        return;
    }
    let alone = most_locked_kib(None);
    let beside = most_locked_kib(Some("messaging:groups=1,pairs=32"));
    assert!(alone > 0, "the measurement's memory is locked");
    // 64 stacks of 2 MiB are 131072 KiB; the loads' own small buffers may be mapped by then.
    assert!(
        beside < alone + 32 * 1024,
        "locked {beside} KiB beside the load against {alone} KiB alone"
    );
}

/// A schedule without `-D` lasts as long as its phases (it ran until stopped, as a measurement
/// without a length does, its last load long gone).
#[test]
fn a_load_schedule_without_a_length_lasts_its_phases() {
    let out = latlab_testkit::process::output_within(
        latlab!()
            .args(["measure", "-a", "0", "-q", "--no-samplers", "--json", "-"])
            .args(["--load-schedule", "idle 200ms, cpu 300ms"])
            .args(policy_args()),
        Duration::from_secs(30),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        latlab_testkit::stderr(&out)
    );
    let r = json(&out);
    assert_eq!(r["config"]["duration_ns"], 500_000_000);
    assert_eq!(r["stop"]["reason"], "duration");
}

/// A /dev/cpu_dma_latency request another process holds is part of what is measured: the run
/// says so, as it says of competing real-time threads.
#[test]
fn a_pm_qos_request_of_another_process_is_said() {
    if !latlab_testkit::root_or_skip("holding /dev/cpu_dma_latency") {
        return;
    }
    let mut hold = latlab!()
        .args(["tune", "hold", "--us", "0", "--duration", "20s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Held once the device reads 0.
    let held =
        || std::fs::read("/dev/cpu_dma_latency").is_ok_and(|b| b.get(..4) == Some(&[0, 0, 0, 0]));
    let t0 = std::time::Instant::now();
    while !held() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (out, r) = briefly_on_cpu0(&[]);
    let _ = hold.kill();
    let _ = hold.wait();
    let warnings = r["environment"]["warnings"].to_string();
    assert!(
        warnings.contains("another process holds a /dev/cpu_dma_latency request of 0 µs"),
        "{warnings}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another process holds"),
        "said with -q too"
    );
}

/// `measure` for 0.3 s on CPU 0 with `extra`: its output and its JSON result.
fn briefly_on_cpu0(extra: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut args = vec!["-D", "0.3s", "-a", "0", "-q", "--no-samplers"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", file.to_str().unwrap()]);
    let out = measure(&args);
    (out, read_json(&file))
}

/// A profile's own PM QoS request, held before the measurement reads the device, is not another
/// process's: every run of such a profile (and of `tune search`'s `pm_qos` candidate) warned of
/// it, and reports listed it under "Before trusting the numbers".
#[test]
fn a_profiles_own_pm_qos_request_is_not_another_process() {
    if !latlab_testkit::root_or_skip("holding /dev/cpu_dma_latency") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("pmqos.toml");
    std::fs::write(
        &profile,
        "description = \"pm qos only\"\n[system]\ncpu_dma_latency_us = 0\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let (_, r) = briefly_on_cpu0(&[
        "--profile",
        profile.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert_eq!(
        r["environment"]["pm_qos_held_us"], 0,
        "{}",
        r["environment"]
    );
    let warnings = r["environment"]["warnings"].to_string();
    assert!(!warnings.contains("another process holds"), "{warnings}");
}

/// `--sysroot TREE --profile P` tunes the tree, and a tree cannot be measured: the run, of this
/// machine untuned, says so (it said nothing, and carried the profile's name).
#[test]
fn a_profile_applied_to_a_tree_is_said_not_to_be_what_was_measured() {
    let tree = latlab_testkit::copy_machine("vm", &["tune"]);
    let root = tree.path().to_str().unwrap();
    let state = tree.path().join("state");
    let out = run_ok(&[
        "--sysroot",
        root,
        "measure",
        "-D",
        "0.2s",
        "-a",
        "0",
        "--policy",
        "other",
        "--profile",
        "lowlatency",
        "--state-dir",
        state.to_str().unwrap(),
        "-q",
        "--json",
        "-",
    ]);
    let r = json(&out);
    let warnings = r["environment"]["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "profile lowlatency was applied to the system under --sysroot {root}, not to this \
             machine, which was measured"
        )),
        "{warnings}"
    );
}

/// A thread-to-thread run stopped for 0.3 s (SIGSTOP, as a stall that holds the waker and the
/// woken thread off their CPU): the missed periods count in the corrected statistics at the
/// latency they would have had, as a timer method's do. They were left out (a corrected count
/// of the samples alone and a maximum of the wake-ups that happened), so the statistics the
/// reports and `tune search` go by hid the stall.
#[test]
fn a_stalled_waker_s_missed_periods_count_in_the_corrected_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = latlab!()
        .args([
            "measure", "-m", "futex", "-a", "0", "-D", "1.5s", "--policy", "other",
        ])
        .args(["-q", "--no-samplers", "--json"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: a child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(child.wait().unwrap().success());
    let r = read_json(&out);
    let t = &r["threads"][0];
    let (count, missed) = (
        t["stats"]["count"].as_u64().unwrap(),
        t["missed"].as_u64().unwrap(),
    );
    assert!(missed >= 200, "{missed} periods missed in a stop of 300 ms");
    assert_eq!(t["corrected"]["count"].as_u64().unwrap(), count + missed);
    let max = t["corrected"]["max"].as_u64().unwrap();
    assert!(
        max >= 200_000_000,
        "corrected max {max} ns after a stop of 300 ms"
    );
    let in_windows: u64 = t["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["missed"].as_u64().unwrap())
        .sum();
    assert_eq!(in_windows, missed, "the windows hold every missed period");
}

/// Inside a cpuset (a container's, `taskset`'s) the default CPUs are the ones it allows, as is
/// `all`; a listed CPU outside it is refused as bad input (pinning there failed with EINVAL).
#[test]
fn measures_the_cpus_its_affinity_allows() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if !online.trim().starts_with("0-") && !online.trim().starts_with("0,1") {
        eprintln!(
            "skipped: CPUs 0 and 1 are not both online ({})",
            online.trim()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let on_cpu1 = |args: &[&str]| {
        let mut c = latlab_testkit::command("taskset");
        c.args([
            "-c",
            "1",
            env!("CARGO_BIN_EXE_latlab"),
            "measure",
            "-D",
            "0.3s",
            "-q",
        ])
        .args(args)
        .args(policy_args());
        c
    };
    for cpus in [&[][..], &["-a", "all"]] {
        let mut args = cpus.to_vec();
        args.extend(["--json", json.to_str().unwrap()]);
        latlab_testkit::run_ok(&mut on_cpu1(&args));
        let r = read_json(&json);
        assert_eq!(r["config"]["cpus"], serde_json::json!([1]), "{cpus:?}");
    }
    // Its own threads stay there too: a thread wake-up's waker went to CPU 0.
    latlab_testkit::run_ok(&mut on_cpu1(&[
        "-m",
        "futex",
        "--json",
        json.to_str().unwrap(),
    ]));
    assert_eq!(read_json(&json)["config"]["waker_cpu"], 1);
    for (args, option) in [
        (&["-a", "0-1"][..], "--cpus 0-1"),
        (&["--method", "futex", "--waker-cpu", "0"], "--waker-cpu 0"),
    ] {
        let o = run_exit(&mut on_cpu1(args), 2);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.trim(),
            format!(
                "latlab: error: {option}: CPU 0 is outside the CPUs this process may run on \
                 (accepted: CPU 1; its affinity, which a cpuset of its container or cgroup or \
                 taskset sets, allows no other)"
            ),
            "{args:?}"
        );
    }
}

/// A tree under --sysroot may list CPUs this machine lacks: measuring them (here, on this
/// machine) fails naming the CPUs this process may run on, not with a bare EINVAL.
#[test]
fn a_tree_s_cpu_this_machine_lacks_is_named() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if online.trim() != "0-1" && online.trim() != "0" {
        eprintln!("skipped: this machine has CPU 2 or 3 ({})", online.trim());
        return;
    }
    let tree = latlab_testkit::machine("amd-desktop");
    let o = run_exit(
        latlab!()
            .arg("--sysroot")
            .arg(&tree)
            .args(["measure", "-D", "0.2s", "-q"])
            .args(policy_args()),
        1,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(": this process may run only on CPU")
            && err.contains("a tree under --sysroot may list CPUs this machine lacks"),
        "{err}"
    );
}
