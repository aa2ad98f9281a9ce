//! The channel: a virtio-serial port between QEMU and the guest.
//!
//! QEMU side (see the lab's `vm` topology):
//!
//! ```text
//! -device virtio-serial-pci,id=vser0
//! -chardev socket,id=clk0,path=<run dir>/clock.sock,server=on,wait=off
//! -device virtserialport,bus=vser0.0,chardev=clk0,name=org.hoptrace.clock
//! ```
//!
//! The host side connects to the unix socket; the guest (module
//! `virtio_console`) sees the port as `/dev/vportNpM`, whose name is in
//! `/sys/class/virtio-ports/vportNpM/name` (udev's
//! `/dev/virtio-ports/<name>` links are not there in a minimal guest, so the
//! name is looked up in sysfs). The exchange stays off the NIC being
//! measured. vsock would need `vhost_vsock` on the host (absent here); a
//! port needs nothing but QEMU.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The port name hoptrace gives its clock channel.
pub const PORT_NAME: &str = "org.hoptrace.clock";

/// Where the kernel lists virtio-serial ports.
pub const VIRTIO_PORTS: &str = "/sys/class/virtio-ports";

/// The device of the virtio-serial port named `name`, looked up in
/// `sysfs_ports` (normally [`VIRTIO_PORTS`]).
pub fn find_port(sysfs_ports: &Path, name: &str) -> Result<PathBuf, String> {
    let entries = std::fs::read_dir(sysfs_ports).map_err(|e| {
        format!(
            "{}: {e}: no virtio-serial ports (is the module virtio_console loaded, and does QEMU have -device virtio-serial-pci?)",
            sysfs_ports.display()
        )
    })?;
    let mut seen = Vec::new();
    for e in entries.flatten() {
        let port_name = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        let port_name = port_name.trim();
        if port_name == name {
            return Ok(Path::new("/dev").join(e.file_name()));
        }
        seen.push(format!(
            "{} ({})",
            e.file_name().to_string_lossy(),
            if port_name.is_empty() {
                "no name"
            } else {
                port_name
            }
        ));
    }
    Err(format!(
        "no virtio-serial port named `{name}` in {} (ports: {}): QEMU needs -device virtserialport,...,name={name}",
        sysfs_ports.display(),
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    ))
}

/// Connect to the unix socket at `path`, retrying while it does not exist
/// or refuses (QEMU starting), for at most `timeout` or until `stop`.
pub fn connect(path: &Path, timeout: Duration, stop: &AtomicBool) -> std::io::Result<UnixStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return Ok(s),
            Err(e)
                if Instant::now() < deadline
                    && !stop.load(Ordering::SeqCst)
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("connecting to {}: {e}", path.display()),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_port_is_found_by_its_name_in_sysfs() {
        let d = tempfile::tempdir().unwrap();
        for (dir, name) in [
            ("vport0p0", ""),
            ("vport1p1", PORT_NAME),
            ("vport1p2", "x.y"),
        ] {
            std::fs::create_dir(d.path().join(dir)).unwrap();
            std::fs::write(d.path().join(dir).join("name"), format!("{name}\n")).unwrap();
        }
        assert_eq!(
            find_port(d.path(), PORT_NAME),
            Ok(PathBuf::from("/dev/vport1p1"))
        );
        let e = find_port(d.path(), "org.other").unwrap_err();
        assert!(e.contains("no virtio-serial port named `org.other`"), "{e}");
        assert!(e.contains("vport1p2 (x.y)"), "{e}");
        let e = find_port(&d.path().join("absent"), PORT_NAME).unwrap_err();
        assert!(e.contains("virtio_console"), "{e}");
    }
}
