//! Naming rules and addresses: every conjunction id the core's flows use names the rule the
//! policy lists (both parts of a two-part rule name one rule), isolation names its namespace
//! and the policies isolating it, the admin tiers' ids read back to the producer's rules, and
//! what the node no longer holds names nothing.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use ofnode_proto::Field;

use super::*;
use crate::sdn::core::tests::{pod, run, set_up};
use crate::sdn::labels::Labels;
use crate::sdn::layout::{ADMIN_EGRESS, ADMIN_INGRESS, POLICY, POLICY_CONNTRACK};
use crate::sdn::objects::{Namespace, PodInfo};
use crate::sdn::policy::admin::parse_admin_policy;
use crate::sdn::policy::networkpolicy::parse_netpol;
use crate::sdn::produce::admin::verdict_flows;
use crate::sdn::types::Mode;

fn namespace(name: &str, vnid: u32) -> Namespace {
    Namespace {
        name: name.into(),
        vnid: Vnid::new(vnid).unwrap(),
        labels: Labels::new(),
        audit: Default::default(),
    }
}

/// `web` in ns1: ingress[0] by port number and by name (two conjunctions), ingress[1] from
/// every pod of ns2, egress[0] to 192.0.2.0/24; `ingress-only` isolates ingress alone.
fn policies() -> [&'static str; 2] {
    [
        r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{"name":"web","namespace":"ns1"},
            "spec":{"podSelector":{},"policyTypes":["Ingress","Egress"],
              "ingress":[{"from":[{"podSelector":{"matchLabels":{"app":"a"}}}],
                          "ports":[{"protocol":"TCP","port":80},{"protocol":"TCP","port":"http"}]},
                         {"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ns2"}}}]}],
              "egress":[{"to":[{"ipBlock":{"cidr":"192.0.2.0/24"}}]}]}}"#,
        r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{"name":"ingress-only","namespace":"ns1"},
            "spec":{"podSelector":{},"ingress":[]}}"#,
    ]
}

/// A NetworkPolicy-mode core: ns1 (VNID 101) with a local pod 10.128.0.5 (app=a), ns2 (102)
/// with a remote pod 10.128.2.7, the two policies.
pub(crate) fn world() -> Core {
    let mut core = set_up(Mode::NetworkPolicy);
    run(&mut core, |c| {
        c.namespace_set(namespace("ns1", 101)).unwrap();
        c.namespace_set(namespace("ns2", 102)).unwrap();
        let labels = Labels::from([("app".to_string(), "a".to_string())]);
        c.pod_attach(PodKey::new("ns1", "a").unwrap(), pod(5, 0), labels)
            .unwrap();
        let remote = PodInfo {
            labels: Labels::new(),
            ips: vec![IpAddr::V4(Ipv4Addr::new(10, 128, 2, 7))],
            local: false,
            ports: Vec::new(),
        };
        c.remote_pod_set(PodKey::new("ns2", "b").unwrap(), remote)
            .unwrap();
        for text in policies() {
            c.netpol_apply(parse_netpol(text.as_bytes()).unwrap())
                .unwrap();
        }
    });
    core
}

/// The conjunction ids the core's NetworkPolicy flows use, by direction.
fn conj_ids_in_flows(core: &Core) -> BTreeSet<(Dir, u32)> {
    core.flows()
        .iter()
        .filter_map(|flow| {
            let dir = match flow.table() {
                POLICY => Dir::Ingress,
                POLICY_CONNTRACK => Dir::Egress,
                _ => return None,
            };
            let id = flow.to_add().ok()?.match_.exact(Field::ConjId)?;
            Some((dir, u32::try_from(id).ok()?))
        })
        .collect()
}

fn allow(dir: Dir, id: u32) -> RuleRef {
    RuleRef {
        tier: AuditTier::NetworkPolicy,
        dir,
        verdict: Verdict::Allow,
        id,
    }
}

#[test]
fn every_conjunction_of_the_flows_names_its_policy_rule() {
    let core = world();
    let namer = core.rule_namer();
    let named: BTreeSet<(Dir, String)> = conj_ids_in_flows(&core)
        .into_iter()
        .map(|(dir, id)| {
            let names = namer
                .rule(allow(dir, id))
                .unwrap_or_else(|| panic!("{dir:?} conjunction {id} names no rule"));
            assert_eq!(names.namespace.as_deref(), Some("ns1"));
            assert_eq!(names.policy.as_deref(), Some("web"));
            assert_eq!(names.policy_label(), "ns1/web");
            (dir, names.rule)
        })
        .collect();
    let expected = [
        (Dir::Ingress, "ingress[0]"),
        (Dir::Ingress, "ingress[1]"),
        (Dir::Egress, "egress[0]"),
    ]
    .map(|(dir, rule)| (dir, rule.to_string()));
    assert_eq!(named, BTreeSet::from(expected));
    // ingress[0] is two conjunctions (numbered, named): both name it.
    let stored = &core.state().netpols["ns1/web"];
    assert_eq!(stored.ingress_ids.len(), 3);
    for id in &stored.ingress_ids[..2] {
        let names = namer.rule(allow(Dir::Ingress, *id)).unwrap();
        assert_eq!(names.rule, "ingress[0]");
    }
    // The other direction's list does not hold an ingress id.
    assert_eq!(namer.rule(allow(Dir::Egress, stored.ingress_ids[0])), None);
}

#[test]
fn isolation_names_the_namespace_and_the_policies_isolating_it() {
    let core = world();
    let namer = core.rule_namer();
    let deny = |dir| RuleRef {
        tier: AuditTier::NetworkPolicy,
        dir,
        verdict: Verdict::Deny,
        id: 101,
    };
    let ingress = namer.rule(deny(Dir::Ingress)).unwrap();
    assert_eq!(ingress.namespace.as_deref(), Some("ns1"));
    assert_eq!(ingress.policy, None);
    assert_eq!(ingress.rule, ISOLATION_RULE);
    assert_eq!(ingress.isolated_by, ["ns1/ingress-only", "ns1/web"]);
    let egress = namer.rule(deny(Dir::Egress)).unwrap();
    assert_eq!(egress.isolated_by, ["ns1/web"]);
    assert_eq!(
        egress.to_string(),
        "networkpolicy ns1 egress default-deny: deny (isolated by ns1/web)"
    );
    // No namespace has VNID 999.
    let unknown = RuleRef {
        id: 999,
        ..deny(Dir::Ingress)
    };
    assert_eq!(namer.rule(unknown), None);
}

#[test]
fn a_deleted_or_replaced_policy_names_nothing_it_no_longer_holds() {
    let mut core = world();
    let web = core.state().netpols["ns1/web"].clone();
    let egress_id = web.egress_ids[0];
    run(&mut core, |c| c.netpol_del("ns1", "web").unwrap());
    assert_eq!(core.rule_namer().rule(allow(Dir::Egress, egress_id)), None);
    // Applied again, its ids are taken afresh and name it again.
    run(&mut core, |c| c.netpol_apply(web.policy.clone()).unwrap());
    let again = &core.state().netpols["ns1/web"];
    let names = core
        .rule_namer()
        .rule(allow(Dir::Egress, again.egress_ids[0]))
        .unwrap();
    assert_eq!(names.rule, "egress[0]");
    // A core rebuilt from the state (a restart) names the same.
    let rebuilt = Core::new(core.state().clone()).unwrap();
    assert_eq!(
        rebuilt
            .rule_namer()
            .rule(allow(Dir::Egress, again.egress_ids[0])),
        Some(names)
    );
}

pub(crate) fn anp(name: &str, priority: u16) -> AdminPolicy {
    let yaml = format!(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
         metadata: {{name: {name}}}\nspec:\n  priority: {priority}\n\
         \x20 subject: {{namespaces: {{}}}}\n  ingress:\n\
         \x20 - {{name: deny-ns2, action: Deny, from: [{{namespaces: {{matchLabels: {{kubernetes.io/metadata.name: ns2}}}}}}], ports: [{{portNumber: {{port: 80}}}}, {{namedPort: http}}]}}\n\
         \x20 - {{action: Pass, from: [{{namespaces: {{}}}}]}}\n  egress:\n\
         \x20 - {{name: allow-docs, action: Allow, to: [{{networks: [192.0.2.0/24]}}]}}\n"
    );
    parse_admin_policy(yaml.as_bytes()).unwrap()
}

pub(crate) fn banp() -> AdminPolicy {
    let yaml = "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\n\
         metadata: {name: default}\nspec:\n  subject: {namespaces: {}}\n  egress:\n\
         \x20 - {name: deny-all, action: Deny, to: [{networks: [0.0.0.0/0]}]}\n";
    parse_admin_policy(yaml.as_bytes()).unwrap()
}

/// The producer's verdict flows carry each rule's conjunction id: read back, it names that
/// very rule (direction, index, name, action).
#[test]
fn admin_rules_are_named_from_the_producers_conjunction_ids() {
    let mut core = world();
    let policies = [anp("first", 3), anp("last", 1000), banp()];
    run(&mut core, |c| {
        for p in policies.clone() {
            c.admin_apply(p).unwrap();
        }
    });
    let namer = core.rule_namer();
    for policy in &policies {
        for (fm, dir, index) in verdict_flows(policy) {
            let id = fm.match_.exact(Field::ConjId).unwrap() as u32;
            let (tier, verdict) = match policy.tier {
                Tier::Admin { .. } => (AuditTier::Admin, Verdict::Allow),
                Tier::Baseline => (AuditTier::Baseline, Verdict::Deny),
            };
            assert!(
                matches!(fm.table_id, ADMIN_EGRESS | ADMIN_INGRESS) || tier == AuditTier::Baseline
            );
            let rule = RuleRef {
                tier,
                dir,
                verdict,
                id,
            };
            let names = namer
                .rule(rule)
                .unwrap_or_else(|| panic!("{rule} names no rule"));
            let listed = match dir {
                Dir::Ingress => &policy.ingress[index],
                Dir::Egress => &policy.egress[index],
            };
            assert_eq!(names.policy.as_deref(), Some(policy.name.as_str()));
            assert_eq!(names.rule, rule_label(dir, index));
            assert_eq!(
                names.rule_name,
                Some(listed.name.clone()).filter(|n| !n.is_empty())
            );
            assert_eq!(
                names.priority,
                match policy.tier {
                    Tier::Admin { priority } => Some(priority),
                    Tier::Baseline => None,
                }
            );
        }
    }
    let deny_80 = namer
        .rule(RuleRef {
            tier: AuditTier::Admin,
            dir: Dir::Ingress,
            verdict: Verdict::Deny,
            id: 3 * 128 + 1,
        })
        .unwrap();
    assert_eq!(
        deny_80.to_string(),
        "admin anp/first (priority 3) ingress[0] \"deny-ns2\": deny"
    );
    // No ANP at priority 4; the baseline has no rule 1.
    let absent = [
        (AuditTier::Admin, 4 * 128 + 1),
        (AuditTier::Baseline, 3),
        (AuditTier::Admin, 0),
    ];
    for (tier, id) in absent {
        let rule = RuleRef {
            tier,
            dir: Dir::Egress,
            verdict: Verdict::Deny,
            id,
        };
        assert_eq!(namer.rule(rule), None, "{rule}");
    }
}

#[test]
fn addresses_name_local_and_remote_pods() {
    let core = world();
    let namer = core.rule_namer();
    let name = |ip: [u8; 4]| namer.pod(Ipv4Addr::from(ip)).map(PodKey::to_string);
    assert_eq!(name([10, 128, 0, 5]).as_deref(), Some("ns1/a"));
    assert_eq!(name([10, 128, 2, 7]).as_deref(), Some("ns2/b"));
    assert_eq!(name([10, 128, 0, 99]), None);
}

#[test]
fn names_serialize_as_the_api_and_log_spell_them() {
    let core = world();
    let id = core.state().netpols["ns1/web"].ingress_ids[2];
    let names = core.rule_namer().rule(allow(Dir::Ingress, id)).unwrap();
    assert_eq!(
        serde_json::to_value(&names).unwrap(),
        serde_json::json!({
            "tier": "networkpolicy", "direction": "ingress", "verdict": "allow",
            "namespace": "ns1", "policy": "web", "rule": "ingress[1]"
        })
    );
    let back: RuleNames = serde_json::from_value(serde_json::to_value(&names).unwrap()).unwrap();
    assert_eq!(back, names);
}

/// A namer over a bare copy of the state (a trace's) names everything as the core's does.
#[test]
fn a_bare_state_is_named_as_the_core_names_it() {
    let mut core = world();
    run(&mut core, |c| {
        c.admin_apply(anp("first", 3)).unwrap();
        c.admin_apply(banp()).unwrap();
    });
    let state = core.state().clone();
    let (indexed, bare) = (core.rule_namer(), RuleNamer::of_state(&state));
    let mut rules: Vec<RuleRef> = conj_ids_in_flows(&core)
        .into_iter()
        .map(|(dir, id)| allow(dir, id))
        .collect();
    for dir in [Dir::Ingress, Dir::Egress] {
        for (tier, verdict, id) in [
            (AuditTier::NetworkPolicy, Verdict::Deny, 101),
            (AuditTier::NetworkPolicy, Verdict::Deny, 102),
            (AuditTier::NetworkPolicy, Verdict::Deny, 999),
            (AuditTier::NetworkPolicy, Verdict::Allow, 9_999),
            (AuditTier::Admin, Verdict::Deny, 3 * 128 + 1),
            (AuditTier::Admin, Verdict::Pass, 3 * 128 + 3),
            (AuditTier::Baseline, Verdict::Deny, 1),
        ] {
            rules.push(RuleRef {
                tier,
                dir,
                verdict,
                id,
            });
        }
    }
    let mut named = 0;
    for rule in rules {
        let names = indexed.rule(rule);
        named += usize::from(names.is_some());
        assert_eq!(names, bare.rule(rule), "{rule}");
    }
    assert!(named >= 10, "{named} rules named");
    for ip in [[10, 128, 0, 5], [10, 128, 2, 7], [10, 128, 0, 99]] {
        let ip = Ipv4Addr::from(ip);
        assert_eq!(indexed.pod(ip), bare.pod(ip), "{ip}");
    }
}
