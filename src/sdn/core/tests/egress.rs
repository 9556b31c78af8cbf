//! Egress network policy (the seed's UpdateEgressNetworkPolicyRules): the final rule set, each
//! of the seed's branches, and the way from one branch to another, as exact flow diffs.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::*;
use crate::sdn::core::CoreError as Error;
use crate::sdn::core::{check_egress, Notice};
use crate::sdn::egress::tests::{entry, policy};
use crate::sdn::state::EgressState;

const RULES: &str = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}},
    {"type":"Allow","to":{"dnsName":"example.test"}},
    {"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;

#[test]
fn egress_policy_is_the_final_rule_set_in_one_bundle() {
    let mut core = set_up(Mode::Multitenant);
    let mut e1 = entry(&["ns1"], vec![policy("ns1", "p1", RULES)]);
    e1.dns
        .insert("example.test".into(), vec![Ipv4Addr::new(198, 51, 100, 7)]);
    let (error, e) = run(&mut core, |c| c.egress_set(vnid(42), Some(e1)).unwrap());
    assert_eq!(error, None);
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&[
                "table=100, reg0=42, priority=3, ip, nw_dst=192.0.2.0/24, actions=output:2",
                "table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.7/32, actions=output:2",
                "table=100, reg0=42, priority=1, ip, actions=drop",
            ])
        )
    );
    assert_eq!(
        e.dns_names.unwrap().into_iter().collect::<Vec<_>>(),
        vec!["example.test".to_string()]
    );
    // The DNS name gets another address: only that rule changes.
    let changed = BTreeMap::from([(
        "example.test".to_string(),
        vec![Ipv4Addr::new(198, 51, 100, 8)],
    )]);
    let ((), e) = run(&mut core, |c| c.egress_dns_changed(&changed).unwrap());
    assert_eq!(
        diff(&e.flows),
        (
            seed(&["table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.7/32, actions=output:2"]),
            seed(&["table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.8/32, actions=output:2"])
        )
    );
    // No policies: the VNID's flows go, and the name is no longer used.
    let (error, e) = run(&mut core, |c| c.egress_set(vnid(42), None).unwrap());
    assert_eq!(error, None);
    assert_eq!(
        diff(&e.flows),
        (
            seed(&[
                "table=100, reg0=42, priority=3, ip, nw_dst=192.0.2.0/24, actions=output:2",
                "table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.8, actions=output:2",
                "table=100, reg0=42, priority=1, ip, actions=drop",
            ]),
            none()
        )
    );
    assert!(e.dns_names.unwrap().is_empty());
}

#[test]
fn egress_error_branches_drop_all_of_the_vnids_traffic_and_say_so() {
    let drop_all = seed(&["table=100, reg0=7, priority=1, actions=drop"]);
    let cases = [
        (
            entry(&["a", "b"], vec![policy("a", "p", RULES)]),
            "EgressNetworkPolicy not allowed in shared NetNamespace (a, b); dropping all traffic",
        ),
        (
            entry(&["a"], vec![policy("a", "p1", RULES), policy("a", "p2", RULES)]),
            "multiple EgressNetworkPolicies in same network namespace (a:p1, a:p2) is not allowed; dropping all traffic",
        ),
        (
            EgressState {
                resolver_error: Some("no nameservers".into()),
                ..entry(&["a"], vec![policy("a", "p", RULES)])
            },
            "DNS resolver failed: no nameservers, dropping all traffic for namespace: \"a\"",
        ),
    ];
    for (egress, message) in cases {
        let mut core = set_up(Mode::Multitenant);
        let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(egress)).unwrap());
        assert_eq!(error.as_deref(), Some(message));
        assert_eq!(diff(&e.flows), (none(), drop_all.clone()), "{message}");
        assert_eq!(e.journal.len(), 1, "applied: the state holds the policy");
    }
}

#[test]
fn egress_input_the_seed_ignores_is_refused_before_anything_is_done() {
    let p = vec![policy("a", "p", RULES)];
    let err = check_egress(Vnid::GLOBAL, &["a".into()], &p).unwrap_err();
    assert!(
        matches!(&err, Error::Policy { message, applied: false } if message.contains("global network namespace is not allowed (a:p); ignoring")),
        "{err}"
    );
    assert!(matches!(
        check_egress(vnid(7), &[], &p),
        Err(Error::Invalid(_))
    ));
    let bad = vec![policy("a", "p", r#"{"type":"Deny","to":{}}"#)];
    assert!(matches!(
        check_egress(vnid(7), &["a".into()], &bad),
        Err(Error::Invalid(_))
    ));
    // Removing policies needs nothing else.
    assert!(check_egress(Vnid::GLOBAL, &[], &[]).is_ok());
}

/// A valid policy of VNID 7 (namespace `a`), its DNS name answered.
fn valid() -> EgressState {
    let mut valid = entry(&["a"], vec![policy("a", "p", RULES)]);
    valid
        .dns
        .insert("example.test".into(), vec![Ipv4Addr::new(198, 51, 100, 7)]);
    valid
}

/// The valid policy's flows, as the seed writes them.
const VALID_FLOWS: &[&str] = &[
    "table=100, reg0=7, priority=3, ip, nw_dst=192.0.2.0/24, actions=output:2",
    "table=100, reg0=7, priority=2, ip, nw_dst=198.51.100.7, actions=output:2",
    "table=100, reg0=7, priority=1, ip, actions=drop",
];

/// The seed's flow for a policy it cannot honour.
const DROP_ALL: &str = "table=100, reg0=7, priority=1, actions=drop";

/// Each of the seed's branches that drop all of a VNID's traffic, with its message.
fn error_branches() -> Vec<(EgressState, &'static str)> {
    vec![
        (
            EgressState {
                namespaces: vec!["a".into(), "b".into()],
                ..valid()
            },
            "EgressNetworkPolicy not allowed in shared NetNamespace (a, b); dropping all traffic",
        ),
        (
            EgressState {
                policies: vec![policy("a", "p1", RULES), policy("a", "p2", RULES)],
                ..valid()
            },
            "multiple EgressNetworkPolicies in same network namespace (a:p1, a:p2) is not allowed; dropping all traffic",
        ),
        (
            EgressState {
                resolver_error: Some("no nameservers".into()),
                ..valid()
            },
            "DNS resolver failed: no nameservers, dropping all traffic for namespace: \"a\"",
        ),
    ]
}

#[test]
fn a_valid_policy_changed_into_each_error_branch_and_back() {
    for (broken, message) in error_branches() {
        let mut core = set_up(Mode::Multitenant);
        let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(valid())).unwrap());
        assert_eq!(error, None);
        assert_eq!(diff(&e.flows), (none(), seed(VALID_FLOWS)));
        // Into the branch: the rules go, the one drop flow comes, in one bundle.
        let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(broken)).unwrap());
        assert_eq!(error.as_deref(), Some(message));
        assert_eq!(
            diff(&e.flows),
            (seed(VALID_FLOWS), seed(&[DROP_ALL])),
            "{message}"
        );
        // And back: the drop flow goes, the rules come.
        let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(valid())).unwrap());
        assert_eq!(error, None, "{message}");
        assert_eq!(
            diff(&e.flows),
            (seed(&[DROP_ALL]), seed(VALID_FLOWS)),
            "{message}"
        );
    }
}

#[test]
fn one_error_branch_into_another_changes_no_flow_but_says_the_new_error() {
    let mut core = set_up(Mode::Multitenant);
    let branches = error_branches();
    run(&mut core, |c| {
        c.egress_set(vnid(7), Some(branches[0].0.clone())).unwrap()
    });
    for (broken, message) in branches.into_iter().skip(1) {
        let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(broken)).unwrap());
        assert_eq!(error.as_deref(), Some(message));
        assert!(e.flows.is_empty(), "{message}: {:?}", diff(&e.flows));
        assert_eq!(e.journal.len(), 1, "{message}: the state holds the input");
    }
    // Removing the policies removes the drop flow (the seed's `len(policies) == 0` branch).
    let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), None).unwrap());
    assert_eq!((error, diff(&e.flows)), (None, (seed(&[DROP_ALL]), none())));
}

#[test]
fn a_broken_resolver_matters_only_to_a_policy_with_dns_names() {
    let mut core = set_up(Mode::Multitenant);
    let cidr_only = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}}"#;
    let egress = EgressState {
        resolver_error: Some("no nameservers".into()),
        ..entry(&["a"], vec![policy("a", "p", cidr_only)])
    };
    let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(egress)).unwrap());
    assert_eq!(error, None);
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&["table=100, reg0=7, priority=1, ip, nw_dst=192.0.2.0/24, actions=output:2"])
        )
    );
}

#[test]
fn a_0_0_0_0_32_selector_matches_everything_and_the_core_says_so() {
    let mut core = set_up(Mode::Multitenant);
    let rules = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}},
        {"type":"Deny","to":{"cidrSelector":"0.0.0.0/32"}}"#;
    let egress = entry(&["a"], vec![policy("a", "p", rules)]);
    let (error, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(egress)).unwrap());
    assert_eq!(error, None);
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&[
                "table=100, reg0=7, priority=2, ip, nw_dst=192.0.2.0/24, actions=output:2",
                "table=100, reg0=7, priority=1, ip, actions=drop",
            ])
        )
    );
    // The seed's warning, as data for the shell to log (the core does not log).
    assert_eq!(
        e.notices,
        vec![Notice::EgressSelectorCorrected {
            policy: "a:p".into()
        }]
    );
    assert_eq!(
        e.notices[0].to_string(),
        "Correcting CIDRSelector '0.0.0.0/32' to '0.0.0.0/0' in EgressNetworkPolicy a:p"
    );
    assert!(e.notices[0].is_warning());
    // A policy without one says nothing.
    let (_, e) = run(&mut core, |c| c.egress_set(vnid(7), Some(valid())).unwrap());
    assert!(e.notices.is_empty(), "{:?}", e.notices);
}
