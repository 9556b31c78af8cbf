//! The kernel VXLAN device (flannel's way), kept in line with the node's host subnets.

use super::Node;
use crate::netlink::{Handle, KnownHost, VxlanManager, VxlanSettings};
use crate::sdn::error::Error;
use crate::sdn::state::NodeState;
use crate::sdn::types::HostSubnet;

/// The VXLAN device of `settings`, with entries for the host subnets of `state`. A device
/// that cannot be made fails the start; entries that cannot be programmed yet are retried in
/// the background by the manager.
pub(super) async fn start_vxlan(
    settings: &VxlanSettings,
    handle: &Handle,
    state: &NodeState,
) -> Result<VxlanManager, Error> {
    let options = settings.to_options(handle).await?;
    let manager = VxlanManager::start(handle, options).await?;
    // The manager logs, counts and retries a failure itself.
    let _ = manager
        .set_hosts(state.host_subnets.values().filter_map(known_host))
        .await;
    Ok(manager)
}

/// A host subnet as the VXLAN device knows it; only those with a VTEP MAC can be reached.
fn known_host(hs: &HostSubnet) -> Option<KnownHost> {
    Some(KnownHost {
        host_ip: hs.host_ip,
        subnet: hs.subnet.into(),
        vtep_mac: hs.vtep_mac?,
    })
}

impl Node {
    /// Reconciles the VXLAN device's entries with the host subnets now (a background repair
    /// also does it every `repair_secs`, and retries failures); without a device, nothing.
    pub async fn vxlan_reprogram(&self) -> Result<(), Error> {
        match &self.inner.vxlan {
            Some(vxlan) => Ok(vxlan.reprogram().await?),
            None => Ok(()),
        }
    }

    /// Hands the VXLAN device every host subnet of the committed state, which is the truth:
    /// the manager adds what is missing and removes what is no longer wanted. The change that
    /// led here is already journaled and on the switch, so a failure here does not fail it: it
    /// is logged and counted, shown in `status` (`vxlan.last_error`), and retried in the
    /// background until it succeeds. Callers take turns and each hands over the latest set, so
    /// an older set never lands last.
    pub(super) async fn sync_vxlan(&self) {
        let Some(vxlan) = &self.inner.vxlan else {
            return;
        };
        let _turn = self.inner.vxlan_turn.lock().await;
        let hosts = self.inner.vxlan_hosts.borrow().clone();
        // The manager logs, counts and retries a failure itself.
        let _ = vxlan.set_hosts(hosts.iter().filter_map(known_host)).await;
    }
}
