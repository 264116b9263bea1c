//! The layout shared with the BPF programs (`bpf/trace.h`): family numbers, map keys and values,
//! ring events. Each struct mirrors its C twin field for field; the tests check the sizes.

use latlab_model::trace::Family;

/// The BPF object, compiled from `bpf/trace.bpf.c` by `scripts/build-bpf.sh`.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/trace.bpf.o");

/// The family number used in the BPF programs (`enum family`).
pub fn family_id(f: Family) -> u32 {
    match f {
        Family::WorkqueueLatency => 0,
        Family::WorkqueueExecution => 1,
        Family::SoftirqLatency => 2,
        Family::SoftirqRuntime => 3,
        Family::TaskletRuntime => 4,
        Family::KthreadLatency => 5,
        Family::KthreadExecution => 6,
        Family::Wakeup => 7,
        Family::Hrtimer => 8,
        Family::LocalTimer => 9,
        Family::Hardirq => 10,
    }
}

/// The family of a BPF family number.
pub fn family_of(id: u32) -> Option<Family> {
    Family::ALL.into_iter().find(|f| family_id(*f) == id)
}

/// `NR_FAMILIES`.
pub const NR_FAMILIES: u32 = 11;
/// `RING_SIZE`: events kept per CPU.
pub const RING_SIZE: usize = 4096;
/// `NR_SOFTIRQS`.
pub const NR_SOFTIRQS: u64 = 10;

/// `struct hist_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HistKey {
    pub family: u32,
    pub index: u32,
    pub key: u64,
}

/// `struct stat_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatKey {
    pub family: u32,
    pub pad: u32,
    pub key: u64,
}

/// `struct stat_val`: exact statistics of one CPU (`min` valid only when `count > 0`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatVal {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
}

/// `WAKE_DENSE`: wake-up buckets below this index are counted in `wake_hist`.
pub const WAKE_DENSE: usize = 8192;

/// `struct wake_dense`: one class's wake-up bucket counts on one CPU, by bucket index.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WakeDense {
    pub count: [u32; WAKE_DENSE],
}

// SAFETY: plain #[repr(C)] integers without padding, valid for every bit pattern.
unsafe impl aya::Pod for WakeDense {}
// SAFETY: as above.
unsafe impl aya::Pod for HistKey {}
// SAFETY: as above.
unsafe impl aya::Pod for StatKey {}
// SAFETY: as above.
unsafe impl aya::Pod for StatVal {}

/// `enum ring_kind`.
pub mod ring_kind {
    pub const HARDIRQ: u32 = 1;
    pub const SOFTIRQ: u32 = 2;
    pub const TASKLET: u32 = 3;
    pub const HRTIMER: u32 = 4;
    pub const LOCAL_TIMER: u32 = 5;
    pub const WORK: u32 = 6;
    pub const KTHREAD_WORK: u32 = 7;
    pub const SWITCH: u32 = 8;
}

/// `struct ring_ev`: one event of a CPU's ring.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingEv {
    pub seq: u64,
    pub ts: u64,
    pub dur: u64,
    pub arg: u64,
    pub kind: u32,
    pub id: u32,
    pub comm: [u8; 16],
    pub comm2: [u8; 16],
}

/// Size of `struct ring_ev`.
pub const RING_EV_SIZE: usize = 72;
/// Size of `struct ring`: the head, then the events.
pub const RING_BYTES: usize = 8 + RING_SIZE * RING_EV_SIZE;

impl RingEv {
    /// Decode one event from its bytes (native byte order, as the kernel wrote them).
    pub fn from_bytes(b: &[u8; RING_EV_SIZE]) -> RingEv {
        let u64_at = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(w)
        };
        let u32_at = |o: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[o..o + 4]);
            u32::from_ne_bytes(w)
        };
        let mut comm = [0u8; 16];
        comm.copy_from_slice(&b[40..56]);
        let mut comm2 = [0u8; 16];
        comm2.copy_from_slice(&b[56..72]);
        RingEv {
            seq: u64_at(0),
            ts: u64_at(8),
            dur: u64_at(16),
            arg: u64_at(24),
            kind: u32_at(32),
            id: u32_at(36),
            comm,
            comm2,
        }
    }
}

/// A task name from a kernel `comm` buffer.
pub fn comm_str(c: &[u8; 16]) -> String {
    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
    String::from_utf8_lossy(&c[..end]).into_owned()
}

/// Decode a `struct ring` read from the kernel: its head and the events still held, oldest
/// first. Slots whose sequence number does not fit the head (being rewritten while read) are
/// left out.
pub fn decode_ring(bytes: &[u8]) -> (u64, Vec<RingEv>) {
    if bytes.len() < RING_BYTES {
        return (0, Vec::new());
    }
    let mut h = [0u8; 8];
    h.copy_from_slice(&bytes[..8]);
    let head = u64::from_ne_bytes(h);
    let held = head.min(RING_SIZE as u64);
    let first = head - held;
    let mut out = Vec::with_capacity(held as usize);
    for seq in first..head {
        let slot = (seq % RING_SIZE as u64) as usize;
        let off = 8 + slot * RING_EV_SIZE;
        let mut b = [0u8; RING_EV_SIZE];
        b.copy_from_slice(&bytes[off..off + RING_EV_SIZE]);
        let ev = RingEv::from_bytes(&b);
        if ev.seq == seq {
            out.push(ev);
        }
    }
    (head, out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_match_the_c_layout() {
        assert_eq!(std::mem::size_of::<HistKey>(), 16);
        assert_eq!(std::mem::size_of::<StatKey>(), 16);
        assert_eq!(std::mem::size_of::<StatVal>(), 32);
        // The per-CPU unit limit of an array element.
        assert_eq!(std::mem::size_of::<WakeDense>(), 32 * 1024);
        assert_eq!(std::mem::size_of::<RingEv>(), RING_EV_SIZE);
        assert!(RING_SIZE.is_power_of_two());
    }

    #[test]
    fn the_dense_wakeup_array_covers_values_below_131_us() {
        use crate::buckets::bucket_index;
        assert_eq!(bucket_index(131_071), WAKE_DENSE as u32 - 1);
        assert_eq!(bucket_index(131_072), WAKE_DENSE as u32);
        assert_eq!(bucket_index(1), 1);
    }

    #[test]
    fn family_numbers_round_trip() {
        for f in Family::ALL {
            assert_eq!(family_of(family_id(f)), Some(f));
            assert!(family_id(f) < NR_FAMILIES);
        }
        assert_eq!(family_of(NR_FAMILIES), None);
    }

    fn ring_bytes(head: u64, events: &[(u64, u32)]) -> Vec<u8> {
        let mut b = vec![0u8; RING_BYTES];
        b[..8].copy_from_slice(&head.to_ne_bytes());
        for &(seq, kind) in events {
            let off = 8 + (seq as usize % RING_SIZE) * RING_EV_SIZE;
            b[off..off + 8].copy_from_slice(&seq.to_ne_bytes());
            b[off + 8..off + 16].copy_from_slice(&(seq * 10).to_ne_bytes());
            b[off + 32..off + 36].copy_from_slice(&kind.to_ne_bytes());
            b[off + 40..off + 44].copy_from_slice(b"ksof");
        }
        b
    }

    #[test]
    fn a_ring_decodes_oldest_first_and_skips_torn_slots() {
        let (head, evs) = decode_ring(&ring_bytes(3, &[(0, 1), (1, 2), (2, 8)]));
        assert_eq!(head, 3);
        assert_eq!(evs.iter().map(|e| e.kind).collect::<Vec<_>>(), [1, 2, 8]);
        assert_eq!(evs[2].ts, 20);
        assert_eq!(comm_str(&evs[0].comm), "ksof");

        // Wrapped: head RING_SIZE + 2 holds seqs 2..RING_SIZE+2; slot of seq 5 is torn.
        let n = RING_SIZE as u64;
        let mut seqs: Vec<(u64, u32)> = (2..n + 2).map(|s| (s, 1)).collect();
        seqs.retain(|(s, _)| *s != 5);
        let (_, evs) = decode_ring(&ring_bytes(n + 2, &seqs));
        assert_eq!(evs.len(), RING_SIZE - 1);
        assert_eq!(evs[0].seq, 2);
        assert_eq!(evs.last().unwrap().seq, n + 1);
        assert!(evs.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}
