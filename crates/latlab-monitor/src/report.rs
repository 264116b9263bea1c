//! A monitoring series as one result, for `latlab report series:NAME`: one thread per CPU
//! whose histogram is every window of the series merged (the running totals the store keeps
//! with each window set, so nothing is read twice), and a time series of at most
//! [`MAX_POINTS`] points per CPU, each folding the windows that start in its span.
//!
//! A point's count, minimum, maximum and missed periods are exact; its p99 is the highest p99
//! of its windows (a window's own p99 is exact as measured; the p99 of several together would
//! need their histograms). The result says so in its warnings, where a report shows them.

use latlab_model::monitor::SeriesConfig;
use latlab_model::units::format_duration;
use latlab_model::{
    RunEnvironment, RunHead, RunResult, Spike, Spikes, Stats, StopReason, SystemInfo, ThreadResult,
    Window,
};
use latlab_store::{Store, StoreError};
use std::collections::BTreeMap;

/// Points per CPU at most in a series' time series (a year of 5-minute windows: 4.4 hours each).
pub const MAX_POINTS: u64 = 2000;

/// Per CPU, what its windows in one point's span add up to.
#[derive(Default)]
struct Fold {
    count: u64,
    min: u64,
    max: u64,
    max_start: u64,
    /// The start of the first window folded in.
    first_start: u64,
    p99: u64,
    missed: u64,
}

/// The series `name` in `store` as a result, or None when the store has no such series.
pub fn series_result(store: &Store, name: &str) -> Result<Option<RunResult>, StoreError> {
    let Some(id) = store.find_series(name)? else {
        return Ok(None);
    };
    let (config, idle_states) = store.series_meta(id)?;
    let config: SeriesConfig = serde_json::from_value(config).map_err(|e| StoreError::Corrupt {
        what: format!("monitor series {name:?} configuration"),
        detail: e.to_string(),
    })?;
    let totals = store.series_totals(id)?.unwrap_or_default();
    let (Some(first), Some(last)) = (totals.first_start_unix_ns, totals.last_end_unix_ns) else {
        return Ok(None);
    };
    let window_ns = config.measure.window_ns.max(1);
    let span = last.saturating_sub(first);
    let per_point = span.div_ceil(MAX_POINTS).div_ceil(window_ns).max(1) * window_ns;
    let (mut windows, worst) = series_points(store, id, (first, last), (per_point, window_ns))?;
    let threads: Vec<ThreadResult> = totals
        .cpus
        .into_iter()
        .map(|(cpu, t)| {
            let stats = Stats::of(&t.histogram);
            ThreadResult {
                label: format!("cpu{cpu}"),
                cpu: Some(cpu),
                tid: 0,
                missed: t.missed,
                expected_periods: None,
                max_at_ns: worst.get(&cpu).map_or(0, |w| w.1),
                // The latencies of missed periods are not kept: corrected is the raw.
                corrected: stats.clone(),
                stats,
                cpu_time_ns: None,
                corrected_histogram: t.histogram.clone(),
                histogram: t.histogram,
                windows: windows.remove(&cpu).unwrap_or_default(),
            }
        })
        .collect();
    let points = if per_point == window_ns {
        format!(
            "each point one {} window as stored",
            format_duration(window_ns)
        )
    } else {
        format!(
            "each point the {} windows starting in its {}: count, minimum, maximum and missed \
             periods exact, p99 the highest of its windows'",
            format_duration(window_ns),
            format_duration(per_point)
        )
    };
    // A start whose set-up could not lock memory says so in its annotation.
    let unlocked = store
        .annotations(id, 0, u64::MAX >> 1)?
        .iter()
        .any(|a| a.kind == "start" && a.text.contains("memory is not locked"));
    // What was measured: the windows' time, not the span with the daemon's stops in it.
    let measured = store.series_covered_ns(id)?.min(span);
    let gaps = if measured < span {
        format!(
            "; the windows cover {} of the {} the series spans (the rest: no window stored; the start annotations say why)",
            latlab_model::units::format_elapsed(measured),
            latlab_model::units::format_elapsed(span)
        )
    } else {
        String::new()
    };
    let head = RunHead {
        id: format!("series:{name}"),
        start_unix_ns: first,
        elapsed_ns: measured,
        config: latlab_model::MeasureConfig {
            // Every CPU with windows, not the last start's --cpus: a restart may measure fewer.
            cpus: Some(threads.iter().filter_map(|t| t.cpu).collect()),
            threads: threads.len() as u32,
            window_ns: per_point,
            // A series' length is the time its windows cover, as its measured time.
            duration_ns: Some(measured),
            ..config.measure
        },
        system: store.series_system(id)?.unwrap_or_else(|| SystemInfo {
            hostname: config.hostname,
            kernel_release: config.kernel,
            preempt: config.preempt,
            ..SystemInfo::default()
        }),
        environment: RunEnvironment {
            warnings: vec![format!(
                "monitoring series {name:?}: {}{gaps}; histograms are every window \
                 merged; over time, {points}{}",
                latlab_model::units::plural(totals.windows, "window", "windows"),
                if unlocked {
                    "; memory was not locked in a run of it (its start annotation says why)"
                } else {
                    ""
                }
            )],
            memory_locked: config.measure.mlock && !unlocked,
            ..RunEnvironment::default()
        },
        stop: StopReason::Duration,
        spikes: series_spikes(
            store,
            id,
            &threads,
            first,
            config.measure.spike_threshold_ns,
        )?,
    };
    let mut result = RunResult::from_threads(head, threads);
    result.samples = series_samples(store, id, window_ns, idle_states, (first, last))?;
    Ok(Some(result))
}

/// Each CPU's windows over time, point by point (`per_point` long, from `first` to `last`), the
/// windows starting in a point folded into one; and each CPU's worst latency with its time from
/// `first`.
type Points = (BTreeMap<u32, Vec<Window>>, BTreeMap<u32, (u64, u64)>);

fn series_points(
    store: &Store,
    id: latlab_store::SeriesId,
    (first, last): (u64, u64),
    (per_point, window_ns): (u64, u64),
) -> Result<Points, StoreError> {
    let mut windows: BTreeMap<u32, Vec<Window>> = BTreeMap::new();
    let mut worst: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut from = first;
    let mut index = 0;
    while from < last {
        let to = from + per_point;
        // Per point and CPU. A point of one window is that window, at its own start: a
        // restart's windows do not fall on the grid of the first start's.
        let mut folds: BTreeMap<(u64, u32), Fold> = BTreeMap::new();
        for w in store.monitor_window_stats(id, from, to)? {
            // A window (or merged hour) belongs to the point its start falls in.
            if w.start_unix_ns < from || w.start_unix_ns >= to {
                continue;
            }
            let point = if per_point == window_ns {
                w.start_unix_ns
            } else {
                from
            };
            let f = folds.entry((point, w.cpu)).or_insert(Fold {
                min: u64::MAX,
                first_start: u64::MAX,
                ..Fold::default()
            });
            f.first_start = f.first_start.min(w.start_unix_ns);
            f.count += w.count;
            f.missed += w.missed;
            if w.count > 0 {
                f.min = f.min.min(w.min_ns);
                f.p99 = f.p99.max(w.p99_ns);
                if w.max_ns >= f.max {
                    (f.max, f.max_start) = (w.max_ns, w.start_unix_ns);
                }
            }
        }
        let mut point = None;
        for ((at, cpu), f) in folds {
            if point.is_some_and(|p| p != at) {
                index += 1;
            }
            point = Some(at);
            let w = worst.entry(cpu).or_default();
            if f.count > 0 && f.max >= w.0 {
                *w = (f.max, f.max_start - first);
            }
            windows.entry(cpu).or_default().push(Window {
                index,
                // Where its first window starts: after a stop, not where the point's span does.
                start_ns: f.first_start - first,
                count: f.count,
                min: if f.count > 0 { f.min } else { 0 },
                max: f.max,
                p99: f.p99,
                missed: f.missed,
            });
        }
        from = to;
        index += 1;
    }
    Ok((windows, worst))
}

/// What the samplers measured beside the windows, over the whole series: each CPU's frequency,
/// utilisation and idle residency, and the power of each source, every window weighted by the
/// time it covers. `None` for a series whose windows carry no sampler summary.
fn series_samples(
    store: &Store,
    id: latlab_store::SeriesId,
    window_ns: u64,
    idle_states: Vec<latlab_model::samples::CpuIdleStates>,
    span: (u64, u64),
) -> Result<Option<latlab_model::samples::Samples>, StoreError> {
    use latlab_model::system::Field;
    let (cpus, power) = store.series_sampled(id)?;
    let power_names: Vec<String> = power.iter().flatten().map(|p| p.name.clone()).collect();
    if cpus.is_empty() {
        return Ok(None);
    }
    let frequency = if cpus.iter().any(|c| c.avg_freq_khz.is_some()) {
        Field::Value("the monitor's per-window means".to_string())
    } else {
        Field::unavailable("no frequency in the stored windows")
    };
    Ok(Some(latlab_model::samples::Samples {
        period_ns: window_ns,
        sampler_cpus: Vec::new(),
        sampler_cpu_time_ns: 0,
        idle_states,
        power_sources: match power {
            Some(p) if !p.is_empty() => Field::Value(p),
            _ => Field::unavailable("no power source in the stored windows"),
        },
        thermal_zones: Vec::new(),
        thermal_unavailable: None,
        frequency,
        smi: None,
        cpus,
        thermal: Vec::new(),
        series: samples_over_time(store, id, span, &power_names)?,
    }))
}

/// What the samplers measured over time, point by point as the dashboard's timeline groups the
/// windows (at most [`MAX_POINTS`]): each CPU's mean frequency and idle residency, and each
/// source's power (in the order of `power_names`), every window weighted by the time it covers.
fn samples_over_time(
    store: &Store,
    id: latlab_store::SeriesId,
    (first, last): (u64, u64),
    power_names: &[String],
) -> Result<Vec<latlab_model::samples::Sample>, StoreError> {
    use latlab_model::samples::CpuSample;
    let timeline = crate::api::timeline(store, id, first, last, MAX_POINTS as usize)?;
    Ok(
        timeline.samples(first, power_names, |cell, dt_ns| CpuSample {
            online: true,
            freq_khz: cell.mhz.map(|m| (m * 1000.0).round() as u64),
            // Residency in percent of the point's time, as the time a sampler would have read.
            idle_time_us: cell
                .res
                .iter()
                .map(|r| (r.unwrap_or(0.0) / 100.0 * dt_ns as f64 / 1000.0).round() as u64)
                .collect(),
            ..CpuSample::default()
        }),
    )
}

/// The series' spikes as a run's: on the thread of their CPU, times from the series' start, at
/// most the spike limit of a measurement, the others counted.
fn series_spikes(
    store: &Store,
    id: latlab_store::SeriesId,
    threads: &[ThreadResult],
    first: u64,
    threshold_ns: Option<u64>,
) -> Result<Spikes, StoreError> {
    let limit = latlab_model::MeasureConfig::default().spike_limit;
    let (rows, total) = store.series_spikes(id, limit)?;
    let kept: Vec<Spike> = rows
        .into_iter()
        .filter_map(|(cpu, s)| {
            let thread = threads.iter().position(|t| t.cpu == Some(cpu))?;
            Some(Spike {
                thread: thread as u32,
                cpu: Some(cpu),
                at_ns: s.at_unix_ns.saturating_sub(first),
                value_ns: s.value_ns,
                story: None,
            })
        })
        .collect();
    Ok(Spikes {
        threshold_ns,
        not_kept: total.saturating_sub(kept.len() as u64),
        kept,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::synthetic::{Synthetic, fill};

    fn series(dir: &std::path::Path, cpus: u32, days: u64) -> Store {
        let mut store = Store::open(dir.join("s.db")).unwrap();
        let spec = Synthetic {
            name: "s".into(),
            cpus,
            window_ns: 300_000_000_000,
            span_ns: days * 86_400_000_000_000,
            end_unix_ns: None,
            interval_ns: 1_000_000,
            retention_ns: 90 * 86_400_000_000_000,
            seed: 9,
            retention_at_end: false,
            resume: false,
        };
        fill(&mut store, &spec, SystemInfo::default(), &mut |_, _| {}).unwrap();
        store
    }

    /// A synthetic series "s" of `cpus` CPUs over `days`, and its result.
    fn reported(
        cpus: u32,
        days: u64,
    ) -> (tempfile::TempDir, Store, RunResult, latlab_store::SeriesId) {
        let dir = tempfile::tempdir().unwrap();
        let store = series(dir.path(), cpus, days);
        let r = series_result(&store, "s").unwrap().unwrap();
        let id = store.find_series("s").unwrap().unwrap();
        (dir, store, r, id)
    }

    #[test]
    fn a_series_is_one_thread_per_cpu_with_every_window_in_it() {
        let (_dir, store, r, id) = reported(2, 1);
        let rows = store.monitor_windows(id, 0, u64::MAX >> 1, None).unwrap();
        assert_eq!(r.threads.len(), 2);
        for t in &r.threads {
            let cpu = t.cpu.unwrap();
            let mine: Vec<_> = rows.iter().filter(|w| w.cpu == cpu).collect();
            assert_eq!(t.windows.len(), mine.len(), "a day: one point per window");
            assert_eq!(t.stats.count, mine.iter().map(|w| w.count).sum::<u64>());
            assert_eq!(t.stats.max, mine.iter().map(|w| w.max_ns).max().unwrap());
            assert_eq!(t.missed, mine.iter().map(|w| w.missed).sum::<u64>());
            for (p, w) in t.windows.iter().zip(&mine) {
                assert_eq!(
                    (p.count, p.min, p.max, p.p99),
                    (w.count, w.min_ns, w.max_ns, w.p99_ns)
                );
            }
        }
        assert_eq!(r.config.window_ns, 300_000_000_000);
        assert!(
            r.environment.warnings[0].contains("one 5m window as stored"),
            "{:?}",
            r.environment
        );
        assert!(series_result(&store, "nope").unwrap().is_none());
    }

    /// The CPUs of a series are every CPU it has windows of: a daemon restarted with fewer
    /// CPUs leaves the earlier ones in the series (the report said only the last start's). And
    /// the restart's windows are at their own times.
    #[test]
    fn a_series_measured_on_fewer_cpus_after_a_restart_names_them_all() {
        use latlab_testkit::run::{monitor_window, window_set};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let spec = |cpus: Vec<u32>| latlab_store::SeriesSpec {
            name: "s".into(),
            window_ns: 1_000_000_000,
            config: latlab_model::monitor::SeriesConfig::new(
                &SystemInfo::default(),
                latlab_model::MeasureConfig {
                    window_ns: 1_000_000_000,
                    threads: cpus.len() as u32,
                    cpus: Some(cpus),
                    ..Default::default()
                },
            ),
            system: None,
            idle_states: Vec::new(),
        };
        let t0 = 1_700_000_000_000_000_000;
        let hist = || [10_000u64].into_iter().collect::<latlab_hist::Histogram>();
        let first = store.open_series(&spec(vec![0, 1])).unwrap();
        let both = vec![monitor_window(0, hist(), 0), monitor_window(1, hist(), 0)];
        store
            .insert_window_set(first.id, &window_set(0, (t0, 1_000_000_000), both))
            .unwrap();
        let again = store.open_series(&spec(vec![1])).unwrap();
        let one = vec![monitor_window(1, hist(), 0)];
        store
            .insert_window_set(
                again.id,
                &window_set(1, (t0 + 60_500_000_000, 1_000_000_000), one),
            )
            .unwrap();
        let r = series_result(&store, "s").unwrap().unwrap();
        assert_eq!(r.config.cpus, Some(vec![0, 1]));
        assert_eq!(r.config.threads, 2);
        // The restart's window is drawn where it was measured, 60.5 s in, not on the grid of
        // the first start's windows (at 60 s).
        let starts: Vec<u64> = r.threads[1].windows.iter().map(|w| w.start_ns).collect();
        assert_eq!(starts, vec![0, 60_500_000_000]);
    }

    /// A series report draws idle residency and frequency over time, as its run's would:
    /// each point carries what its windows' sampler summaries say.
    #[test]
    fn a_series_has_its_samplers_over_time() {
        use latlab_model::monitor::{MonitorWindow, SeriesConfig, WindowSet};
        use latlab_model::samples::{CpuIdleStates, CpuSummary};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let measure = latlab_model::MeasureConfig {
            window_ns: 1_000_000_000,
            cpus: Some(vec![0]),
            ..Default::default()
        };
        let series = store
            .open_series(&latlab_store::SeriesSpec {
                name: "s".into(),
                window_ns: 1_000_000_000,
                config: SeriesConfig::new(&SystemInfo::default(), measure),
                system: None,
                idle_states: vec![CpuIdleStates {
                    cpu: 0,
                    states: vec!["POLL".into(), "C1".into()],
                }],
            })
            .unwrap();
        let t0 = 1_700_000_000_000_000_000;
        for k in 0..3u64 {
            let mut h = latlab_hist::Histogram::new();
            h.record(10_000);
            let start = t0 + k * 1_000_000_000;
            store
                .insert_window_set(
                    series.id,
                    &WindowSet {
                        index: k,
                        start_unix_ns: start,
                        end_unix_ns: start + 1_000_000_000,
                        cpus: vec![MonitorWindow {
                            cpu: 0,
                            histogram: h,
                            missed: 0,
                            cpu_summary: Some(CpuSummary {
                                cpu: 0,
                                avg_freq_khz: Some(2_000_000 + k * 100_000),
                                idle_residency_pct: vec![10.0, 20.0 * k as f64],
                                ..Default::default()
                            }),
                            spikes: Vec::new(),
                        }],
                        power: None,
                        thermal: None,
                        cost_cpu_time_ns: None,
                    },
                )
                .unwrap();
        }
        let r = series_result(&store, "s").unwrap().unwrap();
        let s = r.samples.unwrap();
        let seen: Vec<(u64, Option<u64>, Vec<u64>)> = s
            .series
            .iter()
            .map(|p| (p.at_ns, p.cpus[0].freq_khz, p.cpus[0].idle_time_us.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                (1_000_000_000, Some(2_000_000), vec![100_000, 0]),
                (2_000_000_000, Some(2_100_000), vec![100_000, 200_000]),
                (3_000_000_000, Some(2_200_000), vec![100_000, 400_000]),
            ]
        );
    }

    #[test]
    fn a_long_series_folds_its_windows_into_at_most_max_points_exactly() {
        let (_dir, store, r, id) = reported(1, 8);
        // The series' spikes are the result's, each on its CPU's thread within the series.
        let (stored, total) = store.series_spikes(id, u32::MAX).unwrap();
        assert!(total > 0 && total == stored.len() as u64, "{total}");
        let kept = &r.spikes.kept;
        assert_eq!(kept.len() as u64 + r.spikes.not_kept, total);
        for s in kept {
            assert_eq!(r.threads[s.thread as usize].cpu, s.cpu);
            assert!(s.at_ns <= r.elapsed_ns, "{s:?}");
        }
        let t = &r.threads[0];
        // 2304 windows of 5 minutes: two to a point.
        assert_eq!(r.config.window_ns, 600_000_000_000);
        assert!(
            t.windows.len() as u64 <= MAX_POINTS && t.windows.len() >= 1100,
            "{}",
            t.windows.len()
        );
        assert_eq!(
            t.windows.iter().map(|w| w.count).sum::<u64>(),
            t.stats.count
        );
        assert_eq!(t.windows.iter().map(|w| w.max).max(), Some(t.stats.max));
        assert_eq!(t.windows.iter().map(|w| w.min).min(), Some(t.stats.min));
        let worst = t
            .windows
            .iter()
            .max_by_key(|w| (w.max, w.start_ns))
            .unwrap();
        assert!(t.max_at_ns >= worst.start_ns && t.max_at_ns < worst.start_ns + 600_000_000_000);
        assert!(r.environment.warnings[0].contains("p99 the highest"));
    }
}
