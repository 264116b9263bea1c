//! `latlab check` end to end: bad input, the table and JSON on every fixture tree, --skip,
//! --fix on a copy of the badly tuned tree undone byte for byte by `latlab tune restore`,
//! --measure, and the real machine.
#![allow(clippy::unwrap_used)]

use latlab_testkit::json;
use latlab_testkit::latlab;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use latlab_testkit::CHECK_TREES as TREES;

use latlab_testkit::check_tree as tree;

fn check(root: &Path, args: &[&str]) -> Output {
    latlab!()
        .arg("--sysroot")
        .arg(root)
        .arg("check")
        .args(args)
        .output()
        .unwrap()
}

fn ids() -> Vec<String> {
    latlab_testkit::run_stdout(latlab!().args(["check", "--list"]))
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// The ids of a `check --json` document's findings, in order.
fn finding_ids(doc: &serde_json::Value) -> Vec<&str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect()
}

fn finding<'a>(doc: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    latlab_testkit::json_item(&doc["findings"], "id", id)
}

#[test]
fn list_names_every_check() {
    let ids = ids();
    assert!(ids.len() >= 25);
    for id in [
        "limits.rtprio",
        "kernel.preempt",
        "cpu.idle-depth",
        "irq.shared-audio",
        "virt.vm",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id}");
    }
    // With --json, the same list as JSON.
    let out = latlab!()
        .args(["check", "--list", "--json"])
        .output()
        .unwrap();
    let doc = json(&out);
    let listed: Vec<&str> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids);
    assert!(doc[0]["title"].as_str().is_some_and(|t| !t.is_empty()));
}

#[test]
fn json_on_every_tree_and_target() {
    let ids = ids();
    // Exit codes per tree for each target: 3 a failure, 1 a warning, 0 all pass.
    for (target, codes) in [
        ("audio", [3, 3, 3, 3, 3]),
        ("control", [3, 3, 3, 3, 3]),
        ("throughput", [1, 0, 1, 0, 3]),
    ] {
        for (t, want) in TREES.iter().zip(codes) {
            let out = check(tree(t).path(), &["--json", "--target", target]);
            let doc = json(&out);
            assert_eq!(out.status.code(), Some(want), "{t} {target}");
            assert_eq!(doc["exit_code"], want, "{t} {target}");
            assert_eq!(doc["schema"], "latlab.check");
            assert_eq!(doc["target"], target);
            let got = finding_ids(&doc);
            assert_eq!(got, ids, "{t} {target}");
            for f in doc["findings"].as_array().unwrap() {
                assert!(
                    ["pass", "warn", "fail", "not_applicable"]
                        .contains(&f["verdict"].as_str().unwrap())
                );
            }
        }
    }
    let doc = json(&check(tree("badly-tuned").path(), &["--json"]));
    assert_eq!(doc["bounds"]["idle_exit_latency_us"], 100);
    assert_eq!(finding(&doc, "cpu.governor")["verdict"], "fail");
    assert_eq!(finding(&doc, "irq.shared-audio")["verdict"], "fail");
    assert_eq!(finding(&doc, "mem.thp")["verdict"], "warn");
    assert_eq!(finding(&doc, "limits.rtprio")["verdict"], "fail");
    assert_eq!(finding(&doc, "cpu.idle-depth")["verdict"], "fail");
    let doc = json(&check(
        tree("badly-tuned").path(),
        &["--json", "--target", "control"],
    ));
    assert_eq!(doc["bounds"]["idle_exit_latency_us"], 10);
}

#[test]
fn the_table_on_a_pipe() {
    let root = tree("badly-tuned");
    let out = check(root.path(), &[]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
    assert!(text.starts_with("target audio: idle exit latency ≤ 100 µs"));
    for id in ids() {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{id} "))),
            "{id} row"
        );
    }
    let gov = text
        .lines()
        .find(|l| l.starts_with("cpu.governor"))
        .unwrap();
    assert!(gov.contains("FAIL") && gov.contains("powersave (intel_cpufreq)"));
    assert!(text.contains("advice: set the performance governor"));
    assert!(text.contains("fix: tune: [cpu.all] governor = \"performance\""));
    assert!(text.contains("fix: boot: snd_hda_intel.enable_msi=1"));
    assert!(text.contains("pass,") && text.contains(" fail,"));
    // Pasted, the commands act on the tree checked, not on this machine.
    let r = root.path().display();
    assert!(
        text.contains(&format!(
            "latlab --sysroot {r} check --fix applies 3 tune setting(s)"
        )) && text.contains(&format!("; latlab --sysroot {r} tune restore undoes them")),
        "{text}"
    );
    // The steps by hand name the checked system's paths, not this machine's.
    assert!(text.contains("fix: sysctl -w vm.swappiness=10"), "{text}");
    assert!(
        text.contains(&format!(
            "the fixes by hand above are for the system whose root is {}: run them on it",
            root.path().display()
        )),
        "{text}"
    );
}

#[test]
fn skip_by_id_and_by_group() {
    let out = check(
        tree("vm").path(),
        &["--json", "--skip", "kernel.preempt,irq"],
    );
    let doc = json(&out);
    let got = finding_ids(&doc);
    assert!(!got.contains(&"kernel.preempt"));
    assert!(got.iter().all(|i| !i.starts_with("irq.")));
    let skipped = doc["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 4);
    // The VM failed only kernel.preempt for audio: the rest warns.
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn limits_of_the_sudo_caller() {
    let dir = copy_tree("badly-tuned");
    std::fs::write(
        dir.path().join("proc/self/status"),
        "Name:\tlatlab\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n",
    )
    .unwrap();
    let out = latlab!()
        .env("SUDO_USER", "carol")
        .arg("--sysroot")
        .arg(dir.path())
        .args(["check", "--json"])
        .output()
        .unwrap();
    let doc = json(&out);
    let rt = finding(&doc, "limits.rtprio");
    assert_eq!(rt["verdict"], "fail");
    let ev = rt["evidence"].as_str().unwrap();
    assert!(
        ev.starts_with("carol: RLIMIT_RTPRIO 0 (limits.conf/limits.d"),
        "{ev}"
    );
    // --user names another user.
    let out = check(dir.path(), &["--json", "--user", "root"]);
    let rt = finding(&json(&out), "limits.rtprio").clone();
    assert_eq!(rt["verdict"], "pass", "{rt}");
}

// ---------------------------------------------------------------------------------------------
// --fix on a copy of the bad tree.

use latlab_testkit::check_tree as copy_tree;

/// Every path under `root` with its kind, mode and content (symlinks by their target).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, latlab_sys::fixture::Entry> {
    latlab_sys::fixture::snapshot(root).unwrap()
}

/// `check --fix` on `root` with its tuning state in `state`, and `args`.
fn check_fix(root: &Path, state: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--fix", "--state-dir", state.to_str().unwrap()];
    all.extend(args);
    check(root, &all)
}

fn restore(root: &Path, state: &Path) -> Output {
    latlab!()
        .arg("--sysroot")
        .arg(root)
        .args(["tune", "--state-dir"])
        .arg(state)
        .arg("restore")
        .output()
        .unwrap()
}

#[test]
fn fix_then_tune_restore_leaves_the_bad_tree_as_it_was() {
    let dir = copy_tree("badly-tuned");
    let state = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    assert_eq!(
        before,
        snapshot(tree("badly-tuned").path()),
        "the copy is exact"
    );

    let out = check_fix(dir.path(), state.path(), &["--json"]);
    let doc = json(&out);
    // The boot-option and by-hand failures remain (clock source, shared IRQ, rtprio).
    assert_eq!(out.status.code(), Some(3), "{doc}");
    let fix = &doc["fix"];
    assert_eq!(fix["error"], serde_json::Value::Null, "{fix}");
    assert_eq!(
        fix["applied"],
        serde_json::json!([
            "[cpu.all] governor = \"performance\"",
            "[cpu.all] epp = \"performance\"",
            "[cpu.all] max_idle_latency_us = 100"
        ])
    );
    assert!(fix["written"].as_u64().unwrap() >= 12, "{fix}");
    assert!(fix["already_set"].is_u64(), "{fix}");
    assert_eq!(fix["not_applied"], serde_json::json!([]), "{fix}");
    // The profile and journal latlab tune wrote, in the state directory.
    for file in ["profile", "journal"] {
        let path = std::path::PathBuf::from(fix[file].as_str().unwrap());
        assert!(path.starts_with(state.path()) && path.exists(), "{fix}");
    }
    let boot: Vec<&str> = fix["plan"]["boot"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[0].as_str().unwrap())
        .collect();
    assert_eq!(boot, ["clocksource=tsc", "snd_hda_intel.enable_msi=1"]);
    // The report after the fix shows what it changed; the one before is kept.
    for id in ["cpu.governor", "cpu.epp", "cpu.idle-depth"] {
        assert_eq!(finding(&doc["before"], id)["verdict"], "fail", "{id}");
        assert_eq!(finding(&doc, id)["verdict"], "pass", "{id}");
    }
    assert_ne!(before, snapshot(dir.path()), "--fix wrote the tree");
    let gov = dir
        .path()
        .join("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor");
    assert_eq!(std::fs::read_to_string(&gov).unwrap(), "performance\n");

    // A second --fix with knobs to apply (control's 10 µs idle bound) refuses while the
    // first is applied, and writes nothing.
    let mid = snapshot(dir.path());
    let again = check_fix(dir.path(), state.path(), &["--target", "control"]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("restore it first"), "{err}");
    assert_ne!(again.status.code(), Some(0));
    assert_eq!(mid, snapshot(dir.path()));

    // The same --fix again has only boot options left to give: the applied profile's file,
    // which its journal names, is left as it is; the boot options go beside it.
    let profile = state.path().join("check-fix.toml");
    let applied = std::fs::read_to_string(&profile).unwrap();
    let again = check_fix(dir.path(), state.path(), &[]);
    assert_ne!(again.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&profile).unwrap(), applied);
    let boot = std::fs::read_to_string(state.path().join("check-fix-boot.toml")).unwrap();
    assert!(boot.contains("clocksource=tsc"), "{boot}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("check-fix-boot.toml"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );

    let r = restore(dir.path(), state.path());
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(before, snapshot(dir.path()), "restored byte for byte");
}

#[test]
fn fix_prints_the_boot_options_it_cannot_apply() {
    let dir = copy_tree("badly-tuned");
    let state = tempfile::tempdir().unwrap();
    let out = check_fix(dir.path(), state.path(), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("applied through latlab tune:"), "{text}");
    assert!(text.contains("boot options (not applied"), "{text}");
    assert!(text.contains("clocksource=tsc"));
    assert!(text.contains("snd_hda_intel.enable_msi=1"));
    assert!(text.contains("usermod -aG audio carol"));
    assert!(
        text.contains(&format!(
            "undo everything: latlab --sysroot {} tune restore --state-dir {})",
            dir.path().display(),
            state.path().display()
        )),
        "{text}"
    );
    assert!(text.contains("after the fix:"));
    assert!(restore(dir.path(), state.path()).status.success());
}

/// `--fix` applies the fixes of failed checks only, names the warnings it leaves and does not
/// print the same table again when it wrote nothing; `--fix-warnings` applies theirs too.
#[test]
fn fix_leaves_warnings_unless_asked_and_says_so() {
    // For control the VM warns of RT throttling (a sysctl) and fails only on boot options.
    let dir = copy_tree("vm");
    let state = tempfile::tempdir().unwrap();
    let knob = dir.path().join("proc/sys/kernel/sched_rt_runtime_us");
    let before = std::fs::read_to_string(&knob).unwrap();
    let out = check_fix(dir.path(), state.path(), &["--target", "control"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for said in [
        "not applied, as they only warn: the fixes of ",
        "after the fix: nothing was written; the system is as checked above",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
    // Every warning with a fix is named: a knob's, and a boot option's too (only the knobs'
    // were, so threadirqs went unnamed); --fix-warnings applies the knob and only lists the
    // boot option, and each line says which.
    let applies = latlab_testkit::line_with(&text, "not applied, as they only warn");
    assert!(
        applies.contains("limits.rt-throttling")
            && !applies.contains("kernel.threadirqs")
            && applies.ends_with("(--fix-warnings applies them)"),
        "{applies}"
    );
    let lists = latlab_testkit::line_with(&text, "not listed, as they only warn");
    assert!(
        lists.contains("the boot options and steps by hand of ")
            && lists.contains("kernel.threadirqs")
            && lists.ends_with("(--fix-warnings lists them)"),
        "{lists}"
    );
    assert_eq!(
        text.matches("limits.rt-throttling  warn").count(),
        1,
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), before);

    let out = check_fix(
        dir.path(),
        state.path(),
        &["--target", "control", "--fix-warnings"],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("sched_rt_runtime_us = -1 (1 value written"),
        "{text}"
    );
    assert!(text.contains("limits.rt-throttling  pass"), "{text}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "-1");
    assert!(restore(dir.path(), state.path()).status.success());
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), before);

    let out = check(dir.path(), &["--fix-warnings"]);
    latlab_testkit::assert_one_line_error(&out, 2, "--fix-warnings without --fix");
}

/// A fix applied now leaves the warnings' knobs to a second fix, which is refused while the
/// first is in force: the line that names them says to restore first, and its command, as
/// printed, makes the way for `--fix --fix-warnings`.
#[test]
fn the_warnings_left_by_an_applied_fix_name_the_restore_that_comes_first() {
    let dir = copy_tree("laptop-intel");
    let state = tempfile::tempdir().unwrap();
    let out = check_fix(dir.path(), state.path(), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = latlab_testkit::line_with(&text, "not applied, as they only warn");
    let (_, printed) = line
        .split_once("after `")
        .and_then(|(a, r)| Some((a, r.split_once("`, --fix --fix-warnings applies them")?.0)))
        .unwrap_or_else(|| panic!("{line}"));
    assert!(line.contains("cpu.epp, cpu.governor"), "{line}");
    // The tree's root is named: the journal restores under it alone.
    assert!(
        printed.starts_with(&format!(
            "latlab --sysroot {} tune restore --state-dir ",
            dir.path().display()
        )),
        "{printed}"
    );
    let words: Vec<&str> = printed.split_whitespace().skip(1).collect();
    let r = latlab!().args(&words).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let out = check_fix(dir.path(), state.path(), &["--fix-warnings"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let applied = latlab_testkit::line_with(&text, "applied through latlab tune:");
    for knob in ["governor = \"performance\"", "epp = \"performance\""] {
        assert!(applied.contains(knob), "{knob}: {applied}");
    }
    assert!(!text.contains("not applied, as they only warn"), "{text}");
    assert!(restore(dir.path(), state.path()).status.success());
}

/// With only boot options to fix, nothing is applied: the system is untouched, no journal is
/// written, and the profile it leaves is the one the printed `tune boot` command takes.
#[test]
fn fix_with_only_boot_options_applies_nothing_and_names_a_working_tune_boot() {
    // The VM fails only kernel.preempt for audio, whose fix is a boot option.
    let dir = copy_tree("vm");
    let state = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    let out = check_fix(dir.path(), state.path(), &[]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(before, snapshot(dir.path()));
    let files: Vec<_> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["check-fix.toml"]);
    let profile = state.path().join("check-fix.toml");
    // The VM boots without GRUB: the options go where its kernel command line is set.
    let line = "boot options (not applied; there is no GRUB here (/etc/default/grub is absent): \
                add them where this machine's boot loader, or its virtual machine's monitor, \
                sets the kernel command line, and reboot): preempt=full";
    assert!(text.contains(line), "{text}");
    let boot = latlab_testkit::run_stdout(
        latlab!()
            .arg("--sysroot")
            .arg(dir.path())
            .args(["tune", "boot"])
            .arg(&profile),
    );
    assert!(boot.contains("to add: preempt=full"), "{boot}");
}

#[test]
fn measure_before_and_after_the_fix() {
    let dir = copy_tree("badly-tuned");
    let state = tempfile::tempdir().unwrap();
    let out = check_fix(dir.path(), state.path(), &["--json", "--measure", "0.3s"]);
    let doc = json(&out);
    let m = &doc["measure"];
    assert_eq!(m["duration_ns"], 300_000_000u64);
    assert_eq!(m["errors"], serde_json::json!([]), "{m}");
    assert!(
        m["measured_elsewhere"].as_str().is_some_and(|e| e
            .starts_with("this machine was measured, not the system under")
            && e.ends_with("(a tree cannot be measured); the fix changed only the tree")),
        "{m}"
    );
    for when in ["before", "after"] {
        let p99 = m[when]["p99_ns"].as_u64().unwrap();
        let max = m[when]["max_ns"].as_u64().unwrap();
        assert!(p99 > 0 && max >= p99, "{when}: {m}");
    }
    assert!(restore(dir.path(), state.path()).status.success());
    // In text, the two runs come with what one run each can say.
    let out = check_fix(dir.path(), state.path(), &["--measure", "0.3s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("one run each: a difference here may be noise"),
        "{text}"
    );
    assert!(restore(dir.path(), state.path()).status.success());
    // A fix that wrote nothing left the system as measured: not measured again.
    let good = copy_tree("vm");
    let out = check_fix(good.path(), state.path(), &["--measure", "0.3s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("after the fix: nothing was written")
            && text.contains("  after: not measured again, as the fix wrote nothing"),
        "{text}"
    );
    // One measurement, said as one (it was headed "each", with an empty column after).
    assert!(text.contains("\nmeasured 300ms: p99 "), "{text}");
    assert!(!text.contains("measured 300ms each"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("after the fix …"), "{err}");

    // Without --fix: one measurement, printed on one line.
    let out = check(tree("vm").path(), &["--measure", "0.3s"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("measured 300ms: p99 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("max"), "{line}");
    assert!(
        text.contains("  note: this machine was measured, not the system under --sysroot ")
            && text.contains("(a tree cannot be measured)\n"),
        "{text}"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("latlab: measuring for 300ms before …"),
        "{err}"
    );
}

#[test]
fn the_real_machine_gives_a_complete_table() {
    let ids = ids();
    for target in ["audio", "control", "throughput"] {
        let out = latlab!()
            .args(["check", "--json", "--target", target])
            .output()
            .unwrap();
        let code = out.status.code().unwrap();
        assert!([0, 1, 3].contains(&code), "{target}: exit {code}");
        let doc = json(&out);
        let got = finding_ids(&doc);
        assert_eq!(got, ids, "{target}");
        for f in doc["findings"].as_array().unwrap() {
            let ev = f["evidence"].as_str().unwrap();
            assert!(!ev.contains("the check itself failed"), "{}: {ev}", f["id"]);
        }
        let table = latlab!()
            .args(["check", "--target", target])
            .output()
            .unwrap();
        assert_eq!(table.status.code(), Some(code), "{target}");
        let text = String::from_utf8(table.stdout).unwrap();
        assert_eq!(
            text.lines()
                .filter(|l| ids.iter().any(|id| l.starts_with(&format!("{id} "))))
                .count(),
            ids.len(),
            "{target}: one row per check\n{text}"
        );
        assert!(
            !text.contains("the fixes by hand above are for"),
            "the live system's steps by hand are this machine's\n{text}"
        );
    }
}

/// `check --measure` killed while it measures: its `latlab measure` child is stopped with it, not
/// left running with real-time threads on every CPU.
#[test]
fn the_measurement_ends_with_a_killed_check() {
    let root = tree("vm");
    let mut child = latlab!()
        .arg("--sysroot")
        .arg(root.path())
        .args(["check", "--measure", "30s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let parent = child.id();
    // The measuring child: `latlab measure -D 30000000000ns …` started by this check.
    let measuring = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains("30000000000ns")
                    && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                        s.rsplit(')')
                            .next()
                            .and_then(|r| r.split_whitespace().nth(1))
                            == Some(&parent.to_string())
                    })
            })
    };
    let mut pid = None;
    latlab_testkit::process::wait_for("the measuring child", Duration::from_secs(20), || {
        pid = measuring();
        pid.is_some()
    });
    let pid = pid.unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists();
    let t = std::time::Instant::now();
    while alive() && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive() {
        // SAFETY: plain system call; the test's own leftover.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        panic!("latlab measure {pid} kept running after its check was killed");
    }
}

/// Ctrl-C during `--measure` (the signal to the terminal's process group: check and its
/// measuring child) ends check with 130, as an interrupted measure does, after the table and
/// the cut-short measurement are said; it was a failed measurement and check's own exit code.
#[test]
fn ctrl_c_during_the_measurement_exits_130_with_what_was_measured() {
    use std::os::unix::process::CommandExt;
    let root = tree("vm");
    let child = latlab!()
        .arg("--sysroot")
        .arg(root.path())
        .args(["check", "--measure", "20s"])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: the process group of a child this test started and has not reaped.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{text}\n{err}");
    assert!(text.contains("\nmeasured 20s: p99 "), "{text}");
    assert!(
        text.contains("cut short: the measurement before was stopped by SIGINT after "),
        "{text}"
    );
    assert!(!text.contains("measuring failed"), "{text}");
    assert!(err.contains("latlab: interrupted: "), "{err}");
}

/// Ctrl-C while `check --fix` writes: the fixes written are put back (exit 130), after the
/// table of what was checked, which the interrupted run left out.
#[test]
fn an_interrupted_fix_puts_its_values_back_after_the_table() {
    let dir = copy_tree("badly-tuned");
    let state = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    let child = latlab_testkit::process::spawn_until_stderr(
        latlab!()
            .arg("--sysroot")
            .arg(dir.path())
            .args(["check", "--fix", "--state-dir"])
            .arg(state.path())
            .env("LATLAB_TUNE_PAUSE_AFTER_WRITES", "2")
            .env("LATLAB_TUNE_PAUSE_SECONDS", "1"),
        "paused after",
    );
    // SAFETY: a signal to a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{text}");
    let table = text
        .find("limits.rt-throttling")
        .unwrap_or_else(|| panic!("{text}"));
    let back = text
        .find("interrupted while applying the fixes: every value written is put back")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(table < back, "{text}");
    assert_eq!(snapshot(dir.path()), before, "put back byte for byte");
}
