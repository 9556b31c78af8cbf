//! Field values as ovs-ofctl writes them: integers, IPv4 and Ethernet addresses with masks,
//! port numbers and names, fragment kinds. Parse and print live side by side so the two
//! directions cannot drift apart.

use std::net::Ipv4Addr;

use crate::field::{FieldInfo, Format};
use crate::port::RESERVED_PORTS;

/// Reads `N` as decimal or `0xN` as hexadecimal (`-1` means all ones, as strtoull gives).
pub(crate) fn parse_uint(s: &str) -> Option<u64> {
    if s == "-1" {
        return Some(u64::MAX);
    }
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() => u64::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

/// C's `%#x`: `0x` followed by lowercase hex, except that zero is plain `0`.
pub(crate) fn alt_hex(v: u64) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
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
pub(crate) const PROTOCOLS: [(&str, u64, Option<u64>); 14] = [
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
pub(crate) fn protocol_name(eth_type: u64, ip_proto: Option<u64>) -> Option<&'static str> {
    PROTOCOLS
        .iter()
        .find(|(_, e, p)| *e == eth_type && *p == ip_proto)
        .map(|(name, _, _)| *name)
}

/// ip_frag keywords and the (value, mask) each means.
const FRAG_NAMES: [(&str, u64, u64); 5] = [
    ("no", 0, 3),
    ("yes", 1, 1),
    ("first", 1, 3),
    ("later", 3, 3),
    ("not_later", 0, 2),
];

/// How OVS names a fragment (value, mask), mirroring match_format.
fn format_frag(value: u64, mask: u64) -> &'static str {
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

fn parse_ipv4(s: &str) -> Option<u64> {
    s.parse::<Ipv4Addr>().ok().map(|a| u64::from(u32::from(a)))
}

fn parse_mac(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    parts.iter().try_fold(0u64, |acc, p| {
        (p.len() == 2)
            .then(|| u8::from_str_radix(p, 16).ok())
            .flatten()
            .map(|b| (acc << 8) | u64::from(b))
    })
}

fn format_mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

fn format_ipv4(v: u64) -> String {
    Ipv4Addr::from(v as u32).to_string()
}

/// Parses `value[/mask]` for a field; returns (value, mask) with mask all ones when absent.
pub(crate) fn parse_field_value(info: &FieldInfo, s: &str) -> Result<(u64, u64), String> {
    let full = info.full_mask();
    if info.format == Format::Frag {
        return FRAG_NAMES
            .iter()
            .find(|(name, _, _)| *name == s)
            .map(|&(_, v, m)| (v, m))
            .ok_or_else(|| "expected no, yes, first, later or not_later".to_string());
    }
    if info.format == Format::Port {
        return parse_port(s)
            .map(|p| (u64::from(p), full))
            .ok_or_else(|| "not a valid OpenFlow port".to_string());
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
            info.bytes * 8
        ));
    }
    if mask & !full != 0 {
        return Err(format!(
            "mask {m} is wider than the field",
            m = mask_text.unwrap_or("")
        ));
    }
    Ok((value, mask))
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::Decimal | Format::Hex => "number",
        Format::Ipv4 => "IPv4 address",
        Format::Ethernet => "Ethernet address",
        Format::Port => "port",
        Format::Frag => "fragment type",
    }
}

fn parse_scalar(format: Format, s: &str) -> Option<u64> {
    match format {
        Format::Ipv4 => parse_ipv4(s),
        Format::Ethernet => parse_mac(s),
        _ => parse_uint(s),
    }
}

/// IPv4 masks may be a prefix length (`/14`) or a dotted mask.
fn parse_mask(format: Format, s: &str) -> Option<u64> {
    if format == Format::Ipv4 && !s.contains('.') {
        let bits: u8 = s.parse().ok().filter(|b| *b <= 32)?;
        return Some(crate::oxm::prefix_mask(bits));
    }
    parse_scalar(format, s)
}

/// Formats a match value the way match_format does for this field; `mask` is `None` for an
/// exact match.
pub(crate) fn format_match_value(info: &FieldInfo, value: u64, mask: Option<u64>) -> String {
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
    }
}

/// Formats a set_field value as mf_format does (hex fields via ds_put_hex, i.e. `%#x`-like).
pub(crate) fn format_set_field_value(info: &FieldInfo, value: u64) -> String {
    match info.format {
        Format::Decimal => value.to_string(),
        _ => format_match_value(info, value, None),
    }
}

/// The prefix length of a contiguous netmask, if it is one.
fn cidr_len(mask: u64) -> Option<u32> {
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
        ];
        for (field, text) in cases {
            let info = field.info();
            let (v, m) = parse_field_value(info, text).unwrap();
            let mask = (m != info.full_mask()).then_some(m);
            assert_eq!(format_match_value(info, v, mask), text, "{field:?}");
        }
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
    }
}
