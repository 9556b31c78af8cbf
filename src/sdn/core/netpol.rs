//! The NetworkPolicy mode's operations on the core: namespaces, pods' namespace and labels,
//! remote pods, policies. Each checks what it needs of the state and is one all-or-nothing
//! step of the open batch (hence of one bundle); the mode's flows are recomputed with it.

use std::net::Ipv4Addr;

use super::desired::{enforcing_setup, netpol_view};
use super::Core;
use crate::sdn::error::Error;
use crate::sdn::policy::networkpolicy::model::{Labels, Namespace, NetPol, PodMeta, RemotePod};
use crate::sdn::policy::networkpolicy::names::{check_dns_label, check_labels};
use crate::sdn::policy::networkpolicy::{allocate_ids, netpol_key, NetPolError};
use crate::sdn::policy::{self, require_network_policy};
use crate::sdn::state::{Change, Pod};
use crate::sdn::types::SetupRequest;
use crate::value::{SandboxId, Vnid};

fn refuse(path: &str, reason: impl Into<String>) -> Error {
    Error::NetPol(NetPolError::new(path, reason))
}

impl Core {
    /// The node's setup, when its mode takes `what` (one of the NetworkPolicy inputs).
    fn require_enforcing(&self, what: &str) -> Result<SetupRequest, Error> {
        let setup = self.state.setup.ok_or(Error::NotSetUp)?;
        require_network_policy(setup.mode, what)?;
        Ok(setup)
    }

    fn require_namespace(&self, path: &str, name: &str) -> Result<&Namespace, Error> {
        self.state
            .namespaces
            .get(name)
            .ok_or_else(|| refuse(path, format!("namespace {name:?} does not exist")))
    }

    /// Creates or replaces a namespace (its labels replace the old set). Its VNID is unique in
    /// the NetworkPolicy mode, and cannot change while local pods of it exist (their flows
    /// carry it).
    pub fn namespace_set(&mut self, namespace: Namespace) -> Result<(), Error> {
        self.require_enforcing("namespaces")?;
        let namespace = namespace.validated()?;
        if let Some(other) = self
            .state
            .namespaces
            .values()
            .find(|ns| ns.vnid == namespace.vnid && ns.name != namespace.name)
        {
            return Err(refuse(
                "vnid",
                format!(
                    "{} is namespace {:?}'s; VNIDs are unique per namespace in networkpolicy mode",
                    namespace.vnid, other.name
                ),
            ));
        }
        if let Some(old) = self.state.namespaces.get(&namespace.name) {
            let in_use = self
                .state
                .pod_meta
                .values()
                .any(|m| m.namespace == namespace.name);
            if old.vnid != namespace.vnid && in_use {
                return Err(Error::Conflict {
                    what: format!(
                        "namespace {:?} has local pods with VNID {}; delete them before changing its VNID",
                        namespace.name, old.vnid
                    ),
                });
            }
        }
        self.apply(vec![Change::Namespace {
            name: namespace.name.clone(),
            namespace: Some(namespace),
        }])
    }

    /// Deletes a namespace; refused while pods (local or remote) or policies of it exist.
    pub fn namespace_del(&mut self, name: &str) -> Result<(), Error> {
        self.require_enforcing("namespaces")?;
        if !self.state.namespaces.contains_key(name) {
            return Ok(());
        }
        let pods = self
            .state
            .pod_meta
            .values()
            .filter(|m| m.namespace == name)
            .count();
        let remote = self
            .state
            .remote_pods
            .values()
            .filter(|p| p.namespace == name)
            .count();
        let policies = self
            .state
            .netpols
            .values()
            .filter(|p| p.policy.namespace == name)
            .count();
        if pods + remote + policies > 0 {
            return Err(Error::Conflict {
                what: format!(
                    "namespace {name:?} is in use by {pods} local pods, {remote} remote pods and {policies} policies"
                ),
            });
        }
        self.apply(vec![Change::Namespace {
            name: name.to_string(),
            namespace: None,
        }])
    }

    /// Refuses a pod add whose namespace, labels or VNID do not fit (nothing is changed). In the
    /// NetworkPolicy mode the namespace is required and gives the pod its VNID: a VNID given
    /// too must agree, 0 means "the namespace's" (set in `pod`).
    pub fn check_pod_meta(&self, pod: &mut Pod, meta: Option<&PodMeta>) -> Result<(), Error> {
        let setup = self.state.setup.ok_or(Error::NotSetUp)?;
        if !policy::of(setup.mode).enforces_network_policy() {
            if meta.is_some() {
                require_network_policy(setup.mode, "a pod's namespace and labels")?;
            }
            return Ok(());
        }
        let meta = meta.ok_or_else(|| refuse("namespace", "required in networkpolicy mode"))?;
        check_dns_label("namespace", &meta.namespace)?;
        check_labels("labels", &meta.labels)?;
        let ns = self.require_namespace("namespace", &meta.namespace)?;
        if pod.vnid != Vnid::GLOBAL && pod.vnid != ns.vnid {
            return Err(refuse(
                "vnid",
                format!(
                    "{} is not namespace {:?}'s VNID {}",
                    pod.vnid, meta.namespace, ns.vnid
                ),
            ));
        }
        pod.vnid = ns.vnid;
        if self.state.remote_pods.contains_key(&pod.ip) {
            return Err(refuse("ip", format!("{} is a remote pod's", pod.ip)));
        }
        Ok(())
    }

    /// A pod add with its namespace and labels (refused in the modes that do not enforce
    /// NetworkPolicy).
    pub fn pod_add_with_meta(&mut self, mut pod: Pod, meta: Option<PodMeta>) -> Result<(), Error> {
        self.check_pod_meta(&mut pod, meta.as_ref())?;
        let ip = pod.ip;
        let mut changes = Vec::new();
        // Meta goes first and comes last, so a pod's flows never change the mode's flows.
        if self.state.pod_meta.contains_key(&ip) {
            changes.push(Change::PodMeta { ip, meta: None });
        }
        changes.extend(self.pod_add_changes(pod));
        if meta.is_some() {
            changes.push(Change::PodMeta { ip, meta });
        }
        self.apply(changes)
    }

    /// Replaces a local pod's labels.
    pub fn pod_labels(&mut self, sandbox: &SandboxId, labels: Labels) -> Result<(), Error> {
        self.require_enforcing("pod labels")?;
        check_labels("labels", &labels)?;
        let ip = self
            .state
            .pod_by_sandbox(sandbox)
            .map(|p| p.ip)
            .ok_or_else(|| Error::NotFound {
                what: format!("pod with sandbox {sandbox}"),
            })?;
        let Some(meta) = self.state.pod_meta.get(&ip) else {
            return Err(refuse(
                "sandbox",
                format!("pod {ip} was added without a namespace"),
            ));
        };
        let meta = PodMeta {
            labels,
            ..meta.clone()
        };
        self.apply(vec![Change::PodMeta {
            ip,
            meta: Some(meta),
        }])
    }

    /// Creates or replaces a pod of another node: inside the cluster network, outside this
    /// node's subnet, in a namespace that exists.
    pub fn remote_pod_set(&mut self, pod: RemotePod) -> Result<(), Error> {
        let setup = self.require_enforcing("remote pods")?;
        check_labels("labels", &pod.labels)?;
        check_dns_label("namespace", &pod.namespace)?;
        self.require_namespace("namespace", &pod.namespace)?;
        if !setup.cluster_network.contains(pod.ip) {
            return Err(refuse(
                "ip",
                format!(
                    "{} is outside the cluster network {}",
                    pod.ip, setup.cluster_network
                ),
            ));
        }
        if setup.local_subnet.contains(pod.ip) {
            return Err(refuse(
                "ip",
                format!(
                    "{} is in this node's subnet {}: a local pod",
                    pod.ip, setup.local_subnet
                ),
            ));
        }
        self.apply(vec![Change::RemotePod {
            ip: pod.ip,
            pod: Some(pod),
        }])
    }

    pub fn remote_pod_del(&mut self, ip: Ipv4Addr) -> Result<(), Error> {
        self.require_enforcing("remote pods")?;
        if !self.state.remote_pods.contains_key(&ip) {
            return Ok(());
        }
        self.apply(vec![Change::RemotePod { ip, pod: None }])
    }

    /// Creates or replaces a policy; its rules keep their conjunction ids by position.
    pub fn netpol_apply(&mut self, policy: NetPol) -> Result<(), Error> {
        let setup = self.require_enforcing("NetworkPolicy objects")?;
        self.require_namespace("metadata.namespace", &policy.namespace)?;
        let key = netpol_key(&policy.namespace, &policy.name);
        let others = self
            .state
            .netpols
            .iter()
            .filter(|(k, _)| **k != key)
            .flat_map(|(_, p)| p.ingress_ids.iter().chain(&p.egress_ids).copied());
        let stored = allocate_ids(policy, self.state.netpols.get(&key), others);
        if self.state.netpols.get(&key) == Some(&stored) {
            // The same policy again: nothing changes, no bundle.
            return Ok(());
        }
        netpol_view(&self.state, &setup).check_flow_limit(&stored)?;
        self.apply(vec![Change::NetPol {
            key,
            netpol: Some(Box::new(stored)),
        }])
    }

    pub fn netpol_del(&mut self, namespace: &str, name: &str) -> Result<(), Error> {
        self.require_enforcing("NetworkPolicy objects")?;
        let key = netpol_key(namespace, name);
        if !self.state.netpols.contains_key(&key) {
            return Err(Error::NotFound {
                what: format!("NetworkPolicy {key}"),
            });
        }
        self.apply(vec![Change::NetPol { key, netpol: None }])
    }

    /// Each policy with its local pods selected and its flow count on this node.
    pub fn netpol_summaries(&self) -> Vec<NetPolSummary> {
        let Some(setup) = enforcing_setup(&self.state) else {
            return Vec::new();
        };
        let view = netpol_view(&self.state, setup);
        self.state
            .netpols
            .values()
            .map(|stored| NetPolSummary {
                namespace: stored.policy.namespace.clone(),
                name: stored.policy.name.clone(),
                policy_types: stored
                    .policy
                    .policy_types()
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
                selected_pods: view.targets(&stored.policy).len(),
                flows: view.flows_of(stored),
            })
            .collect()
    }
}

/// One line of `netpol list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetPolSummary {
    pub namespace: String,
    pub name: String,
    pub policy_types: Vec<String>,
    pub selected_pods: usize,
    pub flows: usize,
}
