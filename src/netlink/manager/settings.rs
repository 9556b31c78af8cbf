//! The VXLAN section of the daemon's configuration, and the options a [`VxlanManager`]
//! starts from.

use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::Ipv4Net;

use super::VxlanMode;
use crate::netlink::error::Result;
use crate::netlink::handle::Handle;
use crate::netlink::miss::MissOptions;
use crate::netlink::vxlan::VxlanAttrs;

/// What a [`VxlanManager`] starts from.
#[derive(Clone, Debug)]
pub struct VxlanManagerOptions {
    pub attrs: VxlanAttrs,
    /// This node's overlay address with the cluster network's prefix length, e.g.
    /// 10.128.0.1/14: the device's only address and the route to the whole cluster network.
    pub address: Ipv4Net,
    pub mode: VxlanMode,
    pub miss: MissOptions,
    /// How often the background repair reconciles the device even when nothing changed.
    pub repair_interval: Duration,
}

/// The background repair's default interval.
pub const REPAIR_INTERVAL: Duration = Duration::from_secs(30);

/// The optional VXLAN section of the daemon's configuration (serde: any format), e.g. in JSON
/// `{"address": "10.128.0.1/14", "vtep_device": "eth0", "vtep_addr": "192.0.2.1",
///   "port": 4789, "mode": "miss"}`. Turned into [`VxlanManagerOptions`] by
/// [`VxlanSettings::to_options`], which looks the underlay device up.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VxlanSettings {
    /// The device name; `ofnode.<vni>` when absent.
    #[serde(default, deserialize_with = "interface_name")]
    pub name: Option<String>,
    #[serde(default = "default_vni", deserialize_with = "vni")]
    pub vni: u32,
    /// This node's overlay address with the cluster prefix length (see
    /// [`VxlanManagerOptions::address`]).
    pub address: Ipv4Net,
    /// The underlay device the tunnel sends through.
    #[serde(default, deserialize_with = "interface_name")]
    pub vtep_device: Option<String>,
    /// This node's underlay address (the VTEP).
    #[serde(default)]
    pub vtep_addr: Option<Ipv4Addr>,
    /// The UDP port; the kernel's default (8472) when absent.
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub mode: VxlanMode,
    #[serde(default = "yes")]
    pub learning: bool,
    #[serde(default = "yes")]
    pub proxy: bool,
    #[serde(default = "yes")]
    pub l2miss: bool,
    #[serde(default)]
    pub l3miss: bool,
    /// Miss mode: the queue between socket and handler (see [`MissOptions`]).
    #[serde(default)]
    pub miss_queue: Option<usize>,
    /// Miss mode: SO_RCVBUF of the miss socket.
    #[serde(default)]
    pub miss_rcvbuf: Option<usize>,
    /// Seconds between background repairs of the device's entries (default 30).
    #[serde(default)]
    pub repair_secs: Option<u64>,
}

fn default_vni() -> u32 {
    1
}

/// A configured interface name, checked when the configuration is read (so that a bad one is
/// refused before the daemon starts anything).
fn interface_name<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    let name = <Option<String> as serde::Deserialize>::deserialize(d)?;
    if let Some(name) = &name {
        crate::netlink::types::validate_ifname(name).map_err(serde::de::Error::custom)?;
    }
    Ok(name)
}

/// A configured VNI, checked when the configuration is read.
fn vni<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    let vni = <u32 as serde::Deserialize>::deserialize(d)?;
    crate::netlink::types::validate_vni(vni).map_err(serde::de::Error::custom)?;
    Ok(vni)
}

fn yes() -> bool {
    true
}

impl VxlanSettings {
    /// The device name: the configured one or `ofnode.<vni>` (at most 15 bytes for any VNI).
    pub fn device_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("ofnode.{}", self.vni))
    }

    /// Validates the settings and resolves the underlay device through `handle`.
    pub async fn to_options(&self, handle: &Handle) -> Result<VxlanManagerOptions> {
        let vtep_index = match &self.vtep_device {
            Some(device) => Some(handle.link_index(device).await?),
            None => None,
        };
        let attrs = VxlanAttrs {
            vni: self.vni,
            name: self.device_name(),
            vtep_index,
            vtep_addr: self.vtep_addr,
            port: self.port,
            learning: self.learning,
            proxy: self.proxy,
            l2miss: self.l2miss,
            l3miss: self.l3miss,
            group: None,
        };
        attrs.validate()?;
        let defaults = MissOptions::default();
        Ok(VxlanManagerOptions {
            attrs,
            address: self.address,
            mode: self.mode,
            miss: MissOptions {
                queue: self.miss_queue.unwrap_or(defaults.queue),
                rcvbuf: self.miss_rcvbuf.or(defaults.rcvbuf),
            },
            repair_interval: self
                .repair_secs
                .map_or(REPAIR_INTERVAL, Duration::from_secs)
                .max(Duration::from_secs(1)),
        })
    }
}
