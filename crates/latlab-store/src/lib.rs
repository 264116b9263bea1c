//! latlab's results store: one SQLite file holding runs, experiments and monitoring windows.
//!
//! - Runs ([`RunResult`]) are saved in one transaction — a crash leaves the whole run or none of
//!   it — as relational parts (threads with their histograms, windows, spikes, load reports,
//!   sampler series, the deduplicated system record) and read back equal to what was saved.
//! - Experiments and cells let `latlab run` record its plan and which cells are done, so an
//!   interrupted plan resumes where it stopped.
//! - Monitoring series hold one set of per-CPU windows per transaction, with histograms, the
//!   sampler summary and annotations; retention merges old windows into hourly rows exactly.
//!
//! The schema is versioned by an ordered list of [`MIGRATIONS`]: opening an older store migrates
//! it, a store newer than this build is refused untouched. The file runs in WAL mode (readers and
//! one writer at a time) with foreign keys enforced. Histograms are stored in
//! [`Histogram::encode`]'s compact binary form.

use latlab_hist::{HistError, Histogram};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod check;
mod experiments;
mod monitor;
mod rollups;
mod runs;
mod schema;
mod totals;

pub use check::CheckReport;
pub use experiments::{Cell, CellRef, CellStatus, Experiment, ExperimentId, ExperimentStatus};
pub use latlab_model::RunResult;
pub use monitor::{
    Annotation, COARSE_SHIFT, END_OF_TIME, FULL_RESOLUTION_NS, HOUR_NS, MergeSummary, MonitorSpike,
    MonitorWindow, MonitorWindowRow, SeriesConfig, SeriesExtent, SeriesId, SeriesSpec, SeriesState,
    UnsavedWindows, WindowSet, WindowSetRow, power_names,
};
pub use rollups::{DAY_NS, ROLLUP_SPANS_NS, Weighted, WindowSummary};
pub use runs::{REMOVED, RunFilter, RunId, RunSummary};
pub use schema::{APPLICATION_ID, MIGRATIONS, Migration, SCHEMA_VERSION};
pub use totals::{CpuTotals, SeriesTotals};

/// What an error of a store at `path` should add where its file system is full: SQLite says
/// "disk I/O error" when it cannot even open its journal.
fn space_left(path: &Path) -> String {
    match latlab_sys::available_bytes(path) {
        Some(0) => "; the file system holding it is full".into(),
        // Less than a store's set-up and its journal take.
        Some(n) if n < 1 << 20 => {
            format!(
                "; the file system holding it is nearly full ({} KiB left)",
                n / 1024
            )
        }
        _ => String::new(),
    }
}

/// Where [`rescue_file`] keeps what the store at `store` could not take: beside it, else in
/// the temporary directory.
pub fn rescue_dirs(store: &Path) -> [PathBuf; 2] {
    let beside = store
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    [beside.to_path_buf(), std::env::temp_dir()]
}

/// Write `text` to a file `name` beside the store at `store`, or else in the temporary
/// directory: what the store could not take, kept for later. The path written, or why no file
/// took it (a partial file is removed: it is no copy).
pub fn rescue_file(store: &Path, name: &str, text: &str) -> std::result::Result<PathBuf, String> {
    let mut why = Vec::new();
    for path in rescue_dirs(store).map(|d| d.join(name)) {
        match std::fs::write(&path, text) {
            Ok(()) => return Ok(path),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                why.push(format!("{}: {e}", path.display()));
            }
        }
    }
    Err(why.join("; "))
}

/// The store's file name when no path is given.
pub const DEFAULT_FILE: &str = "latlab.db";
/// The environment variable naming the store when no path is given.
pub const ENV_VAR: &str = "LATLAB_DB";

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no store at {0}")]
    Missing(PathBuf),
    #[error(
        "cannot open the store {path}: {}{}{}",
        sql_text(error),
        space_left(path),
        damaged(error)
    )]
    Open {
        path: PathBuf,
        /// Said in the message, not as a source: it would be said again after it.
        error: rusqlite::Error,
    },
    #[error("{path} is not a latlab store ({reason}); it was left untouched")]
    NotAStore { path: PathBuf, reason: String },
    /// The file could not be read (to identify it).
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the store {path} has schema version {found}, newer than this latlab supports ({supported}); \
         upgrade latlab (the store was left untouched)"
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A store this process may only read, at an older schema that only a write could migrate.
    #[error(
        "the store {path} has schema version {found}, older than this latlab's ({supported}), \
         and it is not writable here to migrate it (accepted: open it once as a user who can \
         write it, or with an older latlab)"
    )]
    ReadOnlyOld {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A store whose file has other names (hard links): SQLite keeps the write-ahead log by
    /// name, so two names of one store give it two logs, and writes through both damage it.
    #[error(
        "the store {path} has {links} names (hard links to one file); SQLite keeps a store's \
         log by its name, and two names give one store two logs, which damage it (accepted: a \
         store of one name: remove the other links)"
    )]
    HardLinked { path: PathBuf, links: u64 },
    /// A store a command must change is not writable here.
    #[error("the store {path} is not writable here ({why})")]
    NotWritable { path: PathBuf, why: String },
    #[error(
        "migrating the store {path} to version {version} ({name}): {}{}",
        sql_text(error),
        space_left(path)
    )]
    Migration {
        path: PathBuf,
        version: u32,
        name: &'static str,
        /// Said in the message, not as a source: it would be said again after it.
        error: rusqlite::Error,
    },
    #[error("no run {0} in the store")]
    UnknownRun(String),
    #[error("no experiment {0} in the store")]
    UnknownExperiment(i64),
    #[error("no monitor series {0} in the store")]
    UnknownSeries(String),
    #[error("run {uid} is already in the store as run {id}")]
    DuplicateRun { uid: String, id: i64 },
    #[error("invalid input: {0}")]
    Invalid(String),
    /// A window set whose time a stored one of its series already covers.
    #[error("invalid input: window set {index} overlaps the stored window starting at {other}")]
    Overlap { index: u64, other: u64 },
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// SQLite's error, said once (as its own source it was said three times over).
    #[error("store: {}{}", sql_text(.0), damaged(.0))]
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e)
    }
}

/// SQLite's words for `e`, without the error code it repeats them with.
fn sql_text(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(message)) if !message.is_empty() => message.clone(),
        other => other.to_string(),
    }
}

/// What to do about a store SQLite finds damaged.
fn damaged(e: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::DatabaseCorrupt | C::NotADatabase) => {
            " (the store's file is damaged: restore it from a backup; `sqlite3 STORE \
             .recover` may save what can still be read)"
        }
        _ => "",
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// Whether the failure is the storage's rather than the data's: a full disk, a read-only
    /// or vanished file, an I/O error, a lock held too long. Writing the same data again later
    /// may succeed; for any other error it never will.
    pub fn is_storage_failure(&self) -> bool {
        use rusqlite::ErrorCode as C;
        let sql = match self {
            StoreError::Sql(e)
            | StoreError::Open { error: e, .. }
            | StoreError::Migration { error: e, .. } => e,
            StoreError::Missing(_) | StoreError::Read { .. } => return true,
            _ => return false,
        };
        matches!(
            sql.sqlite_error_code(),
            Some(
                C::DiskFull
                    | C::ReadOnly
                    | C::SystemIoFailure
                    | C::CannotOpen
                    | C::DatabaseBusy
                    | C::DatabaseLocked
                    | C::OutOfMemory
            )
        )
    }
}

/// What became of a store's file under a process that has it open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFate {
    /// Still the file that was opened.
    InPlace,
    /// Nothing is at the path any more (writes would go to a file no one can open again).
    Deleted,
    /// Another file is at the path.
    Replaced,
    /// The file that was opened, but something else wrote over it (`> store.db`, a mistaken
    /// output): it no longer begins as an SQLite database does, and what it held is lost.
    WrittenOver,
}

/// An open store. One writer at a time; readers in other processes see committed data.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Device and inode of the file as opened.
    file: Option<(u64, u64)>,
    /// Whether the file was seen beginning as an SQLite database: a new store's file stays
    /// empty until its journal is first copied into it, and is not written over for that.
    header_seen: std::cell::Cell<bool>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// The first 16 bytes of every SQLite database.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Whether the file at `path` begins as every SQLite database does (a store, or another
/// program's database): 16 bytes read. Not for a store this process has open (closing the file
/// read would drop SQLite's locks): [`Store::file_fate`] reads through SQLite's descriptor.
pub fn begins_as_sqlite(path: &Path) -> bool {
    use std::io::Read;
    // Only a file: a pipe or a FIFO (`/dev/stdout` into `| tee`) would be waited on for ever.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == SQLITE_MAGIC)
}

/// Whether the file `identity`, open in this process, begins as an SQLite database, read
/// through a descriptor the process holds; `None` where none is open on it.
fn open_file_is_sqlite(identity: (u64, u64)) -> Option<bool> {
    let mut head = [0u8; 16];
    let n = latlab_sys::read_head_of_open(identity, &mut head)?;
    Some(n == head.len() && &head == SQLITE_MAGIC)
}

/// Whether a store just opened at `path` has begun in its file: opened, a file with anything in
/// it is an SQLite database (a new store's stays empty until its journal is first copied in).
fn begun(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// Refuse a file at `path` that cannot be a store, before SQLite opens it (and writes a
/// journal beside it): a device, pipe or socket (`/dev/null`), a file of the kernel's that
/// reads as data though its size is 0 (`/proc/version`), or a store file of more than one name
/// ([`StoreError::HardLinked`]). Nothing there, a directory or a regular file passes.
pub fn check_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let not_a_store = |reason: &str| {
        Err(StoreError::NotAStore {
            path: path.to_path_buf(),
            reason: reason.into(),
        })
    };
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => {
            not_a_store("not a regular file: a device, a pipe or a socket")
        }
        Ok(m) if m.is_file() && m.len() == 0 && reads_as_data(path) => {
            not_a_store("a file of the kernel's, such as /proc's, not a regular file")
        }
        Ok(m) if m.is_file() && m.nlink() > 1 => Err(StoreError::HardLinked {
            path: path.to_path_buf(),
            links: m.nlink(),
        }),
        _ => Ok(()),
    }
}

/// Whether a regular file of size 0 gives data when read (as /proc's and /sys's files do).
fn reads_as_data(path: &Path) -> bool {
    use std::io::Read;
    let mut one = [0u8; 1];
    std::fs::File::open(path).is_ok_and(|mut f| f.read(&mut one).is_ok_and(|n| n > 0))
}

/// Device and inode of the file at `path`, if there is one.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The store path to use: `explicit` if given, else `$LATLAB_DB` if set and not empty, else
/// `./latlab.db`.
pub fn resolve_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    match std::env::var_os(ENV_VAR) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(DEFAULT_FILE),
    }
}

/// The lock file of one thing in the store at `db` (a monitoring series by its name, an
/// experiment a `latlab run` measures): beside the store (its path with links resolved, so one
/// file has one lock), `name` with every byte outside `[A-Za-z0-9._-]` written as `%XX`.
pub fn lock_path(db: &Path, name: &str) -> PathBuf {
    let mut safe = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            safe.push(b as char);
        } else {
            safe.push_str(&format!("%{b:02X}"));
        }
    }
    let mut file = resolved(db).into_os_string();
    file.push(format!(".{safe}.lock"));
    file.into()
}

/// The store's path with every link resolved (its directory's, when the file is still to be
/// made): one lock for one file, however the path to it is spelled.
fn resolved(db: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(db) {
        return p;
    }
    let dir = match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), db.file_name()) {
        (Ok(d), Some(file)) => d.join(file),
        _ => db.to_path_buf(),
    }
}

impl Store {
    /// Open the store at `path`, creating it if absent and migrating it if older. A file that is
    /// not a latlab store, or a store newer than this build, is refused without being changed.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let made = std::fs::symlink_metadata(path).is_err();
        // SQLite's own failure while opening is the opening's (said with the path, and with a
        // full file system named).
        let opened = Self::open_with(path, true, SCHEMA_VERSION).map_err(|e| match e {
            StoreError::Sql(error) => StoreError::Open {
                path: path.to_path_buf(),
                error,
            },
            e => e,
        });
        // A store this call made and could not set up (a full file system) is not left behind
        // half made, nor its journal.
        if opened.is_err() && made {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut p = path.as_os_str().to_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        }
        opened
    }

    /// Open an existing store ([`StoreError::Missing`] when there is none), migrating it if older.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path.as_ref(), false, SCHEMA_VERSION)
    }

    /// Open an existing store to read it: as [`Store::open_existing`] where this process may
    /// write the file and its directory; else read-only (a file system mounted read-only, a
    /// store another user owns), writing nothing: through SQLite's locks when a write-ahead log
    /// is beside it (a daemon may be writing), else the file as it is. A read-only store at an
    /// older schema is [`StoreError::ReadOnlyOld`]: only a write could migrate it.
    pub fn open_to_read(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        check_file(path)?;
        // An empty file (`touch`ed, or named by mistake) is no store to read: made one here, a
        // command that only reads would write it.
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
                reason: "an empty file".into(),
            });
        }
        if writable(path).is_ok() {
            return Self::open_existing(path);
        }
        // The header alone may be behind: what a writer committed can still be in the log.
        identify(path)?;
        let conn = read_only(path)?;
        let version = check_identity(
            path,
            read_identity(&conn).map_err(|error| StoreError::Open {
                path: path.to_path_buf(),
                error,
            })?,
        )?;
        if version < SCHEMA_VERSION {
            return Err(StoreError::ReadOnlyOld {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            file: file_identity(path),
            header_seen: std::cell::Cell::new(begun(path)),
        })
    }

    /// Open an existing store a command will change: as [`Store::open_existing`], with a file
    /// or directory this process may not write said as [`StoreError::NotWritable`] first.
    pub fn open_to_write(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        if path.exists()
            && let Err(why) = writable(path)
        {
            return Err(StoreError::NotWritable {
                path: path.to_path_buf(),
                why,
            });
        }
        Self::open_existing(path)
    }

    /// Open (and create) a store migrated only up to `version`: for tests of migrations.
    #[doc(hidden)]
    pub fn open_at_version(path: impl AsRef<Path>, version: u32) -> Result<Store> {
        Self::open_with(path.as_ref(), true, version.min(SCHEMA_VERSION))
    }

    fn open_with(path: &Path, create: bool, target: u32) -> Result<Store> {
        if !create && !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        check_file(path)?;
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let open_err = |error| StoreError::Open {
            path: path.to_path_buf(),
            error,
        };
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(open_err)?;
        let not_a_store = |reason: String| StoreError::NotAStore {
            path: path.to_path_buf(),
            reason,
        };
        // The first read of the header: a file that is not SQLite fails here, untouched.
        let (app_id, version, tables) = read_identity(&conn).map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
                not_a_store("not an SQLite database".into())
            }
            e => open_err(e),
        })?;
        check_identity(path, (app_id, version, tables))?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(open_err(rusqlite::Error::InvalidParameterName(format!(
                "journal_mode is {mode}, WAL could not be set"
            ))));
        }
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        // WAL with synchronous=NORMAL is durable against process crashes and consistent after
        // power loss (the last transactions may be lost, never half of one).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            file: file_identity(path),
            header_seen: std::cell::Cell::new(begun(path)),
        };
        store.migrate(target)?;
        Ok(store)
    }

    /// Apply the missing migrations up to `target`, each in one transaction that also sets the
    /// version (taken with a write lock, so two processes never migrate at once).
    fn migrate(&mut self, target: u32) -> Result<()> {
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let version: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version > SCHEMA_VERSION {
                return Err(StoreError::TooNew {
                    path: self.path.clone(),
                    found: version,
                    supported: SCHEMA_VERSION,
                });
            }
            if version >= target {
                return Ok(());
            }
            let step = MIGRATIONS[version as usize];
            let next = version + 1;
            let fail = |error| StoreError::Migration {
                path: self.path.clone(),
                version: next,
                name: step.name,
                error,
            };
            tx.execute_batch(step.sql).map_err(fail)?;
            if let Some(fill) = step.fill {
                fill(&tx)?;
            }
            tx.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(fail)?;
            tx.pragma_update(None, "user_version", next).map_err(fail)?;
            tx.commit().map_err(fail)?;
        }
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Make every commit reach the disk before it returns (`synchronous=FULL`): for a writer
    /// that commits seldom (a monitor's window every few minutes) and must not lose what it
    /// reported stored when the file system fails or the power goes.
    pub fn sync_every_commit(&self) -> Result<()> {
        self.conn.pragma_update(None, "synchronous", "FULL")?;
        Ok(())
    }

    /// SQLite's files beside the store (its write-ahead log and shared-memory index) with the
    /// device and inode of each that exists now.
    pub fn sidecars(&self) -> Vec<(PathBuf, (u64, u64))> {
        ["-wal", "-shm"]
            .iter()
            .filter_map(|suffix| {
                let p = sidecar(&self.path, suffix);
                file_identity(&p).map(|id| (p, id))
            })
            .collect()
    }

    /// Whether the path still names the file this store opened.
    pub fn file_fate(&self) -> FileFate {
        use std::os::unix::fs::MetadataExt;
        let Ok(now) = std::fs::metadata(&self.path) else {
            return FileFate::Deleted;
        };
        let Some(opened) = self.file else {
            return FileFate::InPlace;
        };
        if (now.dev(), now.ino()) != opened {
            return FileFate::Replaced;
        }
        // Still empty: the journal holds all there is so far.
        if now.len() == 0 && !self.header_seen.get() {
            return FileFate::InPlace;
        }
        // Read through SQLite's own descriptor: a descriptor of ours, closed, would drop
        // SQLite's locks on the file.
        match open_file_is_sqlite(opened) {
            Some(false) => FileFate::WrittenOver,
            seen => {
                if seen == Some(true) {
                    self.header_seen.set(true);
                }
                FileFate::InPlace
            }
        }
    }

    /// Let go of a file written over in place ([`FileFate::WrittenOver`]) without writing into
    /// it: closing would otherwise copy the journal's pages back into whatever is there now.
    /// The journal stays beside it, with the last windows it holds.
    pub fn abandon(self) {
        use rusqlite::config::DbConfig;
        let _ = self
            .conn
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
    }

    /// Where the file this store opened is now, when it was moved away from its path (renamed,
    /// not deleted): the name the kernel gives the descriptor open on it.
    pub fn renamed_to(&self) -> Option<PathBuf> {
        let opened = self.file?;
        std::fs::read_dir("/proc/self/fd")
            .ok()?
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .find(|target| {
                target != &self.path
                    && target.is_absolute()
                    && file_identity(target) == Some(opened)
            })
    }

    /// Run `read` on one snapshot of the store: every query in it sees the same state, even
    /// while a daemon writes windows meanwhile (a read transaction; nothing is written).
    pub fn snapshot<T>(&self, read: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        self.conn.execute_batch("BEGIN DEFERRED")?;
        let out = read(self);
        // A read transaction has nothing to keep: ending it cannot lose anything.
        let _ = self.conn.execute_batch("ROLLBACK");
        out
    }

    /// The device and inode of the file this store opened (`None` where it could not be read).
    pub fn file_id(&self) -> Option<(u64, u64)> {
        self.file
    }

    /// The schema version of the open store (the number of migrations applied).
    pub fn schema_version(&self) -> Result<u32> {
        Ok(self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    /// The journal mode in force (`wal`).
    pub fn journal_mode(&self) -> Result<String> {
        Ok(self
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))?)
    }

    /// Write the WAL back into the main file and rebuild the file, returning the space of deleted
    /// rows to the file system.
    pub fn vacuum(&mut self) -> Result<()> {
        let checkpoint = |conn: &Connection| -> rusqlite::Result<()> {
            // Returns one row (busy, log frames, checkpointed frames).
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        };
        checkpoint(&self.conn)?;
        self.conn.execute_batch("VACUUM")?;
        checkpoint(&self.conn)?;
        Ok(())
    }
}

/// A stored series as a daemon about to continue it checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSeries {
    pub window_ns: u64,
    /// Windows it holds (merged ones counted one by one).
    pub windows: u64,
    /// How it was measured last (`None` where the stored configuration does not read).
    pub measure: Option<latlab_model::MeasureConfig>,
}

/// Series `name` in the store at `path`: its window length, how many windows it holds and how
/// it was measured, read without writing anything (no migration, no journal set up): `None`
/// where the store has no such series, or no monitor tables yet.
pub fn stored_series(path: &Path, name: &str) -> Result<Option<StoredSeries>> {
    let conn = read_only(path)?;
    let has_tables: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('monitor_series', 'monitor_sets')",
        [],
        |r| r.get::<_, i64>(0).map(|n| n == 2),
    )?;
    if !has_tables {
        return Ok(None);
    }
    Ok(conn
        .query_row(
            "SELECT s.window_ns, COALESCE(SUM(m.windows), 0), s.config FROM monitor_series s
               LEFT JOIN monitor_sets m ON m.series_id = s.id
              WHERE s.name = ?1 GROUP BY s.id",
            [name],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )
        .optional()?
        .map(|(w, n, config)| StoredSeries {
            window_ns: w.max(0) as u64,
            windows: n.max(0) as u64,
            measure: serde_json::from_str::<latlab_model::monitor::SeriesConfig>(&config)
                .ok()
                .map(|c| c.measure),
        }))
}

/// `path` with SQLite's `suffix` (`-wal`, `-shm`).
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

/// Whether this process may write the store at `path` and create its write-ahead log beside
/// it, tried for real ([`latlab_sys::probe_write`]: a read-only file system, a store another
/// user owns); else why not.
fn writable(path: &Path) -> std::result::Result<(), String> {
    let may_write =
        |p: &Path| latlab_sys::probe_write(p).map_err(|e| format!("{}: {e}", p.display()));
    // The store itself is asked, not opened: a daemon in this process (the web server's
    // readers) holds SQLite's locks on it, which closing a descriptor of ours would drop.
    latlab_sys::may_write_unopened(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Without the log beside it, SQLite must create it (and its index) in the directory.
    if !sidecar(path, "-wal").exists() || !sidecar(path, "-shm").exists() {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        may_write(dir)?;
    }
    Ok(())
}

/// What the SQLite file at `path` is, read without writing to it: the schema version of a
/// latlab store (0: an empty database a store can be set up in), or why it is none
/// (`NotAStore`, `TooNew`), by the rules [`Store::open`] applies.
pub fn identify(path: &Path) -> Result<u32> {
    use std::io::Read;
    let io = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    // The application id and the schema version are in the file's 100-byte header: read there,
    // a store that a daemon is writing is never opened.
    let mut head = [0u8; 100];
    let mut f = std::fs::File::open(path).map_err(io)?;
    let n = f.read(&mut head).map_err(io)?;
    if n < head.len() || &head[..16] != b"SQLite format 3\0" {
        return Err(StoreError::NotAStore {
            path: path.to_path_buf(),
            reason: "not an SQLite database".into(),
        });
    }
    let be = |o: usize| u32::from_be_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
    let (version, app_id) = (be(60), be(68) as i32);
    // Only a database of no application says nothing by its header: count its tables.
    let tables = if app_id == 0 { count_tables(path)? } else { 0 };
    check_identity(path, (app_id, version, tables))
}

/// The tables of an SQLite file that is no latlab store, read immutable: SQLite reads the file
/// as it is, without locks and without the WAL's `-shm` and `-wal` files, which even a read-only
/// connection would create beside it.
fn count_tables(path: &Path) -> Result<u32> {
    let conn = immutable(path).map_err(|error| StoreError::Open {
        path: path.to_path_buf(),
        error,
    })?;
    read_identity(&conn)
        .map(|(_, _, tables)| tables)
        .map_err(|error| StoreError::Open {
            path: path.to_path_buf(),
            error,
        })
}

/// A connection that reads the store at `path` and writes nothing, not even beside it. Without
/// a write-ahead log nobody is writing: the file is read as it is, creating nothing beside it.
/// With one, a daemon may be: it is read through SQLite's locks, waiting out a writer.
fn read_only(path: &Path) -> Result<Connection> {
    let open_err = |error| StoreError::Open {
        path: path.to_path_buf(),
        error,
    };
    let conn = if sidecar(path, "-wal").exists() {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        Connection::open_with_flags(path, flags)
    } else {
        immutable(path)
    }
    .map_err(open_err)?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(open_err)?;
    Ok(conn)
}

/// A read-only connection that takes the file as it is (SQLite's `immutable`).
fn immutable(path: &Path) -> rusqlite::Result<Connection> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = path.as_os_str().as_bytes();
    // An absolute path after `file://` (an empty authority), so `//x` stays a path; `%`, `?`
    // and `#` escaped, every other byte as it is.
    let mut uri = if bytes.starts_with(b"/") {
        b"file://".to_vec()
    } else {
        b"file:".to_vec()
    };
    for &b in bytes {
        match b {
            b'%' | b'?' | b'#' => uri.extend(format!("%{b:02X}").bytes()),
            b => uri.push(b),
        }
    }
    uri.extend(b"?immutable=1");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(std::ffi::OsString::from_vec(uri), flags)
}

/// A database's application id, schema version and table count checked against what a latlab
/// store is: its schema version.
fn check_identity(path: &Path, (app_id, version, tables): (i32, u32, u32)) -> Result<u32> {
    if app_id != APPLICATION_ID && (app_id != 0 || tables > 0) {
        return Err(StoreError::NotAStore {
            path: path.to_path_buf(),
            reason: if app_id == 0 {
                format!("an SQLite database with {tables} other tables")
            } else {
                format!("an SQLite database of another application (id {app_id:#x})")
            },
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

fn read_identity(conn: &Connection) -> rusqlite::Result<(i32, u32, u32)> {
    let app_id: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables: u32 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
        [],
        |r| r.get(0),
    )?;
    Ok((app_id, version, tables))
}

// ---- helpers shared by the modules ----

/// u64 stored bit for bit in SQLite's signed INTEGER (every real value is below 2^63).
pub(crate) fn to_sql(v: u64) -> i64 {
    v as i64
}
/// The inverse of [`to_sql`].
pub(crate) fn from_sql(v: i64) -> u64 {
    v as u64
}
pub(crate) fn opt_to_sql(v: Option<u64>) -> Option<i64> {
    v.map(to_sql)
}
pub(crate) fn opt_from_sql(v: Option<i64>) -> Option<u64> {
    v.map(from_sql)
}

/// Serialize model data (plain data: cannot fail).
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Parse a JSON column, naming where it came from when it does not parse.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what: what.to_string(),
        detail: format!("JSON: {e}"),
    })
}

/// Decode a histogram column, naming where it came from when it does not decode.
pub(crate) fn decode_hist(bytes: &[u8], what: &str) -> Result<Histogram> {
    Histogram::decode(bytes).map_err(|e: HistError| StoreError::Corrupt {
        what: what.to_string(),
        detail: e.to_string(),
    })
}

/// FNV-1a, 64 bits, as 16 hex digits: a stable content hash for deduplication indexes (equality is
/// always confirmed on the full content).
pub(crate) fn fnv64(text: &str) -> String {
    format!("{:016x}", latlab_model::rng::fnv1a64(text))
}

/// Now as RFC 3339 UTC.
pub(crate) fn now_rfc3339() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    latlab_model::rfc3339_utc(ns)
}

/// Find or insert a system record, returning its id.
pub(crate) fn system_id(
    conn: &Connection,
    system: &latlab_model::SystemInfo,
) -> Result<i64, rusqlite::Error> {
    let record = to_json(system);
    let hash = fnv64(&record);
    let found: Option<i64> = conn
        .query_row(
            "SELECT id FROM systems WHERE hash = ?1 AND record = ?2",
            rusqlite::params![hash, record],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(id) = found {
        return Ok(id);
    }
    conn.execute(
        "INSERT INTO systems (hash, hostname, kernel_release, preempt, cpu_model, record)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        rusqlite::params![
            hash,
            system.hostname,
            system.kernel_release,
            system.preempt,
            system.cpu_model,
            record
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

#[cfg(test)]
mod tests;
