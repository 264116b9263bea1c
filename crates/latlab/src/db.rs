//! `latlab db`: list, show, remove, vacuum and check the runs of a results store, and
//! [`save_result`] for commands that save a run (`latlab measure --db`).

use crate::cli_error::{CliError, CliResult};
use anyhow::Context;
use clap::{Args, Subcommand};
use latlab_model::units::format_us;
use latlab_model::{RunResult, Unrecorded};
use latlab_store::{ExperimentId, RunFilter, RunId, RunSummary, Store, StoreError};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct DbArgs {
    /// The results store (default: $LATLAB_DB, else ./latlab.db).
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,

    #[command(subcommand)]
    command: DbCommand,
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// List the stored runs, oldest first.
    List {
        /// Only the runs of experiment N.
        #[arg(long, value_name = "N")]
        experiment: Option<i64>,
        /// Only the newest N runs.
        #[arg(long, value_name = "N", value_parser = runs, allow_negative_numbers = true)]
        limit: Option<u32>,
    },
    /// Show a run: its summary, or with --json the full result.
    Show {
        /// The run's number (from `latlab db list`) or its result id.
        #[arg(value_name = "ID")]
        id: String,
        /// Print the full result as JSON (as `latlab measure --json` wrote it).
        #[arg(long)]
        json: bool,
    },
    /// Remove runs and everything stored with them (all or none).
    Rm {
        /// Run numbers (from `latlab db list`) or result ids.
        #[arg(value_name = "ID", required = true)]
        ids: Vec<String>,
    },
    /// Rebuild the store's file, giving the space of removed runs back.
    Vacuum,
    /// Check the store: SQLite integrity, references between rows, every histogram and every run
    /// read back whole. Exit code 1 when anything is wrong.
    Check,
    /// Save result files written by `latlab measure --json` (or `db show --json`) as runs
    /// (`latlab import` reads other tools' output).
    ImportJson {
        /// latlab JSON result files; one already stored is said and skipped.
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
    },
}

/// Save a run just measured as a new run in the store at `db` (default: `$LATLAB_DB`, else
/// `./latlab.db`), creating the store if needed; a line saying where it went. One the store
/// cannot take is kept in a file of its own ([`rescue`]), and the error says where.
pub fn save_measured(db: Option<&Path>, result: &RunResult) -> CliResult<String> {
    let path = latlab_store::resolve_path(db);
    let saved = crate::args::open_store(&path).and_then(|mut store| {
        store
            .save_run(result, None)
            .with_context(|| format!("saving the run to {}", path.display()))
            .map_err(CliError::Failed)
    });
    match saved {
        Ok(id) => Ok(format!("saved as run {id} in {}", path.display())),
        Err(e) => Err(CliError::Failed(anyhow::anyhow!(
            "{e:#}; {}",
            rescue(result, &path)
        ))),
    }
}

/// A run the store could not take (a full disk, a store gone read-only) is written to a file of
/// its own so that what was measured is not lost: `latlab-unsaved-ID.json` beside the store, or
/// else in the temporary directory. Returns the words that say where, or that it is lost.
pub fn rescue(result: &RunResult, store: &Path) -> String {
    let name = format!("latlab-unsaved-{}.json", result.id);
    match latlab_store::rescue_file(store, &name, &result.to_json_pretty()) {
        Ok(path) => format!(
            "the run is kept in {} (latlab db import-json {} --db {} stores it once the store \
             can take it)",
            path.display(),
            latlab_model::units::shell_path(&path),
            latlab_model::units::shell_path(store)
        ),
        Err(why) => format!("the run is lost: no file could take it ({why})"),
    }
}

pub fn run(args: DbArgs) -> CliResult<ExitCode> {
    let path = latlab_store::resolve_path(args.db.as_deref());
    match args.command {
        DbCommand::List { experiment, limit } => list(&path, experiment, limit),
        DbCommand::Show { id, json } => show(&path, &id, json),
        DbCommand::Rm { ids } => rm(&path, &ids),
        DbCommand::Vacuum => vacuum(&path),
        DbCommand::Check => check(&path),
        DbCommand::ImportJson { files } => import_json(args.db.as_deref(), &files),
    }
}

fn failed(e: StoreError) -> CliError {
    CliError::Failed(anyhow::Error::new(e))
}

/// A run named on the command line: its number or its result id.
fn resolve(store: &Store, text: &str) -> CliResult<RunId> {
    if text.trim().is_empty() {
        return Err(CliError::Usage(
            "empty run id (accepted: a number from `latlab db list` or a result id)".into(),
        ));
    }
    store.find_run(text).map_err(failed)?.ok_or_else(|| {
        // A monitoring series is no run: its report is what shows it.
        let series = text
            .strip_prefix("series:")
            .map(|name| format!("; a monitoring series is shown by `latlab report series:{name}`"))
            .unwrap_or_default();
        CliError::Usage(format!(
            "no run {text} in {} (accepted: a number from `latlab db list` or a result id{series})",
            store.path().display()
        ))
    })
}

/// `--limit`: how many runs to list, 1 or more (0 would list nothing).
fn runs(text: &str) -> Result<u32, String> {
    let accepted = "(accepted: a number of runs, 1 or more, e.g. 10)";
    match text.trim().parse::<i64>() {
        Ok(0) => Err(format!("0 lists nothing {accepted}")),
        Ok(n) if n < 0 => Err(format!("{n} is negative {accepted}")),
        Ok(n) => u32::try_from(n).map_err(|_| format!("{n} is too many {accepted}")),
        Err(_) => Err(format!("{text:?} is not a number {accepted}")),
    }
}

fn list(path: &Path, experiment: Option<i64>, limit: Option<u32>) -> CliResult<ExitCode> {
    // A store that is not there is a wrong --db, as for every other reader of the store.
    let store = crate::args::open_existing(path)?;
    if let Some(e) = experiment
        && let Err(StoreError::UnknownExperiment(_)) = store.experiment(ExperimentId(e))
    {
        let known: Vec<String> = store
            .list_experiments()
            .map_err(failed)?
            .iter()
            .map(|x| x.id.0.to_string())
            .collect();
        return Err(CliError::Usage(format!(
            "--experiment {e}: no experiment {e} in {} (accepted: {})",
            path.display(),
            if known.is_empty() {
                "none: it holds no experiment".to_string()
            } else {
                format!("one of {}", known.join(", "))
            }
        )));
    }
    let runs = store
        .list_runs(&RunFilter {
            experiment: experiment.map(ExperimentId),
            limit,
            ..Default::default()
        })
        .map_err(failed)?;
    if runs.is_empty() {
        let series = crate::results::series_items(&[(String::new(), store)]);
        if series.is_empty() || experiment.is_some() {
            println!("no runs in {}", path.display());
        } else {
            println!(
                "no runs in {}; it holds monitoring windows: {} (latlab report {} --db {})",
                path.display(),
                series.join(", "),
                latlab_model::units::shell_word(&series[0]),
                latlab_model::units::shell_path(path)
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", list_table(&runs));
    Ok(ExitCode::SUCCESS)
}

/// The share of its periods a run missed, percent; `None` where its format does not count them.
fn missed_share(r: &RunSummary) -> Option<f64> {
    let periods = r.count + r.missed;
    (r.missed_recorded && periods > 0).then(|| r.missed as f64 * 100.0 / periods as f64)
}

/// The run list: one row per run, latencies in µs with one decimal.
fn list_table(runs: &[RunSummary]) -> String {
    let rows: Vec<[String; 9]> = runs
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                started(r.start_unix_ns, &r.started_at),
                elapsed(r.elapsed_ns),
                format!(
                    "{}/{}",
                    if r.records(Unrecorded::METHOD) {
                        r.method.as_str()
                    } else {
                        "-"
                    },
                    latlab_model::interval_text(r.interval_ns)
                ),
                match &r.cpus {
                    Some(cpus) => cpus.clone(),
                    None if !r.records(Unrecorded::CPUS) => {
                        format!("{}, not recorded", r.threads)
                    }
                    None => format!("{} unpinned", r.threads),
                },
                missed_share(r).map_or_else(|| "-".into(), |p| format!("{p:.1}%")),
                format!(
                    "{}{}",
                    if r.p99_is_lower_bound { "≥" } else { "" },
                    format_us(r.p99_ns, 1)
                ),
                format_us(r.max_ns, 1),
                match (&r.experiment, &r.cell) {
                    (Some(e), Some((key, repeat))) => format!("{e}: {key} #{}", repeat + 1),
                    (Some(e), None) => e.clone(),
                    (None, _) => "-".into(),
                },
            ]
        })
        .collect();
    let header = [
        "id",
        "started (UTC)",
        "duration",
        "method/interval",
        "CPUs",
        "missed",
        "p99 (µs)",
        "max (µs)",
        "experiment",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Numbers right-aligned, text left-aligned; the last column unpadded.
    let right = [true, false, true, false, false, true, true, true, false];
    let line = |cells: &[&str]| {
        let mut out = String::new();
        for (k, cell) in cells.iter().enumerate() {
            let pad = widths[k].saturating_sub(cell.chars().count());
            if k > 0 {
                out.push_str("  ");
            }
            if right[k] {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            } else if k + 1 < cells.len() {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(&header);
    for row in &rows {
        out.push_str(&line(&row.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    if runs.iter().any(|r| r.p99_is_lower_bound) {
        out.push_str(latlab_report::LOWER_BOUND_NOTE);
        out.push('\n');
    }
    let selection = latlab_report::MISSED_SELECTION_PCT;
    if runs
        .iter()
        .any(|r| missed_share(r).is_some_and(|p| p >= selection))
    {
        out.push_str(&format!(
            "missed: the share of periods with no wake-up measured; from {selection:.0}% on, a \
             run's latencies\n  are only the wake-ups that happened (stalls took the others): \
             its p99 and max look better than the machine was\n"
        ));
    }
    out
}

/// `2026-11-22T15:59:32.661619Z` → `2026-11-22 15:59:32`; `-` when the start is unknown (an
/// import from a format without one).
fn started(start_unix_ns: u64, rfc3339: &str) -> String {
    let Some(rfc3339) = latlab_model::known_start(start_unix_ns, rfc3339) else {
        return "-".into();
    };
    let s = rfc3339.replacen('T', " ", 1);
    s.split('.')
        .next()
        .unwrap_or(&s)
        .trim_end_matches('Z')
        .to_string()
}

/// A run's length, short: `0.3s`, `10.0s`, `5m03s`, `2h05m`; `-` when unknown.
fn elapsed(ns: u64) -> String {
    latlab_model::known_time(ns).map_or_else(|| "-".into(), latlab_model::units::format_elapsed)
}

fn show(path: &Path, id: &str, json: bool) -> CliResult<ExitCode> {
    let store = crate::args::open_existing(path)?;
    let id = resolve(&store, id)?;
    let result = store.load_run(id).map_err(failed)?;
    if json {
        println!("{}", result.to_json_pretty());
        return Ok(ExitCode::SUCCESS);
    }
    let summary = store
        .list_runs(&RunFilter::default())
        .map_err(failed)?
        .into_iter()
        .find(|r| r.id == id);
    let mut out = format!("stored:   run {id} in {}", path.display());
    if let Some(RunSummary {
        experiment: Some(e),
        experiment_id: Some(eid),
        cell,
        ..
    }) = &summary
    {
        let _ = write!(out, ", experiment {eid} ({e})");
        if let Some((key, repeat)) = cell {
            let _ = write!(out, ", cell {key} repeat {}", repeat + 1);
        }
    }
    println!("{out}");
    print!("{}", latlab_report::summary_table(&result));
    Ok(ExitCode::SUCCESS)
}

fn rm(path: &Path, ids: &[String]) -> CliResult<ExitCode> {
    let mut store = crate::args::open_existing_to_change(path)?;
    // Every id is checked before anything is removed.
    let mut runs = Vec::new();
    for text in ids {
        let id = resolve(&store, text)?;
        if !runs.contains(&id) {
            runs.push(id);
        }
    }
    let uids: std::collections::HashMap<RunId, String> = store
        .list_runs(&RunFilter::default())
        .map_err(failed)?
        .into_iter()
        .map(|r| (r.id, r.uid))
        .collect();
    store.remove_runs(&runs).map_err(failed)?;
    for id in &runs {
        match uids.get(id) {
            Some(uid) => println!("removed run {id} ({uid})"),
            None => println!("removed run {id}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Size of the store's file and its write-ahead log.
fn store_size(path: &Path) -> u64 {
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    [path.to_path_buf(), wal]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

fn size_text(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes as f64 >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

fn vacuum(path: &Path) -> CliResult<ExitCode> {
    let mut store = crate::args::open_existing_to_change(path)?;
    let before = store_size(path);
    store
        .vacuum()
        .map_err(|e| CliError::Failed(anyhow::Error::new(e).context("vacuum")))?;
    drop(store);
    let after = store_size(path);
    println!(
        "vacuumed {}: {} -> {}",
        path.display(),
        size_text(before),
        size_text(after)
    );
    Ok(ExitCode::SUCCESS)
}

fn check(path: &Path) -> CliResult<ExitCode> {
    let store = crate::args::open_existing(path)?;
    let report = store.check().map_err(failed)?;
    for p in &report.problems {
        println!("problem: {p}");
    }
    use latlab_model::units::plural;
    let checked = format!(
        "{}, {}, {} checked",
        plural(report.runs as u64, "run", "runs"),
        plural(report.histograms as u64, "histogram", "histograms"),
        plural(
            report.monitor_windows as u64,
            "monitoring window",
            "monitoring windows"
        )
    );
    if report.is_ok() {
        println!("{}: ok ({checked})", path.display());
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{}: {} problem{} ({checked})",
            path.display(),
            report.problems.len(),
            if report.problems.len() == 1 { "" } else { "s" }
        );
        Ok(ExitCode::from(1))
    }
}

/// What a file `db import-json` takes holds: a run, or the window sets a monitor kept when
/// its store could not take them.
enum Kept {
    Run(Box<RunResult>),
    Windows(Box<latlab_store::UnsavedWindows>),
}

fn import_json(db: Option<&Path>, files: &[PathBuf]) -> CliResult<ExitCode> {
    // Every file is read and parsed before anything is saved.
    let mut kept = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| CliError::Usage(format!("{}: {e}", f.display())))?;
        let windows = serde_json::from_str::<serde_json::Value>(&text)
            .is_ok_and(|v| v.get("unsaved_windows").is_some());
        let read = if windows {
            serde_json::from_str(&text)
                .map(|u| Kept::Windows(Box::new(u)))
                .map_err(|e| e.to_string())
        } else {
            RunResult::from_json(&text)
                .map(|r| Kept::Run(Box::new(r)))
                .map_err(|e| e.to_string())
        };
        kept.push(read.map_err(|e| {
            CliError::Usage(format!(
                "{}: {e} (accepted: latlab's JSON result, as `measure --json` or `export` \
                 writes it, or the window sets a monitor kept; cyclictest, stress-ng and \
                 jitterdebugger output goes in with `latlab import`)",
                f.display()
            ))
        })?);
    }
    let path = latlab_store::resolve_path(db);
    // A daemon recording a series numbers its windows on as it goes: sets stored beside it
    // would take its numbers. It stores the files kept for its store itself; the lock of each
    // series is held here until the import is done, so none starts meanwhile either.
    let mut locks = Vec::new();
    for (f, k) in files.iter().zip(&kept) {
        let Kept::Windows(u) = k else { continue };
        let name = &u.unsaved_windows.name;
        let lock = latlab_store::lock_path(&path, name);
        if locks
            .iter()
            .any(|l: &latlab_sys::pidlock::PidLock| l.path() == lock)
        {
            continue;
        }
        locks.push(
            latlab_sys::pidlock::PidLock::acquire(&lock).map_err(|e| match e {
                latlab_sys::pidlock::LockError::Held { pid, .. } => {
                    CliError::Failed(anyhow::anyhow!(
                        "{}: series {name} in {} is being recorded by a running daemon ({}): it \
                     stores the windows kept for its store itself; stop it to store them by \
                     hand, or import them into another store",
                        f.display(),
                        path.display(),
                        pid.map_or_else(|| "PID unknown".to_string(), |p| format!("PID {p}"))
                    ))
                }
                e => CliError::Failed(anyhow::anyhow!("{}: {e}", f.display())),
            })?,
        );
    }
    let mut store = crate::args::open_store(&path)?;
    for (f, k) in files.iter().zip(&kept) {
        let r = match k {
            Kept::Run(r) => r,
            Kept::Windows(u) => {
                let (series, first, end) = store
                    .insert_unsaved(u)
                    .with_context(|| format!("{}: saving to {}", f.display(), path.display()))?;
                let stored = end - first;
                let before = u.sets.len() as u64 - stored;
                println!(
                    "{}: {stored} window set(s) stored in series {}{}{}, in {}",
                    f.display(),
                    series.name,
                    if stored > 0 {
                        format!(" as windows {first} to {}", end - 1)
                    } else {
                        String::new()
                    },
                    if before > 0 {
                        format!("; {before} already there")
                    } else {
                        String::new()
                    },
                    path.display()
                );
                continue;
            }
        };
        // Already stored (imported before, or the same file twice): said and skipped, as
        // `latlab import` does; the files after it are still stored.
        if let Some(id) = store.find_run(&r.id).map_err(failed)? {
            println!(
                "{}: already in {} as run {}",
                f.display(),
                path.display(),
                id.0
            );
            continue;
        }
        let id = store
            .save_run(r, None)
            .with_context(|| format!("{}: saving to {}", f.display(), path.display()))?;
        println!("{}: saved as run {id} in {}", f.display(), path.display());
    }
    Ok(ExitCode::SUCCESS)
}
