//! A batch whose bundle COMMIT was sent but never answered (issue 18): the node reads the
//! switch's table before it answers, keeps the batch when the switch applied it, and otherwise
//! refuses it and makes the switch's table the desired one; the next operation works. Against a
//! real ovs-vswitchd behind the harness's OpenFlow proxy, which cuts the connection right after
//! the COMMIT reached the switch, or holds the switch's COMMIT reply past the node's
//! `request_timeout`; ovs-ofctl dump-flows is the oracle.

mod sdn_common;

use std::time::Duration;

use ofnode::sdn::{Mode, NodeConfig};
use ofnode_harness::ofproxy::{BundleCtrl, Frame};
use ofnode_harness::{OfProxy, Ovs};
use sdn_common::*;

/// The node's OpenFlow request timeout in the held-reply test: short, so that the test does
/// not wait the default minute, and long enough for every other request on a busy machine.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A node reaching br0 through the harness's OpenFlow proxy, with the test's changes to its
/// configuration (as `Fixture::start_through_proxy`, which takes none).
async fn through_proxy_with(
    change: impl FnOnce(&mut NodeConfig) + Send + 'static,
) -> (Fixture, OfProxy) {
    let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
    let fixture = Fixture::start_with({
        let slot = slot.clone();
        move |ovs: &Ovs, cfg: &mut NodeConfig| {
            ovs.add_bridge("br0").expect("add br0");
            let proxy = OfProxy::in_front_of(ovs, "br0").expect("proxy");
            cfg.openflow = proxy.target();
            change(cfg);
            *slot.lock().unwrap() = Some(proxy);
        }
    })
    .await;
    let proxy = slot.lock().unwrap().take().expect("the proxy was started");
    (fixture, proxy)
}

/// The second pod of these tests (vethB, 10.128.0.6, sandbox b0b0…) in VNID 10.
fn pod_b() -> ofnode::sdn::PodAdd {
    pod(
        POD_B,
        "vethB",
        "10.128.0.6",
        "0a:58:0a:80:00:06",
        &"b0".repeat(32),
        10,
    )
}

/// `pod_b`'s four flows at `ofport`, as ovs-ofctl prints them.
fn pod_b_flows(ofport: u16) -> Vec<String> {
    let note = format!("{}.00.00.00.00.00.00", ["b0"; 32].join("."));
    vec![
        format!("table=20, priority=100,arp,in_port={ofport},arp_spa=10.128.0.6,arp_sha=0a:58:0a:80:00:06 actions=load:0xa->NXM_NX_REG0[],note:{note},goto_table:21"),
        format!("table=20, priority=100,ip,in_port={ofport},nw_src=10.128.0.6 actions=load:0xa->NXM_NX_REG0[],goto_table:21"),
        format!("table=40, priority=100,arp,arp_tpa=10.128.0.6 actions=output:{ofport}"),
        format!("table=70, priority=100,ip,nw_dst=10.128.0.6 actions=load:0xa->NXM_NX_REG1[],load:{ofport:#x}->NXM_NX_REG2[],goto_table:80"),
    ]
}

/// The switch applies the bundle and answers its COMMIT; the proxy holds that reply past the
/// node's `request_timeout` (2 s here, set through `NodeConfig`, as `ofnode run
/// --openflow-request-timeout-ms` does). The node must not take the silence for a failure: it
/// reads the switch's table, finds the batch there and answers Ok; the switch holds exactly
/// the desired table; the late reply, released afterwards, changes nothing; the next pod add
/// works and lands exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_reply_held_past_the_request_timeout_is_settled_from_the_switchs_table() {
    let (f, proxy) = through_proxy_with(|cfg| cfg.request_timeout = REQUEST_TIMEOUT).await;
    f.node
        .setup(&setup_request(Mode::Subnet))
        .await
        .expect("setup");
    let base = base_flows(Mode::Subnet);
    assert_flows(&f.ovs, &base);
    f.veth("vethA");

    proxy.hold_once(|frame: &Frame| frame.is_bundle_ctrl(BundleCtrl::CommitReply));
    let outcome = f.node.pod_add(&pod_a(10)).await;
    let held = proxy.held();
    assert!(
        held.len() == 1 && held[0].is_bundle_ctrl(BundleCtrl::CommitReply),
        "the COMMIT reply was not held: {held:?}"
    );
    // The switch applied the bundle (its reply says so): the node answers Ok, and the switch
    // holds exactly what that answer says.
    let port = outcome.expect("the switch applied the bundle: the pod add stands");
    let with_a = with(&base, &refs(&pod_a_flows(port, "0xa")));
    assert_flows(&f.ovs, &with_a);
    assert_eq!(f.node.state().await.expect("state").pods.len(), 1);
    assert!(f.node.status().in_sync, "{:?}", f.node.status());

    // The reply comes after all: it is no answer to anything now.
    assert_eq!(proxy.release_held(), 1);
    f.veth("vethB");
    let port_b = f.node.pod_add(&pod_b()).await.expect("the next pod add");
    assert_flows(&f.ovs, &with(&with_a, &refs(&pod_b_flows(port_b))));
    assert_eq!(f.node.state().await.expect("state").pods.len(), 2);
    println!(
        "proxy connections: {} (1: the session outlived the timeout)",
        proxy.connections()
    );
}

fn refs(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_after_the_commit_is_settled_from_the_switchs_table() {
    let (f, proxy) = Fixture::start_through_proxy().await;
    f.node
        .setup(&setup_request(Mode::Subnet))
        .await
        .expect("setup");
    let base = base_flows(Mode::Subnet);
    assert_flows(&f.ovs, &base);
    f.veth("vethA");

    proxy.cut_after(|frame: &Frame| frame.is_bundle_ctrl(BundleCtrl::CommitRequest));
    let outcome = f.node.pod_add(&pod_a(10)).await;
    assert!(
        proxy.connections() >= 2,
        "the proxy did not cut the session (the pod add: {outcome:?})"
    );
    // Whatever the answer, the switch already holds exactly what it says.
    let pods = f.node.state().await.expect("state").pods.len();
    match &outcome {
        Ok(port) => {
            let pod: Vec<String> = pod_a_flows(*port, "0xa");
            let pod: Vec<&str> = pod.iter().map(String::as_str).collect();
            assert_flows(&f.ovs, &with(&base, &pod));
            assert_eq!(pods, 1, "acknowledged but not in the desired state");
        }
        Err(e) => {
            println!("pod add refused: {e}");
            assert_flows(&f.ovs, &base);
            assert_eq!(pods, 0, "refused but kept in the desired state");
        }
    }
    println!("pod add after the cut: {outcome:?}");

    // The next operation works, on the new session.
    f.veth("vethB");
    let port = f.node.pod_add(&pod_b()).await.expect("the next pod add");
    assert!(port > 0);
    let pods_now = f.node.state().await.expect("state").pods.len();
    assert_eq!(pods_now, pods + 1);
}
