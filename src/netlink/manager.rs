//! `VxlanManager`: the VXLAN device of a node plus the entries that reach the other nodes,
//! kept from the set of known remote hosts either up front (static mode) or on demand by
//! answering the kernel's misses (miss mode, the flannel seed's way).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use ipnet::Ipv4Net;

use super::addr_route::Route;
use super::error::Result;
use super::handle::Handle;
use super::miss::{Answer, Miss, MissLoop, MissOptions, MissStats};
use super::neigh::{FdbEntry, NeighEntry, NudState};
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
        super::types::validate_ifname(name).map_err(serde::de::Error::custom)?;
    }
    Ok(name)
}

/// A configured VNI, checked when the configuration is read.
fn vni<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    let vni = <u32 as serde::Deserialize>::deserialize(d)?;
    super::types::validate_vni(vni).map_err(serde::de::Error::custom)?;
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
    /// Their subnets (a host may have several).
    pub subnets: usize,
    /// Whether the miss loop runs (always false in static mode).
    pub miss_loop_running: bool,
    /// Miss counters; all zero in static mode.
    pub misses: MissStats,
    /// Reconciles of the device's entries that failed (each is retried in the background).
    pub reconcile_failures: u64,
    /// The error of the last reconcile while it is failing; cleared by the next success.
    pub last_error: Option<String>,
}

/// The remote host subnets wanted now, by subnet; read by the miss resolver.
type Desired = Arc<RwLock<BTreeMap<Ipv4Net, KnownHost>>>;

/// How long a failed reconcile waits before its first retry; it doubles up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The node's VXLAN device and its entries for the remote hosts.
///
/// The owner hands it the complete set of remote host subnets ([`VxlanManager::set_hosts`]);
/// every reconcile reads the device's FDB, neighbour and gateway-route tables and makes them
/// equal to that set: it adds what is missing and removes what it owns but is not wanted.
/// It owns, on its own device, every unicast FDB entry with a remote destination, every
/// neighbour entry with a link-layer address and every route with a gateway; the all-zero
/// (flood) FDB entries and the device's own connected/cluster routes are never touched.
/// A reconcile that fails is logged, counted, shown in [`VxlanStatus::last_error`] and retried
/// in the background with backoff until it succeeds; a background repair also runs every
/// `repair_interval` (entries someone flushed come back).
pub struct VxlanManager {
    shared: Arc<Shared>,
    keeper: AbortOnDrop,
}

struct Shared {
    device: VxlanDevice,
    mode: VxlanMode,
    /// This node's overlay address with the cluster prefix (re-applied by background repairs).
    address: Ipv4Net,
    own_vtep: Option<Ipv4Addr>,
    desired: Desired,
    /// The set the last successful reconcile applied; the async lock makes reconciles take
    /// turns.
    applied: tokio::sync::Mutex<BTreeMap<Ipv4Net, KnownHost>>,
    health: Mutex<Health>,
    /// Wakes the keeper for a retry after a reconcile failed.
    retry: Arc<Notify>,
    miss_loop: Option<MissLoop>,
}

#[derive(Default)]
struct Health {
    failures: u64,
    last_error: Option<String>,
}

/// Aborts the keeper task when the manager goes.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl VxlanManager {
    /// Ensures and configures the device, and in miss mode starts the miss loop. No remote host
    /// is known yet: give them with [`VxlanManager::set_hosts`].
    pub async fn start(handle: &Handle, options: VxlanManagerOptions) -> Result<VxlanManager> {
        let device = handle.ensure_vxlan(&options.attrs).await?;
        device.configure(options.address).await?;
        let desired: Desired = Arc::default();
        let miss_loop = match options.mode {
            VxlanMode::Static => None,
            VxlanMode::Miss => Some(MissLoop::spawn(
                handle,
                device.index(),
                resolver(desired.clone()),
                options.miss,
            )?),
        };
        let shared = Arc::new(Shared {
            device,
            mode: options.mode,
            address: options.address,
            own_vtep: options.attrs.vtep_addr,
            desired,
            applied: tokio::sync::Mutex::default(),
            health: Mutex::default(),
            retry: Arc::new(Notify::new()),
            miss_loop,
        });
        let keeper = tokio::spawn(keep(
            Arc::downgrade(&shared),
            shared.retry.clone(),
            options.repair_interval,
        ));
        Ok(VxlanManager {
            shared,
            keeper: AbortOnDrop(keeper),
        })
    }

    pub fn device(&self) -> &VxlanDevice {
        &self.shared.device
    }

    pub fn mode(&self) -> VxlanMode {
        self.shared.mode
    }

    /// How the device was obtained (created, reused, recreated and why).
    pub fn outcome(&self) -> &EnsureOutcome {
        self.shared.device.outcome()
    }

    /// Makes `hosts` (one entry per host subnet) the complete set of remote host subnets and
    /// reconciles the device with it. Entries of this node itself (its VTEP address, its
    /// device's MAC, or a subnet holding its overlay address) are skipped. On an error the set
    /// is kept and the reconcile retried in the background.
    pub async fn set_hosts(&self, hosts: impl IntoIterator<Item = KnownHost>) -> Result<()> {
        let wanted: BTreeMap<Ipv4Net, KnownHost> = hosts
            .into_iter()
            .filter(|host| !self.shared.is_self(host))
            .map(|host| (host.subnet, host))
            .collect();
        *write(&self.shared.desired) = wanted;
        self.reconcile_or_retry().await
    }

    /// Adds a remote host subnet, or moves it to another host.
    pub async fn upsert_host(&self, host: KnownHost) -> Result<()> {
        if !self.shared.is_self(&host) {
            write(&self.shared.desired).insert(host.subnet, host);
        }
        self.reconcile_or_retry().await
    }

    /// Forgets a remote host (all its subnets) and removes its entries.
    pub async fn remove_host(&self, host_ip: Ipv4Addr) -> Result<()> {
        write(&self.shared.desired).retain(|_, host| host.host_ip != host_ip);
        self.reconcile_or_retry().await
    }

    /// The remote host subnets wanted now.
    pub fn hosts(&self) -> Vec<KnownHost> {
        read(&self.shared.desired).values().copied().collect()
    }

    /// Reconciles the device with the wanted set now (the background repair does the same
    /// every `repair_interval`), and in miss mode resynchronises the miss loop.
    pub async fn reprogram(&self) -> Result<()> {
        self.reconcile_or_retry().await?;
        if let Some(miss_loop) = &self.shared.miss_loop {
            miss_loop.request_resync();
        }
        Ok(())
    }

    pub fn status(&self) -> VxlanStatus {
        let shared = &self.shared;
        let link = shared.device.link();
        let desired = read(&shared.desired);
        let health = lock(&shared.health);
        VxlanStatus {
            device: link.name.clone(),
            index: link.index,
            mac: link.mac,
            mtu: link.mtu,
            mode: shared.mode,
            hosts: desired
                .values()
                .map(|host| host.host_ip)
                .collect::<BTreeSet<_>>()
                .len(),
            subnets: desired.len(),
            miss_loop_running: shared.miss_loop.as_ref().is_some_and(MissLoop::is_running),
            misses: shared
                .miss_loop
                .as_ref()
                .map(MissLoop::stats)
                .unwrap_or_default(),
            reconcile_failures: health.failures,
            last_error: health.last_error.clone(),
        }
    }

    /// Stops the miss loop and the background repair, and deletes the device.
    pub async fn destroy(self) -> Result<()> {
        let VxlanManager { shared, keeper } = self;
        drop(keeper);
        // The keeper only upgrades its weak reference for the length of a reconcile.
        let mut shared = shared;
        loop {
            match Arc::try_unwrap(shared) {
                Ok(owned) => {
                    drop(owned.miss_loop);
                    return owned.device.destroy().await;
                }
                Err(still_shared) => {
                    shared = still_shared;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    async fn reconcile_or_retry(&self) -> Result<()> {
        let result = self.shared.reconcile(false).await;
        if result.is_err() {
            self.shared.retry.notify_one();
        }
        result
    }
}

impl Shared {
    /// Whether `host` is this node itself: a node may be listed among its own host subnets.
    fn is_self(&self, host: &KnownHost) -> bool {
        Some(host.host_ip) == self.own_vtep
            || Some(host.vtep_mac) == self.device.mac()
            || host.subnet.contains(&self.address.addr())
    }

    /// One reconcile, recorded in the health counters; `repair` also re-applies the device's
    /// address, route and link state first (they go when someone sets the link down).
    async fn reconcile(&self, repair: bool) -> Result<()> {
        let result = self.reconcile_unrecorded(repair).await;
        let mut health = lock(&self.health);
        match &result {
            Ok(()) => {
                if health.last_error.take().is_some() {
                    tracing::info!(device = %self.device.name(), "VXLAN entries reconciled after earlier failures");
                }
            }
            Err(e) => {
                health.failures += 1;
                health.last_error = Some(e.to_string());
                tracing::warn!(device = %self.device.name(), error = %e, "reconciling the VXLAN entries failed; retrying in the background");
            }
        }
        result
    }

    async fn reconcile_unrecorded(&self, repair: bool) -> Result<()> {
        let mut applied = self.applied.lock().await;
        let wanted = read(&self.desired).clone();
        if repair {
            self.device.configure(self.address).await?;
        }
        let handle = self.device.handle();
        let index = self.device.index();
        let kernel = KernelTables {
            fdb: handle.list_fdb(index).await?,
            neigh: handle.list_neigh(index).await?,
            routes: handle.gateway_routes(index).await?,
        };
        let steps = Steps::plan(self.mode, index, &wanted, &kernel);
        steps.apply(handle, index).await?;
        if *applied != wanted {
            if let Some(miss_loop) = &self.miss_loop {
                // Addresses that missed before their host was known are still unresolved in
                // the neighbour table: answer them now rather than at the kernel's next probe.
                miss_loop.request_resync();
            }
            *applied = wanted;
        }
        Ok(())
    }
}

/// Retries failed reconciles with backoff, and repairs every `interval` otherwise.
async fn keep(shared: Weak<Shared>, retry: Arc<Notify>, interval: Duration) {
    let mut backoff = RETRY_MIN;
    let mut failing = false;
    loop {
        let wait = if failing { backoff } else { interval };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = retry.notified() => {
                // A reconcile on the caller's path failed: retry soon.
                failing = true;
                backoff = RETRY_MIN;
                continue;
            }
        }
        let Some(strong) = shared.upgrade() else {
            return;
        };
        if strong.reconcile(true).await.is_ok() {
            failing = false;
            backoff = RETRY_MIN;
        } else {
            failing = true;
            backoff = (backoff * 2).min(RETRY_MAX);
        }
    }
}

/// The device's tables as the kernel holds them.
struct KernelTables {
    fdb: Vec<FdbEntry>,
    neigh: Vec<NeighEntry>,
    routes: Vec<Route>,
}

/// What a reconcile changes: removals first, so a moved entry is never doubled.
#[derive(Debug, Default, PartialEq, Eq)]
struct Steps {
    del_neigh: Vec<Ipv4Addr>,
    del_routes: Vec<Route>,
    del_fdb: Vec<(MacAddr, Ipv4Addr)>,
    add_fdb: Vec<(MacAddr, Ipv4Addr)>,
    add_neigh: Vec<(Ipv4Addr, MacAddr)>,
    add_routes: Vec<Route>,
}

impl Steps {
    /// Compares the wanted host subnets with the kernel's tables. Both modes remove entries
    /// that contradict the wanted set (a resolved, non-NOARP neighbour inside no wanted subnet or at another MAC
    /// than its subnet's host, an FDB entry to no wanted host, a gateway route to no wanted
    /// subnet); static mode also adds each host's FDB entry, its subnets' gateway neighbours
    /// (NUD_PERMANENT) and routes.
    fn plan(
        mode: VxlanMode,
        index: u32,
        wanted: &BTreeMap<Ipv4Net, KnownHost>,
        kernel: &KernelTables,
    ) -> Steps {
        let fdb_wanted: BTreeSet<(MacAddr, Ipv4Addr)> = wanted
            .values()
            .map(|host| (host.vtep_mac, host.host_ip))
            .collect();
        let owner_of = |ip: Ipv4Addr| wanted.values().find(|host| host.subnet.contains(&ip));
        let mut steps = Steps::default();
        for entry in &kernel.neigh {
            let Some(mac) = entry.mac else { continue };
            // The kernel's own multicast/broadcast mappings, not entries anyone answered.
            if entry.state.intersects(NudState::NOARP) {
                continue;
            }
            if owner_of(entry.ip).is_none_or(|host| host.vtep_mac != mac) {
                steps.del_neigh.push(entry.ip);
            }
        }
        for entry in &kernel.fdb {
            let Some(dst) = entry.dst else { continue };
            if !fdb_wanted.contains(&(entry.mac, dst)) {
                steps.del_fdb.push((entry.mac, dst));
            }
        }
        let routes_wanted: Vec<Route> = match mode {
            VxlanMode::Static => wanted.values().map(|h| host_route(h, index)).collect(),
            VxlanMode::Miss => Vec::new(),
        };
        let same = |a: &Route, b: &Route| a.dst == b.dst && a.gateway == b.gateway;
        for route in &kernel.routes {
            if !routes_wanted.iter().any(|w| same(w, route)) {
                steps.del_routes.push(*route);
            }
        }
        if mode == VxlanMode::Miss {
            return steps;
        }
        let permanent = |state: NudState| state.intersects(NudState::PERMANENT);
        for &(mac, dst) in &fdb_wanted {
            let present = kernel
                .fdb
                .iter()
                .any(|e| e.mac == mac && e.dst == Some(dst) && permanent(e.state));
            if !present {
                steps.add_fdb.push((mac, dst));
            }
        }
        for host in wanted.values() {
            let gateway = host.gateway();
            let present = kernel
                .neigh
                .iter()
                .any(|e| e.ip == gateway && e.mac == Some(host.vtep_mac) && permanent(e.state));
            if !present {
                steps.add_neigh.push((gateway, host.vtep_mac));
            }
        }
        for route in routes_wanted {
            if !kernel.routes.iter().any(|r| same(r, &route)) {
                steps.add_routes.push(route);
            }
        }
        steps
    }

    /// Removals first; entries already gone are fine.
    async fn apply(&self, handle: &Handle, index: u32) -> Result<()> {
        for ip in &self.del_neigh {
            handle.del_l3(index, *ip).await?;
        }
        for route in &self.del_routes {
            handle.delete_route(route).await?;
        }
        for (mac, dst) in &self.del_fdb {
            handle.del_l2(index, *mac, *dst).await?;
        }
        for (mac, dst) in &self.add_fdb {
            handle.add_l2_permanent(index, *mac, *dst).await?;
        }
        for (ip, mac) in &self.add_neigh {
            handle.add_l3_permanent(index, *ip, *mac).await?;
        }
        for route in &self.add_routes {
            handle.add_route(route).await?;
        }
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

/// Answers misses from the wanted host subnets: an IP inside a subnet is at its host's VTEP
/// MAC; a VTEP MAC is at its host's IP.
fn resolver(hosts: Desired) -> impl Fn(&Miss) -> Option<Answer> + Send + Sync + 'static {
    move |miss| answer_from(&read(&hosts), miss)
}

fn answer_from(hosts: &BTreeMap<Ipv4Net, KnownHost>, miss: &Miss) -> Option<Answer> {
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
fn read(hosts: &Desired) -> std::sync::RwLockReadGuard<'_, BTreeMap<Ipv4Net, KnownHost>> {
    hosts.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(hosts: &Desired) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Ipv4Net, KnownHost>> {
    hosts.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
        assert!(matches!(err, Error::Invalid(_)), "{err}");
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
        let hosts = by_subnet(&[host(2, "10.128.2.0/23"), host(3, "10.128.4.0/23")]);
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

    fn by_subnet(hosts: &[KnownHost]) -> BTreeMap<Ipv4Net, KnownHost> {
        hosts.iter().map(|host| (host.subnet, *host)).collect()
    }

    fn neigh(ip: &str, mac: MacAddr, state: NudState) -> NeighEntry {
        NeighEntry {
            ip: ip.parse().unwrap(),
            mac: Some(mac),
            state,
        }
    }

    #[test]
    fn a_host_with_two_subnets_keeps_the_one_not_deleted() {
        let (first, second) = (host(2, "10.128.2.0/23"), host(2, "10.128.4.0/23"));
        let mac = first.vtep_mac;
        let kernel = KernelTables {
            fdb: vec![FdbEntry {
                mac,
                dst: Some(first.host_ip),
                state: NudState::PERMANENT,
            }],
            neigh: vec![
                neigh("10.128.2.1", mac, NudState::PERMANENT),
                neigh("10.128.4.1", mac, NudState::PERMANENT),
            ],
            routes: vec![host_route(&first, 7), host_route(&second, 7)],
        };
        // Both wanted: nothing to do.
        let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[first, second]), &kernel);
        assert_eq!(steps, Steps::default());
        // The second subnet deleted: its neighbour and route go, the host's FDB entry stays.
        let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[first]), &kernel);
        assert_eq!(
            steps,
            Steps {
                del_neigh: vec![Ipv4Addr::new(10, 128, 4, 1)],
                del_routes: vec![host_route(&second, 7)],
                ..Steps::default()
            }
        );
    }

    #[test]
    fn a_moved_subnet_points_to_its_new_host_only() {
        let (x, y) = (host(2, "10.128.2.0/23"), host(3, "10.128.2.0/23"));
        let kernel = KernelTables {
            fdb: vec![FdbEntry {
                mac: x.vtep_mac,
                dst: Some(x.host_ip),
                state: NudState::PERMANENT,
            }],
            neigh: vec![
                neigh("10.128.2.1", x.vtep_mac, NudState::PERMANENT),
                // A miss answer of X's, aged: it must go too.
                neigh("10.128.2.9", x.vtep_mac, NudState::STALE),
            ],
            routes: vec![host_route(&x, 7)],
        };
        let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[y]), &kernel);
        assert_eq!(
            steps,
            Steps {
                del_neigh: vec![Ipv4Addr::new(10, 128, 2, 1), Ipv4Addr::new(10, 128, 2, 9)],
                del_fdb: vec![(x.vtep_mac, x.host_ip)],
                add_fdb: vec![(y.vtep_mac, y.host_ip)],
                add_neigh: vec![(Ipv4Addr::new(10, 128, 2, 1), y.vtep_mac)],
                // The same route (the gateway is the subnet's): kept, not re-added.
                ..Steps::default()
            }
        );
        // Miss mode adds nothing up front and removes a static leftover route.
        let steps = Steps::plan(VxlanMode::Miss, 7, &by_subnet(&[y]), &kernel);
        assert_eq!(steps.del_routes, vec![host_route(&x, 7)]);
        assert!(
            steps.add_fdb.is_empty() && steps.add_neigh.is_empty() && steps.add_routes.is_empty()
        );
    }

    #[test]
    fn flushed_entries_are_added_again_and_foreign_ones_left_alone() {
        let x = host(2, "10.128.2.0/23");
        let kernel = KernelTables {
            // An unresolved entry (no MAC) or a NOARP one belongs to the kernel; a non-permanent FDB entry to
            // the wanted host is made permanent.
            fdb: vec![FdbEntry {
                mac: x.vtep_mac,
                dst: Some(x.host_ip),
                state: NudState::REACHABLE,
            }],
            neigh: vec![
                NeighEntry {
                    ip: Ipv4Addr::new(10, 129, 0, 7),
                    mac: None,
                    state: NudState::INCOMPLETE,
                },
                // The kernel's mapping of a multicast group is not ours either.
                neigh(
                    "224.0.0.251",
                    MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]),
                    NudState::NOARP,
                ),
            ],
            routes: Vec::new(),
        };
        let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[x]), &kernel);
        assert_eq!(
            steps,
            Steps {
                add_fdb: vec![(x.vtep_mac, x.host_ip)],
                add_neigh: vec![(x.gateway(), x.vtep_mac)],
                add_routes: vec![host_route(&x, 7)],
                ..Steps::default()
            }
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
        // Names and the VNI are checked when the settings are read, before anything starts.
        for (bad, named) in [
            (
                r#""name": "a-name-longer-than-15""#,
                "a-name-longer-than-15",
            ),
            (r#""vtep_device": "eth/0""#, "eth/0"),
            (r#""vni": 16777216"#, "16777216"),
        ] {
            let text = format!(r#"{{"address": "10.128.0.1/14", {bad}}}"#);
            let err = serde_json::from_str::<VxlanSettings>(&text).unwrap_err();
            assert!(err.to_string().contains(named), "{bad}: {err}");
        }
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
