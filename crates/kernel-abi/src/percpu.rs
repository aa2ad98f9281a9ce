//! Reading the kernel's per-CPU maps into typed values.
//!
//! A per-CPU map holds one value per possible CPU for each key; the kernel
//! hands them over back to back, each rounded up to 8 bytes (the value
//! types are whole 8-byte words, checked at build time with
//! [`crate::percpu_stride!`]). Each value is copied into its generated type
//! ([`crate::from_bytes`]): a value of another size is an error naming the
//! map, never a misread.
//!
//! Whole arrays (the hop probes' `khist`, `ks_stats`, `ks_win`) are read with one
//! `BPF_MAP_LOOKUP_BATCH` walk each and the window map is zeroed with one
//! `BPF_MAP_UPDATE_BATCH` (libbpf-rs refuses batch operations on per-CPU
//! maps, hence the direct libbpf calls); a single key goes through
//! libbpf-rs.

use std::mem::size_of;
use std::os::fd::AsRawFd;

use anyhow::{bail, Context, Result};
use bytemuck::Pod;
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags};

use crate::from_bytes;

/// The possible CPUs (the number of values per key of a per-CPU map).
pub fn cpus() -> Result<usize> {
    libbpf_rs::num_possible_cpus().context("counting the possible CPUs")
}

/// This key's value on every CPU.
pub fn values<T: Pod>(map: &dyn MapCore, key: u32) -> Result<Vec<T>> {
    let name = map.name().to_string_lossy().into_owned();
    map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("reading the per-CPU map {name}"))?
        .unwrap_or_default()
        .iter()
        .map(|b| {
            from_bytes::<T>(b).with_context(|| {
                format!(
                    "per-CPU map {name}: a value of {} bytes, expected {} (BPF object and user space disagree)",
                    b.len(),
                    size_of::<T>()
                )
            })
        })
        .collect()
}

/// Every per-CPU value of the array map (keys 0..n), by
/// `BPF_MAP_LOOKUP_BATCH`: `values[key * cpus + cpu]`.
pub fn array<T: Pod>(map: &dyn MapCore, n: usize, cpus: usize) -> Result<Vec<T>> {
    let vsize = size_of::<T>();
    let raw = lookup_batch(map.as_fd().as_raw_fd(), n, vsize, cpus)
        .with_context(|| format!("reading the per-CPU map {}", map.name().to_string_lossy()))?;
    raw.chunks_exact(vsize)
        .map(|b| from_bytes::<T>(b).context("a per-CPU value of another size"))
        .collect()
}

/// The raw bytes of every per-CPU value of the array behind `fd` (keys
/// 0..n, values of `vsize` bytes), key-major.
fn lookup_batch(fd: i32, n: usize, vsize: usize, cpus: usize) -> Result<Vec<u8>> {
    let mut keys = vec![0u32; n];
    let mut vals = vec![0u8; n * cpus * vsize];
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let mut out = vec![0u8; n * cpus * vsize];
    let mut in_batch: Option<u32> = None;
    let mut out_batch: u32 = 0;
    let mut done = 0usize;
    while done < n {
        let mut count = (n - done) as u32;
        let in_ptr = in_batch
            .as_mut()
            .map_or(std::ptr::null_mut(), |b| b as *mut u32 as *mut libc::c_void);
        // SAFETY: keys/vals hold `count` more keys and per-CPU values from
        // `done`; the batch tokens are u32 (array keys).
        let rc = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                fd,
                in_ptr,
                &mut out_batch as *mut u32 as *mut libc::c_void,
                keys[done..].as_mut_ptr() as *mut libc::c_void,
                vals[done * cpus * vsize..].as_mut_ptr() as *mut libc::c_void,
                &mut count,
                &opts,
            )
        };
        if rc != 0 && rc != -libc::ENOENT {
            bail!(
                "batch lookup of a per-CPU map: {}",
                std::io::Error::from_raw_os_error(-rc)
            );
        }
        done += count as usize;
        if rc == -libc::ENOENT || count == 0 {
            break;
        }
        in_batch = Some(out_batch);
    }
    let row = cpus * vsize;
    for i in 0..done {
        let k = keys[i] as usize;
        if k < n {
            out[k * row..(k + 1) * row].copy_from_slice(&vals[i * row..(i + 1) * row]);
        }
    }
    Ok(out)
}

/// Zero every per-CPU value of the array map (keys 0..n).
pub fn zero_array<T: Pod>(map: &dyn MapCore, n: usize, cpus: usize) -> Result<()> {
    let keys: Vec<u32> = (0..n as u32).collect();
    let vals = vec![0u8; n * cpus * size_of::<T>()];
    let mut count = n as u32;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    // SAFETY: `keys` and `vals` hold `count` keys and per-CPU values.
    let rc = unsafe {
        libbpf_sys::bpf_map_update_batch(
            map.as_fd().as_raw_fd(),
            keys.as_ptr() as *const libc::c_void,
            vals.as_ptr() as *const libc::c_void,
            &mut count,
            &opts,
        )
    };
    if rc != 0 {
        bail!(
            "resetting the per-CPU map {}: {}",
            map.name().to_string_lossy(),
            std::io::Error::from_raw_os_error(-rc)
        );
    }
    Ok(())
}
