//! The worlds of the scale benches (benches/store.rs on the core alone, benches/scale.rs through
//! the API on a real Open vSwitch), written once so both measure the same world: 200 pods on this
//! node and the rest on others, in namespaces of at most 100 pods; teams of 10 namespaces (their
//! `team` label); 10 policies per namespace, each selecting an app and allowing one app of one
//! team's namespaces on a TCP range and UDP 53. A policy's peers are about 100 pods whatever the
//! cluster's size, so a bigger world adds pods a change does not touch.

use std::net::{IpAddr, Ipv4Addr};

use ofnode::sdn::{Labels, Namespace, PodInfo, PodKey, Vnid};

pub const PODS_PER_NAMESPACE: usize = 100;
pub const LOCAL_PODS: usize = 200;
pub const POLICIES_PER_NAMESPACE: usize = 10;
pub const APPS: usize = 10;
/// Namespaces per team (per value of the `team` label).
pub const NAMESPACES_PER_TEAM: usize = 10;

pub fn labels(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

pub fn namespace(n: usize) -> Namespace {
    Namespace {
        name: format!("ns{n}"),
        vnid: Vnid::new(100 + n as u32).unwrap(),
        labels: labels(&[("team", format!("t{}", n / NAMESPACES_PER_TEAM))]),
        audit: Default::default(),
    }
}

/// Pod `i` of a world of `namespaces`: local for the first `LOCAL_PODS`.
pub fn pod_key(i: usize, namespaces: usize) -> PodKey {
    PodKey::new(&format!("ns{}", i % namespaces), &format!("pod-{i}")).unwrap()
}

/// Pod `i`'s labels in a world of `namespaces`: the pods of one namespace have several apps.
pub fn pod_labels(i: usize, namespaces: usize, variant: usize) -> Labels {
    labels(&[("app", format!("a{}", (i / namespaces + variant) % APPS))])
}

pub fn remote_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 129, 0, 0)) + i as u32)
}

pub fn remote_info(i: usize, namespaces: usize, variant: usize) -> PodInfo {
    PodInfo {
        labels: pod_labels(i, namespaces, variant),
        ips: vec![IpAddr::V4(remote_ip(i))],
        local: false,
        ports: Vec::new(),
    }
}

/// Policy `name` of namespace `ns` (of `namespaces`), for the pods of app `k`: peers of its
/// own team's namespaces (variant 0) or a neighbour team's.
pub fn policy_json(ns: usize, namespaces: usize, name: usize, k: usize, variant: usize) -> String {
    let teams = namespaces.div_ceil(NAMESPACES_PER_TEAM);
    let app = k % APPS;
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"p{name}","namespace":"ns{ns}"}},
            "spec":{{"podSelector":{{"matchLabels":{{"app":"a{app}"}}}},
              "ingress":[{{"from":[{{"namespaceSelector":{{"matchLabels":{{"team":"t{team}"}}}},
                                     "podSelector":{{"matchLabels":{{"app":"a{peer}"}}}}}}],
                           "ports":[{{"protocol":"TCP","port":8000,"endPort":{end}}},
                                    {{"protocol":"UDP","port":53}}]}}]}}}}"#,
        team = (ns / NAMESPACES_PER_TEAM + variant) % teams,
        peer = (k + 1 + variant) % APPS,
        end = 8080 + variant,
    )
}

/// A world of `pods` pods and `policies` policies.
#[derive(Debug, Clone, Copy)]
pub struct World {
    pub pods: usize,
    pub policies: usize,
}

impl World {
    pub fn namespaces(&self) -> usize {
        self.pods
            .div_ceil(PODS_PER_NAMESPACE)
            .max(self.policies.div_ceil(POLICIES_PER_NAMESPACE))
    }

    pub fn teams(&self) -> usize {
        self.namespaces().div_ceil(NAMESPACES_PER_TEAM)
    }
}
