//! Samplers: what the system does beside a measurement, read at a fixed period.
//!
//! A [`Sampler`] finds its sources once (idle states per CPU, frequency, power, thermal zones),
//! then each call to [`Sampler::sample`] reads a snapshot and records the difference to the
//! previous one: idle residency and entries, mean frequency, energy (RAPL counters with
//! wrap-around, perf power events) or power (hwmon, battery), interrupts, softirqs, utilisation,
//! steal, System Management Interrupts (MSR_SMI_COUNT) and temperatures. [`SamplerThread`] runs
//! a sampler on its own thread at normal priority. [`power_meters`] lists the power sources the
//! samplers would read, for the system record.
//!
//! Missing sources are named with the reason ("unavailable: …"); nothing is invented.

use crate::pi_mutex::PiMutex;
use crate::{SMI_SOURCE, Sys};
use latlab_model::samples::{
    CpuIdleStates, CpuSample, CpuSummary, PowerSource, Sample, Samples, ThermalSummary,
};
use latlab_model::system::{Field, PowerMeter};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::CPU_SYSFS as CPU_DIR;

/// Per-CPU counters of one snapshot.
#[derive(Debug, Clone, Default)]
struct CpuSnap {
    /// user nice system idle iowait irq softirq steal (jiffies).
    stat: Option<[u64; 8]>,
    irqs: Option<u64>,
    softirqs: Option<u64>,
    /// MSR_SMI_COUNT (32 bits).
    smi: Option<u64>,
    idle_time: Vec<u64>,
    idle_usage: Vec<u64>,
    freq_khz: Option<u64>,
}

#[derive(Debug, Clone, Default)]
struct Snapshot {
    at_ns: u64,
    cpus: BTreeMap<usize, CpuSnap>,
    /// Energy counters (µJ for RAPL, raw perf counts) or instantaneous watts, per source.
    power: Vec<Option<PowerReading>>,
    temps: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Copy)]
enum PowerReading {
    Counter(u64),
    Watts(f64),
}

enum PowerProbe {
    /// powercap `energy_uj` with its wrap range.
    Rapl { energy: String, max_range_uj: u64 },
    /// A perf `power` PMU event counting energy; joules = count × scale.
    Perf { fd: OwnedFd, scale: f64 },
    /// hwmon `power*_input` / `power*_average`, µW.
    Hwmon { file: String },
    /// A battery discharging: `power_now` (µW) or `current_now` × `voltage_now`.
    Battery { dir: String },
}

struct PowerState {
    name: String,
    /// What is read, as a system path or perf event (for the system record).
    source: String,
    probe: PowerProbe,
    wraps: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum FreqSource {
    Cpufreq,
    Cpuinfo,
}

/// Reads the system's counters at each call and keeps the series and its totals.
pub struct Sampler {
    sys: Sys,
    period_ns: u64,
    cpus: Vec<usize>,
    idle: BTreeMap<usize, Vec<(u32, String)>>,
    freq: Result<FreqSource, String>,
    power: Result<Vec<PowerState>, String>,
    /// Whether MSR_SMI_COUNT can be read, or why not.
    smi: Result<(), String>,
    thermal: Vec<(String, String)>,
    prev: Option<Snapshot>,
    series: Vec<Sample>,
    /// Whether `series` keeps every sample (a run's result) or only the last one (the monitor,
    /// which streams its samples and runs for months).
    keep_series: bool,
}

impl Sampler {
    /// Find the sources of this system (through `sys`).
    pub fn new(sys: &Sys, period_ns: u64) -> Sampler {
        let cpus: Vec<usize> = sys
            .possible_cpus()
            .or_else(|_| sys.online_cpus())
            .map(|l| l.cpus().iter().map(|&c| c as usize).collect())
            .unwrap_or_default();
        let mut idle = BTreeMap::new();
        for &cpu in &cpus {
            let dir = format!("{CPU_DIR}/cpu{cpu}/cpuidle");
            let states: Vec<(u32, String)> = sys
                .numbered(&dir, "state")
                .into_iter()
                .map(|n| {
                    let name = sys
                        .read_trim(&format!("{dir}/state{n}/name"))
                        .unwrap_or_else(|_| format!("state{n}"));
                    (n, name)
                })
                .collect();
            if !states.is_empty() {
                idle.insert(cpu, states);
            }
        }
        let freq = if cpus
            .iter()
            .any(|c| sys.exists(&format!("{CPU_DIR}/cpu{c}/cpufreq/scaling_cur_freq")))
        {
            Ok(FreqSource::Cpufreq)
        } else if sys
            .read("/proc/cpuinfo")
            .map(|t| !cpuinfo_mhz(&t).is_empty())
            .unwrap_or(false)
        {
            Ok(FreqSource::Cpuinfo)
        } else {
            Err("no cpufreq scaling_cur_freq and no \"cpu MHz\" in /proc/cpuinfo".to_string())
        };
        let thermal = sys
            .numbered("/sys/class/thermal", "thermal_zone")
            .into_iter()
            .filter_map(|n| {
                let dir = format!("/sys/class/thermal/thermal_zone{n}");
                let temp = format!("{dir}/temp");
                sys.read_trim(&temp).ok()?.parse::<i64>().ok()?;
                let kind = sys
                    .read_trim(&format!("{dir}/type"))
                    .unwrap_or_else(|_| format!("thermal_zone{n}"));
                Some((kind, temp))
            })
            .collect();
        let online: Vec<u32> = sys
            .online_cpus()
            .map(|l| l.cpus().to_vec())
            .unwrap_or_default();
        Sampler {
            sys: sys.clone(),
            period_ns,
            power: find_power(sys, &cpus),
            smi: sys.smi_counts(&online).map(|_| ()),
            cpus,
            idle,
            freq,
            thermal,
            prev: None,
            series: Vec::new(),
            keep_series: true,
        }
    }

    /// Keep only the last sample instead of the whole series (for a sampler that runs without
    /// end and hands each sample on: its memory stays bounded; `finish` then summarises only
    /// that last period).
    pub fn keep_only_last(&mut self) {
        self.keep_series = false;
        self.series.clear();
        self.series.shrink_to_fit();
    }

    fn snapshot(&self, at_ns: u64) -> Snapshot {
        let sys = &self.sys;
        let online: Vec<usize> = sys
            .online_cpus()
            .map(|l| l.cpus().iter().map(|&c| c as usize).collect())
            .unwrap_or_else(|_| self.cpus.clone());
        let stat = sys.read("/proc/stat").map(|t| parse_stat(&t)).ok();
        let irqs = sys
            .read("/proc/interrupts")
            .map(|t| parse_per_cpu_table(&t))
            .ok();
        let softirqs = sys
            .read("/proc/softirqs")
            .map(|t| parse_per_cpu_table(&t))
            .ok();
        let mhz = match self.freq {
            Ok(FreqSource::Cpuinfo) => sys.read("/proc/cpuinfo").map(|t| cpuinfo_mhz(&t)).ok(),
            _ => None,
        };
        let mut cpus = BTreeMap::new();
        for &cpu in &online {
            let mut snap = CpuSnap {
                stat: stat.as_ref().and_then(|s| s.get(&cpu).copied()),
                irqs: irqs.as_ref().and_then(|s| s.get(&cpu).copied()),
                softirqs: softirqs.as_ref().and_then(|s| s.get(&cpu).copied()),
                smi: match (&self.smi, u32::try_from(cpu)) {
                    (Ok(()), Ok(c)) => sys.smi_count(c).ok(),
                    _ => None,
                },
                ..CpuSnap::default()
            };
            if let Some(states) = self.idle.get(&cpu) {
                for (n, _) in states {
                    let dir = format!("{CPU_DIR}/cpu{cpu}/cpuidle/state{n}");
                    snap.idle_time
                        .push(sys.read_u64(&format!("{dir}/time")).unwrap_or(0));
                    snap.idle_usage
                        .push(sys.read_u64(&format!("{dir}/usage")).unwrap_or(0));
                }
            }
            snap.freq_khz = match self.freq {
                Ok(FreqSource::Cpufreq) => {
                    sys.read_u64(&format!("{CPU_DIR}/cpu{cpu}/cpufreq/scaling_cur_freq"))
                }
                Ok(FreqSource::Cpuinfo) => mhz
                    .as_ref()
                    .and_then(|m| m.get(&cpu))
                    .map(|mhz| (mhz * 1000.0).round() as u64),
                Err(_) => None,
            };
            cpus.insert(cpu, snap);
        }
        let power = match &self.power {
            Ok(sources) => sources.iter().map(|s| read_power(sys, &s.probe)).collect(),
            Err(_) => Vec::new(),
        };
        let temps = self
            .thermal
            .iter()
            .map(|(_, rel)| {
                sys.read_trim(rel)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .map(|m| m as f64 / 1000.0)
            })
            .collect();
        Snapshot {
            at_ns,
            cpus,
            power,
            temps,
        }
    }

    /// Names of the power sources, in the order of [`Sample::power_w`] (empty when none).
    pub fn power_names(&self) -> Vec<String> {
        match &self.power {
            Ok(sources) => sources.iter().map(|s| s.name.clone()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Why there is no power source, if there is none.
    pub fn power_unavailable(&self) -> Option<&str> {
        self.power.as_ref().err().map(String::as_str)
    }

    /// Names of the thermal zones, in the order of [`Sample::temp_c`].
    pub fn thermal_names(&self) -> Vec<String> {
        self.thermal.iter().map(|(z, _)| z.clone()).collect()
    }

    /// Names of the idle states per CPU.
    pub fn idle_states(&self) -> Vec<CpuIdleStates> {
        self.idle
            .iter()
            .map(|(&cpu, states)| CpuIdleStates {
                cpu,
                states: states.iter().map(|(_, n)| n.clone()).collect(),
            })
            .collect()
    }

    /// Take the first snapshot (the baseline the first sample is measured against).
    pub fn start(&mut self, at_ns: u64) {
        self.prev = Some(self.snapshot(at_ns));
    }

    /// Read a snapshot at `at_ns` (any monotonic origin, the same as `start`'s) and record the
    /// period since the previous one. Without a baseline this takes one and records nothing.
    pub fn sample(&mut self, at_ns: u64) -> Option<&Sample> {
        let Some(prev) = self.prev.take() else {
            self.start(at_ns);
            return None;
        };
        let cur = self.snapshot(at_ns);
        let dt_ns = at_ns.saturating_sub(prev.at_ns);
        let mut sample = Sample {
            at_ns,
            dt_ns,
            ..Sample::default()
        };
        for &cpu in &self.cpus {
            let (Some(a), Some(b)) = (prev.cpus.get(&cpu), cur.cpus.get(&cpu)) else {
                sample.cpus.push(CpuSample {
                    cpu,
                    online: false,
                    ..CpuSample::default()
                });
                continue;
            };
            let mut s = CpuSample {
                cpu,
                online: true,
                ..CpuSample::default()
            };
            if let (Some(x), Some(y)) = (a.stat, b.stat) {
                let d: Vec<u64> = (0..8).map(|i| y[i].saturating_sub(x[i])).collect();
                let total: u64 = d.iter().sum();
                let busy = d[0] + d[1] + d[2] + d[5] + d[6] + d[7];
                if total > 0 {
                    s.util_pct = Some(100.0 * busy as f64 / total as f64);
                    s.steal_pct = Some(100.0 * d[7] as f64 / total as f64);
                }
            }
            if let (Some(x), Some(y)) = (a.irqs, b.irqs) {
                s.irqs = Some(y.saturating_sub(x));
            }
            if let (Some(x), Some(y)) = (a.softirqs, b.softirqs) {
                s.softirqs = Some(y.saturating_sub(x));
            }
            if let (Some(x), Some(y)) = (a.smi, b.smi) {
                // MSR_SMI_COUNT is 32 bits wide and wraps.
                s.smis = Some(counter_delta(x, y, u64::from(u32::MAX)).0);
            }
            if a.idle_time.len() == b.idle_time.len() && !b.idle_time.is_empty() {
                s.idle_time_us = zip_sub(&a.idle_time, &b.idle_time);
                s.idle_usage = zip_sub(&a.idle_usage, &b.idle_usage);
            }
            // The frequency read at the end of the period stands for the period.
            s.freq_khz = b.freq_khz;
            sample.cpus.push(s);
        }
        // An energy counter that did not move over a period gives no reading, not 0 W: a meter
        // that counts moves within a millisecond, and one that stands still (a virtual
        // machine's perf power events may) does not measure what the system draws.
        if let Ok(sources) = &mut self.power {
            for (i, source) in sources.iter_mut().enumerate() {
                let a = prev.power.get(i).copied().flatten();
                let b = cur.power.get(i).copied().flatten();
                let watts = match (&source.probe, a, b) {
                    (
                        PowerProbe::Rapl { max_range_uj, .. },
                        Some(PowerReading::Counter(x)),
                        Some(PowerReading::Counter(y)),
                    ) => {
                        let (delta, wrapped) = counter_delta(x, y, *max_range_uj);
                        source.wraps += u64::from(wrapped);
                        let joules = delta as f64 / 1e6;
                        (dt_ns > 0 && delta > 0).then(|| joules / (dt_ns as f64 / 1e9))
                    }
                    (
                        PowerProbe::Perf { scale, .. },
                        Some(PowerReading::Counter(x)),
                        Some(PowerReading::Counter(y)),
                    ) => {
                        let joules = y.wrapping_sub(x) as f64 * scale;
                        (dt_ns > 0 && y != x).then(|| joules / (dt_ns as f64 / 1e9))
                    }
                    (_, _, Some(PowerReading::Watts(w))) => Some(w),
                    _ => None,
                };
                sample.power_w.push(watts);
            }
        }
        sample.temp_c = cur.temps.clone();
        self.prev = Some(cur);
        if !self.keep_series {
            self.series.clear();
        }
        self.series.push(sample);
        self.series.last()
    }

    /// The series and its summary.
    pub fn finish(self) -> Samples {
        let idle_states = self.idle_states();
        let summary = summarize(&self.series);
        let silent = |(i, s): (usize, &PowerState)| {
            let what = match s.probe {
                PowerProbe::Rapl { .. } | PowerProbe::Perf { .. } => {
                    "its energy counter stood still"
                }
                PowerProbe::Hwmon { .. } => "not readable",
                PowerProbe::Battery { .. } => "the battery was not discharging",
            };
            summary
                .power
                .get(i)
                .is_none_or(|p| p.0.is_none())
                .then(|| format!("{} ({what})", s.name))
        };
        let covered_ns: u64 = self.series.iter().map(|s| s.dt_ns).sum();
        let power = match self.power {
            Ok(sources) if covered_ns > 0 => {
                let none: Vec<String> = sources.iter().enumerate().filter_map(silent).collect();
                if none.len() == sources.len() {
                    Err(format!(
                        "no power meter gave a reading in {:.1} s: {}",
                        covered_ns as f64 / 1e9,
                        none.join(", ")
                    ))
                } else {
                    Ok(sources)
                }
            }
            other => other,
        };
        let power_sources = match power {
            Ok(sources) => Field::Value(
                sources
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let (avg_w, energy_j) = summary.power.get(i).copied().unwrap_or_default();
                        PowerSource {
                            name: s.name,
                            avg_w,
                            energy_j,
                            wraps: s.wraps,
                        }
                    })
                    .collect(),
            ),
            Err(why) => Field::unavailable(why),
        };
        let thermal = summary.thermal(self.thermal.iter().map(|(zone, _)| zone));
        let cpus = summary.cpus;
        Samples {
            period_ns: self.period_ns,
            sampler_cpus: Vec::new(),
            sampler_cpu_time_ns: 0,
            idle_states,
            power_sources,
            thermal_zones: self.thermal.iter().map(|(z, _)| z.clone()).collect(),
            thermal_unavailable: self.thermal.is_empty().then(|| {
                "no thermal zone with a readable temp under /sys/class/thermal".to_string()
            }),
            frequency: match self.freq {
                Ok(FreqSource::Cpufreq) => Field::Value("cpufreq scaling_cur_freq".into()),
                Ok(FreqSource::Cpuinfo) => Field::Value(
                    "/proc/cpuinfo \"cpu MHz\" (no cpufreq; may be a fixed nominal value)".into(),
                ),
                Err(why) => Field::unavailable(why),
            },
            smi: Some(match self.smi {
                Ok(()) => Field::Value(SMI_SOURCE.into()),
                Err(why) => Field::unavailable(why),
            }),
            cpus,
            thermal,
            series: self.series,
        }
    }
}

/// A stretch of samples summed up: per CPU, per power source `(avg W, J)`, per thermal zone
/// `(avg °C, max °C)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesSummary {
    pub cpus: Vec<CpuSummary>,
    pub power: Vec<(Option<f64>, Option<f64>)>,
    pub temps: Vec<Option<(f64, f64)>>,
}

impl SeriesSummary {
    /// The thermal zones, named in sampling order by `zones`, with their average and highest
    /// temperature; a zone with no reading in the stretch is left out.
    pub fn thermal<'a>(&self, zones: impl IntoIterator<Item = &'a String>) -> Vec<ThermalSummary> {
        zones
            .into_iter()
            .zip(&self.temps)
            .filter_map(|(zone, t)| {
                t.map(|(avg_c, max_c)| ThermalSummary {
                    zone: zone.clone(),
                    avg_c,
                    max_c,
                })
            })
            .collect()
    }
}

/// Sum up samples (a whole run, or one monitoring window). Offline periods count for nothing;
/// rates and shares are over the time each value was available.
pub fn summarize(series: &[Sample]) -> SeriesSummary {
    #[derive(Default)]
    struct Acc {
        online_ns: u64,
        freq: (f64, u64),
        util: (f64, u64),
        steal: (f64, u64),
        irqs: (u64, u64),
        softirqs: (u64, u64),
        smis: Option<u64>,
        idle_us: Vec<u64>,
        idle_n: Vec<u64>,
    }
    let mut accs: BTreeMap<usize, Acc> = BTreeMap::new();
    let n_power = series.iter().map(|s| s.power_w.len()).max().unwrap_or(0);
    let n_temp = series.iter().map(|s| s.temp_c.len()).max().unwrap_or(0);
    let mut power = vec![(0.0f64, 0u64); n_power];
    let mut temps = vec![(0.0f64, f64::MIN, 0u64); n_temp];
    for s in series {
        let dt = s.dt_ns;
        for c in &s.cpus {
            let a = accs.entry(c.cpu).or_default();
            if !c.online {
                continue;
            }
            a.online_ns += dt;
            let weighted = |acc: &mut (f64, u64), v: Option<f64>| {
                if let Some(v) = v {
                    acc.0 += v * dt as f64;
                    acc.1 += dt;
                }
            };
            weighted(&mut a.freq, c.freq_khz.map(|f| f as f64));
            weighted(&mut a.util, c.util_pct);
            weighted(&mut a.steal, c.steal_pct);
            if let Some(n) = c.irqs {
                a.irqs.0 += n;
                a.irqs.1 += dt;
            }
            if let Some(n) = c.softirqs {
                a.softirqs.0 += n;
                a.softirqs.1 += dt;
            }
            if let Some(n) = c.smis {
                *a.smis.get_or_insert(0) += n;
            }
            add_into(&mut a.idle_us, &c.idle_time_us);
            add_into(&mut a.idle_n, &c.idle_usage);
        }
        for (i, w) in s.power_w.iter().enumerate() {
            if let Some(w) = w {
                power[i].0 += w * dt as f64 / 1e9;
                power[i].1 += dt;
            }
        }
        for (i, t) in s.temp_c.iter().enumerate() {
            if let Some(t) = t {
                temps[i].0 += t;
                temps[i].1 = temps[i].1.max(*t);
                temps[i].2 += 1;
            }
        }
    }
    let avg = |(sum, ns): (f64, u64)| (ns > 0).then(|| sum / ns as f64);
    let rate = |(n, ns): (u64, u64)| (ns > 0).then(|| n as f64 / (ns as f64 / 1e9));
    let cpus = accs
        .into_iter()
        .map(|(cpu, a)| {
            let secs = a.online_ns as f64 / 1e9;
            CpuSummary {
                cpu,
                avg_freq_khz: avg(a.freq).map(|f| f.round() as u64),
                util_pct: avg(a.util),
                steal_pct: avg(a.steal),
                irqs_per_s: rate(a.irqs),
                softirqs_per_s: rate(a.softirqs),
                smis: a.smis,
                idle_residency_pct: a
                    .idle_us
                    .iter()
                    .map(|&us| {
                        if a.online_ns == 0 {
                            0.0
                        } else {
                            100.0 * us as f64 * 1000.0 / a.online_ns as f64
                        }
                    })
                    .collect(),
                idle_entries_per_s: a
                    .idle_n
                    .iter()
                    .map(|&n| if secs > 0.0 { n as f64 / secs } else { 0.0 })
                    .collect(),
            }
        })
        .collect();
    SeriesSummary {
        cpus,
        power: power
            .into_iter()
            .map(|(j, ns)| {
                if ns == 0 {
                    (None, None)
                } else {
                    (Some(j / (ns as f64 / 1e9)), Some(j))
                }
            })
            .collect(),
        temps: temps
            .into_iter()
            .map(|(sum, max, n)| (n > 0).then(|| (sum / n as f64, max)))
            .collect(),
    }
}

fn zip_sub(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| y.saturating_sub(*x)).collect()
}

fn add_into(acc: &mut Vec<u64>, d: &[u64]) {
    if acc.len() < d.len() {
        acc.resize(d.len(), 0);
    }
    for (a, x) in acc.iter_mut().zip(d) {
        *a += x;
    }
}

/// The increase of an energy counter that wraps at `max_range` (RAPL `max_energy_range_uj`):
/// `(delta, wrapped)`.
pub fn counter_delta(prev: u64, cur: u64, max_range: u64) -> (u64, bool) {
    if cur >= prev {
        (cur - prev, false)
    } else {
        // The counter runs 0..=max_range and starts again at 0.
        (max_range.saturating_sub(prev) + cur + 1, true)
    }
}

/// Per-CPU counters from `/proc/stat`: user nice system idle iowait irq softirq steal.
pub fn parse_stat(text: &str) -> BTreeMap<usize, [u64; 8]> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(label) = f.next() else { continue };
        let Some(cpu) = label
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let mut v = [0u64; 8];
        for slot in v.iter_mut() {
            *slot = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        }
        out.insert(cpu, v);
    }
    out
}

/// Per-CPU sums of `/proc/interrupts` or `/proc/softirqs`. Columns follow the header
/// (`CPU0 CPU1 …`, online CPUs only); rows with fewer numbers (ERR, MIS) are skipped.
pub fn parse_per_cpu_table(text: &str) -> BTreeMap<usize, u64> {
    crate::procfs::parse_interrupts(text).per_cpu_totals()
}

/// "cpu MHz" per processor from `/proc/cpuinfo`.
pub fn cpuinfo_mhz(text: &str) -> BTreeMap<usize, f64> {
    let mut out = BTreeMap::new();
    let mut processor = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => processor = v.trim().parse().ok(),
            "cpu MHz" => {
                if let (Some(p), Ok(mhz)) = (processor, v.trim().parse::<f64>()) {
                    out.insert(p, mhz);
                }
            }
            _ => {}
        }
    }
    out
}

/// `event=0x02` (and optional `,umask=…` ignored by the power PMU) → config value.
pub fn parse_perf_event(text: &str) -> Option<u64> {
    text.trim().split(',').find_map(|kv| {
        let v = kv.trim().strip_prefix("event=")?;
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

/// The power meters of the system, as the samplers find them: RAPL zones (powercap
/// `intel-rapl:*`/`amd-rapl:*`, by their `name`), perf `power` events where powercap is absent,
/// hwmon power sensors (`power*_input`/`power*_average`, by the chip's `name`) and batteries that
/// report `power_now` or `current_now` and `voltage_now`. With none, the reason lists what was
/// looked at, prefixed with `none found: `.
pub fn power_meters(sys: &Sys) -> Field<Vec<PowerMeter>> {
    let cpus: Vec<usize> = sys
        .online_cpus()
        .map(|l| l.cpus().iter().map(|&c| c as usize).collect())
        .unwrap_or_default();
    match find_power(sys, &cpus) {
        Ok(found) => Field::Value(
            found
                .into_iter()
                .map(|s| PowerMeter {
                    name: s.name,
                    source: s.source,
                })
                .collect(),
        ),
        Err(why) => Field::unavailable(format!("none found: {why}")),
    }
}

/// Whether a power meter gives readings here: the samplers' sources read twice, `wait_ns`
/// apart. `Err` says why none did (none found, or each stood still, as a virtual machine's perf
/// power events may, or a fixture tree's files do).
pub fn power_reads(sys: &Sys, wait_ns: u64) -> Result<(), String> {
    let mut s = Sampler::new(sys, wait_ns);
    if let Some(why) = s.power_unavailable() {
        return Err(format!("none found: {why}"));
    }
    s.start(0);
    std::thread::sleep(std::time::Duration::from_nanos(wait_ns));
    if s.sample(wait_ns)
        .is_some_and(|x| x.power_w.iter().any(Option::is_some))
    {
        return Ok(());
    }
    match s.finish().power_sources.reason() {
        Some(why) => Err(why.to_string()),
        None => Ok(()),
    }
}

/// Find the power sources (the one discovery behind the samplers and [`power_meters`]).
fn find_power(sys: &Sys, cpus: &[usize]) -> Result<Vec<PowerState>, String> {
    let mut found = Vec::new();
    let mut why = Vec::new();
    // RAPL through powercap: top-level zones and their subzones.
    let zones: Vec<String> = sys
        .list_dir("/sys/class/powercap")
        .into_iter()
        .filter(|z| z.starts_with("intel-rapl:") || z.starts_with("amd-rapl:"))
        .collect();
    for zone in &zones {
        let dir = format!("/sys/class/powercap/{zone}");
        let energy = format!("{dir}/energy_uj");
        if sys.read_u64(&energy).is_none() {
            why.push(format!("{energy} not readable"));
            continue;
        }
        let name = sys
            .read_trim(&format!("{dir}/name"))
            .unwrap_or_else(|_| zone.clone());
        let max_range_uj = sys
            .read_u64(&format!("{dir}/max_energy_range_uj"))
            .unwrap_or(u64::MAX);
        found.push(PowerState {
            name: format!("rapl:{name}({zone})"),
            source: energy.clone(),
            probe: PowerProbe::Rapl {
                energy,
                max_range_uj,
            },
            wraps: 0,
        });
    }
    if zones.is_empty() {
        why.push("no RAPL zones in /sys/class/powercap".into());
        // perf power events are the fallback when powercap is absent.
        match perf_power(sys, cpus) {
            Ok(mut p) => found.append(&mut p),
            Err(e) => why.push(e),
        }
    }
    for n in sys.numbered("/sys/class/hwmon", "hwmon") {
        let dir = format!("/sys/class/hwmon/hwmon{n}");
        let chip = sys
            .read_trim(&format!("{dir}/name"))
            .unwrap_or_else(|_| format!("hwmon{n}"));
        for file in sys.list_dir(&dir) {
            let is_power = file.starts_with("power")
                && (file.ends_with("_input") || file.ends_with("_average"));
            if !is_power {
                continue;
            }
            let rel = format!("{dir}/{file}");
            if sys.read_u64(&rel).is_some() {
                let label = file.trim_end_matches("_input").trim_end_matches("_average");
                found.push(PowerState {
                    name: format!("hwmon:{chip}/{label}"),
                    source: rel.clone(),
                    probe: PowerProbe::Hwmon { file: rel },
                    wraps: 0,
                });
            }
        }
    }
    if !found
        .iter()
        .any(|s| matches!(s.probe, PowerProbe::Hwmon { .. }))
    {
        why.push("no hwmon power sensors".into());
    }
    let mut battery = false;
    for supply in sys.list_dir("/sys/class/power_supply") {
        let dir = format!("/sys/class/power_supply/{supply}");
        if sys.read_trim(&format!("{dir}/type")).ok().as_deref() != Some("Battery") {
            continue;
        }
        battery = true;
        let readable = |f: &str| sys.read_u64(&format!("{dir}/{f}")).is_some();
        let source = if readable("power_now") {
            format!("{dir}/power_now")
        } else if readable("current_now") && readable("voltage_now") {
            format!("{dir}/current_now × voltage_now")
        } else {
            why.push(format!(
                "battery {supply} reports neither power_now nor current_now and voltage_now"
            ));
            continue;
        };
        found.push(PowerState {
            name: format!("battery:{supply}"),
            source,
            probe: PowerProbe::Battery { dir },
            wraps: 0,
        });
    }
    if !battery {
        why.push("no battery".into());
    }
    if found.is_empty() {
        Err(why.join("; "))
    } else {
        Ok(found)
    }
}

fn read_power(sys: &Sys, probe: &PowerProbe) -> Option<PowerReading> {
    match probe {
        PowerProbe::Rapl { energy, .. } => sys.read_u64(energy).map(PowerReading::Counter),
        PowerProbe::Perf { fd, .. } => {
            let mut buf = [0u8; 8];
            // SAFETY: reading 8 bytes into a buffer of 8 bytes from a perf event fd we own.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
            (n == 8).then(|| PowerReading::Counter(u64::from_ne_bytes(buf)))
        }
        PowerProbe::Hwmon { file } => sys
            .read_u64(file)
            .map(|uw| PowerReading::Watts(uw as f64 / 1e6)),
        PowerProbe::Battery { dir } => {
            // Only a discharging battery measures what the system draws.
            if sys.read_trim(&format!("{dir}/status")).ok()?.as_str() != "Discharging" {
                return None;
            }
            let uw = match sys.read_u64(&format!("{dir}/power_now")) {
                Some(p) => p as f64,
                None => {
                    let ua = sys.read_u64(&format!("{dir}/current_now"))? as f64;
                    let uv = sys.read_u64(&format!("{dir}/voltage_now"))? as f64;
                    ua * uv / 1e6
                }
            };
            Some(PowerReading::Watts(uw / 1e6))
        }
    }
}

/// Energy events of the perf `power` PMU (`/sys/bus/event_source/devices/power`).
fn perf_power(sys: &Sys, cpus: &[usize]) -> Result<Vec<PowerState>, String> {
    let base = "/sys/bus/event_source/devices/power";
    let Some(pmu_type) = sys.read_u64(&format!("{base}/type")) else {
        return Err("no perf power PMU".into());
    };
    if !sys.is_live() {
        return Err("perf power events are only opened on the live system".into());
    }
    let cpu = cpus.first().copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for event in sys.list_dir(&format!("{base}/events")) {
        if !event.starts_with("energy-") || event.contains('.') {
            continue;
        }
        let Some(config) = sys
            .read(&format!("{base}/events/{event}"))
            .ok()
            .and_then(|t| parse_perf_event(&t))
        else {
            continue;
        };
        let scale: f64 = sys
            .read_trim(&format!("{base}/events/{event}.scale"))
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2.3283064365386963e-10);
        match open_perf_counter(pmu_type as u32, config, cpu) {
            Ok(fd) => out.push(PowerState {
                name: format!("perf:{event}"),
                source: format!("perf event power/{event}/ ({base}/events/{event})"),
                probe: PowerProbe::Perf { fd, scale },
                wraps: 0,
            }),
            Err(e) => errors.push(format!("perf {event}: {e}")),
        }
    }
    if out.is_empty() {
        Err(if errors.is_empty() {
            "perf power PMU has no energy events".into()
        } else {
            errors.join("; ")
        })
    } else {
        Ok(out)
    }
}

/// `PERF_FLAG_FD_CLOEXEC` from linux/perf_event.h.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

fn open_perf_counter(pmu_type: u32, config: u64, cpu: usize) -> std::io::Result<OwnedFd> {
    // perf_event_attr, zeroed: type (u32), size (u32), config (u64); counting starts enabled.
    let mut attr = [0u64; 16];
    attr[0] = u64::from(pmu_type) | ((std::mem::size_of_val(&attr) as u64) << 32);
    attr[1] = config;
    // SAFETY: perf_event_open with a zero-initialized attr of the size we pass; pid -1 and a CPU
    // count system-wide on that CPU's package.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1i32,
            cpu as i32,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor returned by the kernel and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A sampler running on its own thread until stopped.
///
/// The series begins and ends on the thread that owns it, not on the sampling thread: the
/// baseline is read in [`spawn`](Self::spawn) and the last, partial sample in
/// [`end`](Self::end). A sampling thread at normal priority can wait a second for a CPU beside
/// real-time load; the series still covers exactly the time between the two calls.
pub struct SamplerThread {
    stop: mpsc::Sender<()>,
    handle: std::thread::JoinHandle<u64>,
    /// The lock the sampling thread and the caller share. It lends the holder a waiter's priority:
    /// the sampling thread runs at normal priority, and a real-time load could keep it off the CPUs
    /// in the middle of a sample while the caller, above the load, waited to end the series (the
    /// last sample then came up to half a second after the measurement). A panic on the sampling
    /// thread leaves the sampler whole: each sample is pushed at once.
    shared: Arc<PiMutex<Shared>>,
    origin: Instant,
    /// CPU time the owning thread spent on the baseline and the last sample.
    owner_cpu_ns: u64,
    /// The CPUs the sampling thread is confined to.
    cpus: Vec<u32>,
    power_names: Vec<String>,
    idle_states: Vec<CpuIdleStates>,
}

/// The sampler and whether its series has ended (after which the thread samples no more).
struct Shared {
    sampler: Sampler,
    ended: bool,
}

impl SamplerThread {
    /// Start sampling every `period` on a thread confined to `cpus` (the housekeeping CPUs;
    /// empty: no confinement) at normal priority. Sample times count from `origin`.
    pub fn spawn(
        sys: &Sys,
        period: Duration,
        cpus: &[u32],
        origin: Instant,
    ) -> std::io::Result<SamplerThread> {
        Self::spawn_streaming(sys, period, cpus, origin, None, true)
    }

    /// [`spawn`](Self::spawn), also sending every sample to `each` as it is taken; with
    /// `keep_series` false the series holds only the last sample (a sampler without end).
    pub fn spawn_streaming(
        sys: &Sys,
        period: Duration,
        cpus: &[u32],
        origin: Instant,
        each: Option<mpsc::Sender<Sample>>,
        keep_series: bool,
    ) -> std::io::Result<SamplerThread> {
        let owner_cpu0 = crate::thread::cpu_time_ns();
        let mut sampler = Sampler::new(sys, period.as_nanos() as u64);
        if !keep_series {
            sampler.keep_only_last();
        }
        let power_names = sampler.power_names();
        let idle_states = sampler.idle_states();
        // The baseline is read here, now: the series begins where the caller starts it.
        sampler.start(since(origin, Instant::now()));
        let owner_cpu_ns = crate::thread::cpu_time_ns().saturating_sub(owner_cpu0);
        let shared = Arc::new(PiMutex::new(Shared {
            sampler,
            ended: false,
        }));
        let (stop, rx) = mpsc::channel::<()>();
        let confined = cpus.to_vec();
        let on_thread = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("latlab-sampler".into())
            .spawn(move || {
                crate::thread::keep_on(&confined);
                let cpu0 = crate::thread::cpu_time_ns();
                let mut next = Instant::now() + period;
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            let mut shared = on_thread.lock();
                            if shared.ended {
                                break;
                            }
                            let at = since(origin, Instant::now());
                            if let (Some(s), Some(tx)) = (shared.sampler.sample(at), each.as_ref())
                            {
                                let _ = tx.send(s.clone());
                            }
                            drop(shared);
                            next += period;
                            // After a long stall, do not fire a burst of catch-up samples.
                            if next < Instant::now() {
                                next = Instant::now() + period;
                            }
                        }
                        _ => break,
                    }
                }
                crate::thread::cpu_time_ns().saturating_sub(cpu0)
            })?;
        Ok(SamplerThread {
            stop,
            handle,
            shared,
            origin,
            owner_cpu_ns,
            cpus: cpus.to_vec(),
            power_names,
            idle_states,
        })
    }

    /// End the series now: take the last, partial sample on this thread, so that the series
    /// covers the time up to this call whether or not the sampling thread gets a CPU. Samples
    /// are taken no more; a second call does nothing.
    pub fn end(&mut self) {
        let cpu0 = crate::thread::cpu_time_ns();
        let mut shared = self.shared.lock();
        if !shared.ended {
            shared.ended = true;
            shared.sampler.sample(since(self.origin, Instant::now()));
        }
        drop(shared);
        self.owner_cpu_ns += crate::thread::cpu_time_ns().saturating_sub(cpu0);
    }

    /// Names of the power sources, in the order of [`Sample::power_w`].
    pub fn power_names(&self) -> &[String] {
        &self.power_names
    }

    /// Names of the idle states per CPU.
    pub fn idle_states(&self) -> &[CpuIdleStates] {
        &self.idle_states
    }

    /// Stop: [`end`](Self::end) the series if it has not ended, wait for the sampling thread
    /// and return the series.
    pub fn stop(mut self) -> Samples {
        self.end();
        let _ = self.stop.send(());
        let thread_cpu_ns = match self.handle.join() {
            Ok(ns) => ns,
            Err(p) => std::panic::resume_unwind(p),
        };
        let shared = match Arc::try_unwrap(self.shared) {
            Ok(m) => m.into_inner(),
            Err(_) => unreachable!("the sampling thread has ended"),
        };
        let mut samples = shared.sampler.finish();
        samples.sampler_cpus = self.cpus;
        samples.sampler_cpu_time_ns = thread_cpu_ns + self.owner_cpu_ns;
        samples
    }
}

/// Nanoseconds from `origin` to `t` (0 before it).
fn since(origin: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(origin).as_nanos() as u64
}
