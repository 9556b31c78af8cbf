//! `VxlanManager`: the VXLAN device of a node plus the entries that reach the other nodes,
//! kept from the set of known remote hosts either up front (static mode) or on demand by
//! answering the kernel's misses (miss mode, the flannel seed's way).
//!
//! Here the manager and its background keeper; `settings.rs` the configuration section and
//! the options it becomes; `steps.rs` what a reconcile changes in the kernel's tables.

mod settings;
mod steps;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use ipnet::Ipv4Net;

use super::error::Result;
use super::handle::Handle;
use super::miss::{Answer, Miss, MissLoop, MissStats};
use super::types::{parse_ipv4, MacAddr};
use super::vxlan::{EnsureOutcome, VxlanDevice};
use crate::stream::Backoff;
use crate::value::{Cidr, InvalidInput};
pub use settings::{VxlanManagerOptions, VxlanSettings, REPAIR_INTERVAL};
use steps::{KernelTables, Steps};

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
    /// naming the value that is wrong (IPv6, bad MAC, not a network, host bits set).
    pub fn parse(host_ip: &str, subnet: &str, vtep_mac: &str) -> Result<KnownHost> {
        Ok(KnownHost {
            host_ip: parse_ipv4("host IP", host_ip)?,
            subnet: parse_subnet(subnet)?.into(),
            vtep_mac: vtep_mac.parse()?,
        })
    }

    /// The overlay address of this host's VXLAN device: see [`overlay_address`].
    pub fn gateway(&self) -> Ipv4Addr {
        overlay_address(self.subnet)
    }
}

/// A host subnet as the API's `hostsubnet add` takes it (a network: no host bits set).
fn parse_subnet(text: &str) -> Result<Cidr> {
    text.parse::<Cidr>().map_err(|e| {
        InvalidInput {
            what: "host subnet",
            ..e
        }
        .into()
    })
}

/// The address a node's VXLAN device holds inside the node's subnet: the first host address
/// (10.128.2.1 for 10.128.2.0/23). Static mode routes a remote subnet through that address.
pub fn overlay_address(subnet: Ipv4Net) -> Ipv4Addr {
    subnet.hosts().next().unwrap_or(subnet.network())
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

/// How long a failed reconcile waits at most before its first retry; the ceiling doubles up to
/// [`RETRY_MAX`] (with jitter, `stream/backoff.rs`).
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
    let mut backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
    let mut failing = false;
    loop {
        let wait = if failing {
            backoff.next_delay()
        } else {
            interval
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = retry.notified() => {
                // A reconcile on the caller's path failed: retry soon.
                failing = true;
                backoff.reset();
                continue;
            }
        }
        let Some(strong) = shared.upgrade() else {
            return;
        };
        failing = strong.reconcile(true).await.is_err();
        if !failing {
            backoff.reset();
        }
    }
}

impl std::fmt::Debug for VxlanManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VxlanManager")
            .field("status", &self.status())
            .finish()
    }
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
