//! Kernel: preemption model, tick rate, timers, isolation, threaded IRQs, clock source and the
//! cost of mitigations.

use super::{cpus, housekeeping};
use crate::{Ctx, Facts, Fix, Outcome, Target, Verdict};

fn is_rt_kernel(f: &Facts) -> bool {
    f.info.kernel_built_with("PREEMPT_RT")
}

fn is_dynamic(f: &Facts) -> bool {
    f.info.kernel_built_with("PREEMPT_DYNAMIC")
}

/// The model's first word: `full`, `rt`, `lazy`, `voluntary`, `none`, or `unknown`.
fn model(f: &Facts) -> &'static str {
    if is_rt_kernel(f) {
        return "rt";
    }
    let p = f.info.preempt.as_str();
    for m in ["full", "lazy", "voluntary", "none"] {
        if p.starts_with(m) && !p.starts_with("none or") {
            return m;
        }
    }
    "unknown"
}

pub fn preempt(f: &Facts, ctx: &Ctx) -> Outcome {
    let m = model(f);
    let evidence = if f.info.preempt.starts_with(m) {
        f.info.preempt.clone()
    } else {
        format!("{m} ({})", f.info.preempt)
    };
    let evidence = if m == "rt" {
        "rt: a PREEMPT_RT kernel".to_string()
    } else if m == "unknown" {
        format!("{}: current mode not readable", f.info.preempt)
    } else {
        evidence
    };
    let dynamic = is_dynamic(f);
    let to_full = || {
        if dynamic {
            Fix::boot("preempt=full")
        } else {
            Fix::manual("install a kernel built with CONFIG_PREEMPT (or PREEMPT_RT)")
        }
    };
    let full_advice = if dynamic {
        "boot with preempt=full (this kernel is PREEMPT_DYNAMIC)"
    } else {
        "use a kernel built with CONFIG_PREEMPT or PREEMPT_RT"
    };
    let rt_fix = || {
        Fix::manual(
            "install a PREEMPT_RT kernel (CONFIG_PREEMPT_RT, mainline since 6.12; \
             distribution -rt packages)",
        )
    };
    match (ctx.target, m) {
        (Target::Throughput, _) => {
            Outcome::pass(format!("{evidence}; any model serves throughput"))
        }
        (_, "rt") => Outcome::pass(evidence),
        (Target::Audio, "full" | "lazy") => Outcome::pass(evidence),
        (Target::Audio, "voluntary") => Outcome::warn(
            format!("{evidence}: kernel code runs to its next preemption point first"),
            full_advice,
        )
        .fix(to_full()),
        (Target::Audio, "none") => Outcome::fail(
            format!("{evidence}: a task in the kernel is never preempted; audio waits for it"),
            full_advice,
        )
        .fix(to_full()),
        (Target::Control, "full" | "lazy") => Outcome::warn(
            format!("{evidence}: spinlocks and IRQ handlers still block the loop"),
            "use a PREEMPT_RT kernel for control loops",
        )
        .fix(rt_fix()),
        (Target::Control, "voluntary" | "none") => Outcome::fail(
            format!("{evidence}: kernel code is preempted only at preemption points"),
            "use a PREEMPT_RT kernel (at least preempt=full)",
        )
        .fix(rt_fix())
        .fix(to_full()),
        _ => Outcome::warn(evidence, full_advice).fix(to_full()),
    }
}

pub fn hz(f: &Facts, ctx: &Ctx) -> Outcome {
    let Some(cfg) = f.info.kernel_config.value() else {
        return Outcome::unavailable(&f.info.kernel_config);
    };
    let Some(hz) = cfg.hz else {
        return Outcome::na(format!("{} does not set CONFIG_HZ", cfg.source));
    };
    let evidence = format!("HZ {hz} ({})", cfg.source);
    let fix = Fix::manual("use a kernel built with CONFIG_HZ_1000");
    // A warning that `what` happens only once a tick, with the fix of a faster tick.
    let slow = |what: &str, advice: &str| {
        Outcome::warn(
            format!("{evidence}: {what} every {} ms", 1000 / hz.max(1)),
            advice,
        )
        .fix(fix.clone())
    };
    match ctx.target {
        Target::Throughput => Outcome::pass(evidence.as_str()),
        Target::Audio if hz >= 250 => Outcome::pass(evidence.as_str()),
        Target::Audio => slow(
            "scheduler decisions",
            "a kernel with HZ 250 or 1000 (timer wake-ups use hrtimers either way)",
        ),
        Target::Control if hz >= 1000 => Outcome::pass(evidence.as_str()),
        Target::Control if !f.isolated.is_empty() && f.info.boot.nohz_full.is_some() => {
            Outcome::pass(format!(
                "{evidence}; the tick is stopped on the nohz_full CPUs {}",
                f.isolated
            ))
        }
        Target::Control => slow(
            "the tick interrupts the loop's CPU",
            "a kernel with HZ 1000, or nohz_full on the loop's CPUs",
        ),
    }
}

pub fn hrtimers(f: &Facts, ctx: &Ctx) -> Outcome {
    let bound = ctx.bounds.timer_resolution_max_ns;
    let off_by_boot =
        latlab_sys::cmdline_value(&f.info.cmdline, "highres").as_deref() == Some("off");
    let config = f.info.kernel_config.value().map(|c| c.high_res_timers);
    let fix = if config == Some(false) {
        Fix::manual("use a kernel built with CONFIG_HIGH_RES_TIMERS")
    } else {
        Fix::boot("highres=on")
    };
    let low = |evidence: String| {
        let o = Outcome::fail(
            evidence,
            "timers then fire on the tick: enable high-resolution timers",
        )
        .fix(fix.clone());
        if ctx.target == Target::Throughput {
            o.with_verdict(Verdict::Warn)
        } else {
            o
        }
    };
    match f.timer_resolution_ns.value() {
        Some(&ns) if ns <= bound => {
            Outcome::pass(format!("active: /proc/timer_list resolution {ns} ns"))
        }
        Some(&ns) => low(format!(
            "inactive: /proc/timer_list resolution {ns} ns (one tick)"
        )),
        None => {
            let why = f.timer_resolution_ns.reason().unwrap_or_default();
            match config {
                _ if off_by_boot => low("highres=off on the kernel command line".into()),
                Some(true) => Outcome::pass(format!(
                    "CONFIG_HIGH_RES_TIMERS=y (active state unreadable: {why})"
                )),
                Some(false) => low("the kernel is built without CONFIG_HIGH_RES_TIMERS".into()),
                None => Outcome::na(format!("unavailable: {why}")),
            }
        }
    }
}

pub fn nohz_full(f: &Facts, ctx: &Ctx) -> Outcome {
    let built = f
        .info
        .kernel_config
        .value()
        .map(|c| c.no_hz.iter().any(|n| n == "CONFIG_NO_HZ_FULL"));
    // The boot option, or the kernel's sysfs list (which reads `(null)` or is empty when unused).
    let used = f.info.boot.nohz_full.clone().or_else(|| {
        f.info
            .cpu
            .nohz_full
            .clone()
            .filter(|s| latlab_model::units::CpuList::parse(s).is_ok_and(|l| !l.is_empty()))
    });
    let availability = match built {
        Some(true) => "built in (CONFIG_NO_HZ_FULL)",
        Some(false) => "not built in",
        None => "build unknown",
    };
    if let Some(list) = &used {
        return Outcome::pass(format!("nohz_full={list}, {availability}"));
    }
    if ctx.target != Target::Control {
        return Outcome::na(format!(
            "not used, {availability}; isolating CPUs matters for control loops"
        ));
    }
    let online = f.online.len();
    if online < 2 {
        return Outcome::na("one CPU online: nothing to isolate");
    }
    let first = housekeeping(f).first().copied().unwrap_or(0);
    let rest: Vec<u32> = f
        .online
        .cpus()
        .iter()
        .copied()
        .filter(|c| *c != first)
        .collect();
    let list = cpus(&rest);
    match built {
        Some(false) => Outcome::warn(
            format!("not used, {availability}: the tick interrupts every CPU"),
            "a kernel with CONFIG_NO_HZ_FULL, then nohz_full= on the loop's CPUs",
        )
        .fix(Fix::manual("use a kernel built with CONFIG_NO_HZ_FULL")),
        _ => Outcome::warn(
            format!("not used, {availability}: the loop's CPU takes the tick"),
            format!("boot with nohz_full={list} isolcpus=managed_irq,domain,{list} and run the loop there"),
        )
        .fix(Fix::boot(format!("nohz_full={list}")))
        .fix(Fix::boot(format!("isolcpus=managed_irq,domain,{list}"))),
    }
}

pub fn rcu_nocbs(f: &Facts, ctx: &Ctx) -> Outcome {
    let cfg = f.info.kernel_config.value();
    let lazy = match (cfg.map(|c| c.rcu_lazy), f.info.boot.rcu_lazy.as_deref()) {
        (Some(true), Some("0")) => "lazy RCU built in, off (rcutree.enable_rcu_lazy=0)",
        (Some(true), _) => "lazy RCU built in",
        (Some(false), _) => "no lazy RCU",
        (None, _) => "lazy RCU unknown",
    };
    let built = cfg.map(|c| c.rcu_nocb_cpu);
    let nocbs = f.info.boot.rcu_nocbs.as_deref();
    let isolated: Vec<u32> = f.isolated.cpus().to_vec();
    let offloaded = nocbs.map(|n| {
        if n.is_empty() || n == "all" {
            f.online.cpus().to_vec()
        } else {
            latlab_model::units::CpuList::parse(n)
                .map(|l| l.cpus().to_vec())
                .unwrap_or_default()
        }
    });
    let described = match nocbs {
        Some("") => "rcu_nocbs (all CPUs)".to_string(),
        Some(n) => format!("rcu_nocbs={n}"),
        None => "no rcu_nocbs".to_string(),
    };
    if isolated.is_empty() {
        return Outcome::na(format!(
            "{described}, {lazy}; no isolated CPUs whose callbacks need moving"
        ));
    }
    let missing: Vec<u32> = isolated
        .iter()
        .copied()
        .filter(|c| !offloaded.as_ref().is_some_and(|o| o.contains(c)))
        .collect();
    if missing.is_empty() {
        return Outcome::pass(format!(
            "{described} covers the isolated CPUs {}, {lazy}",
            cpus(&isolated)
        ));
    }
    let evidence = format!(
        "{described}: RCU callbacks run on the isolated CPUs {}, {lazy}",
        cpus(&missing)
    );
    let fix = if built == Some(false) {
        Fix::manual("use a kernel built with CONFIG_RCU_NOCB_CPU")
    } else {
        Fix::boot(format!("rcu_nocbs={}", cpus(&isolated)))
    };
    let o = Outcome::warn(evidence, format!("boot with rcu_nocbs={}", cpus(&isolated))).fix(fix);
    if ctx.target == Target::Throughput {
        o.with_verdict(Verdict::NotApplicable)
    } else {
        o
    }
}

pub fn threadirqs(f: &Facts, ctx: &Ctx) -> Outcome {
    if is_rt_kernel(f) {
        return Outcome::pass("PREEMPT_RT runs every interrupt handler in a thread");
    }
    if f.info.boot.threadirqs {
        return Outcome::pass("threadirqs on the kernel command line");
    }
    if ctx.target == Target::Throughput {
        return Outcome::na("no threadirqs; hard-IRQ handlers are fastest for throughput");
    }
    Outcome::warn(
        "no threadirqs: interrupt handlers run in hard-IRQ context, above every task",
        "boot with threadirqs so IRQ threads can be prioritised below the RT work (rtirq)",
    )
    .fix(Fix::boot("threadirqs"))
}

pub fn clocksource(f: &Facts, ctx: &Ctx) -> Outcome {
    let cs = f.info.clocksource.as_str();
    if cs.starts_with("unavailable") {
        return Outcome::na(cs.to_string());
    }
    const SLOW: &[&str] = &["hpet", "acpi_pm", "jiffies", "refined-jiffies", "pit"];
    if !SLOW.contains(&cs) {
        return Outcome::pass(format!("{cs} (read in user space without a system call)"));
    }
    let better = ["tsc", "arch_sys_counter", "kvm-clock"]
        .into_iter()
        .find(|c| f.clocksources.iter().any(|a| a == c));
    let evidence = format!(
        "{cs}: every clock read is a slow device access or a system call{}",
        better
            .map(|b| format!("; {b} is available"))
            .unwrap_or_default()
    );
    let mut o = Outcome::fail(
        evidence,
        match better {
            Some("tsc") => {
                "boot with clocksource=tsc, and check the log for why tsc was marked unstable"
            }
            Some(_) => "boot with clocksource= naming the faster source",
            None => "the machine offers no faster clock source",
        },
    );
    if let Some(b) = better {
        o = o.fix(Fix::boot(format!("clocksource={b}")));
    }
    if ctx.target == Target::Throughput {
        o.with_verdict(Verdict::Warn)
    } else {
        o
    }
}

/// Mitigations that cost on every kernel entry or exit.
fn costly(value: &str) -> bool {
    let v = value.trim();
    v.contains("PTI")
        || v.starts_with("Mitigation: IBRS")
        || v.contains("Clear CPU buffers")
        || v.contains("Safe RET")
        || v.contains("Untrained return thunk")
        || v.contains("Clear Register File")
}

pub fn mitigations(f: &Facts, _ctx: &Ctx) -> Outcome {
    if f.info.boot.mitigations.as_deref() == Some("off") {
        return Outcome::pass("mitigations=off on the kernel command line");
    }
    let v = &f.info.vulnerabilities;
    if v.is_empty() {
        return Outcome::na(
            "unavailable: /sys/devices/system/cpu/vulnerabilities is absent or empty",
        );
    }
    // "Vulnerable: Safe RET, no microcode" is a mitigation in force too, without its microcode.
    let active = v
        .iter()
        .filter(|(_, s)| s.starts_with("Mitigation") || costly(s))
        .count();
    let expensive: Vec<String> = v
        .iter()
        .filter(|(_, s)| costly(s))
        .map(|(n, s)| {
            let what = s.trim_start_matches("Mitigation: ");
            let what = what.split(';').next().unwrap_or(what);
            format!("{n} ({what})")
        })
        .collect();
    if expensive.is_empty() {
        return Outcome::pass(format!(
            "{active} mitigations active, none of the costly kind (PTI, IBRS, buffer clearing, \
             Safe RET)"
        ));
    }
    Outcome::warn(
        format!(
            "{active} mitigations active; costly on each kernel entry: {}",
            expensive.join(", ")
        ),
        "the boot option mitigations=off only where every program is trusted; otherwise accept \
         the cost (--fix never turns security off: it is yours to add)",
    )
}
