//! The full system record (`latlab sysinfo`): what the system is and how it is set. Every field a
//! machine cannot show is [`Field::Unavailable`] with the reason, never a guess.

use serde::{Deserialize, Serialize};

/// A value, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Field<T> {
    // Tried first: a struct value with defaulted fields would otherwise swallow it.
    Unavailable { unavailable: String },
    Value(T),
}

impl<T> Field<T> {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Field::Unavailable {
            unavailable: reason.into(),
        }
    }
    pub fn value(&self) -> Option<&T> {
        match self {
            Field::Value(v) => Some(v),
            Field::Unavailable { .. } => None,
        }
    }
    pub fn reason(&self) -> Option<&str> {
        match self {
            Field::Value(_) => None,
            Field::Unavailable { unavailable } => Some(unavailable),
        }
    }
}

impl<T> Default for Field<T> {
    fn default() -> Self {
        Field::unavailable("not collected")
    }
}

impl<T, E: std::fmt::Display> From<Result<T, E>> for Field<T> {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => Field::Value(v),
            Err(e) => Field::unavailable(e.to_string()),
        }
    }
}

/// Whether a kernel is built with `option` (`PREEMPT_RT`, `PREEMPT_DYNAMIC`): named in its version
/// string, or `CONFIG_<option>` among the preemption options of its configuration.
pub fn kernel_built_with(version: &str, config: Option<&KernelConfig>, option: &str) -> bool {
    version.contains(option)
        || config.is_some_and(|c| {
            c.preempt
                .iter()
                .any(|p| p.strip_prefix("CONFIG_") == Some(option))
        })
}

/// Kernel build options that matter for latency.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelConfig {
    /// Where the configuration was read (`/proc/config.gz`, `/boot/config-<release>`).
    pub source: String,
    pub hz: Option<u32>,
    /// `CONFIG_PREEMPT*` options set to `y`.
    pub preempt: Vec<String>,
    /// `CONFIG_NO_HZ*` options set to `y`.
    pub no_hz: Vec<String>,
    pub rcu_nocb_cpu: bool,
    pub rcu_lazy: bool,
    pub high_res_timers: bool,
    /// Options of interest that this configuration does not set.
    pub missing: Vec<String>,
}

/// Boot options that matter for latency, as given on the kernel command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BootOptions {
    pub preempt: Option<String>,
    pub nohz_full: Option<String>,
    pub isolcpus: Option<String>,
    pub rcu_nocbs: Option<String>,
    pub rcu_lazy: Option<String>,
    pub irqaffinity: Option<String>,
    pub threadirqs: bool,
    pub intel_pstate: Option<String>,
    pub amd_pstate: Option<String>,
    pub idle: Option<String>,
    pub processor_max_cstate: Option<String>,
    pub intel_idle_max_cstate: Option<String>,
    pub mitigations: Option<String>,
    pub nohz: Option<String>,
    pub skew_tick: Option<String>,
}

/// CPUs and their topology.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuTopology {
    pub model: String,
    pub online: String,
    pub possible: String,
    /// Distinct SMT sibling groups, e.g. `["0,2", "1,3"]`.
    pub smt_siblings: Vec<String>,
    pub smt_control: Option<String>,
    /// NUMA node number and its CPU list.
    pub numa_nodes: Vec<(u32, String)>,
    pub isolated: String,
    pub nohz_full: Option<String>,
}

/// Frequency scaling of one CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuFreq {
    pub cpu: u32,
    pub driver: String,
    pub governor: String,
    pub available_governors: Vec<String>,
    pub epp: Option<String>,
    pub available_epp: Vec<String>,
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    pub cur_khz: Option<u64>,
    pub hw_min_khz: Option<u64>,
    pub hw_max_khz: Option<u64>,
    /// Turbo/boost allowed: per-policy `boost`, global `cpufreq/boost`, or intel_pstate `no_turbo`.
    pub boost: Option<bool>,
}

/// One idle state of one CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IdleState {
    pub index: u32,
    pub name: String,
    pub desc: String,
    pub exit_latency_us: u64,
    pub target_residency_us: u64,
    pub disabled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuIdleCpu {
    pub cpu: u32,
    pub states: Vec<IdleState>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuIdle {
    pub driver: String,
    pub governor: String,
    pub available_governors: Vec<String>,
    pub cpus: Vec<CpuIdleCpu>,
}

/// What the inventory records as the hypervisor of a guest whose vendor it could not read.
pub const HYPERVISOR_UNKNOWN: &str = "present (vendor unknown)";

/// The kernel's `major.minor` from a release such as `6.18.44-fc`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod kernel_version_tests {
    use super::kernel_version;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_version(""), None);
        assert!(kernel_version("6.12.1").is_some_and(|v| v >= (6, 12)));
        assert!(kernel_version("6.6.30-rt").is_some_and(|v| v < (6, 12)));
    }
}

impl CpuIdle {
    /// Whether no CPU has a cpuidle state (no driver, or `none`): the CPUs wait in the
    /// architecture's default idle, and no governor reads a PM QoS limit to choose a state.
    pub fn has_no_states(&self) -> bool {
        self.cpus.iter().all(|c| c.states.is_empty())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PmQos {
    /// The current aggregate `/dev/cpu_dma_latency` value in µs ([`PmQos::NO_REQUEST_US`]: no
    /// constraint).
    pub cpu_dma_latency_us: Field<i64>,
    /// Per CPU `pm_qos_resume_latency_us` as the kernel shows it (`0`: none, `n/a`: 0 µs).
    pub resume_latency_us: Vec<(u32, String)>,
}

impl PmQos {
    /// What `/dev/cpu_dma_latency` reads with no request held (the kernel's default, 2 000 s).
    pub const NO_REQUEST_US: i64 = 2_000_000_000;

    /// A `pm_qos_resume_latency_us` file's text as a limit in µs: `n/a` is 0 (polling only), `0`
    /// no limit (`None`), a number that many µs.
    pub fn resume_limit_us(text: &str) -> Option<u64> {
        match text.trim() {
            "n/a" => Some(0),
            "0" => None,
            n => n.parse().ok(),
        }
    }

    /// What a resume latency limit of 0 µs does: the CPU only polls when idle, where cpuidle
    /// has states to choose among; nothing where it has none (`no_states`, see
    /// [`CpuIdle::has_no_states`]): only a cpuidle governor reads the limit.
    pub fn zero_limit_effect(no_states: bool) -> &'static str {
        if no_states {
            "no effect: without cpuidle states the CPU halts when idle"
        } else {
            "polling only"
        }
    }

    /// The text the file takes for a limit (`None`: no limit): the inverse of
    /// [`PmQos::resume_limit_us`].
    pub fn resume_text(limit_us: Option<u64>) -> String {
        match limit_us {
            Some(0) => "n/a".into(),
            Some(n) => n.to_string(),
            None => "0".into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RtThrottling {
    pub runtime_us: Field<i64>,
    pub period_us: Field<i64>,
    /// Per CPU fair-server runtime and period in ns (debugfs), where readable.
    pub fair_server: Field<Vec<(u32, u64, u64)>>,
}

impl RtThrottling {
    /// Whether real-time tasks may use the whole of every period, so that busy ones can starve
    /// everything else: `sched_rt_runtime_us` of -1, or not below `sched_rt_period_us`.
    pub fn off(runtime_us: i64, period_us: i64) -> bool {
        runtime_us < 0 || runtime_us >= period_us
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IrqAffinity {
    pub default_smp_affinity: String,
    pub irqs: u32,
    /// IRQs whose effective affinity includes each CPU.
    pub per_cpu: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Services {
    pub irqbalance: bool,
    pub tuned: bool,
    pub power_profiles_daemon: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Virtualization {
    /// `None` on bare metal (no `hypervisor` CPU flag).
    pub hypervisor: Option<String>,
    /// Steal time since boot, percent of all CPU time.
    pub steal_percent: Option<f64>,
}

/// A power meter the machine has, as the samplers find it (RAPL zone, perf power event, hwmon
/// power sensor, battery).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PowerMeter {
    /// The name the samplers give its series, e.g. `rapl:package-0(intel-rapl:0)`,
    /// `hwmon:ina219/power1`, `battery:BAT0`.
    pub name: String,
    /// What is read: a file such as `/sys/class/powercap/intel-rapl:0/energy_uj`, or a perf event.
    pub source: String,
}
