//! The system inventory behind `latlab sysinfo` and the record embedded in every result.
//! Parsing is pure (functions of text); reading goes through [`Sys`].

use crate::{Sys, SysError, cpu_model, preempt_model};
use latlab_model::SystemInfo;
use latlab_model::system::{
    BootOptions, CpuFreq, CpuIdle, CpuIdleCpu, CpuTopology, Field, IdleState, IrqAffinity,
    KernelConfig, PmQos, RtThrottling, Services, Virtualization,
};
use latlab_model::units::CpuList;
use std::io::Read;

/// The host name, as the kernel keeps it.
pub(crate) const HOSTNAME: &str = "/proc/sys/kernel/hostname";
use crate::CPU_SYSFS as CPU;
const OSRELEASE: &str = "/proc/sys/kernel/osrelease";

/// Options of interest in a kernel configuration.
const CONFIG_OF_INTEREST: &[&str] = &[
    "CONFIG_HZ",
    "CONFIG_PREEMPT",
    "CONFIG_PREEMPT_DYNAMIC",
    "CONFIG_PREEMPT_RT",
    "CONFIG_PREEMPT_LAZY",
    "CONFIG_NO_HZ_IDLE",
    "CONFIG_NO_HZ_FULL",
    "CONFIG_RCU_NOCB_CPU",
    "CONFIG_RCU_LAZY",
    "CONFIG_HIGH_RES_TIMERS",
];

/// Parse a kernel `.config`.
pub fn parse_kernel_config(text: &str, source: &str) -> KernelConfig {
    let mut set: Vec<(&str, &str)> = Vec::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=')
            && k.starts_with("CONFIG_")
        {
            set.push((k.trim(), v.trim()));
        }
    }
    let is_y = |name: &str| set.iter().any(|(k, v)| *k == name && *v == "y");
    let names_y = |prefix: &str| -> Vec<String> {
        set.iter()
            .filter(|(k, v)| k.starts_with(prefix) && *v == "y")
            .map(|(k, _)| k.to_string())
            .collect()
    };
    KernelConfig {
        source: source.to_string(),
        hz: set
            .iter()
            .find(|(k, _)| *k == "CONFIG_HZ")
            .and_then(|(_, v)| v.parse().ok()),
        preempt: names_y("CONFIG_PREEMPT"),
        no_hz: names_y("CONFIG_NO_HZ"),
        rcu_nocb_cpu: is_y("CONFIG_RCU_NOCB_CPU"),
        rcu_lazy: is_y("CONFIG_RCU_LAZY"),
        high_res_timers: is_y("CONFIG_HIGH_RES_TIMERS"),
        missing: CONFIG_OF_INTEREST
            .iter()
            .filter(|name| !set.iter().any(|(k, _)| k == *name))
            .map(|s| s.to_string())
            .collect(),
    }
}

/// The words of a kernel command line that the kernel reads itself: those before a lone `--`
/// (the rest are init's).
pub fn kernel_words(cmdline: &str) -> impl Iterator<Item = &str> {
    cmdline.split_whitespace().take_while(|w| *w != "--")
}

/// The value of `key` on a kernel command line as the kernel takes it: the last occurrence wins,
/// and words after `--` are init's (`Some("")` for a bare flag).
pub fn cmdline_value(cmdline: &str, key: &str) -> Option<String> {
    kernel_words(cmdline)
        .filter_map(|w| match w.split_once('=') {
            Some((k, v)) if k == key => Some(v.to_string()),
            None if w == key => Some(String::new()),
            _ => None,
        })
        .last()
}

/// Parse the latency-relevant options of a kernel command line (as [`cmdline_value`] reads
/// each).
pub fn parse_boot_options(cmdline: &str) -> BootOptions {
    let mut b = BootOptions::default();
    for word in kernel_words(cmdline) {
        let (key, value) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (word, None),
        };
        match key {
            "preempt" => b.preempt = value,
            "nohz_full" => b.nohz_full = value,
            "isolcpus" => b.isolcpus = value,
            "rcu_nocbs" => b.rcu_nocbs = value.or(Some(String::new())),
            "rcutree.enable_rcu_lazy" => b.rcu_lazy = value,
            "irqaffinity" => b.irqaffinity = value,
            "threadirqs" => b.threadirqs = true,
            "intel_pstate" => b.intel_pstate = value,
            "amd_pstate" => b.amd_pstate = value,
            "idle" => b.idle = value,
            "processor.max_cstate" => b.processor_max_cstate = value,
            "intel_idle.max_cstate" => b.intel_idle_max_cstate = value,
            "mitigations" => b.mitigations = value,
            "nohz" => b.nohz = value,
            "skew_tick" => b.skew_tick = value,
            _ => {}
        }
    }
    b
}

/// The mode named in the boot log's `Dynamic Preempt: <mode>` line.
pub fn dynamic_preempt_from_log(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        let (_, rest) = l.split_once("Dynamic Preempt: ")?;
        Some(rest.split_whitespace().next()?.to_string())
    })
}

/// Read the kernel log without blocking (`/dev/kmsg` records, or a plain file in a fixture).
fn read_kernel_log(sys: &Sys) -> Result<String, SysError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = sys.path("/dev/kmsg");
    let io = |source| SysError::Io {
        path: path.clone(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(io)?;
    let mut out = String::new();
    let mut buf = vec![0u8; 8192];
    // /dev/kmsg returns one record per read and EAGAIN at the end; a file returns 0 at the end.
    for _ in 0..100_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(io(e)),
        }
    }
    Ok(out)
}

/// The bracketed choice of a sysfs selector such as `always [madvise] never`.
pub fn selected(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')?;
    Some(text[start + 1..start + end].to_string())
}

/// Steal time since boot in percent, from the `cpu ` line of `/proc/stat`.
pub fn steal_percent(stat: &str) -> Option<f64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let steal = *v.get(7)?;
    (total > 0).then(|| steal as f64 * 100.0 / total as f64)
}

impl Sys {
    fn cpu_list_field(&self, rel: &str) -> String {
        match self.read_trim(rel) {
            Ok(s) => s,
            Err(e) => format!("unavailable: {e}"),
        }
    }

    /// The names in a directory, sorted; none where it cannot be read.
    pub fn list_dir(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Numbered entries `prefixN` of a directory, sorted by N.
    pub fn numbered(&self, rel: &str, prefix: &str) -> Vec<u32> {
        let mut n: Vec<u32> = self
            .list_dir(rel)
            .iter()
            .filter_map(|name| name.strip_prefix(prefix)?.parse().ok())
            .collect();
        n.sort_unstable();
        n
    }

    /// A file holding one number, or why it cannot be had.
    fn parsed<T: std::str::FromStr>(&self, rel: &str) -> Field<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.read_trim(rel) {
            Ok(s) => s.parse::<T>().map_err(|e| format!("{rel}: {e}")).into(),
            Err(e) => Field::unavailable(e.to_string()),
        }
    }

    pub(crate) fn read_u64(&self, rel: &str) -> Option<u64> {
        self.read_trim(rel).ok()?.parse().ok()
    }

    /// The kernel configuration from `/proc/config.gz` or `/boot/config-<release>` (the release
    /// from `/proc/sys/kernel/osrelease`).
    pub fn kernel_config(&self) -> Field<KernelConfig> {
        let gz = self.path("/proc/config.gz");
        if let Ok(f) = std::fs::File::open(&gz) {
            let mut text = String::new();
            if flate2::read::GzDecoder::new(f)
                .read_to_string(&mut text)
                .is_ok()
            {
                return Field::Value(parse_kernel_config(&text, "/proc/config.gz"));
            }
        }
        let release = match self.read_trim(OSRELEASE) {
            Ok(r) if !r.is_empty() => r,
            // Without the release there is no /boot file name to try: say so once, in one line.
            failed => {
                let why = match failed {
                    Err(SysError::Io { source, .. }) => format!("{OSRELEASE}: {source}"),
                    Err(SysError::Parse { source, .. }) => format!("{OSRELEASE}: {source}"),
                    Ok(_) => format!("{OSRELEASE} is empty"),
                };
                return Field::unavailable(format!(
                    "neither /proc/config.gz nor /boot/config-<release> is readable (kernel \
                     release unknown: {why})"
                ));
            }
        };
        let boot = format!("/boot/config-{release}");
        match self.read(&boot) {
            Ok(text) => Field::Value(parse_kernel_config(&text, &boot)),
            Err(_) => Field::unavailable(format!(
                "neither /proc/config.gz nor {boot} is readable (CONFIG_IKCONFIG_PROC off and no \
                 config installed)"
            )),
        }
    }

    fn topology(&self, cpuinfo: &str) -> CpuTopology {
        let online = self
            .online_cpus()
            .map(|l| l.cpus().to_vec())
            .unwrap_or_default();
        let mut siblings: Vec<String> = online
            .iter()
            .filter_map(|c| {
                self.read_trim(&format!("{CPU}/cpu{c}/topology/thread_siblings_list"))
                    .ok()
            })
            .collect();
        siblings.sort();
        siblings.dedup();
        CpuTopology {
            model: cpu_model(cpuinfo),
            online: self.cpu_list_field("/sys/devices/system/cpu/online"),
            possible: self.cpu_list_field("/sys/devices/system/cpu/possible"),
            smt_siblings: siblings,
            smt_control: self.read_trim(&format!("{CPU}/smt/control")).ok(),
            numa_nodes: self
                .numbered("/sys/devices/system/node", "node")
                .into_iter()
                .filter_map(|n| {
                    let l = self
                        .read_trim(&format!("/sys/devices/system/node/node{n}/cpulist"))
                        .ok()?;
                    Some((n, l))
                })
                .collect(),
            isolated: self
                .read_trim(&format!("{CPU}/isolated"))
                .unwrap_or_default(),
            nohz_full: self.read_trim(&format!("{CPU}/nohz_full")).ok(),
        }
    }

    /// Per-CPU frequency scaling.
    pub fn cpufreq(&self, cpus: &[u32]) -> Field<Vec<CpuFreq>> {
        let global_boost = self
            .read_trim(&format!("{CPU}/cpufreq/boost"))
            .ok()
            .map(|b| b == "1")
            .or_else(|| {
                self.read_trim(&format!("{CPU}/intel_pstate/no_turbo"))
                    .ok()
                    .map(|b| b == "0")
            });
        let mut out = Vec::new();
        for &c in cpus {
            let base = format!("{CPU}/cpu{c}/cpufreq");
            let Ok(driver) = self.read_trim(&format!("{base}/scaling_driver")) else {
                continue;
            };
            let words = |f: &str| -> Vec<String> {
                self.read_trim(&format!("{base}/{f}"))
                    .map(|s| s.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default()
            };
            out.push(CpuFreq {
                cpu: c,
                driver,
                governor: self
                    .read_trim(&format!("{base}/scaling_governor"))
                    .unwrap_or_default(),
                available_governors: words("scaling_available_governors"),
                epp: self
                    .read_trim(&format!("{base}/energy_performance_preference"))
                    .ok(),
                available_epp: words("energy_performance_available_preferences"),
                min_khz: self.read_u64(&format!("{base}/scaling_min_freq")),
                max_khz: self.read_u64(&format!("{base}/scaling_max_freq")),
                cur_khz: self.read_u64(&format!("{base}/scaling_cur_freq")),
                hw_min_khz: self.read_u64(&format!("{base}/cpuinfo_min_freq")),
                hw_max_khz: self.read_u64(&format!("{base}/cpuinfo_max_freq")),
                boost: self
                    .read_trim(&format!("{base}/boost"))
                    .ok()
                    .map(|b| b == "1")
                    .or(global_boost),
            });
        }
        if out.is_empty() {
            return Field::unavailable(
                "no cpufreq driver: /sys/devices/system/cpu/cpu*/cpufreq is absent (a virtual \
                 machine, or frequency scaling is off)",
            );
        }
        Field::Value(out)
    }

    /// Idle states per CPU.
    pub fn cpuidle(&self, cpus: &[u32]) -> Field<CpuIdle> {
        let driver = match self.read_trim(&format!("{CPU}/cpuidle/current_driver")) {
            Ok(d) => d,
            Err(_) => {
                return Field::unavailable(
                    "no cpuidle driver (/sys/devices/system/cpu/cpuidle/current_driver absent)",
                );
            }
        };
        let governor = self
            .read_trim(&format!("{CPU}/cpuidle/current_governor"))
            .or_else(|_| self.read_trim(&format!("{CPU}/cpuidle/current_governor_ro")))
            .unwrap_or_default();
        let per_cpu = cpus
            .iter()
            .map(|&c| {
                let base = format!("{CPU}/cpu{c}/cpuidle");
                let states = self
                    .numbered(&base, "state")
                    .into_iter()
                    .map(|k| {
                        let s = format!("{base}/state{k}");
                        IdleState {
                            index: k,
                            name: self.read_trim(&format!("{s}/name")).unwrap_or_default(),
                            desc: self.read_trim(&format!("{s}/desc")).unwrap_or_default(),
                            exit_latency_us: self.read_u64(&format!("{s}/latency")).unwrap_or(0),
                            target_residency_us: self
                                .read_u64(&format!("{s}/residency"))
                                .unwrap_or(0),
                            disabled: self
                                .read_trim(&format!("{s}/disable"))
                                .is_ok_and(|d| d == "1"),
                        }
                    })
                    .collect();
                CpuIdleCpu { cpu: c, states }
            })
            .collect();
        Field::Value(CpuIdle {
            driver,
            governor,
            available_governors: self
                .read_trim(&format!("{CPU}/cpuidle/available_governors"))
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            cpus: per_cpu,
        })
    }

    /// The current aggregate PM QoS CPU latency request, in µs.
    /// The reason names the system path, not the root of a fixture tree.
    pub fn cpu_dma_latency(&self) -> Result<i64, String> {
        const DEV: &str = "/dev/cpu_dma_latency";
        let mut f = std::fs::File::open(self.path(DEV)).map_err(|e| format!("{DEV}: {e}"))?;
        let mut b = [0u8; 4];
        f.read_exact(&mut b).map_err(|e| match e.kind() {
            // The device gives 4 bytes; a file of fewer is no such device (a fixture's copy).
            std::io::ErrorKind::UnexpectedEof => {
                format!("{DEV}: fewer than the 4 bytes of a request (not the kernel's device)")
            }
            _ => format!("{DEV}: {e}"),
        })?;
        Ok(i64::from(i32::from_ne_bytes(b)))
    }

    /// What another process's `/dev/cpu_dma_latency` request does to a measurement here, in
    /// words, when one is held below `own_us` (a run's request about to be held) and below every
    /// request this process already holds (a profile's): the CPUs stay out of idle states slower
    /// to leave than it for as long as it is held.
    pub fn foreign_dma_latency(&self, own_us: Option<u32>) -> Option<String> {
        let held = self.cpu_dma_latency().ok()?;
        let own = own_us.into_iter().chain(crate::pm_qos_held_here()).min();
        let below_own = own.is_none_or(|own| held < i64::from(own));
        (held < PmQos::NO_REQUEST_US && below_own).then(|| {
            format!(
                "another process holds a /dev/cpu_dma_latency request of {held} µs: the CPUs \
                 stay out of idle states slower to leave than that while it is held, so this \
                 measures the machine with that request, not without it"
            )
        })
    }

    fn pm_qos(&self, cpus: &[u32]) -> PmQos {
        PmQos {
            cpu_dma_latency_us: self.cpu_dma_latency().into(),
            resume_latency_us: cpus
                .iter()
                .filter_map(|&c| {
                    let v = self
                        .read_trim(&format!("{CPU}/cpu{c}/power/pm_qos_resume_latency_us"))
                        .ok()?;
                    Some((c, v))
                })
                .collect(),
        }
    }

    fn rt_throttling(&self, cpus: &[u32]) -> RtThrottling {
        let fs = "/sys/kernel/debug/sched/fair_server";
        let fair: Result<Vec<(u32, u64, u64)>, String> = if self.exists(fs) {
            cpus.iter()
                .map(|&c| {
                    let get = |f: &str| {
                        self.read_trim(&format!("{fs}/cpu{c}/{f}"))
                            .map_err(|e| e.to_string())
                            .and_then(|s| s.parse::<u64>().map_err(|e| e.to_string()))
                    };
                    Ok((c, get("runtime")?, get("period")?))
                })
                .collect()
        } else {
            Err(
                "debugfs sched/fair_server not readable (debugfs not mounted, or a kernel \
                 without the fair server)"
                    .into(),
            )
        };
        RtThrottling {
            runtime_us: self.parsed("/proc/sys/kernel/sched_rt_runtime_us"),
            period_us: self.parsed("/proc/sys/kernel/sched_rt_period_us"),
            fair_server: fair.into(),
        }
    }

    /// Every IRQ of `/proc/irq`, in order, with the CPUs it is delivered to: its effective
    /// affinity, else the affinity asked for; `None` where neither reads as a CPU list.
    pub fn irq_affinities(&self) -> Vec<(u32, Option<CpuList>)> {
        self.numbered("/proc/irq", "")
            .into_iter()
            .map(|irq| {
                let list = self
                    .read_trim(&format!("/proc/irq/{irq}/effective_affinity_list"))
                    .or_else(|_| self.read_trim(&format!("/proc/irq/{irq}/smp_affinity_list")));
                (irq, list.ok().and_then(|l| CpuList::parse(&l).ok()))
            })
            .collect()
    }

    fn irq_affinity(&self, cpus: &[u32]) -> Field<IrqAffinity> {
        let default = match self.read_trim("/proc/irq/default_smp_affinity") {
            Ok(d) => d,
            Err(e) => return Field::unavailable(e.to_string()),
        };
        let irqs = self.irq_affinities();
        let mut per_cpu: Vec<(u32, u32)> = cpus.iter().map(|&c| (c, 0)).collect();
        for l in irqs.iter().filter_map(|(_, l)| l.as_ref()) {
            for (c, n) in per_cpu.iter_mut() {
                if l.contains(*c) {
                    *n += 1;
                }
            }
        }
        Field::Value(IrqAffinity {
            default_smp_affinity: default,
            irqs: irqs.len() as u32,
            per_cpu,
        })
    }

    /// The command name (`comm`) of every process readable in `/proc`, lowest PID first.
    pub fn process_names(&self) -> Vec<String> {
        self.pids()
            .into_iter()
            .filter_map(|pid| self.read_trim(&format!("/proc/{pid}/comm")).ok())
            .collect()
    }

    /// The processes under `/proc`, by PID, lowest first (empty where `/proc` is unreadable).
    pub fn pids(&self) -> Vec<u32> {
        self.numbered("/proc", "")
    }

    fn services(&self) -> Services {
        let mut s = Services::default();
        for comm in self.process_names() {
            match comm.as_str() {
                "irqbalance" => s.irqbalance = true,
                "tuned" => s.tuned = true,
                c if c.starts_with("power-profiles") => s.power_profiles_daemon = true,
                _ => {}
            }
        }
        s
    }

    fn virtualization(&self, cpuinfo: &str) -> Virtualization {
        let flagged = cpuinfo.lines().any(|l| {
            (l.starts_with("flags") || l.starts_with("Features"))
                && l.split_whitespace().any(|w| w == "hypervisor")
        });
        let hypervisor = flagged.then(|| {
            self.read_trim("/sys/hypervisor/type")
                .or_else(|_| self.read_trim("/sys/class/dmi/id/product_name"))
                .ok()
                .or_else(|| self.is_live().then(cpuid_hypervisor).flatten())
                .unwrap_or_else(|| latlab_model::system::HYPERVISOR_UNKNOWN.into())
        });
        Virtualization {
            hypervisor,
            steal_percent: self.read("/proc/stat").ok().and_then(|s| steal_percent(&s)),
        }
    }

    /// `Max locked memory` of latlab's own process.
    fn memlock_limit(&self) -> Field<String> {
        match self.read("/proc/self/limits") {
            Ok(text) => crate::procfs::limit(&text, "Max locked memory")
                .map(|(soft, hard, unit)| {
                    Field::Value(format!("soft {soft} hard {hard} {unit}").trim_end().into())
                })
                .unwrap_or_else(|| Field::unavailable("no Max locked memory line")),
            Err(e) => Field::unavailable(e.to_string()),
        }
    }

    /// The full system record.
    pub fn system_info(&self) -> SystemInfo {
        let or_reason = |r: Result<String, SysError>| match r {
            Ok(s) => s,
            Err(e) => format!("unavailable: {e}"),
        };
        let version = or_reason(self.read_trim("/proc/sys/kernel/version"));
        let release = or_reason(self.read_trim(OSRELEASE));
        let cmdline = or_reason(self.read_trim("/proc/cmdline"));
        let cpuinfo = self.read("/proc/cpuinfo").unwrap_or_default();
        let online: Vec<u32> = self
            .online_cpus()
            .map(|l| l.cpus().to_vec())
            .unwrap_or_default();
        let debugfs = self.read_trim("/sys/kernel/debug/sched/preempt").ok();
        let kernel_config = self.kernel_config();
        let mut preempt = preempt_model(
            &version,
            kernel_config.value(),
            debugfs.as_deref(),
            &cmdline,
        );
        if preempt.starts_with("dynamic")
            && let Some(mode) = read_kernel_log(self)
                .ok()
                .and_then(|log| dynamic_preempt_from_log(&log))
        {
            preempt = format!("{mode} (boot log)");
        }
        SystemInfo {
            hostname: or_reason(self.read_trim(HOSTNAME)),
            machine: or_reason(self.read_trim("/proc/sys/kernel/arch")),
            cpu_model: cpu_model(&cpuinfo),
            cpus_possible: self.possible_cpus().map(|l| l.len() as u32).unwrap_or(0),
            preempt,
            clocksource: or_reason(
                self.read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            ),
            kernel_config,
            boot: parse_boot_options(&cmdline),
            cpu: self.topology(&cpuinfo),
            cpufreq: self.cpufreq(&online),
            cpuidle: self.cpuidle(&online),
            pm_qos: self.pm_qos(&online),
            rt_throttling: self.rt_throttling(&online),
            timer_migration: self.parsed("/proc/sys/kernel/timer_migration"),
            irq_affinity: self.irq_affinity(&online),
            services: self.services(),
            virtualization: self.virtualization(&cpuinfo),
            memlock_limit: self.memlock_limit(),
            transparent_hugepage: match self
                .read_trim("/sys/kernel/mm/transparent_hugepage/enabled")
            {
                Ok(s) => selected(&s)
                    .ok_or_else(|| format!("no selection in {s:?}"))
                    .into(),
                Err(e) => Field::unavailable(e.to_string()),
            },
            swappiness: self.parsed("/proc/sys/vm/swappiness"),
            vulnerabilities: self
                .list_dir(&format!("{CPU}/vulnerabilities"))
                .into_iter()
                .filter_map(|name| {
                    let v = self
                        .read_trim(&format!("{CPU}/vulnerabilities/{name}"))
                        .ok()?;
                    Some((name, v))
                })
                .collect(),
            power_meters: Some(crate::sample::power_meters(self)),
            smi_count: Some(self.smi_counts(&online).into()),
            cpus_online: online,
            kernel_release: release,
            kernel_version: version,
            cmdline,
        }
    }
}

/// The hypervisor's vendor from CPUID leaf 0x40000000 (x86 only; live system only).
fn cpuid_hypervisor() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID is available on every x86_64 CPU; the leaf is informational.
        let r = std::arch::x86_64::__cpuid(0x4000_0000);
        let mut bytes = Vec::with_capacity(12);
        for w in [r.ebx, r.ecx, r.edx] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        let s = String::from_utf8_lossy(&bytes)
            .trim_matches(char::from(0))
            .trim()
            .to_string();
        return (!s.is_empty()).then(|| hypervisor_name(&s));
    }
    #[allow(unreachable_code)]
    None
}

/// The name of the hypervisor a CPUID vendor signature stands for (`KVMKVMKVM` is KVM, which
/// QEMU, Firecracker and cloud hypervisors all show); an unknown one as it is.
fn hypervisor_name(signature: &str) -> String {
    let name = match signature {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU (TCG, no acceleration)",
        "VBoxVBoxVBox" => "VirtualBox",
        "ACRNACRNACRN" => "ACRN",
        "bhyve bhyve" => "bhyve",
        "Jailhouse" => "Jailhouse",
        "QNXQVMBSQG" => "QNX hypervisor",
        other => other,
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A request another process holds below latlab's own (or with none of latlab's) is said;
    /// none held (the kernel's default) or one above latlab's own is not.
    #[test]
    fn a_dma_latency_request_of_another_process_is_said() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dev")).unwrap();
        let sys = Sys::new(dir.path());
        let hold = |us: i32| {
            std::fs::write(dir.path().join("dev/cpu_dma_latency"), us.to_ne_bytes()).unwrap();
        };
        hold(2_000_000_000);
        assert_eq!(sys.foreign_dma_latency(None), None);
        hold(0);
        let said = sys.foreign_dma_latency(None).unwrap();
        assert!(
            said.starts_with("another process holds a /dev/cpu_dma_latency request of 0 µs"),
            "{said}"
        );
        assert!(sys.foreign_dma_latency(Some(10)).is_some());
        hold(20);
        assert_eq!(sys.foreign_dma_latency(Some(10)), None);
        // A request this process holds (a profile's, held before the measurement reads the
        // device) is not another process's; once released, the same value is.
        hold(2_000_000_000);
        let own = sys.hold_pm_qos(0).unwrap();
        assert_eq!(sys.foreign_dma_latency(None), None);
        drop(own);
        assert!(sys.foreign_dma_latency(None).is_some());
        std::fs::remove_file(dir.path().join("dev/cpu_dma_latency")).unwrap();
        assert_eq!(sys.foreign_dma_latency(None), None);
    }

    #[test]
    fn a_hypervisor_signature_is_named() {
        assert_eq!(hypervisor_name("KVMKVMKVM"), "KVM");
        assert_eq!(hypervisor_name("Microsoft Hv"), "Hyper-V");
        assert_eq!(hypervisor_name("SomethingNew"), "SomethingNew");
    }

    #[test]
    fn kernel_config_options_and_what_is_missing() {
        let c = parse_kernel_config(
            "CONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n\
             # CONFIG_PREEMPT_RT is not set\nCONFIG_NO_HZ_IDLE=y\nCONFIG_RCU_NOCB_CPU=y\n\
             CONFIG_RCU_LAZY=y\nCONFIG_HIGH_RES_TIMERS=y\n",
            "/proc/config.gz",
        );
        assert_eq!(c.hz, Some(250));
        assert_eq!(
            c.preempt,
            vec!["CONFIG_PREEMPT_DYNAMIC", "CONFIG_PREEMPT_NONE"]
        );
        assert_eq!(c.no_hz, vec!["CONFIG_NO_HZ_IDLE"]);
        assert!(c.rcu_nocb_cpu && c.rcu_lazy && c.high_res_timers);
        assert!(c.missing.contains(&"CONFIG_NO_HZ_FULL".to_string()));
        assert!(c.missing.contains(&"CONFIG_PREEMPT_RT".to_string()));
        assert!(!c.missing.contains(&"CONFIG_HZ".to_string()));
    }

    #[test]
    fn boot_options() {
        let b = parse_boot_options(
            "BOOT_IMAGE=/vmlinuz ro isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 \
             threadirqs preempt=full rcutree.enable_rcu_lazy=1 intel_idle.max_cstate=1 idle=poll",
        );
        assert_eq!(b.isolcpus.as_deref(), Some("managed_irq,domain,2-3"));
        assert_eq!(b.nohz_full.as_deref(), Some("2-3"));
        assert_eq!(b.rcu_nocbs.as_deref(), Some("2-3"));
        assert!(b.threadirqs);
        assert_eq!(b.preempt.as_deref(), Some("full"));
        assert_eq!(b.rcu_lazy.as_deref(), Some("1"));
        assert_eq!(b.intel_idle_max_cstate.as_deref(), Some("1"));
        assert_eq!(b.idle.as_deref(), Some("poll"));
        assert_eq!(b.mitigations, None);
        assert!(!parse_boot_options("quiet").threadirqs);
        // What follows `--` is init's, not the kernel's.
        let b = parse_boot_options("quiet nohz_full=1 -- nohz_full=2-3 threadirqs");
        assert_eq!(b.nohz_full.as_deref(), Some("1"));
        assert!(!b.threadirqs);
    }

    #[test]
    fn command_line_values_as_the_kernel_takes_them() {
        let c =
            "BOOT_IMAGE=/v ro preempt=none quiet preempt=full threadirqs -- init=x threadirqs=9";
        assert_eq!(cmdline_value(c, "preempt").as_deref(), Some("full"));
        assert_eq!(cmdline_value(c, "threadirqs").as_deref(), Some(""));
        assert_eq!(cmdline_value(c, "init"), None);
        assert_eq!(cmdline_value(c, "nohz_full"), None);
        assert_eq!(cmdline_value("quiet --", "quiet").as_deref(), Some(""));
    }

    #[test]
    fn small_parsers() {
        assert_eq!(
            dynamic_preempt_from_log("6,123,456,-;Dynamic Preempt: voluntary\n"),
            Some("voluntary".into())
        );
        assert_eq!(
            dynamic_preempt_from_log("[    0.233187] Dynamic Preempt: none\n"),
            Some("none".into())
        );
        assert_eq!(dynamic_preempt_from_log("nothing"), None);
        assert_eq!(selected("always [madvise] never"), Some("madvise".into()));
        assert_eq!(selected("none"), None);
        let stat = "cpu  100 0 100 700 0 0 0 100 0 0\ncpu0 1 2 3\n";
        assert!((steal_percent(stat).unwrap() - 10.0).abs() < 1e-9);
    }
}
