//! `latlab trace`: kernel deferred-work, interrupt, timer and wake-up latencies traced with eBPF,
//! printed per family (per CPU and overall; top work functions) and written as JSON.

use crate::args::{Cpus, Ns, usage};
use crate::cli_error::{CliError, CliResult};
use clap::Args;
use latlab_hist::Histogram;
use latlab_model::StopReason;
use latlab_model::trace::{
    Family, FamilyResult, KeyResult, TRACE_SCHEMA, TRACE_SCHEMA_VERSION, TraceResult, TraceRun,
    WakeupFilter,
};
use latlab_model::units::{CpuList, format_duration, format_us};
use latlab_sys::Sys;
use latlab_trace::{EventGroup, TraceConfig, TraceError, Tracer};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Event groups: workqueue, softirq, tasklet, kthread, wakeup, hrtimer, \
local-timer, hardirq (or all). Needs root, or CAP_BPF and CAP_PERFMON, and a kernel with BTF.\n\n\
Exit codes: 0 traced, 1 a failure, 2 bad input, 130 a signal stopped it before its --duration \
(what was traced is still written)."
)]
pub struct TraceArgs {
    /// Length of the run (default: until Ctrl-C; a bare number is seconds).
    #[arg(short = 'D', long, value_name = "DUR", value_parser = crate::args::secs)]
    duration: Option<Ns>,

    /// Record events on these CPUs only, or all (default: every CPU).
    #[arg(short = 'a', long = "cpus", value_name = "LIST")]
    cpus: Option<Cpus>,

    /// Event groups to trace, comma-separated.
    #[arg(short = 'e', long, default_value = "all", value_name = "LIST")]
    events: String,

    /// Wake-ups of this process (or thread) only.
    #[arg(long, value_name = "PID")]
    pid: Option<i32>,

    /// Wake-ups of real-time and deadline tasks only.
    #[arg(long)]
    rt_only: bool,

    /// Rows of the per-function tables (by count and by worst case).
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,

    /// Print only the overall row of each family (no per-CPU rows).
    #[arg(short = 'q', long)]
    quiet: bool,

    /// Write the JSON result to FILE (- for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// A checked `latlab trace` invocation.
#[derive(Debug, PartialEq)]
pub struct TracePlan {
    pub config: TraceConfig,
    pub duration_ns: Option<u64>,
    pub top: usize,
}

impl TraceArgs {
    /// Turn the raw arguments into a plan, checking every value (nothing is touched).
    pub fn to_plan(&self, online: &CpuList) -> CliResult<TracePlan> {
        let duration_ns = self.duration.map(|Ns(d)| d);
        if duration_ns == Some(0) {
            return Err(CliError::Usage(
                "--duration 0: too short (accepted: e.g. 100ms, 10s, 5m)".into(),
            ));
        }
        let groups = EventGroup::parse_list(&self.events).map_err(usage("--events"))?;
        let cpus = match &self.cpus {
            None | Some(Cpus::All) => None,
            Some(Cpus::List(l)) => {
                if let Some(why) = l.not_within(online) {
                    return Err(CliError::Usage(format!("--cpus {l}: {why}")));
                }
                Some(l.cpus().to_vec())
            }
        };
        if let Some(pid) = self.pid {
            if pid <= 0 {
                return Err(CliError::Usage(format!(
                    "--pid {pid}: not a process id (accepted: a positive PID)"
                )));
            }
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(CliError::Usage(format!(
                    "--pid {pid}: no such process (accepted: the PID of a running process or thread)"
                )));
            }
        }
        if (self.pid.is_some() || self.rt_only) && !groups.contains(&EventGroup::Wakeup) {
            return Err(CliError::Usage(
                "--pid and --rt-only filter wake-ups (accepted: with wakeup in --events)".into(),
            ));
        }
        if self.top == 0 {
            return Err(CliError::Usage(
                "--top 0: no rows to show (accepted: 1 or more rows)".into(),
            ));
        }
        Ok(TracePlan {
            config: TraceConfig {
                groups,
                cpus,
                wakeup: WakeupFilter {
                    rt_only: self.rt_only,
                    pid: self.pid,
                },
                ring: false,
                ..TraceConfig::default()
            },
            duration_ns,
            top: self.top,
        })
    }
}

pub fn run(args: TraceArgs, sys: &Sys) -> CliResult<ExitCode> {
    let online = sys
        .online_cpus()
        .map_err(|e| CliError::Failed(anyhow::anyhow!("cannot read the online CPUs: {e}")))?;
    let plan = args.to_plan(&online)?;
    // Created before tracing, so a bad path fails first.
    let json = crate::args::OutputFile::open("--json", &args.json)?;
    let json_to_stdout = json.as_ref().is_some_and(|o| o.is_stdout());

    let (tx, rx) = std::sync::mpsc::channel::<String>();
    crate::signals::install_with(move |name| {
        let _ = tx.send(name.to_string());
    });

    let start_unix_ns = latlab_sys::unix_now_ns();
    let tracer = Tracer::start(&plan.config).map_err(|e| match e {
        TraceError::Config(m) => CliError::Usage(m),
        e => CliError::Failed(anyhow::anyhow!(e)),
    })?;
    for line in latlab_trace::skipped_lines(tracer.skipped()) {
        eprintln!("latlab: skipped {line}");
    }
    if !json_to_stdout {
        let groups: Vec<&str> = tracer.active_groups().iter().map(|g| g.name()).collect();
        let cpus = match &plan.config.cpus {
            Some(c) => CpuList::from_cpus(c.clone()).named(),
            None => format!("CPUs {online}"),
        };
        let length = match plan.duration_ns {
            Some(d) => format!("for {}", format_duration(d)),
            None => "until Ctrl-C".into(),
        };
        eprintln!("latlab: tracing {} on {cpus}, {length}", groups.join(", "));
    }
    let stop = match plan.duration_ns {
        Some(ns) => match rx.recv_timeout(Duration::from_nanos(ns)) {
            Ok(signal) => StopReason::Signal { signal },
            Err(_) => StopReason::Duration,
        },
        None => match rx.recv() {
            Ok(signal) => StopReason::Signal { signal },
            Err(_) => StopReason::Duration,
        },
    };
    let result = tracer
        .finish()
        .map_err(|e| CliError::Failed(anyhow::anyhow!(e)))?;
    let ended_unix_ns = start_unix_ns + result.elapsed_ns;

    if let Some(out) = json {
        let doc = TraceRun {
            schema: TRACE_SCHEMA.into(),
            schema_version: TRACE_SCHEMA_VERSION,
            latlab_version: env!("CARGO_PKG_VERSION").into(),
            started_at: latlab_model::rfc3339_utc(start_unix_ns),
            ended_at: latlab_model::rfc3339_utc(ended_unix_ns),
            start_unix_ns,
            stop: stop.clone(),
            system: Some(sys.system_info()),
            trace: result.clone(),
        };
        let mut text = serde_json::to_string_pretty(&doc)
            .map_err(|e| anyhow::anyhow!("serializing the result: {e}"))?;
        text.push('\n');
        out.write(&text)?;
    }
    if !json_to_stdout {
        print!("{}", render(&result, plan.top, !args.quiet));
    }
    // A run a signal ended before its --duration is not what was asked: said, and exit 130.
    if let (StopReason::Signal { signal }, Some(asked)) = (&stop, plan.duration_ns) {
        eprintln!(
            "latlab: stopped by {signal} after {} of the {} asked; what was traced is written",
            latlab_model::units::format_elapsed(result.elapsed_ns),
            format_duration(asked)
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

fn us(ns: u64) -> String {
    format_us(ns, 2)
}

fn stats_row(label: &str, h: &Histogram, width: usize) -> String {
    if h.is_empty() {
        return format!("{label:<width$} {:>9}\n", 0);
    }
    format!(
        "{label:<width$} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        h.count(),
        us(h.percentile(50.0)),
        us(h.percentile(99.0)),
        us(h.max()),
        us(h.mean() as u64),
    )
}

fn header(first: &str, width: usize) -> String {
    format!(
        "{first:<width$} {:>9} {:>9} {:>9} {:>9} {:>9}  (µs)\n",
        "count", "p50", "p99", "max", "mean"
    )
}

fn key_table(out: &mut String, title: &str, kind: &str, keys: &[&KeyResult]) {
    let width = keys
        .iter()
        .map(|k| k.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(kind.len(), 48);
    let _ = writeln!(out, "  {title}");
    out.push_str("  ");
    out.push_str(&header(kind, width));
    for k in keys {
        let name: String = k.name.chars().take(width).collect();
        out.push_str("  ");
        out.push_str(&stats_row(&name, &k.histogram, width));
    }
}

/// Whether a family has a table of keys worth printing.
fn has_keys(f: Family) -> bool {
    f != Family::LocalTimer
}

/// The text report: per family, per CPU and overall rows; key tables (vectors, classes, IRQs,
/// top functions by count and by worst case); then skipped events and latlab's own cost.
pub fn render(r: &TraceResult, top: usize, per_cpu: bool) -> String {
    let mut out = String::new();
    for f in &r.families {
        let filter = (f.family == Family::Wakeup)
            .then(|| wakeup_filter_text(&r.wakeup_filter))
            .flatten();
        render_family(&mut out, f, top, per_cpu, filter.as_deref());
    }
    if r.families.is_empty() {
        out.push_str("no event family was traced\n");
    }
    for line in latlab_trace::skipped_lines(&r.skipped) {
        let _ = writeln!(out, "skipped {line}");
    }
    let c = &r.cost;
    if c.available {
        let _ = writeln!(
            out,
            "cost: {} BPF programs ran {} times for {:.3} ms ({:.4} % of all online CPUs' time over {:.3} s); {}",
            c.programs.len(),
            c.run_count,
            c.run_time_ns as f64 / 1e6,
            c.cpu_fraction * 100.0,
            r.elapsed_ns as f64 / 1e9,
            c.source
        );
    } else {
        let _ = writeln!(out, "cost: {}", c.source);
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The brief report beside a measurement: one row per family with samples, then skipped
/// events and the tracer's cost.
pub fn render_brief(r: &TraceResult) -> String {
    let width = 20;
    let mut out = format!(
        "trace ({} s)\n",
        format_args!("{:.1}", r.elapsed_ns as f64 / 1e9)
    );
    out.push_str(&header("family", width));
    for f in r.families.iter().filter(|f| !f.histogram.is_empty()) {
        out.push_str(&stats_row(f.family.name(), &f.histogram, width));
    }
    let idle: Vec<&str> = r
        .families
        .iter()
        .filter(|f| f.histogram.is_empty())
        .map(|f| f.family.name())
        .collect();
    if !idle.is_empty() {
        let _ = writeln!(out, "no samples: {}", idle.join(", "));
    }
    let tail = render(
        &TraceResult {
            families: Vec::new(),
            ..r.clone()
        },
        0,
        false,
    );
    for line in tail.lines().filter(|l| *l != "no event family was traced") {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// What a wake-up filter keeps, `None` for every task.
fn wakeup_filter_text(w: &latlab_model::trace::WakeupFilter) -> Option<String> {
    let mut parts = Vec::new();
    if w.rt_only {
        parts.push("real-time and deadline tasks".to_string());
    }
    if let Some(pid) = w.pid {
        parts.push(format!("process or thread {pid}"));
    }
    (!parts.is_empty()).then(|| format!("only wake-ups of {}", parts.join(" of ")))
}

fn render_family(
    out: &mut String,
    f: &FamilyResult,
    top: usize,
    per_cpu: bool,
    filter: Option<&str>,
) {
    let _ = writeln!(out, "{} ({})", f.family.describe(), f.family.name());
    if let Some(filter) = filter {
        let _ = writeln!(out, "  {filter}");
    }
    if f.histogram.is_empty() {
        out.push_str("  no samples\n\n");
        return;
    }
    out.push_str("  ");
    out.push_str(&header("cpu", 6));
    if per_cpu {
        for c in &f.per_cpu {
            out.push_str("  ");
            out.push_str(&stats_row(&format!("cpu{}", c.cpu), &c.histogram, 6));
        }
    }
    out.push_str("  ");
    out.push_str(&stats_row("all", &f.histogram, 6));
    if has_keys(f.family) && !f.keys.is_empty() {
        let kind = f.family.key_kind();
        // Vectors and classes are few: show them all. Functions and IRQs: the top N.
        let few = matches!(
            f.family,
            Family::SoftirqLatency | Family::SoftirqRuntime | Family::Wakeup
        );
        if few {
            let keys: Vec<&KeyResult> = f.keys.iter().collect();
            key_table(out, &format!("by {kind}"), kind, &keys);
        } else {
            let by_count: Vec<&KeyResult> = f.keys.iter().take(top).collect();
            let n = by_count.len();
            key_table(
                out,
                &format!("top {n} of {} by count", f.keys.len()),
                kind,
                &by_count,
            );
            if f.keys.len() > 1 {
                let mut by_max: Vec<&KeyResult> = f.keys.iter().collect();
                by_max.sort_by(|a, b| {
                    b.histogram
                        .max()
                        .cmp(&a.histogram.max())
                        .then(a.key.cmp(&b.key))
                });
                by_max.truncate(top);
                key_table(
                    out,
                    &format!("top {} of {} by worst case", by_max.len(), f.keys.len()),
                    kind,
                    &by_max,
                );
            }
        }
    }
    if f.dropped > 0 {
        let _ = writeln!(out, "  {} samples lost (kernel maps full)", f.dropped);
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The plan of `args`, refused as `main` refuses it: when parsed, or when checked.
    fn plan(args: &[&str]) -> CliResult<TracePlan> {
        crate::cli_error::parse_args::<TraceArgs>(args)?.to_plan(&CpuList::parse("0-3").unwrap())
    }

    #[test]
    fn defaults_trace_everything_until_ctrl_c() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.config.groups, EventGroup::ALL.to_vec());
        assert_eq!(p.duration_ns, None);
        assert_eq!(p.config.cpus, None);
        assert_eq!(p.top, 10);
        assert!(!p.config.ring);
    }

    #[test]
    fn options_become_the_configuration() {
        let p = plan(&[
            "-D",
            "5",
            "--cpus",
            "1-2",
            "--events",
            "wakeup,softirq",
            "--rt-only",
            "--pid",
            "1",
            "--top",
            "3",
        ])
        .unwrap();
        assert_eq!(p.duration_ns, Some(5_000_000_000));
        assert_eq!(p.config.cpus, Some(vec![1, 2]));
        assert_eq!(p.config.groups, [EventGroup::Softirq, EventGroup::Wakeup]);
        assert!(p.config.wakeup.rt_only);
        assert_eq!(p.config.wakeup.pid, Some(1));
        assert_eq!(p.top, 3);
    }

    #[test]
    fn a_wakeup_filter_is_said_under_the_wakeup_table() {
        let mut r = latlab_testkit::run::trace(
            &["wakeup"],
            vec![latlab_testkit::run::family(
                Family::Wakeup,
                &[(0, "other", vec![(0, 5000)])],
            )],
            (10, 5000),
        );
        assert!(!render(&r, 1, true).contains("only wake-ups"));
        r.wakeup_filter = WakeupFilter {
            rt_only: true,
            pid: Some(1),
        };
        let text = render(&r, 1, true);
        assert!(
            text.contains(
                "(wakeup)\n  only wake-ups of real-time and deadline tasks of process or thread 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_report_shows_cpus_keys_skips_and_cost() {
        let on_cpu0 = |v: &[u64]| v.iter().map(|&v| (0, v)).collect::<Vec<_>>();
        let r = latlab_testkit::run::trace(
            &["workqueue"],
            vec![latlab_testkit::run::family(
                Family::WorkqueueLatency,
                &[
                    (1, "vmstat_update", on_cpu0(&[1000, 2000, 3000])),
                    (2, "slow_work", on_cpu0(&[900_000])),
                ],
            )],
            (10, 5000),
        );
        let text = render(&r, 1, true);
        assert!(
            text.contains("workqueue: queue -> execute (workqueue-latency)"),
            "{text}"
        );
        assert!(text.contains("cpu0"), "{text}");
        assert!(text.contains("top 1 of 2 by count"), "{text}");
        let by_count = text.split("by count").nth(1).unwrap();
        assert!(
            by_count
                .trim_start()
                .lines()
                .nth(1)
                .unwrap()
                .contains("vmstat_update"),
            "{text}"
        );
        let by_worst = text.split("by worst case").nth(1).unwrap();
        assert!(
            by_worst.lines().nth(2).unwrap().contains("slow_work"),
            "{text}"
        );
        assert!(text.contains("900.00"), "{text}");
        assert!(
            text.contains("skipped tasklet: tracepoint not in this kernel (irq:tasklet_entry)"),
            "{text}"
        );
        assert!(text.contains("cost: 0 BPF programs ran 10 times"), "{text}");
        let quiet = render(&r, 1, false);
        assert!(!quiet.contains("cpu0"), "{quiet}");
    }
}
