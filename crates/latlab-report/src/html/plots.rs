//! The report's figures: latency histograms (OSADL's look: a step line per CPU on a log count axis,
//! the maximum in the legend), percentile spectra on a "nines" axis, latency over time with the
//! load phases shaded beside idle residency, frequency and power, and trade-off charts.

use latlab_hist::Histogram;
use latlab_model::RunResult;
use latlab_model::samples::Samples;
use latlab_model::system::Field;

use super::svg::{Axis, Chart, LegendItem, Mark, style};
use crate::analysis::{WindowRow, idle_state_names, windows};
use crate::numfmt;

/// Bins a histogram plot aims at (OSADL's plots have 400 bins of 1 µs).
const TARGET_BINS: u64 = 400;

/// The smallest 1-2-5 step at or above `v`.
fn nice_ceil(v: u64) -> u64 {
    let mut mag = 1u64;
    loop {
        for m in [1u64, 2, 5] {
            match m.checked_mul(mag) {
                Some(x) if x >= v => return x,
                Some(_) => {}
                None => return u64::MAX,
            }
        }
        match mag.checked_mul(10) {
            Some(next) => mag = next,
            None => return u64::MAX,
        }
    }
}

/// Bin width in ns for values up to `max_ns`: 1 µs up to 400 µs, coarser 1-2-5 steps above,
/// finer below.
pub(crate) fn bin_width(max_ns: u64) -> u64 {
    nice_ceil(max_ns.div_ceil(TARGET_BINS).max(1))
}

/// Counts of `h` in `nbins` bins of `width` ns from 0, its samples placed as in cyclictest's
/// histogram text ([`crate::us::placed`]), so the last non-empty bin holds the maximum.
pub(crate) fn bin_counts(h: &Histogram, width: u64, nbins: usize) -> Vec<u64> {
    let mut bins = vec![0u64; nbins];
    if nbins == 0 {
        return bins;
    }
    for (v, c) in crate::us::placed(h) {
        let i = ((v / width.max(1)) as usize).min(nbins - 1);
        bins[i] += c;
    }
    bins
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// One series of a histogram chart.
pub(crate) struct HistSeries<'a> {
    pub label: String,
    pub hist: &'a Histogram,
    /// Colour index (see [`style`]).
    pub series: usize,
    /// Where an import's values become lower bounds (its histogram's range ended there): what
    /// lies at or past it is known only as "at least", and is not drawn as if measured there.
    pub bound_ns: Option<u64>,
}

/// The part of `h` a plot draws: the values below `bound` (all of them without one).
fn below_bound(h: &Histogram, bound: Option<u64>) -> std::borrow::Cow<'_, Histogram> {
    let Some(bound) = bound else {
        return std::borrow::Cow::Borrowed(h);
    };
    let mut cut = Histogram::new();
    for (v, c) in crate::us::placed(h).filter(|&(v, c)| v < bound && c > 0) {
        cut.record_n(v, c);
    }
    std::borrow::Cow::Owned(cut)
}

/// The legend's words for a series with samples past its histogram's range, not drawn.
fn not_drawn(label: &str, full: &Histogram, drawn: &Histogram, bound: u64) -> String {
    let past = full.count() - drawn.count();
    if drawn.is_empty() {
        format!(
            "{label}: no histogram in its file, not drawn (max {} µs)",
            numfmt::us(full.max())
        )
    } else {
        format!(
            "{label}, max {} µs ({past} samples past {} µs, its range: not drawn)",
            numfmt::us(full.max()),
            numfmt::us(bound)
        )
    }
}

/// Up to this many pinned CPUs a run's timeline also draws each CPU's latency and idle states.
const PER_CPU_UP_TO: usize = 8;

/// Up to this maximum a histogram is drawn as OSADL's are, on a linear axis of 1 µs bins; past
/// it (a tail of milliseconds) on a log axis, so the body keeps its shape beside the tail.
const LINEAR_UP_TO_NS: u64 = TARGET_BINS * 1_000;
/// Bins per decade of a log-axis histogram.
const PER_DECADE: u32 = 20;

/// Counts of `h` in `nbins` bins of a log axis from `lo_ns`, [`PER_DECADE`] to a decade, its
/// samples placed as in [`bin_counts`].
pub(crate) fn log_bin_counts(h: &Histogram, lo_ns: u64, nbins: usize) -> Vec<u64> {
    let mut bins = vec![0u64; nbins];
    if nbins == 0 {
        return bins;
    }
    for (v, c) in crate::us::placed(h) {
        let at = (v.max(lo_ns) as f64 / lo_ns.max(1) as f64).log10() * f64::from(PER_DECADE);
        bins[(at.floor().max(0.0) as usize).min(nbins - 1)] += c;
    }
    bins
}

/// Step lines of several histograms over one latency axis. With `share`, counts are divided by
/// each histogram's total (to overlay cells with different sample counts).
pub(crate) fn histogram_chart(title: &str, series: &[HistSeries], share: bool) -> Option<String> {
    // Each series' samples as drawn: an import's within its histogram's range.
    let drawn: Vec<_> = series
        .iter()
        .map(|s| below_bound(s.hist, s.bound_ns))
        .collect();
    let max_ns = drawn.iter().map(|h| h.max()).max()?;
    if drawn.iter().all(|h| h.is_empty()) {
        return None;
    }
    let min_ns = drawn
        .iter()
        .filter(|h| !h.is_empty())
        .map(|h| h.min())
        .min()
        .unwrap_or(0);
    // The bins' edges in µs, and each series' counts in them.
    let (edges, counts, x): (Vec<f64>, Vec<Vec<u64>>, Axis) = if max_ns <= LINEAR_UP_TO_NS {
        let width = bin_width(max_ns.max(1));
        let nbins = (max_ns / width + 1) as usize;
        let label = format!(
            "latency (µs), bins of {} µs, max {} µs",
            trim_us(width),
            numfmt::us(max_ns)
        );
        (
            (0..=nbins).map(|i| us(i as u64 * width)).collect(),
            drawn.iter().map(|h| bin_counts(h, width, nbins)).collect(),
            Axis::linear(label, 0.0, us(nbins as u64 * width)),
        )
    } else {
        // From the decade of the smallest sample (100 ns at the least) past the largest.
        let decade = |ns: u64| 10f64.powi((ns.max(100) as f64).log10().floor() as i32);
        let lo = decade(min_ns);
        let hi = decade(max_ns) * 10.0;
        let nbins = ((hi / lo).log10().round() as u32 * PER_DECADE) as usize;
        let label = format!(
            "latency (µs, log scale), {PER_DECADE} bins per decade, max {} µs",
            numfmt::us(max_ns)
        );
        (
            (0..=nbins)
                .map(|i| lo / 1000.0 * 10f64.powf(i as f64 / f64::from(PER_DECADE)))
                .collect(),
            drawn
                .iter()
                .map(|h| log_bin_counts(h, lo as u64, nbins))
                .collect(),
            Axis::log(label, lo / 1000.0, hi / 1000.0 * 0.999),
        )
    };
    let binned: Vec<Vec<f64>> = series
        .iter()
        .zip(counts)
        .map(|(s, bins)| {
            let total = s.hist.count().max(1) as f64;
            bins.into_iter()
                .map(|c| if share { c as f64 / total } else { c as f64 })
                .collect()
        })
        .collect();
    let top = binned.iter().flatten().copied().fold(0.0, f64::max);
    let low = binned
        .iter()
        .flatten()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let mut y = if share {
        let mut y = Axis::log("share of samples", low, top);
        // A share is at most 1: a histogram all in one bin tops the axis, not a decade below it.
        y.hi = y.hi.min(1.0);
        y.ticks.retain(|(v, _)| *v <= 1.0);
        y
    } else {
        Axis::log("samples", 1.0, top)
    };
    // Empty bins sit on the bottom edge, half a decade below the lowest tick.
    let floor = y.lo / 10f64.sqrt();
    y.lo = floor;
    let mut chart = Chart::new(title, 260.0, x, y);
    for ((s, bins), shown) in series.iter().zip(&binned).zip(&drawn) {
        if s.hist.is_empty() {
            continue;
        }
        let (color, dash) = style(s.series);
        let mut legend = max_legend((color, dash), &s.label, s.hist);
        if let Some(bound) = s.bound_ns.filter(|_| shown.count() < s.hist.count()) {
            legend.label = not_drawn(&s.label, s.hist, shown, bound);
        }
        chart.legend(legend);
        if shown.is_empty() {
            continue;
        }
        let ys: Vec<Option<f64>> = bins
            .iter()
            .map(|&c| Some(if c > 0.0 { c } else { floor }))
            .collect();
        chart.steps(&edges, &ys, color, dash, 1.4);
    }
    Some(chart.finish())
}

/// The legend entry of a series drawn as a line in `(color, dash)`: its label and maximum.
fn max_legend(
    (color, dash): (&'static str, Option<&'static str>),
    label: &str,
    hist: &Histogram,
) -> LegendItem {
    LegendItem {
        color: color.into(),
        dash,
        mark: Mark::Line { width: 2.0 },
        label: format!("{label}, max {} µs", numfmt::us(hist.max())),
    }
}

/// A bin width in ns as µs without trailing zeros.
fn trim_us(ns: u64) -> String {
    super::svg::tick_label(ns as f64 / 1000.0)
}

/// One line of a percentile spectrum.
pub(crate) struct SpectrumLine<'a> {
    pub label: String,
    pub hist: &'a Histogram,
    pub series: usize,
    pub width: f64,
    pub opacity: f64,
    /// Whether the line gets its own legend entry.
    pub legend: bool,
    /// Where an import's values become lower bounds: the line ends below it, and only the exact
    /// maximum is marked past it.
    pub bound_ns: Option<u64>,
}

/// Points `(nines, µs)` of a histogram's percentile spectrum: every 0.05 nines from the median
/// region up, and the maximum at `log10(count)` nines.
pub(crate) fn spectrum_points(h: &Histogram) -> Vec<(f64, f64)> {
    let count = h.count();
    if count == 0 {
        return Vec::new();
    }
    let top = (count as f64).log10();
    let mut pts = Vec::new();
    let mut k = 0u32;
    loop {
        let x = f64::from(k) / 20.0;
        if x >= top {
            break;
        }
        let q = 1.0 - 10f64.powf(-x);
        pts.push((x, us(h.percentile(q * 100.0))));
        k += 1;
    }
    pts.push((top, us(h.max())));
    pts
}

pub(crate) fn spectrum_chart(title: &str, lines: &[SpectrumLine], note: &str) -> Option<String> {
    let pts: Vec<Vec<(f64, f64)>> = lines.iter().map(|l| spectrum_points(l.hist)).collect();
    let all = || pts.iter().flatten();
    all().next()?;
    let x_max = all().map(|p| p.0).fold(0.0, f64::max);
    let y_lo = all()
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let y_hi = all().map(|p| p.1).fold(0.0, f64::max);
    let y_lo = if y_lo == f64::MAX { 0.001 } else { y_lo };
    let x = Axis::nines(
        format!("percentile (as a fraction: 0.99 is p99; spaced by -log10(1 - q)){note}"),
        x_max,
    );
    let y = Axis::log("latency (µs)", y_lo, y_hi.max(y_lo));
    let mut chart = Chart::new(title, 260.0, x, y);
    for (l, p) in lines.iter().zip(&pts) {
        if p.is_empty() {
            continue;
        }
        let (color, dash) = style(l.series);
        // Past an import's range only the maximum is known: the line stops below it.
        let known = |&(_, v): &&(f64, f64)| l.bound_ns.is_none_or(|b| v * 1000.0 < b as f64);
        let line: Vec<Option<(f64, f64)>> = p[..p.len() - 1]
            .iter()
            .filter(known)
            .chain(p.last().filter(|_| l.bound_ns.is_none()))
            .map(|&pt| Some(pt))
            .collect();
        chart.line(&line, color, dash, l.width, l.opacity);
        if let Some(&(x, y)) = p.last() {
            chart.point(
                x,
                y,
                color,
                Mark::Dot,
                &format!("{}: max {} µs", l.label, numfmt::us(l.hist.max())),
            );
        }
        if l.legend {
            let mut legend = max_legend((color, dash), &l.label, l.hist);
            if let Some(b) = l.bound_ns.filter(|&b| l.hist.max() >= b) {
                legend.label += &format!(" (past {} µs only the maximum is known)", numfmt::us(b));
            }
            chart.legend(legend);
        }
    }
    Some(chart.finish())
}

/// Band fills of load phases: idle phases grey, loaded ones alternating tints.
fn phase_fill(spec: &str, i: usize) -> &'static str {
    if spec == "idle" {
        "#ececec"
    } else if i.is_multiple_of(2) {
        "#dbe6f4"
    } else {
        "#f6e3cf"
    }
}

/// The figures of one run over time (latency, idle residency, frequency, power), each as
/// `(caption, svg)`, and one line for every panel without data.
/// The panels over time of one run; with `per_cpu`, also each CPU's of a run on a few pinned
/// CPUs (a report draws those for a cell's first repeat).
pub(crate) fn timeline(run: &RunResult, per_cpu: bool) -> (Vec<(String, String)>, Vec<String>) {
    let mut figs = Vec::new();
    let mut notes = Vec::new();
    let rows = windows(run);
    let samples = run.samples.as_ref();
    // The time axis ends where the data ends (the measured length only when there is none).
    let mut t_end = 0;
    if let Some(last) = rows.last() {
        // A window the run ended inside ends with the run (a --break after 1 ms of a 1 s
        // window drew a second).
        let end = last.start_ns + run.config.window_ns;
        let end = if run.elapsed_ns > last.start_ns {
            end.min(run.elapsed_ns)
        } else {
            end
        };
        t_end = t_end.max(end);
    }
    if let Some(s) = samples
        && let Some(last) = s.series.last()
    {
        t_end = t_end.max(last.at_ns);
    }
    for p in &run.loads.phases {
        t_end = t_end.max(p.end_ns);
    }
    if t_end == 0 {
        t_end = run.elapsed_ns;
    }
    let x_hi = (t_end as f64 / 1e9).max(0.001);
    let x_axis = || {
        Axis::time(
            "time since the start of measuring",
            x_hi,
            Some(run.start_unix_ns),
        )
    };

    match latency_chart(run, &rows, x_axis()) {
        Ok(svg) => figs.push((
            format!(
                "Latency over time: per-window maximum and p99, the highest of the CPUs{}",
                if run.loads.phases.is_empty() {
                    ""
                } else {
                    ", with load phases shaded"
                }
            ),
            svg,
        )),
        Err(reason) => notes.push(format!("latency over time: {reason}")),
    }

    // A few pinned CPUs are each drawn as well: a per-core setting shows on its own core.
    let few: Vec<u32> = run.threads.iter().filter_map(|t| t.cpu).collect();
    let per_cpu =
        per_cpu && (2..=PER_CPU_UP_TO).contains(&few.len()) && few.len() == run.threads.len();
    if per_cpu && let Some(svg) = per_cpu_latency_chart(run, &rows, x_axis()) {
        figs.push((
            "Latency over time per CPU: each CPU's maximum per window".to_string(),
            svg,
        ));
    }

    let Some(s) = samples else {
        notes.push(
            "idle residency, frequency and power over time: unavailable: no sampler data in this run"
                .into(),
        );
        return (figs, notes);
    };
    match idle_chart(s, x_axis(), &run.loads.phases, None) {
        Ok(svg) => figs.push((
            "Idle-state residency over time (mean over the CPUs)".into(),
            svg,
        )),
        Err(reason) => notes.push(format!(
            "idle-state residency over time: unavailable: {reason}"
        )),
    }
    if per_cpu {
        for &cpu in &few {
            if let Ok(svg) = idle_chart(s, x_axis(), &run.loads.phases, Some(cpu as usize)) {
                figs.push((format!("Idle-state residency over time of cpu{cpu}"), svg));
            }
        }
    }
    match frequency_chart(s, x_axis()) {
        Ok(svg) => figs.push(("Frequency over time per CPU".into(), svg)),
        Err(reason) => notes.push(format!("frequency over time: unavailable: {reason}")),
    }
    match power_chart(s, x_axis()) {
        Ok(svg) => figs.push(("Power over time per source".into(), svg)),
        Err(reason) => notes.push(format!("power over time: unavailable: {reason}")),
    }
    (figs, notes)
}

/// The edges of step lines over spans of time, in seconds: `xs` has one entry more than
/// `of`, and step `j` (from `xs[j]` to `xs[j + 1]`) draws span `of[j]`, or nothing (`None`)
/// where no span covers the time between two, as while a monitor was stopped: the lines
/// break there instead of joining its last window before the stop to its first after.
struct Steps {
    xs: Vec<f64>,
    of: Vec<Option<usize>>,
}

impl Steps {
    /// Spans `(from, to)` in nanoseconds, in order. One that starts less than half its own
    /// length after the previous one ended continues it.
    fn new(spans: impl IntoIterator<Item = (u64, u64)>) -> Steps {
        let mut steps = Steps {
            xs: Vec::new(),
            of: Vec::new(),
        };
        let mut end = None;
        for (i, (from, to)) in spans.into_iter().enumerate() {
            match end {
                None => steps.xs.push(from as f64 / 1e9),
                Some(end) if from > end + to.saturating_sub(from) / 2 => {
                    steps.of.push(None);
                    steps.xs.push(from as f64 / 1e9);
                }
                Some(_) => {}
            }
            steps.of.push(Some(i));
            steps.xs.push(to as f64 / 1e9);
            end = Some(to);
        }
        steps
    }

    /// Windows as spans, each `window_ns` long.
    fn of_windows(rows: &[WindowRow], window_ns: u64) -> Steps {
        Steps::new(rows.iter().map(|r| (r.start_ns, r.start_ns + window_ns)))
    }

    /// Sampler periods as spans, each ending at its sample.
    fn of_samples(s: &Samples) -> Steps {
        Steps::new(
            s.series
                .iter()
                .map(|x| (x.at_ns.saturating_sub(x.dt_ns), x.at_ns)),
        )
    }

    /// The value of each step: `value` of its span's index, `None` in a gap.
    fn ys(&self, value: impl Fn(usize) -> Option<f64>) -> Vec<Option<f64>> {
        self.of.iter().map(|i| i.and_then(&value)).collect()
    }
}

/// The latency chart: per-window maximum and p99 (the highest of the CPUs), spikes, and the load
/// phases shaded.
fn latency_chart(run: &RunResult, rows: &[WindowRow], x: Axis) -> Result<String, String> {
    let shaded = |chart: &mut Chart| {
        for (i, p) in run.loads.phases.iter().enumerate() {
            chart.band(
                p.start_ns as f64 / 1e9,
                p.end_ns as f64 / 1e9,
                phase_fill(&p.spec, i),
                &p.spec,
            );
        }
    };
    let with_data: Vec<_> = rows.iter().filter(|r| r.count > 0).collect();
    if with_data.is_empty() {
        return Err("no windows recorded in this run".to_string());
    }
    let lo = with_data
        .iter()
        .map(|r| us(r.p99))
        .chain(run.spikes.kept.iter().map(|s| us(s.value_ns)))
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let hi = with_data
        .iter()
        .map(|r| us(r.max))
        .chain(run.spikes.kept.iter().map(|s| us(s.value_ns)))
        .fold(0.0, f64::max);
    let lo = if lo == f64::MAX { 0.001 } else { lo };
    let mut chart = Chart::new(
        "latency per window (highest of the CPUs)",
        200.0,
        x,
        Axis::log("latency (µs)", lo, hi.max(lo)),
    );
    shaded(&mut chart);
    let steps = Steps::of_windows(rows, run.config.window_ns);
    let pick = |f: fn(&WindowRow) -> u64| -> Vec<Option<f64>> {
        steps.ys(|i| {
            let r = &rows[i];
            (r.count > 0).then(|| us(f(r)))
        })
    };
    let (c0, _) = style(0);
    let (c1, _) = style(1);
    let (c2, _) = style(2);
    chart.steps(&steps.xs, &pick(|r| r.max), c0, None, 1.5);
    chart.steps(&steps.xs, &pick(|r| r.p99), c1, None, 1.5);
    for s in &run.spikes.kept {
        let cpu = s
            .cpu
            .map_or_else(|| format!("thread {}", s.thread), |c| format!("cpu{c}"));
        chart.point(
            s.at_ns as f64 / 1e9,
            us(s.value_ns),
            c2,
            Mark::Dot,
            &format!(
                "{cpu} at {:.3} s: {} µs",
                s.at_ns as f64 / 1e9,
                numfmt::us(s.value_ns)
            ),
        );
    }
    let window = latlab_model::units::format_duration(run.config.window_ns);
    chart.legend(LegendItem {
        color: c0.into(),
        dash: None,
        mark: Mark::Line { width: 2.0 },
        label: format!("max per {window} window"),
    });
    chart.legend(LegendItem {
        color: c1.into(),
        dash: None,
        mark: Mark::Line { width: 2.0 },
        label: format!("p99 per {window} window"),
    });
    if !run.spikes.kept.is_empty() {
        let thr = run
            .spikes
            .threshold_ns
            .map_or_else(String::new, |t| format!(" above {} µs", numfmt::us(t)));
        chart.legend(LegendItem {
            color: c2.into(),
            dash: None,
            mark: Mark::Dot,
            label: format!("spikes{thr}"),
        });
    }
    if !run.loads.phases.is_empty() {
        chart.legend(LegendItem {
            color: "#dbe6f4".into(),
            dash: None,
            mark: Mark::Swatch,
            label: "load phases (shaded, labelled)".into(),
        });
    }
    Ok(chart.finish())
}

/// The per-window maximum of each CPU, one step line each, on a log axis; `None` without
/// windows.
fn per_cpu_latency_chart(run: &RunResult, rows: &[WindowRow], x: Axis) -> Option<String> {
    if rows.len() < 2 {
        return None;
    }
    let lines: Vec<(u32, Vec<Option<f64>>)> = run
        .threads
        .iter()
        .filter_map(|t| {
            let max: std::collections::HashMap<u64, u64> = t
                .windows
                .iter()
                .filter(|w| w.count > 0)
                .map(|w| (w.index, w.max))
                .collect();
            let ys = rows
                .iter()
                .map(|r| max.get(&r.index).map(|&m| us(m)))
                .collect();
            Some((t.cpu?, ys))
        })
        .collect();
    let values = || {
        lines
            .iter()
            .flat_map(|(_, ys)| ys.iter().flatten().copied())
    };
    let lo = values().filter(|v| *v > 0.0).fold(f64::MAX, f64::min);
    let hi = values().fold(0.0, f64::max);
    if lo == f64::MAX {
        return None;
    }
    let mut chart = Chart::new(
        "maximum per window of each CPU",
        200.0,
        x,
        Axis::log("latency (µs)", lo, hi.max(lo)),
    );
    for (i, p) in run.loads.phases.iter().enumerate() {
        chart.band(
            p.start_ns as f64 / 1e9,
            p.end_ns as f64 / 1e9,
            phase_fill(&p.spec, i),
            "",
        );
    }
    let steps = Steps::of_windows(rows, run.config.window_ns);
    for (i, (cpu, ys)) in lines.iter().enumerate() {
        let ys = steps.ys(|r| ys[r]);
        cpu_line(&mut chart, (i, *cpu as usize), &steps.xs, &ys, 1.5);
    }
    Some(chart.finish())
}

/// One CPU's step line over `xs`, in the `i`th colour, with its legend entry `cpuN`.
fn cpu_line(
    chart: &mut Chart,
    (i, cpu): (usize, usize),
    xs: &[f64],
    ys: &[Option<f64>],
    width: f64,
) {
    labelled_line(chart, i, format!("cpu{cpu}"), xs, ys, width);
}

/// The `i`th line of a chart, in its style, and its legend entry.
fn labelled_line(
    chart: &mut Chart,
    i: usize,
    label: String,
    xs: &[f64],
    ys: &[Option<f64>],
    width: f64,
) {
    let (color, dash) = style(i);
    chart.steps(xs, ys, color, dash, width);
    chart.legend(LegendItem {
        color: color.into(),
        dash,
        mark: Mark::Line { width: 2.0 },
        label,
    });
}

/// Stacked idle-state residency over time: the mean over the CPUs, or `only` one CPU's.
fn idle_chart(
    s: &Samples,
    x: Axis,
    phases: &[latlab_model::load::LoadPhase],
    only: Option<usize>,
) -> Result<String, String> {
    let names = idle_state_names(s);
    if names.is_empty() || s.series.is_empty() {
        return Err("no idle states sampled".into());
    }
    // Per sample, per state: mean share of the period over the CPUs that report it.
    let shares: Vec<Vec<f64>> = s
        .series
        .iter()
        .map(|sample| {
            let mut sums = vec![(0.0, 0usize); names.len()];
            for c in sample
                .cpus
                .iter()
                .filter(|c| c.online && only.is_none_or(|o| o == c.cpu))
            {
                let Some(states) = s.idle_states.iter().find(|i| i.cpu == c.cpu) else {
                    continue;
                };
                let dt_us = sample.dt_ns as f64 / 1000.0;
                if dt_us <= 0.0 {
                    continue;
                }
                for (name, t) in states.states.iter().zip(&c.idle_time_us) {
                    if let Some(k) = names.iter().position(|n| n == name) {
                        sums[k].0 += (*t as f64 / dt_us * 100.0).clamp(0.0, 100.0);
                        sums[k].1 += 1;
                    }
                }
            }
            sums.iter()
                .map(|(sum, n)| if *n > 0 { sum / *n as f64 } else { 0.0 })
                .collect()
        })
        .collect();
    if shares.iter().flatten().all(|v| *v == 0.0)
        && s.series
            .iter()
            .all(|x| x.cpus.iter().all(|c| c.idle_time_us.is_empty()))
    {
        return Err("no idle-state readings".into());
    }
    let title = match only {
        Some(cpu) => format!("idle-state residency of cpu{cpu} (stacked, % of time)"),
        None => "idle-state residency (stacked, % of time)".into(),
    };
    let mut chart = Chart::new(
        title,
        130.0,
        x,
        Axis::linear_fixed("% of time", 0.0, 100.0, 25.0),
    );
    for (i, p) in phases.iter().enumerate() {
        chart.band(
            p.start_ns as f64 / 1e9,
            p.end_ns as f64 / 1e9,
            phase_fill(&p.spec, i),
            "",
        );
    }
    let steps = Steps::of_samples(s);
    let xs = &steps.xs;
    let mut below = vec![0.0f64; steps.of.len()];
    for (k, name) in names.iter().enumerate() {
        // Nothing is stacked in a gap: every layer is 0 high there.
        let share = steps.ys(|i| Some(shares[i][k]));
        let above: Vec<f64> = below
            .iter()
            .zip(&share)
            .map(|(b, sh)| (b + sh.unwrap_or(0.0)).min(100.0))
            .collect();
        let mut poly = Vec::new();
        for (i, top) in above.iter().enumerate() {
            poly.push((xs[i], *top));
            poly.push((xs[i + 1], *top));
        }
        for (i, bottom) in below.iter().enumerate().rev() {
            poly.push((xs[i + 1], *bottom));
            poly.push((xs[i], *bottom));
        }
        let (color, _) = style(k);
        chart.area(&poly, color);
        chart.legend(LegendItem {
            color: color.into(),
            dash: None,
            mark: Mark::Swatch,
            label: name.clone(),
        });
        below = above;
    }
    Ok(chart.finish())
}

fn frequency_chart(s: &Samples, x: Axis) -> Result<String, String> {
    if let Field::Unavailable { unavailable } = &s.frequency {
        return Err(unavailable.clone());
    }
    let mut cpus: Vec<usize> = s
        .series
        .iter()
        .flat_map(|x| {
            x.cpus
                .iter()
                .filter(|c| c.freq_khz.is_some())
                .map(|c| c.cpu)
        })
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err("no frequency readings".into());
    }
    let mhz = |cpu: usize| -> Vec<Option<f64>> {
        s.series
            .iter()
            .map(|x| {
                x.cpus
                    .iter()
                    .find(|c| c.cpu == cpu && c.online)
                    .and_then(|c| c.freq_khz)
                    .map(|k| k as f64 / 1000.0)
            })
            .collect()
    };
    let all: Vec<f64> = cpus.iter().flat_map(|&c| mhz(c)).flatten().collect();
    let lo = all.iter().copied().fold(f64::MAX, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    // At least 5 % of the frequency from bottom to top: a steady clock is a flat line in the
    // middle, not a staircase of fractions of a MHz.
    let pad = (0.05 * hi - (hi - lo)).max(0.0) / 2.0;
    let (lo, hi) = (lo - pad, hi + pad);
    let mut chart = Chart::new("frequency per CPU", 130.0, x, Axis::linear("MHz", lo, hi));
    let steps = Steps::of_samples(s);
    // CPUs that read alike (a VM's nominal clock, CPUs of one policy) are one line of one
    // legend entry: lines drawn over each other would show only the last CPU.
    let mut lines: Vec<(Vec<Option<f64>>, Vec<u32>)> = Vec::new();
    for &cpu in &cpus {
        let ys = mhz(cpu);
        match lines.iter_mut().find(|(alike, _)| *alike == ys) {
            Some((_, of)) => of.push(cpu as u32),
            None => lines.push((ys, vec![cpu as u32])),
        }
    }
    for (i, (ys, of)) in lines.iter().enumerate() {
        let label = match of.as_slice() {
            [one] => format!("cpu{one}"),
            _ => format!(
                "CPUs {} (alike)",
                latlab_model::units::CpuList::from_cpus(of.clone())
            ),
        };
        labelled_line(&mut chart, i, label, &steps.xs, &steps.ys(|j| ys[j]), 1.3);
    }
    Ok(chart.finish())
}

fn power_chart(s: &Samples, x: Axis) -> Result<String, String> {
    let sources = match &s.power_sources {
        Field::Value(v) if !v.is_empty() => v,
        Field::Value(_) => return Err("no power source found".into()),
        Field::Unavailable { unavailable } => return Err(unavailable.clone()),
    };
    let series: Vec<Vec<Option<f64>>> = (0..sources.len())
        .map(|k| {
            s.series
                .iter()
                .map(|x| x.power_w.get(k).copied().flatten().filter(|w| *w > 0.0))
                .collect()
        })
        .collect();
    let all: Vec<f64> = series.iter().flatten().flatten().copied().collect();
    if all.is_empty() {
        return Err("the power sources gave no reading".into());
    }
    let hi = all.iter().copied().fold(0.0, f64::max);
    let mut chart = Chart::new("power per source", 130.0, x, Axis::linear("W", 0.0, hi));
    let steps = Steps::of_samples(s);
    for (k, (src, ys)) in sources.iter().zip(&series).enumerate() {
        let (color, dash) = style(k);
        chart.steps(&steps.xs, &steps.ys(|j| ys[j]), color, dash, 1.3);
        let avg = src
            .avg_w
            .map_or_else(String::new, |w| format!(", mean {w:.2} W"));
        chart.legend(LegendItem {
            color: color.into(),
            dash,
            mark: Mark::Line { width: 2.0 },
            label: format!("{}{avg}", src.name),
        });
    }
    Ok(chart.finish())
}

/// One cell in a trade-off chart.
pub(crate) struct TradePoint {
    pub label: String,
    /// Power or throughput: the median over the repeats and its range.
    pub x: f64,
    pub x_range: (f64, f64),
    /// p99 and max in ns (pooled), with the range of the repeats' p99.
    pub p99: f64,
    pub p99_range: (f64, f64),
    pub max: f64,
}

/// Tail latency (p99 and max, log axis) against power or throughput, one colour per cell, with
/// the Pareto front of p99 (lower) against the x axis (lower, or higher when `higher_x_better`)
/// joined by a grey line.
pub(crate) fn tradeoff_chart(
    title: &str,
    x_label: &str,
    points: &[TradePoint],
    higher_x_better: bool,
) -> Option<String> {
    if points.is_empty() {
        return None;
    }
    let xs = points.iter().flat_map(|p| [p.x_range.0, p.x_range.1, p.x]);
    let (x_lo, x_hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let pad = ((x_hi - x_lo) * 0.08).max(x_hi.abs() * 0.02).max(1e-9);
    let ys = points
        .iter()
        .flat_map(|p| [p.p99, p.p99_range.0, p.p99_range.1, p.max])
        .map(|v| v / 1000.0);
    let (y_lo, y_hi) = ys.fold((f64::MAX, 0.0f64), |(a, b), v| {
        (if v > 0.0 { a.min(v) } else { a }, b.max(v))
    });
    let y_lo = if y_lo == f64::MAX { 0.001 } else { y_lo };
    let mut chart = Chart::new(
        title,
        240.0,
        Axis::linear(x_label, (x_lo - pad).max(0.0), x_hi + pad),
        Axis::log("latency (µs)", y_lo, y_hi.max(y_lo)),
    );
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.p99, p.x)).collect();
    let front = crate::pareto_front(&xy, higher_x_better);
    for w in front.windows(2) {
        let (a, b) = (&points[w[0]], &points[w[1]]);
        chart.segment((a.x, a.p99 / 1000.0), (b.x, b.p99 / 1000.0), "#999", 1.0);
    }
    for (i, p) in points.iter().enumerate() {
        let (color, _) = style(i);
        let (p99, max) = (p.p99 / 1000.0, p.max / 1000.0);
        chart.segment((p.x, p99), (p.x, max), color, 1.0);
        if p.p99_range.0 < p.p99_range.1 {
            chart.segment(
                (p.x, p.p99_range.0 / 1000.0),
                (p.x, p.p99_range.1 / 1000.0),
                color,
                3.0,
            );
        }
        if p.x_range.0 < p.x_range.1 {
            chart.segment((p.x_range.0, p99), (p.x_range.1, p99), color, 1.5);
        }
        chart.point(
            p.x,
            p99,
            color,
            Mark::Dot,
            &format!("{}: p99 {} µs", p.label, numfmt::us_f(p.p99)),
        );
        chart.point(
            p.x,
            max,
            color,
            Mark::Square,
            &format!("{}: max {} µs", p.label, numfmt::us_f(p.max)),
        );
        // A number beside the point, the cell's name in the legend: names of cells close
        // together would run into each other and past the frame.
        chart.label(p.x, p99, 6.0, 4.0, &(i + 1).to_string());
        chart.legend(LegendItem {
            color: color.into(),
            dash: None,
            mark: Mark::Swatch,
            label: format!("{} {}", i + 1, p.label),
        });
    }
    chart.legend(LegendItem {
        color: "#555".into(),
        dash: None,
        mark: Mark::Dot,
        label: "p99 (bars: range of the repeats)".into(),
    });
    chart.legend(LegendItem {
        color: "#555".into(),
        dash: None,
        mark: Mark::Square,
        label: "max".into(),
    });
    if front.len() > 1 {
        chart.legend(LegendItem {
            color: "#999".into(),
            dash: None,
            mark: Mark::Line { width: 1.0 },
            label: "Pareto front of p99".into(),
        });
    }
    Some(chart.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second's sample ending at `k` s on CPU 0 at 2596 MHz.
    fn sample(k: u64) -> latlab_model::samples::Sample {
        latlab_model::samples::Sample {
            at_ns: k * 1_000_000_000,
            dt_ns: 1_000_000_000,
            cpus: vec![latlab_model::samples::CpuSample {
                cpu: 0,
                online: true,
                freq_khz: Some(2_596_000),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn samples(series: Vec<latlab_model::samples::Sample>) -> Samples {
        Samples {
            period_ns: 1_000_000_000,
            sampler_cpus: Vec::new(),
            sampler_cpu_time_ns: 0,
            idle_states: Vec::new(),
            power_sources: Field::Value(Vec::new()),
            thermal_zones: Vec::new(),
            thermal_unavailable: None,
            frequency: Field::Value("scaling_cur_freq".into()),
            smi: None,
            cpus: Vec::new(),
            thermal: Vec::new(),
            series,
        }
    }

    /// Lines break where nothing was measured (a monitor stopped for a while), instead of
    /// joining the last value before the stop to the first after it; a late start by less than
    /// half a period continues the line.
    #[test]
    fn step_lines_break_where_no_span_covers_the_time() {
        let sec = 1_000_000_000;
        let steps =
            Steps::new([(0, 5), (5, 10), (30, 35), (36, 41)].map(|(a, b)| (a * sec, b * sec)));
        assert_eq!(steps.xs, [0.0, 5.0, 10.0, 30.0, 35.0, 41.0]);
        assert_eq!(steps.of, [Some(0), Some(1), None, Some(2), Some(3)]);
        let mut series: Vec<_> = (1..4).map(sample).collect();
        series.extend((20..23).map(sample));
        let svg = frequency_chart(&samples(series), Axis::linear("s", 0.0, 22.0)).expect("a chart");
        let line = svg
            .split("<path d=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .expect("a line");
        assert_eq!(line.matches('M').count(), 2, "{svg}");
    }

    /// A run that ended 1 ms into its first 1 s window (a --break) has a time axis of 1 ms,
    /// not of the window's second.
    #[test]
    fn a_run_stopped_inside_its_window_ends_the_axis() {
        let mut run = latlab_testkit::run::one_cpu("b", (0, 1_000_000));
        run.config.window_ns = 1_000_000_000;
        run.threads[0].windows = vec![latlab_model::Window {
            index: 0,
            start_ns: 0,
            count: 1,
            min: 5_000,
            max: 5_000,
            p99: 5_000,
            missed: 0,
        }];
        let (figs, _) = timeline(&run, false);
        let (_, svg) = figs.first().expect("a latency chart");
        assert!(svg.contains(">0.001</text>"), "{svg}");
        assert!(!svg.contains(">0.8</text>"), "an axis of a second: {svg}");
    }

    /// A steady clock is a flat line with whole-MHz ticks, not a staircase of 0.2 MHz steps.
    #[test]
    fn a_steady_frequency_gets_an_axis_of_whole_mhz() {
        let s = samples((1..4).map(sample).collect());
        let svg = frequency_chart(&s, Axis::linear("s", 0.0, 3.0)).expect("a chart");
        assert!(svg.contains(">2600<"), "{svg}");
        assert!(!svg.contains(">2596.2<"), "{svg}");
    }

    /// CPUs whose readings are alike are one line, named once for them all; a CPU that reads
    /// otherwise is a line of its own.
    #[test]
    fn cpus_of_alike_frequencies_are_one_line() {
        let mut series: Vec<_> = (1..4).map(sample).collect();
        for (k, x) in series.iter_mut().enumerate() {
            for (cpu, khz) in [(1, 2_596_000), (2, 2_596_000), (3, 1_200_000 + k as u64)] {
                x.cpus.push(latlab_model::samples::CpuSample {
                    cpu,
                    online: true,
                    freq_khz: Some(khz),
                    ..Default::default()
                });
            }
        }
        let svg = frequency_chart(&samples(series), Axis::linear("s", 0.0, 3.0)).expect("a chart");
        assert_eq!(svg.matches("<path d=\"").count(), 2, "{svg}");
        assert!(svg.contains(">CPUs 0-2 (alike)<"), "{svg}");
        assert!(svg.contains(">cpu3<"), "{svg}");
        assert!(!svg.contains(">cpu0<"), "{svg}");
    }

    /// An import's samples past its histogram's range are known only as "at least" its end:
    /// neither chart draws them as if measured there; the legends say how many, and the
    /// spectrum marks only the exact maximum past it.
    #[test]
    fn samples_past_an_imports_range_are_not_drawn() {
        let mut h: Histogram = (1..=9u64).map(|v| v * 1_000).collect();
        h.record_n(50_500, 9);
        h.record(1_500_500);
        let imported = |hist, bound| {
            [HistSeries {
                label: "imported".into(),
                hist,
                series: 0,
                bound_ns: Some(bound),
            }]
        };
        let svg = histogram_chart("t", &imported(&h, 50_000), false).expect("a chart");
        assert!(
            svg.contains("imported, max 1500.5 µs (10 samples past 50.0 µs, its range: not drawn)"),
            "{svg}"
        );
        // The axis ends at what is drawn (9 µs), not at the range's end or the maximum.
        assert!(svg.contains(", max 9.0 µs</text>"), "{svg}");
        let line = |bound_ns| SpectrumLine {
            label: "imported".into(),
            hist: &h,
            series: 0,
            width: 1.0,
            opacity: 1.0,
            legend: true,
            bound_ns,
        };
        let cut = spectrum_chart("t", &[line(Some(50_000))], "").expect("a chart");
        assert!(
            cut.contains("(past 50.0 µs only the maximum is known)"),
            "{cut}"
        );
        let whole = spectrum_chart("t", &[line(None)], "").expect("a chart");
        assert!(cut.len() < whole.len(), "the line past the range is drawn");

        // No histogram rows at all (cyclictest without -h): nothing to draw.
        let mut none = Histogram::new();
        none.record_n(3_000, 99);
        none.record(91_000);
        assert!(histogram_chart("t", &imported(&none, 3_000), true).is_none());
    }

    /// A share axis ends at 1 (every sample), also when one histogram lies in a single bin.
    #[test]
    fn a_share_axis_ends_at_one() {
        let one_bin: Histogram = [5_000, 5_100, 5_200].into_iter().collect();
        let spread: Histogram = (1..=100u64).map(|v| v * 1_000).collect();
        let series = [
            HistSeries {
                label: "a".into(),
                hist: &one_bin,
                series: 0,
                bound_ns: None,
            },
            HistSeries {
                label: "b".into(),
                hist: &spread,
                series: 1,
                bound_ns: None,
            },
        ];
        let svg = histogram_chart("t", &series, true).expect("a chart");
        // The y ticks are the labels anchored at their end.
        assert!(svg.contains(r#"text-anchor="end">1<"#), "{svg}");
        assert!(!svg.contains(r#"text-anchor="end">10<"#), "{svg}");
    }

    /// Up to 400 µs a histogram keeps OSADL's linear axis of 1 µs bins; with a tail of
    /// milliseconds it goes on a log axis, so the body is not squeezed into the first bins.
    #[test]
    fn a_tail_of_milliseconds_puts_the_histogram_on_a_log_axis() {
        let chart = |max: u64| {
            let h: Histogram = [12_000, 15_000, 15_500, 30_000, max].into_iter().collect();
            let series = [HistSeries {
                label: "a".into(),
                hist: &h,
                series: 0,
                bound_ns: None,
            }];
            histogram_chart("t", &series, false).expect("a chart")
        };
        let short = chart(300_000);
        assert!(short.contains("latency (µs), bins of 1 µs"), "{short}");
        let long = chart(3_676_500);
        assert!(
            long.contains("latency (µs, log scale), 20 bins per decade, max 3676.5 µs"),
            "{long}"
        );
        for tick in [">10<", ">100<", ">1000<", ">10k<"] {
            assert!(long.contains(tick), "{tick}: {long}");
        }
        // Every sample in a bin: 12 µs and 15 µs in the decade from 10 µs, 3.6765 ms in the last.
        let h: Histogram = [12_000, 15_000, 15_500, 30_000, 3_676_500]
            .into_iter()
            .collect();
        let bins = log_bin_counts(&h, 10_000, 60);
        assert_eq!(bins.iter().sum::<u64>(), 5);
        assert_eq!(bins[1], 1, "12 µs: 10^(1/20) ≈ 11.2 to 12.6 µs");
        assert_eq!(bins[51], 1, "3676.5 µs: 10^(51/20) ≈ 3548 to 3981 µs");
    }

    #[test]
    fn widths() {
        assert_eq!(bin_width(400_000), 1_000);
        assert_eq!(bin_width(3_000_000), 10_000);
        assert_eq!(bin_width(130_000), 500);
        assert_eq!(bin_width(1), 1);
        assert_eq!(nice_ceil(3), 5);
        assert_eq!(nice_ceil(u64::MAX), u64::MAX);
    }

    #[test]
    fn bins_hold_every_sample_and_the_max() {
        let h: Histogram = [1_000, 1_500, 2_000, 250_000, 3_013_700]
            .into_iter()
            .collect();
        let w = bin_width(h.max());
        let n = (h.max() / w + 1) as usize;
        let bins = bin_counts(&h, w, n);
        assert_eq!(bins.iter().sum::<u64>(), 5);
        assert_eq!(bins[n - 1], 1);
        assert_eq!(bins[0], 3);
    }

    #[test]
    fn spectrum_ends_at_the_max() {
        let h: Histogram = (1..=1000u64).map(|v| v * 1000).collect();
        let p = spectrum_points(&h);
        assert_eq!(
            p.first().copied(),
            Some((0.0, h.percentile(0.0) as f64 / 1000.0))
        );
        assert_eq!(p.last().copied(), Some((3.0, 1000.0)));
        // x = 2 is p99.
        let p99 = p.iter().find(|(x, _)| (*x - 2.0).abs() < 1e-9).map(|p| p.1);
        assert_eq!(p99, Some(h.percentile(99.0) as f64 / 1000.0));
        assert!(spectrum_points(&Histogram::new()).is_empty());
    }
}
