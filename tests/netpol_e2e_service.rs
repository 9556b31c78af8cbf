//! Service traffic under NetworkPolicy, on real packets. A pod's packets to a service leave
//! br0 through tun0; kube-proxy (here: one iptables DNAT rule per service, on every node)
//! sends them to a backend pod, back in through tun0. Without table 25 they would come back
//! as the node's own traffic (reg0=0) and a pod or namespace selector would never match them;
//! with it they carry their pod's VNID again, across nodes too (tun_id), and their egress is
//! judged towards the backend, not the service address.
//!
//! Answers come back from the backend's own address (nothing on the userspace datapath undoes
//! the DNAT on the way back), so the probe takes an answer from any source and checks which
//! pod it names.

mod netpol_common;

use std::net::Ipv4Addr;
use std::time::Duration;

use netpol_common::{policy, start};
use ofnode_harness::probe::udp_from_any;
use ofnode_harness::reachability::Model;
use serde_json::json;

/// UDP/80 of y/b (node 0) and of y/a (node 1).
const TO_Y_B: Ipv4Addr = Ipv4Addr::new(172, 30, 0, 10);
const TO_Y_A: Ipv4Addr = Ipv4Addr::new(172, 30, 0, 11);
const PORT: u16 = 80;
/// Long enough for an answer on a loaded machine; a denied probe costs this much.
const WAIT: Duration = Duration::from_secs(2);

/// Which pod answered `from`'s probe of `service` (None: nobody).
fn answer(model: &Model, from: &str, service: Ipv4Addr) -> Option<String> {
    udp_from_any(&model.pod(from).pod, service, PORT, WAIT)
}

/// Checks every `(client, service, expected answer)`, and fails listing all that differ.
fn check(model: &Model, case: &str, cases: &[(&str, Ipv4Addr, Option<&str>)]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(from, service, want)| {
            let got = answer(model, from, *service);
            (got.as_deref() != *want)
                .then(|| format!("{from} -> {service}: expected {want:?}, got {got:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{case}:\n{}", wrong.join("\n"));
}

#[test]
fn policies_see_the_pod_behind_service_traffic() {
    let (cluster, model) = start();
    let (y_b, y_a) = (model.pod("y/b"), model.pod("y/a"));
    assert_eq!(
        (y_b.node(), y_a.node()),
        (0, 1),
        "the model's layout changed"
    );
    for node in cluster.nodes() {
        node.dnat("udp", TO_Y_B, PORT, y_b.ip()).unwrap();
        node.dnat("udp", TO_Y_A, PORT, y_a.ip()).unwrap();
    }
    // x/a and z/a live on node 0, x/b on node 1: every service is reached from both nodes.
    check(
        &model,
        "no policy",
        &[
            ("x/a", TO_Y_B, Some("y/b")),
            ("x/a", TO_Y_A, Some("y/a")),
            ("z/a", TO_Y_B, Some("y/b")),
            ("x/b", TO_Y_B, Some("y/b")),
        ],
    );

    // Ingress: y lets in only pods labelled pod=a of namespace x (both selectors).
    let ingress = policy(
        "y",
        "from-x-a",
        json!({"podSelector": {}, "ingress": [{"from": [{
            "namespaceSelector": {"matchLabels": {"ns": "x"}},
            "podSelector": {"matchLabels": {"pod": "a"}}
        }]}]}),
    );
    cluster.netpol_apply(&ingress).unwrap();
    check(
        &model,
        "ingress of y from x's pod a",
        &[
            // Same node as the backend, then across nodes (the VNID rides in tun_id).
            ("x/a", TO_Y_B, Some("y/b")),
            ("x/a", TO_Y_A, Some("y/a")),
            // Another namespace, and another pod of x: still denied through the service.
            ("z/a", TO_Y_B, None),
            ("x/b", TO_Y_B, None),
        ],
    );
    cluster.netpol_del("y", "from-x-a").unwrap();

    // Egress: x's pod a may reach only y's pod b; through a service, that is judged against
    // the backend the DNAT chose.
    let egress = policy(
        "x",
        "a-to-y-b",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"],
        "egress": [{"to": [{
            "namespaceSelector": {"matchLabels": {"ns": "y"}},
            "podSelector": {"matchLabels": {"pod": "b"}}
        }]}]}),
    );
    cluster.netpol_apply(&egress).unwrap();
    check(
        &model,
        "egress of x's pod a to y's pod b",
        &[
            ("x/a", TO_Y_B, Some("y/b")),
            ("x/a", TO_Y_A, None),
            ("z/a", TO_Y_A, Some("y/a")),
        ],
    );
}
