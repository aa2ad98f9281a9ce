//! Typed row view: Arrow batch columns back into [`PacketRow`]s.
//!
//! Columns are looked up by name, so a batch from any good segment decodes
//! whatever column order a future writer uses; a missing or mistyped column
//! is a clear error, never a panic.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::error::{RecordError, Result};
use crate::meta::RecordingMeta;
use crate::row::{parse_mac, PacketRow, PacketStatus};

fn col<'a>(b: &'a RecordBatch, name: &str, ty: &DataType) -> Result<&'a ArrayRef> {
    let c = b.column_by_name(name).ok_or_else(|| RecordError::Column {
        path: Default::default(),
        column: name.to_string(),
        reason: "missing from the batch".into(),
    })?;
    if c.data_type() != ty {
        return Err(RecordError::Column {
            path: Default::default(),
            column: name.to_string(),
            reason: format!("type is {} but {ty} was expected", c.data_type()),
        });
    }
    Ok(c)
}

/// Decode a full (unprojected) batch into typed rows.
pub fn batch_to_rows(b: &RecordBatch, meta: &RecordingMeta) -> Result<Vec<PacketRow>> {
    let utf8 = DataType::Utf8;
    let stream = col(b, "stream", &utf8)?.as_string::<i32>();
    let dst_mac = col(b, "dst_mac", &utf8)?.as_string::<i32>();
    let app_id = col(b, "app_id", &DataType::UInt16)?.as_primitive::<UInt16Type>();
    let smp_cnt = col(b, "smp_cnt", &DataType::UInt16)?.as_primitive::<UInt16Type>();
    let epoch = col(b, "epoch", &DataType::UInt32)?.as_primitive::<UInt32Type>();
    let seq = col(b, "seq", &DataType::UInt64)?.as_primitive::<UInt64Type>();
    let dest = col(b, "dest", &utf8)?.as_string::<i32>();
    let status = col(b, "status", &utf8)?.as_string::<i32>();
    let drop_reason = col(b, "drop_reason", &utf8)?.as_string::<i32>();
    let drop_hop = col(b, "drop_hop", &utf8)?.as_string::<i32>();
    let hops = meta
        .hops
        .iter()
        .map(|h| Ok(col(b, &h.column, &DataType::Int64)?.as_primitive::<Int64Type>()))
        .collect::<Result<Vec<_>>>()?;
    let extra = meta
        .extra_columns
        .iter()
        .map(|c| Ok(col(b, &c.column, &DataType::Int64)?.as_primitive::<Int64Type>()))
        .collect::<Result<Vec<_>>>()?;
    let opt_str =
        |a: &arrow_array::StringArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_string());
    let mut out = Vec::with_capacity(b.num_rows());
    for i in 0..b.num_rows() {
        let mac = if dst_mac.is_null(i) {
            None
        } else {
            Some(
                parse_mac(dst_mac.value(i)).ok_or_else(|| RecordError::Column {
                    path: Default::default(),
                    column: "dst_mac".into(),
                    reason: format!("{:?} is not a MAC address", dst_mac.value(i)),
                })?,
            )
        };
        let st = PacketStatus::parse(status.value(i)).ok_or_else(|| RecordError::Column {
            path: Default::default(),
            column: "status".into(),
            reason: format!("unknown status {:?}", status.value(i)),
        })?;
        out.push(PacketRow {
            stream: stream.value(i).to_string(),
            dst_mac: mac,
            app_id: (!app_id.is_null(i)).then(|| app_id.value(i)),
            smp_cnt: (!smp_cnt.is_null(i)).then(|| smp_cnt.value(i)),
            epoch: (!epoch.is_null(i)).then(|| epoch.value(i)),
            seq: seq.value(i),
            dest: opt_str(dest, i),
            status: st,
            drop_reason: opt_str(drop_reason, i),
            drop_hop: opt_str(drop_hop, i),
            hops: hops
                .iter()
                .map(|a| (!a.is_null(i)).then(|| a.value(i)))
                .collect(),
            extra: extra
                .iter()
                .map(|a| (!a.is_null(i)).then(|| a.value(i)))
                .collect(),
        });
    }
    Ok(out)
}
