//! The cluster harness itself, with the seed's flows (no ofnode): packets cross nodes, and a
//! test that panics halfway still leaves no namespace or process behind.

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Inventory, Mode};

#[test]
fn seed_flow_cluster_carries_packets_and_a_panic_leaves_nothing_behind() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (checked_tx, checked_rx) = std::sync::mpsc::channel();
    let outcome = std::panic::catch_unwind(move || {
        let cluster = Cluster::start(ClusterOptions {
            nodes: 2,
            mode: Mode::Subnet,
            control: Control::SeedFlows,
            echo: false,
        })
        .unwrap();
        let a = cluster.add_pod(0, 0).unwrap();
        let c = cluster.add_pod(1, 0).unwrap();
        let external = cluster.add_external_host(1).unwrap();
        let pinger = a.start_pinger(c.ip).unwrap();
        let mut made = Inventory::of_cluster(&cluster);
        for endpoint in [&a as &dyn Endpoint, &c, &external] {
            made.add_endpoint(endpoint);
        }
        made.add_pinger(&pinger);
        tx.send(made).unwrap();

        let stats = a.ping(c.ip, 2).unwrap();
        assert_eq!(stats.received, 2, "{}", cluster.diagnostics());
        assert!(c.reaches(external.ip).unwrap(), "{}", cluster.diagnostics());
        let _keep = pinger;
        checked_tx.send(()).unwrap();
        panic!("deliberate: cleanup must run on unwind");
    });
    let payload = outcome.expect_err("the closure always panics");
    assert!(
        checked_rx.try_recv().is_ok(),
        "the packet checks failed: {:?}",
        payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
    );
    let made = rx.recv().unwrap();
    // underlay, 2 nodes, 2 pods, the external host; 2 × (ovsdb-server, ovs-vswitchd), the pinger.
    assert_eq!(made.namespaces().len(), 6, "{made:?}");
    assert_eq!(made.processes().len(), 5, "{made:?}");
    let left = made.left_behind();
    assert!(left.is_empty(), "left behind: {left:?}");
}
