//! The netlink module's checks of the shared values (`crate::value`), worded as netlink
//! errors: interface names, VNIs and IPv4 addresses (networks are `crate::value::Cidr`'s).

use std::net::{IpAddr, Ipv4Addr};

use crate::value::{ipv4_from_text, IfName, IfNameError, NotIpv4, Vnid};
pub use crate::value::{MacAddr, MAX_IFNAME_LEN};

use super::error::{Error, Result};

/// A VXLAN network identifier has 24 bits: the width of a VNID.
pub const MAX_VNI: u32 = Vnid::MAX;

/// Checks that `name` can be a Linux interface name (`crate::value::IfName`'s rules).
pub fn validate_ifname(name: &str) -> Result<()> {
    IfName::check(name).map_err(|e| match e {
        IfNameError::TooLong { len } => Error::NameTooLong {
            name: name.to_string(),
            len,
        },
        other => Error::BadName {
            name: name.to_string(),
            reason: other.reason(),
        },
    })
}

/// Checks that `vni` fits the 24-bit VXLAN header field.
pub fn validate_vni(vni: u32) -> Result<()> {
    Vnid::new(vni).map_err(|_| Error::VniOutOfRange { vni })?;
    Ok(())
}

/// The IPv4 address inside `addr`, or an error naming `what` when it is IPv6.
pub fn require_ipv4(what: &'static str, addr: IpAddr) -> Result<Ipv4Addr> {
    match addr {
        IpAddr::V4(v4) => Ok(v4),
        IpAddr::V6(_) => Err(Error::NotIpv4 { what, addr }),
    }
}

/// Parses `text` as an IPv4 address, saying clearly when it is IPv6 or not an address.
pub fn parse_ipv4(what: &'static str, text: &str) -> Result<Ipv4Addr> {
    ipv4_from_text(text).map_err(|e| match e {
        NotIpv4::Ipv6(ip) => Error::NotIpv4 {
            what,
            addr: IpAddr::V6(ip),
        },
        NotIpv4::Garbage => Error::BadAddress {
            what,
            text: text.to_string(),
            reason: "not an IP address".into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifname_rules_keep_netlinks_words() {
        assert!(validate_ifname("vxlan0").is_ok());
        assert!(validate_ifname("fifteen-bytes-x").is_ok());
        let err = validate_ifname("sixteen-bytes-xx").unwrap_err();
        assert_eq!(
            err.to_string(),
            "interface name \"sixteen-bytes-xx\" is 16 bytes; Linux allows at most 15"
        );
        for name in ["", ".", "..", "a/b", "a b", "a:b"] {
            assert!(
                matches!(validate_ifname(name), Err(Error::BadName { .. })),
                "{name:?}"
            );
        }
    }

    #[test]
    fn vni_and_ipv4_rules() {
        assert!(validate_vni(MAX_VNI).is_ok());
        assert!(matches!(
            validate_vni(MAX_VNI + 1),
            Err(Error::VniOutOfRange { vni: 16777216 })
        ));
        assert_eq!(
            parse_ipv4("VTEP address", "192.0.2.1").unwrap(),
            Ipv4Addr::new(192, 0, 2, 1)
        );
        let err = parse_ipv4("VTEP address", "2001:db8::1").unwrap_err();
        assert!(err.to_string().contains("is not IPv4"), "{err}");
        assert!(matches!(
            parse_ipv4("VTEP address", "nope"),
            Err(Error::BadAddress { .. })
        ));
    }
}
