//! The connection task: one tokio task owns the socket, answers the server's `echo`, probes an
//! idle server, keeps the monitor cache, matches replies to requests by id, and reconnects with
//! backoff and jitter. Callers talk to it through a channel; every request ends with its reply,
//! [`Error::Disconnected`] or [`Error::Timeout`] — never a hang.
//!
//! Ordering the cache relies on: ovsdb-server flushes a session's monitor updates before it
//! sends any reply on that session (`ovsdb_jsonrpc_session_send` in ovsdb/jsonrpc-server.c), and
//! this task handles messages in arrival order, so when a transact reply reaches its caller the
//! cache already holds the transaction's effect.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::BytesMut;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_util::codec::Framed;

use super::client::ClientOptions;
use super::codec::{CodecError, Decoder, Message};
use super::error::{Error, Result};
use super::monitor::{monitor_params, parse_table_updates, Cache};
use super::schema::Schema;
use crate::stream::{self, Backoff, Stream};

/// Where ovsdb-server listens: `unix:PATH`, `tcp:HOST:PORT` or `ssl:HOST:PORT` (the stream
/// target syntax, active targets only, the port always named).
pub type Target = crate::stream::Target;

/// Parses an OVSDB target.
pub fn parse_target(text: &str) -> Result<Target> {
    let bad = |reason: String| Error::Target {
        target: text.to_string(),
        reason,
    };
    let target = Target::parse(text, None).map_err(|e| bad(e.reason))?;
    if target.is_passive() {
        return Err(bad(
            "ofnode connects to ovsdb-server: use unix:, tcp: or ssl:".into(),
        ));
    }
    Ok(target)
}

/// What every `Client` clone sees of the connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub connected: bool,
    /// Counts sessions: it grows by one each time a (re)connection has its monitor in place.
    pub generation: u64,
    /// Why the last session ended.
    pub last_error: Option<String>,
}

pub(crate) struct Shared {
    pub cache: RwLock<Cache>,
    pub schema: RwLock<Arc<Schema>>,
    pub status: watch::Sender<Status>,
    /// Counts changes of the cache (monitor updates, or a rebuild), for waiters on a column.
    pub cache_version: watch::Sender<u64>,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            cache: RwLock::new(Cache::default()),
            schema: RwLock::new(Arc::new(Schema::default())),
            status: watch::Sender::new(Status::default()),
            cache_version: watch::Sender::new(0),
        }
    }

    /// Reads the cache. A panic while the lock was held cannot leave the cache half-written
    /// (updates are applied by value), so a poisoned lock is still safe to read.
    pub fn read_cache<R>(&self, f: impl FnOnce(&Cache) -> R) -> R {
        let guard = self.cache.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    pub fn schema(&self) -> Arc<Schema> {
        self.schema
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_schema(&self, schema: Schema) {
        *self.schema.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(schema);
    }

    fn cache_changed(&self) {
        self.cache_version.send_modify(|version| *version += 1);
    }

    fn write_cache(&self, f: impl FnOnce(&mut Cache)) {
        let mut guard = self.cache.write().unwrap_or_else(|e| e.into_inner());
        f(&mut guard);
    }
}

/// A request from a caller.
pub(crate) struct Call {
    pub method: &'static str,
    pub params: Value,
    pub reply: oneshot::Sender<Result<Value>>,
}

/// Owns the connection until every `Client` is dropped.
pub(crate) async fn run(
    target: Target,
    opts: ClientOptions,
    shared: Arc<Shared>,
    mut calls: mpsc::Receiver<Call>,
    first: oneshot::Sender<Result<()>>,
) {
    let mut first = Some(first);
    let mut backoff = Backoff::new(opts.backoff_min, opts.backoff_max);
    loop {
        let mut session = Session::new(&target, &opts, &shared);
        let outcome = session.run(&mut calls, &mut first).await;
        let established = session.established;
        let reason = match outcome {
            Ended::Shutdown => return,
            Ended::Failed(err) => err,
        };
        tracing::warn!(target = %target, error = %reason, "OVSDB session ended");
        shared.status.send_modify(|status| {
            status.connected = false;
            status.last_error = Some(reason.to_string());
        });
        if let Some(first) = first.take() {
            // The first connection failed: `Client::connect` reports it and the task ends.
            let _ = first.send(Err(reason));
            return;
        }
        if established {
            backoff.reset();
        }
        if !refuse_calls_for(backoff.next_delay(), &mut calls, &reason.to_string()).await {
            return;
        }
    }
}

/// Answers calls with `Disconnected` while waiting to reconnect; false when every client is gone.
async fn refuse_calls_for(delay: Duration, calls: &mut mpsc::Receiver<Call>, reason: &str) -> bool {
    let deadline = Instant::now() + delay;
    loop {
        tokio::select! {
            _ = sleep_until(deadline) => return true,
            call = calls.recv() => match call {
                Some(call) => {
                    let _ = call.reply.send(Err(Error::Disconnected { reason: reason.to_string() }));
                }
                None => return false,
            },
        }
    }
}

enum Ended {
    Shutdown,
    Failed(Error),
}

/// The JSON-RPC codec for tokio-util's `Framed`, a thin shell over the sans-IO [`Decoder`].
struct RpcCodec(Decoder);

#[derive(Debug)]
enum WireError {
    Io(std::io::Error),
    Codec(CodecError),
}

impl From<std::io::Error> for WireError {
    fn from(err: std::io::Error) -> WireError {
        WireError::Io(err)
    }
}

impl tokio_util::codec::Decoder for RpcCodec {
    type Item = Message;
    type Error = WireError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, WireError> {
        self.0.decode(buf).map_err(WireError::Codec)
    }
}

impl tokio_util::codec::Encoder<Message> for RpcCodec {
    type Error = WireError;

    fn encode(&mut self, message: Message, buf: &mut BytesMut) -> Result<(), WireError> {
        let mut out = Vec::new();
        message.encode(&mut out);
        buf.extend_from_slice(&out);
        Ok(())
    }
}

type Conn = Framed<Stream, RpcCodec>;

/// Ids of the requests a session starts with; callers' requests have numeric ids.
const SCHEMA_REQUEST_ID: &str = "ofnode-schema";
const MONITOR_REQUEST_ID: &str = "ofnode-monitor";
/// Our inactivity probe's id; its reply matters only as "the server is alive".
const PROBE_ID: &str = "ofnode-probe";
const MONITOR_ID: &str = "ofnode";
/// How long a failed opening write waits for the server's reason (an alert already sent).
const PEER_REASON_WAIT: Duration = Duration::from_millis(200);

struct Pending {
    method: &'static str,
    reply: oneshot::Sender<Result<Value>>,
}

struct Session<'a> {
    target: &'a Target,
    opts: &'a ClientOptions,
    shared: &'a Shared,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    established: bool,
    last_heard: Instant,
    probe_sent: Option<Instant>,
}

impl<'a> Session<'a> {
    fn new(target: &'a Target, opts: &'a ClientOptions, shared: &'a Shared) -> Session<'a> {
        Session {
            target,
            opts,
            shared,
            pending: HashMap::new(),
            next_id: 1,
            established: false,
            last_heard: Instant::now(),
            probe_sent: None,
        }
    }

    async fn run(
        &mut self,
        calls: &mut mpsc::Receiver<Call>,
        first: &mut Option<oneshot::Sender<Result<()>>>,
    ) -> Ended {
        let result = self.connect_and_serve(calls, first).await;
        let reason = match &result {
            Ok(()) => return Ended::Shutdown,
            Err(err) => err.to_string(),
        };
        for (_, pending) in self.pending.drain() {
            let _ = pending.reply.send(Err(Error::Disconnected {
                reason: reason.clone(),
            }));
        }
        match result {
            Ok(()) => Ended::Shutdown,
            Err(err) => Ended::Failed(err),
        }
    }

    /// Returns `Ok` only when every client is gone.
    async fn connect_and_serve(
        &mut self,
        calls: &mut mpsc::Receiver<Call>,
        first: &mut Option<oneshot::Sender<Result<()>>>,
    ) -> Result<()> {
        let stream = timeout(
            self.opts.request_timeout,
            stream::connect(self.target, self.opts.tls.as_ref()),
        )
        .await
        .map_err(|_| Error::Timeout {
            what: format!("connecting to {}", self.target),
            after: self.opts.request_timeout,
        })?
        .map_err(|source| Error::Connect {
            target: self.target.to_string(),
            source,
        })?;
        let mut conn: Conn =
            Framed::new(stream, RpcCodec(Decoder::new(self.opts.max_message_size)));
        self.start_session(&mut conn).await?;
        self.established = true;
        self.shared.status.send_modify(|status| {
            status.connected = true;
            status.generation += 1;
        });
        tracing::info!(target = %self.target, "connected to ovsdb-server, cache loaded");
        if let Some(first) = first.take() {
            let _ = first.send(Ok(()));
        }
        self.serve(&mut conn, calls).await
    }

    /// Reads the schema and starts the monitor (both requests sent at once), then replaces the
    /// cache with the monitor's initial rows.
    async fn start_session(&mut self, conn: &mut Conn) -> Result<()> {
        let database = Value::String(self.opts.database.clone());
        let monitor = monitor_params(&self.opts.database, MONITOR_ID);
        self.send_opening(
            conn,
            request(json!(SCHEMA_REQUEST_ID), "get_schema", json!([database])),
        )
        .await?;
        self.send_opening(conn, request(json!(MONITOR_REQUEST_ID), "monitor", monitor))
            .await?;
        let deadline = Instant::now() + self.opts.request_timeout;
        let (mut schema, mut initial) = (None, None);
        while schema.is_none() || initial.is_none() {
            let message = timeout_at_or(deadline, conn.next(), || Error::Timeout {
                what: "the replies to get_schema and monitor".into(),
                after: self.opts.request_timeout,
            })
            .await?;
            match self.received(message)? {
                Message::Response { id, result, error } if id == SCHEMA_REQUEST_ID => {
                    if !error.is_null() {
                        return Err(server_error("get_schema", &error));
                    }
                    schema = Some(Schema::from_json(&result)?);
                }
                Message::Response { id, result, error } if id == MONITOR_REQUEST_ID => {
                    if !error.is_null() {
                        return Err(server_error("monitor", &error));
                    }
                    initial = Some(parse_table_updates(&result)?);
                }
                other => self.handle(conn, other).await?,
            }
        }
        if let (Some(schema), Some(initial)) = (schema, initial) {
            self.shared.set_schema(schema);
            let cache = Cache::from_initial(&initial);
            self.shared.write_cache(|cached| *cached = cache);
            self.shared.cache_changed();
        }
        Ok(())
    }

    async fn serve(&mut self, conn: &mut Conn, calls: &mut mpsc::Receiver<Call>) -> Result<()> {
        loop {
            let wake = self.next_probe_deadline();
            let probing = wake.is_some();
            // A disabled branch's future is still built, so it needs some instant.
            let wake = wake.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                message = conn.next() => {
                    let message = self.received(message)?;
                    self.handle(conn, message).await?;
                }
                call = calls.recv(), if self.has_room() => match call {
                    Some(call) => self.send_call(conn, call).await?,
                    None => return Ok(()),
                },
                _ = sleep_until(wake), if probing => self.probe(conn).await?,
            }
        }
    }

    /// Whether another request may be sent: at most `max_pending` are in flight on one session,
    /// further callers wait in the call queue (and time out there if the server stays silent).
    fn has_room(&mut self) -> bool {
        let max = self.opts.max_pending.max(1);
        if self.pending.len() >= max {
            // Callers that gave up free their slot.
            self.pending.retain(|_, pending| !pending.reply.is_closed());
        }
        self.pending.len() < max
    }

    /// Turns what the stream yielded into a message, noting that the server is alive.
    fn received(&mut self, item: Option<Result<Message, WireError>>) -> Result<Message> {
        let message = match item {
            Some(Ok(message)) => message,
            Some(Err(WireError::Codec(err))) => return Err(Error::Codec(err)),
            Some(Err(WireError::Io(source))) => {
                return Err(Error::Io {
                    target: self.target.to_string(),
                    source,
                })
            }
            None => {
                return Err(Error::Disconnected {
                    reason: "ovsdb-server closed the connection".into(),
                })
            }
        };
        self.last_heard = Instant::now();
        self.probe_sent = None;
        Ok(message)
    }

    async fn handle(&mut self, conn: &mut Conn, message: Message) -> Result<()> {
        match message {
            Message::Request { id, method, params } => {
                let reply = if method == "echo" {
                    Message::Response {
                        id,
                        result: params,
                        error: Value::Null,
                    }
                } else {
                    Message::Response {
                        id,
                        result: Value::Null,
                        error: json!({"error": "unknown method", "details": method}),
                    }
                };
                self.send(conn, reply).await
            }
            Message::Notification { method, params } if method == "update" => {
                let updates = params.get(1).ok_or_else(|| {
                    Error::Protocol(format!("update without table-updates: {params}"))
                })?;
                let updates = parse_table_updates(updates)?;
                self.shared.write_cache(|cache| cache.apply(&updates));
                self.shared.cache_changed();
                Ok(())
            }
            Message::Notification { .. } => Ok(()),
            Message::Response { id, result, error } => {
                let Some(pending) = id.as_u64().and_then(|id| self.pending.remove(&id)) else {
                    // The probe's reply, or the reply to a call whose caller gave up.
                    return Ok(());
                };
                let outcome = if error.is_null() {
                    Ok(result)
                } else {
                    Err(server_error(pending.method, &error))
                };
                let _ = pending.reply.send(outcome);
                Ok(())
            }
        }
    }

    async fn send_call(&mut self, conn: &mut Conn, call: Call) -> Result<()> {
        if call.reply.is_closed() {
            return Ok(());
        }
        let id = self.next_id;
        self.next_id += 1;
        let message = request(json!(id), call.method, call.params);
        self.pending.insert(
            id,
            Pending {
                method: call.method,
                reply: call.reply,
            },
        );
        self.send(conn, message).await
    }

    /// Sends one of the session's opening requests. A server that refuses us just after the
    /// TLS handshake (TLS 1.3 checks our certificate only then) sends its alert and closes, and
    /// the write can fail with a broken pipe before the alert is read: the alert, when it is
    /// already here, is the reason to report ("received fatal alert: UnknownCA").
    async fn send_opening(&mut self, conn: &mut Conn, message: Message) -> Result<()> {
        let Err(write_failed) = self.send(conn, message).await else {
            return Ok(());
        };
        match timeout(PEER_REASON_WAIT, conn.next()).await {
            Ok(item @ Some(Err(_))) => Err(self.received(item).err().unwrap_or(write_failed)),
            _ => Err(write_failed),
        }
    }

    async fn send(&self, conn: &mut Conn, message: Message) -> Result<()> {
        conn.send(message).await.map_err(|err| match err {
            WireError::Io(source) => Error::Io {
                target: self.target.to_string(),
                source,
            },
            WireError::Codec(err) => Error::Codec(err),
        })
    }

    /// When the probe timer should fire next: `probe_interval` after the last message heard
    /// (send an echo), or after the echo went unanswered (give up). `None` disables probing.
    fn next_probe_deadline(&self) -> Option<Instant> {
        let interval = self.opts.probe_interval?;
        Some(self.probe_sent.unwrap_or(self.last_heard) + interval)
    }

    async fn probe(&mut self, conn: &mut Conn) -> Result<()> {
        // Forget callers that gave up (timed out) so `pending` does not grow on a live session.
        self.pending.retain(|_, pending| !pending.reply.is_closed());
        if self.probe_sent.is_some() {
            return Err(Error::Timeout {
                what: "ovsdb-server's answer to our inactivity probe".into(),
                after: self.opts.probe_interval.unwrap_or_default(),
            });
        }
        self.probe_sent = Some(Instant::now());
        self.send(conn, request(json!(PROBE_ID), "echo", json!([])))
            .await
    }
}

fn request(id: Value, method: &str, params: Value) -> Message {
    Message::Request {
        id,
        method: method.to_string(),
        params,
    }
}

/// A JSON-RPC error object `{"error": ..., "details": ...}` (or a bare string) as an `Error`.
pub(crate) fn server_error(during: &str, error: &Value) -> Error {
    let text = |value: Option<&Value>| match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match error {
        Value::Object(_) => Error::Server {
            error: text(error.get("error")),
            details: text(error.get("details")),
            during: during.to_string(),
        },
        other => Error::Server {
            error: text(Some(other)),
            details: String::new(),
            during: during.to_string(),
        },
    }
}

async fn timeout_at_or<F: std::future::Future>(
    deadline: Instant,
    future: F,
    on_timeout: impl FnOnce() -> Error,
) -> Result<F::Output> {
    tokio::time::timeout_at(deadline, future)
        .await
        .map_err(|_| on_timeout())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_the_port_named_and_active_only() {
        assert_eq!(
            parse_target("unix:/run/db.sock").unwrap(),
            Target::Unix("/run/db.sock".into())
        );
        assert_eq!(
            parse_target("tcp:[::1]:6640").unwrap().to_string(),
            "tcp:[::1]:6640"
        );
        for bad in [
            "",
            "unix:",
            "tcp:host",
            "tcp::1",
            "tcp:h:99999",
            "ssl:h",
            "tls:h:1",
            "ptcp:6640",
        ] {
            assert!(
                matches!(parse_target(bad), Err(Error::Target { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn server_errors_keep_the_servers_words() {
        let err = server_error(
            "transact",
            &json!({"error": "unknown database", "details": "get_schema request specifies unknown database x"}),
        );
        assert!(matches!(&err, Error::Server { error, details, .. }
            if error == "unknown database" && details.contains("unknown database x")));
        assert!(matches!(server_error("x", &json!("unknown method")),
            Error::Server { error, .. } if error == "unknown method"));
    }
}
