//! Event groups (what `--events` names), their tracepoints and BPF programs.

use latlab_model::trace::Family;

/// A group of events `latlab trace --events` can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventGroup {
    Workqueue,
    Softirq,
    Tasklet,
    Kthread,
    Wakeup,
    Hrtimer,
    LocalTimer,
    Hardirq,
}

/// How a program attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// A classic tracepoint (`events/<category>/<event>` in tracefs).
    Classic,
    /// A BTF tracepoint (raw tracepoint typed by the kernel's BTF; no tracefs needed).
    Btf,
}

/// One BPF program of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    /// The function name in `bpf/trace.bpf.c`.
    pub name: &'static str,
    pub category: &'static str,
    pub event: &'static str,
    pub attach: Attach,
    /// The group cannot run without it (`false`: it only adds samples, e.g. `sched_wakeup_new`).
    pub required: bool,
    /// It writes the ring of recent events (attached for spike stories).
    pub feeds_ring: bool,
}

const fn p(
    name: &'static str,
    category: &'static str,
    event: &'static str,
    attach: Attach,
    feeds_ring: bool,
) -> Program {
    Program {
        name,
        category,
        event,
        attach,
        required: true,
        feeds_ring,
    }
}

impl Program {
    /// `category:event`.
    pub fn tracepoint(&self) -> String {
        format!("{}:{}", self.category, self.event)
    }
}

use Attach::{Btf, Classic};

const WORKQUEUE: &[Program] = &[
    p(
        "wq_queue",
        "workqueue",
        "workqueue_queue_work",
        Classic,
        false,
    ),
    p(
        "wq_start",
        "workqueue",
        "workqueue_execute_start",
        Classic,
        true,
    ),
    p(
        "wq_end",
        "workqueue",
        "workqueue_execute_end",
        Classic,
        true,
    ),
];
const SOFTIRQ: &[Program] = &[
    p("softirq_raise", "irq", "softirq_raise", Btf, false),
    p("softirq_entry", "irq", "softirq_entry", Btf, true),
    p("softirq_exit", "irq", "softirq_exit", Btf, true),
];
const TASKLET: &[Program] = &[
    p("tasklet_entry", "irq", "tasklet_entry", Classic, true),
    p("tasklet_exit", "irq", "tasklet_exit", Classic, true),
];
const KTHREAD: &[Program] = &[
    p(
        "kt_queue",
        "sched",
        "sched_kthread_work_queue_work",
        Classic,
        false,
    ),
    p(
        "kt_start",
        "sched",
        "sched_kthread_work_execute_start",
        Classic,
        true,
    ),
    p(
        "kt_end",
        "sched",
        "sched_kthread_work_execute_end",
        Classic,
        true,
    ),
];
const WAKEUP: &[Program] = &[
    p("sched_waking", "sched", "sched_waking", Btf, false),
    Program {
        required: false,
        ..p("sched_wakeup_new", "sched", "sched_wakeup_new", Btf, false)
    },
    p("sched_switch", "sched", "sched_switch", Btf, true),
];
const HRTIMER: &[Program] = &[
    p("hrtimer_entry", "timer", "hrtimer_expire_entry", Btf, true),
    p("hrtimer_exit", "timer", "hrtimer_expire_exit", Btf, true),
];
const LOCAL_TIMER: &[Program] = &[
    p(
        "local_timer_entry",
        "irq_vectors",
        "local_timer_entry",
        Btf,
        true,
    ),
    p(
        "local_timer_exit",
        "irq_vectors",
        "local_timer_exit",
        Btf,
        true,
    ),
];
const HARDIRQ: &[Program] = &[
    p("irq_entry", "irq", "irq_handler_entry", Btf, true),
    p("irq_exit", "irq", "irq_handler_exit", Btf, true),
];

impl EventGroup {
    pub const ALL: [EventGroup; 8] = [
        EventGroup::Workqueue,
        EventGroup::Softirq,
        EventGroup::Tasklet,
        EventGroup::Kthread,
        EventGroup::Wakeup,
        EventGroup::Hrtimer,
        EventGroup::LocalTimer,
        EventGroup::Hardirq,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EventGroup::Workqueue => "workqueue",
            EventGroup::Softirq => "softirq",
            EventGroup::Tasklet => "tasklet",
            EventGroup::Kthread => "kthread",
            EventGroup::Wakeup => "wakeup",
            EventGroup::Hrtimer => "hrtimer",
            EventGroup::LocalTimer => "local-timer",
            EventGroup::Hardirq => "hardirq",
        }
    }

    pub fn from_name(name: &str) -> Option<EventGroup> {
        EventGroup::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Parse a comma-separated list of group names; `all` means every group.
    pub fn parse_list(text: &str) -> Result<Vec<EventGroup>, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if part == "all" {
                out.extend(EventGroup::ALL);
                continue;
            }
            match EventGroup::from_name(part) {
                Some(g) => out.push(g),
                None => {
                    return Err(format!(
                        "unknown event group {part:?} (accepted: all, {})",
                        EventGroup::ALL.map(|g| g.name()).join(", ")
                    ));
                }
            }
        }
        if out.is_empty() {
            return Err(format!(
                "no event group given (accepted: all, {})",
                EventGroup::ALL.map(|g| g.name()).join(", ")
            ));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The histogram families of the group.
    pub fn families(self) -> &'static [Family] {
        match self {
            EventGroup::Workqueue => &[Family::WorkqueueLatency, Family::WorkqueueExecution],
            EventGroup::Softirq => &[Family::SoftirqLatency, Family::SoftirqRuntime],
            EventGroup::Tasklet => &[Family::TaskletRuntime],
            EventGroup::Kthread => &[Family::KthreadLatency, Family::KthreadExecution],
            EventGroup::Wakeup => &[Family::Wakeup],
            EventGroup::Hrtimer => &[Family::Hrtimer],
            EventGroup::LocalTimer => &[Family::LocalTimer],
            EventGroup::Hardirq => &[Family::Hardirq],
        }
    }

    /// The programs of the group.
    pub fn programs(self) -> &'static [Program] {
        match self {
            EventGroup::Workqueue => WORKQUEUE,
            EventGroup::Softirq => SOFTIRQ,
            EventGroup::Tasklet => TASKLET,
            EventGroup::Kthread => KTHREAD,
            EventGroup::Wakeup => WAKEUP,
            EventGroup::Hrtimer => HRTIMER,
            EventGroup::LocalTimer => LOCAL_TIMER,
            EventGroup::Hardirq => HARDIRQ,
        }
    }

    /// Whether the group needs tracefs (it has classic tracepoints).
    pub fn needs_tracefs(self) -> bool {
        self.programs().iter().any(|p| p.attach == Classic)
    }
}

/// Every program of the object.
pub fn all_programs() -> impl Iterator<Item = (EventGroup, &'static Program)> {
    EventGroup::ALL
        .into_iter()
        .flat_map(|g| g.programs().iter().map(move |p| (g, p)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lists_parse_and_reject_unknown_names() {
        assert_eq!(EventGroup::parse_list("all").unwrap().len(), 8);
        assert_eq!(
            EventGroup::parse_list("softirq, workqueue,softirq").unwrap(),
            [EventGroup::Workqueue, EventGroup::Softirq]
        );
        let e = EventGroup::parse_list("softirq,irqs").unwrap_err();
        assert!(e.contains("\"irqs\"") && e.contains("hardirq"), "{e}");
        assert!(EventGroup::parse_list(" , ").is_err());
    }

    #[test]
    fn every_family_belongs_to_one_group() {
        for f in Family::ALL {
            let n = EventGroup::ALL
                .iter()
                .filter(|g| g.families().contains(&f))
                .count();
            assert_eq!(n, 1, "{f:?}");
        }
    }

    #[test]
    fn program_names_are_unique() {
        let mut names: Vec<_> = all_programs().map(|(_, p)| p.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
