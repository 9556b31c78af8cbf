//! The cluster harness itself, with the seed's flows (no ofnode): packets cross nodes, and a
//! test that panics halfway still leaves no namespace or process behind.

use std::process::Command;

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Mode};

fn namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

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
        let mut made: Vec<String> = vec![cluster.underlay().name().to_string()];
        made.extend(cluster.nodes().iter().map(|n| n.netns().name().to_string()));
        made.extend([a.netns(), c.netns(), external.netns()].map(|ns| ns.name().to_string()));
        let pids: Vec<u32> = cluster
            .nodes()
            .iter()
            .flat_map(|n| [n.ovs().ovsdb_pid(), n.ovs().vswitchd_pid()])
            .map(Option::unwrap)
            .collect();
        let pinger = a.start_pinger(c.ip).unwrap();
        tx.send((made, pids)).unwrap();

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
    let (made, pids) = rx.recv().unwrap();
    let left = namespaces();
    for ns in &made {
        assert!(!left.contains(ns), "namespace {ns} left behind");
    }
    for pid in pids {
        assert!(!ofnode_harness::pid_alive(pid), "daemon {pid} still runs");
    }
}
