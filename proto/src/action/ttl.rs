//! `dec_ttl`: OFPAT_DEC_NW_TTL, decrement the IP TTL (dropping the packet when it reaches
//! zero). The Nicira form with controller ids (`dec_ttl(1,2)`) is not modelled: it is kept
//! verbatim when decoded and refused by the parser.

use bytes::{BufMut, BytesMut};

use super::{std_fixed, Action, Ctx, Kind, WireId, OFPAT_DEC_NW_TTL};
use crate::text::error::{bad, ParseError};
use crate::text::lexer::Token;
use crate::wire::Reader;
use crate::{DecodeError, EncodeError};

pub(super) static DEC_TTL: Kind = Kind {
    wire: &[WireId::Std(OFPAT_DEC_NW_TTL)],
    keywords: &["dec_ttl"],
    decode: decode_dec_ttl,
    parse: parse_dec_ttl,
};

pub(super) fn encode(out: &mut BytesMut) -> Result<(), EncodeError> {
    out.put_slice(&std_fixed::<8>(OFPAT_DEC_NW_TTL));
    Ok(())
}

pub(super) fn format(out: &mut String) {
    out.push_str("dec_ttl");
}

fn decode_dec_ttl(_: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    if body.remaining() != 4 {
        return Err(DecodeError::BadLength {
            what: "dec_ttl action",
            length: body.remaining() + 4,
            reason: "must be 8 bytes",
        });
    }
    Ok(Some(Action::DecTtl))
}

fn parse_dec_ttl(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    match token.value {
        None => Ok(vec![Action::DecTtl]),
        Some(_) => Err(bad(
            token,
            "dec_ttl with controller ids (NXAST_DEC_TTL_CNT_IDS) is not supported",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::roundtrip;
    use super::*;

    #[test]
    fn dec_ttl_from_ovs() {
        // actions=dec_ttl (ovs-ofctl 3.1)
        roundtrip("0018000800000000", &[Action::DecTtl]);
    }
}
