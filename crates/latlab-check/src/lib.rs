//! `latlab check`: a pass / warn / fail / not-applicable scan of everything that limits latency
//! on a Linux system, each finding with one line of evidence, one line of advice and the fix —
//! a `latlab tune` knob, a kernel boot option or a manual step.
//!
//! The crate has two halves. [`Facts::gather`] reads the system through [`latlab_sys::Sys`]
//! (so a fixture tree stands in for a machine); the checks in [`CHECKS`] are pure functions of
//! those facts and of the [`Target`] (audio, control, throughput), which sets their bounds.
//! Every check has a stable id (`limits.rtprio`, `cpu.idle-depth`, …) so a user can skip one and
//! results can be compared over time. [`plan_fixes`] turns the failed checks into a [`FixPlan`]:
//! the knobs a tune profile can set, and the boot options and manual steps it cannot.

mod checks;
pub mod facts;
pub mod fix;

pub use checks::CHECKS;
pub use facts::{Facts, UserChoice};

use serde::Serialize;

/// Schema name of the JSON report.
pub const SCHEMA: &str = "latlab.check";
/// Version of the JSON report; fields are only ever added within a version.
pub const SCHEMA_VERSION: u32 = 1;

/// Errors of bad input.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CheckError {
    #[error("unknown target {0:?} (accepted: audio, control, throughput)")]
    UnknownTarget(String),
    #[error("unknown check id {0:?} (accepted: the ids `latlab check --list` shows)")]
    UnknownCheck(String),
}

/// What the system is meant to do; it sets the bounds the checks use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Audio work: periods of a few milliseconds, deadlines every period.
    Audio,
    /// Control loops: sub-millisecond periods, the tail is the product.
    Control,
    /// Throughput: latency bounds do not apply; settings that cost throughput are flagged.
    Throughput,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Audio, Target::Control, Target::Throughput];

    pub fn parse(text: &str) -> Result<Target, CheckError> {
        match text {
            "audio" => Ok(Target::Audio),
            "control" => Ok(Target::Control),
            "throughput" => Ok(Target::Throughput),
            other => Err(CheckError::UnknownTarget(other.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Audio => "audio",
            Target::Control => "control",
            Target::Throughput => "throughput",
        }
    }

    /// The numeric bounds of this target.
    pub fn bounds(self) -> Bounds {
        match self {
            Target::Audio => Bounds {
                idle_exit_latency_us: Some(100),
                rtprio_min: Some(80),
                swappiness_max: Some(10),
                steal_max_percent: 5.0,
                timer_resolution_max_ns: 1_000,
            },
            Target::Control => Bounds {
                idle_exit_latency_us: Some(10),
                rtprio_min: Some(90),
                swappiness_max: Some(10),
                steal_max_percent: 1.0,
                timer_resolution_max_ns: 1_000,
            },
            Target::Throughput => Bounds {
                idle_exit_latency_us: None,
                rtprio_min: None,
                swappiness_max: None,
                steal_max_percent: 10.0,
                timer_resolution_max_ns: 1_000,
            },
        }
    }
}

/// The bounds the checks measure against (from the [`Target`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bounds {
    /// Deepest idle state a CPU may enter, by exit latency (µs).
    pub idle_exit_latency_us: Option<u64>,
    /// RLIMIT_RTPRIO the invoking user needs.
    pub rtprio_min: Option<u32>,
    pub swappiness_max: Option<u32>,
    /// Steal time (since boot) above which a VM fails.
    pub steal_max_percent: f64,
    /// Timer resolution above which high-resolution timers count as inactive (ns).
    pub timer_resolution_max_ns: u64,
}

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    NotApplicable,
    Warn,
    Fail,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
            Verdict::NotApplicable => "n/a",
        }
    }
}

/// A setting a `latlab tune` profile applies at run time (journaled, undone by
/// `latlab tune restore`). Each maps to one key of the profile format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "knob", content = "value", rename_all = "snake_case")]
pub enum Knob {
    /// `[cpu.all] governor`.
    Governor(String),
    /// `[cpu.all] epp`: energy-performance preference.
    Epp(String),
    /// `[system] turbo`.
    Turbo(bool),
    /// `[cpu.all] max_idle_latency_us`: idle states whose exit latency exceeds it are disabled,
    /// chosen per CPU by latency.
    MaxIdleLatencyUs(u64),
    /// `[system] sched_rt_runtime_us`.
    SchedRtRuntimeUs(i64),
    /// `[isolation] isolated = LIST, irqs = true`: IRQs (and the default affinity of new ones)
    /// moved off these CPUs to the housekeeping ones.
    IrqsOff(String),
}

impl Knob {
    /// The profile table and the `key = value` lines it contributes.
    pub fn profile_entry(&self) -> (&'static str, Vec<String>) {
        match self {
            Knob::Governor(g) => ("cpu.all", vec![format!("governor = {g:?}")]),
            Knob::Epp(e) => ("cpu.all", vec![format!("epp = {e:?}")]),
            Knob::Turbo(t) => ("system", vec![format!("turbo = {t}")]),
            Knob::MaxIdleLatencyUs(us) => ("cpu.all", vec![format!("max_idle_latency_us = {us}")]),
            Knob::SchedRtRuntimeUs(r) => ("system", vec![format!("sched_rt_runtime_us = {r}")]),
            Knob::IrqsOff(c) => (
                "isolation",
                vec![format!("isolated = {c:?}"), "irqs = true".to_string()],
            ),
        }
    }
}

impl std::fmt::Display for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (table, lines) = self.profile_entry();
        write!(f, "[{table}] {}", lines.join(", "))
    }
}

/// How a finding is fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fix {
    /// A run-time setting `latlab tune` applies.
    Knob { knob: Knob },
    /// A kernel command-line option: takes effect at the next boot.
    Boot { option: String },
    /// Something to do by hand (limits.d, fstab, services, a different kernel).
    Manual { step: String },
}

impl Fix {
    pub fn knob(k: Knob) -> Fix {
        Fix::Knob { knob: k }
    }
    pub fn boot(o: impl Into<String>) -> Fix {
        Fix::Boot { option: o.into() }
    }
    pub fn manual(s: impl Into<String>) -> Fix {
        Fix::Manual { step: s.into() }
    }
}

impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fix::Knob { knob } => write!(f, "tune: {knob}"),
            Fix::Boot { option } => write!(f, "boot: {option}"),
            Fix::Manual { step } => write!(f, "{step}"),
        }
    }
}

/// What a check decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub verdict: Verdict,
    /// One line: what was found, where.
    pub evidence: String,
    /// One line: what to do about it (empty when there is nothing to do).
    pub advice: String,
    pub fixes: Vec<Fix>,
}

impl Outcome {
    fn new(verdict: Verdict, evidence: impl Into<String>, advice: impl Into<String>) -> Outcome {
        Outcome {
            verdict,
            evidence: evidence.into(),
            advice: advice.into(),
            fixes: Vec::new(),
        }
    }
    pub fn pass(evidence: impl Into<String>) -> Outcome {
        Outcome::new(Verdict::Pass, evidence, "")
    }
    pub fn na(evidence: impl Into<String>) -> Outcome {
        Outcome::new(Verdict::NotApplicable, evidence, "")
    }
    /// Not applicable because `field` could not be read: `unavailable: <its reason>`.
    pub(crate) fn unavailable<T>(field: &latlab_model::system::Field<T>) -> Outcome {
        Outcome::na(format!(
            "unavailable: {}",
            field.reason().unwrap_or_default()
        ))
    }
    pub fn warn(evidence: impl Into<String>, advice: impl Into<String>) -> Outcome {
        Outcome::new(Verdict::Warn, evidence, advice)
    }
    pub fn fail(evidence: impl Into<String>, advice: impl Into<String>) -> Outcome {
        Outcome::new(Verdict::Fail, evidence, advice)
    }
    /// The same outcome with another verdict (advice and fixes kept).
    pub fn with_verdict(mut self, v: Verdict) -> Outcome {
        self.verdict = v;
        self
    }
    pub fn advice(mut self, a: impl Into<String>) -> Outcome {
        self.advice = a.into();
        self
    }
    pub fn fix(mut self, f: Fix) -> Outcome {
        self.fixes.push(f);
        self
    }
}

/// What a check gets besides the facts.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    pub target: Target,
    pub bounds: Bounds,
}

/// One check: a stable id, a title, and a pure decision over the facts.
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub run: fn(&Facts, &Ctx) -> Outcome,
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub id: &'static str,
    pub title: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Counts per verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub pass: u32,
    pub warn: u32,
    pub fail: u32,
    pub not_applicable: u32,
}

/// The result of a scan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub schema_version: u32,
    pub target: Target,
    pub bounds: Bounds,
    pub findings: Vec<Finding>,
    /// Ids left out with `--skip`.
    pub skipped: Vec<&'static str>,
    pub summary: Summary,
}

impl Report {
    /// 0 when nothing warns or fails, 1 on a warning, 3 on a failure (2 is bad input).
    pub fn exit_code(&self) -> u8 {
        if self.summary.fail > 0 {
            3
        } else if self.summary.warn > 0 {
            1
        } else {
            0
        }
    }

    pub fn finding(&self, id: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.id == id)
    }
}

/// Every registered id.
pub fn ids() -> impl Iterator<Item = &'static str> {
    CHECKS.iter().map(|c| c.id)
}

/// Resolve `--skip` entries: an exact id, or a group (`irq` for every `irq.*`).
pub fn resolve_skip<S: AsRef<str>>(items: &[S]) -> Result<Vec<&'static str>, CheckError> {
    let mut out: Vec<&'static str> = Vec::new();
    for item in items {
        // An empty name (`--skip ""`, `cpu,,`) skips nothing: said, not passed over.
        let item = item.as_ref().trim();
        let matched: Vec<&'static str> = ids()
            .filter(|id| *id == item || id.split_once('.').is_some_and(|(g, _)| g == item))
            .collect();
        if matched.is_empty() {
            return Err(CheckError::UnknownCheck(item.to_string()));
        }
        for m in matched {
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// Run every registered check not in `skip`. A check that panics yields a warning saying so,
/// so the table is always complete.
pub fn run(facts: &Facts, target: Target, skip: &[&'static str]) -> Report {
    let ctx = Ctx {
        target,
        bounds: target.bounds(),
    };
    let mut findings = Vec::new();
    let mut summary = Summary::default();
    for check in CHECKS.iter().filter(|c| !skip.contains(&c.id)) {
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (check.run)(facts, &ctx)))
                .unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "unknown panic".into());
                    Outcome::warn(
                        format!("the check itself failed: {msg}"),
                        "report this as a latlab bug",
                    )
                });
        let mut outcome = outcome;
        if let Some(root) = facts.root_prefix.as_deref().filter(|r| !r.is_empty()) {
            outcome.evidence = outcome.evidence.replace(root, "");
            outcome.advice = outcome.advice.replace(root, "");
        }
        match outcome.verdict {
            Verdict::Pass => summary.pass += 1,
            Verdict::Warn => summary.warn += 1,
            Verdict::Fail => summary.fail += 1,
            Verdict::NotApplicable => summary.not_applicable += 1,
        }
        findings.push(Finding {
            id: check.id,
            title: check.title,
            outcome,
        });
    }
    Report {
        schema: SCHEMA,
        schema_version: SCHEMA_VERSION,
        target,
        bounds: ctx.bounds,
        findings,
        skipped: CHECKS
            .iter()
            .map(|c| c.id)
            .filter(|id| skip.contains(id))
            .collect(),
        summary,
    }
}

/// What `--fix` does: knobs for a tune profile, boot options and manual steps, each with the
/// checks that asked for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FixPlan {
    pub knobs: Vec<(Knob, Vec<&'static str>)>,
    pub boot: Vec<(String, Vec<&'static str>)>,
    pub manual: Vec<(String, Vec<&'static str>)>,
}

impl FixPlan {
    pub fn is_empty(&self) -> bool {
        self.knobs.is_empty() && self.boot.is_empty() && self.manual.is_empty()
    }
}

fn add<T: PartialEq>(list: &mut Vec<(T, Vec<&'static str>)>, item: T, id: &'static str) {
    match list.iter_mut().find(|(k, _)| *k == item) {
        Some((_, ids)) => {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        None => list.push((item, vec![id])),
    }
}

/// The fixes of every finding at `at_least` or worse (`Verdict::Fail` for `--fix`), merged.
pub fn plan_fixes(report: &Report, at_least: Verdict) -> FixPlan {
    let mut plan = FixPlan::default();
    for f in report
        .findings
        .iter()
        .filter(|f| f.outcome.verdict >= at_least && f.outcome.verdict != Verdict::NotApplicable)
    {
        for fix in &f.outcome.fixes {
            match fix {
                Fix::Knob { knob } => add(&mut plan.knobs, knob.clone(), f.id),
                Fix::Boot { option } => add(&mut plan.boot, option.clone(), f.id),
                Fix::Manual { step } => add(&mut plan.manual, step.clone(), f.id),
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn targets_and_skip() {
        assert_eq!(Target::parse("audio").unwrap(), Target::Audio);
        assert_eq!(
            Target::parse("x").unwrap_err(),
            CheckError::UnknownTarget("x".into())
        );
        assert_eq!(Target::Audio.bounds().idle_exit_latency_us, Some(100));
        assert_eq!(
            resolve_skip(&["kernel.preempt"]).unwrap(),
            vec!["kernel.preempt"]
        );
        let irq = resolve_skip(&["irq"]).unwrap();
        assert!(irq.len() >= 2 && irq.iter().all(|i| i.starts_with("irq.")));
        assert_eq!(
            resolve_skip(&["nope"]).unwrap_err(),
            CheckError::UnknownCheck("nope".into())
        );
    }

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for c in CHECKS {
            assert!(seen.insert(c.id), "duplicate id {}", c.id);
            let (group, name) = c.id.split_once('.').unwrap();
            assert!(!group.is_empty() && !name.is_empty());
            assert!(
                c.id.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '.' || ch == '-'),
                "{}",
                c.id
            );
        }
    }

    #[test]
    fn verdict_order_drives_the_exit_code() {
        assert!(Verdict::Fail > Verdict::Warn && Verdict::Warn > Verdict::NotApplicable);
        let mut r = Report {
            schema: SCHEMA,
            schema_version: SCHEMA_VERSION,
            target: Target::Audio,
            bounds: Target::Audio.bounds(),
            findings: vec![],
            skipped: vec![],
            summary: Summary::default(),
        };
        assert_eq!(r.exit_code(), 0);
        r.summary.warn = 1;
        assert_eq!(r.exit_code(), 1);
        r.summary.fail = 1;
        assert_eq!(r.exit_code(), 3);
    }
}
