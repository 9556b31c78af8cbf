//! Where traffic goes beyond the node's pods: other nodes' subnets (the seed's
//! Add/DeleteHostSubnetRules), services (Add/DeleteServiceRules), multicast
//! (UpdateLocalMulticastFlows, UpdateVXLANMulticastFlows).

use std::net::Ipv4Addr;

use super::Node;
use crate::sdn::core::{check_multicast_local, check_multicast_vxlan};
use crate::sdn::error::Error;
use crate::sdn::state::LocalMulticast;
use crate::sdn::types::{HostSubnet, Service};
use crate::value::{Cidr, Vnid};

impl Node {
    /// Routes another node's subnet over VXLAN (the seed's AddHostSubnetRules). A subnet that
    /// is already routed is replaced. The VXLAN device, if any, is then reconciled with the
    /// state (see `Node::sync_vxlan`).
    pub async fn hostsubnet_add(&self, hs: &HostSubnet) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        let hs = *hs;
        self.edit(move |core| core.hostsubnet_add(hs)).await?;
        self.sync_vxlan().await;
        Ok(())
    }

    /// Stops routing a subnet (the seed's DeleteHostSubnetRules). Deleting what is not there
    /// succeeds.
    pub async fn hostsubnet_del(&self, host_ip: Ipv4Addr, subnet: Cidr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.edit(move |core| core.hostsubnet_del(host_ip, subnet))
            .await?;
        self.sync_vxlan().await;
        Ok(())
    }

    /// Adds a service's flows (the seed's AddServiceRules); an existing service of the same IP
    /// is replaced.
    pub async fn service_add(&self, svc: &Service) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        let svc = svc.clone();
        self.edit(move |core| core.service_add(svc)).await
    }

    /// Removes a service's flows (the seed's DeleteServiceRules).
    pub async fn service_del(&self, ip: Ipv4Addr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.edit(move |core| core.service_del(ip)).await
    }

    /// The seed's UpdateLocalMulticastFlows.
    pub async fn multicast_local(
        &self,
        vnid: Vnid,
        enabled: bool,
        ofports: &[u16],
    ) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        check_multicast_local(ofports)?;
        let multicast = enabled.then(|| LocalMulticast {
            ofports: ofports.to_vec(),
        });
        self.edit(move |core| core.multicast_local(vnid, multicast))
            .await
    }

    /// The seed's UpdateVXLANMulticastFlows.
    pub async fn multicast_vxlan(&self, remotes: &[Ipv4Addr]) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        check_multicast_vxlan(remotes)?;
        let remotes = remotes.to_vec();
        self.edit(move |core| core.multicast_vxlan(remotes)).await
    }
}
