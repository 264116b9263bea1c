//! `latlab sysinfo` run as a program against the system fixture trees (`--sysroot`): the power
//! meters each machine has, its SMI counts or why there are none, and a kernel configuration that
//! cannot be found said once.
#![allow(clippy::unwrap_used)]

use latlab_testkit::latlab;
use std::path::Path;

use latlab_testkit::machine as fixture;

/// A writable copy of a fixture tree.
fn copy(name: &str) -> tempfile::TempDir {
    latlab_testkit::copy_machine(name, &[])
}

fn sysinfo(root: &Path, json: bool) -> String {
    let mut c = latlab!();
    c.arg("--sysroot").arg(root).arg("sysinfo");
    if json {
        c.arg("--json");
    }
    latlab_testkit::run_stdout(&mut c)
}

/// The rows of one section of the text (title line to blank line).
fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::trim)
        .collect()
}

#[test]
fn power_meters_of_the_laptop_the_arm_board_and_the_vm() {
    let laptop = sysinfo(&fixture("laptop-intel"), false);
    let meters = section(&laptop, "power meters");
    assert_eq!(meters.len(), 5, "{laptop}");
    for zone in ["package-0", "core", "uncore", "dram"] {
        assert!(
            meters
                .iter()
                .any(|m| m.starts_with(&format!("rapl:{zone}(")) && m.ends_with("/energy_uj")),
            "{zone}: {meters:?}"
        );
    }
    assert!(
        meters
            .iter()
            .any(|m| m.starts_with("battery:BAT0") && m.ends_with("BAT0/power_now")),
        "{meters:?}"
    );
    let arm = sysinfo(&fixture("arm-board"), false);
    // No fact left blank: a kernel without NUMA support says why there are no nodes.
    assert!(
        arm.lines().any(|l| l.trim_start().starts_with(
            "numa nodes             unavailable: none listed under /sys/devices/system/node"
        )),
        "{arm}"
    );
    assert!(
        !arm.lines().any(|l| l.trim_start() == "numa nodes"),
        "{arm}"
    );
    let meters = section(&arm, "power meters");
    assert_eq!(meters.len(), 1, "{arm}");
    assert!(
        meters[0].starts_with("hwmon:ina219/power1")
            && meters[0].ends_with("/sys/class/hwmon/hwmon0/power1_input"),
        "{meters:?}"
    );
    let vm = sysinfo(&fixture("vm"), false);
    assert_eq!(
        section(&vm, "power meters"),
        [
            "none found: no RAPL zones in /sys/class/powercap; no perf power PMU; no hwmon power \
          sensors; no battery"
        ]
    );
    // The record of `--json` (the one embedded in every result) lists them too.
    let json: serde_json::Value =
        serde_json::from_str(&sysinfo(&fixture("arm-board"), true)).unwrap();
    assert_eq!(json["power_meters"][0]["name"], "hwmon:ina219/power1");
    let json: serde_json::Value = serde_json::from_str(&sysinfo(&fixture("vm"), true)).unwrap();
    assert!(
        json["power_meters"]["unavailable"]
            .as_str()
            .unwrap()
            .starts_with("none found: ")
    );
}

#[test]
fn smis_beside_the_interrupts_or_why_not() {
    let vm = sysinfo(&fixture("vm"), false);
    let rows = section(&vm, "interrupts and services");
    assert!(
        rows.contains(
            &"SMIs since boot        unavailable: /dev/cpu/0/msr absent (msr module not loaded, \
              or not an x86 CPU)"
        ),
        "{rows:?}"
    );
    let t = copy("laptop-intel");
    for cpu in 0..4u32 {
        let count = 20 + u64::from(cpu);
        latlab_sys::fixture::write_msr(t.path(), cpu, latlab_sys::MSR_SMI_COUNT, count).unwrap();
    }
    let laptop = sysinfo(t.path(), false);
    let rows = section(&laptop, "interrupts and services");
    assert_eq!(rows[0].split_whitespace().next(), Some("irq"), "{rows:?}");
    assert_eq!(
        rows[1], "SMIs since boot        cpu0=20 cpu1=21 cpu2=22 cpu3=23",
        "{rows:?}"
    );
}

#[test]
fn without_a_kernel_release_the_config_files_are_named_once() {
    let t = copy("laptop-intel");
    std::fs::remove_file(t.path().join("proc/sys/kernel/osrelease")).unwrap();
    let out = sysinfo(t.path(), false);
    let kernel = section(&out, "kernel");
    let config: Vec<&&str> = kernel.iter().filter(|l| l.starts_with("config")).collect();
    assert_eq!(
        config,
        [
            &"config                 unavailable: neither /proc/config.gz nor \
           /boot/config-<release> is readable (kernel release unknown: \
           /proc/sys/kernel/osrelease: No such file or directory (os error 2))"
        ],
        "{out}"
    );
    assert_eq!(out.matches("/boot/config-").count(), 1, "{out}");
}

/// SMT siblings and per-CPU resume latencies read as what they mean: one thread per core is
/// "none", and a resume latency file's 0 is no constraint while `n/a` is 0 µs.
#[test]
fn smt_siblings_and_resume_latencies_say_what_they_mean() {
    let laptop = sysinfo(&fixture("laptop-intel"), false);
    assert!(
        laptop.contains("smt siblings           0,2; 1,3\n"),
        "{laptop}"
    );
    // The default IRQ mask is the kernel's hex, beside CPU lists: said so.
    assert!(
        laptop.contains("irq affinity           14 IRQs, default mask f (hex); per CPU:"),
        "{laptop}"
    );
    let vm = copy("vm");
    std::fs::write(
        vm.path()
            .join("sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"),
        "n/a\n",
    )
    .unwrap();
    let text = sysinfo(vm.path(), false);
    assert!(
        text.contains("smt siblings           none (one thread per core)\n"),
        "{text}"
    );
    assert!(
        text.contains("resume latency         cpu0 no constraint, cpu1 0 us (polling only)\n"),
        "{text}"
    );
}

/// A machine without a cpuidle driver (as this one may be): one line saying so, not a bare
/// `cpuN:` row per CPU.
#[test]
fn no_idle_states_are_said_in_one_line() {
    let t = copy("vm");
    let cpu = t.path().join("sys/devices/system/cpu");
    for n in 0..2 {
        std::fs::remove_dir_all(cpu.join(format!("cpu{n}/cpuidle"))).unwrap();
    }
    std::fs::write(cpu.join("cpuidle/current_driver"), "none\n").unwrap();
    let text = sysinfo(t.path(), false);
    let rows = section(&text, "cpuidle (exit latency / target residency)");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows[0].starts_with("driver / governor      none / "),
        "{rows:?}"
    );
    assert_eq!(
        rows[1],
        "no idle states on any CPU (no cpuidle driver: a CPU waits in the architecture's \
         default idle)"
    );
    // A resume latency limit of 0 makes a CPU poll only where a governor reads it.
    std::fs::write(cpu.join("cpu1/power/pm_qos_resume_latency_us"), "n/a\n").unwrap();
    let text = sysinfo(t.path(), false);
    assert!(
        text.contains("cpu1 0 us (no effect: without cpuidle states the CPU halts when idle)\n"),
        "{text}"
    );
    // With states, a row per CPU.
    let text = sysinfo(&fixture("vm"), false);
    let rows = section(&text, "cpuidle (exit latency / target residency)");
    assert!(rows.iter().any(|r| r.starts_with("cpu1: POLL")), "{rows:?}");
}
