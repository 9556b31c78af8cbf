//! What pod operations ask of OVSDB (the batch's port steps), and a pod add taken back when
//! OVSDB does not take its port.

use super::*;
use crate::sdn::core::ports::Bandwidth;
use crate::sdn::core::{PortStep, TakeBack};
use crate::sdn::objects::Namespace;
use crate::sdn::state::{Change, PortIntent};
use crate::value::IfName;

fn veth(name: &str) -> IfName {
    name.parse().unwrap()
}

/// The take-back of the batch's one port add.
fn take_back_of(steps: &[PortStep]) -> TakeBack {
    match steps {
        [PortStep::Add { take_back, .. }] => take_back.clone(),
        other => panic!("one port add expected: {other:?}"),
    }
}

#[test]
fn a_pod_add_asks_for_its_port_on_the_number_its_flows_use() {
    let mut core = set_up(Mode::Subnet);
    let ((), e) = run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    assert_eq!(e.flows.adds.len(), 4);
    assert!(matches!(
        e.ports.as_slice(),
        [PortStep::Add { veth: v, ofport: 3, .. }] if *v == veth("veth3")
    ));
    // A pod without a veth (adopted from the switch) has no port to add, nor does a refused add.
    let adopted = Pod {
        veth: None,
        ..pod(4, 0)
    };
    let ((), e) = run(&mut core, |c| {
        c.pod_adopt(key_of(&adopted), adopted).unwrap()
    });
    assert!(e.ports.is_empty());
    let mut unset = Core::new(NodeState::default()).unwrap();
    let (refused, e) = run(&mut unset, |c| c.pod_add(pod(5, 0)));
    assert!(refused.is_err());
    assert!(e.ports.is_empty() && e.journal.is_empty());
}

#[test]
fn a_pod_add_ovsdb_refused_is_taken_back_flows_journal_and_all() {
    // In the NetworkPolicy mode, so that the pod's namespace and labels go back too.
    let mut core = set_up(Mode::NetworkPolicy);
    run(&mut core, |c| {
        c.namespace_set(Namespace {
            name: "ns".into(),
            vnid: vnid(10),
            labels: Default::default(),
            audit: Default::default(),
        })
        .unwrap()
    });
    let before = core.flows().len();
    let labels = BTreeMap::from([("app".to_string(), "a".to_string())]);
    let ((), e) = run(&mut core, |c| {
        c.pod_add_in("ns", pod(3, 10), labels).unwrap()
    });
    let take_back = take_back_of(&e.ports);
    let ((), undo) = run(&mut core, |c| {
        assert!(c.take_back(take_back, false).unwrap());
    });
    // The flows the add put in go, in one transaction.
    assert_eq!(diff(&undo.flows), (diff(&e.flows).1, none()));
    assert_eq!(core.flows().len(), before);
    assert!(core.state().pods.is_empty() && core.state().pod_infos.is_empty());
    // The journal records the take-back; OVSDB is left alone (it holds no port of it).
    assert!(undo.journal.contains(&Change::LocalPod {
        key: key_in("ns", pod(3, 10).ip),
        pod: None
    }));
    assert!(undo.ports.is_empty() && core.state().port_intents.is_empty());
}

#[test]
fn a_pod_add_whose_port_may_be_in_ovsdb_leaves_the_port_to_be_removed() {
    let mut core = set_up(Mode::Subnet);
    let ((), e) = run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let ((), _) = run(&mut core, |c| {
        assert!(c.take_back(take_back_of(&e.ports), true).unwrap());
    });
    assert!(core.state().pods.is_empty());
    assert_eq!(
        core.state().port_intents.get(&veth("veth3")),
        Some(&PortIntent::Removed),
        "the reconciler removes the port if OVSDB has it"
    );
}

#[test]
fn taking_back_an_add_that_replaced_a_pod_brings_the_old_one_back() {
    let mut core = set_up(Mode::Subnet);
    let old = pod(3, 0);
    run(&mut core, |c| c.pod_add(old.clone()).unwrap());
    // The IP reused by a new sandbox on a new veth, whose port OVSDB refuses.
    let new = Pod {
        veth: Some(veth("veth9")),
        sandbox: "99".repeat(32).parse().unwrap(),
        ofport: 9,
        ..old.clone()
    };
    let newer = PodKey::new("default", "newer").unwrap();
    let ((), e) = run(&mut core, |c| {
        c.pod_attach(newer, new, BTreeMap::new()).unwrap()
    });
    let ((), undo) = run(&mut core, |c| {
        assert!(c.take_back(take_back_of(&e.ports), true).unwrap());
    });
    assert_eq!(core.state().pods.get(&key_of(&old)), Some(&old));
    assert!(diff(&undo.flows).1.iter().any(|f| f.contains("output:3")));
    // The old pod keeps its port; only the new veth's may go.
    assert_eq!(
        core.state().port_intents.get(&veth("veth9")),
        Some(&PortIntent::Removed)
    );
    assert_eq!(core.state().port_intents.get(&veth("veth3")), None);
}

#[test]
fn a_pod_changed_since_its_add_is_not_taken_back() {
    let mut core = set_up(Mode::Subnet);
    let ((), e) = run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let take_back = take_back_of(&e.ports);
    // Deleted meanwhile (a pod del that came right after the add).
    run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap()
    });
    let (taken, e) = run(&mut core, |c| c.take_back(take_back.clone(), true).unwrap());
    assert!(!taken);
    assert!(e.journal.is_empty() && e.flows.is_empty());
    // Added again with another number: the newer add stands.
    run(&mut core, |c| {
        c.pod_add(Pod {
            ofport: 7,
            ..pod(3, 0)
        })
        .unwrap()
    });
    let (taken, _) = run(&mut core, |c| c.take_back(take_back, false).unwrap());
    assert!(!taken);
    assert_eq!(core.state().pods[&key_of(&pod(3, 0))].ofport, 7);
}

#[test]
fn a_pod_del_removes_its_port_also_when_repeated() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let ((), e) = run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap()
    });
    assert_eq!(
        e.ports,
        vec![PortStep::Remove {
            veth: veth("veth3")
        }]
    );
    // The intent is journaled with the delete: a failed removal is retried from it.
    assert!(e.journal.contains(&Change::PortIntent {
        veth: veth("veth3"),
        intent: Some(PortIntent::Removed)
    }));
    let ((), again) = run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap()
    });
    assert!(again.journal.is_empty());
    assert_eq!(again.ports, e.ports);
    // Without a veth there is no port to remove.
    let ((), e) = run(&mut core, |c| c.pod_del(&key_of(&pod(4, 0)), None).unwrap());
    assert!(e.ports.is_empty());
}

#[test]
fn pod_bandwidth_writes_its_limits_and_knows_what_to_put_back() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let limits = Bandwidth::of(Some(1_000_000), Some(2048));
    let (previous, e) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), limits, false).unwrap()
    });
    assert_eq!(previous, None);
    assert_eq!(
        e.ports,
        vec![PortStep::Limit {
            veth: veth("veth3"),
            bandwidth: limits,
            previous: None
        }]
    );
    assert_eq!(e.journal.len(), 1);
    // The same limits again: nothing to journal, but OVSDB is still made to hold them.
    let (previous, e) = run(&mut core, |c| {
        c.pod_bandwidth(veth("veth3"), limits, false).unwrap()
    });
    assert_eq!(previous, Some(PortIntent::from(limits)));
    assert!(e.journal.is_empty());
    assert!(matches!(
        e.ports.as_slice(),
        [PortStep::Limit { previous: Some(p), .. }] if *p == PortIntent::from(limits)
    ));
    // A port of no pod and not in OVSDB, or of a deleted pod: refused, no step.
    let (refused, e) = run(&mut core, |c| c.pod_bandwidth(veth("veth8"), limits, false));
    assert!(refused.is_err() && e.ports.is_empty());
    run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 0)), Some(veth("veth3"))).unwrap()
    });
    let (refused, e) = run(&mut core, |c| c.pod_bandwidth(veth("veth3"), limits, true));
    assert!(refused.is_err() && e.ports.is_empty());
}

#[test]
fn a_rolled_back_batch_asks_nothing_of_ovsdb() {
    let mut core = set_up(Mode::Subnet);
    core.pod_add(pod(3, 0)).unwrap();
    core.pod_del(&key_of(&pod(4, 0)), Some(veth("veth4")))
        .unwrap();
    core.rollback();
    let ((), e) = run(&mut core, |c| c.pod_add(pod(5, 0)).unwrap());
    assert_eq!(e.ports.len(), 1, "only the new batch's step: {:?}", e.ports);
}
