//! The shell around the node core: the one task that owns the core (the desired state and
//! table) and carries out what it decides.
//!
//! Requests reach it on a channel (`request.rs`, whose [`Inbox`] hands them out). It takes the
//! edits waiting (up to a bound) as one batch (`batch.rs`): each edit is applied to the core in
//! turn, then the batch's net flow changes go to the switch as ONE bundle and its journal
//! record to disk with ONE sync, and only then are the requests answered. If the bundle or the
//! journal fails, the core rolls the batch back, so an edit either happened — on the switch
//! and on disk — or did not. Edits never share more than a bundle: each is whole inside it.
//!
//! What the batch asks of OVSDB for pods' ports comes last (`port_steps.rs`): an edit with a
//! port step is answered once its step is carried out, while the writer goes on.
//!
//! Setup, resync (after a reconnect), drift repair and HA take-over run alone (`sync.rs`);
//! they plan through the same core (`core/sync.rs`) and install the whole table in one bundle
//! when the switch lacks it.
//!
//! Every bundle is committed in one place (`bundle.rs`), where, on an Open vSwitch with the
//! stale-megaflow bug, the datapath's cached flows are purged before anyone is answered
//! (`megaflows.rs`); every journal record is written in one place (`persist.rs`).

mod batch;
mod bundle;
mod meters;
mod persist;
mod sync;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use super::config::NodeConfig;
use super::core::Core;
use super::dns::Dns;
use super::drift::SharedDriftStatus;
use super::error::Error;
use super::ha::HaShared;
use super::journal::Journal;
use super::megaflows::Megaflows;
use super::metrics::Metrics;
use super::port_steps::PortSteps;
use super::request::{Envelope, Inbox, Reply, Request};
use super::state::{Change, NodeState};
use super::types::{HostSubnet, SetupRequest};
use crate::openflow::Switch;
use bundle::{release_freed_memory, Bundles};
use meters::Meters;
use persist::Persistence;

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
    /// The audited rules (each has a meter), and the meters the switch refused with its error.
    pub audited_rules: usize,
    pub refused_meters: Vec<(u32, String)>,
}

pub struct Writer {
    core: Core,
    /// Where every bundle goes to the switch.
    switch: Bundles,
    /// The audited rules' meters, around the bundles.
    meters: Meters,
    /// Where every journal record goes to disk.
    journal: Persistence,
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
    inbox: Inbox,
    /// A bundle's outcome was unknown and the table could not be settled yet: no batch goes to
    /// the switch before it is (a diff against an unknown table could be wrong).
    unsettled: bool,
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
            meters: Meters::new(
                switch.clone(),
                metrics.clone(),
                cfg.audit,
                cfg.connect_timeout,
            ),
            switch: Bundles::new(switch, metrics.clone(), cfg.connect_timeout),
            journal: Persistence::new(store),
            metrics,
            published: Arc::default(),
            drift: Arc::default(),
            vxlan_hosts: watch::Sender::new(Arc::new(hosts)),
            dns,
            ha: None,
            port_steps: None,
            inbox: Inbox::new(requests, cfg.max_batch),
            unsettled: false,
        };
        writer.publish();
        release_freed_memory();
        Ok(writer)
    }

    /// Purges the datapath's cached flows after each bundle on a switch with the
    /// stale-megaflow bug (`megaflows.rs`); without it (a writer with no OVSDB), never.
    pub fn purge_megaflows(&mut self, megaflows: Megaflows) {
        self.switch.megaflows = Some(megaflows);
    }

    pub async fn run(mut self) {
        while let Some(Envelope { request, started }) = self.inbox.next().await {
            let Some(request) = self.refused_while_standby(request) else {
                continue;
            };
            match request {
                Request::Edit(edit) => {
                    let (core, ha) = (&self.core, &self.ha);
                    let batch = self.inbox.gather(edit, started, |read| match standby(ha) {
                        Some(standby) => read.refuse(core, standby),
                        None => read.answer(core),
                    });
                    self.run_batch(batch).await;
                }
                Request::Read(read) => read.answer(&self.core),
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
        match standby(&self.ha) {
            Some(error) => request.on_standby(&self.core, error),
            None => Some(request),
        }
    }

    /// Appends a committed batch's changes to the journal; with HA, replicates them first.
    /// When that fails the switch already has the batch: the next resync takes it back.
    async fn persist(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        let ha = self.ha.as_deref();
        let recorded = self.journal.record(ha, self.core.state(), changes).await;
        self.resync_unless(recorded)
    }

    /// [`Writer::persist`] without replication (for state that came from the replica).
    async fn persist_locally(&mut self, changes: Vec<Change>) -> Result<(), Error> {
        let recorded = self
            .journal
            .record_locally(self.core.state(), changes)
            .await;
        self.resync_unless(recorded)
    }

    fn resync_unless(&mut self, recorded: Result<(), Error>) -> Result<(), Error> {
        if recorded.is_err() {
            self.switch.in_sync = false;
            self.inbox.resync_next();
        }
        recorded
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
            in_sync: self.switch.in_sync,
            netpols: state.netpols.len(),
            namespaces: state.namespaces.len(),
            audited_rules: self.meters.count(),
            refused_meters: self
                .meters
                .refused()
                .iter()
                .map(|(key, error)| (*key, error.clone()))
                .collect(),
        };
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = published;
    }
}

/// The error a standby answers with; None while active (or without HA).
fn standby(ha: &Option<Arc<HaShared>>) -> Option<Error> {
    ha.as_ref()
        .filter(|ha| !ha.is_active())
        .map(|ha| ha.standby_error())
}
