//! OVSDB (RFC 7047) client for ovs-vswitchd's configuration database — no `ovs-vsctl` exec.
//!
//! - [`codec`]: sans-IO JSON-RPC framing.
//! - [`types`]: atoms, sets, maps, rows and their JSON encoding.
//! - [`txn`]: transaction operations and results.
//! - [`monitor`]: the cache of the tables the node uses.
//! - `rpc`: the connection task (echo, inactivity probe, reconnect).
//! - [`Client`]: the handle, generic requests (`transact`, `get_column`, …) and the typed node
//!   operations (`ensure_bridge`, `add_port`, `delete_port`, QoS, policing, controller).
//! - [`PendingPort`]: a port added without waiting for ovs-vswitchd (`add_port_pending`).

pub mod codec;
pub mod monitor;
pub mod schema;
pub mod txn;
pub mod types;

mod client;
mod error;
#[cfg(test)]
pub(crate) mod fake;
mod ops;
mod pending_port;
mod rpc;

pub use client::{Client, ClientOptions};
pub use codec::fuzz_decode;
pub use error::{Error, Result};
pub use monitor::Cache;
pub use ops::{BridgeSpec, PortChange, PortSpec};
pub use pending_port::{PendingPort, PortNumber};
pub use rpc::{parse_target, Status, Target};
pub use schema::Schema;
pub use types::{Atom, Datum, Row, Uuid};
