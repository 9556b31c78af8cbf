//! The JSON bodies of the control API, shared by the server and the CLI client.
//!
//! Requests that the node takes as they are (setup, pod add, host subnet, service) are the node's
//! own request types; the rest are small envelopes defined here.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::sdn::types::{Cidr, EgressNetworkPolicy, IfName, SandboxId, Vnid};

pub const PREFIX: &str = "/v1";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodUpdate {
    pub sandbox: SandboxId,
    pub vnid: Vnid,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodDel {
    pub veth: IfName,
    pub ip: Ipv4Addr,
}

/// Rates in bits per second, as the seed's SetPodBandwidth takes them; absent or 0 clears a limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodBandwidth {
    pub veth: IfName,
    #[serde(default)]
    pub ingress_bps: Option<u64>,
    #[serde(default)]
    pub egress_bps: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSubnetDel {
    pub host_ip: Ipv4Addr,
    pub subnet: Cidr,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceDel {
    pub ip: Ipv4Addr,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastLocal {
    pub vnid: Vnid,
    pub enabled: bool,
    #[serde(default)]
    pub ofports: Vec<u16>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastVxlan {
    #[serde(default)]
    pub remotes: Vec<Ipv4Addr>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSet {
    pub vnid: Vnid,
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub policies: Vec<EgressNetworkPolicy>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodAdded {
    pub ofport: u16,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flows {
    pub flows: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnusedVnids {
    pub vnids: Vec<Vnid>,
}

/// Every error the API returns: the HTTP status says its class, `error` what happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

/// The body of a success that carries nothing else.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ok {
    pub ok: bool,
}
