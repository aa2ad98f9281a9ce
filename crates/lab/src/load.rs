//! Background UDP load for `lab run --load udp` (the comparison table's
//! measurements ran netperf beside the SV stream): a bounded blaster in the publisher's namespace sends
//! 1000-byte datagrams from 10.203.0.1 to the consumer's 10.203.0.2:9000,
//! through the same switch as the SV frames and nowhere else; a socket in
//! the consumer's namespace counts what arrived (zero is a failure: the
//! load did not cross the switch). Both loops end on their own (duration)
//! or on the run's stop flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::topology::VM_IP;

/// Count UDP datagrams arriving on the consumer's 10.203.0.2:9000 until `stop`.
pub(crate) fn udp_sink(stop: &AtomicBool, bound: &AtomicBool) -> Result<u64> {
    let sock = std::net::UdpSocket::bind((VM_IP, 9000))
        .context("binding the UDP load sink on 10.203.0.2:9000")?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    bound.store(true, Ordering::SeqCst);
    let mut buf = vec![0u8; 2048];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if sock.recv(&mut buf).is_ok() {
            n += 1;
        }
    }
    Ok(n)
}

/// Send UDP datagrams to the consumer at `pps` for `dur` (calling thread's namespace).
pub(crate) fn udp_blast(dur: Duration, pps: u32, stop: &AtomicBool) -> Result<u64> {
    let sock = std::net::UdpSocket::bind("10.203.0.1:0")
        .context("binding the UDP load socket on 10.203.0.1")?;
    let payload = vec![0x55u8; 1000];
    let gap = Duration::from_secs_f64(1.0 / pps as f64);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < dur && !stop.load(Ordering::Relaxed) {
        let _ = sock.send_to(&payload, (VM_IP, 9000));
        n += 1;
        let due = start + gap * n as u32;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
    Ok(n)
}
