//! The networkpolicy mode through the control API, on a real (private) Open vSwitch: its base
//! table, its inputs (namespaces, pod labels, remote pods, policies) and their refusals. Every
//! refusal must name the field and change nothing: the switch's table (ovs-ofctl) and the
//! node's inputs are compared before and after.

mod sdn_common;

use ofnode::api::client::{Client, ClientError};
use ofnode::api::server::{self, ApiOptions};
use ofnode::api::wire;
use ofnode::sdn::Mode;
use sdn_common::*;

/// The control API of `f`'s node on a socket in a temporary directory (the server task ends
/// with the test's runtime).
struct Api {
    client: Client,
    _dir: tempfile::TempDir,
}

async fn serve(f: &Fixture) -> Api {
    let dir = tempfile::tempdir().expect("socket dir");
    let options = ApiOptions {
        socket: dir.path().join("ofnode.sock"),
        ..ApiOptions::default()
    };
    let listener = server::bind(&options).await.expect("bind the API socket");
    let node = f.node.clone();
    tokio::spawn(async move {
        let _ = server::serve(
            listener,
            node,
            server::Sources::default(),
            &options,
            std::future::pending(),
        )
        .await;
    });
    Api {
        client: Client::new(dir.path().join("ofnode.sock")),
        _dir: dir,
    }
}

fn policy(namespace: &str, name: &str, spec: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"{name}","namespace":"{namespace}","resourceVersion":"7"}},
            "spec":{spec},"status":{{}}}}"#
    )
    .into_bytes()
}

fn namespace(name: &str, vnid: u32, pairs: &[(&str, &str)]) -> wire::Namespace {
    wire::Namespace {
        name: name.into(),
        vnid: ofnode::sdn::Vnid::new(vnid).unwrap(),
        labels: labels(pairs),
        audit: Default::default(),
    }
}

fn pod_labels(pod: &str, set: &[(&str, &str)], remove: &[&str]) -> wire::PodLabels {
    wire::PodLabels {
        pod: key(pod),
        edit: label_edit(set, remove),
    }
}

/// Pod `pod` of another node at `ip` with labels `pairs`.
fn remote_pod(pod: &str, ip: &str, pairs: &[(&str, &str)]) -> wire::KnownPod {
    wire::KnownPod {
        pod: key(pod),
        info: wire::PodInfo {
            labels: labels(pairs),
            ips: vec![ip.parse().unwrap()],
            ..Default::default()
        },
    }
}

/// The HTTP status and message of a refusal.
#[track_caller]
fn refusal<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, String) {
    match result {
        Err(ClientError::Api { status, message }) => (status.as_u16(), message),
        other => panic!("expected the API to refuse, got {other:?}"),
    }
}

/// What the node holds of the mode's inputs, as the API lists them.
async fn inputs(api: &Api) -> String {
    let c = &api.client;
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        c.pods().await.expect("pods"),
        c.namespaces().await.expect("namespaces"),
        c.remote_pods().await.expect("remote pods"),
        c.netpols().await.expect("netpols"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_builds_the_modes_table_and_status_counts_its_inputs() {
    // `set_up` compares the switch's table with the oracle.
    let f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let status = api.client.status().await.expect("status");
    assert_eq!(status.node.version_note.as_deref(), Some("02.03"));
    assert_eq!(
        (status.node.netpols, status.node.namespaces),
        (Some(0), Some(0))
    );
    api.client
        .namespace_set(&namespace("x", 11, &[("ns", "x")]))
        .await
        .expect("namespace x");
    api.client
        .netpol_apply(policy("x", "deny", r#"{"podSelector":{}}"#))
        .await
        .expect("a policy");
    let status = api.client.status().await.expect("status");
    assert_eq!(
        (status.node.netpols, status.node.namespaces),
        (Some(1), Some(1))
    );
    // No local pod is selected: the policy costs no flow on this node.
    assert_flows(&f.ovs, &base_flows(Mode::NetworkPolicy));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_isolates_its_pods_and_its_delete_restores_them() {
    let f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let c = &api.client;
    c.namespace_set(&namespace("x", 11, &[])).await.unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    pod.labels.insert("pod".into(), "a".into());
    let ofport = c
        .pod_add(&wire::PodAdd::from(pod.clone()))
        .await
        .expect("pod add takes the namespace's VNID");
    // The seed's four pod flows, and table 25's: its service traffic back from the DNAT.
    let with_pod = with(
        &base_flows(Mode::NetworkPolicy),
        &pod_a_flows(ofport, "0xb")
            .iter()
            .map(String::as_str)
            .chain(["table=25, priority=100,ip,nw_src=10.128.0.5 actions=load:0xb->NXM_NX_REG0[],resubmit(,21)"])
            .collect::<Vec<_>>(),
    );
    wait_for_flows(&f.ovs, &with_pod, std::time::Duration::from_secs(10));

    // Ingress from pods labelled pod=b of x on TCP 80: target, peer and port clauses.
    let spec = r#"{"podSelector":{"matchLabels":{"pod":"a"}},
        "ingress":[{"from":[{"podSelector":{"matchLabels":{"pod":"b"}}}],"ports":[{"port":80}]}]}"#;
    c.netpol_apply(policy("x", "allow-b", spec)).await.unwrap();
    let isolated = with(
        &with_pod,
        &["cookie=0x4f4100000800000b, table=80, priority=100,ip,nw_dst=10.128.0.5 actions=drop"],
    );
    // No pod labelled pod=b exists: the rule allows nothing yet, the pod is isolated.
    assert_flows(&f.ovs, &isolated);

    c.remote_pod_set(&remote_pod("x/pod-b", "10.130.0.7", &[("pod", "b")]))
        .await
        .unwrap();
    let allowed = with(
        &isolated,
        &[
            "table=80, priority=200,ip,reg0=0xb,nw_src=10.130.0.7 actions=conjunction(1,1/3)",
            "table=80, priority=200,ip,nw_dst=10.128.0.5 actions=conjunction(1,2/3)",
            "table=80, priority=200,tcp,tp_dst=80 actions=conjunction(1,3/3)",
            "cookie=0x4f41000000000001, table=80, priority=200,conj_id=1,ip actions=goto_table:81",
        ],
    );
    assert_flows(&f.ovs, &allowed);
    let list = c.netpols().await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (
            list[0].selected_pods,
            list[0].flows,
            list[0].policy_types.clone()
        ),
        (1, 5, vec!["Ingress".to_string()])
    );

    // The pod's labels change: it is no longer selected.
    c.pod_labels(&pod_labels("x/pod-a", &[("pod", "z")], &[]))
        .await
        .unwrap();
    assert_flows(&f.ovs, &with_pod);
    c.pod_labels(&pod_labels("x/pod-a", &[("pod", "a")], &[]))
        .await
        .unwrap();
    assert_flows(&f.ovs, &allowed);
    // The peer's label goes (the others stay): the rule allows nothing again.
    c.pod_labels(&pod_labels("x/pod-b", &[("tier", "web")], &[]))
        .await
        .unwrap();
    assert_flows(&f.ovs, &allowed);
    c.pod_labels(&pod_labels("x/pod-b", &[], &["pod"]))
        .await
        .unwrap();
    assert_flows(&f.ovs, &isolated);
    let remote = c.remote_pods().await.unwrap();
    assert_eq!(remote.len(), 1, "{remote:?}");
    assert_eq!(
        remote[0].info.labels,
        [("tier".to_string(), "web".to_string())].into()
    );
    c.pod_labels(&pod_labels("x/pod-b", &[("pod", "b")], &[]))
        .await
        .unwrap();
    assert_flows(&f.ovs, &allowed);

    c.netpol_del(&wire::NetPolDel {
        namespace: "x".into(),
        name: "allow-b".into(),
    })
    .await
    .unwrap();
    assert_flows(&f.ovs, &with_pod);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let c = &api.client;
    c.namespace_set(&namespace("x", 11, &[("ns", "x")]))
        .await
        .unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    pod.labels.insert("pod".into(), "a".into());
    c.pod_add(&wire::PodAdd::from(pod.clone())).await.unwrap();
    c.remote_pod_set(&remote_pod("x/pod-r", "10.130.0.8", &[]))
        .await
        .unwrap();
    c.netpol_apply(policy("x", "deny", r#"{"podSelector":{}}"#))
        .await
        .unwrap();
    let ports = f.ports();
    let flows = f.ovs.dump_flows("br0").expect("dump-flows");
    let held = inputs(&api).await;

    let bad_policies = [
        (
            policy(
                "x",
                "p",
                r#"{"podSelector":{},"ingress":[{"ports":[{"port":"HTTP"}]}]}"#,
            ),
            "spec.ingress[0].ports[0].port: \"HTTP\" is not a port name",
        ),
        (
            policy(
                "x",
                "p",
                r#"{"podSelector":{},"ingress":[{"ports":[{"port":70000}]}]}"#,
            ),
            "spec.ingress[0].ports[0].port",
        ),
        (
            policy(
                "x",
                "p",
                r#"{"podSelector":{"matchExpressions":[{"key":"a","operator":"Near","values":["b"]}]}}"#,
            ),
            "spec.podSelector.matchExpressions[0].operator",
        ),
        (
            policy("x", "p", r#"{"podSelector":{},"egres":[]}"#),
            "spec.egres",
        ),
        (
            policy("nowhere", "p", r#"{"podSelector":{}}"#),
            "metadata.namespace: namespace \"nowhere\" does not exist",
        ),
        // The same name as the held policy: the refusal leaves the old one in place.
        (
            policy(
                "x",
                "deny",
                r#"{"podSelector":{},"ingress":[{"ports":[{"port":0}]}]}"#,
            ),
            "spec.ingress[0].ports[0].port",
        ),
        (b"{not json".to_vec(), ""),
    ];
    for (body, field) in bad_policies {
        let (status, message) = refusal(c.netpol_apply(body.clone()).await);
        assert_eq!(status, 422, "{message}");
        assert!(
            message.contains(field),
            "{message:?} does not name {field:?}"
        );
    }

    let (status, message) = refusal(c.namespace_set(&namespace("y", 11, &[])).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("vnid:"), "{message}");
    // VNID 0 is the nodes' own traffic: a namespace of it would make `reg0=0` peers.
    let (status, message) = refusal(c.namespace_set(&namespace("y", 0, &[])).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("vnid: 0 is the VNID"), "{message}");
    let (status, message) = refusal(c.namespace_set(&namespace("y", 12, &[("-bad", "v")])).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("labels.-bad"), "{message}");
    let (status, message) = refusal(c.namespace_set(&namespace("Y_", 12, &[])).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("name:"), "{message}");
    let (status, message) = refusal(
        c.namespace_del(&wire::NamespaceDel { name: "x".into() })
            .await,
    );
    assert_eq!(status, 409, "{message}");

    f.veth("vethB");
    let mut other = sdn_common::pod(
        "nowhere/pod-b",
        "vethB",
        "10.128.0.6",
        "0a:58:0a:80:00:06",
        &"cd".repeat(32),
        0,
    );
    let (status, message) = refusal(c.pod_add(&wire::PodAdd::from(other.clone())).await);
    assert_eq!(status, 422);
    assert!(
        message.starts_with("pod: namespace \"nowhere\" does not exist"),
        "{message}"
    );
    other.pod = key("x/pod-b");
    other.ip = "10.130.0.8".parse().unwrap();
    let (status, message) = refusal(c.pod_add(&wire::PodAdd::from(other.clone())).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("ip:"), "{message}");
    assert!(message.contains("x/pod-r"), "{message}");
    other.ip = "10.128.0.6".parse().unwrap();
    other.vnid = ofnode::sdn::Vnid::new(12).unwrap();
    let (status, message) = refusal(c.pod_add(&wire::PodAdd::from(other.clone())).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("vnid:"), "{message}");
    other.vnid = ofnode::sdn::Vnid::GLOBAL;
    other.labels.insert("bad key".into(), "v".into());
    let (status, message) = refusal(c.pod_add(&wire::PodAdd::from(other.clone())).await);
    assert_eq!(status, 422);
    assert!(message.starts_with("labels.bad key"), "{message}");

    let (status, message) = refusal(
        c.pod_labels(&pod_labels("x/pod-a", &[("pod", "a b")], &[]))
            .await,
    );
    assert_eq!(status, 422);
    assert!(message.starts_with("labels.pod"), "{message}");
    let (status, message) = refusal(
        c.pod_labels(&pod_labels("x/pod-a", &[("pod", "b")], &["pod"]))
            .await,
    );
    assert_eq!(status, 422);
    assert!(message.starts_with("labels.pod"), "{message}");
    let (status, message) = refusal(
        c.pod_labels(&pod_labels("x/nosuch", &[("pod", "b")], &[]))
            .await,
    );
    assert_eq!(status, 404, "{message}");
    let (status, message) = refusal(
        c.namespace_labels(&wire::NamespaceLabels {
            name: "x".into(),
            edit: label_edit(&[("-bad", "v")], &[]),
        })
        .await,
    );
    assert_eq!(status, 422);
    assert!(message.starts_with("labels.-bad"), "{message}");
    let (status, message) = refusal(
        c.namespace_labels(&wire::NamespaceLabels {
            name: "nowhere".into(),
            edit: label_edit(&[("team", "blue")], &[]),
        })
        .await,
    );
    assert_eq!(status, 404, "{message}");

    let http = |port| wire::NamedPort {
        name: "http".into(),
        protocol: wire::L4::Tcp,
        port,
    };
    for (ports, status, field) in [
        (vec![http(0)], 422, "ports[0].port: 0 is not a port"),
        (
            vec![http(80), http(81)],
            422,
            "ports[1].name: \"http\" names two TCP ports",
        ),
        (
            vec![wire::NamedPort {
                name: "web--1".into(),
                ..http(80)
            }],
            422,
            "ports[0].name: \"web--1\" is not a port name",
        ),
    ] {
        let req = wire::PodPorts {
            pod: key("x/pod-a"),
            ports,
        };
        let (got, message) = refusal(c.pod_ports(&req).await);
        assert_eq!(got, status, "{message}");
        assert!(message.starts_with(field), "{message}");
    }
    let nobody = wire::PodPorts {
        pod: key("x/nosuch"),
        ports: vec![http(80)],
    };
    let (status, message) = refusal(c.pod_ports(&nobody).await);
    assert_eq!(status, 404, "{message}");

    let mut no_address = remote_pod("x/pod-c", "10.130.0.9", &[]);
    let mut bad_port = remote_pod("x/pod-c", "10.130.0.9", &[]);
    bad_port.info.ports = vec![http(0)];
    no_address.info.ips.clear();
    for (pod, field) in [
        (remote_pod("x/pod-c", "10.128.0.9", &[]), "ips:"),
        (remote_pod("x/pod-c", "192.0.2.9", &[]), "ips:"),
        (no_address, "ips:"),
        (bad_port, "ports[0].port"),
        (remote_pod("nowhere/pod-c", "10.130.0.9", &[]), "pod:"),
        (remote_pod("x/pod-a", "10.130.0.9", &[]), "pod:"),
        (
            remote_pod("x/pod-c", "10.130.0.9", &[("bad key", "v")]),
            "labels.bad key",
        ),
    ] {
        let (status, message) = refusal(c.remote_pod_set(&pod).await);
        assert_eq!(status, 422);
        assert!(message.starts_with(field), "{message}");
    }
    let (status, message) = refusal(
        c.remote_pod_del(&wire::RemotePodDel {
            pod: key("x/pod-a"),
        })
        .await,
    );
    assert_eq!(status, 422);
    assert!(message.starts_with("pod:"), "{message}");

    assert_flows(&f.ovs, &flows);
    assert_eq!(f.ports(), ports, "a refused pod add left a port");
    assert_eq!(inputs(&api).await, held);
}

/// A named port resolves on each pod it names (its number there), follows the pod's ports
/// as they change, and allows nothing on a pod without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_port_resolves_on_the_pods_that_name_it() {
    let f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let c = &api.client;
    c.namespace_set(&namespace("x", 11, &[])).await.unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    let ofport = c.pod_add(&wire::PodAdd::from(pod.clone())).await.unwrap();
    let with_pod = with(
        &base_flows(Mode::NetworkPolicy),
        &pod_a_flows(ofport, "0xb")
            .iter()
            .map(String::as_str)
            .chain(["table=25, priority=100,ip,nw_src=10.128.0.5 actions=load:0xb->NXM_NX_REG0[],resubmit(,21)"])
            .collect::<Vec<_>>(),
    );
    wait_for_flows(&f.ovs, &with_pod, std::time::Duration::from_secs(10));
    let spec = r#"{"podSelector":{},"ingress":[{"ports":[{"port":"http"},{"protocol":"UDP","port":"dns"}]}]}"#;
    c.netpol_apply(policy("x", "named", spec)).await.unwrap();
    // The pod names no port yet: isolated, nothing allowed.
    let isolated = with(
        &with_pod,
        &["cookie=0x4f4100000800000b, table=80, priority=100,ip,reg1=0xb actions=drop"],
    );
    assert_flows(&f.ovs, &isolated);

    let ports = |ports: &[&str]| wire::PodPorts {
        pod: key("x/pod-a"),
        ports: ports.iter().map(|p| p.parse().unwrap()).collect(),
    };
    c.pod_ports(&ports(&["http=8080/TCP", "dns=5353/UDP", "metrics=9090"]))
        .await
        .unwrap();
    let allowed = |http: &str| {
        with(
            &isolated,
            &[
                &format!("cookie=0x4f41000000000001, table=80, priority=210,tcp,nw_dst=10.128.0.5,tp_dst={http} actions=goto_table:81"),
                "cookie=0x4f41000000000001, table=80, priority=210,udp,nw_dst=10.128.0.5,tp_dst=5353 actions=goto_table:81",
            ],
        )
    };
    assert_flows(&f.ovs, &allowed("8080"));
    c.pod_ports(&ports(&["http=80", "dns=5353/UDP"]))
        .await
        .unwrap();
    assert_flows(&f.ovs, &allowed("80"));
    // `http` over UDP is not the policy's (TCP) http.
    c.pod_ports(&ports(&["http=80/UDP"])).await.unwrap();
    assert_flows(&f.ovs, &isolated);
}

/// A node in another mode would keep the mode's inputs without enforcing them: it refuses
/// them (409, naming its mode) and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_in_another_mode_refuses_the_modes_inputs() {
    let f = Fixture::set_up(Mode::Multitenant).await;
    let api = serve(&f).await;
    let c = &api.client;
    f.veth("vethA");
    let flows = f.ovs.dump_flows("br0").expect("dump-flows");
    let ports = f.ports();
    let expect_409 = |(status, message): (u16, String), what: &str| {
        assert_eq!(status, 409, "{message}");
        assert_eq!(
            message,
            format!("{what}: only a node in networkpolicy mode takes them; this node is in multitenant mode")
        );
    };
    expect_409(
        refusal(c.namespace_set(&namespace("x", 11, &[])).await),
        "namespaces",
    );
    expect_409(
        refusal(
            c.netpol_apply(policy("x", "deny", r#"{"podSelector":{}}"#))
                .await,
        ),
        "NetworkPolicy objects",
    );
    expect_409(
        refusal(
            c.remote_pod_set(&remote_pod("x/pod-b", "10.130.0.7", &[]))
                .await,
        ),
        "remote pods",
    );
    let mut pod = pod_a(11);
    pod.labels.insert("pod".into(), "a".into());
    expect_409(
        refusal(c.pod_add(&wire::PodAdd::from(pod.clone())).await),
        "a pod's labels",
    );
    assert_flows(&f.ovs, &flows);
    assert_eq!(f.ports(), ports, "a refused pod add left a port");
    assert_eq!(inputs(&api).await, "[]\n[]\n[]\n[]");
}

/// A networkpolicy node with namespaces x and y, pod A (x, pod=a), a remote pod of y, an
/// ingress policy from namespace y on TCP and SCTP 80 and 81..90 and an egress policy to a
/// CIDR: flows in tables 21 and 80 of every kind (isolation, clauses, conj_id flows). Returns
/// the table the switch holds, checked to contain them.
async fn populated(f: &Fixture, api: &Api) -> Vec<String> {
    let c = &api.client;
    c.namespace_set(&namespace("x", 11, &[])).await.unwrap();
    c.namespace_set(&namespace("y", 12, &[("team", "blue")]))
        .await
        .unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    pod.labels.insert("pod".into(), "a".into());
    c.pod_add(&wire::PodAdd::from(pod.clone())).await.unwrap();
    c.remote_pod_set(&remote_pod("y/pod-b", "10.130.0.7", &[]))
        .await
        .unwrap();
    let ingress = r#"{"podSelector":{"matchLabels":{"pod":"a"}},
        "ingress":[{"from":[{"namespaceSelector":{"matchLabels":{"team":"blue"}}}],
                    "ports":[{"port":80},{"port":81,"endPort":90},
                             {"protocol":"SCTP","port":80},{"protocol":"SCTP","port":81,"endPort":90}]}]}"#;
    c.netpol_apply(policy("x", "from-blue", ingress))
        .await
        .unwrap();
    let egress = r#"{"podSelector":{},"policyTypes":["Egress"],
        "egress":[{"to":[{"ipBlock":{"cidr":"192.0.2.0/24","except":["192.0.2.128/25"]}}]}]}"#;
    c.netpol_apply(policy("x", "out", egress)).await.unwrap();
    let flows = f.ovs.dump_flows("br0").expect("dump-flows");
    for wanted in [
        "cookie=0x4f4100000800000b, table=80, priority=100,ip,nw_dst=10.128.0.5 actions=drop",
        "table=80, priority=200,ip,reg0=0xc actions=conjunction(1,1/3)",
        "table=80, priority=200,sctp,tp_dst=80 actions=conjunction(1,3/3)",
        "table=80, priority=200,sctp,tp_dst=0x54/0xfffc actions=conjunction(1,3/3)",
        "cookie=0x4f4100002800000b, table=21, priority=100,ip,reg0=0xb actions=drop",
        "table=21, priority=200,ip,nw_dst=192.0.2.0/25 actions=conjunction(2,2/2)",
        "cookie=0x4f41000020000002, table=21, priority=200,conj_id=2,ip actions=goto_table:30",
    ] {
        assert!(
            flows.iter().any(|f| f == wanted),
            "{wanted} missing from\n{}",
            flows.join("\n")
        );
    }
    flows
}

/// Waits until the node watches the switch through the flow monitor.
async fn wait_monitoring(f: &Fixture) {
    let deadline = std::time::Instant::now() + LIMIT;
    while f.node.status().drift.detection != ofnode::sdn::Detection::FlowMonitor {
        assert!(std::time::Instant::now() < deadline, "no flow monitor");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Only keeps a broken run from hanging.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

async fn restored(f: &Fixture, expected: &[String]) {
    tokio::task::block_in_place(|| wait_for_flows(&f.ovs, expected, LIMIT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_repair_and_resync_keep_the_modes_flows() {
    let f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let expected = populated(&f, &api).await;
    wait_monitoring(&f).await;

    // Behind the node's back: the policy tables' clause and conj_id flows go, a foreign flow
    // appears in table 81, a commit flow is changed.
    for cut in ["table=80,ip,reg0=12", "table=80,tcp", "table=21,conj_id=2"] {
        f.ovs.ofctl("del-flows", "br0", &[cut]).expect("del-flows");
    }
    f.ovs
        .ofctl("add-flow", "br0", &["table=81,priority=5,ip,actions=drop"])
        .expect("add-flow");
    f.ovs
        .ofctl(
            "mod-flows",
            "br0",
            &["--strict", "table=81,priority=0,ip,actions=drop"],
        )
        .expect("mod-flows");
    restored(&f, &expected).await;

    // A resync (forced: the whole table re-installed) leaves it exactly so.
    f.node.resync(true).await.expect("forced resync");
    assert_flows(&f.ovs, &expected);
    f.node.resync(false).await.expect("resync");
    assert_flows(&f.ovs, &expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reloads_the_modes_inputs_and_repairs_the_switch() {
    let mut f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let expected = populated(&f, &api).await;
    let held = inputs(&api).await;
    drop(api);

    f.node.shutdown().await;
    // While ofnode is down, the policy tables are emptied.
    for table in ["table=21", "table=80", "table=81"] {
        f.ovs
            .ofctl("del-flows", "br0", &[table])
            .expect("del-flows");
    }
    f.restart_node().await;
    let api = serve(&f).await;
    restored(&f, &expected).await;
    // The same inputs, conjunction ids included: the table is the same, flow for flow.
    assert_eq!(inputs(&api).await, held);

    // A new policy gets fresh ids; the old ones stay where they were.
    let more =
        r#"{"podSelector":{},"ingress":[{"from":[{"ipBlock":{"cidr":"198.51.100.0/24"}}]}]}"#;
    api.client
        .netpol_apply(policy("x", "more", more))
        .await
        .unwrap();
    let after = f.ovs.dump_flows("br0").unwrap();
    for flow in expected.iter().filter(|f| f.contains("conj")) {
        assert!(after.contains(flow), "{flow} changed after another policy");
    }
    assert!(
        after
            .iter()
            .any(|f| f.contains("nw_src=198.51.100.0/24 actions=conjunction(3,1/2)")),
        "{}",
        after.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_audit_setting_is_refused_whole_and_changes_nothing() {
    let f = Fixture::set_up(Mode::NetworkPolicy).await;
    let api = serve(&f).await;
    let c = &api.client;
    c.namespace_set(&namespace("x", 11, &[])).await.unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    c.pod_add(&wire::PodAdd::from(pod)).await.unwrap();
    c.netpol_apply(policy("x", "deny", r#"{"podSelector":{}}"#))
        .await
        .unwrap();
    let flows = f.ovs.dump_flows("br0").expect("dump-flows");
    let held = inputs(&api).await;

    // A namespace's `audit` field (the API body; `ofnode namespace set --audit`).
    let body = serde_json::json!({"name": "x", "vnid": 11, "audit": "allow,drop"});
    let sent: Result<wire::Ok, _> = c
        .send(hyper::Method::POST, wire::route::NAMESPACES, &body)
        .await;
    let (status, message) = refusal(sent);
    assert!(status == 400 || status == 422, "{status} {message}");
    assert!(
        message.contains(r#"unknown value "drop" in "allow,drop""#),
        "{message}"
    );
    // A policy's annotation: refused whole, the held policy of that name stays.
    let annotated = String::from_utf8(policy("x", "deny", r#"{"podSelector":{}}"#))
        .unwrap()
        .replace(
            r#""resourceVersion":"7""#,
            r#""resourceVersion":"7","annotations":{"ofnode.io/audit":"deny,log"}"#,
        );
    let (status, message) = refusal(c.netpol_apply(annotated.into_bytes()).await);
    assert_eq!(status, 422, "{message}");
    assert!(
        message.starts_with(r#"metadata.annotations["ofnode.io/audit"]: "#)
            && message.contains(r#"unknown value "log""#),
        "{message}"
    );
    assert_eq!(inputs(&api).await, held, "a refusal changes no input");
    assert_eq!(
        f.ovs.dump_flows("br0").expect("dump-flows"),
        flows,
        "a refusal changes no flow"
    );

    // A good setting is taken, and listed.
    let body = serde_json::json!({"name": "x", "vnid": 11, "audit": "deny"});
    let _: wire::Ok = c
        .send(hyper::Method::POST, wire::route::NAMESPACES, &body)
        .await
        .expect("a good audit setting");
    let listed = c.namespaces().await.unwrap();
    assert_eq!(listed[0].audit.to_string(), "deny", "{listed:?}");
    let audited = f.ovs.dump_flows("br0").expect("dump-flows");
    assert!(
        audited
            .iter()
            .any(|f| f.contains("table=24,") && f.contains("meter_id=")),
        "{audited:?}"
    );
}
