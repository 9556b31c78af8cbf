//! The node's validated inputs: everything a user, the CLI or the API hands the node controller.
//!
//! Each type checks its value once, when it is made (parsing text or deserialising JSON), so that
//! the operations never see an invalid service port, policy or setup — bad input is refused
//! before anything is sent to the switch or OVSDB. The values shared with the other layers (MAC
//! addresses, interface names, VNIDs, CIDRs, sandbox ids) are `crate::value`'s.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::value::text_serde;
pub use crate::value::{parse_ipv4, Cidr, IfName, InvalidInput, MacAddr, PodKey, SandboxId, Vnid};

/// A transport protocol a service port can use. The seed refuses anything but TCP and UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl FromStr for Protocol {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        match text.to_ascii_lowercase().as_str() {
            "tcp" => Ok(Protocol::Tcp),
            "udp" => Ok(Protocol::Udp),
            _ => Err(InvalidInput::new(
                "protocol",
                text,
                "unhandled protocol; only TCP and UDP are supported",
            )),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        })
    }
}
text_serde!(Protocol);

/// A service port, written `PROTO/PORT` (e.g. `tcp/80`), port 1–65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServicePort {
    pub protocol: Protocol,
    pub port: u16,
}

impl FromStr for ServicePort {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let (protocol, port) = text.split_once('/').ok_or_else(|| {
            InvalidInput::new("service port", text, "expected PROTO/PORT, e.g. tcp/80")
        })?;
        let protocol = protocol.parse()?;
        let port = match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(InvalidInput::new(
                    "service port",
                    text,
                    "port must be a number from 1 to 65535",
                ))
            }
        };
        Ok(ServicePort { protocol, port })
    }
}

impl fmt::Display for ServicePort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.port)
    }
}
text_serde!(ServicePort);

/// One EgressNetworkPolicy, as OpenShift wrote it:
/// `{"namespace":"ns1","name":"p1","spec":{"egress":[{"type":"Allow","to":{"cidrSelector":"…"}}]}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressNetworkPolicy {
    pub namespace: String,
    pub name: String,
    pub spec: EgressNetworkPolicySpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressNetworkPolicySpec {
    pub egress: Vec<EgressRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressRule {
    #[serde(rename = "type")]
    pub rule_type: EgressRuleType,
    pub to: EgressPeer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EgressRuleType {
    Allow,
    Deny,
}

/// Exactly one of a CIDR or a DNS name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressPeer {
    #[serde(
        rename = "cidrSelector",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cidr_selector: Option<Cidr>,
    #[serde(rename = "dnsName", default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<String>,
}

impl EgressNetworkPolicy {
    /// Checks what serde cannot: each rule names exactly one peer, and DNS names are names.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let who = format!("{}:{}", self.namespace, self.name);
        for (i, rule) in self.spec.egress.iter().enumerate() {
            match (&rule.to.cidr_selector, &rule.to.dns_name) {
                (Some(_), None) => {}
                (None, Some(name)) => validate_dns_name(name).map_err(|reason| {
                    InvalidInput::new(
                        "EgressNetworkPolicy",
                        who.clone(),
                        format!("rule {i}: {reason}"),
                    )
                })?,
                _ => {
                    return Err(InvalidInput::new(
                        "EgressNetworkPolicy",
                        who,
                        format!("rule {i}: `to` must have exactly one of cidrSelector or dnsName"),
                    ))
                }
            }
        }
        Ok(())
    }
}

/// An egress rule's `dnsName`: a host name (either case, an optional trailing dot).
fn validate_dns_name(name: &str) -> Result<(), String> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    match crate::value::dns::name_error(trimmed, crate::value::dns::Case::Any) {
        None => Ok(()),
        Some(why) => Err(format!("dnsName {why}")),
    }
}

/// The policy mode of the node (the seed's policy plugins, see `policy/`); its plugin id is part of
/// the version note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Subnet,
    Multitenant,
    NetworkPolicy,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Subnet, Mode::Multitenant, Mode::NetworkPolicy];

    /// The name `--mode` and the API take.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Subnet => "subnet",
            Mode::Multitenant => "multitenant",
            Mode::NetworkPolicy => "networkpolicy",
        }
    }
}

impl FromStr for Mode {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
                InvalidInput::new(
                    "mode",
                    text,
                    format!("expected one of {}", names.join(", ")),
                )
            })
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The node's network parameters (the seed's SetupOVS/SetupSDN arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupRequest {
    pub cluster_network: Cidr,
    pub service_network: Cidr,
    pub local_subnet: Cidr,
    pub gateway: Ipv4Addr,
    #[serde(default)]
    pub mode: Mode,
}

impl SetupRequest {
    /// Checks how the networks relate: the gateway is a host of the local subnet, the local
    /// subnet lies inside the cluster network, and the service network is apart from it.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let invalid = |reason: String| InvalidInput::new("setup request", self.summary(), reason);
        if !self.local_subnet.contains(self.gateway) || self.gateway == self.local_subnet.network()
        {
            return Err(invalid(format!(
                "gateway {} must be a host address inside the local subnet {}",
                self.gateway, self.local_subnet
            )));
        }
        if !self.cluster_network.contains(self.local_subnet.network())
            || self.local_subnet.prefix() < self.cluster_network.prefix()
        {
            return Err(invalid(format!(
                "local subnet {} must lie inside the cluster network {}",
                self.local_subnet, self.cluster_network
            )));
        }
        if self.service_network.overlaps(&self.cluster_network) {
            return Err(invalid(format!(
                "service network {} overlaps the cluster network {}",
                self.service_network, self.cluster_network
            )));
        }
        Ok(())
    }

    fn summary(&self) -> String {
        format!(
            "cluster {} service {} local {} gateway {} mode {}",
            self.cluster_network, self.service_network, self.local_subnet, self.gateway, self.mode
        )
    }
}

/// A pod to attach (the seed's SetUpPod arguments), named as Kubernetes names it. The API's
/// body of it is `api::wire::PodAdd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAdd {
    /// `namespace/name`: the pod's key in every later operation.
    pub pod: PodKey,
    pub veth: IfName,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub sandbox: SandboxId,
    /// 0 (in the networkpolicy mode, the namespace's VNID) unless given.
    pub vnid: Vnid,
    /// Its labels (the networkpolicy mode's selectors see them; refused in the others).
    pub labels: std::collections::BTreeMap<String, String>,
}

/// An attached pod: the add request plus the OpenFlow port OVS gave its veth. `veth` is None for
/// a pod adopted from the switch's flows (found through its note), whose veth name is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth: Option<IfName>,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub sandbox: SandboxId,
    pub vnid: Vnid,
    pub ofport: u16,
}

/// Another node's pod subnet, reached over VXLAN (the seed's HostSubnet). `fixed_vnid` is the
/// fixed-VNID annotation; `vtep_mac` is kept for the VXLAN device (not used by flows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSubnet {
    pub host_ip: Ipv4Addr,
    pub subnet: Cidr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_vnid: Option<Vnid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep_mac: Option<MacAddr>,
}

/// A service's cluster IP, its VNID and its ports (the seed's AddServiceRules arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    pub ip: Ipv4Addr,
    pub vnid: Vnid,
    pub ports: Vec<ServicePort>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_ports() {
        let p: ServicePort = "TCP/80".parse().unwrap();
        assert_eq!(p.to_string(), "tcp/80");
        assert!("sctp/80".parse::<ServicePort>().is_err());
        assert!("tcp/0".parse::<ServicePort>().is_err());
        assert!("tcp/65536".parse::<ServicePort>().is_err());
    }

    #[test]
    fn egress_policy_json() {
        let text = r#"{"namespace":"ns1","name":"p1","spec":
            {"egress":[{"type":"Allow","to":{"cidrSelector":"192.168.0.0/16"}},
                       {"type":"Deny","to":{"dnsName":"example.com"}}]}}"#;
        let policy: EgressNetworkPolicy = serde_json::from_str(text).unwrap();
        policy.validate().unwrap();
        assert_eq!(policy.spec.egress.len(), 2);
        let both = r#"{"namespace":"a","name":"b","spec":{"egress":[{"type":"Deny","to":{}}]}}"#;
        let policy: EgressNetworkPolicy = serde_json::from_str(both).unwrap();
        assert!(policy.validate().is_err());
        let bad_type = r#"{"namespace":"a","name":"b","spec":{"egress":[{"type":"Maybe","to":{"dnsName":"x"}}]}}"#;
        assert!(serde_json::from_str::<EgressNetworkPolicy>(bad_type).is_err());
    }
}
