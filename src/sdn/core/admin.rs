//! The cluster admin tiers' operations on the core (AdminNetworkPolicy and the
//! BaselineAdminNetworkPolicy), each one all-or-nothing step of the open batch.

use super::Core;
use super::CoreError as Error;
use crate::sdn::labels::{check_dns_subdomain, check_labels, FieldError};
use crate::sdn::objects::NodeInfo;
use crate::sdn::policy::admin::{admin_key, AdminPolicy, Tier};
use crate::sdn::state::Change;

impl Core {
    /// Creates or replaces an admin policy. Two AdminNetworkPolicies at one priority are
    /// refused: the API leaves their order undefined, and ofnode does not enforce an order
    /// nobody chose.
    pub fn admin_apply(&mut self, policy: AdminPolicy) -> Result<(), Error> {
        self.require_enforcing(policy.tier.kind())?;
        let key = policy.key();
        if let Tier::Admin { priority } = policy.tier {
            let holder = self
                .state()
                .admin_policies
                .values()
                .find(|other| other.tier == policy.tier && other.name != policy.name);
            if let Some(other) = holder {
                return Err(Error::Field(FieldError::new(
                    "spec.priority",
                    format!(
                        "{priority} is AdminNetworkPolicy {:?}'s: two at one priority would be judged in an order the API leaves undefined; give each its own priority",
                        other.name
                    ),
                )));
            }
        }
        if self.state().admin_policies.get(&key) == Some(&policy) {
            return Ok(());
        }
        self.apply(vec![Change::AdminPolicy {
            key,
            policy: Some(Box::new(policy)),
        }])
    }

    /// Deletes an admin policy: `short` is `anp` or `banp`.
    pub fn admin_del(&mut self, short: &str, name: &str) -> Result<(), Error> {
        let kind = match short {
            "anp" => "AdminNetworkPolicy",
            _ => "BaselineAdminNetworkPolicy",
        };
        self.require_enforcing(kind)?;
        let key = admin_key(short, name);
        if !self.state().admin_policies.contains_key(&key) {
            return Err(Error::NotFound {
                what: format!("{kind} {name}"),
            });
        }
        self.apply(vec![Change::AdminPolicy { key, policy: None }])
    }

    /// Creates or replaces a node of the cluster as admin policies' node peers see it: its
    /// addresses and labels (what its Node object says).
    pub fn node_set(&mut self, name: &str, mut node: NodeInfo) -> Result<(), Error> {
        self.require_enforcing("nodes")?;
        check_dns_subdomain("name", name)?;
        check_labels("labels", &node.labels)?;
        if node.ips.is_empty() {
            return Err(Error::Field(FieldError::new(
                "ips",
                "a node needs at least one address",
            )));
        }
        node.ips.sort();
        node.ips.dedup();
        if self.state().nodes.get(name) == Some(&node) {
            return Ok(());
        }
        self.apply(vec![Change::Node {
            name: name.to_string(),
            node: Some(node),
        }])
    }

    pub fn node_del(&mut self, name: &str) -> Result<(), Error> {
        self.require_enforcing("nodes")?;
        if !self.state().nodes.contains_key(name) {
            return Err(Error::NotFound {
                what: format!("node {name}"),
            });
        }
        self.apply(vec![Change::Node {
            name: name.to_string(),
            node: None,
        }])
    }

    /// Each admin policy (ANPs by priority, then the baseline) with its local pods selected
    /// and its flows on this node.
    pub fn admin_summaries(&self) -> Vec<AdminSummary> {
        let Some(engine) = &self.admin else {
            return Vec::new();
        };
        let mut out: Vec<AdminSummary> = self
            .state()
            .admin_policies
            .iter()
            .map(|(key, policy)| {
                let (selected_pods, flows) = engine.summary(key, self.store.groups());
                AdminSummary {
                    kind: policy.tier.short().to_string(),
                    name: policy.name.clone(),
                    priority: match policy.tier {
                        Tier::Admin { priority } => Some(priority),
                        Tier::Baseline => None,
                    },
                    ingress_rules: policy.ingress.len(),
                    egress_rules: policy.egress.len(),
                    selected_pods,
                    flows,
                }
            })
            .collect();
        out.sort_by_key(|s| (s.priority.is_none(), s.priority));
        out
    }
}

/// One line of `anp list` / `banp list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdminSummary {
    /// `anp` or `banp`.
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u16>,
    pub ingress_rules: usize,
    pub egress_rules: usize,
    pub selected_pods: usize,
    pub flows: usize,
}
