//! `latlab load`: run load generators alone for a while and report their throughput.

use crate::args::Ns;
use crate::cli_error::{CliError, CliResult};
use clap::Args;
use latlab_load::{LoadOptions, LoadSet, LoadSpec, ScheduleRunner, parse_schedule_named};
use latlab_measure::StopSignal;
use latlab_model::StopReason;
use latlab_model::load::{LoadReport, Loads, Throughput};
use latlab_model::units::{CpuList, format_duration, format_rate};
use latlab_session::load_error;
use latlab_sys::Sys;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Loads to run together: KIND[:OPTION=VALUE,...] (kinds and options: --list), e.g. cpu,
    /// matrix:size=128, memory:size=256M, io:bs=4k,fsync=true, procfs,
    /// rt-hog:threads=10,policy=rr,priority=1, messaging:transport=socket, cmd:"stress-ng --cpu 1"
    /// (the rest of a cmd spec is run with /bin/sh -c).
    #[arg(value_name = "SPEC")]
    specs: Vec<String>,

    /// CPUs the loads run on (default: every online CPU); workers default to one per CPU.
    #[arg(long = "load-cpus", value_name = "LIST")]
    load_cpus: Option<CpuList>,

    /// How long to run (default 10s, or the length of --schedule). A bare number is seconds.
    #[arg(short = 'D', long, value_name = "DURATION", value_parser = crate::args::secs)]
    duration: Option<Ns>,

    /// Phases run one after another, e.g. "idle 30s, memory 30s, io:bs=1M 30s, procfs 30s".
    #[arg(long, value_name = "PHASES")]
    schedule: Option<String>,

    /// Run rt-hog even when RT throttling is disabled.
    #[arg(long)]
    force: bool,

    /// Print the reports (and phases) as JSON (the `loads` object of a result).
    #[arg(long)]
    json: bool,

    /// List the load generators with their options, defaults and units.
    #[arg(long)]
    list: bool,
}

/// What the arguments ask for, checked.
struct LoadPlan {
    specs: Vec<LoadSpec>,
    schedule: Option<latlab_load::Schedule>,
    opts: LoadOptions,
    duration_ns: u64,
}

impl LoadArgs {
    fn plan(&self, sys: &Sys) -> CliResult<LoadPlan> {
        if self.specs.is_empty() && self.schedule.is_none() {
            return Err(CliError::Usage(
                "no load given (accepted: one or more SPECs such as cpu or io:bs=4k, or \
                 --schedule; see latlab load --list)"
                    .into(),
            ));
        }
        if self.force && !crate::args::names_rt_hog(&self.specs, self.schedule.as_ref()) {
            return Err(CliError::Usage(
                "--force: no rt-hog load to force (accepted: with an rt-hog load)".into(),
            ));
        }
        let specs = self
            .specs
            .iter()
            .map(|s| LoadSpec::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(load_error)?;
        let schedule = self
            .schedule
            .as_deref()
            .map(|s| parse_schedule_named("--schedule", s))
            .transpose()
            .map_err(load_error)?;
        let cpus = self.load_cpus.clone();
        let duration_ns = match (self.duration, &schedule) {
            (Some(Ns(d)), _) => d,
            (None, Some(s)) => s.total_ns(),
            (None, None) => 10_000_000_000,
        };
        if duration_ns == 0 {
            return Err(CliError::Usage(
                "--duration 0: no time to run (accepted: a duration above 0, e.g. 10s)".into(),
            ));
        }
        if let Some(s) = &schedule {
            crate::args::schedule_within("--schedule", s, duration_ns)?;
        }
        Ok(LoadPlan {
            specs,
            schedule,
            opts: LoadOptions {
                cpus,
                force: self.force,
                sys: sys.clone(),
            },
            duration_ns,
        })
    }
}

pub fn run(args: LoadArgs, sys: &Sys) -> CliResult<ExitCode> {
    if args.list {
        print!("{}", latlab_load::registry::list_text());
        return Ok(ExitCode::SUCCESS);
    }
    let plan = args.plan(sys)?;
    // Every load is checked (CPU set, supported here) before anything starts.
    LoadSet::check(&plan.specs, &plan.opts).map_err(load_error)?;
    if let Some(s) = &plan.schedule {
        LoadSet::check(&s.specs(), &plan.opts).map_err(load_error)?;
    }

    // Signals are blocked before the load threads exist, so they inherit the mask.
    let stop = StopSignal::new();
    crate::signals::install(stop.clone());

    let cpus = plan.opts.resolve_cpus().map_err(load_error)?;
    let mut what: Vec<String> = plan.specs.iter().map(|s| s.text().to_string()).collect();
    if let Some(s) = &args.schedule {
        what.push(format!("schedule \"{s}\""));
    }
    eprintln!(
        "latlab: running {} on {} for {}",
        what.join(", "),
        CpuList::from_cpus(cpus).named(),
        format_duration(plan.duration_ns)
    );

    // Above real-time loads from before they start, so that they end on time (a schedule's
    // thread keeps its own phases' time).
    let on_time = latlab_load::keep_time_beside(&plan.specs).map_err(|e| {
        anyhow::anyhow!("cannot raise latlab above the real-time loads to end them on time: {e}")
    })?;
    let set = LoadSet::start(&plan.specs, &plan.opts).map_err(load_error)?;
    let origin = Instant::now();
    let runner = match &plan.schedule {
        Some(s) => Some(ScheduleRunner::start(s, &plan.opts, origin).map_err(load_error)?),
        None => None,
    };
    let end = origin + Duration::from_nanos(plan.duration_ns);
    while !stop.is_set() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(20)));
    }
    let ran = origin.elapsed();
    let mut loads = Loads {
        reports: set.stop(),
        phases: Vec::new(),
    };
    drop(on_time);
    if let Some(r) = runner {
        let l = r.stop();
        loads.reports.extend(l.reports);
        loads.phases = l.phases;
    }
    let signalled = matches!(stop.reason(), Some(StopReason::Signal { .. }));
    if let Some(StopReason::Signal { signal }) = stop.reason() {
        eprintln!(
            "latlab: stopped by {signal} after {} of {}",
            format_duration(ran.as_millis() as u64 * 1_000_000),
            format_duration(plan.duration_ns)
        );
    }

    for r in &loads.reports {
        for w in &r.warnings {
            eprintln!("latlab: {}: {w}", r.spec);
        }
    }
    if args.json {
        let text = serde_json::to_string_pretty(&loads)
            .map_err(|e| anyhow::anyhow!("serializing the load reports: {e}"))?;
        println!("{text}");
    } else {
        print!("{}", table(&loads));
    }
    // A load that failed (a command that exited with an error on its own) fails the command.
    if let Some(failed) = loads.failed_line() {
        return Err(CliError::Failed(anyhow::anyhow!("a load failed: {failed}")));
    }
    // Stopped before its length, as an interrupted `measure` or `run`: its table is written,
    // and a script or CI step does not take it for a whole run.
    if signalled {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

fn rate(t: &Throughput) -> String {
    format!("{} {} ({})", format_rate(t.rate), t.unit, t.what)
}

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// The reports as a table: spec, workers, start, elapsed and each throughput on its own line;
/// then the phases of a schedule.
fn table(loads: &Loads) -> String {
    let width = loads
        .reports
        .iter()
        .map(|r| r.spec.chars().count())
        .chain(loads.phases.iter().map(|p| p.spec.chars().count()))
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let mut out = format!(
        "{:<width$}  {:>7}  {:>9}  {:>9}  throughput\n",
        "load", "workers", "started", "elapsed"
    );
    for r in &loads.reports {
        out.push_str(&row(r, width));
    }
    if !loads.phases.is_empty() {
        out.push_str(&format!(
            "\n{:>5}  {:<width$}  {:>9}  {:>9}\n",
            "phase", "load", "start", "end"
        ));
        for p in &loads.phases {
            out.push_str(&format!(
                "{:>5}  {:<width$}  {:>9}  {:>9}\n",
                p.index,
                p.spec,
                secs(p.start_ns),
                secs(p.end_ns)
            ));
        }
    }
    out
}

fn row(r: &LoadReport, width: usize) -> String {
    let head = format!(
        "{:<width$}  {:>7}  {:>9}  {:>9}  ",
        r.spec,
        r.workers,
        secs(r.started_ns),
        secs(r.elapsed_ns)
    );
    let pad = " ".repeat(head.chars().count());
    let mut lines: Vec<String> = r.throughput.iter().map(rate).collect();
    if lines.is_empty() {
        lines.push("-".into());
    }
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(if i == 0 { &head } else { &pad });
        out.push_str(l);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use latlab_model::load::LoadPhase;

    #[test]
    fn table_lists_each_rate_and_the_phases() {
        let loads = Loads {
            reports: vec![LoadReport {
                spec: "io:bs=4k".into(),
                kind: "io".into(),
                cpus: None,
                workers: 2,
                started_ns: 0,
                elapsed_ns: 1_500_000_000,
                throughput: vec![
                    Throughput {
                        what: "blocks written".into(),
                        unit: "IOPS".into(),
                        rate: 12_345.0,
                        total: 18_517.5,
                    },
                    Throughput {
                        what: "bytes written".into(),
                        unit: "MB/s".into(),
                        rate: 50.6,
                        total: 75.9,
                    },
                ],
                warnings: vec![],
                failed: None,
            }],
            phases: vec![LoadPhase {
                index: 0,
                spec: "idle".into(),
                start_ns: 0,
                end_ns: 300_000_000,
            }],
        };
        let t = table(&loads);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "load      workers    started    elapsed  throughput"
        );
        assert_eq!(
            lines[1],
            "io:bs=4k        2    0.000 s    1.500 s  12.3k IOPS (blocks written)"
        );
        assert_eq!(
            lines[2],
            "                                         50.6 MB/s (bytes written)"
        );
        assert_eq!(lines[4], "phase  load          start        end");
        assert_eq!(lines[5], "    0  idle        0.000 s    0.300 s");
    }
}
