//! The node's desired state: what the user asked for, from which the desired flow table is
//! derived. It changes only through [`Change`]s, which are also what the journal records, so a
//! restart replays exactly the changes that were acknowledged.

mod legacy;

pub use legacy::{replay, RecordedChange};

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::sdn::objects::{Namespace, NodeInfo, PodInfo};
use crate::sdn::policy::admin::AdminPolicy;
use crate::sdn::policy::networkpolicy::StoredNetPol;
use crate::sdn::types::{
    Cidr, EgressNetworkPolicy, HostSubnet, IfName, Pod, Service, SetupRequest, Vnid,
};
use crate::value::PodKey;

/// Local multicast of an enabled VNID: the ports that receive it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalMulticast {
    pub ofports: Vec<u16>,
}

/// A VNID's egress policy input, plus the DNS answers its flows were computed from (kept so
/// that a restart rebuilds the very same flows before the names are resolved again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressState {
    pub namespaces: Vec<String>,
    pub policies: Vec<EgressNetworkPolicy>,
    /// Resolved IPv4 addresses per DNS name (sorted, deduplicated).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dns: BTreeMap<String, Vec<Ipv4Addr>>,
    /// Why the DNS resolver could not be used, when it could not (the seed's CheckDNSResolver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver_error: Option<String>,
}

impl EgressState {
    /// The DNS names the single policy's rules refer to.
    pub fn dns_names(&self) -> impl Iterator<Item = &str> {
        self.policies
            .iter()
            .flat_map(|p| p.spec.egress.iter())
            .filter_map(|rule| rule.to.dns_name.as_deref())
    }
}

/// Everything the node was asked to do: objects by identity (pods by `namespace/name`), the
/// seed's other entities keyed the way its deletes address them. Journals written before pods
/// had names load through `state/legacy.rs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "legacy::RecordedState")]
pub struct NodeState {
    #[serde(default)]
    pub setup: Option<SetupRequest>,
    /// Local pods' attachments (the seed's pods: veth, address, MAC, port, VNID), by pod.
    #[serde(default)]
    pub pods: BTreeMap<PodKey, Pod>,
    /// Keyed by subnet (the seed deletes table 50/90 flows by subnet).
    #[serde(default)]
    pub host_subnets: BTreeMap<Cidr, HostSubnet>,
    /// Keyed by cluster IP.
    #[serde(default)]
    pub services: BTreeMap<Ipv4Addr, Service>,
    /// Enabled VNIDs only.
    #[serde(default)]
    pub multicast: BTreeMap<Vnid, LocalMulticast>,
    #[serde(default)]
    pub vxlan_multicast: Vec<Ipv4Addr>,
    #[serde(default)]
    pub egress: BTreeMap<Vnid, EgressState>,
    /// The NetworkPolicy mode's inputs (refused in the other modes; a state journaled before
    /// they were may hold some, which change no flow there).
    /// Namespaces by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, Namespace>,
    /// Every pod the node knows, local or on another node: what selectors see of it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_infos: BTreeMap<PodKey, PodInfo>,
    /// NetworkPolicies by `namespace/name`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub netpols: BTreeMap<String, StoredNetPol>,
    /// The cluster admin's policies (AdminNetworkPolicy, BaselineAdminNetworkPolicy) by
    /// `anp/NAME` or `banp/default`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub admin_policies: BTreeMap<String, AdminPolicy>,
    /// The cluster's nodes by name, as admin policies' node peers see them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeInfo>,
    /// What OVSDB must hold for pods' ports beyond their existence: the bandwidth limits
    /// acknowledged, and the ports of deleted pods whose removal OVSDB has not confirmed yet.
    /// Reconciled at every OVSDB (re)connect (`core/ports.rs`); journals written before it
    /// existed load with none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port_intents: BTreeMap<IfName, PortIntent>,
}

/// What OVSDB must do with one pod's port, beyond what the pod's presence says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "want", rename_all = "snake_case")]
pub enum PortIntent {
    /// The pod was deleted: its port (and its QoS row) must be gone from the bridge.
    Removed,
    /// The pod's bandwidth limits (the seed's SetPodBandwidth), as OVSDB holds them.
    Limited {
        /// A `linux-htb` QoS `max-rate` in bit/s on the port; None: no QoS.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        qos_max_rate: Option<u64>,
        /// The interface's `ingress_policing_rate` in kbit/s; 0: no policing.
        #[serde(default)]
        ingress_policing_kbps: u32,
    },
}

/// One acknowledged change of the desired state: the new value of one entry (None removes it).
/// Applying a change is idempotent, so replaying a journal twice is harmless.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A local pod's attachment.
    LocalPod {
        key: PodKey,
        pod: Option<Pod>,
    },
    /// What selectors see of a pod, local or not.
    PodInfo {
        key: PodKey,
        info: Option<PodInfo>,
    },
    HostSubnet {
        subnet: Cidr,
        host_subnet: Option<HostSubnet>,
    },
    Service {
        ip: Ipv4Addr,
        service: Option<Service>,
    },
    Multicast {
        vnid: Vnid,
        multicast: Option<LocalMulticast>,
    },
    VxlanMulticast {
        remotes: Vec<Ipv4Addr>,
    },
    Egress {
        vnid: Vnid,
        egress: Option<EgressState>,
    },
    Namespace {
        name: String,
        namespace: Option<Namespace>,
    },
    NetPol {
        key: String,
        netpol: Option<Box<StoredNetPol>>,
    },
    /// A node of the cluster, as node peers see it.
    Node {
        name: String,
        node: Option<NodeInfo>,
    },
    /// An AdminNetworkPolicy or the BaselineAdminNetworkPolicy.
    AdminPolicy {
        key: String,
        policy: Option<Box<AdminPolicy>>,
    },
    /// What OVSDB must do with a pod's port (None: nothing beyond the pod's presence).
    PortIntent {
        veth: IfName,
        intent: Option<PortIntent>,
    },
    /// The whole state at once: setup (which may clear everything else) and undo of a reset.
    Replace {
        state: Box<NodeState>,
    },
}

/// What a [`Change`] touches; the flow table uses it to find the flows to recompute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    /// Setup's flows: the base tables, the policy mode's table 80 flows, the version note.
    Base,
    Pod(PodKey),
    HostSubnet(Cidr),
    Service(Ipv4Addr),
    Multicast(Vnid),
    VxlanMulticast,
    Egress(Vnid),
    /// Every flow of the NetworkPolicy mode's policies (merged clause flows cannot be split by
    /// policy, so they are one entity).
    NetPol,
    /// OVSDB only (a [`PortIntent`]): no flows.
    Ovsdb,
    Everything,
}

impl Change {
    pub fn entity(&self) -> Entity {
        match self {
            Change::LocalPod { key, .. } => Entity::Pod(key.clone()),
            Change::HostSubnet { subnet, .. } => Entity::HostSubnet(*subnet),
            Change::Service { ip, .. } => Entity::Service(*ip),
            Change::Multicast { vnid, .. } => Entity::Multicast(*vnid),
            Change::VxlanMulticast { .. } => Entity::VxlanMulticast,
            Change::Egress { vnid, .. } => Entity::Egress(*vnid),
            Change::Namespace { .. }
            | Change::PodInfo { .. }
            | Change::NetPol { .. }
            | Change::AdminPolicy { .. }
            | Change::Node { .. } => Entity::NetPol,
            Change::PortIntent { .. } => Entity::Ovsdb,
            Change::Replace { .. } => Entity::Everything,
        }
    }
}

fn put<K: Ord, V>(map: &mut BTreeMap<K, V>, key: K, value: Option<V>) -> Option<V> {
    match value {
        Some(v) => map.insert(key, v),
        None => map.remove(&key),
    }
}

impl NodeState {
    /// Applies `change` and returns the change that undoes it.
    pub fn apply(&mut self, change: Change) -> Change {
        match change {
            Change::LocalPod { key, pod } => Change::LocalPod {
                pod: put(&mut self.pods, key.clone(), pod),
                key,
            },
            Change::PodInfo { key, info } => Change::PodInfo {
                info: put(&mut self.pod_infos, key.clone(), info),
                key,
            },
            Change::HostSubnet {
                subnet,
                host_subnet,
            } => Change::HostSubnet {
                subnet,
                host_subnet: put(&mut self.host_subnets, subnet, host_subnet),
            },
            Change::Service { ip, service } => Change::Service {
                ip,
                service: put(&mut self.services, ip, service),
            },
            Change::Multicast { vnid, multicast } => Change::Multicast {
                vnid,
                multicast: put(&mut self.multicast, vnid, multicast),
            },
            Change::VxlanMulticast { remotes } => Change::VxlanMulticast {
                remotes: std::mem::replace(&mut self.vxlan_multicast, remotes),
            },
            Change::Egress { vnid, egress } => Change::Egress {
                vnid,
                egress: put(&mut self.egress, vnid, egress),
            },
            Change::Namespace { name, namespace } => Change::Namespace {
                namespace: put(&mut self.namespaces, name.clone(), namespace),
                name,
            },
            Change::NetPol { key, netpol } => Change::NetPol {
                netpol: put(&mut self.netpols, key.clone(), netpol.map(|b| *b)).map(Box::new),
                key,
            },
            Change::Node { name, node } => Change::Node {
                node: put(&mut self.nodes, name.clone(), node),
                name,
            },
            Change::AdminPolicy { key, policy } => Change::AdminPolicy {
                policy: put(&mut self.admin_policies, key.clone(), policy.map(|b| *b))
                    .map(Box::new),
                key,
            },
            Change::PortIntent { veth, intent } => Change::PortIntent {
                intent: put(&mut self.port_intents, veth.clone(), intent),
                veth,
            },
            Change::Replace { state } => Change::Replace {
                state: Box::new(std::mem::replace(self, *state)),
            },
        }
    }

    /// How many pods and services use `vnid` (the multitenant VNID rule's reference count).
    pub fn vnid_users(&self, vnid: Vnid) -> usize {
        let pods = self.pods.values().filter(|p| p.vnid == vnid).count();
        let services = self.services.values().filter(|s| s.vnid == vnid).count();
        pods + services
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ip: [u8; 4]) -> Pod {
        Pod {
            veth: Some("veth1".parse().unwrap()),
            ip: Ipv4Addr::from(ip),
            mac: "0a:58:0a:80:00:05".parse().unwrap(),
            sandbox: "ab".repeat(32).parse().unwrap(),
            vnid: Vnid::new(10).unwrap(),
            ofport: 3,
        }
    }

    #[test]
    fn apply_returns_the_undo() {
        let mut state = NodeState::default();
        let before = state.clone();
        let p = pod([10, 128, 0, 5]);
        let undo = state.apply(Change::LocalPod {
            key: "x/p".parse().unwrap(),
            pod: Some(p.clone()),
        });
        assert_eq!(state.pods.len(), 1);
        state.apply(undo);
        assert_eq!(state, before);
    }

    #[test]
    fn replace_undo_restores_everything() {
        let mut state = NodeState::default();
        let p = pod([10, 128, 0, 5]);
        state.apply(Change::LocalPod {
            key: "x/p".parse().unwrap(),
            pod: Some(p),
        });
        let before = state.clone();
        let undo = state.apply(Change::Replace {
            state: Box::default(),
        });
        assert!(state.pods.is_empty());
        state.apply(undo);
        assert_eq!(state, before);
    }

    #[test]
    fn a_state_written_before_the_networkpolicy_mode_still_loads() {
        let old = r#"{"setup":null,"pods":{},"host_subnets":{},"services":{},"multicast":{},
            "vxlan_multicast":[],"egress":{}}"#;
        let state: NodeState = serde_json::from_str(old).unwrap();
        assert_eq!(state, NodeState::default());
        // And a state without the mode's parts is written exactly as before.
        let text = serde_json::to_string(&state).unwrap();
        assert!(
            !text.contains("namespaces") && !text.contains("netpols"),
            "{text}"
        );
    }

    #[test]
    fn a_journal_from_before_port_intents_loads_with_none() {
        let old = r#"{"setup":null,"pods":{},"host_subnets":{},"services":{},"multicast":{},"vxlan_multicast":[],"egress":{}}"#;
        let state: NodeState = serde_json::from_str(old).unwrap();
        assert!(state.port_intents.is_empty());
        // And a state without intents writes what the old code reads.
        let text = serde_json::to_string(&state).unwrap();
        assert!(!text.contains("port_intents"), "{text}");
    }

    #[test]
    fn port_intents_round_trip_and_undo() {
        let veth: IfName = "veth1".parse().unwrap();
        let mut state = NodeState::default();
        let limited = PortIntent::Limited {
            qos_max_rate: Some(1_000_000),
            ingress_policing_kbps: 0,
        };
        let change = Change::PortIntent {
            veth: veth.clone(),
            intent: Some(limited),
        };
        let text = serde_json::to_string(&change).unwrap();
        assert_eq!(serde_json::from_str::<Change>(&text).unwrap(), change);
        let undo = state.apply(change);
        assert_eq!(state.port_intents.get(&veth), Some(&limited));
        state.apply(undo);
        assert_eq!(state, NodeState::default());
    }

    #[test]
    fn changes_round_trip_as_json() {
        let p = pod([10, 128, 0, 5]);
        let change = Change::LocalPod {
            key: "x/p".parse().unwrap(),
            pod: Some(p),
        };
        let text = serde_json::to_string(&change).unwrap();
        assert_eq!(serde_json::from_str::<Change>(&text).unwrap(), change);
    }
}
