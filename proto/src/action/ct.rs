//! Connection tracking: `ct(...)` (NXAST_CT) with its nested actions, `nat(...)` (nat.rs) and
//! `exec(...)` writes of ct_mark/ct_label, as lib/ofp-actions.c defines them.

use bytes::{BufMut, BytesMut};

use super::fields::{decode_range, parse_subfield};
use super::nat::parse_nat;
use super::{
    decode_actions_in, encode_actions, format_list, nx_header, Action, Ctx, Kind, WireId, NXAST_CT,
};
use crate::field::{
    Access, Field, FieldRange, ETH_TYPE_IPV4, ETH_TYPE_IPV6, IP_PROTO_TCP, IP_PROTO_UDP,
};
use crate::oxm::Match;
use crate::text::error::{bad, number, ParseError};
use crate::text::lexer::{tokens, Token};
use crate::wire::{put_zeros, Reader};
use crate::{DecodeError, EncodeError};

pub(super) static CT: Kind = Kind {
    wire: &[WireId::Nx(NXAST_CT)],
    keywords: &["ct"],
    decode: decode_ct,
    parse: parse_ct,
};

/// `ct(commit)`: commit the connection to the tracker.
pub const NX_CT_F_COMMIT: u16 = 1 << 0;
/// `ct(commit,force)`: commit in this direction, ending a connection committed the other way.
pub const NX_CT_F_FORCE: u16 = 1 << 1;
/// No recirculation (`ct` without `table=`).
const NX_CT_RECIRC_NONE: u8 = 0xff;
/// Well-known ports of the ALGs OVS names.
const ALG_FTP: u16 = 21;
const ALG_TFTP: u16 = 69;

/// The conntrack zone: a number, or 16 bits of a field (`zone=NXM_NX_REG0[0..15]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtZone {
    Imm(u16),
    Field(FieldRange),
}

/// NXAST_CT: send the packet through the connection tracker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ct {
    /// `NX_CT_F_*`.
    pub flags: u16,
    pub zone: CtZone,
    /// Continue the (forked) packet in this table with the ct fields set (`table=N`).
    pub table: Option<u8>,
    /// ALG port (`alg=ftp` is 21, `alg=tftp` 69), 0 for none.
    pub alg: u16,
    /// The nested actions: [`Action::Nat`] and, under `exec(...)`, writes of ct_mark and
    /// ct_label (a first `nat` prints outside `exec`, as OVS prints it).
    pub actions: Vec<Action>,
}

impl Default for Ct {
    /// `ct()`: track in zone 0, nothing more.
    fn default() -> Self {
        Ct {
            flags: 0,
            zone: CtZone::Imm(0),
            table: None,
            alg: 0,
            actions: Vec::new(),
        }
    }
}

impl Ct {
    pub fn commits(&self) -> bool {
        self.flags & NX_CT_F_COMMIT != 0
    }

    pub(super) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let (zone_src, zone_bits) = match self.zone {
            CtZone::Imm(zone) => (0, zone),
            CtZone::Field(range) if range.n_bits != 16 => {
                return Err(EncodeError::BadFieldRange {
                    what: "ct zone",
                    range,
                    reason: "a conntrack zone is 16 bits",
                })
            }
            CtZone::Field(range) => (
                range.field.info().action_id().header(false),
                range.ofs_nbits("ct zone")?,
            ),
        };
        let slot = nx_header(out, NXAST_CT, "ct action");
        out.put_u16(self.flags);
        out.put_u32(zone_src);
        out.put_u16(zone_bits);
        out.put_u8(self.table.unwrap_or(NX_CT_RECIRC_NONE));
        put_zeros(out, 3);
        out.put_u16(self.alg);
        encode_actions(&self.actions, out)?;
        slot.finish(out, true).map(|_| ())
    }

    /// format_CT: `ct(commit,force,table=N,zone=Z,nat(...),exec(...),alg=A)`.
    pub(super) fn format(&self, out: &mut String) {
        let mut parts: Vec<String> = Vec::new();
        if self.flags & NX_CT_F_COMMIT != 0 {
            parts.push("commit".into());
        }
        if self.flags & NX_CT_F_FORCE != 0 {
            parts.push("force".into());
        }
        if let Some(table) = self.table {
            parts.push(format!("table={table}"));
        }
        match self.zone {
            CtZone::Field(range) => parts.push(format!("zone={range}")),
            CtZone::Imm(0) => {}
            CtZone::Imm(zone) => parts.push(format!("zone={zone}")),
        }
        let mut nested = &self.actions[..];
        if let Some((Action::Nat(nat), rest)) = nested.split_first() {
            let mut s = String::new();
            nat.format(&mut s);
            parts.push(s);
            nested = rest;
        }
        if !nested.is_empty() {
            let mut s = String::from("exec(");
            format_list(nested, &mut s);
            s.push(')');
            parts.push(s);
        }
        match self.alg {
            0 => {}
            ALG_FTP => parts.push("alg=ftp".into()),
            ALG_TFTP => parts.push("alg=tftp".into()),
            alg => parts.push(format!("alg={alg}")),
        }
        out.push_str(&format!("ct({})", parts.join(",")));
    }

    /// check_CT: IP only; no commit of an invalid connection; the ALG's protocol.
    pub(super) fn check(&self, m: &Match) -> Result<(), String> {
        let eth = m.exact_u128(Field::EthType);
        if !matches!(eth, Some(ETH_TYPE_IPV4 | ETH_TYPE_IPV6)) {
            return Err("ct needs an IP flow (`ip` or `ipv6`)".into());
        }
        let invalid = m.get(Field::CtState).is_some_and(|e| e.value & 0x10 != 0);
        if invalid && self.commits() {
            return Err("ct cannot commit a connection the match says is invalid (+inv)".into());
        }
        let proto = m.exact_u128(Field::IpProto);
        match self.alg {
            ALG_FTP if proto != Some(IP_PROTO_TCP) => return Err("alg=ftp needs `tcp`".into()),
            ALG_TFTP if proto != Some(IP_PROTO_UDP) => return Err("alg=tftp needs `udp`".into()),
            _ => {}
        }
        if let CtZone::Field(range) = self.zone {
            super::fields::check_has(m, range.field)?;
        }
        self.actions.iter().try_for_each(|a| a.check(m))
    }
}

/// What OVS allows nested in a `ct` (ofpacts_verify_nested, decode_NXAST_RAW_CT): `nat`, and
/// writes of ct_mark/ct_label; anything but a plain `nat` only with `commit`.
fn verify_nested(actions: &[Action], commit: bool) -> Result<(), String> {
    for action in actions {
        let writes = match action {
            Action::SetField { field, .. } => Some(*field),
            Action::RegLoad { dst, .. } | Action::RegMove { dst, .. } => Some(dst.field),
            _ => None,
        };
        match (action, writes) {
            (Action::Nat(nat), _) if !commit && (nat.flags != 0 || nat.range.is_some()) => {
                return Err("nat with arguments needs `commit`".into())
            }
            (Action::Nat(_) | Action::Unknown(_), _) => {}
            (_, Some(field)) if field.info().access == Access::InsideCt => {
                if !commit {
                    return Err("exec(...) needs `commit`".into());
                }
            }
            (_, Some(field)) => {
                return Err(format!(
                    "ct(...,exec(...)) sets only ct_mark and ct_label, not {field}"
                ))
            }
            (other, None) => {
                let mut name = String::new();
                other.format(&mut name);
                return Err(format!("ct does not take a nested `{name}`"));
            }
        }
    }
    Ok(())
}

fn decode_ct(_: WireId, body: &mut Reader<'_>, ctx: Ctx) -> Result<Option<Action>, DecodeError> {
    let flags = body.u16()?;
    let zone_src = body.u32()?;
    let zone_bits = body.u16()?;
    let table = body.u8()?;
    body.skip(3)?;
    let alg = body.u16()?;
    if flags & NX_CT_F_FORCE != 0 && flags & NX_CT_F_COMMIT == 0 {
        return Err(ct_error("ct action: force without commit"));
    }
    if ctx.inside_ct {
        return Err(ct_error("ct action: a ct nested in a ct"));
    }
    let zone = if zone_src == 0 {
        CtZone::Imm(zone_bits)
    } else {
        let Some(range) = decode_range(zone_src, zone_bits, "ct zone")? else {
            return Ok(None);
        };
        if range.n_bits != 16 {
            return Err(ct_error("ct action: a zone field that is not 16 bits"));
        }
        CtZone::Field(range)
    };
    let actions = decode_actions_in(body, Ctx { inside_ct: true })?;
    verify_nested(&actions, flags & NX_CT_F_COMMIT != 0).map_err(|_| ct_error("ct action: nested actions OVS refuses (only nat, and ct_mark/ct_label writes with commit)"))?;
    Ok(Some(Action::Ct(Ct {
        flags,
        zone,
        table: (table != NX_CT_RECIRC_NONE).then_some(table),
        alg,
        actions,
    })))
}

fn ct_error(what: &'static str) -> DecodeError {
    DecodeError::BadValue { what, value: 0 }
}

/// `ct(commit,force,table=N,zone=N|FIELD[..],alg=ftp|tftp,nat[(...)],exec(...))`.
fn parse_ct(token: &Token<'_>, ctx: Ctx) -> Result<Vec<Action>, ParseError> {
    if ctx.inside_ct {
        return Err(bad(token, "ct does not take a nested ct"));
    }
    let mut ct = Ct::default();
    for arg in tokens(token.value.unwrap_or("")).map_err(ParseError::Syntax)? {
        match (arg.key, arg.value) {
            ("commit", None) => ct.flags |= NX_CT_F_COMMIT,
            ("force", None) => ct.flags |= NX_CT_F_FORCE,
            ("table", Some(v)) => {
                let table: u8 = number(&arg, v)?;
                if table == NX_CT_RECIRC_NONE {
                    return Err(bad(&arg, "table 255 means no table"));
                }
                ct.table = Some(table);
            }
            ("zone", Some(v))
                if v.contains('[') || !v.starts_with(|c: char| c.is_ascii_digit()) =>
            {
                let range = parse_subfield(&arg, v)?;
                if range.n_bits != 16 {
                    return Err(bad(&arg, "a zone is 16 bits of a field"));
                }
                ct.zone = CtZone::Field(range);
            }
            ("zone", Some(v)) => ct.zone = CtZone::Imm(number(&arg, v)?),
            ("alg", Some("ftp")) => ct.alg = ALG_FTP,
            ("alg", Some("tftp")) => ct.alg = ALG_TFTP,
            ("alg", Some(_)) => return Err(bad(&arg, "the ALGs are ftp and tftp")),
            ("nat", v) => ct.actions.push(Action::Nat(parse_nat(&arg, v)?)),
            ("exec", Some(v)) => {
                for nested in tokens(v).map_err(ParseError::Syntax)? {
                    ct.actions
                        .extend(Action::parse(&nested, Ctx { inside_ct: true })?);
                }
            }
            _ => return Err(bad(&arg, "not an argument of ct")),
        }
    }
    if ct.flags & NX_CT_F_FORCE != 0 && !ct.commits() {
        return Err(bad(token, "`force` needs `commit`"));
    }
    verify_nested(&ct.actions, ct.commits()).map_err(|reason| bad(token, reason))?;
    Ok(vec![Action::Ct(ct)])
}

#[cfg(test)]
mod tests {
    use super::super::decode_actions;
    use super::super::tests::roundtrip;
    use super::*;
    use crate::test_util::hex;

    /// Vectors of OVS 3.1's tests/ofp-actions.at and captures of ovs-ofctl 3.1 (the text
    /// is what ovs-ofctl prints for the bytes).
    #[test]
    fn ct_actions_from_ovs() {
        let cases: [(&str, &str); 12] = [
            ("ffff00180000232000230000000000000000ff0000000000", "ct()"),
            ("ffff00180000232000230001000000000000ff0000000000", "ct(commit)"),
            ("ffff00180000232000230003000000000000ff0000000000", "ct(commit,force)"),
            ("ffff001800002320002300000000000000000a0000000000", "ct(table=10)"),
            ("ffff00180000232000230000000000000000ff0000000015", "ct(alg=ftp)"),
            ("ffff0018000023200023000000010004000fff0000000000", "ct(zone=NXM_NX_REG0[0..15])"),
            ("ffff002800002320002300000000000000000a0000000000ffff0010000023200024000000000000", "ct(table=10,nat)"),
            ("ffff002800002320002300010000000000001e0000000000ffff0010000023200024000000010000", "ct(commit,table=30,nat(src))"),
            ("ffff00300000232000230001000000000000ff0000000000ffff00180000232000240000001100310a0000f08000ffff", "ct(commit,nat(src=10.0.0.240:32768-65535,random))"),
            ("ffff00300000232000230001000000000000ff0000000000ffff00180000232000240000000a00030a0000800a0000fe", "ct(commit,nat(dst=10.0.0.128-10.0.0.254,hash))"),
            ("ffff00300000232000230001000000000000ff0000000000ffff0018000023200007001f0001d604000000000000f009", "ct(commit,exec(load:0xf009->NXM_NX_CT_MARK[]))"),
            ("ffff00280000232000230001000000000005ff0000000000001900100001d6040000000100000000", "ct(commit,zone=5,exec(set_field:0x1->ct_mark))"),
        ];
        for (bytes, text) in cases {
            let decoded = decode_actions(&mut Reader::new(&hex(bytes), "t"))
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            let mut printed = String::new();
            format_list(&decoded, &mut printed);
            assert_eq!(printed, text);
            roundtrip(bytes, &decoded);
        }
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        for bad in [
            // force without commit (OFPBAC_BAD_ARGUMENT)
            "ffff00180000232000230002000000000000ff0000000000",
            // zone from 8 or 32 bits of a register (OFPBAC_BAD_SET_LEN)
            "ffff00180000232000230000000100040007ff0000000000",
            "ffff0018000023200023000000010004001fff0000000000",
            // exec(load:...->NXM_NX_REG0[]): not a ct field
            "ffff00300000232000230001000000000000ff0000000000ffff0018000023200007001f00010004000000000000f009",
            // a ct nested in a ct
            "ffff00300000232000230001000000000000ff0000000000ffff00180000232000230000000000000000ff0000000000",
            // exec(...) without commit
            "ffff00300000232000230000000000000000ff0000000000ffff0018000023200007001f0001d6040000000000000001",
            // nat outside ct; nat with src and dst
            "ffff0010000023200024000000010000",
            "ffff00280000232000230001000000000000ff0000000000ffff0010000023200024000000030000",
            // an IPv4 range backwards
            "ffff00300000232000230001000000000000ff0000000000ffff00180000232000240000000200030a0000020a000001",
        ] {
            assert!(
                decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
