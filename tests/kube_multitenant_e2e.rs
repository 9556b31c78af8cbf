//! Issue 28 item 7, multitenant mode: two nodes follow a real kube-apiserver; a pod's VNID is
//! its namespace's NetNamespace `netid` (the harness plays the controller that allocates them,
//! and the kubelet that runs pods through `ofnode-cni`). Tenants are isolated on real packets,
//! `netid` 0 reaches everyone, a NetNamespace joined to another tenant's VNID moves its pods
//! (the seed's UpdatePod), and an EgressNetworkPolicy object is enforced for its tenant only.
//! Then the real `ofnode controller` allocates the VNIDs and subnets the nodes follow.

use std::net::Ipv4Addr;
use std::time::Duration;

use ofnode_harness::cluster::{reachability, Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::kube::{ControllerOptions, NodeObject, PodObject};
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

/// Items 2 and 3 together: the real `ofnode controller` (its own service account, the roles
/// of `dist/kubernetes/rbac.yaml`) allocates what the nodes follow. Namespaces created with
/// plain `kubectl create namespace` get their NetNamespace from it; CNI waits for that VNID
/// and the pods are isolated by it across nodes. A Node that joins gets a HostSubnet from it
/// (its InternalIP as hostIP), which every node routes to; the Node deleted, the subnet goes
/// from every node. The nodes' own HostSubnets (the harness's, made before the controller ran)
/// are kept as they are.
#[test]
fn the_controller_allocates_the_vnids_and_subnets_the_nodes_follow() {
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_ofnode"));
    let cluster = Cluster::start_following_kube(ClusterOptions {
        nodes: 2,
        mode: Mode::Multitenant,
        control: Control::Ofnode(binary.clone()),
        echo: false,
    })
    .unwrap();
    let api = cluster.kube_api().unwrap();
    let credentials = api
        .kubeconfig_for_service_account("ofnode", "ofnode-controller")
        .unwrap();
    let controller = api
        .start_controller(
            &binary,
            &credentials,
            &ControllerOptions::new("ctl-a", "multitenant"),
        )
        .unwrap();
    controller.wait_leading(Duration::from_secs(30)).unwrap();
    let subnets_before = host_subnets(&cluster);

    let admin = cluster.kube_admin().unwrap();
    for ns in ["t1", "t2"] {
        admin.run(&["create", "namespace", ns]).unwrap();
    }
    // No NetNamespace is made by the test: CNI ADD waits until the controller's reaches the node.
    let run = |node: usize, ns: &str, name: &str| {
        cluster
            .start_kube_pod(node, PodObject::new(ns, name, ""))
            .unwrap()
    };
    let a = run(0, "t1", "a");
    let b = run(1, "t1", "b");
    let c = run(1, "t2", "c");
    cluster.wait_kube_synced(Duration::from_secs(30)).unwrap();
    let netid = |ns: &str| -> u64 {
        let out = admin
            .run(&["get", "netnamespace", ns, "-o", "jsonpath={.netid}"])
            .unwrap();
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("netid of {ns}: {out:?}"))
    };
    let (t1, t2) = (netid("t1"), netid("t2"));
    assert!(t1 != t2 && t1 != 0 && t2 != 0, "netids {t1} and {t2}");
    for (pod, vnid) in [(&a, t1), (&b, t1), (&c, t2)] {
        let listed: serde_json::Value = serde_json::from_str(
            &cluster
                .node(pod.pod.node)
                .cli(&["pod", "list", "--json"])
                .unwrap(),
        )
        .unwrap();
        let key = pod.pod.key();
        let on_node = listed["pods"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["pod"] == key.as_str())
            .unwrap_or_else(|| panic!("{key} not on its node: {listed}"));
        assert_eq!(on_node["vnid"], vnid, "{key}: {on_node}");
    }
    assert_reachability(
        &cluster,
        &[
            ("t1/b -> t1/a (node 1 -> 0)", &b, a.pod.ip, true),
            ("t2/c -> t1/a (node 1 -> 0)", &c, a.pod.ip, false),
            ("t2/c -> t1/b (same node)", &c, b.pod.ip, false),
        ],
    );

    // A Node joins: the controller gives it a subnet, and every node routes to it.
    admin
        .create_node(&NodeObject::new("joining", Ipv4Addr::new(192, 0, 2, 50)))
        .unwrap();
    let routed = |count: u64| {
        for node in cluster.nodes() {
            node.wait_for(
                Duration::from_secs(30),
                &format!("{count} other nodes' subnets"),
                |node| Ok((node.status()?["host_subnets"] == count).then_some(())),
            )
            .unwrap();
        }
    };
    routed(2);
    let joined = admin
        .run(&["get", "hostsubnet", "joining", "-o", "json"])
        .unwrap();
    let joined: serde_json::Value = serde_json::from_str(&joined).unwrap();
    assert_eq!(joined["hostIP"], "192.0.2.50", "{joined}");
    assert_eq!(
        joined["metadata"]["annotations"]["ofnode.io/allocated-by"], "ctl-a",
        "{joined}"
    );
    admin.run(&["delete", "node", "joining"]).unwrap();
    routed(1);
    assert_eq!(
        host_subnets(&cluster),
        subnets_before,
        "the nodes' own HostSubnets changed"
    );
    drop(controller);
}

/// Every HostSubnet's name, hostIP and subnet.
fn host_subnets(cluster: &Cluster) -> Vec<(String, String, String)> {
    let out = cluster
        .kube_admin()
        .unwrap()
        .run(&["get", "hostsubnets", "-o", "json"])
        .unwrap();
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|hs| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&hs["metadata"]["name"]),
                text(&hs["hostIP"]),
                text(&hs["subnet"]),
            )
        })
        .collect()
}
