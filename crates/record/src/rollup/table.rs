//! The rollup table: one Arrow/Parquet row per [`RollupPiece`].
//!
//! A stage piece fills the latency columns (`stage` set, the packet
//! columns null); a stream's packet piece has `stage` null and fills the
//! packet columns (the latency columns null). `count` is the values of a
//! stage piece and the rows of a packet piece. Sums are `DECIMAL(38, 0)`
//! (exact integers: pandas gives `decimal.Decimal`, DuckDB `HUGEINT`-backed
//! decimals), histograms are `BINARY` in the HdrHistogram V2 + DEFLATE
//! encoding. docs/recording-schema.md lists the columns.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Decimal128Builder, Int64Builder, StringBuilder, UInt16Builder, UInt32Builder,
    UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int64Type, UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::{RecordError, Result};
use crate::rollup::accumulate::{RollupBody, RollupPiece};
use crate::rollup::model::{
    decode_histogram, encode_histogram, Extreme, LatencyRollup, PacketCounts,
};

/// Every column, in order, with its type and nullability.
fn columns() -> Vec<Field> {
    let dec = DataType::Decimal128(38, 0);
    let f = |name: &str, t: DataType, null: bool| Field::new(name, t, null);
    vec![
        f("interval_start_ns", DataType::Int64, false),
        f("interval_ns", DataType::Int64, false),
        f("clock", DataType::Utf8, false),
        f("stream", DataType::Utf8, false),
        f("stage", DataType::Utf8, true),
        f("segment_first", DataType::UInt64, false),
        f("segment_last", DataType::UInt64, false),
        f("count", DataType::UInt64, false),
        f("missing", DataType::UInt64, true),
        f("negative", DataType::UInt64, true),
        f("min_ns", DataType::Int64, true),
        f("min_seq", DataType::UInt64, true),
        f("min_smp_cnt", DataType::UInt16, true),
        f("min_epoch", DataType::UInt32, true),
        f("min_time_ns", DataType::Int64, true),
        f("max_ns", DataType::Int64, true),
        f("max_seq", DataType::UInt64, true),
        f("max_smp_cnt", DataType::UInt16, true),
        f("max_epoch", DataType::UInt32, true),
        f("max_time_ns", DataType::Int64, true),
        f("sum_ns", dec.clone(), true),
        f("sum_sq_ns2", dec, true),
        f("hist", DataType::Binary, true),
        f("neg_hist", DataType::Binary, true),
        f("status_ok", DataType::UInt64, true),
        f("status_dropped", DataType::UInt64, true),
        f("status_incomplete", DataType::UInt64, true),
        f("status_malformed", DataType::UInt64, true),
        f("unique", DataType::UInt64, true),
        f("duplicated", DataType::UInt64, true),
        f("reordered", DataType::UInt64, true),
        f("lost", DataType::Int64, true),
        f("first_seq", DataType::UInt64, true),
        f("last_seq", DataType::UInt64, true),
    ]
}

/// The Arrow schema of the rollup table.
pub fn rollup_schema() -> SchemaRef {
    Arc::new(Schema::new(columns()))
}

/// Builders of the extreme columns (value, seq, smpCnt, epoch, time).
struct ExtremeCols {
    value: Int64Builder,
    seq: UInt64Builder,
    smp: UInt16Builder,
    epoch: UInt32Builder,
    time: Int64Builder,
}

impl ExtremeCols {
    fn new(n: usize) -> Self {
        ExtremeCols {
            value: Int64Builder::with_capacity(n),
            seq: UInt64Builder::with_capacity(n),
            smp: UInt16Builder::with_capacity(n),
            epoch: UInt32Builder::with_capacity(n),
            time: Int64Builder::with_capacity(n),
        }
    }

    fn push(&mut self, e: Option<&Extreme>) {
        self.value.append_option(e.map(|e| e.value_ns));
        self.seq.append_option(e.map(|e| e.seq));
        self.smp.append_option(e.and_then(|e| e.smp_cnt));
        self.epoch.append_option(e.and_then(|e| e.epoch));
        self.time.append_option(e.map(|e| e.time_ns));
    }

    fn finish(&mut self, out: &mut Vec<ArrayRef>) {
        out.push(Arc::new(self.value.finish()));
        out.push(Arc::new(self.seq.finish()));
        out.push(Arc::new(self.smp.finish()));
        out.push(Arc::new(self.epoch.finish()));
        out.push(Arc::new(self.time.finish()));
    }
}

/// Bytes of the encoded histograms of a batch of the rollup table, plus
/// 256 per row for the other columns: about what the rows take in a file.
pub fn approx_encoded_bytes(batch: &RecordBatch) -> usize {
    let hist = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_binary_opt::<i32>())
            .map_or(0, |b| b.value_data().len())
    };
    hist("hist") + hist("neg_hist") + 256 * batch.num_rows()
}

/// The pieces as one batch of the rollup table.
pub fn pieces_to_batch(pieces: &[RollupPiece]) -> Result<RecordBatch> {
    let n = pieces.len();
    let dec = || Decimal128Builder::with_capacity(n).with_precision_and_scale(38, 0);
    let int = || Int64Builder::with_capacity(n);
    let uint = || UInt64Builder::with_capacity(n);
    let text = || StringBuilder::with_capacity(n, n * 8);
    let bin = || BinaryBuilder::with_capacity(n, n * 256);
    let (mut start, mut len) = (int(), int());
    let (mut clock, mut stream, mut stage) = (text(), text(), text());
    let (mut seg_a, mut seg_b, mut count) = (uint(), uint(), uint());
    let (mut missing, mut negative) = (uint(), uint());
    let (mut min, mut max) = (ExtremeCols::new(n), ExtremeCols::new(n));
    let (mut sum, mut sum_sq) = (dec()?, dec()?);
    let (mut hist, mut neg_hist) = (bin(), bin());
    let mut status: [UInt64Builder; 4] = std::array::from_fn(|_| uint());
    let (mut unique, mut dup, mut reord) = (uint(), uint(), uint());
    let (mut lost, mut first, mut last) = (int(), uint(), uint());
    for p in pieces {
        start.append_value(p.interval_start_ns);
        len.append_value(p.interval_ns);
        clock.append_value(&p.clock);
        stream.append_value(&p.stream);
        stage.append_option(p.stage.as_deref());
        seg_a.append_value(p.segment_first);
        seg_b.append_value(p.segment_last);
        let (lat, pk) = match &p.body {
            RollupBody::Latency(l) => (Some(l), None),
            RollupBody::Packets(c) => (None, Some(c)),
        };
        count.append_value(lat.map_or(0, |l| l.count) + pk.map_or(0, |c| c.rows));
        missing.append_option(lat.map(|l| l.missing));
        negative.append_option(lat.map(|l| l.negative));
        min.push(lat.and_then(|l| l.min.as_ref()));
        max.push(lat.and_then(|l| l.max.as_ref()));
        sum.append_option(lat.map(|l| l.sum_ns));
        sum_sq.append_option(lat.map(|l| l.sum_sq_ns2));
        hist.append_option(lat.map(|l| encode_histogram(&l.hist)));
        neg_hist.append_option(
            lat.filter(|l| l.negative > 0)
                .map(|l| encode_histogram(&l.neg_hist)),
        );
        for (b, i) in status.iter_mut().zip(0..) {
            b.append_option(pk.map(|c| c.status[i]));
        }
        unique.append_option(pk.map(|c| c.unique));
        dup.append_option(pk.map(|c| c.duplicated));
        reord.append_option(pk.map(|c| c.reordered));
        lost.append_option(pk.map(|c| c.lost));
        first.append_option(pk.and_then(|c| c.first_seq));
        last.append_option(pk.and_then(|c| c.last_seq));
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(start.finish()),
        Arc::new(len.finish()),
        Arc::new(clock.finish()),
        Arc::new(stream.finish()),
        Arc::new(stage.finish()),
        Arc::new(seg_a.finish()),
        Arc::new(seg_b.finish()),
        Arc::new(count.finish()),
        Arc::new(missing.finish()),
        Arc::new(negative.finish()),
    ];
    min.finish(&mut cols);
    max.finish(&mut cols);
    cols.push(Arc::new(sum.finish()));
    cols.push(Arc::new(sum_sq.finish()));
    cols.push(Arc::new(hist.finish()));
    cols.push(Arc::new(neg_hist.finish()));
    for b in &mut status {
        cols.push(Arc::new(b.finish()));
    }
    for b in [&mut unique, &mut dup, &mut reord] {
        cols.push(Arc::new(b.finish()));
    }
    cols.push(Arc::new(lost.finish()));
    cols.push(Arc::new(first.finish()));
    cols.push(Arc::new(last.finish()));
    Ok(RecordBatch::try_new(rollup_schema(), cols)?)
}

/// Typed access to a batch of the rollup table by column name.
struct Cols<'a>(&'a RecordBatch);

impl<'a> Cols<'a> {
    fn col(&self, name: &str) -> Result<&'a ArrayRef> {
        self.0
            .column_by_name(name)
            .ok_or_else(|| RecordError::Invalid(format!("rollup table: no column {name:?}")))
    }

    fn typed<T: arrow_array::ArrowPrimitiveType>(
        &self,
        name: &str,
    ) -> Result<&'a arrow_array::PrimitiveArray<T>> {
        self.col(name)?.as_primitive_opt::<T>().ok_or_else(|| {
            RecordError::Invalid(format!(
                "rollup table: column {name:?} has type {}",
                self.col(name)
                    .map(|c| c.data_type().to_string())
                    .unwrap_or_default()
            ))
        })
    }

    fn opt<T: arrow_array::ArrowPrimitiveType>(
        &self,
        name: &str,
        row: usize,
    ) -> Result<Option<T::Native>> {
        let a = self.typed::<T>(name)?;
        Ok((!a.is_null(row)).then(|| a.value(row)))
    }

    fn req<T: arrow_array::ArrowPrimitiveType>(&self, name: &str, row: usize) -> Result<T::Native> {
        self.opt::<T>(name, row)?.ok_or_else(|| {
            RecordError::Invalid(format!("rollup table: null {name:?} in row {row}"))
        })
    }

    fn string(&self, name: &str, row: usize) -> Result<Option<String>> {
        let a = self.col(name)?;
        let s = a.as_string_opt::<i32>().ok_or_else(|| {
            RecordError::Invalid(format!("rollup table: column {name:?} is not a string"))
        })?;
        Ok((!s.is_null(row)).then(|| s.value(row).to_string()))
    }

    fn hist(&self, name: &str, row: usize) -> Result<Option<hdrhistogram::Histogram<u64>>> {
        let a = self.col(name)?;
        let b = a.as_binary_opt::<i32>().ok_or_else(|| {
            RecordError::Invalid(format!("rollup table: column {name:?} is not binary"))
        })?;
        if b.is_null(row) {
            return Ok(None);
        }
        decode_histogram(b.value(row))
            .map(Some)
            .map_err(|e| RecordError::Invalid(format!("rollup table: {name} of row {row}: {e}")))
    }

    fn extreme(&self, prefix: &str, row: usize) -> Result<Option<Extreme>> {
        let Some(value_ns) = self.opt::<Int64Type>(&format!("{prefix}_ns"), row)? else {
            return Ok(None);
        };
        Ok(Some(Extreme {
            value_ns,
            seq: self.req::<UInt64Type>(&format!("{prefix}_seq"), row)?,
            smp_cnt: self.opt::<UInt16Type>(&format!("{prefix}_smp_cnt"), row)?,
            epoch: self.opt::<UInt32Type>(&format!("{prefix}_epoch"), row)?,
            time_ns: self.req::<Int64Type>(&format!("{prefix}_time_ns"), row)?,
        }))
    }
}

/// The pieces of one batch of the rollup table (histograms decoded).
pub fn batch_to_pieces(batch: &RecordBatch) -> Result<Vec<RollupPiece>> {
    let c = Cols(batch);
    let mut out = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let stage = c.string("stage", row)?;
        let u = |name: &str| c.req::<UInt64Type>(name, row);
        let body = if stage.is_some() {
            RollupBody::Latency(LatencyRollup {
                count: u("count")?,
                min: c.extreme("min", row)?,
                max: c.extreme("max", row)?,
                sum_ns: c.req::<Decimal128Type>("sum_ns", row)?,
                sum_sq_ns2: c.req::<Decimal128Type>("sum_sq_ns2", row)?,
                negative: u("negative")?,
                missing: u("missing")?,
                hist: c
                    .hist("hist", row)?
                    .unwrap_or_else(crate::rollup::model::new_histogram),
                neg_hist: c
                    .hist("neg_hist", row)?
                    .unwrap_or_else(crate::rollup::model::new_histogram),
            })
        } else {
            RollupBody::Packets(PacketCounts {
                rows: u("count")?,
                status: [
                    u("status_ok")?,
                    u("status_dropped")?,
                    u("status_incomplete")?,
                    u("status_malformed")?,
                ],
                unique: u("unique")?,
                duplicated: u("duplicated")?,
                reordered: u("reordered")?,
                lost: c.req::<Int64Type>("lost", row)?,
                first_seq: c.opt::<UInt64Type>("first_seq", row)?,
                last_seq: c.opt::<UInt64Type>("last_seq", row)?,
            })
        };
        out.push(RollupPiece {
            interval_start_ns: c.req::<Int64Type>("interval_start_ns", row)?,
            interval_ns: c.req::<Int64Type>("interval_ns", row)?,
            clock: c.string("clock", row)?.unwrap_or_default(),
            stream: c.string("stream", row)?.unwrap_or_default(),
            stage,
            segment_first: u("segment_first")?,
            segment_last: u("segment_last")?,
            body,
        });
    }
    Ok(out)
}
