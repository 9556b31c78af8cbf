//! A minimal [`NameSource`] over the desired state, until the per-rule counters' resolver
//! (`core/audit_names.rs`) takes its place: a NetworkPolicy rule by its first conjunction id,
//! an isolation drop by its namespace's VNID, an admin tier rule by its conjunction id
//! (`produce/admin.rs`: `priority * 2 * MAX_RULES + 2 * index + part + 1`), a pod by address.
//!
//! An isolation drop's `isolated_by` lists every policy of the namespace that isolates that
//! side, not only those selecting the pod that was judged.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use super::names::{NameSource, Names, RuleNames};
use crate::sdn::audit::{AuditTier, Dir, RuleRef, Verdict};
use crate::sdn::core::Core;
use crate::sdn::policy::admin::{Tier, MAX_RULES};
use crate::sdn::state::NodeState;

#[derive(Debug, Default)]
pub struct InterimNames;

impl NameSource for InterimNames {
    fn names(&self, core: &Core, rules: &[RuleRef], ips: &[Ipv4Addr]) -> Names {
        let state = core.state();
        let rules = rules
            .iter()
            .filter_map(|rule| Some((rule.key(), rule_names(state, *rule)?)))
            .collect();
        Names {
            rules,
            pods: pods_by_ip(state, ips),
        }
    }
}

fn rule_names(state: &NodeState, rule: RuleRef) -> Option<RuleNames> {
    match (rule.tier, rule.verdict) {
        (AuditTier::NetworkPolicy, Verdict::Deny) => isolation(state, rule.dir, rule.id),
        (AuditTier::NetworkPolicy, _) => netpol_rule(state, rule.dir, rule.id),
        (AuditTier::Admin | AuditTier::Baseline, _) => admin_rule(state, rule),
    }
}

fn netpol_rule(state: &NodeState, dir: Dir, id: u32) -> Option<RuleNames> {
    state.netpols.values().find_map(|stored| {
        let (rules, ids) = match dir {
            Dir::Ingress => (stored.policy.ingress.as_ref()?, &stored.ingress_ids),
            Dir::Egress => (stored.policy.egress.as_ref()?, &stored.egress_ids),
        };
        let mut first = 0;
        for (index, rule) in rules.iter().enumerate() {
            let n = rule.conjunctions();
            if ids.get(first..first + n)?.contains(&id) {
                return Some(RuleNames {
                    namespace: Some(stored.policy.namespace.clone()),
                    policy: Some(stored.policy.name.clone()),
                    rule: format!("{}[{index}]", dir.as_str()),
                    isolated_by: Vec::new(),
                });
            }
            first += n;
        }
        None
    })
}

fn isolation(state: &NodeState, dir: Dir, vnid: u32) -> Option<RuleNames> {
    let namespace = state.namespaces.values().find(|ns| ns.vnid.get() == vnid)?;
    let isolated_by = state
        .netpols
        .values()
        .map(|stored| &stored.policy)
        .filter(|p| p.namespace == namespace.name)
        .filter(|p| match dir {
            Dir::Ingress => p.ingress.is_some(),
            Dir::Egress => p.egress.is_some(),
        })
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    Some(RuleNames {
        namespace: Some(namespace.name.clone()),
        policy: None,
        rule: "default-deny".into(),
        isolated_by,
    })
}

fn admin_rule(state: &NodeState, rule: RuleRef) -> Option<RuleNames> {
    let span = 2 * MAX_RULES as u32;
    let offset = rule.id.checked_sub(1)?;
    let (priority, index) = (offset / span, (offset % span) / 2);
    state.admin_policies.values().find_map(|policy| {
        let matches = match (policy.tier, rule.tier) {
            (Tier::Admin { priority: p }, AuditTier::Admin) => u32::from(p) == priority,
            (Tier::Baseline, AuditTier::Baseline) => priority == 0,
            _ => false,
        };
        if !matches {
            return None;
        }
        let rules = match rule.dir {
            Dir::Ingress => &policy.ingress,
            Dir::Egress => &policy.egress,
        };
        let found = rules.get(index as usize)?;
        let name = if found.name.is_empty() {
            format!("{}[{index}]", rule.dir.as_str())
        } else {
            found.name.clone()
        };
        Some(RuleNames {
            namespace: None,
            policy: Some(policy.name.clone()),
            rule: name,
            isolated_by: Vec::new(),
        })
    })
}

fn pods_by_ip(state: &NodeState, ips: &[Ipv4Addr]) -> HashMap<Ipv4Addr, String> {
    let wanted: BTreeSet<IpAddr> = ips.iter().map(|ip| IpAddr::V4(*ip)).collect();
    let mut found = HashMap::new();
    for (key, info) in &state.pod_infos {
        for ip in &info.ips {
            if let (true, IpAddr::V4(v4)) = (wanted.contains(ip), ip) {
                found.insert(*v4, key.to_string());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::policy::admin::parse_admin_policy;

    fn anp(name: &str, priority: u16) -> crate::sdn::policy::admin::AdminPolicy {
        let yaml = format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
             metadata: {{name: {name}}}\nspec:\n  priority: {priority}\n\
             \x20 subject: {{namespaces: {{}}}}\n  ingress:\n\
             \x20 - {{name: deny-80, action: Deny, from: [{{namespaces: {{}}}}], ports: [{{portNumber: {{port: 80}}}}]}}\n\
             \x20 - {{action: Pass, from: [{{namespaces: {{}}}}]}}\n  egress:\n\
             \x20 - {{name: allow-docs, action: Allow, to: [{{networks: [192.0.2.0/24]}}]}}\n"
        );
        parse_admin_policy(yaml.as_bytes()).unwrap()
    }

    fn rule(tier: AuditTier, dir: Dir, verdict: Verdict, id: u32) -> RuleRef {
        RuleRef {
            tier,
            dir,
            verdict,
            id,
        }
    }

    #[test]
    fn an_admin_rule_is_found_by_its_conjunction_id() {
        let mut state = NodeState::default();
        for policy in [anp("low", 3), anp("high", 7)] {
            state.admin_policies.insert(policy.key(), policy);
        }
        let span = 2 * MAX_RULES as u32;
        let names = |r: RuleRef| rule_names(&state, r).map(|n| (n.policy, n.rule));
        let admin = AuditTier::Admin;
        assert_eq!(
            names(rule(admin, Dir::Ingress, Verdict::Deny, 7 * span + 1)),
            Some((Some("high".into()), "deny-80".into()))
        );
        assert_eq!(
            names(rule(admin, Dir::Ingress, Verdict::Pass, 3 * span + 2 + 1)),
            Some((Some("low".into()), "ingress[1]".into())),
            "an unnamed rule by its index"
        );
        assert_eq!(
            names(rule(admin, Dir::Egress, Verdict::Allow, 3 * span + 1)),
            Some((Some("low".into()), "allow-docs".into()))
        );
        assert_eq!(
            names(rule(admin, Dir::Ingress, Verdict::Deny, 5 * span + 1)),
            None
        );
        assert_eq!(names(rule(admin, Dir::Ingress, Verdict::Deny, 0)), None);
        let baseline = rule(AuditTier::Baseline, Dir::Ingress, Verdict::Deny, 1);
        assert_eq!(names(baseline), None, "no BANP here");
    }
}
