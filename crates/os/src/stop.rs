//! Stop signals: SIGINT or SIGTERM sets a flag; a second one ends the process.
//!
//! Every long-running command (publisher, subscriber, ping, reflector,
//! tracer, live capture, lab run) polls the flag [`stop_flag`] returns in
//! its loop and, once it is set, finishes what it holds: prints its summary,
//! closes its recording (the open Parquet segment gets its footer), tears
//! down its lab.
//!
//! Mechanism: two handlers per signal, registered with `signal-hook`, which
//! runs the handlers of one signal in the order they were registered.
//!
//! 1. *Conditional default*: if the flag is already set, run the signal's
//!    default action. SIGINT and SIGTERM then end the process at once,
//!    killed by that signal (a shell reports exit status 130 for SIGINT,
//!    143 for SIGTERM), so a command stuck in its clean-up can always be
//!    stopped. What it had not finished stays: a recording's open segment
//!    (`segment-NNNNNN.parquet.partial`, reported as cut by the reader), a
//!    lab's namespaces (`hoptrace lab down NAME` removes them).
//! 2. *Set the flag*: store `true` in the `AtomicBool`.
//!
//! On the first signal handler 1 finds the flag clear and does nothing, and
//! handler 2 sets it; on the second, handler 1 finds it set. Both only load
//! or store an atomic (or re-raise the signal with its default action),
//! which is async-signal-safe.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use signal_hook::consts::{SIGINT, SIGTERM};

/// Install the SIGINT and SIGTERM handlers and return the flag they set.
/// A second SIGINT or SIGTERM after the flag is set ends the process with
/// the signal's default action (see the module documentation).
pub fn stop_flag() -> io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_default(sig, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&flag)))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("installing the SIGINT/SIGTERM handlers: {e}"),
                )
            })?;
    }
    Ok(flag)
}
