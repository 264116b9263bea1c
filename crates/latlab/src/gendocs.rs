//! `latlab gen-docs DIR` (hidden): man pages and shell completions generated from the CLI
//! definitions, for packaging (`scripts/build-deb.sh`).

use crate::cli_error::CliResult;
use anyhow::Context;
use clap::{Args, CommandFactory};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct GenDocsArgs {
    /// Directory to write `man/*.1` and `completions/*` into (created if absent).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// Man pages of a command and every visible subcommand (`latlab.1`, `latlab-monitor.1`, …).
fn man_pages(
    cmd: &clap::Command,
    prefix: &str,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let name = if prefix.is_empty() {
        cmd.get_name().to_string()
    } else {
        format!("{prefix}-{}", cmd.get_name())
    };
    // A one-shot command: the names live until it exits.
    let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
    let bin: &'static str = Box::leak(name.replace('-', " ").into_boxed_str());
    let page = cmd.clone().name(leaked).bin_name(bin);
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut buf)
        .with_context(|| format!("rendering the man page of {name}"))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
    out.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        man_pages(sub, &name, dir, out)?;
    }
    Ok(())
}

pub fn gen_docs(args: GenDocsArgs) -> CliResult<ExitCode> {
    let mut cmd = crate::Cli::command();
    cmd.build();
    let man = args.dir.join("man");
    let comp = args.dir.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let mut written = Vec::new();
    man_pages(&cmd, "", &man, &mut written)?;
    use clap_complete::Shell;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = clap_complete::generate_to(shell, &mut cmd, "latlab", &comp)
            .with_context(|| format!("writing {shell} completions"))?;
        written.push(path);
    }
    for p in &written {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
