//! BER for GOOSE: one-byte tags, short or long (1-2 byte) lengths, and
//! the INTEGER and BOOLEAN forms of the PDU. A [`Cursor`] walks a slice
//! with the slice's offset in the frame, so that each error names a frame
//! offset.

use super::error::GooseError;

/// Reads TLVs from a slice; `base` is the slice's offset in the frame.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

/// One TLV read: its tag, value and the value's offset in the frame.
pub(super) struct Tlv<'a> {
    pub tag: u8,
    pub value: &'a [u8],
    pub offset: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a [u8], base: usize) -> Self {
        Cursor { buf, pos: 0, base }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Offset in the frame of the next byte.
    pub(super) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(super) fn peek_tag(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// The next TLV, whatever its tag.
    pub(super) fn any(&mut self, field: &'static str) -> Result<Tlv<'a>, GooseError> {
        let Some(&tag) = self.buf.get(self.pos) else {
            return Err(GooseError::Truncated {
                offset: self.offset(),
                field,
                needed: 2,
                available: 0,
            });
        };
        self.pos += 1;
        let len_at = self.offset();
        let len = self.length(field)?;
        let available = self.buf.len() - self.pos;
        if len > available {
            return Err(GooseError::LengthPastEnd {
                offset: len_at,
                field,
                length: len,
                available,
            });
        }
        let offset = self.offset();
        let value = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(Tlv { tag, value, offset })
    }

    /// The next TLV, which must have `tag`.
    pub(super) fn expect(
        &mut self,
        tag: u8,
        field: &'static str,
        expected: &'static str,
    ) -> Result<Tlv<'a>, GooseError> {
        let at = self.offset();
        match self.peek_tag() {
            Some(t) if t != tag => Err(GooseError::WrongTag {
                offset: at,
                field,
                found: t,
                expected,
            }),
            _ => self.any(field),
        }
    }

    fn length(&mut self, field: &'static str) -> Result<usize, GooseError> {
        let at = self.offset();
        let Some(&first) = self.buf.get(self.pos) else {
            return Err(GooseError::Truncated {
                offset: at,
                field,
                needed: 1,
                available: 0,
            });
        };
        if first < 0x80 {
            self.pos += 1;
            return Ok(first as usize);
        }
        let n = (first & 0x7F) as usize;
        if n == 0 || n > 2 {
            return Err(GooseError::BadLengthForm {
                offset: at,
                field,
                first,
            });
        }
        let available = self.buf.len() - self.pos - 1;
        if available < n {
            return Err(GooseError::Truncated {
                offset: at + 1,
                field,
                needed: n,
                available,
            });
        }
        let len = self.buf[self.pos + 1..self.pos + 1 + n]
            .iter()
            .fold(0usize, |l, b| (l << 8) | *b as usize);
        self.pos += 1 + n;
        Ok(len)
    }
}

/// A signed INTEGER of at most 8 bytes.
pub(super) fn int(t: &Tlv<'_>, field: &'static str) -> Result<i64, GooseError> {
    if t.value.is_empty() || t.value.len() > 8 {
        return Err(GooseError::BadLength {
            offset: t.offset,
            field,
            found: t.value.len(),
            expected: "1 to 8 (a signed INTEGER)",
        });
    }
    let negative = t.value[0] & 0x80 != 0;
    let start: i64 = if negative { -1 } else { 0 };
    Ok(t.value.iter().fold(start, |v, b| (v << 8) | *b as i64))
}

/// A non-negative INTEGER of at most 8 value bytes (one more when it is a
/// leading zero, as a value with its top bit set needs).
pub(super) fn uint(t: &Tlv<'_>, field: &'static str) -> Result<u64, GooseError> {
    let v = t.value;
    let bad = |expected| GooseError::BadLength {
        offset: t.offset,
        field,
        found: v.len(),
        expected,
    };
    if v.is_empty() || v.len() > 9 || (v.len() == 9 && v[0] != 0) {
        return Err(bad("1 to 8 value bytes (an unsigned INTEGER)"));
    }
    if v[0] & 0x80 != 0 {
        return Err(GooseError::OutOfRange {
            offset: t.offset,
            field,
            found: "a negative value".into(),
            max: "0 or more".into(),
        });
    }
    Ok(v.iter().fold(0u64, |x, b| (x << 8) | *b as u64))
}

/// A non-negative INTEGER that fits a u32 (the PDU's counters).
pub(super) fn u32_of(t: &Tlv<'_>, field: &'static str) -> Result<u32, GooseError> {
    let v = uint(t, field)?;
    u32::try_from(v).map_err(|_| GooseError::OutOfRange {
        offset: t.offset,
        field,
        found: v.to_string(),
        max: u32::MAX.to_string(),
    })
}

/// A BOOLEAN: one byte, 0 false, anything else true (BER).
pub(super) fn boolean(t: &Tlv<'_>, field: &'static str) -> Result<bool, GooseError> {
    match t.value {
        [b] => Ok(*b != 0),
        v => Err(GooseError::BadLength {
            offset: t.offset,
            field,
            found: v.len(),
            expected: "1 (a BOOLEAN)",
        }),
    }
}

/// A VisibleString: printable ASCII (0x20..=0x7E).
pub(super) fn visible(t: &Tlv<'_>, field: &'static str) -> Result<String, GooseError> {
    if !t.value.iter().all(|b| (0x20..=0x7E).contains(b)) {
        return Err(GooseError::NotVisible {
            offset: t.offset,
            field,
        });
    }
    Ok(t.value.iter().map(|&b| b as char).collect())
}

/// Appends a tag and the minimal length form of `len`.
pub(super) fn write_header(out: &mut Vec<u8>, tag: u8, len: usize) {
    out.push(tag);
    if len < 0x80 {
        out.push(len as u8);
    } else if len <= 0xFF {
        out.extend_from_slice(&[0x81, len as u8]);
    } else {
        out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]);
    }
}

pub(super) fn write_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    write_header(out, tag, value.len());
    out.extend_from_slice(value);
}

/// The minimal two's complement bytes of `v`.
pub(super) fn int_bytes(v: i64) -> Vec<u8> {
    let b = v.to_be_bytes();
    let mut i = 0;
    // Drop a leading byte while the next one carries the same sign.
    while i < 7 && ((b[i] == 0 && b[i + 1] & 0x80 == 0) || (b[i] == 0xFF && b[i + 1] & 0x80 != 0)) {
        i += 1;
    }
    b[i..].to_vec()
}

/// The minimal bytes of a non-negative `v` (a leading zero when its top
/// bit is set).
pub(super) fn uint_bytes(v: u64) -> Vec<u8> {
    let b = v.to_be_bytes();
    let first = b.iter().position(|x| *x != 0).unwrap_or(7);
    let mut out = Vec::with_capacity(9);
    if b[first] & 0x80 != 0 {
        out.push(0);
    }
    out.extend_from_slice(&b[first..]);
    out
}
