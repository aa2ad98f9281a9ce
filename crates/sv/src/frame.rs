//! Frame model shared by the decoder (borrowed) and the encoder (owned).
//!
//! [`SvFrame`] borrows every variable-size field from the captured buffer
//! (zero copy) and keeps the ASDUs in a fixed array of 8 (noASDU is 1..=8),
//! so decoding allocates nothing. [`OwnedSvFrame`] is the same content with
//! owned fields: it is what the encoder takes and what
//! [`SvFrame::to_owned_frame`] returns, so `decode(encode(x)) == x` is checked
//! by comparing owned frames.

use std::fmt;

use crate::error::VlanTagError;
use crate::spec::{SV_DEFAULT_VLAN_PRIORITY, VLAN_ID_MAX};

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// `01:0C:CD:04:00:00` plus `index` in the two last bytes (the 9-2 SV
    /// multicast range is 01:0C:CD:04:00:00 to 01:0C:CD:04:01:FF).
    pub fn sv_multicast(index: u16) -> MacAddr {
        MacAddr([0x01, 0x0C, 0xCD, 0x04, (index >> 8) as u8, index as u8])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = [0u8; 6];
        let parts: Vec<&str> = s.split([':', '-']).collect();
        if parts.len() != 6 {
            return Err(format!(
                "MAC address `{s}`: expected 6 hex bytes like 01:0c:cd:04:00:01"
            ));
        }
        for (o, p) in out.iter_mut().zip(parts) {
            *o = u8::from_str_radix(p, 16)
                .map_err(|_| format!("MAC address `{s}`: `{p}` is not a hex byte"))?;
        }
        Ok(MacAddr(out))
    }
}

/// TPID of a customer VLAN tag (802.1Q).
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of a service VLAN tag (802.1ad, QinQ outer tag).
pub const TPID_8021AD: u16 = 0x88A8;
/// Ethertype of IEC 61850-9-2 Sampled Values.
pub const ETHERTYPE_SV: u16 = 0x88BA;

/// One VLAN tag as on the wire.
///
/// Text form (the `--vlan` flags and the `vlan` key of configuration files,
/// parsed by `str::parse::<VlanTag>()`, written by `Display`): `ID[:PRIORITY]`,
/// decimal, e.g. `100` or `100:4`. It gives a customer (0x8100) tag.
/// - `ID` is 0..=4094 ([`crate::VLAN_ID_MAX`]). 0 means *priority-tagged*: the
///   frame carries a priority but belongs to no VLAN. 4095 is reserved by
///   IEEE 802.1Q and refused.
/// - `PRIORITY` (PCP) is 0..=7; without it, 4
///   ([`crate::SV_DEFAULT_VLAN_PRIORITY`], customary for SV).
///
/// A decoded tag keeps whatever id was on the wire (4095 included): the
/// bound applies to tags hoptrace is asked to write.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct VlanTag {
    /// 0x8100 or 0x88A8.
    pub tpid: u16,
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id (12 bits; see the text form for the ids accepted on input).
    pub vid: u16,
}

impl std::str::FromStr for VlanTag {
    type Err = VlanTagError;

    /// Parse the text form `ID[:PRIORITY]` (see [`VlanTag`]).
    fn from_str(text: &str) -> Result<VlanTag, VlanTagError> {
        let (id, priority) = match text.split_once(':') {
            Some((id, p)) => (id, Some(p)),
            None => (text, None),
        };
        let number = |s: &str| -> Result<u32, VlanTagError> {
            if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(VlanTagError::Syntax {
                    text: text.to_string(),
                });
            }
            Ok(s.parse().expect("1 to 9 decimal digits fit a u32"))
        };
        let vid = number(id)?;
        let pcp = match priority {
            Some(p) => number(p)?,
            None => SV_DEFAULT_VLAN_PRIORITY as u32,
        };
        if vid == 4095 {
            return Err(VlanTagError::ReservedId {
                text: text.to_string(),
            });
        }
        if vid > VLAN_ID_MAX as u32 {
            return Err(VlanTagError::IdOutOfRange {
                text: text.to_string(),
                vid,
            });
        }
        if pcp > 7 {
            return Err(VlanTagError::PriorityOutOfRange {
                text: text.to_string(),
                pcp,
            });
        }
        Ok(VlanTag::dot1q(vid as u16, pcp as u8))
    }
}

impl fmt::Display for VlanTag {
    /// `ID:PRIORITY`, preceded by the TPID for a tag other than 0x8100.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tpid != TPID_8021Q {
            write!(f, "0x{:04X}/", self.tpid)?;
        }
        write!(f, "{}:{}", self.vid, self.pcp)
    }
}

impl VlanTag {
    /// A customer (0x8100) tag with the given id and priority.
    pub fn dot1q(vid: u16, pcp: u8) -> VlanTag {
        VlanTag {
            tpid: TPID_8021Q,
            pcp: pcp & 7,
            dei: false,
            vid: vid & 0x0FFF,
        }
    }
    pub(crate) fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0FFF)
    }
    pub(crate) fn from_tci(tpid: u16, tci: u16) -> VlanTag {
        VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }
}

/// One ASDU (one sample of one stream), borrowing from the frame buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Asdu<'a> {
    /// svID (VisibleString; bytes as on the wire, not checked for ASCII).
    pub sv_id: &'a [u8],
    pub dat_set: Option<&'a [u8]>,
    pub smp_cnt: u16,
    pub conf_rev: u32,
    /// refrTm: 8-byte UtcTime (4 s, 3 fraction, 1 quality) as on the wire.
    pub refr_tm: Option<[u8; 8]>,
    pub smp_synch: u8,
    pub smp_rate: Option<u16>,
    /// seqData bytes; 64 bytes for 9-2LE (see [`Asdu::le_values`]).
    pub seq_data: &'a [u8],
    pub smp_mod: Option<u16>,
    /// Offset of the ASDU tag (0x30) in the frame.
    pub offset: usize,
}

/// One 9-2LE measurement: INT32 value and 32-bit quality.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Measurement {
    pub value: i32,
    pub quality: u32,
}

/// Size of 9-2LE seqData: 8 x (INT32 + quality).
pub const LE_SEQ_DATA_LEN: usize = 64;

impl<'a> Asdu<'a> {
    /// The 8 9-2LE measurements (Ia Ib Ic In Va Vb Vc Vn) when seqData is
    /// 64 bytes, `None` for other seqData sizes (use `seq_data` raw bytes).
    pub fn le_values(&self) -> Option<[Measurement; 8]> {
        if self.seq_data.len() != LE_SEQ_DATA_LEN {
            return None;
        }
        let mut out = [Measurement::default(); 8];
        for (i, m) in out.iter_mut().enumerate() {
            let b = &self.seq_data[i * 8..i * 8 + 8];
            m.value = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            m.quality = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        }
        Some(out)
    }

    /// svID as text (lossy for non-UTF-8 bytes; identity uses the bytes).
    pub fn sv_id_lossy(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.sv_id)
    }

    pub fn to_owned_asdu(&self) -> OwnedAsdu {
        OwnedAsdu {
            sv_id: self.sv_id.to_vec(),
            dat_set: self.dat_set.map(|d| d.to_vec()),
            smp_cnt: self.smp_cnt,
            conf_rev: self.conf_rev,
            refr_tm: self.refr_tm,
            smp_synch: self.smp_synch,
            smp_rate: self.smp_rate,
            seq_data: self.seq_data.to_vec(),
            smp_mod: self.smp_mod,
        }
    }
}

/// Where one decoded ASDU's fields sit in the APDU: 16-bit offsets and
/// lengths relative to the APPID field (the APDU Length is a u16, so every
/// offset inside it fits) instead of slices. The eight slots of a frame
/// then take 8 x 28 bytes, and a decoded [`SvFrame`] stays small enough to
/// build and return cheaply. [`AsduList`] turns a slot back into an
/// [`Asdu`] view on demand (a few loads, no parsing).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct AsduSlot {
    pub(crate) offset: u16,
    pub(crate) sv_id: Span,
    /// `dat_set.len == u16::MAX` means absent (no value that long fits).
    pub(crate) dat_set: Span,
    pub(crate) seq_data: Span,
    /// Offset of the 8 refrTm bytes, 0 when absent (never 0 when present:
    /// the 8-byte SV header comes first).
    pub(crate) refr_tm_at: u16,
    pub(crate) conf_rev: u32,
    pub(crate) smp_cnt: u16,
    pub(crate) smp_rate: u16,
    pub(crate) smp_mod: u16,
    /// [`AsduSlot::HAS_SMP_RATE`] | [`AsduSlot::HAS_SMP_MOD`].
    pub(crate) flags: u8,
    pub(crate) smp_synch: u8,
}

/// A byte range of the APDU (relative to the APPID field).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Span {
    pub(crate) at: u16,
    pub(crate) len: u16,
}

impl Span {
    pub(crate) const ABSENT: Span = Span {
        at: 0,
        len: u16::MAX,
    };
    fn slice<'a>(&self, apdu: &'a [u8]) -> &'a [u8] {
        let at = self.at as usize;
        apdu.get(at..at + self.len as usize).unwrap_or(&[])
    }
    fn opt_slice<'a>(&self, apdu: &'a [u8]) -> Option<&'a [u8]> {
        (self.len != u16::MAX).then(|| self.slice(apdu))
    }
}

impl AsduSlot {
    pub(crate) const HAS_SMP_RATE: u8 = 1;
    pub(crate) const HAS_SMP_MOD: u8 = 2;

    fn view<'a>(&self, apdu: &'a [u8], apdu_at: usize) -> Asdu<'a> {
        let refr_tm = if self.refr_tm_at == 0 {
            None
        } else {
            Span {
                at: self.refr_tm_at,
                len: 8,
            }
            .slice(apdu)
            .try_into()
            .ok()
        };
        Asdu {
            sv_id: self.sv_id.slice(apdu),
            dat_set: self.dat_set.opt_slice(apdu),
            smp_cnt: self.smp_cnt,
            conf_rev: self.conf_rev,
            refr_tm,
            smp_synch: self.smp_synch,
            smp_rate: (self.flags & Self::HAS_SMP_RATE != 0).then_some(self.smp_rate),
            seq_data: self.seq_data.slice(apdu),
            smp_mod: (self.flags & Self::HAS_SMP_MOD != 0).then_some(self.smp_mod),
            offset: apdu_at + self.offset as usize,
        }
    }
}

/// The ASDUs of a decoded frame (1..=8), in wire order. Cheap to copy;
/// iterate it (`for a in frame.asdus()`) or pick one with [`AsduList::get`].
#[derive(Clone, Copy)]
pub struct AsduList<'f, 'a> {
    apdu: &'a [u8],
    apdu_at: usize,
    slots: &'f [AsduSlot],
}

impl<'f, 'a> AsduList<'f, 'a> {
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<Asdu<'a>> {
        self.slots.get(i).map(|s| s.view(self.apdu, self.apdu_at))
    }
    pub fn first(&self) -> Option<Asdu<'a>> {
        self.get(0)
    }
    pub fn last(&self) -> Option<Asdu<'a>> {
        self.slots.last().map(|s| s.view(self.apdu, self.apdu_at))
    }
    pub fn iter(&self) -> AsduIter<'f, 'a> {
        AsduIter {
            apdu: self.apdu,
            apdu_at: self.apdu_at,
            slots: self.slots.iter(),
        }
    }
}

impl<'f, 'a> IntoIterator for AsduList<'f, 'a> {
    type Item = Asdu<'a>;
    type IntoIter = AsduIter<'f, 'a>;
    fn into_iter(self) -> AsduIter<'f, 'a> {
        self.iter()
    }
}

/// Iterator over the [`Asdu`] views of a frame.
#[derive(Clone)]
pub struct AsduIter<'f, 'a> {
    apdu: &'a [u8],
    apdu_at: usize,
    slots: std::slice::Iter<'f, AsduSlot>,
}

impl<'a> Iterator for AsduIter<'_, 'a> {
    type Item = Asdu<'a>;
    fn next(&mut self) -> Option<Asdu<'a>> {
        self.slots.next().map(|s| s.view(self.apdu, self.apdu_at))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl ExactSizeIterator for AsduIter<'_, '_> {}
impl DoubleEndedIterator for AsduIter<'_, '_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.slots
            .next_back()
            .map(|s| s.view(self.apdu, self.apdu_at))
    }
}

impl fmt::Debug for AsduList<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A decoded SV frame, borrowing from the captured bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SvFrame<'a> {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// VLAN tags, outermost first; `vlan_count` of them are valid.
    pub vlans: [Option<VlanTag>; 2],
    pub appid: u16,
    /// The APDU Length field (APPID .. end of savPdu = 8 + savPdu TLV size).
    pub length: u16,
    /// Reserved1 as on the wire (bit 15 = simulation).
    pub reserved1: u16,
    pub reserved2: u16,
    /// security (0x81) bytes, if present.
    pub security: Option<&'a [u8]>,
    /// The APDU (APPID to the end of the savPdu): the ASDU slots point into it.
    pub(crate) apdu: &'a [u8],
    /// Offset of the APDU in the frame (14, 18 or 22).
    pub(crate) apdu_at: u8,
    pub(crate) slots: [AsduSlot; 8],
    pub(crate) no_asdu: u8,
    /// Bytes after the APDU (Ethernet padding), kept for byte-exact re-encoding.
    pub trailer: &'a [u8],
}

impl<'a> SvFrame<'a> {
    /// The ASDUs in wire order (1..=8 of them).
    pub fn asdus(&self) -> AsduList<'_, 'a> {
        AsduList {
            apdu: self.apdu,
            apdu_at: self.apdu_at as usize,
            slots: &self.slots[..self.no_asdu as usize],
        }
    }
    /// ASDU `i` (0-based), if the frame has it.
    pub fn asdu(&self, i: usize) -> Option<Asdu<'a>> {
        self.asdus().get(i)
    }
    pub fn no_asdu(&self) -> u8 {
        self.no_asdu
    }
    /// Reserved1 bit 15.
    pub fn simulation(&self) -> bool {
        self.reserved1 & 0x8000 != 0
    }
    pub fn vlan_tags(&self) -> impl Iterator<Item = VlanTag> + '_ {
        self.vlans.iter().flatten().copied()
    }
    /// Stream identity of ASDU `i` (dst MAC, APPID, svID).
    pub fn stream_id(&self, asdu: &Asdu<'_>) -> crate::StreamId {
        crate::StreamId::new(self.dst, self.appid, asdu.sv_id)
    }
    pub fn to_owned_frame(&self) -> OwnedSvFrame {
        OwnedSvFrame {
            dst: self.dst,
            src: self.src,
            vlans: self.vlan_tags().collect(),
            appid: self.appid,
            reserved1: self.reserved1,
            reserved2: self.reserved2,
            security: self.security.map(|s| s.to_vec()),
            asdus: self.asdus().iter().map(|a| a.to_owned_asdu()).collect(),
            trailer: self.trailer.to_vec(),
        }
    }
}

/// Owned ASDU content (encoder input).
#[derive(Clone, PartialEq, Eq, Debug, Default, Hash)]
pub struct OwnedAsdu {
    pub sv_id: Vec<u8>,
    pub dat_set: Option<Vec<u8>>,
    pub smp_cnt: u16,
    pub conf_rev: u32,
    pub refr_tm: Option<[u8; 8]>,
    pub smp_synch: u8,
    pub smp_rate: Option<u16>,
    pub seq_data: Vec<u8>,
    pub smp_mod: Option<u16>,
}

impl OwnedAsdu {
    /// Sets seqData to the 9-2LE layout of 8 measurements.
    pub fn set_le_values(&mut self, values: &[Measurement; 8]) {
        self.seq_data.clear();
        for m in values {
            self.seq_data.extend_from_slice(&m.value.to_be_bytes());
            self.seq_data.extend_from_slice(&m.quality.to_be_bytes());
        }
    }
}

/// Owned frame content (encoder input). The APDU Length is computed.
#[derive(Clone, PartialEq, Eq, Debug, Default, Hash)]
pub struct OwnedSvFrame {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// 0, 1 or 2 tags, outermost first.
    pub vlans: Vec<VlanTag>,
    pub appid: u16,
    pub reserved1: u16,
    pub reserved2: u16,
    pub security: Option<Vec<u8>>,
    /// 1..=8 ASDUs.
    pub asdus: Vec<OwnedAsdu>,
    /// Bytes appended after the APDU (padding); normally empty.
    pub trailer: Vec<u8>,
}

#[cfg(test)]
mod vlan_text_tests {
    use super::*;

    fn parse(s: &str) -> Result<VlanTag, VlanTagError> {
        s.parse()
    }

    #[test]
    fn vlan_id_4094_is_the_highest_accepted() {
        let t = parse("4094").unwrap();
        assert_eq!((t.tpid, t.vid, t.pcp, t.dei), (TPID_8021Q, 4094, 4, false));
        assert_eq!(parse("4094:7").unwrap().pcp, 7);
    }

    #[test]
    fn vlan_id_4095_is_refused_as_reserved_with_what_to_use_instead() {
        let e = parse("4095").unwrap_err();
        assert_eq!(
            e,
            VlanTagError::ReservedId {
                text: "4095".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "VLAN tag `4095`: VLAN id 4095 is reserved by IEEE 802.1Q; use 1..4094, or 0 for a priority-tagged frame (no VLAN)"
        );
        assert!(matches!(
            parse("4095:4"),
            Err(VlanTagError::ReservedId { .. })
        ));
    }

    #[test]
    fn vlan_id_0_is_a_priority_tagged_frame() {
        let t = parse("0:5").unwrap();
        assert_eq!((t.vid, t.pcp), (0, 5));
    }

    #[test]
    fn ids_above_4095_and_priorities_above_7_are_out_of_range() {
        assert!(matches!(
            parse("4096"),
            Err(VlanTagError::IdOutOfRange { vid: 4096, .. })
        ));
        assert!(matches!(
            parse("5000:1"),
            Err(VlanTagError::IdOutOfRange { vid: 5000, .. })
        ));
        let e = parse("100:8").unwrap_err();
        assert!(matches!(e, VlanTagError::PriorityOutOfRange { pcp: 8, .. }));
        assert!(e.to_string().contains("use 0..7"), "{e}");
    }

    #[test]
    fn anything_but_decimal_id_and_priority_is_refused_with_the_text_form() {
        for bad in [
            "",
            ":",
            "100:",
            ":4",
            "x",
            "-1",
            "+5",
            "0x64",
            "100:4:1",
            " 100",
            "99999999999",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                matches!(e, VlanTagError::Syntax { .. }),
                "{bad:?} gave {e:?}"
            );
            assert!(e.to_string().contains("ID[:PRIORITY]"), "{e}");
        }
    }

    #[test]
    fn the_written_form_parses_back_to_the_same_tag() {
        for s in ["0:0", "1:4", "100:4", "4094:7"] {
            let t = parse(s).unwrap();
            assert_eq!(t.to_string(), s);
            assert_eq!(parse(&t.to_string()).unwrap(), t);
        }
        assert_eq!(parse("100").unwrap().to_string(), "100:4");
    }
}
