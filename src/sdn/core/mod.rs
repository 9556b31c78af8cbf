//! The node core: the seed's semantics as a pure state machine, the way quinn-proto is QUIC's.
//! No tokio, no sockets, no clock. It holds the desired state and the desired flow table
//! derived from it; an operation (`ops.rs`) changes both, all of it or none of it, and the core
//! says what the world must do about it: the flow changes as one transaction, the journal
//! record, the VXLAN device's host set, the DNS names still in use, what OVSDB must do for pods'
//! ports ([`Effects`]; the OVSDB part of operations is data, `ports.rs`). The async shell
//! (`writer.rs`, `port_steps.rs`, `node/`) carries the effects out and feeds results back: a
//! pod add OVSDB refused (taken back), the ofport a port got, the flows the switch holds
//! (`sync.rs`: setup, resync, drift repair and HA take-over plan through the same core).
//!
//! Operations come in batches: the shell applies each of a batch's operations to the core,
//! takes the batch's [`Effects`] (the net change of all of them), and then either commits the
//! batch (the switch and the journal took it) or rolls it back (one of them failed).

mod admin;
pub mod audit_names;
mod desired;
mod error;
pub mod explain;
mod netpol;
mod notice;
mod ops;
pub mod ports;
mod repair;
mod sync;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeSet, HashSet};

use ofnode_proto::FlowMod;

pub use self::ports::{PortStep, TakeBack};
pub use admin::AdminSummary;
pub use desired::{all_entities, enforcing_setup, entity_flows};
pub use error::CoreError;
pub use netpol::{LabelEdit, NetPolSummary};
pub use notice::Notice;
pub use ops::{check_egress, check_multicast_local, check_multicast_vxlan, max_multicast_ports};
pub use repair::{PerTable, Repaired};
pub use sync::{Reconcile, SetupOutcome, SetupPlan};

use super::layout::POLICY_AUDIT;
use super::produce::admin::AdminEngine;
use super::produce::audit;
use super::produce::netpol::{Engine, FlowChange};
use super::state::{Change, Entity, NodeState};
use super::store::{Delta, Store};
use super::table::{Diff, Flow, FlowTable};
use super::types::HostSubnet;
use error::CoreError as Error;

/// A flow a producer changed, as the table holds it: before and after (None: absent).
type HeldChange = (Option<Flow>, Option<Flow>);

/// The desired state, its flow table, and the open batch.
#[derive(Debug)]
pub struct Core {
    store: Store,
    table: FlowTable,
    batch: Batch,
    /// The NetworkPolicy mode's flows (its part of `table`, kept from the store's groups);
    /// None in the other modes.
    netpol: Option<Engine>,
    /// The cluster admin tiers' flows (AdminNetworkPolicy, BaselineAdminNetworkPolicy), in the
    /// NetworkPolicy mode only.
    admin: Option<AdminEngine>,
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
    /// The audited rules (meter ids) whose table 24 flow the bundle adds, or removes.
    pub meters: MeterChanges,
}

/// The audit meters a batch needs before its bundle (`added`) and no longer needs after it
/// (`removed`): the keys of the table 24 flows it adds and deletes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MeterChanges {
    pub added: BTreeSet<u32>,
    pub removed: BTreeSet<u32>,
}

impl MeterChanges {
    fn of(diff: &Diff) -> MeterChanges {
        let keys = |flows: &[Flow]| -> BTreeSet<u32> {
            flows.iter().filter_map(audit::audited_key).collect()
        };
        let (adds, deletes) = (keys(&diff.adds), keys(&diff.deletes));
        MeterChanges {
            added: adds.difference(&deletes).copied().collect(),
            removed: deletes.difference(&adds).copied().collect(),
        }
    }
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

/// The NetworkPolicy mode's engine of `store`, every policy applied (None in the other modes).
fn build_netpol(store: &mut Store) -> Option<Engine> {
    let setup = *enforcing_setup(store.state())?;
    let mut engine = Engine::new(setup.cluster_network);
    let policies: Vec<_> = store
        .state()
        .netpols
        .iter()
        .map(|(key, stored)| {
            let ns = store
                .state()
                .namespaces
                .get(&stored.policy.namespace)
                .cloned();
            (key.clone(), stored.clone(), ns)
        })
        .collect();
    for (key, stored, ns) in policies {
        let (groups, world) = store.groups_and_world();
        // A stored policy passed this check when it was applied.
        let _ = engine.apply_policy(&key, Some(&stored), ns.as_ref(), groups, world);
    }
    engine.take_changes();
    Some(engine)
}

/// The admin tiers' engine of `store`, every admin policy applied (None outside the
/// NetworkPolicy mode).
fn build_admin(store: &mut Store) -> Option<AdminEngine> {
    enforcing_setup(store.state())?;
    let mut engine = AdminEngine::new();
    let policies: Vec<_> = store
        .state()
        .admin_policies
        .iter()
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    for (key, policy) in policies {
        let (groups, world) = store.groups_and_world();
        engine.apply_policy(&key, Some(&policy), groups, world);
    }
    engine.take_changes();
    Some(engine)
}

/// The flows `entity` contributes in `state`, as the desired table holds them.
fn held_flows_of(state: &NodeState, entity: &Entity) -> Result<Vec<Flow>, Error> {
    entity_flows(state, entity).iter().map(held_flow).collect()
}

/// The desired table of `store`, built entity by entity (never all flow texts at once), the
/// NetworkPolicy mode's from its engine.
fn build_table(
    store: &Store,
    netpol: Option<&Engine>,
    admin: Option<&AdminEngine>,
) -> Result<FlowTable, Error> {
    let mut flows = Vec::new();
    for entity in all_entities(store.state()) {
        flows.extend(held_flows_of(store.state(), &entity)?);
    }
    for fm in netpol.into_iter().flat_map(Engine::flow_mods) {
        flows.push(held_flow(&fm)?);
    }
    for fm in admin.into_iter().flat_map(AdminEngine::flow_mods) {
        flows.push(held_flow(fm)?);
    }
    Ok(FlowTable::from_flows(flows))
}

impl Core {
    /// A core holding `state`, its table derived from it.
    pub fn new(state: NodeState) -> Result<Core, Error> {
        let mut store = Store::new(state);
        let netpol = build_netpol(&mut store);
        let admin = build_admin(&mut store);
        let table = build_table(&store, netpol.as_ref(), admin.as_ref())?;
        Ok(Core {
            store,
            table,
            batch: Batch::default(),
            netpol,
            admin,
        })
    }

    pub fn state(&self) -> &NodeState {
        self.store.state()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The audited rules (meter ids) of the desired table: its table 24 flows'.
    pub fn audited_keys(&self) -> BTreeSet<u32> {
        self.table
            .iter()
            .filter(|flow| flow.table() == POLICY_AUDIT)
            .filter_map(audit::audited_key)
            .collect()
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
        let old = held_flows_of(self.state(), &entity)?;
        let mut deltas = Vec::new();
        let undo = self.store.apply(change.clone(), &mut deltas);
        let built = held_flows_of(self.state(), &entity)
            .and_then(|new| Ok((new, self.follow_netpol(&change, &undo, &deltas)?)));
        let (new, netpol) = match built {
            Ok(built) => built,
            Err(e) => {
                let mut deltas = Vec::new();
                let redo = self.store.apply(undo.clone(), &mut deltas);
                // The producers follow the store back (their own changes cancel out).
                let _ = self.follow_netpol(&undo, &redo, &deltas);
                return Err(e);
            }
        };
        for flow in &old {
            self.table.remove(flow);
        }
        for flow in new {
            self.table.insert(flow);
        }
        for (before, after) in netpol {
            if let Some(before) = before {
                self.table.remove(&before);
            }
            if let Some(after) = after {
                self.table.insert(after);
            }
        }
        Ok(undo)
    }

    /// What `change` (already in the store, its group `deltas` with it) did to the
    /// NetworkPolicy mode's flows: members that joined or left groups, a policy applied or
    /// deleted, the policies of a namespace that appeared, went or changed its VNID.
    fn follow_netpol(
        &mut self,
        change: &Change,
        undo: &Change,
        deltas: &[Delta],
    ) -> Result<Vec<HeldChange>, Error> {
        let Some(engine) = self.netpol.as_mut() else {
            return Ok(Vec::new());
        };
        let (groups, world) = self.store.groups_and_world();
        engine.on_deltas(deltas, groups, world);
        let keys: Vec<String> = match (change, undo) {
            (Change::NetPol { key, .. }, _) => vec![key.clone()],
            // A namespace's policies are computed with its VNID and audit setting: they follow
            // its coming, going, new VNID or new setting (its labels reach the flows through the
            // groups alone).
            (
                Change::Namespace { name, namespace },
                Change::Namespace {
                    namespace: before, ..
                },
            ) if namespace.as_ref().map(|n| (n.vnid, n.audit))
                != before.as_ref().map(|n| (n.vnid, n.audit)) =>
            {
                let prefix = format!("{name}/");
                self.store
                    .state()
                    .netpols
                    .range(prefix.clone()..)
                    .take_while(|(key, _)| key.starts_with(&prefix))
                    .map(|(key, _)| key.clone())
                    .collect()
            }
            _ => Vec::new(),
        };
        let mut failed = None;
        for key in keys {
            let state = self.store.state();
            let stored = state.netpols.get(&key).cloned();
            let ns = stored
                .as_ref()
                .and_then(|s| state.namespaces.get(&s.policy.namespace))
                .cloned();
            let (groups, world) = self.store.groups_and_world();
            if let Err(e) = engine.apply_policy(&key, stored.as_ref(), ns.as_ref(), groups, world) {
                failed.get_or_insert(e);
            }
        }
        let mut changes = engine.take_changes();
        if let Some(e) = failed {
            return Err(e.into());
        }
        changes.extend(self.follow_admin(change, undo, deltas));
        let held = |fm: Option<FlowMod>| fm.as_ref().map(held_flow).transpose();
        changes
            .into_iter()
            .map(|FlowChange { before, after }| Ok((held(before)?, held(after)?)))
            .collect()
    }

    /// What `change` did to the admin tiers' flows: the policy applied or deleted, the
    /// policies reading groups whose members changed, every policy when a namespace's VNID
    /// changed (ingress peers carry it).
    fn follow_admin(
        &mut self,
        change: &Change,
        undo: &Change,
        deltas: &[Delta],
    ) -> Vec<FlowChange> {
        let Some(engine) = self.admin.as_mut() else {
            return Vec::new();
        };
        let (groups, world) = self.store.groups_and_world();
        engine.on_deltas(deltas, groups, world);
        match (change, undo) {
            (Change::AdminPolicy { key, .. }, _) => {
                let policy = self.store.state().admin_policies.get(key).cloned();
                let (groups, world) = self.store.groups_and_world();
                engine.apply_policy(key, policy.as_ref(), groups, world);
            }
            (
                Change::Namespace { namespace, .. },
                Change::Namespace {
                    namespace: before, ..
                },
            ) if namespace.as_ref().map(|n| n.vnid) != before.as_ref().map(|n| n.vnid) => {
                let (groups, world) = self.store.groups_and_world();
                engine.recompute_all(groups, world);
            }
            (Change::Node { .. }, _) => {
                let (groups, world) = self.store.groups_and_world();
                engine.on_nodes(groups, world);
            }
            _ => {}
        }
        engine.take_changes()
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
            notices.extend(Notice::of_change(change));
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
                // Undoing restores flows that were built a moment ago.
                let _ = self.apply_change(undo);
            }
        }
    }

    /// What the open batch asks of the world (its journal record is handed over).
    pub fn take_effects(&mut self) -> Effects {
        let state = self.store.state();
        let vxlan_hosts = self
            .batch
            .host_subnets_changed
            .then(|| state.host_subnets.values().copied().collect());
        let dns_names = self.batch.egress_changed.then(|| {
            state
                .egress
                .values()
                .flat_map(|e| e.dns_names().map(str::to_string))
                .collect()
        });
        let flows = self.table.diff();
        Effects {
            meters: MeterChanges::of(&flows),
            flows,
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

    /// Ends the batch by taking back every change it made: each is undone through the store
    /// and the producers (so their indexes and groups follow), then the table is restored
    /// exactly as it was.
    pub fn rollback(&mut self) {
        self.undo_to(0);
        self.table.rollback();
        self.batch = Batch::default();
    }

    fn require_setup(&self) -> Result<(), Error> {
        self.state().setup.map(|_| ()).ok_or(Error::NotSetUp)
    }
}
