//! The NetworkPolicy mode's operations on the core: namespaces, what selectors see of pods
//! (local and on other nodes), policies. Each checks what it needs of the state and is one
//! all-or-nothing step of the open batch (hence of one bundle); the mode's engine follows the
//! store's groups.

use std::net::IpAddr;
use std::ops::Bound;

use super::desired::enforcing_setup;
use super::Core;
use super::CoreError as Error;
use crate::sdn::labels::{check_labels, FieldError, Labels};
use crate::sdn::objects::{check_named_ports, NamedPort, Namespace, PodInfo};
use crate::sdn::policy::networkpolicy::limits::MAX_FLOWS;
use crate::sdn::policy::networkpolicy::model::NetPol;
use crate::sdn::policy::networkpolicy::{allocate_ids, netpol_key};
use crate::sdn::policy::require_network_policy;
use crate::sdn::state::Change;
use crate::sdn::types::SetupRequest;
use crate::value::PodKey;

fn refuse(path: &str, reason: impl Into<String>) -> Error {
    Error::Field(FieldError::new(path, reason))
}

/// Labels to set and to remove, as `kubectl label` takes them (`k=v`, `k-`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelEdit {
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub set: Labels,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl LabelEdit {
    /// The edit that turns labels `from` into `to` (what a source that owns them replaces).
    pub fn between(from: &Labels, to: &Labels) -> LabelEdit {
        LabelEdit {
            set: to
                .iter()
                .filter(|(k, v)| from.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            remove: from
                .keys()
                .filter(|k| !to.contains_key(*k))
                .cloned()
                .collect(),
        }
    }

    /// `labels` with the edit made; a key both set and removed is refused.
    pub fn applied_to(&self, mut labels: Labels) -> Result<Labels, Error> {
        if let Some(both) = self.remove.iter().find(|k| self.set.contains_key(*k)) {
            return Err(refuse(&format!("labels.{both}"), "is both set and removed"));
        }
        check_labels("labels", &self.set)?;
        for key in &self.remove {
            labels.remove(key);
        }
        labels.extend(self.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(labels)
    }
}

impl Core {
    /// The node's setup, when its mode takes `what` (one of the NetworkPolicy inputs).
    pub(super) fn require_enforcing(&self, what: &str) -> Result<SetupRequest, Error> {
        let setup = self.state().setup.ok_or(Error::NotSetUp)?;
        require_network_policy(setup.mode, what)?;
        Ok(setup)
    }

    fn require_namespace(&self, path: &str, name: &str) -> Result<&Namespace, Error> {
        self.state()
            .namespaces
            .get(name)
            .ok_or_else(|| refuse(path, format!("namespace {name:?} does not exist")))
    }

    /// The local pods of namespace `name` (their attachments).
    fn local_pods_in(&self, name: &str) -> usize {
        let prefix = format!("{name}/");
        self.state()
            .pods
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(key, _)| key.namespace() == name)
            .count()
    }

    /// Creates or replaces a namespace (its labels replace the old set). Its VNID is unique in
    /// the NetworkPolicy mode, and cannot change while local pods of it exist (their flows
    /// carry it).
    pub fn namespace_set(&mut self, namespace: Namespace) -> Result<(), Error> {
        self.require_enforcing("namespaces")?;
        let namespace = namespace.validated()?;
        if let Some(other) = self
            .state()
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
        if let Some(old) = self.state().namespaces.get(&namespace.name) {
            if old.vnid != namespace.vnid && self.local_pods_in(&namespace.name) > 0 {
                return Err(Error::Conflict {
                    what: format!(
                        "namespace {:?} has local pods with VNID {}; delete them before changing its VNID",
                        namespace.name, old.vnid
                    ),
                });
            }
            if *old == namespace {
                return Ok(());
            }
        }
        self.apply(vec![Change::Namespace {
            name: namespace.name.clone(),
            namespace: Some(namespace),
        }])
    }

    /// Adds, changes and removes a namespace's labels, keeping the others and its VNID.
    pub fn namespace_labels(&mut self, name: &str, edit: &LabelEdit) -> Result<(), Error> {
        self.require_enforcing("namespaces")?;
        let ns = self
            .state()
            .namespaces
            .get(name)
            .ok_or_else(|| Error::NotFound {
                what: format!("namespace {name}"),
            })?;
        let labels = edit.applied_to(ns.labels.clone())?;
        self.namespace_set(Namespace {
            labels,
            ..ns.clone()
        })
    }

    /// Deletes a namespace; refused while pods (local or remote) or policies of it exist.
    pub fn namespace_del(&mut self, name: &str) -> Result<(), Error> {
        self.require_enforcing("namespaces")?;
        if !self.state().namespaces.contains_key(name) {
            return Ok(());
        }
        let local = self.local_pods_in(name);
        let known = self.store.index().pod_count_in(name);
        let prefix = format!("{name}/");
        let policies = self
            .state()
            .netpols
            .range(prefix.clone()..)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .count();
        if local + known + policies > 0 {
            return Err(Error::Conflict {
                what: format!(
                    "namespace {name:?} is in use by {local} local pods, {} pods known on other nodes and {policies} policies",
                    known.saturating_sub(local)
                ),
            });
        }
        self.apply(vec![Change::Namespace {
            name: name.to_string(),
            namespace: None,
        }])
    }

    /// Refuses a local pod's labels that do not fit the node's mode or the namespace it names
    /// (nothing is changed). In the NetworkPolicy mode the pod's namespace must exist and gives
    /// its VNID: a VNID given too must agree, 0 means "the namespace's" (set in `vnid`).
    pub fn check_local_pod(
        &self,
        key: &PodKey,
        vnid: &mut crate::value::Vnid,
        labels: &Labels,
        ip: std::net::Ipv4Addr,
    ) -> Result<(), Error> {
        let setup = self.state().setup.ok_or(Error::NotSetUp)?;
        if enforcing_setup(self.state()).is_none() {
            if !labels.is_empty() {
                require_network_policy(setup.mode, "a pod's labels")?;
            }
            return Ok(());
        }
        check_labels("labels", labels)?;
        let ns = self.require_namespace("pod", key.namespace())?;
        if *vnid != crate::value::Vnid::GLOBAL && *vnid != ns.vnid {
            return Err(refuse(
                "vnid",
                format!(
                    "{} is not namespace {:?}'s VNID {}",
                    vnid,
                    key.namespace(),
                    ns.vnid
                ),
            ));
        }
        *vnid = ns.vnid;
        let elsewhere = self.store.index().pods_at(IpAddr::V4(ip)).find(|other| {
            *other != key && self.state().pod_infos.get(*other).is_some_and(|i| !i.local)
        });
        if let Some(other) = elsewhere {
            return Err(refuse(
                "ip",
                format!("{ip} is pod {other}'s on another node"),
            ));
        }
        Ok(())
    }

    /// Adds, changes and removes a pod's labels (local or on another node).
    pub fn pod_labels(&mut self, key: &PodKey, edit: &LabelEdit) -> Result<(), Error> {
        self.require_enforcing("pod labels")?;
        let info = self
            .state()
            .pod_infos
            .get(key)
            .ok_or_else(|| Error::NotFound {
                what: format!("pod {key}"),
            })?;
        let labels = edit.applied_to(info.labels.clone())?;
        if labels == info.labels {
            return Ok(());
        }
        let info = PodInfo {
            labels,
            ..info.clone()
        };
        self.apply(vec![Change::PodInfo {
            key: key.clone(),
            info: Some(info),
        }])
    }

    /// Sets a pod's named container ports (of this node or another), replacing the old ones:
    /// what a policy's named port resolves to on it.
    pub fn pod_ports(&mut self, key: &PodKey, ports: Vec<NamedPort>) -> Result<(), Error> {
        self.require_enforcing("pod ports")?;
        check_named_ports("ports", &ports)?;
        let info = self
            .state()
            .pod_infos
            .get(key)
            .ok_or_else(|| Error::NotFound {
                what: format!("pod {key}"),
            })?;
        let info = PodInfo {
            ports,
            ..info.clone()
        }
        .normalized();
        if self.state().pod_infos.get(key) == Some(&info) {
            return Ok(());
        }
        self.apply(vec![Change::PodInfo {
            key: key.clone(),
            info: Some(info),
        }])
    }

    /// Creates or replaces a pod of another node: its addresses inside the cluster network and
    /// outside this node's subnet, in a namespace that exists, not a local pod's key.
    pub fn remote_pod_set(&mut self, key: PodKey, info: PodInfo) -> Result<(), Error> {
        let setup = self.require_enforcing("remote pods")?;
        check_labels("labels", &info.labels)?;
        check_named_ports("ports", &info.ports)?;
        self.require_namespace("pod", key.namespace())?;
        if self.state().pods.contains_key(&key) {
            return Err(refuse("pod", format!("{key} is a pod of this node")));
        }
        if info.ips.is_empty() {
            return Err(refuse("ips", "a pod of another node needs its address"));
        }
        for ip in info.ipv4s() {
            if !setup.cluster_network.contains(ip) {
                return Err(refuse(
                    "ips",
                    format!(
                        "{ip} is outside the cluster network {}",
                        setup.cluster_network
                    ),
                ));
            }
            if setup.local_subnet.contains(ip) {
                return Err(refuse(
                    "ips",
                    format!(
                        "{ip} is in this node's subnet {}: a local pod",
                        setup.local_subnet
                    ),
                ));
            }
        }
        let info = PodInfo {
            local: false,
            ..info.normalized()
        };
        if self.state().pod_infos.get(&key) == Some(&info) {
            return Ok(());
        }
        self.apply(vec![Change::PodInfo {
            key,
            info: Some(info),
        }])
    }

    /// Forgets a pod of another node (a pod of this node is deleted with `pod del`).
    pub fn remote_pod_del(&mut self, key: &PodKey) -> Result<(), Error> {
        self.require_enforcing("remote pods")?;
        match self.state().pod_infos.get(key) {
            None => Ok(()),
            Some(info) if info.local => Err(refuse(
                "pod",
                format!("{key} is a pod of this node: delete it with `pod del`"),
            )),
            Some(_) => self.apply(vec![Change::PodInfo {
                key: key.clone(),
                info: None,
            }]),
        }
    }

    /// Creates or replaces a policy; its rules keep their conjunction ids by position.
    pub fn netpol_apply(&mut self, policy: NetPol) -> Result<(), Error> {
        self.require_enforcing("NetworkPolicy objects")?;
        let ns = self
            .require_namespace("metadata.namespace", &policy.namespace)?
            .clone();
        let key = netpol_key(&policy.namespace, &policy.name);
        let stored = allocate_ids(
            policy,
            self.state().netpols.get(&key),
            self.store.conj_ids(),
        );
        if self.state().netpols.get(&key) == Some(&stored) {
            // The same policy again: nothing changes, no bundle.
            return Ok(());
        }
        if let Some(engine) = &self.netpol {
            engine.check_policy(
                &stored,
                &ns,
                self.store.groups(),
                self.store.world(),
                MAX_FLOWS,
            )?;
        }
        self.apply(vec![Change::NetPol {
            key,
            netpol: Some(Box::new(stored)),
        }])
    }

    pub fn netpol_del(&mut self, namespace: &str, name: &str) -> Result<(), Error> {
        self.require_enforcing("NetworkPolicy objects")?;
        let key = netpol_key(namespace, name);
        if !self.state().netpols.contains_key(&key) {
            return Err(Error::NotFound {
                what: format!("NetworkPolicy {key}"),
            });
        }
        self.apply(vec![Change::NetPol { key, netpol: None }])
    }

    /// Each policy with its local pods selected and its flow count on this node.
    pub fn netpol_summaries(&self) -> Vec<NetPolSummary> {
        let Some(engine) = &self.netpol else {
            return Vec::new();
        };
        self.state()
            .netpols
            .iter()
            .map(|(key, stored)| {
                let (selected_pods, flows) =
                    engine.summary(key, self.store.groups(), self.store.world());
                NetPolSummary {
                    namespace: stored.policy.namespace.clone(),
                    name: stored.policy.name.clone(),
                    policy_types: stored
                        .policy
                        .policy_types()
                        .iter()
                        .map(|t| t.to_string())
                        .collect(),
                    selected_pods,
                    flows,
                }
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
