//! The one writer of the desired state and the desired flow table.
//!
//! Operations reach it as requests on a channel. It takes whatever requests are waiting (up to
//! a bound) as one batch: each request's plan is applied to the state and the table in turn,
//! then the batch's net flow changes go to the switch as ONE bundle and its state changes to
//! the journal with ONE sync, and only then are the requests answered. If the bundle or the
//! journal fails, every change of the batch is undone, so an operation either happened — on
//! the switch and on disk — or did not. Operations never share more than a bundle: each is
//! whole inside it.
//!
//! Setup and resync (after a reconnect) run alone and install the whole table in one bundle.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ofnode_proto::FlowStatsRequest;
use tokio::sync::{mpsc, oneshot};

use super::config::SetupOutcome;
use super::desired::{all_entities, entity_flows};
use super::drift::{record_repair, Repaired, SharedDriftStatus};
use super::error::Error;
use super::ha::HaShared;
use super::metrics::Metrics;
use super::readback::holds_version_note;
use super::state::{Change, Entity, NodeState, Pod};
use super::store::Store;
use super::table::{self, Diff, Flow, FlowTable};
use super::types::{HostSubnet, SetupRequest};
use crate::openflow::Switch;

/// What a plan decided: the changes to make and what to answer once they are made.
#[derive(Debug, Default)]
pub struct Planned {
    pub changes: Vec<Change>,
    pub output: Output,
}

impl Planned {
    pub fn changes(changes: Vec<Change>) -> Planned {
        Planned {
            changes,
            output: Output::None,
        }
    }
}

/// A request's answer.
#[derive(Debug, Default)]
pub enum Output {
    #[default]
    None,
    Setup(SetupOutcome, Vec<Pod>),
    /// Applied, but with the seed's input error (egress policy that drops all traffic).
    PolicyError(String),
    State(Box<NodeState>),
    /// Whether the plan found what it looked for.
    Found(bool),
    /// The pod a lookup found, if any.
    Pod(Option<Box<Pod>>),
    /// The host subnets of the state (what the VXLAN device is reconciled to).
    HostSubnets(Vec<HostSubnet>),
}

pub type Plan = Box<dyn FnOnce(&NodeState) -> Result<Planned, Error> + Send>;

pub enum Op {
    /// Changes computed from the current state.
    Plan(Plan),
    /// Install `setup` (building or rebuilding the table) in one bundle.
    Setup(SetupRequest),
    /// Make the switch's table equal to the desired one; `force` re-installs it whole.
    Resync { force: bool },
    /// The same as a resync without force, after the switch reported foreign changes
    /// (`seen` says which); a repair that changes anything is recorded as drift.
    RepairDrift { seen: String },
    /// High availability: this daemon just became master; adopt the state the previous
    /// active daemon replicated and reconcile the switch with it.
    TakeOver { generation: u64 },
    /// Stop after answering (what is queued behind it fails with `Error::Shutdown`).
    Shutdown,
}

pub struct Request {
    pub op: Op,
    pub reply: oneshot::Sender<Result<Output, Error>>,
    pub started: Instant,
}

impl Request {
    pub fn new(op: Op) -> (Request, oneshot::Receiver<Result<Output, Error>>) {
        let (reply, rx) = oneshot::channel();
        let request = Request {
            op,
            reply,
            started: Instant::now(),
        };
        (request, rx)
    }
}

/// What the writer publishes for `Node::status` after every batch.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub setup: Option<SetupRequest>,
    pub pods: usize,
    pub host_subnets: usize,
    pub services: usize,
    pub multicast_vnids: usize,
    pub egress_vnids: usize,
    pub flows: usize,
    pub in_sync: bool,
}

pub struct Writer {
    pub state: NodeState,
    pub table: FlowTable,
    pub store: Arc<Mutex<Store>>,
    pub switch: Switch,
    pub metrics: Arc<Metrics>,
    pub published: Arc<Mutex<Published>>,
    /// Drift detection and repairs, shared with the switch watcher.
    pub drift: SharedDriftStatus,
    /// High availability, when configured: while standby, operations are refused and the
    /// switch is left alone; while active, every batch is replicated to OVSDB.
    pub ha: Option<Arc<HaShared>>,
    pub requests: mpsc::Receiver<Request>,
    pub max_batch: usize,
    /// How long a bundle waits for the switch's session when there is none (a daemon just
    /// started, or the switch reconnecting) before the operation fails.
    pub connect_timeout: Duration,
    /// The switch's table is known to equal the desired one.
    pub in_sync: bool,
    pending: Option<Request>,
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
pub fn build_table(state: &NodeState) -> Result<FlowTable, Error> {
    let mut flows = Vec::new();
    for entity in all_entities(state) {
        flows.extend(parse_all(&entity_flows(state, entity))?);
    }
    Ok(FlowTable::from_flows(flows))
}

fn decode_error(e: ofnode_proto::DecodeError) -> Error {
    Error::Flow {
        flow: "<stored flow>".into(),
        reason: e.to_string(),
    }
}

impl Writer {
    /// A writer whose table is derived from `state`.
    pub fn new(
        state: NodeState,
        store: Store,
        switch: Switch,
        metrics: Arc<Metrics>,
        requests: mpsc::Receiver<Request>,
        max_batch: usize,
        connect_timeout: Duration,
    ) -> Result<Writer, Error> {
        let table = build_table(&state)?;
        let writer = Writer {
            state,
            table,
            store: Arc::new(Mutex::new(store)),
            switch,
            metrics,
            published: Arc::default(),
            drift: Arc::default(),
            ha: None,
            requests,
            max_batch: max_batch.max(1),
            connect_timeout,
            in_sync: false,
            pending: None,
        };
        writer.publish();
        release_freed_memory();
        Ok(writer)
    }

    pub async fn run(mut self) {
        while let Some(first) = self.next_request().await {
            if let Some(ha) = self.ha.as_ref().filter(|ha| !ha.is_active()) {
                let refused = match first.op {
                    Op::Plan(_) | Op::Setup(_) => Some(Err(ha.standby_error())),
                    // The switch belongs to the active daemon.
                    Op::Resync { .. } | Op::RepairDrift { .. } => Some(Ok(Output::None)),
                    Op::TakeOver { .. } | Op::Shutdown => None,
                };
                if let Some(result) = refused {
                    let _ = first.reply.send(result);
                    continue;
                }
            }
            match first.op {
                Op::Plan(_) => {
                    let batch = self.gather(first);
                    self.run_batch(batch).await;
                }
                Op::Setup(setup) => {
                    let result = self.run_setup(setup).await;
                    self.answer(first.reply, first.started, result);
                }
                Op::Resync { force } => {
                    let result = self.resync(force).await.map(|()| Output::None);
                    self.answer(first.reply, first.started, result);
                }
                Op::TakeOver { generation } => {
                    let result = self.take_over(generation).await.map(|()| Output::None);
                    self.answer(first.reply, first.started, result);
                }
                Op::RepairDrift { seen } => {
                    let result = self.repair_drift(&seen).await.map(|()| Output::None);
                    self.answer(first.reply, first.started, result);
                }
                Op::Shutdown => {
                    let _ = first.reply.send(Ok(Output::None));
                    break;
                }
            }
            self.publish();
        }
        tracing::debug!("node writer stopped");
    }

    async fn next_request(&mut self) -> Option<Request> {
        match self.pending.take() {
            Some(request) => Some(request),
            None => self.requests.recv().await,
        }
    }

    /// `first` and the plan requests already waiting behind it, up to the batch bound.
    fn gather(&mut self, first: Request) -> Vec<Request> {
        let mut batch = vec![first];
        while batch.len() < self.max_batch {
            match self.requests.try_recv() {
                Ok(request) if matches!(request.op, Op::Plan(_)) => batch.push(request),
                Ok(request) => {
                    self.pending = Some(request);
                    break;
                }
                Err(_) => break,
            }
        }
        batch
    }

    fn answer(
        &self,
        reply: oneshot::Sender<Result<Output, Error>>,
        started: Instant,
        result: Result<Output, Error>,
    ) {
        // A caller's next look (status, the set-up check of its next operation) must already
        // see its own operation.
        self.publish();
        self.metrics.operation_latency.observe(started.elapsed());
        match &result {
            Ok(_) => Metrics::inc(&self.metrics.operations),
            Err(e) => {
                Metrics::inc(&self.metrics.operation_errors);
                tracing::debug!(error = %e, "node operation failed");
            }
        }
        // The caller may have given up waiting; the outcome stands either way.
        let _ = reply.send(result);
    }

    fn publish(&self) {
        let published = Published {
            setup: self.state.setup,
            pods: self.state.pods.len(),
            host_subnets: self.state.host_subnets.len(),
            services: self.state.services.len(),
            multicast_vnids: self.state.multicast.len(),
            egress_vnids: self.state.egress.len(),
            flows: self.table.len(),
            in_sync: self.in_sync,
        };
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = published;
    }

    /// Applies one change to the state and the table, or (on error) to neither. Returns the
    /// change that undoes it. Whole-state changes go through `run_setup`, which swaps tables.
    fn apply_change(&mut self, change: Change) -> Result<Change, Error> {
        let entity = change.entity();
        if entity == Entity::Everything {
            return Err(Error::Flow {
                flow: "<whole state>".into(),
                reason: "a whole-state change inside a batch".into(),
            });
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

    /// Applies all of a plan's changes, or none of them.
    fn apply_plan(&mut self, changes: &[Change], undo: &mut Vec<Change>) -> Result<(), Error> {
        let mark = undo.len();
        for change in changes {
            match self.apply_change(change.clone()) {
                Ok(u) => undo.push(u),
                Err(e) => {
                    while undo.len() > mark {
                        if let Some(u) = undo.pop() {
                            // Undoing restores flows that parsed a moment ago.
                            let _ = self.apply_change(u);
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    async fn run_batch(&mut self, batch: Vec<Request>) {
        let mut journal = Vec::new();
        let mut undo = Vec::new();
        let mut answers = Vec::with_capacity(batch.len());
        for request in batch {
            let Op::Plan(plan) = request.op else {
                continue;
            };
            let result = match plan(&self.state) {
                Ok(planned) => self.apply_plan(&planned.changes, &mut undo).map(|()| {
                    journal.extend(planned.changes);
                    planned.output
                }),
                Err(e) => Err(e),
            };
            answers.push((request.reply, request.started, result));
        }
        let diff = self.table.diff();
        let outcome = match self.commit_diff(&diff).await {
            Ok(()) => self.persist(journal).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => self.table.commit_batch(),
            Err(e) => {
                self.table.rollback();
                while let Some(u) = undo.pop() {
                    self.state.apply(u);
                }
                for answer in &mut answers {
                    if answer.2.is_ok() {
                        answer.2 = Err(e.clone());
                    }
                }
            }
        }
        for (reply, started, result) in answers {
            self.answer(reply, started, result);
        }
    }

    /// Sends `diff` as one bundle.
    async fn commit_diff(&mut self, diff: &Diff) -> Result<(), Error> {
        if diff.is_empty() {
            return Ok(());
        }
        let mut tx = self.switch.transaction();
        diff.push_to(&mut tx).map_err(decode_error)?;
        self.commit(tx).await
    }

    /// Deletes every flow and adds the whole desired table, in one bundle, version note last.
    async fn install_all(&mut self) -> Result<(), Error> {
        let mut tx = self.switch.transaction();
        tx.delete(table::delete_all());
        for flow in self.table.all_flows() {
            tx.push_encoded(flow.encoded()).map_err(decode_error)?;
        }
        let committed = self.commit(tx).await;
        release_freed_memory();
        committed?;
        Metrics::inc(&self.metrics.full_reinstalls);
        self.in_sync = true;
        Ok(())
    }

    async fn commit(&mut self, tx: crate::openflow::Transaction) -> Result<(), Error> {
        let flow_mods = tx.len() as u64;
        let started = Instant::now();
        let result = match await_session(&self.switch, self.connect_timeout).await {
            Ok(()) => tx.commit().await.map_err(Error::from),
            Err(e) => Err(e),
        };
        self.metrics.transaction_latency.observe(started.elapsed());
        match result {
            Ok(()) => {
                Metrics::inc(&self.metrics.transactions);
                self.metrics
                    .flow_mods
                    .fetch_add(flow_mods, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                Metrics::inc(&self.metrics.transaction_errors);
                // After a failed bundle the switch may not be what we think (a lost connection
                // may or may not have applied it); the reconnect resync settles it.
                if matches!(&e, Error::Switch(e) if matches!(**e, crate::openflow::Error::Disconnected))
                {
                    self.in_sync = false;
                }
                Err(e)
            }
        }
    }

    /// Appends the batch's changes to the journal (one sync), off the async threads.
    async fn persist(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        if changes.is_empty() {
            return Ok(());
        }
        if let Some(ha) = &self.ha {
            if let Err(e) = ha.replicate(&self.state).await {
                // The switch already has the batch: have the next resync take it back.
                self.in_sync = false;
                self.request_resync();
                return Err(e);
            }
        }
        let store = self.store.clone();
        let appended = tokio::task::spawn_blocking(move || {
            let mut store = store.lock().unwrap_or_else(|e| e.into_inner());
            store.append(&changes)
        })
        .await
        .map_err(|e| {
            Error::State(Arc::new(super::store::StateError::Io {
                path: "journal".into(),
                source: std::io::Error::other(e.to_string()),
            }))
        })?;
        let snapshot_due = match appended {
            Ok(due) => due,
            Err(e) => {
                // The switch already has the batch: have the next resync take it back.
                self.in_sync = false;
                self.request_resync();
                return Err(e.into());
            }
        };
        if snapshot_due {
            let store = self.store.clone();
            let state = self.state.clone();
            let written = tokio::task::spawn_blocking(move || {
                let mut store = store.lock().unwrap_or_else(|e| e.into_inner());
                store.snapshot(&state)
            })
            .await;
            // A failed snapshot loses nothing: the journal still holds every change.
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
        Ok(())
    }

    fn request_resync(&mut self) {
        if self.pending.is_none() {
            let (request, _) = Request::new(Op::Resync { force: false });
            self.pending = Some(request);
        }
    }

    /// Installs `setup`: a new state (kept when only the switch lost its table, emptied when
    /// the parameters changed) and the whole table in one bundle, version note last.
    async fn run_setup(&mut self, setup: SetupRequest) -> Result<Output, Error> {
        let (outcome, new_state, dropped) = match &self.state.setup {
            Some(current) if *current == setup => (SetupOutcome::Built, None, Vec::new()),
            None => {
                let mut state = self.state.clone();
                state.setup = Some(setup);
                (SetupOutcome::Built, Some(state), Vec::new())
            }
            Some(_) => {
                let state = NodeState {
                    setup: Some(setup),
                    ..NodeState::default()
                };
                let dropped = self.state.pods.values().cloned().collect();
                (SetupOutcome::Rebuilt, Some(state), dropped)
            }
        };
        let Some(new_state) = new_state else {
            // Same parameters: the switch only needs what it lacks (the reconnect may have
            // re-installed the table already).
            self.resync(false).await?;
            return Ok(Output::Setup(outcome, dropped));
        };
        // The whole state changes: build its table beside the old one, and keep both until the
        // switch and the journal have the new one.
        let new_table = build_table(&new_state)?;
        let old_table = std::mem::replace(&mut self.table, new_table);
        let old_state = std::mem::replace(&mut self.state, new_state.clone());
        let journal = vec![Change::Replace {
            state: Box::new(new_state),
        }];
        let result = match self.install_all().await {
            Ok(()) => self.persist(journal).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            self.table = old_table;
            self.state = old_state;
            return Err(e);
        }
        Ok(Output::Setup(outcome, dropped))
    }

    /// Takes the fencing token for `generation`, adopts the state the previous active daemon
    /// replicated (when there is one), persists it here too, and reconciles the switch.
    async fn take_over(&mut self, generation: u64) -> Result<(), Error> {
        let Some(ha) = self.ha.clone() else {
            return self.resync(false).await;
        };
        if let Some(state) = ha.fence_and_read(generation).await? {
            if state != self.state {
                let table = build_table(&state)?;
                tracing::info!(
                    pods = state.pods.len(),
                    flows = table.len(),
                    "HA: adopting the desired state the previous active daemon replicated"
                );
                self.table = table;
                self.state = state.clone();
                self.persist_locally(vec![Change::Replace {
                    state: Box::new(state),
                }])
                .await?;
            }
        }
        self.in_sync = false;
        self.resync(false).await
    }

    /// The journal part of `persist`, without replication (for state that came from it).
    async fn persist_locally(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        let ha = self.ha.take();
        let result = self.persist(changes).await;
        self.ha = ha;
        result
    }

    /// Makes the switch's table equal to the desired one: the whole table when the version
    /// note is missing (ovs-vswitchd restarted) or `force`, else just the differences.
    async fn resync(&mut self, force: bool) -> Result<(), Error> {
        self.reconcile(force).await.map(|_| ())
    }

    /// A resync after the switch reported changes it did not get from us. Our own changes
    /// can be reported too (the switch abbreviates those of our connection, but not
    /// necessarily all), so only a comparison that finds a difference counts as drift.
    async fn repair_drift(&mut self, seen: &str) -> Result<(), Error> {
        Metrics::inc(&self.metrics.drift_checks);
        match self.reconcile(false).await? {
            Repaired::Nothing => {
                tracing::debug!(%seen, "flow changes reported, but the table is as desired");
            }
            repaired => record_repair(&self.drift, &self.metrics, seen, &repaired),
        }
        Ok(())
    }

    /// `resync`, saying what it changed.
    async fn reconcile(&mut self, force: bool) -> Result<Repaired, Error> {
        let Some(setup) = self.state.setup else {
            return Ok(Repaired::Nothing);
        };
        let reinstalled = Repaired::Reinstalled {
            flows: self.table.len(),
        };
        if force {
            self.install_all().await?;
            return Ok(reinstalled);
        }
        await_session(&self.switch, self.connect_timeout).await?;
        let current = self.switch.dump_flows(FlowStatsRequest::default()).await?;
        if !holds_version_note(&current, setup.mode) {
            drop(current);
            tracing::info!(
                flows = self.table.len(),
                "switch lacks the version note: re-installing the whole table in one bundle"
            );
            self.install_all().await?;
            return Ok(reinstalled);
        }
        let diff = self.table.reconcile(&current);
        drop(current);
        release_freed_memory();
        if !diff.is_empty() {
            tracing::info!(
                deletes = diff.deletes.len(),
                adds = diff.adds.len(),
                "repairing the switch's flow table"
            );
            self.commit_diff(&diff).await?;
            Metrics::inc(&self.metrics.repairs);
        }
        self.in_sync = true;
        Ok(Repaired::from_diff(&diff))
    }
}

/// Waits for the switch's session when there is none, so that an operation made right after
/// a (re)start fails only when the switch stays away for `limit`.
async fn await_session(switch: &Switch, limit: Duration) -> Result<(), Error> {
    if !switch.is_connected() {
        switch.wait_connected(limit).await?;
    }
    Ok(())
}

/// Hands memory freed after a whole-table operation back to the system. A 40,000-flow bundle
/// needs tens of megabytes for a moment; without this the allocator keeps them for good.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
