//! Where the follower's inputs go: a node (each API event one edit through its writer, sent
//! without waiting, so that a burst of events becomes few bundles), or a bare core (the scale
//! bench's simulated nodes: the same inputs, the same `apply`, no switch). The outcome of every
//! edit comes back as a [`Done`].

use std::future::Future;

use tokio::sync::mpsc;

use super::apply::{apply_all, Outcome};
use super::input::{Input, ObjectRef};
use crate::sdn::core::{Core, SetupPlan};
use crate::sdn::{Error, Node, SetupRequest};

/// The outcome of edit `seq`: each input's, or the failure of the batch it went in (the
/// switch or the journal refused it: nothing of it was applied).
#[derive(Debug)]
pub struct Done {
    pub seq: u64,
    pub result: Result<Vec<(Vec<ObjectRef>, Outcome)>, String>,
}

/// Where inputs go.
pub trait Sink: Send + 'static {
    /// Sends `inputs` as edit `seq`; its [`Done`] goes to `done` once it is applied. False
    /// when the sink has stopped.
    fn send(
        &mut self,
        seq: u64,
        inputs: Vec<Input>,
        done: &mpsc::UnboundedSender<Done>,
    ) -> impl Future<Output = bool> + Send;

    /// Sets the node up (its own HostSubnet appeared or changed).
    fn setup(&mut self, setup: SetupRequest) -> impl Future<Output = Result<(), Error>> + Send;
}

/// A node: each edit goes to its writer.
#[derive(Debug, Clone)]
pub struct NodeSink(pub Node);

impl Sink for NodeSink {
    async fn send(
        &mut self,
        seq: u64,
        mut inputs: Vec<Input>,
        done: &mpsc::UnboundedSender<Done>,
    ) -> bool {
        // Egress DNS names are resolved before the edit, as `egress set` resolves them.
        for input in &mut inputs {
            if let Input::Egress {
                want: Some(state), ..
            } = input
            {
                *state = self
                    .0
                    .egress_entry(&state.namespaces, &state.policies)
                    .await;
            }
        }
        let Some(answer) = self
            .0
            .send_edit(move |core| Ok(apply_all(core, &inputs)))
            .await
        else {
            return false;
        };
        let done = done.clone();
        tokio::spawn(async move {
            let result = match answer.await {
                Ok(Ok(outcomes)) => Ok(outcomes),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(Error::Shutdown.to_string()),
            };
            let _ = done.send(Done { seq, result });
        });
        true
    }

    async fn setup(&mut self, setup: SetupRequest) -> Result<(), Error> {
        self.0.setup(&setup).await.map(|_| ())
    }
}

/// What a bare core's committed batch changed: its flows.
pub type Recorder = Box<dyn FnMut(&crate::sdn::table::Diff) + Send>;

/// A bare core: each edit is applied at once, its effects committed and recorded (the switch
/// replaced by `record`).
pub struct CoreSink {
    core: Core,
    record: Recorder,
}

impl CoreSink {
    pub fn new(core: Core, record: Recorder) -> CoreSink {
        CoreSink { core, record }
    }

    pub fn core(&self) -> &Core {
        &self.core
    }
}

impl std::fmt::Debug for CoreSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreSink").finish_non_exhaustive()
    }
}

impl Sink for CoreSink {
    async fn send(
        &mut self,
        seq: u64,
        inputs: Vec<Input>,
        done: &mpsc::UnboundedSender<Done>,
    ) -> bool {
        let outcomes = apply_all(&mut self.core, &inputs);
        let effects = self.core.take_effects();
        (self.record)(&effects.flows);
        self.core.commit();
        let _ = done.send(Done {
            seq,
            result: Ok(outcomes),
        });
        true
    }

    async fn setup(&mut self, setup: SetupRequest) -> Result<(), Error> {
        if let SetupPlan::Replace { next, .. } = self.core.setup(setup)? {
            self.core = *next;
        }
        Ok(())
    }
}
