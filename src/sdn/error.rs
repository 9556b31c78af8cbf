//! What a node operation can fail with (the API's HTTP status for each is `api::server`'s):
//! the core's refusal, or a peer's failure.

use std::sync::Arc;

use super::core::CoreError;
use super::journal::StateError;
use super::labels::FieldError;
use super::types::InvalidInput;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The core refused the operation (bad input, a conflict, not set up, …): nothing was
    /// changed.
    #[error(transparent)]
    Core(#[from] CoreError),
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

impl Error {
    /// The core's refusal `NotFound` of `what`.
    pub fn not_found(what: impl Into<String>) -> Error {
        CoreError::NotFound { what: what.into() }.into()
    }
}

impl From<InvalidInput> for Error {
    fn from(e: InvalidInput) -> Self {
        Error::Core(e.into())
    }
}

impl From<FieldError> for Error {
    fn from(e: FieldError) -> Self {
        Error::Core(e.into())
    }
}

impl From<super::table::Unencodable> for Error {
    fn from(e: super::table::Unencodable) -> Self {
        Error::Core(e.into())
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
