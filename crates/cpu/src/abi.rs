//! The flight recorder's records, typed once (the pattern of
//! `hoptrace-kernel-abi`): the layouts are C structs of `src/bpf/cpu_abi.h`,
//! reach Rust as the skeleton's generated `types`, are declared plain old
//! data here and checked against clang's sizes at build time. Map values
//! become values only through `hoptrace_kernel_abi::from_bytes` (exact size);
//! the mmap'ed flight ring is read slot by slot as `cpu_event` with a
//! sequence check (`crate::flight`).

pub(crate) use crate::skel::types;

hoptrace_kernel_abi::kernel_pod!(types, cpu_abi_anchor; cpu_config, cpu_event, task_info);
