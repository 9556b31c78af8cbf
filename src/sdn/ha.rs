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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ofnode_proto::{
    Action, AsyncConfig, ErrorKind, Message, PacketIn, PacketOut, Role, RoleMsg, NO_BUFFER,
    OFPP_CONTROLLER, OFPR_ACTION,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::Error;
use super::replica::{self, Replica, Write};
use super::request::{self, Envelope, Request};
use super::state::{Change, NodeState};
use crate::openflow::Switch;
use crate::ovsdb::txn::{Condition, Function, Mutation, Mutator, Operation};
use crate::ovsdb::{self, Datum};

pub use super::replica::STATE_KEY;
/// The `Bridge.external_ids` key holding the generation id of the daemon allowed to write
/// `STATE_KEY` (a fencing token: a demoted daemon's late write fails).
pub const GENERATION_KEY: &str = "ofnode-ha-generation";

/// Heartbeat frames: ethertype 0x88b5 (IEEE local experimental), then this magic, the
/// sender's id (u16) and its generation id (u64).
const HEARTBEAT_ETHERTYPE: u16 = 0x88b5;
const HEARTBEAT_MAGIC: &[u8; 10] = b"ofnode-ha\0";
/// Extra wait per rank of the id before a standby claims.
const STAGGER: Duration = Duration::from_millis(300);

/// OFPET_ROLE_REQUEST_FAILED / OFPRRFC_STALE.
const ROLE_STALE: ErrorKind = ErrorKind::Standard {
    err_type: 11,
    code: 0,
};

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

    fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }

    /// How long this daemon waits in silence before it claims.
    fn claim_after(&self) -> Duration {
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

/// What the writer and the agent share.
#[derive(Debug)]
pub struct HaShared {
    active: AtomicBool,
    status: Mutex<HaStatus>,
    heard: Mutex<Heard>,
    /// Where the desired state is replicated.
    pub(crate) ovsdb: ovsdb::Client,
    pub(crate) bridge: String,
    /// What this daemon wrote of the replica (it writes only while active).
    replica: Mutex<Replica>,
}

#[derive(Debug)]
struct Heard {
    last: Instant,
    max_generation: u64,
}

impl HaShared {
    pub(crate) fn new(id: u16, ovsdb: ovsdb::Client, bridge: String) -> HaShared {
        HaShared {
            active: AtomicBool::new(false),
            status: Mutex::new(HaStatus {
                id,
                ..HaStatus::default()
            }),
            heard: Mutex::new(Heard {
                last: Instant::now(),
                max_generation: 0,
            }),
            ovsdb,
            bridge,
            replica: Mutex::new(Replica::new()),
        }
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub fn status(&self) -> HaStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn update(&self, f: impl FnOnce(&mut HaStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The error a standby answers operations with.
    pub(crate) fn standby_error(&self) -> Error {
        let status = self.status();
        Error::Standby {
            id: status.id,
            active: status.active_peer,
        }
    }

    /// A packet-in from the switch: records a peer's heartbeat.
    pub(crate) fn on_packet_in(&self, packet_in: &PacketIn) {
        let Some((id, generation)) = parse_heartbeat(&packet_in.data) else {
            return;
        };
        let own = self.status().id;
        if id == own {
            return;
        }
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.last = Instant::now();
        heard.max_generation = heard.max_generation.max(generation);
        drop(heard);
        self.update(|s| {
            if s.role == HaRole::Standby {
                s.active_peer = Some(id);
                s.generation = s.generation.max(generation);
            }
        });
    }

    fn silence(&self) -> Duration {
        self.heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last
            .elapsed()
    }

    fn max_generation(&self) -> u64 {
        self.heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .max_generation
    }

    /// Remembers a generation learnt from the switch, and starts the silence over.
    fn saw_generation(&self, generation: u64) {
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.max_generation = heard.max_generation.max(generation);
        heard.last = Instant::now();
    }

    fn reset_silence(&self) {
        self.heard.lock().unwrap_or_else(|e| e.into_inner()).last = Instant::now();
    }

    fn bridge_condition(&self) -> Condition {
        Condition::eq("name", self.bridge.as_str())
    }

    /// `external_ids:KEY=VALUE`, replacing any earlier value of KEY.
    fn set_id(key: &str, value: String) -> [Mutation; 2] {
        [
            Mutation::new("external_ids", Mutator::Delete, Datum::set([key])),
            Mutation::new("external_ids", Mutator::Insert, Datum::map([(key, value)])),
        ]
    }

    fn replica(&self) -> std::sync::MutexGuard<'_, Replica> {
        self.replica.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replicates a batch that made `changes` and left the desired state `state`: only the
    /// changes, or a whole new base when one is due (see `replica.rs`), provided this daemon's
    /// generation still holds the fencing token.
    pub(crate) async fn replicate(
        &self,
        state: &NodeState,
        changes: &[Change],
    ) -> Result<(), Error> {
        let session = self.ovsdb.status().generation;
        let write =
            self.replica()
                .plan(state, changes, session)
                .map_err(|e| Error::Replication {
                    reason: format!("encoding the state: {e}"),
                })?;
        let written = self.write_replica(&write).await;
        match &written {
            Ok(()) => self.replica().written(&write, session),
            Err(_) => self.replica().forget(),
        }
        written
    }

    async fn write_replica(&self, write: &Write) -> Result<(), Error> {
        let replication = |e: ovsdb::Error| Error::Replication {
            reason: e.to_string(),
        };
        let mutations = match write {
            Write::Full { state } => {
                // The batches of the previous base go with it (only a fenced writer adds any,
                // so none can appear between this read and the write).
                let mut stale = replica::change_keys(&self.read_ids().await?);
                stale.push(STATE_KEY.to_string());
                vec![
                    Mutation::new(
                        "external_ids",
                        Mutator::Delete,
                        Datum::set(stale.iter().map(String::as_str)),
                    ),
                    Mutation::new(
                        "external_ids",
                        Mutator::Insert,
                        Datum::map([(STATE_KEY, state.as_str())]),
                    ),
                ]
            }
            Write::Append { key, changes } => vec![Mutation::new(
                "external_ids",
                Mutator::Insert,
                Datum::map([(key.as_str(), changes.as_str())]),
            )],
        };
        let generation = self.status().generation;
        let fenced = Condition::new(
            "external_ids",
            Function::Includes,
            Datum::map([(GENERATION_KEY, generation.to_string())]),
        );
        let ops = [Operation::Mutate {
            table: "Bridge".into(),
            conditions: vec![self.bridge_condition(), fenced],
            mutations,
        }];
        let results = self.ovsdb.transact(&ops).await.map_err(replication)?;
        match results.first().and_then(|r| r.count) {
            Some(1) => Ok(()),
            _ => Err(Error::Replication {
                reason: format!(
                    "bridge {} is gone, or another daemon took over (generation {generation} no longer holds it)",
                    self.bridge
                ),
            }),
        }
    }

    /// The bridge's external_ids, read from the server (they are not in the client's cache).
    async fn read_ids(&self) -> Result<BTreeMap<String, String>, Error> {
        let select = Operation::Select {
            table: "Bridge".into(),
            conditions: vec![self.bridge_condition()],
            columns: Some(vec!["external_ids".into()]),
        };
        let results = self
            .ovsdb
            .transact(std::slice::from_ref(&select))
            .await
            .map_err(|e| Error::Replication {
                reason: e.to_string(),
            })?;
        ids_of(results.first()).ok_or_else(|| Error::Replication {
            reason: format!("bridge {} not found in OVSDB", self.bridge),
        })
    }

    /// Takes the fencing token for `generation` and returns the state the last active daemon
    /// replicated, if any, in one OVSDB transaction.
    pub(crate) async fn fence_and_read(&self, generation: u64) -> Result<Option<NodeState>, Error> {
        let ops = [
            Operation::Mutate {
                table: "Bridge".into(),
                conditions: vec![self.bridge_condition()],
                mutations: Self::set_id(GENERATION_KEY, generation.to_string()).to_vec(),
            },
            Operation::Select {
                table: "Bridge".into(),
                conditions: vec![self.bridge_condition()],
                columns: Some(vec!["external_ids".into()]),
            },
        ];
        // Whatever the outcome, the previous active daemon may have written since our last
        // base: the next write is a whole one.
        self.replica().forget();
        let results = self.ovsdb.transact(&ops).await?;
        let ids = ids_of(results.get(1)).ok_or_else(|| Error::Replication {
            reason: format!("bridge {} not found in OVSDB", self.bridge),
        })?;
        replica::read(&ids).map_err(|reason| Error::Replication { reason })
    }
}

/// The external_ids of the one row a select returned.
fn ids_of(result: Option<&ovsdb::txn::OpResult>) -> Option<BTreeMap<String, String>> {
    result
        .and_then(|r| r.rows.as_ref())
        .and_then(|rows| rows.first())
        .and_then(|row| row.get("external_ids"))
        .map(Datum::string_map)
}

/// The heartbeat frame of daemon `id` at `generation`.
fn heartbeat_frame(id: u16, generation: u64) -> Bytes {
    let mut frame = BytesMut::with_capacity(60);
    // Broadcast from a locally administered address that names the sender.
    frame.put_slice(&[0xff; 6]);
    frame.put_slice(&[0x02, 0, 0, 0]);
    frame.put_u16(id);
    frame.put_u16(HEARTBEAT_ETHERTYPE);
    frame.put_slice(HEARTBEAT_MAGIC);
    frame.put_u16(id);
    frame.put_u64(generation);
    frame.resize(60, 0);
    frame.freeze()
}

fn parse_heartbeat(frame: &[u8]) -> Option<(u16, u64)> {
    let body = frame.get(12..)?;
    let (ethertype, rest) = body.split_at_checked(2)?;
    if ethertype != HEARTBEAT_ETHERTYPE.to_be_bytes() {
        return None;
    }
    let rest = rest.strip_prefix(HEARTBEAT_MAGIC.as_slice())?;
    let id = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
    let generation = u64::from_be_bytes(rest.get(2..10)?.try_into().ok()?);
    Some((id, generation))
}

/// The generation a claim by `id` uses, above `seen`.
fn next_generation(seen: u64, id: u16) -> u64 {
    (((seen >> 16) + 1) << 16) | u64::from(id)
}

/// The task that keeps this daemon's role: heartbeats when active, claims when the active
/// peer falls silent.
pub(crate) struct Agent {
    pub(crate) cfg: HaConfig,
    pub(crate) switch: Switch,
    pub(crate) shared: Arc<HaShared>,
    pub(crate) requests: mpsc::WeakSender<Envelope>,
    /// Set by the switch watcher at every connect: the new session needs SET_ASYNC and a role.
    pub(crate) new_session: Arc<tokio::sync::Notify>,
}

impl Agent {
    pub(crate) async fn run(self) {
        let mut tick = tokio::time::interval(self.cfg.heartbeat());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut generation = 0u64;
        loop {
            tokio::select! {
                // A new session is set up before any role decision is taken on it.
                biased;
                () = self.new_session.notified() => {
                    if let Err(e) = self.set_up_session(generation).await {
                        tracing::warn!(error = %e, "HA: setting up the new switch session failed");
                    }
                }
                _ = tick.tick() => {}
            }
            if self.requests.upgrade().is_none() {
                return;
            }
            if !self.switch.is_connected() {
                continue;
            }
            let result = if self.shared.is_active() {
                self.keep_active(generation).await
            } else if self.shared.silence() >= self.cfg.claim_after() {
                self.claim(&mut generation).await
            } else {
                Ok(())
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "HA: role upkeep failed");
            }
        }
    }

    /// Async config (hear heartbeats as slave) and the role this daemon holds.
    async fn set_up_session(&self, generation: u64) -> Result<(), crate::openflow::Error> {
        let hear_heartbeats = AsyncConfig {
            packet_in_mask: [1 << OFPR_ACTION, 1 << OFPR_ACTION],
            port_status_mask: [0x7, 0x7],
            flow_removed_mask: [0, 0],
        };
        self.switch
            .send_checked(Message::SetAsync(hear_heartbeats))
            .await?;
        // Silence counts on this session only: a standby listens a whole `claim_after` on it
        // before it may claim (the switch may have dialled it long after it started).
        self.shared.reset_silence();
        if self.shared.is_active() {
            match self.role_request(Role::Master, generation).await {
                Ok(_) => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "HA: could not keep the master role after reconnecting");
                    self.step_down();
                }
            }
        }
        self.become_slave().await
    }

    async fn role_request(
        &self,
        role: Role,
        generation_id: u64,
    ) -> Result<RoleMsg, crate::openflow::Error> {
        match self
            .switch
            .request(Message::RoleRequest(RoleMsg {
                role,
                generation_id,
            }))
            .await?
        {
            Message::RoleReply(reply) => Ok(reply),
            other => Err(crate::openflow::Error::Protocol(format!(
                "ROLE_REQUEST answered with message type {}",
                other.msg_type()
            ))),
        }
    }

    /// Slave at the switch's current generation (a fresh connection is "equal" and could
    /// write).
    async fn become_slave(&self) -> Result<(), crate::openflow::Error> {
        let current = self.role_request(Role::NoChange, 0).await?;
        self.role_request(Role::Slave, current.generation_id)
            .await?;
        self.shared
            .update(|s| s.generation = s.generation.max(current.generation_id));
        Ok(())
    }

    /// Active: still master at the switch? Then tell the standbys.
    async fn keep_active(&self, generation: u64) -> Result<(), crate::openflow::Error> {
        let reply = self.role_request(Role::NoChange, 0).await?;
        if reply.role != Role::Master {
            tracing::warn!(
                generation = reply.generation_id,
                "HA: another peer took the master role; this daemon is standby now"
            );
            self.step_down();
            return Ok(());
        }
        let heartbeat = PacketOut {
            buffer_id: NO_BUFFER,
            in_port: OFPP_CONTROLLER,
            actions: vec![Action::output(OFPP_CONTROLLER)],
            data: heartbeat_frame(self.cfg.id, generation),
        };
        self.switch.send(Message::PacketOut(heartbeat)).await
    }

    fn step_down(&self) {
        self.shared.active.store(false, Ordering::Release);
        self.shared.reset_silence();
        self.shared.update(|s| {
            s.role = HaRole::Standby;
            s.active_peer = None;
        });
    }

    /// The active peer is silent: ask for the master role, then take the desired state over.
    async fn claim(&self, generation: &mut u64) -> Result<(), crate::openflow::Error> {
        let current = self.role_request(Role::NoChange, 0).await?;
        if current.generation_id > self.shared.max_generation().max(*generation) {
            // A peer claimed since we last heard one: give it a whole silence to show up.
            tracing::info!(
                generation = current.generation_id,
                "HA: a peer claimed the master role recently; waiting for its heartbeats"
            );
            self.shared.saw_generation(current.generation_id);
            return Ok(());
        }
        let seen = current
            .generation_id
            .max(self.shared.max_generation())
            .max(*generation);
        let claim = next_generation(seen, self.cfg.id);
        match self.role_request(Role::Master, claim).await {
            Ok(_) => {}
            Err(crate::openflow::Error::Switch { error, .. }) if error.kind == ROLE_STALE => {
                tracing::info!("HA: another peer claimed first; staying standby");
                self.shared.reset_silence();
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        *generation = claim;
        self.shared.update(|s| s.generation = claim);
        tracing::warn!(
            id = self.cfg.id,
            generation = claim,
            silent_for = ?self.shared.silence(),
            "HA: the active peer is silent; taking over"
        );
        match self.take_over().await {
            Ok(()) => {
                self.shared.active.store(true, Ordering::Release);
                self.shared.update(|s| {
                    s.role = HaRole::Active;
                    s.generation = claim;
                    s.active_peer = Some(self.cfg.id);
                    s.takeovers += 1;
                });
                tracing::info!(id = self.cfg.id, "HA: this daemon is active");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "HA: taking the desired state over failed; back to standby");
                self.shared.reset_silence();
                self.become_slave().await
            }
        }
    }

    async fn take_over(&self) -> Result<(), Error> {
        let Some(requests) = self.requests.upgrade() else {
            return Err(Error::Shutdown);
        };
        let generation = self.shared.status().generation;
        request::call(&requests, |reply| Request::TakeOver { generation, reply }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_round_trip_and_other_frames_are_not_heartbeats() {
        let frame = heartbeat_frame(7, 0x3_0007);
        assert_eq!(frame.len(), 60);
        assert_eq!(parse_heartbeat(&frame), Some((7, 0x3_0007)));
        assert_eq!(parse_heartbeat(&frame[..20]), None);
        let mut other = frame.to_vec();
        other[12] = 0x08;
        assert_eq!(parse_heartbeat(&other), None);
        assert_eq!(parse_heartbeat(&[]), None);
    }

    #[test]
    fn claims_outbid_every_generation_seen_and_never_tie() {
        assert_eq!(next_generation(0, 1), 0x1_0001);
        assert_eq!(next_generation(0x1_0001, 2), 0x2_0002);
        assert_ne!(next_generation(0x5_0001, 1), next_generation(0x5_0001, 2));
        assert!(next_generation(0x5_0002, 1) > 0x5_0002);
    }

    #[test]
    fn config_is_checked() {
        let good = HaConfig {
            id: 1,
            controllers: vec!["tcp:127.0.0.1:6653".into()],
            heartbeat_ms: 200,
            takeover_ms: 1000,
        };
        assert!(good.validate().is_ok());
        assert!(HaConfig {
            id: 0,
            ..good.clone()
        }
        .validate()
        .is_err());
        assert!(HaConfig {
            controllers: vec![],
            ..good.clone()
        }
        .validate()
        .is_err());
        assert!(HaConfig {
            takeover_ms: 400,
            ..good
        }
        .validate()
        .is_err());
    }
}
