//! `latlab run`: a plan end to end into a store, resume after SIGKILL, malformed plans.
#![allow(clippy::unwrap_used)]

use latlab_store::{CellStatus, Store};
use latlab_testkit::{latlab, policy_toml, run_exit};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn write_plan(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("plan.toml");
    std::fs::write(&path, body).unwrap();
    path
}

/// A plan `name` of runs of `duration`, without samplers, with one axis: `intervals` (TOML).
fn interval_plan(dir: &Path, name: &str, duration: &str, intervals: &str) -> std::path::PathBuf {
    write_plan(
        dir,
        &format!(
            "name = \"{name}\"\n[settings]\nduration = \"{duration}\"\nno-samplers = true\n{}\
             [axes]\ninterval = [{intervals}]\n",
            policy_toml()
        ),
    )
}

#[test]
fn a_two_axis_plan_with_repeats_runs_into_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        &format!(
            "name = \"two-axes\"\nrepeat = 2\n[settings]\nduration = \"0.4s\"\n\
             sample-period = \"100ms\"\n{}[axes]\ninterval = [\"1ms\", \"250us\"]\n\
             load = [\"none\", \"cpu:workers=1\"]\ncpus = [\"0\", \"63\"]\n",
            policy_toml()
        ),
    );
    let db = dir.path().join("t.db");
    let started = Instant::now();
    let text = latlab_testkit::run_stdout(latlab!().args([
        "run",
        plan.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]));
    assert!(started.elapsed() < Duration::from_secs(60));
    // 8 cells, 4 of them on an absent CPU: skipped with the reason, the others run twice.
    // The cells that run are counted apart from the skipped ones.
    assert!(
        text.contains("4 cells × 2 repeats = 8 runs, about"),
        "{text}"
    );
    assert!(text.contains("order), 4 cells skipped"), "{text}");
    assert!(
        text.contains("a comparison needs 4 repeats per cell for a verdict"),
        "{text}"
    );
    assert_eq!(
        text.matches("skipped: --cpus 63: CPU 63 is absent").count(),
        4,
        "{text}"
    );

    let store = Store::open_existing(&db).unwrap();
    let exps = store.list_experiments().unwrap();
    assert_eq!(exps.len(), 1);
    assert_eq!(exps[0].status.name(), "done");
    let cells = store.cells(exps[0].id).unwrap();
    let done: Vec<_> = cells
        .iter()
        .filter(|c| c.status == CellStatus::Done)
        .collect();
    let skipped = cells
        .iter()
        .filter(|c| c.status == CellStatus::Skipped)
        .count();
    assert_eq!(done.len(), 8);
    assert_eq!(skipped, 8);
    for c in &done {
        assert_eq!(c.runs.len(), 1);
        let run = store.load_run(c.runs[0]).unwrap();
        let want_interval = if c.key.contains("interval=1ms") {
            1_000_000
        } else {
            250_000
        };
        assert_eq!(run.config.interval_ns, want_interval, "{}", c.key);
        assert_eq!(run.config.cpus, Some(vec![0]));
        assert_eq!(run.loads.reports.len(), usize::from(c.key.contains("cpu:")));
        assert!(run.samples.is_some());
        assert!(run.overall.stats.count > 0);
    }
    // Interleaved: the first four runs are one of each runnable cell.
    let mut first_round: Vec<&str> = done
        .iter()
        .filter(|c| c.repeat == 0)
        .map(|c| c.key.as_str())
        .collect();
    first_round.dedup();
    assert_eq!(first_round.len(), 4);
}

/// A plan's waker CPU is for its wake-up cells: its timer cells run without one. A plan with
/// no wake-up cell is refused for it, as `measure` refuses it.
#[test]
fn a_plans_waker_cpu_is_for_its_wake_up_cells() {
    let dir = tempfile::tempdir().unwrap();
    let body = |methods: &str| {
        format!(
            "name = \"wakers\"\n[settings]\nduration = \"0.2s\"\ncpus = \"0\"\n\
             waker-cpu = 0\nno-samplers = true\n{}[axes]\nmethod = [{methods}]\n",
            policy_toml()
        )
    };
    let plan = write_plan(dir.path(), &body("\"clock-nanosleep\", \"pipe\""));
    let db = dir.path().join("t.db");
    latlab_testkit::run_ok(latlab!().arg("run").arg(&plan).arg("--db").arg(&db));
    let store = Store::open_existing(&db).unwrap();
    let exp = store.list_experiments().unwrap()[0].id;
    let mut wakers: Vec<(String, Option<u32>)> = store
        .cells(exp)
        .unwrap()
        .iter()
        .map(|c| {
            let run = store.load_run(c.runs[0]).unwrap();
            (run.config.method.name().to_string(), run.config.waker_cpu)
        })
        .collect();
    wakers.sort();
    assert_eq!(
        wakers,
        [
            ("clock-nanosleep".to_string(), None),
            ("pipe".into(), Some(0))
        ]
    );

    let timers = write_plan(dir.path(), &body("\"clock-nanosleep\", \"nanosleep\""));
    let out = latlab!()
        .args(["run", timers.to_str().unwrap(), "--db"])
        .arg(dir.path().join("u.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--waker-cpu 0: method"), "{err}");
    assert!(!dir.path().join("u.db").exists());
}

#[test]
fn resume_after_sigkill_redoes_only_the_unfinished_cells() {
    let dir = tempfile::tempdir().unwrap();
    let plan = interval_plan(dir.path(), "resume", "1s", "\"1ms\", \"500us\", \"250us\"");
    let db = dir.path().join("r.db");
    let args = ["run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()];
    let mut child = latlab!()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it as soon as the first run is saved, in the middle of the second.
    latlab_testkit::process::wait_while_running(
        &mut child,
        "a saved run",
        Duration::from_secs(20),
        || {
            Store::open_existing(&db)
                .ok()
                .and_then(|s| {
                    let e = s.list_experiments().ok()?.pop()?;
                    s.done_cells(e.id).ok()
                })
                .is_some_and(|d| !d.is_empty())
        },
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let text = latlab_testkit::run_stdout(latlab!().args(args).arg("--resume"));
    assert!(text.contains("1 run already saved"), "{text}");
    // The plan lists all three cells; what is left is one line below, not the whole plan again.
    assert!(
        text.contains("2 runs left to measure (about 2.5s)"),
        "{text}"
    );
    // The last line counts the runs saved before too.
    assert!(
        text.contains(": 2 runs saved now, 3 in all; report with"),
        "{text}"
    );
    let store = Store::open_existing(&db).unwrap();
    let exps = store.list_experiments().unwrap();
    assert_eq!(exps.len(), 1, "resumed, not restarted");
    let cells = store.cells(exps[0].id).unwrap();
    assert_eq!(cells.len(), 3);
    for c in &cells {
        assert_eq!(c.status, CellStatus::Done, "{}", c.key);
        assert_eq!(c.runs.len(), 1, "{}: each cell once", c.key);
    }
    // Nothing left to resume.
    run_exit(latlab!().args(args).arg("--resume"), 2);
}

/// Ctrl-C in the middle of a run: the cut-short run is kept as a run of its own (outside the
/// experiment, whose cell --resume measures again), and the line says so.
#[test]
fn ctrl_c_keeps_the_cut_short_run_outside_the_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let plan = interval_plan(dir.path(), "cut", "2s", "\"1ms\", \"500us\"");
    let (db, err) = (dir.path().join("c.db"), dir.path().join("err"));
    let junit = dir.path().join("j.xml");
    let mut child = latlab!()
        .args(["run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .arg("--junit")
        .arg(&junit)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let saved = || {
        Store::open_existing(&db)
            .ok()
            .and_then(|s| s.list_runs(&Default::default()).ok())
            .map_or(0, |r| r.len())
    };
    latlab_testkit::process::wait_while_running(
        &mut child,
        "a saved run",
        Duration::from_secs(20),
        || saved() == 1,
    );
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: plain system call to the child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let err = std::fs::read_to_string(&err).unwrap();
    assert!(
        err.contains("is saved as run 2 outside the experiment"),
        "{err}"
    );
    // Said as a part of the length asked.
    assert!(err.contains("s of 2s measured) is saved as run 2"), "{err}");
    assert_eq!(saved(), 2, "{err}");
    let store = Store::open_existing(&db).unwrap();
    let e = store.list_experiments().unwrap().pop().unwrap();
    assert_eq!(
        store.done_cells(e.id).unwrap().len(),
        1,
        "one repeat of the cells"
    );
    // The JUnit names what was not measured, in error: an interrupted run is not a pass.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let errors: Vec<&str> = doc
        .descendants()
        .filter(|e| e.has_tag_name("error"))
        .filter_map(|e| e.attribute("message"))
        .collect();
    assert!(!errors.is_empty(), "{xml}");
    assert!(
        errors.iter().all(|m| m.starts_with(
            "repeat 1: not measured: the experiment was interrupted before this repeat ended \
             (continue with --resume)"
        )),
        "{xml}"
    );
    // Every case is named by its cell and CPU, as a whole experiment's are, measured or not.
    let names: Vec<&str> = doc
        .descendants()
        .filter(|e| e.has_tag_name("testcase"))
        .filter_map(|e| e.attribute("name"))
        .collect();
    assert!(
        names.len() >= 2 && names.iter().all(|n| n.contains(" cpu")),
        "{names:?}"
    );
    assert_ne!(doc.root_element().attribute("errors"), Some("0"), "{xml}");
}

#[test]
fn malformed_plans_name_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (body, want) in [
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\ninterval = [1\n",
            "plan.toml:4",
        ),
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\nintervall = \"1ms\"\n",
            "plan.toml:4: unknown setting \"intervall\"",
        ),
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\nmethod = [\"sleepy\"]\n",
            "cell method=sleepy: --method: unknown method \"sleepy\" (accepted: clock-nanosleep,",
        ),
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\ninterval = [\"1ms\"]\nload = [\"bogus\"]\n",
            "",
        ),
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\ninterval = \"1ms\"\n[axes]\ninterval = [\"2ms\"]\n",
            "plan.toml:6: \"interval\" is both in [settings] and in [axes] (accepted: one of them",
        ),
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\ninterval = []\n",
            "axis \"interval\" has no values (accepted: [v1, v2, ...]",
        ),
        // Values no machine accepts are bad input, not cells this machine skips.
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\npriority = [2, 500]\n",
            "cell priority=500: --priority 500: out of range (accepted: 1..99",
        ),
        (
            "name = \"x\"\n[settings]\nduration = \"1s\"\nwindow = \"1ms\"\n[axes]\ninterval = [\"10ms\"]\n",
            "--window 1ms: shorter than --interval 10ms",
        ),
    ] {
        let plan = write_plan(dir.path(), body);
        let out = run_exit(
            latlab!().args(["run", plan.to_str().unwrap(), "--dry-run"]),
            2,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{body}: {err}");
    }
    run_exit(latlab!().args(["run", "/nonexistent/plan.toml"]), 2);
}

/// A traced cell's estimate counts the second that loading and attaching the tracing programs
/// takes beside the measurement.
#[test]
fn a_dry_run_counts_the_tracers_set_up() {
    if !latlab_testkit::root_or_skip("tracing (a traced cell is skipped otherwise)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "name = \"t\"\n[settings]\nduration = \"1s\"\n[axes]\ntrace = [false, true]\n",
    );
    let text =
        latlab_testkit::run_stdout(latlab!().args(["run", plan.to_str().unwrap(), "--dry-run"]));
    assert!(text.contains("trace=false  (1.2s each)"), "{text}");
    assert!(text.contains("trace=true  (2.2s each)"), "{text}");
    assert!(text.contains("2 runs, about 3.5s"), "{text}");
}

/// Every reference plan parses and plans its cells here. The rt-hog cells of plan 002 beside
/// the busy threads (rr at the same priority, which take turns with the measuring thread) are
/// planned, not skipped as if they could never run.
#[test]
fn the_example_plans_plan_their_cells() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/plans");
    let mut plans: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    plans.sort();
    assert_eq!(plans.len(), 5, "{plans:?}");
    for plan in &plans {
        let out = run_exit(latlab!().arg("run").arg(plan).arg("--dry-run"), 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("would never run"),
            "{}:\n{text}",
            plan.display()
        );
    }
    let out = run_exit(
        latlab!()
            .arg("run")
            .arg(dir.join("002-deferred-work.toml"))
            .arg("--dry-run"),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let beside = text
        .lines()
        .filter(|l| l.contains("load=rt-hog") && l.contains("; priority=1 "))
        .collect::<Vec<_>>();
    assert_eq!(beside.len(), 4, "{text}");
    // Without root the tracing cells are skipped for that; the reason is never the load.
    assert!(beside.iter().all(|l| !l.contains("--load")), "{text}");
    // A dry run checks a store it is given, as the run would, before printing the plan.
    let tmp = tempfile::tempdir().unwrap();
    let foreign = tmp.path().join("notes.txt");
    std::fs::write(&foreign, "not a store\n").unwrap();
    let out = run_exit(
        latlab!()
            .arg("run")
            .arg(&plans[0])
            .arg("--dry-run")
            .arg("--db")
            .arg(&foreign),
        2,
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a latlab store"), "{err}");
    assert_eq!(std::fs::read(&foreign).unwrap(), b"not a store\n");
}

/// A second `--resume` of an experiment another `latlab run` is measuring is refused, naming
/// it: it would measure the same cells again, beside it. The lock goes with the run.
#[test]
fn a_second_resume_of_an_experiment_being_measured_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plan = interval_plan(dir.path(), "lk", "1.5s", "\"1ms\", \"2ms\"");
    let db = dir.path().join("t.db");
    let lock = dir.path().join("t.db.experiment-1.run.lock");
    let first = latlab!()
        .arg("run")
        .arg(&plan)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    latlab_testkit::process::wait_for("the first run's lock", Duration::from_secs(20), || {
        lock.exists()
    });
    let resume = ["--db", db.to_str().unwrap(), "--resume"];
    let out = run_exit(latlab!().arg("run").arg(&plan).args(resume), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "experiment 1 in {} is being measured by another latlab run (PID {})",
            db.display(),
            first.id()
        )),
        "{err}"
    );
    // Refused before its plan is printed (the plan came first, then the refusal).
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(!lock.exists(), "the lock goes with the run");
    let store = Store::open(&db).unwrap();
    assert_eq!(store.list_runs(&Default::default()).unwrap().len(), 2);
}

/// A cell whose profile turns RT throttling off beside an rt-hog load is skipped when the plan
/// is checked, with why: rt-hog refuses to start without RT throttling, which the dry run read
/// before the profile was applied (it approved the cell, and the run failed it).
#[test]
fn a_profile_without_rt_throttling_beside_rt_hog_is_skipped_when_planned() {
    // Without privileges rt-hog is refused first, for that.
    if !latlab_testkit::root_or_skip("rt-hog's real-time threads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "name = \"rt\"\n[settings]\nduration = \"1s\"\npolicy = \"rr\"\npriority = 20\n\
         load = \"rt-hog:threads=1,policy=rr,priority=1\"\n\
         [axes]\nprofile = [\"none\", \"realtime\"]\n",
    );
    let out = run_exit(latlab!().arg("run").arg(&plan).arg("--dry-run"), 0);
    let text = String::from_utf8_lossy(&out.stdout);
    let cell = latlab_testkit::line_with(&text, "profile=realtime");
    assert!(
        cell.contains(
            "skipped: --profile realtime turns RT throttling off (sched_rt_runtime_us = -1), \
             beside which --load rt-hog"
        ),
        "{text}"
    );
}

/// A plan's settings serve every cell: options that do nothing in some cells (`load-cpus` where
/// the axis has no load, `spike-limit` without `spike`) are not refused there, as `measure`
/// refuses them on its command line.
#[test]
fn settings_a_cell_does_not_use_are_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "name = \"shared\"\n[settings]\nduration = \"1s\"\nload-cpus = \"0\"\nspike-limit = 5\n\
         [axes]\nload = [\"none\", \"cpu\"]\n",
    );
    let out = run_exit(latlab!().arg("run").arg(&plan).arg("--dry-run"), 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 cells × "), "{text}");
    assert!(!text.contains("skipped"), "{text}");
}
