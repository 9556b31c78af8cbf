//! The VXLAN device: create it, or keep an existing one when it is compatible (the flannel
//! seed's `ensureLink` + `vxlanLinksIncompat`), and its per-device operations.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::InfoVxlan;
use netlink_packet_route::RouteNetlinkMessage;
use nix::errno::Errno;
use rtnetlink::LinkVxlan;

use super::addr_route::Route;
use super::error::{Error, Result};
use super::handle::{Handle, Link};
use super::neigh::{FdbEntry, NeighEntry};
use super::types::{validate_ifname, validate_vni, MacAddr};

/// What a VXLAN device should be. `VxlanAttrs::new` gives the flannel seed's flags: learning,
/// proxy and l2miss on, l3miss off (L3 misses reach userspace through `app_solicit` instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VxlanAttrs {
    pub vni: u32,
    pub name: String,
    /// The underlay device the tunnel sends through (`IFLA_VXLAN_LINK`).
    pub vtep_index: Option<u32>,
    /// The local underlay address (`IFLA_VXLAN_LOCAL`).
    pub vtep_addr: Option<Ipv4Addr>,
    /// The UDP destination port; the kernel's default (8472) when `None`.
    pub port: Option<u16>,
    pub learning: bool,
    pub proxy: bool,
    pub l2miss: bool,
    pub l3miss: bool,
    /// A multicast group or unicast remote (`IFLA_VXLAN_GROUP`).
    pub group: Option<Ipv4Addr>,
}

impl VxlanAttrs {
    pub fn new(name: impl Into<String>, vni: u32) -> VxlanAttrs {
        VxlanAttrs {
            vni,
            name: name.into(),
            vtep_index: None,
            vtep_addr: None,
            port: None,
            learning: true,
            proxy: true,
            l2miss: true,
            l3miss: false,
            group: None,
        }
    }

    /// Checks the name and the VNI before anything reaches the kernel.
    pub fn validate(&self) -> Result<()> {
        validate_ifname(&self.name)?;
        validate_vni(self.vni)
    }

    fn new_link_message(&self) -> RouteNetlinkMessage {
        let mut builder = LinkVxlan::new(&self.name, self.vni)
            .learning(self.learning)
            .proxy(self.proxy)
            .l2miss(self.l2miss)
            .l3miss(self.l3miss);
        if let Some(index) = self.vtep_index {
            builder = builder.dev(index);
        }
        if let Some(addr) = self.vtep_addr {
            builder = builder.local(addr);
        }
        if let Some(port) = self.port {
            builder = builder.port(port);
        }
        if let Some(group) = self.group {
            builder = builder.group(group);
        }
        RouteNetlinkMessage::NewLink(builder.build())
    }
}

/// The VXLAN settings the kernel reports for an existing device (`IFLA_INFO_DATA`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VxlanInfo {
    pub vni: Option<u32>,
    pub vtep_index: Option<u32>,
    pub local: Option<Ipv4Addr>,
    pub group: Option<Ipv4Addr>,
    pub port: Option<u16>,
    pub learning: Option<bool>,
    pub proxy: Option<bool>,
    pub l2miss: Option<bool>,
    pub l3miss: Option<bool>,
}

impl VxlanInfo {
    pub(crate) fn from_attributes(attrs: &[InfoVxlan]) -> VxlanInfo {
        let mut info = VxlanInfo::default();
        for attr in attrs {
            match attr {
                InfoVxlan::Id(vni) => info.vni = Some(*vni),
                InfoVxlan::Link(index) => info.vtep_index = Some(*index),
                InfoVxlan::Local(addr) => info.local = Some(*addr),
                InfoVxlan::Group(addr) => info.group = Some(*addr),
                InfoVxlan::Port(port) => info.port = Some(*port),
                InfoVxlan::Learning(on) => info.learning = Some(*on),
                InfoVxlan::Proxy(on) => info.proxy = Some(*on),
                InfoVxlan::L2Miss(on) => info.l2miss = Some(*on),
                InfoVxlan::L3Miss(on) => info.l3miss = Some(*on),
                _ => {}
            }
        }
        info
    }
}

/// How [`Handle::ensure_vxlan`] got its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnsureOutcome {
    Created,
    /// An existing device was compatible and left alone.
    Reused,
    /// An existing device was incompatible; it was deleted and created anew.
    Recreated {
        reason: String,
    },
}

/// Why an existing link cannot serve as the desired VXLAN device, in the seed's words
/// (`desired vs existing`), or `None` when it can. Like the seed, settings that one side leaves
/// unset (index 0, no address, port 0) are not compared, and learning, proxy and l3miss never
/// make a device incompatible.
pub fn incompatibility(desired: &VxlanAttrs, existing: &Link) -> Option<String> {
    let kind = existing.kind.as_deref().unwrap_or("unknown");
    if kind != "vxlan" {
        return Some(format!("link type: vxlan vs {kind}"));
    }
    let info = existing.vxlan.clone().unwrap_or_default();
    let existing_vni = info.vni.unwrap_or(0);
    if desired.vni != existing_vni {
        return Some(format!("vni: {} vs {existing_vni}", desired.vni));
    }
    if let (Some(want), Some(have)) = (set_index(desired.vtep_index), set_index(info.vtep_index)) {
        if want != have {
            return Some(format!("vtep (external) interface: {want} vs {have}"));
        }
    }
    if let (Some(want), Some(have)) = (set_addr(desired.vtep_addr), set_addr(info.local)) {
        if want != have {
            return Some(format!("vtep (external) IP: {want} vs {have}"));
        }
    }
    if let (Some(want), Some(have)) = (set_addr(desired.group), set_addr(info.group)) {
        if want != have {
            return Some(format!("group address: {want} vs {have}"));
        }
    }
    let existing_l2miss = info.l2miss.unwrap_or(false);
    if desired.l2miss != existing_l2miss {
        return Some(format!("l2miss: {} vs {existing_l2miss}", desired.l2miss));
    }
    if let (Some(want), Some(have)) = (set_port(desired.port), set_port(info.port)) {
        if want != have {
            return Some(format!("port: {want} vs {have}"));
        }
    }
    None
}

fn set_index(index: Option<u32>) -> Option<u32> {
    index.filter(|&index| index > 0)
}

fn set_addr(addr: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
    addr.filter(|addr| !addr.is_unspecified())
}

fn set_port(port: Option<u16>) -> Option<u16> {
    port.filter(|&port| port > 0)
}

/// A VXLAN device that exists in the kernel, with the handle that manages it.
#[derive(Clone, Debug)]
pub struct VxlanDevice {
    handle: Handle,
    link: Link,
    outcome: EnsureOutcome,
}

/// The `app_solicit` value the seed writes: how many times the kernel asks userspace (an
/// RTM_GETNEIGH on RTNLGRP_NEIGH) to resolve a neighbour before giving up. Without it, L3
/// misses never reach the miss loop.
pub const APP_SOLICIT: u32 = 3;

impl Handle {
    /// Creates the VXLAN device, or keeps an existing device of that name when it is compatible
    /// with `attrs`, or deletes and recreates it (logging why) when it is not. Then sets
    /// `app_solicit` so that neighbour misses reach userspace.
    pub async fn ensure_vxlan(&self, attrs: &VxlanAttrs) -> Result<VxlanDevice> {
        attrs.validate()?;
        let outcome = match self.create_vxlan(attrs).await {
            Ok(()) => EnsureOutcome::Created,
            Err(err) if err.is_errno(Errno::EEXIST) => self.reuse_or_recreate(attrs).await?,
            Err(err) => return Err(err),
        };
        let link = self
            .link_by_name(&attrs.name)
            .await?
            .ok_or_else(|| Error::LinkNotFound(attrs.name.clone()))?;
        if link.kind.as_deref() != Some("vxlan") {
            return Err(Error::NotVxlan {
                name: link.name,
                kind: link.kind.unwrap_or_else(|| "unknown".into()),
            });
        }
        self.set_app_solicit(&attrs.name, APP_SOLICIT)?;
        Ok(VxlanDevice {
            handle: self.clone(),
            link,
            outcome,
        })
    }

    async fn create_vxlan(&self, attrs: &VxlanAttrs) -> Result<()> {
        self.ack(
            format!("create vxlan device {:?} (vni {})", attrs.name, attrs.vni),
            attrs.new_link_message(),
            NLM_F_CREATE | NLM_F_EXCL,
        )
        .await
    }

    async fn reuse_or_recreate(&self, attrs: &VxlanAttrs) -> Result<EnsureOutcome> {
        let existing = self
            .link_by_name(&attrs.name)
            .await?
            .ok_or_else(|| Error::LinkNotFound(attrs.name.clone()))?;
        let Some(reason) = incompatibility(attrs, &existing) else {
            return Ok(EnsureOutcome::Reused);
        };
        tracing::warn!(
            device = %attrs.name,
            %reason,
            "{:?} already exists with incompatible configuration: {reason}; recreating device",
            attrs.name
        );
        self.delete_link(existing.index).await?;
        self.create_vxlan(attrs).await?;
        Ok(EnsureOutcome::Recreated { reason })
    }
}

impl VxlanDevice {
    pub fn name(&self) -> &str {
        &self.link.name
    }

    pub fn index(&self) -> u32 {
        self.link.index
    }

    /// The device's MAC address: what remote hosts put in their neighbour entries for us.
    pub fn mac(&self) -> Option<MacAddr> {
        self.link.mac
    }

    pub fn mtu(&self) -> Option<u32> {
        self.link.mtu
    }

    pub fn link(&self) -> &Link {
        &self.link
    }

    pub fn outcome(&self) -> &EnsureOutcome {
        &self.outcome
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Re-reads the device from the kernel (MAC, MTU, state).
    pub async fn refresh(&mut self) -> Result<()> {
        self.link = self
            .handle
            .link_by_index(self.link.index)
            .await?
            .ok_or_else(|| Error::LinkNotFound(self.link.name.clone()))?;
        Ok(())
    }

    /// The seed's `Configure`: makes `net` the device's only IPv4 address, sets the device up and
    /// adds the route to `net`'s network through it (already present is fine: the kernel adds
    /// one for the address, but another route may have been there first).
    pub async fn configure(&self, net: Ipv4Net) -> Result<()> {
        let index = self.link.index;
        self.handle.replace_ipv4_addrs(index, net).await?;
        self.handle.set_link_up(index).await?;
        self.handle
            .add_route(&Route::universe(net.trunc(), index))
            .await?;
        Ok(())
    }

    /// Deletes the device.
    pub async fn destroy(self) -> Result<()> {
        self.handle.delete_link(self.link.index).await
    }

    pub async fn add_l2(&self, mac: MacAddr, vtep: impl Into<IpAddr>) -> Result<()> {
        self.handle.add_l2(self.link.index, mac, vtep).await
    }

    pub async fn del_l2(&self, mac: MacAddr, vtep: impl Into<IpAddr>) -> Result<bool> {
        self.handle.del_l2(self.link.index, mac, vtep).await
    }

    pub async fn add_l3(&self, ip: impl Into<IpAddr>, mac: MacAddr) -> Result<()> {
        self.handle.add_l3(self.link.index, ip, mac).await
    }

    pub async fn list_fdb(&self) -> Result<Vec<FdbEntry>> {
        self.handle.list_fdb(self.link.index).await
    }

    pub async fn list_neigh(&self) -> Result<Vec<NeighEntry>> {
        self.handle.list_neigh(self.link.index).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vxlan_link(info: VxlanInfo) -> Link {
        Link {
            index: 7,
            name: "vx".into(),
            kind: Some("vxlan".into()),
            mac: None,
            mtu: Some(1450),
            up: false,
            vxlan: Some(info),
        }
    }

    fn desired() -> VxlanAttrs {
        VxlanAttrs {
            vtep_index: Some(3),
            vtep_addr: Some(Ipv4Addr::new(192, 0, 2, 1)),
            port: Some(4789),
            ..VxlanAttrs::new("vx", 1)
        }
    }

    fn matching() -> VxlanInfo {
        VxlanInfo {
            vni: Some(1),
            vtep_index: Some(3),
            local: Some(Ipv4Addr::new(192, 0, 2, 1)),
            group: None,
            port: Some(4789),
            learning: Some(false),
            proxy: Some(false),
            l2miss: Some(true),
            l3miss: Some(true),
        }
    }

    #[test]
    fn seed_rules_name_the_first_difference() {
        let cases: Vec<(VxlanInfo, Option<&str>)> = vec![
            (matching(), None),
            (
                VxlanInfo {
                    vni: Some(5),
                    ..matching()
                },
                Some("vni: 1 vs 5"),
            ),
            (
                VxlanInfo {
                    vtep_index: Some(9),
                    ..matching()
                },
                Some("vtep (external) interface: 3 vs 9"),
            ),
            // An unset side is not compared.
            (
                VxlanInfo {
                    vtep_index: Some(0),
                    ..matching()
                },
                None,
            ),
            (
                VxlanInfo {
                    local: Some(Ipv4Addr::new(192, 0, 2, 9)),
                    ..matching()
                },
                Some("vtep (external) IP: 192.0.2.1 vs 192.0.2.9"),
            ),
            (
                VxlanInfo {
                    local: None,
                    ..matching()
                },
                None,
            ),
            (
                VxlanInfo {
                    group: Some(Ipv4Addr::new(198, 51, 100, 1)),
                    ..matching()
                },
                None,
            ),
            (
                VxlanInfo {
                    l2miss: Some(false),
                    ..matching()
                },
                Some("l2miss: true vs false"),
            ),
            (
                VxlanInfo {
                    port: Some(8472),
                    ..matching()
                },
                Some("port: 4789 vs 8472"),
            ),
        ];
        for (info, want) in cases {
            let got = incompatibility(&desired(), &vxlan_link(info.clone()));
            assert_eq!(got.as_deref(), want, "{info:?}");
        }
    }

    #[test]
    fn group_is_compared_when_both_set() {
        let want = VxlanAttrs {
            group: Some(Ipv4Addr::new(198, 51, 100, 2)),
            ..desired()
        };
        let info = VxlanInfo {
            group: Some(Ipv4Addr::new(198, 51, 100, 1)),
            ..matching()
        };
        assert_eq!(
            incompatibility(&want, &vxlan_link(info)).as_deref(),
            Some("group address: 198.51.100.2 vs 198.51.100.1")
        );
    }

    #[test]
    fn another_kind_is_incompatible() {
        let link = Link {
            kind: Some("dummy".into()),
            vxlan: None,
            ..vxlan_link(matching())
        };
        assert_eq!(
            incompatibility(&desired(), &link).as_deref(),
            Some("link type: vxlan vs dummy")
        );
    }

    #[test]
    fn attrs_validate_name_and_vni() {
        assert!(desired().validate().is_ok());
        let long = VxlanAttrs::new("a-name-longer-than-15", 1);
        assert!(matches!(
            long.validate(),
            Err(Error::NameTooLong { len: 21, .. })
        ));
        let vni = VxlanAttrs::new("vx", 1 << 24);
        assert!(matches!(vni.validate(), Err(Error::VniOutOfRange { .. })));
    }
}
