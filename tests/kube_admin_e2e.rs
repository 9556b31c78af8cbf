//! Issue 29's admin tiers followed from a real kube-apiserver (issue 28's cluster: two nodes, a
//! private Open vSwitch each, VXLAN between them, the node service account of
//! dist/kubernetes/rbac.yaml). AdminNetworkPolicies and the BaselineAdminNetworkPolicy are
//! created and deleted with kubectl only; every table is probed on real packets between the
//! nine pods of `x`, `y`, `z` spread over both nodes. The socket refuses `anp|banp apply|del`
//! while the node follows the API, and an ANP the node cannot enforce is shown in status with
//! its reason.

use std::time::Duration;

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::reachability::{Model, Probe, Reachability};
use serde_json::{json, Value};

fn start() -> (Cluster, Model) {
    let cluster = Cluster::start_following_kube(ClusterOptions {
        nodes: 2,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap();
    let vnid = |ns: &str| match ns {
        "x" => 11,
        "y" => 12,
        _ => 13,
    };
    let model = Model::create_following_kube(&cluster, vnid).unwrap();
    cluster.wait_kube_synced(Duration::from_secs(60)).unwrap();
    (cluster, model)
}

/// An AdminNetworkPolicy at `priority` denying ingress to pod `pod` of namespace `ns` from
/// namespace `from`.
fn anp_deny(name: &str, priority: u16, ns: &str, pod: &str, from: &str) -> Value {
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": priority,
            "subject": {"pods": {
                "namespaceSelector": {"matchLabels": {"ns": ns}},
                "podSelector": {"matchLabels": {"pod": pod}},
            }},
            "ingress": [{"name": format!("deny-from-{from}"), "action": "Deny",
                         "from": [{"namespaces": {"matchLabels": {"ns": from}}}]}],
        },
    })
}

/// The admin policies node `index` enforces, as `kind/name`.
fn admin_policies(cluster: &Cluster, index: usize) -> Vec<String> {
    let mut all = Vec::new();
    for short in ["anp", "banp"] {
        let out = cluster.node(index).cli(&[short, "list", "--json"]).unwrap();
        let listed: Value = serde_json::from_str(&out).unwrap();
        all.extend(
            listed["admin_policies"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p["kind"].as_str().unwrap(),
                        p["name"].as_str().unwrap()
                    )
                }),
        );
    }
    all
}

/// `kubectl delete RESOURCE NAME`, then waits until no node enforces `kind/name` any more.
fn kube_delete(cluster: &Cluster, resource: &str, short: &str, name: &str) {
    let admin = cluster.kube_admin().unwrap();
    admin.run(&["delete", resource, name]).unwrap();
    let key = format!("{short}/{name}");
    for node in cluster.nodes() {
        node.wait_for(
            Duration::from_secs(30),
            "the admin policy deleted",
            |node| {
                let gone = !admin_policies(cluster, node.index).contains(&key);
                Ok(gone.then_some(()))
            },
        )
        .unwrap();
    }
}

/// The bad objects of kind `kind` node `index` shows: `name: reason`.
fn bad_objects(cluster: &Cluster, index: usize, kind: &str) -> Vec<String> {
    let status = cluster.node(index).status().unwrap();
    status["kubernetes"]["bad_objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["kind"] == kind)
        .map(|b| format!("{}: {}", b["name"].as_str().unwrap(), b["reason"]))
        .collect()
}

#[test]
fn admin_tiers_from_the_api_server_decide_over_and_under_networkpolicy_on_real_packets() {
    let (mut cluster, model) = start();
    let check = |what: &str, expected: Reachability| check_tables(&cluster, &model, what, expected);

    // A NetworkPolicy lets namespace y (and only y) reach x/a.
    let allow_from_y = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-from-y", "namespace": "x"},
        "spec": {"podSelector": {"matchLabels": {"pod": "a"}},
                 "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]},
    });
    cluster.kube_apply("NetworkPolicy", &allow_from_y).unwrap();
    let networkpolicy_only = model.expect(|from, to| to.id() != "x/a" || from.namespace == "y");
    check("the NetworkPolicy alone", networkpolicy_only.clone());

    // An AdminNetworkPolicy denies y → x/a: it decides before the NetworkPolicy's Allow.
    cluster
        .kube_apply("AdminNetworkPolicy", &anp_deny("deny-y", 10, "x", "a", "y"))
        .unwrap();
    for node in 0..2 {
        assert_eq!(admin_policies(&cluster, node), ["anp/deny-y"]);
    }
    check(
        "ANP Deny over the NetworkPolicy's Allow",
        model.expect(|_, to| to.id() != "x/a"),
    );

    // A second one at the same priority is refused by name (the API leaves their order
    // undefined), shown in status, and enforces nothing; once the first leaves that priority,
    // it is enforced without being touched.
    let twin = anp_deny("deny-z", 10, "y", "b", "z");
    cluster.kube_apply("AdminNetworkPolicy", &twin).unwrap();
    for node in 0..2 {
        let bad = bad_objects(&cluster, node, "AdminNetworkPolicy");
        assert!(
            bad.len() == 1 && bad[0].starts_with("deny-z: ") && bad[0].contains("spec.priority"),
            "node {node}: {bad:?}"
        );
        assert_eq!(admin_policies(&cluster, node), ["anp/deny-y"]);
    }
    check(
        "the refused twin enforces nothing",
        model.expect(|_, to| to.id() != "x/a"),
    );

    // Deleted with kubectl: the NetworkPolicy's Allow holds again; the twin takes priority 10.
    kube_delete(&cluster, "adminnetworkpolicy", "anp", "deny-y");
    for node in 0..2 {
        node_wait(&cluster, node, "the twin enforced", |c, n| {
            admin_policies(c, n) == ["anp/deny-z"]
        });
        assert_eq!(
            bad_objects(&cluster, node, "AdminNetworkPolicy"),
            Vec::<String>::new()
        );
    }
    check(
        "ANP deleted, its twin enforced",
        model.expect(|from, to| {
            (to.id() != "x/a" || from.namespace == "y")
                && !(to.id() == "y/b" && from.namespace == "z")
        }),
    );
    kube_delete(&cluster, "adminnetworkpolicy", "anp", "deny-z");
    check("every ANP deleted", networkpolicy_only.clone());

    // The baseline denies every ingress of namespace z, which no NetworkPolicy selects, and
    // leaves x/a to the NetworkPolicy that selects it.
    let baseline = json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "BaselineAdminNetworkPolicy",
        "metadata": {"name": "default"},
        "spec": {
            "subject": {"namespaces": {}},
            "ingress": [{"name": "deny-from-z", "action": "Deny",
                         "from": [{"namespaces": {"matchLabels": {"ns": "z"}}}]}],
        },
    });
    cluster
        .kube_apply("BaselineAdminNetworkPolicy", &baseline)
        .unwrap();
    check(
        "baseline Deny from z, except where a NetworkPolicy selects the pod",
        model.expect(|from, to| {
            if to.id() == "x/a" {
                from.namespace == "y"
            } else {
                from.namespace != "z"
            }
        }),
    );

    // The socket refuses what the API owns, naming where the truth lives; nothing changes.
    let node = cluster.node(0);
    let flows = node.flows().unwrap();
    let file = node.ovs().dir().join("anp.json");
    std::fs::write(&file, anp_deny("by-hand", 20, "x", "b", "y").to_string()).unwrap();
    let file = file.display().to_string();
    let refused: [&[&str]; 4] = [
        &["anp", "apply", "--file", &file],
        &["anp", "del", "--name", "deny-y"],
        &["banp", "apply", "--file", &file],
        &["banp", "del"],
    ];
    for args in refused {
        let err = node.cli(args).unwrap_err().to_string();
        assert!(
            err.contains("follows the Kubernetes API server at https://")
                && err.contains("with kubectl"),
            "ofnode {}: {err}",
            args.join(" ")
        );
    }
    assert_eq!(
        node.flows().unwrap(),
        flows,
        "a refused input changed the switch"
    );

    kube_delete(&cluster, "baselineadminnetworkpolicy", "banp", "default");
    check("the baseline deleted", networkpolicy_only.clone());

    // A cluster without network-policy-api's CRDs (most do not install them): nodes started
    // there are synced without the admin kinds and enforce their NetworkPolicies; once the
    // CRDs are installed, a node's next look starts their watchers and an ANP is enforced.
    for node in 0..2 {
        cluster.node_mut(node).daemon_mut().unwrap().stop();
    }
    let crds = [
        "adminnetworkpolicies.policy.networking.k8s.io",
        "baselineadminnetworkpolicies.policy.networking.k8s.io",
    ];
    let admin = cluster.kube_admin().unwrap();
    admin
        .run(&["delete", "crd", crds[0], crds[1], "--wait=true"])
        .unwrap();
    for node in 0..2 {
        cluster
            .node_mut(node)
            .daemon_mut()
            .unwrap()
            .spawn()
            .unwrap();
    }
    cluster
        .wait_kube_synced(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("without the admin CRDs: {e}\n{}", cluster.diagnostics()));
    check_tables(
        &cluster,
        &model,
        "no admin CRDs: the NetworkPolicy alone",
        networkpolicy_only,
    );
    cluster.kube_api().unwrap().install_crds().unwrap();
    cluster
        .kube_apply("AdminNetworkPolicy", &anp_deny("deny-y", 10, "x", "a", "y"))
        .unwrap();
    for node in 0..2 {
        cluster
            .node(node)
            .wait_for(
                Duration::from_secs(90),
                "the CRDs installed later, an ANP enforced",
                |_| Ok((admin_policies(&cluster, node) == ["anp/deny-y"]).then_some(())),
            )
            .unwrap();
    }
    check_tables(
        &cluster,
        &model,
        "the CRDs installed later: ANP Deny over the NetworkPolicy's Allow",
        model.expect(|_, to| to.id() != "x/a"),
    );
}

/// Probes every pair on TCP and UDP port 80; panics with the tables when they are not `expected`.
fn check_tables(cluster: &Cluster, model: &Model, what: &str, expected: Reachability) {
    model
        .check(&[(Probe::TCP80, &expected), (Probe::UDP80, &expected)])
        .unwrap_or_else(|report| {
            panic!("{what}:\n{report}\n{}", cluster.diagnostics());
        })
}

/// Waits up to 30 s on node `index` for `ready`.
fn node_wait(cluster: &Cluster, index: usize, what: &str, ready: impl Fn(&Cluster, usize) -> bool) {
    cluster
        .node(index)
        .wait_for(Duration::from_secs(30), what, |_| {
            Ok(ready(cluster, index).then_some(()))
        })
        .unwrap();
}
