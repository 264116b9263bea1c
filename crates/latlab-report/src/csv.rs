//! CSV: the report's statistics (one row per cell and per run), and a single run's per-thread
//! statistics, histogram buckets, windows and spikes (`latlab export --format csv`).
//!
//! RFC 4180: comma-separated, a header row, fields quoted when they hold a comma, a quote or a line
//! break, lines ending in `\n`. Latencies are integer nanoseconds (means and standard deviations
//! are decimals); every statistic is computed from the histograms, except percentiles an imported
//! run's tool computed exactly where its histogram gives only a lower bound.

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

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// The latency columns of [`Stats`]: `min_ns` … `max_ns`, `mean_ns`, `stdev_ns`.
fn stat_headers() -> Vec<String> {
    LATENCY
        .iter()
        .map(|(m, name)| match m {
            Metric::P99_9 => "p99_9_ns".to_string(),
            Metric::P99_99 => "p99_99_ns".to_string(),
            _ => format!("{name}_ns"),
        })
        .collect()
}

fn stat_fields(s: &Stats) -> Vec<String> {
    if s.count == 0 {
        return vec![String::new(); LATENCY.len()];
    }
    vec![
        s.min.to_string(),
        s.p50.to_string(),
        s.p90.to_string(),
        s.p99.to_string(),
        s.p99_9.to_string(),
        s.p99_99.to_string(),
        s.max.to_string(),
        s.mean.to_string(),
        s.stdev.to_string(),
    ]
}

/// The report's statistics: a `cell` row per cell (latency of the pooled histogram; power,
/// frequency, residency and throughput as medians over the repeats) followed by a `run` row per
/// repeat. Columns: `row, cell, repeat, run_id, param:<name>…, samples, missed, min_ns … stdev_ns,
/// power_w, energy_j, power_source, frequency_mhz, idle_pct:<state>…, throughput:<what> (<unit>)…`.
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
    let mut header: Vec<String> = ["row", "cell", "repeat", "run_id"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(params.iter().map(|p| format!("param:{p}")));
    header.extend(["samples".to_string(), "missed".to_string()]);
    header.extend(stat_headers());
    header.extend(
        ["power_w", "energy_j", "power_source", "frequency_mhz"]
            .iter()
            .map(|s| s.to_string()),
    );
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
        row.extend(
            params
                .iter()
                .map(|p| c.cell.params.get(*p).cloned().unwrap_or_default()),
        );
        row.extend([c.stats.count.to_string(), c.missed.to_string()]);
        row.extend(stat_fields(&c.stats));
        row.extend([
            opt(c.value(Metric::PowerW)),
            opt(c.value(Metric::EnergyJ)),
            common_source(c),
            opt(c.value(Metric::FreqMhz)),
        ]);
        row.extend(states.iter().map(|s| {
            let v: Vec<f64> = c.runs.iter().filter_map(|r| idle_of(r, s)).collect();
            opt(crate::analysis::spread(&v).map(|s| s.median))
        }));
        row.extend((0..a.keys.len()).map(|k| opt(c.value(Metric::Throughput(k)))));
        line(&mut out, &row);
        for r in &c.runs {
            let mut row = vec![
                "run".to_string(),
                c.cell.name.clone(),
                r.repeat.to_string(),
                r.run.id.clone(),
            ];
            row.extend(
                params
                    .iter()
                    .map(|p| c.cell.params.get(*p).cloned().unwrap_or_default()),
            );
            row.extend([r.stats.count.to_string(), r.missed.to_string()]);
            row.extend(stat_fields(&r.stats));
            row.extend([
                opt(r.value(Metric::PowerW)),
                opt(r.value(Metric::EnergyJ)),
                r.power
                    .as_ref()
                    .map_or_else(|_| String::new(), |p| p.source.clone()),
                opt(r.value(Metric::FreqMhz)),
            ]);
            row.extend(states.iter().map(|s| opt(idle_of(r, s))));
            row.extend((0..a.keys.len()).map(|k| opt(r.value(Metric::Throughput(k)))));
            line(&mut out, &row);
        }
    }
    out
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
/// missed, expected_periods, min_ns … stdev_ns, max_at_ns, corrected_p99_ns, corrected_max_ns,
/// cpu_time_ns`.
pub fn run_csv(run: &RunResult) -> String {
    let mut header: Vec<String> = ["thread", "cpu", "samples", "missed", "expected_periods"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(stat_headers());
    header.extend(
        [
            "max_at_ns",
            "corrected_p99_ns",
            "corrected_max_ns",
            "cpu_time_ns",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let mut out = String::new();
    line(&mut out, &header);
    let mut expected_all: Option<u64> = Some(0);
    for t in &run.threads {
        let s = Stats::of(&t.histogram).with_exact(&t.stats.exact_percentiles);
        let corrected = Stats::of(&t.corrected_histogram);
        expected_all = match (expected_all, t.expected_periods) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        let mut row = vec![
            t.label.clone(),
            t.cpu.map_or_else(String::new, |c| c.to_string()),
            s.count.to_string(),
            t.missed.to_string(),
            t.expected_periods
                .map_or_else(String::new, |e| e.to_string()),
        ];
        row.extend(stat_fields(&s));
        row.extend([
            t.max_at_ns.to_string(),
            corrected.p99.to_string(),
            corrected.max.to_string(),
            t.cpu_time_ns.map_or_else(String::new, |c| c.to_string()),
        ]);
        line(&mut out, &row);
    }
    let s = Stats::of(&run.overall.histogram).with_exact(&run.overall.stats.exact_percentiles);
    // The overall result keeps no corrected histogram: merge the threads' ones.
    let mut corrected_all = latlab_hist::Histogram::new();
    for t in &run.threads {
        corrected_all.merge(&t.corrected_histogram);
    }
    let corrected = Stats::of(&corrected_all);
    let mut row = vec![
        "all".to_string(),
        String::new(),
        s.count.to_string(),
        run.overall.missed.to_string(),
        if run.threads.is_empty() {
            String::new()
        } else {
            expected_all.map_or_else(String::new, |e| e.to_string())
        },
    ];
    row.extend(stat_fields(&s));
    row.extend([
        run.overall.max_at_ns.to_string(),
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
                    cpu.map_or_else(String::new, |c| c.to_string()),
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
                    t.cpu.map_or_else(String::new, |c| c.to_string()),
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
                s.cpu.map_or_else(String::new, |c| c.to_string()),
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
