//! The configuration of a run as flat `key path → value` pairs, and the keys whose values differ
//! between runs.
//!
//! A run's configuration is its cell's parameters (`cell.*`), the measuring options
//! ([`MeasureConfig`](latlab_model::MeasureConfig), `config.*`), the system record
//! ([`SystemInfo`](latlab_model::SystemInfo), `system.*`), what latlab could set up
//! (`environment.*`), the loads' specs and schedule (`loads.*`) and what was traced beside it
//! (`trace.events`). Paths follow the JSON form of
//! the result: `system.kernel_config.hz`, `system.cpufreq[cpu=2].governor`,
//! `system.vulnerabilities[meltdown]`; a list of plain values is one value joined by `, `; a fact
//! the machine could not show has the value `unavailable: <reason>`.

use std::collections::BTreeMap;

use latlab_model::{RunResult, SystemInfo};
use serde_json::Value;

/// Flatten one run (with its cell's parameters) to key paths.
pub(crate) fn flatten_run(
    params: &BTreeMap<String, String>,
    run: &RunResult,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in params {
        out.insert(format!("cell.{k}"), v.clone());
    }
    let mut add = |prefix: &str, v: Result<Value, serde_json::Error>| {
        if let Ok(v) = v {
            flatten(&v, prefix, &mut out);
        }
    };
    add("config", serde_json::to_value(&run.config));
    add("system", system_settings(&run.system));
    let mut env = serde_json::to_value(&run.environment);
    // Who ran latlab and where its own thread went say nothing about the system measured.
    if let Ok(Value::Object(m)) = &mut env {
        m.remove("euid");
        m.remove("warnings");
    }
    add("environment", env);
    let specs: Vec<Value> = run
        .loads
        .reports
        .iter()
        .map(|l| Value::String(l.spec.clone()))
        .collect();
    out.insert(
        "loads.specs".into(),
        if specs.is_empty() {
            "none".into()
        } else {
            join_scalars(&specs)
        },
    );
    // Tracing beside a measurement costs the traced CPUs a little on every event.
    out.insert(
        "trace.events".into(),
        run.trace
            .as_ref()
            .map_or_else(|| "none".into(), |t| t.events.join(", ")),
    );
    mask_unrecorded(run, &mut out);
    if !run.loads.phases.is_empty() {
        let phases: Vec<String> = run
            .loads
            .phases
            .iter()
            .map(|p| {
                format!(
                    "{} {}–{} s",
                    p.spec,
                    crate::numfmt::secs(p.start_ns),
                    crate::numfmt::secs(p.end_ns)
                )
            })
            .collect();
        out.insert("loads.schedule".into(), phases.join("; "));
    }
    out
}

/// The value of a setting the run's format does not record: never a default, an empty string
/// or a 0 that would read as what was measured (and differ from a run that did record it).
pub(crate) const NOT_RECORDED: &str = "not recorded";

/// Settings an imported run does not record read [`NOT_RECORDED`]: those its format names as
/// not recorded, an interval of 0, a real-time policy of priority 0, and an import's window,
/// spike limit and length where its format did not give them.
fn mask_unrecorded(run: &RunResult, out: &mut BTreeMap<String, String>) {
    use latlab_model::Unrecorded;
    let c = &run.config;
    let mut keys: Vec<&str> = Vec::new();
    for (what, its) in [
        (
            Unrecorded::MEMORY,
            &["config.mlock", "environment.memory_locked"][..],
        ),
        (
            Unrecorded::METHOD,
            &["config.method", "config.relative"][..],
        ),
        (Unrecorded::CPUS, &["config.cpus"][..]),
        (
            Unrecorded::PM_QOS,
            &["config.pm_qos_us", "environment.pm_qos_held_us"][..],
        ),
    ] {
        if !run.records(what) {
            keys.extend(its);
        }
    }
    if c.interval_ns == 0 {
        keys.push("config.interval_ns");
    }
    if c.policy.is_realtime() && c.priority == 0 {
        keys.extend(["config.policy", "config.priority"]);
    }
    // An import (no format counts missed periods): a window of 0, no spike threshold and no
    // bound on the run are what its format had no place for, not latlab's defaults.
    if run.environment.missed_unrecorded {
        if c.window_ns == 0 {
            keys.push("config.window_ns");
        }
        if c.spike_threshold_ns.is_none() {
            keys.extend(["config.spike_threshold_ns", "config.spike_limit"]);
        }
        if c.duration_ns.is_none() && c.loops.is_none() {
            keys.extend(["config.duration_ns", "config.loops"]);
        }
    }
    for key in keys {
        if let Some(v) = out.get_mut(key) {
            *v = NOT_RECORDED.into();
        }
    }
    // Of the system, such a format keeps the host and kernel names at most.
    if !run.records(Unrecorded::SYSTEM) {
        for (k, v) in out.iter_mut() {
            if k.starts_with("system.") && k != "system.hostname" && k != "system.kernel_release" {
                *v = NOT_RECORDED.into();
            }
        }
    }
}

/// The system record without its measurements: steal time (the cost table shows it, rounded)
/// and SMIs since boot (the system record shows them) are not settings.
fn system_settings(system: &SystemInfo) -> Result<Value, serde_json::Error> {
    let mut v = serde_json::to_value(system)?;
    if let Value::Object(m) = &mut v {
        if let Some(Value::Object(virt)) = m.get_mut("virtualization") {
            virt.remove("steal_percent");
        }
        m.remove("smi_count");
    }
    Ok(v)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("none".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

fn join_scalars(items: &[Value]) -> String {
    items
        .iter()
        .filter_map(scalar)
        .collect::<Vec<_>>()
        .join(", ")
}

fn flatten(v: &Value, prefix: &str, out: &mut BTreeMap<String, String>) {
    if let Some(s) = scalar(v) {
        out.insert(prefix.to_string(), s);
        return;
    }
    match v {
        Value::Object(m) => {
            if m.len() == 1
                && let Some(Value::String(reason)) = m.get("unavailable")
            {
                out.insert(prefix.to_string(), format!("unavailable: {reason}"));
                return;
            }
            if m.is_empty() {
                out.insert(prefix.to_string(), String::new());
            }
            for (k, v) in m {
                flatten(v, &format!("{prefix}.{k}"), out);
            }
        }
        Value::Array(items) => {
            if items.iter().all(|i| scalar(i).is_some()) {
                out.insert(prefix.to_string(), join_scalars(items));
                return;
            }
            for (i, item) in items.iter().enumerate() {
                match item {
                    // Pairs such as (cpu, value) or (name, value): keyed by their first element.
                    Value::Array(pair)
                        if pair.len() >= 2
                            && pair.iter().all(|p| scalar(p).is_some())
                            && scalar(&pair[0]).is_some() =>
                    {
                        let key = scalar(&pair[0]).unwrap_or_default();
                        out.insert(format!("{prefix}[{key}]"), join_scalars(&pair[1..]));
                    }
                    Value::Object(m) if m.get("cpu").is_some_and(|c| c.is_u64()) => {
                        let cpu = m.get("cpu").map(|c| c.to_string()).unwrap_or_default();
                        let mut rest = m.clone();
                        rest.remove("cpu");
                        flatten(&Value::Object(rest), &format!("{prefix}[cpu={cpu}]"), out);
                    }
                    other => flatten(other, &format!("{prefix}[{i}]"), out),
                }
            }
        }
        _ => {}
    }
}

/// How a key's values spread over the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffKind {
    /// Every cell has one value for the key, and the cells do not all have the same one.
    BetweenCells,
    /// Some cell's repeats disagree about the key.
    WithinCells,
}

/// One key whose value is not the same in every run.
#[derive(Debug, Clone)]
pub(crate) struct DiffRow {
    pub key: String,
    pub kind: DiffKind,
    /// Per cell: its distinct values in the order of its runs (`None`: the key is absent).
    pub per_cell: Vec<Vec<Option<String>>>,
}

impl DiffRow {
    /// A cell's values as one string: the value, or `a | b` when its repeats disagree.
    pub fn cell_text(&self, cell: usize) -> String {
        self.per_cell
            .get(cell)
            .map(|vals| {
                vals.iter()
                    .map(|v| v.clone().unwrap_or_else(|| "(absent)".into()))
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
            .unwrap_or_default()
    }
}

/// Keys whose values differ between runs: `runs[cell]` holds each run's flattened configuration.
/// Keys that differ between cells come first, then those that vary within a cell; each group in key
/// order.
pub(crate) fn diff(runs: &[Vec<BTreeMap<String, String>>]) -> Vec<DiffRow> {
    let mut keys: Vec<&String> = runs.iter().flatten().flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut between = Vec::new();
    let mut within = Vec::new();
    for key in keys {
        let per_cell: Vec<Vec<Option<String>>> = runs
            .iter()
            .map(|cell| {
                let mut vals: Vec<Option<String>> = Vec::new();
                for m in cell {
                    let v = m.get(key).cloned();
                    if !vals.contains(&v) {
                        vals.push(v);
                    }
                }
                vals
            })
            .collect();
        let mut all: Vec<&Option<String>> = per_cell.iter().flatten().collect();
        all.sort();
        all.dedup();
        if all.len() <= 1 {
            continue;
        }
        let row = |kind| DiffRow {
            key: key.clone(),
            kind,
            per_cell: per_cell.clone(),
        };
        if per_cell.iter().any(|v| v.len() > 1) {
            within.push(row(DiffKind::WithinCells));
        } else {
            between.push(row(DiffKind::BetweenCells));
        }
    }
    between.extend(within);
    between
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flat(v: Value) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        flatten(&v, "x", &mut out);
        out
    }

    #[test]
    fn paths() {
        let m = flat(json!({
            "a": 1,
            "b": null,
            "c": [0, 1, 2],
            "d": {"unavailable": "no cpufreq"},
            "e": [{"cpu": 3, "governor": "performance"}],
            "f": [["meltdown", "Not affected"], [0, "n/a"]],
            "g": [{"name": "x"}],
            "h": [],
        }));
        let expect: BTreeMap<String, String> = [
            ("x.a", "1"),
            ("x.b", "none"),
            ("x.c", "0, 1, 2"),
            ("x.d", "unavailable: no cpufreq"),
            ("x.e[cpu=3].governor", "performance"),
            ("x.f[meltdown]", "Not affected"),
            ("x.f[0]", "n/a"),
            ("x.g[0].name", "x"),
            ("x.h", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(m, expect);
    }

    #[test]
    fn measurements_are_left_out_of_the_system_settings() {
        use latlab_model::system::{Field, PowerMeter, Virtualization};
        let system = SystemInfo {
            virtualization: Virtualization {
                hypervisor: Some("KVM".into()),
                steal_percent: Some(0.5),
            },
            smi_count: Some(Field::Value(vec![(0, 12)])),
            power_meters: Some(Field::Value(vec![PowerMeter {
                name: "battery:BAT0".into(),
                source: "/sys/class/power_supply/BAT0/power_now".into(),
            }])),
            ..SystemInfo::default()
        };
        let mut m = BTreeMap::new();
        flatten(
            &system_settings(&system).expect("serializes"),
            "system",
            &mut m,
        );
        assert!(
            !m.keys().any(|k| k.contains("smi") || k.contains("steal")),
            "{m:?}"
        );
        assert_eq!(m["system.virtualization.hypervisor"], "KVM");
        assert_eq!(m["system.power_meters[0].name"], "battery:BAT0");
    }

    #[test]
    fn kinds_of_differences() {
        let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let runs = vec![
            vec![
                m(&[("gov", "perf"), ("steal", "1"), ("same", "1")]),
                m(&[("gov", "perf"), ("steal", "2"), ("same", "1")]),
            ],
            vec![m(&[
                ("gov", "save"),
                ("steal", "1"),
                ("same", "1"),
                ("only", "y"),
            ])],
        ];
        let d = diff(&runs);
        let keys: Vec<(&str, DiffKind)> = d.iter().map(|r| (r.key.as_str(), r.kind)).collect();
        assert_eq!(
            keys,
            vec![
                ("gov", DiffKind::BetweenCells),
                ("only", DiffKind::BetweenCells),
                ("steal", DiffKind::WithinCells)
            ]
        );
        assert_eq!(d[1].cell_text(0), "(absent)");
        assert_eq!(d[2].cell_text(0), "1 | 2");
    }
}
