//! The keeper: the daemon's thread that turns closed windows into stored window sets.
//!
//! The measuring engine hands over each thread's closed window as soon as its coordinator has
//! it; the keeper waits until every CPU's window of the same index is there (and the sample
//! that covers the window's end, for at most a short while), sums up the samplers' samples of
//! the window, adds latlab's own CPU time of the window, and writes the set in one transaction.
//! So a SIGKILL loses the open window and at most the one being written. Between windows it runs
//! the schedule's switches and, once an hour, the retention merge. All store writes happen
//! here, on one connection.

use super::schedule::{GovernorTuner, Switch, Switcher, WallClock};
use super::web::LiveStatus;
use latlab_measure::ClosedWindow;
use latlab_model::samples::{PowerSource, Sample, ThermalSummary};
use latlab_store::{Annotation, MonitorSpike, MonitorWindow, SeriesState, Store, WindowSet};
use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the measuring side sends.
pub enum Msg {
    /// Measuring started at this unix time (window k starts at start + k × window).
    Start {
        start_unix_ns: u64,
    },
    Windows(Vec<ClosedWindow>),
    /// Measuring ended at this unix time: write what is left.
    Finish {
        end_unix_ns: u64,
    },
}

pub struct KeeperSetup {
    pub series: SeriesState,
    pub threads: usize,
    pub window_ns: u64,
    pub retention_ns: u64,
    pub sample_period_ns: u64,
    pub power_names: Vec<String>,
    pub thermal_names: Vec<String>,
    /// Unix time of the samplers' origin (sample times count from it).
    pub sample_origin_unix_ns: u64,
    /// The start annotation's text.
    pub describe: String,
    /// How often the retention merge runs.
    pub merge_every: Duration,
}

pub struct Keeper {
    store: Store,
    setup: KeeperSetup,
    pending: BTreeMap<u64, Vec<ClosedWindow>>,
    /// Highest window index each thread has handed over.
    seen: Vec<Option<u64>>,
    samples: VecDeque<(u64, Sample)>,
    start_unix_ns: Option<u64>,
    cpu_time_mark: u64,
    pub live: Arc<Mutex<LiveStatus>>,
    switcher: Option<Switcher<GovernorTuner>>,
    clock: Box<dyn WallClock>,
    next_merge: Instant,
}

/// CPU time of the monitoring itself, ns: every thread of the process (measuring threads, their
/// coordinator, samplers, this thread) except the web server's, whose work depends on how many
/// clients ask.
pub fn process_cpu_time_ns() -> u64 {
    latlab_sys::thread::process_cpu_time_ns().saturating_sub(super::web::web_cpu_time_ns())
}

impl Keeper {
    pub fn new(
        store: Store,
        setup: KeeperSetup,
        live: Arc<Mutex<LiveStatus>>,
        switcher: Option<Switcher<GovernorTuner>>,
        clock: Box<dyn WallClock>,
    ) -> Keeper {
        let threads = setup.threads;
        Keeper {
            store,
            setup,
            pending: BTreeMap::new(),
            seen: vec![None; threads],
            samples: VecDeque::new(),
            start_unix_ns: None,
            cpu_time_mark: process_cpu_time_ns(),
            live,
            switcher,
            clock,
            next_merge: Instant::now(),
        }
    }

    pub fn annotate(&mut self, at_unix_ns: u64, cpu: Option<u32>, kind: &str, text: &str) {
        let a = Annotation {
            at_unix_ns,
            cpu,
            kind: kind.into(),
            text: text.into(),
        };
        if let Err(e) = self.store.add_annotation(self.setup.series.id, &a) {
            self.error(format!("storing the annotation {text:?}: {e}"));
        }
    }

    fn error(&self, msg: String) {
        eprintln!("latlab: monitor: {msg}");
        if let Ok(mut l) = self.live.lock() {
            l.last_error = Some(msg);
        }
    }

    fn switched(&mut self, switches: Vec<Switch>) {
        for s in switches {
            let text = s.text();
            eprintln!("latlab: {text}");
            self.annotate(s.at_unix_ns, Some(s.cpu), "schedule", &text);
        }
    }

    /// Run until `Finish` (or the channel closes); returns the store for the last annotations.
    pub fn run(mut self, rx: Receiver<Msg>, samples: Receiver<Sample>) -> Store {
        // The schedule's setting in force applies from the start.
        if let Some(sw) = self.switcher.as_mut() {
            let s = sw.tick(self.clock.as_ref());
            self.switched(s);
        }
        loop {
            let msg = rx.recv_timeout(Duration::from_millis(200));
            while let Ok(s) = samples.try_recv() {
                let end = self.setup.sample_origin_unix_ns + s.at_ns;
                self.samples.push_back((end, s));
            }
            match msg {
                Ok(Msg::Start { start_unix_ns }) => {
                    self.start_unix_ns = Some(start_unix_ns);
                    self.cpu_time_mark = process_cpu_time_ns();
                    let mut text = self.setup.describe.clone();
                    if let Some(last) = self.setup.series.last_end_unix_ns {
                        text.push_str(&format!(
                            "; continues the series after {} without measurement",
                            latlab_model::units::format_duration(
                                start_unix_ns.saturating_sub(last) / 1_000_000 * 1_000_000
                            )
                        ));
                    }
                    self.annotate(start_unix_ns, None, "start", &text);
                }
                Ok(Msg::Windows(ws)) => {
                    for w in ws {
                        let t = w.thread as usize;
                        if let Some(seen) = self.seen.get_mut(t) {
                            *seen = Some(seen.map_or(w.index, |s| s.max(w.index)));
                        }
                        self.pending.entry(w.index).or_default().push(w);
                    }
                }
                Ok(Msg::Finish { end_unix_ns }) => {
                    self.flush(Some(end_unix_ns));
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush(Some(super::unix_now_ns()));
                    break;
                }
            }
            self.flush(None);
            if let Some(sw) = self.switcher.as_mut() {
                let s = sw.tick(self.clock.as_ref());
                self.switched(s);
            }
            if Instant::now() >= self.next_merge {
                self.retention();
                self.next_merge = Instant::now() + self.setup.merge_every;
            }
        }
        if let Some(mut sw) = self.switcher.take() {
            let s = sw.restore_all(self.clock.as_ref());
            self.switched(s);
        }
        self.store
    }

    /// Merge windows older than the retention into hourly rows.
    pub fn retention(&mut self) {
        let before = super::unix_now_ns().saturating_sub(self.setup.retention_ns);
        match self.store.merge_old_windows(self.setup.series.id, before) {
            Ok(m) if m.hours > 0 => eprintln!(
                "latlab: retention: merged {} windows into {} hourly rows",
                m.sets_merged, m.hours
            ),
            Ok(_) => {}
            Err(e) => self.error(format!("retention merge: {e}")),
        }
    }

    /// Write every window set that is complete (all threads past it and, unless finishing, its
    /// time over and its samples in).
    fn flush(&mut self, finish: Option<u64>) {
        let Some(start) = self.start_unix_ns else {
            return;
        };
        let w = self.setup.window_ns;
        let done_to = self.seen.iter().map(|s| s.unwrap_or(0)).min().unwrap_or(0);
        let all_seen = self.seen.iter().all(Option::is_some);
        let now = super::unix_now_ns();
        let wait = (self.setup.sample_period_ns + 50_000_000).min(w / 4);
        let newest_sample = self.samples.back().map_or(0, |(e, _)| *e);
        let ready: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|&k| {
                if finish.is_some() {
                    return true;
                }
                let end = start + (k + 1) * w;
                all_seen
                    && k <= done_to
                    && now >= end
                    && (newest_sample >= end || now >= end + wait)
            })
            .collect();
        for k in ready {
            let Some(windows) = self.pending.remove(&k) else {
                continue;
            };
            let set_start = start + k * w;
            let mut set_end = set_start + w;
            if let Some(f) = finish {
                set_end = set_end.min(f);
            }
            if set_end <= set_start {
                continue;
            }
            self.write(k, set_start, set_end, windows);
        }
    }

    fn write(&mut self, k: u64, start: u64, end: u64, windows: Vec<ClosedWindow>) {
        let run_start = self.start_unix_ns.unwrap_or(start);
        let in_window: Vec<Sample> = self
            .samples
            .iter()
            .filter(|(e, _)| *e > start && *e <= end)
            .map(|(_, s)| s.clone())
            .collect();
        while self.samples.front().is_some_and(|(e, _)| *e <= end) {
            self.samples.pop_front();
        }
        let summary = latlab_sys::sample::summarize(&in_window);
        let cpus: Vec<MonitorWindow> = windows
            .into_iter()
            .map(|cw| {
                let cpu = cw.cpu.unwrap_or(cw.thread);
                MonitorWindow {
                    cpu,
                    cpu_summary: summary.cpus.iter().find(|c| c.cpu == cpu as usize).cloned(),
                    spikes: cw
                        .spikes
                        .iter()
                        .map(|s| MonitorSpike {
                            at_unix_ns: run_start + s.at_ns,
                            value_ns: s.value_ns,
                        })
                        .collect(),
                    histogram: cw.histogram,
                    missed: cw.missed,
                }
            })
            .collect();
        let power = (!self.setup.power_names.is_empty()).then(|| {
            self.setup
                .power_names
                .iter()
                .zip(summary.power.iter().chain(std::iter::repeat(&(None, None))))
                .map(|(name, (avg_w, energy_j))| PowerSource {
                    name: name.clone(),
                    avg_w: *avg_w,
                    energy_j: *energy_j,
                    wraps: 0,
                })
                .collect()
        });
        let thermal: Vec<ThermalSummary> = self
            .setup
            .thermal_names
            .iter()
            .zip(&summary.temps)
            .filter_map(|(zone, t)| {
                t.map(|(avg_c, max_c)| ThermalSummary {
                    zone: zone.clone(),
                    avg_c,
                    max_c,
                })
            })
            .collect();
        let now_cpu = process_cpu_time_ns();
        let cost = now_cpu.saturating_sub(self.cpu_time_mark);
        self.cpu_time_mark = now_cpu;
        let set = WindowSet {
            index: self.setup.series.next_window_index + k,
            start_unix_ns: start,
            end_unix_ns: end,
            cpus,
            power,
            thermal: (!thermal.is_empty()).then_some(thermal),
            cost_cpu_time_ns: Some(cost),
        };
        match self.store.insert_window_set(self.setup.series.id, &set) {
            Ok(()) => {
                if let Ok(mut l) = self.live.lock() {
                    l.windows_written += 1;
                    l.last_window_end_ms = Some(end as f64 / 1e6);
                }
            }
            Err(e) => {
                if let Ok(mut l) = self.live.lock() {
                    l.windows_lost += 1;
                }
                self.error(format!("window {} not stored: {e}", set.index));
            }
        }
    }
}
