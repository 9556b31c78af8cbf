//! The limits on one policy (`limits.rs`): each refused naming the field and the limit, the
//! limit itself accepted.

use super::*;
use crate::sdn::policy::networkpolicy::limits::*;

fn list(n: usize, item: impl Fn(usize) -> String) -> String {
    (0..n).map(item).collect::<Vec<_>>().join(",")
}

fn refusal(spec: &str) -> FieldError {
    parse_netpol(wrap("x", "p", spec).as_bytes()).expect_err("over a limit")
}

#[test]
fn too_many_rules_peers_ports_or_excepts_are_refused_naming_the_field() {
    let rules = |n| {
        format!(
            r#"{{"podSelector":{{}},"ingress":[{}]}}"#,
            list(n, |_| "{}".into())
        )
    };
    policy(&wrap("x", "p", &rules(MAX_RULES)));
    let err = refusal(&rules(MAX_RULES + 1));
    assert_eq!(err.path, "spec.ingress");
    assert!(err.reason.contains("at most 100"), "{err}");
    let egress = format!(
        r#"{{"podSelector":{{}},"policyTypes":["Egress"],"egress":[{}]}}"#,
        list(MAX_RULES + 1, |_| "{}".into())
    );
    assert_eq!(refusal(&egress).path, "spec.egress");

    let peers = |n| {
        format!(
            r#"{{"podSelector":{{}},"ingress":[{{}},{{"from":[{}]}}]}}"#,
            list(n, |i| format!(
                r#"{{"podSelector":{{"matchLabels":{{"i":"{i}"}}}}}}"#
            ))
        )
    };
    policy(&wrap("x", "p", &peers(MAX_PEERS)));
    let err = refusal(&peers(MAX_PEERS + 1));
    assert_eq!(err.path, "spec.ingress[1].from");
    assert!(err.reason.contains("101 peers: at most 100"), "{err}");

    let ports = |n| {
        format!(
            r#"{{"podSelector":{{}},"policyTypes":["Egress"],"egress":[{{"ports":[{}]}}]}}"#,
            list(n, |i| format!(r#"{{"port":{}}}"#, i + 1))
        )
    };
    policy(&wrap("x", "p", &ports(MAX_PORTS)));
    let err = refusal(&ports(MAX_PORTS + 1));
    assert_eq!(err.path, "spec.egress[0].ports");
    assert!(err.reason.contains("at most 100"), "{err}");

    let excepts = |n| {
        format!(
            r#"{{"podSelector":{{}},"ingress":[{{"from":[{{"ipBlock":{{"cidr":"10.0.0.0/8","except":[{}]}}}}]}}]}}"#,
            list(n, |i| format!(r#""10.0.{i}.0/24""#))
        )
    };
    policy(&wrap("x", "p", &excepts(MAX_EXCEPTS)));
    let err = refusal(&excepts(MAX_EXCEPTS + 1));
    assert_eq!(err.path, "spec.ingress[0].from[0].ipBlock.except");
    assert!(err.reason.contains("33 excepts: at most 32"), "{err}");
}

/// `peers` ipBlocks `10.i.0.0/16`, each minus 32 scattered hosts (about 500 CIDRs each).
fn fragmented_blocks(peers: usize) -> NetPol {
    let block = |i: usize| {
        format!(
            r#"{{"ipBlock":{{"cidr":"10.{i}.0.0/16","except":[{}]}}}}"#,
            list(MAX_EXCEPTS, |j| format!(
                r#""10.{i}.{}.{}/32""#,
                j * 7,
                j + 1
            ))
        )
    };
    policy(&wrap(
        "x",
        "p",
        &format!(
            r#"{{"podSelector":{{}},"ingress":[{{"from":[{}]}}]}}"#,
            list(peers, block)
        ),
    ))
}

#[test]
fn a_policy_over_the_flow_limit_is_refused() {
    let mut w = World::new();
    w.pod([10, 128, 0, 5], meta("x", &[]));
    let small = allocate_ids(fragmented_blocks(4), None, &ConjIds::default());
    w.check_flow_limit(&small).unwrap();
    w.netpols.insert("x/small".into(), small.clone());
    let flows = w.flows_of("x/small");
    w.netpols.remove("x/small");
    assert!((1_000..MAX_FLOWS).contains(&flows), "{flows}");
    let big = allocate_ids(fragmented_blocks(60), None, &ConjIds::default());
    let err = w.check_flow_limit(&big).unwrap_err();
    assert_eq!(err.path, "spec");
    assert!(err.reason.contains("more than 20000 flows"), "{err}");
    // Without a pod it selects here, the same policy costs nothing on this node.
    w.local.clear();
    w.check_flow_limit(&big).unwrap();
}
