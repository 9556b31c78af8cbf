//! Bounds-checked reading and length-patched writing of big-endian wire data.
//!
//! Every decoder in this crate reads through [`Reader`], so no slice is indexed before its
//! length is checked and no allocation is sized from a length field that was not first checked
//! against the bytes actually present.

use bytes::{BufMut, BytesMut};

use crate::{DecodeError, EncodeError};

/// A cursor over untrusted bytes; every read checks the remaining length first.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    /// Names the structure being read, for error messages.
    what: &'static str,
    /// Check structure only, not meaning (see `Message::decode_lenient`).
    lenient: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader {
            buf,
            what,
            lenient: false,
        }
    }

    /// This reader, checking structure only: semantic checks (prerequisites, values, masks,
    /// action arguments) are for decoding what a peer sent, not for naming what we built.
    pub(crate) fn lenient(mut self) -> Self {
        self.lenient = true;
        self
    }

    pub(crate) fn is_lenient(&self) -> bool {
        self.lenient
    }

    /// A reader over bytes already taken from this one, as strict as this one.
    pub(crate) fn child(&self, buf: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            buf,
            what,
            lenient: self.lenient,
        }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes not yet consumed, without consuming them.
    pub(crate) fn peek_rest(&self) -> &'a [u8] {
        self.buf
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Truncated {
                what: self.what,
                needed: n,
                available: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Consumes everything that is left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// A reader over the next `n` bytes, which are consumed from `self`.
    pub(crate) fn sub(&mut self, n: usize, what: &'static str) -> Result<Reader<'a>, DecodeError> {
        let bytes = self.take(n)?;
        Ok(self.child(bytes, what))
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.take(n).map(|_| ())
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Reads a fixed-size, NUL-padded text field (port names, descriptions).
    pub(crate) fn fixed_str(&mut self, n: usize) -> Result<String, DecodeError> {
        let raw = self.take(n)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
    }

    /// Checks that nothing is left over: trailing bytes mean a length field lied.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                what: self.what,
                count: self.buf.len(),
            })
        }
    }
}

/// Big-endian value of up to 16 bytes (callers guarantee the bound; field widths are). The
/// usual widths are read whole rather than a byte at a time (the match decoder's hot path).
pub(crate) fn be_uint(bytes: &[u8]) -> u128 {
    if let Ok(b) = <[u8; 4]>::try_from(bytes) {
        u128::from(u32::from_be_bytes(b))
    } else if let Ok(b) = <[u8; 2]>::try_from(bytes) {
        u128::from(u16::from_be_bytes(b))
    } else if let Ok(b) = <[u8; 8]>::try_from(bytes) {
        u128::from(u64::from_be_bytes(b))
    } else if let Ok(b) = <[u8; 16]>::try_from(bytes) {
        u128::from_be_bytes(b)
    } else {
        bytes
            .iter()
            .fold(0u128, |acc, &b| (acc << 8) | u128::from(b))
    }
}

/// Writes the low `n` (at most 16) bytes of `value`, big-endian.
pub(crate) fn put_uint(out: &mut BytesMut, value: u128, n: usize) {
    let bytes = value.to_be_bytes();
    out.put_slice(&bytes[16 - n.min(16)..]);
}

/// Bytes of zero padding that bring `len` up to a multiple of 8.
pub(crate) fn pad8(len: usize) -> usize {
    (8 - len % 8) % 8
}

pub(crate) fn put_zeros(out: &mut BytesMut, n: usize) {
    // Most paddings are empty (structures already a multiple of 8): skip the memset call.
    if n > 0 {
        out.put_bytes(0, n);
    }
}

/// Writes `text` into a fixed-size NUL-padded field, truncating so a NUL always ends it.
pub(crate) fn put_fixed_str(out: &mut BytesMut, text: &str, n: usize) {
    let bytes = text.as_bytes();
    let len = bytes.len().min(n.saturating_sub(1));
    out.put_slice(&bytes[..len]);
    put_zeros(out, n - len);
}

/// Writes a structure kept verbatim (an action or instruction this crate does not model),
/// whose 16-bit length field at offset 2 must equal its length, a multiple of 8: a structure
/// built by hand that disagrees with its own length field is refused, not sent.
pub(crate) fn put_raw(
    out: &mut BytesMut,
    raw: &[u8],
    what: &'static str,
) -> Result<(), EncodeError> {
    let stated = match raw.get(2..4) {
        Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
        _ => 0,
    };
    if stated != raw.len() || stated < 8 || stated % 8 != 0 {
        return Err(EncodeError::RawLength {
            what,
            stated,
            actual: raw.len(),
        });
    }
    out.put_slice(raw);
    Ok(())
}

/// A length field written as a placeholder and patched once the structure is complete.
pub(crate) struct LengthSlot {
    /// Offset of the structure's first byte in the output buffer.
    start: usize,
    /// Offset of the 16-bit length field.
    at: usize,
    /// Names the structure, for the error when it does not fit.
    what: &'static str,
}

impl LengthSlot {
    /// Remembers where a structure starts and where its length field is (`offset` from start);
    /// the caller writes the placeholder bytes itself as part of the structure.
    pub(crate) fn new(out: &BytesMut, offset: usize, what: &'static str) -> Self {
        let start = out.len();
        LengthSlot {
            start,
            at: start + offset,
            what,
        }
    }

    /// Offset of the structure's first byte in the output buffer.
    pub(crate) fn start(&self) -> usize {
        self.start
    }

    /// Pads with zeros to a multiple of 8 (when asked), then writes the length of everything
    /// written since `new`. Returns that length, or an error when it does not fit in 16 bits:
    /// a length field never says anything but the truth about the bytes that follow.
    pub(crate) fn finish(self, out: &mut BytesMut, pad_to_8: bool) -> Result<usize, EncodeError> {
        if pad_to_8 {
            put_zeros(out, pad8(out.len() - self.start));
        }
        let len = out.len() - self.start;
        self.patch(out, len)
    }

    /// Writes `len` (which may differ from the bytes written, e.g. an unpadded match length).
    pub(crate) fn patch(self, out: &mut BytesMut, len: usize) -> Result<usize, EncodeError> {
        let value = u16::try_from(len).map_err(|_| EncodeError::TooLong {
            what: self.what,
            length: len,
            max: usize::from(u16::MAX),
        })?;
        if let Some(slot) = out.get_mut(self.at..self.at + 2) {
            slot.copy_from_slice(&value.to_be_bytes());
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn be_uint_reads_every_width_alike() {
        let bytes: Vec<u8> = (1..=16).collect();
        for n in 0..=16 {
            let slow = bytes[..n]
                .iter()
                .fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
            assert_eq!(be_uint(&bytes[..n]), slow, "{n} bytes");
        }
    }

    #[test]
    fn a_length_slot_writes_the_true_length_or_refuses() {
        let mut out = BytesMut::new();
        let slot = LengthSlot::new(&out, 2, "thing");
        out.put_slice(&[0xaa, 0xbb, 0, 0, 1]);
        assert_eq!(slot.finish(&mut out, true), Ok(8));
        assert_eq!(&out[..], &[0xaa, 0xbb, 0, 8, 1, 0, 0, 0]);

        let mut out = BytesMut::new();
        let slot = LengthSlot::new(&out, 0, "thing");
        out.put_bytes(0, 65_536);
        assert_eq!(
            slot.finish(&mut out, false),
            Err(EncodeError::TooLong {
                what: "thing",
                length: 65_536,
                max: 65_535
            })
        );
        assert_eq!(&out[..2], &[0, 0], "no capped length written");
    }
}
