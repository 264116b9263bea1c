//! CPU power management: governor, EPP, turbo, idle states, PM QoS and SMT.

use super::cpus;
use crate::{Ctx, Facts, Fix, Knob, Outcome, Target, Verdict};
use latlab_model::system::{CpuFreq, PmQos};

/// Drivers whose `powersave` governor hands the choice to the hardware (HWP / CPPC) instead of
/// pinning the lowest frequency.
fn hardware_managed(driver: &str) -> bool {
    matches!(driver, "intel_pstate" | "amd-pstate-epp")
}

/// Group per-CPU values: `value on CPUs 0-3`.
fn grouped<F: Fn(&CpuFreq) -> String>(freq: &[CpuFreq], key: F) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for c in freq {
        let k = key(c);
        match out.iter_mut().find(|(v, _)| *v == k) {
            Some((_, list)) => list.push(c.cpu),
            None => out.push((k, vec![c.cpu])),
        }
    }
    out
}

fn describe(groups: &[(String, Vec<u32>)]) -> String {
    groups
        .iter()
        .map(|(v, c)| format!("{v} on CPUs {}", cpus(c)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_cpufreq(f: &Facts) -> Outcome {
    Outcome::unavailable(&f.info.cpufreq)
}

pub fn governor(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(freq) = f.info.cpufreq.value() else {
        return no_cpufreq(f);
    };
    let groups = grouped(freq, |c| format!("{} ({})", c.governor, c.driver));
    let evidence = describe(&groups);
    // The worst CPU decides.
    let mut worst = Verdict::Pass;
    let mut why = "";
    for c in freq {
        let (v, reason) = match (c.governor.as_str(), ctx.target) {
            ("performance", _) => (Verdict::Pass, ""),
            ("powersave" | "userspace", _) if !hardware_managed(&c.driver) => {
                (Verdict::Fail, "the CPU is held at its lowest frequency")
            }
            (_, Target::Throughput) => (Verdict::Pass, ""),
            ("powersave", Target::Audio) => (
                Verdict::Warn,
                "the hardware picks the frequency by EPP and ramps up only after load appears",
            ),
            (_, Target::Audio) => (
                Verdict::Warn,
                "the frequency follows load: work right after idle runs slow",
            ),
            (_, Target::Control) => (
                Verdict::Fail,
                "the frequency changes under the loop: its run time varies",
            ),
        };
        if v > worst {
            worst = v;
            why = reason;
        }
    }
    let has_perf = freq
        .iter()
        .all(|c| c.available_governors.iter().any(|g| g == "performance"));
    let evidence = if why.is_empty() {
        evidence
    } else {
        format!("{evidence}: {why}")
    };
    let o = match worst {
        Verdict::Pass => return Outcome::pass(evidence),
        v => Outcome::warn(evidence, "set the performance governor").with_verdict(v),
    };
    if has_perf {
        o.fix(Fix::knob(Knob::Governor("performance".into())))
    } else {
        o.advice("the performance governor is not offered here; set the highest fixed frequency")
    }
}

/// An EPP value's place from performance (0) to power (255).
fn epp_level(epp: &str) -> u32 {
    match epp {
        "performance" => 0,
        "balance_performance" | "default" => 128,
        "balance_power" => 192,
        "power" => 255,
        n => n.parse().unwrap_or(128),
    }
}

pub fn epp(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(freq) = f.info.cpufreq.value() else {
        return no_cpufreq(f);
    };
    let with: Vec<CpuFreq> = freq.iter().filter(|c| c.epp.is_some()).cloned().collect();
    if with.is_empty() {
        let driver = freq.first().map(|c| c.driver.as_str()).unwrap_or("?");
        return Outcome::na(format!("no energy_performance_preference ({driver})"));
    }
    let groups = grouped(&with, |c| c.epp.clone().unwrap_or_default());
    let evidence = describe(&groups);
    let worst = with
        .iter()
        .map(|c| epp_level(c.epp.as_deref().unwrap_or("")))
        .max()
        .unwrap_or(0);
    let v = match (ctx.target, worst) {
        (_, 0) => Verdict::Pass,
        (Target::Throughput, l) if l >= 192 => Verdict::Warn,
        (Target::Throughput, _) => Verdict::Pass,
        (_, l) if l > 128 => Verdict::Fail,
        _ => Verdict::Warn,
    };
    if v == Verdict::Pass {
        return Outcome::pass(evidence);
    }
    Outcome::warn(
        format!("{evidence}: the CPU trades speed of ramping up for power"),
        "set EPP to performance (after the governor)",
    )
    .with_verdict(v)
    .fix(Fix::knob(Knob::Epp("performance".into())))
}

pub fn turbo(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(freq) = f.info.cpufreq.value() else {
        return no_cpufreq(f);
    };
    let boost: Vec<bool> = freq.iter().filter_map(|c| c.boost).collect();
    if boost.is_empty() {
        return Outcome::na("no boost or no_turbo control");
    }
    let on = boost.iter().any(|b| *b);
    match (ctx.target, on) {
        (Target::Control, true) => Outcome::warn(
            "turbo on: the frequency follows thermal and power headroom, run times vary",
            "turn turbo off for repeatable loop timing",
        )
        .fix(Fix::knob(Knob::Turbo(false))),
        (Target::Throughput, false) => Outcome::warn(
            "turbo off: the CPU stays at its base frequency",
            "turn turbo on",
        )
        .fix(Fix::knob(Knob::Turbo(true))),
        (_, true) => Outcome::pass("turbo on"),
        (_, false) => Outcome::pass("turbo off"),
    }
}

/// The PM QoS latency limit in force on a CPU (µs): the global request and the CPU's resume
/// latency, whichever is lower; `None` when neither constrains.
fn qos_limit(f: &Facts, cpu: u32) -> Option<i64> {
    let global = f
        .info
        .pm_qos
        .cpu_dma_latency_us
        .value()
        .copied()
        .filter(|v| *v < PmQos::NO_REQUEST_US);
    let per_cpu = f
        .info
        .pm_qos
        .resume_latency_us
        .iter()
        .find(|(c, _)| *c == cpu)
        .and_then(|(_, v)| PmQos::resume_limit_us(v))
        .and_then(|us| i64::try_from(us).ok());
    match (global, per_cpu) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub fn idle_depth(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(idle) = f.info.cpuidle.value() else {
        return Outcome::unavailable(&f.info.cpuidle);
    };
    if f.info.boot.idle.as_deref() == Some("poll") {
        return Outcome::pass("idle=poll: CPUs never enter an idle state");
    }
    // No driver: the CPUs halt when idle (in a VM the hypervisor decides what that costs);
    // there is no state to limit.
    if idle.has_no_states() {
        return Outcome::na(format!(
            "no cpuidle states (cpuidle driver {}): the CPUs halt when idle, and there is no \
             state to limit",
            idle.driver
        ));
    }
    // The haltpoll governor never reads a state's `disable`, and of a latency limit it only
    // heeds 0 (then it polls).
    let haltpoll = idle.governor == "haltpoll";
    let ignored = haltpoll
        && idle
            .cpus
            .iter()
            .any(|c| c.states.iter().any(|s| s.disabled));
    let deepest = idle
        .cpus
        .iter()
        .flat_map(|c| c.states.iter().filter(|s| haltpoll || !s.disabled))
        .max_by_key(|s| s.exit_latency_us);
    let ignored_note = if ignored {
        "; the haltpoll governor ignores the disabled states"
    } else {
        ""
    };
    let Some(bound) = ctx.bounds.idle_exit_latency_us else {
        return Outcome::pass(format!(
            "no bound for throughput; deepest enabled state {}{ignored_note}",
            deepest
                .map(|s| format!("{} ({} µs)", s.name, s.exit_latency_us))
                .unwrap_or_else(|| "none".into())
        ));
    };
    // Per state name: its latency and the CPUs where it is enabled, allowed and too deep.
    let mut over: Vec<(String, u64, Vec<u32>)> = Vec::new();
    let mut limited_by_qos = false;
    for c in &idle.cpus {
        let qos = qos_limit(f, c.cpu).filter(|&q| !haltpoll || q == 0);
        for s in c
            .states
            .iter()
            .filter(|s| (haltpoll || !s.disabled) && s.exit_latency_us > bound)
        {
            if qos.is_some_and(|q| i64::try_from(s.exit_latency_us).unwrap_or(i64::MAX) > q) {
                limited_by_qos = true;
                continue;
            }
            match over
                .iter_mut()
                .find(|(n, l, _)| *n == s.name && *l == s.exit_latency_us)
            {
                Some((_, _, list)) => list.push(c.cpu),
                None => over.push((s.name.clone(), s.exit_latency_us, vec![c.cpu])),
            }
        }
    }
    let driver = format!("{} / {}", idle.driver, idle.governor);
    if over.is_empty() {
        let why = if limited_by_qos {
            "; deeper states are held off by a PM QoS request"
        } else {
            ""
        };
        return Outcome::pass(format!(
            "deepest allowed state {} ({driver}), bound {bound} µs{why}{ignored_note}",
            deepest
                .map(|s| format!("{} at {} µs", s.name, s.exit_latency_us))
                .unwrap_or_else(|| "none".into())
        ));
    }
    over.sort_by_key(|o| std::cmp::Reverse(o.1));
    let list = over
        .iter()
        .map(|(n, l, c)| format!("{n} ({l} µs) on CPUs {}", cpus(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let evidence = format!(
        "enabled beyond the {bound} µs bound for {}: {list}{ignored_note}",
        ctx.target.name()
    );
    if haltpoll {
        // Disabling states would change nothing: no profile fix is offered.
        return Outcome::fail(
            evidence,
            "the haltpoll governor ignores disabled states: set pm_qos_resume_latency_us = 0 \
             (the CPUs poll only) or cpuidle_governor = \"menu\", then limit the states",
        );
    }
    Outcome::fail(
        evidence,
        format!("disable idle states with exit latency above {bound} µs"),
    )
    .fix(Fix::knob(Knob::MaxIdleLatencyUs(bound)))
}

pub fn pm_qos(f: &Facts, ctx: &Ctx) -> Outcome {
    let q = &f.info.pm_qos;
    let global = q.cpu_dma_latency_us.value().copied();
    let per_cpu: Vec<(u32, String)> = q
        .resume_latency_us
        .iter()
        .filter(|(_, v)| v != "0")
        .cloned()
        .collect();
    let g = match global {
        Some(v) if v >= PmQos::NO_REQUEST_US => "cpu_dma_latency: no request".to_string(),
        Some(v) => format!("cpu_dma_latency: {v} µs requested"),
        None => format!(
            "unavailable: {}",
            q.cpu_dma_latency_us.reason().unwrap_or_default()
        ),
    };
    if global.is_none() && q.resume_latency_us.is_empty() {
        return Outcome::na(g);
    }
    let no_states = f.info.cpuidle.value().is_some_and(|i| i.has_no_states());
    let r = if per_cpu.is_empty() {
        "no per-CPU resume latency limit".to_string()
    } else {
        per_cpu
            .iter()
            .map(|(c, v)| {
                if v == "n/a" {
                    format!("cpu{c} 0 µs ({})", PmQos::zero_limit_effect(no_states))
                } else {
                    format!("cpu{c} {v} µs")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let evidence = format!("{g}; {r}");
    // Without cpuidle states no limit keeps a CPU from sleeping: it halts whatever they say.
    let tight = !no_states
        && (global.is_some_and(|v| v < 10)
            || per_cpu
                .iter()
                .any(|(_, v)| PmQos::resume_limit_us(v).is_some_and(|n| n < 10)));
    if ctx.target == Target::Throughput && tight {
        return Outcome::warn(
            format!("{evidence}: CPUs cannot sleep deeply, turbo headroom and power suffer"),
            "find the holder (fuser -v /dev/cpu_dma_latency) or restore the resume latency",
        )
        .fix(Fix::manual(
            "find the PM QoS holder: fuser -v /dev/cpu_dma_latency",
        ));
    }
    // Without the global request nothing says the CPUs may sleep as deep as they like.
    if global.is_none() {
        return Outcome::na(evidence);
    }
    Outcome::pass(evidence)
}

pub fn smt(f: &Facts, ctx: &Ctx) -> Outcome {
    let control = f.info.cpu.smt_control.as_deref();
    let shared: Vec<&String> = f
        .info
        .cpu
        .smt_siblings
        .iter()
        .filter(|s| s.contains(',') || s.contains('-'))
        .collect();
    match control {
        Some("off" | "forceoff") => return Outcome::pass(format!("SMT {}", control.unwrap_or(""))),
        Some("notsupported" | "notimplemented") | None if shared.is_empty() => {
            return Outcome::na(format!(
                "no SMT ({})",
                control.unwrap_or("smt/control absent")
            ));
        }
        _ => {}
    }
    if shared.is_empty() {
        return Outcome::pass("SMT on, but no CPU has an online sibling");
    }
    let groups = shared
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" / ");
    let evidence = format!("SMT on: siblings {groups} share a core");
    match ctx.target {
        Target::Control => Outcome::warn(
            format!("{evidence}; work on one sibling slows the other"),
            "keep the loop CPU's sibling idle (isolate both) or turn SMT off",
        )
        .fix(Fix::boot("nosmt")),
        _ => Outcome::pass(evidence),
    }
}
