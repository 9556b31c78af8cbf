//! A flow the desired table cannot send is refused, named, and changes nothing: the clause
//! flow that many rules share (one `conjunction` action of 16 bytes per rule) outgrows one
//! bundle add at about 4,090 rules.

use super::*;
use crate::sdn::error::Error;
use crate::sdn::policy::networkpolicy::model::PodMeta;
use crate::sdn::policy::networkpolicy::{parse_netpol, StoredNetPol};
use crate::sdn::state::Change;

/// Policy `i` of namespace ns1: every pod of ns1 may be reached on TCP port 80. Its two
/// clauses (the targets `ip, reg1=11`, the port `tcp, tcp_dst=80`) are every such policy's.
fn port_80_policy(i: usize) -> StoredNetPol {
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"p{i}","namespace":"ns1"}},
            "spec":{{"podSelector":{{}},"ingress":[{{"ports":[{{"protocol":"TCP","port":80}}]}}]}}}}"#
    );
    StoredNetPol {
        policy: parse_netpol(json.as_bytes()).unwrap(),
        ingress_ids: vec![i as u32 + 1],
        egress_ids: Vec::new(),
    }
}

/// A NetworkPolicy node with one pod in ns1 (VNID 11) and `policies` port-80 policies.
fn state_with(policies: usize) -> NodeState {
    let mut state = NodeState {
        setup: Some(setup_request(Mode::NetworkPolicy)),
        ..NodeState::default()
    };
    let pod = pod(5, 11);
    state.apply(Change::Namespace {
        name: "ns1".into(),
        namespace: Some(crate::sdn::Namespace {
            name: "ns1".into(),
            vnid: vnid(11),
            labels: BTreeMap::new(),
        }),
    });
    state.pod_meta.insert(
        pod.ip,
        PodMeta {
            namespace: "ns1".into(),
            labels: BTreeMap::new(),
        },
    );
    state.pods.insert(pod.ip, pod);
    for i in 0..policies {
        let stored = port_80_policy(i);
        let key = format!("ns1/{}", stored.policy.name);
        state.netpols.insert(key, stored);
    }
    state
}

fn assert_names_the_clause_flow(error: &Error) {
    let Error::Flow { flow, reason } = error else {
        panic!("expected the flow named, got {error:?}");
    };
    assert!(flow.starts_with("table=80, priority=200,"), "{flow}");
    assert!(flow.contains("actions=conjunction("), "{flow}");
    assert!(
        flow.ends_with("characters in all)"),
        "quoted, not all of it: {flow}"
    );
    assert!(flow.len() < 400, "{}", flow.len());
    assert!(reason.contains("65535"), "{reason}");
}

#[test]
fn a_table_with_a_clause_flow_of_5000_rules_is_refused_naming_it() {
    let error = Core::new(state_with(5000)).unwrap_err();
    assert_names_the_clause_flow(&error);
}

#[test]
fn the_rule_whose_clause_no_longer_fits_is_refused_and_changes_nothing() {
    let mut core = Core::new(state_with(4080)).unwrap();
    let held = |core: &Core| printed(&core.flows().iter().cloned().collect::<Vec<_>>());
    for i in 4080..4100 {
        let before = held(&core);
        let policy = port_80_policy(i).policy;
        let (result, effects) = run(&mut core, |c| c.netpol_apply(policy));
        let Err(error) = result else {
            assert_eq!(
                effects.flows.adds.len(),
                3,
                "two clause flows grow, one conj_id flow"
            );
            continue;
        };
        // Header, fixed part, match (24 bytes) and apply-actions header: 80 bytes, then 16
        // per rule, inside a bundle add of 24 bytes more: 4,089 rules fit.
        let rules = i + 1;
        assert_eq!(
            rules,
            (65_535 - 24 - 80) / 16 + 1,
            "the first rule that does not fit"
        );
        assert_names_the_clause_flow(&error);
        assert!(effects.flows.is_empty() && effects.journal.is_empty());
        assert_eq!(held(&core), before, "nothing added, lost or cut");
        assert!(!core.state().netpols.contains_key(&format!("ns1/p{i}")));
        return;
    }
    panic!("4,100 rules on one clause were all taken");
}
