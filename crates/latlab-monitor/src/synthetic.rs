//! A monitoring series of many CPUs over a long span, written as the daemon writes one: for
//! measuring the store, the dashboard and `/metrics` at a size no test machine reaches (64 or
//! 256 CPUs, a year). Every window goes through the store's `insert_window_set`, every mark
//! through `add_annotation`, and the retention merge runs once per simulated hour as the
//! keeper runs it (and with it the coarsening of histograms older than a week), so the file
//! holds what a daemon's would, merged hours and aged windows included.
//!
//! The windows are invented, and said to be: the series is named as given, its configuration
//! says `synthetic`, and its first annotation says how it was made. Each CPU-window's histogram
//! has the shape of a real one at the interval (a body of a few hundred populated buckets, a
//! tail, an occasional spike). Each window set is drawn from its own seed, so the same
//! arguments give the same windows, and a fill resumed with `--resume` writes what an
//! uninterrupted one would.

use crate::keeper::retention_step;
use latlab_hist::Histogram;
use latlab_model::monitor::{MonitorSpike, MonitorWindow, SeriesConfig, WindowSet};
use latlab_model::rng::SplitMix64 as Rng;
use latlab_model::samples::CpuSummary;
use latlab_model::{MeasureConfig, SystemInfo};
use latlab_store::{Annotation, HOUR_NS, SeriesId, SeriesSpec, Store, StoreError};
use std::time::{Duration, Instant};

/// What to write.
#[derive(Debug, Clone)]
pub struct Synthetic {
    pub name: String,
    pub cpus: u32,
    pub window_ns: u64,
    /// The series ends at `end_unix_ns` and starts this long before.
    pub span_ns: u64,
    /// Where the series ends (rounded down to a window); `None`: now.
    pub end_unix_ns: Option<u64>,
    pub interval_ns: u64,
    pub retention_ns: u64,
    pub seed: u64,
    /// Write every window first and run retention only at the end, step by step until nothing
    /// is left to do (as a daemon does after a long stop): for timing a backlog's merge.
    pub retention_at_end: bool,
    /// Go on with a series an earlier fill left unfinished (the same spec).
    pub resume: bool,
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub sets: u64,
    pub merged_hours: u64,
    /// Per-CPU windows whose histograms were coarsened as they aged.
    pub coarsened: u64,
    /// Retention steps taken (each holds the store as the daemon's would).
    pub retention_steps: u64,
    /// The longest of them, and all of them together.
    pub longest_step: Duration,
    pub retention_time: Duration,
}

/// One CPU's window: about `periods` samples (the body's uneven draws may leave a few
/// hundredths of a percent out) in a body of 2 to 40 µs, a tail to 150 µs, and one
/// window in about 200 a spike of up to 2 ms.
fn window(rng: &mut Rng, cpu: u32, start: u64, periods: u64) -> MonitorWindow {
    let mut h = Histogram::new();
    let base = 2_000 + u64::from(cpu % 7) * 300;
    let mut left = periods;
    // The body: 1500 values spread over 2..40 µs, weighted towards the low end (a real
    // 5-minute window at 200 µs populates some thousands of buckets: about 4 KiB encoded).
    const BODY: u64 = 1500;
    for i in 0..BODY {
        // Counts as uneven as a real window's (even ones would compress unlike them).
        let n = (1 + rng.below(2 * (left / (BODY - i)).max(1))).min(left);
        let v = base + rng.below(38_000 * (i + 1) / BODY);
        h.record_n(v, n);
        left -= n;
        if left == 0 {
            break;
        }
    }
    // The tail: a few samples up to 150 µs.
    for _ in 0..rng.below(20) {
        h.record(40_000 + rng.below(110_000));
    }
    let mut spikes = Vec::new();
    if rng.below(200) == 0 {
        let v = 150_000 + rng.below(1_850_000);
        h.record(v);
        spikes.push(MonitorSpike {
            at_unix_ns: start + rng.below(1_000_000_000),
            value_ns: v,
        });
    }
    MonitorWindow {
        cpu,
        histogram: h,
        missed: u64::from(rng.below(500) == 0),
        cpu_summary: Some(CpuSummary {
            cpu: cpu as usize,
            avg_freq_khz: Some(2_000_000 + rng.below(400_000)),
            util_pct: Some(rng.below(1000) as f64 / 10.0),
            irqs_per_s: Some(1000.0 + rng.below(500) as f64),
            ..Default::default()
        }),
        spikes,
    }
}

/// Write `spec`'s series into `store`, calling `progress` with the sets written so far now and
/// then. The series must not exist yet, unless `spec.resume`: then it must, and the fill goes on
/// after its last stored window set (each set is drawn from its own seed, so a resumed fill
/// writes what an uninterrupted one would).
pub fn fill(
    store: &mut Store,
    spec: &Synthetic,
    system: SystemInfo,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Written, StoreError> {
    let total = spec.span_ns / spec.window_ns;
    let (id, first, from) = match (store.find_series(&spec.name)?, spec.resume) {
        (Some(_), false) => {
            return Err(StoreError::Invalid(format!(
                "the store already has a series {:?}",
                spec.name
            )));
        }
        (None, true) => {
            return Err(StoreError::Invalid(format!(
                "the store has no series {:?} to resume",
                spec.name
            )));
        }
        (Some(id), true) => {
            let t = store.series_totals(id)?.unwrap_or_default();
            let first = t.first_start_unix_ns.ok_or_else(|| {
                StoreError::Invalid(format!(
                    "series {:?} has no window to resume after",
                    spec.name
                ))
            })?;
            (id, first, t.last_window_index.map_or(0, |k| k + 1))
        }
        (None, false) => {
            let end = spec.end_unix_ns.unwrap_or_else(crate::unix_now_ns) / spec.window_ns
                * spec.window_ns;
            let first = end - total * spec.window_ns;
            (create(store, spec, system, first)?, first, 0)
        }
    };
    let periods = spec.window_ns / spec.interval_ns.max(1);
    let mut written = Written::default();
    for k in from..total {
        let start = first + k * spec.window_ns;
        let mut rng = set_rng(spec.seed, k);
        let set = WindowSet {
            index: k,
            start_unix_ns: start,
            end_unix_ns: start + spec.window_ns,
            cpus: (0..spec.cpus)
                .map(|c| window(&mut rng, c, start, periods))
                .collect(),
            power: None,
            thermal: None,
            cost_cpu_time_ns: Some(periods * u64::from(spec.cpus) * 3_000),
        };
        store.insert_window_set(id, &set)?;
        written.sets += 1;
        let t = set.end_unix_ns;
        // The keeper's hourly merge and ageing, on the series' own clock.
        if t / HOUR_NS != start / HOUR_NS && !spec.retention_at_end {
            retain(store, id, t, spec.retention_ns, &mut written)?;
        }
        if k % 1000 == 0 {
            progress(k, total);
        }
    }
    if spec.retention_at_end {
        let end = first + total * spec.window_ns;
        retain(store, id, end, spec.retention_ns, &mut written)?;
    }
    Ok(written)
}

/// The generator of window set `k`: its own stream, started at the mixed (seed, k) so that no
/// two sets' draws run along each other.
fn set_rng(seed: u64, k: u64) -> Rng {
    Rng(Rng(seed.wrapping_add(k.wrapping_mul(0xD1B5_4A32_D192_ED03))).next())
}

/// Open the series, said to be synthetic in its configuration and its first annotation.
fn create(
    store: &mut Store,
    spec: &Synthetic,
    system: SystemInfo,
    first: u64,
) -> Result<SeriesId, StoreError> {
    let measure = MeasureConfig {
        interval_ns: spec.interval_ns,
        window_ns: spec.window_ns,
        cpus: Some((0..spec.cpus).collect()),
        threads: spec.cpus,
        ..Default::default()
    };
    let config = SeriesConfig {
        profile: "none".into(),
        schedule: Some("synthetic".into()),
        retention_ns: spec.retention_ns,
        ..SeriesConfig::new(&system, measure)
    };
    let series = store.open_series(&SeriesSpec {
        name: spec.name.clone(),
        window_ns: spec.window_ns,
        config,
        system: Some(system),
        idle_states: Vec::new(),
    })?;
    store.add_annotation(
        series.id,
        &Annotation {
            at_unix_ns: first,
            cpu: None,
            kind: "start".into(),
            text: format!(
                "synthetic series: {} CPUs, windows of {}, written by latlab's generator",
                spec.cpus,
                latlab_model::units::format_duration(spec.window_ns)
            ),
        },
    )?;
    Ok(series.id)
}

/// The keeper's retention at `now`: its steps, until none is left, each timed.
fn retain(
    store: &mut Store,
    series: SeriesId,
    now: u64,
    retention_ns: u64,
    written: &mut Written,
) -> Result<(), StoreError> {
    loop {
        let t = Instant::now();
        let step = retention_step(store, series, now, retention_ns);
        let took = t.elapsed();
        written.retention_steps += 1;
        written.longest_step = written.longest_step.max(took);
        written.retention_time += took;
        let more = step.more();
        written.merged_hours += step.merged?.hours;
        written.coarsened += step.aged?;
        if !more {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_synthetic_series_is_stored_whole_and_merged_past_its_retention() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let spec = Synthetic {
            name: "synthetic-2".into(),
            cpus: 2,
            window_ns: 300_000_000_000,
            span_ns: 86_400_000_000_000,
            end_unix_ns: None,
            interval_ns: 200_000,
            retention_ns: 43_200_000_000_000,
            seed: 7,
            retention_at_end: false,
            resume: false,
        };
        let w = fill(&mut store, &spec, SystemInfo::default(), &mut |_, _| {}).unwrap();
        assert_eq!(w.sets, 288, "a day of 5-minute windows");
        assert!(w.merged_hours >= 11, "the older half merged hourly: {w:?}");
        let id = store.find_series("synthetic-2").unwrap().unwrap();
        let sets = store.monitor_sets(id, 0, u64::MAX >> 1).unwrap();
        let windows: u64 = sets.iter().map(|s| s.windows).sum();
        assert_eq!(windows, 288, "every window kept, merged or not");
        assert!(sets.len() < 288 && sets.len() > 144, "{}", sets.len());
        let rows = store
            .monitor_windows(id, sets[sets.len() - 1].start_unix_ns, u64::MAX >> 1, None)
            .unwrap();
        assert_eq!(rows.len(), 2, "one row per CPU");
        assert!(rows.iter().all(|r| r.count >= 1_485_000), "{rows:?}");
        assert!(store.check().unwrap().problems.is_empty());
        assert_eq!(w.coarsened, 0, "nothing a week old");
        // Again: refused, the series exists.
        let again = fill(&mut store, &spec, SystemInfo::default(), &mut |_, _| {});
        assert!(again.unwrap_err().to_string().contains("already has"));
    }

    #[test]
    fn a_backlog_is_merged_an_hour_a_step_into_what_hourly_retention_gives() {
        let hour = HOUR_NS;
        let spec = |at_end| Synthetic {
            name: "backlog".into(),
            cpus: 2,
            window_ns: 300_000_000_000,
            span_ns: 48 * hour,
            // One end for both fills (now could cross a window between them).
            end_unix_ns: Some(1_795_000_000 * 1_000_000_000),
            interval_ns: 200_000,
            retention_ns: 24 * hour,
            seed: 5,
            retention_at_end: at_end,
            resume: false,
        };
        let dir = tempfile::tempdir().unwrap();
        let mut sets = Vec::new();
        for at_end in [false, true] {
            let mut store = Store::open(dir.path().join(format!("{at_end}.db"))).unwrap();
            let w = fill(
                &mut store,
                &spec(at_end),
                SystemInfo::default(),
                &mut |_, _| {},
            )
            .unwrap();
            if at_end {
                assert!((23..=25).contains(&w.merged_hours), "{w:?}");
                assert_eq!(
                    w.retention_steps,
                    w.merged_hours + 1,
                    "one hour a step: {w:?}"
                );
            }
            let id = store.find_series("backlog").unwrap().unwrap();
            let rows = store.monitor_sets(id, 0, u64::MAX >> 1).unwrap();
            let spans: Vec<_> = rows.iter().map(|s| (s.start_unix_ns, s.windows)).collect();
            assert!(store.check().unwrap().problems.is_empty());
            sets.push(spans);
        }
        assert_eq!(sets[0], sets[1], "the same hourly rows either way");
    }

    #[test]
    fn a_resumed_fill_writes_what_an_uninterrupted_one_would() {
        let hour = HOUR_NS;
        let spec = |span_ns, resume| Synthetic {
            name: "r".into(),
            cpus: 2,
            window_ns: 300_000_000_000,
            span_ns,
            end_unix_ns: None,
            interval_ns: 1_000_000,
            retention_ns: 90 * 24 * hour,
            seed: 4,
            retention_at_end: false,
            resume,
        };
        let run = |store: &mut Store, span_ns, resume| {
            fill(
                store,
                &spec(span_ns, resume),
                SystemInfo::default(),
                &mut |_, _| {},
            )
        };
        let dir = tempfile::tempdir().unwrap();
        let mut whole = Store::open(dir.path().join("w.db")).unwrap();
        run(&mut whole, 6 * hour, false).unwrap();
        let mut parts = Store::open(dir.path().join("p.db")).unwrap();
        let fail = run(&mut parts, 6 * hour, true);
        assert!(fail.unwrap_err().to_string().contains("no series"));
        run(&mut parts, 3 * hour, false).unwrap();
        assert_eq!(
            run(&mut parts, 6 * hour, true).unwrap().sets,
            36,
            "the second half"
        );
        assert_eq!(
            run(&mut parts, 6 * hour, true).unwrap().sets,
            0,
            "nothing left"
        );
        let windows = |store: &Store| {
            let id = store.find_series("r").unwrap().unwrap();
            let sets = store.monitor_sets(id, 0, u64::MAX >> 1).unwrap();
            let rows = store.monitor_windows(id, 0, u64::MAX >> 1, None).unwrap();
            let first = sets[0].start_unix_ns;
            rows.iter()
                .map(|w| {
                    let (h, _) = store
                        .monitor_window_detail(id, w.start_unix_ns, w.cpu)
                        .unwrap()
                        .unwrap();
                    (
                        (w.start_unix_ns - first) / 300_000_000_000,
                        w.cpu,
                        w.missed,
                        h,
                    )
                })
                .collect::<Vec<_>>()
        };
        let (a, b) = (windows(&whole), windows(&parts));
        assert_eq!(a.len(), 144);
        assert!(a == b, "the same windows, set for set");
        assert!(parts.check().unwrap().problems.is_empty());
    }

    #[test]
    fn consecutive_window_sets_draw_from_unrelated_streams() {
        let draws = |k| {
            let mut r = set_rng(1, k);
            (0..256)
                .map(|_| r.next())
                .collect::<std::collections::BTreeSet<u64>>()
        };
        // (Seeds of seed ^ k × the generator's own increment gave set k + 2 the stream of set
        // k two draws on: every other set repeated its neighbour's windows.)
        for k in [0, 1, 41, 50_000] {
            for d in 1..=3 {
                let (a, b) = (draws(k), draws(k + d));
                assert_eq!(a.intersection(&b).count(), 0, "sets {k} and {}", k + d);
            }
        }
    }

    #[test]
    fn windows_older_than_a_week_are_coarsened_as_the_keeper_ages_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let hour = HOUR_NS;
        let spec = Synthetic {
            name: "aged".into(),
            cpus: 1,
            window_ns: hour,
            span_ns: 8 * 24 * hour,
            end_unix_ns: None,
            interval_ns: 200_000,
            retention_ns: 90 * 24 * hour,
            seed: 3,
            retention_at_end: false,
            resume: false,
        };
        let w = fill(&mut store, &spec, SystemInfo::default(), &mut |_, _| {}).unwrap();
        assert_eq!(w.sets, 192);
        assert!(
            (23..=25).contains(&w.coarsened),
            "a day of hourly windows: {w:?}"
        );
        let id = store.find_series("aged").unwrap().unwrap();
        let rows = store.monitor_windows(id, 0, u64::MAX >> 1, None).unwrap();
        let bytes = |r: &latlab_store::MonitorWindowRow| {
            let (h, _) = store
                .monitor_window_detail(id, r.start_unix_ns, r.cpu)
                .unwrap()
                .unwrap();
            h.encode().len()
        };
        let (old, new) = (bytes(&rows[0]), bytes(&rows[rows.len() - 1]));
        assert!(old * 2 < new, "aged {old} bytes, new {new} bytes");
        assert!(store.check().unwrap().problems.is_empty());
    }
}
