//! `latlab tune search` run as a program. Against a copy of a fixture tree (`--sysroot`) the
//! candidates are applied to the tree's files while the measuring is real: bad input, the dry
//! run, a whole search with its store and report, Ctrl-C then `--resume`, and SIGKILL then
//! `tune restore`. As root, once on this machine's own knobs.
#![allow(clippy::unwrap_used)]

use latlab_testkit::{is_root, latlab, policy_args};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

struct Tree {
    dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    db: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let latlab_testkit::TuneTree { dir, root, state } = latlab_testkit::TuneTree::new("vm");
        let db = dir.path().join("search.db");
        Tree {
            dir,
            root,
            state,
            db,
        }
    }

    /// `latlab --sysroot TREE tune search ARGS --db DB --state-dir STATE` with short runs.
    fn search(&self, args: &[&str]) -> Command {
        let mut c = latlab!();
        c.arg("--sysroot")
            .arg(&self.root)
            .args(["tune", "search", "--state-dir"])
            .arg(&self.state)
            .arg("--db")
            .arg(&self.db)
            .args(["--duration", "1s"])
            .args(policy_args())
            .args(args)
            .current_dir(self.dir.path());
        for (flag, default) in [("--budget", "10m"), ("--repeats", "4")] {
            if !args.contains(&flag) {
                c.args([flag, default]);
            }
        }
        c
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }
}

use latlab_testkit::run_stdout as ok;

#[test]
fn without_root_the_search_is_refused_before_anything_is_touched() {
    let Some(mut cmd) =
        latlab_testkit::unprivileged(env!("CARGO_BIN_EXE_latlab"), "-sys_nice,-sys_admin")
    else {
        return;
    };
    if !is_root() {
        eprintln!("not root: the search is refused as this user");
    }
    let dir = tempfile::tempdir().unwrap();
    // Refused for want of root before the knobs are weighed: pm_qos is no candidate on a
    // machine without a cpuidle driver.
    let out = cmd
        .args(["tune", "search", "--knobs", "pm_qos", "--duration", "1s"])
        .args(["--policy", "other", "--no-mlock", "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("--db")
        .arg(dir.path().join("s.db"))
        .current_dir("/")
        .output()
        .unwrap();
    latlab_testkit::assert_one_line_error(
        &out,
        2,
        "tune search applies each candidate and needs root",
    );
    assert!(!dir.path().join("s.db").exists());
}

#[test]
fn the_dry_run_lists_candidates_reasons_and_time() {
    let t = Tree::new();
    let before = latlab_sys::fixture::snapshot(&t.root).unwrap();
    let out = ok(&mut t.search(&["--dry-run", "--cpus", "1"]));
    for line in [
        "candidate pm_qos=0",
        // This VM's haltpoll governor ignores disabled idle states.
        "not tried idle=0us ",
        "no effect here: the haltpoll governor ignores",
        "hold /dev/cpu_dma_latency (system.cpu_dma_latency_us)",
        "candidate timer_migration=off",
        "candidate irq_affinity=away",
        "not tried governor=performance",
        "unsupported here: no cpufreq driver",
        "boot options are not tried",
        "runs of 1.2s), budget 10m00s",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert!(!t.db.exists());
    assert!(latlab_sys::fixture::snapshot(&t.root).unwrap() == before);
    // Under --sysroot the tree is written and this machine measured: said.
    let o = t.search(&["--dry-run", "--cpus", "1"]).output().unwrap();
    let err = latlab_testkit::stderr(&o);
    assert!(
        err.contains("each candidate is written to the tree and this machine is measured")
            && err.contains("its numbers show no knob's effect"),
        "{err}"
    );
    // The reasons start in one column, however long a label: without a cpuidle driver the
    // governors are not tried, and cpuidle_governor=haltpoll (not the one in use) pushed its own
    // reason out.
    let cpuidle = t.root.join("sys/devices/system/cpu/cpuidle");
    let (driver, governor) = (
        cpuidle.join("current_driver"),
        cpuidle.join("current_governor"),
    );
    std::fs::write(&driver, "none\n").unwrap();
    std::fs::write(&governor, "menu\n").unwrap();
    let out = ok(&mut t.search(&["--dry-run", "--cpus", "1"]));
    assert!(
        out.contains("not tried cpuidle_governor=haltpoll "),
        "{out}"
    );
    // Nor does a PM QoS limit do anything: no run of either is planned.
    for knob in ["pm_qos=0", "resume_latency=0"] {
        let line = out
            .lines()
            .find(|l| l.contains(&format!(" {knob} ")))
            .unwrap_or_else(|| panic!("{knob}: {out}"));
        assert!(
            line.starts_with("  not tried ")
                && line.contains("no effect here: PM QoS limits are read by a cpuidle governor"),
            "{line}"
        );
    }
    let columns: std::collections::BTreeSet<usize> = out
        .lines()
        .filter_map(|l| {
            let rest = l
                .strip_prefix("  candidate ")
                .or_else(|| l.strip_prefix("  not tried "))?;
            let label = rest.split(' ').next()?;
            Some(l.len() - rest[label.len()..].trim_start().len())
        })
        .collect();
    assert_eq!(columns.len(), 1, "{columns:?}\n{out}");
    std::fs::write(&driver, "haltpoll\n").unwrap();
    std::fs::write(&governor, "haltpoll\n").unwrap();
    // A budget for fewer candidates says which are left out.
    let out = ok(&mut t.search(&["--dry-run", "--budget", "40s"]));
    assert!(out.contains("(not measured: beyond the budget)"), "{out}");
    // A budget too small names the least that does, in a form --budget takes back.
    let out = t.search(&["--dry-run", "--budget", "5s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let least = err
        .split("(accepted: at least ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{err}"));
    ok(&mut t.search(&["--dry-run", "--budget", least]));
    // A --db that is no store is refused by a dry run too, before its plan.
    std::fs::write(&t.db, "not a store\n").unwrap();
    let out = t.search(&["--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a latlab store"),
        "{out:?}"
    );
}

/// Refusals that need no measuring come before the plan is printed and before anything is
/// made: `--resume` with nothing to resume (a store that does not exist stays so), and a
/// tuning in force, named (its knobs read "already set here", which hid it).
#[test]
fn a_search_with_nothing_to_resume_or_a_profile_in_force_is_refused_first() {
    let t = Tree::new();
    for args in [
        &["--knobs", "timer_migration", "--resume"][..],
        &["--knobs", "timer_migration", "--resume", "--dry-run"][..],
    ] {
        let out = latlab_testkit::run_exit(&mut t.search(args), 2);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "",
            "{args:?}: no plan"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("--resume: no unfinished search with these settings"),
            "{out:?}"
        );
        assert!(!t.db.exists(), "{args:?}: the store was made");
    }
    let before = latlab_sys::fixture::snapshot(&t.root).unwrap();
    let apply = |verb: &[&str]| {
        let mut c = latlab!();
        c.arg("--sysroot")
            .arg(&t.root)
            .args(["tune"])
            .args(verb)
            .arg("--state-dir")
            .arg(&t.state);
        latlab_testkit::run_ok(&mut c);
    };
    apply(&["apply", "lowlatency"]);
    let out = latlab_testkit::run_exit(&mut t.search(&["--knobs", "timer_migration"]), 1);
    latlab_testkit::assert_one_line_error(&out, 1, "profile lowlatency is applied (since ");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    apply(&["restore"]);
    assert!(latlab_sys::fixture::snapshot(&t.root).unwrap() == before);
}

#[test]
fn a_search_is_an_experiment_that_resumes_after_ctrl_c_and_leaves_the_tree_as_it_was() {
    let t = Tree::new();
    let before = latlab_sys::fixture::snapshot(&t.root).unwrap();
    let args = [
        "--knobs",
        "timer_migration,vmstat_interval",
        "--objective",
        "p50",
    ];
    // Interrupted after its third run.
    let mut child = t
        .search(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains("run 4/") {
            // SAFETY: a plain signal to our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{seen:?}");
    assert!(
        seen.iter().any(|l| l.contains("--resume")),
        "no word on how to continue: {seen:?}"
    );
    // The fourth run, cut short, is kept all the same, outside the search.
    assert!(
        seen.iter()
            .any(|l| l.contains("is saved as run") && l.contains("outside the search")),
        "the cut-short run: {seen:?}"
    );
    assert!(
        latlab_sys::fixture::snapshot(&t.root).unwrap() == before,
        "the interrupted search left the tree changed"
    );

    let mut resume = args.to_vec();
    resume.push("--resume");
    // Continued only as it was measured: another measuring option is not this search.
    let mut other = resume.clone();
    other.push("--stagger");
    let out = latlab_testkit::run_exit(&mut t.search(&other), 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no unfinished search with these settings"),
        "{out:?}"
    );
    let stdout = ok(&mut t.search(&resume));
    let saved: usize = stdout
        .lines()
        .find(|l| l.starts_with("resuming search 1 started"))
        .and_then(|l| l.rsplit(": ").next()?.strip_suffix(" runs already saved"))
        .map(|n| n.parse().unwrap())
        .unwrap_or_else(|| panic!("not resumed: {stdout}"));
    assert!(
        saved >= 3,
        "{saved} runs saved before the interruption: {stdout}"
    );
    for row in [
        "timer_migration=off",
        "vmstat_interval=10s",
        "baseline: p50",
    ] {
        assert!(stdout.contains(row), "{row:?} missing:\n{stdout}");
    }
    // Δ% carries its sign as Δ does (an increase read as a decrease without it).
    for row in stdout
        .lines()
        .filter(|l| l.starts_with("timer_migration=off") || l.starts_with("vmstat_interval"))
    {
        let pct = row.split_whitespace().find(|w| w.ends_with('%')).unwrap();
        assert!(pct.starts_with('+') || pct.starts_with('-'), "{row}");
    }
    // With the store it was given, so that it runs as copied.
    assert!(
        stdout.contains(&format!(
            "report with: latlab report e1 --db {}",
            t.db.display()
        )),
        "{stdout}"
    );
    assert!(
        latlab_sys::fixture::snapshot(&t.root).unwrap() == before,
        "the search left the tree changed"
    );

    // The experiment holds every screening run, the baseline first; a done search is not
    // resumed again.
    let report = ok(latlab!()
        .args(["report", "e1", "--format", "json", "--db"])
        .arg(&t.db));
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    let cells: Vec<&str> = v
        .pointer("/cells")
        .and_then(|c| c.as_array())
        .unwrap_or_else(|| panic!("no cells: {report}"))
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        cells[..3],
        ["baseline", "timer_migration=off", "vmstat_interval=10s"],
        "{cells:?}"
    );
    // Its verdicts are on the objective it weighed (p50), as the search's were.
    let text = ok(latlab!()
        .args(["report", "e1", "--format", "text", "--db"])
        .arg(&t.db));
    assert!(
        text.contains("Verdict on p50 (the statistic the search weighed, there with")
            && !text.contains("Verdict on p99:"),
        "{text}"
    );
    let out = t.search(&resume).output().unwrap();
    latlab_testkit::assert_one_line_error(&out, 2, "--resume: no unfinished search");
}

#[test]
fn a_search_killed_with_a_candidate_applied_is_undone_by_tune_restore() {
    let t = Tree::new();
    let before = latlab_sys::fixture::snapshot(&t.root).unwrap();
    let knob = "proc/sys/kernel/timer_migration";
    assert_eq!(t.read(knob).trim(), "1");
    let mut child = t
        .search(&["--knobs", "timer_migration", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    latlab_testkit::process::wait_while_running(
        &mut child,
        "the candidate applied",
        Duration::from_secs(60),
        || t.read(knob).trim() == "0",
    );
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    // -q: not the plan.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("tune search: lower"), "{text}");
    assert_eq!(t.read(knob).trim(), "0", "SIGKILL cannot restore");
    ok(latlab!()
        .arg("--sysroot")
        .arg(&t.root)
        .args(["tune", "restore", "--state-dir"])
        .arg(&t.state));
    assert!(
        latlab_sys::fixture::snapshot(&t.root).unwrap() == before,
        "tune restore left the tree changed"
    );
}

#[test]
fn as_root_a_search_on_this_machine_puts_every_knob_back() {
    if !latlab_testkit::root_or_skip("a search on this machine's own knobs") {
        return;
    }
    let files = [
        "/proc/sys/kernel/timer_migration",
        "/proc/sys/vm/stat_interval",
    ];
    let read = || files.map(|f| std::fs::read_to_string(f).unwrap());
    let before = read();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("found.toml");
    let mut cmd = latlab!();
    cmd.args([
        "tune",
        "search",
        "--knobs",
        "timer_migration,vmstat_interval",
    ])
    .args([
        "--duration",
        "1s",
        "--repeats",
        "4",
        "--budget",
        "5m",
        "--state-dir",
    ])
    .arg(dir.path().join("state"))
    .arg("--db")
    .arg(dir.path().join("s.db"))
    .arg("--write-profile")
    .arg(&profile);
    let stdout = ok(&mut cmd);
    assert_eq!(read(), before, "the search left a knob changed:\n{stdout}");
    assert!(stdout.contains("timer_migration=off"), "{stdout}");
    // Whatever the verdicts here, a profile is written only for a confirmed effect.
    let confirmed = stdout.contains(": confirmed");
    assert_eq!(profile.exists(), confirmed, "{stdout}");
    if confirmed {
        let text = std::fs::read_to_string(&profile).unwrap();
        assert!(text.contains("Found by latlab tune search"), "{text}");
    } else {
        assert!(stdout.contains("no profile written"), "{stdout}");
    }
}

#[test]
fn a_candidate_that_cannot_be_written_is_left_out_with_why_and_the_rest_go_on() {
    let t = Tree::new();
    let before = latlab_sys::fixture::snapshot(&t.root).unwrap();
    // Every apply's first write fails with EIO: no candidate can be set.
    let out = ok(t
        .search(&["--knobs", "timer_migration,vmstat_interval"])
        .env("LATLAB_TUNE_FAIL_AT_WRITE", "1"));
    for knob in ["timer_migration=off", "vmstat_interval=10s"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(knob) && l.contains("not tried"))
            .unwrap_or_else(|| panic!("{knob} not said:\n{out}"));
        assert!(
            line.contains("could not be applied here: writing") && line.contains("EIO"),
            "{line}"
        );
    }
    assert!(out.contains("baseline: p99"), "{out}");
    assert!(
        latlab_sys::fixture::snapshot(&t.root).unwrap() == before,
        "a failed write was not rolled back"
    );
}
