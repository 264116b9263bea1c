//! The in-kernel histogram buckets and their exact conversion into [`Histogram`].
//!
//! The BPF programs compute the bucket index of HdrHistogram's layout for lowest value 1 ns and
//! 3 significant digits — the layout of `latlab_hist::Histogram` — from the position of the
//! value's highest set bit and its top 11 bits (`hist_index` in `bpf/trace.bpf.c`;
//! [`bucket_index`], the histogram's own, is the same computation). So every kernel bucket is exactly one
//! bucket of the shared histogram: [`to_histogram`] records each bucket's count at the bucket's
//! lowest value and, with the exact count, sum, minimum and maximum kept beside the buckets,
//! rebuilds the very histogram that recording every value would have made.

use crate::layout::StatVal;
use latlab_hist::{Histogram, SparseHistogram};

/// Values above this land in the top bucket (the shared histogram's range).
pub const HIGHEST_NS: u64 = latlab_hist::HIGHEST_NS;

/// The bucket index of a value (as the BPF programs compute it), and a bucket's lowest and
/// highest value: the shared histogram's layout.
pub use latlab_hist::{bucket_high, bucket_index, bucket_low};

/// Combine per-CPU statistics.
pub fn merge_stats(a: StatVal, b: StatVal) -> StatVal {
    match (a.count, b.count) {
        (0, _) => b,
        (_, 0) => a,
        _ => StatVal {
            count: a.count + b.count,
            sum: a.sum.saturating_add(b.sum),
            min: a.min.min(b.min),
            max: a.max.max(b.max),
        },
    }
}

/// Build the histogram of kernel buckets `(index, count)` and their exact statistics.
///
/// When the statistics agree with the buckets (same count, extremes inside the first and last
/// bucket — always, unless the kernel lost an update), the result equals a histogram that
/// recorded every value with [`Histogram::record`]. Otherwise each count is recorded at its
/// bucket's lowest value; the extremes come from the statistics where they lie in the outer
/// buckets, and the sum is scaled to the buckets' count (still the same buckets).
pub fn to_histogram(buckets: &[(u32, u64)], stats: StatVal) -> Histogram {
    let mut sorted: Vec<(u32, u64)> = buckets.iter().copied().filter(|b| b.1 > 0).collect();
    sorted.sort_unstable();
    // Merge duplicate indices (several CPUs' counts of one bucket).
    let mut merged: Vec<[u64; 2]> = Vec::with_capacity(sorted.len());
    let mut last: Option<u32> = None;
    for (index, count) in sorted {
        if last == Some(index) {
            if let Some(m) = merged.last_mut() {
                m[1] += count;
            }
        } else {
            merged.push([bucket_low(index), count]);
            last = Some(index);
        }
    }
    let total: u64 = merged.iter().map(|b| b[1]).sum();
    if total == stats.count && total > 0 {
        let sparse = SparseHistogram {
            unit: "ns".into(),
            significant_digits: latlab_hist::SIGNIFICANT_DIGITS,
            count: stats.count,
            min: stats.min,
            max: stats.max,
            sum: stats.sum,
            buckets: merged.clone(),
        };
        if let Ok(h) = Histogram::from_sparse(&sparse) {
            return h;
        }
    }
    // Buckets and statistics were read at different moments (a snapshot while tracing): keep
    // the buckets, take the extremes from the statistics where they fall in the outer buckets,
    // and scale the sum.
    let (Some(first), Some(last)) = (merged.first().copied(), merged.last().copied()) else {
        return Histogram::new();
    };
    let in_bucket = |v: u64, low: u64| bucket_index(v) == bucket_index(low);
    let min = if stats.count > 0 && in_bucket(stats.min, first[0]) {
        stats.min
    } else {
        first[0]
    };
    let max = if stats.count > 0 && in_bucket(stats.max, last[0]) {
        stats.max
    } else {
        last[0]
    };
    let sum = if stats.count > 0 {
        (u128::from(stats.sum) * u128::from(total) / u128::from(stats.count)) as u64
    } else {
        merged.iter().map(|b| b[0].saturating_mul(b[1])).sum()
    };
    let sparse = SparseHistogram {
        unit: "ns".into(),
        significant_digits: latlab_hist::SIGNIFICANT_DIGITS,
        count: total,
        min: min.min(max),
        max,
        sum,
        buckets: merged.clone(),
    };
    Histogram::from_sparse(&sparse).unwrap_or_else(|_| {
        let mut h = Histogram::new();
        for [low, count] in merged {
            h.record_n(low, count);
        }
        h
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;

    /// What the kernel side keeps for a set of values.
    fn kernel_side(values: &[u64]) -> (Vec<(u32, u64)>, StatVal) {
        let mut buckets: BTreeMap<u32, u64> = BTreeMap::new();
        let mut st = StatVal::default();
        for &v in values {
            *buckets.entry(bucket_index(v)).or_default() += 1;
            st = merge_stats(
                st,
                StatVal {
                    count: 1,
                    sum: v,
                    min: v,
                    max: v,
                },
            );
        }
        (buckets.into_iter().collect(), st)
    }

    /// A small deterministic generator (xorshift) for many values of every magnitude.
    fn values(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Spread over magnitudes: shift a random value right by 0..63 bits.
                x >> (x % 64)
            })
            .collect()
    }

    #[test]
    fn every_bucket_is_one_histogram_bucket() {
        // Walk bucket by bucket across the whole range.
        let top = bucket_index(HIGHEST_NS);
        for index in 0..=top {
            let low = bucket_low(index);
            let high = bucket_high(index);
            assert!(low <= high);
            assert_eq!(bucket_index(low), index, "low of {index}");
            assert_eq!(bucket_index(high.min(HIGHEST_NS)), index, "high of {index}");
            if index < top {
                assert_eq!(
                    bucket_low(index + 1),
                    high + 1,
                    "buckets are contiguous at {index}"
                );
            }
            let mut h = Histogram::new();
            h.record(low);
            h.record(high.min(HIGHEST_NS));
            let b: Vec<_> = h.buckets().collect();
            assert_eq!(b.len(), 1, "bucket {index} is one histogram bucket");
            assert_eq!((b[0].low, b[0].high), (low, high));
        }
    }

    #[test]
    fn conversion_equals_recording_every_value() {
        for seed in [1u64, 7, 42, 1234, 987_654_321] {
            let vals = values(20_000, seed);
            let direct: Histogram = vals.iter().copied().collect();
            let (buckets, stats) = kernel_side(&vals);
            let converted = to_histogram(&buckets, stats);
            assert_eq!(converted, direct, "seed {seed}");
            assert_eq!(converted.percentile(99.0), direct.percentile(99.0));
        }
    }

    #[test]
    fn edge_values_convert_exactly() {
        let vals = [
            0,
            1,
            2047,
            2048,
            2049,
            4095,
            4096,
            131_071,
            131_072,
            1 << 40,
            HIGHEST_NS - 1,
            HIGHEST_NS,
            HIGHEST_NS + 1,
            u64::MAX / 2,
        ];
        let direct: Histogram = vals.iter().copied().collect();
        let (buckets, stats) = kernel_side(&vals);
        assert_eq!(to_histogram(&buckets, stats), direct);
    }

    #[test]
    fn per_cpu_buckets_merge() {
        let a = values(5000, 3);
        let b = values(5000, 5);
        let (ba, sa) = kernel_side(&a);
        let (bb, sb) = kernel_side(&b);
        let mut all = ba.clone();
        all.extend(bb);
        let direct: Histogram = a.iter().chain(&b).copied().collect();
        assert_eq!(to_histogram(&all, merge_stats(sa, sb)), direct);
    }

    #[test]
    fn inconsistent_statistics_fall_back_to_the_buckets() {
        let (buckets, mut stats) = kernel_side(&[100, 5000, 70_000]);
        stats.count += 1; // an update the kernel lost
        let h = to_histogram(&buckets, stats);
        assert_eq!(h.count(), 3);
        assert_eq!((h.min(), h.max()), (100, 70_000));
        assert_eq!(h.buckets().count(), 3);
        assert!(to_histogram(&[], StatVal::default()).is_empty());
    }
}
