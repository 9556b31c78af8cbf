//! The matches of the mode's flows, as values: a policy's targets, peers and ports, and the
//! flows a satisfied conjunction goes to. One function per kind of match, each the single
//! place its fields are chosen.

use std::net::Ipv4Addr;

use ofnode_proto::{Field, Match};

use crate::sdn::layout::{REG_DESTINATION_VNID, REG_SOURCE_VNID};
use crate::sdn::objects::L4;
use crate::sdn::policy::networkpolicy::model::Port;
use crate::sdn::policy::networkpolicy::ranges;
use crate::value::{Cidr, Vnid};

const ETH_TYPE_IPV4: u64 = 0x0800;

pub use crate::sdn::audit::Dir;

fn ip() -> Match {
    Match::new().with(Field::EthType, ETH_TYPE_IPV4)
}

fn address(field: Field, cidr: Cidr) -> Match {
    ip().with_ipv4(field, cidr.network(), cidr.prefix())
}

impl Dir {
    /// The field holding the target's own address (ingress: destination; egress: source).
    fn target_field(self) -> Field {
        match self {
            Dir::Ingress => Field::Ipv4Dst,
            Dir::Egress => Field::Ipv4Src,
        }
    }

    fn peer_field(self) -> Field {
        match self {
            Dir::Ingress => Field::Ipv4Src,
            Dir::Egress => Field::Ipv4Dst,
        }
    }

    /// The register holding the target namespace's VNID (ingress: reg1, egress: reg0).
    fn target_vnid_register(self) -> Field {
        match self {
            Dir::Ingress => REG_DESTINATION_VNID,
            Dir::Egress => REG_SOURCE_VNID,
        }
    }
}

/// A target pod by address: `ip, nw_dst=IP` (ingress) or `ip, nw_src=IP` (egress).
pub fn target(dir: Dir, pod: Ipv4Addr) -> Match {
    address(dir.target_field(), Cidr::host(pod))
}

/// Every pod of a namespace as target: `ip, reg1=VNID` (ingress) or `ip, reg0=VNID` (egress).
pub fn target_namespace(dir: Dir, vnid: Vnid) -> Match {
    ip().with(dir.target_vnid_register(), u64::from(vnid.get()))
}

/// A peer pod: by its namespace's VNID and address for ingress (`ip, reg0=VNID, nw_src=IP`),
/// by address for egress (`ip, nw_dst=IP`: a destination's VNID is not known on the way out).
pub fn peer_pod(dir: Dir, pod: Ipv4Addr, vnid: Vnid) -> Match {
    let by_address = address(dir.peer_field(), Cidr::host(pod));
    match dir {
        Dir::Ingress => by_address.with(REG_SOURCE_VNID, u64::from(vnid.get())),
        Dir::Egress => by_address,
    }
}

/// Every pod of a namespace as ingress peer: `ip, reg0=VNID`.
pub fn peer_namespace(vnid: Vnid) -> Match {
    ip().with(REG_SOURCE_VNID, u64::from(vnid.get()))
}

/// A network as peer: `ip, nw_src=CIDR` (ingress) or `ip, nw_dst=CIDR` (egress).
pub fn peer_network(dir: Dir, cidr: Cidr) -> Match {
    address(dir.peer_field(), cidr)
}

/// An ipBlock minus its excepts, as the fewest networks.
pub fn peer_block(dir: Dir, cidr: Cidr, except: &[Cidr]) -> Vec<Match> {
    ranges::subtract(cidr, except)
        .into_iter()
        .map(|c| peer_network(dir, c))
        .collect()
}

fn protocol_fields(protocol: L4) -> (u64, Field) {
    match protocol {
        L4::Tcp => (6, Field::TcpDst),
        L4::Udp => (17, Field::UdpDst),
        L4::Sctp => (132, Field::SctpDst),
    }
}

/// A rule's port entry: its protocol alone, one port, or a range as value/mask pairs.
pub fn ports(port: &Port) -> Vec<Match> {
    let (proto, dst) = protocol_fields(port.protocol);
    let base = ip().with(Field::IpProto, proto);
    match port.range {
        None => vec![base],
        Some((first, last)) if first == last => vec![base.with(dst, u64::from(first))],
        Some((first, last)) => ranges::port_masks(first, last)
            .into_iter()
            .map(|(value, mask)| {
                base.clone()
                    .with_masked(dst, u64::from(value), u64::from(mask))
            })
            .collect(),
    }
}

/// `m` narrowed to one destination port over `protocol` (a named port resolved on a pod).
pub fn with_port(m: Match, protocol: L4, port: u16) -> Match {
    let (proto, dst) = protocol_fields(protocol);
    m.with(Field::IpProto, proto).with(dst, u64::from(port))
}

/// The flow a satisfied conjunction `id` goes to: `conj_id=ID, ip`.
pub fn conjunction(id: u32) -> Match {
    ip().with(Field::ConjId, u64::from(id))
}
