//! The policy modes: the seed's `osdnPolicy` implementations, one file per mode. A mode owns
//! table 80 (and 81, and table 21 in front of routing) beyond the base flows, and the rules a
//! VNID needs while pods or services use it. Adding a mode is adding a file here, a [`Mode`]
//! variant (`types.rs`) and its arm in [`of`].

pub mod admin;
mod multitenant;
pub mod networkpolicy;
mod subnet;

use ofnode_proto::FlowMod;

use super::types::{Mode, Pod, SetupRequest};
use crate::value::Vnid;

pub trait Policy: Sync {
    /// The seed's pluginId, the first byte of the version note (`"00.03"`).
    fn plugin_id(&self) -> u8;

    /// The mode's flows at setup (the seed's policy plugins' Start), after the base flows.
    fn base_flows(&self, setup: &SetupRequest) -> Vec<FlowMod>;

    /// The rules `vnid` needs while a pod or service uses it (the seed's EnsureVNIDRules). Every
    /// user wants them; the desired table counts the users, so they leave with the last one
    /// (the seed's SyncVNIDRules).
    fn vnid_flows(&self, vnid: Vnid) -> Vec<FlowMod>;

    /// True when the mode writes its own table 80 flow for traffic from the local node instead
    /// of the seed's `priority=300, nw_src=<gateway>` one.
    fn replaces_gateway_exemption(&self) -> bool {
        false
    }

    /// The flows a local pod needs beyond the seed's own (`flows::pod_flows`).
    fn pod_flows(&self, _pod: &Pod) -> Vec<FlowMod> {
        Vec::new()
    }

    /// True when the mode enforces Kubernetes NetworkPolicy and so takes its inputs:
    /// namespaces, pods' namespace and labels, other nodes' pods, NetworkPolicy objects. The
    /// other modes refuse them ([`require_network_policy`]) rather than keep them unenforced.
    fn enforces_network_policy(&self) -> bool {
        false
    }
}

/// An input of a mode given to a node in another (the core's error says it:
/// `CoreError::WrongMode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongMode {
    pub what: String,
    pub mode: Mode,
    /// The modes that take it, by name.
    pub accepted_in: String,
}

/// Refuses `what` (NetworkPolicy objects, namespaces, …) on a node in `mode` unless the mode
/// enforces NetworkPolicy; the error names the node's mode and those that would take it.
pub fn require_network_policy(mode: Mode, what: &str) -> Result<(), WrongMode> {
    if of(mode).enforces_network_policy() {
        return Ok(());
    }
    let takers: Vec<&str> = Mode::ALL
        .into_iter()
        .filter(|m| of(*m).enforces_network_policy())
        .map(Mode::name)
        .collect();
    Err(WrongMode {
        what: what.to_string(),
        mode,
        accepted_in: takers.join(" or "),
    })
}

/// The policy of `mode`.
pub fn of(mode: Mode) -> &'static dyn Policy {
    match mode {
        Mode::Subnet => &subnet::Subnet,
        Mode::Multitenant => &multitenant::Multitenant,
        Mode::NetworkPolicy => &networkpolicy::NetworkPolicy,
    }
}
