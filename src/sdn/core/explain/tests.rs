//! `netpol explain` in the core: each tier met in order, the rule that decides, and bad
//! questions refused.

use super::*;
use crate::sdn::core::audit_names::tests::{anp, banp, world};
use crate::sdn::core::tests::{pod, run};
use crate::sdn::labels::Labels;

/// The names world, with local pods ns1/c (10.128.0.6, no labels) and ns2/d (10.128.0.7).
fn explained_world() -> Core {
    let mut core = world();
    run(&mut core, |c| {
        c.pod_attach(PodKey::new("ns1", "c").unwrap(), pod(6, 0), Labels::new())
            .unwrap();
        c.pod_attach(PodKey::new("ns2", "d").unwrap(), pod(7, 0), Labels::new())
            .unwrap();
    });
    core
}

fn key(text: &str) -> PodKey {
    text.parse().unwrap()
}

fn port(text: &str) -> PortProto {
    text.parse().unwrap()
}

/// `verdict by RULE` of a side, as `RuleNames` prints the rule ("-" when no rule decided).
fn said(side: &Option<Side>) -> String {
    match side {
        None => "not judged here".to_string(),
        Some(side) => match &side.decided_by {
            Some(by) => format!("{} by {by}", side.verdict.as_str()),
            None => format!("{} (no rule)", side.verdict.as_str()),
        },
    }
}

fn explain(core: &Core, from: &str, to: &str, p: &str) -> Explanation {
    core.explain(&key(from), to, port(p))
        .unwrap_or_else(|e| panic!("{from} -> {to} {p}: {e}"))
}

#[test]
fn networkpolicy_rules_allow_and_isolation_denies_each_side() {
    let core = explained_world();
    // c (no labels) to a: c's egress is isolated by ns1/web (its only egress rule is to
    // 192.0.2.0/24); a's ingress admits app=a and ns2 only.
    let e = explain(&core, "ns1/c", "ns1/a", "80/tcp");
    assert_eq!(
        said(&e.egress),
        "deny by networkpolicy ns1 egress default-deny: deny (isolated by ns1/web)"
    );
    assert_eq!(
        said(&e.ingress),
        "deny by networkpolicy ns1 ingress default-deny: deny (isolated by ns1/ingress-only, ns1/web)"
    );
    assert_eq!(e.verdict, Verdict::Deny);
    let ingress = e.ingress.as_ref().unwrap();
    let listed: Vec<(String, bool)> = ingress
        .rules
        .iter()
        .map(|c| (c.rule.rule.clone(), c.matches))
        .collect();
    assert_eq!(
        listed,
        [
            ("ingress[0]".to_string(), false),
            ("ingress[1]".to_string(), false)
        ]
    );
    assert_eq!(e.to.pod.as_deref(), Some("ns1/a"));
    assert!(e.from.local && e.to.local);

    // a to a network egress[0] allows; the address is no pod: only egress is judged.
    let e = explain(&core, "ns1/a", "192.0.2.9", "443/tcp");
    assert_eq!(
        said(&e.egress),
        "allow by networkpolicy ns1/web egress[0]: allow"
    );
    assert_eq!(said(&e.ingress), "not judged here");
    assert_eq!(e.verdict, Verdict::Allow);

    // d (ns2, no policy) to a: d's egress is not isolated; a's ingress[1] admits ns2.
    let e = explain(&core, "ns2/d", "10.128.0.5", "81/udp");
    assert_eq!(said(&e.egress), "allow (no rule)");
    assert_eq!(
        said(&e.ingress),
        "allow by networkpolicy ns1/web ingress[1]: allow"
    );
    assert_eq!(e.to.pod.as_deref(), Some("ns1/a"));

    // A pod to itself: its traffic never reaches the switch.
    let e = explain(&core, "ns1/a", "10.128.0.5", "80/udp");
    assert!(e.egress.is_none() && e.ingress.is_none());
    assert_eq!(e.verdict, Verdict::Allow);
    let text = e.render();
    assert!(
        text.ends_with("never leaves it: no policy judges it\n"),
        "{text}"
    );

    // A remote source: its egress is judged on its own node.
    let e = explain(&core, "ns2/b", "ns1/a", "80/tcp");
    assert_eq!(said(&e.egress), "not judged here");
    assert_eq!(
        said(&e.ingress),
        "allow by networkpolicy ns1/web ingress[1]: allow"
    );
}

#[test]
fn admin_tiers_come_before_and_the_baseline_after_networkpolicy() {
    let mut core = explained_world();
    run(&mut core, |c| {
        c.admin_apply(anp("first", 3)).unwrap();
        c.admin_apply(banp()).unwrap();
    });
    // anp/first: ingress[0] denies ns2 on 80 (or the named port http), ingress[1] passes
    // everything on; egress[0] allows 192.0.2.0/24.
    let e = explain(&core, "ns2/d", "ns1/a", "80/tcp");
    assert_eq!(
        said(&e.ingress),
        "deny by admin anp/first (priority 3) ingress[0] \"deny-ns2\": deny"
    );
    // On 81 the ANP passes: NetworkPolicy's ingress[1] admits ns2.
    let e = explain(&core, "ns2/d", "ns1/a", "81/tcp");
    assert_eq!(
        said(&e.ingress),
        "allow by networkpolicy ns1/web ingress[1]: allow"
    );
    let rules: Vec<String> = e
        .ingress
        .as_ref()
        .unwrap()
        .rules
        .iter()
        .map(|c| format!("{} {}", c.rule.policy_label(), c.rule.rule))
        .collect();
    assert_eq!(
        rules,
        [
            "anp/first ingress[0]",
            "anp/first ingress[1]",
            "ns1/web ingress[0]",
            "ns1/web ingress[1]"
        ]
    );
    // d's egress: the ANP has no egress rule to pods, NetworkPolicy does not isolate d (no
    // policy in ns2), so the baseline's deny-all decides.
    assert_eq!(
        said(&e.egress),
        "deny by baseline banp/default egress[0] \"deny-all\": deny"
    );
    assert_eq!(e.verdict, Verdict::Deny);
    // The ANP's egress allow decides before NetworkPolicy and the baseline.
    let e = explain(&core, "ns2/d", "192.0.2.1", "53/udp");
    assert_eq!(
        said(&e.egress),
        "allow by admin anp/first (priority 3) egress[0] \"allow-docs\": allow"
    );
}

#[test]
fn named_ports_resolve_on_the_destination_pod() {
    let mut core = explained_world();
    let http = crate::sdn::objects::NamedPort {
        name: "http".into(),
        protocol: L4::Tcp,
        port: 8080,
    };
    run(&mut core, |c| {
        c.pod_ports(&key("ns1/c"), vec![http]).unwrap()
    });
    // ingress[0] admits app=a pods on 80 and on the named port http, 8080 on c.
    for port in ["8080/tcp", "80/tcp"] {
        let e = explain(&core, "ns1/a", "ns1/c", port);
        assert_eq!(
            said(&e.ingress),
            "allow by networkpolicy ns1/web ingress[0]: allow",
            "{port}"
        );
    }
    let e = explain(&core, "ns1/a", "ns1/c", "8081/tcp");
    assert_eq!(e.ingress.unwrap().verdict, Verdict::Deny);
    // a has no port named http: 8080 on a is not the named port.
    let e = explain(&core, "ns1/c", "ns1/a", "8080/tcp");
    assert_eq!(e.ingress.unwrap().verdict, Verdict::Deny);
}

#[test]
fn bad_questions_are_refused_with_what_is_wrong() {
    let core = explained_world();
    let err = |from: &str, to: &str| {
        core.explain(&key(from), to, port("80/tcp"))
            .unwrap_err()
            .to_string()
    };
    assert!(
        err("ns1/nope", "ns1/a").contains("pod ns1/nope"),
        "{}",
        err("ns1/nope", "ns1/a")
    );
    assert!(err("ns1/a", "ns9/x").contains("pod ns9/x"));
    let not_a_pod = err("ns1/a", "web");
    assert!(not_a_pod.contains("neither a pod"), "{not_a_pod}");
    for (bad, why) in [
        ("80", "expected PORT/PROTOCOL"),
        ("0/tcp", "1-65535"),
        ("70000/tcp", "1-65535"),
        ("80/icmp", "tcp, udp or sctp"),
        ("x/tcp", "1-65535"),
    ] {
        let e = bad.parse::<PortProto>().unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    assert_eq!(port("53/UDP").to_string(), "53/udp");
    let service = err("ns1/a", "172.30.0.10");
    assert!(service.contains("is a service address"), "{service}");
    // An address no pod has is explained as an address (only the source side is judged).
    let e = core
        .explain(&key("ns1/c"), "198.51.100.1", port("80/tcp"))
        .unwrap();
    assert_eq!(e.to.pod, None);
    assert!(e.ingress.is_none());
}

#[test]
fn an_explanation_round_trips_as_json() {
    let core = explained_world();
    let e = explain(&core, "ns1/c", "ns1/a", "80/tcp");
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["port"], 80);
    assert_eq!(json["protocol"], "tcp");
    assert_eq!(json["ingress"]["decided_by"]["rule"], "default-deny");
    assert_eq!(json["verdict"], "deny");
    let back: Explanation = serde_json::from_value(json).unwrap();
    assert_eq!(back, e);
}

#[test]
fn the_text_lists_each_side_s_rules_and_what_decided() {
    let core = explained_world();
    let text = explain(&core, "ns2/b", "ns1/a", "80/tcp").render();
    assert_eq!(
        text,
        "ns2/b (10.128.2.7) -> ns1/a (10.128.0.5) 80/tcp: allow\n\
         egress of ns2/b: not judged on this node\n\
         ingress of ns1/a:\n\
         \x20 -     networkpolicy ns1/web ingress[0]: allow\n\
         \x20 match networkpolicy ns1/web ingress[1]: allow\n\
         \x20 => allow by networkpolicy ns1/web ingress[1]: allow\n"
    );
}
