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

pub type CliResult<T> = Result<T, CliError>;

/// Turn a clap parse error into latlab's one-line form (help and version print as usual).
pub fn clap_exit(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            let text = e.to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("latlab: error: {first} (see --help)");
            ExitCode::from(2)
        }
    }
}

impl From<latlab_monitor::Error> for CliError {
    fn from(e: latlab_monitor::Error) -> Self {
        match e {
            latlab_monitor::Error::Usage(m) => CliError::Usage(m),
            latlab_monitor::Error::Failed(e) => CliError::Failed(e),
        }
    }
}
