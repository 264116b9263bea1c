//! `tune search` on a simulated system: a copy of a fixture tree the candidates are really
//! applied to (through the journal), and a seeded measurement whose p99 depends on the values
//! the tree holds while it runs. One knob lowers p99 by 30 %, one does nothing, one raises it by
//! 30 %: the search must rank them so, keep only the first, confirm it and write it.
#![allow(clippy::unwrap_used)]

use latlab_model::load::{LoadReport, Throughput};
use latlab_model::units::CpuList;
use latlab_model::{MeasureConfig, RunResult, SystemInfo};
use latlab_sys::Sys;
use latlab_testkit::run::{Rng, hist, result, thread};
use latlab_tune::search::{self, Goal, Lab, Objective, Spec, Verdict};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TUNED: [&str; 3] = [
    "proc/sys/kernel/timer_migration",
    "proc/sys/vm/stat_interval",
    "proc/sys/kernel/sched_rt_runtime_us",
];

/// How the knobs (timer_migration, stat_interval, sched_rt_runtime_us as the tree holds them)
/// scale a run's latency and the load's throughput.
type Effect = fn(&[String; 3]) -> (f64, f64);

/// timer_migration off: -30 %; vm.stat_interval: nothing; RT throttling off: +30 %.
fn one_helps(k: &[String; 3]) -> (f64, f64) {
    let mut scale = 1.0;
    if k[0] == "0" {
        scale *= 0.7;
    }
    if k[2] == "-1" {
        scale *= 1.3;
    }
    (scale, 1.0)
}

/// The simulated machine: what its knobs hold decides the distribution of a run.
struct Simulated {
    root: PathBuf,
    effect: Effect,
    rng: Rng,
    /// (cell, the three knobs as the run saw them), in the order measured.
    seen: Vec<(String, [String; 3])>,
    kept: Vec<(String, u32)>,
    /// Lines of progress said, and the runs the search said it expects beyond its plan.
    progress: usize,
    more: usize,
}

impl Simulated {
    /// The machine at `root`, its runs drawn from `seed`, nothing measured yet.
    fn new(root: &Path, effect: Effect, seed: u64) -> Simulated {
        Simulated {
            root: root.to_path_buf(),
            effect,
            rng: Rng(seed),
            seen: Vec::new(),
            kept: Vec::new(),
            progress: 0,
            more: 0,
        }
    }

    fn knobs(&self) -> [String; 3] {
        TUNED.map(|f| {
            std::fs::read_to_string(self.root.join(f))
                .unwrap()
                .trim()
                .to_string()
        })
    }
}

impl Lab for Simulated {
    fn measure(&mut self, cell: &str, _repeat: u32) -> Result<RunResult, String> {
        let k = self.knobs();
        let (scale, work) = (self.effect)(&k);
        // A run-to-run spread of ±10 %, and 1000 samples spread over 50–150 µs.
        let run = scale * (0.9 + 0.2 * (self.rng.below(1000) as f64 / 1000.0));
        let samples: Vec<(u64, u64)> = (0..1000)
            .map(|_| {
                let us = 50.0 + self.rng.below(100) as f64;
                ((us * run * 1000.0) as u64, 1)
            })
            .collect();
        self.seen.push((cell.to_string(), k));
        let t = thread("cpu0", Some(0), 1, 0, hist(&samples));
        let mut run = result(
            "sim",
            (0, 1_000_000_000),
            MeasureConfig::default(),
            SystemInfo::default(),
            vec![t],
        );
        // A load beside it, whose rate varies by ±2 % from run to run.
        let rate = 1000.0 * work * (0.98 + 0.04 * (self.rng.below(1000) as f64 / 1000.0));
        run.loads.reports.push(LoadReport {
            spec: "matrix".into(),
            kind: "matrix".into(),
            cpus: None,
            workers: 1,
            started_ns: 0,
            elapsed_ns: 1_000_000_000,
            throughput: vec![Throughput {
                what: "matrix multiplies".into(),
                unit: "ops/s".into(),
                rate,
                total: rate,
            }],
            warnings: Vec::new(),
            failed: None,
        });
        Ok(run)
    }

    fn keep(&mut self, cell: &str, repeat: u32, _run: &RunResult) -> Result<(), String> {
        self.kept.push((cell.to_string(), repeat));
        Ok(())
    }

    fn progress(&mut self, _line: &str) {
        self.progress += 1;
    }

    fn expect_more(&mut self, runs: usize) {
        self.more += runs;
    }
}

/// A writable laptop tree (`root`) with its state directory (`state`) beside it.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let t = latlab_testkit::TuneTree::new("laptop-intel");
    (t.dir, t.root)
}

fn read_all(root: &Path) -> Vec<String> {
    TUNED
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect()
}

fn spec(state: PathBuf) -> Spec {
    Spec {
        objective: Objective::P99,
        goal: Goal::Audio,
        repeats: 5,
        budget: Duration::from_secs(3600),
        run_length: Duration::from_millis(100),
        cpus: CpuList::parse("0").unwrap(),
        state_dir: state,
        seed: 42,
    }
}

#[test]
fn the_search_keeps_the_knob_that_lowers_p99_and_only_it() {
    let (out, lab) = search_on_tree(one_helps, Goal::Audio, Duration::from_secs(3600), 7);

    // Ranked by measured effect: lower first.
    let ranked: Vec<(String, Verdict)> = out
        .rows
        .iter()
        .map(|r| (r.candidate.label(), r.verdict))
        .collect();
    assert_eq!(
        ranked,
        [
            ("timer_migration=off".to_string(), Verdict::Lowers),
            ("vmstat_interval=10s".to_string(), Verdict::NoEffectShown),
            ("rt_throttling=off".to_string(), Verdict::Raises),
        ]
    );
    let best = &out.rows[0].objective;
    assert!(
        (-40.0..-20.0).contains(&best.percent()),
        "{}",
        best.percent()
    );
    assert!(best.p.unwrap() < 0.05);
    assert!(out.rows[2].objective.percent() > 20.0);
    // One knob helped: nothing to combine; the confirmation shows it again on fresh runs.
    assert!(out.steps.is_empty());
    let c = out.confirmation.as_ref().unwrap();
    assert_eq!(c.settings, ["timer_migration=off"]);
    assert!(c.confirmed(), "{:?}", c.delta);
    assert_eq!((c.baseline.len(), c.tuned.len()), (5, 5));

    // The profile holds the winner and nothing else, and `tune apply` takes it.
    let text = out.profile.as_ref().unwrap();
    let table: toml::Table = toml::from_str(text).unwrap();
    assert_eq!(table["system"]["timer_migration"].as_bool(), Some(false));
    assert_eq!(table["system"].as_table().unwrap().len(), 1, "{text}");
    assert!(table.get("cpu").is_none(), "{text}");
    let p = latlab_tune::Profiles::builtin()
        .resolve_text("found", text)
        .unwrap();
    let (_dir, root) = tree();
    let plan = latlab_tune::Plan::build(&Sys::new(&root), &p, None).unwrap();
    assert_eq!(plan.counts().0, 1, "{:?}", plan.items);

    // Each run saw exactly its own candidate applied.
    for (cell, k) in &lab.seen {
        let expect = match cell.as_str() {
            "timer_migration=off" | "confirm: timer_migration=off" => ["0", "1", "950000"],
            "vmstat_interval=10s" => ["1", "10", "950000"],
            "rt_throttling=off" => ["1", "1", "-1"],
            "baseline" | "confirm: baseline" => ["1", "1", "950000"],
            other => panic!("unexpected cell {other}"),
        };
        assert_eq!(k, &expect.map(String::from), "{cell}");
    }
    assert_eq!(lab.seen.len(), 4 * 5 + 2 * 5);
    assert_eq!(lab.kept.len(), lab.seen.len());
    assert_eq!(out.runs_done, 30);
    assert!(!out.interrupted && out.cut_short.is_none());
}

#[test]
fn a_small_budget_measures_fewer_candidates_and_says_which() {
    // 100 ms per run: 2.5 s are 25 runs; the confirmation's 10 leave 3 cells per round of 5
    // repeats: the baseline and 2 candidates.
    let budget = Duration::from_millis(2500);
    let tight = Spec {
        budget,
        ..spec(PathBuf::new())
    };
    assert_eq!(tight.screenable(3), Some(2));
    let (out, _) = search_on_tree(one_helps, Goal::Audio, budget, 9);
    assert_eq!(out.rows.len(), 2);
    let skipped: Vec<&str> = out.not_tried.iter().map(|n| n.what.as_str()).collect();
    assert_eq!(skipped, ["rt_throttling=off"]);
    assert!(out.not_tried[0].why.contains("budget"));
}

#[test]
fn knobs_this_machine_lacks_are_not_tried_and_say_why() {
    let (_dir, root) = tree();
    let sys = Sys::new(&root);
    let cpus = CpuList::parse("0").unwrap();
    std::fs::remove_file(root.join("dev/cpu_dma_latency")).unwrap();
    let (found, not) = search::candidates(&sys, &["pm_qos", "irq_affinity"], &cpus).unwrap();
    assert!(found.iter().all(|c| c.knob == "irq_affinity"), "{found:?}");
    let pm = not.iter().find(|n| n.what == "pm_qos=0").unwrap();
    assert_eq!(pm.why, "unsupported here: no /dev/cpu_dma_latency");
    // Measuring every CPU leaves nothing to move IRQs away to.
    let all = sys.online_cpus().unwrap();
    let (_, not) = search::candidates(&sys, &["irq_affinity"], &all).unwrap();
    assert!(not[0].why.contains("give --cpus"), "{not:?}");
}

fn three_knobs() -> Vec<&'static str> {
    search::select_knobs(
        &[
            "timer_migration".into(),
            "vmstat_interval".into(),
            "rt_throttling".into(),
        ],
        &[],
    )
    .unwrap()
}

/// A lab that keeps every run it is given, and hands back the runs of an earlier search as
/// saved (what `--resume` does with the store).
struct Resumed {
    inner: Simulated,
    kept: std::collections::BTreeMap<(String, u32), RunResult>,
    saved: std::collections::BTreeMap<(String, u32), RunResult>,
}

impl Lab for Resumed {
    fn measure(&mut self, cell: &str, repeat: u32) -> Result<RunResult, String> {
        self.inner.measure(cell, repeat)
    }
    fn saved(&mut self, cell: &str, repeat: u32) -> Option<RunResult> {
        self.saved.get(&(cell.to_string(), repeat)).cloned()
    }
    fn is_saved(&self, cell: &str, repeat: u32) -> bool {
        self.saved.contains_key(&(cell.to_string(), repeat))
    }
    fn keep(&mut self, cell: &str, repeat: u32, run: &RunResult) -> Result<(), String> {
        self.kept.insert((cell.to_string(), repeat), run.clone());
        Ok(())
    }
}

/// A resumed search has what the interrupted one left of the budget: the runs it reloads count
/// with the time they measured (1 s each here), so 15 saved screening runs spend a 2.5 s budget
/// and leave no time for the confirmation, which a fresh budget would have measured.
#[test]
fn a_resumed_search_has_the_budget_the_interrupted_one_left() {
    let (dir, root) = tree();
    let sys = Sys::new(&root);
    let cpus = CpuList::parse("0").unwrap();
    let lab = |saved| Resumed {
        inner: Simulated::new(&root, one_helps, 5),
        kept: Default::default(),
        saved,
    };
    let budget = Duration::from_millis(2500);
    let spec = |budget| Spec {
        budget,
        ..spec(dir.path().join("state"))
    };
    let search = |lab: &mut Resumed, budget| {
        let (candidates, not_tried) = search::candidates(&sys, &three_knobs(), &cpus).unwrap();
        search::search(&sys, &spec(budget), candidates, not_tried, lab).unwrap()
    };
    let mut first = lab(Default::default());
    let out = search(&mut first, budget);
    assert!(out.confirmation.is_some(), "{:?}", out.cut_short);
    // The screening's runs, as an interrupted search would have left them.
    let screening: std::collections::BTreeMap<_, _> = first
        .kept
        .into_iter()
        .filter(|((cell, _), _)| !cell.contains(": "))
        .collect();
    assert_eq!(screening.len(), 15);
    assert!(screening.values().all(|r| r.elapsed_ns == 1_000_000_000));

    let mut resumed = lab(screening.clone());
    let out = search(&mut resumed, budget);
    assert!(resumed.inner.seen.is_empty(), "{:?}", resumed.inner.seen);
    assert!(out.confirmation.is_none());
    let why = out.cut_short.unwrap_or_default();
    assert!(why.contains("the budget left no time"), "{why}");
    assert!(out.elapsed >= Duration::from_secs(15), "{:?}", out.elapsed);
    assert_eq!(out.rows.len(), 2, "the saved screening is reported");

    // With budget to spare, the same saved runs lead on to the confirmation (and to the
    // candidate the small budget left out); no saved run is measured again.
    let mut resumed = lab(screening.clone());
    let out = search(&mut resumed, Duration::from_secs(60));
    assert!(out.confirmation.is_some(), "{:?}", out.cut_short);
    let seen = &resumed.inner.seen;
    assert_eq!(
        seen.iter()
            .filter(|(c, _)| c.starts_with("confirm: "))
            .count(),
        10
    );
    assert!(
        seen.iter()
            .all(|(c, _)| !screening.keys().any(|(k, _)| k == c)),
        "{seen:?}"
    );
}

/// A search of the three knobs on a fresh tree under `effect`, for `goal`, within `budget`; the
/// tree must be as it was afterwards, with no journal left.
fn search_on_tree(
    effect: Effect,
    goal: Goal,
    budget: Duration,
    seed: u64,
) -> (search::Outcome, Simulated) {
    let (dir, root) = tree();
    let sys = Sys::new(&root);
    let before = read_all(&root);
    let cpus = CpuList::parse("0").unwrap();
    let (candidates, not_tried) = search::candidates(&sys, &three_knobs(), &cpus).unwrap();
    assert_eq!(candidates.len(), 3, "{not_tried:?}");
    let mut lab = Simulated::new(&root, effect, seed);
    let spec = Spec {
        goal,
        budget,
        ..spec(dir.path().join("state"))
    };
    let out = search::search(&sys, &spec, candidates, not_tried, &mut lab).unwrap();
    assert_eq!(read_all(&root), before, "the search left the tree changed");
    let journal = dir
        .path()
        .join("state")
        .join(latlab_tune::journal::JOURNAL_FILE);
    assert!(!journal.exists(), "a journal was left behind");
    (out, lab)
}

fn search_with(effect: Effect, goal: Goal) -> search::Outcome {
    search_on_tree(effect, goal, Duration::from_secs(3600), 11).0
}

fn profile_system(out: &search::Outcome) -> Vec<String> {
    let table: toml::Table = toml::from_str(out.profile.as_ref().unwrap()).unwrap();
    let mut keys: Vec<String> = table["system"]
        .as_table()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[test]
fn two_knobs_whose_effects_add_up_are_both_kept() {
    // timer_migration off: -30 %, vm.stat_interval 10 s: -25 %, together -47 %.
    let (out, lab) = search_on_tree(
        |k| {
            let mut s = 1.0;
            if k[0] == "0" {
                s *= 0.7;
            }
            if k[1] == "10" {
                s *= 0.75;
            }
            (s, 1.0)
        },
        Goal::Audio,
        Duration::from_secs(3600),
        11,
    );
    assert_eq!(out.steps.len(), 1, "{:?}", out.steps);
    // Progress counts to what was planned (baseline and 3 candidates, then the confirmation,
    // 5 repeats each) and the step the search added once it knew it: 20 + 10 + 10.
    assert_eq!(lab.more, 10);
    assert_eq!(lab.progress, 40);
    let step = &out.steps[0];
    assert_eq!(
        (step.added.as_str(), step.with.clone(), step.kept),
        (
            "vmstat_interval=10s",
            vec!["timer_migration=off".to_string()],
            true
        )
    );
    let c = out.confirmation.as_ref().unwrap();
    assert!(c.confirmed() && c.delta.percent() < -35.0, "{:?}", c.delta);
    assert_eq!(
        profile_system(&out),
        ["timer_migration", "vmstat_interval_s"]
    );
}

#[test]
fn a_knob_that_adds_nothing_to_the_first_is_left_out() {
    // Either knob alone: -30 %; both: still -30 % (two ways to the same end).
    let out = search_with(
        |k| {
            let s = if k[0] == "0" || k[1] == "10" {
                0.7
            } else {
                1.0
            };
            (s, 1.0)
        },
        Goal::Audio,
    );
    let lowering = out
        .rows
        .iter()
        .filter(|r| r.verdict == Verdict::Lowers)
        .count();
    assert_eq!(lowering, 2);
    assert_eq!(out.steps.len(), 1);
    assert!(!out.steps[0].kept, "{:?}", out.steps[0]);
    assert_eq!(out.confirmation.as_ref().unwrap().settings.len(), 1);
    assert_eq!(profile_system(&out).len(), 1);
}

#[test]
fn for_throughput_a_knob_that_costs_the_load_its_work_is_not_kept() {
    // timer_migration off: -30 % latency but -20 % throughput.
    let costly = |k: &[String; 3]| {
        if k[0] == "0" { (0.7, 0.8) } else { (1.0, 1.0) }
    };
    let out = search_with(costly, Goal::Throughput);
    let row = out
        .rows
        .iter()
        .find(|r| r.candidate.knob == "timer_migration")
        .unwrap();
    assert_eq!(row.verdict, Verdict::CostsThroughput);
    assert!(row.throughput.unwrap().percent() < -15.0);
    assert!(out.confirmation.is_none() && out.profile.is_none());
    let front = out.throughput_front().unwrap();
    // Its lowest latency at its lower throughput, and cells that keep the full rate.
    assert_eq!(front[0].label, "timer_migration=off", "{front:?}");
    assert!(front.len() >= 2 && front[1].other > 950.0, "{front:?}");
    // The same machine tuned for audio keeps it.
    let out = search_with(costly, Goal::Audio);
    assert_eq!(profile_system(&out), ["timer_migration"]);
    assert!(out.power_front().is_err(), "no power readings, no front");
}

/// A lab that, during its first baseline run, has another process apply a profile for good.
struct Intruded {
    inner: Simulated,
    sys: Sys,
    state: PathBuf,
    done: bool,
}

impl Lab for Intruded {
    fn measure(&mut self, cell: &str, repeat: u32) -> Result<RunResult, String> {
        if cell == "baseline" && !self.done {
            self.done = true;
            let p = latlab_tune::Profiles::builtin()
                .resolve_text("theirs", "[system]\nvmstat_interval_s = 5\n")
                .unwrap();
            latlab_tune::apply(&self.sys, &p, &self.state, &Default::default()).unwrap();
        }
        self.inner.measure(cell, repeat)
    }
}

#[test]
fn a_tuning_applied_by_another_process_meanwhile_stops_the_search() {
    let (dir, root) = tree();
    let sys = Sys::new(&root);
    let state = dir.path().join("state");
    let cpus = CpuList::parse("0").unwrap();
    let (candidates, not_tried) = search::candidates(&sys, &three_knobs(), &cpus).unwrap();
    let mut lab = Intruded {
        inner: Simulated::new(&root, one_helps, 3),
        sys: sys.clone(),
        state: state.clone(),
        done: false,
    };
    let e = search::search(&sys, &spec(state), candidates, not_tried, &mut lab).unwrap_err();
    // The next baseline refuses to measure a tuned system, or the next candidate finds the
    // tuning in place: either way the search stops and says so.
    let msg = e.to_string();
    assert!(
        msg.contains("a tuning was applied during the search") || msg.contains("is applied"),
        "{msg}"
    );
}

/// The idle knob's values are exit latencies of the idle states the kernel lists, short of the
/// deepest, wherever the numbering has gaps: the shallowest cut, one between and the deepest
/// (C10 alone off, the cut that costs least; C6's exit latency is 85 µs).
#[test]
fn idle_values_come_from_every_listed_state() {
    let dir = latlab_testkit::copy_machine("laptop-intel", &[]);
    let idle = dir.path().join("sys/devices/system/cpu/cpu0/cpuidle");
    std::fs::rename(idle.join("state1"), idle.join("state17")).unwrap();
    let sys = latlab_sys::Sys::new(dir.path());
    let cpus = latlab_model::units::CpuList::parse("0").unwrap();
    let (found, _) = latlab_tune::search::candidates(&sys, &["idle"], &cpus).unwrap();
    let values: Vec<&str> = found.iter().map(|c| c.value.as_str()).collect();
    assert_eq!(values, ["0us", "10us", "85us"]);
}

/// A search stopped by a signal after `after` runs.
struct Stopped {
    inner: Simulated,
    after: usize,
}

impl Lab for Stopped {
    fn measure(&mut self, cell: &str, repeat: u32) -> Result<RunResult, String> {
        self.inner.measure(cell, repeat)
    }
    fn stop_requested(&self) -> bool {
        self.inner.seen.len() >= self.after
    }
}

/// Stopped in the middle of its screening, a search tells nothing of the candidates it has too
/// few runs of: not "no effect shown", which reads as a verdict.
#[test]
fn an_interrupted_screening_concludes_nothing() {
    let (dir, root) = tree();
    let sys = Sys::new(&root);
    let cpus = CpuList::parse("0").unwrap();
    let mut lab = Stopped {
        inner: Simulated::new(&root, one_helps, 5),
        after: 7,
    };
    let (candidates, not_tried) = search::candidates(&sys, &three_knobs(), &cpus).unwrap();
    let out = search::search(
        &sys,
        &spec(dir.path().join("state")),
        candidates,
        not_tried,
        &mut lab,
    )
    .unwrap();
    assert!(out.interrupted);
    assert!(!out.rows.is_empty(), "{:?}", out.not_tried);
    assert!(
        out.rows.iter().all(|r| r.verdict == Verdict::TooFewRuns),
        "{:?}",
        out.rows
            .iter()
            .map(|r| (r.runs.len(), r.verdict))
            .collect::<Vec<_>>()
    );
    assert!(out.confirmation.is_none());
}

/// Stopped before its baseline was measured, a search says the candidates it did measure were
/// measured, with nothing to compare them with (not "not measured: the search stopped first"),
/// and every run it measured is counted somewhere.
#[test]
fn runs_measured_before_the_baseline_are_said_measured_not_compared() {
    let (dir, root) = tree();
    let sys = Sys::new(&root);
    let cpus = CpuList::parse("0").unwrap();
    let mut found = false;
    for seed in 1..40 {
        let mut lab = Stopped {
            inner: Simulated::new(&root, one_helps, 5),
            after: 2,
        };
        let (candidates, not_tried) = search::candidates(&sys, &three_knobs(), &cpus).unwrap();
        let mut sp = spec(dir.path().join(format!("state{seed}")));
        sp.seed = seed;
        let out = search::search(&sys, &sp, candidates, not_tried, &mut lab).unwrap();
        let aside: usize = out.not_tried.iter().map(|n| n.measured.len()).sum();
        let compared: usize = out.rows.iter().map(|r| r.runs.len()).sum();
        assert_eq!(
            aside + compared + out.baseline.len(),
            out.runs_done as usize,
            "seed {seed}"
        );
        for n in out.not_tried.iter().filter(|n| !n.measured.is_empty()) {
            assert!(out.baseline.is_empty(), "seed {seed}: {n:?}");
            assert!(
                n.why.contains("measured, but not the baseline"),
                "seed {seed}: {}",
                n.why
            );
        }
        if out.baseline.is_empty() && aside > 0 {
            found = true;
            break;
        }
    }
    assert!(found, "no seed stopped a search before its baseline");
}

/// A run measured under a candidate that holds a /dev/cpu_dma_latency request records it, as a
/// `measure --profile` run does (it was said "not held" though the request ruled the run).
#[test]
fn a_pm_qos_candidates_runs_record_the_request_held() {
    let (dir, root) = tree();
    let sys = Sys::new(&root);
    let cpus = CpuList::parse("0").unwrap();
    let knobs = search::select_knobs(&["pm_qos".into()], &[]).unwrap();
    let (candidates, not_tried) = search::candidates(&sys, &knobs, &cpus).unwrap();
    assert_eq!(candidates.len(), 1, "{not_tried:?}");
    let mut lab = Resumed {
        inner: Simulated::new(&root, one_helps, 3),
        kept: Default::default(),
        saved: Default::default(),
    };
    let spec = spec(dir.path().join("state"));
    search::search(&sys, &spec, candidates, not_tried, &mut lab).unwrap();
    let held = |cell: &str| -> Vec<Option<u32>> {
        lab.kept
            .iter()
            .filter(|((c, _), _)| c == cell)
            .map(|(_, r)| r.environment.pm_qos_held_us)
            .collect()
    };
    assert_eq!(held("pm_qos=0"), vec![Some(0); 5]);
    assert!(held("baseline").iter().all(Option::is_none));
    let profiles: Vec<Option<&str>> = lab
        .kept
        .iter()
        .filter(|((c, _), _)| c == "pm_qos=0")
        .map(|(_, r)| r.environment.profile.as_deref())
        .collect();
    assert!(
        profiles
            .iter()
            .all(|p| p.is_some_and(|p| p.contains("pm_qos"))),
        "{profiles:?}"
    );
}
