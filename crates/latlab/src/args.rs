//! The measuring options `latlab measure` and `latlab monitor` share, typed at the edge: each
//! value is parsed by clap through its type (durations, CPU lists, method, policy, clock), so a
//! bad one is refused with one line before anything runs. Also the one `usage()` mapping and the
//! one place a store is opened for writing.

use crate::cli_error::{CliError, CliResult};
use clap::Args;
use latlab_model::units::{CpuList, ParseError, parse_duration};
use latlab_model::{MeasureConfig, Method, Policy};
use latlab_store::{Store, StoreError};
use std::path::Path;

/// A duration from the command line, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ns(pub u64);

/// A duration whose bare number is microseconds (`--interval 200`, as cyclictest reads it).
pub fn us(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, Some("us")).map(Ns)
}

/// A duration whose bare number is seconds (`--duration 30`).
pub fn secs(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, Some("s")).map(Ns)
}

/// A duration whose bare number is nanoseconds (`--timer-slack 50000`).
pub fn nanos(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, Some("ns")).map(Ns)
}

/// A duration whose bare number is days (`--retention 90`), said so in its accepted form.
pub fn days(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, Some("d"))
        .map(Ns)
        .map_err(|e| ParseError {
            accepted: "a number of days, or with a unit h or d, e.g. 90 or 90d, 12h",
            ..e
        })
}

/// A duration that must name its unit (`--window 5m`).
pub fn with_unit(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, None).map(Ns)
}

/// A count (`--max-missed 10`): a whole number, 0 or more.
pub fn count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse().map_err(|_| {
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            format!(
                "{text:?} is too large (accepted: a whole number up to {})",
                u64::MAX
            )
        } else {
            format!("{text:?} is not a count (accepted: a whole number, 0 or more, e.g. 10)")
        }
    })
}

/// A `/dev/cpu_dma_latency` request in µs (`--pm-qos`, `tune hold --us`): the kernel takes a
/// signed 32-bit value. Not a number reads as every refused number does.
pub fn pm_qos_us(text: &str) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    let us: u64 = text.trim().parse()?;
    u32::try_from(us)
        .ok()
        .filter(|&u| i32::try_from(u).is_ok())
        .ok_or_else(|| {
            format!(
                "{us} is more than the kernel takes (accepted: a whole number of µs from 0 to \
                 2147483647, e.g. 10)"
            )
            .into()
        })
}

/// `--cpus`: a CPU list, or `all` (every online CPU this process may run on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cpus {
    All,
    List(CpuList),
}

impl std::str::FromStr for Cpus {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Cpus, ParseError> {
        match s {
            "all" => Ok(Cpus::All),
            list => CpuList::parse(list).map(Cpus::List),
        }
    }
}

impl Cpus {
    /// The CPUs named, `all` being the online ones.
    pub fn resolve(&self, online: &CpuList) -> Vec<u32> {
        match self {
            Cpus::All => online.cpus().to_vec(),
            Cpus::List(l) => l.cpus().to_vec(),
        }
    }
}

/// The forms `--listen` accepts as an address.
pub const LISTEN_FORMS: &str =
    "IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464; localhost:PORT; :PORT for every address";

/// `--listen`: an address, or `off` (no web server). `:PORT` is every address, IPv6 and IPv4
/// (as Go's exporters read it: `[::]`), and `localhost:PORT` is 127.0.0.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listen(pub Option<std::net::SocketAddr>);

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(text: &str) -> Result<Listen, String> {
        use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
        if text == "off" || text == "none" {
            return Ok(Listen(None));
        }
        let port = |p: &str| p.parse::<u16>().ok();
        let addr = if let Some(p) = text.strip_prefix(':').and_then(port) {
            Some(SocketAddr::from((Ipv6Addr::UNSPECIFIED, p)))
        } else if let Some(p) = text.strip_prefix("localhost:").and_then(port) {
            Some(SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
        } else {
            text.parse().ok()
        };
        addr.map(|a| Listen(Some(a))).ok_or_else(|| {
            format!("{text:?} is not an address (accepted: {LISTEN_FORMS}; or off for monitor)")
        })
    }
}

/// The measuring options of every command that measures (`#[command(flatten)]`). The interval
/// and the window are not here: their defaults differ by command (1ms and 1s for a run, 200us
/// and 5m for the monitor).
#[derive(Args, Debug, Clone)]
pub struct MeasureOpts {
    /// One pinned measuring thread per listed CPU, or all (default: every online CPU this
    /// process may run on: its cpuset or taskset narrows them).
    #[arg(short = 'a', long, value_name = "LIST")]
    pub cpus: Option<Cpus>,

    /// Real-time priority for fifo and rr, 1..99 (default 95).
    #[arg(short = 'p', long, value_name = "1..99")]
    pub priority: Option<u32>,

    /// Scheduling policy: fifo, rr, other, batch, idle; deadline (measure only).
    #[arg(long, default_value = "fifo", value_name = "POLICY")]
    pub policy: Policy,

    /// clock-nanosleep (absolute), nanosleep, timerfd, posix-timer, poll, select, busy (measure
    /// only); thread wake-ups: futex, eventfd, pipe, signal.
    #[arg(
        short = 'm',
        long,
        default_value = "clock-nanosleep",
        value_name = "METHOD"
    )]
    pub method: Method,

    /// Keep time, CPU and value of every sample above DUR (bare number: us).
    #[arg(long, value_name = "DUR", value_parser = us)]
    pub spike: Option<Ns>,

    /// Do not lock memory.
    #[arg(long)]
    pub no_mlock: bool,

    /// Offset thread i of n by i/n of the interval, so CPUs do not all take their timers at the
    /// same instant (default: one phase for every thread).
    #[arg(long)]
    pub stagger: bool,

    /// Period of the samplers (idle states, frequency, power, interrupts, utilisation); the
    /// monitor uses at most a fifth of its window [default: 1s].
    #[arg(long, value_name = "DUR", value_parser = secs)]
    pub sample_period: Option<Ns>,
}

/// The real-time priority of fifo and rr without `-p`.
const DEFAULT_PRIORITY: u32 = 95;

impl MeasureOpts {
    /// What the options say together: a priority needs a real-time policy.
    pub fn check(&self) -> CliResult<()> {
        match self.priority {
            Some(p) if !self.policy.is_realtime() => Err(CliError::Usage(format!(
                "--priority {p}: policy {} has no real-time priority (accepted: -p with --policy \
                 fifo or rr)",
                self.policy.name()
            ))),
            _ => Ok(()),
        }
    }

    /// `--policy deadline` is `measure`'s alone (its runtime, deadline and period options are
    /// too): refused by `command` before anything else is said of it.
    pub fn no_deadline(&self, command: &str) -> CliResult<()> {
        if self.policy == Policy::Deadline {
            return Err(CliError::Usage(format!(
                "--policy deadline is not supported by {command}, only by measure (accepted: \
                 fifo, rr, other, batch, idle)"
            )));
        }
        Ok(())
    }

    /// The configuration these options give, pinned to `--cpus` (default: `online`, the CPUs
    /// this process may use), without an end; the command sets what is its own on top.
    pub fn config(&self, online: &CpuList, interval: Ns, window: Ns) -> MeasureConfig {
        let cpus = self
            .cpus
            .as_ref()
            .map_or_else(|| online.cpus().to_vec(), |c| c.resolve(online));
        MeasureConfig {
            interval_ns: interval.0,
            threads: cpus.len() as u32,
            cpus: Some(cpus),
            policy: self.policy,
            priority: if self.policy.is_realtime() {
                self.priority.unwrap_or(DEFAULT_PRIORITY)
            } else {
                0
            },
            method: self.method,
            relative: self.method.always_relative(),
            mlock: !self.no_mlock,
            window_ns: window.0,
            spike_threshold_ns: self.spike.map(|s| s.0),
            stagger: self.stagger,
            ..Default::default()
        }
    }

    /// The samplers' period, at least 10ms.
    pub fn sample_period_ns(&self) -> CliResult<u64> {
        let Ns(period) = self.sample_period.unwrap_or(Ns(1_000_000_000));
        if period < 10_000_000 {
            return Err(CliError::Usage(format!(
                "--sample-period {}: too short (accepted: 10ms or more)",
                latlab_model::units::format_duration(period)
            )));
        }
        Ok(period)
    }
}

/// The online CPUs this process may put its measuring threads on ([`latlab_sys::Sys::usable_cpus`]:
/// a container's or cgroup's cpuset, or `taskset`, narrows them): the default CPUs and what
/// `all` means.
pub fn usable_cpus(sys: &latlab_sys::Sys) -> CliResult<CpuList> {
    sys.usable_cpus()
        .map_err(|e| CliError::Failed(anyhow::anyhow!("cannot read the online CPUs: {e}")))
}

/// Refuses CPUs of `cfg` (measured, or the waker's) that are online but outside `usable`,
/// saying why: the threads could not be pinned there.
pub fn within_affinity(
    sys: &latlab_sys::Sys,
    cfg: &MeasureConfig,
    usable: &CpuList,
) -> CliResult<()> {
    let online = sys.online_cpus().unwrap_or_else(|_| usable.clone());
    let outside = |c: u32| online.contains(c) && !usable.contains(c);
    // (Under a system root other than `/` the tree's online CPUs are usable: none is outside.)
    let refuse = |option: String, c: u32| {
        CliError::Usage(format!(
            "{option}: CPU {c} is outside the CPUs this process may run on (accepted: {}; its \
             affinity, which a cpuset of its container or cgroup or taskset sets, allows no \
             other)",
            usable.named()
        ))
    };
    if let Some(cpus) = &cfg.cpus
        && let Some(&c) = cpus.iter().find(|c| outside(**c))
    {
        return Err(refuse(
            format!("--cpus {}", CpuList::from_cpus(cpus.clone())),
            c,
        ));
    }
    match cfg.waker_cpu {
        Some(w) if outside(w) => Err(refuse(format!("--waker-cpu {w}"), w)),
        _ => Ok(()),
    }
}

/// How the web server of `monitor` and `serve` is reached beyond this machine.
#[derive(Args, Debug, Clone, Default)]
pub struct WebArgs {
    /// TLS, basic authentication, headers and a rate limit, in the format of the Prometheus
    /// exporter toolkit's web-config.yml (node_exporter's --web.config.file).
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<std::path::PathBuf>,

    /// Serve plain HTTP without authentication on an address other machines reach.
    #[arg(long)]
    pub insecure_listen: bool,
}

impl WebArgs {
    /// The web configuration to serve with, checked: a listening address beyond loopback needs
    /// `--web-config` or the explicit `--insecure-listen`.
    pub fn resolve(
        &self,
        listen: Option<std::net::SocketAddr>,
    ) -> CliResult<Option<std::sync::Arc<latlab_monitor::web_config::WebConfigWatch>>> {
        if listen.is_none() {
            let given = match (&self.web_config, self.insecure_listen) {
                (Some(_), _) => Some("--web-config"),
                (None, true) => Some("--insecure-listen"),
                (None, false) => None,
            };
            if let Some(option) = given {
                return Err(CliError::Usage(format!(
                    "{option} with --listen off: nothing is served (accepted: --listen ADDR \
                     beside {option})"
                )));
            }
        }
        let config = match &self.web_config {
            None => None,
            Some(path) => Some(std::sync::Arc::new(
                latlab_monitor::web_config::WebConfigWatch::load(path)
                    .map_err(|e| CliError::Usage(format!("--web-config {e}")))?,
            )),
        };
        let Some(addr) =
            listen.filter(|a| !a.ip().to_canonical().is_loopback() && !self.insecure_listen)
        else {
            return Ok(config);
        };
        let gap = match &config {
            None => "without TLS or authentication".to_string(),
            Some(c) => match c.current().exposure_gap() {
                None => {
                    c.keep_protected();
                    return Ok(config);
                }
                Some(gap) => format!(
                    "while --web-config {} {gap}",
                    self.web_config
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display()
                ),
            },
        };
        Err(CliError::Usage(format!(
            "--listen {addr}: reachable from other machines {gap} (accepted: --web-config FILE \
             with tls_server_config and basic_auth_users or client_auth_type \
             RequireAndVerifyClientCert, or --insecure-listen to serve it anyway)"
        )))
    }
}

/// Pass/fail limits of the commands that measure (`measure`, `run`) and their JUnit output: a
/// limit exceeded ends the command with exit code 4 and one line per CPU.
#[derive(Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// Fail (exit code 4) when a CPU's worst wake-up latency exceeds DUR (bare number: us).
    #[arg(long, value_name = "DUR", value_parser = us)]
    pub max_latency: Option<Ns>,

    /// Fail (exit code 4) when a CPU's 99th percentile exceeds DUR (bare number: us).
    #[arg(long, value_name = "DUR", value_parser = us)]
    pub max_p99: Option<Ns>,

    /// Fail (exit code 4) when a CPU missed more than N periods.
    #[arg(long, value_name = "N", value_parser = count)]
    pub max_missed: Option<u64>,

    /// Write JUnit XML to FILE: one test case per CPU (per cell and CPU for `run`), failed where
    /// a limit is exceeded.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
}

impl GateArgs {
    /// The limits, checked: a latency limit of 0 can never be met.
    pub fn limits(&self) -> CliResult<latlab_report::gate::Limits> {
        for (flag, v) in [
            ("--max-latency", self.max_latency),
            ("--max-p99", self.max_p99),
        ] {
            if v == Some(Ns(0)) {
                return Err(CliError::Usage(format!(
                    "{flag} 0: no wake-up takes no time (accepted: a duration above 0, e.g. 50us)"
                )));
            }
        }
        Ok(latlab_report::gate::Limits {
            max_ns: self.max_latency.map(|n| n.0),
            p99_ns: self.max_p99.map(|n| n.0),
            missed: self.max_missed,
        })
    }
}

/// Phases past the end would not run: a schedule (`flag`) longer than the run's `duration_ns`
/// is refused.
pub fn schedule_within(
    flag: &str,
    schedule: &latlab_load::Schedule,
    duration_ns: u64,
) -> CliResult<()> {
    use latlab_model::units::format_duration;
    let total = schedule.total_ns();
    if total <= duration_ns {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "{flag}: its phases last {}, longer than --duration {}: those from {} on would not run \
         (accepted: a --duration of {} or more, or a shorter schedule)",
        format_duration(total),
        format_duration(duration_ns),
        format_duration(duration_ns),
        format_duration(total)
    )))
}

/// The end of a command that checked limits: one line per limit exceeded, exit code 4; else
/// success.
pub fn gate_exit(breaches: &[latlab_report::gate::Breach]) -> std::process::ExitCode {
    for b in breaches {
        eprintln!("latlab: limit exceeded: {}", b.line());
    }
    if breaches.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(latlab_report::gate::EXIT_LIMIT)
    }
}

/// An output file named on the command line (`-` is stdout). Checked before anything runs, so a
/// path that cannot be written fails as bad input before anything is measured; written (created
/// or replaced) only at the end, so a refused command line never truncates an earlier file.
pub struct OutputFile {
    flag: &'static str,
    path: std::path::PathBuf,
}

impl OutputFile {
    pub fn open(flag: &'static str, path: &Option<std::path::PathBuf>) -> CliResult<Option<Self>> {
        let Some(path) = path else { return Ok(None) };
        let out = OutputFile {
            flag,
            path: path.clone(),
        };
        if out.is_stdout() {
            return Ok(Some(out));
        }
        let refused = |why: String| {
            CliError::Usage(format!(
                "{flag} {}: {why} (accepted: a writable file path)",
                path.display()
            ))
        };
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(refused("a directory".into())),
            // A store (a daemon's, perhaps, in use) named by mistake: written over, all it holds
            // would be lost, whichever command it belongs to.
            Ok(_) if latlab_store::begins_as_sqlite(path) => {
                return Err(CliError::Usage(format!(
                    "{flag} {}: an SQLite database (a store), which it would be written over \
                     (accepted: a path that holds no store)",
                    path.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                if !dir.is_dir() {
                    return Err(refused(format!("no directory {}", dir.display())));
                }
            }
            Err(e) => return Err(refused(e.to_string())),
        }
        latlab_sys::probe_write(path).map_err(|e| {
            refused(format!(
                "not writable: {}",
                latlab_tune::describe_io_error(&e)
            ))
        })?;
        Ok(Some(out))
    }

    /// Refuse outputs written over one another or over a file the command uses (`uses`: a
    /// description and the path of each, e.g. `--db` and the store): written at the end, they
    /// would destroy it after the measurement. Paths are compared as the files they name (a
    /// link, a hard link, `./x` alike); two outputs to stdout (`-`) would be mixed into one.
    pub fn refuse_clashes(outputs: &[&Option<Self>], uses: &[(&str, &Path)]) -> CliResult<()> {
        let mut taken: Vec<(String, FileId)> = uses
            .iter()
            .filter_map(|(what, p)| Some((what.to_string(), file_id(p)?)))
            .collect();
        let mut stdout: Option<&Self> = None;
        for o in outputs.iter().filter_map(|o| o.as_ref()) {
            if o.is_stdout() {
                if let Some(first) = stdout {
                    return Err(CliError::Usage(format!(
                        "{} {}: standard output is taken by {} {} (accepted: at most one \
                         output to -, the others to files)",
                        o.flag,
                        o.path.display(),
                        first.flag,
                        first.path.display()
                    )));
                }
                stdout = Some(o);
                continue;
            }
            let Some(file) = file_id(&o.path) else {
                continue;
            };
            if let Some((what, _)) = taken.iter().find(|(_, t)| *t == file) {
                return Err(CliError::Usage(format!(
                    "{} {}: the same file as {what}, which it would be written over \
                     (accepted: a path no other option of the command names)",
                    o.flag,
                    o.path.display()
                )));
            }
            taken.push((o.flag.to_string(), file));
        }
        Ok(())
    }

    /// Whether this output goes to stdout.
    pub fn is_stdout(&self) -> bool {
        names_stdout(&self.path)
    }

    /// Whether an error's JUnit may go here: standard output, a file not there yet, an empty
    /// one or an earlier JUnit report; never over another file (a store, a plan, a result) a
    /// mistaken `--junit` names, which the command did not get to use.
    pub fn takes_error_report(&self) -> bool {
        may_hold_junit(&self.path)
    }

    pub fn write(self, text: &str) -> anyhow::Result<()> {
        if self.flag == "--junit" {
            JUNIT_WRITTEN.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if self.is_stdout() {
            return Ok(write_stdout(text)?);
        }
        self.write_file(text)
    }

    /// Write a report of a run still under way (`text`: one case in error saying so) where
    /// the run's own will go, in place of what an earlier run left: a run killed before it
    /// writes its report (SIGKILL, the OOM killer, a node's shutdown) must not leave an earlier
    /// pass to be read as its own. Only into a file that may hold a JUnit report (never
    /// stdout); a failure to write is the final write's to say.
    pub fn write_provisional(&self, text: &str) {
        if !self.is_stdout() && self.takes_error_report() && self.write_file(text).is_ok() {
            JUNIT_PROVISIONAL.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn write_file(&self, text: &str) -> anyhow::Result<()> {
        use anyhow::Context;
        use std::io::Write;
        std::fs::File::create(&self.path)
            .and_then(|mut f| {
                // Synced to disk when it is a file: a device (`/dev/null`) or a pipe has no
                // disk to sync to, and refuses it (EINVAL).
                let file = f.metadata().is_ok_and(|m| m.is_file());
                let written = f
                    .write_all(text.as_bytes())
                    .and_then(|()| if file { f.sync_all() } else { Ok(()) });
                // A file cut short (a full file system) is no report: none is left. Only a
                // regular file: `/dev/full` and other devices stay.
                if written.is_err() && file {
                    let _ = std::fs::remove_file(&self.path);
                }
                written
            })
            .with_context(|| format!("writing {} {}", self.flag, self.path.display()))
    }
}

/// Whether an output path is standard output: `-`, or a name of this process's descriptor 1
/// (`/dev/stdout`): written as `-` is (the tables move to stderr), not opened again, which
/// truncated a redirected file and wrote over the tables from its start.
pub fn names_stdout(path: &Path) -> bool {
    ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]
        .iter()
        .any(|n| path == Path::new(n))
}

/// Whether this process wrote its `--junit` output (its results, or why it could not run).
pub static JUNIT_WRITTEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process wrote a report of a run under way to its `--junit` file
/// ([`OutputFile::write_provisional`]), which an error must replace.
static JUNIT_PROVISIONAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A command that failed after its report of a run under way was written: that report is
/// replaced by one saying why it failed (a refused command line is [`junit_of_refusal`]'s).
pub fn junit_of_failure(args: &[std::ffi::OsString], message: &str) {
    if JUNIT_PROVISIONAL.load(std::sync::atomic::Ordering::Relaxed) {
        junit_of_refusal(args, message);
    }
}

/// A refused command line of a command that writes `--junit FILE` (measure, run, check) writes
/// FILE too, with one case in error saying why, where the command has not written it: a JUnit
/// file an earlier run left must not read as this one's pass. `args`: the command line.
pub fn junit_of_refusal(args: &[std::ffi::OsString], message: &str) {
    if JUNIT_WRITTEN.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let Some(command) = args
        .get(1)
        .and_then(|c| c.to_str())
        .filter(|c| ["measure", "run", "check"].contains(c))
    else {
        return;
    };
    let path = args.iter().enumerate().find_map(|(i, a)| {
        let a = a.to_str()?;
        match a.strip_prefix("--junit") {
            Some("") => args.get(i + 1).map(std::path::PathBuf::from),
            Some(rest) => rest.strip_prefix('=').map(std::path::PathBuf::from),
            None => None,
        }
    });
    // A refusal of the path itself, or a file there that is not a JUnit report (the store or
    // the plan named by mistake), is not written over: the refusal is said already.
    if message.starts_with("--junit") || !path.as_deref().is_some_and(may_hold_junit) {
        return;
    }
    if let Ok(Some(out)) = OutputFile::open("--junit", &path) {
        let suite = latlab_report::junit::error_suite(command, message);
        if let Err(e) = out.write(&latlab_report::junit::render(&[suite])) {
            eprintln!("latlab: error: {e:#}");
        }
    }
}

/// Whether a refusal's JUnit may go to `path`: standard output, a file not there yet, an empty
/// one, or a JUnit report (an earlier run's, which must not read as this one's pass).
fn may_hold_junit(path: &Path) -> bool {
    use std::io::Read;
    if names_stdout(path) {
        return true;
    }
    // A pipe or a device holds nothing to lose (and a pipe read would be waited on for ever).
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return true;
    }
    // Not there (a link to a file not there yet included).
    let Ok(mut file) = std::fs::File::open(path) else {
        return !path.exists();
    };
    let mut head = [0u8; 512];
    let n = file.read(&mut head).unwrap_or(0);
    let text = String::from_utf8_lossy(&head[..n]);
    let text = text.trim_start();
    text.is_empty() || (text.starts_with('<') && text.contains("<testsuite"))
}

/// Write `text` to standard output. A reader that stops early (`| head`) is not an error: what
/// it read is what it wanted.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// A file as the system knows it: its device and inode where it exists (a link or a hard link
/// to it is the same file); else its resolved directory and its name.
#[derive(Debug, PartialEq)]
enum FileId {
    Inode(u64, u64),
    Path(std::path::PathBuf),
}

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::metadata(path) {
        return Some(FileId::Inode(m.dev(), m.ino()));
    }
    // A link to a file not there yet names the file it creates.
    let path = latlab_sys::link_target(path);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Some(FileId::Path(
        std::fs::canonicalize(dir).ok()?.join(path.file_name()?),
    ))
}

/// The files of the store at `db` a command keeps open: the store and its journals, each
/// described for [`OutputFile::refuse_clashes`].
pub fn store_files(db: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut files = vec![("the store", db.to_path_buf())];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_os_string();
        p.push(suffix);
        files.push(("the store's journal", p.into()));
    }
    files
}

/// Map a refused value to a usage error naming the option: `--what: problem (accepted: …)`.
pub fn usage<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> CliError + '_ {
    move |e| CliError::Usage(format!("{what}: {e}"))
}

/// Open (or create) the store at `path` for writing. A file that is not a store, or one too new,
/// is bad input for `--db`; the commands that measure call this before measuring.
pub fn open_store(path: &Path) -> CliResult<Store> {
    check_store_path(path)?;
    let opened = if path.exists() {
        Store::open_to_write(path)
    } else {
        Store::open(path)
    };
    opened.map_err(|e| match e {
        // A full or failing disk is no bad input: the same command may succeed later (a file
        // that cannot be read is the one named, and stays bad input).
        e if e.is_storage_failure()
            && !matches!(e, StoreError::Missing(_) | StoreError::Read { .. }) =>
        {
            CliError::Failed(anyhow::anyhow!("--db: {e}"))
        }
        StoreError::Migration { .. } => CliError::Failed(anyhow::Error::new(e)),
        e @ (StoreError::NotAStore { .. }
        | StoreError::TooNew { .. }
        | StoreError::HardLinked { .. }) => CliError::Usage(format!("--db: {e}")),
        e @ StoreError::NotWritable { .. } => CliError::Usage(format!(
            "--db: {e} (accepted: a store this user can write, or a new file)"
        )),
        e => CliError::Usage(format!(
            "--db {}: {e} (accepted: a latlab store or a new file)",
            path.display()
        )),
    })
}

/// Whether load specs or a load schedule name rt-hog, the one load `--force` is for (it lets
/// rt-hog start with RT throttling off).
pub fn names_rt_hog(specs: &[String], schedule: Option<&String>) -> bool {
    specs.iter().chain(schedule).any(|s| s.contains("rt-hog"))
}

/// ` --db PATH` for a command latlab prints to be copied, when a store was named.
pub fn db_option(db: Option<&Path>) -> String {
    db.map(|d| format!(" --db {}", latlab_model::units::shell_path(d)))
        .unwrap_or_default()
}

/// A `--db` path a store can be at or made at: its directory exists, and it is no directory
/// itself (checked before anything is printed or run).
pub fn check_store_path(path: &Path) -> CliResult<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--db {}: no directory {} (accepted: a latlab store or a new file)",
            path.display(),
            dir.display()
        )));
    }
    if path.is_dir() {
        return Err(CliError::Usage(format!(
            "--db {}: a directory, not a store (accepted: a latlab store or a new file)",
            path.display()
        )));
    }
    latlab_store::check_file(path).map_err(|e| match e {
        e @ StoreError::NotAStore { .. } => CliError::Usage(format!(
            "--db: {e} (accepted: a latlab store or a new file)"
        )),
        e => CliError::Usage(format!("--db: {e}")),
    })?;
    // Another file named by mistake is refused before anything is printed or measured (its
    // header read; an empty file becomes a store).
    if std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
        && let Err(e @ (StoreError::NotAStore { .. } | StoreError::TooNew { .. })) =
            latlab_store::identify(path)
    {
        return Err(CliError::Usage(format!(
            "--db: {e} (accepted: a latlab store or a new file)"
        )));
    }
    Ok(())
}

/// Open the existing store at `path` to read (read-only where this user may not write it). A
/// missing one, a foreign file or a newer schema is bad input (a wrong `--db`); anything else is
/// a failure.
pub fn open_existing(path: &Path) -> CliResult<Store> {
    open_existing_with(path, |p| Store::open_to_read(p))
}

/// Open the existing store at `path` for a command that changes it; one this user may not write
/// is bad input too.
pub fn open_existing_to_change(path: &Path) -> CliResult<Store> {
    open_existing_with(path, |p| Store::open_to_write(p))
}

fn open_existing_with(
    path: &Path,
    open: fn(&Path) -> latlab_store::Result<Store>,
) -> CliResult<Store> {
    const WRITTEN_BY: &str = "a store written by `latlab measure --db`, `latlab run` or `latlab \
                              monitor`; --db PATH or LATLAB_DB name another";
    if path.is_dir() {
        return Err(CliError::Usage(format!(
            "--db {}: a directory, not a store (accepted: {WRITTEN_BY})",
            path.display()
        )));
    }
    open(path).map_err(|e| match e {
        StoreError::Missing(_) => CliError::Usage(format!(
            "no store at {} (accepted: {WRITTEN_BY})",
            path.display()
        )),
        e @ StoreError::NotAStore { .. } => {
            CliError::Usage(format!("--db: {e} (accepted: {WRITTEN_BY})"))
        }
        e @ (StoreError::TooNew { .. }
        | StoreError::HardLinked { .. }
        | StoreError::ReadOnlyOld { .. }) => CliError::Usage(format!("--db: {e}")),
        e @ StoreError::NotWritable { .. } => {
            CliError::Usage(format!("--db: {e} (accepted: a store this user can write)"))
        }
        e => CliError::Failed(anyhow::Error::new(e)),
    })
}

/// The profile directories to read: the default ones, then each `--profile-dir` (which wins
/// over them, as later directories do); a `--profile-dir` that is not a directory is bad input.
pub fn profile_dirs(
    sys: &latlab_sys::Sys,
    given: &[std::path::PathBuf],
) -> CliResult<Vec<std::path::PathBuf>> {
    let mut dirs = latlab_tune::Profiles::default_dirs(sys);
    for d in given {
        if !d.is_dir() {
            return Err(CliError::Usage(format!(
                "--profile-dir {}: no such directory (accepted: a directory of profile files)",
                d.display()
            )));
        }
        dirs.push(d.clone());
    }
    Ok(dirs)
}

/// Where a command's progress lines go: stdout, or stderr where `--junit -` writes the XML to
/// stdout (a JUnit reader takes stdout whole).
#[derive(Clone, Copy)]
pub(crate) struct Say {
    to_stderr: bool,
}

impl Say {
    pub(crate) const STDOUT: Say = Say { to_stderr: false };

    /// Beside the `--junit` output `junit`.
    pub(crate) fn beside(junit: &Option<std::path::PathBuf>) -> Say {
        Say {
            to_stderr: junit.as_deref().is_some_and(names_stdout),
        }
    }

    /// `text` as it is (a table ending in its newline).
    pub(crate) fn text(self, text: &str) {
        if self.to_stderr {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }

    pub(crate) fn line(self, text: impl std::fmt::Display) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    /// Loopback however written (an IPv4 address mapped into IPv6 too) is served without a web
    /// configuration; an address other machines reach is not.
    #[test]
    fn loopback_needs_no_web_config() {
        let web = super::WebArgs::default();
        for ok in ["127.0.0.1:9", "[::1]:9", "[::ffff:127.0.0.1]:9"] {
            let addr = ok.parse().unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert!(web.resolve(Some(addr)).is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0:9", "[::ffff:10.0.0.1]:9", "[::]:9"] {
            let addr = refused.parse().unwrap_or_else(|e| panic!("{refused}: {e}"));
            assert!(web.resolve(Some(addr)).is_err(), "{refused}");
        }
    }

    /// A printed `--db` names the store from wherever the command is pasted.
    #[test]
    fn a_word_is_quoted_only_where_a_shell_would_split_or_expand_it() {
        use super::db_option;
        assert_eq!(db_option(None), "");
        assert_eq!(
            db_option(Some(std::path::Path::new("/x/l.db"))),
            " --db /x/l.db"
        );
        let cwd = std::env::current_dir().unwrap_or_else(|e| panic!("cwd: {e}"));
        assert_eq!(
            db_option(Some(std::path::Path::new("l.db"))),
            format!(" --db {}", cwd.join("l.db").display()),
            "a relative path is made absolute, so the command works from any directory"
        );
    }
}
