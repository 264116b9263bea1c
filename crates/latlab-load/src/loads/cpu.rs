//! `cpu`: integer and floating-point spin loops, one pinned worker per CPU; counts loop
//! iterations (bogo-ops).

use super::{PoolLoad, WORKERS, always};
use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::{OptDefault, OptKind, OptionDesc};
use crate::{Ctx, LoadSpec, Running};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
            help: "integer loop, floating-point loop, or both alternately",
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
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let (mut ints, mut floats) = (0u64, 0u64);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut f: f64 = 1.0;
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
            }
            if self.float {
                for _ in 0..BLOCK {
                    f = f * 1.000_000_1 + 0.000_000_1;
                    f = (f * f).sqrt() / 1.000_000_3;
                }
                f = black_box(f);
                floats += BLOCK;
            }
        }
        let mut counts = Vec::new();
        if self.int {
            counts.push(ints);
        }
        if self.float {
            counts.push(floats);
        }
        counts
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
    let mut units = Vec::new();
    if int {
        units.push(("integer loop iterations", "ops/s", 1.0));
    }
    if float {
        units.push(("floating-point loop iterations", "ops/s", 1.0));
    }
    Ok(Box::new(PoolLoad { pool, units }))
}
