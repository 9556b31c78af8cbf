//! The NetworkPolicy mode's inputs: namespaces, pod labels, remote pods, and Kubernetes
//! `networking.k8s.io/v1` NetworkPolicy objects parsed from the JSON `kubectl get -o json`
//! prints. Everything is checked once, here, with errors naming the field (`spec.ingress[0]
//! .ports[1].port: …`); what comes out is a validated model with the server defaults applied
//! (policyTypes, protocol), which is what the node state keeps and the flows are computed from.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

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

type Checked<T> = Result<T, NetPolError>;

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
    /// Checks the name and labels; the implicit name label is dropped (a different value for it
    /// is refused), so the stored labels are the user's own.
    pub fn validated(mut self) -> Checked<Namespace> {
        check_dns_label("name", &self.name)?;
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

    /// Its labels as selectors see them: the user's plus `kubernetes.io/metadata.name`.
    pub fn effective_labels(&self) -> Labels {
        let mut labels = self.labels.clone();
        labels.insert(NAMESPACE_NAME_LABEL.to_string(), self.name.clone());
        labels
    }
}

/// What a local pod carries beyond its flows' inputs: its namespace and labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodMeta {
    pub namespace: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
}

/// A pod on another node, needed to select peers by label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemotePod {
    pub ip: Ipv4Addr,
    pub namespace: String,
    #[serde(default)]
    pub labels: Labels,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: Labels,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Expression>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expression {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| e.matches(labels))
    }
}

impl Expression {
    fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => !value.is_some_and(|v| self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The Kubernetes JSON, as `kubectl get networkpolicy -o json` prints it.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPolicy {
    api_version: String,
    kind: String,
    metadata: RawMeta,
    #[serde(default)]
    spec: RawSpec,
    /// Printed by newer servers; ignored.
    #[serde(default)]
    #[allow(dead_code)]
    status: Option<serde_json::Value>,
}

/// ObjectMeta: only name and namespace matter; uid, labels, annotations, managedFields and the
/// rest are tolerated and ignored.
#[derive(Deserialize)]
struct RawMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSpec {
    #[serde(default)]
    pod_selector: RawSelector,
    #[serde(default)]
    policy_types: Option<Vec<String>>,
    #[serde(default)]
    ingress: Option<Vec<RawIngress>>,
    #[serde(default)]
    egress: Option<Vec<RawEgress>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIngress {
    #[serde(default)]
    from: Option<Vec<RawPeer>>,
    #[serde(default)]
    ports: Option<Vec<RawPort>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEgress {
    #[serde(default)]
    to: Option<Vec<RawPeer>>,
    #[serde(default)]
    ports: Option<Vec<RawPort>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPeer {
    #[serde(default)]
    pod_selector: Option<RawSelector>,
    #[serde(default)]
    namespace_selector: Option<RawSelector>,
    #[serde(default)]
    ip_block: Option<RawIpBlock>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIpBlock {
    cidr: String,
    #[serde(default)]
    except: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPort {
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    port: Option<IntOrString>,
    #[serde(default)]
    end_port: Option<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrString {
    Int(i64),
    Str(String),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSelector {
    #[serde(default)]
    match_labels: Option<Labels>,
    #[serde(default)]
    match_expressions: Option<Vec<RawExpression>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpression {
    key: String,
    operator: String,
    #[serde(default)]
    values: Option<Vec<String>>,
}

/// Parses and validates one NetworkPolicy object from its JSON.
pub fn parse_netpol(json: &[u8]) -> Checked<NetPol> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let raw: RawPolicy = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." {
            "<body>".to_string()
        } else {
            path
        };
        NetPolError::new(path, e.into_inner().to_string())
    })?;
    de.end()
        .map_err(|e| NetPolError::new("<body>", format!("trailing data: {e}")))?;
    raw.validated()
}

impl RawPolicy {
    fn validated(self) -> Checked<NetPol> {
        if self.api_version != "networking.k8s.io/v1" {
            return Err(NetPolError::new(
                "apiVersion",
                format!("{:?}: expected \"networking.k8s.io/v1\"", self.api_version),
            ));
        }
        if self.kind != "NetworkPolicy" {
            return Err(NetPolError::new(
                "kind",
                format!("{:?}: expected \"NetworkPolicy\"", self.kind),
            ));
        }
        let name = self
            .metadata
            .name
            .ok_or_else(|| NetPolError::new("metadata.name", "required"))?;
        check_dns_subdomain("metadata.name", &name)?;
        let namespace = self
            .metadata
            .namespace
            .ok_or_else(|| NetPolError::new("metadata.namespace", "required"))?;
        check_dns_label("metadata.namespace", &namespace)?;
        let spec = self.spec;
        let (has_ingress, has_egress) = policy_types(&spec)?;
        let pod_selector = spec.pod_selector.validated("spec.podSelector")?;
        let ingress = match has_ingress {
            false => None,
            true => Some(
                enumerate(spec.ingress.unwrap_or_default())
                    .map(|(i, r)| rule(&format!("spec.ingress[{i}]"), "from", r.from, r.ports))
                    .collect::<Checked<Vec<Rule>>>()?,
            ),
        };
        let egress = match has_egress {
            false => None,
            true => Some(
                enumerate(spec.egress.unwrap_or_default())
                    .map(|(i, r)| rule(&format!("spec.egress[{i}]"), "to", r.to, r.ports))
                    .collect::<Checked<Vec<Rule>>>()?,
            ),
        };
        Ok(NetPol {
            namespace,
            name,
            pod_selector,
            ingress,
            egress,
        })
    }
}

fn enumerate<T>(items: Vec<T>) -> impl Iterator<Item = (usize, T)> {
    items.into_iter().enumerate()
}

/// policyTypes with the server's defaulting: Ingress always, Egress when spec.egress is
/// non-empty.
fn policy_types(spec: &RawSpec) -> Checked<(bool, bool)> {
    let types = match &spec.policy_types {
        Some(types) if !types.is_empty() => types,
        _ => {
            let egress = spec.egress.as_ref().is_some_and(|e| !e.is_empty());
            return Ok((true, egress));
        }
    };
    if types.len() > 2 {
        return Err(NetPolError::new(
            "spec.policyTypes",
            "at most two entries (Ingress, Egress)",
        ));
    }
    let (mut ingress, mut egress) = (false, false);
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            "Ingress" => ingress = true,
            "Egress" => egress = true,
            other => {
                return Err(NetPolError::new(
                    format!("spec.policyTypes[{i}]"),
                    format!("{other:?}: expected \"Ingress\" or \"Egress\""),
                ))
            }
        }
    }
    Ok((ingress, egress))
}

fn rule(
    path: &str,
    peers_field: &str,
    peers: Option<Vec<RawPeer>>,
    ports: Option<Vec<RawPort>>,
) -> Checked<Rule> {
    let peers = match peers {
        Some(list) if !list.is_empty() => Some(
            enumerate(list)
                .map(|(i, p)| p.validated(&format!("{path}.{peers_field}[{i}]")))
                .collect::<Checked<Vec<Peer>>>()?,
        ),
        _ => None,
    };
    let ports = enumerate(ports.unwrap_or_default())
        .map(|(i, p)| p.validated(&format!("{path}.ports[{i}]")))
        .collect::<Checked<Vec<Port>>>()?;
    Ok(Rule { peers, ports })
}

impl RawPeer {
    fn validated(self, path: &str) -> Checked<Peer> {
        match (self.pod_selector, self.namespace_selector, self.ip_block) {
            (None, None, None) => Err(NetPolError::new(
                path,
                "must specify one of podSelector, namespaceSelector or ipBlock",
            )),
            (None, None, Some(block)) => block.validated(&format!("{path}.ipBlock")),
            (_, _, Some(_)) => Err(NetPolError::new(
                path,
                "may not specify both ipBlock and another peer",
            )),
            (pods, namespaces, None) => Ok(Peer::Select {
                pods: pods
                    .map(|s| s.validated(&format!("{path}.podSelector")))
                    .transpose()?,
                namespaces: namespaces
                    .map(|s| s.validated(&format!("{path}.namespaceSelector")))
                    .transpose()?,
            }),
        }
    }
}

impl RawIpBlock {
    fn validated(self, path: &str) -> Checked<Peer> {
        let except = self.except.unwrap_or_default();
        if self.cidr.contains(':') {
            if let Some((i, bad)) = except.iter().enumerate().find(|(_, e)| !e.contains(':')) {
                return Err(NetPolError::new(
                    format!("{path}.except[{i}]"),
                    format!("{bad:?} is not in the IPv6 cidr {:?}", self.cidr),
                ));
            }
            return Ok(Peer::Ipv6Block { cidr: self.cidr });
        }
        let cidr: Cidr = self
            .cidr
            .parse()
            .map_err(|e| NetPolError::new(format!("{path}.cidr"), format!("{e}")))?;
        let except = enumerate(except)
            .map(|(i, text)| {
                let at = format!("{path}.except[{i}]");
                let e: Cidr = text
                    .parse()
                    .map_err(|e| NetPolError::new(at.clone(), format!("{e}")))?;
                if !cidr.contains(e.network()) || e.prefix() <= cidr.prefix() {
                    return Err(NetPolError::new(
                        at,
                        format!("{e} must be a strict subset of cidr {cidr}"),
                    ));
                }
                Ok(e)
            })
            .collect::<Checked<Vec<Cidr>>>()?;
        Ok(Peer::Block { cidr, except })
    }
}

impl RawPort {
    fn validated(self, path: &str) -> Checked<Port> {
        let protocol = match self.protocol.as_deref() {
            None | Some("TCP") => L4::Tcp,
            Some("UDP") => L4::Udp,
            Some("SCTP") => L4::Sctp,
            Some(other) => {
                return Err(NetPolError::new(
                    format!("{path}.protocol"),
                    format!("{other:?}: expected \"TCP\", \"UDP\" or \"SCTP\""),
                ))
            }
        };
        let port_number = |at: String, n: i64| {
            u16::try_from(n)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| NetPolError::new(at, format!("{n}: must be from 1 to 65535")))
        };
        let first = match self.port {
            None => None,
            Some(IntOrString::Int(n)) => Some(port_number(format!("{path}.port"), n)?),
            Some(IntOrString::Str(name)) => match name.parse::<i64>() {
                // An int-or-string given as a numeric string is the number (as the API server).
                Ok(n) => Some(port_number(format!("{path}.port"), n)?),
                Err(_) => {
                    return Err(NetPolError::new(
                        format!("{path}.port"),
                        format!(
                            "{name:?}: named ports are not supported (ofnode knows no container port names)"
                        ),
                    ))
                }
            },
        };
        if protocol == L4::Sctp && first.is_some() {
            // ofnode's flow codec has no sctp_dst field yet: refuse clearly rather than fail
            // later with an internal error (a whole-protocol SCTP rule works).
            return Err(NetPolError::new(
                format!("{path}.port"),
                "SCTP port numbers are not supported yet (only a whole-protocol SCTP rule)",
            ));
        }
        let range = match (first, self.end_port) {
            (None, None) => None,
            (Some(p), None) => Some((p, p)),
            (None, Some(_)) => {
                return Err(NetPolError::new(
                    format!("{path}.endPort"),
                    "may not be specified when `port` is not specified",
                ))
            }
            (Some(p), Some(end)) => {
                let end = port_number(format!("{path}.endPort"), end)?;
                if end < p {
                    return Err(NetPolError::new(
                        format!("{path}.endPort"),
                        format!("{end}: must be greater than or equal to `port` ({p})"),
                    ));
                }
                Some((p, end))
            }
        };
        Ok(Port { protocol, range })
    }
}

impl RawSelector {
    fn validated(self, path: &str) -> Checked<Selector> {
        let match_labels = self.match_labels.unwrap_or_default();
        check_labels(&format!("{path}.matchLabels"), &match_labels)?;
        let match_expressions = enumerate(self.match_expressions.unwrap_or_default())
            .map(|(i, e)| e.validated(&format!("{path}.matchExpressions[{i}]")))
            .collect::<Checked<Vec<Expression>>>()?;
        Ok(Selector {
            match_labels,
            match_expressions,
        })
    }
}

impl RawExpression {
    fn validated(self, path: &str) -> Checked<Expression> {
        check_label_key(&format!("{path}.key"), &self.key)?;
        let operator = match self.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(NetPolError::new(
                    format!("{path}.operator"),
                    format!("{other:?}: expected In, NotIn, Exists or DoesNotExist"),
                ))
            }
        };
        let values = self.values.unwrap_or_default();
        let needs_values = matches!(operator, Operator::In | Operator::NotIn);
        if needs_values && values.is_empty() {
            return Err(NetPolError::new(
                format!("{path}.values"),
                "must be non-empty for In and NotIn",
            ));
        }
        if !needs_values && !values.is_empty() {
            return Err(NetPolError::new(
                format!("{path}.values"),
                "must be empty for Exists and DoesNotExist",
            ));
        }
        for (i, v) in values.iter().enumerate() {
            check_label_value(&format!("{path}.values[{i}]"), v)?;
        }
        Ok(Expression {
            key: self.key,
            operator,
            values,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Names and labels, as Kubernetes validates them.

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// A DNS-1123 label: 1-63 lowercase alphanumerics or '-', alphanumeric at both ends.
pub fn check_dns_label(path: &str, name: &str) -> Checked<()> {
    let ok = (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum);
    if ok {
        Ok(())
    } else {
        Err(NetPolError::new(
            path,
            format!("{name:?} is not a DNS-1123 label (1-63 of a-z, 0-9, '-', alphanumeric at both ends)"),
        ))
    }
}

/// A DNS-1123 subdomain: up to 253 characters, dot-separated labels.
fn check_dns_subdomain(path: &str, name: &str) -> Checked<()> {
    let ok = (1..=253).contains(&name.len())
        && name
            .split('.')
            .all(|label| check_dns_label(path, label).is_ok());
    if ok {
        Ok(())
    } else {
        Err(NetPolError::new(
            path,
            format!("{name:?} is not a DNS-1123 subdomain"),
        ))
    }
}

/// A label name or value's shape: up to 63 of alphanumerics, '-', '_', '.', alphanumeric at
/// both ends.
fn label_word(word: &str) -> bool {
    word.len() <= 63
        && word
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && (word.is_empty() || (word.starts_with(alnum) && word.ends_with(alnum)))
}

fn check_label_key(path: &str, key: &str) -> Checked<()> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        check_dns_subdomain(path, prefix).map_err(|_| {
            NetPolError::new(path, format!("{key:?}: the prefix must be a DNS subdomain"))
        })?;
    }
    if name.is_empty() || !label_word(name) {
        return Err(NetPolError::new(
            path,
            format!("{key:?} is not a label key ([prefix/]name, name 1-63 of alphanumerics, '-', '_', '.')"),
        ));
    }
    Ok(())
}

fn check_label_value(path: &str, value: &str) -> Checked<()> {
    if label_word(value) {
        Ok(())
    } else {
        Err(NetPolError::new(
            path,
            format!("{value:?} is not a label value (up to 63 of alphanumerics, '-', '_', '.')"),
        ))
    }
}

/// Checks every key and value of `labels`; the error names `path.key`.
pub fn check_labels(path: &str, labels: &Labels) -> Checked<()> {
    for (key, value) in labels {
        check_label_key(&format!("{path}.{key}"), key)?;
        check_label_value(&format!("{path}.{key}"), value)?;
    }
    Ok(())
}
