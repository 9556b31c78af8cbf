//! High availability: two or more ofnode daemons on one bridge, each a controller of it; one
//! is **active** (OpenFlow role master: it programs the switch and answers operations), the
//! others are **standby** (role slave: the switch refuses their writes; ofnode refuses their
//! operations with an error naming the active peer).
//!
//! - **Liveness through the switch.** The active daemon sends a heartbeat every `heartbeat`:
//!   a PACKET_OUT whose only action is `output:CONTROLLER`. The switch turns it into a
//!   packet-in for every controller that asked for action packet-ins in the slave role
//!   (SET_ASYNC), so standbys hear the active daemon exactly as long as it can reach the
//!   switch. No extra connection between the peers is needed.
//! - **Election by generation id** (OpenFlow 1.3 §6.3.5). A standby that hears no heartbeat
//!   for `takeover_after` (plus 300 ms per rank of its id, so that peers rarely claim
//!   together) asks for the master role with a generation id above every one seen:
//!   `(term + 1) << 16 | id`. Ids are unique, so two claims never carry the same generation;
//!   the switch keeps the higher and refuses a lower one as stale (OFPRRFC_STALE). A standby
//!   that finds at the switch a generation it never heard in a heartbeat (a peer claimed a
//!   moment ago) waits one more silence instead of outbidding it. Each
//!   active daemon asks the switch for its role at every heartbeat and steps down at once
//!   when another claim has demoted it.
//! - **Shared desired state through OVSDB.** Both daemons manage the same bridge, so both
//!   reach its OVSDB. The active daemon replicates its desired state to `Bridge.external_ids`
//!   with every batch, before answering: a base and each batch's changes (`replica.rs`); a
//!   daemon taking over reads it, makes it its own (journal included) and reconciles the
//!   switch. Before reading, the new active daemon writes its generation id next to the
//!   state, and every write of the state is conditional on that id being the writer's own:
//!   a demoted daemon that has not noticed yet fails its operation instead of writing behind
//!   the new one's back. An operation acknowledged by the old active daemon is therefore
//!   never lost.
//!
//! Here: the configuration and what `ofnode status` shows; `shared.rs` what the writer and the
//! agent share (the role, the heartbeats heard, the replica in OVSDB); `agent.rs` the task
//! that keeps the role; `heartbeat.rs` the heartbeat frame and the generation ids.

mod agent;
mod heartbeat;
mod shared;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub(crate) use agent::Agent;
pub use shared::HaShared;

pub use super::replica::STATE_KEY;

/// The `Bridge.external_ids` key holding the generation id of the daemon allowed to write
/// `STATE_KEY` (a fencing token: a demoted daemon's late write fails).
pub const GENERATION_KEY: &str = "ofnode-ha-generation";

/// Extra wait per rank of the id before a standby claims.
const STAGGER: Duration = Duration::from_millis(300);

/// `[ha]` in the config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaConfig {
    /// This daemon's id, unique among the peers (1–65535); lower ids claim sooner.
    pub id: u16,
    /// Every peer's controller target as the switch dials it (the same list on every peer),
    /// e.g. `["tcp:192.0.2.1:6653", "tcp:192.0.2.2:6653"]`; set as the bridge's controllers.
    pub controllers: Vec<String>,
    /// Heartbeat period of the active daemon, in milliseconds (default 200).
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// Silence after which a standby claims, in milliseconds (default 1000).
    #[serde(default = "default_takeover_ms")]
    pub takeover_ms: u64,
}

fn default_heartbeat_ms() -> u64 {
    200
}

fn default_takeover_ms() -> u64 {
    1000
}

impl HaConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.id == 0 {
            return Err("ha.id must be 1-65535".into());
        }
        if self.controllers.is_empty() {
            return Err("ha.controllers must list every peer's controller target".into());
        }
        if self.heartbeat_ms == 0 || self.takeover_ms < 3 * self.heartbeat_ms {
            return Err(format!(
                "ha.takeover_ms ({}) must be at least 3 heartbeats (ha.heartbeat_ms = {})",
                self.takeover_ms, self.heartbeat_ms
            ));
        }
        Ok(())
    }

    pub(super) fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }

    /// How long this daemon waits in silence before it claims.
    pub(super) fn claim_after(&self) -> Duration {
        Duration::from_millis(self.takeover_ms) + STAGGER * u32::from(self.id.saturating_sub(1))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HaRole {
    #[default]
    Standby,
    Active,
}

/// HA as `ofnode status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaStatus {
    pub id: u16,
    pub role: HaRole,
    /// The generation id of the current master, as far as this daemon knows.
    pub generation: u64,
    /// The id of the active daemon last heard (or this one's when active).
    pub active_peer: Option<u16>,
    /// Times this daemon became active.
    pub takeovers: u64,
}
