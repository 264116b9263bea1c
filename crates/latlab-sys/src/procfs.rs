//! The text formats of procfs, parsed once for every crate: `/proc/interrupts` (and
//! `/proc/softirqs`), `/proc/PID/stat`, the capabilities of `/proc/PID/status` and the kernel's
//! hex CPU masks (`smp_affinity`, `cpumask`). Pure functions over text: the callers read the
//! files through `Sys`.

use latlab_model::units::CpuList;
use std::collections::BTreeMap;

/// One row of `/proc/interrupts`: its label (`0`, `NMI`, `LOC`…), the per-CPU counts the row
/// has (at most one per header column) and the text after them (chip, flow, handlers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptRow<'a> {
    pub label: &'a str,
    pub counts: Vec<u64>,
    pub desc: &'a str,
}

impl InterruptRow<'_> {
    /// The IRQ number of a numbered row.
    pub fn irq(&self) -> Option<u32> {
        self.label.parse().ok()
    }

    /// The chip, hardware IRQ and flow (`IR-IO-APIC 16-fasteoi`), and the handlers' names
    /// (`ehci_hcd:usb1`, `snd_hda_intel:card0`): the kernel prints the handlers after the last
    /// run of two or more spaces, separated by `, `.
    pub fn chip_and_actions(&self) -> (String, Vec<String>) {
        match self.desc.rfind("  ") {
            Some(i) => (
                self.desc[..i]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                self.desc[i..]
                    .trim()
                    .split(", ")
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
            ),
            None => (self.desc.to_string(), Vec::new()),
        }
    }
}

/// `/proc/interrupts` or `/proc/softirqs`: the CPUs of the header and every row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts<'a> {
    /// CPU numbers of the columns (`CPU0 CPU1 …`: the online CPUs only).
    pub cpus: Vec<usize>,
    pub rows: Vec<InterruptRow<'a>>,
}

/// Parse `/proc/interrupts` or `/proc/softirqs` (the rows borrow from `text`).
pub fn parse_interrupts(text: &str) -> Interrupts<'_> {
    let mut lines = text.lines();
    let cpus: Vec<usize> = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let rows = lines
        .filter_map(|line| {
            let (label, rest) = line.split_once(':')?;
            // The counts, keeping the byte offset where the description starts.
            let (mut counts, mut pos, bytes) = (Vec::new(), 0, rest.as_bytes());
            while counts.len() < cpus.len() {
                while pos < bytes.len() && bytes[pos] == b' ' {
                    pos += 1;
                }
                let start = pos;
                while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                    pos += 1;
                }
                match rest[start..pos].parse() {
                    Ok(n) => counts.push(n),
                    Err(_) => {
                        pos = start;
                        break;
                    }
                }
            }
            Some(InterruptRow {
                label: label.trim(),
                counts,
                desc: rest[pos..].trim(),
            })
        })
        .collect();
    Interrupts { cpus, rows }
}

impl Interrupts<'_> {
    /// Per-CPU sums over the rows that have a count for every CPU (ERR and MIS have one).
    pub fn per_cpu_totals(&self) -> BTreeMap<usize, u64> {
        let mut sums = vec![0u64; self.cpus.len()];
        for r in self
            .rows
            .iter()
            .filter(|r| r.counts.len() == self.cpus.len())
        {
            for (s, n) in sums.iter_mut().zip(&r.counts) {
                *s += n;
            }
        }
        self.cpus.iter().copied().zip(sums).collect()
    }
}

/// `/proc/PID/stat`: the command name (which may hold spaces and parentheses) and the fields
/// after it, numbered as in proc(5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStat<'a> {
    pub comm: &'a str,
    fields: Vec<&'a str>,
}

/// The task is a kernel thread (`flags`, field 9).
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// The kernel refuses to change the task's affinity (`flags`, field 9).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// Parse `/proc/PID/stat`, counting fields from the last `)`.
pub fn parse_task_stat(text: &str) -> Option<TaskStat<'_>> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    Some(TaskStat {
        comm: text.get(open + 1..close)?,
        fields: text.get(close + 1..)?.split_whitespace().collect(),
    })
}

impl TaskStat<'_> {
    /// Field `n` of proc(5) (3: state, 9: flags, 22: starttime, 40: rt_priority, 41: policy)
    /// as a number.
    pub fn num<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.fields.get(n.checked_sub(3)?)?.parse().ok()
    }
}

/// A thread's real-time policy (`fifo`, `rr`, `deadline`) and priority (0 for deadline), from
/// its `/proc/PID/task/TID/stat`. `None` for a thread at another policy, a kernel thread (the
/// kernel's own per-CPU work, there on every machine) or text that does not parse.
pub fn realtime_policy(stat: &str) -> Option<(&'static str, u32)> {
    let st = parse_task_stat(stat)?;
    if st.num::<u64>(9)? & PF_KTHREAD != 0 {
        return None;
    }
    let policy = match st.num::<u32>(41)? {
        1 => "fifo",
        2 => "rr",
        6 => "deadline",
        _ => return None,
    };
    Some((policy, st.num(40)?))
}

/// The CPUs a task may run on, from its `/proc/PID/task/TID/status` (`Cpus_allowed_list`).
pub fn allowed_cpus(status: &str) -> Option<CpuList> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| CpuList::parse(l.trim()).ok())
}

/// A kernel hex CPU mask (`f`, `00000000,00000003`: 32-bit words, highest first); empty text is
/// the empty set.
pub fn parse_hex_mask(text: &str) -> Option<CpuList> {
    let text = text.trim();
    if text.is_empty() {
        return Some(CpuList::default());
    }
    let mut cpus = Vec::new();
    for (i, w) in text.split(',').rev().enumerate() {
        let v = u32::from_str_radix(w, 16).ok()?;
        cpus.extend(
            (0..32)
                .filter(|b| v & (1 << b) != 0)
                .map(|b| i as u32 * 32 + b),
        );
    }
    Some(CpuList::from_cpus(cpus))
}

/// A CPU set as a kernel hex mask: 32-bit words, highest first, comma-separated.
pub fn format_hex_mask(cpus: &CpuList) -> String {
    let max = cpus.cpus().iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; (max / 32 + 1) as usize];
    for &c in cpus.cpus() {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let mut out = String::new();
    for (i, w) in words.iter().rev().enumerate() {
        if i == 0 {
            out.push_str(&format!("{w:x}"));
        } else {
            out.push_str(&format!(",{w:08x}"));
        }
    }
    out
}

/// The effective capability mask of `/proc/PID/status` text (its `CapEff:` line, hex).
pub fn cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// One limit of `/proc/PID/limits` text, e.g. `Max locked memory`: its soft and hard values as
/// printed (a number or `unlimited`) and its unit (`bytes`, `us`, or empty).
pub fn limit<'a>(limits: &'a str, name: &str) -> Option<(&'a str, &'a str, &'a str)> {
    limits.lines().find_map(|l| {
        let mut f = l.strip_prefix(name)?.split_whitespace();
        Some((f.next()?, f.next()?, f.next().unwrap_or("")))
    })
}

/// This process's effective capability mask (0 where unreadable). The process's own, so read
/// from the live `/proc`, whatever root a [`crate::Sys`] reads.
pub fn own_cap_eff() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| cap_eff(&s))
        .unwrap_or(0)
}

/// Capability numbers (`linux/capability.h`) latlab asks about.
pub mod cap {
    pub const IPC_LOCK: u32 = 14;
    pub const SYS_ADMIN: u32 = 21;
    pub const SYS_NICE: u32 = 23;
    pub const PERFMON: u32 = 38;
    pub const BPF: u32 = 39;
}

/// Whether the capability mask `cap_eff` holds capability `cap` (a [`cap`] number).
pub fn has_cap(cap_eff: u64, cap: u32) -> bool {
    cap < 64 && cap_eff & (1u64 << cap) != 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_interrupt_row_names_its_chip_and_every_handler() {
        let text = "           CPU0       CPU1\n \
                     29:      91246          0     GICv2 158 Level     mmc1, mmc0\n \
                     35:          0          0  PCI-MSI-0000:00:01.1    0-edge      PCIe PME, aerdrv\n";
        let rows = parse_interrupts(text).rows;
        let got: Vec<(String, Vec<String>)> = rows.iter().map(|r| r.chip_and_actions()).collect();
        assert_eq!(
            got[0],
            ("GICv2 158 Level".into(), vec!["mmc1".into(), "mmc0".into()])
        );
        assert_eq!(
            got[1],
            (
                "PCI-MSI-0000:00:01.1 0-edge".into(),
                vec!["PCIe PME".into(), "aerdrv".into()]
            )
        );
    }

    #[test]
    fn the_effective_capabilities_of_a_status() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(cap_eff("Name: x\n"), None);
        assert_eq!(cap_eff("CapEff:\tzz\n"), None);
        assert!(has_cap(1 << cap::SYS_NICE, cap::SYS_NICE));
        assert!(!has_cap(1 << cap::SYS_NICE, cap::IPC_LOCK));
        assert!(!has_cap(u64::MAX, 64), "no capability beyond the mask");
    }

    #[test]
    fn a_limit_of_a_limits_file() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max locked memory         8388608              unlimited            bytes     \n\
                    Max realtime priority     0                    0                    \n";
        assert_eq!(
            limit(text, "Max locked memory"),
            Some(("8388608", "unlimited", "bytes"))
        );
        assert_eq!(limit(text, "Max realtime priority"), Some(("0", "0", "")));
        assert_eq!(limit(text, "Max nice priority"), None);
        assert_eq!(limit("Max locked memory\n", "Max locked memory"), None);
    }

    const INTERRUPTS: &str = "           CPU0       CPU2       \n  \
  0:         40          0   IO-APIC   2-edge      timer\n  \
  9:          0          3   IO-APIC   9-fasteoi   acpi, extra\n\
NMI:          1          2   Non-maskable interrupts\n\
ERR:          7\n";

    #[test]
    fn interrupts_keep_rows_counts_and_description_and_sum_by_header_cpu() {
        let t = parse_interrupts(INTERRUPTS);
        assert_eq!(t.cpus, [0, 2]);
        assert_eq!(t.rows.len(), 4);
        assert_eq!(t.rows[1].irq(), Some(9));
        assert_eq!(t.rows[1].counts, [0, 3]);
        assert_eq!(t.rows[1].desc, "IO-APIC   9-fasteoi   acpi, extra");
        assert_eq!(t.rows[2].irq(), None);
        assert_eq!(t.rows[3].counts, [7], "ERR has one count");
        let sums = t.per_cpu_totals();
        assert_eq!(sums, BTreeMap::from([(0, 41), (2, 5)]));
    }

    #[test]
    fn task_stat_counts_fields_after_the_last_parenthesis() {
        let line = "42 (a) b) c) S 1 42 42 0 -1 2097152 0 0";
        let s = parse_task_stat(line).unwrap();
        assert_eq!(s.comm, "a) b) c");
        assert_eq!(s.num::<u64>(9), Some(2_097_152));
        assert_eq!(s.num::<u64>(99), None);
    }

    #[test]
    fn hex_masks_are_32_bit_words_and_round_trip() {
        assert_eq!(parse_hex_mask("c").unwrap().cpus(), &[2, 3]);
        assert_eq!(parse_hex_mask("00000001,00000000").unwrap().cpus(), &[32]);
        assert_eq!(parse_hex_mask("0000000f\n").unwrap().to_string(), "0-3");
        assert!(parse_hex_mask("").unwrap().is_empty());
        assert!(parse_hex_mask("zz").is_none());
        for list in ["0-1", "0,32", "1-3"] {
            let l = CpuList::parse(list).unwrap();
            assert_eq!(parse_hex_mask(&format_hex_mask(&l)).unwrap(), l);
        }
        assert_eq!(
            format_hex_mask(&CpuList::parse("0,32").unwrap()),
            "1,00000001"
        );
    }
}
