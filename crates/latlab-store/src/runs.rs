//! Saving, reading, listing and removing runs.

use crate::experiments::{CellRef, cell_upsert_done};
use crate::{
    Result, Store, StoreError, decode_hist, from_json, from_sql, opt_from_sql, opt_to_sql,
    system_id, to_json, to_sql,
};
use latlab_model::load::{LoadPhase, LoadReport, Loads, Throughput};
use latlab_model::trace::{Family, FamilyResult, TraceResult};
use latlab_model::units::CpuList;
use latlab_model::{Overall, RunResult, Spike, Spikes, Stats, ThreadResult, Window};
use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

/// Name of the `trace_results` row holding a trace without its families.
const TRACE_HEAD: &str = "run";

/// The reason a cell's repeat is pending again after its run was removed.
pub const REMOVED: &str = "its run was removed with `latlab db rm`";

/// The store's number for a run (shown by `latlab db list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(pub i64);

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Which runs [`Store::list_runs`] returns (all by default), oldest first.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only runs of this experiment.
    pub experiment: Option<crate::ExperimentId>,
    /// Only runs taken on this host.
    pub hostname: Option<String>,
    /// Only runs started at or after this time (unix ns).
    pub since_unix_ns: Option<u64>,
    /// At most this many, the newest ones.
    pub limit: Option<u32>,
}

/// One row of a run list: what identifies a run and its overall statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: RunId,
    /// [`RunResult::id`].
    pub uid: String,
    pub started_at: String,
    pub start_unix_ns: u64,
    pub elapsed_ns: u64,
    pub method: String,
    pub interval_ns: u64,
    pub policy: String,
    pub priority: u32,
    /// Measured CPUs in the kernel's list form; `None` for unpinned threads.
    pub cpus: Option<String>,
    pub threads: u32,
    pub stop_reason: String,
    pub count: u64,
    pub missed: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Whether `p99_ns` is only a lower bound (an import's samples beyond its histogram range).
    pub p99_is_lower_bound: bool,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    pub hostname: String,
    pub kernel_release: String,
    /// Name of the experiment the run belongs to.
    pub experiment: Option<String>,
    pub experiment_id: Option<crate::ExperimentId>,
    /// Cell key and repeat within the experiment.
    pub cell: Option<(String, u32)>,
    /// What the run's format does not record ([`latlab_model::Unrecorded`]'s names).
    pub not_recorded: Vec<String>,
    /// Whether its missed periods were counted (an import's format does not count them).
    pub missed_recorded: bool,
}

impl RunSummary {
    /// Whether its format records `what` (one of [`latlab_model::Unrecorded`]'s names), as
    /// [`latlab_model::RunResult::records`] says of the whole run.
    pub fn records(&self, what: &str) -> bool {
        !self.not_recorded.iter().any(|n| n == what)
    }
}

/// NaN cannot be stored as an SQLite REAL (it reads back as NULL): NULL stands for it.
fn real(v: f64) -> Option<f64> {
    if v.is_nan() { None } else { Some(v) }
}

impl Store {
    /// Save a run, and mark its cell done when it belongs to an experiment, in one transaction:
    /// either every part is stored or none is.
    pub fn save_run(&mut self, result: &RunResult, cell: Option<&CellRef>) -> Result<RunId> {
        validate(result)?;
        if let Some(id) = self.find_uid(&result.id)? {
            return Err(StoreError::DuplicateRun {
                uid: result.id.clone(),
                id: id.0,
            });
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let system = system_id(&tx, &result.system)?;
        let (experiment_id, cell_id) = match cell {
            Some(c) => (Some(c.experiment.0), Some(cell_upsert_done(&tx, c)?)),
            None => (None, None),
        };
        let run = insert_run_row(&tx, result, system, experiment_id, cell_id)?;
        insert_threads(&tx, run, &result.threads)?;
        insert_spikes(&tx, run, &result.spikes.kept)?;
        insert_load_reports(&tx, run, &result.loads.reports)?;
        insert_load_phases(&tx, run, &result.loads.phases)?;
        if let Some(s) = &result.samples {
            tx.execute(
                "INSERT INTO samples (run_id, period_ns, periods, data) VALUES (?1, ?2, ?3, ?4)",
                params![run, to_sql(s.period_ns), s.series.len() as i64, to_json(s)],
            )?;
        }
        if let Some(t) = &result.trace {
            insert_trace(&tx, run, t)?;
        }
        tx.commit()?;
        Ok(RunId(run))
    }

    /// The run with store number `text`, or with [`RunResult::id`] `text`.
    pub fn find_run(&self, text: &str) -> Result<Option<RunId>> {
        if let Ok(n) = text.parse::<i64>() {
            let found: Option<i64> = self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [n], |r| r.get(0))
                .optional()?;
            if found.is_some() {
                return Ok(found.map(RunId));
            }
        }
        self.find_uid(text)
    }

    fn find_uid(&self, uid: &str) -> Result<Option<RunId>> {
        Ok(self
            .conn
            .query_row("SELECT id FROM runs WHERE uid = ?1", [uid], |r| r.get(0))
            .optional()?
            .map(RunId))
    }

    /// Read a run back: equal to the [`RunResult`] that was saved.
    pub fn load_run(&self, id: RunId) -> Result<RunResult> {
        let run = id.0;
        let what = |part: &str| format!("run {run} {part}");
        let head = self.load_head(run)?;
        let windows = self.load_windows(run)?;
        let threads = self.load_threads(run, windows, &what)?;
        let kept = self.load_spikes(run, &what)?;
        let trace = self.load_trace(run, &what)?;
        let mut reports = self.load_reports(run, &what)?;
        self.load_throughput(run, &mut reports, &what)?;
        let phases = self.load_phases(run)?;
        let samples: Option<String> = self
            .conn
            .query_row("SELECT data FROM samples WHERE run_id = ?1", [run], |r| {
                r.get(0)
            })
            .optional()?;

        let mut run = RunResult {
            schema: head.schema,
            schema_version: head.schema_version,
            latlab_version: head.latlab_version,
            id: head.uid,
            started_at: head.started_at,
            ended_at: head.ended_at,
            start_unix_ns: from_sql(head.start_unix_ns),
            elapsed_ns: from_sql(head.elapsed_ns),
            config: from_json(&head.config, &what("configuration"))?,
            system: from_json(&head.system, &what("system record"))?,
            environment: from_json(&head.environment, &what("environment"))?,
            stop: from_json(&head.stop, &what("stop reason"))?,
            threads,
            overall: Overall {
                missed: from_sql(head.missed),
                max_at_ns: from_sql(head.max_at_ns),
                max_thread: head.max_thread,
                stats: from_json(&head.stats, &what("statistics"))?,
                corrected: from_json(&head.corrected, &what("corrected statistics"))?,
                histogram: decode_hist(&head.histogram, &what("histogram"))?,
            },
            spikes: Spikes {
                threshold_ns: opt_from_sql(head.spike_threshold_ns),
                kept,
                not_kept: from_sql(head.spikes_not_kept),
            },
            samples: samples
                .map(|s| from_json(&s, &what("samples")))
                .transpose()?,
            loads: Loads { reports, phases },
            trace,
        };
        // The histograms are the truth; the stored statistics a cache of them.
        run.refresh_stats();
        Ok(run)
    }

    /// The `runs` row of run `run` with its system record; [`StoreError::UnknownRun`] when there
    /// is none.
    fn load_head(&self, run: i64) -> Result<RunHead> {
        self.conn
            .query_row(
                "SELECT r.schema, r.schema_version, r.latlab_version, r.uid, r.started_at,
                     r.ended_at, r.start_unix_ns, r.elapsed_ns, r.config, s.record, r.environment,
                     r.stop, r.missed, r.overall_max_at_ns, r.overall_max_thread, r.overall_stats,
                     r.overall_corrected, r.overall_histogram, r.spike_threshold_ns,
                     r.spikes_not_kept
                 FROM runs r JOIN systems s ON s.id = r.system_id WHERE r.id = ?1",
                [run],
                |r| {
                    Ok(RunHead {
                        schema: r.get(0)?,
                        schema_version: r.get(1)?,
                        latlab_version: r.get(2)?,
                        uid: r.get(3)?,
                        started_at: r.get(4)?,
                        ended_at: r.get(5)?,
                        start_unix_ns: r.get(6)?,
                        elapsed_ns: r.get(7)?,
                        config: r.get(8)?,
                        system: r.get(9)?,
                        environment: r.get(10)?,
                        stop: r.get(11)?,
                        missed: r.get(12)?,
                        max_at_ns: r.get(13)?,
                        max_thread: r.get(14)?,
                        stats: r.get(15)?,
                        corrected: r.get(16)?,
                        histogram: r.get(17)?,
                        spike_threshold_ns: r.get(18)?,
                        spikes_not_kept: r.get(19)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::UnknownRun(run.to_string()))
    }

    /// The windows of run `run`, by thread index.
    fn load_windows(&self, run: i64) -> Result<Vec<Vec<Window>>> {
        let mut windows: Vec<Vec<Window>> = Vec::new();
        let mut stmt = self.conn.prepare(
            "SELECT thread_idx, window_index, start_ns, count, min_ns, max_ns, p99_ns, missed
                 FROM windows WHERE run_id = ?1 ORDER BY thread_idx, seq",
        )?;
        let rows = stmt.query_map([run], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Window {
                    index: from_sql(r.get(1)?),
                    start_ns: from_sql(r.get(2)?),
                    count: from_sql(r.get(3)?),
                    min: from_sql(r.get(4)?),
                    max: from_sql(r.get(5)?),
                    p99: from_sql(r.get(6)?),
                    missed: from_sql(r.get(7)?),
                },
            ))
        })?;
        for row in rows {
            let (idx, w) = row?;
            let idx = idx as usize;
            if windows.len() <= idx {
                windows.resize_with(idx + 1, Vec::new);
            }
            windows[idx].push(w);
        }
        Ok(windows)
    }

    /// The threads of run `run`, in order, each given its windows from `windows`.
    fn load_threads(
        &self,
        run: i64,
        mut windows: Vec<Vec<Window>>,
        what: &dyn Fn(&str) -> String,
    ) -> Result<Vec<ThreadResult>> {
        let mut threads = Vec::new();
        let mut stmt = self.conn.prepare(
            "SELECT idx, label, cpu, tid, missed, expected_periods, max_at_ns, cpu_time_ns,
                     stats, corrected_stats, histogram, corrected_histogram
                 FROM threads WHERE run_id = ?1 ORDER BY idx",
        )?;
        type Row = (
            i64,
            String,
            Option<u32>,
            i32,
            i64,
            Option<i64>,
            i64,
            Option<i64>,
            String,
            String,
            Vec<u8>,
            Vec<u8>,
        );
        let rows = stmt.query_map([run], |r| -> rusqlite::Result<Row> {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
                r.get(11)?,
            ))
        })?;
        for row in rows {
            let (idx, label, cpu, tid, missed, expected, max_at, cpu_time, st, cst, h, ch) = row?;
            if idx as usize != threads.len() {
                return Err(StoreError::Corrupt {
                    what: what("threads"),
                    detail: format!("thread {idx} follows {} threads", threads.len()),
                });
            }
            let tw = |p: &str| what(&format!("thread {idx} {p}"));
            threads.push(ThreadResult {
                label,
                cpu,
                tid,
                missed: from_sql(missed),
                expected_periods: opt_from_sql(expected),
                max_at_ns: from_sql(max_at),
                stats: from_json::<Stats>(&st, &tw("statistics"))?,
                corrected: from_json::<Stats>(&cst, &tw("corrected statistics"))?,
                cpu_time_ns: opt_from_sql(cpu_time),
                histogram: decode_hist(&h, &tw("histogram"))?,
                corrected_histogram: decode_hist(&ch, &tw("corrected histogram"))?,
                windows: windows
                    .get_mut(idx as usize)
                    .map(std::mem::take)
                    .unwrap_or_default(),
            });
        }
        Ok(threads)
    }

    /// The spikes kept of run `run`, in order, with their stories.
    fn load_spikes(&self, run: i64, what: &dyn Fn(&str) -> String) -> Result<Vec<Spike>> {
        let mut stmt = self.conn.prepare(
            "SELECT thread_idx, cpu, at_ns, value_ns, story FROM spikes WHERE run_id = ?1
                 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map([run], |r| {
                Ok((
                    Spike {
                        thread: r.get(0)?,
                        cpu: r.get(1)?,
                        at_ns: from_sql(r.get(2)?),
                        value_ns: from_sql(r.get(3)?),
                        story: None,
                    },
                    r.get::<_, Option<String>>(4)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(mut s, story)| {
                s.story = story
                    .map(|j| from_json(&j, &what("spike story")))
                    .transpose()?;
                Ok(s)
            })
            .collect::<Result<Vec<_>>>()
    }

    /// The load reports of run `run`, in order, without their throughput.
    fn load_reports(&self, run: i64, what: &dyn Fn(&str) -> String) -> Result<Vec<LoadReport>> {
        let mut stmt = self.conn.prepare(
            "SELECT spec, kind, cpus, workers, started_ns, elapsed_ns, warnings, failed
                 FROM load_reports WHERE run_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map([run], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<String>>(7)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::new();
        for (spec, kind, cpus, workers, started, elapsed, warnings, failed) in rows {
            out.push(LoadReport {
                cpus: cpus
                    .map(|c| from_json(&c, &what("load CPUs")))
                    .transpose()?,
                warnings: from_json(&warnings, &what("load warnings"))?,
                spec,
                kind,
                workers: workers as usize,
                started_ns: from_sql(started),
                elapsed_ns: from_sql(elapsed),
                throughput: Vec::new(),
                failed,
            });
        }
        Ok(out)
    }

    /// Add the throughput rows of run `run` to its load `reports`.
    fn load_throughput(
        &self,
        run: i64,
        reports: &mut [LoadReport],
        what: &dyn Fn(&str) -> String,
    ) -> Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT report_seq, what, unit, rate, total FROM load_throughput
                 WHERE run_id = ?1 ORDER BY report_seq, seq",
        )?;
        let rows = stmt.query_map([run], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Throughput {
                    what: r.get(1)?,
                    unit: r.get(2)?,
                    rate: r.get::<_, Option<f64>>(3)?.unwrap_or(f64::NAN),
                    total: r.get::<_, Option<f64>>(4)?.unwrap_or(f64::NAN),
                },
            ))
        })?;
        for row in rows {
            let (seq, t) = row?;
            let report = reports
                .get_mut(seq as usize)
                .ok_or_else(|| StoreError::Corrupt {
                    what: what("load throughput"),
                    detail: format!("no load report {seq}"),
                })?;
            report.throughput.push(t);
        }
        Ok(())
    }

    /// The load phases of run `run`, in order.
    fn load_phases(&self, run: i64) -> Result<Vec<LoadPhase>> {
        let mut stmt = self.conn.prepare(
            "SELECT phase_index, spec, start_ns, end_ns FROM load_phases
                 WHERE run_id = ?1 ORDER BY seq",
        )?;
        Ok(stmt
            .query_map([run], |r| {
                Ok(LoadPhase {
                    index: r.get::<_, i64>(0)? as usize,
                    spec: r.get(1)?,
                    start_ns: from_sql(r.get(2)?),
                    end_ns: from_sql(r.get(3)?),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The trace of a run, from its `run` row and one row per family (in [`Family::ALL`] order).
    fn load_trace(&self, run: i64, what: &dyn Fn(&str) -> String) -> Result<Option<TraceResult>> {
        let mut stmt = self
            .conn
            .prepare("SELECT name, data FROM trace_results WHERE run_id = ?1")?;
        let rows = stmt
            .query_map([run], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let Some((_, head)) = rows.iter().find(|(n, _)| n == TRACE_HEAD) else {
            return Ok(None);
        };
        let mut trace: TraceResult = from_json(head, &what("trace"))?;
        for (name, data) in &rows {
            if name != TRACE_HEAD {
                let f: FamilyResult = from_json(data, &what(&format!("trace {name}")))?;
                trace.families.push(f);
            }
        }
        trace
            .families
            .sort_by_key(|f| Family::ALL.iter().position(|a| *a == f.family));
        Ok(Some(trace))
    }

    /// Runs matching `filter`, oldest first by when they started (runs of an unknown start, from
    /// imports, first); `limit` keeps the newest.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>> {
        let mut sql = String::from(
            "SELECT r.id, r.uid, r.started_at, r.start_unix_ns, r.elapsed_ns, r.method,
                 r.interval_ns, r.policy, r.priority, r.cpus, r.threads, r.stop_reason, r.count,
                 r.missed, r.min_ns, r.p50_ns, r.p99_ns, r.p99_9_ns, r.max_ns, s.hostname,
                 s.kernel_release, e.name, r.experiment_id, c.cell_key, c.repeat,
                 r.overall_stats, r.environment
             FROM runs r
             JOIN systems s ON s.id = r.system_id
             LEFT JOIN experiments e ON e.id = r.experiment_id
             LEFT JOIN cells c ON c.id = r.cell_id
             WHERE (?1 IS NULL OR r.experiment_id = ?1)
               AND (?2 IS NULL OR s.hostname = ?2)
               AND (?3 IS NULL OR r.start_unix_ns >= ?3)
             ORDER BY r.start_unix_ns DESC, r.id DESC",
        );
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut stmt = self.conn.prepare(&sql)?;
        let mut out = stmt
            .query_map(
                params![
                    filter.experiment.map(|e| e.0),
                    filter.hostname,
                    opt_to_sql(filter.since_unix_ns)
                ],
                |r| {
                    let key: Option<String> = r.get(23)?;
                    let repeat: Option<u32> = r.get(24)?;
                    // What cannot be read here is found by `db check`: not marked.
                    let stats: Option<latlab_model::Stats> =
                        serde_json::from_str(&r.get::<_, String>(25)?).ok();
                    let environment: Option<latlab_model::RunEnvironment> =
                        serde_json::from_str(&r.get::<_, String>(26)?).ok();
                    // A lower bound as its bound (the end of the histogram's range).
                    let p99_ns: u64 = from_sql(r.get(16)?);
                    let p99_ns = stats
                        .as_ref()
                        .map_or(p99_ns, |s| s.percentile_shown(99.0, p99_ns));
                    Ok(RunSummary {
                        id: RunId(r.get(0)?),
                        uid: r.get(1)?,
                        started_at: r.get(2)?,
                        start_unix_ns: from_sql(r.get(3)?),
                        elapsed_ns: from_sql(r.get(4)?),
                        method: r.get(5)?,
                        interval_ns: from_sql(r.get(6)?),
                        policy: r.get(7)?,
                        priority: r.get(8)?,
                        cpus: r.get(9)?,
                        threads: r.get(10)?,
                        stop_reason: r.get(11)?,
                        count: from_sql(r.get(12)?),
                        missed: from_sql(r.get(13)?),
                        min_ns: from_sql(r.get(14)?),
                        p50_ns: from_sql(r.get(15)?),
                        p99_ns,
                        p99_is_lower_bound: stats
                            .is_some_and(|s| s.percentile_is_lower_bound(99.0, s.p99)),
                        p99_9_ns: from_sql(r.get(17)?),
                        max_ns: from_sql(r.get(18)?),
                        hostname: r.get(19)?,
                        kernel_release: r.get(20)?,
                        experiment: r.get(21)?,
                        experiment_id: r.get::<_, Option<i64>>(22)?.map(crate::ExperimentId),
                        cell: key.zip(repeat),
                        missed_recorded: environment.as_ref().is_none_or(|e| !e.missed_unrecorded),
                        not_recorded: environment.map(|e| e.not_recorded).unwrap_or_default(),
                    })
                },
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        out.reverse();
        Ok(out)
    }

    /// Remove runs and everything that belongs to them, in one transaction; an unknown id removes
    /// nothing. A cell left without a run goes back to pending (a resumed plan redoes it), with
    /// [`REMOVED`] as its reason so a report says why it is missing; system records no longer
    /// used are removed.
    pub fn remove_runs(&mut self, ids: &[RunId]) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for id in ids {
            let cell: Option<Option<i64>> = tx
                .query_row("SELECT cell_id FROM runs WHERE id = ?1", [id.0], |r| {
                    r.get(0)
                })
                .optional()?;
            let Some(cell) = cell else {
                return Err(StoreError::UnknownRun(id.to_string()));
            };
            tx.execute("DELETE FROM runs WHERE id = ?1", [id.0])?;
            if let Some(cell) = cell {
                tx.execute(
                    "UPDATE cells SET status = 'pending', updated_at = ?2, reason = ?3
                     WHERE id = ?1 AND status = 'done'
                       AND NOT EXISTS (SELECT 1 FROM runs WHERE cell_id = ?1)",
                    params![cell, crate::now_rfc3339(), REMOVED],
                )?;
            }
        }
        tx.execute(
            "DELETE FROM systems WHERE id NOT IN (SELECT system_id FROM runs)
               AND id NOT IN (SELECT system_id FROM monitor_series WHERE system_id IS NOT NULL)",
            [],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Remove one run (see [`Store::remove_runs`]).
    pub fn remove_run(&mut self, id: RunId) -> Result<()> {
        self.remove_runs(&[id])
    }

    /// Number of runs stored.
    pub fn run_count(&self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0))
            .map(from_sql)?)
    }
}

/// Insert the `runs` row of `result` (its configuration, overall statistics and spike
/// summary) and return its row id.
fn insert_run_row(
    tx: &Transaction<'_>,
    result: &RunResult,
    system: i64,
    experiment_id: Option<i64>,
    cell_id: Option<i64>,
) -> Result<i64> {
    let cfg = &result.config;
    let o = &result.overall;
    let cpus = cfg
        .cpus
        .as_ref()
        .map(|c| CpuList::from_cpus(c.clone()).to_string());
    tx.execute(
        "INSERT INTO runs (uid, experiment_id, cell_id, system_id, schema, schema_version,
                 latlab_version, started_at, ended_at, start_unix_ns, elapsed_ns, method,
                 interval_ns, policy, priority, cpus, threads, stop_reason, count, missed, min_ns,
                 p50_ns, p99_ns, p99_9_ns, max_ns, config, environment, stop, overall_max_at_ns,
                 overall_max_thread, overall_stats, overall_corrected, overall_histogram,
                 spike_threshold_ns, spikes_not_kept)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33,
                 ?34, ?35)",
        params![
            result.id,
            experiment_id,
            cell_id,
            system,
            result.schema,
            result.schema_version,
            result.latlab_version,
            result.started_at,
            result.ended_at,
            to_sql(result.start_unix_ns),
            to_sql(result.elapsed_ns),
            cfg.method.name(),
            to_sql(cfg.interval_ns),
            cfg.policy.name(),
            cfg.priority,
            cpus,
            cfg.threads,
            result.stop.name(),
            to_sql(o.stats.count),
            to_sql(o.missed),
            to_sql(o.stats.min),
            to_sql(o.stats.p50),
            to_sql(o.stats.p99),
            to_sql(o.stats.p99_9),
            to_sql(o.stats.max),
            to_json(&result.config),
            to_json(&result.environment),
            to_json(&result.stop),
            to_sql(o.max_at_ns),
            o.max_thread,
            to_json(&o.stats),
            to_json(&o.corrected),
            o.histogram.encode(),
            opt_to_sql(result.spikes.threshold_ns),
            to_sql(result.spikes.not_kept),
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

/// Insert the `threads` rows of run `run`, each followed by its `windows` rows.
fn insert_threads(tx: &Transaction<'_>, run: i64, threads: &[ThreadResult]) -> Result<()> {
    let mut thread_stmt = tx.prepare(
        "INSERT INTO threads (run_id, idx, label, cpu, tid, missed, expected_periods,
                     max_at_ns, cpu_time_ns, count, min_ns, p99_ns, p99_9_ns, max_ns, stats,
                     corrected_stats, histogram, corrected_histogram)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                     ?17, ?18)",
    )?;
    let mut window_stmt = tx.prepare(
        "INSERT INTO windows (run_id, thread_idx, seq, window_index, start_ns, count,
                     min_ns, max_ns, p99_ns, missed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (idx, t) in threads.iter().enumerate() {
        thread_stmt.execute(params![
            run,
            idx as i64,
            t.label,
            t.cpu,
            t.tid,
            to_sql(t.missed),
            opt_to_sql(t.expected_periods),
            to_sql(t.max_at_ns),
            opt_to_sql(t.cpu_time_ns),
            to_sql(t.stats.count),
            to_sql(t.stats.min),
            to_sql(t.stats.p99),
            to_sql(t.stats.p99_9),
            to_sql(t.stats.max),
            to_json(&t.stats),
            to_json(&t.corrected),
            t.histogram.encode(),
            t.corrected_histogram.encode(),
        ])?;
        for (seq, w) in t.windows.iter().enumerate() {
            window_stmt.execute(params![
                run,
                idx as i64,
                seq as i64,
                to_sql(w.index),
                to_sql(w.start_ns),
                to_sql(w.count),
                to_sql(w.min),
                to_sql(w.max),
                to_sql(w.p99),
                to_sql(w.missed),
            ])?;
        }
    }
    Ok(())
}

/// Insert the `spikes` rows of run `run`: the spikes kept, in order.
fn insert_spikes(tx: &Transaction<'_>, run: i64, kept: &[Spike]) -> Result<()> {
    let mut spike_stmt = tx.prepare(
        "INSERT INTO spikes (run_id, seq, thread_idx, cpu, at_ns, value_ns, story)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (seq, s) in kept.iter().enumerate() {
        spike_stmt.execute(params![
            run,
            seq as i64,
            s.thread,
            s.cpu,
            to_sql(s.at_ns),
            to_sql(s.value_ns),
            s.story.as_ref().map(to_json)
        ])?;
    }
    Ok(())
}

/// Insert the `load_reports` rows of run `run`, each followed by its `load_throughput` rows.
fn insert_load_reports(tx: &Transaction<'_>, run: i64, reports: &[LoadReport]) -> Result<()> {
    let mut report_stmt = tx.prepare(
        "INSERT INTO load_reports (run_id, seq, spec, kind, cpus, workers, started_ns,
                     elapsed_ns, warnings, failed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    let mut tp_stmt = tx.prepare(
        "INSERT INTO load_throughput (run_id, report_seq, seq, what, unit, rate, total)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (seq, l) in reports.iter().enumerate() {
        report_stmt.execute(params![
            run,
            seq as i64,
            l.spec,
            l.kind,
            l.cpus.as_ref().map(to_json),
            l.workers as i64,
            to_sql(l.started_ns),
            to_sql(l.elapsed_ns),
            to_json(&l.warnings),
            l.failed,
        ])?;
        for (tseq, t) in l.throughput.iter().enumerate() {
            tp_stmt.execute(params![
                run,
                seq as i64,
                tseq as i64,
                t.what,
                t.unit,
                real(t.rate),
                real(t.total)
            ])?;
        }
    }
    Ok(())
}

/// Insert the `load_phases` rows of run `run`.
fn insert_load_phases(tx: &Transaction<'_>, run: i64, phases: &[LoadPhase]) -> Result<()> {
    let mut phase_stmt = tx.prepare(
        "INSERT INTO load_phases (run_id, seq, phase_index, spec, start_ns, end_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (seq, p) in phases.iter().enumerate() {
        phase_stmt.execute(params![
            run,
            seq as i64,
            p.index as i64,
            p.spec,
            to_sql(p.start_ns),
            to_sql(p.end_ns)
        ])?;
    }
    Ok(())
}

/// Insert the `trace_results` rows of run `run`: the trace without its families, then one
/// row per family.
fn insert_trace(tx: &Transaction<'_>, run: i64, t: &TraceResult) -> Result<()> {
    let mut stmt = tx.prepare(
        "INSERT INTO trace_results (run_id, name, data, histogram)
                     VALUES (?1, ?2, ?3, ?4)",
    )?;
    let head = TraceResult {
        families: Vec::new(),
        ..t.clone()
    };
    stmt.execute(params![run, TRACE_HEAD, to_json(&head), None::<Vec<u8>>])?;
    for f in &t.families {
        stmt.execute(params![
            run,
            f.family.name(),
            to_json(f),
            f.histogram.encode()
        ])?;
    }
    Ok(())
}

/// The `runs` row of a run, as read by [`Store::load_run`] before decoding.
struct RunHead {
    schema: String,
    schema_version: u32,
    latlab_version: String,
    uid: String,
    started_at: String,
    ended_at: String,
    start_unix_ns: i64,
    elapsed_ns: i64,
    config: String,
    system: String,
    environment: String,
    stop: String,
    missed: i64,
    max_at_ns: i64,
    max_thread: u32,
    stats: String,
    corrected: String,
    histogram: Vec<u8>,
    spike_threshold_ns: Option<i64>,
    spikes_not_kept: i64,
}

/// What the relational layout needs of a result beyond its types.
fn validate(r: &RunResult) -> Result<()> {
    let n = r.threads.len();
    if let Some(s) = r.spikes.kept.iter().find(|s| s.thread as usize >= n) {
        return Err(StoreError::Invalid(format!(
            "spike at {} ns names thread {} of a run with {n} threads",
            s.at_ns, s.thread
        )));
    }
    Ok(())
}
