//! The per-window buffer a measuring thread records into, and its hand-off to the coordinator.
//!
//! A thread records each sample once, into the histogram of its current window. When a window
//! closes, the thread swaps in an empty buffer from its pool (no allocation) and sends the full
//! one to the coordinator, which merges it into the thread's totals, clears it and returns it.

use latlab_hist::Histogram;
use std::sync::mpsc::{Receiver, SyncSender};

/// Stall events kept per window for the exact missed-period correction.
pub const STALLS_PER_WINDOW: usize = 256;
pub use latlab_model::SPIKES_PER_WINDOW;
/// Buffers per thread: one recording, one in flight, one spare.
pub const POOL: usize = 3;

/// A late sample that covered `missed` further periods: the samples those periods would have
/// produced are `latency - k * interval` for `k` in `1..=missed`.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    pub latency: u64,
    pub missed: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct SpikeRec {
    /// Deadline of the period, ns after the run's start.
    pub at: u64,
    pub value: u64,
}

pub struct WindowBuf {
    pub thread: u32,
    /// First window this buffer covers, and how many (more than one only when the coordinator
    /// fell behind or a stall spanned windows).
    pub index: u64,
    pub span: u64,
    pub hist: Histogram,
    /// Missed periods whose deadlines fall in this window.
    pub missed: u64,
    /// Missed periods of this window's last stall whose deadlines fall in the windows after it:
    /// the coordinator counts them in those windows (a stall of 30 s shows as 30 s of missed
    /// periods where they were due, not as empty windows).
    pub missed_beyond: u64,
    pub stalls: Vec<Stall>,
    /// More stalls than `stalls` holds happened; correct this window from its buckets instead.
    pub stalls_overflowed: bool,
    pub spikes: Vec<SpikeRec>,
    pub spikes_dropped: u64,
    /// The room was full: `spikes` is a heap by value (its smallest first), no longer in the
    /// order of time.
    pub spikes_replaced: bool,
    /// When the window's maximum (`hist.max()`) happened, ns after the run's start.
    pub max_at: u64,
    /// The thread's last buffer.
    pub last: bool,
}

impl WindowBuf {
    pub fn new(thread: u32) -> WindowBuf {
        WindowBuf {
            thread,
            index: 0,
            span: 1,
            hist: Histogram::new(),
            missed: 0,
            missed_beyond: 0,
            stalls: Vec::with_capacity(STALLS_PER_WINDOW),
            stalls_overflowed: false,
            spikes: Vec::with_capacity(SPIKES_PER_WINDOW),
            spikes_dropped: 0,
            spikes_replaced: false,
            max_at: 0,
            last: false,
        }
    }

    /// Ready for reuse (the coordinator has already drained the histogram).
    pub fn reset(&mut self) {
        self.hist.clear();
        self.missed = 0;
        self.missed_beyond = 0;
        self.stalls.clear();
        self.stalls_overflowed = false;
        self.spikes.clear();
        self.spikes_dropped = 0;
        self.spikes_replaced = false;
        self.max_at = 0;
        self.span = 1;
        self.last = false;
    }

    /// Note a late sample that covered `missed` further periods, of which `beyond` are due after
    /// this window's end (slow path only).
    #[inline]
    pub fn add_stall(&mut self, latency: u64, missed: u64, beyond: u64) {
        self.missed += missed - beyond;
        self.missed_beyond += beyond;
        if self.stalls.len() < STALLS_PER_WINDOW {
            self.stalls.push(Stall { latency, missed });
        } else {
            self.stalls_overflowed = true;
        }
    }

    /// Keep a spike; false when it is only counted. When the window's room is full, the
    /// smallest spike kept gives way to a larger one (and is counted instead), so a window keeps
    /// its largest spikes: its worst is never the one dropped.
    #[inline]
    pub fn add_spike(&mut self, at: u64, value: u64) -> bool {
        if self.spikes.len() < SPIKES_PER_WINDOW {
            self.spikes.push(SpikeRec { at, value });
            return true;
        }
        self.spikes_dropped += 1;
        self.replace_smallest(SpikeRec { at, value })
    }

    /// Beyond the room: `spike` takes the place of the smallest kept, where it is larger. The
    /// full room is kept as a heap with its smallest first (arranged once, when it fills), so a
    /// spike that is not kept costs one comparison and one that is about log2(1024) = 10 steps.
    #[cold]
    fn replace_smallest(&mut self, spike: SpikeRec) -> bool {
        if !self.spikes_replaced {
            for i in (0..self.spikes.len() / 2).rev() {
                sift_down(&mut self.spikes, i);
            }
        }
        match self.spikes.first_mut() {
            Some(s) if s.value < spike.value => {
                *s = spike;
                sift_down(&mut self.spikes, 0);
                self.spikes_replaced = true;
                true
            }
            _ => {
                // Arranged as a heap all the same: the next one need not arrange it again.
                self.spikes_replaced = true;
                false
            }
        }
    }
}

/// The thread's side of the hand-off.
pub struct WindowSink {
    pub cur: Box<WindowBuf>,
    full: SyncSender<Box<WindowBuf>>,
    empty: Receiver<Box<WindowBuf>>,
}

impl WindowSink {
    pub fn new(
        first: Box<WindowBuf>,
        full: SyncSender<Box<WindowBuf>>,
        empty: Receiver<Box<WindowBuf>>,
    ) -> Self {
        WindowSink {
            cur: first,
            full,
            empty,
        }
    }

    /// Close the current window and start window `next_index`. If no empty buffer is back yet,
    /// the current buffer simply goes on covering the next window too (nothing is lost).
    #[cold]
    pub fn rotate(&mut self, next_index: u64) {
        if self.cur.hist.is_empty() && self.cur.missed == 0 {
            // Nothing happened in the covered windows (a stall spanned them): restart here.
            self.cur.index = next_index;
            self.cur.span = 1;
            return;
        }
        match self.empty.try_recv() {
            Ok(mut fresh) => {
                fresh.index = next_index;
                fresh.span = 1;
                let full = std::mem::replace(&mut self.cur, fresh);
                // The pool bounds the buffers in flight below the channel's capacity.
                let _ = self.full.try_send(full);
            }
            Err(_) => {
                self.cur.span = next_index - self.cur.index + 1;
            }
        }
    }

    /// Send the last buffer.
    pub fn finish(mut self) {
        self.cur.last = true;
        let _ = self.full.send(self.cur);
    }
}

/// Move `spikes[i]` down a heap whose smallest value comes first until both children are
/// larger or equal.
fn sift_down(spikes: &mut [SpikeRec], mut i: usize) {
    loop {
        let mut least = i;
        for child in [2 * i + 1, 2 * i + 2] {
            if child < spikes.len() && spikes[child].value < spikes[least].value {
                least = child;
            }
        }
        if least == i {
            return;
        }
        spikes.swap(i, least);
        i = least;
    }
}
