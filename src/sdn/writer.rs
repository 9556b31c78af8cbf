//! The shell around the node core: the one task that owns the core (the desired state and
//! table) and carries out what it decides.
//!
//! Requests reach it on a channel (`request.rs`). It takes the edits waiting (up to a bound) as
//! one batch: each edit is applied to the core in turn, then the batch's net flow changes go to
//! the switch as ONE bundle and its journal record to disk with ONE sync, and only then are the
//! requests answered. If the bundle or the journal fails, the core rolls the batch back, so an
//! edit either happened — on the switch and on disk — or did not. Edits never share more than a
//! bundle: each is whole inside it.
//!
//! What the batch asks of OVSDB for pods' ports comes last (`port_steps.rs`): an edit with a
//! port step is answered once its step is carried out, while the writer goes on.
//!
//! Setup, resync (after a reconnect), drift repair and HA take-over run alone; they plan
//! through the same core (`core/sync.rs`) and install the whole table in one bundle when the
//! switch lacks it.
//!
//! Every bundle is committed in one place (`commit`), where, on an Open vSwitch with the
//! stale-megaflow bug, the datapath's cached flows are purged before anyone is answered
//! (`megaflows.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use ofnode_proto::FlowStatsRequest;
use tokio::sync::{mpsc, watch};

use super::config::NodeConfig;
use super::core::{Core, Effects, Notice, Reconcile, Repaired, SetupOutcome, SetupPlan};
use super::dns::Dns;
use super::drift::{record_repair, SharedDriftStatus};
use super::error::Error;
use super::ha::HaShared;
use super::journal::Journal;
use super::megaflows::Megaflows;
use super::metrics::Metrics;
use super::port_steps::{Answer, PortSteps};
use super::request::{Deferred, Edit, Envelope, Read, Reply, Request, SetupDone};
use super::state::{Change, NodeState};
use super::table::{self, Diff, FlowTable};
use super::types::{HostSubnet, SetupRequest};
use crate::openflow::{self, Switch, Transaction};
use crate::value::IfName;

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
    pub netpols: usize,
    pub namespaces: usize,
}

pub struct Writer {
    core: Core,
    store: Arc<Mutex<Journal>>,
    switch: Switch,
    metrics: Arc<Metrics>,
    pub published: Arc<Mutex<Published>>,
    /// Drift detection and repairs, shared with the switch watcher.
    pub drift: SharedDriftStatus,
    /// The host subnets the VXLAN device is kept in line with, as last committed.
    pub vxlan_hosts: watch::Sender<Arc<Vec<HostSubnet>>>,
    /// Egress DNS names no policy uses any more are forgotten here.
    dns: Arc<Dns>,
    /// High availability, when configured: while standby, operations are refused and the
    /// switch is left alone; while active, every batch is replicated to OVSDB.
    pub ha: Option<Arc<HaShared>>,
    /// Carries out the batches' port steps in OVSDB; without it (a writer with no OVSDB) they
    /// are dropped and their edits answered with the batch.
    pub port_steps: Option<PortSteps>,
    /// Purges the datapath's cached flows after each bundle on a switch with the
    /// stale-megaflow bug (`megaflows.rs`); without it (a writer with no OVSDB), never.
    pub megaflows: Option<Megaflows>,
    requests: mpsc::Receiver<Envelope>,
    max_batch: usize,
    /// How long a bundle waits for the switch's session when there is none (a daemon just
    /// started, or the switch reconnecting) before the operation fails.
    connect_timeout: Duration,
    /// The switch's table is known to equal the desired one.
    in_sync: bool,
    /// A bundle's outcome was unknown and the table could not be settled yet: no batch goes to
    /// the switch before it is (a diff against an unknown table could be wrong).
    unsettled: bool,
    pending: Option<Envelope>,
}

impl Writer {
    /// A writer around the core of `state`, batching and waiting for the switch as `cfg` says.
    pub fn new(
        state: NodeState,
        store: Journal,
        switch: Switch,
        metrics: Arc<Metrics>,
        dns: Arc<Dns>,
        requests: mpsc::Receiver<Envelope>,
        cfg: &NodeConfig,
    ) -> Result<Writer, Error> {
        let core = Core::new(state)?;
        let hosts = core.state().host_subnets.values().copied().collect();
        let writer = Writer {
            core,
            store: Arc::new(Mutex::new(store)),
            switch,
            metrics,
            published: Arc::default(),
            drift: Arc::default(),
            vxlan_hosts: watch::Sender::new(Arc::new(hosts)),
            dns,
            ha: None,
            port_steps: None,
            megaflows: None,
            requests,
            max_batch: cfg.max_batch.max(1),
            connect_timeout: cfg.connect_timeout,
            in_sync: false,
            unsettled: false,
            pending: None,
        };
        writer.publish();
        release_freed_memory();
        Ok(writer)
    }

    pub async fn run(mut self) {
        while let Some(first) = self.next_request().await {
            let Envelope { request, started } = first;
            let request = match self.refused_while_standby(request) {
                Some(request) => request,
                None => continue,
            };
            match request {
                Request::Edit(edit) => {
                    let batch = self.gather(edit, started);
                    self.run_batch(batch).await;
                }
                Request::Read(read) => self.read(read),
                Request::Setup(setup, reply) => {
                    let result = self.run_setup(setup).await;
                    self.answer(reply, started, result);
                }
                Request::Resync { force, reply } => {
                    let result = self.reconcile(force).await.map(|_| ());
                    self.answer(reply, started, result);
                }
                Request::RepairDrift { seen, reply } => {
                    let result = self.repair_drift(&seen).await;
                    self.answer(reply, started, result);
                }
                Request::TakeOver { generation, reply } => {
                    let result = self.take_over(generation).await;
                    self.answer(reply, started, result);
                }
                Request::Shutdown(reply) => {
                    let _ = reply.send(Ok(()));
                    break;
                }
            }
            self.publish();
        }
        tracing::debug!("node writer stopped");
    }

    /// A standby refuses edits, reads and setup, and leaves the switch to the active daemon;
    /// None when the request was answered here.
    fn refused_while_standby(&self, request: Request) -> Option<Request> {
        let Some(ha) = self.ha.as_ref().filter(|ha| !ha.is_active()) else {
            return Some(request);
        };
        match request {
            Request::Edit(edit) => edit.refuse(ha.standby_error()),
            Request::Read(read) => read.refuse(&self.core, ha.standby_error()),
            Request::Setup(_, reply) => drop(reply.send(Err(ha.standby_error()))),
            Request::Resync { reply, .. } | Request::RepairDrift { reply, .. } => {
                drop(reply.send(Ok(())))
            }
            request @ (Request::TakeOver { .. } | Request::Shutdown(_)) => return Some(request),
        }
        None
    }

    async fn next_request(&mut self) -> Option<Envelope> {
        match self.pending.take() {
            Some(request) => Some(request),
            None => self.requests.recv().await,
        }
    }

    /// `first` and the edits already waiting behind it, up to the batch bound and up to an
    /// edit of a pod port the batch has an edit of already (one port step per port and batch,
    /// so that each step answers its own edit). Reads waiting among them are answered on the
    /// way, from the state before the batch: a pod add's check comes just before its edit, and
    /// ending the batch at each check would make a bundle of every concurrent pod add.
    fn gather(&mut self, first: Edit, started: Instant) -> Vec<(Edit, Instant)> {
        let mut ports: HashSet<IfName> = first.port().into_iter().cloned().collect();
        let mut batch = vec![(first, started)];
        while batch.len() < self.max_batch {
            match self.requests.try_recv() {
                Ok(Envelope {
                    request: Request::Edit(edit),
                    started,
                }) if edit.port().is_none_or(|port| ports.insert(port.clone())) => {
                    batch.push((edit, started))
                }
                Ok(Envelope {
                    request: Request::Read(read),
                    ..
                }) => {
                    if let Some(Request::Read(read)) =
                        self.refused_while_standby(Request::Read(read))
                    {
                        self.read(read);
                    }
                }
                Ok(other) => {
                    self.pending = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        batch
    }

    fn read(&self, read: Read) {
        read.answer(&self.core);
    }

    async fn run_batch(&mut self, batch: Vec<(Edit, Instant)>) {
        if let Err(e) = self.settle().await {
            for (edit, started) in batch {
                edit.refuse(e.clone());
                self.count(started, false);
            }
            return;
        }
        let answers: Vec<(Option<IfName>, Deferred, Instant)> = batch
            .into_iter()
            .map(|(edit, started)| (edit.port().cloned(), edit.apply(&mut self.core), started))
            .collect();
        let Effects {
            flows,
            journal,
            vxlan_hosts,
            dns_names,
            notices,
            ports,
        } = self.core.take_effects();
        let outcome = match self.commit_diff(&flows).await {
            Ok(()) => self.persist(journal).await,
            Err(e) if may_have_applied(&e) => self.applied_anyway(e, journal).await,
            Err(e) => Err(e),
        };
        match &outcome {
            Ok(()) => {
                self.core.commit();
                say(&notices);
                self.carry_out(vxlan_hosts, dns_names);
            }
            Err(_) => self.core.rollback(),
        }
        // The switch may hold the rolled-back batch: back to the desired table before anyone
        // is answered (a failure leaves it for the next batch, which settles it first).
        if let Err(e) = self.settle().await {
            tracing::warn!(error = %e, "the switch's table could not be settled after a bundle of unknown outcome; the next change settles it first");
        }
        // A caller's next look (status, the set-up check of its next operation) must already
        // see its own operation.
        self.publish();
        // The port steps of a batch that stands: their edits are answered once they are done.
        let ports = if outcome.is_ok() { ports } else { Vec::new() };
        let mut waiting: HashMap<IfName, Answer> = HashMap::new();
        for (port, deliver, started) in answers {
            match port.filter(|port| ports.iter().any(|step| step.veth() == port)) {
                Some(port) => drop(waiting.insert(port, Answer { deliver, started })),
                None => {
                    let ok = deliver(outcome.as_ref().err());
                    self.count(started, ok);
                }
            }
        }
        for step in ports {
            let answer = waiting.remove(step.veth());
            match &mut self.port_steps {
                Some(steps) => steps.start(step, answer),
                None => {
                    if let Some(Answer { deliver, started }) = answer {
                        let ok = deliver(None);
                        self.count(started, ok);
                    }
                }
            }
        }
    }

    /// A batch whose COMMIT went unanswered: the switch's table tells whether it applied. When
    /// it holds the batch, the batch happened (journaled, answered Ok); otherwise the batch is
    /// refused with `failed`, rolled back, and the switch settled to the state without it
    /// (`settle`, before the answers).
    async fn applied_anyway(&mut self, failed: Error, journal: Vec<Change>) -> Result<(), Error> {
        tracing::warn!(error = %failed, "no answer to the bundle's commit: reading the switch's table to learn whether it applied");
        self.unsettled = true;
        match self.switch_holds_desired().await {
            Ok(true) => {
                tracing::info!("the switch applied the bundle: the batch stands");
                self.unsettled = false;
                self.persist(journal).await
            }
            Ok(false) => {
                tracing::info!("the switch did not apply the bundle: the batch is refused");
                Err(failed)
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the switch's table failed: the batch is refused");
                Err(failed)
            }
        }
    }

    /// Whether the switch's table equals the desired one (the open batch included).
    async fn switch_holds_desired(&mut self) -> Result<bool, Error> {
        await_session(&self.switch, self.connect_timeout).await?;
        let session = self.switch.session();
        let current = match self.switch.dump_flows(FlowStatsRequest::default()).await {
            // The COMMIT's session, cut, can still look up while it is torn down: the table is
            // read again on the next session.
            Err(openflow::Error::Disconnected | openflow::Error::NotConnected) => {
                if let Some(epoch) = session {
                    let limit = self.connect_timeout;
                    self.switch.wait_session_after(epoch, limit).await?;
                }
                self.switch.dump_flows(FlowStatsRequest::default()).await?
            }
            read => read?,
        };
        Ok(matches!(self.core.reconcile(&current)?, Reconcile::Patch(diff) if diff.is_empty()))
    }

    /// After a bundle of unknown outcome: makes the switch's table the desired one.
    async fn settle(&mut self) -> Result<(), Error> {
        if self.unsettled {
            self.reconcile(false).await?;
            self.unsettled = false;
        }
        Ok(())
    }

    /// The effects of a committed batch beyond the switch and the journal.
    fn carry_out(&self, vxlan_hosts: Option<Vec<HostSubnet>>, dns_names: Option<HashSet<String>>) {
        if let Some(hosts) = vxlan_hosts {
            self.vxlan_hosts.send_replace(Arc::new(hosts));
        }
        if let Some(names) = dns_names {
            self.dns.retain(&names);
        }
    }

    fn answer<T>(&self, reply: Reply<T>, started: Instant, result: Result<T, Error>) {
        self.publish();
        if let Err(e) = &result {
            tracing::debug!(error = %e, "node operation failed");
        }
        self.count(started, result.is_ok());
        let _ = reply.send(result);
    }

    fn count(&self, started: Instant, ok: bool) {
        self.metrics.count_operation(started, ok);
    }

    fn publish(&self) {
        let state = self.core.state();
        let published = Published {
            setup: state.setup,
            pods: state.pods.len(),
            host_subnets: state.host_subnets.len(),
            services: state.services.len(),
            multicast_vnids: state.multicast.len(),
            egress_vnids: state.egress.len(),
            flows: self.core.flows().len(),
            in_sync: self.in_sync,
            netpols: state.netpols.len(),
            namespaces: state.namespaces.len(),
        };
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = published;
    }

    /// Sends `diff` as one bundle: strict deletes first, then adds (as they are stored).
    async fn commit_diff(&mut self, diff: &Diff) -> Result<(), Error> {
        if diff.is_empty() {
            return Ok(());
        }
        let mut tx = self.switch.transaction();
        for flow in &diff.deletes {
            tx.push(flow.to_delete_strict().map_err(decode_error)?);
        }
        for flow in &diff.adds {
            tx.push_encoded(flow.encoded()).map_err(decode_error)?;
        }
        self.commit(tx).await
    }

    /// Installs a whole table (see [`whole_table`]); the switch then holds the desired one.
    async fn install(&mut self, tx: Transaction) -> Result<(), Error> {
        let committed = self.commit(tx).await;
        release_freed_memory();
        committed?;
        Metrics::inc(&self.metrics.full_reinstalls);
        self.in_sync = true;
        Ok(())
    }

    async fn commit(&mut self, tx: Transaction) -> Result<(), Error> {
        let flow_mods = tx.len() as u64;
        let started = Instant::now();
        let result = match await_session(&self.switch, self.connect_timeout).await {
            Ok(()) => tx.commit().await.map_err(Error::from),
            Err(e) => Err(e),
        };
        self.metrics.transaction_latency.observe(started.elapsed());
        // Every bundle goes through here (batches, resync, repair, take-over, setup): on a
        // switch with the stale-megaflow bug the datapath forgets what it cached before anyone
        // is answered, also after a commit of unknown outcome (the switch may hold the bundle).
        if result.as_ref().map_or_else(may_have_applied, |()| true) {
            if let Some(megaflows) = &mut self.megaflows {
                megaflows.after_commit().await;
            }
        }
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

    /// Appends the batch's changes to the journal (one sync), off the async threads; with HA,
    /// replicates the state first.
    async fn persist(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        if changes.is_empty() {
            return Ok(());
        }
        if let Some(ha) = &self.ha {
            if let Err(e) = ha.replicate(self.core.state(), &changes).await {
                // The switch already has the batch: have the next resync take it back.
                self.in_sync = false;
                self.request_resync();
                return Err(e);
            }
        }
        self.persist_locally(changes).await
    }

    /// The journal part of `persist`, without replication (for state that came from it).
    async fn persist_locally(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        let store = self.store.clone();
        let appended = tokio::task::spawn_blocking(move || {
            let mut store = store.lock().unwrap_or_else(|e| e.into_inner());
            store.append(&changes)
        })
        .await
        .map_err(|e| {
            Error::State(Arc::new(super::journal::StateError::Io {
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
            let state = self.core.state().clone();
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
            let (reply, _) = tokio::sync::oneshot::channel();
            self.pending = Some(Envelope::new(Request::Resync {
                force: false,
                reply,
            }));
        }
    }

    /// Installs `setup`: with the parameters the node has, the switch gets what it lacks; else
    /// a new core (state and table) and its whole table in one bundle, version note last. The
    /// old core stays until the switch and the journal have the new one.
    async fn run_setup(&mut self, setup: SetupRequest) -> Result<SetupDone, Error> {
        let (outcome, dropped, next, record) = match self.core.setup(setup)? {
            SetupPlan::Reconcile => {
                // The reconnect may have re-installed the table already.
                self.reconcile(false).await?;
                return Ok(SetupDone {
                    outcome: SetupOutcome::Built,
                    dropped: Vec::new(),
                });
            }
            SetupPlan::Replace {
                outcome,
                dropped,
                next,
                record,
            } => (outcome, dropped, next, record),
        };
        let tx = whole_table(&self.switch, next.flows())?;
        let old = std::mem::replace(&mut self.core, *next);
        let result = match self.install(tx).await {
            Ok(()) => self.persist(vec![record]).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            self.core = old;
            return Err(e);
        }
        Ok(SetupDone { outcome, dropped })
    }

    /// Takes the fencing token for `generation`, adopts the state the previous active daemon
    /// replicated (when there is one), persists it here too, and reconciles the switch.
    async fn take_over(&mut self, generation: u64) -> Result<(), Error> {
        let Some(ha) = self.ha.clone() else {
            return self.reconcile(false).await.map(|_| ());
        };
        if let Some(state) = ha.fence_and_read(generation).await? {
            if let Some((core, record)) = self.core.adopt(state)? {
                tracing::info!(
                    pods = core.state().pods.len(),
                    flows = core.flows().len(),
                    "HA: adopting the desired state the previous active daemon replicated"
                );
                self.core = core;
                self.persist_locally(vec![record]).await?;
            }
        }
        self.in_sync = false;
        self.reconcile(false).await.map(|_| ())
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
            repaired => record_repair(
                &self.drift,
                &self.metrics,
                seen,
                &repaired,
                SystemTime::now(),
            ),
        }
        Ok(())
    }

    /// Makes the switch's table equal to the desired one: the whole table when the version
    /// note is missing (ovs-vswitchd restarted) or `force`, else just the differences. Says
    /// what it changed.
    async fn reconcile(&mut self, force: bool) -> Result<Repaired, Error> {
        if self.core.state().setup.is_none() {
            return Ok(Repaired::Nothing);
        }
        let flows = self.core.flows().len();
        if force {
            let tx = whole_table(&self.switch, self.core.flows())?;
            self.install(tx).await?;
            return Ok(Reconcile::InstallAll.repaired(flows));
        }
        await_session(&self.switch, self.connect_timeout).await?;
        let current = self.switch.dump_flows(FlowStatsRequest::default()).await?;
        let plan = self.core.reconcile(&current)?;
        drop(current);
        release_freed_memory();
        let repaired = plan.repaired(flows);
        match plan {
            Reconcile::NotSetUp => {}
            Reconcile::InstallAll => {
                tracing::info!(
                    flows,
                    "switch lacks the version note: re-installing the whole table in one bundle"
                );
                let tx = whole_table(&self.switch, self.core.flows())?;
                self.install(tx).await?;
            }
            Reconcile::Patch(diff) => {
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
            }
        }
        Ok(repaired)
    }
}

/// A failed bundle the switch may nevertheless have applied (its COMMIT went unanswered).
fn may_have_applied(e: &Error) -> bool {
    matches!(e, Error::Switch(e) if e.may_have_applied())
}

fn decode_error(e: ofnode_proto::DecodeError) -> Error {
    Error::Flow {
        flow: "<stored flow>".into(),
        reason: e.to_string(),
    }
}

/// A bundle that deletes every flow and adds all of `table`, version note last.
fn whole_table(switch: &Switch, table: &FlowTable) -> Result<Transaction, Error> {
    let mut tx = switch.transaction();
    tx.delete(table::delete_all());
    for flow in table.all_flows() {
        tx.push_encoded(flow.encoded()).map_err(decode_error)?;
    }
    Ok(tx)
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

/// Logs what the core wants said about a committed batch (the core itself does not log).
fn say(notices: &[Notice]) {
    for notice in notices {
        if notice.is_warning() {
            tracing::warn!("{notice}");
        } else {
            tracing::info!("{notice}");
        }
    }
}
