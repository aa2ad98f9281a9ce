//! In-memory row buffer: Arrow builders for one row group.
//!
//! Rows are appended column by column into Arrow builders (amortized, no
//! per-row allocation). When the buffer holds a row group's worth of rows
//! (or bytes), the writer turns it into a `RecordBatch` and hands it to the
//! Parquet writer, which encodes it and writes it to the file at once. The
//! buffer keeps its own accounting (`rows`, `approx_bytes`) so the memory
//! bound can be asserted without looking at RSS.

use arrow_array::builder::{
    Int64Builder, StringBuilder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use std::sync::Arc;

use crate::error::{RecordError, Result};
use crate::row::{format_mac, PacketRowRef};

/// Fixed bytes per row besides strings and hop/extra values (ints + validity).
const FIXED_ROW_BYTES: usize = 2 + 2 + 4 + 8 + 17 + 4;

pub(crate) struct RowBuffer {
    schema: SchemaRef,
    stream: StringBuilder,
    dst_mac: StringBuilder,
    app_id: UInt16Builder,
    smp_cnt: UInt16Builder,
    epoch: UInt32Builder,
    seq: UInt64Builder,
    dest: StringBuilder,
    status: StringBuilder,
    drop_reason: StringBuilder,
    drop_hop: StringBuilder,
    hops: Vec<Int64Builder>,
    extra: Vec<Int64Builder>,
    rows: usize,
    approx_bytes: usize,
}

impl RowBuffer {
    pub(crate) fn new(schema: SchemaRef, n_hops: usize, n_extra: usize, capacity: usize) -> Self {
        let s = || StringBuilder::with_capacity(capacity, capacity * 8);
        RowBuffer {
            schema,
            stream: s(),
            dst_mac: StringBuilder::with_capacity(capacity, capacity * 17),
            app_id: UInt16Builder::with_capacity(capacity),
            smp_cnt: UInt16Builder::with_capacity(capacity),
            epoch: UInt32Builder::with_capacity(capacity),
            seq: UInt64Builder::with_capacity(capacity),
            dest: StringBuilder::new(),
            status: s(),
            drop_reason: StringBuilder::new(),
            drop_hop: StringBuilder::new(),
            hops: (0..n_hops)
                .map(|_| Int64Builder::with_capacity(capacity))
                .collect(),
            extra: (0..n_extra)
                .map(|_| Int64Builder::with_capacity(capacity))
                .collect(),
            rows: 0,
            approx_bytes: 0,
        }
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn approx_bytes(&self) -> usize {
        self.approx_bytes
    }

    pub(crate) fn push(&mut self, row: &PacketRowRef<'_>) -> Result<()> {
        if row.hops.len() != self.hops.len() {
            return Err(RecordError::RowShape {
                what: "hop",
                expected: self.hops.len(),
                found: row.hops.len(),
            });
        }
        if row.extra.len() != self.extra.len() {
            return Err(RecordError::RowShape {
                what: "extra column",
                expected: self.extra.len(),
                found: row.extra.len(),
            });
        }
        self.stream.append_value(row.stream);
        match &row.dst_mac {
            Some(mac) => {
                let mut buf = [0u8; 17];
                format_mac(mac, &mut buf);
                // format_mac writes ASCII only.
                self.dst_mac
                    .append_value(std::str::from_utf8(&buf).unwrap_or_default());
            }
            None => self.dst_mac.append_null(),
        }
        self.app_id.append_option(row.app_id);
        self.smp_cnt.append_option(row.smp_cnt);
        self.epoch.append_option(row.epoch);
        self.seq.append_value(row.seq);
        self.dest.append_option(row.dest);
        self.status.append_value(row.status.as_str());
        self.drop_reason.append_option(row.drop_reason);
        self.drop_hop.append_option(row.drop_hop);
        for (b, v) in self.hops.iter_mut().zip(row.hops) {
            b.append_option(*v);
        }
        for (b, v) in self.extra.iter_mut().zip(row.extra) {
            b.append_option(*v);
        }
        self.rows += 1;
        self.approx_bytes += FIXED_ROW_BYTES
            + row.stream.len()
            + row.status.as_str().len()
            + row.dest.map_or(0, str::len)
            + row.drop_reason.map_or(0, str::len)
            + row.drop_hop.map_or(0, str::len)
            + 9 * (row.hops.len() + row.extra.len());
        Ok(())
    }

    /// Take the buffered rows as a batch and reset the buffer.
    pub(crate) fn take_batch(&mut self) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.stream.finish()),
            Arc::new(self.dst_mac.finish()),
            Arc::new(self.app_id.finish()),
            Arc::new(self.smp_cnt.finish()),
            Arc::new(self.epoch.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.dest.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.drop_reason.finish()),
            Arc::new(self.drop_hop.finish()),
        ];
        for b in self.hops.iter_mut().chain(self.extra.iter_mut()) {
            cols.push(Arc::new(b.finish()));
        }
        self.rows = 0;
        self.approx_bytes = 0;
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }
}
