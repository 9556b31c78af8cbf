//! `nat(...)`: NXAST_NAT, the network address translation a committing `ct` applies
//! (`nat(src=10.0.0.1-10.0.0.5:80-90,persistent,random)`); it only exists nested in a `ct`.

use std::net::Ipv4Addr;

use bytes::{BufMut, BytesMut};

use super::{nx_header, Action, Ctx, Kind, WireId, NXAST_NAT};
use crate::field::{Field, ETH_TYPE_IPV4, ETH_TYPE_IPV6};
use crate::oxm::Match;
use crate::text::error::{bad, ParseError};
use crate::text::lexer::{tokens, Token};
use crate::wire::{put_zeros, Reader};
use crate::{DecodeError, EncodeError};

pub(super) static NAT: Kind = Kind {
    wire: &[WireId::Nx(NXAST_NAT)],
    keywords: &["nat"],
    decode: decode_nat,
    parse: parse_nat_token,
};

/// `nat` on its own (refused: it only exists inside `ct`).
fn parse_nat_token(token: &Token<'_>, ctx: Ctx) -> Result<Vec<Action>, ParseError> {
    if !ctx.inside_ct {
        return Err(bad(token, "nat is an argument of ct(...)"));
    }
    Ok(vec![Action::Nat(parse_nat(token, token.value)?)])
}

pub const NX_NAT_F_SRC: u16 = 1 << 0;
pub const NX_NAT_F_DST: u16 = 1 << 1;
pub const NX_NAT_F_PERSISTENT: u16 = 1 << 2;
pub const NX_NAT_F_PROTO_HASH: u16 = 1 << 3;
pub const NX_NAT_F_PROTO_RANDOM: u16 = 1 << 4;
const NX_NAT_F_MASK: u16 = 0x1f;

const RANGE_IPV4_MIN: u16 = 1 << 0;
const RANGE_IPV4_MAX: u16 = 1 << 1;
const RANGE_IPV6: u16 = (1 << 2) | (1 << 3);
const RANGE_PROTO_MIN: u16 = 1 << 4;
const RANGE_PROTO_MAX: u16 = 1 << 5;

/// The IPv4 addresses (and ports) a NAT may pick from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NatRange {
    pub ip_min: Ipv4Addr,
    pub ip_max: Option<Ipv4Addr>,
    pub port_min: Option<u16>,
    pub port_max: Option<u16>,
}

/// NXAST_NAT: `nat`, `nat(src)`, `nat(dst=10.0.0.1-10.0.0.5:80-90,persistent,random)`. An
/// IPv6 range is not modelled: such an action is kept verbatim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Nat {
    /// `NX_NAT_F_*`.
    pub flags: u16,
    pub range: Option<NatRange>,
}

impl Nat {
    /// encode_NAT: only the parts of the range that are set (a zero address or port is none).
    pub(super) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = nx_header(out, NXAST_NAT, "nat action");
        put_zeros(out, 2);
        out.put_u16(self.flags);
        let present_at = out.len();
        out.put_u16(0);
        let mut present = 0;
        if let Some(range) = self.range {
            let mut put_ip = |addr: Option<Ipv4Addr>, bit: u16, out: &mut BytesMut| {
                if let Some(addr) = addr.filter(|a| !a.is_unspecified()) {
                    out.put_u32(u32::from(addr));
                    present |= bit;
                }
            };
            put_ip(Some(range.ip_min), RANGE_IPV4_MIN, out);
            put_ip(range.ip_max, RANGE_IPV4_MAX, out);
            for (port, bit) in [
                (range.port_min, RANGE_PROTO_MIN),
                (range.port_max, RANGE_PROTO_MAX),
            ] {
                if let Some(port) = port.filter(|p| *p != 0) {
                    out.put_u16(port);
                    present |= bit;
                }
            }
        }
        out[present_at..present_at + 2].copy_from_slice(&present.to_be_bytes());
        slot.finish(out, true).map(|_| ())
    }

    /// format_NAT (which prints the flags only with a range, as OVS does).
    pub(super) fn format(&self, out: &mut String) {
        out.push_str("nat");
        if self.flags & (NX_NAT_F_SRC | NX_NAT_F_DST) == 0 {
            return;
        }
        let mut s = String::from(if self.flags & NX_NAT_F_SRC != 0 {
            "src"
        } else {
            "dst"
        });
        if let Some(r) = self.range {
            s.push_str(&format!("={}", r.ip_min));
            if let Some(max) = r.ip_max.filter(|m| !m.is_unspecified() && *m != r.ip_min) {
                s.push_str(&format!("-{max}"));
            }
            if let Some(min) = r.port_min.filter(|p| *p != 0) {
                s.push_str(&format!(":{min}"));
                if let Some(max) = r.port_max.filter(|m| *m != 0 && *m != min) {
                    s.push_str(&format!("-{max}"));
                }
            }
            for (bit, word) in [
                (NX_NAT_F_PERSISTENT, "persistent"),
                (NX_NAT_F_PROTO_HASH, "hash"),
                (NX_NAT_F_PROTO_RANDOM, "random"),
            ] {
                if self.flags & bit != 0 {
                    s.push(',');
                    s.push_str(word);
                }
            }
        }
        out.push_str(&format!("({s})"));
    }

    /// check_NAT: IP only, and an IPv4 range only on IPv4.
    pub(super) fn check(&self, m: &Match) -> Result<(), String> {
        match m.exact_u128(Field::EthType) {
            Some(ETH_TYPE_IPV4) => Ok(()),
            Some(ETH_TYPE_IPV6) if self.range.is_none() => Ok(()),
            _ => Err("nat needs an IP flow (an IPv4 range needs `ip`)".into()),
        }
    }
}

fn nat_error(what: &'static str) -> DecodeError {
    DecodeError::BadValue { what, value: 0 }
}

/// decode_NXAST_RAW_NAT's checks: known, compatible flags; a range only in the allowed
/// combinations, never empty or backwards. An IPv6 range keeps the action verbatim.
fn decode_nat(_: WireId, body: &mut Reader<'_>, ctx: Ctx) -> Result<Option<Action>, DecodeError> {
    if !ctx.inside_ct {
        return Err(nat_error("nat action outside a ct action"));
    }
    body.skip(2)?;
    let flags = body.u16()?;
    let present = body.u16()?;
    if flags & !NX_NAT_F_MASK != 0
        || flags & (NX_NAT_F_SRC | NX_NAT_F_DST) == NX_NAT_F_SRC | NX_NAT_F_DST
        || flags & (NX_NAT_F_PROTO_HASH | NX_NAT_F_PROTO_RANDOM)
            == NX_NAT_F_PROTO_HASH | NX_NAT_F_PROTO_RANDOM
    {
        return Err(nat_error("nat action: unknown or conflicting flags"));
    }
    if present & RANGE_IPV6 != 0 {
        return Ok(None);
    }
    let bad_range = || nat_error("nat action: an invalid range");
    let range = match (present & RANGE_IPV4_MIN != 0, present & RANGE_IPV4_MAX != 0) {
        (false, true) => return Err(bad_range()),
        (false, false) => None,
        (true, has_max) => {
            let ip_min = Ipv4Addr::from(body.u32().map_err(|_| bad_range())?);
            let ip_max = if has_max {
                Some(Ipv4Addr::from(body.u32().map_err(|_| bad_range())?))
            } else {
                None
            };
            if ip_min.is_unspecified() || ip_max.is_some_and(|m| m < ip_min) {
                return Err(bad_range());
            }
            Some(NatRange {
                ip_min,
                ip_max,
                port_min: None,
                port_max: None,
            })
        }
    };
    let range = match (
        present & RANGE_PROTO_MIN != 0,
        present & RANGE_PROTO_MAX != 0,
        range,
    ) {
        (false, true, _) | (true, _, None) => return Err(bad_range()),
        (false, false, range) => range,
        (true, has_max, Some(mut r)) => {
            let min = body.u16().map_err(|_| bad_range())?;
            let max = if has_max {
                Some(body.u16().map_err(|_| bad_range())?)
            } else {
                None
            };
            if min == 0 || max.is_some_and(|m| m < min) {
                return Err(bad_range());
            }
            r.port_min = Some(min);
            r.port_max = max;
            Some(r)
        }
    };
    Ok(Some(Action::Nat(Nat { flags, range })))
}

/// parse_NAT: `nat`, `nat(src[=RANGE],persistent,hash|random)`, `nat(dst[=RANGE],...)`.
pub(super) fn parse_nat(token: &Token<'_>, value: Option<&str>) -> Result<Nat, ParseError> {
    let mut nat = Nat::default();
    for arg in tokens(value.unwrap_or("")).map_err(ParseError::Syntax)? {
        match (arg.key, arg.value) {
            ("src", range) | ("dst", range) => {
                nat.flags |= if arg.key == "src" {
                    NX_NAT_F_SRC
                } else {
                    NX_NAT_F_DST
                };
                nat.range = match range {
                    Some(r) => parse_nat_range(&arg, r)?,
                    None => None,
                };
            }
            ("persistent", None) => nat.flags |= NX_NAT_F_PERSISTENT,
            ("hash", None) => nat.flags |= NX_NAT_F_PROTO_HASH,
            ("random", None) => nat.flags |= NX_NAT_F_PROTO_RANDOM,
            _ => return Err(bad(&arg, "not an argument of nat")),
        }
    }
    let both = |a, b| nat.flags & (a | b) == a | b;
    if both(NX_NAT_F_SRC, NX_NAT_F_DST) {
        return Err(bad(token, "give one of `src` or `dst`"));
    }
    if nat.flags != 0 && nat.flags & (NX_NAT_F_SRC | NX_NAT_F_DST) == 0 {
        return Err(bad(token, "flags are allowed only with `src` or `dst`"));
    }
    if both(NX_NAT_F_PROTO_HASH, NX_NAT_F_PROTO_RANDOM) {
        return Err(bad(token, "give one of `hash` or `random`"));
    }
    Ok(nat)
}

/// `IP[-IP][:PORT[-PORT]]`. OVS sends an address or port of 0 as none at all, so `0.0.0.0`
/// alone is no range (and with anything after it, a range OVS would refuse).
fn parse_nat_range(token: &Token<'_>, s: &str) -> Result<Option<NatRange>, ParseError> {
    let invalid = || {
        bad(
            token,
            format!("`{s}` is not an IPv4 NAT range (IP[-IP][:PORT[-PORT]])"),
        )
    };
    let (ips, ports) = match s.split_once(':') {
        Some((ips, ports)) => (ips, Some(ports)),
        None => (s, None),
    };
    let (min, max) = match ips.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (ips, None),
    };
    let ip_min: Ipv4Addr = min.parse().map_err(|_| invalid())?;
    let ip_max: Option<Ipv4Addr> = max.map(str::parse).transpose().map_err(|_| invalid())?;
    if ip_max.is_some_and(|m| m < ip_min) {
        return Err(invalid());
    }
    let (port_min, port_max) = match ports {
        None => (None, None),
        Some(p) => {
            let (a, b) = match p.split_once('-') {
                Some((a, b)) => (a, Some(b)),
                None => (p, None),
            };
            let min: u16 = a.parse().map_err(|_| invalid())?;
            let max: Option<u16> = b.map(str::parse).transpose().map_err(|_| invalid())?;
            if max.is_some_and(|m| m < min) || (min == 0 && max.is_some_and(|m| m != 0)) {
                return Err(invalid());
            }
            ((min != 0).then_some(min), max.filter(|m| *m != 0))
        }
    };
    if ip_min.is_unspecified() {
        return match (ip_max.filter(|m| !m.is_unspecified()), port_min) {
            (None, None) => Ok(None),
            _ => Err(bad(
                token,
                format!("`{s}`: a range starting at 0.0.0.0 is no range"),
            )),
        };
    }
    Ok(Some(NatRange {
        ip_min,
        ip_max,
        port_min,
        port_max,
    }))
}
