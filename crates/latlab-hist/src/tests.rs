#![allow(clippy::unwrap_used)]
use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The resolution the histogram promises for a true value `v`.
fn tolerance(v: u64) -> u64 {
    if v < 100_000 { 100 } else { v / 1000 }
}

/// The smallest value with at least `q` % of the values at or below it (counted, with a margin
/// for the rounding of `q` itself).
fn reference_percentile(sorted: &[u64], q: f64) -> u64 {
    let need = q * sorted.len() as f64 / 100.0 - 1e-9;
    let rank = (1..=sorted.len())
        .find(|&r| r as f64 >= need)
        .unwrap_or(sorted.len());
    sorted[rank - 1]
}

#[test]
fn nearest_ranks_are_exact_where_floating_point_is_not() {
    // 99.9 / 100 * 1000 is 999.0000000000001 in f64: its ceiling took the 1000th value.
    assert_eq!(nearest_rank(99.9, 1000), 999);
    assert_eq!(nearest_rank(99.99, 10_000), 9999);
    assert_eq!(nearest_rank(99.9, 10_000), 9990);
    assert_eq!(nearest_rank(50.0, 3), 2);
    assert_eq!(nearest_rank(0.0, 5), 1);
    assert_eq!(nearest_rank(100.0, 5), 5);
    let mut h = Histogram::new();
    for v in 1..=1000u64 {
        h.record(v * 1000);
    }
    // The 999th value, to the bucket's resolution; not the maximum.
    let p = h.percentile(99.9);
    assert!((999_000..1_000_000).contains(&p), "{p}");
}

fn latency_like(rng: &mut StdRng) -> u64 {
    // Mostly tens of microseconds, a tail to milliseconds, rare stalls to seconds.
    match rng.random_range(0..1000) {
        0 => rng.random_range(1_000_000..2_000_000_000),
        1..=20 => rng.random_range(100_000..5_000_000),
        _ => rng.random_range(0..100_000),
    }
}

#[test]
fn percentiles_match_a_sorted_reference_on_random_data() {
    for seed in 0..20u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = rng.random_range(1..50_000);
        let mut values: Vec<u64> = (0..n).map(|_| latency_like(&mut rng)).collect();
        let h: Histogram = values.iter().copied().collect();
        values.sort_unstable();
        for q in [0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
            let want = reference_percentile(&values, q);
            let got = h.percentile(q);
            let err = got.abs_diff(want);
            assert!(
                err <= tolerance(want),
                "seed {seed} n {n} q {q}: got {got}, reference {want}, error {err}"
            );
        }
        assert_eq!(h.count(), n as u64);
        assert_eq!(h.min(), values[0]);
        assert_eq!(h.max(), *values.last().unwrap_or(&0));
        assert_eq!(h.sum(), values.iter().sum::<u64>());
        let mean = values.iter().sum::<u64>() as f64 / n as f64;
        assert!((h.mean() - mean).abs() < 1e-6 * mean.max(1.0));
        let var = values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / n as f64;
        let sd = var.sqrt();
        assert!(
            (h.stdev() - sd).abs() <= sd * 0.002 + 100.0,
            "stdev {} vs {}",
            h.stdev(),
            sd
        );
    }
}

#[test]
fn small_values_are_exact() {
    let h: Histogram = (0..2048u64).collect();
    for b in h.buckets() {
        assert_eq!(b.low, b.high, "bucket {b:?} is not exact");
        assert_eq!(b.count, 1);
    }
    assert_eq!(h.percentile(50.0), 1023);
}

#[test]
fn resolution_is_below_100ns_under_100us_and_0_1_percent_above() {
    let mut h = Histogram::new();
    for v in [99_999u64, 100_000, 1_000_000, 1_000_000_000, HIGHEST_NS] {
        h.clear();
        h.record(v);
        let b = h.buckets().next().expect("one bucket");
        let width = b.high - b.low + 1;
        assert!(width <= tolerance(v), "value {v}: bucket width {width}");
    }
}

#[test]
fn merge_equals_recording_everything_in_one() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut a = Histogram::new();
    let mut b = Histogram::new();
    let mut all = Histogram::new();
    for i in 0..20_000 {
        let v = latency_like(&mut rng);
        if i % 3 == 0 { &mut a } else { &mut b }.record(v);
        all.record(v);
    }
    let mut merged = a.clone();
    merged.merge(&b);
    assert_eq!(merged, all);
    assert_eq!(merged.percentile(99.0), all.percentile(99.0));
    // Merging an empty histogram changes nothing, also not min.
    let before = merged.clone();
    merged.merge(&Histogram::new());
    assert_eq!(merged, before);
}

#[test]
fn extreme_values_are_never_lost() {
    let mut h = Histogram::new();
    h.record(0);
    h.record(u64::MAX);
    h.record(HIGHEST_NS + 1);
    assert_eq!(h.count(), 3);
    assert_eq!(h.min(), 0);
    assert_eq!(h.max(), u64::MAX);
    assert_eq!(h.percentile(100.0), u64::MAX);
    assert_eq!(h.buckets().map(|b| b.count).sum::<u64>(), 3);
    assert_eq!(h.sum(), u64::MAX, "sum saturates instead of wrapping");
    let back = Histogram::decode(&h.encode()).expect("decodes");
    assert_eq!(back, h);
}

#[test]
fn empty_histogram_has_zero_statistics_and_round_trips() {
    let h = Histogram::new();
    assert_eq!(
        (h.min(), h.max(), h.percentile(99.0), h.mean()),
        (0, 0, 0, 0.0)
    );
    assert_eq!(Histogram::decode(&h.encode()).expect("decodes"), h);
    let json = serde_json::to_string(&h).expect("serializes");
    let back: Histogram = serde_json::from_str(&json).expect("parses");
    assert_eq!(back, h);
}

#[test]
fn binary_and_json_encodings_round_trip_exactly() {
    let mut rng = StdRng::seed_from_u64(3);
    let h: Histogram = (0..100_000).map(|_| latency_like(&mut rng)).collect();
    let bytes = h.encode();
    assert!(
        bytes.len() < 8 * 1024,
        "encoding is compact: {} bytes",
        bytes.len()
    );
    assert_eq!(Histogram::decode(&bytes).expect("decodes"), h);

    let json = serde_json::to_string(&h).expect("serializes");
    let back: Histogram = serde_json::from_str(&json).expect("parses");
    assert_eq!(back, h);
    assert_eq!(back.percentile(99.9), h.percentile(99.9));
}

#[test]
fn corrupt_encodings_are_rejected() {
    assert!(matches!(
        Histogram::decode(b"nope"),
        Err(HistError::BadHeader)
    ));
    let mut h = Histogram::new();
    h.record(5);
    let mut bytes = h.encode();
    bytes[4] = 9; // count no longer matches the buckets
    assert!(matches!(
        Histogram::decode(&bytes),
        Err(HistError::Inconsistent(_))
    ));
    let truncated = &h.encode()[..40];
    assert!(Histogram::decode(truncated).is_err());
    let bad = r#"{"unit":"ns","significant_digits":3,"count":2,"min":1,"max":1,"sum":1,"buckets":[[1,1]]}"#;
    assert!(serde_json::from_str::<Histogram>(bad).is_err());
}

#[test]
fn count_at_or_below_walks_buckets() {
    let h: Histogram = [10, 20, 30, 1000].into_iter().collect();
    assert_eq!(h.count_at_or_below(9), 0);
    assert_eq!(h.count_at_or_below(20), 2);
    assert_eq!(h.count_at_or_below(999), 3);
    assert_eq!(h.count_at_or_below(5000), 4);
    // Above 8 µs a bucket is 8 ns wide: 10_003 shares 10_000's bucket and is not counted at or
    // below 10 µs (it was), nor is any value of that bucket short of the maximum.
    let h: Histogram = [9_999, 10_003, 20_000].into_iter().collect();
    assert_eq!(h.count_at_or_below(10_000), 1);
    assert_eq!(h.count_at_or_below(10_007), 2);
    assert_eq!(h.count_at_or_below(20_000), 3);
}

#[test]
fn record_series_equals_recording_each_value() {
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..200 {
        let step = rng.random_range(1..2_000_000);
        let first = rng.random_range(0..500_000_000);
        let n = rng.random_range(0..2000);
        let times = rng.random_range(1..4);
        let mut fast = Histogram::new();
        fast.record_series(first, step, n, times);
        let mut slow = Histogram::new();
        let mut v = first as i128;
        for _ in 0..n {
            if v < 0 {
                break;
            }
            slow.record_n(v as u64, times);
            v -= step as i128;
        }
        assert_eq!(fast, slow, "first {first} step {step} n {n}");
    }
    // A long stall at a short period: bounded work, exact count and sum.
    let mut h = Histogram::new();
    h.record_series(10_000_000_000, 1_000, 10_000_000, 1);
    assert_eq!(h.count(), 10_000_000);
    assert_eq!(h.min(), 10_000_000_000 - 9_999_999 * 1_000);
    assert_eq!(h.max(), 10_000_000_000);
}

#[test]
fn bucket_layout_is_hdrhistogram_s() {
    let hdr =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut values: Vec<u64> = (0..20_000)
        .map(|_| rng.random_range(0..HIGHEST_NS))
        .collect();
    values.extend((0..5000).map(|_| latency_like(&mut rng)));
    values.extend([0, 1, 2047, 2048, 2049, 4095, 4096, HIGHEST_NS]);
    for v in values {
        let i = index_of(v);
        assert_eq!(value_of(i), hdr.lowest_equivalent(v), "lowest of {v}");
        assert_eq!(highest_of(i), hdr.highest_equivalent(v), "highest of {v}");
        assert!(i < COUNTS_LEN);
    }
}

#[test]
fn drain_into_merges_reports_the_percentile_and_clears() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut total = Histogram::new();
    total.record(5);
    let window: Histogram = (0..5000).map(|_| latency_like(&mut rng)).collect();
    let mut want_total = total.clone();
    want_total.merge(&window);
    for q in [0.0, 50.0, 99.0, 100.0] {
        let mut w = window.clone();
        let mut t = total.clone();
        assert_eq!(w.drain_into(&mut t, q), window.percentile(q), "q {q}");
        assert_eq!(t, want_total);
        assert!(w.is_empty());
        assert_eq!(w, Histogram::new(), "cleared completely");
    }
    assert_eq!(Histogram::new().drain_into(&mut total, 99.0), 0);
}

#[test]
fn a_coarsened_histogram_keeps_its_statistics_within_the_promised_error_in_fewer_bytes() {
    let mut rng = StdRng::seed_from_u64(17);
    let mut values: Vec<u64> = (0..200_000).map(|_| latency_like(&mut rng)).collect();
    let h: Histogram = values.iter().copied().collect();
    values.sort_unstable();
    let fine = h.encode().len();
    let shift = 4;
    let mut c = h.clone();
    c.coarsen(shift);
    assert_eq!(
        (c.count(), c.min(), c.max(), c.sum()),
        (h.count(), h.min(), h.max(), h.sum())
    );
    for q in [1.0, 50.0, 90.0, 99.0, 99.9, 99.99] {
        let want = reference_percentile(&values, q);
        let got = c.percentile(q);
        // 2^shift ns below 2048 ns, 2^shift/1024 of the value above, plus the fine tolerance.
        let allowed = (want >> (10 - shift)).max(1 << shift) + tolerance(want);
        assert!(
            got.abs_diff(want) <= allowed,
            "p{q}: {got} vs {want} (allowed {allowed})"
        );
    }
    let coarse = c.encode().len();
    assert!(coarse * 3 < fine, "{coarse} bytes coarsened, {fine} fine");
    // It decodes as any histogram, and coarsening again changes nothing.
    let back = Histogram::decode(&c.encode()).unwrap();
    assert_eq!(back, c);
    let mut again = c.clone();
    again.coarsen(shift);
    assert_eq!(again, c);
    // Nothing to do for an empty histogram or a shift of 0.
    let mut e = Histogram::new();
    e.coarsen(4);
    assert!(e.is_empty());
    let mut same = h.clone();
    same.coarsen(0);
    assert_eq!(same, h);
}

#[test]
fn the_quick_encoding_is_the_same_format_and_round_trips_exactly() {
    let mut rng = StdRng::seed_from_u64(5);
    let h: Histogram = (0..200_000).map(|_| latency_like(&mut rng)).collect();
    let (quick, small) = (h.encode_quick(), h.encode());
    assert_eq!(quick[..40], small[..40], "same header and cookie");
    assert_ne!(quick, small, "a different deflate level");
    assert_eq!(Histogram::decode(&quick).expect("decodes"), h);
    // The stock decoder reads it too: the buckets are HdrHistogram's V2 deflate format.
    let hdr: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &quick[36..])
        .expect("HdrHistogram reads it");
    assert_eq!(hdr.len(), h.count());
    let empty = Histogram::new();
    assert_eq!(Histogram::decode(&empty.encode_quick()).unwrap(), empty);
}

/// What older stores hold: the header, then HdrHistogram's own serializer's output (deflated,
/// or plain): it decodes to the same histogram as latlab's own encoding, whose buckets
/// HdrHistogram in turn reads value for value.
#[test]
fn hdrhistogram_serializer_output_and_latlab_encoding_read_each_other() {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
    let mut rng = StdRng::seed_from_u64(11);
    for n in [0usize, 1, 10, 1000, 300_000] {
        let mut h: Histogram = (0..n).map(|_| latency_like(&mut rng)).collect();
        if n == 1000 {
            h.record(0);
            h.record(HIGHEST_NS + 5);
        }
        let head = h.encode()[..36].to_vec();
        let mut deflated = head.clone();
        V2DeflateSerializer::new()
            .serialize(&h.to_hdr(), &mut deflated)
            .unwrap();
        let mut plain = head;
        V2Serializer::new()
            .serialize(&h.to_hdr(), &mut plain)
            .unwrap();
        assert_eq!(
            Histogram::decode(&deflated).unwrap(),
            h,
            "{n} values, deflated"
        );
        assert_eq!(Histogram::decode(&plain).unwrap(), h, "{n} values, plain");
        assert_eq!(
            plain[36..],
            h.v2_payload()[..],
            "{n} values: the same V2 bytes"
        );
        let ours = h.encode();
        let hdr: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut &ours[36..])
            .unwrap();
        assert_eq!(
            hdr,
            h.to_hdr(),
            "{n} values: HdrHistogram reads the same buckets"
        );
    }
}

#[test]
fn damaged_buckets_are_refused_not_misread() {
    let h: Histogram = [1_000, 2_000, 50_000].into_iter().collect();
    let good = h.encode();
    // Cut inside the deflate stream, and a wrong cookie.
    assert!(Histogram::decode(&good[..good.len() - 4]).is_err());
    let mut bad = good.clone();
    bad[36] ^= 0xff;
    assert!(Histogram::decode(&bad).is_err());
}

#[test]
fn collecting_and_extending_record_every_value_once() {
    let values = [5u64, 1_000, 1_000, 75_000, 3_000_000];
    let mut by_hand = Histogram::new();
    for v in values {
        by_hand.record(v);
    }
    let collected: Histogram = values.into_iter().collect();
    assert_eq!(collected, by_hand);
    assert_eq!(collected.count(), 5);
    let mut extended: Histogram = values[..2].iter().copied().collect();
    extended.extend(values[2..].iter().copied());
    assert_eq!(extended, by_hand);
    assert_eq!(Histogram::from_iter(std::iter::empty()), Histogram::new());
}
