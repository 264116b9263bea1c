//! Interrupts: shared lines of sound cards and USB hosts, IRQs on isolated CPUs, irqbalance.

use super::{cpus, housekeeping};
use crate::{Ctx, Facts, Fix, Knob, Outcome, Target, Verdict};

fn is_audio(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("snd") || n.contains("audio")
}

fn is_usb_host(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["xhci", "ehci", "ohci", "uhci", "dwc"]
        .iter()
        .any(|p| n.starts_with(p))
}

/// The device part of a handler name (`ehci_hcd:usb1` → `ehci_hcd`).
fn device(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// Handlers of one device (`dwc_otg`, `dwc_otg_pcd`, `dwc_otg_hcd:usb1`) count as one.
fn same_device(a: &str, b: &str) -> bool {
    let (a, b) = (device(a), device(b));
    a.starts_with(b) || b.starts_with(a)
}

pub fn shared_audio(f: &Facts, ctx: &Ctx) -> Outcome {
    let o = shared_audio_outcome(f);
    match (ctx.target, o.verdict) {
        (Target::Throughput, _) => {
            Outcome::na(format!("{}; sharing matters for audio", o.evidence))
        }
        (Target::Control, Verdict::Fail) => o.with_verdict(Verdict::Warn),
        _ => o,
    }
}

fn shared_audio_outcome(f: &Facts) -> Outcome {
    let Some(rows) = f.interrupts.value() else {
        return Outcome::unavailable(&f.interrupts);
    };
    let watched: Vec<&crate::facts::IrqLine> = rows
        .iter()
        .filter(|r| r.actions.iter().any(|a| is_audio(a) || is_usb_host(a)))
        .collect();
    if watched.is_empty() {
        return Outcome::na("no sound card or USB host controller interrupt");
    }
    let shared: Vec<&&crate::facts::IrqLine> = watched
        .iter()
        .filter(|r| {
            r.actions
                .iter()
                .enumerate()
                .any(|(i, a)| r.actions[i + 1..].iter().any(|b| !same_device(a, b)))
        })
        .collect();
    let names = |rs: &[&crate::facts::IrqLine]| {
        rs.iter()
            .map(|r| format!("IRQ {} {}", r.irq, r.actions.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if shared.is_empty() {
        let own: Vec<&crate::facts::IrqLine> = watched.to_vec();
        return Outcome::pass(format!("each on its own line: {}", names(&own)));
    }
    let list: Vec<&crate::facts::IrqLine> = shared.iter().map(|r| **r).collect();
    let hda = list
        .iter()
        .any(|r| r.actions.iter().any(|a| a.starts_with("snd_hda_intel")));
    let o = Outcome::fail(
        format!("shared: {}", names(&list)),
        if hda {
            "give the sound card its own line: snd_hda_intel.enable_msi=1, or another slot"
        } else {
            "move the device to a port or slot with its own interrupt line (or use MSI)"
        },
    );
    if hda {
        o.fix(Fix::boot("snd_hda_intel.enable_msi=1"))
    } else {
        o.fix(Fix::manual(
            "move the sound card or USB device to a slot/port on another interrupt line",
        ))
    }
}

pub fn isolated_cpus(f: &Facts, ctx: &Ctx) -> Outcome {
    if f.isolated.is_empty() {
        return Outcome::na("no isolated CPUs");
    }
    let names = |irq: u32| -> String {
        f.interrupts
            .value()
            .and_then(|rows| rows.iter().find(|r| r.irq == irq))
            .map(|r| r.actions.join(", "))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "?".into())
    };
    let on: Vec<String> = f
        .irq_affinity
        .iter()
        .filter(|(_, l)| l.cpus().iter().any(|c| f.isolated.contains(*c)))
        .map(|(irq, l)| format!("{irq} {} → {l}", names(*irq)))
        .collect();
    let default = latlab_sys::procfs::parse_hex_mask(
        &f.info
            .irq_affinity
            .value()
            .map(|a| a.default_smp_affinity.clone())
            .unwrap_or_default(),
    );
    let default_hits = default
        .as_ref()
        .is_some_and(|d| d.cpus().iter().any(|c| f.isolated.contains(*c)));
    if on.is_empty() && !default_hits {
        return Outcome::pass(format!(
            "no IRQ is delivered to the isolated CPUs {} ({} IRQs checked)",
            f.isolated,
            f.irq_affinity.len()
        ));
    }
    let hk = cpus(&housekeeping(f));
    let mut parts = Vec::new();
    if !on.is_empty() {
        let shown: Vec<String> = on.iter().take(5).cloned().collect();
        let more = on.len().saturating_sub(shown.len());
        parts.push(format!(
            "IRQs on isolated CPUs {}: {}{}",
            f.isolated,
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if default_hits {
        parts.push("default_smp_affinity includes them".into());
    }
    let o = Outcome::warn(
        parts.join("; "),
        format!("move IRQs to the housekeeping CPUs {hk} (managed ones need isolcpus=managed_irq)"),
    )
    .fix(Fix::knob(Knob::IrqsOff(f.isolated.to_string())))
    .fix(Fix::boot(format!("irqaffinity={hk}")));
    if ctx.target == Target::Control {
        o.with_verdict(Verdict::Fail)
    } else {
        o
    }
}

pub fn irqbalance(f: &Facts, ctx: &Ctx) -> Outcome {
    if !f.info.services.irqbalance {
        return Outcome::pass("irqbalance is not running");
    }
    let banned = f
        .irqbalance_banned
        .as_deref()
        .map(|b| format!(", banned CPUs {b}"))
        .unwrap_or_default();
    let evidence = format!("irqbalance is running{banned}: it moves IRQs between CPUs every 10 s");
    match ctx.target {
        Target::Throughput => Outcome::pass(evidence),
        _ => Outcome::warn(
            evidence,
            "stop it (systemctl disable --now irqbalance) and pin the RT devices' IRQs",
        )
        .fix(Fix::manual("systemctl disable --now irqbalance")),
    }
}
