//! High availability against a real Open vSwitch: two `ofnode run` daemons are both
//! controllers of br0; one becomes active (master) and programs it, the other is standby
//! (slave) and refuses operations; after `kill -9` of the active one the standby takes over,
//! keeps the table exactly as it was, and a pod added through it lands exactly as expected.

mod sdn_common;

use std::path::Path;
use std::time::{Duration, Instant};

use ofnode::sdn::Mode;
use ofnode_harness::{ha, Daemon, Ovs, ONE_NODE_SETUP};
use sdn_common::{base_flows, wait_for_flows, SANDBOX, SANDBOX_NOTE};

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");
/// Only keeps a broken run from hanging.
const LIMIT: Duration = Duration::from_secs(20);

fn start_peer(ovs: &Ovs, id: u16) -> Daemon {
    ha::start_peer(ovs, Path::new(OFNODE), id).unwrap_or_else(|e| panic!("start ofnode {id}: {e}"))
}

fn status(daemon: &Daemon) -> serde_json::Value {
    daemon.status_json().expect("ofnode status --json")
}

/// Waits until `daemon` reports HA role `role`; returns how long that took.
fn wait_role(daemon: &Daemon, role: &str) -> Duration {
    ha::wait_role(daemon, role, LIMIT).unwrap_or_else(|e| panic!("{e}"))
}

fn veth(ovs: &Ovs, name: &str) {
    ovs.netns().add_veth(name).unwrap();
}

fn pod_add(daemon: &Daemon, pod: &str, veth: &str, ip: &str, mac: &str) -> Result<u16, String> {
    daemon
        .pod_add(pod, veth, ip, mac, SANDBOX, 10)
        .map_err(|e| e.to_string())
}

/// The flows of a pod with VNID 10 on `ofport` (subnet mode), as ovs-ofctl prints them.
fn pod_flows(ofport: u16, ip: &str, mac: &str) -> Vec<String> {
    vec![
        format!("table=20, priority=100,arp,in_port={ofport},arp_spa={ip},arp_sha={mac} actions=load:0xa->NXM_NX_REG0[],note:{SANDBOX_NOTE},goto_table:21"),
        format!("table=20, priority=100,ip,in_port={ofport},nw_src={ip} actions=load:0xa->NXM_NX_REG0[],goto_table:21"),
        format!("table=40, priority=100,arp,arp_tpa={ip} actions=output:{ofport}"),
        format!("table=70, priority=100,ip,nw_dst={ip} actions=load:0xa->NXM_NX_REG1[],load:{ofport:#x}->NXM_NX_REG2[],goto_table:80"),
    ]
}

/// Two daemons on a fresh OVS: the first active, the second standby hearing it; set up
/// through the first with one pod. Returns them and the table the switch must hold.
fn active_and_standby(ovs: &Ovs) -> (Daemon, Daemon, Vec<String>) {
    ovs.add_bridge("br0").expect("br0");
    let first = start_peer(ovs, 1);
    wait_role(&first, "active");
    let second = start_peer(ovs, 2);
    // The standby hears the active daemon's heartbeats through the switch.
    ha::wait_hears(&second, 1, LIMIT).unwrap_or_else(|e| panic!("{e}"));

    first
        .cli(ONE_NODE_SETUP)
        .expect("setup through the active daemon");
    veth(ovs, "vethA");
    veth(ovs, "vethB");
    let port_a = pod_add(
        &first,
        "default/pod-a",
        "vethA",
        "10.128.0.5",
        "0a:58:0a:80:00:05",
    )
    .expect("pod add through the active daemon");
    let mut expected = base_flows(Mode::Subnet);
    expected.extend(pod_flows(port_a, "10.128.0.5", "0a:58:0a:80:00:05"));
    wait_for_flows(ovs, &expected, LIMIT);
    (first, second, expected)
}

/// Adds the second pod through `daemon` and checks the whole table.
fn second_pod_lands_exactly(ovs: &Ovs, daemon: &Daemon, mut expected: Vec<String>) {
    let port_b = pod_add(
        daemon,
        "default/pod-b",
        "vethB",
        "10.128.0.6",
        "0a:58:0a:80:00:06",
    )
    .expect("pod add through the new active daemon");
    expected.extend(pod_flows(port_b, "10.128.0.6", "0a:58:0a:80:00:06"));
    wait_for_flows(ovs, &expected, LIMIT);
    assert_eq!(status(daemon)["pods"], 2);
}

#[test]
fn the_standby_takes_over_when_the_active_daemon_is_killed() {
    let ovs = Ovs::start().expect("private OVS");
    let (mut first, second, expected) = active_and_standby(&ovs);

    // The standby refuses operations and names the active daemon.
    let refused = pod_add(
        &second,
        "default/pod-b",
        "vethB",
        "10.128.0.6",
        "0a:58:0a:80:00:06",
    )
    .expect_err("a standby refuses operations");
    assert!(
        refused.contains("standby") && refused.contains("HA id 1"),
        "{refused}"
    );

    first.kill9();
    let took = wait_role(&second, "active");
    eprintln!("standby became active {took:?} after kill -9 of the active daemon");
    wait_for_flows(&ovs, &expected, LIMIT);
    second_pod_lands_exactly(&ovs, &second, expected);
    assert_eq!(status(&second)["ha"]["takeovers"], 1);
}

fn signal(daemon: &Daemon, sig: &str) {
    let pid = daemon.pid().expect("daemon runs").to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn a_frozen_active_daemon_is_replaced_and_steps_down_when_it_wakes() {
    let ovs = Ovs::start().expect("private OVS");
    let (first, second, expected) = active_and_standby(&ovs);

    signal(&first, "-STOP");
    wait_role(&second, "active");
    signal(&first, "-CONT");
    // It learns from the switch that it is no longer master, and stops acting as one.
    wait_role(&first, "standby");
    let refused = pod_add(
        &first,
        "default/pod-b",
        "vethB",
        "10.128.0.6",
        "0a:58:0a:80:00:06",
    )
    .expect_err("the old active daemon refuses operations");
    assert!(refused.contains("standby"), "{refused}");
    wait_for_flows(&ovs, &expected, LIMIT);
    second_pod_lands_exactly(&ovs, &second, expected);
}

#[test]
fn peers_started_together_elect_exactly_one() {
    let ovs = Ovs::start().expect("private OVS");
    ovs.add_bridge("br0").expect("br0");
    let peers = [start_peer(&ovs, 1), start_peer(&ovs, 2)];
    let deadline = Instant::now() + LIMIT;
    loop {
        let statuses: Vec<_> = peers.iter().map(|p| status(p)["ha"].clone()).collect();
        let active: Vec<_> = statuses.iter().filter(|s| s["role"] == "active").collect();
        let settled = active.len() == 1
            && statuses
                .iter()
                .filter(|s| s["role"] == "standby")
                .all(|s| s["active_peer"] == active[0]["id"]);
        if settled {
            break;
        }
        assert!(Instant::now() < deadline, "{statuses:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The standby refuses, the active one serves.
    let (active, standby) = if status(&peers[0])["ha"]["role"] == "active" {
        (&peers[0], &peers[1])
    } else {
        (&peers[1], &peers[0])
    };
    let refused = standby
        .cli(ONE_NODE_SETUP)
        .expect_err("the standby refuses setup");
    assert!(refused.to_string().contains("standby"), "{refused}");
    active
        .cli(ONE_NODE_SETUP)
        .expect("the active daemon sets up");
    wait_for_flows(&ovs, &base_flows(Mode::Subnet), LIMIT);
}

/// The networkpolicy mode's inputs are part of the replicated state: after a take-over the
/// new active daemon holds the same namespaces and policies (conjunction ids included), keeps
/// the table exactly, and a policy change through it lands.
#[test]
fn the_standby_takes_over_the_networkpolicy_modes_flows() {
    let ovs = Ovs::start().expect("private OVS");
    ovs.add_bridge("br0").expect("br0");
    let mut first = start_peer(&ovs, 1);
    wait_role(&first, "active");
    let second = start_peer(&ovs, 2);
    ha::wait_hears(&second, 1, LIMIT).unwrap_or_else(|e| panic!("{e}"));
    let setup: Vec<&str> = ONE_NODE_SETUP
        .iter()
        .copied()
        .chain(["--mode", "networkpolicy"])
        .collect();
    first.cli(&setup).expect("setup through the active daemon");
    let cli = |daemon: &Daemon, args: &[&str]| {
        daemon
            .cli(args)
            .unwrap_or_else(|e| panic!("ofnode {args:?}: {e}"))
    };
    cli(&first, &["namespace", "set", "--name", "x", "--vnid", "11"]);
    cli(
        &first,
        &[
            "namespace",
            "set",
            "--name",
            "y",
            "--vnid",
            "12",
            "--label",
            "team=blue",
        ],
    );
    veth(&ovs, "vethA");
    cli(
        &first,
        &[
            "pod",
            "add",
            "--pod",
            "x/pod-a",
            "--veth",
            "vethA",
            "--ip",
            "10.128.0.5",
            "--mac",
            "0a:58:0a:80:00:05",
            "--sandbox",
            SANDBOX,
            "--label",
            "pod=a",
        ],
    );
    let policy = |name: &str, spec: &str| {
        let file = ovs.dir().join(format!("{name}.json"));
        std::fs::write(
            &file,
            format!(
                r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
                    "metadata":{{"name":"{name}","namespace":"x"}},"spec":{spec}}}"#
            ),
        )
        .unwrap();
        file.display().to_string()
    };
    let from_blue = policy(
        "from-blue",
        r#"{"podSelector":{"matchLabels":{"pod":"a"}},
            "ingress":[{"from":[{"namespaceSelector":{"matchLabels":{"team":"blue"}}}],"ports":[{"port":80}]}]}"#,
    );
    cli(&first, &["netpol", "apply", "--file", &from_blue]);
    let expected = ovs.dump_flows("br0").expect("dump-flows");
    assert!(
        expected
            .iter()
            .any(|f| f == "table=80, priority=200,ip,reg0=0xc actions=conjunction(1,1/3)"),
        "{}",
        expected.join("\n")
    );
    let listed = cli(&first, &["netpol", "list"]);
    assert_eq!(
        listed.trim(),
        "x/from-blue types=Ingress selected_pods=1 flows=5"
    );

    let pods = cli(&first, &["pod", "list"]);
    assert!(pods.starts_with("x/pod-a ip=10.128.0.5 vnid=11 "), "{pods}");

    first.kill9();
    wait_role(&second, "active");
    wait_for_flows(&ovs, &expected, LIMIT);
    assert_eq!(cli(&second, &["netpol", "list"]), listed);
    assert_eq!(cli(&second, &["pod", "list"]), pods);
    assert_eq!(status(&second)["netpols"], 1);
    assert_eq!(status(&second)["namespaces"], 2);

    // A second policy through the new active daemon gets a fresh id; the first keeps its own.
    let out = policy(
        "out",
        r#"{"podSelector":{},"policyTypes":["Egress"],"egress":[{"ports":[{"protocol":"UDP","port":53}]}]}"#,
    );
    cli(&second, &["netpol", "apply", "--file", &out]);
    let mut now = expected.clone();
    now.extend(
        [
            "cookie=0x4f4100002800000b, table=21, priority=100,ip,reg0=0xb actions=drop",
            "table=21, priority=200,ip,reg0=0xb actions=conjunction(2,1/2)",
            "table=21, priority=200,udp,tp_dst=53 actions=conjunction(2,2/2)",
            "cookie=0x4f41000020000002, table=21, priority=200,conj_id=2,ip actions=goto_table:30",
        ]
        .map(String::from),
    );
    wait_for_flows(&ovs, &now, LIMIT);
}
