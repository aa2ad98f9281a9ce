//! Kernel packet timestamps (`SO_TIMESTAMPING`) and the other control
//! messages a packet socket receives with a frame.
//!
//! With `SO_TIMESTAMPING` set to `SOF_TIMESTAMPING_RX_SOFTWARE |
//! SOF_TIMESTAMPING_SOFTWARE` (what [`crate::PacketSocket::enable_rx_software_stamps`]
//! does) every received frame comes with an `SCM_TIMESTAMPING` control
//! message: three `timespec`s, `[0]` the software stamp (CLOCK_REALTIME,
//! taken in `__netif_receive_skb` / `netif_rx` when the skb enters the
//! stack), `[2]` the raw hardware stamp (PHC time, when the driver stamps
//! and `SOF_TIMESTAMPING_RAW_HARDWARE` was asked). A TX stamp read from the
//! socket's error queue also carries a `SOL_PACKET/PACKET_TX_TIMESTAMP`
//! message whose `sock_extended_err.ee_data` is the `OPT_ID` number of the
//! sent frame. With `PACKET_AUXDATA` on, a `SOL_PACKET/PACKET_AUXDATA`
//! message gives the VLAN tag the kernel or the NIC stripped.
//!
//! [`parse_cmsgs`] and [`vlan_from_cmsgs`] walk the control messages of one
//! `msghdr` filled by `recvmsg`/`recvmmsg`.

use hoptrace_kernel_abi::c_struct_at_start;

/// `SO_TIMESTAMPING` flags (`linux/net_tstamp.h`).
pub const SOF_TIMESTAMPING_TX_HARDWARE: u32 = 1 << 0;
pub const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
pub const SOF_TIMESTAMPING_RX_HARDWARE: u32 = 1 << 2;
pub const SOF_TIMESTAMPING_RX_SOFTWARE: u32 = 1 << 3;
pub const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
pub const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;
pub const SOF_TIMESTAMPING_OPT_ID: u32 = 1 << 7;
pub const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;

/// `SO_TIMESTAMPING` with 32-bit-time-compatible `timespec`s (and its
/// `SCM_` message type).
pub const SO_TIMESTAMPING_OLD: i32 = 37;
/// `SO_TIMESTAMPING` with 64-bit `__kernel_timespec`s.
pub const SO_TIMESTAMPING_NEW: i32 = 65;
const PACKET_TX_TIMESTAMP: i32 = 16;
const PACKET_AUXDATA: i32 = 8;
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// Size of a control buffer large enough for the messages read here.
pub const CONTROL_LEN: usize = 256;

/// The stamps found in one message's control data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamps {
    /// Software stamp, ns since the epoch (CLOCK_REALTIME).
    pub software: Option<i64>,
    /// Raw hardware stamp, ns in the PHC's time scale.
    pub hardware: Option<i64>,
    /// `OPT_ID` key of a TX stamp (error queue only).
    pub tx_id: Option<u32>,
}

/// An 802.1Q/802.1ad tag the kernel took off a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTci {
    /// 0x8100 or 0x88A8 (0x8100 when the kernel did not say).
    pub tpid: u16,
    /// Priority (3 bits), drop eligible (1 bit), VLAN id (12 bits).
    pub tci: u16,
}

impl VlanTci {
    /// `frame` with this tag put back after its MAC addresses, into `out`
    /// (cleared first): the frame as it was on the wire.
    pub fn restore_into(&self, frame: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let split = frame.len().min(12);
        out.extend_from_slice(&frame[..split]);
        out.extend_from_slice(&self.tpid.to_be_bytes());
        out.extend_from_slice(&self.tci.to_be_bytes());
        out.extend_from_slice(&frame[split..]);
    }
}

fn timespec_ns(ts: &libc::timespec) -> Option<i64> {
    if ts.tv_sec == 0 && ts.tv_nsec == 0 {
        None
    } else {
        Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec)
    }
}

/// Call `each(level, type, payload)` for every control message of `msg`.
///
/// # Safety
/// `msg` must describe a control buffer filled by the kernel.
unsafe fn for_each_cmsg(msg: &libc::msghdr, mut each: impl FnMut(i32, i32, &[u8])) {
    let mut cmsg = libc::CMSG_FIRSTHDR(msg);
    while !cmsg.is_null() {
        let hdr = &*cmsg;
        let data = libc::CMSG_DATA(cmsg);
        // The payload runs from CMSG_DATA to the end of the message
        // (cmsg_len counts from the header), inside the control buffer.
        let len = (hdr.cmsg_len as usize).saturating_sub(data as usize - cmsg as usize);
        each(
            hdr.cmsg_level,
            hdr.cmsg_type,
            std::slice::from_raw_parts(data, len),
        );
        cmsg = libc::CMSG_NXTHDR(msg, cmsg);
    }
}

/// Walk the control messages of `msg` and collect timestamps.
///
/// # Safety
/// `msg` must describe a control buffer filled by the kernel (`recvmsg`).
pub unsafe fn parse_cmsgs(msg: &libc::msghdr) -> Stamps {
    let mut out = Stamps::default();
    for_each_cmsg(msg, |level, kind, data| {
        if level == libc::SOL_SOCKET && (kind == SO_TIMESTAMPING_OLD || kind == SO_TIMESTAMPING_NEW)
        {
            if let Some(ts) = c_struct_at_start::<[libc::timespec; 3]>(data) {
                out.software = timespec_ns(&ts[0]);
                out.hardware = timespec_ns(&ts[2]);
            }
        } else if level == libc::SOL_PACKET && kind == PACKET_TX_TIMESTAMP {
            if let Some(ee) = c_struct_at_start::<libc::sock_extended_err>(data) {
                if ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING {
                    out.tx_id = Some(ee.ee_data);
                }
            }
        }
    });
    out
}

/// The VLAN tag the kernel stripped from the frame of `msg`, from its
/// `PACKET_AUXDATA` message.
///
/// # Safety
/// `msg` must describe a control buffer filled by the kernel (`recvmsg`).
pub unsafe fn vlan_from_cmsgs(msg: &libc::msghdr) -> Option<VlanTci> {
    let mut out = None;
    for_each_cmsg(msg, |level, kind, data| {
        if level != libc::SOL_PACKET || kind != PACKET_AUXDATA {
            return;
        }
        let Some(aux) = c_struct_at_start::<libc::tpacket_auxdata>(data) else {
            return;
        };
        if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
            let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                aux.tp_vlan_tpid
            } else {
                0x8100
            };
            out = Some(VlanTci {
                tpid,
                tci: aux.tp_vlan_tci,
            });
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control buffer holding one message, as the kernel lays it out.
    fn one_cmsg<T: Copy>(level: i32, kind: i32, value: T) -> (Vec<u64>, libc::msghdr) {
        let mut buf = vec![0u64; CONTROL_LEN / 8];
        // SAFETY: msghdr is plain data; all-zero is an empty message.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = buf.as_mut_ptr().cast();
        msg.msg_controllen = CONTROL_LEN;
        // SAFETY: the buffer is CONTROL_LEN bytes, larger than one cmsg of T.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = level;
            (*c).cmsg_type = kind;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<T>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut T, value);
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<T>() as u32) as _;
        }
        (buf, msg)
    }

    #[test]
    fn a_software_stamp_is_read_from_the_first_timespec() {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let sw = libc::timespec {
            tv_sec: 1_700_000_000,
            tv_nsec: 42,
        };
        let (_buf, msg) = one_cmsg(libc::SOL_SOCKET, SO_TIMESTAMPING_OLD, [sw, zero, zero]);
        // SAFETY: `msg` describes the control buffer built above.
        let stamps = unsafe { parse_cmsgs(&msg) };
        assert_eq!(stamps.software, Some(1_700_000_000_000_000_042));
        assert_eq!(stamps.hardware, None);
        // SAFETY: as above.
        assert_eq!(unsafe { vlan_from_cmsgs(&msg) }, None);
    }

    #[test]
    fn a_stripped_vlan_tag_is_read_from_the_aux_data() {
        let aux = libc::tpacket_auxdata {
            tp_status: TP_STATUS_VLAN_VALID,
            tp_len: 60,
            tp_snaplen: 60,
            tp_mac: 0,
            tp_net: 14,
            tp_vlan_tci: (4 << 13) | 100,
            tp_vlan_tpid: 0,
        };
        let (_buf, msg) = one_cmsg(libc::SOL_PACKET, PACKET_AUXDATA, aux);
        // SAFETY: `msg` describes the control buffer built above.
        let vlan = unsafe { vlan_from_cmsgs(&msg) };
        assert_eq!(
            vlan,
            Some(VlanTci {
                tpid: 0x8100,
                tci: (4 << 13) | 100
            })
        );
        // SAFETY: as above.
        let stamps = unsafe { parse_cmsgs(&msg) };
        assert_eq!(stamps, Stamps::default());
    }
}
