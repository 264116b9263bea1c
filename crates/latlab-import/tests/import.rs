//! Import of real output of cyclictest, stress-ng and jitterdebugger: recorded files (tests/data)
//! and, where the tools are installed, output produced by running them here.
#![allow(clippy::unwrap_used)]

use latlab_import::{Format, detect, import, parse_rfc2822};
use latlab_testkit::is_root;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// `text` without its lines that `drop` picks, each line ending in a line feed.
fn without_lines(text: &str, drop: impl Fn(&str) -> bool) -> String {
    text.lines()
        .filter(|l| !drop(l))
        .map(|l| format!("{l}\n"))
        .collect()
}

use latlab_testkit::require as have;

/// stress-ng's cyclic stressors run one at a time: two SCHED_DEADLINE ones at once exceed the
/// kernel's admission limit, and the second fails (with exit code 0 and no results).
fn stress_ng_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every thread's histogram equals the file's rows (in µs), and counts and maxima agree.
fn check_against_cyclictest_json(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap();
    let r = import(text, None, "ct.json").unwrap();
    assert_eq!(r.threads.len() as u64, v["num_threads"].as_u64().unwrap());
    for (i, t) in r.threads.iter().enumerate() {
        let src = &v["thread"][i.to_string()];
        assert_eq!(t.stats.count, src["cycles"].as_u64().unwrap());
        assert_eq!(t.stats.max, src["max"].as_u64().unwrap() * 1000 + 500);
        assert_eq!(t.cpu, src["cpu"].as_u64().map(|c| c as u32));
        for (us, n) in src["histogram"].as_object().unwrap() {
            let ns: u64 = us.parse::<u64>().unwrap() * 1000 + 500;
            let got: u64 = t
                .histogram
                .buckets()
                .filter(|b| b.low <= ns && ns <= b.high)
                .map(|b| b.count)
                .sum();
            // Overflow samples sit at the range end (one row past the last); rows below are exact.
            let last_row: u64 = src["histogram"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| k.parse::<u64>().unwrap())
                .max()
                .unwrap();
            if ns / 1000 < last_row {
                assert_eq!(got, n.as_u64().unwrap(), "thread {i} at {us} us");
            }
        }
    }
    // The round trip: latlab's cyclictest JSON writer gives back the same rows.
    let back: Value = serde_json::from_str(&latlab_report_json(&r)).unwrap();
    for i in 0..r.threads.len() {
        let a = &v["thread"][i.to_string()]["histogram"];
        let b = &back["thread"][i.to_string()]["histogram"];
        for (us, n) in a.as_object().unwrap() {
            assert_eq!(b[us], *n, "thread {i} row {us}");
        }
    }
}

fn latlab_report_json(r: &latlab_model::RunResult) -> String {
    latlab_report::cyclictest_json(r)
}

/// A file latlab wrote (`measure --cyclictest-json`) is read with latlab's options, not with
/// cyclictest's defaults: no PM QoS held where none was asked, memory locked where it was.
#[test]
fn latlab_written_cyclictest_json_keeps_its_own_settings() {
    let mut r = latlab_testkit::run::one_cpu("x", (1_700_000_000_000_000_000, 2_000_000_000));
    r.config.policy = latlab_model::Policy::Fifo;
    r.config.priority = 95;
    r.config.interval_ns = 500_000;
    r.config.duration_ns = Some(2_000_000_000);
    r.config.mlock = true;
    r.config.pm_qos_us = None;
    let back = import(&latlab_report_json(&r), None, "l.json").unwrap();
    let c = &back.config;
    assert_eq!(
        (c.policy, c.priority, c.interval_ns, c.duration_ns),
        (latlab_model::Policy::Fifo, 95, 500_000, Some(2_000_000_000))
    );
    assert_eq!(back.environment.pm_qos_held_us, None);
    assert!(back.environment.memory_locked && c.mlock);
    // Asked for: held; not locked where --no-mlock said so.
    r.config.pm_qos_us = Some(0);
    r.config.mlock = false;
    let back = import(&latlab_report_json(&r), None, "l.json").unwrap();
    assert_eq!(back.environment.pm_qos_held_us, Some(0));
    assert!(!back.environment.memory_locked && !back.config.mlock);
    // Its window and spike settings come back as they were measured.
    r.config.window_ns = 250_000_000;
    r.config.spike_threshold_ns = Some(30_000);
    r.config.spike_limit = 500;
    let back = import(&latlab_report_json(&r), None, "l.json").unwrap();
    let c = &back.config;
    assert_eq!(
        (c.window_ns, c.spike_threshold_ns, c.spike_limit),
        (250_000_000, Some(30_000), 500)
    );
    let beside = |r: &latlab_model::RunResult| {
        r.environment
            .warnings
            .iter()
            .find(|w| w.starts_with("measured beside"))
            .cloned()
    };
    assert_eq!(beside(&back), None, "measured idle");
    // Measured under a traced load: said, as the file holds no more of either.
    r.trace = Some(latlab_testkit::run::trace(&["hrtimer"], vec![], (0, 0)));
    r.loads.reports = vec![latlab_testkit::run::load("io:bs=1M", None)];
    let back = import(&latlab_report_json(&r), None, "l.json").unwrap();
    let line = beside(&back).unwrap();
    assert!(
        line.starts_with("measured beside --load io:bs=1M --trace hrtimer: the file holds nothing"),
        "{line}"
    );
}

#[test]
fn recorded_cyclictest_json() {
    let text = data("cyclictest.json");
    assert_eq!(detect(&text), Some(Format::CyclictestJson));
    check_against_cyclictest_json(&text);
    let r = import(&text, None, "ct.json").unwrap();
    assert_eq!(r.config.interval_ns, 1_000_000);
    assert_eq!(r.config.priority, 80);
    assert!(r.config.mlock);
    assert_eq!(r.config.loops, Some(500));
    assert_eq!(r.system.kernel_release, "6.18.44-fc-v669");
    assert_eq!(r.started_at, "2026-11-22T17:49:19.000000Z");
    // 264 samples of thread 0 lie beyond the 50 µs range: said, not hidden.
    let w = r.environment.warnings.join("\n");
    assert!(w.contains("264 of 500 samples lie beyond"), "{w}");
    assert!(w.contains("command line: cyclictest -m -p 80"), "{w}");
    // Same file, same id: a second import is recognisable.
    assert_eq!(r.id, import(&text, None, "again").unwrap().id);
    // cyclictest counts no missed periods: the 0 is unknown, and said so.
    assert!(!r.records_missed());
    // Its mean is of all the samples, those beyond the histogram's range too (where the
    // histogram's would be a lower bound): kept, moved to the middle of the microsecond.
    let file: Value = serde_json::from_str(&text).unwrap();
    for (i, t) in r.threads.iter().enumerate() {
        let avg = file["thread"][i.to_string()]["avg"].as_f64().unwrap();
        assert!(
            (t.stats.mean - (avg * 1000.0 + 500.0)).abs() < 1.0,
            "{}",
            t.label
        );
    }
    // What cyclictest itself did: -m locked its memory (it ends when it cannot), and without
    // --laptop it held /dev/cpu_dma_latency (at --latency, else 0), said to be inferred.
    assert!(r.environment.memory_locked);
    assert_eq!(r.environment.pm_qos_held_us, Some(0));
    assert!(
        w.contains("PM QoS: cyclictest holds /dev/cpu_dma_latency at 0 µs"),
        "{w}"
    );
    let mut v: Value = serde_json::from_str(&text).unwrap();
    for (line, held) in [
        ("cyclictest -p 80 --latency=20 -l 5", Some(20)),
        ("cyclictest -p 80 --latency 7 -l 5", Some(7)),
        ("cyclictest -p 80 --laptop -l 5", None),
    ] {
        v["cmdline:"] = line.into();
        let r = import(&v.to_string(), None, "ct.json").unwrap();
        assert_eq!(r.environment.pm_qos_held_us, held, "{line}");
        assert!(!r.environment.memory_locked, "{line}: no -m");
    }
}

/// A cyclictest JSON's configuration comes from its command line, in every spelling rt-tests
/// accepts; what the line leaves out is cyclictest's default (SCHED_OTHER without `-p`).
#[test]
fn cyclictest_command_lines_give_the_configuration() {
    use latlab_model::{Clock, Policy};
    let mut v: Value = serde_json::from_str(&data("cyclictest.json")).unwrap();
    let mut config = |line: &str| {
        v["cmdline:"] = line.into();
        let c = import(&v.to_string(), None, "ct.json").unwrap().config;
        let settings = (c.policy, c.priority, c.interval_ns, c.mlock, c.relative);
        (settings, c.clock, c.loops, c.duration_ns)
    };
    assert_eq!(
        config("cyclictest -t 2 -q"),
        (
            (Policy::Other, 0, 1_000_000, false, false),
            Clock::Monotonic,
            None,
            None
        )
    );
    assert_eq!(
        config("cyclictest -p80 --interval=250 --loops 7 --mlockall"),
        (
            (Policy::Fifo, 80, 250_000, true, false),
            Clock::Monotonic,
            Some(7),
            None
        )
    );
    assert_eq!(
        config("cyclictest --policy=rr -p 5 -i200 -r --clock=1 -D 10m"),
        (
            (Policy::Rr, 5, 200_000, false, true),
            Clock::Realtime,
            None,
            Some(600_000_000_000)
        )
    );
    // Flags bundled before an option with a value, as getopt reads them.
    for line in [
        "cyclictest -m -Sp90 -i200 -h400 -D10",
        "cyclictest -Smp90 -i 200 -D 10",
        "cyclictest -mSp 90 --interval 200 --duration=10 --clock 0",
    ] {
        assert_eq!(
            config(line),
            (
                (Policy::Fifo, 90, 200_000, true, false),
                Clock::Monotonic,
                None,
                Some(10_000_000_000)
            ),
            "{line}"
        );
    }
    assert!(config("cyclictest -rc 1 -t2").0.4);
    assert_eq!(config("cyclictest -rc 1 -t2").1, Clock::Realtime);
}

#[test]
fn recorded_cyclictest_histogram_text() {
    let text = data("cyclictest-h50.txt");
    assert_eq!(detect(&text), Some(Format::CyclictestHist));
    let r = import(&text, None, "ct.hist").unwrap();
    let json: Value = serde_json::from_str(&data("cyclictest.json")).unwrap();
    assert_eq!(r.threads.len(), 2);
    for (i, t) in r.threads.iter().enumerate() {
        let src = &json["thread"][i.to_string()];
        // The text and the JSON of the same run agree on counts and maxima.
        assert_eq!(t.stats.count, src["cycles"].as_u64().unwrap());
        assert_eq!(t.stats.max, src["max"].as_u64().unwrap() * 1000 + 500);
    }
    // Thread 0 ran past the rows (its mean the one printed), thread 1 did not (its rows'):
    // the run's mean pools both, no lower bound.
    let (t0, t1) = (&r.threads[0].stats, &r.threads[1].stats);
    assert!(t0.exact_mean.is_some() && !t1.mean_is_lower_bound());
    let o = &r.overall.stats;
    assert!(!o.mean_is_lower_bound(), "{o:?}");
    let pooled = (t0.exact_mean.unwrap() * t0.count as f64 + t1.mean * t1.count as f64)
        / (t0.count + t1.count) as f64;
    assert!((o.mean - pooled).abs() < 1e-6, "{} {pooled}", o.mean);
    // The text says what PM QoS request cyclictest held; nothing says its policy or length.
    assert_eq!(r.environment.pm_qos_held_us, Some(0));
    let summary = latlab_report::summary_table(&r);
    for line in [
        "PM QoS:   held at 0 µs",
        "policy:   not recorded;",
        "duration: not recorded\n",
        "stopped:  not recorded\n",
    ] {
        assert!(summary.contains(line), "{line:?} in\n{summary}");
    }
}

#[test]
fn recorded_stress_ng_cyclic() {
    let text = data("stress-ng-cyclic.log");
    assert_eq!(detect(&text), Some(Format::StressNgCyclic));
    let r = import(&text, None, "sng.log").unwrap();
    let t = &r.threads[0];
    assert_eq!(t.stats.count, 10_000);
    assert_eq!(t.stats.min, 10_575);
    assert_eq!(t.stats.max, 251_220);
    assert_eq!(r.config.interval_ns, 100_000);
    assert_eq!(r.config.policy, latlab_model::Policy::Rr);
    // stress-ng printed its p50 from its samples, finer than the histogram's 10 µs buckets.
    assert_eq!(t.stats.p50, 23_115);
    assert!(!r.records_missed());
}

#[test]
fn recorded_jitterdebugger() {
    let text = data("jitterdebugger-results.json");
    assert_eq!(detect(&text), Some(Format::Jitterdebugger));
    let r = import(&text, None, "results.json").unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r.threads.len(), 2);
    // Its threads sleep relative to the call (it was taken as cyclictest's absolute sleep).
    assert_eq!(r.config.method, latlab_model::Method::ClockNanosleep);
    assert!(r.config.relative);
    for t in &r.threads {
        let src = &v["cpu"][t.cpu.unwrap().to_string()];
        assert_eq!(t.stats.count, src["count"].as_u64().unwrap());
        assert_eq!(t.stats.max, src["max"].as_u64().unwrap() * 1000 + 500);
    }
}

/// jitterdebugger before 0.3 wrote no sysinfo block, and every release's histogram holds 1 ms:
/// samples past it are only counted, and its mean (of every sample) stays exact.
#[test]
fn older_jitterdebugger_results_and_samples_past_its_histogram() {
    let text = r#"{
  "version": 1,
  "cpu": {
    "0": {
      "histogram": {
        "10": 5,
        "20": 3
      },
      "count": 10,
      "min": 10,
      "max": 1500,
      "avg": 160.50
    }
  }
}
"#;
    assert_eq!(detect(text), Some(Format::Jitterdebugger));
    let r = import(text, None, "results.json").unwrap();
    let t = &r.threads[0];
    assert_eq!((t.stats.count, t.stats.max), (10, 1_500_500));
    assert_eq!(t.stats.exact_mean, Some(161_000.0));
    assert_eq!(t.stats.bounded_from_ns, Some(1_000_000));
    let said = r.environment.warnings.join("\n");
    assert!(
        said.contains("2 of 10 samples lie beyond the histogram range (1000 us)"),
        "{said}"
    );
    // Known to its resolution, not exact (a whole µs, truncated, at its middle).
    assert!(
        said.contains("only their maximum, 1500.5 us, is known, to the file's resolution"),
        "{said}"
    );
    assert!(!said.contains("and the mean,"), "{said}");
}

/// What each format leaves unknown is named in `environment.not_recorded`, so that no report
/// shows the default value as if it were measured.
#[test]
fn each_format_names_what_it_does_not_record() {
    let unrecorded = |file: &str| {
        import(&data(file), None, file)
            .unwrap()
            .environment
            .not_recorded
    };
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // The JSON carries cyclictest's command line (-m, the method).
    assert_eq!(unrecorded("cyclictest.json"), names(&["system"]));
    assert_eq!(
        unrecorded("cyclictest-h50.txt"),
        names(&["system", "memory", "method", "cpus"])
    );
    // The log names its method ('clock_ns'); a log without -v would not.
    assert_eq!(
        unrecorded("stress-ng-cyclic.log"),
        names(&["system", "memory"])
    );
    assert_eq!(
        unrecorded("jitterdebugger-results.json"),
        names(&["system", "memory"])
    );
}

#[test]
fn bad_files_say_what_and_where() {
    let e = import("hello", None, "x").unwrap_err();
    assert!(e.to_string().contains("not a format latlab reads"));
    let e = import(
        "{\"thread\": {}, \"num_threads\": 1",
        Some(Format::CyclictestJson),
        "x",
    )
    .unwrap_err();
    assert!(e.to_string().contains("invalid JSON"), "{e}");
    let e = import("# Max Latencies: 1\n000000 1 x\n", None, "x").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert_eq!(parse_rfc2822("Thu, 01 Jan 1970 01:00:00 +0100"), Some(0));
}

#[test]
fn live_cyclictest_output_round_trips() {
    if !have("cyclictest") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ct.json");
    let mut args = vec![
        "-l", "300", "-i", "500", "-q", "-h", "400", "-t", "1", "-a", "0",
    ];
    if is_root() {
        args.extend(["-m", "-p", "80"]);
    }
    let out = latlab_testkit::run_ok(
        Command::new("cyclictest")
            .args(&args)
            .arg(format!("--json={}", json.display())),
    );
    check_against_cyclictest_json(&std::fs::read_to_string(&json).unwrap());
    let hist = String::from_utf8_lossy(&out.stdout).to_string();
    let r = import(&hist, Some(Format::CyclictestHist), "stdout").unwrap();
    assert_eq!(r.threads[0].stats.count, 300);
    let w = r.environment.warnings.join("\n");
    assert!(!w.contains("lost or changed"), "its # Total: holds: {w}");
}

/// stress-ng --cyclic for 2000 samples at 200 µs with buckets of `dist` ns, verbose: its log.
/// None without stress-ng.
fn stress_ng_log(dist: &str) -> Option<String> {
    if !have("stress-ng") {
        return None;
    }
    let _one_at_a_time = stress_ng_lock();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sng.log");
    latlab_testkit::run_ok(
        Command::new("stress-ng")
            .args([
                "--cyclic",
                "1",
                "--cyclic-dist",
                dist,
                "--cyclic-sleep",
                "200000",
            ])
            .args(["--cyclic-method", "clock_ns", "--cyclic-samples", "2000"])
            .args(["-t", "1", "-v", "--log-file"])
            .arg(&log)
            .current_dir(dir.path()),
    );
    Some(std::fs::read_to_string(&log).unwrap())
}

#[test]
fn live_stress_ng_output() {
    let Some(text) = stress_ng_log("1000") else {
        return;
    };
    let r = import(&text, None, "sng.log").unwrap();
    let t = &r.threads[0];
    assert!(t.stats.count > 0 && t.stats.min <= t.stats.max);
    let w = r.environment.warnings.join("\n");
    assert!(
        !w.contains("lost or changed"),
        "its sample count holds: {w}"
    );
    let max_line = text.lines().find(|l| l.contains("max:")).unwrap();
    assert!(
        max_line.contains(&format!("max: {} ns", t.stats.max)),
        "{max_line}"
    );
}

#[test]
fn live_jitterdebugger_output() {
    if !have("jitterdebugger") {
        return;
    }
    if !latlab_testkit::root_or_skip("jitterdebugger (real-time priority)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("jd");
    latlab_testkit::run_ok(
        Command::new("jitterdebugger")
            .args(["-D", "1s", "-o"])
            .arg(&out_dir),
    );
    let text = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let r = import(&text, None, "results.json").unwrap();
    for t in &r.threads {
        let src = &v["cpu"][t.cpu.unwrap().to_string()];
        assert_eq!(t.stats.count, src["count"].as_u64().unwrap());
        assert_eq!(t.stats.max, src["max"].as_u64().unwrap() * 1000 + 500);
    }
}

/// The footer values of a cyclictest histogram text: `label` then one number per thread.
fn footer(text: &str, label: &str) -> Vec<u64> {
    let line = text.lines().find(|l| l.starts_with(label)).unwrap();
    line[label.len()..]
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect()
}

/// Counts and maxima of an imported histogram text are those of its footer.
fn check_against_footer(text: &str, r: &latlab_model::RunResult) {
    let (total, over) = (
        footer(text, "# Total:"),
        footer(text, "# Histogram Overflows:"),
    );
    let max = footer(text, "# Max Latencies:");
    assert_eq!(r.threads.len(), total.len());
    for (i, t) in r.threads.iter().enumerate() {
        assert_eq!(t.stats.count, total[i] + over[i], "thread {i}");
        assert_eq!(t.stats.max, max[i] * 1000 + 500, "thread {i}");
    }
}

#[test]
fn cyclictest_histogram_captured_with_stderr_skips_its_warning() {
    // `cyclictest -l 200 -i 500 -d 100 -q -h 20 -t 2 -a 0 -m -p 80 > file 2>&1`: -d with -h
    // makes cyclictest print a WARN: line to stderr before the histogram.
    let text = data("cyclictest-h20-stderr.txt");
    assert!(text.starts_with("WARN: distance is ignored"), "{text}");
    assert_eq!(detect(&text), Some(Format::CyclictestHist));
    let r = import(&text, None, "ct.txt").unwrap();
    check_against_footer(&text, &r);
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains(
            "skipped 1 line before the histogram that is not cyclictest -h output; the first, \
             line 1: \"WARN: distance is ignored and set to 0, if histogram enabled\""
        ),
        "{w}"
    );
    // A line starting with a number is a row, however broken: still refused with its line.
    let broken = text.replacen("# Histogram\n", "# Histogram\n12x 1 2\n", 1);
    let e = import(&broken, None, "x").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.to_string().contains("expected a histogram row"), "{e}");
}

#[test]
fn crlf_line_endings_read_as_lf_in_every_format() {
    for (name, format) in [
        ("cyclictest.json", Format::CyclictestJson),
        ("cyclictest-h50.txt", Format::CyclictestHist),
        ("cyclictest-h20-stderr.txt", Format::CyclictestHist),
        ("stress-ng-cyclic.log", Format::StressNgCyclic),
        ("stress-ng-cyclic-beyond-range.log", Format::StressNgCyclic),
        ("jitterdebugger-results.json", Format::Jitterdebugger),
    ] {
        let lf = data(name);
        let crlf = lf.replace('\n', "\r\n");
        assert_eq!(detect(&crlf), Some(format), "{name}");
        let a = import(&lf, None, name).unwrap();
        let b = import(&crlf, None, name)
            .unwrap_or_else(|e| panic!("{name} with CRLF line endings: {e}"));
        assert_eq!(a.threads, b.threads, "{name}");
        assert_eq!(a.overall, b.overall, "{name}");
        assert_eq!(a.config, b.config, "{name}");
        assert_eq!(a.environment, b.environment, "{name}");
        assert_eq!(a.started_at, b.started_at, "{name}");
    }
}

#[test]
fn truncated_cyclictest_histogram_names_the_line_and_what_was_expected() {
    let text = data("cyclictest-h50.txt");
    let lines: Vec<&str> = text.lines().collect();
    let first = |n: usize| lines[..n].join("\n") + "\n";
    let line_of = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix)).unwrap() + 1;
    let refused = |cut: &str, line: usize, needle: &str| {
        for format in [None, Some(Format::CyclictestHist)] {
            let e = import(cut, format, "x").unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.line, line, "{msg}");
            assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
            assert_eq!(msg.lines().count(), 1, "{msg}");
        }
    };
    // Cut in the middle of the rows (at a row's end), and right after the last row.
    refused(&first(30), 30, "ends before the \"# Max Latencies:\" line");
    let total = line_of("# Total:");
    refused(
        &first(total - 1),
        total - 1,
        "ends before the \"# Max Latencies:\"",
    );
    // Cut before the footer's maxima.
    let max = line_of("# Max Latencies:");
    refused(
        &first(max - 1),
        max - 1,
        "ends before the \"# Max Latencies:\"",
    );
    // Cut inside a row: fewer counts than threads, or a count cut short on the last line.
    let half = format!("{}000049 000011\n", first(total - 2));
    refused(&half, total - 1, "1 counts where earlier rows had 2");
    let digits = format!("{}000049 000011\t0000", first(total - 2));
    refused(&digits, total - 1, "ends before the \"# Max Latencies:\"");
    // Cut inside the maxima, and before the overflows that a maximum beyond the rows calls for.
    let maxima = format!("{}# Max Latencies: 00263", first(max - 1));
    refused(
        &maxima,
        max,
        "1 \"# Max Latencies:\" values where the histogram has 2 threads",
    );
    refused(
        &first(max),
        max,
        "ends before the \"# Histogram Overflows:\" line",
    );
    // Only the histogram's head: nothing to read.
    refused(
        "WARN: x\n# Histogram\n",
        2,
        "ends before the first histogram row",
    );
    // The whole file still reads.
    assert!(import(&text, None, "x").is_ok());
}

/// `cyclictest -D1 -q -a0-1 -t2 -p50 -i 1000 -H 50`: a third column sums both threads on every
/// row (and the maxima and overflows have a third value); it is left out, not read as a thread.
#[test]
fn cyclictest_histofall_is_not_a_thread() {
    let r = import(&data("cyclictest-H50.txt"), None, "h.txt").unwrap();
    assert_eq!(r.threads.len(), 2);
    // "# Total:" counts the rows; the overflows (1 and 3) add to them.
    assert_eq!(r.threads[0].stats.count, 1000);
    assert_eq!(r.threads[1].stats.count, 1000);
    assert_eq!(r.overall.stats.count, 2000);
    assert_eq!(r.overall.stats.max, 477_500);
    // Samples ran past the rows of both: their means are the ones printed ("# Avg Latencies:
    // 00013 00014", which has no third value), not the rows' lower bounds.
    let means: Vec<Option<f64>> = r.threads.iter().map(|t| t.stats.exact_mean).collect();
    assert_eq!(means, [Some(13_500.0), Some(14_500.0)]);
    assert!(
        r.environment
            .warnings
            .iter()
            .any(|w| w.contains("cyclictest -H's sum of every thread")),
        "{:?}",
        r.environment.warnings
    );
    // Without -H, two threads stay two.
    let plain = import(&data("cyclictest-h50.txt"), None, "h.txt").unwrap();
    assert_eq!(plain.threads.len(), 2);
    // Two threads that saw the same samples are two threads: -H writes its sum only beside two
    // or more.
    let twins = "# Histogram\n000003 000500\t000500\n000004 000060\t000060\n\
                 # Total: 000000560 000000560\n# Min Latencies: 00003 00003\n\
                 # Avg Latencies: 00003 00003\n# Max Latencies: 00004 00004\n\
                 # Histogram Overflows: 00000 00000\n";
    let r = import(twins, None, "twins.txt").unwrap();
    assert_eq!(r.threads.len(), 2);
    assert_eq!(r.overall.stats.count, 1120);
    assert!(
        !r.environment
            .warnings
            .iter()
            .any(|w| w.contains("sum of every thread")),
        "{:?}",
        r.environment.warnings
    );
}

/// A text's own count of its samples (cyclictest's `# Total:`, stress-ng's summary) that its rows
/// do not hold is named: rows were lost or changed since. The rows are imported as they are; the
/// recorded files (with `-H`'s sum column too, and stress-ng's cut distributions) name nothing.
#[test]
fn a_sample_count_the_rows_do_not_hold_is_named() {
    let said = |text: &str| {
        import(text, None, "f")
            .unwrap()
            .environment
            .warnings
            .join("\n")
    };
    for f in [
        "cyclictest-h50.txt",
        "cyclictest-H50.txt",
        "cyclictest-h20-stderr.txt",
        "stress-ng-cyclic.log",
        "stress-ng-cyclic-dist1.log",
        "stress-ng-cyclic-beyond-range.log",
    ] {
        let w = said(&data(f));
        assert!(!w.contains("lost or changed"), "{f}: {w}");
    }
    // A row of cyclictest -h 50 lost (22 us: 1 and 41 samples).
    let text = data("cyclictest-h50.txt");
    let cut = without_lines(&text, |l| l.starts_with("000022 "));
    let r = import(&cut, None, "f").unwrap();
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains(
            "the file contradicts itself (edited or damaged?): thread0: its \"# Total:\" counts \
             236 samples in its rows, and they hold 235 (rows lost or changed?); the rows are \
             imported as they are; thread1: its \"# Total:\" counts 424 samples"
        ),
        "{w}"
    );
    let whole = import(&text, None, "f").unwrap();
    assert_eq!(
        r.threads[0].histogram.count(),
        whole.threads[0].histogram.count() - 1
    );
    // A stress-ng summary above every printed bucket.
    let text = data("stress-ng-cyclic.log").replace("10000 samples", "12000 samples");
    let w = said(&text);
    assert!(
        w.contains(
            "the file contradicts itself (edited or damaged?): its summary line counts 12000 \
             samples, and its distribution 10000 (lines lost or changed?); the distribution is \
             imported as it is"
        ),
        "{w}"
    );
    // What cannot be a count, or a line cut short, is refused with its line, as in every
    // other footer or summary line.
    let refused = |text: &str| import(text, None, "f").unwrap_err().to_string();
    let ct = data("cyclictest-h50.txt");
    let total = ct.lines().position(|l| l.starts_with("# Total:")).unwrap() + 1;
    for (line, said) in [
        (
            "# Total: 000000236",
            "1 \"# Total:\" values where the histogram has 2 threads",
        ),
        ("# Total: abc 000000424", "\"abc\" is not a number"),
        ("# Total: -5 000000424", "\"-5\" is not a number"),
    ] {
        let e = refused(&ct.replace("# Total: 000000236 000000424", line));
        assert!(
            e.contains(&format!("line {total}")) && e.contains(said),
            "{line}: {e}"
        );
    }
    // So are the minima and means (a mean that does not read made both threads' lower bounds).
    for label in ["# Min Latencies:", "# Avg Latencies:"] {
        let at = ct.lines().position(|l| l.starts_with(label)).unwrap() + 1;
        let e = refused(&ct.replace(label, &format!("{label} zz")));
        assert!(
            e.contains(&format!("line {at}")) && e.contains("\"zz\" is not a number"),
            "{label}: {e}"
        );
    }
    let sng = data("stress-ng-cyclic.log");
    // A summary line with a character of more than one byte before a number reads (it made the
    // import panic).
    let signed = sng.replace("min: 10575 ns", "min: ±10575 ns");
    assert_eq!(
        import(&signed, None, "f").unwrap().threads[0].stats.min,
        10_575
    );
    let sched = sng.lines().position(|l| l.contains("ns delay")).unwrap() + 1;
    for (from, to, said) in [
        ("10000 samples", "-5 samples", "-5 is negative"),
        (
            "10000 samples",
            "99999999999999999999999 samples",
            "99999999999999999999999 is more than latlab takes",
        ),
    ] {
        let e = refused(&sng.replace(from, to));
        assert!(
            e.contains(&format!("line {sched}")) && e.contains(said),
            "{to}: {e}"
        );
    }
    // Cut at the distribution's header, or after its announcement: named at the line after.
    let header = sng
        .lines()
        .position(|l| l.contains("latency distribution ("))
        .unwrap();
    for (keep, said) in [
        (header + 1, "the distribution ends before its first row"),
        (
            header + 2,
            "the distribution ends after 0 of the 26 buckets it announces",
        ),
    ] {
        let cut: String = sng.lines().take(keep).map(|l| format!("{l}\n")).collect();
        let e = refused(&cut);
        assert!(
            e.contains(&format!("line {}", keep + 1)) && e.contains(said),
            "{keep}: {e}"
        );
    }
    // Cut after its 10th row: 26 buckets announced.
    let rows = sng
        .lines()
        .position(|l| l.contains("latency (ns)"))
        .unwrap();
    let cut: String = sng
        .lines()
        .take(rows + 11)
        .map(|l| format!("{l}\n"))
        .collect();
    let e = refused(&cut);
    assert!(
        e.contains(&format!("line {}", rows + 12))
            && e.contains(
                "the distribution ends after 10 of the 26 buckets it announces (expected its \
                 remaining rows; is the log cut short?)"
            ),
        "{e}"
    );
    // A stressor that measured nothing says so; its log is refused in its words.
    let none = sng.replace(
        "cyclic: sched SCHED_RR: 100000 ns delay, 10000 samples",
        "cyclic: SCHED_DEADLINE: no latency information available",
    );
    let e = refused(&none);
    assert!(
        e.contains(
            "stress-ng measured no latency: \"SCHED_DEADLINE: no latency information available\""
        ),
        "{e}"
    );
}

/// A cyclictest JSON that contradicts itself (edited by hand, or damaged) says so, and a count
/// that is no count is refused with the accepted form.
#[test]
fn a_cyclictest_json_that_contradicts_itself_says_so() {
    let mut v: Value = serde_json::from_str(&data("cyclictest.json")).unwrap();
    let said = |v: &Value| {
        import(&v.to_string(), None, "ct.json").map(|r| r.environment.warnings.join("\n"))
    };
    assert!(!said(&v).unwrap().contains("contradicts itself"));
    v["num_threads"] = 3.into();
    v["thread"]["0"]["cycles"] = 5.into();
    let w = said(&v).unwrap();
    assert!(
        w.contains("the file contradicts itself (edited or damaged?)"),
        "{w}"
    );
    assert!(
        w.contains("\"num_threads\" is 3 but the file holds 2 thread(s)"),
        "{w}"
    );
    assert!(w.contains("thread 0: its histogram holds"), "{w}");
    let first = v["thread"]["0"]["histogram"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    // Its extremes against its rows (-h 50, rows up to 49 us, 263 us its maximum): a maximum
    // below its largest row gives way to the row, one inside the range while samples lie beyond
    // it keeps them at the range's end.
    let mut m = v.clone();
    m["thread"]["0"]["cycles"] = 500.into();
    m["thread"]["0"]["max"] = 40.into();
    m["thread"]["1"]["min"] = 45.into();
    let r = import(&m.to_string(), None, "ct.json").unwrap();
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains(
            "cpu0: its maximum (40.5 us) lies below its largest histogram row (49.5 us): the row \
             is used"
        ),
        "{w}"
    );
    assert!(
        w.contains("cpu1: its minimum (45.5 us) lies above its smallest histogram row"),
        "{w}"
    );
    m["thread"]["0"]["max"] = 49.into();
    let r = import(&m.to_string(), None, "ct.json").unwrap();
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains(
            "of its samples lie beyond its histogram range (50.0 us), yet its maximum is 49.5 us"
        ),
        "{w}"
    );
    // The samples beyond stay beyond the range, and nothing lies above the run's maximum.
    let t = &r.threads[0];
    assert_eq!(t.stats.max, 50_000);
    assert_eq!(t.histogram.max(), 50_000);
    // A maximum above every row, with no sample beyond them, gives way to the largest row.
    let in_rows: u64 = v["thread"]["0"]["histogram"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    m["thread"]["0"]["cycles"] = in_rows.into();
    m["thread"]["0"]["max"] = 300.into();
    let r = import(&m.to_string(), None, "ct.json").unwrap();
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains(
            "cpu0: its maximum (300.5 us) lies above its largest histogram row (49.5 us), yet it \
             counts no sample beyond its rows: the row is used"
        ),
        "{w}"
    );
    assert_eq!(r.threads[0].stats.max, 49_500);
    // Counts that are no counts are refused, naming where and the accepted form.
    for (key, at, bad) in [
        (
            "histogram",
            first.as_str(),
            "histogram count at FIRST is -3, not a whole number",
        ),
        (
            "cycles",
            "",
            "thread 0: \"cycles\" is -5, not a whole number",
        ),
        ("max", "", "thread 0: \"max\" is 2.5, not a whole number"),
        (
            "num_threads",
            "",
            "the file: \"num_threads\" is -2, not a whole number",
        ),
    ] {
        let mut b = v.clone();
        let value: Value = match key {
            "histogram" => (-3).into(),
            "cycles" => (-5).into(),
            "max" => 2.5.into(),
            _ => (-2).into(),
        };
        match key {
            "histogram" => b["thread"]["0"]["histogram"][at] = value,
            "num_threads" => b[key] = value,
            _ => b["thread"]["0"][key] = value,
        }
        let e = said(&b).unwrap_err();
        let bad = bad.replace("FIRST", &first);
        assert!(e.message.contains(&bad), "{key}: {}", e.message);
        assert!(
            e.message
                .contains("(accepted: a whole number from 0 to 2^53)"),
            "{key}: {}",
            e.message
        );
    }
}

/// Counts and latencies no run could have (a damaged or hand-edited file) are refused, naming
/// the largest taken: past 2^64 they wrapped, and the stored run could not be read back. A
/// whole number written with a zero fraction (`500.0`) is a whole number.
#[test]
fn counts_and_latencies_past_2_to_the_53_are_refused() {
    let v: Value = serde_json::from_str(&data("cyclictest.json")).unwrap();
    let refused = |edit: &dyn Fn(&mut Value)| {
        let mut b = v.clone();
        edit(&mut b);
        import(&b.to_string(), None, "ct.json").unwrap_err().message
    };
    let accepted = "(accepted: a whole number from 0 to 2^53)";
    let e = refused(&|b| b["thread"]["0"]["cycles"] = u64::MAX.into());
    assert_eq!(
        e,
        format!("thread 0: \"cycles\" is 18446744073709551615, more than latlab takes {accepted}")
    );
    // Each thread within the bound, both together past it.
    let e = refused(&|b| {
        for t in ["0", "1"] {
            b["thread"][t] = serde_json::json!({
                "histogram": {"0": 1u64 << 53}, "cycles": 1u64 << 53,
                "min": 0, "max": 0, "avg": 0.0, "cpu": t.parse::<u32>().unwrap()
            });
        }
    });
    assert_eq!(
        e,
        format!(
            "the file's threads count 18014398509481984 samples in all, more than latlab takes \
             {accepted}"
        )
    );
    // Rows within the bound that add up past it.
    let e = refused(&|b| {
        b["thread"]["0"]["histogram"]["1"] = (1u64 << 53).into();
        b["thread"]["0"]["histogram"]["2"] = (1u64 << 53).into();
    });
    assert!(
        e.starts_with("the thread on CPU 0 counts 180143985094822")
            && e.ends_with(&format!("samples, more than latlab takes {accepted}")),
        "{e}"
    );
    let e = refused(&|b| b["thread"]["1"]["max"] = 1e300.into());
    assert_eq!(
        e,
        format!("thread 1: \"max\" is 1e+300, more than latlab takes {accepted}")
    );
    let e = refused(&|b| b["thread"]["0"]["histogram"]["18446744073709551615"] = 1.into());
    assert_eq!(
        e,
        "histogram key \"18446744073709551615\" is more than latlab takes (accepted: a whole \
         number of µs from 0 to 2^53)"
    );
    // Averages no latency can be, a CPU Linux cannot have, and latencies whose sum the
    // histogram cannot keep.
    let e = refused(&|b| b["thread"]["0"]["avg"] = 1e300.into());
    assert_eq!(
        e,
        "the thread on CPU 0 has a mean of 1e300 µs, which no latency can be (accepted: from 0 \
         to 2^53 µs)"
    );
    let e = refused(&|b| b["thread"]["0"]["avg"] = (-5.0).into());
    assert!(
        e.contains("has a mean of -4.5 µs, which no latency can be"),
        "{e}"
    );
    let e = refused(&|b| b["thread"]["1"]["cpu"] = u64::MAX.into());
    assert_eq!(
        e,
        "thread 1: \"cpu\" is 18446744073709551615, not a CPU number (accepted: 0 to 8191)"
    );
    let e = refused(&|b| b["thread"]["0"]["histogram"]["1000000000"] = (1u64 << 40).into());
    assert!(
        e.starts_with("the thread on CPU 0's samples add up to ")
            && e.ends_with(
                "ns of latency, more than latlab keeps (accepted: latencies that add \
                up to less than 2^64 ns)"
            ),
        "{e}"
    );
    // A mean outside the extremes contradicts them: the histogram's mean is used.
    let mut m = v.clone();
    m["thread"]["0"]["avg"] = 1000.0.into();
    let r = import(&m.to_string(), None, "ct.json").unwrap();
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains("cpu0: its mean (1000.5 us) lies outside its minimum and maximum"),
        "{w}"
    );
    assert!(
        r.threads[0].stats.mean < 263_500.0,
        "{}",
        r.threads[0].stats.mean
    );
    // 500.0 is 500.
    let mut f = v.clone();
    f["thread"]["0"]["cycles"] = 500.0.into();
    f["thread"]["0"]["max"] = serde_json::json!(263.0);
    let whole = import(&f.to_string(), None, "ct.json").unwrap();
    let plain = import(&v.to_string(), None, "ct.json").unwrap();
    assert_eq!(whole.threads[0].stats, plain.threads[0].stats);
}

/// A file of a run that measured nothing (jitterdebugger stopped at once: every count 0) is
/// refused: it would stand in lists as a run with a maximum of 0.
#[test]
fn a_file_without_samples_is_refused() {
    let text = r#"{"cpu": {"0": {"histogram": {}, "count": 0, "min": 0, "max": 0, "avg": 0}}}"#;
    assert_eq!(detect(text), Some(Format::Jitterdebugger));
    let e = import(text, None, "results.json").unwrap_err();
    assert!(
        e.message
            .starts_with("no samples: every thread of this jitterdebugger file counts 0"),
        "{}",
        e.message
    );
    let negative = text.replace("\"count\": 0", "\"count\": -1");
    let e = import(&negative, None, "results.json").unwrap_err();
    assert!(
        e.message
            .contains("cpu 0: \"count\" is -1, not a whole number"),
        "{}",
        e.message
    );
    // A CPU that is no CPU number is refused, not left out.
    let e = import(&text.replace("\"0\":", "\"99999\":"), None, "results.json").unwrap_err();
    assert_eq!(
        e.message,
        "\"cpu\" key \"99999\" is not a CPU number (accepted: 0 to 8191)"
    );
}

/// `cyclictest -D1 -q -a0-1 -t2 -p50 -i 1000 --json=ct.json`, without -h: no histogram rows, only
/// each thread's cycles, min and max. The samples are bounded below by the minimum, not put at 0.
#[test]
fn cyclictest_json_without_a_histogram_keeps_its_minimum() {
    let r = import(&data("cyclictest-no-hist.json"), None, "ct.json").unwrap();
    for (t, (min_us, max_us, cycles)) in r.threads.iter().zip([(8, 280, 1000), (9, 22, 667)]) {
        assert_eq!(t.stats.count, cycles);
        assert_eq!(t.stats.min, min_us * 1000 + 500, "{}", t.label);
        assert_eq!(t.stats.max, max_us * 1000 + 500, "{}", t.label);
        assert!(t.stats.p50 >= t.stats.min, "{}: {:?}", t.label, t.stats);
        // Every other sample is known only to take the minimum's whole microsecond or more.
        assert_eq!(t.stats.bounded_from_ns, Some(min_us * 1000), "{}", t.label);
        assert_eq!(t.stats.percentile_shown(50.0, t.stats.p50), min_us * 1000);
    }
    // Bounded by -D, and said so.
    assert_eq!(r.stop, latlab_model::StopReason::Duration);
    // Said as a file without a distribution, not as samples beyond a range.
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains("cpu0: the file has no histogram rows (cyclictest writes them with -h N): of its 1000 samples only the minimum (8.5 us), the maximum (280.5 us) and the mean as the tool printed it are known; every percentile is a lower bound"),
        "{w}"
    );
    // A mean that contradicts the extremes has no histogram mean to give way to: the mean is
    // then a lower bound, and said so (it said "the histogram's mean is used").
    let damaged = data("cyclictest-no-hist.json").replacen("\"avg\":", "\"avg\": 500.0, \"x\":", 1);
    let d = import(&damaged, None, "ct.json").unwrap();
    let dw = d.environment.warnings.join("\n");
    assert!(
        dw.contains("cpu0: its mean (500.5 us) lies outside its minimum and maximum (8.5 us to 280.5 us): without histogram rows the mean is known only as a lower bound"),
        "{dw}"
    );
    assert!(d.threads[0].stats.mean_is_lower_bound());
    // cyclictest 2.7 and later leave the histogram out without -h: the same as an empty one
    // (it was refused); one that is no object is refused naming its thread.
    let no_key = data("cyclictest-no-hist.json").replace("\"histogram\": {      },", "");
    assert!(!no_key.contains("histogram"), "a test of nothing");
    let k = import(&no_key, None, "ct.json").unwrap();
    assert_eq!(k.threads.len(), 2);
    assert_eq!(k.threads[0].stats, r.threads[0].stats);
    let listed = data("cyclictest-no-hist.json").replacen("{      }", "[1, 2]", 1);
    let e = import(&listed, None, "ct.json").unwrap_err().message;
    let said = "thread 0 has a \"histogram\" that is no object (accepted: ";
    assert!(e.starts_with(said), "{e}");
    // Without -h, cyclictest's threads sleep 500 us longer each (-d): 1000 and 667 cycles.
    assert!(
        w.contains("intervals differ per thread: cyclictest adds -d's 500us (500 us unless given, none with -h) for each thread: 1ms, 1500us"),
        "{w}"
    );
    // With -h they all sleep the interval.
    let h = import(&data("cyclictest.json"), None, "ct.json").unwrap();
    assert!(
        !h.environment
            .warnings
            .join("\n")
            .contains("intervals differ")
    );
    // jitterdebugger records no policy or priority: unknown, not "fifo 0".
    let j = import(&data("jitterdebugger-results.json"), None, "results.json").unwrap();
    assert_eq!(j.config.policy_text(), "-");
    assert_eq!(j.config.interval_text(), "-");
    // It holds /dev/cpu_dma_latency at 0 whatever its options (it has none for it).
    assert_eq!(
        (j.config.pm_qos_us, j.environment.pm_qos_held_us),
        (Some(0), Some(0))
    );
    // cyclictest's -h text has no command line: whether -a pinned its threads is unknown, not
    // "unpinned"; its JSON names each thread's CPU.
    let text = import(&data("cyclictest-h50.txt"), None, "h.txt").unwrap();
    assert!(!text.records(latlab_model::Unrecorded::CPUS));
    assert!(h.records(latlab_model::Unrecorded::CPUS));
    // Its PM QoS line says what was held; without it (a --histfile file, or --laptop) whether
    // it was is unknown, not "not held".
    assert!(text.records(latlab_model::Unrecorded::PM_QOS));
    assert_eq!(text.environment.pm_qos_held_us, Some(0));
    let without = without_lines(&data("cyclictest-h50.txt"), |l| {
        l.contains("cpu_dma_latency")
    });
    let histfile = import(&without, None, "hist.txt").unwrap();
    assert!(!histfile.records(latlab_model::Unrecorded::PM_QOS));
}

/// A JSON capture cut short is still told apart by its opening keys, so the error says where
/// it ends, as with `--format`.
#[test]
fn truncated_json_captures_are_recognised_and_refused_with_their_line() {
    for (name, format) in [
        ("cyclictest.json", Format::CyclictestJson),
        ("jitterdebugger-results.json", Format::Jitterdebugger),
    ] {
        let text = data(name);
        let cut = &text[..600];
        assert_eq!(detect(cut), Some(format), "{name}");
        let e = import(cut, None, name).unwrap_err();
        let with_format = import(cut, Some(format), name).unwrap_err();
        assert_eq!(e.to_string(), with_format.to_string(), "{name}");
        assert!(e.line > 0, "{name}: {e}");
    }
}

#[test]
fn stress_ng_percentiles_beyond_its_histogram_are_kept_exact() {
    // `stress-ng --cyclic 1 --cyclic-ops 1000 -v --cyclic-dist 1000 --cyclic-samples 500
    // --cyclic-policy rr -t 5`: 1 µs buckets, only the first 250 printed; 72 of 500 samples lie
    // beyond them, p90 and above among them.
    let text = data("stress-ng-cyclic-beyond-range.log");
    let r = import(&text, None, "sng.log").unwrap();
    let t = &r.threads[0];
    assert_eq!(
        (t.stats.count, t.stats.min, t.stats.max),
        (500, 7712, 842_617)
    );
    // stress-ng's own values, not the range's end (250 µs) the histogram would give.
    assert_eq!(t.stats.p90, 754_914);
    assert_eq!(t.stats.p99, 820_666);
    assert_eq!(t.stats.p99_9, 842_617);
    assert_eq!(t.stats.p99_99, 842_617);
    // Inside the range too, stress-ng's value, finer than the histogram's 1 µs bucket.
    assert_eq!(t.stats.p50, 16_187);
    let exact: Vec<(f64, u64)> = t
        .stats
        .exact_percentiles
        .iter()
        .map(|p| (p.percentile, p.value_ns))
        .collect();
    assert_eq!(
        exact,
        [
            (25.0, 11_650),
            (50.0, 16_187),
            (75.0, 21_819),
            (90.0, 754_914),
            (95.4, 787_625),
            (99.0, 820_666),
            (99.5, 838_249),
            (99.9, 842_617),
            (99.99, 842_617)
        ]
    );
    assert_eq!(r.overall.stats, t.stats);
    assert_eq!(t.corrected, t.stats);
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains("72 of 500 samples lie beyond the histogram range (250 us)")
            && w.contains(
                "except p90, p95.4, p99, p99.5, p99.9, p99.99: the tool printed them from all \
                 its samples, so they are exact"
            ),
        "{w}"
    );
    // JSON keeps them, and reads back whole.
    let json = r.to_json_pretty();
    assert!(json.contains("\"exact_percentiles\""), "{json}");
    assert_eq!(latlab_model::RunResult::from_json(&json).unwrap(), r);
    // The summary and a report of the run show the exact values (µs).
    let summary = latlab_report::summary_table(&r);
    let all = summary.lines().find(|l| l.starts_with("all")).unwrap();
    assert!(all.contains("754.9") && all.contains("820.7"), "{all}");
    let report = latlab_report::ReportFormat::Json
        .render(&latlab_report::ReportInput::from_runs("t", vec![r.clone()]));
    let v: Value = serde_json::from_str(&report).unwrap();
    let stats = &v["cells"][0]["stats"];
    assert_eq!(stats["p99"], 820_666, "{stats}");
    assert_eq!(stats["p90"], 754_914, "{stats}");
    // A report's CSV, too.
    let csv = latlab_report::run_csv(&r);
    assert!(csv.contains("820666"), "{csv}");
}

#[test]
fn stress_ng_with_every_printed_bucket_empty_keeps_its_percentiles() {
    // `--cyclic-dist 1`: 1 ns buckets, the first 250 printed, all empty; every sample beyond.
    let text = data("stress-ng-cyclic-dist1.log");
    let r = import(&text, None, "sng.log").unwrap();
    let s = &r.threads[0].stats;
    assert_eq!((s.count, s.min, s.max), (1000, 6729, 760_313));
    assert_eq!(
        (s.p50, s.p90, s.p99, s.p99_9, s.p99_99),
        (9535, 14_946, 52_486, 760_313, 760_313)
    );
    assert_eq!(s.exact_percentiles.len(), 9);
    // The mean and std.dev. as stress-ng printed them, not the histogram's lower bounds.
    assert_eq!((s.mean, s.stdev), (12_796.55, 28_285.85));
    assert_eq!(
        (s.exact_mean, s.exact_stdev),
        (Some(12_796.55), Some(28_285.85))
    );
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains("range (0.250 us)")
            && w.contains("only their minimum")
            && w.contains("the mean is the one the tool printed")
            && !w.contains("and the mean, are lower bounds"),
        "{w}"
    );
    // Kept through the JSON, a report's recomputation and the CSV.
    assert_eq!(
        latlab_model::RunResult::from_json(&r.to_json_pretty()).unwrap(),
        r
    );
    let report = latlab_report::ReportFormat::Json
        .render(&latlab_report::ReportInput::from_runs("t", vec![r.clone()]));
    let v: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(v["cells"][0]["stats"]["mean"], 12_796.55, "{report}");
}

#[test]
fn formats_without_a_start_time_or_length_leave_them_unknown() {
    for name in [
        "cyclictest-h50.txt",
        "stress-ng-cyclic.log",
        "jitterdebugger-results.json",
    ] {
        // stress-ng's length is its -t (below): here invoked without it.
        let r = import(&data(name).replace(" -t 2 ", " "), None, name).unwrap();
        assert_eq!((r.start_unix_ns, r.elapsed_ns), (0, 0), "{name}");
        assert_eq!(latlab_model::known_time(r.start_unix_ns), None, "{name}");
        assert_eq!(
            (r.started_at.as_str(), r.ended_at.as_str()),
            ("", ""),
            "{name}"
        );
        // A report's table of runs shows "-" for both, not the epoch and 0 s.
        let report = latlab_report::ReportFormat::Text
            .render(&latlab_report::ReportInput::from_runs("t", vec![r.clone()]));
        let table = report.split("Every run").nth(1).unwrap();
        let row = table.lines().find(|l| l.starts_with(&r.id)).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[3..5], ["-", "-"], "{name}: {row}");
    }
    // cyclictest's JSON has a start time, but (run by loops) no length.
    let r = import(&data("cyclictest.json"), None, "ct.json").unwrap();
    assert_eq!(r.started_at, "2026-11-22T17:49:19.000000Z");
    assert_eq!(r.ended_at, "");
}

#[test]
fn live_cyclictest_histogram_captured_with_stderr() {
    if !have("cyclictest") {
        return;
    }
    // -d with -h: cyclictest warns on stderr, which 2>&1 puts before the histogram.
    let out = Command::new("sh")
        .args([
            "-c",
            "cyclictest -l 200 -i 500 -d 100 -q -h 30 -t 2 -a 0 2>&1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let r = import(&text, None, "stdout").unwrap();
    check_against_footer(&text, &r);
    for t in &r.threads {
        assert_eq!(t.stats.count, 200);
    }
    if text.starts_with("WARN:") {
        let w = r.environment.warnings.join("\n");
        assert!(w.contains("skipped 1 line") && w.contains("WARN:"), "{w}");
    }
}

#[test]
fn live_stress_ng_printed_percentiles_are_exact() {
    // 1 ns buckets, the first 250 printed: every sample lies beyond them.
    let Some(text) = stress_ng_log("1") else {
        return;
    };
    let r = import(&text, None, "sng.log").unwrap();
    let s = &r.threads[0].stats;
    let printed = |p: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("cyclic:   {p}%:")))
            .unwrap();
        line.split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(s.p50, printed("50.00"));
    assert_eq!(s.p90, printed("90.00"));
    assert_eq!(s.p99, printed("99.00"));
    assert_eq!(s.p99_9, printed("99.90"));
    assert_eq!(s.p99_99, printed("99.99"));
}

/// Stored statistics are a cache of the histogram (with the exact percentiles a tool printed):
/// every thread's and the overall `Stats` equal what the histogram gives.
#[test]
fn statistics_are_what_the_histograms_give() {
    use latlab_model::Stats;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let Ok(r) = import(&text, None, "x") else {
            continue;
        };
        for (what, stats, hist) in r
            .threads
            .iter()
            .map(|t| (t.label.as_str(), &t.stats, &t.histogram))
            .chain([("overall", &r.overall.stats, &r.overall.histogram)])
        {
            let recomputed = Stats::of(hist).with_exact_of(stats);
            assert_eq!(stats, &recomputed, "{}: {what}", path.display());
        }
        n += 1;
    }
    assert!(n >= 5, "only {n} captures imported");
}

/// A stress-ng log says how it measured: the method it used (as latlab's equal, or said to have
/// none) and the priority it was invoked with.
#[test]
fn stress_ng_method_and_priority_come_from_the_log() {
    let text = data("stress-ng-cyclic.log");
    let r = import(&text, None, "sng.log").unwrap();
    let c = &r.config;
    assert_eq!(
        (c.method, c.relative, c.clock),
        (
            latlab_model::Method::ClockNanosleep,
            true,
            latlab_model::Clock::Realtime
        )
    );
    let other = text
        .replace("using method 'clock_ns'", "using method 'poll'")
        .replace("--cyclic-policy rr", "--cyclic-policy rr --cyclic-prio 70");
    let r = import(&other, None, "sng.log").unwrap();
    assert_eq!(
        (r.config.policy, r.config.priority),
        (latlab_model::Policy::Rr, 70)
    );
    let w = r.environment.warnings.join("\n");
    assert!(
        w.contains("method: stress-ng's \"poll\", which latlab has no equal of"),
        "{w}"
    );
    // Without --cyclic-prio it runs at its policy's highest priority; -t is its length.
    assert_eq!(
        (c.policy, c.priority, c.duration_ns),
        (latlab_model::Policy::Rr, 99, Some(2_000_000_000))
    );
    // Given twice, the later one holds, as in stress-ng's getopt.
    let twice = text.replace(" -t 2 ", " -t 5 --timeout 7 ");
    let r = import(&twice, None, "sng.log").unwrap();
    assert_eq!(r.config.duration_ns, Some(7_000_000_000));
    // A run longer than --cyclic-samples kept only its first samples: said.
    assert!(
        w.contains("stress-ng kept only the first --cyclic-samples samples of the 15543"),
        "{w}"
    );
    let whole = without_lines(&text, |l| l.contains("--cyclic-samples needed"));
    let w = import(&whole, None, "sng.log")
        .unwrap()
        .environment
        .warnings
        .join("\n");
    assert!(!w.contains("kept only the first"), "{w}");
}

/// An imported histogram's overflows are only known to lie at or beyond its range: exported
/// again (at the default, longer range), they stay overflows of a histogram that ends where the
/// source's did; the rows are the source's, and the file reads back to the same statistics.
#[test]
fn an_imported_histogram_exports_its_overflows_as_overflows() {
    let text = data("cyclictest-h50.txt");
    let r = import(&text, None, "h50.txt").unwrap();
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let overflows = |t: &str| -> String {
        t.lines()
            .find(|l| l.starts_with("# Histogram Overflows:"))
            .unwrap()
            .split_whitespace()
            .skip(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let out = latlab_report::histfile(&r, 400);
    assert_eq!(rows(&out), rows(&text));
    assert_eq!(overflows(&out), "00264 00076");
    // Both threads ran past the rows: their means are the ones cyclictest printed (whole µs,
    // + 0.5 for the middle of the microsecond), not the rows' lower bound, and are written back.
    let means: Vec<Option<f64>> = r.threads.iter().map(|t| t.stats.exact_mean).collect();
    assert_eq!(means, [Some(47_500.0), Some(32_500.0)]);
    let avg = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("# Avg Latencies:"))
            .map(str::to_string)
    };
    assert_eq!(avg(&out), avg(&text));
    // Its cyclictest JSON names what the text did not record, and an import of that file keeps
    // it unknown rather than taking latlab's defaults (an interval of 1ms, pinned threads,
    // memory not locked).
    let again = import(&latlab_report::cyclictest_json(&r), None, "again.json").unwrap();
    assert_eq!(
        again.config.interval_ns,
        0,
        "{}",
        again.config.interval_text()
    );
    for what in ["method", "cpus", "memory"] {
        assert!(
            !again.records(what),
            "{what}: {:?}",
            again.environment.not_recorded
        );
    }
    assert!(!again.environment.memory_locked);
    let back = import(&out, None, "again.txt").unwrap();
    for (a, b) in back.threads.iter().zip(&r.threads) {
        assert_eq!(a.stats, b.stats, "{}", a.label);
    }
    // Its cyclictest JSON holds no key at or beyond the source's range.
    let json: Value = serde_json::from_str(&latlab_report::cyclictest_json(&r)).unwrap();
    let keys: Vec<u64> = json["thread"]["0"]["histogram"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.parse().unwrap())
        .collect();
    assert!(keys.iter().all(|&k| k < 50), "{keys:?}");
    // It names that range, and its import reads it (not its last row) as the range's end.
    assert!(
        json["cmdline:"]
            .as_str()
            .unwrap()
            .contains(" --histfile-range 50"),
        "{json}"
    );
    for (a, b) in again.threads.iter().zip(&r.threads) {
        assert_eq!(a.stats.bounded_from_ns, Some(50_000), "{}", a.label);
        assert_eq!(b.stats.bounded_from_ns, Some(50_000), "{}", b.label);
    }
}

/// A log without `-v` has no `invoked with` line: its length is the one stress-ng says as it
/// starts (`setting to a 5 second run per stressor`); it was not recorded.
#[test]
fn stress_ng_s_own_run_length_line_gives_the_length() {
    let quiet = without_lines(&data("stress-ng-cyclic-dist1.log"), |l| {
        l.contains("invoked with")
    });
    let r = import(&quiet, None, "sng.log").unwrap();
    assert_eq!(r.config.duration_ns, Some(5_000_000_000));
    // The length it ran is its last line's (`successful run completed in 5.01s`); without that
    // line, the asked one stands in.
    assert_eq!(r.elapsed_ns, 5_010_000_000);
    let cut = without_lines(&quiet, |l| l.contains("run completed in"));
    let r = import(&cut, None, "sng.log").unwrap();
    assert_eq!(r.elapsed_ns, 5_000_000_000);
    // Neither line: only the length it ran.
    let cut = without_lines(&data("stress-ng-cyclic-dist1.log"), |l| {
        l.contains("invoked with") || l.contains("setting to a")
    });
    let r = import(&cut, None, "sng.log").unwrap();
    assert_eq!((r.config.duration_ns, r.elapsed_ns), (None, 5_010_000_000));
    let summary = latlab_report::summary_table(&r);
    assert!(
        summary.contains("duration: 5.010 s measured (asked: not recorded)"),
        "{summary}"
    );
    // Ended well before the length asked: not said to have reached it.
    let early =
        data("stress-ng-cyclic-dist1.log").replace("completed in 5.01s", "completed in 2.00s");
    let summary = latlab_report::summary_table(&import(&early, None, "sng.log").unwrap());
    assert!(
        summary.contains("duration: 2.000 s measured (asked: 5s)")
            && summary.contains("stopped:  not recorded"),
        "{summary}"
    );
    let on_time = latlab_report::summary_table(
        &import(&data("stress-ng-cyclic-dist1.log"), None, "sng.log").unwrap(),
    );
    assert!(on_time.contains("stopped:  duration reached"), "{on_time}");
}
