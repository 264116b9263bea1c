//! `latlab sysinfo`: what the system is and how it is set, as a table or JSON.

use crate::cli_error::CliResult;
use clap::Args;
use latlab_sys::Sys;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct SysinfoArgs {
    /// Print the record as JSON (the `system` object of every result).
    #[arg(long)]
    json: bool,
}

pub fn run(args: SysinfoArgs, sys: &Sys) -> CliResult<ExitCode> {
    let info = sys.system_info();
    if args.json {
        let text = serde_json::to_string_pretty(&info)
            .map_err(|e| anyhow::anyhow!("serializing the system record: {e}"))?;
        println!("{text}");
    } else {
        print!("{}", latlab_report::sysinfo_text(&info));
    }
    Ok(ExitCode::SUCCESS)
}
