//! cyclictest's `--json` file.
//!
//! The text follows rt-tests 2.4 byte for byte where latlab has the data: the envelope is
//! `rt_write_json()` (`src/lib/rt-utils.c`), the `num_threads`/`resolution_in_ns`/`thread` part is
//! cyclictest's `write_stats()` (`src/cyclictest/cyclictest.c`):
//!
//! ```text
//! {
//!   "file_version": 1,
//!   "cmdline:": "…",                       (the colon is part of the key in rt-tests)
//!   "rt_test_version:": "2.40",            ("%1.2f" of the release number)
//!   "start_time": "Sun, 22 Nov 2026 15:45:04 +0000",   (strftime "%a, %d %b %Y %T %z")
//!   "end_time": "…",
//!   "return_code": 0,
//!   "sysinfo": {
//!     "sysname": "Linux", "nodename": …, "release": …, "version": …, "machine": …,
//!     "realtime": 0                        (1 when /sys/kernel/realtime reads 1)
//!   },
//!   "num_threads": 2,
//!   "resolution_in_ns": 0,                 (1 with -N; latlab writes µs, so 0)
//!   "thread": {
//!     "0": {
//!       "histogram": {                     (non-zero buckets below -h N only, string keys)
//!         "23": 2,
//!         "24": 5
//!       },
//!       "cycles": 9986,                    (all samples, overflows included)
//!       "min": 12, "max": 10019,           ("%ld" µs)
//!       "avg": 35.20,                      ("%.2f" µs)
//!       "cpu": 0,                          (-1 for an unpinned thread)
//!       "node": 0
//!     }
//!   }
//! }
//! ```
//! (each key on its own line in the file; a thread without histogram entries gets
//! `"histogram": {      },` as cyclictest prints it).
//!
//! Checked against `rt_write_json()` in `woodsts/rt-tests` `src/lib/rt-utils.c` (unchanged since
//! 2.0) and `write_stats()` in a 2.1–2.6 tree (`Allen-zhi/rt-tests`); later releases print the
//! histogram through `hist_print_json()` with the same text and omit it without `-h`.
//!
//! Choices where latlab's data differs from cyclictest's:
//! - `cmdline:` describes the latlab configuration as a `latlab measure` command line (the
//!   measuring options that were in effect), so a reader sees the file did not come from
//!   cyclictest. Strings are JSON-escaped (cyclictest prints them raw with `%s`).
//! - `rt_test_version:` is `"2.40"`, the rt-tests release whose format this file follows, not
//!   latlab's version: programs that look at it compare it as a number, and `cmdline:` already names
//!   latlab. [`RT_TESTS_VERSION`] holds it.
//! - Times are in UTC (`+0000`); cyclictest uses the local zone. `start_time` is the run's start,
//!   `end_time` start plus the measured length (cyclictest stamps its process start and the moment
//!   it writes the file).
//! - `node` is 0: latlab does not place threads per NUMA node (cyclictest writes the node of the
//!   thread's CPU when libnuma is usable, else -1).
//! - A thread without samples gets `"min": 1000000` (cyclictest's start value) and `"avg": 0.00`
//!   (cyclictest divides by zero and prints `nan`, which is not JSON).
//! - `avg` is the exact mean in µs rounded to hundredths; cyclictest averages per-sample truncated
//!   µs values.

use std::fmt::Write;

use latlab_model::{
    Clock, RunResult, known_time, rfc2822_utc, units::CpuList, units::format_duration,
};

use crate::cyclictest_hist::HIST_MAX_US;
use crate::us::{export_range, max_us, mean_centi_us, min_us, us_buckets};

/// The `rt_test_version:` written: rt-tests 2.4 as cyclictest prints it (`"%1.2f"`).
pub const RT_TESTS_VERSION: &str = "2.40";

/// cyclictest's `--json` file for `result`, as from a run with the largest histogram
/// (`-h 1000000`): every sample below 1 s is in `histogram`, and `cycles` minus the histogram's sum
/// is the number of samples of 1 s or more.
pub fn cyclictest_json(result: &RunResult) -> String {
    cyclictest_json_with_range(result, HIST_MAX_US)
}

/// cyclictest's `--json` file for `result`, as from a run with `-h range_us`: `histogram` holds the
/// non-zero 1 µs buckets below `range_us` (lowered to [`HIST_MAX_US`]), so it agrees with
/// [`histfile`](crate::histfile) for the same range; `cycles` counts every sample.
pub fn cyclictest_json_with_range(result: &RunResult, range_us: u32) -> String {
    let range = export_range(result, range_us.min(HIST_MAX_US));
    let sys = &result.system;
    let realtime = u8::from(sys.kernel_built_with("PREEMPT_RT"));
    // Empty where the run does not know them (an import from a format without a start time
    // or length), rather than a date in 1970.
    let start = known_time(result.start_unix_ns);
    let start_time = start.map_or_else(String::new, |ns| rfc2822_utc(ns / 1_000_000_000));
    let end_time = start
        .zip(known_time(result.elapsed_ns))
        .map_or_else(String::new, |(s, e)| {
            rfc2822_utc(s.saturating_add(e) / 1_000_000_000)
        });

    let mut f = String::with_capacity(1024 + 64 * result.threads.len());
    f.push_str("{\n");
    f.push_str("  \"file_version\": 1,\n");
    let _ = writeln!(f, "  \"cmdline:\": {},", json_str(&cmdline(result, range)));
    let _ = writeln!(f, "  \"rt_test_version:\": \"{RT_TESTS_VERSION}\",");
    let _ = writeln!(f, "  \"start_time\": \"{start_time}\",");
    let _ = writeln!(f, "  \"end_time\": \"{end_time}\",");
    f.push_str("  \"return_code\": 0,\n");
    f.push_str("  \"sysinfo\": {\n");
    f.push_str("    \"sysname\": \"Linux\",\n");
    let _ = writeln!(f, "    \"nodename\": {},", json_str(&sys.hostname));
    let _ = writeln!(f, "    \"release\": {},", json_str(&sys.kernel_release));
    let _ = writeln!(f, "    \"version\": {},", json_str(&sys.kernel_version));
    let _ = writeln!(f, "    \"machine\": {},", json_str(&sys.machine));
    let _ = writeln!(f, "    \"realtime\": {realtime}");
    f.push_str("  },\n");

    // write_stats()
    let n = result.threads.len();
    let _ = writeln!(f, "  \"num_threads\": {n},");
    f.push_str("  \"resolution_in_ns\": 0,\n");
    f.push_str("  \"thread\": {\n");
    for (i, t) in result.threads.iter().enumerate() {
        let h = &t.histogram;
        let _ = writeln!(f, "    \"{i}\": {{");
        f.push_str("      \"histogram\": {");
        let buckets = us_buckets(h, range);
        for (k, (us, count)) in buckets.in_range.iter().enumerate() {
            f.push_str(if k == 0 { "\n" } else { ",\n" });
            let _ = write!(f, "        \"{us}\": {count}");
        }
        if !buckets.in_range.is_empty() {
            f.push('\n');
        }
        f.push_str("      },\n");
        let _ = writeln!(f, "      \"cycles\": {},", h.count());
        let _ = writeln!(f, "      \"min\": {},", min_us(h));
        let _ = writeln!(f, "      \"max\": {},", max_us(h));
        let centi = mean_centi_us(t);
        let _ = writeln!(f, "      \"avg\": {}.{:02},", centi / 100, centi % 100);
        let cpu = t.cpu.map_or(-1, i64::from);
        let _ = writeln!(f, "      \"cpu\": {cpu},");
        f.push_str("      \"node\": 0\n");
        let _ = writeln!(f, "    }}{}", if i + 1 == n { "" } else { "," });
    }
    f.push_str("  }\n");
    f.push_str("}\n");
    f
}

/// A JSON string literal (quotes and escapes included).
fn json_str(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The measuring configuration as a `latlab measure` command line that measures the same way
/// again (not necessarily the literal argument list the user typed). What an import did not
/// know (an interval, priority or window of 0; a method, CPUs, memory locking or PM QoS its
/// format does not record) is left out, never written as a value it did not have.
fn cmdline(result: &RunResult, range_us: u32) -> String {
    use latlab_model::Unrecorded;
    let c = &result.config;
    let known = |what: &str| result.records(what);
    let mut s = String::from("latlab measure");
    if known(Unrecorded::METHOD) {
        let _ = write!(s, " --method {}", c.method.name());
        if c.relative && !c.method.always_relative() {
            s.push_str(" --relative");
        }
    }
    if c.interval_ns > 0 {
        let _ = write!(s, " --interval {}", format_duration(c.interval_ns));
    }
    if let Some(cpus) = &c.cpus {
        let list = CpuList::from_cpus(cpus.clone());
        let _ = write!(s, " --cpus {list}");
    } else if known(Unrecorded::CPUS) {
        let _ = write!(s, " --threads {}", c.threads);
    }
    // A real-time policy of priority 0 is one an import did not know.
    if !(c.policy.is_realtime() && c.priority == 0) {
        let _ = write!(s, " --policy {}", c.policy.name());
        if c.policy.is_realtime() {
            let _ = write!(s, " --priority {}", c.priority);
        }
    }
    if let Some(d) = &c.deadline {
        let _ = write!(
            s,
            " --dl-runtime {} --dl-deadline {} --dl-period {}",
            format_duration(d.runtime_ns),
            format_duration(d.deadline_ns),
            format_duration(d.period_ns)
        );
    }
    if matches!(c.clock, Clock::Realtime) {
        s.push_str(" --clock realtime");
    }
    if let Some(d) = c.duration_ns {
        let _ = write!(s, " --duration {}", format_duration(d));
    }
    if let Some(l) = c.loops {
        let _ = write!(s, " --loops {l}");
    }
    if let Some(q) = c.pm_qos_us.filter(|_| known(Unrecorded::PM_QOS)) {
        let _ = write!(s, " --pm-qos {q}");
    }
    if !c.mlock && known(Unrecorded::MEMORY) {
        s.push_str(" --no-mlock");
    }
    if c.timer_slack_ns > 0 {
        let _ = write!(s, " --timer-slack {}", format_duration(c.timer_slack_ns));
    }
    if let Some(w) = c.waker_cpu.filter(|_| c.method.is_wakeup()) {
        let _ = write!(s, " --waker-cpu {w}");
    }
    if c.stagger {
        s.push_str(" --stagger");
    }
    if c.window_ns > 0 {
        let _ = write!(s, " --window {}", format_duration(c.window_ns));
    }
    if let Some(b) = c.break_threshold_ns {
        let _ = write!(s, " --break {}", format_duration(b));
    }
    // A histogram that ends before the longest one (an import's range): where it ends, so a
    // reader does not take its last row for its end.
    if range_us < HIST_MAX_US {
        let _ = write!(s, " --histfile-range {range_us}");
    }
    if let Some(t) = c.spike_threshold_ns {
        let _ = write!(
            s,
            " --spike {} --spike-limit {}",
            format_duration(t),
            c.spike_limit
        );
    }
    s.push_str(&beside_options(result));
    // What was left out for not being known is named, so that an import of this file does
    // not take latlab's defaults for it.
    let mut unknown: Vec<&str> = Vec::new();
    if c.interval_ns == 0 {
        unknown.push(Unrecorded::INTERVAL);
    }
    if c.policy.is_realtime() && c.priority == 0 {
        unknown.push(Unrecorded::PRIORITY);
    }
    for what in [
        Unrecorded::METHOD,
        Unrecorded::CPUS,
        Unrecorded::MEMORY,
        Unrecorded::PM_QOS,
    ] {
        if !known(what) {
            unknown.push(what);
        }
    }
    if !unknown.is_empty() {
        let _ = write!(s, " {}{}", Unrecorded::MARK, unknown.join(", "));
    }
    s
}

/// What ran beside the measurement, as its options: the loads (`--load` each, or the
/// `--load-schedule` of its phases), the CPUs they were kept to and the traced events. A run
/// measured under load must not read as an idle one.
fn beside_options(result: &RunResult) -> String {
    let mut s = String::new();
    let loads = &result.loads;
    if loads.phases.is_empty() {
        for l in &loads.reports {
            let _ = write!(s, " --load {}", l.spec);
        }
    } else {
        let phases: Vec<String> = loads
            .phases
            .iter()
            .map(|p| {
                format!(
                    "{} {}",
                    p.spec,
                    format_duration(p.end_ns.saturating_sub(p.start_ns))
                )
            })
            .collect();
        let _ = write!(s, " --load-schedule \"{}\"", phases.join(", "));
    }
    if let Some(cpus) = loads.reports.iter().find_map(|l| l.cpus.clone()) {
        let list = CpuList::from_cpus(cpus.into_iter().map(|c| c as u32).collect());
        let _ = write!(s, " --load-cpus {list}");
    }
    if let Some(t) = &result.trace {
        let _ = write!(s, " --trace {}", t.events.join(","));
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn start_and_end_are_empty_where_the_run_does_not_know_them() {
        let mut r = latlab_testkit::run::one_cpu("x", (0, 0));
        let time = |r: &RunResult, key: &str| {
            let v: serde_json::Value = serde_json::from_str(&cyclictest_json(r)).unwrap();
            v[key].as_str().unwrap().to_string()
        };
        assert_eq!(time(&r, "start_time"), "");
        assert_eq!(time(&r, "end_time"), "");
        r.start_unix_ns = 1_795_362_304_000_000_000;
        assert_eq!(time(&r, "start_time"), "Sun, 22 Nov 2026 15:45:04 +0000");
        assert_eq!(time(&r, "end_time"), "", "the length is unknown");
        r.elapsed_ns = 2_000_000_000;
        assert_eq!(time(&r, "end_time"), "Sun, 22 Nov 2026 15:45:06 +0000");
    }

    #[test]
    fn realtime_is_a_kernel_built_with_preempt_rt_by_its_version_or_configuration() {
        use latlab_model::system::{Field, KernelConfig};
        let mut r = latlab_testkit::run::one_cpu("x", (1, 1));
        let realtime = |r: &RunResult| {
            let v: serde_json::Value = serde_json::from_str(&cyclictest_json(r)).unwrap();
            v["sysinfo"]["realtime"].as_u64().unwrap()
        };
        r.system.kernel_version = "#1 SMP PREEMPT_DYNAMIC".into();
        assert_eq!(realtime(&r), 0);
        r.system.kernel_config = Field::Value(KernelConfig {
            preempt: vec!["CONFIG_PREEMPT_RT".into()],
            ..KernelConfig::default()
        });
        assert_eq!(realtime(&r), 1);
    }

    /// An import's command line leaves out what its format does not record: no default
    /// method, unpinned threads, unlocked memory or PM QoS it never had.
    #[test]
    fn the_command_line_of_an_import_has_only_what_it_recorded() {
        let mut r = latlab_testkit::run::one_cpu("x", (1, 1));
        r.config.cpus = None;
        r.config.mlock = false;
        r.config.pm_qos_us = Some(0);
        assert_eq!(
            cmdline(&r, HIST_MAX_US),
            "latlab measure --method clock-nanosleep --interval 1ms --threads 1 --policy fifo \
             --priority 95 --pm-qos 0 --no-mlock --window 1s"
        );
        r.environment.not_recorded = ["method", "cpus", "memory", "pm-qos"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            cmdline(&r, HIST_MAX_US),
            "latlab measure --interval 1ms --policy fifo --priority 95 --window 1s # not \
             recorded: method, cpus, memory, pm-qos"
        );
    }

    /// A run measured under load, or traced, says so: it must not read as an idle run.
    #[test]
    fn the_command_line_names_the_loads_and_the_trace() {
        let mut r = latlab_testkit::run::one_cpu("x", (1, 1));
        let report = |spec: &str| latlab_testkit::run::load(spec, Some(vec![1]));
        r.loads.reports = vec![report("io:bs=1M"), report("cpu")];
        r.trace = Some(latlab_testkit::run::trace(
            &["local-timer", "hrtimer"],
            vec![],
            (0, 0),
        ));
        let line = cmdline(&r, HIST_MAX_US);
        assert!(
            line.ends_with(" --load io:bs=1M --load cpu --load-cpus 1 --trace local-timer,hrtimer"),
            "{line}"
        );
        r.trace = None;
        r.loads.phases = [("idle", 0, 1), ("io:bs=1M", 1, 3)]
            .iter()
            .enumerate()
            .map(|(index, &(spec, from, to))| latlab_model::load::LoadPhase {
                index,
                spec: spec.into(),
                start_ns: from * 1_000_000_000,
                end_ns: to * 1_000_000_000,
            })
            .collect();
        let line = cmdline(&r, HIST_MAX_US);
        assert!(
            line.ends_with(" --load-schedule \"idle 1s, io:bs=1M 2s\" --load-cpus 1"),
            "{line}"
        );
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\n""#);
    }
}
