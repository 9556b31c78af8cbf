//! The cluster admin's policy tiers (kubernetes-sigs/network-policy-api, v1alpha1):
//! AdminNetworkPolicy (priority 0–1000, Allow / Deny / Pass, judged before NetworkPolicy) and
//! BaselineAdminNetworkPolicy (the one object named `default`, Allow / Deny, judged after
//! NetworkPolicy, for pods no NetworkPolicy selects). `parse.rs` makes the validated
//! [`AdminPolicy`] from the object as JSON or YAML; the flows are `produce/admin.rs`'s.
//!
//! Semantics (the API's, per direction): the admin policies selecting the pod in priority
//! order, rules in list order, the first matching rule decides; Pass goes on to NetworkPolicy;
//! a pod no NetworkPolicy selects for that direction then meets the baseline; nothing matched
//! is allowed. Replies of an allowed connection are never judged.

pub mod parse;
#[cfg(test)]
pub(crate) mod reference;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::sdn::audit::AuditSet;
use crate::sdn::labels::Selector;
use crate::sdn::objects::L4;
use crate::value::Cidr;

pub use parse::parse_admin_policy;

/// The highest AdminNetworkPolicy priority the API allows.
pub const MAX_PRIORITY: u16 = 1000;
/// Rules per direction of one policy: the API's maxItems is 100; ofnode gives each
/// AdminNetworkPolicy priority a fixed band of 64 OpenFlow priorities per direction (so that a
/// priority change rewrites that policy's flows only), hence 64.
pub const MAX_RULES: usize = 64;
/// Peers in one rule, ports in one rule, networks in one peer: the API's maxItems.
pub const MAX_PEERS: usize = 100;
pub const MAX_PORTS: usize = 100;
pub const MAX_NETWORKS: usize = 25;
/// The name the one baseline must have.
pub const BASELINE_NAME: &str = "default";

/// Which tier a policy is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tier", rename_all = "snake_case")]
pub enum Tier {
    /// An AdminNetworkPolicy and its priority (lower first).
    Admin { priority: u16 },
    /// The BaselineAdminNetworkPolicy.
    Baseline,
}

impl Tier {
    /// The kind of object, as Kubernetes names it.
    pub fn kind(self) -> &'static str {
        match self {
            Tier::Admin { .. } => "AdminNetworkPolicy",
            Tier::Baseline => "BaselineAdminNetworkPolicy",
        }
    }

    /// Its short name, as `kubectl get anp` / `banp` and ofnode's list and trace name it.
    pub fn short(self) -> &'static str {
        match self {
            Tier::Admin { .. } => "anp",
            Tier::Baseline => "banp",
        }
    }
}

/// A validated admin policy of either tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminPolicy {
    pub name: String,
    #[serde(flatten)]
    pub tier: Tier,
    pub subject: Subject,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<AdminRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<AdminRule>,
    /// The verdicts of its rules audited (`ofnode.io/audit`).
    #[serde(default, skip_serializing_if = "AuditSet::is_empty")]
    pub audit: AuditSet,
}

impl AdminPolicy {
    /// Its key in the node state: `anp/NAME` or `banp/default`.
    pub fn key(&self) -> String {
        admin_key(self.tier.short(), &self.name)
    }
}

/// The key of an admin policy in the node state.
pub fn admin_key(short: &str, name: &str) -> String {
    format!("{short}/{name}")
}

/// The pods a policy applies to (never host-network ones: ofnode's pods are not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// Every pod of the namespaces the selector selects.
    Namespaces(Selector),
    /// The pods `pods` selects in the namespaces `namespaces` selects.
    Pods {
        namespaces: Selector,
        pods: Selector,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    Allow,
    Deny,
    Pass,
}

/// One rule: the first that matches a packet decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminRule {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub action: Action,
    pub peers: Vec<AdminPeer>,
    /// None: every port and protocol (and non-L4 traffic); Some: one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<AdminPort>>,
}

impl AdminRule {
    /// Its ports by number or range, as (protocol, first, last).
    pub fn numbered_ports(&self) -> Vec<(L4, u16, u16)> {
        let mut out: Vec<(L4, u16, u16)> = self
            .ports
            .iter()
            .flatten()
            .filter_map(|p| match p {
                AdminPort::Number { protocol, port } => Some((*protocol, *port, *port)),
                AdminPort::Range {
                    protocol,
                    start,
                    end,
                } => Some((*protocol, *start, *end)),
                AdminPort::Named(_) => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Its named ports, resolved on the pod a packet goes to.
    pub fn named_ports(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .ports
            .iter()
            .flatten()
            .filter_map(|p| match p {
                AdminPort::Named(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether it matches by port number or on every port (its numbered conjunction).
    pub fn has_numbered_part(&self) -> bool {
        self.ports.is_none() || !self.numbered_ports().is_empty()
    }
}

/// One entry of `from` / `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminPeer {
    /// Every pod of the namespaces the selector selects.
    Namespaces(Selector),
    Pods {
        namespaces: Selector,
        pods: Selector,
    },
    /// Egress only: the addresses of the nodes whose labels the selector selects (`{}`: all).
    Nodes(Selector),
    /// Egress only: destination networks (IPv6 ones are kept and match nothing in this IPv4
    /// data plane).
    Networks {
        ipv4: Vec<Cidr>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ipv6: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminPort {
    Number {
        protocol: L4,
        port: u16,
    },
    Range {
        protocol: L4,
        start: u16,
        end: u16,
    },
    /// A container port's name on the destination pod (any protocol it has under that name).
    Named(String),
}
