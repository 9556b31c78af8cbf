//! Shared by the `sdn_*` integration tests: a private OVS, a `Node` on it, and the oracle —
//! `ovs-ofctl dump-flows` compared line for line with the flows the seed would produce.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use ofnode::sdn::{
    DnsConfig, LabelEdit, Labels, Mode, Node, NodeConfig, PodAdd, PodKey, SetupOutcome,
    SetupRequest,
};
use ofnode_harness::Ovs;

/// The node in these tests: cluster 10.128.0.0/14, services 172.30.0.0/16, local subnet
/// 10.128.0.0/23 with gateway 10.128.0.1.
pub fn setup_request(mode: Mode) -> SetupRequest {
    SetupRequest {
        cluster_network: "10.128.0.0/14".parse().unwrap(),
        service_network: "172.30.0.0/16".parse().unwrap(),
        local_subnet: "10.128.0.0/23".parse().unwrap(),
        gateway: "10.128.0.1".parse().unwrap(),
        mode,
    }
}

/// What `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` shows after the seed's SetupOVS with
/// `setup_request`, without the policy mode's table 80 flows and the version note.
pub const SETUP_FLOWS: &[&str] = &[
    "priority=250,ip,in_port=2,nw_dst=224.0.0.0/4 actions=drop",
    "priority=200,arp,in_port=1,arp_spa=10.128.0.0/14,arp_tpa=10.128.0.0/23 actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
    "priority=200,ip,in_port=1,nw_src=10.128.0.0/14,nw_dst=10.128.0.0/23 actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
    "priority=200,ip,in_port=1,nw_src=10.128.0.0/14,nw_dst=224.0.0.0/4 actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
    "priority=200,arp,in_port=2,arp_spa=10.128.0.1,arp_tpa=10.128.0.0/14 actions=goto_table:30",
    "priority=200,ip,in_port=2 actions=goto_table:30",
    "priority=150,in_port=1 actions=drop",
    "priority=150,in_port=2 actions=drop",
    "priority=100,arp actions=goto_table:20",
    "priority=100,ip actions=goto_table:20",
    "priority=0 actions=drop",
    "table=10, priority=0 actions=drop",
    "table=20, priority=0 actions=drop",
    "table=21, priority=0 actions=goto_table:30",
    "table=30, priority=300,arp,arp_tpa=10.128.0.1 actions=output:2",
    "table=30, priority=300,ip,nw_dst=10.128.0.1 actions=output:2",
    "table=30, priority=200,arp,arp_tpa=10.128.0.0/23 actions=goto_table:40",
    "table=30, priority=200,ip,nw_dst=10.128.0.0/23 actions=goto_table:70",
    "table=30, priority=100,arp,arp_tpa=10.128.0.0/14 actions=goto_table:50",
    "table=30, priority=100,ip,nw_dst=10.128.0.0/14 actions=goto_table:90",
    "table=30, priority=100,ip,nw_dst=172.30.0.0/16 actions=goto_table:60",
    "table=30, priority=50,ip,in_port=1,nw_dst=224.0.0.0/4 actions=goto_table:120",
    "table=30, priority=25,ip,nw_dst=224.0.0.0/4 actions=goto_table:110",
    "table=30, priority=0,ip actions=goto_table:100",
    "table=30, priority=0,arp actions=drop",
    "table=40, priority=0 actions=drop",
    "table=50, priority=0 actions=drop",
    "table=60, priority=200,reg0=0 actions=output:2",
    "table=60, priority=0 actions=drop",
    "table=70, priority=0 actions=drop",
    "table=80, priority=300,ip,nw_src=10.128.0.1 actions=output:NXM_NX_REG2[]",
    "table=80, priority=0 actions=drop",
    "table=90, priority=0 actions=drop",
    "table=100, priority=0 actions=output:2",
    "table=110, priority=0 actions=drop",
    "table=111, priority=100 actions=goto_table:120",
    "table=120, priority=0 actions=drop",
];

/// The subnet plugin's table 80 flow and the version note.
pub const SUBNET_FLOWS: &[&str] = &[
    "table=80, priority=200 actions=output:NXM_NX_REG2[]",
    "table=253, actions=note:00.03.00.00.00.00",
];

/// The multitenant plugin's table 80 flows and the version note.
pub const MULTITENANT_FLOWS: &[&str] = &[
    "table=80, priority=200,reg0=0 actions=output:NXM_NX_REG2[]",
    "table=80, priority=200,reg1=0 actions=output:NXM_NX_REG2[]",
    "table=253, actions=note:01.03.00.00.00.00",
];

/// The seed's table 80 exemption of the local node, which the networkpolicy mode replaces
/// with its own (committing) flow.
pub const GATEWAY_EXEMPTION: &str =
    "table=80, priority=300,ip,nw_src=10.128.0.1 actions=output:NXM_NX_REG2[]";

/// The networkpolicy plugin's flows and the version note (origin's networkpolicy.go design:
/// every IP packet tracked once in zone 13877; replies and related pass tables 21 and 80; a
/// connection committed once, after its node's last check: table 81 for local deliveries,
/// table 30 for the rest; services to tun0, and back from kube-proxy's DNAT through table 25,
/// which loads a local pod's VNID again (openshift-sdn's table 25) before its egress check).
pub const NETWORKPOLICY_FLOWS: &[&str] = &[
    "priority=1000,ct_state=-trk,ip actions=ct(table=0,zone=13877)",
    "priority=300,ip,in_port=2,nw_src=10.128.0.0/23,nw_dst=10.128.0.0/14 actions=goto_table:25",
    "table=21, priority=400,ct_state=+rpl+trk,ip actions=goto_table:30",
    "table=21, priority=390,ct_state=+rel+trk,ip actions=goto_table:30",
    "table=21, priority=300,ip,nw_dst=172.30.0.0/16 actions=goto_table:30",
    "table=25, priority=0 actions=goto_table:30",
    "table=30, priority=301,ct_state=+new+trk,ip,nw_dst=10.128.0.1 actions=ct(commit,zone=13877),output:2",
    "table=30, priority=150,ct_state=+new+trk,ip,nw_dst=10.128.0.0/14 actions=ct(commit,zone=13877),goto_table:90",
    "table=30, priority=101,ct_state=+new+trk,ip,nw_dst=172.30.0.0/16 actions=ct(commit,zone=13877),goto_table:60",
    "table=30, priority=1,ct_state=+new+trk,ip actions=ct(commit,zone=13877),goto_table:100",
    "table=60, priority=150,ip actions=output:2",
    "table=80, priority=400,ct_state=+rpl+trk,ip actions=output:NXM_NX_REG2[]",
    "table=80, priority=390,ct_state=+rel+trk,ip actions=output:NXM_NX_REG2[]",
    "table=80, priority=310,ip,nw_src=10.128.0.1 actions=goto_table:81",
    "table=80, priority=50,ip actions=goto_table:81",
    "table=81, priority=10,ct_state=+new+trk,ip actions=ct(commit,zone=13877),output:NXM_NX_REG2[]",
    "table=81, priority=0,ip actions=output:NXM_NX_REG2[]",
    "table=253, actions=note:02.03.00.00.00.00",
];

/// The whole table right after setup in `mode`.
pub fn base_flows(mode: Mode) -> Vec<String> {
    let mode_flows = match mode {
        Mode::Subnet => SUBNET_FLOWS,
        Mode::Multitenant => MULTITENANT_FLOWS,
        Mode::NetworkPolicy => NETWORKPOLICY_FLOWS,
    };
    SETUP_FLOWS
        .iter()
        .filter(|flow| mode != Mode::NetworkPolicy || **flow != GATEWAY_EXEMPTION)
        .chain(mode_flows)
        .map(|s| s.to_string())
        .collect()
}

/// `base` plus `extra`.
pub fn with(base: &[String], extra: &[&str]) -> Vec<String> {
    base.iter()
        .cloned()
        .chain(extra.iter().map(|s| s.to_string()))
        .collect()
}

/// `base` without `removed` (each must be there).
pub fn without(base: &[String], removed: &[&str]) -> Vec<String> {
    for r in removed {
        assert!(base.iter().any(|b| b == r), "{r} is not in the base table");
    }
    base.iter()
        .filter(|b| !removed.contains(&b.as_str()))
        .cloned()
        .collect()
}

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

/// Asserts that the switch holds exactly `expected` (in any order), as ovs-ofctl dumps it.
#[track_caller]
pub fn assert_flows(ovs: &Ovs, expected: &[String]) {
    let actual = sorted(ovs.dump_flows("br0").expect("ovs-ofctl dump-flows"));
    let expected = sorted(expected.to_vec());
    if actual != expected {
        let missing: Vec<&String> = expected.iter().filter(|e| !actual.contains(e)).collect();
        let extra: Vec<&String> = actual.iter().filter(|a| !expected.contains(a)).collect();
        panic!(
            "flow table differs from the seed's\n  missing ({}):\n    {}\n  unexpected ({}):\n    {}",
            missing.len(),
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    "),
            extra.len(),
            extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    "),
        );
    }
}

/// Polls the oracle until the switch holds exactly `expected` or `limit` passes (no timing is
/// asserted: the deadline only keeps a broken run from hanging).
pub fn wait_for_flows(ovs: &Ovs, expected: &[String], limit: Duration) {
    let deadline = Instant::now() + limit;
    let expected_sorted = sorted(expected.to_vec());
    loop {
        let actual = ovs.dump_flows("br0").map(sorted);
        if actual.as_ref().is_ok_and(|a| *a == expected_sorted) {
            return;
        }
        if Instant::now() >= deadline {
            assert_flows(ovs, expected);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A node configuration for `ovs`: active OpenFlow on br0's management socket, userspace
/// datapath, no host network part, and a DNS resolver with no servers (tests never query the
/// host's resolver; the DNS tests bring their own server).
pub fn node_config(ovs: &Ovs, state_dir: &Path) -> NodeConfig {
    let mut cfg = NodeConfig::new(ovs.db_target(), ovs.mgmt_target("br0"), state_dir);
    cfg.datapath_type = Some("netdev".into());
    cfg.vswitchd_ctl =
        ofnode::unixctl::VswitchdCtl::new(Some(ovs.vswitchd_ctl().display().to_string()), "");
    cfg.netns = Some(ovs.netns().path().into());
    cfg.manage_host_network = false;
    cfg.dns = DnsConfig {
        nameservers: Some(Vec::new()),
        ..DnsConfig::default()
    };
    cfg.connect_timeout = Duration::from_secs(20);
    cfg
}

/// A private OVS and a node on it, not yet set up.
pub struct Fixture {
    pub ovs: Ovs,
    pub state: tempfile::TempDir,
    pub node: Node,
}

impl Fixture {
    pub async fn start() -> Fixture {
        Fixture::start_with(|_, _| {}).await
    }

    /// Started with the test's changes to the configuration.
    pub async fn start_with(change: impl FnOnce(&Ovs, &mut NodeConfig)) -> Fixture {
        let ovs = Ovs::start().expect("start private OVS");
        let state = tempfile::tempdir().expect("state dir");
        let mut cfg = node_config(&ovs, state.path());
        change(&ovs, &mut cfg);
        let node = Node::start(cfg).await.expect("start node");
        Fixture { ovs, state, node }
    }

    /// Started with br0 made first and the node reaching it through the harness's OpenFlow
    /// proxy, which counts at the switch side what the node sends. Not yet set up (setup
    /// adopts the bridge).
    pub async fn start_through_proxy() -> (Fixture, ofnode_harness::OfProxy) {
        Fixture::start_through_proxy_with(|_, _| {}).await
    }

    /// `start_through_proxy` with the test's changes to the configuration.
    pub async fn start_through_proxy_with(
        change: impl FnOnce(&Ovs, &mut NodeConfig),
    ) -> (Fixture, ofnode_harness::OfProxy) {
        let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
        let fixture = Fixture::start_with({
            let slot = slot.clone();
            move |ovs, cfg| {
                change(ovs, cfg);
                ovs.add_bridge("br0").expect("add br0");
                let proxy = ofnode_harness::OfProxy::in_front_of(ovs, "br0").expect("proxy");
                cfg.openflow = proxy.target();
                *slot.lock().unwrap() = Some(proxy);
            }
        })
        .await;
        let proxy = slot.lock().unwrap().take().expect("the proxy was started");
        (fixture, proxy)
    }

    /// Stops the node and starts a new one on the same OVS and state directory (an ofnode
    /// restart).
    pub async fn restart_node(&mut self) {
        self.restart_node_with(|_, _| {}).await;
    }

    /// `restart_node` with the test's changes to the configuration.
    pub async fn restart_node_with(&mut self, change: impl FnOnce(&Ovs, &mut NodeConfig)) {
        self.node.shutdown().await;
        let mut cfg = node_config(&self.ovs, self.state.path());
        change(&self.ovs, &mut cfg);
        self.node = Node::start(cfg).await.expect("restart node");
    }

    /// Started and set up in `mode`, with the table checked against the seed's.
    pub async fn set_up(mode: Mode) -> Fixture {
        let f = Fixture::start().await;
        let outcome = f.node.setup(&setup_request(mode)).await.expect("setup");
        assert_eq!(outcome, SetupOutcome::Built);
        assert_flows(&f.ovs, &base_flows(mode));
        f
    }

    /// Creates a veth pair in the OVS namespace for a pod; the host end is `name`.
    pub fn veth(&self, name: &str) {
        let peer = format!("{name}p");
        self.ovs
            .netns()
            .exec_ok(&[
                "ip", "link", "add", name, "type", "veth", "peer", "name", &peer,
            ])
            .expect("create veth");
        self.ovs
            .netns()
            .exec_ok(&["ip", "link", "set", name, "up"])
            .expect("veth up");
    }

    /// The interface's OpenFlow port once ovs-vswitchd has applied it (`ovs-vsctl get`).
    pub fn ofport(&self, name: &str) -> Option<u16> {
        self.ovs.applied_ofport(name, Duration::from_secs(10))
    }

    pub fn ports(&self) -> Vec<String> {
        let out = self.ovs.vsctl(&["list-ports", "br0"]).expect("list-ports");
        out.lines().map(|s| s.to_string()).collect()
    }
}

/// The four flows of the pod tests' usual pod (vethA, 10.128.0.5, 0a:58:0a:80:00:05, SANDBOX)
/// at `ofport` with the VNID `vnid_hex` as ovs-ofctl prints it (e.g. "0xa").
pub fn pod_a_flows(ofport: u16, vnid_hex: &str) -> Vec<String> {
    vec![
        format!("table=20, priority=100,arp,in_port={ofport},arp_spa=10.128.0.5,arp_sha=0a:58:0a:80:00:05 actions=load:{vnid_hex}->NXM_NX_REG0[],note:{SANDBOX_NOTE},goto_table:21"),
        format!("table=20, priority=100,ip,in_port={ofport},nw_src=10.128.0.5 actions=load:{vnid_hex}->NXM_NX_REG0[],goto_table:21"),
        format!("table=40, priority=100,arp,arp_tpa=10.128.0.5 actions=output:{ofport}"),
        format!("table=70, priority=100,ip,nw_dst=10.128.0.5 actions=load:{vnid_hex}->NXM_NX_REG1[],load:{ofport:#x}->NXM_NX_REG2[],goto_table:80"),
    ]
}

/// The sandbox id whose bytes are 0xa0, 0xa1, … 0xbf.
pub const SANDBOX: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
/// Its note as ovs-ofctl prints it (padded with zeros to the action's 8-byte boundary).
pub const SANDBOX_NOTE: &str = "a0.a1.a2.a3.a4.a5.a6.a7.a8.a9.aa.ab.ac.ad.ae.af.b0.b1.b2.b3.b4.b5.b6.b7.b8.b9.ba.bb.bc.bd.be.bf.00.00.00.00.00.00";

/// The key of the pod tests' usual pod.
pub const POD_A: &str = "default/pod-a";
/// The key of a second pod, where a test has one (vethB, 10.128.0.6 in most).
pub const POD_B: &str = "default/pod-b";

/// A pod key from its text, `NAMESPACE/NAME`.
pub fn key(text: &str) -> PodKey {
    text.parse().unwrap()
}

/// The pod tests' usual pod ([`POD_A`]: vethA, 10.128.0.5, 0a:58:0a:80:00:05, SANDBOX) in
/// `vnid`; its flows are [`pod_a_flows`].
pub fn pod_a(vnid: u32) -> PodAdd {
    pod(
        POD_A,
        "vethA",
        "10.128.0.5",
        "0a:58:0a:80:00:05",
        SANDBOX,
        vnid,
    )
}

/// Pod `pod_key` (`NAMESPACE/NAME`) on `veth` with `ip`, `mac`, `sandbox` in `vnid`.
pub fn pod(pod_key: &str, veth: &str, ip: &str, mac: &str, sandbox: &str, vnid: u32) -> PodAdd {
    PodAdd {
        pod: key(pod_key),
        veth: veth.parse().unwrap(),
        ip: ip.parse().unwrap(),
        mac: mac.parse().unwrap(),
        sandbox: sandbox.parse().unwrap(),
        vnid: ofnode::sdn::Vnid::new(vnid).unwrap(),
        labels: Default::default(),
    }
}

/// `&[("k", "v")]` as labels.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Sets `set` and removes `remove`, as `kubectl label` does.
pub fn label_edit(set: &[(&str, &str)], remove: &[&str]) -> LabelEdit {
    LabelEdit {
        set: labels(set),
        remove: remove.iter().map(|k| k.to_string()).collect(),
    }
}
