//! Import of real output of cyclictest, stress-ng and jitterdebugger: recorded files (tests/data)
//! and, where the tools are installed, output produced by running them here.
#![allow(clippy::unwrap_used)]

use latlab_import::{Format, detect, import, parse_rfc2822};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: {tool} is not installed");
    }
    found
}

fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
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
    // stress-ng's p50 is 23115 ns; the import knows it to its 10 µs bucket.
    assert!((20_000..30_000).contains(&t.stats.p50), "{}", t.stats.p50);
}

#[test]
fn recorded_jitterdebugger() {
    let text = data("jitterdebugger-results.json");
    assert_eq!(detect(&text), Some(Format::Jitterdebugger));
    let r = import(&text, None, "results.json").unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r.threads.len(), 2);
    for t in &r.threads {
        let src = &v["cpu"][t.cpu.unwrap().to_string()];
        assert_eq!(t.stats.count, src["count"].as_u64().unwrap());
        assert_eq!(t.stats.max, src["max"].as_u64().unwrap() * 1000 + 500);
    }
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
    let out = Command::new("cyclictest")
        .args(&args)
        .arg(format!("--json={}", json.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_against_cyclictest_json(&std::fs::read_to_string(&json).unwrap());
    let hist = String::from_utf8_lossy(&out.stdout).to_string();
    let r = import(&hist, Some(Format::CyclictestHist), "stdout").unwrap();
    assert_eq!(r.threads[0].stats.count, 300);
}

#[test]
fn live_stress_ng_output() {
    if !have("stress-ng") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sng.log");
    let out = Command::new("stress-ng")
        .args([
            "--cyclic",
            "1",
            "--cyclic-dist",
            "1000",
            "--cyclic-sleep",
            "200000",
        ])
        .args([
            "--cyclic-method",
            "clock_ns",
            "--cyclic-samples",
            "2000",
            "-t",
            "1",
            "-v",
        ])
        .arg("--log-file")
        .arg(&log)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let r = import(&text, None, "sng.log").unwrap();
    let t = &r.threads[0];
    assert!(t.stats.count > 0 && t.stats.min <= t.stats.max);
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
    if !is_root() {
        eprintln!("skipped: jitterdebugger needs real-time priority (root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("jd");
    let out = Command::new("jitterdebugger")
        .args(["-D", "1s", "-o"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
