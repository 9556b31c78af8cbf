//! The node core: the seed's semantics as a pure state machine, the way quinn-proto is QUIC's.
//! No tokio, no sockets, no clock. It holds the desired state and the desired flow table
//! derived from it; an operation (`ops.rs`) changes both, all of it or none of it, and the core
//! says what the world must do about it: the flow changes as one transaction, the journal
//! record, the VXLAN device's host set, the DNS names still in use, what OVSDB must do for pods'
//! ports ([`Effects`]; the OVSDB part of operations is data, `ovsdb.rs`). The async shell
//! (`writer.rs`, `port_steps.rs`, `node/`) carries the effects out and feeds results back: a
//! pod add OVSDB refused (taken back), the ofport a port got, the flows the switch holds
//! (`sync.rs`: setup, resync, drift repair and HA take-over plan through the same core).
//!
//! Operations come in batches: the shell applies each of a batch's operations to the core,
//! takes the batch's [`Effects`] (the net change of all of them), and then either commits the
//! batch (the switch and the journal took it) or rolls it back (one of them failed).

mod desired;
mod netpol;
mod notice;
mod ops;
pub mod ovsdb;
mod repair;
mod sync;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashSet;

use ofnode_proto::FlowMod;

pub use self::ovsdb::{PortStep, TakeBack};
pub use desired::{all_entities, enforcing_setup, entity_flows, netpol_view, parse_netpol_flow};
pub use netpol::NetPolSummary;
pub use notice::Notice;
pub use ops::{check_egress, check_multicast_local, check_multicast_vxlan, max_multicast_ports};
pub use repair::{PerTable, Repaired};
pub use sync::{Reconcile, SetupOutcome, SetupPlan};

use super::error::Error;
use super::policy::networkpolicy::Index;
use super::state::{Change, Entity, NodeState};
use super::table::{Diff, Flow, FlowTable};
use super::types::HostSubnet;

/// The desired state, its flow table, and the open batch.
#[derive(Debug)]
pub struct Core {
    state: NodeState,
    table: FlowTable,
    batch: Batch,
    /// The NetworkPolicy mode's flows by policy (its part of `table`, kept incrementally).
    netpol: Index,
}

/// What the open batch did so far.
#[derive(Debug, Default)]
struct Batch {
    /// Changes that undo the batch's, in the order they were made.
    undo: Vec<Change>,
    /// The batch's changes, as the journal records them.
    journal: Vec<Change>,
    /// What the batch's operations want said (the core does not log).
    notices: Vec<Notice>,
    /// What OVSDB must do for the batch's pods' ports.
    ports: Vec<PortStep>,
    host_subnets_changed: bool,
    egress_changed: bool,
    netpol_changed: bool,
}

/// What the shell must carry out for a batch: the flows first (one bundle), then the journal
/// (one sync); only when both succeeded the rest (the pods' ports in OVSDB last), and the batch
/// is committed.
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
    /// What the shell should say (log) once the batch is committed.
    pub notices: Vec<Notice>,
    /// What OVSDB must do for pods' ports, at most one step per port, after the bundle and the
    /// journal: an operation that has a step is answered once its step is carried out.
    pub ports: Vec<PortStep>,
}

fn flow_error(flow: &str, e: impl std::fmt::Display) -> Error {
    Error::Flow {
        flow: flow.to_string(),
        reason: e.to_string(),
    }
}

/// A flow as the desired table holds it; one that cannot be sent (it does not fit the bundle
/// add it travels in) is refused, named: never held as an empty or cut flow.
pub fn held_flow(fm: &FlowMod) -> Result<Flow, Error> {
    Flow::from_flow_mod(fm).map_err(|reason| Error::flow(fm, reason))
}

/// The flows `entity` contributes in `state`, as the desired table holds them.
fn held_flows_of(state: &NodeState, entity: Entity) -> Result<Vec<Flow>, Error> {
    entity_flows(state, entity)?.iter().map(held_flow).collect()
}

/// The NetworkPolicy index's flows (text), as the desired table holds them.
fn held_netpol_flow(text: &str) -> Result<Flow, Error> {
    held_flow(&parse_netpol_flow(text)?)
}

/// The desired table of `state`, built entity by entity (never all flows at once), the
/// NetworkPolicy mode's from its index.
fn build_table(state: &NodeState, netpol: &Index) -> Result<FlowTable, Error> {
    let mut flows = Vec::new();
    for entity in all_entities(state).filter(|e| *e != Entity::NetPol) {
        flows.extend(held_flows_of(state, entity)?);
    }
    for text in netpol.texts() {
        flows.push(held_netpol_flow(&text)?);
    }
    Ok(FlowTable::from_flows(flows))
}

/// The NetworkPolicy mode's index of `state` (empty in the other modes).
fn build_netpol(state: &NodeState) -> Index {
    match enforcing_setup(state) {
        Some(setup) => Index::build(&netpol_view(state, setup)),
        None => Index::default(),
    }
}

impl Core {
    /// A core holding `state`, its table derived from it.
    pub fn new(state: NodeState) -> Result<Core, Error> {
        let netpol = build_netpol(&state);
        let table = build_table(&state, &netpol)?;
        Ok(Core {
            state,
            table,
            batch: Batch::default(),
            netpol,
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
        if let Some(keys) = self.netpol_watchers(&change) {
            return self.apply_netpol_change(change, keys);
        }
        let old = held_flows_of(&self.state, entity)?;
        let undo = self.state.apply(change);
        let new = match held_flows_of(&self.state, entity) {
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

    /// The policies whose flows `change` may change in the current state, when it is one the
    /// NetworkPolicy mode's index must follow (None: an ordinary entity change).
    fn netpol_watchers(&self, change: &Change) -> Option<Vec<String>> {
        let setup = enforcing_setup(&self.state)?;
        let view = netpol_view(&self.state, setup);
        let pod = |ip: &std::net::Ipv4Addr| -> Vec<String> {
            match (
                self.state.pod_meta.get(ip),
                self.state.pods.contains_key(ip),
            ) {
                (Some(meta), true) => view.watching_pod(&meta.namespace, &meta.labels),
                _ => Vec::new(),
            }
        };
        Some(match change {
            Change::NetPol { key, .. } => vec![key.clone()],
            Change::Namespace { name, .. } => view.watching_namespace(name),
            Change::PodMeta { ip, .. } => pod(ip),
            Change::RemotePod { ip, .. } => match self.state.remote_pods.get(ip) {
                Some(p) => view.watching_pod(&p.namespace, &p.labels),
                None => Vec::new(),
            },
            // A pod's flows alone change the mode's only when its namespace is known (the view
            // counts a local pod with both).
            Change::Pod { ip, .. } if self.state.pod_meta.contains_key(ip) => pod(ip),
            _ => return None,
        })
    }

    /// Applies a change the NetworkPolicy mode's index follows: the policies it may touch
    /// (`keys` before it, and those after it) are recomputed, and only the merged flows that
    /// changed are replaced in the table (with the change's own entity's flows, for a pod).
    fn apply_netpol_change(
        &mut self,
        change: Change,
        mut keys: Vec<String>,
    ) -> Result<Change, Error> {
        let entity = change.entity();
        let own_flows = |state: &NodeState| match entity {
            Entity::NetPol => Ok(Vec::new()),
            _ => held_flows_of(state, entity),
        };
        let old = own_flows(&self.state)?;
        let undo = self.state.apply(change.clone());
        keys.extend(self.netpol_watchers(&change).unwrap_or_default());
        let Some(setup) = self.state.setup else {
            return Ok(undo);
        };
        let changes = self
            .netpol
            .update(&netpol_view(&self.state, &setup), keys.clone());
        let parsed = own_flows(&self.state).and_then(|new| {
            let removed = changes.iter().filter_map(|c| c.before.as_deref());
            let added = changes.iter().filter_map(|c| c.after.as_deref());
            let (removed, added) = (removed.map(held_netpol_flow), added.map(held_netpol_flow));
            Ok((
                new,
                removed.collect::<Result<Vec<_>, _>>()?,
                added.collect::<Result<Vec<_>, _>>()?,
            ))
        });
        let (new, removed, added) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                self.state.apply(undo);
                self.netpol.update(&netpol_view(&self.state, &setup), keys);
                return Err(e);
            }
        };
        for flow in old.iter().chain(&removed) {
            self.table.remove(flow);
        }
        for flow in new.into_iter().chain(added) {
            self.table.insert(flow);
        }
        self.batch.netpol_changed = true;
        Ok(undo)
    }

    /// Applies an operation's changes to the open batch: all of them, or (on error) none.
    fn apply(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        self.apply_saying(changes, Vec::new())
    }

    /// [`Core::apply`], with what the operation wants said beyond what its changes tell.
    fn apply_saying(
        &mut self,
        changes: Vec<Change>,
        mut notices: Vec<Notice>,
    ) -> Result<(), Error> {
        let mark = self.batch.undo.len();
        for change in &changes {
            notices.extend(Notice::of_change(&self.state, change));
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
        self.batch.notices.extend(notices);
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
            notices: std::mem::take(&mut self.batch.notices),
            ports: std::mem::take(&mut self.batch.ports),
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
        if self.batch.netpol_changed {
            // The table is back; the index follows it (rare: only a failed batch).
            self.netpol = build_netpol(&self.state);
        }
        self.batch = Batch::default();
    }

    fn require_setup(&self) -> Result<(), Error> {
        self.state.setup.map(|_| ()).ok_or(Error::NotSetUp)
    }
}
