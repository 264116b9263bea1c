//! Kernel-side latencies traced with eBPF (`latlab trace`, `latlab measure --trace`), and the
//! spike stories told from them.
//!
//! Every latency or duration is a [`Histogram`] in nanoseconds, per family (what is measured),
//! per CPU and per key (the work function, softirq vector, IRQ, timer callback or task class it
//! belongs to). Events this kernel cannot trace are listed in [`TraceResult::skipped`] with the
//! reason, and the tracer's own cost (BPF run time per program, from the kernel's BPF
//! statistics) is in [`TraceResult::cost`]. Times of spike stories are `CLOCK_MONOTONIC`
//! nanoseconds, the clock of `bpf_ktime_get_ns`.

use crate::StopReason;
use crate::SystemInfo;
use latlab_hist::Histogram;
use serde::{Deserialize, Serialize};

/// The value of [`TraceRun::schema`].
pub const TRACE_SCHEMA: &str = "latlab.trace";
/// The version of the trace document this build writes.
pub const TRACE_SCHEMA_VERSION: u32 = 1;

/// What a histogram measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Workqueue: `workqueue_queue_work` → `workqueue_execute_start`, by work function.
    WorkqueueLatency,
    /// Workqueue: `workqueue_execute_start` → `workqueue_execute_end` (wall time), by function.
    WorkqueueExecution,
    /// Softirq: first `softirq_raise` → `softirq_entry`, by vector.
    SoftirqLatency,
    /// Softirq: `softirq_entry` → `softirq_exit`, by vector.
    SoftirqRuntime,
    /// Tasklet: `tasklet_entry` → `tasklet_exit`, by tasklet function.
    TaskletRuntime,
    /// Kthread work: `sched_kthread_work_queue_work` → `execute_start`, by work function.
    KthreadLatency,
    /// Kthread work: `sched_kthread_work_execute_start` → `execute_end`, by work function.
    KthreadExecution,
    /// Wake-up → run: `sched_waking` (or `sched_wakeup_new`) → `sched_switch` to the task, by
    /// scheduling class (`other`, `rt`, `deadline`).
    Wakeup,
    /// hrtimer handler: `hrtimer_expire_entry` → `hrtimer_expire_exit`, by callback.
    Hrtimer,
    /// Local timer interrupt: `local_timer_entry` → `local_timer_exit` (x86).
    LocalTimer,
    /// Hard IRQ handler: `irq_handler_entry` → `irq_handler_exit`, by IRQ.
    Hardirq,
}

impl Family {
    pub const ALL: [Family; 11] = [
        Family::WorkqueueLatency,
        Family::WorkqueueExecution,
        Family::SoftirqLatency,
        Family::SoftirqRuntime,
        Family::TaskletRuntime,
        Family::KthreadLatency,
        Family::KthreadExecution,
        Family::Wakeup,
        Family::Hrtimer,
        Family::LocalTimer,
        Family::Hardirq,
    ];

    /// The name used in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            Family::WorkqueueLatency => "workqueue-latency",
            Family::WorkqueueExecution => "workqueue-execution",
            Family::SoftirqLatency => "softirq-latency",
            Family::SoftirqRuntime => "softirq-runtime",
            Family::TaskletRuntime => "tasklet-runtime",
            Family::KthreadLatency => "kthread-latency",
            Family::KthreadExecution => "kthread-execution",
            Family::Wakeup => "wakeup",
            Family::Hrtimer => "hrtimer",
            Family::LocalTimer => "local-timer",
            Family::Hardirq => "hardirq",
        }
    }

    /// What is measured, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Family::WorkqueueLatency => "workqueue: queue -> execute",
            Family::WorkqueueExecution => "workqueue: execution time",
            Family::SoftirqLatency => "softirq: raise -> entry",
            Family::SoftirqRuntime => "softirq: run time",
            Family::TaskletRuntime => "tasklet: run time",
            Family::KthreadLatency => "kthread work: queue -> execute",
            Family::KthreadExecution => "kthread work: execution time",
            Family::Wakeup => "wake-up -> run",
            Family::Hrtimer => "hrtimer handler duration",
            Family::LocalTimer => "local timer interrupt duration",
            Family::Hardirq => "hard IRQ handler duration",
        }
    }

    /// What the keys of this family are.
    pub fn key_kind(self) -> &'static str {
        match self {
            Family::WorkqueueLatency
            | Family::WorkqueueExecution
            | Family::KthreadLatency
            | Family::KthreadExecution => "work function",
            Family::SoftirqLatency | Family::SoftirqRuntime => "vector",
            Family::TaskletRuntime => "tasklet function",
            Family::Wakeup => "class",
            Family::Hrtimer => "callback",
            Family::LocalTimer => "vector",
            Family::Hardirq => "irq",
        }
    }
}

/// One histogram of one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuHistogram {
    pub cpu: u32,
    pub histogram: Histogram,
}

/// One key of a family (a work function, a vector, an IRQ, a callback, a task class).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyResult {
    /// The raw key: a kernel address for functions, else the vector, IRQ or class number.
    pub key: u64,
    /// A readable name: the kernel symbol (from `/proc/kallsyms`), vector or IRQ name.
    pub name: String,
    /// Every CPU together.
    pub histogram: Histogram,
    /// Samples and maximum per CPU (CPUs with samples only).
    pub per_cpu: Vec<CpuCount>,
}

/// How many samples of a key one CPU saw, and the largest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCount {
    pub cpu: u32,
    pub count: u64,
    pub max_ns: u64,
}

/// Everything traced of one family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyResult {
    pub family: Family,
    /// Every key and CPU together.
    pub histogram: Histogram,
    /// Every key together, per CPU (the CPU the event ended on; CPUs with samples only).
    pub per_cpu: Vec<CpuHistogram>,
    /// Per key, most samples first.
    pub keys: Vec<KeyResult>,
    /// Samples lost because the in-kernel maps were full (0 in a healthy run).
    #[serde(default)]
    pub dropped: u64,
}

/// A tracepoint this run could not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedEvent {
    /// The event group asked for (`workqueue`, `softirq`, `tasklet`, …).
    pub group: String,
    /// `category:event`.
    pub event: String,
    pub reason: String,
}

/// The run time of one BPF program, from the kernel's BPF statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCost {
    pub program: String,
    /// `category:event` it is attached to.
    pub event: String,
    pub run_count: u64,
    pub run_time_ns: u64,
    /// Runs the kernel skipped because another BPF program was running on that CPU (kernels
    /// that report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_misses: Option<u64>,
}

/// latlab's own cost while tracing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceCost {
    /// How the statistics were enabled (`BPF_ENABLE_STATS`, or the sysctl
    /// `kernel.bpf_stats_enabled` set for the run and restored), or why there are none.
    pub source: String,
    /// Whether the numbers below are real (false: statistics could not be enabled).
    pub available: bool,
    pub programs: Vec<ProgramCost>,
    /// Sum over programs.
    pub run_count: u64,
    pub run_time_ns: u64,
    /// `run_time_ns` as a fraction of every online CPU's time over the run (0.01 = 1 %): the
    /// programs run on every CPU, whichever CPUs their filter keeps events of.
    pub cpu_fraction: f64,
}

/// The wake-up filter of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupFilter {
    /// Only tasks with a real-time or deadline priority.
    #[serde(default)]
    pub rt_only: bool,
    /// Only this process (thread group) or thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
}

/// The result of tracing: `latlab trace`, or the `trace` of a measurement with `--trace`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceResult {
    /// Event groups asked for.
    pub events: Vec<String>,
    /// CPUs whose events were recorded.
    pub cpus: Vec<u32>,
    #[serde(default)]
    pub wakeup_filter: WakeupFilter,
    /// `CLOCK_MONOTONIC` when the programs were attached and when they were read.
    pub start_monotonic_ns: u64,
    pub end_monotonic_ns: u64,
    /// Length of the traced interval.
    pub elapsed_ns: u64,
    /// Families with their histograms, in [`Family::ALL`] order.
    pub families: Vec<FamilyResult>,
    /// Events not traced, with the reason.
    #[serde(default)]
    pub skipped: Vec<SkippedEvent>,
    pub cost: TraceCost,
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl TraceResult {
    pub fn family(&self, family: Family) -> Option<&FamilyResult> {
        self.families.iter().find(|f| f.family == family)
    }
}

/// The document `latlab trace --json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRun {
    /// Always [`TRACE_SCHEMA`].
    pub schema: String,
    pub schema_version: u32,
    pub latlab_version: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub ended_at: String,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    pub stop: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemInfo>,
    pub trace: TraceResult,
}

/// What an entry of a spike story is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoryKind {
    Hardirq,
    Softirq,
    Tasklet,
    Hrtimer,
    LocalTimer,
    /// A workqueue item executed by a kworker.
    Work,
    /// A kthread work item.
    KthreadWork,
    /// A task ran on the CPU (from one context switch to the next).
    Task,
}

impl StoryKind {
    pub fn name(self) -> &'static str {
        match self {
            StoryKind::Hardirq => "hardirq",
            StoryKind::Softirq => "softirq",
            StoryKind::Tasklet => "tasklet",
            StoryKind::Hrtimer => "hrtimer",
            StoryKind::LocalTimer => "local-timer",
            StoryKind::Work => "work",
            StoryKind::KthreadWork => "kthread-work",
            StoryKind::Task => "task",
        }
    }
}

/// One thing that ran on the CPU during a spike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoryEvent {
    pub kind: StoryKind,
    /// When it started, `CLOCK_MONOTONIC` ns (may be before the story's `from_ns`).
    pub start_ns: u64,
    pub duration_ns: u64,
    /// The part of the duration inside the story's interval.
    pub overlap_ns: u64,
    /// IRQ name, softirq vector, function symbol, or `comm[pid]` of a task.
    pub name: String,
    /// For tasks: the pid, and how the slice ended (`preempted by …`, `slept, … ran next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Time per kind inside the interval (nested events count in each kind: a hard IRQ inside a
/// task's slice counts for both).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoryTotals {
    pub hardirq_ns: u64,
    pub softirq_ns: u64,
    pub tasklet_ns: u64,
    pub hrtimer_ns: u64,
    pub local_timer_ns: u64,
    pub work_ns: u64,
    pub kthread_work_ns: u64,
}

/// Time a task held the CPU inside the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoryTask {
    pub pid: u32,
    pub comm: String,
    pub ran_ns: u64,
}

/// What the kernel did on one CPU during an interval: the decomposition of a spike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpikeStory {
    pub cpu: u32,
    /// The interval, `CLOCK_MONOTONIC` ns (for a timer spike: the expiry to the thread running).
    pub from_ns: u64,
    pub to_ns: u64,
    /// False when the ring had already overwritten events of the interval (read it sooner or
    /// the story misses its beginning).
    pub complete: bool,
    /// Every event overlapping the interval, by start time.
    pub events: Vec<StoryEvent>,
    pub totals: StoryTotals,
    /// Tasks that held the CPU inside the interval, longest first.
    pub tasks: Vec<StoryTask>,
    /// The thread id of the measuring thread whose spike this is, where known (stories stored
    /// before it was kept know the thread by its name alone, which another latlab measuring
    /// the same CPU shares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measuring_tid: Option<u32>,
}

impl SpikeStory {
    /// One line telling the story: the interval; when the first interrupt arrived (a late
    /// timer interrupt on an idle CPU is a delay outside the kernel's view: idle-state exit,
    /// hardware or hypervisor); then what took the time, largest first (tasks, the idle task,
    /// interrupt-side work summed by name), at most [`SUMMARY_PARTS`] of them.
    pub fn summary(&self) -> String {
        let us = |ns: u64| format!("{}us", crate::units::format_us(ns, 1));
        let mut parts: Vec<(u64, String)> = Vec::new();
        // The CPU's own measuring thread, on the CPU past its deadline: it had not gone back to
        // sleep from its last period, time the kernel did not see pass.
        // Switched in only inside the interval, its time there is its way from the switch back
        // to reading its clock, no stall.
        let own = measuring_thread_name(&format!("cpu{}", self.cpu));
        for t in &self.tasks {
            let first = self
                .events
                .iter()
                .filter(|e| e.kind == StoryKind::Task && e.pid == Some(t.pid))
                .map(|e| e.start_ns)
                .min();
            // Another task (or the idle task) on the CPU inside the interval: the kernel saw
            // the thread switched out and back.
            let others = self
                .events
                .iter()
                .any(|e| e.kind == StoryKind::Task && e.pid != Some(t.pid) && e.overlap_ns > 0);
            let why = match first {
                _ if t.comm != own => String::new(),
                // Named as this run's thread, and another: a second latlab on this CPU.
                _ if self.measuring_tid.is_some_and(|tid| tid != t.pid) => {
                    " (not this run's: another latlab measuring on this CPU)".to_string()
                }
                Some(at) if at > self.from_ns => format!(
                    " (the measuring thread itself, from its switch to the CPU at +{} to reading \
                     its clock)",
                    us(at - self.from_ns)
                ),
                _ if others => " (the measuring thread itself, before and after the tasks that \
                                took the CPU from it)"
                    .to_string(),
                _ => " (the measuring thread itself, still running from its last period: a \
                      stall the kernel did not see, such as the host preempting this VM or an \
                      SMI)"
                    .to_string(),
            };
            parts.push((
                t.ran_ns,
                format!("task {}[{}] {}{why}", t.comm, t.pid, us(t.ran_ns)),
            ));
        }
        let idle: u64 = self
            .events
            .iter()
            .filter(|e| e.kind == StoryKind::Task && e.pid == Some(0))
            .map(|e| e.overlap_ns)
            .sum();
        if idle > 0 {
            parts.push((idle, format!("idle {}", us(idle))));
        }
        let mut by_name: std::collections::BTreeMap<(&'static str, &str), u64> = Default::default();
        for e in &self.events {
            if e.kind != StoryKind::Task {
                *by_name.entry((e.kind.name(), e.name.as_str())).or_default() += e.overlap_ns;
            }
        }
        for ((kind, name), ns) in by_name {
            parts.push((ns, format!("{kind} {name} {}", us(ns))));
        }
        parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut line = format!(
            "cpu{} {}:",
            self.cpu,
            us(self.to_ns.saturating_sub(self.from_ns))
        );
        let first_irq = self
            .events
            .iter()
            .filter(|e| matches!(e.kind, StoryKind::Hardirq | StoryKind::LocalTimer))
            .filter(|e| e.start_ns + e.duration_ns >= self.from_ns && e.start_ns <= self.to_ns)
            .map(|e| e.start_ns.max(self.from_ns))
            .min();
        if let Some(t) = first_irq {
            line.push_str(&format!(" first interrupt at +{};", us(t - self.from_ns)));
        }
        if parts.is_empty() {
            line.push_str(" nothing recorded");
        }
        for (i, (_, p)) in parts.iter().take(SUMMARY_PARTS).enumerate() {
            line.push_str(if i == 0 { " " } else { ", " });
            line.push_str(p);
        }
        if parts.len() > SUMMARY_PARTS {
            let rest: u64 = parts[SUMMARY_PARTS..].iter().map(|p| p.0).sum();
            line.push_str(&format!(
                ", {} more {}",
                parts.len() - SUMMARY_PARTS,
                us(rest)
            ));
        }
        if !self.complete {
            line.push_str(" (incomplete: older events were overwritten)");
        }
        line
    }
}

/// The name (`comm`) of the measuring thread labelled `label` (`cpu3`, `thread0`).
pub fn measuring_thread_name(label: &str) -> String {
    format!("latlab-{label}")
}

/// Most parts [`SpikeStory::summary`] names; the rest are counted.
pub const SUMMARY_PARTS: usize = 8;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn hist(values: &[u64]) -> Histogram {
        let h: Histogram = values.iter().copied().collect();
        h
    }

    fn sample() -> TraceResult {
        TraceResult {
            events: vec!["workqueue".into(), "tasklet".into()],
            cpus: vec![0, 1],
            wakeup_filter: WakeupFilter {
                rt_only: true,
                pid: Some(42),
            },
            start_monotonic_ns: 10,
            end_monotonic_ns: 1_000_000_010,
            elapsed_ns: 1_000_000_000,
            families: vec![FamilyResult {
                family: Family::WorkqueueLatency,
                histogram: hist(&[1500, 2500, 1_000_000]),
                per_cpu: vec![CpuHistogram {
                    cpu: 1,
                    histogram: hist(&[1500, 2500, 1_000_000]),
                }],
                keys: vec![KeyResult {
                    key: 0xffff_ffff_8100_1000,
                    name: "vmstat_update".into(),
                    histogram: hist(&[1500, 2500, 1_000_000]),
                    per_cpu: vec![CpuCount {
                        cpu: 1,
                        count: 3,
                        max_ns: 1_000_000,
                    }],
                }],
                dropped: 0,
            }],
            skipped: vec![SkippedEvent {
                group: "tasklet".into(),
                event: "irq:tasklet_entry".into(),
                reason: "tracepoint not in this kernel".into(),
            }],
            cost: TraceCost {
                source: "BPF_ENABLE_STATS".into(),
                available: true,
                programs: vec![ProgramCost {
                    program: "wq_start".into(),
                    event: "workqueue:workqueue_execute_start".into(),
                    run_count: 3,
                    run_time_ns: 900,
                    recursion_misses: Some(0),
                }],
                run_count: 3,
                run_time_ns: 900,
                cpu_fraction: 4.5e-7,
            },
            warnings: vec![],
        }
    }

    #[test]
    fn a_trace_result_round_trips_through_json() {
        let r = sample();
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert!(text.contains("\"family\": \"workqueue-latency\""), "{text}");
        let back: TraceResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.family(Family::WorkqueueLatency).unwrap().keys.len(), 1);
        assert!(back.family(Family::Hardirq).is_none());
    }

    #[test]
    fn a_run_result_carries_its_trace_and_older_files_read_without_one() {
        let mut run = crate::tests::sample_result();
        let text = run.to_json_pretty();
        assert!(!text.contains("\"trace\""), "absent when not traced");
        assert_eq!(crate::RunResult::from_json(&text).unwrap().trace, None);
        run.trace = Some(sample());
        let back = crate::RunResult::from_json(&run.to_json_pretty()).unwrap();
        assert_eq!(back.trace, Some(sample()));
    }

    #[test]
    fn family_names_are_their_json_names() {
        for f in Family::ALL {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
            assert!(!f.describe().is_empty() && !f.key_kind().is_empty());
        }
        let story = SpikeStory {
            cpu: 1,
            from_ns: 5,
            to_ns: 9,
            complete: true,
            events: vec![StoryEvent {
                kind: StoryKind::Task,
                start_ns: 4,
                duration_ns: 5,
                overlap_ns: 4,
                name: "hog[7]".into(),
                pid: Some(7),
                detail: "preempted by cyclic[8]".into(),
            }],
            totals: StoryTotals::default(),
            tasks: vec![StoryTask {
                pid: 7,
                comm: "hog".into(),
                ran_ns: 4,
            }],
            measuring_tid: Some(7),
        };
        let back: SpikeStory =
            serde_json::from_str(&serde_json::to_string(&story).unwrap()).unwrap();
        assert_eq!(back, story);
    }

    fn line_has_itself(line: &str) -> bool {
        line.contains("task latlab-cpu1[7] 290.0us (the measuring thread itself")
    }

    fn story_event(kind: StoryKind, start: u64, dur: u64, overlap: u64, name: &str) -> StoryEvent {
        StoryEvent {
            kind,
            start_ns: start,
            duration_ns: dur,
            overlap_ns: overlap,
            name: name.into(),
            pid: (kind == StoryKind::Task).then_some(if name == "idle" { 0 } else { 9 }),
            detail: String::new(),
        }
    }

    #[test]
    fn a_summary_names_the_late_interrupt_the_idle_time_and_the_largest_parts() {
        let mut s = SpikeStory {
            cpu: 1,
            from_ns: 1_000_000,
            to_ns: 1_300_000,
            complete: true,
            events: vec![
                story_event(StoryKind::Task, 0, 1_290_000, 290_000, "idle"),
                story_event(
                    StoryKind::LocalTimer,
                    1_256_000,
                    28_000,
                    28_000,
                    "local timer",
                ),
                story_event(
                    StoryKind::Hrtimer,
                    1_258_000,
                    7_000,
                    7_000,
                    "hrtimer_wakeup",
                ),
            ],
            totals: StoryTotals::default(),
            tasks: vec![],
            measuring_tid: None,
        };
        assert_eq!(
            s.summary(),
            "cpu1 300.0us: first interrupt at +256.0us; idle 290.0us, local-timer local timer \
             28.0us, hrtimer hrtimer_wakeup 7.0us"
        );
        // Many parts: the largest are named, the rest counted.
        s.tasks = (0..12)
            .map(|i| StoryTask {
                pid: 100 + i,
                comm: "sh".into(),
                ran_ns: 1000 * u64::from(i + 1),
            })
            .collect();
        let line = s.summary();
        assert!(line.contains(", 7 more "), "{line}");
        assert!(line.contains("task sh[111] 12.0us"), "{line}");
        assert!(!line.contains("sh[100]"), "{line}");
        s.complete = false;
        assert!(
            s.summary()
                .ends_with("(incomplete: older events were overwritten)")
        );
        // The CPU's own measuring thread holding it (no other task on the CPU in the interval)
        // is a stall it did not see, not a task that took the CPU from it; another CPU's
        // measuring thread is a task as any other.
        let idle = s.events.remove(0);
        for (comm, own) in [("latlab-cpu1", true), ("latlab-cpu0", false)] {
            s.tasks = vec![StoryTask {
                pid: 7,
                comm: comm.into(),
                ran_ns: 290_000,
            }];
            let line = s.summary();
            assert_eq!(
                line.contains(&format!(
                    "task {comm}[7] 290.0us (the measuring thread itself, still running"
                )),
                own,
                "{line}"
            );
        }
        // Switched out and back (a busy-waiting thread the CPU's RT throttling preempted): the
        // kernel saw it.
        s.tasks[0].comm = "latlab-cpu1".into();
        let mut held = story_event(StoryKind::Task, 900_000, 400_000, 300_000, "latlab-cpu1");
        held.pid = Some(7);
        s.events.push(held);
        s.events.push(idle);
        let line = s.summary();
        assert!(
            line.contains(
                "task latlab-cpu1[7] 290.0us (the measuring thread itself, before and after the \
                 tasks that took the CPU from it)"
            ),
            "{line}"
        );
        // Known by its thread id, a thread of that name and another id is another latlab's
        // on this CPU (a second run, a monitor): a task that took the CPU, never "itself".
        s.measuring_tid = Some(8);
        let line = s.summary();
        assert!(
            line.contains(
                "task latlab-cpu1[7] 290.0us (not this run's: another latlab measuring on this CPU)"
            ) && !line.contains("itself"),
            "{line}"
        );
        s.measuring_tid = Some(7);
        assert!(line_has_itself(&s.summary()));
        s.events.retain(|e| e.pid != Some(7));
        // Switched to the CPU inside the interval: the time is its way back to user space.
        let mut slice = story_event(StoryKind::Task, 1_100_000, 200_000, 200_000, "latlab-cpu1");
        slice.pid = Some(7);
        s.events.push(slice);
        let line = s.summary();
        assert!(
            line.contains(
                "task latlab-cpu1[7] 290.0us (the measuring thread itself, from its switch to \
                 the CPU at +100.0us to reading its clock)"
            ),
            "{line}"
        );
    }
}
