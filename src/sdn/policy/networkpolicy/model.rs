//! Validated NetworkPolicy objects as the node keeps them (`parse.rs` makes them from kubectl's
//! JSON; labels and selectors are `labels.rs`'s, namespaces `objects.rs`').

use serde::{Deserialize, Serialize};

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

/// A protocol and, optionally, an inclusive port range (`first..=last`; one port when equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    pub protocol: L4,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(u16, u16)>,
}
