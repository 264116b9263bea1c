//! `procfs`: walk /proc and read its files — system-wide tables and, per process, its stat,
//! status, command line, memory maps and more — over and over. Reading /proc takes kernel locks
//! (e.g. a process's mmap lock for its maps) that other work then waits on.

use super::{PoolLoad, WORKERS};
use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::{Ctx, LoadOptions, LoadSpec, Running};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "procfs",
    description: "walk /proc and read system tables and every process's stat, status, cmdline, \
                  maps (kernel locks, seq_file work)",
    options: &[WORKERS],
    throughput: &[("files read", "files/s"), ("bytes read", "MB/s")],
    takes_command: false,
    validate: None,
    realtime: None,
    supported,
    start,
};

/// System-wide files read on every walk (none of them blocks or is huge; kmsg and kcore are
/// left alone).
const SYSTEM_FILES: &[&str] = &[
    "stat",
    "meminfo",
    "interrupts",
    "softirqs",
    "loadavg",
    "uptime",
    "vmstat",
    "zoneinfo",
    "buddyinfo",
    "diskstats",
    "cpuinfo",
    "schedstat",
    "mounts",
    "modules",
];

/// Files read per process.
const PROCESS_FILES: &[&str] = &["stat", "status", "cmdline", "maps", "wchan", "io", "sched"];

fn supported(_: &LoadSpec, opts: &LoadOptions) -> Result<(), String> {
    let proc = opts.sys.path("/proc");
    std::fs::read_dir(&proc)
        .map(|_| ())
        .map_err(|e| format!("cannot list {}: {e}", proc.display()))
}

struct Walker {
    proc: PathBuf,
    buf: Vec<u8>,
}

impl Walker {
    /// Read one file; `Some(bytes)` when it could be read.
    fn read(&mut self, path: &Path) -> Option<u64> {
        self.buf.clear();
        let mut f = std::fs::File::open(path).ok()?;
        f.read_to_end(&mut self.buf).ok()?;
        Some(self.buf.len() as u64)
    }
}

impl Worker for Walker {
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let (mut files, mut bytes) = (0u64, 0u64);
        let stopped = || stop.load(Ordering::Relaxed);
        let mut count = |r: Option<u64>| {
            if let Some(b) = r {
                files += 1;
                bytes += b;
            }
        };
        'walk: while !stopped() {
            for name in SYSTEM_FILES {
                if stopped() {
                    break 'walk;
                }
                let p = self.proc.join(name);
                count(self.read(&p));
            }
            let Ok(entries) = std::fs::read_dir(&self.proc) else {
                // Nothing to walk; do not spin on the error.
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
                    continue;
                }
                for file in PROCESS_FILES {
                    if stopped() {
                        break 'walk;
                    }
                    let p = entry.path().join(file);
                    count(self.read(&p));
                }
            }
        }
        vec![files, bytes]
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let n = spec.workers("workers", ctx.cpus.len());
    let proc = ctx.opts.sys.path("/proc");
    let workers: Vec<Box<dyn Worker>> = (0..n)
        .map(|_| {
            Box::new(Walker {
                proc: proc.clone(),
                buf: Vec::with_capacity(64 * 1024),
            }) as Box<dyn Worker>
        })
        .collect();
    let pool = Pool::start("proc", ctx.cpus, workers, Arc::new(AtomicBool::new(false)))?;
    Ok(Box::new(PoolLoad {
        pool,
        units: vec![("files read", "files/s", 1.0), ("bytes read", "MB/s", 1e-6)],
    }))
}
