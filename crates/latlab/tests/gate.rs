//! Pass/fail gates as CI reads them: `--max-latency`, `--max-p99` and `--max-missed` on
//! `measure` and `run` (exit code 4, one line per CPU), and `--junit` on `measure`, `run` and
//! `check`, read back by junitparser (the reader CI tools build on) where it is installed and
//! by an XML parser always.
#![allow(clippy::unwrap_used)]

use latlab_testkit::{
    junit_read, latlab, policy_args, policy_toml, read_json, run_exit, stderr, stdout,
};
use std::path::Path;

/// The JUnit file parsed as XML: (tests, failures, skipped) of the whole document and the
/// failure messages.
fn xml_counts(path: &Path) -> (u64, u64, u64, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let n = |a: &str| root.attribute(a).unwrap().parse::<u64>().unwrap();
    let messages = root
        .descendants()
        .filter(|e| e.has_tag_name("failure"))
        .map(|e| e.attribute("message").unwrap().to_string())
        .collect();
    (n("tests"), n("failures"), n("skipped"), messages)
}

/// `latlab measure` for a second with `limits`, its JUnit report to `junit`.
fn gated_measure(limits: &[&str], junit: &std::path::Path) -> std::process::Command {
    let mut c = latlab!();
    c.args(["measure", "-D", "1s", "-q"])
        .args(limits)
        .args(policy_args())
        .arg("--junit")
        .arg(junit);
    c
}

#[test]
fn measure_exceeding_a_limit_exits_4_with_a_line_per_cpu_and_a_failed_junit_case() {
    let dir = tempfile::tempdir().unwrap();
    let (junit, json) = (dir.path().join("j.xml"), dir.path().join("r.json"));
    // No wake-up takes 1 ns or less: every CPU exceeds the limit.
    let out = run_exit(
        gated_measure(&["--max-latency", "1ns", "--max-missed", "1000000"], &junit)
            .arg("--json")
            .arg(&json),
        4,
    );
    let run = read_json(&json);
    let id = run["id"].as_str().unwrap();
    let cpus = run["threads"].as_array().unwrap().len();
    let lines: Vec<&str> = std::str::from_utf8(&out.stderr)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("latlab: limit exceeded: "))
        .collect();
    assert_eq!(lines.len(), cpus, "{}", stderr(&out));
    for (t, line) in run["threads"].as_array().unwrap().iter().zip(&lines) {
        let max = t["stats"]["max"].as_u64().unwrap();
        assert_eq!(
            *line,
            // The one µs format (a float's {:.1} rounds 445.65 down, the format up).
            format!(
                "latlab: limit exceeded: {}: max {} us exceeds the limit 0.001 us (--max-latency)",
                t["label"].as_str().unwrap(),
                latlab_model::units::format_us(max, 1)
            )
        );
    }
    // The JSON result carries the verdict: the limits, failed, a breach per CPU as said; the
    // result reads back as a result all the same.
    latlab_model::RunResult::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let gate = &run["gate"];
    assert_eq!(gate["passed"], false, "{gate}");
    assert_eq!(gate["limits"]["max_latency_ns"], 1);
    assert_eq!(gate["limits"]["missed"], 1_000_000);
    let said: Vec<String> = gate["breaches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| format!("latlab: limit exceeded: {}", b["line"].as_str().unwrap()))
        .collect();
    assert_eq!(said, lines);
    let (tests, failures, _, messages) = xml_counts(&junit);
    assert_eq!((tests, failures), (cpus as u64, cpus as u64));
    assert!(
        messages.iter().all(|m| m.ends_with(&format!("; run {id}"))),
        "{messages:?}"
    );
    if let Some(suites) = junit_read(&junit) {
        let s = &suites[0];
        assert_eq!(s["name"], "latlab measure");
        assert_eq!(
            (s["tests"].as_u64(), s["failures"].as_u64()),
            (Some(cpus as u64), Some(cpus as u64))
        );
        let case = &s["cases"][0];
        assert_eq!(case["classname"], "latlab.measure");
        assert_eq!(case["name"], run["threads"][0]["label"]);
        assert_eq!(case["result"], "failure");
        let m = case["message"].as_str().unwrap();
        assert!(
            m.contains("exceeds the limit 0.001 us") && m.contains(id),
            "{m}"
        );
    }
}

#[test]
fn measure_within_its_limits_exits_0_and_every_case_passes() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("j.xml");
    let out = gated_measure(&["--max-latency", "10s", "--max-p99", "10s"], &junit)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("limit exceeded"));
    let (tests, failures, skipped, _) = xml_counts(&junit);
    assert!(tests >= 1);
    assert_eq!((failures, skipped), (0, 0));
    if let Some(suites) = junit_read(&junit) {
        for c in suites[0]["cases"].as_array().unwrap() {
            assert_eq!(c["result"], "passed", "{c}");
            assert!(c["system_out"].as_str().unwrap().contains("p99"), "{c}");
        }
    }
}

/// `--junit -` gives stdout to the XML alone, as `--json -` does (a JUnit reader takes stdout
/// whole): `measure`'s tables and `run`'s progress lines are not mixed into it, but go to stderr.
#[test]
fn junit_to_stdout_is_the_xml_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = gated_measure(&["--max-latency", "10s"], Path::new("-"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let xml = dir.path().join("m.xml");
    std::fs::write(&xml, &out.stdout).unwrap();
    let (tests, failures, _, _) = xml_counts(&xml);
    assert!(tests >= 1 && failures == 0);
    // The table the XML displaced is on stderr, for the CI log (it was dropped).
    assert!(
        stderr(&out).lines().any(|l| l.starts_with("all ")),
        "{}",
        stderr(&out)
    );
    // `/dev/stdout` on a pipe (`| tee`): written, not read first as a file that may hold a
    // store or a report (that read waited for ever).
    let out = latlab_testkit::process::output_within(
        &mut gated_measure(&["--max-latency", "10s"], Path::new("/dev/stdout")),
        std::time::Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // It is standard output, as `-` is: the XML alone there, the table on stderr.
    std::fs::write(&xml, &out.stdout).unwrap();
    assert!(xml_counts(&xml).0 >= 1);
    assert!(stderr(&out).lines().any(|l| l.starts_with("all ")));

    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"out\"\n[settings]\nduration = \"0.2s\"\nno-samplers = true\n{}",
            policy_toml()
        ),
    )
    .unwrap();
    let out = latlab!()
        .arg("run")
        .arg(&plan)
        .arg("--db")
        .arg(dir.path().join("t.db"))
        .args(["--max-latency", "10s", "--junit", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(&xml, &out.stdout).unwrap();
    assert!(xml_counts(&xml).0 >= 1);
    // The progress the XML displaced is on stderr.
    assert!(
        stderr(&out).contains("experiment 1 in "),
        "{}",
        stderr(&out)
    );

    // `check`'s table, too: stdout is the XML alone.
    let out = latlab!().args(["check", "--junit", "-"]).output().unwrap();
    std::fs::write(&xml, &out.stdout).unwrap();
    assert!(
        xml_counts(&xml).0 >= 20,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr(&out).contains("limits.rtprio"), "{}", stderr(&out));
}

/// A gate's run that `--break` ends early measured less than asked: it fails (exit 4) on the CPU
/// that saw the wake-up, even where that wake-up is within `--max-latency`.
#[test]
fn a_gate_ended_by_break_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("j.xml");
    // No wake-up takes 1 ns or less: the first one breaks.
    let out = run_exit(
        &mut gated_measure(&["--max-latency", "10s", "-b", "1ns"], &junit),
        4,
    );
    let err = stderr(&out);
    assert!(
        err.contains("(--break), which ended the run before its length"),
        "{err}"
    );
    let (_, failures, _, messages) = xml_counts(&junit);
    assert_eq!(failures, 1, "{messages:?}");
    // Without limits a break ends the run as cyclictest's does: exit 0.
    let out = latlab!()
        .args(["measure", "-D", "1s", "-q", "-b", "1ns"])
        .args(policy_args())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A run a signal stops before its --duration measured less than the gate asked: exit 130 and
/// a case in error, with its results written all the same (a CI timeout is not a pass).
#[test]
fn measure_cut_short_by_a_signal_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (junit, json) = (dir.path().join("j.xml"), dir.path().join("r.json"));
    let mut c = latlab!();
    c.args([
        "measure",
        "-D",
        "30s",
        "-q",
        "--max-latency",
        "10s",
        "--junit",
    ])
    .arg(&junit)
    .arg("--json")
    .arg(&json)
    .args(policy_args());
    let (out, _) = latlab_testkit::process::signal_after(
        &mut c,
        std::time::Duration::from_millis(1200),
        libc::SIGTERM,
        std::time::Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the run is incomplete: stopped by SIGTERM after"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read_json(&json)["stop"]["signal"], "SIGTERM");
    let suites = junit_read(&junit);
    let Some(suites) = suites else { return };
    assert_eq!(suites[0]["errors"], 1, "{suites}");
    let case = latlab_testkit::json_item(&suites[0]["cases"], "name", "run length");
    assert_eq!(case["result"], "error");
    assert!(
        case["message"]
            .as_str()
            .unwrap()
            .ends_with("of the 30s asked"),
        "{case}"
    );
}

/// A measure that cannot run still writes its JUnit file: one case in error saying why.
#[test]
fn measure_that_cannot_run_writes_a_junit_error() {
    if !latlab_testkit::root_or_skip("SCHED_DEADLINE and a profile") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("j.xml");
    // A deadline runtime of 99 % of each period is more than admission control allows.
    let out = latlab!()
        .args(["measure", "-D", "1s", "-q", "--policy", "deadline"])
        .args(["--dl-runtime", "990us", "-i", "1ms", "-t", "2", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (tests, failures, _, _) = xml_counts(&junit);
    assert_eq!((tests, failures), (1, 0));
    let text = std::fs::read_to_string(&junit).unwrap();
    assert!(text.contains("errors=\"1\""), "{text}");
    assert!(text.contains("deadline bandwidth"), "{text}");

    // A failure before measuring too: a profile that sets nothing the machine has.
    let tree = latlab_testkit::TuneTree::new("vm");
    let profile = tree.dir.path().join("g.toml");
    std::fs::write(&profile, "[cpu.all]\ngovernor = \"performance\"\n").unwrap();
    std::fs::remove_file(&junit).unwrap();
    let out = latlab!()
        .arg("--sysroot")
        .arg(&tree.root)
        .args(["measure", "-D", "1s", "-q", "--profile"])
        .arg(&profile)
        .arg("--state-dir")
        .arg(&tree.state)
        .arg("--junit")
        .arg(&junit)
        .args(policy_args())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = std::fs::read_to_string(&junit).unwrap();
    assert!(text.contains("sets nothing this machine has"), "{text}");
}

/// A gate stopped before it measures still exits 2 and replaces the JUnit file an earlier run
/// left with its error: a stale pass is not read as this run's. Stopped by this node's facts (a
/// CPU it does not have), and by a refused command line: a limit's value, a misspelled option
/// (those left the earlier file as it was), for `measure`, `run` and `check`.
#[test]
fn a_gate_that_cannot_start_replaces_an_earlier_junit_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("j.xml");
    let j = junit.to_str().unwrap();
    let with_eq = format!("--junit={j}");
    let cases: [(&[&str], &str, &str); 6] = [
        (
            &[
                "measure",
                "-D",
                "1s",
                "--cpus",
                "4095",
                "--max-latency",
                "50us",
                "--junit",
                j,
            ],
            "latlab measure",
            "CPU 4095",
        ),
        (
            &["measure", "-D", "1s", "--junit", j, "--max-latency", "abc"],
            "latlab measure",
            "--max-latency: unknown unit",
        ),
        (
            &["measure", "-D", "1s", &with_eq, "--max-p99", "0"],
            "latlab measure",
            "--max-p99 0",
        ),
        (
            &["measure", "-D", "1s", "--junit", j, "--max-latenc", "5us"],
            "latlab measure",
            "--max-latenc",
        ),
        (
            &["run", "no-such-plan.toml", "--junit", j],
            "latlab run",
            "no-such-plan.toml",
        ),
        (
            &["check", "--junit", j, "--bogus"],
            "latlab check",
            "--bogus",
        ),
    ];
    for (args, suite, why) in cases {
        std::fs::write(&junit, "<testsuites tests=\"1\" failures=\"0\"/>\n").unwrap();
        let out = latlab!().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let text = std::fs::read_to_string(&junit).unwrap();
        assert!(
            text.contains("errors=\"1\"") && text.contains(&format!("name=\"{suite}\"")),
            "{args:?}: {text}"
        );
        assert!(text.contains(why), "{args:?}: {text}");
    }
    // Help is no refusal: the file stays.
    std::fs::write(&junit, "kept").unwrap();
    let out = latlab!()
        .args(["measure", "--junit", j, "--help"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&junit).unwrap(), "kept");
}

/// A gate killed before it writes its report (SIGKILL, the OOM killer) leaves a report in
/// error saying so, not the pass an earlier run left; one that fails after it started says
/// why it failed.
#[test]
fn a_gate_killed_while_it_measures_leaves_no_earlier_pass() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("k.xml");
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"p\"\n[settings]\nduration = \"30s\"\nno-samplers = true\n{}",
            policy_toml()
        ),
    )
    .unwrap();
    let db = dir.path().join("s.db");
    let runs: [(Vec<&str>, &str); 2] = [
        (
            vec!["measure", "-D", "30s", "-q", "--max-latency", "100ms"],
            "latlab measure",
        ),
        (
            vec!["run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()],
            "latlab run",
        ),
    ];
    for (args, suite) in runs {
        let pass = "<testsuites tests=\"1\" failures=\"0\" errors=\"0\"/>\n";
        std::fs::write(&junit, pass).unwrap();
        let mut cmd = latlab!();
        cmd.args(&args).arg("--junit").arg(&junit);
        if args[0] == "measure" {
            cmd.args(policy_args());
        }
        let mut p = latlab_testkit::process::Proc::start(cmd, dir.path().join("log"));
        p.wait_until(
            "the report of a run under way",
            std::time::Duration::from_secs(20),
            || std::fs::read_to_string(&junit).is_ok_and(|t| t != pass),
        );
        p.kill9();
        let text = std::fs::read_to_string(&junit).unwrap();
        assert!(
            text.contains("errors=\"1\"")
                && text.contains(&format!("name=\"{suite}\""))
                && text.contains("the run did not finish: it was killed"),
            "{args:?}: {text}"
        );
        let (_, _, _, failures) = xml_counts(&junit);
        assert!(failures.is_empty(), "{failures:?}");
    }
}

/// A refused `--junit` that names the store or the plan writes nothing there: the store keeps
/// its runs and the plan its text. Nor is any other file that is not a JUnit report written over.
#[test]
fn a_refused_junit_path_that_names_the_store_or_the_plan_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (db, plan, notes) = (
        dir.path().join("t.db"),
        dir.path().join("p.toml"),
        dir.path().join("notes.txt"),
    );
    run_exit(
        latlab!()
            .args([
                "measure",
                "-l",
                "20",
                "-i",
                "1ms",
                "-q",
                "--no-samplers",
                "--db",
            ])
            .arg(&db)
            .args(policy_args()),
        0,
    );
    let stored = std::fs::read(&db).unwrap();
    let plan_text = "name = \"p\"\n[settings]\nduration = \"1s\"\n";
    std::fs::write(&plan, plan_text).unwrap();
    std::fs::write(&notes, "mine\n").unwrap();
    // A link to the store: another command's store (a daemon's) given as an output by mistake.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let (d, p, n, l) = (
        db.to_str().unwrap(),
        plan.to_str().unwrap(),
        notes.to_str().unwrap(),
        link.to_str().unwrap(),
    );
    let cases: [&[&str]; 10] = [
        &["measure", "-D", "1s", "--db", d, "--junit", d],
        &["run", p, "--db", d, "--junit", d],
        &["run", p, "--db", d, "--dry-run", "--junit", p],
        // Refused for another reason: a file that is no JUnit report is not written over.
        &["measure", "-D", "1s", "--max-p99", "0", "--junit", n],
        &["check", "--bogus", "--junit", n],
        // Refused after the options are read (an interval, a CPU), with the store or a file
        // --db does not name.
        &["measure", "-D", "1s", "-i", "0us", "--junit", n],
        &["measure", "-D", "1s", "-a", "4095", "--junit", d],
        // Any output that holds a store, the command's own or not.
        &["measure", "-D", "1s", "--junit", l],
        &["measure", "-D", "1s", "--json", l],
        &["report", "--db", d, "-o", l],
    ];
    for args in cases {
        let out = latlab!().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            std::fs::read(&db).unwrap() == stored,
            "{args:?}: the store was written over"
        );
        assert_eq!(
            std::fs::read_to_string(&plan).unwrap(),
            plan_text,
            "{args:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&notes).unwrap(),
            "mine\n",
            "{args:?}"
        );
    }
    let out = run_exit(latlab!().args(["db", "list", "--db", d]), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("clock-nanosleep"));
}

/// `latlab run` of the plan `text` (written in `dir`, its store there) with `limits`, exiting
/// with `code`; its output and the JUnit file it wrote.
fn gated_run(
    dir: &Path,
    text: &str,
    limits: &[&str],
    code: i32,
) -> (std::process::Output, std::path::PathBuf) {
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, text).unwrap();
    let junit = dir.join("j.xml");
    let out = run_exit(
        latlab!()
            .arg("run")
            .arg(&plan)
            .arg("--db")
            .arg(dir.join("t.db"))
            .args(limits)
            .arg("--junit")
            .arg(&junit),
        code,
    );
    (out, junit)
}

#[test]
fn run_gives_a_case_per_cell_and_cpu_and_exits_4_on_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (out, junit) = gated_run(
        dir.path(),
        &format!(
            "name = \"gate\"\nrepeat = 2\n[settings]\nduration = \"0.3s\"\nno-samplers = true\n\
             {}[axes]\ninterval = [\"1ms\", \"500us\"]\ncpus = [\"0\", \"63\"]\n",
            policy_toml()
        ),
        &["--max-p99", "1ns"],
        4,
    );
    // Two cells run (CPU 0 at two intervals), twice each: a line per repeat that exceeded.
    let exceeded = stderr(&out)
        .matches("latlab: limit exceeded: cell ")
        .count();
    assert_eq!(exceeded, 4, "{}", stderr(&out));
    // A case per cell and CPU over both repeats, failed; the cells on the absent CPU skipped.
    let (tests, failures, skipped, messages) = xml_counts(&junit);
    assert_eq!((tests, failures, skipped), (4, 2, 2), "{messages:?}");
    // Repeats counted from 1, as the progress and the reports count them.
    assert!(messages.iter().all(|m| m.contains("repeat 1: cpu0: p99 ")
        && m.contains("repeat 2: cpu0: p99 ")
        && m.contains("exceeds the limit 0.001 us (--max-p99); run ")));
    if let Some(suites) = junit_read(&junit) {
        let s = &suites[0];
        assert_eq!(s["name"], "latlab run gate");
        let results: Vec<(String, String)> = s["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["result"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(results.iter().filter(|(_, r)| r == "failure").count(), 2);
        assert_eq!(results.iter().filter(|(_, r)| r == "skipped").count(), 2);
        assert!(
            results.iter().any(|(n, _)| n.ends_with(" cpu0")),
            "{results:?}"
        );
    }
}

#[test]
fn check_gives_a_case_per_check_as_its_json_says() {
    let root = latlab_testkit::check_tree("badly-tuned");
    let junit = root.path().join("j.xml");
    let json = latlab!()
        .arg("--sysroot")
        .arg(root.path())
        .args(["check", "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let out = latlab!()
        .arg("--sysroot")
        .arg(root.path())
        .args(["check", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        json.status.code(),
        "the exit code is check's"
    );
    let summary = &doc["summary"];
    let findings = doc["findings"].as_array().unwrap();
    let (tests, failures, skipped, messages) = xml_counts(&junit);
    assert_eq!(tests, findings.len() as u64);
    assert_eq!(failures, summary["fail"].as_u64().unwrap());
    assert!(failures > 0, "the badly tuned tree fails checks");
    assert_eq!(skipped, summary["not_applicable"].as_u64().unwrap());
    let first_fail = findings.iter().find(|f| f["verdict"] == "fail").unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with(first_fail["evidence"].as_str().unwrap())),
        "{messages:?}"
    );
    if let Some(suites) = junit_read(&junit) {
        let cases = suites[0]["cases"].as_array().unwrap();
        assert_eq!(cases.len(), findings.len());
        for (c, f) in cases.iter().zip(findings) {
            let id = f["id"].as_str().unwrap();
            assert!(c["name"].as_str().unwrap().starts_with(&format!("{id}: ")));
            let expected = match f["verdict"].as_str().unwrap() {
                "fail" => "failure",
                "not_applicable" => "skipped",
                _ => "passed",
            };
            assert_eq!(c["result"], expected, "{id}");
        }
    }
}

/// A gate measured beside a load that failed is not a pass, and what explains a result reaches
/// a CI log: `--quiet` keeps the table alone on stdout and says the run's warnings on stderr;
/// `run` says each repeat's warnings and fails the experiment.
#[test]
fn a_load_that_failed_is_not_a_pass_and_its_warning_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("m.xml");
    let out = run_exit(
        gated_measure(&["--max-latency", "1s"], &junit).args(["--load", "cmd:exit 3"]),
        1,
    );
    let err = stderr(&out);
    assert!(
        err.contains("latlab: warning: load cmd:exit 3: the command ended on its own after"),
        "{err}"
    );
    assert!(
        err.contains("latlab: error: a load failed: cmd:exit 3: the command ended on its own"),
        "{err}"
    );
    let text = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let error = doc
        .descendants()
        .find(|e| e.has_tag_name("error"))
        .unwrap_or_else(|| panic!("no case in error: {text}"));
    assert!(
        error
            .attribute("message")
            .unwrap()
            .starts_with("the load failed: cmd:exit 3: "),
        "{text}"
    );

    let (out, junit) = gated_run(
        dir.path(),
        &format!(
            "name = \"broken-load\"\nrepeat = 1\n[settings]\nduration = \"0.3s\"\n\
             no-samplers = true\nload = \"cmd:exit 3\"\n{}",
            policy_toml()
        ),
        &[],
        1,
    );
    let err = stderr(&out);
    assert!(
        err.contains("repeat 1: warning: load cmd:exit 3: the command ended on its own"),
        "{err}"
    );
    assert!(
        err.contains("latlab: error: 1 run measured beside a load that failed"),
        "{err}"
    );
    // The last line: its run saved, none that could not run (it said ", 0 failed" after
    // "experiment 1 failed").
    let text = format!("{}{err}", stdout(&out));
    assert!(
        text.contains(
            "experiment 1 failed: 1 run saved (1 of them beside a load that failed); report with"
        ),
        "{text}"
    );
    assert!(
        std::fs::read_to_string(&junit)
            .unwrap()
            .contains("repeat 1: the load failed: cmd:exit 3"),
    );
}
