//! The cluster's objects as the store keeps them, beside the seed's own entities: what
//! selectors see of a pod (local or on another node).

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use crate::sdn::policy::networkpolicy::model::{Labels, L4};

/// What the node knows of a pod, on this node or another: what selectors and policies see.
/// A local pod's data-plane side (veth, MAC, OpenFlow port) is its attachment, apart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodInfo {
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Its addresses, sorted: none yet, an IPv4, an IPv6, or both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpAddr>,
    /// On this node: the pods policies are enforced for.
    #[serde(default)]
    pub local: bool,
    /// Its containers' named ports (what a policy's named port resolves to).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<NamedPort>,
}

impl PodInfo {
    /// Its IPv4 addresses: what the flows of this IPv4 data plane match.
    pub fn ipv4s(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.ips.iter().filter_map(|ip| match ip {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
    }

    /// Sorts and deduplicates the addresses (one spelling per set).
    pub fn normalized(mut self) -> PodInfo {
        self.ips.sort();
        self.ips.dedup();
        self.ports.sort();
        self.ports.dedup();
        self
    }
}

/// A container port with a name: `name` resolves to `port` over `protocol`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedPort {
    pub name: String,
    pub protocol: L4,
    pub port: u16,
}

/// A pod as the API lists it: its key and what the node knows of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownPod {
    pub pod: super::PodKey,
    #[serde(flatten)]
    pub info: PodInfo,
}

impl KnownPod {
    pub fn new(key: &super::PodKey, info: &PodInfo) -> KnownPod {
        KnownPod {
            pod: key.clone(),
            info: info.clone(),
        }
    }
}
