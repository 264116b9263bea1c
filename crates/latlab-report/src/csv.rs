//! CSV: the report's statistics (one row per cell and per run), and a single run's per-thread
//! statistics, histogram buckets, windows and spikes (`latlab export --format csv`).
//!
//! RFC 4180: comma-separated, a header row, fields quoted when they hold a comma, a quote or a line
//! break, lines ending in `\n`. Latencies are integer nanoseconds (means and standard deviations
//! are decimals); every statistic is computed from the histograms, except percentiles an imported
//! run's tool computed exactly where its histogram gives only a lower bound. Where an import's
//! histogram ended before its largest samples, `lower_bounds_from_ns` says where: a percentile
//! at or above it (and below the maximum, which is exact) and the mean, unless the tool printed
//! them, are only lower bounds; empty for every run latlab measured.

use latlab_model::{RunResult, Stats};

use crate::analysis::{Analysis, CellFigures, LATENCY, Metric, RunFigures};
use crate::input::ReportInput;

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn line(out: &mut String, fields: &[String]) {
    let row: Vec<String> = fields.iter().map(|f| field(f)).collect();
    out.push_str(&row.join(","));
    out.push('\n');
}

/// The value, or an empty field without one.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// Header fields from their names.
fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The latency columns of [`Stats`]: `min_ns` … `max_ns`, `mean_ns`, `stdev_ns`, and
/// `lower_bounds_from_ns`.
fn stat_headers() -> Vec<String> {
    LATENCY
        .iter()
        .map(|(m, _)| format!("{}_ns", m.key(&[])))
        .chain(["lower_bounds_from_ns".to_string()])
        .collect()
}

fn stat_fields(s: &Stats) -> Vec<String> {
    if s.count == 0 {
        return vec![String::new(); LATENCY.len() + 1];
    }
    LATENCY
        .iter()
        .map(|(m, _)| match m {
            Metric::Mean => s.mean.to_string(),
            Metric::Stdev => s.stdev.to_string(),
            m => crate::analysis::int_stat(s, *m).to_string(),
        })
        .chain([opt(s.bounded_from_ns)])
        .collect()
}

/// The report's statistics: a `cell` row per cell (latency of the pooled histogram; power,
/// frequency, residency and throughput as medians over the repeats) followed by a `run` row per
/// repeat. Columns: `row, cell, repeat, run_id, param:<name>…, samples, missed, min_ns … stdev_ns,
/// lower_bounds_from_ns, power_w, energy_j, power_source, frequency_mhz, steal_pct, idle_pct:<state>…,
/// throughput:<what> (<unit>)…`.
/// Values a run does not have are empty.
pub fn report_csv(input: &ReportInput) -> String {
    let a = Analysis::new(input);
    let mut params: Vec<&String> = input.cells.iter().flat_map(|c| c.params.keys()).collect();
    params.sort();
    params.dedup();
    let mut states: Vec<String> = Vec::new();
    for c in &a.cells {
        for r in &c.runs {
            if let Ok(list) = &r.idle {
                for (n, _) in list {
                    if !states.contains(n) {
                        states.push(n.clone());
                    }
                }
            }
        }
    }
    let mut header: Vec<String> = names(&["row", "cell", "repeat", "run_id"]);
    header.extend(params.iter().map(|p| format!("param:{p}")));
    header.extend(["samples".to_string(), "missed".to_string()]);
    header.extend(stat_headers());
    header.extend(names(&[
        "power_w",
        "energy_j",
        "power_source",
        "frequency_mhz",
        "steal_pct",
    ]));
    header.extend(states.iter().map(|s| format!("idle_pct:{s}")));
    header.extend((0..a.keys.len()).map(|k| Metric::Throughput(k).key(&a.keys)));

    let mut out = String::new();
    line(&mut out, &header);
    for c in &a.cells {
        let mut row = vec![
            "cell".to_string(),
            c.cell.name.clone(),
            String::new(),
            String::new(),
        ];
        row.extend(latency_fields(&params, c, &c.stats, c.missed));
        let idle = states.iter().map(|s| {
            let v: Vec<f64> = c.runs.iter().filter_map(|r| idle_of(r, s)).collect();
            opt(crate::analysis::spread(&v).map(|s| s.median))
        });
        let steal: Vec<f64> = c
            .runs
            .iter()
            .filter_map(|r| r.steal_pct.as_ref().ok().copied())
            .collect();
        row.extend(cost_fields(
            |m| c.value(m),
            (
                common_source(c),
                crate::analysis::spread(&steal).map(|s| s.median),
            ),
            idle,
            a.keys.len(),
        ));
        line(&mut out, &row);
        for r in &c.runs {
            let mut row = vec![
                "run".to_string(),
                c.cell.name.clone(),
                r.repeat.to_string(),
                r.run.id.clone(),
            ];
            row.extend(latency_fields(&params, c, &r.stats, r.missed));
            let source = r
                .power
                .as_ref()
                .map_or_else(|_| String::new(), |p| p.source.clone());
            let idle = states.iter().map(|s| opt(idle_of(r, s)));
            let steal = r.steal_pct.as_ref().ok().copied();
            row.extend(cost_fields(
                |m| r.value(m),
                (source, steal),
                idle,
                a.keys.len(),
            ));
            line(&mut out, &row);
        }
    }
    out
}

/// The fields of a `cell` or `run` row of cell `c` after its first four: the cell's parameters,
/// then samples, missed and the latency statistics of `stats`.
fn latency_fields(
    params: &[&String],
    c: &CellFigures,
    stats: &Stats,
    missed: Option<u64>,
) -> Vec<String> {
    let mut row: Vec<String> = params
        .iter()
        .map(|p| c.cell.params.get(*p).cloned().unwrap_or_default())
        .collect();
    // Empty where the run's format does not count them (an import).
    let missed = missed.map_or_else(String::new, |m| m.to_string());
    row.extend([stats.count.to_string(), missed]);
    row.extend(stat_fields(stats));
    row
}

/// The last fields of a `cell` or `run` row: power, energy, `source`, frequency, the `idle`
/// residencies and the throughput of each of the `keys` loads, the figures taken from `value`.
fn cost_fields(
    value: impl Fn(Metric) -> Option<f64>,
    (source, steal): (String, Option<f64>),
    idle: impl Iterator<Item = String>,
    keys: usize,
) -> Vec<String> {
    let mut row = vec![
        opt(value(Metric::PowerW)),
        opt(value(Metric::EnergyJ)),
        source,
        opt(value(Metric::FreqMhz)),
        opt(steal),
    ];
    row.extend(idle);
    row.extend((0..keys).map(|k| opt(value(Metric::Throughput(k)))));
    row
}

fn idle_of(r: &RunFigures, state: &str) -> Option<f64> {
    r.idle
        .as_ref()
        .ok()?
        .iter()
        .find(|(n, _)| n == state)
        .map(|(_, p)| *p)
}

/// The power source of a cell's repeats when they all agree.
fn common_source(c: &CellFigures) -> String {
    let mut sources = c
        .runs
        .iter()
        .filter_map(|r| r.power.as_ref().ok().map(|p| &p.source));
    match sources.next() {
        Some(first) if sources.all(|s| s == first) => first.clone(),
        _ => String::new(),
    }
}

/// Per-thread statistics of one run, and an `all` row over every thread: `thread, cpu, samples,
/// missed, expected_periods, min_ns … stdev_ns, lower_bounds_from_ns, max_at_ns, corrected_p99_ns,
/// corrected_max_ns, cpu_time_ns`.
pub fn run_csv(run: &RunResult) -> String {
    let mut header: Vec<String> =
        names(&["thread", "cpu", "samples", "missed", "expected_periods"]);
    header.extend(stat_headers());
    header.extend(names(&[
        "max_at_ns",
        "corrected_p99_ns",
        "corrected_max_ns",
        "cpu_time_ns",
    ]));
    let mut out = String::new();
    line(&mut out, &header);
    let mut expected_all: Option<u64> = Some(0);
    // Missed periods, and when the maximum happened, are unknown in a run imported from a format
    // that does not record them: empty, not 0.
    let known = |v: u64| {
        if run.records_missed() {
            v.to_string()
        } else {
            String::new()
        }
    };
    for t in &run.threads {
        let s = Stats::of(&t.histogram).with_exact_of(&t.stats);
        // The exact percentiles an import carries hold for the corrected statistics too.
        let corrected = Stats::of(&t.corrected_histogram).with_exact_of(&t.corrected);
        expected_all = match (expected_all, t.expected_periods) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        let mut row = vec![
            t.label.clone(),
            opt(t.cpu),
            s.count.to_string(),
            known(t.missed),
            opt(t.expected_periods),
        ];
        row.extend(stat_fields(&s));
        row.extend([
            known(t.max_at_ns),
            corrected.p99.to_string(),
            corrected.max.to_string(),
            opt(t.cpu_time_ns),
        ]);
        line(&mut out, &row);
    }
    let s = Stats::of(&run.overall.histogram).with_exact_of(&run.overall.stats);
    // The overall result keeps no corrected histogram: merge the threads' ones.
    let mut corrected_all = latlab_hist::Histogram::new();
    for t in &run.threads {
        corrected_all.merge(&t.corrected_histogram);
    }
    let corrected = Stats::of(&corrected_all).with_exact_of(&run.overall.corrected);
    let mut row = vec![
        "all".to_string(),
        String::new(),
        s.count.to_string(),
        known(run.overall.missed),
        if run.threads.is_empty() {
            String::new()
        } else {
            opt(expected_all)
        },
    ];
    row.extend(stat_fields(&s));
    row.extend([
        known(run.overall.max_at_ns),
        corrected.p99.to_string(),
        corrected.max.to_string(),
        {
            let times: Option<Vec<u64>> = run.threads.iter().map(|t| t.cpu_time_ns).collect();
            times
                .filter(|t| !t.is_empty())
                .map_or_else(String::new, |t| t.iter().sum::<u64>().to_string())
        },
    ]);
    line(&mut out, &row);
    out
}

/// Every non-empty histogram bucket of one run: `thread, cpu, low_ns, high_ns, count` per thread,
/// then the same for `all` (the overall histogram). A bucket holds every value in
/// `low_ns..=high_ns`.
pub fn histogram_csv(run: &RunResult) -> String {
    let mut out = String::from("thread,cpu,low_ns,high_ns,count\n");
    let mut write = |label: &str, cpu: Option<u32>, h: &latlab_hist::Histogram| {
        for b in h.buckets() {
            line(
                &mut out,
                &[
                    label.to_string(),
                    opt(cpu),
                    b.low.to_string(),
                    b.high.to_string(),
                    b.count.to_string(),
                ],
            );
        }
    };
    for t in &run.threads {
        write(&t.label, t.cpu, &t.histogram);
    }
    write("all", None, &run.overall.histogram);
    out
}

/// Every window of every thread: `thread, cpu, index, start_ns, samples, min_ns, max_ns, p99_ns,
/// missed`.
pub fn windows_csv(run: &RunResult) -> String {
    let mut out = String::from("thread,cpu,index,start_ns,samples,min_ns,max_ns,p99_ns,missed\n");
    for t in &run.threads {
        for w in &t.windows {
            line(
                &mut out,
                &[
                    t.label.clone(),
                    opt(t.cpu),
                    w.index.to_string(),
                    w.start_ns.to_string(),
                    w.count.to_string(),
                    w.min.to_string(),
                    w.max.to_string(),
                    w.p99.to_string(),
                    w.missed.to_string(),
                ],
            );
        }
    }
    out
}

/// Every kept spike: `thread, cpu, at_ns, value_ns, story` (the one-line story of a traced
/// run's spike, empty without one).
pub fn spikes_csv(run: &RunResult) -> String {
    let mut out = String::from("thread,cpu,at_ns,value_ns,story\n");
    for s in &run.spikes.kept {
        let label = run
            .threads
            .get(s.thread as usize)
            .map_or_else(|| s.thread.to_string(), |t| t.label.clone());
        line(
            &mut out,
            &[
                label,
                opt(s.cpu),
                s.at_ns.to_string(),
                s.value_ns.to_string(),
                s.story.as_ref().map_or_else(String::new, |st| st.summary()),
            ],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }
}
