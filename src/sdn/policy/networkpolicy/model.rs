//! Validated NetworkPolicy objects as the node keeps them (`parse.rs` makes them from kubectl's
//! JSON; labels and selectors are `labels.rs`'s, namespaces `objects.rs`').

use serde::{Deserialize, Serialize};

use crate::sdn::audit::AuditSet;
use crate::sdn::labels::Selector;
use crate::sdn::objects::L4;
use crate::value::Cidr;

/// A validated NetworkPolicy. `ingress` (`egress`) is Some exactly when its policyTypes has
/// Ingress (Egress); an empty list then isolates without allowing anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetPol {
    pub namespace: String,
    pub name: String,
    pub pod_selector: Selector,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<Rule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<Rule>>,
    /// Its `ofnode.io/audit` annotation (None: its namespace's setting applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSet>,
}

impl NetPol {
    /// `Ingress`, `Egress`, as policyTypes (after defaulting) lists them.
    pub fn policy_types(&self) -> Vec<&'static str> {
        let mut types = Vec::new();
        if self.ingress.is_some() {
            types.push("Ingress");
        }
        if self.egress.is_some() {
            types.push("Egress");
        }
        types
    }
}

/// One ingress or egress rule: `peers` None = every source/destination; `ports` empty = every
/// port and protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<Peer>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
}

impl Rule {
    /// Its ports by number (or protocol alone).
    pub fn numbered_ports(&self) -> impl Iterator<Item = &Port> {
        self.ports.iter().filter(|p| p.name.is_none())
    }

    /// Its named ports: (name, protocol), each resolved on the pod a packet goes to.
    pub fn named_ports(&self) -> Vec<(String, L4)> {
        let mut named: Vec<(String, L4)> = self
            .ports
            .iter()
            .filter_map(|p| Some((p.name.clone()?, p.protocol)))
            .collect();
        named.sort();
        named.dedup();
        named
    }

    /// Whether it allows anything by port number or on every port (the conjunction of
    /// ports as a dimension of their own).
    pub fn has_numbered_part(&self) -> bool {
        self.ports.is_empty() || self.numbered_ports().next().is_some()
    }

    /// How many conjunctions it is: one for its numbered ports (or every port), one for its
    /// named ports (whose numbers differ from pod to pod).
    pub fn conjunctions(&self) -> usize {
        usize::from(self.has_numbered_part()) + usize::from(!self.named_ports().is_empty())
    }
}

/// One entry of `from`/`to`. Absent selectors are None; `{}` is an empty [`Selector`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Peer {
    Select {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pods: Option<Selector>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespaces: Option<Selector>,
    },
    Block {
        cidr: Cidr,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        except: Vec<Cidr>,
    },
    /// An IPv6 ipBlock: accepted, and matches nothing in this IPv4 data plane.
    Ipv6Block { cidr: String },
}

/// A protocol and, optionally, an inclusive port range (`first..=last`; one port when equal)
/// or the name of a container port (resolved on the pod a packet goes to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    pub protocol: L4,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(u16, u16)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
