//! Measured CPUs going offline and coming back under the daemon.
//!
//! When a CPU goes offline the kernel moves its pinned measuring thread to another CPU: what it
//! measures from then on is not that CPU's latency, and at a real-time priority it disturbs the
//! CPU it lands on. So while a CPU is offline its thread is lowered to `SCHED_OTHER` and its
//! windows are not stored (nor any window the CPU was offline during); when the CPU is back the
//! thread is pinned to it again at its policy, and its windows are stored again. Each change is
//! said once and marked with an annotation on that CPU.

use latlab_model::Policy;
use latlab_model::units::CpuList;
use latlab_sys::Sys;
use std::collections::BTreeMap;

/// One CPU going offline or coming back.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub cpu: u32,
    pub at_unix_ns: u64,
    pub online: bool,
    pub text: String,
}

/// The measured CPUs' online state and the times each was offline.
pub struct Hotplug {
    sys: Sys,
    /// Measured CPUs and whether each is online now.
    online: BTreeMap<u32, bool>,
    /// Per CPU, the intervals it was offline (`to` is `None` while it still is).
    offline: BTreeMap<u32, Vec<(u64, Option<u64>)>>,
    policy: Policy,
    priority: u32,
}

impl Hotplug {
    /// Watch `cpus` (all online when measuring started); `policy` and `priority` are what their
    /// threads measure at.
    pub fn new(sys: Sys, cpus: &[u32], policy: Policy, priority: u32) -> Hotplug {
        Hotplug {
            sys,
            online: cpus.iter().map(|&c| (c, true)).collect(),
            offline: BTreeMap::new(),
            policy,
            priority,
        }
    }

    /// Read which CPUs are online and act on every change since the last call.
    pub fn check(&mut self, now_unix_ns: u64) -> Vec<Change> {
        let Ok(online) = self.sys.online_cpus() else {
            return Vec::new();
        };
        let mut changes = Vec::new();
        for (&cpu, was) in self.online.iter_mut() {
            let is = online.contains(cpu);
            if is == *was {
                continue;
            }
            *was = is;
            let thread = latlab_sys::thread::tid_named(&format!("latlab-cpu{cpu}"));
            let text = if is {
                if let Some(i) = self.offline.get_mut(&cpu).and_then(|v| v.last_mut()) {
                    i.1 = Some(now_unix_ns);
                }
                let back = thread.map(|tid| {
                    latlab_sys::thread::set_task_affinity(tid, &[cpu])
                        .and_then(|()| {
                            latlab_sys::thread::set_task_policy(
                                tid,
                                self.policy,
                                self.priority,
                                None,
                            )
                        })
                        .map_err(|e| e.to_string())
                });
                match back {
                    Some(Ok(())) => format!("cpu{cpu} is online again: measuring it resumes"),
                    Some(Err(e)) => format!(
                        "cpu{cpu} is online again, but its thread could not be put back on it \
                         ({e}): its windows stay unstored"
                    ),
                    None => format!("cpu{cpu} is online again, but its thread is gone"),
                }
            } else {
                self.offline
                    .entry(cpu)
                    .or_default()
                    .push((now_unix_ns, None));
                // Off its CPU it would disturb another one at a real-time priority.
                if let Some(tid) = thread {
                    let _ = latlab_sys::thread::set_task_policy(tid, Policy::Other, 0, None);
                }
                format!("cpu{cpu} went offline: its windows are not stored until it is back")
            };
            changes.push(Change {
                cpu,
                at_unix_ns: now_unix_ns,
                online: is,
                text,
            });
        }
        changes
    }

    /// Whether `cpu` was online over the whole of `[start, end)` (and its thread on it).
    pub fn measured(&self, cpu: u32, start: u64, end: u64) -> bool {
        if self.online.get(&cpu) == Some(&false) {
            return false;
        }
        self.offline.get(&cpu).is_none_or(|v| {
            v.iter()
                .all(|&(from, to)| to.is_some_and(|t| t <= start) || from >= end)
        })
    }

    /// Forget offline intervals that ended before `before` (no window that old is still open).
    pub fn forget_before(&mut self, before: u64) {
        for v in self.offline.values_mut() {
            v.retain(|&(_, to)| to.is_none_or(|t| t >= before));
        }
    }
}

/// The CPUs a series measures: the configured list, or every online CPU.
pub fn measured_cpus(cpus: Option<&[u32]>, online: &CpuList) -> Vec<u32> {
    cpus.map_or_else(|| online.cpus().to_vec(), <[u32]>::to_vec)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tree(online: &str) -> (tempfile::TempDir, Sys) {
        let t = latlab_testkit::tree_of(&[("/sys/devices/system/cpu/online", online)]);
        let sys = Sys::new(t.path());
        (t, sys)
    }

    #[test]
    fn a_cpu_offline_and_back_is_said_once_each_way_and_its_windows_left_out_meanwhile() {
        let (t, sys) = tree("0-3\n");
        let mut h = Hotplug::new(sys, &[1, 2], Policy::Fifo, 80);
        assert!(h.check(100).is_empty(), "nothing changed");
        let online = t.path().join("sys/devices/system/cpu/online");
        std::fs::write(&online, "0,2-3\n").unwrap();
        let c = h.check(1_000);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].cpu, c[0].online, c[0].at_unix_ns), (1, false, 1_000));
        assert!(c[0].text.contains("cpu1 went offline"), "{}", c[0].text);
        assert!(h.check(1_500).is_empty(), "said once");
        assert!(!h.measured(1, 2_000, 3_000), "offline now");
        assert!(h.measured(2, 0, 3_000), "the others go on");
        std::fs::write(&online, "0-3\n").unwrap();
        let c = h.check(5_000);
        assert_eq!((c[0].cpu, c[0].online), (1, true));
        // No thread of that name in this test process.
        assert!(c[0].text.contains("its thread is gone"), "{}", c[0].text);
        assert!(h.measured(1, 0, 1_000), "before it went");
        assert!(!h.measured(1, 900, 1_100), "a window it went offline in");
        assert!(!h.measured(1, 4_900, 5_100), "a window it came back in");
        assert!(h.measured(1, 5_000, 6_000), "after it came back");
        h.forget_before(6_000);
        assert!(h.measured(1, 900, 1_100), "forgotten");
    }

    #[test]
    fn an_unreadable_online_list_changes_nothing() {
        let (t, sys) = tree("0-3\n");
        let mut h = Hotplug::new(sys, &[1], Policy::Fifo, 80);
        std::fs::write(t.path().join("sys/devices/system/cpu/online"), "zz\n").unwrap();
        assert!(h.check(1).is_empty());
        assert!(h.measured(1, 0, 10));
    }
}
