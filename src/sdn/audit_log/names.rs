//! What the log says about a rule and an address besides numbers: the boundary between the
//! audit task and whatever knows the names. The task asks once per flush, inside one Read on
//! the core, for every rule and address of the lines it is about to write.
//!
//! The names are the core's (`core/audit_names.rs`): a rule is named one way everywhere.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::sdn::audit::RuleRef;
use crate::sdn::core::Core;

pub use crate::sdn::core::audit_names::RuleNames;

/// The names found for one flush.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    /// By rule key (`RuleRef::key`).
    pub rules: HashMap<u32, RuleNames>,
    /// Pods by address, `namespace/name`.
    pub pods: HashMap<Ipv4Addr, String>,
}

/// The names of `rules` and `ips` the core knows, through its one namer (quick: a few lookups
/// each, run inside the writer's Read).
pub fn resolve(core: &Core, rules: &[RuleRef], ips: &[Ipv4Addr]) -> Names {
    let namer = core.rule_namer();
    Names {
        rules: rules
            .iter()
            .filter_map(|rule| Some((rule.key(), namer.rule(*rule)?)))
            .collect(),
        pods: ips
            .iter()
            .filter_map(|ip| Some((*ip, namer.pod(*ip)?.to_string())))
            .collect(),
    }
}
