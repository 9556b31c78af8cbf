//! `note`: NXAST_NOTE, opaque bytes carried with a flow (the seed keeps a pod's sandbox id in
//! one).

use bytes::{BufMut, BytesMut};

use super::{nx_header, Action, Ctx, Kind, WireId, NXAST_NOTE};
use crate::text::error::{bad, ParseError};
use crate::text::lexer::Token;
use crate::text::value::format_hex_dots;
use crate::wire::{pad8, Reader};
use crate::{DecodeError, EncodeError};

pub(super) static NOTE: Kind = Kind {
    wire: &[WireId::Nx(NXAST_NOTE)],
    keywords: &["note"],
    decode: decode_note,
    parse: parse_note,
};

/// Bytes before an NXAST_NOTE's note text: type, len, vendor, subtype.
const NOTE_HEADER_LEN: usize = 10;

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

    pub(super) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = nx_header(out, NXAST_NOTE, "note action");
        out.put_slice(&self.0);
        slot.finish(out, true).map(|_| ())
    }

    pub(super) fn format(&self, out: &mut String) {
        out.push_str("note:");
        out.push_str(&format_hex_dots(&self.0));
    }
}

/// The action's length is a multiple of 8 (checked by the caller), so the rest is already
/// padded and `Note::new` adds nothing.
fn decode_note(_: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    Ok(Some(Action::note(body.rest())))
}

/// `note:01.02.03` (dots optional), padded as OVS pads it.
fn parse_note(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    let v = token.value.unwrap_or("");
    let digits: Vec<u8> = v.bytes().filter(|&b| b != b'.').collect();
    if digits.len() % 2 != 0 {
        return Err(bad(token, "a note needs whole bytes (two hex digits each)"));
    }
    let bytes = digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| bad(token, "bad hex digit in note"))?;
    Ok(vec![Action::note(&bytes)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::roundtrip;
    use super::super::{decode_actions, encode_actions};
    use super::*;
    use crate::{Field, FieldRange};

    #[test]
    fn load_and_note() {
        // actions=load:0x2a->NXM_NX_REG0[], note:01.02.03 (ovs-ofctl 3.1)
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
}
