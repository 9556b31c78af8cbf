//! The disk's end of the writer: every batch the switch took is recorded here, in the journal
//! (one sync, off the async threads) and, with HA, first in the replica in OVSDB; a snapshot
//! is written when the journal has grown long.

use std::sync::{Arc, Mutex};

use crate::sdn::error::Error;
use crate::sdn::ha::HaShared;
use crate::sdn::journal::{Journal, StateError};
use crate::sdn::state::{Change, NodeState};

/// The node's journal, shared with the blocking tasks that write it.
pub(super) struct Persistence {
    journal: Arc<Mutex<Journal>>,
}

impl Persistence {
    pub fn new(journal: Journal) -> Persistence {
        Persistence {
            journal: Arc::new(Mutex::new(journal)),
        }
    }

    /// Records `changes`, which made `state`: replicated first (with `ha`), then appended to
    /// the journal. Nothing to record is nothing to do.
    pub async fn record(
        &self,
        ha: Option<&HaShared>,
        state: &NodeState,
        changes: Vec<Change>,
    ) -> Result<(), Error> {
        if changes.is_empty() {
            return Ok(());
        }
        if let Some(ha) = ha {
            ha.replicate(state, &changes).await?;
        }
        self.record_locally(state, changes).await
    }

    /// The journal part of [`Persistence::record`], without replication.
    pub async fn record_locally(
        &self,
        state: &NodeState,
        changes: Vec<Change>,
    ) -> Result<(), Error> {
        let journal = self.journal.clone();
        let appended = tokio::task::spawn_blocking(move || lock(&journal).append(&changes))
            .await
            .map_err(|e| {
                Error::State(Arc::new(StateError::Io {
                    path: "journal".into(),
                    source: std::io::Error::other(e.to_string()),
                }))
            })?;
        if appended? {
            self.snapshot(state.clone()).await;
        }
        Ok(())
    }

    /// Writes `state` as the snapshot. A failed snapshot loses nothing: the journal still
    /// holds every change.
    async fn snapshot(&self, state: NodeState) {
        let journal = self.journal.clone();
        let written = tokio::task::spawn_blocking(move || lock(&journal).snapshot(&state)).await;
        // The state's copy and its text were as big as the state: give them back.
        super::bundle::release_freed_memory();
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "writing the state snapshot failed; the journal keeps growing")
            }
            Err(e) => {
                tracing::warn!(error = %e, "the state snapshot task failed; the journal keeps growing")
            }
        }
    }
}

fn lock(journal: &Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    journal.lock().unwrap_or_else(|e| e.into_inner())
}
