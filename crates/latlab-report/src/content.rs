//! The report's content, once for every format: sections of headings, tables, notes and (for
//! HTML) figures, built from an [`Analysis`].

use latlab_hist::Histogram;
use latlab_model::system::Field;
use latlab_model::trace::Family;
use latlab_model::units::CpuList;
use latlab_model::{RunResult, Stats, Unrecorded};

use crate::analysis::{
    ALPHA, Analysis, CellFigures, LATENCY, MIN_REPEATS, Metric, RunFigures, int_stat,
};
use crate::doc::{Block, TCell, Table};
use crate::html::plots::{
    HistSeries, SpectrumLine, TradePoint, histogram_chart, spectrum_chart, timeline, tradeoff_chart,
};
use crate::numfmt;

/// Largest spikes listed per run.
const SPIKES_SHOWN: usize = 10;

fn h2(blocks: &mut Vec<Block>, text: &str, id: &str) {
    blocks.push(Block::Heading {
        level: 2,
        text: text.into(),
        id: Some(id.into()),
    });
}

fn h3(blocks: &mut Vec<Block>, text: String, id: Option<String>) {
    blocks.push(Block::Heading { level: 3, text, id });
}

/// Every block of the report; figures only with `plots`.
pub(crate) fn build(a: &Analysis, plots: bool) -> Vec<Block> {
    let mut b = Vec::new();
    overview(&mut b, a);
    if a.cells.is_empty() || a.run_count() == 0 {
        return b;
    }
    findings(&mut b, a);
    systems(&mut b, a);
    configuration(&mut b, a);
    differences(&mut b, a);
    latency(&mut b, a);
    repeats(&mut b, a);
    comparisons(&mut b, a);
    if plots {
        distributions(&mut b, a);
    }
    cost(&mut b, a);
    tradeoffs(&mut b, a, plots);
    traced(&mut b, a, plots);
    runs(&mut b, a);
    per_cpu(&mut b, a);
    per_cpu_idle(&mut b, a);
    spikes(&mut b, a);
    if plots {
        for c in &a.cells {
            cell_section(&mut b, c);
        }
    }
    b
}

pub(crate) fn title(a: &Analysis) -> String {
    if a.title.trim().is_empty() {
        "latlab report".into()
    } else {
        a.title.clone()
    }
}

fn overview(b: &mut Vec<Block>, a: &Analysis) {
    b.push(Block::Heading {
        level: 1,
        text: title(a),
        id: Some("overview".into()),
    });
    let runs = a.run_count();
    if a.cells.is_empty() || runs == 0 {
        b.push(Block::Note("no runs to report".into()));
        return;
    }
    let mut text = format!(
        "{} {}, {} {}. Latencies are in µs, computed from the histograms; a cell's latency statistics pool all its repeats; its power, frequency, idle residency and throughput are medians over its repeats.",
        a.cells.len(),
        if a.cells.len() == 1 { "cell" } else { "cells" },
        runs,
        if runs == 1 { "run" } else { "runs" },
    );
    if let Some(first) = a.cells.first()
        && a.cells.len() > 1
    {
        text.push_str(&format!(
            " Every other cell is compared against the baseline, {}",
            first.cell.name
        ));
        let own: Vec<String> = (1..a.cells.len())
            .filter_map(|ci| {
                let bi = a.baseline_of(ci);
                (bi != 0).then(|| {
                    format!(
                        "{} against {}",
                        a.cells[ci].cell.name, a.cells[bi].cell.name
                    )
                })
            })
            .collect();
        if !own.is_empty() {
            text.push_str(&format!(", except {}", own.join("; ")));
        }
        text.push('.');
    }
    b.push(Block::Para(text));
}

fn findings(b: &mut Vec<Block>, a: &Analysis) {
    use crate::findings::{Kind, findings};
    h2(b, "Findings", "findings");
    let all = findings(a);
    if all.is_empty() {
        b.push(Block::Note(
            "nothing to report beyond the tables below: one cell, no warnings".into(),
        ));
        return;
    }
    for kind in Kind::ALL {
        let mut of_kind = all.iter().filter(|f| f.kind == kind).peekable();
        if of_kind.peek().is_none() {
            continue;
        }
        h3(
            b,
            kind.title().into(),
            Some(format!("findings-{}", kind.key())),
        );
        for f in of_kind {
            b.push(Block::Note(f.text.clone()));
        }
    }
}

fn systems(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Systems", "systems");
    let mut t = Table::new(
        "systems",
        &[
            ("system", true),
            ("host", false),
            ("kernel", false),
            ("preempt", false),
            ("CPU", false),
            ("CPUs online", false),
            ("HZ", true),
            ("clocksource", false),
            ("command line", false),
            ("runs", false),
        ],
    );
    for (i, g) in a.systems.iter().enumerate() {
        let s = g.system;
        let hz = s
            .kernel_config
            .value()
            .and_then(|c| c.hz)
            .map_or_else(|| "-".to_string(), |h| h.to_string());
        t.row(vec![
            format!("{}", i + 1).into(),
            dash(&s.hostname).into(),
            dash(&s.kernel_release).into(),
            dash(&s.preempt).into(),
            dash(&s.cpu_model).into(),
            dash(&CpuList::from_cpus(s.cpus_online.clone()).to_string()).into(),
            hz.into(),
            dash(&s.clocksource).into(),
            dash(&s.cmdline).into(),
            runs_of(a, &g.runs).into(),
        ]);
    }
    b.push(Block::Table(t));
    for (i, g) in a.systems.iter().enumerate() {
        h3(
            b,
            if g.system.hostname.is_empty() && g.system.kernel_release.is_empty() {
                format!("System {}: not recorded", i + 1)
            } else {
                format!(
                    "System {}: {} ({})",
                    i + 1,
                    dash(&g.system.hostname),
                    dash(&g.system.kernel_release)
                )
            },
            Some(format!("system-{}", i + 1)),
        );
        let recorded = g
            .runs
            .iter()
            .any(|&(c, r)| a.cells[c].runs[r].run.records(Unrecorded::SYSTEM));
        b.push(Block::Pre(if recorded {
            crate::sysinfo_text(g.system)
        } else {
            crate::sysinfo::names_only_text(g.system)
        }));
        let varying = varying_settings(a, &g.runs);
        if !varying.is_empty() {
            let &(c, r) = &g.runs[0];
            let shown: Vec<&str> = varying.iter().take(6).map(String::as_str).collect();
            let more = varying.len() - shown.len();
            b.push(Block::Note(format!(
                "the runs of this system differ in {}{}: the record above is the first one's \
                 ({}); \"Configuration differences\" gives each run's values",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                },
                crate::analysis::repeat_name(&a.cells[c], a.cells[c].runs[r].repeat)
            )));
        }
    }
}

/// The system settings (`system.*` of the configuration differences) not the same in all of
/// `runs`: one system record stands for them all, and it is the first run's.
fn varying_settings(a: &Analysis, runs: &[(usize, usize)]) -> Vec<String> {
    let configs: Vec<_> = runs
        .iter()
        .map(|&(c, r)| &a.cells[c].runs[r].config)
        .collect();
    let keys: std::collections::BTreeSet<&String> = configs
        .iter()
        .flat_map(|cfg| cfg.keys().filter(|k| k.starts_with("system.")))
        .collect();
    keys.into_iter()
        .filter(|k| {
            let values: std::collections::BTreeSet<_> =
                configs.iter().map(|cfg| cfg.get(*k)).collect();
            values.len() > 1
        })
        .cloned()
        .collect()
}

fn dash(s: &str) -> String {
    if s.trim().is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

/// `cell a ×3, cell b ×1` for a list of `(cell, repeat)`.
fn runs_of(a: &Analysis, runs: &[(usize, usize)]) -> String {
    let mut parts: Vec<(usize, usize)> = Vec::new();
    for &(c, _) in runs {
        match parts.iter_mut().find(|p| p.0 == c) {
            Some(p) => p.1 += 1,
            None => parts.push((c, 1)),
        }
    }
    parts
        .iter()
        .map(|(c, k)| format!("{} ×{k}", a.cells[*c].cell.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cpus_text(r: &RunResult) -> String {
    match &r.config.cpus {
        Some(cpus) => CpuList::from_cpus(cpus.clone()).to_string(),
        None if !r.records(Unrecorded::CPUS) => format!("{}, not recorded", r.config.threads),
        None => format!("{} unpinned", r.config.threads),
    }
}

fn loads_text(r: &RunResult) -> String {
    if r.loads.reports.is_empty() && r.loads.phases.is_empty() {
        return "none".into();
    }
    if !r.loads.phases.is_empty() {
        return format!(
            "schedule: {}",
            r.loads
                .phases
                .iter()
                .map(|p| p.spec.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    r.loads
        .reports
        .iter()
        .map(|l| l.spec.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn configuration(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Cells and their configuration", "configuration");
    let mut t = Table::new(
        "cells",
        &[
            ("cell", false),
            ("repeats", true),
            ("parameters", false),
            ("method", false),
            ("interval", false),
            ("policy", false),
            ("CPUs", false),
            ("duration", false),
            ("loads", false),
        ],
    );
    for c in &a.cells {
        let params = if c.cell.params.is_empty() {
            "-".to_string()
        } else {
            c.cell.params_text()
        };
        let mut row: Vec<TCell> = vec![
            c.cell.name.as_str().into(),
            c.runs.len().to_string().into(),
            params.into(),
        ];
        match c.runs.first() {
            Some(r) => {
                let r = r.run;
                row.extend([
                    if r.records(Unrecorded::METHOD) {
                        r.config.method.name()
                    } else {
                        "not recorded"
                    }
                    .into(),
                    r.config.interval_text().into(),
                    r.config.policy_text().into(),
                    cpus_text(r).into(),
                    r.config
                        .length_text()
                        .unwrap_or_else(|| {
                            // An import that records neither a length nor an end.
                            if latlab_model::known_time(r.elapsed_ns).is_none() {
                                "not recorded".into()
                            } else {
                                "until interrupted".into()
                            }
                        })
                        .into(),
                    loads_text(r).into(),
                ]);
            }
            None => row.extend((0..6).map(|_| TCell::new("-"))),
        }
        t.row_with(vec![("data-cell", c.index.to_string())], row);
    }
    b.push(Block::Table(t));
}

fn differences(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Configuration differences", "differences");
    if a.run_count() < 2 {
        b.push(Block::Note(
            "one run: no other run to compare its configuration with".into(),
        ));
        return;
    }
    b.push(Block::Para(
        "Every setting that is not the same in all runs: the cell's parameters (cell.*), the measuring options (config.*), the system record (system.*), what could be set up (environment.*), the loads (loads.*) and what was traced beside the measurement (trace.events). A cell whose repeats disagree lists each value, separated by |.".into(),
    ));
    let headers = |id: &str| {
        let mut h = vec![("setting".to_string(), false)];
        h.extend(a.cells.iter().map(|c| (c.cell.name.clone(), false)));
        Table::with_headers(id, h)
    };
    let mut between = headers("diff-between");
    let mut within = headers("diff-within");
    for row in &a.diff {
        let mut cells: Vec<TCell> = vec![row.key.as_str().into()];
        cells.extend((0..a.cells.len()).map(|i| TCell::new(row.cell_text(i))));
        let t = match row.kind {
            crate::flatten::DiffKind::BetweenCells => &mut between,
            crate::flatten::DiffKind::WithinCells => &mut within,
        };
        t.row_with(vec![("data-key", row.key.clone())], cells);
    }
    h3(b, "Settings that differ between cells".into(), None);
    table_or_note(b, between, "no setting differs between the cells");
    h3(
        b,
        "Settings that vary between repeats of a cell".into(),
        None,
    );
    table_or_note(b, within, "no setting varies between the repeats of a cell");
}

/// Table `t`, or the note `empty` when it has no rows.
fn table_or_note(b: &mut Vec<Block>, t: Table, empty: &str) {
    if t.rows.is_empty() {
        b.push(Block::Note(empty.into()));
    } else {
        b.push(Block::Table(t));
    }
}

fn latency_headers(lead: &[(&str, bool)]) -> Vec<(String, bool)> {
    let mut h: Vec<(String, bool)> = lead.iter().map(|(s, n)| (s.to_string(), *n)).collect();
    h.extend(LATENCY.iter().map(|(_, name)| (name.to_string(), true)));
    h
}

/// One cell per latency statistic, with the exact value in `data-ns`.
fn stat_cells(s: &Stats) -> Vec<TCell> {
    LATENCY
        .iter()
        .map(|(m, name)| {
            if s.count == 0 {
                return TCell::new("-").attr("data-stat", *name);
            }
            // "≥": a lower bound (an import's samples beyond its histogram's range).
            let at_least = if crate::analysis::stat_is_lower_bound(s, *m) {
                "≥"
            } else {
                ""
            };
            let (text, exact) = match m {
                Metric::Mean | Metric::Stdev => {
                    let v = if *m == Metric::Mean { s.mean } else { s.stdev };
                    (format!("{at_least}{}", numfmt::us_f(v)), format!("{v}"))
                }
                _ => {
                    let v = int_stat(s, *m);
                    (format!("{at_least}{}", numfmt::us(v)), v.to_string())
                }
            };
            TCell::new(text)
                .attr("data-stat", *name)
                .attr("data-ns", exact)
        })
        .collect()
}

/// A row of a table with [`latency_headers`]: the `lead` cells, the samples and missed periods,
/// then [`stat_cells`] of `stats`, with `attrs` on the row.
fn latency_row(
    t: &mut Table,
    attrs: Vec<(&'static str, String)>,
    mut lead: Vec<TCell>,
    stats: &Stats,
    missed: Option<u64>,
) {
    lead.extend([
        TCell::new(stats.count.to_string()).attr("data-stat", "samples"),
        // "-": the run's format does not count them (an import).
        TCell::new(missed.map_or_else(|| "-".to_string(), |m| m.to_string()))
            .attr("data-stat", "missed"),
    ]);
    lead.extend(stat_cells(stats));
    t.row_with(attrs, lead);
}

fn latency(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Latency per cell (µs, all repeats pooled)", "latency");
    let mut t = Table::with_headers(
        "latency",
        latency_headers(&[
            ("cell", false),
            ("runs", true),
            ("samples", true),
            ("missed", true),
        ]),
    );
    for c in &a.cells {
        latency_row(
            &mut t,
            vec![("data-cell", c.index.to_string())],
            vec![c.cell.name.as_str().into(), c.runs.len().to_string().into()],
            &c.stats,
            c.missed,
        );
    }
    b.push(Block::Table(t));
    b.push(Block::Para(
        "missed: periods that passed without a sample because a stall covered them, summed over the repeats; stdev is the population standard deviation.".into(),
    ));
    if a.cells.iter().any(|c| c.stats.bounded_from_ns.is_some()) {
        b.push(Block::Note(
            "\"≥\": a lower bound: the value lies among an imported run's samples beyond its histogram's range, known only to lie there or above (a mean or stdev so marked counts them at the range's end)".into(),
        ));
    }
    if a.cells.iter().any(|c| c.missed.is_none()) {
        b.push(Block::Note(
            "missed \"-\": a run of the cell was imported from a format that does not count missed periods".into(),
        ));
    }
}

fn repeats(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Spread across repeats", "repeats");
    if a.cells.iter().all(|c| c.runs.len() < 2) {
        b.push(Block::Note(
            "no cell has more than one run: no spread across repeats to show".into(),
        ));
        return;
    }
    let mut t = Table::new(
        "spread",
        &[
            ("cell", false),
            ("statistic", false),
            ("repeats", true),
            ("median", true),
            ("min", true),
            ("max", true),
        ],
    );
    let metrics = a.metrics();
    for c in a.cells.iter().filter(|c| c.runs.len() >= 2) {
        for &m in &metrics {
            let Some(s) = c.spread(m) else { continue };
            t.row_with(
                vec![
                    ("data-cell", c.index.to_string()),
                    ("data-stat", m.key(&a.keys)),
                ],
                vec![
                    c.cell.name.as_str().into(),
                    m.label(&a.keys).into(),
                    s.n.to_string().into(),
                    m.format(s.median).into(),
                    m.format(s.min).into(),
                    m.format(s.max).into(),
                ],
            );
        }
    }
    b.push(Block::Table(t));
}

fn comparisons(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Comparisons", "comparisons");
    let Some(base) = a.cells.first() else { return };
    if a.cells.len() < 2 {
        b.push(Block::Note("one cell: nothing to compare".into()));
        return;
    }
    let comparisons = a.comparisons();
    let against = if comparisons.iter().all(|&(_, bi, _)| bi == 0) {
        format!(
            "against {0}: latency values are the pooled statistics, the others medians over the repeats; difference = cell − {0}",
            base.cell.name
        )
    } else {
        format!(
            "against its baseline, named in its heading ({} unless it names another): latency values are the pooled statistics, the others medians over the repeats; difference = cell − baseline",
            base.cell.name
        )
    };
    b.push(Block::Para(format!(
        "Each cell {against}. Support: a two-sided Mann-Whitney U test of the per-repeat values (exact permutation p-value), a verdict only where both cells have at least {MIN_REPEATS} repeats and p < {ALPHA}."
    )));
    for (ci, bi, rows) in comparisons {
        let c = &a.cells[ci];
        let base = &a.cells[bi];
        h3(
            b,
            format!("{} against {}", c.cell.name, base.cell.name),
            Some(format!("comparison-{ci}")),
        );
        // On p99, or on the statistic the cell names (a search's objective).
        let (on, why) = match c.cell.verdict_on.as_deref().and_then(|n| {
            crate::analysis::LATENCY
                .iter()
                .find(|(_, name)| *name == n)
                .map(|&(m, name)| (m, name))
        }) {
            Some((m, name)) => (
                m,
                format!(
                    "{name} (the statistic the search weighed, there with each run's missed \
                     periods counted at the latency they would have had; here, as in every \
                     table, of the wake-ups that happened)"
                ),
            ),
            None => (Metric::P99, "p99".to_string()),
        };
        if let Some(row) = rows.iter().find(|r| r.metric == on) {
            b.push(Block::Para(format!(
                "Verdict on {why}: {}.",
                row.support.sentence(&c.cell.name, &base.cell.name)
            )));
        }
        let mut t = Table::with_headers(
            format!("comparison-{ci}"),
            vec![
                ("statistic".into(), false),
                (base.cell.name.clone(), true),
                (c.cell.name.clone(), true),
                ("difference".into(), true),
                ("%".into(), true),
                ("support".into(), false),
            ],
        );
        for r in &rows {
            let (va, vb) = r.shown();
            t.row_with(
                vec![
                    ("data-stat", r.metric.key(&a.keys)),
                    ("data-verdict", r.support.verdict_key().to_string()),
                ],
                vec![
                    r.metric.label(&a.keys).into(),
                    va.into(),
                    vb.into(),
                    r.diff()
                        .map_or_else(|| "-".to_string(), |d| r.metric.format_diff(d))
                        .into(),
                    r.percent()
                        .map_or_else(|| "-".to_string(), numfmt::percent_signed)
                        .into(),
                    r.support.text(&c.cell.name).into(),
                ],
            );
        }
        b.push(Block::Table(t));
        if let Some(caveat) = crate::analysis::extremes_caveat(base, c) {
            b.push(Block::Para(format!("Min and max: {caveat}.")));
        }
    }
}

/// Why a histogram chart of `series` has nothing to draw.
fn undrawn(series: &[HistSeries], of: &str) -> String {
    if series.iter().all(|s| s.hist.is_empty()) {
        format!("no samples in {of}")
    } else {
        "not drawn: the imported files hold no histogram rows (only the minimum, maximum and \
         mean of their samples are known)"
            .into()
    }
}

fn distributions(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Distributions of all cells", "distributions");
    let series: Vec<HistSeries> = a
        .cells
        .iter()
        .map(|c| HistSeries {
            label: c.cell.name.clone(),
            hist: &c.pooled,
            series: c.index,
            bound_ns: c.stats.bounded_from_ns,
        })
        .collect();
    match histogram_chart("Latency histograms of the cells (share of samples)", &series, true) {
        Some(svg) => b.push(Block::Figure {
            caption: "Histograms of all cells, all CPUs and repeats pooled, as the share of each cell's samples on a log axis (cells with different sample counts compare directly).".into(),
            svg,
        }),
        None => b.push(Block::Note(format!("histograms: {}", undrawn(&series, "any cell")))),
    }
    let mut lines = Vec::new();
    for (i, c) in a.cells.iter().enumerate() {
        if c.runs.len() > 1 {
            for r in &c.runs {
                lines.push(SpectrumLine {
                    label: format!("{} repeat {}", c.cell.name, r.repeat),
                    hist: &r.run.overall.histogram,
                    series: i,
                    width: 0.8,
                    opacity: 0.45,
                    legend: false,
                    bound_ns: r.stats.bounded_from_ns,
                });
            }
        }
        lines.push(SpectrumLine {
            label: c.cell.name.clone(),
            hist: &c.pooled,
            series: i,
            width: 2.0,
            opacity: 1.0,
            legend: true,
            bound_ns: c.stats.bounded_from_ns,
        });
    }
    let note = if a.cells.iter().any(|c| c.runs.len() > 1) {
        "; thin lines: single repeats"
    } else {
        ""
    };
    if let Some(svg) = spectrum_chart("Percentile spectra of the cells", &lines, note) {
        b.push(Block::Figure {
            caption: "Percentile spectra: the latency at each percentile, the x axis in nines (0.9, 0.99, 0.999, …), ending at the maximum.".into(),
            svg,
        });
    }
}

fn cost(b: &mut Vec<Block>, a: &Analysis) {
    h2(
        b,
        "Power, frequency, idle states and load throughput",
        "cost",
    );
    let mut headers: Vec<(String, bool)> = [
        ("cell", false),
        ("repeat", true),
        ("power (W)", true),
        ("energy (J)", true),
        ("power source", false),
        ("frequency (MHz)", true),
        ("steal (%)", true),
        ("idle residency", false),
    ]
    .iter()
    .map(|(h, n)| (h.to_string(), *n))
    .collect();
    headers.extend(a.keys.iter().map(|k| (k.label(), true)));
    let mut t = Table::with_headers("cost", headers);
    // (what, reason) -> runs without it.
    let mut missing: Vec<(&str, String, Vec<String>)> = Vec::new();
    let mut note = |what: &'static str, reason: &str, run: String| match missing
        .iter_mut()
        .find(|(w, r, _)| *w == what && r == reason)
    {
        Some((_, _, runs)) => runs.push(run),
        None => missing.push((what, reason.to_string(), vec![run])),
    };
    let mut any = false;
    for c in &a.cells {
        for r in &c.runs {
            let who = run_name(c, r);
            let mut row: Vec<TCell> =
                vec![c.cell.name.as_str().into(), r.repeat.to_string().into()];
            // A measured column's cells, or `-` in each with the reason noted below the table.
            let mut put =
                |what: &'static str, got: Result<Vec<TCell>, &String>, width: usize| match got {
                    Ok(cells) => {
                        any = true;
                        row.extend(cells);
                    }
                    Err(e) => {
                        note(what, e, who.clone());
                        row.extend((0..width).map(|_| TCell::from("-")));
                    }
                };
            let power = r.power.as_ref().map(|p| {
                vec![
                    TCell::new(format!("{:.2}", p.watts)).attr("data-value", p.watts.to_string()),
                    p.joules
                        .map_or_else(|| "-".to_string(), |j| format!("{j:.1}"))
                        .into(),
                    p.source.as_str().into(),
                ]
            });
            put("power", power, 3);
            let freq = r.freq_mhz.as_ref().map(|f| vec![format!("{f:.0}").into()]);
            put("frequency", freq, 1);
            let steal = r.steal_pct.as_ref().map(|p| vec![format!("{p:.1}").into()]);
            put("steal", steal, 1);
            let idle = r.idle.as_ref().map(|states| {
                let text: Vec<String> = states
                    .iter()
                    .map(|(n, p)| format!("{n} {p:.1} %"))
                    .collect();
                vec![text.join(", ").into()]
            });
            put("idle residency", idle, 1);
            for k in 0..a.keys.len() {
                match r.value(Metric::Throughput(k)) {
                    Some(v) => {
                        any = true;
                        row.push(numfmt::si(v).into());
                    }
                    None => row.push("-".into()),
                }
            }
            t.row_with(
                vec![
                    ("data-cell", c.index.to_string()),
                    ("data-repeat", r.repeat.to_string()),
                ],
                row,
            );
        }
    }
    if any {
        b.push(Block::Table(t));
    }
    for (what, reason, runs) in &missing {
        let all = runs.len() == a.run_count();
        b.push(Block::Note(if all {
            format!("{what}: unavailable: {reason}")
        } else {
            format!("{what}: unavailable: {reason} ({})", runs.join(", "))
        }));
    }
    if a.keys.is_empty() {
        b.push(Block::Note(
            "load throughput: no load counted any work".into(),
        ));
    }
    if any {
        b.push(Block::Para(
            "power: the package sources summed (or the first source with a reading), mean over the run; frequency: mean over the measured CPUs; steal: time the hypervisor gave to others, mean over the CPUs; idle residency: share of the run in each idle state, mean over the measured CPUs.".into(),
        ));
    }

    power_sources(b, a);
    loads(b, a);
}

/// The power sources of every run, one row per source.
fn power_sources(b: &mut Vec<Block>, a: &Analysis) {
    let mut sources = Table::new(
        "power-sources",
        &[
            ("cell", false),
            ("repeat", true),
            ("source", false),
            ("mean (W)", true),
            ("energy (J)", true),
            ("counter wraps", true),
        ],
    );
    for c in &a.cells {
        for r in &c.runs {
            let Some(Field::Value(list)) = r.run.samples.as_ref().map(|s| &s.power_sources) else {
                continue;
            };
            for p in list {
                sources.row(vec![
                    c.cell.name.as_str().into(),
                    r.repeat.to_string().into(),
                    p.name.as_str().into(),
                    p.avg_w
                        .map_or_else(|| "-".into(), |w| format!("{w:.2}"))
                        .into(),
                    p.energy_j
                        .map_or_else(|| "-".into(), |j| format!("{j:.1}"))
                        .into(),
                    p.wraps.to_string().into(),
                ]);
            }
        }
    }
    if !sources.rows.is_empty() {
        h3(b, "Power sources".into(), Some("power-sources".into()));
        b.push(Block::Table(sources));
    }
}

/// Each run's load throughput, its warnings, and the phases of load schedules.
fn loads(b: &mut Vec<Block>, a: &Analysis) {
    h3(b, "Loads".into(), Some("loads".into()));
    let mut loads = Table::new(
        "loads",
        &[
            ("cell", false),
            ("repeat", true),
            ("load", false),
            ("kind", false),
            ("workers", true),
            ("CPUs", false),
            ("from (s)", true),
            ("ran (s)", true),
            ("throughput", false),
        ],
    );
    let mut warnings = Vec::new();
    for c in &a.cells {
        for r in &c.runs {
            for l in &r.run.loads.reports {
                let rates = if l.throughput.is_empty() {
                    "no work counted".to_string()
                } else {
                    l.throughput
                        .iter()
                        .map(|t| format!("{} {} {}", numfmt::si(t.rate), t.unit, t.what))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                loads.row(vec![
                    c.cell.name.as_str().into(),
                    r.repeat.to_string().into(),
                    l.spec.as_str().into(),
                    l.kind.as_str().into(),
                    l.workers.to_string().into(),
                    l.cpus
                        .as_ref()
                        .map_or_else(
                            || "all".to_string(),
                            |c| {
                                CpuList::from_cpus(c.iter().map(|&x| x as u32).collect())
                                    .to_string()
                            },
                        )
                        .into(),
                    numfmt::secs(l.started_ns).into(),
                    numfmt::secs(l.elapsed_ns).into(),
                    rates.into(),
                ]);
                for w in &l.warnings {
                    warnings.push(format!("{}: {}: {w}", run_name(c, r), l.spec));
                }
            }
        }
    }
    if loads.rows.is_empty() {
        b.push(Block::Note("loads: none ran".into()));
    } else {
        b.push(Block::Table(loads));
        for w in warnings {
            b.push(Block::Note(format!("load warning: {w}")));
        }
    }
    let mut phases = Table::new(
        "load-phases",
        &[
            ("cell", false),
            ("repeat", true),
            ("phase", true),
            ("load", false),
            ("from (s)", true),
            ("to (s)", true),
            ("samples", true),
            ("missed", true),
            ("max (µs)", true),
            ("window p99, highest (µs)", true),
        ],
    );
    for c in &a.cells {
        for r in &c.runs {
            for p in &r.run.loads.phases {
                let l = crate::analysis::phase_latency(r.run, p);
                let cell = |f: fn(&crate::analysis::PhaseLatency) -> String| {
                    l.as_ref().map_or_else(|| "-".to_string(), f).into()
                };
                phases.row(vec![
                    c.cell.name.as_str().into(),
                    r.repeat.to_string().into(),
                    p.index.to_string().into(),
                    p.spec.as_str().into(),
                    numfmt::secs(p.start_ns).into(),
                    numfmt::secs(p.end_ns).into(),
                    cell(|l| l.samples.to_string()),
                    cell(|l| l.missed.to_string()),
                    cell(|l| numfmt::us(l.max)),
                    cell(|l| numfmt::us(l.window_p99)),
                ]);
            }
        }
    }
    if !phases.rows.is_empty() {
        h3(b, "Load schedules".into(), Some("load-phases".into()));
        b.push(Block::Table(phases));
        b.push(Block::Note(
            "latency per phase: the windows whose middle falls in the phase, over every CPU; \
             samples, missed periods and maximum exact, p99 the highest of those windows' \
             (a phase's own is not kept); - where no window fell in it"
                .into(),
        ));
    }
}

fn run_name(c: &CellFigures, r: &RunFigures) -> String {
    crate::analysis::repeat_name(c, r.repeat)
}

fn tradeoffs(b: &mut Vec<Block>, a: &Analysis, plots: bool) {
    h2(
        b,
        "Trade-offs: tail latency against power and throughput",
        "tradeoffs",
    );
    let mut headers: Vec<(String, bool)> = vec![
        ("cell".into(), false),
        ("p99 (µs)".into(), true),
        ("max (µs)".into(), true),
        ("power (W)".into(), true),
    ];
    headers.extend(a.keys.iter().map(|k| (k.label(), true)));
    let mut t = Table::with_headers("tradeoff", headers);
    for c in &a.cells {
        // "≥" where the value is only a lower bound, as every other table marks it.
        let f = |m: Metric| {
            c.value(m).map_or_else(
                || "-".to_string(),
                |v| {
                    let at_least = if c.is_lower_bound(m) { "≥" } else { "" };
                    format!("{at_least}{}", m.format(v))
                },
            )
        };
        let mut row: Vec<TCell> = vec![
            c.cell.name.as_str().into(),
            f(Metric::P99).into(),
            f(Metric::Max).into(),
            f(Metric::PowerW).into(),
        ];
        row.extend((0..a.keys.len()).map(|k| TCell::new(f(Metric::Throughput(k)))));
        t.row_with(vec![("data-cell", c.index.to_string())], row);
    }
    b.push(Block::Table(t));
    b.push(Block::Para(
        "p99 and max of the pooled histograms; power and throughput: medians over the repeats."
            .into(),
    ));
    let points = |m: Metric| -> Vec<TradePoint> {
        a.cells
            .iter()
            .filter_map(|c| {
                let s = c.spread(m)?;
                let p99 = c.spread(Metric::P99)?;
                Some(TradePoint {
                    label: c.cell.name.clone(),
                    x: s.median,
                    x_range: (s.min, s.max),
                    p99: c.value(Metric::P99)?,
                    p99_range: (p99.min, p99.max),
                    max: c.value(Metric::Max)?,
                })
            })
            .collect()
    };
    let mut axes: Vec<(Metric, String, String)> = vec![(
        Metric::PowerW,
        "power (W, median of the repeats)".into(),
        "power".into(),
    )];
    for (k, key) in a.keys.iter().enumerate() {
        axes.push((
            Metric::Throughput(k),
            format!("{} (median of the repeats)", key.label()),
            format!("throughput of {}", key.label()),
        ));
    }
    for (m, x_label, what) in axes {
        let more_is_better = matches!(m, Metric::Throughput(_));
        let pts = points(m);
        let missing: Vec<&str> = a
            .cells
            .iter()
            .filter(|c| !pts.iter().any(|p| p.label == c.cell.name))
            .map(|c| c.cell.name.as_str())
            .collect();
        if pts.is_empty() {
            b.push(Block::Note(format!(
                "trade-off against {what}: unavailable: no cell has {what} readings"
            )));
            continue;
        }
        if pts.len() == 1 {
            // One point weighs nothing against anything: its figures are in the table above.
            b.push(Block::Note(format!(
                "trade-off against {what}: no chart: only {} has {what} readings, nothing to \
                 weigh it against",
                pts[0].label
            )));
        } else if plots
            && let Some(svg) = tradeoff_chart(
                &format!("tail latency against {what}"),
                &x_label,
                &pts,
                more_is_better,
            )
        {
            b.push(Block::Figure {
                caption: format!(
                    "p99 (dot) and max (square) of each cell against its {what}; bars show the range over the repeats; the grey line joins the cells no other cell beats on both p99 and {what} (the Pareto front)."
                ),
                svg,
            });
        }
        if !missing.is_empty() {
            b.push(Block::Note(format!(
                "trade-off against {what}: left out for lack of readings: {}",
                missing.join(", ")
            )));
        }
    }
}

fn runs(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Every run (µs)", "runs");
    let mut t = Table::with_headers(
        "runs",
        latency_headers(&[
            ("cell", false),
            ("repeat", true),
            ("run", false),
            ("started", false),
            ("measured (s)", true),
            ("samples", true),
            ("missed", true),
        ]),
    );
    for c in &a.cells {
        for r in &c.runs {
            latency_row(
                &mut t,
                vec![
                    ("data-cell", c.index.to_string()),
                    ("data-repeat", r.repeat.to_string()),
                ],
                vec![
                    c.cell.name.as_str().into(),
                    r.repeat.to_string().into(),
                    r.run.id.as_str().into(),
                    // "-" where an imported run's format gave no start time or length.
                    r.run.known_start().unwrap_or("-").into(),
                    latlab_model::known_time(r.run.elapsed_ns)
                        .map_or_else(|| "-".to_string(), numfmt::secs3)
                        .into(),
                ],
                &r.stats,
                r.missed,
            );
        }
    }
    b.push(Block::Table(t));
}

fn per_cpu(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Per CPU (µs, repeats pooled)", "cpus");
    let mut t = Table::with_headers(
        "per-cpu",
        latency_headers(&[
            ("cell", false),
            ("CPU", false),
            ("samples", true),
            ("missed", true),
        ]),
    );
    for c in &a.cells {
        for cpu in &c.cpus {
            latency_row(
                &mut t,
                vec![
                    ("data-cell", c.index.to_string()),
                    ("data-cpu", cpu.label.clone()),
                ],
                vec![c.cell.name.as_str().into(), cpu.label.as_str().into()],
                &cpu.stats,
                cpu.missed,
            );
        }
    }
    b.push(Block::Table(t));
}

/// Idle residency of each CPU (a per-core experiment limits idle states CPU by CPU, and the
/// mean over the CPUs elsewhere hides that): the median over a cell's repeats, every CPU the
/// samplers read.
fn per_cpu_idle(b: &mut Vec<Block>, a: &Analysis) {
    let mut states: Vec<&str> = Vec::new();
    // (cell, CPU) → state → the repeats' residencies.
    type Residencies<'a> = Vec<(&'a str, Vec<f64>)>;
    let mut rows: std::collections::BTreeMap<(usize, usize), Residencies> =
        std::collections::BTreeMap::new();
    for (ci, c) in a.cells.iter().enumerate() {
        for r in &c.runs {
            let Some(s) = &r.run.samples else { continue };
            for (cpu, residency) in crate::analysis::idle_per_cpu(s) {
                let row = rows.entry((ci, cpu)).or_default();
                for (name, pct) in residency {
                    if !states.contains(&name) {
                        states.push(name);
                    }
                    match row.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, v)) => v.push(pct),
                        None => row.push((name, vec![pct])),
                    }
                }
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let headers: Vec<String> = states.iter().map(|s| format!("{s} (%)")).collect();
    let mut columns = vec![("cell", false), ("CPU", false)];
    columns.extend(headers.iter().map(|h| (h.as_str(), true)));
    let mut t = Table::new("per-cpu-idle", &columns);
    for ((ci, cpu), row) in &rows {
        let mut cells: Vec<TCell> = vec![
            a.cells[*ci].cell.name.as_str().into(),
            format!("cpu{cpu}").into(),
        ];
        for s in &states {
            let v = row
                .iter()
                .find(|(n, _)| n == s)
                .and_then(|(_, v)| crate::analysis::spread(v));
            cells.push(
                v.map_or_else(|| "-".to_string(), |v| format!("{:.1}", v.median))
                    .into(),
            );
        }
        t.row(cells);
    }
    h3(
        b,
        "Idle residency per CPU".into(),
        Some("per-cpu-idle".into()),
    );
    b.push(Block::Table(t));
    b.push(Block::Note(
        "share of the run each CPU spent in each idle state, median over the repeats; every CPU \
         the samplers read, measured or not"
            .into(),
    ));
}

fn spikes(b: &mut Vec<Block>, a: &Analysis) {
    h2(b, "Spikes", "spikes");
    // Traced runs (`--trace`) tell what the kernel did during each spike.
    let stories = a
        .cells
        .iter()
        .flat_map(|c| &c.runs)
        .any(|r| r.run.spikes.kept.iter().any(|s| s.story.is_some()));
    let mut columns = vec![
        ("cell", false),
        ("repeat", true),
        ("CPU", false),
        ("at (s)", true),
        ("latency (µs)", true),
    ];
    if stories {
        columns.push(("what the kernel did", false));
    }
    let mut t = Table::new("spikes", &columns);
    let mut notes = Vec::new();
    let mut any_threshold = false;
    for c in &a.cells {
        for r in &c.runs {
            let s = &r.run.spikes;
            if s.threshold_ns.is_none() && s.kept.is_empty() {
                continue;
            }
            any_threshold = true;
            let mut kept: Vec<_> = s.kept.iter().collect();
            kept.sort_by(|x, y| y.value_ns.cmp(&x.value_ns).then(x.at_ns.cmp(&y.at_ns)));
            for k in kept.iter().take(SPIKES_SHOWN) {
                let cpu = k.cpu.map_or_else(
                    || {
                        r.run
                            .threads
                            .get(k.thread as usize)
                            .map_or_else(|| format!("thread {}", k.thread), |t| t.label.clone())
                    },
                    |c| format!("cpu{c}"),
                );
                let mut row = vec![
                    c.cell.name.as_str().into(),
                    r.repeat.to_string().into(),
                    cpu.into(),
                    format!("{:.3}", k.at_ns as f64 / 1e9).into(),
                    TCell::new(numfmt::us(k.value_ns)).attr("data-ns", k.value_ns.to_string()),
                ];
                if stories {
                    row.push(
                        k.story
                            .as_ref()
                            .map_or_else(String::new, |st| st.summary())
                            .into(),
                    );
                }
                t.row(row);
            }
            let thr = s
                .threshold_ns
                .map_or_else(String::new, |t| format!(" above {} µs", numfmt::us(t)));
            let shown = kept.len().min(SPIKES_SHOWN);
            notes.push(format!(
                "{}: {} {}{thr} kept{}, {} more seen but not kept",
                run_name(c, r),
                s.kept.len(),
                if s.kept.len() == 1 { "spike" } else { "spikes" },
                if kept.len() > shown {
                    format!(" ({shown} largest listed)")
                } else {
                    String::new()
                },
                s.not_kept
            ));
        }
    }
    if !any_threshold {
        b.push(Block::Note(
            "spikes: none recorded (no run had a spike threshold)".into(),
        ));
        return;
    }
    if !t.rows.is_empty() {
        b.push(Block::Table(t));
    }
    for n in notes {
        b.push(Block::Note(n));
    }
}

fn cell_section(b: &mut Vec<Block>, c: &CellFigures) {
    h2(
        b,
        &format!("Cell {}", c.cell.name),
        &format!("cell-{}", c.index),
    );
    if !c.cell.params.is_empty() {
        b.push(Block::Para(format!(
            "Parameters: {}.",
            c.cell.params_text()
        )));
    }
    let series: Vec<HistSeries> = c
        .cpus
        .iter()
        .enumerate()
        .map(|(i, cpu)| HistSeries {
            label: cpu.label.clone(),
            hist: &cpu.hist,
            series: i,
            bound_ns: cpu.stats.bounded_from_ns,
        })
        .collect();
    let pooled = if c.runs.len() > 1 {
        format!(", {} repeats pooled", c.runs.len())
    } else {
        String::new()
    };
    match histogram_chart(&format!("{}: latency histogram per CPU{pooled}", c.cell.name), &series, false) {
        Some(svg) => b.push(Block::Figure {
            caption: "Latency histogram: one step line per CPU on a log count axis, each CPU's maximum in the legend; the latency axis is linear (bins of 1 µs or finer) when the largest value drawn is at most 400 µs, and logarithmic when it is larger, as its label says.".into(),
            svg,
        }),
        None => b.push(Block::Note(format!(
            "latency histogram: {}",
            undrawn(&series, "this cell")
        ))),
    }
    let mut lines: Vec<SpectrumLine> = c
        .cpus
        .iter()
        .enumerate()
        .map(|(i, cpu)| SpectrumLine {
            label: cpu.label.clone(),
            hist: &cpu.hist,
            series: i,
            width: 1.2,
            opacity: 1.0,
            legend: true,
            bound_ns: cpu.stats.bounded_from_ns,
        })
        .collect();
    // Over all CPUs, where there are several (one CPU's line would hide under it).
    let several = c.cpus.len() > 1;
    if several {
        lines.push(SpectrumLine {
            label: "all CPUs".into(),
            hist: &c.pooled,
            series: c.cpus.len(),
            width: 2.4,
            opacity: 1.0,
            legend: true,
            bound_ns: c.stats.bounded_from_ns,
        });
    }
    if let Some(svg) = spectrum_chart(
        &format!("{}: percentile spectrum{pooled}", c.cell.name),
        &lines,
        "",
    ) {
        b.push(Block::Figure {
            caption: if several {
                "Percentile spectrum per CPU and over all CPUs."
            } else {
                "Percentile spectrum of the one CPU measured."
            }
            .into(),
            svg,
        });
    }
    for (i, r) in c.runs.iter().enumerate() {
        h3(
            b,
            format!("{}: repeat {} ({})", c.cell.name, r.repeat, r.run.id),
            Some(format!("cell-{}-run-{}", c.index, r.repeat)),
        );
        let (figs, notes) = timeline(r.run, i == 0);
        for (caption, svg) in figs {
            b.push(Block::Figure { caption, svg });
        }
        for n in notes {
            b.push(Block::Note(n));
        }
    }
}

/// One traced family of one cell, merged over its repeats.
struct TracedFamily {
    family: latlab_model::trace::Family,
    hist: latlab_hist::Histogram,
    /// Per key name, merged over the repeats, most samples first.
    keys: Vec<(String, latlab_hist::Histogram)>,
    dropped: u64,
    runs: usize,
}

fn traced_families(c: &CellFigures) -> Vec<TracedFamily> {
    let mut out: Vec<TracedFamily> = Vec::new();
    for r in &c.runs {
        let Some(t) = &r.run.trace else { continue };
        for f in &t.families {
            let i = match out.iter().position(|x| x.family == f.family) {
                Some(i) => i,
                None => {
                    out.push(TracedFamily {
                        family: f.family,
                        hist: latlab_hist::Histogram::new(),
                        keys: Vec::new(),
                        dropped: 0,
                        runs: 0,
                    });
                    out.len() - 1
                }
            };
            let x = &mut out[i];
            x.hist.merge(&f.histogram);
            x.dropped += f.dropped;
            x.runs += 1;
            for k in &f.keys {
                match x.keys.iter_mut().find(|(n, _)| *n == k.name) {
                    Some((_, h)) => h.merge(&k.histogram),
                    None => x.keys.push((k.name.clone(), k.histogram.clone())),
                }
            }
        }
    }
    out.sort_by_key(|f| f.family);
    for f in &mut out {
        f.keys
            .sort_by(|a, b| b.1.count().cmp(&a.1.count()).then(a.0.cmp(&b.0)));
    }
    out
}

/// Keys listed per cell and family.
const TRACE_KEYS_SHOWN: usize = 5;

fn traced(b: &mut Vec<Block>, a: &Analysis, plots: bool) {
    h2(b, "Kernel latencies traced beside the runs", "trace");
    if a.cells
        .iter()
        .all(|c| c.runs.iter().all(|r| r.run.trace.is_none()))
    {
        b.push(Block::Note(
            "traced kernel latencies: none in these runs (measured without tracing)".into(),
        ));
        return;
    }
    let per_cell: Vec<Vec<TracedFamily>> = a.cells.iter().map(traced_families).collect();
    let silent = silent_families(&per_cell);
    let stats = [
        Metric::P50,
        Metric::P90,
        Metric::P99,
        Metric::P99_9,
        Metric::Max,
    ];
    let mut headers: Vec<(String, bool)> = vec![
        ("cell".into(), false),
        ("family".into(), false),
        ("what".into(), false),
        ("runs".into(), true),
        ("samples".into(), true),
    ];
    headers.extend(
        stats
            .iter()
            .map(|m| (format!("{} (µs)", m.name(&[])), true)),
    );
    headers.push(("dropped".into(), true));
    let mut t = Table::with_headers("trace", headers);
    let mut keys = Table::new(
        "trace-keys",
        &[
            ("cell", false),
            ("family", false),
            ("key", false),
            ("samples", true),
            ("p99 (µs)", true),
            ("max (µs)", true),
        ],
    );
    for (c, fams) in a.cells.iter().zip(&per_cell) {
        let mut row = |family: &str, what: &str, runs: usize, hist: &Histogram, dropped: u64| {
            let s = Stats::of(hist);
            let mut row: Vec<TCell> = vec![
                c.cell.name.as_str().into(),
                family.into(),
                what.into(),
                runs.to_string().into(),
                s.count.to_string().into(),
            ];
            for m in stats {
                let v = int_stat(&s, m);
                row.push(if s.count == 0 {
                    TCell::new("-")
                } else {
                    TCell::new(numfmt::us(v))
                        .attr("data-stat", m.name(&[]))
                        .attr("data-ns", v.to_string())
                });
            }
            row.push(dropped.to_string().into());
            t.row_with(
                vec![
                    ("data-cell", c.index.to_string()),
                    ("data-family", family.to_string()),
                ],
                row,
            );
        };
        for f in fams.iter().filter(|f| !silent.contains(&f.family)) {
            if f.family == Family::TaskletRuntime
                && let Some((runs, h)) = tasklet_latency(fams)
            {
                row(Family::SoftirqLatency.name(), TASKLET_LATENCY, runs, h, 0);
            }
            row(
                f.family.name(),
                f.family.describe(),
                f.runs,
                &f.hist,
                f.dropped,
            );
            for (name, h) in f.keys.iter().take(TRACE_KEYS_SHOWN) {
                let ks = Stats::of(h);
                keys.row(vec![
                    c.cell.name.as_str().into(),
                    f.family.name().into(),
                    format!("{}: {name}", f.family.key_kind()).into(),
                    ks.count.to_string().into(),
                    numfmt::us(ks.p99).into(),
                    numfmt::us(ks.max).into(),
                ]);
            }
        }
    }
    b.push(Block::Table(t));
    if !keys.rows.is_empty() {
        h3(
            b,
            format!("Busiest keys ({TRACE_KEYS_SHOWN} per cell and family)"),
            Some("trace-keys".into()),
        );
        b.push(Block::Table(keys));
    }
    trace_notes(b, a, &per_cell, &silent);
    if plots {
        traced_figures(b, a, &per_cell);
    }
}

/// How long a tasklet waited to run, as the trace table names it.
const TASKLET_LATENCY: &str = "tasklet: raise -> run (softirq TASKLET)";

/// A tasklet's wait to run: tasklets run when the TASKLET softirq raised for them is entered,
/// so its raise -> entry latency is the wait of the first tasklet of each batch (the longest).
fn tasklet_latency(fams: &[TracedFamily]) -> Option<(usize, &Histogram)> {
    let f = fams.iter().find(|f| f.family == Family::SoftirqLatency)?;
    let (_, h) = f.keys.iter().find(|(name, _)| name == "TASKLET")?;
    Some((f.runs, h))
}

/// One histogram chart and one spectrum chart per traced family, a line per cell.
fn traced_figures(b: &mut Vec<Block>, a: &Analysis, per_cell: &[Vec<TracedFamily>]) {
    let mut families: Vec<latlab_model::trace::Family> =
        per_cell.iter().flatten().map(|f| f.family).collect();
    families.sort();
    families.dedup();
    for fam in families {
        let series: Vec<HistSeries> = a
            .cells
            .iter()
            .zip(per_cell)
            .filter_map(|(c, fams)| {
                fams.iter().find(|f| f.family == fam).map(|f| HistSeries {
                    label: c.cell.name.clone(),
                    hist: &f.hist,
                    series: c.index,
                    bound_ns: None,
                })
            })
            .collect();
        if let Some(svg) = histogram_chart(
            &format!(
                "{} ({}): histograms of the cells",
                fam.describe(),
                fam.name()
            ),
            &series,
            true,
        ) {
            b.push(Block::Figure {
                caption: format!(
                    "Traced {}: every CPU and key, repeats pooled, as the share of each cell's events.",
                    fam.describe()
                ),
                svg,
            });
        }
        let lines: Vec<SpectrumLine> = series
            .iter()
            .map(|s| SpectrumLine {
                label: s.label.clone(),
                hist: s.hist,
                series: s.series,
                width: 1.8,
                opacity: 1.0,
                legend: true,
                bound_ns: s.bound_ns,
            })
            .collect();
        if let Some(svg) = spectrum_chart(
            &format!("{} ({}): percentile spectra", fam.describe(), fam.name()),
            &lines,
            "",
        ) {
            b.push(Block::Figure {
                caption: format!("Percentile spectra of the traced {}.", fam.describe()),
                svg,
            });
        }
    }
}

/// Notes under the trace tables: events not traced (naming the runs when not all), runs
/// without a trace, and what tracing cost in each run.
/// The families traced that saw not one event in any cell: said in a note, not left as rows of
/// zeros.
fn silent_families(per_cell: &[Vec<TracedFamily>]) -> Vec<Family> {
    let traced: Vec<&TracedFamily> = per_cell.iter().flatten().collect();
    let mut silent: Vec<Family> = traced
        .iter()
        .map(|f| f.family)
        .filter(|fam| {
            traced
                .iter()
                .filter(|f| f.family == *fam)
                .all(|f| f.hist.count() == 0)
        })
        .collect();
    silent.sort();
    silent.dedup();
    silent
}

fn trace_notes(
    b: &mut Vec<Block>,
    a: &Analysis,
    per_cell: &[Vec<TracedFamily>],
    silent: &[Family],
) {
    let mut skipped: Vec<(String, Vec<String>)> = Vec::new();
    let mut costs = Vec::new();
    for c in &a.cells {
        for r in &c.runs {
            let Some(tr) = &r.run.trace else { continue };
            for s in &tr.skipped {
                let what = format!("{}: {}", s.event, s.reason);
                match skipped.iter_mut().find(|(w, _)| *w == what) {
                    Some((_, runs)) => runs.push(run_name(c, r)),
                    None => skipped.push((what, vec![run_name(c, r)])),
                }
            }
            costs.push(if tr.cost.available {
                format!(
                    "tracing cost, {}: {:.2} ms of BPF run time in {} runs of its programs ({:.3} % of all online CPUs' time)",
                    run_name(c, r),
                    tr.cost.run_time_ns as f64 / 1e6,
                    tr.cost.run_count,
                    tr.cost.cpu_fraction * 100.0
                )
            } else {
                format!(
                    "tracing cost, {}: unavailable: {}",
                    run_name(c, r),
                    tr.cost.source
                )
            });
        }
    }
    let traced_runs = costs.len();
    for (what, runs) in skipped {
        b.push(Block::Note(if runs.len() == traced_runs {
            format!("not traced: {what}")
        } else {
            format!("not traced: {what} ({})", runs.join(", "))
        }));
    }
    let untraced: Vec<String> = a
        .cells
        .iter()
        .flat_map(|c| {
            c.runs
                .iter()
                .filter(|r| r.run.trace.is_none())
                .map(move |r| run_name(c, r))
        })
        .collect();
    if !untraced.is_empty() {
        b.push(Block::Note(format!(
            "traced kernel latencies: none in {}",
            untraced.join(", ")
        )));
    }
    if !silent.is_empty() {
        let names: Vec<&str> = silent.iter().map(|f| f.name()).collect();
        b.push(Block::Note(format!(
            "no events in any run: {} (the tracepoints were attached; the kernel did no such \
             work while these runs measured)",
            names.join(", ")
        )));
    }
    let traced = |fam: Family| per_cell.iter().flatten().any(|f| f.family == fam);
    if traced(Family::TaskletRuntime) && !traced(Family::SoftirqLatency) {
        b.push(Block::Note(
            "a tasklet's wait to run is the TASKLET softirq's raise -> entry: trace softirq \
             too to have it"
                .into(),
        ));
    }
    for c in costs {
        b.push(Block::Note(c));
    }
}
