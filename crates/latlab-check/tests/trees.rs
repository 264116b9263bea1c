//! Every check against every fixture tree and target (tree × check → verdict), variations of
//! single files that must flip one verdict, the fix plan of the badly tuned tree, and the live
//! machine producing a complete report.
#![allow(clippy::unwrap_used)]

use latlab_check::{Facts, Fix, Knob, Report, Target, UserChoice, Verdict, plan_fixes};
use latlab_sys::Sys;
use std::path::Path;

use latlab_testkit::{CHECK_TREES as TREES, check_tree as tree};

fn report_at(root: &Path, target: Target, who: &UserChoice) -> Report {
    let facts = Facts::gather(&Sys::new(root), who);
    latlab_check::run(&facts, target, &[])
}

fn report(name: &str, target: Target) -> Report {
    report_at(tree(name).path(), target, &UserChoice::default())
}

fn code(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Warn => "warn",
        Verdict::Fail => "FAIL",
        Verdict::NotApplicable => "n/a",
    }
}

/// Compare a `check  laptop arm amd vm bad` table with the verdicts, naming every mismatch.
fn expect(target: Target, table: &str) {
    let reports: Vec<Report> = TREES.iter().map(|t| report(t, target)).collect();
    let mut rows = 0;
    let mut wrong = Vec::new();
    for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells.len(), 1 + TREES.len(), "malformed row {line:?}");
        let id = cells[0];
        rows += 1;
        for (i, want) in cells[1..].iter().enumerate() {
            let f = reports[i]
                .finding(id)
                .unwrap_or_else(|| panic!("{id} missing for {}", TREES[i]));
            let got = code(f.outcome.verdict);
            if got != *want {
                wrong.push(format!(
                    "{} {id} on {}: expected {want}, got {got} ({})",
                    target.name(),
                    TREES[i],
                    f.outcome.evidence
                ));
            }
        }
    }
    assert_eq!(
        rows,
        latlab_check::CHECKS.len(),
        "the table must name every registered check"
    );
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn audio_verdicts() {
    expect(
        Target::Audio,
        "
        limits.privileges     pass  pass  pass  pass  warn
        limits.rtprio         pass  pass  pass  pass  FAIL
        limits.memlock        pass  pass  pass  pass  warn
        limits.rt-throttling  pass  pass  pass  pass  pass
        kernel.preempt        warn  pass  pass  FAIL  warn
        kernel.hz             pass  pass  pass  pass  pass
        kernel.hrtimers       pass  pass  pass  pass  pass
        kernel.nohz-full      n/a   pass  n/a   n/a   n/a
        kernel.rcu-nocbs      n/a   pass  n/a   n/a   n/a
        kernel.threadirqs     warn  warn  pass  warn  warn
        kernel.clocksource    pass  pass  pass  pass  FAIL
        kernel.mitigations    warn  pass  warn  pass  warn
        cpu.governor          warn  warn  warn  n/a   FAIL
        cpu.epp               warn  n/a   warn  n/a   FAIL
        cpu.turbo             pass  n/a   pass  n/a   pass
        cpu.idle-depth        FAIL  FAIL  FAIL  pass  FAIL
        cpu.pm-qos            pass  pass  pass  pass  pass
        cpu.smt               pass  n/a   pass  n/a   pass
        irq.shared-audio      pass  pass  pass  n/a   FAIL
        irq.isolated-cpus     n/a   pass  n/a   n/a   n/a
        irq.irqbalance        pass  pass  pass  pass  warn
        mem.swappiness        warn  warn  warn  warn  warn
        mem.thp               pass  pass  pass  pass  warn
        fs.noatime            warn  pass  pass  warn  warn
        virt.vm               pass  pass  pass  warn  pass
        bg.rt-tasks           pass  pass  pass  pass  warn
        bg.daemons            pass  pass  pass  pass  warn
        ",
    );
}

#[test]
fn control_verdicts() {
    expect(
        Target::Control,
        "
        limits.privileges     pass  pass  pass  pass  warn
        limits.rtprio         pass  pass  pass  pass  FAIL
        limits.memlock        pass  pass  pass  pass  warn
        limits.rt-throttling  warn  pass  warn  warn  warn
        kernel.preempt        FAIL  warn  warn  FAIL  FAIL
        kernel.hz             pass  pass  pass  warn  pass
        kernel.hrtimers       pass  pass  pass  pass  pass
        kernel.nohz-full      warn  pass  warn  warn  warn
        kernel.rcu-nocbs      n/a   pass  n/a   n/a   n/a
        kernel.threadirqs     warn  warn  pass  warn  warn
        kernel.clocksource    pass  pass  pass  pass  FAIL
        kernel.mitigations    warn  pass  warn  pass  warn
        cpu.governor          FAIL  FAIL  FAIL  n/a   FAIL
        cpu.epp               warn  n/a   warn  n/a   FAIL
        cpu.turbo             warn  n/a   warn  n/a   warn
        cpu.idle-depth        FAIL  FAIL  FAIL  pass  FAIL
        cpu.pm-qos            pass  pass  pass  pass  pass
        cpu.smt               warn  n/a   warn  n/a   warn
        irq.shared-audio      pass  pass  pass  n/a   warn
        irq.isolated-cpus     n/a   pass  n/a   n/a   n/a
        irq.irqbalance        pass  pass  pass  pass  warn
        mem.swappiness        warn  warn  warn  warn  warn
        mem.thp               pass  pass  pass  pass  FAIL
        fs.noatime            warn  pass  pass  warn  warn
        virt.vm               pass  pass  pass  warn  pass
        bg.rt-tasks           pass  pass  pass  pass  warn
        bg.daemons            pass  pass  pass  pass  warn
        ",
    );
}

#[test]
fn throughput_verdicts() {
    expect(
        Target::Throughput,
        "
        limits.privileges     pass  pass  pass  pass  n/a
        limits.rtprio         n/a   n/a   n/a   n/a   n/a
        limits.memlock        n/a   n/a   n/a   n/a   n/a
        limits.rt-throttling  n/a   n/a   n/a   n/a   n/a
        kernel.preempt        pass  pass  pass  pass  pass
        kernel.hz             pass  pass  pass  pass  pass
        kernel.hrtimers       pass  pass  pass  pass  pass
        kernel.nohz-full      n/a   pass  n/a   n/a   n/a
        kernel.rcu-nocbs      n/a   pass  n/a   n/a   n/a
        kernel.threadirqs     n/a   n/a   pass  n/a   n/a
        kernel.clocksource    pass  pass  pass  pass  warn
        kernel.mitigations    warn  pass  warn  pass  warn
        cpu.governor          pass  pass  pass  n/a   FAIL
        cpu.epp               pass  n/a   pass  n/a   warn
        cpu.turbo             pass  n/a   pass  n/a   pass
        cpu.idle-depth        pass  pass  pass  pass  pass
        cpu.pm-qos            pass  pass  pass  pass  pass
        cpu.smt               pass  n/a   pass  n/a   pass
        irq.shared-audio      n/a   n/a   n/a   n/a   n/a
        irq.isolated-cpus     n/a   pass  n/a   n/a   n/a
        irq.irqbalance        pass  pass  pass  pass  pass
        mem.swappiness        pass  pass  pass  pass  pass
        mem.thp               pass  pass  pass  pass  pass
        fs.noatime            pass  pass  pass  pass  pass
        virt.vm               pass  pass  pass  pass  pass
        bg.rt-tasks           pass  pass  pass  pass  pass
        bg.daemons            pass  pass  pass  pass  warn
        ",
    );
}

#[test]
fn exit_codes_of_the_trees() {
    assert_eq!(report("badly-tuned", Target::Audio).exit_code(), 3);
    assert_eq!(report("arm-board", Target::Throughput).exit_code(), 0);
    assert_eq!(report("laptop-intel", Target::Throughput).exit_code(), 1);
}

#[test]
fn evidence_names_system_paths_not_the_fixture_root() {
    for t in TREES {
        let root = tree(t);
        let root_text = root.path().to_string_lossy().into_owned();
        for target in Target::ALL {
            for f in report_at(root.path(), target, &UserChoice::default()).findings {
                assert!(
                    !f.outcome.evidence.contains(&root_text),
                    "{t} {}: {}",
                    f.id,
                    f.outcome.evidence
                );
                assert!(!f.outcome.evidence.is_empty(), "{t} {}", f.id);
                assert!(
                    !f.outcome.evidence.contains('\n') && !f.outcome.advice.contains('\n'),
                    "{t} {}: one line each",
                    f.id
                );
                if matches!(f.outcome.verdict, Verdict::Warn | Verdict::Fail) {
                    assert!(!f.outcome.advice.is_empty(), "{t} {} has no advice", f.id);
                }
            }
        }
    }
}

#[test]
fn the_bad_tree_says_why() {
    let r = report("badly-tuned", Target::Audio);
    let ev = |id: &str| r.finding(id).unwrap().outcome.evidence.clone();
    assert!(ev("cpu.governor").contains("powersave (intel_cpufreq)"));
    assert!(ev("cpu.idle-depth").contains("C10 (890 µs)"));
    assert!(!ev("cpu.idle-depth").contains("C6"), "C6 is within 100 µs");
    assert!(ev("irq.shared-audio").contains("IRQ 16 ehci_hcd:usb1, snd_hda_intel:card0"));
    assert!(ev("mem.thp").contains("always"));
    assert!(ev("limits.rtprio").contains("RLIMIT_RTPRIO 0"));
    assert!(ev("limits.rtprio").contains("group audio"));
    assert!(ev("bg.rt-tasks").contains("multipathd (pid 530, root, rr 99)"));
    // Real-time threads that are not a process's main thread count too.
    assert!(
        ev("bg.rt-tasks").contains("latlab (pid 760, root, fifo 95, 2 threads)"),
        "{}",
        ev("bg.rt-tasks")
    );
    assert!(ev("bg.daemons").contains("power-profiles-daemon"));
    assert!(ev("fs.noatime").contains("/home (strictatime)"));
    // Root's tasks are the system's, every one counted: none is "the user's own" (it said "0
    // of the user's own" beside root's own tasks), while a user's own are told apart.
    let as_user = |name: &str| {
        let who = UserChoice {
            explicit: Some(name.into()),
            ..UserChoice::default()
        };
        let r = report_at(tree("badly-tuned").path(), Target::Audio, &who);
        r.finding("bg.rt-tasks").unwrap().outcome.evidence.clone()
    };
    let root = as_user("root");
    assert!(!root.contains("user's own"), "{root}");
    assert!(root.ends_with(" kernel threads)"), "{root}");
    let carol = as_user("carol");
    assert!(carol.ends_with(", 0 of the user's own)"), "{carol}");
}

#[test]
fn fix_plan_of_the_bad_tree() {
    let r = report("badly-tuned", Target::Audio);
    let plan = plan_fixes(&r, Verdict::Fail);
    let knobs: Vec<&Knob> = plan.knobs.iter().map(|(k, _)| k).collect();
    assert_eq!(
        knobs,
        vec![
            &Knob::Governor("performance".into()),
            &Knob::Epp("performance".into()),
            &Knob::MaxIdleLatencyUs(100),
        ]
    );
    let boot: Vec<&str> = plan.boot.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(boot, vec!["clocksource=tsc", "snd_hda_intel.enable_msi=1"]);
    assert!(
        plan.manual
            .iter()
            .any(|(m, ids)| m.contains("usermod -aG audio carol") && ids == &["limits.rtprio"])
    );
    // Warnings add their fixes when asked for.
    let all = plan_fixes(&r, Verdict::Warn);
    assert!(all.boot.iter().any(|(b, _)| b == "threadirqs"));
    assert!(all.boot.iter().any(|(b, _)| b == "preempt=full"));
    assert!(
        all.boot
            .iter()
            .any(|(b, _)| b == "transparent_hugepage=madvise")
    );
    // The control target asks for a tighter idle bound and a PREEMPT_RT kernel.
    let c = plan_fixes(&report("badly-tuned", Target::Control), Verdict::Fail);
    assert!(
        c.knobs
            .iter()
            .any(|(k, _)| *k == Knob::MaxIdleLatencyUs(10))
    );
    assert!(c.manual.iter().any(|(m, _)| m.contains("PREEMPT_RT")));
}

#[test]
fn skip_leaves_checks_out() {
    let facts = Facts::gather(&Sys::new(tree("vm").path()), &UserChoice::default());
    let skip = latlab_check::resolve_skip(&["irq", "virt.vm"]).unwrap();
    let r = latlab_check::run(&facts, Target::Audio, &skip);
    assert!(r.finding("virt.vm").is_none());
    assert!(r.findings.iter().all(|f| !f.id.starts_with("irq.")));
    assert_eq!(r.skipped.len(), 4);
    assert_eq!(
        r.findings.len() + r.skipped.len(),
        latlab_check::CHECKS.len()
    );
    let s = r.summary;
    assert_eq!(
        (s.pass + s.warn + s.fail + s.not_applicable) as usize,
        r.findings.len()
    );
}

#[test]
fn json_carries_every_id_and_fix() {
    let r = report("badly-tuned", Target::Audio);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["schema"], "latlab.check");
    assert_eq!(v["target"], "audio");
    assert_eq!(v["bounds"]["idle_exit_latency_us"], 100);
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, latlab_check::ids().collect::<Vec<_>>());
    let gov = &v["findings"][ids.iter().position(|i| *i == "cpu.governor").unwrap()];
    assert_eq!(gov["verdict"], "fail");
    assert_eq!(gov["fixes"][0]["kind"], "knob");
    assert_eq!(gov["fixes"][0]["knob"]["knob"], "governor");
    assert_eq!(gov["fixes"][0]["knob"]["value"], "performance");
    assert!(
        r.finding("kernel.clocksource").unwrap().outcome.fixes
            == vec![Fix::boot("clocksource=tsc")]
    );
}

// ---------------------------------------------------------------------------------------------
// Variations: a copy of a tree with one file changed flips one verdict.

use latlab_testkit::check_tree as copy_tree;

use latlab_testkit::write_file as write;

fn verdict_at(root: &Path, target: Target, id: &str) -> (Verdict, String) {
    let r = report_at(root, target, &UserChoice::default());
    let f = r.finding(id).unwrap();
    (f.outcome.verdict, f.outcome.evidence.clone())
}

#[test]
fn an_irq_on_an_isolated_cpu() {
    let t = copy_tree("arm-board");
    write(t.path(), "proc/irq/36/effective_affinity_list", b"3\n");
    let (v, ev) = verdict_at(t.path(), Target::Audio, "irq.isolated-cpus");
    assert_eq!(v, Verdict::Warn, "{ev}");
    assert!(ev.contains("36 eth0 → 3"), "{ev}");
    assert_eq!(
        verdict_at(t.path(), Target::Control, "irq.isolated-cpus").0,
        Verdict::Fail
    );
    let r = report_at(t.path(), Target::Control, &UserChoice::default());
    assert!(
        r.finding("irq.isolated-cpus")
            .unwrap()
            .outcome
            .fixes
            .contains(&Fix::knob(Knob::IrqsOff("3".into())))
    );
}

#[test]
fn a_pm_qos_request_holds_deep_states_off() {
    let t = copy_tree("laptop-intel");
    write(t.path(), "dev/cpu_dma_latency", 50i32.to_le_bytes());
    let (v, ev) = verdict_at(t.path(), Target::Audio, "cpu.idle-depth");
    assert_eq!(v, Verdict::Pass, "{ev}");
    assert!(ev.contains("held off by a PM QoS request"), "{ev}");
    // A tight request costs throughput.
    write(t.path(), "dev/cpu_dma_latency", 0i32.to_le_bytes());
    assert_eq!(
        verdict_at(t.path(), Target::Throughput, "cpu.pm-qos").0,
        Verdict::Warn
    );
    // Per-CPU resume latency `n/a` means 0 µs: polling only on that CPU.
    let t = copy_tree("laptop-intel");
    for c in 0..4 {
        write(
            t.path(),
            &format!("sys/devices/system/cpu/cpu{c}/power/pm_qos_resume_latency_us"),
            b"n/a\n",
        );
    }
    let (v, ev) = verdict_at(t.path(), Target::Control, "cpu.idle-depth");
    assert_eq!(v, Verdict::Pass, "{ev}");
}

/// The haltpoll governor (the VM tree) never reads `disable` and heeds only a latency limit
/// of 0: a disabled state still counts as allowed, a 50 µs request holds nothing off, and no
/// profile fix that disables states is offered.
#[test]
fn under_haltpoll_a_disabled_state_is_still_entered() {
    let t = copy_tree("vm");
    let state1 =
        |cpu: u32, file: &str| format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state1/{file}");
    for c in 0..2 {
        write(t.path(), &state1(c, "disable"), b"1\n");
    }
    let (v, ev) = verdict_at(t.path(), Target::Audio, "cpu.idle-depth");
    assert_eq!(v, Verdict::Pass, "{ev}");
    assert!(
        ev.starts_with("deepest allowed state haltpoll idle at 1 µs"),
        "{ev}"
    );
    assert!(
        ev.ends_with("the haltpoll governor ignores the disabled states"),
        "{ev}"
    );

    // A halt slower than the bound fails, disabled or not, and a 50 µs request does not help.
    for c in 0..2 {
        write(t.path(), &state1(c, "latency"), b"200\n");
    }
    write(t.path(), "dev/cpu_dma_latency", 50i32.to_le_bytes());
    let r = report_at(t.path(), Target::Audio, &UserChoice::default());
    let o = &r.finding("cpu.idle-depth").unwrap().outcome;
    assert_eq!(o.verdict, Verdict::Fail, "{}", o.evidence);
    assert!(
        o.evidence.contains("haltpoll idle (200 µs) on CPUs 0-1"),
        "{}",
        o.evidence
    );
    assert!(o.fixes.is_empty(), "{:?}", o.fixes);
    // A limit of 0 makes haltpoll poll.
    write(t.path(), "dev/cpu_dma_latency", 0i32.to_le_bytes());
    let (v, ev) = verdict_at(t.path(), Target::Audio, "cpu.idle-depth");
    assert_eq!(v, Verdict::Pass, "{ev}");
    assert!(ev.contains("held off by a PM QoS request"), "{ev}");
}

/// The tree at `root` as a machine of `cpus` CPUs without a cpuidle driver: no CPU has a
/// state, and the driver reads `none`.
fn without_cpuidle(root: &Path, cpus: u32) {
    for c in 0..cpus {
        let dir = root.join(format!("sys/devices/system/cpu/cpu{c}/cpuidle"));
        std::fs::remove_dir_all(dir).unwrap();
    }
    write(
        root,
        "sys/devices/system/cpu/cpuidle/current_driver",
        b"none\n",
    );
}

/// No cpuidle driver (this VM on some boots): no state to limit, said as such, not a pass of
/// "deepest allowed state none".
#[test]
fn with_no_cpuidle_states_idle_depth_does_not_apply() {
    let t = copy_tree("vm");
    without_cpuidle(t.path(), 2);
    let (v, ev) = verdict_at(t.path(), Target::Audio, "cpu.idle-depth");
    let said = "no cpuidle states (cpuidle driver none): the CPUs halt when idle, and there";
    assert!(ev.starts_with(said), "{ev}");
    assert_eq!(v, Verdict::NotApplicable, "{ev}");
}

#[test]
fn an_unreadable_pm_qos_request_is_not_applicable_not_a_pass() {
    let t = copy_tree("laptop-intel");
    std::fs::remove_file(t.path().join("dev/cpu_dma_latency")).unwrap();
    for target in Target::ALL {
        let (v, ev) = verdict_at(t.path(), target, "cpu.pm-qos");
        assert_eq!(v, Verdict::NotApplicable, "{}: {ev}", target.name());
        assert!(
            ev.starts_with(
                "unavailable: /dev/cpu_dma_latency: No such file or directory (os error 2)"
            ),
            "{ev}"
        );
    }
    // Empty (a read that ends early) is unreadable as well.
    write(t.path(), "dev/cpu_dma_latency", b"");
    let (v, ev) = verdict_at(t.path(), Target::Audio, "cpu.pm-qos");
    assert_eq!(v, Verdict::NotApplicable, "{ev}");
    assert!(
        ev.contains(
            "unavailable: /dev/cpu_dma_latency: fewer than the 4 bytes of a request (not the \
             kernel's device)"
        ),
        "{ev}"
    );
    // A tight per-CPU limit still costs throughput, whatever the global request.
    write(
        t.path(),
        "sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us",
        b"n/a\n",
    );
    let (v, ev) = verdict_at(t.path(), Target::Throughput, "cpu.pm-qos");
    assert_eq!(v, Verdict::Warn, "{ev}");
    assert!(ev.contains("cpu1 0 µs (polling only)"), "{ev}");
    // Without cpuidle states no governor reads the limit: it costs nothing, and says so.
    without_cpuidle(t.path(), 4);
    let (v, ev) = verdict_at(t.path(), Target::Throughput, "cpu.pm-qos");
    let said = "cpu1 0 µs (no effect: without cpuidle states the CPU halts when idle)";
    assert!(v != Verdict::Warn && ev.contains(said), "{v:?}: {ev}");
}

#[test]
fn low_resolution_timers() {
    let t = copy_tree("laptop-intel");
    let text = std::fs::read_to_string(t.path().join("proc/timer_list")).unwrap();
    write(
        t.path(),
        "proc/timer_list",
        text.replace(".resolution: 1 nsecs", ".resolution: 4000000 nsecs")
            .as_bytes(),
    );
    let (v, ev) = verdict_at(t.path(), Target::Audio, "kernel.hrtimers");
    assert_eq!(v, Verdict::Fail, "{ev}");
    assert!(ev.contains("4000000 ns"), "{ev}");
}

/// The noatime advice names /etc/fstab only for a file system mounted from it; one mounted
/// elsewhere (a VM's root from its boot arguments) is advised where it is mounted.
#[test]
fn noatime_advice_names_where_the_options_are_set() {
    let t = copy_tree("laptop-intel");
    let advice = |root: &Path| {
        let r = report_at(root, Target::Audio, &UserChoice::default());
        r.finding("fs.noatime").unwrap().outcome.advice.clone()
    };
    let a = advice(t.path());
    assert!(
        a.starts_with("add noatime where / and /boot/efi are mounted (not in /etc/fstab here"),
        "{a}"
    );
    write(
        t.path(),
        "etc/fstab",
        "# <file system> <mount point> <type> <options> <dump> <pass>\n\
         /dev/nvme0n1p2 / ext4 relatime 0 1\n",
    );
    let a = advice(t.path());
    assert!(
        a.starts_with(
            "add noatime to the options of / in /etc/fstab; add noatime where /boot/efi is mounted"
        ),
        "{a}"
    );
}

/// A costly mitigation the kernel reports as "Vulnerable" for want of microcode is counted
/// among the active ones it names.
#[test]
fn a_mitigation_without_its_microcode_is_counted() {
    let t = copy_tree("vm");
    let dir = t.path().join("sys/devices/system/cpu/vulnerabilities");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    for (file, state) in [
        ("meltdown", "Not affected"),
        (
            "spectre_v1",
            "Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
        ),
        ("spec_rstack_overflow", "Vulnerable: Safe RET, no microcode"),
    ] {
        let path = format!("sys/devices/system/cpu/vulnerabilities/{file}");
        write(t.path(), &path, format!("{state}\n").as_bytes());
    }
    let (v, ev) = verdict_at(t.path(), Target::Audio, "kernel.mitigations");
    assert_eq!(v, Verdict::Warn, "{ev}");
    assert_eq!(
        ev,
        "2 mitigations active; costly on each kernel entry: spec_rstack_overflow (Vulnerable: \
         Safe RET, no microcode)"
    );
    // Turning security off is never a fix `--fix --fix-warnings` writes: it is the user's call.
    let r = report_at(t.path(), Target::Audio, &UserChoice::default());
    let plan = plan_fixes(&r, Verdict::Warn);
    assert!(
        plan.boot.iter().all(|(o, _)| !o.contains("mitigations")),
        "{:?}",
        plan.boot
    );
}

#[test]
fn steal_above_the_bound_fails_a_vm() {
    let t = copy_tree("vm");
    let stat = std::fs::read_to_string(t.path().join("proc/stat")).unwrap();
    let first = stat.lines().next().unwrap();
    let mut f: Vec<String> = first.split_whitespace().map(str::to_string).collect();
    f[8] = "60000".into(); // steal, against ~300000 of other time
    let stat = stat.replacen(first, &f.join(" "), 1);
    write(t.path(), "proc/stat", stat.as_bytes());
    let (v, ev) = verdict_at(t.path(), Target::Audio, "virt.vm");
    assert_eq!(v, Verdict::Fail, "{ev}");
    assert_eq!(
        verdict_at(t.path(), Target::Throughput, "virt.vm").0,
        Verdict::Fail
    );
}

#[test]
fn limits_of_the_sudo_caller_come_from_limits_d() {
    // latlab runs as root through sudo for carol: her limits are what pam_limits gives her.
    let t = copy_tree("badly-tuned");
    write(
        t.path(),
        "proc/self/status",
        b"Name:\tlatlab\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n",
    );
    let who = UserChoice {
        explicit: None,
        sudo_user: Some("carol".into()),
    };
    let r = report_at(t.path(), Target::Audio, &who);
    let rt = &r.finding("limits.rtprio").unwrap().outcome;
    assert_eq!(rt.verdict, Verdict::Fail, "{}", rt.evidence);
    assert!(
        rt.evidence
            .contains("limits.conf/limits.d at the next login"),
        "{}",
        rt.evidence
    );
    assert!(
        r.finding("limits.privileges")
            .unwrap()
            .outcome
            .evidence
            .contains("through sudo for carol")
    );
    // Named with --user (no sudo), her limits are checked and said to be hers, not a sudo's.
    let named = UserChoice {
        explicit: Some("carol".into()),
        sudo_user: None,
    };
    let evidence = report_at(t.path(), Target::Audio, &named)
        .finding("limits.privileges")
        .unwrap()
        .outcome
        .evidence
        .clone();
    assert!(
        evidence.contains("running as root (the limits below are carol's, named by --user)"),
        "{evidence}"
    );
    // Once in group audio, Debian's audio.conf gives her rtprio 95 and unlimited memlock.
    write(
        t.path(),
        "etc/group",
        b"root:x:0:\naudio:x:29:carol\ncarol:x:1000:\n",
    );
    let r = report_at(t.path(), Target::Audio, &who);
    assert_eq!(
        r.finding("limits.rtprio").unwrap().outcome.verdict,
        Verdict::Pass
    );
    assert_eq!(
        r.finding("limits.memlock").unwrap().outcome.verdict,
        Verdict::Pass
    );
    // Without sudo, root's own limits: CAP_SYS_NICE makes RLIMIT_RTPRIO moot.
    let r = report_at(t.path(), Target::Audio, &UserChoice::default());
    assert!(
        r.finding("limits.rtprio")
            .unwrap()
            .outcome
            .evidence
            .starts_with("root: root with CAP_SYS_NICE")
    );
}

#[test]
fn a_session_older_than_its_grant_asks_for_a_new_login() {
    let t = copy_tree("badly-tuned");
    write(
        t.path(),
        "etc/group",
        b"root:x:0:\naudio:x:29:carol\ncarol:x:1000:\n",
    );
    let (v, ev) = verdict_at(t.path(), Target::Audio, "limits.rtprio");
    assert_eq!(v, Verdict::Fail);
    assert!(ev.contains("log in again"), "{ev}");
}

#[test]
fn an_explicit_user() {
    let who = UserChoice {
        explicit: Some("alice".into()),
        sudo_user: None,
    };
    let t = copy_tree("laptop-intel");
    // The process runs as root now; alice's limits come from limits.d.
    write(
        t.path(),
        "proc/self/status",
        b"Name:\tlatlab\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n",
    );
    let r = report_at(t.path(), Target::Audio, &who);
    let rt = &r.finding("limits.rtprio").unwrap().outcome;
    assert_eq!(rt.verdict, Verdict::Pass, "{}", rt.evidence);
    assert!(rt.evidence.contains("RLIMIT_RTPRIO 95"), "{}", rt.evidence);
}

#[test]
fn a_missing_file_is_not_applicable_not_a_crash() {
    let t = copy_tree("vm");
    for rel in [
        "proc/interrupts",
        "proc/mounts",
        "proc/self/status",
        "proc/timer_list",
        "proc/config.gz",
        "sys/kernel/mm/transparent_hugepage/enabled",
        "proc/sys/vm/swappiness",
        "sys/devices/system/cpu/cpuidle/current_driver",
    ] {
        std::fs::remove_file(t.path().join(rel)).unwrap();
    }
    let r = report_at(t.path(), Target::Audio, &UserChoice::default());
    assert_eq!(r.findings.len(), latlab_check::CHECKS.len());
    for id in [
        "irq.shared-audio",
        "fs.noatime",
        "limits.privileges",
        "kernel.hz",
        "mem.thp",
        "mem.swappiness",
        "cpu.idle-depth",
    ] {
        let f = r.finding(id).unwrap();
        assert_eq!(
            f.outcome.verdict,
            Verdict::NotApplicable,
            "{id}: {}",
            f.outcome.evidence
        );
        assert!(f.outcome.evidence.starts_with("unavailable: "), "{id}");
    }
    // Empty: no file at all.
    let empty = tempfile::tempdir().unwrap();
    let r = report_at(empty.path(), Target::Control, &UserChoice::default());
    assert_eq!(r.findings.len(), latlab_check::CHECKS.len());
    assert!(
        r.findings
            .iter()
            .all(|f| !f.outcome.evidence.contains("the check itself failed"))
    );
}

#[test]
fn the_live_machine_gives_a_complete_report() {
    let who = UserChoice {
        explicit: None,
        sudo_user: std::env::var("SUDO_USER").ok(),
    };
    let facts = Facts::gather(&Sys::default(), &who);
    for target in Target::ALL {
        let r = latlab_check::run(&facts, target, &[]);
        assert_eq!(
            r.findings.iter().map(|f| f.id).collect::<Vec<_>>(),
            latlab_check::ids().collect::<Vec<_>>()
        );
        for f in &r.findings {
            assert!(
                !f.outcome.evidence.contains("the check itself failed"),
                "{}: {}",
                f.id,
                f.outcome.evidence
            );
        }
        assert!([0, 1, 3].contains(&r.exit_code()));
    }
}
