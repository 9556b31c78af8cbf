//! What can go wrong talking to the switch, with enough context to act on.

use std::time::Duration;

use ofnode_proto::{BundleOrderError, DecodeError, EncodeError, ErrorMsg};

use super::codec::FrameError;
use crate::stream::TargetError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection went down while the request was in flight; it may or may not have been
    /// applied. A transaction that fails this way was certainly not applied: its COMMIT had
    /// not been sent, and an unfinished bundle dies with its connection (compare
    /// [`Error::OutcomeUnknown`]).
    #[error("connection to the switch was lost while the request was in flight")]
    Disconnected,
    /// A transaction's COMMIT was sent, but its answer never came: the connection was lost or
    /// the reply is later than `request_timeout`. The switch may have applied the whole
    /// transaction or none of it (never a part: the bundle is atomic); only its flow table
    /// tells which.
    #[error("{cause} after the bundle COMMIT was sent: the switch may have applied the transaction (read its flow table to know)")]
    OutcomeUnknown { cause: Unanswered },
    /// No connection to the switch right now (it is being (re)established).
    #[error("not connected to the switch")]
    NotConnected,
    /// The `Switch` handle's background task has stopped (the runtime is shutting down).
    #[error("the OpenFlow connection task has stopped")]
    Closed,
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },
    /// The switch answered with an OpenFlow error. `flow` is the failing message of a
    /// transaction in `ovs-ofctl` syntax when the error belongs to one: a flow as dump-flows
    /// prints it, a group mod as a line of an `ovs-ofctl bundle` file (`group add
    /// group_id=...`).
    #[error("{}", describe_switch_error(.flow, .error))]
    Switch {
        flow: Option<String>,
        error: ErrorMsg,
    },
    /// The peer broke the protocol (a reply of the wrong type, a malformed message, ...).
    #[error("OpenFlow protocol error: {0}")]
    Protocol(String),
    /// The peer cannot speak OpenFlow 1.3.
    #[error("version negotiation failed: {0}")]
    Incompatible(String),
    /// A transaction holds more messages (flow and group mods, counted in `flows`) than one
    /// bundle may carry; it is refused rather than split, because a split transaction is no
    /// longer atomic.
    #[error("transaction of {flows} flow and group mods exceeds the bundle limit of {max}; split it into several transactions yourself if atomicity across them is not needed")]
    BundleTooLarge { flows: usize, max: usize },
    /// A group mod that would change meaning in bundle order (a group deleted and then added
    /// or modified again in one transaction), refused when pushed.
    #[error("refused before sending: {0}")]
    BundleOrder(#[from] BundleOrderError),
    /// A multipart reply grew beyond the configured bound.
    #[error("multipart reply exceeds {max} bytes")]
    ReplyTooLarge { max: usize },
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A message that cannot be encoded (too long for its 16-bit length field), refused before
    /// anything was sent.
    #[error("refused before sending: {0}")]
    Encode(#[from] EncodeError),
    #[error("malformed message from the switch: {0}")]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Why an answer never came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    #[error("connection to the switch was lost")]
    Disconnected,
    #[error("no reply within {0:?}")]
    Timeout(Duration),
}

/// A socket error and what we were doing when it happened.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct IoError {
    pub context: String,
    #[source]
    pub source: std::io::Error,
}

fn describe_switch_error(flow: &Option<String>, error: &ErrorMsg) -> String {
    match flow {
        Some(group) if group.starts_with("group ") => {
            format!("switch rejected `{group}`: {error}")
        }
        Some(flow) => format!("switch rejected flow `{flow}`: {error}"),
        None => format!("switch returned error {error}"),
    }
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io(IoError {
            context: context.into(),
            source,
        })
    }

    pub(crate) fn timeout(what: impl Into<String>, after: Duration) -> Error {
        Error::Timeout {
            what: what.into(),
            after,
        }
    }

    /// True when retrying after a reconnect may succeed (the request itself was fine).
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            Error::Disconnected
                | Error::NotConnected
                | Error::Timeout { .. }
                | Error::OutcomeUnknown { .. }
        )
    }

    /// True when a failed transaction may nevertheless have been applied by the switch (in
    /// full): its outcome is unknown until the switch's table is read. Every other error of
    /// a transaction means that nothing of it was applied.
    pub fn may_have_applied(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }
}
