//! `latlab sysinfo` as a text table: one section per subsystem, one `key: value` line per fact,
//! "unavailable: reason" where the machine cannot show a fact.

use latlab_model::SystemInfo;
use latlab_model::system::Field;
use std::fmt::Write;

fn field<T>(f: &Field<T>, show: impl Fn(&T) -> String) -> String {
    match f {
        Field::Value(v) => show(v),
        Field::Unavailable { unavailable } => format!("unavailable: {unavailable}"),
    }
}

fn opt(o: &Option<String>) -> String {
    o.clone().unwrap_or_else(|| "-".into())
}

fn khz(v: Option<u64>) -> String {
    v.map(|k| format!("{:.0} MHz", k as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

/// One section: its title, then one `key value` line per row, then a blank line. Values line
/// up at column 25, or one past the section's longest key.
fn section(out: &mut String, title: &str, rows: Vec<(&str, String)>) {
    let _ = writeln!(out, "{title}");
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .fold(22, usize::max);
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<width$} {v}");
    }
    out.push('\n');
}

/// Render the system record as text.
pub fn sysinfo_text(s: &SystemInfo) -> String {
    let mut out = String::new();
    kernel_and_boot(&mut out, s);
    cpus(&mut out, s);
    limits(&mut out, s);
    interrupts_and_more(&mut out, s);
    out
}

/// The system record of runs imported from a format that keeps at most the host and kernel
/// names: those it has, and that the rest is not recorded (rather than empty rows, and
/// services and a hypervisor said absent).
pub fn names_only_text(s: &SystemInfo) -> String {
    let mut out = String::new();
    let rows: Vec<(&str, String)> = [
        ("host", &s.hostname),
        ("release", &s.kernel_release),
        ("version", &s.kernel_version),
        ("machine", &s.machine),
    ]
    .into_iter()
    .filter(|(_, v)| !v.trim().is_empty())
    .map(|(k, v)| (k, v.clone()))
    .chain([(
        "the rest",
        "not recorded (imported from a format that does not keep it)".to_string(),
    )])
    .collect();
    section(&mut out, "system", rows);
    out
}

/// The kernel (release, preemption, tick, configuration) and its boot options.
fn kernel_and_boot(out: &mut String, s: &SystemInfo) {
    let mut kernel_rows = vec![
        ("release", s.kernel_release.clone()),
        ("version", s.kernel_version.clone()),
        ("machine", s.machine.clone()),
        ("preempt model", s.preempt.clone()),
        ("clocksource", s.clocksource.clone()),
        (
            "config",
            field(&s.kernel_config, |c| {
                format!(
                    "{}: HZ {}, {}, {}, RCU_NOCB_CPU {}, RCU_LAZY {}, HIGH_RES_TIMERS {}",
                    c.source,
                    c.hz.map(|h| h.to_string()).unwrap_or_else(|| "?".into()),
                    if c.preempt.is_empty() {
                        "no CONFIG_PREEMPT*".into()
                    } else {
                        c.preempt.join(" ")
                    },
                    if c.no_hz.is_empty() {
                        "no CONFIG_NO_HZ*".into()
                    } else {
                        c.no_hz.join(" ")
                    },
                    yn(c.rcu_nocb_cpu),
                    yn(c.rcu_lazy),
                    yn(c.high_res_timers)
                )
            }),
        ),
    ];
    // An unreadable configuration is said once, on the config line.
    if let Some(c) = s.kernel_config.value() {
        kernel_rows.push((
            "config not set",
            if c.missing.is_empty() {
                "-".into()
            } else {
                c.missing.join(" ")
            },
        ));
    }
    kernel_rows.push(("command line", s.cmdline.clone()));
    section(out, "kernel", kernel_rows);
    let b = &s.boot;
    section(
        out,
        "boot options",
        vec![
            ("preempt=", opt(&b.preempt)),
            ("nohz_full=", opt(&b.nohz_full)),
            ("isolcpus=", opt(&b.isolcpus)),
            ("rcu_nocbs=", opt(&b.rcu_nocbs)),
            ("rcutree.enable_rcu_lazy=", opt(&b.rcu_lazy)),
            ("irqaffinity=", opt(&b.irqaffinity)),
            ("threadirqs", yn(b.threadirqs).into()),
            ("intel_pstate=", opt(&b.intel_pstate)),
            ("amd_pstate=", opt(&b.amd_pstate)),
            ("idle=", opt(&b.idle)),
            ("processor.max_cstate=", opt(&b.processor_max_cstate)),
            ("intel_idle.max_cstate=", opt(&b.intel_idle_max_cstate)),
            ("mitigations=", opt(&b.mitigations)),
        ],
    );
}

/// The CPUs, cpufreq and cpuidle.
fn cpus(out: &mut String, s: &SystemInfo) {
    let c = &s.cpu;
    section(
        out,
        "cpus",
        vec![
            ("model", c.model.clone()),
            ("online", c.online.clone()),
            ("possible", c.possible.clone()),
            (
                "smt siblings",
                if c.smt_siblings.is_empty() {
                    "-".into()
                } else if c.smt_siblings.iter().all(|g| !g.contains([',', '-'])) {
                    // Every CPU a core of its own: no CPU shares its core.
                    "none (one thread per core)".into()
                } else {
                    c.smt_siblings.join("; ")
                },
            ),
            ("smt control", opt(&c.smt_control)),
            (
                "numa nodes",
                if c.numa_nodes.is_empty() {
                    // A kernel built without NUMA has no /sys/devices/system/node.
                    "unavailable: none listed under /sys/devices/system/node (a kernel \
                     without NUMA support lists none)"
                        .into()
                } else {
                    c.numa_nodes
                        .iter()
                        .map(|(n, l)| format!("node{n}: {l}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ),
            (
                "isolated",
                if c.isolated.is_empty() {
                    "none".into()
                } else {
                    c.isolated.clone()
                },
            ),
            ("nohz_full", opt(&c.nohz_full)),
        ],
    );
    match &s.cpufreq {
        Field::Value(list) => {
            let rows = list
                .iter()
                .map(|f| {
                    (
                        "",
                        format!(
                            "cpu{}: {} {} (of {}), EPP {}, {}–{} now {}, boost {}",
                            f.cpu,
                            f.driver,
                            f.governor,
                            f.available_governors.join(" "),
                            f.epp.clone().unwrap_or_else(|| "-".into()),
                            khz(f.min_khz),
                            khz(f.max_khz),
                            khz(f.cur_khz),
                            f.boost.map(yn).unwrap_or("-")
                        ),
                    )
                })
                .collect();
            section(out, "cpufreq", rows);
        }
        Field::Unavailable { unavailable } => {
            section(
                out,
                "cpufreq",
                vec![("", format!("unavailable: {unavailable}"))],
            );
        }
    }
    match &s.cpuidle {
        Field::Value(idle) => {
            let mut rows = vec![(
                "driver / governor",
                format!(
                    "{} / {} (available: {})",
                    idle.driver,
                    idle.governor,
                    idle.available_governors.join(" ")
                ),
            )];
            if idle.has_no_states() {
                rows.push((
                    "",
                    "no idle states on any CPU (no cpuidle driver: a CPU waits in the \
                     architecture's default idle)"
                        .into(),
                ));
            }
            for cpu in idle.cpus.iter().filter(|c| !c.states.is_empty()) {
                let states = cpu
                    .states
                    .iter()
                    .map(|st| {
                        format!(
                            "{} {}/{}us{}",
                            st.name,
                            st.exit_latency_us,
                            st.target_residency_us,
                            if st.disabled { " (disabled)" } else { "" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                rows.push(("", format!("cpu{}: {states}", cpu.cpu)));
            }
            section(out, "cpuidle (exit latency / target residency)", rows);
        }
        Field::Unavailable { unavailable } => {
            section(
                out,
                "cpuidle",
                vec![("", format!("unavailable: {unavailable}"))],
            );
        }
    }
}

/// PM QoS, power meters, RT throttling and the process limits.
fn limits(out: &mut String, s: &SystemInfo) {
    let q = &s.pm_qos;
    let no_states = s.cpuidle.value().is_some_and(|i| i.has_no_states());
    section(
        out,
        "pm qos",
        vec![
            (
                "cpu_dma_latency",
                field(&q.cpu_dma_latency_us, |v| {
                    if *v >= latlab_model::system::PmQos::NO_REQUEST_US {
                        format!("{v} us (no constraint)")
                    } else {
                        format!("{v} us (held by some process)")
                    }
                }),
            ),
            (
                "resume latency",
                q.resume_latency_us
                    .iter()
                    .map(|(c, v)| {
                        // The file's 0 means no limit, and `n/a` a limit of 0.
                        let limit = match latlab_model::system::PmQos::resume_limit_us(v) {
                            None => "no constraint".to_string(),
                            Some(0) => format!(
                                "0 us ({})",
                                latlab_model::system::PmQos::zero_limit_effect(no_states)
                            ),
                            Some(us) => format!("{us} us"),
                        };
                        format!("cpu{c} {limit}")
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ],
    );
    // Records from before latlab listed power meters have none to show.
    match &s.power_meters {
        Some(Field::Value(meters)) => {
            let rows = meters
                .iter()
                .map(|m| ("", format!("{:<30} {}", m.name, m.source)))
                .collect();
            section(out, "power meters", rows);
        }
        // The reason says "none found: " and what was looked at.
        Some(Field::Unavailable { unavailable }) => {
            section(out, "power meters", vec![("", unavailable.clone())]);
        }
        None => {}
    }
    let rt = &s.rt_throttling;
    section(
        out,
        "real time",
        vec![
            (
                "sched_rt_runtime_us",
                field(&rt.runtime_us, |v| v.to_string()),
            ),
            (
                "sched_rt_period_us",
                field(&rt.period_us, |v| v.to_string()),
            ),
            (
                "fair server",
                field(&rt.fair_server, |v| {
                    v.iter()
                        .map(|(c, r, p)| format!("cpu{c} {r}/{p} ns"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }),
            ),
            (
                "timer_migration",
                field(&s.timer_migration, |v| v.to_string()),
            ),
            ("memlock limit", field(&s.memlock_limit, |v| v.clone())),
        ],
    );
}

/// Interrupts and services, clocks and virtualization, CPU vulnerabilities.
fn interrupts_and_more(out: &mut String, s: &SystemInfo) {
    let mut irq_rows = vec![(
        "irq affinity",
        field(&s.irq_affinity, |a| {
            format!(
                "{} IRQs, default mask {} (hex); per CPU: {}",
                a.irqs,
                a.default_smp_affinity,
                a.per_cpu
                    .iter()
                    .map(|(c, n)| format!("cpu{c}={n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        }),
    )];
    // Records from before latlab read MSR_SMI_COUNT have no row.
    if let Some(smi) = &s.smi_count {
        irq_rows.push((
            "SMIs since boot",
            field(smi, |v| {
                v.iter()
                    .map(|(c, n)| format!("cpu{c}={n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            }),
        ));
    }
    irq_rows.extend([
        ("irqbalance running", yn(s.services.irqbalance).into()),
        ("tuned running", yn(s.services.tuned).into()),
        (
            "power-profiles-daemon",
            yn(s.services.power_profiles_daemon).into(),
        ),
    ]);
    section(out, "interrupts and services", irq_rows);
    section(
        out,
        "memory and virtualization",
        vec![
            (
                "transparent hugepage",
                field(&s.transparent_hugepage, |v| v.clone()),
            ),
            ("swappiness", field(&s.swappiness, |v| v.to_string())),
            (
                "hypervisor",
                s.virtualization
                    .hypervisor
                    .clone()
                    .unwrap_or_else(|| "none (bare metal)".into()),
            ),
            (
                "steal since boot",
                s.virtualization
                    .steal_percent
                    .map(|p| format!("{p:.2} %"))
                    .unwrap_or_else(|| "-".into()),
            ),
        ],
    );
    let vulns: Vec<(&str, String)> = s
        .vulnerabilities
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    if !vulns.is_empty() {
        section(out, "cpu vulnerabilities", vulns);
    }
}

fn yn(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_model::system::PowerMeter;

    #[test]
    fn power_meters_smis_and_an_unreadable_config_said_once() {
        let old = sysinfo_text(&SystemInfo::default());
        assert!(
            !old.contains("power meters") && !old.contains("SMIs"),
            "{old}"
        );
        let s = SystemInfo {
            kernel_config: Field::unavailable(
                "neither /proc/config.gz nor /boot/config-<release> is readable",
            ),
            power_meters: Some(Field::Value(vec![PowerMeter {
                name: "hwmon:ina219/power1".into(),
                source: "/sys/class/hwmon/hwmon0/power1_input".into(),
            }])),
            smi_count: Some(Field::Value(vec![(0, 4), (1, 5)])),
            ..SystemInfo::default()
        };
        let t = sysinfo_text(&s);
        assert_eq!(t.matches("/boot/config-<release>").count(), 1, "{t}");
        assert!(!t.contains("config not set"), "{t}");
        assert!(
            t.contains(
                "power meters\n                         hwmon:ina219/power1            \
                 /sys/class/hwmon/hwmon0/power1_input\n"
            ),
            "{t}"
        );
        assert!(
            t.contains("  SMIs since boot        cpu0=4 cpu1=5\n"),
            "{t}"
        );
        let none = SystemInfo {
            power_meters: Some(Field::unavailable("none found: no battery")),
            smi_count: Some(Field::unavailable("/dev/cpu/0/msr absent")),
            ..SystemInfo::default()
        };
        let t = sysinfo_text(&none);
        assert!(
            t.contains("power meters\n                         none found: no battery\n"),
            "{t}"
        );
        assert!(
            t.contains("  SMIs since boot        unavailable: /dev/cpu/0/msr absent\n"),
            "{t}"
        );
    }
}
