//! The daemon's life: samplers, series, web server, tuning and schedule set up around one
//! endless measurement, and everything put back when it stops.

use crate::keeper::{Keeper, KeeperSetup, Msg};
use crate::{Error, MonitorPlan, schedule, series_config, unix_now_ns, web};
use anyhow::Context;
use latlab_measure::StopSignal;
use latlab_model::StopReason;
use latlab_model::units::format_duration;
use latlab_store::{Annotation, SeriesId, SeriesSpec, Store};
use latlab_sys::Sys;
use latlab_sys::pidlock::{LockError, PidLock};
use schedule::SystemClock;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Run the monitor of `plan` until `stop` is requested (install the signal handling first:
/// every thread started here inherits the blocked mask).
pub fn run_daemon(plan: MonitorPlan, sys: &Sys, stop: Arc<StopSignal>) -> Result<(), Error> {
    // What can refuse comes first, before the store or the system is touched: the series' lock
    // (held until this function returns: one daemon per series of a store), the port, the
    // tuning lock.
    let _lock = lock_series(&plan.db, &plan.name)?;
    let listener = plan
        .listen
        .map(web::Server::bind)
        .transpose()
        .map_err(Error::Failed)?;
    let system = sys.system_info();
    let mut notes = Vec::new();
    let guard = take_over_tuning(&plan, sys, &mut notes)?;
    let describe = plan.describe();
    eprintln!("latlab: {describe}");
    let housekeeping = plan.housekeeping();

    let mut store = Store::open(&plan.db)
        .with_context(|| format!("opening the store {}", plan.db.display()))?;
    // A window reported stored is on the disk, whatever happens to the file system after.
    store
        .sync_every_commit()
        .with_context(|| format!("opening the store {}", plan.db.display()))?;

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
        // Months of samples would pile up: each goes to the keeper, the sampler keeps none.
        false,
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
            return Err(Error::Failed(anyhow::anyhow!(
                "opening the series {} in {}: {e}",
                plan.name,
                plan.db.display()
            )));
        }
    };
    for note in &notes {
        annotate(&mut store, series.id, note);
    }
    let live = live_status(&plan, &series, &describe);
    let server = match listener.map(|l| start_server(&plan, l, &live, &housekeeping)) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            sampler.stop();
            return Err(Error::Failed(e));
        }
    };

    let switcher = plan
        .schedule
        .clone()
        .map(|s| schedule::Switcher::new(s, schedule::GovernorTuner::new(sys, &plan.state_dir)));
    let (tx, rx) = mpsc::channel::<Msg>();
    let keeper = Keeper::new(
        store,
        KeeperSetup {
            series: series.clone(),
            spec,
            threads: plan.cfg.threads as usize,
            window_ns: plan.cfg.window_ns,
            retention_ns: plan.retention_ns,
            sample_period_ns: plan.sample_period_ns,
            power_names: sampler.power_names().to_vec(),
            thermal_names,
            sample_origin_unix_ns: origin.1,
            describe: describe.clone(),
            merge_every: Duration::from_secs(3600),
            retry_every: Duration::from_secs(5),
            backlog: plan.backlog,
            hotplug: crate::hotplug::Hotplug::new(
                sys.clone(),
                &crate::hotplug::measured_cpus(plan.cfg.cpus.as_deref(), &plan.online),
                plan.cfg.policy,
                plan.cfg.priority,
            ),
        },
        live.clone(),
        switcher,
        Box::new(SystemClock),
    );
    let hk = housekeeping.clone();
    let keeper_thread = std::thread::Builder::new()
        .name("latlab-keeper".into())
        .spawn(move || {
            latlab_sys::thread::keep_on(&hk);
            keeper.run(rx, sample_rx)
        })
        .context("starting the monitor's store thread")?;

    let result = measure(&plan, sys, &stop, tx);
    let _ = sampler.stop();
    let stop_text = match (&result, stop.reason()) {
        (Err(e), _) => format!("stopped: {e}"),
        (Ok(()), Some(StopReason::Signal { signal })) => format!("stopped by {signal}"),
        (Ok(()), _) => "stopped".to_string(),
    };
    let unstored = wind_down(keeper_thread, guard, server, &live, &stop_text, &plan.db);
    result.map_err(Error::from)?;
    match unstored {
        // Exit 1: the store failed, which a restart (once it is writable) can help.
        Some(said) => Err(Error::Failed(anyhow::anyhow!("{said}"))),
        None => Ok(()),
    }
}

/// What became of the window sets the store did not take, in one sentence (`None`: it took
/// them all).
fn unstored_said(end: &crate::keeper::KeeperEnd, db: &Path) -> Option<String> {
    let mut said = Vec::new();
    if end.lost > 0 {
        said.push(format!(
            "{} window set(s) were measured but not stored: the store could not be written, and \
             they are lost",
            end.lost
        ));
    }
    if let Some(why) = &end.unkept {
        said.push(format!("no file could keep them either ({why})"));
    }
    if !end.kept.is_empty() {
        let n: u64 = end.kept.iter().map(|(n, _)| n).sum();
        let files: Vec<&Path> = end.kept.iter().map(|(_, p)| p.as_path()).collect();
        let by_pattern = crate::keeper::files_by_pattern(&files);
        // A directory in memory (the service's /run/latlab, a tmpfs /tmp) is emptied by a boot.
        let in_memory = files
            .iter()
            .any(|f| f.parent().is_some_and(latlab_sys::in_memory));
        said.push(format!(
            "{n} window set(s) the store could not take are kept in {} ({} --db {} stores them; \
             so does the next start of this series on this store){}",
            crate::keeper::kept_files(&files, by_pattern),
            crate::keeper::import_command(&files, by_pattern),
            latlab_model::units::shell_path(db),
            if in_memory {
                ", in memory: a reboot loses them"
            } else {
                ""
            }
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// After the measurement: the keeper's last windows stored, the profile restored (and said in
/// an annotation), the server stopped, the end said. Returns the window sets not stored.
fn wind_down(
    keeper_thread: std::thread::JoinHandle<crate::keeper::KeeperEnd>,
    guard: Option<latlab_tune::TuningGuard>,
    server: Option<web::Server>,
    live: &Arc<Mutex<web::LiveStatus>>,
    stop_text: &str,
    db: &Path,
) -> Option<String> {
    let mut unstored = None;
    match keeper_thread.join() {
        Ok(end) => {
            unstored = unstored_said(&end, db);
            let failed = unstored.is_some();
            let mut store = end.store;
            // Where windows went unstored with the store, a note it cannot take goes unsaid:
            // the error at the exit says the store failed (said for each note, the same loss
            // was said four times).
            let mut note = |kind: &str, text: &str| match store.as_mut() {
                Some(s) if failed => {
                    let _ = s.add_annotation(end.series, &note(kind, text));
                }
                Some(s) => annotate(s, end.series, &note(kind, text)),
                None if failed => {}
                None => eprintln!("latlab: monitor: no store for the annotation {text:?}"),
            };
            if let Some(g) = guard {
                let name = g.profile().to_string();
                let text = match g.restore() {
                    Ok(r) => format!("profile {name} restored ({} value(s))", r.lines.len()),
                    Err(e) => format!("profile {name}: restore failed: {e}"),
                };
                eprintln!("latlab: {text}");
                note("profile", &text);
            }
            match &unstored {
                None => note("stop", stop_text),
                Some(said) => note("stop", &format!("{stop_text}; {said}")),
            }
        }
        Err(_) => {
            eprintln!("latlab: monitor: the store thread panicked");
            // Dropping the guard puts the profile back all the same.
            drop(guard);
        }
    }
    if let Some(s) = server {
        s.stop();
    }
    if let Ok(l) = live.lock() {
        eprintln!(
            "latlab: {stop_text}; {} window(s) stored{}{}",
            l.windows_written,
            if l.windows_kept > 0 {
                format!(", {} kept in files", l.windows_kept)
            } else {
                String::new()
            },
            if l.windows_lost > 0 {
                format!(", {} not stored", l.windows_lost)
            } else {
                String::new()
            }
        );
    }
    unstored
}

/// The lock file of series `name` in the store at `db` (see [`latlab_store::lock_path`]).
pub fn series_lock_path(db: &Path, name: &str) -> std::path::PathBuf {
    latlab_store::lock_path(db, name)
}

/// Take series `name`'s lock, or refuse naming the daemon that holds it.
fn lock_series(db: &Path, name: &str) -> Result<PidLock, Error> {
    PidLock::acquire(&series_lock_path(db, name)).map_err(|e| {
        Error::Failed(match e {
            LockError::Held { pid, .. } => anyhow::anyhow!(
                "series {name:?} in {} is being recorded by another daemon ({}); stop it or \
                 choose another --name",
                db.display(),
                pid.map_or_else(|| "PID unknown".to_string(), |p| format!("PID {p}"))
            ),
            e => anyhow::anyhow!("cannot lock series {name:?}: {e}"),
        })
    })
}

/// What the dashboard shows of the running daemon.
fn live_status(
    plan: &MonitorPlan,
    series: &latlab_store::SeriesState,
    describe: &str,
) -> Arc<Mutex<web::LiveStatus>> {
    Arc::new(Mutex::new(web::LiveStatus {
        series: series.name.clone(),
        series_id: series.id.0,
        pid: std::process::id(),
        started_ms: crate::api::ms(unix_now_ns()),
        describe: describe.to_string(),
        profile: plan.profile.as_ref().map(|(p, _)| p.name.clone()),
        schedule: plan.schedule.as_ref().map(|s| s.describe()),
        retention: format_duration(plan.retention_ns),
        ..Default::default()
    }))
}

/// The web server on `--listen`'s socket, reading the store on its own connection.
fn start_server(
    plan: &MonitorPlan,
    listener: std::net::TcpListener,
    live: &Arc<Mutex<web::LiveStatus>>,
    housekeeping: &[u32],
) -> anyhow::Result<web::Server> {
    let reader = Store::open_existing(&plan.db)?;
    let s = web::Server::serve(
        listener,
        web::AppState::new(plan.db.clone(), reader, Some(live.clone())),
        housekeeping.to_vec(),
        plan.web_config.clone(),
    )?;
    let scheme = plan.web_config.as_ref().map_or("http", |w| w.scheme());
    eprintln!(
        "latlab: serving {scheme}://{}/ (dashboard) and {scheme}://{}/metrics{}",
        s.addr,
        s.addr,
        security_note(plan.web_config.as_deref(), s.addr)
    );
    Ok(s)
}

/// ` (TLS 1.2–1.3; basic auth (1 user))`, or ` (plain HTTP, no authentication)`, after the
/// address the server listens on.
fn security_note(w: Option<&crate::web_config::WebConfigWatch>, at: SocketAddr) -> String {
    match w {
        Some(w) => format!(" ({})", w.current().describe()),
        None if at.ip().to_canonical().is_loopback() => " (plain HTTP, no authentication)".into(),
        None => {
            " (plain HTTP, no authentication, reachable from the network: --insecure-listen)".into()
        }
    }
}

/// A note for the series' annotations, made now.
fn note(kind: &str, text: &str) -> Annotation {
    Annotation {
        at_unix_ns: unix_now_ns(),
        cpu: None,
        kind: kind.into(),
        text: text.into(),
    }
}

/// Store an annotation on the series (a failure is said, not fatal).
fn annotate(store: &mut Store, series: SeriesId, a: &Annotation) {
    if let Err(e) = store.add_annotation(series, a) {
        eprintln!("latlab: monitor: storing the annotation {:?}: {e}", a.text);
    }
}

/// Tuning, before the store is opened: first put back what a killed daemon left behind
/// (schedule, with or without --schedule now, and profile), then apply `--profile`; each step is said and added to `notes` for
/// the series. The guard restores the profile when dropped.
fn take_over_tuning(
    plan: &MonitorPlan,
    sys: &Sys,
    notes: &mut Vec<Annotation>,
) -> Result<Option<latlab_tune::TuningGuard>, Error> {
    // Also without --schedule now: a killed daemon's governors go back whatever this one does.
    for line in schedule::restore_stale(sys, &plan.state_dir) {
        eprintln!("latlab: schedule: {line}");
        notes.push(note("schedule", &format!("schedule: {line}")));
    }
    let Some((profile, _)) = &plan.profile else {
        return Ok(None);
    };
    let stale = latlab_tune::restore_stale(sys, &plan.state_dir).map_err(|e| {
        Error::Failed(anyhow::anyhow!(
            "a stale tuning is in place and could not be restored: {e}"
        ))
    })?;
    if let Some(r) = stale {
        let text = r.stale_line();
        eprintln!("latlab: {text}");
        notes.push(note("profile", &text));
    }
    // Per-CPU settings (and a realtime profile's isolated CPUs) are the measured CPUs.
    let measured = plan
        .cfg
        .cpus
        .as_ref()
        .map(|c| latlab_model::units::CpuList::from_cpus(c.clone()));
    let g = latlab_tune::TemporaryTuning::apply(sys, profile, measured.as_ref(), &plan.state_dir)
        .map_err(|e| {
        if e.is_usage() {
            Error::Usage(format!("--profile {}: {e}", profile.name))
        } else {
            Error::Failed(anyhow::anyhow!("--profile {}: {e}", profile.name))
        }
    })?;
    let text = format!(
        "profile {} applied ({} value(s) written{})",
        profile.name,
        g.applied().written.len(),
        g.pm_qos_us()
            .map(|us| format!(", cpu_dma_latency held at {us} us"))
            .unwrap_or_default()
    );
    eprintln!("latlab: {text}");
    notes.push(note("profile", &text));
    Ok(Some(g))
}

/// Measure until a signal (or a failure), handing the start and every closed window to the
/// keeper and, at the end, when measuring ended.
fn measure(
    plan: &MonitorPlan,
    sys: &Sys,
    stop: &Arc<StopSignal>,
    tx: mpsc::Sender<Msg>,
) -> Result<(), latlab_measure::MeasureError> {
    let tx_obs = tx.clone();
    let mut started = false;
    let mut observer = move |l: &latlab_measure::Live| {
        if !started {
            started = true;
            let elapsed = Duration::from_nanos(l.elapsed_ns);
            let now = std::time::Instant::now();
            let _ = tx_obs.send(Msg::Start {
                start_unix_ns: unix_now_ns().saturating_sub(l.elapsed_ns),
                start_instant: now.checked_sub(elapsed).unwrap_or(now),
                warnings: l.setup_warnings.clone(),
            });
        }
    };
    let tx_win = tx.clone();
    let mut sink = move |w: Vec<latlab_measure::ClosedWindow>| {
        let _ = tx_win.send(Msg::Windows(w));
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
    let _ = tx.send(Msg::Finish { end_unix_ns });
    result.map(drop)
}

/// `latlab serve --db PATH`: the dashboard and /metrics of the store at `db`, without measuring,
/// until a stop signal's name arrives on `stop`.
pub fn serve_store(
    db: &Path,
    listen: SocketAddr,
    web_config: Option<Arc<crate::web_config::WebConfigWatch>>,
    stop: mpsc::Receiver<String>,
) -> Result<(), Error> {
    let store =
        Store::open_to_read(db).with_context(|| format!("opening the store {}", db.display()))?;
    let server = web::Server::start(
        listen,
        web::AppState::new(db.to_path_buf(), store, None),
        Vec::new(),
        web_config.clone(),
    )?;
    let scheme = web_config.as_ref().map_or("http", |w| w.scheme());
    eprintln!(
        "latlab: serving {} at {scheme}://{}/ (dashboard) and {scheme}://{}/metrics{}",
        db.display(),
        server.addr,
        server.addr,
        security_note(web_config.as_deref(), server.addr)
    );
    let signal = stop.recv().unwrap_or_default();
    eprintln!("latlab: {signal}: stopping");
    server.stop();
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A server without a web configuration says that it is open, and where others reach it.
    #[test]
    fn a_plain_server_says_it_is_unauthenticated() {
        let note = |a: &str| super::security_note(None, a.parse().expect("an address"));
        assert_eq!(note("127.0.0.1:9464"), " (plain HTTP, no authentication)");
        assert!(
            note("0.0.0.0:9464").ends_with("reachable from the network: --insecure-listen)"),
            "{}",
            note("0.0.0.0:9464")
        );
    }
}
