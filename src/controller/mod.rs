//! `ofnode controller`: the cluster's allocator, as openshift-sdn's master was. One of several
//! replicas holds a `coordination.k8s.io/v1` Lease and, while it does, gives every Node a
//! HostSubnet (a subnet of the cluster network, the Node's InternalIP as `hostIP`) and, in the
//! multitenant and networkpolicy modes, every Namespace a NetNamespace (a VNID), and removes
//! them when their Node or Namespace goes. The others stand by and take over when the leader's
//! lease lapses.
//!
//! - [`config`]: flags and their checks; [`objects`]: the HostSubnets and NetNamespaces it writes;
//! - [`lease`]: the election and the fence; [`leader`]: the leader's watches and writes;
//! - [`state`]: what the leader knows and decides (sans-IO), from [`subnets`] and [`netids`];
//! - [`status`]: `/status`, `/metrics`, `/healthz`.

pub mod config;
pub mod leader;
pub mod lease;
pub mod netids;
pub mod objects;
pub mod state;
pub mod status;
pub mod subnets;

use std::sync::Arc;

use tracing::info;

pub use config::{ControllerArgs, Settings, SettingsError};
use lease::{Elector, Fence};
use status::Status;

use crate::kube::client::{self, KubeClientError};

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Client(#[from] KubeClientError),
    #[error("cannot serve the status on {address}: {source}")]
    Status {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Runs until SIGTERM or SIGINT: stands by, leads while it holds the lease, stands by again
/// when it loses it. On the signal a leader stops writing, waits for its writes in flight and
/// releases the lease, so that a standby takes over at once.
pub async fn run(args: ControllerArgs) -> Result<(), ControllerError> {
    let settings = args.settings()?;
    let config = client::config(args.kubeconfig.as_deref()).await?;
    let client = client::client(config)?;
    let status = Arc::new(Status::new(&settings));
    let (address, _server) = status::serve(settings.status_address, status.clone())
        .await
        .map_err(|source| ControllerError::Status {
            address: settings.status_address,
            source,
        })?;
    info!(
        identity = %settings.identity,
        status = %address,
        mode = %settings.mode,
        cluster_network = %settings.cluster_network,
        subnet_length = settings.subnet_len,
        "controller started; standing by for the lease {}/{}",
        settings.lease_namespace,
        settings.lease_name
    );
    let elector = Elector::new(
        client.clone(),
        &settings.lease_namespace,
        &settings.lease_name,
        &settings.identity,
        settings.lease,
    );
    let fence = Fence::new(settings.lease.renew_deadline);
    let mut shutdown = std::pin::pin!(crate::daemon::shutdown_signal());
    loop {
        let mut held = tokio::select! {
            held = elector.acquire(&fence, &status) => held,
            () = &mut shutdown => return Ok(()),
        };
        status.set_leader(true);
        let stopping = {
            let lead = leader::lead(client.clone(), &settings, &fence, &status);
            let hold = elector.hold(&mut held, &fence);
            let mut term = std::pin::pin!(futures::future::join(lead, hold));
            tokio::select! {
                _ = &mut term => false,
                () = &mut shutdown => {
                    fence.revoke();
                    term.await;
                    true
                }
            }
        };
        status.set_leader(false);
        if stopping {
            elector.release(&held).await;
            return Ok(());
        }
        info!("lost the lease: standing by");
    }
}
