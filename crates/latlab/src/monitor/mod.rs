//! `latlab monitor`: a long-term latency watch. Measures continuously on chosen CPUs with the
//! samplers running, stores one window per CPU every `--window` (histogram, count, min, max,
//! p99, p99.9, missed, idle residency, frequency, interrupts, power, latlab's own CPU time) in
//! one transaction each, keeps old windows as exact hourly merges, optionally holds a tuning
//! profile and follows a governor schedule, and serves a dashboard and `/metrics`.
//!
//! `latlab serve --db` serves the same pages and metrics for a store alone.

mod api;
mod daemon;
mod gendocs;
mod metrics;
pub mod schedule;
mod web;

pub use gendocs::{GenDocsArgs, gen_docs};

use crate::cli_error::{CliError, CliResult};
use anyhow::Context;
use clap::Args;
use latlab_measure::{MeasureError, StopSignal};
use latlab_model::units::{CpuList, format_duration, parse_duration};
use latlab_model::{Clock as MeasureClock, MeasureConfig, Method, Policy, StopReason};
use latlab_store::{Annotation, SeriesSpec, Store};
use latlab_sys::Sys;
use schedule::{Schedule, SystemClock};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Spikes kept over a daemon's life (each costs 32 bytes); beyond it they are only counted.
const SPIKE_LIMIT: u32 = 1_000_000;

#[derive(Args, Debug)]
#[command(
    after_help = "Durations take a unit: ns, us, ms, s, m, h, d (e.g. 200us, 5m, 90d). A bare \
number is microseconds for --interval and --spike.\n\n\
The store keeps one series per --name: a daemon restarted with the same name continues it. \
SIGTERM or Ctrl-C stores the open window, puts back --profile and --schedule settings and exits."
)]
pub struct MonitorArgs {
    /// One pinned measuring thread per listed CPU (default: every online CPU).
    #[arg(short = 'a', long, value_name = "LIST")]
    cpus: Option<String>,

    /// Period of each measuring thread (minimum 1us).
    #[arg(short = 'i', long, default_value = "200us", value_name = "DUR")]
    interval: String,

    /// Real-time priority for fifo and rr (1..99).
    #[arg(short = 'p', long, default_value_t = 95, value_name = "1..99")]
    priority: u32,

    /// Scheduling policy of the measuring threads: fifo, rr, other, batch or idle.
    #[arg(long, default_value = "fifo", value_name = "POLICY")]
    policy: String,

    /// Wait method: clock-nanosleep, nanosleep, timerfd, posix-timer, poll, select; thread
    /// wake-ups: futex, eventfd, pipe, signal.
    #[arg(
        short = 'm',
        long,
        default_value = "clock-nanosleep",
        value_name = "METHOD"
    )]
    method: String,

    /// Length of each stored window (OSADL's 5-minute worst case by default).
    #[arg(long, default_value = "5m", value_name = "DUR")]
    window: String,

    /// Keep time and value of every sample above DUR with its window.
    #[arg(long, value_name = "DUR")]
    spike: Option<String>,

    /// The results store (default: $LATLAB_DB, else ./latlab.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,

    /// Name of the series (default: the host name); a restart with the same name continues it.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Windows older than this are merged into hourly rows (histograms merge exactly).
    #[arg(long, default_value = "90d", value_name = "DUR")]
    retention: String,

    /// Apply this tuning profile while monitoring and restore it on exit.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<String>,

    /// Switch cpufreq governors at local times of day, e.g.
    /// "05:05 cpu2:performance; 17:05 cpu2:restore"; each switch is an annotation.
    #[arg(long, value_name = "SCHEDULE")]
    schedule: Option<String>,

    /// Address of the dashboard and /metrics ("off": no web server).
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    listen: String,

    /// Period of the samplers (idle states, frequency, power, interrupts); at most a fifth of
    /// the window is used.
    #[arg(long, default_value = "1s", value_name = "DUR")]
    sample_period: String,

    /// Do not lock memory.
    #[arg(long)]
    no_mlock: bool,

    /// Offset thread i of n by i/n of the interval, so CPUs do not all take their timers at the
    /// same instant (default: one phase for every thread).
    #[arg(long)]
    stagger: bool,

    /// Check every option, print what would be done, and exit without touching anything.
    #[arg(long)]
    check_config: bool,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The results store to serve (default: $LATLAB_DB, else ./latlab.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,

    /// Address of the dashboard and /metrics.
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    listen: String,
}

fn usage<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> CliError + '_ {
    move |e| CliError::Usage(format!("{what}: {e}"))
}

pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Confine the calling thread to `cpus`.
pub fn set_affinity(cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t filled with CPU_SET and applied to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn parse_listen(text: &str) -> CliResult<Option<SocketAddr>> {
    if text == "off" || text == "none" {
        return Ok(None);
    }
    text.parse::<SocketAddr>().map(Some).map_err(|_| {
        CliError::Usage(format!(
            "--listen {text:?} is not an address (accepted: IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464, or off)"
        ))
    })
}

/// What a store file is, read from its header only (nothing opened for writing).
fn store_state(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let meta = std::fs::metadata(dir)
                .map_err(|e| format!("{}: directory {}: {e}", path.display(), dir.display()))?;
            if !meta.is_dir() {
                return Err(format!(
                    "{}: {} is not a directory",
                    path.display(),
                    dir.display()
                ));
            }
            // SAFETY: access() with a NUL-terminated path.
            let writable = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
                .map(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0)
                .unwrap_or(false);
            if !writable {
                return Err(format!(
                    "{}: directory {} is not writable",
                    path.display(),
                    dir.display()
                ));
            }
            return Ok("absent; it will be created".into());
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut head = [0u8; 100];
    let n = f
        .read(&mut head)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if n == 0 {
        return Ok("empty file; it will be set up as a store".into());
    }
    if n < 100 || &head[..16] != b"SQLite format 3\0" {
        return Err(format!(
            "{} is not a latlab store (not an SQLite database); it would be left untouched",
            path.display()
        ));
    }
    let be = |o: usize| u32::from_be_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
    let (version, app) = (be(60), be(68) as i32);
    if app != latlab_store::APPLICATION_ID && app != 0 {
        return Err(format!(
            "{} is an SQLite database of another application (id {app:#x}); it would be left untouched",
            path.display()
        ));
    }
    if version > latlab_store::SCHEMA_VERSION {
        return Err(format!(
            "{} has schema version {version}, newer than this latlab supports ({}); upgrade latlab",
            path.display(),
            latlab_store::SCHEMA_VERSION
        ));
    }
    Ok(format!("a latlab store, schema version {version}"))
}

/// Everything `latlab monitor` will do, checked.
struct Plan {
    cfg: MeasureConfig,
    db: PathBuf,
    name: String,
    retention_ns: u64,
    listen: Option<SocketAddr>,
    profile: Option<(latlab_tune::Profile, latlab_tune::Plan)>,
    schedule: Option<Schedule>,
    schedule_checks: Vec<String>,
    sample_period_ns: u64,
    online: CpuList,
    state_dir: PathBuf,
    store_state: String,
}

impl Plan {
    fn housekeeping(&self) -> Vec<usize> {
        let measured = self.cfg.cpus.clone().unwrap_or_default();
        self.online
            .cpus()
            .iter()
            .filter(|c| !measured.contains(c))
            .map(|&c| c as usize)
            .collect()
    }

    fn describe(&self) -> String {
        let c = &self.cfg;
        format!(
            "latlab monitor {} (pid {}): {} every {} on CPUs {}, {} {}, windows of {}, retention {}{}{}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            c.method.name(),
            format_duration(c.interval_ns),
            CpuList::from_cpus(c.cpus.clone().unwrap_or_default()),
            c.policy.name(),
            c.priority,
            format_duration(c.window_ns),
            format_duration(self.retention_ns),
            self.profile
                .as_ref()
                .map(|(p, _)| format!(", profile {}", p.name))
                .unwrap_or_default(),
            self.schedule
                .as_ref()
                .map(|s| format!(", schedule \"{}\"", s.describe()))
                .unwrap_or_default(),
        )
    }
}

fn prepare(args: &MonitorArgs, sys: &Sys) -> CliResult<Plan> {
    let online = sys
        .online_cpus()
        .map_err(|e| CliError::Failed(anyhow::anyhow!("cannot read the online CPUs: {e}")))?;
    let interval_ns = parse_duration(&args.interval, Some("us")).map_err(usage("--interval"))?;
    let window_ns = parse_duration(&args.window, None).map_err(usage("--window"))?;
    if window_ns < 1_000_000_000 {
        return Err(CliError::Usage(format!(
            "--window {}: too short (accepted: 1s or more, e.g. 5m)",
            args.window
        )));
    }
    let retention_ns = parse_duration(&args.retention, Some("d")).map_err(usage("--retention"))?;
    if retention_ns < 3_600_000_000_000 {
        return Err(CliError::Usage(format!(
            "--retention {}: too short (accepted: 1h or more, e.g. 90d)",
            args.retention
        )));
    }
    let method = Method::from_name(&args.method).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown method {:?} (accepted: {})",
            args.method,
            Method::ALL.map(|m| m.name()).join(", ")
        ))
    })?;
    if method == Method::Busy {
        return Err(CliError::Usage(
            "--method busy spins without end and is not for monitoring (accepted: a waiting \
             method, e.g. clock-nanosleep)"
                .into(),
        ));
    }
    let policy = Policy::from_name(&args.policy).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown policy {:?} (accepted: fifo, rr, other, batch, idle)",
            args.policy
        ))
    })?;
    if policy == Policy::Deadline {
        return Err(CliError::Usage(
            "--policy deadline is not supported by monitor (accepted: fifo, rr, other, batch, idle)"
                .into(),
        ));
    }
    let cpus = match args.cpus.as_deref() {
        None | Some("all") => online.cpus().to_vec(),
        Some(list) => CpuList::parse(list)
            .map_err(usage("--cpus"))?
            .cpus()
            .to_vec(),
    };
    let spike = args
        .spike
        .as_deref()
        .map(|s| parse_duration(s, Some("us")))
        .transpose()
        .map_err(usage("--spike"))?;
    let sample_period =
        parse_duration(&args.sample_period, Some("s")).map_err(usage("--sample-period"))?;
    if sample_period < 10_000_000 {
        return Err(CliError::Usage(format!(
            "--sample-period {}: too short (accepted: 10ms or more)",
            args.sample_period
        )));
    }
    // Built exactly like `latlab measure`'s, with no end.
    let cfg = MeasureConfig {
        interval_ns,
        duration_ns: None,
        loops: None,
        threads: cpus.len() as u32,
        cpus: Some(cpus),
        policy,
        priority: if policy.is_realtime() {
            args.priority
        } else {
            0
        },
        deadline: None,
        method,
        relative: method.always_relative(),
        clock: MeasureClock::Monotonic,
        timer_slack_ns: 0,
        pm_qos_us: None,
        mlock: !args.no_mlock,
        window_ns,
        spike_threshold_ns: spike,
        spike_limit: SPIKE_LIMIT,
        break_threshold_ns: None,
        waker_cpu: None,
        stagger: args.stagger,
    };
    latlab_measure::validate(&cfg, &online).map_err(|e| CliError::Usage(e.to_string()))?;
    let listen = parse_listen(&args.listen)?;
    let name = match &args.name {
        Some(n) if n.trim().is_empty() || n.len() > 200 => {
            return Err(CliError::Usage(
                "--name: empty or longer than 200 characters (accepted: a short name)".into(),
            ));
        }
        Some(n) => n.clone(),
        None => sys
            .read_trim("/proc/sys/kernel/hostname")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "monitor".into()),
    };
    let db = latlab_store::resolve_path(args.db.as_deref());
    let store_state = store_state(&db).map_err(|e| CliError::Usage(format!("--db {e}")))?;
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
    Ok(Plan {
        sample_period_ns: sample_period.min(window_ns / 5),
        cfg,
        db,
        name,
        retention_ns,
        listen,
        profile,
        schedule,
        schedule_checks,
        online,
        state_dir,
        store_state,
    })
}

fn check_config_text(p: &Plan) -> String {
    let c = &p.cfg;
    let mut o = String::new();
    let mut line = |k: &str, v: String| o.push_str(&format!("{k:<12}{v}\n"));
    line(
        "measure",
        format!(
            "{} every {} on CPUs {}, {} {}, memory {}, {}",
            c.method.name(),
            format_duration(c.interval_ns),
            CpuList::from_cpus(c.cpus.clone().unwrap_or_default()),
            c.policy.name(),
            c.priority,
            if c.mlock { "locked" } else { "not locked" },
            if c.stagger {
                "phases staggered"
            } else {
                "one phase"
            }
        ),
    );
    line(
        "window",
        format!(
            "{} per window and CPU, samplers every {}",
            format_duration(c.window_ns),
            format_duration(p.sample_period_ns)
        ),
    );
    line(
        "spikes",
        match c.spike_threshold_ns {
            Some(s) => format!("kept above {}", format_duration(s)),
            None => "not kept (no --spike)".into(),
        },
    );
    line("store", format!("{} ({})", p.db.display(), p.store_state));
    line("series", format!("{} (continued if it exists)", p.name));
    line(
        "retention",
        format!(
            "windows older than {} merged into hourly rows",
            format_duration(p.retention_ns)
        ),
    );
    line(
        "listen",
        match p.listen {
            Some(a) => format!(
                "http://{a}/ (dashboard), http://{a}/metrics{}",
                if a.ip().is_loopback() {
                    ""
                } else {
                    " — not loopback: reachable from the network"
                }
            ),
            None => "off".into(),
        },
    );
    match &p.profile {
        None => line("profile", "none".into()),
        Some((prof, plan)) => {
            let (changes, set, unsupported) = plan.counts();
            line(
                "profile",
                format!(
                    "{} ({}): {changes} change(s), {set} already set, {unsupported} unsupported here; \
                 restored on exit",
                    prof.name, prof.source
                ),
            );
            for ch in plan.changes() {
                o.push_str(&format!(
                    "{:<12}  {}: {} -> {}\n",
                    "",
                    ch.knob,
                    ch.old_value(),
                    ch.new_value()
                ));
            }
        }
    }
    match &p.schedule {
        None => o.push_str(&format!("{:<12}none\n", "schedule")),
        Some(s) => {
            o.push_str(&format!(
                "{:<12}{} (local time)\n",
                "schedule",
                s.describe()
            ));
            for l in &p.schedule_checks {
                o.push_str(&format!("{:<12}  {l}\n", ""));
            }
        }
    }
    o.push_str(&format!("{:<12}{}\n", "tuning dir", p.state_dir.display()));
    o.push_str("nothing was touched (--check-config)\n");
    o
}

/// The series' configuration as stored (what /metrics' latlab_system_info shows).
fn series_config(p: &Plan, system: &latlab_model::SystemInfo) -> serde_json::Value {
    serde_json::json!({
        "latlab_version": env!("CARGO_PKG_VERSION"),
        "hostname": system.hostname,
        "kernel": system.kernel_release,
        "preempt": system.preempt,
        "profile": p.profile.as_ref().map_or("none".to_string(), |(pr, _)| pr.name.clone()),
        "schedule": p.schedule.as_ref().map(|s| s.describe()),
        "retention_ns": p.retention_ns,
        "sample_period_ns": p.sample_period_ns,
        "measure": p.cfg,
    })
}

pub fn run(args: MonitorArgs, sys: &Sys) -> CliResult<ExitCode> {
    let plan = prepare(&args, sys)?;
    if args.check_config {
        print!("{}", check_config_text(&plan));
        return Ok(ExitCode::SUCCESS);
    }
    // Signals first: every thread started later inherits the blocked mask.
    let stop = StopSignal::new();
    crate::signals::install(stop.clone());
    daemon_main(plan, sys, stop)
}

fn daemon_main(plan: Plan, sys: &Sys, stop: Arc<StopSignal>) -> CliResult<ExitCode> {
    let describe = plan.describe();
    eprintln!("latlab: {describe}");
    let mut store = Store::open(&plan.db)
        .with_context(|| format!("opening the store {}", plan.db.display()))?;
    let system = sys.system_info();
    let housekeeping = plan.housekeeping();

    // Samplers (their idle-state names are the columns of every window's residency).
    let probe = latlab_sys::sample::Sampler::new(sys, plan.sample_period_ns);
    let thermal_names = probe.thermal_names();
    drop(probe);
    let (sample_tx, sample_rx) = mpsc::channel();
    let origin = (std::time::Instant::now(), unix_now_ns());
    let sampler = latlab_sys::sample::SamplerThread::spawn_streaming(
        sys,
        Duration::from_nanos(plan.sample_period_ns),
        &housekeeping,
        origin.0,
        Some(sample_tx),
    )
    .context("starting the samplers")?;

    let spec = SeriesSpec {
        name: plan.name.clone(),
        window_ns: plan.cfg.window_ns,
        config: series_config(&plan, &system),
        system: Some(system),
        idle_states: sampler.idle_states().to_vec(),
    };
    let series = match store.open_series(&spec) {
        Ok(s) => s,
        Err(e) => {
            sampler.stop();
            return Err(CliError::Failed(anyhow::anyhow!(
                "opening the series {} in {}: {e}",
                plan.name,
                plan.db.display()
            )));
        }
    };
    if series.resumed {
        eprintln!(
            "latlab: continuing series {} at window {}",
            series.name, series.next_window_index
        );
    }

    let live = Arc::new(Mutex::new(web::LiveStatus {
        series: series.name.clone(),
        series_id: series.id.0,
        pid: std::process::id(),
        started_ms: unix_now_ns() as f64 / 1e6,
        describe: describe.clone(),
        profile: plan.profile.as_ref().map(|(p, _)| p.name.clone()),
        schedule: plan.schedule.as_ref().map(|s| s.describe()),
        retention: format_duration(plan.retention_ns),
        ..Default::default()
    }));

    let server = match plan.listen {
        None => None,
        Some(addr) => {
            let started = Store::open_existing(&plan.db)
                .map_err(anyhow::Error::from)
                .and_then(|reader| {
                    web::Server::start(
                        addr,
                        web::AppState::new(plan.db.clone(), reader, Some(live.clone())),
                        housekeeping.clone(),
                    )
                });
            match started {
                Ok(s) => {
                    eprintln!(
                        "latlab: serving http://{}/ (dashboard) and http://{}/metrics",
                        s.addr, s.addr
                    );
                    Some(s)
                }
                Err(e) => {
                    sampler.stop();
                    return Err(CliError::Failed(e));
                }
            }
        }
    };
    let stop_all = |server: Option<web::Server>, sampler: latlab_sys::sample::SamplerThread| {
        sampler.stop();
        if let Some(s) = server {
            s.stop();
        }
    };

    // Tuning: first what a killed daemon left behind, then the profile.
    let annotate = |store: &mut Store, cpu: Option<u32>, kind: &str, text: &str| {
        let a = Annotation {
            at_unix_ns: unix_now_ns(),
            cpu,
            kind: kind.into(),
            text: text.into(),
        };
        if let Err(e) = store.add_annotation(series.id, &a) {
            eprintln!("latlab: monitor: storing the annotation {text:?}: {e}");
        }
    };
    if plan.schedule.is_some() {
        for line in schedule::restore_stale(sys, &plan.state_dir) {
            eprintln!("latlab: schedule: {line}");
            annotate(&mut store, None, "schedule", &format!("schedule: {line}"));
        }
    }
    let mut guard = None;
    if let Some((profile, _)) = &plan.profile {
        if let Ok(st) = latlab_tune::status(sys, &plan.state_dir)
            && st.stale
        {
            match latlab_tune::restore(sys, &plan.state_dir) {
                Ok(r) => {
                    let text = format!(
                        "restored profile {} left by a process that ended without restoring it ({} values)",
                        r.profile.unwrap_or_default(),
                        r.lines.len()
                    );
                    eprintln!("latlab: {text}");
                    annotate(&mut store, None, "profile", &text);
                }
                Err(e) => {
                    stop_all(server, sampler);
                    return Err(CliError::Failed(anyhow::anyhow!(
                        "a stale tuning is in place and could not be restored: {e}"
                    )));
                }
            }
        }
        match latlab_tune::TemporaryTuning::apply(sys, profile, None, &plan.state_dir) {
            Ok(g) => {
                let text = format!(
                    "profile {} applied ({} value(s) written{})",
                    profile.name,
                    g.applied().written.len(),
                    g.pm_qos_us()
                        .map(|us| format!(", cpu_dma_latency held at {us} us"))
                        .unwrap_or_default()
                );
                eprintln!("latlab: {text}");
                annotate(&mut store, None, "profile", &text);
                guard = Some(g);
            }
            Err(e) => {
                stop_all(server, sampler);
                return Err(if e.is_usage() {
                    CliError::Usage(format!("--profile {}: {e}", profile.name))
                } else {
                    CliError::Failed(anyhow::anyhow!("--profile {}: {e}", profile.name))
                });
            }
        }
    }

    let switcher = plan
        .schedule
        .clone()
        .map(|s| schedule::Switcher::new(s, schedule::GovernorTuner::new(sys, &plan.state_dir)));
    let (tx, rx) = mpsc::channel::<daemon::Msg>();
    let keeper = daemon::Keeper::new(
        store,
        daemon::KeeperSetup {
            series: series.clone(),
            threads: plan.cfg.threads as usize,
            window_ns: plan.cfg.window_ns,
            retention_ns: plan.retention_ns,
            sample_period_ns: plan.sample_period_ns,
            power_names: sampler.power_names().to_vec(),
            thermal_names,
            sample_origin_unix_ns: origin.1,
            describe: describe.clone(),
            merge_every: Duration::from_secs(3600),
        },
        live.clone(),
        switcher,
        Box::new(SystemClock),
    );
    let hk = housekeeping.clone();
    let keeper_thread = std::thread::Builder::new()
        .name("latlab-keeper".into())
        .spawn(move || {
            if !hk.is_empty() {
                set_affinity(&hk);
            }
            keeper.run(rx, sample_rx)
        })
        .context("starting the monitor's store thread")?;

    // Measure until a signal (or a failure).
    let tx_obs = tx.clone();
    let mut started = false;
    let mut observer = move |l: &latlab_measure::Live| {
        if !started {
            started = true;
            let _ = tx_obs.send(daemon::Msg::Start {
                start_unix_ns: unix_now_ns().saturating_sub(l.elapsed_ns),
            });
        }
    };
    let tx_win = tx.clone();
    let mut sink = move |w: Vec<latlab_measure::ClosedWindow>| {
        let _ = tx_win.send(daemon::Msg::Windows(w));
    };
    let result = latlab_measure::run_with_windows(
        &plan.cfg,
        sys,
        stop.clone(),
        &mut observer,
        Some(&mut sink),
    );
    let end_unix_ns = match &result {
        Ok(r) => r.start_unix_ns + r.elapsed_ns,
        Err(_) => unix_now_ns(),
    };
    let _ = tx.send(daemon::Msg::Finish { end_unix_ns });
    drop(tx);
    let _ = sampler.stop();
    let store = keeper_thread.join();

    let stop_text = match (&result, stop.reason()) {
        (Err(e), _) => format!("stopped: {e}"),
        (Ok(_), Some(StopReason::Signal { signal })) => format!("stopped by {signal}"),
        (Ok(_), _) => "stopped".to_string(),
    };
    match store {
        Ok(mut store) => {
            if let Some(g) = guard.take() {
                let name = g.profile().to_string();
                let text = match g.restore() {
                    Ok(r) => format!("profile {name} restored ({} value(s))", r.lines.len()),
                    Err(e) => format!("profile {name}: restore failed: {e}"),
                };
                eprintln!("latlab: {text}");
                annotate(&mut store, None, "profile", &text);
            }
            annotate(&mut store, None, "stop", &stop_text);
        }
        Err(_) => eprintln!("latlab: monitor: the store thread panicked"),
    }
    drop(guard);
    if let Some(s) = server {
        s.stop();
    }
    if let Ok(l) = live.lock() {
        eprintln!(
            "latlab: {stop_text}; {} window(s) stored{}",
            l.windows_written,
            if l.windows_lost > 0 {
                format!(", {} not stored", l.windows_lost)
            } else {
                String::new()
            }
        );
    }
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(MeasureError::Invalid(m)) => Err(CliError::Usage(m)),
        Err(MeasureError::Setup(m)) => Err(CliError::Failed(anyhow::anyhow!(m))),
    }
}

/// `latlab serve --db PATH`: the dashboard and /metrics of a store, without measuring.
pub fn serve(args: ServeArgs) -> CliResult<ExitCode> {
    let db = latlab_store::resolve_path(args.db.as_deref());
    let listen = parse_listen(&args.listen)?.ok_or_else(|| {
        CliError::Usage("--listen off: serve needs an address (accepted: IP:PORT)".into())
    })?;
    if !db.exists() {
        return Err(CliError::Usage(format!(
            "--db {}: no store there (accepted: a store written by latlab)",
            db.display()
        )));
    }
    let (tx, rx) = mpsc::channel::<String>();
    crate::signals::install_with(move |name| {
        let _ = tx.send(name.to_string());
    });
    let store =
        Store::open_existing(&db).with_context(|| format!("opening the store {}", db.display()))?;
    let server = web::Server::start(
        listen,
        web::AppState::new(db.clone(), store, None),
        Vec::new(),
    )
    .map_err(CliError::Failed)?;
    eprintln!(
        "latlab: serving {} at http://{}/ (dashboard) and http://{}/metrics",
        db.display(),
        server.addr,
        server.addr
    );
    let signal = rx.recv().unwrap_or_default();
    eprintln!("latlab: {signal}: stopping");
    server.stop();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        m: MonitorArgs,
    }

    fn plan(args: &[&str]) -> CliResult<Plan> {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        let sys = Sys::new(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../latlab-sys/tests/fixtures/laptop-intel"),
        );
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        v.extend_from_slice(&["--db", db.to_str().unwrap()]);
        prepare(&T::try_parse_from(v).unwrap().m, &sys)
    }

    #[test]
    fn defaults_are_osadl_like() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.cfg.interval_ns, 200_000);
        assert_eq!(p.cfg.window_ns, 300_000_000_000);
        assert_eq!(p.cfg.cpus, Some(vec![0, 1, 2, 3]));
        assert_eq!((p.cfg.policy, p.cfg.priority), (Policy::Fifo, 95));
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
    fn bad_values_are_usage_errors_naming_the_accepted_form() {
        for args in [
            &["--interval", "abc"][..],
            &["--window", "10ms"],
            &["--retention", "5m"],
            &["--method", "busy"],
            &["--method", "sleepy"],
            &["--policy", "deadline"],
            &["--cpus", "7"],
            &["--listen", "localhost"],
            &["--schedule", "05:05 cpu2:ondemand"],
            &["--schedule", "05:05 cpu9:performance"],
            &["--schedule", "5 o'clock"],
            &["--profile", "no-such-profile"],
            &["--priority", "0"],
        ] {
            match plan(args) {
                Err(CliError::Usage(m)) => assert!(
                    m.contains("accepted") || m.contains("known") || m.contains("offered"),
                    "{args:?}: {m}"
                ),
                Err(CliError::Failed(e)) => panic!("{args:?}: failed, not usage: {e}"),
                Ok(_) => panic!("{args:?} accepted"),
            }
        }
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
        ])
        .unwrap();
        let text = check_config_text(&p);
        assert!(text.contains("profile     lowlatency"), "{text}");
        assert!(
            text.contains("05:05 cpu2 governor powersave -> performance"),
            "{text}"
        );
        assert!(text.contains("not loopback"), "{text}");
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
