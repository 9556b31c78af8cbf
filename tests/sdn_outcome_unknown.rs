//! A batch whose bundle COMMIT was sent but never answered (issue 18): the node reads the
//! switch's table before it answers, keeps the batch when the switch applied it, and otherwise
//! refuses it and makes the switch's table the desired one; the next operation works. Against a
//! real ovs-vswitchd behind the harness's OpenFlow proxy, which cuts the connection right after
//! the COMMIT reached the switch; ovs-ofctl dump-flows is the oracle.

mod sdn_common;

use ofnode::sdn::Mode;
use ofnode_harness::ofproxy::{BundleCtrl, Frame};
use sdn_common::*;

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
        "the proxy did not cut the session"
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
    let port = f
        .node
        .pod_add(&pod(
            "vethB",
            "10.128.0.6",
            "0a:58:0a:80:00:06",
            &"b0".repeat(32),
            10,
        ))
        .await
        .expect("the next pod add");
    assert!(port > 0);
    let pods_now = f.node.state().await.expect("state").pods.len();
    assert_eq!(pods_now, pods + 1);
}
