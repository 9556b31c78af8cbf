//! What a reconcile changes: the wanted host subnets compared with the device's FDB,
//! neighbour and gateway-route tables, and the changes carried out, removals first.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::{KnownHost, VxlanMode};
use crate::netlink::addr_route::Route;
use crate::netlink::error::Result;
use crate::netlink::handle::Handle;
use crate::netlink::neigh::{FdbEntry, NeighEntry, NudState};
use crate::netlink::types::MacAddr;

/// The device's tables as the kernel holds them.
pub(super) struct KernelTables {
    pub(super) fdb: Vec<FdbEntry>,
    pub(super) neigh: Vec<NeighEntry>,
    pub(super) routes: Vec<Route>,
}

/// What a reconcile changes: removals first, so a moved entry is never doubled.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Steps {
    pub(super) del_neigh: Vec<Ipv4Addr>,
    pub(super) del_routes: Vec<Route>,
    pub(super) del_fdb: Vec<(MacAddr, Ipv4Addr)>,
    pub(super) add_fdb: Vec<(MacAddr, Ipv4Addr)>,
    pub(super) add_neigh: Vec<(Ipv4Addr, MacAddr)>,
    pub(super) add_routes: Vec<Route>,
}

impl Steps {
    /// Compares the wanted host subnets with the kernel's tables. Both modes remove entries
    /// that contradict the wanted set (a resolved, non-NOARP neighbour inside no wanted subnet or at another MAC
    /// than its subnet's host, an FDB entry to no wanted host, a gateway route to no wanted
    /// subnet); static mode also adds each host's FDB entry, its subnets' gateway neighbours
    /// (NUD_PERMANENT) and routes.
    pub(super) fn plan(
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
    pub(super) async fn apply(&self, handle: &Handle, index: u32) -> Result<()> {
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

pub(super) fn host_route(host: &KnownHost, index: u32) -> Route {
    Route::via(host.subnet, host.gateway(), index).onlink()
}
