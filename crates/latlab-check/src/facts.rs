//! The facts the checks decide on, gathered through [`Sys`] so a fixture tree stands in for a
//! machine. Parsing is pure (functions of text, tested alone); gathering only reads files.
//!
//! Beyond the `latlab sysinfo` record ([`SystemInfo`]) the checks read: who runs latlab and with
//! which capabilities (`/proc/self/status`), the resource limits of the invoking user
//! (`/proc/self/limits`, or `/etc/security/limits.conf` and `limits.d` for another user, e.g.
//! the one behind `sudo`), the high-resolution timer state (`/proc/timer_list`), the device
//! names behind every interrupt line (`/proc/interrupts`), mounted file systems
//! (`/proc/mounts`), tasks at real-time priority (`/proc/*/stat`), the available clock sources,
//! THP defrag and irqbalance's banned CPUs.

use latlab_model::SystemInfo;
use latlab_model::system::Field;
use latlab_model::units::CpuList;
use latlab_sys::{Sys, procfs};
use serde::Serialize;

/// Everything the checks look at.
#[derive(Debug, Clone)]
pub struct Facts {
    pub info: SystemInfo,
    /// The latlab process itself.
    pub identity: Field<Identity>,
    /// Limits of the user the check is about (the invoking user).
    pub user: Field<UserLimits>,
    /// Finest `.resolution` of the hrtimer clock bases in `/proc/timer_list`, in ns.
    pub timer_resolution_ns: Field<u64>,
    pub interrupts: Field<Vec<IrqLine>>,
    /// Effective affinity of every IRQ under `/proc/irq`.
    pub irq_affinity: Vec<(u32, CpuList)>,
    pub mounts: Field<Vec<Mount>>,
    /// The mount points `/etc/fstab` names (`None` where it cannot be read).
    pub fstab_targets: Option<Vec<String>>,
    /// Tasks at a real-time policy (fifo, rr, deadline).
    pub rt_tasks: Field<Vec<Task>>,
    /// Names in `available_clocksource`.
    pub clocksources: Vec<String>,
    /// The bracketed choice of `transparent_hugepage/defrag`.
    pub thp_defrag: Option<String>,
    /// `IRQBALANCE_BANNED_CPULIST` (or the hex `IRQBALANCE_BANNED_CPUS`) of irqbalance's config.
    pub irqbalance_banned: Option<String>,
    /// CPUs online (from the inventory), kept as a list for set arithmetic.
    pub online: CpuList,
    /// Isolated CPUs: `isolcpus`/`nohz_full` as the kernel applied them.
    pub isolated: CpuList,
    /// The root directory when it is not `/` (a fixture tree): stripped from messages so they
    /// name system paths.
    pub root_prefix: Option<String>,
}

/// Who the latlab process runs as.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Identity {
    pub uid: u32,
    pub euid: u32,
    pub name: String,
    /// `CapEff` of the process.
    pub cap_eff: u64,
}

impl Identity {
    pub const CAP_IPC_LOCK: u32 = procfs::cap::IPC_LOCK;
    pub const CAP_SYS_NICE: u32 = procfs::cap::SYS_NICE;

    pub fn has_cap(&self, cap: u32) -> bool {
        procfs::has_cap(self.cap_eff, cap)
    }
    pub fn is_root(&self) -> bool {
        self.euid == 0
    }
}

/// A resource limit value: a number, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Value(u64),
    Unlimited,
}

impl Limit {
    pub fn at_least(&self, n: u64) -> bool {
        match self {
            Limit::Unlimited => true,
            Limit::Value(v) => *v >= n,
        }
    }
    pub fn is_zero(&self) -> bool {
        *self == Limit::Value(0)
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Unlimited => write!(f, "unlimited"),
            Limit::Value(v) => write!(f, "{v}"),
        }
    }
}

/// Where a user's limits were taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// The latlab process runs as this user: its own limits are the session's.
    Process,
    /// Another user (e.g. the one behind sudo): computed from limits.conf and limits.d as
    /// pam_limits would at their next login.
    Config,
}

/// The real-time priority and memory-lock limits of one user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserLimits {
    pub user: String,
    /// Named with `--user` (not the sudo caller, nor latlab's own user).
    pub named: bool,
    pub uid: Option<u32>,
    pub groups: Vec<String>,
    pub source: LimitSource,
    /// Soft RLIMIT_RTPRIO.
    pub rtprio: Limit,
    /// Soft RLIMIT_MEMLOCK in bytes.
    pub memlock_bytes: Limit,
    /// The limits.d line granting the rtprio value, if one does.
    pub rtprio_from: Option<String>,
    pub memlock_from: Option<String>,
    /// Groups that limits.conf/limits.d grant a real-time priority to, with the file, that the
    /// user is not a member of.
    pub rtprio_groups_not_joined: Vec<(String, String)>,
    /// The same for memlock.
    pub memlock_groups_not_joined: Vec<(String, String)>,
    /// What limits.conf/limits.d give the user for rtprio (None: no entry applies).
    pub rtprio_configured: Option<Limit>,
    /// True when the user is root with CAP_SYS_NICE (RLIMIT_RTPRIO does not bind).
    pub privileged: bool,
    /// True when the user is root with CAP_IPC_LOCK (RLIMIT_MEMLOCK does not bind).
    pub ipc_lock: bool,
}

/// One row of `/proc/interrupts` for a numbered IRQ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IrqLine {
    pub irq: u32,
    pub total: u64,
    /// Chip, hardware IRQ and flow as printed (`IR-IO-APIC 16-fasteoi`).
    pub chip: String,
    /// The handlers' names (`ehci_hcd:usb1`, `snd_hda_intel:card0`).
    pub actions: Vec<String>,
}

/// One mounted file system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub fstype: String,
    pub options: Vec<String>,
}

/// A process with threads at a real-time policy: the policy and priority of its highest one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub pid: u32,
    pub comm: String,
    pub uid: Option<u32>,
    pub user: Option<String>,
    pub policy: String,
    pub rt_priority: u32,
    pub kernel_thread: bool,
    /// How many of its threads are at a real-time policy (an audio server's or a measuring
    /// tool's often are not its main thread).
    pub threads: u32,
}

// ---------------------------------------------------------------------------------------------
// Pure parsers.

/// The finest `.resolution: N nsecs` in `/proc/timer_list` (1 when high-resolution timers are
/// active; one tick, e.g. 4000000, when they are not).
pub fn parse_timer_resolution(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix(".resolution:")?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .min()
}

/// Numbered IRQ rows of `/proc/interrupts` with their handlers' names
/// ([`procfs::InterruptRow::chip_and_actions`]).
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    procfs::parse_interrupts(text)
        .rows
        .into_iter()
        .filter_map(|row| {
            let irq = row.irq()?;
            let (chip, actions) = row.chip_and_actions();
            Some(IrqLine {
                irq,
                total: row.counts.iter().sum(),
                chip,
                actions,
            })
        })
        .collect()
}

/// `/proc/mounts` (or `/etc/fstab`-like) lines; octal escapes (`\040`) are decoded.
pub fn parse_mounts(text: &str) -> Vec<Mount> {
    let unescape = |s: &str| {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\'
                && let Some(oct) = s.get(i + 1..i + 4)
                && let Ok(v) = u8::from_str_radix(oct, 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 || f[0].starts_with('#') {
                return None;
            }
            Some(Mount {
                source: unescape(f[0]),
                target: unescape(f[1]),
                fstype: f[2].to_string(),
                options: f[3].split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// Fields of `/proc/PID/stat`: comm, flags, rt_priority and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFields<'a> {
    pub comm: &'a str,
    pub flags: u64,
    pub rt_priority: u32,
    pub policy: u32,
}

/// Parse `/proc/PID/stat`; the command name may hold spaces and parentheses, so fields are
/// counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<StatFields<'_>> {
    let st = procfs::parse_task_stat(text)?;
    Some(StatFields {
        comm: st.comm,
        flags: st.num(9)?,
        rt_priority: st.num(40)?,
        policy: st.num(41)?,
    })
}

pub use procfs::PF_KTHREAD;

/// The name of a scheduling policy number, for the real-time ones.
pub fn rt_policy_name(policy: u32) -> Option<&'static str> {
    match policy {
        1 => Some("fifo"),
        2 => Some("rr"),
        6 => Some("deadline"),
        _ => None,
    }
}

/// Real and effective uid and `CapEff` from `/proc/PID/status`.
pub fn parse_status(text: &str) -> Option<(u32, u32, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).map(|r| r.trim().to_string()))
    };
    let uids = field("Uid:")?;
    let mut it = uids.split_whitespace();
    let uid = it.next()?.parse().ok()?;
    let euid = it.next()?.parse().ok()?;
    let cap = latlab_sys::procfs::cap_eff(text).unwrap_or(0);
    Some((uid, euid, cap))
}

/// `Max realtime priority` and `Max locked memory` (soft values) from `/proc/PID/limits`.
pub fn parse_proc_limits(text: &str) -> (Option<Limit>, Option<Limit>) {
    let soft = |name: &str| {
        let (v, _, _) = procfs::limit(text, name)?;
        Some(if v == "unlimited" {
            Limit::Unlimited
        } else {
            Limit::Value(v.parse().ok()?)
        })
    };
    (soft("Max realtime priority"), soft("Max locked memory"))
}

/// A user entry of `/etc/passwd`: name, uid, primary gid.
pub fn parse_passwd(text: &str) -> Vec<(String, u32, u32)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((
                f.first()?.to_string(),
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

/// Groups of `/etc/group`: name, gid, members.
pub fn parse_group(text: &str) -> Vec<(String, u32, Vec<String>)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((
                f.first()?.to_string(),
                f.get(2)?.parse().ok()?,
                f.get(3)
                    .map(|m| {
                        m.split(',')
                            .map(|s| s.trim().to_string())
                            .filter(|s| !s.is_empty())
                            .collect()
                    })
                    .unwrap_or_default(),
            ))
        })
        .collect()
}

/// One line of limits.conf / limits.d.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitEntry {
    pub domain: String,
    /// `soft`, `hard` or `-` (both).
    pub kind: String,
    pub item: String,
    pub value: Limit,
    /// `file:line`.
    pub origin: String,
}

/// Parse limits.conf syntax: `<domain> <type> <item> <value>`, `#` comments.
pub fn parse_limits_conf(text: &str, file: &str) -> Vec<LimitEntry> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.split('#').next().unwrap_or("");
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 {
                return None;
            }
            let value = match f[3] {
                "unlimited" | "infinity" | "-1" => Limit::Unlimited,
                v => Limit::Value(v.parse().ok()?),
            };
            Some(LimitEntry {
                domain: f[0].to_string(),
                kind: f[1].to_string(),
                item: f[2].to_string(),
                value,
                origin: format!("{file}:{}", i + 1),
            })
        })
        .collect()
}

/// The soft value pam_limits would give `user` (member of `groups`, with `uid`) for `item`,
/// and the entry it comes from. A user's own entry beats a group's, which beats `%` and `*`;
/// among equals the later one wins. Group and wildcard entries never apply to root.
pub fn resolve_limit<'a>(
    entries: &'a [LimitEntry],
    user: &str,
    uid: Option<u32>,
    groups: &[String],
    item: &str,
) -> Option<&'a LimitEntry> {
    let is_root = uid == Some(0) || user == "root";
    let rank = |e: &LimitEntry| -> Option<u8> {
        let d = e.domain.as_str();
        if d == user {
            return Some(0);
        }
        if let Some((lo, hi)) = d.split_once(':')
            && !d.starts_with('@')
            && !d.starts_with('%')
            && let Some(uid) = uid
        {
            let lo_ok = lo.is_empty() || lo.parse::<u32>().is_ok_and(|v| uid >= v);
            let hi_ok = hi.is_empty() || hi.parse::<u32>().is_ok_and(|v| uid <= v);
            return (lo_ok && hi_ok && !(lo.is_empty() && hi.is_empty())).then_some(0);
        }
        if is_root {
            return None;
        }
        if let Some(g) = d.strip_prefix('@') {
            return groups.iter().any(|m| m == g).then_some(1);
        }
        if let Some(g) = d.strip_prefix('%') {
            return (g.is_empty() || groups.iter().any(|m| m == g)).then_some(2);
        }
        (d == "*").then_some(3)
    };
    let mut best: Option<(u8, &LimitEntry)> = None;
    for e in entries
        .iter()
        .filter(|e| e.item == item && (e.kind == "soft" || e.kind == "-"))
    {
        if let Some(r) = rank(e)
            && best.is_none_or(|(b, _)| r <= b)
        {
            best = Some((r, e));
        }
    }
    best.map(|(_, e)| e)
}

/// The bracketed selection of a sysfs selector (`always [madvise] never`).
fn selected(text: &str) -> Option<String> {
    latlab_sys::selected(text)
}

/// A `KEY=value` of a shell-style configuration file, quotes removed.
pub fn shell_var(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let v = l.strip_prefix(key)?.strip_prefix('=')?;
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        (!v.is_empty()).then_some(v)
    })
}

// ---------------------------------------------------------------------------------------------
// Gathering.

/// Whose limits the checks are about.
#[derive(Debug, Clone, Default)]
pub struct UserChoice {
    /// A user named explicitly (`--user`).
    pub explicit: Option<String>,
    /// `SUDO_USER` of the environment: used when latlab runs as root through sudo.
    pub sudo_user: Option<String>,
}

impl Facts {
    /// Read everything the checks need. Never fails: a fact that cannot be read is
    /// `Field::Unavailable` with the reason, and the checks that need it say so.
    pub fn gather(sys: &Sys, who: &UserChoice) -> Facts {
        let info = sys.system_info();
        let passwd = sys
            .read("/etc/passwd")
            .map(|t| parse_passwd(&t))
            .unwrap_or_default();
        let group = sys
            .read("/etc/group")
            .map(|t| parse_group(&t))
            .unwrap_or_default();
        let name_of = |uid: u32| {
            passwd
                .iter()
                .find(|(_, u, _)| *u == uid)
                .map(|(n, _, _)| n.clone())
        };
        let identity: Field<Identity> = match sys.read("/proc/self/status") {
            Ok(t) => match parse_status(&t) {
                Some((uid, euid, cap_eff)) => Field::Value(Identity {
                    uid,
                    euid,
                    name: name_of(euid).unwrap_or_else(|| format!("uid {euid}")),
                    cap_eff,
                }),
                None => Field::unavailable("/proc/self/status: no Uid line"),
            },
            Err(e) => Field::unavailable(e.to_string()),
        };
        let user = gather_user(sys, who, identity.value(), &passwd, &group);
        let online = sys.online_cpus().unwrap_or_default();
        let isolated = sys.isolated_cpus();
        let uid_name = |uid: u32| name_of(uid);
        Facts {
            identity,
            user,
            timer_resolution_ns: match sys.read("/proc/timer_list") {
                Ok(t) => parse_timer_resolution(&t)
                    .ok_or_else(|| "/proc/timer_list: no .resolution line".to_string())
                    .into(),
                Err(e) => Field::unavailable(e.to_string()),
            },
            interrupts: sys
                .read("/proc/interrupts")
                .map(|t| parse_interrupts(&t))
                .into(),
            irq_affinity: irq_affinity(sys),
            mounts: sys.read("/proc/mounts").map(|t| parse_mounts(&t)).into(),
            fstab_targets: sys
                .read("/etc/fstab")
                .ok()
                .map(|t| parse_mounts(&t).into_iter().map(|m| m.target).collect()),
            rt_tasks: rt_tasks(sys, &uid_name),
            clocksources: sys
                .read_trim("/sys/devices/system/clocksource/clocksource0/available_clocksource")
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            thp_defrag: sys
                .read_trim("/sys/kernel/mm/transparent_hugepage/defrag")
                .ok()
                .and_then(|s| selected(&s)),
            irqbalance_banned: ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"]
                .iter()
                .find_map(|p| {
                    let t = sys.read(p).ok()?;
                    shell_var(&t, "IRQBALANCE_BANNED_CPULIST").or_else(|| {
                        let mask = shell_var(&t, "IRQBALANCE_BANNED_CPUS")?;
                        Some(procfs::parse_hex_mask(&mask)?.to_string())
                    })
                }),
            online,
            isolated,
            info,
            root_prefix: (!sys.is_live()).then(|| {
                sys.root()
                    .to_string_lossy()
                    .trim_end_matches('/')
                    .to_string()
            }),
        }
    }
}

fn irq_affinity(sys: &Sys) -> Vec<(u32, CpuList)> {
    sys.irq_affinities()
        .into_iter()
        .filter_map(|(irq, l)| Some((irq, l?)))
        .collect()
}

fn rt_tasks(sys: &Sys, name_of: &dyn Fn(u32) -> Option<String>) -> Field<Vec<Task>> {
    let own = sys.is_live().then(std::process::id);
    let pids = sys.pids();
    if pids.is_empty() {
        return Field::unavailable("no process directories under /proc (unreadable or empty)");
    }
    let mut out = Vec::new();
    for pid in pids {
        if Some(pid) == own {
            continue;
        }
        // Processes come and go while we read: a vanished one is simply skipped.
        let Ok(stat) = sys.read(&format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(main) = parse_stat(&stat) else {
            continue;
        };
        // Every thread's stat: the main thread's alone where the task directory is unreadable.
        let stats: Vec<String> = sys
            .list_dir(&format!("/proc/{pid}/task"))
            .iter()
            .filter_map(|tid| sys.read(&format!("/proc/{pid}/task/{tid}/stat")).ok())
            .collect();
        let realtime: Vec<(&'static str, u32)> = if stats.is_empty() {
            rt_policy_name(main.policy)
                .map(|p| (p, main.rt_priority))
                .into_iter()
                .collect()
        } else {
            stats
                .iter()
                .filter_map(|t| parse_stat(t))
                .filter_map(|f| Some((rt_policy_name(f.policy)?, f.rt_priority)))
                .collect()
        };
        // Deadline threads run before any fifo or rr one; among those the priority ranks.
        let Some(&(policy, rt_priority)) = realtime
            .iter()
            .max_by_key(|(policy, prio)| (*policy == "deadline", *prio))
        else {
            continue;
        };
        let uid = sys
            .read(&format!("/proc/{pid}/status"))
            .ok()
            .and_then(|t| parse_status(&t))
            .map(|(uid, _, _)| uid);
        out.push(Task {
            pid,
            comm: main.comm.to_string(),
            uid,
            user: uid.and_then(name_of),
            policy: policy.to_string(),
            rt_priority,
            kernel_thread: main.flags & PF_KTHREAD != 0,
            threads: u32::try_from(realtime.len()).unwrap_or(u32::MAX),
        });
    }
    Field::Value(out)
}

/// All limits.conf and limits.d entries, in the order pam_limits reads them.
fn limits_entries(sys: &Sys) -> Vec<LimitEntry> {
    let mut out = Vec::new();
    let conf = "/etc/security/limits.conf";
    if let Ok(t) = sys.read(conf) {
        out.extend(parse_limits_conf(&t, conf));
    }
    let dir = "/etc/security/limits.d";
    for f in sys
        .list_dir(dir)
        .into_iter()
        .filter(|n| n.ends_with(".conf"))
    {
        let p = format!("{dir}/{f}");
        if let Ok(t) = sys.read(&p) {
            out.extend(parse_limits_conf(&t, &p));
        }
    }
    out
}

/// Groups that `item` entries grant something above zero to, with the first such entry's
/// origin, that the user is not a member of.
fn groups_not_joined(
    entries: &[LimitEntry],
    groups: &[String],
    item: &str,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.item == item && !e.value.is_zero())
    {
        if let Some(g) = e.domain.strip_prefix('@')
            && !groups.iter().any(|m| m == g)
            && !out.iter().any(|(a, _)| a == g)
        {
            out.push((g.to_string(), e.origin.clone()));
        }
    }
    out
}

fn gather_user(
    sys: &Sys,
    who: &UserChoice,
    me: Option<&Identity>,
    passwd: &[(String, u32, u32)],
    group: &[(String, u32, Vec<String>)],
) -> Field<UserLimits> {
    // Whose limits: an explicit user, else the sudo caller when we run as root, else us.
    let name = match (&who.explicit, me) {
        (Some(n), _) => n.clone(),
        (None, Some(me)) if me.is_root() => {
            who.sudo_user.clone().unwrap_or_else(|| me.name.clone())
        }
        (None, Some(me)) => me.name.clone(),
        (None, None) => {
            return Field::unavailable("who runs latlab is unknown (/proc/self/status)");
        }
    };
    let pw = passwd.iter().find(|(n, _, _)| *n == name);
    let uid = pw
        .map(|(_, u, _)| *u)
        .or_else(|| me.filter(|m| m.name == name).map(|m| m.euid));
    let mut groups: Vec<String> = group
        .iter()
        .filter(|(_, gid, members)| {
            members.contains(&name) || pw.is_some_and(|(_, _, pg)| pg == gid)
        })
        .map(|(g, _, _)| g.clone())
        .collect();
    groups.sort();
    groups.dedup();
    let entries = limits_entries(sys);
    let rt_entry = resolve_limit(&entries, &name, uid, &groups, "rtprio");
    let ml_entry = resolve_limit(&entries, &name, uid, &groups, "memlock");
    let rtprio_not_joined = groups_not_joined(&entries, &groups, "rtprio");
    let memlock_not_joined = groups_not_joined(&entries, &groups, "memlock");
    let is_me = me.is_some_and(|m| m.name == name);
    let has = |cap: u32| {
        if is_me {
            me.is_some_and(|m| m.has_cap(cap))
        } else {
            uid == Some(0)
        }
    };
    let (privileged, ipc_lock) = (has(Identity::CAP_SYS_NICE), has(Identity::CAP_IPC_LOCK));
    let (rtprio, memlock_bytes, source) = if is_me {
        let (rt, ml) = match sys.read("/proc/self/limits") {
            Ok(t) => parse_proc_limits(&t),
            Err(e) => return Field::unavailable(e.to_string()),
        };
        let (Some(rt), Some(ml)) = (rt, ml) else {
            return Field::unavailable(
                "/proc/self/limits lacks the realtime or locked-memory line",
            );
        };
        (rt, ml, LimitSource::Process)
    } else {
        // Without an entry the kernel defaults apply: no rtprio, 8 MiB of locked memory.
        let rt = rt_entry.map(|e| e.value).unwrap_or(Limit::Value(0));
        let ml = match ml_entry.map(|e| e.value) {
            Some(Limit::Value(kib)) => Limit::Value(kib.saturating_mul(1024)),
            Some(Limit::Unlimited) => Limit::Unlimited,
            None => Limit::Value(8 << 20),
        };
        (rt, ml, LimitSource::Config)
    };
    let describe = |e: &LimitEntry| {
        format!(
            "{}: {} {} {} {}",
            e.origin, e.domain, e.kind, e.item, e.value
        )
    };
    Field::Value(UserLimits {
        named: who.explicit.is_some(),
        user: name,
        uid,
        groups,
        source,
        rtprio,
        memlock_bytes,
        rtprio_from: rt_entry.map(describe),
        memlock_from: ml_entry.map(describe),
        rtprio_groups_not_joined: rtprio_not_joined,
        memlock_groups_not_joined: memlock_not_joined,
        rtprio_configured: rt_entry.map(|e| e.value),
        privileged,
        ipc_lock,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn timer_resolution() {
        let t = "cpu: 0\n clock 0:\n  .base:       0\n  .index:      0\n  .resolution: 1 nsecs\n";
        assert_eq!(parse_timer_resolution(t), Some(1));
        let low = "  .resolution: 4000000 nsecs\n  .resolution: 4000000 nsecs\n";
        assert_eq!(parse_timer_resolution(low), Some(4_000_000));
        assert_eq!(parse_timer_resolution("nothing"), None);
    }

    #[test]
    fn interrupts_rows_and_handlers() {
        let t = "            CPU0       CPU1       CPU2       CPU3       \n\
   0:          8          0          0          0  IR-IO-APIC    2-edge      timer\n\
  16:          0        120          0          0  IR-IO-APIC   16-fasteoi   ehci_hcd:usb1, snd_hda_intel:card0\n\
 132:          0          0       1045          0  IR-PCI-MSI-0000:00:1f.3    0-edge      snd_hda_intel:card0\n\
 NMI:          0          0          0          0   Non-maskable interrupts\n\
 ERR:          0\n";
        let rows = parse_interrupts(t);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].actions, vec!["timer"]);
        assert_eq!(rows[1].irq, 16);
        assert_eq!(rows[1].total, 120);
        assert_eq!(rows[1].chip, "IR-IO-APIC 16-fasteoi");
        assert_eq!(
            rows[1].actions,
            vec!["ehci_hcd:usb1", "snd_hda_intel:card0"]
        );
        assert_eq!(rows[2].actions, vec!["snd_hda_intel:card0"]);
        // arm64 layout, and a chip name with spaces.
        let arm = "           CPU0       CPU1       \n\
 29:      91246          0     GICv2 158 Level     mmc1, mmc0\n\
 39:       8812          0  BRCM STB PCIe MSI 524288 Edge      xhci_hcd\n\
IPI0:     51203      48877       Rescheduling interrupts\n";
        let rows = parse_interrupts(arm);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].actions, vec!["mmc1", "mmc0"]);
        assert_eq!(rows[1].chip, "BRCM STB PCIe MSI 524288 Edge");
        assert_eq!(rows[1].actions, vec!["xhci_hcd"]);
    }

    #[test]
    fn mounts_with_escapes() {
        let m = parse_mounts(
            "/dev/sda1 /media/my\\040disk ext4 rw,noatime 0 0\nproc /proc proc rw 0 0\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].target, "/media/my disk");
        assert!(m[0].options.contains(&"noatime".to_string()));
    }

    #[test]
    fn stat_fields_with_odd_comm() {
        let mut fields = vec!["S"; 50];
        fields[9 - 3] = "2097152"; // flags: PF_KTHREAD
        fields[40 - 3] = "99";
        fields[41 - 3] = "1";
        let line = format!("42 (a) b (c)) {}", fields.join(" "));
        let s = parse_stat(&line).unwrap();
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!(s.rt_priority, 99);
        assert_eq!(s.policy, 1);
        assert!(s.flags & PF_KTHREAD != 0);
        assert_eq!(rt_policy_name(0), None);
        assert_eq!(rt_policy_name(2), Some("rr"));
    }

    #[test]
    fn status_and_proc_limits() {
        let (uid, euid, cap) =
            parse_status("Name:\tx\nUid:\t1000\t0\t0\t0\nCapEff:\t0000000000800000\n").unwrap();
        assert_eq!((uid, euid), (1000, 0));
        let id = Identity {
            uid,
            euid,
            name: "x".into(),
            cap_eff: cap,
        };
        assert!(id.has_cap(Identity::CAP_SYS_NICE));
        assert!(!id.has_cap(Identity::CAP_IPC_LOCK));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
Max locked memory         8388608              8388608              bytes     \n\
Max realtime priority     95                   95                   \n";
        assert_eq!(
            parse_proc_limits(limits),
            (Some(Limit::Value(95)), Some(Limit::Value(8388608)))
        );
        let unl = "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_proc_limits(unl).1, Some(Limit::Unlimited));
    }

    #[test]
    fn limits_precedence() {
        let e = parse_limits_conf(
            "# comment\n*  soft rtprio 10\n@audio - rtprio 95\n@audio - memlock unlimited\n\
             alice hard rtprio 50\nalice soft rtprio 70\n1000:1999 soft nice -5\nbad line\n",
            "/etc/security/limits.conf",
        );
        // Negative values (nice) and malformed lines are not limits the checks read.
        assert_eq!(e.len(), 5);
        let audio = vec!["audio".to_string()];
        let r = resolve_limit(&e, "bob", Some(1001), &audio, "rtprio").unwrap();
        assert_eq!(r.value, Limit::Value(95));
        assert_eq!(r.origin, "/etc/security/limits.conf:3");
        assert_eq!(
            resolve_limit(&e, "carol", Some(1002), &[], "rtprio")
                .unwrap()
                .value,
            Limit::Value(10)
        );
        // The user's own soft entry beats the group's.
        assert_eq!(
            resolve_limit(&e, "alice", Some(1000), &audio, "rtprio")
                .unwrap()
                .value,
            Limit::Value(70)
        );
        // Group and wildcard entries do not apply to root.
        assert!(resolve_limit(&e, "root", Some(0), &audio, "rtprio").is_none());
        assert_eq!(
            resolve_limit(&e, "bob", Some(1001), &audio, "memlock")
                .unwrap()
                .value,
            Limit::Unlimited
        );
    }

    #[test]
    fn passwd_group_and_masks() {
        let p = parse_passwd(
            "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n",
        );
        assert_eq!(p[1], ("alice".into(), 1000, 1000));
        let g = parse_group("audio:x:29:alice,bob\nalice:x:1000:\n");
        assert_eq!(g[0].2, vec!["alice", "bob"]);
        assert!(g[1].2.is_empty());
        assert_eq!(
            shell_var(
                "#x\nIRQBALANCE_BANNED_CPULIST=\"2-3\"\n",
                "IRQBALANCE_BANNED_CPULIST"
            ),
            Some("2-3".into())
        );
    }
}
