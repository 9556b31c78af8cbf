//! What the admin-tier e2e tests share: the network-policy-api conformance suite's world on
//! a two-node cluster in networkpolicy mode — namespaces `network-policy-conformance-<house>`
//! labelled `conformance-house=<house>`, two pods per house (`<name>-0` on node 0, `<name>-1`
//! on node 1) labelled the same, each serving TCP 80 and 8080, UDP 53 and 5353, SCTP 9003 and
//! 9005, with the named ports `web` (TCP 80) and `dns` (UDP 53) — and probes of one cell.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use ofnode_harness::cluster::{labels, Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::l4::{probe, PortServers, Ports, L4};
use ofnode_harness::{Endpoint, Pod};
use serde_json::Value;

pub const PREFIX: &str = "network-policy-conformance-";
/// House, StatefulSet name, VNID.
pub const HOUSES: [(&str, &str, u32); 4] = [
    ("gryffindor", "harry-potter", 21),
    ("slytherin", "draco-malfoy", 22),
    ("hufflepuff", "cedric-diggory", 23),
    ("ravenclaw", "luna-lovegood", 24),
];
/// How long a probe waits (agnhost connect's is 3 s; a dropped probe costs this much).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct World {
    pub cluster: Cluster,
    /// By `house/pod` (`gryffindor/harry-potter-0`).
    pub pods: BTreeMap<String, Pod>,
    _servers: Vec<PortServers>,
}

impl World {
    pub fn start() -> World {
        let cluster = Cluster::start(ClusterOptions {
            nodes: 2,
            mode: Mode::NetworkPolicy,
            control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
            echo: false,
        })
        .unwrap();
        let mut pods = BTreeMap::new();
        let mut servers = Vec::new();
        for (house, set, vnid) in HOUSES {
            let namespace = format!("{PREFIX}{house}");
            let house_label = labels(&[("conformance-house", house)]);
            cluster
                .namespace_set(&namespace, vnid, &house_label)
                .unwrap();
            for index in 0..2 {
                let name = format!("{set}-{index}");
                let pod = cluster
                    .add_named_pod(index, (&namespace, &name), vnid, &house_label)
                    .unwrap();
                let ports = Ports {
                    tcp: vec![80, 8080],
                    udp: vec![53, 5353],
                    sctp: vec![9003, 9005],
                };
                servers.push(PortServers::start(pod.netns(), pod.key(), ports).unwrap());
                pods.insert(format!("{house}/{name}"), pod);
            }
        }
        for pod in pods.values() {
            cluster.announce_remote_pod(pod).unwrap();
            cluster
                .pod_ports(pod, &["web=80/TCP", "dns=53/UDP"])
                .unwrap();
        }
        World {
            cluster,
            pods,
            _servers: servers,
        }
    }

    pub fn pod(&self, id: &str) -> &Pod {
        self.pods
            .get(id)
            .unwrap_or_else(|| panic!("no pod {id} in the world"))
    }

    pub fn ip(&self, id: &str) -> Ipv4Addr {
        self.pod(id).ip
    }

    /// One try of one cell: true when `from` reached `to` on `protocol`/`port`.
    pub fn reaches(&self, from: &str, to: &str, protocol: L4, port: u16) -> bool {
        let (client, server) = (self.pod(from), self.pod(to));
        probe(
            &client.netns().path(),
            server.ip,
            protocol,
            port,
            &server.key(),
            PROBE_TIMEOUT,
        )
    }

    /// A cell judged as the e2e tests judge: a cell expected to connect gets a second try
    /// (the first packet of a pair may meet an unresolved neighbour); a cell expected to be
    /// dropped fails on any try that connects. Returns what was seen, per try.
    pub fn cell(&self, from: &str, to: &str, protocol: L4, port: u16, expect: bool) -> Vec<bool> {
        let first = self.reaches(from, to, protocol, port);
        if expect && !first {
            return vec![first, self.reaches(from, to, protocol, port)];
        }
        vec![first]
    }

    /// Applies one object (NetworkPolicy, AdminNetworkPolicy or BaselineAdminNetworkPolicy)
    /// on every node.
    pub fn apply(&self, object: &Value) -> Result<(), String> {
        match object["kind"].as_str() {
            Some("NetworkPolicy") => self
                .cluster
                .netpol_apply(&as_kubectl_prints(object))
                .map_err(|e| e.to_string()),
            _ => self
                .cluster
                .admin_apply(&serde_json::to_string(object).unwrap_or_default())
                .map_err(|e| e.to_string()),
        }
    }

    /// Deletes one object on every node.
    pub fn delete(&self, object: &Value) -> Result<(), String> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let result = match object["kind"].as_str() {
            Some("NetworkPolicy") => {
                let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
                self.cluster.netpol_del(ns, name)
            }
            Some("BaselineAdminNetworkPolicy") => self.cluster.admin_del("banp", name),
            _ => self.cluster.admin_del("anp", name),
        };
        result.map_err(|e| e.to_string())
    }
}

/// A NetworkPolicy as the API server stores and kubectl prints it: a null podSelector is `{}`.
fn as_kubectl_prints(object: &Value) -> Value {
    let mut object = object.clone();
    if object["spec"]["podSelector"].is_null() {
        object["spec"]["podSelector"] = serde_json::json!({});
    }
    object
}

/// The YAML documents of a manifest, as JSON values.
pub fn documents(manifest: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(manifest)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("a manifest document"))
        .collect()
}

/// A probe row's protocol.
pub fn protocol(name: &str) -> L4 {
    L4::parse(name).unwrap_or_else(|| panic!("protocol {name}"))
}
