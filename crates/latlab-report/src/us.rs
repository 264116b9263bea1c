//! Whole-microsecond views of a nanosecond [`Histogram`], as cyclictest counts.

use latlab_hist::Histogram;
use latlab_model::ThreadResult;

/// Counts per 1 µs bucket below a range, and the count at or above it.
#[derive(Debug, Default)]
pub(crate) struct UsBuckets {
    /// `(µs bucket, count)`, increasing, non-zero counts only, every bucket `< range_us`.
    pub in_range: Vec<(u64, u64)>,
    /// Samples of `range_us` µs or more (cyclictest's "Histogram Overflows").
    pub overflows: u64,
}

impl UsBuckets {
    /// Samples inside the range (cyclictest's `# Total:`).
    pub fn total(&self) -> u64 {
        self.in_range.iter().map(|&(_, c)| c).sum()
    }
}

/// Fold a histogram into 1 µs buckets `0..range_us`: a sample of `v` ns belongs to bucket
/// `v / 1000` (truncated, like cyclictest's `calcdiff`).
///
/// A latlab bucket holds every value in `low..=high` and is placed by its `low` value, raised to
/// the exact minimum for the bucket that holds it; in the bucket that holds the exact maximum, one
/// sample is placed at the maximum. So, as in cyclictest, the lowest and highest non-empty µs
/// buckets are `min / 1000` and `max / 1000`, and a thread has overflows exactly when its maximum
/// is at or beyond the range. Buckets are exact below 2048 ns and at most 64 ns wide below 131 µs;
/// a bucket straddling a µs boundary moves its other samples at most its width down (a byte-exact
/// cyclictest histogram would need the raw samples).
pub(crate) fn us_buckets(h: &Histogram, range_us: u32) -> UsBuckets {
    let range = u64::from(range_us);
    let mut out = UsBuckets::default();
    let mut add = |us: u64, count: u64| {
        if count == 0 {
            return;
        }
        if us >= range {
            out.overflows += count;
            return;
        }
        match out.in_range.last_mut() {
            Some((last, c)) if *last == us => *c += count,
            _ => out.in_range.push((us, count)),
        }
    };
    for (ns, count) in placed(h) {
        add(ns / 1000, count);
    }
    out
}

/// The rows an export of `result` may write: `range_us`, or fewer where an import's histogram
/// range ended below it. What lies at or beyond that end is only known to lie there: it is
/// counted as overflows of a histogram that ends there, never as values, nor as overflows of a
/// longer one (which would say they lie beyond its end).
pub(crate) fn export_range(result: &latlab_model::RunResult, range_us: u32) -> u32 {
    result
        .threads
        .iter()
        .filter_map(|t| t.stats.bounded_from_ns)
        .map(|b| u32::try_from(b / 1000).unwrap_or(u32::MAX))
        .fold(range_us, u32::min)
}

/// The samples of `h` as `(value ns, count)`, placed as the reports place them: each bucket's
/// count at its lowest value raised to the exact minimum; in the bucket holding the maximum (the
/// last: values above the bucketed range are counted in it too), one sample at the maximum.
pub(crate) fn placed(h: &Histogram) -> impl Iterator<Item = (u64, u64)> + '_ {
    let (min, max) = (h.min(), h.max());
    h.buckets().flat_map(move |b| {
        let last = b.high >= max;
        let here = if last { b.count - 1 } else { b.count };
        [Some((b.low.max(min), here)), last.then_some((max, 1))]
            .into_iter()
            .flatten()
    })
}

/// cyclictest's `min` of a thread, in whole µs. cyclictest starts `min` at 1 000 000 and only
/// lowers it with samples, so a thread without samples reports 1000000; latlab does the same so a
/// "minimum of the minima" over threads is not pulled to 0 by an empty thread.
pub(crate) fn min_us(h: &Histogram) -> u64 {
    if h.is_empty() {
        1_000_000
    } else {
        h.min() / 1000
    }
}

/// cyclictest's `max` of a thread, in whole µs (0 without samples).
pub(crate) fn max_us(h: &Histogram) -> u64 {
    h.max() / 1000
}

/// The mean in hundredths of a µs, rounded half up: the one an import's source printed where
/// it gave one (its histogram holds only bounds), else from the exact sum (0 without samples).
pub(crate) fn mean_centi_us(t: &ThreadResult) -> u64 {
    if let Some(m) = t.stats.exact_mean {
        return (m / 10.0).round() as u64;
    }
    let h = &t.histogram;
    let count = u128::from(h.count());
    if count == 0 {
        return 0;
    }
    let sum = u128::from(h.sum());
    ((sum + 5 * count) / (10 * count)) as u64
}

/// The mean in whole µs, truncated: the one an import's source printed where it gave one,
/// else from the exact sum (0 without samples).
pub(crate) fn mean_us(t: &ThreadResult) -> u64 {
    if let Some(m) = t.stats.exact_mean {
        return (m / 1000.0) as u64;
    }
    let h = &t.histogram;
    let count = u128::from(h.count());
    if count == 0 {
        return 0;
    }
    (u128::from(h.sum()) / (1000 * count)) as u64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn truncates_to_whole_microseconds() {
        let h: Histogram = [0, 999, 1000, 1999, 2000, 2047, 20_000, 25_000]
            .into_iter()
            .collect();
        let b = us_buckets(&h, 20);
        assert_eq!(b.in_range, vec![(0, 2), (1, 2), (2, 2)]);
        assert_eq!(b.overflows, 2);
        assert_eq!(b.total(), 6);
    }

    #[test]
    fn extremes_land_in_their_own_microsecond() {
        // 1_500_000 is in the latlab bucket 1_499_648..=1_500_159, 25_000 in 24_992..=25_007.
        let mut h: Histogram = [25_000, 25_000, 1_500_000].into_iter().collect();
        let b = us_buckets(&h, 2000);
        assert_eq!(b.in_range, vec![(25, 2), (1500, 1)]);
        // Only the maximum is known exactly inside a bucket it shares with other values.
        h.record(1_499_700);
        let b = us_buckets(&h, 1500);
        assert_eq!(b.in_range, vec![(25, 2), (1499, 1)]);
        assert_eq!(b.overflows, 1);
        // Values beyond the bucketed range (1 h) still land at the exact maximum.
        let mut h = Histogram::new();
        h.record(7_200_000_000_000);
        let b = us_buckets(&h, 1_000_000);
        assert_eq!((b.total(), b.overflows), (0, 1));
        assert!(us_buckets(&Histogram::new(), 10).in_range.is_empty());
    }

    #[test]
    fn means() {
        let thread = |h: &Histogram| latlab_testkit::run::thread("cpu0", Some(0), 1, 0, h.clone());
        let mut h = Histogram::new();
        h.record(1_000);
        h.record(2_005);
        // mean 1502.5 ns = 1.5025 µs -> 1.50 (hundredths, half up from 150.25), 1 µs truncated
        assert_eq!(mean_centi_us(&thread(&h)), 150);
        assert_eq!(mean_us(&thread(&h)), 1);
        h.record(1_505);
        // mean 1503.33.. ns
        assert_eq!(mean_centi_us(&thread(&h)), 150);
        let empty = thread(&Histogram::new());
        assert_eq!((mean_us(&empty), mean_centi_us(&empty)), (0, 0));
        assert_eq!(
            (min_us(&empty.histogram), max_us(&empty.histogram)),
            (1_000_000, 0)
        );
        // An import's source printed its mean, its histogram only bounds: the printed one.
        let mut imported = thread(&h);
        imported.stats.exact_mean = Some(18_870.0);
        assert_eq!((mean_centi_us(&imported), mean_us(&imported)), (1887, 18));
    }
}
