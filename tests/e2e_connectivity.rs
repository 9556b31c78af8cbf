//! Issue 7: real packets between pods through the flows ofnode installs. A three-node cluster
//! (subnet mode) in network namespaces; every check's oracle is the kernel delivering the
//! packet (`ping` replies, TCP bytes and their CRC-32) and OVS's port counters.
//!
//! `OFNODE_E2E_CONTROL=seed` runs the same checks against the seed's flows (no ofnode).

use std::net::Ipv4Addr;

use ofnode_harness::cluster::{
    reachability, tcp_transfer, Cluster, ClusterOptions, Control, Endpoint, Mode, VXLAN_OFPORT,
};

fn start(nodes: usize, mode: Mode) -> Cluster {
    Cluster::start(ClusterOptions {
        nodes,
        mode,
        control: Control::from_env(env!("CARGO_BIN_EXE_ofnode")),
        echo: false,
    })
    .unwrap()
}

#[test]
fn pods_reach_pods_on_every_node_and_their_gateway() {
    let cluster = start(3, Mode::Subnet);
    let a = cluster.add_pod(0, 0).unwrap();
    let b = cluster.add_pod(0, 0).unwrap();
    let c = cluster.add_pod(1, 0).unwrap();
    let d = cluster.add_pod(2, 0).unwrap();
    let vxlan_before = cluster.node(0).port_packets(VXLAN_OFPORT).unwrap();

    let checks: [(&str, &dyn Endpoint, Ipv4Addr); 6] = [
        ("pod -> pod, same node", &a, b.ip),
        ("pod -> pod, node 0 -> node 1", &a, c.ip),
        ("pod -> pod, node 0 -> node 2", &a, d.ip),
        ("pod -> pod, node 2 -> node 1", &d, c.ip),
        ("pod -> its gateway (node 0)", &b, cluster.node(0).gateway),
        ("pod -> its gateway (node 1)", &c, cluster.node(1).gateway),
    ];
    for (name, from, to) in checks {
        let stats = from.ping(to, 3).unwrap();
        assert_eq!(
            stats.received,
            stats.transmitted,
            "{name}: {} -> {to}: {stats:?}\n{}",
            from.ip(),
            cluster.diagnostics()
        );
    }

    // The cross-node replies really crossed node 0's VXLAN port, both ways.
    let vxlan_after = cluster.node(0).port_packets(VXLAN_OFPORT).unwrap();
    assert!(
        vxlan_after.tx >= vxlan_before.tx + 6 && vxlan_after.rx >= vxlan_before.rx + 6,
        "vxlan0 counters {vxlan_before:?} -> {vxlan_after:?}"
    );
}

#[test]
fn tcp_transfers_arrive_intact_within_and_across_nodes() {
    const BYTES: u64 = 2 * 1024 * 1024 + 12_345;
    let cluster = start(2, Mode::Subnet);
    let a = cluster.add_pod(0, 0).unwrap();
    let b = cluster.add_pod(0, 0).unwrap();
    let c = cluster.add_pod(1, 0).unwrap();

    for (name, from, to) in [
        ("node 0 -> node 1", &a, &c),
        ("node 1 -> node 0", &c, &b),
        ("same node", &b, &a),
    ] {
        let transfer = tcp_transfer(from, to, BYTES)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", cluster.diagnostics()));
        assert_eq!(transfer.bytes_sent, BYTES, "{name}");
        assert_eq!(transfer.bytes_received, BYTES, "{name}: {transfer:?}");
        assert_eq!(
            transfer.received_crc32, transfer.sent_crc32,
            "{name}: data corrupted: {transfer:?}"
        );
    }
}

#[test]
fn a_pod_without_flows_is_unreachable() {
    // The checks above can fail: a pod whose veth is up but whose subnet no node routes to is
    // not reached, and neither is a node's pod once its host subnet is unknown to the sender.
    let cluster = start(2, Mode::Subnet);
    let a = cluster.add_pod(0, 0).unwrap();
    let c = cluster.add_pod(1, 0).unwrap();
    let results = reachability(&[(&a, c.ip), (&a, Ipv4Addr::new(10, 128, 4, 10))]);
    assert!(results[0].as_ref().unwrap(), "{}", cluster.diagnostics());
    assert!(
        !results[1].as_ref().unwrap(),
        "a pod in no node's subnet answered"
    );
}
