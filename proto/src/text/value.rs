//! Field values as ovs-ofctl writes them: integers, IPv4 and Ethernet addresses with masks,
//! port numbers and names, fragment kinds, connection-tracking and TCP flags. Parse and print
//! live side by side so the two directions cannot drift apart.

use std::net::Ipv4Addr;

use crate::field::{FieldInfo, Format, CT_STATE_FLAGS, TCP_FLAGS};
use crate::port::RESERVED_PORTS;

/// Reads `N` as decimal or `0xN` as hexadecimal (`-1` means all ones, as strtoull gives).
pub(crate) fn parse_uint(s: &str) -> Option<u64> {
    parse_wide(s).and_then(|v| {
        if v == u128::MAX {
            Some(u64::MAX)
        } else {
            u64::try_from(v).ok()
        }
    })
}

/// [`parse_uint`] for values up to 128 bits (ct_label); `-1` is all ones.
pub(crate) fn parse_wide(s: &str) -> Option<u128> {
    if s == "-1" {
        return Some(u128::MAX);
    }
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() => u128::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

/// C's `%#x`: `0x` followed by lowercase hex, except that zero is plain `0`.
pub(crate) fn alt_hex(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// Bytes as ovs-ofctl prints notes and userdata: two hex digits each, joined by dots.
pub(crate) fn format_hex_dots(bytes: &[u8]) -> String {
    let hexes: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hexes.join(".")
}

/// Bytes as ofpbuf_put_hex reads them: pairs of hex digits, with dots and white space allowed
/// before each pair; `None` when anything else is left over (an odd digit, a non-hex one).
pub(crate) fn parse_hex_dots(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches(['.', ' ', '\t', '\r', '\n']);
        let Some(pair) = rest
            .get(..2)
            .filter(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
        else {
            return rest.is_empty().then_some(out);
        };
        out.push(u8::from_str_radix(pair, 16).ok()?);
        rest = &rest[2..];
    }
}

/// ofp_print_duration: seconds, then milliseconds when exact, else every significant digit.
pub(crate) fn format_duration(sec: u32, nsec: u32) -> String {
    let mut s = sec.to_string();
    if nsec > 0 {
        if nsec % 1_000_000 == 0 {
            s.push_str(&format!(".{:03}", nsec / 1_000_000));
        } else {
            s.push_str(format!(".{nsec:09}").trim_end_matches('0'));
        }
    }
    s.push('s');
    s
}

/// OpenFlow 1.0-style 16-bit numbers at or above this are reserved ports.
const OFPP_MAX_16: u64 = 0xff00;
/// OpenFlow 1.1+ reserved ports are the 16-bit ones plus this offset.
const OFPP11_OFFSET: u64 = 0xffff_0000;

/// A port as ovs-ofctl reads it: a reserved name (any case), a number below 0xff00, a
/// 16-bit reserved number (translated to the 32-bit one), or a 32-bit reserved number.
pub fn parse_port(s: &str) -> Option<u32> {
    if let Some((port, _)) = RESERVED_PORTS
        .iter()
        .find(|(_, name)| name.eq_ignore_ascii_case(s))
    {
        return Some(*port);
    }
    if s.eq_ignore_ascii_case("NONE") {
        return Some(crate::OFPP_ANY);
    }
    let n = s.parse::<u64>().ok()?;
    let port = match n {
        n if n < OFPP_MAX_16 => n,
        n if n <= 0xffff => n + OFPP11_OFFSET,
        n if (0xffff_ff00..=0xffff_ffff).contains(&n) => n,
        _ => return None,
    };
    u32::try_from(port).ok()
}

/// A port as ovs-ofctl prints it: reserved ports by name, others in decimal (ports in the
/// reserved range without a name in OpenFlow 1.0 numbering, as OVS stores them).
pub fn format_port(port: u32) -> String {
    if let Some((_, name)) = RESERVED_PORTS.iter().find(|(p, _)| *p == port) {
        return (*name).to_string();
    }
    let port = u64::from(port);
    if port >= 0xffff_ff00 {
        (port - OFPP11_OFFSET).to_string()
    } else {
        port.to_string()
    }
}

/// Protocol keywords: the eth_type (and ip_proto) each one stands for. The parser sets
/// these; the printer uses the first matching row, as match_format does.
pub(crate) const PROTOCOLS: [(&str, u128, Option<u128>); 14] = [
    ("icmp", 0x0800, Some(1)),
    ("tcp", 0x0800, Some(6)),
    ("udp", 0x0800, Some(17)),
    ("sctp", 0x0800, Some(132)),
    ("ip", 0x0800, None),
    ("icmp6", 0x86dd, Some(58)),
    ("tcp6", 0x86dd, Some(6)),
    ("udp6", 0x86dd, Some(17)),
    ("sctp6", 0x86dd, Some(132)),
    ("ipv6", 0x86dd, None),
    ("arp", 0x0806, None),
    ("rarp", 0x8035, None),
    ("mpls", 0x8847, None),
    ("mplsm", 0x8848, None),
];

/// The protocol keyword for an (eth_type, ip_proto) pair, if there is one.
pub(crate) fn protocol_name(eth_type: u128, ip_proto: Option<u128>) -> Option<&'static str> {
    PROTOCOLS
        .iter()
        .find(|(_, e, p)| *e == eth_type && *p == ip_proto)
        .map(|(name, _, _)| *name)
}

/// ip_frag keywords and the (value, mask) each means.
const FRAG_NAMES: [(&str, u128, u128); 5] = [
    ("no", 0, 3),
    ("yes", 1, 1),
    ("first", 1, 3),
    ("later", 3, 3),
    ("not_later", 0, 2),
];

/// How OVS names a fragment (value, mask), mirroring match_format.
fn format_frag(value: u128, mask: u128) -> &'static str {
    let any = value & 1 != 0;
    let later = value & 2 != 0;
    match mask & 3 {
        3 => match (any, later) {
            (true, true) => "later",
            (true, false) => "first",
            (false, false) => "no",
            (false, true) => "<error>",
        },
        1 if any => "yes",
        1 => "no",
        2 if later => "later",
        2 => "not_later",
        _ => "",
    }
}

fn parse_ipv4(s: &str) -> Option<u128> {
    s.parse::<Ipv4Addr>().ok().map(|a| u128::from(u32::from(a)))
}

fn parse_mac(s: &str) -> Option<u128> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    parts.iter().try_fold(0u128, |acc, p| {
        (p.len() == 2)
            .then(|| u8::from_str_radix(p, 16).ok())
            .flatten()
            .map(|b| (acc << 8) | u128::from(b))
    })
}

pub(crate) fn format_mac(v: u128) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[10], b[11], b[12], b[13], b[14], b[15]
    )
}

pub(crate) fn format_ipv4(v: u128) -> String {
    Ipv4Addr::from(v as u32).to_string()
}

/// The flag names of a flags field (ct_state, tcp_flags), in bit order.
fn flag_names(format: Format) -> &'static [(u128, &'static str)] {
    match format {
        Format::CtState => &CT_STATE_FLAGS,
        _ => &TCP_FLAGS,
    }
}

/// Parses a flags field as OVS's parse_flags does: `V/M` numbers, `+a-b` (masked: each named
/// flag set or clear), or `a|b|0x4` (exact: these flags set, all others clear).
fn parse_flags(info: &FieldInfo, s: &str) -> Result<(u128, u128), String> {
    let names = flag_names(info.format);
    let unknown = || format!("`{s}`: unknown {} flag(s)", info.names[0]);
    let allowed = info.significant;
    if let Some((v, m)) = s.split_once('/') {
        let (v, m) = (
            parse_wide(v).ok_or_else(unknown)?,
            parse_wide(m).ok_or_else(unknown)?,
        );
        return if (v | m) & !allowed == 0 {
            Ok((v, m))
        } else {
            Err(unknown())
        };
    }
    if s.starts_with(['+', '-']) {
        let (mut value, mut mask) = (0, 0);
        let mut rest = s;
        while let Some(sign) = rest.chars().next() {
            let set = match sign {
                '+' => true,
                '-' => false,
                _ => return Err(format!("`{rest}`: a flag must be preceded by `+` or `-`")),
            };
            let body = &rest[1..];
            let end = body.find(['+', '-']).unwrap_or(body.len());
            let bit = names
                .iter()
                .find(|(_, name)| *name == &body[..end])
                .map(|&(bit, _)| bit)
                .ok_or_else(unknown)?;
            if mask & bit != 0 {
                return Err(format!("`{s}`: each flag can be given only once"));
            }
            mask |= bit;
            if set {
                value |= bit;
            }
            rest = &body[end..];
        }
        return Ok((value, mask));
    }
    let mut value = 0;
    for part in s.split('|') {
        let bits = names
            .iter()
            .find(|(_, name)| *name == part)
            .map(|&(bit, _)| bit)
            .or_else(|| parse_wide(part))
            .filter(|bits| bits & !allowed == 0)
            .ok_or_else(unknown)?;
        value |= bits;
    }
    Ok((value, info.full_mask()))
}

/// Prints flags as OVS's format_flags_masked does: names joined by `|` when every flag is
/// matched, else `+name`/`-name` for each matched flag, lowest bit first.
fn format_flags(format: Format, value: u128, mask: Option<u128>) -> String {
    let names = flag_names(format);
    let name_of = |bit: u128| {
        names
            .iter()
            .find(|(b, _)| *b == bit)
            .map_or("[Unknown]", |(_, name)| *name)
    };
    let bits = |set: u128| (0..128).map(|i| 1u128 << i).filter(move |b| set & b != 0);
    match mask {
        None if value == 0 => "0".to_string(),
        None => bits(value).map(name_of).collect::<Vec<_>>().join("|"),
        Some(mask) => bits(mask)
            .map(|bit| {
                let sign = if value & bit != 0 { '+' } else { '-' };
                format!("{sign}{}", name_of(bit))
            })
            .collect(),
    }
}

/// How many bits a value of the field may use, for error messages.
fn value_bits(info: &FieldInfo) -> u32 {
    128 - info.significant.leading_zeros()
}

/// Parses `value[/mask]` for a field; returns (value, mask) with mask all ones when absent.
pub(crate) fn parse_field_value(info: &FieldInfo, s: &str) -> Result<(u128, u128), String> {
    let full = info.full_mask();
    match info.format {
        Format::Frag => {
            return FRAG_NAMES
                .iter()
                .find(|(name, _, _)| *name == s)
                .map(|&(_, v, m)| (v, m))
                .ok_or_else(|| "expected no, yes, first, later or not_later".to_string())
        }
        Format::Port => {
            return parse_port(s)
                .map(|p| (u128::from(p), full))
                .ok_or_else(|| "not a valid OpenFlow port".to_string())
        }
        Format::CtState | Format::TcpFlags => return parse_flags(info, s),
        _ => {}
    }
    let (value_text, mask_text) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let value = parse_scalar(info.format, value_text)
        .ok_or_else(|| format!("`{value_text}` is not a valid {}", format_name(info.format)))?;
    let mask = match mask_text {
        None => full,
        Some(m) if !info.maskable => {
            return Err(format!("{} cannot be masked (`/{m}`)", info.names[0]))
        }
        Some(m) => {
            parse_mask(info.format, m).ok_or_else(|| format!("`{m}` is not a valid mask"))?
        }
    };
    if value & !full != 0 {
        return Err(format!(
            "{value_text} does not fit in {} bits",
            value_bits(info)
        ));
    }
    if mask & !full != 0 && mask != u128::MAX {
        return Err(format!(
            "mask {m} is wider than the field",
            m = mask_text.unwrap_or("")
        ));
    }
    Ok((value, mask & full))
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::Decimal | Format::Hex => "number",
        Format::Ipv4 => "IPv4 address",
        Format::Ethernet => "Ethernet address",
        Format::Port => "port",
        Format::Frag => "fragment type",
        Format::CtState | Format::TcpFlags => "set of flags",
    }
}

fn parse_scalar(format: Format, s: &str) -> Option<u128> {
    match format {
        Format::Ipv4 => parse_ipv4(s),
        Format::Ethernet => parse_mac(s),
        _ => parse_wide(s),
    }
}

/// IPv4 masks may be a prefix length (`/14`) or a dotted mask.
fn parse_mask(format: Format, s: &str) -> Option<u128> {
    if format == Format::Ipv4 && !s.contains('.') {
        let bits: u8 = s.parse().ok().filter(|b| *b <= 32)?;
        return Some(u128::from(crate::oxm::prefix_mask(bits)));
    }
    parse_scalar(format, s)
}

/// Formats a match value the way match_format does for this field; `mask` is `None` for an
/// exact match.
pub(crate) fn format_match_value(info: &FieldInfo, value: u128, mask: Option<u128>) -> String {
    match info.format {
        Format::Hex => match mask {
            None => alt_hex(value),
            Some(m) => format!("{}/{}", alt_hex(value), alt_hex(m)),
        },
        // format_be16_masked: decimal when exact, 0x-hex pairs when masked.
        Format::Decimal => match mask {
            None => value.to_string(),
            Some(m) => format!("{value:#x}/{m:#x}"),
        },
        Format::Ipv4 => match mask {
            None => format_ipv4(value),
            Some(m) => match cidr_len(m) {
                Some(len) => format!("{}/{len}", format_ipv4(value)),
                None => format!("{}/{}", format_ipv4(value), format_ipv4(m)),
            },
        },
        Format::Ethernet => match mask {
            None => format_mac(value),
            Some(m) => format!("{}/{}", format_mac(value), format_mac(m)),
        },
        Format::Port => format_port(value as u32),
        Format::Frag => format_frag(value, mask.unwrap_or(3)).to_string(),
        Format::CtState | Format::TcpFlags => format_flags(info.format, value, mask),
    }
}

/// Formats a set_field value as mf_format does (hex fields via ds_put_hex, i.e. `%#x`-like).
pub(crate) fn format_set_field_value(info: &FieldInfo, value: u128) -> String {
    match info.format {
        Format::Decimal => value.to_string(),
        _ => format_match_value(info, value, None),
    }
}

/// The prefix length of a contiguous netmask, if it is one.
fn cidr_len(mask: u128) -> Option<u32> {
    let mask = mask as u32;
    let inverted = !mask;
    (inverted & inverted.wrapping_add(1) == 0).then(|| mask.leading_ones())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Field;

    #[test]
    fn ports() {
        assert_eq!(parse_port("LOCAL"), Some(crate::OFPP_LOCAL));
        assert_eq!(parse_port("in_port"), Some(crate::OFPP_IN_PORT));
        assert_eq!(parse_port("65534"), Some(crate::OFPP_LOCAL));
        assert_eq!(parse_port("65279"), Some(65279));
        assert_eq!(parse_port("4294967040"), Some(0xffff_ff00));
        assert_eq!(parse_port("70000"), None);
        assert_eq!(format_port(crate::OFPP_CONTROLLER), "CONTROLLER");
        assert_eq!(format_port(0xffff_ff00), "65280");
        assert_eq!(format_port(3), "3");
    }

    #[test]
    fn values_round_trip_through_text() {
        let cases = [
            (Field::Ipv4Src, "10.128.0.0/14"),
            (Field::Ipv4Src, "10.0.0.0/255.0.255.0"),
            (Field::Reg(0), "0x5/0xf"),
            (Field::Reg(0), "0"),
            (Field::EthDst, "0a:58:00:00:00:00/ff:ff:ff:00:00:00"),
            (Field::TcpDst, "443"),
            (Field::TcpDst, "0x50/0xfff0"),
            (Field::IpFrag, "not_later"),
            (Field::TunId, "0x1234"),
            (Field::CtState, "-new+est+trk"),
            (Field::CtState, "est|trk"),
            (Field::CtState, "0"),
            (Field::TcpFlags, "+fin+syn-ack"),
            (Field::TcpFlags, "syn|ack"),
            (Field::CtLabel, "0x12345678901234567890123456789012"),
            (Field::CtLabel, "0/0xf0000000000000000"),
            (Field::CtZone, "16"),
            (Field::ConjId, "7"),
        ];
        for (field, text) in cases {
            let info = field.info();
            let (v, m) = parse_field_value(info, text).unwrap();
            let mask = (m != info.full_mask()).then_some(m);
            assert_eq!(format_match_value(info, v & m, mask), text, "{field:?}");
        }
    }

    #[test]
    fn flags_parse_like_ovs() {
        let ct = Field::CtState.info();
        assert_eq!(parse_field_value(ct, "+trk+est"), Ok((0x22, 0x22)));
        assert_eq!(parse_field_value(ct, "-trk"), Ok((0, 0x20)));
        assert_eq!(parse_field_value(ct, "0x21"), Ok((0x21, 0xff)));
        assert_eq!(parse_field_value(ct, "trk|est"), Ok((0x22, 0xff)));
        assert_eq!(parse_field_value(ct, "0x21/0x21"), Ok((0x21, 0x21)));
        for bad in ["+trk|est", "+foo", "0x100", "+trk+trk", "trk+est"] {
            assert!(parse_field_value(ct, bad).is_err(), "{bad}");
        }
        let tcp = Field::TcpFlags.info();
        assert!(parse_field_value(tcp, "0x1000").is_err());
        assert_eq!(parse_field_value(tcp, "0x3/0x7"), Ok((3, 7)));
    }

    #[test]
    fn bad_values() {
        let info = Field::Ipv4Src.info();
        assert!(parse_field_value(info, "10.0.0.256").is_err());
        assert!(parse_field_value(info, "10.0.0.0/33").is_err());
        assert!(parse_field_value(Field::IpProto.info(), "256").is_err());
        assert!(parse_field_value(Field::IpProto.info(), "6/1").is_err());
        assert!(parse_field_value(Field::EthSrc.info(), "0a:58:00:00:00").is_err());
        assert!(parse_field_value(Field::IpFrag.info(), "maybe").is_err());
        assert!(parse_field_value(Field::ArpOp.info(), "256").is_err());
        assert!(parse_field_value(Field::CtZone.info(), "5/0xf").is_err());
        assert!(parse_field_value(
            Field::CtLabel.info(),
            "0x1234567890123456789012345678901212"
        )
        .is_err());
    }
}
