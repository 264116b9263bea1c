//! What a profile would change on this machine, knob by knob: current → target, already set, or
//! "unsupported here: why". Making a plan only reads; it is also the validation of a profile
//! against the machine (CPUs that do not exist, per-CPU settings that share one cpufreq policy).
//!
//! Idle states are chosen per CPU from that CPU's own list, by exit latency or by name, never by
//! index from cpu0.

use crate::TuneError;
use crate::profile::{
    At, CpuSelector, CpuSettings, IdleLimit, IsolatedSpec, Origin, Profile, ResumeLatency,
};
use latlab_model::units::CpuList;
use latlab_sys::Sys;
use latlab_sys::procfs::{self, format_hex_mask, parse_hex_mask};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use latlab_sys::CPU_SYSFS as CPU;

/// Apply order. Restore goes the other way, except that a CPU's governor is put back before its
/// energy-performance preference (intel_pstate and amd-pstate-epp hold EPP at performance while
/// the governor is performance and refuse other EPP writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Governor,
    Epp,
    Boost,
    Turbo,
    CpuidleGovernor,
    IdleState,
    ResumeLatency,
    Sysctl,
    Irq,
    Workqueue,
    Task,
}

impl Phase {
    /// Sort key for restore (lower first).
    pub fn restore_rank(self) -> u8 {
        match self {
            Phase::Task => 0,
            Phase::Workqueue => 1,
            Phase::Irq => 2,
            Phase::Sysctl => 3,
            Phase::ResumeLatency => 4,
            Phase::IdleState => 5,
            Phase::CpuidleGovernor => 6,
            Phase::Turbo => 7,
            Phase::Boost => 8,
            Phase::Governor => 9,
            Phase::Epp => 10,
        }
    }
}

/// What a change writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A system file, by its path under the system root.
    File { path: String },
    /// The CPU affinity of a task (a kernel thread); `start_time` tells a reused pid apart.
    TaskAffinity {
        pid: i32,
        comm: String,
        start_time: u64,
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::File { path } => f.write_str(path),
            Target::TaskAffinity { pid, comm, .. } => write!(f, "affinity of {comm} (pid {pid})"),
        }
    }
}

/// One value to write: the original as read (kept verbatim, so restore puts back the exact
/// bytes) and the new one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub knob: String,
    pub target: Target,
    pub old: String,
    pub new: String,
    pub phase: Phase,
    /// A refusal (EIO/EPERM/EINVAL) is reported and skipped instead of rolling back: managed
    /// IRQs and pinned kernel threads refuse affinity changes.
    #[serde(default)]
    pub best_effort: bool,
}

impl Change {
    pub fn old_value(&self) -> &str {
        self.old.trim()
    }
    pub fn new_value(&self) -> &str {
        self.new.trim()
    }
}

/// The state of one knob in a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemState {
    Change(Change),
    /// Already at the target value.
    Set {
        value: String,
    },
    Unsupported {
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub knob: String,
    pub state: ItemState,
}

/// Housekeeping and isolated CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub isolated: CpuList,
    pub housekeeping: CpuList,
    /// How the isolated CPUs were chosen.
    pub why: String,
}

/// What applying a profile would do here.
#[derive(Debug, Clone)]
pub struct Plan {
    pub profile: String,
    /// The CPUs whose per-CPU settings are touched.
    pub cpus: CpuList,
    pub split: Option<Split>,
    pub items: Vec<Item>,
    pub notes: Vec<String>,
    /// A `/dev/cpu_dma_latency` request the profile wants held.
    pub dma_latency_us: Option<u32>,
    /// CPUs whose idle states it disables under the haltpoll governor, which ignores that
    /// (said in a note): those writes change nothing.
    pub disable_ignored: Option<CpuList>,
}

impl Plan {
    /// The changes, in apply order.
    pub fn changes(&self) -> Vec<&Change> {
        let mut c: Vec<&Change> = self
            .items
            .iter()
            .filter_map(|i| match &i.state {
                ItemState::Change(c) => Some(c),
                _ => None,
            })
            .collect();
        c.sort_by_key(|c| c.phase);
        c
    }

    /// (changes, already set, unsupported).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut n = (0, 0, 0);
        for i in &self.items {
            match i.state {
                ItemState::Change(_) => n.0 += 1,
                ItemState::Set { .. } => n.1 += 1,
                ItemState::Unsupported { .. } => n.2 += 1,
            }
        }
        n
    }

    /// Read the machine and work out every knob of `profile`. `cpus`: the CPUs whose per-CPU
    /// settings to touch (default: every online CPU); also the isolated CPUs of an `auto` split.
    pub fn build(sys: &Sys, profile: &Profile, cpus: Option<&CpuList>) -> Result<Plan, TuneError> {
        let online = sys.online_cpus()?;
        let possible = sys.possible_cpus().unwrap_or_else(|_| online.clone());
        let scope = match cpus {
            Some(list) => {
                if let Some(message) = list.not_within(&online) {
                    return Err(TuneError::Cpus {
                        cpus: list.to_string(),
                        message,
                    });
                }
                list.clone()
            }
            None => online.clone(),
        };
        for rule in &profile.cpu {
            match &rule.selector {
                CpuSelector::List(l) => {
                    if let Some(bad) = l.cpus().iter().find(|c| !possible.contains(**c)) {
                        return Err(TuneError::Invalid {
                            at: rule.at.clone(),
                            message: format!(
                                "CPU {bad} does not exist here (accepted: CPUs {possible})"
                            ),
                        });
                    }
                }
                CpuSelector::Isolated | CpuSelector::Housekeeping
                    if !profile.isolation.is_set() =>
                {
                    return Err(TuneError::Invalid {
                        at: rule.at.clone(),
                        message: "applies only to a profile with an [isolation] section".into(),
                    });
                }
                _ => {}
            }
        }
        // The kernel refuses a runtime longer than its period: said here, before any write.
        if let Some(v) = &profile.system.sched_rt_runtime_us
            && let Some(period) = sys
                .read_trim("/proc/sys/kernel/sched_rt_period_us")
                .ok()
                .and_then(|p| p.parse::<i64>().ok())
            && v.value > period
        {
            return Err(TuneError::Invalid {
                at: v.at.clone(),
                message: format!(
                    "{} is longer than sched_rt_period_us here, which the kernel refuses \
                     (accepted: -1, or 0 to {period})",
                    v.value
                ),
            });
        }
        let mut plan = Plan {
            profile: profile.name.clone(),
            cpus: scope.clone(),
            split: None,
            items: Vec::new(),
            notes: Vec::new(),
            disable_ignored: None,
            dma_latency_us: profile.system.cpu_dma_latency_us.as_ref().map(|a| a.value),
        };
        plan.split = split(sys, profile, &online, &possible, cpus, &mut plan)?;
        let split_ref = plan
            .split
            .as_ref()
            .map(|s| (s.isolated.clone(), s.housekeeping.clone()));
        let settings: BTreeMap<u32, CpuSettings> = scope
            .cpus()
            .iter()
            .map(|&c| {
                (
                    c,
                    profile.settings_for(c, split_ref.as_ref().map(|(i, h)| (i, h))),
                )
            })
            .collect();
        for rule in &profile.cpu {
            if let CpuSelector::List(l) = &rule.selector
                && !rule.settings.is_empty()
            {
                let outside: Vec<u32> = l
                    .cpus()
                    .iter()
                    .copied()
                    .filter(|c| !scope.contains(*c))
                    .collect();
                if !outside.is_empty() {
                    plan.notes.push(format!(
                        "{}: CPU {} outside the CPUs tuned ({scope}), left alone",
                        rule.at,
                        CpuList::from_cpus(outside)
                    ));
                }
            }
        }
        cpufreq(sys, &settings, &mut plan)?;
        idle(sys, &settings, profile, &mut plan);
        resume_latency(sys, &settings, &mut plan);
        polling_overrides(&settings, &mut plan);
        system(sys, profile, &mut plan);
        isolation(sys, profile, &mut plan);
        Ok(plan)
    }
}

fn push(plan: &mut Plan, knob: String, state: ItemState) {
    plan.items.push(Item { knob, state });
}

fn unsupported(plan: &mut Plan, knob: impl Into<String>, why: impl Into<String>) {
    push(
        plan,
        knob.into(),
        ItemState::Unsupported { why: why.into() },
    );
}

/// A file knob: already set, a change, or unsupported when the file cannot be read.
fn file_knob(sys: &Sys, plan: &mut Plan, knob: String, path: &str, target: &str, phase: Phase) {
    file_knob_with(sys, plan, knob, path, target, phase, false, false);
}

#[allow(clippy::too_many_arguments)]
fn file_knob_with(
    sys: &Sys,
    plan: &mut Plan,
    knob: String,
    path: &str,
    target: &str,
    phase: Phase,
    force: bool,
    best_effort: bool,
) {
    match sys.read(path) {
        Ok(cur) if cur.trim() == target && !force => {
            push(
                plan,
                knob,
                ItemState::Set {
                    value: target.to_string(),
                },
            );
        }
        Ok(cur) => {
            let change = Change {
                knob: knob.clone(),
                target: Target::File {
                    path: path.to_string(),
                },
                old: cur,
                new: format!("{target}\n"),
                phase,
                best_effort,
            };
            push(plan, knob, ItemState::Change(change));
        }
        Err(_) if !sys.exists(path) => unsupported(plan, knob, format!("{path} is absent")),
        Err(e) => unsupported(plan, knob, format!("cannot read it: {e}")),
    }
}

fn words(sys: &Sys, path: &str) -> Vec<String> {
    sys.read(path)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn subset(a: &CpuList, b: &CpuList) -> bool {
    a.cpus().iter().all(|c| b.contains(*c))
}

fn minus(a: &CpuList, b: &CpuList) -> CpuList {
    CpuList::from_cpus(
        a.cpus()
            .iter()
            .copied()
            .filter(|c| !b.contains(*c))
            .collect(),
    )
}

fn intersect(a: &CpuList, b: &CpuList) -> CpuList {
    CpuList::from_cpus(
        a.cpus()
            .iter()
            .copied()
            .filter(|c| b.contains(*c))
            .collect(),
    )
}

fn split(
    sys: &Sys,
    profile: &Profile,
    online: &CpuList,
    possible: &CpuList,
    cpus: Option<&CpuList>,
    plan: &mut Plan,
) -> Result<Option<Split>, TuneError> {
    if !profile.isolation.is_set() {
        return Ok(None);
    }
    let spec = profile
        .isolation
        .isolated
        .as_ref()
        .map(|a| (a.value.clone(), Some(a.at.clone())))
        .unwrap_or((IsolatedSpec::Auto, None));
    let (isolated, why) = match spec {
        (IsolatedSpec::List(l), at) => {
            if let Some(bad) = l.cpus().iter().find(|c| !possible.contains(**c)) {
                return Err(TuneError::Invalid {
                    at: at.unwrap_or_else(|| Origin {
                        file: profile.source.label(&profile.name),
                        line: 0,
                        key: "isolation.isolated".into(),
                    }),
                    message: format!("CPU {bad} does not exist here (accepted: CPUs {possible})"),
                });
            }
            (intersect(&l, online), "named by the profile".to_string())
        }
        (IsolatedSpec::Auto, _) => {
            let kernel = Some(sys.isolated_cpus()).filter(|l| !l.is_empty());
            match (cpus, kernel) {
                (Some(c), _) if c != online => (c.clone(), "given with --cpus".to_string()),
                (_, Some(k)) => (
                    intersect(&k, online),
                    "isolated by the kernel (isolcpus= or nohz_full=)".to_string(),
                ),
                _ => {
                    let first = online.cpus().first().copied().unwrap_or(0);
                    let core = sys
                        .read_trim(&format!("{CPU}/cpu{first}/topology/thread_siblings_list"))
                        .ok()
                        .and_then(|s| CpuList::parse(&s).ok())
                        .unwrap_or_else(|| CpuList::from_cpus(vec![first]));
                    // CPUs asked that are every online CPU cannot all be isolated: said.
                    let all_asked = if cpus.is_some() {
                        "; the CPUs asked are every online CPU, and one core stays for \
                         housekeeping"
                    } else {
                        ""
                    };
                    (
                        minus(online, &core),
                        format!(
                            "every CPU but the first core, {}{all_asked}",
                            CpuList::phrase(&core)
                        ),
                    )
                }
            }
        }
    };
    let housekeeping = minus(online, &isolated);
    if isolated.is_empty() || housekeeping.is_empty() {
        unsupported(
            plan,
            "isolation",
            format!(
                "{} online cannot be split into housekeeping and isolated CPUs (isolated: {})",
                CpuList::phrase(online),
                if isolated.is_empty() {
                    "none".to_string()
                } else {
                    isolated.to_string()
                }
            ),
        );
        return Ok(None);
    }
    Ok(Some(Split {
        isolated,
        housekeeping,
        why,
    }))
}

struct Policy {
    name: String,
    dir: String,
    cpus: CpuList,
}

/// The cpufreq policy directory governing `cpu` and the CPUs it governs together (a governor
/// written there applies to all of them); `None` where no policy with a governor lists the CPU.
pub fn cpufreq_policy(sys: &Sys, cpu: u32) -> Option<(String, CpuList)> {
    policies(sys)
        .into_iter()
        .find(|p| p.cpus.contains(cpu))
        .map(|p| (p.dir, p.cpus))
}

fn policies(sys: &Sys) -> Vec<Policy> {
    let base = format!("{CPU}/cpufreq");
    let mut out: Vec<Policy> = sys
        .numbered(&base, "policy")
        .into_iter()
        .filter_map(|n| {
            let dir = format!("{base}/policy{n}");
            let cpus = ["related_cpus", "affected_cpus"]
                .iter()
                .find_map(|f| sys.read_trim(&format!("{dir}/{f}")).ok())
                .map(|s| {
                    CpuList::from_cpus(
                        s.split_whitespace()
                            .filter_map(|w| w.parse().ok())
                            .collect(),
                    )
                })
                .unwrap_or_else(|| CpuList::from_cpus(vec![n]));
            sys.exists(&format!("{dir}/scaling_governor"))
                .then(|| Policy {
                    name: format!("policy{n}"),
                    dir,
                    cpus,
                })
        })
        .collect();
    if out.is_empty() {
        // Kernels without policy directories: one per CPU.
        for c in sys.numbered(CPU, "cpu") {
            let dir = format!("{CPU}/cpu{c}/cpufreq");
            if sys.exists(&format!("{dir}/scaling_governor")) {
                out.push(Policy {
                    name: format!("cpu{c}"),
                    dir,
                    cpus: CpuList::from_cpus(vec![c]),
                });
            }
        }
    }
    out
}

/// The one value the in-scope CPUs of a policy ask for (CPUs without the setting agree with
/// anything); two different values are an error naming both.
fn agree<T: Clone + PartialEq + std::fmt::Debug>(
    policy: &Policy,
    settings: &BTreeMap<u32, CpuSettings>,
    get: impl Fn(&CpuSettings) -> Option<&At<T>>,
    what: &str,
) -> Result<Option<At<T>>, TuneError> {
    let mut found: Option<(u32, At<T>)> = None;
    for c in policy.cpus.cpus() {
        let Some(v) = settings.get(c).and_then(&get) else {
            continue;
        };
        match &found {
            None => found = Some((*c, v.clone())),
            Some((c0, f)) if f.value != v.value => {
                return Err(TuneError::Invalid {
                    at: v.at.clone(),
                    message: format!(
                        "{} share cpufreq {}, so they take one {what}: CPU {c} asks {:?} here, \
                         CPU {c0} asks {:?} ({})",
                        CpuList::phrase(&policy.cpus),
                        policy.name,
                        v.value,
                        f.value,
                        f.at
                    ),
                });
            }
            Some(_) => {}
        }
    }
    Ok(found.map(|(_, v)| v))
}

fn cpufreq(
    sys: &Sys,
    settings: &BTreeMap<u32, CpuSettings>,
    plan: &mut Plan,
) -> Result<(), TuneError> {
    let wants = |f: fn(&CpuSettings) -> bool| settings.values().any(f);
    let (want_gov, want_epp, want_boost) = (
        wants(|s| s.governor.is_some()),
        wants(|s| s.epp.is_some()),
        wants(|s| s.boost.is_some()),
    );
    if !(want_gov || want_epp || want_boost) {
        return Ok(());
    }
    let policies = policies(sys);
    if policies.is_empty() {
        let why = "no cpufreq driver: /sys/devices/system/cpu/cpufreq has no policy (a virtual \
                   machine, or frequency scaling is off)";
        for (want, knob) in [
            (want_gov, "cpufreq governor"),
            (want_epp, "cpufreq energy_performance_preference"),
            (want_boost, "cpufreq boost"),
        ] {
            if want {
                unsupported(plan, knob, why);
            }
        }
        return Ok(());
    }
    for policy in &policies {
        let in_scope = intersect(&policy.cpus, &plan.cpus);
        if in_scope.is_empty() {
            continue;
        }
        let label = format!(
            "cpufreq {} ({})",
            policy.name,
            CpuList::phrase(&policy.cpus)
        );
        let driver = sys
            .read_trim(&format!("{}/scaling_driver", policy.dir))
            .unwrap_or_default();
        let gov_path = format!("{}/scaling_governor", policy.dir);
        let current_gov = sys.read_trim(&gov_path).unwrap_or_default();
        let mut target_gov = current_gov.clone();
        let mut gov_changes = false;
        if let Some(g) = agree(policy, settings, |s| s.governor.as_ref(), "governor")? {
            let avail = words(sys, &format!("{}/scaling_available_governors", policy.dir));
            match g.value.iter().find(|w| avail.contains(w)) {
                Some(pick) => {
                    gov_changes = *pick != current_gov;
                    target_gov = pick.clone();
                    file_knob(
                        sys,
                        plan,
                        format!("{label} governor"),
                        &gov_path,
                        pick,
                        Phase::Governor,
                    );
                }
                None => unsupported(
                    plan,
                    format!("{label} governor"),
                    format!(
                        "none of {} is offered by {driver} (available: {})",
                        g.value.join(", "),
                        avail.join(" ")
                    ),
                ),
            }
        }
        if let Some(e) = agree(policy, settings, |s| s.epp.as_ref(), "energy preference")? {
            let knob = format!("{label} energy_performance_preference");
            let path = format!("{}/energy_performance_preference", policy.dir);
            if !sys.exists(&path) {
                unsupported(
                    plan,
                    knob,
                    format!("{driver} has no energy-performance preference"),
                );
            } else {
                let avail = words(
                    sys,
                    &format!("{}/energy_performance_available_preferences", policy.dir),
                );
                let pick = if avail.is_empty() {
                    e.value.first()
                } else {
                    e.value.iter().find(|w| avail.contains(w))
                };
                let holds_performance = target_gov == "performance"
                    && (driver == "intel_pstate" || driver.starts_with("amd-pstate"));
                match pick {
                    None => unsupported(
                        plan,
                        knob,
                        format!(
                            "none of {} is offered (available: {})",
                            e.value.join(", "),
                            avail.join(" ")
                        ),
                    ),
                    Some(p) if holds_performance && p != "performance" => unsupported(
                        plan,
                        knob,
                        format!(
                            "{driver} holds it at performance while the governor is performance"
                        ),
                    ),
                    // A governor change can make the kernel rewrite EPP: write it anyway then.
                    Some(p) => {
                        file_knob_with(sys, plan, knob, &path, p, Phase::Epp, gov_changes, false)
                    }
                }
            }
        }
        if let Some(b) = agree(policy, settings, |s| s.boost.as_ref(), "boost")? {
            let knob = format!("{label} boost");
            let path = format!("{}/boost", policy.dir);
            if sys.exists(&path) {
                file_knob(
                    sys,
                    plan,
                    knob,
                    &path,
                    if b.value { "1" } else { "0" },
                    Phase::Boost,
                );
            } else {
                unsupported(
                    plan,
                    knob,
                    format!("{driver} has no per-policy boost switch"),
                );
            }
        }
    }
    Ok(())
}

struct State {
    index: u32,
    name: String,
    latency: u64,
}

fn idle(sys: &Sys, settings: &BTreeMap<u32, CpuSettings>, profile: &Profile, plan: &mut Plan) {
    let mut disabled_cpus = Vec::new();
    for (&cpu, s) in settings {
        let Some(limit) = &s.idle else { continue };
        let base = format!("{CPU}/cpu{cpu}/cpuidle");
        let states: Vec<State> = sys
            .numbered(&base, "state")
            .into_iter()
            .map(|k| {
                let d = format!("{base}/state{k}");
                State {
                    index: k,
                    name: sys.read_trim(&format!("{d}/name")).unwrap_or_default(),
                    latency: sys
                        .read_trim(&format!("{d}/latency"))
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(u64::MAX),
                }
            })
            .collect();
        if states.is_empty() {
            unsupported(
                plan,
                format!("cpu{cpu} idle states"),
                "no cpuidle states (no cpuidle driver, or idle=poll / cpuidle.off=1)",
            );
            continue;
        }
        let bound = match &limit.value {
            IdleLimit::MaxLatencyUs(n) => Some(*n),
            IdleLimit::AllEnabled => None,
            IdleLimit::MaxState(name) => {
                match states.iter().find(|st| st.name.eq_ignore_ascii_case(name)) {
                    Some(st) => Some(st.latency),
                    None => {
                        unsupported(
                            plan,
                            format!("cpu{cpu} idle states"),
                            format!(
                                "no idle state named {name} on CPU {cpu} (it has {}) ({})",
                                states
                                    .iter()
                                    .map(|s| s.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", "),
                                limit.at
                            ),
                        );
                        continue;
                    }
                }
            }
        };
        let shallowest = states
            .iter()
            .min_by_key(|s| (s.latency, s.index))
            .map(|s| s.index);
        for st in &states {
            let disable = bound.is_some_and(|b| st.latency > b) && Some(st.index) != shallowest;
            // A resume latency limit of 0 makes haltpoll poll: the note below is not for it.
            let polls = s
                .resume_latency
                .as_ref()
                .is_some_and(|r| r.value == ResumeLatency::Us(0));
            if disable && !polls && disabled_cpus.last() != Some(&cpu) {
                disabled_cpus.push(cpu);
            }
            let knob = format!(
                "cpu{cpu} idle {} (state{}, exit {} µs) disable",
                st.name, st.index, st.latency
            );
            file_knob(
                sys,
                plan,
                knob,
                &format!("{base}/state{}/disable", st.index),
                if disable { "1" } else { "0" },
                Phase::IdleState,
            );
        }
    }
    // The haltpoll governor chooses between polling and halt by itself and never reads a
    // state's `disable`; only a latency limit of 0 makes it poll.
    let available = words(sys, &format!("{CPU}/cpuidle/available_governors"));
    let governor = match &profile.system.cpuidle_governor {
        Some(g) if available.contains(&g.value) => Some(g.value.clone()),
        _ => sys
            .read_trim(&format!("{CPU}/cpuidle/current_governor"))
            .ok(),
    };
    if !disabled_cpus.is_empty() && governor.as_deref() == Some("haltpoll") {
        plan.disable_ignored = Some(CpuList::from_cpus(disabled_cpus.clone()));
        plan.notes.push(format!(
            "idle states disabled on {}: the haltpoll governor ignores a disabled state and \
             halts as before; only a limit of 0 keeps a CPU polling (pm_qos_resume_latency_us = \
             0 for those CPUs, or system.cpu_dma_latency_us = 0 held with `latlab tune hold`), \
             or cpuidle_governor = \"menu\" where it is available",
            CpuList::from_cpus(disabled_cpus).phrase()
        ));
    }
}

/// CPUs whose idle states a profile allows (a per-CPU override of an included profile's limit)
/// while their resume latency limit of 0 µs keeps them polling: said, as the states it allows
/// are never entered.
fn polling_overrides(settings: &BTreeMap<u32, CpuSettings>, plan: &mut Plan) {
    let polling: Vec<u32> = settings
        .iter()
        .filter(|(_, s)| {
            let allows = s.idle.as_ref().is_some_and(|i| match &i.value {
                IdleLimit::MaxLatencyUs(us) => *us > 0,
                IdleLimit::MaxState(_) | IdleLimit::AllEnabled => true,
            });
            let polls = s
                .resume_latency
                .as_ref()
                .is_some_and(|r| r.value == ResumeLatency::Us(0));
            allows && polls
        })
        .map(|(&cpu, _)| cpu)
        .collect();
    if !polling.is_empty() {
        plan.notes.push(format!(
            "{}: the idle states the profile allows there are never entered, as its \
             pm_qos_resume_latency_us of 0 µs keeps the CPU polling (set \
             pm_qos_resume_latency_us there too)",
            CpuList::from_cpus(polling).phrase()
        ));
    }
}

fn resume_latency(sys: &Sys, settings: &BTreeMap<u32, CpuSettings>, plan: &mut Plan) {
    for (&cpu, s) in settings {
        let Some(r) = &s.resume_latency else { continue };
        file_knob(
            sys,
            plan,
            format!("cpu{cpu} pm_qos_resume_latency_us"),
            &format!("{CPU}/cpu{cpu}/power/pm_qos_resume_latency_us"),
            &r.value.kernel_value(),
            Phase::ResumeLatency,
        );
    }
    // The file's values read backwards: said once where one of them is shown as a change.
    let shown = plan
        .changes()
        .iter()
        .any(|c| c.phase == Phase::ResumeLatency);
    if shown {
        plan.notes.push(format!(
            "pm_qos_resume_latency_us as the kernel writes it: 0 is no limit, n/a a limit of \
             0 µs ({})",
            if no_cpuidle_driver(sys) {
                "which has no effect here: only a cpuidle governor reads the limit, and with no \
                 cpuidle driver the CPUs halt when idle"
            } else {
                "the CPU only polls when idle"
            }
        ));
    }
}

/// Whether cpuidle has no driver here (no `current_governor`, or `current_driver` is `none`):
/// there are no idle states to choose, so neither a governor nor a PM QoS limit does anything.
pub(crate) fn no_cpuidle_driver(sys: &Sys) -> bool {
    !sys.exists(&format!("{CPU}/cpuidle/current_governor"))
        || sys
            .read_trim(&format!("{CPU}/cpuidle/current_driver"))
            .is_ok_and(|d| d == "none")
}

fn system(sys: &Sys, profile: &Profile, plan: &mut Plan) {
    let s = &profile.system;
    if let Some(t) = &s.turbo {
        if sys.exists(&format!("{CPU}/intel_pstate/no_turbo")) {
            file_knob(
                sys,
                plan,
                "intel_pstate no_turbo".into(),
                &format!("{CPU}/intel_pstate/no_turbo"),
                if t.value { "0" } else { "1" },
                Phase::Turbo,
            );
        } else if sys.exists(&format!("{CPU}/cpufreq/boost")) {
            file_knob(
                sys,
                plan,
                "cpufreq boost".into(),
                &format!("{CPU}/cpufreq/boost"),
                if t.value { "1" } else { "0" },
                Phase::Turbo,
            );
        } else {
            unsupported(
                plan,
                "turbo",
                "no turbo switch (neither intel_pstate/no_turbo nor cpufreq/boost)",
            );
        }
    }
    if let Some(g) = &s.cpuidle_governor {
        let path = format!("{CPU}/cpuidle/current_governor");
        let avail = words(sys, &format!("{CPU}/cpuidle/available_governors"));
        let driver = sys
            .read_trim(&format!("{CPU}/cpuidle/current_driver"))
            .unwrap_or_default();
        if !sys.exists(&path) {
            unsupported(
                plan,
                "cpuidle governor",
                "no cpuidle/current_governor (no cpuidle driver)",
            );
        } else if driver == "none" {
            // The governors are listed, but with no driver there are no states to choose.
            unsupported(
                plan,
                "cpuidle governor",
                "no cpuidle driver (cpuidle/current_driver is none): a governor has no idle \
                 state to choose",
            );
        } else if !avail.contains(&g.value) {
            unsupported(
                plan,
                "cpuidle governor",
                format!(
                    "{} is not available (available: {})",
                    g.value,
                    avail.join(" ")
                ),
            );
        } else {
            file_knob(
                sys,
                plan,
                "cpuidle governor".into(),
                &path,
                &g.value,
                Phase::CpuidleGovernor,
            );
        }
    }
    let sysctl = |plan: &mut Plan, name: &str, path: &str, value: String| {
        file_knob(sys, plan, name.to_string(), path, &value, Phase::Sysctl);
    };
    for (name, path, value) in [
        (
            "kernel.timer_migration",
            "/proc/sys/kernel/timer_migration",
            s.timer_migration
                .as_ref()
                .map(|v| u8::from(v.value).to_string()),
        ),
        (
            "vm.stat_interval",
            "/proc/sys/vm/stat_interval",
            s.vmstat_interval_s.as_ref().map(|v| v.value.to_string()),
        ),
    ] {
        if let Some(value) = value {
            sysctl(plan, name, path, value);
        }
    }
    if let Some(v) = &s.sched_rt_runtime_us {
        sysctl(
            plan,
            "kernel.sched_rt_runtime_us",
            "/proc/sys/kernel/sched_rt_runtime_us",
            v.value.to_string(),
        );
        let fair = sys.exists("/sys/kernel/debug/sched/fair_server");
        plan.notes.push(format!(
            "kernel.sched_rt_runtime_us: on kernels 6.12 and later without RT group scheduling, \
             RT throttling is replaced by the fair server, which still reserves 50 ms per second \
             for normal tasks on a CPU that has them (debugfs sched/fair_server/cpuN/runtime{}); \
             {} alone does not give real-time tasks the whole CPU there",
            if fair {
                ", present here"
            } else {
                ", not visible here"
            },
            v.value
        ));
    }
    if let Some(d) = &s.cpu_dma_latency_us {
        plan.notes.push(format!(
            "system.cpu_dma_latency_us = {}: a /dev/cpu_dma_latency request lasts only while a \
             file stays open, so `tune apply` does not set it; run `{}` (a temporary tuning \
             such as `measure --profile` holds it for its run)",
            d.value,
            profile.hold_command()
        ));
    }
}

/// The CPU mask file `path` confined to the housekeeping CPUs `hk`: set already when `current`
/// (what it holds, if it could be read) lies within them, else a knob writing their mask.
fn housekeeping_mask(
    sys: &Sys,
    plan: &mut Plan,
    knob: &str,
    path: &str,
    current: Option<String>,
    hk: &CpuList,
    phase: Phase,
) {
    match current {
        Some(cur) if parse_hex_mask(&cur).is_some_and(|l| subset(&l, hk)) => {
            push(plan, knob.into(), ItemState::Set { value: cur });
        }
        _ => file_knob(sys, plan, knob.into(), path, &format_hex_mask(hk), phase),
    }
}

fn isolation(sys: &Sys, profile: &Profile, plan: &mut Plan) {
    let Some(split) = plan.split.clone() else {
        return;
    };
    let iso = &profile.isolation;
    let hk = &split.housekeeping;
    if iso.irqs.as_ref().is_some_and(|a| a.value) {
        let names = irq_names(sys);
        for irq in sys.numbered("/proc/irq", "") {
            let path = format!("/proc/irq/{irq}/smp_affinity_list");
            let Ok(cur) = sys.read_trim(&path) else {
                continue;
            };
            let knob = match names.get(&irq) {
                Some(n) => format!("irq {irq} ({n}) affinity"),
                None => format!("irq {irq} affinity"),
            };
            match CpuList::parse(&cur) {
                Ok(l) if subset(&l, hk) => push(plan, knob, ItemState::Set { value: cur }),
                _ => file_knob_with(
                    sys,
                    plan,
                    knob,
                    &path,
                    &hk.to_string(),
                    Phase::Irq,
                    true,
                    true,
                ),
            }
        }
        let path = "/proc/irq/default_smp_affinity";
        let current = sys.read_trim(path).ok();
        housekeeping_mask(
            sys,
            plan,
            "irq default affinity mask (hex)",
            path,
            current,
            hk,
            Phase::Irq,
        );
    }
    if iso.workqueues.as_ref().is_some_and(|a| a.value) {
        let path = "/sys/devices/virtual/workqueue/cpumask";
        match sys.read_trim(path) {
            Ok(cur) => housekeeping_mask(
                sys,
                plan,
                "workqueue cpumask (hex)",
                path,
                Some(cur),
                hk,
                Phase::Workqueue,
            ),
            Err(_) => {
                // Every kernel from 4.2 has it: one that lacks it sees part of /sys.
                let release = sys
                    .read_trim("/proc/sys/kernel/osrelease")
                    .unwrap_or_default();
                let why = match latlab_model::system::kernel_version(&release) {
                    Some(v) if v >= (4, 2) => format!(
                        "no /sys/devices/virtual/workqueue/cpumask, which kernel {release} has: \
                         /sys is mounted in part here (as in some containers)"
                    ),
                    _ => "no /sys/devices/virtual/workqueue/cpumask (a kernel before 4.2)".into(),
                };
                unsupported(plan, "workqueue cpumask (hex)", why)
            }
        }
    }
    if iso.kthreads.as_ref().is_some_and(|a| a.value) {
        if !sys.is_live() {
            unsupported(
                plan,
                "kernel thread affinity",
                "set with a system call, so only on the live system (not under a fixture root)",
            );
        } else {
            kthreads(sys, &split, plan);
        }
    }
}

/// IRQ number → its handlers' names (`ehci_hcd:usb1, snd_hda_intel:card0`), from
/// `/proc/interrupts`.
fn irq_names(sys: &Sys) -> BTreeMap<u32, String> {
    let text = sys.read("/proc/interrupts").unwrap_or_default();
    procfs::parse_interrupts(&text)
        .rows
        .into_iter()
        .filter_map(|r| {
            let (_, actions) = r.chip_and_actions();
            Some((r.irq()?, actions.join(", "))).filter(|(_, names)| !names.is_empty())
        })
        .collect()
}

/// Fields of `/proc/PID/stat` after the command name: (comm, flags, start time).
pub(crate) fn task_stat(sys: &Sys, pid: i32) -> Option<(String, u64, u64)> {
    let stat = sys.read(&format!("/proc/{pid}/stat")).ok()?;
    let st = procfs::parse_task_stat(&stat)?;
    Some((st.comm.to_string(), st.num(9)?, st.num(22)?))
}

/// A task's allowed CPUs from `/proc/PID/status`.
pub(crate) fn task_affinity(sys: &Sys, pid: i32) -> Option<CpuList> {
    let status = sys.read(&format!("/proc/{pid}/status")).ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim()
        .to_string();
    CpuList::parse(&list).ok()
}

fn kthreads(sys: &Sys, split: &Split, plan: &mut Plan) {
    let hk = &split.housekeeping;
    let (mut moved, mut already) = (0, 0);
    for pid in sys.pids().into_iter().filter_map(|p| i32::try_from(p).ok()) {
        let Some((comm, flags, start_time)) = task_stat(sys, pid) else {
            continue;
        };
        if flags & procfs::PF_KTHREAD == 0 || flags & procfs::PF_NO_SETAFFINITY != 0 {
            continue;
        }
        let Some(cur) = task_affinity(sys, pid) else {
            continue;
        };
        if cur.len() <= 1 {
            continue; // bound to one CPU: a per-CPU thread
        }
        if subset(&cur, hk) {
            already += 1;
            continue;
        }
        let new = intersect(&cur, hk);
        if new.is_empty() {
            continue;
        }
        moved += 1;
        let knob = format!("kthread {comm} (pid {pid}) affinity");
        push(
            plan,
            knob.clone(),
            ItemState::Change(Change {
                knob,
                target: Target::TaskAffinity {
                    pid,
                    comm,
                    start_time,
                },
                old: cur.to_string(),
                new: new.to_string(),
                phase: Phase::Task,
                best_effort: true,
            }),
        );
    }
    if moved == 0 {
        push(
            plan,
            "kernel thread affinity".into(),
            ItemState::Set {
                // With one housekeeping CPU, a thread moved there earlier is bound to one CPU
                // and reads as a per-CPU one: not counted, so no "0 already" is said.
                value: if already > 0 {
                    format!("{already} movable kernel threads already on {hk}")
                } else {
                    format!("none to move: no kernel thread outside {hk} may move")
                },
            },
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn restore_puts_the_governor_back_before_epp() {
        assert!(Phase::Governor.restore_rank() < Phase::Epp.restore_rank());
        assert!(Phase::Governor < Phase::Epp);
        assert!(Phase::IdleState.restore_rank() < Phase::Governor.restore_rank());
    }
}
