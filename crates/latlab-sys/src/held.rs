//! A kernel value (a sysctl) set for a while and put back, with its original kept on disk for
//! as long as it is changed, so that a process killed while holding it (SIGKILL runs no hook)
//! leaves what the next one needs to put it back.
//!
//! Before the value is written, `<dir>/<name>.undo` is written and synced: the value's path and
//! its original, one a line. Beside it, `<dir>/<name>.lock` (a [`PidLock`]) is held for as long
//! as the value is. Dropping the hold writes the original back, then removes the record and the
//! lock. A record whose lock no one holds was left by a process that died holding it:
//! [`put_back_left`] writes its original back and removes it.
//!
//! The default directory is `/run/latlab`, on tmpfs: it is emptied at boot, as the kernel's
//! values are reset, so a record never outlives the value it describes.

use crate::pidlock::{LockError, PidLock};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the records live unless `LATLAB_RUN_DIR` names another directory.
pub const RUN_DIR: &str = "/run/latlab";

/// The records' directory: `LATLAB_RUN_DIR`, else [`RUN_DIR`].
pub fn run_dir() -> PathBuf {
    std::env::var_os("LATLAB_RUN_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(RUN_DIR), PathBuf::from)
}

/// A value set by this process, put back on drop.
#[derive(Debug)]
pub struct Held {
    path: PathBuf,
    original: String,
    record: PathBuf,
    _lock: PidLock,
}

/// What [`hold`] did.
#[derive(Debug)]
pub enum Hold {
    /// Set; the original is written back when this is dropped.
    Set(Held),
    /// Already at the value: nothing written, nothing to put back.
    AlreadySet,
    /// Another live process holds it set (its PID, when known): left to it.
    HeldBy(Option<u32>),
}

fn record_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.undo")),
        dir.join(format!("{name}.lock")),
    )
}

fn at(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Set the value at `path` to `value` for as long as the returned [`Held`] lives, keeping its
/// original in `dir` under `name` first. Nothing is written to `path` unless the record is on
/// disk. Errors name the file that failed.
pub fn hold(path: &Path, value: &str, dir: &Path, name: &str) -> Result<Hold, String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(at(dir))?;
    let (record, lock) = record_paths(dir, name);
    let lock = match PidLock::acquire(&lock) {
        Ok(l) => l,
        Err(LockError::Held { pid, .. }) => return Ok(Hold::HeldBy(pid)),
        Err(e) => return Err(e.to_string()),
    };
    // A record left by a holder that died: its original is the value to keep, not what the
    // kernel reads now (the value that holder set).
    let original = match read_record(&record) {
        Some((p, original)) if p == path => original,
        _ => std::fs::read_to_string(path)
            .map_err(at(path))?
            .trim()
            .to_string(),
    };
    if original == value {
        drop(lock);
        let _ = std::fs::remove_file(&record);
        return Ok(Hold::AlreadySet);
    }
    write_synced(&record, &format!("{}\n{original}\n", path.display()))?;
    if let Err(e) = std::fs::write(path, value) {
        let _ = std::fs::remove_file(&record);
        return Err(at(path)(e));
    }
    Ok(Hold::Set(Held {
        path: path.to_path_buf(),
        original,
        record,
        _lock: lock,
    }))
}

impl Held {
    pub fn original(&self) -> &str {
        &self.original
    }

    /// Writes the original back; for an exit hook (the hold itself does it on drop).
    pub fn put_back_fn(&self) -> impl FnOnce() + Send + 'static {
        let (path, original) = (self.path.clone(), self.original.clone());
        move || {
            let _ = std::fs::write(path, original);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The record goes only once the original is back: a failed write keeps it for the
        // next one to try.
        if std::fs::write(&self.path, &self.original).is_ok() {
            let _ = std::fs::remove_file(&self.record);
        }
    }
}

fn write_synced(path: &Path, text: &str) -> Result<(), String> {
    let mut f = std::fs::File::create(path).map_err(at(path))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(at(path))
}

fn read_record(record: &Path) -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string(record).ok()?;
    let mut lines = text.lines();
    let path = PathBuf::from(lines.next()?);
    let original = lines.next()?.to_string();
    Some((path, original))
}

/// Put back every value in `dir` whose holder died without putting it back; one line each,
/// saying what was written where (or why it could not be).
pub fn put_back_left(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".undo"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    let mut said = Vec::new();
    for name in names {
        let (record, lock) = record_paths(dir, &name);
        // Taking the lock proves its holder is gone, and keeps a new holder out meanwhile.
        let Ok(_lock) = PidLock::acquire(&lock) else {
            continue;
        };
        let Some((path, original)) = read_record(&record) else {
            let _ = std::fs::remove_file(&record);
            continue;
        };
        match std::fs::write(&path, &original) {
            Ok(()) => {
                let _ = std::fs::remove_file(&record);
                said.push(format!(
                    "put back {} to {original} (left changed by a process that ended without \
                     restoring it)",
                    path.display()
                ));
            }
            Err(e) => said.push(format!(
                "could not put back {} to {original}: {e} (kept in {})",
                path.display(),
                record.display()
            )),
        }
    }
    said
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn value(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap().trim().to_string()
    }

    #[test]
    fn a_value_is_set_recorded_and_put_back() {
        let t = tempfile::tempdir().unwrap();
        let (knob, dir) = (t.path().join("knob"), t.path().join("run"));
        std::fs::write(&knob, "0\n").unwrap();
        let Hold::Set(held) = hold(&knob, "1", &dir, "knob").unwrap() else {
            panic!("not set")
        };
        assert_eq!(value(&knob), "1");
        let record = std::fs::read_to_string(dir.join("knob.undo")).unwrap();
        assert_eq!(record, format!("{}\n0\n", knob.display()));
        // While it is held, another holder leaves it alone and nothing is put back.
        assert!(matches!(
            hold(&knob, "1", &dir, "knob").unwrap(),
            Hold::HeldBy(Some(_))
        ));
        assert!(put_back_left(&dir).is_empty());
        assert_eq!(value(&knob), "1");
        drop(held);
        assert_eq!(value(&knob), "0");
        assert!(!dir.join("knob.undo").exists());
        assert!(!dir.join("knob.lock").exists());
    }

    #[test]
    fn a_value_already_set_is_not_touched() {
        let t = tempfile::tempdir().unwrap();
        let (knob, dir) = (t.path().join("knob"), t.path().join("run"));
        std::fs::write(&knob, "1\n").unwrap();
        assert!(matches!(
            hold(&knob, "1", &dir, "knob").unwrap(),
            Hold::AlreadySet
        ));
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1\n");
        assert!(!dir.join("knob.undo").exists());
    }

    /// A holder killed with SIGKILL: its record stays and its lock is free.
    fn killed_holder(knob: &Path, dir: &Path) {
        std::fs::write(knob, "0\n").unwrap();
        let Hold::Set(held) = hold(knob, "1", dir, "knob").unwrap() else {
            panic!("not set")
        };
        // What SIGKILL leaves: no drop ran, and the kernel let go of the lock.
        let (record, _) = record_paths(dir, "knob");
        let kept = std::fs::read(&record).unwrap();
        drop(held);
        std::fs::write(knob, "1").unwrap();
        std::fs::write(&record, kept).unwrap();
    }

    #[test]
    fn what_a_killed_holder_left_is_put_back() {
        let t = tempfile::tempdir().unwrap();
        let (knob, dir) = (t.path().join("knob"), t.path().join("run"));
        killed_holder(&knob, &dir);
        let said = put_back_left(&dir);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("put back "), "{said:?}");
        assert!(said[0].contains("knob to 0"), "{said:?}");
        assert_eq!(value(&knob), "0");
        assert!(!dir.join("knob.undo").exists());
        assert!(put_back_left(&dir).is_empty());
    }

    #[test]
    fn a_new_holder_keeps_the_original_a_killed_one_recorded() {
        let t = tempfile::tempdir().unwrap();
        let (knob, dir) = (t.path().join("knob"), t.path().join("run"));
        killed_holder(&knob, &dir);
        // The kernel reads 1 (the dead holder's value); the original to restore is still 0.
        let Hold::Set(held) = hold(&knob, "1", &dir, "knob").unwrap() else {
            panic!("the value the dead holder set was taken for the original")
        };
        assert_eq!(held.original(), "0");
        drop(held);
        assert_eq!(value(&knob), "0");
    }

    #[test]
    fn nothing_is_written_without_a_record() {
        let t = tempfile::tempdir().unwrap();
        let knob = t.path().join("knob");
        std::fs::write(&knob, "0\n").unwrap();
        let blocker = t.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let err = hold(&knob, "1", &blocker.join("run"), "knob").unwrap_err();
        assert!(err.contains("file/run"), "{err}");
        assert_eq!(value(&knob), "0");
    }
}
