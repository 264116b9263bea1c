//! `latlab run PLAN.toml`: an experiment over the cartesian product of a plan's axes, each cell
//! repeated, in an interleaved order, every run saved to the store as it finishes, resumable.

use crate::args::Say;
use crate::cli_error::{CliError, CliResult};
use crate::measure::MeasureArgs;
use crate::plan::{Cell, ExperimentPlan};
use anyhow::Context;
use clap::{Args, Command, FromArgMatches};
use latlab_model::units::format_us;
use latlab_session::Measurement;
use latlab_store::{CellRef, CellStatus, ExperimentStatus};
use latlab_sys::Sys;
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
#[command(
    after_help = "Exit codes: 0 every run saved within the limits, 1 a run failed, 2 bad input \
(nothing was touched), 4 a limit (--max-latency, --max-p99, --max-missed) exceeded, 130 \
interrupted (continue with --resume)."
)]
pub struct RunArgs {
    /// The experiment plan (TOML; see examples/plans/).
    plan: PathBuf,

    /// Validate the plan and print its cells and total time, then stop.
    #[arg(long)]
    dry_run: bool,

    /// Continue the last unfinished experiment of this plan, skipping saved cells.
    #[arg(long)]
    resume: bool,

    /// The results store (default ./latlab.db, or LATLAB_DB).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,

    #[command(flatten)]
    gate: crate::args::GateArgs,
}

/// A cell checked against this machine.
struct Checked {
    cell: Cell,
    prepared: Result<Measurement, String>,
    /// Where a tuning a killed run left would be in force while the cell measures.
    unrestored: Option<PathBuf>,
}

/// The `latlab measure` arguments of a cell, parsed as the command line would be.
fn measure_args(cell: &Cell) -> Result<MeasureArgs, String> {
    let cmd = MeasureArgs::augment_args(Command::new("measure").no_binary_name(true));
    let matches = cmd
        .try_get_matches_from(&cell.args)
        .map_err(|e| crate::cli_error::clap_line(&e))?;
    MeasureArgs::from_arg_matches(&matches).map_err(|e| crate::cli_error::clap_line(&e))
}

/// Expected length of one run of a cell.
pub(crate) fn run_length(p: &Measurement) -> Duration {
    let c = &p.cfg;
    let ns = match (c.duration_ns, c.loops) {
        (Some(d), _) => d,
        (None, Some(l)) => l.saturating_mul(c.interval_ns),
        (None, None) => 0,
    };
    // Set-up, loads starting and stopping, saving: about a quarter of a second; loading and
    // attaching the tracing programs about a second more (1.0 s measured on a 2-CPU VM).
    let trace = if p.trace.is_some() {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    };
    Duration::from_nanos(ns) + Duration::from_millis(250) + trace
}

/// `plan "x": 2 cells × 4 repeats = 8 runs, about 2m (interleaved order), 1 cell skipped`:
/// the cells that will run, and the skipped ones apart.
pub(crate) fn plan_line(
    plan: &ExperimentPlan,
    cells: usize,
    runnable: usize,
    total: Duration,
) -> String {
    let skipped = cells - runnable;
    format!(
        "plan {:?}: {runnable} {} × {} {} = {}, about {} ({}){}{}",
        plan.name,
        if runnable == 1 { "cell" } else { "cells" },
        plan.repeat,
        if plan.repeat == 1 {
            "repeat"
        } else {
            "repeats"
        },
        latlab_model::units::plural((runnable * plan.repeat as usize) as u64, "run", "runs"),
        human(total),
        match plan.order {
            crate::plan::Order::Interleaved => "interleaved order",
            crate::plan::Order::Sequential => "sequential order",
            crate::plan::Order::Random => "each round in a random order",
        },
        match skipped {
            0 => String::new(),
            1 => ", 1 cell skipped (below, with its reason)".into(),
            n => format!(", {n} cells skipped (below, with their reasons)"),
        },
        if plan.description.is_empty() {
            String::new()
        } else {
            format!("\n  {}", plan.description)
        }
    )
}

/// What a plan's repeats allow its comparisons to say, where that is less than a verdict.
fn verdict_note(repeat: u32, runnable: usize) -> Option<String> {
    let need = latlab_report::MIN_REPEATS;
    (runnable > 1 && (repeat as usize) < need).then(|| {
        format!(
            "note: a comparison needs {need} repeats per cell for a verdict (the exact two-sided \
             Mann-Whitney test cannot reach p < 0.05 with fewer); with repeat = {repeat} the \
             report shows differences without one"
        )
    })
}

pub fn run(args: RunArgs, sys: &Sys) -> CliResult<ExitCode> {
    let say = Say::beside(&args.gate.junit);
    let plan = ExperimentPlan::load(&args.plan).map_err(|e| CliError::Usage(e.to_string()))?;
    let limits = args.gate.limits()?;
    let junit = crate::args::OutputFile::open("--junit", &args.gate.junit)?;
    let db_path = latlab_store::resolve_path(args.db.as_deref());
    // A store that cannot be there is said before the plan is; a dry run checks one named.
    if !args.dry_run || args.db.is_some() {
        crate::args::check_store_path(&db_path)?;
    }
    let mut uses = crate::args::store_files(&db_path);
    uses.push(("the plan file", args.plan.clone()));
    let uses: Vec<(&str, &Path)> = uses.iter().map(|(f, p)| (*f, p.as_path())).collect();
    crate::args::OutputFile::refuse_clashes(&[&junit], &uses)?;
    // A value no measure option accepts is bad input; what this machine cannot do skips the
    // cell with its reason.
    let cells = plan
        .cells()
        .into_iter()
        .map(|cell| match measure_args(&cell) {
            Ok(m) => Ok((cell, m)),
            Err(e) => Err(CliError::Usage(format!(
                "{}: cell {}: {e}",
                args.plan.display(),
                cell.key
            ))),
        })
        .collect::<CliResult<Vec<_>>>()?;
    // A plan's waker CPU is for its wake-up cells: its timer cells have no waker. In a plan
    // with no wake-up cell it is refused as `measure` refuses it.
    let wakes = cells.iter().any(|(_, m)| m.opts.method.is_wakeup());
    let mut checked = Vec::with_capacity(cells.len());
    for (cell, mut margs) in cells {
        if wakes && !margs.opts.method.is_wakeup() {
            margs.waker_cpu = None;
        }
        let bad = |e: CliError| {
            CliError::Usage(format!("{}: cell {}: {e}", args.plan.display(), cell.key))
        };
        let prepared = match margs.prepare(sys) {
            Ok(p) => Ok(p),
            Err(e) => {
                margs.check_values(sys).map_err(bad)?;
                Err(e.to_string())
            }
        };
        let unrestored = margs.unrestored_state_dir(sys);
        checked.push(Checked {
            cell,
            prepared,
            unrestored,
        });
    }
    // A --resume that cannot go on (nothing to resume, or another run holds it) is said
    // before the plan, not after it.
    let resumed = if args.resume && !args.dry_run {
        Some(resumable_locked(&db_path, &plan.text, &args.plan)?)
    } else {
        None
    };
    let runnable: Vec<&Checked> = checked.iter().filter(|c| c.prepared.is_ok()).collect();
    let schedule = plan.schedule(checked.len());
    let total: Duration = schedule
        .iter()
        .filter_map(|&(c, _)| checked[c].prepared.as_ref().ok().map(run_length))
        .sum();
    say.line(plan_line(&plan, checked.len(), runnable.len(), total));
    if let Some(note) = verdict_note(plan.repeat, runnable.len()) {
        say.line(note);
    }
    for c in &checked {
        match &c.prepared {
            Ok(p) => say.line(format!(
                "  cell {:>3}  {}  ({} each)",
                c.cell.index,
                c.cell.key,
                human(run_length(p))
            )),
            Err(why) => say.line(format!(
                "  cell {:>3}  {}  skipped: {why}",
                c.cell.index, c.cell.key
            )),
        }
    }
    if runnable.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: no cell of this plan can run here (each is listed above with its reason)",
            args.plan.display()
        )));
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(o) = &junit {
        o.write_provisional(&latlab_report::junit::render(&[
            latlab_report::junit::error_suite("run", latlab_report::junit::UNFINISHED),
        ]));
    }

    // The lock is held to the end of the run.
    let (mut store, (experiment, done, _lock)) = if let Some((mut store, e, lock)) = resumed {
        let done: BTreeSet<(String, u32)> = store.done_cells(e.id)?.into_iter().collect();
        resume(&mut store, &e, "experiment", done.len(), say)?;
        (store, (e.id, done, lock))
    } else {
        let mut store = crate::args::open_store(&db_path)?;
        let id = store.create_experiment(&plan.name, &plan.text)?;
        let lock = lock_experiment(&db_path, id)?;
        (store, (id, BTreeSet::new(), lock))
    };
    say.line(format!(
        "experiment {} in {}",
        experiment.0,
        db_path.display()
    ));

    // Record skipped cells so reports can say why they are missing.
    for c in &checked {
        if let Err(why) = &c.prepared {
            for r in 0..plan.repeat {
                store.record_cell(
                    &cell_ref(experiment, &c.cell, r),
                    CellStatus::Skipped,
                    Some(why),
                )?;
            }
        }
    }

    let interrupts = crate::signals::Interrupts::install();

    let todo: Vec<(usize, u32)> = schedule
        .into_iter()
        .filter(|&(c, r)| {
            let cell = &checked[c].cell;
            // Experiments started by earlier versions saved their cells under the legacy key.
            let saved =
                done.contains(&(cell.key.clone(), r)) || done.contains(&(cell.legacy_key(), r));
            checked[c].prepared.is_ok() && !saved
        })
        .collect();
    if args.resume {
        let left: Duration = todo
            .iter()
            .filter_map(|&(c, _)| checked[c].prepared.as_ref().ok().map(run_length))
            .sum();
        say.line(format!(
            "{} left to measure (about {})",
            latlab_model::units::plural(todo.len() as u64, "run", "runs"),
            human(left)
        ));
    }
    let mut progress = Progress::new(todo.len(), &todo, &checked);
    let mut failures = 0;
    // Saved runs measured beside a load that failed (a command that exited with an error).
    let mut load_failed = 0;
    // Where an interruption left the schedule: what is left is recorded as not measured.
    let mut left_at = todo.len();
    for (n, &(c, r)) in todo.iter().enumerate() {
        if interrupts.interrupted() {
            left_at = n;
            break;
        }
        let cell = &checked[c];
        let Ok(prepared) = &cell.prepared else {
            continue;
        };
        progress.start(n, cell, r, plan.repeat);
        // A tuning a killed run left in force is in what the cell measures: said in its result.
        let left_in_force = cell
            .unrestored
            .as_ref()
            .and_then(|dir| crate::tune::left_in_force(sys, dir));
        let result = interrupts
            .measuring(|stop| prepared.run(sys, stop, &mut |_| {}))
            .map(|mut r| {
                r.environment.warnings.extend(left_in_force);
                r
            });
        if interrupts.interrupted() {
            // A cut-short run is not a repeat of its cell (--resume measures the cell again),
            // but what it measured is kept: saved as a run of its own, outside the experiment.
            progress.clear();
            if let Ok(result) = &result {
                let id = store.save_run(result, None).with_context(|| {
                    format!(
                        "saving the cut-short run of cell {}; {}",
                        cell.cell.key,
                        crate::db::rescue(result, &db_path)
                    )
                })?;
                eprintln!(
                    "{}",
                    cut_short_line(&cell.cell.key, r, result, id.0, "the experiment")
                );
            }
            left_at = n;
            break;
        }
        match result {
            Ok(result) => {
                let cref = cell_ref(experiment, &cell.cell, r);
                store.save_run(&result, Some(&cref)).with_context(|| {
                    format!(
                        "saving cell {} repeat {}; {}",
                        cell.cell.key,
                        r + 1,
                        crate::db::rescue(&result, &db_path)
                    )
                })?;
                progress.finish(n, &result);
                for w in result.warnings() {
                    progress.note(&format!(
                        "cell {} repeat {}: warning: {w}",
                        cell.cell.key,
                        r + 1
                    ));
                }
                if result.loads.failed().next().is_some() {
                    load_failed += 1;
                }
            }
            Err(e) => {
                failures += 1;
                let why = e.to_string();
                progress.note(&format!(
                    "cell {} repeat {} failed: {why}",
                    cell.cell.key,
                    r + 1
                ));
                store.record_cell(
                    &cell_ref(experiment, &cell.cell, r),
                    CellStatus::Failed,
                    Some(&why),
                )?;
            }
        }
    }
    progress.clear();
    for &(c, r) in &todo[left_at..] {
        store.record_cell(
            &cell_ref(experiment, &checked[c].cell, r),
            CellStatus::Pending,
            None,
        )?;
    }
    // The verdicts of every saved run of the experiment (also those of earlier, resumed parts);
    // a cell not measured yet is named by the threads it measures.
    let labels: Vec<(String, Vec<String>)> = checked
        .iter()
        .filter_map(|c| {
            let p = c.prepared.as_ref().ok()?;
            Some((c.cell.key.clone(), p.cfg.thread_labels()))
        })
        .collect();
    let breaches = match junit {
        Some(out) => {
            let (suite, breaches) =
                experiment_suite(&store, experiment, &plan.name, &limits, &labels)?;
            out.write(&latlab_report::junit::render(&[suite]))?;
            breaches
        }
        None if limits.is_empty() => Vec::new(),
        None => experiment_suite(&store, experiment, &plan.name, &limits, &labels)?.1,
    };
    if interrupts.interrupted() {
        store.set_experiment_status(experiment, ExperimentStatus::Interrupted)?;
        eprintln!(
            "latlab: interrupted; saved runs are kept. Continue with: latlab run {} --resume{}",
            latlab_model::units::shell_path(&args.plan),
            crate::args::db_option(args.db.as_deref())
        );
        return Ok(ExitCode::from(130));
    }
    let status = if failures + load_failed > 0 {
        ExperimentStatus::Failed
    } else {
        ExperimentStatus::Done
    };
    store.set_experiment_status(experiment, status)?;
    // Runs beside a load that failed are saved, and counted apart: they are why it failed.
    let beside_failed = if load_failed > 0 {
        format!(" ({load_failed} of them beside a load that failed)")
    } else {
        String::new()
    };
    // A resumed experiment counts the runs saved before too.
    let before = if done.is_empty() {
        String::new()
    } else {
        format!(" now, {} in all", todo.len() - failures + done.len())
    };
    // Runs that could not measure ("failed" beside the experiment's own status read as two
    // verdicts): said where there are some.
    let not_run = if failures > 0 {
        format!(", {failures} could not run")
    } else {
        String::new()
    };
    say.line(format!(
        "experiment {} {}: {} saved{before}{beside_failed}{not_run}; report with: latlab \
         report e{}{}",
        experiment.0,
        status.name(),
        latlab_model::units::plural((todo.len() - failures) as u64, "run", "runs"),
        experiment.0,
        crate::args::db_option(args.db.as_deref())
    ));
    if load_failed > 0 {
        eprintln!(
            "latlab: error: {} measured beside a load that failed (each named above): they did \
             not measure what the plan asks",
            latlab_model::units::plural(load_failed as u64, "run", "runs")
        );
    }
    if failures + load_failed > 0 {
        for b in &breaches {
            eprintln!("latlab: limit exceeded: {}", b.line());
        }
        return Ok(ExitCode::from(1));
    }
    Ok(crate::args::gate_exit(&breaches))
}

/// The JUnit suite of an experiment as the store holds it, and the limits its runs exceeded.
fn experiment_suite(
    store: &latlab_store::Store,
    experiment: latlab_store::ExperimentId,
    name: &str,
    limits: &latlab_report::gate::Limits,
    labels: &[(String, Vec<String>)],
) -> CliResult<(
    latlab_report::junit::TestSuite,
    Vec<latlab_report::gate::Breach>,
)> {
    use latlab_report::junit::CellRuns;
    let mut cells: Vec<CellRuns> = Vec::new();
    for c in store.cells(experiment)? {
        let at = match cells.iter().position(|x| x.key == c.key) {
            Some(i) => i,
            None => {
                cells.push(CellRuns {
                    key: c.key.clone(),
                    labels: labels
                        .iter()
                        .find(|(k, _)| *k == c.key)
                        .map(|(_, l)| l.clone())
                        .unwrap_or_default(),
                    ..CellRuns::default()
                });
                cells.len() - 1
            }
        };
        let cell = &mut cells[at];
        match c.status {
            CellStatus::Skipped => cell.skipped = c.reason.clone(),
            CellStatus::Failed => cell
                .failed
                .push((c.repeat, c.reason.clone().unwrap_or_default())),
            CellStatus::Pending if c.runs.is_empty() => cell.pending.push(c.repeat),
            CellStatus::Done | CellStatus::Pending => {
                for id in c.runs {
                    cell.runs.push((c.repeat, store.load_run(id)?));
                }
            }
        }
    }
    Ok(latlab_report::junit::experiment_suite(
        name,
        &format!("e{}", experiment.0),
        &cells,
        limits,
    ))
}

/// `2h03m`, `3m02s`, `20.3s`.
pub(crate) fn human(d: Duration) -> String {
    latlab_model::units::format_elapsed(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What became of a run a signal cut short (`repeat` as stored, from 0; said from 1, as the
/// progress counts): saved as run `id`, outside `whole` (the experiment or
/// the search, whose cell `--resume` measures again).
pub fn cut_short_line(
    cell: &str,
    repeat: u32,
    run: &latlab_model::RunResult,
    id: i64,
    whole: &str,
) -> String {
    // Of the length asked: a signal near the end leaves a length that rounds to all of it.
    let asked = run
        .config
        .length_text()
        .map_or_else(String::new, |l| format!(" of {l}"));
    format!(
        "latlab: the run cut short (cell {cell} repeat {}, {}{asked} measured) is saved as run \
         {id} outside {whole}; --resume measures the cell again",
        repeat + 1,
        latlab_model::units::format_elapsed(run.elapsed_ns)
    )
}

/// The unfinished experiment of the plan `text` in the store at `db`, held for this run: its
/// store, the experiment and the lock; or why not (none unfinished, another run holds it).
fn resumable_locked(
    db: &Path,
    text: &str,
    plan: &Path,
) -> CliResult<(
    latlab_store::Store,
    latlab_store::Experiment,
    latlab_sys::pidlock::PidLock,
)> {
    let store = crate::args::open_store(db)?;
    let found = store
        .resumable_experiment(text)
        .context("looking for an unfinished experiment")?;
    let Some(e) = found else {
        return Err(CliError::Usage(format!(
            "--resume: no unfinished experiment of {} in {} (accepted: a plan whose run was \
             interrupted, unchanged since)",
            plan.display(),
            db.display()
        )));
    };
    // A second `--resume` of it while the first measures would measure its cells again.
    let lock = lock_experiment(db, e.id)?;
    Ok((store, e, lock))
}

/// Hold experiment `id` of the store at `db` for this run (released when it ends, however it
/// ends), or refuse naming the run that holds it.
fn lock_experiment(
    db: &Path,
    id: latlab_store::ExperimentId,
) -> CliResult<latlab_sys::pidlock::PidLock> {
    let path = latlab_store::lock_path(db, &format!("experiment-{}.run", id.0));
    latlab_sys::pidlock::PidLock::acquire(&path).map_err(|e| match e {
        latlab_sys::pidlock::LockError::Held { pid, .. } => CliError::Failed(anyhow::anyhow!(
            "experiment {} in {} is being measured by another latlab run ({}); wait for it, or \
             stop it and --resume",
            id.0,
            db.display(),
            pid.map_or_else(|| "PID unknown".to_string(), |p| format!("PID {p}"))
        )),
        e => CliError::Failed(anyhow::anyhow!("cannot lock experiment {}: {e}", id.0)),
    })
}

/// Take an interrupted experiment up again: say what is saved, and mark it running.
pub(crate) fn resume(
    store: &mut latlab_store::Store,
    e: &latlab_store::Experiment,
    what: &str,
    saved: usize,
    say: Say,
) -> CliResult<()> {
    say.line(format!(
        "resuming {what} {} started {}: {} already saved",
        e.id.0,
        e.started_at,
        latlab_model::units::plural(saved as u64, "run", "runs")
    ));
    store.set_experiment_status(e.id, ExperimentStatus::Running)?;
    Ok(())
}

fn cell_ref(experiment: latlab_store::ExperimentId, cell: &Cell, repeat: u32) -> CellRef {
    CellRef {
        experiment,
        key: cell.key.clone(),
        params: serde_json::to_value(&cell.params).unwrap_or(serde_json::Value::Null),
        repeat,
    }
}

/// A progress bar on a terminal (cell, repeat, elapsed, ETA); one line per run otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
    remaining: Vec<Duration>,
}

impl Progress {
    fn new(runs: usize, todo: &[(usize, u32)], checked: &[Checked]) -> Progress {
        let remaining: Vec<Duration> = todo
            .iter()
            .map(|&(c, _)| {
                checked[c]
                    .prepared
                    .as_ref()
                    .map_or(Duration::ZERO, run_length)
            })
            .collect();
        let bar = std::io::stderr().is_terminal().then(|| {
            let total: Duration = remaining.iter().sum();
            let bar = indicatif::ProgressBar::new(total.as_millis() as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {msg} elapsed {elapsed_precise} ETA {eta_precise}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        let _ = runs;
        Progress {
            bar,
            started: Instant::now(),
            remaining,
        }
    }

    fn start(&mut self, n: usize, cell: &Checked, repeat: u32, repeats: u32) {
        let msg = format!(
            "run {}/{}: cell {} repeat {}/{}",
            n + 1,
            self.remaining.len(),
            cell.cell.key,
            repeat + 1,
            repeats
        );
        match &self.bar {
            Some(bar) => bar.set_message(msg),
            None => eprintln!("latlab: {msg} (elapsed {})", human(self.started.elapsed())),
        }
    }

    fn finish(&mut self, n: usize, result: &latlab_model::RunResult) {
        if let Some(bar) = &self.bar {
            bar.inc(self.remaining[n].as_millis() as u64);
        } else {
            eprintln!(
                "latlab:   p99 {} us, max {} us",
                format_us(result.overall.stats.p99, 1),
                format_us(result.overall.stats.max, 1)
            );
        }
    }

    fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("latlab: {text}")),
            None => eprintln!("latlab: {text}"),
        }
    }

    fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl From<latlab_store::StoreError> for CliError {
    fn from(e: latlab_store::StoreError) -> Self {
        CliError::Failed(anyhow::Error::new(e).context("results store"))
    }
}
