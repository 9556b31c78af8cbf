//! The policy audit's flows in the core: every verdict flow is named by its rule's cookie;
//! an audited one hands the rule's key to table 24 before its own actions; table 24 has one
//! flow per audited rule; a batch reports the meters it needs before its bundle and those it
//! no longer needs after it.

use super::*;
use crate::sdn::audit::{AuditSet, AuditTier, Dir, RuleRef, Verdict};
use crate::sdn::core::MeterChanges;
use crate::sdn::objects::{Namespace, PodInfo};
use crate::sdn::policy::admin::parse_admin_policy;
use crate::sdn::policy::networkpolicy::model::NetPol;
use crate::sdn::policy::networkpolicy::parse_netpol;
use crate::sdn::types::Pod;

const TARGET: Ipv4Addr = Ipv4Addr::new(10, 128, 0, 5);

fn namespace_x(audit: &str) -> Namespace {
    Namespace {
        name: "x".into(),
        vnid: vnid(11),
        labels: Default::default(),
        audit: audit.parse().unwrap(),
    }
}

/// Policy `name` of x selecting app=web, with `ingress` rules and the audit annotation
/// `audit` (None: none).
fn policy(name: &str, ingress: &str, audit: Option<&str>) -> NetPol {
    let annotations = audit
        .map(|a| format!(r#","annotations":{{"ofnode.io/audit":"{a}"}}"#))
        .unwrap_or_default();
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"{name}","namespace":"x"{annotations}}},
            "spec":{{"podSelector":{{"matchLabels":{{"app":"web"}}}},"ingress":{ingress}}}}}"#
    );
    parse_netpol(json.as_bytes()).unwrap()
}

/// From pods labelled app=db on TCP 80.
const FROM_DB: &str =
    r#"[{"from":[{"podSelector":{"matchLabels":{"app":"db"}}}],"ports":[{"port":80}]}]"#;

/// A node with namespace x (auditing `audit`), its local pod app=web at 10.128.0.5 and a
/// remote pod app=db.
fn node(audit: &str) -> Core {
    let mut core = set_up(Mode::NetworkPolicy);
    run(&mut core, |c| c.namespace_set(namespace_x(audit)).unwrap());
    let pod = Pod {
        veth: Some("vweb".parse().unwrap()),
        ip: TARGET,
        mac: MacAddr([0x0a, 0x58, 0x0a, 0x80, 0, 5]),
        sandbox: format!("{:064x}", 5).parse().unwrap(),
        vnid: Vnid::GLOBAL,
        ofport: 5,
    };
    let web = [("app".to_string(), "web".to_string())].into();
    run(&mut core, |c| {
        c.pod_attach(key_in("x", TARGET), pod, web).unwrap()
    });
    let db = PodInfo {
        labels: [("app".to_string(), "db".to_string())].into(),
        ips: vec!["10.130.0.7".parse().unwrap()],
        local: false,
        ports: Vec::new(),
    };
    run(&mut core, |c| {
        c.remote_pod_set(key_in("x", Ipv4Addr::new(10, 130, 0, 7)), db)
            .unwrap()
    });
    core
}

fn rule(verdict: Verdict, id: u32) -> RuleRef {
    RuleRef {
        tier: AuditTier::NetworkPolicy,
        dir: Dir::Ingress,
        verdict,
        id,
    }
}

/// The held flow whose text contains `part` (exactly one).
#[track_caller]
fn flow(core: &Core, part: &str) -> String {
    let found: Vec<String> = core
        .flows()
        .iter()
        .map(Flow::describe)
        .filter(|f| f.contains(part))
        .collect();
    assert_eq!(found.len(), 1, "one flow with {part:?}: {found:?}");
    found[0].clone()
}

/// Table 24's flows, as printed.
fn audit_flows(core: &Core) -> BTreeSet<String> {
    core.flows()
        .iter()
        .filter(|f| f.table() == 24)
        .map(Flow::describe)
        .collect()
}

fn audit_flow(rule: RuleRef) -> String {
    let userdata: Vec<String> = rule.userdata().iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "table=24, priority=100,ct_state=+new+trk,reg4={:#x} actions=controller(max_len=128,userdata={},meter_id={})",
        rule.key(),
        userdata.join("."),
        rule.key()
    )
}

fn meters(added: &[RuleRef], removed: &[RuleRef]) -> MeterChanges {
    MeterChanges {
        added: added.iter().map(|r| r.key()).collect(),
        removed: removed.iter().map(|r| r.key()).collect(),
    }
}

#[test]
fn verdict_flows_are_named_by_their_rule_and_audited_ones_go_through_table_24() {
    let mut core = node("none");
    let (_, effects) = run(&mut core, |c| {
        c.netpol_apply(policy("from-db", FROM_DB, None)).unwrap()
    });
    assert_eq!(effects.meters, MeterChanges::default());
    let allow = rule(Verdict::Allow, 1);
    // The isolation is named by the namespace's VNID.
    let isolation = rule(Verdict::Deny, 11);
    let conj = format!(
        "cookie={:#x}, table=80, priority=200,conj_id=1,ip actions=goto_table:81",
        allow.cookie()
    );
    let drop = format!(
        "cookie={:#x}, table=80, priority=100,ip,nw_dst=10.128.0.5 actions=drop",
        isolation.cookie()
    );
    assert_eq!(flow(&core, "conj_id=1,"), conj);
    assert_eq!(
        flow(&core, "table=80, priority=100,ip,nw_dst=10.128.0.5"),
        drop
    );
    assert!(audit_flows(&core).is_empty());
    // Clause flows decide nothing: no cookie.
    assert!(flow(&core, "conjunction(1,1/3)").starts_with("table=80,"));

    // The namespace audits allow and deny: its policy's verdict flows are recomputed.
    let (_, effects) = run(&mut core, |c| {
        c.namespace_set(namespace_x("allow,deny")).unwrap()
    });
    assert_eq!(effects.meters, meters(&[allow, isolation], &[]));
    assert_eq!(
        flow(&core, "conj_id=1,"),
        conj.replace("actions=", "actions=load:0x1->NXM_NX_REG4[],resubmit(,24),")
    );
    assert_eq!(
        flow(&core, "table=80, priority=100,ip,nw_dst=10.128.0.5"),
        drop.replace(
            "actions=drop",
            "actions=load:0x800000b->NXM_NX_REG4[],resubmit(,24)"
        )
    );
    assert_eq!(
        audit_flows(&core),
        [allow, isolation].map(audit_flow).into()
    );
    assert_eq!(core.audited_keys(), [allow.key(), isolation.key()].into());

    // The policy's own annotation wins over its namespace's: deny alone.
    let (_, effects) = run(&mut core, |c| {
        c.netpol_apply(policy("from-db", FROM_DB, Some("deny")))
            .unwrap()
    });
    assert_eq!(effects.meters, meters(&[], &[allow]));
    assert_eq!(flow(&core, "conj_id=1,"), conj);
    assert_eq!(audit_flows(&core), [audit_flow(isolation)].into());

    // Gone: its flows, then its meters.
    let (_, effects) = run(&mut core, |c| c.netpol_del("x", "from-db").unwrap());
    assert_eq!(effects.meters, meters(&[], &[isolation]));
    assert!(audit_flows(&core).is_empty());
}

#[test]
fn a_plain_allow_shared_by_rules_is_named_by_the_smallest_audited_key_else_the_smallest() {
    let mut core = node("none");
    // Two policies allowing every source to the pod: one plain allow flow for both.
    for name in ["a", "b"] {
        run(&mut core, |c| {
            c.netpol_apply(policy(name, "[{}]", None)).unwrap()
        });
    }
    let id = |name: &str| core.state().netpols[&format!("x/{name}")].ingress_ids[0];
    let (a, b) = (id("a"), id("b"));
    assert!(a < b, "{a} {b}");
    let plain = "table=80, priority=210,ip,nw_dst=10.128.0.5 actions=goto_table:81";
    let named = |rule: RuleRef| format!("cookie={:#x}, {plain}", rule.cookie());
    assert_eq!(flow(&core, "priority=210,"), named(rule(Verdict::Allow, a)));

    // Only b audits allow: the flow is b's, audited.
    run(&mut core, |c| {
        c.netpol_apply(policy("b", "[{}]", Some("allow"))).unwrap()
    });
    let b_rule = rule(Verdict::Allow, b);
    assert_eq!(
        flow(&core, "priority=210,"),
        named(b_rule).replace(
            "actions=",
            &format!(
                "actions=load:{:#x}->NXM_NX_REG4[],resubmit(,24),",
                b_rule.key()
            )
        )
    );
    assert_eq!(audit_flows(&core), [audit_flow(b_rule)].into());
}

#[test]
fn admin_tier_rules_are_named_by_their_first_part_and_audited_by_their_own_annotation() {
    let mut core = node("allow,deny");
    let yaml = "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
        metadata: {name: guard, annotations: {ofnode.io/audit: deny}}\nspec:\n  priority: 3\n\
        \x20 subject: {namespaces: {}}\n  ingress:\n\
        \x20 - {name: deny-db, action: Deny, from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: db}}}}]}\n\
        \x20 - {name: allow-all, action: Allow, from: [{namespaces: {}}]}\n";
    let anp = parse_admin_policy(yaml.as_bytes()).unwrap();
    assert_eq!(anp.audit, "deny".parse::<AuditSet>().unwrap());
    let (_, effects) = run(&mut core, |c| c.admin_apply(anp).unwrap());
    // conjunction ids of priority 3: 3·2·64 + 2·index + 1.
    let deny = RuleRef {
        tier: AuditTier::Admin,
        dir: Dir::Ingress,
        verdict: Verdict::Deny,
        id: 385,
    };
    let allow = RuleRef {
        verdict: Verdict::Allow,
        id: 387,
        ..deny
    };
    assert_eq!(effects.meters, meters(&[deny], &[]));
    assert_eq!(
        flow(&core, "conj_id=385,"),
        format!(
            "cookie={:#x}, table=82, priority=64808,conj_id=385,ip actions=load:{:#x}->NXM_NX_REG4[],resubmit(,24)",
            deny.cookie(),
            deny.key()
        )
    );
    assert_eq!(
        flow(&core, "conj_id=387,"),
        format!(
            "cookie={:#x}, table=82, priority=64807,conj_id=387,ip actions=resubmit(,81)",
            allow.cookie()
        )
    );
    assert!(audit_flows(&core).contains(&audit_flow(deny)));
    assert!(!audit_flows(&core).contains(&audit_flow(allow)));
}

#[test]
fn state_written_before_the_audit_loads_and_audits_nothing() {
    let old: Namespace = serde_json::from_str(r#"{"name":"x","vnid":11,"labels":{}}"#).unwrap();
    assert_eq!(old.audit, AuditSet::NONE);
    // Nothing audited is written as before: no field.
    assert!(!serde_json::to_string(&old).unwrap().contains("audit"));
    let old: NetPol =
        serde_json::from_str(r#"{"namespace":"x","name":"p","pod_selector":{},"ingress":[]}"#)
            .unwrap();
    assert_eq!(old.audit, None);
    let audited = namespace_x("deny");
    let text = serde_json::to_string(&audited).unwrap();
    assert!(text.contains(r#""audit":"deny""#), "{text}");
    assert_eq!(serde_json::from_str::<Namespace>(&text).unwrap(), audited);
    // A bad value in a file is refused with the setting's message.
    let err = serde_json::from_str::<Namespace>(r#"{"name":"x","vnid":11,"audit":"log"}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#"unknown value "log""#), "{err}");
}
