//! The long-term latency watch behind `latlab monitor` and `latlab serve`: the daemon that
//! measures continuously and stores one window per CPU (`daemon`), the keeper thread that writes
//! window sets and runs retention and the schedule (`keeper`, `schedule`), and the web server
//! with its dashboard, JSON API and Prometheus `/metrics` (`web`, `api`, `metrics`, `assets/`).
//!
//! The CLI turns its options into a checked [`MonitorPlan`]; everything from there on is here.
//! This is the one crate of latlab with an async runtime (the web server's).

mod api;
pub mod backlog;
mod daemon;
mod hotplug;
mod keeper;
mod metrics;
pub mod report;
pub mod schedule;
pub mod synthetic;
mod web;
pub mod web_config;

pub use daemon::{run_daemon, serve_store};

use latlab_model::MeasureConfig;
use latlab_model::monitor::SeriesConfig;
use latlab_model::units::{CpuList, format_duration};
use schedule::Schedule;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// How the daemon or the server ended badly (a measurement's error: usage or failure).
pub use latlab_session::Error;

pub use latlab_sys::unix_now_ns;

/// What a store file is, read from its header only (nothing opened for writing).
pub fn store_state(path: &Path) -> Result<String, String> {
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
            if let Err(e) = latlab_sys::probe_write(dir) {
                return Err(format!(
                    "{}: directory {} is not writable: {}",
                    path.display(),
                    dir.display(),
                    latlab_tune::describe_io_error(&e)
                ));
            }
            return Ok("absent; it will be created".into());
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut head = [0u8; 1];
    let n = f
        .read(&mut head)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if n == 0 {
        return Ok("empty file; it will be set up as a store".into());
    }
    // The store's own rules, read without writing to the file.
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    let journaled = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
    let state = existing_store_state(path, journaled)?;
    // The daemon writes the store, and its lock and journal beside it.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for (what, p) in [("the store", path), ("its directory", dir)] {
        if let Err(e) = latlab_sys::probe_write(p) {
            return Err(format!(
                "{}: {what} is not writable (the monitor writes the store, and its lock and \
                 journal beside it): {}",
                path.display(),
                latlab_tune::describe_io_error(&e)
            ));
        }
    }
    Ok(state)
}

/// What an existing, non-empty file is as a store.
fn existing_store_state(path: &Path, journaled: bool) -> Result<String, String> {
    let wal = format!("{}-wal", path.display());
    match latlab_store::identify(path).map_err(|e| e.to_string())? {
        // A store just made by a running daemon has its first pages in the journal still.
        0 if journaled => Ok(format!(
            "an SQLite database whose latest changes are in {wal} (a daemon's that runs, or \
             one that was killed before it closed the store); read as a store at start"
        )),
        0 => Ok("an empty SQLite database; it will be set up as a store".into()),
        version => Ok(format!("a latlab store, schema version {version}")),
    }
}

/// Everything `latlab monitor` will do, checked (built from the command line by the CLI).
pub struct MonitorPlan {
    pub cfg: MeasureConfig,
    pub db: PathBuf,
    pub name: String,
    pub retention_ns: u64,
    pub listen: Option<SocketAddr>,
    /// `--web-config`: TLS, authentication and the rest for the web server.
    pub web_config: Option<std::sync::Arc<web_config::WebConfigWatch>>,
    pub profile: Option<(latlab_tune::Profile, latlab_tune::Plan)>,
    pub schedule: Option<Schedule>,
    pub schedule_checks: Vec<String>,
    pub sample_period_ns: u64,
    pub online: CpuList,
    pub state_dir: PathBuf,
    pub store_state: String,
    /// While the store cannot be written: the time of windows always kept in memory, ns, and
    /// the bytes beyond it; older ones go to files (default: an hour, 64 MiB).
    pub backlog: (u64, usize),
}

impl MonitorPlan {
    /// The online CPUs not measured (where latlab's own threads run).
    pub fn housekeeping(&self) -> Vec<u32> {
        self.online
            .except(self.cfg.cpus.as_deref().unwrap_or_default())
    }

    /// The one line that starts the daemon's log and its first annotation.
    pub fn describe(&self) -> String {
        let c = &self.cfg;
        format!(
            "latlab monitor {} (pid {}): {} every {} on {}, {}, windows of {}, retention {}{}{}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            c.method.name(),
            format_duration(c.interval_ns),
            CpuList::from_cpus(c.cpus.clone().unwrap_or_default()).phrase(),
            c.policy_text(),
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

/// What would make a start fail now, though the configuration is good: the series recorded by
/// another daemon, the address taken. Read without taking anything (the port is bound and
/// let go at once).
pub fn start_obstacles(p: &MonitorPlan) -> Vec<String> {
    let mut out = Vec::new();
    // A real-time policy this process may not use (no CAP_SYS_NICE, no real-time budget in
    // its cgroup): the measuring threads could not start.
    if let Err(e) = latlab_measure::policy_allowed(&p.cfg) {
        out.push(e.to_string());
    }
    let lock = daemon::series_lock_path(&p.db, &p.name);
    if let Some(pid) = latlab_sys::pidlock::PidLock::holder(&lock) {
        out.push(format!(
            "series {:?} in {} is being recorded by another daemon ({})",
            p.name,
            p.db.display(),
            pid.map_or_else(|| "PID unknown".to_string(), |p| format!("PID {p}"))
        ));
    }
    if let Some(addr) = p.listen
        && let Err(e) = web::listen(addr)
    {
        out.push(format!("--listen {addr}: {e}"));
    }
    // The lock beside the store cannot be written (a passing state, so not bad configuration).
    if latlab_sys::available_bytes(&p.db) == Some(0) {
        out.push(format!(
            "the file system holding {} is full (the monitor writes the store, and its lock \
             and journal beside it)",
            p.db.display()
        ));
    }
    out
}

/// What `--check-config` prints: every setting, checked, and that nothing was touched.
pub fn check_config_text(p: &MonitorPlan) -> String {
    let c = &p.cfg;
    let mut o = String::new();
    let mut line = |k: &str, v: String| o.push_str(&format!("{k:<12}{v}\n"));
    line(
        "measure",
        format!(
            "{} every {} on {}, {}, memory {}, {}",
            c.method.name(),
            format_duration(c.interval_ns),
            CpuList::from_cpus(c.cpus.clone().unwrap_or_default()).phrase(),
            c.policy_text(),
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
            Some(a) => {
                let scheme = p.web_config.as_ref().map_or("http", |w| w.scheme());
                format!(
                    "{scheme}://{a}/ (dashboard), {scheme}://{a}/metrics{}{}",
                    match &p.web_config {
                        Some(w) => format!(" — {}", w.current().describe()),
                        None => String::new(),
                    },
                    if a.ip().to_canonical().is_loopback() {
                        ""
                    } else {
                        " — not loopback: reachable from the network"
                    }
                )
            }
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
fn series_config(p: &MonitorPlan, system: &latlab_model::SystemInfo) -> SeriesConfig {
    SeriesConfig {
        profile: p
            .profile
            .as_ref()
            .map_or("none".to_string(), |(pr, _)| pr.name.clone()),
        schedule: p.schedule.as_ref().map(|s| s.describe()),
        retention_ns: p.retention_ns,
        sample_period_ns: p.sample_period_ns,
        ..SeriesConfig::new(system, p.cfg.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The daemon's check before it touches anything answers as the store will when it opens
    /// the file: an SQLite database of other tables is refused here, not after a profile has
    /// been applied.
    #[test]
    fn store_state_refuses_what_the_store_would_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("contacts.db");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE contacts (name TEXT)")
            .unwrap();
        let before = std::fs::read(&other).unwrap();
        let e = store_state(&other).unwrap_err();
        assert!(
            e.contains("is not a latlab store (an SQLite database with 1 other tables)"),
            "{e}"
        );
        assert_eq!(std::fs::read(&other).unwrap(), before);

        let store = dir.path().join("s.db");
        drop(latlab_store::Store::open(&store).unwrap());
        assert_eq!(
            store_state(&store).unwrap(),
            format!(
                "a latlab store, schema version {}",
                latlab_store::SCHEMA_VERSION
            )
        );
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, "").unwrap();
        assert!(store_state(&empty).unwrap().starts_with("empty file"));
        // A store a running daemon just made: its first pages are in its journal still.
        let fresh = dir.path().join("fresh.db");
        let open = latlab_store::Store::open(&fresh).unwrap();
        let said = store_state(&fresh).unwrap();
        assert!(
            said.starts_with("an SQLite database whose latest changes are in")
                && said.contains("fresh.db-wal (a daemon's that runs, or one that was killed"),
            "{said}"
        );
        drop(open);
    }
}
