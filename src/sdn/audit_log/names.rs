//! What the log says about a rule and an address besides numbers: the boundary between the
//! audit task and whatever knows the names. The task asks once per flush, inside one Read on
//! the core, for every rule and address of the lines it is about to write.
//!
//! The source in use is `interim_names.rs` (this branch's own minimal one); the per-rule
//! counters' `core/audit_names.rs` is meant to replace it behind [`NameSource`].

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::sdn::audit::RuleRef;
use crate::sdn::core::Core;

/// A rule's names, as the log prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleNames {
    /// The policy's namespace (NetworkPolicy; the isolated namespace for an isolation drop;
    /// None for the cluster-scoped admin tiers).
    pub namespace: Option<String>,
    /// The policy's name (None for NetworkPolicy's isolation drop, which no one policy owns).
    pub policy: Option<String>,
    /// `ingress[0]`, an admin rule's own name, or `default-deny`.
    pub rule: String,
    /// For an isolation drop: the policies (`namespace/name`) isolating that side.
    pub isolated_by: Vec<String>,
}

/// The names found for one flush.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    /// By rule key (`RuleRef::key`).
    pub rules: HashMap<u32, RuleNames>,
    /// Pods by address, `namespace/name`.
    pub pods: HashMap<Ipv4Addr, String>,
}

/// Where names come from: a look at the core, run inside the writer's Read (so quick, and
/// never blocking).
pub trait NameSource: Send + Sync + 'static {
    fn names(&self, core: &Core, rules: &[RuleRef], ips: &[Ipv4Addr]) -> Names;
}
