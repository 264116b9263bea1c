//! Tuning profiles for latlab: TOML profiles that set a system for throughput, low latency, real
//! time or low power, and always put it back.
//!
//! - [`profile`]: the file format, built-in profiles, include chains, per-CPU tables.
//! - [`plan`]: what a profile would change on this machine, knob by knob (current → target),
//!   with knobs the machine lacks marked "unsupported here: why".
//! - [`apply`]: a journaled apply (every original value is synced to a state file before each
//!   write, writes go in a safe order, a failed write rolls back what was written), verify,
//!   status and restore (also after a crash or a reboot), and [`TemporaryTuning`] for a profile
//!   applied only while a guard lives.
//! - [`journal`]: the state file and the lock that keeps two latlab processes from tuning at once.
//! - [`boot`]: kernel command line advice, the GRUB drop-in, and a profile recommendation.
//!
//! Every read and write goes through [`latlab_sys::Sys`], so tests run against fixture trees.

pub mod apply;
pub mod boot;
pub mod journal;
pub mod plan;
pub mod profile;
pub mod search;

pub use apply::{
    Applied, ApplyOptions, Outcome, RestoreLine, RestoreReport, Status, TemporaryTuning, TestHooks,
    TuningGuard, TuningRecord, VerifyCheck, VerifyReport, apply, nothing_applies, restore,
    restore_stale, status, verify, verify_profile,
};
pub use plan::{Change, Item, ItemState, Phase, Plan, Split, Target, cpufreq_policy};
pub use profile::{Origin, Profile, ProfileError, ProfileSource, Profiles};

use std::path::{Path, PathBuf};

/// Where the journal and the lock live by default: `/var/lib/latlab` under the system root, or
/// `LATLAB_STATE_DIR` when set.
pub fn default_state_dir(sys: &latlab_sys::Sys) -> PathBuf {
    match std::env::var_os("LATLAB_STATE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => sys.path("/var/lib/latlab"),
    }
}

/// The command that restores the journal in `state_dir`, as it can be copied: with
/// `--state-dir` and the directory's absolute path unless it is the default one (a directory
/// set through `LATLAB_STATE_DIR` is named too, so the command works in any shell). A system
/// root other than `/` is named with `--sysroot`: the journal is restored under the root its
/// values were written under, and no other.
pub fn restore_command(sys: &latlab_sys::Sys, state_dir: &Path) -> String {
    if state_dir == sys.path("/var/lib/latlab") {
        command(sys, "tune restore")
    } else {
        command(
            sys,
            &format!(
                "tune restore --state-dir {}",
                latlab_model::units::shell_path(state_dir)
            ),
        )
    }
}

/// `latlab ARGS` as it can be copied for the system `sys` reads: with its `--sysroot` where
/// that is not `/`.
pub fn command(sys: &latlab_sys::Sys, args: &str) -> String {
    match sys.root() {
        r if r == Path::new("/") => format!("latlab {args}"),
        r => format!(
            "latlab --sysroot {} {args}",
            latlab_model::units::shell_path(r)
        ),
    }
}

/// The name of an errno value (`EIO`), for messages that name the errno.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::ERANGE => "ERANGE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "errno",
    }
}

/// "Input/output error (EIO, errno 5)".
pub fn describe_io_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let text = std::io::Error::from_raw_os_error(n).to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_string();
            format!("{text} ({}, errno {n})", errno_name(n))
        }
        None => e.to_string(),
    }
}

/// Everything that can stop a tuning command.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A malformed or unknown profile.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A profile that does not fit this machine (e.g. a CPU that does not exist).
    #[error("{at}: {message}")]
    Invalid { at: Origin, message: String },
    /// A bad `--cpus` list.
    #[error("--cpus {cpus}: {message}")]
    Cpus { cpus: String, message: String },
    /// Not allowed to write; nothing was written. `hint`: what may help (root, where latlab
    /// does not run as root; else what refuses even root).
    #[error("{path} is not writable ({why}); {hint}; nothing was written")]
    NotPermitted {
        path: PathBuf,
        why: String,
        hint: &'static str,
    },
    /// Another process holds the tuning lock.
    #[error(
        "another latlab process{} is tuning this system (lock {}); wait for it to finish",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(), lock.display()
    )]
    Busy { pid: Option<u32>, lock: PathBuf },
    /// A tuning is already in place and must be restored first.
    #[error("profile {profile} is applied (since {since}); restore it first with `{restore}`")]
    AlreadyApplied {
        profile: String,
        since: String,
        /// The command that restores it ([`restore_command`]).
        restore: String,
    },
    /// A write failed; what was written before it has been rolled back (or says why not).
    /// `target`: the file (or task) and the value, `path = value`.
    #[error("writing {knob} ({target}) failed: {error}; {rollback}")]
    WriteFailed {
        knob: String,
        target: String,
        error: String,
        errno: Option<i32>,
        rollback: String,
    },
    /// A journal that cannot be read or written.
    #[error("journal {}: {message}", path.display())]
    Journal { path: PathBuf, message: String },
    /// Said in one line with its cause (not also as a source, which would say it twice).
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{0}")]
    Sys(#[from] latlab_sys::SysError),
    /// Restore could not put every value back; the journal is kept for another try.
    #[error("restore incomplete: {}; the journal is kept, run `{restore}` again", failed.join("; "))]
    RestoreIncomplete {
        failed: Vec<String>,
        /// The command that tries again ([`restore_command`]).
        restore: String,
        report: Box<apply::RestoreReport>,
    },
    /// Writing a GRUB drop-in where there is no GRUB.
    #[error("{0}")]
    Boot(String),
    /// A tuning search that cannot go on (a run that failed, a restore that left values).
    #[error("{0}")]
    Search(String),
    /// No setting of the profile applies to this machine (each unsupported here): nothing was
    /// written and no journal made, since nothing of it would be in effect.
    #[error("profile {profile} sets nothing this machine has (unsupported here: {why})")]
    NothingApplies { profile: String, why: String },
}

impl TuneError {
    /// Bad input: a malformed or unknown profile, a profile that does not fit the machine, a
    /// bad CPU list. Reported before anything is written.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            TuneError::Profile(_) | TuneError::Invalid { .. } | TuneError::Cpus { .. }
        )
    }

    pub(crate) fn io(path: &Path, error: std::io::Error) -> TuneError {
        TuneError::Io {
            path: path.to_path_buf(),
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::restore_command;
    use std::path::Path;

    /// The printed command restores the journal it speaks of, from any directory.
    #[test]
    fn the_restore_command_names_a_state_dir_other_than_the_default() {
        let sys = latlab_sys::Sys::new("/");
        assert_eq!(
            restore_command(&sys, Path::new("/var/lib/latlab")),
            "latlab tune restore"
        );
        assert_eq!(
            restore_command(&sys, Path::new("/srv/my state")),
            "latlab tune restore --state-dir '/srv/my state'"
        );
        let cwd = std::env::current_dir().unwrap_or_else(|e| panic!("cwd: {e}"));
        assert_eq!(
            restore_command(&sys, Path::new("st")),
            format!(
                "latlab tune restore --state-dir {}",
                cwd.join("st").display()
            )
        );
        // Under another system root (a fixture tree), that root is named too.
        let tree = latlab_sys::Sys::new("/srv/tree");
        assert_eq!(
            restore_command(&tree, Path::new("/srv/tree/var/lib/latlab")),
            "latlab --sysroot /srv/tree tune restore"
        );
        assert_eq!(
            restore_command(&tree, Path::new("/srv/st")),
            "latlab --sysroot /srv/tree tune restore --state-dir /srv/st"
        );
    }
}
