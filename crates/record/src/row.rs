//! One packet's row: identity, status and one timestamp per hop.
//!
//! [`PacketRow`] is the owned form (what the reader's typed view yields);
//! [`PacketRowRef`] borrows its strings and slices so a producer can append
//! without allocating per row. [`recording_schema`] derives the Arrow schema
//! from the metadata: the fixed identity columns, then one nullable Int64
//! `t_<hop>` column per hop, then the declared extra Int64 columns.

use schemars::JsonSchema;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::meta::RecordingMeta;

/// What happened to the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PacketStatus {
    /// Seen at every hop it was expected at.
    #[default]
    Ok,
    /// Freed by the kernel (`drop_reason`, `drop_hop` say where and why).
    Dropped,
    /// Its timeline expired before it reached the last hop.
    Incomplete,
    /// The frame could not be decoded.
    Malformed,
}

impl PacketStatus {
    pub const ALL: [PacketStatus; 4] = [
        PacketStatus::Ok,
        PacketStatus::Dropped,
        PacketStatus::Incomplete,
        PacketStatus::Malformed,
    ];

    /// The string stored in the `status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            PacketStatus::Ok => "ok",
            PacketStatus::Dropped => "dropped",
            PacketStatus::Incomplete => "incomplete",
            PacketStatus::Malformed => "malformed",
        }
    }

    /// Parse the `status` column value.
    pub fn parse(s: &str) -> Option<Self> {
        PacketStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// `Ok` for a packet stamped at every hop it was expected at, else
    /// `Incomplete`.
    pub fn complete_if(every_hop_stamped: bool) -> Self {
        if every_hop_stamped {
            PacketStatus::Ok
        } else {
            PacketStatus::Incomplete
        }
    }
}

impl std::fmt::Display for PacketStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Owned packet row. `hops[i]` is the timestamp (ns, clock of `meta.hops[i]`)
/// at hop `i`, `None` when not seen there; `extra[i]` matches
/// `meta.extra_columns[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PacketRow {
    pub stream: String,
    pub dst_mac: Option<[u8; 6]>,
    pub app_id: Option<u16>,
    pub smp_cnt: Option<u16>,
    pub epoch: Option<u32>,
    pub seq: u64,
    pub dest: Option<String>,
    pub status: PacketStatus,
    pub drop_reason: Option<String>,
    pub drop_hop: Option<String>,
    pub hops: Vec<Option<i64>>,
    pub extra: Vec<Option<i64>>,
}

/// Which packet a row is, as reports and derived files name it: the row's
/// identity columns but the destination MAC.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, JsonSchema,
)]
pub struct PacketKey {
    /// The stream (svID or flow).
    pub stream: String,
    /// The SV APPID, null for other traffic.
    pub app_id: Option<u16>,
    /// The SV smpCnt, null for other traffic.
    pub smp_cnt: Option<u16>,
    /// How many times smpCnt wrapped before this sample, null for other traffic.
    pub epoch: Option<u32>,
    /// The packet's sequence number in its stream.
    pub seq: u64,
    /// The destination MAC address, null where the recording does not know it.
    pub dest: Option<String>,
}

impl PacketRow {
    /// The row's [`PacketKey`].
    pub fn key(&self) -> PacketKey {
        PacketKey {
            stream: self.stream.clone(),
            app_id: self.app_id,
            smp_cnt: self.smp_cnt,
            epoch: self.epoch,
            seq: self.seq,
            dest: self.dest.clone(),
        }
    }

    /// Borrowed view for [`crate::RecordingWriter::append_ref`].
    pub fn as_ref(&self) -> PacketRowRef<'_> {
        PacketRowRef {
            stream: &self.stream,
            dst_mac: self.dst_mac,
            app_id: self.app_id,
            smp_cnt: self.smp_cnt,
            epoch: self.epoch,
            seq: self.seq,
            dest: self.dest.as_deref(),
            status: self.status,
            drop_reason: self.drop_reason.as_deref(),
            drop_hop: self.drop_hop.as_deref(),
            hops: &self.hops,
            extra: &self.extra,
        }
    }

    /// Timestamp at hop `name` (hop name or `t_<name>` column), using `meta`
    /// to find its index. `None` if the hop is unknown or not seen.
    pub fn hop(&self, meta: &RecordingMeta, name: &str) -> Option<i64> {
        self.hops.get(meta.hop_index(name)?).copied().flatten()
    }

    /// Value of the extra column `column`.
    pub fn extra_value(&self, meta: &RecordingMeta, column: &str) -> Option<i64> {
        self.extra.get(meta.extra_index(column)?).copied().flatten()
    }
}

/// Borrowed packet row: appending it allocates nothing per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRowRef<'a> {
    pub stream: &'a str,
    pub dst_mac: Option<[u8; 6]>,
    pub app_id: Option<u16>,
    pub smp_cnt: Option<u16>,
    pub epoch: Option<u32>,
    pub seq: u64,
    pub dest: Option<&'a str>,
    pub status: PacketStatus,
    pub drop_reason: Option<&'a str>,
    pub drop_hop: Option<&'a str>,
    pub hops: &'a [Option<i64>],
    pub extra: &'a [Option<i64>],
}

impl<'a> PacketRowRef<'a> {
    /// The row of packet `seq` of `stream` with its hop and extra columns,
    /// and nothing else known: no SV identity, destination or drop (a
    /// struct update sets the fields a producer knows).
    pub fn new(
        stream: &'a str,
        seq: u64,
        status: PacketStatus,
        hops: &'a [Option<i64>],
        extra: &'a [Option<i64>],
    ) -> Self {
        PacketRowRef {
            stream,
            dst_mac: None,
            app_id: None,
            smp_cnt: None,
            epoch: None,
            seq,
            dest: None,
            status,
            drop_reason: None,
            drop_hop: None,
            hops,
            extra,
        }
    }
}

/// Fixed column names, in schema order (the hop and extra columns follow).
pub const FIXED_COLUMNS: [&str; 10] = [
    "stream",
    "dst_mac",
    "app_id",
    "smp_cnt",
    "epoch",
    "seq",
    "dest",
    "status",
    "drop_reason",
    "drop_hop",
];

/// Arrow schema of a recording with this metadata.
pub fn recording_schema(meta: &RecordingMeta) -> SchemaRef {
    let mut fields = vec![
        Field::new("stream", DataType::Utf8, false),
        Field::new("dst_mac", DataType::Utf8, true),
        Field::new("app_id", DataType::UInt16, true),
        Field::new("smp_cnt", DataType::UInt16, true),
        Field::new("epoch", DataType::UInt32, true),
        Field::new("seq", DataType::UInt64, false),
        Field::new("dest", DataType::Utf8, true),
        Field::new("status", DataType::Utf8, false),
        Field::new("drop_reason", DataType::Utf8, true),
        Field::new("drop_hop", DataType::Utf8, true),
    ];
    for h in &meta.hops {
        fields.push(Field::new(&h.column, DataType::Int64, true));
    }
    for c in &meta.extra_columns {
        fields.push(Field::new(&c.column, DataType::Int64, true));
    }
    Arc::new(Schema::new(fields))
}

/// `01:0c:cd:04:00:01` into a stack buffer.
pub(crate) fn format_mac(mac: &[u8; 6], out: &mut [u8; 17]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in mac.iter().enumerate() {
        out[i * 3] = HEX[(b >> 4) as usize];
        out[i * 3 + 1] = HEX[(b & 15) as usize];
        if i < 5 {
            out[i * 3 + 2] = b':';
        }
    }
}

/// Parse `01:0c:cd:04:00:01` (either case).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for o in out.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip() {
        let mac = [0x01, 0x0c, 0xcd, 0x04, 0x00, 0xff];
        let mut buf = [0u8; 17];
        format_mac(&mac, &mut buf);
        assert_eq!(std::str::from_utf8(&buf).unwrap(), "01:0c:cd:04:00:ff");
        assert_eq!(parse_mac("01:0C:CD:04:00:FF"), Some(mac));
        assert_eq!(parse_mac("01:0c:cd:04:00"), None);
        assert_eq!(parse_mac("01:0c:cd:04:00:ff:00"), None);
        assert_eq!(parse_mac("01:0c:cd:04:00:zz"), None);
    }

    #[test]
    fn status_strings() {
        for s in PacketStatus::ALL {
            assert_eq!(PacketStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(PacketStatus::parse("OK"), None);
    }
}
