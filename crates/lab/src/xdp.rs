//! The `xdp` topology (not built yet).
//!
//! Planned mechanism: an XDP program of hoptrace on the hypervisor's ingress
//! veth `in0` that `bpf_redirect_map()`s every frame into a devmap holding
//! `out0` (the veth towards the consumer), with an XDP pass program on the
//! peer so that veth accepts redirected frames. It needs a BPF object built
//! by libbpf-cargo in this crate's build.rs, which is not written yet: the
//! topology refuses to start with a clear error instead of pretending.

use anyhow::{bail, Result};
use hoptrace_netns::Netns;

use crate::state::{Daemon, LabState};

pub fn attach(_st: &LabState, _hyp: &Netns) -> Result<Vec<Daemon>> {
    bail!("the `xdp` topology is not implemented yet in this build of hoptrace (use veth, bridge, macvtap or ovs)")
}
