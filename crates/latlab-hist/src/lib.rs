//! The one latency histogram of latlab.
//!
//! Every latency in the product — timer and thread wake-ups, traced kernel latencies, monitoring
//! windows — is kept in [`Histogram`], so percentiles, merges, plots and storage work the same
//! everywhere.
//!
//! Properties (values are nanoseconds):
//! - resolution: exact below 2048 ns, at most 64 ns per bucket below 131 µs (so better than 100 ns
//!   below 100 µs) and at most 0.1 % relative error above (3 significant digits, HdrHistogram);
//! - range: 0 ns … 1 hour in buckets; a larger value is counted in the top bucket and still sets the
//!   exact maximum, so no value is ever lost as an "overflow";
//! - exact `count`, `min`, `max` and `sum` are kept beside the buckets;
//! - `record` is O(1) and never allocates; histograms merge exactly;
//! - two encodings: a compact binary one ([`Histogram::encode`], for stores) and a readable sparse
//!   one ([`SparseHistogram`], for JSON), both round-tripping exactly.
//!
//! The bucket layout is HdrHistogram's (lowest discernible value 1, 3 significant digits), so the
//! binary encoding is HdrHistogram's standard V2 format. The counts live in one flat array kept
//! here rather than inside the `hdrhistogram` crate, because the product's hot spots — closing a
//! window once per second per CPU: merge, percentile, clear — must touch only the buckets between
//! the exact minimum and maximum, which that crate's API cannot do (it scans all 33 792 counters,
//! about 2.5 million instructions per window; this way a window costs a few thousand).
//!
//! This crate is pure: no I/O, no system access.

use hdrhistogram::serialization::Deserializer;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// Largest value kept in its own bucket: one hour in nanoseconds.
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits of every bucket (0.1 % relative error).
pub const SIGNIFICANT_DIGITS: u8 = 3;

const MAGIC: &[u8; 4] = b"LLH1";
/// HdrHistogram's cookies for its V2 format, plain and compressed with deflate.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// Length of the V2 format's header.
const V2_HEADER: usize = 40;

/// HdrHistogram's LEB128: 7 bits a byte, low first, and a ninth byte with all 8 bits.
fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    for _ in 0..8 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for k in 0..9 {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        if k == 8 {
            return Some(v | (u64::from(byte) << 56));
        }
        v |= u64::from(byte & 0x7f) << (7 * k);
        if byte < 0x80 {
            return Some(v);
        }
    }
    Some(v)
}

// HdrHistogram's layout for lowest value 1 and 3 significant digits: 2048 sub-buckets, of which
// each bucket after the first uses the upper half.
const SUB_HALF_MAG: u32 = 10;
const SUB_HALF: usize = 1 << SUB_HALF_MAG;
const SUB_MASK: u64 = (2 << SUB_HALF_MAG) - 1;
/// `64 - unit magnitude (0) - sub-bucket half magnitude - 1`.
const LZ_BASE: u32 = 64 - SUB_HALF_MAG - 1;
/// Buckets needed to reach [`HIGHEST_NS`].
const BUCKETS: usize = (LZ_BASE - (HIGHEST_NS | SUB_MASK).leading_zeros()) as usize + 1;
const COUNTS_LEN: usize = (BUCKETS + 1) << SUB_HALF_MAG;

/// The counter index of a value (at most [`HIGHEST_NS`]).
#[inline(always)]
fn index_of(v: u64) -> usize {
    let bucket = LZ_BASE - (v | SUB_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << SUB_HALF_MAG) + sub - SUB_HALF
}

/// The lowest value of a counter's bucket.
#[inline]
fn value_of(i: usize) -> u64 {
    let bucket = (i >> SUB_HALF_MAG) as i64 - 1;
    let mut sub = (i & (SUB_HALF - 1)) + SUB_HALF;
    if bucket < 0 {
        sub -= SUB_HALF;
        return sub as u64;
    }
    (sub as u64) << bucket
}

/// The highest value of a counter's bucket.
#[inline]
fn highest_of(i: usize) -> u64 {
    let bucket = ((i >> SUB_HALF_MAG) as i64 - 1).max(0);
    value_of(i) + (1u64 << bucket) - 1
}

/// The bucket index of a value in this layout (values above [`HIGHEST_NS`] in the top bucket):
/// what `latlab trace`'s kernel programs compute, so each of their buckets is one of these.
pub fn bucket_index(value: u64) -> u32 {
    index_of(value.min(HIGHEST_NS)) as u32
}

/// The lowest value of bucket `index`.
pub fn bucket_low(index: u32) -> u64 {
    value_of(index as usize)
}

/// The highest value of bucket `index`.
pub fn bucket_high(index: u32) -> u64 {
    highest_of(index as usize)
}

/// Errors of decoding or combining histograms.
#[derive(Debug, thiserror::Error)]
pub enum HistError {
    #[error("histogram encoding is not latlab's (bad magic or truncated header)")]
    BadHeader,
    #[error("histogram buckets could not be decoded: {0}")]
    Buckets(String),
    #[error("histogram is inconsistent: {0}")]
    Inconsistent(String),
}

/// A latency histogram in nanoseconds. See the crate documentation.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    count: u64,
    min: u64,
    max: u64,
    sum: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("max", &self.max)
            .field("sum", &self.sum)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Every value recorded once: `[1_000, 2_000].into_iter().collect::<Histogram>()`.
impl FromIterator<u64> for Histogram {
    fn from_iter<I: IntoIterator<Item = u64>>(values: I) -> Self {
        let mut h = Histogram::new();
        h.extend(values);
        h
    }
}

impl Extend<u64> for Histogram {
    fn extend<I: IntoIterator<Item = u64>>(&mut self, values: I) {
        for v in values {
            self.record(v);
        }
    }
}

impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
            && self.min == other.min
            && self.max == other.max
            && self.sum == other.sum
            && self.buckets().eq(other.buckets())
    }
}

/// One non-empty bucket: every value in `low..=high` was counted `count` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

impl Histogram {
    /// An empty histogram. Allocates its buckets once (about 270 KiB); recording never allocates.
    pub fn new() -> Self {
        Self {
            counts: vec![0u64; COUNTS_LEN].into_boxed_slice(),
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Record one value. O(1), no allocation, never fails.
    #[inline]
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Record `n` occurrences of one value.
    #[inline]
    pub fn record_n(&mut self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        // Values above the bucketed range are counted in the top bucket; the exact max is kept.
        self.counts[index_of(value.min(HIGHEST_NS))] += n;
        self.count += n;
        self.sum = self.sum.saturating_add(value.saturating_mul(n));
        if value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
    }

    /// Record `times` copies of the descending series `first, first - step, first - 2*step, …`
    /// (`n` values, stopping early at zero). Costs one bucket update per bucket the series
    /// crosses, not one per value: used to add the samples that missed periods would have
    /// produced, which after a long stall can be millions.
    pub fn record_series(&mut self, first: u64, step: u64, n: u64, times: u64) {
        if n == 0 || times == 0 {
            return;
        }
        let step = step.max(1);
        let n = n.min(first / step + 1);
        let mut v = first;
        let mut left = n;
        while left > 0 {
            let clamped = v.min(HIGHEST_NS);
            let idx = index_of(clamped);
            let low = value_of(idx);
            // Values v, v-step, … that stay in this bucket (all of them above the top bucket).
            let k = if v > HIGHEST_NS {
                ((v - HIGHEST_NS) / step + 1).min(left)
            } else {
                ((v - low) / step + 1).min(left)
            };
            self.counts[idx] += k * times;
            let last = v - (k - 1) * step;
            let series_sum = (u128::from(v) + u128::from(last)) * u128::from(k) / 2;
            let add = u64::try_from(series_sum * u128::from(times)).unwrap_or(u64::MAX);
            self.sum = self.sum.saturating_add(add);
            self.count += k * times;
            self.max = self.max.max(v);
            self.min = self.min.min(last);
            left -= k;
            if left == 0 || last < step {
                break;
            }
            v = last - step;
        }
    }

    /// Add every value of `other` to this histogram. Exact: buckets, counts and extremes combine.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        let range = other.occupied();
        for (a, b) in self.counts[range.clone()]
            .iter_mut()
            .zip(&other.counts[range])
        {
            *a += *b;
        }
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Close a window: add every value to `total`, return this histogram's percentile `q` (as
    /// [`Histogram::percentile`]) and clear it. Touches only the occupied buckets, in two
    /// branch-free passes the compiler vectorises.
    pub fn drain_into(&mut self, total: &mut Histogram, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let value = self.percentile(q);
        let range = self.occupied();
        for (c, t) in self.counts[range.clone()]
            .iter_mut()
            .zip(&mut total.counts[range])
        {
            *t += *c;
            *c = 0;
        }
        total.count += self.count;
        total.sum = total.sum.saturating_add(self.sum);
        total.min = total.min.min(self.min);
        total.max = total.max.max(self.max);
        self.count = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.sum = 0;
        value
    }

    /// Keep every value at a coarser resolution, for old windows that need less: the counts of
    /// each run of `2^shift` neighbouring buckets (`shift` at most 10) move to the run's middle
    /// bucket. Values below 2048 ns then resolve to 2^shift ns and larger ones to 2^shift/1024
    /// of their value (shift 4: 16 ns, 1.6 %); count, minimum, maximum and sum stay exact, and
    /// fewer populated buckets make a smaller encoding. Coarsening twice with the same `shift`
    /// changes nothing more.
    pub fn coarsen(&mut self, shift: u32) {
        let shift = shift.min(SUB_HALF_MAG);
        if self.count == 0 || shift == 0 {
            return;
        }
        let range = self.occupied();
        let (lo, hi) = (range.start, range.end - 1);
        let group = 1usize << shift;
        let mut i = lo & !(group - 1);
        while i <= hi {
            let (start, end) = (i.max(lo), (i + group).min(hi + 1));
            let n: u64 = self.counts[start..end].iter().sum();
            if n > 0 {
                self.counts[start..end].fill(0);
                self.counts[(i + group / 2).clamp(lo, hi)] += n;
            }
            i += group;
        }
    }

    /// Forget every value, keeping the allocation.
    pub fn clear(&mut self) {
        if self.count > 0 {
            let range = self.occupied();
            self.counts[range].fill(0);
        }
        self.count = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.sum = 0;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Exact smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 { 0 } else { self.min }
    }
    /// Exact largest value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }
    /// Exact sum of all values (saturating at `u64::MAX`, about 584 years).
    pub fn sum(&self) -> u64 {
        self.sum
    }
    /// Exact mean.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
    /// Population standard deviation, from the buckets (0.1 % resolution).
    pub fn stdev(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let mean = self.mean();
        let mut acc = 0.0;
        for b in self.buckets() {
            let mid = (b.low.max(self.min()).min(self.max) as f64
                + b.high.max(self.min()).min(self.max) as f64)
                / 2.0;
            let d = mid - mean;
            acc += d * d * b.count as f64;
        }
        (acc / self.count as f64).sqrt()
    }

    /// Nearest-rank percentile (see [`nearest_rank`]), `q` in `0.0..=100.0`: the smallest recorded value such that at
    /// least `q` % of all values are at or below it, to the bucket's resolution; clamped to the
    /// exact min and max, so `percentile(0.0) == min()` and `percentile(100.0) == max()`.
    pub fn percentile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        if q >= 100.0 {
            return self.max;
        }
        if q <= 0.0 {
            return self.min;
        }
        let rank = nearest_rank(q, self.count);
        let range = self.occupied();
        let base = range.start;
        let mut seen = 0u64;
        // Sum chunks first (vectorised), walk bucket by bucket only in the chunk that crosses.
        let (chunks, tail) = self.counts[range].as_chunks::<8>();
        for (c, chunk) in chunks.iter().enumerate() {
            let sum: u64 = chunk.iter().sum();
            if seen + sum >= rank {
                for (j, n) in chunk.iter().enumerate() {
                    seen += n;
                    if seen >= rank {
                        return highest_of(base + c * 8 + j).clamp(self.min, self.max);
                    }
                }
            }
            seen += sum;
        }
        let tail_base = base + chunks.len() * 8;
        for (j, n) in tail.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return highest_of(tail_base + j).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The number of values at or below `value`, to the bucket's resolution and never above it:
    /// a bucket counts only when all it can hold is at or below `value` (a Prometheus `le`
    /// bucket of 10 µs counted values up to 10.007 µs, the whole bucket holding 10 µs).
    pub fn count_at_or_below(&self, value: u64) -> u64 {
        if value >= self.max {
            return self.count;
        }
        self.buckets()
            .take_while(|b| b.high <= value)
            .map(|b| b.count)
            .sum()
    }

    /// Indices of the counters that can be non-zero: from the minimum's bucket to the maximum's.
    fn occupied(&self) -> std::ops::Range<usize> {
        if self.count == 0 {
            return 0..0;
        }
        index_of(self.min.min(HIGHEST_NS))..index_of(self.max.min(HIGHEST_NS)) + 1
    }

    /// The non-empty buckets, in increasing order of value.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        let range = self.occupied();
        let base = range.start;
        self.counts[range]
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(move |(i, &count)| Bucket {
                low: value_of(base + i),
                high: highest_of(base + i),
                count,
            })
    }

    /// The HdrHistogram form of the buckets (its own serializer's output is what older stores
    /// hold: the tests check that [`Histogram::decode`] reads it).
    #[cfg(test)]
    fn to_hdr(&self) -> hdrhistogram::Histogram<u64> {
        #[allow(clippy::expect_used)]
        let mut h = hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        for b in self.buckets() {
            let _ = h.record_n(b.low, b.count);
        }
        h
    }

    /// Compact binary encoding: a 36-byte header with the exact statistics, then the buckets in
    /// HdrHistogram's V2 deflate format.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_at(flate2::Compression::default())
    }

    /// [`Histogram::encode`] with the fastest deflate level: the same format (any decoder of it
    /// reads this), quicker to write and some 15 % larger. For a histogram rewritten often and
    /// stored once, such as a series' running totals.
    pub fn encode_quick(&self) -> Vec<u8> {
        self.encode_at(flate2::Compression::fast())
    }

    /// The header, then the V2 payload deflated at `level`, written straight from the counters
    /// (no HdrHistogram built on the way: that would zero and scan all 33 792 of them twice).
    fn encode_at(&self, level: flate2::Compression) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.min().to_le_bytes());
        out.extend_from_slice(&self.max.to_le_bytes());
        out.extend_from_slice(&self.sum.to_le_bytes());
        out.extend_from_slice(&V2_DEFLATE_COOKIE.to_be_bytes());
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        let mut z = flate2::write::ZlibEncoder::new(out, level);
        // Writing into a Vec cannot fail.
        let _ = z.write_all(&self.v2_payload());
        let mut out = z.finish().unwrap_or_default();
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        out
    }

    /// HdrHistogram's V2 payload: a 40-byte big-endian header (cookie, length of the counts,
    /// normalising offset, significant digits, lowest and highest trackable value, conversion
    /// ratio), then the counters from index 0 to the maximum's as zigzag LEB128 numbers, a run
    /// of several zeros as its negated length.
    fn v2_payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(V2_HEADER + 256);
        out.extend_from_slice(&V2_COOKIE.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&u32::from(SIGNIFICANT_DIGITS).to_be_bytes());
        out.extend_from_slice(&1u64.to_be_bytes());
        out.extend_from_slice(&HIGHEST_NS.to_be_bytes());
        out.extend_from_slice(&1.0f64.to_be_bytes());
        // As HdrHistogram writes it: up to the maximum's counter, which is 0 when empty.
        let end = if self.count == 0 {
            1
        } else {
            self.occupied().end
        };
        let mut i = 0;
        while i < end {
            let c = self.counts[i];
            i += 1;
            let n = if c == 0 {
                let mut zeros = 1i64;
                while i < end && self.counts[i] == 0 {
                    zeros += 1;
                    i += 1;
                }
                if zeros > 1 { -zeros } else { 0 }
            } else {
                c.min(i64::MAX as u64) as i64
            };
            write_varint(&mut out, ((n << 1) ^ (n >> 63)) as u64);
        }
        let len = (out.len() - V2_HEADER) as u32;
        out[4..8].copy_from_slice(&len.to_be_bytes());
        out
    }

    /// Decode [`Histogram::encode`]'s output, checking that the buckets agree with the header.
    pub fn decode(bytes: &[u8]) -> Result<Self, HistError> {
        if bytes.len() < 36 || &bytes[0..4] != MAGIC {
            return Err(HistError::BadHeader);
        }
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[4 + i * 8..12 + i * 8]);
            u64::from_le_bytes(b)
        };
        let (count, min, max, sum) = (word(0), word(1), word(2), word(3));
        let mut h = Histogram::new();
        if !h.read_v2(&bytes[36..])? {
            // Another layout than latlab's: let HdrHistogram read it, value by value.
            let mut rest = &bytes[36..];
            let decoded: hdrhistogram::Histogram<u64> = Deserializer::new()
                .deserialize(&mut rest)
                .map_err(|e| HistError::Buckets(format!("{e:?}")))?;
            for v in decoded.iter_recorded() {
                h.counts[index_of(v.value_iterated_to().min(HIGHEST_NS))] += v.count_at_value();
            }
        }
        h.set_exact(count, min, max, sum)?;
        Ok(h)
    }

    /// Read V2 buckets (deflated or not) straight into the counters, which are latlab's layout
    /// index for index when the header says lowest value 1 and 3 significant digits. False,
    /// with nothing read, when the header says another layout.
    fn read_v2(&mut self, bytes: &[u8]) -> Result<bool, HistError> {
        let bad = |what: &str| HistError::Buckets(what.to_string());
        let be32 = |b: &[u8], at: usize| -> Result<u32, HistError> {
            b.get(at..at + 4)
                .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
                .ok_or_else(|| bad("truncated"))
        };
        let inflated;
        let payload: &[u8] = match be32(bytes, 0)? {
            V2_DEFLATE_COOKIE => {
                let len = be32(bytes, 4)? as usize;
                let z = bytes
                    .get(8..8 + len)
                    .ok_or_else(|| bad("truncated deflate stream"))?;
                let mut buf = Vec::with_capacity(len * 3);
                std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(z), &mut buf)
                    .map_err(|e| HistError::Buckets(format!("inflate: {e}")))?;
                inflated = buf;
                &inflated
            }
            V2_COOKIE => bytes,
            c => return Err(HistError::Buckets(format!("unknown cookie {c:#x}"))),
        };
        if payload.len() < V2_HEADER || be32(payload, 0)? != V2_COOKIE {
            return Err(bad("bad V2 header"));
        }
        let len = be32(payload, 4)? as usize;
        let (offset, digits) = (be32(payload, 8)?, be32(payload, 12)?);
        let lowest = u64::from_be_bytes(payload[16..24].try_into().map_err(|_| bad("header"))?);
        if offset != 0 || digits != u32::from(SIGNIFICANT_DIGITS) || lowest != 1 {
            return Ok(false);
        }
        let mut counts = payload
            .get(V2_HEADER..V2_HEADER + len)
            .ok_or_else(|| bad("counts cut short"))?;
        let mut i = 0usize;
        while !counts.is_empty() {
            let z = read_varint(&mut counts).ok_or_else(|| bad("a count is cut short"))?;
            let n = ((z >> 1) as i64) ^ -((z & 1) as i64);
            if n < 0 {
                i = i.saturating_add(n.unsigned_abs() as usize);
            } else {
                let slot = self
                    .counts
                    .get_mut(i)
                    .ok_or_else(|| bad("a count beyond the range"))?;
                *slot += n as u64;
                i += 1;
            }
        }
        Ok(true)
    }

    fn set_exact(&mut self, count: u64, min: u64, max: u64, sum: u64) -> Result<(), HistError> {
        let bucket_total: u64 = self.counts.iter().sum();
        if bucket_total != count {
            return Err(HistError::Inconsistent(format!(
                "buckets hold {bucket_total} values but the count is {count}"
            )));
        }
        if count > 0 && min > max {
            return Err(HistError::Inconsistent(format!("min {min} > max {max}")));
        }
        if count > 0 {
            // Every counted bucket must lie between the stated extremes.
            let (lo, hi) = (index_of(min.min(HIGHEST_NS)), index_of(max.min(HIGHEST_NS)));
            if self.counts[..lo].iter().any(|&c| c > 0)
                || self.counts[hi + 1..].iter().any(|&c| c > 0)
            {
                return Err(HistError::Inconsistent(
                    "buckets lie outside the stated min and max".into(),
                ));
            }
        }
        self.count = count;
        self.min = if count == 0 { u64::MAX } else { min };
        self.max = max;
        self.sum = sum;
        Ok(())
    }

    /// The readable sparse form used in JSON.
    pub fn to_sparse(&self) -> SparseHistogram {
        SparseHistogram {
            unit: "ns".into(),
            significant_digits: SIGNIFICANT_DIGITS,
            count: self.count,
            min: self.min(),
            max: self.max,
            sum: self.sum,
            buckets: self.buckets().map(|b| [b.low, b.count]).collect(),
        }
    }

    /// Rebuild from the sparse form, checking its consistency.
    pub fn from_sparse(s: &SparseHistogram) -> Result<Self, HistError> {
        if s.unit != "ns" {
            return Err(HistError::Inconsistent(format!(
                "unit is {:?}, expected \"ns\"",
                s.unit
            )));
        }
        let mut h = Histogram::new();
        for [low, count] in &s.buckets {
            h.counts[index_of((*low).min(HIGHEST_NS))] += *count;
        }
        h.set_exact(s.count, s.min, s.max, s.sum)?;
        Ok(h)
    }
}

/// A histogram as readable JSON: each bucket as `[lowest value in the bucket, count]`, with the
/// exact statistics beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparseHistogram {
    pub unit: String,
    pub significant_digits: u8,
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub sum: u64,
    pub buckets: Vec<[u64; 2]>,
}

impl Serialize for Histogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_sparse().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sparse = SparseHistogram::deserialize(d)?;
        Histogram::from_sparse(&sparse).map_err(serde::de::Error::custom)
    }
}

/// The nearest rank of percentile `q` (`0.0..=100.0`) among `count` values: the smallest
/// rank at or below which at least `q` % of the values lie, at least 1. Computed in integers
/// (`q` to 1e-6 %): in floating point `99.9 / 100 * 1000` is `999.0000000000001`, whose ceiling
/// would take the 1000th value for the 999th.
pub fn nearest_rank(q: f64, count: u64) -> u64 {
    let q_e8 = (q.clamp(0.0, 100.0) * 1e6).round() as u128;
    let rank = (q_e8 * u128::from(count)).div_ceil(100_000_000);
    (rank as u64).max(1)
}

#[cfg(test)]
mod tests;
