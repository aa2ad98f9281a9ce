//! The `vm` topology: a real QEMU guest behind bridge + tap (not built yet).
//!
//! Planned mechanism: a Debian kernel fetched with `apt-get download` and
//! unpacked with `dpkg -x` into /var/cache/hoptrace/guest (never installed on
//! the host), a busybox-static initramfs with the virtio modules and the
//! hoptrace binary, QEMU started in the hypervisor namespace on tap0
//! (`-netdev tap,ifname=tap0,script=no`), results brought back on the serial
//! console. Not written yet: the topology refuses with a clear error.

use anyhow::{bail, Result};
use hoptrace_netns::Netns;

use crate::lifecycle::Env;
use crate::state::LabState;

pub fn start(_st: &mut LabState, _hyp: &Netns, _env: &Env) -> Result<()> {
    bail!("the `vm` topology (QEMU guest) is not implemented yet in this build of hoptrace (use veth, bridge, macvtap or ovs)")
}
