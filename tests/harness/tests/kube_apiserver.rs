//! Issue 28, item 1: a real kube-apiserver (and its etcd) from the per-machine cache build,
//! started per test, with TLS, client certificates and RBAC; the seed's CustomResourceDefinitions
//! of `dist/kubernetes/crds/` applied with kubectl; the least-privilege roles of
//! `dist/kubernetes/rbac.yaml` (item 6) for the node and the controller; the harness playing kubelet (Node, Pod bound
//! to it, pod IP through the status subresource); reachable from every node of a cluster; and
//! nothing left behind, processes stopped by PID and namespace deleted.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::kube::{self, KubeApiServer, NodeObject, PodObject};
use ofnode_harness::pid_alive;
use serde_json::Value;

/// What a server leaves behind if its guard fails: PIDs, its namespace, its state directory.
struct Traces {
    pids: Vec<u32>,
    netns: String,
    dir: PathBuf,
}

impl Traces {
    fn of(api: &KubeApiServer) -> Traces {
        let pids = vec![api.pid().unwrap(), api.etcd().pid().unwrap()];
        for pid in &pids {
            assert!(pid_alive(*pid), "{pid} should run while the server does");
        }
        Traces {
            pids,
            netns: api.netns().to_string(),
            dir: api.dir().to_path_buf(),
        }
    }

    fn assert_gone(&self) {
        for pid in &self.pids {
            assert!(!pid_alive(*pid), "process {pid} left running");
        }
        assert!(!netns_exists(&self.netns), "namespace {} left", self.netns);
        assert!(!self.dir.exists(), "{} left", self.dir.display());
    }
}

fn netns_exists(name: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|line| line.split_whitespace().next() == Some(name))
}

fn field<'a>(object: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(object, |value, key| &value[key])
}

const NETWORK_POLICY: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: default}
spec:
  podSelector: {}
  policyTypes: [Ingress]
"#;

#[test]
fn api_server_runs_the_cached_release_and_enforces_tls_and_rbac() {
    let api = KubeApiServer::start().unwrap();
    let traces = Traces::of(&api);
    let admin = api.admin();

    // The cached builds: the release tools/kube/go.mod names, on the etcd tools/etcd/go.mod names.
    let version = admin.json(&["version", "-o", "json"]).unwrap();
    assert_eq!(
        field(&version, "serverVersion.gitVersion"),
        kube::kubernetes_release()
    );
    assert_eq!(
        field(&version, "clientVersion.gitVersion"),
        kube::kubernetes_release()
    );
    let etcd_status = api
        .etcd()
        .etcdctl(&["endpoint", "status", "-w", "json"])
        .unwrap();
    assert!(
        etcd_status.contains(&format!(
            "\"version\":\"{}\"",
            kube::etcd_release().trim_start_matches('v')
        )),
        "{etcd_status}"
    );
    // Only the chosen address is served: nothing listens on the namespace's loopback but etcd.
    let listening = api.own_netns().unwrap().exec_ok(&["ss", "-Htln"]).unwrap();
    let addresses: Vec<&str> = listening
        .lines()
        .filter_map(|line| line.split_whitespace().nth(3))
        .collect();
    let mut expected = vec!["127.0.0.1:2379", "127.0.0.1:2380", "192.0.2.1:6443"];
    let mut seen = addresses.clone();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected, "{listening}");

    // The admin (system:masters) may create a NetworkPolicy.
    admin.apply(NETWORK_POLICY).unwrap();
    let policy = admin
        .get_json(&["networkpolicy", "default-deny", "-n", "default"])
        .unwrap();
    assert_eq!(field(&policy, "spec.policyTypes")[0], "Ingress");

    // A user the CA signed, with no RBAC grant, is authenticated and refused (403).
    let alice = api.kubectl_as("alice", None).unwrap();
    let whoami = alice.json(&["auth", "whoami", "-o", "json"]).unwrap();
    assert_eq!(field(&whoami, "status.userInfo.username"), "alice");
    assert!(!alice.can_i("create", "networkpolicies", "default").unwrap());
    let refused = alice
        .apply(&NETWORK_POLICY.replace("default-deny", "alices"))
        .unwrap_err();
    assert!(refused.is_forbidden(), "{refused}");
    assert!(admin
        .run(&["get", "networkpolicy", "alices", "-n", "default"])
        .is_err());

    // A grant makes the same user able to: the refusal above was RBAC's. (A Role of its own:
    // the aggregated ClusterRoles admin/edit/view stay empty without a controller-manager.)
    admin
        .run(&[
            "create",
            "role",
            "netpol-writer",
            "--verb=create,get",
            "--resource=networkpolicies",
            "-n",
            "default",
        ])
        .unwrap();
    admin
        .run(&[
            "create",
            "rolebinding",
            "alice-netpol",
            "--role=netpol-writer",
            "--user=alice",
            "-n",
            "default",
        ])
        .unwrap();
    assert!(alice.can_i("create", "networkpolicies", "default").unwrap());
    alice
        .apply(&NETWORK_POLICY.replace("default-deny", "alices"))
        .unwrap();

    // A service account authenticates with a token the server signed with its key.
    let account = api
        .kubeconfig_for_service_account("kube-system", "ofnode-node")
        .unwrap();
    let as_account = api.kubectl_with(&account, "ofnode-node");
    let whoami = as_account.json(&["auth", "whoami", "-o", "json"]).unwrap();
    assert_eq!(
        field(&whoami, "status.userInfo.username"),
        "system:serviceaccount:kube-system:ofnode-node"
    );
    assert!(!as_account
        .can_i("create", "networkpolicies", "default")
        .unwrap());

    // A client that trusts another CA refuses the server; a client certificate another CA
    // signed (claiming system:masters) is not accepted by the server.
    let trusting_wrong = api.kubeconfig_trusting_another_ca("mallory").unwrap();
    let refused = api
        .kubectl_with(&trusting_wrong, "mallory")
        .run(&["get", "namespaces"])
        .unwrap_err();
    assert!(refused.is_untrusted_server(), "{refused}");
    let signed_wrong = api.kubeconfig_signed_by_another_ca("mallory").unwrap();
    let refused = api
        .kubectl_with(&signed_wrong, "mallory")
        .apply(&NETWORK_POLICY.replace("default-deny", "mallorys"))
        .unwrap_err();
    assert!(refused.is_unauthorized(), "{refused}");
    assert!(admin
        .run(&["get", "networkpolicy", "mallorys", "-n", "default"])
        .is_err());

    drop(api);
    traces.assert_gone();
}

#[test]
fn crds_apply_every_kind_round_trips_bad_objects_are_refused_and_a_restart_keeps_them() {
    let api = KubeApiServer::start().unwrap();
    let admin = api.admin();
    api.install_crds().unwrap();

    admin
        .apply(
            r#"
apiVersion: network.openshift.io/v1
kind: HostSubnet
metadata: {name: node-1}
host: node-1
hostIP: 192.0.2.12
subnet: 10.128.2.0/23
egressIPs: [192.0.2.100]
egressCIDRs: [192.0.2.96/28]
---
apiVersion: network.openshift.io/v1
kind: NetNamespace
metadata: {name: tenant-a}
netname: tenant-a
netid: 4242
---
apiVersion: network.openshift.io/v1
kind: EgressNetworkPolicy
metadata: {name: default, namespace: default}
spec:
  egress:
  - type: Allow
    to: {cidrSelector: 198.51.100.0/24}
  - type: Allow
    to: {dnsName: www.example.com}
  - type: Deny
    to: {cidrSelector: 0.0.0.0/0}
"#,
        )
        .unwrap();
    let subnet = admin.get_json(&["hostsubnet", "node-1"]).unwrap();
    assert_eq!(subnet["host"], "node-1");
    assert_eq!(subnet["hostIP"], "192.0.2.12");
    assert_eq!(subnet["subnet"], "10.128.2.0/23");
    assert_eq!(subnet["egressIPs"][0], "192.0.2.100");
    assert_eq!(subnet["egressCIDRs"][0], "192.0.2.96/28");
    let netns = admin.get_json(&["netnamespace", "tenant-a"]).unwrap();
    assert_eq!(netns["netid"], 4242);
    let egress = admin
        .get_json(&["egressnetworkpolicy", "default", "-n", "default"])
        .unwrap();
    let rules = field(&egress, "spec.egress").as_array().unwrap();
    assert_eq!(rules.len(), 3);
    assert_eq!(rules[1]["to"]["dnsName"], "www.example.com");
    assert_eq!(rules[2]["type"], "Deny");
    // The operator's view: the printer columns.
    let table = admin.run(&["get", "hostsubnets"]).unwrap();
    assert!(
        table.contains("HOST IP") && table.contains("10.128.2.0/23"),
        "{table}"
    );

    // What ofnode could not program is refused by the API server, with the field named.
    let refused = |manifest: &str, expected: &str| {
        let error = admin.create(manifest).unwrap_err();
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    };
    let host_subnet = |name: &str, host: &str, ip: &str, subnet: &str| {
        format!(
            "apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {{name: {name}}}\n\
             host: {host}\nhostIP: {ip}\nsubnet: {subnet}\n"
        )
    };
    refused(
        &host_subnet("node-2", "node-3", "192.0.2.13", "10.128.4.0/23"),
        "host must equal metadata.name",
    );
    refused(
        &host_subnet("node-2", "node-2", "192.0.2.13", "10.128.5.0/23"),
        "subnet must be a network address",
    );
    refused(
        &host_subnet("node-2", "node-2", "192.0.2.300", "10.128.4.0/23"),
        "hostIP",
    );
    refused(
        "apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {name: node-2}\nhost: node-2\n",
        "subnet: Required value",
    );
    let net_namespace = |name: &str, netname: &str, netid: u64| {
        format!(
            "apiVersion: network.openshift.io/v1\nkind: NetNamespace\nmetadata: {{name: {name}}}\n\
             netname: {netname}\nnetid: {netid}\n"
        )
    };
    refused(&net_namespace("b", "b", 16_777_216), "netid");
    refused(
        &net_namespace("b", "c", 7),
        "netname must equal metadata.name",
    );
    let egress_rule = |rule: &str| {
        format!(
            "apiVersion: network.openshift.io/v1\nkind: EgressNetworkPolicy\n\
             metadata: {{name: bad, namespace: default}}\nspec:\n  egress:\n  - {rule}\n"
        )
    };
    refused(
        &egress_rule("{type: Allow, to: {cidrSelector: 10.0.0.0/8, dnsName: a.example}}"),
        "exactly one of cidrSelector and dnsName",
    );
    refused(
        &egress_rule("{type: Allow, to: {}}"),
        "exactly one of cidrSelector and dnsName",
    );
    refused(
        &egress_rule("{type: Reject, to: {cidrSelector: 10.0.0.0/8}}"),
        "Unsupported value: \"Reject\"",
    );
    refused(
        &egress_rule("{type: Deny, to: {cidrSelector: 10.0.0.1/8}}"),
        "cidrSelector must be a network address",
    );
    let too_many = (0..51)
        .map(|i| format!("  - {{type: Deny, to: {{cidrSelector: 198.51.100.{i}/32}}}}\n"))
        .collect::<String>();
    refused(
        &format!(
            "apiVersion: network.openshift.io/v1\nkind: EgressNetworkPolicy\n\
             metadata: {{name: bad, namespace: default}}\nspec:\n  egress:\n{too_many}"
        ),
        "must have at most 50 items",
    );
    assert!(admin.get_json(&["hostsubnets"]).unwrap()["items"]
        .as_array()
        .is_some_and(|items| items.len() == 1));

    // The cluster admin tiers (issue 29): an ANP with every peer and port kind, the baseline.
    admin
        .apply(
            r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: gress-rules}
spec:
  priority: 16
  subject: {namespaces: {matchLabels: {kubernetes.io/metadata.name: gryffindor}}}
  ingress:
  - {name: pass-slytherin, action: Pass, from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {house: slytherin}}}}], ports: [{portNumber: {protocol: UDP, port: 53}}, {portRange: {start: 8000, end: 8080}}, {namedPort: web}]}
  egress:
  - {name: nodes, action: Allow, to: [{nodes: {matchLabels: {kubernetes.io/os: linux}}}], ports: [{portNumber: {port: 34345}}]}
  - {name: deny-internet, action: Deny, to: [{networks: [0.0.0.0/0, '::/0']}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {}}
  ingress:
  - {action: Deny, from: [{namespaces: {matchLabels: {house: slytherin}}}]}
"#,
        )
        .unwrap();
    let anp = admin.get_json(&["anp", "gress-rules"]).unwrap();
    assert_eq!(field(&anp, "spec.priority"), 16);
    assert_eq!(
        anp["spec"]["ingress"][0]["ports"][1]["portRange"]["protocol"],
        "TCP"
    );
    let table = admin.run(&["get", "anp"]).unwrap();
    assert!(
        table.contains("PRIORITY") && table.contains("16"),
        "{table}"
    );
    assert_eq!(
        admin.get_json(&["banp", "default"]).unwrap()["spec"]["ingress"][0]["action"],
        "Deny"
    );
    let banp = |name: &str, action: &str| {
        format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\n\
             metadata: {{name: {name}}}\nspec:\n  subject: {{namespaces: {{}}}}\n  ingress:\n\
             \x20 - {{action: {action}, from: [{{namespaces: {{}}}}]}}\n"
        )
    };
    refused(&banp("other", "Deny"), "metadata.name=\"default\"");
    refused(&banp("default", "Pass"), "Unsupported value: \"Pass\"");
    refused(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: high}\n\
         spec:\n  priority: 1001\n  subject: {namespaces: {}}\n",
        "spec.priority",
    );
    refused(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: two}\n\
         spec:\n  priority: 1\n  subject: {namespaces: {}, pods: {namespaceSelector: {}, podSelector: {}}}\n",
        "spec.subject",
    );

    // A crash and a restart of the API server: clients are refused meanwhile, and every object
    // is still there after (etcd kept them).
    let mut api = api;
    let crashed = api.pid().unwrap();
    api.kill();
    assert!(!pid_alive(crashed));
    let refused = api.admin().run(&["get", "hostsubnets"]).unwrap_err();
    assert!(refused.to_string().contains("was refused"), "{refused}");
    api.spawn().unwrap();
    let traces = Traces::of(&api);
    let after = api.admin().get_json(&["hostsubnet", "node-1"]).unwrap();
    assert_eq!(after["subnet"], "10.128.2.0/23");
    assert_eq!(
        api.admin().get_json(&["netnamespace", "tenant-a"]).unwrap()["netid"],
        4242
    );

    drop(api);
    traces.assert_gone();
}

#[test]
fn harness_plays_kubelet_nodes_and_pods_with_status() {
    let api = KubeApiServer::start().unwrap();
    let traces = Traces::of(&api);
    let admin = api.admin();

    let mut node = NodeObject::new("node-0", Ipv4Addr::new(192, 0, 2, 11));
    node.pod_cidr = Some("10.128.0.0/23".into());
    let stored = admin.create_node(&node).unwrap();
    assert_eq!(
        field(&stored, "status.addresses")[0]["address"],
        "192.0.2.11"
    );
    assert_eq!(field(&stored, "spec.podCIDR"), "10.128.0.0/23");

    admin.run(&["create", "namespace", "tenant-a"]).unwrap();
    let pod = PodObject::new("tenant-a", "web", "node-0")
        .label("app", "web")
        .port("http", 8080, "TCP");
    let created = admin.create_pod(&pod).unwrap();
    assert_eq!(field(&created, "spec.nodeName"), "node-0");
    assert_eq!(field(&created, "status.phase"), "Pending");
    let running = admin
        .report_pod_ip("tenant-a", "web", Ipv4Addr::new(10, 128, 0, 10))
        .unwrap();
    assert_eq!(field(&running, "status.podIP"), "10.128.0.10");
    assert_eq!(field(&running, "status.podIPs")[0]["ip"], "10.128.0.10");
    assert_eq!(field(&running, "status.phase"), "Running");
    // What a node's watch sees: its pods by field selector, with labels and named ports.
    let on_node = admin
        .get_json(&[
            "pods",
            "-A",
            "--field-selector=spec.nodeName=node-0",
            "-l",
            "app=web",
        ])
        .unwrap();
    let items = on_node["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        field(&items[0], "spec.containers")[0]["ports"][0]["name"],
        "http"
    );

    // A node's own credentials (Node authorizer): it reads the pods bound to it.
    let node_kubectl = api
        .kubectl_as("system:node:node-0", Some("system:nodes"))
        .unwrap();
    node_kubectl
        .get_json(&["pod", "web", "-n", "tenant-a"])
        .unwrap();

    // The namespace controller's part: a deleted namespace is really gone.
    admin
        .run(&["delete", "namespace", "tenant-a", "--wait=false"])
        .unwrap();
    api.finalize_namespace("tenant-a").unwrap();
    let error = admin.run(&["get", "namespace", "tenant-a"]).unwrap_err();
    assert!(error.to_string().contains("NotFound"), "{error}");

    drop(api);
    traces.assert_gone();
}

#[test]
fn cluster_api_server_is_reachable_from_every_node_and_a_panic_leaves_nothing() {
    let (traces_tx, traces_rx) = std::sync::mpsc::channel();
    let (checked_tx, checked_rx) = std::sync::mpsc::channel();
    let outcome = std::panic::catch_unwind(move || {
        let cluster = Cluster::start_with_kube_api(ClusterOptions {
            nodes: 2,
            mode: Mode::Subnet,
            control: Control::SeedFlows,
            echo: false,
        })
        .unwrap();
        let api = cluster.kube_api().unwrap();
        traces_tx.send(Traces::of(api)).unwrap();
        assert_eq!(api.url(), "https://192.0.2.1:6443");
        for node in cluster.nodes() {
            let from_node = api.admin().in_netns(node.netns().name());
            let ready = from_node.run(&["get", "--raw", "/readyz"]).unwrap();
            assert_eq!(ready, "ok", "from node {}", node.index);
        }
        cluster.register_kube_nodes().unwrap();
        let nodes = api.admin().get_json(&["nodes"]).unwrap();
        let registered: Vec<(&Value, &Value)> = nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| (&n["metadata"]["name"], &n["spec"]["podCIDR"]))
            .collect();
        assert_eq!(
            registered,
            [
                (&Value::from("node-0"), &Value::from("10.128.0.0/23")),
                (&Value::from("node-1"), &Value::from("10.128.2.0/23")),
            ]
        );
        checked_tx.send(()).unwrap();
        panic!("deliberate: the guards must stop everything on unwind");
    });
    let payload = outcome.expect_err("the closure always panics");
    assert!(
        checked_rx.try_recv().is_ok(),
        "the checks failed: {:?}",
        payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or(payload.downcast_ref::<&str>().copied())
    );
    traces_rx.recv().unwrap().assert_gone();
}

/// The run that is killed: started as a child process by
/// `a_killed_run_is_reaped_by_the_next_one`, it starts an API server, says what it made and
/// waits to be killed (never run on its own).
#[test]
#[ignore = "a child process of a_killed_run_is_reaped_by_the_next_one"]
fn killed_run_child() {
    let api = KubeApiServer::start().unwrap();
    println!(
        "MADE {} {} {}",
        api.pid().unwrap(),
        api.etcd().pid().unwrap(),
        api.netns()
    );
    std::thread::sleep(std::time::Duration::from_secs(300));
}

#[test]
fn a_killed_run_is_reaped_by_the_next_one() {
    use std::io::BufRead;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "killed_run_child", "--ignored", "--nocapture"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let made = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("MADE ").map(str::to_string));
    // SIGKILL: no guard of the child runs.
    child.kill().unwrap();
    child.wait().unwrap();
    let made = made.expect("the child started an API server");
    let words: Vec<&str> = made.split_whitespace().collect();
    let traces = Traces {
        pids: words[..2].iter().map(|pid| pid.parse().unwrap()).collect(),
        netns: words[2].to_string(),
        dir: PathBuf::from(ofnode_harness::STATE_ROOT).join(format!("{}-{}", child.id(), words[2])),
    };
    assert!(traces.pids.iter().all(|pid| pid_alive(*pid)));
    assert!(netns_exists(&traces.netns));
    ofnode_harness::reap_stale();
    traces.assert_gone();
}

#[test]
fn rbac_manifests_let_a_node_only_read_and_the_controller_only_allocate() {
    let api = KubeApiServer::start().unwrap();
    let traces = Traces::of(&api);
    let admin = api.admin();
    api.install_crds().unwrap();
    admin
        .apply_file(&kube::manifests_dir().join("rbac.yaml"))
        .unwrap();
    admin
        .apply(
            "apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {name: node-1}\n\
             host: node-1\nhostIP: 192.0.2.12\nsubnet: 10.128.2.0/23\n---\n\
             apiVersion: network.openshift.io/v1\nkind: NetNamespace\nmetadata: {name: default}\n\
             netname: default\nnetid: 0\n",
        )
        .unwrap();
    let before = admin
        .get_json(&["hostsubnets,netnamespaces,networkpolicies", "-A"])
        .unwrap();

    // The node's service account reads everything it programs from ...
    let node_config = api
        .kubeconfig_for_service_account("ofnode", "ofnode-node")
        .unwrap();
    let node = api.kubectl_with(&node_config, "ofnode-node");
    for resource in [
        "pods",
        "namespaces",
        "nodes",
        "services",
        "endpointslices.discovery.k8s.io",
        "networkpolicies.networking.k8s.io",
        "hostsubnets.network.openshift.io",
        "netnamespaces.network.openshift.io",
        "egressnetworkpolicies.network.openshift.io",
    ] {
        for verb in ["list", "watch"] {
            assert!(
                node.can_i(verb, resource, "default").unwrap(),
                "{verb} {resource}"
            );
        }
    }
    node.get_json(&["hostsubnets"]).unwrap();
    // ... and changes none of it: a NetworkPolicy, a NetNamespace, a HostSubnet are refused.
    let refused = [
        node.apply(NETWORK_POLICY).unwrap_err(),
        node.run(&[
            "patch",
            "netnamespace",
            "default",
            "--type=merge",
            "-p",
            r#"{"netid":7}"#,
        ])
        .unwrap_err(),
        node.run(&[
            "patch",
            "hostsubnet",
            "node-1",
            "--type=merge",
            "-p",
            r#"{"hostIP":"192.0.2.99"}"#,
        ])
        .unwrap_err(),
        node.create(
            "apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {name: node-2}\n\
             host: node-2\nhostIP: 192.0.2.13\nsubnet: 10.128.4.0/23\n",
        )
        .unwrap_err(),
    ];
    for error in &refused {
        assert!(error.is_forbidden(), "{error}");
    }
    assert!(!node.can_i("get", "secrets", "ofnode").unwrap());
    let after = admin
        .get_json(&["hostsubnets,netnamespaces,networkpolicies", "-A"])
        .unwrap();
    let specs = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut o = o.clone();
                o["metadata"] = Value::Null;
                o.to_string()
            })
            .collect()
    };
    assert_eq!(specs(&before), specs(&after));

    // The controller allocates HostSubnets and NetNamespaces and holds its Lease, nothing more.
    let controller_config = api
        .kubeconfig_for_service_account("ofnode", "ofnode-controller")
        .unwrap();
    let controller = api.kubectl_with(&controller_config, "ofnode-controller");
    controller
        .create(
            "apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {name: node-2}\n\
             host: node-2\nhostIP: 192.0.2.13\nsubnet: 10.128.4.0/23\n---\n\
             apiVersion: network.openshift.io/v1\nkind: NetNamespace\nmetadata: {name: tenant-a}\n\
             netname: tenant-a\nnetid: 10\n---\n\
             apiVersion: coordination.k8s.io/v1\nkind: Lease\n\
             metadata: {name: ofnode-controller, namespace: ofnode}\n\
             spec: {holderIdentity: controller-0, leaseDurationSeconds: 15}\n",
        )
        .unwrap();
    assert!(!controller.can_i("create", "leases", "kube-system").unwrap());
    assert!(!controller.can_i("create", "pods", "default").unwrap());
    let refused = controller.apply(NETWORK_POLICY).unwrap_err();
    assert!(refused.is_forbidden(), "{refused}");

    drop(api);
    traces.assert_gone();
}
