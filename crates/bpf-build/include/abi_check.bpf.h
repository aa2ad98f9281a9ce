/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Build-time checks of a layout shared with user space (every program's
 * `<name>_abi.h`): the size and every field offset of each struct, so that
 * a layout cannot change by accident and no struct has implicit padding
 * (the offsets leave no gap and the last field ends the struct). The Rust
 * side checks the generated types against clang's sizes, which
 * ABI_SIZE_OF carries into the BTF (hoptrace-kernel-abi's kernel_pod!).
 */
#ifndef HOPTRACE_ABI_CHECK_BPF_H
#define HOPTRACE_ABI_CHECK_BPF_H

#define ABI_SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " size")
#define ABI_AT(type, field, off) \
	_Static_assert(__builtin_offsetof(type, field) == (off), #type "." #field " offset")

/* A field of a program's anchor struct (`<name>_abi_anchor`, a read-only
 * global, never read) that carries clang's size of `struct name` into the
 * BTF the way libbpf's __uint carries a map's parameters: as the length of
 * the array its type points to, int (*name)[sizeof(struct name)]. The
 * generated Rust field is `name: *mut [i32; N]`, whose N the Rust side
 * compares with the generated type's size at build time. */
#define ABI_SIZE_OF(name) int (*name)[sizeof(struct name)]

#endif
