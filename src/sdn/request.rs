//! What the node's handles and background tasks ask of the writer, and what it answers: one
//! typed seam. Every request carries its own reply channel of the answer's type, so nothing
//! answers with "some output" the asker must sort out.
//!
//! Edits of the desired state that wait together become one batch (one bundle, one journal
//! sync); the other requests run alone. An edit or a read is any step on the core, written
//! once there (`core/ops.rs`, `core/netpol.rs`) and carried here as a closure. The writer
//! takes them from its [`Inbox`]: one request, or an edit with the edits waiting behind it.

use std::collections::HashSet;
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

impl<F, T, E> Operation for Step<F, T>
where
    F: FnOnce(&mut Core) -> Result<T, E> + Send,
    T: Send + 'static,
    E: Into<Error>,
{
    fn apply(self: Box<Self>, core: &mut Core) -> Deferred {
        defer(self.reply, (self.step)(core).map_err(Into::into))
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
    pub fn new<T, F, E>(port: Option<IfName>, step: F, reply: Reply<T>) -> Edit
    where
        F: FnOnce(&mut Core) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Into<Error> + 'static,
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
    pub fn new<T, F, E>(look: F, reply: Reply<T>) -> Read
    where
        F: FnOnce(&Core) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Into<Error>,
    {
        Read(Box::new(move |core, refused| {
            let answer = match refused {
                Some(e) => Err(e),
                None => look(core).map_err(Into::into),
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

impl Request {
    /// What a standby does with the request: edits, reads and setup are refused with `standby`,
    /// resyncs and drift repairs answered as done (the switch is the active daemon's); a
    /// take-over or a shutdown is returned, to be carried out.
    pub fn on_standby(self, core: &Core, standby: Error) -> Option<Request> {
        match self {
            Request::Edit(edit) => edit.refuse(standby),
            Request::Read(read) => read.refuse(core, standby),
            Request::Setup(_, reply) => drop(reply.send(Err(standby))),
            Request::Resync { reply, .. } | Request::RepairDrift { reply, .. } => {
                drop(reply.send(Ok(())))
            }
            request @ (Request::TakeOver { .. } | Request::Shutdown(_)) => return Some(request),
        }
        None
    }
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

/// The writer's end of the request channel: the next request, and the edits waiting behind an
/// edit, taken as one batch.
pub struct Inbox {
    requests: mpsc::Receiver<Envelope>,
    /// A request taken out while a batch was gathered (or put first): the next one.
    pending: Option<Envelope>,
    max_batch: usize,
}

impl Inbox {
    /// The inbox of `requests`, gathering batches of at most `max_batch` edits (at least 1).
    pub fn new(requests: mpsc::Receiver<Envelope>, max_batch: usize) -> Inbox {
        Inbox {
            requests,
            pending: None,
            max_batch: max_batch.max(1),
        }
    }

    /// The next request; None once every sender is gone.
    pub async fn next(&mut self) -> Option<Envelope> {
        match self.pending.take() {
            Some(request) => Some(request),
            None => self.requests.recv().await,
        }
    }

    /// `first` and the edits already waiting behind it, up to the batch bound and up to an
    /// edit of a pod port the batch has an edit of already (one port step per port and batch,
    /// so that each step answers its own edit). Reads waiting among them are handed to `read`
    /// on the way, to be answered from the state before the batch: a pod add's check comes
    /// just before its edit, and ending the batch at each check would make a bundle of every
    /// concurrent pod add.
    pub fn gather(
        &mut self,
        first: Edit,
        started: Instant,
        mut read: impl FnMut(Read),
    ) -> Vec<(Edit, Instant)> {
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
                    request: Request::Read(look),
                    ..
                }) => read(look),
                Ok(other) => {
                    self.pending = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        batch
    }

    /// Makes a resync (nobody waits for its answer) the next request, unless one is pending
    /// already.
    pub fn resync_next(&mut self) {
        if self.pending.is_none() {
            let (reply, _) = oneshot::channel();
            self.pending = Some(Envelope::new(Request::Resync {
                force: false,
                reply,
            }));
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
pub async fn edit<T, F, E>(
    requests: &mpsc::Sender<Envelope>,
    port: Option<IfName>,
    step: F,
) -> Result<T, Error>
where
    F: FnOnce(&mut Core) -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: Into<Error> + 'static,
{
    call(requests, |reply| {
        Request::Edit(Edit::new(port, step, reply))
    })
    .await
}

/// Sends the look `look` at the core and waits for its answer.
pub async fn read<T, F, E>(requests: &mpsc::Sender<Envelope>, look: F) -> Result<T, Error>
where
    F: FnOnce(&Core) -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: Into<Error> + 'static,
{
    call(requests, |reply| Request::Read(Read::new(look, reply))).await
}
