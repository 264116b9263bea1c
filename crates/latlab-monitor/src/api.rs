//! The JSON behind the dashboard, built from the store. Every endpoint only reads.
//!
//! Times of day are unix milliseconds (`t0`, `t1`, numbers JavaScript can hold); a window is
//! named by its exact start in unix nanoseconds as a string (`start`), since such values do not
//! fit a JavaScript number. Latencies are nanoseconds.

use super::metrics::END_OF_TIME;
use latlab_store::{
    DAY_NS, HOUR_NS, MonitorWindowRow, SeriesId, Store, StoreError, Weighted, WindowSetRow,
    WindowSummary,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// Most points a timeline returns per CPU unless asked for fewer.
pub use crate::report::MAX_POINTS;

/// Fewest points a timeline may be asked for per CPU.
pub const FEWEST_POINTS: usize = 10;

/// Unix nanoseconds as the dashboard's times: milliseconds, as JavaScript's `Date` counts.
pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The inverse of [`ms`], for times the page sends (negative ones read as the epoch).
pub(crate) fn ns_of_ms(ms: f64) -> u64 {
    (ms.max(0.0) * 1e6) as u64
}

/// `/api/series`: every series with its configuration and stored span.
pub fn series(store: &Store, spans: &[latlab_store::SeriesExtent]) -> Result<Value, StoreError> {
    let mut out = Vec::new();
    for (id, name, window_ns) in store.list_series()? {
        let (config, idle) = store.series_meta(id)?;
        let span = spans.iter().find(|s| s.id == id);
        let stopped = match span.and_then(|s| s.last_end_unix_ns) {
            Some(last) => clean_stop(store, id, last.saturating_sub(window_ns))?,
            None => None,
        };
        out.push(json!({
            "id": id.0,
            "name": name,
            "window_ns": window_ns,
            "config": config,
            "idle_states": idle,
            "windows": span.map(|s| s.windows),
            "first_ms": span.and_then(|s| s.first_start_unix_ns).map(ms),
            "last_ms": span.and_then(|s| s.last_end_unix_ns).map(ms),
            "stopped": stopped,
        }));
    }
    Ok(Value::Array(out))
}

/// The stop its daemon recorded after the series' last window (from `since`, a window before
/// its end): `{at_ms, text}` when the newest start or stop since then is a stop, so a page can
/// tell a series stopped on purpose from one whose daemon died.
fn clean_stop(store: &Store, id: SeriesId, since: u64) -> Result<Option<Value>, StoreError> {
    let newest = store
        .annotations(id, since, u64::MAX >> 1)?
        .into_iter()
        .rev()
        .find(|a| a.kind == "start" || a.kind == "stop");
    Ok(newest
        .filter(|a| a.kind == "stop")
        .map(|a| json!({ "at_ms": ms(a.at_unix_ns), "text": a.text })))
}

/// Most cells (points × CPUs) a timeline returns: on many CPUs, fewer points per CPU.
pub const MAX_CELLS: usize = 40_000;

/// Most per-CPU windows a timeline reads one by one (a day of 64 CPUs, 6 hours of 256: reading one
/// costs some 50 µs, its JSON included); a range holding more reads the hourly (or,
/// past `points` hours, daily) rollups instead.
pub const RAW_LIMIT: usize = 20_000;

/// What a timeline reads: its window sets in groups, and per CPU a summary keyed by the start it
/// is grouped by (a window's, or a rollup's hour or day).
struct Source<'a> {
    resolution: &'static str,
    groups: Vec<Vec<&'a WindowSetRow>>,
    group_of: HashMap<u64, usize>,
    parts: Vec<WindowSummary>,
}

fn source<'a>(
    store: &Store,
    series: SeriesId,
    sets: &'a [WindowSetRow],
    (from, to): (u64, u64),
    points: usize,
    raw_limit: usize,
) -> Result<Source<'a>, StoreError> {
    let cpus = store.series_cpus(series)?.len().max(1);
    let points = points.min((MAX_CELLS / cpus).max(10));
    if sets.len() * cpus <= raw_limit {
        let per = sets.len().div_ceil(points).max(1);
        let covered: HashMap<u64, u64> = sets
            .iter()
            .map(|s| (s.start_unix_ns, s.covered_ns))
            .collect();
        let parts = store
            .monitor_windows(series, from, to, None)?
            .iter()
            .filter_map(|w| {
                let c = covered.get(&w.start_unix_ns)?;
                Some(WindowSummary::of_window(w, *c))
            })
            .collect();
        return Ok(Source {
            resolution: "window",
            groups: sets.chunks(per).map(|c| c.iter().collect()).collect(),
            group_of: sets
                .iter()
                .enumerate()
                .map(|(i, s)| (s.start_unix_ns, i / per))
                .collect(),
            parts,
        });
    }
    let first = sets.first().map_or(from, |s| s.start_unix_ns.max(from));
    let last = sets.last().map_or(to, |s| s.end_unix_ns.min(to));
    let (resolution, span) = if (last - first.min(last)) / HOUR_NS < points as u64 {
        ("hour", HOUR_NS)
    } else {
        ("day", DAY_NS)
    };
    let mut by_bucket: BTreeMap<u64, Vec<&WindowSetRow>> = BTreeMap::new();
    for s in sets {
        by_bucket
            .entry(s.start_unix_ns / span * span)
            .or_default()
            .push(s);
    }
    let group_of = by_bucket.keys().enumerate().map(|(i, b)| (*b, i)).collect();
    Ok(Source {
        resolution,
        groups: by_bucket.into_values().collect(),
        group_of,
        parts: store.monitor_rollups(series, span, from, to)?,
    })
}

/// `/api/timeline`: per CPU and window (or group of windows when the range holds more than
/// `points`, or than [`MAX_CELLS`] over the CPUs; or hour or day of rollups when it holds more
/// than [`RAW_LIMIT`] per-CPU windows):
/// worst case, p99.9, p99, count, missed, frequency, idle residency, interrupts; per group power
/// and latlab's own CPU share; the annotations of the range.
pub fn timeline(
    store: &Store,
    series: SeriesId,
    from: u64,
    to: u64,
    points: usize,
) -> Result<Timeline, StoreError> {
    timeline_reading(store, series, (from, to), points, RAW_LIMIT)
}

fn timeline_reading(
    store: &Store,
    series: SeriesId,
    (from, to): (u64, u64),
    points: usize,
    raw_limit: usize,
) -> Result<Timeline, StoreError> {
    let points = points.clamp(FEWEST_POINTS, MAX_POINTS as usize);
    let sets = store.monitor_sets(series, from, to)?;
    let (_, idle) = store.series_meta(series)?;
    let src = source(store, series, &sets, (from, to), points, raw_limit)?;
    let mut cpus: BTreeMap<u32, Vec<Option<WindowSummary>>> = BTreeMap::new();
    for w in &src.parts {
        let Some(&g) = src.group_of.get(&w.start_unix_ns) else {
            continue;
        };
        let slot = cpus
            .entry(w.cpu)
            .or_insert_with(|| (0..src.groups.len()).map(|_| None).collect());
        slot[g]
            .get_or_insert_with(|| WindowSummary {
                cpu: w.cpu,
                ..Default::default()
            })
            .merge(w);
    }
    let power_names = latlab_store::power_names(&sets);
    let rows: Vec<TimelineRow> = src
        .groups
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let t0 = group.first().map_or(0, |s| s.start_unix_ns);
            let t1 = group.last().map_or(0, |s| s.end_unix_ns);
            let covered: u64 = group.iter().map(|s| s.covered_ns).sum();
            let cost: Option<u64> = group.iter().map(|s| s.cost_cpu_time_ns).sum();
            let power = power_names
                .iter()
                .map(|name| {
                    let mut acc = Weighted::default();
                    for s in group.iter() {
                        let w = s
                            .power
                            .iter()
                            .flatten()
                            .find(|p| &p.name == name)
                            .and_then(|p| p.avg_w);
                        acc.add(w, s.covered_ns as f64);
                    }
                    rounded(acc)
                })
                .collect();
            let cpu = cpus
                .iter()
                .filter_map(|(cpu, slots)| {
                    let p = slots.get(g)?.as_ref()?;
                    Some((
                        cpu.to_string(),
                        Cell {
                            count: p.count,
                            irq: rounded(p.irqs_per_s),
                            max: p.max_ns,
                            mhz: rounded(p.freq_mhz),
                            missed: p.missed,
                            n: p.windows,
                            p99: p.p99_ns,
                            p999: p.p99_9_ns,
                            res: p.idle_residency_pct.iter().map(|r| rounded(*r)).collect(),
                            start: p.max_start_unix_ns.to_string(),
                        },
                    ))
                })
                .collect();
            TimelineRow {
                cost_pct: cost
                    .filter(|_| covered > 0)
                    .map(|c| (c as f64 / covered as f64 * 100_000.0).round() / 1000.0),
                cpu,
                power,
                t0: ms(t0),
                t1: ms(t1),
                windows: group.iter().map(|s| s.windows).sum::<u64>(),
            }
        })
        .collect();
    let grouped = src.groups.iter().map(Vec::len).max().unwrap_or(1);
    let annotations = store.annotations(series, from, to)?;
    Ok(Timeline {
        annotations: annotations
            .iter()
            .map(|a| TimelineNote {
                cpu: a.cpu,
                kind: a.kind.clone(),
                t: ms(a.at_unix_ns),
                text: a.text.clone(),
            })
            .collect(),
        cpus: cpus.keys().copied().collect(),
        from_ms: ms(from),
        grouped,
        idle_states: idle,
        power_sources: power_names,
        resolution: src.resolution,
        rows,
        series: series.0,
        to_ms: ms(to.min(END_OF_TIME)),
    })
}

/// `/api/timeline`'s answer, serialised straight to JSON (a tree of `Value`s for 18 000 cells
/// cost as much as reading them). Fields in alphabetical order, as the dashboard has always
/// received them.
#[derive(Debug, Serialize)]
pub struct Timeline {
    annotations: Vec<TimelineNote>,
    cpus: Vec<u32>,
    from_ms: f64,
    grouped: usize,
    idle_states: Vec<latlab_model::samples::CpuIdleStates>,
    power_sources: Vec<String>,
    resolution: &'static str,
    rows: Vec<TimelineRow>,
    series: i64,
    to_ms: f64,
}

impl Timeline {
    /// Its points as samples over time, from `first` (unix ns): per CPU what `cpu` makes of a
    /// cell and the point's length; power per source in the order of `power_names`.
    pub(crate) fn samples(
        &self,
        first: u64,
        power_names: &[String],
        cpu: impl Fn(&Cell, u64) -> latlab_model::samples::CpuSample,
    ) -> Vec<latlab_model::samples::Sample> {
        self.rows
            .iter()
            .map(|r| {
                let (t0, t1) = (ns_of_ms(r.t0), ns_of_ms(r.t1));
                let dt_ns = t1.saturating_sub(t0);
                latlab_model::samples::Sample {
                    at_ns: t1.saturating_sub(first),
                    dt_ns,
                    cpus: r
                        .cpu
                        .iter()
                        .filter_map(|(k, c)| {
                            Some(latlab_model::samples::CpuSample {
                                cpu: k.parse().ok()?,
                                ..cpu(c, dt_ns)
                            })
                        })
                        .collect(),
                    power_w: power_names
                        .iter()
                        .map(|n| {
                            let k = self.power_sources.iter().position(|p| p == n)?;
                            r.power.get(k).copied().flatten()
                        })
                        .collect(),
                    temp_c: Vec::new(),
                }
            })
            .collect()
    }
}

#[derive(Debug, Serialize)]
struct TimelineNote {
    cpu: Option<u32>,
    kind: String,
    t: f64,
    text: String,
}

/// One point of the timeline: a window, a group of windows, or an hour or day of rollups.
#[derive(Debug, Serialize)]
struct TimelineRow {
    cost_pct: Option<f64>,
    cpu: BTreeMap<String, Cell>,
    power: Vec<Option<f64>>,
    t0: f64,
    t1: f64,
    windows: u64,
}

/// One CPU at one point: its worst window (`start`), p99.9, p99, samples, missed periods,
/// windows, frequency, interrupts and idle residency.
#[derive(Debug, Serialize)]
pub(crate) struct Cell {
    count: u64,
    irq: Option<f64>,
    max: u64,
    pub(crate) mhz: Option<f64>,
    missed: u64,
    n: u64,
    p99: u64,
    p999: u64,
    pub(crate) res: Vec<Option<f64>>,
    start: String,
}

/// A weighted mean to three decimals; `None` without weight.
fn rounded(acc: Weighted) -> Option<f64> {
    acc.mean().map(|m| (m * 1000.0).round() / 1000.0)
}

fn row_json(w: &MonitorWindowRow) -> Value {
    json!({
        "start": w.start_unix_ns.to_string(),
        "t0": ms(w.start_unix_ns),
        "t1": ms(w.end_unix_ns),
        "cpu": w.cpu,
        "windows": w.windows,
        "count": w.count,
        "min": w.min_ns,
        "max": w.max_ns,
        "p99": w.p99_ns,
        "p999": w.p99_9_ns,
        "missed": w.missed,
        "mhz": w.cpu_summary.as_ref().and_then(|s| s.avg_freq_khz).map(|f| f as f64 / 1000.0),
    })
}

/// `/api/worst`: the worst windows of a range, worst first.
pub fn worst(
    store: &Store,
    series: SeriesId,
    from: u64,
    to: u64,
    limit: u32,
) -> Result<Value, StoreError> {
    // A series that does not exist is an error, not an empty list.
    store.series_meta(series)?;
    let rows = store.worst_windows(series, from, to, limit.clamp(1, 500))?;
    Ok(Value::Array(rows.iter().map(row_json).collect()))
}

/// `/api/window`: one CPU's window with its histogram and spikes; `None` when there is none.
pub fn window(
    store: &Store,
    series: SeriesId,
    start: u64,
    cpu: u32,
) -> Result<Option<Value>, StoreError> {
    store.series_meta(series)?;
    let Some((h, spikes)) = store.monitor_window_detail(series, start, cpu)? else {
        return Ok(None);
    };
    let row = store
        .monitor_windows(series, start, start.saturating_add(1), Some(cpu))?
        .into_iter()
        .find(|w| w.start_unix_ns == start);
    let mut v = row.as_ref().map(row_json).unwrap_or_else(|| json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert("start".into(), json!(start.to_string()));
        o.insert("cpu".into(), json!(cpu));
        o.insert("p50".into(), json!(h.percentile(50.0)));
        o.insert("p99_99".into(), json!(h.percentile(99.99)));
        o.insert("mean".into(), json!((h.mean() * 10.0).round() / 10.0));
        o.insert("sum".into(), json!(h.sum()));
        o.insert(
            "buckets".into(),
            json!(
                h.buckets()
                    .map(|b| json!([b.low, b.high, b.count]))
                    .collect::<Vec<_>>()
            ),
        );
        o.insert(
            "spikes".into(),
            json!(
                spikes
                    .iter()
                    .map(|s| json!({"t": ms(s.at_unix_ns), "at": s.at_unix_ns.to_string(), "value": s.value_ns}))
                    .collect::<Vec<_>>()
            ),
        );
        if let Some(r) = &row
            && let Some(s) = &r.cpu_summary
        {
            o.insert("summary".into(), json!(s));
        }
    }
    Ok(Some(v))
}

/// `/api/experiments`: stored experiments and the latest runs.
pub fn experiments(store: &Store) -> Result<Value, StoreError> {
    let experiments = store.list_experiments()?;
    let runs = store.list_runs(&latlab_store::RunFilter {
        limit: Some(50),
        ..Default::default()
    })?;
    Ok(json!({
        "experiments": experiments.iter().map(|e| json!({
            "id": e.id.0,
            "name": e.name,
            "status": e.status.name(),
            "started_at": e.started_at,
            "ended_at": e.ended_at,
        })).collect::<Vec<_>>(),
        "runs": runs.iter().rev().map(|r| json!({
            "id": r.id.0,
            "uid": r.uid,
            // Empty when unknown (an import from a format without a start time), as in a result.
            "started_at": latlab_model::known_start(r.start_unix_ns, &r.started_at).unwrap_or(""),
            "method": r.method,
            "interval_ns": r.interval_ns,
            "cpus": r.cpus,
            "count": r.count,
            "missed": r.missed,
            "p99_9_ns": r.p99_9_ns,
            "max_ns": r.max_ns,
            "hostname": r.hostname,
            "kernel": r.kernel_release,
            "experiment": r.experiment,
        })).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use latlab_hist::Histogram;
    use latlab_model::samples::CpuSummary;
    use latlab_store::{MonitorWindow, SeriesConfig, SeriesSpec, WindowSet};

    const MIN5: u64 = 300_000_000_000;
    /// 2026-01-01T00:00:00Z.
    const T0: u64 = 1_767_225_600_000_000_000;

    /// 30 five-minute windows (2.5 hours) on CPUs 0 and 1; window k's worst case is 1000 + k µs
    /// on CPU 0 and 2000 - k µs on CPU 1.
    fn store_of_hours() -> (tempfile::TempDir, Store, SeriesId) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("t.db")).unwrap();
        let id = store
            .open_series(&SeriesSpec {
                name: "t".into(),
                window_ns: MIN5,
                config: SeriesConfig::new(&Default::default(), Default::default()),
                system: None,
                idle_states: vec![],
            })
            .unwrap()
            .id;
        for k in 0..30u64 {
            let cpus = (0..2u32)
                .map(|cpu| {
                    let mut h = Histogram::new();
                    h.record_n(5_000, 100);
                    h.record(if cpu == 0 {
                        1_000_000 + k * 1000
                    } else {
                        2_000_000 - k * 1000
                    });
                    MonitorWindow {
                        cpu_summary: Some(CpuSummary {
                            cpu: cpu as usize,
                            avg_freq_khz: Some(1_000_000 + k * 1000),
                            ..Default::default()
                        }),
                        ..latlab_testkit::run::monitor_window(cpu, h, k % 2)
                    }
                })
                .collect();
            let set = WindowSet {
                cost_cpu_time_ns: Some(3_000_000),
                ..latlab_testkit::run::window_set(k, (T0 + k * MIN5, MIN5), cpus)
            };
            store.insert_window_set(id, &set).unwrap();
        }
        (dir, store, id)
    }

    #[test]
    fn a_range_of_many_windows_reads_hourly_rollups_that_agree_with_the_windows() {
        let (_d, mut store, id) = store_of_hours();
        let range = (T0, T0 + 30 * MIN5);
        let raw =
            serde_json::to_value(timeline_reading(&store, id, range, 1000, RAW_LIMIT).unwrap())
                .unwrap();
        assert_eq!(raw["resolution"], "window");
        assert_eq!(raw["rows"].as_array().unwrap().len(), 30);
        let hourly =
            serde_json::to_value(timeline_reading(&store, id, range, 1000, 59).unwrap()).unwrap();
        assert_eq!(hourly["resolution"], "hour", "60 per-CPU windows > 59");
        let rows = hourly["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(hourly["grouped"], 12);
        for (h, row) in rows.iter().enumerate() {
            let ks: Vec<u64> = (0..30).filter(|k| k / 12 == h as u64).collect();
            let (first, last) = (ks[0], *ks.last().unwrap());
            assert_eq!(row["t0"], ms(T0 + first * MIN5));
            assert_eq!(row["t1"], ms(T0 + (last + 1) * MIN5));
            assert_eq!(row["windows"], ks.len());
            // Worst case of each CPU and the window that holds it: the last of the hour on
            // CPU 0, the first on CPU 1.
            let c0 = &row["cpu"]["0"];
            assert_eq!(c0["max"], 1_000_000 + last * 1000);
            assert_eq!(c0["start"], (T0 + last * MIN5).to_string());
            let c1 = &row["cpu"]["1"];
            assert_eq!(c1["max"], 2_000_000 - first * 1000);
            assert_eq!(c1["start"], (T0 + first * MIN5).to_string());
            assert_eq!(c0["count"], 101 * ks.len());
            assert_eq!(c0["missed"], ks.iter().map(|k| k % 2).sum::<u64>());
            assert_eq!(c0["n"], ks.len());
            let mhz = ks.iter().map(|k| 1000.0 + *k as f64).sum::<f64>() / ks.len() as f64;
            assert_eq!(c0["mhz"], mhz);
            assert_eq!(row["cost_pct"], 0.001);
        }
        // Past `points` hours the rollups are daily: ten more windows, one an hour.
        for j in 0..10u64 {
            let start = T0 + (3 + j) * HOUR_NS;
            let mut h = Histogram::new();
            h.record(7_000);
            let set = latlab_testkit::run::window_set(
                30 + j,
                (start, MIN5),
                vec![latlab_testkit::run::monitor_window(0, h, 0)],
            );
            store.insert_window_set(id, &set).unwrap();
        }
        let day = (T0, T0 + 13 * HOUR_NS);
        let daily =
            serde_json::to_value(timeline_reading(&store, id, day, 10, 59).unwrap()).unwrap();
        assert_eq!(daily["resolution"], "day", "13 hours > 10 points");
        let rows = daily["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["windows"], 40);
        assert_eq!(rows[0]["cpu"]["0"]["max"], 1_029_000);
        assert_eq!(rows[0]["cpu"]["0"]["count"], 101 * 30 + 10);
        assert_eq!(rows[0]["cpu"]["1"]["max"], 2_000_000);
        assert_eq!(rows[0]["cpu"]["1"]["start"], T0.to_string());
    }

    #[test]
    fn an_unknown_start_is_listed_empty_not_as_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../latlab-import/tests/data/");
        let text = std::fs::read_to_string(format!("{data}stress-ng-cyclic.log")).unwrap();
        let mut r = latlab_import::import(&text, None, "sng.log").unwrap();
        // As imports before the start was left empty recorded it.
        r.started_at = latlab_model::rfc3339_utc(0);
        store.save_run(&r, None).unwrap();
        let v = experiments(&store).unwrap();
        assert_eq!(v["runs"][0]["started_at"], "", "{v}");
    }
}
