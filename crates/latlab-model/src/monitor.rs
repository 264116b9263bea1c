//! The monitor's data: one CPU's closed window, a set of them over every measured CPU (what the
//! store writes in one transaction), the spikes kept with a window, and a series' configuration.
//! Pure types: the daemon fills them, the store keeps them, the web server reads them.

use crate::samples::{CpuSummary, PowerSource, ThermalSummary};
use crate::{MeasureConfig, SystemInfo};
use latlab_hist::Histogram;
use serde::{Deserialize, Serialize};

/// A sample above the spike threshold within a monitoring window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonitorSpike {
    pub at_unix_ns: u64,
    pub value_ns: u64,
}

/// One CPU's closed window. Count, min, max and percentiles are derived from the histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorWindow {
    pub cpu: u32,
    pub histogram: Histogram,
    pub missed: u64,
    /// What the samplers saw on this CPU over the window.
    pub cpu_summary: Option<CpuSummary>,
    pub spikes: Vec<MonitorSpike>,
}

/// One closed window over every measured CPU: written in one transaction (or, when the store
/// cannot take it as a daemon ends, kept in a file as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowSet {
    /// The window's number in its series (from `SeriesState::next_window_index` in the store).
    pub index: u64,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub cpus: Vec<MonitorWindow>,
    /// Power per source over the window.
    pub power: Option<Vec<PowerSource>>,
    pub thermal: Option<Vec<ThermalSummary>>,
    /// CPU time latlab itself used over the window.
    pub cost_cpu_time_ns: Option<u64>,
}

/// A monitoring series' configuration as stored (what `/api/series` and /metrics'
/// `latlab_system_info` show).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesConfig {
    pub latlab_version: String,
    pub hostname: String,
    pub kernel: String,
    pub preempt: String,
    /// The profile held, `none` without one.
    pub profile: String,
    /// The governor schedule, described.
    pub schedule: Option<String>,
    pub retention_ns: u64,
    pub sample_period_ns: u64,
    pub measure: MeasureConfig,
}

impl SeriesConfig {
    /// What the daemon runs with on `system`.
    pub fn new(system: &SystemInfo, measure: MeasureConfig) -> SeriesConfig {
        SeriesConfig {
            latlab_version: env!("CARGO_PKG_VERSION").into(),
            hostname: system.hostname.clone(),
            kernel: system.kernel_release.clone(),
            preempt: system.preempt.clone(),
            profile: "none".into(),
            schedule: None,
            retention_ns: 0,
            sample_period_ns: 0,
            measure,
        }
    }

    /// As a JSON value (objects keyed in sorted order, as the store has always kept it).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
