//! latlab — the Linux latency lab. The binary is the command line only: each module turns one
//! subcommand's raw arguments into validated values, at the edge, before anything on the system
//! is touched, and hands them to the library crates.

mod args;
mod check;
mod cli_error;
mod db;
mod gendocs;
mod live;
mod load;
mod measure;
mod monitor;
mod plan;
mod results;
mod run;
mod signals;
mod sysinfo;
mod trace;
mod tune;
mod tune_search;

use clap::{Parser, Subcommand};
use cli_error::CliError;
use std::process::ExitCode;

/// The Linux latency lab: measure how quickly this system wakes up, and what it costs.
#[derive(Parser)]
#[command(name = "latlab", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Read and write system files under DIR instead of / (for tests and fixture trees; also
    /// LATLAB_SYSROOT).
    #[arg(long, global = true, hide = true, value_name = "DIR")]
    sysroot: Option<std::path::PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure timer and thread wake-up latency (a cyclictest that keeps every sample).
    Measure(Box<measure::MeasureArgs>),
    /// Show what the system is and how it is set: kernel, boot options, CPUs, cpufreq, cpuidle,
    /// PM QoS, RT throttling, IRQs, virtualization.
    Sysinfo(sysinfo::SysinfoArgs),
    /// Tuning profiles (throughput, lowlatency, realtime, powersave, balanced): show the diff,
    /// apply with a journal, verify, restore (also after a crash), boot options, recommend.
    Tune(tune::TuneArgs),
    /// Check everything that limits latency here: pass, warn or fail, each with evidence,
    /// advice and its fix (a tune knob or a boot option); --fix applies the knobs.
    Check(check::CheckArgs),
    /// Trace kernel latencies with eBPF: workqueues, softirqs, tasklets, kthread work,
    /// wake-ups, hrtimer handlers, the local timer interrupt and hard IRQs.
    Trace(trace::TraceArgs),
    /// Run load generators (cpu, matrix, memory, io, procfs, rt-hog, messaging, cmd) and report
    /// their throughput.
    Load(load::LoadArgs),
    /// Run an experiment plan: every combination of its axes, repeated, saved to the store.
    Run(run::RunArgs),
    /// The results store: list, show, remove, vacuum and check stored runs.
    Db(db::DbArgs),
    /// Write a report (self-contained HTML with plots, or text, Markdown, JSON, CSV) of runs and
    /// experiments from one or several stores.
    Report(results::ReportArgs),
    /// Compare two runs or cells side by side, with what the repeats support.
    Compare(results::CompareArgs),
    /// Write a stored run as latlab JSON, CSV or cyclictest's formats.
    Export(results::ExportArgs),
    /// Read cyclictest, stress-ng --cyclic or jitterdebugger output into the store.
    Import(results::ImportArgs),
    /// Watch latency for the long term: per-CPU windows (worst case, percentiles, idle states,
    /// frequency, power) stored continuously, a dashboard and /metrics for Prometheus.
    Monitor(Box<monitor::MonitorArgs>),
    /// Serve the dashboard and /metrics of a store, without measuring.
    Serve(monitor::ServeArgs),
    /// Write man pages and shell completions (for packaging).
    #[command(hide = true)]
    GenDocs(gendocs::GenDocsArgs),
    /// Write a synthetic monitoring series (for benchmarks of the store, dashboard and /metrics).
    #[command(hide = true)]
    FillMonitor(monitor::FillArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli_error::clap_exit(e),
    };
    let sys = match &cli.sysroot {
        Some(root) => latlab_sys::Sys::new(root),
        None => latlab_sys::Sys::from_env(),
    };
    if !sys.root().is_dir() {
        let e = format!(
            "system root {}: {} (accepted: a directory holding a system's /proc, /sys and /dev, \
             as --sysroot or LATLAB_SYSROOT)",
            sys.root().display(),
            if sys.root().exists() {
                "not a directory"
            } else {
                "no such directory"
            }
        );
        eprintln!("latlab: error: {e}");
        args::junit_of_refusal(&std::env::args_os().collect::<Vec<_>>(), &e);
        return ExitCode::from(2);
    }
    match &cli.command {
        // tune speaks of a journal left behind itself; a monitor or a measurement holding a
        // profile puts it back first, and says so.
        Command::Tune(_) => {}
        Command::Monitor(m) if m.holds_profile() => {}
        Command::Measure(m) if m.holds_profile() => {}
        _ => tune::stale_journal_notice(&sys),
    }
    quiet_broken_pipe();
    // Unwinding runs the guards (a profile applied for a run is put back) before this returns.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(cli.command, &sys))) {
        Ok(code) => code,
        // The reader of the output went away (`latlab db show 3 | head`, `… 2>&1 | head`): end
        // quietly, with the status a shell gives a program SIGPIPE ended.
        Err(payload) if is_broken_pipe(payload.as_ref()) => ExitCode::from(141),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// `print!` and `eprint!` panic when standard output or error is a pipe its reader closed; that
/// panic is not a fault of latlab and is not reported as one (every other panic is, as before).
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe(info.payload()) {
            default(info);
        }
    }));
}

fn is_broken_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied());
    text.is_some_and(|t| {
        (t.starts_with("failed printing to stdout") || t.starts_with("failed printing to stderr"))
            && t.contains("Broken pipe")
    })
}

fn dispatch(command: Command, sys: &latlab_sys::Sys) -> ExitCode {
    let result = match command {
        Command::Measure(args) => measure::run(*args, sys),
        Command::Sysinfo(args) => sysinfo::run(args, sys),
        Command::Tune(args) => tune::run(args, sys),
        Command::Check(args) => check::run(args, sys),
        Command::Trace(args) => trace::run(args, sys),
        Command::Load(args) => load::run(args, sys),
        Command::Run(args) => run::run(args, sys),
        Command::Db(args) => db::run(args),
        Command::Report(args) => results::report(args),
        Command::Compare(args) => results::compare(args),
        Command::Export(args) => results::export(args),
        Command::Import(args) => results::import(args),
        Command::Monitor(args) => monitor::run(*args, sys),
        Command::Serve(args) => monitor::serve(args),
        Command::GenDocs(args) => gendocs::gen_docs(args),
        Command::FillMonitor(args) => monitor::fill(args, sys),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("latlab: error: {e}");
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            if matches!(e, CliError::Usage(_)) {
                args::junit_of_refusal(&args, &e.to_string());
                ExitCode::from(2)
            } else {
                args::junit_of_failure(&args, &e.to_string());
                ExitCode::from(1)
            }
        }
    }
}
