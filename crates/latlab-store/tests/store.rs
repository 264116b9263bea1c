//! The store against real SQLite files: round trips, transactions, migrations, checks.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_store::*;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn raw(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// Every table that holds part of a run.
/// A new store, `s.db` in a temporary directory (removed when dropped), and its path.
fn new_store() -> (tempfile::TempDir, PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = Store::open(&path).unwrap();
    (dir, path, store)
}

const RUN_TABLES: [&str; 10] = [
    "runs",
    "threads",
    "windows",
    "spikes",
    "samples",
    "load_reports",
    "load_throughput",
    "load_phases",
    "systems",
    "cells",
];

#[test]
fn a_run_reads_back_equal_to_what_was_saved() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let original = common::result("20260101T000000.000000Z-1", 1);
    // The fixture exercises every part of the layout.
    assert_eq!(original.threads.len(), 3);
    assert!(original.threads.iter().all(|t| t.windows.len() == 5));
    assert_eq!(original.spikes.kept.len(), 12);
    assert!(original.samples.is_some());
    assert_eq!(original.loads.reports.len(), 2);

    let id = {
        let mut store = Store::open(&path).unwrap();
        store.save_run(&original, None).unwrap()
    };
    // A fresh connection: nothing is cached.
    let store = Store::open(&path).unwrap();
    let back = store.load_run(id).unwrap();
    assert_eq!(back, original);
    // Histograms are equal bucket for bucket, not only in their statistics.
    for (a, b) in back.threads.iter().zip(&original.threads) {
        assert!(a.histogram.buckets().eq(b.histogram.buckets()));
        assert!(
            a.corrected_histogram
                .buckets()
                .eq(b.corrected_histogram.buckets())
        );
    }
    // And the JSON is byte for byte the same.
    assert_eq!(back.to_json_pretty(), original.to_json_pretty());

    // Parts are stored as rows, not as one document.
    let conn = raw(&path);
    assert_eq!(count(&conn, "threads"), 3);
    assert_eq!(count(&conn, "windows"), 15);
    assert_eq!(count(&conn, "spikes"), 12);
    assert_eq!(count(&conn, "load_throughput"), 3);
    assert_eq!(count(&conn, "load_phases"), 2);
}

#[test]
fn a_minimal_run_without_samples_loads_or_spikes_round_trips() {
    let (_dir, _, mut store) = new_store();
    let mut r = common::result("minimal", 2);
    r.samples = None;
    r.loads = Default::default();
    r.spikes = Default::default();
    r.threads.truncate(1);
    // The overall figures of that one thread (statistics are a cache of the histograms).
    r.overall.histogram = r.threads[0].histogram.clone();
    r.refresh_stats();
    r.threads[0].windows.clear();
    r.threads[0].expected_periods = None;
    r.config.cpus = None;
    r.stop = latlab_model::StopReason::Break {
        thread: 0,
        value_ns: 3_000_000,
    };
    let id = store.save_run(&r, None).unwrap();
    assert_eq!(store.load_run(id).unwrap(), r);
}

/// A trace with two families and the story of one spike.
fn traced(mut r: latlab_model::RunResult) -> latlab_model::RunResult {
    use latlab_model::trace::*;
    use latlab_testkit::run::{family, trace};
    let on_cpu1 = |v: &[u64]| v.iter().map(|&v| (1, v)).collect::<Vec<_>>();
    // Not in Family::ALL order: reading back gives that order.
    let mut t = trace(
        &["softirq", "hardirq"],
        vec![
            family(
                Family::SoftirqRuntime,
                &[(7, "NET_RX", on_cpu1(&[1200, 3400, 99_000]))],
            ),
            family(
                Family::SoftirqLatency,
                &[(7, "NET_RX", on_cpu1(&[800, 900]))],
            ),
        ],
        (12, 3456),
    );
    t.cost.programs = vec![ProgramCost {
        program: "softirq_entry".into(),
        event: "irq:softirq_entry".into(),
        run_count: 12,
        run_time_ns: 3456,
        recursion_misses: Some(0),
    }];
    t.warnings = vec!["1 of 12 kept spikes have no story".into()];
    r.trace = Some(t);
    r.spikes.kept[3].story = Some(SpikeStory {
        cpu: 1,
        from_ns: 100,
        to_ns: 90_100,
        complete: true,
        events: vec![StoryEvent {
            kind: StoryKind::Softirq,
            start_ns: 120,
            duration_ns: 80_000,
            overlap_ns: 80_000,
            name: "NET_RX".into(),
            pid: None,
            detail: String::new(),
        }],
        totals: StoryTotals {
            softirq_ns: 80_000,
            ..Default::default()
        },
        tasks: vec![StoryTask {
            pid: 42,
            comm: "iperf3".into(),
            ran_ns: 10_000,
        }],
        measuring_tid: Some(4242),
    });
    r
}

#[test]
fn a_traced_run_with_spike_stories_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut original = traced(common::result("traced", 1));
    let id = Store::open(&path)
        .unwrap()
        .save_run(&original, None)
        .unwrap();
    let back = Store::open(&path).unwrap().load_run(id).unwrap();
    let t = original.trace.as_mut().unwrap();
    t.families.reverse();
    assert_eq!(back, original);
    assert_eq!(back.to_json_pretty(), original.to_json_pretty());
    let conn = raw(&path);
    // One row for the run's trace and one per family; the story beside its spike.
    assert_eq!(count(&conn, "trace_results"), 3);
    let stories: i64 = conn
        .query_row(
            "SELECT count(*) FROM spikes WHERE story IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stories, 1);
    // Removing the run removes its trace.
    let mut store = Store::open(&path).unwrap();
    store.remove_run(id).unwrap();
    assert_eq!(count(&raw(&path), "trace_results"), 0);
}

#[test]
fn system_records_are_shared_by_runs_of_one_machine() {
    let (_dir, path, mut store) = new_store();
    let a = store.save_run(&common::result("a", 1), None).unwrap();
    let b = store.save_run(&common::result("b", 2), None).unwrap();
    let mut other = common::result("c", 3);
    other.system.hostname = "bench-2".into();
    store.save_run(&other, None).unwrap();
    assert_eq!(count(&raw(&path), "systems"), 2);
    // Removing runs removes the records no run uses any more.
    store.remove_runs(&[a, b]).unwrap();
    assert_eq!(count(&raw(&path), "systems"), 1);
    assert_eq!(store.list_runs(&RunFilter::default()).unwrap().len(), 1);
}

#[test]
fn a_failure_in_the_middle_of_saving_leaves_no_part_of_the_run() {
    let (_dir, path, mut store) = new_store();
    let exp = store.create_experiment("e", "plan").unwrap();
    let cell = CellRef {
        experiment: exp,
        key: "interval=1ms".into(),
        params: serde_json::json!({"interval": "1ms"}),
        repeat: 0,
    };
    // The samples row is written last: make SQLite refuse it, after every other part is in.
    raw(&path)
        .execute_batch(
            "CREATE TRIGGER fail_samples BEFORE INSERT ON samples
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        )
        .unwrap();
    let err = store
        .save_run(&common::result("x", 1), Some(&cell))
        .unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    let conn = raw(&path);
    for table in RUN_TABLES {
        assert_eq!(count(&conn, table), 0, "{table} kept rows of a failed save");
    }
    assert!(store.done_cells(exp).unwrap().is_empty());

    // Without the failure the same save stores everything and marks the cell done.
    conn.execute_batch("DROP TRIGGER fail_samples").unwrap();
    let id = store
        .save_run(&common::result("x", 1), Some(&cell))
        .unwrap();
    assert_eq!(
        store.done_cells(exp).unwrap(),
        vec![("interval=1ms".to_string(), 0)]
    );
    assert_eq!(store.load_run(id).unwrap(), common::result("x", 1));
}

#[test]
fn a_result_the_layout_cannot_hold_is_refused_whole() {
    let (_dir, path, mut store) = new_store();
    let mut r = common::result("bad", 1);
    r.spikes.kept[5].thread = 9;
    let err = store.save_run(&r, None).unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert!(err.to_string().contains("thread 9"), "{err}");
    for table in RUN_TABLES {
        assert_eq!(count(&raw(&path), table), 0, "{table}");
    }
}

#[test]
fn a_run_is_stored_once() {
    let (_dir, _, mut store) = new_store();
    let id = store.save_run(&common::result("same", 1), None).unwrap();
    let err = store
        .save_run(&common::result("same", 1), None)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::DuplicateRun { id: i, .. } if *i == id.0),
        "{err}"
    );
    assert_eq!(store.find_run("same").unwrap(), Some(id));
    assert_eq!(store.find_run(&id.to_string()).unwrap(), Some(id));
    assert_eq!(store.find_run("nope").unwrap(), None);
}

#[test]
fn runs_are_listed_with_their_statistics_and_removed() {
    let (_dir, _, mut store) = new_store();
    let exp = store.create_experiment("governors", "[axes]").unwrap();
    let r1 = common::result("r1", 1);
    let r2 = common::result("r2", 2);
    let id1 = store.save_run(&r1, None).unwrap();
    let cell = CellRef {
        experiment: exp,
        key: "gov=performance".into(),
        params: serde_json::json!({"governor": "performance"}),
        repeat: 1,
    };
    let id2 = store.save_run(&r2, Some(&cell)).unwrap();

    let list = store.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(list.iter().map(|s| s.id).collect::<Vec<_>>(), [id1, id2]);
    let s = &list[1];
    assert_eq!(s.uid, "r2");
    assert_eq!(s.method, "clock-nanosleep");
    assert_eq!(s.interval_ns, 1_000_000);
    assert_eq!(s.cpus.as_deref(), Some("0,2,4"));
    assert_eq!(s.threads, 3);
    assert_eq!(s.p99_ns, r2.overall.stats.p99);
    assert_eq!(s.max_ns, r2.overall.stats.max);
    assert_eq!(s.missed, r2.overall.missed);
    assert_eq!(s.stop_reason, "signal");
    assert_eq!(s.hostname, "bench-1");
    assert_eq!(s.experiment.as_deref(), Some("governors"));
    assert_eq!(s.cell, Some(("gov=performance".to_string(), 1)));

    let only = store
        .list_runs(&RunFilter {
            experiment: Some(exp),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(only.len(), 1);
    let newest = store
        .list_runs(&RunFilter {
            limit: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(newest[0].id, id2);

    // An unknown id among several removes nothing.
    let err = store.remove_runs(&[id1, RunId(999)]).unwrap_err();
    assert!(matches!(err, StoreError::UnknownRun(_)), "{err}");
    assert_eq!(store.run_count().unwrap(), 2);
    // Removing a cell's run makes the cell pending again: a resumed plan redoes it.
    store.remove_run(id2).unwrap();
    assert!(store.done_cells(exp).unwrap().is_empty());
    assert_eq!(store.cells(exp).unwrap()[0].status, CellStatus::Pending);
    assert!(matches!(
        store.load_run(id2).unwrap_err(),
        StoreError::UnknownRun(_)
    ));
    assert_eq!(store.load_run(id1).unwrap(), r1);
}

#[test]
fn an_experiment_records_its_cells_for_resume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let plan = "name = \"timers\"\n[axes]\ninterval = [\"100us\", \"1ms\"]\n";
    let cell = |exp, key: &str, repeat| CellRef {
        experiment: exp,
        key: key.into(),
        params: serde_json::json!({ "interval": key }),
        repeat,
    };
    let exp = {
        let mut store = Store::open(&path).unwrap();
        let exp = store.create_experiment("timers", plan).unwrap();
        store
            .save_run(&common::result("a", 1), Some(&cell(exp, "100us", 0)))
            .unwrap();
        store
            .record_cell(
                &cell(exp, "1ms", 0),
                CellStatus::Skipped,
                Some("no such governor"),
            )
            .unwrap();
        // Interrupted here (the store is dropped without finishing the experiment).
        exp
    };
    let mut store = Store::open(&path).unwrap();
    let found = store.resumable_experiment(plan).unwrap().unwrap();
    assert_eq!(found.id, exp);
    assert_eq!(found.status, ExperimentStatus::Running);
    assert_eq!(store.resumable_experiment("other plan").unwrap(), None);
    assert_eq!(store.done_cells(exp).unwrap(), vec![("100us".into(), 0)]);
    let cells = store.cells(exp).unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[1].status, CellStatus::Skipped);
    assert_eq!(cells[1].reason.as_deref(), Some("no such governor"));
    assert_eq!(cells[0].runs.len(), 1);
    // Recording a done cell as pending again leaves it done.
    store
        .record_cell(&cell(exp, "100us", 0), CellStatus::Pending, None)
        .unwrap();
    assert_eq!(store.done_cells(exp).unwrap().len(), 1);
    assert!(matches!(
        store.record_cell(&cell(exp, "1ms", 1), CellStatus::Done, None),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.save_run(
            &common::result("b", 2),
            Some(&cell(ExperimentId(77), "x", 0))
        ),
        Err(StoreError::UnknownExperiment(77))
    ));
    assert!(matches!(
        store.record_cell(&cell(ExperimentId(77), "x", 0), CellStatus::Skipped, None),
        Err(StoreError::UnknownExperiment(77))
    ));

    store
        .set_experiment_status(exp, ExperimentStatus::Done)
        .unwrap();
    let e = store.experiment(exp).unwrap();
    assert_eq!(e.status, ExperimentStatus::Done);
    assert!(e.ended_at.is_some());
    assert_eq!(store.resumable_experiment(plan).unwrap(), None);
    assert_eq!(store.list_experiments().unwrap().len(), 1);
}

#[test]
fn the_store_runs_in_wal_mode_with_foreign_keys() {
    let (dir, path, mut store) = new_store();
    assert_eq!(store.journal_mode().unwrap(), "wal");
    store.save_run(&common::result("w", 1), None).unwrap();
    // The mode is stored in the file: another connection sees it, and the WAL file exists.
    let mode: String = raw(&path)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert!(dir.path().join("s.db-wal").exists());
    // Foreign keys are on for the store's connection: removing a run cascades to its parts.
    let id = store.find_run("w").unwrap().unwrap();
    store.remove_run(id).unwrap();
    for table in RUN_TABLES {
        assert_eq!(count(&raw(&path), table), 0, "{table}");
    }
}

#[test]
fn an_older_store_is_migrated_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // A store written by the first released schema (saving `common::result("old-run", 1)`),
    // kept as a file: today's code cannot write the old layout.
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.db"),
        &path,
    )
    .unwrap();
    let conn = raw(&path);
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1);
    let tables = |conn: &Connection| -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<Vec<String>, _>>()
            .unwrap()
    };
    assert!(!tables(&conn).contains(&"monitor_sets".to_string()));

    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION as usize, MIGRATIONS.len());
    let t = tables(&conn);
    for table in [
        "monitor_series",
        "monitor_sets",
        "monitor_windows",
        "monitor_spikes",
        "monitor_annotations",
    ] {
        assert!(
            t.contains(&table.to_string()),
            "{table} missing after migration"
        );
    }
    let id = store.find_run("old-run").unwrap().unwrap();
    // Its loads as stored then: the first schema did not keep why a load failed.
    let mut stored_then = common::result("old-run", 1);
    for l in &mut stored_then.loads.reports {
        l.failed = None;
    }
    assert_eq!(store.load_run(id).unwrap(), stored_then);
    // The migrated store works as a new one.
    store
        .open_series(&SeriesSpec {
            name: "m".into(),
            window_ns: 1,
            config: SeriesConfig::new(&Default::default(), Default::default()),
            system: None,
            idle_states: vec![],
        })
        .unwrap();
    assert!(store.check().unwrap().is_ok());
}

#[test]
fn a_store_from_a_newer_latlab_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(Store::open(&path).unwrap());
    raw(&path)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found, supported, .. }
            if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("newer") && msg.contains("upgrade latlab"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn files_that_are_not_latlab_stores_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "this is not a database, it is a text file of some length\n",
    )
    .unwrap();
    let err = Store::open(&text).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err}");
    assert_eq!(
        std::fs::read_to_string(&text).unwrap(),
        "this is not a database, it is a text file of some length\n"
    );

    let other = dir.path().join("other.db");
    raw(&other)
        .execute_batch("CREATE TABLE contacts (name TEXT)")
        .unwrap();
    let err = Store::open(&other).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err}");
    let tables: i64 = raw(&other)
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1);

    let missing = dir.path().join("missing.db");
    assert!(matches!(
        Store::open_existing(&missing).unwrap_err(),
        StoreError::Missing(_)
    ));
    assert!(!missing.exists());
}

/// `identify` (what `latlab monitor` checks before it touches anything) answers as `open` would,
/// and writes nothing: not the file, and no file beside it.
#[test]
fn identify_applies_the_rules_of_open_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // A name SQLite's URIs would read otherwise.
    let store = dir.path().join("s 100%?#.db");
    drop(Store::open(&store).unwrap());
    let (before, files) = (std::fs::read(&store).unwrap(), listing());
    assert_eq!(latlab_store::identify(&store).unwrap(), SCHEMA_VERSION);
    assert_eq!(std::fs::read(&store).unwrap(), before);
    assert_eq!(listing(), files, "nothing created beside it");
    // Open elsewhere (a running daemon), it still reads.
    let held = Store::open(&store).unwrap();
    assert_eq!(latlab_store::identify(&store).unwrap(), SCHEMA_VERSION);
    drop(held);

    // A database of no application is opened to count its tables: under names SQLite's URIs
    // would read otherwise, and under a path that starts with `//`.
    let other = dir.path().join("other 100%?#.db");
    raw(&other)
        .execute_batch("CREATE TABLE contacts (name TEXT)")
        .unwrap();
    let files = listing();
    let doubled = PathBuf::from(format!("/{}", other.display()));
    for path in [&other, &doubled] {
        let e = latlab_store::identify(path).unwrap_err();
        assert!(matches!(e, StoreError::NotAStore { .. }), "{e}");
        assert!(e.to_string().contains("1 other tables"), "{e}");
    }
    assert_eq!(listing(), files, "nothing created beside it");
    let e = latlab_store::identify(&dir.path().join("missing.db")).unwrap_err();
    assert!(matches!(e, StoreError::Read { .. }), "{e}");

    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "this is not a database, it is a text file of some length\n",
    )
    .unwrap();
    let e = latlab_store::identify(&text).unwrap_err();
    assert!(e.to_string().contains("not an SQLite database"), "{e}");

    raw(&store)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let e = latlab_store::identify(&store).unwrap_err();
    assert!(matches!(e, StoreError::TooNew { .. }), "{e}");
}

#[test]
fn check_finds_a_corrupted_histogram() {
    let (_dir, path, mut store) = new_store();
    let id = store.save_run(&common::result("c", 1), None).unwrap();
    store.save_run(&common::result("d", 2), None).unwrap();
    let report = store.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.runs, 2);
    // 2 runs × (overall + 3 threads × 2).
    assert_eq!(report.histograms, 14);

    // Flip bytes in the compressed buckets of one thread's histogram.
    let conn = raw(&path);
    let mut blob: Vec<u8> = conn
        .query_row(
            "SELECT histogram FROM threads WHERE run_id = ?1 AND idx = 1",
            [id.0],
            |r| r.get(0),
        )
        .unwrap();
    for b in blob.iter_mut().skip(40) {
        *b = !*b;
    }
    conn.execute(
        "UPDATE threads SET histogram = ?2 WHERE run_id = ?1 AND idx = 1",
        rusqlite::params![id.0, blob],
    )
    .unwrap();
    let report = store.check().unwrap();
    assert!(!report.is_ok());
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].starts_with(&format!("run {id} thread 1 (cpu2) histogram")),
        "{:?}",
        report.problems
    );
    // Reading the run says what is wrong instead of returning wrong data.
    let err = store.load_run(id).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

#[test]
fn check_finds_a_histogram_that_disagrees_with_its_row_and_broken_json() {
    let (_dir, path, mut store) = new_store();
    let a = store.save_run(&common::result("a", 1), None).unwrap();
    let b = store.save_run(&common::result("b", 2), None).unwrap();
    let conn = raw(&path);
    // Run a's overall histogram swapped for run b's: decodes, but not the run's statistics.
    conn.execute(
        "UPDATE runs SET overall_histogram = (SELECT overall_histogram FROM runs WHERE id = ?2)
         WHERE id = ?1",
        [a.0, b.0],
    )
    .unwrap();
    conn.execute("UPDATE runs SET config = '{' WHERE id = ?1", [b.0])
        .unwrap();
    let report = store.check().unwrap();
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    assert!(report.problems[0].contains(&format!("run {a} histogram")));
    assert!(report.problems[1].contains(&format!("run {b}")));
    assert!(report.problems[1].contains("configuration"));
}

#[test]
fn check_finds_rows_whose_parent_is_gone() {
    let (_dir, path, mut store) = new_store();
    store.save_run(&common::result("a", 1), None).unwrap();
    // Another program deleting with foreign keys off.
    let conn = raw(&path);
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute("DELETE FROM threads WHERE idx = 2", [])
        .unwrap();
    let report = store.check().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.starts_with("foreign key:") && p.contains("windows")),
        "{:?}",
        report.problems
    );
}

#[test]
fn vacuum_keeps_every_run() {
    let (_dir, _, mut store) = new_store();
    let ids: Vec<_> = (0..4)
        .map(|k| {
            store
                .save_run(&common::result(&format!("v{k}"), k), None)
                .unwrap()
        })
        .collect();
    store.remove_runs(&ids[..3]).unwrap();
    store.vacuum().unwrap();
    assert_eq!(store.load_run(ids[3]).unwrap(), common::result("v3", 3));
    assert!(store.check().unwrap().is_ok());
    assert_eq!(store.journal_mode().unwrap(), "wal");
}

/// A run saved after another but measured before it (an import, a JSON file taken in later)
/// lists before it; `limit` keeps the newest by when they started.
#[test]
fn runs_list_by_when_they_started() {
    let (_dir, _, mut store) = new_store();
    let mut later = common::result("later", 1);
    let mut earlier = common::result("earlier", 1);
    later.start_unix_ns += 60_000_000_000;
    earlier.start_unix_ns -= 60_000_000_000;
    store.save_run(&later, None).unwrap();
    store.save_run(&earlier, None).unwrap();
    let uids = |limit| -> Vec<String> {
        let filter = latlab_store::RunFilter {
            limit,
            ..Default::default()
        };
        store
            .list_runs(&filter)
            .unwrap()
            .into_iter()
            .map(|r| r.uid)
            .collect()
    };
    assert_eq!(uids(None), ["earlier", "later"]);
    assert_eq!(uids(Some(1)), ["later"]);
}

/// What a daemon's keeper reads before each window: a new store's empty file is its own (the
/// journal holds all until the first checkpoint), and a file written over in place (new
/// contents, or emptied, in the same file) is not, so nothing more is written into it.
#[test]
fn a_store_written_over_in_place_is_told_from_a_new_one() {
    use latlab_store::FileFate;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.file_fate(), FileFate::InPlace);
    let len = std::fs::metadata(&path).unwrap().len();
    // Either still empty (all in the journal) or begun as a database: both are its own.
    let head = std::fs::read(&path).unwrap();
    assert!(len == 0 || head.starts_with(b"SQLite format 3\0"), "{len}");
    // Emptied in place once it had begun: written over.
    let stored = dir.path().join("s.db");
    {
        let mut s = Store::open(&stored).unwrap();
        s.save_run(&common::result("r", 1), None).unwrap();
        s.vacuum().unwrap();
    }
    let s = Store::open(&stored).unwrap();
    assert_eq!(s.file_fate(), FileFate::InPlace);
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&stored)
        .unwrap();
    assert_eq!(s.file_fate(), FileFate::WrittenOver);
    std::fs::write(&stored, b"<?xml version=\"1.0\"?>\n").unwrap();
    assert_eq!(s.file_fate(), FileFate::WrittenOver);
    s.abandon();
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        b"<?xml version=\"1.0\"?>\n"
    );
    drop(store);
}

/// A damaged store is said once, with what to do (SQLite's words came three times over).
#[test]
fn a_damaged_store_is_said_once_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    {
        let mut s = Store::open(&path).unwrap();
        s.save_run(&common::result("r", 1), None).unwrap();
        s.vacuum().unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    for b in &mut bytes[4096..len] {
        *b = 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let e = Store::open_existing(&path)
        .and_then(|s| s.check().map(|_| ()))
        .unwrap_err();
    // As a command says it: the error and every source after it.
    let mut said = e.to_string();
    let mut next = std::error::Error::source(&e);
    while let Some(s) = next {
        said.push_str(&format!(": {s}"));
        next = s.source();
    }
    assert_eq!(said.matches("malformed").count(), 1, "{said}");
    assert!(said.contains("restore it from a backup"), "{said}");
}
