//! The terminal summary of a run: a short block saying how the run was made, then one row of
//! statistics per measuring thread and one for all threads together, within 100 columns.

use std::fmt::Write;

use latlab_model::{
    Policy, RunResult, Stats, StopReason, Unrecorded, units::CpuList, units::format_duration,
    units::plural,
};

/// How a latency column reads its value from [`Stats`], and its percentile (None: min, max).
type Column = (&'static str, fn(&Stats) -> u64, Option<f64>);

/// Latency columns of the table, after label, samples and missed.
const VALUE_COLUMNS: [Column; 6] = [
    ("min", |s| s.min, None),
    ("p50", |s| s.p50, Some(50.0)),
    ("p90", |s| s.p90, Some(90.0)),
    ("p99", |s| s.p99, Some(99.0)),
    ("p99.9", |s| s.p99_9, Some(99.9)),
    ("max", |s| s.max, None),
];
const SAMPLES_W: usize = 12;
const MISSED_W: usize = 10;
const VALUE_W: usize = 9;

/// A header block (method, interval, policy, duration, stop reason, PM QoS, memory locking,
/// warnings) and a fixed-width table: one row per thread plus an `all` row, with samples, missed
/// periods, and min/p50/p90/p99/p99.9/max in µs with one decimal.
pub fn summary_table(result: &RunResult) -> String {
    let mut out = String::new();
    header(&mut out, result);
    out.push('\n');
    out.push_str(&latency_table(result));
    if let Some(line) = spikes_line(result) {
        out.push_str(&line);
    }
    if let Some(samples) = &result.samples {
        out.push('\n');
        out.push_str(&crate::samples_text(samples));
    }
    out
}

/// The spikes a `--spike` run kept and the ones it only counted (beyond `--spike-limit`), which
/// only the JSON said.
fn spikes_line(r: &RunResult) -> Option<String> {
    let t = r.spikes.threshold_ns?;
    let kept = r.spikes.kept.len();
    let mut line = format!(
        "\nspikes:   {kept} above {} µs kept (in the JSON and the store)",
        crate::numfmt::us(t)
    );
    if r.spikes.not_kept > 0 {
        let _ = write!(
            line,
            "; {} more counted but not kept (the largest are kept: --spike-limit {} a run, {} a \
             thread a window)",
            r.spikes.not_kept,
            r.config.spike_limit,
            latlab_model::SPIKES_PER_WINDOW
        );
    }
    line.push('\n');
    Some(line)
}

/// What `latlab measure -q` prints: the table of [`summary_table`] without its header block or
/// the samplers', with the loads' throughput where loads ran.
pub fn latency_table(result: &RunResult) -> String {
    let mut out = String::new();
    table(&mut out, result);
    if !result.loads.is_empty() {
        out.push('\n');
        out.push_str(&crate::loads_text(&result.loads));
    }
    out
}

/// The summary's interval: with its timer slack, and "not recorded" where an import's format
/// does not record it (0; the busy method has none, `-`).
fn interval_text(c: &latlab_model::MeasureConfig) -> String {
    let mut interval = if c.interval_ns == 0 && c.method != latlab_model::Method::Busy {
        "not recorded".to_string()
    } else {
        c.interval_text()
    };
    if c.timer_slack_ns > 0 {
        let _ = write!(
            interval,
            ", timer slack {}",
            format_duration(c.timer_slack_ns)
        );
    }
    interval
}

fn header(out: &mut String, r: &RunResult) {
    let c = &r.config;
    let sys = &r.system;
    let line = |out: &mut String, key: &str, value: &str| {
        let _ = writeln!(out, "{:<10}{value}", format!("{key}:"));
    };

    // An import from a format without a start time or length knows neither (recorded as 0).
    let started = match r.known_start() {
        Some(at) => format!("started {at}"),
        None => "start time not recorded".to_string(),
    };
    let mut run = format!("{}, latlab {}, {started}", r.id, r.latlab_version);
    if !sys.hostname.is_empty() {
        let _ = write!(run, " on {}", sys.hostname);
    }
    line(out, "run", &run);
    if !sys.kernel_release.is_empty() {
        let mut kernel = format!("Linux {}", sys.kernel_release);
        if !sys.preempt.is_empty() {
            let _ = write!(kernel, ", preempt {}", sys.preempt);
        }
        line(out, "kernel", &kernel);
    }

    line(out, "method", &method_text(r));
    line(out, "interval", &interval_text(c));

    let mut policy = match (c.policy, &c.deadline) {
        (Policy::Deadline, Some(d)) => format!(
            "deadline (runtime {}, deadline {}, period {})",
            format_duration(d.runtime_ns),
            format_duration(d.deadline_ns),
            format_duration(d.period_ns)
        ),
        // A real-time priority is 1 or more: 0 is one an import did not know.
        (p, _) if p.is_realtime() && c.priority == 0 => "not recorded".to_string(),
        (p, _) if p.is_realtime() => format!("{}, priority {}", p.name(), c.priority),
        (p, _) => p.name().to_string(),
    };
    let threads = plural(u64::from(c.threads), "thread", "threads");
    match &c.cpus {
        Some(cpus) => {
            let _ = write!(
                policy,
                "; {threads} on {}",
                CpuList::from_cpus(cpus.clone()).named()
            );
        }
        None if !r.records(Unrecorded::CPUS) => {
            let _ = write!(policy, "; {threads}, CPUs not recorded");
        }
        None => {
            let _ = write!(policy, "; {threads}, unpinned");
        }
    }
    line(out, "policy", &policy);

    let mut duration = match latlab_model::known_time(r.elapsed_ns) {
        Some(ns) => format!("{} s measured", crate::numfmt::secs3(ns)),
        None => "unknown".to_string(),
    };
    match (c.duration_ns, c.loops) {
        (Some(d), Some(l)) => {
            let _ = write!(duration, " (asked: {}, {l} loops)", format_duration(d));
        }
        (Some(d), None) => {
            let _ = write!(duration, " (asked: {})", format_duration(d));
        }
        (None, Some(l)) => {
            let _ = write!(duration, " (asked: {l} loops)");
        }
        // Neither a length nor an end known: an import that records neither.
        (None, None) if latlab_model::known_time(r.elapsed_ns).is_none() => {
            duration = "not recorded".into();
        }
        // An import that records the length it ran and not the one asked.
        (None, None) if r.environment.missed_unrecorded => {
            duration.push_str(" (asked: not recorded)");
        }
        (None, None) => duration.push_str(" (asked: until interrupted)"),
    }
    line(out, "duration", &duration);
    let stop = match &r.stop {
        StopReason::Duration => "duration reached".to_string(),
        StopReason::Loops if c.loops.is_some() => "loop count reached".to_string(),
        // An import that records no loop count does not know how its run ended.
        StopReason::Loops => "not recorded".to_string(),
        StopReason::Signal { signal } => format!("interrupted by {signal}"),
        StopReason::Break { thread, value_ns } => {
            let label = r
                .threads
                .get(*thread as usize)
                .map_or_else(|| format!("thread {thread}"), |t| t.label.clone());
            let also: Vec<String> = r
                .also_over_break()
                .iter()
                .map(|(l, ns)| format!("{l} (max {} µs)", crate::numfmt::us(*ns)))
                .collect();
            let also = if also.is_empty() {
                String::new()
            } else {
                format!("; over it too before the stop: {}", also.join(", "))
            };
            format!(
                "break threshold: {label} saw {} µs{also}",
                crate::numfmt::us(*value_ns)
            )
        }
    };
    line(out, "stopped", &stop);

    let env = &r.environment;
    let pm_qos = match (env.pm_qos_held_us, c.pm_qos_us) {
        _ if !r.records(Unrecorded::PM_QOS) => {
            "not recorded (the imported format does not say)".to_string()
        }
        (Some(held), _) => format!("held at {held} µs (/dev/cpu_dma_latency)"),
        (None, Some(asked)) => format!("not held (asked for {asked} µs)"),
        (None, None) => "not held (system setting left alone)".to_string(),
    };
    line(out, "PM QoS", &pm_qos);
    let memory = match (env.memory_locked, c.mlock, &env.mlock_error) {
        _ if !r.records(Unrecorded::MEMORY) => {
            "not recorded (the imported format does not say)".to_string()
        }
        (true, _, _) => "locked (mlockall)".to_string(),
        (false, true, Some(e)) => format!("not locked: {e}"),
        (false, true, None) => "not locked".to_string(),
        (false, false, _) => "not locked (not asked)".to_string(),
    };
    line(out, "memory", &memory);
    if let Some(profile) = &env.profile {
        let changed = env
            .tuning
            .iter()
            .filter(|t| !t.contains("unsupported here"))
            .count();
        let said = match (changed, env.pm_qos_held_us) {
            // A profile of only a /dev/cpu_dma_latency request writes nothing: it is held (the
            // request is the profile's when --pm-qos asked for none).
            (0, Some(_)) if c.pm_qos_us.is_none() => format!(
                "{profile}: no setting changed; its /dev/cpu_dma_latency request held for the run \
                 (PM QoS above)"
            ),
            (0, _) => format!("{profile}: no setting changed (each was as it wants, or absent)"),
            _ => format!("{profile}: {changed} setting(s) changed for the run, then restored"),
        };
        line(out, "profile", &said);
    }
    for w in &env.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
}

fn table(out: &mut String, r: &RunResult) {
    let label_w = r
        .threads
        .iter()
        .map(|t| t.label.chars().count())
        .chain([6])
        .max()
        .unwrap_or(6);
    // "-" where the run's format does not count missed periods (an import).
    let missed = |m: u64| {
        if r.records_missed() {
            m.to_string()
        } else {
            "-".into()
        }
    };
    let rows: Vec<Row> = r
        .threads
        .iter()
        .map(|t| (t.label.as_str(), t.missed, &t.stats))
        .chain([("all", r.overall.missed, &r.overall.stats)])
        .map(|(label, m, s)| Row {
            label,
            count: s.count.to_string(),
            missed: missed(m),
            cells: value_cells(s),
        })
        .collect();
    // Columns widen past their usual width for values that fill it (a stall of seconds), so a
    // space always parts them.
    let wide = |usual: usize, len: &dyn Fn(&Row) -> usize| {
        rows.iter()
            .map(|r| len(r) + 1)
            .chain([usual])
            .max()
            .unwrap_or(usual)
    };
    let samples_w = wide(SAMPLES_W, &|r| r.count.chars().count());
    let missed_w = wide(MISSED_W, &|r| r.missed.chars().count());
    let value_w = wide(VALUE_W, &|r| {
        r.cells.iter().map(|c| c.chars().count()).max().unwrap_or(0)
    });
    let _ = write!(
        out,
        "{:<label_w$}{:>samples_w$}{:>missed_w$}",
        "thread", "samples", "missed"
    );
    for (name, _, _) in VALUE_COLUMNS {
        let _ = write!(out, "{name:>value_w$}");
    }
    out.push_str("  (µs)\n");
    for row in &rows {
        let _ = write!(
            out,
            "{:<label_w$}{:>samples_w$}{:>missed_w$}",
            row.label, row.count, row.missed
        );
        for cell in &row.cells {
            let _ = write!(out, "{cell:>value_w$}");
        }
        out.push('\n');
    }
    let mut shown = r.threads.iter().map(|t| &t.stats).chain([&r.overall.stats]);
    if shown.any(|s| VALUE_COLUMNS.iter().any(|c| at_least(s, c))) {
        out.push_str(LOWER_BOUND_NOTE);
        out.push('\n');
    }
    let periods = r.overall.stats.count + r.overall.missed;
    let share = r.overall.missed as f64 * 100.0 / periods.max(1) as f64;
    if r.records_missed() && share >= crate::MISSED_SELECTION_PCT {
        let _ = writeln!(
            out,
            "missed {share:.1}% of its periods: the latencies above are only the wake-ups that \
             happened\n  (stalls took the others); the corrected statistics of `latlab export \
             --format csv`\n  count each missed period at the latency it would have had"
        );
    }
}

/// Whether a column's value of `s` is a lower bound (an import's samples beyond its
/// histogram's range): shown with "≥".
fn at_least(s: &Stats, (_, value, percentile): &Column) -> bool {
    s.count > 0 && percentile.is_some_and(|p| s.percentile_is_lower_bound(p, value(s)))
}

/// The `method:` line of a run's summary: how its threads slept (or were woken), and where the
/// wakers ran.
fn method_text(r: &RunResult) -> String {
    let c = &r.config;
    let timing = if c.relative || c.method.always_relative() {
        "relative"
    } else {
        "absolute"
    };
    let mut method = format!("{} ({timing}, {} clock)", c.method.name(), c.clock.name());
    if c.method == latlab_model::Method::Busy {
        method = format!(
            "busy (reads the {} clock in a loop: each gap between two reads is a sample)",
            c.clock.name()
        );
    }
    if !r.records(Unrecorded::METHOD) {
        method = "not recorded (the imported format does not say)".into();
    } else if c.method.is_wakeup() {
        match c.waker_cpu {
            Some(cpu) => {
                let _ = write!(method, ", waker on CPU {cpu}");
            }
            // Every CPU measured: each waker ran on the CPU after its thread's.
            None if c.cpus.is_some() => method.push_str(", each waker on the next measured CPU"),
            None => method.push_str(", waker unpinned"),
        }
    }
    method
}

/// What "≥" before a value means, said under a table that shows one.
pub const LOWER_BOUND_NOTE: &str = "≥: a lower bound: the value lies among samples beyond the \
                                    histogram's range,\n   known only to lie there or above";

/// One row of the latency table, as its cells read.
struct Row<'a> {
    label: &'a str,
    count: String,
    missed: String,
    cells: Vec<String>,
}

/// A row's value cells: "-" without samples, "≥" before a lower bound.
fn value_cells(s: &Stats) -> Vec<String> {
    VALUE_COLUMNS
        .iter()
        .map(|column| {
            if s.count == 0 {
                return "-".to_string();
            }
            let (v, p) = ((column.1)(s), column.2);
            format!(
                "{}{}",
                if at_least(s, column) { "≥" } else { "" },
                crate::numfmt::us(p.map_or(v, |p| s.percentile_shown(p, v)))
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn columns_stay_apart_for_stalls_of_seconds() {
        let mut h = latlab_hist::Histogram::new();
        for ns in [4_100, 9_400, 3_001_999_400] {
            h.record(ns);
        }
        let t = latlab_testkit::run::thread("cpu0", Some(0), 1, 511, h);
        let r = latlab_testkit::run::result(
            "r",
            (1, 1),
            latlab_model::MeasureConfig::default(),
            Default::default(),
            vec![t],
        );
        let text = super::latency_table(&r);
        let lines: Vec<&str> = text.lines().collect();
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        for line in &lines[1..3] {
            let cells: Vec<&str> = line.split_whitespace().collect();
            // Label, samples, missed and six values: each its own word.
            assert_eq!(cells.len(), 9, "{text}");
            assert_eq!(cells[8], "3001999.4", "{text}");
            // Right-aligned under its heading.
            assert_eq!(line.len(), lines[0].len() - "  (µs)".len(), "{text}");
        }
        assert_eq!(header.len(), 10, "{text}");
        // Values that fit keep the usual widths.
        let mut h = latlab_hist::Histogram::new();
        h.record(9_400);
        let t = latlab_testkit::run::thread("cpu0", Some(0), 1, 0, h);
        let r = latlab_testkit::run::result(
            "r",
            (1, 1),
            Default::default(),
            Default::default(),
            vec![t],
        );
        let text = super::latency_table(&r);
        assert_eq!(
            text.lines().next().unwrap(),
            "thread     samples    missed      min      p50      p90      p99    p99.9      max  (µs)"
        );
    }

    #[test]
    fn microseconds_with_one_decimal() {
        assert_eq!(crate::numfmt::us(0), "0.0");
        assert_eq!(crate::numfmt::us(49), "0.0");
        assert_eq!(crate::numfmt::us(50), "0.1");
        assert_eq!(crate::numfmt::us(31_249), "31.2");
        assert_eq!(crate::numfmt::us(31_250), "31.3");
        assert_eq!(crate::numfmt::us(1_500_000), "1500.0");
    }

    #[test]
    fn seconds_truncate() {
        assert_eq!(crate::numfmt::secs3(10_002_345_678), "10.002");
        assert_eq!(crate::numfmt::secs3(999_999), "0.000");
        assert_eq!(crate::numfmt::secs3(999_999_999), "0.999");
    }
}
