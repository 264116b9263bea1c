//! Rollups of a monitoring series: per CPU and UTC hour or day, its windows summarized (worst
//! case and where it was, highest p99 and p99.9, samples, missed periods, and time-weighted
//! frequency, interrupt rate and idle residencies). They are kept in the transaction that stores
//! each window set, as time-series databases keep downsampled series, so a timeline over weeks or
//! a year reads one row per CPU and hour or day instead of every window. Retention merges leave
//! them as they are.

use crate::monitor::{HOUR_NS, MonitorWindowRow, SeriesId};
use crate::{Result, Store, from_json, from_sql, to_json, to_sql};
use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A UTC day.
pub const DAY_NS: u64 = 24 * HOUR_NS;

/// The spans rollups are kept at, finest first.
pub const ROLLUP_SPANS_NS: [u64; 2] = [HOUR_NS, DAY_NS];

/// A time-weighted mean in the making: the sum of value × weight, and the sum of weights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Weighted(pub f64, pub f64);

impl Weighted {
    /// Add `value` (if any) with `weight`.
    pub fn add(&mut self, value: Option<f64>, weight: f64) {
        if let Some(v) = value {
            self.0 += v * weight;
            self.1 += weight;
        }
    }

    fn merge(&mut self, other: Weighted) {
        self.0 += other.0;
        self.1 += other.1;
    }

    /// The mean, when anything was added.
    pub fn mean(&self) -> Option<f64> {
        (self.1 > 0.0).then(|| self.0 / self.1)
    }
}

/// One CPU's windows summarized: a single window (as read for short ranges), or a rollup row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowSummary {
    /// The window's start, or the start of the rollup's hour or day.
    pub start_unix_ns: u64,
    pub cpu: u32,
    /// Windows it holds (a merged hourly window counts as the windows merged into it, on any
    /// CPU: the store keeps that number per set, not per CPU).
    pub windows: u64,
    pub count: u64,
    pub missed: u64,
    pub max_ns: u64,
    /// Start of the window that holds the maximum (for a link to it).
    pub max_start_unix_ns: u64,
    /// The highest p99 and p99.9 of its windows.
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub freq_mhz: Weighted,
    pub irqs_per_s: Weighted,
    pub idle_residency_pct: Vec<Weighted>,
}

/// The weighted parts as the `summary` column holds them.
#[derive(Serialize, Deserialize)]
struct Sums {
    freq_mhz: Weighted,
    irqs_per_s: Weighted,
    idle_residency_pct: Vec<Weighted>,
}

impl WindowSummary {
    /// One stored window, its sampler averages weighted by the time its set covers.
    pub fn of_window(w: &MonitorWindowRow, covered_ns: u64) -> WindowSummary {
        let weight = covered_ns as f64;
        let mut s = WindowSummary {
            start_unix_ns: w.start_unix_ns,
            cpu: w.cpu,
            windows: w.windows,
            count: w.count,
            missed: w.missed,
            max_ns: w.max_ns,
            max_start_unix_ns: w.start_unix_ns,
            p99_ns: w.p99_ns,
            p99_9_ns: w.p99_9_ns,
            ..Default::default()
        };
        if let Some(c) = &w.cpu_summary {
            s.freq_mhz
                .add(c.avg_freq_khz.map(|f| f as f64 / 1000.0), weight);
            s.irqs_per_s.add(c.irqs_per_s, weight);
            s.idle_residency_pct = c
                .idle_residency_pct
                .iter()
                .map(|r| Weighted(r * weight, weight))
                .collect();
        }
        s
    }

    /// Add `other` (a later window of the same CPU). The maximum's window is the latest of
    /// those that hold it.
    pub fn merge(&mut self, other: &WindowSummary) {
        if other.max_ns >= self.max_ns || self.count == 0 && self.missed == 0 {
            self.max_start_unix_ns = other.max_start_unix_ns;
        }
        self.windows += other.windows;
        self.count += other.count;
        self.missed += other.missed;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.p99_ns = self.p99_ns.max(other.p99_ns);
        self.p99_9_ns = self.p99_9_ns.max(other.p99_9_ns);
        self.freq_mhz.merge(other.freq_mhz);
        self.irqs_per_s.merge(other.irqs_per_s);
        if self.idle_residency_pct.len() < other.idle_residency_pct.len() {
            self.idle_residency_pct
                .resize(other.idle_residency_pct.len(), Weighted::default());
        }
        for (a, b) in self
            .idle_residency_pct
            .iter_mut()
            .zip(&other.idle_residency_pct)
        {
            a.merge(*b);
        }
    }
}

const COLUMNS: &str = "start_unix_ns, cpu, windows, count, missed, max_ns, max_start_unix_ns,
    p99_ns, p99_9_ns, summary";

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(WindowSummary, String)> {
    Ok((
        WindowSummary {
            start_unix_ns: from_sql(r.get(0)?),
            cpu: r.get(1)?,
            windows: from_sql(r.get(2)?),
            count: from_sql(r.get(3)?),
            missed: from_sql(r.get(4)?),
            max_ns: from_sql(r.get(5)?),
            max_start_unix_ns: from_sql(r.get(6)?),
            p99_ns: from_sql(r.get(7)?),
            p99_9_ns: from_sql(r.get(8)?),
            ..Default::default()
        },
        r.get(9)?,
    ))
}

fn finish((mut s, sums): (WindowSummary, String)) -> Result<WindowSummary> {
    let sums: Sums = from_json(
        &sums,
        &format!("monitor rollup at {} cpu{}", s.start_unix_ns, s.cpu),
    )?;
    s.freq_mhz = sums.freq_mhz;
    s.irqs_per_s = sums.irqs_per_s;
    s.idle_residency_pct = sums.idle_residency_pct;
    Ok(s)
}

fn write(tx: &Transaction<'_>, series: SeriesId, span_ns: u64, s: &WindowSummary) -> Result<()> {
    let sums = Sums {
        freq_mhz: s.freq_mhz,
        irqs_per_s: s.irqs_per_s,
        idle_residency_pct: s.idle_residency_pct.clone(),
    };
    tx.prepare_cached(&format!(
        "INSERT OR REPLACE INTO monitor_rollups (series_id, span_ns, {COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    ))?
    .execute(params![
        series.0,
        to_sql(span_ns),
        to_sql(s.start_unix_ns),
        s.cpu,
        to_sql(s.windows),
        to_sql(s.count),
        to_sql(s.missed),
        to_sql(s.max_ns),
        to_sql(s.max_start_unix_ns),
        to_sql(s.p99_ns),
        to_sql(s.p99_9_ns),
        to_json(&sums),
    ])?;
    Ok(())
}

/// Add a newly stored window set's windows, each covering `covered_ns`, to its series' rollups
/// (inside the transaction storing it).
pub(crate) fn add_windows(
    tx: &Transaction<'_>,
    series: SeriesId,
    covered_ns: u64,
    windows: &[MonitorWindowRow],
) -> Result<()> {
    for w in windows {
        let window = WindowSummary::of_window(w, covered_ns);
        for span in ROLLUP_SPANS_NS {
            let start = w.start_unix_ns / span * span;
            let stored = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM monitor_rollups
                     WHERE series_id = ?1 AND span_ns = ?2 AND start_unix_ns = ?3 AND cpu = ?4"
                ))?
                .query_row(
                    params![series.0, to_sql(span), to_sql(start), w.cpu],
                    read_row,
                )
                .optional()?;
            let mut row = match stored {
                Some(r) => finish(r)?,
                None => WindowSummary {
                    start_unix_ns: start,
                    cpu: w.cpu,
                    ..Default::default()
                },
            };
            row.merge(&window);
            write(tx, series, span, &row)?;
        }
    }
    Ok(())
}

/// Rollups computed from stored windows, for stores written before rollups were kept (filled
/// once, by the migration that adds them).
#[derive(Default)]
pub(crate) struct Rebuild {
    rows: BTreeMap<(u64, u64, u32), WindowSummary>,
}

impl Rebuild {
    pub fn add(&mut self, w: &WindowSummary) {
        for span in ROLLUP_SPANS_NS {
            let start = w.start_unix_ns / span * span;
            self.rows
                .entry((span, start, w.cpu))
                .or_insert_with(|| WindowSummary {
                    start_unix_ns: start,
                    cpu: w.cpu,
                    ..Default::default()
                })
                .merge(w);
        }
    }

    pub fn write(self, tx: &Transaction<'_>, series: SeriesId) -> Result<()> {
        for ((span, _, _), row) in &self.rows {
            write(tx, series, *span, row)?;
        }
        Ok(())
    }
}

impl Store {
    /// The rollups of `span_ns` (one of [`ROLLUP_SPANS_NS`]) whose hour or day overlaps
    /// `[from, to)`, oldest first, by CPU.
    pub fn monitor_rollups(
        &self,
        series: SeriesId,
        span_ns: u64,
        from: u64,
        to: u64,
    ) -> Result<Vec<WindowSummary>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM monitor_rollups
             WHERE series_id = ?1 AND span_ns = ?2 AND start_unix_ns >= ?3 AND start_unix_ns < ?4
             ORDER BY start_unix_ns, cpu"
        ))?;
        let first = (from + 1).saturating_sub(span_ns);
        let rows = stmt
            .query_map(
                params![series.0, to_sql(span_ns), to_sql(first), to_sql(to)],
                read_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().map(finish).collect()
    }
}
