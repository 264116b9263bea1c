//! One file per load generator; each exports its `DESCRIPTOR` for the registry.

pub mod cmd;
pub mod cpu;
pub mod io;
pub mod matrix;
pub mod memory;
pub mod messaging;
pub mod procfs;
pub mod rt_hog;

use crate::pool::PoolEnd;
use crate::spec::{OptDefault, OptKind, OptionDesc};
use crate::{Finished, LoadOptions, LoadSpec};

/// The `workers` option: 1 to 1024 threads, one per CPU of the set by default, with `help`.
pub(crate) const fn workers_option(help: &'static str) -> OptionDesc {
    OptionDesc {
        name: "workers",
        kind: OptKind::Count { min: 1, max: 1024 },
        default: OptDefault::OnePerCpu,
        help,
    }
}

/// The `workers` option of loads whose workers need no more words.
pub(crate) const WORKERS: OptionDesc = workers_option("worker threads, pinned to the CPUs in turn");

/// The `size` option of what each worker maps or writes: 4 KiB to 1 TiB, 64M by default.
pub(crate) const fn region_size_option(help: &'static str) -> OptionDesc {
    OptionDesc {
        name: "size",
        kind: OptKind::Size {
            min: 4096,
            max: 1 << 40,
        },
        default: OptDefault::Value("64M"),
        help,
    }
}

/// `supported` for loads that run anywhere.
pub(crate) fn always(_: &LoadSpec, _: &LoadOptions) -> Result<(), String> {
    Ok(())
}

/// A finished pool's counts as throughput, `units[i]` naming `counts[i]` scaled by `scale[i]`.
pub(crate) fn finished(end: PoolEnd, units: &[(&str, &str, f64)]) -> Finished {
    let throughput = units
        .iter()
        .enumerate()
        .map(|(i, (what, unit, scale))| {
            let total = end.counts.get(i).copied().unwrap_or(0) as f64 * scale;
            crate::throughput(what, unit, total, end.elapsed)
        })
        .collect();
    Finished {
        workers: end.workers,
        elapsed: end.elapsed,
        throughput,
        warnings: end.warnings,
        failed: None,
    }
}

/// A running pool as a [`crate::Running`] load whose counts map to `units`.
pub(crate) struct PoolLoad {
    pub pool: crate::pool::Pool,
    pub units: Vec<(&'static str, &'static str, f64)>,
}

impl crate::Running for PoolLoad {
    fn request_stop(&self) {
        self.pool.request_stop();
    }
    fn finish(self: Box<Self>) -> Finished {
        let PoolLoad { pool, units } = *self;
        finished(pool.join(), &units)
    }
}
