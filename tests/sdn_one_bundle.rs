//! Every node operation reaches the switch as exactly ONE bundle: counted at the switch side by
//! the harness's OpenFlow proxy between the node and a real ovs-vswitchd (every bundle the
//! switch received while the operation ran, how many flow mods each carried, and that none
//! went outside a bundle), not inferred from a cancellation race.

mod sdn_common;

use ofnode::sdn::policy::networkpolicy::parse_netpol;
use ofnode::sdn::{EgressNetworkPolicy, HostSubnet, Mode, Namespace, PodInfo, Service, Vnid};
use ofnode_harness::ofproxy::{msg_type, BundleEnd};
use ofnode_harness::OfProxy;
use sdn_common::*;

fn vnid(v: u32) -> Vnid {
    Vnid::new(v).unwrap()
}

/// Runs `op` and asserts the switch received exactly one bundle while it ran, committed and
/// answered, with at least one flow mod, and no flow mod outside it.
async fn one_bundle<T: std::fmt::Debug>(
    proxy: &OfProxy,
    what: &str,
    op: impl std::future::Future<Output = Result<T, ofnode::sdn::Error>>,
) {
    let mark = proxy.mark();
    op.await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let traffic = proxy.traffic_since(mark);
    let bundles = traffic.bundles();
    assert_eq!(bundles.len(), 1, "{what}: {}", traffic.describe());
    let bundle = &bundles[0];
    assert!(
        bundle.end == BundleEnd::Committed && bundle.commit_replied && bundle.flow_mods > 0,
        "{what}: {}",
        traffic.describe()
    );
    assert_eq!(
        traffic.loose_flow_mods(),
        0,
        "{what}: {}",
        traffic.describe()
    );
}

/// Runs `op`, which changes no flow, and asserts nothing reached the switch while it ran.
async fn no_bundle<T: std::fmt::Debug>(
    proxy: &OfProxy,
    what: &str,
    op: impl std::future::Future<Output = Result<T, ofnode::sdn::Error>>,
) {
    let mark = proxy.mark();
    op.await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let traffic = proxy.traffic_since(mark);
    assert!(
        traffic.bundles().is_empty() && traffic.loose_flow_mods() == 0,
        "{what}: {}",
        traffic.describe()
    );
}

/// Nothing reaches the switch behind the operations' backs (no follow-up fixes, no second
/// bundle after the answer), by evidence: a resync goes through the node's writer after
/// whatever it had queued, and reads the table through the same OpenFlow connection after
/// whatever the node had sent on it. When it returns, everything the operations left behind
/// has passed the proxy, and all that may have passed since `mark` is the resync's read.
async fn quiet_afterwards(proxy: &OfProxy, node: &ofnode::sdn::Node) {
    let mark = proxy.mark();
    node.resync(false).await.expect("resync");
    let traffic = proxy.traffic_since(mark);
    assert!(
        traffic.count_to_switch(msg_type::MULTIPART_REQUEST) >= 1,
        "the resync did not read the table: {}",
        traffic.describe()
    );
    assert!(
        traffic.bundles().is_empty() && traffic.loose_flow_mods() == 0,
        "{}",
        traffic.describe()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_is_exactly_one_bundle_at_the_switch() {
    let (f, proxy) = Fixture::start_through_proxy().await;
    let node = &f.node;
    one_bundle(
        &proxy,
        "setup",
        node.setup(&setup_request(Mode::Multitenant)),
    )
    .await;
    assert_flows(&f.ovs, &base_flows(Mode::Multitenant));

    f.veth("vethA");
    one_bundle(&proxy, "pod add", node.pod_add(&pod_a(10))).await;
    one_bundle(
        &proxy,
        "pod update",
        node.pod_update(&key(POD_A), None, vnid(11)),
    )
    .await;
    let host_subnet = HostSubnet {
        host_ip: "192.0.2.2".parse().unwrap(),
        subnet: "10.130.0.0/23".parse().unwrap(),
        fixed_vnid: None,
        vtep_mac: None,
    };
    one_bundle(&proxy, "hostsubnet add", node.hostsubnet_add(&host_subnet)).await;
    let service = Service {
        ip: "172.30.0.10".parse().unwrap(),
        vnid: vnid(11),
        ports: vec!["tcp/80".parse().unwrap(), "udp/53".parse().unwrap()],
    };
    one_bundle(&proxy, "service add", node.service_add(&service)).await;
    let ofport = f.ofport("vethA").expect("vethA's port");
    one_bundle(
        &proxy,
        "multicast local",
        node.multicast_local(vnid(11), true, &[ofport]),
    )
    .await;
    one_bundle(
        &proxy,
        "multicast vxlan",
        node.multicast_vxlan(&["192.0.2.2".parse().unwrap()]),
    )
    .await;
    let policy: EgressNetworkPolicy = serde_json::from_str(
        r#"{"namespace":"ns1","name":"p1","spec":{"egress":[
            {"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}},
            {"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}]}}"#,
    )
    .unwrap();
    one_bundle(
        &proxy,
        "egress set",
        node.egress_set(vnid(11), &["ns1".to_string()], &[policy]),
    )
    .await;
    one_bundle(
        &proxy,
        "service del",
        node.service_del("172.30.0.10".parse().unwrap()),
    )
    .await;
    one_bundle(
        &proxy,
        "hostsubnet del",
        node.hostsubnet_del(host_subnet.host_ip, host_subnet.subnet),
    )
    .await;
    one_bundle(&proxy, "pod del", node.pod_del(&key(POD_A), None)).await;

    quiet_afterwards(&proxy, node).await;
}

fn namespace(name: &str, v: u32, pairs: &[(&str, &str)]) -> Namespace {
    Namespace {
        name: name.into(),
        vnid: vnid(v),
        labels: labels(pairs),
        audit: Default::default(),
    }
}

fn netpol(name: &str, spec: &str) -> ofnode::sdn::policy::networkpolicy::model::NetPol {
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"{name}","namespace":"x"}},"spec":{spec}}}"#
    );
    parse_netpol(json.as_bytes()).unwrap()
}

/// The networkpolicy mode's operations: each that changes flows (its own, or a policy's it
/// touches) is one bundle; one that changes none sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_networkpolicy_operation_is_exactly_one_bundle_at_the_switch() {
    let (f, proxy) = Fixture::start_through_proxy().await;
    let node = &f.node;
    one_bundle(
        &proxy,
        "setup",
        node.setup(&setup_request(Mode::NetworkPolicy)),
    )
    .await;
    // No policy yet: a namespace changes no flow.
    no_bundle(
        &proxy,
        "namespace set (no policy)",
        node.namespace_set(namespace("x", 11, &[])),
    )
    .await;
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    pod.labels = labels(&[("pod", "a")]);
    one_bundle(
        &proxy,
        "pod add with namespace and labels",
        node.pod_add(&pod),
    )
    .await;

    // Pod a lets in namespaces labelled team=blue and pods of x labelled pod=b.
    let policy = netpol(
        "a-from",
        r#"{"podSelector":{"matchLabels":{"pod":"a"}},"ingress":[
            {"from":[{"namespaceSelector":{"matchLabels":{"team":"blue"}}}]},
            {"from":[{"podSelector":{"matchLabels":{"pod":"b"}}}]}]}"#,
    );
    one_bundle(&proxy, "netpol apply", node.netpol_apply(policy.clone())).await;
    no_bundle(&proxy, "netpol apply (the same)", node.netpol_apply(policy)).await;
    one_bundle(
        &proxy,
        "namespace set (selected by a policy)",
        node.namespace_set(namespace("y", 12, &[("team", "blue")])),
    )
    .await;
    one_bundle(
        &proxy,
        "namespace set (relabelled, no longer selected)",
        node.namespace_set(namespace("y", 12, &[("team", "red")])),
    )
    .await;
    one_bundle(
        &proxy,
        "namespace label (selected again)",
        node.namespace_labels("y", label_edit(&[("team", "blue")], &[])),
    )
    .await;
    no_bundle(
        &proxy,
        "namespace label (the same)",
        node.namespace_labels("y", label_edit(&[("team", "blue")], &[])),
    )
    .await;
    one_bundle(
        &proxy,
        "namespace label (removed, no longer selected)",
        node.namespace_labels("y", label_edit(&[], &["team"])),
    )
    .await;
    let (remote_key, local_key) = (key("x/pod-b"), key("x/pod-a"));
    let remote = PodInfo {
        labels: labels(&[("pod", "b")]),
        ips: vec!["10.130.0.7".parse().unwrap()],
        local: false,
        ports: Vec::new(),
    };
    one_bundle(
        &proxy,
        "remote pod set",
        node.remote_pod_set(remote_key.clone(), remote.clone()),
    )
    .await;
    no_bundle(
        &proxy,
        "remote pod set (the same)",
        node.remote_pod_set(remote_key.clone(), remote.clone()),
    )
    .await;
    one_bundle(
        &proxy,
        "remote pod labels (no longer selected)",
        node.pod_labels(remote_key.clone(), label_edit(&[("pod", "c")], &[])),
    )
    .await;
    one_bundle(
        &proxy,
        "remote pod set (selected again)",
        node.remote_pod_set(remote_key.clone(), remote),
    )
    .await;
    one_bundle(
        &proxy,
        "pod labels (no longer selected)",
        node.pod_labels(local_key.clone(), label_edit(&[("pod", "z")], &[])),
    )
    .await;
    no_bundle(
        &proxy,
        "pod labels (another label, no policy sees it)",
        node.pod_labels(local_key.clone(), label_edit(&[("tier", "web")], &[])),
    )
    .await;
    one_bundle(
        &proxy,
        "pod labels (selected again)",
        node.pod_labels(local_key.clone(), label_edit(&[("pod", "a")], &["tier"])),
    )
    .await;
    one_bundle(&proxy, "remote pod del", node.remote_pod_del(remote_key)).await;
    one_bundle(
        &proxy,
        "namespace set (selected again)",
        node.namespace_set(namespace("y", 12, &[("team", "blue")])),
    )
    .await;
    one_bundle(
        &proxy,
        "namespace del (selected by a policy)",
        node.namespace_del("y"),
    )
    .await;
    one_bundle(&proxy, "netpol del", node.netpol_del("x", "a-from")).await;
    no_bundle(
        &proxy,
        "namespace set (no policy)",
        node.namespace_set(namespace("y", 12, &[])),
    )
    .await;
    no_bundle(&proxy, "namespace del (no policy)", node.namespace_del("y")).await;
    one_bundle(&proxy, "pod del", node.pod_del(&local_key, None)).await;
    quiet_afterwards(&proxy, node).await;
}

/// Issue 27: a burst of changes sent together (as an informer's relist delivers them: 1,000
/// label changes of 200 pods of other nodes, five of each pod, in order) coalesces into a
/// bounded number of bundles (the writer takes up to `max_batch` = 256 waiting edits as one),
/// every change is answered, and each pod's last labels (the last change the node received for
/// it) are what the switch enforces: within a batch, the engine's net changes are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_changes_coalesces_into_few_bundles_and_the_last_state_wins() {
    const PODS: usize = 200;
    const ROUNDS: usize = 5;
    let (f, proxy) = Fixture::start_through_proxy().await;
    let node = &f.node;
    node.setup(&setup_request(Mode::NetworkPolicy))
        .await
        .unwrap();
    node.namespace_set(namespace("x", 11, &[])).await.unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    pod.labels = labels(&[("pod", "a")]);
    node.pod_add(&pod).await.unwrap();
    let policy = netpol(
        "a-from-clients",
        r#"{"podSelector":{"matchLabels":{"pod":"a"}},"ingress":[
            {"from":[{"podSelector":{"matchLabels":{"role":"client"}}}],
             "ports":[{"protocol":"TCP","port":80}]}]}"#,
    );
    node.netpol_apply(policy).await.unwrap();
    let ip = |i: usize| format!("10.130.{}.{}", i / 200, 10 + i % 200);
    for i in 0..PODS {
        let info = PodInfo {
            labels: labels(&[("role", "server")]),
            ips: vec![ip(i).parse().unwrap()],
            local: false,
            ports: Vec::new(),
        };
        node.remote_pod_set(key(&format!("x/r{i}")), info)
            .await
            .unwrap();
    }

    // Round r gives pod i the role client when i + r is even.
    let role = |i: usize, round: usize| {
        if (i + round) % 2 == 0 {
            "client"
        } else {
            "server"
        }
    };
    let mark = proxy.mark();
    let changes = (0..ROUNDS).flat_map(|round| {
        (0..PODS).map(move |i| {
            node.pod_labels(
                key(&format!("x/r{i}")),
                label_edit(&[("role", role(i, round))], &[]),
            )
        })
    });
    for answer in futures::future::join_all(changes).await {
        answer.expect("every change of the burst is answered Ok");
    }
    let traffic = proxy.traffic_since(mark);
    let bundles = traffic.bundles();
    let changes = PODS * ROUNDS;
    // The first change may go alone (nothing else is waiting yet); then full batches.
    let bound = 1 + changes.div_ceil(256) + 1;
    assert!(
        !bundles.is_empty() && bundles.len() <= bound,
        "{changes} changes sent together took {} bundles (bound {bound}): {}",
        bundles.len(),
        traffic.describe()
    );
    assert!(
        bundles
            .iter()
            .all(|b| b.end == BundleEnd::Committed && b.commit_replied),
        "{}",
        traffic.describe()
    );

    let flows = f.ovs.dump_flows("br0").expect("dump-flows");
    let admitted = |i: usize| {
        let needle = format!("nw_src={} ", ip(i));
        flows.iter().any(|f| f.contains(&needle))
    };
    // What the node holds for each pod is the last change it received for it (requests sent
    // together arrive in no promised order), and exactly that is enforced.
    let known = node.remote_pods().await.unwrap();
    let mut clients = 0;
    for i in 0..PODS {
        let pod = key(&format!("x/r{i}"));
        let last = known
            .iter()
            .find(|p| p.pod == pod)
            .and_then(|p| p.info.labels.get("role").cloned())
            .unwrap_or_else(|| panic!("{pod} lost its role"));
        clients += usize::from(last == "client");
        assert_eq!(
            admitted(i),
            last == "client",
            "pod {pod} (last role {last}): its clause flow on the switch does not follow its last labels"
        );
    }
    // Most pods' last change is the last one sent (round 4 leaves the even pods clients).
    assert!(
        clients.abs_diff(PODS / 2) < PODS / 4,
        "{clients} of {PODS} pods are clients after the burst"
    );
    quiet_afterwards(&proxy, node).await;
}
