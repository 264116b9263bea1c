//! Memory, storage, virtualization and background tasks.

use crate::{Ctx, Facts, Fix, Outcome, Target, Verdict};

pub fn swappiness(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(&s) = f.info.swappiness.value() else {
        return Outcome::unavailable(&f.info.swappiness);
    };
    match ctx.bounds.swappiness_max {
        Some(max) if s > max => Outcome::warn(
            format!("vm.swappiness {s}: pages of an idle audio/RT process are swapped out early"),
            format!("set vm.swappiness to {max}"),
        )
        .fix(Fix::manual(format!(
            "sysctl -w vm.swappiness={max}, and vm.swappiness = {max} in /etc/sysctl.d/ to keep it"
        ))),
        Some(max) => Outcome::pass(format!("vm.swappiness {s} (at most {max})")),
        None => Outcome::pass(format!("vm.swappiness {s}")),
    }
}

pub fn thp(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(mode) = f.info.transparent_hugepage.value() else {
        return Outcome::unavailable(&f.info.transparent_hugepage);
    };
    let defrag = f
        .thp_defrag
        .as_deref()
        .map(|d| format!(", defrag {d}"))
        .unwrap_or_default();
    if mode != "always" {
        return Outcome::pass(format!("transparent_hugepage {mode}{defrag}"));
    }
    let o = Outcome::warn(
        format!(
            "transparent_hugepage always{defrag}: page faults may stall on compaction, \
             khugepaged scans in the background"
        ),
        "set transparent_hugepage to madvise",
    )
    .fix(Fix::manual(
        "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
    ))
    .fix(Fix::boot("transparent_hugepage=madvise"));
    match ctx.target {
        Target::Audio => o,
        Target::Control => o.with_verdict(Verdict::Fail),
        Target::Throughput => Outcome::pass(format!(
            "transparent_hugepage always{defrag} (fewer TLB misses)"
        )),
    }
}

/// File systems on storage (where audio or data is written).
const DISK_FS: &[&str] = &[
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "jfs", "reiserfs", "vfat", "exfat", "ntfs",
    "ntfs3", "zfs", "bcachefs", "nilfs2",
];

pub fn noatime(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(mounts) = f.mounts.value() else {
        return Outcome::unavailable(&f.mounts);
    };
    let disks: Vec<&crate::facts::Mount> = mounts
        .iter()
        .filter(|m| DISK_FS.contains(&m.fstype.as_str()))
        .filter(|m| m.options.iter().any(|o| o == "rw"))
        .collect();
    if disks.is_empty() {
        return Outcome::na("no writable file system on storage");
    }
    let mut without: Vec<String> = disks
        .iter()
        .filter(|m| !m.options.iter().any(|o| o == "noatime"))
        .map(|m| {
            let how = m
                .options
                .iter()
                .find(|o| o.ends_with("atime"))
                .map(|o| o.as_str())
                .unwrap_or("atime");
            format!("{} ({how})", m.target)
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    without.retain(|w| seen.insert(w.clone()));
    if without.is_empty() {
        return Outcome::pass(format!(
            "noatime on every writable disk file system ({})",
            disks.len()
        ));
    }
    let first = disks
        .iter()
        .find(|m| !m.options.iter().any(|o| o == "noatime"))
        .map(|m| m.target.clone())
        .unwrap_or_else(|| "/".into());
    let evidence = format!(
        "without noatime: {}; reading a file may write its inode",
        without.join(", ")
    );
    let targets: Vec<&str> = without
        .iter()
        .map(|w| w.split(" (").next().unwrap_or(w))
        .collect();
    // Mounted from /etc/fstab, or from elsewhere (a VM's root from its boot arguments, a
    // container's from its runtime): the advice names where their options are set.
    let in_fstab = |t: &str| {
        f.fstab_targets
            .as_ref()
            .is_some_and(|l| l.iter().any(|x| x == t))
    };
    let (listed, elsewhere): (Vec<&str>, Vec<&str>) = targets.iter().partition(|t| in_fstab(t));
    let mut parts = Vec::new();
    if !listed.is_empty() {
        parts.push(format!(
            "add noatime to the options of {} in /etc/fstab",
            listed.join(", ")
        ));
    }
    if !elsewhere.is_empty() {
        parts.push(format!(
            "add noatime where {} {} mounted (not in /etc/fstab here: the boot arguments' \
             rootflags=, or the unit or runtime that mounts it)",
            elsewhere.join(" and "),
            if elsewhere.len() == 1 { "is" } else { "are" }
        ));
    }
    let manual = parts.join("; ");
    let where_set = manual.clone();
    match ctx.target {
        Target::Throughput => Outcome::pass(evidence),
        _ => Outcome::warn(
            evidence,
            format!("{where_set} (now: mount -o remount,noatime {first})"),
        )
        .fix(Fix::manual(manual)),
    }
}

pub fn vm(f: &Facts, ctx: &Ctx) -> Outcome {
    let v = &f.info.virtualization;
    let steal = v
        .steal_percent
        .map(|s| format!(", steal {s:.2} % since boot"))
        .unwrap_or_default();
    let Some(h) = &v.hypervisor else {
        return Outcome::pass(format!("bare metal (no hypervisor CPU flag){steal}"));
    };
    let high = v
        .steal_percent
        .is_some_and(|s| s >= ctx.bounds.steal_max_percent);
    let advice = "measure on bare metal, or give the guest dedicated, isolated host CPUs";
    if high {
        return Outcome::fail(
            format!(
                "a virtual machine ({h}){steal}, above {} %: the host takes the CPUs away",
                ctx.bounds.steal_max_percent
            ),
            advice,
        )
        .fix(Fix::manual(advice));
    }
    match ctx.target {
        Target::Throughput => Outcome::pass(format!("a virtual machine ({h}){steal}")),
        _ => Outcome::warn(
            format!(
                "a virtual machine ({h}){steal}: host stalls and steal dominate the tail, tuning \
                 inside the guest cannot remove them"
            ),
            advice,
        )
        .fix(Fix::manual(advice)),
    }
}

pub fn rt_tasks(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(tasks) = f.rt_tasks.value() else {
        return Outcome::unavailable(&f.rt_tasks);
    };
    // Root's own tasks are the system's: for root every user-space RT task competes.
    let me = f
        .user
        .value()
        .and_then(|u| u.uid)
        .or_else(|| f.identity.value().map(|i| i.uid))
        .filter(|uid| *uid != 0);
    let kernel = tasks.iter().filter(|t| t.kernel_thread).count();
    let mine = tasks
        .iter()
        .filter(|t| !t.kernel_thread && t.uid.is_some() && t.uid == me)
        .count();
    let others: Vec<&crate::facts::Task> = tasks
        .iter()
        .filter(|t| !t.kernel_thread && (t.uid.is_none() || t.uid != me))
        .collect();
    // For root there is no "own" to leave out: every user-space task is counted as another's.
    let (counts, none) = match me {
        Some(_) => (
            format!("{kernel} kernel threads, {mine} of the user's own"),
            "no other user's task",
        ),
        None => (format!("{kernel} kernel threads"), "no user-space task"),
    };
    if others.is_empty() {
        return Outcome::pass(format!("{none} at real-time priority ({counts})"));
    }
    let shown: Vec<String> = others
        .iter()
        .take(5)
        .map(|t| {
            format!(
                "{} (pid {}, {}, {} {}{})",
                t.comm,
                t.pid,
                t.user
                    .clone()
                    .or_else(|| t.uid.map(|u| format!("uid {u}")))
                    .unwrap_or_else(|| "?".into()),
                t.policy,
                t.rt_priority,
                match t.threads {
                    1 => String::new(),
                    n => format!(", {n} threads"),
                }
            )
        })
        .collect();
    let more = others.len().saturating_sub(shown.len());
    let evidence = format!(
        "{}{}: they compete with the RT work ({counts})",
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    );
    match ctx.target {
        Target::Throughput => Outcome::pass(evidence),
        _ => Outcome::warn(
            evidence,
            "lower them (chrt -o -p 0 PID) or run the RT work above their priority",
        )
        .fix(Fix::manual(format!(
            "lower the priority of {} (chrt -o -p 0 PID), or stop them",
            others
                .iter()
                .map(|t| t.comm.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

pub fn daemons(f: &Facts, _ctx: &Ctx) -> Outcome {
    if f.rt_tasks.value().is_none() {
        return Outcome::unavailable(&f.rt_tasks);
    }
    let s = &f.info.services;
    let mut running = Vec::new();
    if s.tuned {
        running.push("tuned");
    }
    if s.power_profiles_daemon {
        running.push("power-profiles-daemon");
    }
    if running.is_empty() {
        return Outcome::pass("neither tuned nor power-profiles-daemon is running");
    }
    let list = running.join(" and ");
    Outcome::warn(
        format!("{list} running: it rewrites governor, EPP or turbo behind latlab's back"),
        format!("stop {list} while latlab tune's settings apply (systemctl stop …)"),
    )
    .fix(Fix::manual(format!("systemctl stop {}", running.join(" "))))
}
