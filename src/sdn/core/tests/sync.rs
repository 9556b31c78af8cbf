//! Setup, adoption, the resync and drift repair plans, and pods' bandwidth in OVSDB.

use ofnode_proto::FlowStats;

use super::*;
use crate::sdn::core::ports::Bandwidth;
use crate::sdn::core::{Reconcile, Repaired, SetupOutcome, SetupPlan};
use crate::sdn::state::{Change, PortIntent};

/// The switch holding exactly the core's table.
fn switch_of(core: &Core) -> Vec<FlowStats> {
    core.flows().iter().map(Flow::as_stats).collect()
}

fn stats_of(text: &str) -> FlowStats {
    parse_flow(text).unwrap().as_stats()
}

/// The seed's SetupOVS flows for `setup_request`, and its plugin's table 80 flows.
const SEED_SETUP_OVS: &[&str] = &[
    "table=0, priority=200, in_port=1, arp, nw_src=10.128.0.0/14, nw_dst=10.128.0.0/23, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
    "table=0, priority=200, in_port=1, ip, nw_src=10.128.0.0/14, nw_dst=10.128.0.0/23, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
    "table=0, priority=200, in_port=1, ip, nw_src=10.128.0.0/14, nw_dst=224.0.0.0/4, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
    "table=0, priority=150, in_port=1, actions=drop",
    "table=0, priority=250, in_port=2, ip, nw_dst=224.0.0.0/4, actions=drop",
    "table=0, priority=200, in_port=2, arp, nw_src=10.128.0.1, nw_dst=10.128.0.0/14, actions=goto_table:30",
    "table=0, priority=200, in_port=2, ip, actions=goto_table:30",
    "table=0, priority=150, in_port=2, actions=drop",
    "table=0, priority=100, arp, actions=goto_table:20",
    "table=0, priority=100, ip, actions=goto_table:20",
    "table=0, priority=0, actions=drop",
    "table=10, priority=0, actions=drop",
    "table=20, priority=0, actions=drop",
    "table=21, priority=0, actions=goto_table:30",
    "table=30, priority=300, arp, nw_dst=10.128.0.1, actions=output:2",
    "table=30, priority=200, arp, nw_dst=10.128.0.0/23, actions=goto_table:40",
    "table=30, priority=100, arp, nw_dst=10.128.0.0/14, actions=goto_table:50",
    "table=30, priority=300, ip, nw_dst=10.128.0.1, actions=output:2",
    "table=30, priority=100, ip, nw_dst=172.30.0.0/16, actions=goto_table:60",
    "table=30, priority=200, ip, nw_dst=10.128.0.0/23, actions=goto_table:70",
    "table=30, priority=100, ip, nw_dst=10.128.0.0/14, actions=goto_table:90",
    "table=30, priority=50, in_port=1, ip, nw_dst=224.0.0.0/4, actions=goto_table:120",
    "table=30, priority=25, ip, nw_dst=224.0.0.0/4, actions=goto_table:110",
    "table=30, priority=0, ip, actions=goto_table:100",
    "table=30, priority=0, arp, actions=drop",
    "table=40, priority=0, actions=drop",
    "table=50, priority=0, actions=drop",
    "table=60, priority=200, reg0=0, actions=output:2",
    "table=60, priority=0, actions=drop",
    "table=70, priority=0, actions=drop",
    "table=80, priority=300, ip, nw_src=10.128.0.1/32, actions=output:NXM_NX_REG2[]",
    "table=80, priority=0, actions=drop",
    "table=90, priority=0, actions=drop",
    "table=100, priority=0, actions=output:2",
    "table=110, priority=0, actions=drop",
    "table=111, priority=100, actions=goto_table:120",
    "table=120, priority=0, actions=drop",
];

#[test]
fn setup_is_the_seeds_setup_ovs_with_the_modes_flows_and_note() {
    for (mode, mode_flows, note) in [
        (
            Mode::Subnet,
            vec!["table=80, priority=200, actions=output:NXM_NX_REG2[]"],
            "table=253, actions=note:00.03",
        ),
        (
            Mode::Multitenant,
            vec![
                "table=80, priority=200, reg0=0, actions=output:NXM_NX_REG2[]",
                "table=80, priority=200, reg1=0, actions=output:NXM_NX_REG2[]",
            ],
            "table=253, actions=note:01.03",
        ),
    ] {
        let core = Core::new(NodeState::default()).unwrap();
        let Ok(SetupPlan::Replace {
            outcome,
            dropped,
            next,
            record,
        }) = core.setup(setup_request(mode))
        else {
            panic!("a fresh node is built");
        };
        assert_eq!((outcome, dropped.len()), (SetupOutcome::Built, 0));
        let mut wanted: Vec<&str> = SEED_SETUP_OVS.to_vec();
        wanted.extend(mode_flows);
        wanted.push(note);
        let all: Vec<Flow> = next.flows().all_flows().into_iter().cloned().collect();
        assert_eq!(printed(&all), seed(&wanted), "{mode}");
        assert_eq!(
            all.last().map(Flow::table),
            Some(253),
            "the version note last"
        );
        assert_eq!(
            record,
            Change::Replace {
                state: Box::new(next.state().clone())
            }
        );
    }
}

#[test]
fn setup_again_reconciles_and_other_parameters_rebuild_from_scratch() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| {
        c.pod_add(pod(3, 10)).unwrap();
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
            .unwrap();
    });
    assert!(matches!(
        core.setup(setup_request(Mode::Multitenant)),
        Ok(SetupPlan::Reconcile)
    ));
    let Ok(SetupPlan::Replace {
        outcome,
        dropped,
        next,
        ..
    }) = core.setup(setup_request(Mode::Subnet))
    else {
        panic!("other parameters rebuild");
    };
    assert_eq!(outcome, SetupOutcome::Rebuilt);
    assert_eq!(dropped, vec![pod(3, 10)], "their ports go too");
    assert!(next.state().pods.is_empty() && next.state().host_subnets.is_empty());
    assert_eq!(next.flows().len(), SEED_SETUP_OVS.len() + 2);
    // The old core is untouched until the shell swaps them.
    assert_eq!(core.state().pods.len(), 1);
}

#[test]
fn an_empty_switch_or_one_without_the_note_gets_the_whole_table() {
    let core = set_up(Mode::Subnet);
    assert_eq!(core.reconcile(&[]).unwrap(), Reconcile::InstallAll);
    // Another mode's note is not this node's setup.
    let mut other = switch_of(&core);
    other.retain(|f| f.table_id != 253);
    other.push(stats_of("table=253, actions=note:01.03"));
    assert_eq!(core.reconcile(&other).unwrap(), Reconcile::InstallAll);
    assert_eq!(
        Reconcile::InstallAll.repaired(core.flows().len()),
        Repaired::Reinstalled {
            flows: core.flows().len()
        }
    );
    let unset = Core::new(NodeState::default()).unwrap();
    assert_eq!(unset.reconcile(&[]).unwrap(), Reconcile::NotSetUp);
}

#[test]
fn a_switch_equal_to_the_table_needs_nothing() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let Reconcile::Patch(patch) = core.reconcile(&switch_of(&core)).unwrap() else {
        panic!("the note is there");
    };
    assert!(patch.is_empty());
    assert_eq!(Reconcile::Patch(patch).repaired(0), Repaired::Nothing);
}

#[test]
fn drift_repair_removes_foreign_flows_and_restores_missing_and_altered_ones() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let arp = "table=40, priority=100, arp, nw_dst=10.128.0.3, actions=output:3";
    let foreign = "table=30, priority=5, ip, actions=drop";
    let mut switch: Vec<FlowStats> = switch_of(&core)
        .into_iter()
        // Someone deleted the pod's ARP flow ...
        .filter(|f| !(f.table_id == 40 && f.priority == 100))
        .collect();
    // ... added a flow of their own, and changed table 100's default.
    switch.push(stats_of(foreign));
    for flow in &mut switch {
        if flow.table_id == 100 && flow.priority == 0 {
            *flow = stats_of("table=100, priority=0, actions=drop");
        }
    }
    let plan = core.reconcile(&switch).unwrap();
    let Reconcile::Patch(patch) = &plan else {
        panic!("the note is there: {plan:?}");
    };
    assert_eq!(
        diff(patch),
        (
            seed(&[foreign]),
            seed(&[arp, "table=100, priority=0, actions=output:2"])
        )
    );
    assert_eq!(
        plan.repaired(core.flows().len()).to_string(),
        "removed 1 foreign flows (table 30: 1); restored 2 missing or altered flows (table 40: 1, table 100: 1)"
    );
}

#[test]
fn adopting_another_daemons_state_is_a_new_core_unless_it_is_the_same() {
    let mut core = set_up(Mode::Multitenant);
    assert!(core.adopt(core.state().clone()).unwrap().is_none());
    let mut theirs = set_up(Mode::Multitenant);
    run(&mut theirs, |c| c.pod_add(pod(3, 10)).unwrap());
    let (adopted, record) = core.adopt(theirs.state().clone()).unwrap().unwrap();
    assert_eq!(adopted.flows().len(), theirs.flows().len());
    assert!(matches!(record, Change::Replace { .. }));
    core = adopted;
    assert_eq!(core.state().pods.len(), 1);
}

#[test]
fn bandwidth_as_ovsdb_holds_it() {
    assert_eq!(
        Bandwidth::of(Some(10_000_000), Some(2_048_000)),
        Bandwidth {
            qos_max_rate: Some(10_000_000),
            ingress_policing_kbps: 2000
        }
    );
    assert_eq!(
        Bandwidth::of(Some(0), None),
        Bandwidth {
            qos_max_rate: None,
            ingress_policing_kbps: 0
        }
    );
    let huge = Bandwidth::of(None, Some(u64::MAX));
    assert_eq!(huge.ingress_policing_kbps, u32::MAX);
}

#[test]
fn a_rebuild_marks_the_dropped_pods_ports_removed_and_keeps_pending_removals() {
    let veth = |name: &str| -> crate::value::IfName { name.parse().unwrap() };
    let limited = crate::sdn::core::ports::Bandwidth {
        qos_max_rate: None,
        ingress_policing_kbps: 100,
    };
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| {
        c.pod_add(pod(3, 10)).unwrap();
        c.pod_add(pod(4, 10)).unwrap();
        c.pod_bandwidth(veth("veth3"), limited, false).unwrap();
        // A port of no pod that OVSDB showed, limited; and a deleted pod's pending removal.
        c.pod_bandwidth(veth("veth8"), limited, true).unwrap();
        c.pod_del(&key_of(&pod(9, 10)), Some(veth("veth9")))
            .unwrap();
    });
    let Ok(SetupPlan::Replace {
        outcome,
        dropped,
        next,
        record,
    }) = core.setup(setup_request(Mode::Subnet))
    else {
        panic!("other parameters rebuild");
    };
    assert_eq!(outcome, SetupOutcome::Rebuilt);
    assert_eq!(dropped, vec![pod(3, 10), pod(4, 10)]);
    let intents: Vec<(&str, PortIntent)> = next
        .state()
        .port_intents
        .iter()
        .map(|(veth, intent)| (veth.as_str(), *intent))
        .collect();
    assert_eq!(
        intents,
        vec![
            ("veth3", PortIntent::Removed),
            ("veth4", PortIntent::Removed),
            ("veth9", PortIntent::Removed),
        ],
        "the dropped pods' ports go (a limit of theirs with them), pending removals stay, \
         limits of ports no pod owns are the old setup's and go"
    );
    // The journal record holds them, so a restart after the rebuild still removes the ports.
    let Change::Replace { state } = record else {
        panic!("{record:?}");
    };
    assert_eq!(&*state, next.state());
}

#[test]
fn drift_repair_of_a_foreign_flow_alone_only_deletes_it() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let foreign = [
        // Another priority of a table ofnode writes, and a table it never writes.
        "table=70, priority=99, ip, nw_dst=10.128.0.3, actions=drop",
        "table=200, priority=1, actions=drop",
    ];
    let mut switch = switch_of(&core);
    switch.extend(foreign.iter().map(|f| stats_of(f)));
    let plan = core.reconcile(&switch).unwrap();
    let Reconcile::Patch(patch) = &plan else {
        panic!("{plan:?}");
    };
    assert_eq!(diff(patch), (seed(&foreign), none()));
    assert_eq!(
        plan.repaired(core.flows().len()).to_string(),
        "removed 2 foreign flows (table 70: 1, table 200: 1)"
    );
}

#[test]
fn drift_repair_of_a_modified_flow_alone_restores_it_without_a_delete() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let wanted_70 = "table=70, priority=100, ip, nw_dst=10.128.0.3, actions=load:10->NXM_NX_REG1[], load:3->NXM_NX_REG2[], goto_table:80";
    let wanted_40 = "table=40, priority=100, arp, nw_dst=10.128.0.3, actions=output:3";
    let mut switch = switch_of(&core);
    for flow in &mut switch {
        if flow.table_id == 70 && flow.priority == 100 {
            // Someone changed its actions (the same match: the same flow, altered) ...
            *flow = stats_of("table=70, priority=100, ip, nw_dst=10.128.0.3, actions=load:10->NXM_NX_REG1[], load:4->NXM_NX_REG2[], goto_table:80");
        } else if flow.table_id == 40 && flow.priority == 100 {
            // ... or only its cookie.
            flow.cookie = 0xbad;
        } else {
            // Counters and age are the switch's own: never drift.
            flow.packet_count = 7;
            flow.byte_count = 700;
            flow.duration_sec = 60;
        }
    }
    let plan = core.reconcile(&switch).unwrap();
    let Reconcile::Patch(patch) = &plan else {
        panic!("{plan:?}");
    };
    // An add replaces a flow of the same match: no delete, so no moment without the flow.
    assert_eq!(diff(patch), (none(), seed(&[wanted_40, wanted_70])));
    assert_eq!(
        plan.repaired(core.flows().len()).to_string(),
        "restored 2 missing or altered flows (table 40: 1, table 70: 1)"
    );
}

#[test]
fn the_resync_after_a_reconnect_adds_what_the_switch_lacks() {
    let mut core = set_up(Mode::Multitenant);
    let before = switch_of(&core);
    // Operations while the switch was away (the journal has them, the switch does not).
    run(&mut core, |c| {
        c.pod_add(pod(3, 10)).unwrap();
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", Some(7)))
            .unwrap();
    });
    let Reconcile::Patch(patch) = core.reconcile(&before).unwrap() else {
        panic!("the note is there");
    };
    let mut lacking = seed_subnet_flows(2, "10.128.2.0/23", Some(7));
    lacking.push(seed_tunnel_flow(2));
    lacking.extend(pod_3_flows(10));
    lacking.push(vnid_rule(10));
    assert_eq!(diff(&patch), (none(), seed_of(&lacking)));
}
