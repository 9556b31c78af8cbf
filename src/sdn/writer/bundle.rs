//! The switch's end of the writer: every bundle it sends is committed here (batches, resync,
//! drift repair, take-over, setup), metered, and — on an Open vSwitch with the stale-megaflow
//! bug — followed by the purge of the datapath's cached flows before anyone is answered
//! (`megaflows.rs`). The switch's flows are read here too.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ofnode_proto::{FlowStats, FlowStatsRequest};

use crate::openflow::{self, Switch, Transaction};
use crate::sdn::core::CoreError;
use crate::sdn::error::Error;
use crate::sdn::megaflows::Megaflows;
use crate::sdn::metrics::Metrics;
use crate::sdn::table::{self, Diff, FlowTable};

/// The bundles to one switch, and what is known of its table.
pub(super) struct Bundles {
    switch: Switch,
    metrics: Arc<Metrics>,
    /// Purges the datapath's cached flows after each bundle on a switch with the
    /// stale-megaflow bug; without it (a writer with no OVSDB), never.
    pub megaflows: Option<Megaflows>,
    /// How long a bundle waits for the switch's session when there is none (a daemon just
    /// started, or the switch reconnecting) before the operation fails.
    connect_timeout: Duration,
    /// The switch's table is known to equal the desired one.
    pub in_sync: bool,
}

impl Bundles {
    pub fn new(switch: Switch, metrics: Arc<Metrics>, connect_timeout: Duration) -> Bundles {
        Bundles {
            switch,
            metrics,
            megaflows: None,
            connect_timeout,
            in_sync: false,
        }
    }

    /// Sends `diff` as one bundle: strict deletes first, then adds (as they are stored).
    pub async fn commit_diff(&mut self, diff: &Diff) -> Result<(), Error> {
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

    /// Installs all of `table` in one bundle that deletes every flow first (version note
    /// last); the switch then holds the desired table.
    pub async fn install(&mut self, table: &FlowTable) -> Result<(), Error> {
        let tx = self.whole_table(table)?;
        let committed = self.commit(tx).await;
        release_freed_memory();
        committed?;
        Metrics::inc(&self.metrics.full_reinstalls);
        self.in_sync = true;
        Ok(())
    }

    /// A bundle that deletes every flow and adds all of `table`, version note last.
    fn whole_table(&self, table: &FlowTable) -> Result<Transaction, Error> {
        let mut tx = self.switch.transaction();
        tx.delete(table::delete_all());
        for flow in table.all_flows() {
            tx.push_encoded(flow.encoded()).map_err(decode_error)?;
        }
        Ok(tx)
    }

    async fn commit(&mut self, tx: Transaction) -> Result<(), Error> {
        let flow_mods = tx.len() as u64;
        let started = Instant::now();
        let result = match self.await_session().await {
            Ok(()) => tx.commit().await.map_err(Error::from),
            Err(e) => Err(e),
        };
        self.metrics.transaction_latency.observe(started.elapsed());
        // Every bundle goes through here: on a switch with the stale-megaflow bug the datapath
        // forgets what it cached before anyone is answered, also after a commit of unknown
        // outcome (the switch may hold the bundle).
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
                    .fetch_add(flow_mods, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                Metrics::inc(&self.metrics.transaction_errors);
                // After a failed bundle the switch may not be what we think (a lost connection
                // may or may not have applied it); the reconnect resync settles it.
                if matches!(&e, Error::Switch(e) if matches!(**e, openflow::Error::Disconnected)) {
                    self.in_sync = false;
                }
                Err(e)
            }
        }
    }

    /// The switch's flows.
    pub async fn dump(&self) -> Result<Vec<FlowStats>, Error> {
        self.await_session().await?;
        Ok(self.switch.dump_flows(FlowStatsRequest::default()).await?)
    }

    /// The switch's flows after a COMMIT that went unanswered: the session it was cut on can
    /// still look up while it is torn down, so the table is then read on the next session.
    pub async fn dump_after_cut(&self) -> Result<Vec<FlowStats>, Error> {
        self.await_session().await?;
        let session = self.switch.session();
        match self.switch.dump_flows(FlowStatsRequest::default()).await {
            Err(openflow::Error::Disconnected | openflow::Error::NotConnected) => {
                if let Some(epoch) = session {
                    let limit = self.connect_timeout;
                    self.switch.wait_session_after(epoch, limit).await?;
                }
                Ok(self.switch.dump_flows(FlowStatsRequest::default()).await?)
            }
            read => Ok(read?),
        }
    }

    /// Waits for the switch's session when there is none, so that an operation made right
    /// after a (re)start fails only when the switch stays away for the connect timeout.
    async fn await_session(&self) -> Result<(), Error> {
        if !self.switch.is_connected() {
            self.switch.wait_connected(self.connect_timeout).await?;
        }
        Ok(())
    }
}

/// A failed bundle the switch may nevertheless have applied (its COMMIT went unanswered).
pub(super) fn may_have_applied(e: &Error) -> bool {
    matches!(e, Error::Switch(e) if e.may_have_applied())
}

fn decode_error(e: ofnode_proto::DecodeError) -> Error {
    CoreError::Flow {
        flow: "<stored flow>".into(),
        reason: e.to_string(),
    }
    .into()
}

/// Hands memory freed after a whole-table operation back to the system. A 40,000-flow bundle
/// needs tens of megabytes for a moment; without this the allocator keeps them for good.
pub(super) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
