//! The cluster's objects as the node keeps them, beside the seed's own entities: namespaces
//! and what selectors see of a pod (on this node or another). A local pod's data-plane side
//! (veth, MAC, OpenFlow port) is its attachment, the seed's `Pod` (`types.rs`).

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::audit::AuditSet;
use super::labels::{check_dns_label, check_labels, check_port_name, Checked, FieldError, Labels};
use crate::value::Vnid;

/// The label every namespace has implicitly (Kubernetes ≥ 1.21), its value the name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A namespace: its VNID (reg0/tun_id across nodes) and labels (without the implicit one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Namespace {
    pub name: String,
    pub vnid: Vnid,
    #[serde(default)]
    pub labels: Labels,
    /// The verdicts its policies audit unless a policy says otherwise (`ofnode.io/audit`).
    #[serde(default, skip_serializing_if = "AuditSet::is_empty")]
    pub audit: AuditSet,
}

impl Namespace {
    /// Checks the name, VNID and labels; the implicit name label is dropped (a different value
    /// for it is refused), so the stored labels are the user's own.
    ///
    /// VNID 0 is refused: it is what the nodes' own traffic carries in reg0 (from tun0 locally,
    /// and other nodes' hosts over VXLAN), so a peer selecting such a namespace (`reg0=0`) would
    /// also admit every node's host. (openshift-sdn gives `default` VNID 0 and lets it admit
    /// host traffic on purpose; here the local node's own traffic is always admitted instead,
    /// and other hosts are peers like any other, allowed by ipBlock.)
    pub fn validated(mut self) -> Checked<Namespace> {
        check_dns_label("name", &self.name)?;
        if self.vnid == Vnid::GLOBAL {
            return Err(FieldError::new(
                "vnid",
                "0 is the VNID of the nodes' own traffic (tun0, other nodes' hosts): a \
                 namespace needs one from 1 to 16777215",
            ));
        }
        if let Some(value) = self.labels.remove(NAMESPACE_NAME_LABEL) {
            if value != self.name {
                return Err(FieldError::new(
                    format!("labels.{NAMESPACE_NAME_LABEL}"),
                    format!(
                        "is always the namespace's name {:?}, not {value:?}",
                        self.name
                    ),
                ));
            }
        }
        check_labels("labels", &self.labels)?;
        Ok(self)
    }

    /// One of its labels as selectors see them (the implicit name label included).
    pub fn label(&self, key: &str) -> Option<&str> {
        match key {
            NAMESPACE_NAME_LABEL => Some(&self.name),
            _ => self.labels.get(key).map(String::as_str),
        }
    }

    /// Its labels as selectors see them: the user's plus `kubernetes.io/metadata.name`.
    pub fn effective_labels(&self) -> Labels {
        let mut labels = self.labels.clone();
        labels.insert(NAMESPACE_NAME_LABEL.to_string(), self.name.clone());
        labels
    }
}

/// A transport protocol a policy or a container port names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum L4 {
    Tcp,
    Udp,
    Sctp,
}

impl L4 {
    pub fn name(self) -> &'static str {
        match self {
            L4::Tcp => "tcp",
            L4::Udp => "udp",
            L4::Sctp => "sctp",
        }
    }

    /// The protocol as Kubernetes spells it: "TCP", "UDP", "SCTP".
    pub fn from_kubernetes(name: &str) -> Option<L4> {
        match name {
            "TCP" => Some(L4::Tcp),
            "UDP" => Some(L4::Udp),
            "SCTP" => Some(L4::Sctp),
            _ => None,
        }
    }

    pub fn kubernetes_name(self) -> &'static str {
        match self {
            L4::Tcp => "TCP",
            L4::Udp => "UDP",
            L4::Sctp => "SCTP",
        }
    }
}

/// What the node knows of a pod, on this node or another: what selectors and policies see.
/// What admin policies' `nodes` peers see of a node of the cluster (its Node object): its
/// addresses (`status.addresses`) and labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeInfo {
    pub ips: Vec<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
}

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

/// `NAME=PORT[/PROTOCOL]` (TCP when none), as the CLI takes a container port.
impl std::str::FromStr for NamedPort {
    type Err = String;

    fn from_str(text: &str) -> Result<NamedPort, String> {
        let shape = || format!("{text:?}: expected NAME=PORT[/TCP|UDP|SCTP], e.g. http=8080/TCP");
        let (name, rest) = text.split_once('=').ok_or_else(shape)?;
        if name.is_empty() {
            return Err(shape());
        }
        let (port, protocol) = match rest.split_once('/') {
            Some((port, protocol)) => (port, L4::from_kubernetes(protocol).ok_or_else(shape)?),
            None => (rest, L4::Tcp),
        };
        let port = port.parse().map_err(|_| shape())?;
        Ok(NamedPort {
            name: name.to_string(),
            protocol,
            port,
        })
    }
}

impl std::fmt::Display for NamedPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let protocol = self.protocol.kubernetes_name();
        write!(f, "{}={}/{protocol}", self.name, self.port)
    }
}

/// A pod's named ports as Kubernetes allows them: IANA service names, ports 1-65535, each
/// name once per protocol.
pub fn check_named_ports(path: &str, ports: &[NamedPort]) -> Checked<()> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = format!("{path}[{i}]");
        check_port_name(&format!("{at}.name"), &port.name)?;
        if port.port == 0 {
            return Err(FieldError::new(
                format!("{at}.port"),
                "0 is not a port (1-65535)",
            ));
        }
        if !seen.insert((&port.name, port.protocol)) {
            return Err(FieldError::new(
                format!("{at}.name"),
                format!(
                    "{:?} names two {} ports",
                    port.name,
                    port.protocol.kubernetes_name()
                ),
            ));
        }
    }
    Ok(())
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
