//! Cluster membership through etcd (issue 9): the node leases its pod subnet in etcd and routes
//! every other node's leased subnet, as flannel did with its subnet leases.
//!
//! - [`config`]: the `[cluster]` section; [`registry`]: keys and values in etcd;
//! - [`subnet`]: which subnet to ask for; [`lease`]: taking it and keeping it alive;
//! - [`watch`]: following the other nodes' leases; [`view`]: what `ofnode status` shows.

pub mod config;
mod error;
pub mod lease;
pub mod registry;
pub mod subnet;
pub mod view;
pub mod watch;

use std::path::Path;
use std::sync::Arc;

use etcd_client::Client;
use futures::future::join_all;
use tokio::task::JoinHandle;
use tracing::{info, warn};

pub use config::{ClusterSettings, TlsFiles};
pub use error::ClusterError;
pub use view::{ClusterStatus, NodeLease};

use lease::{acquire, keep_alive, read_remembered, remember, remembered_path, Acquired, RETRY};
use registry::{timed, Holder};
use view::View;

use crate::sdn::{Node, SetupRequest};
use crate::value::Cidr;

/// A node that is a member of the cluster. Its tasks stop when it is dropped.
pub struct Membership {
    client: Client,
    view: Arc<View>,
    tasks: Vec<JoinHandle<()>>,
}

impl Membership {
    /// Leases a subnet (the one this node had, if it still can), sets the node up with it, then
    /// keeps the lease alive and follows the other nodes' leases in the background.
    pub async fn join(
        node: &Node,
        settings: ClusterSettings,
        state_dir: &Path,
    ) -> Result<Membership, ClusterError> {
        settings.validate()?;
        let mut client = timed(Client::connect(
            &settings.endpoints,
            Some(settings.connect_options()?),
        ))
        .await?;
        let me = Holder {
            node: settings.node_name(),
            host_ip: settings.public_ip,
            vtep_mac: settings.vtep_mac.or_else(|| node.status().vxlan?.mac),
        };
        let path = remembered_path(state_dir);
        let acquired = first_lease(&mut client, &settings, &me, read_remembered(&path)).await?;
        let view = Arc::new(View::new(me.node.clone(), acquired));
        // The lease is kept alive from the moment it exists: setting the node up can take
        // longer than a TTL (the switch may still be reconnecting after a restart). Dropping the
        // membership on an error below stops the keeper. Should the lease lapse anyway, the
        // keeper leases again only after this first setup (`setting_up`), so a setup with
        // another subnet cannot be overtaken by this one.
        let setting_up = Arc::new(tokio::sync::Mutex::new(()));
        let first_setup = setting_up.clone().lock_owned().await;
        let keeper = tokio::spawn(hold(
            Keeper {
                client: client.clone(),
                settings: settings.clone(),
                me,
                node: node.clone(),
                view: view.clone(),
                path: path.clone(),
            },
            setting_up,
        ));
        let mut membership = Membership {
            client,
            view,
            tasks: vec![keeper],
        };
        remember(&path, acquired.subnet)?;
        set_up(node, &settings, acquired.subnet).await?;
        drop(first_setup);
        membership.tasks.push(tokio::spawn(watch::follow(
            membership.client.clone(),
            settings,
            node.clone(),
            membership.view.clone(),
        )));
        Ok(membership)
    }

    /// The cluster view with each lease's remaining TTL as etcd tells it now.
    pub async fn status(&self) -> ClusterStatus {
        let (mut status, ids) = self.view.snapshot();
        let ttls = join_all(ids.into_iter().map(|id| {
            let mut client = self.client.clone();
            async move {
                let ask = client.lease_time_to_live(id, None);
                match tokio::time::timeout(STATUS_TIMEOUT, ask).await {
                    Ok(Ok(reply)) => Some(reply.ttl()),
                    _ => None,
                }
            }
        }))
        .await;
        for (lease, ttl) in status.nodes.iter_mut().zip(ttls) {
            lease.ttl = ttl;
        }
        status
    }
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("view", &self.view)
            .finish()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// How long `status` waits for etcd to tell a lease's TTL (an unreachable etcd must not hang it).
const STATUS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a starting node keeps trying to reach etcd before it gives up.
const JOIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The first lease, retried while etcd is unreachable (it may be starting too); an error that
/// waiting cannot fix (an exhausted network) or a persisting one ends the start.
async fn first_lease(
    client: &mut Client,
    settings: &ClusterSettings,
    me: &Holder,
    remembered: Option<Cidr>,
) -> Result<Acquired, ClusterError> {
    let deadline = tokio::time::Instant::now() + JOIN_PATIENCE;
    loop {
        match acquire(client, settings, me, remembered).await {
            Ok(acquired) => return Ok(acquired),
            Err(err @ (ClusterError::Etcd(_) | ClusterError::Timeout(_)))
                if tokio::time::Instant::now() < deadline =>
            {
                warn!("leasing a subnet: {err}; retrying");
                tokio::time::sleep(RETRY).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Sets the node up with its leased subnet; the gateway is the subnet's first address.
async fn set_up(node: &Node, settings: &ClusterSettings, subnet: Cidr) -> Result<(), ClusterError> {
    let gateway = std::net::Ipv4Addr::from(u32::from(subnet.addr()) + 1);
    let outcome = node
        .setup(&SetupRequest {
            cluster_network: settings.network,
            service_network: settings.service_network,
            local_subnet: subnet,
            gateway,
            mode: settings.mode,
        })
        .await?;
    info!(%subnet, %gateway, ?outcome, "node set up with its leased subnet");
    Ok(())
}

/// What the lease keeper works with.
struct Keeper {
    client: Client,
    settings: ClusterSettings,
    me: Holder,
    node: Node,
    view: Arc<View>,
    path: std::path::PathBuf,
}

/// Keeps the lease alive; when it expired anyway (etcd unreachable for longer than the TTL),
/// leases again — the same subnet if it is still free — holding `setting_up` so that leasing
/// and setting the node up never interleave with another setup.
async fn hold(k: Keeper, setting_up: Arc<tokio::sync::Mutex<()>>) {
    let Some(mut held) = k.view.own() else { return };
    loop {
        let err = keep_alive(k.client.clone(), held.lease_id, k.settings.ttl(), &k.view).await;
        warn!(subnet = %held.subnet, "{err}: leasing a subnet again");
        let _setup = setting_up.lock().await;
        held = reacquire(k.client.clone(), &k.settings, &k.me, &k.node, held).await;
        k.view.set_own(held);
        if let Err(err) = remember(&k.path, held.subnet) {
            warn!("{err}");
        }
    }
}

async fn reacquire(
    mut client: Client,
    settings: &ClusterSettings,
    me: &Holder,
    node: &Node,
    lost: Acquired,
) -> Acquired {
    loop {
        match acquire(&mut client, settings, me, Some(lost.subnet)).await {
            Ok(acquired) if acquired.subnet == lost.subnet => return acquired,
            Ok(acquired) => match set_up(node, settings, acquired.subnet).await {
                Ok(()) => return acquired,
                Err(err) => warn!("setting the node up with {}: {err}", acquired.subnet),
            },
            Err(err) => warn!("leasing a subnet again: {err}"),
        }
        tokio::time::sleep(RETRY).await;
    }
}
