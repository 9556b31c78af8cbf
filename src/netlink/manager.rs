//! `VxlanManager`: the VXLAN device of a node plus the entries that reach the other nodes,
//! kept from the set of known remote hosts either up front (static mode) or on demand by
//! answering the kernel's misses (miss mode, the flannel seed's way).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, PoisonError, RwLock};

use ipnet::Ipv4Net;

use super::addr_route::Route;
use super::error::Result;
use super::handle::Handle;
use super::miss::{Answer, Miss, MissLoop, MissOptions, MissStats};
use super::neigh::NeighEntry;
use super::types::{parse_ipv4, parse_ipv4_net, MacAddr};
use super::vxlan::{EnsureOutcome, VxlanAttrs, VxlanDevice};

/// How the entries for remote hosts get into the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VxlanMode {
    /// Program every known host's entries up front and on every change (NUD_PERMANENT): no
    /// first-packet loss, no userspace in the data path. The default, as flannel and Calico
    /// ended up doing.
    #[default]
    Static,
    /// Install entries when the kernel reports a miss (NUD_REACHABLE, aged out when unused).
    Miss,
}

/// A remote node: its underlay IP (the VTEP), its pod subnet and its VXLAN device's MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KnownHost {
    pub host_ip: Ipv4Addr,
    pub subnet: Ipv4Net,
    pub vtep_mac: MacAddr,
}

impl KnownHost {
    /// Parses the three values of `hostsubnet add --host-ip --subnet --vtep-mac`, with an error
    /// naming the value that is wrong (IPv6, bad MAC, not a network).
    pub fn parse(host_ip: &str, subnet: &str, vtep_mac: &str) -> Result<KnownHost> {
        Ok(KnownHost {
            host_ip: parse_ipv4("host IP", host_ip)?,
            subnet: parse_ipv4_net("host subnet", subnet)?.trunc(),
            vtep_mac: vtep_mac.parse()?,
        })
    }

    /// The overlay address of this host's VXLAN device: see [`overlay_address`].
    pub fn gateway(&self) -> Ipv4Addr {
        overlay_address(self.subnet)
    }
}

/// The address a node's VXLAN device holds inside the node's subnet: the first host address
/// (10.128.2.1 for 10.128.2.0/23). Static mode routes a remote subnet through that address.
pub fn overlay_address(subnet: Ipv4Net) -> Ipv4Addr {
    subnet.hosts().next().unwrap_or(subnet.network())
}

/// What a [`VxlanManager`] starts from.
#[derive(Clone, Debug)]
pub struct VxlanManagerOptions {
    pub attrs: VxlanAttrs,
    /// This node's overlay address with the cluster network's prefix length, e.g.
    /// 10.128.0.1/14: the device's only address and the route to the whole cluster network.
    pub address: Ipv4Net,
    pub mode: VxlanMode,
    pub miss: MissOptions,
}

/// The optional VXLAN section of the daemon's configuration (serde: any format), e.g. in JSON
/// `{"address": "10.128.0.1/14", "vtep_device": "eth0", "vtep_addr": "192.0.2.1",
///   "port": 4789, "mode": "miss"}`. Turned into [`VxlanManagerOptions`] by
/// [`VxlanSettings::to_options`], which looks the underlay device up.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VxlanSettings {
    /// The device name; `ofnode.<vni>` when absent.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "default_vni")]
    pub vni: u32,
    /// This node's overlay address with the cluster prefix length (see
    /// [`VxlanManagerOptions::address`]).
    pub address: Ipv4Net,
    /// The underlay device the tunnel sends through.
    #[serde(default)]
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
}

fn default_vni() -> u32 {
    1
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
        })
    }
}

/// What `ofnode status` shows about the VXLAN device.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VxlanStatus {
    pub device: String,
    pub index: u32,
    pub mac: Option<MacAddr>,
    pub mtu: Option<u32>,
    pub mode: VxlanMode,
    /// Remote hosts known (and, in static mode, programmed).
    pub hosts: usize,
    /// Whether the miss loop runs (always false in static mode).
    pub miss_loop_running: bool,
    /// Miss counters; all zero in static mode.
    pub misses: MissStats,
}

type Hosts = Arc<RwLock<BTreeMap<Ipv4Addr, KnownHost>>>;

/// The node's VXLAN device and its entries for the remote hosts.
pub struct VxlanManager {
    device: VxlanDevice,
    mode: VxlanMode,
    local_vtep: Option<Ipv4Addr>,
    /// The hosts wanted now; read by the miss resolver.
    desired: Hosts,
    /// The hosts whose entries are in the kernel (static mode) or may be (miss mode); the async
    /// lock also makes concurrent updates take turns.
    installed: tokio::sync::Mutex<BTreeMap<Ipv4Addr, KnownHost>>,
    miss_loop: Option<MissLoop>,
}

impl VxlanManager {
    /// Ensures and configures the device, and in miss mode starts the miss loop. No remote host
    /// is known yet: give them with [`VxlanManager::set_hosts`].
    pub async fn start(handle: &Handle, options: VxlanManagerOptions) -> Result<VxlanManager> {
        let device = handle.ensure_vxlan(&options.attrs).await?;
        device.configure(options.address).await?;
        let desired: Hosts = Arc::default();
        let miss_loop = match options.mode {
            VxlanMode::Static => None,
            VxlanMode::Miss => Some(MissLoop::spawn(
                handle,
                device.index(),
                resolver(desired.clone()),
                options.miss,
            )?),
        };
        Ok(VxlanManager {
            device,
            mode: options.mode,
            local_vtep: options.attrs.vtep_addr,
            desired,
            installed: tokio::sync::Mutex::default(),
            miss_loop,
        })
    }

    pub fn device(&self) -> &VxlanDevice {
        &self.device
    }

    pub fn mode(&self) -> VxlanMode {
        self.mode
    }

    /// How the device was obtained (created, reused, recreated and why).
    pub fn outcome(&self) -> &EnsureOutcome {
        self.device.outcome()
    }

    /// Makes `hosts` the complete set of remote hosts (this node's own entry, if present, is
    /// skipped) and brings the kernel's entries in line.
    pub async fn set_hosts(&self, hosts: impl IntoIterator<Item = KnownHost>) -> Result<()> {
        let wanted: BTreeMap<Ipv4Addr, KnownHost> = hosts
            .into_iter()
            .filter(|host| Some(host.host_ip) != self.local_vtep)
            .map(|host| (host.host_ip, host))
            .collect();
        *write(&self.desired) = wanted;
        self.sync().await
    }

    /// Adds a remote host or changes what is known about it.
    pub async fn upsert_host(&self, host: KnownHost) -> Result<()> {
        if Some(host.host_ip) != self.local_vtep {
            write(&self.desired).insert(host.host_ip, host);
        }
        self.sync().await
    }

    /// Forgets a remote host and removes its entries.
    pub async fn remove_host(&self, host_ip: Ipv4Addr) -> Result<()> {
        write(&self.desired).remove(&host_ip);
        self.sync().await
    }

    /// The hosts known now.
    pub fn hosts(&self) -> Vec<KnownHost> {
        read(&self.desired).values().copied().collect()
    }

    /// Programs every known host's entries again (static mode) or resynchronises the miss loop:
    /// for a periodic repair, or after someone flushed the tables.
    pub async fn reprogram(&self) -> Result<()> {
        let installed = self.installed.lock().await;
        match &self.miss_loop {
            Some(miss_loop) => miss_loop.request_resync(),
            None => {
                for host in installed.values() {
                    self.program(host).await?;
                }
            }
        }
        Ok(())
    }

    pub fn status(&self) -> VxlanStatus {
        let link = self.device.link();
        VxlanStatus {
            device: link.name.clone(),
            index: link.index,
            mac: link.mac,
            mtu: link.mtu,
            mode: self.mode,
            hosts: read(&self.desired).len(),
            miss_loop_running: self.miss_loop.as_ref().is_some_and(MissLoop::is_running),
            misses: self
                .miss_loop
                .as_ref()
                .map(MissLoop::stats)
                .unwrap_or_default(),
        }
    }

    /// Stops the miss loop and deletes the device.
    pub async fn destroy(mut self) -> Result<()> {
        self.miss_loop = None;
        self.device.destroy().await
    }

    async fn sync(&self) -> Result<()> {
        let mut installed = self.installed.lock().await;
        let wanted = read(&self.desired).clone();
        let stale: Vec<KnownHost> = installed
            .values()
            .filter(|host| wanted.get(&host.host_ip) != Some(*host))
            .copied()
            .collect();
        if !stale.is_empty() {
            // One dump serves every retraction: neighbour entries are found by MAC.
            let neighbours = self.device.handle().list_neigh(self.device.index()).await?;
            for host in stale {
                self.retract(&host, &neighbours).await?;
                installed.remove(&host.host_ip);
            }
        }
        let mut added = false;
        for host in wanted.values() {
            if installed.get(&host.host_ip) != Some(host) {
                self.program(host).await?;
                installed.insert(host.host_ip, *host);
                added = true;
            }
        }
        if added {
            if let Some(miss_loop) = &self.miss_loop {
                // Addresses that missed before the host was known are still unresolved in the
                // neighbour table: answer them now rather than at the kernel's next probe.
                miss_loop.request_resync();
            }
        }
        Ok(())
    }

    /// Static mode: FDB entry to the host, neighbour entry for its overlay address, and its
    /// subnet routed through that address. Miss mode installs nothing up front.
    async fn program(&self, host: &KnownHost) -> Result<()> {
        if self.mode == VxlanMode::Miss {
            return Ok(());
        }
        let handle = self.device.handle();
        let index = self.device.index();
        handle
            .add_l2_permanent(index, host.vtep_mac, host.host_ip)
            .await?;
        handle
            .add_l3_permanent(index, host.gateway(), host.vtep_mac)
            .await?;
        handle.add_route(&host_route(host, index)).await?;
        Ok(())
    }

    /// Removes what [`VxlanManager::program`] (or, in miss mode, the miss loop) installed for
    /// `host`; entries already gone are fine.
    async fn retract(&self, host: &KnownHost, neighbours: &[NeighEntry]) -> Result<()> {
        let handle = self.device.handle();
        let index = self.device.index();
        if self.mode == VxlanMode::Static {
            handle.delete_route(&host_route(host, index)).await?;
        }
        for neighbour in neighbours {
            if neighbour.mac == Some(host.vtep_mac) {
                handle.del_l3(index, neighbour.ip).await?;
            }
        }
        handle.del_l2(index, host.vtep_mac, host.host_ip).await?;
        Ok(())
    }
}

impl std::fmt::Debug for VxlanManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VxlanManager")
            .field("status", &self.status())
            .finish()
    }
}

fn host_route(host: &KnownHost, index: u32) -> Route {
    Route::via(host.subnet, host.gateway(), index).onlink()
}

/// Answers misses from the known hosts: an IP inside a host's subnet is at that host's VTEP
/// MAC; a VTEP MAC is at that host's IP.
fn resolver(hosts: Hosts) -> impl Fn(&Miss) -> Option<Answer> + Send + Sync + 'static {
    move |miss| answer_from(&read(&hosts), miss)
}

fn answer_from(hosts: &BTreeMap<Ipv4Addr, KnownHost>, miss: &Miss) -> Option<Answer> {
    match *miss {
        Miss::L3(ip) => hosts
            .values()
            .find(|host| host.subnet.contains(&ip))
            .map(|host| Answer::Neighbour {
                ip,
                mac: host.vtep_mac,
            }),
        Miss::L2(mac) => hosts
            .values()
            .find(|host| host.vtep_mac == mac)
            .map(|host| Answer::Fdb {
                mac,
                vtep: host.host_ip,
            }),
    }
}

// A panic while a lock is held leaves plain data behind, still consistent: keep going.
fn read(hosts: &Hosts) -> std::sync::RwLockReadGuard<'_, BTreeMap<Ipv4Addr, KnownHost>> {
    hosts.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(hosts: &Hosts) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Ipv4Addr, KnownHost>> {
    hosts.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::Error;

    fn host(last: u8, subnet: &str) -> KnownHost {
        KnownHost::parse(
            &format!("192.0.2.{last}"),
            subnet,
            &format!("02:00:00:00:00:{last:02x}"),
        )
        .unwrap()
    }

    #[test]
    fn known_host_parse_names_the_bad_value() {
        let err =
            KnownHost::parse("2001:db8::2", "10.128.2.0/23", "02:00:00:00:00:02").unwrap_err();
        assert!(
            matches!(
                err,
                Error::NotIpv4 {
                    what: "host IP",
                    ..
                }
            ),
            "{err}"
        );
        let err = KnownHost::parse("192.0.2.2", "10.128.2.0/23", "02:00:00:00:02").unwrap_err();
        assert!(matches!(err, Error::BadMac { .. }), "{err}");
        let err = KnownHost::parse("192.0.2.2", "fd00::/64", "02:00:00:00:00:02").unwrap_err();
        assert!(
            matches!(
                err,
                Error::NotIpv4 {
                    what: "host subnet",
                    ..
                }
            ),
            "{err}"
        );
        // A host address inside the subnet is accepted as the subnet.
        assert_eq!(host(2, "10.128.2.7/23").subnet.to_string(), "10.128.2.0/23");
    }

    #[test]
    fn gateway_is_the_first_host_address() {
        assert_eq!(
            host(2, "10.128.2.0/23").gateway(),
            Ipv4Addr::new(10, 128, 2, 1)
        );
        assert_eq!(
            overlay_address("10.128.4.5/32".parse().unwrap()),
            Ipv4Addr::new(10, 128, 4, 5)
        );
    }

    #[test]
    fn misses_are_answered_from_known_hosts() {
        let hosts: BTreeMap<Ipv4Addr, KnownHost> =
            [host(2, "10.128.2.0/23"), host(3, "10.128.4.0/23")]
                .into_iter()
                .map(|host| (host.host_ip, host))
                .collect();
        let ip = Ipv4Addr::new(10, 128, 5, 9);
        assert_eq!(
            answer_from(&hosts, &Miss::L3(ip)),
            Some(Answer::Neighbour {
                ip,
                mac: host(3, "10.128.4.0/23").vtep_mac
            })
        );
        assert_eq!(
            answer_from(&hosts, &Miss::L3(Ipv4Addr::new(10, 128, 0, 9))),
            None
        );
        let mac = host(2, "10.128.2.0/23").vtep_mac;
        assert_eq!(
            answer_from(&hosts, &Miss::L2(mac)),
            Some(Answer::Fdb {
                mac,
                vtep: Ipv4Addr::new(192, 0, 2, 2)
            })
        );
        assert_eq!(
            answer_from(&hosts, &Miss::L2(MacAddr([2, 0, 0, 0, 0, 9]))),
            None
        );
    }

    #[test]
    fn settings_parse_with_seed_defaults() {
        let settings: VxlanSettings =
            serde_json::from_str(r#"{"address": "10.128.0.1/14", "vtep_addr": "192.0.2.1"}"#)
                .unwrap();
        assert_eq!(settings.device_name(), "ofnode.1");
        assert_eq!(settings.mode, VxlanMode::Static);
        assert!(settings.learning && settings.proxy && settings.l2miss && !settings.l3miss);
        assert_eq!(settings.port, None);
        let err = serde_json::from_str::<VxlanSettings>(
            r#"{"address": "10.128.0.1/14", "vtep_addr": "2001:db8::1"}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid"), "{err}");
        let err = serde_json::from_str::<VxlanSettings>(
            r#"{"address": "10.128.0.1/14", "mdoe": "miss"}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field `mdoe`"), "{err}");
        let max = VxlanSettings {
            vni: crate::netlink::MAX_VNI,
            ..settings
        };
        assert!(max.device_name().len() <= 15);
    }

    #[test]
    fn mode_serde_is_lowercase_and_defaults_to_static() {
        assert_eq!(VxlanMode::default(), VxlanMode::Static);
        assert_eq!(serde_json::to_string(&VxlanMode::Miss).unwrap(), "\"miss\"");
        assert_eq!(
            serde_json::from_str::<VxlanMode>("\"static\"").unwrap(),
            VxlanMode::Static
        );
    }
}
