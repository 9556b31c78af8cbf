//! What the writer and the HA agent share: the role, the heartbeats heard, and the desired
//! state replicated to the bridge's `external_ids` behind a fencing generation.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ofnode_proto::PacketInView;
use tokio::time::Instant;

use super::heartbeat::parse_heartbeat;
use super::{HaRole, HaStatus, GENERATION_KEY, STATE_KEY};
use crate::ovsdb::txn::{Condition, Function, Mutation, Mutator, Operation};
use crate::ovsdb::{self, Datum};
use crate::sdn::error::Error;
use crate::sdn::replica::{self, Replica, Write};
use crate::sdn::state::{Change, NodeState};

/// What the writer and the agent share.
#[derive(Debug)]
pub struct HaShared {
    pub(super) active: AtomicBool,
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

    pub(super) fn update(&self, f: impl FnOnce(&mut HaStatus)) {
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

    /// A packet-in from the switch (of either format): records a peer's heartbeat.
    pub(crate) fn on_packet_in(&self, packet_in: &PacketInView<'_>) {
        let Some((id, generation)) = parse_heartbeat(packet_in.packet) else {
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

    pub(super) fn silence(&self) -> Duration {
        self.heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last
            .elapsed()
    }

    pub(super) fn max_generation(&self) -> u64 {
        self.heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .max_generation
    }

    /// Remembers a generation learnt from the switch, and starts the silence over.
    pub(super) fn saw_generation(&self, generation: u64) {
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.max_generation = heard.max_generation.max(generation);
        heard.last = Instant::now();
    }

    pub(super) fn reset_silence(&self) {
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
