//! The guest kernel: a Debian `linux-image-*` package unpacked into the cache.
//!
//! `apt-get download linux-image-amd64` fetches the metapackage, whose
//! `Depends` names the versioned image package (`linux-image-6.1.0-NN-amd64`);
//! that one is fetched too and unpacked with `dpkg -x` (nothing is installed
//! on the host). `depmod -b` then writes `modules.dep`, which the package does
//! not ship (the host's postinst would have made it). The unpacked tree goes
//! to `kernel-<release>.tmp-<pid>` and is renamed to `kernel-<release>` only
//! when complete, so a half-done fetch is never used and two concurrent
//! fetches do not mix.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// An unpacked guest kernel.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// `6.1.0-56-amd64`
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `.../lib/modules/<release>`
    pub modules: PathBuf,
}

impl Kernel {
    fn at(dir: &Path, release: &str) -> Option<Kernel> {
        let vmlinuz = dir.join(format!("root/boot/vmlinuz-{release}"));
        let modules = dir.join(format!("root/lib/modules/{release}"));
        (vmlinuz.is_file() && modules.join("modules.dep").is_file()).then(|| Kernel {
            release: release.to_string(),
            vmlinuz,
            modules,
        })
    }
}

/// The newest complete kernel in `cache`, if any.
pub fn cached(cache: &Path) -> Option<Kernel> {
    let mut found: Vec<Kernel> = std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = name.strip_prefix("kernel-")?;
            if rel.contains(".tmp") {
                return None;
            }
            Kernel::at(&e.path(), rel)
        })
        .collect();
    found.sort_by(|a, b| a.release.cmp(&b.release));
    found.pop()
}

/// The kernel in `cache`, fetched and unpacked first when there is none.
pub fn ensure(cache: &Path) -> Result<Kernel> {
    if let Some(k) = cached(cache) {
        return Ok(k);
    }
    std::fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
    let pid = std::process::id();
    let dl = cache.join(format!("download-{pid}"));
    let _ = std::fs::remove_dir_all(&dl);
    std::fs::create_dir_all(&dl)?;
    let meta = download(&dl, "linux-image-amd64")?;
    let depends = dpkg_field(&meta, "Depends")?;
    let image = image_package(&depends).with_context(|| {
        format!(
            "{} depends on `{depends}`: no linux-image-* package in it",
            meta.display()
        )
    })?;
    let deb = download(&dl, &image)?;
    let release = image.trim_start_matches("linux-image-").to_string();
    let tmp = cache.join(format!("kernel-{release}.tmp-{pid}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    run(Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(tmp.join("root")))
    .with_context(|| format!("unpacking {} with dpkg -x", deb.display()))?;
    run(Command::new("depmod")
        .arg("-b")
        .arg(tmp.join("root"))
        .arg(&release))
    .context("writing modules.dep of the guest kernel with depmod -b (package kmod)")?;
    let dir = cache.join(format!("kernel-{release}"));
    // Another hoptrace may have finished the same fetch first: keep its copy.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    let _ = std::fs::remove_dir_all(&dl);
    Kernel::at(&dir, &release).with_context(|| {
        format!(
            "{image} unpacked in {} has no boot/vmlinuz-{release} or modules",
            dir.display()
        )
    })
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `apt-get download PKG` into `dir`; returns the .deb.
fn download(dir: &Path, pkg: &str) -> Result<PathBuf> {
    let out = Command::new("apt-get")
        .args(["download", "-q", pkg])
        .current_dir(dir)
        .output()
        .context(
            "running apt-get (the vm topology fetches a Debian kernel with apt-get download)",
        )?;
    if !out.status.success() {
        bail!(
            "could not fetch the guest kernel: `apt-get download {pkg}` failed: {}\n\
             The vm topology needs a Debian package source reachable by apt (run `apt-get update`), \
             or a kernel already unpacked in {} (scripts/setup.sh pre-fetches it)",
            String::from_utf8_lossy(&out.stderr).trim(),
            super::CACHE_DIR
        );
    }
    let prefix = format!("{pkg}_");
    std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with(&prefix) && n.ends_with(".deb")
        })
        .with_context(|| {
            format!(
                "apt-get download {pkg} left no {prefix}*.deb in {}",
                dir.display()
            )
        })
}

fn dpkg_field(deb: &Path, field: &str) -> Result<String> {
    let out = Command::new("dpkg-deb")
        .arg("-f")
        .arg(deb)
        .arg(field)
        .output()
        .context("running dpkg-deb")?;
    if !out.status.success() {
        bail!("dpkg-deb -f {} {field} failed", deb.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The versioned image package in a `Depends` value
/// (`linux-image-6.1.0-56-amd64 (= 6.1.192-2)` -> `linux-image-6.1.0-56-amd64`).
pub fn image_package(depends: &str) -> Option<String> {
    depends
        .split(',')
        .flat_map(|alt| alt.split('|'))
        .map(|d| d.split_whitespace().next().unwrap_or(""))
        .find(|n| {
            n.starts_with("linux-image-")
                && n.as_bytes().get(12).is_some_and(|b| b.is_ascii_digit())
        })
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_package_from_depends() {
        assert_eq!(
            image_package("linux-image-6.1.0-56-amd64 (= 6.1.192-2)").as_deref(),
            Some("linux-image-6.1.0-56-amd64")
        );
        assert_eq!(
            image_package("foo, linux-image-6.12.1-amd64").as_deref(),
            Some("linux-image-6.12.1-amd64")
        );
        assert_eq!(image_package("linux-image-amd64-signed"), None);
    }
}
