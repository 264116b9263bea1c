//! Pass/fail limits on a run, as CI gates read them: the worst wake-up, the 99th percentile and
//! the missed periods of each measuring thread against `--max-latency`, `--max-p99` and
//! `--max-missed`. The values are the raw samples' (as cyclictest's `# Max Latencies` are); a
//! thread that measured nothing cannot pass a latency limit.

use latlab_model::units::format_us;
use latlab_model::{RunResult, StopReason, ThreadResult};

/// The exit code of a run that exceeded a limit (0 ok, 1 failure, 2 bad input, 3 a failed
/// check, 4 a limit exceeded).
pub const EXIT_LIMIT: u8 = 4;

/// Limits a run must stay within; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub missed: Option<u64>,
}

/// One limit a thread exceeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// The thread's label (`cpu3`).
    pub thread: String,
    pub what: Measure,
    /// The measured value (ns for latencies, periods for missed); `None`: nothing measured.
    pub value: Option<u64>,
    pub limit: u64,
}

/// What a limit bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Max,
    P99,
    Missed,
    /// The wake-up that went past `--break` and ended the run before its length: with limits
    /// to check, a gate cannot pass on the part measured before it.
    Break,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::Max => "max",
            Measure::P99 => "p99",
            Measure::Missed => "missed periods",
            Measure::Break => "latency",
        }
    }
    fn flag(self) -> &'static str {
        match self {
            Measure::Max => "--max-latency",
            Measure::P99 => "--max-p99",
            Measure::Missed => "--max-missed",
            Measure::Break => "--break",
        }
    }
    fn amount(self, v: u64) -> String {
        match self {
            Measure::Missed => v.to_string(),
            _ => format!("{} us", format_us(v, 1)),
        }
    }

    /// A limit as given: finer than 0.1 us, to the ns (`1ns` is not "0.0 us").
    fn limit(self, v: u64) -> String {
        match self {
            Measure::Missed => v.to_string(),
            _ if !v.is_multiple_of(100) => format!("{} us", format_us(v, 3)),
            _ => self.amount(v),
        }
    }
}

impl Breach {
    /// `cpu3: max 62.1 us exceeds the limit 50.0 us (--max-latency)`.
    pub fn line(&self) -> String {
        if let (Measure::Break, Some(v)) = (self.what, self.value) {
            return format!(
                "{}: latency {} exceeds {} ({}), which ended the run before its length",
                self.thread,
                self.what.amount(v),
                self.what.limit(self.limit),
                self.what.flag()
            );
        }
        match self.value {
            Some(v) => format!(
                "{}: {} {} {} the limit {} ({})",
                self.thread,
                self.what.name(),
                self.what.amount(v),
                // "missed periods 3 exceed", "max 62.1 us exceeds"
                if self.what == Measure::Missed {
                    "exceed"
                } else {
                    "exceeds"
                },
                self.what.limit(self.limit),
                self.what.flag()
            ),
            None => format!(
                "{}: no samples, so {} cannot be shown within the limit {} ({})",
                self.thread,
                self.what.name(),
                self.what.limit(self.limit),
                self.what.flag()
            ),
        }
    }
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The limits one thread of `result` exceeded, in the order max, p99, missed; and, where
    /// there are limits, the `--break` that ended the run on this thread.
    pub fn check_thread(&self, result: &RunResult, t: &ThreadResult) -> Vec<Breach> {
        let measured = t.stats.count > 0;
        let mut out = Vec::new();
        let mut latency = |what: Measure, limit: Option<u64>, value: u64| {
            if let Some(limit) = limit {
                if !measured {
                    out.push(Breach {
                        thread: t.label.clone(),
                        what,
                        value: None,
                        limit,
                    });
                } else if value > limit {
                    out.push(Breach {
                        thread: t.label.clone(),
                        what,
                        value: Some(value),
                        limit,
                    });
                }
            }
        };
        latency(Measure::Max, self.max_ns, t.stats.max);
        latency(Measure::P99, self.p99_ns, t.stats.p99);
        if let Some(limit) = self.missed
            && t.missed > limit
        {
            out.push(Breach {
                thread: t.label.clone(),
                what: Measure::Missed,
                value: Some(t.missed),
                limit,
            });
        }
        if let StopReason::Break { thread, value_ns } = &result.stop
            && !self.is_empty()
            && result
                .threads
                .get(*thread as usize)
                .is_some_and(|b| b.label == t.label)
        {
            out.push(Breach {
                thread: t.label.clone(),
                what: Measure::Break,
                value: Some(*value_ns),
                limit: result.config.break_threshold_ns.unwrap_or(0),
            });
        }
        out
    }

    /// Every limit every thread of the run exceeded.
    pub fn check(&self, result: &RunResult) -> Vec<Breach> {
        result
            .threads
            .iter()
            .flat_map(|t| self.check_thread(result, t))
            .collect()
    }

    /// The gate as a `--json` result carries it: the limits (ns, periods), whether the run is
    /// within them (a run a signal cut short is not), and each limit exceeded.
    pub fn json(&self, result: &RunResult) -> serde_json::Value {
        let breaches = self.check(result);
        serde_json::json!({
            "limits": {
                "max_latency_ns": self.max_ns,
                "p99_ns": self.p99_ns,
                "missed": self.missed,
            },
            "passed": breaches.is_empty() && result.cut_short().is_none(),
            "cut_short": result.cut_short(),
            "breaches": breaches
                .iter()
                .map(|b| serde_json::json!({
                    "thread": b.thread,
                    "option": b.what.flag(),
                    "value": b.value,
                    "limit": b.limit,
                    "line": b.line(),
                }))
                .collect::<Vec<_>>(),
        })
    }

    /// `max ≤ 50.0 us, p99 ≤ 20.0 us`, or `no limits`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            (Measure::Max, self.max_ns),
            (Measure::P99, self.p99_ns),
            (Measure::Missed, self.missed),
        ]
        .into_iter()
        .filter_map(|(m, l)| l.map(|l| format!("{} ≤ {}", m.name(), m.amount(l))))
        .collect();
        if parts.is_empty() {
            "no limits".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use latlab_testkit::run::{hist, result, thread};

    fn run() -> RunResult {
        // cpu0 tops out at 40 us, cpu1 at 120 us with 3 missed periods.
        let t0 = thread("cpu0", Some(0), 10, 0, hist(&[(5_000, 98), (40_000, 2)]));
        let t1 = thread("cpu1", Some(1), 11, 3, hist(&[(5_000, 98), (120_000, 2)]));
        result(
            "r1",
            (0, 1),
            Default::default(),
            Default::default(),
            vec![t0, t1],
        )
    }

    #[test]
    fn each_limit_names_the_thread_the_value_and_the_limit() {
        let r = run();
        let limits = Limits {
            max_ns: Some(50_000),
            p99_ns: None,
            missed: Some(2),
        };
        let lines: Vec<String> = limits.check(&r).iter().map(Breach::line).collect();
        assert_eq!(
            lines,
            [
                "cpu1: max 120.0 us exceeds the limit 50.0 us (--max-latency)",
                "cpu1: missed periods 3 exceed the limit 2 (--max-missed)"
            ]
        );
        // A limit finer than the values' 0.1 us is said to the ns, not as 0.0 us.
        let fine = Limits {
            p99_ns: Some(1),
            ..Limits::default()
        };
        let lines: Vec<String> = fine.check(&r).iter().map(Breach::line).collect();
        assert!(
            lines[0].ends_with("exceeds the limit 0.001 us (--max-p99)"),
            "{lines:?}"
        );
        // At the limit is within it.
        let at = Limits {
            max_ns: Some(120_000),
            missed: Some(3),
            ..Limits::default()
        };
        assert!(at.check(&r).is_empty());
        assert!(Limits::default().check(&r).is_empty());
        assert_eq!(limits.describe(), "max ≤ 50.0 us, missed periods ≤ 2");
    }

    /// A run `--break` ended early measured less than the gate asked for: with limits it fails
    /// on the thread that saw the wake-up, even where that wake-up is within the limits.
    #[test]
    fn a_run_ended_by_break_fails_a_gate() {
        let mut r = run();
        r.config.break_threshold_ns = Some(20_000);
        r.stop = StopReason::Break {
            thread: 0,
            value_ns: 40_000,
        };
        let limits = Limits {
            max_ns: Some(1_000_000),
            ..Limits::default()
        };
        let lines: Vec<String> = limits.check(&r).iter().map(Breach::line).collect();
        assert_eq!(
            lines,
            [
                "cpu0: latency 40.0 us exceeds 20.0 us (--break), which ended the run before its \
              length"
            ]
        );
        // Without limits a break is what it was in cyclictest: the run's end, not a failure.
        assert!(Limits::default().check(&r).is_empty());
        // The JSON carries the verdict and what made it.
        let j = limits.json(&r);
        assert_eq!(j["passed"], false);
        assert_eq!(j["limits"]["max_latency_ns"], 1_000_000);
        assert_eq!(j["breaches"][0]["option"], "--break");
        assert_eq!(j["breaches"][0]["value"], 40_000);
    }

    #[test]
    fn a_thread_without_samples_cannot_pass_a_latency_limit() {
        let empty = thread("cpu2", Some(2), 12, 0, hist(&[]));
        let r = result(
            "r2",
            (0, 1),
            Default::default(),
            Default::default(),
            vec![empty],
        );
        let b = Limits {
            p99_ns: Some(1_000_000),
            ..Limits::default()
        }
        .check(&r);
        assert_eq!(b.len(), 1);
        assert!(
            b[0].line().starts_with("cpu2: no samples"),
            "{}",
            b[0].line()
        );
    }
}
