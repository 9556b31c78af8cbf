//! The control API's routes and JSON bodies, written once for the server, the CLI and the CNI
//! plugin.
//!
//! Bodies the node takes as they are (setup, host subnet, service) are the node's own input
//! types, re-exported here; the rest are defined here. The CNI plugin's words — the pod it
//! adds ([`PodAdd`]) and the pod it checks ([`PodStatus`]) — are the API's own, converted to
//! and from the node's at the server.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

pub use crate::cluster::ClusterStatus;
use crate::sdn;
pub use crate::sdn::core::explain::{Explanation, PortProto};
pub use crate::sdn::counters::PodCounters;
pub use crate::sdn::rule_counters::{RuleCounters, RuleSnapshot};
pub use crate::sdn::{
    AdminSummary, KnownPod, LabelEdit, Labels, NamedPort, Namespace, NetPolSummary, Pod, PodInfo,
    PodKey, L4,
};
pub use crate::sdn::{
    EgressNetworkPolicy, HostSubnet, Service, SetupOutcome, SetupRequest, Status,
};
pub use crate::trace::{Trace, TraceQuery};
use crate::value::{Cidr, IfName, MacAddr, SandboxId, Vnid};

/// The paths of the API (all under `/v1` but the metrics).
pub mod route {
    /// POST [`super::SetupRequest`] → [`super::SetupReply`].
    pub const SETUP: &str = "/v1/setup";
    /// GET → [`super::StatusReply`].
    pub const STATUS: &str = "/v1/status";
    /// POST [`super::PodAdd`] → [`super::PodAdded`]; DELETE [`super::PodDel`];
    /// GET `?pod=NS/NAME` ([`super::PodQuery`]) → [`super::PodStatus`]; GET → [`super::Pods`].
    pub const PODS: &str = "/v1/pods";
    /// POST [`super::PodUpdate`].
    pub const POD_UPDATE: &str = "/v1/pods/update";
    /// POST [`super::PodBandwidth`].
    pub const POD_BANDWIDTH: &str = "/v1/pods/bandwidth";
    /// POST [`super::HostSubnet`]; DELETE [`super::HostSubnetDel`].
    pub const HOST_SUBNETS: &str = "/v1/hostsubnets";
    /// POST [`super::Service`]; DELETE [`super::ServiceDel`].
    pub const SERVICES: &str = "/v1/services";
    /// POST [`super::MulticastLocal`].
    pub const MULTICAST_LOCAL: &str = "/v1/multicast/local";
    /// POST [`super::MulticastVxlan`].
    pub const MULTICAST_VXLAN: &str = "/v1/multicast/vxlan";
    /// POST [`super::EgressSet`].
    pub const EGRESS: &str = "/v1/egress";
    /// GET → [`super::UnusedVnids`].
    pub const UNUSED_VNIDS: &str = "/v1/vnids/unused";
    /// GET `?table=N` ([`super::FlowsQuery`]) → [`super::Flows`].
    pub const FLOWS: &str = "/v1/flows";
    /// GET `?from=POD&to=IP&proto=tcp|udp|icmp&dport=N` ([`super::TraceQuery`]) →
    /// [`super::Trace`].
    pub const TRACE: &str = "/v1/trace";
    /// GET → Prometheus text.
    pub const METRICS: &str = "/metrics";
    /// POST [`super::Namespace`]; DELETE [`super::NamespaceDel`]; GET → [`super::Namespaces`].
    pub const NAMESPACES: &str = "/v1/namespaces";
    /// POST [`super::NamespaceLabels`].
    pub const NAMESPACE_LABELS: &str = "/v1/namespaces/labels";
    /// POST [`super::PodLabels`].
    pub const POD_LABELS: &str = "/v1/pods/labels";
    /// POST [`super::PodPorts`].
    pub const POD_PORTS: &str = "/v1/pods/ports";
    /// POST [`super::KnownPod`]; DELETE [`super::RemotePodDel`]; GET → [`super::RemotePods`].
    pub const REMOTE_PODS: &str = "/v1/remote-pods";
    /// POST one `networking.k8s.io/v1` NetworkPolicy as `kubectl get -o json` prints it;
    /// DELETE [`super::NetPolDel`]; GET `[?stats=true]` ([`super::NetPolsQuery`]) →
    /// [`super::NetPols`] (with every policy rule's counters, asked of the switch, when
    /// `stats`).
    pub const NETPOLS: &str = "/v1/netpols";
    /// GET `?from=NS/NAME&to=NS/NAME|IP&port=PORT/PROTO` ([`super::ExplainQuery`]) →
    /// [`super::Explanation`].
    pub const NETPOL_EXPLAIN: &str = "/v1/netpols/explain";
    /// POST one `policy.networking.k8s.io/v1alpha1` AdminNetworkPolicy or
    /// BaselineAdminNetworkPolicy, as JSON or YAML; DELETE [`super::AdminPolicyDel`];
    /// GET → [`super::AdminPolicies`].
    pub const ADMIN_POLICIES: &str = "/v1/admin-policies";
    /// POST [`super::ClusterNode`]; DELETE [`super::ClusterNodeDel`]; GET → [`super::ClusterNodes`].
    pub const NODES: &str = "/v1/nodes";
}

/// A pod to attach (the CNI plugin's ADD; the seed's SetUpPod arguments), named as Kubernetes
/// names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodAdd {
    /// `namespace/name`: the pod's key in every later operation.
    pub pod: PodKey,
    pub veth: IfName,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub sandbox: SandboxId,
    /// Absent: 0 (in the networkpolicy mode, the namespace's VNID).
    #[serde(default)]
    pub vnid: Vnid,
    /// Its labels (the networkpolicy mode's selectors see them; refused in the others).
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
}

impl From<PodAdd> for sdn::PodAdd {
    fn from(p: PodAdd) -> sdn::PodAdd {
        sdn::PodAdd {
            pod: p.pod,
            veth: p.veth,
            ip: p.ip,
            mac: p.mac,
            sandbox: p.sandbox,
            vnid: p.vnid,
            labels: p.labels,
        }
    }
}

impl From<sdn::PodAdd> for PodAdd {
    fn from(p: sdn::PodAdd) -> PodAdd {
        PodAdd {
            pod: p.pod,
            veth: p.veth,
            ip: p.ip,
            mac: p.mac,
            sandbox: p.sandbox,
            vnid: p.vnid,
            labels: p.labels,
        }
    }
}

/// A pod as the node holds it, checked against the switch and OVSDB (the pod lookup, the CNI
/// plugin's CHECK).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodStatus {
    pub pod: Pod,
    /// Its veth is a port of the bridge (false when the veth name is unknown).
    pub port: bool,
    /// Its flows that the switch does not hold exactly, as `ovs-ofctl dump-flows` prints them;
    /// empty when all are in.
    pub missing_flows: Vec<String>,
    /// Its traffic at the last counter poll; absent when counters are off or it has not been
    /// polled yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<PodCounters>,
}

impl From<sdn::PodStatus> for PodStatus {
    fn from(s: sdn::PodStatus) -> PodStatus {
        PodStatus {
            pod: s.pod,
            port: s.port,
            missing_flows: s.missing_flows,
            counters: s.counters,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetupReply {
    pub outcome: SetupOutcome,
}

/// The node's status, with the cluster view when the node is a member of one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReply {
    #[serde(flatten)]
    pub node: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
    /// The node's following of a Kubernetes API server, when it has `[kubernetes]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<crate::kube::KubeStatus>,
}

/// Which pod to show; none: every pod of the node.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodQuery {
    #[serde(default)]
    pub pod: Option<PodKey>,
}

/// The pods of the node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pods {
    pub pods: Vec<LocalPod>,
}

/// A pod of the node: its key and attachment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalPod {
    pub pod: PodKey,
    #[serde(flatten)]
    pub attachment: Pod,
}

/// The seed's UpdatePod; `sandbox` lets the node take over a pod it does not know from the
/// note on its flows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodUpdate {
    pub pod: PodKey,
    pub vnid: Vnid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxId>,
}

/// The seed's TearDownPod; `veth` is removed from the bridge even when the node does not
/// know the pod.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodDel {
    pub pod: PodKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth: Option<IfName>,
}

/// Rates in bits per second, as the seed's SetPodBandwidth takes them; absent or 0 clears a limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodBandwidth {
    pub pod: PodKey,
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
#[serde(deny_unknown_fields)]
pub struct FlowsQuery {
    pub table: Option<u8>,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceDel {
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Namespaces {
    pub namespaces: Vec<Namespace>,
}

/// Sets and removes a pod's labels (of this node or another), keeping the others.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodLabels {
    pub pod: PodKey,
    #[serde(flatten)]
    pub edit: LabelEdit,
}

/// Sets a pod's named container ports (of this node or another), replacing the old ones.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodPorts {
    pub pod: PodKey,
    pub ports: Vec<NamedPort>,
}

/// Sets and removes a namespace's labels, keeping the others and its VNID.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceLabels {
    pub name: String,
    #[serde(flatten)]
    pub edit: LabelEdit,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemotePodDel {
    pub pod: PodKey,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemotePods {
    pub remote_pods: Vec<KnownPod>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetPolDel {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetPolsQuery {
    /// Also dump every policy rule's counters from the switch (all tiers).
    #[serde(default)]
    pub stats: bool,
}

/// `netpol explain`'s question: a connection from pod `from` to `to` (a pod `NS/NAME` or an
/// IPv4 address) on `port` (`80/tcp`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainQuery {
    pub from: PodKey,
    pub to: String,
    pub port: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetPols {
    pub netpols: Vec<NetPolSummary>,
    /// Every policy rule's packets and bytes (admin tiers, NetworkPolicy and its isolation,
    /// baseline), in the order the tiers judge; present when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_stats: Option<RuleSnapshot>,
}

/// Which admin policy to delete: `kind` is `anp` or `banp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminPolicyDel {
    pub kind: AdminKind,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdminKind {
    Anp,
    Banp,
}

impl AdminKind {
    pub fn short(self) -> &'static str {
        match self {
            AdminKind::Anp => "anp",
            AdminKind::Banp => "banp",
        }
    }
}

/// A node of the cluster as admin policies' node peers see it (its Node object's addresses
/// and labels).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterNode {
    pub name: String,
    pub ips: Vec<Ipv4Addr>,
    #[serde(default)]
    pub labels: Labels,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterNodeDel {
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterNodes {
    pub nodes: Vec<ClusterNode>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdminPolicies {
    pub admin_policies: Vec<AdminSummary>,
}
