//! What a node operation can fail with (the API's HTTP status for each is `api::server`'s).

use std::sync::Arc;

use ofnode_proto::{format_flow_mod, FlowMod};

use super::journal::StateError;
use super::types::InvalidInput;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// Bad input: nothing was changed.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// Bad NetworkPolicy-mode input (a policy, namespace, label): the message names the field;
    /// nothing was changed.
    #[error(transparent)]
    Field(#[from] super::labels::FieldError),
    /// The operation conflicts with what the node holds (e.g. deleting a namespace in use).
    #[error("{what}")]
    Conflict { what: String },
    /// The operation needs `setup` first.
    #[error("the node is not set up yet; run setup first")]
    NotSetUp,
    /// The operation is an input of another policy mode than the node's (e.g. a NetworkPolicy
    /// on a multitenant node, which would not enforce it): nothing was changed.
    #[error("{what}: only a node in {accepted_in} mode takes them; this node is in {mode} mode")]
    WrongMode {
        what: String,
        mode: super::types::Mode,
        /// The modes that take it, by name.
        accepted_in: String,
    },
    #[error("{what} not found")]
    NotFound { what: String },
    /// The OpenFlow switch failed the operation (nothing of it was applied), or is unreachable.
    /// Shared, because one bundle may carry several operations that all fail with it.
    #[error("switch: {0}")]
    Switch(Arc<crate::openflow::Error>),
    #[error("OVSDB: {0}")]
    Ovsdb(Arc<crate::ovsdb::Error>),
    #[error("host network: {0}")]
    Netlink(Arc<crate::netlink::Error>),
    /// The desired state could not be made durable; the operation was undone.
    #[error("state: {0}")]
    State(Arc<StateError>),
    /// An egress policy that cannot be honoured (the seed's input errors). Unless `applied` is
    /// false the node did what the message says (e.g. "dropping all traffic").
    #[error("{message}")]
    Policy { message: String, applied: bool },
    /// A flow the node built cannot be sent: it does not fit one OpenFlow message (see
    /// [`Error::flow`]), or its text did not parse (a bug in ofnode). Nothing was changed.
    #[error("flow {flow:?} cannot be sent to the switch: {reason}")]
    Flow { flow: String, reason: String },
    /// High availability: this daemon is the standby; operations go to the active one.
    #[error("this ofnode (HA id {id}) is the standby; send operations to the active one{}",
        active.map_or_else(|| " (none is active right now; retry shortly)".to_string(), |a| format!(" (HA id {a})")))]
    Standby { id: u16, active: Option<u16> },
    /// High availability: the desired state could not be replicated to OVSDB; the operation
    /// was undone.
    #[error("replicating the desired state to OVSDB failed: {reason}")]
    Replication { reason: String },
    /// The node's task stopped (the daemon is shutting down).
    #[error("the node controller is shutting down")]
    Shutdown,
}

/// How much of a flow's text an error quotes: the match and the first actions, enough to find
/// the flow (a refused clause flow's whole text can be ~100 KB of `conjunction(...)`).
const QUOTED_FLOW_CHARS: usize = 300;

impl Error {
    /// The error for the flow `fm`, which cannot be sent for `reason`: it names the flow in
    /// `ovs-ofctl` syntax, its actions cut after [`QUOTED_FLOW_CHARS`] characters.
    pub fn flow(fm: &FlowMod, reason: impl std::fmt::Display) -> Error {
        let mut flow = format_flow_mod(fm);
        if let Some((cut, _)) = flow.char_indices().nth(QUOTED_FLOW_CHARS) {
            let total = flow.len();
            flow.truncate(cut);
            flow.push_str(&format!("… ({total} characters in all)"));
        }
        Error::Flow {
            flow,
            reason: reason.to_string(),
        }
    }
}

impl From<super::table::Unencodable> for Error {
    fn from(e: super::table::Unencodable) -> Self {
        Error::flow(&e.flow, e.reason)
    }
}

impl From<crate::openflow::Error> for Error {
    fn from(e: crate::openflow::Error) -> Self {
        Error::Switch(Arc::new(e))
    }
}

impl From<crate::ovsdb::Error> for Error {
    fn from(e: crate::ovsdb::Error) -> Self {
        Error::Ovsdb(Arc::new(e))
    }
}

impl From<crate::netlink::Error> for Error {
    fn from(e: crate::netlink::Error) -> Self {
        Error::Netlink(Arc::new(e))
    }
}

impl From<StateError> for Error {
    fn from(e: StateError) -> Self {
        Error::State(Arc::new(e))
    }
}

impl From<super::policy::WrongMode> for Error {
    fn from(e: super::policy::WrongMode) -> Self {
        Error::WrongMode {
            what: e.what,
            mode: e.mode,
            accepted_in: e.accepted_in,
        }
    }
}
