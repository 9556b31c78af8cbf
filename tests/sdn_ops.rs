//! Every node operation against a private OVS: after each one the FULL flow table, as
//! `ovs-ofctl dump-flows` prints it, equals what the seed's ovsController would have produced.

mod sdn_common;

use std::time::{Duration, Instant};

use ofnode::api::server::status_of;
use ofnode::sdn::{Error, HostSubnet, Mode, Service, SetupOutcome, Vnid};
use ofnode_harness::ofproxy::{BundleCtrl, Frame};
use sdn_common::*;

fn vnid(v: u32) -> Vnid {
    Vnid::new(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_builds_the_seed_table_and_ports() {
    let f = Fixture::set_up(Mode::Subnet).await;
    assert!(f.node.already_set_up().await.unwrap());
    // The seed's ports: vxlan0 at 1 (remote_ip/key from the flow), tun0 at 2.
    assert_eq!(f.ofport("vxlan0"), Some(1));
    assert_eq!(f.ofport("tun0"), Some(2));
    let options = f
        .ovs
        .vsctl(&["get", "Interface", "vxlan0", "options"])
        .unwrap();
    assert_eq!(options.trim(), r#"{key=flow, remote_ip=flow}"#);
    assert_eq!(
        f.ovs
            .vsctl(&["get", "Bridge", "br0", "fail_mode"])
            .unwrap()
            .trim(),
        "secure"
    );
    assert_eq!(
        f.ovs
            .vsctl(&["get", "Bridge", "br0", "protocols"])
            .unwrap()
            .trim(),
        "[OpenFlow13]"
    );
    // Fragments are matched as nx-match (the seed's SetFrags).
    let frags = f.ovs.ofctl("get-frags", "br0", &[]).unwrap();
    assert_eq!(frags.trim(), "nx-match");
    let status = f.node.status();
    assert!(status.set_up && status.switch_connected && status.ovsdb_connected);
    assert_eq!(status.version_note.as_deref(), Some("00.03"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_multitenant_has_its_table_80() {
    let f = Fixture::set_up(Mode::Multitenant).await;
    assert!(f.node.already_set_up().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_again_changes_nothing_other_parameters_rebuild() {
    let f = Fixture::set_up(Mode::Subnet).await;
    f.veth("vethA");
    f.node.pod_add(&pod_a(0)).await.unwrap();
    let with_pod = f.ovs.dump_flows("br0").unwrap();
    let outcome = f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    assert_eq!(outcome, SetupOutcome::AlreadySetUp);
    assert_flows(&f.ovs, &with_pod);
    assert!(f.ports().contains(&"vethA".to_string()));

    // Other parameters: the table is rebuilt from scratch, the pod is gone with its port.
    let outcome = f
        .node
        .setup(&setup_request(Mode::Multitenant))
        .await
        .unwrap();
    assert_eq!(outcome, SetupOutcome::Rebuilt);
    assert_flows(&f.ovs, &base_flows(Mode::Multitenant));
    assert!(!f.ports().contains(&"vethA".to_string()));
    assert_eq!(f.node.status().pods, 0);
}

/// Polls `ovs-vsctl get Interface IFACE COLUMN` until it reads `value` (the deadline only keeps
/// a broken run from hanging).
async fn wait_for_interface_column(f: &Fixture, iface: &str, column: &str, value: &str) {
    let read = || {
        f.ovs
            .vsctl_no_wait(&["get", "Interface", iface, column])
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while read() != value {
        assert!(Instant::now() < deadline, "{iface} {column}: {:?}", read());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A pod add chooses its port's number, puts its flows on it (one bundle), and then adds the
/// port, without waiting for ovs-vswitchd to apply it. Should the number be taken meanwhile
/// (here by a port asking for it while the answer to the pod's bundle is held at an OpenFlow
/// proxy in front of the switch), ovs-vswitchd gives the pod's port another number, and the
/// pod's flows follow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_flows_follow_the_port_number_vswitchd_assigns() {
    let (f, proxy) = Fixture::start_through_proxy().await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    let base = base_flows(Mode::Subnet);
    f.veth("vethA");
    proxy.hold_once(|frame: &Frame| frame.is_bundle_ctrl(BundleCtrl::CommitReply));
    let node = f.node.clone();
    let add = tokio::spawn(async move { node.pod_add(&pod_a(10)).await });
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy.held().is_empty() {
        assert!(Instant::now() < deadline, "the pod's bundle never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The flows first, on the number chosen; the port is not in OVSDB yet.
    let flows_first: Vec<String> = base.iter().cloned().chain(pod_a_flows(3, "0xa")).collect();
    assert_flows(&f.ovs, &flows_first);
    assert!(!f.ports().contains(&"vethA".to_string()));
    f.ovs
        .vsctl(&[
            "add-port",
            "br0",
            "other",
            "--",
            "set",
            "Interface",
            "other",
            "type=internal",
            "ofport_request=3",
        ])
        .unwrap();
    proxy.release_held();
    assert_eq!(
        add.await.unwrap().unwrap(),
        3,
        "the lowest number free on br0 when the pod add chose it"
    );
    wait_for_interface_column(&f, "vethA", "ofport_request", "3").await;
    let assigned = f.ofport("vethA").expect("vethA applied");
    assert_ne!(assigned, 3, "port 3 is other's");
    let expected: Vec<String> = base
        .iter()
        .cloned()
        .chain(pod_a_flows(assigned, "0xa"))
        .collect();
    wait_for_flows(&f.ovs, &expected, Duration::from_secs(10));
    let state = f.node.state().await.unwrap();
    let pod = state.pods.values().next().expect("the pod");
    assert_eq!(pod.ofport, assigned);
}

/// A pod's port renumbered long after its add (someone else's `ofport_request`): the flows, and
/// the state a restart would re-install, follow the new number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_flows_follow_a_port_renumbered_later() {
    let f = Fixture::set_up(Mode::Subnet).await;
    let base = base_flows(Mode::Subnet);
    f.veth("vethA");
    let ofport = f.node.pod_add(&pod_a(10)).await.unwrap();
    assert_eq!(Some(ofport), f.ofport("vethA"));
    let at = |port: u16| -> Vec<String> {
        base.iter()
            .cloned()
            .chain(pod_a_flows(port, "0xa"))
            .collect()
    };
    assert_flows(&f.ovs, &at(ofport));

    f.ovs
        .vsctl(&["set", "Interface", "vethA", "ofport_request=41"])
        .unwrap();
    wait_for_interface_column(&f, "vethA", "ofport", "41").await;
    wait_for_flows(&f.ovs, &at(41), Duration::from_secs(10));
    let state = f.node.state().await.unwrap();
    assert_eq!(state.pods.values().next().expect("the pod").ofport, 41);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_add_update_del() {
    let f = Fixture::set_up(Mode::Subnet).await;
    let base = base_flows(Mode::Subnet);
    f.veth("vethA");
    let ofport = f.node.pod_add(&pod_a(10)).await.unwrap();
    assert_eq!(Some(ofport), f.ofport("vethA"));
    assert_eq!(ofport, 3, "the first pod port after vxlan0 and tun0");
    let expect = |vnid_hex: &str| -> Vec<String> {
        base.iter()
            .cloned()
            .chain(pod_a_flows(3, vnid_hex))
            .collect()
    };
    assert_flows(&f.ovs, &expect("0xa"));

    // Found by its key; re-installed with the new VNID.
    f.node
        .pod_update(&key(POD_A), None, vnid(11))
        .await
        .unwrap();
    assert_flows(&f.ovs, &expect("0xb"));

    // An unknown pod is an error that changes nothing, with or without a sandbox id no flow
    // of the switch carries.
    let other = key("default/pod-z");
    let err = f.node.pod_update(&other, None, vnid(12)).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let unknown_sandbox = Some("00".repeat(32).parse().unwrap());
    let err = f
        .node
        .pod_update(&other, unknown_sandbox, vnid(12))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert_flows(&f.ovs, &expect("0xb"));

    f.node.pod_del(&key(POD_A), None).await.unwrap();
    assert_flows(&f.ovs, &base);
    assert!(!f.ports().contains(&"vethA".to_string()));
    // Deleting again (as a runtime does, naming the veth) succeeds and changes nothing.
    f.node
        .pod_del(&key(POD_A), Some("vethA".parse().unwrap()))
        .await
        .unwrap();
    assert_flows(&f.ovs, &base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_update_finds_a_pod_through_the_note_on_the_switch() {
    // With drift repair on, flows added behind the node's back are removed at once (see
    // sdn_drift); this recovery path is for a node that does not repair drift.
    let f = Fixture::start_with(|_, cfg| cfg.drift.repair = false).await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    assert_flows(&f.ovs, &base_flows(Mode::Subnet));
    // Flows a previous controller (the seed) installed: only the switch knows this pod.
    let seed_flows = [
        format!("table=20, priority=100, in_port=7, arp, nw_src=10.128.0.9, arp_sha=0a:58:0a:80:00:09, actions=load:5->NXM_NX_REG0[], note:{}, goto_table:21", SANDBOX_NOTE.trim_end_matches(".00")),
        "table=20, priority=100, in_port=7, ip, nw_src=10.128.0.9, actions=load:5->NXM_NX_REG0[], goto_table:21".to_string(),
        "table=40, priority=100, arp, nw_dst=10.128.0.9, actions=output:7".to_string(),
        "table=70, priority=100, ip, nw_dst=10.128.0.9, actions=load:5->NXM_NX_REG1[], load:7->NXM_NX_REG2[], goto_table:80".to_string(),
    ];
    for flow in &seed_flows {
        f.ovs.ofctl("add-flow", "br0", &[flow]).unwrap();
    }
    f.node
        .pod_update(
            &key("default/seed-pod"),
            Some(SANDBOX.parse().unwrap()),
            vnid(6),
        )
        .await
        .unwrap();
    let expected = with(
        &base_flows(Mode::Subnet),
        &[
            &format!("table=20, priority=100,arp,in_port=7,arp_spa=10.128.0.9,arp_sha=0a:58:0a:80:00:09 actions=load:0x6->NXM_NX_REG0[],note:{SANDBOX_NOTE},goto_table:21"),
            "table=20, priority=100,ip,in_port=7,nw_src=10.128.0.9 actions=load:0x6->NXM_NX_REG0[],goto_table:21",
            "table=40, priority=100,arp,arp_tpa=10.128.0.9 actions=output:7",
            "table=70, priority=100,ip,nw_dst=10.128.0.9 actions=load:0x6->NXM_NX_REG1[],load:0x7->NXM_NX_REG2[],goto_table:80",
        ],
    );
    assert_flows(&f.ovs, &expected);
    assert_eq!(f.node.status().pods, 1);
    // Taken over under the key it was given.
    let pods = f.node.pods().await.unwrap();
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].0, key("default/seed-pod"));
    assert_eq!(pods[0].1.ofport, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multitenant_vnid_rules_follow_their_users() {
    let f = Fixture::set_up(Mode::Multitenant).await;
    let base = base_flows(Mode::Multitenant);
    let rule = "table=80, priority=100,reg0=0xa,reg1=0xa actions=output:NXM_NX_REG2[]";
    f.veth("vethA");
    f.veth("vethB");
    f.node.pod_add(&pod_a(10)).await.unwrap();
    let pod_a = [
        &format!("table=20, priority=100,arp,in_port=3,arp_spa=10.128.0.5,arp_sha=0a:58:0a:80:00:05 actions=load:0xa->NXM_NX_REG0[],note:{SANDBOX_NOTE},goto_table:21") as &str,
        "table=20, priority=100,ip,in_port=3,nw_src=10.128.0.5 actions=load:0xa->NXM_NX_REG0[],goto_table:21",
        "table=40, priority=100,arp,arp_tpa=10.128.0.5 actions=output:3",
        "table=70, priority=100,ip,nw_dst=10.128.0.5 actions=load:0xa->NXM_NX_REG1[],load:0x3->NXM_NX_REG2[],goto_table:80",
    ]
    .map(str::to_string);
    let with_a: Vec<String> = base.iter().cloned().chain(pod_a.clone()).collect();
    assert_flows(&f.ovs, &with(&with_a, &[rule]));

    // A service of the same VNID shares the rule.
    let svc = Service {
        ip: "172.30.0.10".parse().unwrap(),
        vnid: vnid(10),
        ports: vec!["tcp/80".parse().unwrap()],
    };
    f.node.service_add(&svc).await.unwrap();
    let svc_flows = [
        "table=60, priority=100,ip,nw_dst=172.30.0.10,nw_frag=later actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
        "table=60, priority=100,tcp,nw_dst=172.30.0.10,tp_dst=80 actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
    ];
    let with_a_svc = with(&with(&with_a, &svc_flows), &[rule]);
    assert_flows(&f.ovs, &with_a_svc);

    // A pod of VNID 0 adds no rule (setup's reg0=0/reg1=0 flows cover it).
    f.node
        .pod_add(&pod(
            POD_B,
            "vethB",
            "10.128.0.6",
            "0a:58:0a:80:00:06",
            &"11".repeat(32),
            0,
        ))
        .await
        .unwrap();
    let pod_b = [
        "table=20, priority=100,arp,in_port=4,arp_spa=10.128.0.6,arp_sha=0a:58:0a:80:00:06 actions=load:0->NXM_NX_REG0[],note:11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.11.00.00.00.00.00.00,goto_table:21",
        "table=20, priority=100,ip,in_port=4,nw_src=10.128.0.6 actions=load:0->NXM_NX_REG0[],goto_table:21",
        "table=40, priority=100,arp,arp_tpa=10.128.0.6 actions=output:4",
        "table=70, priority=100,ip,nw_dst=10.128.0.6 actions=load:0->NXM_NX_REG1[],load:0x4->NXM_NX_REG2[],goto_table:80",
    ];
    assert_flows(&f.ovs, &with(&with_a_svc, &pod_b));
    f.node.pod_del(&key(POD_B), None).await.unwrap();

    // The pod goes; the service still uses VNID 10, so the rule stays.
    f.node.pod_del(&key(POD_A), None).await.unwrap();
    assert_flows(&f.ovs, &with(&with(&base, &svc_flows), &[rule]));
    assert!(f.node.unused_vnids().await.unwrap().is_empty());

    // Its last user gone, the rule goes too (the seed's SyncVNIDRules).
    f.node.service_del(svc.ip).await.unwrap();
    assert_flows(&f.ovs, &base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unused_vnids_are_found_on_the_switch() {
    // Rules left by someone else are what this test looks for: drift repair would remove them.
    let f = Fixture::start_with(|_, cfg| cfg.drift.repair = false).await;
    f.node
        .setup(&setup_request(Mode::Multitenant))
        .await
        .unwrap();
    f.veth("vethA");
    f.node.pod_add(&pod_a(10)).await.unwrap();
    assert!(f.node.unused_vnids().await.unwrap().is_empty());
    // Rules for VNIDs nothing uses (left by someone else): the seed's FindUnusedVNIDs sees them.
    for v in [99, 7] {
        f.ovs
            .ofctl(
                "add-flow",
                "br0",
                &[&format!(
                    "table=80, priority=100, reg0={v}, reg1={v}, actions=output:NXM_NX_REG2[]"
                )],
            )
            .unwrap();
    }
    assert_eq!(
        f.node.unused_vnids().await.unwrap(),
        vec![vnid(7), vnid(99)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_subnets_plain_and_fixed_vnid() {
    let f = Fixture::set_up(Mode::Subnet).await;
    let base = base_flows(Mode::Subnet);
    let plain = HostSubnet {
        host_ip: "192.0.2.2".parse().unwrap(),
        subnet: "10.130.0.0/23".parse().unwrap(),
        fixed_vnid: None,
        vtep_mac: None,
    };
    let fixed = HostSubnet {
        host_ip: "192.0.2.3".parse().unwrap(),
        subnet: "10.130.2.0/23".parse().unwrap(),
        fixed_vnid: Some(vnid(77)),
        vtep_mac: Some("0a:00:00:00:00:03".parse().unwrap()),
    };
    f.node.hostsubnet_add(&plain).await.unwrap();
    f.node.hostsubnet_add(&fixed).await.unwrap();
    let plain_flows = [
        "table=10, priority=100,tun_src=192.0.2.2 actions=goto_table:30",
        "table=50, priority=100,arp,arp_tpa=10.130.0.0/23 actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1",
        "table=90, priority=100,ip,nw_dst=10.130.0.0/23 actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1",
    ];
    let fixed_flows = [
        "table=10, priority=100,tun_src=192.0.2.3 actions=goto_table:30",
        "table=50, priority=100,arp,arp_tpa=10.130.2.0/23 actions=load:0x4d->NXM_NX_TUN_ID[0..31],set_field:192.0.2.3->tun_dst,output:1",
        "table=90, priority=100,ip,nw_dst=10.130.2.0/23 actions=load:0x4d->NXM_NX_TUN_ID[0..31],set_field:192.0.2.3->tun_dst,output:1",
    ];
    assert_flows(&f.ovs, &with(&with(&base, &plain_flows), &fixed_flows));

    // Deleting with the wrong host is refused and changes nothing.
    let err = f
        .node
        .hostsubnet_del("192.0.2.9".parse().unwrap(), plain.subnet)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    f.node
        .hostsubnet_del(plain.host_ip, plain.subnet)
        .await
        .unwrap();
    assert_flows(&f.ovs, &with(&base, &fixed_flows));
    f.node
        .hostsubnet_del(fixed.host_ip, fixed.subnet)
        .await
        .unwrap();
    assert_flows(&f.ovs, &base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_tcp_udp_and_fragments() {
    let f = Fixture::set_up(Mode::Subnet).await;
    let base = base_flows(Mode::Subnet);
    let svc = Service {
        ip: "172.30.0.10".parse().unwrap(),
        vnid: vnid(10),
        ports: vec!["tcp/80".parse().unwrap(), "udp/53".parse().unwrap()],
    };
    f.node.service_add(&svc).await.unwrap();
    let flows = [
        "table=60, priority=100,ip,nw_dst=172.30.0.10,nw_frag=later actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
        "table=60, priority=100,tcp,nw_dst=172.30.0.10,tp_dst=80 actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
        "table=60, priority=100,udp,nw_dst=172.30.0.10,tp_dst=53 actions=load:0xa->NXM_NX_REG1[],load:0x2->NXM_NX_REG2[],goto_table:80",
    ];
    assert_flows(&f.ovs, &with(&base, &flows));
    f.node.service_del(svc.ip).await.unwrap();
    assert_flows(&f.ovs, &base);

    // Other protocols never get that far: the port does not parse.
    let err = "sctp/80".parse::<ofnode::sdn::ServicePort>().unwrap_err();
    assert!(err.to_string().contains("unhandled protocol"), "{err}");
    let bad = r#"{"ip":"172.30.0.11","vnid":1,"ports":["sctp/80"]}"#;
    assert!(serde_json::from_str::<Service>(bad).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multicast_local_and_vxlan() {
    let f = Fixture::set_up(Mode::Subnet).await;
    let base = base_flows(Mode::Subnet);
    f.node
        .multicast_local(vnid(10), true, &[4, 10, 3])
        .await
        .unwrap();
    let local = [
        "table=110, reg0=0xa actions=goto_table:111",
        // Sorted as strings, as the seed sorts them.
        "table=120, priority=100,reg0=0xa actions=output:10,output:3,output:4",
    ];
    assert_flows(&f.ovs, &with(&base, &local));
    f.node.multicast_local(vnid(10), true, &[]).await.unwrap();
    assert_flows(&f.ovs, &with(&base, &local[..1]));
    f.node.multicast_local(vnid(10), false, &[3]).await.unwrap();
    assert_flows(&f.ovs, &base);

    f.node
        .multicast_vxlan(&["192.0.2.3".parse().unwrap(), "192.0.2.2".parse().unwrap()])
        .await
        .unwrap();
    let vxlan = "table=111, priority=100 actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1,set_field:192.0.2.3->tun_dst,output:1,goto_table:120";
    assert_flows(
        &f.ovs,
        &with(
            &without(&base, &["table=111, priority=100 actions=goto_table:120"]),
            &[vxlan],
        ),
    );
    f.node.multicast_vxlan(&[]).await.unwrap();
    assert_flows(&f.ovs, &base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_before_setup_and_bad_input_change_nothing() {
    let f = Fixture::start().await;
    let err = f.node.pod_add(&pod_a(1)).await.unwrap_err();
    assert!(matches!(err, Error::NotSetUp), "{err}");
    assert_eq!(status_of(&err).as_u16(), 409);
    assert!(!f.node.already_set_up().await.unwrap_or(false));

    // A gateway outside the local subnet is refused before anything is touched.
    let mut bad = setup_request(Mode::Subnet);
    bad.gateway = "10.129.0.1".parse().unwrap();
    let err = f.node.setup(&bad).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert_eq!(status_of(&err).as_u16(), 400);
    assert!(f.ovs.vsctl(&["br-exists", "br0"]).is_err());

    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    let base = base_flows(Mode::Subnet);
    // A port that cannot be found is refused.
    let err = f
        .node
        .multicast_local(vnid(3), true, &[0])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let err = f
        .node
        .pod_bandwidth(&key("default/nosuch"), Some(1000), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    // A pod whose device does not exist gets no port and no flows.
    let err = f
        .node
        .pod_add(&pod(
            POD_A,
            "nosuch",
            "10.128.0.5",
            "0a:58:0a:80:00:05",
            SANDBOX,
            1,
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert!(err.to_string().contains("nosuch"), "{err}");
    assert_eq!(f.ports(), ["tun0", "vxlan0"]);
    assert_flows(&f.ovs, &base);
    // Validation of the input types themselves.
    assert!("10.128.0.0/33".parse::<ofnode::sdn::Cidr>().is_err());
    assert!(Vnid::new(1 << 24).is_err());
    assert!("abc".parse::<ofnode::sdn::SandboxId>().is_err());
    assert!("0a:58".parse::<ofnode::sdn::MacAddr>().is_err());
    assert!("a-much-too-long-name"
        .parse::<ofnode::sdn::IfName>()
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_bandwidth_sets_qos_and_policing() {
    let f = Fixture::set_up(Mode::Subnet).await;
    f.veth("vethA");
    f.node.pod_add(&pod_a(0)).await.unwrap();
    let pod = key(POD_A);
    f.node
        .pod_bandwidth(&pod, Some(1_000_000), Some(2_048_000))
        .await
        .unwrap();
    let qos = f.ovs.vsctl(&["get", "Port", "vethA", "qos"]).unwrap();
    let qos = qos.trim();
    assert_ne!(qos, "[]");
    assert_eq!(
        f.ovs.vsctl(&["get", "QoS", qos, "type"]).unwrap().trim(),
        "linux-htb"
    );
    assert_eq!(
        f.ovs
            .vsctl(&["get", "QoS", qos, "other_config:max-rate"])
            .unwrap()
            .trim(),
        "\"1000000\""
    );
    assert_eq!(
        f.ovs
            .vsctl(&["get", "Interface", "vethA", "ingress_policing_rate"])
            .unwrap()
            .trim(),
        "2000"
    );
    f.node.pod_bandwidth(&pod, None, None).await.unwrap();
    assert_eq!(
        f.ovs
            .vsctl(&["get", "Port", "vethA", "qos"])
            .unwrap()
            .trim(),
        "[]"
    );
    assert_eq!(f.ovs.vsctl(&["list", "QoS"]).unwrap().trim(), "");
    // Teardown clears the QoS with the port.
    f.node
        .pod_bandwidth(&pod, Some(5_000_000), None)
        .await
        .unwrap();
    f.node.pod_del(&pod, None).await.unwrap();
    assert_eq!(f.ovs.vsctl(&["list", "QoS"]).unwrap().trim(), "");
    assert_flows(&f.ovs, &base_flows(Mode::Subnet));
}

/// The seed's four flows of a pod with VNID 0, as ovs-ofctl prints them.
fn pod_flows_vnid0(ip: &str, port: u16, mac: &str, sandbox_note: &str) -> Vec<String> {
    vec![
        format!("table=20, priority=100,arp,in_port={port},arp_spa={ip},arp_sha={mac} actions=load:0->NXM_NX_REG0[],note:{sandbox_note}.00.00.00.00.00.00,goto_table:21"),
        format!("table=20, priority=100,ip,in_port={port},nw_src={ip} actions=load:0->NXM_NX_REG0[],goto_table:21"),
        format!("table=40, priority=100,arp,arp_tpa={ip} actions=output:{port}"),
        format!("table=70, priority=100,ip,nw_dst={ip} actions=load:0->NXM_NX_REG1[],load:{port:#x}->NXM_NX_REG2[],goto_table:80"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pod_adds_and_deletes_keep_the_table_exact() {
    const PODS: usize = 48;
    const CLIENTS: usize = 16;
    let f = Fixture::set_up(Mode::Subnet).await;
    for i in 0..PODS {
        f.veth(&format!("vc{i}"));
    }
    let sandbox = |i: usize| format!("{:02x}", i + 1).repeat(32);
    let add = move |i: usize| {
        pod(
            &format!("default/pod-{i}"),
            &format!("vc{i}"),
            &format!("10.128.1.{}", i + 1),
            &format!("0a:58:0a:80:01:{:02x}", i + 1),
            &sandbox(i),
            0,
        )
    };
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let node = f.node.clone();
        tasks.push(tokio::spawn(async move {
            let mut ports = Vec::new();
            for i in (client..PODS).step_by(CLIENTS) {
                ports.push((i, node.pod_add(&add(i)).await.unwrap()));
            }
            ports
        }));
    }
    let mut ports = std::collections::BTreeMap::new();
    for task in tasks {
        ports.extend(task.await.unwrap());
    }
    let expected_for = |alive: &dyn Fn(usize) -> bool| {
        let mut expected = base_flows(Mode::Subnet);
        for (i, port) in &ports {
            if alive(*i) {
                let note = sandbox(*i)
                    .as_bytes()
                    .chunks(2)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<Vec<_>>()
                    .join(".");
                expected.extend(pod_flows_vnid0(
                    &format!("10.128.1.{}", i + 1),
                    *port,
                    &format!("0a:58:0a:80:01:{:02x}", i + 1),
                    &note,
                ));
            }
        }
        expected
    };
    for (i, port) in &ports {
        assert_eq!(f.ofport(&format!("vc{i}")), Some(*port));
    }
    assert_flows(&f.ovs, &expected_for(&|_| true));

    // Half of them go, concurrently.
    let mut tasks = Vec::new();
    for i in (0..PODS).filter(|i| i % 2 == 0) {
        let node = f.node.clone();
        tasks.push(tokio::spawn(async move {
            node.pod_del(&key(&format!("default/pod-{i}")), None)
                .await
                .unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_flows(&f.ovs, &expected_for(&|i| i % 2 == 1));
    assert_eq!(f.node.status().pods, PODS / 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_openflow_points_the_bridge_at_the_node() {
    let f = Fixture::start_with(|ovs, cfg| {
        cfg.openflow = format!("punix:{}", ovs.dir().join("ofnode.sock").display());
    })
    .await;
    let outcome = f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    assert_eq!(outcome, SetupOutcome::Built);
    assert_flows(&f.ovs, &base_flows(Mode::Subnet));
    let controller = f.ovs.vsctl(&["get-controller", "br0"]).unwrap();
    assert_eq!(
        controller.trim(),
        format!("unix:{}", f.ovs.dir().join("ofnode.sock").display())
    );
    let status = f.node.status();
    assert!(status.switch_connected && status.in_sync);
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["version_note"], "00.03");
    assert_eq!(json["flows"], base_flows(Mode::Subnet).len());
    let metrics = f.node.metrics().render(&status);
    assert!(metrics.contains("ofnode_switch_connected 1"), "{metrics}");
    assert!(metrics.contains("# TYPE ofnode_operation_duration_seconds histogram"));
}
