/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Build-time checks of a layout shared with user space (every program's
 * `<name>_abi.h`): the size and every field offset of each struct, so that
 * a layout cannot change by accident and no struct has implicit padding
 * (the offsets leave no gap and the last field ends the struct). The Rust
 * side checks the generated types against clang's sizes
 * (hoptrace-kernel-abi's same_size_as_clang!).
 */
#ifndef HOPTRACE_ABI_CHECK_BPF_H
#define HOPTRACE_ABI_CHECK_BPF_H

#define ABI_SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " size")
#define ABI_AT(type, field, off) \
	_Static_assert(__builtin_offsetof(type, field) == (off), #type "." #field " offset")

#endif
