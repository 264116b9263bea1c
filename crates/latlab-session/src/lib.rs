//! One measurement from set-up to a complete result: the engine (`latlab-measure`) with what
//! runs beside it — samplers, loads or a load schedule, a tuning profile held for the run, the
//! kernel tracer and its spike stories — started in order, always stopped, and put together into
//! one [`RunResult`]. `latlab measure`, each cell of `latlab run` and the monitor share it.

mod trace;

use anyhow::Context;
use latlab_measure::{MeasureError, StopSignal};
use latlab_model::units::CpuList;
use latlab_model::{MeasureConfig, RunResult};
use latlab_sys::Sys;
use latlab_sys::unix_now_ns;
use std::path::PathBuf;
use std::sync::Arc;

/// How a measurement ended badly: `Usage` is bad input found only when it ran (exit code 2 in
/// the CLI), `Failed` anything else.
#[derive(Debug)]
pub enum Error {
    Usage(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::Failed(e)
    }
}

/// One line: the bad input as said, or the failure with its causes.
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(m) => f.write_str(m),
            Error::Failed(e) => write!(f, "{e:#}"),
        }
    }
}

impl From<MeasureError> for Error {
    fn from(e: MeasureError) -> Self {
        match e {
            MeasureError::Invalid(m) => Error::Usage(m),
            MeasureError::Setup(m) => Error::Failed(anyhow::anyhow!(m)),
        }
    }
}

/// A measurement checked and ready to run: the engine's configuration and everything that runs
/// beside it. `latlab measure` and every cell of `latlab run` build one and call [`Measurement::run`].
pub struct Measurement {
    pub cfg: MeasureConfig,
    /// The online CPUs when it was checked.
    pub online: CpuList,
    /// The samplers' period; `None`: no samplers.
    pub sample_period_ns: Option<u64>,
    /// Loads started before measuring and stopped after it (without a schedule).
    pub loads: Vec<latlab_load::LoadSpec>,
    pub schedule: Option<latlab_load::Schedule>,
    pub load_options: latlab_load::LoadOptions,
    /// A profile held for the run, with the directory of its journal.
    pub profile: Option<(latlab_tune::Profile, PathBuf)>,
    pub trace: Option<latlab_trace::TraceConfig>,
}

/// A load refused as bad input, or failing.
pub fn load_error(e: latlab_load::LoadError) -> Error {
    if e.is_usage() {
        Error::Usage(e.to_string())
    } else {
        Error::Failed(anyhow::anyhow!("{e}"))
    }
}

/// [`load_error`] for the value of one option: a usage error names the option and its value
/// (`--load "gpu": unknown load kind …`).
pub fn option_load_error(flag: &str, value: &str, e: latlab_load::LoadError) -> Error {
    match load_error(e) {
        Error::Usage(m) => Error::Usage(format!("{flag} {value:?}: {m}")),
        other => other,
    }
}

/// Loads under way: a set started before measuring, or a schedule of phases.
enum RunningLoads {
    None,
    Set(latlab_load::LoadSet),
    Schedule(latlab_load::ScheduleRunner),
}

impl RunningLoads {
    fn stop(self) -> latlab_model::load::Loads {
        match self {
            RunningLoads::None => Default::default(),
            RunningLoads::Set(set) => latlab_model::load::Loads {
                reports: set.stop(),
                phases: Vec::new(),
            },
            RunningLoads::Schedule(runner) => runner.stop(),
        }
    }
}

impl Measurement {
    /// The online CPUs not measured, where latlab's own threads go (none when threads are
    /// unpinned).
    pub fn housekeeping(&self) -> Vec<u32> {
        match &self.cfg.cpus {
            Some(measured) => self.online.except(measured),
            None => Vec::new(),
        }
    }

    /// Run it with its samplers (and loads, profile and tracer), always stopping what it
    /// started: the one place a complete [`RunResult`] is made.
    pub fn run(
        &self,
        sys: &Sys,
        stop: Arc<StopSignal>,
        observer: &mut dyn FnMut(&latlab_measure::Live),
    ) -> Result<RunResult, Error> {
        run(self, sys, stop, observer)
    }
}

/// Loads under way, and the raise that keeps the calling thread on time beside them.
struct Beside {
    loads: RunningLoads,
    /// Held until the loads have stopped.
    on_time: Option<latlab_sys::thread::RaisedPolicy>,
    /// Why the thread could not be raised, if so.
    late: Option<String>,
}

/// Raise the calling thread above the loads' real-time threads, then start the loads (a set, or
/// a schedule of phases).
fn start_loads(p: &Measurement) -> Result<Beside, Error> {
    // Beside real-time loads this thread, which ends the measurement and stops the loads, runs
    // above them from before they start (the threads it starts begin at normal priority; the
    // measuring threads are given their policy as they start).
    let mut specs = p.loads.clone();
    specs.extend(p.schedule.iter().flat_map(|s| s.specs()));
    let (on_time, late) = match latlab_load::keep_time_beside(&specs) {
        Ok(guard) => (guard, None),
        Err(e) => (
            None,
            Some(format!(
                "this run may end late: latlab could not raise its coordinator above the \
                 real-time loads ({e})"
            )),
        ),
    };
    // Loads start first so the measurement sees them from its first period.
    let loads = match &p.schedule {
        Some(schedule) => RunningLoads::Schedule(
            latlab_load::ScheduleRunner::start(
                schedule,
                &p.load_options,
                std::time::Instant::now(),
            )
            .map_err(load_error)?,
        ),
        None if !p.loads.is_empty() => RunningLoads::Set(
            latlab_load::LoadSet::start(&p.loads, &p.load_options).map_err(load_error)?,
        ),
        None => RunningLoads::None,
    };
    Ok(Beside {
        loads,
        on_time,
        late,
    })
}

/// What runs beside a measurement, started just before it measures: the loads, then the
/// samplers (with the Unix time of their origin); why they could not start, if so.
#[derive(Default)]
struct Alongside {
    beside: Option<Beside>,
    sampler: Option<(latlab_sys::sample::SamplerThread, u64)>,
    refused: Option<Error>,
}

impl Alongside {
    fn start(&mut self, p: &Measurement, sys: &Sys, housekeeping: &[u32]) -> Result<(), String> {
        let started = start_loads(p).and_then(|b| {
            self.beside = Some(b);
            let Some(period) = p.sample_period_ns else {
                return Ok(());
            };
            let origin = (std::time::Instant::now(), unix_now_ns());
            let thread = latlab_sys::sample::SamplerThread::spawn(
                sys,
                std::time::Duration::from_nanos(period),
                housekeeping,
                origin.0,
            )
            .context("starting the samplers")?;
            self.sampler = Some((thread, origin.1));
            Ok(())
        });
        started.map_err(|e| {
            let text = e.to_string();
            self.refused = Some(e);
            text
        })
    }
}

fn run(
    p: &Measurement,
    sys: &Sys,
    stop: Arc<StopSignal>,
    observer: &mut dyn FnMut(&latlab_measure::Live),
) -> Result<RunResult, Error> {
    let cfg = &p.cfg;
    let housekeeping = p.housekeeping();
    // The tracer starts before anything is changed: when it cannot, nothing was touched.
    let trace = match &p.trace {
        None => None,
        Some(tc) => {
            let t = trace::MeasureTrace::start(
                tc,
                cfg.clock,
                cfg.spike_threshold_ns.map(|_| cfg.spike_limit),
                housekeeping.clone(),
            )
            .map_err(|e| Error::Failed(anyhow::anyhow!("--trace: {e}")))?;
            for line in latlab_trace::skipped_lines(t.skipped()) {
                eprintln!("latlab: trace: skipped {line}");
            }
            Some(t)
        }
    };
    // What a killed process left behind goes back first, as the monitor does it.
    let mut stale = None;
    if let Some((_, state_dir)) = &p.profile {
        stale = latlab_tune::restore_stale(sys, state_dir)
            .map_err(|e| {
                Error::Failed(anyhow::anyhow!(
                    "a tuning left behind could not be restored: {e}"
                ))
            })?
            .map(|r| r.stale_line());
        if let Some(line) = &stale {
            eprintln!("latlab: {line}");
        }
    }
    // The profile goes first and is restored last (also on errors and panics: the guard).
    let tuning = match &p.profile {
        // Per-CPU settings (and a realtime profile's isolated CPUs) are the measured CPUs.
        Some((profile, state_dir)) => Some(
            latlab_tune::TemporaryTuning::apply(
                sys,
                profile,
                cfg.cpus
                    .as_ref()
                    .map(|c| latlab_model::units::CpuList::from_cpus(c.clone()))
                    .as_ref(),
                state_dir,
            )
            .map_err(|e| Error::Failed(anyhow::anyhow!("applying the profile: {e}")))?,
        ),
        None => None,
    };
    // The loads start once the measuring threads are set up and the measurement's memory is
    // locked (not the loads'), just before measuring; the samplers start last and end first:
    // their series covers the measuring, not the loads' start and stop around it.
    let mut along = Alongside::default();
    let mut start_beside = || along.start(p, sys, &housekeeping);
    let hook = trace.as_ref().and_then(|t| t.hook());
    let mut result = latlab_measure::run_hooked(
        cfg,
        sys,
        stop,
        observer,
        None,
        hook,
        Some(&mut start_beside),
    )
    .map_err(|e| along.refused.take().unwrap_or_else(|| Error::from(e)));
    let Alongside {
        beside,
        mut sampler,
        ..
    } = along;
    if let Some((thread, _)) = &mut sampler {
        thread.end();
    }
    // The loads stop first, while this thread still runs above them.
    let (loads, on_time, late) = match beside {
        Some(Beside {
            loads,
            on_time,
            late,
        }) => (loads.stop(), on_time, late),
        None => (RunningLoads::None.stop(), None, None),
    };
    drop(on_time);
    let traced = trace.map(|t| t.finish(result.as_mut().ok()));
    let samples = sampler.map(|(thread, origin_unix_ns)| (thread.stop(), origin_unix_ns));
    let mut notes = Vec::new();
    let tuning = tuning.map(|guard| restore_tuning(guard, sys, &mut notes));
    let mut result = result?;
    result.environment.warnings.extend(stale);
    result.environment.warnings.extend(late);
    result.environment.warnings.extend(notes);
    result.loads = loads;
    if let Some(s) = &p.schedule
        && s.total_ns() > result.elapsed_ns
    {
        // Said, not silent: the phases that fall after the end did not run.
        result.environment.warnings.push(format!(
            "the load schedule lasts {} but the run ended after {}: the phases from there on \
             did not run",
            latlab_model::units::format_duration(s.total_ns()),
            latlab_model::units::format_elapsed(result.elapsed_ns)
        ));
    }
    match traced {
        Some(Ok(t)) => result.trace = Some(t),
        Some(Err(e)) => result
            .environment
            .warnings
            .push(format!("reading the trace failed: {e}")),
        None => {}
    }
    if let (Some((record, restored)), Some((_, state_dir))) = (tuning, &p.profile) {
        // The profile's /dev/cpu_dma_latency request was held too: the lower request rules.
        record.note_in(&mut result.environment);
        let restore = latlab_tune::restore_command(sys, state_dir);
        match restored {
            Ok(report) if report.failures().is_empty() => {}
            Ok(report) => result.environment.warnings.push(format!(
                "restoring the profile left {} value(s) changed; run `{restore}`",
                report.failures().len()
            )),
            Err(e) => result.environment.warnings.push(format!(
                "restoring the profile failed ({e}); run `{restore}`"
            )),
        }
    }
    if let Some((mut samples, origin_unix_ns)) = samples {
        // Sample times count from the start of measuring, like windows and spikes.
        for s in &mut samples.series {
            s.at_ns = (s.at_ns + origin_unix_ns).saturating_sub(result.start_unix_ns);
        }
        let taken = samples.series.len() as u64;
        result.environment.warnings.extend(samplers_held_off(
            taken,
            samples.period_ns,
            result.elapsed_ns,
        ));
        result.samples = Some(samples);
    }
    Ok(result)
}

/// Said where the samplers took fewer than half the samples their period asks over the run (at
/// least four due): their thread runs at normal priority, and a real-time load can hold it off
/// the CPUs, so each reading spans more time than the period (a run beside rt-hog on every CPU
/// took 7 where 20 were due).
fn samplers_held_off(taken: u64, period_ns: u64, elapsed_ns: u64) -> Option<String> {
    let due = elapsed_ns / period_ns.max(1);
    (due >= 4 && taken * 2 < due).then(|| {
        format!(
            "the samplers took {taken} samples where about {due} were due: their thread, at \
             normal priority, was held off the CPUs (by real-time threads, as a real-time load's), \
             so each reading spans more than the period of {}",
            latlab_model::units::format_duration(period_ns)
        )
    })
}

/// Put back a profile held for a run: its record and what the restore did. `notes` gets what the
/// run should say of it: writes that changed nothing here (the run measured less of the profile
/// than it names), and a tree tuned in place of this machine.
fn restore_tuning(
    guard: latlab_tune::TuningGuard,
    sys: &Sys,
    notes: &mut Vec<String>,
) -> (
    latlab_tune::TuningRecord,
    Result<latlab_tune::RestoreReport, latlab_tune::TuneError>,
) {
    let record = guard.record();
    if let Some(cpus) = &guard.applied().plan.disable_ignored {
        notes.push(format!(
            "profile {}: the idle states it disables on CPUs {cpus} are ignored by the \
             haltpoll governor, which halts as before (a resume latency or \
             /dev/cpu_dma_latency limit of 0 makes it poll)",
            record.profile
        ));
    }
    // A tree cannot be measured: this machine was, untuned (--sysroot is for tests).
    if !sys.is_live() {
        notes.push(format!(
            "profile {} was applied to the system under --sysroot {}, not to this machine, \
             which was measured",
            record.profile,
            latlab_model::units::shell_path(sys.root())
        ));
    }
    let restored = guard.restore();
    (record, restored)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::samplers_held_off;

    #[test]
    fn samplers_held_off_are_said_where_they_took_under_half_their_samples() {
        let ms = 1_000_000;
        let said = samplers_held_off(7, 100 * ms, 2_000 * ms).unwrap();
        assert!(
            said.starts_with("the samplers took 7 samples where about 20 were due"),
            "{said}"
        );
        assert!(said.ends_with("the period of 100ms"), "{said}");
        // Half or more, or a run too short to tell: nothing to say.
        assert_eq!(samplers_held_off(10, 100 * ms, 2_000 * ms), None);
        assert_eq!(samplers_held_off(1, 100 * ms, 300 * ms), None);
    }
}
