//! `latlab measure --trace`: the kernel tracer beside a measurement, and with `--spike` the
//! story of each spike, read from the traced CPU's ring of recent events while it still holds
//! the spike's interval.

use latlab_measure::SpikeHook;
use latlab_model::trace::TraceResult;
use latlab_model::{Clock, RunResult};
use latlab_trace::{StoryCollector, StorySender, TraceConfig, TraceError, Tracer};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Stories waiting to be read at once; more arriving in a burst are counted as missed.
const STORY_QUEUE: usize = 1024;

/// Bits of a story tag that hold the spike's time (ns after the run's start: 78 hours).
const AT_BITS: u32 = 48;

/// The tag of a spike: its thread and its time after the run's start.
fn tag(thread: u32, at_ns: u64) -> u64 {
    (u64::from(thread) << AT_BITS) | (at_ns & ((1 << AT_BITS) - 1))
}

/// Hands each spike to the story collector; runs in the measuring thread's slow path, so it
/// neither blocks nor allocates.
struct StoryHook {
    sender: StorySender,
    /// `CLOCK_MONOTONIC` minus the run's clock, ns (0 for a monotonic run).
    offset: i128,
    /// Requests allowed (the run's spike limit) and made.
    limit: u64,
    requested: AtomicU64,
}

impl SpikeHook for StoryHook {
    fn spike(&self, thread: u32, at_ns: u64, from: u64, to: u64) {
        if self.requested.fetch_add(1, Ordering::Relaxed) >= self.limit {
            return;
        }
        // SAFETY: no arguments; returns the CPU this thread runs on, where the spike happened.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return;
        }
        let mono = |t: u64| (i128::from(t) + self.offset).max(0) as u64;
        self.sender
            .request(tag(thread, at_ns), cpu as u32, mono(from), mono(to));
    }
}

/// The tracer of one measurement.
pub struct MeasureTrace {
    tracer: Tracer,
    stories: Option<(StoryCollector, Arc<StoryHook>)>,
}

impl MeasureTrace {
    /// Start tracing; with `spike_limit` (a spike threshold is set) also keep each CPU's ring
    /// and a collector thread (on `housekeeping` CPUs when there are any) that tells stories.
    pub fn start(
        config: &TraceConfig,
        clock: Clock,
        spike_limit: Option<u32>,
        housekeeping: Vec<u32>,
    ) -> Result<MeasureTrace, TraceError> {
        let config = TraceConfig {
            ring: spike_limit.is_some(),
            ..config.clone()
        };
        let tracer = Tracer::start(&config)?;
        let stories = match spike_limit {
            None => None,
            Some(limit) => {
                let (collector, sender) = StoryCollector::start(
                    tracer.ring_reader()?,
                    STORY_QUEUE,
                    housekeeping.to_vec(),
                )
                .map_err(|e| TraceError::Load(format!("cannot start the story thread: {e}")))?;
                let offset = match clock {
                    Clock::Monotonic => 0,
                    Clock::Realtime => {
                        let realtime = i128::from(latlab_sys::unix_now_ns());
                        i128::from(latlab_trace::monotonic_ns()) - realtime
                    }
                };
                let hook = Arc::new(StoryHook {
                    sender,
                    offset,
                    limit: u64::from(limit),
                    requested: AtomicU64::new(0),
                });
                Some((collector, hook))
            }
        };
        Ok(MeasureTrace { tracer, stories })
    }

    /// Events this kernel cannot trace, one line each.
    pub fn skipped(&self) -> &[latlab_model::trace::SkippedEvent] {
        self.tracer.skipped()
    }

    /// What the measuring threads tell of their spikes.
    pub fn hook(&self) -> Option<Arc<dyn SpikeHook>> {
        self.stories
            .as_ref()
            .map(|(_, h)| h.clone() as Arc<dyn SpikeHook>)
    }

    /// Stop tracing: the histograms, and the stories given to the spikes they belong to.
    pub fn finish(self, result: Option<&mut RunResult>) -> Result<TraceResult, TraceError> {
        let collected = self.stories.map(|(collector, hook)| {
            drop(hook);
            collector.finish()
        });
        let mut trace = self.tracer.finish()?;
        if let (Some(collected), Some(result)) = (collected, result) {
            let mut by_tag: HashMap<u64, latlab_model::trace::SpikeStory> = collected
                .stories
                .into_iter()
                .map(|s| (s.tag, s.story))
                .collect();
            let mut told = 0u64;
            let tids: Vec<Option<u32>> = result
                .threads
                .iter()
                .map(|t| u32::try_from(t.tid).ok().filter(|&tid| tid > 0))
                .collect();
            for s in &mut result.spikes.kept {
                s.story = by_tag.remove(&tag(s.thread, s.at_ns)).map(|mut story| {
                    story.measuring_tid = tids.get(s.thread as usize).copied().flatten();
                    story
                });
                told += u64::from(s.story.is_some());
            }
            let untold = result.spikes.kept.len() as u64 - told;
            if untold > 0 {
                trace.warnings.push(format!(
                    "{untold} of {} kept spikes have no story ({} requests were not served: \
                     more spikes at once than the story queue holds, or the ring unreadable)",
                    result.spikes.kept.len(),
                    collected.missed
                ));
            }
            let incomplete = result
                .spikes
                .kept
                .iter()
                .filter(|s| s.story.as_ref().is_some_and(|st| !st.complete))
                .count();
            if incomplete > 0 {
                trace.warnings.push(format!(
                    "{incomplete} spike stories are incomplete: the CPU's ring had already \
                     overwritten the start of their interval"
                ));
            }
        }
        Ok(trace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_tell_threads_and_times_apart() {
        assert_ne!(tag(0, 5), tag(1, 5));
        assert_ne!(tag(1, 5), tag(1, 6));
        assert_eq!(tag(3, 1_000_000_000) >> AT_BITS, 3);
        // 78 hours in ns fit without touching the thread bits.
        assert_eq!(tag(0, (1 << AT_BITS) - 1) >> AT_BITS, 0);
    }
}
