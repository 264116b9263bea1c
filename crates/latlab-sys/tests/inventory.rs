//! The system inventory read from fixture trees of four machines (a laptop with intel_pstate and
//! RAPL, an ARM board with cpufreq-dt, an AMD desktop with amd-pstate-epp, and a VM), and from
//! the live system, where every field is either read or says why not.
#![allow(clippy::unwrap_used)]

use latlab_model::system::{CpuIdleCpu, Field};
use latlab_sys::Sys;

fn fixture(name: &str) -> Sys {
    Sys::new(latlab_testkit::machine(name))
}

/// The names of a CPU's idle states, in the kernel's order (state0 first).
fn state_names(cpu: &CpuIdleCpu) -> Vec<&str> {
    cpu.states.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn laptop_with_intel_pstate() {
    let s = fixture("laptop-intel").system_info();
    assert_eq!(s.kernel_release, "6.8.0-45-generic");
    assert_eq!(s.cpus_online, vec![0, 1, 2, 3]);
    assert_eq!(s.preempt, "voluntary (boot log)");
    let cfg = s.kernel_config.value().unwrap();
    assert_eq!(cfg.source, "/boot/config-6.8.0-45-generic");
    assert_eq!(cfg.hz, Some(1000));
    assert!(cfg.rcu_lazy && cfg.rcu_nocb_cpu);
    assert!(cfg.no_hz.contains(&"CONFIG_NO_HZ_FULL".to_string()));
    let freq = s.cpufreq.value().unwrap();
    assert_eq!(freq.len(), 4);
    assert_eq!(freq[0].driver, "intel_pstate");
    assert_eq!(freq[0].governor, "powersave");
    assert_eq!(freq[0].epp.as_deref(), Some("balance_performance"));
    assert!(freq[0].available_epp.contains(&"power".to_string()));
    assert_eq!(freq[0].boost, Some(true), "no_turbo 0 means turbo allowed");
    let idle = s.cpuidle.value().unwrap();
    assert_eq!(idle.driver, "intel_idle");
    let names = state_names(&idle.cpus[0]);
    assert_eq!(names, ["POLL", "C1", "C1E", "C6", "C10"]);
    assert!(idle.cpus[0].states[4].exit_latency_us > idle.cpus[0].states[3].exit_latency_us);
    assert_eq!(s.cpu.smt_siblings, vec!["0,2", "1,3"]);
    assert_eq!(s.boot.mitigations.as_deref(), Some("auto"));
    assert!(s.virtualization.hypervisor.is_none(), "bare metal");
    assert_eq!(s.rt_throttling.runtime_us, Field::Value(950_000));
    // An empty /dev/cpu_dma_latency file cannot give a value: it says why.
    assert!(s.pm_qos.cpu_dma_latency_us.reason().is_some());
}

#[test]
fn arm_board_with_cpufreq_dt_and_isolation() {
    let s = fixture("arm-board").system_info();
    assert_eq!(s.cpu_model, "BCM2835");
    assert_eq!(s.preempt, "full (kernel version)");
    let freq = s.cpufreq.value().unwrap();
    assert!(
        freq.iter()
            .all(|f| f.driver == "cpufreq-dt" && f.governor == "ondemand")
    );
    assert!(
        freq[0]
            .available_governors
            .contains(&"schedutil".to_string())
    );
    assert_eq!(freq[0].epp, None, "cpufreq-dt has no EPP");
    let idle = s.cpuidle.value().unwrap();
    assert_eq!(idle.driver, "psci_idle");
    assert_eq!(idle.cpus[0].states[1].name, "cpu-sleep-0");
    assert_eq!(s.boot.isolcpus.as_deref(), Some("3"));
    assert_eq!(s.boot.nohz_full.as_deref(), Some("3"));
    assert_eq!(s.boot.irqaffinity.as_deref(), Some("0-2"));
    assert_eq!(s.cpu.isolated, "3");
    assert_eq!(s.cpu.nohz_full.as_deref(), Some("3"));
    assert_eq!(s.rt_throttling.runtime_us, Field::Value(-1));
    assert!(s.kernel_config.value().unwrap().hz.is_some());
}

#[test]
fn amd_desktop_with_amd_pstate_epp() {
    let s = fixture("amd-desktop").system_info();
    assert_eq!(s.preempt, "full (sched/preempt)");
    let freq = s.cpufreq.value().unwrap();
    assert_eq!(freq[0].driver, "amd-pstate-epp");
    assert_eq!(freq[0].epp.as_deref(), Some("balance_performance"));
    assert_eq!(freq[0].boost, Some(true));
    let idle = s.cpuidle.value().unwrap();
    assert_eq!(idle.driver, "acpi_idle");
    assert_eq!(idle.cpus[0].states.len(), 4);
    assert!(s.boot.threadirqs);
    assert_eq!(s.boot.preempt.as_deref(), Some("full"));
    assert_eq!(s.boot.amd_pstate.as_deref(), Some("active"));
}

#[test]
fn vm_without_cpufreq_says_why() {
    let s = fixture("vm").system_info();
    let why = s.cpufreq.reason().unwrap();
    assert!(why.contains("no cpufreq driver"), "{why}");
    let idle = s.cpuidle.value().unwrap();
    assert_eq!(idle.driver, "haltpoll");
    let names = state_names(&idle.cpus[0]);
    assert_eq!(names, ["POLL", "haltpoll idle"]);
    let cfg = s.kernel_config.value().unwrap();
    assert_eq!(cfg.source, "/proc/config.gz");
    assert_eq!(cfg.hz, Some(250));
    assert!(cfg.missing.contains(&"CONFIG_NO_HZ_FULL".to_string()));
    assert_eq!(s.preempt, "none (boot log)");
    assert!(
        s.virtualization.hypervisor.is_some(),
        "the hypervisor CPU flag is set"
    );
    let irq = s.irq_affinity.value().unwrap();
    assert!(irq.irqs > 0);
    assert!(!s.vulnerabilities.is_empty());
    assert_eq!(s.transparent_hugepage, Field::Value("madvise".into()));
}

#[test]
fn a_missing_tree_reports_reasons_instead_of_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sys::new(dir.path()).system_info();
    assert!(s.kernel_release.starts_with("unavailable: "));
    assert!(s.kernel_config.reason().is_some());
    assert!(s.cpufreq.reason().is_some());
    assert!(s.cpuidle.reason().is_some());
    assert!(s.rt_throttling.runtime_us.reason().is_some());
    assert!(s.irq_affinity.reason().is_some());
}

/// On the live system every field is read or carries a reason; nothing panics.
#[test]
fn live_system_is_complete() {
    let s = Sys::default().system_info();
    assert!(!s.kernel_release.starts_with("unavailable"));
    assert!(!s.cpus_online.is_empty());
    let json = serde_json::to_value(&s).unwrap();
    for key in [
        "kernel_config",
        "cpufreq",
        "cpuidle",
        "pm_qos",
        "rt_throttling",
        "boot",
        "cpu",
    ] {
        assert!(json.get(key).is_some(), "{key} present");
    }
}

/// A writable copy of a fixture tree.
fn copy(name: &str) -> (tempfile::TempDir, Sys) {
    let dir = latlab_testkit::copy_machine(name, &[]);
    let sys = Sys::new(dir.path());
    (dir, sys)
}

#[test]
fn kernel_config_without_a_release_names_both_files_once() {
    let (dir, sys) = copy("laptop-intel");
    std::fs::remove_file(sys.path("/proc/sys/kernel/osrelease")).unwrap();
    let s = sys.system_info();
    let why = s.kernel_config.reason().unwrap();
    assert_eq!(
        why,
        "neither /proc/config.gz nor /boot/config-<release> is readable (kernel release \
         unknown: /proc/sys/kernel/osrelease: No such file or directory (os error 2))"
    );
    assert_eq!(why.matches("/boot/config-").count(), 1, "{why}");
    assert!(
        !why.contains("unavailable"),
        "no reason nested in a path: {why}"
    );
    assert!(!why.contains(&*dir.path().to_string_lossy()), "{why}");
    // With the release, the /boot file is found as before.
    assert!(copy("laptop-intel").1.kernel_config().value().is_some());
}

#[test]
fn power_meters_of_each_tree() {
    let meters = |tree: &str| fixture(tree).system_info().power_meters.unwrap();
    let laptop = meters("laptop-intel");
    let laptop = laptop.value().unwrap();
    let names: Vec<&str> = laptop.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "rapl:package-0(intel-rapl:0)",
            "rapl:core(intel-rapl:0:0)",
            "rapl:uncore(intel-rapl:0:1)",
            "rapl:dram(intel-rapl:0:2)",
            "battery:BAT0"
        ]
    );
    assert_eq!(
        laptop[0].source,
        "/sys/class/powercap/intel-rapl:0/energy_uj"
    );
    assert_eq!(laptop[4].source, "/sys/class/power_supply/BAT0/power_now");
    let arm = meters("arm-board");
    let arm = arm.value().unwrap();
    assert_eq!(arm.len(), 1, "{arm:?}");
    assert_eq!(arm[0].name, "hwmon:ina219/power1");
    assert_eq!(arm[0].source, "/sys/class/hwmon/hwmon0/power1_input");
    let amd = meters("amd-desktop");
    assert_eq!(
        amd.value().unwrap().len(),
        1,
        "RAPL package-0 only; k10temp has no power"
    );
    let vm = meters("vm");
    let why = vm.reason().unwrap();
    assert_eq!(
        why,
        "none found: no RAPL zones in /sys/class/powercap; no perf power PMU; no hwmon power \
         sensors; no battery"
    );
}

#[test]
fn a_battery_without_power_readings_is_no_meter() {
    let (_dir, sys) = copy("laptop-intel");
    std::fs::remove_file(sys.path("/sys/class/power_supply/BAT0/power_now")).unwrap();
    let m = sys.system_info().power_meters.unwrap();
    assert!(!m.value().unwrap().iter().any(|m| m.name == "battery:BAT0"));
    // current_now × voltage_now stands in for power_now.
    std::fs::write(
        sys.path("/sys/class/power_supply/BAT0/current_now"),
        "621000\n",
    )
    .unwrap();
    let m = sys.system_info().power_meters.unwrap();
    let bat = m
        .value()
        .unwrap()
        .iter()
        .find(|m| m.name == "battery:BAT0")
        .unwrap()
        .clone();
    assert_eq!(
        bat.source,
        "/sys/class/power_supply/BAT0/current_now × voltage_now"
    );
}

#[test]
fn smis_since_boot_where_msr_is_readable_and_why_not_elsewhere() {
    for tree in ["laptop-intel", "arm-board", "amd-desktop", "vm"] {
        let s = fixture(tree).system_info();
        let why = if tree == "amd-desktop" {
            // Intel's register: an AMD CPU has none, whatever /dev/cpu holds.
            "MSR_SMI_COUNT is an Intel register; this CPU is AuthenticAMD"
        } else {
            "/dev/cpu/0/msr absent (msr module not loaded, or not an x86 CPU)"
        };
        assert_eq!(s.smi_count.unwrap().reason(), Some(why), "{tree}");
    }
    let (dir, sys) = copy("laptop-intel");
    for cpu in 0..4 {
        let count = 10 + u64::from(cpu);
        latlab_sys::fixture::write_msr(dir.path(), cpu, latlab_sys::MSR_SMI_COUNT, count).unwrap();
    }
    let s = sys.system_info();
    assert_eq!(
        s.smi_count.unwrap(),
        Field::Value(vec![(0, 10), (1, 11), (2, 12), (3, 13)])
    );
}
