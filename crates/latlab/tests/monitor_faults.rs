//! `latlab monitor` when things go wrong under it: a second daemon on the same series, the
//! process stopped and continued, the store's file system full or read-only, the store deleted
//! or replaced. In each the daemon keeps measuring, says what happened, loses nothing already
//! stored, and the store checks clean afterwards.
//!
//! The full and read-only file system tests mount a small tmpfs or ext4 image in a mount
//! namespace of the daemon's own (`unshare -m`), so nothing outside the test sees it and the
//! mount (and its loop device) goes with the daemon; they need root and skip without it.
#![allow(clippy::unwrap_used)]

mod common;

use common::sets;
use latlab_store::{Store, WindowSetRow};
use latlab_testkit::process::{Proc, wait_for};
use latlab_testkit::{assert_one_line_error, latlab, require, root_or_skip, run_ok, stderr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

/// The daemon on series `name` without a web server.
fn monitor(db: &Path, name: &str) -> Command {
    common::monitor(db, &["--listen", "off", "--name", name])
}

/// The daemon on series `t` of `db` (its log `dir/1.log`), once it has stored `n` windows.
/// Fails with the daemon's log if it exits first or has not stored them within 30 s.
fn started(db: &Path, dir: &Path, n: usize) -> Proc {
    let mut d = Proc::start(monitor(db, "t"), dir.join("1.log"));
    d.wait_until(
        &format!("{n} stored window(s)"),
        Duration::from_secs(30),
        || sets(db, "t").len() >= n,
    );
    d
}

/// The daemon on series `t` of `db` serving at a free address (its log `dir/1.log`), once it has
/// stored two windows and `/metrics` counts them.
fn serving(db: &Path, dir: &Path) -> (Proc, std::net::SocketAddr) {
    let addr = latlab_testkit::process::free_addr();
    let mut d = Proc::start(
        common::monitor(db, &["--listen", &addr.to_string(), "--name", "t"]),
        dir.join("1.log"),
    );
    d.wait_until("2 stored windows", Duration::from_secs(30), || {
        sets(db, "t").len() >= 2
    });
    assert!(windows_served(addr) >= 1, "{}", d.log());
    (d, addr)
}

/// `latlab_monitor_windows_total` of series `t` as `/metrics` at `addr` serves it (0 if absent).
fn windows_served(addr: std::net::SocketAddr) -> u64 {
    let (_, _, text) = common::get(addr, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix("latlab_monitor_windows_total{series=\"t\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Annotations of series `name` of kind `kind`.
fn annotations(db: &Path, name: &str, kind: &str) -> Vec<String> {
    common::annotations(db, name, kind)
        .into_iter()
        .map(|a| a.text)
        .collect()
}

/// Every stored set is one whole window (the last may end early, at the stop) and their
/// indices run without a gap from the first.
fn assert_no_gap(sets: &[WindowSetRow], log: &str) {
    assert!(!sets.is_empty(), "windows stored: {log}");
    let first = sets[0].window_index;
    for (i, s) in sets.iter().enumerate() {
        assert_eq!(s.window_index, first + i as u64, "no window lost: {log}");
        let len = s.end_unix_ns - s.start_unix_ns;
        if i + 1 < sets.len() {
            assert_eq!(len, SEC, "whole windows: {log}");
        } else {
            assert!(len <= SEC, "{log}");
        }
        if i > 0 {
            assert_eq!(
                s.start_unix_ns,
                sets[i - 1].end_unix_ns,
                "back to back: {log}"
            );
        }
    }
}

fn db_check(db: &Path) {
    run_ok(latlab!().args(["db", "check", "--db"]).arg(db));
}

#[test]
fn a_second_daemon_on_the_series_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let first = started(&db, dir.path(), 1);
    let second = monitor(&db, "t").output().unwrap();
    assert_one_line_error(&second, 1, "series \"t\"");
    assert!(
        stderr(&second).contains(&format!("another daemon (PID {})", first.pid())),
        "{}",
        stderr(&second)
    );
    // --check-config says so too, rather than that all is well.
    let check = monitor(&db, "t").arg("--check-config").output().unwrap();
    assert_one_line_error(
        &check,
        1,
        &format!(
            "a start now would fail: series \"t\" in {} is being recorded by another daemon (PID {})",
            db.display(),
            first.pid()
        ),
    );
    // The same file through a link, or another spelling of its path, is the same store.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let dotted = dir.path().join(".").join("m.db");
    for other in [&link, &dotted] {
        let second = monitor(other, "t").output().unwrap();
        assert_one_line_error(&second, 1, "series \"t\"");
    }
    // A hard link is another name of the file, whose log SQLite keeps by that name: refused
    // before anything runs.
    let hard = dir.path().join("hard.db");
    std::fs::hard_link(&db, &hard).unwrap();
    let second = monitor(&hard, "t").output().unwrap();
    assert_one_line_error(&second, 2, "has 2 names (hard links to one file)");
    std::fs::remove_file(&hard).unwrap();
    // Another series of the same store is another daemon's to record.
    let other = Proc::start(monitor(&db, "u"), dir.path().join("2.log"));
    wait_for(
        "a window of the other series",
        Duration::from_secs(30),
        || !sets(&db, "u").is_empty(),
    );
    other.term();
    let log = first.term();
    assert_no_gap(&sets(&db, "t"), &log);
    assert!(
        !PathBuf::from(format!("{}.t.lock", db.display())).exists(),
        "the lock file goes with the daemon"
    );
    db_check(&db);
}

#[test]
fn a_second_daemon_on_a_taken_port_refuses_before_it_touches_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let other = dir.path().join("other.db");
    let addr = latlab_testkit::process::free_addr();
    let listen = ["--listen", &addr.to_string()];
    let mut first = Proc::start(
        common::monitor(&db, &[&listen[..], &["--name", "t"]].concat()),
        dir.path().join("1.log"),
    );
    first.wait_until("a stored window", Duration::from_secs(30), || {
        !sets(&db, "t").is_empty()
    });
    // Another series of the same store, and another store: one line, and neither the series
    // nor the file made.
    for (store, name) in [(&db, "oops"), (&other, "t")] {
        let out = common::monitor(store, &[&listen[..], &["--name", name]].concat())
            .output()
            .unwrap();
        assert_one_line_error(&out, 1, &format!("cannot listen on {addr}"));
    }
    // --check-config of the same says the address is taken.
    let check = common::monitor(
        &other,
        &[&listen[..], &["--name", "t", "--check-config"]].concat(),
    )
    .output()
    .unwrap();
    assert_one_line_error(
        &check,
        1,
        &format!("a start now would fail: --listen {addr}: "),
    );
    assert!(
        !other.exists(),
        "a store made by a daemon that did not start"
    );
    let names: Vec<String> = Store::open_existing(&db)
        .unwrap()
        .list_series()
        .unwrap()
        .into_iter()
        .map(|(_, name, _)| name)
        .collect();
    assert_eq!(names, ["t"]);
    first.term();
}

#[test]
fn a_stopped_daemon_shows_the_stop_as_missed_periods_where_they_were_due() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let mut d = started(&db, dir.path(), 2);
    d.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(30));
    d.signal(libc::SIGCONT);
    let before = sets(&db, "t").len();
    wait_for("3 windows after the stop", Duration::from_secs(60), || {
        sets(&db, "t").len() >= before + 3
    });
    let log = d.term();
    let all = sets(&db, "t");
    assert_no_gap(&all, &log);
    let store = Store::open_existing(&db).unwrap();
    let id = store.find_series("t").unwrap().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let mut silent = 0;
    let mut stalled = 0;
    for s in &all[..all.len() - 1] {
        let ws = store
            .monitor_windows(id, s.start_unix_ns, s.end_unix_ns, None)
            .unwrap();
        assert_eq!(ws.len(), cpus, "{log}");
        for w in ws.iter().filter(|w| w.start_unix_ns == s.start_unix_ns) {
            // 1000 periods a window: each a sample or a missed period, the stopped ones too.
            assert!(
                (w.count + w.missed).abs_diff(1000) <= 2,
                "window {} cpu {}: {} samples + {} missed: {log}",
                s.window_index,
                w.cpu,
                w.count,
                w.missed
            );
            if w.count == 0 {
                silent += 1;
                assert_eq!(w.missed, 1000, "a stopped window is all missed periods");
            }
            if w.missed > 0 {
                stalled += 1;
            }
        }
    }
    assert!(
        silent >= 28 * cpus,
        "30 s stopped: at least 28 whole windows per CPU with no sample ({silent}): {log}"
    );
    assert!(stalled >= silent, "{log}");
    db_check(&db);
}

/// A daemon whose store lives on a file system mounted at `dir/fs` in a mount namespace of its
/// own (`mount` is the mount command's arguments before the mount point; `extra`, more of
/// `monitor`'s). It is reached from outside through `/proc/PID/root` (SQLite resolves
/// that link to `/`, so the store is read from a copy, and checked from inside with nsenter).
struct Namespaced {
    daemon: Proc,
    fs: PathBuf,
    copies: PathBuf,
    /// Where the daemon serves `/metrics` (the network is the test's: only mounts are its own).
    addr: std::net::SocketAddr,
}

impl Namespaced {
    fn start(dir: &Path, mount: &str, extra: &[&str]) -> Namespaced {
        let fs = dir.join("fs");
        std::fs::create_dir_all(&fs).unwrap();
        let addr = latlab_testkit::process::free_addr();
        let mut daemon = common::monitor(
            &fs.join("m.db"),
            &["--listen", &addr.to_string(), "--name", "t"],
        );
        daemon.args(extra);
        let mut argv = vec![daemon.get_program().to_os_string()];
        argv.extend(daemon.get_args().map(|a| a.to_os_string()));
        let script = format!("mount {mount} {} && exec \"$@\"", fs.display());
        let mut c = latlab_testkit::command("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c", &script, "sh"])
            .args(&argv);
        // Where what the store cannot take at the exit is kept.
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        c.env("TMPDIR", &tmp);
        let daemon = Proc::start(c, dir.join("daemon.log"));
        let copies = dir.join("copies");
        std::fs::create_dir_all(&copies).unwrap();
        let n = Namespaced {
            daemon,
            fs,
            copies,
            addr,
        };
        wait_for("2 stored windows", Duration::from_secs(30), || {
            n.sets().len() >= 2
        });
        n
    }

    /// The window sets of the store as it is now, from a copy of its file and its journal
    /// (taken again if the file changed while the journal was copied: a checkpoint moved
    /// pages from one to the other).
    fn sets(&self) -> Vec<WindowSetRow> {
        let copy = self.copies.join("m.db");
        let (main, wal) = (self.inside().join("m.db"), self.inside().join("m.db-wal"));
        let consistent = (0..20).find_map(|_| {
            let before = std::fs::read(&main).ok()?;
            let journal = std::fs::read(&wal).unwrap_or_default();
            (std::fs::read(&main).ok()? == before).then_some((before, journal))
        });
        let Some((before, journal)) = consistent else {
            return Vec::new();
        };
        std::fs::write(&copy, before).unwrap();
        std::fs::write(format!("{}-wal", copy.display()), journal).unwrap();
        let _ = std::fs::remove_file(format!("{}-shm", copy.display()));
        sets(&copy, "t")
    }

    /// The value of the one sample of `name` in the daemon's `/metrics`.
    fn metric(&self, name: &str) -> f64 {
        let (status, _, body) = common::get(self.addr, "/metrics");
        assert_eq!(status, 200, "{body}");
        body.lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    }

    /// The annotations of kind `kind`, from a copy.
    fn annotations(&self, kind: &str) -> Vec<String> {
        let _ = self.sets();
        annotations(&self.copies.join("m.db"), "t", kind)
    }

    /// `latlab db check` of the store, run in the daemon's mount namespace.
    fn db_check(&self) {
        let pid = self.daemon.pid().to_string();
        let latlab = env!("CARGO_BIN_EXE_latlab");
        run_ok(
            latlab_testkit::command("nsenter")
                .args(["-t", &pid, "-m", latlab, "db", "check", "--db"])
                .arg(self.fs.join("m.db")),
        );
    }

    fn inside(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/root{}",
            self.daemon.pid(),
            self.fs.display()
        ))
    }

    /// Stop with SIGTERM: a clean exit that said the outage once.
    fn finish(self, what: &str) {
        let (status, log) = self.daemon.end(libc::SIGTERM);
        assert!(status.success(), "{what}: {status:?}: {log}");
        assert_eq!(
            log.matches("the store cannot be written").count(),
            1,
            "{what}: said once: {log}"
        );
    }
}

/// Fill the namespaced tmpfs for a few windows, then give the space back: every window
/// measured meanwhile must be stored. Those past the memory's bound (here 3 s of windows, no
/// byte beyond) wait in files meanwhile: stored from them in their place, and the files gone.
#[test]
fn a_full_file_system_parks_windows_in_memory_until_space_returns() {
    let how = "full disk";
    if !root_or_skip("mounting a tmpfs in a mount namespace")
        || !require("unshare")
        || !require("nsenter")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let n = Namespaced::start(
        dir.path(),
        "-t tmpfs -o size=4m latlab-test",
        &["--backlog-bound", "1,3"],
    );
    let fill = n.inside().join("fill");
    // Until the file system has no block left.
    let mut f = std::fs::File::create(&fill).unwrap();
    let block = vec![0u8; 64 * 1024];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    wait_for("the outage said", Duration::from_secs(15), || {
        n.daemon.log().contains("the store cannot be written")
    });
    // Meanwhile /metrics follows the measurement: the last window's end moves on while the
    // windows wait in memory and the stored count stands still.
    let (end, stored) = (
        n.metric("latlab_monitor_last_window_end_timestamp_seconds"),
        n.metric("latlab_monitor_windows_total"),
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(n.metric("latlab_monitor_windows_queued") > 0.0);
    assert!(
        n.metric("latlab_monitor_last_window_end_timestamp_seconds") >= end + 2.0,
        "the window gauges stopped with the store"
    );
    assert_eq!(n.metric("latlab_monitor_windows_total"), stored);
    wait_for("windows in a file", Duration::from_secs(20), || {
        n.daemon.log().contains("reached their bound")
    });
    let tmp = dir.path().join("tmp");
    let files = || std::fs::read_dir(&tmp).unwrap().count();
    assert!(files() >= 1);
    assert!(n.metric("latlab_monitor_windows_in_files") >= 1.0);
    std::fs::remove_file(&fill).unwrap();
    wait_for("the parked windows stored", Duration::from_secs(30), || {
        n.daemon.log().contains("are now stored")
    });
    let stored = n.sets().len();
    wait_for("a window after the outage", Duration::from_secs(10), || {
        n.sets().len() > stored
    });
    // Read while the namespace (and so the tmpfs) still exists.
    let log = n.daemon.log();
    assert_no_gap(&n.sets(), &log);
    let marks = n.annotations("store");
    assert_eq!(marks.len(), 1, "{how}: one mark of the outage: {marks:?}");
    assert!(marks[0].contains("are now stored"), "{marks:?}");
    assert!(
        marks[0].contains("written to files to bound the memory, are stored from them now"),
        "{marks:?}"
    );
    assert_eq!(files(), 0, "the files stored are removed: {log}");
    assert_eq!(n.metric("latlab_monitor_windows_in_files"), 0.0);
    n.db_check();
    n.finish(how);
    let _ = dir;
}

/// An ext4 file system that fails under the daemon and turns read-only (`errors=remount-ro`,
/// the default of many distributions) cannot come back without an unmount: the daemon keeps
/// measuring, says so once, and at the stop exits with 1 (a restart can help once the file
/// system is repaired) saying where it kept the windows it could not store; what it had stored is
/// whole, and with the kept windows imported no window of the run is missing. Windows beyond the
/// memory's bound (here 3 s of windows, and no byte beyond) go to files while it runs, each said
/// when written, and the command the exit prints (a pattern, for so many files) stores them all.
#[test]
fn a_file_system_turned_read_only_loses_nothing_already_stored() {
    if !root_or_skip("mounting a loop file system in a mount namespace")
        || !require("unshare")
        || !require("nsenter")
        || !require("findmnt")
        || !require("mkfs.ext4")
        || !require("debugfs")
        || !require("e2fsck")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fs.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    run_ok(Command::new("mkfs.ext4").arg("-q").arg(&img));
    let n = Namespaced::start(
        dir.path(),
        &format!("-o loop,errors=remount-ro {}", img.display()),
        &["--backlog-bound", "1,3"],
    );
    let pid = n.daemon.pid().to_string();
    let out = run_ok(
        latlab_testkit::command("nsenter")
            .args(["-t", &pid, "-m", "findmnt", "-n", "-o", "SOURCE"])
            .arg(&n.fs),
    );
    let dev = String::from_utf8_lossy(&out.stdout)
        .trim()
        .replace("/dev/", "");
    let trigger = PathBuf::from(format!("/sys/fs/ext4/{dev}/trigger_fs_error"));
    if !trigger.exists() {
        eprintln!("skipped: this kernel has no {}", trigger.display());
        return;
    }
    std::fs::write(&trigger, "1").unwrap();
    wait_for("the outage said", Duration::from_secs(15), || {
        n.daemon.log().contains("the store cannot be written")
    });
    // Three files while it runs, and one at the exit: more than the exit lists one by one.
    wait_for("windows kept in 3 files", Duration::from_secs(30), || {
        n.daemon.log().matches("reached their bound").count() >= 3
    });
    // /metrics counts what waits in files.
    assert!(n.metric("latlab_monitor_windows_in_files") >= 3.0);
    let mut d = n.daemon;
    assert!(d.child.try_wait().unwrap().is_none(), "still measuring");
    let (status, log) = d.end(libc::SIGTERM);
    assert_eq!(status.code(), Some(1), "{log}");
    assert_eq!(
        log.matches("the store cannot be written").count(),
        1,
        "{log}"
    );
    // What the store could not take is kept in files (beside it is read-only: in TMPDIR): those
    // given up while it ran, each said when written, and what was left at the exit. The exit
    // says them all once (they were lost, and said so four times).
    let kept: Vec<PathBuf> = std::fs::read_dir(dir.path().join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(kept.len() >= 4, "{log}");
    let named = kept
        .iter()
        .filter(|f| log.contains(f.to_str().unwrap()))
        .count();
    assert_eq!(named, kept.len() - 1, "each but the exit's said: {log}");
    assert!(!log.contains("are lost"), "{log}");
    let exit = log
        .lines()
        .find(|l| l.contains("the store could not take are kept in"))
        .unwrap_or_else(|| panic!("the exit names the files: {log}"));
    // Each digit of the start a `?`: a `*` would take in the files of a series `t-…` too.
    let pattern = format!(
        "{}/latlab-unsaved-windows-t-{}.json",
        dir.path().join("tmp").display(),
        "?".repeat(19)
    );
    assert!(
        exit.contains(&format!("are kept in {} files, {pattern} (", kept.len())),
        "{exit}"
    );
    let command = exit
        .split_once("(latlab db import-json ")
        .and_then(|(_, c)| c.split_once(" --db "))
        .unwrap_or_else(|| panic!("the import command: {exit}"))
        .0;
    // The namespace is gone with the daemon, and the loop device with its mount: repair the
    // image as a boot would (replaying its journal) and read the store out of it.
    let fsck = Command::new("e2fsck")
        .arg("-fy")
        .arg(&img)
        .output()
        .unwrap();
    assert!(
        matches!(fsck.status.code(), Some(0..=2)),
        "e2fsck: {}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    let copy = dir.path().join("copy.db");
    for (from, to) in [
        ("/m.db", copy.clone()),
        ("/m.db-wal", dir.path().join("copy.db-wal")),
    ] {
        run_ok(
            Command::new("debugfs")
                .args(["-R", &format!("dump {from} {}", to.display())])
                .arg(&img),
        );
    }
    let stored = sets(&copy, "t");
    assert!(stored.len() >= 2, "{log}");
    assert_no_gap(&stored, &log);
    // The kept windows go in after the stored ones, by the command the exit printed (run by a
    // shell): together, every window of the run. A second import stores none twice.
    let shell = || {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("\"$0\" db import-json {command} --db \"$1\""))
            .arg(env!("CARGO_BIN_EXE_latlab"))
            .arg(&copy);
        c
    };
    let import = || String::from_utf8_lossy(&run_ok(&mut shell()).stdout).to_string();
    // Not while a daemon records the series in that store (here this test holds its lock):
    // the sets would take the numbers it gives its windows.
    let held = latlab_sys::pidlock::PidLock::acquire(&latlab_store::lock_path(&copy, "t")).unwrap();
    let refused = shell().output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains(&format!(
            "is being recorded by a running daemon (PID {}): it stores the windows kept for its \
             store itself",
            std::process::id()
        )),
        "{err}"
    );
    assert_eq!(sets(&copy, "t").len(), stored.len(), "nothing stored");
    drop(held);
    let said = import();
    let all = sets(&copy, "t");
    assert!(all.len() > stored.len() + 1, "{said}");
    assert_no_gap(&all, &log);
    let again = import();
    assert_eq!(
        again
            .matches("0 window set(s) stored in series t; ")
            .count(),
        kept.len(),
        "{again}"
    );
    assert_eq!(sets(&copy, "t").len(), all.len());
    db_check(&copy);
    // The repaired file system mounted again, the next start of the series stores the files
    // itself, after the windows stored before them, and removes them. A file kept for an
    // earlier store made at the same path (its series made at another time) is left, and said.
    let mut earlier: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&kept[0]).unwrap()).unwrap();
    earlier["series_created"] = "2000-01-01T00:00:00Z".into();
    let foreign = dir
        .path()
        .join("tmp/latlab-unsaved-windows-t-0000000000000000001.json");
    std::fs::write(&foreign, earlier.to_string()).unwrap();
    let n = Namespaced::start(dir.path(), &format!("-o loop {}", img.display()), &[]);
    wait_for("the kept windows stored", Duration::from_secs(20), || {
        n.daemon.log().contains("are stored now")
    });
    let log = n.daemon.log();
    // Named one by one: a pattern would name the file left too.
    let line = log
        .lines()
        .find(|l| l.contains("an earlier daemon of this series could not store"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.starts_with(&format!(
            "latlab: {} window set(s) an earlier daemon of this series could not store, kept in ",
            all.len() - stored.len(),
        )) && kept.iter().all(|f| line.contains(f.to_str().unwrap()))
            && line.ends_with(", are stored now"),
        "{line}"
    );
    assert!(
        log.contains(&format!("continuing series t at window {}", all.len())),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "files of window sets of this series left as they are: {} (kept for an earlier \
             store at this path)",
            foreign.display()
        )),
        "{log}"
    );
    let left: Vec<PathBuf> = std::fs::read_dir(dir.path().join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, [foreign]);
    let now = n.sets();
    // The first run whole, then the gap of the stop, then the second run.
    let first_run = now
        .windows(2)
        .position(|p| p[1].start_unix_ns != p[0].end_unix_ns)
        .map_or(now.len(), |i| i + 1);
    assert_eq!(first_run, all.len(), "{log}");
    assert_no_gap(&now[..first_run], &log);
    n.db_check();
    n.daemon.stop();
}

/// A store renamed under the daemon (`mv` of the file alone, as log rotation does) keeps every
/// window written to it: its journal goes with it. The windows written between the rename and
/// the daemon noticing it are stored again in the new store at the path, so the two together
/// hold every window of the run.
#[test]
fn a_renamed_store_keeps_its_windows_and_the_new_one_goes_on_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (db, moved) = (dir.path().join("m.db"), dir.path().join("moved.db"));
    let mut d = started(&db, dir.path(), 2);
    std::fs::rename(&db, &moved).unwrap();
    d.wait_until("a window in the new store", Duration::from_secs(30), || {
        db.exists() && !sets(&db, "t").is_empty()
    });
    d.wait_until(
        "two windows in the new store",
        Duration::from_secs(30),
        || sets(&db, "t").len() >= 2,
    );
    let log = d.term();
    assert!(
        log.contains(&format!("was renamed to {}", moved.display())),
        "{log}"
    );
    let (old, new) = (sets(&moved, "t"), sets(&db, "t"));
    let mut all: Vec<u64> = old.iter().chain(&new).map(|s| s.window_index).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.first(), Some(&0), "{log}");
    assert_eq!(
        all.len() as u64,
        all.last().unwrap() + 1,
        "every window in one of the two files: old {:?}, new {:?}: {log}",
        old.iter().map(|s| s.window_index).collect::<Vec<_>>(),
        new.iter().map(|s| s.window_index).collect::<Vec<_>>()
    );
    let orphaned: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("orphaned"))
        .collect();
    assert!(orphaned.is_empty(), "{orphaned:?}");
    db_check(&moved);
    db_check(&db);
}

#[test]
fn a_deleted_store_is_made_again_and_a_foreign_file_in_its_place_waited_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let (d, addr) = serving(&db, dir.path());
    // No count served from the old file can reach the new one's once it has more windows.
    let old_count = sets(&db, "t").len() + 1;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    wait_for("a window in the new store", Duration::from_secs(30), || {
        db.exists() && !sets(&db, "t").is_empty()
    });
    let marks = annotations(&db, "t", "store");
    assert!(
        marks.iter().any(|m| m.contains("was deleted")),
        "the new store says why it starts here: {marks:?}"
    );
    // And how its series is measured, as a start does.
    let starts = annotations(&db, "t", "start");
    assert!(
        starts.len() == 1
            && starts[0].contains("clock-nanosleep every 1ms")
            && starts[0].contains("begun in a new store file"),
        "{starts:?}"
    );
    // The web server follows: /metrics counts the new store's windows, and no connection keeps
    // the deleted file (and its space) open.
    wait_for(
        "/metrics reading the new store",
        Duration::from_secs(30),
        || {
            let stored = sets(&db, "t").len();
            stored > old_count && windows_served(addr) == stored as u64
        },
    );
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.contains("m.db") && p.ends_with("(deleted)"))
        .collect();
    assert!(held.is_empty(), "the deleted store held open: {held:?}");
    // Another application's file takes the store's place: nothing is written into it.
    let foreign = dir.path().join("foreign");
    std::fs::write(&foreign, b"not a store\n").unwrap();
    std::fs::rename(&foreign, &db).unwrap();
    wait_for("the foreign file noticed", Duration::from_secs(15), || {
        d.log().contains("cannot be written")
    });
    // /metrics tells a fleet's alerting what waits in memory.
    wait_for(
        "queued windows on /metrics",
        Duration::from_secs(15),
        || {
            let (_, _, text) = common::get(addr, "/metrics");
            text.lines()
                .find_map(|l| l.strip_prefix("latlab_monitor_windows_queued{series=\"t\"} "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .is_some_and(|n| n >= 1)
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        std::fs::read(&db).unwrap(),
        b"not a store\n",
        "left untouched"
    );
    std::fs::remove_file(&db).unwrap();
    wait_for("the parked windows stored", Duration::from_secs(30), || {
        d.log().contains("are now stored")
    });
    let log = d.term();
    let after = sets(&db, "t");
    assert_no_gap(&after, &log);
    assert!(
        after.len() >= 4,
        "the parked windows and the ones after: {log}"
    );
    db_check(&db);
}

/// A store written over in place (a mistaken `--junit store.db`, `cp other store.db`: the same
/// file, new contents) is noticed at the next window: the daemon says so, writes nothing more
/// into it and keeps the windows in memory, then stores them in a new store once the file is
/// gone. (It went on "storing" windows into the ruined file, counting them as written.)
#[test]
fn a_store_written_over_in_place_is_noticed_and_its_windows_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    // The web server's connections are open on the file too.
    let (mut d, addr) = serving(&db, dir.path());
    let xml = b"<?xml version=\"1.0\"?>\n<testsuites/>\n";
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&db)
        .and_then(|mut f| std::io::Write::write_all(&mut f, xml))
        .unwrap();
    wait_for("the overwrite noticed", Duration::from_secs(30), || {
        d.log()
            .contains("was written over in place by another program")
    });
    // The API says the store cannot be read now (503), not an internal error.
    let (status, _, body) = common::get(addr, "/api/series");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("the store cannot be read now"), "{body}");
    // Neither the keeper nor a reader letting go of it copies the journal into it.
    windows_served(addr);
    std::thread::sleep(Duration::from_secs(2));
    windows_served(addr);
    assert!(
        std::fs::read(&db).unwrap() == xml,
        "written into: {}",
        d.log()
    );
    std::fs::remove_file(&db).unwrap();
    d.wait_until("the parked windows stored", Duration::from_secs(30), || {
        sets(&db, "t").len() >= 3
    });
    let log = d.term();
    let after = sets(&db, "t");
    assert_no_gap(&after, &log);
    db_check(&db);
}

/// `sh -c script` in a mount namespace of its own, `"$@"` in it the command line of `cmd`.
fn in_mount_namespace(script: &str, cmd: &Command) -> std::process::Output {
    latlab_testkit::command("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .output()
        .unwrap()
}

/// `--check-config` fails where a start would: a store on a read-only file system could be read,
/// but the daemon writes it, its lock and its journal (it said "a latlab store" and exited 0,
/// and the start then failed on the lock).
#[test]
fn check_config_refuses_a_store_it_could_not_write() {
    if !root_or_skip("a read-only bind mount in a mount namespace") || !require("unshare") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = dir.path().join("ro");
    std::fs::create_dir(&fs).unwrap();
    drop(Store::open(fs.join("m.db")).unwrap());
    let script = format!(
        "mount --bind {d} {d} && mount -o remount,ro,bind {d} && exec \"$@\" --check-config",
        d = fs.display()
    );
    let out = in_mount_namespace(&script, &monitor(&fs.join("m.db"), "t"));
    let err = String::from_utf8_lossy(&out.stderr);
    // Refused as a start now refuses it, as an unwritable directory for a new store is.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the store is not writable"), "{err}");
    // Outside the namespace nothing was mounted, and the same check passes.
    run_ok(monitor(&fs.join("m.db"), "t").arg("--check-config"));
}

/// On a full file system `--check-config` fails as the start would (it said the store "will be
/// created" and exited 0), and neither the start nor `measure --db` leaves an empty lock file or
/// store behind, nor `measure --json` a file cut short.
#[test]
fn a_full_file_system_fails_the_check_and_a_refused_start_leaves_nothing() {
    if !root_or_skip("mounting a tmpfs in a mount namespace") || !require("unshare") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = dir.path().join("full");
    std::fs::create_dir(&fs).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=1m latlab-test {d} || exit 9
         dd if=/dev/zero of={d}/fill bs=64k 2>/dev/null
         \"$@\" --check-config >/dev/null 2>&1; echo check=$?
         \"$@\" >/dev/null 2>&1; echo start=$?
         \"$1\" measure -D 0.1s -q --db {d}/m.db >/dev/null 2>&1; echo measure=$?
         \"$1\" measure -D 0.1s -q --json {d}/r.json >/dev/null 2>&1; echo json=$?
         ls -A {d}",
        d = fs.display()
    );
    let out = in_mount_namespace(&script, &monitor(&fs.join("new.db"), "t"));
    let said = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(
        lines,
        // A full disk fails every command alike (exit 1): no bad input, it may work later.
        ["check=1", "start=1", "measure=1", "json=1", "fill"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Another program's reader that opens and closes the store (Python's sqlite3, the sqlite3
/// shell) leaves the running daemon's store as it was: the daemon, its web server's readers
/// included, keeps SQLite's locks on it.
/// (Its check for a store written over opened and closed the file each window, which dropped
/// them: the reader then took the store for unused, copied the journal into it and deleted it,
/// and the windows after went to the deleted journal, seen by no reader.)
#[test]
fn another_programs_reader_leaves_the_running_store_alone() {
    if !require("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    // Serving too: the web server's readers open the store in the daemon's process.
    let (mut d, addr) = serving(&db, dir.path());
    let read = format!(
        "import sqlite3; c = sqlite3.connect({:?}); \
         c.execute('select count(*) from monitor_windows').fetchone(); c.close()",
        db.display().to_string()
    );
    run_ok(latlab_testkit::command("python3").args(["-c", &read]));
    windows_served(addr);
    let wal = dir.path().join("m.db-wal");
    assert!(
        wal.exists(),
        "the daemon's journal was taken away: {}",
        d.log()
    );
    let before = sets(&db, "t").len();
    d.wait_until(
        "two more windows seen by a reader",
        Duration::from_secs(30),
        || sets(&db, "t").len() >= before + 2,
    );
    let log = d.term();
    assert_no_gap(&sets(&db, "t"), &log);
    db_check(&db);
}
