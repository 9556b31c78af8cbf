//! IPv4 addresses given as text.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::InvalidInput;

/// Why text is not an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotIpv4 {
    /// It is an IPv6 address: ofnode's tables carry IPv4 only.
    Ipv6(Ipv6Addr),
    /// It is no IP address at all.
    Garbage,
}

/// The IPv4 address `text` spells (surrounding whitespace ignored).
pub fn ipv4_from_text(text: &str) -> Result<Ipv4Addr, NotIpv4> {
    match text.trim().parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(ip),
        Ok(IpAddr::V6(ip)) => Err(NotIpv4::Ipv6(ip)),
        Err(_) => Err(NotIpv4::Garbage),
    }
}

/// An IPv4 address given by a user; the error says clearly when it is IPv6 or not an address.
pub fn parse_ipv4(what: &'static str, text: &str) -> Result<Ipv4Addr, InvalidInput> {
    ipv4_from_text(text).map_err(|e| {
        let reason = match e {
            NotIpv4::Ipv6(_) => "IPv6 is not supported here; an IPv4 address is required",
            NotIpv4::Garbage => "not an IPv4 dotted quad",
        };
        InvalidInput::new(what, text, reason)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_and_garbage_are_told_apart() {
        assert_eq!(
            parse_ipv4("pod IP", " 10.128.0.5").unwrap(),
            Ipv4Addr::new(10, 128, 0, 5)
        );
        let err = parse_ipv4("pod IP", "fd00::5").unwrap_err();
        assert!(err.to_string().contains("IPv6 is not supported"), "{err}");
        assert_eq!(ipv4_from_text("nope"), Err(NotIpv4::Garbage));
        assert!(matches!(ipv4_from_text("::1"), Err(NotIpv4::Ipv6(_))));
    }
}
