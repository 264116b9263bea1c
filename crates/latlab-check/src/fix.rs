//! `--fix`: the knobs of a [`FixPlan`] applied through `latlab tune`, journaled so that
//! `latlab tune restore` puts every value back.

use crate::{FixPlan, Knob};
use latlab_sys::Sys;
use std::path::{Path, PathBuf};

/// Why the knobs could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum FixError {
    #[error("{0}")]
    Tune(String),
}

/// What was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixReport {
    /// `knob = value` of every knob written.
    pub applied: Vec<String>,
    /// Knobs left alone, with why.
    pub not_applied: Vec<(String, String)>,
    /// The journal `latlab tune restore` reads.
    pub journal: Option<PathBuf>,
}

/// Where the tuning journal lives by default.
pub fn default_state_dir(sys: &Sys) -> PathBuf {
    match std::env::var_os("LATLAB_STATE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => sys.path("/var/lib/latlab"),
    }
}

/// Apply the plan's knobs.
pub fn apply(_sys: &Sys, plan: &FixPlan, _state_dir: &Path) -> Result<FixReport, FixError> {
    Ok(FixReport {
        applied: Vec::new(),
        not_applied: plan
            .knobs
            .iter()
            .map(|(k, _)| (k.to_string(), unsupported(k)))
            .collect(),
        journal: None,
    })
}

fn unsupported(_k: &Knob) -> String {
    "latlab tune is not available in this build".into()
}
