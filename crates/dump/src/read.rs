//! Reading a dump held in memory, as untrusted bytes: every length is
//! checked against what is left and against the limits before it is used,
//! so garbage gives an error naming the byte where it starts, never a
//! panic or a large allocation (frames borrow from the input).

use crate::{FrameKind, FORMAT_VERSION, FRAME_HEADER, HEADER_FIXED, MAGIC, MAX_FACTS, MAX_RECORD};

/// Why a dump cannot be read (further).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    #[error("not a hoptrace event dump: it does not start with {:?} (written by `hoptrace trace --dump-events`)", String::from_utf8_lossy(MAGIC))]
    Foreign,
    #[error("event dump format version {0}: this hoptrace reads version {FORMAT_VERSION}")]
    Version(u32),
    #[error("the event dump ends inside its header ({len} bytes, the header needs {need})")]
    ShortHeader { len: usize, need: usize },
    #[error("the event dump's header is damaged: {0}")]
    BadHeader(String),
    /// (A cut inside a frame's 5-byte header hides the frame's length:
    /// `need` is then the header's, and `cut` what is missing of it.)
    #[error("the event dump is cut: the frame at byte {offset} needs {need} bytes, only {present} are there ({cut} bytes cut); every frame before it was read")]
    Cut {
        offset: usize,
        need: usize,
        present: usize,
        cut: usize,
    },
    #[error("the event dump ends at byte {offset} without its end marker (the tracer stopped before closing it); every frame before it was read")]
    NoEnd { offset: usize },
    #[error("the event dump is damaged at byte {offset}: unknown frame kind {kind}")]
    UnknownFrame { offset: usize, kind: u8 },
    #[error("the event dump is damaged at byte {offset}: a {kind:?} frame of {len} bytes (at most {max})")]
    TooLong {
        offset: usize,
        kind: FrameKind,
        len: u32,
        max: u32,
    },
    #[error("the event dump is damaged at byte {offset}: a tick of {len} bytes (8 for the clock, then 8 per counter)")]
    BadTick { offset: usize, len: u32 },
    #[error("the event dump has {bytes} bytes after its end marker (at byte {offset})")]
    AfterEnd { offset: usize, bytes: usize },
}

impl DumpError {
    /// Bytes missing from a dump cut inside a frame (0 for every other error).
    pub fn cut_bytes(&self) -> usize {
        match self {
            DumpError::Cut { cut, .. } => *cut,
            _ => 0,
        }
    }

    /// The dump was cut short (inside a frame or between two): what came
    /// before the cut is good.
    pub fn is_cut(&self) -> bool {
        matches!(self, DumpError::Cut { .. } | DumpError::NoEnd { .. })
    }
}

/// The dump's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub version: u32,
    /// Size of a full and of a compact ring record when it was written.
    pub full_size: u32,
    pub compact_size: u32,
    /// The session's facts (the writer's encoding).
    pub facts: &'a [u8],
}

/// A tick marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick<'a> {
    pub now_ns: u64,
    counters: &'a [u8],
}

impl Tick<'_> {
    /// The loss counters, in the order written.
    pub fn counters(&self) -> impl Iterator<Item = u64> + '_ {
        self.counters.chunks_exact(8).map(u64_at)
    }
}

/// One frame, borrowed from the dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    Record(&'a [u8]),
    Tick(Tick<'a>),
    Facts(&'a [u8]),
    End(&'a [u8]),
}

/// Reads the frames of a dump in order.
#[derive(Debug)]
pub struct DumpReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    header: Header<'a>,
    ended: bool,
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn u64_at(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

impl<'a> DumpReader<'a> {
    /// Check the header of `bytes`; the frames follow with [`Self::next_frame`].
    pub fn new(bytes: &'a [u8]) -> Result<Self, DumpError> {
        let start = &bytes[..bytes.len().min(MAGIC.len())];
        if start != &MAGIC[..start.len()] {
            return Err(DumpError::Foreign);
        }
        if bytes.len() < HEADER_FIXED {
            return Err(DumpError::ShortHeader {
                len: bytes.len(),
                need: HEADER_FIXED,
            });
        }
        let field = |i: usize| u32_at(&bytes[16 + 4 * i..]);
        let (version, full_size, compact_size, facts_len) =
            (field(0), field(1), field(2), field(3));
        if version != FORMAT_VERSION {
            return Err(DumpError::Version(version));
        }
        for (what, size) in [("full", full_size), ("compact", compact_size)] {
            if size == 0 || size > MAX_RECORD {
                return Err(DumpError::BadHeader(format!(
                    "a {what} record size of {size} bytes (1 to {MAX_RECORD})"
                )));
            }
        }
        if facts_len > MAX_FACTS {
            return Err(DumpError::BadHeader(format!(
                "facts of {facts_len} bytes (at most {MAX_FACTS})"
            )));
        }
        let need = HEADER_FIXED + facts_len as usize;
        let facts = bytes
            .get(HEADER_FIXED..need)
            .ok_or(DumpError::ShortHeader {
                len: bytes.len(),
                need,
            })?;
        Ok(DumpReader {
            bytes,
            pos: need,
            header: Header {
                version,
                full_size,
                compact_size,
                facts,
            },
            ended: false,
        })
    }

    pub fn header(&self) -> Header<'a> {
        self.header
    }

    /// Byte offset of the next frame.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The kind of the next frame, when its first byte is a known kind.
    pub fn peek_kind(&self) -> Option<FrameKind> {
        self.bytes
            .get(self.pos)
            .copied()
            .and_then(FrameKind::from_u8)
    }

    /// The next frame; `Ok(None)` after the end marker. An error is final:
    /// every frame before it was returned.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'a>>, DumpError> {
        let offset = self.pos;
        let rest = &self.bytes[offset..];
        if self.ended {
            return if rest.is_empty() {
                Ok(None)
            } else {
                Err(DumpError::AfterEnd {
                    offset,
                    bytes: rest.len(),
                })
            };
        }
        if rest.is_empty() {
            return Err(DumpError::NoEnd { offset });
        }
        let kind = FrameKind::from_u8(rest[0]).ok_or(DumpError::UnknownFrame {
            offset,
            kind: rest[0],
        })?;
        if rest.len() < FRAME_HEADER {
            return Err(DumpError::Cut {
                offset,
                need: FRAME_HEADER,
                present: rest.len(),
                cut: FRAME_HEADER - rest.len(),
            });
        }
        let len = u32_at(&rest[1..]);
        if len > kind.max_len() {
            return Err(DumpError::TooLong {
                offset,
                kind,
                len,
                max: kind.max_len(),
            });
        }
        let need = FRAME_HEADER + len as usize;
        let Some(payload) = rest.get(FRAME_HEADER..need) else {
            return Err(DumpError::Cut {
                offset,
                need,
                present: rest.len(),
                cut: need - rest.len(),
            });
        };
        let frame = match kind {
            FrameKind::Record => Frame::Record(payload),
            FrameKind::Tick => {
                if len < 8 || !len.is_multiple_of(8) {
                    return Err(DumpError::BadTick { offset, len });
                }
                Frame::Tick(Tick {
                    now_ns: u64_at(payload),
                    counters: &payload[8..],
                })
            }
            FrameKind::Facts => Frame::Facts(payload),
            FrameKind::End => {
                self.ended = true;
                Frame::End(payload)
            }
        };
        self.pos += need;
        Ok(Some(frame))
    }
}
