//! Issue 28 item 7, multitenant mode: two nodes follow a real kube-apiserver; a pod's VNID is
//! its namespace's NetNamespace `netid` (the harness plays the controller that allocates them,
//! and the kubelet that runs pods through `ofnode-cni`). Tenants are isolated on real packets,
//! `netid` 0 reaches everyone, a NetNamespace joined to another tenant's VNID moves its pods
//! (the seed's UpdatePod), and an EgressNetworkPolicy object is enforced for its tenant only.

use std::net::Ipv4Addr;
use std::time::Duration;

use ofnode_harness::cluster::{reachability, Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::kube::PodObject;
use serde_json::json;

fn assert_reachability(cluster: &Cluster, cases: &[(&str, &dyn Endpoint, Ipv4Addr, bool)]) {
    let pairs: Vec<(&dyn Endpoint, Ipv4Addr)> =
        cases.iter().map(|(_, from, to, _)| (*from, *to)).collect();
    let wrong: Vec<String> = cases
        .iter()
        .zip(reachability(&pairs))
        .filter_map(|((name, _, _, expected), result)| {
            let reached = result.unwrap();
            (reached != *expected)
                .then(|| format!("{name}: reached {reached}, expected {expected}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{}\n{}",
        wrong.join("\n"),
        cluster.diagnostics()
    );
}

#[test]
fn tenants_from_netnamespaces_and_an_egress_policy_object() {
    let cluster = Cluster::start_following_kube(ClusterOptions {
        nodes: 2,
        mode: Mode::Multitenant,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap();
    cluster.create_kube_namespace("a", 10, &[]).unwrap();
    cluster.create_kube_namespace("b", 11, &[]).unwrap();
    cluster.create_kube_namespace("ops", 0, &[]).unwrap();
    let run = |node: usize, ns: &str, name: &str| {
        cluster
            .start_kube_pod(node, PodObject::new(ns, name, ""))
            .unwrap()
    };
    let a0 = run(0, "a", "a0");
    let a1 = run(1, "a", "a1");
    let b0 = run(0, "b", "b0");
    let b1 = run(1, "b", "b1");
    let ops = run(1, "ops", "ops");
    cluster.wait_kube_synced(Duration::from_secs(30)).unwrap();
    assert_eq!(a0.pod.node, 0);
    assert_reachability(
        &cluster,
        &[
            ("same tenant, across nodes", &a0, a1.ip(), true),
            ("other tenant, same node", &a0, b0.ip(), false),
            ("other tenant, across nodes", &b1, a0.ip(), false),
            ("netid 0 reaches tenant a", &ops, a0.ip(), true),
            ("netid 0 reaches tenant b", &ops, b0.ip(), true),
        ],
    );

    // b joins a's network (its NetNamespace takes netid 10, as `oc adm pod-network
    // join-projects` does): b's pods move to VNID 10 on every node.
    let join = json!({"apiVersion": "network.openshift.io/v1", "kind": "NetNamespace",
        "metadata": {"name": "b"}, "netname": "b", "netid": 10});
    cluster.kube_apply("NetNamespace", &join).unwrap();
    assert_reachability(
        &cluster,
        &[
            ("joined: b -> a, same node", &b0, a0.ip(), true),
            ("joined: a -> b, across nodes", &a0, b1.ip(), true),
        ],
    );

    // An EgressNetworkPolicy of namespace b denies the hosts outside the cluster: b's (and,
    // sharing its VNID, a's) pods no longer reach them; netid 0 still does.
    let external = cluster.add_external_host(0).unwrap();
    assert_reachability(&cluster, &[("no policy", &b0, external.ip, true)]);
    let deny = json!({"apiVersion": "network.openshift.io/v1", "kind": "EgressNetworkPolicy",
        "metadata": {"name": "deny-outside", "namespace": "b"},
        "spec": {"egress": [{"type": "Deny", "to": {"cidrSelector": "198.51.100.0/24"}}]}});
    cluster.kube_apply("EgressNetworkPolicy", &deny).unwrap();
    let ops0 = run(0, "ops", "ops0");
    cluster.wait_kube_synced(Duration::from_secs(30)).unwrap();
    assert_reachability(
        &cluster,
        &[
            ("denied tenant", &b0, external.ip, false),
            ("the VNID's other namespace", &a0, external.ip, false),
            ("netid 0 unaffected", &ops0, external.ip, true),
            ("the tenant still reaches its pods", &b0, a1.ip(), true),
        ],
    );
    let status = cluster.node(0).status().unwrap();
    assert_eq!(status["egress_vnids"], 1, "{status}");
    cluster
        .kube_admin()
        .unwrap()
        .run(&["delete", "egressnetworkpolicy", "deny-outside", "-n", "b"])
        .unwrap();
    cluster
        .node(0)
        .wait_for(Duration::from_secs(30), "the egress policy gone", |node| {
            Ok((node.status()?["egress_vnids"] == 0).then_some(()))
        })
        .unwrap();
    assert_reachability(&cluster, &[("policy deleted", &b0, external.ip, true)]);
}
