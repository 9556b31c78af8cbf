//! Ethernet MAC addresses.

use std::fmt;
use std::str::FromStr;

use super::{text_serde, InvalidInput};

const MAC_LEN: usize = 6;

/// An Ethernet MAC address. Parses from six groups of one or two hex digits separated by `:`
/// or `-` (`0a:58:0a:80:00:05`, `0A-58-0A-80-00-05`) and from exactly six bytes; prints
/// lowercase with colons, as ovs-ofctl, `ip` and `bridge` do.
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

/// Bytes that are not six long cannot be a MAC address (a netlink attribute, a flow's field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a MAC address has 6 bytes, this one has {len}")]
pub struct MacLength {
    pub len: usize,
}

impl TryFrom<&[u8]> for MacAddr {
    type Error = MacLength;

    fn try_from(bytes: &[u8]) -> Result<Self, MacLength> {
        let octets: [u8; MAC_LEN] = bytes
            .try_into()
            .map_err(|_| MacLength { len: bytes.len() })?;
        Ok(MacAddr(octets))
    }
}

impl FromStr for MacAddr {
    type Err = InvalidInput;

    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let bad = |reason: String| InvalidInput::new("MAC address", text, reason);
        let groups: Vec<&str> = text.split([':', '-']).collect();
        if groups.len() != MAC_LEN {
            return Err(bad(format!(
                "expected 6 groups of hex digits separated by `:`, like 0a:58:0a:80:00:05; found {}",
                groups.len()
            )));
        }
        let mut octets = [0u8; MAC_LEN];
        for (octet, group) in octets.iter_mut().zip(&groups) {
            let hex = !group.is_empty()
                && group.len() <= 2
                && group.chars().all(|c| c.is_ascii_hexdigit());
            if !hex {
                return Err(bad(format!("group {group:?} is not one or two hex digits")));
            }
            *octet = u8::from_str_radix(group, 16)
                .map_err(|_| bad(format!("group {group:?} is not hexadecimal")))?;
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

text_serde!(MacAddr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_separators_and_prints_lowercase_with_colons() {
        let mac: MacAddr = "AA:bb:0c:dd:ee:0F".parse().unwrap();
        assert_eq!(mac.0, [0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0x0f]);
        assert_eq!(mac.to_string(), "aa:bb:0c:dd:ee:0f");
        assert_eq!("aa-bb-0c-dd-ee-0f".parse::<MacAddr>().unwrap(), mac);
        // ovs-ofctl's own syntax allows one digit per group.
        assert_eq!(
            "a:58:a:80:0:5".parse::<MacAddr>().unwrap().to_string(),
            "0a:58:0a:80:00:05"
        );
    }

    #[test]
    fn refuses_wrong_lengths_and_garbage() {
        for text in [
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:fg",
            "aa:bb:cc:dd:ee:",
            "aa:bb:cc:dd:ee:+f",
            "aa:bb:cc:dd:ee:fff",
            "",
            "aabbccddeeff",
        ] {
            let err = text.parse::<MacAddr>().unwrap_err();
            assert_eq!(err.what, "MAC address", "{text}: {err}");
        }
        let err = "02:00:00:00:02".parse::<MacAddr>().unwrap_err();
        assert!(err.to_string().contains("expected 6 groups"), "{err}");
    }

    #[test]
    fn from_bytes_needs_six() {
        let err = MacAddr::try_from(&[1u8, 2, 3, 4, 5][..]).unwrap_err();
        assert_eq!(err.to_string(), "a MAC address has 6 bytes, this one has 5");
        assert!(MacAddr::try_from(&[0u8; 6][..]).unwrap().is_zero());
    }

    #[test]
    fn serde_round_trip() {
        let mac: MacAddr = "02:00:00:00:00:01".parse().unwrap();
        let json = serde_json::to_string(&mac).unwrap();
        assert_eq!(json, "\"02:00:00:00:00:01\"");
        assert_eq!(serde_json::from_str::<MacAddr>(&json).unwrap(), mac);
        assert!(serde_json::from_str::<MacAddr>("\"02:00\"").is_err());
    }
}
