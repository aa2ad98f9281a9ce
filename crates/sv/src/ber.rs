//! Minimal BER tag-length-value reading and writing for the 9-2 grammar.
//!
//! A [`Cursor`] walks a byte slice with an absolute base offset (the position
//! of the slice in the Ethernet frame) so every error reports a frame offset.
//! Lengths: short form (`0x00..=0x7F`) and long form with 1 or 2 length bytes
//! (`0x81 nn`, `0x82 nn nn`); the indefinite form (`0x80`) and longer forms are
//! rejected (an SV frame is shorter than 64 KiB). Writing always chooses the
//! minimal form.

use crate::error::DecodeError;

/// Reads TLVs from a slice; `base` is the slice's offset in the frame.
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Self {
        Cursor { buf, pos: 0, base }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Absolute offset of the next byte.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(crate) fn peek_tag(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn truncated(&self, field: &'static str, needed: usize) -> DecodeError {
        DecodeError::Truncated {
            offset: self.offset(),
            field,
            needed,
            available: self.buf.len() - self.pos,
        }
    }

    /// Reads the tag byte, checks it, reads the length and returns the value
    /// slice with its absolute offset.
    ///
    /// The fast path (expected tag, short-form length that fits) is inlined
    /// into the decoder; everything else, including every error, goes
    /// through [`Cursor::tlv_general`], which is kept out of line.
    #[inline(always)]
    pub(crate) fn tlv(
        &mut self,
        tag: u8,
        field: &'static str,
        expected: &'static str,
    ) -> Result<(&'a [u8], usize), DecodeError> {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        if let [t, l, value @ ..] = rest {
            let len = *l as usize;
            if *t == tag && len < 0x80 && len <= value.len() {
                let start = self.pos + 2;
                self.pos = start + len;
                return Ok((&value[..len], self.base + start));
            }
        }
        self.tlv_general(tag, field, expected)
    }

    /// Any TLV: long-form lengths, and the typed error for a wrong tag, a bad
    /// length form or a length past the end of the parent.
    #[inline(never)]
    fn tlv_general(
        &mut self,
        tag: u8,
        field: &'static str,
        expected: &'static str,
    ) -> Result<(&'a [u8], usize), DecodeError> {
        let Some(&found) = self.buf.get(self.pos) else {
            return Err(self.truncated(field, 2));
        };
        if found != tag {
            return Err(DecodeError::WrongTag {
                offset: self.offset(),
                field,
                found,
                expected,
            });
        }
        self.pos += 1;
        let len_off = self.offset();
        let len = self.length(field)?;
        let avail = self.buf.len() - self.pos;
        if len > avail {
            return Err(DecodeError::LengthPastEnd {
                offset: len_off,
                field,
                length: len,
                available: avail,
            });
        }
        let start = self.pos;
        self.pos += len;
        Ok((&self.buf[start..start + len], self.base + start))
    }

    fn length(&mut self, field: &'static str) -> Result<usize, DecodeError> {
        let Some(&first) = self.buf.get(self.pos) else {
            return Err(self.truncated(field, 1));
        };
        if first < 0x80 {
            self.pos += 1;
            return Ok(first as usize);
        }
        let n = (first & 0x7F) as usize;
        if n == 0 || n > 2 {
            return Err(DecodeError::BadLengthForm {
                offset: self.offset(),
                field,
                first,
            });
        }
        if self.buf.len() - self.pos < 1 + n {
            return Err(self.truncated(field, 1 + n));
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | self.buf[self.pos + 1 + i] as usize;
        }
        self.pos += 1 + n;
        Ok(len)
    }
}

/// Number of bytes of the minimal BER length encoding of `len`.
pub(crate) fn length_size(len: usize) -> usize {
    if len < 0x80 {
        1
    } else if len <= 0xFF {
        2
    } else {
        3
    }
}

/// Total size of a TLV with a one-byte tag and a `len`-byte value.
pub(crate) fn tlv_size(len: usize) -> usize {
    1 + length_size(len) + len
}

/// Appends tag + minimal length.
pub(crate) fn write_header(out: &mut Vec<u8>, tag: u8, len: usize) {
    out.push(tag);
    if len < 0x80 {
        out.push(len as u8);
    } else if len <= 0xFF {
        out.push(0x81);
        out.push(len as u8);
    } else {
        out.push(0x82);
        out.push((len >> 8) as u8);
        out.push(len as u8);
    }
}

pub(crate) fn write_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    write_header(out, tag, value.len());
    out.extend_from_slice(value);
}
