//! `latlab monitor` and `latlab serve` run for real: windows stored, SIGKILL and restart, the
//! retention merge, `/metrics` scraped by a real Prometheus and read back through its query
//! API, the dashboard rendered in headless Chromium, the governor schedule on a fixture tree,
//! `--check-config`, bad input and bad stores, and the web server's limits.
//!
//! As root the daemon measures with SCHED_FIFO; otherwise with SCHED_OTHER (and says so).
//! Tests that need Prometheus or Chromium skip with the reason when they are missing.
#![allow(clippy::unwrap_used)]

mod common;

use common::{END, chromium, console_lines, get, get_json, http, monitor, prom_query};
use latlab_hist::Histogram;
use latlab_store::{MonitorWindow, SeriesConfig, SeriesId, SeriesSpec, Store, WindowSet};
use latlab_testkit::process::{Proc, free_addr, wait_for};
use latlab_testkit::{assert_one_line_error, latlab, policy_args, require, stderr};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SEC: u64 = 1_000_000_000;

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn series(store: &Store, name: &str) -> SeriesId {
    store
        .find_series(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no series {name}"))
}

fn set_count(db: &Path, name: &str) -> usize {
    common::sets(db, name).len()
}

/// The daemon on series `name` storing into `dir/m.db` and serving on a free loopback port,
/// with `extra` options (its log `dir/d.log`): the daemon, the store and the address.
fn listening_monitor(dir: &Path, name: &str, extra: &[&str]) -> (Proc, PathBuf, SocketAddr) {
    let db = dir.join("m.db");
    let addr = free_addr();
    let listen = addr.to_string();
    let mut args = vec!["--name", name, "--listen", &listen];
    args.extend(extra);
    let d = Proc::start(monitor(&db, &args), dir.join("d.log"));
    (d, db, addr)
}

#[test]
fn the_daemon_stores_windows_and_a_killed_one_continues_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let mut d = Proc::start(
        monitor(&db, &["--name", "t", "--listen", "off"]),
        dir.path().join("1.log"),
    );
    d.wait_until("3 stored windows", Duration::from_secs(30), || {
        set_count(&db, "t") >= 3
    });
    std::thread::sleep(Duration::from_millis(400));
    let killed_at = unix_now();
    let log1 = d.kill9();

    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "t");
    let sets = store.monitor_sets(id, 0, END).unwrap();
    let first = sets[0].start_unix_ns;
    let ended = ((killed_at - first) / SEC) as usize;
    assert!(
        sets.len() + 1 >= ended && sets.len() <= ended,
        "{} windows had ended at the SIGKILL, {} stored (at most one may be lost): {log1}",
        ended,
        sets.len()
    );
    let cpus = std::thread::available_parallelism().unwrap().get();
    let mut periods = 0;
    for (i, s) in sets.iter().enumerate() {
        assert_eq!(s.window_index, i as u64, "indexes from 0 without gaps");
        assert_eq!(s.end_unix_ns - s.start_unix_ns, SEC, "whole windows");
        assert!(
            s.cost_cpu_time_ns.is_some(),
            "latlab's own CPU time per window"
        );
        let ws: Vec<_> = store
            .monitor_windows(id, s.start_unix_ns, s.end_unix_ns, None)
            .unwrap()
            .into_iter()
            .filter(|w| w.start_unix_ns == s.start_unix_ns)
            .collect();
        assert_eq!(ws.len(), cpus, "one window per measured CPU");
        for w in &ws {
            // A stall across a window boundary counts its missed periods in the window where
            // the late wake-up landed, so only the total is exact.
            periods += w.count + w.missed;
            assert!(w.count <= 1000, "at most window / interval samples");
            assert!(w.min_ns <= w.p99_ns && w.p99_ns <= w.p99_9_ns && w.p99_9_ns <= w.max_ns);
            assert!(w.cpu_summary.is_some(), "sampler summary per window");
        }
    }
    let expected = (sets.len() * cpus * 1000) as u64;
    assert!(
        periods.abs_diff(expected) * 50 <= expected,
        "count + missed over the windows ({periods}) = windows x CPUs x window / interval ({expected})"
    );
    let ann = store.annotations(id, 0, END).unwrap();
    assert_eq!(ann.iter().filter(|a| a.kind == "start").count(), 1);
    assert_eq!(ann.iter().filter(|a| a.kind == "stop").count(), 0, "killed");
    drop(store);

    // Restarted with the same name: the series continues. A file of window sets a daemon of
    // the series could not store lies beside the store, one that does not read: the restart
    // names it (a file that reads is stored: `monitor_faults.rs`). One of series `t-2` is not
    // this series'.
    let kept = dir
        .path()
        .join("latlab-unsaved-windows-t-0000000000000000001.json");
    std::fs::write(&kept, "{}").unwrap();
    let other = dir
        .path()
        .join("latlab-unsaved-windows-t-2-0000000000000000001.json");
    std::fs::write(&other, "{}").unwrap();
    let mut restart = monitor(&db, &["--name", "t", "--listen", "off"]);
    // No file another run left in the machine's temporary directory is named.
    restart.env("TMPDIR", dir.path());
    let mut d = Proc::start(restart, dir.path().join("2.log"));
    let before = sets.len();
    d.wait_until("2 more windows", Duration::from_secs(30), || {
        set_count(&db, "t") >= before + 2
    });
    let log2 = d.stop();
    assert!(log2.contains("continuing series t"), "{log2}");
    let store = Store::open_existing(&db).unwrap();
    let all = store.monitor_sets(id, 0, END).unwrap();
    let new: Vec<_> = all.iter().skip(before).collect();
    assert!(
        new.len() >= 3,
        "two whole windows and the open one stored at SIGINT"
    );
    assert_eq!(new[0].window_index, sets.last().unwrap().window_index + 1);
    for pair in all.windows(2) {
        assert!(pair[0].end_unix_ns <= pair[1].start_unix_ns, "no overlap");
        assert_eq!(pair[0].window_index + 1, pair[1].window_index);
    }
    let last = new.last().unwrap();
    assert!(
        last.end_unix_ns - last.start_unix_ns <= SEC,
        "the open window is stored up to the stop"
    );
    let ann = store.annotations(id, 0, END).unwrap();
    let starts: Vec<_> = ann.iter().filter(|a| a.kind == "start").collect();
    assert_eq!(starts.len(), 2);
    // The SIGKILL left no stop in the store: the restart says what that lost.
    assert!(
        starts[1].text.contains("continues the series after")
            && starts[1].text.contains("did not record its stop"),
        "{:?}",
        starts[1]
    );
    assert!(log2.contains("did not record its stop"), "{log2}");
    assert!(
        log2.contains(&format!(
            "files of window sets of this series left as they are: {} (it does not read: ",
            kept.display(),
        )),
        "{log2}"
    );
    assert!(!log2.contains("t-2-"), "{log2}");
    std::fs::remove_file(&kept).unwrap();
    let stop = ann.iter().find(|a| a.kind == "stop").unwrap();
    assert!(stop.text.contains("SIGINT"), "{stop:?}");
    // The series' report counts the time its windows cover, not the gap the SIGKILL left.
    let covered: u64 = all.iter().map(|s| s.end_unix_ns - s.start_unix_ns).sum();
    let span = last.end_unix_ns - all[0].start_unix_ns;
    assert!(covered < span, "a gap between the runs");
    drop(store);
    let report = series_report(&db, "t");
    let run = &report["cells"][0]["repeats"][0];
    assert_eq!(run["elapsed_ns"], covered, "{run}");

    // After a stop it recorded, a restart says only how long the series stood.
    let mut d = Proc::start(
        monitor(&db, &["--name", "t", "--listen", "off"]),
        dir.path().join("3.log"),
    );
    let before = all.len();
    d.wait_until("a window", Duration::from_secs(30), || {
        set_count(&db, "t") > before
    });
    let log3 = d.stop();
    assert!(!log3.contains("did not record its stop"), "{log3}");
    let store = Store::open_existing(&db).unwrap();
    let ann = store.annotations(id, 0, END).unwrap();
    let third = ann.iter().filter(|a| a.kind == "start").nth(2).unwrap();
    assert!(
        third.text.contains("continues the series, stopped for "),
        "{third:?}"
    );
    assert!(!third.text.contains("did not record"), "{third:?}");
}

/// SIGHUP, which service managers and habit send to make a daemon reload, leaves the daemon
/// and the server running (there is nothing to reload) and says so; SIGTERM still stops them.
#[test]
fn sighup_leaves_the_daemon_and_the_server_running() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, db, addr) = listening_monitor(dir.path(), "h", &[]);
    d.wait_until("a window", Duration::from_secs(30), || {
        set_count(&db, "h") >= 1
    });
    d.signal(libc::SIGHUP);
    let said = "SIGHUP: nothing to reload";
    d.wait_until("SIGHUP said", Duration::from_secs(10), || {
        d_log_has(&db, said)
    });
    let before = set_count(&db, "h");
    d.wait_until("a window after it", Duration::from_secs(30), || {
        set_count(&db, "h") > before
    });
    assert_eq!(get(addr, "/metrics").0, 200);
    let log = d.term();
    assert!(log.contains("stopped by SIGTERM"), "{log}");

    let (mut s, addr) = serve(&db, dir.path());
    s.signal(libc::SIGHUP);
    s.wait_until("SIGHUP said", Duration::from_secs(10), || {
        std::fs::read_to_string(dir.path().join(format!("serve-{}.log", addr.port())))
            .unwrap_or_default()
            .contains(said)
    });
    assert_eq!(get(addr, "/metrics").0, 200);
    s.term();
}

/// The hangup of the terminal a daemon runs in (the kernel's SIGHUP, not one a process sends)
/// stops it cleanly: its open window stored, a stop recorded, exit 0. Its terminal is gone, so
/// nothing it says after may fail it.
#[test]
fn a_terminal_hangup_stops_the_daemon_cleanly() {
    use std::os::unix::io::FromRawFd;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let (mut master, mut slave) = (0, 0);
    // SAFETY: out pointers to two ints; no name, termios or window size.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    let mut cmd = monitor(&db, &["--name", "hup", "--listen", "off"]);
    // SAFETY: dup of a descriptor this test owns; each Stdio takes its own copy.
    let tty = || unsafe { std::process::Stdio::from_raw_fd(libc::dup(slave)) };
    cmd.stdin(tty()).stdout(tty()).stderr(tty());
    // SAFETY: between fork and exec only async-signal-safe calls: a new session whose
    // controlling terminal is the pty.
    unsafe {
        cmd.pre_exec(move || {
            // The master stays with the test alone: closing it must hang the terminal up.
            libc::close(master);
            libc::setsid();
            libc::ioctl(slave, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // SAFETY: closing a descriptor this test owns.
    unsafe { libc::close(slave) };
    // (The few lines the daemon writes before the hangup fit in the pty's buffer unread.)
    latlab_testkit::process::wait_while_running(
        &mut child,
        "a stored window",
        Duration::from_secs(30),
        || set_count(&db, "hup") >= 1,
    );
    // Closing the master side hangs the terminal up: the session leader, the daemon, gets
    // the kernel's SIGHUP.
    // SAFETY: the last descriptor of the master, this test's.
    unsafe { libc::close(master) };
    let status = latlab_testkit::process::wait_exit(&mut child, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "hup");
    let ann = store.annotations(id, 0, END).unwrap();
    assert!(
        ann.iter()
            .any(|a| a.kind == "stop" && a.text.contains("SIGHUP")),
        "{ann:?}"
    );
}

/// Whether the daemon's log beside the store `db` says `what`.
fn d_log_has(db: &Path, what: &str) -> bool {
    let log = db.with_file_name("d.log");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(what)
}

/// `latlab report series:NAME --format json` of the store `db`.
fn series_report(db: &Path, name: &str) -> serde_json::Value {
    let out = latlab_testkit::run_ok(
        latlab!()
            .args([
                "report",
                &format!("series:{name}"),
                "--format",
                "json",
                "--db",
            ])
            .arg(db),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A histogram with a known shape for window `k`.
fn hist(k: u64) -> Histogram {
    let mut h = Histogram::new();
    h.record_n(20_000 + k * 100, 900);
    h.record_n(60_000, 90 + k);
    h.record(1_000_000 + k * 7_919);
    h
}

/// How `monitor()` below measures (a series continues only so): fifo 80 as root, else other.
fn as_monitor_measures() -> latlab_model::MeasureConfig {
    if latlab_testkit::is_root() {
        latlab_model::MeasureConfig {
            priority: 80,
            ..Default::default()
        }
    } else {
        latlab_model::MeasureConfig {
            policy: latlab_model::Policy::Other,
            priority: 0,
            ..Default::default()
        }
    }
}

/// The daemon on series `name` of `db` keeping windows for an hour (its log in `dir`).
fn retaining_an_hour(db: &Path, name: &str, dir: &Path) -> Proc {
    Proc::start(
        monitor(
            db,
            &[
                "--name",
                name,
                "--listen",
                "off",
                "--retention",
                "1h",
                "--cpus",
                "0",
            ],
        ),
        dir.join("d.log"),
    )
}

/// A backlog of hours to merge (a daemon that was down for long) is said in one line, not one
/// line an hour.
#[test]
fn a_retention_backlog_is_said_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let hour = 3_600 * SEC;
    let h0 = (unix_now() - 5 * hour) / hour * hour;
    seed_spaced(
        &db,
        SeriesConfig::new(&Default::default(), as_monitor_measures()),
        ("b", SEC),
        (h0, 36, 300 * SEC),
        |_| (0, Vec::new()),
    );
    let d = retaining_an_hour(&db, "b", dir.path());
    wait_for("three hours merged", Duration::from_secs(30), || {
        let Ok(store) = Store::open_existing(&db) else {
            return false;
        };
        let id = series(&store, "b");
        store
            .monitor_sets(id, 0, END)
            .is_ok_and(|s| s.iter().filter(|r| r.windows == 12).count() == 3)
    });
    let log = d.stop();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("retention: merged"))
        .collect();
    assert_eq!(
        said,
        ["latlab: retention: merged 36 windows into 3 hourly rows"],
        "{log}"
    );
}

#[test]
fn retention_merges_old_windows_into_hours_keeping_counts_and_maxima() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let hour = 3_600 * SEC;
    let h0 = (unix_now() - 3 * hour) / hour * hour;
    // Twelve one-second windows (the daemon's below) spread over an hour three hours ago, as
    // an earlier daemon left them: window k with k missed periods and one spike.
    seed_spaced(
        &db,
        SeriesConfig::new(&Default::default(), as_monitor_measures()),
        ("r", SEC),
        (h0, 12, 300 * SEC),
        |k| {
            (
                k,
                vec![latlab_store::MonitorSpike {
                    at_unix_ns: h0 + k * 300 * SEC + 5,
                    value_ns: 1_000_000 + k,
                }],
            )
        },
    );
    let d = retaining_an_hour(&db, "r", dir.path());
    // The twelve old windows become one row, then the daemon's own follow.
    wait_for(
        "the merge and a new window",
        Duration::from_secs(30),
        || set_count(&db, "r") == 2,
    );
    let log = d.stop();
    assert!(
        log.contains("merged 12 windows into 1 hourly row\n"),
        "{log}"
    );

    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "r");
    let old = store.monitor_sets(id, h0, h0 + hour).unwrap();
    assert_eq!(old.len(), 1, "one hourly row");
    assert_eq!(
        (
            old[0].windows,
            old[0].window_index,
            old[0].last_window_index
        ),
        (12, 0, 11)
    );
    assert_eq!(old[0].covered_ns, 12 * SEC, "the time the windows cover");
    assert_eq!(old[0].cost_cpu_time_ns, Some(12 * 5_000_000), "summed");
    for cpu in 0..2u32 {
        let mut merged = Histogram::new();
        for k in 0..12u64 {
            merged.merge(&hist(k + u64::from(cpu)));
        }
        let rows = store.monitor_windows(id, h0, h0 + hour, Some(cpu)).unwrap();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.count, merged.count(), "counts kept");
        assert_eq!(r.max_ns, merged.max(), "maximum kept");
        assert_eq!(r.min_ns, merged.min());
        assert_eq!(r.p99_9_ns, merged.percentile(99.9));
        assert_eq!(r.missed, (0..12).sum::<u64>());
        let (h, spikes) = store.monitor_window_detail(id, h0, cpu).unwrap().unwrap();
        assert_eq!(h, merged, "the histograms merged exactly");
        assert_eq!(spikes.len(), 12, "spikes kept");
    }
    // The daemon's own windows are recent and stay as measured.
    let recent = store.monitor_sets(id, h0 + hour, END).unwrap();
    assert!(!recent.is_empty() && recent.iter().all(|s| s.windows == 1));
    assert_eq!(
        recent[0].window_index, 12,
        "the series continued after the old windows"
    );
}

/// Query rows by their `cpu` label.
fn by_cpu(rows: &[(serde_json::Value, f64, f64)]) -> std::collections::BTreeMap<u32, f64> {
    rows.iter()
        .map(|(m, _, v)| (m["cpu"].as_str().unwrap().parse().unwrap(), *v))
        .collect()
}

#[test]
fn metrics_scraped_by_prometheus_match_the_store() {
    if !require("prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, db, addr) = listening_monitor(dir.path(), "p", &[]);
    let (prom, prom_addr) = common::prometheus(
        dir.path(),
        &format!("  - job_name: latlab\n    static_configs:\n      - targets: ['{addr}']\n"),
    );
    wait_for("a scrape with 3 windows", Duration::from_secs(60), || {
        prom_query(prom_addr, "latlab_monitor_last_window_index", None)
            .first()
            .is_some_and(|(_, _, v)| *v >= 3.0)
    });
    // Rates need several scrapes of the per-CPU series.
    wait_for(
        "three scrapes with windows",
        Duration::from_secs(60),
        || {
            let rows = prom_query(
                prom_addr,
                "count_over_time(latlab_missed_periods_total[1m])",
                None,
            );
            !rows.is_empty() && rows.iter().all(|(_, _, n)| *n >= 3.0)
        },
    );
    let up = prom_query(prom_addr, "up{job=\"latlab\"}", None);
    assert_eq!(
        up.first().map(|r| r.2),
        Some(1.0),
        "target up: {}",
        prom.log()
    );
    let (_, ts, idx) = prom_query(prom_addr, "latlab_monitor_last_window_index", None)[0].clone();
    let idx = idx as u64;
    let at = Some(ts);
    // Every query at the time of that scrape; per CPU by the `cpu` label.
    let query = |q: &str| prom_query(prom_addr, q, at);
    let per_cpu = |q: &str| by_cpu(&query(q));
    let count = per_cpu("latlab_wakeup_latency_seconds_count");
    let le100 = per_cpu("latlab_wakeup_latency_seconds_bucket{le=\"0.0001\"}");
    let inf = per_cpu("latlab_wakeup_latency_seconds_bucket{le=\"+Inf\"}");
    let sum = per_cpu("latlab_wakeup_latency_seconds_sum");
    let wmax = per_cpu("latlab_wakeup_latency_window_max_seconds");
    let missed = per_cpu("latlab_missed_periods_total");
    let q50 = query("histogram_quantile(0.5, latlab_wakeup_latency_seconds_bucket)");
    let info = query("latlab_system_info");
    let build = query("latlab_build_info");
    let cpuidle = query("latlab_cpuidle_state_time_seconds_total");
    // Every query of the Grafana dashboard in the repository runs on this Prometheus.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/grafana-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut dash_queries = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$instance", ".*")
                .replace("$cpu", ".*")
                .replace("$__rate_interval", "1m");
            let rows = prom_query(prom_addr, &expr, None);
            let optional = expr.contains("cpuidle")
                || expr.contains("power")
                || expr.contains("frequency")
                || expr.contains("histogram_quantile");
            assert!(optional || !rows.is_empty(), "no data for {expr}");
            dash_queries += 1;
        }
    }
    assert!(dash_queries >= 9);
    let log = d.stop();
    drop(prom);

    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "p");
    let sets: Vec<_> = store
        .monitor_sets(id, 0, END)
        .unwrap()
        .into_iter()
        .filter(|s| s.window_index <= idx)
        .collect();
    assert_eq!(sets.len() as u64, idx + 1, "{log}");
    let mut want: std::collections::BTreeMap<u32, (u64, u64, u128, u64, u64)> = Default::default();
    let last_start = sets.last().unwrap().start_unix_ns;
    let mut last_max = std::collections::BTreeMap::new();
    for s in &sets {
        for w in store
            .monitor_windows(id, s.start_unix_ns, s.end_unix_ns, None)
            .unwrap()
            .into_iter()
            .filter(|w| w.start_unix_ns == s.start_unix_ns)
        {
            let (h, _) = store
                .monitor_window_detail(id, w.start_unix_ns, w.cpu)
                .unwrap()
                .unwrap();
            let e = want.entry(w.cpu).or_default();
            e.0 += h.count();
            e.1 += h.count_at_or_below(100_000);
            e.2 += u128::from(h.sum());
            e.3 += w.missed;
            if s.start_unix_ns == last_start {
                last_max.insert(w.cpu, w.max_ns);
            }
        }
    }
    assert!(!want.is_empty());
    for (cpu, (n, below, sum_ns, miss, _)) in &want {
        assert_eq!(count[cpu], *n as f64, "cpu{cpu} _count");
        assert_eq!(inf[cpu], *n as f64, "cpu{cpu} le=+Inf");
        assert_eq!(le100[cpu], *below as f64, "cpu{cpu} le=100us");
        assert!(
            (sum[cpu] - *sum_ns as f64 / 1e9).abs() < 1e-9,
            "cpu{cpu} _sum"
        );
        assert_eq!(missed[cpu], *miss as f64, "cpu{cpu} missed");
        assert!(
            (wmax[cpu] - last_max[cpu] as f64 / 1e9).abs() < 1e-12,
            "cpu{cpu} window max {} vs {}",
            wmax[cpu],
            last_max[cpu]
        );
    }
    assert_eq!(q50.len(), want.len());
    assert!(q50.iter().all(|(_, _, v)| v.is_finite() && *v > 0.0));
    assert_eq!(info[0].0["series"], "p");
    assert!(info[0].0["kernel"].as_str().is_some_and(|k| !k.is_empty()));
    assert!(info[0].0.get("preempt_model").is_some());
    assert_eq!(build[0].0["version"], env!("CARGO_PKG_VERSION"));
    let idle_cpus = Path::new("/sys/devices/system/cpu/cpu0/cpuidle/state0").exists();
    if idle_cpus {
        assert!(!cpuidle.is_empty(), "cpuidle counters where cpuidle exists");
    }
}

/// `latlab serve` of `db` on a free loopback port, once it accepts connections (log in `dir`).
fn serve(db: &Path, dir: &Path) -> (Proc, SocketAddr) {
    common::serve(db, dir, &[])
}

/// The markup of one chart in a dumped DOM, up to the end of its SVG.
fn chart_svg<'a>(dom: &'a str, chart: &str) -> &'a str {
    let part = dom
        .split(&format!("id=\"{chart}\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no {chart}"));
    part.split("</svg>").next().unwrap_or_default()
}

/// The tick labels of class `class` (`ytick`, `xtick`) of one chart in a dumped DOM.
fn tick_labels(dom: &str, chart: &str, class: &str) -> Vec<String> {
    chart_svg(dom, chart)
        .split(&format!("class=\"{class}\""))
        .skip(1)
        .map(|t| {
            let label = t.split('>').nth(1).unwrap_or_default();
            label.split('<').next().unwrap_or_default().to_string()
        })
        .collect()
}

/// The y-axis tick labels of one chart in a dumped DOM, as numbers.
fn y_ticks(dom: &str, chart: &str) -> Vec<f64> {
    tick_labels(dom, chart, "ytick")
        .iter()
        .map(|label| {
            label
                .parse()
                .unwrap_or_else(|e| panic!("{chart}: tick {label:?}: {e}"))
        })
        .collect()
}

#[test]
fn the_dashboard_renders_in_headless_chromium() {
    if !require("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, db, addr) = listening_monitor(dir.path(), "c", &["--spike", "1us"]);
    wait_for("3 stored windows", Duration::from_secs(30), || {
        set_count(&db, "c") >= 3
    });
    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "c");
    let worst = store.worst_windows(id, 0, END, 1).unwrap();
    let (start, cpu) = (worst[0].start_unix_ns, worst[0].cpu);
    let cpus: Vec<u32> = store
        .monitor_windows(id, 0, END, None)
        .unwrap()
        .iter()
        .map(|w| w.cpu)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let url = format!("http://{addr}/#window={start}:{cpu}");
    let profile = |n: &str| format!("--user-data-dir={}", dir.path().join(n).display());
    let (dom, log) = chromium(&[profile("p1"), "--dump-dom".into(), url.clone()]);
    assert!(
        dom.contains("id=\"stale\" class=\"stale\" hidden=\"\" data-checked=\"1\""),
        "a series being kept is checked and not said stale"
    );
    let shot = dir.path().join("dashboard.png");
    let (_, log2) = chromium(&[
        profile("p2"),
        "--window-size=1200,2400".into(),
        format!("--screenshot={}", shot.display()),
        url,
    ]);
    let phone = dir.path().join("dashboard-phone.png");
    let (_, log3) = chromium(&[
        profile("p3"),
        "--window-size=390,2400".into(),
        format!("--screenshot={}", phone.display()),
        format!("http://{addr}/"),
    ]);
    d.stop();

    for l in [&log, &log2, &log3] {
        let c = console_lines(l);
        assert!(c.is_empty(), "console messages: {c:?}");
    }
    assert!(
        dom.contains("data-ready=\"1\"") && dom.contains("data-done=\"1\""),
        "{dom}"
    );
    assert!(!dom.contains("data-errors"), "{dom}");
    for panel in [
        "panel-latency",
        "panel-cstates",
        "panel-freq",
        "panel-power",
        "panel-annotations",
        "panel-worst",
        "panel-experiments",
    ] {
        assert!(dom.contains(&format!("id=\"{panel}\"")), "{panel}");
    }
    for c in &cpus {
        for kind in ["max", "p999"] {
            assert!(
                dom.contains(&format!("data-cpu=\"{c}\" data-kind=\"{kind}\"")),
                "cpu{c} {kind} line missing"
            );
        }
        assert!(
            dom.contains(&format!("class=\"cpu-row\" data-cpu=\"{c}\"")),
            "cpu{c} idle row"
        );
    }
    assert!(dom.contains("class=\"clickable\""), "worst-window rows");
    // Linear axes tick at round values (0, 500, 1000 …), never at quarters of the top value;
    // one with nothing to plot (no power source here) has no scale at all.
    for chart in ["chart-freq", "chart-power", "chart-cost"] {
        let ticks = y_ticks(&dom, chart);
        if chart_svg(&dom, chart).contains("class=\"empty\"") {
            assert!(
                ticks.is_empty(),
                "{chart}: a scale without values {ticks:?}"
            );
            continue;
        }
        assert!(ticks.len() >= 2, "{chart}: {ticks:?}");
        let step = ticks[1] - ticks[0];
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6),
            "{chart}: step {step} in {ticks:?}"
        );
        for (i, t) in ticks.iter().enumerate() {
            assert!((t - step * i as f64).abs() < 1e-6, "{chart}: {ticks:?}");
        }
    }
    assert!(
        dom.contains("class=\"kind\">start<"),
        "start annotation listed"
    );
    // The window opened by the link: its histogram and spikes.
    let detail = dom.split("id=\"panel-window\"").nth(1).unwrap();
    assert!(!detail.starts_with(" hidden"), "detail panel shown");
    assert!(detail.contains(&format!("data-start=\"{start}\"")));
    assert!(detail.contains("class=\"bar\""), "histogram bars");
    assert!(
        detail.contains("above the threshold") || detail.contains("first 500 of"),
        "spikes listed"
    );

    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for p in [&shot, &phone] {
        assert!(
            std::fs::metadata(p).unwrap().len() > 20_000,
            "a rendered page"
        );
        let _ = std::fs::copy(
            p,
            target.join(format!(
                "monitor-{}",
                p.file_name().unwrap().to_string_lossy()
            )),
        );
    }
}

/// Synthetic series `name` written with `fill-monitor ARGS` into `DIR/NAME.db`, its path.
fn synthetic(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    latlab_testkit::run_ok(fill_monitor(&db, args).args(["--name", name]));
    db
}

/// `latlab fill-monitor --db DB ARGS`: a synthetic series written through the daemon's code.
fn fill_monitor(db: &Path, args: &[&str]) -> Command {
    let mut c = latlab!();
    c.args(["fill-monitor", "--db"]).arg(db).args(args);
    c
}

/// At 64 CPUs the page stays readable: every CPU in the heat map, the line charts and idle rows
/// only for the 8 worst, and the 5 worst named, all agreeing with the store.
#[test]
fn the_dashboard_shows_64_cpus_in_a_heat_map_and_names_the_worst() {
    if !require("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = synthetic(dir.path(), "m64", &["--cpus", "64", "--span", "2h"]);
    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "m64");
    let sets = store.monitor_sets(id, 0, END).unwrap().len();
    let mut worst: Vec<(u64, u32)> = Vec::new();
    for w in store.monitor_windows(id, 0, END, None).unwrap() {
        match worst.iter_mut().find(|(_, c)| *c == w.cpu) {
            Some(e) => e.0 = e.0.max(w.max_ns),
            None => worst.push((w.max_ns, w.cpu)),
        }
    }
    worst.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    drop(store);
    let (s, addr) = serve(&db, dir.path());
    let profile = |n: &str| format!("--user-data-dir={}", dir.path().join(n).display());
    let url = format!("http://{addr}/");
    let (dom, log) = chromium(&[profile("p1"), "--dump-dom".into(), url.clone()]);
    let shot = dir.path().join("dashboard-64.png");
    let (_, log2) = chromium(&[
        profile("p2"),
        "--window-size=1280,2000".into(),
        format!("--screenshot={}", shot.display()),
        url,
    ]);
    s.stop();
    for l in [&log, &log2] {
        let c = console_lines(l);
        assert!(c.is_empty(), "console messages: {c:?}");
    }
    assert!(!dom.contains("data-errors"), "{dom}");
    let all: Vec<String> = (0..64).map(|c| c.to_string()).collect();
    assert!(
        dom.contains(&format!("data-cpus=\"{}\"", all.join(","))),
        "64 CPUs"
    );
    // The heat map: a cell for every CPU and window, the 5 worst CPUs named.
    let heat = dom.split("id=\"chart-heat\"").nth(1).unwrap();
    assert!(
        heat.starts_with(&format!(" data-cells=\"{}\"", 64 * sets)),
        "{}",
        &heat[..80]
    );
    let named: Vec<String> = worst[..5].iter().map(|w| w.1.to_string()).collect();
    assert!(
        heat.contains(&format!("data-worst=\"{}\"", named.join(","))),
        "worst CPUs {named:?}: {}",
        &heat[..120]
    );
    // The line charts: the 8 worst CPUs, and a note saying so.
    let mut eight: Vec<u32> = worst[..8].iter().map(|w| w.1).collect();
    eight.sort_unstable();
    for cpu in 0..64u32 {
        let line = format!("data-cpu=\"{cpu}\" data-kind=\"max\"");
        assert_eq!(dom.contains(&line), eight.contains(&cpu), "cpu{cpu} line");
    }
    assert!(dom.contains("the 8 worst of 64 CPUs (all in the heat map)"));
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    assert!(std::fs::metadata(&shot).unwrap().len() > 20_000);
    let _ = std::fs::copy(&shot, target.join("monitor-dashboard-64.png"));
}

/// On a narrow screen a chart with nothing to show says so in lines that fit its width (one
/// line ran past both edges), and draws no scale for values it does not have.
#[test]
fn an_empty_chart_says_so_in_lines_that_fit_a_narrow_screen() {
    if !require("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A synthetic series has neither power readings nor idle states.
    let db = synthetic(dir.path(), "e", &["--cpus", "2", "--span", "1h"]);
    let (s, addr) = serve(&db, dir.path());
    let profile = format!("--user-data-dir={}", dir.path().join("p").display());
    let (dom, log) = chromium(&[
        profile,
        "--window-size=390,1600".into(),
        "--dump-dom".into(),
        format!("http://{addr}/"),
    ]);
    s.stop();
    assert!(console_lines(&log).is_empty(), "{log}");
    for (chart, note) in [
        (
            "chart-power",
            "no power source on this machine (RAPL, hwmon or battery)",
        ),
        (
            "chart-cstates",
            "no idle-state data (no cpuidle driver, or no windows in this range)",
        ),
    ] {
        let svg = chart_svg(&dom, chart);
        let width: f64 = svg
            .split("viewBox=\"0 0 ")
            .nth(1)
            .and_then(|v| v.split(' ').next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{chart}: no viewBox in {svg}"));
        // Headless Chromium lays a page out no narrower than 500 px, whatever the window.
        assert!(width < 500.0, "{chart}: drawn {width} wide");
        let text = svg
            .split("class=\"empty\"")
            .nth(1)
            .unwrap_or_else(|| panic!("{chart}: no note in {svg}"))
            .split("</text>")
            .next()
            .unwrap();
        let lines: Vec<&str> = text
            .split("<tspan")
            .skip(1)
            .map(|t| t.split('>').nth(1).unwrap().split('<').next().unwrap())
            .collect();
        assert_eq!(lines.join(" "), note, "{chart}");
        // The plot's width less its margins, at about 7 px a character of the 13 px note.
        for l in &lines {
            let px = l.chars().count() as f64 * 7.0;
            assert!(px <= width - 66.0, "{chart}: {l:?} wider than {width}");
        }
    }
    assert!(
        chart_svg(&dom, "chart-cstates").contains("<tspan x=\"")
            && dom.contains(">this range)</tspan>"),
        "the idle-state note is broken into lines at this width"
    );
    assert!(
        tick_labels(&dom, "chart-power", "ytick").is_empty(),
        "a scale without values"
    );
    // The lit "6 h" shows a series of one hour: all of it, and said so beside the buttons.
    let note = dom
        .split("id=\"range-note\"")
        .nth(1)
        .and_then(|r| r.split('>').nth(1))
        .and_then(|r| r.split('<').next())
        .unwrap_or_else(|| panic!("no range note"));
    assert!(
        note.starts_with("the series holds ") && note.ends_with(" min: all of it is shown"),
        "{note:?}"
    );
}

/// Over more than a few weeks the time axis is labelled by calendar month, a readable few, not
/// by week (a year of weekly labels ran into one another).
#[test]
fn the_dashboard_labels_half_a_year_by_month() {
    if !require("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = synthetic(
        dir.path(),
        "y",
        &[
            "--cpus",
            "2",
            "--window",
            "6h",
            "--span",
            "200d",
            "--interval",
            "1ms",
        ],
    );
    let (s, addr) = serve(&db, dir.path());
    let profile = format!("--user-data-dir={}", dir.path().join("p").display());
    let (dom, log) = chromium(&[
        profile,
        "--dump-dom".into(),
        format!("http://{addr}/#range=all"),
    ]);
    s.stop();
    assert!(console_lines(&log).is_empty(), "{log}");
    for chart in ["chart-latency", "chart-freq"] {
        let ticks = tick_labels(&dom, chart, "xtick");
        assert!((3..=8).contains(&ticks.len()), "{chart}: {ticks:?}");
        for t in &ticks {
            let ok = t.len() == 7 && t.as_bytes()[4] == b'-' && t[..4].parse::<u32>().is_ok();
            assert!(ok, "{chart}: {t:?} is not YYYY-MM in {ticks:?}");
        }
        let mut unique = ticks.clone();
        unique.dedup();
        assert_eq!(unique, ticks, "{chart}");
    }
    // "all" is what it says: no note beside the buttons.
    assert!(
        dom.contains(r#"<span id="range-note" class="range-note" aria-live="polite"></span>"#),
        "a range note beside \"all\""
    );
}

fn laptop_tree(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    latlab_testkit::copy_machine_to("laptop-intel", &[], &root);
    root
}

/// The governor of cpufreq policy 2 (CPU 2's) in the tree.
fn governor(root: &Path) -> String {
    policy_governor(root, 2)
}

fn policy_governor(root: &Path, policy: u32) -> String {
    let file = format!("sys/devices/system/cpu/cpufreq/policy{policy}/scaling_governor");
    std::fs::read_to_string(root.join(file))
        .unwrap()
        .trim()
        .to_string()
}

/// UTC time of day at least `s` seconds from now, as HH:MM:SS; None near midnight.
fn at_in(s: u64) -> Option<String> {
    let now = unix_now().div_ceil(SEC);
    let day = now % 86_400;
    if day + s + 30 >= 86_400 {
        return None;
    }
    let t = day + s;
    Some(format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60))
}

#[test]
fn the_schedule_switches_a_fixture_governor_and_a_restart_restores_a_killed_switch() {
    let dir = tempfile::tempdir().unwrap();
    let root = laptop_tree(dir.path());
    let db = dir.path().join("m.db");
    assert_eq!(governor(&root), "powersave");
    let (Some(t1), Some(t2)) = (at_in(2), at_in(4)) else {
        eprintln!("skipped: too close to midnight UTC for a schedule within the day");
        return;
    };
    let schedule = format!("{t1} cpu2:performance; {t2} cpu2:restore");
    let run = |schedule: Option<&str>, log: &str| {
        let mut c = latlab!();
        c.env("TZ", "UTC")
            .arg("--sysroot")
            .arg(&root)
            .args([
                "monitor",
                "--cpus",
                "0",
                "--window",
                "1s",
                "--interval",
                "1ms",
            ])
            .args(["--listen", "off", "--name", "s", "--db"])
            .arg(&db)
            .args(policy_args());
        if let Some(s) = schedule {
            c.args(["--schedule", s]);
        }
        Proc::start(c, dir.path().join(log))
    };
    // Phase 1: switched at t1, put back at t2.
    let d = run(Some(&schedule), "1.log");
    let started = Instant::now();
    wait_for("performance", Duration::from_secs(15), || {
        governor(&root) == "performance"
    });
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "not before t1"
    );
    wait_for("powersave again", Duration::from_secs(15), || {
        governor(&root) == "powersave"
    });
    let log = d.stop();
    let sched = common::annotations(&db, "s", "schedule");
    assert_eq!(sched.len(), 2, "{sched:?} {log}");
    assert_eq!(sched[0].cpu, Some(2));
    assert!(
        // The schedule shows a time on the minute without its seconds.
        sched[0].text.contains(&format!(
            "{} cpu2:performance",
            t1.strip_suffix(":00").unwrap_or(&t1)
        )) && sched[0].text.contains("powersave -> performance"),
        "{:?}",
        sched[0]
    );
    assert!(
        sched[1].text.contains("performance -> powersave"),
        "{:?}",
        sched[1]
    );

    // Phase 2: killed while the switch is in force; the next start puts it back.
    let (Some(t3), Some(t4)) = (at_in(1), at_in(3)) else {
        return;
    };
    let schedule = format!("{t3} cpu2:performance; {t4} cpu2:restore");
    let d = run(Some(&schedule), "2.log");
    wait_for("performance", Duration::from_secs(15), || {
        governor(&root) == "performance"
    });
    d.kill9();
    assert_eq!(governor(&root), "performance", "a SIGKILL restores nothing");
    // Every command says so, `tune status` names it and `tune restore` puts it back.
    let at = |args: &[&str]| {
        latlab!()
            .arg("--sysroot")
            .arg(&root)
            .args(args)
            .output()
            .unwrap()
    };
    let left = "--schedule ended without restoring the governor of cpu2";
    assert!(stderr(&at(&["sysinfo"])).contains(left));
    assert!(latlab_testkit::stdout(&at(&["tune", "status"])).contains(left));
    let out = latlab_testkit::stdout(&at(&["tune", "restore"]));
    assert!(
        out.contains("monitor schedule: cpu2: restored 1 value(s)"),
        "{out}"
    );
    assert_eq!(governor(&root), "powersave");
    assert!(!stderr(&at(&["sysinfo"])).contains(left));

    // Killed again: a restart puts it back, also without --schedule.
    let (Some(t5), Some(t6)) = (at_in(1), at_in(3)) else {
        return;
    };
    let d = run(
        Some(&format!("{t5} cpu2:performance; {t6} cpu2:restore")),
        "3.log",
    );
    wait_for("performance", Duration::from_secs(15), || {
        governor(&root) == "performance"
    });
    d.kill9();
    let d = run(None, "4.log");
    wait_for(
        "restored after the restart",
        Duration::from_secs(15),
        || governor(&root) == "powersave",
    );
    let log = d.stop();
    assert!(
        log.contains("restored 1 value(s) a previous run left"),
        "{log}"
    );
}

/// Every file of a tree (but latlab's own state), for byte-identical comparisons.
/// Everything under `root` but latlab's state directory.
fn snapshot(root: &Path) -> std::collections::BTreeMap<PathBuf, latlab_sys::fixture::Entry> {
    let mut out = latlab_sys::fixture::snapshot(root).unwrap();
    out.retain(|p, _| !p.starts_with("var/lib/latlab"));
    out
}

#[test]
fn a_profile_is_held_while_monitoring_and_restored_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let root = laptop_tree(dir.path());
    let db = dir.path().join("m.db");
    let before = snapshot(&root);
    let mut c = latlab!();
    c.arg("--sysroot")
        .arg(&root)
        .args([
            "monitor",
            "--cpus",
            "0",
            "--window",
            "1s",
            "--interval",
            "1ms",
        ])
        .args([
            "--listen",
            "off",
            "--name",
            "prof",
            "--profile",
            "lowlatency",
            "--db",
        ])
        .arg(&db)
        .args(policy_args());
    let mut d = Proc::start(c, dir.path().join("d.log"));
    wait_for(
        "the profile applied and a window",
        Duration::from_secs(30),
        // The measured CPU's policy only (CPU 0's).
        || policy_governor(&root, 0) == "performance" && set_count(&db, "prof") >= 1,
    );
    assert_eq!(
        governor(&root),
        "powersave",
        "a CPU not measured is left alone"
    );
    // A second daemon with a profile is refused while this one tunes, before it makes a store.
    let other = dir.path().join("other.db");
    let out = latlab!()
        .arg("--sysroot")
        .arg(&root)
        .args([
            "monitor", "--cpus", "0", "--window", "1s", "--listen", "off",
        ])
        .args(["--name", "second", "--profile", "lowlatency", "--db"])
        .arg(&other)
        .args(policy_args())
        .output()
        .unwrap();
    assert_one_line_error(&out, 1, "--profile lowlatency: ");
    assert!(
        stderr(&out).contains(&format!("(pid {})", d.pid())),
        "{}",
        stderr(&out)
    );
    assert!(
        !other.exists(),
        "a store made by a daemon that did not start"
    );
    // SIGTERM twice in a row, as `timeout` sends it (to the process and its group): one stop,
    // the open window stored, the profile restored and said so.
    d.signal(libc::SIGTERM);
    std::thread::sleep(std::time::Duration::from_micros(500));
    let (status, log) = d.end(libc::SIGTERM);
    assert!(status.success(), "exit {status:?}: {log}");
    assert_eq!(policy_governor(&root, 0), "powersave");
    let after = snapshot(&root);
    for (path, bytes) in &before {
        assert_eq!(
            after.get(path),
            Some(bytes),
            "{} not restored: {log}",
            path.display()
        );
    }
    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "prof");
    let ann = store.annotations(id, 0, END).unwrap();
    let prof: Vec<&str> = ann
        .iter()
        .filter(|a| a.kind == "profile")
        .map(|a| a.text.as_str())
        .collect();
    assert_eq!(prof.len(), 2, "{prof:?}");
    assert!(
        prof[0].starts_with("profile lowlatency applied"),
        "{prof:?}"
    );
    assert!(
        prof[1].starts_with("profile lowlatency restored"),
        "{prof:?}"
    );
    let stop = ann.iter().find(|a| a.kind == "stop").unwrap();
    assert_eq!(stop.text, "stopped by SIGTERM");
    let (config, _) = store.series_meta(id).unwrap();
    assert_eq!(config["profile"], "lowlatency");
}

#[test]
fn check_config_says_what_would_run_and_touches_nothing() {
    if !latlab_testkit::root_or_skip(
        "the default policy, fifo, needs CAP_SYS_NICE, which the check checks",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = laptop_tree(dir.path());
    let db = dir.path().join("new.db");
    let out = latlab!()
        .arg("--sysroot")
        .arg(&root)
        .args(["monitor", "--check-config", "--profile", "lowlatency"])
        .args([
            "--schedule",
            "05:05 cpu2:performance; 17:05 cpu2:restore",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    latlab_testkit::assert_ok(&out);
    for want in [
        "clock-nanosleep every 200us on CPUs 0-3, fifo 95",
        "5m per window",
        "profile     lowlatency",
        "05:05 cpu2 governor powersave -> performance",
        "http://127.0.0.1:9464/metrics",
        "nothing was touched",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    assert!(!db.exists(), "no store created");
    assert_eq!(governor(&root), "powersave");
    assert!(!root.join("var/lib/latlab").exists(), "no journal written");
    // A profile `tune apply` keeps in force would refuse the start: so does the check.
    let tune = |args: &[&str]| {
        latlab_testkit::run_ok(
            latlab!()
                .arg("--sysroot")
                .arg(&root)
                .args(["tune"])
                .args(args),
        )
    };
    tune(&["apply", "lowlatency"]);
    let out = latlab!()
        .arg("--sysroot")
        .arg(&root)
        .args([
            "monitor",
            "--check-config",
            "--profile",
            "balanced",
            "--listen",
            "off",
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("a start now would fail: profile lowlatency is applied (since "),
        "{err}"
    );
    tune(&["restore"]);
    assert_eq!(governor(&root), "powersave");
}

#[test]
fn a_foreign_or_newer_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign.db");
    std::fs::write(&foreign, vec![7u8; 4096]).unwrap();
    let newer = dir.path().join("newer.db");
    drop(Store::open(&newer).unwrap());
    let mut bytes = std::fs::read(&newer).unwrap();
    bytes[60..64].copy_from_slice(&999u32.to_be_bytes());
    std::fs::write(&newer, &bytes).unwrap();
    for (db, why) in [
        (&foreign, "not a latlab store"),
        (&newer, "newer than this latlab"),
    ] {
        let before = std::fs::read(db).unwrap();
        let out = latlab!()
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(db)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(why), "{err}");
        let out = latlab!()
            .args(["monitor", "--listen", "off", "--db"])
            .arg(db)
            .output()
            .unwrap();
        let err2 = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err2}");
        assert!(err2.contains(why), "{err2}");
        assert_eq!(std::fs::read(db).unwrap(), before, "left untouched");
    }
    let out = latlab!()
        .args(["serve", "--db"])
        .arg(dir.path().join("absent.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("absent.db").exists());
}

/// A series `name` of `n` windows of `window_ns` on two CPUs from `start`, written through the
/// store's API as an earlier daemon would have: window `k`'s histograms are `hist(k + cpu)`, its
/// missed periods and spikes `window(k)`'s.
fn seed_series(
    db: &Path,
    config: SeriesConfig,
    (name, window_ns): (&str, u64),
    (start, n): (u64, u64),
    window: impl Fn(u64) -> (u64, Vec<latlab_store::MonitorSpike>),
) {
    seed_spaced(db, config, (name, window_ns), (start, n, window_ns), window);
}

/// [`seed_series`] with the windows `step` apart (a step longer than the window leaves gaps).
fn seed_spaced(
    db: &Path,
    config: SeriesConfig,
    (name, window_ns): (&str, u64),
    (start, n, step): (u64, u64, u64),
    window: impl Fn(u64) -> (u64, Vec<latlab_store::MonitorSpike>),
) {
    let mut store = Store::open(db).unwrap();
    let st = store
        .open_series(&SeriesSpec {
            name: name.into(),
            window_ns,
            config,
            system: None,
            idle_states: vec![],
        })
        .unwrap();
    for k in 0..n {
        let (missed, spikes) = window(k);
        let cpus = (0..2)
            .map(|cpu| MonitorWindow {
                spikes: spikes.clone(),
                ..latlab_testkit::run::monitor_window(cpu, hist(k + u64::from(cpu)), missed)
            })
            .collect();
        let set = WindowSet {
            cost_cpu_time_ns: Some(5_000_000),
            ..latlab_testkit::run::window_set(k, (start + k * step, window_ns), cpus)
        };
        store.insert_window_set(st.id, &set).unwrap();
    }
}

/// A store with two CPUs' windows of a minute over the last hour.
fn small_store(db: &Path) -> (u64, u64) {
    let config = SeriesConfig {
        kernel: "test".into(),
        preempt: "full".into(),
        ..SeriesConfig::new(&Default::default(), Default::default())
    };
    let t0 = (unix_now() - 3_600 * SEC) / SEC * SEC;
    seed_series(db, config, ("w", 60 * SEC), (t0, 30), |_| (0, vec![]));
    (t0, t0 + 30 * 60 * SEC)
}

/// A line breaks where the daemon was not running, however short the gap: here one missing
/// minute between two runs of a series of one-minute windows.
#[test]
fn the_dashboard_lines_break_where_no_window_was_measured() {
    if !require("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let config = SeriesConfig::new(&Default::default(), Default::default());
    let t0 = (unix_now() - 3_600 * SEC) / SEC * SEC;
    seed_series(&db, config.clone(), ("g", 60 * SEC), (t0, 10), |_| {
        (0, vec![])
    });
    seed_series(
        &db,
        config.clone(),
        ("g", 60 * SEC),
        (t0 + 11 * 60 * SEC, 10),
        |_| (0, vec![]),
    );
    // A run of one window between two gaps: no line, a dot.
    seed_series(
        &db,
        config,
        ("g", 60 * SEC),
        (t0 + 22 * 60 * SEC, 1),
        |_| (0, vec![]),
    );
    let (s, addr) = serve(&db, dir.path());
    let profile = format!("--user-data-dir={}", dir.path().join("p").display());
    let (dom, log) = chromium(&[profile, "--dump-dom".into(), format!("http://{addr}/")]);
    drop(s);
    assert!(console_lines(&log).is_empty(), "{log}");
    let path = dom
        .split("data-cpu=\"0\" data-kind=\"max\"")
        .next()
        .and_then(|before| before.rsplit("<path").next())
        .unwrap_or_else(|| panic!("no max line of cpu0: {dom}"));
    let d = path
        .split(" d=\"")
        .nth(1)
        .and_then(|p| p.split('"').next())
        .unwrap_or_else(|| panic!("no d in {path}"));
    assert_eq!(d.matches('M').count(), 3, "three runs, three pieces: {d}");
    let latency = latlab_testkit::between(&dom, "id=\"chart-latency\"", "</svg>");
    // The lone window's maximum and p99.9, on each of the two CPUs.
    assert_eq!(
        latency.matches("class=\"series-dot\"").count(),
        4,
        "{latency}"
    );
    // The two missing minutes are shaded, said "not measured" and named in the legend.
    for chart in ["chart-latency", "chart-freq", "chart-cost"] {
        let svg = chart_svg(&dom, chart);
        assert_eq!(svg.matches("class=\"gap\"").count(), 2, "{chart}: {svg}");
        assert_eq!(svg.matches("<title>not measured: ").count(), 2, "{chart}");
    }
    assert!(dom.contains("not measured</span>"), "legend");
    // The latency axis reads in µs and ms, never in thousands of µs.
    let ticks = tick_labels(&dom, "chart-latency", "ytick");
    assert!(
        !ticks.is_empty()
            && ticks
                .iter()
                .all(|t| t.ends_with(" µs") || t.ends_with(" ms")),
        "{ticks:?}"
    );
    // Every time on the page is in the browser's zone, and the page says which.
    assert!(dom.contains(" · times in UTC"), "{dom}");
    // Its last window ended over half an hour ago, and no daemon keeps it: said above the charts.
    assert!(
        dom.contains("class=\"stale\" data-checked=\"1\">no window stored since")
            && dom.contains("ago): no daemon is keeping this series, and none recorded a stop"),
        "{dom}"
    );
    // A daemon that recorded its stop after the last window: the notice says so and why.
    let mut store = Store::open(&db).unwrap();
    let id = store.find_series("g").unwrap().unwrap();
    store
        .add_annotation(
            id,
            &latlab_store::Annotation {
                at_unix_ns: t0 + 23 * 60 * SEC + SEC,
                cpu: None,
                kind: "stop".into(),
                text: "stopped by SIGTERM".into(),
            },
        )
        .unwrap();
    drop(store);
    let (s, addr) = serve(&db, dir.path());
    let (dom, _) = chromium(&[
        format!("--user-data-dir={}", dir.path().join("p2").display()),
        "--dump-dom".into(),
        format!("http://{addr}/"),
    ]);
    drop(s);
    assert!(
        dom.contains("ago): its daemon was stopped at ") && dom.contains(" (stopped by SIGTERM)"),
        "{dom}"
    );
    // The range reaches the stop, a second after the last window: it is among the annotations
    // (the range ended at the last window, and left it out).
    assert!(
        dom.contains("<li data-kind=\"stop\"><span class=\"kind\">stop</span>")
            && dom.contains(" — stopped by SIGTERM</li>"),
        "{dom}"
    );
}

#[test]
fn serve_answers_read_only_within_limits_and_under_many_clients() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let (t0, t1) = small_store(&db);
    let (s, addr) = serve(&db, dir.path());

    let (status, head, body) = get(addr, "/");
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/html")
    );
    assert!(body.contains("latlab monitor") && body.contains("app.js"));
    assert_eq!(get(addr, "/app.js").0, 200);
    assert_eq!(get(addr, "/style.css").0, 200);
    let (status, head, metrics) = get(addr, "/metrics");
    assert_eq!(status, 200);
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let n: u64 = (1..=30).map(|k| hist(k).count()).sum();
    assert!(
        metrics.contains(&format!(
            "latlab_wakeup_latency_seconds_count{{series=\"w\",cpu=\"1\"}} {n}"
        )),
        "{metrics}"
    );

    let list = get_json(addr, "/api/series");
    assert_eq!(list[0]["name"], "w");
    assert_eq!(list[0]["windows"], 30);
    let (from, to) = (t0 / 1_000_000, t1 / 1_000_000);
    let tl = get_json(
        addr,
        &format!("/api/timeline?series=1&from={from}&to={to}&points=10"),
    );
    assert_eq!(
        tl["rows"].as_array().unwrap().len(),
        10,
        "grouped to the points asked"
    );
    assert_eq!(tl["grouped"], 3);
    let worst_cpu1 = tl["rows"][9]["cpu"]["1"]["max"].as_u64().unwrap();
    assert_eq!(
        worst_cpu1,
        hist(30).max(),
        "group maximum is the worst window's"
    );
    let worst = get_json(
        addr,
        &format!("/api/worst?series=1&from={from}&to={to}&limit=3"),
    );
    assert_eq!(worst.as_array().unwrap().len(), 3);
    // A series is also named as /metrics labels it.
    let by_name = |path: &str| get_json(addr, &path.replace("series=1", "series=w"));
    let worst_path = format!("/api/worst?series=1&from={from}&to={to}&limit=3");
    assert_eq!(by_name(&worst_path), worst);
    let start = worst[0]["start"].as_str().unwrap();
    let w = get_json(addr, &format!("/api/window?series=1&start={start}&cpu=1"));
    let total: u64 = w["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[2].as_u64().unwrap())
        .sum();
    assert_eq!(
        total,
        w["count"].as_u64().unwrap(),
        "histogram buckets hold every sample"
    );
    assert_eq!(w["max"], worst[0]["max"]);
    assert_eq!(
        get_json(addr, "/api/experiments")["experiments"],
        serde_json::json!([])
    );
    let status = get_json(addr, "/api/status");
    assert_eq!(status["mode"], "serve");
    // How far each series reaches (the page's default range), under the API's names.
    assert_eq!(
        status["series"],
        serde_json::json!([{
            "id": 1, "name": "w", "window_ns": 60 * SEC, "windows": 30,
            "first_start_ns": t0, "last_end_ns": t1, "last_index": 29,
        }])
    );

    assert_eq!(get(addr, "/api/window?series=1&start=abc&cpu=0").0, 400);
    assert_eq!(get(addr, "/api/window?series=1&start=5&cpu=0").0, 404);
    assert_eq!(get(addr, "/api/timeline?series=1&from=10&to=5").0, 400);
    assert_eq!(get(addr, "/nothing-here").0, 404);
    // Every API error is a 4xx with one line naming the problem (a 5xx only for the server's
    // own faults): a series that does not exist, a malformed query.
    for (path, status, says) in [
        ("/api/timeline?series=999", 404, "no monitor series 999"),
        ("/api/worst?series=999", 404, "no monitor series 999"),
        (
            "/api/window?series=999&start=5&cpu=0",
            404,
            "no monitor series 999",
        ),
        ("/api/timeline?series=abc", 404, "no monitor series \"abc\""),
        (
            "/api/timeline",
            400,
            "bad query: series is missing (accepted: series=ID",
        ),
        (
            "/api/worst?series=1&limit=-1",
            400,
            "limit=-1: out of range",
        ),
        (
            "/api/worst?series=1&limit=x",
            400,
            "bad query: limit: not a whole number (accepted: series=ID",
        ),
        // A parameter misspelt is refused, not passed over for the default.
        (
            "/api/worst?series=1&limt=5",
            400,
            "bad query: limt: no such parameter (accepted: series=ID",
        ),
        (
            "/api/window?series=1&start=5&cpu=0&cpus=1",
            400,
            "bad query: cpus: no such parameter (accepted: series=ID",
        ),
        // The other range endpoint's parameter, and a query where none is taken.
        (
            "/api/worst?series=1&points=10",
            400,
            "bad query: points: not a parameter of this endpoint (accepted: series=ID",
        ),
        (
            "/api/timeline?series=1&limit=5",
            400,
            "bad query: limit: not a parameter of this endpoint",
        ),
        (
            "/api/status?bogus=1",
            400,
            "bad query: bogus=1: this endpoint takes no parameters",
        ),
        (
            "/api/series?x",
            400,
            "bad query: x: this endpoint takes no parameters",
        ),
        (
            "/api/experiments?limit=1",
            400,
            "this endpoint takes no parameters",
        ),
        (
            "/api/worst?series=1&limit=5&limit=6",
            400,
            "bad query: limit: given twice (accepted: series=ID",
        ),
        (
            "/api/worst?series=1&limit=99999999999999999999",
            400,
            "limit: out of range (accepted: limit from 1 to 10000)",
        ),
        (
            "/api/worst?series=1&limit=0",
            400,
            "limit=0: out of range (accepted: limit from 1 to 10000)",
        ),
        (
            "/api/worst?series=1&limit=100000000",
            400,
            "limit=100000000: out of range",
        ),
        (
            "/api/timeline?series=1&points=-5",
            400,
            "points=-5: out of range (accepted: points from 10 to 2000 per CPU)",
        ),
        (
            "/api/timeline?series=1&points=5",
            400,
            "points=5: out of range (accepted: points from 10 to 2000 per CPU)",
        ),
        (
            "/api/timeline?series=1&points=2001",
            400,
            "points=2001: out of range",
        ),
        (
            "/api/timeline?series=1&from=abc",
            400,
            "bad query: from: not a number (accepted: series=ID",
        ),
        (
            "/api/worst?series=1&limit=",
            400,
            "bad query: limit: empty (accepted: series=ID",
        ),
        (
            "/api/timeline?series=1&points=99999999999999999999",
            400,
            "points: out of range (accepted: points from 10 to 2000 per CPU)",
        ),
        (
            "/api/timeline?series=1&from=nan",
            400,
            "from and to must be finite",
        ),
        (
            "/api/timeline?series=1&to=inf",
            400,
            "from and to must be finite",
        ),
        (
            "/api/window?series=1&start=5",
            400,
            "accepted: series=ID or NAME, start=NS",
        ),
    ] {
        let (got, _, body) = get(addr, path);
        assert_eq!(got, status, "{path}: {body}");
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(msg.contains(says) && !msg.contains('\n'), "{path}: {msg}");
    }
    let (status, head, _) = http(
        addr,
        &format!(
            "POST /metrics HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 405);
    assert!(head.contains("GET, HEAD"));
    assert_eq!(
        http(
            addr,
            &format!("DELETE /api/series HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
        )
        .0,
        405
    );
    let (status, _, _) = http(
        addr,
        &format!(
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
        ),
    );
    assert_eq!(status, 413, "no request bodies");
    let huge = "x".repeat(64 * 1024);
    let (status, _, _) = http(
        addr,
        &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Big: {huge}\r\nConnection: close\r\n\r\n"),
    );
    assert!(
        status == 431 || status == 0 || status == 400,
        "oversized headers refused: {status}"
    );

    // Many clients at once: every answer complete and identical.
    let reference = get(addr, "/metrics").2;
    let handles: Vec<_> = (0..40)
        .map(|i| {
            let path = if i % 2 == 0 {
                "/metrics".to_string()
            } else {
                format!("/api/timeline?series=1&from={from}&to={to}")
            };
            std::thread::spawn(move || {
                (0..10)
                    .map(|_| {
                        let (st, _, body) = get(addr, &path);
                        (st, path.clone(), body)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for (st, path, body) in h.join().unwrap() {
            assert_eq!(st, 200, "{path}");
            if path == "/metrics" {
                assert_eq!(body, reference);
            } else {
                assert!(body.starts_with('{') && body.ends_with('}'));
            }
        }
    }
    s.stop();
    // Read-only: the store is as it was (same windows, no new rows).
    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "w");
    assert_eq!(store.monitor_sets(id, 0, END).unwrap().len(), 30);
    assert!(store.annotations(id, 0, END).unwrap().is_empty());
}

/// A series continues with its window length and how it was measured: another --window,
/// interval or method is refused as bad input before anything runs, naming what the series
/// has; another --name starts a new series.
/// A store this user may not write (a daemon's, owned by root) is read, not refused: `serve`,
/// `report` and `db list` read it while the daemon goes on writing it, through its write-ahead
/// log; a command that would change it says so, exit 2.
#[test]
fn a_store_this_user_cannot_write_is_read_while_its_daemon_writes() {
    if !latlab_testkit::root_or_skip("a root daemon's store read by another user") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_latlab");
    let as_nobody = |args: &[&str]| {
        let mut c = latlab_testkit::unprivileged(bin, "-all")?;
        c.args(args);
        Some(c)
    };
    let Some(_) = as_nobody(&[]) else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (_daemon, db, _) = listening_monitor(dir.path(), "ro", &[]);
    wait_for("2 stored windows", Duration::from_secs(30), || {
        set_count(&db, "ro") >= 2
    });
    let db_arg = db.to_str().unwrap();
    let addr = free_addr();
    let serve = as_nobody(&["serve", "--listen", &addr.to_string(), "--db", db_arg]).unwrap();
    let _served = Proc::start(serve, dir.path().join("serve.log"));
    wait_for("listening", Duration::from_secs(20), || {
        std::net::TcpStream::connect(addr).is_ok()
    });
    let windows = || {
        let (status, _, body) = get(addr, "/metrics");
        assert_eq!(status, 200, "{body}");
        body.lines()
            .find(|l| l.starts_with("latlab_monitor_windows_total{"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{body}"))
    };
    let first = windows();
    assert!(first >= 2.0, "{first}");
    wait_for(
        "the daemon's next windows served",
        Duration::from_secs(20),
        || windows() > first,
    );
    let out = as_nobody(&["report", "series:ro", "--format", "text", "--db", db_arg])
        .unwrap()
        .output()
        .unwrap();
    latlab_testkit::assert_ok(&out);
    let out = as_nobody(&["db", "vacuum", "--db", db_arg])
        .unwrap()
        .output()
        .unwrap();
    assert_one_line_error(&out, 2, "is not writable here");
}

#[test]
fn listen_takes_localhost_and_a_port() {
    let dir = tempfile::tempdir().unwrap();
    let out = latlab!()
        .args([
            "monitor",
            "--check-config",
            "--listen",
            "localhost:9999",
            "--db",
        ])
        .arg(dir.path().join("l.db"))
        .output()
        .unwrap();
    common::assert_check_config_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("listen      http://127.0.0.1:9999/ (dashboard)"),
        "{text}"
    );
}

#[test]
fn a_series_is_not_continued_with_another_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = synthetic(
        dir.path(),
        "five",
        &["--cpus", "1", "--span", "1h", "--window", "5m"],
    );
    let before = std::fs::read(&db).unwrap();
    let check = |name: &str, args: &[&str]| {
        let mut c = latlab!();
        c.args(["monitor", "--listen", "off", "--check-config"])
            .args(args)
            .args(["--name", name, "--db"])
            .arg(&db);
        c.output().unwrap()
    };
    let monitor = |name: &str| check(name, &["--window", "10s"]);
    let out = monitor("five");
    latlab_testkit::assert_one_line_error(&out, 2, "--window 10s: series \"five\" in ");
    assert!(
        stderr(&out).contains("holds 12 windows of 5m (accepted: --window 5m to continue it"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "the store was changed");
    for beside in ["w.db-wal", "w.db-shm"] {
        assert!(
            !dir.path().join(beside).exists(),
            "{beside} made by a check"
        );
    }
    common::assert_check_config_ok(&monitor("ten"));
    // Nor with another interval or method: its numbers would mean something else.
    let out = check(
        "five",
        &[
            "--window",
            "5m",
            "--interval",
            "1ms",
            "-m",
            "timerfd",
            "--stagger",
        ],
    );
    latlab_testkit::assert_one_line_error(&out, 2, "series \"five\" in ");
    // In the forms monitor takes: it has no --relative, and --stagger takes no value.
    assert!(
        stderr(&out).contains(
            "was measured with --interval 200us (not 1ms), --method clock-nanosleep (not \
             timerfd), no --stagger (not with it) (accepted: those options to continue \
             it, or another --name"
        ),
        "{}",
        stderr(&out)
    );
    common::assert_check_config_ok(&check("five", &["--window", "5m"]));
    assert_eq!(std::fs::read(&db).unwrap(), before, "the store was changed");
}

/// The start is in the store as measuring starts, not when the first window closes (a SIGKILL
/// in a long first window left no trace), with what the set-up could not do: here memory that
/// could not be locked under a small RLIMIT_MEMLOCK without CAP_IPC_LOCK, which the log, the
/// start annotation and the series' report all say.
#[test]
fn the_start_and_an_unlocked_memory_are_stored_at_once() {
    if !latlab_testkit::root_or_skip("dropping CAP_IPC_LOCK with setpriv") || !require("prlimit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let mut c = Command::new("prlimit");
    c.args(["--memlock=65536", "setpriv", "--bounding-set", "-ipc_lock"])
        .args(["--inh-caps", "-ipc_lock", env!("CARGO_BIN_EXE_latlab")])
        .args([
            "monitor", "--window", "60s", "--name", "m", "--listen", "off", "--db",
        ])
        .arg(&db)
        .args(policy_args());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("LATLAB_") {
            c.env_remove(k);
        }
    }
    let mut d = Proc::start(c, dir.path().join("d.log"));
    let start_text = || {
        let store = Store::open_existing(&db).ok()?;
        let id = store.find_series("m").ok()??;
        let ann = store.annotations(id, 0, END).ok()?;
        ann.into_iter().find(|a| a.kind == "start").map(|a| a.text)
    };
    d.wait_until(
        "the start annotation, long before the 60 s window closes",
        Duration::from_secs(20),
        || start_text().is_some(),
    );
    let text = start_text().unwrap();
    let log = d.term();
    assert!(
        text.contains("; warning: memory is not locked (mlockall: "),
        "{text}"
    );
    assert!(
        log.contains("latlab: warning: memory is not locked"),
        "{log}"
    );
    let report = latlab_testkit::run_stdout(
        latlab!()
            .args(["report", "series:m", "--format", "text", "--db"])
            .arg(&db),
    );
    assert!(
        report.contains("memory was not locked in a run of it"),
        "{report}"
    );
}

/// A store that holds only monitoring windows says so where a user first looks: `db list`,
/// `report` without items, and `report series:` of a name it does not hold.
#[test]
fn a_monitor_store_names_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let db = synthetic(dir.path(), "node7", &["--cpus", "1", "--span", "1h"]);
    let list = latlab_testkit::run_stdout(latlab!().args(["db", "list", "--db"]).arg(&db));
    assert!(
        list.contains(&format!(
            "it holds monitoring windows: series:node7 (latlab report series:node7 --db {})",
            db.display()
        )),
        "{list}"
    );
    let out = latlab!()
        .args(["report", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_one_line_error(
        &out,
        2,
        "the stores hold no run (accepted: a monitoring series: series:node7)",
    );
    let out = latlab!()
        .args(["report", "series:node8", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_one_line_error(
        &out,
        2,
        "no monitoring series \"node8\" with stored windows (accepted: series:NAME of a series they hold: series:node7)",
    );
}

#[test]
fn fill_monitor_writes_a_synthetic_series_the_store_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let fill = |extra: &[&str]| fill_monitor(&db, extra).output().unwrap();
    let out = fill(&["--cpus", "3", "--span", "6h", "--name", "big"]);
    latlab_testkit::assert_ok(&out);
    let store = Store::open_existing(&db).unwrap();
    let id = series(&store, "big");
    assert_eq!(
        store.monitor_sets(id, 0, END).unwrap().len(),
        72,
        "6 h of 5 minutes"
    );
    let first = store.annotations(id, 0, END).unwrap().remove(0);
    assert!(
        first.text.starts_with("synthetic series: 3 CPUs"),
        "{first:?}"
    );
    // `latlab report series:big`: one cell, one thread per CPU, each CPU's samples, maximum and
    // missed periods those of its stored windows.
    let rows = store.monitor_windows(id, 0, END, None).unwrap();
    drop(store);
    let report = series_report(&db, "big");
    let cell = &report["cells"][0];
    assert_eq!(cell["name"], "series:big");
    // What the samplers stored beside the windows is the series' too (time-weighted means).
    let mhz = cell["repeats"][0]["frequency_mhz"].as_f64();
    assert!(mhz.is_some_and(|f| f > 0.0), "{}", cell["repeats"][0]);
    let cpus = cell["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 3);
    for (cpu, c) in cpus.iter().enumerate() {
        let mine: Vec<_> = rows.iter().filter(|w| w.cpu == cpu as u32).collect();
        assert_eq!(c["label"], format!("cpu{cpu}"));
        assert_eq!(
            c["stats"]["count"],
            mine.iter().map(|w| w.count).sum::<u64>()
        );
        assert_eq!(
            c["stats"]["max"],
            mine.iter().map(|w| w.max_ns).max().unwrap()
        );
        assert_eq!(c["missed"], mine.iter().map(|w| w.missed).sum::<u64>());
    }
    latlab_testkit::assert_one_line_error(
        &latlab!()
            .args(["report", "series:nope", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
        2,
        "series:NAME",
    );
    latlab_testkit::run_ok(latlab!().args(["db", "check", "--db"]).arg(&db));
    // The same series again, or a window too short: one line each.
    latlab_testkit::assert_one_line_error(&fill(&["--span", "6h", "--name", "big"]), 1, "already");
    latlab_testkit::assert_one_line_error(&fill(&["--window", "10ms"]), 2, "accepted");
}

/// A real-time policy the process may not use (CAP_SYS_NICE dropped, as in a container that
/// was not given it) fails `--check-config`, as the start it checks fails; the start fails
/// before it opens or makes the store.
#[test]
fn check_config_fails_where_the_policy_would() {
    if !latlab_testkit::root_or_skip("dropping CAP_SYS_NICE with setpriv") || !require("setpriv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let without_nice = |extra: &[&str]| {
        let mut c = latlab_testkit::command("setpriv");
        c.args(["--bounding-set", "-sys_nice", "--inh-caps", "-sys_nice"])
            .arg(env!("CARGO_BIN_EXE_latlab"))
            .args(["monitor", "--name", "m", "--listen", "off", "--db"])
            .arg(&db)
            .args(extra);
        c.output().unwrap()
    };
    for extra in [&["--check-config"][..], &[]] {
        let out = without_nice(extra);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("CAP_SYS_NICE"), "{extra:?}: {err}");
        assert!(!db.exists(), "{extra:?}: a store was made");
    }
    // A policy it may use: the check passes.
    let out = without_nice(&["--check-config", "--policy", "other"]);
    latlab_testkit::assert_ok(&out);
}

/// A power source whose meter gave no reading (a virtual machine's, its counter standing
/// still) is named in the legend and in the chart's note, which said there was no source. CPUs
/// of alike frequencies throughout (a virtual machine's nominal clock) are one line, named for
/// them all: the last drawn hid the others.
#[test]
fn a_power_source_without_readings_is_named_not_said_absent() {
    if !require("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let t0 = (unix_now() - 3_600 * SEC) / SEC * SEC;
    let mut store = Store::open(&db).unwrap();
    let st = store
        .open_series(&SeriesSpec {
            name: "p".into(),
            window_ns: 60 * SEC,
            config: SeriesConfig::new(&Default::default(), Default::default()),
            system: None,
            idle_states: vec![],
        })
        .unwrap();
    for k in 0..30 {
        let set = WindowSet {
            power: Some(vec![latlab_model::samples::PowerSource {
                name: "perf:energy-psys".into(),
                avg_w: None,
                energy_j: None,
                wraps: 0,
            }]),
            ..latlab_testkit::run::window_set(
                k,
                (t0 + k * 60 * SEC, 60 * SEC),
                (0..3u32)
                    .map(|cpu| latlab_model::monitor::MonitorWindow {
                        cpu_summary: Some(latlab_model::samples::CpuSummary {
                            cpu: cpu as usize,
                            // CPUs 0 and 2 alike throughout, CPU 1 not.
                            avg_freq_khz: Some(if cpu == 1 {
                                1_000_000 + k * 1000
                            } else {
                                2_100_000
                            }),
                            ..Default::default()
                        }),
                        ..latlab_testkit::run::monitor_window(cpu, hist(k), 0)
                    })
                    .collect(),
            )
        };
        store.insert_window_set(st.id, &set).unwrap();
    }
    drop(store);
    let (s, addr) = serve(&db, dir.path());
    let profile = format!("--user-data-dir={}", dir.path().join("c").display());
    let (dom, log) = chromium(&[profile, "--dump-dom".into(), format!("http://{addr}/")]);
    s.stop();
    assert!(console_lines(&log).is_empty(), "{log}");
    let legend = dom
        .split("id=\"legend-power\"")
        .nth(1)
        .and_then(|l| l.split("</div>").next())
        .unwrap();
    assert!(legend.contains("perf:energy-psys"), "{legend}");
    let svg = chart_svg(&dom, "chart-power");
    assert!(!svg.contains("no power source"), "{svg}");
    assert!(svg.contains("no reading from perf:energy-psys"), "{svg}");
    let freq = dom
        .split("id=\"legend-freq\"")
        .nth(1)
        .and_then(|l| l.split("</div>").next())
        .unwrap();
    assert!(freq.contains("cpu0, cpu2 (alike)"), "{freq}");
    assert!(freq.contains(">cpu1<"), "{freq}");
    let lines = chart_svg(&dom, "chart-freq").matches("<path").count();
    assert_eq!(lines, 2, "{}", chart_svg(&dom, "chart-freq"));
}
