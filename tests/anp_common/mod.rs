//! What the admin-tier e2e tests share: the network-policy-api conformance suite's world on
//! a two-node cluster in networkpolicy mode — namespaces `network-policy-conformance-<house>`
//! labelled `conformance-house=<house>`, two pods per house (`<name>-0` on node 0, `<name>-1`
//! on node 1) labelled the same, each serving TCP 80 and 8080, UDP 53 and 5353, SCTP 9003 and
//! 9005, with the named ports `web` (TCP 80) and `dns` (UDP 53); the host-network pods
//! `forbidden-forrest/centaur-<i>` (servers in node `1 - i`'s own namespace, on its address,
//! on the suite's host ports); each node known with its address and the label
//! `kubernetes.io/os=linux` (what node peers select) — and probes of one cell.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use ofnode_harness::cluster::{labels, Cluster, ClusterOptions, Control, Mode, CLUSTER_NETWORK};
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

/// The suite's host-network ports (v0.1.8's defaults): TCP HNP[0], HNP[1]; UDP HNP[2],
/// HNP[4]; SCTP HNP[6], HNP[7].
pub const HOST_PORTS: [u16; 8] = [34345, 34346, 34347, 34348, 34349, 34350, 34351, 34352];

pub struct World {
    pub cluster: Cluster,
    /// By `house/pod` (`gryffindor/harry-potter-0`).
    pub pods: BTreeMap<String, Pod>,
    /// Host-network pods by `forbidden-forrest/centaur-<i>`: their node's index.
    pub hosts: BTreeMap<String, usize>,
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
                    address: None,
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
        let mut hosts = BTreeMap::new();
        let linux = labels(&[("kubernetes.io/os", "linux")]);
        for node in cluster.nodes() {
            cluster
                .cluster_node_set(&node.name(), node.underlay_ip, &linux)
                .unwrap();
            // The node asks ARP for a remote pod from tun0's address (br0 takes ARP from tun0
            // only from it), not from the address a host-network server answers from: what
            // arp_announce=2 does.
            node.exec(&["sysctl", "-qw", "net.ipv4.conf.all.arp_announce=2"])
                .unwrap();
            // Pods' traffic to addresses outside the cluster network leaves masqueraded as
            // the node's, as openshift-sdn's node does (its iptables MASQUERADE rule): the
            // answer of another node's host-network server comes back to this node's host.
            node.exec(&[
                "iptables",
                "-t",
                "nat",
                "-A",
                "POSTROUTING",
                "-s",
                CLUSTER_NETWORK,
                "!",
                "-d",
                CLUSTER_NETWORK,
                "-j",
                "MASQUERADE",
            ])
            .unwrap();
            let id = format!("forbidden-forrest/centaur-{}", 1 - node.index);
            let ports = Ports {
                address: Some(node.underlay_ip),
                tcp: vec![HOST_PORTS[0], HOST_PORTS[1]],
                udp: vec![HOST_PORTS[2], HOST_PORTS[4]],
                sctp: vec![HOST_PORTS[6], HOST_PORTS[7]],
            };
            servers.push(PortServers::start(node.netns(), host_key(&id), ports).unwrap());
            hosts.insert(id, node.index);
        }
        World {
            cluster,
            pods,
            hosts,
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

    /// The address and answer of server `id`: a pod, or a host-network pod (its node's).
    fn server(&self, id: &str) -> (Ipv4Addr, String) {
        match self.hosts.get(id) {
            Some(node) => (self.cluster.node(*node).underlay_ip, host_key(id)),
            None => (self.ip(id), self.pod(id).key()),
        }
    }

    /// One try of one cell: true when `from` reached `to` on `protocol`/`port`.
    pub fn reaches(&self, from: &str, to: &str, protocol: L4, port: u16) -> bool {
        let client = self.pod(from);
        let (ip, name) = self.server(to);
        probe(
            &client.netns().path(),
            ip,
            protocol,
            port,
            &name,
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

/// What a host-network server answers: its pod's `namespace/name`.
fn host_key(id: &str) -> String {
    format!("{PREFIX}{id}")
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
