//! Results of other latency tools read into latlab's [`RunResult`], so they sit in the same store,
//! reports and comparisons as latlab's own runs:
//!
//! - `cyclictest --json` files (rt-tests 2.x), including the `"cmdline:"` key;
//! - cyclictest `-h N` histogram text (stdout, or `--histfile`);
//! - `stress-ng --cyclic` logs (the `cyclic:` lines of `-v` or `--log-file` output);
//! - jitterdebugger `results.json`.
//!
//! What a format does not carry is said in the result's `environment.warnings`, never invented:
//! no windows, spikes or samplers; microsecond or bucket resolution; samples beyond a histogram's
//! range (recorded at the range's end, with only the maximum exact, and percentiles among them
//! lower bounds unless the tool printed them); the percentiles stress-ng prints, from its
//! samples and finer than its buckets, are kept exact in `Stats::exact_percentiles`; an unknown start time or length (recorded as 0, with empty
//! `started_at` and `ended_at`). Lines a capture holds besides the format (cyclictest's `WARN:`
//! on stderr, with `2>&1`) are skipped with a warning; a file cut short is refused with the line
//! where it ends and what was expected there. Lines may end in LF or CRLF. Parsing is pure.

use latlab_hist::Histogram;
use latlab_model::{
    Clock, ExactPercentile, MeasureConfig, Method, Policy, RunEnvironment, RunHead, RunResult,
    Spikes, Stats, StopReason, SystemInfo, ThreadResult, Unrecorded, units::format_us,
};
use serde_json::Value;

/// The formats latlab reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    CyclictestJson,
    CyclictestHist,
    StressNgCyclic,
    Jitterdebugger,
}

impl Format {
    pub const ALL: [Format; 4] = [
        Format::CyclictestJson,
        Format::CyclictestHist,
        Format::StressNgCyclic,
        Format::Jitterdebugger,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Format::CyclictestJson => "cyclictest-json",
            Format::CyclictestHist => "cyclictest-hist",
            Format::StressNgCyclic => "stress-ng",
            Format::Jitterdebugger => "jitterdebugger",
        }
    }
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Why a file could not be read; `line` is 0 when the problem is not on one line.
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", if *.line > 0 { format!("line {}: ", .line) } else { String::new() })]
pub struct ImportError {
    pub line: usize,
    pub message: String,
}

impl ImportError {
    fn at(line: usize, message: impl Into<String>) -> ImportError {
        ImportError {
            line,
            message: message.into(),
        }
    }
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ImportError> {
    Err(ImportError::at(line, message))
}

/// Recognise a file's format from its content.
pub fn detect(text: &str) -> Option<Format> {
    let t = text.trim_start();
    if t.starts_with('{') {
        let Ok(v) = serde_json::from_str::<Value>(t) else {
            // Cut short (or otherwise broken): told by the keys its opening holds, so the
            // reader of that format can say where it ends.
            let has = |key: &str| t.contains(&format!("\"{key}\""));
            if has("cmdline:") || has("rt_test_version:") || has("num_threads") {
                return Some(Format::CyclictestJson);
            }
            let jd_opening = has("sysinfo") && (has("cpus_online") || has("cpu"));
            // Releases before 0.3 wrote no sysinfo: only the threads under "cpu".
            let jd_threads = has("cpu") && has("histogram");
            if (jd_opening || jd_threads) && !has("file_version") {
                return Some(Format::Jitterdebugger);
            }
            return None;
        };
        if v.get("thread").is_some() && v.get("num_threads").is_some() {
            return Some(Format::CyclictestJson);
        }
        if is_jitterdebugger(&v) {
            return Some(Format::Jitterdebugger);
        }
        return None;
    }
    if text
        .lines()
        .any(|l| l.contains("cyclic:") && l.contains("stress-ng"))
    {
        return Some(Format::StressNgCyclic);
    }
    // The footer, or (in a capture cut short before it) the histogram's first line.
    if text
        .lines()
        .any(|l| l.starts_with("# Max Latencies:") || l.trim_end() == "# Histogram")
    {
        return Some(Format::CyclictestHist);
    }
    None
}

/// jitterdebugger's results.json: threads under "cpu", each with a histogram and a count (every
/// release), and since 0.3 a "sysinfo" block.
fn is_jitterdebugger(v: &Value) -> bool {
    let Some(cpus) = v.get("cpu").and_then(Value::as_object) else {
        return false;
    };
    v.get("sysinfo").is_some()
        || (!cpus.is_empty()
            && cpus
                .values()
                .all(|c| c.get("histogram").is_some() && c.get("count").is_some()))
}

/// Read `text` (in `format`, or detected) into a result. `source` names the file in the result.
pub fn import(text: &str, format: Option<Format>, source: &str) -> Result<RunResult, ImportError> {
    let format = match format.or_else(|| detect(text)) {
        Some(f) => f,
        None => {
            return err(
                0,
                "not a format latlab reads (accepted: cyclictest --json, cyclictest -h text, \
                 stress-ng --cyclic log, jitterdebugger results.json; a result latlab wrote \
                 with --json goes in with `latlab db import-json`)",
            );
        }
    };
    let mut r = match format {
        Format::CyclictestJson => cyclictest_json(text)?,
        Format::CyclictestHist => cyclictest_hist(text)?,
        Format::StressNgCyclic => stress_ng(text)?,
        Format::Jitterdebugger => jitterdebugger(text)?,
    };
    // A run that measured nothing has nothing to compare or report: it would stand in lists
    // with a maximum of 0.
    if r.overall.stats.count == 0 {
        return err(
            0,
            format!(
                "no samples: every thread of this {} file counts 0 (accepted: a file of a run \
                 that measured at least one sample)",
                format.name()
            ),
        );
    }
    r.environment.warnings.insert(
        0,
        format!(
            "{}{} ({source}): no windows, spikes, missed periods or samplers are recorded in \
             that format",
            latlab_model::IMPORTED_FROM,
            format.name()
        ),
    );
    // The same file always gets the same id, so importing it twice is noticed.
    r.id = format!(
        "import-{}-{:016x}",
        format.name(),
        latlab_model::rng::fnv1a64(text)
    );
    Ok(r)
}

/// One thread's samples as read: histogram rows in µs, overflow beyond the range.
#[derive(Default)]
struct Thread {
    cpu: Option<u32>,
    /// (value in ns, count)
    rows: Vec<(u64, u64)>,
    total: u64,
    max_ns: Option<u64>,
    /// The exact minimum, recorded as it is when no row can hold it (it lies beyond the range).
    min_ns: Option<u64>,
    /// Where values above the histogram's range are recorded (the range's end).
    range_end_ns: u64,
    /// Percentiles the tool printed, computed from all its samples.
    printed: Vec<ExactPercentile>,
    /// The mean and standard deviation the tool printed from all its samples (ns).
    mean_ns: Option<f64>,
    stdev_ns: Option<f64>,
}

/// A thread's histogram, the printed percentiles it cannot give (they lie among the samples
/// beyond its range), and a warning when values were placed at a bound.
struct Built {
    histogram: Histogram,
    exact: Vec<ExactPercentile>,
    warning: Option<String>,
    /// The range's end, where samples lie beyond it (known only as at least it).
    bounded_from_ns: Option<u64>,
}

/// Build a thread's histogram: rows as read, samples the rows lack recorded at the range's end
/// with the maximum exact (and the minimum, when it lies there too); printed percentiles are
/// kept exact: within the range they are finer than the buckets, beyond it the histogram's are
/// only lower bounds.
fn thread_histogram(t: &Thread, label: &str) -> Built {
    let mut h = Histogram::new();
    let in_rows: u64 = t.rows.iter().map(|r| r.1).sum();
    for &(v, n) in &t.rows {
        h.record_n(v, n);
    }
    let over = t.total.saturating_sub(in_rows);
    if over == 0 {
        // Percentiles the tool printed from its samples are exact where the buckets are not.
        return Built {
            histogram: h,
            exact: t.printed.clone(),
            warning: None,
            bounded_from_ns: None,
        };
    }
    let max = t.max_ns.unwrap_or(t.range_end_ns).max(t.range_end_ns);
    let min = t
        .min_ns
        .filter(|&m| over >= 2 && m >= t.range_end_ns && m <= max);
    // Just past the range's end (its first unit's middle), so no reader puts them inside it; never
    // above an exact maximum (stress-ng's ns, jitterdebugger's finer units can lie within that
    // half unit) nor below an exact minimum.
    let past_end = match t.max_ns {
        Some(_) => (t.range_end_ns + 500).min(max),
        None => t.range_end_ns + 500,
    };
    let at = past_end.max(min.unwrap_or(0));
    if let Some(m) = min {
        h.record(m);
    }
    h.record_n(at, over - 1 - u64::from(min.is_some()));
    h.record(max);
    // The printed percentiles the histogram could give only as lower bounds.
    let beyond: Vec<&ExactPercentile> = t
        .printed
        .iter()
        .filter(|p| latlab_hist::nearest_rank(p.percentile, t.total) > in_rows)
        .collect();
    let exact_part = match min {
        Some(m) => format!(
            "only their minimum, {:.1} us, and maximum, {:.1} us, are known, to the file's \
             resolution",
            m as f64 / 1000.0,
            max as f64 / 1000.0
        ),
        None => format!(
            "only their maximum, {:.1} us, is known, to the file's resolution",
            max as f64 / 1000.0
        ),
    };
    if in_rows == 0 && min.is_some() && t.printed.is_empty() {
        // No distribution at all (cyclictest without -h): said as such, not as a range.
        return Built {
            histogram: h,
            exact: t.printed.clone(),
            warning: Some(format!(
                "{label}: the file has no histogram rows (cyclictest writes them with -h N): of \
                 its {} samples only the minimum ({:.1} us), the maximum ({:.1} us){} are known; \
                 every percentile is a lower bound",
                t.total,
                min.unwrap_or(0) as f64 / 1000.0,
                max as f64 / 1000.0,
                if t.mean_ns.is_some() {
                    " and the mean as the tool printed it"
                } else {
                    ""
                }
            )),
            bounded_from_ns: Some(t.range_end_ns),
        };
    }
    let mut warning = format!(
        "{label}: {over} of {} samples lie beyond the histogram range ({} us) and are recorded \
         there; {exact_part}. Percentiles above p{}{} are lower bounds",
        t.total,
        // Whole µs as before; a range of ns buckets (stress-ng --cyclic-dist 1) in decimals.
        if t.range_end_ns.is_multiple_of(1000) {
            (t.range_end_ns / 1000).to_string()
        } else {
            format!("{:.3}", t.range_end_ns as f64 / 1000.0)
        },
        percentile_below(100.0 * (1.0 - over as f64 / t.total as f64)),
        if t.mean_ns.is_some() {
            ""
        } else {
            ", and the mean,"
        }
    );
    if !beyond.is_empty() {
        let names: Vec<String> = beyond
            .iter()
            .map(|p| format!("p{}", p.percentile))
            .collect();
        warning.push_str(&format!(
            ", except {}: the tool printed them from all its samples, so they are exact",
            names.join(", ")
        ));
    }
    if t.mean_ns.is_some() {
        warning.push_str("; the mean is the one the tool printed");
    }
    Built {
        histogram: h,
        exact: t.printed.clone(),
        warning: Some(warning),
        bounded_from_ns: Some(t.range_end_ns),
    }
}

/// Where a thread's own extremes contradict its histogram rows: said (with `label`), and the
/// rows kept as the truth. A maximum below the largest row becomes that row; a maximum inside
/// the range while samples lie beyond it stays at the range's end, where they are recorded.
fn contradictions(t: &mut Thread, label: &str) -> Vec<String> {
    let mut found = Vec::new();
    let filled = || t.rows.iter().filter(|r| r.1 > 0).map(|r| r.0);
    let (top, bottom) = (filled().max(), filled().min());
    let in_rows: u64 = t.rows.iter().map(|r| r.1).sum();
    let us = |ns: u64| format_us(ns, 1);
    // An extreme on the wrong side of the rows gives way to the row.
    let mut past_row =
        |extreme: &mut Option<u64>, row: Option<u64>, wrong: fn(u64, u64) -> bool| {
            let (Some(v), Some(row)) = (*extreme, row) else {
                return false;
            };
            if wrong(v, row) {
                let (name, side, which) = if v < row {
                    ("maximum", "below", "largest")
                } else {
                    ("minimum", "above", "smallest")
                };
                found.push(format!(
                "{label}: its {name} ({} us) lies {side} its {which} histogram row ({} us): the \
                 row is used",
                us(v),
                us(row)
            ));
                *extreme = Some(row);
            }
            wrong(v, row)
        };
    let max_below = past_row(&mut t.max_ns, top, |v, row| v < row);
    past_row(&mut t.min_ns, bottom, |v, row| v > row);
    // A maximum above every row while no sample lies beyond them: no sample is that large.
    if let (Some(max), Some(row)) = (t.max_ns, top)
        && max > row
        && t.total <= in_rows
    {
        found.push(format!(
            "{label}: its maximum ({} us) lies above its largest histogram row ({} us), yet \
             it counts no sample beyond its rows: the row is used",
            us(max),
            us(row)
        ));
        t.max_ns = Some(row);
    }
    // A mean outside the extremes is no mean of these samples: the histogram's own is used
    // (10 ns spare: the tools print their means to 0.01 us).
    let (lowest, highest) = (t.min_ns.or(bottom), t.max_ns.or(top));
    if let (Some(mean), Some(lo), Some(hi)) = (t.mean_ns, lowest, highest)
        && !(lo as f64 - 10.0..=hi as f64 + 10.0).contains(&mean)
    {
        // Without rows there is no histogram mean: what is left is a lower bound.
        let instead = if in_rows == 0 {
            "without histogram rows the mean is known only as a lower bound"
        } else {
            "the histogram's mean is used"
        };
        found.push(format!(
            "{label}: its mean ({:.1} us) lies outside its minimum and maximum ({} us to {} us): \
             {instead}",
            mean / 1000.0,
            us(lo),
            us(hi)
        ));
        t.mean_ns = None;
        t.stdev_ns = None;
    }
    if let Some(max) = t.max_ns
        && !max_below
        && t.total > in_rows
        && max < t.range_end_ns
    {
        found.push(format!(
            "{label}: {} of its samples lie beyond its histogram range ({} us), yet its maximum \
             is {} us: they are recorded at the range's end",
            t.total - in_rows,
            us(t.range_end_ns),
            us(max)
        ));
    }
    found
}

/// Turn threads into a result with the given configuration and system; `inconsistent` holds
/// what the file's format found contradicting itself, to which the threads' own are added.
fn assemble(
    mut threads: Vec<Thread>,
    config: MeasureConfig,
    system: SystemInfo,
    started_unix_ns: u64,
    warnings: Vec<String>,
    mut inconsistent: Vec<String>,
) -> Result<RunResult, ImportError> {
    within_bounds(&threads)?;
    // No import format carries the system record beyond its host and kernel names.
    let mut env = RunEnvironment {
        warnings,
        missed_unrecorded: true,
        not_recorded: vec![Unrecorded::SYSTEM.into()],
        ..RunEnvironment::default()
    };
    // What the command line bounded the run by, where it says (cyclictest's -D or -l).
    let stop = if config.duration_ns.is_some() {
        StopReason::Duration
    } else {
        StopReason::Loops
    };
    let labels: Vec<String> = threads
        .iter()
        .enumerate()
        .map(|(i, t)| match t.cpu {
            Some(c) => format!("cpu{c}"),
            None => format!("thread{i}"),
        })
        .collect();
    for (t, label) in threads.iter_mut().zip(&labels) {
        inconsistent.extend(contradictions(t, label));
    }
    if !inconsistent.is_empty() {
        env.warnings.push(format!(
            "the file contradicts itself (edited or damaged?): {}",
            inconsistent.join("; ")
        ));
    }
    let mut results = Vec::new();
    for (t, label) in threads.iter().zip(labels) {
        let Built {
            histogram: h,
            exact,
            warning,
            bounded_from_ns,
        } = thread_histogram(t, &label);
        env.warnings.extend(warning);
        // No missed periods are known: the corrected statistics are the raw ones.
        let stats = Stats::of(&h).with_exact_of(&Stats {
            exact_percentiles: exact,
            exact_mean: t.mean_ns,
            exact_stdev: t.stdev_ns,
            bounded_from_ns,
            ..Stats::default()
        });
        results.push(ThreadResult {
            label,
            cpu: t.cpu,
            tid: 0,
            missed: 0,
            expected_periods: None,
            max_at_ns: 0,
            corrected: stats.clone(),
            stats,
            cpu_time_ns: None,
            corrected_histogram: h.clone(),
            histogram: h,
            windows: Vec::new(),
        });
    }
    // 0 when the format does not say (latlab_model::known_time); no time is invented for it.
    let head = RunHead {
        id: String::new(),
        start_unix_ns: started_unix_ns,
        elapsed_ns: config.duration_ns.unwrap_or(0),
        config,
        system,
        environment: env,
        // What the command line bounded the run by, where it says (cyclictest's -D or -l).
        stop,
        spikes: Spikes::default(),
    };
    Ok(RunResult::from_threads(head, results))
}

/// The largest count, and the largest latency in µs, a file may hold: 2^53, up to which every
/// JSON reader's numbers are exact (as many samples as a 1 µs period gives in 285 years).
const MOST: u64 = 1 << 53;

/// Refuse counts, latencies and averages no run can have (a damaged or hand-edited file): counts
/// and latencies past [`MOST`], an average that is no latency, and latencies whose sum the
/// histogram could not keep (2^64 ns).
fn within_bounds(threads: &[Thread]) -> Result<(), ImportError> {
    let most_ns = MOST * 1000;
    let mut all = 0u64;
    for (i, t) in threads.iter().enumerate() {
        let what = match t.cpu {
            Some(c) => format!("the thread on CPU {c}"),
            None => format!("thread {i}"),
        };
        let in_rows = t.rows.iter().fold(0u64, |n, r| n.saturating_add(r.1));
        let count = t.total.max(in_rows);
        all = all.saturating_add(count);
        if count > MOST {
            return err(
                0,
                format!("{what} counts {count} samples, more than latlab takes ({ACCEPTED})"),
            );
        }
        let printed = t.printed.iter().map(|p| p.value_ns);
        let latencies = t.rows.iter().map(|r| r.0).chain(t.max_ns).chain(t.min_ns);
        let latencies = latencies.chain([t.range_end_ns]);
        if let Some(ns) = latencies.chain(printed).filter(|ns| *ns > most_ns).max() {
            return err(
                0,
                format!(
                    "{what} holds a latency of {} µs or more, more than latlab takes \
                     ({ACCEPTED} of µs)",
                    ns / 1000
                ),
            );
        }
        for (name, v) in [("mean", t.mean_ns), ("standard deviation", t.stdev_ns)] {
            if let Some(v) = v.filter(|v| !(0.0..=most_ns as f64).contains(v)) {
                return err(
                    0,
                    format!(
                        "{what} has a {name} of {} µs, which no latency can be (accepted: from 0 \
                         to 2^53 µs)",
                        if v.abs() < 1e12 {
                            format!("{:.1}", v / 1000.0)
                        } else {
                            format!("{:e}", v / 1000.0)
                        }
                    ),
                );
            }
        }
        // What the histogram keeps as the sum of its samples; those beyond the rows are kept
        // at the range's end or the maximum.
        let top = t.range_end_ns.max(t.max_ns.unwrap_or(0));
        let beyond = u128::from(count - in_rows) * u128::from(top);
        let sum = t
            .rows
            .iter()
            .fold(beyond, |s, r| s + u128::from(r.0) * u128::from(r.1));
        if sum > u128::from(u64::MAX) {
            return err(
                0,
                format!(
                    "{what}'s samples add up to {sum} ns of latency, more than latlab keeps \
                     (accepted: latencies that add up to less than 2^64 ns)"
                ),
            );
        }
    }
    if all > MOST {
        return err(
            0,
            format!(
                "the file's threads count {all} samples in all, more than latlab takes \
                 ({ACCEPTED})"
            ),
        );
    }
    Ok(())
}

fn config(interval_ns: u64, threads: usize, cpus: Option<Vec<u32>>) -> MeasureConfig {
    MeasureConfig {
        interval_ns,
        cpus,
        threads: threads as u32,
        priority: 0,
        mlock: false,
        window_ns: 0,
        spike_limit: 0,
        ..Default::default()
    }
}

/// What a cyclictest command line says about the run (rt-tests option names), written into
/// `cfg`; what it leaves out is cyclictest's default (SCHED_OTHER unless `-p` gives a priority).
/// Returns the distance between the threads' intervals in ns: thread N sleeps the interval +
/// N × it (`-d`, 500 µs unless given; 0 with a histogram, `-h` or `-H`).
fn cyclictest_args(cmdline: &str, cfg: &mut MeasureConfig) -> u64 {
    cfg.policy = Policy::Other;
    let mut distance_ns = 500_000;
    let mut histogram = false;
    for (name, value) in cyclictest_options(cmdline) {
        match name.as_str() {
            "i" | "interval" => {
                if let Some(v) = value.and_then(|v| v.parse::<u64>().ok()) {
                    cfg.interval_ns = v.saturating_mul(1000);
                }
            }
            "p" | "priority" => {
                if let Some(v) = value.and_then(|v| v.parse().ok()) {
                    cfg.priority = v;
                    if cfg.policy == Policy::Other {
                        cfg.policy = Policy::Fifo;
                    }
                }
            }
            "policy" => {
                if let Some(p) = value.as_deref().and_then(Policy::from_name) {
                    cfg.policy = p;
                }
            }
            "l" | "loops" => cfg.loops = value.and_then(|v| v.parse().ok()),
            "D" | "duration" => {
                cfg.duration_ns =
                    value.and_then(|v| latlab_model::units::parse_duration(&v, Some("s")).ok())
            }
            "r" | "relative" => cfg.relative = true,
            "n" | "nanosleep" => {
                cfg.method = Method::ClockNanosleep;
            }
            "m" | "mlockall" => cfg.mlock = true,
            "c" | "clock" if value.as_deref() == Some("1") => cfg.clock = Clock::Realtime,
            "d" | "distance" => {
                if let Some(v) = value.and_then(|v| v.parse::<u64>().ok()) {
                    distance_ns = v.saturating_mul(1000);
                }
            }
            "h" | "histogram" | "H" | "histofall" => histogram = true,
            _ => {}
        }
    }
    if histogram { 0 } else { distance_ns }
}

/// cyclictest's short options that take a value, in the word (`-i200`) or the next one; and
/// those whose value is optional, in the word only (`-a1`, `-t4`). The others are flags, and
/// flags may be bundled with what follows them (`-mSp90`), as getopt reads them.
const CYCLICTEST_VALUED: &str = "bcdDFhHilop";
const CYCLICTEST_OPTIONAL: &str = "aAt";
/// The long options that take a value (in `--name=value` or the next word).
const CYCLICTEST_LONG_VALUED: [&str; 10] = [
    "latency",
    "interval",
    "priority",
    "duration",
    "loops",
    "policy",
    "distance",
    "histogram",
    "histofall",
    "clock",
];

/// A cyclictest command line's options, each with its value as getopt gives it.
fn cyclictest_options(cmdline: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut words = cmdline.split_whitespace();
    while let Some(w) = words.next() {
        if let Some(long) = w.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None if CYCLICTEST_LONG_VALUED.contains(&long) => {
                    (long, words.next().map(str::to_string))
                }
                None => (long, None),
            };
            out.push((name.to_string(), value));
            continue;
        }
        let Some(short) = w.strip_prefix('-') else {
            continue;
        };
        for (at, c) in short.char_indices() {
            let rest = &short[at + c.len_utf8()..];
            let inline = (!rest.is_empty()).then(|| rest.to_string());
            if CYCLICTEST_VALUED.contains(c) {
                let value = inline.or_else(|| words.next().map(str::to_string));
                out.push((c.to_string(), value));
                break;
            }
            if CYCLICTEST_OPTIONAL.contains(c) {
                out.push((c.to_string(), inline));
                break;
            }
            out.push((c.to_string(), None));
        }
    }
    out
}

/// What the command line of a file `latlab measure --cyclictest-json` wrote says about the run
/// (latlab's option names, as it writes them: `--name value`), written into `cfg`; memory
/// locking is latlab's default unless `--no-mlock`.
fn latlab_args(cmdline: &str, cfg: &mut MeasureConfig) {
    use latlab_model::units::parse_duration;
    let words: Vec<&str> = cmdline.split_whitespace().skip(2).collect();
    let duration = |v: Option<&&str>, unit| v.and_then(|v| parse_duration(v, Some(unit)).ok());
    cfg.mlock = true;
    cfg.policy = Policy::Other;
    for (i, w) in words.iter().enumerate() {
        let v = words.get(i + 1);
        match *w {
            "--method" => {
                if let Some(m) = v.and_then(|v| Method::from_name(v)) {
                    cfg.method = m;
                }
            }
            "--relative" => cfg.relative = true,
            "--interval" => cfg.interval_ns = duration(v, "us").unwrap_or(cfg.interval_ns),
            "--policy" => cfg.policy = v.and_then(|v| Policy::from_name(v)).unwrap_or(cfg.policy),
            "--priority" => cfg.priority = v.and_then(|v| v.parse().ok()).unwrap_or(0),
            "--clock" if v == Some(&"realtime") => cfg.clock = Clock::Realtime,
            "--duration" => cfg.duration_ns = duration(v, "s"),
            "--loops" => cfg.loops = v.and_then(|v| v.parse().ok()),
            "--pm-qos" => cfg.pm_qos_us = v.and_then(|v| v.parse().ok()),
            "--no-mlock" => cfg.mlock = false,
            "--timer-slack" => cfg.timer_slack_ns = duration(v, "us").unwrap_or(0),
            "--waker-cpu" => cfg.waker_cpu = v.and_then(|v| v.parse().ok()),
            "--stagger" => cfg.stagger = true,
            "--break" => cfg.break_threshold_ns = duration(v, "us"),
            "--window" => cfg.window_ns = duration(v, "s").unwrap_or(0),
            "--spike" => cfg.spike_threshold_ns = duration(v, "us"),
            "--spike-limit" => cfg.spike_limit = v.and_then(|v| v.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
}

/// What a latlab command line says ran beside the measurement, in its own words: latlab
/// writes those options (`--load`, `--load-schedule`, `--load-cpus`, `--trace`) last, before
/// any `# not recorded:`. `None` where nothing did.
fn beside_measurement(args: &str) -> Option<String> {
    let at = [" --load ", " --load-schedule ", " --trace "]
        .iter()
        .filter_map(|o| args.find(o))
        .min()?;
    Some(args[at..].trim().to_string())
}

fn sysinfo_of(v: &Value) -> SystemInfo {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    SystemInfo {
        hostname: s("nodename"),
        kernel_release: s("release"),
        kernel_version: s("version"),
        machine: s("machine"),
        ..SystemInfo::default()
    }
}

/// "Sun, 22 Nov 2026 17:49:19 +0000" (cyclictest's start_time) → unix ns.
pub use latlab_model::parse_rfc2822;

/// `v[key]` as a count or a whole-unit value (absent or null: `None`); anything else (a negative
/// or fractional number, one past [`MOST`], a string) is refused, naming `what` holds it and the
/// accepted form.
fn whole_of(v: &Value, key: &str, what: &str) -> Result<Option<u64>, ImportError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => whole(x)
            .map(Some)
            .map_err(|why| ImportError::at(0, format!("{what}: \"{key}\" is {x}, {why}"))),
    }
}

/// A JSON number that is whole, not negative and at most [`MOST`], also written with a
/// fraction of zero (`500.0`, as some writers print every number); else why not, with the
/// accepted form.
fn whole(x: &Value) -> Result<u64, String> {
    let n = match (x.as_u64(), x.as_f64()) {
        (Some(n), _) => n,
        // Past u64 too: as large as ever.
        (None, Some(f)) if f.fract() == 0.0 && f >= 0.0 => f.min(u64::MAX as f64) as u64,
        _ => return Err(format!("not a whole number ({ACCEPTED})")),
    };
    bounded(n)
}

/// A thread's `"cpu"` (absent, null or -1, as cyclictest writes an unpinned thread's: `None`),
/// a CPU number Linux can have.
fn cpu_of(v: Option<&Value>, what: &str) -> Result<Option<u32>, ImportError> {
    let max = latlab_model::units::MAX_CPU;
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(x) if x.as_i64() == Some(-1) => Ok(None),
        Some(x) => x
            .as_u64()
            .filter(|c| *c <= u64::from(max))
            .map(|c| Some(c as u32))
            .ok_or_else(|| {
                ImportError::at(
                    0,
                    format!("{what}: \"cpu\" is {x}, not a CPU number (accepted: 0 to {max})"),
                )
            }),
    }
}

/// `n` when it is at most [`MOST`]; else why not, with the accepted form.
fn bounded(n: u64) -> Result<u64, String> {
    if n <= MOST {
        Ok(n)
    } else {
        Err(format!("more than latlab takes ({ACCEPTED})"))
    }
}

/// What a count or a latency in whole units may be.
const ACCEPTED: &str = "accepted: a whole number from 0 to 2^53";

/// A whole number in a column of a text file, at most [`MOST`]; else why not.
fn whole_word(w: &str) -> Result<u64, String> {
    match w.parse::<u64>() {
        Ok(n) if n <= MOST => Ok(n),
        Ok(_) => Err("more than latlab takes".into()),
        Err(_) => Err("not a number".into()),
    }
}

/// Rows keyed by whole units (µs, or the resolution) as `(key, count)`.
fn histogram_rows(v: &Value, thread: &str) -> Result<Vec<(u64, u64)>, ImportError> {
    // cyclictest from 2.7 leaves the histogram out without -h: no rows, as an empty one.
    if v.is_null() {
        return Ok(Vec::new());
    }
    let Some(obj) = v.as_object() else {
        return err(
            0,
            format!(
                "{thread} has a \"histogram\" that is no object (accepted: \"histogram\": \
                 {{\"<value>\": <count>, ...}}, empty or left out without rows)"
            ),
        );
    };
    let mut rows = Vec::with_capacity(obj.len());
    for (k, n) in obj {
        let us = whole_word(k).map_err(|why| {
            ImportError::at(
                0,
                format!(
                    "histogram key {k:?} is {why} (accepted: a whole number of µs from 0 to 2^53)"
                ),
            )
        })?;
        let n = whole(n)
            .map_err(|why| ImportError::at(0, format!("histogram count at {k} is {n}, {why}")))?;
        rows.push((us, n));
    }
    rows.sort_unstable();
    Ok(rows)
}

/// One thread of a cyclictest JSON: its histogram rows up to `range_us` (else its largest row
/// + 1), its counts and extremes; what contradicts itself is added to `inconsistent`.
fn cyclictest_thread(
    key: u32,
    t: &Value,
    range_us: Option<u64>,
    by_latlab: bool,
    inconsistent: &mut Vec<String>,
) -> Result<Thread, ImportError> {
    let what = format!("thread {key}");
    let keyed = histogram_rows(t.get("histogram").unwrap_or(&Value::Null), &what)?;
    let in_rows = keyed.iter().fold(0u64, |n, r| n.saturating_add(r.1));
    let cycles = whole_of(t, "cycles", &what)?.unwrap_or(0);
    // "cycles" counts every sample, the histogram those within its range: never more.
    if in_rows > cycles {
        inconsistent.push(format!(
            "thread {key}: its histogram holds {in_rows} samples, more than its \"cycles\" \
             ({cycles}): the histogram's count is used"
        ));
    }
    let total = cycles.max(in_rows);
    let max = whole_of(t, "max", &what)?.map(mid_us);
    let min_us = whole_of(t, "min", &what)?;
    let min = min_us.map(mid_us);
    // Saturating: a range this large is refused as the result is assembled.
    let rows_end = range_us
        .or(keyed.last().map(|r| r.0 + 1))
        .unwrap_or(0)
        .saturating_mul(1000);
    // Without rows every sample is known only to lie at or above the minimum: the start of
    // its whole microsecond (a sample printed as 3 µs took 3.0 µs or more).
    let min_start = min_us.map(|us| us.saturating_mul(1000));
    let range_end_ns = rows_end.max(min_start.unwrap_or(0));
    let rows = keyed.into_iter().map(|(us, n)| (mid_us(us), n)).collect();
    // The mean of all its samples, in µs: cyclictest's of whole, truncated microseconds
    // (half a microsecond below the middles the samples are recorded at), latlab's exact.
    let truncation = if by_latlab { 0.0 } else { 500.0 };
    let mean_ns = t
        .get("avg")
        .and_then(Value::as_f64)
        .filter(|_| total > 0)
        .map(|avg| avg * 1000.0 + truncation);
    Ok(Thread {
        cpu: cpu_of(t.get("cpu"), &what)?,
        rows,
        total,
        max_ns: max,
        min_ns: min,
        range_end_ns,
        mean_ns,
        ..Thread::default()
    })
}

fn cyclictest_json(text: &str) -> Result<RunResult, ImportError> {
    let v = json_of(text, "cyclictest --json")?;
    let cmdline = v.get("cmdline:").and_then(Value::as_str).unwrap_or("");
    let Some(threads) = v.get("thread").and_then(Value::as_object) else {
        return err(0, "no \"thread\" object");
    };
    let mut list = Vec::new();
    let mut keys: Vec<(u32, &Value)> = threads
        .iter()
        .map(|(k, t)| (k.parse().unwrap_or(u32::MAX), t))
        .collect();
    keys.sort_by_key(|k| k.0);
    // Histogram rows go up to the -h range of the command line (else, the largest row + 1);
    // samples beyond it are recorded at its end, or at the file's minimum when that lies above
    // (a file without -h has no rows at all: its samples are only bounded below by it).
    // latlab writes this format too (`measure --cyclictest-json`), with its own command line,
    // which names the range where it ends before latlab's longest (an import's); without it,
    // every sample of the run is in the rows.
    let by_latlab = cmdline.starts_with("latlab measure");
    let range_us = if by_latlab {
        let words: Vec<&str> = cmdline.split_whitespace().collect();
        words
            .iter()
            .position(|w| *w == "--histfile-range")
            .and_then(|i| words.get(i + 1)?.parse().ok())
    } else {
        histogram_range_us(cmdline)
    };
    // What the file says of itself and does not hold: said, and its own counts used.
    let mut inconsistent = Vec::new();
    if let Some(n) = whole_of(&v, "num_threads", "the file")?
        && n != keys.len() as u64
    {
        inconsistent.push(format!(
            "\"num_threads\" is {n} but the file holds {} thread(s): those are imported",
            keys.len()
        ));
    }
    for (key, t) in keys {
        list.push(cyclictest_thread(
            key,
            t,
            range_us,
            by_latlab,
            &mut inconsistent,
        )?);
    }
    let mut cfg = config(1_000_000, list.len(), None);
    let mut distance_ns = 0;
    // An export of an import names what it left out for not being known.
    let (args, unknown) = match cmdline.split_once(Unrecorded::MARK) {
        Some((args, names)) if by_latlab => (args, names.split(", ").collect::<Vec<_>>()),
        _ => (cmdline, Vec::new()),
    };
    if by_latlab {
        latlab_args(args, &mut cfg);
        if unknown.contains(&Unrecorded::INTERVAL) {
            cfg.interval_ns = 0;
        }
        if unknown.contains(&Unrecorded::PRIORITY) {
            (cfg.policy, cfg.priority) = (Policy::Fifo, 0);
        }
        if unknown.contains(&Unrecorded::MEMORY) {
            cfg.mlock = false;
        }
    } else {
        distance_ns = cyclictest_args(cmdline, &mut cfg);
    }
    cfg.cpus = Some(list.iter().filter_map(|t| t.cpu).collect())
        .filter(|c: &Vec<u32>| c.len() == list.len());
    let started = v
        .get("start_time")
        .and_then(Value::as_str)
        .and_then(parse_rfc2822)
        .unwrap_or(0);
    let mut warnings = vec![
        format!("command line: {cmdline}"),
        "values are whole microseconds, truncated (cyclictest's resolution), recorded at the \
         middle of their microsecond"
            .into(),
    ];
    if started == 0 {
        warnings.push("no start time in the file".into());
    }
    if list.len() > 1 && distance_ns > 0 {
        let intervals: Vec<String> = (0..list.len() as u64)
            .map(|n| latlab_model::interval_text(cfg.interval_ns + n * distance_ns))
            .collect();
        warnings.push(format!(
            "intervals differ per thread: cyclictest adds -d's {} (500 us unless given, none \
             with -h) for each thread: {}; the run's interval is the first thread's",
            latlab_model::interval_text(distance_ns),
            intervals.join(", ")
        ));
    }
    let sys = sysinfo_of(v.get("sysinfo").unwrap_or(&Value::Null));
    let mut r = assemble(list, cfg, sys, started, warnings, inconsistent)?;
    if by_latlab {
        r.environment.not_recorded.extend(
            unknown
                .iter()
                .filter(|n| ![Unrecorded::INTERVAL, Unrecorded::PRIORITY].contains(n))
                .map(|n| n.to_string()),
        );
        // latlab holds what --pm-qos asks (it fails without it), and goes on when mlockall
        // fails: the file keeps that it was asked, not whether it worked.
        r.environment.pm_qos_held_us = r.config.pm_qos_us;
        if let Some(beside) = beside_measurement(args) {
            r.environment.warnings.push(format!(
                "measured beside {beside}: the file holds nothing more of it (no load's \
                 throughput or phases, no traced latencies)"
            ));
        }
        if r.config.mlock {
            r.environment.memory_locked = true;
            r.environment.warnings.push(
                "memory: locking was asked (no --no-mlock); a failed mlockall is a warning \
                 this file does not keep"
                    .into(),
            );
        }
        return Ok(r);
    }
    // cyclictest ends when -m's mlockall fails: a file it wrote had its memory locked.
    r.environment.memory_locked = r.config.mlock;
    // Without --laptop it holds /dev/cpu_dma_latency (at --latency, else 0) while it runs.
    if !cmdline.split_whitespace().any(|w| w == "--laptop") {
        let us = cyclictest_latency(cmdline).unwrap_or(0);
        r.config.pm_qos_us = Some(us);
        r.environment.pm_qos_held_us = Some(us);
        r.environment.warnings.push(format!(
            "PM QoS: cyclictest holds /dev/cpu_dma_latency at {us} µs without --laptop; the JSON \
             does not record whether the device could be written"
        ));
    }
    Ok(r)
}

/// The `--latency=N` (µs) of a cyclictest command line, if it gives one.
fn cyclictest_latency(cmdline: &str) -> Option<u32> {
    cyclictest_value(cmdline, &["latency"])
}

/// The histogram's range in µs a cyclictest command line asks for (`-h N`, `-hN`, `-mh400`,
/// `--histogram N`, `--histogram=N`, and the same with `-H`), if it does.
fn histogram_range_us(cmdline: &str) -> Option<u64> {
    cyclictest_value(cmdline, &["h", "histogram", "H", "histofall"])
}

/// The last value given to one of `names` in a cyclictest command line (getopt's, which the
/// later one overrides) that reads as a `T`.
fn cyclictest_value<T: std::str::FromStr>(cmdline: &str, names: &[&str]) -> Option<T> {
    cyclictest_options(cmdline)
        .into_iter()
        .filter(|(n, _)| names.contains(&n.as_str()))
        .rev()
        .find_map(|(_, v)| v?.parse().ok())
}

/// A truncated whole-microsecond value at the middle of its microsecond.
fn mid_us(us: u64) -> u64 {
    // Saturating: a value this large is refused as the result is assembled.
    us.saturating_mul(1000).saturating_add(500)
}

/// What a cyclictest histogram row is, for messages.
const HIST_ROW: &str = "a histogram row: the latency in µs, then one count per thread";

/// A cyclictest histogram text, read line by line: its rows and footer lines, not yet checked
/// against each other.
struct HistText<'a> {
    /// Per thread: the rows with samples, as (value in ns, count).
    rows: Vec<Vec<(u64, u64)>>,
    /// The `# Max Latencies:` line: (line number, values).
    maxes: Option<(usize, Vec<u64>)>,
    /// The `# Histogram Overflows:` line: (line number, values).
    overflows: Option<(usize, Vec<u64>)>,
    /// The `# Avg Latencies:` line's values (whole µs, truncated), where it has one per column.
    avgs: Option<Vec<u64>>,
    /// The `# Total:` line: (line number, per column the samples its rows count).
    totals: Option<(usize, Vec<u64>)>,
    /// The last row's latency, in µs.
    last_row: u64,
    /// The number of the last line.
    last_line: usize,
    /// Where the `# Histogram` header stands.
    header_line: Option<usize>,
    /// Lines before the histogram that are not cyclictest's (its stderr, captured with 2>&1):
    /// how many, and the first (line number, text).
    skipped: usize,
    first_skipped: Option<(usize, &'a str)>,
}

impl<'a> HistText<'a> {
    /// Read the lines of `text`: the rows (each with as many counts as the first), and the
    /// footer lines; other lines before the first row are counted as skipped.
    fn read(text: &'a str) -> Result<HistText<'a>, ImportError> {
        let mut rows: Vec<Vec<(u64, u64)>> = Vec::new();
        // (line number, values)
        let mut maxes: Option<(usize, Vec<u64>)> = None;
        let mut overflows: Option<(usize, Vec<u64>)> = None;
        let mut avgs: Option<Vec<u64>> = None;
        let mut totals: Option<(usize, Vec<u64>)> = None;
        let mut last_row = 0u64;
        let mut last_line = 0;
        let mut header_line = None;
        let mut skipped = 0usize;
        let mut first_skipped: Option<(usize, &str)> = None;
        for (n, line) in text.lines().enumerate() {
            let line_no = n + 1;
            let line = line.trim_end();
            last_line = line_no;
            if let Some(rest) = line.strip_prefix("# Max Latencies:") {
                let expected = "\"# Max Latencies:\" then one µs value per thread";
                maxes = Some((line_no, numbers(rest, line_no, expected)?));
                continue;
            }
            // The mean, used only where the rows cannot give it (samples beyond them); the
            // minimum, which the rows give. Each refused, as every footer line, where it holds
            // what is no count.
            if let Some(rest) = line.strip_prefix("# Avg Latencies:") {
                let expected = "\"# Avg Latencies:\" then one µs value per thread";
                avgs = Some(numbers(rest, line_no, expected)?);
                continue;
            }
            if let Some(rest) = line.strip_prefix("# Min Latencies:") {
                numbers(
                    rest,
                    line_no,
                    "\"# Min Latencies:\" then one µs value per thread",
                )?;
                continue;
            }
            if let Some(rest) = line.strip_prefix("# Total:") {
                let expected = "\"# Total:\" then one count per column";
                totals = Some((line_no, numbers(rest, line_no, expected)?));
                continue;
            }
            if let Some(rest) = line.strip_prefix("# Histogram Overflows:") {
                let expected = "\"# Histogram Overflows:\" then one count per thread";
                overflows = Some((line_no, numbers(rest, line_no, expected)?));
                continue;
            }
            if line == "# Histogram" {
                header_line.get_or_insert(line_no);
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if rows.is_empty() && !line.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                skipped += 1;
                first_skipped.get_or_insert((line_no, line));
                continue;
            }
            let fields = numbers(line, line_no, HIST_ROW)?;
            let Some((&us, counts)) = fields.split_first() else {
                continue;
            };
            if counts.is_empty() {
                return err(
                    line_no,
                    format!("a row without counts (expected {HIST_ROW})"),
                );
            }
            if rows.is_empty() {
                rows = vec![Vec::new(); counts.len()];
            } else if counts.len() != rows.len() {
                return err(
                    line_no,
                    format!(
                        "{} counts where earlier rows had {} (expected {HIST_ROW}; a row cut short?)",
                        counts.len(),
                        rows.len()
                    ),
                );
            }
            for (t, &c) in counts.iter().enumerate() {
                if c > 0 {
                    rows[t].push((mid_us(us), c));
                }
            }
            last_row = us;
        }
        Ok(HistText {
            rows,
            maxes,
            overflows,
            avgs,
            totals,
            last_row,
            last_line,
            header_line,
            skipped,
            first_skipped,
        })
    }

    /// The footer's maxima and overflow counts, one per thread, checked against the rows
    /// (the overflow line may be absent when no maximum lies beyond the last row); the
    /// `# Total:` line, where there is one, has one count per column too.
    fn footer(&mut self) -> Result<(Vec<u64>, Vec<u64>), ImportError> {
        let (threads_n, last_row, last_line) = (self.rows.len(), self.last_row, self.last_line);
        let Some((max_line, maxes)) = self.maxes.take() else {
            return err(
                last_line,
                "the file ends before the \"# Max Latencies:\" line (expected more histogram rows \
                 or cyclictest's footer after them; is it cut short?)",
            );
        };
        let per_thread = |line: usize, what: &str, values: &[u64]| {
            if values.len() == threads_n {
                Ok(())
            } else {
                err(
                    line,
                    format!(
                        "{} {what} values where the histogram has {threads_n} threads (expected one \
                         per thread; is the line cut short?)",
                        values.len()
                    ),
                )
            }
        };
        per_thread(max_line, "\"# Max Latencies:\"", &maxes)?;
        if let Some((line, totals)) = &self.totals {
            per_thread(*line, "\"# Total:\"", totals)?;
        }
        let overflows = match self.overflows.take() {
            Some((line, values)) => {
                per_thread(line, "\"# Histogram Overflows:\"", &values)?;
                values
            }
            // Older cyclictest versions may not write the line; it is only needed when samples lie
            // beyond the rows.
            None if maxes.iter().all(|&m| m <= last_row) => vec![0; threads_n],
            None => {
                return err(
                    last_line,
                    format!(
                        "the file ends before the \"# Histogram Overflows:\" line, which a maximum \
                         beyond the last row ({last_row} us) calls for (is it cut short?)"
                    ),
                );
            }
        };
        Ok((maxes, overflows))
    }
}

fn cyclictest_hist(text: &str) -> Result<RunResult, ImportError> {
    let mut h = HistText::read(text)?;
    if h.rows.is_empty() {
        return match h.header_line {
            Some(_) => err(
                h.last_line,
                format!(
                    "the file ends before the first histogram row (expected {HIST_ROW}; is it cut short?)"
                ),
            ),
            None => err(0, "no histogram rows (accepted: cyclictest -h N output)"),
        };
    }
    let (mut maxes, mut overflows) = h.footer()?;
    let HistText {
        mut rows,
        last_row,
        skipped,
        first_skipped,
        avgs,
        totals,
        ..
    } = h;
    // `cyclictest -H` adds a column (and footer value) summing every thread: not a thread.
    let histofall = is_histofall(&rows);
    if histofall {
        rows.pop();
        maxes.pop();
        overflows.pop();
    }
    // The mean cyclictest printed, of whole truncated microseconds (half a microsecond below
    // the middles the samples are recorded at), for a thread whose samples ran past the rows:
    // there the rows give only a lower bound.
    // `-H` prints no mean of its sum column (it does print its maximum and overflows).
    let avgs =
        avgs.filter(|a| a.len() == rows.len() || a.len() == rows.len() + usize::from(histofall));
    // cyclictest's `# Total:` counts what its rows hold (overflows apart): rows lost or changed
    // since are named, and imported as they are.
    let mut contradicted = Vec::new();
    if let Some((_, totals)) = &totals {
        for (i, (r, &total)) in rows.iter().zip(totals).enumerate() {
            let in_rows: u64 = r.iter().map(|x| x.1).sum();
            if in_rows != total {
                contradicted.push(format!(
                    "thread{i}: its \"# Total:\" counts {total} samples in its rows, and they \
                     hold {in_rows} (rows lost or changed?); the rows are imported as they are"
                ));
            }
        }
    }
    let threads: Vec<Thread> = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let in_rows: u64 = r.iter().map(|x| x.1).sum();
            Thread {
                total: in_rows + overflows[i],
                max_ns: Some(mid_us(maxes[i])),
                range_end_ns: (last_row + 1) * 1000,
                rows: r,
                mean_ns: avgs
                    .as_ref()
                    .filter(|_| overflows[i] > 0)
                    .map(|a| a[i] as f64 * 1000.0 + 500.0),
                ..Thread::default()
            }
        })
        .collect();
    let n = threads.len();
    let mut warnings = vec![
        "values are whole microseconds, truncated, recorded at the middle of their microsecond; \
         the text carries no command line, CPUs, interval or system"
            .to_string(),
    ];
    if histofall {
        warnings.push(
            "the last column, cyclictest -H's sum of every thread, is left out (it is not a \
             thread)"
                .into(),
        );
    }
    if let Some((line, first)) = first_skipped {
        warnings.push(format!(
            "skipped {skipped} line{} before the histogram that {} not cyclictest -h output; \
             the first, line {line}: {first:?}",
            if skipped == 1 { "" } else { "s" },
            if skipped == 1 { "is" } else { "are" },
        ));
    }
    if !contradicted.is_empty() {
        warnings.push(format!(
            "the file contradicts itself (edited or damaged?): {}",
            contradicted.join("; ")
        ));
    }
    let mut r = assemble(
        threads,
        config(0, n, None),
        SystemInfo::default(),
        0,
        warnings,
        Vec::new(),
    )?;
    // Without its command line, how cyclictest slept, whether -m locked memory and whether -a
    // pinned the threads are unknown.
    r.environment.not_recorded.extend([
        Unrecorded::MEMORY.into(),
        Unrecorded::METHOD.into(),
        Unrecorded::CPUS.into(),
    ]);
    // cyclictest prints the PM QoS request it held above its histogram.
    if let Some(us) = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("# /dev/cpu_dma_latency set to ")?
            .strip_suffix("us")?
            .parse::<u32>()
            .ok()
    }) {
        r.config.pm_qos_us = Some(us);
        r.environment.pm_qos_held_us = Some(us);
    } else {
        // Not in a --histfile file, nor after --laptop: which of them, the text does not say.
        r.environment.not_recorded.push(Unrecorded::PM_QOS.into());
    }
    Ok(r)
}

/// Whether the last of `rows` (per column: `(value, count)` where the count is not 0) is the sum
/// of the others on every row, as `cyclictest -H` writes it, with samples in it. cyclictest
/// writes that column only beside two threads or more: two like columns are two threads.
fn is_histofall(rows: &[Vec<(u64, u64)>]) -> bool {
    let Some((all, threads)) = rows.split_last() else {
        return false;
    };
    if threads.len() < 2 || all.is_empty() {
        return false;
    }
    let mut sums: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for (value, count) in threads.iter().flatten() {
        *sums.entry(*value).or_default() += count;
    }
    sums.len() == all.len() && all.iter().all(|(v, c)| sums.get(v) == Some(c))
}

/// The whitespace-separated numbers of `text` (up to a `#`); `expected` says what the line holds.
fn numbers(text: &str, line: usize, expected: &str) -> Result<Vec<u64>, ImportError> {
    text.split_whitespace()
        .take_while(|w| *w != "#")
        .map(|w| {
            whole_word(w).map_err(|why| {
                ImportError::at(
                    line,
                    format!("{w:?} is {why} (expected {expected}; {ACCEPTED})"),
                )
            })
        })
        .collect()
}

/// `25.00%:      21252 ns` (stress-ng's `latency percentiles:` lines) as an exact percentile.
fn printed_percentile(rest: &str) -> Option<ExactPercentile> {
    let (p, v) = rest.split_once("%:")?;
    let percentile: f64 = p.trim().parse().ok()?;
    let value_ns: u64 = v.trim().strip_suffix("ns")?.trim().parse().ok()?;
    (0.0..=100.0)
        .contains(&percentile)
        .then_some(ExactPercentile {
            percentile,
            value_ns,
        })
}

/// The summary lines of a stress-ng cyclic log: the policy, delay and sample count, and the
/// mean, minimum, maximum and std.dev. it printed (the mean and std.dev. per instance, kept
/// where there is one).
#[derive(Default)]
struct Summary {
    policy: Option<Policy>,
    delay_ns: Option<u64>,
    samples: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
    means: Vec<Option<f64>>,
    stdevs: Vec<Option<f64>>,
}

impl Summary {
    /// Read `rest` (a line after `cyclic:`) if it is a summary line; a count or latency in it
    /// that is negative or too large is refused, with what the line is.
    fn read(&mut self, rest: &str) -> Result<bool, String> {
        // Each run of digits, in order (positions found by `find` lie on characters: digits
        // are ASCII).
        let numbers = |t: &str| -> Result<Vec<u64>, String> {
            let mut out = Vec::new();
            let mut rest = t;
            while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
                let len = rest[start..]
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len() - start);
                let word = &rest[start..start + len];
                if rest[..start].ends_with('-') {
                    return Err(format!("-{word} is negative"));
                }
                // Digits only: a word that does not parse is too large.
                out.push(
                    whole_word(word).map_err(|_| format!("{word} is more than latlab takes"))?,
                );
                rest = &rest[start + len..];
            }
            Ok(out)
        };
        if let Some(s) = rest.strip_prefix("sched ") {
            // "SCHED_RR: 100000 ns delay, 10000 samples"
            let (p, tail) = s.split_once(':').unwrap_or((s, ""));
            self.policy = Some(match p {
                "SCHED_RR" => Policy::Rr,
                "SCHED_FIFO" => Policy::Fifo,
                "SCHED_DEADLINE" => Policy::Deadline,
                _ => Policy::Other,
            });
            let nums = numbers(tail)?;
            self.delay_ns = nums.first().copied();
            self.samples = nums.get(1).copied();
        } else if let Some(s) = rest.strip_prefix("mean:") {
            // "14714.08 ns, mode: 14894 ns"
            let mean = s.split_whitespace().next().and_then(|m| m.parse().ok());
            self.means.push(mean);
        } else if let Some(s) = rest.strip_prefix("min:") {
            // "10575 ns, max: 251220 ns, std.dev. 13418.60"
            let (bounds, stdev) = s.split_once("std.dev.").unwrap_or((s, ""));
            let nums = numbers(bounds)?;
            self.min = nums.first().copied();
            self.max = nums.get(1).copied();
            self.stdevs.push(stdev.trim().parse().ok());
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// The one instance's printed figure, where there is one.
    fn single(v: &[Option<f64>]) -> Option<f64> {
        match v {
            [one] => *one,
            _ => None,
        }
    }
}

/// A stress-ng cyclic log's latency distribution, read line by line.
#[derive(Default)]
struct Distribution {
    /// The buckets' width, ns.
    width: Option<u64>,
    /// The buckets with samples: (lowest ns, count).
    rows: Vec<(u64, u64)>,
    in_dist: bool,
    /// Buckets printed (or said to be zero), when fewer than there are.
    truncated_at: Option<u64>,
    /// The buckets the distribution announces, the rows read of them (and the line of the
    /// last), and whether it said the rest are zeros: a log cut short has fewer rows.
    announced: Option<u64>,
    rows_read: u64,
    /// The last line of the distribution read (its header, its announcement or a row).
    last_line: usize,
    zeros_after: bool,
}

impl Distribution {
    /// Read `rest` (a line after `cyclic:`, number `line_no`) if it belongs to the
    /// distribution; false where it does not.
    fn read(&mut self, rest: &str, line_no: usize) -> Result<bool, ImportError> {
        if let Some(s) = rest.strip_prefix("latency distribution (") {
            self.width = s
                .split_whitespace()
                .next()
                .and_then(|w| w.parse::<u64>().ok());
            self.in_dist = true;
            self.last_line = line_no;
            return Ok(true);
        }
        if !self.in_dist {
            return Ok(false);
        }
        let f: Vec<&str> = rest.split_whitespace().collect();
        match f.as_slice() {
            [a, b] if a.parse::<u64>().is_ok() => {
                let (v, c) = (
                    a.parse::<u64>().unwrap_or(0),
                    whole_word(b).map_err(|why| {
                        ImportError::at(
                            line_no,
                            format!(
                                "{b:?} is {why} (expected a distribution row: the bucket's \
                                 lowest ns, then its count; {ACCEPTED})"
                            ),
                        )
                    })?,
                );
                if c > 0 {
                    self.rows.push((v, c));
                }
                self.rows_read += 1;
            }
            _ if rest.contains("(all zeros hereafter)") => {
                self.zeros_after = true;
                self.in_dist = false;
            }
            _ if rest.starts_with("(for the first") => {
                // "(for the first 26 buckets of 400)": the rest are not printed.
                let n: Vec<u64> = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|x| x.parse().ok())
                    .collect();
                self.truncated_at = match n.as_slice() {
                    [first, of] if first < of => Some(*first),
                    _ => None,
                };
                self.announced = n.first().copied();
            }
            _ if rest.starts_with("latency (ns)") => {}
            _ => {
                self.in_dist = false;
                return Ok(false);
            }
        }
        self.last_line = line_no;
        Ok(true)
    }

    /// Refused where the log ends before the buckets the distribution announces, or before its
    /// first row.
    fn whole(&self) -> Result<(), ImportError> {
        match self.announced {
            Some(n) if self.rows_read < n && !self.zeros_after => err(
                self.last_line + 1,
                format!(
                    "the distribution ends after {} of the {n} buckets it announces (expected \
                     its remaining rows; is the log cut short?)",
                    self.rows_read
                ),
            ),
            _ if self.width.is_some() && self.rows_read == 0 && !self.zeros_after => err(
                self.last_line + 1,
                "the distribution ends before its first row (expected rows of a bucket's \
                 lowest ns and its count; is the log cut short?)",
            ),
            _ => Ok(()),
        }
    }
}

fn stress_ng(text: &str) -> Result<RunResult, ImportError> {
    let mut summary = Summary::default();
    let mut dist = Distribution::default();
    let mut printed = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some((_, rest)) = line.split_once("cyclic:") else {
            continue;
        };
        let rest = rest.trim();
        let line_no = n + 1;
        // A stressor that measured nothing (SCHED_DEADLINE refused, …) says so in its log.
        if rest.contains("no latency information available") {
            return err(
                line_no,
                format!(
                    "stress-ng measured no latency: {rest:?} (accepted: a log of a --cyclic run \
                     that printed its latency distribution)"
                ),
            );
        }
        let summary_line = summary.read(rest).map_err(|why| {
            ImportError::at(
                line_no,
                format!(
                    "{why} (expected the summary line \"cyclic: sched POLICY: N ns delay, M \
                     samples\" or \"min: N ns, max: N ns\"; {ACCEPTED})"
                ),
            )
        })?;
        if summary_line || dist.read(rest, line_no)? {
        } else if let Some(p) = printed_percentile(rest) {
            printed.push(p);
        }
    }
    dist.whole()?;
    let Distribution {
        width,
        rows,
        truncated_at,
        ..
    } = dist;
    let Summary {
        policy,
        delay_ns,
        samples,
        min,
        max,
        means,
        stdevs,
    } = summary;
    let Some(samples) = samples else {
        return err(
            0,
            "no \"cyclic: sched ...: N ns delay, M samples\" line (run stress-ng with -v or --log-file)",
        );
    };
    let truncated = truncated_at.is_some();
    // Every printed bucket may be empty when the first ones lie below every sample
    // (`--cyclic-dist 1`): then every sample lies beyond them.
    if width.is_none() || (rows.is_empty() && !truncated) {
        return err(
            0,
            "no latency distribution (run stress-ng --cyclic with --cyclic-dist N)",
        );
    }
    let width = width.unwrap_or(1);
    // Each bucket's count at its middle, kept within the exact min and max, which are recorded
    // as they are.
    let lo = min.unwrap_or(0);
    let hi = max.unwrap_or(u64::MAX);
    let mut buckets: Vec<(u64, u64)> = rows
        .iter()
        .map(|&(low, n)| ((low.saturating_add(width / 2)).clamp(lo, hi), n))
        .collect();
    let maxes = if truncated { vec![min] } else { vec![min, max] };
    for exact in maxes.into_iter().flatten() {
        if let Some(b) = buckets
            .iter_mut()
            .find(|b| rows_bucket(b.0, width) == rows_bucket(exact, width) && b.1 > 0)
        {
            b.1 -= 1;
            buckets.push((exact, 1));
        }
    }
    let printed_count: u64 = rows.iter().map(|r| r.1).sum();
    // Samples beyond the printed buckets count at the end of the range (max exact).
    let total = if truncated {
        printed_count.max(samples)
    } else {
        printed_count
    };
    // Every bucket printed, they count every sample kept: lines lost or changed since are
    // named, and the buckets imported as they are.
    let contradicted = (!truncated && printed_count != samples).then(|| {
        format!(
            "the file contradicts itself (edited or damaged?): its summary line counts {samples} \
             samples, and its distribution {printed_count} (lines lost or changed?); the \
             distribution is imported as it is"
        )
    });
    let range_end_ns = match truncated_at {
        Some(n) => n.saturating_mul(width),
        None => rows.last().map_or(0, |r| r.0.saturating_add(width)),
    };
    let thread = Thread {
        rows: buckets,
        total,
        max_ns: max,
        min_ns: min,
        range_end_ns,
        printed,
        mean_ns: Summary::single(&means),
        stdev_ns: Summary::single(&stdevs),
        ..Thread::default()
    };
    let mut cfg = config(delay_ns.unwrap_or(0), 1, None);
    cfg.policy = policy.unwrap_or(Policy::Other);
    let mut warnings = vec![format!(
        "values are known to {width} ns buckets (recorded at each bucket's middle; min and max \
         exact); stress-ng keeps at most --cyclic-samples samples of the run"
    )];
    warnings.extend(contradicted);
    let method_known = stress_ng_method(text, &mut cfg, &mut warnings);
    let mut r = assemble(
        vec![thread],
        cfg,
        SystemInfo::default(),
        0,
        warnings,
        Vec::new(),
    )?;
    // The length it ran, where it says it (the asked one stands in otherwise).
    if let Some(ns) = text.lines().find_map(stress_ng_completed_in) {
        r.elapsed_ns = ns;
        // Ended well before the length asked (by its --cyclic-ops, a failure): how, the log
        // does not say (it read "duration reached").
        if r.config.duration_ns.is_some_and(|d| ns < d / 100 * 95) {
            r.stop = StopReason::Loops;
        }
    }
    // Its log does not say whether memory was locked.
    r.environment.not_recorded.push(Unrecorded::MEMORY.into());
    if !method_known {
        r.environment.not_recorded.push(Unrecorded::METHOD.into());
    }
    Ok(r)
}

/// A percentile for "percentiles above it": rounded down, in three decimals, or as many more
/// as tell it from 100 (23 samples of 20 million beyond the range: p99.99988, where three
/// decimals rounded read p100.000).
fn percentile_below(q: f64) -> String {
    let gap = 100.0 - q;
    let d = if gap > 0.0 {
        ((-(gap / 10.0).log10()).ceil() as usize).clamp(3, 9)
    } else {
        3
    };
    let f = 10f64.powi(d as i32);
    format!("{:.d$}", (q * f).floor() / f)
}

/// The run length of stress-ng's `setting to a … run per stressor` line (printed when `-t`
/// sets it), in ns: `60 second`, `86400 second (1 day, 0.00 secs)`, `10 secs` or `1 min, 0 secs`
/// by release. Its `defaulting to a` line is not read: that is no length asked, and such a run
/// ends when it is stopped.
fn stress_ng_run_length(line: &str) -> Option<u64> {
    let (_, rest) = line.split_once("] setting to a ")?;
    let (length, _) = rest.split_once(" run per stressor")?;
    let length = length.split_once(" (").map_or(length, |(l, _)| l);
    let mut ns = 0f64;
    for part in length.split(", ") {
        let (n, unit) = part.trim().split_once(' ')?;
        let n: f64 = n.parse().ok()?;
        let unit_s = match unit.trim_end_matches('s') {
            "second" | "sec" => 1.0,
            "min" | "minute" => 60.0,
            "hour" => 3600.0,
            "day" => 86_400.0,
            _ => return None,
        };
        ns += n * unit_s * 1e9;
    }
    (ns.is_finite() && ns > 0.0).then_some(ns.round() as u64)
}

/// The length of stress-ng's run from its last line, `successful run completed in 5.01s`
/// (`… in 60.02s (1 min, 0.02 secs)` past a minute; `unsuccessful` after a failure), in ns.
fn stress_ng_completed_in(line: &str) -> Option<u64> {
    let (_, rest) = line
        .split_once("] successful run completed in ")
        .or_else(|| line.split_once("] unsuccessful run completed in "))?;
    let secs: f64 = rest.split_once('s')?.0.parse().ok()?;
    (secs.is_finite() && secs > 0.0).then(|| (secs * 1e9).round() as u64)
}

/// What a stress-ng log says of how it measured: `--cyclic-prio` on the command line it was
/// invoked with, and the method it used (`using method 'poll'`), as latlab's nearest equal; a
/// method latlab has no equal of is said, and the method is not recorded as another. Whether
/// the method is known.
fn stress_ng_method(text: &str, cfg: &mut MeasureConfig, warnings: &mut Vec<String>) -> bool {
    let invoked = text
        .lines()
        .find_map(|l| l.split_once("invoked with '").map(|(_, rest)| rest))
        .unwrap_or("");
    let words: Vec<&str> = invoked
        .split_once('\'')
        .map_or(invoked, |(line, _)| line)
        .split_whitespace()
        .collect();
    // The last one given, as getopt leaves it.
    let value = |names: &[&str]| {
        words.iter().enumerate().rev().find_map(|(i, w)| {
            let (name, inline) = w.split_once('=').map_or((*w, None), |(n, v)| (n, Some(v)));
            names
                .contains(&name)
                .then(|| inline.or_else(|| words.get(i + 1).copied()))
                .flatten()
        })
    };
    // The policy's highest priority (99), or --cyclic-prio where it asks a lower one.
    if cfg.policy.is_realtime() {
        let asked = value(&["--cyclic-prio"]).and_then(|v| v.parse::<u32>().ok());
        cfg.priority = asked.map_or(99, |p| p.min(99));
    }
    if let Some(t) = value(&["-t", "--timeout"]) {
        cfg.duration_ns = latlab_model::units::parse_duration(t, Some("s")).ok();
    }
    // The run length it says at its start (info level: in a log without -v too).
    if cfg.duration_ns.is_none() {
        cfg.duration_ns = text.lines().find_map(stress_ng_run_length);
    }
    // It keeps the first --cyclic-samples samples and only counts the rest.
    let needed = text.lines().find_map(|l| {
        let rest = l.split_once("--cyclic-samples needed to be ")?.1;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    });
    if let Some(n) = needed {
        warnings.push(format!(
            "stress-ng kept only the first --cyclic-samples samples of the {n} the run took: \
             every statistic describes those, not the whole run"
        ));
    }
    let method = text.lines().find_map(|l| {
        let rest = l.split_once("using method '")?.1;
        rest.split_once('\'').map(|(m, _)| m)
    });
    match method {
        // clock_nanosleep(CLOCK_REALTIME) relative to the call.
        Some("clock_ns") => {
            (cfg.method, cfg.relative, cfg.clock) = (Method::ClockNanosleep, true, Clock::Realtime);
        }
        Some("posix_ns") => cfg.method = Method::PosixTimer,
        Some("pselect") => (cfg.method, cfg.relative) = (Method::Select, true),
        Some("usleep") => (cfg.method, cfg.relative) = (Method::Nanosleep, true),
        Some(other) => {
            warnings.push(format!(
                "method: stress-ng's {other:?}, which latlab has no equal of (recorded as not \
                 recorded)"
            ));
            return false;
        }
        None => {
            warnings.push("method: not in the log (stress-ng says it with -v)".into());
            return false;
        }
    }
    true
}

/// `text` as JSON; a file that is not (cut short, edited) says where and what was expected.
fn json_of(text: &str, what: &str) -> Result<Value, ImportError> {
    serde_json::from_str(text).map_err(|e| ImportError {
        line: e.line(),
        message: format!(
            "invalid JSON: {e} (accepted: a whole {what} file{})",
            if e.is_eof() {
                "; this one is cut short"
            } else {
                ""
            }
        ),
    })
}

fn rows_bucket(v: u64, width: u64) -> u64 {
    v / width.max(1)
}

fn jitterdebugger(text: &str) -> Result<RunResult, ImportError> {
    let v = json_of(text, "jitterdebugger's results.json")?;
    let Some(cpus) = v.get("cpu").and_then(Value::as_object) else {
        return err(0, "no \"cpu\" object");
    };
    let res = v
        .get("sysinfo")
        .and_then(|s| s.get("resolution_in_ns"))
        .and_then(Value::as_u64)
        .unwrap_or(1000);
    let max = latlab_model::units::MAX_CPU;
    let mut keys: Vec<(u32, &Value)> = cpus
        .iter()
        .map(|(k, c)| match k.parse::<u32>() {
            Ok(cpu) if cpu <= max => Ok((cpu, c)),
            _ => err(
                0,
                format!("\"cpu\" key {k:?} is not a CPU number (accepted: 0 to {max})"),
            ),
        })
        .collect::<Result<_, _>>()?;
    keys.sort_by_key(|k| k.0);
    // Every release keeps one second's worth of its resolution's units, in thousandths: 1,000
    // slots of 1 µs, or 10^6 of 1 ns, 1 ms either way; a sample past them is only counted.
    let range_end_ns = 1_000_000_000 / res.max(1) / 1000 * res;
    // Its values are whole units, truncated: each at its middle (1 ns units are exact).
    let middle = res / 2;
    let mut threads = Vec::new();
    for (cpu, c) in keys {
        let keyed = histogram_rows(
            c.get("histogram").unwrap_or(&Value::Null),
            &format!("cpu {cpu}"),
        )?;
        let rows = keyed
            .into_iter()
            .map(|(k, n)| (k.saturating_mul(res).saturating_add(middle), n))
            .collect();
        let what = format!("cpu {cpu}");
        let scale = |k: &str| -> Result<Option<u64>, ImportError> {
            Ok(whole_of(c, k, &what)?.map(|x| x.saturating_mul(res).saturating_add(middle)))
        };
        let total = whole_of(c, "count", &what)?.unwrap_or(0);
        threads.push(Thread {
            cpu: Some(cpu),
            total,
            max_ns: scale("max")?,
            min_ns: scale("min")?,
            range_end_ns,
            rows,
            // The mean of every sample, those past the histogram too (its total / its count).
            mean_ns: c
                .get("avg")
                .and_then(Value::as_f64)
                .filter(|_| total > 0)
                .map(|avg| avg * res as f64 + middle as f64),
            ..Thread::default()
        });
    }
    let cpus_list: Vec<u32> = threads.iter().filter_map(|t| t.cpu).collect();
    let mut cfg = config(0, threads.len(), Some(cpus_list));
    // Its threads sleep for the interval relative to the call (clock_nanosleep(CLOCK_MONOTONIC,
    // 0, ...)), and measure from the clock read before it.
    cfg.relative = true;
    let sys = sysinfo_of(v.get("sysinfo").unwrap_or(&Value::Null));
    let warnings = vec![format!(
        "values at {res} ns resolution; results.json carries no interval, policy or start time, \
         and numbers its threads, not their CPUs: thread N ran on the Nth CPU it was given \
         (-a, or every online CPU)"
    )];
    let mut r = assemble(threads, cfg, sys, 0, warnings, Vec::new())?;
    // results.json does not say whether memory was locked.
    r.environment.not_recorded.push(Unrecorded::MEMORY.into());
    // jitterdebugger writes 0 to /dev/cpu_dma_latency as it starts and keeps it open, as
    // cyclictest does without --laptop (it has no option to leave it).
    r.config.pm_qos_us = Some(0);
    r.environment.pm_qos_held_us = Some(0);
    r.environment.warnings.push(
        "PM QoS: jitterdebugger holds /dev/cpu_dma_latency at 0 µs while it runs; results.json \
         does not record whether the device could be written"
            .into(),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn stress_ng_s_run_length_is_read_in_every_release_s_words() {
        let at = |s: &str| format!("stress-ng: info:  [1234] setting to a {s} run per stressor");
        for (said, secs) in [
            ("60 second", 60),
            ("86400 second (1 day, 0.00 secs)", 86_400),
            ("10 secs", 10),
            ("1 secs", 1),
            ("1 min, 0 secs", 60),
            ("1 hour, 2 mins, 3 secs", 3723),
        ] {
            assert_eq!(
                super::stress_ng_run_length(&at(said)),
                Some(secs * 1_000_000_000),
                "{said}"
            );
        }
        assert_eq!(super::stress_ng_run_length(&at("a while")), None);
        let default = "stress-ng: info:  [1] defaulting to a 1 day, 0 secs run per stressor";
        assert_eq!(super::stress_ng_run_length(default), None);
    }

    #[test]
    fn a_percentile_below_100_is_said_below_100() {
        assert_eq!(super::percentile_below(99.9), "99.900");
        assert_eq!(super::percentile_below(99.95), "99.950");
        assert_eq!(super::percentile_below(99.999_89), "99.99989");
        assert_eq!(
            super::percentile_below(100.0 * (1.0 - 23.0 / 20_706_772.0)),
            "99.99988"
        );
        assert_eq!(super::percentile_below(0.0), "0.000");
    }

    #[test]
    fn stress_ng_s_completed_line_gives_the_length_it_ran() {
        let at = |s: &str| format!("stress-ng: info:  [31354] {s}");
        for (said, ns) in [
            ("successful run completed in 5.01s", Some(5_010_000_000)),
            (
                "successful run completed in 60.02s (1 min, 0.02 secs)",
                Some(60_020_000_000),
            ),
            ("unsuccessful run completed in 0.25s", Some(250_000_000)),
            ("successful run completed in soon", None),
            ("setting to a 5 second run per stressor", None),
        ] {
            assert_eq!(super::stress_ng_completed_in(&at(said)), ns, "{said}");
        }
    }

    #[test]
    fn the_histogram_range_is_read_from_every_spelling_of_h() {
        for line in [
            "cyclictest -p 80 -h 400 -q",
            "cyclictest -p 80 -h400 -q",
            "cyclictest --histogram 400",
            "cyclictest --histogram=400 -q",
            "cyclictest -mh400 -q",
            "cyclictest -m -H 400",
            "cyclictest -h 100 -q -h400",
        ] {
            assert_eq!(super::histogram_range_us(line), Some(400), "{line}");
        }
        assert_eq!(super::histogram_range_us("cyclictest -p 80 -q"), None);
    }
}
