//! Issue 9: cluster membership through etcd, on the namespace cluster of the end-to-end
//! harness with a real etcd on the underlay. The nodes start with only the etcd address (no
//! `setup`, no `hostsubnet add`): each leases a distinct subnet and routes the others'; pods
//! reach pods across nodes; etcd restarted under running nodes costs no lease and no flow, and
//! the watches resume; a node stopped for longer than its TTL leaves the others' tables and
//! comes back with the same subnet.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ofnode_harness::cluster::{reachability, Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::{EtcdMembership, Pod};

/// Short, so that expiry is quick to see; keep-alives go every third of it.
const TTL: u64 = 3;
const WAIT: Duration = Duration::from_secs(30);

fn start() -> Cluster {
    Cluster::start_with_etcd(
        ClusterOptions {
            nodes: 3,
            mode: Mode::Subnet,
            control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
            echo: false,
        },
        EtcdMembership { lease_ttl: TTL },
    )
    .unwrap()
}

/// Node `i`'s flows that name `needle` (a subnet in tables 50/90, a host IP in table 10).
fn flows_naming(cluster: &Cluster, i: usize, needle: &str) -> usize {
    cluster
        .node(i)
        .flows()
        .unwrap()
        .iter()
        .filter(|f| f.contains(needle))
        .count()
}

/// Every pod pings every pod on another node; all must answer.
fn assert_all_reach(cluster: &Cluster, pods: &[Pod]) {
    let pairs: Vec<(&dyn Endpoint, std::net::Ipv4Addr)> = pods
        .iter()
        .flat_map(|a| {
            pods.iter()
                .filter(move |b| b.node != a.node)
                .map(move |b| (a as &dyn Endpoint, b.ip))
        })
        .collect();
    let results = reachability(&pairs);
    for ((from, to), result) in pairs.iter().zip(results) {
        assert!(
            result.as_ref().is_ok_and(|ok| *ok),
            "{} cannot reach {to}: {result:?}\n{}",
            from.ip(),
            cluster.diagnostics()
        );
    }
}

/// Lease ids by node name, from node 0's status.
fn lease_ids(cluster: &Cluster) -> BTreeMap<String, String> {
    let status = cluster.node(0).status().unwrap();
    status["cluster"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap().to_string(),
                n["lease"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn three_nodes_lease_subnets_in_etcd_and_follow_each_other() {
    let mut cluster = start();

    // Distinct subnets, each routed by the two other nodes (tables 10, 50 and 90).
    let subnets: Vec<String> = (0..3)
        .map(|i| cluster.node(i).leased_subnet().unwrap().unwrap())
        .collect();
    assert_eq!(
        subnets.iter().collect::<BTreeSet<_>>().len(),
        3,
        "{subnets:?}"
    );
    for i in 0..3 {
        for j in (0..3).filter(|j| *j != i) {
            assert!(
                flows_naming(&cluster, i, &subnets[j]) >= 2,
                "node {i} does not route node {j}'s {}\n{}",
                subnets[j],
                cluster.diagnostics()
            );
            let host = cluster.node(j).underlay_ip.to_string();
            assert!(flows_naming(&cluster, i, &format!("tun_src={host}")) >= 1);
        }
        // The cluster view: three leases, each with time left.
        let status = cluster.node(i).status().unwrap();
        let nodes = status["cluster"]["nodes"].as_array().unwrap().clone();
        assert_eq!(nodes.len(), 3, "{status}");
        assert!(
            nodes
                .iter()
                .all(|n| n["ttl"].as_i64().is_some_and(|t| t > 0)),
            "{status}"
        );
    }
    let pods: Vec<Pod> = (0..3).map(|i| cluster.add_pod(i, 0).unwrap()).collect();
    assert_all_reach(&cluster, &pods);

    // etcd restarted while the nodes run: same leases, same flows, and the watches resume.
    let leases = lease_ids(&cluster);
    let etcd = cluster.etcd_mut().unwrap();
    etcd.stop();
    std::thread::sleep(Duration::from_secs(1));
    etcd.spawn().unwrap();
    // Longer than a TTL: a lease that was not kept alive would be gone by now.
    std::thread::sleep(Duration::from_secs(TTL + 2));
    assert_eq!(lease_ids(&cluster), leases);
    for i in 0..3 {
        cluster.node(i).wait_host_subnets(2, WAIT).unwrap();
    }
    let key = "/ofnode/subnets/10.128.100.0-23";
    cluster
        .etcd()
        .unwrap()
        .etcdctl(&["put", key, r#"{"node":"outsider","host_ip":"192.0.2.99"}"#])
        .unwrap();
    for i in 0..3 {
        cluster.node(i).wait_host_subnets(3, WAIT).unwrap();
    }
    assert!(flows_naming(&cluster, 1, "10.128.100.0/23") >= 2);
    assert_all_reach(&cluster, &pods);

    // Node 2's daemon stopped for longer than its TTL: the others stop routing it. The outsider
    // leaves meanwhile, unseen by node 2.
    let gone = subnets[2].clone();
    cluster.node_mut(2).daemon_mut().unwrap().stop();
    cluster.etcd().unwrap().etcdctl(&["del", key]).unwrap();
    for i in 0..2 {
        cluster.node(i).wait_host_subnets(1, WAIT).unwrap();
        assert_eq!(
            flows_naming(&cluster, i, &gone),
            0,
            "node {i} still routes {gone}"
        );
        assert_eq!(flows_naming(&cluster, i, "10.128.100.0/23"), 0);
    }
    // Started again: the same subnet, routed again, and traffic resumes. Node 2's reconcile
    // drops the outsider it still had from before.
    cluster.node_mut(2).daemon_mut().unwrap().spawn().unwrap();
    assert_eq!(
        cluster.node(2).leased_subnet().unwrap().as_deref(),
        Some(gone.as_str())
    );
    for i in 0..3 {
        cluster.node(i).wait_host_subnets(2, WAIT).unwrap();
    }
    assert_eq!(flows_naming(&cluster, 2, "10.128.100.0/23"), 0);
    assert!(flows_naming(&cluster, 0, &gone) >= 2);
    assert_all_reach(&cluster, &pods);
}
