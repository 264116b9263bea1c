//! `latlab trace` run for real: bad input, missing privileges, a traced run's tables and JSON,
//! Ctrl-C, and the system left as it was. Runs that need root say why they skip without it.
#![allow(clippy::unwrap_used)]

use latlab_model::StopReason;
use latlab_model::trace::{Family, TRACE_SCHEMA, TraceRun};
use latlab_testkit::process::signal_after;
use latlab_testkit::{latlab, root_or_skip};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use latlab_testkit::{bpf_stats_sysctl as stats_sysctl, tracefs_mounts};

/// Disk writes with fsync, loopback traffic and short sleeps, for about a second.
fn provoke() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut f = std::fs::File::create(dir.path().join("io")).unwrap();
    for _ in 0..4 {
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
    }
    latlab_testkit::udp_ping_pong(200, Duration::from_micros(500));
}

/// Without root (as root: through setpriv as nobody with no capabilities), one line names
/// what is missing.
#[test]
fn without_privileges_the_error_names_root_or_the_capabilities() {
    let Some(mut cmd) = latlab_testkit::unprivileged(env!("CARGO_BIN_EXE_latlab"), "-all") else {
        return;
    };
    let out = cmd.args(["trace", "-D", "1s"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("root"), "{err}");
    assert!(
        err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
        "{err}"
    );
}

/// With CAP_BPF and CAP_PERFMON but not root, the BTF tracepoints run; the events that need
/// tracefs run only if it is mounted, and are otherwise reported as skipped with the reason.
#[test]
fn capabilities_without_root_give_a_partial_run_that_says_what_was_skipped() {
    if !root_or_skip("tracing") {
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let mounts = tracefs_mounts();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all,+bpf,+perfmon",
            "--ambient-caps=+bpf,+perfmon",
            env!("CARGO_BIN_EXE_latlab"),
            "trace",
            "-D",
            "1s",
            "-e",
            "workqueue,hrtimer",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let run: TraceRun = serde_json::from_slice(&out.stdout).unwrap();
    let t = &run.trace;
    assert!(t.family(Family::Hrtimer).is_some(), "{err}");
    if t.family(Family::WorkqueueLatency).is_none() {
        assert!(
            t.skipped
                .iter()
                .any(|s| s.group == "workqueue" && s.reason.contains("tracefs")),
            "{:?}",
            t.skipped
        );
        assert!(err.contains("latlab: skipped workqueue: tracefs"), "{err}");
    }
    assert_eq!(tracefs_mounts(), mounts, "tracefs mounts as before");
}

/// Where tracefs is not mounted latlab mounts it in a private namespace of its own, and going
/// back from there must not move the working directory: relative output paths (and the store)
/// stay where the user is, not under `/`.
#[test]
fn relative_outputs_stay_in_the_working_directory_when_tracefs_is_mounted_privately() {
    if !root_or_skip("tracing") || !latlab_testkit::require("unshare") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // tracefs unmounted in a mount namespace of the test's own (the system's mounts stay).
    let script = "for m in $(awk '$3 == \"tracefs\" {print $2}' /proc/mounts | sort -r); do \
                  umount -l \"$m\" || exit 9; done; exec \"$@\"";
    // Names no other file has, so that one found under `/` can only come from here.
    let tag = format!("latlab-cwd-{}", std::process::id());
    let [t, mj, mx, db] = ["t.json", "m.json", "m.xml", "m.db"].map(|n| format!("{tag}-{n}"));
    for args in [
        vec!["trace", "-D", "1s", "-e", "workqueue", "--json", &t],
        vec![
            "measure", "-D", "1s", "-q", "--trace", "--json", &mj, "--junit", &mx, "--db", &db,
        ],
    ] {
        let out = latlab_testkit::command("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
            .arg(env!("CARGO_BIN_EXE_latlab"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let astray: Vec<String> = std::fs::read_dir("/")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(&tag))
        .map(|p| {
            let _ = std::fs::remove_file(&p);
            p.display().to_string()
        })
        .collect();
    assert!(
        astray.is_empty(),
        "written under / (now removed): {astray:?}"
    );
    for name in [t, mj, mx, db] {
        assert!(
            dir.path().join(&name).is_file(),
            "{name} in the working directory"
        );
    }
}

#[test]
fn a_traced_run_prints_tables_and_writes_consistent_json() {
    if !root_or_skip("tracing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("trace.json");
    let mounts = tracefs_mounts();
    let stats = stats_sysctl();
    let child = latlab!()
        .args(["trace", "-D", "3s", "--top", "5", "--json"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    provoke();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("latlab: tracing "), "{err}");
    for title in [
        "workqueue: queue -> execute",
        "softirq: raise -> entry",
        "wake-up -> run",
        "hrtimer handler duration",
        "hard IRQ handler duration",
    ] {
        assert!(text.contains(title), "{title}: {text}");
    }
    assert!(
        text.contains("top ") && text.contains("by worst case"),
        "{text}"
    );
    assert!(text.contains("\n  all "), "{text}");
    assert!(text.contains("cost: "), "{text}");

    let run: TraceRun = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(run.schema, TRACE_SCHEMA);
    assert_eq!(run.stop, StopReason::Duration);
    assert!(run.system.is_some());
    let t = &run.trace;
    assert!(t.elapsed_ns >= 2_900_000_000, "{}", t.elapsed_ns);
    assert!(t.cost.available && !t.cost.programs.is_empty());
    for f in &t.families {
        let h = &f.histogram;
        let per_cpu: u64 = f.per_cpu.iter().map(|c| c.histogram.count()).sum();
        let keys: u64 = f.keys.iter().map(|k| k.histogram.count()).sum();
        assert_eq!(
            (h.count(), h.count()),
            (per_cpu, keys),
            "{}",
            f.family.name()
        );
        if h.count() > 0 {
            assert!(h.min() <= h.max(), "{}", f.family.name());
        }
    }
    for fam in [
        Family::SoftirqRuntime,
        Family::Wakeup,
        Family::Hrtimer,
        Family::WorkqueueLatency,
    ] {
        assert!(
            t.family(fam).is_some_and(|f| f.histogram.count() > 0),
            "{} has samples",
            fam.name()
        );
    }
    assert_eq!(tracefs_mounts(), mounts, "tracefs mounts as before");
    assert_eq!(stats_sysctl(), stats, "kernel.bpf_stats_enabled as before");
}

#[test]
fn ctrl_c_stops_the_run_and_every_output_is_written() {
    if !root_or_skip("tracing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("trace.json");
    let (out, _) = signal_after(
        latlab!()
            .args(["trace", "-e", "hrtimer,softirq", "-q", "--json"])
            .arg(&json),
        Duration::from_millis(1500),
        libc::SIGINT,
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let run: TraceRun = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        run.stop,
        StopReason::Signal {
            signal: "SIGINT".into()
        }
    );
    assert_eq!(run.trace.events, ["softirq", "hrtimer"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("hrtimer handler duration"));

    // Stopped before the --duration asked: said, exit 130, the outputs written all the same.
    let (out, _) = signal_after(
        latlab!()
            .args(["trace", "-D", "30s", "-e", "hrtimer", "-q", "--json"])
            .arg(&json),
        Duration::from_millis(1500),
        libc::SIGINT,
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("latlab: stopped by SIGINT after "), "{err}");
    assert!(
        err.contains(" of the 30s asked; what was traced is written"),
        "{err}"
    );
    let run: TraceRun = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(run.trace.events, ["hrtimer"]);
}

#[test]
fn json_can_go_to_stdout() {
    if !root_or_skip("tracing") {
        return;
    }
    let out = latlab_testkit::run_ok(
        latlab!().args(["trace", "-D", "500ms", "-e", "hrtimer", "--json", "-"]),
    );
    let run: TraceRun = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run.trace.families.len(), 1);
    assert_eq!(run.trace.families[0].family, Family::Hrtimer);
}
