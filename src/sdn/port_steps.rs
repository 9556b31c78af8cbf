//! The OVSDB half of a batch: once the writer has a batch's flows on the switch and its
//! journal record on disk, the core's port steps ([`PortStep`]) are carried out here, and the
//! edits that wait for them answered. Each port's steps run in the order of their batches;
//! different ports' run side by side (a batch's port adds share one OVSDB transaction) while
//! the writer goes on with the next batch.
//!
//! What a step's outcome does to the edit it answers (an acknowledged change is carried out in
//! full, or not acknowledged):
//! - a port add OVSDB did not take: the pod add is taken back (an edit through the writer: its
//!   flows go and the journal records it) and fails; when the answer never came, the port
//!   becomes one OVSDB must not hold, so that the reconciler removes it if it was added;
//! - a port removal that failed: the delete stands (its intent is journaled) and the OVSDB
//!   reconciler is woken to retry it, with backoff, until OVSDB holds no such port;
//! - limits OVSDB refused: the previous intent is put back and the edit fails; limits whose
//!   outcome is unknown stand (journaled) and the reconciler makes OVSDB hold them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::bridge::pod_port;
use super::core::{Core, PortStep, TakeBack};
use super::error::Error;
use super::metrics::Metrics;
use super::request::{self, Deferred, Edit, Envelope, Request};
use super::state::PortIntent;
use crate::ovsdb;
use crate::value::IfName;

/// An edit's answer waiting for its port step.
pub struct Answer {
    pub deliver: Deferred,
    pub started: Instant,
}

/// Carries out port steps; the writer's.
pub struct PortSteps {
    work: Arc<Work>,
    /// The last step started per port: the next step of the same port waits for it.
    last: HashMap<IfName, JoinHandle<()>>,
}

/// What a step's task needs.
struct Work {
    ovsdb: ovsdb::Client,
    bridge: String,
    /// The writer's own queue, for the edits a step's outcome calls for (weak: the steps must
    /// not keep the writer alive).
    requests: mpsc::WeakSender<Envelope>,
    metrics: Arc<Metrics>,
    /// Wakes the OVSDB reconciler (`node/ports.rs`) to retry what a step could not do.
    retry: Arc<Notify>,
}

/// Finished steps are forgotten when this many ports have one on record.
const FORGET_FINISHED_AT: usize = 64;

impl PortSteps {
    pub fn new(
        ovsdb: ovsdb::Client,
        bridge: String,
        requests: mpsc::WeakSender<Envelope>,
        metrics: Arc<Metrics>,
        retry: Arc<Notify>,
    ) -> PortSteps {
        PortSteps {
            work: Arc::new(Work {
                ovsdb,
                bridge,
                requests,
                metrics,
                retry,
            }),
            last: HashMap::new(),
        }
    }

    /// Starts `step` once its port's previous step is done; `answer` gets its outcome.
    pub fn start(&mut self, step: PortStep, answer: Option<Answer>) {
        if self.last.len() >= FORGET_FINISHED_AT {
            self.last.retain(|_, task| !task.is_finished());
        }
        let veth = step.veth().clone();
        let previous = self.last.remove(&veth);
        let work = self.work.clone();
        let task = tokio::spawn(async move {
            if let Some(previous) = previous {
                // A step that panicked is as done as one that finished.
                let _ = previous.await;
            }
            let failed = work.carry_out(step).await;
            if let Some(answer) = answer {
                let ok = (answer.deliver)(failed.as_ref());
                work.metrics.count_operation(answer.started, ok);
            }
        });
        self.last.insert(veth, task);
    }
}

impl Work {
    /// Carries out one step; the error its edit fails with, if it does.
    async fn carry_out(&self, step: PortStep) -> Option<Error> {
        match step {
            PortStep::Add {
                veth,
                ofport,
                take_back,
            } => self.add(veth, ofport, take_back).await,
            PortStep::Remove { veth } => {
                self.remove(veth).await;
                None
            }
            PortStep::Limit {
                veth,
                bandwidth,
                previous,
            } => {
                let written = self
                    .ovsdb
                    .set_port_bandwidth(
                        veth.as_str(),
                        bandwidth.qos_max_rate,
                        bandwidth.ingress_policing_kbps,
                    )
                    .await;
                let e = written.err()?;
                if e.may_have_applied() {
                    tracing::warn!(%veth, error = %e, "the outcome of writing the pod's limits is unknown; they stay desired and OVSDB is made to hold them");
                    self.retry.notify_one();
                    return None;
                }
                let set = PortIntent::from(bandwidth);
                if previous != Some(set) {
                    let port = veth.clone();
                    let restore =
                        move |core: &mut Core| core.restore_port_intent(port, set, previous);
                    if let Err(undo) = self.edit(restore).await {
                        tracing::error!(%veth, error = %undo, "putting the pod's previous limits back failed; the refused ones stay desired");
                        self.retry.notify_one();
                    }
                }
                Some(e.into())
            }
        }
    }

    /// A pod's port on `ofport`; should OVSDB not take it, the pod add is taken back.
    async fn add(&self, veth: IfName, ofport: u16, take_back: TakeBack) -> Option<Error> {
        let spec = ovsdb::PortSpec {
            ofport_request: Some(ofport),
            ..pod_port(&self.bridge, veth.as_str())
        };
        let e = match self.ovsdb.add_port_pending(&spec).await {
            Ok(port) => {
                tokio::spawn(confirm_pod_port(port, self.metrics.clone()));
                return None;
            }
            Err(e) => e,
        };
        let port_may_exist = e.may_have_applied();
        tracing::warn!(%veth, error = %e, port_may_exist, "OVSDB did not take the pod's port; taking the pod add back");
        let undone = self
            .edit(move |core: &mut Core| core.take_back(take_back, port_may_exist))
            .await;
        match undone {
            // The reconciler removes the port if OVSDB has it after all.
            Ok(true) if port_may_exist => self.retry.notify_one(),
            Ok(_) => {}
            Err(undo) => {
                // The pod stays desired (journaled, its flows on the switch): the reconciler
                // adds its port.
                tracing::error!(%veth, error = %undo, "taking back the pod add failed; the pod stays and its port is added again");
                self.retry.notify_one();
            }
        }
        Some(e.into())
    }

    /// A deleted pod's port goes; once it is gone its intent is forgotten (in the
    /// background). A failure is left to the reconciler, woken now.
    async fn remove(&self, veth: IfName) {
        match self.ovsdb.delete_port(&self.bridge, veth.as_str()).await {
            Ok(()) => {
                let forget = move |core: &mut Core| core.forget_removed_ports(&[veth]);
                let edit = |reply| Request::Edit(Edit::new(None, forget, reply));
                // Not forgotten now (the writer is gone): the reconciler forgets it.
                let _ = request::send_weak(&self.requests, edit).await;
            }
            Err(e) => {
                tracing::warn!(%veth, error = %e, "deleting the pod's port failed; retrying until it is gone");
                self.retry.notify_one();
            }
        }
    }

    /// An edit through the writer, answered once it is on the switch and on disk.
    async fn edit<T, F, E>(&self, step: F) -> Result<T, Error>
    where
        F: FnOnce(&mut Core) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Into<Error> + 'static,
    {
        let requests = self.requests.upgrade().ok_or(Error::Shutdown)?;
        request::edit(&requests, None, step).await
    }
}

/// Waits until ovs-vswitchd has set up a pod's port and logs and counts it when it could not.
/// A port that got another number than the one chosen is not an error: the pod-port follower
/// (`node/pods.rs`) moves the pod's flows to it.
async fn confirm_pod_port(port: ovsdb::PendingPort, metrics: Arc<Metrics>) {
    let name = port.name().to_string();
    match port.applied().await {
        Ok(_) => {}
        Err(ovsdb::Error::OfportMismatch {
            requested,
            assigned,
            ..
        }) => {
            tracing::warn!(port = %name, requested, assigned, "the pod's port got another OpenFlow number; its flows follow it");
        }
        // Deleted before ovs-vswitchd got to it (a pod del right after the add).
        Err(ovsdb::Error::NotFound { .. }) => {}
        Err(e) => {
            Metrics::inc(&metrics.port_errors);
            tracing::error!(port = %name, error = %e, "ovs-vswitchd did not set up the pod's port");
        }
    }
}
