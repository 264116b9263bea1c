//! `latlab report`, `compare`, `export` and `import` on a store filled by a real `latlab run`:
//! the report's numbers equal the stored histograms, its SVGs are well formed, and headless
//! Chromium renders it without console errors.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_hist::Histogram;
use latlab_store::Store;
use latlab_testkit::{is_root, latlab, run_exit};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One store with a two-cell experiment of three repeats each, shared by the tests.
fn store() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, db) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let policy = if is_root() {
            "policy = \"fifo\"\npriority = 80\n"
        } else {
            "policy = \"other\"\nno-mlock = true\n"
        };
        let plan = dir.path().join("p.toml");
        std::fs::write(
            &plan,
            format!(
                "name = \"report-test\"\nrepeat = 3\n[settings]\nduration = \"0.3s\"\n\
                 sample-period = \"100ms\"\nwindow = \"100ms\"\ncpus = \"0\"\n{policy}\
                 [axes]\ninterval = [\"1ms\", \"250us\"]\n"
            ),
        )
        .unwrap();
        let db = dir.path().join("r.db");
        latlab_testkit::run_ok(latlab!().args([
            "run",
            plan.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ]));
        (dir, db)
    });
    db
}

fn run_ok(args: &[&str]) -> std::process::Output {
    latlab_testkit::run_ok(latlab!().args(args))
}

#[test]
fn report_numbers_equal_the_stored_histograms() {
    let db = store().to_str().unwrap();
    let out = run_ok(&["report", "--db", db, "e1", "--format", "json", "-o", "-"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = Store::open_existing(store()).unwrap();
    let cells = s.cells(latlab_store::ExperimentId(1)).unwrap();
    let rcells = report["cells"].as_array().unwrap();
    assert_eq!(rcells.len(), 2);
    for rc in rcells {
        let name = rc["name"].as_str().unwrap();
        let mut pooled = Histogram::new();
        let mut n = 0;
        for c in cells.iter().filter(|c| c.key == name) {
            for id in &c.runs {
                pooled.merge(&s.load_run(*id).unwrap().overall.histogram);
                n += 1;
            }
        }
        assert_eq!(n, 3, "{name}: three repeats");
        assert_eq!(rc["repeats"].as_array().unwrap().len(), 3);
        let stats = &rc["stats"];
        assert_eq!(stats["count"].as_u64().unwrap(), pooled.count());
        assert_eq!(stats["p99"].as_u64().unwrap(), pooled.percentile(99.0));
        assert_eq!(stats["max"].as_u64().unwrap(), pooled.max());
    }
}

#[test]
fn html_report_is_self_contained_and_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let db = store().to_str().unwrap();
    run_ok(&["report", "--db", db, "e1", "-o", html.to_str().unwrap()]);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>") || text.starts_with("<!doctype html>"));
    // No network access: nothing is loaded from elsewhere.
    for bad in ["http://", "https://", "src=\"//"] {
        let hits: Vec<&str> = text
            .match_indices(bad)
            .map(|(i, _)| &text[i.saturating_sub(40)..(i + 40).min(text.len())])
            .filter(|ctx| !ctx.contains("xmlns"))
            .collect();
        assert!(hits.is_empty(), "{bad}: {hits:?}");
    }
    let svgs = text.matches("<svg").count();
    assert!(svgs >= 4, "plots present: {svgs}");
    for (i, _) in text.match_indices("<svg") {
        let end = text[i..].find("</svg>").unwrap() + i + "</svg>".len();
        roxmltree::Document::parse(&text[i..end]).unwrap_or_else(|e| panic!("SVG at {i}: {e}"));
    }
    render_in_chromium(&html, dir.path());
}

/// Chromium (Debian's package) renders the report to a PNG without console errors.
fn render_in_chromium(html: &Path, dir: &Path) {
    if !latlab_testkit::require("chromium") {
        return;
    }
    let png = dir.join("report.png");
    let (_, log) = common::chromium(&[
        "--window-size=1280,2000".into(),
        format!("--user-data-dir={}", dir.join("profile").display()),
        format!("--screenshot={}", png.display()),
        format!("file://{}", html.display()),
    ]);
    let console = common::console_lines(&log);
    assert!(console.is_empty(), "console messages: {console:?}");
    let meta = std::fs::metadata(&png).unwrap();
    assert!(meta.len() > 10_000, "a rendered page, not a blank one");
    let keep = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report.png");
    let _ = std::fs::copy(&png, keep);
}

#[test]
fn text_and_markdown_and_compare() {
    let db = store().to_str().unwrap();
    let text = run_ok(&["report", "--db", db, "e1", "--format", "text"]).stdout;
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("interval=1ms") && text.contains("interval=250us"),
        "{text}"
    );
    // An item given twice is one item, in the title too.
    let twice = run_ok(&["report", "--db", db, "e1", "e1", "--format", "text"]).stdout;
    let twice = String::from_utf8_lossy(&twice);
    assert_eq!(twice.lines().next(), text.lines().next(), "{twice}");
    assert_eq!(
        twice.lines().next(),
        Some("latlab report: report-test (e1)")
    );
    // One store named twice (also by another path) is refused: every cell would be reported
    // twice and compared with itself.
    let other = format!(
        "{}/./{}",
        store().parent().unwrap().display(),
        store().file_name().unwrap().to_string_lossy()
    );
    for cmd in [&["report", "e1"][..], &["compare", "1", "2"]] {
        let out = run_exit(latlab!().args(cmd).args(["--db", db, "--db", &other]), 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "--db {db} and --db {other}: one store named twice (accepted: each store once)"
            )),
            "{err}"
        );
    }
    // A store without the item is said, the report made from the others.
    let tmp = tempfile::tempdir().unwrap();
    let other_store = tmp.path().join("b.db");
    let h = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-import/tests/data/cyclictest-h50.txt");
    latlab_testkit::run_ok(
        latlab!()
            .arg("import")
            .arg(&h)
            .arg("--db")
            .arg(&other_store),
    );
    let out = run_ok(&[
        "report",
        "--db",
        db,
        "--db",
        other_store.to_str().unwrap(),
        "e1",
        "--format",
        "text",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("latlab: note: e1: not in store b; reported from the other stores"),
        "{err}"
    );
    let md = run_ok(&["report", "--db", db, "--format", "md"]).stdout;
    assert!(String::from_utf8_lossy(&md).contains("| "));
    let cmp = run_ok(&[
        "compare",
        "--db",
        db,
        "e1/interval=1ms",
        "e1/interval=250us",
    ])
    .stdout;
    let cmp = String::from_utf8_lossy(&cmp);
    assert!(cmp.contains("p99") && cmp.contains("Mann-Whitney"), "{cmp}");
    // A cell the experiment does not have: its cells are named.
    let out = latlab!()
        .args(["compare", "--db", db, "e1/interval=1ms", "e1/load=foo"])
        .output()
        .unwrap();
    latlab_testkit::assert_one_line_error(
        &out,
        2,
        "e1/load=foo: experiment e1 has no cell \"load=foo\" with saved runs (accepted: \
         e1/KEY of its cells: interval=1ms, interval=250us)",
    );
    // Items whose cells share names: each cell is told apart by its item; an item given twice
    // is reported once.
    let csv = |items: &[&str]| {
        let mut args = vec!["report", "--db", db, "--format", "csv", "--title", "t"];
        args.extend(items);
        String::from_utf8(run_ok(&args).stdout).unwrap()
    };
    let both = csv(&["e1", "e1/interval=250us"]);
    let cells: Vec<&str> = both
        .lines()
        .filter_map(|l| l.strip_prefix("cell,")?.split(',').next())
        .collect();
    assert_eq!(
        cells,
        [
            "interval=1ms [e1]",
            "interval=250us [e1]",
            "interval=250us [e1/interval=250us]"
        ]
    );
    assert_eq!(csv(&["e1", "e1"]), csv(&["e1"]));
    // Another baseline: that cell comes first, and the others are compared with it.
    let text = run_ok(&[
        "report",
        "--db",
        db,
        "e1",
        "--format",
        "text",
        "--baseline",
        "interval = 250us",
    ])
    .stdout;
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("Every other cell is compared against the baseline, interval=250us."),
        "{text}"
    );
    let out = run_exit(
        latlab!().args(["report", "--db", db, "e1", "--baseline", "interval=5ms"]),
        2,
    );
    assert!(
        latlab_testkit::stderr(&out).contains(
            "--baseline \"interval=5ms\": no cell of that name in this report (accepted: one of \
             interval=1ms | interval=250us)"
        ),
        "{}",
        latlab_testkit::stderr(&out)
    );
    // An experiment is not one cell.
    run_exit(latlab!().args(["compare", "--db", db, "e1", "1"]), 2);
    run_exit(latlab!().args(["report", "--db", db, "e99"]), 2);
    run_exit(latlab!().args(["report", "--db", db, "--format", "pdf"]), 2);
}

#[test]
fn export_and_import_round_trip_through_cyclictest_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = store().to_str().unwrap();
    let ct = dir.path().join("ct.json");
    run_ok(&[
        "export",
        "1",
        "--db",
        db,
        "--format",
        "cyclictest-json",
        "-o",
        ct.to_str().unwrap(),
    ]);
    let csv = run_ok(&["export", "1", "--db", db, "--format", "csv"]).stdout;
    assert!(String::from_utf8_lossy(&csv).lines().count() >= 2);
    // A device takes an output too (it has no disk to sync to: the sync refused it, exit 1).
    run_ok(&["export", "1", "--db", db, "-o", "/dev/null"]);
    // More rows than cyclictest's histogram holds are cut at its largest, and said so (it
    // said the run's histogram ended there, of a run measured to the nanosecond).
    let big = run_ok(&[
        "export",
        "1",
        "--db",
        db,
        "--format",
        "cyclictest-hist",
        "--range",
        "2000000",
        "-o",
        "/dev/null",
    ]);
    assert!(
        String::from_utf8_lossy(&big.stderr).contains(
            "--range 2000000: 1000000 rows written: cyclictest's largest histogram (its samples"
        ),
        "{}",
        String::from_utf8_lossy(&big.stderr)
    );
    run_ok(&["report", "e1", "--db", db, "-o", "/dev/null"]);
    let db2 = dir.path().join("imported.db");
    let import = || {
        run_ok(&[
            "import",
            ct.to_str().unwrap(),
            "--db",
            db2.to_str().unwrap(),
        ])
    };
    let out = import();
    assert!(String::from_utf8_lossy(&out.stdout).contains("saved as run 1"));
    // Importing the same file again is noticed.
    let again = import();
    assert!(String::from_utf8_lossy(&again.stdout).contains("already in"));
    let original = Store::open_existing(store())
        .unwrap()
        .load_run(latlab_store::RunId(1))
        .unwrap();
    let imported = Store::open_existing(&db2)
        .unwrap()
        .load_run(latlab_store::RunId(1))
        .unwrap();
    assert_eq!(imported.overall.stats.count, original.overall.stats.count);
    // Whole microseconds, recorded at the middle: within a microsecond of the original maximum.
    let (a, b) = (original.overall.stats.max, imported.overall.stats.max);
    assert!(a.abs_diff(b) <= 1000, "{a} vs {b}");
    let out = run_exit(
        latlab!().args(["import", "/etc/hostname", "--db", db2.to_str().unwrap()]),
        2,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a format latlab reads"));
}

/// A report over two stores of one plan compares each cell with the cell of the same name in
/// the first store (like with like), and the first store's cells with its first; `--baseline`
/// puts every cell against the one it names.
#[test]
fn two_stores_of_one_plan_are_compared_cell_by_cell() {
    let dir = tempfile::tempdir().unwrap();
    let mut dbs = Vec::new();
    for name in ["hz250", "hz1000"] {
        let db = dir.path().join(format!("{name}.db"));
        for journal in ["", "-wal"] {
            let from = PathBuf::from(format!("{}{journal}", store().display()));
            if from.exists() {
                std::fs::copy(&from, format!("{}{journal}", db.display())).unwrap();
            }
        }
        dbs.push(db.to_str().unwrap().to_string());
    }
    let against = |extra: &[&str]| -> Vec<(String, String)> {
        let args = [
            &[
                "report", "--db", &dbs[0], "--db", &dbs[1], "e1", "--format", "json", "-o", "-",
            ][..],
            extra,
        ]
        .concat();
        let r: serde_json::Value = serde_json::from_slice(&run_ok(&args).stdout).unwrap();
        r["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let name = |k: &str| c[k].as_str().unwrap().to_string();
                (name("cell"), name("baseline"))
            })
            .collect()
    };
    let pair = |c: &str, b: &str| (c.to_string(), b.to_string());
    assert_eq!(
        against(&[]),
        [
            pair("interval=250us [hz250]", "interval=1ms [hz250]"),
            pair("interval=1ms [hz1000]", "interval=1ms [hz250]"),
            pair("interval=250us [hz1000]", "interval=250us [hz250]"),
        ]
    );
    let all = against(&["--baseline", "interval=1ms [hz250]"]);
    assert!(
        all.iter().all(|(_, b)| b == "interval=1ms [hz250]"),
        "{all:?}"
    );
}

/// A store of runs only (no experiment): `latest` is its newest run. A run number two stores
/// hold is each store's run, side by side, as an experiment number is.
#[test]
fn latest_and_a_run_number_over_stores_of_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = latlab_testkit::repo().join("crates/latlab-import/tests/data");
    let mut dbs = Vec::new();
    for (name, file) in [
        ("a", "cyclictest.json"),
        ("b", "jitterdebugger-results.json"),
    ] {
        let db = dir.path().join(format!("{name}.db"));
        latlab_testkit::run_ok(
            latlab!()
                .arg("import")
                .arg(data.join(file))
                .arg("--db")
                .arg(&db),
        );
        dbs.push(db.to_str().unwrap().to_string());
    }
    let report = |args: &[&str]| -> serde_json::Value {
        let out = run_ok(&[&["report", "--format", "json", "-o", "-"][..], args].concat());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let names = |r: &serde_json::Value| -> Vec<String> {
        r["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    let one = report(&["--db", &dbs[0]]);
    assert_eq!(one["cells"].as_array().unwrap().len(), 1, "{one}");
    let both = report(&["--db", &dbs[0], "--db", &dbs[1], "1"]);
    let got = names(&both);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].ends_with("[a]") && got[1].ends_with("[b]"),
        "{got:?}"
    );
    // compare takes one run a side: STORE:ITEM picks the store; a bare number two stores hold
    // is refused, naming that form.
    let out = run_ok(&["compare", "a:1", "b:1", "--db", &dbs[0], "--db", &dbs[1]]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[a]") && text.contains("[b]"), "{text}");
    let out = run_exit(
        latlab!().args(["compare", "1", "b:1", "--db", &dbs[0], "--db", &dbs[1]]),
        2,
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("STORE:ITEM of one store, e.g. a:1"),
        "{out:?}"
    );
}

/// A store this user may not write, with nobody writing it, is read as it is: nothing is made
/// beside it (no write-ahead log); one at an older schema, which only a write could migrate,
/// is refused with the way out.
#[test]
fn a_store_this_user_cannot_write_is_read_as_it_is() {
    if !latlab_testkit::root_or_skip("a root-owned store read by another user") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_latlab");
    let as_nobody = |args: &[&str], db: &Path| {
        let mut c = latlab_testkit::unprivileged(bin, "-all")?;
        c.args(args).arg("--db").arg(db);
        Some(c.output().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let db = dir.path().join("s.db");
    std::fs::copy(store(), &db).unwrap();
    let before = std::fs::read(&db).unwrap();
    let Some(list) = as_nobody(&["db", "list"], &db) else {
        return;
    };
    latlab_testkit::assert_ok(&list);
    assert!(String::from_utf8_lossy(&list.stdout).contains("interval"));
    let report = as_nobody(&["report", "e1", "--format", "text"], &db).unwrap();
    latlab_testkit::assert_ok(&report);
    let rm = as_nobody(&["db", "rm", "1"], &db).unwrap();
    latlab_testkit::assert_one_line_error(&rm, 2, "is not writable here");
    assert_eq!(std::fs::read(&db).unwrap(), before, "the store was changed");
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["s.db"], "files made beside the store");

    let old = dir.path().join("old.db");
    drop(Store::open_at_version(&old, 1).unwrap());
    let list = as_nobody(&["db", "list"], &old).unwrap();
    latlab_testkit::assert_one_line_error(&list, 2, "schema version 1, older than this latlab's");
}
