#![allow(clippy::unwrap_used)]
use super::*;

pub(crate) fn sample_result() -> RunResult {
    let h: Histogram = [30_000, 31_000, 45_000, 2_000_000].into_iter().collect();
    let stats = Stats::of(&h);
    let thread = ThreadResult {
        label: "cpu0".into(),
        cpu: Some(0),
        tid: 42,
        missed: 1,
        expected_periods: Some(5),
        max_at_ns: 3_000_000,
        stats: stats.clone(),
        corrected: stats.clone(),
        cpu_time_ns: Some(1000),
        histogram: h.clone(),
        corrected_histogram: h.clone(),
        windows: vec![Window {
            index: 0,
            start_ns: 0,
            count: 4,
            min: 30_000,
            max: 2_000_000,
            p99: 2_000_000,
            missed: 1,
        }],
    };
    RunResult {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        latlab_version: "0.1.0".into(),
        id: "test".into(),
        started_at: rfc3339_utc(0),
        ended_at: rfc3339_utc(5_000_000),
        start_unix_ns: 0,
        elapsed_ns: 5_000_000,
        config: MeasureConfig {
            duration_ns: Some(5_000_000),
            cpus: Some(vec![0]),
            ..Default::default()
        },
        system: SystemInfo::default(),
        environment: RunEnvironment::default(),
        stop: StopReason::Duration,
        threads: vec![thread],
        overall: Overall {
            missed: 1,
            max_at_ns: 3_000_000,
            max_thread: 0,
            stats: stats.clone(),
            corrected: stats,
            histogram: h,
        },
        spikes: Spikes::default(),
        samples: None,
        loads: Default::default(),
        trace: None,
    }
}

#[test]
fn result_round_trips_through_json() {
    let r = sample_result();
    let text = r.to_json_pretty();
    let back = RunResult::from_json(&text).expect("parses");
    assert_eq!(back, r);
    assert!(text.contains("\"method\": \"clock-nanosleep\""));
    assert!(text.contains("\"reason\": \"duration\""));
}

#[test]
fn other_documents_and_newer_versions_are_refused() {
    let mut v: serde_json::Value = serde_json::from_str(&sample_result().to_json_pretty()).unwrap();
    v["schema_version"] = serde_json::json!(SCHEMA_VERSION + 1);
    let err = RunResult::from_json(&v.to_string()).unwrap_err();
    assert!(matches!(err, ModelError::TooNew { .. }), "{err}");
    v["schema"] = serde_json::json!("something.else");
    assert!(matches!(
        RunResult::from_json(&v.to_string()),
        Err(ModelError::NotAResult(_))
    ));
    assert!(matches!(
        RunResult::from_json("{}"),
        Err(ModelError::NotAResult(_))
    ));
}

#[test]
fn system_info_reads_with_missing_fields() {
    let s: SystemInfo = serde_json::from_str(r#"{"hostname":"h"}"#).unwrap();
    assert_eq!(s.hostname, "h");
    assert!(s.cpus_online.is_empty());
}

#[test]
fn names_round_trip() {
    for m in Method::ALL {
        assert_eq!(Method::from_name(m.name()), Some(m));
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(j, format!("\"{}\"", m.name()));
    }
    for p in Policy::ALL {
        assert_eq!(Policy::from_name(p.name()), Some(p));
    }
}

#[test]
fn unavailable_fields_round_trip_as_such() {
    use crate::system::{Field, KernelConfig};
    let f: Field<KernelConfig> = Field::unavailable("no config");
    let text = serde_json::to_string(&f).unwrap();
    assert_eq!(text, r#"{"unavailable":"no config"}"#);
    let back: Field<KernelConfig> = serde_json::from_str(&text).unwrap();
    assert_eq!(back.reason(), Some("no config"));
    let v: Field<KernelConfig> = serde_json::from_str(r#"{"source":"x","hz":250}"#).unwrap();
    assert_eq!(v.value().unwrap().hz, Some(250));
}

#[test]
fn power_meters_and_smis_are_optional_and_round_trip() {
    use crate::samples::{CpuSample, CpuSummary};
    use crate::system::{Field, PowerMeter};
    // Records from before these fields read as `None` and write back without them.
    let old = r#"{"hostname":"h","vulnerabilities":[]}"#;
    let s: SystemInfo = serde_json::from_str(old).unwrap();
    assert_eq!(s.power_meters, None);
    assert_eq!(s.smi_count, None);
    let text = serde_json::to_string(&SystemInfo::default()).unwrap();
    assert!(
        !text.contains("power_meters") && !text.contains("smi_count"),
        "{text}"
    );
    let c: CpuSample = serde_json::from_str(r#"{"cpu":0,"online":true,"irqs":5}"#).unwrap();
    assert_eq!(c.smis, None);
    assert!(!serde_json::to_string(&c).unwrap().contains("smis"));
    // New records keep both, also when unavailable.
    let s = SystemInfo {
        power_meters: Some(Field::Value(vec![PowerMeter {
            name: "battery:BAT0".into(),
            source: "/sys/class/power_supply/BAT0/power_now".into(),
        }])),
        smi_count: Some(Field::unavailable("/dev/cpu/0/msr absent")),
        ..SystemInfo::default()
    };
    let back: SystemInfo = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
    let c = CpuSummary {
        smis: Some(3),
        ..CpuSummary::default()
    };
    let back: CpuSummary = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back.smis, Some(3));
}

#[test]
fn exact_percentiles_replace_lower_bounds_and_are_optional() {
    let mut h = Histogram::new();
    h.record_n(10_000, 9);
    h.record(500_000);
    let plain = Stats::of(&h);
    // Older records (and latlab's own runs) have none, and write none.
    let text = serde_json::to_string(&plain).unwrap();
    assert!(!text.contains("exact_percentiles"), "{text}");
    let back: Stats = serde_json::from_str(&text).unwrap();
    assert_eq!(back, plain);
    let exact = [
        ExactPercentile {
            percentile: 99.0,
            value_ns: 420_000,
        },
        ExactPercentile {
            percentile: 99.5,
            value_ns: 480_000,
        },
    ];
    let s = Stats::of(&h).with_exact(&exact);
    assert_eq!(s.p99, 420_000, "the exact value, not the histogram's");
    assert_eq!((s.p50, s.p90, s.max), (plain.p50, plain.p90, plain.max));
    assert_eq!(
        s.exact_percentiles, exact,
        "p99.5 is kept though no field shows it"
    );
    let back: Stats = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
}

#[test]
fn zero_start_and_length_are_unknown() {
    assert_eq!(known_time(0), None);
    assert_eq!(
        known_time(1_795_362_304_000_000_000),
        Some(1_795_362_304_000_000_000)
    );
}

#[test]
fn a_configuration_says_its_policy_and_length_one_way() {
    let mut c = MeasureConfig::default();
    assert_eq!(c.policy_text(), "fifo 95");
    assert_eq!(c.length_text(), None);
    c.policy = Policy::Other;
    c.priority = 0;
    assert_eq!(c.policy_text(), "other", "no priority outside fifo and rr");
    c.policy = Policy::Deadline;
    c.deadline = Some(DeadlineParams {
        runtime_ns: 100_000,
        deadline_ns: 1_000_000,
        period_ns: 1_000_000,
    });
    assert_eq!(c.policy_text(), "deadline 100us/1ms/1ms");
    c.duration_ns = Some(10_000_000_000);
    assert_eq!(c.length_text().as_deref(), Some("10s"));
    c.loops = Some(1000);
    assert_eq!(c.length_text().as_deref(), Some("10s or 1000 loops"));
    c.duration_ns = None;
    assert_eq!(c.length_text().as_deref(), Some("1000 loops"));
    // A length measured, not asked for (a monitor's series): elapsed time, not raw ns.
    c.loops = None;
    c.duration_ns = Some(13_984_029_585);
    assert_eq!(c.length_text().as_deref(), Some("14.0s"));
}

#[test]
fn a_stop_reason_is_named_as_its_json_tag() {
    for stop in [
        StopReason::Duration,
        StopReason::Loops,
        StopReason::Signal {
            signal: "SIGINT".into(),
        },
        StopReason::Break {
            thread: 1,
            value_ns: 2,
        },
    ] {
        let json = serde_json::to_value(&stop).unwrap();
        assert_eq!(json["reason"], stop.name(), "{stop:?}");
    }
}

#[test]
fn resume_latency_texts_read_and_write_one_way() {
    use system::PmQos;
    for (text, limit) in [("n/a", Some(0)), ("0", None), ("20", Some(20))] {
        assert_eq!(PmQos::resume_limit_us(text), limit, "{text}");
        assert_eq!(PmQos::resume_text(limit), text);
    }
    assert_eq!(PmQos::resume_limit_us("x"), None);
}

#[test]
fn pooled_means_and_deviations_are_exact_only_where_every_part_is() {
    // Two parts of known mean and population deviation: {1, 3} and {10, 10, 10, 10}.
    let part = |count, mean, stdev: Option<f64>| Stats {
        count,
        exact_mean: Some(mean),
        exact_stdev: stdev,
        ..Stats::default()
    };
    let (a, b) = (part(2, 2.0, Some(1.0)), part(4, 10.0, Some(0.0)));
    let pooled = Stats::default().with_pooled_exact([&a, &b]);
    let all = [1.0f64, 3.0, 10.0, 10.0, 10.0, 10.0];
    let mean = all.iter().sum::<f64>() / 6.0;
    let stdev = (all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 6.0).sqrt();
    assert!((pooled.mean - mean).abs() < 1e-12, "{}", pooled.mean);
    assert_eq!(pooled.exact_mean, Some(pooled.mean));
    assert!((pooled.stdev - stdev).abs() < 1e-12, "{}", pooled.stdev);
    // One part without a deviation: the mean is exact, the deviation stays the histogram's.
    let c = part(4, 10.0, None);
    let pooled = Stats {
        stdev: 7.0,
        ..Stats::default()
    }
    .with_pooled_exact([&a, &c]);
    assert!((pooled.mean - mean).abs() < 1e-12);
    assert_eq!((pooled.stdev, pooled.exact_stdev), (7.0, None));
    // One part whose samples all lie within its histogram: its histogram's mean and deviation
    // count as they are ({10, 10, 10, 10} again).
    let within = Stats {
        count: 4,
        mean: 10.0,
        stdev: 0.0,
        ..Stats::default()
    };
    let pooled = Stats::default().with_pooled_exact([&a, &within]);
    assert!((pooled.mean - mean).abs() < 1e-12, "{}", pooled.mean);
    assert!((pooled.stdev - stdev).abs() < 1e-12, "{}", pooled.stdev);
    // One part with samples beyond its histogram and no mean printed: nothing is exact.
    let d = Stats {
        count: 3,
        bounded_from_ns: Some(50_000),
        ..Stats::default()
    };
    let pooled = Stats {
        mean: 5.0,
        ..Stats::default()
    }
    .with_pooled_exact([&a, &d]);
    assert_eq!((pooled.mean, pooled.exact_mean), (5.0, None));
    // No part with a mean printed: the histogram's, as merged.
    let pooled = Stats {
        mean: 5.0,
        ..Stats::default()
    }
    .with_pooled_exact([&within, &within]);
    assert_eq!((pooled.mean, pooled.exact_mean), (5.0, None));
}

#[test]
fn a_break_names_the_other_samples_over_its_threshold() {
    let mut r = sample_result();
    let mut other = r.threads[0].clone();
    other.label = "cpu1".into();
    other.stats.max = 40_000;
    r.threads.push(other);
    r.config.break_threshold_ns = Some(35_000);
    // Not stopped by the threshold: nothing to add.
    assert!(r.also_over_break().is_empty());
    // cpu1 stopped the run at 40 µs; cpu0 went to 2 ms before the stop.
    r.stop = StopReason::Break {
        thread: 1,
        value_ns: 40_000,
    };
    assert_eq!(r.also_over_break(), vec![("cpu0", 2_000_000)]);
    // cpu0 stopped it at its largest sample; cpu1 lies over the threshold too.
    r.stop = StopReason::Break {
        thread: 0,
        value_ns: 2_000_000,
    };
    assert_eq!(r.also_over_break(), vec![("cpu1", 40_000)]);
    r.threads[1].stats.max = 30_000;
    assert!(r.also_over_break().is_empty());
}
