//! Monitoring series: window sets per transaction, queries, annotations, retention merge.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_hist::Histogram;
use latlab_model::MeasureConfig;
use latlab_model::samples::{CpuIdleStates, CpuSummary, PowerSource, ThermalSummary};
use latlab_store::*;
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::PathBuf;

const MIN5: u64 = 300_000_000_000;
const HOUR: u64 = 3_600_000_000_000;
/// 2026-01-01T00:00:00Z, an hour boundary.
const T0: u64 = 1_767_225_600_000_000_000;

fn spec(name: &str) -> SeriesSpec {
    SeriesSpec {
        name: name.into(),
        window_ns: MIN5,
        config: SeriesConfig::new(
            &Default::default(),
            MeasureConfig {
                interval_ns: 200_000,
                cpus: Some(vec![0, 1]),
                ..Default::default()
            },
        ),
        system: Some(common::result("s", 1).system),
        idle_states: vec![CpuIdleStates {
            cpu: 0,
            states: vec!["POLL".into(), "C1".into()],
        }],
    }
}

/// Window `k` of a series starting at `T0`, on CPUs 0 and 1 (CPU 1 only in even windows).
fn window_set(k: u64, rng: &mut common::Rng) -> WindowSet {
    let start = T0 + k * MIN5;
    let cpus = (0..2u32)
        .filter(|&cpu| cpu == 0 || k.is_multiple_of(2))
        .map(|cpu| {
            let h: Histogram = (0..(500 + k * 10)).map(|_| rng.latency()).collect();
            MonitorWindow {
                cpu,
                missed: k % 3,
                spikes: vec![MonitorSpike {
                    at_unix_ns: start + 1_000 + u64::from(cpu),
                    value_ns: h.max(),
                }],
                cpu_summary: Some(CpuSummary {
                    cpu: cpu as usize,
                    avg_freq_khz: Some(2_000_000 + k * 1_000),
                    util_pct: Some(k as f64),
                    steal_pct: None,
                    irqs_per_s: Some(100.0 * k as f64),
                    softirqs_per_s: None,
                    smis: None,
                    idle_residency_pct: vec![1.0, 90.0 - k as f64],
                    idle_entries_per_s: vec![10.0, 20.0],
                }),
                histogram: h,
            }
        })
        .collect();
    WindowSet {
        index: k,
        start_unix_ns: start,
        end_unix_ns: start + MIN5,
        cpus,
        power: Some(vec![PowerSource {
            name: "rapl:package-0".into(),
            avg_w: Some(10.0 + k as f64),
            energy_j: Some((10.0 + k as f64) * 300.0),
            wraps: 0,
        }]),
        thermal: Some(vec![ThermalSummary {
            zone: "pkg".into(),
            avg_c: 40.0 + k as f64,
            max_c: 45.0 + k as f64,
        }]),
        cost_cpu_time_ns: Some(1_000_000 + k),
    }
}

/// A new store, `m.db` in a temporary directory (removed when dropped), its path, and the
/// series `host` opened in it.
fn host_store() -> (tempfile::TempDir, PathBuf, Store, SeriesState) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut store = Store::open(&path).unwrap();
    let s = store.open_series(&spec("host")).unwrap();
    (dir, path, store, s)
}

/// Window sets 0..`n` from a generator seeded with `seed`.
fn window_sets(n: u64, seed: u64) -> Vec<WindowSet> {
    let mut rng = common::Rng::new(seed);
    (0..n).map(|k| window_set(k, &mut rng)).collect()
}

/// [`window_sets`], each stored in series `id` in turn.
fn store_window_sets(store: &mut Store, id: SeriesId, n: u64, seed: u64) -> Vec<WindowSet> {
    let sets = window_sets(n, seed);
    for set in &sets {
        store.insert_window_set(id, set).unwrap();
    }
    sets
}

#[test]
fn a_series_is_continued_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut rng = common::Rng::new(5);
    let first = {
        let mut store = Store::open(&path).unwrap();
        let s = store.open_series(&spec("host")).unwrap();
        assert!(!s.resumed);
        assert_eq!(s.next_window_index, 0);
        assert_eq!(s.last_end_unix_ns, None);
        for k in 0..3 {
            store
                .insert_window_set(s.id, &window_set(k, &mut rng))
                .unwrap();
        }
        s
    };
    // A restarted daemon.
    let mut store = Store::open(&path).unwrap();
    let again = store.open_series(&spec("host")).unwrap();
    assert!(again.resumed);
    assert_eq!(again.id, first.id);
    assert_eq!(again.next_window_index, 3);
    assert_eq!(again.last_end_unix_ns, Some(T0 + 3 * MIN5));
    let other = store.open_series(&spec("other")).unwrap();
    assert_ne!(other.id, first.id);
    assert_eq!(store.list_series().unwrap().len(), 2);
    // How far each reaches, from the window sets alone; a series without windows too.
    let ext = store.series_extents().unwrap();
    assert_eq!(ext.len(), 2);
    assert_eq!((ext[0].id, ext[0].name.as_str()), (first.id, "host"));
    assert_eq!(ext[0].windows, 3);
    assert_eq!(ext[0].first_start_unix_ns, Some(T0));
    assert_eq!(ext[0].last_end_unix_ns, Some(T0 + 3 * MIN5));
    assert_eq!(ext[0].last_window_index, Some(2));
    assert_eq!(
        (
            ext[1].windows,
            ext[1].first_start_unix_ns,
            ext[1].last_window_index
        ),
        (0, None, None)
    );
    assert_eq!(store.find_series("other").unwrap(), Some(other.id));
    assert_eq!(store.find_series("nobody").unwrap(), None);
    let (config, idle) = store.series_meta(first.id).unwrap();
    assert_eq!(config["measure"]["interval_ns"], 200_000);
    assert_eq!(idle[0].states, ["POLL", "C1"]);
}

#[test]
fn windows_are_queried_by_time_and_cpu_with_their_histograms() {
    let (_dir, _, mut store, s) = host_store();
    let sets = store_window_sets(&mut store, s.id, 6, 7);

    // Windows 1..=3 overlap [T0 + 1.5 windows, T0 + 3.5 windows).
    let rows = store
        .monitor_windows(s.id, T0 + MIN5 * 3 / 2, T0 + MIN5 * 7 / 2, Some(0))
        .unwrap();
    assert_eq!(
        rows.iter().map(|r| r.start_unix_ns).collect::<Vec<_>>(),
        [T0 + MIN5, T0 + 2 * MIN5, T0 + 3 * MIN5]
    );
    let w = &sets[2].cpus[0];
    let row = &rows[1];
    assert_eq!(row.cpu, 0);
    assert_eq!(row.windows, 1);
    assert_eq!(row.end_unix_ns, T0 + 3 * MIN5);
    assert_eq!(
        (row.count, row.min_ns, row.max_ns, row.missed),
        (
            w.histogram.count(),
            w.histogram.min(),
            w.histogram.max(),
            w.missed
        )
    );
    assert_eq!(row.p99_ns, w.histogram.percentile(99.0));
    assert_eq!(row.p99_9_ns, w.histogram.percentile(99.9));
    assert_eq!(row.cpu_summary, w.cpu_summary);
    let all = store.monitor_windows(s.id, 0, u64::MAX / 2, None).unwrap();
    assert_eq!(all.len(), 6 + 3);

    let (h, spikes) = store
        .monitor_window_detail(s.id, T0 + 2 * MIN5, 0)
        .unwrap()
        .unwrap();
    assert_eq!(h, w.histogram);
    assert_eq!(spikes, w.spikes);
    assert_eq!(
        store.monitor_window_detail(s.id, T0 + MIN5, 1).unwrap(),
        None
    );

    let worst = store.worst_windows(s.id, 0, u64::MAX / 2, 3).unwrap();
    let mut maxima: Vec<u64> = sets
        .iter()
        .flat_map(|s| s.cpus.iter().map(|w| w.histogram.max()))
        .collect();
    maxima.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(
        worst.iter().map(|r| r.max_ns).collect::<Vec<_>>(),
        maxima[..3]
    );

    let set_rows = store.monitor_sets(s.id, T0, T0 + MIN5).unwrap();
    assert_eq!(set_rows.len(), 1);
    assert_eq!(set_rows[0].power, sets[0].power);
    assert_eq!(set_rows[0].thermal, sets[0].thermal);
    assert_eq!(set_rows[0].cost_cpu_time_ns, Some(1_000_000));
}

#[test]
fn a_window_set_is_written_whole_or_not_at_all() {
    let (_dir, path, mut store, s) = host_store();
    let mut rng = common::Rng::new(9);
    let set = window_set(0, &mut rng);
    // Make the second CPU's window fail after the set and the first CPU's rows are in.
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER fail_cpu1 BEFORE INSERT ON monitor_windows WHEN NEW.cpu = 1
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let err = store.insert_window_set(s.id, &set).unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    for table in ["monitor_sets", "monitor_windows", "monitor_spikes"] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
    conn.execute_batch("DROP TRIGGER fail_cpu1").unwrap();
    store.insert_window_set(s.id, &set).unwrap();
    // The same window again (a daemon retrying) is refused: windows never overlap.
    let err = store.insert_window_set(s.id, &set).unwrap_err();
    assert!(matches!(err, StoreError::Overlap { .. }), "{err}");
    assert_eq!(
        store
            .monitor_windows(s.id, 0, u64::MAX / 2, None)
            .unwrap()
            .len(),
        2
    );
}

/// Sets stored again from a file are numbered on after the series' last window, each once
/// (the rest were stored already); a window number given twice is a problem `check` names.
#[test]
fn window_numbers_are_given_once_and_check_names_one_given_twice() {
    let (_dir, _path, mut store, s) = host_store();
    let sets = window_sets(6, 11);
    for set in &sets[..2] {
        store.insert_window_set(s.id, set).unwrap();
    }
    // Sets 1 to 5 again, as a kept file would hold them, numbered as a daemon's run counts.
    let again: Vec<WindowSet> = sets[1..]
        .iter()
        .map(|w| WindowSet {
            index: 90 + w.index,
            ..w.clone()
        })
        .collect();
    assert_eq!(store.insert_numbered(s.id, &again).unwrap(), (2, 6));
    let numbers: Vec<u64> = store
        .monitor_sets(s.id, 0, u64::MAX / 2)
        .unwrap()
        .iter()
        .map(|r| r.window_index)
        .collect();
    assert_eq!(numbers, [0, 1, 2, 3, 4, 5]);
    assert!(store.check().unwrap().is_ok());
    // A set numbered 3 again, after the others in time.
    let mut rng = common::Rng::new(12);
    let late = WindowSet {
        index: 3,
        ..window_set(9, &mut rng)
    };
    store.insert_window_set(s.id, &late).unwrap();
    let report = store.check().unwrap();
    assert_eq!(
        report.problems,
        [format!(
            "monitor series host: window number 3 is given twice (again to the set at {})",
            late.start_unix_ns
        )]
    );
}

#[test]
fn annotations_are_kept_on_the_time_axis() {
    let (_dir, _, mut store, s) = host_store();
    let a = Annotation {
        at_unix_ns: T0 + 5 * HOUR + 5 * 60_000_000_000,
        cpu: Some(2),
        kind: "schedule".into(),
        text: "cpu2: governor performance".into(),
    };
    let b = Annotation {
        at_unix_ns: T0 + 17 * HOUR + 5 * 60_000_000_000,
        cpu: Some(2),
        kind: "schedule".into(),
        text: "cpu2: restored".into(),
    };
    store.add_annotation(s.id, &b).unwrap();
    store.add_annotation(s.id, &a).unwrap();
    assert_eq!(
        store.annotations(s.id, T0, T0 + 24 * HOUR).unwrap(),
        [a.clone(), b]
    );
    assert_eq!(store.annotations(s.id, T0, T0 + 6 * HOUR).unwrap(), [a]);
}

#[test]
fn retention_merges_whole_hours_exactly() {
    let (_dir, _, mut store, s) = host_store();
    // 2.5 hours of 5-minute windows: 30 windows.
    let sets = store_window_sets(&mut store, s.id, 30, 11);
    // Merge everything older than T0 + 2h 10m: hours 0 and 1 are whole; hour 2 is not.
    let cutoff = T0 + 2 * HOUR + 10 * 60_000_000_000;
    let summary = store.merge_old_windows(s.id, cutoff).unwrap();
    assert_eq!(
        summary,
        MergeSummary {
            hours: 2,
            sets_merged: 24
        }
    );

    let rows = store.monitor_windows(s.id, 0, u64::MAX / 2, None).unwrap();
    // Two hourly rows per CPU, then the 6 windows of hour 2 as measured (CPU 1 in 3 of them).
    assert_eq!(rows.len(), 2 * 2 + 6 + 3);
    for hour in 0..2u64 {
        let in_hour: Vec<&WindowSet> = sets[(hour * 12) as usize..((hour + 1) * 12) as usize]
            .iter()
            .collect();
        for cpu in 0..2u32 {
            let windows: Vec<&MonitorWindow> = in_hour
                .iter()
                .flat_map(|s| s.cpus.iter().filter(|w| w.cpu == cpu))
                .collect();
            let mut expected = Histogram::new();
            for w in &windows {
                expected.merge(&w.histogram);
            }
            let start = T0 + hour * HOUR;
            let row = rows
                .iter()
                .find(|r| r.start_unix_ns == start && r.cpu == cpu)
                .unwrap();
            assert_eq!(row.windows, 12);
            assert_eq!(row.end_unix_ns, start + HOUR);
            assert_eq!(
                row.count,
                windows.iter().map(|w| w.histogram.count()).sum::<u64>()
            );
            assert_eq!(
                row.min_ns,
                windows.iter().map(|w| w.histogram.min()).min().unwrap()
            );
            assert_eq!(
                row.max_ns,
                windows.iter().map(|w| w.histogram.max()).max().unwrap()
            );
            assert_eq!(row.missed, windows.iter().map(|w| w.missed).sum::<u64>());
            assert_eq!(row.p99_ns, expected.percentile(99.0));
            assert_eq!(row.p99_9_ns, expected.percentile(99.9));
            let (h, spikes) = store
                .monitor_window_detail(s.id, start, cpu)
                .unwrap()
                .unwrap();
            assert_eq!(h, expected, "hour {hour} cpu {cpu}");
            assert!(h.buckets().eq(expected.buckets()));
            // Every spike is kept, now on the hourly row.
            let mut want: Vec<MonitorSpike> =
                windows.iter().flat_map(|w| w.spikes.clone()).collect();
            want.sort_by_key(|s| s.at_unix_ns);
            assert_eq!(spikes, want);
            // Sampler averages are weighted by time (all windows equal here).
            let summary = row.cpu_summary.as_ref().unwrap();
            let ks: Vec<f64> = in_hour
                .iter()
                .filter(|s| s.cpus.iter().any(|w| w.cpu == cpu))
                .map(|s| s.index as f64)
                .collect();
            let mean_k = ks.iter().sum::<f64>() / ks.len() as f64;
            assert!((summary.util_pct.unwrap() - mean_k).abs() < 1e-9);
            assert!((summary.idle_residency_pct[1] - (90.0 - mean_k)).abs() < 1e-9);
        }
    }
    let hourly = store.monitor_sets(s.id, T0, T0 + 2 * HOUR).unwrap();
    assert_eq!(hourly.len(), 2);
    assert_eq!(
        (
            hourly[1].window_index,
            hourly[1].last_window_index,
            hourly[1].windows
        ),
        (12, 23, 12)
    );
    assert_eq!(hourly[1].covered_ns, HOUR);
    let power = &hourly[1].power.as_ref().unwrap()[0];
    let energy: f64 = (12..24).map(|k| (10.0 + k as f64) * 300.0).sum();
    assert!((power.energy_j.unwrap() - energy).abs() < 1e-6);
    assert!((power.avg_w.unwrap() - (10.0 + 17.5)).abs() < 1e-9);
    let thermal = &hourly[1].thermal.as_ref().unwrap()[0];
    assert_eq!(thermal.max_c, 45.0 + 23.0);
    assert_eq!(
        hourly[1].cost_cpu_time_ns,
        Some((12..24).map(|k| 1_000_000 + k).sum())
    );
    // A restarted daemon still continues after the last window.
    assert_eq!(
        store.open_series(&spec("host")).unwrap().next_window_index,
        30
    );

    // Merging again changes nothing; a later cutoff merges the rest of hour 2.
    assert_eq!(
        store.merge_old_windows(s.id, cutoff).unwrap(),
        MergeSummary::default()
    );
    let summary = store.merge_old_windows(s.id, T0 + 3 * HOUR).unwrap();
    assert_eq!(summary.hours, 1);
    assert_eq!(store.monitor_sets(s.id, 0, u64::MAX / 2).unwrap().len(), 3);
    assert!(store.check().unwrap().is_ok());
}

#[test]
fn hourly_rows_merge_again_with_windows_added_later() {
    // Merging is associative: (w0 + w1) + w2 holds what w0 + w1 + w2 holds.
    let (_dir, _, mut store, s) = host_store();
    let sets = window_sets(12, 13);
    for set in &sets[..6] {
        store.insert_window_set(s.id, set).unwrap();
    }
    store.merge_old_windows(s.id, T0 + HOUR).unwrap();
    for set in &sets[6..] {
        store.insert_window_set(s.id, set).unwrap();
    }
    assert_eq!(store.merge_old_windows(s.id, T0 + HOUR).unwrap().hours, 1);
    let mut expected = Histogram::new();
    for set in &sets {
        expected.merge(&set.cpus[0].histogram);
    }
    let (h, spikes) = store.monitor_window_detail(s.id, T0, 0).unwrap().unwrap();
    assert_eq!(h, expected);
    assert_eq!(spikes.len(), 12);
    let row = &store.monitor_sets(s.id, T0, T0 + HOUR).unwrap()[0];
    assert_eq!(
        (row.windows, row.window_index, row.last_window_index),
        (12, 0, 11)
    );
}

/// Windows; per CPU samples, sum, max and missed periods; energy; latlab's CPU time.
type Totals = (u64, BTreeMap<u32, (u64, u64, u64, u64)>, f64, u64);

/// The totals a series should hold after `sets`, computed here from the window sets themselves.
fn expected_totals(sets: &[WindowSet]) -> Totals {
    let mut cpus: BTreeMap<u32, (u64, u64, u64, u64)> = BTreeMap::new();
    for set in sets {
        for w in &set.cpus {
            let e = cpus.entry(w.cpu).or_default();
            e.0 += w.histogram.count();
            e.1 += w.histogram.sum();
            e.2 = e.2.max(w.histogram.max());
            e.3 += w.missed;
        }
    }
    let energy = sets
        .iter()
        .flat_map(|s| s.power.iter().flatten())
        .filter_map(|p| p.energy_j)
        .sum();
    let cost = sets.iter().filter_map(|s| s.cost_cpu_time_ns).sum();
    (sets.len() as u64, cpus, energy, cost)
}

fn observed_totals(t: &SeriesTotals) -> Totals {
    let cpus = t
        .cpus
        .iter()
        .map(|(cpu, c)| {
            let h = &c.histogram;
            (*cpu, (h.count(), h.sum(), h.max(), c.missed))
        })
        .collect();
    (
        t.windows,
        cpus,
        t.power_j["rapl:package-0"],
        t.cost_cpu_time_ns,
    )
}

#[test]
fn totals_follow_every_set_survive_merges_and_are_filled_in_older_stores() {
    let (_dir, path, mut store, s) = host_store();
    assert_eq!(store.series_totals(s.id).unwrap(), None, "no set yet");
    let sets = window_sets(30, 5);
    for (n, set) in sets.iter().enumerate() {
        store.insert_window_set(s.id, set).unwrap();
        let t = store.series_totals(s.id).unwrap().unwrap();
        assert_eq!(t.sets, n as u64 + 1, "the cursor moves with every set");
        assert_eq!(t.newest_start_unix_ns, Some(set.start_unix_ns));
    }
    let kept = store.series_totals(s.id).unwrap().unwrap();
    let want = expected_totals(&sets);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.abs().max(1.0);
    let got = observed_totals(&kept);
    assert_eq!((got.0, &got.1, got.3), (want.0, &want.1, want.3));
    assert!(close(got.2, want.2), "energy {} vs {}", got.2, want.2);
    assert_eq!(kept.first_start_unix_ns, Some(T0));
    assert_eq!(kept.last_end_unix_ns, Some(T0 + 30 * MIN5));
    assert_eq!(kept.last_window_index, Some(29));
    // CPU 0 saw every window: its idle seconds are the residencies times 300 s.
    let c1: f64 = (0..30).map(|k| (90.0 - k as f64) / 100.0 * 300.0).sum();
    assert!(close(kept.cpus[&0].idle_time_s[1], c1));
    assert!(close(kept.cpus[&0].idle_usage[0], 30.0 * 10.0 * 300.0));

    // Rollups: per CPU and hour (three, CPU 1 in each) and day, each its windows merged.
    let hourly = store.monitor_rollups(s.id, HOUR, 0, u64::MAX / 2).unwrap();
    assert_eq!(hourly.len(), 3 * 2);
    for r in &hourly {
        let mut want = WindowSummary {
            start_unix_ns: r.start_unix_ns,
            cpu: r.cpu,
            ..Default::default()
        };
        for w in store
            .monitor_windows(s.id, r.start_unix_ns, r.start_unix_ns + HOUR, Some(r.cpu))
            .unwrap()
        {
            want.merge(&WindowSummary::of_window(&w, MIN5));
        }
        assert_eq!(r, &want);
        assert!(want.windows > 0 && want.freq_mhz.mean().is_some());
    }
    let daily = store
        .monitor_rollups(s.id, DAY_NS, T0 + HOUR, T0 + HOUR + 1)
        .unwrap();
    assert_eq!(
        daily.iter().map(|d| d.windows).collect::<Vec<_>>(),
        [30, 15]
    );
    assert_eq!(daily[0].count, want.1[&0].0);
    assert_eq!(daily[0].max_ns, want.1[&0].2);
    assert_eq!(
        store
            .monitor_rollups(s.id, HOUR, T0 + HOUR, T0 + HOUR + 1)
            .unwrap(),
        hourly[2..4],
        "only the hour the range overlaps"
    );

    // A retention merge changes how windows are kept, not what was measured.
    let merged = store.merge_old_windows(s.id, T0 + 2 * HOUR).unwrap();
    assert_eq!(merged.hours, 2);
    assert_eq!(store.series_totals(s.id).unwrap().unwrap(), kept);
    assert_eq!(
        store.monitor_rollups(s.id, HOUR, 0, u64::MAX / 2).unwrap(),
        hourly
    );
    assert!(store.check().unwrap().is_ok());

    // A store written before totals were kept gains them, from its windows, when opened.
    drop(store);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP INDEX monitor_windows_fine;
         ALTER TABLE monitor_windows DROP COLUMN coarse_shift; DROP TABLE monitor_rollups;
         DROP TABLE monitor_cpu_totals; DROP TABLE monitor_totals;
         ALTER TABLE load_reports DROP COLUMN failed;
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let filled = store.series_totals(s.id).unwrap().unwrap();
    let got = observed_totals(&filled);
    assert_eq!((got.0, &got.1, got.3), (want.0, &want.1, want.3));
    assert!(close(got.2, want.2));
    assert!(close(filled.cpus[&0].idle_time_s[1], c1));
    assert_eq!(filled.last_window_index, Some(29));
    assert_eq!(filled.newest_start_unix_ns, kept.newest_start_unix_ns);
    // Rollups too: the hour still as measured exactly; the merged hours from their hourly rows.
    let refilled = store.monitor_rollups(s.id, HOUR, 0, u64::MAX / 2).unwrap();
    assert_eq!(refilled[4..], hourly[4..]);
    for (a, b) in refilled.iter().zip(&hourly) {
        // (`windows` of a merged hour counts the hour's windows on any CPU: CPU 1 shows 12.)
        let key = |r: &WindowSummary| (r.start_unix_ns, r.cpu, r.count, r.max_ns, r.missed);
        assert_eq!(key(a), key(b));
    }
    assert!(store.check().unwrap().is_ok());

    // db check compares them with the windows.
    drop(store);
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE monitor_cpu_totals SET missed = missed + 1 WHERE cpu = 0",
            [],
        )
        .unwrap();
    let report = Store::open(&path).unwrap().check().unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].starts_with("monitor series host totals cpu0: hold "),
        "{:?}",
        report.problems
    );
}

#[test]
fn old_windows_keep_coarser_histograms_with_exact_statistics_and_merge_as_before() {
    let (_dir, _, mut store, s) = host_store();
    let sets = store_window_sets(&mut store, s.id, 30, 9);
    let totals = store.series_totals(s.id).unwrap();
    let size = |store: &Store, k: usize, cpu: u32| {
        let (h, _) = store
            .monitor_window_detail(s.id, sets[k].start_unix_ns, cpu)
            .unwrap()
            .unwrap();
        (h.encode().len(), h)
    };
    let (fine_bytes, _) = size(&store, 0, 0);
    // Hour 0: 12 windows on CPU 0 and 6 on CPU 1, in batches, oldest first.
    let before = T0 + HOUR;
    assert_eq!(
        store
            .coarsen_old_windows(s.id, before, COARSE_SHIFT, 10)
            .unwrap(),
        10
    );
    assert_eq!(
        store
            .coarsen_old_windows(s.id, before, COARSE_SHIFT, 10)
            .unwrap(),
        8
    );
    assert_eq!(
        store
            .coarsen_old_windows(s.id, before, COARSE_SHIFT, 10)
            .unwrap(),
        0,
        "nothing left"
    );
    for (k, set) in sets.iter().enumerate() {
        for w in &set.cpus {
            let (bytes, h) = size(&store, k, w.cpu);
            let orig = &w.histogram;
            assert_eq!(
                (h.count(), h.min(), h.max(), h.sum()),
                (orig.count(), orig.min(), orig.max(), orig.sum())
            );
            if set.start_unix_ns < before {
                assert!(bytes < fine_bytes, "window {k} cpu{}: {bytes} bytes", w.cpu);
                let (a, b) = (h.percentile(99.0), orig.percentile(99.0));
                assert!(
                    a.abs_diff(b) <= (b >> (10 - COARSE_SHIFT)).max(1 << COARSE_SHIFT) + 100,
                    "p99 {a} vs {b}"
                );
            } else {
                assert_eq!(&h, orig, "window {k} is newer: as measured");
            }
        }
    }
    // The stored percentiles stay as measured; totals do not change; the store checks clean.
    let row = &store.monitor_windows(s.id, T0, T0 + 1, Some(0)).unwrap()[0];
    assert_eq!(row.p99_ns, sets[0].cpus[0].histogram.percentile(99.0));
    assert_eq!(store.series_totals(s.id).unwrap(), totals);
    assert!(store.check().unwrap().is_ok());
    // Coarse windows merge into hourly rows like any other.
    store.merge_old_windows(s.id, T0 + 2 * HOUR).unwrap();
    assert!(store.check().unwrap().is_ok());
    let hour0 = store
        .monitor_windows(s.id, T0, T0 + 1, Some(0))
        .unwrap()
        .remove(0);
    assert_eq!(hour0.windows, 12);
    assert_eq!(
        hour0.count,
        sets[..12]
            .iter()
            .map(|s| s.cpus[0].histogram.count())
            .sum::<u64>()
    );
}

#[test]
fn coarsened_windows_move_to_the_end_of_the_table_so_their_pages_come_free() {
    // Rewritten in place, an aged window would keep the page its full-size histogram filled
    // (a real window's 2.8 KB is one to a page, and SQLite does not merge pages on a shrinking
    // update): measured on `fill-monitor --cpus 64 --span 9d`, 700 MB in place against 577 MB
    // moved. Moved to the end, the rows of old windows leave their pages empty together.
    let (_dir, path, mut store, s) = host_store();
    let sets = store_window_sets(&mut store, s.id, 24, 3);
    let aged = store
        .coarsen_old_windows(s.id, T0 + 12 * MIN5, COARSE_SHIFT, 1000)
        .unwrap();
    assert_eq!(aged, 18);
    let c = Connection::open(&path).unwrap();
    let last_fine: i64 = c
        .query_row(
            "SELECT max(rowid) FROM monitor_windows WHERE coarse_shift = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let first_coarse: i64 = c
        .query_row(
            "SELECT min(rowid) FROM monitor_windows WHERE coarse_shift > 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        first_coarse > last_fine,
        "coarse rows from {first_coarse}, fine up to {last_fine}"
    );
    // Their spikes, statistics and order stay.
    assert!(store.check().unwrap().is_ok());
    for (k, set) in sets.iter().enumerate().take(12) {
        for w in &set.cpus {
            let (h, spikes) = store
                .monitor_window_detail(s.id, set.start_unix_ns, w.cpu)
                .unwrap()
                .unwrap();
            assert_eq!(
                (h.count(), h.max()),
                (w.histogram.count(), w.histogram.max()),
                "{k}"
            );
            assert_eq!(spikes.len(), 1);
        }
    }
    let rows = store
        .monitor_windows(s.id, T0, T0 + 24 * MIN5, Some(0))
        .unwrap();
    assert!(
        rows.windows(2)
            .all(|p| p[0].start_unix_ns < p[1].start_unix_ns)
    );
}

/// A snapshot reads one state of the store: a set another connection stores meanwhile is not
/// seen inside it, and is after it.
#[test]
fn a_snapshot_does_not_see_what_is_written_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut writer = Store::open(&path).unwrap();
    let s = writer.open_series(&spec("host")).unwrap();
    let sets = window_sets(3, 9);
    writer.insert_window_set(s.id, &sets[0]).unwrap();
    let reader = Store::open_existing(&path).unwrap();
    let windows = |st: &Store| st.series_extents().unwrap()[0].windows;
    let (before, during) = reader
        .snapshot(|r| {
            let before = windows(r);
            writer.insert_window_set(s.id, &sets[1]).unwrap();
            Ok((before, windows(r)))
        })
        .unwrap();
    assert_eq!(before, during, "the snapshot saw a write made during it");
    assert!(
        windows(&reader) > during,
        "the write is seen after the snapshot"
    );
}
