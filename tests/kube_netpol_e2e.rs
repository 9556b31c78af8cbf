//! Issue 28 item 7: three nodes (a private Open vSwitch each, VXLAN between them) follow a real
//! kube-apiserver. The harness plays the controller (HostSubnets, NetNamespaces) and the kubelet
//! (Pod objects, `ofnode-cni ADD`, status IPs); nothing is told to any node through its socket.
//! The NetworkPolicy truth tables of `netpol_e2e.rs` run with each policy created once by
//! `kubectl apply`, label changes by `kubectl label`, and the API server restarted mid-run.
//! Issue 30's audit switched on and off by the `ofnode.io/audit` annotations set with kubectl.

use std::time::Duration;

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::reachability::{Model, Probe, Reachability};
use serde_json::{json, Value};

fn vnid(namespace: &str) -> u32 {
    match namespace {
        "x" => 11,
        "y" => 12,
        _ => 13,
    }
}

fn start() -> (Cluster, Model) {
    let cluster = Cluster::start_following_kube(ClusterOptions {
        nodes: 3,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap();
    let model = Model::create_following_kube(&cluster, vnid).unwrap();
    cluster.wait_kube_synced(Duration::from_secs(60)).unwrap();
    (cluster, model)
}

fn policy(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

struct Session<'a> {
    cluster: &'a Cluster,
    model: &'a Model,
    failures: Vec<String>,
}

impl Session<'_> {
    /// Creates `policies` with `kubectl apply`, waits for every node to have applied them,
    /// checks the table on every probe, deletes them and checks everything connects again.
    fn case(&mut self, name: &str, policies: &[Value], expected: Reachability) {
        println!("case {name}");
        let result = self.run(policies, &expected);
        if let Err(report) = result {
            println!("case {name} FAILED:\n{report}");
            self.failures.push(format!("=== case {name}\n{report}"));
        }
    }

    fn run(&self, policies: &[Value], expected: &Reachability) -> Result<(), String> {
        for policy in policies {
            self.cluster
                .kube_apply("NetworkPolicy", policy)
                .map_err(|e| e.to_string())?;
        }
        let tables: Vec<(Probe, &Reachability)> =
            Probe::ALL.iter().map(|p| (*p, expected)).collect();
        let checked = self.model.check(&tables);
        for policy in policies {
            let meta = &policy["metadata"];
            let (ns, name) = (
                meta["namespace"].as_str().unwrap(),
                meta["name"].as_str().unwrap(),
            );
            self.delete_policy(ns, name)?;
        }
        checked?;
        self.model
            .check(&[(Probe::TCP80, &self.model.all_connected())])
            .map_err(|report| format!("after the policies were deleted:\n{report}"))
    }

    fn delete_policy(&self, namespace: &str, name: &str) -> Result<(), String> {
        let admin = self.cluster.kube_admin().map_err(|e| e.to_string())?;
        admin
            .run(&["delete", "networkpolicy", name, "-n", namespace])
            .map_err(|e| e.to_string())?;
        // A deletion's resourceVersion is not printed: wait for every node's list to lack it.
        for node in self.cluster.nodes() {
            node.wait_for(Duration::from_secs(30), "the policy deleted", |node| {
                let out = node.cli(&["netpol", "list"])?;
                let key = format!("{namespace}/{name}");
                let listed = out
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(key.as_str()));
                Ok((!listed).then_some(()))
            })
            .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} cases failed:\n{}\n{}",
            self.failures.len(),
            self.failures.join("\n"),
            self.cluster.diagnostics()
        );
    }
}

#[test]
fn networkpolicy_truth_tables_from_the_api_server() {
    let (mut cluster, mut model) = start();
    let mut session = Session {
        cluster: &cluster,
        model: &model,
        failures: Vec::new(),
    };
    session.case("no policy", &[], model.all_connected());
    session.case(
        "default-deny ingress",
        &[policy(
            "x",
            "deny-ingress",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        )],
        model.expect(|_, to| to.namespace != "x"),
    );
    session.case(
        "default-deny egress",
        &[policy(
            "x",
            "deny-egress",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        )],
        model.expect(|from, _| from.namespace != "x"),
    );
    session.case(
        "allow from the same namespace",
        &[policy(
            "x",
            "allow-same-namespace",
            json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}),
        )],
        model.expect(|from, to| to.namespace != "x" || from.namespace == "x"),
    );
    session.case(
        "allow to x/a from namespace y",
        &[policy(
            "x",
            "allow-from-y",
            json!({"podSelector": {"matchLabels": {"pod": "a"}},
                   "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]}),
        )],
        model.expect(|from, to| to.id() != "x/a" || from.namespace == "y"),
    );
    session.finish();

    // A label change moves a pod into and out of a policy: x/b gets pod=a, and the policy
    // isolating pod=a pods of x now isolates it too.
    let deny_a = policy(
        "x",
        "deny-a",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"]}),
    );
    cluster.kube_apply("NetworkPolicy", &deny_a).unwrap();
    let only_xa = model.expect(|_, to| to.id() != "x/a");
    model.check(&[(Probe::TCP80, &only_xa)]).unwrap();
    cluster
        .kube_change(
            "Pod",
            &["label", "pod", "b", "-n", "x", "pod=a", "--overwrite"],
        )
        .unwrap();
    let xa_and_xb = model.expect(|_, to| to.id() != "x/a" && to.id() != "x/b");
    model.check(&[(Probe::TCP80, &xa_and_xb)]).unwrap();
    cluster
        .kube_change(
            "Pod",
            &["label", "pod", "b", "-n", "x", "pod=b", "--overwrite"],
        )
        .unwrap();
    model.check(&[(Probe::TCP80, &only_xa)]).unwrap();

    // The API server goes away: every node keeps enforcing what it had, nothing is flushed.
    let before: Vec<Vec<String>> = cluster.nodes().iter().map(|n| n.flows().unwrap()).collect();
    cluster.kube_api_mut().unwrap().kill();
    std::thread::sleep(Duration::from_secs(3));
    for (node, flows) in cluster.nodes().iter().zip(&before) {
        assert_eq!(
            &node.flows().unwrap(),
            flows,
            "node {} changed while the API server was down",
            node.index
        );
        let status = node.status().unwrap();
        assert_eq!(status["kubernetes"]["connected"], false, "{status}");
    }
    model.check(&[(Probe::TCP80, &only_xa)]).unwrap();
    // Restarted on the same etcd: the nodes reconnect; a change made after is enforced.
    cluster.kube_api_mut().unwrap().spawn().unwrap();
    cluster.wait_kube_synced(Duration::from_secs(60)).unwrap();
    let deny_y = policy(
        "y",
        "deny-y",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    );
    cluster.kube_apply("NetworkPolicy", &deny_y).unwrap();
    let xa_and_y = model.expect(|_, to| to.id() != "x/a" && to.namespace != "y");
    model.check(&[(Probe::TCP80, &xa_and_y)]).unwrap();
    for node in cluster.nodes() {
        let status = node.status().unwrap();
        assert_eq!(status["kubernetes"]["connected"], true, "{status}");
        assert_eq!(status["kubernetes"]["bad_objects"], json!([]), "{status}");
    }
    let _ = &mut model;
}

/// The JSON lines of the audit log at `path` once `done` accepts them (at most 20 s).
fn audit_lines(path: &std::path::Path, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        if done(&lines) {
            return lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {what} in the audit log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One UDP datagram from `from`'s source port `sport` to `to:80`: one new connection.
fn udp_once(from: &ofnode_harness::Pod, to: std::net::Ipv4Addr, sport: u16) {
    from.netns()
        .run_in(|| {
            let socket = std::net::UdpSocket::bind(("0.0.0.0", sport)).expect("bind");
            socket.send_to(b"probe", (to, 80)).expect("send");
        })
        .expect("in the pod's namespace");
}

/// Waits until no node reports a bad object any more.
fn wait_for_bad_objects_cleared(cluster: &Cluster) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for node in cluster.nodes() {
        loop {
            let status = node.status().unwrap();
            if status["kubernetes"]["bad_objects"] == json!([]) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "node {}: {}",
                node.index,
                status["kubernetes"]["bad_objects"]
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Issue 30 through the API server: the audit is switched on by the annotations a cluster
/// admin sets with kubectl, and a bad value is shown in status and changes nothing.
#[test]
fn the_audit_follows_the_annotations_set_with_kubectl() {
    let (mut cluster, model) = start();
    // x/a runs on node 0: its ingress is judged there, so its log is node 0's.
    let log = cluster.node(0).ovs().dir().join("audit.log");
    let key = format!("audit_log = \"{}\"", log.display());
    cluster.restart_kube_node_with(0, &key).unwrap();
    let annotate = |value: &str| {
        let audit = format!("ofnode.io/audit={value}");
        cluster
            .kube_change(
                "Namespace",
                &["annotate", "namespace", "x", &audit, "--overwrite"],
            )
            .unwrap();
    };
    let xa = &model.pod("x/a").pod;
    let (yb, zb) = (&model.pod("y/b").pod, &model.pod("z/b").pod);
    let from_port = |src: std::net::Ipv4Addr, sport: u16| {
        move |l: &Value| l["src_ip"] == src.to_string() && l["src_port"] == sport
    };

    // The namespace audits deny: z/b's probe to x/a, isolated by x/web, is logged.
    annotate("deny");
    let web = policy(
        "x",
        "web",
        json!({"podSelector": {"matchLabels": {"pod": "a"}},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}],
                            "ports": [{"protocol": "TCP", "port": 80}]}]}),
    );
    cluster.kube_apply("NetworkPolicy", &web).unwrap();
    udp_once(zb, xa.ip, 40010);
    let lines = audit_lines(&log, "denied probe", |l| {
        l.iter().any(from_port(zb.ip, 40010))
    });
    let denied = lines.iter().find(|l| from_port(zb.ip, 40010)(l)).unwrap();
    for (field, want) in [
        ("direction", json!("ingress")),
        ("namespace", json!("x")),
        ("policy", Value::Null),
        ("rule", json!("default-deny")),
        ("verdict", json!("deny")),
        ("protocol", json!("udp")),
        ("dst_ip", json!(xa.ip.to_string())),
        ("dst_port", json!(80)),
        ("src_pod", json!("z/b")),
        ("dst_pod", json!("x/a")),
        ("isolated_by", json!(["x/web"])),
    ] {
        assert_eq!(denied[field], want, "{field} in {denied}");
    }

    // A policy's own annotation audits its allowed connections.
    let mut allow_y = policy(
        "x",
        "allow-y",
        json!({"podSelector": {"matchLabels": {"pod": "a"}},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]}),
    );
    allow_y["metadata"]["annotations"] = json!({"ofnode.io/audit": "allow"});
    cluster.kube_apply("NetworkPolicy", &allow_y).unwrap();
    let yb_to_81 = |l: &&Value| l["src_ip"] == yb.ip.to_string() && l["dst_port"] == 81;
    let connection = ofnode_harness::probe::Connection::open(yb, xa.ip, 81).unwrap();
    let lines = audit_lines(&log, "allowed connection", |l| {
        l.iter().any(|l| yb_to_81(&l))
    });
    drop(connection);
    let allowed = lines.iter().find(yb_to_81).unwrap();
    for (field, want) in [
        ("namespace", "x"),
        ("policy", "allow-y"),
        ("rule", "ingress[0]"),
        ("verdict", "allow"),
        ("protocol", "tcp"),
        ("src_pod", "y/b"),
    ] {
        assert_eq!(allowed[field], want, "{field} in {allowed}");
    }

    // A bad value: a bad object in status naming it; it changes nothing (kube/mirror.rs): the
    // namespace keeps auditing deny, so a denied probe is still logged, x/allow-y's own
    // annotation still holds and x/a stays isolated.
    annotate("drop");
    for node in cluster.nodes() {
        let status = node.status().unwrap();
        let bad = &status["kubernetes"]["bad_objects"];
        let named = bad.as_array().into_iter().flatten().any(|b| {
            b["kind"] == "Namespace"
                && b["name"] == "x"
                && b["reason"].as_str().is_some_and(|r| {
                    r.contains("\"drop\"") && r.contains("keeps its audit setting (deny)")
                })
        });
        assert!(named, "node {}: {bad}", node.index);
    }
    let text = cluster.node(0).cli(&["status"]).unwrap();
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("bad Namespace x: ") && l.contains("drop")),
        "{text}"
    );
    udp_once(zb, xa.ip, 40011);
    audit_lines(&log, "the denied probe after the bad value", |l| {
        l.iter().any(from_port(zb.ip, 40011))
    });
    let connection = ofnode_harness::probe::Connection::open(yb, xa.ip, 81).unwrap();
    audit_lines(&log, "a second allowed connection", |l| {
        l.iter().filter(yb_to_81).count() >= 2
    });
    drop(connection);
    // Fixed to none, the namespace audits nothing: the next denied probe is not logged.
    annotate("none");
    wait_for_bad_objects_cleared(&cluster);
    udp_once(zb, xa.ip, 40012);
    std::thread::sleep(Duration::from_secs(2));
    let lines = audit_lines(&log, "the log", |_| true);
    assert!(
        !lines.iter().any(from_port(zb.ip, 40012)),
        "a namespace auditing none logs no deny: {lines:?}"
    );
    let only_xa = model.expect(|from, to| to.id() != "x/a" || from.namespace == "y");
    model.check(&[(Probe::TCP80, &only_xa)]).unwrap();
}
