//! Capture file writer: pcap (nanosecond magic) or pcapng (`if_tsresol` 9).
//!
//! Both write Ethernet link type, snaplen 65535, little-endian, through a
//! buffered file; [`CaptureWriter::finish`] flushes and reports errors
//! (dropping the writer flushes too, but silently).
//!
//! pcapng files are one Section Header Block, one Interface Description
//! Block (Ethernet, `if_tsresol` = 9: timestamps in ns) and one Enhanced
//! Packet Block per frame; [`CaptureWriter::write_commented`] gives a frame
//! an `opt_comment` (option 1, UTF-8), which Wireshark shows as the packet
//! comment (`frame.comment` in tshark). A pcap file has no place for it:
//! asking for a comment there is an error, not a silent loss.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::{CaptureError, CaptureFormat};

const SNAPLEN: u32 = 65535;

enum Inner<W: Write> {
    Pcap(PcapWriter<W>),
    PcapNg(PcapNgWriter<W>),
}

/// Writes frames with nanosecond timestamps.
pub struct CaptureWriter<W: Write = BufWriter<File>> {
    inner: Inner<W>,
    packets: u64,
}

fn werr(e: impl std::fmt::Display) -> CaptureError {
    CaptureError::Write(e.to_string())
}

impl CaptureWriter<BufWriter<File>> {
    /// Creates (truncates) `path`.
    pub fn create(path: impl AsRef<Path>, format: CaptureFormat) -> Result<Self, CaptureError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| CaptureError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        CaptureWriter::new(BufWriter::with_capacity(1 << 20, file), format)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the file header to `w`.
    pub fn new(w: W, format: CaptureFormat) -> Result<Self, CaptureError> {
        let inner = match format {
            CaptureFormat::Pcap => {
                let header = PcapHeader {
                    version_major: 2,
                    version_minor: 4,
                    ts_correction: 0,
                    ts_accuracy: 0,
                    snaplen: SNAPLEN,
                    datalink: DataLink::ETHERNET,
                    ts_resolution: TsResolution::NanoSecond,
                    endianness: Endianness::Little,
                };
                Inner::Pcap(PcapWriter::with_header(w, header).map_err(werr)?)
            }
            CaptureFormat::PcapNg => {
                let section = SectionHeaderBlock {
                    endianness: Endianness::Little,
                    ..Default::default()
                };
                let mut ng = PcapNgWriter::with_section_header(w, section).map_err(werr)?;
                let idb = InterfaceDescriptionBlock {
                    linktype: DataLink::ETHERNET,
                    snaplen: SNAPLEN,
                    options: vec![InterfaceDescriptionOption::IfTsResol(9)],
                };
                ng.write_pcapng_block(idb).map_err(werr)?;
                Inner::PcapNg(ng)
            }
        };
        Ok(CaptureWriter { inner, packets: 0 })
    }

    /// Appends one frame captured at `time_ns` (ns since the Unix epoch).
    pub fn write(&mut self, time_ns: u64, data: &[u8]) -> Result<(), CaptureError> {
        self.write_commented(time_ns, data, None)
    }

    /// Appends one frame captured at `time_ns` with an `opt_comment`
    /// (pcapng only; a pcap file refuses a comment).
    pub fn write_commented(
        &mut self,
        time_ns: u64,
        data: &[u8],
        comment: Option<&str>,
    ) -> Result<(), CaptureError> {
        if data.len() > SNAPLEN as usize {
            return Err(CaptureError::Write(format!(
                "frame of {} bytes exceeds the snaplen {SNAPLEN}",
                data.len()
            )));
        }
        let ts = Duration::from_nanos(time_ns);
        match &mut self.inner {
            Inner::Pcap(_) if comment.is_some() => {
                return Err(CaptureError::Write(
                    "a pcap file cannot hold packet comments: write pcapng".into(),
                ));
            }
            Inner::Pcap(w) => {
                w.write_packet(&PcapPacket::new(ts, data.len() as u32, data))
                    .map_err(werr)?;
            }
            Inner::PcapNg(w) => {
                let epb = EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: ts,
                    original_len: data.len() as u32,
                    data: Cow::Borrowed(data),
                    options: comment
                        .map(|c| EnhancedPacketOption::Comment(Cow::Borrowed(c)))
                        .into_iter()
                        .collect(),
                };
                w.write_pcapng_block(epb).map_err(werr)?;
            }
        }
        self.packets += 1;
        Ok(())
    }

    pub fn packets_written(&self) -> u64 {
        self.packets
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = match self.inner {
            Inner::Pcap(w) => w.into_writer(),
            Inner::PcapNg(w) => w.into_inner(),
        };
        w.flush()?;
        Ok(w)
    }
}
