//! OpenFlow 1.3 actions and the Nicira extension actions ofnode uses.

use bytes::{BufMut, BytesMut};

use crate::field::{Field, FieldRange, TlvHeader};
use crate::wire::{be_uint, pad8, put_uint, put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError};

pub const OFPAT_OUTPUT: u16 = 0;
pub const OFPAT_SET_FIELD: u16 = 25;
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;

/// Nicira's experimenter id (NX_VENDOR_ID).
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
pub const NXAST_REG_MOVE: u16 = 6;
pub const NXAST_REG_LOAD: u16 = 7;
pub const NXAST_NOTE: u16 = 8;
pub const NXAST_OUTPUT_REG: u16 = 15;

/// `max_len` ovs-ofctl uses for output:CONTROLLER and output:REG (send the whole packet).
pub const OFPCML_NO_BUFFER: u16 = 0xffff;

/// Bytes before an NXAST_NOTE's note text: type, len, vendor, subtype.
const NOTE_HEADER_LEN: usize = 10;

/// An action in an apply/write-actions instruction or a packet-out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// OFPAT_OUTPUT: `output:N`, `IN_PORT`, `LOCAL`, `CONTROLLER:max_len`.
    Output { port: u32, max_len: u16 },
    /// NXAST_OUTPUT_REG: `output:NXM_NX_REG2[]`.
    OutputReg { src: FieldRange, max_len: u16 },
    /// NXAST_REG_LOAD: `load:0x5->NXM_NX_REG0[]`.
    RegLoad { dst: FieldRange, value: u64 },
    /// NXAST_REG_MOVE: `move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[]`.
    RegMove { src: FieldRange, dst: FieldRange },
    /// OFPAT_SET_FIELD: `set_field:192.0.2.2->tun_dst`.
    SetField { field: Field, value: u128 },
    /// NXAST_NOTE: opaque bytes, always zero-padded as on the wire (see [`Note`]).
    Note(Note),
    /// Any other action, kept verbatim (header included) and re-emitted unchanged.
    Unknown(Vec<u8>),
}

/// The bytes of an NXAST_NOTE, zero-padded so the action is a multiple of 8 bytes long.
///
/// OVS keeps the padding as part of the note (decode_NXAST_RAW_NOTE copies `len - 10` bytes)
/// and prints every byte (`note:01.03` dumps as `note:01.03.00.00.00.00`), so the padded
/// bytes are the note. The field is private so that an unpadded note, which would encode to
/// different bytes than it holds and not survive a round trip, cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Note(Vec<u8>);

impl Note {
    /// A note of `bytes`, zero-padded as OVS pads it.
    pub fn new(bytes: &[u8]) -> Note {
        let mut note = bytes.to_vec();
        note.resize(note.len() + pad8(NOTE_HEADER_LEN + note.len()), 0);
        Note(note)
    }

    /// The padded bytes, as on the wire and as ovs-ofctl prints them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Action {
    /// A note action padded as OVS pads it, so it equals what the switch reports back.
    pub fn note(bytes: &[u8]) -> Action {
        Action::Note(Note::new(bytes))
    }

    /// `output:port` with ovs-ofctl's max_len (65535 for CONTROLLER, else 0).
    pub fn output(port: u32) -> Action {
        let max_len = if port == crate::OFPP_CONTROLLER {
            OFPCML_NO_BUFFER
        } else {
            0
        };
        Action::Output { port, max_len }
    }

    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Action::Output { port, max_len } => {
                out.put_u16(OFPAT_OUTPUT);
                out.put_u16(16);
                out.put_u32(*port);
                out.put_u16(*max_len);
                put_zeros(out, 6);
            }
            Action::SetField { field, value } => encode_set_field(*field, *value, out)?,
            Action::RegLoad { dst, value } => {
                let slot = nx_header(out, NXAST_REG_LOAD);
                out.put_u16(dst.ofs_nbits());
                out.put_u32(action_header(dst.field));
                out.put_u64(*value);
                slot.finish(out, true)?;
            }
            Action::RegMove { src, dst } => {
                let slot = nx_header(out, NXAST_REG_MOVE);
                out.put_u16(src.n_bits);
                out.put_u16(src.ofs);
                out.put_u16(dst.ofs);
                out.put_u32(action_header(src.field));
                out.put_u32(action_header(dst.field));
                slot.finish(out, true)?;
            }
            Action::OutputReg { src, max_len } => {
                let slot = nx_header(out, NXAST_OUTPUT_REG);
                out.put_u16(src.ofs_nbits());
                out.put_u32(action_header(src.field));
                out.put_u16(*max_len);
                put_zeros(out, 6);
                slot.finish(out, true)?;
            }
            Action::Note(note) => {
                let slot = nx_header(out, NXAST_NOTE);
                out.put_slice(note.as_bytes());
                slot.finish(out, true)?;
            }
            Action::Unknown(raw) => out.put_slice(raw),
        }
        Ok(())
    }

    /// Decodes one action; `r` is positioned at its header.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Action, DecodeError> {
        let whole = r.peek_rest();
        let mut head = Reader::new(whole, "action header");
        let action_type = head.u16()?;
        let len = usize::from(head.u16()?);
        if len < 8 || len % 8 != 0 {
            return Err(DecodeError::BadLength {
                what: "action",
                length: len,
                reason: "must be a non-zero multiple of 8",
            });
        }
        let raw = r.take(len)?;
        let mut body = Reader::new(&raw[4..], "action");
        let decoded = match action_type {
            OFPAT_OUTPUT => Some(decode_output(&mut body)?),
            OFPAT_SET_FIELD => decode_set_field(&mut body)?,
            OFPAT_EXPERIMENTER => decode_experimenter(&mut body)?,
            _ => None,
        };
        Ok(decoded.unwrap_or_else(|| Action::Unknown(raw.to_vec())))
    }
}

/// Encodes a list of actions back to back.
pub fn encode_actions(actions: &[Action], out: &mut BytesMut) -> Result<(), EncodeError> {
    for action in actions {
        action.encode(out)?;
    }
    Ok(())
}

/// Decodes actions until `r` is exhausted.
pub(crate) fn decode_actions(r: &mut Reader<'_>) -> Result<Vec<Action>, DecodeError> {
    let mut actions = Vec::new();
    while !r.is_empty() {
        actions.push(Action::decode(r)?);
    }
    Ok(actions)
}

/// The NXM header by which NX actions name a field (NXM where one exists, as OVS sends).
fn action_header(field: Field) -> u32 {
    field.info().action_id().header(false)
}

/// Writes type/len/vendor/subtype of a Nicira action; the length is patched by the caller.
fn nx_header(out: &mut BytesMut, subtype: u16) -> LengthSlot {
    let slot = LengthSlot::new(out, 2, "Nicira action");
    out.put_u16(OFPAT_EXPERIMENTER);
    out.put_u16(0);
    out.put_u32(NX_VENDOR_ID);
    out.put_u16(subtype);
    slot
}

fn encode_set_field(field: Field, value: u128, out: &mut BytesMut) -> Result<(), EncodeError> {
    let id = field.info().match_id();
    let slot = LengthSlot::new(out, 2, "set_field action");
    out.put_u16(OFPAT_SET_FIELD);
    out.put_u16(0);
    out.put_u32(id.header(false));
    put_uint(out, value, usize::from(id.bytes));
    slot.finish(out, true)?;
    Ok(())
}

fn decode_output(body: &mut Reader<'_>) -> Result<Action, DecodeError> {
    let port = body.u32()?;
    let max_len = body.u16()?;
    Ok(Action::Output { port, max_len })
}

fn decode_set_field(body: &mut Reader<'_>) -> Result<Option<Action>, DecodeError> {
    let h = TlvHeader::from_u32(body.u32()?);
    let Some((field, id)) = Field::from_id(h.class, h.field, 0) else {
        return Ok(None);
    };
    if h.masked || h.len != id.bytes || id.bytes != field.info().bytes {
        // Masked set_field or a narrower alternate id: keep the bytes rather than guess.
        return Ok(None);
    }
    let value = be_uint(body.take(usize::from(id.bytes))?);
    Ok(Some(Action::SetField { field, value }))
}

fn decode_experimenter(body: &mut Reader<'_>) -> Result<Option<Action>, DecodeError> {
    if body.u32()? != NX_VENDOR_ID {
        return Ok(None);
    }
    match body.u16()? {
        NXAST_REG_LOAD => {
            let ofs_nbits = body.u16()?;
            let Some(field) = field_of_header(body.u32()?) else {
                return Ok(None);
            };
            let dst = checked_range(FieldRange::from_ofs_nbits(field, ofs_nbits), "load")?;
            let value = body.u64()?;
            Ok(Some(Action::RegLoad { dst, value }))
        }
        NXAST_REG_MOVE => {
            let n_bits = body.u16()?;
            let src_ofs = body.u16()?;
            let dst_ofs = body.u16()?;
            let (Some(src), Some(dst)) =
                (field_of_header(body.u32()?), field_of_header(body.u32()?))
            else {
                return Ok(None);
            };
            let src = checked_range(range(src, src_ofs, n_bits), "move source")?;
            let dst = checked_range(range(dst, dst_ofs, n_bits), "move destination")?;
            Ok(Some(Action::RegMove { src, dst }))
        }
        NXAST_OUTPUT_REG => {
            let ofs_nbits = body.u16()?;
            let Some(field) = field_of_header(body.u32()?) else {
                return Ok(None);
            };
            let src = checked_range(FieldRange::from_ofs_nbits(field, ofs_nbits), "output_reg")?;
            let max_len = body.u16()?;
            Ok(Some(Action::OutputReg { src, max_len }))
        }
        // The action's length is a multiple of 8 (checked in `Action::decode`), so the rest is
        // already padded and `Note::new` adds nothing.
        NXAST_NOTE => Ok(Some(Action::note(body.rest()))),
        _ => Ok(None),
    }
}

fn range(field: Field, ofs: u16, n_bits: u16) -> FieldRange {
    FieldRange { field, ofs, n_bits }
}

/// The field an unmasked NXM/OXM header names, if it is in the table at the action width.
fn field_of_header(header: u32) -> Option<Field> {
    let h = TlvHeader::from_u32(header);
    let (field, id) = Field::from_id(h.class, h.field, 0)?;
    (!h.masked && h.len == id.bytes && id == field.info().action_id()).then_some(field)
}

fn checked_range(range: FieldRange, what: &'static str) -> Result<FieldRange, DecodeError> {
    if range.is_valid() {
        Ok(range)
    } else {
        Err(DecodeError::BadFieldRange {
            what,
            field: range.field,
            ofs: range.ofs,
            n_bits: range.n_bits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    fn roundtrip(bytes: &str, expected: &[Action]) {
        let bytes = hex(bytes);
        let decoded = decode_actions(&mut Reader::new(&bytes, "t")).unwrap();
        assert_eq!(decoded, expected);
        let mut out = BytesMut::new();
        encode_actions(&decoded, &mut out).unwrap();
        assert_eq!(&out[..], &bytes[..]);
    }

    // Each byte string below is the action list ovs-ofctl 3.1 sent in a flow_mod for the text
    // in the test name's comment (captured over a unix socket).

    #[test]
    fn move_tun_id_to_reg0() {
        // actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[]
        roundtrip(
            "ffff00180000232000060020000000000001200800010004",
            &[Action::RegMove {
                src: FieldRange::bits(Field::TunId, 0, 31),
                dst: FieldRange::whole(Field::Reg(0)),
            }],
        );
    }

    #[test]
    fn load_and_note() {
        // actions=load:0x2a->NXM_NX_REG0[], note:01.02.03
        roundtrip(
            "ffff0018000023200007001f00010004000000000000002affff0010000023200008010203000000",
            &[
                Action::RegLoad {
                    dst: FieldRange::whole(Field::Reg(0)),
                    value: 0x2a,
                },
                Action::note(&[1, 2, 3]),
            ],
        );
    }

    #[test]
    fn notes_of_any_length_survive_a_round_trip() {
        // Whatever bytes a note is built from, what it holds is what goes on the wire, so
        // decode(encode(note)) == note (an unpadded note once decoded to its padded self).
        for len in 0..40u8 {
            let bytes: Vec<u8> = (1..=len).collect();
            let action = Action::note(&bytes);
            let mut out = BytesMut::new();
            encode_actions(std::slice::from_ref(&action), &mut out).unwrap();
            assert_eq!(out.len() % 8, 0, "note of {len} bytes");
            let decoded = decode_actions(&mut Reader::new(&out, "t")).unwrap();
            assert_eq!(decoded, vec![action.clone()], "note of {len} bytes");
            let Action::Note(note) = &action else {
                unreachable!()
            };
            assert_eq!(&note.as_bytes()[..bytes.len()], &bytes[..]);
            assert_eq!(note.as_bytes().len(), out.len() - NOTE_HEADER_LEN);
        }
        // Padding is idempotent: the padded bytes make the same note.
        assert_eq!(Note::new(&[1, 3]), Note::new(&[1, 3, 0, 0, 0, 0]));
    }

    #[test]
    fn output_reg() {
        // actions=output:NXM_NX_REG2[]
        roundtrip(
            "ffff001800002320000f001f00010404ffff000000000000",
            &[Action::OutputReg {
                src: FieldRange::whole(Field::Reg(2)),
                max_len: 0xffff,
            }],
        );
    }

    #[test]
    fn set_field_tun_dst_and_output() {
        // actions=set_field:192.0.2.2->tun_dst,output:1 (after a move)
        roundtrip(
            "0019001000014004c00002020000000000000010000000010000000000000000",
            &[
                Action::SetField {
                    field: Field::TunDst,
                    value: 0xc000_0202,
                },
                Action::output(1),
            ],
        );
    }

    #[test]
    fn load_tun_id_bits() {
        // actions=load:0x1234->NXM_NX_TUN_ID[0..31]
        roundtrip(
            "ffff0018000023200007001f000120080000000000001234",
            &[Action::RegLoad {
                dst: FieldRange::bits(Field::TunId, 0, 31),
                value: 0x1234,
            }],
        );
    }

    #[test]
    fn reserved_ports() {
        // actions=output:IN_PORT,LOCAL,CONTROLLER
        roundtrip(
            "00000010fffffff8000000000000000000000010fffffffe000000000000000000000010fffffffdffff000000000000",
            &[
                Action::output(crate::OFPP_IN_PORT),
                Action::output(crate::OFPP_LOCAL),
                Action::output(crate::OFPP_CONTROLLER),
            ],
        );
    }

    #[test]
    fn unknown_actions_are_kept() {
        // OFPAT_POP_VLAN (18) and an NX resubmit (subtype 1).
        roundtrip(
            "0012000800000000ffff0010000023200001000100000000",
            &[
                Action::Unknown(hex("0012000800000000")),
                Action::Unknown(hex("ffff0010000023200001000100000000")),
            ],
        );
    }

    #[test]
    fn rejects_bad_lengths_and_ranges() {
        for bad in [
            "0000000c00000001000000000000",
            "00000000",
            "0000001000000001",
            // load into NXM_NX_REG0[30..33]: past the end of a 32-bit register
            "ffff00180000232000070783000100040000000000000001",
        ] {
            assert!(
                decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
