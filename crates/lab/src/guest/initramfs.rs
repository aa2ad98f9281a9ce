//! Building (and caching) the guest's initramfs.
//!
//! Contents: `/bin/busybox` (with `/init` calling `busybox --install`), the
//! hoptrace binary as `/bin/hoptrace` (stripped with `strip` or `llvm-strip`
//! when available: 16 MB instead of 130), every shared library `ldd` lists
//! for both at the same path as on the host (the guest is the same
//! architecture and the host's loader path is what the binaries name), the
//! modules of [`super::MODULES`] and their dependencies from `modules.dep`
//! (decompressed when the kernel ships `.ko.xz` / `.ko.zst`), their load
//! order in `/etc/hoptrace-modules`, the [`super::OPTIONAL_MODULES`] the
//! kernel has in `/etc/hoptrace-modules-optional`, and `/init`.
//!
//! The archive is cached as `initramfs-<key>.cpio` where `<key>` hashes the
//! hoptrace binary's bytes, the busybox binary's size, the kernel release,
//! the module list and the init script: a new build of hoptrace or another
//! kernel makes a new image, anything else reuses it.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::cpio::Archive;
use super::kernel::Kernel;
use super::{INIT, MODULES, OPTIONAL_MODULES};

/// The initramfs for `exe` on `kernel`, built into `cache` when missing.
/// Returns its path and whether it was built now.
pub fn ensure(cache: &Path, kernel: &Kernel, exe: &Path) -> Result<(PathBuf, bool)> {
    let busybox = find_busybox()?;
    let key = cache_key(kernel, exe, &busybox)?;
    let path = cache.join(format!("initramfs-{key:016x}.cpio"));
    if path.is_file() {
        return Ok((path, false));
    }
    let bytes = build(kernel, exe, &busybox)?;
    let tmp = path.with_extension(format!("cpio.tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path)?;
    // Older images (other builds of hoptrace) are not needed any more.
    if let Ok(dir) = std::fs::read_dir(cache) {
        for e in dir.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("initramfs-") && n.ends_with(".cpio") && e.path() != path {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok((path, true))
}

fn find_busybox() -> Result<PathBuf> {
    for p in ["/bin/busybox", "/usr/bin/busybox"] {
        if Path::new(p).is_file() {
            return Ok(PathBuf::from(p));
        }
    }
    bail!("busybox not found: the vm topology's guest needs it (scripts/setup.sh installs busybox-static)")
}

fn cache_key(kernel: &Kernel, exe: &Path, busybox: &Path) -> Result<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut f = std::fs::File::open(exe).with_context(|| format!("reading {}", exe.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
    }
    h.write(kernel.release.as_bytes());
    h.write(INIT.as_bytes());
    h.write(MODULES.join(",").as_bytes());
    h.write(OPTIONAL_MODULES.join(",").as_bytes());
    h.write_u64(std::fs::metadata(busybox)?.len());
    Ok(h.finish())
}

/// Module name as the kernel sees it (`9pnet_virtio` for `9pnet-virtio.ko.xz`).
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

/// Parse `modules.dep` and return the module files (relative paths) needed
/// for `wanted`, dependencies first.
pub fn load_order(modules_dep: &str, wanted: &[&str]) -> Result<Vec<String>> {
    let mut deps: HashMap<String, (String, Vec<String>)> = HashMap::new();
    for line in modules_dep.lines() {
        let Some((path, rest)) = line.split_once(':') else {
            continue;
        };
        let d = rest.split_whitespace().map(String::from).collect();
        deps.insert(module_name(path), (path.to_string(), d));
    }
    fn visit(
        name: &str,
        deps: &HashMap<String, (String, Vec<String>)>,
        seen: &mut BTreeSet<String>,
        out: &mut Vec<String>,
    ) -> Result<()> {
        if !seen.insert(name.to_string()) {
            return Ok(());
        }
        let Some((path, d)) = deps.get(name) else {
            bail!("kernel module `{name}` is not in the guest kernel's modules.dep");
        };
        for dep in d.iter().rev() {
            visit(&module_name(dep), deps, seen, out)?;
        }
        out.push(path.clone());
        Ok(())
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for w in wanted {
        visit(&w.replace('-', "_"), &deps, &mut seen, &mut out)?;
    }
    Ok(out)
}

/// Shared objects a dynamic binary needs (`ldd`), including the loader.
fn shared_libs(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(bin)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some((_, rest)) = line.split_once("=> ") {
            if let Some(p) = rest.split_whitespace().next() {
                if p.starts_with('/') {
                    libs.push(PathBuf::from(p));
                }
            }
        } else if line.starts_with('/') {
            if let Some(p) = line.split_whitespace().next() {
                libs.push(PathBuf::from(p));
            }
        }
    }
    Ok(libs)
}

/// The hoptrace binary without debug information (or as is without `strip`).
fn stripped(exe: &Path) -> Result<Vec<u8>> {
    let tmp = std::env::temp_dir().join(format!("hoptrace-guest-{}.bin", std::process::id()));
    for tool in ["strip", "llvm-strip"] {
        let ok = Command::new(tool)
            .arg("-o")
            .arg(&tmp)
            .arg(exe)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            let b = std::fs::read(&tmp);
            let _ = std::fs::remove_file(&tmp);
            return Ok(b?);
        }
    }
    std::fs::read(exe).with_context(|| format!("reading {}", exe.display()))
}

fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".ko") {
        return std::fs::read(path).with_context(|| format!("reading {name}"));
    } else if name.ends_with(".xz") {
        "xz"
    } else if name.ends_with(".zst") {
        "zstd"
    } else if name.ends_with(".gz") {
        "gzip"
    } else {
        bail!("kernel module {name} has an unknown compression");
    };
    let out = Command::new(tool)
        .args(["-d", "-c"])
        .arg(path)
        .output()
        .with_context(|| format!("running {tool} to decompress {name} (install {tool})"))?;
    if !out.status.success() {
        bail!("{tool} -d {name} failed");
    }
    Ok(out.stdout)
}

/// Add `path` and its parent directories (once each).
fn add_dirs(a: &mut Archive, made: &mut BTreeSet<String>, path: &str) {
    let mut cur = String::new();
    for part in path.trim_start_matches('/').split('/') {
        if !cur.is_empty() {
            cur.push('/');
        }
        cur.push_str(part);
        if made.insert(cur.clone()) {
            a.dir(&cur);
        }
    }
}

/// Add the modules `order` (paths relative to the kernel's module tree) as
/// `lib/modules/<name>.ko`; returns their names, one a line.
fn add_modules(a: &mut Archive, kernel: &Kernel, order: &[String]) -> Result<String> {
    let mut list = String::new();
    for rel in order {
        let data = module_bytes(&kernel.modules.join(rel))?;
        let name = format!("{}.ko", module_name(rel));
        a.file(&format!("lib/modules/{name}"), 0o644, &data);
        list.push_str(&name);
        list.push('\n');
    }
    Ok(list)
}

fn build(kernel: &Kernel, exe: &Path, busybox: &Path) -> Result<Vec<u8>> {
    let mut a = Archive::new();
    let mut made = BTreeSet::new();
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "etc",
        "mnt/host",
        "lib/modules",
    ] {
        add_dirs(&mut a, &mut made, d);
    }
    a.file("init", 0o755, INIT.as_bytes());
    a.file("bin/busybox", 0o755, &std::fs::read(busybox)?);
    a.file("bin/hoptrace", 0o755, &stripped(exe)?);
    let mut libs = BTreeSet::new();
    libs.extend(shared_libs(exe)?);
    libs.extend(shared_libs(busybox)?);
    // iproute2's ip: the tracer asks `ip -d -j link show`, which busybox lacks.
    let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .context("iproute2's ip not found (package iproute2)")?;
    add_dirs(&mut a, &mut made, "usr/sbin");
    a.file("usr/sbin/ip", 0o755, &std::fs::read(ip)?);
    libs.extend(shared_libs(ip)?);
    for lib in libs {
        let s = lib.to_string_lossy().into_owned();
        if let Some((dir, _)) = s.rsplit_once('/') {
            add_dirs(&mut a, &mut made, dir);
        }
        let data = std::fs::read(&lib).with_context(|| format!("reading {s} (from ldd)"))?;
        a.file(&s, 0o755, &data);
    }
    let dep = std::fs::read_to_string(kernel.modules.join("modules.dep"))?;
    let order = load_order(&dep, &MODULES)?;
    let list = add_modules(&mut a, kernel, &order)?;
    a.file("etc/hoptrace-modules", 0o644, list.as_bytes());
    // Optional modules this kernel has, without the ones already loaded.
    let mut optional = Vec::new();
    for m in OPTIONAL_MODULES {
        if let Ok(o) = load_order(&dep, &[m]) {
            optional.extend(o.into_iter().filter(|p| !order.contains(p)));
        }
    }
    let list = add_modules(&mut a, kernel, &optional)?;
    a.file("etc/hoptrace-modules-optional", 0o644, list.as_bytes());
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "\
kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/netfs/netfs.ko:
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
";

    #[test]
    fn dependencies_come_first_once() {
        let o = load_order(DEP, &["virtio_pci", "9pnet-virtio", "9p"]).unwrap();
        let pos = |m: &str| o.iter().position(|p| module_name(p) == m).unwrap();
        assert!(pos("virtio_ring") < pos("virtio"));
        assert!(pos("virtio") < pos("virtio_pci"));
        assert!(pos("9pnet") < pos("9pnet_virtio"));
        assert!(pos("netfs") < pos("fscache"));
        assert!(pos("fscache") < pos("9p"));
        assert_eq!(o.len(), 10, "{o:?}");
        let e = load_order(DEP, &["virtio_net"]).unwrap_err().to_string();
        assert!(e.contains("virtio_net"), "{e}");
    }
}
