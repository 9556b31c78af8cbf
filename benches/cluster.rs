//! Cluster membership benchmark (`cargo bench --bench cluster`), issue 9: one node (in this
//! process, on a private OVS) is a member of a cluster in a private etcd on loopback; the bench
//! writes 50 simulated nodes' subnet leases one after another and measures, for each, the time
//! from the lease's put being sent (its etcd commit included) to the node having the subnet's flows installed on the switch
//! (its desired table committed in one bundle). Prints median and p99.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use etcd_client::{Client, PutOptions};
use ofnode::cluster::registry::{subnet_key, Holder};
use ofnode::cluster::{ClusterSettings, Membership};
use ofnode::sdn::{Cidr, Node, NodeConfig};
use ofnode_harness::{Etcd, Ovs};

const NODES: u8 = 50;
const PREFIX: &str = "/ofnode";
/// How long to wait for one lease to show up before declaring the run failed.
const GIVE_UP: Duration = Duration::from_secs(30);

fn settings(endpoint: String) -> ClusterSettings {
    let text = format!(
        "endpoints = [\"{endpoint}\"]\nnetwork = \"10.128.0.0/14\"\nsubnet_prefix_len = 23\n\
         service_network = \"172.30.0.0/16\"\npublic_ip = \"192.0.2.11\"\nlease_ttl = 30\n"
    );
    toml::from_str(&text).expect("cluster settings")
}

fn node_config(ovs: &Ovs, state: &std::path::Path) -> NodeConfig {
    let mut cfg = NodeConfig::new(ovs.db_target(), ovs.mgmt_target("br0"), state);
    cfg.datapath_type = Some("netdev".into());
    cfg.vswitchd_ctl =
        ofnode::unixctl::VswitchdCtl::new(Some(ovs.vswitchd_ctl().display().to_string()), "");
    cfg.manage_host_network = false;
    cfg.dns.nameservers = Some(Vec::new());
    cfg.connect_timeout = Duration::from_secs(30);
    cfg
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

/// A simulated node's lease value and its etcd lease (granted before the clock starts).
async fn prepare_lease(client: &mut Client, i: u8) -> (String, Vec<u8>, i64) {
    let subnet = Cidr::new(Ipv4Addr::new(10, 128, 2 * i, 0), 23).expect("subnet");
    let holder = Holder {
        node: format!("sim-{i}"),
        host_ip: Ipv4Addr::new(192, 0, 2, 11 + i),
        vtep_mac: None,
    };
    let lease = client
        .lease_grant(60, None)
        .await
        .expect("lease grant")
        .id();
    (subnet_key(PREFIX, subnet), holder.encode(), lease)
}

async fn wait_host_subnets(node: &Node, count: usize) {
    let deadline = Instant::now() + GIVE_UP;
    while node.status().host_subnets < count {
        assert!(
            Instant::now() < deadline,
            "the node did not route {count} subnets within {GIVE_UP:?}"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let ovs = Ovs::start().expect("start OVS");
    let etcd = Etcd::start_on_loopback().expect("start etcd");
    let state = tempfile::tempdir().expect("temp dir");
    let node = Node::start(node_config(&ovs, state.path()))
        .await
        .expect("node start");
    let membership = Membership::join(&node, settings(etcd.endpoint()), state.path())
        .await
        .expect("join the cluster");
    let mut client = Client::connect([etcd.endpoint()], None)
        .await
        .expect("bench etcd client");
    let mut samples = Vec::new();
    let mut puts = Vec::new();
    for i in 1..=NODES {
        let (key, value, lease) = prepare_lease(&mut client, i).await;
        let sent = Instant::now();
        client
            .put(key, value, Some(PutOptions::new().with_lease(lease)))
            .await
            .expect("put lease");
        puts.push(sent.elapsed());
        wait_host_subnets(&node, usize::from(i)).await;
        samples.push(sent.elapsed());
    }
    let table90 = node.dump_flows(Some(90)).await.expect("dump table 90");
    let routed = (1..=NODES)
        .filter(|i| {
            let subnet = format!("nw_dst=10.128.{}.0/23", 2 * i);
            table90.iter().any(|f| f.contains(&subnet))
        })
        .count();
    assert_eq!(routed, usize::from(NODES), "table 90 misses subnets");
    let status = membership.status().await;
    assert_eq!(status.nodes.len(), usize::from(NODES) + 1);
    println!(
        "cluster: {NODES} simulated nodes' leases, lease put sent -> flows installed: median {:.2} ms, \
         p99 {:.2} ms, max {:.2} ms (poll interval ~1 ms); of which the put itself (etcd's \
         commit): median {:.2} ms",
        ms(percentile(&mut samples, 0.5)),
        ms(percentile(&mut samples, 0.99)),
        ms(percentile(&mut samples, 1.0)),
        ms(percentile(&mut puts, 0.5)),
    );
    drop(membership);
    node.shutdown().await;
}
