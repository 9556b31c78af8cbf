//! What the node's handles and background tasks ask of the writer, and what it answers: one
//! typed seam. Every request carries its own reply channel of the answer's type, so nothing
//! answers with "some output" the asker must sort out.
//!
//! Edits of the desired state that wait together become one batch (one bundle, one journal
//! sync); the other requests run alone. An edit or a read is any step on the core, written
//! once there (`core/ops.rs`, `core/netpol.rs`) and carried here as a closure.

use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::core::{Core, SetupOutcome};
use super::error::Error;
use super::types::{Pod, SetupRequest};
use crate::value::IfName;

/// Where an answer goes.
pub type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// An edit's answer, held until its batch is on the switch and on disk (or failed), and its
/// port step, if it has one, is carried out. Called with the failure of either, if any;
/// returns whether the edit succeeded.
pub type Deferred = Box<dyn FnOnce(Option<&Error>) -> bool + Send>;

/// One step on the core and the reply it owes (see [`Edit`] and [`Read`]).
trait Operation: Send {
    /// Applies the step to the core's open batch; its answer waits for the batch.
    fn apply(self: Box<Self>, core: &mut Core) -> Deferred;
    /// Answers with `error` instead.
    fn refuse(self: Box<Self>, error: Error);
}

struct Step<F, T> {
    step: F,
    reply: Reply<T>,
}

impl<F, T> Operation for Step<F, T>
where
    F: FnOnce(&mut Core) -> Result<T, Error> + Send,
    T: Send + 'static,
{
    fn apply(self: Box<Self>, core: &mut Core) -> Deferred {
        defer(self.reply, (self.step)(core))
    }

    fn refuse(self: Box<Self>, error: Error) {
        let _ = self.reply.send(Err(error));
    }
}

/// The answer of a step, delivered when its batch ends: a step that succeeded in a batch
/// that failed fails with the batch's error.
fn defer<T: Send + 'static>(reply: Reply<T>, result: Result<T, Error>) -> Deferred {
    Box::new(move |batch_failed| {
        let result = match (result, batch_failed) {
            (Ok(_), Some(e)) => Err(e.clone()),
            (result, _) => result,
        };
        let ok = result.is_ok();
        if let Err(e) = &result {
            tracing::debug!(error = %e, "node operation failed");
        }
        // The caller may have given up waiting; the outcome stands either way.
        let _ = reply.send(result);
        ok
    })
}

/// A change of the desired state: any operation of the core (`core/ops.rs`,
/// `core/netpol.rs`), written once there, carried here as a closure with its reply.
pub struct Edit {
    /// The pod port it may give a port step.
    port: Option<IfName>,
    operation: Box<dyn Operation>,
}

impl Edit {
    /// The edit `step` (on the core's open batch), answered on `reply`; `port` is the pod
    /// port it may give a port step (a batch holds at most one edit per port, so that each
    /// step answers its own edit).
    pub fn new<T, F>(port: Option<IfName>, step: F, reply: Reply<T>) -> Edit
    where
        F: FnOnce(&mut Core) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        Edit {
            port,
            operation: Box::new(Step { step, reply }),
        }
    }

    /// The pod port the edit may give a port step.
    pub fn port(&self) -> Option<&IfName> {
        self.port.as_ref()
    }

    /// Applies the edit to the core's open batch; its answer waits for the batch.
    pub fn apply(self, core: &mut Core) -> Deferred {
        self.operation.apply(core)
    }

    /// Answers the edit with `error` instead of doing it.
    pub fn refuse(self, error: Error) {
        self.operation.refuse(error)
    }
}

/// A look at the core that answers its asker: with what it saw, or with the refusal given.
type Look = Box<dyn FnOnce(&Core, Option<Error>) + Send>;

/// A look at the desired state (between batches: only what is on the switch and on disk).
pub struct Read(Look);

impl Read {
    /// The look `look` at the core, answered on `reply`.
    pub fn new<T, F>(look: F, reply: Reply<T>) -> Read
    where
        F: FnOnce(&Core) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        Read(Box::new(move |core, refused| {
            let answer = match refused {
                Some(e) => Err(e),
                None => look(core),
            };
            let _ = reply.send(answer);
        }))
    }

    pub fn answer(self, core: &Core) {
        (self.0)(core, None)
    }

    pub fn refuse(self, core: &Core, error: Error) {
        (self.0)(core, Some(error))
    }
}

/// What setup did, and the pods it dropped (whose ports go too).
#[derive(Debug)]
pub struct SetupDone {
    pub outcome: SetupOutcome,
    pub dropped: Vec<Pod>,
}

pub enum Request {
    Edit(Edit),
    Read(Read),
    /// Install `setup` (building or rebuilding the table) in one bundle.
    Setup(SetupRequest, Reply<SetupDone>),
    /// Make the switch's table equal to the desired one; `force` re-installs it whole.
    Resync {
        force: bool,
        reply: Reply<()>,
    },
    /// The same as a resync without force, after the switch reported foreign changes (`seen`
    /// says which); a repair that changes anything is recorded as drift.
    RepairDrift {
        seen: String,
        reply: Reply<()>,
    },
    /// High availability: this daemon just became master; adopt the state the previous active
    /// daemon replicated and reconcile the switch with it.
    TakeOver {
        generation: u64,
        reply: Reply<()>,
    },
    /// Stop after answering (what is queued behind it fails with `Error::Shutdown`).
    Shutdown(Reply<()>),
}

/// A request and when it arrived (for the latency histogram).
pub struct Envelope {
    pub request: Request,
    pub started: Instant,
}

impl Envelope {
    pub fn new(request: Request) -> Envelope {
        Envelope {
            request,
            started: Instant::now(),
        }
    }
}

/// Sends a request made around a fresh reply channel; the receiver of the answer, or None
/// when the writer has stopped.
pub async fn send<T>(
    requests: &mpsc::Sender<Envelope>,
    make: impl FnOnce(Reply<T>) -> Request,
) -> Option<oneshot::Receiver<Result<T, Error>>> {
    let (reply, answer) = oneshot::channel();
    requests.send(Envelope::new(make(reply))).await.ok()?;
    Some(answer)
}

/// Sends a request and waits for its answer.
pub async fn call<T>(
    requests: &mpsc::Sender<Envelope>,
    make: impl FnOnce(Reply<T>) -> Request,
) -> Result<T, Error> {
    let answer = send(requests, make).await.ok_or(Error::Shutdown)?;
    answer.await.map_err(|_| Error::Shutdown)?
}

/// [`send`] from a task that must not keep the writer alive: None when it has stopped.
pub async fn send_weak<T>(
    requests: &mpsc::WeakSender<Envelope>,
    make: impl FnOnce(Reply<T>) -> Request,
) -> Option<oneshot::Receiver<Result<T, Error>>> {
    let requests = requests.upgrade()?;
    send(&requests, make).await
}

/// Sends the edit `step` (with `port`, see [`Edit::new`]) and waits for its answer.
pub async fn edit<T, F>(
    requests: &mpsc::Sender<Envelope>,
    port: Option<IfName>,
    step: F,
) -> Result<T, Error>
where
    F: FnOnce(&mut Core) -> Result<T, Error> + Send + 'static,
    T: Send + 'static,
{
    call(requests, |reply| {
        Request::Edit(Edit::new(port, step, reply))
    })
    .await
}

/// Sends the look `look` at the core and waits for its answer.
pub async fn read<T, F>(requests: &mpsc::Sender<Envelope>, look: F) -> Result<T, Error>
where
    F: FnOnce(&Core) -> Result<T, Error> + Send + 'static,
    T: Send + 'static,
{
    call(requests, |reply| Request::Read(Read::new(look, reply))).await
}
