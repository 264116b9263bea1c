//! `matrix`: multiply two N×N matrices of f64 over and over, one pinned worker per CPU; counts
//! multiplies (row by row, so a stop in the middle of a large multiply still counts its part).

use super::{PoolLoad, WORKERS, always};
use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::{OptDefault, OptKind, OptionDesc};
use crate::{Ctx, LoadSpec, Running};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "matrix",
    description: "N×N f64 matrix multiplies on every CPU of the set (arithmetic and cache \
                  traffic; stress-ng's matrix bogo-ops)",
    options: &[
        WORKERS,
        OptionDesc {
            name: "size",
            kind: OptKind::Count { min: 2, max: 4096 },
            default: OptDefault::Value("128"),
            help: "N, the side of the matrices (3 N² f64 per worker)",
        },
    ],
    throughput: &[
        ("matrix multiplies", "ops/s"),
        ("floating-point operations", "MFLOP/s"),
    ],
    takes_command: false,
    validate: None,
    realtime: None,
    supported: always,
    start,
};

struct Multiply {
    n: usize,
    seed: usize,
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Worker for Multiply {
    /// The matrices are allocated and filled on the worker's own CPU (first touch: local memory).
    fn setup(&mut self) -> Result<(), String> {
        let (n, seed) = (self.n, self.seed);
        let fill = |k: usize| {
            (0..n * n)
                .map(|i| ((i * 31 + k * 17 + seed) % 97) as f64 / 97.0 + 0.5)
                .collect::<Vec<f64>>()
        };
        self.a = fill(1);
        self.b = fill(2);
        self.c = vec![0.0; n * n];
        Ok(())
    }

    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let n = self.n;
        let mut rows = 0u64;
        'work: loop {
            self.c.fill(0.0);
            for i in 0..n {
                if stop.load(Ordering::Relaxed) {
                    break 'work;
                }
                let row = &mut self.c[i * n..(i + 1) * n];
                for k in 0..n {
                    let aik = self.a[i * n + k];
                    let bk = &self.b[k * n..(k + 1) * n];
                    for (c, b) in row.iter_mut().zip(bk) {
                        *c += aik * b;
                    }
                }
                rows += 1;
            }
            black_box(&mut self.c);
        }
        vec![rows, rows]
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let n = spec.count("size").unwrap_or(128) as usize;
    let workers = spec.workers("workers", ctx.cpus.len());
    let list: Vec<Box<dyn Worker>> = (0..workers)
        .map(|i| {
            Box::new(Multiply {
                n,
                seed: i,
                a: Vec::new(),
                b: Vec::new(),
                c: Vec::new(),
            }) as Box<dyn Worker>
        })
        .collect();
    let pool = Pool::start("matrix", ctx.cpus, list, Arc::new(AtomicBool::new(false)))?;
    let nf = n as f64;
    Ok(Box::new(PoolLoad {
        pool,
        units: vec![
            ("matrix multiplies", "ops/s", 1.0 / nf),
            ("floating-point operations", "MFLOP/s", 2.0 * nf * nf / 1e6),
        ],
    }))
}
