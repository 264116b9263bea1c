//! JUnit XML, as the test reporters of GitLab, Jenkins and GitHub read it: `<testsuites>` of
//! `<testsuite>`s of `<testcase>`s, each passed, failed (`<failure>`), in error (`<error>`: it
//! could not run) or skipped, with the counts on every suite. `--junit` of `measure` and `run`
//! makes one test case per cell and CPU, `check` one per check.

use crate::gate::{Breach, Limits};
use latlab_model::RunResult;
use latlab_model::units::format_us;

/// How a test case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// A limit exceeded or a check failed: one-line message, the whole story in the text.
    Failed {
        message: String,
        text: String,
    },
    /// It could not run.
    Error {
        message: String,
    },
    Skipped {
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    pub classname: String,
    pub name: String,
    pub time_s: f64,
    pub outcome: Outcome,
    /// What was measured or found, shown beside the verdict.
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TestSuite {
    pub name: String,
    /// RFC 3339, when the suite started (empty: unknown).
    pub timestamp: String,
    pub hostname: String,
    /// Wall time of the suite, where its cases ran side by side (the CPUs of a run); `None`:
    /// the sum of its cases'.
    pub time_s: Option<f64>,
    pub properties: Vec<(String, String)>,
    pub cases: Vec<TestCase>,
}

impl TestSuite {
    fn counts(&self) -> Counts {
        let mut c = Counts::of(self.cases.iter());
        if let Some(t) = self.time_s {
            c.time_s = t;
        }
        c
    }
}

#[derive(Default)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    time_s: f64,
}

impl Counts {
    fn of<'a>(cases: impl Iterator<Item = &'a TestCase>) -> Counts {
        let mut c = Counts::default();
        for t in cases {
            c.tests += 1;
            c.time_s += t.time_s;
            match t.outcome {
                Outcome::Passed => {}
                Outcome::Failed { .. } => c.failures += 1,
                Outcome::Error { .. } => c.errors += 1,
                Outcome::Skipped { .. } => c.skipped += 1,
            }
        }
        c
    }

    fn attrs(&self) -> String {
        format!(
            "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\"",
            self.tests, self.failures, self.errors, self.skipped, self.time_s
        )
    }
}

/// Text for an XML attribute or element: the five entities escaped as the HTML report escapes
/// them, and characters XML 1.0 cannot carry (controls other than tab and newlines) dropped.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => match crate::html::svg::entity(c) {
                Some(e) => out.push_str(e),
                None => out.push(c),
            },
        }
    }
    out
}

/// Element text: as [`esc`], but newlines kept as they are.
fn esc_text(s: &str) -> String {
    esc(s).replace("&#10;", "\n")
}

/// The document of `suites`.
pub fn render(suites: &[TestSuite]) -> String {
    let mut all = Counts::default();
    for c in suites.iter().map(TestSuite::counts) {
        all.tests += c.tests;
        all.failures += c.failures;
        all.errors += c.errors;
        all.skipped += c.skipped;
        all.time_s += c.time_s;
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!("<testsuites name=\"latlab\" {}>\n", all.attrs()));
    for s in suites {
        let c = s.counts();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" {}",
            esc(&s.name),
            c.attrs()
        ));
        if !s.timestamp.is_empty() {
            out.push_str(&format!(" timestamp=\"{}\"", esc(&s.timestamp)));
        }
        if !s.hostname.is_empty() {
            out.push_str(&format!(" hostname=\"{}\"", esc(&s.hostname)));
        }
        out.push_str(">\n");
        if !s.properties.is_empty() {
            out.push_str("    <properties>\n");
            for (k, v) in &s.properties {
                out.push_str(&format!(
                    "      <property name=\"{}\" value=\"{}\"/>\n",
                    esc(k),
                    esc(v)
                ));
            }
            out.push_str("    </properties>\n");
        }
        for t in &s.cases {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">\n",
                esc(&t.classname),
                esc(&t.name),
                t.time_s
            ));
            match &t.outcome {
                Outcome::Passed => {}
                Outcome::Failed { message, text } => out.push_str(&format!(
                    "      <failure message=\"{}\" type=\"failure\">{}</failure>\n",
                    esc(message),
                    esc_text(text)
                )),
                Outcome::Error { message } => out.push_str(&format!(
                    "      <error message=\"{}\" type=\"error\"/>\n",
                    esc(message)
                )),
                Outcome::Skipped { message } => {
                    out.push_str(&format!("      <skipped message=\"{}\"/>\n", esc(message)))
                }
            }
            if !t.output.is_empty() {
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    esc_text(&t.output)
                ));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// `samples 10000, min 3.1 us, p50 …, p99 …, p99.9 …, max …, missed 0`.
fn thread_line(t: &latlab_model::ThreadResult) -> String {
    let s = &t.stats;
    format!(
        "samples {}, min {} us, p50 {} us, p99 {} us, p99.9 {} us, max {} us, missed {}",
        s.count,
        format_us(s.min, 1),
        format_us(s.p50, 1),
        format_us(s.p99, 1),
        format_us(s.p99_9, 1),
        format_us(s.max, 1),
        t.missed
    )
}

/// A failed case's message: its breaches and the run (`cpu1: max 120.0 us exceeds the limit
/// 50.0 us (--max-latency); run 0c1d…`); its text also the run's warnings, which often say why
/// (another process's real-time threads above the measuring ones).
fn failure(breaches: &[&Breach], result: &RunResult) -> Outcome {
    let lines: Vec<String> = breaches.iter().map(|b| b.line()).collect();
    Outcome::Failed {
        message: format!("{}; run {}", lines.join("; "), result.id),
        text: lines
            .into_iter()
            .chain(warning_lines(result, ""))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The run's warnings, a line each (`warning: …`) after `prefix`.
fn warning_lines(result: &RunResult, prefix: &str) -> Vec<String> {
    result
        .warnings()
        .iter()
        .map(|w| format!("{prefix}warning: {w}"))
        .collect()
}

/// One test case per measuring thread of `result`, named by its label (`cpu3`) after `prefix`,
/// failed where it exceeded `limits`.
pub fn run_cases(
    result: &RunResult,
    limits: &Limits,
    classname: &str,
    prefix: &str,
) -> Vec<TestCase> {
    let time_s = result.elapsed_ns as f64 / 1e9;
    result
        .threads
        .iter()
        .map(|t| {
            let breaches = limits.check_thread(result, t);
            let refs: Vec<&Breach> = breaches.iter().collect();
            TestCase {
                classname: classname.into(),
                name: format!("{prefix}{}", t.label),
                time_s,
                outcome: if breaches.is_empty() {
                    Outcome::Passed
                } else {
                    failure(&refs, result)
                },
                output: std::iter::once(format!("{}; run {}", thread_line(t), result.id))
                    .chain(warning_lines(result, ""))
                    .collect::<Vec<_>>()
                    .join("\n"),
            }
        })
        .collect()
}

/// The suite of one `latlab measure` run: a case per CPU, the run's id, host and limits as
/// properties.
pub fn measure_suite(result: &RunResult, limits: &Limits) -> TestSuite {
    let mut cases = run_cases(result, limits, "latlab.measure", "");
    // A run a signal cut short measured less than the gate asked for: not a pass.
    if let Some(why) = result.cut_short() {
        cases.push(TestCase {
            classname: "latlab.measure".into(),
            name: "run length".into(),
            time_s: result.elapsed_ns as f64 / 1e9,
            outcome: Outcome::Error {
                message: format!("the run is incomplete: {why}"),
            },
            output: format!("run {}", result.id),
        });
    }
    // A load that failed left the run measuring without it: not what the gate asked for.
    for (spec, why) in result.loads.failed() {
        cases.push(TestCase {
            classname: "latlab.measure".into(),
            name: format!("load {spec}"),
            time_s: result.elapsed_ns as f64 / 1e9,
            outcome: Outcome::Error {
                message: format!("the load failed: {spec}: {why}"),
            },
            output: format!("run {}", result.id),
        });
    }
    TestSuite {
        name: "latlab measure".into(),
        timestamp: result.known_start().unwrap_or_default().into(),
        hostname: hostname(result),
        time_s: Some(result.elapsed_ns as f64 / 1e9),
        properties: vec![
            ("run_id".into(), result.id.clone()),
            ("limits".into(), limits.describe()),
            ("method".into(), result.config.method.name().into()),
            ("interval".into(), result.config.interval_text()),
        ],
        cases,
    }
}

/// The error of a report written as a run starts, which the run's own replaces when it ends:
/// left in place, the run never finished.
pub const UNFINISHED: &str = "the run did not finish: it was killed (SIGKILL, the OOM killer, \
                              a shutdown) before it wrote its report";

/// The suite of a `latlab measure` that could not measure: one case in error saying why, so a
/// CI reporter sees the failure and not an absent file.
pub fn measure_error_suite(message: &str) -> TestSuite {
    error_suite("measure", message)
}

/// The suite of a `latlab COMMAND` (measure, run, check) that could not run, refused its command
/// line included: one case in error saying why, so a CI reporter sees the failure, not an
/// absent file or one an earlier run left.
pub fn error_suite(command: &str, message: &str) -> TestSuite {
    TestSuite {
        name: format!("latlab {command}"),
        timestamp: String::new(),
        hostname: String::new(),
        time_s: None,
        properties: Vec::new(),
        cases: vec![TestCase {
            classname: format!("latlab.{command}"),
            name: command.into(),
            time_s: 0.0,
            outcome: Outcome::Error {
                message: message.into(),
            },
            output: String::new(),
        }],
    }
}

/// What one cell of an experiment came to: its saved runs by repeat, its failed repeats with
/// why, or why it was skipped.
#[derive(Debug, Default)]
pub struct CellRuns {
    pub key: String,
    pub skipped: Option<String>,
    pub runs: Vec<(u32, RunResult)>,
    pub failed: Vec<(u32, String)>,
    /// Repeats not measured yet (an interrupted run): each is a case in error, so a partly run
    /// experiment does not read as a pass.
    pub pending: Vec<u32>,
    /// The labels of the threads a run of the cell measures (`cpu0`), for naming its cases
    /// before any repeat is measured as they are named after.
    pub labels: Vec<String>,
}

/// The suite of an experiment (`latlab run`): one case per cell and CPU over all its repeats,
/// failed where any repeat exceeded a limit (each breach named with its repeat and run), in
/// error where a repeat failed or is not measured yet (one case for a cell none of whose
/// repeats was measured); a skipped case per skipped cell. Also every breach, its thread
/// named `cell KEY repeat R cpuN`.
pub fn experiment_suite(
    name: &str,
    experiment: &str,
    cells: &[CellRuns],
    limits: &Limits,
) -> (TestSuite, Vec<Breach>) {
    let classname = format!("latlab.run.{name}");
    let mut cases = Vec::new();
    let mut all = Vec::new();
    for cell in cells {
        if let Some(why) = &cell.skipped {
            cases.push(TestCase {
                classname: classname.clone(),
                name: cell.key.clone(),
                time_s: 0.0,
                outcome: Outcome::Skipped {
                    message: why.clone(),
                },
                output: String::new(),
            });
            continue;
        }
        // Repeats that did not give a whole run: each is an error of every case of the cell.
        let mut errors: Vec<String> = cell
            .failed
            .iter()
            .map(|(stored, why)| format!("repeat {}: {why}", stored + 1))
            .collect();
        // A repeat measured beside a load that failed did not measure what the plan asked.
        errors.extend(cell.runs.iter().flat_map(|(stored, r)| {
            r.loads.failed().map(move |(spec, why)| {
                format!("repeat {}: the load failed: {spec}: {why}", stored + 1)
            })
        }));
        errors.extend(cell.pending.iter().map(|stored| {
            format!(
                "repeat {}: not measured: the experiment was interrupted before this repeat \
                 ended (continue with --resume)",
                stored + 1
            )
        }));
        // Threads in the order of the first repeat that has them.
        let mut labels: Vec<&str> = Vec::new();
        for (_, r) in &cell.runs {
            for t in &r.threads {
                if !labels.contains(&t.label.as_str()) {
                    labels.push(&t.label);
                }
            }
        }
        if labels.is_empty() {
            labels = cell.labels.iter().map(String::as_str).collect();
        }
        if labels.is_empty() {
            // No repeat measured: one case for the cell, its CPUs unknown.
            cases.push(TestCase {
                classname: classname.clone(),
                name: cell.key.clone(),
                time_s: 0.0,
                outcome: Outcome::Error {
                    message: errors.join("; "),
                },
                output: String::new(),
            });
            continue;
        }
        for label in labels {
            let mut time_s = 0.0;
            let mut output = Vec::new();
            let mut breaches = Vec::new();
            let mut messages = Vec::new();
            // The warnings of the repeats that exceeded a limit: often why.
            let mut explained = Vec::new();
            for (stored, r) in &cell.runs {
                let Some(t) = r.threads.iter().find(|t| t.label == label) else {
                    continue;
                };
                // Repeats are counted from 1, as the run's progress and the reports count them.
                let repeat = stored + 1;
                time_s += r.elapsed_ns as f64 / 1e9;
                output.push(format!("repeat {repeat}: {}; run {}", thread_line(t), r.id));
                let warned = warning_lines(r, &format!("repeat {repeat}: "));
                output.extend(warned.iter().cloned());
                let exceeded = limits.check_thread(r, t);
                if !exceeded.is_empty() {
                    explained.extend(warned);
                }
                for mut b in exceeded {
                    messages.push(format!("repeat {repeat}: {}; run {}", b.line(), r.id));
                    b.thread = format!("cell {} repeat {repeat} {}", cell.key, b.thread);
                    breaches.push(b);
                }
            }
            // The same names whether the experiment is whole or not, so CI follows a case.
            cases.push(TestCase {
                classname: classname.clone(),
                name: format!("{} {label}", cell.key),
                time_s,
                outcome: if !errors.is_empty() {
                    Outcome::Error {
                        message: errors
                            .iter()
                            .chain(&messages)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("; "),
                    }
                } else if messages.is_empty() {
                    Outcome::Passed
                } else {
                    Outcome::Failed {
                        message: messages.join("; "),
                        text: messages
                            .iter()
                            .chain(&explained)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("\n"),
                    }
                },
                output: output.join("\n"),
            });
            all.extend(breaches);
        }
    }
    let first = cells.iter().flat_map(|c| c.runs.iter()).next();
    let suite = TestSuite {
        name: format!("latlab run {name}"),
        timestamp: first
            .and_then(|(_, r)| r.known_start())
            .unwrap_or_default()
            .into(),
        hostname: first.map(|(_, r)| hostname(r)).unwrap_or_default(),
        time_s: Some(
            cells
                .iter()
                .flat_map(|c| c.runs.iter())
                .map(|(_, r)| r.elapsed_ns as f64 / 1e9)
                .sum(),
        ),
        properties: vec![
            ("experiment".into(), experiment.into()),
            ("limits".into(), limits.describe()),
        ],
        cases,
    };
    (suite, all)
}

/// The host a result was measured on, where known.
pub fn hostname(result: &RunResult) -> String {
    result.system.hostname.clone()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use latlab_testkit::run::{hist, result, thread};

    #[test]
    fn a_suite_counts_its_cases_and_escapes_what_it_quotes() {
        let suite = TestSuite {
            name: "a <b> & \"c\" 'd'".into(),
            cases: vec![
                TestCase {
                    classname: "k".into(),
                    name: "ok".into(),
                    time_s: 1.0,
                    outcome: Outcome::Passed,
                    output: String::new(),
                },
                TestCase {
                    classname: "k".into(),
                    name: "bad".into(),
                    time_s: 2.0,
                    outcome: Outcome::Failed {
                        message: "x > y\u{1}".into(),
                        text: "one\ntwo".into(),
                    },
                    output: "out".into(),
                },
                TestCase {
                    classname: "k".into(),
                    name: "skip".into(),
                    time_s: 0.0,
                    outcome: Outcome::Skipped {
                        message: "n/a".into(),
                    },
                    output: String::new(),
                },
            ],
            ..TestSuite::default()
        };
        let xml = render(&[suite]);
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "testsuites");
        assert_eq!(root.attribute("tests"), Some("3"));
        assert_eq!(root.attribute("failures"), Some("1"));
        assert_eq!(root.attribute("skipped"), Some("1"));
        assert_eq!(root.attribute("time"), Some("3.000"));
        let s = root.first_element_child().unwrap();
        assert_eq!(s.attribute("name"), Some("a <b> & \"c\" 'd'"));
        assert!(
            xml.contains("name=\"a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;\""),
            "{xml}"
        );
        let f = s.descendants().find(|n| n.has_tag_name("failure")).unwrap();
        assert_eq!(f.attribute("message"), Some("x > y"));
        assert_eq!(f.text(), Some("one\ntwo"));
    }

    #[test]
    fn a_run_without_a_known_start_has_no_timestamp_whatever_its_text() {
        let mut r = latlab_testkit::run::one_cpu("imported", (0, 0));
        // What an older store kept for an import without a start time.
        r.started_at = "1970-01-01T00:00:00Z".into();
        let xml = render(&[measure_suite(&r, &Limits::default())]);
        assert!(!xml.contains("timestamp="), "{xml}");
        r.start_unix_ns = 1_795_362_304_000_000_000;
        r.started_at = "2026-11-22T15:45:04Z".into();
        let xml = render(&[measure_suite(&r, &Limits::default())]);
        assert!(xml.contains("timestamp=\"2026-11-22T15:45:04Z\""), "{xml}");
    }

    #[test]
    fn measure_cases_fail_where_a_limit_is_exceeded_naming_value_limit_and_run() {
        let t0 = thread("cpu0", Some(0), 10, 0, hist(&[(5_000, 100)]));
        let t1 = thread("cpu1", Some(1), 11, 0, hist(&[(5_000, 99), (80_000, 1)]));
        let r = result(
            "run-7",
            (0, 5_000_000_000),
            Default::default(),
            Default::default(),
            vec![t0, t1],
        );
        let limits = Limits {
            max_ns: Some(50_000),
            ..Limits::default()
        };
        let suite = measure_suite(&r, &limits);
        assert_eq!(suite.cases.len(), 2);
        assert_eq!(suite.cases[0].outcome, Outcome::Passed);
        assert_eq!(suite.cases[0].time_s, 5.0);
        match &suite.cases[1].outcome {
            Outcome::Failed { message, .. } => assert_eq!(
                message,
                "cpu1: max 80.0 us exceeds the limit 50.0 us (--max-latency); run run-7"
            ),
            o => panic!("{o:?}"),
        }
        assert!(
            suite
                .properties
                .contains(&("run_id".into(), "run-7".into()))
        );
        // The CPUs measured side by side: the suite took the run's time, not their sum.
        let xml = render(&[suite]);
        assert!(xml.contains("<testsuites name=\"latlab\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"5.000\">"), "{xml}");
    }

    /// What explains a failure reaches the reader: the run's warnings in every case's output
    /// and a failed case's text, and a load that failed as a case in error.
    #[test]
    fn warnings_explain_a_failure_and_a_failed_load_is_an_error() {
        let t0 = thread("cpu0", Some(0), 10, 0, hist(&[(5_000, 99), (80_000, 1)]));
        let mut r = result(
            "run-8",
            (0, 1_000_000_000),
            Default::default(),
            Default::default(),
            vec![t0],
        );
        r.environment
            .warnings
            .push("real-time threads of other processes: PID 7 latlab".into());
        let mut failed = latlab_testkit::run::load("cmd:exit 3", None);
        failed.elapsed_ns = 3_000_000;
        failed.warnings = vec!["ended after 3ms with exit status 3".into()];
        failed.failed = Some("ended after 3ms with exit status 3".into());
        r.loads.reports.push(failed);
        let limits = Limits {
            max_ns: Some(50_000),
            ..Limits::default()
        };
        let suite = measure_suite(&r, &limits);
        assert_eq!(suite.cases.len(), 2);
        let Outcome::Failed { text, .. } = &suite.cases[0].outcome else {
            panic!("{:?}", suite.cases[0].outcome)
        };
        assert!(
            text.contains("warning: real-time threads of other processes: PID 7 latlab"),
            "{text}"
        );
        assert!(
            suite.cases[0]
                .output
                .contains("warning: load cmd:exit 3: ended after 3ms"),
            "{}",
            suite.cases[0].output
        );
        assert_eq!(suite.cases[1].name, "load cmd:exit 3");
        assert_eq!(
            suite.cases[1].outcome,
            Outcome::Error {
                message: "the load failed: cmd:exit 3: ended after 3ms with exit status 3".into()
            }
        );
        // In an experiment the repeat measured beside it is in error, its warnings in the output.
        let (suite, _) = experiment_suite(
            "p",
            "e1",
            &[CellRuns {
                key: "load=cmd".into(),
                runs: vec![(0, r)],
                ..CellRuns::default()
            }],
            &Limits::default(),
        );
        let case = &suite.cases[0];
        assert_eq!(
            case.outcome,
            Outcome::Error {
                message: "repeat 1: the load failed: cmd:exit 3: ended after 3ms with exit \
                          status 3"
                    .into()
            }
        );
        assert!(
            case.output
                .contains("repeat 1: warning: real-time threads of other processes"),
            "{}",
            case.output
        );
    }

    #[test]
    fn an_experiment_has_a_case_per_cell_and_cpu_over_its_repeats() {
        let run = |id: &str, worst: u64| {
            let t0 = thread("cpu0", Some(0), 10, 0, hist(&[(5_000, 99), (worst, 1)]));
            let t1 = thread("cpu1", Some(1), 11, 0, hist(&[(5_000, 100)]));
            result(
                id,
                (0, 2_000_000_000),
                Default::default(),
                Default::default(),
                vec![t0, t1],
            )
        };
        let cells = [
            CellRuns {
                key: "load=none".into(),
                runs: vec![(0, run("a", 10_000)), (1, run("b", 70_000))],
                ..CellRuns::default()
            },
            CellRuns {
                key: "load=io".into(),
                runs: vec![(0, run("c", 10_000))],
                failed: vec![(1, "io load could not start".into())],
                ..CellRuns::default()
            },
            CellRuns {
                key: "method=busy".into(),
                skipped: Some("not here".into()),
                ..CellRuns::default()
            },
        ];
        let limits = Limits {
            max_ns: Some(50_000),
            ..Limits::default()
        };
        let (suite, breaches) = experiment_suite("p", "e3", &cells, &limits);
        let names: Vec<&str> = suite.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "load=none cpu0",
                "load=none cpu1",
                "load=io cpu0",
                "load=io cpu1",
                "method=busy"
            ]
        );
        match &suite.cases[0].outcome {
            Outcome::Failed { message, .. } => assert_eq!(
                message,
                "repeat 2: cpu0: max 70.0 us exceeds the limit 50.0 us (--max-latency); run b"
            ),
            o => panic!("{o:?}"),
        }
        assert_eq!(suite.cases[0].time_s, 4.0);
        assert_eq!(suite.cases[1].outcome, Outcome::Passed);
        // A failed repeat is an error of each of its cell's cases, named as a whole run's.
        for case in &suite.cases[2..4] {
            assert_eq!(
                case.outcome,
                Outcome::Error {
                    message: "repeat 2: io load could not start".into()
                }
            );
        }
        assert!(matches!(suite.cases[4].outcome, Outcome::Skipped { .. }));
        // A cell none of whose repeats was measured is one case, in error.
        let never = [CellRuns {
            key: "load=cpu".into(),
            pending: vec![0],
            ..CellRuns::default()
        }];
        let (suite, _) = experiment_suite("p", "e3", &never, &limits);
        assert_eq!(suite.cases.len(), 1);
        assert_eq!(suite.cases[0].name, "load=cpu");
        assert!(matches!(&suite.cases[0].outcome, Outcome::Error { message }
            if message.starts_with("repeat 1: not measured: the experiment was interrupted")));
        // Named by the threads it measures where they are known, as its runs will be.
        let named = [CellRuns {
            key: "load=cpu".into(),
            pending: vec![0],
            labels: vec!["cpu3".into()],
            ..CellRuns::default()
        }];
        let (suite, _) = experiment_suite("p", "e3", &named, &limits);
        assert_eq!(suite.cases[0].name, "load=cpu cpu3");
        assert_eq!(breaches.len(), 1);
        assert!(
            breaches[0]
                .line()
                .starts_with("cell load=none repeat 2 cpu0: max 70.0 us")
        );
    }
}
