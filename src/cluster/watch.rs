//! Following the other nodes' leases: a listing reconciled against what the node routes, then a
//! watch from the listing's revision. After any failure (etcd restarted, watch compacted, the
//! switch refusing a change) it lists and reconciles again, so no lease is missed and none is
//! applied twice.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::sync::Arc;

use etcd_client::{Client, EventType, WatchOptions};
use futures::future::join_all;
use tracing::{debug, info, warn};

use super::config::ClusterSettings;
use super::error::ClusterError;
use super::lease::RETRY;
use super::registry::{list, parse_entry, parse_key, subnets_prefix, timed, Entry};
use super::view::View;
use crate::sdn::{HostSubnet, Node};
use crate::value::Cidr;

/// Host subnets by subnet: what the node routes, or what etcd says it should.
pub type Routes = BTreeMap<Cidr, HostSubnet>;

/// What turns `have` into `want`: subnets to stop routing, then subnets to (re)route.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub remove: Vec<HostSubnet>,
    pub add: Vec<HostSubnet>,
}

/// The set difference between the two: nothing already in place is applied again.
pub fn plan(have: &Routes, want: &Routes) -> Plan {
    Plan {
        remove: have
            .iter()
            .filter(|(subnet, _)| !want.contains_key(subnet))
            .map(|(_, hs)| *hs)
            .collect(),
        add: want
            .iter()
            .filter(|(subnet, hs)| have.get(subnet) != Some(hs))
            .map(|(_, hs)| *hs)
            .collect(),
    }
}

/// Runs for the daemon's lifetime.
pub async fn follow(mut client: Client, settings: ClusterSettings, node: Node, view: Arc<View>) {
    let mut remotes = None;
    loop {
        let Err(err) = list_and_watch(&mut client, &settings, &node, &view, &mut remotes).await;
        warn!("following the cluster in etcd: {err}; listing again");
        view.set_connected(false);
        tokio::time::sleep(RETRY).await;
    }
}

async fn list_and_watch(
    client: &mut Client,
    settings: &ClusterSettings,
    node: &Node,
    view: &View,
    remotes: &mut Option<BTreeSet<Ipv4Addr>>,
) -> Result<Infallible, ClusterError> {
    let prefix = &settings.prefix;
    let (revision, entries) = list(client, prefix).await?;
    view.replace(revision, &entries);
    let mut want = wanted(view, entries.iter());
    let mut have = routed(node, settings.network, view).await?;
    apply(node, &mut have, &want, remotes).await?;
    info!(
        revision,
        remote_subnets = have.len(),
        "reconciled with etcd"
    );
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(revision + 1);
    let mut stream = timed(client.watch(subnets_prefix(prefix), Some(options))).await?;
    view.set_connected(true);
    while let Some(response) = stream.message().await? {
        if response.canceled() {
            return Err(ClusterError::WatchCancelled {
                reason: response.cancel_reason().to_string(),
                compact_revision: response.compact_revision(),
            });
        }
        let revision = response.header().map_or(0, |h| h.revision());
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let Some(subnet) = parse_key(prefix, kv.key()) else {
                continue;
            };
            let entry = match event.event_type() {
                EventType::Put => parse_entry(prefix, kv),
                EventType::Delete => None,
            };
            debug!(%subnet, holder = ?entry.as_ref().map(|e| &e.holder), "lease event");
            view.update(revision, subnet, entry);
        }
        want = wanted(view, view.entries().iter());
        apply(node, &mut have, &want, remotes).await?;
    }
    Err(ClusterError::WatchEnded)
}

/// Every lease but this node's own, as host subnets.
fn wanted<'a>(view: &View, entries: impl Iterator<Item = &'a Entry>) -> Routes {
    let own = view.own().map(|a| a.subnet);
    entries
        .filter(|e| Some(e.subnet) != own)
        .map(|e| (e.subnet, e.holder.host_subnet(e.subnet)))
        .collect()
}

/// The host subnets the node routes inside the cluster network (this node's own excluded).
async fn routed(node: &Node, network: Cidr, view: &View) -> Result<Routes, ClusterError> {
    let own = view.own().map(|a| a.subnet);
    Ok(node
        .state()
        .await?
        .host_subnets
        .into_iter()
        .filter(|(subnet, _)| network.contains(subnet.addr()) && Some(*subnet) != own)
        .collect())
}

/// Applies the difference, keeping `have` equal to what the node holds even when a change
/// fails (the error makes the caller list and reconcile again).
async fn apply(
    node: &Node,
    have: &mut Routes,
    want: &Routes,
    remotes: &mut Option<BTreeSet<Ipv4Addr>>,
) -> Result<(), ClusterError> {
    let plan = plan(have, want);
    let removed = join_all(
        plan.remove
            .iter()
            .map(|hs| async move { (hs, node.hostsubnet_del(hs.host_ip, hs.subnet).await) }),
    )
    .await;
    let added = join_all(
        plan.add
            .iter()
            .map(|hs| async move { (hs, node.hostsubnet_add(hs).await) }),
    )
    .await;
    let mut first_error = None;
    for (hs, result) in removed {
        match result {
            Ok(()) => {
                info!(subnet = %hs.subnet, host = %hs.host_ip, "stopped routing a node's subnet");
                have.remove(&hs.subnet);
            }
            Err(err) => first_error = first_error.or(Some(err)),
        }
    }
    for (hs, result) in added {
        match result {
            Ok(()) => {
                info!(subnet = %hs.subnet, host = %hs.host_ip, "routing a node's subnet");
                have.insert(hs.subnet, *hs);
            }
            Err(err) => first_error = first_error.or(Some(err)),
        }
    }
    if let Some(err) = first_error {
        return Err(err.into());
    }
    update_multicast(node, have, remotes).await
}

/// Points VXLAN multicast at every remote host (the seed's UpdateVXLANMulticastFlows), when
/// that set changed.
async fn update_multicast(
    node: &Node,
    have: &Routes,
    remotes: &mut Option<BTreeSet<Ipv4Addr>>,
) -> Result<(), ClusterError> {
    let hosts: BTreeSet<Ipv4Addr> = have.values().map(|hs| hs.host_ip).collect();
    if remotes.as_ref() == Some(&hosts) {
        return Ok(());
    }
    node.multicast_vxlan(&hosts.iter().copied().collect::<Vec<_>>())
        .await?;
    *remotes = Some(hosts);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(host: u8, subnet: &str) -> HostSubnet {
        HostSubnet {
            host_ip: Ipv4Addr::new(192, 0, 2, host),
            subnet: subnet.parse().unwrap(),
            fixed_vnid: None,
            vtep_mac: None,
        }
    }

    fn routes(items: &[HostSubnet]) -> Routes {
        items.iter().map(|hs| (hs.subnet, *hs)).collect()
    }

    #[test]
    fn plan_is_the_set_difference() {
        let a = hs(11, "10.128.0.0/23");
        let b = hs(12, "10.128.2.0/23");
        let c = hs(13, "10.128.4.0/23");
        let b_moved = hs(14, "10.128.2.0/23");
        let have = routes(&[a, b]);
        let want = routes(&[b_moved, c]);
        assert_eq!(
            plan(&have, &want),
            Plan {
                remove: vec![a],
                add: vec![b_moved, c],
            }
        );
        // Nothing to do when the node already holds what etcd says: nothing applied twice.
        assert_eq!(plan(&want, &want), Plan::default());
    }
}
