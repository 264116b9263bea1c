//! cyclictest's histogram text: what `cyclictest -h N -q` prints at the end of a run, and what
//! `--histfile FILE` writes.
//!
//! The layout is rt-tests 2.4's `print_hist()` (`src/cyclictest/cyclictest.c`, the version
//! Debian 12 ships), where every line is printed like this:
//!
//! ```text
//! # Histogram                          fprintf(fd, "# Histogram\n")
//! 000000 000001<TAB>000000             "%06d " then "%06lu" per thread, "\t" between threads
//! ...                                  one row for every bucket 0..N-1, empty ones included
//! # Total: 000000009 000000004         " %09llu" per thread: samples inside the range
//! # Min Latencies: 00000 00003         " %05lu" per thread
//! # Avg Latencies: 00142 00009         " %05lu", (long)(sum / cycles)
//! # Max Latencies: 01500 00020         " %05lu"
//! # Histogram Overflows: 00002 00001   " %05lu": samples of N µs or more
//! # Histogram Overflow at cycle number:
//! # Thread 0: # 00002 others           "# Thread %d:" then " %05lu" per logged overflow, then
//! # Thread 1: # 00001 others           " # %05lu others" for those past its log
//!                                      a final "\n": the text ends with an empty line
//! ```
//!
//! Checked against rt-tests sources: a 2.x tree with `--json` and the per-thread `hist_array`
//! (the GitHub mirror `Allen-zhi/rt-tests`, between 2.1 and 2.6: `print_hist` is the same there
//! from 2.0, `igaw/rt-tests`, until the 2.7 rewrite, `woodsts/rt-tests` `src/lib/histogram.c`).
//!
//! Differences from that source, all deliberate:
//! - latlab does not log at which cycle an overflow happened: every `# Thread N:` line says its
//!   overflows as cyclictest says those past its log, `# 00002 others` (nothing for a thread
//!   without overflows, as in cyclictest).
//! - `# /dev/cpu_dma_latency set to Nus` is not written: cyclictest prints it with `printf` to
//!   stdout from `set_latency_target()` before the run, never into the histogram itself (it is
//!   absent from a `--histfile` file, and every consumer drops `#` lines anyway).
//! - The `-H` summed column, `# SMIs:`, and the `-b` lines (`# Thread Ids:`, `# Break thread:`,
//!   `# Break value:`, printed to stdout after the histogram) are not written.
//! - rt-tests 2.7 and later drop `# Total:`, skip empty rows and print `# Thread %d: ` with a
//!   trailing space (the `histogram.c` rewrite, 2023-12); this module keeps the 2.4 form that
//!   mklatencyplot.bash was written against (`histeps` needs every row).
//! - The average is the exact mean truncated to µs; cyclictest averages per-sample truncated µs
//!   values, which reads up to 1 µs lower.

use std::fmt::Write;

use latlab_model::RunResult;

use crate::us::{UsBuckets, export_range, max_us, mean_us, min_us, us_buckets};

/// cyclictest's largest histogram (`HIST_MAX`): `-h` values above it are lowered to it.
pub const HIST_MAX_US: u32 = 1_000_000;

/// The rows [`histfile`] writes for `range_us`: fewer where [`HIST_MAX_US`] or an import's
/// histogram range ends first (past it, its samples are known only as overflows).
pub fn histfile_rows(result: &RunResult, range_us: u32) -> u32 {
    export_range(result, range_us.min(HIST_MAX_US))
}

/// cyclictest's `-h range_us -q` histogram text for `result`: one column per measuring thread, in
/// the order of `result.threads`, bucket `i` counting samples in `[i, i+1)` µs. Samples of
/// `range_us` µs or more are counted only as overflows, as cyclictest counts them (their values
/// still set `# Max Latencies:`). `range_us` above [`HIST_MAX_US`] is lowered to it, as cyclictest
/// does.
pub fn histfile(result: &RunResult, range_us: u32) -> String {
    let range = histfile_rows(result, range_us);
    let threads: Vec<UsBuckets> = result
        .threads
        .iter()
        .map(|t| us_buckets(&t.histogram, range))
        .collect();

    let row_len = 7 + 7 * threads.len().max(1);
    let mut out = String::with_capacity(row_len * range as usize + 512);
    out.push_str("# Histogram\n");
    let mut next = vec![0usize; threads.len()];
    for i in 0..u64::from(range) {
        let _ = write!(out, "{i:06} ");
        for (j, t) in threads.iter().enumerate() {
            let count = match t.in_range.get(next[j]) {
                Some(&(us, count)) if us == i => {
                    next[j] += 1;
                    count
                }
                _ => 0,
            };
            if j > 0 {
                out.push('\t');
            }
            let _ = write!(out, "{count:06}");
        }
        out.push('\n');
    }

    footer(&mut out, "# Total:", threads.iter().map(|t| t.total()), 9);
    let hists = || result.threads.iter().map(|t| &t.histogram);
    footer(&mut out, "# Min Latencies:", hists().map(min_us), 5);
    footer(
        &mut out,
        "# Avg Latencies:",
        result.threads.iter().map(mean_us),
        5,
    );
    footer(&mut out, "# Max Latencies:", hists().map(max_us), 5);
    footer(
        &mut out,
        "# Histogram Overflows:",
        threads.iter().map(|t| t.overflows),
        5,
    );
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (i, t) in threads.iter().enumerate() {
        // No cycle is logged: every overflow is among the "others", as cyclictest says those
        // past its log.
        let _ = write!(out, "# Thread {i}:");
        if t.overflows > 0 {
            let _ = write!(out, " # {:05} others", t.overflows);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// One footer line: `label`, then `" %0{width}lu"` per value.
fn footer(out: &mut String, label: &str, values: impl Iterator<Item = u64>, width: usize) {
    out.push_str(label);
    for v in values {
        let _ = write!(out, " {v:0width$}");
    }
    out.push('\n');
}
