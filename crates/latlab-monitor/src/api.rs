//! The JSON behind the dashboard, built from the store. Every endpoint only reads.
//!
//! Times of day are unix milliseconds (`t0`, `t1`, numbers JavaScript can hold); a window is
//! named by its exact start in unix nanoseconds as a string (`start`), since such values do not
//! fit a JavaScript number. Latencies are nanoseconds.

use super::metrics::END_OF_TIME;
use latlab_store::{MonitorWindowRow, SeriesId, Store, StoreError, WindowSetRow};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// Most points a timeline returns per CPU unless asked for fewer.
pub const MAX_POINTS: usize = 2000;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// `/api/series`: every series with its configuration and stored span.
pub fn series(store: &Store, spans: &[super::metrics::SeriesSpan]) -> Result<Value, StoreError> {
    let mut out = Vec::new();
    for (id, name, window_ns) in store.list_series()? {
        let (config, idle) = store.series_meta(id)?;
        let span = spans.iter().find(|s| s.id == id.0);
        out.push(json!({
            "id": id.0,
            "name": name,
            "window_ns": window_ns,
            "config": config,
            "idle_states": idle,
            "windows": span.map(|s| s.windows),
            "first_ms": span.and_then(|s| s.first_start_ns).map(ms),
            "last_ms": span.and_then(|s| s.last_end_ns).map(ms),
        }));
    }
    Ok(Value::Array(out))
}

#[derive(Default)]
struct CpuPoint {
    worst_start: u64,
    max: u64,
    p999: u64,
    p99: u64,
    count: u64,
    missed: u64,
    merged: u64,
    freq: (f64, f64),
    irq: (f64, f64),
    res: Vec<(f64, f64)>,
}

fn wadd(acc: &mut (f64, f64), v: Option<f64>, w: f64) {
    if let Some(v) = v {
        acc.0 += v * w;
        acc.1 += w;
    }
}

fn wavg(acc: (f64, f64)) -> Value {
    if acc.1 > 0.0 {
        json!((acc.0 / acc.1 * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

/// `/api/timeline`: per CPU and window (or group of windows when the range holds more than
/// `points`): worst case, p99.9, p99, count, missed, frequency, idle residency, interrupts; per
/// window power and latlab's own CPU share; the annotations of the range.
pub fn timeline(
    store: &Store,
    series: SeriesId,
    from: u64,
    to: u64,
    points: usize,
) -> Result<Value, StoreError> {
    let points = points.clamp(10, MAX_POINTS);
    let sets = store.monitor_sets(series, from, to)?;
    let windows = store.monitor_windows(series, from, to, None)?;
    let (_, idle) = store.series_meta(series)?;
    let per = sets.len().div_ceil(points).max(1);
    let group_of: HashMap<u64, usize> = sets
        .iter()
        .enumerate()
        .map(|(i, s)| (s.start_unix_ns, i / per))
        .collect();
    let groups: Vec<&[WindowSetRow]> = sets.chunks(per).collect();
    let mut cpus: BTreeMap<u32, Vec<Option<CpuPoint>>> = BTreeMap::new();
    let covered: HashMap<u64, f64> = sets
        .iter()
        .map(|s| (s.start_unix_ns, s.covered_ns as f64))
        .collect();
    for w in &windows {
        let Some(&g) = group_of.get(&w.start_unix_ns) else {
            continue;
        };
        let slot = cpus
            .entry(w.cpu)
            .or_insert_with(|| (0..groups.len()).map(|_| None).collect());
        let p = slot[g].get_or_insert_with(CpuPoint::default);
        if w.max_ns >= p.max || p.count == 0 && p.missed == 0 {
            p.worst_start = w.start_unix_ns;
        }
        p.max = p.max.max(w.max_ns);
        p.p999 = p.p999.max(w.p99_9_ns);
        p.p99 = p.p99.max(w.p99_ns);
        p.count += w.count;
        p.missed += w.missed;
        p.merged += w.windows;
        let weight = covered.get(&w.start_unix_ns).copied().unwrap_or(0.0);
        if let Some(s) = &w.cpu_summary {
            wadd(
                &mut p.freq,
                s.avg_freq_khz.map(|f| f as f64 / 1000.0),
                weight,
            );
            wadd(&mut p.irq, s.irqs_per_s, weight);
            if p.res.len() < s.idle_residency_pct.len() {
                p.res.resize(s.idle_residency_pct.len(), (0.0, 0.0));
            }
            for (i, r) in s.idle_residency_pct.iter().enumerate() {
                wadd(&mut p.res[i], Some(*r), weight);
            }
        }
    }
    let mut power_names: Vec<String> = Vec::new();
    for s in &sets {
        for p in s.power.iter().flatten() {
            if !power_names.contains(&p.name) {
                power_names.push(p.name.clone());
            }
        }
    }
    let rows: Vec<Value> = groups
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let t0 = group.first().map_or(0, |s| s.start_unix_ns);
            let t1 = group.last().map_or(0, |s| s.end_unix_ns);
            let covered: u64 = group.iter().map(|s| s.covered_ns).sum();
            let cost: Option<u64> = group.iter().map(|s| s.cost_cpu_time_ns).sum();
            let power: Vec<Value> = power_names
                .iter()
                .map(|name| {
                    let mut acc = (0.0, 0.0);
                    for s in group.iter() {
                        let w = s
                            .power
                            .iter()
                            .flatten()
                            .find(|p| &p.name == name)
                            .and_then(|p| p.avg_w);
                        wadd(&mut acc, w, s.covered_ns as f64);
                    }
                    wavg(acc)
                })
                .collect();
            let per_cpu: serde_json::Map<String, Value> = cpus
                .iter()
                .filter_map(|(cpu, slots)| {
                    let p = slots.get(g)?.as_ref()?;
                    Some((
                        cpu.to_string(),
                        json!({
                            "start": p.worst_start.to_string(),
                            "max": p.max,
                            "p999": p.p999,
                            "p99": p.p99,
                            "count": p.count,
                            "missed": p.missed,
                            "n": p.merged,
                            "mhz": wavg(p.freq),
                            "irq": wavg(p.irq),
                            "res": p.res.iter().map(|r| wavg(*r)).collect::<Vec<_>>(),
                        }),
                    ))
                })
                .collect();
            json!({
                "t0": ms(t0),
                "t1": ms(t1),
                "windows": group.iter().map(|s| s.windows).sum::<u64>(),
                "cost_pct": cost.filter(|_| covered > 0)
                    .map(|c| (c as f64 / covered as f64 * 100_000.0).round() / 1000.0),
                "power": power,
                "cpu": per_cpu,
            })
        })
        .collect();
    let annotations = store.annotations(series, from, to)?;
    Ok(json!({
        "series": series.0,
        "from_ms": ms(from),
        "to_ms": ms(to.min(END_OF_TIME)),
        "grouped": per,
        "cpus": cpus.keys().collect::<Vec<_>>(),
        "idle_states": idle,
        "power_sources": power_names,
        "rows": rows,
        "annotations": annotations.iter().map(|a| json!({
            "t": ms(a.at_unix_ns),
            "cpu": a.cpu,
            "kind": a.kind,
            "text": a.text,
        })).collect::<Vec<_>>(),
    }))
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
            "started_at": latlab_model::known_time(r.start_unix_ns)
                .map_or("", |_| r.started_at.as_str()),
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
