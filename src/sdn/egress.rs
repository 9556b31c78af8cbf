//! Egress network policy: the branches of the seed's UpdateEgressNetworkPolicyRules as a pure
//! function from a VNID's stored policy input (with its DNS answers) to table 100's flows.
//!
//! Unlike the seed, the flows are a final set: the node installs them in one atomic bundle, so
//! the seed's temporary `cookie=1, priority=65535` drop flow is never needed.

use ofnode_proto::FlowMod;

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

/// Table 100's flows for one VNID's policy input, and what the seed would say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressFlows {
    pub flows: Vec<FlowMod>,
    /// The seed's input error when the policy cannot be honoured (the flows then drop all of
    /// the VNID's outgoing traffic and the error says so).
    pub error: Option<String>,
    /// The policy (`ns:name`) of each `0.0.0.0/32` selector read as `0.0.0.0/0`, which the seed
    /// warns about (the caller says it: this is pure).
    pub corrected: Vec<String>,
}

/// Table 100's flows for `vnid`, in the seed's order of checks.
pub fn egress_flows(vnid: Vnid, entry: &EgressState) -> EgressFlows {
    let drop_all = |error: String, corrected: Vec<String>| EgressFlows {
        flows: vec![egress_drop_all_flow(vnid)],
        error: Some(error),
        corrected,
    };
    if entry.namespaces.len() > 1 {
        // Shared namespaces share a VNID, so one namespace's policy would bind the others.
        let error = format!(
            "EgressNetworkPolicy not allowed in shared NetNamespace ({}); dropping all traffic",
            entry.namespaces.join(", ")
        );
        return drop_all(error, Vec::new());
    }
    let [policy] = entry.policies.as_slice() else {
        // Several policies could contradict each other depending on order.
        let error = format!(
            "multiple EgressNetworkPolicies in same network namespace ({}) is not allowed; dropping all traffic",
            policy_names(&entry.policies)
        );
        return drop_all(error, Vec::new());
    };
    let Ok(rules) = u16::try_from(policy.spec.egress.len()) else {
        // Each rule has its own priority, and OpenFlow's are 16 bits.
        let error = format!(
            "EgressNetworkPolicy {}:{} has {} rules, more than the {} priorities a flow can have; dropping all traffic",
            policy.namespace,
            policy.name,
            policy.spec.egress.len(),
            u16::MAX
        );
        return drop_all(error, Vec::new());
    };
    // The seed computes the rules (and warns about their selectors) before it checks the
    // resolver.
    let (flows, corrected) = rule_flows(vnid, policy, rules, entry);
    if let (Some(reason), Some(_)) = (&entry.resolver_error, entry.dns_names().next()) {
        let namespace = entry
            .namespaces
            .first()
            .unwrap_or(&policy.namespace)
            .clone();
        let error = format!(
            "DNS resolver failed: {reason}, dropping all traffic for namespace: {namespace:?}"
        );
        return drop_all(error, corrected);
    }
    EgressFlows {
        flows,
        error: None,
        corrected,
    }
}

/// One flow per selector of each of the policy's `n_rules` rules (earlier rules get higher
/// priorities), and the policy's name once per selector corrected.
fn rule_flows(
    vnid: Vnid,
    policy: &EgressNetworkPolicy,
    n_rules: u16,
    entry: &EgressState,
) -> (Vec<FlowMod>, Vec<String>) {
    let mut flows = Vec::new();
    let mut corrected = Vec::new();
    for (rule, priority) in policy.spec.egress.iter().zip((1..=n_rules).rev()) {
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
            if is_corrected(selector) {
                corrected.push(format!("{}:{}", policy.namespace, policy.name));
            }
            flows.push(egress_flow(vnid, priority, destination(selector), allow));
        }
    }
    (flows, corrected)
}

/// `0.0.0.0/32`, which the seed corrects to `0.0.0.0/0` with a warning.
fn is_corrected(selector: Cidr) -> bool {
    selector.addr().is_unspecified() && selector.prefix() == 32
}

/// `None` (match any destination) for 0.0.0.0/0, and for the corrected 0.0.0.0/32.
fn destination(selector: Cidr) -> Option<Cidr> {
    (selector != Cidr::ANY && !is_corrected(selector)).then_some(selector)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sdn::seed_text::parsed;
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
        let EgressFlows {
            flows,
            error,
            corrected,
        } = egress_flows(vnid, &e);
        assert_eq!(error, None);
        assert_eq!(corrected, vec!["ns1:p1".to_string()], "the seed warns once");
        assert_eq!(
            flows,
            parsed(&[
                "table=100, reg0=42, priority=3, ip, nw_dst=192.0.2.0/24, actions=output:2",
                "table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.7/32, actions=output:2",
                "table=100, reg0=42, priority=2, ip, nw_dst=198.51.100.8/32, actions=output:2",
                "table=100, reg0=42, priority=1, ip, actions=drop",
            ])
        );
    }

    #[test]
    fn error_branches_drop_everything() {
        let vnid = Vnid::new(7).unwrap();
        let drop = parsed(&["table=100, reg0=7, priority=1, actions=drop"]);
        let shared = entry(&["a", "b"], vec![policy("a", "p", RULES)]);
        let dropped = |error: &str, corrected: &[&str]| EgressFlows {
            flows: drop.clone(),
            error: Some(error.to_string()),
            corrected: corrected.iter().map(|p| p.to_string()).collect(),
        };
        assert_eq!(
            egress_flows(vnid, &shared),
            dropped("EgressNetworkPolicy not allowed in shared NetNamespace (a, b); dropping all traffic", &[])
        );
        let several = entry(
            &["a"],
            vec![policy("a", "p1", RULES), policy("a", "p2", RULES)],
        );
        assert_eq!(
            egress_flows(vnid, &several),
            dropped("multiple EgressNetworkPolicies in same network namespace (a:p1, a:p2) is not allowed; dropping all traffic", &[])
        );
        let mut resolver = entry(&["a"], vec![policy("a", "p", RULES)]);
        resolver.resolver_error = Some("no nameservers".into());
        assert_eq!(
            egress_flows(vnid, &resolver),
            // The seed warns about the selectors before it finds the resolver broken.
            dropped(
                "DNS resolver failed: no nameservers, dropping all traffic for namespace: \"a\"",
                &["a:p"]
            )
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
            EgressFlows {
                flows: parsed(&["table=100, reg0=7, priority=1, ip, actions=drop"]),
                error: None,
                corrected: Vec::new(),
            }
        );
    }

    #[test]
    fn more_rules_than_priorities_drop_everything() {
        let vnid = Vnid::new(7).unwrap();
        let rule = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}}"#;
        let fits = vec![rule; usize::from(u16::MAX)].join(",");
        let e = entry(&["a"], vec![policy("a", "p", &fits)]);
        let EgressFlows { flows, error, .. } = egress_flows(vnid, &e);
        assert_eq!(error, None);
        assert_eq!(flows.first().map(|f| f.priority), Some(u16::MAX));
        assert_eq!(flows.last().map(|f| f.priority), Some(1));
        let too_many = format!("{fits},{rule}");
        let e = entry(&["a"], vec![policy("a", "p", &too_many)]);
        assert_eq!(
            egress_flows(vnid, &e),
            EgressFlows {
                flows: parsed(&["table=100, reg0=7, priority=1, actions=drop"]),
                error: Some(
                    "EgressNetworkPolicy a:p has 65536 rules, more than the 65535 priorities a flow can have; dropping all traffic"
                        .to_string()
                ),
                corrected: Vec::new(),
            }
        );
    }
}
