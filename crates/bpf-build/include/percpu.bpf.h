/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-CPU array maps, declared once for every program.
 *
 * A BPF_MAP_TYPE_PERCPU_ARRAY holds, for each CPU, its own copy of every
 * entry: a program adds to its CPU's copy without atomics or contention,
 * and user space reads all the copies of an entry at once and sums them.
 * Its keys are the indexes 0..entries-1, all present from the start, so a
 * lookup of a key below `entries` never fails (the NULL check the verifier
 * demands is still made).
 *
 * PERCPU_ARRAY(name, value_type, entries) declares such a map (counters
 * indexed by kind, histograms indexed by bucket). PERCPU_VALUE(name,
 * value_type) declares a map of one entry, a variable of its own per CPU
 * (counters, a scratch buffer kept off the 512-byte BPF stack, the last
 * thing seen on this CPU), and `name##_here()`: this CPU's copy.
 */
#ifndef HOPTRACE_PERCPU_BPF_H
#define HOPTRACE_PERCPU_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define PERCPU_ARRAY(name, value_type, entries)                                  \
	struct {                                                                 \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                         \
		__uint(max_entries, entries);                                    \
		__type(key, __u32);                                              \
		__type(value, value_type);                                       \
	} name SEC(".maps")

#define PERCPU_VALUE(name, value_type)                                           \
	PERCPU_ARRAY(name, value_type, 1);                                       \
	static __always_inline value_type *name##_here(void)                     \
	{                                                                        \
		__u32 zero = 0;                                                  \
		return bpf_map_lookup_elem(&name, &zero);                        \
	}

#endif /* HOPTRACE_PERCPU_BPF_H */
