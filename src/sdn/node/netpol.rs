//! The NetworkPolicy mode's inputs: namespaces, pods' labels, pods of other nodes, policies.
//! Each is one edit of the desired state (one bundle, or none when nothing changes); the core
//! refuses bad input naming the field (`core/netpol.rs`).

use super::Node;
use crate::sdn::core::explain::{Explanation, PortProto};
use crate::sdn::core::{AdminSummary, LabelEdit, NetPolSummary};
use crate::sdn::error::Error;
use crate::sdn::objects::NodeInfo;
use crate::sdn::objects::{KnownPod, NamedPort, Namespace, PodInfo};
use crate::sdn::policy::admin::AdminPolicy;
use crate::sdn::policy::networkpolicy::model::NetPol;
use crate::value::PodKey;

impl Node {
    /// Creates or replaces a namespace (its labels replace the old set).
    pub async fn namespace_set(&self, namespace: Namespace) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.namespace_set(namespace)).await
    }

    /// Adds, changes and removes a namespace's labels.
    pub async fn namespace_labels(&self, name: &str, edit: LabelEdit) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let name = name.to_string();
        self.edit(move |core| core.namespace_labels(&name, &edit))
            .await
    }

    /// Deletes a namespace; refused while pods or policies of it exist.
    pub async fn namespace_del(&self, name: &str) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let name = name.to_string();
        self.edit(move |core| core.namespace_del(&name)).await
    }

    pub async fn namespaces(&self) -> Result<Vec<Namespace>, Error> {
        self.read(|core| Ok(core.state().namespaces.values().cloned().collect()))
            .await
    }

    /// Adds, changes and removes a pod's labels (a pod of this node or another).
    pub async fn pod_labels(&self, key: PodKey, edit: LabelEdit) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.pod_labels(&key, &edit)).await
    }

    /// Sets a pod's named container ports (of this node or another).
    pub async fn pod_ports(&self, key: PodKey, ports: Vec<NamedPort>) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.pod_ports(&key, ports)).await
    }

    /// Creates or replaces a pod of another node.
    pub async fn remote_pod_set(&self, key: PodKey, info: PodInfo) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.remote_pod_set(key, info)).await
    }

    pub async fn remote_pod_del(&self, key: PodKey) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.remote_pod_del(&key)).await
    }

    /// The pods of other nodes the node knows.
    pub async fn remote_pods(&self) -> Result<Vec<KnownPod>, Error> {
        self.read(|core| {
            Ok(core
                .state()
                .pod_infos
                .iter()
                .filter(|(_, info)| !info.local)
                .map(|(key, info)| KnownPod::new(key, info))
                .collect())
        })
        .await
    }

    /// Creates or replaces a NetworkPolicy (by namespace and name).
    pub async fn netpol_apply(&self, policy: NetPol) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.netpol_apply(policy)).await
    }

    pub async fn netpol_del(&self, namespace: &str, name: &str) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let (namespace, name) = (namespace.to_string(), name.to_string());
        self.edit(move |core| core.netpol_del(&namespace, &name))
            .await
    }

    /// Creates or replaces an AdminNetworkPolicy or the BaselineAdminNetworkPolicy.
    pub async fn admin_apply(&self, policy: AdminPolicy) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.admin_apply(policy)).await
    }

    /// Deletes one: `short` is `anp` or `banp`.
    pub async fn admin_del(&self, short: &str, name: &str) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let (short, name) = (short.to_string(), name.to_string());
        self.edit(move |core| core.admin_del(&short, &name)).await
    }

    /// Creates or replaces a node of the cluster (for admin policies' node peers).
    pub async fn node_set(&self, name: String, node: NodeInfo) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.edit(move |core| core.node_set(&name, node)).await
    }

    pub async fn node_del(&self, name: &str) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let name = name.to_string();
        self.edit(move |core| core.node_del(&name)).await
    }

    /// The nodes of the cluster the node knows, by name.
    pub async fn nodes(&self) -> Result<Vec<(String, NodeInfo)>, Error> {
        self.read(|core| {
            Ok(core
                .state()
                .nodes
                .iter()
                .map(|(n, i)| (n.clone(), i.clone()))
                .collect())
        })
        .await
    }

    /// Each admin policy with the local pods it selects and its flows on this node.
    pub async fn admin_policies(&self) -> Result<Vec<AdminSummary>, Error> {
        self.read(|core| Ok(core.admin_summaries())).await
    }

    /// Which policy rules judge a connection from pod `from` to `to` (a pod or an address) on
    /// `port`, and which one decides, from the desired state.
    pub async fn explain(
        &self,
        from: PodKey,
        to: String,
        port: PortProto,
    ) -> Result<Explanation, Error> {
        self.read(move |core| Ok(core.explain(&from, &to, port)?))
            .await
    }

    /// Each policy with the local pods it selects and its flows on this node.
    pub async fn netpols(&self) -> Result<Vec<NetPolSummary>, Error> {
        self.read(|core| Ok(core.netpol_summaries())).await
    }
}
