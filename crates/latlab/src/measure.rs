//! `latlab measure`: option names a cyclictest user recognises, validated into a
//! [`MeasureConfig`] before anything runs; outputs written even when the run is interrupted.

use crate::args::{self, GateArgs, MeasureOpts, Ns, OutputFile as Output, usage};
use crate::cli_error::{CliError, CliResult};
use crate::live::LiveView;
use clap::Args;
use latlab_measure::StopSignal;
use latlab_model::units::CpuList;
use latlab_model::units::format_us;
use latlab_model::{Clock, DeadlineParams, MeasureConfig, Policy, RunResult, StopReason};
use latlab_session::{Measurement, load_error, option_load_error};
use latlab_sys::Sys;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(
    after_help = "Durations take a unit: ns, us, ms, s, m, h, d (e.g. 100us, 1.5ms, 30s). \
A bare number is microseconds for --interval, --break and the limits, seconds for --duration.\n\n\
Exit codes: 0 done within the limits, 1 a failure while measuring, 2 bad input (nothing was \
touched), 4 a limit (--max-latency, --max-p99, --max-missed) exceeded, 130 a signal stopped the \
run before the --duration or --loops asked (its results are written all the same; a run without \
either ends with 0 on Ctrl-C)."
)]
pub struct MeasureArgs {
    #[command(flatten)]
    pub opts: MeasureOpts,

    #[command(flatten)]
    pub gate: GateArgs,

    /// Period of each measuring thread (minimum 1us) [default: 1ms].
    #[arg(short = 'i', long, value_name = "DUR", value_parser = args::us)]
    interval: Option<Ns>,

    /// Length of the run (default: until Ctrl-C).
    #[arg(short = 'D', long, value_name = "DUR", value_parser = args::secs)]
    duration: Option<Ns>,

    /// Periods per thread, then stop.
    #[arg(short = 'l', long, value_name = "N")]
    loops: Option<u64>,

    /// N unpinned measuring threads instead of pinned ones.
    #[arg(short = 't', long, value_name = "N", conflicts_with = "cpus")]
    threads: Option<u32>,

    /// SCHED_DEADLINE runtime per period.
    #[arg(long, value_name = "DUR", value_parser = args::us)]
    dl_runtime: Option<Ns>,

    /// SCHED_DEADLINE period (default: the interval).
    #[arg(long, value_name = "DUR", value_parser = args::us)]
    dl_period: Option<Ns>,

    /// SCHED_DEADLINE relative deadline (default: the period).
    #[arg(long, value_name = "DUR", value_parser = args::us)]
    dl_deadline: Option<Ns>,

    /// Sleep relative to the last clock read instead of to an absolute deadline.
    #[arg(long)]
    relative: bool,

    /// CPU of the waker threads for thread wake-up methods (default: a CPU not measured).
    #[arg(long, value_name = "CPU")]
    pub(crate) waker_cpu: Option<u32>,

    /// Clock of deadlines and timestamps: monotonic or realtime.
    #[arg(long, default_value = "monotonic", value_name = "CLOCK")]
    clock: Clock,

    /// Timer slack of every measuring thread (bare number: ns).
    #[arg(long, default_value = "0", value_name = "DUR", value_parser = args::nanos)]
    timer_slack: Ns,

    /// Hold /dev/cpu_dma_latency at US microseconds for the run (default: leave PM QoS alone).
    #[arg(long, value_name = "US", value_parser = args::pm_qos_us)]
    pm_qos: Option<u32>,

    /// Length of each window of the time series [default: 1s, or the interval where longer].
    #[arg(long, value_name = "DUR", value_parser = args::with_unit)]
    window: Option<Ns>,

    /// With --spike: most spikes kept; further ones are counted [default: 10000].
    #[arg(long, value_name = "N")]
    spike_limit: Option<u32>,

    /// Stop when a sample exceeds DUR, and write a trace marker if tracefs is mounted.
    #[arg(short = 'b', long = "break", value_name = "DUR", value_parser = args::us)]
    brk: Option<Ns>,

    /// No opening line and no live view; at the end only the latency table (with the loads'
    /// throughput and, with --trace, the kernel's tables where asked for).
    #[arg(short = 'q', long)]
    quiet: bool,

    /// Write latlab's JSON result to FILE (- for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Run a load beside the measurement (repeatable): KIND[:OPTION=VALUE,...], e.g. matrix,
    /// memory:size=256M, io:bs=4k, rt-hog:threads=10 (`latlab load --list` shows all).
    #[arg(long = "load", value_name = "SPEC")]
    loads: Vec<String>,

    /// CPUs the loads run on (default: every online CPU).
    #[arg(long, value_name = "LIST")]
    load_cpus: Option<CpuList>,

    /// Phases of load over the run, e.g. "idle 30s, memory 30s, io 30s, procfs 30s".
    #[arg(long, value_name = "PHASES", conflicts_with = "loads")]
    load_schedule: Option<String>,

    /// Run rt-hog even with RT throttling disabled (the machine may stop responding).
    #[arg(long)]
    force: bool,

    /// Apply a tuning profile (name or file) for the run and restore it afterwards.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<String>,

    /// Also look for profiles in DIR (before /etc/latlab/profiles).
    #[arg(long, value_name = "DIR")]
    profile_dir: Option<PathBuf>,

    /// Where --profile journals its tuning (default /var/lib/latlab, or LATLAB_STATE_DIR).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// Do not run the samplers.
    #[arg(long)]
    no_samplers: bool,

    /// Save the result to the results store (default ./latlab.db, or LATLAB_DB).
    #[arg(long, value_name = "PATH", num_args = 0..=1)]
    db: Option<Option<PathBuf>>,

    /// Trace kernel events with eBPF beside the measurement (event groups as in `latlab trace
    /// --events`; default all). With --spike, each spike gets the kernel's story: what ran on
    /// its CPU between the deadline and the thread running.
    #[arg(long, value_name = "EVENTS", num_args = 0..=1, default_missing_value = "all")]
    trace: Option<String>,

    /// Write cyclictest's -h histogram text to FILE (mklatencyplot reads it unchanged).
    #[arg(long, value_name = "FILE")]
    histfile: Option<PathBuf>,

    /// Rows of 1 µs in --histfile [default: 400] (--cyclictest-json's histogram keeps every
    /// sample below 1 s, whatever this is).
    #[arg(long, value_name = "US")]
    histfile_range: Option<u32>,

    /// Write a file that readers of `cyclictest --json` read unchanged.
    #[arg(long, value_name = "FILE")]
    cyclictest_json: Option<PathBuf>,
}

impl MeasureArgs {
    /// Whether it holds a profile (and so first puts back one a killed process left).
    pub fn holds_profile(&self) -> bool {
        self.profile.is_some()
    }

    /// The state directory whose tuning, if a killed run left one, is in force while this
    /// measures: none with `--profile`, which puts it back first.
    pub fn unrestored_state_dir(&self, sys: &Sys) -> Option<PathBuf> {
        (!self.holds_profile()).then(|| self.state_dir(sys))
    }

    /// Turn the arguments into a configuration, checking what spans several options.
    pub fn to_config(&self, online: &CpuList) -> CliResult<MeasureConfig> {
        let o = &self.opts;
        o.check()?;
        let interval = self.interval();
        let window = self.window.unwrap_or(Ns(interval.0.max(1_000_000_000)));
        let mut cfg = o.config(online, interval, window);
        let interval_ns = interval.0;
        let deadline = match self.dl_runtime {
            Some(runtime) => {
                let period_ns = self.dl_period.map_or(interval_ns, |p| p.0);
                let deadline_ns = self.dl_deadline.map_or(period_ns, |d| d.0);
                Some(DeadlineParams {
                    runtime_ns: runtime.0,
                    deadline_ns,
                    period_ns,
                })
            }
            None if self.dl_period.is_some() || self.dl_deadline.is_some() => {
                return Err(CliError::Usage(
                    "--dl-period/--dl-deadline need --dl-runtime (accepted: e.g. \
                     --dl-runtime 100us --dl-period 1ms)"
                        .into(),
                ));
            }
            None => None,
        };
        // Deadline threads cannot be pinned: default to one unpinned thread per online CPU.
        let (cpus, threads) = match (&o.cpus, self.threads) {
            (Some(c), _) => {
                let list = c.resolve(online);
                let n = list.len();
                (Some(list), n)
            }
            (None, Some(n)) => (None, n as usize),
            (None, None) if o.policy == Policy::Deadline => (None, online.len()),
            (None, None) => (Some(online.cpus().to_vec()), online.len()),
        };
        cfg.cpus = cpus;
        cfg.threads = threads as u32;
        cfg.duration_ns = self.duration.map(|d| d.0);
        cfg.loops = self.loops;
        cfg.deadline = deadline;
        cfg.relative |= self.relative;
        cfg.clock = self.clock;
        cfg.timer_slack_ns = self.timer_slack.0;
        cfg.pm_qos_us = self.pm_qos;
        if let Some(limit) = self.spike_limit {
            cfg.spike_limit = limit;
        }
        cfg.break_threshold_ns = self.brk.map(|b| b.0);
        cfg.waker_cpu = self.waker_cpu;
        Ok(cfg)
    }
}

impl MeasureArgs {
    /// The arguments of each run of `latlab tune search`: its measuring options, interval,
    /// duration and loads, every other option at its default; quiet, without a store.
    pub fn for_search(
        opts: MeasureOpts,
        interval: Ns,
        duration: Ns,
        loads: Vec<String>,
    ) -> CliResult<MeasureArgs> {
        use clap::{Args as _, FromArgMatches as _};
        let cmd = MeasureArgs::augment_args(clap::Command::new("measure").no_binary_name(true));
        let matches = cmd
            .try_get_matches_from(Vec::<String>::new())
            .map_err(|e| CliError::Failed(anyhow::anyhow!("{e}")))?;
        let mut a = MeasureArgs::from_arg_matches(&matches)
            .map_err(|e| CliError::Failed(anyhow::anyhow!("{e}")))?;
        a.opts = opts;
        a.interval = Some(interval);
        a.duration = Some(duration);
        a.loads = loads;
        a.quiet = true;
        Ok(a)
    }

    /// Check everything (configuration, samplers, loads, profile) before anything is touched.
    /// Whether the options could make a measurement on some machine: a value [`prepare`]
    /// refuses that no machine accepts (a priority of 500, a window shorter than the interval)
    /// is bad input; what only this machine lacks is not (a plan's cell is then skipped).
    pub fn check_values(&self, sys: &Sys) -> CliResult<()> {
        // Every CPU a kernel can have.
        let any = CpuList::from_cpus((0..8192).collect());
        let cfg = self.to_config(&any)?;
        latlab_measure::validate(&cfg, &any).map_err(|e| CliError::Usage(e.to_string()))?;
        self.own_values()?;
        // A profile found nowhere is a name mistyped, not a setting this machine lacks.
        if let Some(name) = &self.profile {
            let dirs = args::profile_dirs(sys, self.profile_dir.as_slice())?;
            latlab_tune::Profiles::load(&dirs)
                .map_err(|e| CliError::Usage(format!("--profile: {e}")))?
                .resolve(name)
                .map_err(|e| CliError::Usage(format!("--profile {name}: {e}")))?;
        }
        Ok(())
    }

    /// The values checked apart from the measuring configuration: the samplers' period, the
    /// loads and their schedule (parsed), the histogram file's rows, the state directory.
    fn own_values(
        &self,
    ) -> CliResult<(
        u64,
        Vec<latlab_load::LoadSpec>,
        Option<latlab_load::Schedule>,
    )> {
        if self.histfile_range == Some(0) {
            return Err(CliError::Usage(
                "--histfile-range 0: no rows to write (accepted: 1 or more rows of 1 us)".into(),
            ));
        }
        // Only a profile held for the run writes a journal there.
        match &self.state_dir {
            Some(dir) => crate::tune::state_dir_usable(dir, self.profile.is_some())?,
            None => crate::tune::env_state_dir_usable(self.profile.is_some())?,
        }
        let sample_period = self.opts.sample_period_ns()?;
        // A refused spec is named by its option, as every other refusal of measure's.
        let loads = self
            .loads
            .iter()
            .map(|l| latlab_load::LoadSpec::parse(l).map_err(|e| (l, e)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|(l, e)| option_load_error("--load", l, e))?;
        let schedule = self
            .load_schedule
            .as_deref()
            .map(|s| latlab_load::parse_schedule_named("--load-schedule", s))
            .transpose()
            .map_err(load_error)?;
        if let (Some(s), Some(Ns(d))) = (&schedule, self.duration) {
            args::schedule_within("--load-schedule", s, d)?;
        }
        Ok((sample_period, loads, schedule))
    }

    /// Where the tuning journal lives: `--state-dir`, else the default (or LATLAB_STATE_DIR).
    fn state_dir(&self, sys: &Sys) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| latlab_tune::default_state_dir(sys))
    }

    /// The period asked, or the default (1ms).
    fn interval(&self) -> Ns {
        self.interval.unwrap_or(Ns(1_000_000))
    }

    /// The rows of `--histfile`.
    fn histfile_range(&self) -> u32 {
        self.histfile_range.unwrap_or(400)
    }

    /// An option given on the command line that does nothing without another: refused, as a
    /// sign the other was forgotten (not in a plan, whose settings serve cells with and without
    /// loads or spikes alike). `--histfile-range` alone is taken: the command line of an
    /// exported cyclictest JSON carries its histogram's range so.
    fn idle_option(&self) -> CliResult<()> {
        let no_load = self.loads.is_empty() && self.load_schedule.is_none();
        let hog = args::names_rt_hog(&self.loads, self.load_schedule.as_ref());
        let idle = [
            (
                self.load_cpus.is_some() && no_load,
                "--load-cpus: no load to place on them",
                "with --load or --load-schedule",
            ),
            (
                self.force && !hog,
                "--force: no rt-hog load to force",
                "with an rt-hog --load",
            ),
            (
                self.profile_dir.is_some() && self.profile.is_none(),
                "--profile-dir: no --profile to look for in it",
                "with --profile NAME",
            ),
            (
                self.interval.is_some() && self.opts.method == latlab_model::Method::Busy,
                "--interval: the busy method spins without a period (every gap is a sample)",
                "--interval with a waiting method, e.g. -m clock-nanosleep",
            ),
            (
                self.spike_limit.is_some() && self.opts.spike.is_none(),
                "--spike-limit: no spikes are kept without --spike",
                "with --spike DUR, e.g. --spike 100us",
            ),
            (
                self.opts.sample_period.is_some() && self.no_samplers,
                "--sample-period: no samplers run with --no-samplers",
                "one of the two",
            ),
        ];
        match idle.into_iter().find(|(given, ..)| *given) {
            Some((_, problem, accepted)) => {
                Err(CliError::Usage(format!("{problem} (accepted: {accepted})")))
            }
            None => Ok(()),
        }
    }

    pub fn prepare(&self, sys: &Sys) -> CliResult<Measurement> {
        let online = args::usable_cpus(sys)?;
        let mut cfg = self.to_config(&online)?;
        args::within_affinity(sys, &cfg, &online)?;
        let (sample_period, loads, schedule) = self.own_values()?;
        // A schedule without a length lasts as long as its phases, as `latlab load --schedule`
        // does (it ran until stopped, its last phase's load long gone).
        if let Some(s) = &schedule
            && cfg.duration_ns.is_none()
            && cfg.loops.is_none()
        {
            cfg.duration_ns = Some(s.total_ns());
        }
        latlab_measure::validate(&cfg, &online).map_err(|e| CliError::Usage(e.to_string()))?;
        let load_options = latlab_load::LoadOptions {
            cpus: self.load_cpus.clone(),
            force: self.force,
            sys: sys.clone(),
        };
        match &schedule {
            Some(s) => latlab_load::LoadSet::check(&s.specs(), &load_options),
            None if !loads.is_empty() => latlab_load::LoadSet::check(&loads, &load_options),
            None => Ok(()),
        }
        .map_err(load_error)?;
        let specs = schedule
            .as_ref()
            .map_or_else(|| loads.clone(), |s| s.specs());
        let flag = if schedule.is_some() {
            "--load-schedule phase"
        } else {
            "--load"
        };
        outranked(&cfg, &online, (flag, &specs), self.load_cpus.as_ref())?;
        let profile = match &self.profile {
            None => None,
            Some(name) => {
                let dirs = args::profile_dirs(sys, self.profile_dir.as_slice())?;
                let profiles = latlab_tune::Profiles::load(&dirs)
                    .map_err(|e| CliError::Usage(format!("--profile: {e}")))?;
                let profile = profiles
                    .resolve(name)
                    .map_err(|e| CliError::Usage(format!("--profile {name}: {e}")))?;
                // rt-hog checks RT throttling before the profile is applied: one that turns it
                // off would have the load refuse to start only once the run begins.
                let hog = specs.iter().find(|s| s.kind() == "rt-hog");
                let off = profile.system.sched_rt_runtime_us.as_ref().map(|v| v.value);
                if let (Some(hog), Some(runtime), false) = (hog, off, self.force)
                    && runtime < 0
                {
                    return Err(CliError::Failed(anyhow::anyhow!(
                        "--profile {name} turns RT throttling off (sched_rt_runtime_us = \
                         {runtime}), beside which {flag} {hog} does not start: busy real-time \
                         threads could starve everything else (a profile that keeps RT \
                         throttling, or --force)"
                    )));
                }
                let measured = cfg.cpus.as_ref().map(|c| CpuList::from_cpus(c.clone()));
                let plan =
                    latlab_tune::Plan::build(sys, &profile, measured.as_ref()).map_err(|e| {
                        // A profile that does not fit this machine is bad input, as for `tune`.
                        if e.is_usage() {
                            CliError::Usage(format!("--profile {name}: {e}"))
                        } else {
                            CliError::Failed(anyhow::anyhow!("--profile {name}: {e}"))
                        }
                    })?;
                // A profile none of whose settings exist here cannot make the run it names.
                latlab_tune::nothing_applies(&profile, &plan)
                    .map_err(|e| CliError::Failed(anyhow::anyhow!(e)))?;
                let state_dir = self.state_dir(sys);
                // A tuning `tune apply` or a running latlab put in force: said now, not after
                // "measuring" (one a killed process left is put back first).
                if let Ok(st) = latlab_tune::status(sys, &state_dir)
                    && !st.stale
                    && let Some(e) = st.in_force(sys, &state_dir)
                {
                    return Err(CliError::Failed(anyhow::anyhow!("--profile {name}: {e}")));
                }
                Some((profile, state_dir))
            }
        };
        let trace = match &self.trace {
            None => None,
            Some(events) => {
                let groups =
                    latlab_trace::EventGroup::parse_list(events).map_err(usage("--trace"))?;
                latlab_trace::env::privileged()
                    .map_err(|e| CliError::Failed(anyhow::anyhow!("--trace: {e}")))?;
                Some(latlab_trace::TraceConfig {
                    groups,
                    cpus: cfg.cpus.clone(),
                    ..Default::default()
                })
            }
        };
        Ok(Measurement {
            trace,
            cfg,
            online,
            sample_period_ns: (!self.no_samplers).then_some(sample_period),
            profile,
            loads,
            schedule,
            load_options,
        })
    }
}

/// Refuse loads that keep a measuring thread, or its waker, from ever running: an rt-hog on
/// every CPU it may run on, above its priority or at it under fifo. It waited for its turn without end, past
/// --duration and the first Ctrl-C (RT throttling holds every real-time thread alike).
fn outranked(
    cfg: &latlab_model::MeasureConfig,
    online: &CpuList,
    (flag, specs): (&str, &[latlab_load::LoadSpec]),
    load_cpus: Option<&CpuList>,
) -> CliResult<()> {
    if !cfg.policy.is_realtime() {
        return Ok(());
    }
    let load_cpus = load_cpus.unwrap_or(online).cpus().to_vec();
    let busy = latlab_load::busy_realtime(specs, &load_cpus);
    for (label, cpus, waker) in latlab_measure::placement(cfg, online) {
        for (whose, on) in [
            (label.clone(), &cpus),
            (format!("the waker of {label}"), &waker),
        ] {
            let Some(hog) = busy.iter().find(|b| b.starves(cfg.priority, on)) else {
                continue;
            };
            let (spec, priority) = (hog.spec, hog.priority);
            let how = if priority == cfg.priority {
                format!("at priority {priority} under fifo, which never yields to its equal,")
            } else {
                format!("at priority {priority}")
            };
            return Err(CliError::Usage(format!(
                "{flag} {spec}: its threads {how} keep CPU {} busy, where {whose} would run at \
                 {} {}, and it would never run (accepted: --priority above {priority}, a lower \
                 priority= for the load, policy=rr at the same priority, or --load-cpus apart \
                 from the measured CPUs)",
                CpuList::from_cpus(on.clone()),
                cfg.policy.name(),
                cfg.priority
            )));
        }
    }
    Ok(())
}

pub fn run(args: MeasureArgs, sys: &Sys) -> CliResult<ExitCode> {
    // The outputs first: none may be written over another, the store or the profile, and a
    // failure below writes the gate's JUnit.
    let limits = args.gate.limits()?;
    // A gate measures a fixed length: without one it runs until stopped, and the signal that
    // stops it is its normal end, so a CI timeout or an evicted pod would read as a pass.
    if !limits.is_empty() && args.duration.is_none() && args.loops.is_none() {
        return Err(CliError::Usage(
            "a limit (--max-latency, --max-p99, --max-missed) needs a length to measure: without \
             --duration or --loops the run ends only when stopped, and would pass however short \
             (accepted: a limit with -D, e.g. -D 5m, or --loops N)"
                .into(),
        ));
    }
    args.idle_option()?;
    let json = Output::open("--json", &args.json)?;
    let junit = Output::open("--junit", &args.gate.junit)?;
    let histfile = Output::open("--histfile", &args.histfile)?;
    let ctjson = Output::open("--cyclictest-json", &args.cyclictest_json)?;
    let db_path = args
        .db
        .as_ref()
        .map(|db| latlab_store::resolve_path(db.as_deref()));
    let mut uses = db_path
        .as_deref()
        .map(args::store_files)
        .unwrap_or_default();
    if let Some(p) = args.profile.as_deref().map(std::path::Path::new)
        && p.is_file()
    {
        uses.push(("--profile", p.to_path_buf()));
    }
    let uses: Vec<(&str, &std::path::Path)> = uses.iter().map(|(f, p)| (*f, p.as_path())).collect();
    Output::refuse_clashes(&[&json, &junit, &histfile, &ctjson], &uses)?;
    // Stdout taken by a file format: nothing else is written there (a reader takes it whole).
    let stdout_taken = [&json, &junit]
        .iter()
        .any(|o| o.as_ref().is_some_and(Output::is_stdout));
    // What stops the run before it measures also reaches the gate's reader: a JUnit file left
    // from an earlier run would say it passed (a CPU absent on this node, a store it cannot open).
    let prepared = args.prepare(sys).and_then(|p| {
        // A policy this process may not use is said before a measurement is announced.
        latlab_measure::policy_allowed(&p.cfg).map_err(latlab_session::Error::from)?;
        // A store that cannot be opened fails now, not after the measurement.
        if let Some(db) = &db_path {
            crate::args::open_store(db)?;
        }
        Ok(p)
    });
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            junit_error(junit, &e.to_string());
            return Err(e);
        }
    };
    if let Some(o) = &junit {
        o.write_provisional(&latlab_report::junit::render(&[
            latlab_report::junit::measure_error_suite(latlab_report::junit::UNFINISHED),
        ]));
    }

    // A tuning a crashed run left in force is in what this measures (`--profile` puts it back
    // first): said in the result, not only on stderr.
    let left_in_force = args
        .unrestored_state_dir(sys)
        .and_then(|dir| crate::tune::left_in_force(sys, &dir));
    let stop = StopSignal::new();
    crate::signals::install(stop.clone());
    let live_allowed = !args.quiet && !stdout_taken && std::io::stdout().is_terminal();
    if !args.quiet {
        eprintln!("{}", describe(&prepared.cfg));
    }
    let mut view = LiveView::new();
    let mut result = match prepared.run(sys, stop, &mut |live| {
        if live_allowed {
            view.draw(live);
        }
    }) {
        Ok(r) => r,
        Err(e) => {
            // A gate's reader sees the failure, not a missing file.
            junit_error(junit, &e.to_string());
            return Err(e.into());
        }
    };

    result.environment.warnings.extend(left_in_force);
    // Every output and the store are tried, whichever fails: what was measured reaches all that
    // take it, and each that does not is said.
    let mut failures = write_outputs(&result, &args, &limits, json, histfile, ctjson);
    if let Some(db) = &args.db {
        match crate::db::save_measured(db.as_deref(), &result) {
            Ok(saved) => eprintln!("latlab: {saved}"),
            Err(e) => failures.push(e),
        }
    }
    // The tables go to stdout, or to stderr where a file format takes stdout (a CI log still
    // shows the numbers beside the XML or JSON a reader takes whole).
    let mut tables = if args.quiet {
        latlab_report::latency_table(&result)
    } else {
        latlab_report::summary_table(&result)
    };
    if let Some(t) = &result.trace {
        tables.push_str(&format!("\n{}", crate::trace::render_brief(t)));
        tables.push_str(&story_lines(&result, STORIES_SHOWN));
    }
    if stdout_taken {
        eprint!("{tables}");
    } else {
        print!("{tables}");
    }
    // --quiet keeps the table alone, not what explains it (another process's real-time threads
    // above the measuring ones, a load that ended early): those go to stderr.
    if args.quiet {
        for w in result.warnings() {
            eprintln!("latlab: warning: {w}");
        }
    }
    // A load that failed left the run measuring without it, as `latlab load` fails then too.
    if let Some(failed) = result.loads.failed_line() {
        failures.push(CliError::Failed(anyhow::anyhow!(
            "a load failed: {failed}; what was measured is written"
        )));
    }
    if let StopReason::Break { thread, value_ns } = &result.stop {
        let also: String = result
            .also_over_break()
            .iter()
            .map(|(l, ns)| format!("; {l} saw {} us before the stop", format_us(*ns, 1)))
            .collect();
        eprintln!(
            "latlab: break: {} saw {} us{also}",
            result.threads[*thread as usize].label,
            format_us(*value_ns, 1)
        );
    }
    let breaches = limits.check(&result);
    if let Some(o) = junit {
        let suite = latlab_report::junit::measure_suite(&result, &limits);
        if let Err(e) = o.write(&latlab_report::junit::render(&[suite])) {
            failures.push(e.into());
        }
    }
    let cut_short = result.cut_short();
    if let Some(why) = &cut_short {
        eprintln!("latlab: the run is incomplete: {why}; its results are written");
    }
    match failures.pop() {
        // A limit's exit code wins over the signal's.
        None if breaches.is_empty() && cut_short.is_some() => Ok(ExitCode::from(130)),
        None => Ok(args::gate_exit(&breaches)),
        Some(last) => {
            for e in failures {
                eprintln!("latlab: error: {e}");
            }
            Err(last)
        }
    }
}

/// The JUnit of a measure that could not measure, where one was asked for: one case in error.
fn junit_error(junit: Option<Output>, message: &str) {
    if let Some(o) = junit.filter(Output::takes_error_report) {
        let suite = latlab_report::junit::measure_error_suite(message);
        if let Err(w) = o.write(&latlab_report::junit::render(&[suite])) {
            eprintln!("latlab: error: {w}");
        }
    }
}

/// Stories printed after a traced run (the largest spikes); all are in the JSON and the store.
const STORIES_SHOWN: usize = 10;

/// The stories of the `n` largest spikes, one line each.
fn story_lines(result: &RunResult, n: usize) -> String {
    let mut told: Vec<&latlab_model::Spike> = result
        .spikes
        .kept
        .iter()
        .filter(|s| s.story.is_some())
        .collect();
    if told.is_empty() {
        return String::new();
    }
    told.sort_by(|a, b| b.value_ns.cmp(&a.value_ns).then(a.at_ns.cmp(&b.at_ns)));
    let mut out = format!(
        "\nspike stories ({} of {} told{}):\n",
        told.len(),
        result.spikes.kept.len(),
        if told.len() > n {
            format!(", {n} largest shown")
        } else {
            String::new()
        }
    );
    for s in told.into_iter().take(n) {
        if let Some(story) = &s.story {
            out.push_str(&format!(
                "  +{:.3}s {}us  {}\n",
                s.at_ns as f64 / 1e9,
                format_us(s.value_ns, 1),
                story.summary()
            ));
        }
    }
    out
}

fn write_outputs(
    result: &RunResult,
    args: &MeasureArgs,
    limits: &latlab_report::gate::Limits,
    json: Option<Output>,
    histfile: Option<Output>,
    ctjson: Option<Output>,
) -> Vec<CliError> {
    /// The result with a gate's verdict beside its own fields (added after them).
    #[derive(serde::Serialize)]
    struct Gated<'a> {
        #[serde(flatten)]
        run: &'a RunResult,
        gate: serde_json::Value,
    }
    let json_text = || {
        let mut text = if limits.is_empty() {
            result.to_json_pretty()
        } else {
            let gated = Gated {
                run: result,
                gate: limits.json(result),
            };
            // Plain data: serializing it cannot fail.
            serde_json::to_string_pretty(&gated).unwrap_or_default()
        };
        text.push('\n');
        text
    };
    let outputs = [
        json.map(|o| (o, json_text())),
        histfile.map(|o| (o, latlab_report::histfile(result, args.histfile_range()))),
        ctjson.map(|o| {
            let range = args.histfile_range().max(latlab_report::HIST_MAX_US);
            (o, latlab_report::cyclictest_json_with_range(result, range))
        }),
    ];
    outputs
        .into_iter()
        .flatten()
        .filter_map(|(o, text)| o.write(&text).err().map(CliError::from))
        .collect()
}

fn describe(cfg: &MeasureConfig) -> String {
    use latlab_model::units::format_duration;
    let place = match &cfg.cpus {
        Some(c) => CpuList::from_cpus(c.clone()).named(),
        None => format!("{} unpinned threads", cfg.threads),
    };
    let length = cfg
        .length_text()
        .map_or_else(|| "until Ctrl-C".into(), |l| format!("for {l}"));
    let how = if cfg.method == latlab_model::Method::Busy {
        "busy (the clock read in a loop)".to_string()
    } else {
        format!(
            "{} every {}",
            cfg.method.name(),
            format_duration(cfg.interval_ns)
        )
    };
    format!(
        "latlab: measuring {how} on {place}, {}, {length}",
        cfg.policy_text()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use latlab_model::Method;

    fn cfg(args: &[&str]) -> CliResult<MeasureConfig> {
        crate::cli_error::parse_args::<MeasureArgs>(args)?
            .to_config(&CpuList::parse("0-3").unwrap())
    }

    /// The busy method has no interval: its opening line, its summary and its tables do not
    /// give the default 1ms as one.
    #[test]
    fn the_busy_method_is_not_said_to_have_an_interval() {
        let busy = cfg(&["-m", "busy", "-a", "0"]).unwrap();
        let line = describe(&busy);
        assert!(
            line.starts_with("latlab: measuring busy (the clock read in a loop) on CPU 0"),
            "{line}"
        );
        assert!(!line.contains("every"), "{line}");
        assert_eq!(busy.interval_text(), "-");
        let timer = cfg(&["-a", "0"]).unwrap();
        assert!(describe(&timer).contains("clock-nanosleep every 1ms"));
        assert_eq!(timer.interval_text(), "1ms");
    }

    #[test]
    fn story_lines_give_microseconds_as_every_table_rounds_them() {
        use latlab_model::trace::{SpikeStory, StoryTotals};
        let mut r = latlab_testkit::run::result(
            "r",
            (1, 1),
            MeasureConfig::default(),
            Default::default(),
            vec![],
        );
        r.spikes.kept.push(latlab_model::Spike {
            thread: 0,
            cpu: Some(0),
            at_ns: 2_000_000_000,
            // 1.15 µs: half up, as format_us rounds (an f64's 1.15 would print 1.1).
            value_ns: 1_150,
            story: Some(SpikeStory {
                cpu: 0,
                from_ns: 0,
                to_ns: 1_150,
                complete: true,
                events: vec![],
                totals: StoryTotals::default(),
                tasks: vec![],
                measuring_tid: None,
            }),
        });
        let text = story_lines(&r, 10);
        assert!(text.contains("  +2.000s 1.2us  "), "{text}");
    }

    #[test]
    fn defaults_match_the_documentation() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.interval_ns, 1_000_000);
        assert_eq!(c.cpus, Some(vec![0, 1, 2, 3]));
        assert_eq!((c.policy, c.priority), (Policy::Fifo, 95));
        assert_eq!(c.method, Method::ClockNanosleep);
        assert!(!c.relative && c.mlock);
        assert_eq!(c.pm_qos_us, None);
        assert_eq!(c.window_ns, 1_000_000_000);
        assert_eq!(c.duration_ns, None);
        // An interval longer than the default window takes a window of one interval.
        assert_eq!(cfg(&["-i", "2s"]).unwrap().window_ns, 2_000_000_000);
    }

    #[test]
    fn cyclictest_style_bare_numbers() {
        let c = cfg(&["-i", "200", "-D", "30", "-b", "150"]).unwrap();
        assert_eq!(c.interval_ns, 200_000);
        assert_eq!(c.duration_ns, Some(30_000_000_000));
        assert_eq!(c.break_threshold_ns, Some(150_000));
    }

    #[test]
    fn deadline_defaults_and_unpinned_threads() {
        let c = cfg(&["--policy", "deadline", "--dl-runtime", "100us"]).unwrap();
        assert_eq!(c.cpus, None);
        assert_eq!(c.threads, 4);
        let dl = c.deadline.unwrap();
        assert_eq!(
            (dl.runtime_ns, dl.deadline_ns, dl.period_ns),
            (100_000, 1_000_000, 1_000_000)
        );
        assert_eq!(c.priority, 0);
        assert!(cfg(&["--dl-period", "1ms"]).is_err());
    }
}
