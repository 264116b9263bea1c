//! `latlab monitor` when a measured CPU goes offline and comes back: its thread's windows stop
//! being stored (with an annotation), the other CPUs go on, and when the CPU is back its thread
//! is on it again at its real-time priority.
//!
//! A test binary of its own: taking a CPU offline would disturb any test measuring beside it.
//! It needs root and a CPU other than 0 that can go offline, and puts it back online however
//! the test ends.
#![allow(clippy::unwrap_used)]

mod common;

use common::END;
use latlab_store::Store;
use latlab_testkit::process::{Proc, wait_for};
use latlab_testkit::{latlab, root_or_skip, run_ok};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where cgroup v1 keeps its cpusets.
const CPUSETS_V1: &str = "/sys/fs/cgroup/cpuset";

/// Every cgroup v1 cpuset's `cpuset.cpus`, parents before children. Under cgroup v1 a CPU that
/// goes offline is removed from every cpuset and is not given back when it returns, so the
/// test puts these back itself (cgroup v2 restores them; there this is empty).
fn cpusets_v1() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let file = dir.join("cpuset.cpus");
        if let Ok(cpus) = std::fs::read_to_string(&file) {
            out.push((file, cpus.trim().to_string()));
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut children: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        children.sort();
        for c in children {
            walk(&c, out);
        }
    }
    let mut out = Vec::new();
    if Path::new(CPUSETS_V1).join("cpuset.cpus").exists() {
        walk(Path::new(CPUSETS_V1), &mut out);
    }
    out
}

/// A CPU taken offline for the test; when dropped it is put back online, and so is every cgroup
/// v1 cpuset it was taken out of.
struct Offline {
    path: PathBuf,
    cpusets: Vec<(PathBuf, String)>,
}

impl Offline {
    fn take(cpu: u32) -> Offline {
        let path = PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/online"));
        let cpusets = cpusets_v1();
        std::fs::write(&path, "0").unwrap();
        Offline { path, cpusets }
    }
}

impl Drop for Offline {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, "1");
        for (file, cpus) in &self.cpusets {
            let _ = std::fs::write(file, cpus);
        }
    }
}

/// The thread of `pid` named `name`: its allowed CPUs and scheduling policy (from `stat`).
fn thread_state(pid: u32, name: &str) -> Option<(String, u32)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .find_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            if comm.trim() != name {
                return None;
            }
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let cpus = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
                .trim()
                .to_string();
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // Fields after the command's closing parenthesis; policy is field 41.
            let rest = &stat[stat.rfind(')')? + 2..];
            let policy = rest.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((cpus, policy))
        })
}

fn sets_with_cpus(db: &Path) -> Vec<(u64, Vec<u32>)> {
    let Ok(store) = Store::open_existing(db) else {
        return Vec::new();
    };
    let Ok(Some(id)) = store.find_series("t") else {
        return Vec::new();
    };
    let windows = store.monitor_windows(id, 0, END, None).unwrap_or_default();
    store
        .monitor_sets(id, 0, END)
        .unwrap_or_default()
        .into_iter()
        .map(|s| {
            let cpus = windows
                .iter()
                .filter(|w| w.start_unix_ns == s.start_unix_ns)
                .map(|w| w.cpu)
                .collect();
            (s.window_index, cpus)
        })
        .collect()
}

#[test]
fn a_cpu_offline_stops_its_windows_and_back_online_it_is_measured_again() {
    if !root_or_skip("taking a CPU offline") {
        return;
    }
    let online = latlab_sys::Sys::default().online_cpus().unwrap();
    let Some(&cpu) = online.cpus().iter().find(|&&c| {
        c > 0
            && std::fs::metadata(format!("/sys/devices/system/cpu/cpu{c}/online"))
                .is_ok_and(|m| !m.permissions().readonly())
    }) else {
        eprintln!("skipped: no CPU but cpu0 can go offline here");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let mut d = Proc::start(
        common::monitor(&db, &["--listen", "off", "--name", "t"]),
        dir.path().join("log"),
    );
    let name = format!("latlab-cpu{cpu}");
    d.wait_until("2 stored windows", Duration::from_secs(30), || {
        sets_with_cpus(&db).len() >= 2
    });
    let before = thread_state(d.pid(), &name).unwrap();
    assert_eq!(before, (cpu.to_string(), 1), "pinned, SCHED_FIFO");
    let cpusets_before = cpusets_v1();
    {
        let _off = Offline::take(cpu);
        wait_for("the offline said", Duration::from_secs(10), || {
            d.log().contains(&format!("cpu{cpu} went offline"))
        });
        let (_, policy) = thread_state(d.pid(), &name).unwrap();
        assert_eq!(policy, 0, "lowered to SCHED_OTHER while off its CPU");
        std::thread::sleep(Duration::from_secs(3));
    }
    assert_eq!(
        cpusets_v1(),
        cpusets_before,
        "every cgroup v1 cpuset has the CPU again"
    );
    wait_for("the return said", Duration::from_secs(10), || {
        d.log()
            .contains(&format!("cpu{cpu} is online again: measuring it resumes"))
    });
    assert_eq!(
        thread_state(d.pid(), &name).unwrap(),
        before,
        "back on its CPU at its policy"
    );
    let n = sets_with_cpus(&db).len();
    wait_for("3 more windows", Duration::from_secs(30), || {
        sets_with_cpus(&db).len() >= n + 3
    });
    let log = d.term();
    let sets = sets_with_cpus(&db);
    let first = sets[0].0;
    let mut without = 0;
    for (i, (index, cpus)) in sets.iter().enumerate() {
        assert_eq!(*index, first + i as u64, "no window lost: {log}");
        assert!(cpus.contains(&0), "the others go on: {log}");
        if !cpus.contains(&cpu) {
            without += 1;
        }
    }
    assert!(without >= 3, "about 3 s without cpu{cpu}: {sets:?}");
    assert!(sets[..2].iter().all(|(_, c)| c.contains(&cpu)), "{sets:?}");
    // Of the 3 windows after the return, the first may hold it: the last 2 are whole again.
    let last = &sets[sets.len() - 2..];
    assert!(last.iter().all(|(_, c)| c.contains(&cpu)), "{sets:?}");
    let marks = common::annotations(&db, "t", "cpu");
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert!(marks.iter().all(|a| a.cpu == Some(cpu)), "{marks:?}");
    run_ok(latlab!().args(["db", "check", "--db"]).arg(&db));
}
