//! Pods and their ports: teardown's port intent in the same record as the flows, bandwidth
//! limits and their bookkeeping, a pod IP reused by another sandbox, ports that move.

use super::*;
use crate::sdn::core::ports::Bandwidth;
use crate::sdn::core::CoreError as Error;
use crate::sdn::core::Notice;
use crate::sdn::state::{Change, PortIntent};
use crate::value::IfName;

fn veth(name: &str) -> IfName {
    name.parse().unwrap()
}

fn bandwidth(kbps: u32) -> Bandwidth {
    Bandwidth {
        qos_max_rate: Some(10_000_000),
        ingress_policing_kbps: kbps,
    }
}

fn limits(kbps: u32) -> PortIntent {
    bandwidth(kbps).into()
}

fn intent(core: &Core, name: &str) -> Option<PortIntent> {
    core.state().port_intents.get(&veth(name)).copied()
}

#[test]
fn teardown_with_a_veth_journals_the_flows_and_the_ports_removal_as_one_record() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let key = key_of(&pod(3, 10));
    let ((), e) = run(&mut core, |c| c.pod_del(&key, Some(veth("veth3"))).unwrap());
    let mut gone = pod_3_flows(10);
    gone.push(vnid_rule(10));
    assert_eq!(diff(&e.flows), (seed_of(&gone), none()));
    assert_eq!(
        e.journal,
        vec![
            Change::LocalPod {
                key: key.clone(),
                pod: None
            },
            Change::PortIntent {
                veth: veth("veth3"),
                intent: Some(PortIntent::Removed),
            },
        ],
        "one batch, one record: a restart never finds the flows gone and the port kept"
    );
    assert_eq!(intent(&core, "veth3"), Some(PortIntent::Removed));
    // Deleted again (the runtime retries): nothing new to do or record.
    let ((), e) = run(&mut core, |c| c.pod_del(&key, Some(veth("veth3"))).unwrap());
    assert!(
        e.flows.is_empty() && e.journal.is_empty(),
        "{:?}",
        e.journal
    );
}

#[test]
fn teardown_of_an_unknown_pod_still_marks_its_port_removed() {
    let mut core = set_up(Mode::Subnet);
    let ((), e) = run(&mut core, |c| {
        c.pod_del(&key_of(&pod(9, 0)), Some(veth("veth9"))).unwrap()
    });
    assert!(e.flows.is_empty());
    assert_eq!(
        e.journal,
        vec![Change::PortIntent {
            veth: veth("veth9"),
            intent: Some(PortIntent::Removed),
        }]
    );
}

#[test]
fn a_pod_added_on_a_removed_ports_name_starts_afresh_in_the_same_record() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap()
    });
    let ((), e) = run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    assert_eq!(diff(&e.flows), (none(), seed_of(&pod_3_flows(0))));
    assert_eq!(
        e.journal,
        vec![
            Change::PortIntent {
                veth: veth("veth3"),
                intent: None,
            },
            Change::LocalPod {
                key: key_of(&pod(3, 0)),
                pod: Some(pod(3, 0)),
            },
        ]
    );
    assert_eq!(intent(&core, "veth3"), None);
}

#[test]
fn bandwidth_is_refused_for_a_removed_pods_port_and_for_an_unknown_port() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap()
    });
    // A deleted pod's port is refused even when OVSDB still shows it (its removal is pending).
    let (result, e) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(100), true)
    });
    let Err(Error::NotFound { what }) = result else {
        panic!("{result:?}");
    };
    assert_eq!(what, "port veth3");
    assert!(e.journal.is_empty());
    assert_eq!(
        intent(&core, "veth3"),
        Some(PortIntent::Removed),
        "unchanged"
    );
    // A port no pod has and OVSDB does not show.
    let (result, e) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth8"), bandwidth(100), false)
    });
    assert!(
        matches!(&result, Err(Error::NotFound { what }) if what == "port veth8"),
        "{result:?}"
    );
    assert!(e.journal.is_empty() && core.state().port_intents.len() == 1);
    // One OVSDB shows is a port ofnode may limit.
    let (result, _) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth8"), bandwidth(100), true)
    });
    assert_eq!(result.unwrap(), None);
    assert_eq!(intent(&core, "veth8"), Some(limits(100)));
}

#[test]
fn bandwidth_records_the_limits_once_and_returns_what_they_replaced() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let (previous, e) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(100), false)
            .unwrap()
    });
    assert_eq!(previous, None);
    assert!(e.flows.is_empty(), "limits are OVSDB's, never flows");
    assert_eq!(
        e.journal,
        vec![Change::PortIntent {
            veth: veth("veth3"),
            intent: Some(limits(100)),
        }]
    );
    // The same limits again: nothing to record.
    let (previous, e) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(100), false)
            .unwrap()
    });
    assert_eq!((previous, e.journal.len()), (Some(limits(100)), 0));
    let (previous, _) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(200), false)
            .unwrap()
    });
    assert_eq!(previous, Some(limits(100)));
}

#[test]
fn refused_limits_are_put_back_unless_they_changed_since() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(100), false)
            .unwrap()
    });
    let (back, _) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(200), false)
            .unwrap()
    });
    // OVSDB refused 200: the 100 goes back.
    let ((), e) = run(&mut core, |c| {
        c.restore_port_intent(veth("veth3"), limits(200), back)
            .unwrap()
    });
    assert_eq!(
        e.journal,
        vec![Change::PortIntent {
            veth: veth("veth3"),
            intent: Some(limits(100)),
        }]
    );
    assert_eq!(intent(&core, "veth3"), Some(limits(100)));
    // Another request set 300 meanwhile: putting back the refused 200's predecessor would undo it.
    run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), bandwidth(300), false)
            .unwrap()
    });
    let ((), e) = run(&mut core, |c| {
        c.restore_port_intent(veth("veth3"), limits(200), Some(limits(100)))
            .unwrap()
    });
    assert!(e.journal.is_empty());
    assert_eq!(intent(&core, "veth3"), Some(limits(300)));
    // A first limit refused: the port had none, and has none again.
    run(&mut core, |c| c.pod_add(pod(4, 0)).unwrap());
    run(&mut core, |c| {
        c.pod_bandwidth(veth("veth4"), bandwidth(100), false)
            .unwrap()
    });
    run(&mut core, |c| {
        c.restore_port_intent(veth("veth4"), limits(100), None)
            .unwrap()
    });
    assert_eq!(intent(&core, "veth4"), None);
}

#[test]
fn ports_confirmed_gone_are_forgotten_only_when_their_removal_was_wanted() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| {
        c.pod_add(pod(3, 0)).unwrap();
        c.pod_add(pod(4, 0)).unwrap();
        c.pod_bandwidth(veth("veth4"), bandwidth(100), false)
            .unwrap();
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap();
        c.pod_del(&key_of(&pod(5, 0)), Some(veth("veth5"))).unwrap();
    });
    let ((), e) = run(&mut core, |c| {
        c.forget_removed_ports(&[veth("veth3"), veth("veth4"), veth("veth7")])
            .unwrap()
    });
    assert_eq!(
        e.journal,
        vec![Change::PortIntent {
            veth: veth("veth3"),
            intent: None,
        }],
        "a limited port and an unknown one are not forgotten"
    );
    let kept: Vec<_> = core.state().port_intents.iter().collect();
    assert_eq!(
        kept,
        vec![
            (&veth("veth4"), &limits(100)),
            (&veth("veth5"), &PortIntent::Removed)
        ]
    );
    let ((), e) = run(&mut core, |c| c.forget_removed_ports(&[]).unwrap());
    assert!(e.journal.is_empty());
}

#[test]
fn a_pod_ip_reused_by_another_sandbox_replaces_the_old_pod_and_the_core_says_so() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    // The runtime gave 10.128.0.3 to a new sandbox (0x07…) on port 7 before deleting the old.
    let newer = Pod {
        veth: Some(veth("veth7")),
        ofport: 7,
        sandbox: "07".repeat(32).parse().unwrap(),
        ..pod(3, 11)
    };
    let newer_key = PodKey::new("default", "newer").unwrap();
    let add = |c: &mut Core| {
        c.pod_attach(newer_key.clone(), newer.clone(), BTreeMap::new())
            .unwrap()
    };
    let ((), e) = run(&mut core, add);
    let (deletes, adds) = diff(&e.flows);
    // Table 20's flows match on the port, so the old pod's go; tables 40 and 70 are replaced
    // by the same match with the new port; VNID 10's rule goes with its last user.
    let mut old = pod_3_flows(10);
    old.truncate(2);
    old.push(vnid_rule(10));
    let mut new = seed_pod_flows(3, 7, 7, 11);
    new.push(vnid_rule(11));
    assert_eq!((deletes, adds), (seed_of(&old), seed_of(&new)));
    assert_eq!(core.state().pods[&newer_key], newer);
    assert!(!core.state().pods.contains_key(&key_of(&pod(3, 10))));
    assert_eq!(
        e.notices,
        vec![Notice::PodIpReused {
            ip: newer.ip,
            old: key_of(&pod(3, 10)),
            new: newer_key.clone(),
        }]
    );
    assert!(e.notices[0].is_warning());
    assert!(e.notices[0].to_string().contains("10.128.0.3 reused"));
    // The same pod again (a repeated ADD) is no reuse.
    let ((), e) = run(&mut core, add);
    assert!(e.notices.is_empty() && e.flows.is_empty());
}

#[test]
fn a_port_that_moved_is_said_as_information() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let ((), e) = run(&mut core, |c| {
        c.follow_ports(|veth| (veth == "veth3").then_some(9))
            .unwrap()
    });
    assert_eq!(
        e.notices,
        vec![Notice::PortMoved {
            pod: key_of(&pod(3, 0)),
            veth: veth("veth3"),
            from: 3,
            to: 9,
        }]
    );
    assert!(!e.notices[0].is_warning());
    // A batch that is rolled back hands over nothing of it.
    core.follow_ports(|_| Some(12)).unwrap();
    core.rollback();
    assert!(core.take_effects().notices.is_empty());
}
