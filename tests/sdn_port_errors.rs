//! A pod's port that ovs-vswitchd cannot open: the pod add itself succeeds (ofnode does not wait
//! for ovs-vswitchd's reconfiguration), and the failure ovs-vswitchd reports afterwards is logged
//! and counted in `ofnode_port_errors_total`. Against a real Open vSwitch: the veth exists when
//! the pod is added and is deleted before ovs-vswitchd (paused meanwhile) gets to it.

mod sdn_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ofnode::sdn::Mode;
use sdn_common::*;

const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_vswitchd_cannot_open_is_counted_in_port_errors() {
    let f = Fixture::set_up(Mode::Subnet).await;
    f.veth("vethA");
    assert_eq!(f.node.metrics().port_errors.load(Ordering::Relaxed), 0);

    let paused = f.ovs.pause_vswitchd();
    let add = {
        let node = f.node.clone();
        tokio::spawn(async move { node.pod_add(&pod_a(0)).await })
    };
    // The port is in the database (ovsdb-server answers while ovs-vswitchd is stopped) ...
    let deadline = Instant::now() + LIMIT;
    while !f
        .ovs
        .vsctl_no_wait(&["list-ports", "br0"])
        .unwrap()
        .lines()
        .any(|p| p == "vethA")
    {
        assert!(Instant::now() < deadline, "vethA never reached OVSDB");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // ... and its device goes away before ovs-vswitchd looks.
    f.ovs
        .netns()
        .exec_ok(&["ip", "link", "del", "vethA"])
        .unwrap();
    drop(paused);
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
