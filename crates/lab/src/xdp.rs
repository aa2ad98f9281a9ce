//! The `xdp` topology: the hypervisor switches frames with an XDP redirect.
//!
//! Mechanism (program in `src/bpf/xdp_redirect.bpf.c`, compiled CO-RE by
//! clang through libbpf-cargo in build.rs, loaded with libbpf-rs):
//!
//! ```text
//! pub:eth0 == hyp:in0 [XDP ht_lab_redir: bpf_redirect_map(devmap{0: out0})]
//!          -> out0 == vm0:eth0 [XDP ht_lab_pass: XDP_PASS] -> consumer stack -> AF_PACKET
//! ```
//!
//! A frame redirected into a veth (`ndo_xdp_xmit`) is accepted by the peer
//! only when the peer runs an XDP program (or has NAPI enabled), so the
//! consumer's `eth0` gets `ht_lab_pass`, which passes every frame on to the
//! stack: the subscriber reads `eth0` with AF_PACKET as in every other
//! topology. A tap read by a user-space consumer would not do here: XDP
//! redirect from a veth into a tap is not supported natively, which is why
//! the consumer side is a veth (the frames skip the tap-reader hop of the
//! bridge/ovs topologies: this is the kernel fast path being compared).
//!
//! Both programs are attached in native (driver) mode with the netlink API
//! (`bpf_xdp_attach`), not as BPF links: they stay attached after `hoptrace
//! lab up` exits, like the lab's namespaces. Their kernel ids and the id of
//! the counters map (one per-CPU `struct xdp_lab_counters`, defined in
//! `src/bpf/xdp_redirect_abi.h` and read as the skeleton's generated type)
//! are saved in the lab state, which is how `lab status`
//! reads the counters (redirected, dropped, delivered) and how teardown
//! detaches them (`ip link set dev IF xdpdrv off` in the namespace) and then
//! checks that the kernel freed them. After a `kill -9`, the programs are
//! still attached to the lab's veths; `lab down NAME` detaches them the same
//! way, and deleting the namespaces would free them anyway (a program
//! attached to a device is released when the device is destroyed).

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, Xdp, XdpFlags};

use hoptrace_netns::Netns;

use crate::state::{LabState, XdpAttachment};

hoptrace_kernel_abi::bpf_skeleton!("xdp_redirect.skel.rs");
use skel::types::xdp_lab_counters;
use skel::XdpRedirectSkelBuilder;

hoptrace_kernel_abi::kernel_pod!(skel::types, xdp_abi_anchor; xdp_lab_counters);

/// Counters of the lab's XDP programs (sums over CPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Frames `ht_lab_redir` redirected from in0 towards out0.
    pub redirected: u64,
    /// Frames it dropped because the devmap had no device.
    pub dropped: u64,
    /// Frames `ht_lab_pass` saw arrive on the consumer's eth0.
    pub delivered: u64,
}

impl std::fmt::Display for XdpCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "XDP redirected {} (in0 -> out0), dropped {} (no target), delivered {} (vm0:eth0)",
            self.redirected, self.dropped, self.delivered
        )
    }
}

fn ifindex(name: &str) -> Result<i32> {
    Ok(hoptrace_os::interface_index(name)? as i32)
}

fn attach_in(ns: &Netns, iface: &str, prog: OwnedFd) -> Result<()> {
    let iface = iface.to_string();
    let ns_name = ns.name().to_string();
    ns.run_in(move || -> Result<()> {
        let idx = ifindex(&iface)?;
        Xdp::new(prog.as_fd())
            .attach(idx, XdpFlags::DRV_MODE | XdpFlags::UPDATE_IF_NOEXIST)
            .with_context(|| {
                format!("attaching XDP (native mode) to {iface} in {ns_name}: is another XDP program there?")
            })
    })?
}

/// Load the programs, fill the devmap with hyp:out0 and attach them (the
/// consumer's pass program first, so no redirected frame finds it missing).
/// Every attachment is saved in `st` as soon as it exists.
pub fn attach(st: &mut LabState, hyp: &Netns, vm: &Netns) -> Result<()> {
    if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let mut storage = std::mem::MaybeUninit::uninit();
    let open = XdpRedirectSkelBuilder::default()
        .open(&mut storage)
        .context("opening the lab's XDP object")?;
    let skel = open
        .load()
        .context("loading the lab's XDP programs (root and a kernel with BTF are needed)")?;
    let devmap_id = skel.maps.ht_lab_out.info()?.info.id;
    st.xdp_stats_map = Some(skel.maps.ht_lab_stats.info()?.info.id);

    // The devmap resolves ifindex in the namespace of the updating thread.
    hyp.run_in(move || -> Result<()> {
        let out0 = ifindex("out0")? as u32;
        MapHandle::from_map_id(devmap_id)?
            .update(&0u32.to_ne_bytes(), &out0.to_ne_bytes(), MapFlags::ANY)
            .context("putting out0 into the XDP devmap")
    })??;

    for (role, ns, iface, prog) in [
        ("vm0", vm, "eth0", &skel.progs.ht_lab_pass),
        ("hyp", hyp, "in0", &skel.progs.ht_lab_redir),
    ] {
        let fd = prog.as_fd().try_clone_to_owned()?;
        let prog_id = libbpf_rs::Program::id_from_fd(prog.as_fd())?;
        attach_in(ns, iface, fd)?;
        st.xdp.push(XdpAttachment {
            role: role.into(),
            iface: iface.into(),
            prog_id,
            prog_name: prog.name().to_string_lossy().into_owned(),
        });
        st.save()?;
    }
    Ok(())
}

/// Read the counters of a lab's XDP programs (None for other topologies).
pub fn counters(st: &LabState) -> Result<Option<XdpCounters>> {
    let Some(id) = st.xdp_stats_map else {
        return Ok(None);
    };
    let map = MapHandle::from_map_id(id).with_context(|| {
        format!(
            "opening the XDP counters map (id {id}) of lab {}: was it detached?",
            st.name
        )
    })?;
    let per_cpu = map
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .unwrap_or_default();
    let mut sum = XdpCounters::default();
    for bytes in per_cpu {
        // The value is copied into the generated type after an exact
        // length check; fields named without `..`, so one added in C does
        // not compile until it is counted here.
        let xdp_lab_counters {
            redirected,
            dropped,
            delivered,
        } = hoptrace_kernel_abi::from_bytes(&bytes).ok_or_else(|| {
            anyhow::anyhow!(
                "the XDP counters map of lab {} holds {}-byte values, expected {}: was the lab set up by another hoptrace version? (`hoptrace lab down {}` and up again)",
                st.name,
                bytes.len(),
                std::mem::size_of::<xdp_lab_counters>(),
                st.name
            )
        })?;
        sum.redirected += redirected;
        sum.dropped += dropped;
        sum.delivered += delivered;
    }
    Ok(Some(sum))
}

/// Whether the kernel still has a program with this id.
pub fn prog_exists(id: u32) -> bool {
    libbpf_rs::Program::fd_from_id(id).is_ok()
}

/// Detach the lab's XDP programs from their interfaces (best effort).
pub fn detach(st: &LabState) {
    for a in &st.xdp {
        if let Ok(ns) = st.namespace(&a.role) {
            let _ = Netns::adopt(ns)
                .keep()
                .ip(&["link", "set", "dev", &a.iface, "xdpdrv", "off"]);
        }
    }
}

/// After teardown: wait (up to 3 s, the kernel frees programs after an RCU
/// grace period) until none of the lab's programs exists; error naming those left.
pub fn check_gone(st: &LabState) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left: Vec<String> = st
            .xdp
            .iter()
            .filter(|a| prog_exists(a.prog_id))
            .map(|a| format!("{} (id {})", a.prog_name, a.prog_id))
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "XDP programs of lab {} still loaded after teardown: {} (`bpftool prog show id N` shows who holds them)",
                st.name,
                left.join(", ")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
