//! Egress network policy: the branches of the seed's UpdateEgressNetworkPolicyRules as a pure
//! function from a VNID's stored policy input (with its DNS answers) to table 100's flows.
//!
//! Unlike the seed, the flows are a final set: the node installs them in one atomic bundle, so
//! the seed's temporary `cookie=1, priority=65535` drop flow is never needed.

use super::flows::{egress_drop_all_flow, egress_flow};
use super::state::EgressState;
use super::types::{Cidr, EgressNetworkPolicy, EgressRuleType, Vnid};

/// `ns1:p1, ns2:p2`, as the seed's policyNames writes them.
pub fn policy_names(policies: &[EgressNetworkPolicy]) -> String {
    let names: Vec<String> = policies
        .iter()
        .map(|p| format!("{}:{}", p.namespace, p.name))
        .collect();
    names.join(", ")
}

/// The error for policies in the global VNID, which the seed ignores (nothing is changed).
pub fn global_vnid_error(policies: &[EgressNetworkPolicy]) -> String {
    format!(
        "EgressNetworkPolicy in global network namespace is not allowed ({}); ignoring",
        policy_names(policies)
    )
}

/// Table 100's flows for `vnid`, and the seed's input error when the policy cannot be honoured
/// (then the flows drop all of the VNID's outgoing traffic and the error says so).
pub fn egress_flows(vnid: Vnid, entry: &EgressState) -> (Vec<String>, Option<String>) {
    let drop_all = || vec![egress_drop_all_flow(vnid)];
    if entry.namespaces.len() > 1 {
        // Shared namespaces share a VNID, so one namespace's policy would bind the others.
        let error = format!(
            "EgressNetworkPolicy not allowed in shared NetNamespace ({}); dropping all traffic",
            entry.namespaces.join(", ")
        );
        return (drop_all(), Some(error));
    }
    let [policy] = entry.policies.as_slice() else {
        // Several policies could contradict each other depending on order.
        let error = format!(
            "multiple EgressNetworkPolicies in same network namespace ({}) is not allowed; dropping all traffic",
            policy_names(&entry.policies)
        );
        return (drop_all(), Some(error));
    };
    if let (Some(reason), Some(_)) = (&entry.resolver_error, entry.dns_names().next()) {
        let namespace = entry
            .namespaces
            .first()
            .unwrap_or(&policy.namespace)
            .clone();
        let error = format!(
            "DNS resolver failed: {reason}, dropping all traffic for namespace: {namespace:?}"
        );
        return (drop_all(), Some(error));
    }
    (rule_flows(vnid, policy, entry), None)
}

/// One flow per selector of each rule; earlier rules get higher priorities.
fn rule_flows(vnid: Vnid, policy: &EgressNetworkPolicy, entry: &EgressState) -> Vec<String> {
    let rules = &policy.spec.egress;
    let mut flows = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let priority = rules.len() - i;
        let allow = rule.rule_type == EgressRuleType::Allow;
        let selectors: Vec<Cidr> = match (&rule.to.cidr_selector, &rule.to.dns_name) {
            (Some(cidr), _) => vec![*cidr],
            (None, Some(name)) => entry
                .dns
                .get(name)
                .map(|ips| ips.iter().map(|ip| Cidr::host(*ip)).collect())
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        for selector in selectors {
            flows.push(egress_flow(
                vnid,
                priority,
                destination(policy, selector),
                allow,
            ));
        }
    }
    flows
}

/// `None` (match any destination) for 0.0.0.0/0, and for 0.0.0.0/32, which the seed corrects
/// to 0.0.0.0/0 with a warning.
fn destination(policy: &EgressNetworkPolicy, selector: Cidr) -> Option<Cidr> {
    if selector == Cidr::ANY {
        return None;
    }
    if selector.addr().is_unspecified() && selector.prefix() == 32 {
        tracing::warn!(
            "Correcting CIDRSelector '0.0.0.0/32' to '0.0.0.0/0' in EgressNetworkPolicy {}:{}",
            policy.namespace,
            policy.name
        );
        return None;
    }
    Some(selector)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// One policy of `rules` (JSON rule objects, comma-separated).
    pub(crate) fn policy(namespace: &str, name: &str, rules: &str) -> EgressNetworkPolicy {
        let text = format!(
            r#"{{"namespace":"{namespace}","name":"{name}","spec":{{"egress":[{rules}]}}}}"#
        );
        serde_json::from_str(&text).unwrap()
    }

    /// A VNID's stored policy input, without DNS answers.
    pub(crate) fn entry(namespaces: &[&str], policies: Vec<EgressNetworkPolicy>) -> EgressState {
        EgressState {
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            policies,
            dns: BTreeMap::new(),
            resolver_error: None,
        }
    }

    const RULES: &str = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}},
        {"type":"Allow","to":{"dnsName":"example.test"}},
        {"type":"Deny","to":{"cidrSelector":"0.0.0.0/32"}}"#;

    #[test]
    fn single_policy_rules_with_dns() {
        let vnid = Vnid::new(42).unwrap();
        let mut e = entry(&["ns1"], vec![policy("ns1", "p1", RULES)]);
        e.dns.insert(
            "example.test".into(),
            vec![
                "198.51.100.7".parse().unwrap(),
                "198.51.100.8".parse().unwrap(),
            ],
        );
        let (flows, error) = egress_flows(vnid, &e);
        assert_eq!(error, None);
        assert_eq!(
            flows,
            vec![
                "table=100, reg0=42, priority=3, ip, nw_dst=192.0.2.0/24, actions=output:2",
                "table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.7/32, actions=output:2",
                "table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.8/32, actions=output:2",
                "table=100, reg0=42, priority=1, ip, actions=drop",
            ]
        );
    }

    #[test]
    fn error_branches_drop_everything() {
        let vnid = Vnid::new(7).unwrap();
        let drop = vec!["table=100, reg0=7, priority=1, actions=drop".to_string()];
        let shared = entry(&["a", "b"], vec![policy("a", "p", RULES)]);
        assert_eq!(
            egress_flows(vnid, &shared),
            (drop.clone(), Some("EgressNetworkPolicy not allowed in shared NetNamespace (a, b); dropping all traffic".into()))
        );
        let several = entry(
            &["a"],
            vec![policy("a", "p1", RULES), policy("a", "p2", RULES)],
        );
        assert_eq!(
            egress_flows(vnid, &several),
            (drop.clone(), Some("multiple EgressNetworkPolicies in same network namespace (a:p1, a:p2) is not allowed; dropping all traffic".into()))
        );
        let mut resolver = entry(&["a"], vec![policy("a", "p", RULES)]);
        resolver.resolver_error = Some("no nameservers".into());
        assert_eq!(
            egress_flows(vnid, &resolver),
            (drop, Some("DNS resolver failed: no nameservers, dropping all traffic for namespace: \"a\"".into()))
        );
    }

    #[test]
    fn resolver_error_ignored_without_dns_rules() {
        let vnid = Vnid::new(7).unwrap();
        let rules = r#"{"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;
        let mut e = entry(&["a"], vec![policy("a", "p", rules)]);
        e.resolver_error = Some("broken".into());
        assert_eq!(
            egress_flows(vnid, &e),
            (
                vec!["table=100, reg0=7, priority=1, ip, actions=drop".to_string()],
                None
            )
        );
    }
}
