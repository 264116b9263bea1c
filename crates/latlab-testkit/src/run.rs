//! Results built by hand for the tests of what reads them (reports, the store): a seeded
//! generator, so a test's numbers are the same on every run, and the parts of a `RunResult`
//! every such test needs, put together by the model's own constructor.

use latlab_hist::Histogram;
use latlab_model::{
    MeasureConfig, RunHead, RunResult, Spikes, Stats, StopReason, SystemInfo, ThreadResult,
};

/// splitmix64: a small deterministic generator.
pub use latlab_model::rng::SplitMix64 as Rng;

/// A histogram of `(value, times)` pairs.
pub fn hist(values: &[(u64, u64)]) -> Histogram {
    let mut h = Histogram::new();
    for &(v, n) in values {
        h.record_n(v, n);
    }
    h
}

/// A measuring thread whose samples are `h` (its corrected histogram too: no missed period
/// added samples); the rest is left for the test to set.
pub fn thread(label: &str, cpu: Option<u32>, tid: i32, missed: u64, h: Histogram) -> ThreadResult {
    let stats = Stats::of(&h);
    ThreadResult {
        label: label.into(),
        cpu,
        tid,
        missed,
        expected_periods: None,
        max_at_ns: 0,
        stats: stats.clone(),
        corrected: stats,
        cpu_time_ns: None,
        histogram: h.clone(),
        corrected_histogram: h,
        windows: Vec::new(),
    }
}

/// A run `id` that started at `start_unix_ns` and lasted `elapsed_ns`, measured with `config`
/// on `system`, ended by its duration, of `threads` (the overall figures are theirs merged).
pub fn result(
    id: &str,
    (start_unix_ns, elapsed_ns): (u64, u64),
    config: MeasureConfig,
    system: SystemInfo,
    threads: Vec<ThreadResult>,
) -> RunResult {
    RunResult::from_threads(
        RunHead {
            id: id.into(),
            start_unix_ns,
            elapsed_ns,
            config,
            system,
            environment: Default::default(),
            stop: StopReason::Duration,
            spikes: Spikes::default(),
        },
        threads,
    )
}

/// A run `id` of one thread on CPU 0 that saw 100 samples of 5 µs, started at `start_unix_ns`
/// and lasting `elapsed_ns` (0: unknown, as for an import without them), every other part at its
/// default: for tests of what a format writes of a run's head.
pub fn one_cpu(id: &str, (start_unix_ns, elapsed_ns): (u64, u64)) -> RunResult {
    let t0 = thread("cpu0", Some(0), 10, 0, hist(&[(5_000, 100)]));
    result(
        id,
        (start_unix_ns, elapsed_ns),
        MeasureConfig::default(),
        SystemInfo::default(),
        vec![t0],
    )
}
