//! The registry: every check in display order. Each lives in the module of its group and is a
//! pure function of the facts and the target.

use crate::Check;

mod cpu;
mod irq;
mod kernel;
mod limits;
mod system;

/// Every check latlab knows, in the order of the table.
pub static CHECKS: &[Check] = &[
    Check {
        id: "limits.privileges",
        title: "root, CAP_SYS_NICE or an rtprio limit",
        run: limits::privileges,
    },
    Check {
        id: "limits.rtprio",
        title: "real-time priority limit of the user",
        run: limits::rtprio,
    },
    Check {
        id: "limits.memlock",
        title: "locked-memory limit of the user",
        run: limits::memlock,
    },
    Check {
        id: "limits.rt-throttling",
        title: "RT throttling",
        run: limits::rt_throttling,
    },
    Check {
        id: "kernel.preempt",
        title: "preemption model",
        run: kernel::preempt,
    },
    Check {
        id: "kernel.hz",
        title: "scheduler tick rate (CONFIG_HZ)",
        run: kernel::hz,
    },
    Check {
        id: "kernel.hrtimers",
        title: "high-resolution timers active",
        run: kernel::hrtimers,
    },
    Check {
        id: "kernel.nohz-full",
        title: "tickless isolated CPUs (nohz_full)",
        run: kernel::nohz_full,
    },
    Check {
        id: "kernel.rcu-nocbs",
        title: "RCU callbacks offloaded from isolated CPUs",
        run: kernel::rcu_nocbs,
    },
    Check {
        id: "kernel.threadirqs",
        title: "threaded interrupt handlers",
        run: kernel::threadirqs,
    },
    Check {
        id: "kernel.clocksource",
        title: "clock source",
        run: kernel::clocksource,
    },
    Check {
        id: "kernel.mitigations",
        title: "cost of CPU vulnerability mitigations",
        run: kernel::mitigations,
    },
    Check {
        id: "cpu.governor",
        title: "cpufreq governor",
        run: cpu::governor,
    },
    Check {
        id: "cpu.epp",
        title: "energy-performance preference",
        run: cpu::epp,
    },
    Check {
        id: "cpu.turbo",
        title: "turbo / boost",
        run: cpu::turbo,
    },
    Check {
        id: "cpu.idle-depth",
        title: "idle states' exit latency against the bound",
        run: cpu::idle_depth,
    },
    Check {
        id: "cpu.pm-qos",
        title: "PM QoS requests held now",
        run: cpu::pm_qos,
    },
    Check {
        id: "cpu.smt",
        title: "SMT siblings",
        run: cpu::smt,
    },
    Check {
        id: "irq.shared-audio",
        title: "sound card or USB host sharing an IRQ",
        run: irq::shared_audio,
    },
    Check {
        id: "irq.isolated-cpus",
        title: "IRQs on isolated CPUs",
        run: irq::isolated_cpus,
    },
    Check {
        id: "irq.irqbalance",
        title: "irqbalance moving IRQs",
        run: irq::irqbalance,
    },
    Check {
        id: "mem.swappiness",
        title: "swappiness",
        run: system::swappiness,
    },
    Check {
        id: "mem.thp",
        title: "transparent huge pages",
        run: system::thp,
    },
    Check {
        id: "fs.noatime",
        title: "file systems written without noatime",
        run: system::noatime,
    },
    Check {
        id: "virt.vm",
        title: "running in a virtual machine",
        run: system::vm,
    },
    Check {
        id: "bg.rt-tasks",
        title: "other users' tasks at real-time priority",
        run: system::rt_tasks,
    },
    Check {
        id: "bg.daemons",
        title: "tuned or power-profiles-daemon running",
        run: system::daemons,
    },
];

/// `0-3` for a list of CPUs, or `none`.
pub(crate) fn cpus(list: &[u32]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    latlab_model::units::CpuList::from_cpus(list.to_vec()).to_string()
}

/// CPUs online that are not isolated (at least the first one), for housekeeping.
pub(crate) fn housekeeping(f: &crate::Facts) -> Vec<u32> {
    let hk: Vec<u32> = f
        .online
        .cpus()
        .iter()
        .copied()
        .filter(|c| !f.isolated.contains(*c))
        .collect();
    if hk.is_empty() {
        f.online.cpus().iter().take(1).copied().collect()
    } else {
        hk
    }
}
