//! The two kinds of failure a command can end with, and their exit codes.

use std::process::ExitCode;

/// `Usage`: bad input, exit code 2, reported before anything is touched.
/// `Failed`: a failure while running, exit code 1.
#[derive(Debug)]
pub enum CliError {
    Usage(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Failed(e)
    }
}

/// One line: the bad input as said, or the failure with its causes.
impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(m) => f.write_str(m),
            CliError::Failed(e) => write!(f, "{e:#}"),
        }
    }
}

impl From<latlab_session::Error> for CliError {
    fn from(e: latlab_session::Error) -> Self {
        match e {
            latlab_session::Error::Usage(m) => CliError::Usage(m),
            latlab_session::Error::Failed(e) => CliError::Failed(e),
        }
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// Turn a clap parse error into latlab's one-line form (help and version print as usual).
pub fn clap_exit(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let args: Vec<String> = std::env::args().collect();
    // cyclictest's -h400 (its histogram) asks latlab for its help: a ported script would then
    // pass without measuring.
    if let Some(line) = cyclictest_habit(&args, e.kind()) {
        eprintln!("latlab: error: {line}");
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        crate::args::junit_of_refusal(&args, &line);
        return ExitCode::from(2);
    }
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        // `latlab` or `latlab tune` alone: the help, on stderr, and the usage exit code.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            let line = clap_line(&e);
            // A refused value names what is accepted already.
            let hint = if e.kind() == ErrorKind::ValueValidation || line.contains("(accepted: ") {
                ""
            } else {
                " (see --help)"
            };
            eprintln!("latlab: error: {line}{hint}");
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            crate::args::junit_of_refusal(&args, &line);
            ExitCode::from(2)
        }
    }
}

/// A refused command line in one line. A value its type refused reads like every other bad
/// input, `--option: problem (accepted: …)`.
pub fn clap_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() == ErrorKind::ValueValidation
        && let (Some(ContextValue::String(arg)), Some(source)) =
            (e.get(ContextKind::InvalidArg), std::error::Error::source(e))
    {
        let flag = arg.split_whitespace().next().unwrap_or(arg);
        // A number clap parsed itself says only what went wrong: name the value and the form.
        let accepted = if source.is::<std::num::ParseIntError>() {
            Some("a whole number, e.g. 10")
        } else if source.is::<std::num::ParseFloatError>() {
            Some("a number, e.g. 1.5")
        } else {
            None
        };
        // clap's own words for a number out of its type's range or not a number at all
        // ("-1 is not in 0..=4294967295", "number too large to fit in target type", "invalid
        // digit found in string") said plainly; a negative one is said below.
        let said = source.to_string();
        let too_large = said.contains(" is not in 0..=")
            || source
                .downcast_ref::<std::num::ParseIntError>()
                .is_some_and(|p| *p.kind() == std::num::IntErrorKind::PosOverflow);
        let plain = if too_large {
            Some("too large")
        } else if source.is::<std::num::ParseIntError>() {
            Some("not a whole number")
        } else {
            None
        };
        // The option's own range where latlab knows it.
        let accepted = match too_large {
            true => known_range(flag).or(accepted),
            false => accepted,
        };
        let accepted = accepted.or(plain.map(|_| "a whole number, e.g. 10"));
        return match (accepted, e.get(ContextKind::InvalidValue)) {
            // `-p=-1`: as `-p -1` says it, the option's range in its help.
            (Some(_), Some(ContextValue::String(value)))
                if plain.is_some()
                    && value
                        .strip_prefix('-')
                        .is_some_and(|n| n.parse::<f64>().is_ok()) =>
            {
                format!(
                    "{flag} {value:?}: negative (accepted: {})",
                    not_negative(flag)
                )
            }
            (Some(form), Some(ContextValue::String(value))) => {
                let problem = plain.map_or(said, str::to_string);
                format!("{flag} {value:?}: {problem} (accepted: {form})")
            }
            _ => format!("{flag}: {source}"),
        };
    }
    // A value outside a fixed list, as `--format foo` says it.
    if e.kind() == ErrorKind::InvalidValue
        && let (
            Some(ContextValue::String(arg)),
            Some(ContextValue::String(value)),
            Some(ContextValue::Strings(valid)),
        ) = (
            e.get(ContextKind::InvalidArg),
            e.get(ContextKind::InvalidValue),
            e.get(ContextKind::ValidValue),
        )
        && !valid.is_empty()
    {
        let flag = arg.split_whitespace().next().unwrap_or(arg);
        if value.is_empty() {
            return format!("{flag}: no value (accepted: {})", valid.join(", "));
        }
        return format!("{flag} {value}: unknown (accepted: {})", valid.join(", "));
    }
    // An empty value of an option that takes a name or a path (`--json ''`): the form its help
    // gives it (`--json <FILE>`).
    if e.kind() == ErrorKind::InvalidValue
        && let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) = (
            e.get(ContextKind::InvalidArg),
            e.get(ContextKind::InvalidValue),
        )
        && value.is_empty()
        && let Some((flag, form)) = arg.split_once(' ')
    {
        let form = form.trim_start_matches('<').trim_end_matches('>');
        return format!("{flag}: no value (accepted: {form}, as `--help` describes it)");
    }
    if e.kind() == ErrorKind::UnknownArgument
        && let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg)
    {
        let flag = arg.split('=').next().unwrap_or(arg);
        // `--max-latency -5`: the value was taken for an option.
        let negative = arg.starts_with('-') && arg[1..].parse::<f64>().is_ok();
        let tip = match (
            cyclictest_equivalent(flag),
            e.get(ContextKind::SuggestedArg),
        ) {
            (Some(t), _) => Some(format!("cyclictest's {flag}: {t}")),
            (None, Some(ContextValue::String(similar))) => {
                Some(format!("a similar one exists: {similar}"))
            }
            (None, _) if negative => Some(
                "a negative number: the durations, limits and counts latlab takes are 0 or more"
                    .into(),
            ),
            (None, _) => None,
        };
        // The parser names only the start of a value it took for flags (`-1` of `-D -1s`,
        // `-a` of `--title -abc`): the word given is named whole.
        let args: Vec<String> = std::env::args().collect();
        let at = args.iter().position(|a| a.starts_with(arg.as_str()));
        let arg = at.map_or(arg.as_str(), |i| args[i].as_str());
        // The option it was given to, where the word before it is one that takes a value
        // (`-p -1`, `--db -x`).
        if let Some(option) = at
            .and_then(|i| i.checked_sub(1))
            .map(|i| args[i].as_str())
            .filter(|o| o.starts_with('-') && o.len() > 1)
            && let Some((_, takes)) =
                option_arg(&args, option).filter(|(_, a)| a.get_action().takes_values())
        {
            // Named long, as every other refusal names it (`-i -5` as `--interval -5`).
            let shown = takes
                .get_long()
                .map_or(option.to_string(), |l| format!("--{l}"));
            let (_, command) = subcommands_of(&args);
            if let Some(range) = takes.get_long().and_then(|l| range_of(&command, l))
                && negative
            {
                return format!("{shown} {arg}: negative (accepted: {range})");
            }
            // What the option says of the value itself, read as `--option=VALUE`; a value it
            // takes is given that way.
            let i = at.unwrap_or(0);
            let mut given = args.clone();
            given.splice(i - 1..=i, [format!("{shown}={arg}")]);
            let refusal = <crate::Cli as clap::Parser>::try_parse_from(&given)
                .err()
                .filter(|e| {
                    matches!(e.get(ContextKind::InvalidArg),
                    Some(ContextValue::String(a)) if a.split_whitespace().next() == Some(&shown))
                });
            return match refusal {
                Some(e) => clap_line(&e),
                None => format!(
                    "{shown} {arg}: a value that starts with '-' is read as an option \
                     (accepted: {shown}={arg})"
                ),
            };
        }
        return match tip {
            Some(tip) => format!("unexpected argument '{arg}' found ({tip})"),
            None => format!("unexpected argument '{arg}' found"),
        };
    }
    if e.kind() == ErrorKind::InvalidSubcommand
        && let Some(ContextValue::String(name)) = e.get(ContextKind::InvalidSubcommand)
    {
        return match e.get(ContextKind::SuggestedSubcommand) {
            // clap lists the likeliest last.
            Some(ContextValue::Strings(similar)) if !similar.is_empty() => {
                let likeliest: Vec<&str> = similar.iter().rev().map(String::as_str).collect();
                format!(
                    "unrecognized subcommand '{name}' ({}: {})",
                    if likeliest.len() == 1 {
                        "a similar one exists"
                    } else {
                        "similar ones exist"
                    },
                    likeliest.join(", ")
                )
            }
            _ => format!("unrecognized subcommand '{name}'"),
        };
    }
    if e.kind() == ErrorKind::MissingRequiredArgument
        && let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg)
    {
        return format!(
            "the following required arguments were not provided: {}",
            missing.join(", ")
        );
    }
    let text = e.to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ");
    first.to_string()
}

/// What a negative value of `option` is refused for: the range of its long name where latlab
/// knows one, else a pointer to the help of the command on the command line.
fn not_negative(option: &str) -> String {
    if let Some(range) = known_range(option) {
        return range.to_string();
    }
    let args: Vec<String> = std::env::args().collect();
    let (_, path) = subcommands_of(&args);
    format!("a value that is not negative, in the range `latlab {path} --help` gives for {option}")
}

/// The values `option` of the command on the command line takes, where latlab knows them.
fn known_range(option: &str) -> Option<&'static str> {
    let args: Vec<String> = std::env::args().collect();
    let (_, path) = subcommands_of(&args);
    long_name(&args, option)
        .as_deref()
        .and_then(|l| range_of(&path, l))
}

/// The values a numeric option of `command` (`tune search`) takes, by its long name, as its
/// own refusals say them.
fn range_of(command: &str, long: &str) -> Option<&'static str> {
    Some(match long {
        "interval" => "1us or more, e.g. 100us, 1ms",
        "duration" => "a length above 0, e.g. 10s, 5m",
        "loops" => "a positive number of periods",
        "threads" => "1..1024",
        "priority" => "1..99 for fifo and rr",
        "pm-qos" | "us" => "a whole number of µs from 0 to 2147483647, e.g. 10",
        "max-latency" | "max-p99" | "spike" | "break" => "a duration above 0, e.g. 50us",
        "max-missed" | "spike-limit" => "a whole number, 0 or more",
        "timer-slack" => "a duration, 0 or more, e.g. 50us",
        "sample-period" => "10ms or more",
        "histfile-range" => "1 or more rows of 1 us",
        "repeats" => "4 or more",
        "window" if command == "monitor" => "1s or more, e.g. 5m",
        "window" => "1ms or more, e.g. 1s",
        "cpus" | "load-cpus" => "CPU numbers and ranges, e.g. 0-3,6 or 0-7:2",
        "waker-cpu" => "a CPU number, e.g. 1",
        "dl-runtime" | "dl-period" | "dl-deadline" => "a duration above 0, e.g. 100us",
        "retention" => "1h or more, e.g. 90d",
        "budget" => "a duration, e.g. 30m",
        "range" => "1 or more rows of 1 µs, e.g. 400",
        "measure" => "a duration above 0, e.g. 2s",
        "top" => "1 or more rows",
        "pid" => "a positive PID",
        "experiment" => "an experiment's number from `latlab db list`",
        "limit" => "a number of runs, 1 or more, e.g. 10",
        _ => return None,
    })
}

/// The commands `args` name from the top (`latlab`, `tune`, `tune hold`), down past option
/// values (`--sysroot DIR`), with the words of the deepest.
fn subcommands_of(args: &[String]) -> (Vec<clap::Command>, String) {
    use clap::CommandFactory;
    let mut chain = vec![crate::Cli::command()];
    let mut path = Vec::new();
    for word in args.iter().skip(1).filter(|a| !a.starts_with('-')) {
        let sub = chain.last().and_then(|c| c.find_subcommand(word)).cloned();
        if let Some(sub) = sub {
            path.push(word.as_str());
            chain.push(sub);
        }
    }
    (chain, path.join(" "))
}

/// The long name of `option` (`-i` or `--interval`) of the command `args` name, if it has one.
fn long_name(args: &[String], option: &str) -> Option<String> {
    option_arg(args, option)?.1.get_long().map(str::to_string)
}

/// The argument `option` (`-i` or `--interval`) of the command `args` name, with the command
/// that has it (the deepest of the subcommands named, or one above it for a global option).
fn option_arg(args: &[String], option: &str) -> Option<(clap::Command, clap::Arg)> {
    let flag = option.split('=').next().unwrap_or(option);
    let find = |cmd: &clap::Command| match flag.strip_prefix("--") {
        Some(long) => cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .cloned(),
        None => {
            let short = flag.strip_prefix('-')?.chars().next()?;
            cmd.get_arguments()
                .find(|a| a.get_short() == Some(short))
                .cloned()
        }
    };
    let (chain, _) = subcommands_of(args);
    chain
        .into_iter()
        .rev()
        .find_map(|cmd| find(&cmd).map(|arg| (cmd, arg)))
}

/// A `measure` command line refused for a cyclictest option whose letter latlab gives another
/// meaning: `-h400` / `-h 400` (cyclictest's histogram, latlab's help) and `-m` with no value
/// (cyclictest's mlockall, latlab's --method).
fn cyclictest_habit(args: &[String], kind: clap::error::ErrorKind) -> Option<String> {
    use clap::error::ErrorKind;
    // After the global options (`--sysroot DIR`).
    let at = args.iter().position(|a| a == "measure")?;
    let args = &args[at..];
    let rows = |a: &str| a.parse::<u32>().ok();
    match kind {
        ErrorKind::DisplayHelp => args.iter().enumerate().find_map(|(i, a)| {
            // -h400, -h=400 or -h 400.
            let n = match a.strip_prefix("-h")? {
                "" => rows(args.get(i + 1)?)?,
                attached => rows(attached.strip_prefix('=').unwrap_or(attached))?,
            };
            Some(format!(
                "{a}{}: cyclictest's histogram; -h is the help here (accepted: --histfile FILE \
                 --histfile-range {n})",
                if a == "-h" {
                    format!(" {n}")
                } else {
                    String::new()
                }
            ))
        }),
        ErrorKind::InvalidValue => args
            .iter()
            .enumerate()
            .find(|(i, a)| *a == "-m" && args.get(i + 1).is_none_or(|next| next.starts_with('-')))
            .map(|_| {
                let methods: Vec<&str> =
                    latlab_model::Method::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "-m: a method is needed: -m is --method here, and cyclictest's -m (mlockall) \
                     is the default (accepted: -m {}; --no-mlock leaves memory unlocked)",
                    methods.join(", ")
                )
            }),
        _ => None,
    }
}

fn cyclictest_equivalent(flag: &str) -> Option<&'static str> {
    Some(match flag {
        "-S" | "--smp" => "every online CPU is measured by default; -a LIST picks CPUs",
        "-n" | "--nanosleep" => "clock_nanosleep is the default method (-m)",
        "--mlockall" => "memory is locked by default (--no-mlock leaves it unlocked)",
        "-H" | "--histofall" | "--histogram" => "--histfile FILE, with --histfile-range ROWS",
        "-d" | "--distance" => "threads share one interval; --stagger spreads their phases",
        "--latency" => "--pm-qos US holds /dev/cpu_dma_latency",
        _ => return None,
    })
}

/// A subcommand's arguments parsed from `args` as `main` parses them (tests): a value its type
/// refuses is the usage error `main` would print.
#[cfg(test)]
pub fn parse_args<A: clap::Args + clap::FromArgMatches>(args: &[&str]) -> CliResult<A> {
    let cmd = A::augment_args(clap::Command::new("t"));
    let matches = cmd
        .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))
        .map_err(|e| CliError::Usage(clap_line(&e)))?;
    A::from_arg_matches(&matches).map_err(|e| CliError::Usage(clap_line(&e)))
}
