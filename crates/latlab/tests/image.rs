//! The container image of scripts/build-image.sh: built from scratch (no base image pulled),
//! it runs `latlab sysinfo` and a 5 s `measure` under podman with only the capabilities the
//! README names, and says what fails without them. Where this machine cannot run containers,
//! the test says why and runs the same root file system under chroot. Root only (buildah,
//! podman and chroot need it); skips with the reason otherwise.
#![allow(clippy::unwrap_used)]

use latlab_testkit::{have, output_text, root_or_skip, stderr, stdout};
use std::path::Path;
use std::process::{Command, Output};

use latlab_testkit::repo;

/// Build the image (or, without buildah, the root file system only) from the tests' latlab.
fn build(rootfs: &Path, tag: &str) -> bool {
    let with_image = have("buildah");
    let mut cmd = Command::new(repo().join("scripts/build-image.sh"));
    cmd.args(["--binary", env!("CARGO_BIN_EXE_latlab"), "--rootfs"])
        .arg(rootfs)
        .args(["--tag", tag]);
    if !with_image {
        eprintln!("note: buildah is not installed: only the root file system is built and run");
        cmd.arg("--rootfs-only");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    with_image
}

/// podman with the containers.conf of the test: no default ulimits (podman would raise
/// RLIMIT_NOFILE and RLIMIT_NPROC, which a host without CAP_SYS_RESOURCE refuses).
fn podman(conf: &Path) -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", conf);
    c
}

/// The podman options that run a container here (the default runtime, else runc, which runs on
/// hybrid cgroup hierarchies crun refuses), or why none does.
fn runnable(conf: &Path, image: &str) -> Result<Vec<String>, String> {
    let mut why = Vec::new();
    for runtime in [&[][..], &["--runtime", "runc"]] {
        if runtime.len() == 2 && !have("runc") {
            continue;
        }
        let out = podman(conf)
            .args(runtime)
            .args(["run", "--rm", "--network", "host", image, "--version"])
            .output()
            .unwrap();
        if out.status.success() && stdout(&out).starts_with("latlab ") {
            return Ok(runtime.iter().map(|s| s.to_string()).collect());
        }
        why.push(stderr(&out).trim().to_string());
    }
    Err(why.join("; "))
}

/// Whether the kernel schedules real-time tasks per cgroup (cgroup v1 `cpu.rt_runtime_us`):
/// then a container needs its own real-time budget.
fn rt_group_sched() -> bool {
    Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists()
}

#[test]
fn the_image_runs_sysinfo_and_a_measurement_with_two_capabilities() {
    if !root_or_skip("building and running a container image") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    let tag = format!("localhost/latlab-test:{}", std::process::id());
    let image = build(&rootfs, &tag);
    // From scratch: the binary, its libraries and latlab's directories, nothing else.
    assert!(rootfs.join("usr/bin/latlab").is_file());
    assert!(!rootfs.join("bin/sh").exists() && !rootfs.join("usr/bin/sh").exists());
    let conf = dir.path().join("containers.conf");
    std::fs::write(&conf, "[containers]\ndefault_ulimits = []\n").unwrap();
    let runtime = if image && have("podman") {
        runnable(&conf, &tag)
    } else {
        Err("podman is not installed".into())
    };
    match runtime {
        Ok(runtime) => under_podman(&conf, &runtime, &tag),
        Err(why) => {
            eprintln!(
                "note: this machine cannot run the container ({why}): running its root file system under chroot"
            );
            under_chroot(&rootfs);
        }
    }
    if image {
        // The script tags :latest beside the version; both go.
        let _ = podman(&conf)
            .args(["rmi", "-f", &tag, "localhost/latlab-test:latest"])
            .output();
    }
}

fn run_in(conf: &Path, runtime: &[String], extra: &[&str], image: &str, args: &[&str]) -> Output {
    podman(conf)
        .args(runtime)
        .args(["run", "--rm", "--network", "host", "--cap-drop", "ALL"])
        .args(extra)
        .arg(image)
        .args(args)
        .output()
        .unwrap()
}

fn under_podman(conf: &Path, runtime: &[String], image: &str) {
    let caps = ["--cap-add", "SYS_NICE", "--cap-add", "IPC_LOCK"];
    let out = run_in(conf, runtime, &caps, image, &["sysinfo", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(info["kernel_release"].is_string(), "{info}");
    // The real-time budget a container needs on a kernel that schedules per cgroup.
    let budget: &[&str] = if rt_group_sched() {
        &["--cgroup-parent", "/", "--cpu-rt-runtime", "100000"]
    } else {
        &[]
    };
    let with: Vec<&str> = caps.iter().chain(budget).copied().collect();
    let out = run_in(
        conf,
        runtime,
        &with,
        image,
        &["measure", "-D", "5s", "--json", "-"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["config"]["policy"], "fifo");
    assert_eq!(
        run["environment"]["memory_locked"], true,
        "{}",
        run["environment"]
    );
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(run["threads"].as_array().unwrap().len(), cpus);
    assert!(run["threads"][0]["stats"]["count"].as_u64().unwrap() > 1000);
    // What fails without each, with its message.
    let measure_with_only = |cap: &str| {
        run_in(
            conf,
            runtime,
            &[&["--cap-add", cap][..], budget].concat(),
            image,
            &["measure", "-D", "1s"],
        )
    };
    let out = measure_with_only("IPC_LOCK");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("missing capability CAP_SYS_NICE"),
        "{}",
        stderr(&out)
    );
    let out = measure_with_only("SYS_NICE");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("memory:   not locked: mlockall"),
        "{}",
        stdout(&out)
    );
    if rt_group_sched() {
        let out = run_in(conf, runtime, &caps, image, &["measure", "-D", "1s"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("has no real-time budget"),
            "{}",
            stderr(&out)
        );
    }
}

fn under_chroot(rootfs: &Path) {
    // /proc, /sys and /dev as a container runtime would give them, in a mount namespace of
    // the test's own (nothing outside it changes).
    let script = format!(
        "set -e; r={r}; mount -t proc proc $r/proc; mount --rbind /sys $r/sys; \
         mount --rbind /dev $r/dev; chroot $r /usr/bin/latlab sysinfo --json > {r}/../sysinfo.json; \
         chroot $r /usr/bin/latlab measure -D 5s --json - > {r}/../run.json",
        r = rootfs.display()
    );
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--fork",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let parent = rootfs.parent().unwrap();
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(parent.join("run.json")).unwrap()).unwrap();
    assert!(run["threads"][0]["stats"]["count"].as_u64().unwrap() > 1000);
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(parent.join("sysinfo.json")).unwrap())
            .unwrap();
    assert!(info.is_object());
}
