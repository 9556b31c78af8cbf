//! Per-rule counters without a switch: the verdict flows' counts summed per rule (the flows
//! of the core's own policies, given the cookies their producer gives them), named, ordered
//! as the tiers judge, and exported with a bounded number of series.

use std::time::UNIX_EPOCH;

use ofnode_proto::Field;

use super::*;
use crate::sdn::audit::{Dir, Verdict};
use crate::sdn::core::audit_names::tests::{anp, banp, world};
use crate::sdn::core::tests::run;
use crate::sdn::core::Core;
use crate::sdn::flowmod::table;
use crate::sdn::layout::{POLICY, POLICY_CONNTRACK};
use crate::sdn::table::installed;

/// A verdict flow of `rule` as the switch reports it, having counted `packets` of 100 bytes.
fn counted(rule: RuleRef, packets: u64) -> FlowStats {
    let mut fm = table(POLICY).priority(100).drop();
    fm.cookie = rule.cookie();
    FlowStats {
        packet_count: packets,
        byte_count: packets * 100,
        ..installed(&fm)
    }
}

fn rule(tier: AuditTier, dir: Dir, verdict: Verdict, id: u32) -> RuleRef {
    RuleRef {
        tier,
        dir,
        verdict,
        id,
    }
}

/// The core's NetworkPolicy conjunction flows (tables 21 and 80, `conj_id=N`) with the cookie
/// their producer gives them: the rule's first conjunction id; `packets` each.
fn netpol_verdict_flows(core: &Core, packets: u64) -> Vec<FlowStats> {
    core.flows()
        .iter()
        .filter_map(|flow| {
            let mut fm = flow.to_add().ok()?;
            let dir = match fm.table_id {
                POLICY => Dir::Ingress,
                POLICY_CONNTRACK => Dir::Egress,
                _ => return None,
            };
            let id = fm.match_.exact(Field::ConjId)? as u32;
            let key = core.store().netpol_of_conj_id(id)?;
            let stored = &core.state().netpols[key];
            let (rules, ids) = match dir {
                Dir::Ingress => (stored.policy.ingress.as_deref()?, &stored.ingress_ids),
                Dir::Egress => (stored.policy.egress.as_deref()?, &stored.egress_ids),
            };
            // The first id of the rule holding `id`.
            let mut first = 0;
            let position = ids.iter().position(|held| *held == id)?;
            for r in rules {
                if position < first + r.conjunctions() {
                    break;
                }
                first += r.conjunctions();
            }
            fm.cookie = rule(AuditTier::NetworkPolicy, dir, Verdict::Allow, ids[first]).cookie();
            Some(FlowStats {
                packet_count: packets,
                byte_count: packets * 100,
                ..installed(&fm)
            })
        })
        .collect()
}

#[test]
fn a_rules_flows_are_summed_and_foreign_flows_ignored() {
    let core = world();
    let mut flows = netpol_verdict_flows(&core, 3);
    // ns1/web: ingress[0] has two conjunction flows, ingress[1] and egress[0] one each.
    assert_eq!(flows.len(), 4, "{flows:#?}");
    let mut foreign = installed(&table(POLICY).priority(50).drop());
    foreign.packet_count = 1_000;
    flows.push(foreign);
    let tallied = tally(&flows);
    let web = &core.state().netpols["ns1/web"];
    let first = rule(
        AuditTier::NetworkPolicy,
        Dir::Ingress,
        Verdict::Allow,
        web.ingress_ids[0],
    );
    assert_eq!(
        tallied[&first],
        RuleTraffic {
            packets: 6,
            bytes: 600,
            flows: 2
        }
    );
    assert_eq!(tallied.len(), 3);
    assert_eq!(tallied.values().map(|t| t.packets).sum::<u64>(), 12);
}

#[test]
fn rules_are_named_in_the_order_the_tiers_judge() {
    let mut core = world();
    run(&mut core, |c| {
        c.admin_apply(anp("first", 3)).unwrap();
        c.admin_apply(banp()).unwrap();
    });
    let web = core.state().netpols["ns1/web"].clone();
    let flows = [
        counted(rule(AuditTier::Baseline, Dir::Egress, Verdict::Deny, 1), 5),
        counted(
            rule(AuditTier::NetworkPolicy, Dir::Ingress, Verdict::Deny, 101),
            4,
        ),
        counted(
            rule(
                AuditTier::NetworkPolicy,
                Dir::Egress,
                Verdict::Allow,
                web.egress_ids[0],
            ),
            3,
        ),
        // A rule deleted since the dump.
        counted(
            rule(AuditTier::NetworkPolicy, Dir::Egress, Verdict::Allow, 9_999),
            2,
        ),
        counted(
            rule(AuditTier::Admin, Dir::Ingress, Verdict::Deny, 3 * 128 + 1),
            1,
        ),
    ];
    let rules = named(&tally(&flows), &core.rule_namer());
    let shown: Vec<String> = rules
        .iter()
        .map(|r| format!("{} = {}", r.names, r.traffic.packets))
        .collect();
    assert_eq!(
        shown,
        [
            "admin anp/first (priority 3) ingress[0] \"deny-ns2\": deny = 1",
            "networkpolicy ns1 ingress default-deny: deny (isolated by ns1/ingress-only, ns1/web) = 4",
            "networkpolicy ns1/web egress[0]: allow = 3",
            "baseline banp/default egress[0] \"deny-all\": deny = 5",
            "networkpolicy - #9999: allow = 2",
        ]
    );
    assert_eq!(rules[2].key, rules[2].names_key());
}

impl RuleCounters {
    fn names_key(&self) -> u32 {
        let rule = RuleRef::of_key(self.key).unwrap();
        assert_eq!(
            (rule.tier, rule.dir, rule.verdict),
            (self.names.tier, self.names.direction, self.names.verdict)
        );
        rule.key()
    }
}

fn snapshot(core: &Core, flows: &[FlowStats]) -> RuleSnapshot {
    RuleSnapshot {
        polled_at_unix_ms: unix_ms(UNIX_EPOCH + Duration::from_secs(7)),
        rules: named(&tally(flows), &core.rule_namer()),
    }
}

fn series<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .collect()
}

#[test]
fn metrics_name_each_rule_and_sum_the_rest_into_other() {
    let mut core = world();
    run(&mut core, |c| c.admin_apply(anp("first", 3)).unwrap());
    let mut flows = netpol_verdict_flows(&core, 3);
    flows.push(counted(
        rule(AuditTier::NetworkPolicy, Dir::Ingress, Verdict::Deny, 101),
        4,
    ));
    flows.push(counted(
        rule(AuditTier::Admin, Dir::Egress, Verdict::Allow, 3 * 128 + 1),
        1,
    ));
    flows.push(counted(
        rule(AuditTier::NetworkPolicy, Dir::Egress, Verdict::Allow, 9_999),
        2,
    ));
    let snap = snapshot(&core, &flows);
    let mut all = String::new();
    snap.render(100, &mut all);
    let packets = series(&all, "ofnode_policy_rule_packets_total");
    let expected = [
        r#"ofnode_policy_rule_packets_total{namespace="",policy="anp/first",rule="egress[0]",verdict="allow"} 1"#,
        r#"ofnode_policy_rule_packets_total{namespace="ns1",policy="",rule="ingress:default-deny",verdict="deny"} 4"#,
        r#"ofnode_policy_rule_packets_total{namespace="ns1",policy="web",rule="egress[0]",verdict="allow"} 3"#,
        r#"ofnode_policy_rule_packets_total{namespace="ns1",policy="web",rule="ingress[0]",verdict="allow"} 6"#,
        r#"ofnode_policy_rule_packets_total{namespace="ns1",policy="web",rule="ingress[1]",verdict="allow"} 3"#,
        // The rule the node no longer holds.
        r#"ofnode_policy_rule_packets_total{namespace="",policy="(other)",rule="",verdict=""} 2"#,
    ];
    assert_eq!(packets, expected, "{all}");
    assert!(all.contains(
        "ofnode_policy_rule_bytes_total{namespace=\"ns1\",policy=\"web\",rule=\"ingress[0]\",verdict=\"allow\"} 600\n"
    ));
    assert!(
        all.contains("\nofnode_policy_rule_metrics_omitted 1\n"),
        "{all}"
    );
    assert!(all.contains("ofnode_policy_rule_counters_polled_timestamp_seconds 7\n"));

    // Capped at 2: the first two in label order stay, the other three rules join (other).
    let mut capped = String::new();
    snap.render(2, &mut capped);
    let packets = series(&capped, "ofnode_policy_rule_packets_total");
    assert_eq!(packets.len(), 3, "{capped}");
    assert_eq!(packets[..2], expected[..2]);
    assert_eq!(
        packets[2],
        r#"ofnode_policy_rule_packets_total{namespace="",policy="(other)",rule="",verdict=""} 14"#
    );
    assert!(
        capped.contains("\nofnode_policy_rule_metrics_omitted 4\n"),
        "{capped}"
    );
    assert_eq!(series(&capped, "ofnode_policy_rule_bytes_total").len(), 3);
}

#[test]
fn counters_serialize_flat_for_the_api() {
    let core = world();
    let flows = [counted(
        rule(AuditTier::NetworkPolicy, Dir::Ingress, Verdict::Deny, 101),
        4,
    )];
    let snap = snapshot(&core, &flows);
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "polled_at_unix_ms": 7000,
            "rules": [{
                "tier": "networkpolicy", "direction": "ingress", "verdict": "deny",
                "namespace": "ns1", "policy": null, "rule": "default-deny",
                "isolated_by": ["ns1/ingress-only", "ns1/web"],
                "key": flows_key(101), "packets": 4, "bytes": 400, "flows": 1
            }]
        })
    );
    let back: RuleSnapshot = serde_json::from_value(json).unwrap();
    assert_eq!(back, snap);
}

fn flows_key(vnid: u32) -> u32 {
    rule(AuditTier::NetworkPolicy, Dir::Ingress, Verdict::Deny, vnid).key()
}

#[test]
fn the_request_asks_for_verdict_flows_in_every_table() {
    let request = verdict_flows_request();
    assert_eq!(request.table_id, ofnode_proto::OFPTT_ALL);
    assert_eq!(
        (request.cookie, request.cookie_mask),
        (COOKIE_TAG, COOKIE_TAG_MASK)
    );
}
