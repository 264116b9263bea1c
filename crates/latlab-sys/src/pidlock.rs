//! A lock one process holds for its life, naming its PID: what keeps a second `latlab monitor`
//! off a series another one is recording.
//!
//! The lock is an exclusive `flock` on a small file that holds the owner's PID. The kernel
//! releases it when the process dies however it dies, so a crashed daemon never leaves a stale
//! lock behind (the file stays; the next owner takes it over and writes its own PID).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// A held lock; dropping it removes the file and releases the lock.
#[derive(Debug)]
pub struct PidLock {
    file: File,
    path: PathBuf,
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it (its PID, when the file names one).
    #[error("{}: held by {}", path.display(), pid.map_or_else(|| "another process".to_string(), |p| format!("PID {p}")))]
    Held { path: PathBuf, pid: Option<u32> },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl PidLock {
    /// Take the lock at `path` (created if missing) without waiting, and write this process's
    /// PID into it.
    pub fn acquire(path: &Path) -> Result<PidLock, LockError> {
        // A holder removes the file as it lets go: a lock taken on a file that has just been
        // removed is worth nothing, so take it again on the file now at the path. A file
        // system where the two never agree is an error, not a spin.
        for _ in 0..100 {
            if let Some(lock) = Self::try_once(path)? {
                return Ok(lock);
            }
        }
        Err(LockError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("the lock file kept changing under the lock (100 tries)"),
        })
    }

    fn try_once(path: &Path) -> Result<Option<PidLock>, LockError> {
        use std::os::unix::fs::MetadataExt;
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor this function owns; no pointers are passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held {
                    path: path.to_path_buf(),
                    pid: text.trim().parse().ok(),
                });
            }
            return Err(io(err));
        }
        let held = file.metadata().map_err(io)?;
        match std::fs::metadata(path) {
            Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => {}
            _ => return Ok(None),
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .and_then(|()| file.flush());
        if let Err(e) = written {
            // A full file system: no empty lock file is left behind (removed while locked, as
            // a holder lets go).
            let _ = std::fs::remove_file(path);
            return Err(io(e));
        }
        Ok(Some(PidLock {
            file,
            path: path.to_path_buf(),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who holds the lock at `path` without taking it: `None` when no one does, `Some(pid)`
    /// when a process does (`Some(None)`: its PID is unknown).
    pub fn holder(path: &Path) -> Option<Option<u32>> {
        let mut file = OpenOptions::new().read(true).open(path).ok()?;
        // SAFETY: flock on a descriptor this function owns; no pointers are passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0 {
            // SAFETY: as above. Closing the file would release it too; this says so.
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
            return None;
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        Some(text.trim().parse().ok())
    }
}

impl Drop for PidLock {
    fn drop(&mut self) {
        // Removed while still locked, so no one can take over a file about to disappear.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = PidLock::acquire(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().trim(),
            std::process::id().to_string()
        );
        // flock locks belong to the open file description: a second open is a second holder.
        match PidLock::acquire(&path) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("second lock: {other:?}"),
        }
        assert_eq!(PidLock::holder(&path), Some(Some(std::process::id())));
        drop(first);
        assert!(!path.exists(), "the file goes with the lock");
        assert_eq!(PidLock::holder(&path), None);
        std::fs::write(&path, "4242\n").unwrap();
        assert_eq!(
            PidLock::holder(&path),
            None,
            "a file nobody locks is no holder"
        );
        let again = PidLock::acquire(&path).unwrap();
        assert_eq!(again.path(), path);
    }

    #[test]
    fn a_left_over_file_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        std::fs::write(&path, "999999\nold\n").unwrap();
        let _l = PidLock::acquire(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
    }

    #[test]
    fn an_unwritable_place_is_an_io_error_naming_the_path() {
        let e = PidLock::acquire(Path::new("/nonexistent-dir/x.lock")).unwrap_err();
        assert!(matches!(e, LockError::Io { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with("/nonexistent-dir/x.lock: "),
            "{e}"
        );
    }
}
