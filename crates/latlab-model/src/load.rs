//! What a load generator did: its spec, where it ran, and the work it counted.

use serde::{Deserialize, Serialize};

/// One rate a load reports at its end (a load may report several, e.g. IOPS and MB/s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// What was counted, e.g. `"matrix multiplies"`, `"writes"`, `"bytes written"`.
    pub what: String,
    /// The unit of `rate`, e.g. `"ops/s"`, `"IOPS"`, `"MB/s"`, `"files/s"`, `"messages/s"`.
    pub unit: String,
    /// Work per second of the load's own running time (for `cpu` with both loops, of each
    /// loop's share of it: they alternate).
    pub rate: f64,
    /// The total amount of work counted (in the unit of `rate` times seconds).
    pub total: f64,
}

/// The report of one load (one spec of `--load`, or one phase of a schedule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The spec as the user wrote it, e.g. `"matrix:size=128"`.
    pub spec: String,
    /// The kind: `cpu`, `matrix`, `memory`, `io`, `procfs`, `rt-hog`, `messaging`, `cmd`.
    pub kind: String,
    /// CPUs the load was confined to (`None`: all online CPUs).
    #[serde(default)]
    pub cpus: Option<Vec<usize>>,
    /// Worker threads or processes it used.
    pub workers: usize,
    /// Offset of its start from the start of measuring (0 for loads started before it).
    pub started_ns: u64,
    /// How long it ran.
    pub elapsed_ns: u64,
    pub throughput: Vec<Throughput>,
    /// Anything the user should know (e.g. the rt-hog watchdog stopped it).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Why the load failed, where it did (a command that exited with an error on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// One phase of a `--load-schedule`: its boundaries relative to the start of measuring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPhase {
    pub index: usize,
    /// The phase's load spec (`"idle"` for none).
    pub spec: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Loads of a run: what ran and, with a schedule, the phase boundaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Loads {
    pub reports: Vec<LoadReport>,
    #[serde(default)]
    pub phases: Vec<LoadPhase>,
}

impl Loads {
    pub fn is_empty(&self) -> bool {
        self.reports.is_empty() && self.phases.is_empty()
    }

    /// The loads that failed (a command that exited with an error on its own), each as its spec
    /// and why: a run beside one measured without it from then on.
    pub fn failed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.reports
            .iter()
            .filter_map(|l| Some((l.spec.as_str(), l.failed.as_deref()?)))
    }

    /// [`Loads::failed`] as one line, `cmd:exit 3: why; …`; `None` where none failed.
    pub fn failed_line(&self) -> Option<String> {
        let failed: Vec<String> = self
            .failed()
            .map(|(spec, why)| format!("{spec}: {why}"))
            .collect();
        (!failed.is_empty()).then(|| failed.join("; "))
    }
}
