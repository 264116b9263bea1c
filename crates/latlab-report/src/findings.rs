//! The report's answer, first: the comparisons that have a supported verdict, the largest
//! differences that have none (yet), what a reader must know before trusting the numbers, and
//! the known signatures a result carries.
//!
//! A signature names a cause only where the numbers fit it, and says "consistent with", never
//! "caused by": the evidence is in the sentence so the reader can check it.

use latlab_model::RunResult;
use latlab_model::system::{Field, RtThrottling};

use crate::analysis::{
    ALPHA, Analysis, CellFigures, MIN_REPEATS, MISSED_SELECTION_PCT, Metric, Support, Verdict,
    extremes_caveat,
};
use crate::numfmt;

/// What a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A comparison with p < [`ALPHA`].
    Verdict,
    /// A large difference without a supported verdict.
    Open,
    /// Something that limits what the numbers say.
    Warning,
    /// A known pattern the numbers fit.
    Signature,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Verdict, Kind::Open, Kind::Warning, Kind::Signature];

    /// A machine-readable name (JSON).
    pub fn key(self) -> &'static str {
        match self {
            Kind::Verdict => "verdict",
            Kind::Open => "open",
            Kind::Warning => "warning",
            Kind::Signature => "signature",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::Verdict => "Supported differences",
            Kind::Open => "Largest differences without a verdict",
            Kind::Warning => "Before trusting the numbers",
            Kind::Signature => "Known signatures",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub kind: Kind,
    pub text: String,
}

/// Supported verdicts listed before the rest are left to the Comparisons section.
const VERDICTS_SHOWN: usize = 12;
/// Open differences listed.
const OPEN_SHOWN: usize = 3;
/// Statistics whose open differences are worth a line.
const OPEN_METRICS: [Metric; 5] = [
    Metric::P50,
    Metric::P99,
    Metric::P99_9,
    Metric::Max,
    Metric::PowerW,
];
/// Steal below this share of CPU time (percent) is not worth a warning.
const STEAL_WARN_PCT: f64 = 1.0;
/// How close (relative) a maximum must be to a known duration to fit it.
const FIT: f64 = 0.1;

pub(crate) fn findings(a: &Analysis) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut push = |kind: Kind, text: String| out.push(Finding { kind, text });
    comparisons(a, &mut push);
    warnings(a, &mut push);
    for c in &a.cells {
        signatures(c, &mut push);
    }
    out
}

fn pct_text(p: Option<f64>) -> String {
    p.map_or_else(String::new, |p| format!(", {}", numfmt::percent_signed(p)))
}

fn comparisons(a: &Analysis, push: &mut impl FnMut(Kind, String)) {
    let mut supported = Vec::new();
    let mut open = Vec::new();
    let mut tests = 0usize;
    for (ci, bi, rows) in a.comparisons() {
        let c = &a.cells[ci].cell.name;
        let base = &a.cells[bi];
        for r in rows {
            if r.a.is_none() || r.b.is_none() {
                continue;
            }
            tests += usize::from(matches!(r.support, Support::Tested { .. }));
            let (va, vb) = r.shown();
            // A cell's missed periods compared are the median of its repeats' shares, not the
            // sum the warnings below give.
            let (unit, of) = match r.metric {
                Metric::Missed => ("%".to_string(), " of the periods (medians of the repeats)"),
                m => (m.unit(&a.keys), ""),
            };
            let metric = r.metric.name(&a.keys);
            // A cell compared with another than the first names it.
            let against = if bi == 0 {
                String::new()
            } else {
                format!("{} ", base.cell.name)
            };
            let caveat = match r.metric {
                Metric::Min | Metric::Max => extremes_caveat(base, &a.cells[ci])
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let values = format!(
                "{vb} {unit} against {against}{va} {unit}{of}{}{caveat}",
                pct_text(r.percent())
            );
            match r.support {
                Support::Tested {
                    verdict: Verdict::Lower | Verdict::Higher,
                    ..
                } => supported.push(format!(
                    "{metric}: {}: {values}",
                    r.support.sentence(c, &base.cell.name)
                )),
                // Said once per cell among the warnings (missed periods).
                Support::Selection { .. } => {}
                _ if OPEN_METRICS.contains(&r.metric) => {
                    if let Some(p) = r.percent().filter(|p| p.abs() >= 5.0) {
                        open.push((
                            p.abs(),
                            format!("{metric}: {c} {values}: {}", r.support.text(c)),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    let n = supported.len();
    for s in supported.into_iter().take(VERDICTS_SHOWN) {
        push(Kind::Verdict, s);
    }
    if n > VERDICTS_SHOWN {
        push(
            Kind::Verdict,
            format!("and {} more in Comparisons", n - VERDICTS_SHOWN),
        );
    }
    // Each statistic of each comparison is a test of its own: among many, some reach the
    // threshold where nothing differs.
    if n > 0 && tests > 1 {
        push(
            Kind::Verdict,
            format!(
                "{n} of the {tests} tests here reached p < {ALPHA}; each is tested on its own, \
                 uncorrected for their number: where nothing differs, up to one in twenty would \
                 reach it by chance (about {:.1} here), so a difference supported once is \
                 worth repeating",
                tests as f64 * ALPHA
            ),
        );
    }
    if n == 0 && a.cells.len() > 1 {
        push(
            Kind::Verdict,
            format!("no comparison reached p < {ALPHA}: no difference is supported yet"),
        );
    }
    open.sort_by(|x, y| y.0.total_cmp(&x.0));
    for (_, s) in open.into_iter().take(OPEN_SHOWN) {
        push(Kind::Open, s);
    }
}

/// One run in two cells (a store copied, an item named twice under two names): what compares
/// them compares a run with itself.
fn runs_in_two_cells(
    runs: &[(&CellFigures, usize, &RunResult)],
    push: &mut impl FnMut(Kind, String),
) {
    let mut twice: Vec<(&str, &str, &str)> = Vec::new();
    for (i, (ci, _, r)) in runs.iter().enumerate() {
        if let Some((cj, _, _)) = runs[..i]
            .iter()
            // The id and the start: a series' id is its name (`series:NAME`), which two
            // stores' series may share without being one.
            .find(|(cj, _, o)| {
                o.id == r.id && o.start_unix_ns == r.start_unix_ns && cj.cell.name != ci.cell.name
            })
            && !twice.iter().any(|(id, ..)| *id == r.id)
        {
            twice.push((&r.id, &cj.cell.name, &ci.cell.name));
        }
    }
    if let Some((id, a, b)) = twice.first() {
        let which = match twice.len() {
            1 => format!("run {id} is in two cells, {a} and {b}"),
            n => format!("{n} runs are each in two cells, run {id} in {a} and {b}"),
        };
        push(
            Kind::Warning,
            format!(
                "{which}: are the stores copies of one another? A comparison of those cells compares runs with themselves"
            ),
        );
    }
}

/// What the runs themselves warned about, once each; other processes' real-time threads,
/// named by PID and so different in every run, in one line.
fn what_runs_warned(
    runs: &[(&CellFigures, usize, &RunResult)],
    push: &mut impl FnMut(Kind, String),
) {
    // Each run's list of processes.
    let competing: Vec<&str> = runs
        .iter()
        .filter_map(|(_, _, r)| {
            r.environment
                .warnings
                .iter()
                .find_map(|w| latlab_model::competing_list(w))
        })
        .collect();
    // One run's is said below as any other warning.
    if let [first, _, ..] = competing.as_slice() {
        push(
            Kind::Warning,
            format!(
                "{} runs warned: {}; the first: {}",
                competing.len(),
                latlab_model::COMPETING_WARNING,
                first
            ),
        );
    }
    // Each warning once, with the runs that gave it.
    // (the warning, the runs that gave it, whether they are all imports: an import's lines
    // are notes on its file, "noted" rather than "warned")
    let mut said: Vec<(&str, Vec<String>, bool)> = Vec::new();
    for (c, repeat, r) in runs {
        let import = r
            .environment
            .warnings
            .iter()
            .any(|w| w.starts_with(latlab_model::IMPORTED_FROM));
        let name = crate::analysis::repeat_name(c, *repeat);
        let unlocked = !r.environment.memory_locked && r.records(latlab_model::Unrecorded::MEMORY);
        let ws = r.environment.warnings.iter().map(String::as_str);
        for w in ws.chain(unlocked.then_some("memory not locked")) {
            if competing.len() > 1 && latlab_model::competing_list(w).is_some() {
                continue;
            }
            match said.iter_mut().find(|(seen, ..)| *seen == w) {
                Some((_, who, imports)) => {
                    who.push(name.clone());
                    *imports &= import;
                }
                None => said.push((w, vec![name.clone()], import)),
            }
        }
    }
    for (w, who, imports) in said {
        let by = match who.as_slice() {
            [one] => one.clone(),
            _ if who.len() == runs.len() => "every run".into(),
            [a, b, c] => format!("3 runs ({a}, {b}, {c})"),
            [a, b, ..] if who.len() > 3 => format!("{} runs ({a}, {b}, …)", who.len()),
            _ => format!("{} runs ({})", who.len(), who.join(", ")),
        };
        let verb = if imports { "noted" } else { "warned" };
        push(Kind::Warning, format!("{by} {verb}: {w}"));
    }
}

fn warnings(a: &Analysis, push: &mut impl FnMut(Kind, String)) {
    let runs: Vec<(&CellFigures, usize, &RunResult)> = a
        .cells
        .iter()
        .flat_map(|c| c.runs.iter().map(move |r| (c, r.repeat, r.run)))
        .collect();
    let total = runs.len();

    runs_in_two_cells(&runs, push);

    // A virtual machine.
    let vm: Vec<&str> = runs
        .iter()
        .filter_map(|(_, _, r)| r.system.virtualization.hypervisor.as_deref())
        .collect();
    if let Some(h) = vm.first() {
        // A hypervisor whose vendor the inventory could not read.
        let h = if *h == latlab_model::system::HYPERVISOR_UNKNOWN {
            "vendor unknown"
        } else {
            h
        };
        let which = if vm.len() == total {
            "every run was".to_string()
        } else {
            format!("{} of {total} runs were", vm.len())
        };
        push(
            Kind::Warning,
            format!(
                "virtual machine ({h}): {which} taken in a guest; the hypervisor can stop a vCPU at any moment, so maxima include stalls the guest neither sees nor controls"
            ),
        );
    }

    // Steal during the runs.
    let worst_steal = a
        .cells
        .iter()
        .flat_map(|c| {
            c.runs
                .iter()
                .filter_map(move |r| r.steal_pct.as_ref().ok().map(|s| (*s, c, r.repeat)))
        })
        .max_by(|x, y| x.0.total_cmp(&y.0));
    if let Some((s, c, rep)) = worst_steal
        && s >= STEAL_WARN_PCT
    {
        push(
            Kind::Warning,
            format!(
                "steal: the hypervisor gave {s:.1} % of the CPU time to others during {} repeat {rep} (the most of any run)",
                c.cell.name
            ),
        );
    }

    // Runs a signal stopped before their length: they measured less than asked.
    for (c, repeat, r) in &runs {
        if let Some(why) = r.cut_short() {
            let which = if c.runs.len() > 1 {
                format!("{} repeat {repeat}", c.cell.name)
            } else {
                c.cell.name.clone()
            };
            push(Kind::Warning, format!("cut short: {which} was {why}"));
        }
    }

    // Missed periods.
    for c in &a.cells {
        let Some(missed) = c.missed.filter(|&m| m > 0) else {
            continue;
        };
        let periods = c.stats.count + missed;
        let share = c.missed_pct();
        // So many missed that the latencies measured are a selection: the ones that made it.
        let selection = if share >= MISSED_SELECTION_PCT {
            "; with so many, its latency statistics describe only the wake-ups that happened and are not compared (each run's corrected statistics, in `latlab export --format json` or `csv`, count each missed period at the latency it would have had)"
        } else {
            ""
        };
        push(
            Kind::Warning,
            format!(
                "missed periods: {} missed {} of {periods} periods ({share:.2} %): stalls longer than the interval, counted, not dropped{selection}",
                c.cell.name, missed,
            ),
        );
    }

    // Cells that could not run (a profile that could not be applied, a missing feature), those
    // of one reason in one line.
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for (cell, reason) in &a.skipped {
        match reasons.iter_mut().find(|(r, _)| r == reason) {
            Some((_, cells)) => cells.push(cell),
            None => reasons.push((reason, vec![cell])),
        }
    }
    for (reason, cells) in reasons {
        let which = match cells.as_slice() {
            [one] => one.to_string(),
            many => format!("{} cells ({})", many.len(), many.join(" | ")),
        };
        push(Kind::Warning, format!("not run: {which}: {reason}"));
    }

    what_runs_warned(&runs, push);

    // Too few repeats for a verdict.
    if a.cells.len() > 1 {
        let few: Vec<String> = a
            .cells
            .iter()
            .filter(|c| c.runs.len() < MIN_REPEATS)
            .map(|c| format!("{} ({})", c.cell.name, c.runs.len()))
            .collect();
        if !few.is_empty() {
            push(
                Kind::Warning,
                format!(
                    "too few repeats for a verdict: {}; the exact two-sided Mann-Whitney test needs {MIN_REPEATS} repeats per cell to reach p < {ALPHA}",
                    few.join(", ")
                ),
            );
        }
    }
}

fn near(value: f64, target: f64) -> bool {
    target > 0.0 && (value - target).abs() <= target * FIT
}

fn ms(ns: f64) -> String {
    format!("{:.1} ms", ns / 1e6)
}

/// The time the kernel keeps from real-time tasks for normal ones, in ns per period, with the
/// mechanism that keeps it on the run's kernel.
fn rt_reservation(r: &RunResult) -> Option<(f64, String)> {
    let t = &r.system.rt_throttling;
    let fair = match &t.fair_server {
        Field::Value(v) if !v.is_empty() => v
            .first()
            .map(|&(_, runtime, period)| (runtime as f64, period as f64)),
        _ => None,
    };
    let throttling = match (&t.runtime_us, &t.period_us) {
        (Field::Value(rt), Field::Value(p)) if !RtThrottling::off(*rt, *p) => {
            Some(((p - rt) as f64 * 1e3, *p as f64 * 1e3, *rt, *p))
        }
        _ => None,
    };
    let new_kernel = latlab_model::system::kernel_version(&r.system.kernel_release)
        .is_some_and(|v| v >= (6, 12));
    match (fair, throttling) {
        (Some((runtime, period)), _) => Some((
            runtime,
            format!(
                "the fair server, which runs starved normal tasks for {} of every {} on each CPU (debugfs sched/fair_server)",
                ms(runtime),
                ms(period)
            ),
        )),
        (None, Some((gap, period, rt, p))) if new_kernel => Some((
            gap,
            format!(
                "the {} of every {} that kernel {} keeps for normal tasks: its fair server (6.12 and later) takes the place of RT throttling with the same share, here sched_rt_runtime_us = {rt} of sched_rt_period_us = {p} (with CONFIG_RT_GROUP_SCHED the throttling applies as well)",
                ms(gap),
                ms(period),
                r.system.kernel_release
            ),
        )),
        (None, Some((gap, period, rt, p))) => Some((
            gap,
            format!(
                "RT throttling: sched_rt_runtime_us = {rt} of sched_rt_period_us = {p} leaves normal tasks {} of every {}",
                ms(gap),
                ms(period)
            ),
        )),
        (None, None) => None,
    }
}

fn signatures(c: &CellFigures, push: &mut impl FnMut(Kind, String)) {
    let maxima: Vec<f64> = c.runs.iter().map(|r| r.stats.max as f64).collect();
    let Some(first) = c.runs.first() else { return };
    let name = &c.cell.name;
    let lo = maxima.iter().copied().fold(f64::MAX, f64::min);
    let hi = maxima.iter().copied().fold(f64::MIN, f64::max);
    let lie = if maxima.len() == 1 { "lies" } else { "lie" };
    let every = if maxima.len() == 1 {
        format!("the run's maximum, {},", ms(lo))
    } else if lo == hi {
        format!("the maxima of all {} repeats, {},", maxima.len(), ms(lo))
    } else {
        format!(
            "the maxima of all {} repeats, {:.1}–{},",
            maxima.len(),
            lo / 1e6,
            ms(hi)
        )
    };

    // The real-time reservation for normal tasks: the measuring threads wait it out.
    if let Some((gap, how)) = rt_reservation(first.run)
        && maxima.iter().all(|m| near(*m, gap))
    {
        push(
            Kind::Signature,
            format!(
                "{name}: {every} {lie} within {:.0} % of {}: consistent with real-time threads that lose the CPU while normal tasks get their share, {how}",
                FIT * 100.0,
                ms(gap)
            ),
        );
        return;
    }

    // Multiples of the scheduler tick.
    let hz = first.run.system.kernel_config.value().and_then(|k| k.hz);
    if let Some(hz) = hz.filter(|h| *h > 0) {
        let tick = 1e9 / f64::from(hz);
        let p99 = c.stats.p99 as f64;
        let fits = |m: f64| {
            let k = (m / tick).round();
            (1.0..=10.0).contains(&k) && (m - k * tick).abs() <= tick * FIT
        };
        if maxima.len() >= 2 && maxima.iter().all(|m| fits(*m) && *m >= 5.0 * p99) {
            push(
                Kind::Signature,
                format!(
                    "{name}: {every} {lie} at whole multiples of the {} tick (HZ = {hz}), far above p99 ({} µs): consistent with a wake-up that waited for the next scheduler tick",
                    ms(tick),
                    numfmt::us_f(p99)
                ),
            );
        }
    }

    // Maxima inside one phase of a load schedule (not an idle one), in every repeat.
    let mut phase: Option<(&str, u64, u64)> = None;
    let mut fits = 0;
    for r in &c.runs {
        let run = r.run;
        let phases = &run.loads.phases;
        if phases.len() < 2 || run.threads.len() < 2 {
            break;
        }
        let phase_of = |at: u64| phases.iter().find(|p| p.start_ns <= at && at < p.end_ns);
        let Some(p) = run.threads.first().and_then(|t| phase_of(t.max_at_ns)) else {
            break;
        };
        let same = run
            .threads
            .iter()
            .all(|t| phase_of(t.max_at_ns).is_some_and(|q| q.spec == p.spec));
        let short = (p.end_ns - p.start_ns) * 2 < run.elapsed_ns.max(1);
        // A maximum the windows outside the phase nearly reach (a CPU's spike that comes back
        // in every phase) is no mark of it: it stands a quarter above them.
        let window = run.config.window_ns.max(1);
        let stands_out = run.threads.iter().all(|t| {
            let outside = t
                .windows
                .iter()
                .filter(|w| w.start_ns + window <= p.start_ns || w.start_ns >= p.end_ns)
                .map(|w| w.max)
                .max()
                .unwrap_or(0);
            outside * 5 <= t.histogram.max() * 4
        });
        if !same
            || !short
            || !stands_out
            || p.spec == "idle"
            || phase.is_some_and(|(s, ..)| s != p.spec)
        {
            break;
        }
        phase = Some((&p.spec, p.start_ns, p.end_ns));
        fits += 1;
    }
    if let Some((spec, from, to)) = phase
        && fits == c.runs.len()
    {
        push(
            Kind::Signature,
            format!(
                "{name}: in {} every CPU's maximum fell in the load phase {spec} ({}–{} s), which covers less than half the run: consistent with that load",
                if fits == 1 {
                    "its run".to_string()
                } else {
                    format!("all {fits} repeats")
                },
                numfmt::secs(from),
                numfmt::secs(to)
            ),
        );
    }

    // One CPU far worse than the others.
    if c.cpus.len() >= 2 {
        let mut by_max: Vec<(&str, u64)> = c
            .cpus
            .iter()
            .map(|k| (k.label.as_str(), k.stats.max))
            .collect();
        by_max.sort_by_key(|x| std::cmp::Reverse(x.1));
        let (worst, wmax) = by_max[0];
        let next = by_max[1].1;
        // Threads not pinned ran wherever the scheduler put them: no CPU to point at.
        let pinned = first
            .run
            .threads
            .iter()
            .any(|t| t.label == worst && t.cpu.is_some());
        if pinned && next > 0 && wmax >= 5 * next {
            // A maximum at the reservation for normal tasks is that, on whichever CPU.
            let cause = match rt_reservation(first.run) {
                Some((gap, how)) if near(wmax as f64, gap) => format!(
                    "within {:.0} % of {}: consistent with real-time threads that lose that CPU while normal tasks get their share, {how}",
                    FIT * 100.0,
                    ms(gap)
                ),
                _ => "consistent with something bound to that CPU (an interrupt, a kernel thread, a load pinned there)".into(),
            };
            push(
                Kind::Signature,
                format!(
                    "{name}: the maximum comes from {worst} only ({} µs, the next CPU at most {} µs): {cause}",
                    numfmt::us_f(wmax as f64),
                    numfmt::us_f(next as f64)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearness() {
        assert!(near(47.0e6, 50.0e6));
        assert!(near(52.0e6, 50.0e6));
        assert!(!near(44.0e6, 50.0e6));
        assert!(!near(1.0, 0.0));
    }
}
