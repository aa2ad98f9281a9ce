//! Stop flag for producers: SIGINT/SIGTERM set an `AtomicBool`.
//!
//! The handler only stores `true` (async-signal-safe, via signal-hook); the
//! producer polls the flag in its loop and then calls
//! [`crate::RecordingWriter::close`] so the open segment is finished cleanly.
//! A second SIGINT/SIGTERM after the flag is set terminates the process
//! (exit code 130/143-like via the default action), so a stuck producer can
//! still be stopped.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Install SIGINT and SIGTERM handlers that set the returned flag. A second
/// signal while the flag is already set exits the process immediately.
pub fn install_stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first: runs when the flag is already set (second signal).
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&flag))?;
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}
