//! The world of the NetworkPolicy bench (benches/netpol.rs), which the admin tiers' bench
//! (benches/anp.rs) builds on: 50 namespaces in 5 teams, 198 local pods as br0 ports, 10
//! policies per namespace, and the probe pair whose first changed answer times enforcement.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use ofnode_harness::cluster::{Cluster, Endpoint, Pod};
use ofnode_harness::reachability::{probe_once, Probe, Servers};
use serde_json::json;

pub const NAMESPACES: usize = 50;
pub const POLICIES_PER_NAMESPACE: usize = 10;
pub const LOCAL_PORTS: usize = 198;
/// App labels: remote pods have 10, the ~4 local pods of a namespace 4 (each a policy target).
pub const APPS: usize = 10;
pub const LOCAL_APPS: usize = 4;
pub const TEAMS: usize = 5;
/// Each probe's timeout.
pub const PROBE_MS: u64 = 50;

pub fn namespace(i: usize) -> String {
    format!("ns{i}")
}

pub fn bench_policy(ns: usize, k: usize, variant: usize) -> serde_json::Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": format!("p{k}"), "namespace": namespace(ns)},
        "spec": {
            "podSelector": {"matchLabels": {"app": format!("a{}", k % LOCAL_APPS)}},
            "ingress": [{
                "from": [{
                    "namespaceSelector": {"matchLabels": {"team": format!("t{}", (k + variant) % TEAMS)}},
                    "podSelector": {"matchLabels": {"app": format!("a{}", (k + 1) % APPS)}}
                }],
                "ports": [
                    {"protocol": "TCP", "port": 8000, "endPort": 8080 + variant},
                    {"protocol": "UDP", "port": 53}
                ]
            }]
        }
    })
}

/// The probe pair of one node: a client and a TCP server, not selected by any bench policy.
pub struct ProbePair {
    pub client: Pod,
    pub server: Pod,
    pub _servers: Servers,
}

/// Probes the pair's server over and over until a probe connects (`connected`) or does not;
/// returns when that probe started, from `since`.
pub fn first_probe_seeing(pair: &ProbePair, connected: bool, since: Instant) -> Duration {
    let path = pair.client.netns().path();
    let server = pair.server.ip;
    loop {
        let began = since.elapsed();
        let path = path.clone();
        let seen = std::thread::spawn(move || {
            probe_once(
                &path,
                server,
                "probe",
                Probe::TCP80,
                Duration::from_millis(PROBE_MS),
            )
        })
        .join()
        .unwrap_or(!connected);
        assert!(
            began < Duration::from_secs(10),
            "the probe never saw the change"
        );
        if seen == connected {
            return began;
        }
    }
}

/// 198 veths in the node's namespace, each a pod of its namespace (`ofnode pod add`).
pub fn add_local_ports(cluster: &Cluster) {
    let node = cluster.node(0);
    node.netns()
        .add_veth_pairs("bp", 0..LOCAL_PORTS)
        .expect("creating veths");
    for i in 0..LOCAL_PORTS {
        let ip = Ipv4Addr::from(u32::from(node.subnet) + 100 + i as u32).to_string();
        let ns = i % NAMESPACES;
        let (vnid, app) = (
            (100 + ns).to_string(),
            format!("app=a{}", (i / NAMESPACES) % LOCAL_APPS),
        );
        node.cli(&[
            "pod",
            "add",
            "--pod",
            &format!("{}/local-{i}", namespace(ns)),
            "--veth",
            &format!("bp{i}"),
            "--ip",
            &ip,
            "--mac",
            &format!("0a:58:00:00:{:02x}:{:02x}", i >> 8, i & 0xff),
            "--sandbox",
            &format!("{:064x}", 0xb000 + i),
            "--vnid",
            &vnid,
            "--label",
            &app,
        ])
        .expect("pod add");
    }
}
