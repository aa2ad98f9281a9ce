//! File access under the audited root (`/`, or `--root DIR` for a mounted
//! image or a test fixture). Every read says which file failed and why, so
//! a check that cannot read its source reports *unknown* with that reason.
//! Nothing here writes.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a source could not be read: the path as audited (`/proc/cmdline`,
/// not the fixture's real path) and the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: String,
    pub why: String,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot read {}: {}", self.path, self.why)
    }
}

impl Unreadable {
    pub fn new(path: impl Into<String>, why: impl Into<String>) -> Self {
        Unreadable {
            path: path.into(),
            why: why.into(),
        }
    }

    /// The file does not exist (as opposed to: exists but unreadable).
    pub fn is_missing(&self) -> bool {
        self.why == MISSING
    }
}

const MISSING: &str = "no such file";

/// The audited file system.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Root { dir: dir.into() }
    }

    /// The host itself.
    pub fn host() -> Self {
        Root::new("/")
    }

    pub fn is_host(&self) -> bool {
        self.dir == Path::new("/")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Real path of an audited absolute path.
    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.join(p.trim_start_matches('/'))
    }

    fn err(p: &str, e: std::io::Error) -> Unreadable {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            MISSING.to_string()
        } else {
            e.to_string()
        };
        Unreadable::new(p, why)
    }

    pub fn read(&self, p: &str) -> Result<String, Unreadable> {
        std::fs::read(self.path(p))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(|e| Self::err(p, e))
    }

    pub fn read_bytes(&self, p: &str) -> Result<Vec<u8>, Unreadable> {
        std::fs::read(self.path(p)).map_err(|e| Self::err(p, e))
    }

    /// The file's content, trimmed.
    pub fn read_trim(&self, p: &str) -> Result<String, Unreadable> {
        self.read(p).map(|s| s.trim().to_string())
    }

    /// An integer file (sysctl-style).
    pub fn read_i64(&self, p: &str) -> Result<i64, Unreadable> {
        let s = self.read_trim(p)?;
        s.parse()
            .map_err(|_| Unreadable::new(p, format!("`{s}` is not an integer")))
    }

    pub fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }

    /// Names in a directory, sorted (missing directory: error).
    pub fn list(&self, p: &str) -> Result<Vec<String>, Unreadable> {
        let rd = std::fs::read_dir(self.path(p)).map_err(|e| Self::err(p, e))?;
        let mut v: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort_by(|a, b| natural(a).cmp(&natural(b)).then(a.cmp(b)));
        Ok(v)
    }

    /// Target of a symbolic link, as stored.
    pub fn link(&self, p: &str) -> Result<String, Unreadable> {
        std::fs::read_link(self.path(p))
            .map(|t| t.to_string_lossy().into_owned())
            .map_err(|e| Self::err(p, e))
    }

    /// Last component of a symbolic link's target (a driver or device name).
    pub fn link_name(&self, p: &str) -> Result<String, Unreadable> {
        let t = self.link(p)?;
        Ok(t.rsplit('/').next().unwrap_or_default().to_string())
    }
}

/// Sort key putting `cpu10` after `cpu9` and `42` after `7`.
fn natural(s: &str) -> (String, u64) {
    let digits: String = s.chars().rev().take_while(|c| c.is_ascii_digit()).collect();
    let n: String = digits.chars().rev().collect();
    let head = &s[..s.len() - n.len()];
    (head.to_string(), n.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_reported_with_its_audited_path() {
        let d = tempfile::tempdir().unwrap();
        let r = Root::new(d.path());
        let e = r.read("/proc/cmdline").unwrap_err();
        assert_eq!(e.path, "/proc/cmdline");
        assert!(e.is_missing());
        assert_eq!(e.to_string(), "cannot read /proc/cmdline: no such file");
    }

    #[test]
    fn directory_listings_sort_numbers_naturally() {
        let d = tempfile::tempdir().unwrap();
        for n in ["cpu10", "cpu2", "cpu1", "cpufreq"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        let r = Root::new(d.path());
        assert_eq!(r.list("/").unwrap(), ["cpu1", "cpu2", "cpu10", "cpufreq"]);
    }
}
