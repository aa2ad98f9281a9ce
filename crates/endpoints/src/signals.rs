//! SIGINT/SIGTERM -> a stop flag, so every command prints its summary (and
//! closes its recording) when interrupted. A second signal kills the
//! process the usual way.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A flag set by SIGINT or SIGTERM.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&flag))?;
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}
