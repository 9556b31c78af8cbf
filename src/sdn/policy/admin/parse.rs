//! `policy.networking.k8s.io/v1alpha1` AdminNetworkPolicy and BaselineAdminNetworkPolicy
//! objects, as JSON or YAML (what `kubectl get anp -o json` prints or `kubectl apply -f`
//! takes), checked once into [`AdminPolicy`], every refusal naming its field
//! (`spec.egress[1].action: …`). The CRD's validation is repeated here (one-of fields, enums,
//! bounds, the baseline's name), plus what the CRD leaves to implementations: protocols other
//! than TCP/UDP/SCTP, `portRange` start below end, and the peers ofnode cannot enforce.

use serde::Deserialize;

use super::{
    Action, AdminPeer, AdminPolicy, AdminPort, AdminRule, Subject, Tier, BASELINE_NAME,
    MAX_NETWORKS, MAX_PEERS, MAX_PORTS, MAX_PRIORITY, MAX_RULES,
};
use crate::sdn::audit;
use crate::sdn::labels::{check_dns_subdomain, check_port_name, Checked, FieldError, Selector};
use crate::sdn::objects::L4;
use crate::sdn::policy::networkpolicy::parse::{RawMeta, RawSelector};
use crate::value::Cidr;

const API_VERSION: &str = "policy.networking.k8s.io/v1alpha1";
/// The API's bound on a rule's name.
const MAX_RULE_NAME: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawObject {
    api_version: String,
    kind: String,
    /// The objects are cluster-scoped: a namespace is refused.
    metadata: RawMeta,
    spec: RawSpec,
    /// Written by controllers; ignored.
    #[serde(default)]
    #[allow(dead_code)]
    status: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSpec {
    #[serde(default)]
    priority: Option<i64>,
    subject: RawSubject,
    #[serde(default)]
    ingress: Option<Vec<RawIngress>>,
    #[serde(default)]
    egress: Option<Vec<RawEgress>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubject {
    #[serde(default)]
    namespaces: Option<RawSelector>,
    #[serde(default)]
    pods: Option<RawNamespacedPod>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawNamespacedPod {
    namespace_selector: RawSelector,
    pod_selector: RawSelector,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIngress {
    #[serde(default)]
    name: Option<String>,
    action: String,
    from: Vec<RawIngressPeer>,
    #[serde(default)]
    ports: Option<Vec<RawPort>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEgress {
    #[serde(default)]
    name: Option<String>,
    action: String,
    to: Vec<RawEgressPeer>,
    #[serde(default)]
    ports: Option<Vec<RawPort>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIngressPeer {
    #[serde(default)]
    namespaces: Option<RawSelector>,
    #[serde(default)]
    pods: Option<RawNamespacedPod>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawEgressPeer {
    #[serde(default)]
    namespaces: Option<RawSelector>,
    #[serde(default)]
    pods: Option<RawNamespacedPod>,
    #[serde(default)]
    networks: Option<Vec<String>>,
    #[serde(default)]
    nodes: Option<RawSelector>,
    #[serde(default)]
    domain_names: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPort {
    #[serde(default)]
    port_number: Option<RawPortNumber>,
    #[serde(default)]
    port_range: Option<RawPortRange>,
    #[serde(default)]
    named_port: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPortNumber {
    #[serde(default)]
    protocol: Option<String>,
    port: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPortRange {
    #[serde(default)]
    protocol: Option<String>,
    start: i64,
    end: i64,
}

/// The body as a JSON value: JSON when it starts with `{`, YAML otherwise.
fn to_value(body: &[u8]) -> Checked<serde_json::Value> {
    let text = std::str::from_utf8(body)
        .map_err(|e| FieldError::new("<body>", format!("not UTF-8: {e}")))?;
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| FieldError::new("<body>", format!("JSON: {e}")))
    } else {
        serde_yaml::from_str(text).map_err(|e| FieldError::new("<body>", format!("YAML: {e}")))
    }
}

/// Parses and validates one AdminNetworkPolicy or BaselineAdminNetworkPolicy object.
pub fn parse_admin_policy(body: &[u8]) -> Checked<AdminPolicy> {
    let value = to_value(body)?;
    let raw: RawObject = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." {
            "<body>".to_string()
        } else {
            path
        };
        FieldError::new(path, e.into_inner().to_string())
    })?;
    raw.validated()
}

fn enumerate<T>(items: Vec<T>) -> impl Iterator<Item = (usize, T)> {
    items.into_iter().enumerate()
}

fn check_count(path: &str, what: &str, len: usize, min: usize, max: usize) -> Checked<()> {
    if len < min {
        return Err(FieldError::new(
            path,
            format!("{len} {what}: at least {min} is required"),
        ));
    }
    if len > max {
        return Err(FieldError::new(
            path,
            format!("{len} {what}: at most {max} are allowed"),
        ));
    }
    Ok(())
}

impl RawObject {
    fn validated(self) -> Checked<AdminPolicy> {
        if self.api_version != API_VERSION {
            return Err(FieldError::new(
                "apiVersion",
                format!("{:?}: expected {API_VERSION:?}", self.api_version),
            ));
        }
        let baseline = match self.kind.as_str() {
            "AdminNetworkPolicy" => false,
            "BaselineAdminNetworkPolicy" => true,
            other => {
                return Err(FieldError::new(
                    "kind",
                    format!(
                    "{other:?}: expected \"AdminNetworkPolicy\" or \"BaselineAdminNetworkPolicy\""
                ),
                ))
            }
        };
        let name = self
            .metadata
            .name
            .ok_or_else(|| FieldError::new("metadata.name", "required"))?;
        check_dns_subdomain("metadata.name", &name)?;
        if let Some(ns) = self.metadata.namespace.filter(|ns| !ns.is_empty()) {
            return Err(FieldError::new(
                "metadata.namespace",
                format!("{ns:?}: {} is cluster-scoped", self.kind),
            ));
        }
        let audit = audit::annotated(self.metadata.annotations.as_ref())?.unwrap_or_default();
        let spec = self.spec;
        let tier = match (baseline, spec.priority) {
            (true, Some(_)) => {
                return Err(FieldError::new(
                    "spec.priority",
                    "a BaselineAdminNetworkPolicy has no priority",
                ))
            }
            (true, None) if name != BASELINE_NAME => {
                return Err(FieldError::new(
                    "metadata.name",
                    format!(
                        "{name:?}: only one BaselineAdminNetworkPolicy, named \"{BASELINE_NAME}\", can exist"
                    ),
                ))
            }
            (true, None) => Tier::Baseline,
            (false, None) => return Err(FieldError::new("spec.priority", "required")),
            (false, Some(p)) => {
                let priority = u16::try_from(p)
                    .ok()
                    .filter(|p| *p <= MAX_PRIORITY)
                    .ok_or_else(|| {
                        FieldError::new(
                            "spec.priority",
                            format!("{p}: must be from 0 to {MAX_PRIORITY}"),
                        )
                    })?;
                Tier::Admin { priority }
            }
        };
        let subject = spec.subject.validated("spec.subject")?;
        let ingress = rules("spec.ingress", spec.ingress, |path, r| {
            let peers = r.from;
            check_count(&format!("{path}.from"), "peers", peers.len(), 1, MAX_PEERS)?;
            let peers = enumerate(peers)
                .map(|(i, p)| p.validated(&format!("{path}.from[{i}]")))
                .collect::<Checked<Vec<_>>>()?;
            rule(tier, path, r.name, &r.action, peers, r.ports)
        })?;
        let egress = rules("spec.egress", spec.egress, |path, r| {
            let peers = r.to;
            check_count(&format!("{path}.to"), "peers", peers.len(), 1, MAX_PEERS)?;
            let peers = enumerate(peers)
                .map(|(i, p)| p.validated(tier, &format!("{path}.to[{i}]")))
                .collect::<Checked<Vec<_>>>()?;
            let rule = rule(tier, path, r.name, &r.action, peers, r.ports)?;
            let has_networks = rule
                .peers
                .iter()
                .any(|p| matches!(p, AdminPeer::Networks { .. } | AdminPeer::Nodes(_)));
            if has_networks && !rule.named_ports().is_empty() {
                return Err(FieldError::new(
                    format!("{path}.ports"),
                    "networks and nodes peers cannot be set with namedPort: they have no named ports",
                ));
            }
            Ok(rule)
        })?;
        Ok(AdminPolicy {
            name,
            tier,
            subject,
            ingress,
            egress,
            audit,
        })
    }
}

/// A direction's rules, each checked by `one` under its path.
fn rules<R>(
    path: &str,
    list: Option<Vec<R>>,
    one: impl Fn(&str, R) -> Checked<AdminRule>,
) -> Checked<Vec<AdminRule>> {
    let list = list.unwrap_or_default();
    if list.len() > MAX_RULES {
        return Err(FieldError::new(
            path,
            format!(
                "{} rules: ofnode enforces at most {MAX_RULES} per direction (each priority has {MAX_RULES} OpenFlow priorities per direction)",
                list.len()
            ),
        ));
    }
    enumerate(list)
        .map(|(i, r)| one(&format!("{path}[{i}]"), r))
        .collect()
}

fn rule(
    tier: Tier,
    path: &str,
    name: Option<String>,
    action: &str,
    peers: Vec<AdminPeer>,
    ports: Option<Vec<RawPort>>,
) -> Checked<AdminRule> {
    let name = name.unwrap_or_default();
    if name.chars().count() > MAX_RULE_NAME {
        return Err(FieldError::new(
            format!("{path}.name"),
            format!("at most {MAX_RULE_NAME} characters"),
        ));
    }
    let action = match (tier, action) {
        (_, "Allow") => Action::Allow,
        (_, "Deny") => Action::Deny,
        (Tier::Admin { .. }, "Pass") => Action::Pass,
        (Tier::Admin { .. }, other) => {
            return Err(FieldError::new(
                format!("{path}.action"),
                format!("{other:?}: expected \"Allow\", \"Deny\" or \"Pass\""),
            ))
        }
        (Tier::Baseline, other) => {
            return Err(FieldError::new(
                format!("{path}.action"),
                format!("{other:?}: expected \"Allow\" or \"Deny\" (a baseline cannot Pass)"),
            ))
        }
    };
    let ports = match ports {
        None => None,
        Some(list) => {
            check_count(&format!("{path}.ports"), "ports", list.len(), 1, MAX_PORTS)?;
            Some(
                enumerate(list)
                    .map(|(i, p)| p.validated(&format!("{path}.ports[{i}]")))
                    .collect::<Checked<Vec<_>>>()?,
            )
        }
    };
    Ok(AdminRule {
        name,
        action,
        peers,
        ports,
    })
}

fn selector(raw: RawSelector, path: &str) -> Checked<Selector> {
    raw.validated(path)
}

impl RawNamespacedPod {
    fn validated(self, path: &str) -> Checked<(Selector, Selector)> {
        Ok((
            selector(
                self.namespace_selector,
                &format!("{path}.namespaceSelector"),
            )?,
            selector(self.pod_selector, &format!("{path}.podSelector"))?,
        ))
    }
}

/// The one field of a one-of object, or an error naming what was found.
fn exactly_one(path: &str, set: &[(&str, bool)]) -> Checked<()> {
    let present: Vec<&str> = set.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect();
    match present.len() {
        1 => Ok(()),
        0 => Err(FieldError::new(
            path,
            format!(
                "must specify exactly one of {}",
                set.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        )),
        _ => Err(FieldError::new(
            path,
            format!(
                "must specify exactly one field, not {}",
                present.join(" and ")
            ),
        )),
    }
}

impl RawSubject {
    fn validated(self, path: &str) -> Checked<Subject> {
        exactly_one(
            path,
            &[
                ("namespaces", self.namespaces.is_some()),
                ("pods", self.pods.is_some()),
            ],
        )?;
        match (self.namespaces, self.pods) {
            (Some(ns), _) => Ok(Subject::Namespaces(selector(
                ns,
                &format!("{path}.namespaces"),
            )?)),
            (None, Some(pods)) => {
                let (namespaces, pods) = pods.validated(&format!("{path}.pods"))?;
                Ok(Subject::Pods { namespaces, pods })
            }
            (None, None) => Err(FieldError::new(path, "must specify namespaces or pods")),
        }
    }
}

fn selector_peer(
    path: &str,
    namespaces: Option<RawSelector>,
    pods: Option<RawNamespacedPod>,
) -> Checked<Option<AdminPeer>> {
    if let Some(ns) = namespaces {
        return Ok(Some(AdminPeer::Namespaces(selector(
            ns,
            &format!("{path}.namespaces"),
        )?)));
    }
    if let Some(pods) = pods {
        let (namespaces, pods) = pods.validated(&format!("{path}.pods"))?;
        return Ok(Some(AdminPeer::Pods { namespaces, pods }));
    }
    Ok(None)
}

impl RawIngressPeer {
    fn validated(self, path: &str) -> Checked<AdminPeer> {
        exactly_one(
            path,
            &[
                ("namespaces", self.namespaces.is_some()),
                ("pods", self.pods.is_some()),
            ],
        )?;
        selector_peer(path, self.namespaces, self.pods)?
            .ok_or_else(|| FieldError::new(path, "must specify namespaces or pods"))
    }
}

impl RawEgressPeer {
    fn validated(self, tier: Tier, path: &str) -> Checked<AdminPeer> {
        exactly_one(
            path,
            &[
                ("namespaces", self.namespaces.is_some()),
                ("pods", self.pods.is_some()),
                ("networks", self.networks.is_some()),
                ("nodes", self.nodes.is_some()),
                ("domainNames", self.domain_names.is_some()),
            ],
        )?;
        if let Some(nodes) = self.nodes {
            return Ok(AdminPeer::Nodes(selector(nodes, &format!("{path}.nodes"))?));
        }
        if self.domain_names.is_some() {
            let reason = match tier {
                Tier::Admin { .. } => "domainNames peers are not supported by ofnode",
                Tier::Baseline => "unknown field: a BaselineAdminNetworkPolicy has no domainNames",
            };
            return Err(FieldError::new(format!("{path}.domainNames"), reason));
        }
        if let Some(networks) = self.networks {
            return networks_peer(&format!("{path}.networks"), networks);
        }
        selector_peer(path, self.namespaces, self.pods)?
            .ok_or_else(|| FieldError::new(path, "must specify a peer"))
    }
}

fn networks_peer(path: &str, networks: Vec<String>) -> Checked<AdminPeer> {
    check_count(path, "networks", networks.len(), 1, MAX_NETWORKS)?;
    let (mut ipv4, mut ipv6) = (Vec::new(), Vec::new());
    for (i, text) in networks.into_iter().enumerate() {
        let at = format!("{path}[{i}]");
        if text.contains(':') {
            let net: ipnet::Ipv6Net = text
                .parse()
                .map_err(|e| FieldError::new(at, format!("{text:?}: invalid CIDR: {e}")))?;
            ipv6.push(net.trunc().to_string());
        } else {
            let cidr: Cidr = text
                .parse()
                .map_err(|e| FieldError::new(at, format!("{text:?}: invalid CIDR: {e}")))?;
            ipv4.push(cidr);
        }
    }
    ipv4.sort();
    ipv4.dedup();
    ipv6.sort();
    ipv6.dedup();
    Ok(AdminPeer::Networks { ipv4, ipv6 })
}

fn protocol(path: &str, name: Option<String>) -> Checked<L4> {
    match name.as_deref() {
        None => Ok(L4::Tcp),
        Some(name) => L4::from_kubernetes(name).ok_or_else(|| {
            FieldError::new(
                format!("{path}.protocol"),
                format!("{name:?}: expected \"TCP\", \"UDP\" or \"SCTP\""),
            )
        }),
    }
}

fn port_number(path: String, n: i64) -> Checked<u16> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| FieldError::new(path, format!("{n}: must be from 1 to 65535")))
}

impl RawPort {
    fn validated(self, path: &str) -> Checked<AdminPort> {
        exactly_one(
            path,
            &[
                ("portNumber", self.port_number.is_some()),
                ("portRange", self.port_range.is_some()),
                ("namedPort", self.named_port.is_some()),
            ],
        )?;
        if let Some(number) = self.port_number {
            let at = format!("{path}.portNumber");
            return Ok(AdminPort::Number {
                protocol: protocol(&at, number.protocol)?,
                port: port_number(format!("{at}.port"), number.port)?,
            });
        }
        if let Some(range) = self.port_range {
            let at = format!("{path}.portRange");
            let start = port_number(format!("{at}.start"), range.start)?;
            let end = port_number(format!("{at}.end"), range.end)?;
            if end <= start {
                return Err(FieldError::new(
                    format!("{at}.end"),
                    format!("{end}: must be greater than start ({start})"),
                ));
            }
            return Ok(AdminPort::Range {
                protocol: protocol(&at, range.protocol)?,
                start,
                end,
            });
        }
        let name = self.named_port.unwrap_or_default();
        check_port_name(&format!("{path}.namedPort"), &name)?;
        Ok(AdminPort::Named(name))
    }
}
