//! The XDP program of `--xdp` and its attachment: an endpoint's frames
//! into its AF_XDP socket ([`crate::xsk`]), everything else to the stack.
//!
//! Mechanism: `src/bpf/xsk_steer.bpf.c` (compiled CO-RE by clang through
//! libbpf-cargo in build.rs, as the lab's XDP program) is opened, its
//! EtherType to steer written into .rodata (0x88BA for SV, the ping
//! EtherType for ping/reflect), loaded, the socket's descriptor put into its
//! XSKMAP at the socket's queue, and the program attached to the interface
//! through a **BPF link** (`bpf_link_create`, not the netlink attach the lab
//! uses): the link is a file descriptor of this process, so the kernel
//! detaches the program when the process exits, also after SIGKILL. The
//! kernel attaches natively when the driver has XDP (veth, most NICs) and
//! in generic (skb) mode otherwise; [`XdpEndpoint::describe`] says which.
//!
//! Nothing falls back silently: a missing interface, missing privileges, an
//! interface that already has an XDP program or a driver that refuses is an
//! error that says what is wrong and what to do (run without `--xdp` to use
//! AF_PACKET).

use std::mem::MaybeUninit;
use std::os::fd::AsFd;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, Xdp, XdpFlags};

use crate::xsk::Xsk;

hoptrace_kernel_abi::bpf_skeleton!("xsk_steer.skel.rs");
use skel::XskSteerSkelBuilder;

/// An AF_XDP socket fed by the steering program attached to its interface.
pub struct XdpEndpoint {
    /// Dropping the link detaches the program (declared first: dropped
    /// before the socket).
    _link: libbpf_rs::Link,
    pub xsk: Xsk,
    pub prog_id: u32,
    /// `native` (driver) or `generic (skb)`.
    pub attach_mode: &'static str,
    pub iface: String,
}

/// Why an XDP step failed, said with what to do.
fn hint(e: &libbpf_rs::Error) -> &'static str {
    let s = e.to_string();
    if s.contains("Operation not permitted") || s.contains("Permission denied") {
        "run as root (CAP_BPF, CAP_NET_ADMIN, CAP_NET_RAW), or run without --xdp to use AF_PACKET"
    } else if s.contains("busy") || s.contains("exists") {
        "another XDP program is attached to the interface (see `ip link show` / `bpftool net`): detach it, or run without --xdp"
    } else {
        "the driver or kernel refused it: run without --xdp to use AF_PACKET, or see `dmesg`"
    }
}

impl XdpEndpoint {
    /// Open the socket on `iface` and attach the program steering frames of
    /// `ethertype` (after at most one VLAN tag) to it.
    pub fn open(iface: &str, ethertype: u16) -> Result<XdpEndpoint> {
        let xsk = Xsk::open(iface)?;
        if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
            libbpf_rs::set_print(None);
        }
        let mut storage = MaybeUninit::uninit();
        let mut open = XskSteerSkelBuilder::default()
            .open(&mut storage)
            .context("--xdp: opening the XDP program")?;
        open.maps
            .rodata_data
            .as_mut()
            .context("--xdp: the XDP program has no .rodata to configure")?
            .ht_ethertype = ethertype;
        let skel = open.load().map_err(|e| {
            anyhow::anyhow!("--xdp: loading the XDP program failed ({e}): {}", hint(&e))
        })?;
        let fd = xsk.raw_fd() as u32;
        skel.maps
            .ht_xsks
            .update(&xsk.queue.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .context("--xdp: putting the AF_XDP socket into the XSKMAP")?;
        let link = skel
            .progs
            .ht_xsk_steer
            .attach_xdp(xsk.ifindex as i32)
            .map_err(|e| {
                anyhow::anyhow!(
                    "--xdp: attaching the XDP program to {iface} failed ({e}): {}",
                    hint(&e)
                )
            })?;
        let prog_id = libbpf_rs::Program::id_from_fd(skel.progs.ht_xsk_steer.as_fd())?;
        let attach_mode = match Xdp::new(skel.progs.ht_xsk_steer.as_fd())
            .query(xsk.ifindex as i32, XdpFlags::NONE)
            .map(|q| q.attach_mode)
        {
            Ok(1) => "native",
            Ok(2) => "generic (skb)",
            Ok(3) => "offloaded",
            _ => "unknown",
        };
        Ok(XdpEndpoint {
            _link: link,
            xsk,
            prog_id,
            attach_mode,
            iface: iface.to_string(),
        })
    }

    /// One line: program, attach mode, socket mode and queue (and, on an
    /// interface with several RX queues, that frames arriving on the others
    /// are not read).
    pub fn describe(&self) -> String {
        let queues = rx_queues(&self.iface);
        let others = if queues > 1 {
            format!(
                "; {iface} has {queues} RX queues and only queue 0 is read: steer the frames to it (`ethtool -L {iface} combined 1` or an ntuple rule), the others' go to the stack",
                iface = self.iface
            )
        } else {
            String::new()
        };
        format!(
            "AF_XDP on {} queue {} ({}), fed by XDP program ht_xsk_steer (id {}, {} attach, BPF link: detached when this process exits){others}",
            self.iface, self.xsk.queue, self.xsk.mode, self.prog_id, self.attach_mode
        )
    }
}

/// Number of RX queues of `iface` (`/sys/class/net/IF/queues/rx-*`; 1 when
/// unreadable).
fn rx_queues(iface: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1)
        .max(1)
}
