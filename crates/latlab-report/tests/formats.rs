//! Golden-file tests of every writer, and tests that read the cyclictest files the way their
//! consumers do.
//!
//! The expected outputs live in `tests/golden/`. After a deliberate format change, regenerate them
//! with `LATLAB_UPDATE_GOLDEN=1 cargo test -p latlab-report` and review the diff line by line.
#![allow(clippy::unwrap_used)]

use latlab_hist::Histogram;
use latlab_model::{MeasureConfig, RunEnvironment, RunResult, SystemInfo, ThreadResult};
use latlab_report::{cyclictest_json, cyclictest_json_with_range, histfile, summary_table};
use latlab_testkit::golden;
use latlab_testkit::run::{hist, result, thread};

/// Thread 0 (CPU 0): values on and next to µs boundaries, and two samples beyond a 20 µs range.
const THREAD0_NS: &[(u64, u64)] = &[
    (999, 1),       // bucket 0
    (1_000, 1),     // exactly 1 µs: bucket 1
    (1_999, 1),     // bucket 1 (truncated, not rounded)
    (2_000, 1),     // bucket 2
    (5_000, 3),     // bucket 5
    (9_999, 1),     // bucket 9 (latlab bucket 9992..=9999)
    (10_000, 1),    // bucket 10
    (25_000, 1),    // overflow at -h 20; at -h 1000000 in bucket 24 (latlab bucket 24992..=25007)
    (1_500_000, 1), // overflow at -h 20; the exact maximum, so in bucket 1500 at -h 1000000
];
/// Thread 1 (CPU 1): the last in-range bucket and a sample exactly on the range's end.
const THREAD1_NS: &[(u64, u64)] = &[
    (3_000, 2),
    (3_001, 1),  // bucket 3 (latlab bucket 3000..=3001)
    (19_999, 1), // bucket 19, the last one at -h 20
    (20_000, 1), // exactly 20 µs: an overflow at -h 20
];
const RANGE_US: u32 = 20;

fn fixture() -> RunResult {
    let at = |t: ThreadResult| ThreadResult {
        expected_periods: Some(10_000),
        max_at_ns: 4_321_000_000,
        ..t
    };
    let threads = vec![
        at(thread("cpu0", Some(0), 4242, 2, hist(THREAD0_NS))),
        at(thread("cpu1", Some(1), 4243, 0, hist(THREAD1_NS))),
    ];
    let start = 1_795_362_304_123_456_789; // 2026-11-22T15:45:04.123456789Z, a Sunday
    let elapsed = 10_002_345_678;
    RunResult {
        environment: RunEnvironment {
            memory_locked: true,
            mlock_error: None,
            pm_qos_held_us: Some(0),
            coordinator_cpus: vec![0, 1],
            coordinator_shares_measured_cpus: true,
            euid: 0,
            trace_marker: None,
            warnings: vec![
                "the coordinating thread shares the measured CPUs 0-1".into(),
                "\"steal\" time 2.1 % during the run".into(),
            ],
            ..Default::default()
        },
        ..result(
            "20261122-154504-golden",
            (start, elapsed),
            MeasureConfig {
                duration_ns: Some(10_000_000_000),
                cpus: Some(vec![0, 1]),
                threads: 2,
                priority: 90,
                pm_qos_us: Some(0),
                ..Default::default()
            },
            SystemInfo {
                hostname: "rtbox".into(),
                kernel_release: "6.18.0-rt3".into(),
                kernel_version: "#1 SMP PREEMPT_RT Sun Nov  1 00:00:00 UTC 2026".into(),
                machine: "x86_64".into(),
                cpu_model: "Test CPU".into(),
                cpus_online: vec![0, 1],
                cpus_possible: 2,
                preempt: "rt (kernel version)".into(),
                cmdline: "quiet".into(),
                clocksource: "tsc".into(),
                ..Default::default()
            },
            threads,
        )
    }
}

#[test]
fn golden_histfile() {
    golden!("histfile_h20.txt", &histfile(&fixture(), RANGE_US));
}

#[test]
fn golden_cyclictest_json() {
    golden!(
        "cyclictest_h20.json",
        &cyclictest_json_with_range(&fixture(), RANGE_US),
    );
}

#[test]
fn golden_cyclictest_json_full_range() {
    golden!("cyclictest.json", &cyclictest_json(&fixture()));
}

#[test]
fn golden_summary_table() {
    golden!("summary.txt", &summary_table(&fixture()));
}

fn footer<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line"));
    line[label.len()..]
        .split(' ')
        .filter(|s| !s.is_empty())
        .collect()
}

fn footer_numbers(text: &str, label: &str) -> Vec<u64> {
    footer(text, label)
        .iter()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// Read the histogram like OSADL's mklatencyplot.bash: `grep -v -e "^#" -e "^$" | tr " " "\t"`,
/// then `cut -f1,N` per core; and its maximum like `grep "Max Latencies" | tr " " "\n" | sort -n |
/// tail -1 | sed s/^0*//`.
#[test]
fn histfile_reads_like_mklatencyplot() {
    let result = fixture();
    let text = histfile(&result, RANGE_US);
    let threads = result.threads.len();

    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            // Exactly one space: between the bucket number and the first count.
            assert_eq!(l.matches(' ').count(), 1, "row {l:?}");
            assert_eq!(l.matches('\t').count(), threads - 1, "row {l:?}");
            l.replace(' ', "\t")
                .split('\t')
                .map(str::to_owned)
                .collect()
        })
        .collect();
    assert_eq!(
        rows.len(),
        RANGE_US as usize,
        "one row per bucket, empty ones too"
    );

    let mut sums = vec![0u64; threads];
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), 1 + threads);
        assert_eq!(row[0], format!("{i:06}"));
        for (t, field) in row[1..].iter().enumerate() {
            assert!(field.len() >= 6 && field.bytes().all(|b| b.is_ascii_digit()));
            sums[t] += field.parse::<u64>().unwrap();
        }
    }

    let totals = footer_numbers(&text, "# Total:");
    let overflows = footer_numbers(&text, "# Histogram Overflows:");
    assert_eq!(sums, totals);
    for (t, thread) in result.threads.iter().enumerate() {
        assert_eq!(totals[t] + overflows[t], thread.histogram.count());
    }
    assert_eq!(overflows, vec![2, 1]);

    // mklatencyplot's maximum: every token of the line, numerically sorted, the last one.
    let max_line = text.lines().find(|l| l.contains("Max Latencies")).unwrap();
    let mut tokens: Vec<u64> = max_line
        .split(' ')
        .map(|t| t.parse().unwrap_or(0)) // sort -n reads "#" and words as 0
        .collect();
    tokens.sort_unstable();
    assert_eq!(tokens.last().unwrap().to_string(), "1500");
    assert_eq!(footer(&text, "# Max Latencies:"), vec!["01500", "00020"]);
    assert_eq!(footer(&text, "# Min Latencies:"), vec!["00000", "00003"]);
    assert_eq!(footer(&text, "# Avg Latencies:"), vec!["00142", "00009"]);
    assert_eq!(footer(&text, "# Total:"), vec!["000000009", "000000004"]);

    // Thread lines as cyclictest prints overflows past its log of cycles: all are "others"
    // (they read as none at all).
    let tail: Vec<&str> = text.lines().rev().take(4).collect();
    assert_eq!(
        tail,
        vec![
            "",
            "# Thread 1: # 00001 others",
            "# Thread 0: # 00002 others",
            "# Histogram Overflow at cycle number:"
        ]
    );
    assert!(text.ends_with(" others\n\n"));
}

#[test]
fn histfile_range_is_capped_like_cyclictest() {
    let text = histfile(&fixture(), u32::MAX);
    let rows = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    assert_eq!(rows, 1_000_000);
    assert_eq!(footer_numbers(&text, "# Histogram Overflows:"), vec![0, 0]);
}

#[test]
fn cyclictest_json_reads_like_cyclictest_output() {
    let result = fixture();
    for (range, overflows) in [(RANGE_US, [2u64, 1]), (1_000_000, [0, 0])] {
        let text = cyclictest_json_with_range(&result, range);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();

        // Key order as rt-tests prints it (serde_json's Value does not keep order: check the text).
        let keys = [
            "\"file_version\"",
            "\"cmdline:\"",
            "\"rt_test_version:\"",
            "\"start_time\"",
            "\"end_time\"",
            "\"return_code\"",
            "\"sysinfo\"",
            "\"sysname\"",
            "\"nodename\"",
            "\"release\"",
            "\"version\"",
            "\"machine\"",
            "\"realtime\"",
            "\"num_threads\"",
            "\"resolution_in_ns\"",
            "\"thread\"",
            "\"histogram\"",
            "\"cycles\"",
            "\"min\"",
            "\"max\"",
            "\"avg\"",
            "\"cpu\"",
            "\"node\"",
        ];
        let positions: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");

        assert_eq!(v["file_version"], 1);
        assert_eq!(v["rt_test_version:"], "2.40");
        assert!(
            v["cmdline:"]
                .as_str()
                .unwrap()
                .starts_with("latlab measure ")
        );
        assert_eq!(v["start_time"], "Sun, 22 Nov 2026 15:45:04 +0000");
        assert_eq!(v["end_time"], "Sun, 22 Nov 2026 15:45:14 +0000");
        assert_eq!(v["sysinfo"]["realtime"], 1);
        assert_eq!(v["num_threads"], 2);
        assert_eq!(v["resolution_in_ns"], 0);
        for (i, t) in result.threads.iter().enumerate() {
            let j = &v["thread"][i.to_string()];
            let cycles = j["cycles"].as_u64().unwrap();
            assert_eq!(cycles, t.histogram.count());
            let hist = j["histogram"].as_object().unwrap();
            let sum: u64 = hist.values().map(|c| c.as_u64().unwrap()).sum();
            // cyclictest's JSON histogram holds only in-range buckets: overflows = cycles - sum.
            assert_eq!(cycles - sum, overflows[i], "thread {i}, range {range}");
            assert!(hist.keys().all(|k| k.parse::<u32>().unwrap() < range));
            assert!(hist.values().all(|c| c.as_u64().unwrap() > 0));
            assert_eq!(j["cpu"], i64::from(t.cpu.unwrap()));
            assert_eq!(j["node"], 0);
        }
        assert_eq!(v["thread"]["0"]["min"], 0);
        assert_eq!(v["thread"]["0"]["max"], 1500);
        assert_eq!(v["thread"]["0"]["avg"], 142.36);
        assert_eq!(v["thread"]["1"]["avg"], 9.8);
        assert!(text.contains("\"avg\": 9.80,"));
    }
}

#[test]
fn json_and_histfile_agree_on_buckets() {
    let result = fixture();
    let text = histfile(&result, RANGE_US);
    let v: serde_json::Value =
        serde_json::from_str(&cyclictest_json_with_range(&result, RANGE_US)).unwrap();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (bucket, counts) = line.split_once(' ').unwrap();
        let bucket = bucket.parse::<u32>().unwrap().to_string();
        for (t, count) in counts.split('\t').enumerate() {
            let count: u64 = count.parse().unwrap();
            let json = v["thread"][t.to_string()]["histogram"][&bucket]
                .as_u64()
                .unwrap_or(0);
            assert_eq!(count, json, "bucket {bucket}, thread {t}");
        }
    }
}

#[test]
fn unpinned_and_empty_threads() {
    let mut result = fixture();
    result.config.cpus = None;
    result.threads[0].cpu = None;
    result.threads[1] = thread("thread1", None, 4243, 0, Histogram::new());

    let json = cyclictest_json_with_range(&result, RANGE_US);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["thread"]["0"]["cpu"], -1);
    assert_eq!(v["thread"]["1"]["cpu"], -1);
    assert_eq!(v["thread"]["1"]["cycles"], 0);
    assert_eq!(v["thread"]["1"]["min"], 1_000_000);
    assert_eq!(v["thread"]["1"]["avg"], 0.0);
    // cyclictest's exact text for a histogram without entries.
    assert!(json.contains("    \"1\": {\n      \"histogram\": {      },\n      \"cycles\": 0,\n"));

    let text = histfile(&result, RANGE_US);
    assert_eq!(footer(&text, "# Min Latencies:"), vec!["00000", "1000000"]);
    assert_eq!(footer(&text, "# Avg Latencies:"), vec!["00142", "00000"]);
    assert_eq!(footer_numbers(&text, "# Total:"), vec![9, 0]);

    let table = summary_table(&result);
    let row = table.lines().find(|l| l.starts_with("thread1 ")).unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["thread1", "0", "0", "-", "-", "-", "-", "-", "-"]
    );
    assert!(table.contains("2 threads, unpinned"));
}

/// The "≥" note stands under a table only when a value in it is a lower bound, and a run that
/// missed most of its periods says what its latencies are.
#[test]
fn summary_notes_only_what_its_table_shows() {
    let mut result = fixture();
    result.overall.missed = 0;
    let bounded = |r: &latlab_model::RunResult| summary_table(r).contains("≥: a lower bound");
    // The range of an import ends past every value shown: nothing is a lower bound.
    result.overall.stats.bounded_from_ns = Some(result.overall.stats.max + 1);
    assert!(!bounded(&result));
    result.overall.stats.bounded_from_ns = Some(result.overall.stats.p50);
    assert!(bounded(&result));
    assert!(!summary_table(&result).contains("of its periods"));
    result.overall.missed = 3 * result.overall.stats.count;
    let table = summary_table(&result);
    assert!(table.contains("missed 75.0% of its periods"), "{table}");
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "{line:?}");
    }
}

#[test]
fn summary_fits_in_100_columns() {
    let table = summary_table(&fixture());
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "{line:?}");
    }
}

#[test]
fn strings_are_escaped_in_json() {
    let mut result = fixture();
    result.system.hostname = "a\"b\\c".into();
    let v: serde_json::Value = serde_json::from_str(&cyclictest_json(&result)).unwrap();
    assert_eq!(v["sysinfo"]["nodename"], "a\"b\\c");
}
