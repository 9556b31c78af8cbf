//! Kubernetes `networking.k8s.io/v1` NetworkPolicy objects, parsed from the JSON `kubectl get
//! networkpolicy -o json` prints and checked once, with errors naming the field
//! (`spec.ingress[0].ports[1].port: …`), into the validated [`NetPol`] with the server
//! defaults applied (policyTypes, protocol).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::limits::{check_len, MAX_EXCEPTS, MAX_PEERS, MAX_PORTS, MAX_RULES};
use super::model::{NetPol, Peer, Port, Rule};
use crate::sdn::audit;
use crate::sdn::labels::{
    check_dns_label, check_dns_subdomain, check_label_key, check_label_value, check_labels,
    check_port_name, Checked, Expression, FieldError, Labels, Operator, Selector,
};
use crate::sdn::objects::L4;
use crate::value::Cidr;

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

/// ObjectMeta, as the policy kinds read it (the admin tiers' parser too): name, namespace and
/// the audit annotation matter; uid, labels, the other annotations, managedFields and the rest
/// are tolerated and ignored.
#[derive(Deserialize)]
pub(crate) struct RawMeta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
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
pub(crate) struct RawSelector {
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
        FieldError::new(path, e.into_inner().to_string())
    })?;
    de.end()
        .map_err(|e| FieldError::new("<body>", format!("trailing data: {e}")))?;
    raw.validated()
}

impl RawPolicy {
    fn validated(self) -> Checked<NetPol> {
        if self.api_version != "networking.k8s.io/v1" {
            return Err(FieldError::new(
                "apiVersion",
                format!("{:?}: expected \"networking.k8s.io/v1\"", self.api_version),
            ));
        }
        if self.kind != "NetworkPolicy" {
            return Err(FieldError::new(
                "kind",
                format!("{:?}: expected \"NetworkPolicy\"", self.kind),
            ));
        }
        let name = self
            .metadata
            .name
            .ok_or_else(|| FieldError::new("metadata.name", "required"))?;
        check_dns_subdomain("metadata.name", &name)?;
        let namespace = self
            .metadata
            .namespace
            .ok_or_else(|| FieldError::new("metadata.namespace", "required"))?;
        check_dns_label("metadata.namespace", &namespace)?;
        let audit = audit::annotated(self.metadata.annotations.as_ref())?;
        let spec = self.spec;
        let (has_ingress, has_egress) = policy_types(&spec)?;
        let pod_selector = spec.pod_selector.validated("spec.podSelector")?;
        let ingress = match has_ingress {
            false => None,
            true => {
                let list = spec.ingress.unwrap_or_default();
                check_len("spec.ingress", "rules", list.len(), MAX_RULES)?;
                Some(
                    enumerate(list)
                        .map(|(i, r)| rule(&format!("spec.ingress[{i}]"), "from", r.from, r.ports))
                        .collect::<Checked<Vec<Rule>>>()?,
                )
            }
        };
        let egress = match has_egress {
            false => None,
            true => {
                let list = spec.egress.unwrap_or_default();
                check_len("spec.egress", "rules", list.len(), MAX_RULES)?;
                Some(
                    enumerate(list)
                        .map(|(i, r)| rule(&format!("spec.egress[{i}]"), "to", r.to, r.ports))
                        .collect::<Checked<Vec<Rule>>>()?,
                )
            }
        };
        Ok(NetPol {
            namespace,
            name,
            pod_selector,
            ingress,
            egress,
            audit,
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
        return Err(FieldError::new(
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
                return Err(FieldError::new(
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
        Some(list) if !list.is_empty() => {
            check_len(
                &format!("{path}.{peers_field}"),
                "peers",
                list.len(),
                MAX_PEERS,
            )?;
            Some(
                enumerate(list)
                    .map(|(i, p)| p.validated(&format!("{path}.{peers_field}[{i}]")))
                    .collect::<Checked<Vec<Peer>>>()?,
            )
        }
        _ => None,
    };
    let ports = ports.unwrap_or_default();
    check_len(&format!("{path}.ports"), "ports", ports.len(), MAX_PORTS)?;
    let ports = enumerate(ports)
        .map(|(i, p)| p.validated(&format!("{path}.ports[{i}]")))
        .collect::<Checked<Vec<Port>>>()?;
    Ok(Rule { peers, ports })
}

impl RawPeer {
    fn validated(self, path: &str) -> Checked<Peer> {
        match (self.pod_selector, self.namespace_selector, self.ip_block) {
            (None, None, None) => Err(FieldError::new(
                path,
                "must specify one of podSelector, namespaceSelector or ipBlock",
            )),
            (None, None, Some(block)) => block.validated(&format!("{path}.ipBlock")),
            (_, _, Some(_)) => Err(FieldError::new(
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
        check_len(
            &format!("{path}.except"),
            "excepts",
            except.len(),
            MAX_EXCEPTS,
        )?;
        if self.cidr.contains(':') {
            if let Some((i, bad)) = except.iter().enumerate().find(|(_, e)| !e.contains(':')) {
                return Err(FieldError::new(
                    format!("{path}.except[{i}]"),
                    format!("{bad:?} is not in the IPv6 cidr {:?}", self.cidr),
                ));
            }
            return Ok(Peer::Ipv6Block { cidr: self.cidr });
        }
        let cidr: Cidr = self
            .cidr
            .parse()
            .map_err(|e| FieldError::new(format!("{path}.cidr"), format!("{e}")))?;
        let except = enumerate(except)
            .map(|(i, text)| {
                let at = format!("{path}.except[{i}]");
                let e: Cidr = text
                    .parse()
                    .map_err(|e| FieldError::new(at.clone(), format!("{e}")))?;
                if !cidr.contains(e.network()) || e.prefix() <= cidr.prefix() {
                    return Err(FieldError::new(
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
            None => L4::Tcp,
            Some(name) => L4::from_kubernetes(name).ok_or_else(|| {
                FieldError::new(
                    format!("{path}.protocol"),
                    format!("{name:?}: expected \"TCP\", \"UDP\" or \"SCTP\""),
                )
            })?,
        };
        let port_number = |at: String, n: i64| {
            u16::try_from(n)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| FieldError::new(at, format!("{n}: must be from 1 to 65535")))
        };
        let first = match self.port {
            None => None,
            Some(IntOrString::Int(n)) => Some(port_number(format!("{path}.port"), n)?),
            Some(IntOrString::Str(name)) => match name.parse::<i64>() {
                // An int-or-string given as a numeric string is the number (as the API server).
                Ok(n) => Some(port_number(format!("{path}.port"), n)?),
                Err(_) => {
                    check_port_name(&format!("{path}.port"), &name)?;
                    if self.end_port.is_some() {
                        return Err(FieldError::new(
                            format!("{path}.endPort"),
                            "may not be specified when `port` is a named port",
                        ));
                    }
                    return Ok(Port {
                        protocol,
                        range: None,
                        name: Some(name),
                    });
                }
            },
        };
        let range = match (first, self.end_port) {
            (None, None) => None,
            (Some(p), None) => Some((p, p)),
            (None, Some(_)) => {
                return Err(FieldError::new(
                    format!("{path}.endPort"),
                    "may not be specified when `port` is not specified",
                ))
            }
            (Some(p), Some(end)) => {
                let end = port_number(format!("{path}.endPort"), end)?;
                if end < p {
                    return Err(FieldError::new(
                        format!("{path}.endPort"),
                        format!("{end}: must be greater than or equal to `port` ({p})"),
                    ));
                }
                Some((p, end))
            }
        };
        Ok(Port {
            protocol,
            range,
            name: None,
        })
    }
}

impl RawSelector {
    pub(crate) fn validated(self, path: &str) -> Checked<Selector> {
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
                return Err(FieldError::new(
                    format!("{path}.operator"),
                    format!("{other:?}: expected In, NotIn, Exists or DoesNotExist"),
                ))
            }
        };
        let values = self.values.unwrap_or_default();
        let needs_values = matches!(operator, Operator::In | Operator::NotIn);
        if needs_values && values.is_empty() {
            return Err(FieldError::new(
                format!("{path}.values"),
                "must be non-empty for In and NotIn",
            ));
        }
        if !needs_values && !values.is_empty() {
            return Err(FieldError::new(
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
