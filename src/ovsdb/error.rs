//! The errors of the OVSDB client.

use std::time::Duration;

use super::codec::CodecError;
use super::types::FormatError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid OVSDB target {target:?}: {reason} (expected unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT)")]
    Target { target: String, reason: String },

    #[error("could not connect to ovsdb-server at {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: std::io::Error,
    },

    #[error("I/O error talking to ovsdb-server at {target}: {source}")]
    Io {
        target: String,
        #[source]
        source: std::io::Error,
    },

    /// The connection is down, or went down while the request was in flight: a transaction may
    /// or may not have been committed. The client reconnects by itself; retry the operation
    /// (every typed operation is idempotent).
    #[error("not connected to ovsdb-server ({reason}); a request in flight may or may not have been applied")]
    Disconnected { reason: String },

    #[error("{what} timed out after {after:?}")]
    Timeout { what: String, after: Duration },

    /// The server refused a request or transaction; `error` and `details` are its own words.
    #[error("ovsdb-server refused {during}: {error}: {details}")]
    Server {
        error: String,
        details: String,
        /// Which request or operation failed ("operation 2 (insert into Port)").
        during: String,
    },

    /// ovs-vswitchd could not set up an interface; `error` is what it wrote to `Interface.error`.
    #[error("ovs-vswitchd could not set up interface {name}: {error}")]
    Interface { name: String, error: String },

    #[error("interface {name} got OpenFlow port {assigned}, not the requested {requested}")]
    OfportMismatch {
        name: String,
        requested: u16,
        assigned: i64,
    },

    #[error("no {table} record {record:?}")]
    NotFound { table: String, record: String },

    /// The caller asked for something that cannot be expressed (a bad name or value).
    #[error("invalid request: {0}")]
    Invalid(String),

    /// The request contradicts what the database holds (a port on another bridge).
    #[error("{0}")]
    Conflict(String),

    #[error("framing error on the OVSDB connection: {0}")]
    Codec(#[from] CodecError),

    /// The server answered in a shape RFC 7047 does not allow.
    #[error("unexpected reply from ovsdb-server: {0}")]
    Protocol(String),
}

impl From<FormatError> for Error {
    fn from(err: FormatError) -> Error {
        Error::Protocol(err.to_string())
    }
}

impl Error {
    /// True for errors that a retry after reconnection may cure.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Disconnected { .. } | Error::Timeout { .. })
    }

    /// True when a change that failed with this error may nevertheless be in the database: no
    /// answer came (the session went, the request or ovs-vswitchd's reconfiguration timed
    /// out), or one that could not be read. Any other error is a refusal: the change was not
    /// made.
    pub fn may_have_applied(&self) -> bool {
        matches!(
            self,
            Error::Disconnected { .. }
                | Error::Timeout { .. }
                | Error::Io { .. }
                | Error::Codec(_)
                | Error::Protocol(_)
        )
    }
}
