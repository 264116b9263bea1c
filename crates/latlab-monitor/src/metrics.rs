//! `/metrics` in the Prometheus text exposition format (version 0.0.4), computed from the store.
//!
//! Every value comes from the store: the series' running totals (kept with every window set
//! stored, so a scrape reads one row per CPU, not every window) and the newest window. The daemon
//! and `latlab serve --db` expose the same numbers and a scrape always agrees with the store:
//! counters count over the whole series since it began, and `latlab_monitor_last_window_index`
//! names the last window they include.

use latlab_store::{SeriesId, SeriesTotals, Store, StoreError};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Upper bounds of the classic histogram buckets (1 µs … 100 ms), ns.
pub const BUCKETS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];
/// The same bounds as Prometheus `le` label values (seconds).
const LE: [&str; 16] = [
    "1e-06", "2e-06", "5e-06", "1e-05", "2e-05", "5e-05", "0.0001", "0.0002", "0.0005", "0.001",
    "0.002", "0.005", "0.01", "0.02", "0.05", "0.1",
];

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub use latlab_store::END_OF_TIME;

#[derive(Debug, Clone, Default)]
struct CpuAcc {
    /// Cumulative counts per bound (`le`).
    buckets: [u64; 16],
    count: u64,
    sum_ns: u128,
    missed: u64,
    max_ns: u64,
    /// The newest window's worst and 99.9th percentile; `None` when the CPU was not measured
    /// in it (a daemon restarted with fewer CPUs): no gauge then, as for the frequency.
    last_max_ns: Option<u64>,
    last_p99_9_ns: Option<u64>,
    freq_khz: Option<u64>,
    idle_time_s: Vec<f64>,
    idle_usage: Vec<f64>,
}

/// What the series' configuration says about the system (written by the daemon).
#[derive(Debug, Clone, Default)]
struct Info {
    hostname: String,
    kernel: String,
    preempt: String,
    profile: String,
    method: String,
    interval_ns: u64,
}

#[derive(Debug, Clone, Default)]
struct SeriesAcc {
    name: String,
    window_ns: u64,
    /// The series' totals as last read (`sets` 0 before the first), without their per-CPU part:
    /// that is `cpus`.
    totals: SeriesTotals,
    cpus: BTreeMap<u32, CpuAcc>,
    idle_names: BTreeMap<usize, Vec<String>>,
    info: Info,
    /// Known only from the window the running daemon measured last (its store never read):
    /// only the window gauges and the last window's end are said of it, no counter.
    measured_only: bool,
}

/// The running totals of every series in a store.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    series: BTreeMap<i64, SeriesAcc>,
}

fn info_of(config: &serde_json::Value) -> Info {
    let s = |k: &str| {
        config
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let m = config.get("measure");
    Info {
        hostname: s("hostname"),
        kernel: s("kernel"),
        preempt: s("preempt"),
        profile: s("profile"),
        method: m
            .and_then(|m| m.get("method"))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string(),
        interval_ns: m
            .and_then(|m| m.get("interval_ns"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
    }
}

/// What the running daemon knows that its store does not.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub series: String,
    /// The profile it holds (`none`).
    pub profile: String,
    pub windows_queued: u64,
    pub windows_lost: u64,
    pub windows_kept: u64,
    /// The newest window it measured, stored or not.
    pub measured: Option<Measured>,
}

/// The newest window the running daemon measured, stored or not. While the store cannot be
/// written, the window gauges and the last window's end follow it, so alerts on latency keep
/// seeing what is measured; counters and histograms count stored windows only, and catch up
/// when the windows waiting in memory are stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub end_unix_ns: u64,
    /// The series' window length (the gauges' `window` label).
    pub window_ns: u64,
    /// Per CPU: the window's maximum and p99.9, ns.
    pub cpus: Vec<(u32, u64, u64)>,
}

impl Measured {
    pub fn of(set: &latlab_model::monitor::WindowSet, window_ns: u64) -> Measured {
        Measured {
            end_unix_ns: set.end_unix_ns,
            window_ns,
            cpus: set
                .cpus
                .iter()
                .map(|w| (w.cpu, w.histogram.max(), w.histogram.percentile(99.9)))
                .collect(),
        }
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// The series whose store was read: the ones counters and histograms are said of.
    fn counted(&self) -> impl Iterator<Item = &SeriesAcc> {
        self.series.values().filter(|s| !s.measured_only)
    }

    /// Read what the store gained since the last call, of every series or `only` the one
    /// named (the running daemon's: another series in its store may have stopped long ago, and
    /// its frozen figures would raise alerts on this daemon). Returns whether anything changed.
    pub fn refresh(&mut self, store: &Store, only: Option<&str>) -> Result<bool, StoreError> {
        let mut changed = false;
        for (id, name, window_ns) in store.list_series()? {
            if only.is_some_and(|o| o != name) {
                continue;
            }
            let acc = self.series.entry(id.0).or_default();
            acc.name = name;
            acc.window_ns = window_ns;
            let (config, idle) = store.series_meta(id)?;
            acc.info = info_of(&config);
            acc.idle_names = idle.into_iter().map(|c| (c.cpu, c.states)).collect();
            changed |= ingest(acc, store, id)?;
        }
        Ok(changed)
    }

    /// The exposition text. `live`: what the running daemon knows beyond the store (its profile
    /// overrides the stored one for its series, and a window it measured after the last one
    /// stored sets the window gauges: see [`Measured`]).
    pub fn render(&self, live: Option<&Live>) -> String {
        // A series the store has never been read for (it could not be read since the daemon
        // started): the window it measured last, alone.
        if let Some(l) = live
            && let Some(m) = &l.measured
            && !self.series.values().any(|s| s.name == l.series)
        {
            let mut view = self.clone();
            view.series.insert(
                i64::MAX,
                SeriesAcc {
                    name: l.series.clone(),
                    window_ns: m.window_ns,
                    totals: SeriesTotals {
                        last_end_unix_ns: Some(m.end_unix_ns),
                        ..SeriesTotals::default()
                    },
                    cpus: m
                        .cpus
                        .iter()
                        .map(|&(cpu, max, p99_9)| {
                            let c = CpuAcc {
                                last_max_ns: Some(max),
                                last_p99_9_ns: Some(p99_9),
                                ..CpuAcc::default()
                            };
                            (cpu, c)
                        })
                        .collect(),
                    measured_only: true,
                    ..SeriesAcc::default()
                },
            );
            return view.text(live);
        }
        let newer = live.and_then(|l| {
            let m = l.measured.as_ref()?;
            let s = self.series.values().find(|s| s.name == l.series)?;
            (m.end_unix_ns > s.totals.last_end_unix_ns.unwrap_or(0)).then_some((&l.series, m))
        });
        match newer {
            None => self.text(live),
            Some((name, m)) => {
                let mut view = self.clone();
                for s in view.series.values_mut().filter(|s| &s.name == name) {
                    s.totals.last_end_unix_ns = Some(m.end_unix_ns);
                    for &(cpu, max, p99_9) in &m.cpus {
                        if let Some(c) = s.cpus.get_mut(&cpu) {
                            c.last_max_ns = Some(max);
                            c.last_p99_9_ns = Some(p99_9);
                        }
                    }
                }
                view.text(live)
            }
        }
    }

    fn text(&self, live: Option<&Live>) -> String {
        let mut o = String::with_capacity(16 * 1024);
        self.info(
            &mut o,
            live.map(|l| (l.series.as_str(), l.profile.as_str())),
        );
        self.latency_histograms(&mut o);
        let window = true;
        self.per_cpu(
            &mut o,
            ("latlab_wakeup_latency_window_max_seconds", "gauge"),
            "Worst wake-up latency of the last closed window (the maximum a Prometheus histogram cannot carry).",
            window,
            &|c| c.last_max_ns.map(|ns| secs(u128::from(ns))),
        );
        self.per_cpu(
            &mut o,
            ("latlab_wakeup_latency_window_p99_9_seconds", "gauge"),
            "99.9th percentile of wake-up latency in the last closed window.",
            window,
            &|c| c.last_p99_9_ns.map(|ns| secs(u128::from(ns))),
        );
        self.per_cpu(
            &mut o,
            ("latlab_wakeup_latency_max_seconds", "gauge"),
            "Worst wake-up latency over the whole series.",
            !window,
            &|c| Some(secs(u128::from(c.max_ns))),
        );
        self.per_cpu(
            &mut o,
            ("latlab_missed_periods_total", "counter"),
            "Periods a measuring thread could not take because it ran too late.",
            !window,
            &|c| Some(c.missed.to_string()),
        );
        self.per_cpu(
            &mut o,
            ("latlab_cpu_frequency_hertz", "gauge"),
            "Mean clock frequency of the CPU over the last closed window (without cpufreq, \
             /proc/cpuinfo's cpu MHz, which may be a fixed nominal value).",
            !window,
            &|c| c.freq_khz.map(|f| (f * 1000).to_string()),
        );
        self.idle_states(&mut o);
        self.power(&mut o);
        self.per_series(
            &mut o,
            ("latlab_monitor_windows_total", "counter"),
            "Windows stored in the series (hourly rows count every window merged into them).",
            &|s| (!s.measured_only).then(|| s.totals.windows.to_string()),
        );
        self.per_series(
            &mut o,
            ("latlab_monitor_last_window_index", "gauge"),
            "Index of the last window the other values include.",
            &|s| s.totals.last_window_index.map(|i| i.to_string()),
        );
        self.per_series(
            &mut o,
            ("latlab_monitor_last_window_end_timestamp_seconds", "gauge"),
            "When the newest window measured ended (unix time); while the store cannot be \
             written, later than the last window the counters include.",
            &|s| s.totals.last_end_unix_ns.map(|e| secs(u128::from(e))),
        );
        self.per_series(
            &mut o,
            ("latlab_monitor_cpu_seconds_total", "counter"),
            "CPU time latlab's monitoring used (measuring threads, samplers, store; not the web server).",
            &|s| (!s.measured_only).then(|| secs(u128::from(s.totals.cost_cpu_time_ns))),
        );
        if let Some(l) = live {
            let series = esc(&l.series);
            family(
                &mut o,
                "latlab_monitor_windows_queued",
                "gauge",
                "Window sets the running daemon measured that wait in memory for the store to be \
                 writable again.",
            );
            let _ = writeln!(
                o,
                "latlab_monitor_windows_queued{{series=\"{series}\"}} {}",
                l.windows_queued
            );
            family(
                &mut o,
                "latlab_monitor_windows_lost_total",
                "counter",
                "Window sets the running daemon measured and could not store (since it started).",
            );
            let _ = writeln!(
                o,
                "latlab_monitor_windows_lost_total{{series=\"{series}\"}} {}",
                l.windows_lost
            );
            family(
                &mut o,
                "latlab_monitor_windows_in_files",
                "gauge",
                "Window sets the running daemon measured that wait in files for the store: \
                 written past the memory's bound while it could not be written, stored from \
                 them when it can be.",
            );
            let _ = writeln!(
                o,
                "latlab_monitor_windows_in_files{{series=\"{series}\"}} {}",
                l.windows_kept
            );
        }
        o
    }

    /// `latlab_build_info` and one `latlab_system_info` per series.
    fn info(&self, o: &mut String, live: Option<(&str, &str)>) {
        family(
            o,
            "latlab_build_info",
            "gauge",
            "latlab's version (always 1).",
        );
        let _ = writeln!(
            o,
            "latlab_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        family(
            o,
            "latlab_system_info",
            "gauge",
            "The measured system: host, kernel, preempt model and tuning profile (always 1).",
        );
        for s in self.counted() {
            let profile = match live {
                Some((name, p)) if name == s.name => p.to_string(),
                _ => s.info.profile.clone(),
            };
            let _ = writeln!(
                o,
                "latlab_system_info{{series=\"{}\",hostname=\"{}\",kernel=\"{}\",preempt_model=\"{}\",profile=\"{}\",method=\"{}\",interval_seconds=\"{}\"}} 1",
                esc(&s.name),
                esc(&s.info.hostname),
                esc(&s.info.kernel),
                esc(&s.info.preempt),
                esc(&profile),
                esc(&s.info.method),
                secs(u128::from(s.info.interval_ns)),
            );
        }
    }

    /// `latlab_wakeup_latency_seconds`: one Prometheus histogram per series and CPU.
    fn latency_histograms(&self, o: &mut String) {
        family(
            o,
            "latlab_wakeup_latency_seconds",
            "histogram",
            "Timer wake-up latency of the measuring thread on each CPU, over the whole series.",
        );
        for s in self.counted() {
            for (cpu, c) in &s.cpus {
                let l = format!("series=\"{}\",cpu=\"{cpu}\"", esc(&s.name));
                for (i, le) in LE.iter().enumerate() {
                    let _ = writeln!(
                        o,
                        "latlab_wakeup_latency_seconds_bucket{{{l},le=\"{le}\"}} {}",
                        c.buckets[i]
                    );
                }
                let _ = writeln!(
                    o,
                    "latlab_wakeup_latency_seconds_bucket{{{l},le=\"+Inf\"}} {}",
                    c.count
                );
                let _ = writeln!(
                    o,
                    "latlab_wakeup_latency_seconds_sum{{{l}}} {}",
                    secs(c.sum_ns)
                );
                let _ = writeln!(o, "latlab_wakeup_latency_seconds_count{{{l}}} {}", c.count);
            }
        }
    }

    /// A family with one sample per series and CPU (labelled with the window's length when
    /// `window`), skipping CPUs without a value.
    fn per_cpu(
        &self,
        o: &mut String,
        (name, kind): (&str, &str),
        help: &str,
        window: bool,
        value: &dyn Fn(&CpuAcc) -> Option<String>,
    ) {
        family(o, name, kind, help);
        for s in self.series.values().filter(|s| window || !s.measured_only) {
            let extra = if window {
                format!(",window=\"{}s\"", secs(u128::from(s.window_ns)))
            } else {
                String::new()
            };
            for (cpu, c) in &s.cpus {
                if let Some(v) = value(c) {
                    let _ = writeln!(
                        o,
                        "{name}{{series=\"{}\",cpu=\"{cpu}\"{extra}}} {v}",
                        esc(&s.name),
                    );
                }
            }
        }
    }

    /// Time in and entries into each idle state, per series and CPU.
    fn idle_states(&self, o: &mut String) {
        for (name, help, usage) in [
            (
                "latlab_cpuidle_state_time_seconds_total",
                "Time the CPU spent in each idle state while measured.",
                false,
            ),
            (
                "latlab_cpuidle_state_usage_total",
                "Entries into each idle state while measured.",
                true,
            ),
        ] {
            family(o, name, "counter", help);
            for s in self.counted() {
                for (cpu, c) in &s.cpus {
                    let names = s.idle_names.get(&(*cpu as usize));
                    let values = if usage { &c.idle_usage } else { &c.idle_time_s };
                    for (i, v) in values.iter().enumerate() {
                        let state = names
                            .and_then(|n| n.get(i))
                            .cloned()
                            .unwrap_or_else(|| format!("state{i}"));
                        let v = if usage {
                            format!("{}", v.round())
                        } else {
                            format!("{v:.6}")
                        };
                        let _ = writeln!(
                            o,
                            "{name}{{series=\"{}\",cpu=\"{cpu}\",state=\"{i}\",name=\"{}\"}} {v}",
                            esc(&s.name),
                            esc(&state)
                        );
                    }
                }
            }
        }
    }

    /// Energy per series and power source.
    fn power(&self, o: &mut String) {
        family(
            o,
            "latlab_power_joules_total",
            "counter",
            "Energy used while measured, per power source (RAPL, hwmon, battery).",
        );
        for s in self.counted() {
            // A source whose total is 0 never gave a reading (totals kept before such sources
            // were left out hold it): no counter.
            for (source, j) in s.totals.power_j.iter().filter(|(_, j)| **j > 0.0) {
                let _ = writeln!(
                    o,
                    "latlab_power_joules_total{{series=\"{}\",source=\"{}\"}} {j:.6}",
                    esc(&s.name),
                    esc(source)
                );
            }
        }
    }

    /// A family with one sample per series, skipping series without a value.
    fn per_series(
        &self,
        o: &mut String,
        (name, kind): (&str, &str),
        help: &str,
        value: &dyn Fn(&SeriesAcc) -> Option<String>,
    ) {
        family(o, name, kind, help);
        for s in self.series.values() {
            if let Some(v) = value(s) {
                let _ = writeln!(o, "{name}{{series=\"{}\"}} {v}", esc(&s.name));
            }
        }
    }
}

fn ingest(acc: &mut SeriesAcc, store: &Store, id: SeriesId) -> Result<bool, StoreError> {
    let Some(mut t) = store.series_totals(id)? else {
        return Ok(false);
    };
    if acc.totals.sets == t.sets {
        return Ok(false);
    }
    // The newest window's values (its set is counted in the totals read: both are written in
    // one transaction, and a set stored since then waits for the next refresh).
    let newest = t.newest_start_unix_ns.unwrap_or(0);
    let mut last: BTreeMap<u32, _> = BTreeMap::new();
    for w in store.monitor_windows(id, newest, newest + 1, None)? {
        if w.start_unix_ns <= newest {
            last.insert(w.cpu, w);
        }
    }
    acc.cpus = std::mem::take(&mut t.cpus)
        .iter()
        .map(|(cpu, c)| {
            let h = &c.histogram;
            let w = last.get(cpu);
            let acc = CpuAcc {
                buckets: BUCKETS_NS.map(|le| h.count_at_or_below(le)),
                count: h.count(),
                sum_ns: u128::from(h.sum()),
                missed: c.missed,
                max_ns: h.max(),
                last_max_ns: w.map(|w| w.max_ns),
                last_p99_9_ns: w.map(|w| w.p99_9_ns),
                freq_khz: w
                    .and_then(|w| w.cpu_summary.as_ref())
                    .and_then(|s| s.avg_freq_khz),
                idle_time_s: c.idle_time_s.clone(),
                idle_usage: c.idle_usage.clone(),
            };
            (*cpu, acc)
        })
        .collect();
    acc.totals = t;
    Ok(true)
}

fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
}

/// Nanoseconds as seconds, exactly (no float rounding in the decimal text).
pub fn secs(ns: u128) -> String {
    let whole = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let f = format!("{frac:09}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// A label value escaped for the text format.
pub fn esc(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use latlab_hist::Histogram;
    use latlab_model::MeasureConfig;
    use latlab_model::samples::{CpuIdleStates, CpuSummary, PowerSource};
    use latlab_store::{MonitorWindow, SeriesConfig, SeriesSpec, WindowSet};

    fn store_with_windows() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("m.db")).unwrap();
        let st = store
            .open_series(&SeriesSpec {
                name: "host \"a\"".into(),
                window_ns: 1_000_000_000,
                config: SeriesConfig {
                    kernel: "6.1".into(),
                    preempt: "full".into(),
                    profile: "lowlatency".into(),
                    ..SeriesConfig::new(
                        &Default::default(),
                        MeasureConfig {
                            interval_ns: 200_000,
                            ..Default::default()
                        },
                    )
                },
                system: None,
                idle_states: vec![CpuIdleStates {
                    cpu: 0,
                    states: vec!["POLL".into(), "C1".into()],
                }],
            })
            .unwrap();
        for k in 0..3u64 {
            store
                .insert_window_set(st.id, &window_set(k, 1_000_000_000_000 + k * 1_000_000_000))
                .unwrap();
        }
        (dir, store)
    }

    /// Window `k` of one second at `start` on CPU 0.
    fn window_set(k: u64, start: u64) -> WindowSet {
        let mut h = Histogram::new();
        h.record_n(1_500, 10);
        h.record_n(30_000, 5);
        h.record(150_000 + k);
        let cpu0 = MonitorWindow {
            cpu_summary: Some(CpuSummary {
                cpu: 0,
                avg_freq_khz: Some(2_000_000 + k),
                idle_residency_pct: vec![10.0, 50.0],
                idle_entries_per_s: vec![100.0, 20.0],
                ..Default::default()
            }),
            ..latlab_testkit::run::monitor_window(0, h, 1)
        };
        WindowSet {
            power: Some(vec![
                PowerSource {
                    name: "rapl:package-0".into(),
                    avg_w: Some(5.0),
                    energy_j: Some(5.0),
                    wraps: 0,
                },
                // A meter that stood still (a virtual machine's): no reading, no counter.
                PowerSource {
                    name: "perf:energy-psys".into(),
                    avg_w: None,
                    energy_j: None,
                    wraps: 0,
                },
            ]),
            cost_cpu_time_ns: Some(1_000_000),
            ..latlab_testkit::run::window_set(k, (start, 1_000_000_000), vec![cpu0])
        }
    }

    #[test]
    fn a_retention_merge_leaves_the_exposition_as_it_was() {
        let (_d, mut store) = store_with_windows();
        let id = store.find_series("host \"a\"").unwrap().unwrap();
        // The newest window in the next hour, so the merge takes the first three.
        store
            .insert_window_set(id, &window_set(3, 3_600_000_000_000))
            .unwrap();
        let mut m = Metrics::new();
        m.refresh(&store, None).unwrap();
        let before = m.render(None);
        assert!(before.contains("latlab_monitor_last_window_index{series=\"host \\\"a\\\"\"} 3"));
        let merged = store.merge_old_windows(id, 3_600_000_000_000).unwrap();
        assert_eq!(merged.sets_merged, 3);
        let mut again = Metrics::new();
        again.refresh(&store, None).unwrap();
        assert_eq!(again.render(None), before);
        // A reader that had read before the merge sees nothing new.
        assert!(!m.refresh(&store, None).unwrap());
    }

    /// A daemon restarted with fewer CPUs: the CPU no longer measured keeps its totals, but
    /// its last-window gauges are left out, not said to be 0 s.
    #[test]
    fn a_cpu_not_in_the_newest_window_has_no_window_gauges() {
        let (_d, mut store) = store_with_windows();
        let id = store.find_series("host \"a\"").unwrap().unwrap();
        let mut h = Histogram::new();
        h.record_n(2_000, 10);
        let cpu1 = latlab_testkit::run::monitor_window(1, h, 0);
        store
            .insert_window_set(
                id,
                &latlab_testkit::run::window_set(3, (1_003_000_000_000, 1_000_000_000), vec![cpu1]),
            )
            .unwrap();
        let mut m = Metrics::new();
        m.refresh(&store, None).unwrap();
        let t = m.render(None);
        let gauge = |name: &str, cpu: u32| {
            t.lines()
                .find(|l| {
                    l.starts_with(&format!("{name}{{series=\"host \\\"a\\\"\",cpu=\"{cpu}\""))
                })
                .map(str::to_string)
        };
        for name in [
            "latlab_wakeup_latency_window_max_seconds",
            "latlab_wakeup_latency_window_p99_9_seconds",
        ] {
            assert_eq!(gauge(name, 0), None, "{t}");
            assert!(
                gauge(name, 1).is_some_and(|l| l.ends_with(" 0.000002")),
                "{t}"
            );
        }
        // The whole series' figures of CPU 0 stay.
        assert!(
            gauge("latlab_wakeup_latency_max_seconds", 0).is_some(),
            "{t}"
        );
    }

    #[test]
    fn exposition_counts_every_window() {
        let (_d, store) = store_with_windows();
        let mut m = Metrics::new();
        assert!(m.refresh(&store, None).unwrap());
        assert!(!m.refresh(&store, None).unwrap(), "nothing new");
        let t = m.render(None);
        let l = "series=\"host \\\"a\\\"\",cpu=\"0\"";
        assert!(
            t.contains(&format!("latlab_wakeup_latency_seconds_count{{{l}}} 48")),
            "{t}"
        );
        assert!(t.contains(&format!(
            "latlab_wakeup_latency_seconds_bucket{{{l},le=\"2e-06\"}} 30"
        )));
        assert!(t.contains(&format!(
            "latlab_wakeup_latency_seconds_bucket{{{l},le=\"5e-05\"}} 45"
        )));
        assert!(t.contains(&format!(
            "latlab_wakeup_latency_seconds_bucket{{{l},le=\"+Inf\"}} 48"
        )));
        // sum: 3 × (10×1.5 µs + 5×30 µs) + 150.000 + 150.001 + 150.002 µs
        assert!(
            t.contains(&format!(
                "latlab_wakeup_latency_seconds_sum{{{l}}} 0.000945003"
            )),
            "{t}"
        );
        assert!(t.contains(&format!(
            "latlab_wakeup_latency_window_max_seconds{{{l},window=\"1s\"}} 0.000150002"
        )));
        assert!(t.contains(&format!("latlab_missed_periods_total{{{l}}} 3")));
        assert!(t.contains(&format!("latlab_cpu_frequency_hertz{{{l}}} 2000002000")));
        assert!(
            t.contains(&format!(
                "latlab_cpuidle_state_time_seconds_total{{{l},state=\"1\",name=\"C1\"}} 1.500000"
            )),
            "{t}"
        );
        assert!(t.contains(&format!(
            "latlab_cpuidle_state_usage_total{{{l},state=\"0\",name=\"POLL\"}} 300"
        )));
        assert!(t.contains("latlab_power_joules_total{series=\"host \\\"a\\\"\",source=\"rapl:package-0\"} 15.000000"));
        assert!(!t.contains("energy-psys"), "{t}");
        // The series' own figures, from its totals: three windows of a second from 1000 s, each
        // costing 1 ms of CPU time.
        let series = "{series=\"host \\\"a\\\"\"}";
        for line in [
            format!("latlab_monitor_last_window_index{series} 2"),
            format!("latlab_monitor_windows_total{series} 3"),
            format!("latlab_monitor_last_window_end_timestamp_seconds{series} 1003"),
            format!("latlab_monitor_cpu_seconds_total{series} 0.003"),
        ] {
            assert!(t.lines().any(|l| l == line), "{line}: {t}");
        }
        assert!(t.contains("profile=\"lowlatency\""));
        assert!(t.contains("# TYPE latlab_wakeup_latency_seconds histogram"));
        // Every sample line parses as name{labels} value.
        for line in t.lines().filter(|l| !l.starts_with('#')) {
            let v = line.rsplit(' ').next().unwrap();
            assert!(v.parse::<f64>().is_ok(), "{line}");
        }
    }

    /// Only the running daemon knows what waits in memory and what it lost: served with it,
    /// absent from a store served alone.
    #[test]
    fn the_daemon_adds_what_waits_and_what_was_lost() {
        let (_dir, store) = store_with_windows();
        let mut m = Metrics::new();
        m.refresh(&store, None).unwrap();
        let live = super::Live {
            series: "host \"a\"".into(),
            profile: "none".into(),
            windows_queued: 3,
            windows_lost: 2,
            windows_kept: 7,
            measured: None,
        };
        let t = m.render(Some(&live));
        assert!(
            t.contains("latlab_monitor_windows_queued{series=\"host \\\"a\\\"\"} 3\n"),
            "{t}"
        );
        assert!(
            t.contains("latlab_monitor_windows_lost_total{series=\"host \\\"a\\\"\"} 2\n"),
            "{t}"
        );
        assert!(
            t.contains("# TYPE latlab_monitor_windows_lost_total counter\n"),
            "{t}"
        );
        assert!(
            t.contains("latlab_monitor_windows_in_files{series=\"host \\\"a\\\"\"} 7\n"),
            "{t}"
        );
        let alone = m.render(None);
        assert!(!alone.contains("windows_queued") && !alone.contains("windows_lost"));
        assert!(!alone.contains("windows_in_files"));
    }

    /// The running daemon serves its own series only: another one in its store (a series
    /// stopped long ago) would freeze there and raise alerts on this machine.
    #[test]
    fn the_daemon_serves_its_own_series_only() {
        let (_dir, mut store) = store_with_windows();
        let other = store
            .open_series(&SeriesSpec {
                name: "other".into(),
                window_ns: 1_000_000_000,
                config: SeriesConfig::new(&Default::default(), MeasureConfig::default()),
                system: None,
                idle_states: Vec::new(),
            })
            .unwrap();
        store
            .insert_window_set(other.id, &window_set(0, 2_000_000_000_000))
            .unwrap();
        let mut all = Metrics::new();
        all.refresh(&store, None).unwrap();
        let t = all.render(None);
        assert!(
            t.contains("series=\"other\"") && t.contains("series=\"host"),
            "{t}"
        );
        let mut own = Metrics::new();
        own.refresh(&store, Some("other")).unwrap();
        let t = own.render(None);
        assert!(t.contains("series=\"other\""), "{t}");
        assert!(!t.contains("series=\"host"), "{t}");
    }

    /// While the store cannot be written, the window gauges and the last window's end follow
    /// what the daemon measures; the counters stay with what is stored. A measured window no
    /// newer than the stored one changes nothing.
    #[test]
    fn window_gauges_follow_the_measurement_while_the_store_is_behind() {
        let (_dir, store) = store_with_windows();
        let mut m = Metrics::new();
        m.refresh(&store, None).unwrap();
        let live = |end_unix_ns| super::Live {
            series: "host \"a\"".into(),
            profile: "none".into(),
            windows_queued: 2,
            windows_lost: 0,
            windows_kept: 0,
            measured: Some(super::Measured {
                end_unix_ns,
                window_ns: 1_000_000_000,
                cpus: vec![(0, 2_500_000, 900_000)],
            }),
        };
        let l = "series=\"host \\\"a\\\"\",cpu=\"0\"";
        let behind = m.render(Some(&live(1_005_000_000_000)));
        for line in [
            format!("latlab_wakeup_latency_window_max_seconds{{{l},window=\"1s\"}} 0.0025"),
            format!("latlab_wakeup_latency_window_p99_9_seconds{{{l},window=\"1s\"}} 0.0009"),
            "latlab_monitor_last_window_end_timestamp_seconds{series=\"host \\\"a\\\"\"} 1005"
                .to_string(),
            format!("latlab_wakeup_latency_seconds_count{{{l}}} 48"),
            "latlab_monitor_last_window_index{series=\"host \\\"a\\\"\"} 2".to_string(),
        ] {
            assert!(behind.lines().any(|x| x == line), "{line}: {behind}");
        }
        let stored = m.render(Some(&live(1_003_000_000_000)));
        assert!(
            stored.contains(&format!(
                "latlab_wakeup_latency_window_max_seconds{{{l},window=\"1s\"}} 0.000150002"
            )),
            "{stored}"
        );
        // A store never read (it could not be, since the daemon started): the window it
        // measured last gives the window gauges and the last window's end, and no counter or
        // histogram is made up for it.
        let unread = Metrics::new().render(Some(&live(1_005_000_000_000)));
        for line in [
            format!("latlab_wakeup_latency_window_max_seconds{{{l},window=\"1s\"}} 0.0025"),
            format!("latlab_wakeup_latency_window_p99_9_seconds{{{l},window=\"1s\"}} 0.0009"),
            "latlab_monitor_last_window_end_timestamp_seconds{series=\"host \\\"a\\\"\"} 1005"
                .to_string(),
            "latlab_monitor_windows_queued{series=\"host \\\"a\\\"\"} 2".to_string(),
        ] {
            assert!(unread.lines().any(|x| x == line), "{line}: {unread}");
        }
        for absent in [
            "latlab_wakeup_latency_seconds_count{",
            "latlab_wakeup_latency_max_seconds{",
            "latlab_missed_periods_total{",
            "latlab_monitor_windows_total{",
            "latlab_monitor_cpu_seconds_total{",
            "latlab_system_info{",
        ] {
            assert!(!unread.contains(absent), "{absent}: {unread}");
        }
    }

    #[test]
    fn seconds_are_exact() {
        assert_eq!(secs(0), "0");
        assert_eq!(secs(1_500), "0.0000015");
        assert_eq!(secs(3_000_000_000), "3");
        assert_eq!(secs(300_000_000_000), "300");
    }
}
