//! Validated values the netlink module accepts: MAC addresses, interface names, VNIs, IPv4.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use super::error::{Error, Result};

/// Linux's IFNAMSIZ is 16 bytes including the terminating NUL.
pub const MAX_IFNAME_LEN: usize = 15;
/// A VXLAN network identifier has 24 bits.
pub const MAX_VNI: u32 = (1 << 24) - 1;
const MAC_LEN: usize = 6;

/// An Ethernet MAC address. Parses from `aa:bb:cc:dd:ee:ff` (or `-` separated) text and from
/// exactly six bytes; prints lowercase with colons, as `ip` and `bridge` do.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; MAC_LEN]);

impl MacAddr {
    pub fn octets(&self) -> [u8; MAC_LEN] {
        self.0
    }

    /// 00:00:00:00:00:00, which the kernel uses for "no address" (e.g. the VXLAN default
    /// destination entry).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; MAC_LEN]
    }
}

impl TryFrom<&[u8]> for MacAddr {
    type Error = Error;

    fn try_from(bytes: &[u8]) -> Result<Self> {
        let octets: [u8; MAC_LEN] = bytes
            .try_into()
            .map_err(|_| Error::MacLength { len: bytes.len() })?;
        Ok(MacAddr(octets))
    }
}

impl FromStr for MacAddr {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let bad = |reason: String| Error::BadMac {
            text: text.to_string(),
            reason,
        };
        let parts: Vec<&str> = text.split([':', '-']).collect();
        if parts.len() != MAC_LEN {
            return Err(bad(format!(
                "expected 6 groups of two hex digits, found {}",
                parts.len()
            )));
        }
        let mut octets = [0u8; MAC_LEN];
        for (octet, part) in octets.iter_mut().zip(&parts) {
            if part.len() != 2 {
                return Err(bad(format!("group {part:?} is not two hex digits")));
            }
            *octet = u8::from_str_radix(part, 16)
                .map_err(|_| bad(format!("group {part:?} is not hexadecimal")))?;
        }
        Ok(MacAddr(octets))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

impl serde::Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Checks that `name` can be a Linux interface name: 1..=15 bytes, no `/`, no whitespace, not
/// `.` or `..` (the kernel's `dev_valid_name` rules). The name also becomes a /proc/sys path
/// component, which is why `/` must never pass.
pub fn validate_ifname(name: &str) -> Result<()> {
    let bad = |reason| Error::BadName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    if name.len() > MAX_IFNAME_LEN {
        return Err(Error::NameTooLong {
            name: name.to_string(),
            len: name.len(),
        });
    }
    if name == "." || name == ".." {
        return Err(bad("`.` and `..` are reserved"));
    }
    if name.contains('/') || name.contains(':') {
        return Err(bad("it contains `/` or `:`"));
    }
    if name.chars().any(char::is_whitespace) {
        return Err(bad("it contains whitespace"));
    }
    Ok(())
}

/// Checks that `vni` fits the 24-bit VXLAN header field.
pub fn validate_vni(vni: u32) -> Result<()> {
    if vni > MAX_VNI {
        return Err(Error::VniOutOfRange { vni });
    }
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
    let addr: IpAddr = text.trim().parse().map_err(|_| Error::BadAddress {
        what,
        text: text.to_string(),
        reason: "not an IP address".into(),
    })?;
    require_ipv4(what, addr)
}

/// Parses `text` as an IPv4 network `a.b.c.d/len`, saying clearly when it is IPv6.
pub fn parse_ipv4_net(what: &'static str, text: &str) -> Result<ipnet::Ipv4Net> {
    let net: ipnet::IpNet = text.trim().parse().map_err(|_| Error::BadAddress {
        what,
        text: text.to_string(),
        reason: "not an address/prefix-length network".into(),
    })?;
    match net {
        ipnet::IpNet::V4(v4) => Ok(v4),
        ipnet::IpNet::V6(v6) => Err(Error::NotIpv4 {
            what,
            addr: IpAddr::V6(v6.addr()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parses_and_prints_like_ip() {
        let mac: MacAddr = "AA:bb:0c:dd:ee:0F".parse().unwrap();
        assert_eq!(mac.0, [0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0x0f]);
        assert_eq!(mac.to_string(), "aa:bb:0c:dd:ee:0f");
        assert_eq!("aa-bb-0c-dd-ee-0f".parse::<MacAddr>().unwrap(), mac);
    }

    #[test]
    fn mac_rejects_wrong_lengths_and_garbage() {
        for text in [
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:f",
            "aa:bb:cc:dd:ee:fg",
            "",
            "aabbccddeeff",
        ] {
            let err = text.parse::<MacAddr>().unwrap_err();
            assert!(matches!(err, Error::BadMac { .. }), "{text}: {err}");
        }
        let err = MacAddr::try_from(&[1u8, 2, 3, 4, 5][..]).unwrap_err();
        assert_eq!(err.to_string(), "a MAC address has 6 bytes, this one has 5");
        assert!(MacAddr::try_from(&[0u8; 6][..]).unwrap().is_zero());
    }

    #[test]
    fn mac_serde_round_trip() {
        let mac: MacAddr = "02:00:00:00:00:01".parse().unwrap();
        let json = serde_json::to_string(&mac).unwrap();
        assert_eq!(json, "\"02:00:00:00:00:01\"");
        assert_eq!(serde_json::from_str::<MacAddr>(&json).unwrap(), mac);
        assert!(serde_json::from_str::<MacAddr>("\"02:00\"").is_err());
    }

    #[test]
    fn ifname_rules() {
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
        assert!(matches!(
            parse_ipv4_net("subnet", "2001:db8::/64"),
            Err(Error::NotIpv4 { .. })
        ));
        assert_eq!(
            parse_ipv4_net("subnet", "10.128.2.0/23")
                .unwrap()
                .to_string(),
            "10.128.2.0/23"
        );
    }
}
