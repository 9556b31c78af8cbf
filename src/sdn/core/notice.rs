//! What the core wants said about a batch. The core does not log: it hands these over with the
//! batch's [`Effects`](super::Effects), and the shell says them once the batch is committed (a
//! rolled-back batch did not do what they tell).

use std::fmt;
use std::net::Ipv4Addr;

use crate::sdn::egress::egress_flows;
use crate::sdn::state::Change;
use crate::sdn::store::PodKey;
use crate::value::IfName;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A pod's IP was given to another pod before its old pod was deleted: the new pod
    /// replaced the old one.
    PodIpReused {
        ip: Ipv4Addr,
        old: PodKey,
        new: PodKey,
    },
    /// OVSDB shows a pod's port under another OpenFlow number: the pod's flows follow it.
    PortMoved {
        pod: PodKey,
        veth: IfName,
        from: u16,
        to: u16,
    },
    /// An egress policy's `0.0.0.0/32` selector was read as `0.0.0.0/0`, as the seed does.
    EgressSelectorCorrected {
        /// `namespace:name`.
        policy: String,
    },
}

impl Notice {
    /// A warning (something the user should fix), or information.
    pub fn is_warning(&self) -> bool {
        !matches!(self, Notice::PortMoved { .. })
    }

    /// What applying `change` is worth saying.
    pub(super) fn of_change(change: &Change) -> Vec<Notice> {
        match change {
            Change::Egress {
                vnid,
                egress: Some(entry),
            } => egress_flows(*vnid, entry)
                .corrected
                .into_iter()
                .map(|policy| Notice::EgressSelectorCorrected { policy })
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::PodIpReused { ip, old, new } => write!(
                f,
                "pod IP {ip} reused before its old pod was deleted; replacing it (old pod {old}, new pod {new})"
            ),
            Notice::PortMoved {
                pod,
                veth,
                from,
                to,
            } => write!(
                f,
                "the port {veth} of pod {pod} has a new OpenFlow number ({from} to {to}); its flows follow"
            ),
            Notice::EgressSelectorCorrected { policy } => write!(
                f,
                "Correcting CIDRSelector '0.0.0.0/32' to '0.0.0.0/0' in EgressNetworkPolicy {policy}"
            ),
        }
    }
}
