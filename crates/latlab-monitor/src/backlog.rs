//! Window sets the store could not take (a full disk, a read-only or vanished file), held in
//! memory until it can.
//!
//! A set is parked with its histograms encoded (a few KiB per CPU instead of the 270 KiB of a
//! histogram's counters), so an hour of windows of many CPUs fits. The bound: the backlog
//! always keeps the last [`KEEP_AT_LEAST_NS`] (an hour) of windows, and beyond that at most
//! [`MEMORY_BOUND`] bytes; only then are the oldest sets given up, a quarter of the bound (or of
//! the hour) at a time, for the keeper to write to a file.

use latlab_hist::Histogram;
use latlab_model::monitor::{MonitorSpike, MonitorWindow, WindowSet};
use latlab_model::samples::{CpuSummary, PowerSource, ThermalSummary};
use std::collections::VecDeque;

/// Time of windows the backlog always keeps, whatever their size.
pub const KEEP_AT_LEAST_NS: u64 = latlab_store::HOUR_NS;
/// Bytes of parked windows beyond which sets older than [`KEEP_AT_LEAST_NS`] are given up.
/// (Hidden for tests: `latlab monitor --backlog-bound BYTES,SECONDS` sets both.)
pub const MEMORY_BOUND: usize = 64 << 20;

/// One window set waiting for the store. `k` is the window's number in this daemon's run: the
/// stored index is counted from the series' state when the set is finally written.
pub struct Parked {
    pub k: u64,
    start_unix_ns: u64,
    end_unix_ns: u64,
    cpus: Vec<ParkedCpu>,
    power: Option<Vec<PowerSource>>,
    thermal: Option<Vec<ThermalSummary>>,
    cost_cpu_time_ns: Option<u64>,
}

struct ParkedCpu {
    cpu: u32,
    histogram: Vec<u8>,
    missed: u64,
    cpu_summary: Option<CpuSummary>,
    spikes: Vec<MonitorSpike>,
}

impl Parked {
    pub fn new(k: u64, set: WindowSet) -> Parked {
        Parked {
            k,
            start_unix_ns: set.start_unix_ns,
            end_unix_ns: set.end_unix_ns,
            cpus: set
                .cpus
                .into_iter()
                .map(|w| ParkedCpu {
                    cpu: w.cpu,
                    histogram: w.histogram.encode(),
                    missed: w.missed,
                    cpu_summary: w.cpu_summary,
                    spikes: w.spikes,
                })
                .collect(),
            power: set.power,
            thermal: set.thermal,
            cost_cpu_time_ns: set.cost_cpu_time_ns,
        }
    }

    /// The set again, numbered `index`; `None` if a histogram does not decode (it was encoded
    /// by this process, so that would be a bug, reported as a lost window).
    pub fn to_set(&self, index: u64) -> Option<WindowSet> {
        let cpus = self
            .cpus
            .iter()
            .map(|c| {
                Some(MonitorWindow {
                    cpu: c.cpu,
                    histogram: Histogram::decode(&c.histogram).ok()?,
                    missed: c.missed,
                    cpu_summary: c.cpu_summary.clone(),
                    spikes: c.spikes.clone(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(WindowSet {
            index,
            start_unix_ns: self.start_unix_ns,
            end_unix_ns: self.end_unix_ns,
            cpus,
            power: self.power.clone(),
            thermal: self.thermal.clone(),
            cost_cpu_time_ns: self.cost_cpu_time_ns,
        })
    }

    /// Memory the set holds, roughly: its histograms and spikes.
    fn bytes(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| {
                c.histogram.len()
                    + c.spikes.len() * std::mem::size_of::<MonitorSpike>()
                    + std::mem::size_of::<ParkedCpu>()
            })
            .sum::<usize>()
            + std::mem::size_of::<Parked>()
    }
}

/// The parked sets, oldest first.
pub struct Backlog {
    sets: VecDeque<Parked>,
    bytes: usize,
    keep_ns: u64,
    bound: usize,
    /// Sets given up because the bound was reached.
    pub given_up: u64,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog::new(KEEP_AT_LEAST_NS, MEMORY_BOUND)
    }
}

impl Backlog {
    /// A backlog that keeps the last `keep_ns` of windows and beyond them at most `bound` bytes.
    pub fn new(keep_ns: u64, bound: usize) -> Backlog {
        Backlog {
            sets: VecDeque::new(),
            bytes: 0,
            keep_ns,
            bound,
            given_up: 0,
        }
    }

    /// Park `p` last.
    pub fn push(&mut self, p: Parked) {
        self.bytes += p.bytes();
        self.sets.push_back(p);
    }

    /// Whether the sets parked are beyond the bound: more bytes than it, over more than the
    /// time always kept.
    pub fn over(&self) -> bool {
        self.bytes > self.bound && self.span_ns() > self.keep_ns
    }

    /// Over the bound, the oldest sets, given up until a quarter of the bound, or of the kept
    /// time, is free again (so that they leave in batches, one file each, not one with every
    /// new window); oldest first. None under it.
    pub fn give_up(&mut self) -> Vec<Parked> {
        let mut out = Vec::new();
        if self.over() {
            while self.sets.len() > 1
                && self.bytes > self.bound / 4 * 3
                && self.span_ns() > self.keep_ns / 4 * 3
            {
                if let Some(old) = self.sets.pop_front() {
                    self.bytes -= old.bytes();
                    out.push(old);
                }
            }
        }
        self.given_up += out.len() as u64;
        out
    }

    /// Time from the oldest parked window's start to the newest one's end.
    fn span_ns(&self) -> u64 {
        match (self.sets.front(), self.sets.back()) {
            (Some(a), Some(b)) => b.end_unix_ns.saturating_sub(a.start_unix_ns),
            _ => 0,
        }
    }

    pub fn front(&self) -> Option<&Parked> {
        self.sets.front()
    }

    pub fn pop_front(&mut self) {
        if let Some(p) = self.sets.pop_front() {
            self.bytes -= p.bytes();
        }
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// The sets waiting, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Parked> {
        self.sets.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MIN: u64 = 60_000_000_000;

    fn set(k: u64, cpus: u32, len_ns: u64) -> WindowSet {
        let cpus = (0..cpus)
            .map(|cpu| {
                let mut h = Histogram::new();
                // Values spread over many buckets, like a real window's.
                for v in 0..2_000u64 {
                    h.record(2_000 + v * 37 * u64::from(cpu + 1));
                }
                MonitorWindow {
                    spikes: vec![MonitorSpike {
                        at_unix_ns: k * len_ns + 5,
                        value_ns: 90_000,
                    }],
                    ..latlab_testkit::run::monitor_window(cpu, h, u64::from(cpu))
                }
            })
            .collect();
        WindowSet {
            cost_cpu_time_ns: Some(k),
            ..latlab_testkit::run::window_set(k, (k * len_ns, len_ns), cpus)
        }
    }

    #[test]
    fn a_parked_set_comes_back_whole_with_its_new_index() {
        let s = set(3, 4, MIN);
        let p = Parked::new(3, s.clone());
        let back = p.to_set(103).unwrap();
        assert_eq!(back.index, 103);
        assert_eq!(
            WindowSet {
                index: s.index,
                ..back
            },
            s
        );
        assert!(
            p.bytes() < 4 * 16 * 1024,
            "encoded, not 270 KiB of counters per CPU: {}",
            p.bytes()
        );
    }

    #[test]
    fn the_kept_time_is_always_kept_and_beyond_it_the_memory_bound_holds() {
        // A bound of 3 sets, and 10 minutes that are always kept: 1-minute windows.
        let one = Parked::new(0, set(0, 2, MIN)).bytes();
        let mut b = Backlog::new(10 * MIN, 3 * one);
        let mut batches = Vec::new();
        for k in 0..30 {
            b.push(Parked::new(k, set(k, 2, MIN)));
            let out = b.give_up();
            if !out.is_empty() {
                batches.push(out.iter().map(|p| p.k).collect::<Vec<_>>());
            }
            // Over the bound, the last 10 minutes always stay.
            assert!(
                b.len() >= 7.min(k as usize + 1) && b.len() <= 10,
                "{}",
                b.len()
            );
        }
        // Given up oldest first, in batches down to 7.5 minutes, each set once.
        assert_eq!(
            batches,
            (0..5)
                .map(|i| (4 * i..4 * i + 4).collect())
                .collect::<Vec<Vec<u64>>>()
        );
        assert_eq!(b.given_up, 20);
        assert_eq!((b.front().unwrap().k, b.len()), (20, 10));
        // Under the bound, nothing is given up however old.
        let mut b = Backlog::new(MIN, 1000 * one);
        for k in 0..300 {
            b.push(Parked::new(k, set(k, 2, MIN)));
            assert!(!b.over() && b.give_up().is_empty());
        }
        assert_eq!((b.len(), b.given_up), (300, 0));
        // The defaults hold a day of 5-minute windows of 2 CPUs without giving any up.
        let mut b = Backlog::default();
        for k in 0..288 {
            b.push(Parked::new(k, set(k, 2, 5 * MIN)));
            assert!(!b.over() && b.give_up().is_empty());
        }
        assert_eq!((b.len(), b.given_up), (288, 0));
        while b.front().is_some() {
            b.pop_front();
        }
        assert_eq!((b.bytes(), b.is_empty()), (0, true));
    }
}
