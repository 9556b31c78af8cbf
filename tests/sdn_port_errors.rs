//! A pod's port that ovs-vswitchd cannot open: the pod add itself succeeds (ofnode does not wait
//! for ovs-vswitchd's reconfiguration), and the failure ovs-vswitchd reports afterwards is logged
//! and counted in `ofnode_port_errors_total`. Against a real Open vSwitch: the veth exists when
//! the pod add checks it, and is deleted while the answer to the pod's bundle is held at an
//! OpenFlow proxy in front of the switch, before the port goes into OVSDB.

mod sdn_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ofnode::sdn::Mode;
use ofnode_harness::ofproxy::{BundleCtrl, Frame};
use sdn_common::*;

const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_vswitchd_cannot_open_is_counted_in_port_errors() {
    let (f, proxy) = Fixture::start_through_proxy().await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    f.veth("vethA");
    assert_eq!(f.node.metrics().port_errors.load(Ordering::Relaxed), 0);

    proxy.hold_once(|frame: &Frame| frame.is_bundle_ctrl(BundleCtrl::CommitReply));
    let add = {
        let node = f.node.clone();
        tokio::spawn(async move { node.pod_add(&pod_a(0)).await })
    };
    // The pod's device was there when the pod add checked it ...
    let deadline = Instant::now() + LIMIT;
    while proxy.held().is_empty() {
        assert!(Instant::now() < deadline, "the pod's bundle never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // ... and goes away before its port is added.
    f.ovs
        .netns()
        .exec_ok(&["ip", "link", "del", "vethA"])
        .unwrap();
    proxy.release_held();
    let ofport = tokio::time::timeout(LIMIT, add)
        .await
        .expect("pod add hung")
        .unwrap()
        .expect("the pod add itself succeeds");
    assert!(ofport > 0);

    let deadline = Instant::now() + LIMIT;
    while f.node.metrics().port_errors.load(Ordering::Relaxed) == 0 {
        assert!(
            Instant::now() < deadline,
            "the port error was never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = f.node.metrics().render(&f.node.status());
    assert!(metrics.contains("ofnode_port_errors_total 1"), "{metrics}");
    // The oracle agrees: ovs-vswitchd could not open it.
    let error = f
        .ovs
        .vsctl(&["get", "Interface", "vethA", "error"])
        .unwrap();
    assert!(error.contains("vethA"), "Interface.error: {error}");
}
