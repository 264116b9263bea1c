//! The keeper: the daemon's thread that turns closed windows into stored window sets.
//!
//! The measuring engine hands over each thread's closed window as soon as its coordinator has
//! it; the keeper waits until every CPU's window of the same index is there (and the sample
//! that covers the window's end, for at most a short while), sums up the samplers' samples of
//! the window, adds latlab's own CPU time of the window, and writes the set in one transaction.
//! So a SIGKILL loses the open window and at most the one being written. Between windows it runs
//! the schedule's switches and, once an hour, the retention merge. All store writes happen
//! here, on one connection.
//!
//! When the store cannot be written (a full disk, a read-only file system, a file deleted or
//! replaced under the daemon), the keeper says so once, parks the window sets in memory
//! ([`crate::backlog`]), tries again every few seconds (reopening the file at the path), and
//! when it succeeds writes them all and marks the outage with an annotation. Readiness of a
//! window is judged on the monotonic clock, so a step of the wall clock neither holds windows
//! back nor releases them early.

use super::backlog::{Backlog, Parked};
use super::hotplug::Hotplug;
use super::schedule::{GovernorTuner, Switch, Switcher, WallClock};
use super::web::LiveStatus;
use latlab_measure::ClosedWindow;
use latlab_model::samples::{PowerSource, Sample};
use latlab_model::units::format_duration;
use latlab_store::{
    Annotation, COARSE_SHIFT, FULL_RESOLUTION_NS, FileFate, MergeSummary, MonitorSpike,
    MonitorWindow, SeriesId, SeriesSpec, SeriesState, Store, StoreError, WindowSet,
};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most windows one ageing step coarsens (one transaction of well under a second, so the
/// windows behind it wait no longer).
pub const AGE_BATCH: u32 = 2000;

/// Hours merged by one retention step: one, so that a step holds the store (while the windows
/// measured meanwhile wait in memory) only as long as one hour's merge takes; a backlog (after
/// a long stop, or a shorter `--retention`) is merged an hour a step, a second apart.
pub const MERGE_BATCH_HOURS: usize = 1;

/// What one retention step did: the hours merged and the windows coarsened.
#[derive(Debug)]
pub struct RetentionStep {
    pub merged: Result<MergeSummary, StoreError>,
    pub aged: Result<u64, StoreError>,
}

impl RetentionStep {
    /// Whether more waits for a next step.
    pub fn more(&self) -> bool {
        matches!(self.merged, Ok(m) if m.hours >= MERGE_BATCH_HOURS as u64)
            || matches!(self.aged, Ok(n) if n >= u64::from(AGE_BATCH))
    }
}

/// One step of retention at `now_unix_ns`, as the daemon takes it: merge the oldest hour older
/// than `retention_ns` into an hourly row, and keep at most [`AGE_BATCH`] histograms of windows
/// older than [`FULL_RESOLUTION_NS`] at [`COARSE_SHIFT`].
pub fn retention_step(
    store: &mut Store,
    series: SeriesId,
    now_unix_ns: u64,
    retention_ns: u64,
) -> RetentionStep {
    RetentionStep {
        merged: store.merge_old_hours(
            series,
            now_unix_ns.saturating_sub(retention_ns),
            MERGE_BATCH_HOURS,
        ),
        aged: store.coarsen_old_windows(
            series,
            now_unix_ns.saturating_sub(FULL_RESOLUTION_NS),
            COARSE_SHIFT,
            AGE_BATCH,
        ),
    }
}

/// What the measuring side sends.
pub enum Msg {
    /// Measuring started at this unix time (window k starts at start + k × window).
    Start {
        start_unix_ns: u64,
        /// The same instant on the monotonic clock.
        start_instant: Instant,
        /// What the set-up could not do as asked (memory not locked, …).
        warnings: Vec<String>,
    },
    Windows(Vec<ClosedWindow>),
    /// Measuring ended at this unix time: write what is left.
    Finish {
        end_unix_ns: u64,
    },
}

pub struct KeeperSetup {
    /// The series as opened, and what opens it again in a new or replaced store file.
    pub series: SeriesState,
    pub spec: SeriesSpec,
    pub threads: usize,
    pub window_ns: u64,
    pub retention_ns: u64,
    pub sample_period_ns: u64,
    pub power_names: Vec<String>,
    pub thermal_names: Vec<String>,
    /// Unix time of the samplers' origin (sample times count from it).
    pub sample_origin_unix_ns: u64,
    /// The start annotation's text.
    pub describe: String,
    /// How often the retention merge runs.
    pub merge_every: Duration,
    /// How often the store's file is checked, and a failed write tried again.
    pub retry_every: Duration,
    /// The measured CPUs going offline and coming back (checked every second).
    pub hotplug: Hotplug,
    /// While the store cannot be written: the time of windows always kept in memory, ns, and
    /// the bytes beyond it (see [`Backlog`]).
    pub backlog: (u64, usize),
}

/// The start of the name of the file that keeps series `name`'s window sets the store could not
/// take (the series' name as a file name may hold it: letters, digits, `-`, `_`, `.`).
fn unsaved_prefix(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("latlab-unsaved-windows-{name}-")
}

/// Files past which a list of kept files is said by the pattern that names them all.
const FILES_LISTED: usize = 3;

/// Whether `files` are better said by their patterns ([`kept_patterns`]): more than
/// [`FILES_LISTED`], and no other file in their directories matches (another store's, one that
/// does not read, left there), so that the pattern names these and no more.
pub fn files_by_pattern(files: &[&Path]) -> bool {
    files.len() > FILES_LISTED
        && files.iter().all(|f| {
            let (Some(dir), Some(name)) = (f.parent(), f.file_name().and_then(|n| n.to_str()))
            else {
                return false;
            };
            let prefix = format!("{}-", series_part(name));
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries.filter_map(|e| e.ok()).all(|e| {
                    let n = e.file_name();
                    !n.to_str().is_some_and(|n| is_kept_file(n, &prefix))
                        || files.iter().any(|f| {
                            f.file_name() == Some(n.as_os_str()) && f.parent() == Some(dir)
                        })
                })
            })
        })
}

/// The files: listed, or said by their number and their patterns (`by_pattern`).
pub fn kept_files(files: &[&Path], by_pattern: bool) -> String {
    if !by_pattern {
        let list: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        return list.join(", ");
    }
    format!(
        "{} files, {}",
        files.len(),
        kept_patterns(files).join(" and ")
    )
}

/// `latlab db import-json` of the files: each named, or by their patterns (`by_pattern`).
pub fn import_command(files: &[&Path], by_pattern: bool) -> String {
    let words: Vec<String> = if by_pattern {
        kept_patterns(files)
    } else {
        files
            .iter()
            .map(|p| latlab_model::units::shell_path(p))
            .collect()
    };
    format!("latlab db import-json {}", words.join(" "))
}

/// One shell pattern a directory for the files, which share the series' prefix: the directory
/// quoted as a shell would need, the pattern bare (a file name of the series is plain).
fn kept_patterns(files: &[&Path]) -> Vec<String> {
    let mut dirs: Vec<(&Path, String)> = Vec::new();
    for f in files {
        let (Some(dir), Some(name)) = (f.parent(), f.file_name().and_then(|n| n.to_str())) else {
            continue;
        };
        // All but the start, whose every digit a `?` stands for (a `*` would take in the files
        // of a series named `NAME-…` too).
        let prefix = series_part(name);
        if !dirs.iter().any(|(d, _)| *d == dir) {
            dirs.push((dir, format!("{prefix}-{}.json", "?".repeat(START_DIGITS))));
        }
    }
    dirs.into_iter()
        .map(|(d, pattern)| format!("{}/{pattern}", latlab_model::units::shell_path(d)))
        .collect()
}

/// A kept file's name without its start: `latlab-unsaved-windows-NAME` of
/// `latlab-unsaved-windows-NAME-START.json`.
fn series_part(name: &str) -> &str {
    name.rsplit_once('-').map_or(name, |(p, _)| p)
}

/// Digits of the start in a kept file's name (unix ns, zero-padded): a name of this series is
/// told from one of a series whose name goes on after it (`h` and `h-2`) by its length.
const START_DIGITS: usize = 19;

/// Whether `file` is a kept file of the series whose files start with `prefix`.
fn is_kept_file(file: &str, prefix: &str) -> bool {
    file.strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(".json"))
        .is_some_and(|start| {
            start.len() == START_DIGITS && start.bytes().all(|b| b.is_ascii_digit())
        })
}

/// What [`Keeper::adopt`] did with the files it was given.
#[derive(Default)]
struct Adopted {
    /// Sets stored from the files, and sets they held that were stored already.
    stored: u64,
    already: u64,
    /// The files stored (and removed).
    files: Vec<PathBuf>,
    /// The files left, each with why.
    left: Vec<(PathBuf, String)>,
    /// The end of the newest set stored.
    newest: Option<u64>,
}

/// What the keeper leaves when it ends.
pub struct KeeperEnd {
    /// The store, unless the file at its path could not be opened as one.
    pub store: Option<Store>,
    /// The series as last opened (a store replaced under the daemon may hold it under another
    /// id).
    pub series: latlab_store::SeriesId,
    /// Window sets that were not stored, and are in no file.
    pub lost: u64,
    /// Window sets the store could not take, and the files that keep them instead (files
    /// `latlab db import-json` stores): those given up to bound the memory while the daemon
    /// ran, then those left at the end; oldest first.
    pub kept: Vec<(u64, PathBuf)>,
    /// Why no file took the window sets left at the end (they count in `lost`).
    pub unkept: Option<String>,
}

/// The store could not be written since `since_unix_ns`, for `reason`.
struct Outage {
    since_unix_ns: u64,
    reason: String,
    /// Window sets kept in memory and stored since it began (a store that takes some and
    /// fails again stores the rest later).
    stored: usize,
}

pub struct Keeper {
    /// `None` while the file at the store's path cannot be opened as a store.
    store: Option<Store>,
    db: PathBuf,
    setup: KeeperSetup,
    pending: BTreeMap<u64, Vec<ClosedWindow>>,
    /// Highest window index each thread has handed over.
    seen: Vec<Option<u64>>,
    samples: VecDeque<(u64, Sample)>,
    start_unix_ns: Option<u64>,
    /// The monotonic instant of `start_unix_ns`.
    start_instant: Option<Instant>,
    cpu_time_mark: u64,
    pub live: Arc<Mutex<LiveStatus>>,
    switcher: Option<Switcher<GovernorTuner>>,
    clock: Box<dyn WallClock>,
    next_merge: Instant,
    backlog: Backlog,
    outage: Option<Outage>,
    next_check: Instant,
    next_hotplug: Instant,
    /// The store's write-ahead log and index as last seen while its file was in place: when the
    /// file goes, they belong to it, not to whatever takes its place.
    sidecars: Vec<(PathBuf, (u64, u64))>,
    /// What the set-up could not do, as the start annotation says it.
    start_warnings: String,
    /// Windows and hours merged by retention steps not said yet: a backlog is said once.
    merged_unsaid: (u64, u64),
    /// The files that keep window sets the store could not take, and how many each holds.
    kept: Vec<(u64, PathBuf)>,
}

/// CPU time of the monitoring itself, ns: every thread of the process (measuring threads, their
/// coordinator, samplers, this thread) except the web server's, whose work depends on how many
/// clients ask.
pub fn process_cpu_time_ns() -> u64 {
    latlab_sys::thread::process_cpu_time_ns().saturating_sub(super::web::web_cpu_time_ns())
}

impl Keeper {
    pub fn new(
        store: Store,
        setup: KeeperSetup,
        live: Arc<Mutex<LiveStatus>>,
        switcher: Option<Switcher<GovernorTuner>>,
        clock: Box<dyn WallClock>,
    ) -> Keeper {
        let threads = setup.threads;
        Keeper {
            db: store.path().to_path_buf(),
            sidecars: store.sidecars(),
            start_warnings: String::new(),
            merged_unsaid: (0, 0),
            kept: Vec::new(),
            backlog: Backlog::new(setup.backlog.0, setup.backlog.1),
            store: Some(store),
            setup,
            pending: BTreeMap::new(),
            seen: vec![None; threads],
            samples: VecDeque::new(),
            start_unix_ns: None,
            start_instant: None,
            cpu_time_mark: process_cpu_time_ns(),
            live,
            switcher,
            clock,
            next_merge: Instant::now(),
            outage: None,
            next_check: Instant::now(),
            next_hotplug: Instant::now(),
        }
    }

    pub fn annotate(&mut self, at_unix_ns: u64, cpu: Option<u32>, kind: &str, text: &str) {
        let a = Annotation {
            at_unix_ns,
            cpu,
            kind: kind.into(),
            text: text.into(),
        };
        let Some(store) = self.store.as_mut() else {
            self.error(format!("annotation {text:?} not stored: no store"));
            return;
        };
        if let Err(e) = store.add_annotation(self.setup.series.id, &a) {
            self.error(format!("storing the annotation {text:?}: {e}"));
        }
    }

    /// The measurement started at `start_unix_ns`: the files an earlier daemon of this series
    /// kept for this store are stored first (after the series' last window, where they were
    /// measured), and the start is said, in the log and as the series' start annotation, with
    /// how the series goes on and the set-up's `warnings`.
    fn started(&mut self, start_unix_ns: u64, warnings: &[String]) {
        let mut text = self.setup.describe.clone();
        let before = self.kept_before();
        let adopted = self.adopt(&before, true);
        if let Some(end) = adopted.newest {
            let last = self.setup.series.last_end_unix_ns.get_or_insert(end);
            *last = (*last).max(end);
        }
        if self.setup.series.resumed {
            eprintln!(
                "latlab: continuing series {} at window {}",
                self.setup.series.name, self.setup.series.next_window_index
            );
        }
        let mut said = Vec::new();
        if !adopted.files.is_empty() {
            let files: Vec<&Path> = adopted.files.iter().map(|p| p.as_path()).collect();
            said.push(format!(
                "{} window set(s) an earlier daemon of this series could not store, kept in {}, \
                 are stored now{}",
                adopted.stored,
                kept_files(&files, files_by_pattern(&files)),
                match adopted.already {
                    0 => String::new(),
                    n => format!(" ({n} more they held were stored already)"),
                }
            ));
        }
        if !adopted.left.is_empty() {
            let left: Vec<String> = adopted
                .left
                .iter()
                .map(|(f, why)| format!("{} ({why})", f.display()))
                .collect();
            said.push(format!(
                "files of window sets of this series left as they are: {}",
                left.join(", ")
            ));
        }
        for s in &said {
            eprintln!("latlab: {s}");
        }
        if let Some(last) = self.setup.series.last_end_unix_ns {
            let gap = latlab_model::units::format_elapsed(start_unix_ns.saturating_sub(last));
            match self.stopped_cleanly() {
                Some(true) => text.push_str(&format!("; continues the series, stopped for {gap}")),
                Some(false) => {
                    let mut why = "the daemon before did not record its stop (killed, crashed, \
                                   or its store could not be written)"
                        .to_string();
                    // A daemon that could not store its last windows wrote them to files, its
                    // open window too; one killed lost them.
                    if before.is_empty() {
                        why.push_str(
                            ": its open window, and any it still kept in memory, were lost",
                        );
                    }
                    eprintln!("latlab: warning: {why}");
                    text.push_str(&format!(
                        "; continues the series after {gap} without a stored window: {why}"
                    ));
                }
                None => text.push_str(&format!("; continues the series after {gap}")),
            }
        }
        for s in said {
            text.push_str(&format!("; {s}"));
        }
        // In the log and in the store, where a series' report reads them.
        for w in warnings {
            eprintln!("latlab: warning: {w}");
            self.start_warnings.push_str(&format!("; warning: {w}"));
        }
        text.push_str(&self.start_warnings);
        self.annotate(start_unix_ns, None, "start", &text);
    }

    fn error(&self, msg: String) {
        eprintln!("latlab: monitor: {msg}");
        if let Ok(mut l) = self.live.lock() {
            l.last_error = Some(msg);
        }
    }

    fn switched(&mut self, switches: Vec<Switch>) {
        for s in switches {
            let text = s.text();
            eprintln!("latlab: {text}");
            self.annotate(s.at_unix_ns, Some(s.cpu), "schedule", &text);
        }
    }

    /// Run until `Finish` (or the channel closes); returns the store for the last annotations.
    pub fn run(mut self, rx: Receiver<Msg>, samples: Receiver<Sample>) -> KeeperEnd {
        // The schedule's setting in force applies from the start.
        if let Some(sw) = self.switcher.as_mut() {
            let s = sw.tick(self.clock.as_ref());
            self.switched(s);
        }
        loop {
            let msg = rx.recv_timeout(Duration::from_millis(200));
            while let Ok(s) = samples.try_recv() {
                let end = self.setup.sample_origin_unix_ns + s.at_ns;
                self.samples.push_back((end, s));
            }
            match msg {
                Ok(Msg::Start {
                    start_unix_ns,
                    start_instant,
                    warnings,
                }) => {
                    self.start_unix_ns = Some(start_unix_ns);
                    self.start_instant = Some(start_instant);
                    self.cpu_time_mark = process_cpu_time_ns();
                    self.started(start_unix_ns, &warnings);
                }
                Ok(Msg::Windows(ws)) => {
                    for w in ws {
                        let t = w.thread as usize;
                        if let Some(seen) = self.seen.get_mut(t) {
                            *seen = Some(seen.map_or(w.index, |s| s.max(w.index)));
                        }
                        self.pending.entry(w.index).or_default().push(w);
                    }
                }
                Ok(Msg::Finish { end_unix_ns }) => {
                    self.flush(Some(end_unix_ns));
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush(Some(super::unix_now_ns()));
                    break;
                }
            }
            self.flush(None);
            if Instant::now() >= self.next_check {
                self.check_store();
                self.next_check = Instant::now() + self.setup.retry_every;
            }
            if Instant::now() >= self.next_hotplug {
                self.check_cpus();
                self.next_hotplug = Instant::now() + Duration::from_secs(1);
            }
            if let Some(sw) = self.switcher.as_mut() {
                let s = sw.tick(self.clock.as_ref());
                self.switched(s);
            }
            if Instant::now() >= self.next_merge {
                // Ageing a backlog of windows goes on in short steps between windows.
                let again = if self.retention() {
                    Duration::from_secs(1)
                } else {
                    self.setup.merge_every
                };
                self.next_merge = Instant::now() + again;
            }
        }
        self.say_merged();
        if let Some(mut sw) = self.switcher.take() {
            let s = sw.restore_all(self.clock.as_ref());
            self.switched(s);
        }
        // A last try for what is parked; what still cannot be stored is lost.
        if !self.backlog.is_empty() {
            self.check_store();
        }
        // Kept in a file for `db import-json` where one takes them, else counted lost; the
        // daemon's exit says which, once.
        let left = self.backlog.iter().filter_map(|p| p.to_set(p.k)).collect();
        let unkept = self.keep(left).err();
        KeeperEnd {
            store: self.store,
            series: self.setup.series.id,
            lost: self.live.lock().map(|l| l.windows_lost).unwrap_or(0),
            kept: self.kept,
            unkept,
        }
    }

    /// Write `sets` to a file for `latlab db import-json` (see [`Keeper::keep_in_file`]) and
    /// count them kept, or else lost. Nothing to write is no error.
    fn keep(&mut self, sets: Vec<WindowSet>) -> Result<(), String> {
        if sets.is_empty() {
            return Ok(());
        }
        let n = sets.len() as u64;
        let kept = self.keep_in_file(sets);
        if let Ok(mut l) = self.live.lock() {
            match kept {
                Ok(_) => l.windows_kept += n,
                Err(_) => l.windows_lost += n,
            }
        }
        self.kept.push((n, kept?));
        Ok(())
    }

    /// Window sets the store cannot take, written to a file beside it or in the temporary
    /// directory, with their series (see [`latlab_store::UnsavedWindows`]).
    fn keep_in_file(&self, sets: Vec<WindowSet>) -> Result<PathBuf, String> {
        let first = sets.first().map_or(0, |s| s.start_unix_ns);
        let unsaved = latlab_store::UnsavedWindows {
            unsaved_windows: self.setup.spec.clone(),
            store: std::path::absolute(&self.db).ok(),
            series_created: Some(self.setup.series.created_at.clone()),
            sets,
        };
        let text = serde_json::to_string(&unsaved).map_err(|e| e.to_string())?;
        let file = format!(
            "{}{first:0START_DIGITS$}.json",
            unsaved_prefix(&self.setup.spec.name)
        );
        latlab_store::rescue_file(&self.db, &file, &text)
    }

    /// Store the window sets kept in `files` for this series and this store, and remove each
    /// file stored. `renumber`: an earlier daemon's sets, numbered on after the series' last
    /// window (this run's then count on after them), taken only from a file written for this
    /// series in this store (not one made again at the path) whose windows come after the
    /// series' last; else this run's own, each at its number in the run. A file left is said
    /// with why; a store that fails stops it.
    fn adopt(&mut self, files: &[PathBuf], renumber: bool) -> Adopted {
        let here = std::path::absolute(&self.db).ok();
        let mut out = Adopted::default();
        let mut failed = None;
        for f in files {
            if let Some(e) = &failed {
                out.left.push((f.clone(), format!("not stored yet: {e}")));
                continue;
            }
            let u = match std::fs::read_to_string(f)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    serde_json::from_str::<latlab_store::UnsavedWindows>(&t)
                        .map_err(|e| e.to_string())
                }) {
                Ok(u) => u,
                Err(e) => {
                    out.left.push((f.clone(), format!("it does not read: {e}")));
                    continue;
                }
            };
            let last_end = self.setup.series.last_end_unix_ns.unwrap_or(0);
            let why_not = if u.unsaved_windows.name != self.setup.spec.name {
                Some(format!("kept for series {}", u.unsaved_windows.name))
            } else if u.store.is_none() {
                Some("it names no store".to_string())
            } else if u.store != here {
                let there = u.store.as_deref().unwrap_or(Path::new("?"));
                Some(format!("kept for the store {}", there.display()))
            } else if renumber && u.series_created.as_ref() != Some(&self.setup.series.created_at) {
                Some("kept for an earlier store at this path".to_string())
            } else if renumber && u.sets.iter().any(|s| s.start_unix_ns < last_end) {
                Some("its windows lie before the series' last stored window".to_string())
            } else {
                None
            };
            if let Some(why) = why_not {
                out.left.push((f.clone(), why));
                continue;
            }
            let Some(store) = self.store.as_mut() else {
                failed = Some("no store".to_string());
                out.left
                    .push((f.clone(), "not stored yet: no store".into()));
                continue;
            };
            let series = self.setup.series.id;
            let base = self.setup.series.next_window_index;
            let result = if renumber {
                store.insert_numbered(series, &u.sets).map(|(first, end)| {
                    self.setup.series.next_window_index = end;
                    end - first
                })
            } else {
                u.sets.iter().try_fold(0, |n, s| {
                    let set = WindowSet {
                        index: base + s.index,
                        ..s.clone()
                    };
                    store
                        .insert_window_set_once(series, &set)
                        .map(|stored| n + u64::from(stored))
                })
            };
            match result {
                Ok(n) => {
                    out.stored += n;
                    out.already += u.sets.len() as u64 - n;
                    out.newest = out.newest.max(u.sets.iter().map(|s| s.end_unix_ns).max());
                    let _ = std::fs::remove_file(f);
                    out.files.push(f.clone());
                }
                Err(e) => {
                    out.left.push((f.clone(), format!("not stored yet: {e}")));
                    failed = Some(e.to_string());
                }
            }
        }
        if let Ok(mut l) = self.live.lock() {
            l.windows_written += out.stored;
        }
        out
    }

    /// The files of window sets an earlier daemon of this series kept when its store could not
    /// take them (beside the store, or in the temporary directory), oldest first.
    fn kept_before(&self) -> Vec<PathBuf> {
        let prefix = unsaved_prefix(&self.setup.spec.name);
        let mut found: Vec<PathBuf> = latlab_store::rescue_dirs(&self.db)
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| is_kept_file(n, &prefix))
            })
            .collect();
        found.sort();
        found.dedup();
        found
    }

    /// Whether the daemon that stored the series' last window recorded its stop: the newest
    /// start or stop of the series is a stop. `None` where the store cannot say (not open, or
    /// its annotations unreadable).
    fn stopped_cleanly(&self) -> Option<bool> {
        let store = self.store.as_ref()?;
        let ann = store
            .annotations(self.setup.series.id, 0, u64::MAX >> 1)
            .ok()?;
        Some(
            ann.into_iter()
                .rev()
                .find(|a| a.kind == "start" || a.kind == "stop")
                .is_some_and(|a| a.kind == "stop"),
        )
    }

    /// The unix time now, counted on the monotonic clock from the measurement's start (the wall
    /// clock may be stepped under the daemon).
    fn now_unix_ns(&self) -> u64 {
        match (self.start_unix_ns, self.start_instant) {
            (Some(u), Some(i)) => u + i.elapsed().as_nanos() as u64,
            _ => super::unix_now_ns(),
        }
    }

    /// Say and mark every measured CPU that went offline or came back.
    fn check_cpus(&mut self) {
        let now = self.now_unix_ns();
        for c in self.setup.hotplug.check(now) {
            eprintln!("latlab: monitor: {}", c.text);
            self.annotate(c.at_unix_ns, Some(c.cpu), "cpu", &c.text);
        }
        // No window older than two is still to be written.
        let keep = now.saturating_sub(2 * self.setup.window_ns);
        self.setup.hotplug.forget_before(keep);
    }

    /// Reopen the store if its file was deleted or replaced, and try the parked sets again.
    fn check_store(&mut self) {
        let fate = self.store.as_ref().map(Store::file_fate);
        // A store renamed away keeps its name in this process's descriptors.
        let renamed = match fate {
            Some(FileFate::Deleted | FileFate::Replaced) => {
                self.store.as_ref().and_then(Store::renamed_to)
            }
            _ => None,
        };
        let event = match fate {
            Some(FileFate::InPlace) if self.outage.is_none() => {
                self.sidecars = self.store.as_ref().map(Store::sidecars).unwrap_or_default();
                return;
            }
            // Left as it is, as another program's file put at the path is: the windows wait in
            // memory until the path holds a store again, or nothing (a new store is made).
            Some(FileFate::WrittenOver) => Some(format!(
                "the store {} was written over in place by another program (it no longer begins \
                 as an SQLite database; what it held is lost unless a copy exists): nothing more \
                 is written into it; windows wait in memory until the path holds a latlab store \
                 again, or nothing (a new store is then made there)",
                self.db.display()
            )),
            _ if renamed.is_some() => Some(format!(
                "the store {} was renamed to {} under the running daemon: its journal goes \
                 with it (the windows it holds stay there); a new store is made at the path \
                 and the series starts again in it",
                self.db.display(),
                renamed.as_deref().unwrap_or(Path::new("")).display()
            )),
            Some(FileFate::Deleted) => Some(format!(
                "the store {} was deleted under the running daemon: a new store is made there \
                 and the series starts again in it",
                self.db.display()
            )),
            Some(FileFate::Replaced) => Some(format!(
                "the store {} was replaced by another file: the series goes on in it if it is \
                 a latlab store",
                self.db.display()
            )),
            Some(FileFate::InPlace) | None => None,
        };
        if let Some(text) = &event {
            eprintln!("latlab: monitor: {text}");
            // Let go of the old file, then move its journal out of the new one's way: SQLite
            // would read the old pages from it into whatever file is now at the path. A file
            // written over is let go of without copying the journal into it on the way.
            match (self.store.take(), fate) {
                (Some(store), Some(FileFate::WrittenOver)) => store.abandon(),
                (store, _) => drop(store),
            }
            self.set_aside_sidecars(renamed.as_deref());
        }
        // A connection that failed may stay failed (a file system remounted read-only): start
        // again from the file at the path.
        self.reopen(event.is_some());
        if let Some(text) = event
            && self.store.is_some()
        {
            let now = self.now_unix_ns();
            // A series begun in the new file says how it is measured, as at a start.
            if !self.setup.series.resumed {
                let describe = format!(
                    "{}; begun in a new store file{}",
                    self.setup.describe, self.start_warnings
                );
                self.annotate(now, None, "start", &describe);
            }
            self.annotate(now, None, "store", &text);
        }
        self.drain();
    }

    /// Move the old store's sidecar files still at their paths out of the new file's way: beside
    /// the old file where it was renamed to (`renamed`), its journal then read with it; else to
    /// `NAME.orphaned` (kept, not deleted: they may hold the last windows written to the old
    /// file), never over an earlier one.
    fn set_aside_sidecars(&mut self, renamed: Option<&Path>) {
        use std::os::unix::fs::MetadataExt;
        for (path, id) in std::mem::take(&mut self.sidecars) {
            let Ok(m) = std::fs::metadata(&path) else {
                continue;
            };
            if (m.dev(), m.ino()) != id {
                continue;
            }
            // `-wal` or `-shm` beside the renamed file, where nothing is there yet.
            let suffix = if path.to_string_lossy().ends_with("-wal") {
                "-wal"
            } else {
                "-shm"
            };
            let beside = renamed
                .map(|r| {
                    let mut p = r.as_os_str().to_os_string();
                    p.push(suffix);
                    PathBuf::from(p)
                })
                .filter(|p| std::fs::symlink_metadata(p).is_err());
            let aside = beside.unwrap_or_else(|| unused_name(&path, ".orphaned"));
            match std::fs::rename(&path, &aside) {
                Ok(()) => eprintln!(
                    "latlab: monitor: {} belonged to the old store: moved to {}",
                    path.display(),
                    aside.display()
                ),
                Err(e) => self.error(format!("cannot move {} aside: {e}", path.display())),
            }
        }
    }

    /// Open the file at the store's path (made if missing) and its series; `new_file`: it is
    /// not the file the series was in (deleted or replaced).
    fn reopen(&mut self, new_file: bool) {
        self.store = None;
        let opened = Store::open(&self.db).and_then(|mut s| {
            s.sync_every_commit()?;
            let series = s.open_series(&self.setup.spec)?;
            Ok((s, series))
        });
        match opened {
            Ok((store, series)) => {
                if series.id != self.setup.series.id || !series.resumed {
                    eprintln!(
                        "latlab: monitor: series {} {} in {}",
                        series.name,
                        if series.resumed {
                            "continues"
                        } else {
                            "starts"
                        },
                        self.db.display()
                    );
                }
                if let Ok(mut l) = self.live.lock() {
                    l.series_id = series.id.0;
                }
                // Windows keep their number in this run. In the same file the stored index
                // counts on as before; in another file it counts from the series found there.
                let base = if new_file {
                    series.next_window_index
                } else {
                    self.setup.series.next_window_index
                };
                self.setup.series = SeriesState {
                    next_window_index: base,
                    ..series
                };
                self.sidecars = store.sidecars();
                self.store = Some(store);
            }
            Err(e) => self.failing(format!("cannot open {}: {e}", self.db.display())),
        }
    }

    /// The store failed for `reason`: said when the outage begins (the retries that fail
    /// after it say nothing; the status page shows the latest reason).
    fn failing(&mut self, reason: String) {
        if self.outage.is_some() {
            if let Ok(mut l) = self.live.lock() {
                l.last_error = Some(format!("the store cannot be written: {reason}"));
            }
            return;
        }
        self.error(format!(
            "the store cannot be written ({reason}); windows are kept in memory (the last hour \
             at least) and stored when it can be"
        ));
        self.outage = Some(Outage {
            since_unix_ns: self.now_unix_ns(),
            reason,
            stored: 0,
        });
    }

    /// Store the parked sets, oldest first, while the store takes them.
    fn drain(&mut self) {
        if self.store.is_none() {
            return;
        }
        while let Some(p) = self.backlog.front() {
            let k = p.k;
            let set = p.to_set(self.setup.series.next_window_index + k);
            match set.map(|s| self.insert(&s)) {
                Some(Ok(())) => {
                    self.backlog.pop_front();
                    if let Some(o) = self.outage.as_mut() {
                        o.stored += 1;
                    }
                }
                Some(Err(e)) if e.is_storage_failure() => {
                    self.failing(e.to_string());
                    self.queued();
                    return;
                }
                Some(Err(e)) => {
                    self.backlog.pop_front();
                    self.lost(format!("window {k} not stored: {e}"));
                }
                None => {
                    self.backlog.pop_front();
                    self.lost(format!(
                        "window {k} not stored: its histogram did not decode"
                    ));
                }
            }
        }
        self.queued();
        // What went to files past the memory's bound is stored from them, in its place (each
        // set keeps its number in this run), and the files go.
        let own: Vec<PathBuf> = self.kept.iter().map(|(_, p)| p.clone()).collect();
        let adopted = self.adopt(&own, false).files;
        let from_files: u64 = self
            .kept
            .iter()
            .filter(|(_, p)| adopted.contains(p))
            .map(|(n, _)| n)
            .sum();
        self.kept.retain(|(_, p)| !adopted.contains(p));
        if let Ok(mut l) = self.live.lock() {
            l.windows_kept = l.windows_kept.saturating_sub(from_files);
        }
        if let Some(o) = self.outage.take() {
            let left: u64 = self.kept.iter().map(|(n, _)| n).sum();
            let files: Vec<&Path> = self.kept.iter().map(|(_, p)| p.as_path()).collect();
            let text = format!(
                "the store could not be written for {} ({}): {} window set(s) were kept \
                 in memory and are now stored{}{}",
                format_duration(
                    self.now_unix_ns().saturating_sub(o.since_unix_ns) / 1_000_000_000
                        * 1_000_000_000
                ),
                o.reason,
                o.stored,
                match from_files {
                    0 => String::new(),
                    n => format!(
                        "; {n} older one(s), written to files to bound the memory, are stored \
                         from them now"
                    ),
                },
                match left {
                    0 => String::new(),
                    n => format!(
                        "; {n} wait still in {}",
                        kept_files(&files, files_by_pattern(&files))
                    ),
                }
            );
            eprintln!("latlab: monitor: {text}");
            if let Ok(mut l) = self.live.lock() {
                l.last_error = None;
            }
            self.backlog.given_up = 0;
            self.annotate(o.since_unix_ns, None, "store", &text);
        }
    }

    fn insert(&mut self, set: &WindowSet) -> latlab_store::Result<()> {
        let store = self
            .store
            .as_mut()
            .ok_or_else(|| latlab_store::StoreError::Missing(self.db.clone()))?;
        store.insert_window_set(self.setup.series.id, set)?;
        if let Ok(mut l) = self.live.lock() {
            l.windows_written += 1;
            l.last_window_end_ms = Some(crate::api::ms(set.end_unix_ns));
        }
        Ok(())
    }

    /// Whether the store's path still names the file it has open.
    fn in_place(&self) -> bool {
        self.store
            .as_ref()
            .is_some_and(|s| s.file_fate() == FileFate::InPlace)
    }

    /// Keep `set` (window `k` of this run) for when the store can be written again.
    /// Beyond the backlog's bound the oldest sets go to a file, said each time (stored from it
    /// when the store can be written again), or are lost, said once an outage.
    fn park(&mut self, k: u64, set: WindowSet) {
        self.backlog.push(Parked::new(k, set));
        self.queued();
        if !self.backlog.over() {
            return;
        }
        // The store may take them again (the space came back since its last retry).
        self.check_store();
        let given_up = self.backlog.give_up();
        self.queued();
        if given_up.is_empty() {
            return;
        }
        let n = given_up.len() as u64;
        let (keep_ns, bytes) = self.setup.backlog;
        let bound = format!(
            "the windows kept in memory reached their bound ({} beyond the last {})",
            match bytes {
                b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
                b => latlab_model::units::plural(b as u64, "byte", "bytes"),
            },
            format_duration(keep_ns)
        );
        match self.keep(given_up.iter().filter_map(|p| p.to_set(p.k)).collect()) {
            Ok(()) => {
                let path = self.kept.last().map(|(_, p)| p.clone()).unwrap_or_default();
                self.error(format!(
                    "{bound}: the oldest {} kept in {}, and stored from it when the store can \
                     be written again",
                    match n {
                        1 => "window set is".to_string(),
                        n => format!("{n} window sets are"),
                    },
                    path.display(),
                ));
            }
            Err(why) if self.backlog.given_up == n => {
                self.error(format!(
                    "{bound}: the oldest {} are given up, and lost: no file could keep them \
                     ({why}); those given up after them are counted in \
                     latlab_monitor_windows_lost_total",
                    latlab_model::units::plural(n, "window set", "window sets"),
                ));
            }
            Err(_) => {}
        }
    }

    /// Tell the status page how much waits for the store.
    fn queued(&self) {
        if let Ok(mut l) = self.live.lock() {
            l.windows_queued = self.backlog.len() as u64;
            l.queued_bytes = self.backlog.bytes() as u64;
        }
    }

    fn lost(&mut self, msg: String) {
        if let Ok(mut l) = self.live.lock() {
            l.windows_lost += 1;
        }
        self.error(msg);
    }

    /// Merge windows older than the retention into hourly rows, and keep the histograms of
    /// windows older than [`FULL_RESOLUTION_NS`] at [`COARSE_SHIFT`], [`AGE_BATCH`] at a time.
    /// True when more windows wait to be coarsened.
    pub fn retention(&mut self) -> bool {
        let now = super::unix_now_ns();
        let series = self.setup.series.id;
        let Some(store) = self.store.as_mut() else {
            return false;
        };
        let step = retention_step(store, series, now, self.setup.retention_ns);
        let more = step.more();
        match step.merged {
            Ok(m) => {
                self.merged_unsaid.0 += m.sets_merged;
                self.merged_unsaid.1 += m.hours;
            }
            Err(e) => self.error(format!("retention merge: {e}")),
        }
        if let Err(e) = step.aged {
            self.error(format!("retention: coarsening old histograms: {e}"));
        }
        if !more {
            self.say_merged();
        }
        more
    }

    /// Say what the retention steps since the last time merged (a backlog of hours in one line).
    fn say_merged(&mut self) {
        let (sets, hours) = std::mem::take(&mut self.merged_unsaid);
        if hours > 0 {
            eprintln!(
                "latlab: retention: merged {sets} windows into {hours} hourly row{}",
                if hours == 1 { "" } else { "s" }
            );
        }
    }

    /// Write every window set that is complete (all threads past it and, unless finishing, its
    /// time over and its samples in).
    fn flush(&mut self, finish: Option<u64>) {
        let Some(start) = self.start_unix_ns else {
            return;
        };
        let w = self.setup.window_ns;
        let done_to = self.seen.iter().map(|s| s.unwrap_or(0)).min().unwrap_or(0);
        let all_seen = self.seen.iter().all(Option::is_some);
        let now = self.now_unix_ns();
        let wait = (self.setup.sample_period_ns + 50_000_000).min(w / 4);
        let newest_sample = self.samples.back().map_or(0, |(e, _)| *e);
        let ready: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|&k| {
                if finish.is_some() {
                    return true;
                }
                let end = start + (k + 1) * w;
                all_seen
                    && k <= done_to
                    && now >= end
                    && (newest_sample >= end || now >= end + wait)
            })
            .collect();
        for k in ready {
            let Some(windows) = self.pending.remove(&k) else {
                continue;
            };
            let set_start = start + k * w;
            let mut set_end = set_start + w;
            if let Some(f) = finish {
                set_end = set_end.min(f);
            }
            if set_end <= set_start {
                continue;
            }
            self.write(k, set_start, set_end, windows);
        }
    }

    fn write(&mut self, k: u64, start: u64, end: u64, windows: Vec<ClosedWindow>) {
        let run_start = self.start_unix_ns.unwrap_or(start);
        let in_window: Vec<Sample> = self
            .samples
            .iter()
            .filter(|(e, _)| *e > start && *e <= end)
            .map(|(_, s)| s.clone())
            .collect();
        while self.samples.front().is_some_and(|(e, _)| *e <= end) {
            self.samples.pop_front();
        }
        let summary = latlab_sys::sample::summarize(&in_window);
        let hotplug = &self.setup.hotplug;
        let cpus: Vec<MonitorWindow> = windows
            .into_iter()
            // A CPU offline during the window: its thread measured elsewhere.
            .filter(|cw| hotplug.measured(cw.cpu.unwrap_or(cw.thread), start, end))
            .map(|cw| {
                let cpu = cw.cpu.unwrap_or(cw.thread);
                MonitorWindow {
                    cpu,
                    cpu_summary: summary.cpus.iter().find(|c| c.cpu == cpu as usize).cloned(),
                    spikes: cw
                        .spikes
                        .iter()
                        .map(|s| MonitorSpike {
                            at_unix_ns: run_start + s.at_ns,
                            value_ns: s.value_ns,
                        })
                        .collect(),
                    histogram: cw.histogram,
                    missed: cw.missed,
                }
            })
            .collect();
        let power = (!self.setup.power_names.is_empty()).then(|| {
            self.setup
                .power_names
                .iter()
                .zip(summary.power.iter().chain(std::iter::repeat(&(None, None))))
                .map(|(name, (avg_w, energy_j))| PowerSource {
                    name: name.clone(),
                    avg_w: *avg_w,
                    energy_j: *energy_j,
                    wraps: 0,
                })
                .collect()
        });
        let thermal = summary.thermal(&self.setup.thermal_names);
        let now_cpu = process_cpu_time_ns();
        let cost = now_cpu.saturating_sub(self.cpu_time_mark);
        self.cpu_time_mark = now_cpu;
        let set = WindowSet {
            index: self.setup.series.next_window_index + k,
            start_unix_ns: start,
            end_unix_ns: end,
            cpus,
            power,
            thermal: (!thermal.is_empty()).then_some(thermal),
            cost_cpu_time_ns: Some(cost),
        };
        if let Ok(mut l) = self.live.lock() {
            l.measured = Some(crate::metrics::Measured::of(&set, self.setup.window_ns));
        }
        if self.outage.is_some() || !self.backlog.is_empty() {
            self.park(k, set);
            return;
        }
        // The file deleted, renamed or replaced since the last check: the set goes to the file
        // at the path once it is opened, not to one no one will read.
        if !self.in_place() {
            self.park(k, set);
            self.check_store();
            return;
        }
        match self.insert(&set) {
            // Moved while it was written: it may be in the old file only; stored again.
            Ok(()) if !self.in_place() => {
                if let Ok(mut l) = self.live.lock() {
                    l.windows_written = l.windows_written.saturating_sub(1);
                }
                self.park(k, set);
                self.check_store();
            }
            Ok(()) => {}
            Err(e) if e.is_storage_failure() => {
                self.failing(e.to_string());
                self.park(k, set);
            }
            Err(e) => self.lost(format!("window {} not stored: {e}", set.index)),
        }
    }
}

/// `PATH` + `suffix`, or with `.1`, `.2`, … after it where that is taken.
fn unused_name(path: &Path, suffix: &str) -> PathBuf {
    let base = |n: u32| {
        let mut p = path.as_os_str().to_os_string();
        p.push(suffix);
        if n > 0 {
            p.push(format!(".{n}"));
        }
        PathBuf::from(p)
    };
    (0..)
        .map(base)
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| base(0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// A second file set aside never replaces the first (it may hold the only copy of windows).
    #[test]
    fn a_name_set_aside_is_never_taken_twice() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("m.db-wal");
        let name = |p| super::unused_name(p, ".orphaned");
        assert_eq!(name(&wal), dir.path().join("m.db-wal.orphaned"));
        std::fs::write(dir.path().join("m.db-wal.orphaned"), "1").unwrap();
        assert_eq!(name(&wal), dir.path().join("m.db-wal.orphaned.1"));
        std::fs::write(dir.path().join("m.db-wal.orphaned.1"), "2").unwrap();
        assert_eq!(name(&wal), dir.path().join("m.db-wal.orphaned.2"));
    }

    /// Up to three kept files are named one by one; more by a pattern a directory, in a
    /// command a shell runs as printed (a directory with a space quoted, the pattern bare).
    #[test]
    fn kept_files_are_named_one_by_one_or_by_their_pattern() {
        // A series' files, and not those of a series whose name goes on after its own.
        let prefix = super::unsaved_prefix("h");
        assert!(super::is_kept_file(
            "latlab-unsaved-windows-h-1795923271514534369.json",
            &prefix
        ));
        for other in [
            "latlab-unsaved-windows-h-2-1795923271514534369.json",
            "latlab-unsaved-windows-h-x1795923271514534369.json",
            "latlab-unsaved-windows-h-1795923271514534369.json.tmp",
        ] {
            assert!(!super::is_kept_file(other, &prefix), "{other}");
        }
        let file = |dir: &str, start: u64| {
            std::path::PathBuf::from(format!("{dir}/latlab-unsaved-windows-h.1-{start:019}.json"))
        };
        let few = [file("/var/lib", 10), file("/tmp/my dir", 20)];
        let few: Vec<&std::path::Path> = few.iter().map(|p| p.as_path()).collect();
        assert_eq!(
            super::kept_files(&few, false),
            "/var/lib/latlab-unsaved-windows-h.1-0000000000000000010.json, \
             /tmp/my dir/latlab-unsaved-windows-h.1-0000000000000000020.json"
        );
        assert_eq!(
            super::import_command(&few, false),
            "latlab db import-json /var/lib/latlab-unsaved-windows-h.1-0000000000000000010.json \
             '/tmp/my dir/latlab-unsaved-windows-h.1-0000000000000000020.json'"
        );
        let many: Vec<_> = (1..=4)
            .map(|i| file("/var/lib", i))
            .chain([file("/tmp/my dir", 9)])
            .collect();
        let many: Vec<&std::path::Path> = many.iter().map(|p| p.as_path()).collect();
        assert_eq!(
            super::kept_files(&many, true),
            "5 files, /var/lib/latlab-unsaved-windows-h.1-???????????????????.json and \
             '/tmp/my dir'/latlab-unsaved-windows-h.1-???????????????????.json"
        );
        assert_eq!(
            super::import_command(&many, true),
            "latlab db import-json /var/lib/latlab-unsaved-windows-h.1-???????????????????.json \
             '/tmp/my dir'/latlab-unsaved-windows-h.1-???????????????????.json"
        );
    }

    /// Many files are said by their pattern only where it names no other file: one of another
    /// store, or that does not read, left in the same directory.
    #[test]
    fn a_pattern_stands_for_the_files_only_where_it_names_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<std::path::PathBuf> = (1..=4)
            .map(|i| {
                let f = dir
                    .path()
                    .join(format!("latlab-unsaved-windows-t-{i:019}.json"));
                std::fs::write(&f, "{}").unwrap();
                f
            })
            .collect();
        let paths: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
        // Another series' file matches no pattern of `t`.
        std::fs::write(
            dir.path()
                .join("latlab-unsaved-windows-t-2-0000000000000000009.json"),
            "{}",
        )
        .unwrap();
        assert!(super::files_by_pattern(&paths));
        assert!(!super::files_by_pattern(&paths[..3]), "three are listed");
        std::fs::write(
            dir.path()
                .join("latlab-unsaved-windows-t-0000000000000000009.json"),
            "{garbage",
        )
        .unwrap();
        assert!(!super::files_by_pattern(&paths));
    }
}
