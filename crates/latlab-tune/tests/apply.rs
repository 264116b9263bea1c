//! Profiles applied to copies of the fixture trees: byte-identical restore, injected write
//! failures rolled back, per-CPU settings, idle states chosen by latency on CPUs with different
//! state lists, reboots, the lock, verify, boot advice and recommendations.
#![allow(clippy::unwrap_used)]

use latlab_model::units::CpuList;
use latlab_sys::Sys;
use latlab_sys::fixture::{self, Entry};
use latlab_tune::boot;
use latlab_tune::{
    Applied, ApplyOptions, ItemState, Outcome, Plan, Profile, Profiles, TemporaryTuning, TestHooks,
    TuneError,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use latlab_testkit::MACHINES as TREES;

/// A copy of a fixture tree with the tuning overlay, and a separate state directory.
use latlab_testkit::TuneTree as Tree;

/// What these tests do with a tree.
trait Use {
    fn sys(&self) -> Sys;
    fn idle_disabled(&self, cpu: u32, states: u32) -> String;
    fn apply(&self, p: &Profile) -> Applied;
}

impl Use for Tree {
    fn sys(&self) -> Sys {
        Sys::new(&self.root)
    }
    /// The `disable` files of the first `states` idle states of `cpu`, one after the other.
    fn idle_disabled(&self, cpu: u32, states: u32) -> String {
        (0..states)
            .map(|s| {
                self.read(&format!(
                    "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{s}/disable"
                ))
            })
            .collect()
    }
    /// Apply `p` with the default options.
    fn apply(&self, p: &Profile) -> Applied {
        latlab_tune::apply(&self.sys(), p, &self.state, &opts()).unwrap()
    }
}

/// Every path under `root` with its kind, mode and bytes.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fixture::snapshot(root).unwrap()
}

fn assert_same(before: &BTreeMap<PathBuf, Entry>, root: &Path, what: &str) {
    let after = snapshot(root);
    let differ = fixture::differences(before, &after);
    assert!(differ.is_empty(), "{what}: differs in {differ:?}");
}

fn profile_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// A built-in profile by name, or a profile file by path.
fn builtin(what: &str) -> Profile {
    Profiles::builtin().resolve(what).unwrap()
}

fn opts() -> ApplyOptions {
    ApplyOptions::default()
}

#[test]
fn every_builtin_applied_and_restored_leaves_every_tree_byte_identical() {
    let profiles = Profiles::builtin();
    for tree in TREES {
        for name in profiles.names() {
            let t = Tree::new(tree);
            let before = snapshot(&t.root);
            let profile = profiles.resolve(&name).unwrap();
            let applied = latlab_tune::apply(&t.sys(), &profile, &t.state, &opts())
                .unwrap_or_else(|e| panic!("{tree}/{name}: {e}"));
            if name == "lowlatency" {
                assert!(!applied.written.is_empty(), "{tree}/{name} changed nothing");
                assert_ne!(snapshot(&t.root), before, "{tree}/{name}: the tree changed");
            }
            let v = latlab_tune::verify(&t.sys(), &t.state).unwrap();
            assert_eq!(v.drifted(), 0, "{tree}/{name}: {:?}", v.checks);
            let status = latlab_tune::status(&t.sys(), &t.state).unwrap();
            assert!(!status.stale && status.journal.is_some(), "{tree}/{name}");
            let report = latlab_tune::restore(&t.sys(), &t.state).unwrap();
            assert_eq!(report.profile.as_deref(), Some(name.as_str()));
            assert!(report.failures().is_empty());
            assert_same(&before, &t.root, &format!("{tree}/{name}"));
            assert!(!t.state.join("tune.journal").exists());
        }
    }
}

#[test]
fn lowlatency_on_the_laptop_sets_what_it_says() {
    let t = Tree::new("laptop-intel");
    let p = builtin("lowlatency");
    t.apply(&p);
    let cpu = "/sys/devices/system/cpu";
    for c in 0..4 {
        assert_eq!(
            t.read(&format!("{cpu}/cpufreq/policy{c}/scaling_governor")),
            "performance\n"
        );
        assert_eq!(
            t.read(&format!(
                "{cpu}/cpufreq/policy{c}/energy_performance_preference"
            )),
            "performance\n"
        );
        // POLL (0 µs) stays, C1 (2 µs) and deeper are disabled.
        assert_eq!(
            t.read(&format!("{cpu}/cpu{c}/cpuidle/state0/disable")),
            "0\n"
        );
        for s in 1..5 {
            assert_eq!(
                t.read(&format!("{cpu}/cpu{c}/cpuidle/state{s}/disable")),
                "1\n"
            );
        }
        assert_eq!(
            t.read(&format!("{cpu}/cpu{c}/power/pm_qos_resume_latency_us")),
            "n/a\n"
        );
    }
    assert_eq!(t.read("/proc/sys/kernel/timer_migration"), "0\n");
    assert_eq!(t.read("/proc/sys/vm/stat_interval"), "10\n");
    // The journal holds governor entries before EPP entries.
    let journal = std::fs::read_to_string(t.state.join("tune.journal")).unwrap();
    let gov = journal.find("\"phase\":\"governor\"").unwrap();
    let epp = journal.find("\"phase\":\"epp\"").unwrap();
    assert!(gov < epp);
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
}

#[test]
fn unsupported_knobs_say_why() {
    let t = Tree::new("vm");
    let p = builtin("lowlatency");
    let plan = Plan::build(&t.sys(), &p, None).unwrap();
    let why = plan
        .items
        .iter()
        .find_map(|i| match &i.state {
            ItemState::Unsupported { why } if i.knob.contains("governor") => Some(why.clone()),
            _ => None,
        })
        .unwrap();
    assert!(why.contains("no cpufreq driver"), "{why}");
    // On the VM, lowlatency disables haltpoll idle (1 µs) and keeps POLL.
    let idle: Vec<_> = plan
        .items
        .iter()
        .filter(|i| i.knob.contains("idle haltpoll idle"))
        .collect();
    assert_eq!(idle.len(), 2);
    assert!(
        idle.iter()
            .all(|i| matches!(&i.state, ItemState::Change(c) if c.new == "1\n"))
    );
    // The ARM board has no EPP and no POLL: its shallowest state (WFI) stays enabled.
    let t = Tree::new("arm-board");
    let plan = Plan::build(&t.sys(), &p, None).unwrap();
    assert!(plan.items.iter().any(|i| i.knob.contains("energy_performance_preference")
        && matches!(&i.state, ItemState::Unsupported { why } if why.contains("cpufreq-dt"))));
    assert!(
        plan.items
            .iter()
            .any(|i| i.knob.starts_with("cpu0 idle WFI")
                && matches!(&i.state, ItemState::Set { value } if value == "0"))
    );
}

/// An apply killed between journaling a change and writing it leaves a journal whose last
/// change was never made: verify does not call it drift (nothing changed it), it says it was
/// not written, and the values written before it are checked as ever.
#[test]
fn a_change_journaled_but_never_written_is_not_drift() {
    let t = Tree::new("vm");
    t.apply(&builtin("lowlatency"));
    let journal = t.state.join("tune.journal");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut kept = Vec::new();
    let mut last = None;
    for line in text.lines() {
        kept.push(line);
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(path) = v["entry"]["change"]["target"]["file"]["path"].as_str()
            && kept.len() > 2
        {
            let field = |f: &str| v["entry"]["change"][f].as_str().unwrap().to_string();
            last = Some((path.to_string(), field("old"), field("new"), field("knob")));
            break;
        }
    }
    let (path, old, new, knob) =
        last.unwrap_or_else(|| panic!("no file change after the first: {text}"));
    // Killed after journaling this change, before writing it: no `complete` line.
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    let file = t.root.join(path.trim_start_matches('/'));
    std::fs::write(&file, &old).unwrap();
    let r = latlab_tune::verify(&t.sys(), &t.state).unwrap();
    assert_eq!(r.not_written, vec![knob.clone()]);
    assert!(!r.checks.is_empty() && r.drifted() == 0, "{:?}", r.checks);
    assert!(r.checks.iter().all(|c| c.knob != knob));
    // Killed just after the write instead: the change is checked as any other.
    std::fs::write(&file, &new).unwrap();
    let r = latlab_tune::verify(&t.sys(), &t.state).unwrap();
    assert!(r.not_written.is_empty() && r.drifted() == 0, "{r:?}");
    assert!(r.checks.iter().any(|c| c.knob == knob));
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
}

#[test]
fn a_failure_at_the_nth_write_rolls_back_the_first_n_minus_one() {
    let p = builtin("lowlatency");
    let total = {
        let t = Tree::new("laptop-intel");
        Plan::build(&t.sys(), &p, None).unwrap().changes().len()
    };
    assert!(total > 20, "{total}");
    for n in [1, 2, 5, 13, total] {
        let t = Tree::new("laptop-intel");
        let before = snapshot(&t.root);
        let o = ApplyOptions {
            hooks: TestHooks {
                fail_at_write: Some(n),
                ..TestHooks::default()
            },
            ..ApplyOptions::default()
        };
        let e = latlab_tune::apply(&t.sys(), &p, &t.state, &o).unwrap_err();
        match &e {
            TuneError::WriteFailed {
                errno, rollback, ..
            } => {
                assert_eq!(*errno, Some(libc::EIO));
                if n == 1 {
                    assert_eq!(rollback, "nothing had been written");
                } else {
                    assert!(
                        rollback.contains(&format!("rolled back the {} value", n - 1)),
                        "{rollback}"
                    );
                }
            }
            other => panic!("{other:?}"),
        }
        let msg = e.to_string();
        assert!(msg.contains("EIO, errno 5"), "{msg}");
        assert!(
            msg.starts_with("writing cpufreq policy")
                || msg.starts_with("writing cpu")
                || msg.starts_with("writing k")
                || msg.starts_with("writing vm"),
            "names the knob: {msg}"
        );
        assert_same(&before, &t.root, &format!("failure at write {n}"));
        assert!(!t.state.join("tune.journal").exists());
    }
    // The same on the VM tree.
    let t = Tree::new("vm");
    let before = snapshot(&t.root);
    let o = ApplyOptions {
        hooks: TestHooks {
            fail_at_write: Some(3),
            ..TestHooks::default()
        },
        ..ApplyOptions::default()
    };
    let e = latlab_tune::apply(&t.sys(), &p, &t.state, &o).unwrap_err();
    assert!(e.to_string().contains("rolled back the 2 values"), "{e}");
    assert_same(&before, &t.root, "vm");
}

#[test]
fn per_cpu_overrides_as_in_seed_003() {
    let t = Tree::new("laptop-intel");
    let dir = tempfile::tempdir().unwrap();
    let path = profile_file(
        dir.path(),
        "seed003",
        "description = \"core 2 never sleeps, core 3 no deeper than C1, core 2 at performance\"\n\
         [cpu.2]\nmax_idle_latency_us = 0\ngovernor = \"performance\"\n\
         [cpu.3]\nmax_idle_state = \"C1\"\n",
    );
    let profiles = Profiles::load(&[]).unwrap();
    let p = profiles.resolve(path.to_str().unwrap()).unwrap();
    let before = snapshot(&t.root);
    t.apply(&p);
    let cpu = "/sys/devices/system/cpu";
    let dis = |c: u32, s: u32| t.read(&format!("{cpu}/cpu{c}/cpuidle/state{s}/disable"));
    for s in 0..5 {
        assert_eq!(dis(0, s), "0\n");
        assert_eq!(dis(1, s), "0\n");
        assert_eq!(dis(2, s), if s == 0 { "0\n" } else { "1\n" });
        // C1 is state1 (2 µs): C1E, C6, C10 deeper.
        assert_eq!(dis(3, s), if s >= 2 { "1\n" } else { "0\n" });
    }
    assert_eq!(
        t.read(&format!("{cpu}/cpufreq/policy2/scaling_governor")),
        "performance\n"
    );
    for c in [0, 1, 3] {
        assert_eq!(
            t.read(&format!("{cpu}/cpufreq/policy{c}/scaling_governor")),
            "powersave\n"
        );
    }
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert_same(&before, &t.root, "seed 003");

    // --cpus restricts per-CPU settings.
    let t = Tree::new("laptop-intel");
    let low = builtin("lowlatency");
    let o = ApplyOptions {
        cpus: Some(CpuList::parse("1").unwrap()),
        ..ApplyOptions::default()
    };
    latlab_tune::apply(&t.sys(), &low, &t.state, &o).unwrap();
    assert_eq!(dis(0, 3), "0\n");
    assert_eq!(t.read(&format!("{cpu}/cpu1/cpuidle/state3/disable")), "1\n");
    assert_eq!(
        t.read(&format!("{cpu}/cpufreq/policy0/scaling_governor")),
        "powersave\n"
    );
    assert_eq!(
        t.read(&format!("{cpu}/cpufreq/policy1/scaling_governor")),
        "performance\n"
    );
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
}

/// Renumber cpu1's idle states of a laptop copy so its list differs from cpu0's: C1E is gone,
/// so C6 is state2 and C10 state3 there.
fn drop_c1e_on_cpu1(t: &Tree) {
    let base = t.root.join("sys/devices/system/cpu/cpu1/cpuidle");
    std::fs::remove_dir_all(base.join("state2")).unwrap();
    std::fs::rename(base.join("state3"), base.join("state2")).unwrap();
    std::fs::rename(base.join("state4"), base.join("state3")).unwrap();
}

#[test]
fn idle_states_are_chosen_per_cpu_by_latency_and_name_not_by_index() {
    let t = Tree::new("laptop-intel");
    drop_c1e_on_cpu1(&t);
    let dir = tempfile::tempdir().unwrap();
    let by_latency = profile_file(dir.path(), "lat", "[cpu.all]\nmax_idle_latency_us = 10\n");
    let p = builtin(by_latency.to_str().unwrap());
    let before = snapshot(&t.root);
    t.apply(&p);
    // cpu0: POLL C1 C1E stay (≤ 10 µs), C6 (state3) and C10 (state4) go.
    assert_eq!(t.idle_disabled(0, 5), "0\n0\n0\n1\n1\n");
    // cpu1: POLL C1 stay, C6 (now state2) and C10 (state3) go.
    assert_eq!(t.idle_disabled(1, 4), "0\n0\n1\n1\n");
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert_same(&before, &t.root, "by latency");

    // By name: "no deeper than C1E" exists on cpu0 only; cpu1 says why it is left alone.
    let by_name = profile_file(
        dir.path(),
        "name",
        "[cpu.all]\nmax_idle_state = \"C6\"\n[cpu.\"1-2\"]\nmax_idle_state = \"C1E\"\n",
    );
    let p = builtin(by_name.to_str().unwrap());
    let plan = Plan::build(&t.sys(), &p, None).unwrap();
    let cpu1 = plan
        .items
        .iter()
        .find(|i| i.knob == "cpu1 idle states")
        .unwrap();
    match &cpu1.state {
        ItemState::Unsupported { why } => {
            assert!(why.contains("no idle state named C1E on CPU 1"), "{why}");
            assert!(why.contains("name.toml:4: cpu.1-2.max_idle_state"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    t.apply(&p);
    assert_eq!(t.idle_disabled(0, 5), "0\n0\n0\n0\n1\n");
    assert_eq!(t.idle_disabled(2, 5), "0\n0\n0\n1\n1\n");
    assert_eq!(t.idle_disabled(1, 4), "0\n0\n0\n0\n");
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert_same(&before, &t.root, "by name");
}

#[test]
fn profiles_that_do_not_fit_the_machine_are_rejected_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let unknown = profile_file(
        dir.path(),
        "seven",
        "description = \"x\"\n\n[cpu.7]\ngovernor = \"performance\"\n",
    );
    let p = builtin(unknown.to_str().unwrap());
    let e = latlab_tune::apply(&t.sys(), &p, &t.state, &opts()).unwrap_err();
    assert!(e.is_usage());
    let msg = e.to_string();
    assert!(
        msg.contains("seven.toml:3: cpu.7: CPU 7 does not exist here (accepted: CPUs 0-3)"),
        "{msg}"
    );
    // One cpufreq policy for CPUs 0-3 on the ARM board: per-CPU governors cannot differ.
    let arm = Tree::new("arm-board");
    let conflict = profile_file(
        dir.path(),
        "conflict",
        "[cpu.all]\ngovernor = \"ondemand\"\n[cpu.2]\ngovernor = \"performance\"\n",
    );
    let p = builtin(conflict.to_str().unwrap());
    let msg = latlab_tune::apply(&arm.sys(), &p, &arm.state, &opts())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("conflict.toml:4: cpu.2.governor"), "{msg}");
    assert!(msg.contains("share cpufreq policy0"), "{msg}");
    let cpus = latlab_tune::apply(
        &t.sys(),
        &builtin("lowlatency"),
        &t.state,
        &ApplyOptions {
            cpus: Some(CpuList::parse("2-5").unwrap()),
            ..ApplyOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        cpus.is_usage() && cpus.to_string().contains("CPU 4 is absent or offline"),
        "{cpus}"
    );
    assert_same(&before, &t.root, "nothing written");
    assert!(!t.state.join("tune.journal").exists());
}

#[test]
fn restore_after_a_reboot_writes_nothing_and_says_what_the_reboot_reset() {
    let t = Tree::new("vm");
    let p = builtin("lowlatency");
    t.apply(&p);
    // "Reboot": a new boot id, every value back to its default except one a boot script set.
    let after = snapshot(&t.root);
    let fresh = Tree::new("vm");
    latlab_testkit::copy_tree(&fresh.root, &t.root).unwrap();
    t.write(
        "/proc/sys/kernel/random/boot_id",
        "00000000-1111-2222-3333-444444444444\n",
    );
    t.write("/proc/sys/vm/stat_interval", "5\n");
    let status = latlab_tune::status(&t.sys(), &t.state).unwrap();
    assert!(status.rebooted && status.stale);
    let notice = status.stale_notice(&t.sys(), &t.state).unwrap();
    // The journal is not in the default directory, nor the root `/`: the command names both.
    let restore = format!(
        "`latlab --sysroot {} tune restore --state-dir {}`",
        t.sys().root().display(),
        t.state.display()
    );
    assert!(
        notice.starts_with("the journal of profile lowlatency, applied before the last reboot")
            && notice.contains(&format!(
                "the reboot reset its values, and {restore} clears"
            )),
        "{notice}"
    );
    let v = latlab_tune::verify(&t.sys(), &t.state).unwrap();
    assert!(v.rebooted && v.drifted() > 0);
    let before_restore = snapshot(&t.root);
    let report = latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert!(report.rebooted);
    assert!(
        report
            .lines
            .iter()
            .any(|l| matches!(&l.outcome, Outcome::ResetByReboot { .. }))
    );
    let left = report
        .lines
        .iter()
        .find(|l| l.knob == "vm.stat_interval")
        .unwrap();
    assert_eq!(
        left.outcome,
        Outcome::LeftAfterReboot {
            now: "5".into(),
            before: "1".into()
        }
    );
    assert!(left.to_string().contains("left as the reboot set it"));
    assert_same(&before_restore, &t.root, "nothing written after a reboot");
    assert!(!t.state.join("tune.journal").exists());
    drop(after);
}

#[test]
fn verify_names_expected_and_actual_and_restore_notices_the_change() {
    let t = Tree::new("vm");
    let p = builtin("lowlatency");
    t.apply(&p);
    t.write("/proc/sys/kernel/timer_migration", "1\n");
    let v = latlab_tune::verify(&t.sys(), &t.state).unwrap();
    assert_eq!(v.drifted(), 1);
    let c = v.checks.iter().find(|c| !c.ok).unwrap();
    assert_eq!(
        (c.knob.as_str(), c.expected.as_str(), c.actual.as_str()),
        ("kernel.timer_migration", "0", "1")
    );
    assert!(c.who.as_ref().unwrap().contains("unknown"));
    // A tuning daemon running is named as the likely cause.
    std::fs::create_dir_all(t.root.join("proc/4242")).unwrap();
    t.write("/proc/4242/comm", "tuned\n");
    let v = latlab_tune::verify(&t.sys(), &t.state).unwrap();
    let c = v.checks.iter().find(|c| !c.ok).unwrap();
    assert_eq!(
        c.who.as_deref(),
        Some("probably tuned (running, sets this kind of knob)")
    );
    // Without a journal, against the profile.
    let vp = latlab_tune::verify_profile(&t.sys(), &p, None, &t.state).unwrap();
    assert_eq!(vp.drifted(), 1);
    assert!(!vp.unsupported.is_empty());
    // A journal is replayed only onto the root it was written under, and verified only
    // against it (another root's values would all read as drifted).
    let other = Tree::new("vm");
    let e = latlab_tune::restore(&other.sys(), &t.state).unwrap_err();
    assert!(
        e.to_string().contains("written under the system root"),
        "{e}"
    );
    let e = latlab_tune::verify(&other.sys(), &t.state).unwrap_err();
    assert!(
        e.to_string().contains("written under the system root"),
        "{e}"
    );
    let r = latlab_tune::restore(&t.sys(), &t.state).unwrap();
    let line = r
        .lines
        .iter()
        .find(|l| l.knob == "kernel.timer_migration")
        .unwrap();
    assert!(
        matches!(line.outcome, Outcome::AlreadyBack { .. }),
        "{line}"
    );
}

#[test]
fn a_temporary_tuning_holds_the_lock_and_restores_on_drop_and_on_panic() {
    let t = Tree::new("amd-desktop");
    let before = snapshot(&t.root);
    let profiles = Profiles::builtin();
    let low = profiles.resolve("lowlatency").unwrap();
    {
        let guard = TemporaryTuning::apply(&t.sys(), &low, None, &t.state).unwrap();
        assert!(!guard.applied().written.is_empty());
        assert_ne!(snapshot(&t.root), before);
        // Nobody else tunes meanwhile.
        match latlab_tune::apply(&t.sys(), &low, &t.state, &opts()) {
            Err(TuneError::Busy { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            latlab_tune::restore(&t.sys(), &t.state),
            Err(TuneError::Busy { .. })
        ));
        let st = latlab_tune::status(&t.sys(), &t.state).unwrap();
        assert!(st.holder.is_some() && !st.stale);
    }
    assert_same(&before, &t.root, "dropped guard");
    // Explicit restore says what it put back.
    let guard = TemporaryTuning::apply(&t.sys(), &low, None, &t.state).unwrap();
    let n = guard.applied().written.len();
    let report = guard.restore().unwrap();
    assert_eq!(report.lines.len(), n);
    assert!(
        report
            .lines
            .iter()
            .all(|l| matches!(l.outcome, Outcome::Restored { .. }))
    );
    assert_same(&before, &t.root, "explicit restore");
    // A panic while tuned unwinds through the guard.
    let sys = t.sys();
    let state = t.state.clone();
    let r = std::panic::catch_unwind(|| {
        let _g = TemporaryTuning::apply(&sys, &low, None, &state).unwrap();
        panic!("measurement failed");
    });
    assert!(r.is_err());
    assert_same(&before, &t.root, "after a panic");
    // A persistent tuning in place: a temporary one refuses, another apply restores it first.
    latlab_tune::apply(
        &t.sys(),
        &profiles.resolve("throughput").unwrap(),
        &t.state,
        &opts(),
    )
    .unwrap();
    match TemporaryTuning::apply(&t.sys(), &low, None, &t.state) {
        Err(e @ TuneError::AlreadyApplied { .. }) => {
            assert!(
                e.to_string().contains("profile throughput is applied"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
    let a = latlab_tune::apply(
        &t.sys(),
        &low,
        &t.state,
        &ApplyOptions {
            restore_previous: true,
            ..ApplyOptions::default()
        },
    )
    .unwrap();
    assert_eq!(a.previous.unwrap().profile.as_deref(), Some("throughput"));
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert_same(&before, &t.root, "after switching profiles");
}

#[test]
fn realtime_splits_cpus_and_moves_irqs_and_workqueues() {
    let t = Tree::new("laptop-intel");
    let before = snapshot(&t.root);
    let p = Profiles::builtin().resolve("realtime").unwrap();
    let a = t.apply(&p);
    let split = a.plan.split.clone().unwrap();
    assert_eq!(split.isolated.to_string(), "1,3");
    assert_eq!(split.housekeeping.to_string(), "0,2");
    assert_eq!(t.read("/sys/devices/virtual/workqueue/cpumask"), "5\n");
    assert_eq!(t.read("/proc/irq/default_smp_affinity"), "5\n");
    assert_eq!(t.read("/proc/sys/kernel/sched_rt_runtime_us"), "-1\n");
    // The masks are hex, where every other affinity is a CPU list (`f → 5` beside `0-3 → 0,2`):
    // their names say so.
    let knobs: Vec<&str> = a.plan.changes().iter().map(|c| c.knob.as_str()).collect();
    for mask in ["irq default affinity mask (hex)", "workqueue cpumask (hex)"] {
        assert!(knobs.contains(&mask), "{knobs:?}");
    }
    let irqs: Vec<_> = std::fs::read_dir(t.root.join("proc/irq"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .collect();
    for e in irqs {
        let l = std::fs::read_to_string(e.path().join("smp_affinity_list")).unwrap();
        let l = CpuList::parse(l.trim()).unwrap();
        assert!(
            l.cpus().iter().all(|c| [0, 2].contains(c)),
            "{:?}: {l}",
            e.path()
        );
    }
    assert!(a.plan.items.iter().any(|i| i.knob == "kernel thread affinity"
        && matches!(&i.state, ItemState::Unsupported { why } if why.contains("live system"))));
    assert!(a.plan.notes.iter().any(|n| n.contains("fair server")));
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert_same(&before, &t.root, "realtime");
    // A kernel from 4.2 on has the workqueue mask: one missing is part of /sys unseen, not an
    // old kernel (which every such tree was said to run).
    std::fs::remove_file(t.root.join("sys/devices/virtual/workqueue/cpumask")).unwrap();
    let plan = Plan::build(&t.sys(), &p, None).unwrap();
    let why = plan
        .items
        .iter()
        .find_map(|i| match &i.state {
            ItemState::Unsupported { why } if i.knob.starts_with("workqueue") => Some(why),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{:?}", plan.items));
    assert!(
        why.contains("which kernel 6.8.0-45-generic has: /sys is mounted in part here"),
        "{why}"
    );
    // --cpus names the isolated CPUs; the ARM board's kernel isolates CPU 3 already.
    let arm = Tree::new("arm-board");
    let plan = Plan::build(&arm.sys(), &p, None).unwrap();
    assert_eq!(plan.split.unwrap().isolated.to_string(), "3");
    let plan = Plan::build(&arm.sys(), &p, Some(&CpuList::parse("2-3").unwrap())).unwrap();
    let s = plan.split.unwrap();
    assert_eq!(
        (s.isolated.to_string(), s.why.as_str()),
        ("2-3".to_string(), "given with --cpus")
    );
    // Every online CPU asked: one core stays for housekeeping, and the plan says why.
    let all = t.sys().online_cpus().unwrap();
    let s = Plan::build(&t.sys(), &p, Some(&all))
        .unwrap()
        .split
        .unwrap();
    assert_eq!(s.isolated.to_string(), "1,3");
    assert!(
        s.why
            .ends_with("the CPUs asked are every online CPU, and one core stays for housekeeping"),
        "{}",
        s.why
    );
}

/// An IRQ the kernel refused to move at apply (a managed IRQ: here a write made to fail with
/// EIO) is no drift for `verify PROFILE` while that tuning is applied: it is listed with the
/// reason `tune apply` gave. Without the journal it is drift, as nothing says why it differs.
#[test]
fn verify_profile_lists_an_irq_the_kernel_refused_at_apply_not_as_drift() {
    let t = Tree::new("vm");
    let before = snapshot(&t.root);
    let p = builtin("realtime");
    let plan = Plan::build(&t.sys(), &p, None).unwrap();
    let at = plan
        .changes()
        .iter()
        .position(|c| c.best_effort && c.knob.starts_with("irq 2"))
        .unwrap();
    let knob = plan.changes()[at].knob.clone();
    let o = ApplyOptions {
        hooks: TestHooks {
            fail_at_write: Some(at + 1),
            ..TestHooks::default()
        },
        ..ApplyOptions::default()
    };
    let a = latlab_tune::apply(&t.sys(), &p, &t.state, &o).unwrap();
    assert_eq!(a.skipped.len(), 1, "{:?}", a.skipped);
    assert!(a.skipped[0].1.contains("managed IRQ"), "{:?}", a.skipped);

    let vp = latlab_tune::verify_profile(&t.sys(), &p, None, &t.state).unwrap();
    assert_eq!(vp.drifted(), 0, "{:?}", vp.checks);
    let (_, why) = vp.unsupported.iter().find(|(k, _)| *k == knob).unwrap();
    assert!(
        why.starts_with("the kernel refused") && why.ends_with("(at `tune apply`)"),
        "{why}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let vp = latlab_tune::verify_profile(&t.sys(), &p, None, elsewhere.path()).unwrap();
    assert_eq!(vp.drifted(), 1);
    assert!(vp.checks.iter().any(|c| !c.ok && c.knob == knob));
    // The journal's verify never counted it: it was not written.
    assert_eq!(
        latlab_tune::verify(&t.sys(), &t.state).unwrap().drifted(),
        0
    );
    latlab_tune::restore(&t.sys(), &t.state).unwrap();
    assert_same(&before, &t.root, "realtime with a refused IRQ");
}

/// Under the haltpoll governor (the VM tree) a disabled idle state does not stop the halt: a
/// profile that only disables states is told what does, one that also sets a resume latency of
/// 0 (lowlatency) is not, nor one that switches the governor.
#[test]
fn disabling_idle_states_under_haltpoll_says_it_takes_a_zero_limit() {
    let t = Tree::new("vm");
    let dir = tempfile::tempdir().unwrap();
    let note = |text: &str| {
        let path = profile_file(dir.path(), "p", text);
        let p = Profiles::builtin().resolve(path.to_str().unwrap()).unwrap();
        let plan = Plan::build(&t.sys(), &p, None).unwrap();
        assert!(
            plan.changes().iter().any(|c| c.knob.ends_with(") disable")),
            "{text}: no idle state disabled"
        );
        plan.notes
            .into_iter()
            .find(|n| n.contains("the haltpoll governor ignores"))
    };
    let n = note("[cpu.all]\nmax_idle_latency_us = 0\n").unwrap();
    assert!(n.starts_with("idle states disabled on CPUs 0-1:"), "{n}");
    assert!(n.contains("pm_qos_resume_latency_us = 0"), "{n}");
    assert_eq!(
        note("[cpu.all]\nmax_idle_latency_us = 0\npm_qos_resume_latency_us = 0\n"),
        None
    );
    assert_eq!(
        note("[cpu.all]\nmax_idle_latency_us = 0\n[system]\ncpuidle_governor = \"menu\"\n"),
        None
    );
    // A governor this kernel lacks leaves haltpoll in charge.
    assert!(
        note("[cpu.all]\nmax_idle_latency_us = 0\n[system]\ncpuidle_governor = \"teo\"\n")
            .is_some()
    );
    // The laptop's governor honours disabled states.
    let laptop = Tree::new("laptop-intel");
    let p = Profiles::builtin()
        .resolve(
            profile_file(dir.path(), "q", "[cpu.all]\nmax_idle_latency_us = 0\n")
                .to_str()
                .unwrap(),
        )
        .unwrap();
    let plan = Plan::build(&laptop.sys(), &p, None).unwrap();
    assert!(
        !plan.notes.iter().any(|n| n.contains("haltpoll")),
        "{:?}",
        plan.notes
    );
    assert_eq!(plan.disable_ignored, None);
    // A search does not measure a candidate that changes nothing here.
    let cpus = latlab_model::units::CpuList::parse("0-1").unwrap();
    let (found, not) = latlab_tune::search::candidates(&t.sys(), &["idle"], &cpus).unwrap();
    assert!(
        found.is_empty(),
        "{:?}",
        found.iter().map(|c| c.label()).collect::<Vec<_>>()
    );
    assert!(
        not.iter()
            .all(|n| n.what.starts_with("idle=") && n.why.contains("haltpoll governor ignores")),
        "{not:?}"
    );
    let (found, _) = latlab_tune::search::candidates(&laptop.sys(), &["idle"], &cpus).unwrap();
    assert!(!found.is_empty());
}

#[test]
fn boot_advice_for_this_kernel_and_the_grub_drop_in() {
    let profiles = Profiles::builtin();
    let rt = profiles.resolve("realtime").unwrap();
    // The VM: no NO_HZ_FULL, HZ 250, not PREEMPT_RT, no GRUB.
    let vm = Tree::new("vm");
    let a = boot::advise(&vm.sys(), &rt, None).unwrap();
    let opt = |a: &boot::BootAdvice, name: &str| {
        a.options
            .iter()
            .find(|o| o.option.starts_with(name))
            .cloned()
            .unwrap()
    };
    assert_eq!(opt(&a, "preempt=").option, "preempt=full");
    assert_eq!(opt(&a, "preempt=").status, boot::BootStatus::Add);
    assert!(
        matches!(opt(&a, "nohz_full=").status, boot::BootStatus::NeedsKernel { why } if why.contains("CONFIG_NO_HZ_FULL"))
    );
    assert_eq!(opt(&a, "rcu_nocbs=").option, "rcu_nocbs=1");
    assert_eq!(opt(&a, "isolcpus=").option, "isolcpus=managed_irq,domain,1");
    assert_eq!(opt(&a, "irqaffinity=").option, "irqaffinity=0");
    let hz = a.kernel.iter().find(|k| k.what == "HZ 1000").unwrap();
    assert!(hz.status.as_ref().unwrap_err().contains("CONFIG_HZ is 250"));
    let prt = a.kernel.iter().find(|k| k.what == "PREEMPT_RT").unwrap();
    assert!(prt.status.is_err());
    let e = boot::write_dropin(&vm.sys(), &a).unwrap_err().to_string();
    assert!(
        e.contains("no GRUB here") && e.contains("preempt=full"),
        "{e}"
    );
    // The AMD desktop already boots with preempt=full threadirqs.
    let amd = Tree::new("amd-desktop");
    let a = boot::advise(&amd.sys(), &rt, None).unwrap();
    assert_eq!(opt(&a, "preempt=").status, boot::BootStatus::AlreadySet);
    assert_eq!(opt(&a, "threadirqs").status, boot::BootStatus::AlreadySet);
    let w = boot::write_dropin(&amd.sys(), &a).unwrap();
    assert!(w.path.ends_with("etc/default/grub.d/latlab.cfg"));
    let text = amd.read(boot::GRUB_DROPIN);
    assert!(
        text.contains("GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT} nohz_full=1,3"),
        "{text}"
    );
    assert!(!text.contains("preempt=full"), "already set: {text}");
    assert_eq!(a.grub_command, "`update-grub`");
    // Neither command found: both named, each quoted as a command, the words between not.
    let none = tempfile::tempdir().unwrap();
    assert_eq!(
        boot::grub_command(&latlab_sys::Sys::new(none.path())),
        "`update-grub` (Debian, Ubuntu) or `grub2-mkconfig -o /boot/grub2/grub.cfg`"
    );
    assert!(boot::remove_dropin(&amd.sys()).unwrap().is_some());
    assert!(boot::remove_dropin(&amd.sys()).unwrap().is_none());
}

#[test]
fn recommendations_follow_the_facts() {
    let cases = [
        ("laptop-intel", "powersave", "Discharging"),
        ("arm-board", "realtime", "isolated CPUs: 3"),
        ("amd-desktop", "balanced", "chassis type 3 (desktop)"),
        ("vm", "throughput", "a virtual machine"),
    ];
    for (tree, want, fact) in cases {
        let t = Tree::new(tree);
        let r = boot::recommend(&t.sys(), None);
        assert_eq!(r.profile, want, "{tree}: {r:?}");
        assert!(
            r.facts.iter().any(|f| f.contains(fact)),
            "{tree}: {:?}",
            r.facts
        );
    }
    // A goal said outweighs the facts, which still qualify it.
    use boot::Goal::{Balanced, Latency, Power, Throughput};
    let goals = [
        ("vm", Latency, "lowlatency", "acts on the guest's idle only"),
        (
            "arm-board",
            Latency,
            "realtime",
            "set up for real-time work",
        ),
        (
            "laptop-intel",
            Throughput,
            "throughput",
            "shortens the battery's life",
        ),
        ("amd-desktop", Power, "powersave", "the least power"),
        ("vm", Balanced, "balanced", "defaults"),
    ];
    for (tree, goal, want, why) in goals {
        let r = boot::recommend(&Tree::new(tree).sys(), Some(goal));
        assert_eq!(r.profile, want, "{tree} {goal:?}: {r:?}");
        assert!(r.reason.contains(why), "{tree} {goal:?}: {}", r.reason);
    }
    // A `preempt=rt` on the command line of a PREEMPT_DYNAMIC kernel (no such model) does not
    // make it a real-time kernel.
    let t = Tree::new("vm");
    t.write("/proc/cmdline", "console=ttyS0 preempt=rt\n");
    assert!(t.sys().system_info().preempt.starts_with("rt "));
    assert_eq!(boot::recommend(&t.sys(), None).profile, "throughput");
}

/// A file even root may not write (an immutable one): refused before anything is written, and
/// not told to run as root when it does.
#[test]
fn a_file_root_may_not_write_is_named_without_a_sudo_hint() {
    if !latlab_testkit::root_or_skip("an immutable file (chattr +i needs root)") {
        return;
    }
    let t = Tree::new("laptop-intel");
    let file = t
        .root
        .join("sys/devices/system/cpu/cpufreq/policy0/scaling_governor");
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(&file)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !chattr("+i") {
        eprintln!("skipped: chattr +i is not available on this file system");
        return;
    }
    /// Takes the flag off however the test ends (the temporary tree is removed after).
    struct Mutable<F: Fn(&str) -> bool>(F);
    impl<F: Fn(&str) -> bool> Drop for Mutable<F> {
        fn drop(&mut self) {
            (self.0)("-i");
        }
    }
    let _mutable = Mutable(chattr);
    let before = snapshot(&t.root);
    let dir = tempfile::tempdir().unwrap();
    let gov = profile_file(dir.path(), "gov", "[cpu.all]\ngovernor = \"performance\"\n");
    let e = latlab_tune::apply(&t.sys(), &builtin(gov.to_str().unwrap()), &t.state, &opts())
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("policy0/scaling_governor is not writable")
            && msg.contains("root may not write it either: an immutable file")
            && !msg.contains("sudo"),
        "{msg}"
    );
    assert!(snapshot(&t.root) == before, "nothing was written");
}
