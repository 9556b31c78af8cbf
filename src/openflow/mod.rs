//! The OpenFlow 1.3 connection to Open vSwitch: one long-lived tokio connection that many tasks
//! share, with handshake, keepalive, xid correlation, multipart reassembly, atomic bundle
//! transactions and reconnect.

mod backoff;
pub mod codec;
pub mod target;
mod transport;

pub use target::{Target, TargetError};
