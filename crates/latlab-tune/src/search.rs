//! `latlab tune search`: find the settings that lower latency on this machine by measuring them.
//!
//! The search has three stages, each an interleaved comparison in a seeded random order:
//! 1. **Screening**: the baseline (the system as it is) and every candidate (one knob at one
//!    value, applied alone), `repeats` runs each. A candidate helps when its runs' objective is
//!    lower than the baseline's with the two-sided Mann-Whitney test at p < 0.05.
//! 2. **Combination**, greedy forward selection: start from the knob that helped most; add the
//!    next helping knob only when the pair, measured beside the combination so far, is better
//!    again with p < 0.05. Effects of knobs on one latency overlap (two ways of keeping a CPU
//!    out of deep idle do not add up), so a knob is kept for what it adds, not for what it did
//!    alone.
//! 3. **Confirmation**: the final combination against the baseline with fresh repeats.
//!
//! Every candidate is applied through the tuning journal ([`TemporaryTuning`]) and restored
//! before the next run. The measuring itself is the caller's ([`Lab`]): `latlab tune search`
//! measures for real and keeps every run in the store; tests inject a simulated measurement.

use crate::{Profile, Profiles, TemporaryTuning, TuneError};
use latlab_model::RunResult;
use latlab_model::rng::SplitMix64;
use latlab_model::units::CpuList;
use latlab_sys::Sys;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the search lowers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    P50,
    P99,
    P99_9,
    Max,
    /// p99 times the mean power drawn: latency bought with fewer watts scores better.
    P99PerWatt,
}

impl Objective {
    pub const NAMES: &'static str = "p50, p99, p99.9, max, p99-per-watt";

    pub fn parse(s: &str) -> Result<Objective, String> {
        Ok(match s {
            "p50" => Objective::P50,
            "p99" => Objective::P99,
            "p99.9" => Objective::P99_9,
            "max" => Objective::Max,
            "p99-per-watt" => Objective::P99PerWatt,
            other => {
                return Err(format!(
                    "--objective {other}: unknown objective (accepted: {})",
                    Self::NAMES
                ));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Objective::P50 => "p50",
            Objective::P99 => "p99",
            Objective::P99_9 => "p99.9",
            Objective::Max => "max",
            Objective::P99PerWatt => "p99-per-watt",
        }
    }

    /// The unit of [`Objective::value`] as shown: µs, or µs·W.
    pub fn unit(self) -> &'static str {
        match self {
            Objective::P99PerWatt => "µs·W",
            _ => "µs",
        }
    }

    /// The objective of one run, in µs (µs·W for p99-per-watt), or why it has none. From the
    /// corrected statistics, where each missed period counts at the latency it would have had:
    /// a knob that makes the measuring thread miss periods cannot look faster for it.
    pub fn value(self, run: &RunResult) -> Result<f64, String> {
        if run.overall.stats.count == 0 {
            return Err("the run has no samples".into());
        }
        let s = &run.overall.corrected;
        let us = |ns: u64| ns as f64 / 1000.0;
        Ok(match self {
            Objective::P50 => us(s.p50),
            Objective::P99 => us(s.p99),
            Objective::P99_9 => us(s.p99_9),
            Objective::Max => us(s.max),
            Objective::P99PerWatt => us(s.p99) * latlab_report::run_power_w(run)?,
        })
    }
}

/// What the user tunes for (`--target`): the default objective and interval, and whether a
/// knob may cost the load's throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Audio: every period of a 1 ms cycle on time; p99 of 1 ms wake-ups.
    Audio,
    /// Control loops: the worst case of 250 µs wake-ups.
    Control,
    /// Latency without losing throughput: p99 of 1 ms wake-ups, and a knob that lowers the
    /// load's throughput (p < 0.05) is not kept.
    Throughput,
}

impl Goal {
    pub const NAMES: &'static str = "audio, control, throughput";

    pub fn parse(s: &str) -> Result<Goal, String> {
        match s {
            "audio" => Ok(Goal::Audio),
            "control" => Ok(Goal::Control),
            "throughput" => Ok(Goal::Throughput),
            other => Err(format!(
                "--target {other}: unknown target (accepted: {})",
                Self::NAMES
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Goal::Audio => "audio",
            Goal::Control => "control",
            Goal::Throughput => "throughput",
        }
    }

    pub fn objective(self) -> Objective {
        match self {
            Goal::Audio | Goal::Throughput => Objective::P99,
            Goal::Control => Objective::Max,
        }
    }

    /// The measuring interval, ns.
    pub fn interval_ns(self) -> u64 {
        match self {
            Goal::Audio | Goal::Throughput => 1_000_000,
            Goal::Control => 250_000,
        }
    }
}

/// The knobs a search can try: name and what it sets.
pub const KNOBS: &[(&str, &str)] = &[
    (
        "pm_qos",
        "hold /dev/cpu_dma_latency (system.cpu_dma_latency_us)",
    ),
    (
        "resume_latency",
        "per-CPU PM QoS resume latency of the measured CPUs (pm_qos_resume_latency_us)",
    ),
    (
        "idle",
        "disable idle states deeper than an exit latency on the measured CPUs (max_idle_latency_us)",
    ),
    ("governor", "cpufreq governor of the measured CPUs"),
    ("epp", "energy-performance preference of the measured CPUs"),
    ("turbo", "turbo / boost for the whole machine"),
    ("cpuidle_governor", "the cpuidle governor"),
    ("timer_migration", "kernel.timer_migration"),
    ("vmstat_interval", "vm.stat_interval"),
    (
        "rt_throttling",
        "kernel.sched_rt_runtime_us = -1 (no RT throttling)",
    ),
    (
        "irq_affinity",
        "IRQs (and new ones) away from the measured CPUs",
    ),
    (
        "kthreads",
        "movable kernel threads away from the measured CPUs",
    ),
    (
        "workqueues",
        "unbound workqueues away from the measured CPUs",
    ),
];

/// Boot options no search applies (they need a reboot); shown as advice.
pub const BOOT_ADVICE: &str = "boot options are not tried (they need a reboot): nohz_full, \
rcu_nocbs, isolcpus, irqaffinity, preempt, idle; `latlab tune boot realtime --cpus LIST` says which \
this machine lacks";

/// What a knob of [`KNOBS`] sets ("" for a name that is not one).
pub fn knob_description(knob: &str) -> &'static str {
    KNOBS
        .iter()
        .find(|(k, _)| *k == knob)
        .map_or("", |(_, d)| *d)
}

/// Which knobs to try (`--knobs` / `--skip`), checked against [`KNOBS`].
pub fn select_knobs(only: &[String], skip: &[String]) -> Result<Vec<&'static str>, String> {
    let known = || KNOBS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
    for (flag, list) in [("--knobs", only), ("--skip", skip)] {
        if let Some(bad) = list.iter().find(|k| !KNOBS.iter().any(|(n, _)| n == k)) {
            return Err(format!(
                "{flag} {bad}: unknown knob (accepted: {})",
                known()
            ));
        }
    }
    let chosen: Vec<&'static str> = KNOBS
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| only.is_empty() || only.iter().any(|o| o == k))
        .filter(|k| !skip.iter().any(|s| s == k))
        .collect();
    if chosen.is_empty() {
        return Err(format!(
            "--knobs/--skip leave no knob to try (accepted: any of {})",
            known()
        ));
    }
    Ok(chosen)
}

/// One knob at one value: a profile fragment applied alone.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub knob: String,
    pub value: String,
    /// The profile fragment (TOML) that sets it.
    pub toml: String,
    pub profile: Profile,
}

impl Candidate {
    /// `pm_qos=0`: the candidate's cell in the store and its row in tables.
    pub fn label(&self) -> String {
        format!("{}={}", self.knob, self.value)
    }
}

/// A knob or value not tried (or measured but not compared), and why.
#[derive(Debug, Clone, PartialEq)]
pub struct NotTried {
    pub what: String,
    pub why: String,
    /// How long each of its runs took, where some were measured before the search stopped
    /// (they are in the store, but there was no baseline to compare them with).
    pub measured: Vec<Duration>,
}

/// The values worth trying for each knob on this machine, as TOML fragments. `cpus`: the
/// measured CPUs (per-CPU knobs touch only these).
fn values(sys: &Sys, knob: &str, cpus: &CpuList, online: &CpuList) -> Vec<(String, String)> {
    let table = format!("[cpu.\"{cpus}\"]");
    let one = |value: &str, toml: String| vec![(value.to_string(), toml)];
    let cpu0 = cpus.cpus().first().copied().unwrap_or(0);
    match knob {
        "pm_qos" => one("0", "[system]\ncpu_dma_latency_us = 0\n".into()),
        "resume_latency" => one("0", format!("{table}\npm_qos_resume_latency_us = 0\n")),
        "idle" => {
            // Each exit latency short of the deepest state's: keep the states up to it. Every
            // state the kernel lists, as the profile's `idle` rule reads them.
            let base = format!("{}/cpu{cpu0}/cpuidle", latlab_sys::CPU_SYSFS);
            let mut lat: Vec<u64> = sys
                .numbered(&base, "state")
                .into_iter()
                .filter_map(|s| {
                    sys.read_trim(&format!("{base}/state{s}/latency"))
                        .ok()?
                        .parse()
                        .ok()
                })
                .collect();
            lat.sort_unstable();
            lat.dedup();
            lat.pop();
            if lat.is_empty() {
                lat.push(0);
            }
            // At most three: the shallowest cut, the deepest (only the deepest state off,
            // which costs least) and one between them.
            if lat.len() > 3 {
                lat = vec![lat[0], lat[lat.len() / 2], lat[lat.len() - 1]];
            }
            lat.iter()
                .map(|l| {
                    (
                        format!("{l}us"),
                        format!("{table}\nmax_idle_latency_us = {l}\n"),
                    )
                })
                .collect()
        }
        "governor" => one(
            "performance",
            format!("{table}\ngovernor = \"performance\"\n"),
        ),
        "epp" => one("performance", format!("{table}\nepp = \"performance\"\n")),
        "turbo" => one("off", "[system]\nturbo = false\n".into()),
        "cpuidle_governor" => {
            let current = sys
                .read_trim("/sys/devices/system/cpu/cpuidle/current_governor")
                .unwrap_or_default();
            let available = sys
                .read_trim("/sys/devices/system/cpu/cpuidle/available_governors")
                .unwrap_or_default();
            let others: Vec<(String, String)> = available
                .split_whitespace()
                .filter(|g| *g != current)
                .map(|g| {
                    (
                        g.to_string(),
                        format!("[system]\ncpuidle_governor = \"{g}\"\n"),
                    )
                })
                .collect();
            if others.is_empty() {
                // Let the plan say why (no cpuidle here).
                one("menu", "[system]\ncpuidle_governor = \"menu\"\n".into())
            } else {
                others
            }
        }
        "timer_migration" => one("off", "[system]\ntimer_migration = false\n".into()),
        "vmstat_interval" => one("10s", "[system]\nvmstat_interval_s = 10\n".into()),
        "rt_throttling" => one("off", "[system]\nsched_rt_runtime_us = -1\n".into()),
        "irq_affinity" | "kthreads" | "workqueues" => {
            if cpus == online {
                return Vec::new();
            }
            let key = match knob {
                "irq_affinity" => "irqs",
                k => k,
            };
            one(
                "away",
                format!("[isolation]\nisolated = \"{cpus}\"\n{key} = true\n"),
            )
        }
        _ => Vec::new(),
    }
}

/// The candidates of `knobs` this machine supports, and those it does not (with why).
pub fn candidates(
    sys: &Sys,
    knobs: &[&str],
    cpus: &CpuList,
) -> Result<(Vec<Candidate>, Vec<NotTried>), TuneError> {
    let online = sys.online_cpus()?;
    let mut found = Vec::new();
    let mut not = Vec::new();
    for knob in knobs {
        let vals = values(sys, knob, cpus, &online);
        if vals.is_empty() {
            not.push(NotTried {
                measured: Vec::new(),
                what: knob.to_string(),
                why: "every online CPU is measured; nothing to move away from them (give --cpus)"
                    .into(),
            });
        }
        for (value, toml) in vals {
            let name = format!("search-{knob}-{value}");
            let profile = Profiles::builtin().resolve_text(&name, &toml)?;
            let label = format!("{knob}={value}");
            if profile.system.cpu_dma_latency_us.is_some() && !sys.exists("/dev/cpu_dma_latency") {
                not.push(NotTried {
                    measured: Vec::new(),
                    what: label,
                    why: "unsupported here: no /dev/cpu_dma_latency".into(),
                });
                continue;
            }
            // PM QoS limits are read by a cpuidle governor alone: without a driver the CPUs
            // halt whatever they say, and a run of each would measure noise.
            if matches!(*knob, "pm_qos" | "resume_latency") && crate::plan::no_cpuidle_driver(sys) {
                not.push(NotTried {
                    measured: Vec::new(),
                    what: label,
                    why: "no effect here: PM QoS limits are read by a cpuidle governor, and \
                          with no cpuidle driver the CPUs halt when idle whatever they say"
                        .into(),
                });
                continue;
            }
            let plan = crate::Plan::build(sys, &profile, Some(cpus))?;
            if plan.disable_ignored.is_some() {
                not.push(NotTried {
                    measured: Vec::new(),
                    what: label,
                    why: "no effect here: the haltpoll governor ignores disabled idle states \
                          (resume_latency=0 or pm_qos=0 make it poll)"
                        .into(),
                });
                continue;
            }
            let (changes, set, unsupported) = plan.counts();
            if plan.dma_latency_us.is_none() && changes == 0 {
                let why = if unsupported > 0 && set == 0 {
                    let whys: Vec<String> = plan
                        .items
                        .iter()
                        .filter_map(|i| match &i.state {
                            crate::ItemState::Unsupported { why } => Some(why.clone()),
                            _ => None,
                        })
                        .fold(Vec::new(), |mut seen, why| {
                            // Every CPU's reason is often one: said once.
                            if !seen.contains(&why) {
                                seen.push(why);
                            }
                            seen
                        });
                    format!("unsupported here: {}", whys.join("; "))
                } else {
                    "already set here".into()
                };
                not.push(NotTried {
                    what: label,
                    why,
                    measured: Vec::new(),
                });
                continue;
            }
            found.push(Candidate {
                knob: knob.to_string(),
                value,
                toml,
                profile,
            });
        }
    }
    Ok((found, not))
}

/// What the search needs measured and kept; the caller's.
pub trait Lab {
    /// Measure once, with the system as it is now (a candidate applied or not).
    fn measure(&mut self, cell: &str, repeat: u32) -> Result<RunResult, String>;
    /// A run of this cell and repeat kept by an earlier, interrupted search.
    fn saved(&mut self, _cell: &str, _repeat: u32) -> Option<RunResult> {
        None
    }
    /// Whether [`Lab::saved`] has a run of this cell and repeat (without loading it).
    fn is_saved(&self, _cell: &str, _repeat: u32) -> bool {
        false
    }
    /// Keep a finished run (the store).
    fn keep(&mut self, _cell: &str, _repeat: u32, _run: &RunResult) -> Result<(), String> {
        Ok(())
    }
    /// Keep a run a signal cut short: not a repeat of its cell (a resumed search measures the
    /// cell again), but what it measured (the store keeps it outside the search).
    fn keep_cut_short(
        &mut self,
        _cell: &str,
        _repeat: u32,
        _run: &RunResult,
    ) -> Result<(), String> {
        Ok(())
    }
    /// Stop as soon as possible (a signal came).
    fn stop_requested(&self) -> bool {
        false
    }
    /// A line of progress.
    fn progress(&mut self, _line: &str) {}
    /// The search has `runs` more to measure than it could plan for at its start: the
    /// combination steps, known once the screening says which knobs helped.
    fn expect_more(&mut self, _runs: usize) {}
}

/// How a search runs.
#[derive(Debug, Clone)]
pub struct Spec {
    pub objective: Objective,
    pub goal: Goal,
    /// Runs per cell in each comparison (at least 4 for a verdict at p < 0.05).
    pub repeats: u32,
    pub budget: Duration,
    /// Expected length of one run (measuring plus set-up).
    pub run_length: Duration,
    /// The measured CPUs: per-CPU knobs touch these.
    pub cpus: CpuList,
    pub state_dir: PathBuf,
    /// Seeds the order of runs within each round.
    pub seed: u64,
}

/// The level at which an effect counts as shown: the reports' own.
pub use latlab_report::ALPHA;

impl Spec {
    /// Runs of the confirmation (baseline and final, `repeats` each).
    pub fn confirmation_runs(&self) -> u32 {
        2 * self.repeats
    }

    /// How many candidates the screening can take within the budget (keeping time for the
    /// confirmation); `None` when not even the confirmation fits.
    pub fn screenable(&self, candidates: usize) -> Option<usize> {
        let run = self.run_length.as_secs_f64().max(1e-3);
        let runs = (self.budget.as_secs_f64() / run).floor() as u64;
        let reserve = u64::from(self.confirmation_runs());
        if runs < reserve + u64::from(self.repeats) * 2 {
            return None;
        }
        let per_round = (runs - reserve) / u64::from(self.repeats);
        Some((per_round.saturating_sub(1) as usize).min(candidates))
    }
}

/// The figures of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub objective: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub power_w: Option<f64>,
    pub throughput: Option<f64>,
    /// Wall time the run took (apply, measure, restore, keep), 0 for a run reloaded on resume.
    pub took: Duration,
}

impl Figures {
    fn of(objective: Objective, run: &RunResult, took: Duration) -> Result<Figures, String> {
        Ok(Figures {
            objective: objective.value(run)?,
            p99_us: run.overall.corrected.p99 as f64 / 1000.0,
            max_us: run.overall.corrected.max as f64 / 1000.0,
            power_w: latlab_report::run_power_w(run).ok(),
            throughput: latlab_report::run_throughput(run).map(|(_, v)| v),
            took,
        })
    }
}

/// The median of some values (`NaN` for none).
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One comparison of a cell against a reference cell on one figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delta {
    pub reference: f64,
    pub value: f64,
    /// Two-sided Mann-Whitney p-value; `None` without values on both sides.
    pub p: Option<f64>,
}

impl Delta {
    fn of(reference: &[f64], cell: &[f64]) -> Option<Delta> {
        if reference.is_empty() || cell.is_empty() {
            return None;
        }
        Some(Delta {
            reference: median(reference),
            value: median(cell),
            p: latlab_report::mann_whitney(cell, reference).map(|m| m.p),
        })
    }

    pub fn diff(&self) -> f64 {
        self.value - self.reference
    }

    /// The change relative to the reference, percent.
    pub fn percent(&self) -> f64 {
        if self.reference == 0.0 {
            return 0.0;
        }
        100.0 * self.diff() / self.reference
    }

    pub fn shown(&self) -> bool {
        self.p.is_some_and(|p| p < ALPHA)
    }

    pub fn lower(&self) -> bool {
        self.shown() && self.value < self.reference
    }

    pub fn higher(&self) -> bool {
        self.shown() && self.value > self.reference
    }
}

/// What the screening said of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Lowers,
    Raises,
    NoEffectShown,
    /// It lowers the objective but costs the load's throughput (target throughput).
    CostsThroughput,
    /// The search stopped before it had its runs (or the baseline's): nothing can be told yet.
    TooFewRuns,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Lowers => "lowers it",
            Verdict::Raises => "raises it",
            Verdict::NoEffectShown => "no effect shown",
            Verdict::CostsThroughput => "lowers it, costs throughput",
            Verdict::TooFewRuns => "too few runs to tell",
        })
    }
}

/// A screened candidate against the baseline.
#[derive(Debug, Clone)]
pub struct Row {
    pub candidate: Candidate,
    pub runs: Vec<Figures>,
    pub objective: Delta,
    pub p99: Option<Delta>,
    pub max: Option<Delta>,
    pub power: Option<Delta>,
    pub throughput: Option<Delta>,
    pub verdict: Verdict,
}

/// One greedy step: a knob added to the combination so far, measured beside it.
#[derive(Debug, Clone)]
pub struct Step {
    pub added: String,
    pub with: Vec<String>,
    pub delta: Delta,
    pub kept: bool,
}

/// The final combination against the baseline.
#[derive(Debug, Clone)]
pub struct Confirmation {
    pub settings: Vec<String>,
    pub baseline: Vec<Figures>,
    pub tuned: Vec<Figures>,
    pub delta: Delta,
}

impl Confirmation {
    pub fn confirmed(&self) -> bool {
        self.delta.lower()
    }
}

/// A point of a trade-off: a cell's median objective against its median power or throughput.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub label: String,
    pub objective: f64,
    pub other: f64,
}

/// Everything a search found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub baseline: Vec<Figures>,
    /// Screened candidates, best (lowest objective) first.
    pub rows: Vec<Row>,
    pub not_tried: Vec<NotTried>,
    pub steps: Vec<Step>,
    pub confirmation: Option<Confirmation>,
    /// Why the search ended early (budget, a signal), if it did.
    pub cut_short: Option<String>,
    pub interrupted: bool,
    /// What the search spent of its budget: its time, and the measured time of the runs an
    /// earlier, interrupted search saved.
    pub elapsed: Duration,
    pub runs_done: u32,
    /// The final settings as a profile (TOML), when the confirmation showed its effect.
    pub profile: Option<String>,
}

impl Outcome {
    /// The Pareto front of objective against power (lower both): baseline and candidates.
    pub fn power_front(&self) -> Result<Vec<Point>, String> {
        let pts = self.points(|f| f.power_w);
        if pts.is_empty() {
            return Err("no power source gave a reading in these runs".into());
        }
        Ok(front(pts, false))
    }

    /// The Pareto front of objective (lower) against the load's throughput (higher).
    pub fn throughput_front(&self) -> Result<Vec<Point>, String> {
        let pts = self.points(|f| f.throughput);
        if pts.is_empty() {
            return Err(
                "no load with a throughput ran beside the measurement (give --load)".into(),
            );
        }
        Ok(front(pts, true))
    }

    fn points(&self, other: impl Fn(&Figures) -> Option<f64>) -> Vec<Point> {
        let point = |label: String, runs: &[Figures]| {
            let o: Vec<f64> = runs.iter().filter_map(&other).collect();
            (!o.is_empty()).then(|| Point {
                label,
                objective: median(&runs.iter().map(|f| f.objective).collect::<Vec<_>>()),
                other: median(&o),
            })
        };
        std::iter::once(point("baseline".into(), &self.baseline))
            .chain(
                self.rows
                    .iter()
                    .map(|r| point(r.candidate.label(), &r.runs)),
            )
            .flatten()
            .collect()
    }
}

/// The points no other point beats on both axes (objective lower; `other` lower, or higher when
/// `higher_better`), by objective.
fn front(pts: Vec<Point>, higher_better: bool) -> Vec<Point> {
    let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.objective, p.other)).collect();
    latlab_report::pareto_front(&xy, higher_better)
        .into_iter()
        .map(|i| pts[i].clone())
        .collect()
}

/// A cell of a comparison: its key in the store and what is applied for it.
struct Cell<'a> {
    key: String,
    profile: Option<&'a Profile>,
}

/// The search in progress.
struct Searcher<'a, L: Lab> {
    sys: &'a Sys,
    spec: &'a Spec,
    lab: &'a mut L,
    order: SplitMix64,
    started: Instant,
    /// The measured time of the runs reloaded from an earlier, interrupted search: a resumed
    /// search has the budget that search left, not a fresh one.
    spent_before: Duration,
    runs_done: u32,
    stop: Option<String>,
    /// Cells whose profile could not be applied, with why.
    not_applied: Vec<(String, String)>,
}

impl<L: Lab> Searcher<'_, L> {
    fn not_applied(&self, key: &str) -> Option<&str> {
        self.not_applied
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, why)| why.as_str())
    }

    /// What the search has spent of its budget.
    fn spent(&self) -> Duration {
        self.spent_before + self.started.elapsed()
    }

    /// Time left in the budget.
    fn left(&self) -> Duration {
        self.spec.budget.saturating_sub(self.spent())
    }

    /// One run of a cell: the profile applied through the journal, measured, restored. `None`:
    /// a signal cut the run short (it is not a repeat; a resumed search measures it again), or
    /// the cell's profile could not be applied (then it is in `not_applied`).
    fn run(&mut self, cell: &Cell, repeat: u32) -> Result<Option<Figures>, TuneError> {
        if let Some(run) = self.lab.saved(&cell.key, repeat) {
            self.spent_before += Duration::from_nanos(run.elapsed_ns);
            return Figures::of(self.spec.objective, &run, Duration::ZERO)
                .map(Some)
                .map_err(|e| TuneError::Search(format!("cell {} repeat {repeat}: {e}", cell.key)));
        }
        let t0 = Instant::now();
        let guard = match cell.profile {
            Some(p) => {
                match TemporaryTuning::apply(
                    self.sys,
                    p,
                    Some(&self.spec.cpus),
                    &self.spec.state_dir,
                ) {
                    Ok(g) => Some(g),
                    // This candidate cannot be set here (what was written is rolled back); the
                    // others can still be tried.
                    Err(e) if cannot_apply(&e) => {
                        self.not_applied.push((cell.key.clone(), e.to_string()));
                        return Ok(None);
                    }
                    Err(e) => return Err(e),
                }
            }
            None => {
                // The baseline is the system as the search found it: not while another process
                // holds a tuning (between two candidates nothing stops `tune apply`).
                if let Some(since) = crate::status(self.sys, &self.spec.state_dir)?.since() {
                    return Err(TuneError::Search(format!(
                        "a tuning was applied during the search (since {since}); the baseline \
                         would not be the system as it was (restore it with `latlab tune \
                         restore` and resume)"
                    )));
                }
                None
            }
        };
        let measured = self.lab.measure(&cell.key, repeat);
        // What the run measured under (its PM QoS request too), taken before the restore.
        let tuning = guard.map(|g| (g.record(), g.restore()));
        if self.lab.stop_requested() {
            if let Ok(mut run) = measured {
                if let Some((record, _)) = &tuning {
                    record.clone().note_in(&mut run.environment);
                }
                self.lab
                    .keep_cut_short(&cell.key, repeat, &run)
                    .map_err(|e| {
                        TuneError::Search(format!("keeping the cut-short run of {}: {e}", cell.key))
                    })?;
            }
            if let Some((_, restored)) = tuning {
                restored?;
            }
            return Ok(None);
        }
        let mut run = measured.map_err(|e| {
            TuneError::Search(format!("measuring cell {} repeat {repeat}: {e}", cell.key))
        })?;
        if let Some((record, restored)) = tuning {
            let report = restored?;
            if !report.failures().is_empty() {
                return Err(TuneError::Search(format!(
                    "restoring {} left {} value(s) changed; run `{}`",
                    record.profile,
                    report.failures().len(),
                    crate::restore_command(self.sys, &self.spec.state_dir)
                )));
            }
            record.note_in(&mut run.environment);
        }
        let figures = Figures::of(self.spec.objective, &run, Duration::ZERO)
            .map_err(|e| TuneError::Search(format!("cell {} repeat {repeat}: {e}", cell.key)))?;
        self.lab
            .keep(&cell.key, repeat, &run)
            .map_err(|e| TuneError::Search(format!("keeping cell {}: {e}", cell.key)))?;
        self.runs_done += 1;
        Ok(Some(Figures {
            took: t0.elapsed(),
            ..figures
        }))
    }

    /// `repeats` rounds over `cells`, each round in a fresh random order; stops early on a
    /// signal, or when the next round does not fit in `budget` (then says so).
    fn rounds(
        &mut self,
        cells: &[Cell],
        reserve: Duration,
    ) -> Result<Vec<Vec<Figures>>, TuneError> {
        let mut out: Vec<Vec<Figures>> = vec![Vec::new(); cells.len()];
        for r in 0..self.spec.repeats {
            // A round all saved by an earlier search costs nothing and is reloaded whatever is
            // left; one with a run to measure costs every run (the saved ones count their time
            // when they are reloaded).
            let to_measure = cells
                .iter()
                .filter(|c| !self.lab.is_saved(&c.key, r))
                .count();
            let round = self.spec.run_length * cells.len() as u32;
            if to_measure > 0 && self.left() < round + reserve {
                self.stop = Some(format!(
                    "the budget left no time for round {} of {} ({} runs)",
                    r + 1,
                    self.spec.repeats,
                    cells.len()
                ));
                break;
            }
            let mut idx: Vec<usize> = (0..cells.len()).collect();
            self.order.shuffle(&mut idx);
            for i in idx {
                if self.lab.stop_requested() {
                    self.stop = Some("interrupted".into());
                    return Ok(out);
                }
                let c = &cells[i];
                if self.not_applied(&c.key).is_some() {
                    continue;
                }
                self.lab
                    .progress(&format!("{} repeat {}/{}", c.key, r + 1, self.spec.repeats));
                match self.run(c, r)? {
                    Some(f) => out[i].push(f),
                    None if self.not_applied(&c.key).is_some() => {}
                    None => {
                        self.stop = Some("interrupted".into());
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }
}

fn objectives(runs: &[Figures]) -> Vec<f64> {
    runs.iter().map(|f| f.objective).collect()
}

fn delta_of(
    base: &[Figures],
    cell: &[Figures],
    f: impl Fn(&Figures) -> Option<f64>,
) -> Option<Delta> {
    let b: Vec<f64> = base.iter().filter_map(&f).collect();
    let c: Vec<f64> = cell.iter().filter_map(&f).collect();
    Delta::of(&b, &c)
}

/// Merge profile fragments into one profile text (later fragments win on the same key).
pub fn merge_fragments(description: &str, fragments: &[&str]) -> Result<String, String> {
    let mut merged = toml::Table::new();
    merged.insert(
        "description".into(),
        toml::Value::String(description.to_string()),
    );
    for f in fragments {
        let t: toml::Table = toml::from_str(f).map_err(|e| e.to_string())?;
        merge(&mut merged, t);
    }
    toml::to_string(&merged).map_err(|e| e.to_string())
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

impl<L: Lab> Searcher<'_, L> {
    /// 1. The baseline and every candidate, `repeats` runs each: the baseline's runs and a row
    ///    per candidate measured, best first (the others go to `not_tried`).
    fn screen(
        &mut self,
        screened: &[Candidate],
        not_tried: &mut Vec<NotTried>,
        reserve: Duration,
    ) -> Result<(Vec<Figures>, Vec<Row>), TuneError> {
        let mut cells = vec![Cell {
            key: "baseline".into(),
            profile: None,
        }];
        cells.extend(screened.iter().map(|c| Cell {
            key: c.label(),
            profile: Some(&c.profile),
        }));
        let mut results = self.rounds(&cells, reserve)?;
        let baseline = results.remove(0);
        let mut rows: Vec<Row> = Vec::new();
        for (c, runs) in screened.iter().zip(results) {
            let Some(objective) = Delta::of(&objectives(&baseline), &objectives(&runs)) else {
                let why = match self.not_applied(&c.label()) {
                    Some(e) => format!("could not be applied here: {e}"),
                    None if runs.is_empty() => "not measured: the search stopped first".into(),
                    None => format!(
                        "{} measured, but not the baseline: the search stopped first, so there \
                         is nothing to compare {} with",
                        latlab_model::units::plural(runs.len() as u64, "run", "runs"),
                        if runs.len() == 1 { "it" } else { "them" }
                    ),
                };
                not_tried.push(NotTried {
                    what: c.label(),
                    why,
                    measured: runs.iter().map(|f| f.took).collect(),
                });
                continue;
            };
            let throughput = delta_of(&baseline, &runs, |f| f.throughput);
            let verdict = if objective.lower() {
                if self.spec.goal == Goal::Throughput && throughput.is_some_and(|t| t.lower()) {
                    Verdict::CostsThroughput
                } else {
                    Verdict::Lowers
                }
            } else if objective.higher() {
                Verdict::Raises
            } else if runs.len().min(baseline.len()) < self.spec.repeats as usize {
                Verdict::TooFewRuns
            } else {
                Verdict::NoEffectShown
            };
            rows.push(Row {
                candidate: c.clone(),
                objective,
                p99: delta_of(&baseline, &runs, |f| Some(f.p99_us)),
                max: delta_of(&baseline, &runs, |f| Some(f.max_us)),
                power: delta_of(&baseline, &runs, |f| f.power_w),
                throughput,
                runs,
                verdict,
            });
        }
        rows.sort_by(|a, b| a.objective.value.total_cmp(&b.objective.value));
        Ok((baseline, rows))
    }

    /// 2. Greedy forward selection over the best value of each knob that helped: a knob joins
    ///    when the combination with it beats the combination without it, measured side by side.
    fn combine<'r>(
        &mut self,
        rows: &'r [Row],
        reserve: Duration,
    ) -> Result<(Vec<&'r Candidate>, Vec<Step>), TuneError> {
        let mut helping: Vec<&Row> = Vec::new();
        for r in rows.iter().filter(|r| r.verdict == Verdict::Lowers) {
            if !helping.iter().any(|h| h.candidate.knob == r.candidate.knob) {
                helping.push(r);
            }
        }
        // Each step measures the combination so far beside it with one more knob.
        let steps_runs = helping.len().saturating_sub(1) * 2 * self.spec.repeats as usize;
        if steps_runs > 0 {
            self.lab.expect_more(steps_runs);
        }
        let mut kept: Vec<&Candidate> = helping.first().map(|r| &r.candidate).into_iter().collect();
        let mut steps = Vec::new();
        for next in helping.iter().skip(1) {
            if self.stop.is_some() {
                break;
            }
            let mut with: Vec<&Candidate> = kept.clone();
            with.push(&next.candidate);
            let (cur, tri) = (profile_of(&kept, "current")?, profile_of(&with, "trial")?);
            let cells = [
                Cell {
                    key: combine_key(&kept),
                    profile: Some(&cur),
                },
                Cell {
                    key: combine_key(&with),
                    profile: Some(&tri),
                },
            ];
            let r = self.rounds(&cells, reserve)?;
            let Some(delta) = Delta::of(&objectives(&r[0]), &objectives(&r[1])) else {
                self.say_not_applied(&cells);
                break;
            };
            let keep = delta.lower();
            steps.push(Step {
                added: next.candidate.label(),
                with: kept.iter().map(|c| c.label()).collect(),
                delta,
                kept: keep,
            });
            if keep {
                kept.push(&next.candidate);
            }
        }
        Ok((kept, steps))
    }

    /// 3. The combination against the baseline on fresh runs (its time was kept aside), and
    ///    the profile of it when its effect shows again.
    fn confirm(
        &mut self,
        kept: &[&Candidate],
    ) -> Result<(Option<Confirmation>, Option<String>), TuneError> {
        if kept.is_empty() || self.lab.stop_requested() || self.interrupted() {
            return Ok((None, None));
        }
        let final_profile = profile_of(kept, "final")?;
        let cells = [
            Cell {
                key: CONFIRM_BASELINE.into(),
                profile: None,
            },
            Cell {
                key: confirm_key(kept),
                profile: Some(&final_profile),
            },
        ];
        let earlier_stop = self.stop.take();
        let r = self.rounds(&cells, Duration::ZERO)?;
        if self.stop.is_none() {
            self.stop = earlier_stop;
        }
        let Some(delta) = Delta::of(&objectives(&r[0]), &objectives(&r[1])) else {
            self.say_not_applied(&cells);
            return Ok((None, None));
        };
        let c = Confirmation {
            settings: kept.iter().map(|c| c.label()).collect(),
            baseline: r[0].clone(),
            tuned: r[1].clone(),
            delta,
        };
        if !c.confirmed() {
            return Ok((Some(c), None));
        }
        let description = format!(
            "Found by latlab tune search (objective {}): {:.1} {unit} against {:.1} {unit} \
             without it ({:+.0} %, p = {:.3}, {} runs each). Settings: {}.",
            self.spec.objective.name(),
            delta.value,
            delta.reference,
            delta.percent(),
            delta.p.unwrap_or(1.0),
            c.tuned.len().min(c.baseline.len()),
            c.settings.join(", "),
            unit = self.spec.objective.unit(),
        );
        let frags: Vec<&str> = kept.iter().map(|c| c.toml.as_str()).collect();
        let profile = merge_fragments(&description, &frags).map_err(TuneError::Search)?;
        Ok((Some(c), Some(profile)))
    }

    /// A combination that could not be applied ends the search's steps, saying why.
    fn say_not_applied(&mut self, cells: &[Cell]) {
        if let Some((key, why)) = cells
            .iter()
            .find_map(|c| Some((c.key.clone(), self.not_applied(&c.key)?.to_string())))
        {
            self.stop = Some(format!("{key} could not be applied: {why}"));
        }
    }

    fn interrupted(&self) -> bool {
        self.lab.stop_requested() || self.stop.as_deref() == Some("interrupted")
    }
}

/// An error of applying one candidate, not of the search: the candidate is left out.
fn cannot_apply(e: &TuneError) -> bool {
    matches!(
        e,
        TuneError::WriteFailed { .. }
            | TuneError::NotPermitted { .. }
            | TuneError::Invalid { .. }
            | TuneError::Io { .. }
            | TuneError::Sys(_)
    )
}

/// `a=1 + b=2`.
fn labels(cs: &[&Candidate]) -> String {
    cs.iter().map(|c| c.label()).collect::<Vec<_>>().join(" + ")
}

/// The name a search's experiment has in the store.
pub const EXPERIMENT_NAME: &str = "tune search";
/// The baseline cell measured beside the final combination.
const CONFIRM_BASELINE: &str = "confirm: baseline";

fn combine_key(cs: &[&Candidate]) -> String {
    format!("combine: {}", labels(cs))
}

fn confirm_key(cs: &[&Candidate]) -> String {
    format!("confirm: {}", labels(cs))
}

/// The cell a search measured cell `key` against, where it is not the first (`baseline`): a
/// combination against the combination without its last candidate, the final combination
/// against the baseline measured beside it. Reports compare them so, as the search did.
pub fn compared_with(key: &str) -> Option<String> {
    if let Some(kept) = key.strip_prefix("combine: ") {
        let (before, _) = kept.rsplit_once(" + ")?;
        return Some(format!("combine: {before}"));
    }
    (key.starts_with("confirm: ") && key != CONFIRM_BASELINE).then(|| CONFIRM_BASELINE.into())
}

/// Run a search over `candidates` (screening, combination, confirmation) within the budget;
/// candidates beyond what the budget can screen are listed as not measured.
pub fn search<L: Lab>(
    sys: &Sys,
    spec: &Spec,
    mut candidates: Vec<Candidate>,
    mut not_tried: Vec<NotTried>,
    lab: &mut L,
) -> Result<Outcome, TuneError> {
    let mut s = Searcher {
        sys,
        spec,
        lab,
        order: SplitMix64(spec.seed),
        started: Instant::now(),
        spent_before: Duration::ZERO,
        runs_done: 0,
        stop: None,
        not_applied: Vec::new(),
    };
    let fit = spec.screenable(candidates.len()).unwrap_or(0);
    for c in candidates.split_off(fit.min(candidates.len())) {
        not_tried.push(NotTried {
            measured: Vec::new(),
            what: c.label(),
            why: "not measured: the budget is spent on the candidates above".into(),
        });
    }
    let reserve = spec.run_length * spec.confirmation_runs();
    let (baseline, rows) = s.screen(&candidates, &mut not_tried, reserve)?;
    let (kept, steps) = s.combine(&rows, reserve)?;
    let (confirmation, profile) = s.confirm(&kept)?;
    let interrupted = s.interrupted();
    Ok(Outcome {
        baseline,
        rows,
        not_tried,
        steps,
        confirmation,
        cut_short: s.stop.clone(),
        interrupted,
        elapsed: s.spent(),
        runs_done: s.runs_done,
        profile,
    })
}

/// One profile of several candidates.
fn profile_of(cs: &[&Candidate], name: &str) -> Result<Profile, TuneError> {
    let frags: Vec<&str> = cs.iter().map(|c| c.toml.as_str()).collect();
    let text = merge_fragments("", &frags).map_err(TuneError::Search)?;
    Ok(Profiles::builtin().resolve_text(&format!("search-{name}"), &text)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A run that missed periods is weighed with them: the corrected p99, not the p99 of the
    /// wake-ups that made it.
    #[test]
    fn the_objective_counts_missed_periods() {
        let mut run = latlab_testkit::run::one_cpu("r", (0, 1_000_000_000));
        run.overall.stats.p99 = 20_000;
        run.overall.corrected.p99 = 900_000;
        assert_eq!(Objective::P99.value(&run), Ok(900.0));
        run.overall.stats.count = 0;
        assert!(Objective::P99.value(&run).is_err());
    }

    #[test]
    fn each_search_cell_names_what_it_was_measured_against() {
        for (key, against) in [
            ("baseline", None),
            ("pm_qos=0", None),
            ("combine: pm_qos=0", None),
            (
                "combine: pm_qos=0 + timer_migration=0",
                Some("combine: pm_qos=0"),
            ),
            ("combine: a=1 + b=2 + c=3", Some("combine: a=1 + b=2")),
            ("confirm: baseline", None),
            ("confirm: a=1 + b=2", Some("confirm: baseline")),
        ] {
            assert_eq!(compared_with(key).as_deref(), against, "{key}");
        }
    }

    #[test]
    fn fragments_merge_table_by_table() {
        let t = merge_fragments(
            "d",
            &[
                "[system]\ntimer_migration = false\n",
                "[system]\nvmstat_interval_s = 10\n",
                "[cpu.\"1\"]\nmax_idle_latency_us = 0\n",
            ],
        )
        .unwrap();
        let v: toml::Table = toml::from_str(&t).unwrap();
        assert_eq!(v["system"]["timer_migration"].as_bool(), Some(false));
        assert_eq!(v["system"]["vmstat_interval_s"].as_integer(), Some(10));
        assert_eq!(v["cpu"]["1"]["max_idle_latency_us"].as_integer(), Some(0));
        assert_eq!(v["description"].as_str(), Some("d"));
    }

    #[test]
    fn knob_selection_names_the_unknown_one() {
        assert_eq!(
            select_knobs(&["pm_qos".into()], &[]).unwrap(),
            vec!["pm_qos"]
        );
        let e = select_knobs(&["pmqos".into()], &[]).unwrap_err();
        assert!(
            e.starts_with("--knobs pmqos: unknown knob (accepted: pm_qos, "),
            "{e}"
        );
        let e = select_knobs(&[], &["nope".into()]).unwrap_err();
        assert!(e.starts_with("--skip nope: unknown knob"), "{e}");
        assert!(select_knobs(&["idle".into()], &["idle".into()]).is_err());
    }

    #[test]
    fn the_budget_reserves_the_confirmation() {
        let spec = Spec {
            objective: Objective::P99,
            goal: Goal::Audio,
            repeats: 4,
            budget: Duration::from_secs(100),
            run_length: Duration::from_secs(5),
            cpus: CpuList::parse("0").unwrap(),
            state_dir: PathBuf::new(),
            seed: 1,
        };
        // 20 runs: 8 for the confirmation, 12 = 3 rounds of 4 ... of 4 repeats: 3 cells.
        assert_eq!(spec.screenable(10), Some(2));
        assert_eq!(spec.screenable(1), Some(1));
        let tight = Spec {
            budget: Duration::from_secs(79),
            ..spec.clone()
        };
        assert_eq!(tight.screenable(3), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
