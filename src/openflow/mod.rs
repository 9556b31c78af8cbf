//! The OpenFlow 1.3 connection to Open vSwitch: one long-lived tokio connection that many tasks
//! share, with handshake, keepalive, xid correlation, multipart reassembly, atomic bundle
//! transactions and reconnect.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ofnode::openflow::Error> {
//! use ofnode::openflow::{Switch, SwitchConfig};
//! let cfg = SwitchConfig::from_target("unix:/run/openvswitch/br0.mgmt")?;
//! let (switch, _events) = Switch::start(cfg);
//! switch.wait_connected(std::time::Duration::from_secs(5)).await?;
//! let mut tx = switch.transaction();
//! tx.add_text("table=0, priority=100, ip, actions=drop").expect("valid flow");
//! tx.commit().await?;
//! # Ok(()) }
//! ```

pub mod codec;
mod config;
mod driver;
mod error;
mod event;
mod handshake;
mod monitor;
mod routes;
mod supervisor;
mod switch;
mod transaction;
mod transport;
mod writeq;
mod xid;

pub use crate::stream::{target, Target, TargetError};
pub use config::{PacketInTap, SwitchConfig};
pub use error::{Error, IoError, Result, Unanswered};
pub use event::{PacketInEvent, SwitchEvent, TappedPacketIns};
pub use switch::Switch;
pub use transaction::Transaction;
