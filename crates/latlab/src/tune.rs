//! `latlab tune`: profiles that set the system for throughput, low latency, real time or low
//! power, and always put it back. list / show / apply / status / verify / restore / boot /
//! recommend / hold; the work is done by `latlab-tune`.

use crate::cli_error::{CliError, CliResult};
use anyhow::anyhow;
use clap::{Args, Subcommand};
use latlab_model::units::{CpuList, format_duration};
use latlab_sys::Sys;
use latlab_tune::boot::{self, BootStatus};
use latlab_tune::{
    ApplyOptions, ItemState, Plan, Profile, Profiles, RestoreReport, TestHooks, TuneError,
};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(
    after_help = "Profiles are TOML files: the built-ins, then /etc/latlab/profiles/*.toml, then \
each --profile-dir (a later file of the same name replaces an earlier one). A PROFILE argument is \
a name or the path of a .toml file."
)]
pub struct TuneArgs {
    /// Where the journal of original values and the lock live (default /var/lib/latlab; also
    /// LATLAB_STATE_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// A further directory of profiles (*.toml); may be given more than once.
    #[arg(long, global = true, value_name = "DIR")]
    profile_dir: Vec<PathBuf>,

    #[command(subcommand)]
    command: TuneCommand,
}

#[derive(Subcommand, Debug)]
enum TuneCommand {
    /// List the profiles with what each trades.
    List,
    /// What a profile would change here, knob by knob (current → target).
    Show(ProfileArgs),
    /// Apply a profile until `tune restore` (journaled; a failed write rolls back).
    Apply(ProfileArgs),
    /// What is applied, since when, and by whom.
    Status,
    /// Check each applied value (or a PROFILE's targets): expected, actual; exit 1 on drift, or
    /// when no profile is applied and none is given.
    Verify(VerifyArgs),
    /// Put back every value the journal recorded (also after a crash or a reboot).
    Restore,
    /// The kernel command line a profile wants here; --write makes a GRUB drop-in.
    Boot(BootArgs),
    /// A profile for this machine, with the facts that led to it (and the goal, if given).
    Recommend(RecommendArgs),
    /// Hold a /dev/cpu_dma_latency request until Ctrl-C or for --duration.
    Hold(HoldArgs),
    /// Find the settings that lower latency here by measuring them: each knob against the
    /// baseline, the helpful ones combined, the result confirmed and written as a profile.
    Search(Box<crate::tune_search::SearchArgs>),
}

#[derive(Args, Debug)]
struct ProfileArgs {
    /// A profile name or the path of a .toml file.
    profile: String,
    /// CPUs whose per-CPU settings are touched (default: every online CPU); for a profile
    /// with isolation, also the CPUs isolated.
    #[arg(long, value_name = "LIST")]
    cpus: Option<CpuList>,
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// Compare with this profile instead of the journal.
    profile: Option<String>,
    /// With a PROFILE: the CPUs its per-CPU settings are checked on, as given to `tune apply`
    /// (default: every online CPU). The journal records its own.
    #[arg(long, value_name = "LIST", requires = "profile")]
    cpus: Option<CpuList>,
}

#[derive(Args, Debug)]
struct BootArgs {
    /// A profile name or the path of a .toml file (given unless --remove).
    #[arg(required_unless_present = "remove")]
    profile: Option<String>,
    /// CPUs the options are for, as `tune apply --cpus` takes them (the isolated CPUs of a
    /// profile with isolation).
    #[arg(long, value_name = "LIST")]
    cpus: Option<CpuList>,
    /// Write the options to /etc/default/grub.d/latlab.cfg.
    #[arg(long, conflicts_with = "remove")]
    write: bool,
    /// Remove /etc/default/grub.d/latlab.cfg (whichever profile wrote it: it takes no profile).
    #[arg(long, conflicts_with_all = ["profile", "cpus"])]
    remove: bool,
}

#[derive(Args, Debug)]
struct RecommendArgs {
    /// What matters most here; without it the machine's facts alone decide (a virtual machine
    /// or a server: throughput)
    #[arg(long, value_enum)]
    goal: Option<GoalArg>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum GoalArg {
    /// The shortest wake-up latency (lowlatency, or realtime with isolated CPUs or an RT kernel)
    Latency,
    /// The most work per second (throughput)
    Throughput,
    /// The least power (powersave)
    Power,
    /// Neither way (balanced)
    Balanced,
}

impl From<GoalArg> for boot::Goal {
    fn from(g: GoalArg) -> Self {
        match g {
            GoalArg::Latency => boot::Goal::Latency,
            GoalArg::Throughput => boot::Goal::Throughput,
            GoalArg::Power => boot::Goal::Power,
            GoalArg::Balanced => boot::Goal::Balanced,
        }
    }
}

#[derive(Args, Debug)]
struct HoldArgs {
    /// Take the request from this profile's system.cpu_dma_latency_us.
    profile: Option<String>,
    /// The latency limit in µs (0: CPUs only poll when idle).
    #[arg(long, value_name = "US", conflicts_with = "profile", value_parser = crate::args::pm_qos_us)]
    us: Option<u32>,
    /// Release after this long (default: until Ctrl-C or SIGTERM).
    #[arg(short = 'D', long, value_name = "DUR", value_parser = crate::args::secs)]
    duration: Option<crate::args::Ns>,
}

/// Print a one-line notice when a tuning journal was left behind (a killed apply, a run that
/// did not finish, a tuning from before a reboot). Never fails.
pub fn stale_journal_notice(sys: &Sys) {
    stale_journal_notice_in(sys, &latlab_tune::default_state_dir(sys));
}

/// The same for the journal in `dir`.
fn stale_journal_notice_in(sys: &Sys, dir: &std::path::Path) {
    if let Some(notice) = schedule_notice(sys, dir) {
        eprintln!("latlab: note: {notice}");
    }
    if !dir.join(latlab_tune::journal::JOURNAL_FILE).exists() {
        return;
    }
    if let Ok(status) = latlab_tune::status(sys, dir)
        && let Some(notice) = status.stale_notice(sys, dir)
    {
        eprintln!("latlab: note: {notice}");
    }
}

/// A tuning a run that did not finish left in force (its journal in `dir`; not one a reboot
/// has reset), as the warning a measurement taken under it carries.
pub fn left_in_force(sys: &Sys, dir: &std::path::Path) -> Option<String> {
    if !dir.join(latlab_tune::journal::JOURNAL_FILE).exists() {
        return None;
    }
    let status = latlab_tune::status(sys, dir).ok()?;
    if status.rebooted {
        return None;
    }
    let notice = status.stale_notice(sys, dir)?;
    Some(format!("measured under a tuning left in force: {notice}"))
}

/// What a monitor's `--schedule` that ended without restoring left, if anything.
fn schedule_notice(sys: &Sys, dir: &std::path::Path) -> Option<String> {
    let left: Vec<String> = latlab_monitor::schedule::stale(sys, dir)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    (!left.is_empty()).then(|| {
        format!(
            "a monitor's --schedule ended without restoring the governor of {}; `{}` puts it back",
            left.join(", "),
            latlab_tune::restore_command(sys, dir)
        )
    })
}

fn usage(e: TuneError) -> CliError {
    if e.is_usage() {
        CliError::Usage(e.to_string())
    } else {
        CliError::Failed(anyhow!(e))
    }
}

struct Ctx {
    sys: Sys,
    state_dir: PathBuf,
    profiles: Profiles,
}

impl Ctx {
    /// The command that restores this journal, as it can be copied.
    fn restore_command(&self) -> String {
        latlab_tune::restore_command(&self.sys, &self.state_dir)
    }

    fn resolve(&self, name: &str) -> CliResult<Profile> {
        self.profiles.resolve(name).map_err(|e| usage(e.into()))
    }
}

pub fn run(args: TuneArgs, sys: &Sys) -> CliResult<ExitCode> {
    let dirs = crate::args::profile_dirs(sys, &args.profile_dir)?;
    // Only what writes the journal needs to make the directory.
    let writes = matches!(
        args.command,
        TuneCommand::Apply(_) | TuneCommand::Restore | TuneCommand::Hold(_)
    );
    match &args.state_dir {
        Some(dir) => state_dir_usable(dir, writes)?,
        None => env_state_dir_usable(writes)?,
    }
    let ctx = Ctx {
        sys: sys.clone(),
        state_dir: args
            .state_dir
            .clone()
            .unwrap_or_else(|| latlab_tune::default_state_dir(sys)),
        profiles: Profiles::load(&dirs).map_err(|e| usage(e.into()))?,
    };
    // What reads the system as it is (a plan, a recommendation, a verification) says first
    // when a tuning left behind is in it; status, restore and apply speak of it themselves.
    let reads_the_system = matches!(
        &args.command,
        TuneCommand::Show(_)
            | TuneCommand::Boot(_)
            | TuneCommand::Recommend(_)
            | TuneCommand::Hold(_)
            | TuneCommand::Search(_)
            | TuneCommand::Verify(_)
    );
    if reads_the_system {
        stale_journal_notice_in(sys, &ctx.state_dir);
    }
    match args.command {
        TuneCommand::List => list(&ctx),
        TuneCommand::Show(a) => show(&ctx, &a),
        TuneCommand::Apply(a) => apply(&ctx, &a),
        TuneCommand::Status => status(&ctx),
        TuneCommand::Verify(a) => verify(&ctx, &a),
        TuneCommand::Restore => restore(&ctx),
        TuneCommand::Boot(a) => boot_cmd(&ctx, &a),
        TuneCommand::Recommend(a) => recommend(&ctx, a.goal.map(boot::Goal::from)),
        TuneCommand::Hold(a) => hold(&ctx, &a),
        TuneCommand::Search(a) => crate::tune_search::run(*a, &ctx.sys, ctx.state_dir.clone()),
    }
}

/// `--state-dir`: a directory, or one that can be made in its parent directory (tried for real
/// when `writes`). A parent that does not exist is a path mistyped, as for `--db`: the journal
/// would go where `tune status` and `tune restore` with the path meant do not look.
pub(crate) fn state_dir_usable(dir: &std::path::Path, writes: bool) -> CliResult<()> {
    usable_as("--state-dir ", dir, writes)
}

/// The state directory `LATLAB_STATE_DIR` names, for a command given no `--state-dir`: checked
/// as `--state-dir` is (a mistyped one was made, and the machine tuned).
pub(crate) fn env_state_dir_usable(writes: bool) -> CliResult<()> {
    match std::env::var_os("LATLAB_STATE_DIR") {
        Some(d) if !d.is_empty() => {
            usable_as("LATLAB_STATE_DIR=", std::path::Path::new(&d), writes)
        }
        _ => Ok(()),
    }
}

/// [`state_dir_usable`] of a directory named by `what` (`--state-dir ` or
/// `LATLAB_STATE_DIR=`).
fn usable_as(what: &str, dir: &std::path::Path, writes: bool) -> CliResult<()> {
    let refused = |why: &str| {
        CliError::Usage(format!(
            "{what}{}: {why} (accepted: a directory latlab may write its journal in)",
            dir.display()
        ))
    };
    if dir.exists() {
        return if dir.is_dir() {
            Ok(())
        } else {
            Err(refused("not a directory"))
        };
    }
    // It is made in its parent, which must be there: a parent missing is a path mistyped.
    let at = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !at.is_dir() {
        return Err(refused(&if at.exists() {
            format!("{} is not a directory", at.display())
        } else {
            format!("no directory {}", at.display())
        }));
    }
    if writes {
        latlab_sys::probe_write(at).map_err(|e| {
            refused(&format!(
                "cannot be made in {}: {}",
                at.display(),
                latlab_tune::describe_io_error(&e)
            ))
        })?;
    }
    Ok(())
}

/// Greedy word wrap with an indent.
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent + line.len() + 1 + word.len() > width {
            out.push_str(&" ".repeat(indent));
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&" ".repeat(indent));
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn list(ctx: &Ctx) -> CliResult<ExitCode> {
    for p in ctx.profiles.list() {
        let source = match (&p.source, p.overrides_builtin) {
            (s, true) => format!("{s}, replaces the built-in"),
            (s, false) => s.to_string(),
        };
        println!("{} ({source})", p.name);
        match &p.description {
            Ok(d) => print!("{}", wrap(d, 4, 100)),
            Err(e) => println!("    unreadable: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn header(profile: &Profile, plan: &Plan) {
    println!("profile {} ({})", profile.name, profile.source);
    if !profile.includes.is_empty() {
        println!("includes {}", profile.includes.join(", "));
    }
    print!("{}", wrap(&profile.description, 4, 100));
    print!("on this machine: {}", plan.cpus.phrase());
    if let Some(s) = &plan.split {
        print!(
            "; isolated {} ({}), housekeeping {}",
            s.isolated, s.why, s.housekeeping
        );
    }
    println!();
}

fn knob_lines(plan: &Plan) {
    let width = plan
        .items
        .iter()
        .map(|i| i.knob.chars().count())
        .max()
        .unwrap_or(0)
        .min(64);
    for item in &plan.items {
        let state = match &item.state {
            ItemState::Change(c) => format!("{} → {}", c.old_value(), c.new_value()),
            ItemState::Set { value } => format!("{value} (already set)"),
            ItemState::Unsupported { why } => format!("unsupported here: {why}"),
        };
        println!("  {:<width$}  {state}", item.knob);
    }
    for n in &plan.notes {
        print!("{}", wrap(&format!("note: {n}"), 2, 100));
    }
}

fn show(ctx: &Ctx, a: &ProfileArgs) -> CliResult<ExitCode> {
    let profile = ctx.resolve(&a.profile)?;
    let cpus = a.cpus.clone();
    let plan = Plan::build(&ctx.sys, &profile, cpus.as_ref()).map_err(usage)?;
    header(&profile, &plan);
    knob_lines(&plan);
    let (c, s, u) = plan.counts();
    println!("{c} to change, {s} already set, {u} unsupported here");
    if !profile.boot.is_set() && profile.kernel == Default::default() {
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "boot options and kernel build settings: `latlab tune boot {}`",
        a.profile
    );
    Ok(ExitCode::SUCCESS)
}

fn print_restore(report: &RestoreReport) {
    for l in &report.lines {
        println!("  {l}");
    }
}

/// How an apply with the stop signals held off ended.
pub enum Held<T> {
    Done(T),
    /// A stop signal came while it wrote: what the restore that followed did, and the
    /// command that tries it again.
    Interrupted(Result<RestoreReport, TuneError>, String),
}

/// Run `apply`, a tuning until `tune restore`, with Ctrl-C, SIGTERM and SIGHUP held off until
/// its writes are done: a signal among them then puts every value back from the journal, so no
/// part of a profile is left applied. (A second signal exits at once; `tune status` then says
/// what is left.)
pub fn held_off<T>(sys: &Sys, state_dir: &std::path::Path, apply: impl FnOnce() -> T) -> Held<T> {
    let interrupts = crate::signals::Interrupts::install();
    let out = apply();
    if !interrupts.interrupted() {
        return Held::Done(out);
    }
    Held::Interrupted(
        latlab_tune::restore(sys, state_dir),
        latlab_tune::restore_command(sys, state_dir),
    )
}

/// The error of an apply: a previous profile not fully restored, or the apply's own.
fn held_error(e: TuneError, profile: &str) -> CliResult<ExitCode> {
    match e {
        TuneError::RestoreIncomplete { failed, report, .. } => {
            println!(
                "restoring {} first:",
                report.profile.as_deref().unwrap_or("the previous profile")
            );
            print_restore(&report);
            Err(CliError::Failed(anyhow!(
                "restore of the previous profile incomplete ({}); nothing of {profile} was \
                 applied",
                failed.join("; ")
            )))
        }
        e => Err(usage(e)),
    }
}

/// An apply a signal interrupted: what was put back; exit code 130.
pub fn interrupted_apply(
    profile: &str,
    restore: Result<RestoreReport, TuneError>,
    command: &str,
) -> CliResult<ExitCode> {
    match restore {
        Ok(report) => {
            println!("interrupted while applying {profile}: every value written is put back:");
            print_restore(&report);
            Ok(ExitCode::from(130))
        }
        Err(e) => Err(CliError::Failed(anyhow!(
            "interrupted while applying {profile}, and putting its values back failed: {e}; \
             run `{command}`"
        ))),
    }
}

fn apply(ctx: &Ctx, a: &ProfileArgs) -> CliResult<ExitCode> {
    let profile = ctx.resolve(&a.profile)?;
    // A profile of no setting `tune apply` writes would leave a journal that says a profile is
    // applied, and blocks `measure --profile`, while nothing of it is in force.
    let plan = latlab_tune::Plan::build(&ctx.sys, &profile, a.cpus.as_ref()).map_err(usage)?;
    if plan.items.is_empty() && profile.system.cpu_dma_latency_us.is_none() {
        return Err(CliError::Usage(format!(
            "profile {} sets nothing `tune apply` writes{} (accepted: a profile with [cpu.*], \
             [system] or [isolation] settings for these CPUs; [boot] options are written by \
             `latlab tune boot`)",
            profile.name,
            if plan.notes.is_empty() {
                String::new()
            } else {
                format!(": {}", plan.notes.join("; "))
            }
        )));
    }
    let opts = ApplyOptions {
        cpus: a.cpus.clone(),
        temporary: false,
        restore_previous: true,
        hooks: TestHooks::from_env(),
    };
    let applied = match held_off(&ctx.sys, &ctx.state_dir, || {
        latlab_tune::apply(&ctx.sys, &profile, &ctx.state_dir, &opts)
    }) {
        Held::Done(Ok(a)) => a,
        Held::Interrupted(restore, command) => {
            return interrupted_apply(&profile.name, restore, &command);
        }
        Held::Done(Err(e)) => return held_error(e, &profile.name),
    };
    if let Some(prev) = &applied.previous {
        println!(
            "restored {} first:",
            prev.profile.as_deref().unwrap_or("the previous profile")
        );
        print_restore(prev);
    }
    println!(
        "applied {} on {}: {} value{} written",
        profile.name,
        applied.plan.cpus.phrase(),
        applied.written.len(),
        if applied.written.len() == 1 { "" } else { "s" }
    );
    for c in &applied.written {
        println!("  {}  {} → {}", c.knob, c.old_value(), c.new_value());
    }
    for (c, why) in &applied.skipped {
        println!("  {}  left alone: {why}", c.knob);
    }
    for item in &applied.plan.items {
        if let ItemState::Unsupported { why } = &item.state {
            println!("  {}  unsupported here: {why}", item.knob);
        }
    }
    for n in &applied.plan.notes {
        print!("{}", wrap(&format!("note: {n}"), 2, 100));
    }
    println!(
        "journal: {}; `{}` puts every value back",
        applied.journal.display(),
        ctx.restore_command()
    );
    Ok(ExitCode::SUCCESS)
}

/// The PM QoS CPU latency limit some program holds, when one does (the kernel's default, no
/// limit, is 2000 s).
fn pm_qos_held(sys: &Sys) -> Option<String> {
    let us = sys
        .cpu_dma_latency()
        .ok()
        .filter(|&us| us < 2_000_000_000)?;
    Some(format!(
        "PM QoS: a CPU latency limit of {us} µs is held through /dev/cpu_dma_latency (by `latlab \
         tune hold`, a measurement's --pm-qos or another program; it ends when that program \
         closes the file)"
    ))
}

fn status(ctx: &Ctx) -> CliResult<ExitCode> {
    if let Some(n) = schedule_notice(&ctx.sys, &ctx.state_dir) {
        print!("{}", wrap(&n, 0, 100));
    }
    if let Some(held) = pm_qos_held(&ctx.sys) {
        print!("{}", wrap(&held, 0, 100));
    }
    let st = latlab_tune::status(&ctx.sys, &ctx.state_dir).map_err(usage)?;
    let Some(j) = &st.journal else {
        println!(
            "no profile applied by latlab (no journal in {})",
            ctx.state_dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let h = &j.header;
    println!(
        "profile {} ({}) applied on {} since {} by latlab pid {}{}",
        h.profile,
        h.source,
        latlab_model::units::CpuList::parse(&h.cpus)
            .map_or_else(|_| format!("CPUs {}", h.cpus), |c| c.named()),
        st.since().unwrap_or_default(),
        h.pid,
        if h.temporary { ", for a run" } else { "" }
    );
    let unwritten = latlab_tune::apply::unwritten_last(&ctx.sys, j);
    let live = j.live_entries().len() - usize::from(unwritten.is_some());
    println!(
        "  {live} value{} written{}; journal {}",
        if live == 1 { "" } else { "s" },
        if j.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} refused by the kernel", j.skipped.len())
        },
        j.path.display()
    );
    if let Some(root) = &st.other_root {
        println!(
            "  written under the system root {root}, not this one: its values are that tree's \
             (`{}`)",
            st.restore_command(&ctx.sys, &ctx.state_dir)
        );
    }
    match st.holder {
        Some(Some(pid)) => println!("  in force: latlab pid {pid} holds the tuning lock"),
        Some(None) => println!("  in force: a latlab process holds the tuning lock"),
        None => {}
    }
    if !j.complete && st.holder.is_none() {
        println!(
            "  the apply did not finish: the process was killed while writing{}",
            if unwritten.is_some() {
                " (the last value it journaled was never written)"
            } else {
                ""
            }
        );
    }
    if st.rebooted {
        println!("  the system was rebooted since: the values are back to their boot defaults");
    }
    if let Some(n) = st.stale_notice(&ctx.sys, &ctx.state_dir) {
        print!("{}", wrap(&n, 2, 100));
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(ctx: &Ctx, a: &VerifyArgs) -> CliResult<ExitCode> {
    let report = match &a.profile {
        Some(name) => {
            let profile = ctx.resolve(name)?;
            let cpus = a.cpus.clone();
            latlab_tune::verify_profile(&ctx.sys, &profile, cpus.as_ref(), &ctx.state_dir)
                .map_err(usage)?
        }
        None => {
            let journal = latlab_tune::verify(&ctx.sys, &ctx.state_dir).map_err(usage)?;
            match &journal.applied {
                // An apply that wrote nothing (every value was already as the profile wants)
                // journaled nothing to compare: the profile itself is compared.
                Some((name, cpus))
                    if journal.checks.is_empty() && journal.not_written.is_empty() =>
                {
                    let profile = ctx.resolve(name)?;
                    let cpus = latlab_model::units::CpuList::parse(cpus).ok();
                    latlab_tune::VerifyReport {
                        profile: journal.profile.clone(),
                        since: journal.since.clone(),
                        rebooted: journal.rebooted,
                        unfinished: journal.unfinished,
                        ..latlab_tune::verify_profile(
                            &ctx.sys,
                            &profile,
                            cpus.as_ref(),
                            &ctx.state_dir,
                        )
                        .map_err(usage)?
                    }
                }
                _ => journal,
            }
        }
    };
    let Some(profile) = &report.profile else {
        println!("nothing to verify: no profile is applied (give a PROFILE to compare with one)");
        return Ok(ExitCode::from(1));
    };
    match &report.since {
        Some(s) => println!("profile {profile}, applied since {s}"),
        None => println!("profile {profile}, compared with this system"),
    }
    if report.rebooted {
        println!("  the system was rebooted since apply");
    }
    // Drift is a change since an apply; a profile compared with a system it was not applied
    // to only differs from it.
    let applied = report.since.is_some();
    for c in &report.checks {
        if c.ok {
            println!("  ok     {} = {}", c.knob, c.expected);
        } else if applied {
            println!(
                "  DRIFT  {}: expected {}, actual {}; changed by: {}",
                c.knob,
                c.expected,
                c.actual,
                c.who.as_deref().unwrap_or("unknown")
            );
        } else {
            println!(
                "  DIFF   {}: the profile wants {}, the system has {}",
                c.knob, c.expected, c.actual
            );
        }
    }
    for (knob, why) in &report.unsupported {
        println!("  -      {knob}: unsupported here: {why}");
    }
    for note in report.irq_notes(&ctx.sys) {
        println!("  note   {note}");
    }
    // A /dev/cpu_dma_latency request is held by a process, not written: said as it stands, and
    // compared when one is held (its absence is a note: `tune apply` holds none).
    let named = a.profile.as_deref();
    let source = report.applied.as_ref().map(|(source, _)| source.as_str());
    let pm_qos_met = pm_qos_check(ctx, named.or(source).unwrap_or(profile));
    for knob in &report.not_written {
        println!("  -      {knob}: not written: the apply was killed before it wrote this one");
    }
    let drift = report.drifted();
    let compared = report.checks.len() + usize::from(pm_qos_met == Some(true));
    // A killed apply's journal holds only what it wrote: the values compared may all be as
    // written while the rest of the profile never was.
    if report.unfinished {
        println!(
            "verify: failed: the apply was killed before it finished, so the profile is only \
             partly in force ({} of its values compared{}); `{}` puts them back, then apply it \
             again",
            compared,
            if drift > 0 {
                format!(", {drift} drifted")
            } else {
                String::new()
            },
            ctx.restore_command()
        );
        return Ok(ExitCode::from(1));
    }
    if compared == 0 && pm_qos_met == Some(false) {
        println!(
            "verify: failed: the profile's one value that can be read here, its \
             /dev/cpu_dma_latency request, is not held (see above)"
        );
        return Ok(ExitCode::from(1));
    }
    if compared == 0 {
        // Nothing compared is no pass.
        println!(
            "verify: nothing compared: the profile sets no value that can be read back here (a \
             /dev/cpu_dma_latency request is held by a process: `latlab tune hold`)"
        );
        return Ok(ExitCode::from(1));
    }
    if drift == 0 {
        println!(
            "verify: passed ({} as expected)",
            latlab_model::units::plural(compared as u64, "value", "values")
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "verify: failed ({drift} of {compared} values {})",
            if applied {
                "drifted"
            } else {
                "differ from the profile, which is not applied"
            }
        );
        Ok(ExitCode::from(1))
    }
}

/// Print how profile `which`'s /dev/cpu_dma_latency request stands; whether a process
/// holds one as strict as it wants (`None`: the profile asks for none, or it cannot be read).
fn pm_qos_check(ctx: &Ctx, which: &str) -> Option<bool> {
    let (us, hold) = ctx.resolve(which).ok().and_then(|p| {
        p.system
            .cpu_dma_latency_us
            .as_ref()
            .map(|d| (d.value, p.hold_command()))
    })?;
    match ctx.sys.cpu_dma_latency() {
        Ok(held) if held <= i64::from(us) => {
            println!(
                "  ok     /dev/cpu_dma_latency: {held} µs held by a process (the profile wants \
                 {us} µs or less)"
            );
            Some(true)
        }
        Ok(held) => {
            println!(
                "  note   system.cpu_dma_latency_us = {us}: not held ({}; a request lasts while \
                 a process holds it: `{hold}`)",
                if held < latlab_model::system::PmQos::NO_REQUEST_US {
                    format!("a process holds a looser one, {held} µs")
                } else {
                    "no process holds one".to_string()
                }
            );
            Some(false)
        }
        Err(e) => {
            println!("  -      system.cpu_dma_latency_us = {us}: cannot be read: {e}");
            None
        }
    }
}

fn restore(ctx: &Ctx) -> CliResult<ExitCode> {
    // What a killed monitor's --schedule left comes back too.
    let schedule = latlab_monitor::schedule::restore_stale(&ctx.sys, &ctx.state_dir);
    for line in &schedule {
        println!("monitor schedule: {line}");
    }
    match latlab_tune::restore(&ctx.sys, &ctx.state_dir) {
        Ok(report) => {
            let Some(profile) = &report.profile else {
                if schedule.is_empty() {
                    println!(
                        "nothing to restore (no journal in {})",
                        ctx.state_dir.display()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            };
            let how = if report.rebooted {
                " (rebooted since apply: nothing written, the reboot reset the values)"
            } else if report.interrupted {
                " (its apply had been interrupted)"
            } else {
                ""
            };
            if report.lines.is_empty() {
                println!("restored {profile}{how}: it had written no value");
            } else {
                println!("restored {profile}{how}:");
                print_restore(&report);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ TuneError::RestoreIncomplete { .. }) => {
            if let TuneError::RestoreIncomplete { report, .. } = &e {
                println!(
                    "restoring {}:",
                    report.profile.as_deref().unwrap_or("the profile")
                );
                print_restore(report);
            }
            Err(CliError::Failed(anyhow!(e)))
        }
        Err(e) => Err(usage(e)),
    }
}

fn boot_cmd(ctx: &Ctx, a: &BootArgs) -> CliResult<ExitCode> {
    if a.remove {
        match boot::remove_dropin(&ctx.sys).map_err(usage)? {
            Some(p) => println!(
                "removed {}; run {} and reboot to drop its options",
                p.display(),
                boot::grub_command(&ctx.sys)
            ),
            None => println!("no {} to remove", boot::GRUB_DROPIN),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = &a.profile else {
        return Err(CliError::Usage(
            "tune boot needs a PROFILE (accepted: a profile name or a .toml path, or --remove)"
                .into(),
        ));
    };
    let profile = ctx.resolve(name)?;
    let cpus = a.cpus.clone();
    let advice = boot::advise(&ctx.sys, &profile, cpus.as_ref()).map_err(usage)?;
    if let (Some(list), None) = (&cpus, &advice.split) {
        return Err(CliError::Usage(format!(
            "--cpus {list}: profile {} isolates no CPUs, and the boot options take --cpus only \
             as the CPUs to isolate (accepted: --cpus with a profile that has an [isolation] \
             table, such as realtime)",
            profile.name
        )));
    }
    println!("kernel command line for profile {}", profile.name);
    println!("  now: {}", advice.current);
    if let Some(s) = &advice.split {
        println!(
            "  isolated CPUs {} ({}), housekeeping {}",
            s.isolated, s.why, s.housekeeping
        );
    }
    if advice.options.is_empty() && advice.kernel.is_empty() {
        println!("  the profile wants no boot options");
        return Ok(ExitCode::SUCCESS);
    }
    let width = advice
        .options
        .iter()
        .map(|o| o.option.len())
        .max()
        .unwrap_or(0);
    for o in &advice.options {
        let status = match &o.status {
            BootStatus::Add => format!("to add: {}", o.effect),
            BootStatus::AlreadySet => format!("already set: {}", o.effect),
            BootStatus::Differs { now } => format!("now {now}; would change: {}", o.effect),
            BootStatus::NeedsKernel { why } => format!("needs a different kernel: {why}"),
            BootStatus::BuiltIn { why } => format!("in effect already: {why}"),
            BootStatus::Unsupported { why } => format!("unsupported here: {why}"),
        };
        println!("  {:<width$}  {status}", o.option);
    }
    for k in &advice.kernel {
        match &k.status {
            Ok(how) => println!("  {}: this kernel has it ({how})", k.what),
            Err(why) => print!(
                "{}",
                wrap(
                    &format!("{}: needs a different kernel: {why}", k.what),
                    2,
                    100
                )
            ),
        }
    }
    let additions = advice.additions();
    if additions.is_empty() {
        println!("nothing to add to the command line");
        return Ok(ExitCode::SUCCESS);
    }
    println!("to add: {additions}");
    if a.write {
        let w = boot::write_dropin(&ctx.sys, &advice).map_err(usage)?;
        if let Some(old) = &w.replaced {
            println!("replaced the previous drop-in:\n{old}");
        }
        println!(
            "wrote {}; run {} and reboot for it to take effect; `{}` then checks /proc/cmdline",
            w.path.display(),
            advice.grub_command,
            latlab_tune::command(&ctx.sys, &format!("tune boot {name}"))
        );
    } else if boot::has_grub(&ctx.sys) {
        println!(
            "`{}` puts them in {} (then run {} and reboot)",
            latlab_tune::command(&ctx.sys, &format!("tune boot {name} --write")),
            boot::GRUB_DROPIN,
            advice.grub_command
        );
    } else {
        println!("{}", boot::NO_GRUB);
    }
    Ok(ExitCode::SUCCESS)
}

fn recommend(ctx: &Ctx, goal: Option<boot::Goal>) -> CliResult<ExitCode> {
    let r = boot::recommend(&ctx.sys, goal);
    println!("recommended: {}", r.profile);
    print!("{}", wrap(&format!("because: {}", r.reason), 2, 100));
    println!("facts:");
    for f in &r.facts {
        print!("{}", wrap(&format!("- {f}"), 2, 100));
    }
    // A profile that would change nothing here is said so (this VM, without cpufreq).
    let plan = ctx
        .resolve(&r.profile)
        .ok()
        .and_then(|p| latlab_tune::Plan::build(&ctx.sys, &p, None).ok());
    if let Some((0, set, unsupported)) = plan.as_ref().map(latlab_tune::Plan::counts) {
        print!(
            "{}",
            wrap(
                &format!(
                    "note: it would change nothing here: {set} already set, {unsupported} \
                     unsupported here"
                ),
                0,
                100
            )
        );
    }
    println!(
        "see what it changes with `{}`, apply it with `{}`",
        latlab_tune::command(&ctx.sys, &format!("tune show {}", r.profile)),
        latlab_tune::command(&ctx.sys, &format!("tune apply {}", r.profile))
    );
    if goal.is_none() {
        println!(
            "for the shortest wake-up latency instead: `{}`; to measure which settings help \
             here: `{}`",
            latlab_tune::command(&ctx.sys, "tune recommend --goal latency"),
            latlab_tune::command(&ctx.sys, "tune search")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn hold(ctx: &Ctx, a: &HoldArgs) -> CliResult<ExitCode> {
    if a.duration.is_some_and(|d| d.0 == 0) {
        return Err(CliError::Usage(
            "--duration 0: too short (accepted: e.g. 100ms, 10s, 5m)".into(),
        ));
    }
    let us = match (&a.profile, a.us) {
        (_, Some(us)) => us,
        (Some(name), None) => {
            let profile = ctx.resolve(name)?;
            profile
                .system
                .cpu_dma_latency_us
                .map(|v| v.value)
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "profile {name} sets no system.cpu_dma_latency_us (accepted: a profile \
                         that sets it, or --us N)"
                    ))
                })?
        }
        (None, None) => {
            return Err(CliError::Usage(
                "tune hold: no latency limit given (accepted: --us N, or a PROFILE that sets \
                 system.cpu_dma_latency_us)"
                    .into(),
            ));
        }
    };
    let limit = a.duration.map(|d| std::time::Duration::from_nanos(d.0));
    let held = ctx
        .sys
        .hold_pm_qos(us)
        .map_err(|e| CliError::Failed(anyhow!("{e}{}", latlab_sys::pm_qos_hint(&e))))?;
    println!(
        "holding /dev/cpu_dma_latency at {us} µs {}; the request ends when latlab exits",
        match limit {
            Some(d) => format!("for {}", format_duration(d.as_nanos() as u64)),
            None => "until Ctrl-C or SIGTERM".to_string(),
        }
    );
    let why = crate::signals::wait(limit);
    drop(held);
    println!(
        "released ({})",
        why.map(|s| format!("{s} received"))
            .unwrap_or_else(|| "time is up".into())
    );
    Ok(ExitCode::SUCCESS)
}
