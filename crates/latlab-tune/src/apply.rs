//! Journaled apply, rollback, restore, verify and status, and temporary tunings.
//!
//! Apply validates the whole profile against the machine and checks that every target can be
//! written before it writes anything. It then takes the tuning lock, journals each original
//! value (synced) before writing it, in a safe order (governor before EPP). If a write fails,
//! everything already written is put back and the error names the knob and the errno. Restore
//! replays the journal newest first (a CPU's governor before its EPP), also after a crash; after
//! a reboot it writes nothing, since the reboot already reset every value, and says so.

use crate::journal::{Header, Journal, JournalState, Line, StateLock};
use crate::plan::{Change, ItemState, Phase, Plan, Target, task_affinity, task_stat};
use crate::profile::Profile;
use crate::{TuneError, describe_io_error};
use latlab_model::units::CpuList;
use latlab_sys::{PmQosHold, Sys};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Hooks for tests: make the N-th write fail with EIO, or stop after K writes (0: after the
/// checks, before the tuning lock is taken) and sleep until killed, or for S seconds.
/// `from_env` reads `LATLAB_TUNE_FAIL_AT_WRITE`, `LATLAB_TUNE_PAUSE_AFTER_WRITES` and
/// `LATLAB_TUNE_PAUSE_SECONDS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestHooks {
    pub fail_at_write: Option<usize>,
    pub pause_after_writes: Option<usize>,
    pub pause_seconds: Option<u64>,
}

impl TestHooks {
    pub fn from_env() -> TestHooks {
        let var = |n: &str| std::env::var(n).ok().and_then(|v| v.trim().parse().ok());
        TestHooks {
            fail_at_write: var("LATLAB_TUNE_FAIL_AT_WRITE"),
            pause_after_writes: var("LATLAB_TUNE_PAUSE_AFTER_WRITES"),
            pause_seconds: var("LATLAB_TUNE_PAUSE_SECONDS").map(|s: usize| s as u64),
        }
    }
}

/// How to apply.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// CPUs whose per-CPU settings to touch (default: every online CPU).
    pub cpus: Option<CpuList>,
    /// Applied for a while (a run), not until `tune restore`.
    pub temporary: bool,
    /// Restore a tuning already in place first (`tune apply` of another profile); otherwise an
    /// applied tuning is an error.
    pub restore_previous: bool,
    pub hooks: TestHooks,
}

/// What an apply did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub plan: Plan,
    /// Values written, in order.
    pub written: Vec<Change>,
    /// Best-effort values the kernel refused (managed IRQs, pinned threads), with why.
    pub skipped: Vec<(Change, String)>,
    /// The restore of a previous tuning, when `restore_previous` found one.
    pub previous: Option<RestoreReport>,
    pub journal: PathBuf,
}

/// How one journaled value ended up on restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written back; `changed_since`: someone else had changed it after apply.
    Restored {
        from: String,
        to: String,
        changed_since: bool,
    },
    AlreadyBack {
        value: String,
    },
    /// Rebooted since apply, and the value is the original again.
    ResetByReboot {
        value: String,
    },
    /// Rebooted since apply; the boot set another value, which is left alone.
    LeftAfterReboot {
        now: String,
        before: String,
    },
    /// The target is gone (a kernel thread that exited, a file that vanished).
    Gone {
        why: String,
    },
    /// The kernel refused a best-effort value.
    Skipped {
        why: String,
    },
    Failed {
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreLine {
    pub knob: String,
    pub outcome: Outcome,
}

impl fmt::Display for RestoreLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.knob;
        match &self.outcome {
            Outcome::Restored {
                from,
                to,
                changed_since,
            } => {
                write!(f, "{k}: {from} → {to}")?;
                if *changed_since {
                    write!(f, " (had been changed by someone else since apply)")?;
                }
                Ok(())
            }
            Outcome::AlreadyBack { value } => write!(f, "{k}: already {value}"),
            Outcome::ResetByReboot { value } => write!(f, "{k}: reset by the reboot ({value})"),
            Outcome::LeftAfterReboot { now, before } => write!(
                f,
                "{k}: left as the reboot set it ({now}; before apply it was {before})"
            ),
            Outcome::Gone { why } => write!(f, "{k}: {why}"),
            Outcome::Skipped { why } => write!(f, "{k}: skipped: {why}"),
            Outcome::Failed { why } => write!(f, "{k}: FAILED: {why}"),
        }
    }
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// The profile restored; None when nothing was applied.
    pub profile: Option<String>,
    pub rebooted: bool,
    /// The journal was left by a process that died before finishing its apply.
    pub interrupted: bool,
    pub pid: Option<u32>,
    pub lines: Vec<RestoreLine>,
}

impl RestoreReport {
    pub fn failures(&self) -> Vec<&RestoreLine> {
        self.lines
            .iter()
            .filter(|l| matches!(l.outcome, Outcome::Failed { .. }))
            .collect()
    }
}

pub(crate) fn since(h: &Header) -> String {
    latlab_model::rfc3339_utc(h.started_unix_ns)
}

fn boot_id(sys: &Sys) -> Option<String> {
    sys.read_trim("/proc/sys/kernel/random/boot_id").ok()
}

fn rebooted(sys: &Sys, h: &Header) -> bool {
    // Another root's boot id is another system's, no reboot of this one.
    other_root(sys, h).is_none()
        && matches!((&h.boot_id, boot_id(sys)), (Some(a), Some(b)) if *a != b)
}

/// The command that restores a journal, under the root its values were written under.
fn journal_restore_command(sys: &Sys, state_dir: &Path, h: &Header) -> String {
    match other_root(sys, h) {
        Some(root) => crate::restore_command(&Sys::new(root), state_dir),
        None => crate::restore_command(sys, state_dir),
    }
}

/// The system root a journal's values were written under, where it is not the one `sys`
/// reads (absolute, as printed commands name it).
fn other_root(sys: &Sys, h: &Header) -> Option<String> {
    let root = absolute_root(Path::new(&h.sysroot));
    (root != absolute_root(sys.root())).then_some(root)
}

/// Read the current value of a target (raw for files, a CPU list for tasks).
pub(crate) fn read_value(sys: &Sys, target: &Target) -> std::io::Result<String> {
    match target {
        Target::File { path } => std::fs::read_to_string(sys.path(path)),
        Target::TaskAffinity {
            pid, start_time, ..
        } => {
            let gone = || std::io::Error::from_raw_os_error(libc::ESRCH);
            match task_stat(sys, *pid) {
                Some((_, _, st)) if st == *start_time => task_affinity(sys, *pid)
                    .map(|l| l.to_string())
                    .ok_or_else(gone),
                _ => Err(gone()),
            }
        }
    }
}

/// Write a value to a target.
pub(crate) fn write_value(sys: &Sys, target: &Target, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    match target {
        Target::File { path } => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(sys.path(path))?;
            f.write_all(value.as_bytes())
        }
        Target::TaskAffinity {
            pid, start_time, ..
        } => {
            if !sys.is_live() {
                return Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP));
            }
            match task_stat(sys, *pid) {
                Some((_, _, st)) if st == *start_time => {}
                _ => return Err(std::io::Error::from_raw_os_error(libc::ESRCH)),
            }
            let list = CpuList::parse(value.trim())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            // A CPU beyond what a CPU set holds refuses the move (see `refusal`) rather than
            // narrowing it in silence.
            latlab_sys::thread::set_task_affinity(*pid, list.cpus())
        }
    }
}

/// A best-effort value refused: by the kernel (a managed IRQ, a pinned thread, a task gone), or
/// a task's CPUs that a CPU set cannot hold.
fn refusal(e: &std::io::Error) -> bool {
    match e.raw_os_error() {
        Some(code) => matches!(code, libc::EIO | libc::EPERM | libc::EINVAL | libc::ESRCH),
        None => e.kind() == std::io::ErrorKind::InvalidInput,
    }
}

/// Why a refused best-effort value was skipped.
fn refused(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(_) => format!("the kernel refused: {}", describe_io_error(e)),
        None => format!("refused: {e}"),
    }
}

/// Check, before anything is written, that every target can be written.
fn check_permissions(sys: &Sys, plan: &Plan) -> Result<(), TuneError> {
    let changes = plan.changes();
    let euid = latlab_sys::thread::euid();
    if sys.is_live()
        && euid != 0
        && let Some(first) = changes.first()
    {
        let path = match &first.target {
            Target::File { path } => PathBuf::from(path),
            Target::TaskAffinity { .. } => PathBuf::from("/proc"),
        };
        return Err(TuneError::NotPermitted {
            path,
            why: format!("latlab runs as uid {euid}, not root"),
            hint: "tuning needs root (run with sudo)",
        });
    }
    for c in changes {
        if let Target::File { path } = &c.target {
            let real = sys.path(path);
            let Ok(cpath) = std::ffi::CString::new(real.as_os_str().as_encoded_bytes()) else {
                continue;
            };
            // SAFETY: a valid NUL-terminated path.
            let r = unsafe {
                libc::faccessat(libc::AT_FDCWD, cpath.as_ptr(), libc::W_OK, libc::AT_EACCESS)
            };
            if r != 0 {
                return Err(TuneError::NotPermitted {
                    path: real,
                    why: describe_io_error(&std::io::Error::last_os_error()),
                    hint: if euid == 0 {
                        "root may not write it either: an immutable file (chattr -i), a file \
                         system mounted read-only, or a security module's rule"
                    } else {
                        "tuning needs root (run with sudo)"
                    },
                });
            }
        }
    }
    Ok(())
}

/// Refuses a plan none of whose settings applies here (every one unsupported), naming why for
/// each; a setting already at its target applies, and so does a PM QoS limit, which a
/// temporary tuning holds and `tune apply` names the command for.
pub fn nothing_applies(profile: &Profile, plan: &Plan) -> Result<(), TuneError> {
    if plan.items.is_empty() || profile.system.cpu_dma_latency_us.is_some() {
        return Ok(());
    }
    let mut why: Vec<(String, Vec<&str>)> = Vec::new();
    for item in &plan.items {
        let ItemState::Unsupported { why: w } = &item.state else {
            return Ok(());
        };
        match why.iter_mut().find(|(seen, _)| seen == w) {
            Some((_, knobs)) => knobs.push(&item.knob),
            None => why.push((w.clone(), vec![&item.knob])),
        }
    }
    let why = why
        .iter()
        .map(|(w, knobs)| format!("{}: {w}", knobs.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    Err(TuneError::NothingApplies {
        profile: profile.name.clone(),
        why,
    })
}

/// Apply a profile until `tune restore`: see the module documentation.
pub fn apply(
    sys: &Sys,
    profile: &Profile,
    state_dir: &Path,
    opts: &ApplyOptions,
) -> Result<Applied, TuneError> {
    apply_inner(sys, profile, state_dir, opts).map(|(a, _lock)| a)
}

fn apply_inner(
    sys: &Sys,
    profile: &Profile,
    state_dir: &Path,
    opts: &ApplyOptions,
) -> Result<(Applied, StateLock), TuneError> {
    // Validate against the machine and check the rights before taking anything.
    let first = Plan::build(sys, profile, opts.cpus.as_ref())?;
    nothing_applies(profile, &first)?;
    check_permissions(sys, &first)?;
    if opts.hooks.pause_after_writes == Some(0) {
        pause(&opts.hooks, 0);
    }
    let lock = StateLock::acquire(state_dir)?;
    let mut previous = None;
    if let Some(js) = Journal::read(state_dir)? {
        if opts.restore_previous && !opts.temporary {
            previous = Some(restore_locked(sys, state_dir, js)?);
        } else {
            return Err(TuneError::AlreadyApplied {
                profile: js.header.profile.clone(),
                since: since(&js.header),
                restore: journal_restore_command(sys, state_dir, &js.header),
            });
        }
    }
    // The values to journal as the originals are read under the lock: a restore that finished
    // since the check above (or the one just done) changed them.
    let plan = Plan::build(sys, profile, opts.cpus.as_ref())?;
    check_permissions(sys, &plan)?;
    let changes: Vec<Change> = plan.changes().into_iter().cloned().collect();
    let header = Header {
        journal: "latlab.tune".into(),
        version: 1,
        profile: profile.name.clone(),
        source: profile.source.to_string(),
        cpus: plan.cpus.to_string(),
        started_unix_ns: latlab_sys::unix_now_ns(),
        boot_id: boot_id(sys),
        pid: std::process::id(),
        temporary: opts.temporary,
        sysroot: absolute_root(sys.root()),
    };
    let mut journal = Journal::create(state_dir, header)?;
    let mut written: Vec<(usize, Change)> = Vec::new();
    let mut skipped = Vec::new();
    for (seq, change) in changes.iter().enumerate() {
        if let Err(e) = journal.append(&Line::Entry {
            seq,
            change: change.clone(),
        }) {
            let rollback = rollback(sys, state_dir, &mut journal, &written);
            return Err(TuneError::Journal {
                path: journal.path().to_path_buf(),
                message: format!("{e}; {rollback}"),
            });
        }
        let result = if opts.hooks.fail_at_write == Some(seq + 1) {
            // As a write that fails after its opening truncated a file (a tree's, not the
            // kernel's) does.
            if let Target::File { path } = &change.target {
                let _ = std::fs::File::create(sys.path(path));
            }
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        } else {
            write_value(sys, &change.target, &change.new)
        };
        // A failed write leaves the kernel's value as it was; a file that is no kernel's (a
        // tree under --sysroot) was emptied by the opening: put back.
        if result.is_err()
            && read_value(sys, &change.target).is_ok_and(|v| v.trim() != change.old_value())
        {
            let _ = write_value(sys, &change.target, &change.old);
        }
        match result {
            Ok(()) => written.push((seq, change.clone())),
            Err(e) if change.best_effort && refusal(&e) => {
                let why = match (&change.target, e.raw_os_error()) {
                    (Target::File { .. }, Some(libc::EIO | libc::EPERM)) => format!(
                        "the kernel refused ({}): a managed IRQ, which only \
                         isolcpus=managed_irq moves",
                        describe_io_error(&e)
                    ),
                    _ => refused(&e),
                };
                let _ = journal.append(&Line::Skipped {
                    seq,
                    why: why.clone(),
                });
                skipped.push((change.clone(), why));
            }
            Err(e) => {
                let _ = journal.append(&Line::Skipped {
                    seq,
                    why: "write failed".into(),
                });
                let rollback = rollback(sys, state_dir, &mut journal, &written);
                let path = match &change.target {
                    Target::File { path } => sys.path(path),
                    Target::TaskAffinity { pid, .. } => PathBuf::from(format!("/proc/{pid}")),
                };
                return Err(TuneError::WriteFailed {
                    knob: change.knob.clone(),
                    target: format!("{} = {}", path.display(), change.new_value()),
                    error: describe_io_error(&e),
                    errno: e.raw_os_error(),
                    rollback,
                });
            }
        }
        if opts.hooks.pause_after_writes == Some(written.len()) && !written.is_empty() {
            pause(&opts.hooks, written.len());
        }
    }
    journal.append(&Line::Complete {
        writes: written.len(),
    })?;
    Ok((
        Applied {
            plan,
            written: written.into_iter().map(|(_, c)| c).collect(),
            skipped,
            previous,
            journal: journal.path().to_path_buf(),
        },
        lock,
    ))
}

/// The test hook's stop after `writes` writes: until killed, or for its seconds.
fn pause(hooks: &TestHooks, writes: usize) {
    eprintln!("latlab: test hook: paused after {writes} writes (LATLAB_TUNE_PAUSE_AFTER_WRITES)");
    match hooks.pause_seconds {
        Some(s) => std::thread::sleep(std::time::Duration::from_secs(s)),
        None => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
    }
}

/// Put back what was written before a failure; says what happened.
fn rollback(
    sys: &Sys,
    state_dir: &Path,
    journal: &mut Journal,
    written: &[(usize, Change)],
) -> String {
    if written.is_empty() {
        let _ = Journal::remove(state_dir);
        return "nothing had been written".into();
    }
    let mut order: Vec<&(usize, Change)> = written.iter().collect();
    order.sort_by_key(|(seq, c)| (c.phase.restore_rank(), std::cmp::Reverse(*seq)));
    let mut failed = Vec::new();
    for (seq, c) in order {
        match write_value(sys, &c.target, &c.old) {
            Ok(()) => {
                let _ = journal.append(&Line::Undone { seq: *seq });
            }
            Err(e) => failed.push(format!("{}: {}", c.knob, describe_io_error(&e))),
        }
    }
    if failed.is_empty() {
        let _ = Journal::remove(state_dir);
        format!(
            "rolled back the {} value{} already written",
            written.len(),
            if written.len() == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "rollback failed for {}; the journal is kept, run `{}`",
            failed.join(", "),
            crate::restore_command(sys, state_dir)
        )
    }
}

/// Restore the tuning journaled in `state_dir` (nothing to do is not an error). Values that
/// could not be put back are listed in the report and the journal is kept; the error
/// `RestoreIncomplete` then carries the report.
pub fn restore(sys: &Sys, state_dir: &Path) -> Result<RestoreReport, TuneError> {
    let _lock = StateLock::acquire(state_dir)?;
    match Journal::read(state_dir)? {
        None => Ok(RestoreReport::default()),
        Some(js) => restore_locked(sys, state_dir, js),
    }
}

/// A system root as a journal keeps it: absolute.
fn absolute_root(root: &Path) -> String {
    std::path::absolute(root)
        .unwrap_or_else(|_| root.to_path_buf())
        .display()
        .to_string()
}

/// Refuse a journal written under another system root: its values are that root's.
fn same_root(sys: &Sys, js: &JournalState) -> Result<(), TuneError> {
    // Absolute, as printed restore commands name it (a journal written before that kept the
    // root as given, relative to where latlab ran).
    match other_root(sys, &js.header) {
        Some(other) => Err(TuneError::Journal {
            path: js.path.clone(),
            message: format!(
                "its values were written under the system root {other}, not {}; verify and \
                 restore with that root",
                absolute_root(sys.root())
            ),
        }),
        None => Ok(()),
    }
}

fn restore_locked(
    sys: &Sys,
    state_dir: &Path,
    js: JournalState,
) -> Result<RestoreReport, TuneError> {
    same_root(sys, &js)?;
    let rebooted = rebooted(sys, &js.header);
    let mut journal = Journal::open(state_dir)?;
    let mut entries = js.live_entries();
    entries.sort_by_key(|(seq, c)| (c.phase.restore_rank(), std::cmp::Reverse(*seq)));
    let mut report = RestoreReport {
        profile: Some(js.header.profile.clone()),
        rebooted,
        interrupted: !js.complete,
        pid: Some(js.header.pid),
        lines: Vec::new(),
    };
    for (seq, c) in entries {
        let current = read_value(sys, &c.target);
        let old = c.old_value().to_string();
        let outcome = match current {
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Outcome::Gone {
                why: "the task has ended".into(),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::Gone {
                why: format!("{} is gone", c.target),
            },
            Err(e) => Outcome::Failed {
                why: format!("cannot read {}: {}", c.target, describe_io_error(&e)),
            },
            Ok(now) if rebooted => {
                let now = now.trim().to_string();
                if now == old {
                    Outcome::ResetByReboot { value: now }
                } else {
                    Outcome::LeftAfterReboot { now, before: old }
                }
            }
            Ok(now) if now.trim() == old => Outcome::AlreadyBack { value: old },
            Ok(now) => match write_value(sys, &c.target, &c.old) {
                Ok(()) => Outcome::Restored {
                    changed_since: now.trim() != c.new_value(),
                    from: now.trim().to_string(),
                    to: old,
                },
                Err(e) if c.best_effort && refusal(&e) => Outcome::Skipped { why: refused(&e) },
                Err(e) => Outcome::Failed {
                    why: format!("writing {}: {}", c.target, describe_io_error(&e)),
                },
            },
        };
        if !matches!(outcome, Outcome::Failed { .. }) {
            journal.append(&Line::Undone { seq })?;
        }
        report.lines.push(RestoreLine {
            knob: c.knob.clone(),
            outcome,
        });
    }
    let failed: Vec<String> = report.failures().iter().map(|l| l.to_string()).collect();
    if failed.is_empty() {
        Journal::remove(state_dir)?;
        Ok(report)
    } else {
        Err(TuneError::RestoreIncomplete {
            failed,
            restore: crate::restore_command(sys, state_dir),
            report: Box::new(report),
        })
    }
}

/// Tuning daemons running now, and the knobs they are known to set.
fn daemons(sys: &Sys) -> Vec<(String, &'static [Phase])> {
    const CPU: &[Phase] = &[Phase::Governor, Phase::Epp, Phase::Boost, Phase::Turbo];
    const TUNED: &[Phase] = &[
        Phase::Governor,
        Phase::Epp,
        Phase::Boost,
        Phase::Turbo,
        Phase::IdleState,
        Phase::ResumeLatency,
        Phase::Sysctl,
        Phase::Irq,
        Phase::Workqueue,
        Phase::Task,
    ];
    let mut out = Vec::new();
    for comm in sys.process_names() {
        let phases: &'static [Phase] = match comm.as_str() {
            "tuned" => TUNED,
            "irqbalance" => &[Phase::Irq],
            "auto-cpufreq" | "thermald" | "tlp" => CPU,
            c if c.starts_with("power-profiles") || c.starts_with("tuned-ppd") => CPU,
            _ => continue,
        };
        if !out.iter().any(|(n, _)| *n == comm) {
            out.push((comm, phases));
        }
    }
    out
}

fn who(daemons: &[(String, &'static [Phase])], phase: Phase) -> String {
    let names: Vec<&str> = daemons
        .iter()
        .filter(|(_, p)| p.contains(&phase))
        .map(|(n, _)| n.as_str())
        .collect();
    if names.is_empty() {
        "unknown (no tuning daemon is running)".into()
    } else {
        format!(
            "probably {} (running, sets this kind of knob)",
            names.join(" or ")
        )
    }
}

/// One knob checked by verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyCheck {
    pub knob: String,
    pub expected: String,
    pub actual: String,
    pub ok: bool,
    /// Who changed it, when it drifted and that is known.
    pub who: Option<String>,
}

/// What verify found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub profile: Option<String>,
    pub since: Option<String>,
    pub rebooted: bool,
    pub checks: Vec<VerifyCheck>,
    /// Knobs the machine lacks, with why (not drift).
    pub unsupported: Vec<(String, String)>,
    /// Knobs a killed apply journaled but never wrote (not drift).
    pub not_written: Vec<String>,
    /// The apply was killed before it finished (no process holds the tuning lock): what its
    /// journal holds may be only a part of the profile, and the rest was never written.
    pub unfinished: bool,
    /// The applied profile as its journal names it, to compare it whole where its apply
    /// wrote nothing (every value was as it wants): its name or file, and the CPUs tuned.
    pub applied: Option<(String, String)>,
}

impl VerifyReport {
    pub fn drifted(&self) -> usize {
        self.checks.iter().filter(|c| !c.ok).count()
    }

    /// IRQs whose affinity is as the profile wants but which the kernel still delivers
    /// elsewhere (`effective_affinity_list`): not drift, but interrupts still land on CPUs
    /// the profile keeps them off. One line each.
    pub fn irq_notes(&self, sys: &Sys) -> Vec<String> {
        use latlab_model::units::CpuList;
        self.checks
            .iter()
            .filter(|c| c.ok)
            .filter_map(|c| {
                let irq: u32 = c
                    .knob
                    .strip_prefix("irq ")?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()?;
                let wanted = CpuList::parse(&c.expected).ok()?;
                let path = format!("/proc/irq/{irq}/effective_affinity_list");
                let effective = CpuList::parse(sys.read_trim(&path).ok()?.as_str())
                    .ok()
                    .filter(|e| !e.is_empty())?;
                effective.not_within(&wanted).map(|_| {
                    format!(
                        "{}: set to {}, but the kernel still delivers it to CPU {} ({path}): it \
                         moves an interrupt when it next fires, and some interrupt controllers \
                         keep one where it is",
                        c.knob, c.expected, effective
                    )
                })
            })
            .collect()
    }
}

/// The change an apply that was killed journaled last but never wrote: the journal is not
/// complete and the system still holds the value from before it (a change is journaled first
/// and written second; the process may die between the two). Its sequence number.
pub fn unwritten_last(sys: &Sys, js: &JournalState) -> Option<usize> {
    if js.complete {
        return None;
    }
    let (seq, c) = js.live_entries().into_iter().last()?;
    let actual = read_value(sys, &c.target).ok()?;
    (actual.trim() == c.old_value() && c.old_value() != c.new_value()).then_some(seq)
}

/// Compare every value the journal says was written with what the system has now.
pub fn verify(sys: &Sys, state_dir: &Path) -> Result<VerifyReport, TuneError> {
    let Some(js) = Journal::read(state_dir)? else {
        return Ok(VerifyReport::default());
    };
    same_root(sys, &js)?;
    let daemons = daemons(sys);
    let mut report = VerifyReport {
        profile: Some(js.header.profile.clone()),
        since: Some(since(&js.header)),
        rebooted: rebooted(sys, &js.header),
        applied: Some((
            match js.header.source.as_str() {
                "built-in" | "generated" => js.header.profile.clone(),
                file => file.to_string(),
            },
            js.header.cpus.clone(),
        )),
        unfinished: !js.complete && StateLock::holder(state_dir).is_none(),
        ..VerifyReport::default()
    };
    let unwritten = unwritten_last(sys, &js);
    for (seq, c) in js.live_entries() {
        if unwritten == Some(seq) {
            report.not_written.push(c.knob.clone());
            continue;
        }
        let actual = match read_value(sys, &c.target) {
            Ok(v) => v.trim().to_string(),
            Err(e) => format!("unreadable: {}", describe_io_error(&e)),
        };
        let ok = actual == c.new_value();
        report.checks.push(VerifyCheck {
            knob: c.knob.clone(),
            expected: c.new_value().to_string(),
            who: (!ok).then(|| {
                if report.rebooted {
                    "the reboot since apply".to_string()
                } else {
                    who(&daemons, c.phase)
                }
            }),
            actual,
            ok,
        });
    }
    Ok(report)
}

/// Compare what a profile wants with what the system has now. A value the applied tuning's
/// journal (in `state_dir`) records as refused by the kernel (a managed IRQ) is not drift: it
/// is listed with why, as `tune apply` said it.
pub fn verify_profile(
    sys: &Sys,
    profile: &Profile,
    cpus: Option<&CpuList>,
    state_dir: &Path,
) -> Result<VerifyReport, TuneError> {
    let plan = Plan::build(sys, profile, cpus)?;
    let daemons = daemons(sys);
    let mut report = VerifyReport {
        profile: Some(profile.name.clone()),
        ..VerifyReport::default()
    };
    // A journal that cannot be read refuses nothing here; `tune status` says what is wrong.
    let journal = Journal::read(state_dir).ok().flatten();
    let refused = |c: &Change| {
        let js = journal.as_ref()?;
        js.entries.iter().find_map(|(seq, j)| {
            (j.target == c.target && j.new_value() == c.new_value())
                .then(|| js.skipped.get(seq))
                .flatten()
        })
    };
    for item in plan.items {
        match item.state {
            ItemState::Change(c) if let Some(why) = refused(&c) => report
                .unsupported
                .push((item.knob, format!("{why} (at `tune apply`)"))),
            ItemState::Change(c) => report.checks.push(VerifyCheck {
                knob: item.knob,
                expected: c.new_value().to_string(),
                actual: c.old_value().to_string(),
                ok: false,
                who: Some(who(&daemons, c.phase)),
            }),
            ItemState::Set { value } => report.checks.push(VerifyCheck {
                knob: item.knob,
                expected: value.clone(),
                actual: value,
                ok: true,
                who: None,
            }),
            ItemState::Unsupported { why } => report.unsupported.push((item.knob, why)),
        }
    }
    Ok(report)
}

/// What is applied, since when, and whether its journal was left behind.
#[derive(Debug, Clone)]
pub struct Status {
    pub journal: Option<JournalState>,
    /// The pid holding the tuning lock (`Some(None)`: held, pid unknown).
    pub holder: Option<Option<u32>>,
    pub rebooted: bool,
    /// A journal nobody is responsible for any more: a killed apply, a temporary tuning whose
    /// process died, or a tuning from before a reboot.
    pub stale: bool,
    /// The system root the journal's values were written under, where it is not this one (a
    /// tree tuned with `--sysroot`): its state is that tree's, and so are its commands.
    pub other_root: Option<String>,
}

impl Status {
    pub fn since(&self) -> Option<String> {
        self.journal.as_ref().map(|j| since(&j.header))
    }

    /// The command that restores the journal: under the root its values were written under.
    pub fn restore_command(&self, sys: &Sys, state_dir: &Path) -> String {
        match &self.journal {
            Some(j) => journal_restore_command(sys, state_dir, &j.header),
            None => crate::restore_command(sys, state_dir),
        }
    }

    /// Why a tuning cannot start here now, `None` when none is in force: a latlab process that
    /// holds one (wait for it), or one `tune apply` or a killed process left (restore it).
    pub fn in_force(&self, sys: &Sys, state_dir: &Path) -> Option<TuneError> {
        let j = self.journal.as_ref()?;
        Some(match self.holder {
            Some(pid) => TuneError::Busy {
                pid,
                lock: state_dir.join(crate::journal::LOCK_FILE),
            },
            None => TuneError::AlreadyApplied {
                profile: j.header.profile.clone(),
                since: since(&j.header),
                restore: self.restore_command(sys, state_dir),
            },
        })
    }

    /// A one-line notice for a stale journal.
    pub fn stale_notice(&self, sys: &Sys, state_dir: &Path) -> Option<String> {
        let j = self.journal.as_ref()?;
        if !self.stale {
            return None;
        }
        let h = &j.header;
        let restore = self.restore_command(sys, state_dir);
        // Absolute, as the command is: the notice is read from anywhere.
        let state_dir = &std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.into());
        if self.rebooted {
            return Some(format!(
                "the journal of profile {}, applied before the last reboot (since {}), is in {}; \
                 the reboot reset its values, and `{restore}` clears the journal",
                h.profile,
                since(h),
                state_dir.display()
            ));
        }
        let what = if !j.complete {
            format!(
                "a tuning journal left by latlab pid {} (profile {}, killed while applying, \
                 since {})",
                h.pid,
                h.profile,
                since(h)
            )
        } else {
            format!(
                "a tuning journal left by latlab pid {} (profile {} applied for a run that did \
                 not finish, since {})",
                h.pid,
                h.profile,
                since(h)
            )
        };
        Some(format!(
            "{what} is in {}; run `{restore}` to put the system back",
            state_dir.display()
        ))
    }
}

/// Put back a tuning a process left behind (killed while applying, or while it held a tuning
/// for a run, or one from before a reboot), not one `tune apply` put in force. `None`: nothing
/// was left behind.
pub fn restore_stale(sys: &Sys, state_dir: &Path) -> Result<Option<RestoreReport>, TuneError> {
    if !status(sys, state_dir)?.stale {
        return Ok(None);
    }
    restore(sys, state_dir).map(Some)
}

impl RestoreReport {
    /// What [`restore_stale`] did, in one line.
    pub fn stale_line(&self) -> String {
        format!(
            "restored profile {} left by a process that ended without restoring it ({} values)",
            self.profile.as_deref().unwrap_or_default(),
            self.lines.len()
        )
    }
}

/// The tuning state in `state_dir`.
pub fn status(sys: &Sys, state_dir: &Path) -> Result<Status, TuneError> {
    let journal = Journal::read(state_dir)?;
    let holder = StateLock::holder(state_dir);
    let rebooted = journal.as_ref().is_some_and(|j| rebooted(sys, &j.header));
    let stale = journal
        .as_ref()
        .is_some_and(|j| holder.is_none() && (!j.complete || j.header.temporary || rebooted));
    let other_root = journal.as_ref().and_then(|j| other_root(sys, &j.header));
    Ok(Status {
        journal,
        holder,
        rebooted,
        stale,
        other_root,
    })
}

/// A profile applied for a while: [`TemporaryTuning::apply`] returns a guard that restores
/// the system when dropped (normal return, `?`, panic) or when [`TuningGuard::restore`] is
/// called. While it lives it holds the tuning lock, so no other latlab process tunes; if the
/// process is killed, the journal stays and the next latlab command offers `tune restore`.
///
/// ```no_run
/// # fn main() -> Result<(), latlab_tune::TuneError> {
/// let sys = latlab_sys::Sys::default();
/// let profiles = latlab_tune::Profiles::load(&latlab_tune::Profiles::default_dirs(&sys))?;
/// let profile = profiles.resolve("lowlatency")?;
/// let guard = latlab_tune::TemporaryTuning::apply(
///     &sys, &profile, None, &latlab_tune::default_state_dir(&sys))?;
/// // ... measure ...
/// let report = guard.restore()?;
/// # let _ = report; Ok(()) }
/// ```
pub struct TemporaryTuning;

/// A temporary tuning as the run measured under it records it: the profile, what it changed,
/// and the PM QoS request it held.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningRecord {
    pub profile: String,
    pub lines: Vec<String>,
    pub pm_qos_us: Option<u32>,
}

impl TuningRecord {
    /// Written into a run's environment; the lower of the run's own and the profile's PM QoS
    /// request is the one that ruled.
    pub fn note_in(self, env: &mut latlab_model::RunEnvironment) {
        env.profile = Some(self.profile);
        env.tuning = self.lines;
        env.pm_qos_held_us = match (env.pm_qos_held_us, self.pm_qos_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

impl TemporaryTuning {
    /// Apply `profile` (per-CPU settings on `cpus`, default every online CPU) and hold its
    /// `/dev/cpu_dma_latency` request if it has one. Fails without writing anything when the
    /// profile does not fit, rights are missing, or a tuning is already applied; a failed write
    /// is rolled back before the error returns.
    pub fn apply(
        sys: &Sys,
        profile: &Profile,
        cpus: Option<&CpuList>,
        state_dir: &Path,
    ) -> Result<TuningGuard, TuneError> {
        let opts = ApplyOptions {
            cpus: cpus.cloned(),
            temporary: true,
            restore_previous: false,
            hooks: TestHooks::from_env(),
        };
        let (applied, lock) = apply_inner(sys, profile, state_dir, &opts)?;
        let held = Arc::new(Mutex::new(Held {
            sys: sys.clone(),
            state_dir: state_dir.to_path_buf(),
            lock: Some(lock),
            pm_qos: None,
            done: false,
        }));
        // Put back should the process have to end before the guard does it.
        let on_exit = {
            let (held, name) = (held.clone(), applied.plan.profile.clone());
            latlab_sys::exit_hooks::register(move || {
                let mut h = held.lock().unwrap_or_else(|p| p.into_inner());
                if h.done {
                    return;
                }
                match h.restore_now() {
                    Ok(r) => eprintln!(
                        "latlab: profile {name} restored ({} value(s))",
                        r.lines.len()
                    ),
                    Err(e) => eprintln!("latlab: restoring profile {name} failed: {e}"),
                }
            })
        };
        let mut guard = TuningGuard {
            held,
            applied,
            _on_exit: on_exit,
        };
        if let Some(us) = guard.applied.plan.dma_latency_us {
            match sys.hold_pm_qos(us) {
                Ok(h) => guard.held().pm_qos = Some(h),
                Err(e) => {
                    let _ = guard.restore_now();
                    return Err(TuneError::Io {
                        path: sys.path("/dev/cpu_dma_latency"),
                        error: std::io::Error::other(e.to_string()),
                    });
                }
            }
        }
        Ok(guard)
    }
}

/// A temporary tuning in force; see [`TemporaryTuning`].
pub struct TuningGuard {
    /// Shared with the exit hook, which restores if the process must end first.
    held: Arc<Mutex<Held>>,
    applied: Applied,
    _on_exit: latlab_sys::exit_hooks::Registration,
}

/// What a temporary tuning holds until it is restored.
struct Held {
    sys: Sys,
    state_dir: PathBuf,
    lock: Option<StateLock>,
    pm_qos: Option<PmQosHold>,
    done: bool,
}

impl Held {
    /// Put back what the journal holds, release the PM QoS request and the lock.
    fn restore_now(&mut self) -> Result<RestoreReport, TuneError> {
        self.done = true;
        self.pm_qos = None;
        let result = match Journal::read(&self.state_dir) {
            Ok(Some(js)) => restore_locked(&self.sys, &self.state_dir, js),
            Ok(None) => Ok(RestoreReport::default()),
            Err(e) => Err(e),
        };
        self.lock = None;
        result
    }
}

impl fmt::Debug for TuningGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TuningGuard")
            .field("profile", &self.applied.plan.profile)
            .field("written", &self.applied.written.len())
            .finish()
    }
}

impl TuningGuard {
    /// What was applied.
    pub fn applied(&self) -> &Applied {
        &self.applied
    }

    pub fn profile(&self) -> &str {
        &self.applied.plan.profile
    }

    /// What the tuning changed (`knob: old -> new`) and what it could not (`knob: unsupported
    /// here: why`), for a run's environment.
    pub fn change_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .applied
            .written
            .iter()
            .map(|c| format!("{}: {} -> {}", c.knob, c.old_value(), c.new_value()))
            .collect();
        for item in &self.applied.plan.items {
            if let ItemState::Unsupported { why } = &item.state {
                lines.push(format!("{}: unsupported here: {why}", item.knob));
            }
        }
        lines
    }

    /// The PM QoS request held, in µs.
    pub fn pm_qos_us(&self) -> Option<u32> {
        self.held().pm_qos.as_ref().map(|h| h.us)
    }

    /// What a run measured under this tuning records of it (taken before it is restored).
    pub fn record(&self) -> TuningRecord {
        TuningRecord {
            profile: self.profile().to_string(),
            lines: self.change_lines(),
            pm_qos_us: self.pm_qos_us(),
        }
    }

    /// Restore now and say what was put back.
    pub fn restore(mut self) -> Result<RestoreReport, TuneError> {
        self.restore_now()
    }

    /// What is held (a poisoned lock still holds it: restoring must go on).
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Restore, unless the exit hook already did.
    fn restore_now(&mut self) -> Result<RestoreReport, TuneError> {
        let mut held = self.held();
        if held.done {
            return Ok(RestoreReport::default());
        }
        held.restore_now()
    }
}

impl Drop for TuningGuard {
    fn drop(&mut self) {
        if self.held().done {
            return;
        }
        if let Err(e) = self.restore_now() {
            // Nobody is left to return this to; it must not go unnoticed.
            eprintln!(
                "latlab: restoring profile {} failed: {e}",
                self.applied.plan.profile
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A live thread of this process, as a plan names it.
    fn this_thread(sys: &Sys) -> Target {
        let pid = latlab_sys::thread::gettid();
        let (comm, _, start_time) = task_stat(sys, pid).expect("this thread's stat");
        Target::TaskAffinity {
            pid,
            comm,
            start_time,
        }
    }

    #[test]
    fn a_task_affinity_a_cpu_set_cannot_hold_is_a_refusal_said_not_a_narrowed_move() {
        let sys = Sys::default();
        // Run on a thread of its own: the affinity it may set dies with it.
        std::thread::spawn(move || {
            let target = this_thread(&sys);
            let e = write_value(&sys, &target, "0,5000").unwrap_err();
            assert!(refusal(&e), "{e}");
            assert_eq!(
                refused(&e),
                "refused: CPU 5000 is beyond the 1024 a CPU set holds"
            );
            let e = write_value(&sys, &target, "five").unwrap_err();
            assert!(!refusal(&e), "a value that is no CPU list fails: {e}");
            let before = latlab_sys::thread::affinity().unwrap();
            let first = before[0].to_string();
            write_value(&sys, &target, &first).unwrap();
            assert_eq!(latlab_sys::thread::affinity().unwrap(), [before[0]]);
            let e = std::io::Error::from_raw_os_error(libc::ESRCH);
            assert!(refusal(&e));
            assert!(
                refused(&e).starts_with("the kernel refused: "),
                "{}",
                refused(&e)
            );
        })
        .join()
        .unwrap();
    }
}
