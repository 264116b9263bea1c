//! `latlab load` run for real: the list, bad input, a short run read back as JSON, a schedule,
//! real-time loads that end on time, SIGTERM ending a run cleanly, and a command load stopped
//! after latlab is killed.
#![allow(clippy::unwrap_used)]

use latlab_testkit::process::signal_after;
use latlab_testkit::{json, latlab, run_exit};
use std::time::{Duration, Instant};

#[test]
fn list_shows_every_load_with_options_and_units() {
    let text = latlab_testkit::run_stdout(latlab!().args(["load", "--list"]));
    // Every kind the registry has (its own tests pin the list).
    for kind in latlab_load::registry::names() {
        assert!(
            text.lines().any(|l| l == kind),
            "{kind} missing from:\n{text}"
        );
    }
    for unit in ["ops/s", "MB/s", "IOPS", "files/s", "messages/s"] {
        assert!(text.contains(unit), "{unit}");
    }
    assert!(text.contains("fsync"));
    assert!(text.contains("default 4k"));
}

#[test]
fn a_directory_that_is_not_there_is_bad_input_before_running() {
    for (dir, why) in [
        ("/nonexistent-dir", "no such directory"),
        ("/proc/self/status", "not a directory"),
        // A directory it cannot write (it failed only at start, after "running…").
        ("/proc", "not writable here"),
    ] {
        let out = run_exit(latlab!().args(["load", "cpu", &format!("io:dir={dir}")]), 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("io:dir={dir}: {why}")), "{err}");
        assert!(
            err.contains("(accepted: an existing directory latlab may write)"),
            "{err}"
        );
        assert!(!err.contains("running"), "{err}");
    }
}

#[test]
fn rt_hog_is_refused_when_rt_throttling_is_off() {
    let root = latlab_testkit::tree_of(&[
        ("/proc/sys/kernel/sched_rt_runtime_us", "-1\n"),
        ("/sys/devices/system/cpu/online", "0\n"),
    ]);
    let out = run_exit(
        latlab!().args(["--sysroot", root.path().to_str().unwrap(), "load", "rt-hog"]),
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RT throttling is disabled"), "{err}");
    assert!(err.contains("--force"), "{err}");
}

#[test]
fn a_short_cpu_run_reports_json() {
    let t = Instant::now();
    let out = latlab!()
        .args([
            "load",
            "cpu:workers=1",
            "--load-cpus",
            "0",
            "--duration",
            "1s",
            "--json",
        ])
        .output()
        .unwrap();
    let took = t.elapsed();
    latlab_testkit::assert_ok(&out);
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let v = json(&out);
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r["spec"], "cpu:workers=1");
    assert_eq!(r["kind"], "cpu");
    assert_eq!(r["workers"], 1);
    assert_eq!(r["cpus"], serde_json::json!([0]));
    let elapsed = r["elapsed_ns"].as_u64().unwrap();
    assert!((900_000_000..2_000_000_000).contains(&elapsed), "{elapsed}");
    let t = r["throughput"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    for x in t {
        assert_eq!(x["unit"], "ops/s");
        assert!(x["rate"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(v["phases"], serde_json::json!([]));
    // The Loads model reads it back.
    let loads: latlab_model::load::Loads = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(loads.reports[0].workers, 1);
}

#[test]
fn a_schedule_prints_its_phases() {
    let out = latlab!()
        .args(["load", "--schedule", "idle 200ms, procfs:workers=1 300ms"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    latlab_testkit::assert_ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("load"), "{text}");
    assert!(lines[1].starts_with("procfs:workers=1"), "{text}");
    assert!(lines[1].contains("files/s"), "{text}");
    assert!(text.contains("phase  load"), "{text}");
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("0  idle")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("1  procfs:workers=1")),
        "{text}"
    );
}

/// Busy real-time threads on every CPU end when asked, alone or as a phase of a schedule: the
/// thread that ends them runs above them. At normal priority it waited for the kernel's RT
/// throttling, and a load of 500 ms ran 1.95 s, a phase of 300 ms 1.3 s (the next phase never
/// came).
#[test]
fn real_time_loads_end_on_time() {
    if !latlab_testkit::root_or_skip("a real-time load") {
        return;
    }
    let ms = |v: &serde_json::Value| v.as_u64().unwrap() / 1_000_000;
    let out = run_exit(
        latlab!().args(["load", "rt-hog:threads=4", "-D", "500ms", "--json"]),
        0,
    );
    let v = json(&out);
    let ran = ms(&v["reports"][0]["elapsed_ns"]);
    assert!((450..800).contains(&ran), "a load of 500 ms ran {ran} ms");

    let schedule = "rt-hog:threads=4 300ms, idle 200ms";
    let args = ["load", "--schedule", schedule, "-D", "600ms", "--json"];
    let v = json(&run_exit(latlab!().args(args), 0));
    let phases = v["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{v}");
    let hogged = ms(&phases[0]["end_ns"]) - ms(&phases[0]["start_ns"]);
    assert!(
        (250..600).contains(&hogged),
        "a phase of 300 ms lasted {hogged} ms"
    );
    assert_eq!(phases[1]["spec"], "idle");
}

#[test]
fn sigterm_ends_a_run_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let io = format!("io:size=256k,workers=1,dir={}", dir.path().display());
    let (out, took) = signal_after(
        latlab!().args(["load", "cpu:workers=1", &io, "--duration", "60s", "--json"]),
        Duration::from_millis(800),
        libc::SIGTERM,
        Duration::from_secs(20),
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    // Cut short: 130, as an interrupted `measure` (it exited 0, as a whole run does).
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("stopped by SIGTERM after "), "{err}");
    assert!(err.contains(" of 1m"), "{err}");
    let v = json(&out);
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    for r in reports {
        let e = r["elapsed_ns"].as_u64().unwrap();
        assert!((500_000_000..3_000_000_000).contains(&e), "{r}");
        assert!(r["throughput"][0]["rate"].as_f64().unwrap() > 0.0, "{r}");
    }
    // The io load's file is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The live members of process group `pgid` (zombies do not count).
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command name: state ppid pgrp ...
            let rest: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, r)| r.split_whitespace().collect())
                .unwrap_or_default();
            rest.first() != Some(&"Z") && rest.get(2) == Some(&pgid.to_string().as_str())
        })
        .collect()
}

/// `latlab load SPEC` for a minute, once its command has written a pid into `pid_file`: the
/// child and that pid.
// The child is returned to the caller, which kills and waits for it.
#[allow(clippy::zombie_processes)]
fn load_writing_a_pid(spec: &str, pid_file: &std::path::Path) -> (std::process::Child, u32) {
    let mut child = latlab!()
        .args(["load", spec, "--duration", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return (child, p);
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command never started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// latlab killed with SIGKILL cannot stop its command load; the load's supervisor does, as
/// latlab would have: what the command forked gets SIGTERM (noted in a file), and after the
/// grace whatever is left gets SIGKILL. Nothing of the group outlives it.
#[test]
fn a_command_load_and_what_it_forked_end_when_latlab_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let (term, pid_file) = (dir.path().join("term"), dir.path().join("pid"));
    // The command traps SIGTERM (noting it) and then lingers, so only SIGKILL ends it; the sleep
    // it forked is the process a killed latlab used to leave behind.
    let spec = format!(
        "cmd:trap 'echo term >> {}' TERM; sleep 300 & echo $! > {}; wait; sleep 30",
        term.display(),
        pid_file.display()
    );
    let (mut child, forked) = load_writing_a_pid(&spec, &pid_file);
    let stat = std::fs::read_to_string(format!("/proc/{forked}/stat")).unwrap();
    let pgid: u32 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(group_members(pgid).contains(&forked));
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    while !group_members(pgid).is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = group_members(pgid);
    for pid in &left {
        // SAFETY: plain system call; do not leave the test's processes behind.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    assert_eq!(left, Vec::<u32>::new(), "the load's group outlived latlab");
    assert_eq!(
        std::fs::read_to_string(&term).unwrap_or_default(),
        "term\n",
        "the command was not given SIGTERM first"
    );

    // A command that ended on its own, leaving a process behind: stopped with the group too.
    let spec = format!("cmd:sleep 300 & echo $! > {}", pid_file.display());
    std::fs::remove_file(&pid_file).unwrap();
    let (mut child, left) = load_writing_a_pid(&spec, &pid_file);
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{left}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
        })
    };
    let t = Instant::now();
    while alive() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let still = alive();
    if still {
        // SAFETY: plain system call; do not leave the test's process behind.
        unsafe { libc::kill(left as libc::pid_t, libc::SIGKILL) };
    }
    assert!(!still, "what the command left running outlived latlab");
}

/// A command load that exits with an error on its own fails `latlab load` (exit 1, saying
/// why; it exited 0), and the JSON carries why; one that ends with success, or is stopped,
/// does not fail.
#[test]
fn a_command_that_fails_on_its_own_fails_the_load() {
    let out = run_exit(
        latlab!().args(["load", "cmd:exit 3", "-D", "2s", "--json"]),
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().last().is_some_and(|l| l.starts_with(
            "latlab: error: a load failed: cmd:exit 3: the command ended on its own after"
        ) && l.ends_with("with exit status 3")),
        "{err}"
    );
    let v = json(&out);
    assert!(
        v["reports"][0]["failed"]
            .as_str()
            .is_some_and(|f| f.contains("exit status 3")),
        "{v}"
    );
    for ok in ["cmd:true", "cmd:sleep 30"] {
        let out = run_exit(latlab!().args(["load", ok, "-D", "1s", "--json"]), 0);
        assert!(json(&out)["reports"][0].get("failed").is_none(), "{ok}");
    }
}
