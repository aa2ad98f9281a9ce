//! A minimal writer of the `newc` cpio format (what the kernel unpacks as an
//! initramfs).
//!
//! Each entry is a 110-byte ASCII header (`070701` and thirteen 8-digit hex
//! fields: inode, mode, uid, gid, nlink, mtime, size, dev major/minor, rdev
//! major/minor, name size including its NUL, checksum 0), the NUL-terminated
//! name padded to 4 bytes, then the data padded to 4 bytes. The archive ends
//! with the entry `TRAILER!!!`. Only directories, regular files and symlinks
//! are needed here; parents must come before their children.

/// Builds an archive in memory (an initramfs is a few tens of MB).
#[derive(Default)]
pub struct Archive {
    buf: Vec<u8>,
    ino: u32,
}

impl Archive {
    pub fn new() -> Self {
        Self::default()
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let name = name.trim_start_matches('/');
        let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
        let fields = [
            self.ino,
            mode,
            0,
            0,
            nlink,
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        let mut h = String::from("070701");
        for f in fields {
            h.push_str(&format!("{f:08x}"));
        }
        self.buf.extend_from_slice(h.as_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | (mode & 0o7777), data);
    }

    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, target.as_bytes());
    }

    /// Close the archive and return its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout_is_aligned_and_terminated() {
        let mut a = Archive::new();
        a.dir("bin");
        a.file("/bin/x", 0o755, b"hello");
        a.symlink("bin/y", "x");
        let b = a.finish();
        assert_eq!(b.len() % 4, 0);
        assert!(b.starts_with(b"070701"));
        // first entry: name size field (12th) = len("bin") + 1
        let namesize = u32::from_str_radix(std::str::from_utf8(&b[94..102]).unwrap(), 16).unwrap();
        assert_eq!(namesize, 4);
        assert_eq!(&b[110..114], b"bin\0");
        // the file's data follows its padded name
        let pos = b.windows(6).position(|w| w == b"bin/x\0").unwrap();
        let size = u32::from_str_radix(
            std::str::from_utf8(&b[pos - 110 + 54..pos - 110 + 62]).unwrap(),
            16,
        )
        .unwrap();
        assert_eq!(size, 5);
        let data_at = (pos + 6 + 3) & !3;
        assert_eq!(&b[data_at..data_at + 5], b"hello");
        let tail = String::from_utf8_lossy(&b[b.len() - 16..]);
        assert!(tail.contains("TRAILER!!!"), "{tail}");
    }
}
