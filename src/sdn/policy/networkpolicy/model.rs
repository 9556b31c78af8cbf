//! The NetworkPolicy mode's inputs as the node state keeps them: namespaces, pod labels, remote
//! pods, and validated NetworkPolicy objects (`parse.rs` makes them from kubectl's JSON; the
//! names and labels are checked by `names.rs`). The flows are computed from these.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::names::{check_dns_label, check_labels};
use crate::value::{Cidr, Vnid};

/// Labels of a namespace or pod.
pub type Labels = BTreeMap<String, String>;

/// The label every namespace has implicitly (Kubernetes ≥ 1.21), its value the name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Why an input of the mode was refused: the field (a JSON path) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct NetPolError {
    pub path: String,
    pub reason: String,
}

impl NetPolError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> NetPolError {
        NetPolError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

pub(super) type Checked<T> = Result<T, NetPolError>;

/// A namespace: its VNID (reg0/tun_id across nodes) and labels (without the implicit one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Namespace {
    pub name: String,
    pub vnid: Vnid,
    #[serde(default)]
    pub labels: Labels,
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
            return Err(NetPolError::new(
                "vnid",
                "0 is the VNID of the nodes' own traffic (tun0, other nodes' hosts): a \
                 namespace needs one from 1 to 16777215",
            ));
        }
        if let Some(value) = self.labels.remove(NAMESPACE_NAME_LABEL) {
            if value != self.name {
                return Err(NetPolError::new(
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
}

/// A protocol and, optionally, an inclusive port range (`first..=last`; one port when equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    pub protocol: L4,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(u16, u16)>,
}

/// A label selector: matchLabels AND every matchExpression. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: Labels,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Expression>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Expression {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether labels looked up by `label` (key → value) are selected: for label sets that
    /// are not one map (a namespace's own labels plus its implicit name label).
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| label(k) == Some(v.as_str()))
            && self
                .match_expressions
                .iter()
                .all(|e| e.matches(label(&e.key)))
    }

    /// The same selector in one spelling: expressions sorted, each one's values sorted and
    /// deduplicated (equal selectors then compare and hash equal).
    pub fn canonical(&self) -> Selector {
        let mut match_expressions: Vec<Expression> = self
            .match_expressions
            .iter()
            .map(|e| {
                let mut values = e.values.clone();
                values.sort();
                values.dedup();
                Expression {
                    values,
                    ..e.clone()
                }
            })
            .collect();
        match_expressions.sort();
        match_expressions.dedup();
        Selector {
            match_labels: self.match_labels.clone(),
            match_expressions,
        }
    }
}

impl Expression {
    fn matches(&self, value: Option<&str>) -> bool {
        let listed = || value.is_some_and(|v| self.values.iter().any(|w| w == v));
        match self.operator {
            Operator::In => listed(),
            Operator::NotIn => !listed(),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}
