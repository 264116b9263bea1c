//! Schedules: phases of loads one after another, e.g. `"idle 30s, memory 30s, io:bs=1M 30s,
//! procfs 30s"`, run by a [`ScheduleRunner`] that records where each phase began and ended.
//!
//! Grammar: `PHASE {"," PHASE}` with `PHASE = (SPEC | "idle") WHITESPACE DURATION`. A comma
//! ends a phase only after its duration, so specs keep their own commas
//! (`io:bs=1M,fsync=true 30s, idle 10s`); commas inside quotes never split.

use crate::{LoadError, LoadOptions, LoadSet, LoadSpec, offset_ns};
use latlab_model::load::{LoadPhase, LoadReport, Loads};
use latlab_model::units::parse_duration;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SCHEDULE_FORM: &str = "phases LOAD DURATION separated by commas, LOAD a spec or idle, e.g. \"idle 30s, memory 30s, io:bs=1M 30s\"";

/// One phase: a load (or none) for a while.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulePhase {
    /// `None` for `idle`.
    pub spec: Option<LoadSpec>,
    pub duration_ns: u64,
}

impl SchedulePhase {
    /// The phase's load as written, or `idle`.
    pub fn label(&self) -> &str {
        self.spec.as_ref().map_or("idle", |s| s.text())
    }
}

/// Phases run one after another.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub phases: Vec<SchedulePhase>,
}

impl Schedule {
    /// The sum of the phases' durations.
    pub fn total_ns(&self) -> u64 {
        self.phases
            .iter()
            .fold(0u64, |t, p| t.saturating_add(p.duration_ns))
    }

    /// The load specs of the phases (idle phases left out).
    pub fn specs(&self) -> Vec<LoadSpec> {
        self.phases.iter().filter_map(|p| p.spec.clone()).collect()
    }
}

/// Whether `piece` ends with whitespace and a duration: then it is a whole phase.
fn split_phase(piece: &str) -> Option<(&str, u64)> {
    let t = piece.trim();
    let (load, dur) = t.rsplit_once(char::is_whitespace)?;
    let ns = parse_duration(dur, None).ok()?;
    Some((load.trim(), ns))
}

/// Parse a schedule (pure). Every phase must name a load (or `idle`) and a duration with a unit.
pub fn parse_schedule(text: &str) -> Result<Schedule, LoadError> {
    parse_schedule_named("schedule", text)
}

/// [`parse_schedule`] with errors that begin with `name` (the option that gave the text)
/// instead of "schedule": `--load-schedule "bogus 1s": phase "bogus 1s": unknown load kind …`.
pub fn parse_schedule_named(name: &str, text: &str) -> Result<Schedule, LoadError> {
    let bad = |problem: String| {
        LoadError::Invalid(format!(
            "{name} {:?}: {problem} (accepted: {SCHEDULE_FORM})",
            text.trim()
        ))
    };
    // Split at commas outside quotes that follow a complete phase.
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (',', None) if current.trim().is_empty() => {
                return Err(bad("an empty phase".into()));
            }
            (q, Some(open)) if q == open => quote = None,
            (',', None) if split_phase(&current).is_some() => {
                pieces.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if quote.is_some() {
        return Err(bad("a quote is not closed".into()));
    }
    if !current.trim().is_empty() || pieces.is_empty() {
        pieces.push(current);
    }
    let mut phases = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        let p = piece.trim();
        if p.is_empty() {
            return Err(bad("an empty phase".into()));
        }
        let Some((load, ns)) = split_phase(p) else {
            let last = p.rsplit(char::is_whitespace).next().unwrap_or(p);
            let why = if p.contains(char::is_whitespace) {
                match parse_duration(last, None) {
                    Err(e) => format!("phase {p:?}: {}", e.problem),
                    Ok(_) => format!("phase {p:?} is not LOAD DURATION"),
                }
            } else {
                format!("phase {p:?} has no duration")
            };
            return Err(bad(why));
        };
        if ns == 0 {
            return Err(bad(format!("phase {p:?} lasts 0")));
        }
        let spec = if load == "idle" {
            None
        } else {
            Some(LoadSpec::parse(load).map_err(|e| match e {
                LoadError::Invalid(m) => {
                    // A phase may also be idle.
                    let m = if m.starts_with("unknown load kind") {
                        m.replacen("(accepted: ", "(accepted: idle, ", 1)
                    } else {
                        m
                    };
                    LoadError::Invalid(format!("{name} {:?}: phase {p:?}: {m}", text.trim()))
                }
                other => other,
            })?)
        };
        phases.push(SchedulePhase {
            spec,
            duration_ns: ns,
        });
    }
    Ok(Schedule { phases })
}

/// The stop request of a runner: a flag and a condition variable to wake it.
type StopCell = Arc<(Mutex<bool>, Condvar)>;

/// Runs a [`Schedule`] on its own thread: each phase's loads start at the phase's start and
/// stop at its end; after the last phase nothing runs. [`ScheduleRunner::stop`] ends the phase
/// under way and returns every report and phase boundary; dropping the runner stops it too.
pub struct ScheduleRunner {
    stop: StopCell,
    thread: Option<JoinHandle<Loads>>,
}

impl std::fmt::Debug for ScheduleRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleRunner")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl ScheduleRunner {
    /// Check every phase's load (CPU set, `supported`), start the first phase now and the rest
    /// at their times. Phase boundaries and report start times are offsets from `origin` (the
    /// start of measuring). A first phase that cannot start is an error; a later one that
    /// cannot is recorded as a report with the reason in its warnings, and its time stays idle.
    pub fn start(
        schedule: &Schedule,
        opts: &LoadOptions,
        origin: Instant,
    ) -> Result<ScheduleRunner, LoadError> {
        if schedule.phases.is_empty() {
            return Err(LoadError::Invalid(format!(
                "an empty schedule (accepted: {SCHEDULE_FORM})"
            )));
        }
        LoadSet::check(&schedule.specs(), opts)?;
        let stop: StopCell = Arc::new((Mutex::new(false), Condvar::new()));
        let (phases, opts, cell) = (schedule.phases.clone(), opts.clone(), stop.clone());
        // The thread starts every phase, the first too: raised above a phase of real-time
        // threads before they start, it is never starved by them.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ll-schedule".into())
            .spawn(move || run(&phases, &opts, origin, &cell, ready_tx))
            .map_err(|e| LoadError::Start {
                kind: "schedule".into(),
                message: format!("starting its thread: {e}"),
            })?;
        let mut runner = ScheduleRunner {
            stop,
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(runner),
            Ok(Err(e)) => {
                let _ = runner.stop_inner();
                Err(e)
            }
            Err(_) => {
                let _ = runner.stop_inner();
                Err(LoadError::Start {
                    kind: "schedule".into(),
                    message: "its thread ended before the first phase started".into(),
                })
            }
        }
    }

    /// Whether every phase has run.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// End the phase under way (if any) and return the reports and the phase boundaries of the
    /// phases that began.
    pub fn stop(mut self) -> Loads {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Loads {
        let (lock, cv) = &*self.stop;
        if let Ok(mut s) = lock.lock() {
            *s = true;
        }
        cv.notify_all();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ScheduleRunner {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Wait until `deadline` or a stop request; true when asked to stop.
fn wait_until(cell: &StopCell, deadline: Instant) -> bool {
    let (lock, cv) = &**cell;
    let Ok(mut stopped) = lock.lock() else {
        return true;
    };
    loop {
        if *stopped {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        match cv.wait_timeout(stopped, deadline - now) {
            Ok((g, _)) => stopped = g,
            Err(_) => return true,
        }
    }
}

/// The runner's thread: each phase started and stopped in turn. Whether the first phase started
/// goes to `ready`: a first phase that cannot start ends the schedule with its error.
fn run(
    phases: &[crate::SchedulePhase],
    opts: &LoadOptions,
    origin: Instant,
    cell: &StopCell,
    ready: std::sync::mpsc::Sender<Result<(), LoadError>>,
) -> Loads {
    let mut loads = Loads::default();
    let mut deadline = Instant::now();
    for (index, phase) in phases.iter().enumerate() {
        // On time beside a phase of real-time threads, and at normal priority again before the
        // next phase starts. Refused only where the phase cannot start either: its watchdog
        // runs at the same priority.
        let on_time = crate::keep_time_beside(phase.spec.as_slice())
            .ok()
            .flatten();
        let phase_start = Instant::now();
        let mut running = match &phase.spec {
            None => None,
            Some(spec) => match LoadSet::start(std::slice::from_ref(spec), opts) {
                Ok(set) => Some(set),
                Err(e) if index == 0 => {
                    let _ = ready.send(Err(e));
                    return loads;
                }
                Err(e) => {
                    loads.reports.push(LoadReport {
                        spec: spec.text().to_string(),
                        kind: spec.kind().to_string(),
                        cpus: None,
                        workers: 0,
                        started_ns: offset_ns(origin, phase_start),
                        elapsed_ns: 0,
                        throughput: Vec::new(),
                        warnings: vec![format!("phase {index} did not run: {e}")],
                        failed: None,
                    });
                    None
                }
            },
        };
        if index == 0 {
            deadline = phase_start;
            let _ = ready.send(Ok(()));
        }
        deadline += Duration::from_nanos(phase.duration_ns);
        let stopped = wait_until(cell, deadline);
        if let Some(set) = running.take() {
            for mut r in set.stop() {
                r.started_ns = offset_ns(origin, phase_start);
                loads.reports.push(r);
            }
        }
        drop(on_time);
        loads.phases.push(LoadPhase {
            index,
            spec: phase.label().to_string(),
            start_ns: offset_ns(origin, phase_start),
            end_ns: offset_ns(origin, Instant::now()),
        });
        if stopped {
            break;
        }
    }
    loads
}
