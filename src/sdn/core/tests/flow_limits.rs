//! Clause flows many rules share never outgrow one OpenFlow message: one `conjunction`
//! action of 16 bytes per rule would pass a bundle add's 65,535 bytes at about 4,090 rules,
//! so rules are banded by conjunction id (2,048 per priority) and a shared match is one flow
//! per band. Past the last band a policy is refused, named, and nothing changes.

use super::*;
use crate::sdn::core::CoreError as Error;
use crate::sdn::policy::networkpolicy::{parse_netpol, StoredNetPol};
use crate::sdn::produce::netpol::{max_conjunction_id, IDS_PER_BAND};
use crate::sdn::state::Change;

/// Policy `i` of namespace ns1: every pod of ns1 may be reached on TCP port 80. Its two
/// clauses (the targets `ip, reg1=11`, the port `tcp, tcp_dst=80`) are every such policy's.
fn port_80_policy(i: usize, id: u32) -> StoredNetPol {
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"p{i}","namespace":"ns1"}},
            "spec":{{"podSelector":{{}},"ingress":[{{"ports":[{{"protocol":"TCP","port":80}}]}}]}}}}"#
    );
    StoredNetPol {
        policy: parse_netpol(json.as_bytes()).unwrap(),
        ingress_ids: vec![id],
        egress_ids: Vec::new(),
    }
}

/// A NetworkPolicy node with one pod in ns1 (VNID 11) and these policies.
fn state_with(policies: impl IntoIterator<Item = StoredNetPol>) -> NodeState {
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
            audit: Default::default(),
        }),
    });
    let key = key_in("ns1", pod.ip);
    let info = crate::sdn::PodInfo {
        ips: vec![std::net::IpAddr::V4(pod.ip)],
        local: true,
        ..Default::default()
    };
    state.apply(Change::PodInfo {
        key: key.clone(),
        info: Some(info),
    });
    state.apply(Change::LocalPod {
        key,
        pod: Some(pod),
    });
    for stored in policies {
        let key = format!("ns1/{}", stored.policy.name);
        state.netpols.insert(key, stored);
    }
    state
}

/// The clause flows of match `needle`, by priority, with how many rules each carries.
fn clauses(core: &Core, needle: &str) -> Vec<(u16, usize)> {
    let mut found: Vec<(u16, usize)> = core
        .flows()
        .iter()
        .filter(|f| f.table() == 80 && f.describe().contains(needle))
        .filter(|f| f.describe().contains("conjunction("))
        .map(|f| (f.priority(), f.describe().matches("conjunction(").count()))
        .collect();
    found.sort();
    found
}

#[test]
fn five_thousand_rules_on_one_clause_are_one_flow_per_band_each_fitting_a_message() {
    let core = Core::new(state_with(
        (0..5000).map(|i| port_80_policy(i, i as u32 + 1)),
    ))
    .unwrap();
    let bands = [
        (198, 5000 - 2 * IDS_PER_BAND as usize),
        (199, IDS_PER_BAND as usize),
        (200, IDS_PER_BAND as usize),
    ];
    assert_eq!(clauses(&core, ",ip,reg1=0xb actions="), bands);
    assert_eq!(clauses(&core, ",tcp,tp_dst=80 actions="), bands);
    // Every flow the table holds encodes as one bundle add (the table would have refused it).
    assert!(core.flows().iter().all(|f| f.encoded().len() < 65_000));
}

#[test]
fn rules_added_one_by_one_across_a_band_boundary_move_to_the_next_priority() {
    let first = IDS_PER_BAND as usize - 2;
    let mut core = Core::new(state_with(
        (0..first).map(|i| port_80_policy(i, i as u32 + 1)),
    ))
    .unwrap();
    for i in first..first + 4 {
        let policy = port_80_policy(i, 0).policy;
        let (result, effects) = run(&mut core, |c| c.netpol_apply(policy));
        result.unwrap();
        // The rule's clauses join its band's two flows (or make them), and its conj_id flow.
        assert_eq!(effects.flows.adds.len(), 3, "{:?}", effects.flows);
    }
    let bands = [(199, 2), (200, IDS_PER_BAND as usize)];
    assert_eq!(clauses(&core, ",ip,reg1=0xb actions="), bands);
}

#[test]
fn a_rule_past_the_last_band_is_refused_naming_the_limit_and_changes_nothing() {
    let max = max_conjunction_id();
    // The last id there is fits, at the last band's priority.
    let core = Core::new(state_with([port_80_policy(0, max)])).unwrap();
    assert_eq!(clauses(&core, ",tcp,tp_dst=80 actions="), [(111, 1)]);
    // One past it is refused by the engine's check, whoever asks.
    let mut store = crate::sdn::store::Store::new(state_with([]));
    let engine = crate::sdn::produce::netpol::Engine::new(
        setup_request(Mode::NetworkPolicy).cluster_network,
    );
    let ns = store.state().namespaces["ns1"].clone();
    let (groups, world) = store.groups_and_world();
    let err = engine
        .check_policy(&port_80_policy(1, max + 1), &ns, groups, world, usize::MAX)
        .unwrap_err();
    assert_eq!(err.path, "spec");
    assert!(err.reason.contains(&format!("at most {max}")), "{err}");
    let as_node_error: Error = err.into();
    assert!(matches!(as_node_error, Error::Field(_)), "HTTP 422");
}
