//! Neighbour (ARP) entries and the VXLAN device's forwarding database (FDB).
//!
//! An L3 entry maps an overlay IP to the remote VTEP's MAC (`ip neigh`); an L2 entry maps that
//! MAC to the remote host's underlay IP (`bridge fdb … self`). Together they send a packet for
//! a remote overlay address into the right tunnel.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::RouteType;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use nix::errno::Errno;

use super::error::Result;
use super::handle::Handle;
use super::types::{require_ipv4, MacAddr};

/// A neighbour state as the kernel's `NUD_*` bit set. netlink-packet-route decodes the state
/// as an enum of single values, so a combined state would arrive as `Other(bits)`; the bits are
/// what the seed tests, so they are what this type keeps.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NudState(pub u16);

impl NudState {
    pub const INCOMPLETE: NudState = NudState(0x01);
    pub const REACHABLE: NudState = NudState(0x02);
    pub const STALE: NudState = NudState(0x04);
    pub const DELAY: NudState = NudState(0x08);
    pub const PROBE: NudState = NudState(0x10);
    pub const FAILED: NudState = NudState(0x20);
    pub const NOARP: NudState = NudState(0x40);
    pub const PERMANENT: NudState = NudState(0x80);

    /// The seed's `isNeighResolving`: the kernel is still looking for the answer. Misses come
    /// with one of these bits set (L3 misses INCOMPLETE, L2 misses STALE).
    pub const RESOLVING: NudState = NudState(0x01 | 0x04 | 0x08 | 0x10);

    pub fn intersects(self, other: NudState) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_resolving(self) -> bool {
        self.intersects(NudState::RESOLVING)
    }
}

/// Each state bit with its name as `ip neigh` prints it: the one table Display reads.
const NUD_NAMES: [(NudState, &str); 8] = [
    (NudState::INCOMPLETE, "INCOMPLETE"),
    (NudState::REACHABLE, "REACHABLE"),
    (NudState::STALE, "STALE"),
    (NudState::DELAY, "DELAY"),
    (NudState::PROBE, "PROBE"),
    (NudState::FAILED, "FAILED"),
    (NudState::NOARP, "NOARP"),
    (NudState::PERMANENT, "PERMANENT"),
];

impl fmt::Display for NudState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = NUD_NAMES
            .iter()
            .filter(|(bit, _)| self.intersects(*bit))
            .map(|(_, name)| *name)
            .collect();
        if names.is_empty() {
            write!(f, "NONE")
        } else {
            write!(f, "{}", names.join("|"))
        }
    }
}

impl fmt::Debug for NudState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NudState({self})")
    }
}

impl From<NeighbourState> for NudState {
    fn from(state: NeighbourState) -> NudState {
        NudState(u16::from(state))
    }
}

impl From<NudState> for NeighbourState {
    fn from(state: NudState) -> NeighbourState {
        NeighbourState::from(state.0)
    }
}

/// One FDB entry of a VXLAN device: frames for `mac` go to the VTEP at `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbEntry {
    pub mac: MacAddr,
    /// The remote VTEP; `None` for entries without one (the device's own address).
    pub dst: Option<Ipv4Addr>,
    pub state: NudState,
}

/// One IPv4 neighbour entry: `ip` is at `mac` (no MAC while unresolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighEntry {
    pub ip: Ipv4Addr,
    pub mac: Option<MacAddr>,
    pub state: NudState,
}

/// The destination IP and link-layer address a neighbour message carries. An all-zero MAC is
/// reported as none: the VXLAN driver fills NDA_LLADDR with zeros when it has no address.
pub(crate) fn neighbour_fields(message: &NeighbourMessage) -> (Option<IpAddr>, Option<MacAddr>) {
    let mut ip = None;
    let mut mac = None;
    for attribute in &message.attributes {
        match attribute {
            NeighbourAttribute::Destination(address) => ip = ip_of(address),
            NeighbourAttribute::LinkLayerAddress(bytes) => {
                mac = MacAddr::try_from(&bytes[..])
                    .ok()
                    .filter(|mac| !mac.is_zero());
            }
            _ => {}
        }
    }
    (ip, mac)
}

/// AF_BRIDGE messages carry their NDA_DST as raw bytes (the crate only knows the address
/// family from the header), so a 4- or 16-byte value is read as an IP here.
fn ip_of(address: &NeighbourAddress) -> Option<IpAddr> {
    match address {
        NeighbourAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        NeighbourAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        NeighbourAddress::Other(bytes) => {
            if let Ok(octets) = <[u8; 4]>::try_from(&bytes[..]) {
                Some(IpAddr::from(octets))
            } else {
                <[u8; 16]>::try_from(&bytes[..]).ok().map(IpAddr::from)
            }
        }
        _ => None,
    }
}

fn fdb_message(index: u32, mac: MacAddr, vtep: Ipv4Addr, state: NudState) -> NeighbourMessage {
    let mut message = NeighbourMessage::default();
    message.header.family = AddressFamily::Bridge;
    message.header.ifindex = index;
    message.header.state = state.into();
    // NTF_SELF: the entry belongs to the VXLAN device itself, not to a bridge it is a port of.
    message.header.flags = NeighbourFlags::Own;
    message.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(mac.octets().to_vec()),
        NeighbourAttribute::Destination(NeighbourAddress::Inet(vtep)),
    ];
    message
}

fn l3_message(index: u32, ip: Ipv4Addr, mac: Option<MacAddr>, state: NudState) -> NeighbourMessage {
    let mut message = NeighbourMessage::default();
    message.header.family = AddressFamily::Inet;
    message.header.ifindex = index;
    message.header.state = state.into();
    message.header.kind = RouteType::Unicast;
    message.attributes = vec![NeighbourAttribute::Destination(NeighbourAddress::Inet(ip))];
    if let Some(mac) = mac {
        message
            .attributes
            .push(NeighbourAttribute::LinkLayerAddress(mac.octets().to_vec()));
    }
    message
}

impl Handle {
    /// The seed's `AddL2`: frames for `mac` on VXLAN link `index` go to `vtep`. An existing
    /// entry for `mac` is replaced (one MAC lives behind one VTEP). NUD_REACHABLE, so the
    /// kernel ages the entry out once unused, as the seed's entries were.
    pub async fn add_l2(&self, index: u32, mac: MacAddr, vtep: impl Into<IpAddr>) -> Result<()> {
        self.set_l2(index, mac, vtep.into(), NudState::REACHABLE)
            .await
    }

    /// Like [`Handle::add_l2`] but NUD_PERMANENT: never aged out (static mode).
    pub async fn add_l2_permanent(
        &self,
        index: u32,
        mac: MacAddr,
        vtep: impl Into<IpAddr>,
    ) -> Result<()> {
        self.set_l2(index, mac, vtep.into(), NudState::PERMANENT)
            .await
    }

    async fn set_l2(&self, index: u32, mac: MacAddr, vtep: IpAddr, state: NudState) -> Result<()> {
        let vtep = require_ipv4("VTEP address", vtep)?;
        self.ack(
            format!("add FDB entry {mac} dst {vtep} ({state}) on link index {index}"),
            RouteNetlinkMessage::NewNeighbour(fdb_message(index, mac, vtep, state)),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
        .await
    }

    /// The seed's `DelL2`; true when deleted, false when there was no such entry.
    pub async fn del_l2(&self, index: u32, mac: MacAddr, vtep: impl Into<IpAddr>) -> Result<bool> {
        let vtep = require_ipv4("VTEP address", vtep.into())?;
        let deleted = self
            .ack(
                format!("delete FDB entry {mac} dst {vtep} on link index {index}"),
                RouteNetlinkMessage::DelNeighbour(fdb_message(index, mac, vtep, NudState(0))),
                0,
            )
            .await;
        absent_is_false(deleted)
    }

    /// The seed's `AddL3` (a `NeighSet`): `ip` is at `mac` on link `index`, replacing any entry,
    /// NUD_REACHABLE.
    pub async fn add_l3(&self, index: u32, ip: impl Into<IpAddr>, mac: MacAddr) -> Result<()> {
        self.set_l3(index, ip.into(), mac, NudState::REACHABLE)
            .await
    }

    /// Like [`Handle::add_l3`] but NUD_PERMANENT. A REACHABLE entry on a proxying VXLAN device
    /// turns STALE and is then probed through the device itself, which has no answer but the
    /// stale entry: static mode needs entries that never age.
    pub async fn add_l3_permanent(
        &self,
        index: u32,
        ip: impl Into<IpAddr>,
        mac: MacAddr,
    ) -> Result<()> {
        self.set_l3(index, ip.into(), mac, NudState::PERMANENT)
            .await
    }

    async fn set_l3(&self, index: u32, ip: IpAddr, mac: MacAddr, state: NudState) -> Result<()> {
        let ip = require_ipv4("neighbour address", ip)?;
        self.ack(
            format!("set neighbour {ip} lladdr {mac} ({state}) on link index {index}"),
            RouteNetlinkMessage::NewNeighbour(l3_message(index, ip, Some(mac), state)),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
        .await
    }

    /// Deletes the neighbour entry for `ip`; true when deleted, false when there was none.
    pub async fn del_l3(&self, index: u32, ip: impl Into<IpAddr>) -> Result<bool> {
        let ip = require_ipv4("neighbour address", ip.into())?;
        let deleted = self
            .ack(
                format!("delete neighbour {ip} on link index {index}"),
                RouteNetlinkMessage::DelNeighbour(l3_message(index, ip, None, NudState(0))),
                0,
            )
            .await;
        absent_is_false(deleted)
    }

    /// The FDB entries of link `index` (`bridge fdb show dev DEV`).
    pub async fn list_fdb(&self, index: u32) -> Result<Vec<FdbEntry>> {
        let entries = self
            .neighbour_dump(index, AddressFamily::Bridge, "FDB entries")
            .await?
            .iter()
            .filter_map(|message| {
                let (ip, mac) = neighbour_fields(message);
                let dst = match ip {
                    Some(IpAddr::V4(v4)) => Some(v4),
                    _ => None,
                };
                Some(FdbEntry {
                    mac: mac?,
                    dst,
                    state: message.header.state.into(),
                })
            })
            .collect();
        Ok(entries)
    }

    /// The IPv4 neighbour entries of link `index` (`ip -4 neigh show dev DEV`).
    pub async fn list_neigh(&self, index: u32) -> Result<Vec<NeighEntry>> {
        let entries = self
            .neighbour_dump(index, AddressFamily::Inet, "neighbour entries")
            .await?
            .iter()
            .filter_map(|message| {
                let (ip, mac) = neighbour_fields(message);
                let IpAddr::V4(ip) = ip? else {
                    return None;
                };
                Some(NeighEntry {
                    ip,
                    mac,
                    state: message.header.state.into(),
                })
            })
            .collect();
        Ok(entries)
    }

    async fn neighbour_dump(
        &self,
        index: u32,
        family: AddressFamily,
        what: &str,
    ) -> Result<Vec<NeighbourMessage>> {
        let mut request = NeighbourMessage::default();
        request.header.family = family;
        let replies = self
            .dump(
                format!("list {what} of link index {index}"),
                RouteNetlinkMessage::GetNeighbour(request),
            )
            .await?;
        // The kernel dumps every link's entries unless strict checking is on; keep ours.
        Ok(replies
            .into_iter()
            .filter_map(|reply| match reply {
                RouteNetlinkMessage::NewNeighbour(message) if message.header.ifindex == index => {
                    Some(message)
                }
                _ => None,
            })
            .collect())
    }
}

fn absent_is_false(result: Result<()>) -> Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(err) if err.is_errno(Errno::ENOENT) => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nud_state_keeps_bits_and_prints_like_ip() {
        assert_eq!(NudState::REACHABLE.to_string(), "REACHABLE");
        assert_eq!(NudState(0x0c).to_string(), "STALE|DELAY");
        assert_eq!(NudState(0).to_string(), "NONE");
        // The crate's enum cannot hold a combined state: it must survive as bits.
        let combined: NeighbourState = NudState(0x0c).into();
        assert_eq!(NudState::from(combined), NudState(0x0c));
        assert!(NudState(0x0c).is_resolving());
        for resolving in [
            NudState::INCOMPLETE,
            NudState::STALE,
            NudState::DELAY,
            NudState::PROBE,
        ] {
            assert!(resolving.is_resolving(), "{resolving}");
        }
        for settled in [
            NudState::REACHABLE,
            NudState::FAILED,
            NudState::NOARP,
            NudState::PERMANENT,
        ] {
            assert!(!settled.is_resolving(), "{settled}");
        }
    }

    #[test]
    fn fields_of_an_fdb_message_read_raw_destination_bytes() {
        let mac: MacAddr = "02:00:00:00:00:02".parse().unwrap();
        let mut message = fdb_message(4, mac, Ipv4Addr::new(192, 0, 2, 2), NudState::REACHABLE);
        message.attributes[1] =
            NeighbourAttribute::Destination(NeighbourAddress::Other(vec![192, 0, 2, 2]));
        let (ip, got_mac) = neighbour_fields(&message);
        assert_eq!(ip, Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))));
        assert_eq!(got_mac, Some(mac));
    }

    #[test]
    fn zero_lladdr_counts_as_none() {
        let mut message = l3_message(4, Ipv4Addr::new(10, 128, 2, 1), None, NudState::STALE);
        message
            .attributes
            .push(NeighbourAttribute::LinkLayerAddress(vec![0; 6]));
        assert_eq!(
            neighbour_fields(&message),
            (Some(IpAddr::V4(Ipv4Addr::new(10, 128, 2, 1))), None)
        );
    }
}
