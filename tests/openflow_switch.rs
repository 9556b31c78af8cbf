//! The OpenFlow connection against a private, real Open vSwitch: connect (active and passive),
//! bundle transactions, dumps, concurrency. `ovs-ofctl` is the oracle for what the switch holds.

mod openflow_common;

use std::time::Duration;

use ofnode::openflow::{Error, Switch, SwitchEvent};
use ofnode_proto::{
    text, Action, Field, FlowModCommand, FlowStatsRequest, GroupCommand, Instruction, Match,
    Message, MultipartReplyBody, MultipartRequest, OFPFF_CHECK_OVERLAP,
};
use openflow_common::*;

fn dpid_from_ofctl_show(ovs: &ofnode_harness::Ovs) -> u64 {
    let show = ovs.ofctl("show", "br0", &[]).expect("ovs-ofctl show");
    let hex = show
        .split("dpid:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("dpid in ovs-ofctl show");
    u64::from_str_radix(hex, 16).expect("hex dpid")
}

fn frag_mode(ovs: &ofnode_harness::Ovs) -> String {
    ovs.ofctl("get-frags", "br0", &[])
        .expect("ovs-ofctl get-frags")
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_unix_connects_reports_datapath_and_sets_frag_mode() {
    let ovs = ovs_with_br0();
    assert_eq!(frag_mode(&ovs), "normal", "precondition");
    let (switch, mut events) = Switch::start(config(&ovs.mgmt_target("br0")));
    let dpid = switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    assert_eq!(dpid, dpid_from_ofctl_show(&ovs));
    let connected = next_event(&mut events, "Connected", |e| {
        matches!(e, SwitchEvent::Connected { .. })
    })
    .await;
    assert!(matches!(connected, SwitchEvent::Connected { datapath_id } if datapath_id == dpid));
    assert_eq!(frag_mode(&ovs), "nx-match");
    assert!(switch.is_connected());
    assert_eq!(switch.datapath_id(), Some(dpid));

    switch.barrier().await.unwrap();
    let desc = switch.multipart(MultipartRequest::Desc).await.unwrap();
    let [MultipartReplyBody::Desc(desc)] = desc.as_slice() else {
        panic!("unexpected desc reply {desc:?}")
    };
    assert!(desc.mfr_desc.contains("Nicira"), "{desc:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_tcp_accepts_the_switch_after_set_controller() {
    let ovs = ovs_with_br0();
    // ovs-vswitchd lives in the namespace, so the listener must too (see tcp_listener_in_netns).
    let listener = tcp_listener_in_netns(&ovs.netns().path());
    let port = listener.local_addr().unwrap().port();
    let cfg = config(&format!("ptcp:{port}:127.0.0.1"));
    let (switch, _events) = Switch::start_with_listener(cfg, listener).unwrap();
    assert!(!switch.is_connected());
    ovs.vsctl(&["set-controller", "br0", &format!("tcp:127.0.0.1:{port}")])
        .unwrap();
    let dpid = switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    assert_eq!(dpid, dpid_from_ofctl_show(&ovs));
    assert_eq!(frag_mode(&ovs), "nx-match");

    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 10, 1, 2, 3));
    tx.commit().await.unwrap();
    assert_eq!(oracle_flows(&ovs), vec![reg_flow_line(0, 10, 1, 2, 3)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_unix_accepts_the_switch_after_set_controller() {
    let ovs = ovs_with_br0();
    let sock = ovs.dir().join("ofnode-ctl.sock");
    let cfg = config(&format!("punix:{}", sock.display()));
    let (switch, _events) = Switch::start(cfg);
    wait_for_path(&sock).await;
    ovs.vsctl(&["set-controller", "br0", &format!("unix:{}", sock.display())])
        .unwrap();
    let dpid = switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    assert_eq!(dpid, dpid_from_ofctl_show(&ovs));
    let mut tx = switch.transaction();
    tx.add(reg_flow(1, 20, 4, 5, 6));
    tx.commit().await.unwrap();
    assert_eq!(oracle_flows(&ovs), vec![reg_flow_line(1, 20, 4, 5, 6)]);
    drop(switch);
    // The listener's socket file goes with the last handle.
    tokio::time::timeout(CONNECT_TIMEOUT, async {
        while sock.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("socket file removed after the last handle is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_five_flow_bundle_lands_exactly() {
    let ovs = ovs_with_br0();
    let (switch, _events) = connect_br0(&ovs).await;
    let specs = [
        (0, 100, 1, 1, 1),
        (0, 90, 2, 2, 2),
        (1, 80, 3, 3, 3),
        (2, 70, 4, 4, 4),
        (3, 60, 5, 5, 5),
    ];
    let mut tx = switch.transaction();
    for (table, priority, reg0, reg1, port) in &specs[..3] {
        tx.add(reg_flow(*table, *priority, *reg0, *reg1, *port));
    }
    // The rest as already encoded flow mods (any xid), as a node's stored table sends them.
    for &(table, priority, reg0, reg1, port) in &specs[3..] {
        let frame = Message::FlowMod(reg_flow(table, priority, reg0, reg1, port))
            .to_bytes(77)
            .unwrap()
            .freeze();
        tx.push_encoded(frame).unwrap();
    }
    // What is not exactly one flow mod is refused and leaves the transaction as it was.
    let frame = Message::FlowMod(reg_flow(0, 1, 1, 1, 1))
        .to_bytes(1)
        .unwrap()
        .freeze();
    assert!(tx.push_encoded(frame.slice(..frame.len() - 1)).is_err());
    assert!(tx
        .push_encoded(Message::BarrierRequest.to_bytes(1).unwrap().freeze())
        .is_err());
    assert_eq!(tx.len(), 5);
    tx.commit().await.unwrap();
    let want = sorted(
        specs
            .iter()
            .map(|&(t, p, a, b, port)| reg_flow_line(t, p, a, b, port))
            .collect(),
    );
    assert_eq!(oracle_flows(&ovs), want);

    // ofnode's own dump sees the same five flows.
    let dumped = switch
        .dump_flows(FlowStatsRequest::default())
        .await
        .unwrap();
    let mut got: Vec<(u8, u16, Option<u64>)> = dumped
        .iter()
        .map(|f| (f.table_id, f.priority, f.match_.exact(Field::Reg(0))))
        .collect();
    got.sort();
    let mut expected: Vec<(u8, u16, Option<u64>)> = specs
        .iter()
        .map(|&(t, p, a, _, _)| (t, p, Some(a)))
        .collect();
    expected.sort();
    assert_eq!(got, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_flow_fails_the_whole_bundle_and_is_named() {
    let ovs = ovs_with_br0();
    ovs.ofctl("add-flow", "br0", &["table=0,priority=1,actions=drop"])
        .unwrap();
    let before = oracle_flows(&ovs);
    let (switch, _events) = connect_br0(&ovs).await;

    // A goto_table that does not go forward (OVS accepts only later tables).
    let mut backwards = reg_flow(3, 99, 0x63, 0x63, 1);
    backwards.instructions = vec![Instruction::GotoTable(2)];
    // A field without its prerequisite: tcp_dst without ip/tcp.
    let mut bad_field = reg_flow(0, 98, 0x62, 0x62, 1);
    bad_field.match_ = Match::new().with(Field::TcpDst, 80);

    for (bad, error_name, flow_text) in [
        (
            backwards,
            "OFPBIC_BAD_TABLE_ID",
            "table=3, priority=99,reg0=0x63,reg1=0x63 actions=goto_table:2",
        ),
        (
            bad_field,
            "OFPBMC_BAD_PREREQ",
            "priority=98,tp_dst=80 actions=output:1",
        ),
    ] {
        let mut tx = switch.transaction();
        tx.add(reg_flow(0, 50, 1, 1, 1));
        tx.add(reg_flow(0, 51, 2, 2, 2));
        tx.add(bad);
        tx.add(reg_flow(0, 52, 3, 3, 3));
        let err = tx.commit().await.unwrap_err();
        let Error::Switch { flow, error } = &err else {
            panic!("expected a switch error, got {err:?}")
        };
        assert_eq!(error.kind.name(), error_name, "{err}");
        let flow = flow.as_deref().expect("the failing flow is named");
        assert_eq!(flow, flow_text, "the failing flow in ovs-ofctl syntax");
        assert!(err.to_string().contains(error_name), "{err}");
        assert_eq!(
            oracle_flows(&ovs),
            before,
            "nothing of the failed bundle applied"
        );
    }
    // The connection is still good and the bundle was discarded: a clean transaction works.
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 50, 1, 1, 1));
    tx.commit().await.unwrap();
    assert_eq!(oracle_flows(&ovs).len(), before.len() + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_failing_at_commit_rolls_back_everything_and_is_named() {
    let ovs = ovs_with_br0();
    ovs.ofctl(
        "add-flow",
        "br0",
        &["table=0,priority=7,reg0=9,actions=drop"],
    )
    .unwrap();
    let before = oracle_flows(&ovs);
    let (switch, _events) = connect_br0(&ovs).await;
    // CHECK_OVERLAP is only evaluated when the bundle commits: reg1=0 at the same priority
    // overlaps the installed reg0=9 flow (a packet can match both).
    let mut overlapping = reg_flow(0, 7, 9, 0, 4);
    overlapping.match_ = Match::new().with(Field::Reg(1), 0);
    overlapping.flags = OFPFF_CHECK_OVERLAP;
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 60, 1, 1, 1));
    tx.add(overlapping);
    tx.add(reg_flow(0, 61, 2, 2, 2));
    let err = tx.commit().await.unwrap_err();
    let Error::Switch { flow, error } = &err else {
        panic!("expected a switch error, got {err:?}")
    };
    assert_eq!(error.kind.name(), "OFPFMFC_OVERLAP", "{err}");
    assert!(
        flow.as_deref() == Some("check_overlap priority=7,reg1=0 actions=output:4"),
        "{err}"
    );
    assert_eq!(oracle_flows(&ovs), before);
}

/// Groups travel in the same transaction as the flows that use them, in the order OVS needs
/// (the flows are pushed first here, and would fail if sent first): an EgressIP-like select
/// group and two flows land together; deleting the flows and the group in one transaction
/// leaves neither; a bad group (a bucket chaining to a group that does not exist) fails the
/// whole bundle, is named, and nothing of it applies. `ovs-ofctl` is the oracle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_the_flows_that_use_them_commit_in_one_transaction() {
    let ovs = ovs_with_br0();
    let (switch, _events) = connect_br0(&ovs).await;
    let select = "group_id=42,type=select,bucket=weight:100,actions=output:1,bucket=weight:50,actions=set_field:0x1a->pkt_mark,output:2";
    let uses_42 = |table, reg0| {
        let mut flow = reg_flow(table, 100, reg0, 0, 1);
        flow.instructions = vec![Instruction::ApplyActions(vec![Action::Group(42)])];
        flow
    };
    let mut tx = switch.transaction();
    tx.add(uses_42(0, 42)).add(uses_42(1, 43));
    tx.add_group_text(select).unwrap();
    tx.commit().await.unwrap();
    assert_eq!(oracle_groups(&ovs), vec![select]);
    assert_eq!(
        oracle_flows(&ovs),
        vec![
            "priority=100,reg0=0x2a,reg1=0 actions=group:42",
            "table=1, priority=100,reg0=0x2b,reg1=0 actions=group:42",
        ]
    );

    // The group delete is pushed first here; it goes after the flow deletes.
    let mut tx = switch.transaction();
    tx.delete_group(42)
        .delete(reg_flow_delete(0, 100, 42, 0))
        .delete(reg_flow_delete(1, 100, 43, 0));
    tx.commit().await.unwrap();
    assert!(oracle_groups(&ovs).is_empty());
    assert!(oracle_flows(&ovs).is_empty());

    // A good group and a flow using it, with a group the switch refuses (an id it already
    // has; a modify of a group it does not have): the whole bundle fails, the bad group mod
    // is named, and nothing applies. (OVS 3.1 accepts a bucket chaining to a group that does
    // not exist, so that is no bad group.)
    ovs.ofctl(
        "add-group",
        "br0",
        &["group_id=7,type=all,bucket=actions=output:3"],
    )
    .unwrap();
    let groups_before = oracle_groups(&ovs);
    for (command, bad, error_name, named) in [
        (
            GroupCommand::Add,
            "group_id=7,type=indirect,bucket=actions=output:2",
            "OFPGMFC_GROUP_EXISTS",
            "group add group_id=7,type=indirect,bucket=actions=output:2",
        ),
        (
            GroupCommand::Modify,
            "group_id=8,type=all,bucket=actions=output:2",
            "OFPGMFC_UNKNOWN_GROUP",
            "group modify group_id=8,type=all,bucket=actions=output:2",
        ),
    ] {
        let mut tx = switch.transaction();
        tx.add_group_text("group_id=5,type=all,bucket=actions=output:1")
            .unwrap()
            .add(reg_flow(0, 5, 5, 5, 1))
            .push_group(text::parse_group(bad, command).unwrap());
        let err = tx.commit().await.unwrap_err();
        let Error::Switch { flow, error } = &err else {
            panic!("expected a switch error, got {err:?}")
        };
        assert_eq!(error.kind.name(), error_name, "{err}");
        assert_eq!(flow.as_deref(), Some(named), "{err}");
        assert!(err.to_string().contains(named), "{err}");
        assert_eq!(oracle_groups(&ovs), groups_before);
        assert!(oracle_flows(&ovs).is_empty());
    }

    // Deleted and added again in one transaction: refused before anything is sent.
    let mut tx = switch.transaction();
    tx.delete_group(5)
        .add_group_text("group_id=5,type=all,bucket=actions=output:1")
        .unwrap();
    assert!(matches!(tx.commit().await, Err(Error::BundleOrder(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_too_large_for_one_bundle_is_refused_not_split() {
    let ovs = ovs_with_br0();
    let mut cfg = config(&ovs.mgmt_target("br0"));
    cfg.max_bundle_msgs = 10;
    let (switch, _events) = Switch::start(cfg);
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    let mut tx = switch.transaction();
    for i in 0..11 {
        tx.add(reg_flow(0, 10, i, i, 1));
    }
    let err = tx.commit().await.unwrap_err();
    assert!(
        matches!(err, Error::BundleTooLarge { flows: 11, max: 10 }),
        "{err}"
    );
    assert!(oracle_flows(&ovs).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_flows_commit_in_one_bundle_and_dump_back_complete() {
    const N: u64 = 100_000;
    let ovs = ovs_with_br0();
    let (switch, _events) = connect_br0(&ovs).await;
    let mut tx = switch.transaction();
    for i in 0..N {
        tx.add(reg_flow(0, 100, i / 1000, i % 1000, 1 + (i % 7) as u32));
    }
    tx.commit().await.unwrap();

    // Oracle: ovs-ofctl sees every flow.
    let lines = ovs.dump_flows("br0").unwrap();
    assert_eq!(lines.len() as u64, N);
    assert!(lines.contains(&reg_flow_line(0, 100, 99, 999, 1 + (99_999 % 7) as u32)));

    // ofnode's dump reassembles the multipart reply completely.
    let flows = switch
        .dump_flows(FlowStatsRequest::default())
        .await
        .unwrap();
    let mut keys: Vec<(u64, u64)> = flows
        .iter()
        .map(|f| {
            let reg = |n| f.match_.exact(Field::Reg(n)).expect("register matched");
            (reg(0), reg(1))
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len() as u64, N);
    assert_eq!(keys.first(), Some(&(0, 0)));
    assert_eq!(keys.last(), Some(&(99, 999)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_times_two_hundred_transactions_are_all_correct() {
    const TASKS: u64 = 64;
    const ROUNDS: u64 = 200;
    let ovs = ovs_with_br0();
    let (switch, _events) = connect_br0(&ovs).await;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let switch = switch.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                // Add this round's flow; every odd round also removes the previous one, so
                // both adds and deletes of every task must land.
                let mut tx = switch.transaction();
                tx.add(reg_flow(0, 100, task, round, (round % 5 + 1) as u32));
                if round % 2 == 1 {
                    tx.push(reg_flow_delete(0, 100, task, round - 1));
                }
                tx.commit()
                    .await
                    .unwrap_or_else(|e| panic!("task {task} round {round}: {e}"));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let want = sorted(
        (0..TASKS)
            .flat_map(|t| {
                (0..ROUNDS)
                    .filter(|r| r % 2 == 1)
                    .map(move |r| reg_flow_line(0, 100, t, r, (r % 5 + 1) as u32))
            })
            .collect(),
    );
    assert_same_flows(&oracle_flows(&ovs), &want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_flows_honours_the_filter_and_send_checked_reports_errors() {
    let ovs = ovs_with_br0();
    let (switch, mut events) = connect_br0(&ovs).await;
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 10, 1, 1, 1));
    tx.add(reg_flow(4, 10, 2, 2, 2));
    tx.add(reg_flow(4, 11, 3, 3, 3));
    tx.commit().await.unwrap();
    let filter = FlowStatsRequest {
        table_id: 4,
        ..FlowStatsRequest::default()
    };
    let flows = switch.dump_flows(filter).await.unwrap();
    assert_eq!(flows.len(), 2);
    assert!(flows.iter().all(|f| f.table_id == 4));

    // A plain flow mod with a barrier: errors come back to the caller...
    let mut bad = reg_flow(3, 1, 1, 1, 1);
    bad.instructions = vec![Instruction::GotoTable(1)];
    let err = switch
        .send_checked(Message::FlowMod(bad.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Switch { error, .. } if error.kind.name() == "OFPBIC_BAD_TABLE_ID"),
        "{err}"
    );
    // ...or, fire-and-forget, as an event.
    switch.send(Message::FlowMod(bad)).await.unwrap();
    let event = next_event(&mut events, "AsyncError", |e| {
        matches!(e, SwitchEvent::AsyncError(_))
    })
    .await;
    assert!(matches!(event, SwitchEvent::AsyncError(e) if e.kind.name() == "OFPBIC_BAD_TABLE_ID"));

    // And a good one lands.
    let mut good = reg_flow(5, 1, 7, 7, 7);
    good.command = FlowModCommand::Add;
    good.instructions = vec![Instruction::ApplyActions(vec![Action::output(7)])];
    switch.send_checked(Message::FlowMod(good)).await.unwrap();
    assert!(oracle_flows(&ovs).contains(&reg_flow_line(5, 1, 7, 7, 7)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_transaction_is_all_or_nothing_and_leaves_the_connection_usable() {
    const N: u64 = 20_000;
    let ovs = ovs_with_br0();
    let (switch, _events) = connect_br0(&ovs).await;
    let mut tx = switch.transaction();
    for i in 0..N {
        tx.add(reg_flow(0, 100, i, 1, 1));
    }
    // Give up almost at once: mid-stream, or (rarely) after the commit went out.
    let outcome = tokio::time::timeout(Duration::from_millis(2), tx.commit()).await;
    // The switch has processed whatever it got once a later barrier is answered; the bundle
    // was discarded (or, if the commit had already left, applied whole).
    switch.barrier().await.unwrap();
    let mut tx = switch.transaction();
    tx.add(reg_flow(1, 1, 1, 1, 1));
    tx.commit().await.unwrap();
    let flows = oracle_flows(&ovs);
    let table0 = flows.iter().filter(|l| !l.starts_with("table=1,")).count() as u64;
    assert!(
        table0 == 0 || table0 == N,
        "a cancelled transaction applied {table0} of {N} flows (outcome {outcome:?})"
    );
    assert!(flows.contains(&reg_flow_line(1, 1, 1, 1, 1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_pod_flows_as_text_land_and_dump_back_as_ovs_ofctl_prints_them() {
    let ovs = ovs_with_br0();
    let (switch, _events) = connect_br0(&ovs).await;
    let note = "4e.8c.5e.2a.b3.f1.d7.c9.e0.a2.b4.c6.d8.f0.e1.a3.b5.c7.d9.e1.f3.a5.b7.c9.d1.e3.f5.a7.b9.c1.d3.e5";
    let mut tx = switch.transaction();
    for flow in [
        format!("table=20, priority=100, in_port=3, arp, nw_src=10.128.0.5, arp_sha=0a:58:0a:80:00:05, actions=load:10->NXM_NX_REG0[], note:{note}, goto_table:21"),
        "table=20, priority=100, in_port=3, ip, nw_src=10.128.0.5, actions=load:10->NXM_NX_REG0[], goto_table:21".into(),
        "table=40, priority=100, arp, nw_dst=10.128.0.5, actions=output:3".into(),
        "table=70, priority=100, ip, nw_dst=10.128.0.5, actions=load:10->NXM_NX_REG1[], load:3->NXM_NX_REG2[], goto_table:80".into(),
    ] {
        tx.add_text(&flow).unwrap();
    }
    tx.commit().await.unwrap();
    let oracle = oracle_flows(&ovs);
    assert_eq!(oracle.len(), 4);
    assert!(
        oracle.iter().any(|l| l.contains("arp_spa=10.128.0.5")),
        "{oracle:?}"
    );
    let ours = sorted(
        switch
            .dump_flows_text(FlowStatsRequest::default())
            .await
            .unwrap(),
    );
    assert_eq!(ours, oracle);

    // The seed's cleanupPodFlows: four deletes by match in one transaction.
    let mut tx = switch.transaction();
    for flow in [
        "ip, nw_dst=10.128.0.5",
        "ip, nw_src=10.128.0.5",
        "arp, nw_dst=10.128.0.5",
        "arp, nw_src=10.128.0.5",
    ] {
        tx.delete_text(flow).unwrap();
    }
    tx.commit().await.unwrap();
    assert!(oracle_flows(&ovs).is_empty());
}
