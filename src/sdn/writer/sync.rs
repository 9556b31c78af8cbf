//! The requests that run alone and make the switch hold the desired table: setup, the resync
//! at every connect, drift repair, HA take-over, and settling the switch after a bundle of
//! unknown outcome. They plan through the core (`core/sync.rs`).

use std::time::SystemTime;

use super::bundle::release_freed_memory;
use super::Writer;
use crate::sdn::core::{Reconcile, Repaired, SetupOutcome, SetupPlan};
use crate::sdn::drift::record_repair;
use crate::sdn::error::Error;
use crate::sdn::metrics::Metrics;
use crate::sdn::request::SetupDone;
use crate::sdn::types::SetupRequest;

impl Writer {
    /// After a bundle of unknown outcome: makes the switch's table the desired one.
    pub(super) async fn settle(&mut self) -> Result<(), Error> {
        if self.unsettled {
            self.reconcile(false).await?;
            self.unsettled = false;
        }
        Ok(())
    }

    /// Installs `setup`: with the parameters the node has, the switch gets what it lacks; else
    /// a new core (state and table) and its whole table in one bundle, version note last. The
    /// old core stays until the switch and the journal have the new one.
    pub(super) async fn run_setup(&mut self, setup: SetupRequest) -> Result<SetupDone, Error> {
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
        let old = std::mem::replace(&mut self.core, *next);
        self.meters.add_all(&self.core.audited_keys()).await;
        let result = match self.switch.install(self.core.flows()).await {
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
    pub(super) async fn take_over(&mut self, generation: u64) -> Result<(), Error> {
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
        self.switch.in_sync = false;
        self.reconcile(false).await.map(|_| ())
    }

    /// A resync after the switch reported changes it did not get from us. Our own changes
    /// can be reported too (the switch abbreviates those of our connection, but not
    /// necessarily all), so only a comparison that finds a difference counts as drift.
    pub(super) async fn repair_drift(&mut self, seen: &str) -> Result<(), Error> {
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
    pub(super) async fn reconcile(&mut self, force: bool) -> Result<Repaired, Error> {
        if self.core.state().setup.is_none() {
            return Ok(Repaired::Nothing);
        }
        let flows = self.core.flows().len();
        if force {
            self.meters.add_all(&self.core.audited_keys()).await;
            self.switch.install(self.core.flows()).await?;
            return Ok(Reconcile::InstallAll.repaired(flows));
        }
        let current = self.switch.dump().await?;
        let plan = self.core.reconcile(&current)?;
        drop(current);
        release_freed_memory();
        let repaired = plan.repaired(flows);
        // Meters first: the flows that name them must find them. A switch not known to be in
        // line (a new session, a failed bundle, a meter mod that did not reach it) may lack
        // them; one that lacks the version note (a restarted ovs-vswitchd) has none.
        let meters_unknown = !self.switch.in_sync || self.meters.unsent;
        if meters_unknown || matches!(plan, Reconcile::InstallAll) {
            self.meters.add_all(&self.core.audited_keys()).await;
        }
        match plan {
            Reconcile::NotSetUp => {}
            Reconcile::InstallAll => {
                tracing::info!(
                    flows,
                    "switch lacks the version note: re-installing the whole table in one bundle"
                );
                self.switch.install(self.core.flows()).await?;
            }
            Reconcile::Patch(diff) => {
                if !diff.is_empty() {
                    tracing::info!(
                        deletes = diff.deletes.len(),
                        adds = diff.adds.len(),
                        "repairing the switch's flow table"
                    );
                    self.switch.commit_diff(&diff).await?;
                    Metrics::inc(&self.metrics.repairs);
                }
                self.switch.in_sync = true;
            }
        }
        Ok(repaired)
    }
}
