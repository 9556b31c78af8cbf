//! The names the audit gives what the switch reports: a verdict flow's [`RuleRef`] as the tier,
//! policy and rule an operator wrote, and an address as the pod that has it. Pure reads of the
//! node's state, the one way a rule is named: the audit log resolves a second's events, the
//! rule counters a stats dump, `ofnode trace` its verdict flows' cookies, each through one
//! [`RuleNamer`] (one read of the core), each key at the cost of a few lookups in the store's
//! indexes (conjunction id → policy, VNID → namespace, address → pod).

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::Core;
use crate::sdn::audit::{AuditTier, Dir, RuleRef, Verdict};
use crate::sdn::policy::admin::{admin_key, AdminPolicy, Tier, BASELINE_NAME};
use crate::sdn::policy::networkpolicy::model::Rule;
use crate::sdn::policy::networkpolicy::StoredNetPol;
use crate::sdn::produce::admin::rule_of_conjunction_id;
use crate::sdn::state::NodeState;
use crate::sdn::store::Store;
use crate::value::{PodKey, Vnid};

/// What NetworkPolicy's isolation drop is called where a rule's label goes.
pub const ISOLATION_RULE: &str = "default-deny";

/// A rule as the operator knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RuleNames {
    pub tier: AuditTier,
    pub direction: Dir,
    pub verdict: Verdict,
    /// A NetworkPolicy's namespace; for isolation, the isolated pods' namespace (the one
    /// namespace with the VNID: the NetworkPolicy mode keeps VNIDs unique). None for the admin
    /// tiers (cluster-scoped).
    pub namespace: Option<String>,
    /// The policy's name; None for NetworkPolicy's isolation drop (no one policy decides it).
    pub policy: Option<String>,
    /// The rule: `ingress[0]` (its index in the policy's list), or [`ISOLATION_RULE`].
    pub rule: String,
    /// An admin rule's own `name`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// An AdminNetworkPolicy's priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u16>,
    /// Isolation: the policies (`namespace/name`) of the namespace that isolate its pods in
    /// this direction (a pod is isolated by those of them that select it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isolated_by: Vec<String>,
}

impl RuleNames {
    /// What a rule the node no longer holds (its policy deleted since the switch reported
    /// it) is called: its tier, direction and verdict, and `#ID` for the rule.
    pub fn unnamed(rule: RuleRef) -> RuleNames {
        RuleNames {
            tier: rule.tier,
            direction: rule.dir,
            verdict: rule.verdict,
            namespace: None,
            policy: None,
            rule: format!("#{}", rule.id),
            rule_name: None,
            priority: None,
            isolated_by: Vec::new(),
        }
    }

    /// Whether these are the names of a rule the node holds (not [`RuleNames::unnamed`]).
    pub fn is_named(&self) -> bool {
        self.policy.is_some() || self.rule == ISOLATION_RULE
    }

    /// The policy as `kubectl` names it: `ns/name`, `anp/name`, `banp/default`, or for
    /// isolation the namespace alone.
    pub fn policy_label(&self) -> String {
        match (self.tier, &self.namespace, &self.policy) {
            (AuditTier::Admin, _, Some(name)) => format!("anp/{name}"),
            (AuditTier::Baseline, _, Some(name)) => format!("banp/{name}"),
            (_, Some(ns), Some(name)) => format!("{ns}/{name}"),
            (_, Some(ns), None) => ns.clone(),
            (_, None, Some(name)) => name.clone(),
            (_, None, None) => "-".to_string(),
        }
    }
}

impl std::fmt::Display for RuleNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.tier.as_str(), self.policy_label())?;
        if let Some(p) = self.priority {
            write!(f, " (priority {p})")?;
        }
        // A policy's rule says its side (`ingress[0]`); the isolation drop does not.
        if self.policy.is_none() && self.rule == ISOLATION_RULE {
            write!(f, " {}", self.direction.as_str())?;
        }
        write!(f, " {}", self.rule)?;
        if let Some(name) = &self.rule_name {
            write!(f, " {name:?}")?;
        }
        write!(f, ": {}", self.verdict.as_str())?;
        if !self.isolated_by.is_empty() {
            write!(f, " (isolated by {})", self.isolated_by.join(", "))?;
        }
        Ok(())
    }
}

/// Names rules and addresses from one read of the node's state. Over a core, each key costs
/// a few lookups in the store's indexes; over a bare state (a trace's copy) the same lookups
/// are built once, on first use, in one pass over the policies, namespaces and pods. The admin
/// tiers' priorities are gathered once, on the first admin rule asked for.
pub struct RuleNamer<'a> {
    state: &'a NodeState,
    lookups: Lookups<'a>,
    anp_by_priority: OnceCell<HashMap<u16, &'a AdminPolicy>>,
}

enum Lookups<'a> {
    Store(&'a Store),
    Built(OnceCell<Built<'a>>),
}

/// The store's lookups, built from a bare state.
#[derive(Default)]
struct Built<'a> {
    netpols_by_conj_id: HashMap<u32, &'a str>,
    namespaces_by_vnid: BTreeMap<Vnid, &'a str>,
    pods_by_ip: HashMap<IpAddr, &'a PodKey>,
}

impl<'a> Built<'a> {
    fn of(state: &'a NodeState) -> Built<'a> {
        let mut built = Built::default();
        for (key, stored) in &state.netpols {
            for id in stored.ingress_ids.iter().chain(&stored.egress_ids) {
                built.netpols_by_conj_id.insert(*id, key.as_str());
            }
        }
        for ns in state.namespaces.values().rev() {
            built.namespaces_by_vnid.insert(ns.vnid, ns.name.as_str());
        }
        // Reversed, so that the lowest key keeps an address two hold (as the store's index).
        for (key, info) in state.pod_infos.iter().rev() {
            for ip in &info.ips {
                built.pods_by_ip.insert(*ip, key);
            }
        }
        for (key, pod) in &state.pods {
            built.pods_by_ip.insert(IpAddr::V4(pod.ip), key);
        }
        built
    }
}

impl Core {
    /// A namer over the core's state as it is now.
    pub fn rule_namer(&self) -> RuleNamer<'_> {
        RuleNamer::with(self.state(), Lookups::Store(self.store()))
    }
}

/// Label of rule `index` of direction `dir`: `ingress[0]`.
pub fn rule_label(dir: Dir, index: usize) -> String {
    format!("{}[{index}]", dir.as_str())
}

/// The index of the rule (of `rules`, whose conjunction ids are `ids` in order) that holds
/// conjunction id `id`.
fn netpol_rule_index(rules: &[Rule], ids: &[u32], id: u32) -> Option<usize> {
    let position = ids.iter().position(|held| *held == id)?;
    let mut first = 0;
    for (index, rule) in rules.iter().enumerate() {
        first += rule.conjunctions();
        if position < first {
            return Some(index);
        }
    }
    None
}

impl<'a> RuleNamer<'a> {
    fn with(state: &'a NodeState, lookups: Lookups<'a>) -> RuleNamer<'a> {
        RuleNamer {
            state,
            lookups,
            anp_by_priority: OnceCell::new(),
        }
    }

    /// A namer over a bare state (no core at hand: a trace's copy of the state).
    pub fn of_state(state: &'a NodeState) -> RuleNamer<'a> {
        RuleNamer::with(state, Lookups::Built(OnceCell::new()))
    }

    fn built(&self) -> Option<&Built<'a>> {
        match &self.lookups {
            Lookups::Store(_) => None,
            Lookups::Built(cell) => Some(cell.get_or_init(|| Built::of(self.state))),
        }
    }

    fn netpol_of_conj_id(&self, id: u32) -> Option<&'a str> {
        match (&self.lookups, self.built()) {
            (Lookups::Store(store), _) => store.netpol_of_conj_id(id),
            (_, Some(built)) => built.netpols_by_conj_id.get(&id).copied(),
            _ => None,
        }
    }

    fn namespace_with_vnid(&self, vnid: Vnid) -> Option<&'a str> {
        match (&self.lookups, self.built()) {
            (Lookups::Store(store), _) => store
                .index()
                .namespaces_with_vnid(vnid)
                .next()
                .map(String::as_str),
            (_, Some(built)) => built.namespaces_by_vnid.get(&vnid).copied(),
            _ => None,
        }
    }

    /// The names of `rule`; None when the node holds no such rule (any more).
    pub fn rule(&self, rule: RuleRef) -> Option<RuleNames> {
        match (rule.tier, rule.verdict) {
            (AuditTier::NetworkPolicy, Verdict::Allow) => self.netpol_rule(rule),
            (AuditTier::NetworkPolicy, Verdict::Deny) => self.isolation(rule),
            (AuditTier::NetworkPolicy, Verdict::Pass) => None,
            (AuditTier::Admin | AuditTier::Baseline, _) => self.admin_rule(rule),
        }
    }

    /// The pod (`namespace/name`) with address `ip`: a local pod, or one of another node the
    /// node knows of.
    pub fn pod(&self, ip: Ipv4Addr) -> Option<&'a PodKey> {
        match (&self.lookups, self.built()) {
            (Lookups::Store(store), _) => store
                .local_pod_at(ip)
                .map(|(key, _)| key)
                .or_else(|| store.index().pods_at(IpAddr::V4(ip)).next()),
            (_, Some(built)) => built.pods_by_ip.get(&IpAddr::V4(ip)).copied(),
            _ => None,
        }
    }

    fn netpol_rule(&self, rule: RuleRef) -> Option<RuleNames> {
        let key = self.netpol_of_conj_id(rule.id)?;
        let stored: &StoredNetPol = self.state.netpols.get(key)?;
        let (rules, ids) = match rule.dir {
            Dir::Ingress => (stored.policy.ingress.as_deref()?, &stored.ingress_ids),
            Dir::Egress => (stored.policy.egress.as_deref()?, &stored.egress_ids),
        };
        let index = netpol_rule_index(rules, ids, rule.id)?;
        Some(netpol_rule_names(stored, rule.dir, index))
    }

    fn isolation(&self, rule: RuleRef) -> Option<RuleNames> {
        let vnid = Vnid::new(rule.id).ok()?;
        let namespace = self.namespace_with_vnid(vnid)?;
        Some(self.isolation_names(namespace, rule.dir))
    }

    /// NetworkPolicy's isolation of `namespace`'s pods in direction `dir`.
    pub fn isolation_names(&self, namespace: &str, dir: Dir) -> RuleNames {
        let prefix = format!("{namespace}/");
        let isolated_by = self
            .state
            .netpols
            .range(prefix.clone()..)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .filter(|(_, stored)| match dir {
                Dir::Ingress => stored.policy.ingress.is_some(),
                Dir::Egress => stored.policy.egress.is_some(),
            })
            .map(|(key, _)| key.clone())
            .collect();
        RuleNames {
            tier: AuditTier::NetworkPolicy,
            direction: dir,
            verdict: Verdict::Deny,
            namespace: Some(namespace.to_string()),
            policy: None,
            rule: ISOLATION_RULE.to_string(),
            rule_name: None,
            priority: None,
            isolated_by,
        }
    }

    fn anp(&self, priority: u16) -> Option<&'a AdminPolicy> {
        let state: &'a NodeState = self.state;
        self.anp_by_priority
            .get_or_init(|| {
                state
                    .admin_policies
                    .values()
                    .filter_map(|p| match p.tier {
                        Tier::Admin { priority } => Some((priority, p)),
                        Tier::Baseline => None,
                    })
                    .collect()
            })
            .get(&priority)
            .copied()
    }

    fn admin_rule(&self, rule: RuleRef) -> Option<RuleNames> {
        let baseline = rule.tier == AuditTier::Baseline;
        let (tier, index) = rule_of_conjunction_id(baseline, rule.id)?;
        let policy = match tier {
            Tier::Admin { priority } => self.anp(priority)?,
            Tier::Baseline => self
                .state
                .admin_policies
                .get(&admin_key(Tier::Baseline.short(), BASELINE_NAME))?,
        };
        admin_rule_names(policy, rule.dir, index, rule.verdict)
    }
}

/// Rule `index` of direction `dir` of a NetworkPolicy.
pub fn netpol_rule_names(stored: &StoredNetPol, dir: Dir, index: usize) -> RuleNames {
    RuleNames {
        tier: AuditTier::NetworkPolicy,
        direction: dir,
        verdict: Verdict::Allow,
        namespace: Some(stored.policy.namespace.clone()),
        policy: Some(stored.policy.name.clone()),
        rule: rule_label(dir, index),
        rule_name: None,
        priority: None,
        isolated_by: Vec::new(),
    }
}

/// Rule `index` of direction `dir` of an admin policy (None: it has no such rule), with
/// `verdict` (its action).
pub fn admin_rule_names(
    policy: &AdminPolicy,
    dir: Dir,
    index: usize,
    verdict: Verdict,
) -> Option<RuleNames> {
    let rules = match dir {
        Dir::Ingress => &policy.ingress,
        Dir::Egress => &policy.egress,
    };
    let rule = rules.get(index)?;
    let (tier, priority) = match policy.tier {
        Tier::Admin { priority } => (AuditTier::Admin, Some(priority)),
        Tier::Baseline => (AuditTier::Baseline, None),
    };
    Some(RuleNames {
        tier,
        direction: dir,
        verdict,
        namespace: None,
        policy: Some(policy.name.clone()),
        rule: rule_label(dir, index),
        rule_name: Some(rule.name.clone()).filter(|n| !n.is_empty()),
        priority,
        isolated_by: Vec::new(),
    })
}

#[cfg(test)]
pub(crate) mod tests;
