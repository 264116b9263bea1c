//! `memory`: per worker, map an anonymous region, touch every page, read it all, write it all,
//! unmap it, and again. The page faults and, above all, the unmapping of memory that threads on
//! other CPUs may have cached (TLB shootdown interrupts) are what disturbs latency.

use super::{PoolLoad, WORKERS, region_size_option};
use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::format_size;
use crate::{Ctx, LoadOptions, LoadSpec, Running, os};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "memory",
    description: "map, touch, read, write and unmap a memory region over and over (page faults, \
                  munmap TLB shootdowns)",
    options: &[WORKERS, region_size_option("the region each worker maps")],
    throughput: &[
        ("bytes read and written", "MB/s"),
        ("map-touch-read-write-unmap cycles", "cycles/s"),
    ],
    takes_command: false,
    validate: None,
    realtime: None,
    supported,
    start,
};

/// Bytes between two looks at the stop flag.
const CHUNK: usize = 1 << 20;

/// The memory must fit in what the kernel reports available.
fn supported(spec: &LoadSpec, opts: &LoadOptions) -> Result<(), String> {
    let cpus = opts.resolve_cpus().map_err(|e| e.to_string())?;
    let workers = spec.workers("workers", cpus.len()) as u64;
    let size = spec.size("size").unwrap_or(0);
    let need = workers.saturating_mul(size);
    let Ok(meminfo) = opts.sys.read("/proc/meminfo") else {
        return Ok(()); // nothing to check against
    };
    let available_kb = meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    });
    match available_kb {
        Some(kb) if need > kb.saturating_mul(1024) => Err(format!(
            "{workers} workers × {} = {} is more than the {:.1}G of memory available; lower \
             size or workers",
            format_size(size),
            format_size(need),
            // Read as a person would: MemAvailable is rarely a round number.
            kb as f64 / (1u64 << 20) as f64
        )),
        _ => Ok(()),
    }
}

/// An anonymous mapping, unmapped when dropped.
struct Region {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Region {
    fn map(len: usize) -> std::io::Result<Region> {
        // SAFETY: an anonymous private mapping with no address hint.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Region { ptr, len })
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is len bytes, readable and writable, page aligned, and lives as
        // long as self; zero-filled memory is a valid u64 slice.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u64>(), self.len / 8) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

struct Churn {
    size: usize,
    page: usize,
    failure: Option<String>,
}

impl Worker for Churn {
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let (mut bytes, mut cycles) = (0u64, 0u64);
        let stopped = || stop.load(Ordering::Relaxed);
        let words_per_chunk = CHUNK / 8;
        let words_per_page = (self.page / 8).max(1);
        let mut sum = 0u64;
        'work: while !stopped() {
            let mut region = match Region::map(self.size) {
                Ok(r) => r,
                Err(e) => {
                    self.failure = Some(format!("mmap of {}: {e}", format_size(self.size as u64)));
                    break;
                }
            };
            let words = region.words();
            // Touch: one write per page faults every page in.
            for (i, chunk) in words.chunks_mut(words_per_chunk).enumerate() {
                if stopped() {
                    break 'work;
                }
                for w in chunk.iter_mut().step_by(words_per_page) {
                    *w = i as u64;
                }
            }
            // Read every word.
            for chunk in words.chunks(words_per_chunk) {
                if stopped() {
                    break 'work;
                }
                sum = chunk.iter().fold(sum, |s, &w| s.wrapping_add(w));
                bytes += (chunk.len() * 8) as u64;
            }
            sum = black_box(sum);
            // Write every word.
            for chunk in words.chunks_mut(words_per_chunk) {
                if stopped() {
                    break 'work;
                }
                chunk.fill(sum | 1);
                bytes += (chunk.len() * 8) as u64;
            }
            black_box(&mut *words);
            drop(region); // munmap
            cycles += 1;
        }
        vec![bytes, cycles]
    }

    fn warning(&self) -> Option<String> {
        self.failure.clone()
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let size = usize::try_from(spec.size("size").unwrap_or(64 << 20))
        .map_err(|_| "size does not fit in memory".to_string())?;
    let n = spec.workers("workers", ctx.cpus.len());
    let page = os::page_size();
    let workers: Vec<Box<dyn Worker>> = (0..n)
        .map(|_| {
            Box::new(Churn {
                size,
                page,
                failure: None,
            }) as Box<dyn Worker>
        })
        .collect();
    let pool = Pool::start("mem", ctx.cpus, workers, Arc::new(AtomicBool::new(false)))?;
    Ok(Box::new(PoolLoad {
        pool,
        units: vec![
            ("bytes read and written", "MB/s", 1e-6),
            ("map-touch-read-write-unmap cycles", "cycles/s", 1.0),
        ],
    }))
}
