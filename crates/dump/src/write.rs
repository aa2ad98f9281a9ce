//! Writing a dump: the header once, then one frame per record, tick,
//! facts update, and the end marker (layout: the crate comment).

use std::io::{self, Write};

use crate::{FrameKind, FORMAT_VERSION, MAGIC, MAX_FACTS, MAX_RECORD, MAX_TICK};

/// A dump being written into `W` (give it a `BufWriter`: every frame is
/// written as two or three small `write_all` calls, with no allocation).
#[derive(Debug)]
pub struct DumpWriter<W: Write> {
    w: W,
    records: u64,
    ticks: u64,
}

fn too_long(what: &str, len: usize, max: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} of {len} bytes is longer than a dump holds ({max})"),
    )
}

impl<W: Write> DumpWriter<W> {
    /// Start a dump: the header, with the ABI's record sizes and the
    /// session's `facts`.
    pub fn new(mut w: W, full_size: u32, compact_size: u32, facts: &[u8]) -> io::Result<Self> {
        let facts_len = u32::try_from(facts.len())
            .ok()
            .filter(|n| *n <= MAX_FACTS)
            .ok_or_else(|| too_long("the facts", facts.len(), MAX_FACTS))?;
        w.write_all(MAGIC)?;
        for v in [FORMAT_VERSION, full_size, compact_size, facts_len] {
            w.write_all(&v.to_le_bytes())?;
        }
        w.write_all(facts)?;
        Ok(DumpWriter {
            w,
            records: 0,
            ticks: 0,
        })
    }

    fn frame_header(&mut self, kind: FrameKind, len: usize, max: u32) -> io::Result<()> {
        let len = u32::try_from(len)
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| too_long("a frame", len, max))?;
        let l = len.to_le_bytes();
        self.w.write_all(&[kind as u8, l[0], l[1], l[2], l[3]])
    }

    /// One ring buffer record, as received.
    pub fn record(&mut self, data: &[u8]) -> io::Result<()> {
        self.frame_header(FrameKind::Record, data.len(), MAX_RECORD)?;
        self.w.write_all(data)?;
        self.records += 1;
        Ok(())
    }

    /// A tick: the clock reading the engine used, and the loss counters.
    pub fn tick(&mut self, now_ns: u64, counters: &[u64]) -> io::Result<()> {
        self.frame_header(FrameKind::Tick, 8 + 8 * counters.len(), MAX_TICK)?;
        self.w.write_all(&now_ns.to_le_bytes())?;
        for c in counters {
            self.w.write_all(&c.to_le_bytes())?;
        }
        self.ticks += 1;
        Ok(())
    }

    /// Facts that changed during the session.
    pub fn facts(&mut self, facts: &[u8]) -> io::Result<()> {
        self.frame_header(FrameKind::Facts, facts.len(), MAX_FACTS)?;
        self.w.write_all(facts)
    }

    /// The end marker with the closing facts; flushed; the writer back.
    pub fn finish(mut self, end: &[u8]) -> io::Result<W> {
        self.frame_header(FrameKind::End, end.len(), MAX_FACTS)?;
        self.w.write_all(end)?;
        self.w.flush()?;
        Ok(self.w)
    }

    /// Flush what is buffered (the dump stays open).
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Ticks written so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }
}
