//! `--fix`: the knobs of a [`FixPlan`] written into a `latlab tune` profile and applied through
//! `latlab tune` — validated first, every original value journaled before it is written, so
//! `latlab tune restore` puts the system back as after any other profile.

use crate::FixPlan;
use latlab_sys::Sys;
use std::path::{Path, PathBuf};

/// The name of the profile `--fix` applies (its file is `<state dir>/check-fix.toml`).
pub const PROFILE_NAME: &str = "check-fix";

/// Why the knobs could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum FixError {
    #[error("writing the profile {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tune(#[from] latlab_tune::TuneError),
    #[error(transparent)]
    Profile(#[from] latlab_tune::ProfileError),
}

/// What was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixReport {
    /// The profile's settings (`[cpu.all] governor = "performance"`).
    pub applied: Vec<String>,
    /// Values written (one per file: a CPU's governor, an idle state's `disable`, …).
    pub written: usize,
    /// Settings already in place.
    pub already_set: usize,
    /// What latlab tune left alone, with why (unsupported here, refused by the kernel).
    pub not_applied: Vec<(String, String)>,
    /// The profile file and the journal `latlab tune restore` reads.
    pub profile: Option<PathBuf>,
    pub journal: Option<PathBuf>,
    /// The command that undoes the fixes (with the journal).
    pub restore: Option<String>,
}

/// Where the tuning journal lives by default (as for `latlab tune`).
pub fn default_state_dir(sys: &Sys) -> PathBuf {
    latlab_tune::default_state_dir(sys)
}

/// The profile text for the plan's knobs: one table per section, knobs in plan order; the boot
/// options in `[boot] extra`, for `latlab tune boot` (`tune apply` leaves them alone).
pub fn profile_text(plan: &FixPlan, restore: &str) -> String {
    let ids: Vec<&str> = plan
        .knobs
        .iter()
        .map(|(_, ids)| ids)
        .chain(plan.boot.iter().map(|(_, ids)| ids))
        .flat_map(|ids| ids.iter().copied())
        .fold(Vec::new(), |mut acc, id| {
            if !acc.contains(&id) {
                acc.push(id);
            }
            acc
        });
    // In a TOML basic string: backslashes and quotes escaped.
    let restore = restore.replace('\\', "\\\\").replace('"', "\\\"");
    // Boot options alone are given by `tune boot` and take a reboot: nothing is applied, so
    // there is nothing to restore.
    let undo = if plan.knobs.is_empty() {
        "It holds boot options only: `latlab tune boot` with this profile gives them (they take \
         a reboot); nothing in it is set while the system runs, so nothing is restored."
            .to_string()
    } else {
        format!(
            "Once applied, `{restore}` puts back every value it changed (`latlab tune status` \
             says whether it is)."
        )
    };
    let mut out = format!(
        "description = \"\"\"\nWritten by latlab check --fix: the settings behind the checks {}.\n\
         {undo}\n\"\"\"\n",
        ids.join(", ")
    );
    let mut tables: Vec<(&str, Vec<String>)> = Vec::new();
    for (knob, _) in &plan.knobs {
        let (table, lines) = knob.profile_entry();
        match tables.iter_mut().find(|(t, _)| *t == table) {
            Some((_, l)) => l.extend(lines),
            None => tables.push((table, lines)),
        }
    }
    for (table, lines) in tables {
        out.push_str(&format!("\n[{table}]\n"));
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !plan.boot.is_empty() {
        let options: Vec<String> = plan.boot.iter().map(|(b, _)| format!("{b:?}")).collect();
        out.push_str(&format!("\n[boot]\nextra = [{}]\n", options.join(", ")));
    }
    out
}

/// Apply the plan's knobs persistently through latlab tune. Refuses when a tuning is already
/// applied (restoring it would silently undo someone's profile).
pub fn apply(sys: &Sys, plan: &FixPlan, state_dir: &Path) -> Result<FixReport, FixError> {
    if plan.knobs.is_empty() && plan.boot.is_empty() {
        return Ok(FixReport::default());
    }
    let path = state_dir.join(format!("{PROFILE_NAME}.toml"));
    if plan.knobs.is_empty() {
        // Boot options only: the profile is for `latlab tune boot`; nothing is applied. An
        // earlier fix applied from the profile file stays as its journal names it: this one
        // goes beside it.
        let applied_from_it = latlab_tune::status(sys, state_dir)?
            .journal
            .is_some_and(|j| Path::new(&j.header.source) == path);
        let path = if applied_from_it {
            state_dir.join(format!("{PROFILE_NAME}-boot.toml"))
        } else {
            path
        };
        write_profile(sys, &path, plan)?;
        return Ok(FixReport {
            profile: Some(path),
            ..FixReport::default()
        });
    }
    if let Some(e) = latlab_tune::status(sys, state_dir)?.in_force(sys, state_dir) {
        return Err(e.into());
    }
    write_profile(sys, &path, plan)?;
    let profile = latlab_tune::Profiles::builtin().resolve(&path.to_string_lossy())?;
    let opts = latlab_tune::ApplyOptions {
        hooks: latlab_tune::TestHooks::from_env(),
        ..latlab_tune::ApplyOptions::default()
    };
    let applied = latlab_tune::apply(sys, &profile, state_dir, &opts)?;
    let mut report = FixReport {
        applied: plan.knobs.iter().map(|(k, _)| k.to_string()).collect(),
        written: applied.written.len(),
        profile: Some(path),
        journal: Some(applied.journal.clone()),
        restore: Some(latlab_tune::restore_command(sys, state_dir)),
        ..FixReport::default()
    };
    for item in &applied.plan.items {
        match &item.state {
            latlab_tune::ItemState::Set { .. } => report.already_set += 1,
            latlab_tune::ItemState::Unsupported { why } => {
                report.not_applied.push((item.knob.clone(), why.clone()))
            }
            latlab_tune::ItemState::Change(_) => {}
        }
    }
    for (change, why) in &applied.skipped {
        report.not_applied.push((change.knob.clone(), why.clone()));
    }
    Ok(report)
}

/// Write the profile of `plan` at `path`, in the state directory whose journal it names.
fn write_profile(sys: &Sys, path: &Path, plan: &FixPlan) -> Result<(), FixError> {
    let state_dir = path.parent().unwrap_or(Path::new("."));
    let restore = latlab_tune::restore_command(sys, state_dir);
    std::fs::create_dir_all(state_dir)
        .and_then(|()| std::fs::write(path, profile_text(plan, &restore)))
        .map_err(|source| FixError::Write {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::Knob;

    #[test]
    fn profile_groups_knobs_by_table() {
        let plan = FixPlan {
            knobs: vec![
                (Knob::Governor("performance".into()), vec!["cpu.governor"]),
                (Knob::SchedRtRuntimeUs(-1), vec!["limits.rt-throttling"]),
                (Knob::MaxIdleLatencyUs(100), vec!["cpu.idle-depth"]),
                (Knob::IrqsOff("3".into()), vec!["irq.isolated-cpus"]),
            ],
            ..FixPlan::default()
        };
        let text = profile_text(&plan, "latlab tune restore");
        assert!(
            text.contains("[cpu.all]\ngovernor = \"performance\"\nmax_idle_latency_us = 100\n")
        );
        assert!(text.contains("[system]\nsched_rt_runtime_us = -1\n"));
        assert!(text.contains("[isolation]\nisolated = \"3\"\nirqs = true\n"));
        assert!(text.contains("cpu.governor, limits.rt-throttling, cpu.idle-depth"));
        assert!(!text.contains("[boot]"));
    }

    /// Boot options go to `[boot] extra`, which `latlab tune boot` reads and the profile
    /// parser accepts.
    #[test]
    fn boot_options_are_the_profile_s_boot_extra() {
        let plan = FixPlan {
            knobs: vec![(Knob::SchedRtRuntimeUs(-1), vec!["limits.rt-throttling"])],
            boot: vec![
                ("preempt=full".into(), vec!["kernel.preempt"]),
                ("threadirqs".into(), vec!["kernel.threadirqs"]),
            ],
            ..FixPlan::default()
        };
        let text = profile_text(&plan, "latlab tune restore");
        assert!(
            text.ends_with("\n[boot]\nextra = [\"preempt=full\", \"threadirqs\"]\n"),
            "{text}"
        );
        assert!(text.contains("limits.rt-throttling, kernel.preempt, kernel.threadirqs"));
        let p = latlab_tune::Profiles::builtin()
            .resolve_text(PROFILE_NAME, &text)
            .unwrap();
        assert_eq!(
            p.boot.extra.as_ref().unwrap().value,
            ["preempt=full", "threadirqs"]
        );
    }

    /// The profile names the command that restores its journal, whatever the directory's
    /// name holds (quotes and backslashes stay a valid profile).
    #[test]
    fn the_profile_names_its_restore_command() {
        let plan = FixPlan {
            knobs: vec![(Knob::SchedRtRuntimeUs(-1), vec!["limits.rt-throttling"])],
            ..FixPlan::default()
        };
        let restore = r#"latlab tune restore --state-dir '/s/a"b\c'"#;
        let text = profile_text(&plan, restore);
        let p = latlab_tune::Profiles::builtin()
            .resolve_text(PROFILE_NAME, &text)
            .unwrap();
        assert!(
            p.description.contains(&format!(
                "Once applied, `{restore}` puts back every value it changed"
            )),
            "{}",
            p.description
        );
        // Boot options alone have nothing to apply or restore: said so, not a restore.
        let boot = FixPlan {
            boot: vec![("preempt=full".into(), vec!["kernel.preempt"])],
            ..FixPlan::default()
        };
        let text = profile_text(&boot, restore);
        let p = latlab_tune::Profiles::builtin()
            .resolve_text(PROFILE_NAME, &text)
            .unwrap();
        assert!(
            p.description.contains("It holds boot options only"),
            "{text}"
        );
        assert!(!text.contains("Once applied"), "{text}");
    }
}
