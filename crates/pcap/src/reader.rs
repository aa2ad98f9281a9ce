//! Capture file reader: pcap and pcapng, nanosecond timestamps, clean cuts.
//!
//! The format is chosen from the first four bytes (pcap magics a1b2c3d4 /
//! a1b23c4d in either byte order, pcapng 0a0d0d0a). Packets stream through
//! `pcap-file`'s buffered parsers, so files larger than memory are fine.
//!
//! Timestamps: pcap microsecond files are scaled to ns; pcapng EPB/PB
//! timestamps are scaled by the interface's `if_tsresol` (default 10^-6,
//! powers of 2 supported) and shifted by `if_tsoffset` seconds. Simple
//! Packet Blocks carry no time and report 0.
//!
//! We track the byte offset of each record ourselves (pcap: the 24-byte
//! header plus 16 + caplen per packet; pcapng: the block lengths), so a truncated or
//! corrupt file reports the packet count and the offset of the cut.
//! After the first error the reader returns `None`.

use std::fs::File;
use std::io::{BufReader, Cursor, Read};
use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader, RawBlock};
use pcap_file::{DataLink, Endianness, PcapError};
use std::borrow::Cow;

use crate::{CaptureError, CaptureFormat};

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Nanoseconds since the Unix epoch (0 when the format has no time).
    pub time_ns: u64,
    /// Original length on the wire (may exceed `data.len()` with a snaplen).
    pub orig_len: u32,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    pub data: Vec<u8>,
    /// The frame's `opt_comment`s (pcapng Enhanced Packet Blocks; none in
    /// pcap).
    pub comments: Vec<String>,
}

type Source = std::io::Chain<Cursor<[u8; 4]>, Box<dyn Read>>;

enum Inner {
    Pcap {
        reader: PcapReader<Source>,
        nanos: bool,
    },
    PcapNg {
        reader: PcapNgReader<Source>,
    },
    Done,
}

/// Streaming reader of a pcap or pcapng capture.
pub struct CaptureReader {
    inner: Inner,
    format: CaptureFormat,
    packets: u64,
    offset: u64,
}

fn map_err(e: PcapError, packets: u64, offset: u64) -> CaptureError {
    match e {
        PcapError::IncompleteBuffer => CaptureError::Truncated { packets, offset },
        PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            CaptureError::Truncated { packets, offset }
        }
        PcapError::IoError(io) => CaptureError::Io(io),
        other => CaptureError::Corrupt {
            packets,
            offset,
            reason: other.to_string(),
        },
    }
}

fn tsresol_to_ns(raw: u64, tsresol: u8, offset_s: u64) -> u64 {
    let base = if tsresol & 0x80 == 0 {
        let exp = tsresol as u32;
        if exp <= 9 {
            raw.saturating_mul(10u64.pow(9 - exp))
        } else {
            raw / 10u64.saturating_pow(exp - 9)
        }
    } else {
        let exp = (tsresol & 0x7F) as u32;
        if exp >= 64 {
            0
        } else {
            ((raw as u128 * 1_000_000_000u128) >> exp).min(u64::MAX as u128) as u64
        }
    };
    base.saturating_add(offset_s.saturating_mul(1_000_000_000))
}

impl CaptureReader {
    /// Opens a capture file.
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureReader, CaptureError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| CaptureError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        CaptureReader::from_reader(Box::new(BufReader::new(file)), &path.display().to_string())
    }

    /// Reads a capture held in memory (used by the fuzz target and tests).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<CaptureReader, CaptureError> {
        CaptureReader::from_reader(Box::new(Cursor::new(bytes)), "capture data")
    }

    /// Reads a capture from any byte stream; `what` names it in errors.
    pub fn from_reader(mut r: Box<dyn Read>, what: &str) -> Result<CaptureReader, CaptureError> {
        let mut magic = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = r.read(&mut magic[got..])?;
            if n == 0 {
                return Err(CaptureError::NotACapture {
                    what: format!("{what} ({got} byte(s) long)"),
                    magic: u32::from_be_bytes(magic),
                });
            }
            got += n;
        }
        let m = u32::from_be_bytes(magic);
        let source: Source = Cursor::new(magic).chain(r);
        let (inner, format, offset) = match m {
            0xA1B2C3D4 | 0xD4C3B2A1 | 0xA1B23C4D | 0x4D3CB2A1 => {
                let reader = PcapReader::new(source).map_err(|e| map_err(e, 0, 0))?;
                let h = reader.header();
                if h.datalink != DataLink::ETHERNET {
                    return Err(CaptureError::LinkType {
                        linktype: format!("{:?}", h.datalink),
                    });
                }
                let nanos = h.ts_resolution == pcap_file::TsResolution::NanoSecond;
                (Inner::Pcap { reader, nanos }, CaptureFormat::Pcap, 24)
            }
            0x0A0D0D0A => {
                let reader = PcapNgReader::new(source).map_err(|e| map_err(e, 0, 0))?;
                (Inner::PcapNg { reader }, CaptureFormat::PcapNg, 0)
            }
            _ => {
                return Err(CaptureError::NotACapture {
                    what: what.to_string(),
                    magic: m,
                })
            }
        };
        Ok(CaptureReader {
            inner,
            format,
            packets: 0,
            offset,
        })
    }

    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Next packet, or the error that ends the file, or `None` at the end.
    pub fn next_packet(&mut self) -> Option<Result<Packet, CaptureError>> {
        let r = self.next_inner();
        match &r {
            Some(Ok(_)) => self.packets += 1,
            Some(Err(_)) => self.inner = Inner::Done,
            None => self.inner = Inner::Done,
        }
        r
    }

    fn next_inner(&mut self) -> Option<Result<Packet, CaptureError>> {
        let (packets, offset) = (self.packets, self.offset);
        match &mut self.inner {
            Inner::Done => None,
            Inner::Pcap { reader, nanos } => {
                let raw = match reader.next_raw_packet()? {
                    Ok(raw) => raw,
                    Err(e) => return Some(Err(map_err(e, packets, offset))),
                };
                let frac = if *nanos {
                    raw.ts_frac as u64
                } else {
                    raw.ts_frac as u64 * 1000
                };
                let time_ns = (raw.ts_sec as u64) * 1_000_000_000 + frac;
                self.offset += 16 + raw.data.len() as u64;
                Some(Ok(Packet {
                    time_ns,
                    orig_len: raw.orig_len,
                    interface: 0,
                    data: raw.data.into_owned(),
                    comments: Vec::new(),
                }))
            }
            Inner::PcapNg { reader } => loop {
                let offset = self.offset;
                let raw = match reader.next_raw_block()? {
                    Ok(raw) => raw,
                    Err(e) => return Some(Err(map_err(e, packets, offset))),
                };
                self.offset += raw.initial_len as u64;
                // Copy the body out so the reader (which owns the buffer) can be
                // asked for the section's byte order; the block then borrows `body`.
                let (type_, initial_len, trailer_len) =
                    (raw.type_, raw.initial_len, raw.trailer_len);
                let body = raw.body.into_owned();
                let raw = RawBlock {
                    type_,
                    initial_len,
                    body: Cow::Borrowed(&body),
                    trailer_len,
                };
                let endianness = reader.section().endianness;
                let block = match endianness {
                    Endianness::Big => raw.try_into_block::<byteorder_slice::BigEndian>(),
                    Endianness::Little => raw.try_into_block::<byteorder_slice::LittleEndian>(),
                };
                let block = match block {
                    Ok(b) => b,
                    Err(e) => return Some(Err(map_err(e, packets, offset))),
                };
                let mut comments = Vec::new();
                let (iface, raw_ts, orig_len, data) = match block {
                    Block::EnhancedPacket(p) => {
                        comments = epb_comments(&p.options);
                        (
                            p.interface_id,
                            Some(p.timestamp.as_nanos() as u64),
                            p.original_len,
                            p.data.into_owned(),
                        )
                    }
                    Block::Packet(p) => (
                        p.interface_id as u32,
                        Some(p.timestamp),
                        p.original_len,
                        p.data.into_owned(),
                    ),
                    Block::SimplePacket(p) => (0, None, p.original_len, p.data.into_owned()),
                    _ => continue,
                };
                let Some(idb) = reader.interfaces().get(iface as usize) else {
                    return Some(Err(CaptureError::Corrupt {
                        packets,
                        offset,
                        reason: format!(
                            "packet refers to interface {iface}, which is not described"
                        ),
                    }));
                };
                if idb.linktype != DataLink::ETHERNET {
                    return Some(Err(CaptureError::LinkType {
                        linktype: format!("{:?}", idb.linktype),
                    }));
                }
                let mut tsresol = 6u8;
                let mut tsoffset = 0u64;
                for o in &idb.options {
                    match o {
                        InterfaceDescriptionOption::IfTsResol(r) => tsresol = *r,
                        InterfaceDescriptionOption::IfTsOffset(s) => tsoffset = *s,
                        _ => {}
                    }
                }
                let time_ns = raw_ts.map_or(0, |t| tsresol_to_ns(t, tsresol, tsoffset));
                return Some(Ok(Packet {
                    time_ns,
                    orig_len,
                    interface: iface,
                    data,
                    comments,
                }));
            },
        }
    }
}

/// The `opt_comment`s of an Enhanced Packet Block.
fn epb_comments(options: &[EnhancedPacketOption<'_>]) -> Vec<String> {
    options
        .iter()
        .filter_map(|o| match o {
            EnhancedPacketOption::Comment(c) => Some(c.to_string()),
            _ => None,
        })
        .collect()
}

impl Iterator for CaptureReader {
    type Item = Result<Packet, CaptureError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_packet()
    }
}
