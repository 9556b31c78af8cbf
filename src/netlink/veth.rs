//! veth pairs whose peer is created directly inside another network namespace (a pod's), and
//! the one ethtool setting a pod on a userspace-datapath bridge needs.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth};
use netlink_packet_route::RouteNetlinkMessage;
use rtnetlink::{LinkMessageBuilder, LinkUnspec};

use super::error::{Error, Result};
use super::handle::Handle;
use super::netns;
use super::types::{validate_ifname, MacAddr};

/// A veth pair to create: `host` in the handle's namespace, `peer` inside `peer_netns`.
#[derive(Debug, Clone)]
pub struct VethPair<'a> {
    pub host: &'a str,
    pub peer: &'a str,
    /// The namespace file of the peer (e.g. `/run/netns/NAME` or `/proc/PID/ns/net`).
    pub peer_netns: &'a Path,
    pub mtu: u32,
    /// The peer's MAC; the kernel picks a random one when None.
    pub peer_mac: Option<MacAddr>,
}

impl Handle {
    /// Creates the pair in one request (`ip link add HOST mtu M type veth peer name PEER
    /// address MAC mtu M netns NS`), the host end up. Fails with EEXIST when `host` exists,
    /// and leaves nothing behind when it fails.
    pub async fn create_veth(&self, pair: &VethPair<'_>) -> Result<()> {
        validate_ifname(pair.host)?;
        validate_ifname(pair.peer)?;
        let netns = File::open(pair.peer_netns).map_err(|source| Error::Netns {
            path: pair.peer_netns.to_path_buf(),
            source,
        })?;
        let mut peer = LinkMessageBuilder::<LinkUnspec>::default()
            .name(pair.peer)
            .mtu(pair.mtu)
            .setns_by_fd(netns.as_raw_fd());
        if let Some(mac) = pair.peer_mac {
            peer = peer.address(mac.octets().to_vec());
        }
        let message = LinkMessageBuilder::<LinkUnspec>::new_with_info_kind(InfoKind::Veth)
            .name(pair.host)
            .mtu(pair.mtu)
            .up()
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .build();
        // `netns` stays open until the kernel has answered: the request refers to its fd.
        let result = self
            .ack(
                format!(
                    "create veth {} with peer {} in {}",
                    pair.host,
                    pair.peer,
                    pair.peer_netns.display()
                ),
                RouteNetlinkMessage::NewLink(message),
                NLM_F_CREATE | NLM_F_EXCL,
            )
            .await;
        drop(netns);
        result
    }
}

/// `ETHTOOL_STXCSUM` from `<linux/ethtool.h>`: set transmit checksum offload.
const ETHTOOL_STXCSUM: u32 = 0x0000_0017;
/// `SIOCETHTOOL` from `<linux/sockios.h>`.
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Turns transmit checksum offload off on `ifname` in `netns` (`ethtool -K IFNAME tx off`):
/// a veth hands OVS's userspace datapath packets whose TCP checksum is left to "hardware" that
/// never computes it.
pub fn disable_tx_checksum(netns: Option<&Path>, ifname: &str) -> Result<()> {
    validate_ifname(ifname)?;
    netns::run_in(netns, || {
        let ioctl_error = |source: io::Error| Error::Ethtool {
            ifname: ifname.to_string(),
            source,
        };
        // SAFETY: socket(2) has no memory-safety preconditions; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(ioctl_error(io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a descriptor this function just opened and nothing else owns.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut value = EthtoolValue {
            cmd: ETHTOOL_STXCSUM,
            data: 0,
        };
        // SAFETY: an all-zero ifreq is valid; the name fits (validate_ifname: at most 15 bytes,
        // so the terminating NUL of the 16-byte field stays zero).
        let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
        for (slot, byte) in request.ifr_name.iter_mut().zip(ifname.bytes()) {
            *slot = byte as libc::c_char;
        }
        request.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
        // SAFETY: SIOCETHTOOL reads the ifreq and the ethtool_value it points to, both alive
        // and correctly laid out for the duration of the call.
        let rc = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL as _, &mut request) };
        if rc < 0 {
            return Err(ioctl_error(io::Error::last_os_error()));
        }
        Ok(())
    })
}
