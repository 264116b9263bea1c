//! Experiment plans: a TOML file naming fixed `latlab measure` settings and axes whose cartesian
//! product are the cells of the experiment, each repeated `repeat` times.
//!
//! ```toml
//! name = "governors-vs-interval"
//! description = "Wake-up latency and power per governor at three intervals"
//! repeat = 3
//!
//! [settings]          # any `latlab measure` option, by its long name
//! duration = "10s"
//! cpus = "all"
//!
//! [axes]              # each a list of values; cells are the cartesian product
//! interval = ["1ms", "100us", "10us"]
//! profile = ["powersave", "throughput"]
//! load = ["none", "matrix", ["memory", "io:bs=4k"]]
//! ```
//!
//! Plans are parsed and checked here, before anything runs; errors name the file, the line and
//! the key.

use clap::{Args, Command};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

/// Options a plan cannot set: the runner owns outputs and the store.
const RUNNER_OWNED: &[&str] = &[
    "json",
    "histfile",
    "histfile-range",
    "cyclictest-json",
    "quiet",
    "db",
    "help",
];

#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", at_line(*.line))]
pub struct PlanError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// `:LINE` for a problem on a line of the plan; nothing for one with the whole file (line 0).
fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    repeat: Option<Spanned<toml::Value>>,
    #[serde(default)]
    order: Option<Spanned<String>>,
    #[serde(default)]
    settings: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    axes: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

/// How repeats of cells are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Every cell once per round; rounds alternate direction so slow drift of the machine
    /// favours no cell.
    Interleaved,
    /// All repeats of a cell, then the next cell.
    Sequential,
    /// Every cell once per round, each round in its own random order (seeded by the plan's text,
    /// so a resumed experiment keeps its schedule): neither drift nor a cell's neighbours favour
    /// any cell.
    Random,
}

/// One value of an axis: its label (for tables and cell keys) and the measure arguments it sets.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisValue {
    pub label: String,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<AxisValue>,
}

/// A validated plan.
#[derive(Debug, Clone)]
pub struct ExperimentPlan {
    pub name: String,
    pub description: String,
    pub repeat: u32,
    pub order: Order,
    /// Measure arguments every cell gets.
    pub settings: Vec<String>,
    pub axes: Vec<Axis>,
    /// The file's text, stored with the experiment.
    pub text: String,
}

/// One combination of axis values.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub index: usize,
    /// Stable identity across runs of the same plan: `axis=value` pairs joined with
    /// [`AXIS_SEPARATOR`], so a value's own commas (a load's options) stay apart from the axes:
    /// `load=rt-hog:threads=10,priority=1; method=futex; priority=2`.
    pub key: String,
    pub params: BTreeMap<String, String>,
    /// The full `latlab measure` argument list of the cell.
    pub args: Vec<String>,
}

/// What separates the axes in a cell's key.
pub const AXIS_SEPARATOR: &str = "; ";

/// What a plan file holds, for the errors that name it.
const PLAN_FORM: &str = "a TOML plan: name = \"...\", then optionally description, repeat, \
                         order, a [settings] table of measure options and an [axes] table of \
                         lists";

impl Cell {
    /// The key earlier versions wrote (axes joined with `,`), to resume their experiments.
    pub fn legacy_key(&self) -> String {
        join_params(&self.params, ",")
    }
}

/// Whether `asked` names the cell key `key`: the same axes and values, whatever the spaces
/// around the separators.
pub fn same_key(asked: &str, key: &str) -> bool {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    squeeze(asked) == squeeze(key)
}

fn join_params(params: &BTreeMap<String, String>, sep: &str) -> String {
    if params.is_empty() {
        return "-".into();
    }
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(sep)
}

/// How a `latlab measure` option is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    /// A switch: `key = true` or `false`.
    Switch,
    /// Takes a value.
    Value,
    /// Takes an optional value (`--trace` or `--trace LIST`): `true`, `false` or a value.
    OptionalValue,
}

/// Long option names of `latlab measure` and how each is written.
fn measure_options() -> BTreeMap<String, Arity> {
    let cmd = crate::measure::MeasureArgs::augment_args(Command::new("measure"));
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?.to_string();
            let arity = if !a.get_action().takes_values() {
                Arity::Switch
            } else if a.get_num_args().is_some_and(|n| n.min_values() == 0) {
                Arity::OptionalValue
            } else {
                Arity::Value
            };
            Some((long, arity))
        })
        .collect()
}

/// The long options of the gate (`--max-latency`, `--junit`, ...): `latlab run`'s own, which a
/// cell's measure arguments would take and nothing would check.
fn gate_options() -> Vec<String> {
    crate::args::GateArgs::augment_args(Command::new("gate"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

/// An axis value as the option takes it, whatever its spelling: a duration in ns (a bare number
/// in the option's unit: µs for the intervals and thresholds, s for `duration`), a CPU list
/// in its kernel form; else the text itself.
fn one_value(option: &str, text: &str) -> String {
    if option.ends_with("cpus")
        && let Ok(list) = latlab_model::units::CpuList::parse(text)
    {
        return format!("CPUs {list}");
    }
    let unit = match option {
        "duration" => Some("s"),
        "interval" | "spike" | "break" | "dl-runtime" | "dl-period" | "dl-deadline" => Some("us"),
        _ => None,
    };
    latlab_model::units::parse_duration(text, unit)
        .map_or_else(|_| text.to_string(), |ns| format!("{ns} ns"))
}

impl ExperimentPlan {
    pub fn load(path: &Path) -> Result<ExperimentPlan, PlanError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PlanError {
            file: file.clone(),
            line: 0,
            message: format!("cannot read the plan: {e} (accepted: a readable TOML plan file)"),
        })?;
        let mut plan = ExperimentPlan::parse(&text, &file)?;
        // Profile files and directories named in a plan are relative to the plan's directory.
        let base = path.parent().unwrap_or(Path::new("."));
        plan.settings = relative_to(base, &plan.settings);
        for axis in &mut plan.axes {
            for v in &mut axis.values {
                v.args = relative_to(base, &v.args);
            }
        }
        Ok(plan)
    }

    pub fn parse(text: &str, file: &str) -> Result<ExperimentPlan, PlanError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let err = |offset: usize, message: String| PlanError {
            file: file.to_string(),
            line: line_of(offset),
            message,
        };
        let raw: PlanFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| line_of(s.start));
            PlanError {
                file: file.to_string(),
                line,
                message: format!("{} (accepted: {PLAN_FORM})", e.message().trim()),
            }
        })?;
        if raw.name.get_ref().trim().is_empty() {
            return Err(err(
                raw.name.span().start,
                format!("name is empty (accepted: {PLAN_FORM})"),
            ));
        }
        let repeat = match &raw.repeat {
            None => 1,
            Some(r) => match r.get_ref().as_integer() {
                Some(n) if (1..=1000).contains(&n) => n as u32,
                _ => {
                    return Err(err(
                        r.span().start,
                        format!(
                            "repeat = {} (accepted: a whole number from 1 to 1000)",
                            r.get_ref()
                        ),
                    ));
                }
            },
        };
        let order = match raw.order.as_ref().map(|o| (o.get_ref().as_str(), o.span())) {
            None | Some(("interleaved", _)) => Order::Interleaved,
            Some(("sequential", _)) => Order::Sequential,
            Some(("random", _)) => Order::Random,
            Some((other, span)) => {
                return Err(err(
                    span.start,
                    format!("order = {other:?} (accepted: interleaved, sequential, random)"),
                ));
            }
        };
        let options = measure_options();
        let gates = gate_options();
        let check_key = |key: &Spanned<String>| -> Result<Arity, PlanError> {
            let k = key.get_ref();
            if gates.contains(k) {
                return Err(err(
                    key.span().start,
                    format!(
                        "{k:?} gates the whole run, which `latlab run` does, not a plan \
                         (accepted: `latlab run PLAN --{k} …`; a plan holds measuring settings)"
                    ),
                ));
            }
            if RUNNER_OWNED.contains(&k.as_str()) {
                return Err(err(
                    key.span().start,
                    format!(
                        "{k:?} is set by the runner, not by plans (accepted: measuring \
                         settings; `latlab run` saves every run to its store, and `latlab \
                         export` writes the files)"
                    ),
                ));
            }
            options.get(k).copied().ok_or_else(|| {
                err(
                    key.span().start,
                    format!(
                        "unknown setting {k:?} (accepted: the long options of `latlab measure`, \
                         e.g. interval, duration, cpus, method, priority, profile, load)"
                    ),
                )
            })
        };
        let mut settings = Vec::new();
        for (key, value) in &raw.settings {
            let arity = check_key(key)?;
            let args = value_args(key.get_ref(), arity, value.get_ref())
                .map_err(|m| err(value.span().start, m))?;
            settings.extend(args);
        }
        let has_duration = raw
            .settings
            .keys()
            .chain(raw.axes.keys())
            .any(|k| k.get_ref() == "duration" || k.get_ref() == "loops");
        if !has_duration {
            return Err(err(
                0,
                "no duration: set [settings] duration (or loops) so every cell ends".into(),
            ));
        }
        let mut axes = Vec::new();
        for (key, value) in &raw.axes {
            let arity = check_key(key)?;
            let toml::Value::Array(items) = value.get_ref() else {
                return Err(err(
                    value.span().start,
                    format!(
                        "axis {:?} is not a list (accepted: [v1, v2, ...])",
                        key.get_ref()
                    ),
                ));
            };
            if items.is_empty() {
                return Err(err(
                    value.span().start,
                    format!(
                        "axis {:?} has no values (accepted: [v1, v2, ...], one value or more)",
                        key.get_ref()
                    ),
                ));
            }
            // An option given once for every cell and again per cell would be given twice (but
            // loads add up: a fixed load beside the ones compared).
            if key.get_ref() != "load" && raw.settings.keys().any(|k| k.get_ref() == key.get_ref())
            {
                return Err(err(
                    key.span().start,
                    format!(
                        "{:?} is both in [settings] and in [axes] (accepted: one of them: a fixed \
                         value in [settings], or the values to compare in [axes])",
                        key.get_ref()
                    ),
                ));
            }
            let mut values = Vec::new();
            for item in items {
                let args = value_args(key.get_ref(), arity, item)
                    .map_err(|m| err(value.span().start, m))?;
                values.push(AxisValue {
                    label: label(item),
                    args,
                });
            }
            // A value is one however it is written (1ms, 1000us and 1000 for --interval; 0-1
            // and 0,1 for CPUs).
            let mut seen = std::collections::BTreeMap::new();
            for v in &values {
                let same = one_value(key.get_ref(), &v.label);
                if let Some(first) = seen.insert(same, &v.label) {
                    let twice = if first == &v.label {
                        format!("{:?} twice", v.label)
                    } else {
                        format!("{first:?} and {:?}, one value", v.label)
                    };
                    return Err(err(
                        value.span().start,
                        format!(
                            "axis {:?} lists {twice} (accepted: each value once)",
                            key.get_ref()
                        ),
                    ));
                }
            }
            axes.push(Axis {
                name: key.get_ref().clone(),
                values,
            });
        }
        Ok(ExperimentPlan {
            name: raw.name.into_inner(),
            description: raw.description,
            repeat,
            order,
            settings,
            axes,
            text: text.to_string(),
        })
    }

    /// The cartesian product of the axes (one cell when there are none).
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = vec![(BTreeMap::new(), self.settings.clone())];
        for axis in &self.axes {
            let mut next = Vec::with_capacity(cells.len() * axis.values.len());
            for (params, args) in &cells {
                for v in &axis.values {
                    let mut p: BTreeMap<String, String> = params.clone();
                    p.insert(axis.name.clone(), v.label.clone());
                    let mut a = args.clone();
                    a.extend(v.args.iter().cloned());
                    next.push((p, a));
                }
            }
            cells = next;
        }
        cells
            .into_iter()
            .enumerate()
            .map(|(index, (params, args))| Cell {
                index,
                key: join_params(&params, AXIS_SEPARATOR),
                params,
                args,
            })
            .collect()
    }

    /// The order of (cell, repeat) pairs to run.
    pub fn schedule(&self, cells: usize) -> Vec<(usize, u32)> {
        let mut out = Vec::with_capacity(cells * self.repeat as usize);
        match self.order {
            Order::Interleaved => {
                for r in 0..self.repeat {
                    let round: Vec<usize> = if r % 2 == 0 {
                        (0..cells).collect()
                    } else {
                        (0..cells).rev().collect()
                    };
                    out.extend(round.into_iter().map(|c| (c, r)));
                }
            }
            Order::Sequential => {
                for c in 0..cells {
                    out.extend((0..self.repeat).map(|r| (c, r)));
                }
            }
            Order::Random => {
                // xorshift64*, seeded by the plan's text (FNV-1a): the same plan, the same order.
                let mut x = self.text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                }) | 1;
                let mut next = || {
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
                };
                for r in 0..self.repeat {
                    let mut round: Vec<usize> = (0..cells).collect();
                    for i in (1..cells).rev() {
                        round.swap(i, (next() % (i as u64 + 1)) as usize);
                    }
                    out.extend(round.into_iter().map(|c| (c, r)));
                }
            }
        }
        out
    }
}

/// `--profile-dir DIR` and `--profile FILE.toml` with relative paths, made relative to `base`.
fn relative_to(base: &Path, args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.iter();
    while let Some(a) = iter.next() {
        out.push(a.clone());
        let is_path_flag = a == "--profile-dir" || a == "--profile";
        if !is_path_flag {
            continue;
        }
        if let Some(v) = iter.next() {
            let is_path = a == "--profile-dir" || v.ends_with(".toml") || v.contains('/');
            if is_path && Path::new(v).is_relative() {
                out.push(base.join(v).display().to_string());
            } else {
                out.push(v.clone());
            }
        }
    }
    out
}

/// A value as written in tables and cell keys.
fn label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) => a.iter().map(label).collect::<Vec<_>>().join("+"),
        other => other.to_string(),
    }
}

/// The measure arguments one setting value stands for.
fn value_args(key: &str, arity: Arity, v: &toml::Value) -> Result<Vec<String>, String> {
    let flag = format!("--{key}");
    match (arity, v) {
        (Arity::Switch | Arity::OptionalValue, toml::Value::Boolean(true)) => {
            return Ok(vec![flag]);
        }
        (Arity::Switch | Arity::OptionalValue, toml::Value::Boolean(false)) => return Ok(vec![]),
        (Arity::Switch, _) => {
            return Err(format!("{key} is a switch (accepted: true or false)"));
        }
        _ => {}
    }
    match v {
        toml::Value::String(s) if key == "trace" && s == "none" => Ok(vec![]),
        toml::Value::String(s) if key == "load" && (s == "none" || s == "idle") => Ok(vec![]),
        toml::Value::String(s) if key == "profile" && s == "none" => Ok(vec![]),
        toml::Value::String(s) => Ok(vec![flag, s.clone()]),
        toml::Value::Integer(i) => Ok(vec![flag, i.to_string()]),
        toml::Value::Float(f) => Ok(vec![flag, f.to_string()]),
        // Several values of a repeatable option, e.g. two loads at once.
        toml::Value::Array(items) if key == "load" => {
            let mut out = Vec::new();
            for i in items {
                match i {
                    toml::Value::String(s) => out.extend([flag.clone(), s.clone()]),
                    _ => return Err(format!("{key}: list items must be strings")),
                }
            }
            Ok(out)
        }
        other => Err(format!(
            "{key} = {other}: wrong type (accepted: a string or a number)"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const PLAN: &str = r#"
name = "t"
repeat = 2

[settings]
duration = "1s"
quiet-ignored = false
"#;

    /// The cells of a plan named `t` whose settings are a one-second duration plus `settings`,
    /// with `axes`.
    fn cells(settings: &str, axes: &str) -> Vec<Cell> {
        let text = format!("name = \"t\"\n[settings]\nduration = \"1s\"\n{settings}[axes]\n{axes}");
        ExperimentPlan::parse(&text, "p.toml").unwrap().cells()
    }

    #[test]
    fn unknown_settings_name_file_line_and_key() {
        let e = ExperimentPlan::parse(PLAN, "p.toml").unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(
            e.to_string()
                .starts_with("p.toml:7: unknown setting \"quiet-ignored\"")
        );
    }

    #[test]
    fn product_keys_and_interleaving() {
        let text = r#"
name = "t"
repeat = 2
[settings]
duration = "1s"
no-samplers = true
[axes]
interval = ["1ms", "100us"]
priority = [80, 95]
"#;
        let p = ExperimentPlan::parse(text, "p.toml").unwrap();
        let cells = p.cells();
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[1].key, "interval=1ms; priority=95");
        assert_eq!(cells[1].legacy_key(), "interval=1ms,priority=95");
        assert!(same_key("interval=1ms;priority=95", &cells[1].key));
        assert!(!same_key("interval=1ms,priority=95", &cells[1].key));
        assert_eq!(
            cells[1].args,
            [
                "--duration",
                "1s",
                "--no-samplers",
                "--interval",
                "1ms",
                "--priority",
                "95"
            ]
        );
        assert_eq!(
            p.schedule(4),
            [
                (0, 0),
                (1, 0),
                (2, 0),
                (3, 0),
                (3, 1),
                (2, 1),
                (1, 1),
                (0, 1)
            ]
        );
    }

    /// `order = "random"`: every cell once a round, rounds shuffled apart, the same order
    /// every time the same plan is read (a resumed experiment keeps its schedule).
    #[test]
    fn a_random_order_is_a_shuffled_round_the_plan_fixes() {
        let text = "name = \"r\"\nrepeat = 6\norder = \"random\"\n[settings]\nduration = \"1s\"\n[axes]\ninterval = [\"1ms\", \"2ms\", \"3ms\", \"4ms\"]\n";
        let p = ExperimentPlan::parse(text, "p.toml").unwrap();
        let s = p.schedule(4);
        assert_eq!(s.len(), 24);
        let rounds: Vec<Vec<usize>> = (0..6)
            .map(|r| {
                s.iter()
                    .filter(|(_, rr)| *rr == r)
                    .map(|(c, _)| *c)
                    .collect()
            })
            .collect();
        for round in &rounds {
            let mut sorted = round.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3], "{rounds:?}");
        }
        assert!(
            rounds.iter().any(|r| r != &rounds[0]),
            "shuffled: {rounds:?}"
        );
        assert_eq!(p.schedule(4), s);
        let again = ExperimentPlan::parse(text, "p.toml").unwrap();
        assert_eq!(again.schedule(4), s);
        // Said once as the order (it read "in a random order order").
        let line = crate::run::plan_line(&p, 4, 4, std::time::Duration::from_secs(30));
        assert!(line.ends_with("(each round in a random order)"), "{line}");
    }

    #[test]
    fn axes_stay_apart_from_a_loads_own_commas() {
        let cells = cells(
            "",
            "priority = [2]\nload = [\"rt-hog:threads=10,policy=rr,priority=1\"]\n",
        );
        assert_eq!(
            cells[0].key,
            "load=rt-hog:threads=10,policy=rr,priority=1; priority=2"
        );
        // Machine-readable: split on the separator, then at the first `=`.
        let back: BTreeMap<&str, &str> = cells[0]
            .key
            .split(AXIS_SEPARATOR)
            .filter_map(|p| p.split_once('='))
            .collect();
        assert_eq!(back["priority"], "2");
        assert_eq!(back["load"], "rt-hog:threads=10,policy=rr,priority=1");
    }

    #[test]
    fn malformed_plans() {
        for (text, line, want) in [
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\njson = \"a\"\n",
                4,
                "set by the runner, not by plans (accepted: measuring settings;",
            ),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\nmax-latency = \"10us\"\n",
                4,
                "\"max-latency\" gates the whole run, which `latlab run` does, not a plan \
                 (accepted: `latlab run PLAN --max-latency …`",
            ),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\njunit = [\"a\", \"b\"]\n",
                5,
                "\"junit\" gates the whole run",
            ),
            (
                "name = \"x\"\nrepeat = 0\n[settings]\nduration = \"1s\"\n",
                2,
                "repeat = 0 (accepted: a whole number from 1 to 1000)",
            ),
            // Not serde's "invalid type: floating point `1.5`, expected i64".
            (
                "name = \"x\"\nrepeat = 1.5\n[settings]\nduration = \"1s\"\n",
                2,
                "repeat = 1.5 (accepted: a whole number from 1 to 1000)",
            ),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\ninterval = [\"1ms\", \"1000us\"]\n",
                5,
                "axis \"interval\" lists \"1ms\" and \"1000us\", one value (accepted: each value once)",
            ),
            // A bare number in the option's unit, and a CPU list in two forms.
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\ninterval = [\"1ms\", 1000]\n",
                5,
                "axis \"interval\" lists \"1ms\" and \"1000\", one value",
            ),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\ncpus = [\"0-1\", \"1,0\"]\n",
                5,
                "axis \"cpus\" lists \"0-1\" and \"1,0\", one value",
            ),
            (
                "name = \"x\"\n[axes]\ninterval = \"1ms\"\n",
                0,
                "no duration",
            ),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\ninterval = \"1ms\"\n",
                5,
                "not a list",
            ),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\nrelative = 3\n",
                4,
                "is a switch",
            ),
            ("name = \"x\"\nbogus = 1\n", 2, "unknown field"),
            ("name = \"x\"\n[settings\n", 2, ""),
            (
                "name = \"x\"\n[settings]\nduration = \"1s\"\n[axes]\nmethod = [\"poll\", \"poll\"]\n",
                5,
                "lists \"poll\" twice (accepted: each value once)",
            ),
        ] {
            let e = ExperimentPlan::parse(text, "f.toml").unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
            if line > 0 {
                assert_eq!(e.line, line, "{text}: {e}");
            }
        }
    }

    #[test]
    fn loads_none_and_combined() {
        let cells = cells("", r#"load = ["none", "matrix", ["memory", "io:bs=4k"]]"#);
        assert_eq!(cells[0].args, ["--duration", "1s"]);
        assert_eq!(cells[1].args, ["--duration", "1s", "--load", "matrix"]);
        assert_eq!(
            cells[2].args,
            ["--duration", "1s", "--load", "memory", "--load", "io:bs=4k"]
        );
        assert_eq!(cells[2].key, "load=memory+io:bs=4k");
    }

    #[test]
    fn trace_is_a_switch_or_a_list_of_events() {
        let cells = cells(
            "spike = \"50us\"\n",
            r#"trace = [false, true, "wakeup,softirq", "none"]"#,
        );
        let base = ["--duration", "1s", "--spike", "50us"];
        assert_eq!(cells[0].args, base);
        assert_eq!(cells[1].args, [&base[..], &["--trace"]].concat());
        assert_eq!(
            cells[2].args,
            [&base[..], &["--trace", "wakeup,softirq"]].concat()
        );
        assert_eq!(cells[3].args, base);
        // The arguments are what `latlab measure` accepts.
        let m = crate::measure::MeasureArgs::augment_args(Command::new("measure"));
        for c in &cells {
            let mut argv = vec!["measure".to_string()];
            argv.extend(c.args.iter().cloned());
            assert!(m.clone().try_get_matches_from(argv).is_ok(), "{:?}", c.args);
        }
    }

    #[test]
    fn profile_paths_are_relative_to_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "name = \"p\"\n[settings]\nduration = \"1s\"\nprofile-dir = \"profiles\"\n\
             [axes]\nprofile = [\"none\", \"lowlatency\", \"mine/x.toml\"]\n",
        )
        .unwrap();
        let p = ExperimentPlan::load(&path).unwrap();
        let cells = p.cells();
        let pdir = dir.path().join("profiles").display().to_string();
        assert_eq!(
            cells[0].args,
            ["--duration", "1s", "--profile-dir", pdir.as_str()]
        );
        assert_eq!(cells[1].args[4..], ["--profile", "lowlatency"]);
        let file = dir.path().join("mine/x.toml").display().to_string();
        assert_eq!(cells[2].args[4..], ["--profile".to_string(), file]);
    }

    /// Every example plan parses into cells, and one with more than one cell repeats them often
    /// enough for the report to reach a verdict.
    #[test]
    fn example_plans_parse_and_can_reach_a_verdict() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/plans");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let plan = ExperimentPlan::load(&path).unwrap();
            n += 1;
            assert!(!plan.cells().is_empty(), "{}", path.display());
            if plan.cells().len() > 1 {
                assert!(
                    plan.repeat as usize >= latlab_report::MIN_REPEATS,
                    "{}: repeat = {}",
                    path.display(),
                    plan.repeat
                );
            }
        }
        assert_eq!(n, 5, "one plan per seed experiment in {}", dir.display());
    }
}
