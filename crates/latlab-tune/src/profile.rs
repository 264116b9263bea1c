//! Profiles: TOML files with settings per CPU, for the whole system, for CPU isolation, for the
//! kernel command line and for the kernel build. Built-in profiles are embedded in the binary; a
//! user directory adds or overrides them. A profile may include others; included files come
//! first and the including file overrides them.
//!
//! Parsing rejects unknown keys, wrong types and malformed values with the file, the line and the
//! dotted key. Nothing here reads the system: whether a CPU exists or a governor is offered is
//! decided when a plan is made for a machine (`crate::plan`).

use latlab_model::units::CpuList;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The built-in profiles, in the order `latlab tune list` shows them.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "throughput",
        include_str!("../../../profiles/throughput.toml"),
    ),
    (
        "lowlatency",
        include_str!("../../../profiles/lowlatency.toml"),
    ),
    ("realtime", include_str!("../../../profiles/realtime.toml")),
    (
        "powersave",
        include_str!("../../../profiles/powersave.toml"),
    ),
    ("balanced", include_str!("../../../profiles/balanced.toml")),
];

/// Where a setting was written: file, line and dotted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: String,
    pub line: usize,
    pub key: String,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.key)
    }
}

/// A value and where it was set.
#[derive(Debug, Clone, PartialEq)]
pub struct At<T> {
    pub value: T,
    pub at: Origin,
}

/// Which idle states of a CPU stay enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdleLimit {
    /// States whose exit latency exceeds this many µs are disabled (the shallowest state of a
    /// CPU always stays enabled).
    MaxLatencyUs(u64),
    /// States deeper (by exit latency) than the state of this name on each CPU are disabled.
    MaxState(String),
    /// Every state enabled.
    AllEnabled,
}

/// A per-CPU PM QoS resume latency limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeLatency {
    /// At most this many µs (0: the CPU may only poll).
    Us(u64),
    /// No constraint.
    NoConstraint,
}

impl ResumeLatency {
    /// The value as the kernel's `pm_qos_resume_latency_us` file takes it (inverted for 0).
    pub fn kernel_value(self) -> String {
        latlab_model::system::PmQos::resume_text(match self {
            ResumeLatency::Us(n) => Some(n),
            ResumeLatency::NoConstraint => None,
        })
    }
}

/// Settings that apply to CPUs one by one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuSettings {
    /// cpufreq governors, first one the CPU offers wins.
    pub governor: Option<At<Vec<String>>>,
    /// Energy-performance preferences, first one the CPU offers wins.
    pub epp: Option<At<Vec<String>>>,
    /// Per-policy `boost`.
    pub boost: Option<At<bool>>,
    pub idle: Option<At<IdleLimit>>,
    pub resume_latency: Option<At<ResumeLatency>>,
}

impl CpuSettings {
    /// Overwrite with every setting `other` has.
    pub fn overlay(&mut self, other: &CpuSettings) {
        if other.governor.is_some() {
            self.governor.clone_from(&other.governor);
        }
        if other.epp.is_some() {
            self.epp.clone_from(&other.epp);
        }
        if other.boost.is_some() {
            self.boost.clone_from(&other.boost);
        }
        if other.idle.is_some() {
            self.idle.clone_from(&other.idle);
        }
        if other.resume_latency.is_some() {
            self.resume_latency.clone_from(&other.resume_latency);
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == CpuSettings::default()
    }
}

/// The CPUs a `[cpu.X]` table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSelector {
    All,
    Isolated,
    Housekeeping,
    List(CpuList),
}

impl CpuSelector {
    fn specificity(&self) -> u8 {
        match self {
            CpuSelector::All => 0,
            CpuSelector::Isolated | CpuSelector::Housekeeping => 1,
            CpuSelector::List(_) => 2,
        }
    }
}

/// One `[cpu.X]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuRule {
    pub selector: CpuSelector,
    pub settings: CpuSettings,
    pub at: Origin,
    /// Precedence: (file order, specificity, position in the file); higher wins.
    pub(crate) rank: (usize, u8, usize),
}

/// Settings for the whole system.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SystemSettings {
    /// `kernel.timer_migration`.
    pub timer_migration: Option<At<bool>>,
    /// `vm.stat_interval` in seconds.
    pub vmstat_interval_s: Option<At<u64>>,
    /// `kernel.sched_rt_runtime_us` (-1: no RT throttling).
    pub sched_rt_runtime_us: Option<At<i64>>,
    /// Turbo / boost for the whole machine (intel_pstate `no_turbo` or `cpufreq/boost`).
    pub turbo: Option<At<bool>>,
    /// The cpuidle governor.
    pub cpuidle_governor: Option<At<String>>,
    /// A `/dev/cpu_dma_latency` request: lives only while a file stays open, so `apply` does not
    /// write it; `latlab tune hold` and temporary tunings hold it.
    pub cpu_dma_latency_us: Option<At<u32>>,
}

/// Which CPUs are isolated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsolatedSpec {
    /// The CPUs given with `--cpus`, else the kernel's isolated CPUs, else every CPU but the
    /// first core (with its SMT siblings).
    Auto,
    List(CpuList),
}

/// A split into housekeeping and isolated CPUs, and what moves to the housekeeping CPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IsolationSettings {
    pub isolated: Option<At<IsolatedSpec>>,
    /// Move IRQs (and the default affinity of new ones) to the housekeeping CPUs.
    pub irqs: Option<At<bool>>,
    /// Restrict unbound workqueues to the housekeeping CPUs.
    pub workqueues: Option<At<bool>>,
    /// Move movable kernel threads to the housekeeping CPUs.
    pub kthreads: Option<At<bool>>,
}

impl IsolationSettings {
    pub fn is_set(&self) -> bool {
        self.isolated.is_some()
            || self.irqs.is_some()
            || self.workqueues.is_some()
            || self.kthreads.is_some()
    }
}

/// A CPU set on the kernel command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSet {
    Isolated,
    Housekeeping,
    All,
    List(CpuList),
}

/// Kernel command line options a profile wants (`latlab tune boot`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootSettings {
    pub preempt: Option<At<String>>,
    pub nohz_full: Option<At<CpuSet>>,
    pub rcu_nocbs: Option<At<CpuSet>>,
    pub rcu_lazy: Option<At<bool>>,
    /// `isolcpus=` flags (domain, managed_irq, nohz); the CPUs are the isolated ones.
    pub isolcpus: Option<At<Vec<String>>>,
    pub irqaffinity: Option<At<CpuSet>>,
    pub threadirqs: Option<At<bool>>,
    /// `intel_idle.max_cstate=` / `processor.max_cstate=`, by the idle driver.
    pub max_cstate: Option<At<u32>>,
    /// `idle=poll|halt|nomwait`.
    pub idle: Option<At<String>>,
    /// Further options, verbatim (`skew_tick=1`).
    pub extra: Option<At<Vec<String>>>,
}

impl BootSettings {
    pub fn is_set(&self) -> bool {
        *self != BootSettings::default()
    }
}

/// Build-time kernel settings a profile wants; `latlab tune boot` reports them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelWants {
    pub hz: Option<At<u32>>,
    pub preempt_rt: Option<At<bool>>,
}

/// Where a profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSource {
    BuiltIn,
    File(PathBuf),
    /// Composed in memory (by `latlab tune search`).
    Generated,
}

impl ProfileSource {
    /// The name used in messages for the file of profile `name`.
    pub fn label(&self, name: &str) -> String {
        match self {
            ProfileSource::BuiltIn => format!("built-in {name}.toml"),
            ProfileSource::File(p) => p.display().to_string(),
            ProfileSource::Generated => format!("generated {name}"),
        }
    }
}

impl fmt::Display for ProfileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileSource::BuiltIn => f.write_str("built-in"),
            ProfileSource::File(p) => write!(f, "{}", p.display()),
            ProfileSource::Generated => f.write_str("generated"),
        }
    }
}

/// A profile with its includes merged in.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub source: ProfileSource,
    pub description: String,
    /// Every included profile, in merge order (the ones merged first come first).
    pub includes: Vec<String>,
    /// `[cpu.X]` tables in precedence order (later wins).
    pub cpu: Vec<CpuRule>,
    pub system: SystemSettings,
    pub isolation: IsolationSettings,
    pub boot: BootSettings,
    pub kernel: KernelWants,
}

impl Profile {
    /// The command that holds this profile's /dev/cpu_dma_latency request, as it can be
    /// copied: a profile file by its absolute path (`tune hold NAME` finds only the built-in
    /// and system profiles without the `--profile-dir` it came from).
    pub fn hold_command(&self) -> String {
        let which = match &self.source {
            ProfileSource::File(path) => latlab_model::units::shell_path(path),
            _ => latlab_model::units::shell_word(&self.name),
        };
        format!("latlab tune hold {which}")
    }

    fn empty(name: &str, source: ProfileSource) -> Profile {
        Profile {
            name: name.to_string(),
            source,
            description: String::new(),
            includes: Vec::new(),
            cpu: Vec::new(),
            system: SystemSettings::default(),
            isolation: IsolationSettings::default(),
            boot: BootSettings::default(),
            kernel: KernelWants::default(),
        }
    }

    /// The settings for one CPU: every table naming it, in precedence order.
    /// `isolated`/`housekeeping` tables apply only when a split is given.
    pub fn settings_for(&self, cpu: u32, split: Option<(&CpuList, &CpuList)>) -> CpuSettings {
        let mut s = CpuSettings::default();
        for rule in &self.cpu {
            let applies = match &rule.selector {
                CpuSelector::All => true,
                CpuSelector::Isolated => split.is_some_and(|(iso, _)| iso.contains(cpu)),
                CpuSelector::Housekeeping => split.is_some_and(|(_, hk)| hk.contains(cpu)),
                CpuSelector::List(l) => l.contains(cpu),
            };
            if applies {
                s.overlay(&rule.settings);
            }
        }
        s
    }
}

/// A profile that could not be loaded.
#[derive(Debug)]
pub enum ProfileError {
    /// Malformed: names the file, the line and the dotted key.
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
    Unknown {
        name: String,
        known: Vec<String>,
    },
    Cycle {
        chain: Vec<String>,
        at: Origin,
    },
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::Invalid {
                file,
                line,
                key,
                message,
            } => {
                write!(f, "{file}")?;
                if *line > 0 {
                    write!(f, ":{line}")?;
                }
                if !key.is_empty() {
                    write!(f, ": {key}")?;
                }
                write!(f, ": {message}")
            }
            ProfileError::Unknown { name, known } => write!(
                f,
                "unknown profile {name:?} (accepted: {}, or the path of a .toml file)",
                known.join(", ")
            ),
            ProfileError::Cycle { chain, at } => {
                write!(f, "{at}: include cycle: {}", chain.join(" → "))
            }
            ProfileError::Io { path, source } => write!(
                f,
                "{}: {source} (accepted: a profile name, or the path of a readable .toml file)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ProfileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProfileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The file format.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    description: Option<Spanned<String>>,
    include: Option<Spanned<toml::Value>>,
    #[serde(default)]
    cpu: BTreeMap<Spanned<String>, RawCpu>,
    system: Option<RawSystem>,
    isolation: Option<RawIsolation>,
    boot: Option<RawBoot>,
    kernel: Option<RawKernel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCpu {
    governor: Option<Spanned<toml::Value>>,
    epp: Option<Spanned<toml::Value>>,
    boost: Option<Spanned<bool>>,
    max_idle_latency_us: Option<Spanned<toml::Value>>,
    max_idle_state: Option<Spanned<String>>,
    pm_qos_resume_latency_us: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSystem {
    timer_migration: Option<Spanned<bool>>,
    vmstat_interval_s: Option<Spanned<u64>>,
    sched_rt_runtime_us: Option<Spanned<i64>>,
    turbo: Option<Spanned<bool>>,
    cpuidle_governor: Option<Spanned<String>>,
    cpu_dma_latency_us: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIsolation {
    isolated: Option<Spanned<String>>,
    irqs: Option<Spanned<bool>>,
    workqueues: Option<Spanned<bool>>,
    kthreads: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBoot {
    preempt: Option<Spanned<String>>,
    nohz_full: Option<Spanned<String>>,
    rcu_nocbs: Option<Spanned<String>>,
    rcu_lazy: Option<Spanned<bool>>,
    isolcpus: Option<Spanned<Vec<String>>>,
    irqaffinity: Option<Spanned<String>>,
    threadirqs: Option<Spanned<bool>>,
    max_cstate: Option<Spanned<u32>>,
    idle: Option<Spanned<String>>,
    extra: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    hz: Option<Spanned<u32>>,
    preempt_rt: Option<Spanned<bool>>,
}

/// The line (1-based) holding byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The table header in force at the start of the line beginning at `line_start`.
fn header_before(text: &str, line_start: usize) -> String {
    text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| {
            l.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .replace(['"', ' '], "")
        })
        .unwrap_or_default()
}

/// The dotted key a TOML error at `span` is about.
fn key_at(text: &str, span: std::ops::Range<usize>) -> String {
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = &text[line_start..line_end];
    if line.trim_start().starts_with('[') {
        return header_before(text, line_end);
    }
    let local = match line.find('=') {
        Some(eq) => line[..eq].trim(),
        None => text
            .get(span.clone())
            .unwrap_or("")
            .split('=')
            .next()
            .unwrap_or("")
            .trim(),
    }
    .replace(['"', ' '], "");
    let header = header_before(text, line_start);
    match (header.is_empty(), local.is_empty()) {
        (true, _) => local,
        (false, true) => header,
        (false, false) => format!("{header}.{local}"),
    }
}

/// Converts raw values into settings, naming file, line and key on errors.
struct Ctx<'a> {
    file: String,
    text: &'a str,
}

impl Ctx<'_> {
    fn origin(&self, span: std::ops::Range<usize>, key: &str) -> Origin {
        Origin {
            file: self.file.clone(),
            line: line_of(self.text, span.start),
            key: key.to_string(),
        }
    }

    fn err(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ProfileError {
        ProfileError::Invalid {
            file: self.file.clone(),
            line: line_of(self.text, span.start),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// `value` of `key` lies outside what it takes (`range_of`).
    fn out_of_range(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        value: &impl std::fmt::Display,
    ) -> ProfileError {
        let range = range_of(key).unwrap_or("the forms the built-in profiles use");
        self.err(
            span,
            key,
            format!("{value} is out of range (accepted: {range})"),
        )
    }

    fn at<T>(&self, s: Spanned<T>, key: &str) -> At<T> {
        let at = self.origin(s.span(), key);
        At {
            value: s.into_inner(),
            at,
        }
    }

    /// A string or an array of strings, each a single word.
    /// Refuse a name one or two letters off one the kernel knows (`performnce`): not offered
    /// anywhere, it would be "unsupported here" on every machine. Other names stay a vendor
    /// kernel's own (a governor of Android's), tried where offered.
    fn no_misspelling(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        words: &[String],
        known: &[&str],
    ) -> Result<(), ProfileError> {
        for w in words.iter().filter(|w| !known.contains(&w.as_str())) {
            if let Some(near) = known.iter().find(|k| edit_distance(w, k) <= 2) {
                return Err(self.err(
                    span,
                    key,
                    format!(
                        "\"{w}\" is no name the kernel knows: did you mean \"{near}\"? \
                         (accepted: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn words(&self, s: Spanned<toml::Value>, key: &str) -> Result<At<Vec<String>>, ProfileError> {
        let span = s.span();
        let bad = || {
            self.err(
                span.clone(),
                key,
                if key == "include" {
                    "expected a profile name or an array of them, each included in turn (e.g. \
                     \"lowlatency\" or [\"lowlatency\", \"mine\"])"
                } else {
                    "expected a name or an array of names, first one available wins (e.g. \
                     \"performance\" or [\"schedutil\", \"powersave\"])"
                },
            )
        };
        let words: Vec<String> = match s.get_ref() {
            toml::Value::String(w) => vec![w.clone()],
            toml::Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
                .collect::<Result<_, _>>()?,
            _ => return Err(bad()),
        };
        if words.is_empty()
            || words
                .iter()
                .any(|w| w.is_empty() || w.chars().any(char::is_whitespace))
        {
            return Err(bad());
        }
        Ok(self.at(Spanned::new(span, words), key))
    }

    /// Microseconds (an integer ≥ 0) or "none".
    fn us_or_none(&self, s: &Spanned<toml::Value>, key: &str) -> Result<Option<u64>, ProfileError> {
        match s.get_ref() {
            toml::Value::Integer(n) if *n >= 0 => Ok(Some(*n as u64)),
            toml::Value::String(w) if w == "none" => Ok(None),
            _ => Err(self.err(
                s.span(),
                key,
                "expected microseconds (an integer ≥ 0) or \"none\"",
            )),
        }
    }

    fn cpu_set(
        &self,
        s: Spanned<String>,
        key: &str,
        all: bool,
    ) -> Result<At<CpuSet>, ProfileError> {
        let span = s.span();
        let v = match s.get_ref().as_str() {
            "isolated" => CpuSet::Isolated,
            "housekeeping" => CpuSet::Housekeeping,
            "all" if all => CpuSet::All,
            other => CpuSet::List(CpuList::parse(other).map_err(|e| {
                self.err(
                    span.clone(),
                    key,
                    format!(
                        "{e}; or \"isolated\", \"housekeeping\"{}",
                        if all { ", \"all\"" } else { "" }
                    ),
                )
            })?),
        };
        Ok(self.at(Spanned::new(span, v), key))
    }

    fn one_of(
        &self,
        s: Spanned<String>,
        key: &str,
        allowed: &[&str],
    ) -> Result<At<String>, ProfileError> {
        if allowed.contains(&s.get_ref().as_str()) {
            Ok(self.at(s, key))
        } else {
            Err(self.err(
                s.span(),
                key,
                format!(
                    "{:?} is not accepted (accepted: {})",
                    s.get_ref(),
                    allowed.join(", ")
                ),
            ))
        }
    }

    fn cpu_table(&self, key: Spanned<String>, raw: RawCpu) -> Result<CpuRule, ProfileError> {
        let name = key.get_ref().clone();
        let table = format!("cpu.{name}");
        let selector = match name.as_str() {
            "all" => CpuSelector::All,
            "isolated" => CpuSelector::Isolated,
            "housekeeping" => CpuSelector::Housekeeping,
            list => CpuSelector::List(CpuList::parse(list).map_err(|e| {
                self.err(
                    key.span(),
                    &table,
                    format!("{e}; or all, isolated, housekeeping"),
                )
            })?),
        };
        let k = |f: &str| format!("{table}.{f}");
        let mut s = CpuSettings::default();
        if let Some(v) = raw.governor {
            let span = v.span();
            let words = self.words(v, &k("governor"))?;
            self.no_misspelling(span, &k("governor"), &words.value, GOVERNORS)?;
            s.governor = Some(words);
        }
        if let Some(v) = raw.epp {
            let span = v.span();
            let words = self.words(v, &k("epp"))?;
            self.no_misspelling(span, &k("epp"), &words.value, EPP_NAMES)?;
            s.epp = Some(words);
        }
        if let Some(v) = raw.boost {
            s.boost = Some(self.at(v, &k("boost")));
        }
        if let (Some(_), Some(st)) = (&raw.max_idle_latency_us, &raw.max_idle_state) {
            return Err(self.err(
                st.span(),
                &k("max_idle_state"),
                "set either max_idle_latency_us or max_idle_state in one table, not both",
            ));
        }
        if let Some(v) = raw.max_idle_latency_us {
            let key = k("max_idle_latency_us");
            let limit = match self.us_or_none(&v, &key)? {
                Some(n) => IdleLimit::MaxLatencyUs(n),
                None => IdleLimit::AllEnabled,
            };
            s.idle = Some(self.at(Spanned::new(v.span(), limit), &key));
        }
        if let Some(v) = raw.max_idle_state {
            let key = k("max_idle_state");
            if v.get_ref().trim().is_empty() {
                return Err(self.err(
                    v.span(),
                    &key,
                    "expected the name of an idle state, e.g. \"C1\"",
                ));
            }
            let span = v.span();
            s.idle = Some(self.at(
                Spanned::new(span, IdleLimit::MaxState(v.into_inner())),
                &key,
            ));
        }
        if let Some(v) = raw.pm_qos_resume_latency_us {
            let key = k("pm_qos_resume_latency_us");
            let r = match self.us_or_none(&v, &key)? {
                // The kernel takes a signed 32-bit value, its largest meaning "no constraint".
                Some(n) if n >= i32::MAX as u64 => {
                    return Err(self.err(
                        v.span(),
                        &key,
                        format!(
                            "{n} is out of range (accepted: microseconds from 0 to 2147483646, \
                             or \"none\")"
                        ),
                    ));
                }
                Some(n) => ResumeLatency::Us(n),
                None => ResumeLatency::NoConstraint,
            };
            s.resume_latency = Some(self.at(Spanned::new(v.span(), r), &key));
        }
        let rank = (0, selector.specificity(), key.span().start);
        Ok(CpuRule {
            selector,
            settings: s,
            at: self.origin(key.span(), &table),
            rank,
        })
    }

    /// The `[system]` table.
    fn system(&self, s: RawSystem, sys: &mut SystemSettings) -> Result<(), ProfileError> {
        sys.timer_migration = s
            .timer_migration
            .map(|v| self.at(v, "system.timer_migration"));
        if let Some(v) = s.vmstat_interval_s {
            // The kernel keeps it as jiffies in an int: at HZ 1000, at most 2147483 s.
            if !(1..=2_147_483).contains(v.get_ref()) {
                return Err(self.out_of_range(v.span(), "system.vmstat_interval_s", v.get_ref()));
            }
            sys.vmstat_interval_s = Some(self.at(v, "system.vmstat_interval_s"));
        }
        if let Some(v) = s.sched_rt_runtime_us {
            if !(-1..=i64::from(i32::MAX)).contains(v.get_ref()) {
                return Err(self.out_of_range(v.span(), "system.sched_rt_runtime_us", v.get_ref()));
            }
            sys.sched_rt_runtime_us = Some(self.at(v, "system.sched_rt_runtime_us"));
        }
        sys.turbo = s.turbo.map(|v| self.at(v, "system.turbo"));
        sys.cpuidle_governor = s
            .cpuidle_governor
            .map(|v| self.at(v, "system.cpuidle_governor"));
        if let Some(v) = &s.cpu_dma_latency_us
            && i32::try_from(*v.get_ref()).is_err()
        {
            return Err(self.out_of_range(v.span(), "system.cpu_dma_latency_us", v.get_ref()));
        }
        sys.cpu_dma_latency_us = s
            .cpu_dma_latency_us
            .map(|v| self.at(v, "system.cpu_dma_latency_us"));
        Ok(())
    }

    /// The `[isolation]` table.
    fn isolation(&self, i: RawIsolation, iso: &mut IsolationSettings) -> Result<(), ProfileError> {
        if let Some(v) = i.isolated {
            let span = v.span();
            let spec = match v.get_ref().as_str() {
                "auto" => IsolatedSpec::Auto,
                list => IsolatedSpec::List(CpuList::parse(list).map_err(|e| {
                    self.err(
                        span.clone(),
                        "isolation.isolated",
                        format!("{e}; or \"auto\""),
                    )
                })?),
            };
            iso.isolated = Some(self.at(Spanned::new(span, spec), "isolation.isolated"));
        }
        iso.irqs = i.irqs.map(|v| self.at(v, "isolation.irqs"));
        iso.workqueues = i.workqueues.map(|v| self.at(v, "isolation.workqueues"));
        iso.kthreads = i.kthreads.map(|v| self.at(v, "isolation.kthreads"));
        Ok(())
    }

    /// The `[boot]` table.
    fn boot(&self, b: RawBoot, boot: &mut BootSettings) -> Result<(), ProfileError> {
        if let Some(v) = b.preempt {
            boot.preempt =
                Some(self.one_of(v, "boot.preempt", &["none", "voluntary", "full", "lazy"])?);
        }
        if let Some(v) = b.nohz_full {
            boot.nohz_full = Some(self.cpu_set(v, "boot.nohz_full", false)?);
        }
        if let Some(v) = b.rcu_nocbs {
            boot.rcu_nocbs = Some(self.cpu_set(v, "boot.rcu_nocbs", true)?);
        }
        boot.rcu_lazy = b.rcu_lazy.map(|v| self.at(v, "boot.rcu_lazy"));
        if let Some(v) = b.isolcpus {
            if let Some(bad) = v
                .get_ref()
                .iter()
                .find(|f| !["domain", "managed_irq", "nohz"].contains(&f.as_str()))
            {
                return Err(self.err(
                    v.span(),
                    "boot.isolcpus",
                    format!(
                        "{bad:?} is not an isolcpus flag (accepted: domain, managed_irq, nohz)"
                    ),
                ));
            }
            boot.isolcpus = Some(self.at(v, "boot.isolcpus"));
        }
        if let Some(v) = b.irqaffinity {
            boot.irqaffinity = Some(self.cpu_set(v, "boot.irqaffinity", false)?);
        }
        boot.threadirqs = b.threadirqs.map(|v| self.at(v, "boot.threadirqs"));
        boot.max_cstate = b.max_cstate.map(|v| self.at(v, "boot.max_cstate"));
        if let Some(v) = b.idle {
            boot.idle = Some(self.one_of(v, "boot.idle", &["poll", "halt", "nomwait"])?);
        }
        if let Some(v) = b.extra {
            if let Some(bad) = v
                .get_ref()
                .iter()
                .find(|w| w.is_empty() || w.chars().any(char::is_whitespace) || w.contains('"'))
            {
                return Err(self.err(
                    v.span(),
                    "boot.extra",
                    format!("{bad:?} is not one kernel option (one word, no quotes)"),
                ));
            }
            boot.extra = Some(self.at(v, "boot.extra"));
        }
        Ok(())
    }

    /// The `[kernel]` table.
    fn kernel(&self, k: RawKernel, kernel: &mut KernelWants) -> Result<(), ProfileError> {
        if let Some(v) = k.hz {
            if ![100, 250, 300, 1000].contains(v.get_ref()) {
                return Err(self.out_of_range(v.span(), "kernel.hz", v.get_ref()));
            }
            kernel.hz = Some(self.at(v, "kernel.hz"));
        }
        kernel.preempt_rt = k.preempt_rt.map(|v| self.at(v, "kernel.preempt_rt"));
        Ok(())
    }
}

/// One parsed file: its own settings and what it includes.
struct Parsed {
    description: Option<String>,
    includes: Vec<At<String>>,
    profile: Profile,
}

/// The line of a built-in profile that sets `key` (`boot.isolcpus`), and that profile's name.
/// The values a numeric profile key takes, as said in its errors: a value outside them (a
/// negative one too, which its type refuses before any check) names this.
fn range_of(key: &str) -> Option<&'static str> {
    Some(match key {
        "system.vmstat_interval_s" => "seconds from 1 to 2147483",
        "system.sched_rt_runtime_us" => {
            "microseconds from 0 to 2147483647, or -1 for no RT throttling"
        }
        "system.cpu_dma_latency_us" => "µs from 0 to 2147483647",
        "boot.max_cstate" => "a C-state number from 0 to 4294967295",
        "kernel.hz" => "100, 250, 300 or 1000",
        _ => return None,
    })
}

fn example_of(key: &str) -> Option<(String, &'static str)> {
    let (section, name) = key.rsplit_once('.')?;
    BUILTIN.iter().find_map(|(profile, text)| {
        let mut current = "";
        text.lines().find_map(|l| {
            let l = l.trim();
            if let Some(h) = l.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                current = h;
                return None;
            }
            let (k, _) = l.split_once('=')?;
            (current == section && k.trim() == name).then(|| (l.to_string(), *profile))
        })
    })
}

/// Parse one profile file (its includes are not followed).
fn parse(name: &str, source: ProfileSource, text: &str) -> Result<Parsed, ProfileError> {
    let cx = Ctx {
        file: source.label(name),
        text,
    };
    let raw: RawProfile = toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => {
            let line = line_of(text, span.start);
            let key = key_at(text, span);
            let mut message = e.message().trim().to_string();
            // A value of the wrong type, or one its type cannot hold (a negative count): the
            // form a built-in profile writes it in.
            if let Some(range) = range_of(&key).filter(|_| message.starts_with("invalid value")) {
                // "invalid value: integer `-1`, expected u32": the type's range is not the key's.
                let value = message
                    .split('`')
                    .nth(1)
                    .map_or(String::new(), |v| format!("{v} "));
                message = format!("{value}is out of range (accepted: {range})");
            } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
                message.push_str(&match example_of(&key) {
                    Some((line, profile)) => {
                        format!(
                            " (accepted: e.g. `{line}`, as the built-in profile {profile} has it)"
                        )
                    }
                    None => " (accepted: the forms the built-in profiles use, `latlab tune list`)"
                        .to_string(),
                });
            }
            ProfileError::Invalid {
                file: cx.file.clone(),
                line,
                key,
                message,
            }
        }
        None => ProfileError::Invalid {
            file: cx.file.clone(),
            line: 0,
            key: String::new(),
            message: e.message().trim().to_string(),
        },
    })?;
    let mut p = Profile::empty(name, source);
    let includes = match raw.include {
        None => Vec::new(),
        Some(v) => {
            let at = cx.words(v, "include")?;
            at.value
                .iter()
                .map(|w| At {
                    value: w.clone(),
                    at: at.at.clone(),
                })
                .collect()
        }
    };
    let mut rules = Vec::new();
    for (key, table) in raw.cpu {
        rules.push(cx.cpu_table(key, table)?);
    }
    rules.sort_by_key(|r| r.rank);
    p.cpu = rules;
    if let Some(s) = raw.system {
        cx.system(s, &mut p.system)?;
    }
    if let Some(i) = raw.isolation {
        cx.isolation(i, &mut p.isolation)?;
    }
    if let Some(b) = raw.boot {
        cx.boot(b, &mut p.boot)?;
    }
    if let Some(k) = raw.kernel {
        cx.kernel(k, &mut p.kernel)?;
    }
    Ok(Parsed {
        description: raw.description.map(|d| d.into_inner().trim().to_string()),
        includes,
        profile: p,
    })
}

/// A profile file's name (its file name without `.toml`) and text.
fn read_profile_file(path: &Path) -> Result<(String, String), ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((name, text))
}

/// Merge `top` over `base` (the including file over what it includes).
fn merge(base: &mut Profile, top: Profile) {
    base.cpu.extend(top.cpu);
    base.cpu.sort_by_key(|r| r.rank);
    macro_rules! over {
        ($($f:ident . $g:ident),*) => {$(
            if top.$f.$g.is_some() { base.$f.$g = top.$f.$g; }
        )*};
    }
    over!(
        system.timer_migration,
        system.vmstat_interval_s,
        system.sched_rt_runtime_us,
        system.turbo,
        system.cpuidle_governor,
        system.cpu_dma_latency_us,
        isolation.isolated,
        isolation.irqs,
        isolation.workqueues,
        isolation.kthreads,
        boot.preempt,
        boot.nohz_full,
        boot.rcu_nocbs,
        boot.rcu_lazy,
        boot.isolcpus,
        boot.irqaffinity,
        boot.threadirqs,
        boot.max_cstate,
        boot.idle,
        boot.extra,
        kernel.hz,
        kernel.preempt_rt
    );
}

// ---------------------------------------------------------------------------------------------
// The registry of profiles.

/// One definition of a profile.
#[derive(Debug, Clone)]
struct Definition {
    source: ProfileSource,
    text: String,
}

/// A profile as `latlab tune list` shows it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub source: ProfileSource,
    /// The description, or why the file could not be read.
    pub description: Result<String, String>,
    /// A user file of the same name replaces the built-in.
    pub overrides_builtin: bool,
}

/// Every profile known: the built-ins, then the `*.toml` files of the profile directories (a
/// later definition of a name replaces an earlier one; it may include the one it replaces by
/// its own name).
#[derive(Debug, Clone)]
pub struct Profiles {
    defs: BTreeMap<String, Vec<Definition>>,
    order: Vec<String>,
}

/// Does this include or argument name a file rather than a profile?
fn is_path(name: &str) -> bool {
    name.contains('/') || name.ends_with(".toml")
}

impl Profiles {
    /// Only the built-in profiles.
    pub fn builtin() -> Profiles {
        let mut p = Profiles {
            defs: BTreeMap::new(),
            order: Vec::new(),
        };
        for (name, text) in BUILTIN {
            p.add(name, ProfileSource::BuiltIn, text.to_string());
        }
        p
    }

    /// The user profile directories searched by default: `/etc/latlab/profiles` (under the
    /// system root).
    pub fn default_dirs(sys: &latlab_sys::Sys) -> Vec<PathBuf> {
        vec![sys.path("/etc/latlab/profiles")]
    }

    /// The built-ins plus every `*.toml` in `dirs` (later directories win). A missing
    /// directory is skipped; an unreadable file is an error.
    pub fn load(dirs: &[PathBuf]) -> Result<Profiles, ProfileError> {
        let mut p = Profiles::builtin();
        for dir in dirs {
            let entries = match std::fs::read_dir(dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(ProfileError::Io {
                        path: dir.clone(),
                        source,
                    });
                }
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for path in files {
                let (name, text) = read_profile_file(&path)?;
                p.add(&name, ProfileSource::File(path), text);
            }
        }
        Ok(p)
    }

    fn add(&mut self, name: &str, source: ProfileSource, text: String) {
        if !self.defs.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.defs
            .entry(name.to_string())
            .or_default()
            .push(Definition { source, text });
    }

    /// Names of every profile, built-ins first.
    pub fn names(&self) -> Vec<String> {
        self.order.clone()
    }

    /// Every profile with its description.
    pub fn list(&self) -> Vec<Listed> {
        self.order
            .iter()
            .filter_map(|name| {
                let defs = self.defs.get(name)?;
                let def = defs.last()?;
                // Resolved with its includes: one missing, or a cycle, is as unreadable as a
                // syntax error.
                let description = self
                    .resolve(name)
                    .map(|p| match p.description {
                        d if d.is_empty() => "(no description)".into(),
                        d => d,
                    })
                    .map_err(|e| e.to_string());
                Some(Listed {
                    name: name.clone(),
                    source: def.source.clone(),
                    description,
                    overrides_builtin: defs.len() > 1
                        && defs
                            .first()
                            .is_some_and(|d| d.source == ProfileSource::BuiltIn),
                })
            })
            .collect()
    }

    /// A profile from TOML text held in memory, its includes resolved among these profiles.
    pub fn resolve_text(&self, name: &str, text: &str) -> Result<Profile, ProfileError> {
        let mut with = self.clone();
        with.add(name, ProfileSource::Generated, text.to_string());
        with.resolve(name)
    }

    /// A profile by name, or by the path of a `.toml` file, with its includes merged.
    pub fn resolve(&self, name_or_path: &str) -> Result<Profile, ProfileError> {
        let (name, level, def) = self.find(name_or_path, None, None)?;
        let mut order = 0;
        let mut stack = Vec::new();
        self.resolve_def(&name, level, def, &mut stack, &mut order)
    }

    /// Look a name or path up. `from`: the including file's name, level and directory.
    fn find(
        &self,
        what: &str,
        from: Option<(&str, usize)>,
        dir: Option<&Path>,
    ) -> Result<(String, usize, Definition), ProfileError> {
        if is_path(what) {
            let path = match dir {
                Some(d) if Path::new(what).is_relative() => d.join(what),
                _ => PathBuf::from(what),
            };
            let (name, text) = read_profile_file(&path)?;
            return Ok((
                name,
                usize::MAX,
                Definition {
                    source: ProfileSource::File(path),
                    text,
                },
            ));
        }
        let defs = self.defs.get(what).ok_or_else(|| ProfileError::Unknown {
            name: what.to_string(),
            known: self.order.clone(),
        })?;
        // A file including its own name gets the definition it replaces (itself when it
        // replaces nothing, which is a cycle).
        let top = defs.len().saturating_sub(1);
        let level = match from {
            Some((n, l)) if n == what && l != usize::MAX => l.saturating_sub(1),
            _ => top,
        };
        let def = defs
            .get(level)
            .cloned()
            .ok_or_else(|| ProfileError::Unknown {
                name: what.to_string(),
                known: self.order.clone(),
            })?;
        Ok((what.to_string(), level, def))
    }

    fn resolve_def(
        &self,
        name: &str,
        level: usize,
        def: Definition,
        stack: &mut Vec<(String, usize, String)>,
        order: &mut usize,
    ) -> Result<Profile, ProfileError> {
        let ident = def.source.label(name);
        let parsed = parse(name, def.source.clone(), &def.text)?;
        stack.push((name.to_string(), level, ident));
        let mut merged = Profile::empty(name, def.source.clone());
        let dir = match &def.source {
            ProfileSource::File(p) => p.parent().map(Path::to_path_buf),
            ProfileSource::BuiltIn | ProfileSource::Generated => None,
        };
        let mut description = None;
        for inc in &parsed.includes {
            let (iname, ilevel, idef) = self
                .find(&inc.value, Some((name, level)), dir.as_deref())
                .map_err(|e| match e {
                    ProfileError::Unknown { .. } | ProfileError::Io { .. } => {
                        ProfileError::Invalid {
                            file: inc.at.file.clone(),
                            line: inc.at.line,
                            key: inc.at.key.clone(),
                            message: format!("cannot include {:?}: {e}", inc.value),
                        }
                    }
                    other => other,
                })?;
            let iident = idef.source.label(&iname);
            if stack.iter().any(|(_, _, id)| *id == iident) {
                let mut chain: Vec<String> = stack.iter().map(|(n, _, _)| n.clone()).collect();
                chain.push(iname);
                return Err(ProfileError::Cycle {
                    chain,
                    at: inc.at.clone(),
                });
            }
            let child = self.resolve_def(&iname, ilevel, idef, stack, order)?;
            merged.includes.extend(child.includes.iter().cloned());
            merged.includes.push(child.name.clone());
            if !child.description.is_empty() {
                description = Some(child.description.clone());
            }
            merge(&mut merged, child);
        }
        // This file's rules rank above those of everything it includes.
        let mut own = parsed.profile;
        for r in &mut own.cpu {
            r.rank.0 = *order;
        }
        *order += 1;
        if let Some(d) = parsed.description {
            description = Some(d);
        }
        merge(&mut merged, own);
        merged.description = description.unwrap_or_default();
        stack.pop();
        Ok(merged)
    }
}

/// The cpufreq governors of the mainline kernel.
const GOVERNORS: &[&str] = &[
    "performance",
    "powersave",
    "schedutil",
    "ondemand",
    "conservative",
    "userspace",
];
/// The energy-performance preferences the kernel's cpufreq drivers know.
const EPP_NAMES: &[&str] = &[
    "default",
    "performance",
    "balance_performance",
    "balance_power",
    "power",
];

/// The edits (a letter put in, left out or changed) that make `a` into `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (up + 1).min(row[j] + 1).min(diag + usize::from(ca != *cb));
            diag = up;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse_text(text: &str) -> Result<Profile, ProfileError> {
        parse("t", ProfileSource::File("t.toml".into()), text).map(|p| p.profile)
    }

    /// The printed `tune hold` command finds the profile from any directory: a built-in by its
    /// name, a file by its absolute path (a relative `--profile-dir`'s failed elsewhere).
    #[test]
    fn the_hold_command_names_a_profile_file_by_its_absolute_path() {
        let builtin = Profiles::builtin().resolve("lowlatency").unwrap();
        assert_eq!(builtin.hold_command(), "latlab tune hold lowlatency");
        let file = parse_text("description = \"d\"\n").unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            file.hold_command(),
            format!("latlab tune hold {}", cwd.join("t.toml").display())
        );
    }

    fn invalid(text: &str) -> (usize, String, String) {
        match parse_text(text) {
            Err(ProfileError::Invalid {
                line, key, message, ..
            }) => (line, key, message),
            other => panic!("expected an invalid profile, got {other:?}"),
        }
    }

    /// A governor or EPP name a letter or two off one the kernel knows is a typo, refused with
    /// its line; a vendor kernel's own name is tried where offered.
    #[test]
    fn misspelt_governors_and_preferences_are_refused() {
        let (line, key, msg) = invalid("[cpu.all]\ngovernor = \"performnce\"\n");
        assert_eq!((line, key.as_str()), (2, "cpu.all.governor"));
        assert!(msg.contains("did you mean \"performance\"?"), "{msg}");
        let (line, key, msg) =
            invalid("[cpu.all]\ngovernor = \"schedutil\"\n\n[cpu.1]\nepp = [\"balanced_power\"]\n");
        assert_eq!((line, key.as_str()), (5, "cpu.1.epp"));
        assert!(msg.contains("did you mean \"balance_power\"?"), "{msg}");
        let p =
            parse_text("[cpu.all]\ngovernor = [\"interactive\", \"schedutil\"]\nepp = \"power\"\n")
                .unwrap();
        let all = &p.cpu[0].settings;
        assert_eq!(
            all.governor.as_ref().unwrap().value,
            ["interactive", "schedutil"]
        );
        assert_eq!(edit_distance("performnce", "performance"), 1);
        assert_eq!(edit_distance("fast", "power"), 5);
    }

    #[test]
    fn every_builtin_parses_and_has_a_description() {
        let p = Profiles::builtin();
        for (name, _) in BUILTIN {
            let prof = p.resolve(name).unwrap();
            assert!(
                prof.description.split_whitespace().count() > 20,
                "{name}: one paragraph of description"
            );
        }
        let rt = p.resolve("realtime").unwrap();
        assert_eq!(rt.includes, vec!["lowlatency"]);
        assert!(rt.isolation.is_set());
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let (line, key, msg) =
            invalid("description = \"x\"\n\n[cpu.2]\ngovernor = \"performance\"\nfrequency = 3\n");
        assert_eq!(line, 5);
        assert_eq!(key, "cpu.2.frequency");
        assert!(msg.contains("unknown field"), "{msg}");
        let (line, key, _) = invalid("[system]\ntimer_migraton = false\n");
        assert_eq!((line, key.as_str()), (2, "system.timer_migraton"));
        let (line, key, _) = invalid("[sytem]\nturbo = true\n");
        assert_eq!((line, key.as_str()), (1, "sytem"));
    }

    #[test]
    fn wrong_types_name_file_line_and_key() {
        let (line, key, msg) = invalid("[system]\nturbo = \"yes\"\n");
        assert_eq!((line, key.as_str()), (2, "system.turbo"));
        assert!(msg.contains("bool"), "{msg}");
        let (line, key, msg) = invalid("[cpu.all]\nmax_idle_latency_us = -3\n");
        assert_eq!((line, key.as_str()), (2, "cpu.all.max_idle_latency_us"));
        assert!(msg.contains("none"), "{msg}");
        let (line, key, _) = invalid("\n[cpu.all]\ngovernor = 5\n");
        assert_eq!((line, key.as_str()), (3, "cpu.all.governor"));
        let (line, key, _) = invalid("[system]\nvmstat_interval_s = 1.5\n");
        assert_eq!((line, key.as_str()), (2, "system.vmstat_interval_s"));
        // A negative count names the accepted form too.
        let (line, key, msg) = invalid("[system]\nvmstat_interval_s = -5\n");
        assert_eq!((line, key.as_str()), (2, "system.vmstat_interval_s"));
        assert!(msg.contains("(accepted: "), "{msg}");
        // Includes are profiles merged in turn, not alternatives as governors are.
        let (line, key, msg) = invalid("include = 5\n");
        assert_eq!((line, key.as_str()), (1, "include"));
        assert!(msg.contains("a profile name or an array of them"), "{msg}");
        assert!(!msg.contains("first one available"), "{msg}");
        // A wrong type names the form a built-in profile writes the key in.
        let (_, _, msg) = invalid("[boot]\nisolcpus = \"1\"\n");
        assert!(
            msg.ends_with(
                "(accepted: e.g. `isolcpus = [\"managed_irq\", \"domain\"]`, as the built-in \
                 profile realtime has it)"
            ),
            "{msg}"
        );
    }

    /// Values the kernel would refuse are refused here, before anything is written.
    #[test]
    fn values_beyond_what_the_kernel_takes_name_its_range() {
        for (text, key, range) in [
            (
                "[system]\nvmstat_interval_s = 5000000000\n",
                "system.vmstat_interval_s",
                "from 1 to 2147483",
            ),
            (
                "[system]\nsched_rt_runtime_us = 2147483648\n",
                "system.sched_rt_runtime_us",
                "from 0 to 2147483647, or -1",
            ),
            (
                "[cpu.all]\npm_qos_resume_latency_us = 2147483647\n",
                "cpu.all.pm_qos_resume_latency_us",
                "from 0 to 2147483646, or \"none\"",
            ),
            (
                "[system]\ncpu_dma_latency_us = 2147483648\n",
                "system.cpu_dma_latency_us",
                "from 0 to 2147483647",
            ),
            // Below the range, and negative where the type refuses it first: the key's range,
            // not the type's ("expected u32").
            (
                "[system]\ncpu_dma_latency_us = -1\n",
                "system.cpu_dma_latency_us",
                "-1 is out of range (accepted: µs from 0 to 2147483647)",
            ),
            (
                "[system]\nvmstat_interval_s = 0\n",
                "system.vmstat_interval_s",
                "0 is out of range (accepted: seconds from 1 to 2147483)",
            ),
            (
                "[system]\nsched_rt_runtime_us = -2\n",
                "system.sched_rt_runtime_us",
                "-2 is out of range (accepted: microseconds from 0 to 2147483647, or -1",
            ),
            (
                "[kernel]\nhz = -250\n",
                "kernel.hz",
                "-250 is out of range (accepted: 100, 250, 300 or 1000)",
            ),
            (
                "[boot]\nmax_cstate = -1\n",
                "boot.max_cstate",
                "-1 is out of range (accepted: a C-state number",
            ),
        ] {
            let (line, k, msg) = invalid(text);
            assert_eq!((line, k.as_str()), (2, key), "{text}");
            assert!(msg.contains(range), "{text}: {msg}");
        }
        // The largest accepted values parse.
        for text in [
            "[system]\nvmstat_interval_s = 2147483\n",
            "[cpu.all]\npm_qos_resume_latency_us = 2147483646\n",
        ] {
            assert!(parse_text(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn malformed_cpu_keys_and_values() {
        let (line, key, msg) = invalid("[cpu.x2]\ngovernor = \"performance\"\n");
        assert_eq!((line, key.as_str()), (1, "cpu.x2"));
        assert!(msg.contains("accepted"), "{msg}");
        let (line, key, _) = invalid("[cpu.1]\nmax_idle_latency_us = 2\nmax_idle_state = \"C1\"\n");
        assert_eq!((line, key.as_str()), (3, "cpu.1.max_idle_state"));
        let (_, key, _) = invalid("[boot]\npreempt = \"fast\"\n");
        assert_eq!(key, "boot.preempt");
        let (_, key, _) = invalid("[boot]\nisolcpus = [\"domain\", \"everything\"]\n");
        assert_eq!(key, "boot.isolcpus");
        let (_, key, _) = invalid("[isolation]\nisolated = \"3-1\"\n");
        assert_eq!(key, "isolation.isolated");
        let (line, _, _) = invalid("[system\n");
        assert_eq!(line, 1);
    }

    #[test]
    fn per_cpu_tables_in_precedence_order() {
        let p = parse_text(
            "[cpu.2]\nmax_idle_latency_us = 0\n[cpu.3]\nmax_idle_state = \"C1\"\n\
             [cpu.all]\ngovernor = [\"schedutil\", \"powersave\"]\nmax_idle_latency_us = \"none\"\n\
             [cpu.\"2-3\"]\ngovernor = \"performance\"\npm_qos_resume_latency_us = 0\n",
        )
        .unwrap();
        let s0 = p.settings_for(0, None);
        assert_eq!(
            s0.governor.unwrap().value,
            vec!["schedutil".to_string(), "powersave".to_string()]
        );
        assert_eq!(s0.idle.unwrap().value, IdleLimit::AllEnabled);
        let s2 = p.settings_for(2, None);
        assert_eq!(s2.governor.as_ref().unwrap().value, vec!["performance"]);
        assert_eq!(s2.idle.unwrap().value, IdleLimit::MaxLatencyUs(0));
        assert_eq!(
            s2.resume_latency.unwrap().value.kernel_value(),
            "n/a".to_string()
        );
        let s3 = p.settings_for(3, None);
        assert_eq!(s3.idle.unwrap().value, IdleLimit::MaxState("C1".into()));
        assert_eq!(s3.governor.unwrap().at.line, 9);
    }

    #[test]
    fn includes_chain_cycles_and_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let w = |n: &str, t: &str| std::fs::write(dir.path().join(n), t).unwrap();
        w(
            "a.toml",
            "description = \"A\"\ninclude = \"b\"\n[system]\nturbo = true\n",
        );
        w(
            "b.toml",
            "include = [\"lowlatency\"]\n[system]\nturbo = false\ntimer_migration = true\n[cpu.all]\ngovernor = \"powersave\"\n",
        );
        w("c.toml", "include = \"d\"\n");
        w("d.toml", "include = \"e\"\n");
        w("e.toml", "include = \"c\"\n");
        w("self.toml", "include = \"self\"\n");
        w(
            "lowlatency.toml",
            "include = \"lowlatency\"\ndescription = \"mine\"\n[system]\nvmstat_interval_s = 30\n",
        );
        w("missing.toml", "\ninclude = \"nowhere\"\n");
        let p = Profiles::load(&[dir.path().to_path_buf()]).unwrap();
        let a = p.resolve("a").unwrap();
        assert_eq!(a.includes, vec!["lowlatency", "lowlatency", "b"]);
        assert_eq!(a.description, "A");
        assert!(a.system.turbo.as_ref().unwrap().value);
        // b's timer_migration overrides lowlatency's, its cpu.all governor too.
        assert!(a.system.timer_migration.as_ref().unwrap().value);
        assert_eq!(a.system.vmstat_interval_s.as_ref().unwrap().value, 30);
        assert_eq!(
            a.settings_for(0, None).governor.unwrap().value,
            vec!["powersave"]
        );
        let e = p.resolve("c").unwrap_err().to_string();
        assert!(e.contains("include cycle: c → d → e → c"), "{e}");
        assert!(e.contains("e.toml:1: include"), "{e}");
        let e = p.resolve("self").unwrap_err().to_string();
        assert!(e.contains("include cycle: self → self"), "{e}");
        let e = p.resolve("missing").unwrap_err().to_string();
        assert!(e.contains("missing.toml:2: include"), "{e}");
        assert!(e.contains("nowhere"), "{e}");
        // The user's lowlatency overrides the built-in and includes it by its own name.
        let l = p.resolve("lowlatency").unwrap();
        assert_eq!(l.description, "mine");
        assert!(matches!(l.source, ProfileSource::File(_)));
        assert!(
            l.system.timer_migration.is_some(),
            "built-in settings inherited"
        );
        let listed = p.list();
        assert!(
            listed
                .iter()
                .any(|l| l.name == "lowlatency" && l.overrides_builtin)
        );
        // A cycle or a missing include lists the profile as unreadable, as `tune show` refuses it.
        for name in ["self", "missing", "c"] {
            let l = listed.iter().find(|l| l.name == name).unwrap();
            assert!(l.description.is_err(), "{name}: {:?}", l.description);
        }
        let a = listed.iter().find(|l| l.name == "a").unwrap();
        assert!(a.description.is_ok(), "{:?}", a.description);
        // By path, relative includes resolve beside the file.
        let by_path = p
            .resolve(dir.path().join("a.toml").to_str().unwrap())
            .unwrap();
        assert_eq!(by_path.name, "a");
        let e = p.resolve("nonesuch").unwrap_err().to_string();
        assert!(
            e.contains("unknown profile") && e.contains("lowlatency"),
            "{e}"
        );
    }
}
