/* SPDX-License-Identifier: (MIT OR Apache-2.0) OR GPL-2.0 */
/*
 * The layout shared by latlab's BPF programs and its loader: family numbers, map keys and
 * values, and the per-CPU ring of recent events. The loader mirrors each struct with a
 * #[repr(C)] type and checks its size (src/layout.rs).
 */
#ifndef LATLAB_TRACE_H
#define LATLAB_TRACE_H

#include "bpf_defs.h"

/* What a histogram measures; the key says of what (function, vector, IRQ, class). */
enum family {
	F_WQ_LATENCY = 0,      /* workqueue: queue -> execute start; key: work function */
	F_WQ_EXECUTION = 1,    /* workqueue: execute start -> end; key: work function */
	F_SOFTIRQ_LATENCY = 2, /* softirq: first raise -> entry; key: vector */
	F_SOFTIRQ_RUNTIME = 3, /* softirq: entry -> exit; key: vector */
	F_TASKLET_RUNTIME = 4, /* tasklet: entry -> exit; key: tasklet function */
	F_KTHREAD_LATENCY = 5, /* kthread work: queue -> execute start; key: work function */
	F_KTHREAD_EXECUTION = 6, /* kthread work: execute start -> end; key: work function */
	F_WAKEUP = 7,          /* sched_waking -> sched_switch in; key: 0 other, 1 rt, 2 deadline */
	F_HRTIMER = 8,         /* hrtimer handler: expire entry -> exit; key: callback */
	F_LOCAL_TIMER = 9,     /* local timer interrupt: entry -> exit; key: 0 */
	F_HARDIRQ = 10,        /* hard IRQ handler: entry -> exit; key: IRQ number */
	NR_FAMILIES = 11,
};

/*
 * Histogram buckets are HdrHistogram's for lowest value 1 ns and 3 significant digits, the
 * layout of latlab's Histogram: the index of a value comes from the position of its highest
 * set bit and its top 11 bits, so every bucket here is exactly one bucket there.
 */
#define SUB_HALF_MAG 10
#define SUB_HALF (1 << SUB_HALF_MAG)
#define SUB_MASK ((2ULL << SUB_HALF_MAG) - 1)
#define HIGHEST_NS 3600000000000ULL

/* The bucket index of a value. Also compiled on the host by the tests, which check it against
 * the loader's and the shared histogram's. */
static __always_inline __u32 hist_index(__u64 v)
{
	if (v > HIGHEST_NS)
		v = HIGHEST_NS;
	__u64 x = v | SUB_MASK;
	__u32 msb = 0;
	if (x >> 32) {
		x >>= 32;
		msb += 32;
	}
	if (x >> 16) {
		x >>= 16;
		msb += 16;
	}
	if (x >> 8) {
		x >>= 8;
		msb += 8;
	}
	if (x >> 4) {
		x >>= 4;
		msb += 4;
	}
	if (x >> 2) {
		x >>= 2;
		msb += 2;
	}
	if (x >> 1)
		msb += 1;
	/* msb >= 10 because x >= SUB_MASK */
	__u32 bucket = msb - SUB_HALF_MAG;
	__u32 sub = (__u32)(v >> bucket);
	return ((bucket + 1) << SUB_HALF_MAG) + sub - SUB_HALF;
}

struct hist_key {
	__u32 family;
	__u32 index;
	__u64 key;
};

struct stat_key {
	__u32 family;
	__u32 pad;
	__u64 key;
};

/* Exact statistics beside the buckets (per CPU; `min` is valid only when count > 0). */
struct stat_val {
	__u64 count;
	__u64 sum;
	__u64 min;
	__u64 max;
};

#define NR_SOFTIRQS 10
#define HRTIMER_DEPTH 4

/* Per-CPU state of events in progress on that CPU. */
struct hrtimer_slot {
	__u64 timer;
	__u64 ts;
	__u64 function;
};

struct cpu_state {
	__u64 raise_ts[NR_SOFTIRQS];
	__u64 softirq_ts[NR_SOFTIRQS];
	__u64 irq_ts;
	__u64 local_timer_ts;
	__u64 tasklet_ts;
	__u64 tasklet_func;
	__u64 switch_ts;
	__s32 irq;
	__u32 hrtimer_depth;
	struct hrtimer_slot hrtimer[HRTIMER_DEPTH];
};

/* A work item or timer under way (start-timestamp maps). */
struct start_val {
	__u64 ts;
	__u64 function;
};

/*
 * Wake-up buckets below WAKE_DENSE (values below 131072 ns) are counted in a per-CPU array per
 * class instead of the hist hash: an index, not a hash lookup, on the most frequent event. 32-bit
 * counters fit the array in the per-CPU unit limit (32 KiB); a counter about to wrap sends further
 * samples of its bucket to the hash, so nothing is lost.
 */
#define WAKE_DENSE 8192

struct wake_dense {
	__u32 count[WAKE_DENSE];
};

struct wake_val {
	__u64 ts;
	__u64 class;
};

/* The ring of recent events of one CPU, for spike stories. */
#define RING_SIZE 4096

enum ring_kind {
	R_HARDIRQ = 1,     /* id: IRQ number */
	R_SOFTIRQ = 2,     /* id: vector */
	R_TASKLET = 3,     /* arg: function */
	R_HRTIMER = 4,     /* arg: callback */
	R_LOCAL_TIMER = 5, /* */
	R_WORK = 6,        /* arg: work function; id: kworker pid */
	R_KTHREAD_WORK = 7, /* arg: work function; id: worker pid */
	R_SWITCH = 8,      /* ts: switch; dur: how long prev ran; id: prev pid; arg: next pid |
			      prev state << 32 (0: still runnable); comm: prev; comm2: next */
};

struct ring_ev {
	__u64 seq; /* position in the ring's history (head value when written) */
	__u64 ts;  /* start, CLOCK_MONOTONIC ns */
	__u64 dur; /* ns */
	__u64 arg;
	__u32 kind;
	__u32 id;
	char comm[16];
	char comm2[16];
};

struct ring {
	__u64 head; /* events written so far */
	struct ring_ev ev[RING_SIZE];
};

#endif
