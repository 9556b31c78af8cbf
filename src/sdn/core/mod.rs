//! The node core: the seed's semantics as a pure state machine, the way quinn-proto is QUIC's.
//! No tokio, no sockets, no clock. It holds the desired state and the desired flow table
//! derived from it; an operation (`ops.rs`) changes both, all of it or none of it, and the core
//! says what the world must do about it: the flow changes as one transaction, the journal
//! record, the VXLAN device's host set, the DNS names still in use ([`Effects`]). The OVSDB part
//! of operations is data too (`ovsdb.rs`). The async shell (`writer.rs`, `node/`) carries the
//! effects out and feeds results back: the ofport OVSDB gave a pod, the flows the switch holds
//! (`sync.rs`: setup, resync, drift repair and HA take-over plan through the same core).
//!
//! Operations come in batches: the shell applies each of a batch's operations to the core,
//! takes the batch's [`Effects`] (the net change of all of them), and then either commits the
//! batch (the switch and the journal took it) or rolls it back (one of them failed).

mod desired;
mod netpol;
mod ops;
pub mod ovsdb;
mod repair;
mod sync;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashSet;

pub use desired::{all_entities, entity_flows, netpol_view};
pub use netpol::NetPolSummary;
pub use ops::{check_egress, check_multicast_local, check_multicast_vxlan, max_multicast_ports};
pub use repair::{PerTable, Repaired};
pub use sync::{Reconcile, SetupOutcome, SetupPlan};

use super::error::Error;
use super::state::{Change, Entity, NodeState};
use super::table::{self, Diff, Flow, FlowTable};
use super::types::HostSubnet;

/// The desired state, its flow table, and the open batch.
#[derive(Debug)]
pub struct Core {
    state: NodeState,
    table: FlowTable,
    batch: Batch,
}

/// What the open batch did so far.
#[derive(Debug, Default)]
struct Batch {
    /// Changes that undo the batch's, in the order they were made.
    undo: Vec<Change>,
    /// The batch's changes, as the journal records them.
    journal: Vec<Change>,
    host_subnets_changed: bool,
    egress_changed: bool,
}

/// What the shell must carry out for a batch: the flows first (one bundle), then the journal
/// (one sync); only when both succeeded the rest, and the batch is committed.
#[derive(Debug, Default)]
pub struct Effects {
    /// The flow changes, deletes before adds, as one transaction.
    pub flows: Diff,
    /// The journal record; empty when the batch changed nothing.
    pub journal: Vec<Change>,
    /// Every host subnet, when the batch changed any: what the VXLAN device is kept in line with.
    pub vxlan_hosts: Option<Vec<HostSubnet>>,
    /// The DNS names egress policies still use, when the batch changed a policy.
    pub dns_names: Option<HashSet<String>>,
}

fn flow_error(flow: &str, e: impl std::fmt::Display) -> Error {
    Error::Flow {
        flow: flow.to_string(),
        reason: e.to_string(),
    }
}

fn parse_all(flows: &[String]) -> Result<Vec<Flow>, Error> {
    flows
        .iter()
        .map(|f| table::parse_flow(f).map_err(|e| flow_error(f, e)))
        .collect()
}

/// The desired table of `state`, built entity by entity (never all flow texts at once).
fn build_table(state: &NodeState) -> Result<FlowTable, Error> {
    let mut flows = Vec::new();
    for entity in all_entities(state) {
        flows.extend(parse_all(&entity_flows(state, entity))?);
    }
    Ok(FlowTable::from_flows(flows))
}

impl Core {
    /// A core holding `state`, its table derived from it.
    pub fn new(state: NodeState) -> Result<Core, Error> {
        let table = build_table(&state)?;
        Ok(Core {
            state,
            table,
            batch: Batch::default(),
        })
    }

    pub fn state(&self) -> &NodeState {
        &self.state
    }

    /// The desired flow table.
    pub fn flows(&self) -> &FlowTable {
        &self.table
    }

    /// Applies one change to the state and the table, or (on error) to neither. Returns the
    /// change that undoes it. Whole-state changes are setup's (`sync.rs`), which swaps cores.
    fn apply_change(&mut self, change: Change) -> Result<Change, Error> {
        let entity = change.entity();
        if entity == Entity::Everything {
            return Err(flow_error(
                "<whole state>",
                "a whole-state change inside a batch",
            ));
        }
        let old = parse_all(&entity_flows(&self.state, entity))?;
        let undo = self.state.apply(change);
        let new = match parse_all(&entity_flows(&self.state, entity)) {
            Ok(new) => new,
            Err(e) => {
                self.state.apply(undo);
                return Err(e);
            }
        };
        for flow in &old {
            self.table.remove(flow);
        }
        for flow in new {
            self.table.insert(flow);
        }
        Ok(undo)
    }

    /// Applies an operation's changes to the open batch: all of them, or (on error) none.
    fn apply(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        let mark = self.batch.undo.len();
        for change in &changes {
            match self.apply_change(change.clone()) {
                Ok(undo) => self.batch.undo.push(undo),
                Err(e) => {
                    self.undo_to(mark);
                    return Err(e);
                }
            }
        }
        for change in &changes {
            match change {
                Change::HostSubnet { .. } => self.batch.host_subnets_changed = true,
                Change::Egress { .. } => self.batch.egress_changed = true,
                _ => {}
            }
        }
        self.batch.journal.extend(changes);
        Ok(())
    }

    fn undo_to(&mut self, mark: usize) {
        while self.batch.undo.len() > mark {
            if let Some(undo) = self.batch.undo.pop() {
                // Undoing restores flows that parsed a moment ago.
                let _ = self.apply_change(undo);
            }
        }
    }

    /// What the open batch asks of the world (its journal record is handed over).
    pub fn take_effects(&mut self) -> Effects {
        let vxlan_hosts = self
            .batch
            .host_subnets_changed
            .then(|| self.state.host_subnets.values().copied().collect());
        let dns_names = self.batch.egress_changed.then(|| {
            self.state
                .egress
                .values()
                .flat_map(|e| e.dns_names().map(str::to_string))
                .collect()
        });
        Effects {
            flows: self.table.diff(),
            journal: std::mem::take(&mut self.batch.journal),
            vxlan_hosts,
            dns_names,
        }
    }

    /// Ends the batch, keeping its changes: the switch and the journal have them.
    pub fn commit(&mut self) {
        self.table.commit_batch();
        self.batch = Batch::default();
    }

    /// Ends the batch by taking back every change it made.
    pub fn rollback(&mut self) {
        self.table.rollback();
        while let Some(undo) = self.batch.undo.pop() {
            self.state.apply(undo);
        }
        self.batch = Batch::default();
    }

    fn require_setup(&self) -> Result<(), Error> {
        self.state.setup.map(|_| ()).ok_or(Error::NotSetUp)
    }
}
