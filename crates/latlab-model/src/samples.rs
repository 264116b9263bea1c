//! What the system did beside a measurement: idle states, frequency, power, interrupts,
//! utilisation and temperatures, sampled at a fixed period.

use serde::{Deserialize, Serialize};

use crate::system::Field;

/// Per CPU, per period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    pub cpu: usize,
    /// Whether the CPU was online for the whole period (an offline CPU has no other data).
    pub online: bool,
    /// Current frequency in kHz (scaling_cur_freq, or /proc/cpuinfo's "cpu MHz").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_khz: Option<u64>,
    /// Busy share of the period in percent (user+nice+system+irq+softirq+steal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// Interrupts handled in the period (sum of /proc/interrupts columns for this CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqs: Option<u64>,
    /// Softirqs run in the period (sum over vectors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirqs: Option<u64>,
    /// System Management Interrupts in the period (the increase of MSR_SMI_COUNT), where
    /// `/dev/cpu/N/msr` is readable; see [`Samples::smi`] for why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smis: Option<u64>,
    /// Per idle state (same order as [`Samples::idle_states`] for this CPU): time in µs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_time_us: Vec<u64>,
    /// Per idle state: entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_usage: Vec<u64>,
}

/// One sampling period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// End of the period, from the start of measuring.
    pub at_ns: u64,
    /// Length of the period actually covered.
    pub dt_ns: u64,
    pub cpus: Vec<CpuSample>,
    /// Watts per power source (same order as [`Samples::power_sources`]); `None` when a
    /// source gave no reading this period.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_w: Vec<Option<f64>>,
    /// Degrees Celsius per thermal zone (same order as [`Samples::thermal_zones`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temp_c: Vec<Option<f64>>,
}

/// Names of the idle states of one CPU, in the order of its samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuIdleStates {
    pub cpu: usize,
    pub states: Vec<String>,
}

/// A power source and what it measured over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PowerSource {
    /// e.g. `"rapl:package-0"`, `"perf:energy-pkg"`, `"hwmon:ina219/power1"`, `"battery:BAT0"`.
    pub name: String,
    /// Average watts over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_w: Option<f64>,
    /// Energy over the run in joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Counter wrap-arounds seen (RAPL).
    #[serde(default)]
    pub wraps: u64,
}

/// Per CPU over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    pub cpu: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_freq_khz: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqs_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirqs_per_s: Option<f64>,
    /// System Management Interrupts counted over the stretch (not a rate: they are rare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smis: Option<u64>,
    /// Share of the run in each idle state, percent (order of [`Samples::idle_states`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_residency_pct: Vec<f64>,
    /// Entries per second in each idle state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_entries_per_s: Vec<f64>,
}

/// A thermal zone over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThermalSummary {
    pub zone: String,
    pub avg_c: f64,
    pub max_c: f64,
}

/// The sampler's series and its summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    pub period_ns: u64,
    /// CPUs the sampler thread ran on.
    #[serde(default)]
    pub sampler_cpus: Vec<u32>,
    /// CPU time the sampler used, to show its cost.
    #[serde(default)]
    pub sampler_cpu_time_ns: u64,
    pub idle_states: Vec<CpuIdleStates>,
    /// Power sources found, or why there are none.
    pub power_sources: Field<Vec<PowerSource>>,
    pub thermal_zones: Vec<String>,
    /// Why no temperature was sampled, where none was (`None` where a zone was, and in results
    /// from before latlab said why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_unavailable: Option<String>,
    /// Frequency source, or why there is none.
    pub frequency: Field<String>,
    /// Where the SMI counts come from (MSR_SMI_COUNT through `/dev/cpu/N/msr`), or why there
    /// are none; `None` in results from before latlab counted SMIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smi: Option<Field<String>>,
    pub cpus: Vec<CpuSummary>,
    pub thermal: Vec<ThermalSummary>,
    pub series: Vec<Sample>,
}
