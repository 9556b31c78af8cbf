//! API objects → what the node's store takes: each object of a watched kind becomes one
//! [`Fact`] (or none: a host-network pod, a finished pod, a headless service are nothing the
//! data plane knows), or a refusal naming the field ofnode cannot implement.
//!
//! A NetworkPolicy is never refused outright: one the parser refuses becomes its fail-closed
//! stand-in (see [`fail_closed`]), so the pods it meant to protect are isolated rather than
//! left open while the object is bad.

use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;

use super::crd;
use crate::sdn::audit::{self, AuditSet};
use crate::sdn::labels::{FieldError, Labels};
use crate::sdn::objects::{NamedPort, L4};
use crate::sdn::policy::admin::{parse_admin_policy, AdminPolicy};
use crate::sdn::policy::networkpolicy::model::NetPol;
use crate::sdn::policy::networkpolicy::parse_netpol;
use crate::sdn::types::{
    EgressNetworkPolicy, EgressNetworkPolicySpec, EgressPeer, EgressRule, EgressRuleType,
    HostSubnet, ServicePort,
};
use crate::value::{Cidr, PodKey, Vnid};

/// What the API says of one pod that the data plane can know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// `spec.nodeName` (None: not scheduled yet).
    pub node: Option<String>,
    pub labels: Labels,
    /// `status.podIPs` (else `status.podIP`), sorted.
    pub ips: Vec<IpAddr>,
    /// Its containers' named ports, sorted.
    pub ports: Vec<NamedPort>,
}

/// A NetworkPolicy as the node applies it: the object itself, or — when ofnode cannot
/// implement it — its fail-closed stand-in and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFacts {
    pub policy: NetPol,
    pub refused: Option<FieldError>,
}

/// A Service's cluster IP and ports (the seed's AddServiceRules takes nothing else).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceFacts {
    pub ip: Ipv4Addr,
    pub ports: Vec<ServicePort>,
}

/// A refusal: the field and why (the object is counted bad and shown in status).
pub type Refused = FieldError;

fn refused(path: impl Into<String>, reason: impl Into<String>) -> Refused {
    FieldError::new(path, reason)
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// `namespace/name` of a namespaced object.
pub fn namespaced_key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!("{}/{}", namespace_of(meta), name_of(meta))
}

/// What the node takes of a Namespace: its labels and its audit setting (the
/// `ofnode.io/audit` annotation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceFacts {
    pub labels: Labels,
    pub audit: AuditSet,
    /// Why its audit annotation was refused (the object is bad; the mirror keeps the audit
    /// setting the namespace had).
    pub refused: Option<String>,
}

/// A Namespace's labels and audit setting: a bad annotation gives none here, and says why
/// (the mirror then keeps the namespace's previous setting).
pub fn namespace_facts(ns: &Namespace) -> NamespaceFacts {
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    match audit::annotated(ns.metadata.annotations.as_ref()) {
        Ok(audit) => NamespaceFacts {
            labels,
            audit: audit.unwrap_or_default(),
            refused: None,
        },
        Err(why) => NamespaceFacts {
            labels,
            audit: AuditSet::NONE,
            refused: Some(why.to_string()),
        },
    }
}

/// A NetNamespace's VNID (`netid`).
pub fn netnamespace_vnid(net: &crd::NetNamespace) -> Result<Vnid, Refused> {
    u32::try_from(net.netid)
        .ok()
        .and_then(|id| Vnid::new(id).ok())
        .ok_or_else(|| refused("netid", format!("{} is not a VNID (0-16777215)", net.netid)))
}

/// The pod's key, or None when the API's names do not make one (never from a real server).
pub fn pod_key(pod: &Pod) -> Option<PodKey> {
    PodKey::new(namespace_of(&pod.metadata), name_of(&pod.metadata)).ok()
}

/// What the data plane knows of `pod`: None for a host-network pod (it has the node's
/// address, no port on br0) and for a pod that has finished (Succeeded, Failed: its address
/// may already be another pod's).
pub fn pod_facts(pod: &Pod) -> Result<Option<PodFacts>, Refused> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.host_network).unwrap_or(false) {
        return Ok(None);
    }
    let status = pod.status.as_ref();
    if matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return Ok(None);
    }
    let mut ips = Vec::new();
    let listed = status.and_then(|s| s.pod_ips.as_ref());
    let texts: Vec<&str> = match listed {
        Some(list) if !list.is_empty() => list.iter().map(|ip| ip.ip.as_str()).collect(),
        _ => status
            .and_then(|s| s.pod_ip.as_deref())
            .into_iter()
            .collect(),
    };
    for (i, text) in texts.into_iter().enumerate() {
        let ip = text.parse::<IpAddr>().map_err(|_| {
            refused(
                format!("status.podIPs[{i}]"),
                format!("{text:?} is not an IP address"),
            )
        })?;
        ips.push(ip);
    }
    ips.sort();
    ips.dedup();
    let mut ports = Vec::new();
    for (c, container) in spec
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        for (p, port) in container.ports.iter().flatten().enumerate() {
            let Some(name) = &port.name else { continue };
            let path = || format!("spec.containers[{c}].ports[{p}]");
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let protocol = L4::from_kubernetes(protocol)
                .ok_or_else(|| refused(path(), format!("protocol {protocol:?}")))?;
            let number = u16::try_from(port.container_port)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| refused(path(), format!("containerPort {}", port.container_port)))?;
            ports.push(NamedPort {
                name: name.clone(),
                protocol,
                port: number,
            });
        }
    }
    ports.sort();
    ports.dedup();
    Ok(Some(PodFacts {
        node: spec.and_then(|s| s.node_name.clone()),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        ips,
        ports,
    }))
}

/// The policy as the node applies it (see [`PolicyFacts`]).
pub fn policy_facts(policy: &NetworkPolicy) -> PolicyFacts {
    let parsed = serde_json::to_vec(policy)
        .map_err(|e| refused("<object>", e.to_string()))
        .and_then(|json| parse_netpol(&json));
    match parsed {
        Ok(policy) => PolicyFacts {
            policy,
            refused: None,
        },
        Err(why) => PolicyFacts {
            policy: fail_closed(policy),
            refused: Some(why),
        },
    }
}

/// The stand-in for a policy ofnode cannot implement: the same podSelector and policyTypes
/// (defaulted as the API server does) with no rule at all, so every pod the policy selects is
/// isolated in the directions it names and nothing is allowed in its name. Should the
/// podSelector itself be what cannot be implemented, every pod of the namespace is isolated
/// both ways: the widest the policy could have meant.
pub fn fail_closed(policy: &NetworkPolicy) -> NetPol {
    let meta = &policy.metadata;
    let (name, namespace) = (name_of(meta), namespace_of(meta));
    let spec = policy.spec.as_ref();
    let types: Vec<&str> = match spec.and_then(|s| s.policy_types.as_ref()) {
        Some(types) => types.iter().map(String::as_str).collect(),
        None => {
            let egress = spec
                .and_then(|s| s.egress.as_ref())
                .is_some_and(|e| !e.is_empty());
            if egress {
                vec!["Ingress", "Egress"]
            } else {
                vec!["Ingress"]
            }
        }
    };
    let object = |selector: serde_json::Value, types: &[&str]| {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"podSelector": selector, "policyTypes": types},
        })
    };
    let selector = spec
        .and_then(|s| serde_json::to_value(&s.pod_selector).ok())
        .unwrap_or_else(|| json!({}));
    let narrow = parse_netpol(object(selector, &types).to_string().as_bytes());
    narrow.unwrap_or_else(|_| {
        let wide = object(json!({}), &["Ingress", "Egress"]);
        parse_netpol(wide.to_string().as_bytes()).unwrap_or_else(|_| NetPol {
            namespace: namespace.to_string(),
            name: name.to_string(),
            pod_selector: Default::default(),
            ingress: Some(Vec::new()),
            egress: Some(Vec::new()),
            audit: None,
        })
    })
}

/// A Service's cluster IP and ports: None for one without a cluster IP (headless,
/// ExternalName) or with an IPv6 one (not this IPv4 data plane).
pub fn service_facts(svc: &Service) -> Result<Option<ServiceFacts>, Refused> {
    let Some(spec) = &svc.spec else {
        return Ok(None);
    };
    let ip = match spec.cluster_ip.as_deref() {
        None | Some("") | Some("None") => return Ok(None),
        Some(text) => match text.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => ip,
            Ok(IpAddr::V6(_)) => return Ok(None),
            Err(_) => {
                return Err(refused(
                    "spec.clusterIP",
                    format!("{text:?} is not an IP address"),
                ))
            }
        },
    };
    let mut ports = Vec::new();
    for (i, port) in spec.ports.iter().flatten().enumerate() {
        let protocol = port.protocol.as_deref().unwrap_or("TCP");
        let text = format!("{protocol}/{}", port.port);
        let parsed: ServicePort = text.parse().map_err(|e: crate::value::InvalidInput| {
            refused(format!("spec.ports[{i}]"), e.to_string())
        })?;
        ports.push(parsed);
    }
    Ok(Some(ServiceFacts { ip, ports }))
}

/// Another node's HostSubnet as the seed's host subnet.
pub fn host_subnet(hs: &crd::HostSubnet) -> Result<HostSubnet, Refused> {
    let host_ip = hs
        .host_ip
        .parse::<Ipv4Addr>()
        .map_err(|_| refused("hostIP", format!("{:?} is not an IPv4 address", hs.host_ip)))?;
    let subnet = hs
        .subnet
        .parse::<Cidr>()
        .map_err(|e| refused("subnet", e.to_string()))?;
    Ok(HostSubnet {
        host_ip,
        subnet,
        fixed_vnid: None,
        vtep_mac: None,
    })
}

/// An AdminNetworkPolicy or the BaselineAdminNetworkPolicy (`kind`, its name and spec as the
/// API serves them), checked by the same parser as `ofnode anp|banp apply`: a refusal names
/// the field, and the node then enforces nothing of the object.
pub fn admin_policy(
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &serde_json::Value,
) -> Result<AdminPolicy, Refused> {
    let object = json!({
        "apiVersion": crd::ADMIN_API_VERSION,
        "kind": kind,
        "metadata": {"name": name_of(meta), "annotations": meta.annotations},
        "spec": spec,
    });
    parse_admin_policy(object.to_string().as_bytes())
}

/// An EgressNetworkPolicy as the seed's.
pub fn egress_policy(enp: &crd::EgressNetworkPolicy) -> Result<EgressNetworkPolicy, Refused> {
    let meta = &enp.metadata;
    let mut egress = Vec::new();
    for (i, rule) in enp.spec.egress.iter().enumerate() {
        let path = |field: &str| format!("spec.egress[{i}].{field}");
        let rule_type = match rule.rule_type.as_str() {
            "Allow" => EgressRuleType::Allow,
            "Deny" => EgressRuleType::Deny,
            other => return Err(refused(path("type"), format!("{other:?}: Allow or Deny"))),
        };
        let cidr_selector = match &rule.to.cidr_selector {
            Some(text) => Some(
                text.parse::<Cidr>()
                    .map_err(|e| refused(path("to.cidrSelector"), e.to_string()))?,
            ),
            None => None,
        };
        egress.push(EgressRule {
            rule_type,
            to: EgressPeer {
                cidr_selector,
                dns_name: rule.to.dns_name.clone(),
            },
        });
    }
    let policy = EgressNetworkPolicy {
        namespace: namespace_of(meta).to_string(),
        name: name_of(meta).to_string(),
        spec: EgressNetworkPolicySpec { egress },
    };
    policy
        .validate()
        .map_err(|e| refused("spec.egress", e.to_string()))?;
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_annotation_is_read_from_namespaces_policies_and_admin_tiers() {
        let namespace = |value: &str| -> Namespace {
            serde_json::from_value(json!({
                "metadata": {"name": "ns", "labels": {"team": "a"},
                             "annotations": {"ofnode.io/audit": value}},
            }))
            .expect("a Namespace")
        };
        let good = namespace_facts(&namespace("allow, deny"));
        assert_eq!(good.audit.to_string(), "allow,deny");
        assert_eq!((good.labels.len(), good.refused), (1, None));
        // A bad value gives no setting here (the mirror keeps the last one), and the object is bad.
        let bad = namespace_facts(&namespace("all"));
        assert_eq!((bad.audit, bad.labels.len()), (AuditSet::NONE, 1));
        let why = bad.refused.expect("refused");
        assert!(why.contains(r#"unknown value "all""#), "{why}");

        let mut policy = netpol(json!({"podSelector": {}}));
        policy.metadata.annotations = Some([(AUDIT.to_string(), "deny".to_string())].into());
        assert_eq!(policy_facts(&policy).policy.audit, "deny".parse().ok());
        policy.metadata.annotations = Some([(AUDIT.to_string(), "drop".to_string())].into());
        let facts = policy_facts(&policy);
        assert!(facts.refused.is_some(), "a bad annotation is a bad policy");
        assert_eq!(facts.policy.audit, None);

        let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("guard".into()),
            annotations: Some([(AUDIT.to_string(), "pass".to_string())].into()),
            ..Default::default()
        };
        let spec = json!({"priority": 3, "subject": {"namespaces": {}}});
        let anp = admin_policy("AdminNetworkPolicy", &meta, &spec).expect("an ANP");
        assert_eq!(anp.audit.to_string(), "pass");
    }

    const AUDIT: &str = crate::sdn::audit::AUDIT_ANNOTATION;

    fn netpol(spec: serde_json::Value) -> NetworkPolicy {
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
            "spec": spec,
        }))
        .expect("a NetworkPolicy")
    }

    #[test]
    fn a_policy_the_api_serves_parses_as_the_cli_would() {
        let facts = policy_facts(&netpol(json!({
            "podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                         "ports": [{"port": 5432, "protocol": "TCP"}]}],
        })));
        assert_eq!(facts.refused, None);
        assert_eq!(facts.policy.policy_types(), vec!["Ingress"]);
        assert_eq!(facts.policy.ingress.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn a_policy_ofnode_cannot_implement_isolates_what_it_selects() {
        // SCTP... every protocol the API accepts is ofnode's; an over-long rule list is not.
        let rules: Vec<_> = (0..2000).map(|_| json!({})).collect();
        let policy = netpol(json!({
            "podSelector": {"matchLabels": {"app": "db"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": rules,
        }));
        let facts = policy_facts(&policy);
        let why = facts.refused.expect("refused");
        assert!(why.path.starts_with("spec.ingress"), "{why}");
        let stand_in = facts.policy;
        assert_eq!(
            stand_in
                .pod_selector
                .match_labels
                .get("app")
                .map(String::as_str),
            Some("db")
        );
        assert_eq!(stand_in.ingress, Some(Vec::new()));
        assert_eq!(stand_in.egress, Some(Vec::new()));
    }

    #[test]
    fn a_selector_ofnode_cannot_read_isolates_the_whole_namespace_both_ways() {
        let policy = netpol(json!({
            "podSelector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]},
            "ingress": [{}],
        }));
        let facts = policy_facts(&policy);
        assert!(facts.refused.is_some());
        assert!(facts.policy.pod_selector.is_empty());
        assert_eq!(facts.policy.policy_types(), vec!["Ingress", "Egress"]);
    }

    #[test]
    fn pods_become_facts_and_host_network_or_finished_ones_nothing() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": [
                {"name": "http", "containerPort": 8080},
                {"containerPort": 9000},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"podIP": "10.128.2.5", "podIPs": [{"ip": "10.128.2.5"}]},
        }))
        .expect("a Pod");
        let facts = pod_facts(&pod).expect("valid").expect("a pod");
        assert_eq!(facts.node.as_deref(), Some("node-1"));
        assert_eq!(facts.ips, vec!["10.128.2.5".parse::<IpAddr>().unwrap()]);
        let names: Vec<_> = facts
            .ports
            .iter()
            .map(|p| (p.name.as_str(), p.port))
            .collect();
        assert_eq!(names, vec![("dns", 53), ("http", 8080)]);
        let mut host = pod.clone();
        host.spec.as_mut().unwrap().host_network = Some(true);
        assert_eq!(pod_facts(&host), Ok(None));
        let mut done = pod;
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(pod_facts(&done), Ok(None));
    }

    #[test]
    fn admin_policies_parse_as_the_cli_would_and_bad_ones_are_refused_by_field() {
        let meta = |name: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("9".into()),
            ..Default::default()
        };
        let spec = json!({"priority": 5, "subject": {"namespaces": {}},
            "ingress": [{"action": "Deny", "from": [{"namespaces": {}}]}]});
        let anp = admin_policy("AdminNetworkPolicy", &meta("deny-all"), &spec).expect("valid");
        assert_eq!(anp.key(), "anp/deny-all");
        assert_eq!(anp.ingress.len(), 1);
        let mut bad = spec.clone();
        bad["ingress"][0]["action"] = json!("Drop");
        let why = admin_policy("AdminNetworkPolicy", &meta("deny-all"), &bad).unwrap_err();
        assert_eq!(why.path, "spec.ingress[0].action", "{why}");
        let why = admin_policy(
            "BaselineAdminNetworkPolicy",
            &meta("other"),
            &json!({"subject": {"namespaces": {}}}),
        )
        .unwrap_err();
        assert_eq!(why.path, "metadata.name", "{why}");
    }

    #[test]
    fn headless_services_are_nothing_and_sctp_is_refused_by_name() {
        let svc = |spec: serde_json::Value| -> Service {
            serde_json::from_value(
                json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": spec}),
            )
            .expect("a Service")
        };
        assert_eq!(service_facts(&svc(json!({"clusterIP": "None"}))), Ok(None));
        let ok = service_facts(&svc(json!({"clusterIP": "172.30.0.10",
            "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]})))
        .expect("valid")
        .expect("a service");
        assert_eq!(ok.ports.len(), 2);
        let sctp = service_facts(&svc(json!({"clusterIP": "172.30.0.10",
            "ports": [{"port": 80, "protocol": "SCTP"}]})));
        assert!(sctp.unwrap_err().path == "spec.ports[0]");
    }
}
