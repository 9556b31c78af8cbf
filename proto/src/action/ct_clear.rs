//! `ct_clear`: NXAST_CT_CLEAR, forget the packet's conntrack state (its ct_state, zone, mark,
//! label and original-direction fields), as if it had never been through `ct`.

use bytes::{BufMut, BytesMut};

use super::{nx_fixed, Action, Ctx, Kind, WireId, NXAST_CT_CLEAR};
use crate::text::error::{bad, ParseError};
use crate::text::lexer::Token;
use crate::wire::Reader;
use crate::{DecodeError, EncodeError};

pub(super) static CT_CLEAR: Kind = Kind {
    wire: &[WireId::Nx(NXAST_CT_CLEAR)],
    keywords: &["ct_clear"],
    decode,
    parse,
};

pub(super) fn encode(out: &mut BytesMut) -> Result<(), EncodeError> {
    out.put_slice(&nx_fixed::<16>(NXAST_CT_CLEAR));
    Ok(())
}

pub(super) fn format(out: &mut String) {
    out.push_str("ct_clear");
}

/// OVS ignores the action's 6 bytes of padding (decode_NXAST_RAW_CT_CLEAR reads nothing).
fn decode(_: WireId, _: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    Ok(Some(Action::CtClear))
}

fn parse(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    match token.value {
        None | Some("") => Ok(vec![Action::CtClear]),
        Some(_) => Err(bad(token, "ct_clear takes no argument")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::roundtrip;
    use super::*;

    #[test]
    fn ct_clear_from_ovs() {
        // actions=ct_clear (ovs-ofctl 3.1)
        roundtrip("ffff001000002320002b000000000000", &[Action::CtClear]);
    }
}
