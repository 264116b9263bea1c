/* SPDX-License-Identifier: (MIT OR Apache-2.0) OR GPL-2.0 */
/*
 * The kernel types latlab's programs read, reduced to the fields they use. Every record is
 * relocatable (CO-RE): offsets are taken from the running kernel's BTF when the object is
 * loaded, so one object serves every kernel that has these fields.
 */
#ifndef LATLAB_KERNEL_TYPES_H
#define LATLAB_KERNEL_TYPES_H

#include "bpf_defs.h"

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* Records of classic tracepoints (the layout of events/<category>/<event>/format). */
struct trace_event_raw_workqueue_queue_work {
	void *work;
	void *function;
};
struct trace_event_raw_workqueue_execute_start {
	void *work;
	void *function;
};
struct trace_event_raw_workqueue_execute_end {
	void *work;
	void *function;
};
struct trace_event_raw_sched_kthread_work_queue_work {
	void *work;
	void *function;
};
struct trace_event_raw_sched_kthread_work_execute_start {
	void *work;
	void *function;
};
struct trace_event_raw_sched_kthread_work_execute_end {
	void *work;
	void *function;
};
struct trace_event_raw_tasklet {
	void *tasklet;
	void *func;
};

/* Arguments of BTF tracepoints. */
struct task_struct {
	unsigned int __state;
	int prio;
	int pid;
	int tgid;
	char comm[16];
};
/* Kernels before 5.14 name the state `state` (a long). */
struct task_struct___old {
	long state;
};
struct hrtimer {
	void *function;
};

#pragma clang attribute pop

#endif
