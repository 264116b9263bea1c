//! The journal of changed values and the tuning lock, both in the state directory
//! (`/var/lib/latlab` by default).
//!
//! The journal (`tune.journal`) is JSON lines, appended and synced (`fdatasync`) before the
//! write it describes: a header (profile, boot id, pid, start time), one `entry` per value with
//! its original and new value, `skipped` for a best-effort write the kernel refused, `complete`
//! when the apply finished, and `undone` for each value restore (or rollback) put back. A torn
//! last line (a crash in the middle of appending) is ignored: its write never happened.
//!
//! The lock (`tune.lock`, a `latlab_sys::pidlock::PidLock` naming its holder) is an exclusive
//! `flock`, held by `tune apply` while it writes, by `tune restore`, and by a temporary tuning for
//! as long as it lives. Its file goes when it is released. The kernel drops it when the holder
//! dies, which is how a journal left by a killed process is told apart.

use crate::TuneError;
use crate::plan::Change;
use latlab_sys::pidlock::{LockError, PidLock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

pub const JOURNAL_FILE: &str = "tune.journal";
pub const LOCK_FILE: &str = "tune.lock";

/// The first line of a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always "latlab.tune".
    pub journal: String,
    pub version: u32,
    pub profile: String,
    /// "built-in" or the profile file.
    pub source: String,
    /// The CPUs tuned.
    pub cpus: String,
    pub started_unix_ns: u64,
    /// `/proc/sys/kernel/random/boot_id` at apply time (None where unreadable).
    pub boot_id: Option<String>,
    pub pid: u32,
    /// Applied for a while (a run) rather than until `tune restore`.
    pub temporary: bool,
    /// The system root the values were written under.
    pub sysroot: String,
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    Header(Header),
    Entry { seq: usize, change: Change },
    Skipped { seq: usize, why: String },
    Complete { writes: usize },
    Undone { seq: usize },
}

/// A journal as read back.
#[derive(Debug, Clone)]
pub struct JournalState {
    pub path: PathBuf,
    pub header: Header,
    /// Every journaled change, in apply order.
    pub entries: Vec<(usize, Change)>,
    /// Best-effort writes the kernel refused, with why.
    pub skipped: BTreeMap<usize, String>,
    pub undone: BTreeSet<usize>,
    pub complete: bool,
}

impl JournalState {
    /// Changes whose write happened (or may have: the process may have died right after
    /// journaling it) and that are not yet undone.
    pub fn live_entries(&self) -> Vec<(usize, &Change)> {
        self.entries
            .iter()
            .filter(|(s, _)| !self.skipped.contains_key(s) && !self.undone.contains(s))
            .map(|(s, c)| (*s, c))
            .collect()
    }
}

/// An open journal, appended to.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Journal {
    pub fn path_in(dir: &Path) -> PathBuf {
        dir.join(JOURNAL_FILE)
    }

    /// Start a new journal with its header, synced (file and directory) before returning.
    pub fn create(dir: &Path, header: Header) -> Result<Journal, TuneError> {
        std::fs::create_dir_all(dir).map_err(|e| TuneError::io(dir, e))?;
        let path = Journal::path_in(dir);
        let open = || OpenOptions::new().create_new(true).append(true).open(&path);
        let file = match open() {
            // A journal cut before its header was whole (a crash, a full disk): nothing was
            // written to the system under it, and it must not block every later tuning.
            Err(e)
                if e.kind() == std::io::ErrorKind::AlreadyExists
                    && Journal::read(dir)?.is_none() =>
            {
                std::fs::remove_file(&path).map_err(|e| TuneError::io(&path, e))?;
                open()
            }
            r => r,
        }
        .map_err(|e| TuneError::io(&path, e))?;
        let mut j = Journal { path, file };
        j.append(&Line::Header(header))?;
        sync_dir(dir);
        Ok(j)
    }

    /// Open an existing journal for appending.
    pub fn open(dir: &Path) -> Result<Journal, TuneError> {
        let path = Journal::path_in(dir);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| TuneError::io(&path, e))?;
        // A torn last line gets a newline so later lines start fresh.
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len > 0 {
            let mut last = [0u8; 1];
            if file.seek(std::io::SeekFrom::Start(len - 1)).is_ok()
                && file.read_exact(&mut last).is_ok()
                && last[0] != b'\n'
            {
                file.write_all(b"\n").map_err(|e| TuneError::io(&path, e))?;
            }
        }
        Ok(Journal { path, file })
    }

    /// Append one line and sync it to disk.
    pub fn append(&mut self, line: &Line) -> Result<(), TuneError> {
        let mut text = serde_json::to_string(line).map_err(|e| TuneError::Journal {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(|e| TuneError::io(&self.path, e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read the journal in `dir`, if there is one.
    pub fn read(dir: &Path) -> Result<Option<JournalState>, TuneError> {
        let path = Journal::path_in(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(TuneError::io(&path, e)),
        };
        let bad = |message: String| TuneError::Journal {
            path: path.clone(),
            message,
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut state: Option<JournalState> = None;
        for (i, l) in lines.iter().enumerate() {
            let line: Line = match serde_json::from_str(l) {
                Ok(line) => line,
                // A line torn by a crash; a later line may follow if the journal was reopened.
                Err(_) if i + 1 == lines.len() || !l.trim_end().ends_with('}') => continue,
                Err(e) => return Err(bad(format!("line {}: {e}", i + 1))),
            };
            match (line, &mut state) {
                (Line::Header(header), None) => {
                    state = Some(JournalState {
                        path: path.clone(),
                        header,
                        entries: Vec::new(),
                        skipped: BTreeMap::new(),
                        undone: BTreeSet::new(),
                        complete: false,
                    });
                }
                (Line::Header(_), Some(_)) => {
                    return Err(bad(format!("line {}: a second header", i + 1)));
                }
                (_, None) => return Err(bad("no header".into())),
                (Line::Entry { seq, change }, Some(s)) => s.entries.push((seq, change)),
                (Line::Skipped { seq, why }, Some(s)) => {
                    s.skipped.insert(seq, why);
                }
                (Line::Complete { .. }, Some(s)) => s.complete = true,
                (Line::Undone { seq }, Some(s)) => {
                    s.undone.insert(seq);
                }
            }
        }
        match state {
            Some(s) => Ok(Some(s)),
            // Killed while writing the header: nothing was written to the system.
            None => Ok(None),
        }
    }

    /// Remove the journal in `dir` (after a full restore).
    pub fn remove(dir: &Path) -> Result<(), TuneError> {
        let path = Journal::path_in(dir);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                sync_dir(dir);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(TuneError::io(&path, e)),
        }
    }
}

/// The exclusive tuning lock (a [`PidLock`] on `tune.lock`); released, and its file removed,
/// when dropped (or released by the kernel when the process dies).
#[derive(Debug)]
pub struct StateLock(PidLock, PathBuf);

/// The state directories whose lock this process holds: what a process that must exit at once
/// names, so the tuning it may leave can be restored.
static LOCKED_HERE: latlab_sys::HeldHere<PathBuf> = latlab_sys::HeldHere::new();

/// The state directories whose tuning lock this process holds now.
pub fn locked_here() -> Vec<PathBuf> {
    LOCKED_HERE.now()
}

impl StateLock {
    /// Take the lock without waiting; `Busy` names the holder's pid when it is known.
    pub fn acquire(dir: &Path) -> Result<StateLock, TuneError> {
        std::fs::create_dir_all(dir).map_err(|e| TuneError::io(dir, e))?;
        let lock = PidLock::acquire(&dir.join(LOCK_FILE)).map_err(|e| match e {
            LockError::Held { path, pid } => TuneError::Busy { pid, lock: path },
            LockError::Io { path, source } => TuneError::io(&path, source),
        })?;
        LOCKED_HERE.add(dir.to_path_buf());
        Ok(StateLock(lock, dir.to_path_buf()))
    }

    /// The pid holding the lock in `dir`, if a process holds it (`Some(None)`: held, pid
    /// unknown).
    pub fn holder(dir: &Path) -> Option<Option<u32>> {
        PidLock::holder(&dir.join(LOCK_FILE))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        LOCKED_HERE.remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::plan::{Phase, Target};

    /// A process that must exit at once names the state directories whose lock it holds.
    #[test]
    fn the_state_dirs_locked_here_are_known_until_the_lock_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let lock = StateLock::acquire(&state).unwrap();
        assert!(locked_here().contains(&state));
        drop(lock);
        assert!(!locked_here().contains(&state));
    }

    fn header() -> Header {
        Header {
            journal: "latlab.tune".into(),
            version: 1,
            profile: "p".into(),
            source: "built-in".into(),
            cpus: "0-1".into(),
            started_unix_ns: 1,
            boot_id: Some("b".into()),
            pid: 1,
            temporary: false,
            sysroot: "/".into(),
        }
    }

    fn change(n: usize) -> Change {
        Change {
            knob: format!("k{n}"),
            target: Target::File {
                path: format!("/f{n}"),
            },
            old: "0\n".into(),
            new: "1\n".into(),
            phase: Phase::Sysctl,
            best_effort: false,
        }
    }

    #[test]
    fn journal_round_trip_and_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), header()).unwrap();
        j.append(&Line::Entry {
            seq: 0,
            change: change(0),
        })
        .unwrap();
        j.append(&Line::Entry {
            seq: 1,
            change: change(1),
        })
        .unwrap();
        j.append(&Line::Undone { seq: 1 }).unwrap();
        drop(j);
        // A crash in the middle of a line.
        let path = Journal::path_in(dir.path());
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"entry\":{\"seq\":2,\"cha").unwrap();
        let s = Journal::read(dir.path()).unwrap().unwrap();
        assert_eq!(s.header, header());
        assert_eq!(s.entries.len(), 2);
        assert_eq!(s.live_entries().len(), 1);
        assert!(!s.complete);
        // Reopened, appends start on a fresh line.
        let mut j = Journal::open(dir.path()).unwrap();
        j.append(&Line::Undone { seq: 0 }).unwrap();
        let s = Journal::read(dir.path()).unwrap().unwrap();
        assert!(s.live_entries().is_empty());
        Journal::remove(dir.path()).unwrap();
        assert!(Journal::read(dir.path()).unwrap().is_none());
    }

    #[test]
    fn a_journal_cut_before_its_header_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        for torn in ["", "{\"header\":{\"journal\":\"latlab.t"] {
            std::fs::write(Journal::path_in(dir.path()), torn).unwrap();
            assert!(Journal::read(dir.path()).unwrap().is_none());
            drop(Journal::create(dir.path(), header()).unwrap());
            let js = Journal::read(dir.path()).unwrap().unwrap();
            assert_eq!(js.header, header());
            Journal::remove(dir.path()).unwrap();
        }
    }

    #[test]
    fn lock_is_exclusive_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let lock = StateLock::acquire(dir.path()).unwrap();
        assert_eq!(
            StateLock::holder(dir.path()),
            Some(Some(std::process::id()))
        );
        match StateLock::acquire(dir.path()) {
            Err(TuneError::Busy { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        drop(lock);
        assert_eq!(StateLock::holder(dir.path()), None);
        assert!(
            !dir.path().join(LOCK_FILE).exists(),
            "released with its file"
        );
        StateLock::acquire(dir.path()).unwrap();
    }
}
