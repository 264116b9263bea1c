//! `latlab db check`: the store's consistency, down to every histogram.

use crate::{Result, RunId, Store, from_sql};
use latlab_hist::Histogram;
use std::collections::BTreeSet;

/// What [`Store::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// One line per problem; empty when the store is sound.
    pub problems: Vec<String>,
    pub runs: u64,
    pub histograms: u64,
    pub monitor_windows: u64,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Count one histogram and check it: it decodes and, when `stored` (count, min, max) is
    /// given, agrees with it. False, with the problem noted, when it does not.
    fn check_hist(&mut self, what: String, blob: &[u8], stored: Option<(i64, i64, i64)>) -> bool {
        self.histograms += 1;
        match Histogram::decode(blob) {
            Err(e) => {
                self.problems.push(format!("{what}: {e}"));
                false
            }
            Ok(h) => match stored {
                Some((count, min, max))
                    if (h.count(), h.min(), h.max())
                        != (from_sql(count), from_sql(min), from_sql(max)) =>
                {
                    self.problems.push(format!(
                        "{what}: holds count {} min {} max {} but the row says count {} \
                         min {} max {}",
                        h.count(),
                        h.min(),
                        h.max(),
                        from_sql(count),
                        from_sql(min),
                        from_sql(max)
                    ));
                    false
                }
                _ => true,
            },
        }
    }
}

impl Store {
    /// Check the store: SQLite's `integrity_check` and `foreign_key_check`, every histogram
    /// decoded and compared with the count, min and max stored beside it, and every run read back
    /// whole. Problems are reported, never repaired.
    pub fn check(&self) -> Result<CheckReport> {
        let mut report = CheckReport::default();
        self.check_integrity(&mut report)?;
        self.check_foreign_keys(&mut report)?;
        let bad_runs = self.check_run_histograms(&mut report)?;
        self.check_trace_histograms(&mut report)?;
        self.check_monitor_histograms(&mut report)?;
        self.check_monitor_totals(&mut report)?;
        self.check_monitor_numbers(&mut report)?;
        self.check_runs_read_back(&mut report, &bad_runs)?;
        Ok(report)
    }

    /// SQLite's `integrity_check`: one problem per line it reports unless it says "ok".
    fn check_integrity(&self, report: &mut CheckReport) -> Result<()> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        if rows != ["ok"] {
            report
                .problems
                .extend(rows.into_iter().map(|r| format!("integrity: {r}")));
        }
        Ok(())
    }

    /// SQLite's `foreign_key_check`: one problem per row referring to a missing parent row.
    fn check_foreign_keys(&self, report: &mut CheckReport) -> Result<()> {
        let mut stmt = self.conn.prepare("PRAGMA foreign_key_check")?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for (table, rowid, parent) in rows {
            let row = rowid.map_or_else(|| "a row".to_string(), |r| format!("row {r}"));
            report.problems.push(format!(
                "foreign key: {row} of {table} refers to a missing {parent} row"
            ));
        }
        Ok(())
    }

    /// Each run's overall histogram and its threads' histograms: the runs with a bad one.
    fn check_run_histograms(&self, report: &mut CheckReport) -> Result<BTreeSet<i64>> {
        let mut bad_runs = BTreeSet::new();
        {
            let mut stmt = self
                .conn
                .prepare("SELECT id, count, min_ns, max_ns, overall_histogram FROM runs")?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                report.runs += 1;
                let blob: Vec<u8> = r.get(4)?;
                let stored = (r.get(1)?, r.get(2)?, r.get(3)?);
                if !report.check_hist(format!("run {id} histogram"), &blob, Some(stored)) {
                    bad_runs.insert(id);
                }
            }
        }
        {
            let mut stmt = self.conn.prepare(
                "SELECT run_id, idx, label, count, min_ns, max_ns, histogram, corrected_histogram
                 FROM threads ORDER BY run_id, idx",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let (run, idx, label): (i64, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
                let stored = (r.get(3)?, r.get(4)?, r.get(5)?);
                let h: Vec<u8> = r.get(6)?;
                let ch: Vec<u8> = r.get(7)?;
                let ok1 = report.check_hist(
                    format!("run {run} thread {idx} ({label}) histogram"),
                    &h,
                    Some(stored),
                );
                let ok2 = report.check_hist(
                    format!("run {run} thread {idx} ({label}) corrected histogram"),
                    &ch,
                    None,
                );
                if !(ok1 && ok2) {
                    bad_runs.insert(run);
                }
            }
        }
        Ok(bad_runs)
    }

    /// The histograms of the traces' families.
    fn check_trace_histograms(&self, report: &mut CheckReport) -> Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT run_id, name, histogram FROM trace_results WHERE histogram IS NOT NULL",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let (run, name): (i64, String) = (r.get(0)?, r.get(1)?);
            let blob: Vec<u8> = r.get(2)?;
            report.check_hist(format!("run {run} trace {name} histogram"), &blob, None);
        }
        Ok(())
    }

    /// The histograms of the monitor windows.
    fn check_monitor_histograms(&self, report: &mut CheckReport) -> Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT s.name, w.start_unix_ns, w.cpu, w.count, w.min_ns, w.max_ns, w.histogram
                 FROM monitor_windows w JOIN monitor_series s ON s.id = w.series_id
                 ORDER BY w.series_id, w.start_unix_ns, w.cpu",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            report.monitor_windows += 1;
            let (name, start, cpu): (String, i64, u32) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let stored = (r.get(3)?, r.get(4)?, r.get(5)?);
            let blob: Vec<u8> = r.get(6)?;
            report.check_hist(
                format!(
                    "monitor series {name} window at {} cpu{cpu} histogram",
                    from_sql(start)
                ),
                &blob,
                Some(stored),
            );
        }
        Ok(())
    }

    /// No window number of a series is given twice (a set numbers the windows it holds, from
    /// `window_index` to `last_window_index`).
    fn check_monitor_numbers(&self, report: &mut CheckReport) -> Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT s.name, n.window_index, n.start_unix_ns FROM (
                 SELECT series_id, window_index, start_unix_ns,
                        MAX(last_window_index) OVER (
                            PARTITION BY series_id ORDER BY window_index, start_unix_ns
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
                 FROM monitor_sets) n
             JOIN monitor_series s ON s.id = n.series_id
             WHERE n.before >= n.window_index
             ORDER BY n.series_id, n.window_index",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for (name, index, start) in rows {
            report.problems.push(format!(
                "monitor series {name}: window number {} is given twice (again to the set at {})",
                from_sql(index),
                from_sql(start)
            ));
        }
        Ok(())
    }

    /// Each series' running totals agree with its windows: per CPU the samples counted, the
    /// largest value and the missed periods, and the windows over the series.
    fn check_monitor_totals(&self, report: &mut CheckReport) -> Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT s.id, s.name, (SELECT SUM(windows) FROM monitor_sets m WHERE m.series_id = s.id)
             FROM monitor_series s ORDER BY s.id",
        )?;
        let series = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for (id, name, windows) in series {
            let totals = match self.series_totals(crate::SeriesId(id)) {
                Ok(t) => t,
                Err(e) => {
                    report
                        .problems
                        .push(format!("monitor series {name} totals: {e}"));
                    continue;
                }
            };
            let windows = windows.map_or(0, from_sql);
            let Some(totals) = totals else {
                if windows > 0 {
                    report.problems.push(format!(
                        "monitor series {name}: {windows} windows stored but no totals"
                    ));
                }
                continue;
            };
            if totals.windows != windows {
                report.problems.push(format!(
                    "monitor series {name} totals: count {} windows but {windows} are stored",
                    totals.windows
                ));
            }
            let mut stmt = self.conn.prepare(
                "SELECT cpu, SUM(count), MAX(max_ns), SUM(missed) FROM monitor_windows
                 WHERE series_id = ?1 GROUP BY cpu ORDER BY cpu",
            )?;
            let stored = stmt
                .query_map([id], |r| {
                    Ok((
                        r.get::<_, u32>(0)?,
                        (
                            from_sql(r.get(1)?),
                            from_sql(r.get(2)?),
                            from_sql(r.get(3)?),
                        ),
                    ))
                })?
                .collect::<rusqlite::Result<std::collections::BTreeMap<_, (u64, u64, u64)>>>()?;
            let kept: std::collections::BTreeMap<u32, (u64, u64, u64)> = totals
                .cpus
                .iter()
                .map(|(cpu, c)| (*cpu, (c.histogram.count(), c.histogram.max(), c.missed)))
                .collect();
            for cpu in stored.keys().chain(kept.keys()).collect::<BTreeSet<_>>() {
                let (want, got) = (stored.get(cpu), kept.get(cpu));
                if want != got {
                    let say = |v: Option<&(u64, u64, u64)>| {
                        v.map_or("nothing".to_string(), |(n, max, missed)| {
                            format!("{n} samples, max {max} ns, {missed} missed")
                        })
                    };
                    report.problems.push(format!(
                        "monitor series {name} totals cpu{cpu}: hold {} but the windows hold {}",
                        say(got),
                        say(want)
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every run but those in `bad_runs` reads back whole (JSON parts, windows, spikes, loads,
    /// samples).
    fn check_runs_read_back(
        &self,
        report: &mut CheckReport,
        bad_runs: &BTreeSet<i64>,
    ) -> Result<()> {
        let ids: Vec<i64> = {
            let mut stmt = self.conn.prepare("SELECT id FROM runs ORDER BY id")?;
            stmt.query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        for id in ids.into_iter().filter(|id| !bad_runs.contains(id)) {
            if let Err(e) = self.load_run(RunId(id)) {
                report.problems.push(format!("run {id}: {e}"));
            }
        }
        Ok(())
    }
}
