//! `--txtime`: launch times (SO_TXTIME) where the egress qdisc honours them.
//!
//! Mechanism: the socket is given `SO_TXTIME` with clock CLOCK_TAI, and
//! every frame is sent with an `SCM_TXTIME` control message carrying its
//! instant (TAI ns). The kernel stores it in the skb (`skb->tstamp`); only
//! a qdisc that schedules by it holds the frame until then: ETF
//! (`sch_etf`, earliest txtime first, optionally offloaded to a NIC with
//! launch-time support) or taprio in txtime-assist mode (`flags 0x1`).
//! Every other qdisc (pfifo_fast, fq_codel, htb, noqueue on veth...) sends
//! the frame at once and ignores the time, so "sent at the instant" would
//! be a pretence: [`check_qdiscs`] reads the interface's qdiscs
//! (`tc -j qdisc show dev IFACE`) first and refuses with what to configure.
//!
//! With launch times the publisher hands each instant's frames to the
//! kernel a lead time ahead (the wake margin plus [`LEAD_NS`]) instead of
//! spinning to the instant; a frame that reaches ETF after its launch time
//! minus ETF's `delta` is dropped by the qdisc (it shows as a frame without
//! TX stamp and as lost samples at the subscribers).

use std::io;
use std::os::fd::RawFd;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Time ahead of the instant at which frames are handed to the kernel,
/// beyond the wake margin (ETF's `delta` must be below it).
pub const LEAD_NS: i64 = 300_000;

/// The qdisc of `iface` that honours launch times, described ("etf
/// (handle 8001:, parent 100:1)"), or an error naming the qdiscs found and
/// what to configure. Runs `tc` in the current network namespace.
pub fn check_qdiscs(iface: &str) -> Result<String> {
    let out = std::process::Command::new("tc")
        .args(["-j", "qdisc", "show", "dev", iface])
        .output()
        .context(
            "--txtime: running `tc -j qdisc show` to find the egress qdisc (install iproute2)",
        )?;
    if !out.status.success() {
        bail!(
            "--txtime: `tc -j qdisc show dev {iface}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let qdiscs: Value = serde_json::from_slice(&out.stdout)
        .context("--txtime: reading the JSON of `tc -j qdisc show`")?;
    launch_time_qdisc(iface, &qdiscs)
}

/// [`check_qdiscs`] on the parsed `tc -j qdisc show dev IFACE` output.
pub fn launch_time_qdisc(iface: &str, qdiscs: &Value) -> Result<String> {
    let list = qdiscs.as_array().map(Vec::as_slice).unwrap_or_default();
    let describe = |q: &Value| {
        let kind = q["kind"].as_str().unwrap_or("?");
        let place = if q["root"].as_bool() == Some(true) {
            "root".to_string()
        } else {
            format!("parent {}", q["parent"].as_str().unwrap_or("?"))
        };
        format!(
            "{kind} (handle {}, {place})",
            q["handle"].as_str().unwrap_or("?")
        )
    };
    if let Some(q) = list
        .iter()
        .find(|q| q["kind"] == "etf" || (q["kind"] == "taprio" && txtime_assist(&q["options"])))
    {
        return Ok(describe(q));
    }
    let found = if list.is_empty() {
        "no qdisc".to_string()
    } else {
        list.iter().map(describe).collect::<Vec<_>>().join(", ")
    };
    bail!(
        "--txtime: the egress qdisc of {iface} is {found}, which sends at once and ignores launch times (SO_TXTIME needs ETF or taprio in txtime-assist mode). Configure one, e.g. `tc qdisc replace dev {iface} root etf clockid CLOCK_TAI delta 200000` (a single-queue device, kernel with CONFIG_NET_SCH_ETF), or ETF under mqprio/taprio on the queue of the SV priority of a multi-queue NIC (`... parent ROOT:N etf clockid CLOCK_TAI delta 200000 offload` with launch-time hardware such as i210/i225), or publish without --txtime"
    )
}

/// taprio's txtime-assist mode: bit 0x1 of its `flags` (a number, or a
/// hex string as `tc -j` prints it), or a `txtime_delay` option.
fn txtime_assist(options: &Value) -> bool {
    let flags = match &options["flags"] {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(0),
        _ => 0,
    };
    flags & 1 == 1 || options.get("txtime_delay").is_some()
}

/// Give the socket launch times on CLOCK_TAI (`SO_TXTIME`).
pub fn enable(fd: RawFd) -> io::Result<()> {
    let cfg = libc::sock_txtime {
        clockid: libc::CLOCK_TAI,
        flags: 0,
    };
    // SAFETY: a valid sock_txtime of the size passed, on a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TXTIME,
            &cfg as *const libc::sock_txtime as *const libc::c_void,
            std::mem::size_of::<libc::sock_txtime>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Send `frames` in one `sendmmsg`, each with launch time `txtime_ns`
/// (CLOCK_TAI). Returns how many were sent.
pub fn send_batch_at(fd: RawFd, frames: &[&[u8]], txtime_ns: i64) -> io::Result<usize> {
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u64>() as u32) } as usize;
    let mut control = vec![0u8; space * frames.len()];
    let mut iovs: Vec<libc::iovec> = frames
        .iter()
        .map(|f| libc::iovec {
            iov_base: f.as_ptr() as *mut libc::c_void,
            iov_len: f.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = Vec::with_capacity(frames.len());
    for (i, iov) in iovs.iter_mut().enumerate() {
        // SAFETY: an all-zero mmsghdr is valid; its pointers are set below.
        let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
        m.msg_hdr.msg_iov = iov as *mut libc::iovec;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = control[i * space..].as_mut_ptr() as *mut libc::c_void;
        m.msg_hdr.msg_controllen = space;
        // SAFETY: the control buffer holds `space` bytes for one cmsg
        // carrying a u64; CMSG_FIRSTHDR/CMSG_DATA stay inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_TXTIME;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u64>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u64, txtime_ns as u64);
        }
        msgs.push(m);
    }
    // SAFETY: every mmsghdr points at live iovecs and control buffers.
    let n = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), msgs.len() as u32, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_veth_without_launch_time_qdisc_is_refused_with_what_to_configure() {
        let q = serde_json::json!([{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]);
        let e = launch_time_qdisc("va", &q).unwrap_err().to_string();
        assert!(
            e.contains("egress qdisc of va is noqueue (handle 0:, root)"),
            "{e}"
        );
        assert!(
            e.contains("tc qdisc replace dev va root etf clockid CLOCK_TAI"),
            "{e}"
        );
        let q = serde_json::json!([
            {"kind":"htb","handle":"1:","root":true,"options":{}},
            {"kind":"pfifo_fast","handle":"0:","parent":"1:1","options":{}}
        ]);
        let e = launch_time_qdisc("eth0", &q).unwrap_err().to_string();
        assert!(
            e.contains("htb (handle 1:, root), pfifo_fast (handle 0:, parent 1:1)"),
            "{e}"
        );
    }

    #[test]
    fn etf_and_txtime_assist_taprio_are_accepted() {
        let q = serde_json::json!([
            {"kind":"mqprio","handle":"100:","root":true,"options":{}},
            {"kind":"etf","handle":"8001:","parent":"100:1","options":{"clockid":"TAI"}}
        ]);
        assert_eq!(
            launch_time_qdisc("eth0", &q).unwrap(),
            "etf (handle 8001:, parent 100:1)"
        );
        let taprio = |flags: Value| serde_json::json!([{"kind":"taprio","handle":"100:","root":true,"options":{"flags":flags}}]);
        assert!(launch_time_qdisc("e", &taprio(serde_json::json!("0x1"))).is_ok());
        assert!(launch_time_qdisc("e", &taprio(serde_json::json!(1))).is_ok());
        // Full offload (0x2) is not txtime-assist: no launch times per frame.
        assert!(launch_time_qdisc("e", &taprio(serde_json::json!("0x2"))).is_err());
    }
}
