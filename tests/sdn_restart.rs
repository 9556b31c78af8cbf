//! Restarts: ovs-vswitchd killed with SIGKILL and started again gets its whole table back (one
//! bundle); ofnode restarted repairs what changed on the switch meanwhile; the ofnode daemon
//! killed with SIGKILL during a stream of pod adds keeps every pod whose add returned success,
//! and no stale flows.

mod sdn_common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ofnode::sdn::{HostSubnet, Mode, Node, NodeState, Service, Vnid};
use ofnode_harness::{Daemon, ONE_NODE_SETUP};
use sdn_common::*;

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");
const DEADLINE: Duration = Duration::from_secs(60);

fn vnid(v: u32) -> Vnid {
    Vnid::new(v).unwrap()
}

/// A node with a bit of everything, and the table the seed would show for it.
async fn populated() -> (Fixture, Vec<String>) {
    let f = Fixture::set_up(Mode::Multitenant).await;
    f.veth("vethA");
    f.node.pod_add(&pod_a(10)).await.unwrap();
    f.node
        .hostsubnet_add(&HostSubnet {
            host_ip: "192.0.2.2".parse().unwrap(),
            subnet: "10.130.0.0/23".parse().unwrap(),
            fixed_vnid: None,
            vtep_mac: None,
        })
        .await
        .unwrap();
    f.node
        .service_add(&Service {
            ip: "172.30.0.10".parse().unwrap(),
            vnid: vnid(10),
            ports: vec!["tcp/80".parse().unwrap()],
        })
        .await
        .unwrap();
    f.node.multicast_local(vnid(10), true, &[3]).await.unwrap();
    let expected = with(
        &base_flows(Mode::Multitenant),
        &[
            &format!("table=20, priority=100,arp,in_port=3,arp_spa=10.128.0.5,arp_sha=0a:58:0a:80:00:05 actions=load:0xa->NXM_NX_REG0[],note:{SANDBOX_NOTE},goto_table:21"),
            "table=20, priority=100,ip,in_port=3,nw_src=10.128.0.5 actions=load:0xa->NXM_NX_REG0[],goto_table:21",
            "table=40, priority=100,arp,arp_tpa=10.128.0.5 actions=output:3",
            "table=70, priority=100,ip,nw_dst=10.128.0.5 actions=load:0xa->NXM_NX_REG1[],load:0x3->NXM_NX_REG2[],goto_table:80",
            "table=80, priority=100,reg0=0xa,reg1=0xa actions=output:NXM_NX_REG2[]",
            "table=10, priority=100,tun_src=192.0.2.2 actions=goto_table:30",
            "table=50, priority=100,arp,arp_tpa=10.130.0.0/23 actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1",
            "table=90, priority=100,ip,nw_dst=10.130.0.0/23 actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1",
            "table=60, priority=100,ip,nw_dst=172.30.0.10,nw_frag=later actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
            "table=60, priority=100,tcp,nw_dst=172.30.0.10,tp_dst=80 actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
            "table=110, reg0=0xa actions=goto_table:111",
            "table=120, priority=100,reg0=0xa actions=output:3",
        ],
    );
    assert_flows(&f.ovs, &expected);
    (f, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vswitchd_killed_and_restarted_gets_the_table_back() {
    let (f, expected) = populated().await;
    let reinstalls = f.node.metrics().full_reinstalls.load(Ordering::Relaxed);
    f.ovs.kill_vswitchd();
    f.ovs.start_vswitchd().unwrap();
    wait_for_flows(&f.ovs, &expected, DEADLINE);
    // It came back as a whole-table re-install (one bundle), with the fragment mode.
    assert_eq!(
        f.node.metrics().full_reinstalls.load(Ordering::Relaxed),
        reinstalls + 1
    );
    assert_eq!(
        f.ovs.ofctl("get-frags", "br0", &[]).unwrap().trim(),
        "nx-match"
    );
    assert!(f.node.already_set_up().await.unwrap());
    // A later reconnect to an intact table changes nothing.
    f.node.resync(false).await.unwrap();
    assert_eq!(
        f.node.metrics().full_reinstalls.load(Ordering::Relaxed),
        reinstalls + 1
    );
    assert_eq!(f.node.metrics().repairs.load(Ordering::Relaxed), 0);
    assert_flows(&f.ovs, &expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ofnode_restart_repairs_the_switch() {
    let (mut f, expected) = populated().await;
    f.node.shutdown().await;
    // Meanwhile the switch drifts: a stale flow appears, a wanted one disappears, one changes.
    f.ovs
        .ofctl(
            "add-flow",
            "br0",
            &["table=40, priority=100, arp, nw_dst=10.128.0.99, actions=output:9"],
        )
        .unwrap();
    f.ovs
        .ofctl(
            "del-flows",
            "br0",
            &["--strict", "table=40, priority=100, arp, nw_dst=10.128.0.5"],
        )
        .unwrap();
    f.ovs
        .ofctl(
            "add-flow",
            "br0",
            &["table=10, priority=100, tun_src=192.0.2.2, actions=drop"],
        )
        .unwrap();
    f.restart_node().await;
    wait_for_flows(&f.ovs, &expected, DEADLINE);
    let state = f.node.state().await.unwrap();
    assert_eq!(state.pods.len(), 1);
    assert_eq!(state.host_subnets.len(), 1);
    assert_eq!(state.services.len(), 1);
    // Repaired in place: no whole-table re-install was needed (the version note was there).
    assert_eq!(f.node.metrics().full_reinstalls.load(Ordering::Relaxed), 0);
    assert_eq!(f.node.metrics().repairs.load(Ordering::Relaxed), 1);
    // Operations continue on the reloaded state.
    f.node.pod_del(&key(POD_A), None).await.unwrap();
    let status = f.node.status();
    assert_eq!(status.pods, 0);
}

const STREAM_PODS: usize = 120;

/// The key of stream pod `i`.
fn stream_pod(i: usize) -> String {
    format!("default/stream-{i}")
}

/// `ofnode pod add` of stream pod `i`: [`stream_pod`], veth `vs<i>`, IP 10.128.1.<i>.
fn stream_pod_args(i: usize) -> Vec<String> {
    [
        "pod",
        "add",
        "--pod",
        &stream_pod(i),
        "--veth",
        &format!("vs{i}"),
        "--ip",
        &format!("10.128.1.{i}"),
        "--mac",
        &format!("0a:58:0a:80:01:{i:02x}"),
        "--sandbox",
        &format!("{i:064x}"),
        "--vnid",
        "0",
    ]
    .map(String::from)
    .to_vec()
}

/// The daemon (a process of the `ofnode` binary) adds pods one after another and is killed
/// with SIGKILL half-way; a `Node` started on its state directory has every acknowledged pod,
/// and the switch ends up holding exactly the table of that state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ofnode_killed_during_pod_adds() {
    let ovs = ofnode_harness::Ovs::start().expect("start private OVS");
    let mut daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    ovs.netns().add_veth_pairs("vs", 1..=STREAM_PODS).unwrap();

    let acked = Arc::new(Mutex::new(Vec::new()));
    let adder = std::thread::spawn({
        let (api, acked) = (daemon.api.clone(), acked.clone());
        move || {
            for i in 1..=STREAM_PODS {
                let added = Command::new(OFNODE)
                    .args(stream_pod_args(i))
                    .arg("--api")
                    .arg(&api)
                    .output()
                    .is_ok_and(|out| out.status.success());
                if !added {
                    return;
                }
                acked.lock().unwrap().push(i);
            }
        }
    });
    // Kill it in the middle of the stream, with an add in flight.
    let deadline = std::time::Instant::now() + DEADLINE;
    while acked.lock().unwrap().len() < STREAM_PODS / 2 {
        assert!(std::time::Instant::now() < deadline, "the stream stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    daemon.kill9();
    adder.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() < STREAM_PODS, "the kill came too late");

    // ofnode starts again on the same state: every acknowledged pod is there, and the switch
    // holds exactly the table of the state (nothing stale from the add that was cut short).
    let node = Node::start(node_config(&ovs, &daemon.state_dir))
        .await
        .unwrap();
    let state: NodeState = node.state().await.unwrap();
    for i in &acked {
        let pod = state.pods.get(&key(&stream_pod(*i)));
        assert!(pod.is_some(), "acknowledged pod {i} lost");
        let ip: std::net::Ipv4Addr = format!("10.128.1.{i}").parse().unwrap();
        assert_eq!(pod.map(|p| p.ip), Some(ip), "pod {i}'s address");
    }
    assert!(
        state.pods.len() <= acked.len() + 1,
        "at most the add in flight is extra"
    );
    let mut expected = base_flows(Mode::Subnet);
    for pod in state.pods.values() {
        let (ip, port, mac) = (pod.ip, pod.ofport, pod.mac);
        let note = pod.sandbox.note();
        expected.extend([
            format!("table=20, priority=100,arp,in_port={port},arp_spa={ip},arp_sha={mac} actions=load:0->NXM_NX_REG0[],note:{}.00.00.00.00.00.00,goto_table:21", note),
            format!("table=20, priority=100,ip,in_port={port},nw_src={ip} actions=load:0->NXM_NX_REG0[],goto_table:21"),
            format!("table=40, priority=100,arp,arp_tpa={ip} actions=output:{port}"),
            format!("table=70, priority=100,ip,nw_dst={ip} actions=load:0->NXM_NX_REG1[],load:{port:#x}->NXM_NX_REG2[],goto_table:80"),
        ]);
    }
    wait_for_flows(&ovs, &expected, DEADLINE);
    node.shutdown().await;
}
