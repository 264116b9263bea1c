//! `latlab import` of several files, good and bad, and `latlab db list` of what it saved, run for
//! real on the recorded captures of `crates/latlab-import/tests/data`.
#![allow(clippy::unwrap_used)]

use latlab_testkit::{latlab, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A recorded capture of another tool (shared with latlab-import's tests).
fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-import/tests/data")
        .join(name)
}

fn import(store: &Path, args: &[&Path], keep_going: bool) -> Output {
    let mut c = latlab!();
    c.arg("import").args(args).arg("--db").arg(store);
    if keep_going {
        c.arg("--keep-going");
    }
    c.output().unwrap()
}

/// A fresh store holding the one recorded capture `name`, imported.
fn imported(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let o = import(&store, &[&capture(name)], false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (dir, store)
}

/// What `latlab ARGS --db STORE` writes to standard output (it must succeed).
fn output_of(store: &Path, args: &[&str]) -> String {
    latlab_testkit::run_stdout(latlab!().args(args).arg("--db").arg(store))
}

fn list(store: &Path) -> String {
    latlab_testkit::run_stdout(latlab!().args(["db", "list", "--db"]).arg(store))
}

/// A directory with a file latlab does not read and a histogram cut in the middle of its rows.
fn bad_files() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let not_a_format = dir.path().join("notes.txt");
    std::fs::write(&not_a_format, "hello\n").unwrap();
    let cut = dir.path().join("cut.hist");
    let text = std::fs::read_to_string(capture("cyclictest-h50.txt")).unwrap();
    let head: Vec<&str> = text.lines().take(30).collect();
    std::fs::write(&cut, head.join("\n") + "\n").unwrap();
    (dir, not_a_format, cut)
}

#[test]
fn without_keep_going_one_refused_file_saves_nothing_and_is_named() {
    let (dir, not_a_format, cut) = bad_files();
    let store = dir.path().join("s.db");
    let good = capture("stress-ng-cyclic.log");
    for bad in [&not_a_format, &cut] {
        let o = import(&store, &[&good, bad], false);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("latlab: error: {}: ", bad.display())),
            "{err}"
        );
        assert!(err.contains("--keep-going"), "{err}");
        assert!(!store.exists(), "nothing saved, no store created");
    }
    let o = import(&store, &[&cut], false);
    let err = stderr(&o);
    assert!(
        err.contains("line 30: the file ends before the \"# Max Latencies:\" line"),
        "{err}"
    );
}

#[test]
fn keep_going_imports_the_files_that_read_and_names_each_refused_one() {
    let (dir, not_a_format, cut) = bad_files();
    let store = dir.path().join("s.db");
    let missing = dir.path().join("missing.json");
    let (good1, good2) = (
        capture("stress-ng-cyclic.log"),
        capture("cyclictest-h20-stderr.txt"),
    );
    let o = import(
        &store,
        &[&good1, &not_a_format, &good2, &cut, &missing],
        true,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    for (line, (file, reason)) in lines.iter().zip([
        (&not_a_format, "not a format latlab reads (accepted: "),
        (&cut, "line 30: the file ends before"),
        (&missing, "(accepted: a readable file)"),
    ]) {
        assert!(
            line.starts_with(&format!("latlab: error: {}: ", file.display())),
            "{line}"
        );
        assert!(line.contains(reason), "{reason:?} not in {line}");
    }
    assert_eq!(lines[3], "latlab: 3 of 5 files refused (above), 2 imported");
    let out = stdout(&o);
    assert!(
        out.contains("saved as run 1") && out.contains("saved as run 2"),
        "{out}"
    );
    // A header and two runs (and what "≥" means, the note under them).
    let listed = list(&store);
    assert_eq!(
        listed
            .lines()
            .filter(|l| !l.starts_with('≥') && !l.trim_start().starts_with("known"))
            .count(),
        3,
        "{listed}"
    );
    // The same again: the two that read are in the store already, so none is imported.
    let o = import(
        &store,
        &[&good1, &not_a_format, &good2, &cut, &missing],
        true,
    );
    assert!(
        stderr(&o).ends_with("latlab: 3 of 5 files refused (above), 0 imported\n"),
        "{}",
        stderr(&o)
    );
    // Everything good: exit code 0, with or without the option.
    let o = import(&store, &[&capture("cyclictest.json")], true);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Nothing good: nothing saved, no store created.
    let other = dir.path().join("other.db");
    let o = import(&other, &[&not_a_format], true);
    assert_eq!(o.status.code(), Some(2));
    assert!(!other.exists());
}

#[test]
fn db_list_shows_a_dash_for_an_unknown_start_and_length() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    // stress-ng's log has no start time (its length is its -t); cyclictest's JSON has a start
    // time but, run by loops, no length.
    let o = import(
        &store,
        &[
            &capture("stress-ng-cyclic.log"),
            &capture("cyclictest.json"),
        ],
        false,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = list(&store);
    assert!(!text.contains("1970"), "{text}");
    let header = text.lines().next().unwrap();
    let started = header.find("started (UTC)").unwrap();
    let duration_end = header.find("duration").unwrap() + "duration".len();
    let rows: Vec<&str> = text
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('≥') && !l.trim_start().starts_with("known"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    let cell = |row: &str, from: usize, to: usize| row[from..to].trim().to_string();
    // Run 1 (stress-ng): no start; its length is its -t.
    assert_eq!(cell(rows[0], started, started + 13), "-", "{text}");
    assert_eq!(
        cell(rows[0], duration_end - 8, duration_end),
        "2.0s",
        "{text}"
    );
    // Run 2: the start is known, the length is not.
    assert!(rows[1].contains("2026-11-22 17:49:19"), "{text}");
    assert_eq!(cell(rows[1], duration_end - 8, duration_end), "-", "{text}");
    // The runs' summaries say so too.
    let show = |id: &str| {
        let o = latlab!()
            .args(["db", "show", id, "--db"])
            .arg(&store)
            .output()
            .unwrap();
        stdout(&o)
    };
    let first = show("1");
    assert!(first.contains("start time not recorded"), "{first}");
    let second = show("2");
    assert!(
        second.contains("duration: unknown (asked: 500 loops)\n"),
        "{second}"
    );
}

/// The command line an export of an imported run carries measures again: what the file did not
/// record (interval, policy, window) is left to latlab's defaults, not written as 0, and named
/// in a comment.
#[test]
fn an_imported_run_exports_a_command_line_latlab_takes() {
    if !latlab_testkit::root_or_skip("measuring at the default real-time policy") {
        return;
    }
    let (_dir, store) = imported("cyclictest-h50.txt");
    let out = output_of(&store, &["export", "1", "--format", "cyclictest-json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let line = v["cmdline:"].as_str().unwrap();
    for unknown in ["--window 0s", "--interval 0s", "--priority 0"] {
        assert!(!line.contains(unknown), "{line}");
    }
    // What the text did not record is named after a `#`, which a shell takes as a comment.
    let (command, unknown) = line.split_once(" # ").unwrap_or((line, ""));
    assert_eq!(
        unknown, "not recorded: interval, priority, method, cpus, memory",
        "{line}"
    );
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[..2], ["latlab", "measure"], "{line}");
    latlab_testkit::run_ok(latlab!().args(&words[1..]).args([
        "-D",
        "200ms",
        "-q",
        "--no-samplers",
    ]));
}

/// Capture `name` imported into a new store, and its CSV export.
fn exported_csv(name: &str) -> (tempfile::TempDir, PathBuf, String) {
    let (dir, store) = imported(name);
    let out = output_of(&store, &["export", "1", "--format", "csv"]);
    (dir, store, out)
}

/// The fields of each line of a CSV without quoted fields.
fn csv_rows(out: &str) -> Vec<Vec<&str>> {
    out.lines().map(|l| l.split(',').collect()).collect()
}

/// The index of a column of `rows` by its name in the header.
fn column<'a>(rows: &'a [Vec<&str>]) -> impl Fn(&str) -> usize + 'a {
    move |name| rows[0].iter().position(|h| *h == name).unwrap()
}

/// The CSV export of an imported run says what its format did not record as empty (missed
/// periods, when the maximum happened), and its corrected statistics keep the exact percentiles
/// the raw ones have: never below them (they were the bucket's lowest value).
#[test]
fn an_imported_run_exports_csv_without_invented_figures() {
    let (_dir, _store, out) = exported_csv("stress-ng-cyclic-beyond-range.log");
    let rows = csv_rows(&out);
    let col = column(&rows);
    let (missed, max_at, p99, corrected) = (
        col("missed"),
        col("max_at_ns"),
        col("p99_ns"),
        col("corrected_p99_ns"),
    );
    assert!(rows.len() >= 3, "{out}");
    for r in &rows[1..] {
        assert_eq!((r[missed], r[max_at]), ("", ""), "{out}");
        let (raw, fixed): (u64, u64) = (r[p99].parse().unwrap(), r[corrected].parse().unwrap());
        assert!(fixed >= raw, "corrected p99 {fixed} below p99 {raw}: {out}");
    }
}

/// The CSV says where an import's lower bounds begin: both of cyclictest's threads ran past its
/// 50 µs histogram (thread 0's p50 is a bound); a run latlab measured has none.
#[test]
fn an_imported_runs_csv_says_where_its_lower_bounds_begin() {
    let (_dir, store, out) = exported_csv("cyclictest.json");
    let rows = csv_rows(&out);
    let col = column(&rows);
    let (from, p50) = (col("lower_bounds_from_ns"), col("p50_ns"));
    let row = |label: &str| {
        rows.iter()
            .find(|r| r[0] == label)
            .unwrap_or_else(|| panic!("{label}: {out}"))
    };
    let bound: u64 = row("cpu0")[from]
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(bound, 50_000, "{out}");
    assert!(row("cpu0")[p50].parse::<u64>().unwrap() >= bound, "{out}");
    assert_eq!(row("cpu1")[from], "50000", "{out}");
    assert_eq!(row("all")[from], "50000", "{out}");
    latlab_testkit::run_ok(
        latlab!()
            .args(["measure", "-D", "200ms", "-q", "--no-samplers", "--db"])
            .arg(&store),
    );
    let measured = output_of(&store, &["export", "2", "--format", "csv"]);
    let rows = csv_rows(&measured);
    assert_eq!(rows[0][from], "lower_bounds_from_ns", "{measured}");
    for r in &rows[1..] {
        assert_eq!(r[from], "", "{measured}");
    }
}

/// Percentiles that lie among an import's samples beyond its histogram's range are lower bounds,
/// and the report's tables say so ("≥") where they show them, with what it means.
#[test]
fn a_report_marks_an_imports_lower_bounds() {
    // Thread 0 has 264 of its 500 samples beyond the 50 µs range.
    let (_dir, store) = imported("cyclictest.json");
    let text = output_of(&store, &["report", "1", "--format", "text"]);
    let cpu0 = text
        .lines()
        .find(|l| l.starts_with("import-") && l.contains(" cpu0 "))
        .unwrap_or_else(|| panic!("{text}"));
    // p50, p90 and p99 lie beyond the range; the maximum, and p99.9 at it, are exact; the
    // deviation (cyclictest printed none) counts the samples beyond at the range's end.
    assert_eq!(cpu0.matches('≥').count(), 4, "{cpu0}");
    // A lower bound is shown as the bound itself, the range's end (the histogram keeps those
    // samples a little past it).
    assert!(cpu0.contains("  ≥50.0  ≥50.0  ≥50.0  "), "{cpu0}");
    assert!(cpu0.ends_with("  48.4  ≥13.6"), "{cpu0}");
    // An export of more rows than the import's range writes its range, and says so.
    let out = latlab!()
        .args([
            "export",
            "1",
            "--format",
            "cyclictest-hist",
            "--range",
            "60",
            "--db",
        ])
        .arg(&store)
        .output()
        .unwrap();
    let (rows, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(
        rows.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count(),
        50
    );
    // What "≥" means is said; the import's notes on its file are notes, not a run's warnings.
    for (said, want) in [
        (
            &err,
            "--range 60: 50 rows written: the run's histogram ends there",
        ),
        (&text, "\"≥\": a lower bound"),
        (&text, " noted: values are whole microseconds, truncated"),
    ] {
        assert!(said.contains(want), "{want:?} in {said}");
    }
    assert!(!text.contains(" warned: values are whole"), "{text}");
    // The cell's mean pools the means cyclictest printed (47.87 and 32.48 µs, each + 0.5 for
    // the middle of its microsecond, over 500 samples each): exact, not a lower bound.
    let cell = text
        .lines()
        .find(|l| l.starts_with("import-") && l.contains(" 1000 ") && !l.contains(" noted: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(cell.contains("  40.7  "), "{cell}");
    // The trade-offs table marks its p99 so too (the maximum is exact).
    let tradeoff = text
        .split("Trade-offs")
        .nth(1)
        .and_then(|t| t.lines().find(|l| l.starts_with("import-")))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(tradeoff.matches('≥').count(), 1, "{tradeoff}");
    // cyclictest printed no deviation: the one from the histogram counts the samples beyond
    // its range at its end, and is a lower bound too; the printed means are not.
    let html = output_of(&store, &["report", "1", "--format", "html", "-o", "-"]);
    let cells = |stat: &str| -> Vec<String> {
        html.split(&format!("data-stat=\"{stat}\""))
            .skip(1)
            .map(|c| {
                c.split('>')
                    .nth(1)
                    .unwrap()
                    .split('<')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let (means, stdevs) = (cells("mean"), cells("stdev"));
    assert!(!stdevs.is_empty(), "{html}");
    assert!(stdevs.iter().all(|c| c.starts_with('≥')), "{stdevs:?}");
    assert!(means.iter().all(|c| !c.starts_with('≥')), "{means:?}");
}

/// What a format does not record is said to be unknown, not shown as a value: cyclictest's `-h`
/// text says neither how it slept nor whether memory was locked, and no format keeps the system
/// beyond its names (no "bare metal", no "memory not locked" finding).
#[test]
fn what_an_import_does_not_record_is_not_recorded() {
    let (_dir, store) = imported("cyclictest-h50.txt");
    let show = output_of(&store, &["db", "show", "1"]);
    for line in [
        "method:   not recorded (the imported format does not say)",
        "memory:   not recorded (the imported format does not say)",
    ] {
        assert!(show.contains(line), "{line}\n{show}");
    }
    // Its table marks what lies beyond the 50 µs range as a lower bound, as a report does;
    // the pooled row too.
    let all = show.lines().find(|l| l.starts_with("all ")).unwrap();
    assert_eq!(all.matches('≥').count(), 3, "{show}");
    assert!(show.contains("≥: a lower bound"), "{show}");
    let report = output_of(&store, &["report", "1", "--format", "text"]);
    assert!(
        report.contains("the rest               not recorded (imported from a format"),
        "{report}"
    );
    for absent in ["bare metal", "irqbalance running", "memory not locked"] {
        assert!(!report.contains(absent), "{absent}\n{report}");
    }
    // Nor whether -a pinned its threads: not "2 unpinned".
    let cell = report
        .lines()
        .find(|l| l.starts_with("import-") && l.contains("2, not recorded"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(cell.contains("  not recorded  "), "{cell}");
    assert!(show.contains("2 threads, CPUs not recorded"), "{show}");
    let listed = list(&store);
    assert!(
        listed.contains("  -/-  ") && listed.contains("  2, not recorded  "),
        "{listed}"
    );
    // cyclictest --json has its command line: -m locked memory, and it slept with
    // clock_nanosleep.
    let (_dir, store) = imported("cyclictest.json");
    let show = output_of(&store, &["db", "show", "1"]);
    assert!(show.contains("memory:   locked (mlockall)"), "{show}");
    assert!(show.contains("method:   clock-nanosleep"), "{show}");
}

/// A reader that stops early (`latlab report … -o - | head`) ends the output without an error:
/// what it read is what it wanted.
#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let (_dir, store) = imported("cyclictest.json");
    let mut child = latlab!()
        .args(["report", "1", "-o", "-", "--db"])
        .arg(&store)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closed before the report (an HTML page of hundreds of kB) is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

/// A lower bound is not compared as if exact: `compare`, a report's findings and its JSON, and
/// `db list` keep the "≥" and compute no difference from it (they said p99 -57 % from a value
/// known only to be at least what it read).
#[test]
fn lower_bounds_are_marked_and_not_compared_as_exact() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let files = [
        capture("cyclictest.json"),
        capture("jitterdebugger-results.json"),
    ];
    let o = import(&store, &[&files[0], &files[1]], false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let compared = output_of(&store, &["compare", "1", "2"]);
    let p99 = compared
        .lines()
        .find(|l| l.starts_with("p99 (µs)"))
        .unwrap_or_else(|| panic!("{compared}"));
    let cells: Vec<&str> = p99.split_whitespace().collect();
    assert_eq!(&cells[2..6], ["≥50.0", "94.5", "-", "-"], "{p99}");
    assert!(
        p99.ends_with("not compared: its baseline's value is only a lower bound (samples beyond an import's histogram range)"),
        "{p99}"
    );
    assert!(
        compared.contains("verdict on p99: not compared: A's value is only a lower bound"),
        "{compared}"
    );
    // Exact values are still compared.
    let max = compared
        .lines()
        .find(|l| l.starts_with("max (µs)"))
        .unwrap();
    assert!(max.contains("+5772.0"), "{max}");
    let report = output_of(&store, &["report", "1", "2", "--format", "text"]);
    let open = latlab_testkit::between(
        &report,
        "Largest differences without a verdict",
        "Before trusting",
    );
    assert!(
        open.contains("max: ") && !open.contains("p99: ") && !open.contains("p90: "),
        "{open}"
    );
    let json: serde_json::Value = serde_json::from_str(&output_of(
        &store,
        &["report", "1", "2", "--format", "json"],
    ))
    .unwrap();
    let rows = json["comparisons"][0]["statistics"].as_array().unwrap();
    let row = rows.iter().find(|r| r["statistic"] == "p99").unwrap();
    assert_eq!(row["baseline_is_lower_bound"], true, "{row}");
    assert_eq!(row["cell_is_lower_bound"], false, "{row}");
    assert_eq!(row["verdict"], "not-compared-lower-bound", "{row}");
    assert!(row["percent"].is_null(), "{row}");
    let listed = list(&store);
    assert!(
        listed.contains("  ≥50.0  ") && listed.contains("≥: a lower bound"),
        "{listed}"
    );
}

/// jitterdebugger's `-o DIR` writes results.json there: the directory is taken for it. A
/// directory without one, and an empty file, are refused saying so (they read "Is a directory
/// (os error 21)" and "not a format latlab reads"). A file imported again names its run.
#[test]
fn a_jitterdebugger_directory_an_empty_file_and_a_second_import() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let out = dir.path().join("jd");
    std::fs::create_dir(&out).unwrap();
    let empty_dir = dir.path().join("nothing");
    std::fs::create_dir(&empty_dir).unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "\n").unwrap();
    for (bad, said) in [
        (
            &empty_dir,
            "a directory without a results.json (accepted: a file, or the directory",
        ),
        (
            &empty,
            "empty (accepted: the output of cyclictest, stress-ng --cyclic or",
        ),
    ] {
        let o = import(&store, &[bad], false);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("latlab: error: {}: {said}", bad.display())),
            "{err}"
        );
    }
    std::fs::copy(
        capture("jitterdebugger-results.json"),
        out.join("results.json"),
    )
    .unwrap();
    let o = import(&store, &[&out], false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("saved as run 1"), "{}", stdout(&o));
    // results.json records no interval: said as "not recorded", as the README says (it was "-").
    let show = output_of(&store, &["db", "show", "1"]);
    assert!(show.contains("\ninterval: not recorded\n"), "{show}");
    let o = import(&store, &[&out], false);
    assert!(
        stdout(&o).contains(&format!("already in {} as run 1 (", store.display())),
        "{}",
        stdout(&o)
    );
}
