//! Privileges and limits: who may run real-time tasks and lock memory, and RT throttling.

use crate::facts::{Identity, Limit, LimitSource, UserLimits};
use crate::{Ctx, Facts, Fix, Knob, Outcome, Target, Verdict};
use latlab_model::system::RtThrottling;

const LIMITS_FILE: &str = "/etc/security/limits.d/95-latlab.conf";

fn source(u: &UserLimits) -> &'static str {
    match u.source {
        LimitSource::Process => "this session",
        LimitSource::Config => "limits.conf/limits.d at the next login",
    }
}

/// The user's limits, or the outcome that ends the check there: they are unreadable, or the user
/// is root holding `cap` (`exempt`), so that `rlimit` does not bind.
fn limited_user<'a>(
    f: &'a Facts,
    exempt: impl Fn(&UserLimits) -> bool,
    cap: &str,
    rlimit: &str,
) -> Result<&'a UserLimits, Outcome> {
    let Some(u) = f.user.value() else {
        return Err(Outcome::unavailable(&f.user));
    };
    if exempt(u) {
        return Err(Outcome::pass(format!(
            "{}: root with {cap}, {rlimit} does not bind",
            u.user
        )));
    }
    Ok(u)
}

/// `; <line>` naming the limits.d line that grants a limit, or nothing when none does.
fn granted_by(line: Option<&str>) -> String {
    line.map(|s| format!("; {s}")).unwrap_or_default()
}

/// The advice and the step: join a group limits.d already grants, or create a grant.
fn grant_fix(u: &UserLimits, line: &str) -> (String, Fix) {
    let user = &u.user;
    if let Some((group, _)) = u.rtprio_groups_not_joined.first() {
        (
            format!("join group {group}, which limits.d grants a real-time priority"),
            Fix::manual(format!("usermod -aG {group} {user}, then log in again")),
        )
    } else {
        (
            format!("grant one in limits.d to a group {user} is in"),
            Fix::manual(format!(
                "add \"{line}\" to {LIMITS_FILE}, usermod -aG audio {user}, then log in again"
            )),
        )
    }
}

pub fn privileges(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(me) = f.identity.value() else {
        return Outcome::unavailable(&f.identity);
    };
    let nice = me.has_cap(Identity::CAP_SYS_NICE);
    if me.is_root() && nice {
        let via = match f.user.value() {
            Some(u) if u.user != me.name && u.named => {
                format!(" (the limits below are {}'s, named by --user)", u.user)
            }
            Some(u) if u.user != me.name => format!(" (through sudo for {})", u.user),
            _ => String::new(),
        };
        return Outcome::pass(format!("running as root{via}, with CAP_SYS_NICE"));
    }
    if nice {
        return Outcome::pass(format!("{} (uid {}) holds CAP_SYS_NICE", me.name, me.uid));
    }
    let rt = f
        .user
        .value()
        .filter(|u| u.user == me.name)
        .map(|u| u.rtprio);
    if let Some(rt) = rt.filter(|r| !r.is_zero()) {
        return Outcome::pass(format!(
            "{} without CAP_SYS_NICE; RLIMIT_RTPRIO {rt} allows SCHED_FIFO up to it",
            me.name
        ));
    }
    let what = if me.is_root() {
        "root without CAP_SYS_NICE (a container?)".to_string()
    } else {
        format!(
            "{} (uid {}): not root, no CAP_SYS_NICE, RLIMIT_RTPRIO 0",
            me.name, me.uid
        )
    };
    let o = Outcome::warn(
        format!("{what}: no real-time scheduling for latlab measure"),
        "run latlab as root (sudo), or grant an rtprio limit (see limits.rtprio)",
    );
    if ctx.target == Target::Throughput {
        o.with_verdict(Verdict::NotApplicable)
            .advice("real-time scheduling is not needed for throughput")
    } else {
        o
    }
}

pub fn rtprio(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(min) = ctx.bounds.rtprio_min else {
        return Outcome::na("real-time priority is not needed for throughput");
    };
    let u = match limited_user(f, |u| u.privileged, "CAP_SYS_NICE", "RLIMIT_RTPRIO") {
        Ok(u) => u,
        Err(o) => return o,
    };
    let from = granted_by(u.rtprio_from.as_deref());
    let wanted = format!("@audio - rtprio {}", min.max(95));
    match u.rtprio {
        Limit::Value(0) => {
            let mut evidence = format!("{}: RLIMIT_RTPRIO 0 ({})", u.user, source(u));
            if u.source == LimitSource::Process
                && let Some(c) = u.rtprio_configured.filter(|c| !c.is_zero())
            {
                evidence.push_str(&format!(
                    ", though limits.d now grants {c}{from}: log in again"
                ));
                return Outcome::fail(evidence, "log out and in again so pam_limits applies it")
                    .fix(Fix::manual("log out and in again"));
            }
            if let Some((g, file)) = u.rtprio_groups_not_joined.first() {
                evidence.push_str(&format!("; {file} grants it to group {g}, not joined"));
            } else {
                evidence.push_str("; no limits.conf/limits.d entry grants one");
            }
            let (advice, fix) = grant_fix(u, &wanted);
            Outcome::fail(evidence, advice).fix(fix)
        }
        Limit::Value(v) if v < u64::from(min) => {
            let (advice, fix) = grant_fix(u, &wanted);
            Outcome::warn(
                format!(
                    "{}: RLIMIT_RTPRIO {v} ({}{from}), below {min} for {}",
                    u.user,
                    source(u),
                    ctx.target.name()
                ),
                advice,
            )
            .fix(fix)
        }
        rt => Outcome::pass(format!(
            "{}: RLIMIT_RTPRIO {rt} ({}{from})",
            u.user,
            source(u)
        )),
    }
}

fn bytes(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

pub fn memlock(f: &Facts, ctx: &Ctx) -> Outcome {
    if ctx.target == Target::Throughput {
        return Outcome::na("locking memory is not needed for throughput");
    }
    let u = match limited_user(f, |u| u.ipc_lock, "CAP_IPC_LOCK", "RLIMIT_MEMLOCK") {
        Ok(u) => u,
        Err(o) => return o,
    };
    let from = granted_by(u.memlock_from.as_deref());
    match u.memlock_bytes {
        Limit::Unlimited => Outcome::pass(format!(
            "{}: RLIMIT_MEMLOCK unlimited ({}{from})",
            u.user,
            source(u)
        )),
        Limit::Value(b) => {
            let evidence = format!(
                "{}: RLIMIT_MEMLOCK {} ({}{from}): an audio server or RT task locking its memory \
                 may fail or page-fault",
                u.user,
                bytes(b),
                source(u)
            );
            let user = &u.user;
            match u.memlock_groups_not_joined.first() {
                Some((group, origin)) => Outcome::warn(
                    format!("{evidence}; {origin} grants group {group} more, not joined"),
                    format!("join group {group}, which limits.d grants more locked memory"),
                )
                .fix(Fix::manual(format!(
                    "usermod -aG {group} {user}, then log in again"
                ))),
                None => Outcome::warn(evidence, "grant it in limits.d to a group the user is in")
                    .fix(Fix::manual(format!(
                        "add \"@audio - memlock unlimited\" to {LIMITS_FILE}, usermod -aG audio \
                         {user}, then log in again"
                    ))),
            }
        }
    }
}

pub fn rt_throttling(f: &Facts, ctx: &Ctx) -> Outcome {
    if ctx.target == Target::Throughput {
        return Outcome::na("RT throttling does not matter for throughput");
    }
    let rt = &f.info.rt_throttling;
    let (Some(&runtime), Some(&period)) = (rt.runtime_us.value(), rt.period_us.value()) else {
        return Outcome::na(format!(
            "unavailable: {}",
            rt.runtime_us
                .reason()
                .or(rt.period_us.reason())
                .unwrap_or_default()
        ));
    };
    let fair = rt
        .fair_server
        .value()
        .and_then(|v| v.iter().find(|(_, r, _)| *r > 0))
        .map(|(_, r, p)| {
            format!(
                "; the fair server still reserves {} ms per {} ms for normal tasks",
                r / 1_000_000,
                p / 1_000_000
            )
        })
        .unwrap_or_default();
    if RtThrottling::off(runtime, period) {
        return Outcome::pass(format!(
            "off (sched_rt_runtime_us {runtime}, period {period}){fair}"
        ));
    }
    let evidence = format!(
        "on: RT tasks may use {runtime} of every {period} µs per CPU (sched_rt_runtime_us){fair}"
    );
    match ctx.target {
        Target::Control => Outcome::warn(
            format!("{evidence}; a busy RT loop is stopped for the rest of each period"),
            "for RT tasks on dedicated CPUs set sched_rt_runtime_us = -1 (from 6.12 also the \
             fair server's runtime to 0)",
        )
        .fix(Fix::knob(Knob::SchedRtRuntimeUs(-1))),
        _ => Outcome::pass(format!(
            "{evidence}; audio threads use far less, and a runaway one cannot hang the system"
        )),
    }
}
