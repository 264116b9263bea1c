//! What a report is made from: cells of repeated runs.

use std::collections::BTreeMap;

use latlab_model::RunResult;

/// Everything one report shows: a title and the cells it compares. The first cell is the
/// baseline every other cell is compared against, unless a cell names its own.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    pub title: String,
    pub cells: Vec<CellInput>,
    /// Cells of the experiment that did not run here, with the reason (a profile that could
    /// not be applied, a feature this machine lacks): `(cell name, reason)`.
    pub skipped: Vec<(String, String)>,
}

/// One configuration (a cell of an experiment, or a single run) and its repeats.
#[derive(Debug, Clone, Default)]
pub struct CellInput {
    /// How the cell is named in tables and legends, e.g. `governor=performance`.
    pub name: String,
    /// The cell's values of the experiment's axes, e.g. `governor` → `performance`.
    pub params: BTreeMap<String, String>,
    /// Its repeats, in the order they ran.
    pub runs: Vec<RunResult>,
    /// The cell it is compared against, by name, where that is not the first cell (a tuning
    /// search's confirmation is compared with the baseline measured beside it). A name no cell
    /// has falls back to the first cell.
    pub baseline: Option<String>,
    /// The latency statistic its comparison's verdict is given on (`p50`, `p99`, `p99.9`,
    /// `max`), where it is not p99: a tuning search's objective.
    pub verdict_on: Option<String>,
}

impl CellInput {
    /// The cell's parameters as written in reports: `governor=performance, interval=1ms`
    /// (empty without parameters).
    pub fn params_text(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A cell of one run, named by the run's id.
    pub fn single(run: RunResult) -> CellInput {
        CellInput {
            name: run.id.clone(),
            params: BTreeMap::new(),
            runs: vec![run],
            baseline: None,
            verdict_on: None,
        }
    }
}

impl ReportInput {
    /// One cell per run, in the given order (for reports of runs that belong to no experiment).
    pub fn from_runs(title: impl Into<String>, runs: Vec<RunResult>) -> ReportInput {
        ReportInput {
            title: title.into(),
            cells: runs.into_iter().map(CellInput::single).collect(),
            skipped: Vec::new(),
        }
    }
}
