/* SPDX-License-Identifier: (MIT OR Apache-2.0) OR GPL-2.0 */
/*
 * latlab's kernel tracer: latency and duration histograms of deferred work, interrupts, timers
 * and wake-ups, aggregated per CPU in the kernel, and a per-CPU ring of recent events for spike
 * stories. Hot events use BTF tracepoints (tp_btf), the others classic tracepoints whose record
 * fields are relocated against the running kernel's BTF.
 *
 * Every histogram sample is one `record(family, key, value)`: a per-CPU hash of HdrHistogram
 * bucket counts keyed by (family, bucket index, key) and a per-CPU hash of exact count, sum,
 * min and max keyed by (family, key) — for wake-ups, the most frequent events, a per-CPU array
 * by class. Start timestamps of work that may never finish (cancelled work) live in LRU hashes,
 * so they cannot fill up; wake-up times live in task storage, freed with the task; events that
 * cannot nest on one CPU keep theirs in the per-CPU state.
 */
#include "bpf_defs.h"
#include "kernel_types.h"
#include "trace.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before the object is loaded. */
const volatile __u32 hist_mask = 0;     /* bit per family: aggregate into histograms */
const volatile __u32 ring_enabled = 0;  /* keep the ring of recent events */
const volatile __u32 wake_rt_only = 0;  /* wake-ups of RT and deadline tasks only */
const volatile __s32 wake_pid = 0;      /* wake-ups of this process or thread only (0: all) */
const volatile __u32 filter_cpus = 0;   /* record only on CPUs set in cpu_mask */
const volatile __u64 cpu_mask[16] = {}; /* CPUs 0..1023 */

/*
 * Set by the loader while the programs run: 1 from the start of the traced window to its end.
 * Attaching and detaching take time (a classic tracepoint's detach tens of milliseconds): the
 * programs run then too, but record nothing, so the results cover the window they are said to.
 */
volatile __u32 recording = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct hist_key);
	__type(value, __u64);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct stat_key);
	__type(value, struct stat_val);
} stats SEC(".maps");

/* Samples that found no room in hist or stats, per family. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_FAMILIES);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} state SEC(".maps");

/* work_struct / kthread_work pointer -> time queued */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} queued SEC(".maps");

/* thread id of the executing worker -> start and function; kthread work uses key | 1 << 32 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct start_val);
} running SEC(".maps");

/* Per task: the time of its last sched_waking and its class. Task storage lives with the task
 * (freed when it exits) and is found without hashing: wake-ups and context switches are the
 * most frequent events traced. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wake_val);
} waking SEC(".maps");

/* Wake-up bucket counts below WAKE_DENSE, by class (see trace.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct wake_dense);
} wake_hist SEC(".maps");

/* Exact statistics of wake-ups by class (0 other, 1 rt, 2 deadline): an array, not the stats
 * hash, for the same reason. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct stat_val);
} wake_stats SEC(".maps");

/* Indexed by CPU; max_entries is set to the number of possible CPUs by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ring);
} rings SEC(".maps");

static __always_inline int cpu_wanted(__u32 cpu)
{
	if (!filter_cpus)
		return 1;
	if (cpu >= 1024)
		return 0;
	return (cpu_mask[(cpu >> 6) & 15] >> (cpu & 63)) & 1;
}

static __always_inline struct cpu_state *cpu_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&state, &zero);
}

static __always_inline void drop(__u32 family)
{
	__u64 *d = bpf_map_lookup_elem(&drops, &family);
	if (d)
		*d += 1;
}

/* The element of key in a hash map, created as zero when missing (NULL: the map is full). */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);
	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

static __always_inline void record(__u32 family, __u64 key, __u64 value)
{
	if (!recording)
		return;
	if (!((hist_mask >> family) & 1))
		return;
	if (!cpu_wanted(bpf_get_smp_processor_id()))
		return;
	__u32 index = hist_index(value);
	struct stat_val *s;
	__u64 *c = 0;
	if (family == F_WAKEUP) {
		/* Wake-ups: arrays by class, the hash only for buckets beyond the dense range (or a
		 * dense counter about to wrap). */
		__u32 class = (__u32)key;
		s = bpf_map_lookup_elem(&wake_stats, &class);
		struct wake_dense *d = bpf_map_lookup_elem(&wake_hist, &class);
		if (s && d && index < WAKE_DENSE && d->count[index] != 0xffffffff) {
			d->count[index] += 1;
			goto counted;
		}
	} else {
		struct stat_key sk = {.family = family, .pad = 0, .key = key};
		struct stat_val zero = {};
		s = lookup_or_init(&stats, &sk, &zero);
	}
	if (s) {
		struct hist_key hk = {.family = family, .index = index, .key = key};
		__u64 zero = 0;
		c = lookup_or_init(&hist, &hk, &zero);
	}
	if (!s || !c) {
		drop(family);
		return;
	}
	*c += 1;
counted:
	/* An element created on another CPU reads as zero here: count 0 means "no min yet". */
	if (s->count == 0 || value < s->min)
		s->min = value;
	if (value > s->max)
		s->max = value;
	s->count += 1;
	s->sum += value;
}

static __always_inline struct ring_ev *ring_slot(__u32 kind, __u64 ts, __u64 dur)
{
	if (!ring_enabled || !recording)
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_wanted(cpu))
		return 0;
	struct ring *r = bpf_map_lookup_elem(&rings, &cpu);
	if (!r)
		return 0;
	__u64 h = r->head;
	r->head = h + 1;
	struct ring_ev *e = &r->ev[h & (RING_SIZE - 1)];
	e->seq = h;
	e->ts = ts;
	e->dur = dur;
	e->kind = kind;
	e->id = 0;
	e->arg = 0;
	return e;
}

static __always_inline void ring_push(__u32 kind, __u64 ts, __u64 dur, __u32 id, __u64 arg)
{
	struct ring_ev *e = ring_slot(kind, ts, dur);
	if (e) {
		e->id = id;
		e->arg = arg;
	}
}

/*
 * Start timestamps are written in place when the key already has an element and consumed by
 * writing 0: an LRU update or delete takes the map's lock, a lookup does not. Keys that never
 * come back (cancelled work, exited tasks) are evicted by the LRU.
 */
static __always_inline void set_start(void *map, const void *key, __u64 ts)
{
	__u64 *v = bpf_map_lookup_elem(map, key);
	if (v)
		*v = ts;
	else
		bpf_map_update_elem(map, key, &ts, BPF_ANY);
}

/* The start time of key (0: none), consumed. */
static __always_inline __u64 take_start(void *map, const void *key)
{
	__u64 *v = bpf_map_lookup_elem(map, key);
	if (!v)
		return 0;
	__u64 ts = *v;
	*v = 0;
	return ts;
}

/*
 * Workqueue items and kthread work share one shape: queued (work pointer -> time), execution
 * start (latency from queueing; the executing thread's start and function), execution end
 * (execution time). Kthread work keys its running entry with KTHREAD_TAG so a thread running
 * both kinds cannot mix them up.
 */
#define KTHREAD_TAG (1ULL << 32)

static __always_inline void work_start(__u64 work, __u64 function, __u32 latency_family,
				       __u64 tag)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 queued_at = take_start(&queued, &work);
	if (queued_at && now > queued_at)
		record(latency_family, function, now - queued_at);
	__u64 tid = (__u32)bpf_get_current_pid_tgid() | tag;
	struct start_val *r = bpf_map_lookup_elem(&running, &tid);
	if (r) {
		r->ts = now;
		r->function = function;
	} else {
		struct start_val v = {.ts = now, .function = function};
		bpf_map_update_elem(&running, &tid, &v, BPF_ANY);
	}
}

static __always_inline void work_end(__u32 execution_family, __u32 ring_kind, __u64 tag)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 tid = (__u32)bpf_get_current_pid_tgid() | tag;
	struct start_val *v = bpf_map_lookup_elem(&running, &tid);
	if (!v || !v->ts)
		return;
	__u64 start = v->ts, function = v->function;
	v->ts = 0;
	if (now < start)
		return;
	record(execution_family, function, now - start);
	ring_push(ring_kind, start, now - start, (__u32)tid, function);
}

/* ---- workqueue ---- */

SEC("tp/workqueue/workqueue_queue_work")
int wq_queue(struct trace_event_raw_workqueue_queue_work *ctx)
{
	__u64 work = (__u64)ctx->work;
	set_start(&queued, &work, bpf_ktime_get_ns());
	return 0;
}

SEC("tp/workqueue/workqueue_execute_start")
int wq_start(struct trace_event_raw_workqueue_execute_start *ctx)
{
	work_start((__u64)ctx->work, (__u64)ctx->function, F_WQ_LATENCY, 0);
	return 0;
}

SEC("tp/workqueue/workqueue_execute_end")
int wq_end(struct trace_event_raw_workqueue_execute_end *ctx)
{
	work_end(F_WQ_EXECUTION, R_WORK, 0);
	return 0;
}

/* ---- kthread work ---- */

SEC("tp/sched/sched_kthread_work_queue_work")
int kt_queue(struct trace_event_raw_sched_kthread_work_queue_work *ctx)
{
	__u64 work = (__u64)ctx->work;
	set_start(&queued, &work, bpf_ktime_get_ns());
	return 0;
}

SEC("tp/sched/sched_kthread_work_execute_start")
int kt_start(struct trace_event_raw_sched_kthread_work_execute_start *ctx)
{
	work_start((__u64)ctx->work, (__u64)ctx->function, F_KTHREAD_LATENCY, KTHREAD_TAG);
	return 0;
}

SEC("tp/sched/sched_kthread_work_execute_end")
int kt_end(struct trace_event_raw_sched_kthread_work_execute_end *ctx)
{
	work_end(F_KTHREAD_EXECUTION, R_KTHREAD_WORK, KTHREAD_TAG);
	return 0;
}

/* ---- softirqs ---- */

SEC("tp_btf/softirq_raise")
int softirq_raise(__u64 *ctx)
{
	__u32 vec = (__u32)ctx[0];
	struct cpu_state *st = cpu_state();
	if (!st || vec >= NR_SOFTIRQS)
		return 0;
	/* Keep the first raise: the latency is that of the oldest pending request. */
	if (st->raise_ts[vec] == 0)
		st->raise_ts[vec] = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_entry")
int softirq_entry(__u64 *ctx)
{
	__u32 vec = (__u32)ctx[0];
	struct cpu_state *st = cpu_state();
	if (!st || vec >= NR_SOFTIRQS)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 raised = st->raise_ts[vec];
	st->raise_ts[vec] = 0;
	st->softirq_ts[vec] = now;
	if (raised && now > raised)
		record(F_SOFTIRQ_LATENCY, vec, now - raised);
	return 0;
}

SEC("tp_btf/softirq_exit")
int softirq_exit(__u64 *ctx)
{
	__u32 vec = (__u32)ctx[0];
	struct cpu_state *st = cpu_state();
	if (!st || vec >= NR_SOFTIRQS)
		return 0;
	__u64 start = st->softirq_ts[vec];
	if (!start)
		return 0;
	st->softirq_ts[vec] = 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < start)
		return 0;
	record(F_SOFTIRQ_RUNTIME, vec, now - start);
	ring_push(R_SOFTIRQ, start, now - start, vec, 0);
	return 0;
}

/* ---- tasklets ---- */

SEC("tp/irq/tasklet_entry")
int tasklet_entry(struct trace_event_raw_tasklet *ctx)
{
	struct cpu_state *st = cpu_state();
	if (!st)
		return 0;
	st->tasklet_ts = bpf_ktime_get_ns();
	st->tasklet_func = (__u64)ctx->func;
	return 0;
}

SEC("tp/irq/tasklet_exit")
int tasklet_exit(struct trace_event_raw_tasklet *ctx)
{
	struct cpu_state *st = cpu_state();
	if (!st || !st->tasklet_ts)
		return 0;
	__u64 start = st->tasklet_ts, function = st->tasklet_func;
	st->tasklet_ts = 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < start)
		return 0;
	record(F_TASKLET_RUNTIME, function, now - start);
	ring_push(R_TASKLET, start, now - start, 0, function);
	return 0;
}

/* ---- hard IRQs and the local timer interrupt ---- */

SEC("tp_btf/irq_handler_entry")
int irq_entry(__u64 *ctx)
{
	struct cpu_state *st = cpu_state();
	if (!st)
		return 0;
	st->irq = (__s32)ctx[0];
	st->irq_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int irq_exit(__u64 *ctx)
{
	__s32 irq = (__s32)ctx[0];
	struct cpu_state *st = cpu_state();
	if (!st || !st->irq_ts || st->irq != irq)
		return 0;
	__u64 start = st->irq_ts;
	st->irq_ts = 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < start)
		return 0;
	record(F_HARDIRQ, (__u32)irq, now - start);
	ring_push(R_HARDIRQ, start, now - start, (__u32)irq, 0);
	return 0;
}

SEC("tp_btf/local_timer_entry")
int local_timer_entry(__u64 *ctx)
{
	struct cpu_state *st = cpu_state();
	if (st)
		st->local_timer_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/local_timer_exit")
int local_timer_exit(__u64 *ctx)
{
	struct cpu_state *st = cpu_state();
	if (!st || !st->local_timer_ts)
		return 0;
	__u64 start = st->local_timer_ts;
	st->local_timer_ts = 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < start)
		return 0;
	record(F_LOCAL_TIMER, 0, now - start);
	ring_push(R_LOCAL_TIMER, start, now - start, 0, 0);
	return 0;
}

/* ---- hrtimer handlers (a soft-expiry handler can be interrupted by a hard one: a stack) ---- */

SEC("tp_btf/hrtimer_expire_entry")
int hrtimer_entry(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	struct cpu_state *st = cpu_state();
	if (!st)
		return 0;
	__u32 d = st->hrtimer_depth;
	if (d >= HRTIMER_DEPTH)
		return 0;
	struct hrtimer_slot *slot = &st->hrtimer[d & (HRTIMER_DEPTH - 1)];
	slot->timer = (__u64)timer;
	slot->function = (__u64)timer->function;
	slot->ts = bpf_ktime_get_ns();
	st->hrtimer_depth = d + 1;
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int hrtimer_exit(__u64 *ctx)
{
	__u64 timer = ctx[0];
	struct cpu_state *st = cpu_state();
	if (!st)
		return 0;
	__u32 d = st->hrtimer_depth;
	if (d == 0 || d > HRTIMER_DEPTH)
		return 0;
	struct hrtimer_slot *slot = &st->hrtimer[(d - 1) & (HRTIMER_DEPTH - 1)];
	if (slot->timer != timer) {
		/* An entry was missed: start over rather than pair the wrong events. */
		st->hrtimer_depth = 0;
		return 0;
	}
	st->hrtimer_depth = d - 1;
	__u64 start = slot->ts, function = slot->function;
	__u64 now = bpf_ktime_get_ns();
	if (now < start)
		return 0;
	record(F_HRTIMER, function, now - start);
	ring_push(R_HRTIMER, start, now - start, 0, function);
	return 0;
}

/* ---- wake-ups ---- */

static __always_inline int task_class(int prio)
{
	if (prio < 0)
		return 2; /* deadline */
	if (prio < 100)
		return 1; /* real-time */
	return 0;
}

static __always_inline void on_wake(struct task_struct *p)
{
	if (!((hist_mask >> F_WAKEUP) & 1))
		return;
	int prio = p->prio;
	if (wake_rt_only && prio >= 100)
		return;
	if (wake_pid && p->tgid != wake_pid && p->pid != wake_pid)
		return;
	struct wake_val *w = bpf_task_storage_get(&waking, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return;
	w->ts = bpf_ktime_get_ns();
	w->class = task_class(prio);
}

SEC("tp_btf/sched_waking")
int sched_waking(__u64 *ctx)
{
	on_wake((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int sched_wakeup_new(__u64 *ctx)
{
	on_wake((struct task_struct *)ctx[0]);
	return 0;
}

static __always_inline long task_state(struct task_struct *t)
{
	if (field_exists(t->__state))
		return t->__state;
	return ((struct task_struct___old *)t)->state;
}

SEC("tp_btf/sched_switch")
int sched_switch(__u64 *ctx)
{
	int preempt = (int)(ctx[0] & 1);
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u64 now = bpf_ktime_get_ns();
	__u32 prev_pid = prev->pid;
	__u32 next_pid = next->pid;
	long prev_state = task_state(prev);

	if (ring_enabled) {
		struct cpu_state *st = cpu_state();
		if (st) {
			__u64 since = st->switch_ts;
			st->switch_ts = now;
			__u64 ran = since && now > since ? now - since : 0;
			__u64 state = preempt ? 0 : (__u32)prev_state;
			struct ring_ev *e = ring_slot(R_SWITCH, now, ran);
			if (e) {
				e->id = prev_pid;
				e->arg = next_pid | (state << 32);
				bpf_probe_read_kernel(e->comm, sizeof(e->comm), prev->comm);
				bpf_probe_read_kernel(e->comm2, sizeof(e->comm2), next->comm);
			}
		}
	}

	if (!((hist_mask >> F_WAKEUP) & 1))
		return 0;
	/* A task leaving the CPU still runnable will run again without a new wake-up: any
	 * wake-up it had pending is over. */
	if (prev_pid && (preempt || prev_state == 0)) {
		struct wake_val *p = bpf_task_storage_get(&waking, prev, 0, 0);
		if (p)
			p->ts = 0;
	}
	if (!next_pid)
		return 0;
	struct wake_val *w = bpf_task_storage_get(&waking, next, 0, 0);
	if (!w || !w->ts)
		return 0;
	__u64 woken = w->ts, class = w->class;
	w->ts = 0;
	if (now > woken)
		record(F_WAKEUP, class, now - woken);
	return 0;
}
