//! Issue 28 items 2, 4, 5 and the node's half of 6, against a real kube-apiserver: two nodes
//! follow it (`[kubernetes]` only, the node service account of dist/kubernetes/rbac.yaml).
//! The socket refuses what the API owns; CNI takes a pod's VNID and labels from the API and
//! fails clearly without them; a policy ofnode cannot implement fails closed and is shown; a
//! watch broken while objects change relists and sweeps; a node restarted while objects
//! changed converges; the node's credentials cannot change what nodes program from; a wrong
//! CA is refused; the DaemonSet manifest is accepted by the server; the CRD types agree with
//! dist/kubernetes/crds/.

use std::time::Duration;

use ofnode::kube::crd;
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, KubePod, Mode};
use ofnode_harness::kube::PodObject;
use serde_json::{json, Value};

fn start() -> Cluster {
    Cluster::start_following_kube(ClusterOptions {
        nodes: 2,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap()
}

fn policy(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// `ofnode netpol list` of a node: `namespace/name` of each policy.
fn netpols(cluster: &Cluster, node: usize) -> Vec<String> {
    let out = cluster.node(node).cli(&["netpol", "list"]).unwrap();
    out.lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The other node's pods node `node` knows (`pod remote list --json`), by key.
fn remote_pods(cluster: &Cluster, node: usize) -> Vec<String> {
    let out = cluster
        .node(node)
        .cli(&["pod", "remote", "list", "--json"])
        .unwrap();
    let value: Value = serde_json::from_str(&out).unwrap();
    let list = value["remote_pods"]
        .as_array()
        .or(value.as_array())
        .cloned()
        .unwrap_or_default();
    list.iter()
        .filter_map(|p| p["pod"].as_str().map(str::to_string))
        .collect()
}

/// GET /metrics of a node's daemon.
fn metrics(cluster: &Cluster, node: usize) -> String {
    use std::io::{Read, Write};
    let api = &cluster.node(node).daemon().unwrap().api;
    let mut stream = std::os::unix::net::UnixStream::connect(api).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: ofnode\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

fn kube_status(cluster: &Cluster, node: usize) -> Value {
    cluster.node(node).status().unwrap()["kubernetes"].clone()
}

fn resource<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["resources"]
        .as_array()
        .and_then(|list| list.iter().find(|r| r["kind"] == kind))
        .unwrap_or(&Value::Null)
}

fn pod(cluster: &Cluster, node: usize, ns: &str, name: &str) -> KubePod {
    cluster
        .start_kube_pod(
            node,
            PodObject::new(ns, name, "")
                .label("app", name)
                .port("http", 8080, "TCP"),
        )
        .unwrap()
}

#[test]
fn the_socket_refuses_what_the_api_owns_and_cni_takes_the_pod_from_the_api() {
    let cluster = start();
    cluster
        .create_kube_namespace("web", 21, &[("team", "a")])
        .unwrap();
    let a = pod(&cluster, 0, "web", "a");
    let b = pod(&cluster, 1, "web", "b");
    cluster.wait_kube_synced(Duration::from_secs(30)).unwrap();
    assert!(a.reaches(b.ip()).unwrap(), "{}", cluster.diagnostics());

    // Every input the API owns is refused, saying where the truth lives; nothing changes.
    let node = cluster.node(0);
    let flows = node.flows().unwrap();
    let file = node.ovs().dir().join("np.json");
    std::fs::write(
        &file,
        policy("web", "p", json!({"podSelector": {}})).to_string(),
    )
    .unwrap();
    let file = file.display().to_string();
    let refused: [&[&str]; 8] = [
        &["netpol", "apply", "--file", &file],
        &["pod", "label", "--pod", "web/a", "team=b"],
        &["pod", "ports", "--pod", "web/a", "http=8080/TCP"],
        &["netpol", "del", "--namespace", "web", "--name", "p"],
        &["namespace", "set", "--name", "other", "--vnid", "30"],
        &[
            "pod",
            "remote",
            "set",
            "--pod",
            "web/c",
            "--ip",
            "10.128.2.99",
        ],
        &[
            "hostsubnet",
            "add",
            "--host-ip",
            "192.0.2.99",
            "--subnet",
            "10.128.20.0/23",
        ],
        &[
            "setup",
            "--cluster-network",
            "10.128.0.0/14",
            "--service-network",
            "172.30.0.0/16",
            "--local-subnet",
            "10.128.0.0/23",
            "--gateway",
            "10.128.0.1",
            "--mode",
            "networkpolicy",
        ],
    ];
    for args in refused {
        let err = node.cli(args).unwrap_err().to_string();
        assert!(
            err.contains("follows the Kubernetes API server at https://192.0.2.1:6443"),
            "ofnode {}: {err}",
            args.join(" ")
        );
    }
    assert_eq!(
        node.flows().unwrap(),
        flows,
        "a refused input changed the switch"
    );

    // The pod's labels came from its Pod object; its named port reached the other node.
    let status = node.cli(&["pod", "remote", "list", "--json"]).unwrap();
    assert!(
        status.contains("\"web/b\"") && status.contains("\"http\""),
        "{status}"
    );

    // A Service with a cluster IP becomes the seed's service rules on every node; a headless
    // one makes none; deleted, the rules go.
    let service = |name: &str, cluster_ip: Option<&str>| {
        let mut spec = json!({"ports": [{"port": 80, "protocol": "TCP"}]});
        if let Some(ip) = cluster_ip {
            spec["clusterIP"] = json!(ip);
        }
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": "web"}, "spec": spec})
    };
    cluster
        .kube_apply("Service", &service("front", Some("172.30.0.80")))
        .unwrap();
    cluster
        .kube_apply("Service", &service("headless", Some("None")))
        .unwrap();
    for node in cluster.nodes() {
        let flows = node.flows().unwrap();
        assert!(
            flows
                .iter()
                .any(|f| f.contains("table=60") && f.contains("nw_dst=172.30.0.80")),
            "{flows:?}"
        );
        assert_eq!(node.status().unwrap()["services"], 1);
    }
    let admin = cluster.kube_admin().unwrap();
    admin
        .run(&["delete", "service", "front", "-n", "web"])
        .unwrap();
    for node in cluster.nodes() {
        node.wait_for(
            Duration::from_secs(30),
            "the service's rules gone",
            |node| Ok((node.status()?["services"] == 0).then_some(())),
        )
        .unwrap();
    }

    // A CNI ADD for a pod the API does not have fails after pod_wait_secs, saying what it
    // waited for; nothing is left behind.
    let err = cluster
        .start_kube_pod_without_object(0, "web", "ghost")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("waited 10 s for the Pod object web/ghost"),
        "{err}"
    );
    assert!(!node
        .cli(&["pod", "list"])
        .unwrap_or_default()
        .contains("web/ghost"));
}

#[test]
fn faults_bad_objects_relists_and_restarts_converge() {
    let mut cluster = start();
    cluster.create_kube_namespace("x", 11, &[]).unwrap();
    cluster.create_kube_namespace("y", 12, &[]).unwrap();
    let a = pod(&cluster, 0, "x", "a");
    let b = pod(&cluster, 1, "x", "b");
    let c = pod(&cluster, 1, "y", "c");
    cluster.wait_kube_synced(Duration::from_secs(30)).unwrap();
    assert!(b.reaches(a.ip()).unwrap());

    // A policy the API accepts and ofnode cannot implement (more rules than one policy may
    // have) fails closed: the pods it selects are isolated, it is listed as bad.
    let rules: Vec<Value> = (0..101)
        .map(|_| json!({"from": [{"podSelector": {}}]}))
        .collect();
    let bad = policy(
        "x",
        "too-big",
        json!({"podSelector": {"matchLabels": {"app": "a"}}, "ingress": rules}),
    );
    let bad_rv = cluster.kube_apply("NetworkPolicy", &bad).unwrap();
    assert!(
        !b.reaches(a.ip()).unwrap(),
        "the bad policy's pod is not isolated"
    );
    assert!(
        c.reaches(b.ip()).unwrap(),
        "a pod the bad policy does not select was isolated"
    );
    for node in 0..2 {
        let status = kube_status(&cluster, node);
        let listed = status["bad_objects"].to_string();
        assert!(
            listed.contains("x/too-big") && listed.contains("spec.ingress"),
            "{status}"
        );
        assert_eq!(resource(&status, "NetworkPolicy")["bad"], 1, "{status}");
    }
    let metrics = metrics(&cluster, 0);
    assert!(
        metrics.contains("ofnode_kube_bad_objects{kind=\"NetworkPolicy\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("ofnode_kube_connected 1"), "{metrics}");
    assert!(
        metrics.contains(&format!(
            "ofnode_kube_applied_resource_version{{kind=\"NetworkPolicy\"}} {bad_rv}"
        )) && metrics.contains("ofnode_kube_last_event_age_seconds{kind=\"NetworkPolicy\"} "),
        "{metrics}"
    );
    // `ofnode status` says it for the engineer on call: connected and synced, per kind the
    // resourceVersion applied and how long ago its last event came, and the bad object.
    let text = cluster.node(0).cli(&["status"]).unwrap();
    let node_name = cluster.node(0).name();
    assert!(
        text.contains(&format!(
            "kubernetes: https://192.0.2.1:6443/ as node {node_name}: connected, synced, 0 edits pending"
        )),
        "{text}"
    );
    let policies: Vec<&str> = text
        .lines()
        .find(|line| line.trim_start().starts_with("NetworkPolicy "))
        .unwrap_or_else(|| panic!("no NetworkPolicy line: {text}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        policies[1..6],
        ["synced", "objects", "1", "resourceVersion", bad_rv.as_str()],
        "{text}"
    );
    let age: f64 = policies[8].parse().unwrap_or_else(|_| panic!("{text}"));
    assert!(policies[6..8] == ["last", "event"] && age >= 0.0, "{text}");
    assert!(
        text.contains("bad NetworkPolicy x/too-big: spec.ingress"),
        "{text}"
    );
    // Fixed: it is applied as written, and no longer bad.
    let fixed = policy(
        "x",
        "too-big",
        json!({"podSelector": {"matchLabels": {"app": "a"}},
        "ingress": [{"from": [{"podSelector": {}}]}]}),
    );
    cluster.kube_apply("NetworkPolicy", &fixed).unwrap();
    assert!(b.reaches(a.ip()).unwrap());
    assert!(!c.reaches(a.ip()).unwrap());
    assert_eq!(kube_status(&cluster, 0)["bad_objects"], json!([]));

    // Node 1 is cut off from the API server while it restarts (its watches end) and objects
    // change: node 1 keeps what it had. Healed, its watches cannot resume from where they were
    // (etcd's history compacted meanwhile: 410), it lists again and sweeps: the policy
    // deleted meanwhile goes, the one created meanwhile comes, nothing stays twice.
    let cut = ["ip", "route", "add", "blackhole", "192.0.2.1/32"];
    cluster.node(1).exec(&cut).unwrap();
    let api = cluster.kube_api_mut().unwrap();
    api.kill();
    api.spawn().unwrap();
    let admin = cluster.kube_admin().unwrap().clone();
    admin
        .run(&["delete", "networkpolicy", "too-big", "-n", "x"])
        .unwrap();
    admin
        .apply(
            &policy(
                "y",
                "deny-y",
                json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            )
            .to_string(),
        )
        .unwrap();
    // etcd's history is compacted up to now, so no watch can resume from before the gap
    // whatever the restarted server's cache holds: the healed node gets 410 and lists again.
    let etcd = cluster.kube_api_mut().unwrap().etcd();
    let status = etcd
        .etcdctl(&["endpoint", "status", "--write-out=json"])
        .unwrap();
    let status: Value = serde_json::from_str(&status).unwrap();
    let revision = status[0]["Status"]["header"]["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("etcd's revision in {status}"));
    etcd.etcdctl(&["compact", &revision.to_string()]).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        netpols(&cluster, 1),
        ["x/too-big"],
        "node 1 changed while cut off"
    );
    assert_eq!(kube_status(&cluster, 1)["connected"], false);
    cluster
        .node(1)
        .exec(&["ip", "route", "del", "blackhole", "192.0.2.1/32"])
        .unwrap();
    cluster.wait_kube_synced(Duration::from_secs(90)).unwrap();
    cluster
        .node(1)
        .wait_for(
            Duration::from_secs(60),
            "the policies after the gap",
            |_| Ok((netpols(&cluster, 1) == ["y/deny-y"]).then_some(())),
        )
        .unwrap();
    let status = kube_status(&cluster, 1);
    assert_eq!(status["connected"], true, "{status}");
    let relists: u64 = status["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["relists"].as_u64().unwrap())
        .sum();
    assert!(relists > 0, "no relist after the gap: {status}");

    // Node 0's daemon stops; meanwhile pod x/b goes and a policy comes; started again from
    // its journal, node 0 converges to the API's state: nothing of the old stays.
    cluster.node_mut(0).daemon_mut().unwrap().stop();
    cluster.stop_kube_pod(b).unwrap();
    admin
        .apply(
            &policy(
                "x",
                "deny-x",
                json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            )
            .to_string(),
        )
        .unwrap();
    cluster.node_mut(0).daemon_mut().unwrap().spawn().unwrap();
    cluster.wait_kube_synced(Duration::from_secs(60)).unwrap();
    cluster
        .node(0)
        .wait_for(Duration::from_secs(60), "node 0 converged", |_| {
            let (policies, pods) = (netpols(&cluster, 0), remote_pods(&cluster, 0));
            if policies == ["x/deny-x", "y/deny-y"] && pods == ["y/c"] {
                return Ok(Some(()));
            }
            Err(ofnode_harness::cluster::ClusterError::Invalid(format!(
                "policies {policies:?}, other nodes' pods {pods:?}, {}",
                kube_status(&cluster, 0)
            )))
        })
        .unwrap();
    drop(c);
}

#[test]
fn a_nodes_credentials_change_nothing_nodes_program_from_and_a_wrong_ca_is_refused() {
    let mut cluster = start();
    let api = cluster.kube_api().unwrap();
    let node_config = api
        .kubeconfig_for_service_account("ofnode", "ofnode-node")
        .unwrap();
    let as_node = api.kubectl_with(&node_config, "system:serviceaccount:ofnode:ofnode-node");
    let before: Vec<Vec<String>> = cluster.nodes().iter().map(|n| n.flows().unwrap()).collect();
    cluster.create_kube_namespace("x", 11, &[]).unwrap();
    cluster.wait_kube_synced(Duration::from_secs(30)).unwrap();
    let attempts = [
        policy("x", "sneaky", json!({"podSelector": {}})),
        json!({"apiVersion": "network.openshift.io/v1", "kind": "NetNamespace",
               "metadata": {"name": "x"}, "netname": "x", "netid": 99}),
        json!({"apiVersion": "network.openshift.io/v1", "kind": "HostSubnet",
               "metadata": {"name": "node-1"}, "host": "node-1", "hostIP": "192.0.2.99",
               "subnet": "10.128.40.0/23"}),
    ];
    for object in &attempts {
        let err = as_node.apply(&object.to_string()).unwrap_err();
        assert!(err.is_forbidden(), "{err}");
    }
    std::thread::sleep(Duration::from_secs(1));
    for (node, flows) in cluster.nodes().iter().zip(&before) {
        // The namespace added its flows; nothing of the refused objects did.
        let now = node.flows().unwrap();
        assert!(
            !now.iter()
                .any(|f| f.contains("192.0.2.99") || f.contains("10.128.40.0")),
            "{now:?}"
        );
        assert!(now.len() >= flows.len());
        assert!(!netpols(&cluster, node.index).contains(&"x/sneaky".to_string()));
    }

    // A daemon whose kubeconfig trusts another CA never believes the server: not connected,
    // the error says why, the node is never set up from it.
    let stranger = api.kubeconfig_trusting_another_ca("ofnode-node").unwrap();
    let node = cluster.node_mut(1);
    let config = node.ovs().dir().join("ofnode-kube.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let kubeconfig_line = text
        .lines()
        .find(|l| l.starts_with("kubeconfig"))
        .unwrap()
        .to_string();
    std::fs::write(
        &config,
        text.replace(
            &kubeconfig_line,
            &format!("kubeconfig = \"{}\"", stranger.display()),
        ),
    )
    .unwrap();
    let daemon = node.daemon_mut().unwrap();
    daemon.stop();
    std::fs::remove_dir_all(&daemon.state_dir).unwrap();
    std::fs::create_dir_all(&daemon.state_dir).unwrap();
    daemon.spawn().unwrap();
    let (status, _) = daemon
        .wait_status(Duration::from_secs(30), "a TLS refusal", |s| {
            s["kubernetes"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("UnknownIssuer") || e.contains("certificate"))
        })
        .unwrap();
    assert_eq!(status["kubernetes"]["connected"], false, "{status}");
    assert!(
        status["setup"].is_null(),
        "set up from a server it does not trust: {status}"
    );

    // The DaemonSet and its ConfigMap are accepted by the server.
    let admin = cluster.kube_admin().unwrap();
    let manifest = ofnode_harness::kube::manifests_dir().join("daemonset.yaml");
    admin
        .run(&[
            "apply",
            "--dry-run=server",
            "-f",
            &manifest.display().to_string(),
        ])
        .unwrap();
}

#[test]
fn the_crd_types_agree_with_the_manifests_the_server_serves() {
    let api = ofnode_harness::kube::KubeApiServer::start().unwrap();
    api.install_crds().unwrap();
    let types: [(&str, &str, &str, &str); 3] = [
        (
            crd::FIELDS[0].0,
            <crd::HostSubnet as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            "Cluster",
            "hostsubnets",
        ),
        (
            crd::FIELDS[1].0,
            <crd::NetNamespace as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            "Cluster",
            "netnamespaces",
        ),
        (
            crd::FIELDS[2].0,
            <crd::EgressNetworkPolicy as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            "Namespaced",
            "egressnetworkpolicies",
        ),
    ];
    for ((kind, plural, scope, manifest_plural), (_, fields)) in types.into_iter().zip(crd::FIELDS)
    {
        let name = format!("{manifest_plural}.{}", crd::GROUP);
        let served = api.admin().get_json(&["crd", &name]).unwrap();
        let spec = &served["spec"];
        assert_eq!(spec["group"], crd::GROUP);
        assert_eq!(spec["names"]["kind"], kind);
        assert_eq!(spec["names"]["plural"], plural);
        assert_eq!(spec["scope"], scope);
        let version = &spec["versions"][0];
        assert_eq!(version["name"], crd::VERSION);
        // Every property the schema names (below the object, apiVersion/kind/metadata aside)
        // is one the type reads, and every field the type reads is in the schema.
        let mut schema_fields = Vec::new();
        collect(
            &version["schema"]["openAPIV3Schema"],
            "",
            &mut schema_fields,
        );
        schema_fields.retain(|f| !["apiVersion", "kind", "metadata"].contains(&f.as_str()));
        let mut ours: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        schema_fields.sort();
        ours.sort();
        assert_eq!(
            schema_fields, ours,
            "{kind}: the schema and the type disagree"
        );
    }
    // The admin tiers' types: the group, version, kind, plural and scope the node watches
    // are the served CRDs' (their spec is the admin parser's, checked by its own tests).
    let admin = [
        (
            <crd::AdminNetworkPolicy as k8s_openapi::Resource>::KIND,
            <crd::AdminNetworkPolicy as k8s_openapi::Resource>::URL_PATH_SEGMENT,
        ),
        (
            <crd::BaselineAdminNetworkPolicy as k8s_openapi::Resource>::KIND,
            <crd::BaselineAdminNetworkPolicy as k8s_openapi::Resource>::URL_PATH_SEGMENT,
        ),
    ];
    for (kind, plural) in admin {
        let name = format!("{plural}.{}", crd::ADMIN_GROUP);
        let served = api.admin().get_json(&["crd", &name]).unwrap();
        let spec = &served["spec"];
        assert_eq!(spec["group"], crd::ADMIN_GROUP);
        assert_eq!(spec["names"]["kind"], kind);
        assert_eq!(spec["scope"], "Cluster");
        let served_version = spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["name"] == crd::ADMIN_VERSION && v["served"] == true);
        assert!(
            served_version,
            "{kind}: {} is not served",
            crd::ADMIN_VERSION
        );
    }
}

/// Every property path of a structural schema (`a`, `a.b`; arrays see through to their items).
fn collect(schema: &Value, prefix: &str, out: &mut Vec<String>) {
    let schema = if schema["type"] == "array" {
        &schema["items"]
    } else {
        schema
    };
    if let Some(properties) = schema["properties"].as_object() {
        for (name, sub) in properties {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            out.push(path.clone());
            collect(sub, &path, out);
        }
    }
}
