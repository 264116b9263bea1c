//! Monitoring series for `latlab monitor`: one set of per-CPU windows written per transaction,
//! queries over time ranges, annotations, and the retention merge of old windows into hourly rows.
//!
//! Times here are unix nanoseconds (wall clock), since a series outlives any one process.

use crate::rollups::Weighted;
use crate::{
    Result, Store, StoreError, decode_hist, from_json, from_sql, now_rfc3339, opt_from_sql,
    opt_to_sql, system_id, to_json, to_sql,
};
use latlab_hist::Histogram;
use latlab_model::SystemInfo;
pub use latlab_model::monitor::{MonitorSpike, MonitorWindow, SeriesConfig, WindowSet};
use latlab_model::samples::{CpuIdleStates, CpuSummary, PowerSource, ThermalSummary};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::collections::BTreeMap;

/// Length of a retention row.
pub const HOUR_NS: u64 = 3_600_000_000_000;

/// The latest time the store's signed columns hold (unix ns): the end of an open range.
pub const END_OF_TIME: u64 = i64::MAX as u64;

/// The store's number for a monitoring series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct SeriesId(pub i64);

/// Window sets a daemon could not store, kept in a file (JSON) that `latlab db import-json`
/// stores: the series they belong to, and the sets in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UnsavedWindows {
    /// The series (its key names the file's kind).
    pub unsaved_windows: SeriesSpec,
    /// The store they were measured for, absolute: a daemon of the series on it stores them
    /// itself (files written before it was recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<std::path::PathBuf>,
    /// When the series was made in that store ([`SeriesState::created_at`]): a store made
    /// again at the same path holds another series of the name, whose windows these are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_created: Option<String>,
    pub sets: Vec<WindowSet>,
}

/// What a daemon measures with: given when it opens (or continues) its series.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SeriesSpec {
    /// The series' name; a daemon restarted with the same name continues the series.
    pub name: String,
    pub window_ns: u64,
    /// The measuring configuration (interval, method, priority, CPUs, …), stored as JSON.
    pub config: SeriesConfig,
    pub system: Option<SystemInfo>,
    /// Names of the idle states per CPU (the columns of [`CpuSummary`]'s residency vectors).
    pub idle_states: Vec<CpuIdleStates>,
}

/// A series as opened: where a continuing daemon picks up.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesState {
    pub id: SeriesId,
    pub name: String,
    pub window_ns: u64,
    /// True when the series existed (a restarted daemon continues it).
    pub resumed: bool,
    /// The index the next window should carry (one past the last stored one).
    pub next_window_index: u64,
    /// End of the last stored window.
    pub last_end_unix_ns: Option<u64>,
    pub created_at: String,
}

/// A stored window set (without its per-CPU rows).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowSetRow {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub window_index: u64,
    pub last_window_index: u64,
    /// Windows merged into this row (1: as measured).
    pub windows: u64,
    /// Time its windows cover (less any gaps between merged windows).
    pub covered_ns: u64,
    pub power: Option<Vec<PowerSource>>,
    pub thermal: Option<Vec<ThermalSummary>>,
    pub cost_cpu_time_ns: Option<u64>,
}

/// One stored per-CPU window (statistics; the histogram is read with
/// [`Store::monitor_window_detail`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorWindowRow {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub cpu: u32,
    /// Windows merged into this row (1: as measured).
    pub windows: u64,
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub missed: u64,
    pub cpu_summary: Option<CpuSummary>,
}

/// How far a series reaches: read from its window sets alone (one row per window or merged
/// hour), without the per-CPU rows. The web API's status serves it as it is, under the JSON names
/// given here.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesExtent {
    pub id: SeriesId,
    pub name: String,
    pub window_ns: u64,
    /// Windows stored, each merged one counted.
    pub windows: u64,
    #[serde(rename = "first_start_ns")]
    pub first_start_unix_ns: Option<u64>,
    #[serde(rename = "last_end_ns")]
    pub last_end_unix_ns: Option<u64>,
    #[serde(rename = "last_index")]
    pub last_window_index: Option<u64>,
}

/// A mark on a series' time axis: a profile applied, a schedule switch, a start or stop, a note.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub at_unix_ns: u64,
    /// The CPU it concerns, if one.
    pub cpu: Option<u32>,
    /// e.g. `schedule`, `profile`, `start`, `stop`, `note`.
    pub kind: String,
    pub text: String,
}

/// What a retention merge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeSummary {
    /// Hourly rows written.
    pub hours: u64,
    /// Window sets merged into them (including the one each hourly row reuses).
    pub sets_merged: u64,
}

const SET_COLUMNS: &str = "start_unix_ns, end_unix_ns, window_index, last_window_index, windows,
    covered_ns, power, thermal, cost_cpu_time_ns";

fn set_row(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(WindowSetRow, Option<String>, Option<String>)> {
    Ok((
        WindowSetRow {
            start_unix_ns: from_sql(r.get(0)?),
            end_unix_ns: from_sql(r.get(1)?),
            window_index: from_sql(r.get(2)?),
            last_window_index: from_sql(r.get(3)?),
            windows: from_sql(r.get(4)?),
            covered_ns: from_sql(r.get(5)?),
            power: None,
            thermal: None,
            cost_cpu_time_ns: opt_from_sql(r.get(8)?),
        },
        r.get(6)?,
        r.get(7)?,
    ))
}

fn finish_set(
    (mut row, power, thermal): (WindowSetRow, Option<String>, Option<String>),
) -> Result<WindowSetRow> {
    let what = format!("monitor window set at {}", row.start_unix_ns);
    row.power = power.map(|p| from_json(&p, &what)).transpose()?;
    row.thermal = thermal.map(|t| from_json(&t, &what)).transpose()?;
    Ok(row)
}

impl WindowSetRow {
    /// The row a measured window set is stored as: one window, covering all its time.
    pub(crate) fn of(set: &WindowSet) -> WindowSetRow {
        WindowSetRow {
            start_unix_ns: set.start_unix_ns,
            end_unix_ns: set.end_unix_ns,
            window_index: set.index,
            last_window_index: set.index,
            windows: 1,
            covered_ns: set.end_unix_ns - set.start_unix_ns,
            power: set.power.clone(),
            thermal: set.thermal.clone(),
            cost_cpu_time_ns: set.cost_cpu_time_ns,
        }
    }
}

impl MonitorWindowRow {
    /// The row of one CPU's window in `set`, its statistics from its histogram.
    pub(crate) fn of(
        set: &WindowSetRow,
        cpu: u32,
        h: &Histogram,
        missed: u64,
        cpu_summary: Option<CpuSummary>,
    ) -> MonitorWindowRow {
        MonitorWindowRow {
            start_unix_ns: set.start_unix_ns,
            end_unix_ns: set.end_unix_ns,
            cpu,
            windows: set.windows,
            count: h.count(),
            min_ns: h.min(),
            max_ns: h.max(),
            p99_ns: h.percentile(99.0),
            p99_9_ns: h.percentile(99.9),
            missed,
            cpu_summary,
        }
    }
}

/// A series' window sets that end by `end_unix_ns`, oldest first (within a transaction or on the
/// store's connection).
pub(crate) fn sets_ending_by(
    conn: &rusqlite::Connection,
    series: SeriesId,
    end_unix_ns: u64,
) -> Result<Vec<WindowSetRow>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {SET_COLUMNS} FROM monitor_sets
         WHERE series_id = ?1 AND end_unix_ns <= ?2 ORDER BY start_unix_ns"
    ))?;
    let rows = stmt
        .query_map(params![series.0, to_sql(end_unix_ns)], set_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(finish_set).collect()
}

/// The number the next window of `series` takes (one past its last stored), and the end of its
/// last stored window.
fn series_end(conn: &rusqlite::Connection, series: SeriesId) -> Result<(u64, Option<u64>)> {
    let (last_index, last_end): (Option<i64>, Option<i64>) = conn.query_row(
        "SELECT max(last_window_index), max(end_unix_ns) FROM monitor_sets WHERE series_id = ?1",
        [series.0],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok((
        last_index.map_or(0, |l| from_sql(l) + 1),
        opt_from_sql(last_end),
    ))
}

impl Store {
    /// Open the series named in `spec`, creating it or continuing it (its configuration, system
    /// and idle-state names are updated to the spec's).
    pub fn open_series(&mut self, spec: &SeriesSpec) -> Result<SeriesState> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let system = spec
            .system
            .as_ref()
            .map(|s| system_id(&tx, s))
            .transpose()?;
        let now = now_rfc3339();
        let existing: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, created_at FROM monitor_series WHERE name = ?1",
                [&spec.name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (id, created_at, resumed) = match existing {
            Some((id, created)) => {
                tx.execute(
                    "UPDATE monitor_series SET window_ns = ?2, config = ?3, idle_states = ?4,
                         system_id = coalesce(?5, system_id), updated_at = ?6 WHERE id = ?1",
                    params![
                        id,
                        to_sql(spec.window_ns),
                        to_json(&spec.config.to_value()),
                        to_json(&spec.idle_states),
                        system,
                        now
                    ],
                )?;
                (id, created, true)
            }
            None => {
                tx.execute(
                    "INSERT INTO monitor_series (name, system_id, window_ns, config, idle_states,
                         created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                    params![
                        spec.name,
                        system,
                        to_sql(spec.window_ns),
                        to_json(&spec.config.to_value()),
                        to_json(&spec.idle_states),
                        now
                    ],
                )?;
                (tx.last_insert_rowid(), now, false)
            }
        };
        let (next_window_index, last_end_unix_ns) = series_end(&tx, SeriesId(id))?;
        tx.commit()?;
        Ok(SeriesState {
            id: SeriesId(id),
            name: spec.name.clone(),
            window_ns: spec.window_ns,
            resumed,
            next_window_index,
            last_end_unix_ns,
            created_at,
        })
    }

    /// Every series: (id, name, window length).
    pub fn list_series(&self) -> Result<Vec<(SeriesId, String, u64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, name, window_ns FROM monitor_series ORDER BY id")?;
        Ok(stmt
            .query_map([], |r| {
                Ok((SeriesId(r.get(0)?), r.get(1)?, from_sql(r.get(2)?)))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Every series with how far it reaches.
    pub fn series_extents(&self) -> Result<Vec<SeriesExtent>> {
        let mut stmt = self.conn.prepare(
            "SELECT s.id, s.name, s.window_ns, COALESCE(SUM(m.windows), 0),
                    MIN(m.start_unix_ns), MAX(m.end_unix_ns), MAX(m.last_window_index)
               FROM monitor_series s LEFT JOIN monitor_sets m ON m.series_id = s.id
              GROUP BY s.id ORDER BY s.id",
        )?;
        Ok(stmt
            .query_map([], |r| {
                Ok(SeriesExtent {
                    id: SeriesId(r.get(0)?),
                    name: r.get(1)?,
                    window_ns: from_sql(r.get(2)?),
                    windows: from_sql(r.get(3)?),
                    first_start_unix_ns: opt_from_sql(r.get(4)?),
                    last_end_unix_ns: opt_from_sql(r.get(5)?),
                    last_window_index: opt_from_sql(r.get(6)?),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The time a series' windows cover, gaps (the daemon not running) excluded.
    pub fn series_covered_ns(&self, series: SeriesId) -> Result<u64> {
        let sum: Option<i64> = self.conn.query_row(
            "SELECT SUM(covered_ns) FROM monitor_sets WHERE series_id = ?1",
            [series.0],
            |r| r.get(0),
        )?;
        Ok(sum.map_or(0, from_sql))
    }

    /// What the samplers measured over a whole series: each CPU's summaries and the power of
    /// its window sets, every window weighted by the time it covers (as the rollups merge them).
    pub fn series_sampled(
        &self,
        series: SeriesId,
    ) -> Result<(Vec<CpuSummary>, Option<Vec<PowerSource>>)> {
        let mut stmt = self.conn.prepare(
            "SELECT w.cpu, w.cpu_summary, s.covered_ns FROM monitor_windows w
               JOIN monitor_sets s ON s.series_id = w.series_id AND s.start_unix_ns = w.start_unix_ns
              WHERE w.series_id = ?1 AND w.cpu_summary IS NOT NULL
              ORDER BY w.cpu",
        )?;
        let rows = stmt
            .query_map([series.0], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut by_cpu: BTreeMap<u32, Vec<(f64, CpuSummary)>> = BTreeMap::new();
        for (cpu, summary, covered) in rows {
            let summary: CpuSummary = from_json(&summary, "a monitor window's sampler summary")?;
            by_cpu
                .entry(from_sql(cpu) as u32)
                .or_default()
                .push((from_sql(covered) as f64, summary));
        }
        let cpus = by_cpu
            .into_iter()
            .filter_map(|(cpu, items)| merge_cpu_summaries(cpu, &items))
            .collect();
        let sets = self.monitor_sets(series, 0, i64::MAX as u64)?;
        let weights: Vec<f64> = sets.iter().map(|s| s.covered_ns as f64).collect();
        Ok((cpus, merge_power(&sets, &weights)))
    }

    /// The series called `name`, if the store has one.
    pub fn find_series(&self, name: &str) -> Result<Option<SeriesId>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM monitor_series WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()?
            .map(SeriesId))
    }

    /// The system a series was opened on, where it recorded one.
    pub fn series_system(&self, series: SeriesId) -> Result<Option<SystemInfo>> {
        let record: Option<String> = self
            .conn
            .query_row(
                "SELECT s.record FROM monitor_series m JOIN systems s ON s.id = m.system_id
                 WHERE m.id = ?1",
                [series.0],
                |r| r.get(0),
            )
            .optional()?;
        record
            .map(|r| from_json(&r, &format!("monitor series {} system", series.0)))
            .transpose()
    }

    /// The idle-state names and configuration a series was opened with.
    pub fn series_meta(&self, series: SeriesId) -> Result<(serde_json::Value, Vec<CpuIdleStates>)> {
        let (config, idle): (String, String) = self
            .conn
            .query_row(
                "SELECT config, idle_states FROM monitor_series WHERE id = ?1",
                [series.0],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .ok_or_else(|| StoreError::UnknownSeries(series.0.to_string()))?;
        let what = format!("monitor series {}", series.0);
        Ok((from_json(&config, &what)?, from_json(&idle, &what)?))
    }

    /// Store the window sets a daemon kept in a file: in its series (opened, or made in a new
    /// store), numbered on from the series' last window; a set stored already is left out.
    /// Returns the series and the window numbers given, `first..end`.
    pub fn insert_unsaved(&mut self, u: &UnsavedWindows) -> Result<(SeriesState, u64, u64)> {
        let state = self.open_series(&u.unsaved_windows)?;
        let (first, end) = self.insert_numbered(state.id, &u.sets)?;
        Ok((state, first, end))
    }

    /// Store `sets` in `series`, numbered on from its last window; a set stored already is
    /// left out. Returns the window numbers given, `first..end`.
    pub fn insert_numbered(&mut self, series: SeriesId, sets: &[WindowSet]) -> Result<(u64, u64)> {
        let (first, _) = series_end(&self.conn, series)?;
        let mut next = first;
        for set in sets {
            let set = WindowSet {
                index: next,
                ..set.clone()
            };
            if self.insert_window_set_once(series, &set)? {
                next += 1;
            }
        }
        Ok((first, next))
    }

    /// [`Store::insert_window_set`], leaving out a set stored already (one over the same time,
    /// as from a file imported before): whether it was stored.
    pub fn insert_window_set_once(&mut self, series: SeriesId, set: &WindowSet) -> Result<bool> {
        match self.insert_window_set(series, set) {
            Ok(()) => Ok(true),
            Err(StoreError::Overlap { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Store one closed window of every CPU, in one transaction.
    pub fn insert_window_set(&mut self, series: SeriesId, set: &WindowSet) -> Result<()> {
        if set.end_unix_ns <= set.start_unix_ns {
            return Err(StoreError::Invalid(format!(
                "window set {} ends ({}) before it starts ({})",
                set.index, set.end_unix_ns, set.start_unix_ns
            )));
        }
        let mut cpus: Vec<u32> = set.cpus.iter().map(|w| w.cpu).collect();
        cpus.sort_unstable();
        if cpus.windows(2).any(|p| p[0] == p[1]) {
            return Err(StoreError::Invalid(format!(
                "window set {} names a CPU twice",
                set.index
            )));
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let known: Option<i64> = tx
            .query_row(
                "SELECT id FROM monitor_series WHERE id = ?1",
                [series.0],
                |r| r.get(0),
            )
            .optional()?;
        if known.is_none() {
            return Err(StoreError::UnknownSeries(series.0.to_string()));
        }
        let overlapping: Option<i64> = tx
            .query_row(
                "SELECT start_unix_ns FROM monitor_sets WHERE series_id = ?1
                   AND start_unix_ns < ?3 AND end_unix_ns > ?2 LIMIT 1",
                params![series.0, to_sql(set.start_unix_ns), to_sql(set.end_unix_ns)],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(other) = overlapping {
            return Err(StoreError::Overlap {
                index: set.index,
                other: from_sql(other),
            });
        }
        let row = WindowSetRow::of(set);
        write_set(&tx, series, &row)?;
        let mut windows = Vec::with_capacity(set.cpus.len());
        {
            let mut wstmt = tx.prepare(WINDOW_UPSERT)?;
            let mut sstmt = tx.prepare(
                "INSERT INTO monitor_spikes (series_id, start_unix_ns, cpu, at_unix_ns, value_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for w in &set.cpus {
                let window = MonitorWindowRow::of(
                    &row,
                    w.cpu,
                    &w.histogram,
                    w.missed,
                    w.cpu_summary.clone(),
                );
                write_window(&mut wstmt, series, &window, &w.histogram)?;
                windows.push(window);
                for s in &w.spikes {
                    sstmt.execute(params![
                        series.0,
                        to_sql(set.start_unix_ns),
                        w.cpu,
                        to_sql(s.at_unix_ns),
                        to_sql(s.value_ns)
                    ])?;
                }
            }
        }
        crate::totals::add_window_set(&tx, series, &row, &set.cpus)?;
        crate::rollups::add_windows(&tx, series, row.covered_ns, &windows)?;
        tx.execute(
            "UPDATE monitor_series SET updated_at = ?2 WHERE id = ?1",
            params![series.0, now_rfc3339()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Window sets overlapping `[from, to)`, oldest first.
    pub fn monitor_sets(&self, series: SeriesId, from: u64, to: u64) -> Result<Vec<WindowSetRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {SET_COLUMNS} FROM monitor_sets
             WHERE series_id = ?1 AND start_unix_ns < ?3 AND end_unix_ns > ?2
             ORDER BY start_unix_ns"
        ))?;
        let rows = stmt
            .query_map(params![series.0, to_sql(from), to_sql(to)], set_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().map(finish_set).collect()
    }

    /// Per-CPU windows overlapping `[from, to)` (of one CPU, or all), oldest first.
    pub fn monitor_windows(
        &self,
        series: SeriesId,
        from: u64,
        to: u64,
        cpu: Option<u32>,
    ) -> Result<Vec<MonitorWindowRow>> {
        self.window_rows("", "ORDER BY w.start_unix_ns, w.cpu", series, from, to, cpu)
    }

    /// [`Store::monitor_windows`] of every CPU without the sampler summaries (`cpu_summary` is
    /// None): for reading many windows' statistics, where parsing each summary would cost more
    /// than reading the row.
    pub fn monitor_window_stats(
        &self,
        series: SeriesId,
        from: u64,
        to: u64,
    ) -> Result<Vec<MonitorWindowRow>> {
        let tail = "ORDER BY w.start_unix_ns, w.cpu";
        self.query_windows(&window_query("", tail, false), series, from, to, None)
    }

    /// The `limit` windows with the highest maximum overlapping `[from, to)`, worst first.
    pub fn worst_windows(
        &self,
        series: SeriesId,
        from: u64,
        to: u64,
        limit: u32,
    ) -> Result<Vec<MonitorWindowRow>> {
        // Over much of the series, walking the windows from the worst down stops after
        // `limit` (1 ms for 30 days of 256 CPUs, where sorting every window in the range took
        // 10 s); over a sliver of it, the range's windows are few enough to sort.
        let (all, inside): (i64, i64) = self.conn.query_row(
            "SELECT count(*), coalesce(sum(start_unix_ns < ?3 AND end_unix_ns > ?2), 0)
             FROM monitor_sets WHERE series_id = ?1",
            params![series.0, to_sql(from), to_sql(to)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        // CROSS JOIN keeps the windows the outer loop (else the planner may probe the worst
        // index once per set, which is slower than sorting).
        let hint = if inside * 50 >= all {
            "INDEXED BY monitor_windows_worst CROSS"
        } else {
            ""
        };
        self.window_rows(
            hint,
            &format!("ORDER BY w.max_ns DESC, w.start_unix_ns, w.cpu LIMIT {limit}"),
            series,
            from,
            to,
            None,
        )
    }

    fn window_rows(
        &self,
        hint: &str,
        tail: &str,
        series: SeriesId,
        from: u64,
        to: u64,
        cpu: Option<u32>,
    ) -> Result<Vec<MonitorWindowRow>> {
        self.query_windows(&window_query(hint, tail, true), series, from, to, cpu)
    }

    fn query_windows(
        &self,
        sql: &str,
        series: SeriesId,
        from: u64,
        to: u64,
        cpu: Option<u32>,
    ) -> Result<Vec<MonitorWindowRow>> {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt
            .query_map(params![series.0, to_sql(from), to_sql(to), cpu], window_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().map(finish_window).collect()
    }

    /// One CPU's window starting at `start_unix_ns`: its histogram and spikes.
    pub fn monitor_window_detail(
        &self,
        series: SeriesId,
        start_unix_ns: u64,
        cpu: u32,
    ) -> Result<Option<(Histogram, Vec<MonitorSpike>)>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT histogram FROM monitor_windows
                 WHERE series_id = ?1 AND start_unix_ns = ?2 AND cpu = ?3",
                params![series.0, to_sql(start_unix_ns), cpu],
                |r| r.get(0),
            )
            .optional()?;
        let Some(blob) = blob else { return Ok(None) };
        let h = decode_hist(
            &blob,
            &format!("monitor window {start_unix_ns} cpu{cpu} histogram"),
        )?;
        let mut stmt = self.conn.prepare(
            "SELECT at_unix_ns, value_ns FROM monitor_spikes
             WHERE series_id = ?1 AND start_unix_ns = ?2 AND cpu = ?3 ORDER BY at_unix_ns, id",
        )?;
        let spikes = stmt
            .query_map(params![series.0, to_sql(start_unix_ns), cpu], |r| {
                Ok(MonitorSpike {
                    at_unix_ns: from_sql(r.get(0)?),
                    value_ns: from_sql(r.get(1)?),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Some((h, spikes)))
    }

    /// Every spike of a series, `(cpu, spike)`, in time order (at most `limit`), and how many
    /// there are in all.
    pub fn series_spikes(
        &self,
        series: SeriesId,
        limit: u32,
    ) -> Result<(Vec<(u32, MonitorSpike)>, u64)> {
        let total: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM monitor_spikes WHERE series_id = ?1",
            [series.0],
            |r| r.get(0),
        )?;
        let mut stmt = self.conn.prepare(
            "SELECT cpu, at_unix_ns, value_ns FROM monitor_spikes
             WHERE series_id = ?1 ORDER BY at_unix_ns, id LIMIT ?2",
        )?;
        let spikes = stmt
            .query_map(params![series.0, limit], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    MonitorSpike {
                        at_unix_ns: from_sql(r.get(1)?),
                        value_ns: from_sql(r.get(2)?),
                    },
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok((spikes, from_sql(total)))
    }

    /// Add an annotation to a series.
    pub fn add_annotation(&mut self, series: SeriesId, a: &Annotation) -> Result<()> {
        self.conn.execute(
            "INSERT INTO monitor_annotations (series_id, at_unix_ns, cpu, kind, text)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![series.0, to_sql(a.at_unix_ns), a.cpu, a.kind, a.text],
        )?;
        Ok(())
    }

    /// Annotations in `[from, to)`, oldest first.
    pub fn annotations(&self, series: SeriesId, from: u64, to: u64) -> Result<Vec<Annotation>> {
        let mut stmt = self.conn.prepare(
            "SELECT at_unix_ns, cpu, kind, text FROM monitor_annotations
             WHERE series_id = ?1 AND at_unix_ns >= ?2 AND at_unix_ns < ?3
             ORDER BY at_unix_ns, id",
        )?;
        Ok(stmt
            .query_map(params![series.0, to_sql(from), to_sql(to)], |r| {
                Ok(Annotation {
                    at_unix_ns: from_sql(r.get(0)?),
                    cpu: r.get(1)?,
                    kind: r.get(2)?,
                    text: r.get(3)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Retention: merge the window sets of every whole UTC hour that ends at or before
    /// `before_unix_ns` into one row per hour (per CPU), in one transaction. Histograms merge
    /// exactly, so counts, minimum, maximum, missed periods and percentiles of the hourly row are
    /// those of all its windows together; spikes are kept and move to the hourly row; sampler
    /// averages, power and temperatures are weighted by the time each window covers. Hours
    /// already merged are left as they are; windows added to them later merge in on the next call.
    pub fn merge_old_windows(
        &mut self,
        series: SeriesId,
        before_unix_ns: u64,
    ) -> Result<MergeSummary> {
        self.merge_old_hours(series, before_unix_ns, usize::MAX)
    }

    /// [`Store::merge_old_windows`] for the oldest `max_hours` hours that have windows to merge,
    /// so that one call holds the store for a bounded time; the rest wait for the next call
    /// (there may be more when it merged `max_hours`).
    pub fn merge_old_hours(
        &mut self,
        series: SeriesId,
        before_unix_ns: u64,
        max_hours: usize,
    ) -> Result<MergeSummary> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sets = sets_ending_by(&tx, series, before_unix_ns)?;
        let mut hours: BTreeMap<u64, Vec<WindowSetRow>> = BTreeMap::new();
        for s in sets {
            let hour = s.start_unix_ns / HOUR_NS;
            if (hour + 1).saturating_mul(HOUR_NS) <= before_unix_ns {
                hours.entry(hour).or_default().push(s);
            }
        }
        let mut summary = MergeSummary::default();
        for group in hours.into_values().filter(|g| g.len() > 1).take(max_hours) {
            merge_group(&tx, series, &group)?;
            summary.hours += 1;
            summary.sets_merged += group.len() as u64;
        }
        tx.commit()?;
        Ok(summary)
    }
}

/// How long a window keeps its histogram at full resolution (0.1 %); older windows keep it at
/// [`COARSE_SHIFT`].
pub const FULL_RESOLUTION_NS: u64 = 7 * 24 * HOUR_NS;

/// The resolution of older windows' histograms ([`Histogram::coarsen`]): buckets of 64 ns below
/// 2 µs and 1/16 of an octave above (6.25 % wide, so a percentile read from one is within about
/// 3 % of the measured value; cyclictest's 1 µs buckets are as coarse at 16 µs). A 5-minute
/// window at 200 µs then takes about a ninth of the bytes. Count, minimum, maximum, sum, p99 and
/// p99.9 stay exact: they are kept beside the buckets.
pub const COARSE_SHIFT: u32 = 6;

impl Store {
    /// Ageing: rewrite the histograms of up to `limit` windows of `series` that started before
    /// `before_unix_ns` and are still as measured at the resolution of `shift` ([`Histogram::coarsen`]), oldest first, in
    /// one transaction. Count, minimum, maximum and sum stay exact, and so do the stored
    /// percentile columns (computed when the window was written). Returns how many were
    /// rewritten: fewer than `limit` when none is left.
    pub fn coarsen_old_windows(
        &mut self,
        series: SeriesId,
        before_unix_ns: u64,
        shift: u32,
        limit: u32,
    ) -> Result<u64> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let rows = tx
            .prepare(
                "SELECT start_unix_ns, cpu, histogram FROM monitor_windows
                 WHERE series_id = ?1 AND coarse_shift = 0 AND start_unix_ns < ?2
                 ORDER BY start_unix_ns LIMIT ?3",
            )?
            .query_map(params![series.0, to_sql(before_unix_ns), limit], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        {
            // Each coarsened row moves to a new rowid at the end of the table: rewritten in
            // place it would keep the page its full-size histogram filled (one window per page,
            // the rest of it never used again); moved, old pages empty into the free list and
            // new windows reuse them. The key the spikes refer to stays, so they stay too.
            let mut next: i64 = tx.query_row(
                "SELECT coalesce(max(rowid), 0) FROM monitor_windows",
                [],
                |r| r.get(0),
            )?;
            let mut update = tx.prepare(
                "UPDATE monitor_windows SET histogram = ?4, coarse_shift = ?5, rowid = ?6
                 WHERE series_id = ?1 AND start_unix_ns = ?2 AND cpu = ?3",
            )?;
            for (start, cpu, blob) in &rows {
                let mut h = decode_hist(
                    blob,
                    &format!("monitor window {} cpu{cpu} histogram", from_sql(*start)),
                )?;
                h.coarsen(shift);
                next += 1;
                update.execute(params![series.0, start, cpu, h.encode(), shift, next])?;
            }
        }
        tx.commit()?;
        Ok(rows.len() as u64)
    }
}

/// Write a set's row: a new set, or the first set of a merged hour taking the whole hour.
fn write_set(conn: &rusqlite::Connection, series: SeriesId, row: &WindowSetRow) -> Result<()> {
    conn.execute(
        "INSERT INTO monitor_sets (series_id, start_unix_ns, end_unix_ns, window_index,
             last_window_index, windows, covered_ns, power, thermal, cost_cpu_time_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (series_id, start_unix_ns) DO UPDATE SET
             end_unix_ns = excluded.end_unix_ns, window_index = excluded.window_index,
             last_window_index = excluded.last_window_index, windows = excluded.windows,
             covered_ns = excluded.covered_ns, power = excluded.power,
             thermal = excluded.thermal, cost_cpu_time_ns = excluded.cost_cpu_time_ns",
        params![
            series.0,
            to_sql(row.start_unix_ns),
            to_sql(row.end_unix_ns),
            to_sql(row.window_index),
            to_sql(row.last_window_index),
            to_sql(row.windows),
            to_sql(row.covered_ns),
            row.power.as_ref().map(to_json),
            row.thermal.as_ref().map(to_json),
            opt_to_sql(row.cost_cpu_time_ns),
        ],
    )?;
    Ok(())
}

const WINDOW_UPSERT: &str = "INSERT INTO monitor_windows (series_id, start_unix_ns, cpu, count,
        min_ns, max_ns, p99_ns, p99_9_ns, missed, histogram, cpu_summary)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
    ON CONFLICT (series_id, start_unix_ns, cpu) DO UPDATE SET
        count = excluded.count, min_ns = excluded.min_ns, max_ns = excluded.max_ns,
        p99_ns = excluded.p99_ns, p99_9_ns = excluded.p99_9_ns, missed = excluded.missed,
        histogram = excluded.histogram, cpu_summary = excluded.cpu_summary";

/// Write one CPU's window: its row's statistics and summary, and its histogram.
fn write_window(
    stmt: &mut rusqlite::Statement<'_>,
    series: SeriesId,
    w: &MonitorWindowRow,
    h: &Histogram,
) -> rusqlite::Result<()> {
    stmt.execute(params![
        series.0,
        to_sql(w.start_unix_ns),
        w.cpu,
        to_sql(w.count),
        to_sql(w.min_ns),
        to_sql(w.max_ns),
        to_sql(w.p99_ns),
        to_sql(w.p99_9_ns),
        to_sql(w.missed),
        h.encode(),
        w.cpu_summary.as_ref().map(to_json),
    ])?;
    Ok(())
}

/// Merge `group` (sets of one hour, oldest first, at least two) into the first set's row.
fn merge_group(
    tx: &rusqlite::Transaction<'_>,
    series: SeriesId,
    group: &[WindowSetRow],
) -> Result<()> {
    let first = group[0].start_unix_ns;
    let weight: BTreeMap<u64, u64> = group
        .iter()
        .map(|s| (s.start_unix_ns, s.covered_ns))
        .collect();
    // Per CPU: merged histogram, missed, and (weight, summary) of each window.
    struct Acc {
        hist: Histogram,
        missed: u64,
        summaries: Vec<(f64, CpuSummary)>,
    }
    let mut per_cpu: BTreeMap<u32, Acc> = BTreeMap::new();
    {
        let mut stmt = tx.prepare(
            "SELECT cpu, missed, histogram, cpu_summary FROM monitor_windows
             WHERE series_id = ?1 AND start_unix_ns = ?2",
        )?;
        for s in group {
            let rows = stmt
                .query_map(params![series.0, to_sql(s.start_unix_ns)], |r| {
                    Ok((
                        r.get::<_, u32>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            for (cpu, missed, blob, summary) in rows {
                let what = format!("monitor window {} cpu{cpu}", s.start_unix_ns);
                let h = decode_hist(&blob, &format!("{what} histogram"))?;
                let acc = per_cpu.entry(cpu).or_insert_with(|| Acc {
                    hist: Histogram::new(),
                    missed: 0,
                    summaries: Vec::new(),
                });
                acc.hist.merge(&h);
                acc.missed += from_sql(missed);
                if let Some(text) = summary {
                    let w = weight.get(&s.start_unix_ns).copied().unwrap_or(0) as f64;
                    acc.summaries.push((w, from_json(&text, &what)?));
                }
            }
        }
    }
    let weights: Vec<f64> = group.iter().map(|s| s.covered_ns as f64).collect();
    let merged = WindowSetRow {
        start_unix_ns: first,
        end_unix_ns: group.iter().map(|s| s.end_unix_ns).max().unwrap_or(first),
        window_index: group.iter().map(|s| s.window_index).min().unwrap_or(0),
        last_window_index: group.iter().map(|s| s.last_window_index).max().unwrap_or(0),
        windows: group.iter().map(|s| s.windows).sum(),
        covered_ns: group.iter().map(|s| s.covered_ns).sum(),
        power: merge_power(group, &weights),
        thermal: merge_thermal(group, &weights),
        cost_cpu_time_ns: group
            .iter()
            .filter_map(|s| s.cost_cpu_time_ns)
            .reduce(|a, b| a + b),
    };
    {
        let mut wstmt = tx.prepare(WINDOW_UPSERT)?;
        for (cpu, acc) in &per_cpu {
            let summary = merge_cpu_summaries(*cpu, &acc.summaries);
            let window = MonitorWindowRow::of(&merged, *cpu, &acc.hist, acc.missed, summary);
            write_window(&mut wstmt, series, &window, &acc.hist)?;
        }
    }
    for s in &group[1..] {
        tx.execute(
            "UPDATE monitor_spikes SET start_unix_ns = ?3 WHERE series_id = ?1 AND start_unix_ns = ?2",
            params![series.0, to_sql(s.start_unix_ns), to_sql(first)],
        )?;
        tx.execute(
            "DELETE FROM monitor_sets WHERE series_id = ?1 AND start_unix_ns = ?2",
            params![series.0, to_sql(s.start_unix_ns)],
        )?;
    }
    write_set(tx, series, &merged)?;
    Ok(())
}

/// Time-weighted mean of the values present, as the rollups take it ([`Weighted`]); `None` when
/// none is. Sets that cover no time count alike, rather than leave a merged value unknown that
/// readings exist for.
fn wmean(values: impl Iterator<Item = (f64, Option<f64>)>) -> Option<f64> {
    let present: Vec<(f64, f64)> = values.filter_map(|(w, v)| Some((w, v?))).collect();
    let timeless = present.iter().all(|(w, _)| *w <= 0.0);
    let mut mean = Weighted::default();
    for (weight, value) in present {
        mean.add(Some(value), if timeless { 1.0 } else { weight });
    }
    mean.mean()
}

/// Element-wise weighted mean of vectors (an element averages over the windows that have it).
fn wmean_vec<'a>(items: impl Iterator<Item = (f64, &'a Vec<f64>)> + Clone) -> Vec<f64> {
    let len = items.clone().map(|(_, v)| v.len()).max().unwrap_or(0);
    (0..len)
        .map(|j| wmean(items.clone().map(|(w, v)| (w, v.get(j).copied()))).unwrap_or(0.0))
        .collect()
}

pub(crate) fn merge_cpu_summaries(cpu: u32, items: &[(f64, CpuSummary)]) -> Option<CpuSummary> {
    if items.is_empty() {
        return None;
    }
    let it = || items.iter();
    Some(CpuSummary {
        cpu: cpu as usize,
        avg_freq_khz: wmean(it().map(|(w, s)| (*w, s.avg_freq_khz.map(|f| f as f64))))
            .map(|f| f.round() as u64),
        util_pct: wmean(it().map(|(w, s)| (*w, s.util_pct))),
        steal_pct: wmean(it().map(|(w, s)| (*w, s.steal_pct))),
        irqs_per_s: wmean(it().map(|(w, s)| (*w, s.irqs_per_s))),
        softirqs_per_s: wmean(it().map(|(w, s)| (*w, s.softirqs_per_s))),
        // SMIs are counts: the merged stretch has them all.
        smis: it().filter_map(|(_, s)| s.smis).reduce(|a, b| a + b),
        idle_residency_pct: wmean_vec(it().map(|(w, s)| (*w, &s.idle_residency_pct))),
        idle_entries_per_s: wmean_vec(it().map(|(w, s)| (*w, &s.idle_entries_per_s))),
    })
}

/// The power sources of `sets`, in the order they first appear.
pub fn power_names(sets: &[WindowSetRow]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in sets.iter().filter_map(|s| s.power.as_ref()).flatten() {
        if !names.contains(&p.name) {
            names.push(p.name.clone());
        }
    }
    names
}

fn merge_power(group: &[WindowSetRow], weights: &[f64]) -> Option<Vec<PowerSource>> {
    let names = power_names(group);
    if group.iter().all(|s| s.power.is_none()) {
        return None;
    }
    let find = |set: &WindowSetRow, name: &str| {
        set.power
            .as_ref()
            .and_then(|p| p.iter().find(|s| s.name == name).cloned())
    };
    Some(
        names
            .into_iter()
            .map(|name| {
                let found: Vec<(f64, PowerSource)> = group
                    .iter()
                    .zip(weights)
                    .filter_map(|(set, w)| find(set, &name).map(|p| (*w, p)))
                    .collect();
                PowerSource {
                    avg_w: wmean(found.iter().map(|(w, p)| (*w, p.avg_w))),
                    energy_j: found
                        .iter()
                        .filter_map(|(_, p)| p.energy_j)
                        .reduce(|a, b| a + b),
                    wraps: found.iter().map(|(_, p)| p.wraps).sum(),
                    name,
                }
            })
            .collect(),
    )
}

fn merge_thermal(group: &[WindowSetRow], weights: &[f64]) -> Option<Vec<ThermalSummary>> {
    if group.iter().all(|s| s.thermal.is_none()) {
        return None;
    }
    let mut zones: Vec<String> = Vec::new();
    for t in group.iter().filter_map(|s| s.thermal.as_ref()).flatten() {
        if !zones.contains(&t.zone) {
            zones.push(t.zone.clone());
        }
    }
    Some(
        zones
            .into_iter()
            .map(|zone| {
                let found: Vec<(f64, ThermalSummary)> = group
                    .iter()
                    .zip(weights)
                    .filter_map(|(set, w)| {
                        set.thermal
                            .as_ref()
                            .and_then(|t| t.iter().find(|t| t.zone == zone).cloned())
                            .map(|t| (*w, t))
                    })
                    .collect();
                ThermalSummary {
                    avg_c: wmean(found.iter().map(|(w, t)| (*w, Some(t.avg_c)))).unwrap_or(0.0),
                    max_c: found
                        .iter()
                        .map(|(_, t)| t.max_c)
                        .fold(f64::NEG_INFINITY, f64::max),
                    zone,
                }
            })
            .collect(),
    )
}

/// The columns of a window row ([`window_row`]), `w` the window and `s` its set; its sampler
/// summary follows them.
pub(crate) const WINDOW_COLUMNS: &str = "w.start_unix_ns, s.end_unix_ns, w.cpu, s.windows, w.count,
    w.min_ns, w.max_ns, w.p99_ns, w.p99_9_ns, w.missed";

/// A window row read from [`WINDOW_COLUMNS`] and its summary's column, the summary's JSON apart
/// (parsed by [`finish_window`], where it is wanted).
pub(crate) fn window_row(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(MonitorWindowRow, Option<String>)> {
    Ok((
        MonitorWindowRow {
            start_unix_ns: from_sql(r.get(0)?),
            end_unix_ns: from_sql(r.get(1)?),
            cpu: r.get(2)?,
            windows: from_sql(r.get(3)?),
            count: from_sql(r.get(4)?),
            min_ns: from_sql(r.get(5)?),
            max_ns: from_sql(r.get(6)?),
            p99_ns: from_sql(r.get(7)?),
            p99_9_ns: from_sql(r.get(8)?),
            missed: from_sql(r.get(9)?),
            cpu_summary: None,
        },
        r.get(10)?,
    ))
}

/// A window row with its sampler summary parsed.
pub(crate) fn finish_window(
    (mut row, summary): (MonitorWindowRow, Option<String>),
) -> Result<MonitorWindowRow> {
    let what = format!("monitor window {} cpu{}", row.start_unix_ns, row.cpu);
    row.cpu_summary = summary.map(|s| from_json(&s, &what)).transpose()?;
    Ok(row)
}

/// The query of [`Store::window_rows`]. Without a hint the sets in the range lead (found by
/// their end; the `+` keeps the planner from turning `start < to` into a scan of every earlier
/// window) and each set's windows are looked up: 6 hours at the end of 30 days of 256 CPUs read
/// 72 sets and their 18 432 windows, not the 2.2 million windows before them. With a hint the
/// windows lead, in the hinted index's order.
fn window_query(hint: &str, tail: &str, summary: bool) -> String {
    let summary = if summary { "w.cpu_summary" } else { "NULL" };
    let join = if hint.is_empty() {
        "FROM monitor_sets s CROSS JOIN monitor_windows w
           ON w.series_id = s.series_id AND w.start_unix_ns = s.start_unix_ns
         WHERE s.series_id = ?1 AND +s.start_unix_ns < ?3 AND s.end_unix_ns > ?2"
            .to_string()
    } else {
        format!(
            "FROM monitor_windows w {hint}
         JOIN monitor_sets s ON s.series_id = w.series_id AND s.start_unix_ns = w.start_unix_ns
         WHERE w.series_id = ?1 AND s.start_unix_ns < ?3 AND s.end_unix_ns > ?2"
        )
    };
    format!(
        "SELECT {WINDOW_COLUMNS}, {summary}
         {join} AND (?4 IS NULL OR w.cpu = ?4) {tail}"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn merged_means_weigh_by_covered_time_and_count_timeless_sets_alike() {
        assert_eq!(
            wmean([(1.0, Some(40.0)), (3.0, Some(50.0))].into_iter()),
            Some(47.5)
        );
        assert_eq!(
            wmean([(2.0, Some(40.0)), (5.0, None)].into_iter()),
            Some(40.0)
        );
        assert_eq!(
            wmean([(0.0, Some(40.0)), (0.0, Some(50.0))].into_iter()),
            Some(45.0)
        );
        assert_eq!(wmean([(2.0, None)].into_iter()), None);
    }

    #[test]
    fn a_range_of_windows_looks_each_set_up_instead_of_scanning_what_came_before() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).unwrap();
        let plan: Vec<String> = store
            .conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN {}",
                window_query("", "ORDER BY w.start_unix_ns, w.cpu", true)
            ))
            .unwrap()
            .query_map(params![1, 0i64, 1i64, None::<u32>], |r| {
                r.get::<_, String>(3)
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let windows = plan
            .iter()
            .find(|l| l.contains(" w "))
            .unwrap_or_else(|| panic!("{plan:?}"));
        assert!(
            windows.contains("(series_id=? AND start_unix_ns=?)"),
            "each set's windows by key, not a range: {plan:?}"
        );
        assert!(plan[0].starts_with("SEARCH s "), "{plan:?}");
    }
}
