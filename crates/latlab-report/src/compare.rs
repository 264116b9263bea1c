//! `latlab compare A B`: two cells (or runs) side by side in the terminal.

use std::fmt::Write;

use crate::analysis::{ALPHA, Analysis, MIN_REPEATS, Metric, compare};
use crate::doc::{Block, TCell, Table, render_text};
use crate::input::CellInput;
use crate::numfmt;

/// The statistics of `a` and `b` side by side with the difference `b − a` (absolute and in
/// percent) and its support: latency statistics from the pooled histograms, the others medians
/// over the repeats; the support is a two-sided Mann-Whitney U test of the per-repeat values when
/// both have at least three repeats, and says so when they do not.
pub fn compare_text(a: &CellInput, b: &CellInput) -> String {
    let an = Analysis::of_cells("", vec![a, b]);
    let (ca, cb) = (&an.cells[0], &an.cells[1]);
    // Column names: the cells' names, or A and B when those would not tell them apart.
    // (A run's name is its id, too long for a column.)
    let long = |n: &str| n.chars().count() > 24;
    let (na, nb) = if a.name == b.name
        || a.name.is_empty()
        || b.name.is_empty()
        || long(&a.name)
        || long(&b.name)
    {
        ("A".to_string(), "B".to_string())
    } else {
        (a.name.clone(), b.name.clone())
    };
    let mut out = String::new();
    let describe = |tag: &str, c: &CellInput| {
        let params = if c.params.is_empty() {
            String::new()
        } else {
            format!("; {}", c.params_text())
        };
        let ids = c
            .runs
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        // A run named by its id is not named twice.
        let ids = if ids == c.name {
            String::new()
        } else {
            format!(": {ids}")
        };
        format!(
            "{tag}: {} ({} {}{params}){ids}",
            if c.name.is_empty() { "-" } else { &c.name },
            c.runs.len(),
            if c.runs.len() == 1 { "run" } else { "runs" }
        )
    };
    let _ = writeln!(out, "{}", describe("A", a));
    let _ = writeln!(out, "{}", describe("B", b));
    let ids = |c: &CellInput| c.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    if ids(a) == ids(b) {
        let _ = writeln!(
            out,
            "A and B are the same runs: nothing differs (name two runs or cells to compare)"
        );
        // A table of equal values, each said to show no difference, would only repeat it.
        return out;
    }
    setting_differences(&an, &mut out);

    let mut t = Table::with_headers(
        "compare",
        vec![
            ("statistic".into(), false),
            (na.clone(), true),
            (nb.clone(), true),
            (format!("{nb} − {na}"), true),
            ("%".into(), true),
            ("support".into(), false),
        ],
    );
    t.row(vec![
        "runs".into(),
        ca.runs.len().to_string().into(),
        cb.runs.len().to_string().into(),
        TCell::new(""),
        TCell::new(""),
        TCell::new(""),
    ]);
    t.row(vec![
        "samples".into(),
        ca.stats.count.to_string().into(),
        cb.stats.count.to_string().into(),
        TCell::new(""),
        TCell::new(""),
        TCell::new(""),
    ]);
    let mut p99_sentence = String::new();
    for m in an.metrics() {
        let r = compare(ca, cb, m);
        let (va, vb) = r.shown();
        let label = if m.is_latency() {
            m.label(&an.keys)
        } else {
            format!("{}, median", m.label(&an.keys))
        };
        t.row(vec![
            label.into(),
            va.into(),
            vb.into(),
            r.diff()
                .map_or_else(|| "-".to_string(), |d| m.format_diff(d))
                .into(),
            r.percent()
                .map_or_else(|| "-".to_string(), numfmt::percent_signed)
                .into(),
            r.support.text(&nb).into(),
        ]);
        if m == Metric::P99 {
            p99_sentence = r.support.sentence(&nb, &na);
        }
    }
    out.push('\n');
    out.push_str(&render_text(&[Block::Table(t)]));
    out.push('\n');
    let _ = writeln!(out, "verdict on p99: {p99_sentence}");
    if let Some(c) = crate::analysis::extremes_caveat_named(ca, cb, (&na, &nb)) {
        let _ = writeln!(out, "min and max: {c}");
    }
    let _ = writeln!(
        out,
        "latency: pooled histograms of all repeats, in µs; other rows: medians over the repeats. \
         support: two-sided Mann-Whitney U test of the per-repeat values (exact p), a verdict only \
         with at least {MIN_REPEATS} repeats each and p < {ALPHA}."
    );
    // Cost statistics neither cell has are not rows: say why in one line each.
    let runs = || ca.runs.iter().chain(&cb.runs);
    let missing: [(&str, Metric, Vec<String>); 2] = [
        (
            "power",
            Metric::PowerW,
            runs()
                .filter_map(|r| r.power.as_ref().err().cloned())
                .collect(),
        ),
        (
            "frequency",
            Metric::FreqMhz,
            runs()
                .filter_map(|r| r.freq_mhz.as_ref().err().cloned())
                .collect(),
        ),
    ];
    for (what, metric, mut reasons) in missing {
        if reasons.is_empty() || an.cells.iter().any(|c| !c.values(metric).is_empty()) {
            continue;
        }
        reasons.sort();
        reasons.dedup();
        let _ = writeln!(out, "{what}: unavailable: {}", reasons.join("; "));
    }
    out
}

/// What was not measured alike: a difference in latency may come from it. A setting one side
/// does not record is not known to differ; it is named apart.
fn setting_differences(an: &Analysis, out: &mut String) {
    let mut differ = Vec::new();
    let mut unknown = Vec::new();
    let between = || {
        an.diff
            .iter()
            .filter(|r| r.kind == crate::flatten::DiffKind::BetweenCells)
    };
    // Pinned threads are one per CPU: their count follows from the CPUs, which are named; an
    // unpinned side is said so, with its count.
    let cpus_differ = between().any(|r| r.key == "config.cpus");
    let threads = between()
        .find(|r| r.key == "config.threads")
        .map(|r| [r.cell_text(0), r.cell_text(1)]);
    for r in between() {
        let Some(name) = r.key.strip_prefix("config.") else {
            continue;
        };
        if name == "threads" && cpus_differ {
            continue;
        }
        let (a, b) = (r.cell_text(0), r.cell_text(1));
        let (option, va) = option_value(name, &a);
        if [&a, &b].contains(&&crate::flatten::NOT_RECORDED.to_string()) {
            unknown.push(option);
            continue;
        }
        let (_, vb) = option_value(name, &b);
        let unpinned = |v: String, side: usize| match (&threads, v.as_str()) {
            (_, v) if name != "cpus" || v != "none" => v.to_string(),
            (Some(t), _) => format!("unpinned (--threads {})", t[side]),
            (None, _) => "unpinned".to_string(),
        };
        let (va, vb) = (unpinned(va, 0), unpinned(vb, 1));
        differ.push(format!("{option} {va} against {vb}"));
    }
    if !differ.is_empty() {
        let _ = writeln!(out, "measured differently: {}", differ.join("; "));
    }
    if !unknown.is_empty() {
        let _ = writeln!(
            out,
            "not recorded by one side (an import), so not known to differ: {}",
            unknown.join(", ")
        );
    }
}

/// A measuring setting as the option that sets it, with its value in that option's form:
/// `interval_ns`, `1000000` is `--interval`, `1ms`; `cpus`, `0, 1` is `--cpus`, `0-1`.
fn option_value(name: &str, value: &str) -> (String, String) {
    use latlab_model::units::format_duration;
    // The option that sets it, where its name is not the field's.
    let flag = |n: &str| match n {
        "spike_threshold" => "--spike".to_string(),
        "break_threshold" => "--break".to_string(),
        "pm_qos_us" => "--pm-qos".to_string(),
        "mlock" => "mlockall".to_string(),
        _ => format!("--{}", n.replace('_', "-")),
    };
    if let Some(n) = name.strip_suffix("_ns") {
        let v = match value.parse::<u64>() {
            // A length of no round unit (a series' measured span) for people: `1m44s`.
            Ok(v) if n == "duration" && format_duration(v).ends_with("ns") && v >= 1_000_000 => {
                latlab_model::units::format_elapsed(v)
            }
            Ok(v) => format_duration(v),
            Err(_) => value.to_string(),
        };
        return (flag(n), v);
    }
    let list = value.replace(", ", ",");
    match latlab_model::units::CpuList::parse(&list) {
        Ok(cpus) if name == "cpus" => (flag(name), cpus.to_string()),
        _ => (flag(name), value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    /// A setting is said in its option's form; a length of no round unit (a monitoring
    /// series' span) for people, not in nanoseconds.
    #[test]
    fn settings_read_as_their_options_take_them() {
        let said = |name: &str, value: &str| super::option_value(name, value);
        assert_eq!(
            said("interval_ns", "1000000"),
            ("--interval".into(), "1ms".into())
        );
        assert_eq!(
            said("duration_ns", "5000000000"),
            ("--duration".into(), "5s".into())
        );
        assert_eq!(
            said("duration_ns", "104460323030"),
            ("--duration".into(), "1m44s".into())
        );
        assert_eq!(said("cpus", "0, 1"), ("--cpus".into(), "0-1".into()));
    }
}
