//! The store: the node's desired state ([`NodeState`]) with the indexes and selector groups
//! that make a change cost what it touches. Every input — the control socket, the Kubernetes
//! watch, a journal replay — is a [`Change`] applied here; what it did to the groups comes
//! back as [`Delta`]s, which the flow producers turn into flow changes.
//!
//! - `index.rs`: pods by namespace, label and address, namespaces by label;
//! - `groups.rs`: selector groups and their member deltas.

mod groups;
mod index;
#[cfg(test)]
mod tests;

use foldhash::{HashMap, HashMapExt};
use std::net::Ipv4Addr;

pub use crate::value::PodKey;
pub use groups::{Delta, GroupId, GroupKey, Groups, Member, Scope, World};
pub use index::Index;

use super::policy::networkpolicy::{ConjIds, StoredNetPol};
use super::state::{Change, NodeState};
use super::types::Pod;
use crate::value::SandboxId;

/// Enters (`held`) or removes the conjunction ids of policy `key` in `index`.
fn index_conj_ids(index: &mut HashMap<u32, String>, key: &str, stored: &StoredNetPol, held: bool) {
    for id in stored.ingress_ids.iter().chain(&stored.egress_ids) {
        if held {
            index.insert(*id, key.to_string());
        } else if index.get(id).is_some_and(|holder| holder == key) {
            index.remove(id);
        }
    }
}

/// The desired state, indexed.
#[derive(Debug)]
pub struct Store {
    state: NodeState,
    index: Index,
    groups: Groups,
    /// The conjunction ids the policies hold.
    conj_ids: ConjIds,
    /// The policy holding each conjunction id (`namespace/name`): what names a verdict flow's
    /// rule for the audit without a pass over every policy.
    netpols_by_conj_id: HashMap<u32, String>,
    /// Local pods by address and by sandbox (the seed's operations name pods by either).
    pods_by_ip: HashMap<Ipv4Addr, PodKey>,
    pods_by_sandbox: HashMap<SandboxId, PodKey>,
}

impl Store {
    /// The store of `state`, its indexes built.
    pub fn new(state: NodeState) -> Store {
        let mut store = Store {
            state: NodeState::default(),
            index: Index::default(),
            groups: Groups::default(),
            conj_ids: ConjIds::default(),
            netpols_by_conj_id: HashMap::new(),
            pods_by_ip: HashMap::new(),
            pods_by_sandbox: HashMap::new(),
        };
        for ns in state.namespaces.values() {
            store.index.namespace(None, Some(ns));
        }
        for (key, info) in &state.pod_infos {
            store.index.pod(key, None, Some(info));
        }
        for (key, pod) in &state.pods {
            store.index_local_pod(key, None, Some(pod));
        }
        for (key, stored) in &state.netpols {
            store.conj_ids.follow(stored, true);
            index_conj_ids(&mut store.netpols_by_conj_id, key, stored, true);
        }
        store.state = state;
        store
    }

    pub fn state(&self) -> &NodeState {
        &self.state
    }

    /// The objects and their index, as groups read them.
    pub fn world(&self) -> World<'_> {
        World {
            pods: &self.state.pod_infos,
            namespaces: &self.state.namespaces,
            index: &self.index,
            nodes: &self.state.nodes,
        }
    }

    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// The groups, to acquire and release, with the objects they read.
    pub fn groups_and_world(&mut self) -> (&mut Groups, World<'_>) {
        let world = World {
            pods: &self.state.pod_infos,
            namespaces: &self.state.namespaces,
            index: &self.index,
            nodes: &self.state.nodes,
        };
        (&mut self.groups, world)
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The conjunction ids the stored policies hold, and the free ones.
    pub fn conj_ids(&self) -> &ConjIds {
        &self.conj_ids
    }

    /// The policy (`namespace/name`) holding conjunction id `id`.
    pub fn netpol_of_conj_id(&self, id: u32) -> Option<&str> {
        self.netpols_by_conj_id.get(&id).map(String::as_str)
    }

    /// The local pod at `ip`.
    pub fn local_pod_at(&self, ip: Ipv4Addr) -> Option<(&PodKey, &Pod)> {
        let key = self.pods_by_ip.get(&ip)?;
        self.state.pods.get_key_value(key)
    }

    /// The local pod with sandbox `sandbox`.
    pub fn local_pod_by_sandbox(&self, sandbox: &SandboxId) -> Option<(&PodKey, &Pod)> {
        let key = self.pods_by_sandbox.get(sandbox)?;
        self.state.pods.get_key_value(key)
    }

    fn index_local_pod(&mut self, key: &PodKey, old: Option<&Pod>, new: Option<&Pod>) {
        if let Some(old) = old {
            if self.pods_by_ip.get(&old.ip) == Some(key) {
                self.pods_by_ip.remove(&old.ip);
            }
            if self.pods_by_sandbox.get(&old.sandbox) == Some(key) {
                self.pods_by_sandbox.remove(&old.sandbox);
            }
        }
        if let Some(new) = new {
            self.pods_by_ip.insert(new.ip, key.clone());
            self.pods_by_sandbox.insert(new.sandbox, key.clone());
        }
    }

    /// Applies `change`, says what it did to the groups in `deltas`, and returns the change
    /// that undoes it.
    pub fn apply(&mut self, change: Change, deltas: &mut Vec<Delta>) -> Change {
        self.groups.forget_previews();
        match change {
            Change::LocalPod { key, pod } => {
                let old = self.state.pods.get(&key).cloned();
                self.index_local_pod(&key, old.as_ref(), pod.as_ref());
                self.state.apply(Change::LocalPod { key, pod })
            }
            Change::PodInfo { key, info } => {
                let old = self.state.pod_infos.get(&key).cloned();
                self.index.pod(&key, old.as_ref(), info.as_ref());
                let undo = self.state.apply(Change::PodInfo {
                    key: key.clone(),
                    info,
                });
                let world = World {
                    pods: &self.state.pod_infos,
                    namespaces: &self.state.namespaces,
                    index: &self.index,
                    nodes: &self.state.nodes,
                };
                let new = self.state.pod_infos.get(&key);
                self.groups
                    .pod_changed(&key, old.as_ref(), new, world, deltas);
                undo
            }
            Change::Namespace { name, namespace } => {
                let old = self.state.namespaces.get(&name).cloned();
                self.index.namespace(old.as_ref(), namespace.as_ref());
                let undo = self.state.apply(Change::Namespace {
                    name: name.clone(),
                    namespace,
                });
                let world = World {
                    pods: &self.state.pod_infos,
                    namespaces: &self.state.namespaces,
                    index: &self.index,
                    nodes: &self.state.nodes,
                };
                let new = self.state.namespaces.get(&name);
                self.groups
                    .namespace_changed(&name, old.as_ref(), new, world, deltas);
                undo
            }
            Change::NetPol { key, netpol } => {
                if let Some(old) = self.state.netpols.get(&key) {
                    self.conj_ids.follow(old, false);
                    index_conj_ids(&mut self.netpols_by_conj_id, &key, old, false);
                }
                if let Some(new) = &netpol {
                    self.conj_ids.follow(new, true);
                    index_conj_ids(&mut self.netpols_by_conj_id, &key, new, true);
                }
                self.state.apply(Change::NetPol { key, netpol })
            }
            Change::Replace { state } => {
                let old = std::mem::replace(self, Store::new(*state));
                Change::Replace {
                    state: Box::new(old.state),
                }
            }
            other => self.state.apply(other),
        }
    }
}
