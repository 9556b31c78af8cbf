//! The OVSDB reconciler: at every OVSDB session (the first included), and whenever an
//! operation's OVSDB step failed inside a session (`port_steps.rs` wakes it), the bridge's
//! ports and their limits are made equal to the desired state (`core/ovsdb.rs` plans it from
//! the cache): a deleted pod's port whose removal failed goes, a live pod's missing port comes
//! back (a crash between a pod add's journal record and its port), an acknowledged limit is
//! written. A pass that fails is tried again, with backoff, until one succeeds. What OVSDB
//! confirmed gone is then forgotten.
//!
//! The port fixes of a pass are one transaction. A bridge made again and the controllers are
//! not in it: they are setup's own steps (each with its checks, e.g. that ovs-vswitchd could
//! create the bridge), and the port fixes are planned from a cache that holds the bridge.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::{Inner, Node};
use crate::ovsdb;
use crate::sdn::core::ovsdb::{
    controllers, observe, port_fixes, removed_ports_gone, setup_steps, PortFix,
};
use crate::sdn::error::Error;
use crate::sdn::metrics::Metrics;

/// How often a quiet reconciler looks whether its node is gone.
const ALIVE_CHECK: Duration = Duration::from_secs(1);
/// Waits before a failed reconcile is tried again: the first, doubled after each failure up
/// to the last.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Runs until the node is dropped. `retry` wakes it inside a session.
pub(super) async fn reconcile_ovsdb(
    node: Weak<Inner>,
    mut status: watch::Receiver<ovsdb::Status>,
    retry: std::sync::Arc<Notify>,
) {
    let mut reconciled = 0;
    // A pass is owed within the session (an operation's step failed, or the last pass did).
    let mut owed = false;
    let mut backoff = RETRY_FIRST;
    loop {
        let generation = tokio::select! {
            // Biased: a wake-up that came meanwhile is taken before the wait below.
            biased;
            () = retry.notified() => {
                owed = true;
                continue;
            }
            next = tokio::time::timeout(
                ALIVE_CHECK,
                status.wait_for(|s| s.connected && (owed || s.generation > reconciled)),
            ) => match next {
                Ok(Ok(s)) => s.generation,
                Ok(Err(_)) => return,
                Err(_) if node.strong_count() == 0 => return,
                Err(_) => continue,
            },
        };
        let Some(inner) = node.upgrade() else {
            return;
        };
        let node_now = Node { inner };
        match node_now.reconcile_ports().await {
            Ok(()) => {
                (reconciled, owed, backoff) = (generation, false, RETRY_FIRST);
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "making OVSDB hold the desired ports failed; trying again");
                Metrics::inc(&node_now.inner.metrics.ovsdb_reconcile_errors);
                drop(node_now);
                owed = true;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RETRY_MAX);
            }
        }
    }
}

impl Node {
    /// One reconcile. It holds the gate exclusively: an operation's OVSDB part must not run
    /// between the state read here and the fixes.
    async fn reconcile_ports(&self) -> Result<(), Error> {
        if self.require_active().is_err() {
            // The active peer keeps OVSDB; a standby that takes over reconciles at its next
            // session.
            return Ok(());
        }
        let _exclusive = self.inner.gate.write().await;
        let state = self.state().await?;
        if state.setup.is_none() {
            return Ok(());
        }
        // A restarted daemon may never be set up again: it warns at its OVSDB session.
        self.warn_stale_megaflows_once();
        let bridge = self.inner.cfg.bridge.clone();
        let ovsdb = &self.inner.ovsdb;
        if !ovsdb.with_cache(|c| c.find("Bridge", &bridge).is_some()) {
            // A database that lost the bridge: setup's OVSDB part again.
            tracing::warn!(%bridge, "OVSDB has no bridge of this node's setup; creating it again");
            let cfg = &self.inner.cfg;
            let ha_peers = cfg.ha.as_ref().map(|ha| ha.controllers.as_slice());
            let targets = controllers(&cfg.openflow, ha_peers);
            let steps = setup_steps(&bridge, &self.inner.datapath_type, targets);
            for step in &steps {
                self.execute(step).await?;
            }
        } else {
            self.point_controller_here().await?;
        }
        let observed = ovsdb.with_cache(|c| observe(c, &bridge));
        let fixes = port_fixes(&bridge, &state, &observed);
        if !fixes.is_empty() {
            tracing::info!(?fixes, "OVSDB differs from the desired state; fixing it");
            self.apply_port_fixes(&bridge, &fixes).await?;
        }
        let gone = ovsdb.with_cache(|c| removed_ports_gone(&state, &observe(c, &bridge)));
        if !gone.is_empty() {
            self.edit(move |core| core.forget_removed_ports(&gone))
                .await?;
        }
        Ok(())
    }

    /// The fixes in one OVSDB transaction (one reconfiguration of ovs-vswitchd however many
    /// ports differ). Should that one be refused, each fix is tried on its own: one port the
    /// database will not take (e.g. a name another bridge holds) must not keep the others
    /// from their desired state.
    async fn apply_port_fixes(&self, bridge: &str, fixes: &[PortFix]) -> Result<(), Error> {
        let ovsdb = &self.inner.ovsdb;
        let changes: Vec<ovsdb::PortChange> =
            fixes.iter().map(|fix| port_change(bridge, fix)).collect();
        let refused = match ovsdb.change_ports(&changes).await {
            Ok(not_set_up) => {
                warn_not_set_up(&not_set_up);
                return Ok(());
            }
            // The session went (or the answer did): the next pass plans again from the cache.
            Err(e) if e.is_transient() => return Err(e.into()),
            Err(e) => e,
        };
        tracing::warn!(error = %refused, "OVSDB refused the fixes as one transaction; trying each alone");
        let mut first_error = None;
        for change in changes {
            match ovsdb.change_ports(std::slice::from_ref(&change)).await {
                Ok(not_set_up) => warn_not_set_up(&not_set_up),
                Err(e) => {
                    tracing::warn!(?change, error = %e, "OVSDB refused a fix");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }
}

/// A fix as the OVSDB client's change.
fn port_change(bridge: &str, fix: &PortFix) -> ovsdb::PortChange {
    match fix {
        PortFix::Remove(veth) => ovsdb::PortChange::Delete {
            bridge: bridge.to_string(),
            name: veth.clone(),
        },
        PortFix::Add(spec) => ovsdb::PortChange::Add(spec.clone()),
        PortFix::Limit { veth, bandwidth } => ovsdb::PortChange::Bandwidth {
            port: veth.clone(),
            max_rate_bps: bandwidth.qos_max_rate,
            policing_kbps: bandwidth.ingress_policing_kbps,
        },
    }
}

/// A veth that is gone is ovs-vswitchd's error on the interface; its pod still wants the port
/// (the pod del removes it).
fn warn_not_set_up(errors: &[ovsdb::Error]) {
    for e in errors {
        tracing::warn!(error = %e, "a pod's port added again is not set up");
    }
}
