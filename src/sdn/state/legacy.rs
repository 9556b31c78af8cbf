//! Reading what older ofnodes wrote: states and journal changes from before pods had names.
//! Then the node keyed local pods by address (`pods`, with `pod_meta` for their namespace and
//! labels) and other nodes' pods by address too (`remote_pods`). They load as pods named
//! `NAMESPACE/ip-A-B-C-D` (namespace `default` for a local pod that had none), so a node
//! upgraded in place keeps every pod, flow and policy; new pods come with their own names.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::{Change, EgressState, LocalMulticast, NodeState, PortIntent};
use crate::sdn::labels::Labels;
use crate::sdn::objects::{Namespace, NodeInfo, PodInfo};
use crate::sdn::policy::admin::AdminPolicy;
use crate::sdn::policy::networkpolicy::StoredNetPol;
use crate::sdn::types::{HostSubnet, Pod, Service, SetupRequest};
use crate::value::PodKey;
use crate::value::{Cidr, IfName, Vnid};

/// The namespace of a legacy local pod that had none.
const DEFAULT_NAMESPACE: &str = "default";

/// The name a pod known only by its address gets.
pub fn legacy_key(namespace: Option<&str>, ip: Ipv4Addr) -> Result<PodKey, String> {
    let name = format!("ip-{}", ip.to_string().replace('.', "-"));
    PodKey::new(namespace.unwrap_or(DEFAULT_NAMESPACE), &name).map_err(|e| e.to_string())
}

#[derive(Debug, Deserialize)]
pub struct LegacyMeta {
    namespace: String,
    #[serde(default)]
    labels: Labels,
}

#[derive(Debug, Deserialize)]
pub struct LegacyRemotePod {
    ip: Ipv4Addr,
    namespace: String,
    #[serde(default)]
    labels: Labels,
}

/// A state as any ofnode wrote it.
#[derive(Debug, Deserialize)]
pub struct RecordedState {
    #[serde(default)]
    setup: Option<SetupRequest>,
    /// By pod key now; by address before.
    #[serde(default)]
    pods: BTreeMap<String, Pod>,
    #[serde(default)]
    host_subnets: BTreeMap<Cidr, HostSubnet>,
    #[serde(default)]
    services: BTreeMap<Ipv4Addr, Service>,
    #[serde(default)]
    multicast: BTreeMap<Vnid, LocalMulticast>,
    #[serde(default)]
    vxlan_multicast: Vec<Ipv4Addr>,
    #[serde(default)]
    egress: BTreeMap<Vnid, EgressState>,
    #[serde(default)]
    namespaces: BTreeMap<String, Namespace>,
    #[serde(default)]
    pod_infos: BTreeMap<PodKey, PodInfo>,
    #[serde(default)]
    pod_meta: BTreeMap<Ipv4Addr, LegacyMeta>,
    #[serde(default)]
    remote_pods: BTreeMap<Ipv4Addr, LegacyRemotePod>,
    #[serde(default)]
    netpols: BTreeMap<String, StoredNetPol>,
    #[serde(default)]
    admin_policies: BTreeMap<String, AdminPolicy>,
    #[serde(default)]
    nodes: BTreeMap<String, NodeInfo>,
    #[serde(default)]
    port_intents: BTreeMap<IfName, PortIntent>,
}

fn local_info(ip: Ipv4Addr, labels: Labels) -> PodInfo {
    PodInfo {
        labels,
        ips: vec![IpAddr::V4(ip)],
        local: true,
        ports: Vec::new(),
    }
}

impl TryFrom<RecordedState> for NodeState {
    type Error = String;

    fn try_from(recorded: RecordedState) -> Result<NodeState, String> {
        let mut state = NodeState {
            setup: recorded.setup,
            pods: BTreeMap::new(),
            host_subnets: recorded.host_subnets,
            services: recorded.services,
            multicast: recorded.multicast,
            vxlan_multicast: recorded.vxlan_multicast,
            egress: recorded.egress,
            namespaces: recorded.namespaces,
            pod_infos: recorded.pod_infos,
            netpols: recorded.netpols,
            admin_policies: recorded.admin_policies,
            nodes: recorded.nodes,
            port_intents: recorded.port_intents,
        };
        let mut meta = recorded.pod_meta;
        for (key, pod) in recorded.pods {
            if let Ok(key) = key.parse::<PodKey>() {
                state.pods.insert(key, pod);
                continue;
            }
            let ip: Ipv4Addr = key
                .parse()
                .map_err(|_| format!("pod key {key:?} is neither NAMESPACE/NAME nor an address"))?;
            let pod_meta = meta.remove(&ip);
            let key = legacy_key(pod_meta.as_ref().map(|m| m.namespace.as_str()), ip)?;
            if let Some(m) = pod_meta {
                state
                    .pod_infos
                    .insert(key.clone(), local_info(ip, m.labels));
            }
            state.pods.insert(key, pod);
        }
        for (ip, remote) in recorded.remote_pods {
            let key = legacy_key(Some(&remote.namespace), ip)?;
            let info = PodInfo {
                local: false,
                ..local_info(remote.ip, remote.labels)
            };
            state.pod_infos.insert(key, info);
        }
        Ok(state)
    }
}

/// A journal change as any ofnode wrote it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordedChange {
    Current(Change),
    Legacy(LegacyChange),
}

/// The changes of pods by address.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LegacyChange {
    Pod {
        ip: Ipv4Addr,
        pod: Option<Pod>,
    },
    PodMeta {
        ip: Ipv4Addr,
        meta: Option<LegacyMetaOwned>,
    },
    RemotePod {
        ip: Ipv4Addr,
        pod: Option<LegacyRemoteOwned>,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LegacyMetaOwned {
    namespace: String,
    #[serde(default)]
    labels: Labels,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LegacyRemoteOwned {
    ip: Ipv4Addr,
    namespace: String,
    #[serde(default)]
    labels: Labels,
}

impl RecordedChange {
    /// The changes of today that do what this one did to `state` (the state it applies to:
    /// a legacy change names a pod by address, which the state knows the key of).
    pub fn into_changes(self, state: &NodeState) -> Result<Vec<Change>, String> {
        let legacy = match self {
            RecordedChange::Current(change) => return Ok(vec![change]),
            RecordedChange::Legacy(legacy) => legacy,
        };
        let local_key = |ip: Ipv4Addr| {
            state
                .pods
                .iter()
                .find(|(_, pod)| pod.ip == ip)
                .map(|(key, _)| key.clone())
        };
        Ok(match legacy {
            LegacyChange::Pod { ip, pod } => {
                let key = match local_key(ip) {
                    Some(key) => key,
                    None => legacy_key(None, ip)?,
                };
                vec![Change::LocalPod { key, pod }]
            }
            LegacyChange::PodMeta { ip, meta: None } => match local_key(ip) {
                Some(key) => vec![Change::PodInfo { key, info: None }],
                None => Vec::new(),
            },
            LegacyChange::PodMeta { ip, meta: Some(m) } => {
                // The pod's key takes the namespace it is now known to have.
                let key = legacy_key(Some(&m.namespace), ip)?;
                let info = Some(local_info(ip, m.labels));
                match local_key(ip).filter(|old| *old != key) {
                    Some(old) => {
                        let pod = state.pods.get(&old).cloned();
                        vec![
                            Change::LocalPod {
                                key: old,
                                pod: None,
                            },
                            Change::LocalPod {
                                key: key.clone(),
                                pod,
                            },
                            Change::PodInfo { key, info },
                        ]
                    }
                    None => vec![Change::PodInfo { key, info }],
                }
            }
            LegacyChange::RemotePod { ip, pod } => {
                let existing = state
                    .pod_infos
                    .iter()
                    .find(|(key, info)| {
                        !info.local
                            && info.ips.contains(&IpAddr::V4(ip))
                            && key.name().starts_with("ip-")
                    })
                    .map(|(key, _)| key.clone());
                match pod {
                    Some(r) => {
                        let key = legacy_key(Some(&r.namespace), ip)?;
                        let info = PodInfo {
                            local: false,
                            ..local_info(r.ip, r.labels)
                        };
                        let mut changes: Vec<Change> = existing
                            .filter(|old| *old != key)
                            .map(|old| Change::PodInfo {
                                key: old,
                                info: None,
                            })
                            .into_iter()
                            .collect();
                        changes.push(Change::PodInfo {
                            key,
                            info: Some(info),
                        });
                        changes
                    }
                    None => existing
                        .map(|key| Change::PodInfo { key, info: None })
                        .into_iter()
                        .collect(),
                }
            }
        })
    }
}

/// Applies changes as any ofnode recorded them to `state`, in order.
pub fn replay(state: &mut NodeState, changes: Vec<RecordedChange>) -> Result<(), String> {
    for recorded in changes {
        for change in recorded.into_changes(state)? {
            state.apply(change);
        }
    }
    Ok(())
}
