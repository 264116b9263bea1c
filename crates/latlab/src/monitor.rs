//! `latlab monitor`: a long-term latency watch. Measures continuously on chosen CPUs with the
//! samplers running, stores one window per CPU every `--window` (histogram, count, min, max,
//! p99, p99.9, missed, idle residency, frequency, interrupts, power, latlab's own CPU time) in
//! one transaction each, keeps old windows as exact hourly merges, optionally holds a tuning
//! profile and follows a governor schedule, and serves a dashboard and `/metrics`.
//!
//! `latlab serve --db` serves the same pages and metrics for a store alone.

use crate::args::{self, Listen, MeasureOpts, Ns};
use crate::cli_error::{CliError, CliResult};
use clap::Args;
use latlab_measure::StopSignal;
use latlab_model::units::format_duration;
use latlab_model::{MeasureConfig, Method};
use latlab_monitor::schedule::{self, Schedule};
use latlab_monitor::{MonitorPlan, check_config_text, store_state};
use latlab_sys::Sys;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;

#[derive(Args, Debug)]
#[command(
    after_help = "Durations take a unit: ns, us, ms, s, m, h, d (e.g. 200us, 5m, 90d). A bare \
number is microseconds for --interval and --spike.\n\n\
The store keeps one series per --name: a daemon restarted with the same name continues it. \
SIGTERM or Ctrl-C stores the open window, puts back --profile and --schedule settings and exits."
)]
pub struct MonitorArgs {
    #[command(flatten)]
    opts: MeasureOpts,

    /// Period of each measuring thread (minimum 1us).
    #[arg(short = 'i', long, default_value = "200us", value_name = "DUR", value_parser = args::us)]
    interval: Ns,

    /// Length of each stored window (OSADL's 5-minute worst case by default).
    #[arg(long, default_value = "5m", value_name = "DUR", value_parser = args::with_unit)]
    window: Ns,

    /// The results store (default: $LATLAB_DB, else ./latlab.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,

    /// Name of the series (default: the host name); a restart with the same name continues it.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Windows older than this are merged into hourly rows (histograms merge exactly); 1h or
    /// more, a bare number is days.
    #[arg(long, default_value = "90d", value_name = "DUR", value_parser = args::days)]
    retention: Ns,

    /// Apply this tuning profile while monitoring and restore it on exit.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<String>,

    /// Switch cpufreq governors at local times of day, e.g.
    /// "05:05 cpu2:performance; 17:05 cpu2:restore"; each switch is an annotation.
    #[arg(long, value_name = "SCHEDULE")]
    schedule: Option<String>,

    /// Address of the dashboard and /metrics ("off": no web server).
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    listen: Listen,

    #[command(flatten)]
    web: crate::args::WebArgs,

    /// Check every option, print what would be done, and exit without touching anything.
    #[arg(long)]
    check_config: bool,

    /// (Tests) While the store cannot be written, the bytes of windows kept in memory beyond
    /// the last SECONDS; older ones go to files.
    #[arg(long, hide = true, value_name = "BYTES,SECONDS", value_parser = backlog_bound)]
    backlog_bound: Option<(usize, u64)>,
}

/// `BYTES,SECONDS` of `--backlog-bound`.
fn backlog_bound(s: &str) -> Result<(usize, u64), String> {
    s.split_once(',')
        .and_then(|(b, t)| Some((b.parse().ok()?, t.parse().ok()?)))
        .ok_or_else(|| "expected BYTES,SECONDS, two whole numbers".to_string())
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The results store to serve (default: $LATLAB_DB, else ./latlab.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,

    /// Address of the dashboard and /metrics.
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    listen: Listen,

    #[command(flatten)]
    web: crate::args::WebArgs,
}

/// Write a synthetic monitoring series into a store, as the daemon would write a real one (for
/// measuring the store, the dashboard and /metrics at sizes no test machine has).
#[derive(Args, Debug)]
pub struct FillArgs {
    /// The store to write into (made if missing).
    #[arg(long, value_name = "PATH")]
    db: PathBuf,
    /// Name of the series (it must not exist yet).
    #[arg(long, default_value = "synthetic")]
    name: String,
    /// How many CPUs.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    cpus: u32,
    /// Length of each window.
    #[arg(long, default_value = "5m", value_parser = crate::args::with_unit)]
    window: Ns,
    /// The time the series covers, ending now.
    #[arg(long, default_value = "30d", value_parser = crate::args::days)]
    span: Ns,
    /// The measuring interval the windows stand for (their sample count).
    #[arg(long, default_value = "200us", value_parser = crate::args::us)]
    interval: Ns,
    /// Windows older than this are merged into hourly rows, as the daemon merges them.
    #[arg(long, default_value = "90d", value_parser = crate::args::days)]
    retention: Ns,
    /// Seed of the invented values (the same arguments give the same windows).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every window first, then run the daemon's retention steps until none is left (as
    /// after a long stop), timing each: e.g. `--span 2d --retention 1d` times a day's merge.
    #[arg(long)]
    retention_at_end: bool,
    /// Go on with a series an earlier fill-monitor left unfinished (give the same arguments).
    #[arg(long)]
    resume: bool,
}

/// `latlab fill-monitor`: a synthetic series, said to be one in its configuration and its first
/// annotation.
pub fn fill(args: FillArgs, sys: &Sys) -> CliResult<ExitCode> {
    if args.window.0 < 1_000_000_000 || args.span.0 < args.window.0 {
        return Err(CliError::Usage(format!(
            "--window {} --span {}: a window of 1s or more within the span (accepted: e.g. \
             --window 5m --span 30d)",
            format_duration(args.window.0),
            format_duration(args.span.0)
        )));
    }
    let mut store = crate::args::open_store(&args.db)?;
    let spec = latlab_monitor::synthetic::Synthetic {
        name: args.name,
        cpus: args.cpus,
        window_ns: args.window.0,
        span_ns: args.span.0,
        end_unix_ns: None,
        interval_ns: args.interval.0,
        retention_ns: args.retention.0,
        seed: args.seed,
        retention_at_end: args.retention_at_end,
        resume: args.resume,
    };
    let started = std::time::Instant::now();
    // Progress redrawn in place on a terminal; a log gets the summary alone.
    let terminal = std::io::stderr().is_terminal();
    let w = latlab_monitor::synthetic::fill(&mut store, &spec, sys.system_info(), &mut |k, n| {
        if terminal {
            eprint!("\rlatlab: {k} of {n} window sets");
        }
    })
    .map_err(|e| CliError::Failed(anyhow::anyhow!("{}: {e}", args.db.display())))?;
    eprintln!(
        "{}latlab: {} window sets of {} CPUs written, {} hours merged, {} CPU-windows coarsened, \
         in {:.1} s; retention: {} steps, {:.3} s in all, the longest {:.3} s",
        if terminal { "\r" } else { "" },
        w.sets,
        spec.cpus,
        w.merged_hours,
        w.coarsened,
        started.elapsed().as_secs_f64(),
        w.retention_steps,
        w.retention_time.as_secs_f64(),
        w.longest_step.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

impl MonitorArgs {
    /// Whether it holds a profile (and so first puts back one a killed process left).
    pub fn holds_profile(&self) -> bool {
        self.profile.is_some()
    }
}

fn prepare(args: &MonitorArgs, sys: &Sys) -> CliResult<MonitorPlan> {
    let online = args::usable_cpus(sys)?;
    let (window_ns, retention_ns) = (args.window.0, args.retention.0);
    if window_ns < 1_000_000_000 {
        return Err(CliError::Usage(format!(
            "--window {}: too short (accepted: 1s or more, e.g. 5m)",
            format_duration(window_ns)
        )));
    }
    if retention_ns < 3_600_000_000_000 {
        return Err(CliError::Usage(format!(
            "--retention {}: too short (accepted: 1h or more, e.g. 90d)",
            format_duration(retention_ns)
        )));
    }
    if retention_ns < window_ns {
        return Err(CliError::Usage(format!(
            "--retention {}: shorter than --window {} (accepted: a retention of at least one \
             window, e.g. 90d)",
            format_duration(retention_ns),
            format_duration(window_ns)
        )));
    }
    if args.opts.method == Method::Busy {
        return Err(CliError::Usage(
            "--method busy spins without end and is not for monitoring (accepted: a waiting \
             method, e.g. clock-nanosleep)"
                .into(),
        ));
    }
    args.opts.no_deadline("monitor")?;
    args.opts.check()?;
    let sample_period = args.opts.sample_period_ns()?;
    // Built like `latlab measure`'s, with no end. Spikes go out with their windows (at most
    // 1024 per window and CPU), so the run's own spike limit does not bound them.
    let cfg = args.opts.config(&online, args.interval, args.window);
    crate::args::within_affinity(sys, &cfg, &online)?;
    latlab_measure::validate(&cfg, &online).map_err(|e| CliError::Usage(e.to_string()))?;
    let listen = args.listen.0;
    let web_config = args.web.resolve(listen)?;
    let name = match &args.name {
        Some(n) if n.trim().is_empty() || n.len() > 200 || n.chars().any(char::is_control) => {
            let why = if n.trim().is_empty() {
                "empty or blank"
            } else if n.len() > 200 {
                "longer than 200 characters"
            } else {
                "with a control character such as a line break"
            };
            return Err(CliError::Usage(format!(
                "--name {n:?}: {why} (accepted: a short name on one line)"
            )));
        }
        // The API names a series by id or name: a name of digits would read as an id.
        Some(n) if n.chars().all(|c| c.is_ascii_digit()) => {
            return Err(CliError::Usage(format!(
                "--name {n}: a name of digits alone reads as a series id where the dashboard and \
                 its API name a series (accepted: a name with a letter or sign, e.g. node-{n})"
            )));
        }
        Some(n) => n.clone(),
        None => sys
            .hostname()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "monitor".into()),
    };
    let db = latlab_store::resolve_path(args.db.as_deref());
    // Where a store cannot be, said as every command that writes one says it.
    crate::args::check_store_path(&db)?;
    let store_state = store_state(&db).map_err(|e| {
        CliError::Usage(format!(
            "--db {e} (accepted: a latlab store or a new file this user can write)"
        ))
    })?;
    same_series(&db, &name, &cfg)?;
    // A profile or schedule journals its tuning there.
    if args.profile.is_some() || args.schedule.is_some() {
        crate::tune::env_state_dir_usable(true)?;
    }
    let state_dir = latlab_tune::default_state_dir(sys);
    let profile = match &args.profile {
        None => None,
        Some(name) => {
            let profiles = latlab_tune::Profiles::load(&latlab_tune::Profiles::default_dirs(sys))
                .map_err(|e| CliError::Usage(format!("--profile: {e}")))?;
            let p = profiles
                .resolve(name)
                .map_err(|e| CliError::Usage(format!("--profile: {e}")))?;
            let plan = latlab_tune::Plan::build(sys, &p, None).map_err(|e| {
                if e.is_usage() {
                    CliError::Usage(format!("--profile {name}: {e}"))
                } else {
                    CliError::Failed(anyhow::anyhow!("--profile {name}: {e}"))
                }
            })?;
            Some((p, plan))
        }
    };
    let mut schedule_checks = Vec::new();
    let schedule = match &args.schedule {
        None => None,
        Some(text) => {
            let s = Schedule::parse(text).map_err(CliError::Usage)?;
            for e in &s.entries {
                if !online.contains(e.cpu) {
                    return Err(CliError::Usage(format!(
                        "--schedule: CPU {} is absent or offline (accepted: online CPUs {online})",
                        e.cpu
                    )));
                }
                if let schedule::Action::Governor(g) = &e.action {
                    let line = schedule::check_governor(sys, e.cpu, g)
                        .map_err(|m| CliError::Usage(format!("--schedule: {m}")))?;
                    schedule_checks.push(format!("{} {line}", e.time_text()));
                } else {
                    schedule_checks.push(format!(
                        "{} cpu{}: put back what the schedule changed",
                        e.time_text(),
                        e.cpu
                    ));
                }
            }
            Some(s)
        }
    };
    Ok(MonitorPlan {
        sample_period_ns: sample_period.min(window_ns / 5),
        cfg,
        db,
        name,
        retention_ns,
        listen,
        web_config,
        profile,
        schedule,
        schedule_checks,
        online,
        state_dir,
        store_state,
        backlog: match args.backlog_bound {
            Some((bytes, secs)) => (secs.saturating_mul(1_000_000_000), bytes),
            None => (
                latlab_monitor::backlog::KEEP_AT_LEAST_NS,
                latlab_monitor::backlog::MEMORY_BOUND,
            ),
        },
    })
}

/// A series continues as it was measured: with its window length, interval, method, clock and
/// scheduling. Its windows, its report and its Prometheus series would otherwise mix two kinds
/// of numbers under one name. (The CPUs may differ: a machine's CPUs change, and every CPU has
/// rows of its own; a profile or schedule is a change the series is there to show.)
fn same_series(db: &std::path::Path, name: &str, cfg: &MeasureConfig) -> CliResult<()> {
    if !db.exists() {
        return Ok(());
    }
    // Read only: `--check-config` touches nothing, and a store to migrate is the daemon's.
    let Ok(Some(stored)) = latlab_store::stored_series(db, name) else {
        // Whatever is wrong with the file is said where the daemon opens it.
        return Ok(());
    };
    if stored.windows == 0 {
        return Ok(());
    }
    if stored.window_ns != cfg.window_ns {
        return Err(CliError::Usage(format!(
            "--window {}: series {name:?} in {} holds {} windows of {} (accepted: --window {} \
             to continue it, or another --name for a new series)",
            format_duration(cfg.window_ns),
            db.display(),
            stored.windows,
            format_duration(stored.window_ns),
            format_duration(stored.window_ns)
        )));
    }
    let Some(was) = stored.measure else {
        return Ok(());
    };
    let differ = measured_otherwise(&was, cfg);
    if differ.is_empty() {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "series {name:?} in {} was measured with {} (accepted: those options to continue it, \
         or another --name for a new series)",
        db.display(),
        differ.join(", ")
    )))
}

/// The measuring options of `now` that differ from `was`, as `--interval 200us (not 1ms)`, in
/// the forms `monitor` takes. (Whether sleeps are relative follows from the method here.)
fn measured_otherwise(was: &MeasureConfig, now: &MeasureConfig) -> Vec<String> {
    let both = |f: fn(&MeasureConfig) -> String| (f(was), f(now));
    let mut differ: Vec<String> = [
        ("--interval", both(|c| format_duration(c.interval_ns))),
        ("--method", both(|c| c.method.name().into())),
        ("--clock", both(|c| c.clock.name().into())),
        ("--policy", both(|c| c.policy.name().into())),
        ("--priority", both(|c| c.priority.to_string())),
        ("--timer-slack", both(|c| format_duration(c.timer_slack_ns))),
    ]
    .into_iter()
    .filter(|(_, (a, b))| a != b)
    .map(|(option, (a, b))| format!("{option} {a} (not {b})"))
    .collect();
    // A flag, without a value to name.
    match (was.stagger, now.stagger) {
        (true, false) => differ.push("--stagger (not without it)".into()),
        (false, true) => differ.push("no --stagger (not with it)".into()),
        _ => {}
    }
    differ
}

pub fn run(args: MonitorArgs, sys: &Sys) -> CliResult<ExitCode> {
    let plan = prepare(&args, sys)?;
    if args.check_config {
        print!("{}", check_config_text(&plan));
        // A good configuration that cannot start now is said, and fails the check.
        let mut obstacles = latlab_monitor::start_obstacles(&plan);
        if plan.profile.is_some() || plan.schedule.is_some() {
            tuning_at_start(sys, &plan.state_dir, &mut obstacles);
        }
        if !obstacles.is_empty() {
            return Err(CliError::Failed(anyhow::anyhow!(
                "a start now would fail: {}",
                obstacles.join("; ")
            )));
        }
        return Ok(ExitCode::SUCCESS);
    }
    // A policy this process may not use fails the start before the store is opened or made.
    latlab_measure::policy_allowed(&plan.cfg).map_err(|e| CliError::Failed(e.into()))?;
    // Signals first: every thread started later inherits the blocked mask.
    let stop = StopSignal::new();
    let on_stop = stop.clone();
    crate::signals::install_daemon(move |name| {
        on_stop.request(latlab_model::StopReason::Signal {
            signal: name.into(),
        })
    });
    latlab_monitor::run_daemon(plan, sys, stop)?;
    Ok(ExitCode::SUCCESS)
}

/// What a start that tunes (`--profile`, `--schedule`) meets in the state directory: a tuning
/// a killed process left, which it puts back first (said: the plan above counts its changes
/// against the system as the leftover has it); a tuning `tune apply` or a running latlab keeps
/// in force, which refuses the start (an obstacle).
fn tuning_at_start(sys: &Sys, state_dir: &std::path::Path, obstacles: &mut Vec<String>) {
    let Ok(st) = latlab_tune::status(sys, state_dir) else {
        return;
    };
    if st.stale {
        if let Some(notice) = st.stale_notice(sys, state_dir) {
            println!(
                "{:<12}{notice}; a start puts it back first (the changes above are counted \
                 against the system as it left it)",
                "note"
            );
        }
    } else if let Some(e) = st.in_force(sys, state_dir) {
        obstacles.push(e.to_string());
    }
}

/// `latlab serve --db PATH`: the dashboard and /metrics of a store, without measuring.
pub fn serve(args: ServeArgs) -> CliResult<ExitCode> {
    let db = latlab_store::resolve_path(args.db.as_deref());
    let listen = args.listen.0.ok_or_else(|| {
        CliError::Usage(format!(
            "--listen off: serve is the web server and needs an address (accepted: {})",
            crate::args::LISTEN_FORMS
        ))
    })?;
    let web_config = args.web.resolve(Some(listen))?;
    // A --db that is not a store is refused before the signal thread starts.
    drop(crate::args::open_existing(&db)?);
    let (tx, rx) = mpsc::channel::<String>();
    crate::signals::install_daemon(move |name| {
        let _ = tx.send(name.to_string());
    });
    latlab_monitor::serve_store(&db, listen, web_config, rx)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    fn plan(args: &[&str]) -> CliResult<MonitorPlan> {
        let mut v = args.to_vec();
        let sys = Sys::new(latlab_testkit::machine("laptop-intel"));
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        v.extend_from_slice(&["--db", db.to_str().unwrap()]);
        prepare(&crate::cli_error::parse_args::<MonitorArgs>(&v)?, &sys)
    }

    #[test]
    fn defaults_are_osadl_like() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.cfg.interval_ns, 200_000);
        assert_eq!(p.cfg.window_ns, 300_000_000_000);
        assert_eq!(p.cfg.cpus, Some(vec![0, 1, 2, 3]));
        assert_eq!(
            (p.cfg.policy, p.cfg.priority),
            (latlab_model::Policy::Fifo, 95)
        );
        assert_eq!(p.cfg.duration_ns, None);
        assert_eq!(p.retention_ns, 90 * 86_400_000_000_000);
        assert_eq!(p.listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(p.sample_period_ns, 1_000_000_000);
        assert!(!p.cfg.stagger);
        let text = check_config_text(&p);
        assert!(text.contains("nothing was touched"), "{text}");
        assert!(text.contains("one phase"), "{text}");
    }

    #[test]
    fn stagger_reaches_the_measurement_and_the_config_check() {
        let p = plan(&["--stagger"]).unwrap();
        assert!(p.cfg.stagger);
        let text = check_config_text(&p);
        assert!(text.contains("phases staggered"), "{text}");
    }

    #[test]
    fn check_config_shows_profile_and_schedule() {
        let p = plan(&[
            "--profile",
            "lowlatency",
            "--schedule",
            "05:05 cpu2:performance; 17:05 cpu2:restore",
            "--listen",
            "0.0.0.0:9464",
            "--insecure-listen",
        ])
        .unwrap();
        let text = check_config_text(&p);
        assert!(text.contains("profile     lowlatency"), "{text}");
        assert!(
            text.contains("05:05 cpu2 governor powersave -> performance"),
            "{text}"
        );
        assert!(text.contains("not loopback"), "{text}");
        // Without the opt-out (or a web config), an address beyond loopback is refused.
        let Err(CliError::Usage(e)) = plan(&["--listen", "0.0.0.0:9464"]) else {
            panic!("0.0.0.0 accepted without --web-config")
        };
        assert!(
            e.starts_with("--listen 0.0.0.0:9464: reachable from other machines")
                && e.contains("--web-config FILE")
                && e.contains("--insecure-listen"),
            "{e}"
        );
    }

    #[test]
    fn a_foreign_file_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.db");
        std::fs::write(&f, b"hello, not a database at all").unwrap();
        let e = store_state(&f).unwrap_err();
        assert!(e.contains("not a latlab store"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"hello, not a database at all");
        assert!(
            store_state(&dir.path().join("new.db"))
                .unwrap()
                .contains("created")
        );
    }
}
