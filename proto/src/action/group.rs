//! `group:N`: OFPAT_GROUP, process the packet through group N.

use bytes::{BufMut, BytesMut};

use super::{std_fixed, Action, Ctx, Kind, WireId, OFPAT_GROUP};
use crate::text::error::{bad, number, ParseError};
use crate::text::lexer::Token;
use crate::wire::Reader;
use crate::{DecodeError, EncodeError};

pub(super) static GROUP: Kind = Kind {
    wire: &[WireId::Std(OFPAT_GROUP)],
    keywords: &["group"],
    decode,
    parse,
};

/// The largest group number (OFPG_MAX); the numbers above it are reserved.
pub const OFPG_MAX: u32 = 0xffff_ff00;

pub(super) fn encode(group_id: u32, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut action = std_fixed::<8>(OFPAT_GROUP);
    action[4..].copy_from_slice(&group_id.to_be_bytes());
    out.put_slice(&action);
    Ok(())
}

pub(super) fn format(group_id: u32, out: &mut String) {
    out.push_str(&format!("group:{group_id}"));
}

fn decode(_: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    let group_id = body.u32()?;
    if !body.is_empty() {
        return Err(DecodeError::BadLength {
            what: "group action",
            length: body.remaining() + 8,
            reason: "must be 8 bytes",
        });
    }
    Ok(Some(Action::Group(group_id)))
}

fn parse(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    let v = token
        .value
        .ok_or_else(|| bad(token, "missing group number"))?;
    let group_id: u32 = number(token, v)?;
    if group_id > OFPG_MAX {
        return Err(bad(token, "group numbers go up to 4294967040"));
    }
    Ok(vec![Action::Group(group_id)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::roundtrip;
    use super::*;

    #[test]
    fn group_from_ovs() {
        // actions=group:5 (ovs-ofctl 3.1)
        roundtrip("0016000800000005", &[Action::Group(5)]);
    }
}
