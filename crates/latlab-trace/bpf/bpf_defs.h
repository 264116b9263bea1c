/* SPDX-License-Identifier: (MIT OR Apache-2.0) OR GPL-2.0 */
/*
 * The few BPF definitions latlab's programs need, written out so that building them needs only
 * clang (no kernel or libbpf headers): integer types, the map and section macros, helper
 * numbers from the kernel's UAPI, and the CO-RE builtins.
 */
#ifndef LATLAB_BPF_DEFS_H
#define LATLAB_BPF_DEFS_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

/* enum bpf_map_type */
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_HASH 5
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_MAP_TYPE_TASK_STORAGE 29

/* map update flags */
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_F_NO_PREALLOC 1
#define BPF_LOCAL_STORAGE_GET_F_CREATE 1

/* Helpers, by their number in enum bpf_func_id. */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
                                   __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *unsafe_ptr) = (void *)113;
static void *(*bpf_task_storage_get)(void *map, void *task, void *value, __u64 flags) = (void *)156;

/* CO-RE: does the kernel's type have this field (relocated at load time)? */
#define BPF_FIELD_EXISTS 2
#define field_exists(field) __builtin_preserve_field_info(field, BPF_FIELD_EXISTS)

#endif
