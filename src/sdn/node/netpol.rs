//! The NetworkPolicy mode's inputs: namespaces, pods' labels, pods of other nodes, policies.
//! Each is one edit of the desired state (one bundle, or none when nothing changes); the core
//! refuses bad input naming the field (`core/netpol.rs`).

use std::net::Ipv4Addr;

use super::Node;
use crate::sdn::core::NetPolSummary;
use crate::sdn::error::Error;
use crate::sdn::policy::networkpolicy::model::{Labels, Namespace, NetPol, RemotePod};
use crate::sdn::request::{Edit, Read, Request};
use crate::value::SandboxId;

impl Node {
    /// Creates or replaces a namespace (its labels replace the old set).
    pub async fn namespace_set(&self, namespace: Namespace) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(|reply| Edit::NamespaceSet(namespace, reply))
            .await
    }

    /// Deletes a namespace; refused while pods or policies of it exist.
    pub async fn namespace_del(&self, name: &str) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let name = name.to_string();
        self.edit(|reply| Edit::NamespaceDel(name, reply)).await
    }

    pub async fn namespaces(&self) -> Result<Vec<Namespace>, Error> {
        Ok(self.state().await?.namespaces.into_values().collect())
    }

    /// Replaces the labels of the local pod with this sandbox id.
    pub async fn pod_labels(&self, sandbox: &SandboxId, labels: Labels) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let sandbox = *sandbox;
        self.edit(|reply| Edit::PodLabels {
            sandbox,
            labels,
            reply,
        })
        .await
    }

    /// Creates or replaces a pod of another node.
    pub async fn remote_pod_set(&self, pod: RemotePod) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(|reply| Edit::RemotePodSet(pod, reply)).await
    }

    pub async fn remote_pod_del(&self, ip: Ipv4Addr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(|reply| Edit::RemotePodDel(ip, reply)).await
    }

    pub async fn remote_pods(&self) -> Result<Vec<RemotePod>, Error> {
        Ok(self.state().await?.remote_pods.into_values().collect())
    }

    /// Creates or replaces a NetworkPolicy (by namespace and name).
    pub async fn netpol_apply(&self, policy: NetPol) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(|reply| Edit::NetPolApply(Box::new(policy), reply))
            .await
    }

    pub async fn netpol_del(&self, namespace: &str, name: &str) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let (namespace, name) = (namespace.to_string(), name.to_string());
        self.edit(|reply| Edit::NetPolDel {
            namespace,
            name,
            reply,
        })
        .await
    }

    /// Each policy with the local pods it selects and its flows on this node.
    pub async fn netpols(&self) -> Result<Vec<NetPolSummary>, Error> {
        self.call(|reply| Request::Read(Read::NetPols(reply))).await
    }
}
