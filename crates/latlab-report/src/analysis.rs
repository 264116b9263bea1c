//! The numbers every report format shows, computed once from the runs: statistics from the
//! histograms, what the runs cost, the spread across repeats, the configuration diff and the
//! comparisons with their support.
//!
//! Rules, the same in every format:
//! - a cell's latency statistics are those of the merged histogram of all its repeats
//!   ([`Stats::of`]); a run's are those of its overall histogram; a CPU's, of its thread histograms
//!   merged over the repeats. The statistics stored in the result are not used, so every number is
//!   the one its histogram gives, with one exception: percentiles an imported run's tool computed
//!   exactly where its histogram gives only a lower bound (`Stats::exact_percentiles`) replace the
//!   histogram's for that run, and for its cell and CPUs when the cell has that one run.
//! - power, energy, frequency, idle residency and throughput of a cell are the median over its
//!   repeats; a run without the data says why, never a number.
//! - comparisons are against the first cell (the baseline), or the cell a cell names as its
//!   baseline ([`CellInput::baseline`]); a verdict needs at least
//!   [`MIN_REPEATS`] repeats of both cells, and then rests on a two-sided Mann-Whitney U test of the
//!   per-repeat values at [`ALPHA`].

use std::collections::BTreeMap;

use latlab_hist::Histogram;
use latlab_model::samples::{PowerSource, Samples};
use latlab_model::system::Field;
use latlab_model::{RunResult, Stats, SystemInfo};

use crate::flatten::{DiffRow, diff, flatten_run};
use crate::input::{CellInput, ReportInput};
use crate::mann_whitney::{MannWhitney, mann_whitney};
use crate::numfmt;

/// Significance level of the verdicts (the reports' and `tune search`'s).
pub const ALPHA: f64 = 0.05;
/// Repeats each cell needs before a comparison can get a verdict: with n repeats a side, the
/// smallest two-sided exact Mann-Whitney p-value is 2 / C(2n, n) (0.333 at 2, 0.1 at 3, 0.029 at
/// 4), so fewer than 4 can never go below [`ALPHA`].
pub const MIN_REPEATS: usize = 4;

/// A kind of work a load counted, in one unit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ThroughputKey {
    pub what: String,
    pub unit: String,
}

impl ThroughputKey {
    pub fn label(&self) -> String {
        format!("{} ({})", self.what, self.unit)
    }
}

/// The power a run drew: its package sources summed, or else its first source with a reading.
#[derive(Debug, Clone)]
pub(crate) struct Power {
    pub source: String,
    pub watts: f64,
    pub joules: Option<f64>,
}

/// One run and what was derived from it.
pub(crate) struct RunFigures<'a> {
    pub run: &'a RunResult,
    /// 1-based position among the cell's repeats.
    pub repeat: usize,
    pub stats: Stats,
    /// `None` where the run's format does not count them (an import).
    pub missed: Option<u64>,
    pub power: Result<Power, String>,
    pub freq_mhz: Result<f64, String>,
    /// Time stolen by the hypervisor during the run, percent, mean over the CPUs (a
    /// measurement, not a setting: it is not part of the configuration diff).
    pub steal_pct: Result<f64, String>,
    /// Mean share of the run in each idle state over the CPUs, percent.
    pub idle: Result<Vec<(String, f64)>, String>,
    /// Per throughput key (index into [`Analysis::keys`]): the run's rate.
    pub throughput: Vec<(usize, f64)>,
    pub config: BTreeMap<String, String>,
}

/// One CPU (thread label) of a cell, merged over its repeats.
pub(crate) struct CpuFigures {
    pub label: String,
    pub hist: Histogram,
    pub stats: Stats,
    /// `None` where a run of the cell does not count them (an import).
    pub missed: Option<u64>,
}

/// One cell and what was derived from it.
pub(crate) struct CellFigures<'a> {
    pub cell: &'a CellInput,
    pub index: usize,
    pub pooled: Histogram,
    pub stats: Stats,
    /// Missed periods over all repeats; `None` where a run does not count them (an import).
    pub missed: Option<u64>,
    pub cpus: Vec<CpuFigures>,
    pub runs: Vec<RunFigures<'a>>,
}

/// From this share of missed periods (percent) on, a cell's latencies are a selection: the
/// wake-ups that happened, without the stalls that took the others.
pub const MISSED_SELECTION_PCT: f64 = 5.0;

impl CellFigures<'_> {
    /// The share of its periods the cell missed, percent.
    pub fn missed_pct(&self) -> f64 {
        let missed = self.missed.unwrap_or(0);
        let periods = self.stats.count + missed;
        missed as f64 / periods.max(1) as f64 * 100.0
    }
}

/// A statistic that can be compared across repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metric {
    Min,
    P50,
    P90,
    P99,
    P99_9,
    P99_99,
    Max,
    Mean,
    Stdev,
    Missed,
    PowerW,
    EnergyJ,
    FreqMhz,
    /// Index into [`Analysis::keys`].
    Throughput(usize),
}

/// Latency statistics in table order, with their short names.
pub(crate) const LATENCY: [(Metric, &str); 9] = [
    (Metric::Min, "min"),
    (Metric::P50, "p50"),
    (Metric::P90, "p90"),
    (Metric::P99, "p99"),
    (Metric::P99_9, "p99.9"),
    (Metric::P99_99, "p99.99"),
    (Metric::Max, "max"),
    (Metric::Mean, "mean"),
    (Metric::Stdev, "stdev"),
];

impl Metric {
    /// The percentile (0–100) a latency statistic is, if it is one.
    pub fn percentile(self) -> Option<f64> {
        match self {
            Metric::P50 => Some(50.0),
            Metric::P90 => Some(90.0),
            Metric::P99 => Some(99.0),
            Metric::P99_9 => Some(99.9),
            Metric::P99_99 => Some(99.99),
            _ => None,
        }
    }

    pub fn is_latency(self) -> bool {
        LATENCY.iter().any(|(m, _)| *m == self)
    }

    /// Short name without unit: `p99`, `power`, `matrix multiplies`.
    pub fn name(self, keys: &[ThroughputKey]) -> String {
        if let Some((_, n)) = LATENCY.iter().find(|(m, _)| *m == self) {
            return (*n).to_string();
        }
        match self {
            Metric::Missed => "missed".into(),
            Metric::PowerW => "power".into(),
            Metric::EnergyJ => "energy".into(),
            Metric::FreqMhz => "frequency".into(),
            Metric::Throughput(i) => keys.get(i).map_or_else(String::new, |k| k.what.clone()),
            _ => String::new(),
        }
    }

    /// The unit values are shown in.
    pub fn unit(self, keys: &[ThroughputKey]) -> String {
        match self {
            m if m.is_latency() => "µs".into(),
            // A share: runs of other intervals or lengths have other numbers of periods.
            Metric::Missed => "% of periods".into(),
            Metric::PowerW => "W".into(),
            Metric::EnergyJ => "J".into(),
            Metric::FreqMhz => "MHz".into(),
            Metric::Throughput(i) => keys.get(i).map_or_else(String::new, |k| k.unit.clone()),
            _ => String::new(),
        }
    }

    /// `p99 (µs)`.
    pub fn label(self, keys: &[ThroughputKey]) -> String {
        format!("{} ({})", self.name(keys), self.unit(keys))
    }

    /// A machine-readable name (JSON keys, CSV columns).
    pub fn key(self, keys: &[ThroughputKey]) -> String {
        match self {
            Metric::P99_9 => "p99_9".into(),
            Metric::P99_99 => "p99_99".into(),
            Metric::Missed => "missed_pct".into(),
            Metric::PowerW => "power_w".into(),
            Metric::EnergyJ => "energy_j".into(),
            Metric::FreqMhz => "frequency_mhz".into(),
            Metric::Throughput(i) => keys.get(i).map_or_else(String::new, |k| {
                format!("throughput:{} ({})", k.what, k.unit)
            }),
            m => m.name(keys),
        }
    }

    /// A value (nanoseconds for latencies) as shown in tables.
    pub fn format(self, v: f64) -> String {
        match self {
            m if m.is_latency() => numfmt::us_f(v),
            Metric::Missed => format!("{v:.3}"),
            Metric::PowerW => format!("{v:.2}"),
            Metric::EnergyJ => format!("{v:.1}"),
            Metric::FreqMhz => format!("{v:.0}"),
            Metric::Throughput(_) => numfmt::si(v),
            _ => format!("{v}"),
        }
    }

    /// A difference of two values as shown in tables.
    pub fn format_diff(self, d: f64) -> String {
        if self.is_latency() {
            return numfmt::us_signed(d);
        }
        let s = self.format(d.abs());
        if d > 0.0 {
            format!("+{s}")
        } else if d < 0.0 {
            format!("-{s}")
        } else {
            s
        }
    }
}

/// A whole-nanosecond statistic of `s` (min, a percentile, max) as shown: a lower bound is
/// its bound ([`Stats::percentile_shown`]); 0 for any other metric.
pub(crate) fn int_stat(s: &Stats, m: Metric) -> u64 {
    let v = raw_int_stat(s, m);
    match m.percentile() {
        Some(p) if s.count > 0 => s.percentile_shown(p, v),
        _ => v,
    }
}

/// [`int_stat`] as the histogram gives it.
fn raw_int_stat(s: &Stats, m: Metric) -> u64 {
    match m {
        Metric::Min => s.min,
        Metric::P50 => s.p50,
        Metric::P90 => s.p90,
        Metric::P99 => s.p99,
        Metric::P99_9 => s.p99_9,
        Metric::P99_99 => s.p99_99,
        Metric::Max => s.max,
        _ => 0,
    }
}

/// Whether `s`'s value of latency statistic `m` is only a lower bound: an import's samples
/// beyond its histogram's range lie under it ("≥" wherever it is shown).
pub(crate) fn stat_is_lower_bound(s: &Stats, m: Metric) -> bool {
    if s.count == 0 {
        return false;
    }
    match m {
        Metric::Mean => s.mean_is_lower_bound(),
        Metric::Stdev => s.stdev_is_lower_bound(),
        m => m
            .percentile()
            .is_some_and(|p| s.percentile_is_lower_bound(p, raw_int_stat(s, m))),
    }
}

/// Any latency statistic of `s` ([`LATENCY`]); `None` without samples or for another metric.
fn stat(s: &Stats, m: Metric) -> Option<f64> {
    if s.count == 0 {
        return None;
    }
    Some(match m {
        Metric::Mean => s.mean,
        Metric::Stdev => s.stdev,
        m if m.is_latency() => int_stat(s, m) as f64,
        _ => return None,
    })
}

impl RunFigures<'_> {
    pub fn value(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Missed => self.missed.map(|m| {
                let periods = self.stats.count + m;
                m as f64 / periods.max(1) as f64 * 100.0
            }),
            Metric::PowerW => self.power.as_ref().ok().map(|p| p.watts),
            Metric::EnergyJ => self.power.as_ref().ok().and_then(|p| p.joules),
            Metric::FreqMhz => self.freq_mhz.as_ref().ok().copied(),
            Metric::Throughput(i) => self
                .throughput
                .iter()
                .find(|(k, _)| *k == i)
                .map(|(_, v)| *v),
            m => stat(&self.stats, m),
        }
    }
}

/// Median and extremes of a statistic over a cell's repeats.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spread {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

pub(crate) fn spread(values: &[f64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        n,
        min: v[0],
        median,
        max: v[n - 1],
    })
}

impl CellFigures<'_> {
    /// The statistic of every repeat that has it.
    pub fn values(&self, m: Metric) -> Vec<f64> {
        self.runs.iter().filter_map(|r| r.value(m)).collect()
    }

    pub fn spread(&self, m: Metric) -> Option<Spread> {
        spread(&self.values(m))
    }

    /// Whether the cell's value of `m`, or a repeat's, is only a lower bound (latency
    /// statistics of imports whose samples ran past their histogram).
    pub fn is_lower_bound(&self, m: Metric) -> bool {
        m.is_latency()
            && (stat_is_lower_bound(&self.stats, m)
                || self.runs.iter().any(|r| stat_is_lower_bound(&r.stats, m)))
    }

    /// The cell's value: latency statistics of the pooled histogram; the median over the repeats
    /// for everything else.
    pub fn value(&self, m: Metric) -> Option<f64> {
        if m.is_latency() {
            stat(&self.stats, m)
        } else {
            self.spread(m).map(|s| s.median)
        }
    }
}

/// What the repeats say about one statistic of cell `b` against cell `a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `b` is lower (p < [`ALPHA`]).
    Lower,
    /// `b` is higher (p < [`ALPHA`]).
    Higher,
    /// Every repeat of `b` is below every repeat of `a`, but p is not below [`ALPHA`].
    LowerEveryRepeat,
    HigherEveryRepeat,
    /// Neither: the repeats overlap and p ≥ [`ALPHA`].
    NoDifference,
}

impl Verdict {
    /// `lower` or `higher`, and whether only every repeat is (p not below [`ALPHA`]); `None`
    /// for no difference.
    fn direction(self) -> Option<(&'static str, bool)> {
        match self {
            Verdict::Lower => Some(("lower", false)),
            Verdict::Higher => Some(("higher", false)),
            Verdict::LowerEveryRepeat => Some(("lower", true)),
            Verdict::HigherEveryRepeat => Some(("higher", true)),
            Verdict::NoDifference => None,
        }
    }
}

/// The end of a sentence on a difference every repeat shows but the test `stat` does not.
fn not_yet_shown(stat: &str) -> String {
    format!("in every repeat, but {stat} is not below {ALPHA}: more repeats needed")
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Support {
    /// One of the cells has no value for the statistic.
    NoData,
    NotEnough {
        n_a: usize,
        n_b: usize,
    },
    Tested {
        test: MannWhitney,
        verdict: Verdict,
    },
    /// Not tested: a cell missed this share of its periods (percent, at least
    /// [`MISSED_SELECTION_PCT`]), so its latencies are a selection: the cell compared
    /// (`by_cell`) or its baseline.
    Selection {
        missed_pct: f64,
        by_cell: bool,
    },
    /// Not tested: the value of the cell, of its baseline or of a repeat of either is only a
    /// lower bound (an import's samples beyond its histogram's range), so no difference in it
    /// can be told.
    LowerBound {
        baseline: bool,
        cell: bool,
    },
}

impl Support {
    pub fn of(a: &[f64], b: &[f64]) -> Support {
        if a.is_empty() || b.is_empty() {
            return Support::NoData;
        }
        if a.len() < MIN_REPEATS || b.len() < MIN_REPEATS {
            return Support::NotEnough {
                n_a: a.len(),
                n_b: b.len(),
            };
        }
        let Some(test) = mann_whitney(a, b) else {
            return Support::NoData;
        };
        let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
        let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
        let b_lower = test.u_b < test.u_a;
        let verdict = if test.p < ALPHA && test.u_a != test.u_b {
            if b_lower {
                Verdict::Lower
            } else {
                Verdict::Higher
            }
        } else if max(b) < min(a) {
            Verdict::LowerEveryRepeat
        } else if min(b) > max(a) {
            Verdict::HigherEveryRepeat
        } else {
            Verdict::NoDifference
        };
        Support::Tested { test, verdict }
    }

    /// A machine-readable verdict.
    pub fn verdict_key(&self) -> &'static str {
        match self {
            Support::NoData => "no-data",
            Support::NotEnough { .. } => "not-enough-repeats",
            Support::Selection { .. } => "not-compared-missed-periods",
            Support::LowerBound { .. } => "not-compared-lower-bound",
            Support::Tested { verdict, .. } => match verdict {
                Verdict::Lower => "lower",
                Verdict::Higher => "higher",
                Verdict::LowerEveryRepeat => "lower-every-repeat-not-significant",
                Verdict::HigherEveryRepeat => "higher-every-repeat-not-significant",
                Verdict::NoDifference => "no-difference-shown",
            },
        }
    }

    /// `U = 0, p = 0.029` (empty without a test).
    pub fn statistic(&self) -> String {
        match self {
            Support::Tested { test, .. } => format!(
                "U = {}, p = {}{}",
                numfmt::u_stat(test.u()),
                numfmt::p_value(test.p),
                if test.exact { "" } else { " (normal approx.)" }
            ),
            _ => String::new(),
        }
    }

    /// One sentence naming both cells: `b lower than a (U = 0, p = 0.029)`.
    pub fn sentence(&self, b: &str, a: &str) -> String {
        let stat = self.statistic();
        match self {
            Support::Tested { verdict, .. } => match verdict.direction() {
                Some((dir, false)) => format!("{b} {dir} than {a} ({stat})"),
                Some((dir, true)) => format!("{b} {dir} than {a} {}", not_yet_shown(&stat)),
                None => format!("no difference shown ({stat})"),
            },
            Support::Selection {
                missed_pct,
                by_cell,
            } => format!(
                "not compared: {} missed {missed_pct:.1} % of its periods, so its latencies are \
                 only the wake-ups that happened (each run's corrected statistics, in \
                 `latlab export --format json` or `csv`, count the missed ones)",
                if *by_cell { b } else { a }
            ),
            Support::LowerBound { baseline, cell } => lower_bound_text((*baseline, *cell), a, b),
            other => other.text(b),
        }
    }

    /// The support in words, naming cell `b`.
    pub fn text(&self, b: &str) -> String {
        match self {
            Support::NoData => "no data".into(),
            Support::NotEnough { n_a, n_b } => {
                format!("not enough repeats to decide ({n_a} and {n_b}; {MIN_REPEATS} each needed)")
            }
            Support::Selection {
                missed_pct,
                by_cell,
            } => {
                let who = if *by_cell { b } else { "its baseline" };
                format!("not compared: {who} missed {missed_pct:.1} % of its periods")
            }
            Support::LowerBound { baseline, cell } => {
                lower_bound_text((*baseline, *cell), "its baseline", b)
            }
            Support::Tested { verdict, .. } => {
                let stat = self.statistic();
                match verdict.direction() {
                    Some((dir, false)) => format!("{b} {dir}: {stat}"),
                    Some((dir, true)) => format!("{b} {dir} {}", not_yet_shown(&stat)),
                    None => format!("no difference shown: {stat}"),
                }
            }
        }
    }
}

/// `not compared: …` naming whose value is a lower bound, from whether the baseline's (`a`,
/// its name) and the cell's (`b`) are.
fn lower_bound_text((baseline, cell): (bool, bool), a: &str, b: &str) -> String {
    let who = match (baseline, cell) {
        (true, true) => "both values are only lower bounds".to_string(),
        (true, false) => format!("{a}'s value is only a lower bound"),
        _ => format!("{b}'s value is only a lower bound"),
    };
    format!("not compared: {who} (samples beyond an import's histogram range)")
}

/// One statistic of cell `b` against cell `a`.
#[derive(Debug, Clone)]
pub(crate) struct MetricComparison {
    pub metric: Metric,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// Whether `a` and `b` are only lower bounds: shown "≥", and no difference is computed.
    pub at_least: (bool, bool),
    pub support: Support,
}

impl MetricComparison {
    /// `b - a`; `None` where either is only a lower bound.
    pub fn diff(&self) -> Option<f64> {
        if self.at_least != (false, false) {
            return None;
        }
        Some(self.b? - self.a?)
    }

    /// `a` and `b` as shown: "≥" before a lower bound, "-" for none.
    pub fn shown(&self) -> (String, String) {
        let f = |v: Option<f64>, bound: bool| {
            v.map_or_else(
                || "-".to_string(),
                |v| format!("{}{}", if bound { "≥" } else { "" }, self.metric.format(v)),
            )
        };
        (f(self.a, self.at_least.0), f(self.b, self.at_least.1))
    }

    /// `b / a - 1` in percent; `None` where either is only a lower bound.
    pub fn percent(&self) -> Option<f64> {
        self.diff()?;
        let a = self.a?;
        if a == 0.0 {
            return None;
        }
        Some((self.b? - a) / a * 100.0)
    }
}

/// Where two cells' repeats took samples in numbers a factor of 2 or more apart, a clause
/// saying so: their minima and maxima are not like draws, since the more samples a run takes,
/// the farther out its extremes lie.
pub(crate) fn extremes_caveat(a: &CellFigures, b: &CellFigures) -> Option<String> {
    extremes_caveat_named(a, b, (&a.cell.name, &b.cell.name))
}

/// [`extremes_caveat`] with the names the cells go by where it is said (`compare`'s A and B).
pub(crate) fn extremes_caveat_named(
    a: &CellFigures,
    b: &CellFigures,
    (name_a, name_b): (&str, &str),
) -> Option<String> {
    let per_repeat = |c: &CellFigures| c.stats.count as f64 / c.runs.len().max(1) as f64;
    let (na, nb) = (per_repeat(a), per_repeat(b));
    if na <= 0.0 || nb <= 0.0 {
        return None;
    }
    let (more, fewer, ratio) = if nb >= na {
        (name_b, name_a, nb / na)
    } else {
        (name_a, name_b, na / nb)
    };
    // One run each: "its run", not "its repeats … each".
    let (what, each) = if a.runs.len() <= 1 && b.runs.len() <= 1 {
        ("run", "")
    } else {
        ("repeats", " each")
    };
    (ratio >= 2.0).then(|| {
        format!(
            "{more}'s {what} took {ratio:.1} times the samples of {fewer}'s{each}, and the more \
             samples, the farther out the minimum and maximum lie"
        )
    })
}

pub(crate) fn compare(a: &CellFigures, b: &CellFigures, metric: Metric) -> MetricComparison {
    // Latencies of a cell that missed many periods are the wake-ups that made it: a test on
    // them would call the cell that stalls most the fastest.
    let (pa, pb) = (a.missed_pct(), b.missed_pct());
    let at_least = (a.is_lower_bound(metric), b.is_lower_bound(metric));
    let support = if metric.is_latency() && pa.max(pb) >= MISSED_SELECTION_PCT {
        Support::Selection {
            missed_pct: pa.max(pb),
            by_cell: pb >= pa,
        }
    } else if at_least != (false, false) {
        Support::LowerBound {
            baseline: at_least.0,
            cell: at_least.1,
        }
    } else {
        Support::of(&a.values(metric), &b.values(metric))
    };
    MetricComparison {
        metric,
        a: a.value(metric),
        b: b.value(metric),
        at_least,
        support,
    }
}

/// Runs taken on the same system (host, kernel, CPU).
pub(crate) struct SystemGroup<'a> {
    pub system: &'a SystemInfo,
    /// `(cell index, repeat index)` of its runs.
    pub runs: Vec<(usize, usize)>,
}

/// Everything derived from a report's input.
pub(crate) struct Analysis<'a> {
    pub title: String,
    pub cells: Vec<CellFigures<'a>>,
    pub keys: Vec<ThroughputKey>,
    pub diff: Vec<DiffRow>,
    pub systems: Vec<SystemGroup<'a>>,
    /// Cells that did not run: `(name, reason)`.
    pub skipped: Vec<(String, String)>,
}

impl<'a> Analysis<'a> {
    pub fn new(input: &'a ReportInput) -> Analysis<'a> {
        let mut a = Analysis::of_cells(&input.title, input.cells.iter().collect());
        a.skipped = input.skipped.clone();
        a
    }

    pub fn of_cells(title: &str, cells: Vec<&'a CellInput>) -> Analysis<'a> {
        let mut keys: Vec<ThroughputKey> = Vec::new();
        for c in &cells {
            for r in &c.runs {
                for l in &r.loads.reports {
                    for t in &l.throughput {
                        let k = ThroughputKey {
                            what: t.what.clone(),
                            unit: t.unit.clone(),
                        };
                        if !keys.contains(&k) {
                            keys.push(k);
                        }
                    }
                }
            }
        }
        let cells: Vec<CellFigures<'a>> = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| cell_figures(i, c, &keys))
            .collect();
        let configs: Vec<Vec<BTreeMap<String, String>>> = cells
            .iter()
            .map(|c| c.runs.iter().map(|r| r.config.clone()).collect())
            .collect();
        let diff = diff(&configs);
        let mut systems: Vec<SystemGroup<'a>> = Vec::new();
        for c in &cells {
            for (ri, r) in c.runs.iter().enumerate() {
                let s = &r.run.system;
                let same = |g: &SystemGroup| {
                    g.system.hostname == s.hostname
                        && g.system.kernel_release == s.kernel_release
                        && g.system.kernel_version == s.kernel_version
                        && g.system.cpu_model == s.cpu_model
                        && g.system.machine == s.machine
                };
                match systems.iter_mut().find(|g| same(g)) {
                    Some(g) => g.runs.push((c.index, ri)),
                    None => systems.push(SystemGroup {
                        system: s,
                        runs: vec![(c.index, ri)],
                    }),
                }
            }
        }
        Analysis {
            title: title.to_string(),
            cells,
            keys,
            diff,
            systems,
            skipped: Vec::new(),
        }
    }

    /// Every comparable statistic: latency, missed periods, and the cost statistics some run has.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m: Vec<Metric> = LATENCY.iter().map(|(m, _)| *m).collect();
        m.push(Metric::Missed);
        for extra in [Metric::PowerW, Metric::EnergyJ, Metric::FreqMhz] {
            if self.cells.iter().any(|c| !c.values(extra).is_empty()) {
                m.push(extra);
            }
        }
        m.extend((0..self.keys.len()).map(Metric::Throughput));
        m
    }

    /// The cell `ci` is compared against: the one it names, else the first.
    pub fn baseline_of(&self, ci: usize) -> usize {
        self.cells[ci]
            .cell
            .baseline
            .as_deref()
            .and_then(|name| self.cells.iter().position(|c| c.cell.name == name))
            .filter(|&b| b != ci)
            .unwrap_or(0)
    }

    /// Every cell after the first against its baseline, statistic by statistic:
    /// `(cell, baseline, rows)`.
    pub fn comparisons(&self) -> Vec<(usize, usize, Vec<MetricComparison>)> {
        let metrics = self.metrics();
        (1..self.cells.len())
            .map(|ci| {
                let bi = self.baseline_of(ci);
                let (base, c) = (&self.cells[bi], &self.cells[ci]);
                (
                    c.index,
                    bi,
                    metrics.iter().map(|&m| compare(base, c, m)).collect(),
                )
            })
            .collect()
    }

    pub fn run_count(&self) -> usize {
        self.cells.iter().map(|c| c.runs.len()).sum()
    }
}

fn cell_figures<'a>(index: usize, cell: &'a CellInput, keys: &[ThroughputKey]) -> CellFigures<'a> {
    let mut pooled = Histogram::new();
    // Missed periods are known when every run counted them.
    let counted = cell.runs.iter().all(RunResult::records_missed);
    let mut missed = 0;
    let mut cpus: Vec<CpuFigures> = Vec::new();
    let mut runs = Vec::new();
    for (i, run) in cell.runs.iter().enumerate() {
        pooled.merge(&run.overall.histogram);
        missed += run.overall.missed;
        for t in &run.threads {
            match cpus.iter_mut().find(|c| c.label == t.label) {
                Some(c) => {
                    c.hist.merge(&t.histogram);
                    c.missed = c.missed.map(|m| m + t.missed);
                }
                None => cpus.push(CpuFigures {
                    label: t.label.clone(),
                    hist: t.histogram.clone(),
                    stats: Stats::default(),
                    missed: counted.then_some(t.missed),
                }),
            }
        }
        runs.push(run_figures(i + 1, &cell.params, run, keys));
    }
    // A cell of one run is that run: its exact percentiles hold for the cell and its CPUs.
    let only = match cell.runs.as_slice() {
        [run] => Some(run),
        _ => None,
    };
    for c in &mut cpus {
        let none = Stats::default();
        let known = only
            .and_then(|r| r.threads.iter().find(|t| t.label == c.label))
            .map_or(&none, |t| &t.stats);
        let parts = || {
            cell.runs
                .iter()
                .flat_map(|r| &r.threads)
                .filter(|t| t.label == c.label)
                .map(|t| &t.stats)
        };
        c.stats = Stats::of(&c.hist)
            .with_exact_of(known)
            .with_pooled_exact(parts());
        // Pooled, values from the lowest range end of an import on are lower bounds.
        c.stats.bounded_from_ns = parts().filter_map(|s| s.bounded_from_ns).min();
    }
    let none = Stats::default();
    let known = only.map_or(&none, |r| &r.overall.stats);
    let mut stats = Stats::of(&pooled)
        .with_exact_of(known)
        .with_pooled_exact(cell.runs.iter().map(|r| &r.overall.stats));
    stats.bounded_from_ns = cell.runs.iter().filter_map(lower_bounds_from).min();
    CellFigures {
        cell,
        index,
        stats,
        pooled,
        missed: counted.then_some(missed),
        cpus,
        runs,
    }
}

/// Where a run's values become lower bounds: the lowest histogram range end of its threads
/// (an import's samples beyond it are known only to lie there or above).
fn lower_bounds_from(run: &RunResult) -> Option<u64> {
    run.threads
        .iter()
        .filter_map(|t| t.stats.bounded_from_ns)
        .chain(run.overall.stats.bounded_from_ns)
        .min()
}

fn run_figures<'a>(
    repeat: usize,
    params: &BTreeMap<String, String>,
    run: &'a RunResult,
    keys: &[ThroughputKey],
) -> RunFigures<'a> {
    let no_samples = || "no sampler data in this run".to_string();
    let samples = run.samples.as_ref();
    RunFigures {
        run,
        repeat,
        stats: Stats {
            bounded_from_ns: lower_bounds_from(run),
            ..Stats::of(&run.overall.histogram).with_exact_of(&run.overall.stats)
        },
        missed: run.records_missed().then_some(run.overall.missed),
        power: samples.map_or_else(|| Err(no_samples()), power),
        freq_mhz: samples.map_or_else(|| Err(no_samples()), |s| frequency(s, run)),
        steal_pct: samples.map_or_else(|| Err(no_samples()), steal),
        idle: samples.map_or_else(|| Err(no_samples()), |s| idle(s, run)),
        throughput: throughput(run, keys),
        config: flatten_run(params, run),
    }
}

/// The mean power a run drew (its package sources summed, else its first source with a
/// reading), or why there is none.
pub fn run_power_w(run: &RunResult) -> Result<f64, String> {
    match &run.samples {
        Some(s) => power(s).map(|p| p.watts),
        None => Err("no sampler data in this run".into()),
    }
}

/// The loads' throughput over a run: the first kind of work they counted (its label and rate),
/// summed over the loads that counted it.
pub fn run_throughput(run: &RunResult) -> Option<(String, f64)> {
    let t = run
        .loads
        .reports
        .iter()
        .flat_map(|l| &l.throughput)
        .next()?;
    let key = ThroughputKey {
        what: t.what.clone(),
        unit: t.unit.clone(),
    };
    let rate = throughput(run, std::slice::from_ref(&key)).first()?.1;
    Some((key.label(), rate))
}

fn is_package(name: &str) -> bool {
    name.contains("package") || name.contains("energy-pkg")
}

pub(crate) fn power(s: &Samples) -> Result<Power, String> {
    let sources = match &s.power_sources {
        Field::Value(v) => v,
        Field::Unavailable { unavailable } => return Err(unavailable.clone()),
    };
    if sources.is_empty() {
        return Err("no power source found".into());
    }
    // 0 W is no reading: a running system draws power, and a meter whose counter stood still
    // (runs stored before such meters were said to give none) measured nothing.
    let read = |p: &&PowerSource| p.avg_w.is_some_and(|w| w > 0.0);
    let mut chosen: Vec<_> = sources
        .iter()
        .filter(|p| read(p) && is_package(&p.name))
        .collect();
    if chosen.is_empty() {
        chosen = sources.iter().filter(read).take(1).collect();
    }
    if chosen.is_empty() {
        return Err("the power sources gave no reading".into());
    }
    let joules: Option<Vec<f64>> = chosen.iter().map(|p| p.energy_j).collect();
    Ok(Power {
        source: chosen
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        watts: chosen.iter().filter_map(|p| p.avg_w).sum(),
        joules: joules.map(|j| j.iter().sum()),
    })
}

/// A cell's repeat as the report names it: the cell's name alone when it has one run.
pub(crate) fn repeat_name(c: &CellFigures, repeat: usize) -> String {
    if c.runs.len() > 1 {
        format!("{} repeat {repeat}", c.cell.name)
    } else {
        c.cell.name.clone()
    }
}

/// Whether CPU `cpu` is one `run` measured on: its pinned CPUs, or any for an unpinned run.
/// A cell's frequency and idle residency are its measured CPUs' (a per-core setting shows on
/// its core, not diluted by the housekeeping CPUs).
fn measured_on(run: &RunResult, cpu: usize) -> bool {
    run.config
        .cpus
        .as_ref()
        .is_none_or(|cpus| cpus.iter().any(|&c| c as usize == cpu))
}

/// The mean frequency of the CPUs `run` measured on, or why there is none.
fn frequency(s: &Samples, run: &RunResult) -> Result<f64, String> {
    if let Field::Unavailable { unavailable } = &s.frequency {
        return Err(unavailable.clone());
    }
    let khz: Vec<u64> = s
        .cpus
        .iter()
        .filter(|c| measured_on(run, c.cpu))
        .filter_map(|c| c.avg_freq_khz)
        .collect();
    if khz.is_empty() {
        return Err("no frequency readings".into());
    }
    Ok(khz.iter().sum::<u64>() as f64 / khz.len() as f64 / 1000.0)
}

/// Latency in one load phase of a run: its windows whose middle falls in the phase, over every
/// CPU. Samples, missed periods and the maximum are exact; a phase's p99 is not kept, so the
/// highest of its windows' is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PhaseLatency {
    pub samples: u64,
    pub missed: u64,
    pub max: u64,
    pub window_p99: u64,
}

pub(crate) fn phase_latency(
    run: &RunResult,
    phase: &latlab_model::load::LoadPhase,
) -> Option<PhaseLatency> {
    let half = run.config.window_ns / 2;
    let mut out: Option<PhaseLatency> = None;
    for w in run.threads.iter().flat_map(|t| &t.windows) {
        let middle = w.start_ns + half;
        if middle < phase.start_ns || middle >= phase.end_ns {
            continue;
        }
        let o = out.get_or_insert_with(PhaseLatency::default);
        o.samples += w.count;
        o.missed += w.missed;
        o.max = o.max.max(w.max);
        o.window_p99 = o.window_p99.max(w.p99);
    }
    out
}

/// Steal time during the run, mean over the CPUs that counted it.
pub(crate) fn steal(s: &Samples) -> Result<f64, String> {
    let pct: Vec<f64> = s.cpus.iter().filter_map(|c| c.steal_pct).collect();
    if pct.is_empty() {
        return Err("no steal time readings".into());
    }
    Ok(pct.iter().sum::<f64>() / pct.len() as f64)
}

/// Idle-state names in first-seen order over the CPUs.
pub(crate) fn idle_state_names(s: &Samples) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for c in &s.idle_states {
        for n in &c.states {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    names
}

/// Each CPU's idle residency as the samplers read it: `(cpu, [(state, percent)])`.
pub(crate) fn idle_per_cpu(s: &Samples) -> Vec<(usize, Vec<(&str, f64)>)> {
    s.cpus
        .iter()
        .filter_map(|c| {
            let states = s.idle_states.iter().find(|i| i.cpu == c.cpu)?;
            let pct = states.states.iter().map(String::as_str);
            Some((
                c.cpu,
                pct.zip(c.idle_residency_pct.iter().copied()).collect(),
            ))
        })
        .collect()
}

/// The mean idle-state residency of the CPUs `run` measured on, or why there is none.
fn idle(s: &Samples, run: &RunResult) -> Result<Vec<(String, f64)>, String> {
    let system = &run.system;
    let names = idle_state_names(s);
    let mut sums = vec![(0.0f64, 0usize); names.len()];
    let measured = idle_per_cpu(s)
        .into_iter()
        .filter(|(cpu, _)| measured_on(run, *cpu));
    for (_, states) in measured {
        for (name, pct) in states {
            if let Some(k) = names.iter().position(|n| n == name) {
                sums[k].0 += pct;
                sums[k].1 += 1;
            }
        }
    }
    if sums.iter().all(|(_, n)| *n == 0) {
        return Err(match &system.cpuidle {
            Field::Unavailable { unavailable } => unavailable.clone(),
            Field::Value(_) => "no idle-state readings".into(),
        });
    }
    Ok(names
        .into_iter()
        .zip(sums)
        .filter(|(_, (_, n))| *n > 0)
        .map(|(name, (sum, n))| (name, sum / n as f64))
        .collect())
}

/// The run's rate per throughput key: one load's rate, or for several loads counting the same
/// work, their total work over the span from the first start to the last end.
fn throughput(run: &RunResult, keys: &[ThroughputKey]) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let parts: Vec<_> = run
            .loads
            .reports
            .iter()
            .flat_map(|l| {
                l.throughput
                    .iter()
                    .filter(|t| t.what == key.what && t.unit == key.unit)
                    .map(move |t| (l, t))
            })
            .collect();
        match parts.as_slice() {
            [] => {}
            [(_, t)] => out.push((k, t.rate)),
            many => {
                let start = many.iter().map(|(l, _)| l.started_ns).min().unwrap_or(0);
                let end = many
                    .iter()
                    .map(|(l, _)| l.started_ns + l.elapsed_ns)
                    .max()
                    .unwrap_or(0);
                let total: f64 = many.iter().map(|(_, t)| t.total).sum();
                if end > start {
                    out.push((k, total / ((end - start) as f64 / 1e9)));
                }
            }
        }
    }
    out
}

/// Per window index over a run's threads: start, highest max, highest p99, samples, missed.
pub(crate) struct WindowRow {
    pub index: u64,
    pub start_ns: u64,
    pub max: u64,
    pub p99: u64,
    pub count: u64,
}

pub(crate) fn windows(run: &RunResult) -> Vec<WindowRow> {
    let mut by_index: BTreeMap<u64, WindowRow> = BTreeMap::new();
    for t in &run.threads {
        for w in &t.windows {
            let row = by_index.entry(w.index).or_insert(WindowRow {
                index: w.index,
                start_ns: w.start_ns,
                max: 0,
                p99: 0,
                count: 0,
            });
            row.start_ns = row.start_ns.min(w.start_ns);
            row.count += w.count;
            if w.count > 0 {
                row.max = row.max.max(w.max);
                row.p99 = row.p99.max(w.p99);
            }
        }
    }
    by_index.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let s = spread(&[3.0, 1.0, 2.0]).map(|s| (s.n, s.min, s.median, s.max));
        assert_eq!(s, Some((3, 1.0, 2.0, 3.0)));
        let s = spread(&[4.0, 1.0]).map(|s| s.median);
        assert_eq!(s, Some(2.5));
        assert!(spread(&[]).is_none());
    }

    #[test]
    fn verdicts() {
        let a = [100.0, 110.0, 120.0, 130.0];
        let b = [10.0, 11.0, 12.0, 13.0];
        let s = Support::of(&a, &b);
        assert_eq!(s.verdict_key(), "lower");
        assert!(
            s.text("B").starts_with("B lower: U = 0, p = 0.029"),
            "{}",
            s.text("B")
        );
        // Three repeats a side can never reach p < 0.05 (the smallest exact p is 0.1).
        let s = Support::of(&a[..3], &b[..3]);
        assert_eq!(s.verdict_key(), "not-enough-repeats");
        assert_eq!(
            s.text("B"),
            "not enough repeats to decide (3 and 3; 4 each needed)"
        );
        let s = Support::of(&b, &a);
        assert_eq!(s.verdict_key(), "higher", "{}", s.text("B"));
        let overlap_a = [10.0, 20.0, 30.0, 40.0];
        let overlap_b = [5.0, 15.0, 25.0, 35.0];
        let s = Support::of(&overlap_a, &overlap_b);
        assert_eq!(s.verdict_key(), "no-difference-shown");
        let s = Support::of(&a[..2], &b);
        assert_eq!(s.verdict_key(), "not-enough-repeats");
        assert_eq!(
            s.text("B"),
            "not enough repeats to decide (2 and 4; 4 each needed)"
        );
        assert_eq!(Support::of(&[], &b).verdict_key(), "no-data");
    }
}
