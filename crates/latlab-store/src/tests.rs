#![allow(clippy::unwrap_used)]
use super::*;
use latlab_model::samples::CpuSummary;

#[test]
fn fnv64_is_sixteen_hex_digits() {
    assert_eq!(fnv64(""), "cbf29ce484222325");
    assert_eq!(fnv64("a"), "af63dc4c8601ec8c");
}

#[test]
fn u64_values_survive_the_signed_column() {
    for v in [0, 1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
        assert_eq!(from_sql(to_sql(v)), v);
    }
}

#[test]
fn sampler_summaries_merge_weighted_by_time() {
    let a = CpuSummary {
        cpu: 3,
        avg_freq_khz: Some(1_000_000),
        util_pct: Some(10.0),
        steal_pct: None,
        irqs_per_s: Some(100.0),
        softirqs_per_s: None,
        smis: Some(2),
        idle_residency_pct: vec![50.0, 40.0],
        idle_entries_per_s: vec![1.0],
    };
    let b = CpuSummary {
        cpu: 3,
        avg_freq_khz: Some(2_000_000),
        util_pct: None,
        steal_pct: Some(1.0),
        irqs_per_s: Some(400.0),
        softirqs_per_s: None,
        smis: Some(1),
        idle_residency_pct: vec![20.0, 70.0, 5.0],
        idle_entries_per_s: vec![4.0],
    };
    // b covers three times as long as a.
    let m = monitor::merge_cpu_summaries(3, &[(1.0, a), (3.0, b)]).unwrap();
    assert_eq!(m.cpu, 3);
    assert_eq!(m.avg_freq_khz, Some(1_750_000));
    assert_eq!(m.util_pct, Some(10.0));
    assert_eq!(m.steal_pct, Some(1.0));
    assert_eq!(m.irqs_per_s, Some(325.0));
    assert_eq!(m.softirqs_per_s, None);
    assert_eq!(m.smis, Some(3), "SMI counts add up");
    assert_eq!(m.idle_residency_pct, vec![27.5, 62.5, 5.0]);
    assert_eq!(m.idle_entries_per_s, vec![3.25]);
    assert_eq!(monitor::merge_cpu_summaries(0, &[]), None);
}
