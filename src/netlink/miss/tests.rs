//! The miss loop's parsing of the kernel's notifications and its resync from the tables.

use super::*;
use netlink_packet_core::NetlinkHeader;
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};
use netlink_packet_route::AddressFamily;

const LINK: u32 = 7;

fn mac(last: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, last])
}

fn neighbour(
    family: AddressFamily,
    ifindex: u32,
    state: u16,
    dst: Option<NeighbourAddress>,
    lladdr: Option<Vec<u8>>,
) -> NeighbourMessage {
    let mut message = NeighbourMessage::default();
    message.header.family = family;
    message.header.ifindex = ifindex;
    message.header.state = state.into();
    if let Some(dst) = dst {
        message
            .attributes
            .push(NeighbourAttribute::Destination(dst));
    }
    if let Some(lladdr) = lladdr {
        message
            .attributes
            .push(NeighbourAttribute::LinkLayerAddress(lladdr));
    }
    message
}

fn wire(messages: Vec<RouteNetlinkMessage>) -> Vec<u8> {
    let mut datagram = Vec::new();
    for inner in messages {
        let mut message = NetlinkMessage::new(
            NetlinkHeader::default(),
            NetlinkPayload::InnerMessage(inner),
        );
        message.finalize();
        let mut bytes = vec![0u8; message.buffer_len()];
        message.serialize(&mut bytes);
        bytes.resize(bytes.len().div_ceil(NLMSG_ALIGN) * NLMSG_ALIGN, 0);
        datagram.extend(bytes);
    }
    datagram
}

fn inet(ip: [u8; 4]) -> Option<NeighbourAddress> {
    Some(NeighbourAddress::Inet(Ipv4Addr::from(ip)))
}

#[test]
fn l3_and_l2_misses_of_our_link_pass_the_filter() {
    let l3 = RouteNetlinkMessage::GetNeighbour(neighbour(
        AddressFamily::Inet,
        LINK,
        0x01,
        inet([10, 128, 2, 1]),
        None,
    ));
    let l2 = RouteNetlinkMessage::GetNeighbour(neighbour(
        AddressFamily::Inet,
        LINK,
        0x04,
        None,
        Some(mac(2).octets().to_vec()),
    ));
    // The VXLAN driver's own L3 miss: NDA_DST plus an all-zero NDA_LLADDR.
    let driver_l3 = RouteNetlinkMessage::GetNeighbour(neighbour(
        AddressFamily::Bridge,
        LINK,
        0x04,
        Some(NeighbourAddress::Other(vec![10, 128, 2, 9])),
        Some(vec![0; 6]),
    ));
    let got = misses_in_datagram(&wire(vec![l3, l2, driver_l3]), LINK);
    assert_eq!(
        got,
        vec![
            Miss::L3(Ipv4Addr::new(10, 128, 2, 1)),
            Miss::L2(mac(2)),
            Miss::L3(Ipv4Addr::new(10, 128, 2, 9)),
        ]
    );
}

#[test]
fn everything_else_is_filtered_out() {
    let cases = vec![
        // Another link.
        RouteNetlinkMessage::GetNeighbour(neighbour(
            AddressFamily::Inet,
            LINK + 1,
            0x01,
            inet([10, 128, 2, 1]),
            None,
        )),
        // Not resolving (REACHABLE, FAILED, PERMANENT).
        RouteNetlinkMessage::NewNeighbour(neighbour(
            AddressFamily::Inet,
            LINK,
            0x02,
            inet([10, 128, 2, 1]),
            None,
        )),
        RouteNetlinkMessage::NewNeighbour(neighbour(
            AddressFamily::Inet,
            LINK,
            0x20,
            inet([10, 128, 2, 1]),
            None,
        )),
        // A deletion is no question.
        RouteNetlinkMessage::DelNeighbour(neighbour(
            AddressFamily::Inet,
            LINK,
            0x01,
            inet([10, 128, 2, 1]),
            None,
        )),
        // Both halves known: a stale entry, not a miss.
        RouteNetlinkMessage::NewNeighbour(neighbour(
            AddressFamily::Inet,
            LINK,
            0x04,
            inet([10, 128, 2, 1]),
            Some(mac(2).octets().to_vec()),
        )),
        // IPv6 neighbour discovery.
        RouteNetlinkMessage::GetNeighbour(neighbour(
            AddressFamily::Inet6,
            LINK,
            0x04,
            Some(NeighbourAddress::Inet6("fe80::1".parse().unwrap())),
            None,
        )),
        // Neither half.
        RouteNetlinkMessage::GetNeighbour(neighbour(AddressFamily::Inet, LINK, 0x04, None, None)),
    ];
    assert_eq!(misses_in_datagram(&wire(cases), LINK), vec![]);
}

#[test]
fn combined_states_still_count_as_resolving() {
    let message = RouteNetlinkMessage::GetNeighbour(neighbour(
        AddressFamily::Inet,
        LINK,
        0x0c,
        inet([10, 128, 2, 1]),
        None,
    ));
    assert_eq!(
        misses_in_datagram(&wire(vec![message]), LINK),
        vec![Miss::L3(Ipv4Addr::new(10, 128, 2, 1))]
    );
}

#[test]
fn truncated_and_garbage_datagrams_are_survived() {
    let good = wire(vec![RouteNetlinkMessage::GetNeighbour(neighbour(
        AddressFamily::Inet,
        LINK,
        0x01,
        inet([10, 128, 2, 1]),
        None,
    ))]);
    for cut in 0..good.len() {
        let _ = misses_in_datagram(&good[..cut], LINK);
    }
    // A header claiming a length of zero must not loop forever.
    let mut zero = good.clone();
    zero[0..4].copy_from_slice(&0u32.to_ne_bytes());
    assert_eq!(misses_in_datagram(&zero, LINK), vec![]);
    // A length beyond the datagram ends it.
    let mut long = good;
    long[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
    assert_eq!(misses_in_datagram(&long, LINK), vec![]);
    let _ = misses_in_datagram(&[0xa5; 100], LINK);
}

#[test]
fn resync_finds_unresolved_neighbours_and_macs_without_fdb() {
    let ip = |last| Ipv4Addr::new(10, 128, 2, last);
    let neighbours = vec![
        NeighEntry {
            ip: ip(1),
            mac: None,
            state: NudState::INCOMPLETE,
        },
        NeighEntry {
            ip: ip(2),
            mac: None,
            state: NudState::FAILED,
        },
        NeighEntry {
            ip: ip(3),
            mac: Some(mac(3)),
            state: NudState::REACHABLE,
        },
        NeighEntry {
            ip: ip(4),
            mac: Some(mac(4)),
            state: NudState::STALE,
        },
        NeighEntry {
            ip: ip(5),
            mac: Some(mac(4)),
            state: NudState::REACHABLE,
        },
        NeighEntry {
            ip: ip(6),
            mac: None,
            state: NudState::NOARP,
        },
    ];
    let got = misses_from_tables(&neighbours, [mac(3)]);
    assert_eq!(
        got,
        vec![Miss::L3(ip(1)), Miss::L3(ip(2)), Miss::L2(mac(4))]
    );
}

#[test]
fn stats_snapshot_reads_every_counter() {
    let counters = Counters::default();
    bump(&counters.seen);
    bump(&counters.overruns);
    bump(&counters.overruns);
    let stats = counters.snapshot();
    assert_eq!(stats.seen, 1);
    assert_eq!(stats.overruns, 2);
    assert_eq!(stats.answered, 0);
}
