//! The 5-tuple of the packet a packet-in carries (its first bytes: the audit flows send at
//! most 128): Ethernet (one 802.1Q tag allowed), IPv4, then TCP, UDP or SCTP ports or an
//! ICMP type and code. Anything else is a [`BadPacket`] that says why; nothing here panics
//! or allocates from a length field.

use std::net::Ipv4Addr;

const ETH_HEADER: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_SCTP: u8 = 132;

/// The transport protocol, by its IP protocol number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
    Icmp,
    Other(u8),
}

impl Protocol {
    fn of(number: u8) -> Protocol {
        match number {
            IPPROTO_TCP => Protocol::Tcp,
            IPPROTO_UDP => Protocol::Udp,
            IPPROTO_SCTP => Protocol::Sctp,
            IPPROTO_ICMP => Protocol::Icmp,
            other => Protocol::Other(other),
        }
    }

    /// `tcp`, `udp`, `sctp`, `icmp`, or the number (`"47"`).
    pub fn name(self) -> String {
        match self {
            Protocol::Tcp => "tcp".into(),
            Protocol::Udp => "udp".into(),
            Protocol::Sctp => "sctp".into(),
            Protocol::Icmp => "icmp".into(),
            Protocol::Other(n) => n.to_string(),
        }
    }

    fn has_ports(self) -> bool {
        matches!(self, Protocol::Tcp | Protocol::Udp | Protocol::Sctp)
    }
}

/// What identifies a connection in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple {
    pub protocol: Protocol,
    pub src: Ipv4Addr,
    /// TCP/UDP/SCTP ports (None for other protocols and for a non-first fragment).
    pub src_port: Option<u16>,
    pub dst: Ipv4Addr,
    pub dst_port: Option<u16>,
    /// ICMP type and code.
    pub icmp: Option<(u8, u8)>,
}

/// Why a packet-in's packet was not logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPacket {
    #[error("{what} truncated: {have} bytes where {need} are needed")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("ethertype {0:#06x} is not IPv4")]
    NotIpv4(u16),
    #[error("IP version {0} in an IPv4 ethertype")]
    BadVersion(u8),
    #[error("IPv4 header length {0} bytes is below 20")]
    BadHeaderLength(usize),
    #[error("the packet-in's userdata names no audited rule")]
    NoRule,
}

/// The 5-tuple of an Ethernet frame.
pub fn parse(frame: &[u8]) -> Result<FiveTuple, BadPacket> {
    let ip = ipv4_payload(frame)?;
    need("IPv4 header", ip, 20)?;
    let version = ip[0] >> 4;
    if version != 4 {
        return Err(BadPacket::BadVersion(version));
    }
    let header_len = usize::from(ip[0] & 0x0f) * 4;
    if header_len < 20 {
        return Err(BadPacket::BadHeaderLength(header_len));
    }
    need("IPv4 options", ip, header_len)?;
    let protocol = Protocol::of(ip[9]);
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let fragment_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    let mut tuple = FiveTuple {
        protocol,
        src,
        src_port: None,
        dst,
        dst_port: None,
        icmp: None,
    };
    if fragment_offset != 0 {
        // Only the first fragment carries the transport header.
        return Ok(tuple);
    }
    let l4 = &ip[header_len..];
    if protocol.has_ports() {
        need("transport ports", l4, 4)?;
        tuple.src_port = Some(u16::from_be_bytes([l4[0], l4[1]]));
        tuple.dst_port = Some(u16::from_be_bytes([l4[2], l4[3]]));
    } else if protocol == Protocol::Icmp {
        need("ICMP header", l4, 2)?;
        tuple.icmp = Some((l4[0], l4[1]));
    }
    Ok(tuple)
}

/// The bytes after the Ethernet header (and one VLAN tag) of an IPv4 frame.
fn ipv4_payload(frame: &[u8]) -> Result<&[u8], BadPacket> {
    need("Ethernet header", frame, ETH_HEADER)?;
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    let mut at = ETH_HEADER;
    if ethertype == ETHERTYPE_VLAN {
        need("802.1Q tag", frame, ETH_HEADER + 4)?;
        ethertype = u16::from_be_bytes([frame[16], frame[17]]);
        at += 4;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Err(BadPacket::NotIpv4(ethertype));
    }
    Ok(&frame[at..])
}

fn need(what: &'static str, bytes: &[u8], n: usize) -> Result<(), BadPacket> {
    if bytes.len() < n {
        return Err(BadPacket::Truncated {
            what,
            need: n,
            have: bytes.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An Ethernet + IPv4 frame of `protocol` with `l4` after the IP header.
    pub(crate) fn frame(protocol: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, protocol, 0, 0];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        f.extend_from_slice(&ip);
        f.extend_from_slice(l4);
        f
    }

    pub(crate) fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut l4 = sport.to_be_bytes().to_vec();
        l4.extend_from_slice(&dport.to_be_bytes());
        l4.extend_from_slice(&[0; 16]);
        frame(IPPROTO_TCP, [10, 128, 0, 5], [10, 128, 1, 7], &l4)
    }

    #[test]
    fn tcp_udp_sctp_give_ports_and_icmp_its_type() {
        let t = parse(&tcp(34567, 80)).unwrap();
        assert_eq!(t.protocol, Protocol::Tcp);
        assert_eq!(
            (t.src, t.src_port, t.dst, t.dst_port),
            (
                Ipv4Addr::new(10, 128, 0, 5),
                Some(34567),
                Ipv4Addr::new(10, 128, 1, 7),
                Some(80)
            )
        );
        for (number, protocol) in [(17, Protocol::Udp), (132, Protocol::Sctp)] {
            let t = parse(&frame(number, [1, 2, 3, 4], [5, 6, 7, 8], &[0, 1, 0, 2])).unwrap();
            assert_eq!(
                (t.protocol, t.src_port, t.dst_port),
                (protocol, Some(1), Some(2))
            );
        }
        let icmp = parse(&frame(1, [1, 2, 3, 4], [5, 6, 7, 8], &[8, 0, 0, 0])).unwrap();
        assert_eq!((icmp.icmp, icmp.src_port), (Some((8, 0)), None));
        let gre = parse(&frame(47, [1, 2, 3, 4], [5, 6, 7, 8], &[])).unwrap();
        assert_eq!(gre.protocol.name(), "47");
    }

    #[test]
    fn a_vlan_tag_and_ip_options_are_stepped_over() {
        let mut f = tcp(1, 2);
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(parse(&f).unwrap().dst_port, Some(2));
        let mut with_options = frame(6, [1, 1, 1, 1], [2, 2, 2, 2], &[]);
        with_options[14] = 0x46;
        with_options.extend_from_slice(&[0, 0, 0, 0, 0, 9, 0, 10]);
        assert_eq!(parse(&with_options).unwrap().src_port, Some(9));
    }

    #[test]
    fn bad_packets_say_why() {
        assert!(matches!(
            parse(&[0; 10]),
            Err(BadPacket::Truncated {
                what: "Ethernet header",
                ..
            })
        ));
        let mut arp = tcp(1, 2);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(parse(&arp), Err(BadPacket::NotIpv4(0x0806)));
        let short = &tcp(1, 2)[..14 + 20 + 3];
        assert!(matches!(
            parse(short),
            Err(BadPacket::Truncated {
                what: "transport ports",
                ..
            })
        ));
        let mut v6 = tcp(1, 2);
        v6[14] = 0x65;
        assert_eq!(parse(&v6), Err(BadPacket::BadVersion(6)));
        let mut short_ihl = tcp(1, 2);
        short_ihl[14] = 0x44;
        assert_eq!(parse(&short_ihl), Err(BadPacket::BadHeaderLength(16)));
    }

    #[test]
    fn a_later_fragment_has_no_ports() {
        let mut f = tcp(1, 2);
        f[20] = 0x00;
        f[21] = 0x10;
        let t = parse(&f).unwrap();
        assert_eq!((t.src_port, t.dst_port), (None, None));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn any_ipv4_header_prefix_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
            f.extend_from_slice(&tail);
            let _ = parse(&f);
        }
    }
}
