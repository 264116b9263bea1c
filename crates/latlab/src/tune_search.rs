//! `latlab tune search`: measure the baseline and every candidate knob this machine supports,
//! combine what helped, confirm it against the baseline, and write the winner as a profile. The
//! search is an experiment in the store (one cell per candidate, every run saved as it
//! finishes), resumable after an interruption and reportable with `latlab report`. The method
//! is `latlab_tune::search`'s; this module measures, keeps and prints.

use crate::args::{MeasureOpts, Ns, secs, us};
use crate::cli_error::{CliError, CliResult};
use crate::run::human;
use anyhow::Context;
use clap::Args;
use latlab_model::RunResult;
use latlab_model::units::CpuList;
use latlab_session::Measurement;
use latlab_store::{CellRef, CellStatus, ExperimentId, ExperimentStatus, RunId, Store};
use latlab_sys::Sys;
use latlab_tune::search::{self, Goal, Lab, NotTried, Objective, Outcome, Spec};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Knobs: pm_qos, resume_latency, idle, governor, epp, turbo, \
cpuidle_governor, timer_migration, vmstat_interval, rt_throttling, irq_affinity, kthreads, \
workqueues (those this machine lacks are listed as not tried, with why). Boot options are only \
advice.\n\nExit codes: 0 the search ran (whether or not a setting helped), 1 a run failed, 2 bad \
input (nothing was touched), 130 interrupted (continue with --resume)."
)]
pub struct SearchArgs {
    /// What to tune for: audio (p99 of 1 ms wake-ups), control (max of 250 µs wake-ups),
    /// throughput (p99, keeping no knob that costs the load's throughput).
    #[arg(long, default_value = "audio", value_name = "TARGET",
          hide_possible_values = true, value_parser = clap::builder::PossibleValuesParser::new(Goal::NAMES.split(", ")))]
    target: String,

    /// What to lower: p50, p99, p99.9, max, p99-per-watt (default: the target's).
    #[arg(long, value_name = "OBJECTIVE", hide_possible_values = true, value_parser = clap::builder::PossibleValuesParser::new(Objective::NAMES.split(", ")))]
    objective: Option<String>,

    #[command(flatten)]
    opts: MeasureOpts,

    /// Period of each measuring thread (default: the target's).
    #[arg(short = 'i', long, value_name = "DUR", value_parser = us)]
    interval: Option<Ns>,

    /// Length of each run.
    #[arg(short = 'D', long, default_value = "10s", value_name = "DUR", value_parser = secs)]
    duration: Ns,

    /// A load beside every run (repeatable), as for `latlab measure --load`.
    #[arg(long = "load", value_name = "SPEC")]
    loads: Vec<String>,

    /// Only these knobs (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    knobs: Vec<String>,

    /// Every knob but these (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    skip: Vec<String>,

    /// Time the whole search may take; candidates that do not fit are listed as not measured.
    #[arg(long, default_value = "30m", value_name = "DUR", value_parser = secs)]
    budget: Ns,

    /// Runs per cell in each comparison (4 or more: fewer cannot reach p < 0.05).
    #[arg(long, default_value_t = 5, value_name = "N")]
    repeats: u32,

    /// The results store (default ./latlab.db, or LATLAB_DB).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,

    /// Write the confirmed settings as profile NAME (/etc/latlab/profiles/NAME.toml; a path
    /// ending in .toml is written as it is) for `latlab tune apply NAME`.
    #[arg(long, value_name = "NAME")]
    write_profile: Option<String>,

    /// Print the candidates, the stages and the time they take, then stop.
    #[arg(long)]
    dry_run: bool,

    /// Continue the last unfinished search with these settings, reusing its saved runs and
    /// what is left of its budget.
    #[arg(long)]
    resume: bool,

    /// Print only the result (not the plan, nor each run).
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// Where `--write-profile NAME` goes: a `.toml` path as given, a bare name into the system's
/// profile directory. Built-in names and odd characters are refused.
fn profile_path(sys: &Sys, name: &str) -> CliResult<PathBuf> {
    let path = profile_location(sys, name)?;
    if path.is_dir() {
        return Err(CliError::Usage(format!(
            "--write-profile {}: a directory (accepted: a profile name, or a path ending in .toml)",
            path.display()
        )));
    }
    // A path given is written where it says, as every other output file: its directory must be
    // there (only the system's profile directory, for a bare name, is made).
    if name.ends_with(".toml")
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        return Err(CliError::Usage(format!(
            "--write-profile {}: no directory {} (accepted: a profile name, or a path ending in \
             .toml in an existing directory)",
            path.display(),
            dir.display()
        )));
    }
    // Written after the whole search (the profile directory made then): where it cannot be is
    // bad input now.
    let at = latlab_sys::nearest_existing(&path);
    if at != path && !at.is_dir() {
        return Err(CliError::Usage(format!(
            "--write-profile {}: {} is not a directory (accepted: a profile name, or a \
             writable path ending in .toml)",
            path.display(),
            at.display()
        )));
    }
    latlab_sys::probe_write(at).map_err(|e| {
        CliError::Usage(format!(
            "--write-profile {}: cannot be written in {}: {} (accepted: a profile name, or a \
             writable path ending in .toml)",
            path.display(),
            at.display(),
            latlab_tune::describe_io_error(&e)
        ))
    })?;
    Ok(path)
}

/// Where `--write-profile NAME` writes: a path as given, or NAME.toml in the first profile
/// directory.
fn profile_location(sys: &Sys, name: &str) -> CliResult<PathBuf> {
    if name.ends_with(".toml") {
        return Ok(PathBuf::from(name));
    }
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(CliError::Usage(format!(
            "--write-profile {name:?}: not a profile name (accepted: letters, digits, - _ ., or \
             a path ending in .toml)"
        )));
    }
    if latlab_tune::profile::BUILTIN
        .iter()
        .any(|(b, _)| *b == name)
    {
        return Err(CliError::Usage(format!(
            "--write-profile {name}: the name of a built-in profile (accepted: another name)"
        )));
    }
    Ok(Profiles::default_dirs(sys)
        .remove(0)
        .join(format!("{name}.toml")))
}

use latlab_tune::Profiles;

/// The search as stored: every setting that decides its cells and their order. A resumed
/// search must have the same text.
fn description(
    goal: Goal,
    objective: Objective,
    (spec_line, measurement): (&str, &Measurement),
    cells: &[String],
    repeats: u32,
) -> String {
    // Every measuring option, so a search continues only as it was measured (policy,
    // priority, memory locking, stagger, samplers, ... as well as what the line says).
    let options = serde_json::to_string(&measurement.cfg).unwrap_or_default();
    format!(
        "# latlab tune search\ntarget = {:?}\nobjective = {:?}\nmeasure = {spec_line:?}\n\
         repeats = {repeats}\ncandidates = {cells:?}\noptions = {options:?}\n\
         sample_period_ns = {:?}\n",
        goal.name(),
        objective.name(),
        measurement.sample_period_ns
    )
}

/// A cell of the search in the store: its key is the candidate (`pm_qos=0`, `baseline`,
/// `confirm: ...`).
fn cell_ref(experiment: ExperimentId, key: &str, repeat: u32) -> CellRef {
    CellRef {
        experiment,
        key: key.to_string(),
        params: serde_json::json!({ "candidate": key }),
        repeat,
    }
}

/// The real laboratory: each run measured by the session and saved to the store at once.
struct StoreLab<'a> {
    sys: &'a Sys,
    measurement: Measurement,
    store: Store,
    experiment: ExperimentId,
    saved: BTreeMap<(String, u32), RunId>,
    interrupts: crate::signals::Interrupts,
    quiet: bool,
    started: std::time::Instant,
    runs: usize,
    planned: usize,
}

impl Lab for StoreLab<'_> {
    fn measure(&mut self, _cell: &str, _repeat: u32) -> Result<RunResult, String> {
        let (sys, measurement) = (self.sys, &self.measurement);
        let result = self
            .interrupts
            .measuring(|stop| measurement.run(sys, stop, &mut |_| {}));
        result.map_err(|e| e.to_string())
    }

    fn saved(&mut self, cell: &str, repeat: u32) -> Option<RunResult> {
        let id = self.saved.get(&(cell.to_string(), repeat))?;
        self.store.load_run(*id).ok()
    }

    fn is_saved(&self, cell: &str, repeat: u32) -> bool {
        self.saved.contains_key(&(cell.to_string(), repeat))
    }

    fn keep(&mut self, cell: &str, repeat: u32, run: &RunResult) -> Result<(), String> {
        self.store
            .save_run(run, Some(&cell_ref(self.experiment, cell, repeat)))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn keep_cut_short(&mut self, cell: &str, repeat: u32, run: &RunResult) -> Result<(), String> {
        let id = self.store.save_run(run, None).map_err(|e| e.to_string())?;
        eprintln!(
            "{}",
            crate::run::cut_short_line(cell, repeat, run, id.0, "the search")
        );
        Ok(())
    }

    fn stop_requested(&self) -> bool {
        self.interrupts.interrupted()
    }

    fn progress(&mut self, line: &str) {
        self.runs += 1;
        if !self.quiet {
            eprintln!(
                "latlab: run {}/~{}: {line} (elapsed {})",
                self.runs,
                self.planned,
                human(self.started.elapsed())
            );
        }
    }

    fn expect_more(&mut self, runs: usize) {
        self.planned += runs;
    }
}

pub fn run(args: SearchArgs, sys: &Sys, state_dir: PathBuf) -> CliResult<ExitCode> {
    // Bad input first, before anything is read from or written to the system.
    let goal = Goal::parse(&args.target).map_err(CliError::Usage)?;
    let objective = match &args.objective {
        Some(o) => Objective::parse(o).map_err(CliError::Usage)?,
        None => goal.objective(),
    };
    let knobs = search::select_knobs(&args.knobs, &args.skip).map_err(CliError::Usage)?;
    args.opts.no_deadline("tune search")?;
    if args.opts.method == latlab_model::Method::Busy {
        return Err(CliError::Usage(
            "--method busy: it measures no wake-up, so no candidate could be told from another \
             (accepted: a wake-up method, e.g. clock-nanosleep or futex)"
                .into(),
        ));
    }
    let budget = Duration::from_nanos(args.budget.0);
    if args.repeats < latlab_report::MIN_REPEATS as u32 {
        return Err(CliError::Usage(format!(
            "--repeats {}: too few for a verdict (accepted: {} or more; the exact two-sided \
             Mann-Whitney test cannot reach p < 0.05 with fewer)",
            args.repeats,
            latlab_report::MIN_REPEATS
        )));
    }
    if goal == Goal::Throughput && args.loads.is_empty() {
        return Err(CliError::Usage(
            "--target throughput needs a load whose throughput it keeps (accepted: e.g. --load \
             matrix)"
                .into(),
        ));
    }
    let profile_out = args
        .write_profile
        .as_deref()
        .map(|n| profile_path(sys, n))
        .transpose()?;
    let interval = args.interval.unwrap_or(Ns(goal.interval_ns()));
    let measure = crate::measure::MeasureArgs::for_search(
        args.opts.clone(),
        interval,
        args.duration,
        args.loads.clone(),
    )?;
    let measurement = measure.prepare(sys)?;
    if objective == Objective::P99PerWatt {
        // A meter that is there but stands still would weigh every run by 0 W.
        if let Err(why) = latlab_sys::sample::power_reads(sys, 200_000_000) {
            return Err(CliError::Usage(format!(
                "--objective p99-per-watt: no power meter here ({why}) (accepted: p50, p99, \
                 p99.9, max)"
            )));
        }
    }
    let cpus = CpuList::from_cpus(measurement.cfg.cpus.clone().unwrap_or_default());
    let (candidates, not_tried) = search::candidates(sys, &knobs, &cpus)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("reading the knobs: {e}")))?;
    let run_length = crate::run::run_length(&measurement);
    let spec_line = format!(
        "{} wake-ups every {} on CPUs {cpus}, runs of {}{}",
        measurement.cfg.method.name(),
        latlab_model::units::format_duration(interval.0),
        latlab_model::units::format_duration(args.duration.0),
        if args.loads.is_empty() {
            String::new()
        } else {
            format!(", load {}", args.loads.join(" + "))
        }
    );
    let labels: Vec<String> = candidates.iter().map(|c| c.label()).collect();
    let text = description(
        goal,
        objective,
        (&spec_line, &measurement),
        &labels,
        args.repeats,
    );
    let spec = Spec {
        objective,
        goal,
        repeats: args.repeats,
        budget,
        run_length,
        cpus: cpus.clone(),
        state_dir: state_dir.clone(),
        seed: latlab_model::rng::fnv1a64(&text),
    };
    let Some(fit) = spec.screenable(candidates.len()) else {
        let need = run_length * (spec.confirmation_runs() + 2 * args.repeats);
        return Err(CliError::Usage(format!(
            "--budget {}: too small for one candidate and its confirmation (accepted: at least \
             {} with --repeats {} and runs of {})",
            latlab_model::units::format_duration(args.budget.0),
            // In whole seconds, a form --budget reads back.
            latlab_model::units::format_duration(need.as_secs_f64().ceil() as u64 * 1_000_000_000),
            args.repeats,
            human(run_length)
        )));
    };
    // A tuning in force first: it is why its knobs read "already set here", and a baseline
    // measured under it would not be the system as it is.
    let status = latlab_tune::status(sys, &state_dir)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("{e}")))?;
    if let Some(e) = status.in_force(sys, &state_dir) {
        return Err(CliError::Failed(anyhow::anyhow!(
            "{e} (a search measures the system untuned); nothing was touched"
        )));
    }
    let db_path = latlab_store::resolve_path(args.db.as_deref());
    if args.resume {
        resumable(&db_path, &text)?;
    }
    // Without root no search runs, whatever its knobs (a dry run shows the plan).
    if !args.dry_run && sys.is_live() && !crate::check::is_root() {
        return Err(CliError::Usage(
            "tune search applies each candidate and needs root (run with sudo); nothing was \
             touched"
                .into(),
        ));
    }
    if candidates.is_empty() {
        let why: Vec<String> = not_tried
            .iter()
            .map(|n| format!("{}: {}", n.what, n.why))
            .collect();
        return Err(CliError::Usage(format!(
            "no candidate knob can be tried here ({}) (accepted: --knobs naming knobs this \
             machine has; `latlab tune search --help` lists them)",
            why.join("; ")
        )));
    }
    if !args.dry_run || args.db.is_some() {
        crate::args::check_store_path(&db_path)?;
    }
    // A dry run prints only the plan; -q leaves it out of a search.
    if args.dry_run || !args.quiet {
        print_plan(&spec, &spec_line, &candidates, fit, &not_tried);
    }
    // A tree cannot be measured: this machine is, which the candidates written to the tree
    // leave alone.
    if !sys.is_live() {
        eprintln!(
            "latlab: note: under --sysroot {} each candidate is written to the tree and this \
             machine is measured, untouched by it (a tree cannot be measured): the search goes \
             through its steps, and its numbers show no knob's effect",
            latlab_model::units::shell_path(sys.root())
        );
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }

    let mut store = crate::args::open_store(&db_path)?;
    let (experiment, saved) = if args.resume {
        let e = resumable(&db_path, &text)?;
        let mut saved = BTreeMap::new();
        for c in store.cells(e.id)? {
            if let Some(id) = c.runs.first() {
                saved.insert((c.key, c.repeat), *id);
            }
        }
        crate::run::resume(
            &mut store,
            &e,
            "search",
            saved.len(),
            crate::args::Say::STDOUT,
        )?;
        (e.id, saved)
    } else {
        let e = store.create_experiment(search::EXPERIMENT_NAME, &text)?;
        // The cells in the order reports show them: the baseline first, the one compared with.
        for key in std::iter::once("baseline".to_string()).chain(labels.iter().cloned()) {
            for repeat in 0..args.repeats {
                store.record_cell(&cell_ref(e, &key, repeat), CellStatus::Pending, None)?;
            }
        }
        (e, BTreeMap::new())
    };
    for n in &not_tried {
        store.record_cell(
            &cell_ref(experiment, &n.what, 0),
            CellStatus::Skipped,
            Some(&n.why),
        )?;
    }
    println!("search {} in {}", experiment.0, db_path.display());
    // Every run, the baseline's too, is measured under it: a PM QoS knob cannot show an effect.
    if let Some(held) = sys.foreign_dma_latency(None) {
        eprintln!(
            "latlab: warning: {held}; the baseline is measured with it too, so a PM QoS knob \
             shows no effect here (stop that process, or `latlab tune hold`, and search again)"
        );
    }

    let interrupts = crate::signals::Interrupts::install();
    let mut lab = StoreLab {
        sys,
        measurement,
        store,
        experiment,
        saved,
        interrupts,
        quiet: args.quiet,
        started: std::time::Instant::now(),
        runs: 0,
        planned: ((fit + 1) as u32 * args.repeats + spec.confirmation_runs()) as usize,
    };
    let outcome = search::search(sys, &spec, candidates, not_tried, &mut lab);
    let mut store = lab.store;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            store.set_experiment_status(experiment, ExperimentStatus::Failed)?;
            return Err(CliError::Failed(anyhow::anyhow!(
                "{e}; the runs so far are saved (search {})",
                experiment.0
            )));
        }
    };
    print_outcome(&outcome, &spec);
    // Candidates that could not be set here: their cells say why in reports.
    for n in outcome
        .not_tried
        .iter()
        .filter(|n| n.why.starts_with("could not be applied"))
    {
        for repeat in 0..args.repeats {
            store.record_cell(
                &cell_ref(experiment, &n.what, repeat),
                CellStatus::Failed,
                Some(&n.why),
            )?;
        }
    }
    if outcome.interrupted {
        store.set_experiment_status(experiment, ExperimentStatus::Interrupted)?;
        eprintln!(
            "latlab: interrupted; saved runs are kept. Continue with the same command and \
             --resume"
        );
        return Ok(ExitCode::from(130));
    }
    store.set_experiment_status(experiment, ExperimentStatus::Done)?;
    match (&outcome.profile, &profile_out) {
        (Some(text), Some(path)) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
            let name = args.write_profile.as_deref().unwrap_or_default();
            // A /dev/cpu_dma_latency request is held by a process, not written: `tune hold`.
            let how = if text.contains("cpu_dma_latency_us") {
                format!(
                    "apply with: latlab tune apply {name}, and hold its cpu_dma_latency_us with: \
                     latlab tune hold {name}"
                )
            } else {
                format!("apply with: latlab tune apply {name}")
            };
            println!("profile written: {} ({how})", path.display());
        }
        (None, Some(_)) => println!("no profile written: no combination confirmed an effect"),
        (Some(text), None) => {
            print!("the confirmed settings as a profile (--write-profile NAME writes it):\n{text}")
        }
        (None, None) => {}
    }
    println!(
        "report with: latlab report e{}{}",
        experiment.0,
        crate::args::db_option(args.db.as_deref())
    );
    Ok(ExitCode::SUCCESS)
}

/// The unfinished search `text` describes in the store at `path`: else a usage error, said
/// before anything is printed, measured or made (a store that does not exist stays so).
fn resumable(path: &std::path::Path, text: &str) -> Result<latlab_store::Experiment, CliError> {
    let none = || {
        CliError::Usage(format!(
            "--resume: no unfinished search with these settings in {} (accepted: the same \
             options as the interrupted search)",
            path.display()
        ))
    };
    if !path.exists() {
        return Err(none());
    }
    crate::args::open_existing(path)?
        .resumable_experiment(text)
        .context("looking for an unfinished search")?
        .ok_or_else(none)
}

fn print_plan(
    spec: &Spec,
    spec_line: &str,
    candidates: &[latlab_tune::search::Candidate],
    fit: usize,
    not_tried: &[NotTried],
) {
    let r = spec.repeats;
    let screen = (fit as u32 + 1) * r;
    let total = spec.run_length * (screen + spec.confirmation_runs());
    println!(
        "tune search: lower {} of {spec_line}; {r} runs per cell, interleaved in a random order",
        spec.objective.name(),
    );
    println!(
        "  screening: the baseline and {fit} candidate{} × {r} = {screen} runs; then a greedy \
         combination of what helped (2 × {r} runs per knob added) and a confirmation against \
         the baseline ({} runs)",
        if fit == 1 { "" } else { "s" },
        spec.confirmation_runs()
    );
    println!(
        "  about {} without combinations (runs of {}), budget {}",
        human(total),
        human(spec.run_length),
        human(spec.budget)
    );
    // One column for the reasons, as wide as the longest label.
    let width = candidates
        .iter()
        .map(|c| c.label().chars().count())
        .chain(not_tried.iter().map(|n| n.what.chars().count()))
        .max()
        .unwrap_or(0);
    for (i, c) in candidates.iter().enumerate() {
        let tail = if i < fit {
            String::new()
        } else {
            "  (not measured: beyond the budget)".into()
        };
        println!(
            "  candidate {:<width$} {}{tail}",
            c.label(),
            search::knob_description(&c.knob)
        );
    }
    for n in not_tried {
        println!("  not tried {:<width$} {}", n.what, n.why);
    }
    println!("  {}", search::BOOT_ADVICE);
}

/// `-3.1` / `+0.4`, µs with one decimal (`0.0` for what rounds to nothing, as in the reports).
fn signed(v: f64) -> String {
    let s = format!("{v:+.1}");
    if s == "+0.0" || s == "-0.0" {
        "0.0".into()
    } else {
        s
    }
}

/// The p-value column: the reports' form (`< 0.001`), `-` without a test.
fn p_cell(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), latlab_report::format_p_value)
}

fn delta_cell(d: Option<&search::Delta>) -> String {
    d.map_or_else(|| "-".into(), |d| signed(d.diff()))
}

fn print_outcome(o: &Outcome, spec: &Spec) {
    let obj = spec.objective.name();
    let unit = spec.objective.unit();
    let base = search::median(&o.baseline.iter().map(|f| f.objective).collect::<Vec<_>>());
    println!();
    if o.baseline.is_empty() {
        println!("baseline: not measured (the search stopped before its first run)");
    } else {
        println!(
            "baseline: {obj} {base:.1} {unit} (median of {})",
            latlab_model::units::plural(o.baseline.len() as u64, "run", "runs")
        );
    }
    println!(
        "{:<26} {:>9} {:>8} {:>6} {:>7} {:>8} {:>8} {:>8} {:>11} {:>6}  verdict",
        "candidate",
        format!("{obj} {unit}"),
        "Δ",
        "Δ%",
        "p",
        "Δp99 µs",
        "Δmax µs",
        "Δpower W",
        "Δthroughput",
        "time"
    );
    for r in &o.rows {
        let d = &r.objective;
        println!(
            "{:<26} {:>9.1} {:>8} {:>6} {:>7} {:>8} {:>8} {:>8} {:>11} {:>5.0}s  {}",
            r.candidate.label(),
            d.value,
            signed(d.diff()),
            format!("{:+.0}%", d.percent()),
            p_cell(d.p),
            delta_cell(r.p99.as_ref()),
            delta_cell(r.max.as_ref()),
            r.power
                .as_ref()
                .map_or_else(|| "-".into(), |d| format!("{:+.2}", d.diff())),
            r.throughput
                .as_ref()
                .map_or_else(|| "-".into(), |d| format!("{:+.1}%", d.percent())),
            r.runs.iter().map(|f| f.took.as_secs_f64()).sum::<f64>(),
            r.verdict
        );
    }
    for n in &o.not_tried {
        let state = if n.measured.is_empty() {
            "not tried"
        } else {
            "not compared"
        };
        println!("{:<26} {state}: {}", n.what, n.why);
    }
    println!(
        "(verdicts at p < {}, two-sided Mann-Whitney; Δ: the candidate's median minus the \
         baseline's; time: its runs measured by this command)",
        search::ALPHA
    );
    for s in &o.steps {
        println!(
            "combination: {} added to {}: {obj} {:.1} against {:.1} {unit} (p = {:.3}): {}",
            s.added,
            s.with.join(" + "),
            s.delta.value,
            s.delta.reference,
            s.delta.p.unwrap_or(1.0),
            if s.kept {
                "kept"
            } else {
                "no further effect shown, left out"
            }
        );
    }
    match &o.confirmation {
        Some(c) => println!(
            "confirmation: {}: {obj} {:.1} {unit} against {:.1} {unit} without ({:+.0} %, p = \
             {:.3}, {} runs each): {}",
            c.settings.join(" + "),
            c.delta.value,
            c.delta.reference,
            c.delta.percent(),
            c.delta.p.unwrap_or(1.0),
            c.tuned.len(),
            if c.confirmed() {
                "confirmed"
            } else {
                "not confirmed (no effect shown on fresh runs)"
            }
        ),
        None if o.rows.iter().any(|r| r.verdict == search::Verdict::Lowers) => {
            println!(
                "confirmation: not run ({})",
                o.cut_short.as_deref().unwrap_or("stopped")
            )
        }
        None if o.interrupted
            || o.rows
                .iter()
                .any(|r| r.verdict == search::Verdict::TooFewRuns) =>
        {
            println!(
                "the screening did not finish ({}): nothing is concluded yet",
                o.cut_short.as_deref().unwrap_or("interrupted")
            )
        }
        None => println!(
            "no candidate lowered {obj} with p < {}: nothing to confirm",
            search::ALPHA
        ),
    }
    let front = |name: &str, f: Result<Vec<search::Point>, String>, unit2: &str| match f {
        Ok(pts) => println!(
            "trade-off against {name} (Pareto front): {}",
            pts.iter()
                .map(|p| format!(
                    "{} ({:.1} {unit}, {:.2} {unit2})",
                    p.label, p.objective, p.other
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(why) => println!("trade-off against {name}: unavailable: {why}"),
    };
    front("power", o.power_front(), "W");
    front("throughput", o.throughput_front(), "/s");
    let took: Vec<f64> = o
        .rows
        .iter()
        .flat_map(|r| &r.runs)
        .chain(&o.baseline)
        .map(|f| f.took)
        .chain(o.not_tried.iter().flat_map(|n| n.measured.iter().copied()))
        .filter(|t| !t.is_zero())
        .map(|t| t.as_secs_f64())
        .collect();
    let reloaded = o
        .rows
        .iter()
        .flat_map(|r| &r.runs)
        .chain(&o.baseline)
        .filter(|f| f.took.is_zero())
        .count();
    println!(
        "time: {} of the {} budget; {} runs measured{}, {} each (median; {} expected){}",
        human(o.elapsed),
        human(spec.budget),
        o.runs_done,
        if reloaded > 0 {
            format!(" and {reloaded} reloaded from the interrupted search")
        } else {
            String::new()
        },
        if took.is_empty() {
            "-".to_string()
        } else {
            format!("{:.1}s", search::median(&took))
        },
        human(spec.run_length),
        o.cut_short
            .as_ref()
            .map(|w| format!("; ended early: {w}"))
            .unwrap_or_default()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_and_p_values_read_as_in_the_reports() {
        assert_eq!(signed(-3.12), "-3.1");
        assert_eq!(signed(0.46), "+0.5");
        assert_eq!(signed(-0.04), "0.0", "no negative zero");
        assert_eq!(p_cell(Some(0.0004)), "< 0.001");
        assert_eq!(p_cell(Some(0.0052)), "0.0052");
        assert_eq!(p_cell(None), "-");
    }
}
