/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Frame parsing of the hop probes: the per-CPU scratch area holding the copied frame, masked byte reads, BER
 * lengths, the SV APDU walk up to the first smpCnt, the GOOSE APDU walk up
 * to sqNum, and the FNV-1a hash that identifies other traffic.
 *
 * All buffer accesses are masked (& 0xff) into the 256-byte frame buffer, so
 * the verifier sees every access in bounds; the logical bounds are checked
 * against the number of bytes actually copied. parse_sv and hash_frame are
 * global (noinline) functions: the verifier checks each once, on its own.
 */
#ifndef HOPTRACE_SV_PARSE_BPF_H
#define HOPTRACE_SV_PARSE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hops_abi.h"
#include "percpu.bpf.h"

#define FRAME_MAX 256
#define FRAME_MASK 0xff
/* Bytes copied first; the rest of FRAME_MAX only for a long SV header. */
#define FRAME_FIRST 128
/* Identity hash of other frames: the first 40 bytes, i.e. Ethernet, an
 * IPv4 header without options and the UDP ports and length (TCP: ports and
 * half the sequence number). It stops before the UDP/TCP checksum, which the
 * kernel may fill in between two hops (checksum offload resolved when the
 * frame is sent to a device without it, e.g. a tap), so one frame keeps one
 * identity along its path. */
#define HASH_BYTES 40

/* Per-CPU work area: the copied frame and the identity parsed from it. */
struct scratch {
	__u8 frame[FRAME_MAX];
	__u8 svid[SVID_MAX];
	__u32 svid_len;
	__u32 app_id;
	__u32 smp_cnt;
	/* offsets in `frame` of the first smpCnt value and of the end of the
	 * first svID value (parse_sv; the compact-record validation) */
	__u32 smp_off;
	__u32 svid_end;
	__u32 flow_hash;
	/* GOOSE (parse_goose): stNum, sqNum, and the offset in `frame` just
	 * after the sqNum value (the compact-record validation) */
	__u32 st_num;
	__u32 sq_num;
	__u32 sq_end;
};

PERCPU_VALUE(scratch_map, struct scratch)

static __always_inline __u32 byte_at(const __u8 *f, __u32 off)
{
	/* The mask is done in asm so that clang cannot drop it after proving
	 * the logical bound, which the verifier does not track as well. */
	asm volatile("%0 &= 0xff" : "+r"(off));
	return f[off];
}

static __always_inline __u32 be16_at(const __u8 *f, __u32 off)
{
	return (byte_at(f, off) << 8) | byte_at(f, off + 1);
}

/* BER length at `*off` (short form, 0x81 and 0x82 long forms). Advances
 * `*off` past the length; returns -1 when malformed or out of `avail`. */
static __always_inline int ber_len(const __u8 *f, __u32 *off, __u32 avail)
{
	__u32 o = *off;
	if (o >= avail)
		return -1;
	__u32 b = byte_at(f, o);
	if (b < 0x80) {
		*off = o + 1;
		return b;
	}
	if (b == 0x81) {
		if (o + 1 >= avail)
			return -1;
		*off = o + 2;
		return byte_at(f, o + 1);
	}
	if (b == 0x82) {
		if (o + 2 >= avail)
			return -1;
		*off = o + 3;
		return be16_at(f, o + 1);
	}
	return -1;
}

/* One BER tag-length header at `*off`: sets *tag, advances `*off` to the
 * value and returns its length; -1 when malformed or out of `avail`. */
static __always_inline int ber_header(const __u8 *f, __u32 *off, __u32 avail, __u32 *tag)
{
	if (*off >= avail)
		return -1;
	*tag = byte_at(f, *off);
	*off += 1;
	return ber_len(f, off, avail);
}

/* Walk the first three children of a constructed BER value at `off` (the
 * SV parse never needs more): `i` counts them, `tag` and `len` are each
 * child's header (ber_header) with `off` at its value. The walk ends after
 * three children or at a malformed header (len < 0); the body skips a
 * child with `off += len`, or breaks at the one it wants. */
#define for_each_ber_child(i, f, off, avail, tag, len) \
	for (i = 0; i < 3 && ((tag) = 0, (len) = ber_header(f, &(off), avail, &(tag))) >= 0; i++)

/* Parse the SV APDU starting at `off` (the APPID) up to the smpCnt of the
 * FIRST ASDU; fills s->app_id, s->svid, s->svid_len, s->smp_cnt and
 * s->smp_off / s->svid_end (where the smpCnt value is and where the svID
 * value ends, for the compact-record validation).
 * Returns 0 on success, 1 when malformed. A global (noinline) function: the
 * verifier checks it once, on its own, which keeps the state count low. */
__noinline int parse_sv(struct scratch *s, __u32 off, __u32 avail)
{
	int len;
	__u32 i, tag;

	if (!s)
		return 1;
	if (avail > FRAME_MAX)
		return 1;
	const __u8 *f = s->frame;
	if (off + 8 > avail)
		return 1;
	s->app_id = be16_at(f, off);
	off += 8; /* APPID, Length, Reserved1, Reserved2 */
	__u32 outer = 0;
	if (ber_header(f, &off, avail, &outer) < 0 || outer != 0x60)
		return 1;
	/* savPdu children: noASDU (0x80), security (0x81), seqASDU (0xA2) */
	for_each_ber_child(i, f, off, avail, tag, len) {
		if (tag == 0xA2)
			break;
		off += len;
	}
	if (i == 3 || len < 0)
		return 1;
	/* first ASDU */
	if (ber_header(f, &off, avail, &outer) < 0 || outer != 0x30)
		return 1;
	/* ASDU children: svID (0x80), datSet (0x81), smpCnt (0x82) */
	for_each_ber_child(i, f, off, avail, tag, len) {
		if (tag == 0x80) {
			__u32 n = len;
			if (n > SVID_MAX)
				n = SVID_MAX;
			if (off + n > avail)
				return 1;
			asm volatile("%0 &= 0x7f" : "+r"(n));
			if (n > SVID_MAX)
				return 1;
			bpf_probe_read_kernel(s->svid, n, &s->frame[off & FRAME_MASK]);
			s->svid_len = n;
			s->svid_end = off + len;
		} else if (tag == 0x82) {
			if (len != 2 || off + 2 > avail)
				return 1;
			s->smp_cnt = be16_at(f, off);
			s->smp_off = off;
			return 0;
		}
		off += len;
	}
	return 1;
}

/* A BER INTEGER/unsigned value of `len` bytes at `off` (1 to 5: a
 * 32-bit unsigned with its leading zero), as a u32; -1 when malformed. */
static __always_inline int ber_u32(const __u8 *f, __u32 off, int len, __u32 avail, __u32 *v)
{
	__u32 j, x = 0;
	if (len < 1 || len > 5 || off + len > avail)
		return -1;
	for (j = 0; j < 5; j++) {
		if (j >= (__u32)len)
			break;
		x = (x << 8) | byte_at(f, off + j);
	}
	*v = x;
	return 0;
}

/* Parse the GOOSE APDU (IEC 61850-8-1) starting at `off` (the APPID) up
 * to sqNum: APPID, Length, Reserved1/2, goosePdu (0x61) whose children
 * are gocbRef 0x80, timeAllowedtoLive 0x81, datSet 0x82, goID 0x83
 * (optional), t 0x84, stNum 0x85, sqNum 0x86 (at most 7 before sqNum, in
 * this order). Fills s->app_id, s->st_num, s->sq_num, s->sq_end. Returns
 * 0 on success, 1 when malformed. Global (noinline): verified once. */
__noinline int parse_goose(struct scratch *s, __u32 off, __u32 avail)
{
	int len;
	__u32 i, tag, outer = 0;

	if (!s)
		return 1;
	if (avail > FRAME_MAX)
		return 1;
	const __u8 *f = s->frame;
	if (off + 8 > avail)
		return 1;
	s->app_id = be16_at(f, off);
	off += 8;
	if (ber_header(f, &off, avail, &outer) < 0 || outer != 0x61)
		return 1;
	for (i = 0; i < 7; i++) {
		tag = 0;
		len = ber_header(f, &off, avail, &tag);
		if (len < 0)
			return 1;
		if (tag == 0x85 && ber_u32(f, off, len, avail, &s->st_num))
			return 1;
		if (tag == 0x86) {
			if (ber_u32(f, off, len, avail, &s->sq_num))
				return 1;
			s->sq_end = off + len;
			return 0;
		}
		off += len;
	}
	return 1;
}

/* FNV-1a over the first HASH_BYTES bytes of the frame (identity of other traffic). */
__noinline int hash_frame(struct scratch *s, __u32 avail)
{
	__u32 h = 2166136261u;
	__u32 i;

	if (!s)
		return 0;
	for (i = 0; i < HASH_BYTES; i++) {
		if (i >= avail)
			break;
		h ^= byte_at(s->frame, i);
		h *= 16777619u;
	}
	s->flow_hash = h;
	return 0;
}
#endif /* HOPTRACE_SV_PARSE_BPF_H */
