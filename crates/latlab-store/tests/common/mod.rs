//! A realistic result built by hand: several threads with windows, spikes, samples and loads.
#![allow(clippy::unwrap_used, dead_code)]

use latlab_hist::Histogram;
use latlab_model::load::{LoadPhase, LoadReport, Loads, Throughput};
use latlab_model::samples::{
    CpuIdleStates, CpuSample, CpuSummary, PowerSource, Sample, Samples, ThermalSummary,
};
use latlab_model::system::Field;
use latlab_model::*;

use latlab_testkit::run::{result as built, thread};

/// A deterministic pseudo-random sequence (xorshift). Not the test kit's generator: the stored
/// version-1 fixture (`tests/fixtures/store-v1.db`) holds [`result`]'s values from this one.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A latency-like value: mostly 2..60 µs, sometimes a tail up to 3 ms.
    pub fn latency(&mut self) -> u64 {
        let r = self.next();
        if r.is_multiple_of(500) {
            100_000 + r % 3_000_000
        } else {
            2_000 + r % 58_000
        }
    }
}

pub fn result(uid: &str, seed: u64) -> RunResult {
    let mut rng = Rng::new(seed);
    let interval = 1_000_000;
    let mut threads = Vec::new();
    let mut kept = Vec::new();
    for t in 0..3u32 {
        let mut h = Histogram::new();
        let mut windows = Vec::new();
        for w in 0..5u64 {
            let wh: Histogram = (0..200).map(|_| rng.latency()).collect();
            windows.push(Window {
                index: w,
                start_ns: w * 200 * interval,
                count: wh.count(),
                min: wh.min(),
                max: wh.max(),
                p99: wh.percentile(99.0),
                missed: w % 2,
            });
            h.merge(&wh);
        }
        let mut c = h.clone();
        c.record_series(2_500_000, interval, 2, 1);
        for k in 0..4u64 {
            kept.push(Spike {
                thread: t,
                cpu: Some(t * 2),
                at_ns: 1_000_000 * (k * 37 + u64::from(t)),
                value_ns: 150_000 + k * 1_111 + u64::from(t),
                story: None,
            });
        }
        threads.push(ThreadResult {
            expected_periods: Some(1002),
            max_at_ns: 123_456_789 + u64::from(t),
            corrected: Stats::of(&c),
            cpu_time_ns: if t == 1 { None } else { Some(9_876_543) },
            corrected_histogram: c,
            windows,
            ..thread(&format!("cpu{}", t * 2), Some(t * 2), 4000 + t as i32, 2, h)
        });
    }
    let system = SystemInfo {
        hostname: "bench-1".into(),
        kernel_release: "6.18.44-rt".into(),
        kernel_version: "#1 SMP PREEMPT_RT".into(),
        machine: "x86_64".into(),
        cpu_model: "Example CPU @ 2.0GHz".into(),
        cpus_online: vec![0, 1, 2, 3, 4, 5],
        cpus_possible: 8,
        preempt: "rt (kernel version)".into(),
        cmdline: "quiet isolcpus=2-5 nohz_full=2-5".into(),
        clocksource: "tsc".into(),
        timer_migration: Field::Value(0),
        transparent_hugepage: Field::unavailable("not readable"),
        vulnerabilities: vec![("spectre_v2".into(), "Mitigation: Retpolines".into())],
        ..SystemInfo::default()
    };
    let samples = Samples {
        period_ns: 100_000_000,
        sampler_cpus: vec![0],
        sampler_cpu_time_ns: 1_234_567,
        idle_states: vec![CpuIdleStates {
            cpu: 0,
            states: vec!["POLL".into(), "C1".into(), "C6".into()],
        }],
        power_sources: Field::Value(vec![PowerSource {
            name: "rapl:package-0".into(),
            avg_w: Some(12.345_678_901_234),
            energy_j: Some(12.345_678_901_234 * 1.002),
            wraps: 0,
        }]),
        thermal_zones: vec!["x86_pkg_temp".into()],
        thermal_unavailable: None,
        frequency: Field::Value("scaling_cur_freq".into()),
        smi: None,
        cpus: vec![CpuSummary {
            cpu: 0,
            avg_freq_khz: Some(2_345_678),
            util_pct: Some(std::f64::consts::PI),
            steal_pct: None,
            irqs_per_s: Some(1_001.000_000_000_1),
            softirqs_per_s: Some(0.1 + 0.2),
            smis: None,
            idle_residency_pct: vec![0.5, 10.25, 89.0 / 3.0],
            idle_entries_per_s: vec![1.0 / 7.0, 250.0, 12.5],
        }],
        thermal: vec![ThermalSummary {
            zone: "x86_pkg_temp".into(),
            avg_c: 47.123_456_789,
            max_c: 52.0,
        }],
        series: (0..10u64)
            .map(|k| Sample {
                at_ns: (k + 1) * 100_000_000,
                dt_ns: 100_000_000 + k,
                cpus: vec![CpuSample {
                    cpu: 0,
                    online: true,
                    freq_khz: Some(2_000_000 + k * 1000),
                    util_pct: Some(k as f64 / 3.0),
                    steal_pct: Some(0.0),
                    irqs: Some(100 + k),
                    softirqs: None,
                    smis: None,
                    idle_time_us: vec![1, 2, 3 + k],
                    idle_usage: vec![4, 5, 6],
                }],
                power_w: vec![Some(12.0 + k as f64 / 9.0), None],
                temp_c: vec![Some(47.0 + k as f64 / 7.0)],
            })
            .collect(),
    };
    let loads = Loads {
        reports: vec![
            LoadReport {
                spec: "matrix:size=128".into(),
                kind: "matrix".into(),
                cpus: Some(vec![1, 3]),
                workers: 2,
                started_ns: 0,
                elapsed_ns: 1_000_000_000,
                throughput: vec![Throughput {
                    what: "matrix multiplies".into(),
                    unit: "ops/s".into(),
                    rate: 1_234.567_890_123,
                    total: 1_234.567_890_123 * 1.000_000_1,
                }],
                warnings: vec![],
                failed: None,
            },
            LoadReport {
                spec: "io:size=4k".into(),
                kind: "io".into(),
                cpus: None,
                workers: 1,
                started_ns: 500_000_000,
                elapsed_ns: 500_000_000,
                throughput: vec![
                    Throughput {
                        what: "writes".into(),
                        unit: "IOPS".into(),
                        rate: 9_999.25,
                        total: 4_999.625,
                    },
                    Throughput {
                        what: "bytes written".into(),
                        unit: "MB/s".into(),
                        rate: 40.95,
                        total: 20.475,
                    },
                ],
                warnings: vec!["fsync is slow here".into()],
                // Kept as stored: a run measured beside a load that failed says so when read.
                failed: Some("the command ended on its own after 3ms with exit status 3".into()),
            },
        ],
        phases: vec![
            LoadPhase {
                index: 0,
                spec: "idle".into(),
                start_ns: 0,
                end_ns: 500_000_000,
            },
            LoadPhase {
                index: 1,
                spec: "io:size=4k".into(),
                start_ns: 500_000_000,
                end_ns: 1_000_000_000,
            },
        ],
    };
    let start_unix_ns = 1_790_000_000_000_000_000 + seed * 10_000_000_000;
    let mut r = RunResult {
        environment: RunEnvironment {
            memory_locked: true,
            pm_qos_held_us: Some(0),
            coordinator_cpus: vec![1, 3, 5],
            coordinator_shares_measured_cpus: false,
            euid: 0,
            trace_marker: None,
            warnings: vec!["timer_migration is on".into()],
            profile: Some("lowlatency".into()),
            tuning: vec!["cpu2 governor: powersave -> performance".into()],
            // Fields added to the model later keep their defaults here.
            ..RunEnvironment::default()
        },
        stop: StopReason::Signal {
            signal: "SIGINT".into(),
        },
        spikes: Spikes {
            threshold_ns: Some(100_000),
            kept,
            not_kept: 17,
        },
        samples: Some(samples),
        loads,
        ..built(
            uid,
            (start_unix_ns, 1_000_000_000),
            MeasureConfig {
                interval_ns: interval,
                duration_ns: Some(1_000_000_000),
                cpus: Some(vec![0, 2, 4]),
                threads: 3,
                pm_qos_us: Some(0),
                window_ns: 200_000_000,
                spike_threshold_ns: Some(100_000),
                stagger: true,
                ..Default::default()
            },
            system,
            threads,
        )
    };
    // The worst thread as the version-1 fixture stored it (set by hand, not the data's own).
    (r.overall.max_thread, r.overall.max_at_ns) = (1, 123_456_790);
    r
}
