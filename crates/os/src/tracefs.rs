//! Where tracefs is (for event format files).
//!
//! tracefs is looked for at `/sys/kernel/tracing`, then
//! `/sys/kernel/debug/tracing`; when neither has an `events` directory,
//! `mount -t tracefs nodev /sys/kernel/tracing` is tried: it is often not
//! mounted inside fresh namespaces (`ip netns exec` mounts a fresh /sys in a
//! mount namespace of its own, so such a mount disappears with the process)
//! or minimal guests. `HOPTRACE_TRACEFS` names another root (tests point it
//! at a directory without the events they look for).

use std::path::{Path, PathBuf};

/// tracefs is neither mounted nor mountable here.
#[derive(Debug, thiserror::Error)]
#[error("tracefs is not mounted and `mount -t tracefs nodev /sys/kernel/tracing` failed ({0}): mount it (as root) and run again")]
pub struct NoTracefs(String);

/// The tracefs root: `HOPTRACE_TRACEFS`, a mounted one, or one mounted now.
pub fn tracefs_root() -> Result<PathBuf, NoTracefs> {
    if let Some(p) = std::env::var_os("HOPTRACE_TRACEFS") {
        return Ok(PathBuf::from(p));
    }
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("events").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    let target = "/sys/kernel/tracing";
    let status = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", target])
        .status()
        .map_err(|e| NoTracefs(format!("running mount: {e}")))?;
    if status.success() && Path::new(target).join("events").is_dir() {
        return Ok(PathBuf::from(target));
    }
    Err(NoTracefs(format!("mount exited with {status}")))
}
