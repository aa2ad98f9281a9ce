//! Rollups that outlive the raw rows: per interval (default 1 min), per
//! stream and stage, what `hoptrace report` needs to give exact count,
//! min, max and mean and HDR percentiles once retention has deleted the
//! raw segments.
//!
//! How it fits together:
//! - [`model`]: the mergeable rollup of one (interval, stream, stage)
//!   ([`LatencyRollup`]: count, exact min and max with their packet, exact
//!   sums, HdrHistograms) and of one (interval, stream)'s packets
//!   ([`PacketCounts`]: statuses, duplicates, reorders, losses);
//! - [`accumulate`]: the writer feeds every row it appends into a
//!   [`RollupAccumulator`], which keeps the open pieces and hands over the
//!   closed ones ([`RollupPiece`]) when a raw segment closes, and all of
//!   them on close;
//! - [`table`]: the Parquet/Arrow table of pieces;
//! - [`store`]: the files `REC/rollups/rollup-NNNNNN.parquet`, written
//!   crash-safe, outside `--retain`/`--max-disk`, with their own age
//!   limit (`--rollup-retain`, 400 days by default), and read back
//!   ([`read_piece_keys`], [`for_each_piece`]);
//! - [`mod@coarsen`]: final files hold pieces of an hour
//!   ([`DEFAULT_COARSE_INTERVAL`]), merged exactly from the fine ones:
//!   a week of rollups stays within tens of MB.
//!
//! [`RollupSink`] is what [`crate::RecordingWriter`] holds: accumulator
//! and store together. A killed recorder loses the rollups of the pieces
//! not yet written: those of the intervals that had not ended 5 s
//! ([`CLOSE_GRACE_NS`]) before the newest row when the last raw segment
//! closed, i.e. at most the open interval, the grace and one segment's
//! age (1 min 10 s with the defaults); their rows are in the closed raw
//! segments as long as retention keeps those.

pub mod accumulate;
pub mod coarsen;
pub mod model;
pub mod store;
pub mod table;

use std::path::Path;
use std::time::Duration;

pub use accumulate::{
    rollup_stages, RollupAccumulator, RollupBody, RollupPiece, RollupStage, CLOSE_GRACE_NS,
    SEQ_WINDOW,
};
pub use coarsen::{coarse_interval_ns, coarsen, DEFAULT_COARSE_INTERVAL};
pub use model::{
    decode_histogram, encode_histogram, exact_mean, interval_start, new_histogram, Extreme,
    LatencyRollup, PacketCounts,
};
pub use store::{
    for_each_piece, prune_rollups, read_piece_keys, rollup_file_name, rollup_files, PieceKey,
    RollupFileMeta, RollupStore, UnreadableRollup, DEFAULT_INTERVAL, DEFAULT_ROLLUP_RETAIN,
    ROLLUP_DIR, ROLLUP_META_KEY, ROLLUP_SCHEMA_VERSION,
};
pub use table::{batch_to_pieces, pieces_to_batch, rollup_schema};

use crate::error::Result;
use crate::meta::RecordingMeta;
use crate::retention::Pruned;

/// The writer's rollups: the accumulator of the open pieces and the store
/// of the closed ones.
pub struct RollupSink {
    acc: RollupAccumulator,
    store: RollupStore,
    pruned: Pruned,
}

impl RollupSink {
    /// Rollups of the recording in `dir` with `meta`, every `interval`.
    pub fn new(dir: &Path, meta: &RecordingMeta, interval: Duration) -> Result<Self> {
        let interval_ns = interval.as_nanos().clamp(1, i64::MAX as u128) as i64;
        Ok(RollupSink {
            acc: RollupAccumulator::new(meta, interval_ns),
            store: RollupStore::open(
                dir,
                RollupFileMeta::of(meta, interval_ns),
                DEFAULT_ROLLUP_RETAIN,
            )?,
            pruned: Pruned::default(),
        })
    }

    /// `--rollup-retain`.
    pub fn set_retain(&mut self, retain: Duration) {
        self.store.set_retain(retain);
    }

    /// The length of the pieces of final rollup files
    /// ([`RollupStore::set_coarse_interval`]); returns the one used (ns).
    pub fn set_coarse_interval(&mut self, coarse: Option<Duration>) -> Option<i64> {
        self.store.set_coarse_interval(coarse)
    }

    /// Account for one row written to raw segment `segment`.
    #[inline]
    pub fn observe(&mut self, row: &crate::row::PacketRowRef<'_>, segment: u64) {
        self.acc.observe(row, segment);
    }

    /// A raw segment closed: write the pieces of the intervals that ended.
    pub fn segment_closed(&mut self) -> Result<()> {
        let pieces = self.acc.take_closed();
        self.pruned += self.store.write(&pieces)?;
        Ok(())
    }

    /// The recording closes: write every piece.
    pub fn close(&mut self) -> Result<()> {
        let pieces = self.acc.take_all();
        self.pruned += self.store.write(&pieces)?;
        Ok(())
    }

    /// What the rollup retention deleted so far.
    pub fn pruned(&self) -> Pruned {
        self.pruned
    }
}
