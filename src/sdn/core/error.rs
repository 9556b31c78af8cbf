//! What the core refuses an operation with: its own error, naming no peer (switch, OVSDB,
//! kernel, disk). Nothing of a refused operation was changed. The node's error wraps it
//! (`sdn/error.rs`), beside the peers' failures.

use ofnode_proto::{format_flow_mod, FlowMod};

use crate::sdn::labels::FieldError;
use crate::sdn::policy::WrongMode;
use crate::sdn::table::Unencodable;
use crate::sdn::types::{InvalidInput, Mode};

#[derive(Debug, Clone, thiserror::Error)]
pub enum CoreError {
    /// Bad input.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// Bad NetworkPolicy-mode input (a policy, namespace, label): the message names the field.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The operation conflicts with what the node holds (e.g. deleting a namespace in use).
    #[error("{what}")]
    Conflict { what: String },
    /// The operation needs `setup` first.
    #[error("the node is not set up yet; run setup first")]
    NotSetUp,
    /// The operation is an input of another policy mode than the node's (e.g. a NetworkPolicy
    /// on a multitenant node, which would not enforce it).
    #[error("{what}: only a node in {accepted_in} mode takes them; this node is in {mode} mode")]
    WrongMode {
        what: String,
        mode: Mode,
        /// The modes that take it, by name.
        accepted_in: String,
    },
    #[error("{what} not found")]
    NotFound { what: String },
    /// An egress policy that cannot be honoured (the seed's input errors). Unless `applied` is
    /// false the node did what the message says (e.g. "dropping all traffic").
    #[error("{message}")]
    Policy { message: String, applied: bool },
    /// A flow the node built cannot be sent: it does not fit one OpenFlow message (see
    /// [`CoreError::flow`]), or its text did not parse (a bug in ofnode).
    #[error("flow {flow:?} cannot be sent to the switch: {reason}")]
    Flow { flow: String, reason: String },
}

/// How much of a flow's text an error quotes: the match and the first actions, enough to find
/// the flow (a refused clause flow's whole text can be ~100 KB of `conjunction(...)`).
const QUOTED_FLOW_CHARS: usize = 300;

impl CoreError {
    /// The error for the flow `fm`, which cannot be sent for `reason`: it names the flow in
    /// `ovs-ofctl` syntax, its actions cut after [`QUOTED_FLOW_CHARS`] characters.
    pub fn flow(fm: &FlowMod, reason: impl std::fmt::Display) -> CoreError {
        let mut flow = format_flow_mod(fm);
        if let Some((cut, _)) = flow.char_indices().nth(QUOTED_FLOW_CHARS) {
            let total = flow.len();
            flow.truncate(cut);
            flow.push_str(&format!("… ({total} characters in all)"));
        }
        CoreError::Flow {
            flow,
            reason: reason.to_string(),
        }
    }
}

impl From<Unencodable> for CoreError {
    fn from(e: Unencodable) -> Self {
        CoreError::flow(&e.flow, e.reason)
    }
}

impl From<WrongMode> for CoreError {
    fn from(e: WrongMode) -> Self {
        CoreError::WrongMode {
            what: e.what,
            mode: e.mode,
            accepted_in: e.accepted_in,
        }
    }
}
