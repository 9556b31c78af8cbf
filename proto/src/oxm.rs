//! The OpenFlow 1.3 match (`ofp_match` of type OXM) and its TLV codec, driven by the field table.

use std::net::Ipv4Addr;

use bytes::{BufMut, BytesMut};

use crate::field::{Field, TlvHeader, OFPXMC_EXPERIMENTER};
use crate::wire::{be_uint, pad8, put_uint, put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError};

/// `ofp_match.type` for OXM matches, the only kind OpenFlow 1.3 uses.
pub const OFPMT_OXM: u16 = 1;

/// One matched field: `value` under `mask` (`None` means every significant bit is matched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatchEntry {
    pub field: Field,
    pub value: u64,
    pub mask: Option<u64>,
}

/// An OXM TLV for a field ofnode does not interpret, kept verbatim so it survives a round trip.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawOxm {
    pub header: u32,
    /// The TLV payload (value, mask, and for experimenter classes the experimenter id).
    pub payload: Vec<u8>,
}

/// A flow match: at most one entry per field, kept in OVS's canonical encoding order so that
/// two matches with the same meaning are equal (and hash equally) whatever order they were built in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Match {
    entries: Vec<MatchEntry>,
    unknown: Vec<RawOxm>,
}

impl Match {
    pub fn new() -> Self {
        Self::default()
    }

    /// Matches `field` exactly.
    pub fn set(&mut self, field: Field, value: u64) -> &mut Self {
        self.set_masked(field, value, u64::MAX)
    }

    /// Matches the bits of `field` set in `mask`. The value is reduced to the mask (as OVS
    /// stores it), a mask covering the whole field becomes an exact match and an empty mask
    /// removes the field. Masks on non-maskable fields are kept; the switch rejects them and
    /// the text parser refuses them first.
    pub fn set_masked(&mut self, field: Field, value: u64, mask: u64) -> &mut Self {
        let info = field.info();
        let full = info.full_mask();
        let mask = mask & full;
        let field = info.field;
        if mask == 0 {
            self.remove(field);
            return self;
        }
        let entry = MatchEntry {
            field,
            value: value & mask,
            mask: (mask != full).then_some(mask),
        };
        match self.position(field) {
            Ok(i) => self.entries[i] = entry,
            Err(i) => self.entries.insert(i, entry),
        }
        self
    }

    /// Builder form of [`Match::set`].
    pub fn with(mut self, field: Field, value: u64) -> Self {
        self.set(field, value);
        self
    }

    /// Builder form of [`Match::set_masked`].
    pub fn with_masked(mut self, field: Field, value: u64, mask: u64) -> Self {
        self.set_masked(field, value, mask);
        self
    }

    /// Matches an IPv4 field against `addr/prefix_len` (32 or more is an exact match).
    pub fn with_ipv4(self, field: Field, addr: Ipv4Addr, prefix_len: u8) -> Self {
        self.with_masked(field, u64::from(u32::from(addr)), prefix_mask(prefix_len))
    }

    pub fn remove(&mut self, field: Field) -> Option<MatchEntry> {
        let field = field.info().field;
        self.position(field).ok().map(|i| self.entries.remove(i))
    }

    pub fn get(&self, field: Field) -> Option<MatchEntry> {
        let field = field.info().field;
        self.position(field).ok().map(|i| self.entries[i])
    }

    /// The exact value of `field`, if it is matched without a mask.
    pub fn exact(&self, field: Field) -> Option<u64> {
        self.get(field)
            .filter(|e| e.mask.is_none())
            .map(|e| e.value)
    }

    /// Entries in canonical (encoding) order.
    pub fn entries(&self) -> &[MatchEntry] {
        &self.entries
    }

    /// TLVs of fields this crate does not interpret, in the order received.
    pub fn unknown(&self) -> &[RawOxm] {
        &self.unknown
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.unknown.is_empty()
    }

    fn position(&self, field: Field) -> Result<usize, usize> {
        let index = field.index();
        self.entries
            .binary_search_by_key(&index, |e| e.field.index())
    }

    /// Writes the OXM TLVs alone (no `ofp_match` header), as set_field and NXM users need.
    pub(crate) fn encode_tlvs(&self, out: &mut BytesMut) {
        for entry in &self.entries {
            encode_entry(entry, out);
        }
        for raw in &self.unknown {
            out.put_u32(raw.header);
            out.put_slice(&raw.payload);
        }
    }

    /// Writes an `ofp_match`: type, unpadded length, TLVs, zero padding to 8 bytes.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let start = out.len();
        let slot = LengthSlot::new(out, 2, "match");
        out.put_u16(OFPMT_OXM);
        out.put_u16(0);
        self.encode_tlvs(out);
        // The length field excludes the padding that follows.
        let unpadded = out.len() - start;
        put_zeros(out, pad8(unpadded));
        slot.patch(out, unpadded)?;
        Ok(())
    }

    /// Reads an `ofp_match` including its padding.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
        let match_type = r.u16()?;
        if match_type != OFPMT_OXM {
            return Err(DecodeError::BadValue {
                what: "match type (only OXM is OpenFlow 1.3)",
                value: u64::from(match_type),
            });
        }
        let length = usize::from(r.u16()?);
        if length < 4 {
            return Err(DecodeError::BadLength {
                what: "match",
                length,
                reason: "shorter than its own 4-byte header",
            });
        }
        let mut tlvs = r.sub(length - 4, "match fields")?;
        r.skip(pad8(length))?;
        let mut m = Match::new();
        while !tlvs.is_empty() {
            m.decode_tlv(&mut tlvs)?;
        }
        Ok(m)
    }

    fn decode_tlv(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let raw_header = r.u32()?;
        let h = TlvHeader::from_u32(raw_header);
        let payload = r.take(usize::from(h.len))?;
        let known = if h.class == OFPXMC_EXPERIMENTER {
            None
        } else {
            Field::from_id(h.class, h.field)
        };
        let Some((field, id)) = known else {
            self.unknown.push(RawOxm {
                header: raw_header,
                payload: payload.to_vec(),
            });
            return Ok(());
        };
        let width = usize::from(id.bytes);
        let expected = if h.masked { 2 * width } else { width };
        if payload.len() != expected {
            return Err(DecodeError::BadLength {
                what: "match field",
                length: payload.len(),
                reason: "does not equal the field's width (twice that when masked)",
            });
        }
        if self.get(field).is_some() {
            return Err(DecodeError::DuplicateField { field });
        }
        let (value_bytes, mask_bytes) = payload.split_at(width);
        let mut value = be_uint(value_bytes);
        let mut mask = if h.masked {
            be_uint(mask_bytes)
        } else {
            u64::MAX
        };
        if width != usize::from(field.info().bytes) {
            // Only in_port has a narrower NXM form: widen its reserved ports (0xff00..) the way
            // OpenFlow 1.1+ numbers them.
            value = widen_port(value);
            mask = u64::MAX;
        }
        self.set_masked(field, value, mask);
        Ok(())
    }
}

/// An OpenFlow 1.0 16-bit port number as OpenFlow 1.1+ writes it.
fn widen_port(port: u64) -> u64 {
    if port >= 0xff00 {
        port + 0xffff_0000
    } else {
        port
    }
}

fn encode_entry(entry: &MatchEntry, out: &mut BytesMut) {
    let info = entry.field.info();
    let id = info.match_id();
    let n = usize::from(id.bytes);
    match entry.mask {
        None => {
            // ip_frag's exact match means "both frag bits": OVS sends it unmasked (value 0..3).
            out.put_u32(id.header(false));
            put_uint(out, entry.value, n);
        }
        Some(mask) => {
            out.put_u32(id.header(true));
            put_uint(out, entry.value, n);
            put_uint(out, mask, n);
        }
    }
}

/// A netmask of `prefix_len` leading ones (32 or more: all ones).
pub fn prefix_mask(prefix_len: u8) -> u64 {
    if prefix_len >= 32 {
        0xffff_ffff
    } else {
        u64::from(!(u32::MAX >> prefix_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The match ovs-ofctl 3.1 sends for
    /// `table=0, priority=200, in_port=1, arp, nw_src=10.128.0.0/14, nw_dst=10.129.0.0/23`.
    const ARP_MATCH: &str = "0001002a800000040000000180000a02080680002d080a800000fffc000080002f080a810000fffffe00000000000000";

    #[test]
    fn decodes_and_reencodes_ovs_arp_match() {
        let bytes = hex(ARP_MATCH);
        let mut r = Reader::new(&bytes, "test");
        let m = Match::decode(&mut r).unwrap();
        assert!(r.is_empty());
        let expected = Match::new()
            .with(Field::InPort, 1)
            .with(Field::EthType, 0x0806)
            .with_ipv4(Field::ArpSpa, Ipv4Addr::new(10, 128, 0, 0), 14)
            .with_ipv4(Field::ArpTpa, Ipv4Addr::new(10, 129, 0, 0), 23);
        assert_eq!(m, expected);
        let mut out = BytesMut::new();
        m.encode(&mut out).unwrap();
        assert_eq!(&out[..], &bytes[..]);
    }

    #[test]
    fn order_of_building_does_not_matter() {
        let a = Match::new()
            .with(Field::Reg(0), 5)
            .with(Field::EthType, 0x800);
        let b = Match::new()
            .with(Field::EthType, 0x800)
            .with(Field::Reg(0), 5);
        assert_eq!(a, b);
    }

    #[test]
    fn full_mask_is_exact_and_zero_mask_removes() {
        let m = Match::new().with_masked(Field::Reg(1), 7, 0xffff_ffff);
        assert_eq!(m.get(Field::Reg(1)).unwrap().mask, None);
        let m = m.with_masked(Field::Reg(1), 7, 0);
        assert!(m.is_empty());
        let frag = Match::new().with_masked(Field::IpFrag, 3, 3);
        assert_eq!(frag.exact(Field::IpFrag), Some(3));
    }

    #[test]
    fn unknown_fields_survive() {
        // ct_state (NXM_NX_CT_STATE, class 1 field 105, 4 bytes) is not in the table.
        let bytes = hex("0001000c0001d2040000002100000000");
        let m = Match::decode(&mut Reader::new(&bytes, "t")).unwrap();
        assert_eq!(m.unknown().len(), 1);
        let mut out = BytesMut::new();
        m.encode(&mut out).unwrap();
        assert_eq!(&out[..], &bytes[..]);
    }

    #[test]
    fn rejects_bad_lengths() {
        for bad in [
            "0001",
            "00010002",
            "0001000c80000004000000",
            "0001000c8000000300000001000000",
        ] {
            assert!(
                Match::decode(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
