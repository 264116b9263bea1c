//! `cpu`: integer and floating-point spin loops, one pinned worker per CPU; counts loop
//! iterations (bogo-ops).

use super::{PoolLoad, WORKERS, always};
use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::{OptDefault, OptKind, OptionDesc};
use crate::{Ctx, Finished, LoadSpec, Running, throughput};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "cpu",
    description: "integer and floating-point spin loops on every CPU of the set (keeps CPUs busy, \
                  out of idle states)",
    options: &[
        WORKERS,
        OptionDesc {
            name: "kind",
            kind: OptKind::Choice(&["int", "float", "both"]),
            default: OptDefault::Value("both"),
            help: "integer loop, floating-point loop, or both alternately (each rate then per \
                   second of its own loop's time)",
        },
    ],
    throughput: &[
        ("integer loop iterations", "ops/s"),
        ("floating-point loop iterations", "ops/s"),
    ],
    takes_command: false,
    validate: None,
    realtime: None,
    supported: always,
    start,
};

/// Iterations between two looks at the stop flag (a few microseconds of work).
const BLOCK: u64 = 4096;

struct Spin {
    int: bool,
    float: bool,
}

impl Worker for Spin {
    /// The iterations of each loop run, and with both loops also the nanoseconds each took
    /// (`[ints, floats, int_ns, float_ns]`): they alternate, so each runs part of the time.
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let (mut ints, mut floats) = (0u64, 0u64);
        let (mut int_ns, mut float_ns) = (0u64, 0u64);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut f: f64 = 1.0;
        let timed = self.int && self.float;
        let mut mark = Instant::now();
        let mut lap = |into: &mut u64| {
            if timed {
                let now = Instant::now();
                *into += now.duration_since(mark).as_nanos() as u64;
                mark = now;
            }
        };
        while !stop.load(Ordering::Relaxed) {
            if self.int {
                for _ in 0..BLOCK {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x = x.wrapping_mul(0x2545_f491_4f6c_dd1d).wrapping_add(1);
                }
                x = black_box(x);
                ints += BLOCK;
                lap(&mut int_ns);
            }
            if self.float {
                for _ in 0..BLOCK {
                    f = f * 1.000_000_1 + 0.000_000_1;
                    f = (f * f).sqrt() / 1.000_000_3;
                }
                f = black_box(f);
                floats += BLOCK;
                lap(&mut float_ns);
            }
        }
        match (self.int, self.float) {
            (true, true) => vec![ints, floats, int_ns, float_ns],
            (true, false) => vec![ints],
            _ => vec![floats],
        }
    }
}

const INT: (&str, &str, f64) = ("integer loop iterations", "ops/s", 1.0);
const FLOAT: (&str, &str, f64) = ("floating-point loop iterations", "ops/s", 1.0);

/// Both loops, alternating: each rate is per second of that loop's own time (averaged over the
/// workers), so it reads as the rate of `kind=int` or `kind=float` alone would.
struct Both {
    pool: Pool,
}

impl Running for Both {
    fn request_stop(&self) {
        self.pool.request_stop();
    }
    fn finish(self: Box<Self>) -> Finished {
        let end = self.pool.join();
        let workers = end.workers.max(1) as u64;
        let count = |i: usize| end.counts.get(i).copied().unwrap_or(0);
        let rate = |(what, unit, _): (&str, &str, f64), i: usize| {
            let own = Duration::from_nanos(count(i + 2) / workers);
            throughput(what, unit, count(i) as f64, own)
        };
        Finished {
            workers: end.workers,
            elapsed: end.elapsed,
            throughput: vec![rate(INT, 0), rate(FLOAT, 1)],
            warnings: end.warnings,
            failed: None,
        }
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let kind = spec.choice("kind").unwrap_or("both");
    let (int, float) = (kind != "float", kind != "int");
    let n = spec.workers("workers", ctx.cpus.len());
    let workers: Vec<Box<dyn Worker>> = (0..n)
        .map(|_| Box::new(Spin { int, float }) as Box<dyn Worker>)
        .collect();
    let pool = Pool::start("cpu", ctx.cpus, workers, Arc::new(AtomicBool::new(false)))?;
    Ok(match (int, float) {
        (true, true) => Box::new(Both { pool }),
        (true, false) => Box::new(PoolLoad {
            pool,
            units: vec![INT],
        }),
        _ => Box::new(PoolLoad {
            pool,
            units: vec![FLOAT],
        }),
    })
}
