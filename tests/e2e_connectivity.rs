//! Issue 7: real packets between pods through the flows ofnode installs. A three-node cluster
//! (subnet mode) in network namespaces; every check's oracle is the kernel delivering the
//! packet (`ping` replies, TCP bytes and their CRC-32) and OVS's port counters.
//!
//! `OFNODE_E2E_CONTROL=seed` runs the same checks against the seed's flows (no ofnode).

use std::net::Ipv4Addr;
use std::time::Duration;

use ofnode_harness::cluster::{
    reachability, tcp_transfer, Cluster, ClusterOptions, Control, CrossNodePing, Endpoint,
    Inventory, Mode, VXLAN_OFPORT,
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
fn a_pod_without_flows_is_unreachable_until_it_is_added() {
    // The checks above can fail: a pod whose veth is up and a port of br0, but which the node
    // was never told about (no `ofnode pod add`, so no flows), is reached by nobody, on its node
    // or from another; once added, it is reached from both. The pods on either side that were
    // added answer all along, so it is the missing flows that make the difference.
    let cluster = start(2, Mode::Subnet);
    let a = cluster.add_pod(0, 0).unwrap();
    let b = cluster.add_pod(1, 0).unwrap();
    let mut late = cluster.add_unattached_pod(1, 0).unwrap();
    assert!(late.ofport > 0, "the unattached pod's veth is not on br0");

    let before = reachability(&[(&a, b.ip), (&a, late.ip), (&b, late.ip)]);
    let before: Vec<bool> = before.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        before,
        [true, false, false],
        "[a -> b, a -> unattached (other node), b -> unattached (same node)]\n{}",
        cluster.diagnostics()
    );

    cluster.attach_pod(&mut late).unwrap();
    for (name, from) in [("other node", &a), ("same node", &b)] {
        let stats = from.ping(late.ip, 3).unwrap();
        assert_eq!(
            stats.received,
            stats.transmitted,
            "{name}: {} -> {} after it was added: {stats:?}\n{}",
            from.ip,
            late.ip,
            cluster.diagnostics()
        );
    }
}

#[test]
fn a_panic_with_ofnode_daemons_running_leaves_nothing_behind() {
    // tests/harness/tests/cluster.rs proves this for the seed's flows; here the nodes run ofnode
    // daemons (programmed through the CLI) and a ping runs while the test panics.
    let (made_tx, made_rx) = std::sync::mpsc::channel();
    let outcome = std::panic::catch_unwind(move || {
        let ping = CrossNodePing::start(env!("CARGO_BIN_EXE_ofnode")).unwrap();
        let mut made = Inventory::of_cluster(&ping.cluster);
        made.add_endpoint(&ping.from);
        made.add_endpoint(&ping.to);
        made.add_pinger(&ping.pinger);
        made_tx.send(made).unwrap();
        assert!(
            ping.replies_within(Duration::from_secs(5)),
            "the ping got no reply\n{}",
            ping.cluster.diagnostics()
        );
        panic!("deliberate: cleanup must run on unwind");
    });
    let made = made_rx.recv().unwrap();
    let left = made.left_behind();
    let payload = outcome.expect_err("the closure always panics");
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    assert!(
        message.starts_with("deliberate"),
        "the cluster failed before the deliberate panic: {message} (left behind: {left:?})"
    );
    // 2 nodes: underlay + 2 node namespaces + 2 pods; per node ovsdb-server, ovs-vswitchd and
    // ofnode; the pinger.
    assert_eq!(made.namespaces().len(), 5, "{made:?}");
    assert_eq!(made.processes().len(), 7, "{made:?}");
    assert!(left.is_empty(), "left behind after the panic: {left:?}");
}
