//! OpenFlow properties (`ofp_prop_header`: type, length, payload, zero padding to a multiple
//! of 8), as NXAST_CONTROLLER2 and NXT_PACKET_IN2 carry them (OVS lib/ofp-prop.c). The length
//! counts the 4-byte header and the payload, not the padding; the padding must be there.

use bytes::{BufMut, Bytes, BytesMut};

use crate::wire::{pad8, put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError};

/// Property types from this one up are experimenter properties (experimenter id, then type).
const OFPPROP_EXPERIMENTER: u16 = 0xffff;
/// Header of an experimenter property: type, length, experimenter id, experimenter type.
const EXPERIMENTER_HEADER_LEN: usize = 12;

/// A property this crate does not interpret, kept verbatim: its type and its payload (for an
/// experimenter property, the experimenter id and type first), without the padding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawProperty {
    pub prop_type: u16,
    pub payload: Bytes,
}

impl RawProperty {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        put(out, self.prop_type, &self.payload)
    }
}

/// One property as read: its type and its unpadded payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prop<'a> {
    pub prop_type: u16,
    pub payload: &'a [u8],
    /// Names the property, for errors.
    what: &'static str,
}

/// Reads the next property of `r` (`None` at its end), refusing what ofpprop_pull refuses: a
/// length shorter than the header, padding missing, an experimenter property shorter than its
/// header or of experimenter 0.
pub(crate) fn next<'a>(
    r: &mut Reader<'a>,
    what: &'static str,
) -> Result<Option<Prop<'a>>, DecodeError> {
    if r.is_empty() {
        return Ok(None);
    }
    let mut head = r.child(r.peek_rest(), what);
    let prop_type = head.u16()?;
    let len = usize::from(head.u16()?);
    let min = if prop_type == OFPPROP_EXPERIMENTER {
        EXPERIMENTER_HEADER_LEN
    } else {
        4
    };
    if len < min {
        return Err(DecodeError::BadLength {
            what,
            length: len,
            reason: "shorter than its header (OFPBPC_BAD_LEN)",
        });
    }
    if len + pad8(len) > r.remaining() {
        return Err(DecodeError::BadLength {
            what,
            length: len,
            reason: "it and its padding to 8 bytes run past the end (OFPBPC_BAD_LEN)",
        });
    }
    let whole = r.take(len + pad8(len))?;
    let payload = &whole[4..len];
    if prop_type == OFPPROP_EXPERIMENTER && payload.get(..4) == Some(&[0, 0, 0, 0]) {
        return Err(DecodeError::BadValue {
            what: "experimenter property of experimenter 0 (OFPBPC_BAD_EXPERIMENTER)",
            value: 0,
        });
    }
    Ok(Some(Prop {
        prop_type,
        payload,
        what,
    }))
}

impl<'a> Prop<'a> {
    fn bad_len(&self, reason: &'static str) -> DecodeError {
        DecodeError::BadLength {
            what: self.what,
            length: self.payload.len() + 4,
            reason,
        }
    }

    /// An 8-bit value: at least one byte (OVS is forgiving of more).
    pub(crate) fn u8(&self) -> Result<u8, DecodeError> {
        match self.payload {
            [v, ..] => Ok(*v),
            [] => Err(self.bad_len("no room for its 8-bit value")),
        }
    }

    /// A 16-bit value: at least two bytes (OVS is forgiving of more).
    pub(crate) fn u16(&self) -> Result<u16, DecodeError> {
        match self.payload {
            [hi, lo, ..] => Ok(u16::from_be_bytes([*hi, *lo])),
            _ => Err(self.bad_len("no room for its 16-bit value")),
        }
    }

    /// A 32-bit value: exactly four bytes.
    pub(crate) fn u32(&self) -> Result<u32, DecodeError> {
        <[u8; 4]>::try_from(self.payload)
            .map(u32::from_be_bytes)
            .map_err(|_| self.bad_len("a 32-bit property is 8 bytes long"))
    }

    /// A 64-bit value, 8-byte aligned: four bytes of padding, then the value.
    pub(crate) fn u64(&self) -> Result<u64, DecodeError> {
        match self.payload {
            [_, _, _, _, value @ ..] => <[u8; 8]>::try_from(value)
                .map(u64::from_be_bytes)
                .map_err(|_| self.bad_len("a 64-bit property is 16 bytes long")),
            _ => Err(self.bad_len("a 64-bit property is 16 bytes long")),
        }
    }

    /// The nested properties after four bytes of padding (ofpprop_parse_nested).
    pub(crate) fn nested(&self) -> Result<&'a [u8], DecodeError> {
        self.payload
            .get(4..)
            .ok_or_else(|| self.bad_len("shorter than a nested property's 8-byte header"))
    }

    /// The property kept as it is.
    pub(crate) fn raw(&self) -> RawProperty {
        RawProperty {
            prop_type: self.prop_type,
            payload: Bytes::copy_from_slice(self.payload),
        }
    }
}

/// Writes a property of `payload`, padded to 8 bytes.
pub(crate) fn put(out: &mut BytesMut, prop_type: u16, payload: &[u8]) -> Result<(), EncodeError> {
    let slot = start(out, prop_type);
    out.put_slice(payload);
    finish(out, slot)
}

pub(crate) fn put_u8(out: &mut BytesMut, prop_type: u16, value: u8) -> Result<(), EncodeError> {
    put(out, prop_type, &[value])
}

/// A 16-bit property is 8 bytes long, its two bytes of padding counted in its length, as the
/// OpenFlow specifications give it and OVS writes it (ofpprop_put_be16).
pub(crate) fn put_u16(out: &mut BytesMut, prop_type: u16, value: u16) -> Result<(), EncodeError> {
    let [hi, lo] = value.to_be_bytes();
    put(out, prop_type, &[hi, lo, 0, 0])
}

pub(crate) fn put_u32(out: &mut BytesMut, prop_type: u16, value: u32) -> Result<(), EncodeError> {
    put(out, prop_type, &value.to_be_bytes())
}

/// A 64-bit property: four bytes of padding keep the value 8-byte aligned (ofpprop_put_be64).
pub(crate) fn put_u64(out: &mut BytesMut, prop_type: u16, value: u64) -> Result<(), EncodeError> {
    let mut payload = [0u8; 12];
    payload[4..].copy_from_slice(&value.to_be_bytes());
    put(out, prop_type, &payload)
}

/// A property of nested properties: four bytes of padding, then `nested` (ofpprop_start_nested).
pub(crate) fn put_nested(
    out: &mut BytesMut,
    prop_type: u16,
    nested: &[u8],
) -> Result<(), EncodeError> {
    let slot = start(out, prop_type);
    put_zeros(out, 4);
    out.put_slice(nested);
    finish(out, slot)
}

/// Writes the header of a property whose payload the caller writes next (ofpprop_start).
pub(crate) fn start(out: &mut BytesMut, prop_type: u16) -> LengthSlot {
    let slot = LengthSlot::new(out, 2, "property");
    out.put_u16(prop_type);
    out.put_u16(0);
    slot
}

/// Writes the length of a property started with [`start`] and pads it (ofpprop_end).
pub(crate) fn finish(out: &mut BytesMut, slot: LengthSlot) -> Result<(), EncodeError> {
    let start = slot.start();
    let len = slot.patch(out, out.len() - start)?;
    put_zeros(out, pad8(len));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    fn props(bytes: &[u8]) -> Result<Vec<(u16, Vec<u8>)>, DecodeError> {
        let mut r = Reader::new(bytes, "t");
        let mut out = Vec::new();
        while let Some(p) = next(&mut r, "test property")? {
            out.push((p.prop_type, p.payload.to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn each_width_is_written_as_ovs_writes_it() {
        let mut out = BytesMut::new();
        put_u8(&mut out, 2, 0x11).unwrap();
        put_u16(&mut out, 0, 0x2233).unwrap();
        put_u32(&mut out, 5, 0x4455_6677).unwrap();
        put_u64(&mut out, 4, 0x0102_0304_0506_0708).unwrap();
        put(&mut out, 4, &[]).unwrap();
        put_nested(&mut out, 8, &hex("80000008aabbccdd")).unwrap();
        assert_eq!(
            out.to_vec(),
            hex("0002000511000000 0000000822330000 0005000844556677 \
                 00040010000000000102030405060708 0004000400000000 \
                 000800100000000080000008aabbccdd")
        );
        let read = props(&out).unwrap();
        assert_eq!(read.len(), 6);
        assert_eq!(read[3].1.len(), 12);
    }

    #[test]
    fn refuses_what_ofpprop_pull_refuses() {
        for bad in [
            // shorter than its header
            "00000003",
            // padding missing
            "0000000511",
            "000000051100",
            // an experimenter property shorter than its header, or of experimenter 0
            "ffff000800002320",
            "ffff000c000000000000000100000000",
        ] {
            assert!(props(&hex(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            props(&hex("ffff000c000023200000000100000000")).unwrap(),
            vec![(0xffff, hex("0000232000000001"))]
        );
    }
}
