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

/// A duration whose bare number is days (`--retention 90`).
pub fn days(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, Some("d")).map(Ns)
}

/// A duration that must name its unit (`--window 5m`).
pub fn with_unit(text: &str) -> Result<Ns, ParseError> {
    parse_duration(text, None).map(Ns)
}

/// `--cpus`: a CPU list, or `all` (every online CPU).
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

/// `--listen`: an address, or `off` (no web server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listen(pub Option<std::net::SocketAddr>);

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(text: &str) -> Result<Listen, String> {
        if text == "off" || text == "none" {
            return Ok(Listen(None));
        }
        text.parse().map(|a| Listen(Some(a))).map_err(|_| {
            format!(
                "{text:?} is not an address (accepted: IP:PORT, e.g. 127.0.0.1:9464 or \
                 [::1]:9464, or off)"
            )
        })
    }
}

/// The measuring options of every command that measures (`#[command(flatten)]`). The interval
/// and the window are not here: their defaults differ by command (1ms and 1s for a run, 200us
/// and 5m for the monitor).
#[derive(Args, Debug, Clone)]
pub struct MeasureOpts {
    /// One pinned measuring thread per listed CPU, or all (default: every online CPU).
    #[arg(short = 'a', long, value_name = "LIST")]
    pub cpus: Option<Cpus>,

    /// Real-time priority for fifo and rr (1..99).
    #[arg(short = 'p', long, default_value_t = 95, value_name = "1..99")]
    pub priority: u32,

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
    /// monitor uses at most a fifth of its window.
    #[arg(long, default_value = "1s", value_name = "DUR", value_parser = secs)]
    pub sample_period: Ns,
}

impl MeasureOpts {
    /// The configuration these options give, pinned to `--cpus` (default: every online CPU),
    /// without an end; the command sets what is its own on top.
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
                self.priority
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
        if self.sample_period.0 < 10_000_000 {
            return Err(CliError::Usage(format!(
                "--sample-period {}: too short (accepted: 10ms or more)",
                latlab_model::units::format_duration(self.sample_period.0)
            )));
        }
        Ok(self.sample_period.0)
    }
}

/// Map a refused value to a usage error naming the option: `--what: problem (accepted: …)`.
pub fn usage<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> CliError + '_ {
    move |e| CliError::Usage(format!("{what}: {e}"))
}

/// Open (or create) the store at `path` for writing. A file that is not a store, or one too new,
/// is bad input for `--db`; the commands that measure call this before measuring.
pub fn open_store(path: &Path) -> CliResult<Store> {
    Store::open(path).map_err(|e| match e {
        StoreError::Migration { .. } => CliError::Failed(anyhow::Error::new(e)),
        e @ (StoreError::NotAStore { .. } | StoreError::TooNew { .. }) => {
            CliError::Usage(format!("--db: {e}"))
        }
        e => CliError::Usage(format!(
            "--db {}: {e} (accepted: a latlab store or a new file)",
            path.display()
        )),
    })
}

/// Open the existing store at `path` to read. A missing one, a foreign file or a newer schema is
/// bad input (a wrong `--db`); anything else is a failure.
pub fn open_existing(path: &Path) -> CliResult<Store> {
    Store::open_existing(path).map_err(|e| match e {
        StoreError::Missing(_) => CliError::Usage(format!(
            "no store at {} (accepted: a store written by `latlab measure --db` or `latlab run`; \
             --db PATH or LATLAB_DB name another)",
            path.display()
        )),
        e @ (StoreError::NotAStore { .. } | StoreError::TooNew { .. }) => {
            CliError::Usage(format!("--db: {e}"))
        }
        e => CliError::Failed(anyhow::Error::new(e)),
    })
}
