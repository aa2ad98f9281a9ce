//! The kvm tracer's records, typed once (the pattern of
//! `hoptrace-kernel-abi`): the layouts are C structs of `src/bpf/kvm_abi.h`,
//! reach Rust as the skeleton's generated `types`, are declared plain old
//! data here and checked against clang's sizes at build time. Ring records
//! and map entries become values only through `hoptrace_kernel_abi`'s exact
//! decoding ([`crate::loader`]).

pub(crate) use crate::skel::types;

hoptrace_kernel_abi::kernel_pod!(types, kvm_abi_anchor;
    kvm_config,
    kvm_exit_record,
    kvm_nested_key,
    kvm_nested_record,
    kvm_hook_key,
    kvm_delivery_record,
);
