//! latlab's kernel tracer: how long the kernel's deferred work, interrupts, timers and wake-ups
//! take, measured with eBPF on tracepoints, and the story behind each latency spike.
//!
//! The BPF programs are C (`bpf/trace.bpf.c`), compiled by `scripts/build-bpf.sh` into
//! `bpf/trace.bpf.o`, which is committed and embedded here, so building latlab needs no C
//! compiler. They are relocated (CO-RE) against the running kernel's BTF when loaded.
//!
//! What is measured (see [`EventGroup`] and [`Family`](latlab_model::trace::Family)):
//! workqueue queue → execute latency and execution time per work function; softirq raise →
//! entry latency and run time per vector; tasklet run time; kthread work queue → execute latency
//! and execution time; wake-up → run latency (all tasks, real-time only, or one process); hrtimer
//! handler duration per callback; local timer interrupt duration; hard IRQ handler duration per
//! IRQ. Samples are aggregated in the kernel, per CPU, into buckets that are exactly the buckets
//! of the shared [`latlab_hist::Histogram`] ([`buckets`]), so the results convert without loss.
//!
//! Use:
//! ```no_run
//! use latlab_trace::{TraceConfig, Tracer};
//! let tracer = Tracer::start(&TraceConfig::default())?;
//! std::thread::sleep(std::time::Duration::from_secs(5));
//! let result = tracer.finish()?; // latlab_model::trace::TraceResult
//! # Ok::<(), latlab_trace::TraceError>(())
//! ```
//!
//! Spike stories: with [`TraceConfig::ring`] set, every CPU keeps a ring of its last 4096
//! events (IRQ, softirq, tasklet, hrtimer, local timer and work item runs with their durations;
//! context switches with the task switched out, how long it ran and the task switched in).
//! [`RingReader::story`] turns the ring of one CPU and an interval (`CLOCK_MONOTONIC` ns, see
//! [`monotonic_ns`]) into a [`SpikeStory`](latlab_model::trace::SpikeStory): what ran, for how
//! long, and which task held the CPU; its `summary` tells it in one line. The ring holds a few
//! hundred milliseconds to a few seconds of a CPU's history, so stories must be read soon
//! after the spike: measuring threads hand requests to a [`StoryCollector`] through a
//! non-blocking, allocation-free [`StorySender`], and its thread reads the ring at once.
//!
//! Needs root (or CAP_BPF with CAP_PERFMON), kernel BTF (`/sys/kernel/btf/vmlinux`), and for
//! the workqueue, kthread and tasklet events tracefs — mounted for the run in a private mount
//! namespace when it is not mounted, so the system is left as it was. The kernel's BPF run-time
//! statistics are on only while tracing, and report latlab's own cost per program.

pub mod buckets;
pub mod collector;
pub mod env;
pub mod events;
pub mod layout;
pub mod names;
pub mod story;
mod tracer;

pub use collector::{Collected, StoryCollector, StorySender, TaggedStory};
pub use events::EventGroup;
pub use tracer::{RingReader, TraceConfig, Tracer, monotonic_ns};

/// Why tracing cannot start or read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "tracing needs root, or the capabilities CAP_BPF and CAP_PERFMON (this process has {have})"
    )]
    NoPrivilege { have: String },
    #[error(
        "kernel BTF is missing ({}): tracing needs a kernel built with CONFIG_DEBUG_INFO_BTF",
        env::BTF_PATH
    )]
    NoBtf,
    #[error("kernel BTF cannot be read (/sys/kernel/btf/vmlinux): {0}")]
    Btf(String),
    #[error("none of the requested events can be traced here: {0}")]
    NothingTraced(String),
    #[error("invalid trace configuration: {0}")]
    Config(String),
    #[error("loading the BPF programs failed: {0}")]
    Load(String),
    #[error("reading the BPF maps failed: {0}")]
    Read(String),
}

/// Skipped events, one line per group and reason: `group: reason (event, event)`.
pub fn skipped_lines(skipped: &[latlab_model::trace::SkippedEvent]) -> Vec<String> {
    let mut lines: Vec<(String, String, Vec<String>)> = Vec::new();
    for s in skipped {
        match lines
            .iter_mut()
            .find(|(g, r, _)| *g == s.group && *r == s.reason)
        {
            Some((_, _, events)) => events.push(s.event.clone()),
            None => lines.push((s.group.clone(), s.reason.clone(), vec![s.event.clone()])),
        }
    }
    lines
        .into_iter()
        .map(|(g, r, e)| format!("{g}: {r} ({})", e.join(", ")))
        .collect()
}
