//! Running totals of a monitoring series: what it has measured since it began, per CPU (the
//! merged histogram, missed periods, time in each idle state) and over the series (windows, energy,
//! latlab's own CPU time). They are kept in the transaction that stores each window set, so a
//! reader such as `/metrics` reads one row per CPU instead of every window's histogram (a year on
//! 64 CPUs is millions of them). Retention merges leave them as they are: a merge changes how
//! windows are kept, not what was measured. `db check` compares them with the windows.

use crate::monitor::{SeriesId, WINDOW_COLUMNS, WindowSetRow, finish_window, window_row};
use crate::rollups::WindowSummary;
use crate::{Result, Store, decode_hist, from_json, from_sql, opt_from_sql, to_json, to_sql};
use latlab_hist::Histogram;
use latlab_model::monitor::MonitorWindow;
use latlab_model::samples::CpuSummary;
use rusqlite::{OptionalExtension, Transaction, params};
use std::collections::BTreeMap;

/// One CPU's totals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuTotals {
    /// Every sample of every window, merged.
    pub histogram: Histogram,
    pub missed: u64,
    /// Seconds in each idle state (the series' idle-state columns), from the samplers'
    /// residencies weighted by the time each window covers.
    pub idle_time_s: Vec<f64>,
    /// Entries into each idle state.
    pub idle_usage: Vec<f64>,
}

/// A series' totals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesTotals {
    /// Window sets counted (grows with each set stored: a reader's cursor).
    pub sets: u64,
    /// Windows counted.
    pub windows: u64,
    /// CPU time latlab itself used.
    pub cost_cpu_time_ns: u64,
    /// Energy per power source, joules.
    pub power_j: BTreeMap<String, f64>,
    pub first_start_unix_ns: Option<u64>,
    pub last_end_unix_ns: Option<u64>,
    pub last_window_index: Option<u64>,
    /// Start of the newest window set counted.
    pub newest_start_unix_ns: Option<u64>,
    pub cpus: BTreeMap<u32, CpuTotals>,
}

impl SeriesTotals {
    /// Count one window set (its per-CPU rows go through [`CpuTotals::add`]).
    pub(crate) fn add_set(&mut self, set: &WindowSetRow) {
        self.sets += 1;
        self.windows += set.windows;
        self.cost_cpu_time_ns += set.cost_cpu_time_ns.unwrap_or(0);
        for p in set.power.iter().flatten() {
            // A source that gave no reading (or 0 J: a meter that stood still) counts nothing,
            // and is no counter of its own until it does.
            let j = p
                .energy_j
                .or_else(|| p.avg_w.map(|w| w * set.covered_ns as f64 / 1e9))
                .unwrap_or(0.0);
            if j > 0.0 {
                *self.power_j.entry(p.name.clone()).or_default() += j;
            }
        }
        let min = |a: Option<u64>, b| Some(a.map_or(b, |a: u64| a.min(b)));
        let max = |a: Option<u64>, b| Some(a.map_or(b, |a: u64| a.max(b)));
        self.first_start_unix_ns = min(self.first_start_unix_ns, set.start_unix_ns);
        self.last_end_unix_ns = max(self.last_end_unix_ns, set.end_unix_ns);
        self.last_window_index = max(self.last_window_index, set.last_window_index);
        self.newest_start_unix_ns = max(self.newest_start_unix_ns, set.start_unix_ns);
    }
}

impl CpuTotals {
    /// Count one CPU's window that covered `covered_ns`.
    pub(crate) fn add(
        &mut self,
        h: &Histogram,
        missed: u64,
        summary: Option<&CpuSummary>,
        covered_ns: u64,
    ) {
        self.histogram.merge(h);
        self.missed += missed;
        let Some(sum) = summary else { return };
        let secs = covered_ns as f64 / 1e9;
        let add = |into: &mut Vec<f64>, values: &[f64], scale: f64| {
            if into.len() < values.len() {
                into.resize(values.len(), 0.0);
            }
            for (t, v) in into.iter_mut().zip(values) {
                *t += v * scale;
            }
        };
        add(&mut self.idle_time_s, &sum.idle_residency_pct, secs / 100.0);
        add(&mut self.idle_usage, &sum.idle_entries_per_s, secs);
    }
}

/// Read a series' totals within a transaction or on the store's connection.
fn read(conn: &rusqlite::Connection, series: SeriesId) -> Result<Option<SeriesTotals>> {
    let row = conn
        .query_row(
            "SELECT sets, windows, cost_cpu_time_ns, power_j, first_start_unix_ns,
                 last_end_unix_ns, last_window_index, newest_start_unix_ns
             FROM monitor_totals WHERE series_id = ?1",
            [series.0],
            |r| {
                Ok((
                    SeriesTotals {
                        sets: from_sql(r.get(0)?),
                        windows: from_sql(r.get(1)?),
                        cost_cpu_time_ns: from_sql(r.get(2)?),
                        power_j: BTreeMap::new(),
                        first_start_unix_ns: opt_from_sql(r.get(4)?),
                        last_end_unix_ns: opt_from_sql(r.get(5)?),
                        last_window_index: opt_from_sql(r.get(6)?),
                        newest_start_unix_ns: opt_from_sql(r.get(7)?),
                        cpus: BTreeMap::new(),
                    },
                    r.get::<_, String>(3)?,
                ))
            },
        )
        .optional()?;
    let Some((mut totals, power)) = row else {
        return Ok(None);
    };
    let what = format!("monitor series {} totals", series.0);
    totals.power_j = from_json(&power, &what)?;
    let mut stmt = conn.prepare(
        "SELECT cpu, missed, histogram, idle_time_s, idle_usage FROM monitor_cpu_totals
         WHERE series_id = ?1 ORDER BY cpu",
    )?;
    let rows = stmt
        .query_map([series.0], |r| {
            Ok((
                r.get::<_, u32>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Vec<u8>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for (cpu, missed, hist, time, usage) in rows {
        let what = format!("{what} cpu{cpu}");
        totals.cpus.insert(
            cpu,
            CpuTotals {
                histogram: decode_hist(&hist, &what)?,
                missed: from_sql(missed),
                idle_time_s: from_json(&time, &what)?,
                idle_usage: from_json(&usage, &what)?,
            },
        );
    }
    Ok(Some(totals))
}

/// Write a series' totals (every CPU in `totals.cpus`; CPUs not in it are left as stored).
fn write(tx: &Transaction<'_>, series: SeriesId, t: &SeriesTotals) -> Result<()> {
    let opt = |v: Option<u64>| v.map(to_sql);
    tx.execute(
        "INSERT OR REPLACE INTO monitor_totals (series_id, sets, windows, cost_cpu_time_ns,
             power_j, first_start_unix_ns, last_end_unix_ns, last_window_index,
             newest_start_unix_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            series.0,
            to_sql(t.sets),
            to_sql(t.windows),
            to_sql(t.cost_cpu_time_ns),
            to_json(&t.power_j),
            opt(t.first_start_unix_ns),
            opt(t.last_end_unix_ns),
            opt(t.last_window_index),
            opt(t.newest_start_unix_ns),
        ],
    )?;
    let mut stmt = tx.prepare(
        "INSERT OR REPLACE INTO monitor_cpu_totals (series_id, cpu, missed, histogram,
             idle_time_s, idle_usage)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (cpu, c) in &t.cpus {
        stmt.execute(params![
            series.0,
            cpu,
            to_sql(c.missed),
            c.histogram.encode_quick(),
            to_json(&c.idle_time_s),
            to_json(&c.idle_usage),
        ])?;
    }
    Ok(())
}

/// Add a newly stored window set (its row, and its CPUs' windows) to its series' totals (inside
/// the transaction storing it).
pub(crate) fn add_window_set(
    tx: &Transaction<'_>,
    series: SeriesId,
    set: &WindowSetRow,
    cpus: &[MonitorWindow],
) -> Result<()> {
    let mut totals = read(tx, series)?.unwrap_or_default();
    totals.add_set(set);
    for w in cpus {
        totals.cpus.entry(w.cpu).or_default().add(
            &w.histogram,
            w.missed,
            w.cpu_summary.as_ref(),
            set.covered_ns,
        );
    }
    write(tx, series, &totals)
}

/// Compute every series' totals and rollups from its stored windows (for stores written before
/// they were kept; run once, by the migration that adds them).
pub(crate) fn rebuild_all(tx: &Transaction<'_>) -> Result<()> {
    let ids = tx
        .prepare("SELECT id FROM monitor_series ORDER BY id")?
        .query_map([], |r| r.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for id in ids {
        let series = SeriesId(id);
        let mut totals = SeriesTotals::default();
        let mut covered = BTreeMap::new();
        for set in crate::monitor::sets_ending_by(tx, series, crate::monitor::END_OF_TIME)? {
            totals.add_set(&set);
            covered.insert(set.start_unix_ns, set.covered_ns);
        }
        let mut stmt = tx.prepare(&format!(
            "SELECT {WINDOW_COLUMNS}, w.cpu_summary, w.histogram
             FROM monitor_windows w JOIN monitor_sets s
                 ON s.series_id = w.series_id AND s.start_unix_ns = w.start_unix_ns
             WHERE w.series_id = ?1 ORDER BY w.start_unix_ns, w.cpu"
        ))?;
        let mut rollups = crate::rollups::Rebuild::default();
        let mut rows = stmt.query([id])?;
        while let Some(r) = rows.next()? {
            let window = finish_window(window_row(r)?)?;
            let what = format!("monitor window {} cpu{}", window.start_unix_ns, window.cpu);
            let h = decode_hist(&r.get::<_, Vec<u8>>(11)?, &what)?;
            let covered = covered.get(&window.start_unix_ns).copied().unwrap_or(0);
            totals.cpus.entry(window.cpu).or_default().add(
                &h,
                window.missed,
                window.cpu_summary.as_ref(),
                covered,
            );
            rollups.add(&WindowSummary::of_window(&window, covered));
        }
        rollups.write(tx, series)?;
        if totals.sets > 0 {
            write(tx, series, &totals)?;
        }
    }
    Ok(())
}

impl Store {
    /// A series' totals since it began; `None` before its first window set.
    pub fn series_totals(&self, series: SeriesId) -> Result<Option<SeriesTotals>> {
        read(&self.conn, series)
    }

    /// The CPUs a series has measured, from its totals (no histogram read).
    pub fn series_cpus(&self, series: SeriesId) -> Result<Vec<u32>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT cpu FROM monitor_cpu_totals WHERE series_id = ?1 ORDER BY cpu",
        )?;
        Ok(stmt
            .query_map([series.0], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
