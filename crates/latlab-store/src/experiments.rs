//! Experiments (a plan run by `latlab run`) and their cells, so an interrupted plan resumes.
//!
//! A cell is done exactly when its run is saved: [`Store::save_run`] with a [`CellRef`] stores the
//! run and marks the cell done in the same transaction, so a run killed mid-cell leaves the cell
//! not done and `--resume` redoes it.

use crate::{Result, Store, StoreError, fnv64, now_rfc3339, to_json};
use rusqlite::{Connection, OptionalExtension, params};

/// The store's number for an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExperimentId(pub i64);

impl std::fmt::Display for ExperimentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where an experiment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExperimentStatus {
    Running,
    Done,
    Interrupted,
    Failed,
}

impl ExperimentStatus {
    pub fn name(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Done => "done",
            ExperimentStatus::Interrupted => "interrupted",
            ExperimentStatus::Failed => "failed",
        }
    }
    fn from_name(s: &str) -> Option<Self> {
        [
            ExperimentStatus::Running,
            ExperimentStatus::Done,
            ExperimentStatus::Interrupted,
            ExperimentStatus::Failed,
        ]
        .into_iter()
        .find(|x| x.name() == s)
    }
}

/// Where a cell stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellStatus {
    Pending,
    /// Its run is saved.
    Done,
    /// This machine cannot run it (with the reason).
    Skipped,
    Failed,
}

impl CellStatus {
    pub fn name(self) -> &'static str {
        match self {
            CellStatus::Pending => "pending",
            CellStatus::Done => "done",
            CellStatus::Skipped => "skipped",
            CellStatus::Failed => "failed",
        }
    }
    fn from_name(s: &str) -> Option<Self> {
        [
            CellStatus::Pending,
            CellStatus::Done,
            CellStatus::Skipped,
            CellStatus::Failed,
        ]
        .into_iter()
        .find(|x| x.name() == s)
    }
}

/// An experiment as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub id: ExperimentId,
    pub name: String,
    pub plan: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub status: ExperimentStatus,
}

/// One repeat of one cell of an experiment: what a run belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRef {
    pub experiment: ExperimentId,
    /// A canonical key of the cell's parameters (the same cell always has the same key).
    pub key: String,
    /// The cell's parameters.
    pub params: serde_json::Value,
    /// Repeat number, from 0.
    pub repeat: u32,
}

/// A cell as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub key: String,
    pub params: serde_json::Value,
    pub repeat: u32,
    pub status: CellStatus,
    pub reason: Option<String>,
    /// Runs saved for it (normally one).
    pub runs: Vec<crate::RunId>,
}

/// Insert the cell or mark it done, returning its row id (inside the run's transaction).
pub(crate) fn cell_upsert_done(conn: &Connection, c: &CellRef) -> Result<i64> {
    upsert_cell(conn, c, CellStatus::Done, None)?.ok_or_else(|| {
        StoreError::Invalid(format!(
            "cell {} repeat {} could not be marked done",
            c.key, c.repeat
        ))
    })
}

/// Insert or update a cell of an existing experiment (refused for an unknown one).
fn upsert_cell(
    conn: &Connection,
    c: &CellRef,
    status: CellStatus,
    reason: Option<&str>,
) -> Result<Option<i64>> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT id FROM experiments WHERE id = ?1",
            [c.experiment.0],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Err(StoreError::UnknownExperiment(c.experiment.0));
    }
    // A done cell stays done until its run is removed.
    Ok(conn
        .query_row(
        "INSERT INTO cells (experiment_id, cell_key, params, repeat, status, reason, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (experiment_id, cell_key, repeat) DO UPDATE SET
             params = excluded.params, status = excluded.status, reason = excluded.reason,
             updated_at = excluded.updated_at
         WHERE cells.status != 'done' OR excluded.status = 'done'
         RETURNING id",
        params![
            c.experiment.0,
            c.key,
            to_json(&c.params),
            c.repeat,
            status.name(),
            reason,
            now_rfc3339()
        ],
        |r| r.get(0),
    )
        .optional()?)
}

impl Store {
    /// Start an experiment for `plan` (its text as given), status running.
    pub fn create_experiment(&mut self, name: &str, plan: &str) -> Result<ExperimentId> {
        self.conn.execute(
            "INSERT INTO experiments (name, plan, plan_hash, started_at, status)
             VALUES (?1, ?2, ?3, ?4, 'running')",
            params![name, plan, fnv64(plan), now_rfc3339()],
        )?;
        Ok(ExperimentId(self.conn.last_insert_rowid()))
    }

    /// Set an experiment's status (and its end time unless it is running again).
    pub fn set_experiment_status(
        &mut self,
        id: ExperimentId,
        status: ExperimentStatus,
    ) -> Result<()> {
        let ended = (status != ExperimentStatus::Running).then(now_rfc3339);
        let n = self.conn.execute(
            "UPDATE experiments SET status = ?2, ended_at = ?3 WHERE id = ?1",
            params![id.0, status.name(), ended],
        )?;
        if n == 0 {
            return Err(StoreError::UnknownExperiment(id.0));
        }
        Ok(())
    }

    /// The newest experiment with exactly this plan text that is not done: the one `--resume`
    /// continues.
    pub fn resumable_experiment(&self, plan: &str) -> Result<Option<Experiment>> {
        let id: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM experiments
                 WHERE plan_hash = ?1 AND plan = ?2 AND status != 'done'
                 ORDER BY id DESC LIMIT 1",
                params![fnv64(plan), plan],
                |r| r.get(0),
            )
            .optional()?;
        id.map(|id| self.experiment(ExperimentId(id))).transpose()
    }

    /// One experiment.
    pub fn experiment(&self, id: ExperimentId) -> Result<Experiment> {
        self.experiments_where("WHERE id = ?1", params![id.0])?
            .pop()
            .ok_or(StoreError::UnknownExperiment(id.0))
    }

    /// Every experiment, oldest first.
    pub fn list_experiments(&self) -> Result<Vec<Experiment>> {
        self.experiments_where("", [])
    }

    fn experiments_where(&self, filter: &str, p: impl rusqlite::Params) -> Result<Vec<Experiment>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, name, plan, started_at, ended_at, status FROM experiments {filter}
             ORDER BY id"
        ))?;
        let rows = stmt
            .query_map(p, |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(id, name, plan, started_at, ended_at, status)| {
                Ok(Experiment {
                    id: ExperimentId(id),
                    status: ExperimentStatus::from_name(&status).ok_or_else(|| {
                        StoreError::Corrupt {
                            what: format!("experiment {id}"),
                            detail: format!("unknown status {status:?}"),
                        }
                    })?,
                    name,
                    plan,
                    started_at,
                    ended_at,
                })
            })
            .collect()
    }

    /// Record a cell that has no run: pending, skipped or failed (with the reason). A done cell is
    /// recorded by saving its run with [`Store::save_run`], and stays done (this call leaves it).
    pub fn record_cell(
        &mut self,
        cell: &CellRef,
        status: CellStatus,
        reason: Option<&str>,
    ) -> Result<()> {
        if status == CellStatus::Done {
            return Err(StoreError::Invalid(
                "a cell is done when its run is saved (save_run with the cell)".into(),
            ));
        }
        let tx = self.conn.transaction()?;
        upsert_cell(&tx, cell, status, reason)?;
        tx.commit()?;
        Ok(())
    }

    /// Cells of an experiment whose run is saved, as (key, repeat): what `--resume` skips.
    pub fn done_cells(&self, experiment: ExperimentId) -> Result<Vec<(String, u32)>> {
        let mut stmt = self.conn.prepare(
            "SELECT cell_key, repeat FROM cells WHERE experiment_id = ?1 AND status = 'done'
             ORDER BY id",
        )?;
        Ok(stmt
            .query_map([experiment.0], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Every recorded cell of an experiment with its runs, in the order first recorded.
    pub fn cells(&self, experiment: ExperimentId) -> Result<Vec<Cell>> {
        let mut stmt = self.conn.prepare(
            "SELECT c.id, c.cell_key, c.params, c.repeat, c.status, c.reason,
                 (SELECT group_concat(r.id) FROM runs r WHERE r.cell_id = c.id)
             FROM cells c WHERE c.experiment_id = ?1 ORDER BY c.id",
        )?;
        let rows = stmt
            .query_map([experiment.0], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, u32>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(id, key, params, repeat, status, reason, runs)| {
                let what = format!("cell {id}");
                Ok(Cell {
                    params: crate::from_json(&params, &what)?,
                    status: CellStatus::from_name(&status).ok_or_else(|| StoreError::Corrupt {
                        what: what.clone(),
                        detail: format!("unknown status {status:?}"),
                    })?,
                    runs: runs
                        .unwrap_or_default()
                        .split(',')
                        .filter_map(|s| s.parse().ok().map(crate::RunId))
                        .collect(),
                    key,
                    repeat,
                    reason,
                })
            })
            .collect()
    }
}
