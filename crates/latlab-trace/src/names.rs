//! Names for keys: kernel symbols from `/proc/kallsyms`, softirq vectors, IRQs, task classes.
//! Parsing is pure (tested on text); reading the files is one function each.

use latlab_model::trace::Family;
use std::collections::HashMap;

/// Softirq vector names, by vector number (`include/linux/interrupt.h`).
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The vector number of a softirq name (case-insensitive).
pub fn softirq_vector(name: &str) -> Option<u64> {
    SOFTIRQ_NAMES
        .iter()
        .position(|n| n.eq_ignore_ascii_case(name))
        .map(|i| i as u64)
}

/// Kernel text symbols, sorted by address.
#[derive(Debug, Default, Clone)]
pub struct Symbols {
    syms: Vec<(u64, String)>,
}

impl Symbols {
    /// Parse `/proc/kallsyms` text, keeping text symbols (`t`, `T`, `w`, `W`). Addresses shown as
    /// zero (hidden by `kptr_restrict`) are left out, so lookups then find nothing.
    pub fn parse(text: &str) -> Symbols {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut it = line.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                if addr == 0 || !matches!(kind, "t" | "T" | "w" | "W") {
                    return None;
                }
                Some(match it.next() {
                    Some(module) => (addr, format!("{name} {module}")),
                    None => (addr, name.to_string()),
                })
            })
            .collect();
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        Symbols { syms }
    }

    /// Read `/proc/kallsyms` (addresses are visible to root only).
    pub fn load() -> Symbols {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| Symbols::parse(&t))
            .unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol at or before `addr`: `name` for an exact match, `name+0xoff` inside a symbol,
    /// `None` below the first symbol or without symbols.
    pub fn lookup(&self, addr: u64) -> Option<String> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        let (start, name) = self.syms.get(i.checked_sub(1)?)?;
        if *start == addr {
            Some(name.clone())
        } else {
            // Keep a module suffix after the offset: "fn+0x10 [mod]".
            match name.split_once(' ') {
                Some((f, m)) => Some(format!("{f}+{:#x} {m}", addr - start)),
                None => Some(format!("{name}+{:#x}", addr - start)),
            }
        }
    }

    /// The symbol of a function address, or the address in hex.
    pub fn name(&self, addr: u64) -> String {
        self.lookup(addr).unwrap_or_else(|| format!("{addr:#x}"))
    }
}

/// IRQ names from the handlers' names in `/sys/kernel/irq/<n>/actions`.
#[derive(Debug, Default, Clone)]
pub struct IrqNames {
    names: HashMap<u64, String>,
}

impl IrqNames {
    /// Read every IRQ's action names.
    pub fn load() -> IrqNames {
        let mut names = HashMap::new();
        if let Ok(dir) = std::fs::read_dir("/sys/kernel/irq") {
            for e in dir.flatten() {
                let Some(irq) = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()) else {
                    continue;
                };
                if let Ok(actions) = std::fs::read_to_string(e.path().join("actions")) {
                    let actions = actions.trim();
                    if !actions.is_empty() {
                        names.insert(irq, actions.to_string());
                    }
                }
            }
        }
        IrqNames { names }
    }

    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, String)>) -> IrqNames {
        IrqNames {
            names: pairs.into_iter().collect(),
        }
    }

    /// `irq N: handlers`, or `irq N`.
    pub fn name(&self, irq: u64) -> String {
        match self.names.get(&irq) {
            Some(a) => format!("{irq}: {a}"),
            None => format!("{irq}"),
        }
    }
}

/// Everything needed to name keys.
#[derive(Debug, Default, Clone)]
pub struct Names {
    pub symbols: Symbols,
    pub irqs: IrqNames,
}

impl Names {
    pub fn load() -> Names {
        Names {
            symbols: Symbols::load(),
            irqs: IrqNames::load(),
        }
    }

    /// The readable name of a key of a family.
    pub fn key_name(&self, family: Family, key: u64) -> String {
        match family {
            Family::WorkqueueLatency
            | Family::WorkqueueExecution
            | Family::KthreadLatency
            | Family::KthreadExecution
            | Family::TaskletRuntime
            | Family::Hrtimer => self.symbols.name(key),
            Family::SoftirqLatency | Family::SoftirqRuntime => softirq_name(key),
            Family::Wakeup => class_name(key).to_string(),
            Family::LocalTimer => "local timer".to_string(),
            Family::Hardirq => self.irqs.name(key),
        }
    }
}

pub fn softirq_name(vec: u64) -> String {
    SOFTIRQ_NAMES
        .get(vec as usize)
        .map_or_else(|| format!("vector {vec}"), |s| s.to_string())
}

/// The task class of a wake-up key.
pub fn class_name(key: u64) -> &'static str {
    match key {
        0 => "other",
        1 => "rt",
        2 => "deadline",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t vmstat_update
ffffffff81001200 T hrtimer_wakeup
ffffffff81001200 T hrtimer_wakeup_alias
ffffffff81002000 D some_data
ffffffffc0001000 t virtio_work\t[virtio_net]
";

    #[test]
    fn kallsyms_lookup_exact_and_inside() {
        let s = Symbols::parse(KALLSYMS);
        assert_eq!(s.name(0xffffffff81001000), "vmstat_update");
        assert_eq!(s.name(0xffffffff81001200), "hrtimer_wakeup");
        assert_eq!(s.name(0xffffffff81001010), "vmstat_update+0x10");
        assert_eq!(s.name(0xffffffffc0001000), "virtio_work [virtio_net]");
        assert_eq!(s.name(0xffffffffc0001004), "virtio_work+0x4 [virtio_net]");
        assert_eq!(s.name(0x10), "0x10");
        // Data symbols are not functions.
        assert_eq!(s.name(0xffffffff81002008), "hrtimer_wakeup+0xe08");
    }

    #[test]
    fn hidden_addresses_resolve_to_nothing() {
        let s = Symbols::parse("0000000000000000 T _stext\n0000000000000000 t vmstat_update\n");
        assert!(s.is_empty());
        assert_eq!(s.name(0xffffffff81001000), "0xffffffff81001000");
    }

    #[test]
    fn key_names_per_family() {
        let n = Names {
            symbols: Symbols::parse(KALLSYMS),
            irqs: IrqNames::from_pairs([(11, "virtio0".to_string())]),
        };
        assert_eq!(n.key_name(Family::SoftirqLatency, 3), "NET_RX");
        assert_eq!(n.key_name(Family::SoftirqRuntime, 12), "vector 12");
        assert_eq!(n.key_name(Family::Wakeup, 1), "rt");
        assert_eq!(n.key_name(Family::Hardirq, 11), "11: virtio0");
        assert_eq!(n.key_name(Family::Hardirq, 12), "12");
        assert_eq!(
            n.key_name(Family::Hrtimer, 0xffffffff81001200),
            "hrtimer_wakeup"
        );
        assert_eq!(softirq_vector("net_rx"), Some(3));
    }
}
