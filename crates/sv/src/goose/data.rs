//! MMS Data, the values of a GOOSE data set (`allData`), and UtcTime.
//!
//! | tag | Data | content |
//! |---|---|---|
//! | 0xA1 | array | Data... |
//! | 0xA2 | structure | Data... |
//! | 0x83 | boolean | 1 byte |
//! | 0x84 | bit-string | unused bits (0..7), then the bits, first bit the top of the first byte |
//! | 0x85 | integer | two's complement |
//! | 0x86 | unsigned | two's complement, not negative |
//! | 0x87 | floating-point | exponent width (8: IEEE single, 11: double), then the value |
//! | 0x89 | octet-string | bytes |
//! | 0x8A | visible-string | printable ASCII |
//! | 0x8C | binary-time | 4 or 6 bytes |
//! | 0x90 | MMS string | UTF-8 |
//! | 0x91 | utc-time | 8 bytes ([`UtcTime`]) |
//!
//! A quality (IEC 61850-7-3) is a bit-string of [`QUALITY_BITS`] bits.

use super::ber::{self, Cursor, Tlv};
use super::error::{GooseEncodeError, GooseError};
use super::MAX_DEPTH;

/// The bits of an IEC 61850 quality (validity 2, detail 8, source, test,
/// operator blocked).
pub const QUALITY_BITS: usize = 13;

/// An instant as IEC 61850 carries it: seconds since 1970 (UTC), the
/// fraction of the second in 24 bits (units of 2^-24 s), and the time
/// quality byte (leap second known, clock failure, clock not
/// synchronised, then the number of accurate fraction bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UtcTime {
    pub seconds: u32,
    /// 0 ..= 0xFF_FFFF.
    pub fraction: u32,
    pub quality: u8,
}

impl UtcTime {
    /// `ns` since 1970 (UTC), the fraction rounded down to 2^-24 s
    /// (60 ns), with `quality`.
    pub fn from_unix_ns(ns: u64, quality: u8) -> UtcTime {
        let seconds = (ns / 1_000_000_000) as u32;
        let sub = ns % 1_000_000_000;
        UtcTime {
            seconds,
            fraction: ((sub << 24) / 1_000_000_000) as u32,
            quality,
        }
    }

    /// Nanoseconds since 1970 (UTC), the fraction rounded down.
    pub fn to_unix_ns(&self) -> u64 {
        self.seconds as u64 * 1_000_000_000 + ((self.fraction as u64 * 1_000_000_000) >> 24)
    }

    fn bytes(&self) -> [u8; 8] {
        let s = self.seconds.to_be_bytes();
        let f = self.fraction.to_be_bytes();
        [s[0], s[1], s[2], s[3], f[1], f[2], f[3], self.quality]
    }

    pub(super) fn read(t: &Tlv<'_>, field: &'static str) -> Result<UtcTime, GooseError> {
        let [s0, s1, s2, s3, f0, f1, f2, q] = *t.value else {
            return Err(GooseError::BadLength {
                offset: t.offset,
                field,
                found: t.value.len(),
                expected: "8 (a UtcTime)",
            });
        };
        Ok(UtcTime {
            seconds: u32::from_be_bytes([s0, s1, s2, s3]),
            fraction: u32::from_be_bytes([0, f0, f1, f2]),
            quality: q,
        })
    }

    pub(super) fn write(&self, out: &mut Vec<u8>, tag: u8) {
        ber::write_tlv(out, tag, &self.bytes());
    }
}

/// One value of a data set.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Array(Vec<Data>),
    Structure(Vec<Data>),
    Boolean(bool),
    /// `unused` low bits of the last byte are not part of the string.
    BitString {
        unused: u8,
        bytes: Vec<u8>,
    },
    Integer(i64),
    Unsigned(u64),
    Float32(f32),
    Float64(f64),
    OctetString(Vec<u8>),
    VisibleString(String),
    BinaryTime(Vec<u8>),
    MmsString(String),
    UtcTime(UtcTime),
}

impl Data {
    /// A quality as its 13-bit bit-string; `bits` holds bit 0 (validity's
    /// first) in its top position: `0x0000` is good.
    pub fn quality(bits: u16) -> Data {
        let v = bits & 0xFFF8;
        Data::BitString {
            unused: (16 - QUALITY_BITS) as u8,
            bytes: v.to_be_bytes().to_vec(),
        }
    }

    /// The bits of a bit-string, first bit first.
    pub fn bits(&self) -> Option<Vec<bool>> {
        let Data::BitString { unused, bytes } = self else {
            return None;
        };
        let n = (bytes.len() * 8).saturating_sub(*unused as usize);
        Some(
            (0..n)
                .map(|i| bytes[i / 8] & (0x80 >> (i % 8)) != 0)
                .collect(),
        )
    }
}

/// The values of `allData` (or of a structure): each TLV of `c`.
pub(super) fn read_all(c: &mut Cursor<'_>, depth: usize) -> Result<Vec<Data>, GooseError> {
    let mut out = Vec::new();
    while !c.is_empty() {
        out.push(read(c, depth)?);
    }
    Ok(out)
}

fn read(c: &mut Cursor<'_>, depth: usize) -> Result<Data, GooseError> {
    let t = c.any("Data")?;
    let bad = |expected: &'static str| GooseError::BadLength {
        offset: t.offset,
        field: "Data",
        found: t.value.len(),
        expected,
    };
    Ok(match t.tag {
        0xA1 | 0xA2 => {
            if depth >= MAX_DEPTH {
                return Err(GooseError::TooDeep {
                    offset: t.offset,
                    max: MAX_DEPTH,
                });
            }
            let items = read_all(&mut Cursor::new(t.value, t.offset), depth + 1)?;
            if t.tag == 0xA1 {
                Data::Array(items)
            } else {
                Data::Structure(items)
            }
        }
        0x83 => Data::Boolean(ber::boolean(&t, "boolean")?),
        0x84 => match t.value {
            [] => return Err(bad("1 or more (a bit-string's unused-bit count)")),
            [unused, bytes @ ..] => {
                if *unused > 7 || (bytes.is_empty() && *unused != 0) {
                    return Err(GooseError::OutOfRange {
                        offset: t.offset,
                        field: "bit-string unused bits",
                        found: unused.to_string(),
                        max: "7 (0 for an empty string)".into(),
                    });
                }
                Data::BitString {
                    unused: *unused,
                    bytes: bytes.to_vec(),
                }
            }
        },
        0x85 => Data::Integer(ber::int(&t, "integer")?),
        0x86 => Data::Unsigned(ber::uint(&t, "unsigned")?),
        0x87 => match t.value {
            [8, a, b, c, d] => Data::Float32(f32::from_be_bytes([*a, *b, *c, *d])),
            [11, rest @ ..] if rest.len() == 8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(rest);
                Data::Float64(f64::from_be_bytes(b))
            }
            _ => return Err(bad("5 (exponent width 8, single) or 9 (11, double)")),
        },
        0x89 => Data::OctetString(t.value.to_vec()),
        0x8A => Data::VisibleString(ber::visible(&t, "visible-string")?),
        0x8C => match t.value.len() {
            4 | 6 => Data::BinaryTime(t.value.to_vec()),
            _ => return Err(bad("4 or 6 (a binary-time)")),
        },
        0x90 => match std::str::from_utf8(t.value) {
            Ok(s) => Data::MmsString(s.to_string()),
            Err(_) => {
                return Err(GooseError::NotVisible {
                    offset: t.offset,
                    field: "MMS string (UTF-8)",
                })
            }
        },
        0x91 => Data::UtcTime(UtcTime::read(&t, "utc-time")?),
        found => {
            return Err(GooseError::WrongTag {
                offset: t.offset.saturating_sub(2),
                field: "Data",
                found,
                expected: "an MMS Data tag (0xA1, 0xA2, 0x83-0x87, 0x89, 0x8A, 0x8C, 0x90, 0x91)",
            })
        }
    })
}

/// Append `d` (nested at `depth`).
pub(super) fn write(out: &mut Vec<u8>, d: &Data, depth: usize) -> Result<(), GooseEncodeError> {
    match d {
        Data::Array(items) | Data::Structure(items) => {
            if depth >= MAX_DEPTH {
                return Err(GooseEncodeError::TooDeep { max: MAX_DEPTH });
            }
            let mut inner = Vec::new();
            for i in items {
                write(&mut inner, i, depth + 1)?;
            }
            let tag = if matches!(d, Data::Array(_)) {
                0xA1
            } else {
                0xA2
            };
            ber::write_tlv(out, tag, &inner);
        }
        Data::Boolean(b) => ber::write_tlv(out, 0x83, &[u8::from(*b)]),
        Data::BitString { unused, bytes } => {
            if *unused > 7 || (bytes.is_empty() && *unused != 0) {
                return Err(GooseEncodeError::BadBitString { unused: *unused });
            }
            let mut v = Vec::with_capacity(bytes.len() + 1);
            v.push(*unused);
            v.extend_from_slice(bytes);
            ber::write_tlv(out, 0x84, &v);
        }
        Data::Integer(i) => ber::write_tlv(out, 0x85, &ber::int_bytes(*i)),
        Data::Unsigned(u) => ber::write_tlv(out, 0x86, &ber::uint_bytes(*u)),
        Data::Float32(f) => {
            let b = f.to_be_bytes();
            ber::write_tlv(out, 0x87, &[8, b[0], b[1], b[2], b[3]]);
        }
        Data::Float64(f) => {
            let mut v = vec![11];
            v.extend_from_slice(&f.to_be_bytes());
            ber::write_tlv(out, 0x87, &v);
        }
        Data::OctetString(b) => ber::write_tlv(out, 0x89, b),
        Data::VisibleString(s) => {
            if !s.bytes().all(|b| (0x20..=0x7E).contains(&b)) {
                return Err(GooseEncodeError::NotVisible {
                    field: "visible-string",
                    value: s.clone(),
                });
            }
            ber::write_tlv(out, 0x8A, s.as_bytes());
        }
        Data::BinaryTime(b) => {
            if b.len() != 4 && b.len() != 6 {
                return Err(GooseEncodeError::BadBinaryTime { len: b.len() });
            }
            ber::write_tlv(out, 0x8C, b)
        }
        Data::MmsString(s) => ber::write_tlv(out, 0x90, s.as_bytes()),
        Data::UtcTime(t) => t.write(out, 0x91),
    }
    Ok(())
}
