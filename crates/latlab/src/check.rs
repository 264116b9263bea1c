//! `latlab check`: a pass / warn / fail scan of everything that limits latency here, each
//! finding with its evidence, advice and fix; `--fix` applies the knobs of the failed checks
//! through `latlab tune` (journaled, undone by `latlab tune restore`) and prints the boot options
//! and manual steps it cannot apply; `--measure` shows what the fix is worth.

use crate::cli_error::{CliError, CliResult};
use anyhow::Context;
use clap::Args;
use latlab_check::{Finding, FixPlan, Report, Target, UserChoice, Verdict};
use latlab_model::RunResult;
use latlab_model::units::{format_duration, format_us};
use latlab_sys::Sys;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

#[derive(Args, Debug)]
#[command(
    after_help = "Exit codes: 0 every check passes (or does not apply), 1 a warning, 2 bad input, \
3 a failure. Ids: `latlab check --list`."
)]
pub struct CheckArgs {
    /// What the system is for: audio, control or throughput (sets the bounds, e.g. 100 µs of
    /// idle exit latency for audio, 10 µs for control).
    #[arg(long, default_value = "audio", value_name = "TARGET",
          hide_possible_values = true, value_parser = clap::builder::PossibleValuesParser::new(latlab_check::Target::ALL.map(|t| t.name())))]
    target: String,

    /// Leave out these checks: ids or groups (`irq`), comma-separated.
    #[arg(long, value_name = "ID,...", value_delimiter = ',')]
    skip: Vec<String>,

    /// Print the report as JSON.
    #[arg(long)]
    json: bool,

    /// List every check id with its title, then exit.
    #[arg(long)]
    list: bool,

    /// Check the limits of this user (default: the invoking user; SUDO_USER under sudo).
    #[arg(long, value_name = "NAME")]
    user: Option<String>,

    /// Apply the tune knobs behind the failed checks (journaled; `latlab tune restore` undoes
    /// them) and print the boot options and manual steps that remain (the boot options are
    /// also in the profile it writes, for `latlab tune boot PROFILE --write`).
    #[arg(long)]
    fix: bool,

    /// With --fix, also apply the tune knobs behind the checks that warn.
    #[arg(long)]
    fix_warnings: bool,

    /// Directory of the tuning journal for --fix (default: /var/lib/latlab, or
    /// LATLAB_STATE_DIR).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// Run `latlab measure` for DURATION before (and after --fix) and print p99 and max side by
    /// side.
    #[arg(long, value_name = "DURATION", value_parser = crate::args::secs)]
    measure: Option<crate::args::Ns>,

    /// Write JUnit XML to FILE: one test case per check (a failure fails it, a warning passes
    /// with its evidence, a check that does not apply is skipped).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

/// What --fix did.
#[derive(Default)]
struct FixOutcome {
    plan: FixPlan,
    /// What latlab tune applied (empty when nothing was or it failed).
    done: latlab_check::fix::FixReport,
    error: Option<String>,
}

#[derive(Clone, Copy)]
struct Latency {
    p99_ns: u64,
    max_ns: u64,
    missed: u64,
}

#[derive(Default)]
struct MeasureOutcome {
    duration_ns: u64,
    /// Measured before and after --fix (else once).
    with_fix: bool,
    before: Option<Latency>,
    after: Option<Latency>,
    errors: Vec<String>,
    /// A measurement was cut short by Ctrl-C or SIGTERM: the command ends with 130, as an
    /// interrupted `latlab measure` does, after it has said what it has.
    interrupted: Option<String>,
    /// --fix wrote nothing: the system is as measured before, and is not measured again.
    unchanged: bool,
    /// Under `--sysroot`: what was measured instead of the tree checked (this machine).
    elsewhere: Option<String>,
}

impl MeasureOutcome {
    /// Measure once (saying so on stderr when `announce`), keeping a failure among the errors.
    fn take(&mut self, name: &str, when: &str, announce: bool) -> Option<Latency> {
        if announce {
            eprintln!(
                "latlab: measuring for {} {when} …",
                format_duration(self.duration_ns)
            );
        }
        match measure(self.duration_ns) {
            Ok((latency, cut_short)) => {
                if let Some(why) = cut_short {
                    self.interrupted = Some(format!("the measurement {when} was {why}"));
                }
                Some(latency)
            }
            Err(e) => {
                self.errors.push(format!("{name}: {e:#}"));
                None
            }
        }
    }
}

pub fn run(args: CheckArgs, sys: &Sys) -> CliResult<ExitCode> {
    if args.list {
        if args.json {
            let list: Vec<serde_json::Value> = latlab_check::CHECKS
                .iter()
                .map(|c| serde_json::json!({ "id": c.id, "title": c.title }))
                .collect();
            crate::args::write_stdout(&format!("{}\n", serde_json::Value::Array(list)))
                .map_err(anyhow::Error::from)?;
        } else {
            for c in latlab_check::CHECKS {
                println!("{:<22} {}", c.id, c.title);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Validate everything before reading or touching the system.
    let target =
        Target::parse(&args.target).map_err(|e| CliError::Usage(format!("--target: {e}")))?;
    let skip = latlab_check::resolve_skip(&args.skip)
        .map_err(|e| CliError::Usage(format!("--skip: {e}")))?;
    let measure_ns = args.measure.map(|d| d.0);
    if measure_ns == Some(0) {
        return Err(CliError::Usage(
            "--measure 0: too short (accepted: a duration above 0, e.g. 2s)".into(),
        ));
    }
    if args.fix_warnings && !args.fix {
        return Err(CliError::Usage(
            "--fix-warnings without --fix: nothing is applied (accepted: --fix --fix-warnings)"
                .into(),
        ));
    }
    if args.state_dir.is_some() && !args.fix {
        return Err(CliError::Usage(
            "--state-dir without --fix: nothing to journal (accepted: --state-dir DIR with --fix)"
                .into(),
        ));
    }
    if let Some(dir) = &args.state_dir {
        crate::tune::state_dir_usable(dir, true)?;
    } else if args.fix {
        crate::tune::env_state_dir_usable(true)?;
    }
    let junit = crate::args::OutputFile::open("--junit", &args.junit)?;
    if args.json && junit.as_ref().is_some_and(|o| o.is_stdout()) {
        return Err(CliError::Usage(
            "--junit -: standard output is taken by --json (accepted: --junit FILE)".into(),
        ));
    }
    if let (Some(name), Ok(passwd)) = (&args.user, sys.read("/etc/passwd"))
        && !passwd
            .lines()
            .any(|l| l.split(':').next() == Some(name.as_str()))
    {
        return Err(CliError::Usage(format!(
            "--user {name}: no such user in /etc/passwd (accepted: a user name from /etc/passwd)"
        )));
    }
    let who = UserChoice {
        explicit: args.user.clone(),
        sudo_user: std::env::var("SUDO_USER").ok().filter(|s| !s.is_empty()),
    };
    let color =
        !args.json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();

    // Beside `--junit -` (the XML alone on stdout), the tables go to stderr.
    let say = crate::args::Say::beside(&args.junit);
    let facts = latlab_check::Facts::gather(sys, &who);
    let first = latlab_check::run(&facts, target, &skip);
    // A tree cannot be measured: this machine is, which a fix under --sysroot leaves alone.
    let elsewhere = (!sys.is_live()).then(|| {
        format!(
            "this machine was measured, not the system under --sysroot {} (a tree cannot be \
             measured){}",
            latlab_model::units::shell_path(sys.root()),
            if args.fix {
                "; the fix changed only the tree"
            } else {
                ""
            }
        )
    });
    let mut measured = measure_ns.map(|ns| MeasureOutcome {
        duration_ns: ns,
        with_fix: args.fix,
        elsewhere,
        ..MeasureOutcome::default()
    });
    if let Some(m) = measured.as_mut() {
        m.before = m.take("before", "before", !args.json);
    }
    if !args.fix {
        if args.json {
            print_json(&first, None, None, measured.as_ref())?;
        } else {
            say.text(&table(&first, color));
            say.text(&by_hand_elsewhere(&first, sys));
            say.text(&fix_hint(&first, sys));
            if let Some(m) = &measured {
                say.text(&measure_table(m));
            }
        }
        if let Some(out) = junit {
            out.write(&junit_xml(&first, sys))?;
        }
        if let Some(code) = interrupted(measured.as_ref()) {
            return Ok(code);
        }
        return Ok(ExitCode::from(first.exit_code()));
    }

    let least = if args.fix_warnings {
        Verdict::Warn
    } else {
        Verdict::Fail
    };
    let plan = latlab_check::plan_fixes(&first, least);
    // The fixes of warnings --fix leaves alone, named by their checks so the way to apply them
    // is plain: knobs (--fix-warnings applies them), and boot options and steps by hand (it
    // lists them).
    let (warned_knobs, warned_listed) = if args.fix_warnings {
        (Vec::new(), Vec::new())
    } else {
        let all = latlab_check::plan_fixes(&first, Verdict::Warn);
        /// The checks asking for a fix of `with` that `without` does not hold.
        fn left<K: PartialEq>(
            with: &[(K, Vec<&'static str>)],
            without: &[(K, Vec<&'static str>)],
        ) -> Vec<&'static str> {
            let mut ids: Vec<&'static str> = with
                .iter()
                .filter(|(k, _)| !without.iter().any(|(p, _)| p == k))
                .flat_map(|(_, ids)| ids.clone())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        }
        let mut listed = left(&all.boot, &plan.boot);
        listed.extend(left(&all.manual, &plan.manual));
        listed.sort_unstable();
        listed.dedup();
        (left(&all.knobs, &plan.knobs), listed)
    };
    let mut outcome = FixOutcome {
        plan: plan.clone(),
        ..FixOutcome::default()
    };
    if !plan.knobs.is_empty() || !plan.boot.is_empty() {
        let state_dir = args
            .state_dir
            .clone()
            .unwrap_or_else(|| latlab_check::fix::default_state_dir(sys));
        use crate::tune::{Held, held_off, interrupted_apply};
        match held_off(sys, &state_dir, || {
            latlab_check::fix::apply(sys, &plan, &state_dir)
        }) {
            Held::Done(Ok(done)) => outcome.done = done,
            Held::Done(Err(e)) => outcome.error = Some(e.to_string()),
            Held::Interrupted(restore, command) => {
                // What was checked is said, then that the fixes were put back: the system is
                // as the table shows.
                if !args.json {
                    say.text(&table(&first, color));
                }
                return interrupted_apply("the fixes", restore, &command);
            }
        }
    }
    // Read the system again: the table after the fix shows what it changed.
    let after_facts = latlab_check::Facts::gather(sys, &who);
    let after = latlab_check::run(&after_facts, target, &skip);
    if let Some(m) = measured.as_mut() {
        m.unchanged = outcome.done.written == 0;
        if !m.unchanged {
            m.after = m.take("after", "after the fix", !args.json);
        }
    }
    if args.json {
        print_json(&after, Some(&first), Some(&outcome), measured.as_ref())?;
    } else {
        say.text(&table(&first, color));
        say.text(&by_hand_elsewhere(&first, sys));
        say.text(&fix_text(&outcome, latlab_tune::boot::has_grub(sys)));
        if !warned_knobs.is_empty() {
            // A fix applied now is in force: another is refused until it is restored.
            let how = match (&outcome.done.journal, &outcome.done.restore) {
                (Some(_), Some(restore)) => {
                    format!("after `{restore}`, --fix --fix-warnings applies them with the rest")
                }
                _ => "--fix-warnings applies them".to_string(),
            };
            say.line(format_args!(
                "  not applied, as they only warn: the fixes of {} ({how})",
                warned_knobs.join(", ")
            ));
        }
        if !warned_listed.is_empty() {
            say.line(format_args!(
                "  not listed, as they only warn: the boot options and steps by hand of {} \
                 (--fix-warnings lists them)",
                warned_listed.join(", ")
            ));
        }
        say.line("");
        if outcome.done.written == 0 {
            say.line("after the fix: nothing was written; the system is as checked above");
        } else {
            say.line("after the fix:");
            say.text(&table(&after, color));
        }
        if let Some(m) = &measured {
            say.text(&measure_table(m));
        }
    }
    if let Some(out) = junit {
        out.write(&junit_xml(&after, sys))?;
    }
    if let Some(e) = &outcome.error {
        eprintln!("latlab: error: --fix: {e}");
        return Ok(ExitCode::from(after.exit_code().max(1)));
    }
    if let Some(code) = interrupted(measured.as_ref()) {
        return Ok(code);
    }
    Ok(ExitCode::from(after.exit_code()))
}

/// 130 where a measurement was cut short by a signal (said on stderr), as an interrupted
/// `latlab measure` exits: what was checked and applied is said above it all the same.
fn interrupted(measured: Option<&MeasureOutcome>) -> Option<ExitCode> {
    let why = measured?.interrupted.as_ref()?;
    eprintln!("latlab: interrupted: {why}");
    Some(ExitCode::from(130))
}

/// The report as JUnit XML: a case per check, classed by its group (`latlab.check.irq`).
fn junit_xml(report: &Report, sys: &Sys) -> String {
    use latlab_report::junit::{Outcome, TestCase, TestSuite, render};
    let cases = report
        .findings
        .iter()
        .map(|f| {
            let o = &f.outcome;
            let story = [o.evidence.as_str(), o.advice.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>();
            let outcome = match o.verdict {
                Verdict::Pass | Verdict::Warn => Outcome::Passed,
                Verdict::NotApplicable => Outcome::Skipped {
                    message: o.evidence.clone(),
                },
                Verdict::Fail => Outcome::Failed {
                    message: story.join(" — "),
                    text: story.join("\n"),
                },
            };
            TestCase {
                classname: format!("latlab.check.{}", f.id.split('.').next().unwrap_or(f.id)),
                name: format!("{}: {}", f.id, f.title),
                time_s: 0.0,
                outcome,
                output: match o.verdict {
                    Verdict::Warn => format!("warn: {}", story.join("\n")),
                    _ => o.evidence.clone(),
                },
            }
        })
        .collect();
    render(&[TestSuite {
        name: "latlab check".into(),
        timestamp: latlab_model::rfc3339_utc(latlab_sys::unix_now_ns()),
        hostname: sys.hostname().unwrap_or_default(),
        time_s: None,
        properties: vec![("target".into(), report.target.name().into())],
        cases,
    }])
}

/// The JSON document: the final report with its exit code, plus what --fix and --measure did
/// (and the report before the fix).
fn print_json(
    report: &Report,
    before: Option<&Report>,
    fix: Option<&FixOutcome>,
    measure: Option<&MeasureOutcome>,
) -> CliResult<()> {
    use serde_json::{Value, json};
    let mut doc = serde_json::to_value(report).context("serializing the check report")?;
    let Value::Object(map) = &mut doc else {
        return Err(anyhow::anyhow!("the check report is not a JSON object").into());
    };
    map.insert("exit_code".into(), json!(report.exit_code()));
    if let Some(b) = before {
        map.insert(
            "before".into(),
            serde_json::to_value(b).context("serializing the report before the fix")?,
        );
    }
    if let Some(f) = fix {
        map.insert(
            "fix".into(),
            json!({
                "plan": serde_json::to_value(&f.plan).context("serializing the fix plan")?,
                "applied": f.done.applied,
                "written": f.done.written,
                "already_set": f.done.already_set,
                "profile": f.done.profile,
                "not_applied": f.done.not_applied.iter().map(|(k, why)| json!({"knob": k, "why": why})).collect::<Vec<_>>(),
                "journal": f.done.journal,
                "error": f.error,
            }),
        );
    }
    if let Some(m) = measure {
        let lat = |l: Option<Latency>| {
            l.map(|l| json!({"p99_ns": l.p99_ns, "max_ns": l.max_ns, "missed": l.missed}))
        };
        map.insert(
            "measure".into(),
            json!({
                "duration_ns": m.duration_ns,
                "before": lat(m.before),
                "after": lat(m.after),
                "errors": m.errors,
                "interrupted": m.interrupted,
                "measured_elsewhere": m.elsewhere,
            }),
        );
    }
    let text = serde_json::to_string_pretty(&doc).context("serializing the check report")?;
    println!("{text}");
    Ok(())
}

fn paint(text: &str, code: &str, color: bool) -> String {
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn verdict_cell(v: Verdict, color: bool) -> String {
    let label = format!("{:<6}", v.label());
    let code = match v {
        Verdict::Pass => "32",
        Verdict::Warn => "33",
        Verdict::Fail => "1;31",
        Verdict::NotApplicable => "2",
    };
    paint(&label, code, color)
}

/// The table: one row per check; advice and fix under warnings and failures.
fn table(r: &Report, color: bool) -> String {
    let b = &r.bounds;
    let mut bounds = Vec::new();
    if let Some(us) = b.idle_exit_latency_us {
        bounds.push(format!("idle exit latency ≤ {us} µs"));
    }
    if let Some(p) = b.rtprio_min {
        bounds.push(format!("rtprio ≥ {p}"));
    }
    if let Some(s) = b.swappiness_max {
        bounds.push(format!("swappiness ≤ {s}"));
    }
    bounds.push(format!("steal < {} %", b.steal_max_percent));
    let mut out = format!("target {}: {}\n", r.target.name(), bounds.join(", "));
    let width = r
        .findings
        .iter()
        .map(|f| f.id.len())
        .max()
        .unwrap_or(10)
        .max(5);
    out.push_str(&format!("{:<width$}  {:<6}  evidence\n", "check", "result"));
    let indent = " ".repeat(width + 10);
    for f in &r.findings {
        out.push_str(&row(f, width, color, &indent));
    }
    let s = &r.summary;
    out.push_str(&format!(
        "{} pass, {} warn, {} fail, {} n/a{}\n",
        s.pass,
        s.warn,
        s.fail,
        s.not_applicable,
        if r.skipped.is_empty() {
            String::new()
        } else {
            format!("; skipped {}", r.skipped.join(", "))
        }
    ));
    out
}

fn row(f: &Finding, width: usize, color: bool, indent: &str) -> String {
    let o = &f.outcome;
    let mut s = format!(
        "{:<width$}  {}  {}\n",
        f.id,
        verdict_cell(o.verdict, color),
        o.evidence
    );
    if matches!(o.verdict, Verdict::Warn | Verdict::Fail) {
        if !o.advice.is_empty() {
            s.push_str(&format!(
                "{indent}{} {}\n",
                paint("advice:", "2", color),
                o.advice
            ));
        }
        let fixes: Vec<String> = o
            .fixes
            .iter()
            .map(|x| x.to_string())
            .filter(|x| *x != o.advice)
            .collect();
        if !fixes.is_empty() {
            s.push_str(&format!(
                "{indent}{} {}\n",
                paint("fix:", "2", color),
                fixes.join("; ")
            ));
        }
    }
    s
}

/// Under `--sysroot`, a line saying whom the steps by hand are for: they name the paths and
/// commands of the system under that root, and run here they would change this machine.
fn by_hand_elsewhere(r: &Report, sys: &Sys) -> String {
    if sys.is_live() || latlab_check::plan_fixes(r, Verdict::Warn).manual.is_empty() {
        return String::new();
    }
    format!(
        "the fixes by hand above are for the system whose root is {}: run them on it, as run \
         here they change this machine\n",
        sys.root().display()
    )
}

/// A closing hint when fixes exist and --fix was not given; the commands name a system root
/// other than `/`, so that pasted they act on the system checked.
fn fix_hint(r: &Report, sys: &Sys) -> String {
    let plan = latlab_check::plan_fixes(r, Verdict::Fail);
    if plan.is_empty() {
        return String::new();
    }
    let root = if sys.is_live() {
        String::new()
    } else {
        format!(" --sysroot {}", latlab_model::units::shell_path(sys.root()))
    };
    let mut out = String::new();
    if !plan.knobs.is_empty() {
        out.push_str(&format!(
            "latlab{root} check --fix applies {} tune setting(s) of the failed checks ({}); latlab{root} tune restore undoes them\n",
            plan.knobs.len(),
            plan.knobs.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    if !plan.boot.is_empty() {
        out.push_str(&format!(
            "boot options the failed checks ask for: {}\n",
            plan.boot
                .iter()
                .map(|(o, _)| o.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    out
}

/// What `--fix` did; `grub`: whether the boot options it leaves can go into a GRUB drop-in.
fn fix_text(o: &FixOutcome, grub: bool) -> String {
    let mut out = String::from("\n--fix:\n");
    if o.plan.is_empty() {
        out.push_str("  nothing to fix: no failed check has a fix\n");
        return out;
    }
    let done = &o.done;
    if !done.applied.is_empty() {
        out.push_str(&format!(
            "  applied through latlab tune: {} ({} value{} written, {} already set)\n",
            done.applied.join("; "),
            done.written,
            if done.written == 1 { "" } else { "s" },
            done.already_set
        ));
    }
    for (k, why) in &done.not_applied {
        out.push_str(&format!("  not applied: {k}: {why}\n"));
    }
    if let Some(p) = &done.profile {
        out.push_str(&format!("  profile: {}\n", p.display()));
    }
    if let (Some(j), Some(restore)) = (&done.journal, &done.restore) {
        out.push_str(&format!(
            "  journal: {} (undo everything: {restore})\n",
            j.display()
        ));
    }
    if let Some(e) = &o.error {
        out.push_str(&format!("  not applied: {e}\n"));
    }
    if !o.plan.boot.is_empty() {
        let how = match &done.profile {
            Some(p) if grub => format!(
                "`latlab tune boot {} --write` puts them in a GRUB drop-in; then update GRUB and reboot",
                p.display()
            ),
            Some(_) => latlab_tune::boot::NO_GRUB.into(),
            None => "add them to the kernel command line and reboot".into(),
        };
        out.push_str(&format!(
            "  boot options (not applied; {how}): {}\n",
            o.plan
                .boot
                .iter()
                .map(|(b, _)| b.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ));
        for (b, ids) in &o.plan.boot {
            out.push_str(&format!("    {b:<36} for {}\n", ids.join(", ")));
        }
    }
    if !o.plan.manual.is_empty() {
        out.push_str("  by hand:\n");
        for (m, ids) in &o.plan.manual {
            out.push_str(&format!("    {m} (for {})\n", ids.join(", ")));
        }
    }
    out
}

fn us(ns: u64) -> String {
    format!("{} µs", format_us(ns, 1))
}

fn measure_table(m: &MeasureOutcome) -> String {
    let mut out = format!("\nmeasured {} each:\n", format_duration(m.duration_ns));
    // No --fix, or one that wrote nothing: one measurement (it read "each", then "-" after).
    if (!m.with_fix || m.unchanged)
        && let Some(l) = m.before
    {
        return format!(
            "\nmeasured {}: p99 {}, max {}, missed {}\n{}{}{}",
            format_duration(m.duration_ns),
            us(l.p99_ns),
            us(l.max_ns),
            l.missed,
            if m.unchanged {
                "  after: not measured again, as the fix wrote nothing\n"
            } else {
                ""
            },
            elsewhere_line(m),
            cut_short_line(m)
        );
    }
    out.push_str(&format!("  {:<8} {:>12} {:>12}\n", "", "before", "after"));
    let cell = |l: Option<Latency>, pick: &dyn Fn(Latency) -> String| {
        l.map(pick).unwrap_or_else(|| "-".into())
    };
    let rows: [(&str, &dyn Fn(Latency) -> String); 3] = [
        ("p99", &|l| us(l.p99_ns)),
        ("max", &|l| us(l.max_ns)),
        ("missed", &|l| l.missed.to_string()),
    ];
    for (name, pick) in rows {
        out.push_str(&format!(
            "  {:<8} {:>12} {:>12}\n",
            name,
            cell(m.before, pick),
            cell(m.after, pick)
        ));
    }
    for e in &m.errors {
        out.push_str(&format!("  measuring failed: {e}\n"));
    }
    if m.unchanged {
        out.push_str("  after: not measured again, as the fix wrote nothing\n");
    }
    out.push_str(&elsewhere_line(m));
    if m.before.is_some() && m.after.is_some() {
        // One run each side: no verdict. `tune search` repeats and tests.
        out.push_str(
            "  one run each: a difference here may be noise (a maximum above all); `latlab \
             tune search` measures repeats and says what they support\n",
        );
    }
    out.push_str(&cut_short_line(m));
    out
}

/// `  note: this machine was measured, …` under the measurements where a tree was checked.
fn elsewhere_line(m: &MeasureOutcome) -> String {
    m.elsewhere
        .as_ref()
        .map(|e| format!("  note: {e}\n"))
        .unwrap_or_default()
}

/// `  cut short: …` under the measurements where a signal stopped one.
fn cut_short_line(m: &MeasureOutcome) -> String {
    m.interrupted
        .as_ref()
        .map_or_else(String::new, |why| format!("  cut short: {why}\n"))
}

pub(crate) fn is_root() -> bool {
    latlab_sys::thread::euid() == 0
}

/// SIGINT ignored until dropped (then as it was).
struct IgnoreSigint(libc::sighandler_t);

impl IgnoreSigint {
    fn now() -> IgnoreSigint {
        // SAFETY: signal() with SIG_IGN installs no handler code.
        IgnoreSigint(unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) })
    }
}

impl Drop for IgnoreSigint {
    fn drop(&mut self) {
        // SAFETY: puts back the disposition signal() returned.
        unsafe { libc::signal(libc::SIGINT, self.0) };
    }
}

/// Run `latlab measure` on the live system (never a fixture root) and read its result, with
/// the words that say how a measurement a signal stopped was cut short (its result is what it
/// measured until then).
fn measure(ns: u64) -> anyhow::Result<(Latency, Option<String>)> {
    let exe = std::env::current_exe().context("finding the latlab executable")?;
    let mut cmd = Command::new(exe);
    cmd.env_remove("LATLAB_SYSROOT").args([
        "measure",
        "-D",
        &format!("{ns}ns"),
        "-q",
        "--no-samplers",
        "--json",
        "-",
    ]);
    if !is_root() {
        cmd.args(["--policy", "other", "--no-mlock"]);
    }
    // Should `check` end first (a SIGTERM, a kill), the measurement is stopped the way Ctrl-C
    // stops it, not left running with its real-time threads.
    // SAFETY: only prctl, which is async-signal-safe, runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
            Ok(())
        });
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running latlab measure")?;
    // Ctrl-C reaches the measurement too (one process group): it stops and writes what it
    // measured, which is read below. Meanwhile check ignores it, as system(3) does, so it
    // lives to say so (the child, started before, keeps its own handling).
    let out = {
        let _ignored = IgnoreSigint::now();
        child.wait_with_output().context("running latlab measure")?
    };
    // Interrupted (130): its result is written all the same, cut short.
    if !out.status.success() && out.status.code() != Some(130) {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "latlab measure exited with {}: {}",
            out.status,
            err.lines().last().unwrap_or("")
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let r = RunResult::from_json(&text).with_context(|| {
        format!(
            "reading latlab measure's result (it exited with {})",
            out.status
        )
    })?;
    let latency = Latency {
        p99_ns: r.overall.stats.p99,
        max_ns: r.overall.stats.max,
        missed: r.overall.missed,
    };
    let cut_short = (out.status.code() == Some(130))
        .then(|| r.cut_short().unwrap_or_else(|| "interrupted".into()));
    Ok((latency, cut_short))
}
