//! The report without plots: plain text, Markdown and JSON (`latlab report --format
//! text|md|json|csv`; CSV is in [`crate::report_csv`]).

use serde_json::{Map, Value, json};

use crate::analysis::{Analysis, CellFigures, RunFigures};
use crate::content::build;
use crate::doc::{render_markdown, render_text};
use crate::flatten::DiffKind;
use crate::input::ReportInput;

/// The value of the JSON report's `schema` field.
pub const REPORT_SCHEMA: &str = "latlab.report";
/// The version of the JSON report's layout. 2: missed periods are compared as a share of the
/// periods, `missed_pct` in `values`, `spread_across_repeats` and the comparisons (1 compared
/// counts, as `missed`); the counts stay in `missed`.
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// The formats of `latlab report --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    Html,
    Text,
    Markdown,
    Json,
    Csv,
}

impl ReportFormat {
    pub const ALL: [ReportFormat; 5] = [
        ReportFormat::Html,
        ReportFormat::Text,
        ReportFormat::Markdown,
        ReportFormat::Json,
        ReportFormat::Csv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReportFormat::Html => "html",
            ReportFormat::Text => "text",
            ReportFormat::Markdown => "md",
            ReportFormat::Json => "json",
            ReportFormat::Csv => "csv",
        }
    }

    /// `html`, `text`, `md` (or `markdown`), `json`, `csv`.
    pub fn from_name(s: &str) -> Option<ReportFormat> {
        match s {
            "markdown" => Some(ReportFormat::Markdown),
            _ => ReportFormat::ALL.into_iter().find(|f| f.name() == s),
        }
    }

    /// The report in this format (JSON pretty-printed, with a final newline).
    pub fn render(self, input: &ReportInput) -> String {
        match self {
            ReportFormat::Html => crate::html_report(input),
            ReportFormat::Text => report_text(input),
            ReportFormat::Markdown => report_markdown(input),
            ReportFormat::Json => {
                let mut s = serde_json::to_string_pretty(&report_json(input)).unwrap_or_default();
                s.push('\n');
                s
            }
            ReportFormat::Csv => crate::report_csv(input),
        }
    }
}

/// The report as plain text: the HTML report's sections and tables, without figures.
pub fn report_text(input: &ReportInput) -> String {
    render_text(&build(&Analysis::new(input), false))
}

/// The report as GitHub-flavoured Markdown: the HTML report's sections and tables, without figures.
pub fn report_markdown(input: &ReportInput) -> String {
    render_markdown(&build(&Analysis::new(input), false))
}

fn unavailable(reason: &str) -> Value {
    json!({ "unavailable": reason })
}

fn num(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// The report as JSON: every number of the text report, latencies in nanoseconds as computed from
/// the histograms, with the comparisons' test statistics.
pub fn report_json(input: &ReportInput) -> Value {
    let a = Analysis::new(input);
    json!({
        "schema": REPORT_SCHEMA,
        "schema_version": REPORT_SCHEMA_VERSION,
        "title": a.title,
        "unit": "ns",
        "systems": a.systems.iter().map(|g| json!({
            "hostname": g.system.hostname,
            "kernel_release": g.system.kernel_release,
            "kernel_version": g.system.kernel_version,
            "preempt": g.system.preempt,
            "cpu_model": g.system.cpu_model,
            "machine": g.system.machine,
            "runs": g.runs.iter().map(|(c, r)| json!({"cell": c, "repeat": r + 1})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "cells": a.cells.iter().map(|c| cell_json(&a, c)).collect::<Vec<_>>(),
        "differences": a.diff.iter().map(|d| json!({
            "key": d.key,
            "kind": match d.kind { DiffKind::BetweenCells => "between-cells", DiffKind::WithinCells => "within-cells" },
            "values": d.per_cell,
        })).collect::<Vec<_>>(),
        "comparisons": comparisons_json(&a),
        "findings": crate::findings::findings(&a).iter().map(|f| json!({
            "kind": f.kind.key(),
            "text": f.text,
        })).collect::<Vec<_>>(),
    })
}

fn cell_json(a: &Analysis, c: &CellFigures) -> Value {
    let metrics = a.metrics();
    let mut spread = Map::new();
    let mut values = Map::new();
    for &m in &metrics {
        if let Some(v) = c.value(m) {
            values.insert(m.key(&a.keys), num(v));
        }
        if c.runs.len() > 1
            && let Some(s) = c.spread(m)
        {
            spread.insert(
                m.key(&a.keys),
                json!({"n": s.n, "median": num(s.median), "min": num(s.min), "max": num(s.max)}),
            );
        }
    }
    json!({
        "index": c.index,
        "name": c.cell.name,
        "params": c.cell.params,
        "runs": c.runs.len(),
        "stats": c.stats,
        "missed": c.missed,
        "values": values,
        "spread_across_repeats": spread,
        "cpus": c.cpus.iter().map(|cpu| json!({
            "label": cpu.label,
            "missed": cpu.missed,
            "stats": cpu.stats,
        })).collect::<Vec<_>>(),
        "repeats": c.runs.iter().map(|r| run_json(a, r)).collect::<Vec<_>>(),
    })
}

fn run_json(a: &Analysis, r: &RunFigures) -> Value {
    let run = r.run;
    let mut throughput = Map::new();
    for (k, v) in &r.throughput {
        if let Some(key) = a.keys.get(*k) {
            throughput.insert(key.label(), num(*v));
        }
    }
    json!({
        "repeat": r.repeat,
        "id": run.id,
        "started_at": run.started_at,
        "elapsed_ns": run.elapsed_ns,
        "stats": r.stats,
        "missed": r.missed,
        "power": match &r.power {
            Ok(p) => json!({"source": p.source, "watts": num(p.watts), "joules": p.joules.map(num)}),
            Err(e) => unavailable(e),
        },
        "frequency_mhz": match &r.freq_mhz { Ok(f) => num(*f), Err(e) => unavailable(e) },
        "steal_pct": match &r.steal_pct { Ok(p) => num(*p), Err(e) => unavailable(e) },
        "idle_residency_pct": match &r.idle {
            Ok(states) => Value::Object(states.iter().map(|(n, p)| (n.clone(), num(*p))).collect()),
            Err(e) => unavailable(e),
        },
        // Each CPU's, as the per-CPU table shows them.
        "idle_residency_pct_per_cpu": run.samples.as_ref().map(|s| {
            crate::analysis::idle_per_cpu(s)
                .into_iter()
                .map(|(cpu, states)| {
                    let states = states.into_iter().map(|(n, p)| (n.to_string(), num(p)));
                    (format!("cpu{cpu}"), Value::Object(states.collect()))
                })
                .collect::<Map<String, Value>>()
        }),
        "throughput": throughput,
        "loads": run.loads.reports,
        "load_phases": run.loads.phases.iter().map(|p| {
            let mut v = json!(p);
            if let (Some(o), Some(l)) = (v.as_object_mut(), crate::analysis::phase_latency(run, p)) {
                o.insert("latency".into(), json!({
                    "samples": l.samples,
                    "missed": l.missed,
                    "max_ns": l.max,
                    "window_p99_highest_ns": l.window_p99,
                }));
            }
            v
        }).collect::<Vec<_>>(),
        "trace": run.trace.as_ref().map(|t| json!({
            "events": t.events,
            "elapsed_ns": t.elapsed_ns,
            "families": t.families.iter().map(|f| json!({
                "family": f.family.name(),
                "stats": latlab_model::Stats::of(&f.histogram),
                "dropped": f.dropped,
                "keys": f.keys.len(),
            })).collect::<Vec<_>>(),
            "skipped": t.skipped,
            "cost": t.cost,
        })),
        "spikes": {
            "threshold_ns": run.spikes.threshold_ns,
            "kept": run.spikes.kept.len(),
            "not_kept": run.spikes.not_kept,
        },
    })
}

fn comparisons_json(a: &Analysis) -> Value {
    a.comparisons()
        .into_iter()
        .map(|(ci, bi, rows)| {
            let c = &a.cells[ci];
            let base = &a.cells[bi];
            json!({
                "baseline": base.cell.name,
                "cell": c.cell.name,
                "statistics": rows.iter().map(|r| {
                    let test = match &r.support {
                        crate::analysis::Support::Tested { test, .. } => json!({
                            "name": "mann-whitney-u",
                            "u": num(test.u()),
                            "u_baseline": num(test.u_a),
                            "u_cell": num(test.u_b),
                            "p": num(test.p),
                            "exact": test.exact,
                            "n": [test.n_a, test.n_b],
                        }),
                        _ => Value::Null,
                    };
                    json!({
                        "statistic": r.metric.key(&a.keys),
                        "unit": if r.metric.is_latency() { "ns".to_string() } else { r.metric.unit(&a.keys) },
                        "baseline": r.a.map(num),
                        "cell": r.b.map(num),
                        "baseline_is_lower_bound": r.at_least.0,
                        "cell_is_lower_bound": r.at_least.1,
                        "difference": r.diff().map(num),
                        "percent": r.percent().map(num),
                        "verdict": r.support.verdict_key(),
                        "support": r.support.text(&c.cell.name),
                        "test": test,
                    })
                }).collect::<Vec<_>>(),
            })
        })
        .collect()
}
