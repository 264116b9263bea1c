//! `io`: per worker, write a file block by block to its size, then rewrite it from the start,
//! and again, optionally with an `fsync` after every block. Files live in a chosen directory (or
//! a fresh temporary one) and are unlinked as soon as they are open: written through the open
//! file, their space returns when the load stops, also if latlab is killed.

use super::{PoolLoad, region_size_option, workers_option};
use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::{OptDefault, OptKind, OptionDesc, format_size};
use crate::{Ctx, Finished, LoadOptions, LoadSpec, Running};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "io",
    description: "write and rewrite files in blocks, with or without fsync (block-layer and \
                  file-system work, writeback)",
    options: &[
        workers_option("worker threads (one file each), pinned to the CPUs in turn"),
        OptionDesc {
            name: "bs",
            kind: OptKind::Size {
                min: 512,
                max: 64 << 20,
            },
            default: OptDefault::Value("4k"),
            help: "block size of each write",
        },
        region_size_option("file size per worker; writing wraps to the start there"),
        OptionDesc {
            name: "fsync",
            kind: OptKind::Bool,
            default: OptDefault::Value("false"),
            help: "fsync after every block",
        },
        OptionDesc {
            name: "dir",
            kind: OptKind::Path,
            default: OptDefault::FreshTempDir,
            help: "directory for the files (they are removed after)",
        },
    ],
    throughput: &[
        (
            "blocks written (to the page cache; with fsync, synced)",
            "IOPS",
        ),
        (
            "bytes written (to the page cache; with fsync, synced)",
            "MB/s",
        ),
    ],
    takes_command: false,
    validate: Some(validate),
    realtime: None,
    supported,
    start,
};

fn validate(spec: &LoadSpec) -> Result<(), String> {
    let (bs, size) = (spec.size("bs").unwrap_or(0), spec.size("size").unwrap_or(0));
    if size < bs {
        return Err(format!(
            "size {} is smaller than bs {}: a file holds at least one block",
            format_size(size),
            format_size(bs)
        ));
    }
    Ok(())
}

fn target_dir(spec: &LoadSpec) -> PathBuf {
    spec.path("dir")
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir)
}

/// The directory must exist and hold the files. Whether it is writable shows when the files
/// are created at start.
fn supported(spec: &LoadSpec, opts: &LoadOptions) -> Result<(), String> {
    let dir = target_dir(spec);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory", dir.display())),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let cpus = opts.resolve_cpus().map_err(|e| e.to_string())?;
    let workers = spec.workers("workers", cpus.len()) as u64;
    let need = workers.saturating_mul(spec.size("size").unwrap_or(0));
    if let Some(free) = latlab_sys::available_bytes(&dir)
        && need > free
    {
        return Err(format!(
            "{workers} files × {} need {} but {} has {} free; lower size or workers",
            format_size(spec.size("size").unwrap_or(0)),
            format_size(need),
            dir.display(),
            format_size(free)
        ));
    }
    Ok(())
}

/// Distinguishes the files of several io loads of one process.
static NEXT_LOAD: AtomicU64 = AtomicU64::new(0);

struct Writer {
    path: PathBuf,
    bs: usize,
    size: u64,
    fsync: bool,
    file: Option<File>,
    failure: Option<String>,
}

impl Writer {
    /// Remove the file's name; an error is kept as the worker's warning.
    fn remove_name(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            self.failure
                .get_or_insert(format!("removing {}: {e}", self.path.display()));
        }
    }

    /// Close the file (its space returns).
    fn close(&mut self) {
        self.file = None;
    }
}

impl Worker for Writer {
    fn setup(&mut self) -> Result<(), String> {
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&self.path)
            .map_err(|e| format!("creating {}: {e}", self.path.display()))?;
        // Written through the open file only: unlinked now, its space returns when it is
        // closed, also if latlab is killed.
        self.file = Some(file);
        self.remove_name();
        Ok(())
    }

    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let (mut writes, mut bytes) = (0u64, 0u64);
        let block = vec![0x5au8; self.bs];
        let bs = self.bs as u64;
        let mut offset = 0u64;
        if let Some(file) = &self.file {
            while !stop.load(Ordering::Relaxed) {
                let done = file
                    .write_all_at(&block, offset)
                    .and_then(|()| if self.fsync { file.sync_all() } else { Ok(()) });
                if let Err(e) = done {
                    self.failure = Some(format!("writing {}: {e}", self.path.display()));
                    break;
                }
                writes += 1;
                bytes += bs;
                offset += bs;
                if offset + bs > self.size {
                    offset = 0;
                }
            }
        }
        self.close();
        vec![writes, bytes]
    }

    fn warning(&self) -> Option<String> {
        self.failure.clone()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.close();
    }
}

struct IoLoad {
    // Declared first: dropped (workers joined, files removed) before the directory.
    load: PoolLoad,
    dir: Option<tempfile::TempDir>,
}

impl Running for IoLoad {
    fn request_stop(&self) {
        self.load.pool.request_stop();
    }

    fn finish(self: Box<Self>) -> Finished {
        let IoLoad { load, dir } = *self;
        let mut f = Box::new(load).finish();
        if let Some(dir) = dir {
            let path = dir.path().to_path_buf();
            if let Err(e) = dir.close() {
                f.warnings.push(format!("removing {}: {e}", path.display()));
            }
        }
        f
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let bs = usize::try_from(spec.size("bs").unwrap_or(4096))
        .map_err(|_| "bs does not fit in memory".to_string())?;
    let size = spec.size("size").unwrap_or(64 << 20);
    let fsync = spec.flag("fsync");
    let (dir, temp) = match spec.path("dir") {
        Some(d) => (d.to_path_buf(), None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("latlab-load-io-")
                .tempdir()
                .map_err(|e| {
                    format!(
                        "creating a directory in {}: {e}",
                        std::env::temp_dir().display()
                    )
                })?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let id = NEXT_LOAD.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let n = spec.workers("workers", ctx.cpus.len());
    let workers: Vec<Box<dyn Worker>> = (0..n)
        .map(|i| {
            Box::new(Writer {
                path: dir.join(format!("latlab-load-io-{pid}-{id}-{i}")),
                bs,
                size,
                fsync,
                file: None,
                failure: None,
            }) as Box<dyn Worker>
        })
        .collect();
    let pool = Pool::start("io", ctx.cpus, workers, Arc::new(AtomicBool::new(false)))?;
    Ok(Box::new(IoLoad {
        load: PoolLoad {
            pool,
            // Without fsync the writes end in the page cache (memory copies, written back
            // later by the kernel), not on the storage: said in what is counted.
            units: if fsync {
                vec![
                    ("blocks written and synced", "IOPS", 1.0),
                    ("bytes written and synced", "MB/s", 1e-6),
                ]
            } else {
                vec![
                    ("blocks written to the page cache", "IOPS", 1.0),
                    ("bytes written to the page cache", "MB/s", 1e-6),
                ]
            },
        },
        dir: temp,
    }))
}
