//! `latlab tune` run as a program: against copies of the fixture trees (`--sysroot`), including a
//! process killed with SIGKILL in the middle of an apply, and once on the real machine as root.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_testkit::{is_root, latlab};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn snapshot(root: &Path) -> BTreeMap<PathBuf, latlab_sys::fixture::Entry> {
    latlab_sys::fixture::snapshot(root).unwrap()
}

/// A fixture copy (with the tuning overlay) and a state directory.
use latlab_testkit::TuneTree as Tree;

/// latlab pointed at a tree and its state directory.
trait Run {
    fn cmd(&self, args: &[&str]) -> Command;
    fn run(&self, args: &[&str]) -> Output;
}

impl Run for Tree {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = latlab!();
        c.arg("--sysroot").arg(&self.root).args(args);
        c.env("LATLAB_STATE_DIR", &self.state);
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
}

/// A profile file `name` holding `text`, beside the tree.
fn profile_file(t: &Tree, name: &str, text: &str) -> std::path::PathBuf {
    let p = t.dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `latlab ARGS FILE` on the tree, FILE a profile file `name` holding `text`.
fn with_profile(t: &Tree, args: &[&str], name: &str, text: &str) -> Output {
    let p = profile_file(t, name, text);
    t.cmd(args).arg(p).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    latlab_testkit::ok_stdout(out)
}

#[test]
fn list_and_show_say_what_each_profile_trades_and_changes() {
    let t = Tree::new("vm");
    let out = ok(&t.run(&["tune", "list"]));
    for name in [
        "throughput",
        "lowlatency",
        "realtime",
        "powersave",
        "balanced",
    ] {
        assert!(out.contains(&format!("{name} (built-in)")), "{out}");
    }
    assert!(out.contains("trades"), "{out}");
    let out = ok(&t.run(&["tune", "show", "lowlatency"]));
    assert!(out.contains("cpufreq governor"), "{out}");
    assert!(out.contains("unsupported here: no cpufreq driver"), "{out}");
    assert!(
        out.contains("cpu1 idle haltpoll idle (state1, exit 1 µs) disable"),
        "{out}"
    );
    assert!(out.contains("0 → 1"), "{out}");
    assert!(out.contains("1 → 10"), "{out}");
    // The resume latency file's values read backwards, and the plan says how.
    assert!(
        out.contains("pm_qos_resume_latency_us                        0 → n/a"),
        "{out}"
    );
    assert!(
        out.contains("note: pm_qos_resume_latency_us as the kernel writes it: 0 is no limit"),
        "{out}"
    );
    assert!(
        out.contains("6 to change, 2 already set, 2 unsupported here"),
        "{out}"
    );
}

#[test]
fn a_profile_of_which_nothing_applies_here_is_refused_and_leaves_no_journal() {
    // The vm tree has no cpufreq driver: a profile of frequency settings alone would write
    // nothing, yet leave a journal that says a profile is applied.
    let t = Tree::new("vm");
    let before = snapshot(&t.root);
    let freq = "[cpu.all]\ngovernor = \"performance\"\nepp = \"performance\"\n";
    let out = with_profile(&t, &["tune", "apply"], "freq.toml", freq);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "profile freq sets nothing this machine has (unsupported here: cpufreq governor, \
             cpufreq energy_performance_preference: no cpufreq driver"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!t.state.join("tune.journal").exists());
    assert_eq!(snapshot(&t.root), before);
    assert!(ok(&t.run(&["tune", "status"])).contains("no profile"));
    // A profile of no setting at all is refused as bad input, with no journal either.
    let out = with_profile(
        &t,
        &["tune", "apply"],
        "empty.toml",
        "description = \"x\"\n",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("profile empty sets nothing `tune apply` writes (accepted: "),
        "{err}"
    );
    assert!(!t.state.join("tune.journal").exists());
    // One setting that applies (an idle state) is enough to apply it.
    let some = "[cpu.all]\ngovernor = \"performance\"\nmax_idle_latency_us = 0\n";
    let out = ok(&with_profile(&t, &["tune", "apply"], "some.toml", some));
    assert!(out.contains("applied some"), "{out}");
    assert!(t.state.join("tune.journal").exists());
    ok(&t.run(&["tune", "restore"]));
    assert_eq!(snapshot(&t.root), before);
}

/// A per-CPU override that allows idle states, under a resume latency limit of 0 µs from the
/// profile it includes, allows states the CPU never enters: said.
#[test]
fn idle_states_allowed_on_a_polling_cpu_are_said_to_be_never_entered() {
    let t = Tree::new("laptop-intel");
    let inc = "include = [\"lowlatency\"]\n[cpu.1]\nmax_idle_latency_us = 1000\n";
    let out = ok(&with_profile(&t, &["tune", "show"], "inc.toml", inc));
    assert!(
        out.contains("note: CPU 1: the idle states the profile allows there are never entered"),
        "{out}"
    );
    let out = ok(&t.run(&["tune", "show", "lowlatency"]));
    assert!(!out.contains("never entered"), "{out}");
}

/// With no cpuidle driver the governors are still listed, but none has a state to choose: a
/// governor is no setting this machine has (a search tried each of them for nothing).
#[test]
fn a_cpuidle_governor_without_a_driver_is_unsupported() {
    let t = Tree::new("vm");
    let gov = "[system]\ncpuidle_governor = \"menu\"\n";
    let show = |t: &Tree| ok(&with_profile(t, &["tune", "show"], "gov.toml", gov));
    assert!(show(&t).contains("cpuidle governor"), "a test of nothing");
    assert!(!show(&t).contains("current_driver is none"));
    let driver = t.root.join("sys/devices/system/cpu/cpuidle/current_driver");
    std::fs::write(&driver, "none\n").unwrap();
    // Nor does a resume latency limit make a CPU poll.
    let out = ok(&t.run(&["tune", "show", "lowlatency"]));
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("(which has no effect here: only a cpuidle governor reads the limit"),
        "{out}"
    );
    assert!(
        show(&t).contains(
            "cpuidle governor  unsupported here: no cpuidle driver (cpuidle/current_driver is \
             none): a governor has no idle state to choose"
        ),
        "{}",
        show(&t)
    );
}

#[test]
fn apply_status_verify_restore_round_trip() {
    let t = Tree::new("amd-desktop");
    let before = snapshot(&t.root);
    let out = ok(&t.run(&["tune", "apply", "lowlatency"]));
    assert!(out.contains("applied lowlatency on CPUs 0-3"), "{out}");
    assert!(
        out.contains("cpufreq policy0 (CPU 0) governor  powersave → performance"),
        "{out}"
    );
    let out = ok(&t.run(&["tune", "status"]));
    assert!(
        out.contains("profile lowlatency (built-in) applied on CPUs 0-3 since"),
        "{out}"
    );
    assert!(!out.contains("system root"), "{out}");
    // Read from another root (this machine, another tree), its boot id is another system's,
    // no reboot: the root it was written under is named, with the command that restores it.
    let other = Tree::new("vm");
    std::fs::write(
        other.root.join("proc/sys/kernel/random/boot_id"),
        "99999999-1111-2222-3333-444444444444\n",
    )
    .unwrap();
    let mut status = other.cmd(&["tune", "status"]);
    status.env("LATLAB_STATE_DIR", &t.state);
    let out = ok(&status.output().unwrap());
    assert!(!out.contains("reboot"), "{out}");
    assert!(
        out.contains(&format!(
            "written under the system root {}, not this one: its values are that tree's \
             (`latlab --sysroot {} tune restore --state-dir {}`)",
            t.root.display(),
            t.root.display(),
            t.state.display()
        )),
        "{out}"
    );
    let out = ok(&t.run(&["tune", "verify"]));
    assert!(out.contains("verify: passed"), "{out}");
    std::fs::write(t.root.join("proc/sys/kernel/timer_migration"), "1\n").unwrap();
    let out = t.run(&["tune", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let o = text(&out.stdout);
    assert!(
        o.contains("DRIFT  kernel.timer_migration: expected 0, actual 1; changed by: unknown"),
        "{o}"
    );
    // Applying another profile restores the first.
    let out = ok(&t.run(&["tune", "apply", "powersave"]));
    assert!(out.contains("restored lowlatency first"), "{out}");
    let out = ok(&t.run(&["tune", "restore"]));
    assert!(out.contains("restored powersave"), "{out}");
    assert_eq!(snapshot(&t.root), before);
    let out = ok(&t.run(&["tune", "restore"]));
    assert!(out.contains("nothing to restore"), "{out}");
    let out = ok(&t.run(&["tune", "status"]));
    assert!(out.contains("no profile applied"), "{out}");
    // A gate on the tuning fails when nothing is applied, as its help says.
    let out = t.run(&["tune", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).starts_with("nothing to verify: no profile is applied"));
}

#[test]
fn an_injected_write_failure_rolls_back_and_names_knob_and_errno() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let out = t
        .cmd(&["tune", "apply", "lowlatency"])
        .env("LATLAB_TUNE_FAIL_AT_WRITE", "3")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("writing cpufreq policy2 (CPU 2) governor"),
        "names the knob: {err}"
    );
    assert!(err.contains("EIO, errno 5"), "{err}");
    assert!(
        err.contains("rolled back the 2 values already written"),
        "{err}"
    );
    assert_eq!(snapshot(&t.root), before);
    assert!(!t.state.join("tune.journal").exists());
}

/// Start `tune apply` that stops after `k` writes (for `seconds`, or until killed); returns
/// once it says so.
fn paused_apply(t: &Tree, profile: &str, k: usize, seconds: Option<u64>) -> std::process::Child {
    let mut cmd = t.cmd(&["tune", "apply", profile]);
    if let Some(s) = seconds {
        cmd.env("LATLAB_TUNE_PAUSE_SECONDS", s.to_string());
    }
    cmd.env("LATLAB_TUNE_PAUSE_AFTER_WRITES", k.to_string());
    latlab_testkit::process::spawn_until_stderr(&mut cmd, "paused after")
}

#[test]
fn sigkill_in_the_middle_of_apply_then_restore_puts_the_tree_back() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let mut child = paused_apply(&t, "lowlatency", 5, None);
    assert_ne!(snapshot(&t.root), before, "five values written");
    // While it holds the lock, nobody else tunes.
    let out = t.run(&["tune", "restore"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "another latlab process (pid {}) is tuning",
            child.id()
        )),
        "{err}"
    );
    // SIGKILL: no destructor, no cleanup.
    child.kill().unwrap();
    child.wait().unwrap();
    // The next latlab command notices the journal and offers restore.
    let out = t.run(&["sysinfo"]);
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("killed while applying"), "{err}");
    assert!(
        err.contains(&format!(
            "run `latlab --sysroot {} tune restore --state-dir {}`",
            t.root.display(),
            t.state.display()
        )),
        "{err}"
    );
    // So do the tune commands that read the system as it is: what they see is partly tuned.
    for args in [
        &["tune", "show", "lowlatency"][..],
        &["tune", "verify", "lowlatency"],
        &["tune", "verify"],
        &["tune", "recommend"],
    ] {
        let err = text(&t.run(args).stderr);
        assert!(err.contains("killed while applying"), "{args:?}: {err}");
    }
    let out = ok(&t.run(&["tune", "status"]));
    assert!(out.contains("the apply did not finish"), "{out}");
    // The values it wrote are as written, but the profile is only partly in force: no pass.
    let out = t.run(&["tune", "verify"]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(
            "verify: failed: the apply was killed before it finished, so the profile is only \
             partly in force ("
        ) && !said.contains("passed"),
        "{said}"
    );
    let out = ok(&t.run(&["tune", "restore"]));
    assert!(out.contains("its apply had been interrupted"), "{out}");
    assert_eq!(snapshot(&t.root), before, "restored byte for byte");
    let err = text(&t.run(&["sysinfo"]).stderr);
    assert!(!err.contains("tune restore"), "notice gone: {err}");
}

/// Ctrl-C or SIGTERM while `tune apply` writes: the writes finish, then every value is put
/// back, so no half of a profile stays applied; exit code 130.
#[test]
fn a_signal_in_the_middle_of_apply_puts_everything_back() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let t = Tree::new("laptop-intel");
        let before = snapshot(&t.root);
        let child = paused_apply(&t, "lowlatency", 3, Some(1));
        assert_ne!(snapshot(&t.root), before, "three values written");
        // SAFETY: plain system call to our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let out = child.wait_with_output().unwrap();
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(130), "{stdout}");
        assert!(
            stdout
                .contains("interrupted while applying lowlatency: every value written is put back"),
            "{stdout}"
        );
        assert_eq!(snapshot(&t.root), before, "restored byte for byte");
        assert!(!t.state.join("tune.journal").exists());
    }
}

/// A monitor or a measurement holding a profile puts back the one a killed apply left, and says
/// that alone: not also the note telling the user to run `tune restore`.
#[test]
fn a_monitor_with_a_profile_puts_back_a_leftover_and_says_it_once() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let mut child = paused_apply(&t, "lowlatency", 5, None);
    child.kill().unwrap();
    child.wait().unwrap();
    let log = t.dir.path().join("monitor.log");
    let mut cmd = t.cmd(&[
        "monitor",
        "--profile",
        "lowlatency",
        "--window",
        "1s",
        "--listen",
        "off",
        "--cpus",
        "0",
        "--name",
        "t",
        "--db",
    ]);
    cmd.arg(t.dir.path().join("m.db"))
        .args(latlab_testkit::policy_args());
    let d = latlab_testkit::process::Proc::start(cmd, log.clone());
    latlab_testkit::process::wait_for("the start", std::time::Duration::from_secs(30), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("left by a process that ended"))
    });
    let log = d.term();
    assert!(!log.contains("latlab tune restore"), "{log}");
    assert_eq!(snapshot(&t.root), before, "{log}");
    // So does a measurement, and its result says so.
    let mut child = paused_apply(&t, "lowlatency", 5, None);
    child.kill().unwrap();
    child.wait().unwrap();
    let out = t
        .cmd(&["measure", "-D", "0.2s", "-a", "0", "--no-samplers", "-q"])
        .args(latlab_testkit::policy_args())
        .args(["--profile", "lowlatency", "--json", "-"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("restored profile lowlatency left by a process that ended"),
        "{err}"
    );
    assert!(!err.contains("latlab tune restore"), "{err}");
    let r = latlab_testkit::json(&out);
    assert!(
        r["environment"]["warnings"]
            .to_string()
            .contains("left by a process that ended"),
        "{r}"
    );
    assert_eq!(snapshot(&t.root), before, "{err}");
    // One `tune apply` put in force is not left behind: refused before anything is measured.
    ok(&t.run(&["tune", "apply", "powersave"]));
    let out = t
        .cmd(&["measure", "-D", "0.2s", "-a", "0", "--no-samplers"])
        .args(latlab_testkit::policy_args())
        .args(["--profile", "lowlatency"])
        .output()
        .unwrap();
    latlab_testkit::assert_one_line_error(
        &out,
        1,
        "--profile lowlatency: profile powersave is applied (since ",
    );
    ok(&t.run(&["tune", "restore"]));
    assert_eq!(snapshot(&t.root), before);
}

/// A run whose profile disables idle states under the haltpoll governor measured less than
/// the profile names: the result says so (and reports show it), and the tree is put back.
#[test]
fn a_run_says_which_of_its_profile_changed_nothing() {
    let t = Tree::new("vm");
    let before = snapshot(&t.root);
    let profile = profile_file(&t, "idle-only.toml", "[cpu.all]\nmax_idle_latency_us = 0\n");
    let out = t
        .cmd(&[
            "measure",
            "-D",
            "0.3s",
            "-q",
            "-a",
            "0",
            "--json",
            "-",
            "--profile",
        ])
        .arg(&profile)
        .args(latlab_testkit::policy_args())
        .output()
        .unwrap();
    let r = latlab_testkit::json(&out);
    let warnings = r["environment"]["warnings"].to_string();
    assert!(
        warnings.contains("are ignored by the haltpoll governor, which halts as before"),
        "{warnings}"
    );
    assert_eq!(snapshot(&t.root), before);
}

/// `tune apply` reads the values it journals as the originals under the tuning lock: a restore
/// that finishes between its checks and its lock (held there by the test hook) does not make it
/// journal tuned values as the originals, which the last restore would then put back.
#[test]
fn apply_reads_the_originals_under_the_lock() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let profile = |name: &str, s: u32| {
        let path = t.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, format!("[system]\nvmstat_interval_s = {s}\n")).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (a, b) = (profile("a", 10), profile("b", 5));
    ok(&t.run(&["tune", "apply", &a]));
    let child = paused_apply(&t, &b, 0, Some(2));
    let out = ok(&t.run(&["tune", "restore"]));
    assert!(out.contains("restored a"), "{out}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
    ok(&t.run(&["tune", "restore"]));
    assert_eq!(snapshot(&t.root), before, "every value as it was");
}

/// Processes whose command line is exactly `args`.
fn running(args: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// `latlab measure` for a minute on CPU 0 under the profile lowlatency, in `t`.
fn measuring_under_lowlatency(t: &Tree) -> Command {
    let mut c = t.cmd(&[
        "measure",
        "-D",
        "60s",
        "-q",
        "-a",
        "0",
        "--profile",
        "lowlatency",
    ]);
    c.args(latlab_testkit::policy_args());
    c
}

/// A tuning a running latlab holds is not "applied" to restore: a second `measure --profile`
/// names that process and waits for nothing (it told the user to restore a tuning the other
/// run was using, and the restore it named would be refused).
#[test]
fn a_tuning_another_running_latlab_holds_is_named_as_its() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let mut child = running_under_lowlatency(&t, &before);
    let out = t
        .cmd(&["measure", "-D", "0.2s", "-a", "0", "--profile", "powersave"])
        .args(latlab_testkit::policy_args())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    // SAFETY: kill has no memory-safety preconditions; the pid is the child's.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    child.wait().unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "--profile powersave: another latlab process (pid {}) is tuning this system",
            child.id()
        )) && !err.contains("restore it"),
        "{err}"
    );
    assert_eq!(snapshot(&t.root), before);
}

/// [`measuring_under_lowlatency`] started in the background, once its profile is applied (the
/// tree no longer as `before`).
fn running_under_lowlatency(
    t: &Tree,
    before: &BTreeMap<PathBuf, latlab_sys::fixture::Entry>,
) -> std::process::Child {
    let child = measuring_under_lowlatency(t)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    latlab_testkit::process::wait_for(
        "the profile applied",
        std::time::Duration::from_secs(30),
        || t.state.join("tune.journal").exists() && snapshot(&t.root) != *before,
    );
    child
}

/// Two Ctrl-Cs in quick succession: the second ends latlab without writing results, but only
/// after the profile is put back and the command load is stopped.
#[test]
fn a_second_ctrl_c_still_puts_back_the_profile_and_stops_the_loads() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let load = ["sleep", "3217"];
    let mut child = measuring_under_lowlatency(&t)
        .args(["--load", &format!("cmd:{}", load.join(" "))])
        .stdout(Stdio::null())
        // A file, not a pipe: a load left running would hold a pipe open.
        .stderr(std::fs::File::create(t.dir.path().join("err")).unwrap())
        .spawn()
        .unwrap();
    latlab_testkit::process::wait_for(
        "the profile applied and the load started",
        std::time::Duration::from_secs(30),
        || snapshot(&t.root) != before && !running(&load).is_empty(),
    );
    let pid = child.id() as libc::pid_t;
    // Two different signals (the same one twice within 100 ms is one request).
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: plain system call to the child's pid.
        unsafe { libc::kill(pid, sig) };
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    child.wait().unwrap();
    let err = std::fs::read_to_string(t.dir.path().join("err")).unwrap();
    assert!(err.contains("latlab: second signal"), "{err}");
    let left = running(&load);
    for pid in &left {
        // SAFETY: plain system call; the test's own leftover.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    assert_eq!(left, Vec::<u32>::new(), "the load stopped: {err}");
    assert_eq!(snapshot(&t.root), before, "put back: {err}");
    assert!(!t.state.join("tune.journal").exists(), "{err}");
}

/// A run killed with its profile applied leaves that tuning in force: the next measurement
/// (without --profile, which would put it back first) carries it among its warnings, in its
/// result, not only in a note on stderr, with the command that restores it.
#[test]
fn a_measurement_under_a_tuning_a_killed_run_left_says_so_in_its_result() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let mut child = running_under_lowlatency(&t, &before);
    // SIGKILL: no destructor, no restore.
    child.kill().unwrap();
    child.wait().unwrap();
    let out = t
        .cmd(&[
            "measure",
            "-D",
            "0.2s",
            "-q",
            "-a",
            "0",
            "--no-samplers",
            "--json",
            "-",
        ])
        .args(latlab_testkit::policy_args())
        .output()
        .unwrap();
    let v = latlab_testkit::json(&out);
    let warned = v["environment"]["warnings"].to_string();
    assert!(
        warned
            .contains("measured under a tuning left in force: a tuning journal left by latlab pid")
            && warned.contains("profile lowlatency"),
        "{warned}"
    );
    // So does each run of a plan measured under it.
    let plan = t.dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"under\"\n[settings]\nduration = \"0.2s\"\ncpus = \"0\"\n\
             no-samplers = true\n{}[axes]\ninterval = [\"1ms\"]\n",
            latlab_testkit::policy_toml()
        ),
    )
    .unwrap();
    let db = t.dir.path().join("runs.db");
    ok(&t
        .cmd(&["run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .output()
        .unwrap());
    let shown =
        latlab_testkit::json(&t.run(&["db", "show", "1", "--json", "--db", db.to_str().unwrap()]));
    let in_run = shown["environment"]["warnings"].to_string();
    assert!(
        in_run.contains("measured under a tuning left in force: a tuning journal left by"),
        "{in_run}"
    );
    // The command it names carries the state directory (set here through LATLAB_STATE_DIR):
    // run where that variable is not set, it restores.
    let printed = warned
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("{warned}"));
    // The tree's root too: the journal restores under it alone.
    assert_eq!(
        printed,
        format!(
            "latlab --sysroot {} tune restore --state-dir {}",
            t.root.display(),
            t.state.display()
        )
    );
    let words: Vec<&str> = printed.split(' ').skip(1).collect();
    let mut restore = latlab!();
    restore.args(&words);
    ok(&restore.output().unwrap());
    assert_eq!(snapshot(&t.root), before);
}

#[test]
fn without_root_nothing_is_written() {
    let t = Tree::new("vm");
    let before = snapshot(&t.root);
    let out = if is_root() {
        if Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!("skipped: setpriv (util-linux) is not installed");
            return;
        }
        // Let nobody read the tree and create the state directory.
        for p in [t.dir.path(), t.root.as_path()] {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                .unwrap();
        }
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(env!("CARGO_BIN_EXE_latlab"))
            .arg("--sysroot")
            .arg(&t.root)
            .args(["tune", "apply", "lowlatency"])
            .env("LATLAB_STATE_DIR", &t.state)
            .output()
            .unwrap()
    } else {
        // Unprivileged already: make the knobs read-only as a root-owned sysfs is.
        let knob = t
            .root
            .join("sys/devices/system/cpu/cpu0/cpuidle/state1/disable");
        std::fs::set_permissions(&knob, std::os::unix::fs::PermissionsExt::from_mode(0o444))
            .unwrap();
        t.run(&["tune", "apply", "lowlatency"])
    };
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is not writable"), "{err}");
    assert!(err.contains("needs root"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(snapshot(&t.root), before);
    assert!(!t.state.join("tune.journal").exists());
}

#[test]
fn boot_advice_writes_and_removes_the_grub_drop_in() {
    let vm = Tree::new("vm");
    let out = ok(&vm.run(&["tune", "boot", "realtime"]));
    assert!(out.contains("preempt=full"), "{out}");
    assert!(out.contains("nohz_full=1"), "{out}");
    assert!(
        out.contains(
            "needs a different kernel: nohz_full= needs a kernel built with CONFIG_NO_HZ_FULL"
        ),
        "{out}"
    );
    assert!(
        out.contains("HZ 1000: needs a different kernel: CONFIG_HZ is 250"),
        "{out}"
    );
    // The VM has no GRUB: its advice says so up front, and --write refuses.
    assert!(out.contains("there is no GRUB here"), "{out}");
    assert!(!out.contains("--write` puts them in"), "{out}");
    let out = vm.run(&["tune", "boot", "realtime", "--write"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no GRUB here"));
    // A kernel built to preempt fully, without the switch: preempt=full is in effect already.
    let arm = Tree::new("arm-board");
    let out = ok(&arm.run(&["tune", "boot", "realtime"]));
    assert!(
        out.contains("in effect already: this kernel (/boot/config-6.6.31+rpt-rpi-v8) is built with CONFIG_PREEMPT"),
        "{out}"
    );
    assert!(!out.contains("preempt= needs a kernel"), "{out}");
    let amd = Tree::new("amd-desktop");
    // GRUB here: the drop-in is offered.
    let out = ok(&amd.run(&["tune", "boot", "realtime", "--cpus", "2-3"]));
    assert!(
        out.contains(&format!(
            "`latlab --sysroot {} tune boot realtime --write` puts them in",
            amd.root.display()
        )),
        "{out}"
    );
    let out = ok(&amd.run(&["tune", "boot", "realtime", "--cpus", "2-3", "--write"]));
    assert!(out.contains("run `update-grub` and reboot"), "{out}");
    let dropin = std::fs::read_to_string(amd.root.join("etc/default/grub.d/latlab.cfg")).unwrap();
    assert!(
        dropin.contains(
            "nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 isolcpus=managed_irq,domain,2-3"
        ),
        "{dropin}"
    );
    // --remove removes the one drop-in, whichever profile wrote it: a profile with it is
    // refused (it was ignored), the drop-in left.
    let out = amd.run(&["tune", "boot", "powersave", "--remove"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("'[PROFILE]' cannot be used with '--remove'"),
        "{}",
        text(&out.stderr)
    );
    assert!(amd.root.join("etc/default/grub.d/latlab.cfg").exists());
    // --cpus names the CPUs to isolate: beside a profile that isolates none it was ignored.
    let out = amd.run(&["tune", "boot", "lowlatency", "--cpus", "1", "--write"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--cpus 1: profile lowlatency isolates no CPUs") && err.lines().count() == 1,
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = ok(&amd.run(&["tune", "boot", "--remove"]));
    assert!(out.contains("removed"), "{out}");
    assert!(!amd.root.join("etc/default/grub.d/latlab.cfg").exists());
    // The directory was there before: it stays.
    let grub_d = amd.root.join("etc/default/grub.d");
    assert!(grub_d.join(".keep").exists());
    // One the drop-in made goes with it, also when the drop-in was written twice.
    std::fs::remove_dir_all(&grub_d).unwrap();
    for _ in 0..2 {
        ok(&amd.run(&["tune", "boot", "realtime", "--write"]));
    }
    ok(&amd.run(&["tune", "boot", "--remove"]));
    assert!(!grub_d.exists());
}

#[test]
fn recommend_and_hold() {
    let vm = Tree::new("vm");
    let out = ok(&vm.run(&["tune", "recommend"]));
    assert!(out.contains("recommended: throughput"), "{out}");
    assert!(out.contains("a virtual machine"), "{out}");
    // On this tree it changes nothing (no cpufreq, the rest as it wants): said.
    assert!(
        out.contains("note: it would change nothing here: 5 already set, 3 unsupported here"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "`latlab --sysroot {} tune show throughput`",
            vm.root.display()
        )),
        "{out}"
    );
    let laptop = Tree::new("laptop-intel");
    let out = ok(&laptop.run(&["tune", "recommend"]));
    assert!(out.contains("recommended: powersave"), "{out}");
    assert!(!out.contains("change nothing"), "{out}");
    assert!(out.contains("--goal latency"), "{out}");
    // A goal said: for latency in a VM, lowlatency with what a guest can and cannot change.
    let out = ok(&vm.run(&["tune", "recommend", "--goal", "latency"]));
    assert!(out.contains("recommended: lowlatency"), "{out}");
    assert!(out.contains("acts on the guest's idle only"), "{out}");
    assert!(!out.contains("--goal latency`"), "{out}");
    let out = vm.run(&["tune", "recommend", "--goal", "speed"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("latency, throughput, power, balanced"),
        "{err}"
    );
    // In a fixture tree /dev/cpu_dma_latency is a plain file: the request is written into it.
    let out = ok(&vm.run(&["tune", "hold", "--us", "7", "--duration", "50ms"]));
    assert!(
        out.contains("holding /dev/cpu_dma_latency at 7 µs"),
        "{out}"
    );
    assert!(out.contains("released (time is up)"), "{out}");
    let bytes = std::fs::read(vm.root.join("dev/cpu_dma_latency")).unwrap();
    assert_eq!(bytes, 7i32.to_ne_bytes());
    // A limit held (here: left in the file) is said by `tune status`, with or without a profile.
    let out = ok(&vm.run(&["tune", "status"]));
    assert!(
        out.contains("PM QoS: a CPU latency limit of 7 µs is held"),
        "{out}"
    );
    let out = ok(&laptop.run(&["tune", "status"]));
    assert!(!out.contains("PM QoS:"), "{out}");
}

/// `latlab tune` on this machine with its state in `state`.
fn real_tune(state: &Path, args: &[&str]) -> Command {
    let mut c = latlab!();
    c.arg("tune").args(args).arg("--state-dir").arg(state);
    c
}

/// Restores the real machine even when an assertion fails.
struct RestoreOnDrop(PathBuf);

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        let out = real_tune(&self.0, &["restore"]).output();
        if let Ok(o) = out
            && !o.status.success()
        {
            eprintln!("restore failed: {}", text(&o.stderr));
        }
    }
}

/// On the real machine as root: lowlatency disables idle states deeper than 0 µs; restore puts
/// them back.
#[test]
fn lowlatency_on_the_real_machine_changes_idle_states_and_restore_puts_them_back() {
    if !is_root() {
        eprintln!("skipped: needs root to tune the real machine");
        return;
    }
    let before = common::idle_disable_files();
    let deeper = |files: &BTreeMap<PathBuf, String>| -> Vec<PathBuf> {
        files
            .keys()
            .filter(|f| {
                let lat = f.parent().unwrap().join("latency");
                std::fs::read_to_string(lat)
                    .ok()
                    .and_then(|l| l.trim().parse::<u64>().ok())
                    .is_some_and(|l| l > 0)
            })
            .cloned()
            .collect()
    };
    let targets = deeper(&before);
    if targets.is_empty() {
        eprintln!("skipped: no idle state with a non-zero exit latency on this machine");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let guard = RestoreOnDrop(state.path().to_path_buf());
    ok(&real_tune(state.path(), &["apply", "lowlatency"])
        .output()
        .unwrap());
    let during = common::idle_disable_files();
    let changed = targets.iter().filter(|f| during[*f].trim() == "1").count();
    assert!(changed > 0, "no disable file changed: {during:?}");
    ok(&real_tune(state.path(), &["verify"]).output().unwrap());
    ok(&real_tune(state.path(), &["restore"]).output().unwrap());
    assert_eq!(common::idle_disable_files(), before);
    drop(guard);
}

/// On the ARM board: a shared IRQ is named by every handler on it, as `/proc/interrupts` lists
/// them; and a kernel that keeps CPUs apart with nohz_full= alone (no isolcpus=) has them
/// isolated too: the realtime profile's split takes them, as `latlab check` counts them.
#[test]
fn shared_irqs_are_named_by_all_handlers_and_nohz_full_cpus_are_isolated() {
    let t = Tree::new("arm-board");
    let out = ok(&t.run(&["tune", "show", "realtime"]));
    assert!(out.contains("irq 29 (mmc1, mmc0) affinity"), "{out}");
    assert!(out.contains("irq 35 (PCIe PME, aerdrv) affinity"), "{out}");

    let cpu = t.root.join("sys/devices/system/cpu");
    std::fs::write(cpu.join("isolated"), "\n").unwrap();
    std::fs::write(cpu.join("nohz_full"), "2-3\n").unwrap();
    let out = ok(&t.run(&["tune", "show", "realtime"]));
    assert!(
        out.contains(
            "isolated 2-3 (isolated by the kernel (isolcpus= or nohz_full=)), housekeeping 0-1"
        ),
        "{out}"
    );
}

/// Output to a reader that went away (`latlab tune show lowlatency | head -1`, or an error line
/// after `2>&1 | head -1` took its fill): latlab ends quietly with the status a shell gives
/// SIGPIPE, not with a panic.
#[test]
fn a_closed_pipe_on_stdout_or_stderr_ends_quietly() {
    for (profile, closed_stderr) in [("lowlatency", false), ("no-such-profile", true)] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = latlab!();
        cmd.args(["tune", "show", profile]);
        if closed_stderr {
            cmd.stdout(Stdio::piped()).stderr(writer);
        } else {
            cmd.stdout(writer).stderr(Stdio::piped());
        }
        let out = cmd.output().unwrap();
        let other = if closed_stderr {
            &out.stdout
        } else {
            &out.stderr
        };
        assert_eq!(out.status.code(), Some(141), "{profile}: {}", text(other));
        assert_eq!(text(other), "", "{profile}");
    }
}

/// The tree's /dev/cpu_dma_latency, a file a test writes the request a process holds into.
fn pm_qos_device(t: &Tree) -> std::path::PathBuf {
    let dev = t.root.join("dev/cpu_dma_latency");
    std::fs::create_dir_all(dev.parent().unwrap()).unwrap();
    dev
}

/// A profile that only asks for a /dev/cpu_dma_latency request is verified by whether a process
/// holds one as strict: passed when it does (it ended "nothing compared", exit 1, even then),
/// failed when none or a looser one is held; measured under it, the run says the request was
/// held.
#[test]
fn verify_of_a_profile_of_only_a_pm_qos_request_compares_the_held_request() {
    let t = Tree::new("vm");
    let profile = profile_file(
        &t,
        "pq.toml",
        "description = \"pm qos\"\n[system]\ncpu_dma_latency_us = 20\n",
    );
    let dev = pm_qos_device(&t);
    let verify = |held: i32| {
        std::fs::write(&dev, held.to_ne_bytes()).unwrap();
        t.run(&["tune", "verify", profile.to_str().unwrap()])
    };
    let out = verify(5);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("verify: passed (1 value as expected)"),
        "{}",
        text(&out.stdout)
    );
    // None held, or a looser one: not met, said as such (not "nothing compared"), with the
    // command that holds it, the profile file by its path.
    for held in [2_000_000_000, 50] {
        let out = verify(held);
        let said = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains(
                "verify: failed: the profile's one value that can be read here, its \
                 /dev/cpu_dma_latency request, is not held"
            ) && said.contains(&format!("`latlab tune hold {}`", profile.display())),
            "{said}"
        );
    }
    // Measured under it, the summary says the request was held, not "0 setting(s) changed".
    let out = t
        .cmd(&[
            "measure",
            "-D",
            "0.2s",
            "-a",
            "0",
            "--no-samplers",
            "--profile",
        ])
        .arg(&profile)
        .args(latlab_testkit::policy_args())
        .output()
        .unwrap();
    assert!(
        ok(&out).contains(
            "profile:  pq: no setting changed; its /dev/cpu_dma_latency request held for the run"
        ),
        "{}",
        text(&out.stdout)
    );
}

/// A profile applied for a run tunes the measured CPUs only (`-a 0`: the governor of CPU 0's
/// policy, not the others'), and its /dev/cpu_dma_latency request is recorded as held.
#[test]
fn a_profile_for_a_run_tunes_the_measured_cpus_and_records_its_pm_qos_hold() {
    let t = Tree::new("laptop-intel");
    let profile = profile_file(
        &t,
        "hold.toml",
        "description = \"hold\"\n[cpu.all]\ngovernor = \"performance\"\n[system]\ncpu_dma_latency_us = 0\n",
    );
    let out = t
        .cmd(&["measure", "-D", "0.2s", "-a", "0", "--no-samplers", "-q"])
        .args(latlab_testkit::policy_args())
        .arg("--profile")
        .arg(&profile)
        .args(["--json", "-"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let env = &r["environment"];
    assert_eq!(env["pm_qos_held_us"], 0, "{env}");
    let tuning: Vec<&str> = env["tuning"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let governors: Vec<&&str> = tuning.iter().filter(|l| l.contains("governor")).collect();
    assert_eq!(
        governors,
        [&"cpufreq policy0 (CPU 0) governor: powersave -> performance"],
        "only the measured CPU's policy: {tuning:?}"
    );
    // `tune apply` cannot hold the request (it lasts while a process keeps the file open): it
    // says so and how, rather than saying nothing.
    let before = snapshot(&t.root);
    let out = ok(&t.run(&["tune", "apply", profile.to_str().unwrap()]));
    assert!(
        out.contains("note: system.cpu_dma_latency_us = 0")
            && out.contains(&format!("latlab tune hold {}`", profile.display())),
        "the profile by its path, which `tune hold` takes: {out}"
    );
    assert_eq!(
        out.matches("request lasts only while").count(),
        1,
        "said once: {out}"
    );
    // `tune verify` says whether a process holds it, rather than passing without a word.
    let dev = pm_qos_device(&t);
    let was = std::fs::read(&dev).ok();
    // No request held, a looser one held by a process (named, not taken for none), the
    // profile's own.
    for (held, said) in [
        (
            2_000_000_000i32,
            "note   system.cpu_dma_latency_us = 0: not held (no process holds one; a request",
        ),
        (
            500,
            "note   system.cpu_dma_latency_us = 0: not held (a process holds a looser one, 500 µs;",
        ),
        (0, "ok     /dev/cpu_dma_latency: 0 µs held by a process"),
    ] {
        std::fs::write(&dev, held.to_ne_bytes()).unwrap();
        let verified = ok(&t.run(&["tune", "verify"]));
        assert!(verified.contains(said), "{held}: {verified}");
    }
    match was {
        Some(b) => std::fs::write(&dev, b).unwrap(),
        None => std::fs::remove_file(&dev).unwrap(),
    }
    ok(&t.run(&["tune", "restore"]));
    assert_eq!(snapshot(&t.root), before);
}

/// The restore command `tune apply --state-dir DIR` prints carries the directory: copied, it
/// restores (without it, it found no journal, said "nothing to restore" and left the system
/// tuned).
#[test]
fn the_printed_restore_command_restores_a_given_state_dir() {
    let t = Tree::new("amd-desktop");
    let before = snapshot(&t.root);
    let state = t.dir.path().join("given state");
    // The root given relative to where latlab runs: the command names it absolute, and the
    // journal keeps it so, so that the command restores from anywhere.
    let at = |args: &[&str]| {
        let mut c = latlab!();
        c.current_dir(t.dir.path())
            .arg("--sysroot")
            .arg(t.root.strip_prefix(t.dir.path()).unwrap())
            .args(args);
        c
    };
    let out = ok(&at(&["tune", "apply", "lowlatency", "--state-dir"])
        .arg(&state)
        .output()
        .unwrap());
    let printed = out
        .lines()
        .find_map(|l| l.strip_prefix("journal: "))
        .and_then(|l| l.split('`').nth(1))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        printed,
        format!(
            "latlab --sysroot {} tune restore --state-dir '{}'",
            t.root.display(),
            state.display()
        )
    );
    assert_ne!(snapshot(&t.root), before);
    // As a shell reads it.
    let restored = ok(&Command::new("sh")
        .current_dir("/")
        .arg("-c")
        .arg(printed.replacen("latlab", "\"$0\"", 1))
        .arg(env!("CARGO_BIN_EXE_latlab"))
        .output()
        .unwrap());
    assert!(!restored.contains("nothing to restore"), "{restored}");
    assert_eq!(snapshot(&t.root), before);
}

/// A profile in `--profile-dir` wins over one of the same name in /etc/latlab/profiles, for
/// `tune` and for `measure --profile` alike.
#[test]
fn profile_dir_wins_over_the_system_profiles_everywhere() {
    let t = Tree::new("laptop-intel");
    let etc = t.root.join("etc/latlab/profiles");
    let given = t.dir.path().join("given");
    for (dir, governor) in [(&etc, "powersave"), (&given, "performance")] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("same.toml"),
            format!("description = \"{governor}\"\n[cpu.all]\ngovernor = \"{governor}\"\n"),
        )
        .unwrap();
    }
    let given_arg = given.to_str().unwrap();
    let shown = ok(&t.run(&["tune", "--profile-dir", given_arg, "show", "same"]));
    assert!(shown.contains(given_arg), "{shown}");
    let out = t
        .cmd(&["measure", "-D", "0.2s", "-a", "0", "--no-samplers", "-q"])
        .args(latlab_testkit::policy_args())
        .args([
            "--profile",
            "same",
            "--profile-dir",
            given_arg,
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let tuning = r["environment"]["tuning"].to_string();
    assert!(tuning.contains("powersave -> performance"), "{tuning}");
}

/// A file where the state directory should be: its cause is said once, not twice.
#[test]
fn a_state_dir_that_is_a_file_says_why_once() {
    let t = Tree::new("vm");
    let file = t.dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let out = latlab!()
        .arg("--sysroot")
        .arg(&t.root)
        .args(["tune", "--state-dir"])
        .arg(&file)
        .arg("status")
        .output()
        .unwrap();
    latlab_testkit::assert_one_line_error(
        &out,
        2,
        &format!(
            "--state-dir {}: not a directory (accepted: ",
            file.display()
        ),
    );
}

/// A profile whose only setting is a /dev/cpu_dma_latency request has no value to read back:
/// `tune verify` says it compared nothing (exit 1), not that it passed.
#[test]
fn verify_of_a_profile_with_nothing_to_read_back_is_no_pass() {
    let t = Tree::new("laptop-intel");
    let profile = profile_file(
        &t,
        "dma.toml",
        "description = \"dma\"\n[system]\ncpu_dma_latency_us = 0\n",
    );
    let out = t.run(&["tune", "verify", profile.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = text(&out.stdout);
    assert!(said.contains("verify: nothing compared"), "{said}");
    assert!(!said.contains("passed"), "{said}");
}

/// An apply that wrote nothing (every value was already as the profile wants) verifies as the
/// profile compared with the system: a pass, then drift where a value changes (it compared
/// nothing and failed).
#[test]
fn verify_after_an_apply_that_wrote_nothing_compares_the_profile() {
    let t = Tree::new("amd-desktop");
    let profile = profile_file(
        &t,
        "same.toml",
        "description = \"as it is\"\n[system]\ntimer_migration = true\n",
    );
    let out = ok(&t.run(&["tune", "apply", profile.to_str().unwrap()]));
    assert!(out.contains("0 values written"), "{out}");
    let out = ok(&t.run(&["tune", "verify"]));
    assert!(out.contains("profile same, applied since"), "{out}");
    assert!(
        out.contains("verify: passed (1 value as expected)"),
        "{out}"
    );
    std::fs::write(t.root.join("proc/sys/kernel/timer_migration"), "0\n").unwrap();
    let out = t.run(&["tune", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stdout).contains("DRIFT  kernel.timer_migration: expected 1, actual 0"),
        "{}",
        text(&out.stdout)
    );
    ok(&t.run(&["tune", "restore"]));
    // Compared with a profile never applied here, the values differ: nothing drifted.
    let out = t.run(&["tune", "verify", "lowlatency"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = text(&out.stdout);
    assert!(
        said.contains("profile lowlatency, compared with this system"),
        "{said}"
    );
    assert!(
        said.contains("  DIFF   ") && !said.contains("DRIFT"),
        "{said}"
    );
    assert!(
        said.contains("differ from the profile, which is not applied"),
        "{said}"
    );
}

/// An IRQ moved off the isolated CPUs that the kernel still delivers there (its
/// effective_affinity_list, which a fixture tree never changes) is said under a passing verify:
/// not drift, but interrupts still land where the profile keeps them off.
#[test]
fn verify_says_which_moved_irqs_still_land_on_the_isolated_cpus() {
    let t = Tree::new("amd-desktop");
    ok(&t.run(&["tune", "apply", "realtime", "--cpus", "2-3"]));
    let out = ok(&t.run(&["tune", "verify"]));
    assert!(out.contains("verify: passed"), "{out}");
    assert!(
        out.contains(
            "note   irq 56 (PCIe PME, aerdrv) affinity: set to 0-1, but the kernel still \
             delivers it to CPU 3 (/proc/irq/56/effective_affinity_list)"
        ),
        "{out}"
    );
    ok(&t.run(&["tune", "restore"]));
}
