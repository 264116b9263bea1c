//! `latlab db` run for real against stores in temporary directories, with a run measured by
//! `latlab measure` (SCHED_OTHER, no privileges needed).
#![allow(clippy::unwrap_used)]

use latlab_testkit::{assert_ok, assert_one_line_error, latlab, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Output;

fn db(store: &Path, args: &[&str]) -> Output {
    latlab!()
        .arg("db")
        .args(args)
        .arg("--db")
        .arg(store)
        .output()
        .unwrap()
}

/// `latlab db ARGS` on `store`, which must succeed: its stdout.
fn db_ok(store: &Path, args: &[&str]) -> String {
    let o = db(store, args);
    assert_ok(&o);
    stdout(&o)
}

/// The run rows of `db list`'s table: under its header, and above the note a run that missed
/// many periods (a loaded machine) adds.
fn rows(listed: &str) -> usize {
    listed
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count()
}

/// A short real measurement written with `--json`.
fn measured_json(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join(name);
    let o = latlab!()
        .args([
            "measure", "-D", "0.3s", "-a", "0", "-q", "--policy", "other",
        ])
        .args(["--no-mlock", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_ok(&o);
    file
}

fn import(store: &Path, files: &[&Path]) -> Output {
    let mut c = latlab!();
    c.args(["db", "import-json"])
        .args(files)
        .arg("--db")
        .arg(store);
    c.output().unwrap()
}

/// `s.db` in `dir` holding one short measured run (imported from `r.json` beside it).
fn store_with_a_run(dir: &Path) -> PathBuf {
    let store = dir.join("s.db");
    let json = measured_json(dir, "r.json");
    assert_ok(&import(&store, &[&json]));
    store
}

/// A run that missed most of its periods is not listed as the best one without a word: `db list`
/// shows the share missed and says what it means, and `db show` says it under its table.
#[test]
fn a_run_that_missed_most_periods_says_so_in_list_and_show() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let json = measured_json(dir.path(), "r.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Three periods missed for each one measured: 75 %.
    let count = v["overall"]["stats"]["count"].as_u64().unwrap();
    v["overall"]["missed"] = (3 * count).into();
    v["threads"][0]["missed"] = (3 * count).into();
    std::fs::write(&json, v.to_string()).unwrap();
    assert_ok(&import(&store, &[&json]));
    let list = db_ok(&store, &["list"]);
    let header = list.lines().next().unwrap();
    assert!(header.contains("missed"), "{list}");
    assert!(list.lines().nth(1).unwrap().contains(" 75.0% "), "{list}");
    assert!(
        list.contains("from 5% on, a run's latencies\n  are only the wake-ups that happened"),
        "{list}"
    );
    let show = db_ok(&store, &["show", "1"]);
    assert!(
        show.contains("missed 75.0% of its periods: the latencies above are only the wake-ups"),
        "{show}"
    );
    // A run that missed none has no such lines.
    let plain = dir.path().join("p.db");
    assert_ok(&import(&plain, &[&measured_json(dir.path(), "p.json")]));
    assert!(!db_ok(&plain, &["show", "1"]).contains("of its periods"));
}

#[test]
fn a_missing_store_is_bad_input_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("none.db");
    // Every command needs a store, listing too (it said "no runs" and exit 0, as if an empty
    // store were there): a wrong --db is bad input.
    for args in [
        &["list"][..],
        &["show", "1"],
        &["rm", "1"],
        &["vacuum"],
        &["check"],
    ] {
        let o = db(&store, args);
        assert_one_line_error(&o, 2, "no store at");
        assert!(!store.exists());
    }
}

#[test]
fn a_measured_run_is_saved_listed_shown_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let json = measured_json(dir.path(), "r.json");
    let o = import(&store, &[&json]);
    assert_ok(&o);
    assert!(stdout(&o).contains("saved as run 1 in"), "{}", stdout(&o));

    // One run row under the header (and, when the short run missed many periods on a loaded
    // machine, the list's note on what that does to its latencies).
    let text = db_ok(&store, &["list"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(rows(&text), 1, "{text}");
    for col in [
        "id",
        "started",
        "duration",
        "method/interval",
        "CPUs",
        "p99",
        "max",
        "experiment",
    ] {
        assert!(lines[0].contains(col), "{col} missing: {text}");
    }
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[0], "1");
    assert!(row.contains(&"clock-nanosleep/1ms"), "{text}");
    assert!(row.contains(&"0.3s"), "{text}");

    // The summary, as measure printed it.
    let text = db_ok(&store, &["show", "1"]);
    assert!(text.starts_with("stored:   run 1 in"), "{text}");
    assert!(
        text.contains("\ncpu0 ") && text.contains("\nall "),
        "{text}"
    );

    // The full result reads back as the file measure wrote, by number and by result id.
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let back: serde_json::Value =
        serde_json::from_str(&db_ok(&store, &["show", "1", "--json"])).unwrap();
    assert_eq!(back, original);
    let uid = original["id"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&db_ok(&store, &["show", uid, "--json"]))
            .unwrap(),
        original
    );

    // The same result twice is said and skipped, the store unchanged.
    let o = import(&store, &[&json]);
    assert_ok(&o);
    assert!(stdout(&o).contains("already in"), "{}", stdout(&o));
    assert!(stdout(&o).contains("as run 1"), "{}", stdout(&o));
    assert_eq!(rows(&db_ok(&store, &["list"])), 1);

    assert!(db_ok(&store, &["rm", "1"]).contains(&format!("removed run 1 ({uid})")));
    let out = db_ok(&store, &["list"]);
    assert!(out.starts_with("no runs in"), "{out}");
    assert_one_line_error(&db(&store, &["show", "1"]), 2, "no run 1");
    // A monitoring series is not a run: the error says what shows it.
    assert_one_line_error(
        &db(&store, &["show", "series:node1"]),
        2,
        "a monitoring series is shown by `latlab report series:node1`",
    );
}

#[test]
fn unknown_or_malformed_ids_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_a_run(dir.path());

    assert_one_line_error(&db(&store, &["show", "42"]), 2, "no run 42 in");
    assert_one_line_error(&db(&store, &["show", ""]), 2, "empty run id");
    // One unknown id among several: nothing is removed.
    assert_one_line_error(&db(&store, &["rm", "1", "42"]), 2, "no run 42");
    db_ok(&store, &["show", "1"]);
    // Missing arguments and unknown subcommands: clap's errors in latlab's one-line form.
    assert_one_line_error(&db(&store, &["rm"]), 2, "required");
    assert_one_line_error(&db(&store, &["show"]), 2, "required");
    assert_one_line_error(&db(&store, &["frobnicate"]), 2, "frobnicate");
    assert_one_line_error(&db(&store, &["list", "--limit", "x"]), 2, "--limit");
    // A file that is not a result.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"something else\"}").unwrap();
    assert_one_line_error(&import(&store, &[&bad]), 2, "not a latlab result");
}

#[test]
fn vacuum_and_check_keep_a_sound_store_sound() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let a = measured_json(dir.path(), "a.json");
    let b = measured_json(dir.path(), "b.json");
    assert_ok(&import(&store, &[&a, &b]));
    db_ok(&store, &["rm", "1"]);

    let out = db_ok(&store, &["vacuum"]);
    assert!(out.starts_with("vacuumed "), "{out}");
    let out = db_ok(&store, &["check"]);
    assert!(out.contains(": ok (1 run, 3 histograms"), "{out}");
    db_ok(&store, &["show", "2", "--json"]);
}

/// Flip bytes inside every stored histogram's compressed buckets, in the file itself.
fn corrupt_histograms(store: &Path) -> usize {
    let wal = PathBuf::from(format!("{}-wal", store.display()));
    assert!(
        !wal.exists(),
        "the WAL is folded into the file when latlab exits"
    );
    let mut bytes = std::fs::read(store).unwrap();
    let mut n = 0;
    let mut k = 0;
    while k + 48 <= bytes.len() {
        if &bytes[k..k + 4] == b"LLH1" {
            for b in &mut bytes[k + 40..k + 48] {
                *b = !*b;
            }
            n += 1;
            k += 48;
        } else {
            k += 1;
        }
    }
    std::fs::write(store, bytes).unwrap();
    n
}

#[test]
fn check_finds_a_corrupted_histogram_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_a_run(dir.path());
    db_ok(&store, &["check"]);
    assert!(corrupt_histograms(&store) >= 3);

    let o = db(&store, &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.lines()
            .any(|l| l.starts_with("problem: run 1") && l.contains("histogram")),
        "{text}"
    );
    assert!(text.contains("problems ("), "{text}");
    // Reading the damaged run fails with a message instead of showing wrong numbers.
    let o = db(&store, &["show", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("corrupt"), "{}", stderr(&o));
}

#[test]
fn a_store_from_a_newer_latlab_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_a_run(dir.path());
    // SQLite keeps the schema's user_version at byte 60 of the file, big-endian.
    let mut bytes = std::fs::read(&store).unwrap();
    bytes[60..64].copy_from_slice(&99u32.to_be_bytes());
    std::fs::write(&store, &bytes).unwrap();

    for args in [&["list"][..], &["check"], &["show", "1"]] {
        let o = db(&store, args);
        assert_one_line_error(&o, 2, "schema version 99, newer than this latlab supports");
    }
    assert_eq!(std::fs::read(&store).unwrap(), bytes);
}

#[test]
fn a_file_that_is_not_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.db");
    std::fs::write(&file, "x".repeat(4096)).unwrap();
    assert_one_line_error(&db(&file, &["check"]), 2, "is not a latlab store");
    assert_eq!(std::fs::read(&file).unwrap(), "x".repeat(4096).as_bytes());
    // An empty file (`touch`ed, or named by mistake) is not made a store by a command that
    // only reads.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    for args in [&["list"][..], &["check"]] {
        assert_one_line_error(
            &db(&empty, args),
            2,
            "is not a latlab store (an empty file)",
        );
    }
    let o = latlab!()
        .args(["report", "--db"])
        .arg(&empty)
        .args(["run:1"])
        .output()
        .unwrap();
    assert_one_line_error(&o, 2, "is not a latlab store (an empty file)");
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    let side: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("empty.db"))
        .collect();
    assert_eq!(side, ["empty.db"], "no journal beside it");
    // A command that writes makes its store there.
    let o = latlab!()
        .args(["measure", "-D", "0.1s", "-q", "--no-samplers", "--db"])
        .arg(&empty)
        .args(latlab_testkit::policy_args())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(db(&empty, &["list"]).status.code(), Some(0));
    // A pipe, and a file of the kernel's of size 0 that reads as data, are no stores: refused
    // before SQLite opens them (it wrote a journal beside them and said "disk I/O error").
    let fifo = dir.path().join("pipe.db");
    if latlab_testkit::command("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success()
    {
        for cmd in [&["db", "list"][..], &["measure", "-D", "0.1s", "-q"]] {
            let o = latlab!().args(cmd).arg("--db").arg(&fifo).output().unwrap();
            assert_one_line_error(&o, 2, "is not a latlab store (not a regular file: a device");
        }
        assert!(!dir.path().join("pipe.db-journal").exists());
    }
    let o = db(Path::new("/proc/version"), &["list"]);
    assert_one_line_error(&o, 2, "is not a latlab store (a file of the kernel's");
}

#[test]
fn the_store_is_named_by_latlab_db_when_no_option_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("env.db");
    let json = measured_json(dir.path(), "r.json");
    let o = latlab!()
        .args(["db", "import-json"])
        .arg(&json)
        .env("LATLAB_DB", &store)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_ok(&o);
    assert!(store.exists());
    assert!(!dir.path().join("latlab.db").exists());
    let o = latlab!()
        .args(["db", "list"])
        .env("LATLAB_DB", &store)
        .output()
        .unwrap();
    assert_ok(&o);
    assert_eq!(rows(&stdout(&o)), 1);
    // Without either, ./latlab.db in the working directory.
    let o = latlab!()
        .args(["db", "import-json"])
        .arg(&json)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_ok(&o);
    assert!(dir.path().join("latlab.db").exists());
}

/// `measure --db` without a path saves to `$LATLAB_DB`, else to `./latlab.db`.
#[test]
fn measure_db_without_a_path_takes_the_default_store() {
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("env.db");
    for (env, store) in [
        (Some(&named), named.clone()),
        (None, dir.path().join("latlab.db")),
    ] {
        let mut c = latlab!();
        c.args([
            "measure", "-D", "0.2s", "-a", "0", "-q", "--policy", "other",
        ])
        .args(["--no-mlock", "--no-samplers", "--db"])
        .current_dir(dir.path());
        if let Some(path) = env {
            c.env("LATLAB_DB", path);
        }
        let o = c.output().unwrap();
        assert_ok(&o);
        assert!(
            db_ok(&store, &["list"]).contains("clock-nanosleep"),
            "{}",
            store.display()
        );
    }
}

/// An output that cannot be written (a full disk) does not keep the run from the store, nor
/// the other outputs from their files; each failure is said and the exit code is 1.
#[test]
fn a_failed_output_still_leaves_the_run_in_the_store_and_the_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let (store, hist) = (dir.path().join("s.db"), dir.path().join("h.txt"));
    let o = latlab!()
        .args([
            "measure", "-D", "0.2s", "-a", "0", "-q", "--policy", "other",
        ])
        .args([
            "--no-mlock",
            "--no-samplers",
            "--json",
            "/dev/full",
            "--histfile",
        ])
        .arg(&hist)
        .arg("--db")
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("writing --json /dev/full"),
        "{}",
        stderr(&o)
    );
    assert!(db_ok(&store, &["list"]).contains("clock-nanosleep"));
    assert!(
        std::fs::read_to_string(&hist)
            .unwrap()
            .contains("# Max Latencies")
    );
}

/// `latlab import` refuses a result latlab wrote and names the command that takes it, which the
/// help lists (it was hidden, so the error pointed to a command no help showed).
#[test]
fn an_own_result_given_to_import_names_a_command_the_help_lists() {
    let dir = tempfile::tempdir().unwrap();
    let json = measured_json(dir.path(), "r.json");
    let store = dir.path().join("s.db");
    let o = latlab!()
        .arg("import")
        .arg(&json)
        .arg("--db")
        .arg(&store)
        .output()
        .unwrap();
    assert_one_line_error(&o, 2, "goes in with `latlab db import-json`");
    assert!(!store.exists());
    let help = latlab!().args(["db", "--help"]).output().unwrap();
    assert_ok(&help);
    assert!(
        stdout(&help).contains("\n  import-json  "),
        "{}",
        stdout(&help)
    );
    assert_ok(&import(&store, &[&json]));
}

/// `db import-json` of files some of which are stored already saves the others and says which
/// were there (it stopped at the first, exit 1, the files after it not saved); a file that is
/// no latlab result points to `latlab import`.
#[test]
fn import_json_skips_what_is_stored_and_saves_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("t.db");
    let (a, b) = (
        measured_json(dir.path(), "a.json"),
        measured_json(dir.path(), "b.json"),
    );
    let import = |files: &[&Path]| {
        latlab!()
            .args(["db", "import-json", "--db"])
            .arg(&store)
            .args(files)
            .output()
            .unwrap()
    };
    assert_ok(&import(&[&a]));
    let o = import(&[&a, &b]);
    assert_ok(&o);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("a.json: already in {} as run 1", store.display())),
        "{out}"
    );
    assert!(out.contains("b.json: saved as run 2"), "{out}");
    // A filter that cannot match is bad input, not an empty store.
    assert_one_line_error(
        &db(&store, &["list", "--experiment", "99"]),
        2,
        "--experiment 99: no experiment 99 in",
    );
    assert_one_line_error(
        &db(&store, &["list", "--limit", "0"]),
        2,
        "--limit: 0 lists nothing (accepted: a number of runs, 1 or more",
    );
    // A negative count names this option's accepted form, not every count's "0 or more".
    assert_one_line_error(
        &db(&store, &["list", "--limit", "-1"]),
        2,
        "--limit: -1 is negative (accepted: a number of runs, 1 or more",
    );
    assert_eq!(rows(&db_ok(&store, &["list", "--limit", "1"])), 1);
    let ct = dir.path().join("ct.json");
    std::fs::write(&ct, "{\"file_version\": 1, \"thread\": {}}").unwrap();
    assert_one_line_error(&import(&[&ct]), 2, "goes in with `latlab import`");
}
