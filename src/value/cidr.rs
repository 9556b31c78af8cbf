//! IPv4 networks in CIDR form.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use ipnet::Ipv4Net;

use super::{text_serde, InvalidInput};

/// An IPv4 network in CIDR form; host bits must be zero (a typo'd network is refused, not
/// silently widened).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    addr: Ipv4Addr,
    prefix: u8,
}

impl Cidr {
    /// 0.0.0.0/0: every address.
    pub const ANY: Cidr = Cidr {
        addr: Ipv4Addr::UNSPECIFIED,
        prefix: 0,
    };

    /// 224.0.0.0/4: every IPv4 multicast group.
    pub const MULTICAST: Cidr = Cidr {
        addr: Ipv4Addr::new(224, 0, 0, 0),
        prefix: 4,
    };

    /// The /32 network of one address.
    pub fn host(addr: Ipv4Addr) -> Cidr {
        Cidr { addr, prefix: 32 }
    }

    pub fn new(addr: Ipv4Addr, prefix: u8) -> Result<Cidr, InvalidInput> {
        let text = format!("{addr}/{prefix}");
        if prefix > 32 {
            return Err(InvalidInput::new("CIDR", text, "prefix length above 32"));
        }
        let cidr = Cidr { addr, prefix };
        if cidr.network() != addr {
            return Err(InvalidInput::new(
                "CIDR",
                text,
                format!("host bits set (the network is {}/{prefix})", cidr.network()),
            ));
        }
        Ok(cidr)
    }

    /// The network `net` lies in (its host bits cleared).
    pub fn containing(net: Ipv4Net) -> Cidr {
        Cidr {
            addr: net.network(),
            prefix: net.prefix_len(),
        }
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn mask(&self) -> Ipv4Addr {
        Ipv4Addr::from(prefix_mask(self.prefix))
    }

    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & prefix_mask(self.prefix))
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & prefix_mask(self.prefix) == u32::from(self.network())
    }

    /// True when the two networks share any address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.network()) || other.contains(self.network())
    }

    /// `ip` with this network's prefix length: an interface address such as a gateway's
    /// `10.128.0.1/23`.
    pub fn interface_address(&self, ip: Ipv4Addr) -> Ipv4Net {
        net(ip, self.prefix)
    }
}

/// A prefix of at most 32 is all `Ipv4Net` checks, and a `Cidr`'s always is.
fn net(addr: Ipv4Addr, prefix: u8) -> Ipv4Net {
    Ipv4Net::new(addr, prefix.min(32)).unwrap_or_default()
}

impl From<Cidr> for Ipv4Net {
    fn from(cidr: Cidr) -> Ipv4Net {
        net(cidr.addr, cidr.prefix)
    }
}

fn prefix_mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

impl FromStr for Cidr {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| InvalidInput::new("CIDR", text, "expected ADDRESS/PREFIX"))?;
        let addr = match addr.parse::<IpAddr>() {
            Ok(IpAddr::V4(addr)) => addr,
            Ok(IpAddr::V6(_)) => {
                let reason = "IPv6 is not supported here; an IPv4 network is required";
                return Err(InvalidInput::new("CIDR", text, reason));
            }
            Err(_) => {
                let reason = "address is not IPv4 dotted quad";
                return Err(InvalidInput::new("CIDR", text, reason));
            }
        };
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| InvalidInput::new("CIDR", text, "prefix length is not a number"))?;
        Cidr::new(addr, prefix)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

text_serde!(Cidr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_host_bits_and_ipv6() {
        let c: Cidr = "10.128.0.0/14".parse().unwrap();
        assert!(c.contains("10.131.255.1".parse().unwrap()));
        assert!(!c.contains("10.132.0.1".parse().unwrap()));
        assert!("10.128.0.1/14".parse::<Cidr>().is_err());
        assert!("10.128.0.0/33".parse::<Cidr>().is_err());
        let ipv6 = "fd00::/8".parse::<Cidr>().unwrap_err();
        assert!(ipv6.reason.starts_with("IPv6 is not supported"), "{ipv6}");
        let garbage = "10.128.0/14".parse::<Cidr>().unwrap_err();
        assert_eq!(garbage.reason, "address is not IPv4 dotted quad");
        assert_eq!(
            "0.0.0.0/0".parse::<Cidr>().unwrap().mask(),
            Ipv4Addr::UNSPECIFIED
        );
    }

    #[test]
    fn converts_to_and_from_ipnet() {
        let c: Cidr = "10.128.2.0/23".parse().unwrap();
        let n: Ipv4Net = c.into();
        assert_eq!(n.to_string(), "10.128.2.0/23");
        assert_eq!(Cidr::containing("10.128.3.7/23".parse().unwrap()), c);
        assert_eq!(
            c.interface_address(Ipv4Addr::new(10, 128, 2, 1))
                .to_string(),
            "10.128.2.1/23"
        );
    }
}
