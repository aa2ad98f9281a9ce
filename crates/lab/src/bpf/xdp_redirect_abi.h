/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between the lab's XDP programs and user space: the layout
 * user space reads, defined once, here (the pattern of every hoptrace BPF
 * program: see crates/probes/src/bpf/hops_abi.h). Rust reads it as the
 * skeleton's generated `types::xdp_lab_counters` (src/xdp.rs).
 */
#ifndef HOPTRACE_XDP_REDIRECT_ABI_H
#define HOPTRACE_XDP_REDIRECT_ABI_H

#include "vmlinux.h"
#include "abi_check.bpf.h"

/* Per-CPU counters, one value (map ht_lab_stats), summed by `hoptrace lab
 * status`. */
struct xdp_lab_counters {
	/* bpf_redirect_map() returned XDP_REDIRECT on in0 */
	__u64 redirected;
	/* the devmap lookup failed (no out0): frame dropped */
	__u64 dropped;
	/* frames seen by the consumer's eth0 program (redirected frames
	 * that the transmit side did not drop) */
	__u64 delivered;
};

ABI_SIZE(struct xdp_lab_counters, 24);
ABI_AT(struct xdp_lab_counters, redirected, 0);
ABI_AT(struct xdp_lab_counters, dropped, 8);
ABI_AT(struct xdp_lab_counters, delivered, 16);

/* clang's size of the struct above, for the Rust check (src/xdp.rs),
 * carried into the BTF by the program's read-only `xdp_abi_anchor`. */
struct xdp_abi_anchor {
	ABI_SIZE_OF(xdp_lab_counters);
};

#endif /* HOPTRACE_XDP_REDIRECT_ABI_H */
