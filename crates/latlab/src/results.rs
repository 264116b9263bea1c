//! Results in and out of the store: `latlab report`, `compare`, `export` and `import`.
//!
//! Items name what to show: `N` is run N, `eN` experiment N (its cells with their repeats),
//! `eN/KEY` one cell of it, `latest` the newest experiment (a store without one: its newest
//! run). With several `--db`, items are looked up in every store, and what each store has of
//! them (a run number, an experiment) is shown side by side.

use crate::args::OutputFile;
use crate::cli_error::{CliError, CliResult};
use anyhow::Context;
use clap::Args;
use latlab_model::RunResult;
use latlab_model::units::{format_us, plural};
use latlab_report::{CellInput, ReportFormat, ReportInput};
use latlab_store::{CellStatus, ExperimentId, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const ITEM_FORM: &str = "a run number, eN for experiment N, eN/KEY for one cell, series:NAME for a monitoring series, or latest (the newest experiment, else the newest run); with several --db, STORE:ITEM for one store's";

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Runs, experiments and monitoring series (series:NAME) to report (default: the newest
    /// experiment of each store).
    items: Vec<String>,

    /// A results store; repeat to put several stores (machines, kernels) in one report.
    #[arg(long, value_name = "PATH")]
    db: Vec<PathBuf>,

    /// Output file (default: report.html for html, standard output otherwise).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// html, text, md, json or csv.
    #[arg(long, default_value = "html", value_name = "FORMAT",
          hide_possible_values = true, value_parser = clap::builder::PossibleValuesParser::new(["html", "text", "md", "json", "csv"]))]
    format: String,

    /// Title of the report.
    #[arg(long)]
    title: Option<String>,

    /// The cell every other is compared with (default: the first), by its name as the report
    /// writes it, e.g. "load=none; method=futex; priority=50".
    #[arg(long, value_name = "CELL")]
    baseline: Option<String>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: a run number, eN/KEY for a cell with its repeats.
    a: String,
    /// What is compared with it.
    b: String,
    /// A results store (default ./latlab.db, or LATLAB_DB); repeat to compare across stores,
    /// naming each side STORE:ITEM.
    #[arg(long, value_name = "PATH")]
    db: Vec<PathBuf>,
}

/// What `export --format` writes.
const EXPORT_FORMATS: [&str; 7] = [
    "json",
    "csv",
    "histogram-csv",
    "windows-csv",
    "spikes-csv",
    "cyclictest-json",
    "cyclictest-hist",
];

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run (number or id).
    run: String,
    /// json, csv, histogram-csv, windows-csv, spikes-csv, cyclictest-json or cyclictest-hist.
    #[arg(long, default_value = "json", value_name = "FORMAT", hide_possible_values = true, value_parser = clap::builder::PossibleValuesParser::new(EXPORT_FORMATS))]
    format: String,
    /// Rows of 1 µs for cyclictest-hist [default: 400].
    #[arg(long, value_name = "US")]
    range: Option<u32>,
    /// Output file (default: standard output).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The results store (default ./latlab.db, or LATLAB_DB).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Files written by cyclictest (--json or -h text), stress-ng --cyclic with --cyclic-dist N
    /// (-v or --log-file) or jitterdebugger (results.json).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// cyclictest-json, cyclictest-hist, stress-ng or jitterdebugger (default: recognised).
    #[arg(long, value_name = "FORMAT",
          hide_possible_values = true, value_parser = clap::builder::PossibleValuesParser::new(latlab_import::Format::ALL.map(|f| f.name())))]
    format: Option<String>,
    /// Import the files that read even when others do not: one line per refused file, then exit
    /// code 2 (without it, one refused file stops the import and nothing is saved).
    #[arg(long)]
    keep_going: bool,
    /// The results store (default ./latlab.db, or LATLAB_DB).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
}

fn open_stores(dbs: &[PathBuf]) -> CliResult<Vec<(String, Store)>> {
    let paths = store_paths(dbs);
    // One store named twice would be reported twice, each cell compared with itself.
    let mut seen: Vec<((u64, u64), &PathBuf)> = Vec::new();
    for p in &paths {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::metadata(p) else {
            continue;
        };
        if let Some((_, first)) = seen.iter().find(|(id, _)| *id == (m.dev(), m.ino())) {
            return Err(CliError::Usage(format!(
                "--db {} and --db {}: one store named twice (accepted: each store once)",
                first.display(),
                p.display()
            )));
        }
        seen.push(((m.dev(), m.ino()), p));
    }
    let names = store_names(&paths);
    paths
        .iter()
        .zip(names)
        .map(|(p, name)| Ok((name, crate::args::open_existing(p)?)))
        .collect()
}

/// The stores `--db` names, or the default one.
fn store_paths(dbs: &[PathBuf]) -> Vec<PathBuf> {
    if dbs.is_empty() {
        vec![latlab_store::resolve_path(None)]
    } else {
        dbs.to_vec()
    }
}

/// `--output` opened, refused where it names a store read (or its journal).
fn output_beside(output: &Option<PathBuf>, dbs: &[PathBuf]) -> CliResult<Option<OutputFile>> {
    let out = OutputFile::open("--output", output)?;
    let files: Vec<_> = store_paths(dbs)
        .iter()
        .flat_map(|p| crate::args::store_files(p))
        .collect();
    let uses: Vec<(&str, &Path)> = files.iter().map(|(f, p)| (*f, p.as_path())).collect();
    OutputFile::refuse_clashes(&[&out], &uses)?;
    Ok(out)
}

/// What each store is called in a report: its file's stem (`hz250` for `hz250.db`), with its
/// directory where two stems are alike (`node1/latlab`, `node2/latlab`: machines that each keep
/// the default name), else its whole path.
fn store_names(paths: &[PathBuf]) -> Vec<String> {
    fn stem(p: &Path) -> Option<String> {
        p.file_stem().map(|s| s.to_string_lossy().into_owned())
    }
    fn with_dir(p: &Path) -> Option<String> {
        let dir = p.parent()?.file_name()?;
        Some(format!("{}/{}", dir.to_string_lossy(), stem(p)?))
    }
    let ways: [fn(&Path) -> Option<String>; 2] = [stem, with_dir];
    for way in ways {
        let names: Vec<Option<String>> = paths.iter().map(|p| way(p)).collect();
        let distinct: std::collections::BTreeSet<_> = names.iter().collect();
        if names.iter().all(Option::is_some) && distinct.len() == names.len() {
            return names.into_iter().flatten().collect();
        }
    }
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// Cells of an experiment that did not run, `(cell, reason)`, once per cell.
type Skipped = Vec<(String, String)>;

/// An experiment's cells with their runs, in the order first run; the cells that were skipped
/// (with their reason) go to `skipped`.
fn experiment_cells(
    store: &Store,
    id: ExperimentId,
    only: Option<&str>,
    skipped: &mut Skipped,
) -> CliResult<Vec<CellInput>> {
    let mut cells: Vec<CellInput> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    // A search compares some cells with others than its first: the report does the same.
    let (experiment, plan) = {
        let e = store.experiment(id)?;
        (e.name, e.plan)
    };
    let search = experiment == latlab_tune::search::EXPERIMENT_NAME;
    // A search's verdicts are given on its objective, as the search gave them.
    let objective = search
        .then(|| {
            plan.lines()
                .find_map(|l| l.strip_prefix("objective = "))
                .map(|v| v.trim().trim_matches('"').to_string())
        })
        .flatten()
        .filter(|o| ["p50", "p99.9", "max"].contains(&o.as_str()));
    // Per cell: its repeats, and those not measured (with a failed one's reason).
    let mut repeats: BTreeMap<String, u32> = BTreeMap::new();
    let mut unmeasured: BTreeMap<String, (u32, Option<String>)> = BTreeMap::new();
    for c in store.cells(id)? {
        if only.is_some_and(|k| !crate::plan::same_key(k, &c.key)) {
            continue;
        }
        if c.status == CellStatus::Skipped && !skipped.iter().any(|(k, _)| *k == c.key) {
            let reason = c
                .reason
                .clone()
                .unwrap_or_else(|| "no reason recorded".into());
            skipped.push((c.key.clone(), reason));
        }
        if matches!(c.status, CellStatus::Pending | CellStatus::Failed) {
            let e = unmeasured.entry(c.key.clone()).or_default();
            e.0 += 1;
            // Why: the first failure's reason, or a run removed since it was measured.
            if e.1.is_none() {
                e.1 = match (&c.status, c.reason.as_deref()) {
                    (CellStatus::Failed, Some(r)) if !r.is_empty() => {
                        Some(format!("one failed: {r}"))
                    }
                    (CellStatus::Failed, _) => Some("one failed".into()),
                    (_, Some(r)) if r == latlab_store::REMOVED => {
                        Some(format!("{r}; `latlab run PLAN --resume` measures it again"))
                    }
                    _ => None,
                };
            }
        }
        *repeats.entry(c.key.clone()).or_default() += 1;
        if c.status != CellStatus::Done {
            continue;
        }
        let at = *index.entry(c.key.clone()).or_insert_with(|| {
            let params = c
                .params
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), String::from)))
                        .collect()
                })
                .unwrap_or_default();
            cells.push(CellInput {
                // A plan without axes has one cell, keyed `-`: it is the plan's.
                name: if c.key == "-" && c.params.as_object().is_none_or(|o| o.is_empty()) {
                    experiment.clone()
                } else {
                    c.key.clone()
                },
                params,
                runs: Vec::new(),
                baseline: search
                    .then(|| latlab_tune::search::compared_with(&c.key))
                    .flatten(),
                verdict_on: objective.clone(),
            });
            cells.len() - 1
        });
        for r in &c.runs {
            cells[at].runs.push(store.load_run(*r)?);
        }
    }
    for (key, (n, failed)) in unmeasured {
        let of = repeats.get(&key).copied().unwrap_or(n);
        let why = failed.unwrap_or_else(|| {
            "the experiment stopped before them; `latlab run PLAN --resume` measures them".into()
        });
        let which = match (n, of) {
            (1, 1) => "its repeat".to_string(),
            (n, of) if n == of => format!("its {of} repeats"),
            (n, of) => format!("{n} of its {of} repeats"),
        };
        skipped.push((key, format!("{which} ({why})")));
    }
    Ok(cells)
}

/// `series:NAME` of every monitoring series with stored windows in `stores`.
pub fn series_items(stores: &[(String, Store)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, s) in stores {
        for e in s.series_extents().unwrap_or_default() {
            let item = format!("series:{}", e.name);
            if e.windows > 0 && !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

/// Resolve one item in the stores: the cells it stands for.
fn resolve(
    stores: &[(String, Store)],
    item: &str,
    skipped: &mut Skipped,
) -> CliResult<Vec<CellInput>> {
    let several = stores.len() > 1;
    // `STORE:ITEM`: the item of one of several stores, the store named as the report names it.
    if several
        && let Some((store, rest)) = item.split_once(':')
        && store != "series"
    {
        let Some(at) = stores.iter().position(|(name, _)| name == store) else {
            let names: Vec<&str> = stores.iter().map(|(n, _)| n.as_str()).collect();
            return Err(CliError::Usage(format!(
                "{item}: no store named {store:?} (accepted: STORE:ITEM with STORE one of {})",
                names.join(", ")
            )));
        };
        // The store is named in what is refused.
        let mut cells = resolve(&stores[at..=at], rest, skipped).map_err(|e| match e {
            CliError::Usage(m) => CliError::Usage(format!("{store}:{m}")),
            e => e,
        })?;
        tag_cells(&mut cells, "store", store);
        return Ok(cells);
    }
    let tag = |name: &str, mut cells: Vec<CellInput>| {
        if several {
            tag_cells(&mut cells, "store", name);
        }
        cells
    };
    if item == "latest" {
        let mut out = Vec::new();
        for (name, s) in stores {
            let found = match latest_of(s)? {
                Some(Latest::Experiment(e)) => experiment_cells(s, e.id, None, skipped)?,
                Some(Latest::Run(r)) => vec![CellInput::single(s.load_run(r)?)],
                None => Vec::new(),
            };
            out.extend(tag(name, found));
        }
        return Ok(out);
    }
    // Stores without the item, said when others have it.
    let mut lacking: Vec<&str> = Vec::new();
    if let Some(name) = item.strip_prefix("series:") {
        let mut out = Vec::new();
        for (store_name, s) in stores {
            // One snapshot: a daemon writing meanwhile cannot make its parts disagree.
            match s.snapshot(|s| latlab_monitor::report::series_result(s, name))? {
                Some(run) => out.extend(tag(store_name, vec![CellInput::single(run)])),
                None => lacking.push(store_name.as_str()),
            }
        }
        said_lacking(item, &lacking, !out.is_empty());
        if out.is_empty() {
            let series = series_items(stores);
            return Err(CliError::Usage(if series.is_empty() {
                format!(
                    "{item}: no monitoring series {name:?} with stored windows (accepted: \
                     {ITEM_FORM})"
                )
            } else {
                format!(
                    "{item}: no monitoring series {name:?} with stored windows (accepted: \
                     series:NAME of a series they hold: {})",
                    series.join(", ")
                )
            }));
        }
        return Ok(out);
    }
    if let Some(rest) = item.strip_prefix('e') {
        let (num, key) = match rest.split_once('/') {
            Some((n, k)) => (n, Some(k)),
            None => (rest, None),
        };
        if let Ok(n) = num.parse::<i64>() {
            let mut out = Vec::new();
            for (name, s) in stores {
                if s.experiment(ExperimentId(n)).is_ok() {
                    out.extend(tag(
                        name,
                        experiment_cells(s, ExperimentId(n), key, skipped)?,
                    ));
                } else {
                    lacking.push(name);
                }
            }
            said_lacking(item, &lacking, !out.is_empty());
            if out.is_empty() {
                // The experiment is there, without that cell: its cells are the accepted keys.
                let mut keys: Vec<String> = Vec::new();
                for (_, s) in stores {
                    for c in s.cells(ExperimentId(n)).unwrap_or_default() {
                        if !c.runs.is_empty() && !keys.contains(&c.key) {
                            keys.push(c.key);
                        }
                    }
                }
                return Err(CliError::Usage(match key {
                    Some(key) if !keys.is_empty() => format!(
                        "{item}: experiment e{n} has no cell {key:?} with saved runs (accepted: \
                         e{n}/KEY of its cells: {})",
                        keys.join(", ")
                    ),
                    _ => format!(
                        "{item}: no such experiment or cell with saved runs (accepted: \
                         {ITEM_FORM})"
                    ),
                }));
            }
            return Ok(out);
        }
    }
    // A run of each store that has it, as an experiment number is.
    let mut out = Vec::new();
    for (name, s) in stores {
        match s.find_run(item)? {
            Some(id) => out.extend(tag(name, vec![CellInput::single(s.load_run(id)?)])),
            None => lacking.push(name),
        }
    }
    said_lacking(item, &lacking, !out.is_empty());
    if out.is_empty() {
        return Err(CliError::Usage(format!(
            "{item}: no such run or experiment (accepted: {ITEM_FORM})"
        )));
    }
    Ok(out)
}

/// Across stores, those without `item` (where another has it), said on stderr: the report
/// holds the others' alone.
fn said_lacking(item: &str, lacking: &[&str], found: bool) {
    if found && !lacking.is_empty() {
        eprintln!(
            "latlab: note: {item}: not in {} {}; reported from the other stores",
            if lacking.len() == 1 {
                "store"
            } else {
                "stores"
            },
            lacking.join(", ")
        );
    }
}

/// What `latest` names in a store.
enum Latest {
    Experiment(latlab_store::Experiment),
    Run(latlab_store::RunId),
}

/// The newest experiment of a store with a saved run (one interrupted in its first run has
/// none), else its newest run by its start.
fn latest_of(s: &Store) -> CliResult<Option<Latest>> {
    for e in s.list_experiments()?.into_iter().rev() {
        if !s.done_cells(e.id)?.is_empty() {
            return Ok(Some(Latest::Experiment(e)));
        }
    }
    let newest = s.list_runs(&latlab_store::RunFilter {
        limit: Some(1),
        ..Default::default()
    })?;
    Ok(newest.into_iter().next_back().map(|r| Latest::Run(r.id)))
}

/// An item as a title names it: an experiment by its plan's name, `governors (e3)`; across
/// several stores, each store's with its name (`run 4 in hz250, run 2 in hz1000`), and a
/// `STORE:ITEM` as that store's item.
fn item_title(stores: &[(String, Store)], item: &str) -> String {
    let several = stores.len() > 1;
    if several
        && let Some((store, rest)) = item.split_once(':')
        && let Some(at) = stores.iter().position(|(name, _)| name == store)
    {
        return format!("{} in {store}", item_title(&stores[at..=at], rest));
    }
    let experiment = item
        .strip_prefix('e')
        .and_then(|r| r.split('/').next())
        .and_then(|n| n.parse::<i64>().ok());
    let mut names: Vec<String> = Vec::new();
    for (store, s) in stores {
        let n = if item == "latest" {
            match latest_of(s) {
                Ok(Some(Latest::Experiment(e))) => format!("{} (e{})", e.name, e.id.0),
                Ok(Some(Latest::Run(r))) => format!("run {}", r.0),
                _ => continue,
            }
        } else if let Some(id) = experiment
            && let Ok(e) = s.experiment(ExperimentId(id))
        {
            format!("{} ({item})", e.name)
        } else if let Some(name) = item.strip_prefix("series:")
            && s.find_series(name).is_ok_and(|id| id.is_some())
        {
            item.to_string()
        } else {
            continue;
        };
        let n = if several {
            format!("{n} in {store}")
        } else {
            n
        };
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if !names.is_empty() {
        return names.join(", ");
    }
    // A run by its number reads as latest's does: `run 4`.
    match item.strip_prefix("run:").unwrap_or(item).parse::<i64>() {
        Ok(n) => format!("run {n}"),
        Err(_) => item.to_string(),
    }
}

/// Put the cell named `name` first: the one the others are compared with.
fn baseline_first(cells: &mut Vec<CellInput>, name: &str) -> CliResult<()> {
    let at = cells
        .iter()
        .position(|c| c.name == name)
        .or_else(|| {
            cells
                .iter()
                .position(|c| crate::plan::same_key(name, &c.name))
        })
        .ok_or_else(|| {
            let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
            CliError::Usage(format!(
                "--baseline {name:?}: no cell of that name in this report (accepted: one of {})",
                names.join(" | ")
            ))
        })?;
    let cell = cells.remove(at);
    cells.insert(0, cell);
    Ok(())
}

/// The cells of every item in order. Where two items have cells of the same name (two
/// experiments of one plan), every cell is tagged with its item, `interval=1ms [e2]`, and the
/// cell it names to be compared with alike, so a search's cells keep their own baseline. An
/// item given twice is reported once.
fn tag_items(groups: Vec<(String, Vec<CellInput>)>) -> Vec<CellInput> {
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (gi, (_, cells)) in groups.iter().enumerate() {
        for c in cells {
            names.entry(c.name.as_str()).or_insert(gi);
        }
    }
    let collide = groups.iter().enumerate().any(|(gi, (_, cells))| {
        cells
            .iter()
            .any(|c| names.get(c.name.as_str()) != Some(&gi))
    });
    let mut out = Vec::new();
    for (item, mut cells) in groups {
        if collide {
            tag_cells(&mut cells, "item", &item);
        }
        out.extend(cells);
    }
    out
}

/// Cells of several stores or items that share a name (`load=matrix [hz250]`, `load=matrix
/// [hz1000]`) are compared with the first of that name, like with like, rather than all with
/// the report's first cell; a cell that names its own baseline keeps it.
fn like_with_like(cells: &mut [CellInput]) {
    let untagged = |c: &CellInput| -> Option<String> {
        ["store", "item"].iter().find_map(|p| {
            let v = c.params.get(*p)?;
            c.name.strip_suffix(&format!(" [{v}]")).map(str::to_string)
        })
    };
    let names: Vec<Option<String>> = cells.iter().map(untagged).collect();
    for i in 0..cells.len() {
        let Some(name) = &names[i] else { continue };
        let first = names.iter().position(|n| n.as_ref() == Some(name));
        if let Some(f) = first.filter(|&f| f != i)
            && cells[i].baseline.is_none()
        {
            cells[i].baseline = Some(cells[f].name.clone());
        }
    }
}

/// Name `cells` with where they come from, `interval=1ms [VALUE]`, and the cell each is compared
/// with alike (it comes from the same place); `param` = `value` becomes one of their parameters.
fn tag_cells(cells: &mut [CellInput], param: &str, value: &str) {
    for c in cells {
        c.name = format!("{} [{value}]", c.name);
        c.baseline = c.baseline.take().map(|b| format!("{b} [{value}]"));
        c.params.insert(param.into(), value.to_string());
    }
}

pub fn report(args: ReportArgs) -> CliResult<ExitCode> {
    let format = ReportFormat::from_name(&args.format).ok_or_else(|| {
        CliError::Usage(format!(
            "--format {}: unknown (accepted: html, text, md, json, csv)",
            args.format
        ))
    })?;
    let output = args
        .output
        .clone()
        .or_else(|| (format == ReportFormat::Html).then(|| PathBuf::from("report.html")));
    let out = output_beside(&output, &args.db)?;
    let stores = open_stores(&args.db)?;
    let mut items = if args.items.is_empty() {
        vec!["latest".to_string()]
    } else {
        args.items.clone()
    };
    // An item named twice is reported (and titled) once.
    let mut seen = std::collections::BTreeSet::new();
    items.retain(|i| seen.insert(i.clone()));
    let mut skipped = Skipped::new();
    let mut groups = Vec::new();
    for item in &items {
        groups.push((item.clone(), resolve(&stores, item, &mut skipped)?));
    }
    let mut cells = tag_items(groups);
    match &args.baseline {
        Some(name) => baseline_first(&mut cells, name)?,
        None => like_with_like(&mut cells),
    }
    if cells.is_empty() {
        let series = series_items(&stores);
        return Err(CliError::Usage(if series.is_empty() {
            "nothing to report: the stores hold no run (accepted: a store `latlab measure --db`, \
             `latlab run` or `latlab import` wrote)"
                .into()
        } else {
            format!(
                "nothing to report: the stores hold no run (accepted: a monitoring series: {})",
                series.join(", ")
            )
        }));
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let named: Vec<String> = items.iter().map(|i| item_title(&stores, i)).collect();
        format!("latlab report: {}", named.join(", "))
    });
    let text = format.render(&ReportInput {
        title,
        cells,
        skipped,
    });
    write_out(out, &text)?;
    if let Some(p) = output.filter(|p| p.as_os_str() != "-") {
        eprintln!("latlab: wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Write `text` to `out` (checked before the command did anything), or to standard output.
fn write_out(out: Option<OutputFile>, text: &str) -> CliResult<()> {
    match out {
        Some(o) => o.write(text).map_err(CliError::from),
        None => crate::args::write_stdout(text)
            .context("writing to standard output")
            .map_err(CliError::from),
    }
}

pub fn compare(args: CompareArgs) -> CliResult<ExitCode> {
    let stores = open_stores(&args.db)?;
    let one = |item: &str| -> CliResult<CellInput> {
        let mut cells = resolve(&stores, item, &mut Skipped::new())?;
        if cells.len() != 1 {
            return Err(CliError::Usage(format!(
                "{item}: names {} cells; compare takes one each (accepted: a run number or eN/KEY; \
                 with several --db, STORE:ITEM of one store, e.g. {}:{item})",
                cells.len(),
                stores.first().map_or("STORE", |(name, _)| name.as_str())
            )));
        }
        Ok(cells.remove(0))
    };
    let (a, b) = (one(&args.a)?, one(&args.b)?);
    print!("{}", latlab_report::compare_text(&a, &b));
    Ok(ExitCode::SUCCESS)
}

pub fn export(args: ExportArgs) -> CliResult<ExitCode> {
    let render: fn(&RunResult, u32) -> String = match args.format.as_str() {
        "json" => |r, _| {
            let mut s = r.to_json_pretty();
            s.push('\n');
            s
        },
        "csv" => |r, _| latlab_report::run_csv(r),
        "histogram-csv" => |r, _| latlab_report::histogram_csv(r),
        "windows-csv" => |r, _| latlab_report::windows_csv(r),
        "spikes-csv" => |r, _| latlab_report::spikes_csv(r),
        "cyclictest-json" => |r, range| {
            latlab_report::cyclictest_json_with_range(r, range.max(latlab_report::HIST_MAX_US))
        },
        "cyclictest-hist" => |r, range| latlab_report::histfile(r, range),
        other => {
            return Err(CliError::Usage(format!(
                "--format {other}: unknown (accepted: {})",
                EXPORT_FORMATS.join(", ")
            )));
        }
    };
    // Only the -h text has rows; elsewhere a --range would be taken and do nothing.
    if args.range.is_some() && args.format != "cyclictest-hist" {
        return Err(CliError::Usage(format!(
            "--range: --format {} has no rows of 1 µs (accepted: --range with --format \
             cyclictest-hist)",
            args.format
        )));
    }
    let range = args.range.unwrap_or(400);
    if range == 0 {
        return Err(CliError::Usage(
            "--range 0: no rows to show (accepted: 1 or more rows)".into(),
        ));
    }
    let out = output_beside(&args.output, args.db.as_slice())?;
    let stores = open_stores(args.db.as_slice())?;
    let (_, store) = &stores[0];
    let id = store.find_run(&args.run)?.ok_or_else(|| {
        CliError::Usage(format!(
            "{}: no such run (accepted: a run number or id from `latlab db list`)",
            args.run
        ))
    })?;
    let run = store.load_run(id)?;
    // Fewer rows than asked are said: cyclictest's histogram holds at most HIST_MAX rows, and
    // an import's ends where its file's did.
    if let Some(asked) = args.range
        && args.format == "cyclictest-hist"
    {
        let rows = latlab_report::histfile_rows(&run, asked);
        let why = if rows == latlab_report::HIST_MAX_US {
            "cyclictest's largest histogram"
        } else {
            "the run's histogram ends there"
        };
        if rows < asked {
            eprintln!(
                "latlab: --range {asked}: {rows} rows written: {why} (its samples past it are \
                 counted as overflows)"
            );
        }
    }
    write_out(out, &render(&run, range))?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(args: ImportArgs) -> CliResult<ExitCode> {
    let format = match &args.format {
        None => None,
        Some(f) => Some(latlab_import::Format::from_name(f).ok_or_else(|| {
            CliError::Usage(format!(
                "--format {f}: unknown (accepted: {})",
                latlab_import::Format::ALL.map(|f| f.name()).join(", ")
            ))
        })?),
    };
    // Every file is read and checked before anything is saved; a refused file stops the import,
    // or with --keep-going is reported (one line) and left out.
    let mut results = Vec::new();
    let mut refused = 0;
    for f in &args.files {
        match import_file(f, format) {
            Ok(r) => results.push((f, r)),
            Err(reason) if args.keep_going => {
                eprintln!("latlab: error: {}: {reason}", f.display());
                refused += 1;
            }
            Err(reason) => {
                let others = if args.files.len() > 1 {
                    "; nothing imported (--keep-going imports the files that read)"
                } else {
                    ""
                };
                return Err(CliError::Usage(format!(
                    "{}: {reason}{others}",
                    f.display()
                )));
            }
        }
    }
    let saved = if results.is_empty() {
        0
    } else {
        save_imported(args.db.as_deref(), results)?
    };
    if refused > 0 {
        eprintln!(
            "latlab: {refused} of {} files refused (above), {saved} imported",
            args.files.len(),
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// Save imported results (a file already in the store is said and skipped), with their notes;
/// how many were saved.
fn save_imported(db: Option<&Path>, results: Vec<(&PathBuf, RunResult)>) -> CliResult<usize> {
    let path = latlab_store::resolve_path(db);
    let mut store = crate::args::open_store(&path)?;
    let mut saved = 0;
    for (f, r) in results {
        if let Some(latlab_store::RunId(n)) = store.find_run(&r.id)? {
            println!(
                "{}: already in {} as run {n} ({})",
                f.display(),
                path.display(),
                r.id
            );
            continue;
        }
        let id = store
            .save_run(&r, None)
            .with_context(|| format!("{}: saving to {}", f.display(), path.display()))?;
        println!(
            "{}: saved as run {} ({}, {}, max {} us)",
            f.display(),
            id.0,
            plural(r.threads.len() as u64, "thread", "threads"),
            plural(r.overall.stats.count, "sample", "samples"),
            format_us(r.overall.stats.max, 1)
        );
        for w in &r.environment.warnings {
            println!("  note: {w}");
        }
        saved += 1;
    }
    Ok(saved)
}

/// One file read and imported, or why not (one line, with the accepted form).
fn import_file(f: &Path, format: Option<latlab_import::Format>) -> Result<RunResult, String> {
    // jitterdebugger's -o DIR writes its results.json there: the directory names it.
    let results = f.join("results.json");
    let f = if f.is_dir() && results.is_file() {
        results.as_path()
    } else if f.is_dir() {
        return Err(
            "a directory without a results.json (accepted: a file, or the directory \
             jitterdebugger -o wrote its results.json in)"
                .into(),
        );
    } else {
        f
    };
    let text =
        std::fs::read_to_string(f).map_err(|e| format!("{e} (accepted: a readable file)"))?;
    if text.trim().is_empty() {
        return Err(
            "empty (accepted: the output of cyclictest, stress-ng --cyclic or \
             jitterdebugger)"
                .into(),
        );
    }
    latlab_import::import(&text, format, &f.display().to_string()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// `latest` passes over an experiment with no saved run (interrupted in its first run) to
    /// the newest run, rather than reporting nothing.
    #[test]
    fn latest_passes_over_an_experiment_without_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = latlab_store::Store::open(dir.path().join("l.db")).unwrap();
        let run = latlab_testkit::run::one_cpu("lone", (1_700_000_000_000_000_000, 1_000_000));
        store.save_run(&run, None).unwrap();
        store
            .create_experiment("empty", "name = \"empty\"\n")
            .unwrap();
        let stores = vec![("l".to_string(), store)];
        let cells = super::resolve(&stores, "latest", &mut Vec::new()).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].runs[0].id, "lone");
        // The title names what was reported, not the experiment passed over.
        assert_eq!(super::item_title(&stores, "latest"), "run 1");
        // Across stores, each store's item is named with its store.
        let mut other = latlab_store::Store::open(dir.path().join("m.db")).unwrap();
        let e = other
            .create_experiment("governors", "name = \"governors\"\n")
            .unwrap();
        let cell = latlab_store::CellRef {
            experiment: e,
            key: "-".into(),
            params: serde_json::json!({}),
            repeat: 0,
        };
        other.save_run(&run, Some(&cell)).unwrap();
        let mut stores = stores;
        stores.push(("m".to_string(), other));
        assert_eq!(
            super::item_title(&stores, "latest"),
            "run 1 in l, governors (e1) in m"
        );
        assert_eq!(
            super::item_title(&stores, "e1"),
            "empty (e1) in l, governors (e1) in m"
        );
        assert_eq!(super::item_title(&stores, "l:latest"), "run 1 in l");
        assert_eq!(super::item_title(&stores, "m:1"), "run 1 in m");
        assert_eq!(super::item_title(&stores, "run:1"), "run 1");
        // A series of one name in each store: each named with its store.
        for (_, s) in &mut stores {
            s.open_series(&latlab_store::SeriesSpec {
                name: "n1".into(),
                window_ns: 1,
                config: latlab_store::SeriesConfig::new(&Default::default(), Default::default()),
                system: None,
                idle_states: vec![],
            })
            .unwrap();
        }
        assert_eq!(
            super::item_title(&stores, "series:n1"),
            "series:n1 in l, series:n1 in m"
        );
        // A refusal names the store, and a store that is not one names those that are.
        let refused = |item: &str| match super::resolve(&stores, item, &mut Vec::new()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{item} resolved"),
        };
        assert!(refused("l:9").starts_with("l:9: "), "{}", refused("l:9"));
        assert_eq!(
            refused("zz:1"),
            "zz:1: no store named \"zz\" (accepted: STORE:ITEM with STORE one of l, m)"
        );
    }

    #[test]
    fn stores_alike_in_name_are_told_apart_by_their_directory() {
        let names = |ps: &[&str]| {
            super::store_names(&ps.iter().map(std::path::PathBuf::from).collect::<Vec<_>>())
        };
        assert_eq!(names(&["a/hz250.db", "b/hz1000.db"]), ["hz250", "hz1000"]);
        assert_eq!(
            names(&["node1/latlab.db", "node2/latlab.db"]),
            ["node1/latlab", "node2/latlab"]
        );
        assert_eq!(
            names(&["x/n/latlab.db", "y/n/latlab.db"]),
            ["x/n/latlab.db", "y/n/latlab.db"]
        );
    }

    /// A search's cells name what the search measured them against; other experiments' cells
    /// are compared with their first.
    #[test]
    fn a_search_report_compares_each_cell_as_the_search_did() {
        use latlab_store::{CellRef, Store};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let keys = [
            "baseline",
            "a=1",
            "combine: a=1",
            "combine: a=1 + b=2",
            "confirm: baseline",
            "confirm: a=1 + b=2",
        ];
        let mut n = 0;
        for name in [latlab_tune::search::EXPERIMENT_NAME, "plan"] {
            let e = store.create_experiment(name, name).unwrap();
            for key in keys {
                n += 1;
                let run = latlab_testkit::run::one_cpu(&format!("r{n}"), (n, 1_000_000));
                let cell = CellRef {
                    experiment: e,
                    key: key.into(),
                    params: serde_json::json!({ "candidate": key }),
                    repeat: 0,
                };
                store.save_run(&run, Some(&cell)).unwrap();
            }
            let cells = super::experiment_cells(&store, e, None, &mut Vec::new()).unwrap();
            let against: Vec<Option<&str>> = cells.iter().map(|c| c.baseline.as_deref()).collect();
            if name == "plan" {
                assert!(against.iter().all(Option::is_none), "{against:?}");
            } else {
                assert_eq!(
                    against,
                    [
                        None,
                        None,
                        None,
                        Some("combine: a=1"),
                        None,
                        Some("confirm: baseline")
                    ]
                );
            }
        }
        // Two stores: the cells are named with their store, and so are the cells they name.
        drop(store);
        let other = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("s.db"), other.path().join("s.db")).unwrap();
        let open = |d: &std::path::Path| Store::open(d.join("s.db")).unwrap();
        let stores = vec![
            ("a".to_string(), open(dir.path())),
            ("b".to_string(), open(other.path())),
        ];
        let cells = super::resolve(&stores, "e1", &mut Vec::new()).unwrap();
        let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        for c in &cells {
            if let Some(b) = &c.baseline {
                assert!(
                    names.contains(&b.as_str()),
                    "{b} is no cell's name: {names:?}"
                );
                assert_eq!(
                    b.ends_with(" [a]"),
                    c.name.ends_with(" [a]"),
                    "{}: {b}",
                    c.name
                );
            }
        }
        assert_eq!(cells.iter().filter(|c| c.baseline.is_some()).count(), 4);
    }

    /// Two experiments of one plan in one report: every cell is told apart by its item, and a
    /// search's cell names the baseline of its own search, not the first of that name.
    #[test]
    fn cells_alike_in_name_across_items_are_tagged_with_their_item() {
        let cell = |name: &str, baseline: Option<&str>| latlab_report::CellInput {
            baseline: baseline.map(String::from),
            ..latlab_report::CellInput::single(latlab_testkit::run::one_cpu(name, (1, 1_000_000)))
        };
        let search = || {
            vec![
                super::CellInput {
                    name: "confirm: baseline".into(),
                    ..cell("x", None)
                },
                super::CellInput {
                    name: "confirm: a=1".into(),
                    ..cell("y", Some("confirm: baseline"))
                },
            ]
        };
        let cells = super::tag_items(vec![("e1".into(), search()), ("e3".into(), search())]);
        let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "confirm: baseline [e1]",
                "confirm: a=1 [e1]",
                "confirm: baseline [e3]",
                "confirm: a=1 [e3]"
            ]
        );
        assert_eq!(cells[3].baseline.as_deref(), Some("confirm: baseline [e3]"));
        assert_eq!(cells[2].params.get("item").map(String::as_str), Some("e3"));
        // Names that differ are left as they are.
        let cells = super::tag_items(vec![
            ("e1".into(), vec![cell("r1", None)]),
            ("e2".into(), vec![cell("r2", Some("r1"))]),
        ]);
        let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["r1", "r2"]);
        assert!(cells[1].params.is_empty());
    }

    /// Repeats an interrupted or failing experiment did not measure are said, per cell.
    #[test]
    fn repeats_not_measured_are_said() {
        use latlab_store::{CellRef, CellStatus, Store};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let e = store.create_experiment("p", "p").unwrap();
        let cell = |key: &str, repeat| CellRef {
            experiment: e,
            key: key.into(),
            params: serde_json::json!({ "x": key }),
            repeat,
        };
        let run = latlab_testkit::run::one_cpu("r1", (1, 1_000_000));
        store.save_run(&run, Some(&cell("x=a", 0))).unwrap();
        store
            .record_cell(&cell("x=a", 1), CellStatus::Pending, None)
            .unwrap();
        store
            .record_cell(&cell("x=b", 0), CellStatus::Failed, Some("boom"))
            .unwrap();
        store
            .record_cell(&cell("x=b", 1), CellStatus::Pending, None)
            .unwrap();
        let mut skipped = Vec::new();
        let cells = super::experiment_cells(&store, e, None, &mut skipped).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(
            skipped,
            [
                (
                    "x=a".to_string(),
                    "1 of its 2 repeats (the experiment stopped before them; `latlab run PLAN \
                     --resume` measures them)"
                        .to_string()
                ),
                (
                    "x=b".to_string(),
                    "its 2 repeats (one failed: boom)".to_string()
                )
            ]
        );
        // A repeat whose run was removed since says so: the experiment did measure it.
        let c = store
            .save_run(&run_with_id("r2"), Some(&cell("x=c", 0)))
            .unwrap();
        store
            .save_run(&run_with_id("r3"), Some(&cell("x=c", 1)))
            .unwrap();
        store.remove_runs(&[c]).unwrap();
        let mut skipped = Vec::new();
        super::experiment_cells(&store, e, None, &mut skipped).unwrap();
        assert!(
            skipped.contains(&(
                "x=c".to_string(),
                "1 of its 2 repeats (its run was removed with `latlab db rm`; `latlab run PLAN \
                 --resume` measures it again)"
                    .to_string()
            )),
            "{skipped:?}"
        );
    }

    fn run_with_id(id: &str) -> latlab_model::RunResult {
        latlab_testkit::run::one_cpu(id, (1, 1_000_000))
    }

    /// A plan without axes has one cell; it is named after the plan, not `-`, and the title
    /// names the plan too.
    #[test]
    fn the_one_cell_of_a_plan_without_axes_is_the_plans() {
        use latlab_store::{CellRef, Store};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("s.db")).unwrap();
        let e = store.create_experiment("stress-timeline", "x").unwrap();
        let cell = CellRef {
            experiment: e,
            key: "-".into(),
            params: serde_json::json!({}),
            repeat: 0,
        };
        let run = latlab_testkit::run::one_cpu("r1", (1, 1_000_000));
        store.save_run(&run, Some(&cell)).unwrap();
        let cells = super::experiment_cells(&store, e, None, &mut Vec::new()).unwrap();
        assert_eq!(cells[0].name, "stress-timeline");
        let stores = vec![("s".to_string(), store)];
        assert_eq!(super::item_title(&stores, "latest"), "stress-timeline (e1)");
        assert_eq!(super::item_title(&stores, "e1"), "stress-timeline (e1)");
        assert_eq!(super::item_title(&stores, "e7"), "e7");
    }
}
