//! Spike stories: what ran on a CPU during an interval, from the ring of recent events.
//!
//! [`decompose`] is pure: it takes the events read from one CPU's ring and the interval and
//! returns the [`SpikeStory`]. [`RingReader`](crate::RingReader) reads the ring and calls it.

use crate::layout::{RING_SIZE, RingEv, comm_str, ring_kind};
use crate::names::{Names, softirq_name};
use latlab_model::trace::{SpikeStory, StoryEvent, StoryKind, StoryTask, StoryTotals};
use std::collections::HashMap;

// Task states of the switched-out task (`include/linux/sched.h`).
const TASK_UNINTERRUPTIBLE: u64 = 0x2;
const EXIT_DEAD: u64 = 0x10;
const TASK_DEAD: u64 = 0x80;

fn overlap(start: u64, end: u64, from: u64, to: u64) -> u64 {
    end.min(to).saturating_sub(start.max(from))
}

fn task_label(comm: &str, pid: u32) -> String {
    if pid == 0 {
        "idle".to_string()
    } else {
        format!("{comm}[{pid}]")
    }
}

/// The story of `cpu` between `from_ns` and `to_ns` (`CLOCK_MONOTONIC`) from that CPU's ring:
/// `head` is the ring's count of events ever written, `events` those still held, oldest first.
pub fn decompose(
    events: &[RingEv],
    head: u64,
    cpu: u32,
    from_ns: u64,
    to_ns: u64,
    names: &Names,
) -> SpikeStory {
    let (from, to) = (from_ns.min(to_ns), to_ns.max(from_ns));
    // Events are written when they end, so the ring is in order of end time: the story is
    // complete when nothing was overwritten, or the oldest event held ended before `from`.
    let complete = head <= RING_SIZE as u64
        || events.first().is_some_and(|e| {
            e.ts.saturating_add(if e.kind == ring_kind::SWITCH {
                0
            } else {
                e.dur
            }) <= from
        });
    let mut out = Vec::new();
    let mut totals = StoryTotals::default();
    let mut tasks: HashMap<u32, (String, u64)> = HashMap::new();
    // The last context switch at or before `to`: its next task holds the CPU from then on.
    let mut last_switch: Option<&RingEv> = None;
    let mut switched_after = false;

    for e in events {
        if e.kind == ring_kind::SWITCH {
            if e.ts <= to {
                last_switch = Some(e);
            } else {
                switched_after = true;
            }
            // The slice of the task switched out: [ts - dur, ts]. A zero duration is the first
            // switch seen (its start is unknown).
            if e.dur == 0 {
                continue;
            }
            let start = e.ts.saturating_sub(e.dur);
            let ov = overlap(start, e.ts, from, to);
            if ov == 0 {
                continue;
            }
            let comm = comm_str(&e.comm);
            let next_pid = e.arg as u32;
            let state = e.arg >> 32;
            let next = task_label(&comm_str(&e.comm2), next_pid);
            let detail = match state {
                0 => format!("preempted by {next}"),
                TASK_UNINTERRUPTIBLE => format!("blocked; {next} ran next"),
                s if s & (TASK_DEAD | EXIT_DEAD) != 0 => format!("exited; {next} ran next"),
                _ => format!("slept; {next} ran next"),
            };
            if e.id != 0 {
                let t = tasks.entry(e.id).or_insert_with(|| (comm.clone(), 0));
                t.1 += ov;
            }
            out.push(StoryEvent {
                kind: StoryKind::Task,
                start_ns: start,
                duration_ns: e.dur,
                overlap_ns: ov,
                name: task_label(&comm, e.id),
                pid: Some(e.id),
                detail,
            });
            continue;
        }
        let end = e.ts.saturating_add(e.dur);
        let ov = overlap(e.ts, end, from, to);
        if ov == 0 && !(e.dur == 0 && e.ts >= from && e.ts <= to) {
            continue;
        }
        let (kind, name) = match e.kind {
            ring_kind::HARDIRQ => (StoryKind::Hardirq, names.irqs.name(u64::from(e.id))),
            ring_kind::SOFTIRQ => (StoryKind::Softirq, softirq_name(u64::from(e.id))),
            ring_kind::TASKLET => (StoryKind::Tasklet, names.symbols.name(e.arg)),
            ring_kind::HRTIMER => (StoryKind::Hrtimer, names.symbols.name(e.arg)),
            ring_kind::LOCAL_TIMER => (StoryKind::LocalTimer, "local timer".to_string()),
            ring_kind::WORK => (StoryKind::Work, names.symbols.name(e.arg)),
            ring_kind::KTHREAD_WORK => (StoryKind::KthreadWork, names.symbols.name(e.arg)),
            _ => continue,
        };
        let slot = match kind {
            StoryKind::Hardirq => &mut totals.hardirq_ns,
            StoryKind::Softirq => &mut totals.softirq_ns,
            StoryKind::Tasklet => &mut totals.tasklet_ns,
            StoryKind::Hrtimer => &mut totals.hrtimer_ns,
            StoryKind::LocalTimer => &mut totals.local_timer_ns,
            StoryKind::Work => &mut totals.work_ns,
            StoryKind::KthreadWork | StoryKind::Task => &mut totals.kthread_work_ns,
        };
        *slot += ov;
        out.push(StoryEvent {
            kind,
            start_ns: e.ts,
            duration_ns: e.dur,
            overlap_ns: ov,
            name,
            pid: matches!(kind, StoryKind::Work | StoryKind::KthreadWork).then_some(e.id),
            detail: String::new(),
        });
    }

    // The task on the CPU since the last switch, when no later switch closed its slice (at
    // the end of a timer spike: the woken thread itself, or whoever still holds the CPU).
    if let Some(s) = last_switch.filter(|_| !switched_after) {
        let ov = overlap(s.ts, to, from, to);
        if ov > 0 {
            let pid = s.arg as u32;
            let comm = comm_str(&s.comm2);
            if pid != 0 {
                let t = tasks.entry(pid).or_insert_with(|| (comm.clone(), 0));
                t.1 += ov;
            }
            out.push(StoryEvent {
                kind: StoryKind::Task,
                start_ns: s.ts,
                duration_ns: to - s.ts,
                overlap_ns: ov,
                name: task_label(&comm, pid),
                pid: Some(pid),
                detail: "on the CPU at the end".into(),
            });
        }
    }

    out.sort_by_key(|e| (e.start_ns, e.kind.name()));
    let mut tasks: Vec<StoryTask> = tasks
        .into_iter()
        .map(|(pid, (comm, ran_ns))| StoryTask { pid, comm, ran_ns })
        .collect();
    tasks.sort_by(|a, b| b.ran_ns.cmp(&a.ran_ns).then(a.pid.cmp(&b.pid)));
    SpikeStory {
        cpu,
        from_ns: from,
        to_ns: to,
        complete,
        events: out,
        totals,
        tasks,
        measuring_tid: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::names::{IrqNames, Symbols};

    fn comm(s: &str) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[..s.len()].copy_from_slice(s.as_bytes());
        c
    }

    fn ev(seq: u64, kind: u32, ts: u64, dur: u64, id: u32, arg: u64) -> RingEv {
        RingEv {
            seq,
            ts,
            dur,
            arg,
            kind,
            id,
            comm: [0; 16],
            comm2: [0; 16],
        }
    }

    fn switch(
        seq: u64,
        ts: u64,
        ran: u64,
        prev: (&str, u32),
        next: (&str, u32),
        state: u64,
    ) -> RingEv {
        RingEv {
            comm: comm(prev.0),
            comm2: comm(next.0),
            ..ev(
                seq,
                ring_kind::SWITCH,
                ts,
                ran,
                prev.1,
                u64::from(next.1) | (state << 32),
            )
        }
    }

    fn names() -> Names {
        Names {
            symbols: Symbols::parse(
                "ffffffff81001200 T hrtimer_wakeup\nffffffff81001000 t vmstat_update\n",
            ),
            irqs: IrqNames::from_pairs([(11, "virtio0".to_string())]),
        }
    }

    /// A timer spike: expiry at 1000, the hog runs until 1150 (preempted), then the woken
    /// thread runs at 1150. An IRQ and a softirq ran meanwhile.
    fn spike() -> Vec<RingEv> {
        vec![
            switch(0, 500, 0, ("swapper/1", 0), ("hog", 77), 0),
            ev(1, ring_kind::HRTIMER, 1000, 3, 0, 0xffffffff81001200),
            ev(2, ring_kind::LOCAL_TIMER, 998, 8, 0, 0),
            ev(3, ring_kind::HARDIRQ, 1040, 10, 11, 0),
            ev(4, ring_kind::SOFTIRQ, 1050, 30, 3, 0),
            switch(5, 1150, 650, ("hog", 77), ("cyclic", 88), 0),
            ev(6, ring_kind::WORK, 1200, 50, 33, 0xffffffff81001000),
        ]
    }

    #[test]
    fn a_timer_spike_is_decomposed() {
        let s = decompose(&spike(), 7, 1, 1000, 1150, &names());
        assert!(s.complete);
        assert_eq!((s.cpu, s.from_ns, s.to_ns), (1, 1000, 1150));
        assert_eq!(s.totals.hrtimer_ns, 3);
        assert_eq!(s.totals.local_timer_ns, 6); // clipped at from
        assert_eq!(s.totals.hardirq_ns, 10);
        assert_eq!(s.totals.softirq_ns, 30);
        assert_eq!(s.totals.work_ns, 0); // after the interval
        assert_eq!(s.tasks.len(), 1);
        assert_eq!(
            (s.tasks[0].pid, s.tasks[0].comm.as_str(), s.tasks[0].ran_ns),
            (77, "hog", 150)
        );
        let hog = s.events.iter().find(|e| e.kind == StoryKind::Task).unwrap();
        assert_eq!(hog.name, "hog[77]");
        assert_eq!(hog.detail, "preempted by cyclic[88]");
        assert_eq!(
            (hog.start_ns, hog.duration_ns, hog.overlap_ns),
            (500, 650, 150)
        );
        let irq = s
            .events
            .iter()
            .find(|e| e.kind == StoryKind::Hardirq)
            .unwrap();
        assert_eq!(irq.name, "11: virtio0");
        assert!(s.events.iter().any(|e| e.name == "NET_RX"));
        assert!(s.events.iter().any(|e| e.name == "hrtimer_wakeup"));
        assert!(s.events.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
        let line = s.summary();
        assert!(
            line.starts_with("cpu1 0.2us: first interrupt at +0.0us; task hog[77] "),
            "{line}"
        );
        assert!(
            line.contains("softirq NET_RX") && line.contains("hardirq 11: virtio0"),
            "{line}"
        );
    }

    #[test]
    fn the_task_holding_the_cpu_at_the_end_is_named() {
        let s = decompose(&spike(), 7, 1, 1100, 1300, &names());
        let last = s
            .events
            .iter()
            .rfind(|e| e.kind == StoryKind::Task)
            .unwrap();
        assert_eq!(last.name, "cyclic[88]");
        assert_eq!(last.overlap_ns, 150);
        assert_eq!(s.totals.work_ns, 50);
        let work = s.events.iter().find(|e| e.kind == StoryKind::Work).unwrap();
        assert_eq!((work.name.as_str(), work.pid), ("vmstat_update", Some(33)));
    }

    #[test]
    fn a_later_switch_closes_the_last_slice() {
        let mut evs = spike();
        evs.push(switch(7, 1400, 250, ("cyclic", 88), ("hog", 77), 1));
        evs.push(switch(8, 1500, 100, ("hog", 77), ("kworker/1:0", 9), 0x80));
        let s = decompose(&evs, 9, 1, 1100, 1450, &names());
        let tasks: Vec<_> = s
            .events
            .iter()
            .filter(|e| e.kind == StoryKind::Task)
            .collect();
        assert_eq!(tasks.len(), 3, "{tasks:?}");
        assert_eq!(tasks[1].name, "cyclic[88]");
        assert_eq!(tasks[1].detail, "slept; hog[77] ran next");
        assert_eq!(tasks[1].overlap_ns, 250);
        assert_eq!(tasks[2].detail, "exited; kworker/1:0[9] ran next");
        assert_eq!(tasks[2].overlap_ns, 50);
        assert!(s.events.iter().all(|e| e.detail != "on the CPU at the end"));
        assert_eq!(s.tasks[0].comm, "cyclic");
    }

    #[test]
    fn an_overwritten_ring_makes_an_incomplete_story() {
        let mut evs = spike();
        evs.remove(0);
        // More events were written than the ring holds, and the oldest held ends after `from`.
        let s = decompose(&evs[2..], RING_SIZE as u64 + 10, 1, 1000, 1150, &names());
        assert!(!s.complete);
        assert!(
            s.summary()
                .ends_with("(incomplete: older events were overwritten)")
        );
        let s = decompose(&evs, RING_SIZE as u64 + 10, 1, 1020, 1150, &names());
        assert!(
            s.complete,
            "the oldest event held ends at 1003, before 1020"
        );
    }

    #[test]
    fn an_empty_ring_tells_nothing() {
        let s = decompose(&[], 0, 0, 10, 20, &names());
        assert!(s.complete && s.events.is_empty() && s.tasks.is_empty());
        assert_eq!(s.summary(), "cpu0 0.0us: nothing recorded");
    }
}
