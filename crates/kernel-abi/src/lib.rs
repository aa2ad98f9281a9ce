//! hoptrace-kernel-abi: the kernel's records, decoded one way.
//!
//! Every BPF program of hoptrace (the hop probes, the CPU flight recorder,
//! the kvm tracer, the lab's XDP redirect) shares its layouts with user
//! space the same way (the pattern is written out at the top of
//! `crates/probes/src/bpf/hops_abi.h`):
//!
//! 1. each layout (ring record, map key or value, read-only configuration)
//!    is a C struct of the program's `<name>_abi.h`, with `_Static_assert`s
//!    on its size and field offsets (`abi_check.bpf.h` of
//!    `hoptrace-bpf-build`), and clang's sizes in the program's anchor struct
//!    (`ABI_SIZE_OF`);
//! 2. Rust never restates one: libbpf-cargo generates a `#[repr(C)]` type
//!    per C struct from the object's BTF (the skeleton's `types` module);
//!    [`kernel_pod!`] declares those types plain old data ([`Pod`]: any bit
//!    pattern is a value, no uninitialised byte) after checking at build
//!    time that each has clang's size;
//! 3. bytes become values only through [`from_bytes`]: a copy into the
//!    generated type after an *exact* length check. A short, long or
//!    foreign record is `None` (the caller counts it), never undefined
//!    behaviour and never a read at a hand-written offset. Map reads go
//!    through [`percpu`] and [`hash_entries`], which use it.
//!
//! Callers destructure a decoded value without `..`, so that a field added
//! in C and not handled in Rust does not compile.
//!
//! The kernel's user API structs that libc defines (socket control
//! messages: `timespec` triplets, `sock_extended_err`, `tpacket_auxdata`)
//! cannot be [`Pod`] outside libc; they are [`CStruct`]s, listed here once,
//! and read with [`c_struct_at_start`] from the bytes of a message.

#[cfg(feature = "maps")]
pub mod percpu;

pub use bytemuck::{Pod, Zeroable};

#[cfg(feature = "maps")]
use anyhow::{Context, Result};
#[cfg(feature = "maps")]
use libbpf_rs::{MapCore, MapFlags};

/// A kernel value of type `T` from its bytes: `None` unless there are
/// exactly `size_of::<T>()` of them (no alignment needed: they are copied).
pub fn from_bytes<T: Pod>(bytes: &[u8]) -> Option<T> {
    bytemuck::try_pod_read_unaligned(bytes).ok()
}

/// The bytes of a kernel value (a map key or value user space writes).
pub fn bytes_of<T: Pod>(value: &T) -> &[u8] {
    bytemuck::bytes_of(value)
}

/// The string of a NUL-padded C char array (a task name); the generated
/// types give `char` arrays as `i8` or `u8` depending on the target.
pub fn c_string<C: Copy + Into<i16>>(raw: &[C]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|&c| c.into() as u8)
        .take_while(|&c| c != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A C struct of the kernel's user API, as libc defines it, that the kernel
/// hands over as bytes (a control message's payload).
///
/// # Safety
/// Implement only for `#[repr(C)]` types made of integers (and arrays and
/// structs of them), for which every bit pattern of their size is a value.
pub unsafe trait CStruct: Copy + 'static {}

// SAFETY: two integers (seconds, nanoseconds).
unsafe impl CStruct for libc::timespec {}
// SAFETY: integers only (errno, origin, type, code, pad, info, data).
unsafe impl CStruct for libc::sock_extended_err {}
// SAFETY: integers only (status, lengths, offsets, VLAN tag and TPID).
unsafe impl CStruct for libc::tpacket_auxdata {}
// SAFETY: an array of values for which every bit pattern is valid.
unsafe impl<T: CStruct, const N: usize> CStruct for [T; N] {}

/// The C struct `T` at the start of `bytes` (a control message's payload,
/// which may go on after it, e.g. the offender address after a
/// `sock_extended_err`): `None` when there are fewer than its size.
pub fn c_struct_at_start<T: CStruct>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: `bytes` holds at least size_of::<T>() initialised bytes, and
    // every bit pattern of that size is a T (CStruct's contract); the read
    // copies, so alignment does not matter.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Every (key, value) of a (non-per-CPU) hash map, each decoded with
/// [`from_bytes`]; an entry of another size is an error naming the map.
#[cfg(feature = "maps")]
pub fn hash_entries<K: Pod, V: Pod>(map: &dyn MapCore) -> Result<Vec<(K, V)>> {
    let name = || map.name().to_string_lossy().into_owned();
    let mut out = Vec::new();
    for k in map.keys() {
        let Some(v) = map
            .lookup(&k, MapFlags::ANY)
            .with_context(|| format!("reading the map {}", name()))?
        else {
            // deleted between the key walk and the lookup
            continue;
        };
        let key = from_bytes::<K>(&k).with_context(|| size_error::<K>(&name(), "key", k.len()))?;
        let value =
            from_bytes::<V>(&v).with_context(|| size_error::<V>(&name(), "value", v.len()))?;
        out.push((key, value));
    }
    Ok(out)
}

#[cfg(feature = "maps")]
fn size_error<T>(map: &str, what: &str, len: usize) -> String {
    format!(
        "map {map}: a {what} of {len} bytes, expected {} (BPF object and user space disagree)",
        std::mem::size_of::<T>()
    )
}

/// The skeleton libbpf-cargo generated for a BPF program at build time
/// (`OUT_DIR/<file>`, see hoptrace-bpf-build), as the module `skel`:
/// `bpf_skeleton!("hops.skel.rs");`. Generated code: not linted.
#[macro_export]
macro_rules! bpf_skeleton {
    ($file:literal) => {
        #[allow(
            clippy::all,
            clippy::undocumented_unsafe_blocks,
            unused_imports,
            dead_code,
            missing_docs
        )]
        mod skel {
            include!(concat!(env!("OUT_DIR"), "/", $file));
        }
    };
}

/// Declare generated kernel layouts plain old data, each checked at build
/// time to have the size clang computed for its C struct:
/// `kernel_pod!(types, hop_abi_anchor; hop_event, hop_compact)`, in the
/// crate that includes the skeleton. The sizes are the program's anchor
/// struct's fields of the same names (`ABI_SIZE_OF` of `abi_check.bpf.h`:
/// `*mut [i32; N]`, N the size).
#[macro_export]
macro_rules! kernel_pod {
    ($module:path, $anchor:ident; $($t:ident),* $(,)?) => {$(
        const _: () = {
            use $module as m;
            assert!(
                ::std::mem::size_of::<m::$t>() == $crate::btf_uint(|a: &m::$anchor| a.$t),
                concat!("the generated `", stringify!($t), "` and clang's differ in size")
            );
            // SAFETY: libbpf-cargo generates `$t` from the object's BTF as
            // a #[repr(C)] struct whose fields are integers, arrays of
            // integers, #[repr(transparent)] integer newtypes of C enums and
            // other such structs, with every padding byte an explicit
            // `__pad_N` field (and the program's `_abi.h` asserts the C
            // struct has none): every bit pattern is a valid value and no
            // byte is uninitialised. It derives Copy and is 'static.
            unsafe impl $crate::Zeroable for m::$t {}
            // SAFETY: as above.
            unsafe impl $crate::Pod for m::$t {}
        };
    )*};
}

/// The integer N a BTF type carries as `int (*)[N]` (libbpf's `__uint`,
/// hoptrace's `ABI_SIZE_OF`), read from the type of the field `field`
/// returns, at build time.
#[doc(hidden)]
pub const fn btf_uint<A, const N: usize>(_field: fn(&A) -> *mut [i32; N]) -> usize {
    N
}

/// Build-time check that per-CPU values are whole 8-byte words (the
/// kernel's per-CPU stride, [`percpu`]).
#[macro_export]
macro_rules! percpu_stride {
    ($module:path; $($t:ident),* $(,)?) => {$(
        const _: () = {
            use $module as m;
            assert!(
                ::std::mem::size_of::<m::$t>() % 8 == 0,
                concat!("per-CPU value `", stringify!($t), "` is not a whole number of 8-byte words")
            );
        };
    )*};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Rec {
        a: u64,
        b: u32,
        c: u32,
    }
    // SAFETY: #[repr(C)] integers without padding (8 + 4 + 4 bytes).
    unsafe impl Zeroable for Rec {}
    // SAFETY: as above.
    unsafe impl Pod for Rec {}

    #[test]
    fn a_record_decodes_only_from_exactly_its_size() {
        let r = Rec { a: 1, b: 2, c: 3 };
        let bytes = bytes_of(&r).to_vec();
        assert_eq!(from_bytes::<Rec>(&bytes), Some(r));
        assert_eq!(from_bytes::<Rec>(&bytes[..15]), None, "short");
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(from_bytes::<Rec>(&long), None, "long");
        // unaligned: copied, not cast
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        assert_eq!(from_bytes::<Rec>(&shifted[1..]), Some(r));
    }

    #[test]
    fn a_control_message_struct_is_read_from_at_least_its_size() {
        let ts: [libc::timespec; 3] = [
            libc::timespec {
                tv_sec: 1,
                tv_nsec: 2,
            },
            libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: 5,
                tv_nsec: 6,
            },
        ];
        // SAFETY: viewing an initialised array of integers as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(ts.as_ptr().cast::<u8>(), std::mem::size_of_val(&ts))
        };
        let back: [libc::timespec; 3] = c_struct_at_start(bytes).unwrap();
        assert_eq!((back[0].tv_sec, back[2].tv_nsec), (1, 6));
        assert!(c_struct_at_start::<[libc::timespec; 3]>(&bytes[..47]).is_none());
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(&[9; 8]);
        assert!(c_struct_at_start::<[libc::timespec; 3]>(&longer).is_some());
    }

    #[test]
    fn a_c_name_ends_at_its_first_nul() {
        assert_eq!(c_string(&[b'q' as i8, b'e' as i8, 0, b'x' as i8]), "qe");
        assert_eq!(c_string(b"ab"), "ab");
    }
}
