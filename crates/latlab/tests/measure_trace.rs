//! `latlab measure --trace`: kernel histograms beside the measurement, and a spike provoked by
//! this test told as a story that names the provoking task; the story saved in the store.
//! Runs that need root say why they skip without it.
#![allow(clippy::unwrap_used)]

use latlab_model::RunResult;
use latlab_model::trace::Family;
use latlab_testkit::latlab;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn last_online_cpu() -> u32 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let last = text.trim().rsplit([',', '-']).next().unwrap();
    last.parse().unwrap()
}

/// A SCHED_FIFO 99 thread named `provoker`, pinned to `cpu`, that holds the CPU for 2 ms every
/// 150 ms until `stop`: each burst delays a lower-priority measuring thread on that CPU.
fn provoker(cpu: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u32> {
    std::thread::Builder::new()
        .name("provoker".into())
        .spawn(move || {
            latlab_sys::thread::set_affinity(&[cpu]).expect("pinning the provoker");
            latlab_sys::thread::set_scheduler(libc::SCHED_FIFO, 99).expect("SCHED_FIFO 99");
            let mut bursts = 0;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(150));
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
                bursts += 1;
            }
            bursts
        })
        .unwrap()
}

#[test]
fn a_provoked_spike_gets_a_story_that_names_the_provoking_task() {
    if !latlab_testkit::root_or_skip("tracing with SCHED_FIFO") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, db) = (dir.path().join("r.json"), dir.path().join("s.db"));
    let cpu = last_online_cpu();
    let stop = Arc::new(AtomicBool::new(false));
    let hog = provoker(cpu, stop.clone());
    let out = latlab!()
        .args(["measure", "-a", &cpu.to_string(), "-p", "50", "-D", "3s"])
        .args(["--trace", "--spike", "500us", "--no-samplers", "-q"])
        .arg("--json")
        .arg(&json)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let bursts = hog.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(bursts >= 10, "the provoker ran {bursts} bursts");

    let r = RunResult::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = r.trace.as_ref().expect("a traced run has its trace");
    assert_eq!(t.cpus, [cpu]);
    // Kernel histograms beside the measurement: every timer wake-up of the measuring thread
    // runs an hrtimer handler and a wake-up.
    for fam in [Family::Hrtimer, Family::Wakeup] {
        let f = t.family(fam).unwrap();
        assert!(
            f.histogram.count() > 1000,
            "{fam:?}: {}",
            f.histogram.count()
        );
        assert!(f.histogram.min() <= f.histogram.max());
        let per_cpu: u64 = f.per_cpu.iter().map(|c| c.histogram.count()).sum();
        assert_eq!(per_cpu, f.histogram.count(), "{fam:?}");
    }
    assert!(t.cost.available && t.cost.run_count > 0, "{:?}", t.cost);

    // Spikes above 500 us happen when the provoker holds the CPU; their stories name it.
    let told: Vec<_> = r
        .spikes
        .kept
        .iter()
        .filter_map(|s| s.story.as_ref().map(|st| (s, st)))
        .collect();
    assert!(!r.spikes.kept.is_empty(), "no spike: {text}");
    assert!(!told.is_empty(), "no story: {:?}", t.warnings);
    let named: Vec<_> = told
        .iter()
        .filter(|(_, st)| {
            st.tasks
                .iter()
                .any(|task| task.comm == "provoker" && task.ran_ns >= 400_000)
        })
        .collect();
    assert!(
        !named.is_empty(),
        "no story names the provoker: {:#?}",
        told.iter().map(|(_, st)| st.summary()).collect::<Vec<_>>()
    );
    for (s, st) in &told {
        assert_eq!(st.cpu, cpu);
        assert_eq!(st.to_ns - st.from_ns, s.value_ns);
        // Each knows its measuring thread by id (a second latlab's thread has the same name).
        let tid = r.threads[s.thread as usize].tid;
        assert!(tid > 0);
        assert_eq!(st.measuring_tid, u32::try_from(tid).ok());
    }
    // The text tells the stories too.
    assert!(text.contains("spike stories ("), "{text}");
    assert!(text.contains("task provoker["), "{text}");
    assert!(text.contains("trace ("), "{text}");

    // The store keeps trace and stories: `latlab export` gives back the same JSON.
    let exported = latlab!()
        .args(["export", "1", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(exported.status.success());
    let back = RunResult::from_json(&String::from_utf8_lossy(&exported.stdout)).unwrap();
    assert_eq!(back.trace, r.trace);
    assert_eq!(back.spikes, r.spikes);
}

/// Without the privileges to trace, the run stops before anything is changed: the profile
/// asked for is not applied (no tuning journal is written).
#[test]
fn without_privileges_nothing_is_touched() {
    let state = tempfile::tempdir().unwrap();
    let Some(mut cmd) = latlab_testkit::unprivileged(env!("CARGO_BIN_EXE_latlab"), "-all") else {
        return;
    };
    std::fs::set_permissions(
        state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = cmd
        .args(["measure", "-D", "1s", "--trace", "--profile", "lowlatency"])
        .arg("--state-dir")
        .arg(state.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--trace") && err.contains("CAP_BPF") && err.contains("root"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
}
