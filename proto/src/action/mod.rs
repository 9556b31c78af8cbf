//! OpenFlow 1.3 actions and the Nicira extension actions ofnode uses, table-driven as OVS's
//! lib/ofp-actions.c is: each action lives in one module of its own, which holds everything
//! about it — its wire form both ways, how ovs-ofctl prints it and parses it, and what it asks
//! of the flow's match. [`KINDS`] names every module's wire ids and keywords; this file only
//! dispatches. Actions this crate does not model are kept verbatim ([`Action::Unknown`]) and
//! re-emitted unchanged.

mod conjunction;
mod controller;
mod ct;
mod ct_clear;
mod fields;
mod group;
mod nat;
mod note;
mod output;
mod resubmit;
mod ttl;

use bytes::{BufMut, BytesMut};

pub use conjunction::Conjunction;
pub use controller::Controller;
pub use ct::{Ct, CtZone, NX_CT_F_COMMIT, NX_CT_F_FORCE};
pub use group::OFPG_MAX;
pub use nat::{
    Nat, NatRange, NX_NAT_F_DST, NX_NAT_F_PERSISTENT, NX_NAT_F_PROTO_HASH, NX_NAT_F_PROTO_RANDOM,
    NX_NAT_F_SRC,
};
pub use note::Note;
pub use resubmit::Resubmit;

use crate::field::{Field, FieldRange};
use crate::oxm::Match;
use crate::text::error::ParseError;
use crate::text::lexer::Token;
use crate::wire::{put_raw, LengthSlot, Reader};
use crate::{DecodeError, EncodeError};

pub const OFPAT_OUTPUT: u16 = 0;
pub const OFPAT_GROUP: u16 = 22;
pub const OFPAT_DEC_NW_TTL: u16 = 24;
pub const OFPAT_SET_FIELD: u16 = 25;
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;

/// Nicira's experimenter id (NX_VENDOR_ID).
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
pub const NXAST_RESUBMIT: u16 = 1;
pub const NXAST_REG_MOVE: u16 = 6;
pub const NXAST_REG_LOAD: u16 = 7;
pub const NXAST_NOTE: u16 = 8;
pub const NXAST_RESUBMIT_TABLE: u16 = 14;
pub const NXAST_OUTPUT_REG: u16 = 15;
pub const NXAST_CONTROLLER: u16 = 20;
pub const NXAST_CONJUNCTION: u16 = 34;
pub const NXAST_CT: u16 = 35;
pub const NXAST_NAT: u16 = 36;
pub const NXAST_CONTROLLER2: u16 = 37;
pub const NXAST_CT_CLEAR: u16 = 43;
pub const NXAST_RESUBMIT_TABLE_CT: u16 = 44;

/// `max_len` ovs-ofctl uses for output:CONTROLLER and output:REG (send the whole packet).
pub const OFPCML_NO_BUFFER: u16 = 0xffff;

/// An action in an apply/write-actions instruction, a group bucket or a packet-out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// OFPAT_OUTPUT: `output:N`, `IN_PORT`, `LOCAL`, `CONTROLLER:max_len`.
    Output { port: u32, max_len: u16 },
    /// NXAST_CONTROLLER(2): `controller(userdata=01.02,meter_id=1,...)` (see [`Controller`]).
    Controller(Controller),
    /// NXAST_OUTPUT_REG: `output:NXM_NX_REG2[]`.
    OutputReg { src: FieldRange, max_len: u16 },
    /// NXAST_REG_LOAD: `load:0x5->NXM_NX_REG0[]` (at most 64 bits at a time).
    RegLoad { dst: FieldRange, value: u64 },
    /// NXAST_REG_MOVE: `move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[]`.
    RegMove { src: FieldRange, dst: FieldRange },
    /// OFPAT_SET_FIELD: `set_field:192.0.2.2->tun_dst` (the whole field).
    SetField { field: Field, value: u128 },
    /// NXAST_NOTE: opaque bytes, always zero-padded as on the wire (see [`Note`]).
    Note(Note),
    /// NXAST_CT: `ct(commit,zone=5,table=30,nat(...),exec(...))`.
    Ct(Ct),
    /// NXAST_CT_CLEAR: `ct_clear`.
    CtClear,
    /// NXAST_NAT, only ever inside a `ct` action: `nat(src=10.0.0.1-10.0.0.5:80-90,random)`.
    Nat(Nat),
    /// NXAST_CONJUNCTION: `conjunction(id,k/n)`.
    Conjunction(Conjunction),
    /// NXAST_RESUBMIT(_TABLE(_CT)): `resubmit:3`, `resubmit(,30)`, `resubmit(3,30,ct)`.
    Resubmit(Resubmit),
    /// OFPAT_GROUP: `group:5`.
    Group(u32),
    /// OFPAT_DEC_NW_TTL: `dec_ttl`.
    DecTtl,
    /// Any other action, kept verbatim (header included) and re-emitted unchanged.
    Unknown(Vec<u8>),
}

/// Where an action list sits, for what its actions may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ctx {
    /// Inside `ct(...,exec(...))`: only ct_mark/ct_label writes and `nat` are allowed there,
    /// and only there.
    pub inside_ct: bool,
}

/// How an action is recognised on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WireId {
    /// A standard OFPAT_* type.
    Std(u16),
    /// A Nicira NXAST_* subtype of OFPAT_EXPERIMENTER.
    Nx(u16),
}

/// Reads one action's body (after its type and length, and for NX actions its vendor and
/// subtype); `Ok(None)` keeps the action verbatim (it names a field this crate does not know).
type DecodeFn = fn(WireId, &mut Reader<'_>, Ctx) -> Result<Option<Action>, DecodeError>;

/// Reads one action token of ovs-ofctl text; some keywords stand for several wire actions
/// (a masked set_field is one load per run of mask bits).
type ParseFn = fn(&Token<'_>, Ctx) -> Result<Vec<Action>, ParseError>;

/// One kind of action: its wire ids, its ovs-ofctl keywords, and how to read both forms.
pub(crate) struct Kind {
    pub wire: &'static [WireId],
    pub keywords: &'static [&'static str],
    pub decode: DecodeFn,
    pub parse: ParseFn,
}

/// Every action this crate models, one row per module.
static KINDS: [&Kind; 14] = [
    &output::OUTPUT,
    &output::OUTPUT_REG,
    &controller::CONTROLLER,
    &fields::SET_FIELD,
    &fields::LOAD,
    &fields::MOVE,
    &note::NOTE,
    &ct::CT,
    &ct_clear::CT_CLEAR,
    &nat::NAT,
    &conjunction::CONJUNCTION,
    &resubmit::RESUBMIT,
    &group::GROUP,
    &ttl::DEC_TTL,
];

fn kind_of_wire(id: WireId) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.wire.contains(&id))
}

/// The kind a keyword names, matched case-insensitively as ovs-ofctl matches action names
/// (strcasecmp; their arguments are case-sensitive).
fn kind_of_keyword(keyword: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .copied()
        .find(|k| k.keywords.iter().any(|w| w.eq_ignore_ascii_case(keyword)))
}

impl Action {
    /// A note action padded as OVS pads it, so it equals what the switch reports back.
    pub fn note(bytes: &[u8]) -> Action {
        Action::Note(Note::new(bytes))
    }

    /// `output:port` with ovs-ofctl's max_len (65535 for CONTROLLER, else 0).
    pub fn output(port: u32) -> Action {
        output::output(port)
    }

    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Action::Output { port, max_len } => output::encode_output(*port, *max_len, out),
            Action::OutputReg { src, max_len } => output::encode_output_reg(src, *max_len, out),
            Action::Controller(c) => c.encode(out),
            Action::RegLoad { dst, value } => fields::encode_load(dst, *value, out),
            Action::RegMove { src, dst } => fields::encode_move(src, dst, out),
            Action::SetField { field, value } => fields::encode_set_field(*field, *value, out),
            Action::Note(note) => note.encode(out),
            Action::Ct(ct) => ct.encode(out),
            Action::CtClear => ct_clear::encode(out),
            Action::Nat(nat) => nat.encode(out),
            Action::Conjunction(c) => c.encode(out),
            Action::Resubmit(r) => r.encode(out),
            Action::Group(id) => group::encode(*id, out),
            Action::DecTtl => ttl::encode(out),
            Action::Unknown(raw) => put_raw(out, raw, "unknown action"),
        }
    }

    /// Appends the action as ovs-ofctl prints it.
    pub fn format(&self, out: &mut String) {
        match self {
            Action::Output { port, max_len } => output::format_output(*port, *max_len, out),
            Action::OutputReg { src, .. } => output::format_output_reg(src, out),
            Action::Controller(c) => c.format(out),
            Action::RegLoad { dst, value } => fields::format_load(dst, *value, out),
            Action::RegMove { src, dst } => fields::format_move(src, dst, out),
            Action::SetField { field, value } => fields::format_set_field(*field, *value, out),
            Action::Note(note) => note.format(out),
            Action::Ct(ct) => ct.format(out),
            Action::CtClear => ct_clear::format(out),
            Action::Nat(nat) => nat.format(out),
            Action::Conjunction(c) => c.format(out),
            Action::Resubmit(r) => r.format(out),
            Action::Group(id) => group::format(*id, out),
            Action::DecTtl => ttl::format(out),
            Action::Unknown(raw) => format_unknown(raw, out),
        }
    }

    /// What ovs-ofctl requires of the flow's match for this action (ofpacts_check): a
    /// set_field/load/move only on a packet that has the field, `ct` only on IP, and so on.
    /// The reason, when the match does not allow it.
    pub(crate) fn check(&self, m: &Match) -> Result<(), String> {
        match self {
            Action::Output { port, .. } => output::check_port(*port),
            Action::OutputReg { src, .. } => fields::check_has(m, src.field),
            Action::RegLoad { dst, .. } => fields::check_has(m, dst.field),
            Action::RegMove { src, dst } => {
                fields::check_has(m, src.field).and_then(|()| fields::check_has(m, dst.field))
            }
            Action::SetField { field, .. } => fields::check_has(m, *field),
            Action::Ct(ct) => ct.check(m),
            Action::Nat(nat) => nat.check(m),
            Action::Resubmit(r) => r.check(m),
            Action::Note(_)
            | Action::Controller(_)
            | Action::CtClear
            | Action::Conjunction(_)
            | Action::Group(_)
            | Action::DecTtl
            | Action::Unknown(_) => Ok(()),
        }
    }

    /// Whether OVS takes the action in an action set (`write_actions`): sets and moves of
    /// fields, output, group, resubmit, ct, ct_clear and dec_ttl (action_set_classify); it
    /// refuses the others with OFPBAC_BAD_TYPE. An action this crate does not model is not
    /// judged.
    pub(crate) fn allowed_in_action_set(&self) -> bool {
        match self {
            Action::Output { .. }
            | Action::RegLoad { .. }
            | Action::RegMove { .. }
            | Action::SetField { .. }
            | Action::Ct(_)
            | Action::CtClear
            | Action::Resubmit(_)
            | Action::Group(_)
            | Action::DecTtl
            | Action::Unknown(_) => true,
            Action::OutputReg { .. }
            | Action::Controller(_)
            | Action::Note(_)
            | Action::Nat(_)
            | Action::Conjunction(_) => false,
        }
    }

    /// Decodes one action; `r` is positioned at its header.
    pub(crate) fn decode(r: &mut Reader<'_>, ctx: Ctx) -> Result<Action, DecodeError> {
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
        let mut body = r.child(&raw[4..], "action");
        let id = match action_type {
            OFPAT_EXPERIMENTER => {
                if body.u32()? != NX_VENDOR_ID {
                    return Ok(Action::Unknown(raw.to_vec()));
                }
                WireId::Nx(body.u16()?)
            }
            // OVS also reads some OpenFlow 1.1 types in 1.3 (mod_dl_src is type 3): a type
            // this crate does not model is kept raw, whatever OVS makes of it.
            t => WireId::Std(t),
        };
        let decoded = match kind_of_wire(id) {
            // Leniently (naming our own messages), an action OVS would refuse stays raw.
            Some(kind) if r.is_lenient() => (kind.decode)(id, &mut body, ctx).ok().flatten(),
            Some(kind) => (kind.decode)(id, &mut body, ctx)?,
            None => None,
        };
        Ok(decoded.unwrap_or_else(|| Action::Unknown(raw.to_vec())))
    }

    /// Parses one action token (`output:2`, `ct(commit,table=30)`, `LOCAL`).
    pub(crate) fn parse(token: &Token<'_>, ctx: Ctx) -> Result<Vec<Action>, ParseError> {
        match kind_of_keyword(token.key) {
            Some(kind) => (kind.parse)(token, ctx),
            // A bare port is an output to it.
            None => output::parse_bare_port(token),
        }
    }
}

/// An action this crate does not model, printed so that it cannot be mistaken for anything
/// OVS prints (and the parser refuses it): `unknown_action(` its bytes in hex `)`, or for a
/// Nicira action `nx_action(subtype=N,` the bytes after the subtype `)`.
fn format_unknown(raw: &[u8], out: &mut String) {
    let is_nx =
        raw.get(..2) == Some(&[0xff, 0xff]) && raw.get(4..8) == Some(&NX_VENDOR_ID.to_be_bytes());
    match (is_nx, raw.get(8..10)) {
        (true, Some(&[hi, lo])) => {
            out.push_str(&format!(
                "unknown_nx_action(subtype={},{})",
                u16::from_be_bytes([hi, lo]),
                hex(&raw[10..])
            ));
        }
        _ => out.push_str(&format!("unknown_action({})", hex(raw))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    decode_actions_in(r, Ctx::default())
}

/// Decodes actions until `r` is exhausted, in `ctx` (top level, or nested in a `ct`).
pub(crate) fn decode_actions_in(r: &mut Reader<'_>, ctx: Ctx) -> Result<Vec<Action>, DecodeError> {
    let mut actions = Vec::with_capacity(count_actions(r.peek_rest()));
    while !r.is_empty() {
        actions.push(Action::decode(r, ctx)?);
    }
    Ok(actions)
}

/// How many actions `bytes` holds (an upper bound when they are malformed), to size a list.
fn count_actions(mut bytes: &[u8]) -> usize {
    let mut n = 0;
    while let Some(&[_, _, hi, lo]) = bytes.get(..4) {
        n += 1;
        let len = usize::from(u16::from_be_bytes([hi, lo])).max(8);
        bytes = bytes.get(len..).unwrap_or_default();
    }
    n
}

/// A list of actions, comma-separated, as ovs-ofctl prints them.
pub(crate) fn format_list(actions: &[Action], out: &mut String) {
    for (i, action) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        action.format(out);
    }
}

/// A Nicira action of the fixed length `N` (a multiple of 8): type, length, vendor and
/// subtype written, the body zero for the caller to fill from byte 10. Built on the stack and
/// written with one `put_slice` (the encoders' hot path: a conjunction set is mostly these).
pub(crate) fn nx_fixed<const N: usize>(subtype: u16) -> [u8; N] {
    const { assert!(N >= 16 && N % 8 == 0 && N <= 0xffff) };
    let mut action = [0u8; N];
    action[..2].copy_from_slice(&OFPAT_EXPERIMENTER.to_be_bytes());
    action[2..4].copy_from_slice(&(N as u16).to_be_bytes());
    action[4..8].copy_from_slice(&NX_VENDOR_ID.to_be_bytes());
    action[8..10].copy_from_slice(&subtype.to_be_bytes());
    action
}

/// A standard action of the fixed length `N` (a multiple of 8): type and length written, the
/// body zero for the caller to fill from byte 4 (see [`nx_fixed`]).
pub(crate) fn std_fixed<const N: usize>(action_type: u16) -> [u8; N] {
    const { assert!(N >= 8 && N % 8 == 0 && N <= 0xffff) };
    let mut action = [0u8; N];
    action[..2].copy_from_slice(&action_type.to_be_bytes());
    action[2..4].copy_from_slice(&(N as u16).to_be_bytes());
    action
}

/// Writes type/len/vendor/subtype of a Nicira action; the length is patched by the caller.
pub(crate) fn nx_header(out: &mut BytesMut, subtype: u16, what: &'static str) -> LengthSlot {
    let slot = LengthSlot::new(out, 2, what);
    out.put_u16(OFPAT_EXPERIMENTER);
    out.put_u16(0);
    out.put_u32(NX_VENDOR_ID);
    out.put_u16(subtype);
    slot
}

/// Writes type/len of a standard action; the length is patched by the caller.
pub(crate) fn std_header(out: &mut BytesMut, action_type: u16, what: &'static str) -> LengthSlot {
    let slot = LengthSlot::new(out, 2, what);
    out.put_u16(action_type);
    out.put_u16(0);
    slot
}

/// Refuses bytes that must be zero (padding OVS checks, NXBRC_MUST_BE_ZERO).
pub(crate) fn must_be_zero(bytes: &[u8], what: &'static str) -> Result<(), DecodeError> {
    match bytes.iter().find(|&&b| b != 0) {
        None => Ok(()),
        Some(&b) => Err(DecodeError::BadValue {
            what,
            value: u64::from(b),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    pub(crate) fn roundtrip(bytes: &str, expected: &[Action]) {
        let bytes = hex(bytes);
        let decoded = decode_actions(&mut Reader::new(&bytes, "t")).unwrap();
        assert_eq!(decoded, expected);
        let mut out = BytesMut::new();
        encode_actions(&decoded, &mut out).unwrap();
        assert_eq!(&out[..], &bytes[..]);
    }

    #[test]
    fn every_wire_id_and_keyword_belongs_to_one_kind() {
        let mut ids = Vec::new();
        let mut words = Vec::new();
        for kind in KINDS {
            ids.extend(kind.wire.iter().copied());
            words.extend(kind.keywords.iter().copied());
        }
        let n_ids = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n_ids);
        let n_words = words.len();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), n_words);
    }

    #[test]
    fn unknown_actions_are_kept_and_printed_unambiguously() {
        // OFPAT_POP_VLAN (18) and an NX multipath (subtype 10).
        let bytes =
            "0012000800000000ffff002000002320000a00000032000000000000000000000000001f00010004";
        let decoded = decode_actions(&mut Reader::new(&hex(bytes), "t")).unwrap();
        assert!(decoded.iter().all(|a| matches!(a, Action::Unknown(_))));
        let mut out = BytesMut::new();
        encode_actions(&decoded, &mut out).unwrap();
        assert_eq!(out.to_vec(), hex(bytes));
        let mut text = String::new();
        format_list(&decoded, &mut text);
        assert_eq!(
            text,
            "unknown_action(0012000800000000),unknown_nx_action(subtype=10,00000032000000000000000000000000001f00010004)"
        );
    }

    #[test]
    fn rejects_bad_lengths() {
        for bad in [
            "0000000c00000001000000000000",
            "00000000",
            "0000001000000001",
        ] {
            assert!(
                decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
