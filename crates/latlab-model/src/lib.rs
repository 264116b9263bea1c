//! latlab's versioned result schema.
//!
//! [`RunResult`] is the one model every part of latlab writes and reads: `latlab measure --json`
//! is its serialization; stores, reports, exports and imports consume or make it. The monitor's
//! windows, window sets and series configuration are its own types (`monitor`). Types here are
//! plain serde data with no behaviour that touches the system.
//!
//! Compatibility rule: fields are only ever added (with `#[serde(default)]` so older files still
//! read); a change in meaning raises [`SCHEMA_VERSION`]. Units: nanoseconds (`_ns`) as `u64`
//! unless a name says otherwise.

use latlab_hist::Histogram;
use serde::{Deserialize, Serialize};

pub mod load;
pub mod monitor;
pub mod rng;
pub mod samples;
pub mod system;
mod time;
pub mod trace;
pub mod units;
pub use time::{civil_from_days, days_from_civil, parse_rfc2822, rfc2822_utc, rfc3339_utc};

/// The value of [`RunResult::schema`].
pub const SCHEMA: &str = "latlab.run";
/// The version of the schema this build writes; it reads every version up to this one.
pub const SCHEMA_VERSION: u32 = 1;

/// How a run's warning of other processes' real-time threads on its CPUs begins (the list of
/// them follows a `: `): reports gather these by their beginning, as the PIDs differ.
pub const COMPETING_WARNING: &str = "real-time threads of other processes that can hold off the \
     measuring threads (deadline threads, or threads at or above their priority) may run on the \
     measured CPUs and delay their wake-ups";

/// How the first warning of an imported run begins (`imported from FILE (FORMAT): …`):
/// reports call its lines notes on a file, not a run's warnings.
pub const IMPORTED_FROM: &str = "imported from ";

/// [`COMPETING_WARNING`] as runs stored before it was worded so begin.
const COMPETING_WARNING_BEFORE: &str = "real-time threads of other processes that outrank the \
     measuring threads may run on the measured CPUs and delay their wake-ups";

/// The list of processes of a warning that begins as [`COMPETING_WARNING`] does (or as it did
/// before); `None` for any other warning.
pub fn competing_list(warning: &str) -> Option<&str> {
    [COMPETING_WARNING, COMPETING_WARNING_BEFORE]
        .iter()
        .find_map(|w| warning.strip_prefix(w))
        .map(|rest| rest.trim_start_matches(": "))
}

/// How the measuring thread waits for (or is woken at) each period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// `clock_nanosleep` to an absolute deadline (or relative with `relative`).
    ClockNanosleep,
    /// `nanosleep` (always relative).
    Nanosleep,
    /// A periodic absolute `timerfd`, `read()` per period.
    Timerfd,
    /// A periodic absolute POSIX timer delivering a signal, taken with `sigwaitinfo`.
    PosixTimer,
    /// `ppoll` with no descriptors and a timeout.
    Poll,
    /// `pselect` with no descriptors and a timeout.
    Select,
    /// Spin on the clock; every gap between two reads is a sample (OS noise, like oslat).
    Busy,
    /// A waker thread wakes the measuring thread through a futex.
    Futex,
    /// ... through an eventfd.
    Eventfd,
    /// ... through a pipe.
    Pipe,
    /// ... through a signal sent to the thread.
    Signal,
}

impl Method {
    pub const ALL: [Method; 11] = [
        Method::ClockNanosleep,
        Method::Nanosleep,
        Method::Timerfd,
        Method::PosixTimer,
        Method::Poll,
        Method::Select,
        Method::Busy,
        Method::Futex,
        Method::Eventfd,
        Method::Pipe,
        Method::Signal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::ClockNanosleep => "clock-nanosleep",
            Method::Nanosleep => "nanosleep",
            Method::Timerfd => "timerfd",
            Method::PosixTimer => "posix-timer",
            Method::Poll => "poll",
            Method::Select => "select",
            Method::Busy => "busy",
            Method::Futex => "futex",
            Method::Eventfd => "eventfd",
            Method::Pipe => "pipe",
            Method::Signal => "signal",
        }
    }

    pub fn from_name(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Thread-to-thread methods: a waker thread starts each period.
    pub fn is_wakeup(self) -> bool {
        matches!(
            self,
            Method::Futex | Method::Eventfd | Method::Pipe | Method::Signal
        )
    }

    /// Methods whose timeout is relative to the last clock read (never absolute).
    pub fn always_relative(self) -> bool {
        matches!(self, Method::Nanosleep | Method::Poll | Method::Select)
    }
}

/// Scheduling policy of the measuring threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    Fifo,
    Rr,
    Other,
    Batch,
    Idle,
    Deadline,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Fifo,
        Policy::Rr,
        Policy::Other,
        Policy::Batch,
        Policy::Idle,
        Policy::Deadline,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
            Policy::Deadline => "deadline",
        }
    }
    pub fn from_name(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }
    /// FIFO and RR take a priority 1..99.
    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }
}

/// The clock every deadline and timestamp is taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    Monotonic,
    Realtime,
}

impl Clock {
    pub const ALL: [Clock; 2] = [Clock::Monotonic, Clock::Realtime];
    pub fn name(self) -> &'static str {
        match self {
            Clock::Monotonic => "monotonic",
            Clock::Realtime => "realtime",
        }
    }
}

/// The one-line refusal of an unknown name, with the accepted ones.
fn unknown(what: &str, text: &str, accepted: impl Iterator<Item = &'static str>) -> String {
    format!(
        "unknown {what} {text:?} (accepted: {})",
        accepted.collect::<Vec<_>>().join(", ")
    )
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Method, String> {
        Method::from_name(s)
            .ok_or_else(|| unknown("method", s, Method::ALL.map(Method::name).into_iter()))
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::from_name(s)
            .ok_or_else(|| unknown("policy", s, Policy::ALL.map(Policy::name).into_iter()))
    }
}

impl std::str::FromStr for Clock {
    type Err = String;
    fn from_str(s: &str) -> Result<Clock, String> {
        Clock::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| unknown("clock", s, Clock::ALL.map(Clock::name).into_iter()))
    }
}

/// SCHED_DEADLINE parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// The validated configuration of one measurement (what the user asked for, after defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureConfig {
    pub interval_ns: u64,
    /// Run length; `None` with `loops` `None` means until interrupted.
    pub duration_ns: Option<u64>,
    /// Periods per thread; `None` means bounded by `duration_ns` or by an interrupt.
    pub loops: Option<u64>,
    /// One pinned thread per listed CPU; `None` when threads are unpinned.
    pub cpus: Option<Vec<u32>>,
    /// Number of measuring threads.
    pub threads: u32,
    pub policy: Policy,
    /// Real-time priority (FIFO/RR), 0 otherwise.
    pub priority: u32,
    pub deadline: Option<DeadlineParams>,
    pub method: Method,
    /// Relative sleeps (`clock-nanosleep --relative`, and always for nanosleep/poll/select).
    pub relative: bool,
    pub clock: Clock,
    /// Timer slack set on every measuring thread.
    pub timer_slack_ns: u64,
    /// PM QoS `/dev/cpu_dma_latency` value held for the run, `None` to leave the system alone.
    pub pm_qos_us: Option<u32>,
    /// Whether `mlockall` was requested.
    pub mlock: bool,
    pub window_ns: u64,
    pub spike_threshold_ns: Option<u64>,
    /// Most spikes kept over the run; further ones are only counted.
    pub spike_limit: u32,
    pub break_threshold_ns: Option<u64>,
    /// CPU of the waker threads for thread-to-thread methods: as asked, and in a result the
    /// one every waker ran on (`None` there: each waker ran on the CPU after its thread's, as
    /// every CPU was measured).
    pub waker_cpu: Option<u32>,
    /// Spread thread phases: thread `i` of `n` is offset by `i * interval / n`, so CPUs do not
    /// all take their timers at the same instant (by default every thread shares one phase).
    #[serde(default)]
    pub stagger: bool,
}

/// Basic facts of the system a result was taken on. Richer records extend this with added fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SystemInfo {
    pub hostname: String,
    pub kernel_release: String,
    pub kernel_version: String,
    pub machine: String,
    pub cpu_model: String,
    pub cpus_online: Vec<u32>,
    pub cpus_possible: u32,
    /// Preempt model as far as known (`none`, `voluntary`, `full`, `lazy`, `rt`), with its source.
    pub preempt: String,
    pub cmdline: String,
    pub clocksource: String,
    /// Everything below is the full inventory (`latlab sysinfo`); older results lack it.
    pub kernel_config: system::Field<system::KernelConfig>,
    pub boot: system::BootOptions,
    pub cpu: system::CpuTopology,
    pub cpufreq: system::Field<Vec<system::CpuFreq>>,
    pub cpuidle: system::Field<system::CpuIdle>,
    pub pm_qos: system::PmQos,
    pub rt_throttling: system::RtThrottling,
    pub timer_migration: system::Field<u32>,
    pub irq_affinity: system::Field<system::IrqAffinity>,
    pub services: system::Services,
    pub virtualization: system::Virtualization,
    /// RLIMIT_MEMLOCK of latlab's process (soft/hard), where known.
    pub memlock_limit: system::Field<String>,
    pub transparent_hugepage: system::Field<String>,
    pub swappiness: system::Field<u32>,
    pub vulnerabilities: Vec<(String, String)>,
    /// The power meters the samplers can read, or what was looked at when there are none;
    /// `None` in records from before latlab listed them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_meters: Option<system::Field<Vec<system::PowerMeter>>>,
    /// System Management Interrupts per CPU since boot (MSR_SMI_COUNT), or why they cannot be
    /// read; `None` in records from before latlab read them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smi_count: Option<system::Field<Vec<(u32, u64)>>>,
}

impl SystemInfo {
    /// Whether the kernel is built with `option` ([`system::kernel_built_with`]).
    pub fn kernel_built_with(&self, option: &str) -> bool {
        system::kernel_built_with(&self.kernel_version, self.kernel_config.value(), option)
    }
}

/// How the run went: what latlab could set up, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunEnvironment {
    pub memory_locked: bool,
    /// Why memory is not locked, when it is not.
    pub mlock_error: Option<String>,
    /// PM QoS value actually held (`None`: the system's setting was left alone).
    pub pm_qos_held_us: Option<u32>,
    /// CPUs the coordinating thread was allowed to run on.
    pub coordinator_cpus: Vec<u32>,
    /// True when no CPU outside the measured ones exists for the coordinator.
    pub coordinator_shares_measured_cpus: bool,
    pub euid: u32,
    /// Where a `--break` marker went, if one was written.
    pub trace_marker: Option<String>,
    pub warnings: Vec<String>,
    /// The tuning profile applied for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// What the profile changed for the run, `knob: old -> new` (restored afterwards).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tuning: Vec<String>,
    /// The run comes from a format that does not count missed periods (an import): its
    /// `missed` counts are 0 because unknown, not because none were missed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missed_unrecorded: bool,
    /// What the run's format does not record (an import), so that its default value in this
    /// record means "unknown": [`Unrecorded::MEMORY`], [`Unrecorded::METHOD`],
    /// [`Unrecorded::SYSTEM`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_recorded: Vec<String>,
}

/// The names [`RunEnvironment::not_recorded`] holds.
pub struct Unrecorded;

impl Unrecorded {
    /// Whether memory was locked (`memory_locked` is false because unknown).
    pub const MEMORY: &'static str = "memory";
    /// How the thread slept (`config.method` is the default because unknown).
    pub const METHOD: &'static str = "method";
    /// The system beyond its host and kernel names (the rest of `system` is empty).
    pub const SYSTEM: &'static str = "system";
    /// Whether and where the threads were pinned (`config.cpus` is `None` because unknown).
    pub const CPUS: &'static str = "cpus";
    /// Whether PM QoS was held (`environment.pm_qos_held_us` is `None` because unknown).
    pub const PM_QOS: &'static str = "pm-qos";
    /// In a command line an export writes (`cyclictest --json`'s `cmdline:`): what follows
    /// names, comma-separated, what the line leaves out for not being known, so an import of
    /// the file does not take latlab's defaults for it. Besides the names above: [`Self::INTERVAL`]
    /// and [`Self::PRIORITY`] (a run keeps those unknown as 0, not in `not_recorded`).
    pub const MARK: &'static str = "# not recorded: ";
    pub const INTERVAL: &'static str = "interval";
    /// The real-time priority, and so the policy.
    pub const PRIORITY: &'static str = "priority";
}

/// Why the measurement ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum StopReason {
    Duration,
    Loops,
    Signal { signal: String },
    Break { thread: u32, value_ns: u64 },
}

impl StopReason {
    /// Its name, as the JSON's `reason` tag writes it (the store's `stop` column too).
    pub fn name(&self) -> &'static str {
        match self {
            StopReason::Duration => "duration",
            StopReason::Loops => "loops",
            StopReason::Signal { .. } => "signal",
            StopReason::Break { .. } => "break",
        }
    }
}

/// Summary statistics of one histogram, in nanoseconds.
///
/// A cache, not the truth: the histogram is the truth, with the exact percentiles an import
/// carries beyond it. Stored `Stats` always equal `Stats::of(&histogram).with_exact(&exact)`, kept
/// so lists and summaries need not decode histograms; reports that pool or recompute start from
/// the histograms, and `latlab db check` verifies count, minimum and maximum against them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
    /// Percentiles the source of an imported result computed from all its samples, where the
    /// histogram gives only a lower bound (their samples lie beyond its range). Exact: the
    /// fields above hold these values ([`Stats::with_exact`]). Empty for latlab's own runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exact_percentiles: Vec<ExactPercentile>,
    /// The mean and the standard deviation the source of an imported result computed from all
    /// its samples (ns), where its histogram gives only bounds: `mean` and `stdev` hold them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_stdev: Option<f64>,
    /// Where an imported histogram's range ended: the samples recorded at or above it are
    /// known only to lie there or beyond (cyclictest's overflows), so an export counts them as
    /// overflows, never as values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounded_from_ns: Option<u64>,
}

/// One percentile known exactly, e.g. one stress-ng printed (`99.00%: 820666 ns`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExactPercentile {
    /// The percentile, 0–100 (`99.9` for p99.9).
    pub percentile: f64,
    pub value_ns: u64,
}

impl Stats {
    pub fn of(h: &Histogram) -> Stats {
        Stats {
            count: h.count(),
            min: h.min(),
            mean: h.mean(),
            stdev: h.stdev(),
            p50: h.percentile(50.0),
            p90: h.percentile(90.0),
            p99: h.percentile(99.0),
            p99_9: h.percentile(99.9),
            p99_99: h.percentile(99.99),
            max: h.max(),
            exact_percentiles: Vec::new(),
            exact_mean: None,
            exact_stdev: None,
            bounded_from_ns: None,
        }
    }

    /// These statistics with `exact` kept: each percentile field `exact` names takes its value.
    /// Statistics of the histogram a result's own `exact_percentiles` belong to (a run's, a
    /// thread's) are made whole with them; statistics of merged histograms are not.
    pub fn with_exact(mut self, exact: &[ExactPercentile]) -> Stats {
        for e in exact {
            let field = match e.percentile {
                50.0 => &mut self.p50,
                90.0 => &mut self.p90,
                99.0 => &mut self.p99,
                99.9 => &mut self.p99_9,
                99.99 => &mut self.p99_99,
                _ => continue,
            };
            *field = e.value_ns;
        }
        self.exact_percentiles = exact.to_vec();
        self
    }

    /// Whether the value of a percentile (0–100) is only a lower bound: it lies among an import's
    /// samples beyond its histogram's range (below the exact maximum, which the top ranks are),
    /// and the source did not print it.
    pub fn percentile_is_lower_bound(&self, percentile: f64, value_ns: u64) -> bool {
        self.bounded_from_ns
            .is_some_and(|b| value_ns >= b && value_ns < self.max)
            && !self
                .exact_percentiles
                .iter()
                .any(|e| (e.percentile - percentile).abs() < 1e-9)
    }

    /// A percentile's value as shown: where it is only a lower bound
    /// ([`Stats::percentile_is_lower_bound`]), the bound itself, the end of the histogram's
    /// range (the histogram keeps those samples a little past it, where no reader puts them
    /// inside the range); else the value.
    pub fn percentile_shown(&self, percentile: f64, value_ns: u64) -> u64 {
        match self.bounded_from_ns {
            Some(b) if self.percentile_is_lower_bound(percentile, value_ns) => b,
            _ => value_ns,
        }
    }

    /// Whether the mean is only a lower bound (samples beyond an import's histogram range, and
    /// no mean printed by the source).
    pub fn mean_is_lower_bound(&self) -> bool {
        self.bounded_from_ns.is_some() && self.exact_mean.is_none()
    }

    /// Whether the standard deviation is only a lower bound, as the mean: the samples beyond
    /// the range are counted at its end, above the mean, where moving any of them further up
    /// only widens the spread.
    pub fn stdev_is_lower_bound(&self) -> bool {
        self.bounded_from_ns.is_some() && self.exact_stdev.is_none()
    }

    /// These statistics of the merged histograms of `parts` with the mean (and standard
    /// deviation) made exact where some part's is and every other's is known: the
    /// count-weighted mean of the means, and the population deviation from each part's
    /// deviation and its distance from that mean. A part whose samples all lie within its
    /// histogram gives its histogram's mean; one with samples beyond it and no mean printed
    /// leaves the merged histogram's, a lower bound.
    pub fn with_pooled_exact<'a>(mut self, parts: impl IntoIterator<Item = &'a Stats>) -> Stats {
        let parts: Vec<&Stats> = parts.into_iter().filter(|p| p.count > 0).collect();
        let n: f64 = parts.iter().map(|p| p.count as f64).sum();
        if parts.iter().all(|p| p.exact_mean.is_none()) {
            return self;
        }
        let Some(means) = parts
            .iter()
            .map(|p| match (p.exact_mean, p.bounded_from_ns) {
                (Some(m), _) => Some((p.count as f64, m, p.exact_stdev)),
                (None, None) => Some((p.count as f64, p.mean, Some(p.stdev))),
                (None, Some(_)) => None,
            })
            .collect::<Option<Vec<_>>>()
            .filter(|m| !m.is_empty())
        else {
            return self;
        };
        let mean = means.iter().map(|(k, m, _)| k * m).sum::<f64>() / n;
        (self.mean, self.exact_mean) = (mean, Some(mean));
        if let Some(var) = means
            .iter()
            .map(|(k, m, d)| d.map(|d| k * (d * d + (m - mean) * (m - mean))))
            .sum::<Option<f64>>()
        {
            let stdev = (var / n).sqrt();
            (self.stdev, self.exact_stdev) = (stdev, Some(stdev));
        }
        self
    }

    /// [`Stats::with_exact`] with every exact figure `known` carries: its percentiles, and its
    /// mean and standard deviation where the source gave them.
    pub fn with_exact_of(self, known: &Stats) -> Stats {
        let mut s = self.with_exact(&known.exact_percentiles);
        if let Some(m) = known.exact_mean {
            (s.mean, s.exact_mean) = (m, Some(m));
        }
        if let Some(d) = known.exact_stdev {
            (s.stdev, s.exact_stdev) = (d, Some(d));
        }
        s.bounded_from_ns = known.bounded_from_ns;
        s
    }
}

/// One closed window of one measuring thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Window number, from 0 at the run's start.
    pub index: u64,
    /// Start of the window, nanoseconds after the run's start.
    pub start_ns: u64,
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub p99: u64,
    pub missed: u64,
}

/// One sample above the spike threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spike {
    /// Index into [`RunResult::threads`].
    pub thread: u32,
    pub cpu: Option<u32>,
    /// When the period started (its deadline), nanoseconds after the run's start.
    pub at_ns: u64,
    pub value_ns: u64,
    /// What the kernel did on the CPU between the deadline and the thread running (runs with
    /// `--trace`; absent when the story could not be read in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story: Option<trace::SpikeStory>,
}

/// Spikes a measuring thread keeps in one window; beyond it the largest stay.
pub const SPIKES_PER_WINDOW: usize = 1024;

/// Spikes kept over the run, and how many more were seen but not kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spikes {
    pub threshold_ns: Option<u64>,
    pub kept: Vec<Spike>,
    pub not_kept: u64,
}

/// The result of one measuring thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadResult {
    /// `cpu3` for a pinned thread, `thread3` for an unpinned one.
    pub label: String,
    pub cpu: Option<u32>,
    pub tid: i32,
    /// Periods that passed without a sample (a stall covered them); never dropped silently.
    pub missed: u64,
    /// Periods the run's length called for, where it is bounded by time or loops.
    pub expected_periods: Option<u64>,
    /// When the maximum happened, nanoseconds after the run's start.
    pub max_at_ns: u64,
    /// Statistics of the raw samples.
    pub stats: Stats,
    /// Statistics with the samples missed periods would have produced added (each missed period
    /// is counted with the latency it would have had: the stall minus its distance to the deadline).
    /// For wake-up methods the missed periods before a wake (the waker's, which it slept
    /// through, and wakes that came while the woken thread was not running) count at the
    /// latency of that wake plus their distance to its deadline. Runs stored before latlab
    /// counted the waker's left them out of these statistics.
    pub corrected: Stats,
    /// CPU time the thread used (from the kernel's schedstat), where readable.
    pub cpu_time_ns: Option<u64>,
    pub histogram: Histogram,
    pub corrected_histogram: Histogram,
    pub windows: Vec<Window>,
}

/// All threads together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overall {
    pub missed: u64,
    pub max_at_ns: u64,
    /// Index of the thread that saw the maximum.
    pub max_thread: u32,
    pub stats: Stats,
    pub corrected: Stats,
    pub histogram: Histogram,
}

/// One latlab run: configuration, system, statistics, histograms, windows and spikes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Always [`SCHEMA`].
    pub schema: String,
    pub schema_version: u32,
    pub latlab_version: String,
    pub id: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub ended_at: String,
    /// Wall-clock start, nanoseconds since the Unix epoch (to turn `*_ns` offsets into times);
    /// 0 when unknown (a result imported from a format without a start time, whose `started_at`
    /// and `ended_at` are then empty): see [`known_time`].
    pub start_unix_ns: u64,
    /// Measured length of the run; 0 when unknown (an import from a format without one).
    pub elapsed_ns: u64,
    pub config: MeasureConfig,
    pub system: SystemInfo,
    pub environment: RunEnvironment,
    pub stop: StopReason,
    pub threads: Vec<ThreadResult>,
    pub overall: Overall,
    pub spikes: Spikes,
    /// What the samplers saw beside the measurement (absent with `--no-samplers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<samples::Samples>,
    /// Loads that ran during the measurement and the work they did.
    #[serde(default, skip_serializing_if = "load::Loads::is_empty")]
    pub loads: load::Loads,
    /// Kernel-side latencies traced beside the measurement (`--trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<trace::TraceResult>,
}

/// Errors of reading a result file.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("not a latlab result: {0}")]
    NotAResult(String),
    #[error(
        "result schema version {found} is newer than this latlab reads ({supported}); upgrade latlab"
    )]
    TooNew { found: u32, supported: u32 },
    #[error("invalid result JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// `start_unix_ns` or `elapsed_ns` (of a result, or of a stored run's summary) as known: `None`
/// for 0, which stands for "the source did not say" (no run starts at the epoch or lasts 0 ns).
pub fn known_time(ns: u64) -> Option<u64> {
    (ns != 0).then_some(ns)
}

/// A run's `started_at` text where its start is known: `None` for an import from a format
/// without a start time, whatever an older store kept as its text (the epoch, once).
pub fn known_start(start_unix_ns: u64, started_at: &str) -> Option<&str> {
    known_time(start_unix_ns).map(|_| started_at)
}

/// The overall statistics and corrected statistics of `threads`, whose histograms merge to
/// `histogram` and `corrected`: a single thread's own (with any exact percentiles it carries).
fn overall_stats(
    threads: &[ThreadResult],
    histogram: &Histogram,
    corrected: &Histogram,
) -> (Stats, Stats) {
    match threads {
        [only] => (only.stats.clone(), only.corrected.clone()),
        _ => {
            // Pooled, a value is a lower bound from the lowest range any thread's ended at.
            let bounded = threads.iter().filter_map(|t| t.stats.bounded_from_ns).min();
            let stats = Stats::of(histogram).with_pooled_exact(threads.iter().map(|t| &t.stats));
            let corrected =
                Stats::of(corrected).with_pooled_exact(threads.iter().map(|t| &t.corrected));
            let (mut stats, mut corrected) = (stats, corrected);
            (stats.bounded_from_ns, corrected.bounded_from_ns) = (bounded, bounded);
            (stats, corrected)
        }
    }
}

/// An interval as tables and lines write it: `1ms`, or `-` for 0 (unknown).
pub fn interval_text(interval_ns: u64) -> String {
    if interval_ns == 0 {
        "-".into()
    } else {
        units::format_duration(interval_ns)
    }
}

impl MeasureConfig {
    /// The policy as tables and lines write it: `fifo 95`, `other`, `deadline 100us/1ms/1ms`
    /// (runtime, deadline, period), `-` where an import did not know it.
    pub fn policy_text(&self) -> String {
        use units::format_duration;
        match (self.policy, &self.deadline) {
            (Policy::Deadline, Some(d)) => format!(
                "deadline {}/{}/{}",
                format_duration(d.runtime_ns),
                format_duration(d.deadline_ns),
                format_duration(d.period_ns)
            ),
            // A real-time policy has a priority of 1 or more: 0 is one an import did not know.
            (p, _) if p.is_realtime() && self.priority == 0 => "-".into(),
            (p, _) if p.is_realtime() => format!("{} {}", p.name(), self.priority),
            (p, _) => p.name().to_string(),
        }
    }

    /// The interval as tables and lines write it: `1ms`, or `-` where it is unknown (0: an
    /// import from a format that does not record it).
    /// The interval as tables write it; `-` for the busy method, which has none (it reads the
    /// clock in a loop).
    pub fn interval_text(&self) -> String {
        if self.method == Method::Busy {
            return "-".into();
        }
        interval_text(self.interval_ns)
    }

    /// The labels of its measuring threads: `cpuN` per measured CPU, else `threadI`.
    pub fn thread_labels(&self) -> Vec<String> {
        match &self.cpus {
            Some(cpus) => cpus.iter().map(|c| thread_label(Some(*c), 0)).collect(),
            None => (0..self.threads as usize)
                .map(|i| thread_label(None, i))
                .collect(),
        }
    }

    /// The length asked for: `10s`, `1000 loops`, `10s or 1000 loops` (whichever ends first),
    /// `None` for until interrupted.
    pub fn length_text(&self) -> Option<String> {
        // A length asked for is round; one measured (a monitor's series) reads as elapsed time.
        let format_duration = |d: u64| {
            if d.is_multiple_of(1_000_000) {
                units::format_duration(d)
            } else {
                units::format_elapsed(d)
            }
        };
        match (self.duration_ns, self.loops) {
            (Some(d), Some(l)) => Some(format!("{} or {l} loops", format_duration(d))),
            (Some(d), None) => Some(format_duration(d)),
            (None, Some(l)) => Some(format!("{l} loops")),
            (None, None) => None,
        }
    }
}

impl Default for MeasureConfig {
    /// `latlab measure`'s defaults: one thread every 1ms, fifo 95, clock-nanosleep, memory
    /// locked, 1s windows, until interrupted.
    fn default() -> MeasureConfig {
        MeasureConfig {
            interval_ns: 1_000_000,
            duration_ns: None,
            loops: None,
            cpus: None,
            threads: 1,
            policy: Policy::Fifo,
            priority: 95,
            deadline: None,
            method: Method::ClockNanosleep,
            relative: false,
            clock: Clock::Monotonic,
            timer_slack_ns: 0,
            pm_qos_us: None,
            mlock: true,
            window_ns: 1_000_000_000,
            spike_threshold_ns: None,
            spike_limit: 10_000,
            break_threshold_ns: None,
            waker_cpu: None,
            stagger: false,
        }
    }
}

/// What a result says besides its threads (the overall figures are computed from them).
#[derive(Debug, Clone)]
pub struct RunHead {
    pub id: String,
    /// 0: unknown (the source did not say).
    pub start_unix_ns: u64,
    /// 0: unknown.
    pub elapsed_ns: u64,
    pub config: MeasureConfig,
    pub system: SystemInfo,
    pub environment: RunEnvironment,
    pub stop: StopReason,
    pub spikes: Spikes,
}

impl RunResult {
    /// Whether its missed periods were counted (see [`RunEnvironment::missed_unrecorded`]).
    pub fn records_missed(&self) -> bool {
        !self.environment.missed_unrecorded
    }

    /// Whether its format records `what` (one of [`Unrecorded`]'s names).
    pub fn records(&self, what: &str) -> bool {
        !self.environment.not_recorded.iter().any(|n| n == what)
    }

    /// Where a break threshold stopped the run, the samples over it besides the one that stopped
    /// it: each other thread whose largest sample lies over the threshold, and the stopping
    /// thread where a larger one followed before the stop, with that largest sample
    /// (`(label, ns)`, in thread order). Empty for a run that did not stop so.
    pub fn also_over_break(&self) -> Vec<(&str, u64)> {
        let (StopReason::Break { thread, value_ns }, Some(threshold)) =
            (&self.stop, self.config.break_threshold_ns)
        else {
            return Vec::new();
        };
        self.threads
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                let over = if *i == *thread as usize {
                    *value_ns
                } else {
                    threshold
                };
                t.stats.count > 0 && t.stats.max > over
            })
            .map(|(_, t)| (t.label.as_str(), t.stats.max))
            .collect()
    }

    /// Why the run is shorter than asked, where a signal stopped it before its length
    /// (`stopped by SIGTERM after 1.813 s of the 5s asked`); `None` for a run that ended as
    /// asked, or that was asked to run until interrupted.
    pub fn cut_short(&self) -> Option<String> {
        let StopReason::Signal { signal } = &self.stop else {
            return None;
        };
        let asked = self.config.length_text()?;
        Some(format!(
            "stopped by {signal} after {} of the {asked} asked",
            units::format_elapsed(self.elapsed_ns)
        ))
    }

    /// What the user should know about the run: the environment's warnings, then each load's
    /// named by its spec (`load cmd:exit 3: the command ended on its own after 3ms …`).
    pub fn warnings(&self) -> Vec<String> {
        let loads = self.loads.reports.iter().flat_map(|l| {
            l.warnings
                .iter()
                .map(move |w| format!("load {}: {w}", l.spec))
        });
        self.environment
            .warnings
            .iter()
            .cloned()
            .chain(loads)
            .collect()
    }

    /// [`known_start`] of this run.
    pub fn known_start(&self) -> Option<&str> {
        known_start(self.start_unix_ns, &self.started_at)
    }

    /// The one constructor of a result from its threads, for a measurement and an import alike:
    /// the overall histograms are the threads' merged, missed periods their sum, the worst
    /// thread the last with the greatest maximum. One thread's statistics are the overall ones
    /// as they are (an import's exact percentiles stay exact; several threads' cannot).
    /// Compute the cached [`Stats`] again from the histograms (keeping the exact percentiles an
    /// import carries): for results stored by a version whose statistics differ (p99.9 of a
    /// count that is a multiple of 1000 took the maximum before the rank was computed exactly).
    pub fn refresh_stats(&mut self) {
        let again = |s: &Stats, h: &Histogram| Stats::of(h).with_exact_of(s);
        let mut corrected = Histogram::new();
        for t in &mut self.threads {
            t.stats = again(&t.stats, &t.histogram);
            t.corrected = again(&t.corrected, &t.corrected_histogram);
            corrected.merge(&t.corrected_histogram);
        }
        let o = &mut self.overall;
        (o.stats, o.corrected) = overall_stats(&self.threads, &o.histogram, &corrected);
    }

    pub fn from_threads(head: RunHead, threads: Vec<ThreadResult>) -> RunResult {
        let mut histogram = Histogram::new();
        let mut corrected = Histogram::new();
        let (mut max, mut max_at_ns, mut max_thread) = (0, 0, 0u32);
        for (i, t) in threads.iter().enumerate() {
            histogram.merge(&t.histogram);
            corrected.merge(&t.corrected_histogram);
            if t.stats.max >= max {
                (max, max_at_ns, max_thread) = (t.stats.max, t.max_at_ns, i as u32);
            }
        }
        let (stats, corrected) = overall_stats(&threads, &histogram, &corrected);
        let start = known_time(head.start_unix_ns);
        let end = start.zip(known_time(head.elapsed_ns));
        RunResult {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            latlab_version: env!("CARGO_PKG_VERSION").into(),
            id: head.id,
            started_at: start.map_or_else(String::new, rfc3339_utc),
            ended_at: end.map_or_else(String::new, |(s, e)| rfc3339_utc(s + e)),
            start_unix_ns: head.start_unix_ns,
            elapsed_ns: head.elapsed_ns,
            config: head.config,
            system: head.system,
            environment: head.environment,
            stop: head.stop,
            overall: Overall {
                missed: threads.iter().map(|t| t.missed).sum(),
                max_at_ns,
                max_thread,
                stats,
                corrected,
                histogram,
            },
            threads,
            spikes: head.spikes,
            samples: None,
            loads: Default::default(),
            trace: None,
        }
    }

    /// Parse a result, refusing other documents and newer schema versions with a clear message.
    pub fn from_json(text: &str) -> Result<RunResult, ModelError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => return Err(ModelError::NotAResult(format!("schema is {other:?}"))),
            None => return Err(ModelError::NotAResult("no \"schema\" field".into())),
        }
        let version = value
            .get("schema_version")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as u32;
        if version > SCHEMA_VERSION {
            return Err(ModelError::TooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(serde_json::from_value(value)?)
    }

    pub fn to_json_pretty(&self) -> String {
        // A RunResult holds only plain data: serializing it cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// A measuring thread's label: `cpuN` for one pinned to CPU N, else `threadI` for the I-th.
pub fn thread_label(cpu: Option<u32>, i: usize) -> String {
    match cpu {
        Some(c) => format!("cpu{c}"),
        None => format!("thread{i}"),
    }
}

#[cfg(test)]
mod tests;
