//! The public handle: a cheap, cloneable `Client` over one connection task.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use super::codec::DEFAULT_MAX_MESSAGE;
use super::error::{Error, Result};
use super::monitor::{table_spec, Cache};
use super::rpc::{self, parse_target, Call, Shared, Status, Target};
use super::schema::Schema;
use super::txn::{parse_results, Condition, Mutation, Mutator, OpError, OpResult, Operation};
use super::types::{Datum, Row, Uuid};
use crate::tls::TlsConfig;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The database to use; ovs-vswitchd's is "Open_vSwitch".
    pub database: String,
    /// How long one request may wait for its reply (and a connection attempt for the socket).
    pub request_timeout: Duration,
    /// Send an echo after this long without hearing from the server, and drop the connection
    /// after as long again without an answer. `None` disables the probe.
    pub probe_interval: Option<Duration>,
    /// Reconnection delays start at `backoff_min` and double up to `backoff_max` (with jitter).
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Upper bound on one message from the server.
    pub max_message_size: usize,
    /// Whether changes wait until ovs-vswitchd has applied them (`cur_cfg` reaches the bumped
    /// `next_cfg`), as ovs-vsctl does without `--no-wait`. `add_port` always waits: it returns
    /// the OpenFlow port ovs-vswitchd assigned.
    pub wait_for_vswitchd: bool,
    /// How long to wait for ovs-vswitchd to apply a change.
    pub reconfigure_timeout: Duration,
    /// Most requests in flight on one connection; more wait their turn (backpressure, bounded
    /// memory whatever the server does).
    pub max_pending: usize,
    /// Key, certificate and CA for an `ssl:` target.
    pub tls: Option<TlsConfig>,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            database: "Open_vSwitch".into(),
            request_timeout: Duration::from_secs(10),
            probe_interval: Some(Duration::from_secs(5)),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(4),
            max_message_size: DEFAULT_MAX_MESSAGE,
            wait_for_vswitchd: true,
            reconfigure_timeout: Duration::from_secs(30),
            max_pending: 256,
            tls: None,
        }
    }
}

/// A connection to ovsdb-server. Clones share the connection and the cache; the connection task
/// ends when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    calls: mpsc::Sender<Call>,
    shared: Arc<Shared>,
    opts: ClientOptions,
    target: Target,
    /// OpenFlow port numbers chosen for ports ovs-vswitchd has not applied yet.
    pub(super) reserved_ofports: super::pending_port::Reservations,
    /// Port adds waiting to share a transaction.
    pub(super) port_queue: std::sync::Mutex<super::pending_port::PortQueue>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("target", &self.inner.target)
            .field("status", &*self.inner.shared.status.borrow())
            .finish()
    }
}

impl Client {
    /// Connects to `target` (`unix:PATH` or `tcp:HOST:PORT`) and loads the cache. Fails if the
    /// first connection fails; after that, the client reconnects by itself.
    pub async fn connect(target: &str, opts: ClientOptions) -> Result<Client> {
        let target = parse_target(target)?;
        let shared = Arc::new(Shared::new());
        let (calls, calls_rx) = mpsc::channel(256);
        let (first_tx, first_rx) = oneshot::channel();
        tokio::spawn(rpc::run(
            target.clone(),
            opts.clone(),
            shared.clone(),
            calls_rx,
            first_tx,
        ));
        first_rx.await.map_err(|_| Error::Disconnected {
            reason: "the connection task ended before connecting".into(),
        })??;
        Ok(Client {
            inner: Arc::new(Inner {
                calls,
                shared,
                opts,
                target,
                reserved_ofports: Default::default(),
                port_queue: Default::default(),
            }),
        })
    }

    pub(super) fn reservations(&self) -> &super::pending_port::Reservations {
        &self.inner.reserved_ofports
    }

    pub(super) fn port_queue(&self) -> &std::sync::Mutex<super::pending_port::PortQueue> {
        &self.inner.port_queue
    }

    pub fn target(&self) -> String {
        self.inner.target.to_string()
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
    }

    /// True while a session is up and its cache loaded.
    pub fn connected(&self) -> bool {
        self.inner.shared.status.borrow().connected
    }

    pub fn status(&self) -> Status {
        self.inner.shared.status.borrow().clone()
    }

    /// Changes of the connection: `generation` grows with every reconnection (the cache has then
    /// been rebuilt from a fresh monitor), `connected` drops while it is down.
    pub fn watch(&self) -> watch::Receiver<Status> {
        self.inner.shared.status.subscribe()
    }

    /// Ticks whenever the cache changes (a monitor update or a rebuild after a reconnection).
    pub fn cache_changes(&self) -> watch::Receiver<u64> {
        self.inner.shared.cache_version.subscribe()
    }

    /// Waits until a session is up (at once if it is).
    pub async fn wait_connected(&self, limit: Duration) -> Result<()> {
        let mut status = self.watch();
        let outcome = tokio::time::timeout(limit, status.wait_for(|status| status.connected)).await;
        match outcome {
            Err(_) => Err(Error::Timeout {
                what: format!("reconnecting to {}", self.inner.target),
                after: limit,
            }),
            Ok(Err(_)) => Err(self.disconnected()),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// Runs `f` on the cache (never across an await).
    pub fn with_cache<R>(&self, f: impl FnOnce(&Cache) -> R) -> R {
        self.inner.shared.read_cache(f)
    }

    /// The schema of the database, as read at the start of the current session.
    pub fn schema(&self) -> Arc<Schema> {
        self.inner.shared.schema()
    }

    /// A copy of the whole cache.
    pub fn cache_snapshot(&self) -> Cache {
        self.with_cache(Cache::clone)
    }

    /// The OpenFlow port of an interface, from the cache (-1: ovs-vswitchd failed to add it).
    pub fn ofport(&self, iface: &str) -> Option<i64> {
        self.with_cache(|cache| cache.ofport(iface))
    }

    pub(crate) fn disconnected(&self) -> Error {
        let reason = self
            .inner
            .shared
            .status
            .borrow()
            .last_error
            .clone()
            .unwrap_or_else(|| "connection closed".into());
        Error::Disconnected { reason }
    }

    /// Sends one JSON-RPC request and returns its `result`.
    pub async fn call(&self, method: &'static str, params: Value) -> Result<Value> {
        // A caller that retries in a tight loop while disconnected would otherwise never yield
        // and could starve the connection task that is trying to reconnect.
        tokio::task::consume_budget().await;
        if !self.connected() {
            return Err(self.disconnected());
        }
        let (reply, reply_rx) = oneshot::channel();
        let call = Call {
            method,
            params,
            reply,
        };
        if self.inner.calls.send(call).await.is_err() {
            return Err(self.disconnected());
        }
        let after = self.inner.opts.request_timeout;
        match tokio::time::timeout(after, reply_rx).await {
            Err(_) => Err(Error::Timeout {
                what: format!("the {method} request"),
                after,
            }),
            Ok(Err(_)) => Err(self.disconnected()),
            Ok(Ok(outcome)) => outcome,
        }
    }

    pub async fn echo(&self) -> Result<()> {
        self.call("echo", Value::Array(Vec::new()))
            .await
            .map(|_| ())
    }

    pub async fn list_dbs(&self) -> Result<Vec<String>> {
        let result = self.call("list_dbs", Value::Array(Vec::new())).await?;
        serde_json::from_value(result.clone())
            .map_err(|_| Error::Protocol(format!("list_dbs returned {result}")))
    }

    pub async fn get_schema(&self, database: &str) -> Result<Value> {
        self.call("get_schema", Value::Array(vec![database.into()]))
            .await
    }

    /// One transaction: every operation or none. The first failing operation's error (or the
    /// commit's) comes back as [`Error::Server`] with the server's own text.
    pub async fn transact(&self, ops: &[Operation]) -> Result<Vec<OpResult>> {
        self.transact_raw(ops)
            .await?
            .map_err(|err| op_error(ops, err))
    }

    /// Like [`Client::transact`], and returns once ovs-vswitchd has applied it (`next_cfg` is
    /// bumped in the same transaction and awaited in `cur_cfg`, as ovs-vsctl does). A timeout
    /// or a lost session while waiting is an error although the transaction was committed.
    pub async fn transact_applied(&self, ops: &[Operation]) -> Result<Vec<OpResult>> {
        self.transact_and_wait(ops.to_vec(), true)
            .await?
            .map_err(|err| op_error(ops, err))
    }

    /// A transaction whose failing operation the caller wants to inspect.
    pub(crate) async fn transact_raw(
        &self,
        ops: &[Operation],
    ) -> Result<Result<Vec<OpResult>, OpError>> {
        let mut params = vec![Value::String(self.inner.opts.database.clone())];
        params.extend(ops.iter().map(Operation::to_json));
        let result = self.call("transact", Value::Array(params)).await?;
        Ok(parse_results(ops.len(), &result)?)
    }

    /// Like [`Client::transact`], then (when `wait`) bumps `next_cfg` in the same transaction
    /// and waits until ovs-vswitchd reports it applied that configuration.
    pub(crate) async fn transact_and_wait(
        &self,
        ops: Vec<Operation>,
        wait: bool,
    ) -> Result<Result<Vec<OpResult>, OpError>> {
        let (results, next_cfg) = match self.transact_bumping(ops, wait).await? {
            Ok(done) => done,
            Err(err) => return Ok(Err(err)),
        };
        if let Some(next_cfg) = next_cfg {
            self.wait_for_cfg(next_cfg).await?;
        }
        Ok(Ok(results))
    }

    /// Like [`Client::transact`]; with `bump`, also increments `next_cfg` in the same
    /// transaction and returns its new value: ovs-vswitchd has applied the transaction once
    /// `cur_cfg` reaches it.
    pub(crate) async fn transact_bumping(
        &self,
        mut ops: Vec<Operation>,
        bump: bool,
    ) -> Result<Result<(Vec<OpResult>, Option<i64>), OpError>> {
        let n = ops.len();
        if bump {
            ops.push(Operation::Mutate {
                table: "Open_vSwitch".into(),
                conditions: vec![],
                mutations: vec![Mutation::new("next_cfg", Mutator::Add, 1)],
            });
            ops.push(Operation::Select {
                table: "Open_vSwitch".into(),
                conditions: vec![],
                columns: Some(vec!["next_cfg".into()]),
            });
        }
        let mut results = match self.transact_raw(&ops).await? {
            Ok(results) => results,
            Err(err) if err.index.is_some_and(|i| i >= n) => return Err(op_error(&ops, err)),
            Err(err) => return Ok(Err(err)),
        };
        let next_cfg = if bump {
            let next_cfg = results
                .last()
                .and_then(|r| r.rows.as_ref())
                .and_then(|rows| rows.first())
                .and_then(|row| row.get("next_cfg"))
                .and_then(Datum::as_i64)
                .ok_or_else(|| {
                    Error::Protocol(
                        "the Open_vSwitch table has no row (was `ovs-vsctl init` run?)".into(),
                    )
                })?;
            Some(next_cfg)
        } else {
            None
        };
        results.truncate(n);
        Ok(Ok((results, next_cfg)))
    }

    /// Waits until the cache shows `cur_cfg >= cfg`. A reconnection while waiting ends the wait
    /// with `Disconnected`: the caller cannot know what the new session has seen.
    pub async fn wait_for_cfg(&self, cfg: i64) -> Result<()> {
        let mut status = self.watch();
        let mut cache_version = self.cache_changes();
        let generation = status.borrow().generation;
        let after = self.inner.opts.reconfigure_timeout;
        let deadline = tokio::time::Instant::now() + after;
        loop {
            {
                let now = status.borrow_and_update();
                if !now.connected || now.generation != generation {
                    return Err(self.disconnected());
                }
            }
            cache_version.borrow_and_update();
            let cur = self.with_cache(Cache::cur_cfg);
            if cur.is_some_and(|cur| cur >= cfg) {
                return Ok(());
            }
            let changed = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    changed = status.changed() => changed,
                    changed = cache_version.changed() => changed,
                }
            });
            match changed.await {
                Err(_) => {
                    return Err(Error::Timeout {
                        what: format!(
                            "waiting for ovs-vswitchd to apply configuration {cfg} (it is at {})",
                            cur.map_or("none".into(), |c| c.to_string())
                        ),
                        after,
                    })
                }
                Ok(Err(_)) => return Err(self.disconnected()),
                Ok(Ok(())) => {}
            }
        }
    }

    /// Reads one column of one record (`get TABLE RECORD COLUMN`). A record is named by its key
    /// column (Bridge/Port/Interface `name`), by UUID, or `.` for the Open_vSwitch row.
    pub async fn get_column(&self, table: &str, record: &str, column: &str) -> Result<Datum> {
        let (table, conditions) = record_conditions(table, record)?;
        let select = Operation::Select {
            table: table.clone(),
            conditions,
            columns: Some(vec![column.to_string()]),
        };
        let results = self.transact(std::slice::from_ref(&select)).await?;
        let row = results
            .into_iter()
            .next()
            .and_then(|r| r.rows)
            .and_then(|rows| rows.into_iter().next())
            .ok_or_else(|| Error::NotFound {
                table: table.clone(),
                record: record.to_string(),
            })?;
        row.get(column).cloned().ok_or_else(|| {
            Error::Protocol(format!(
                "select of {table}.{column} returned no such column"
            ))
        })
    }

    /// Sets columns of one record (`set TABLE RECORD COL=VALUE…`), whole values. An empty
    /// value clears the column, whether it holds a set or a map.
    pub async fn set_columns(
        &self,
        table: &str,
        record: &str,
        columns: &[(&str, Datum)],
    ) -> Result<()> {
        let row: Row = columns
            .iter()
            .map(|(column, datum)| (column.to_string(), datum.clone()))
            .collect();
        self.update_record(table, record, row).await
    }

    /// Empties a set or map column (`clear TABLE RECORD COLUMN`).
    pub async fn clear_column(&self, table: &str, record: &str, column: &str) -> Result<()> {
        let row = Row::from([(column.to_string(), Datum::empty())]);
        self.update_record(table, record, row).await
    }

    async fn update_record(&self, table: &str, record: &str, mut row: Row) -> Result<()> {
        let (canonical, conditions) = record_conditions(table, record)?;
        let schema = self.schema();
        for (column, datum) in row.iter_mut() {
            if datum.is_empty() {
                *datum = schema.empty_value(&canonical, column);
            }
        }
        let update = Operation::Update {
            table: canonical.clone(),
            conditions,
            row,
        };
        let results =
            self.transact_and_wait(vec![update.clone()], self.inner.opts.wait_for_vswitchd);
        let results = results.await?.map_err(|err| op_error(&[update], err))?;
        expect_count(&results, 0, &canonical, record)
    }
}

/// The table's canonical name and the condition that selects `record` in it.
pub(crate) fn record_conditions(table: &str, record: &str) -> Result<(String, Vec<Condition>)> {
    let spec = table_spec(table);
    let canonical = spec.map_or(table, |spec| spec.name).to_string();
    if let Ok(uuid) = Uuid::parse_str(record) {
        return Ok((canonical, vec![Condition::uuid(uuid)]));
    }
    if canonical == "Open_vSwitch" && record == "." {
        return Ok((canonical, vec![]));
    }
    match spec.and_then(|spec| spec.key) {
        Some(key) => Ok((canonical, vec![Condition::eq(key, record)])),
        None => Err(Error::Invalid(format!(
            "{canonical} records have no name; name {record:?} by its UUID"
        ))),
    }
}

/// Turns a failed operation into an error that says which operation it was.
pub(crate) fn op_error(ops: &[Operation], err: OpError) -> Error {
    let during = match err.index {
        Some(i) => format!(
            "operation {} of {} ({})",
            i + 1,
            ops.len(),
            ops.get(i).map_or_else(String::new, Operation::describe)
        ),
        None => "the transaction's commit".to_string(),
    };
    Error::Server {
        error: err.error,
        details: err.details,
        during,
    }
}

/// Checks that operation `index` (an update/mutate/delete) touched exactly one row.
pub(crate) fn expect_count(
    results: &[OpResult],
    index: usize,
    table: &str,
    record: &str,
) -> Result<()> {
    match results.get(index).and_then(|r| r.count) {
        Some(1) => Ok(()),
        Some(0) => Err(Error::NotFound {
            table: table.to_string(),
            record: record.to_string(),
        }),
        other => Err(Error::Protocol(format!(
            "expected one {table} row {record:?} to change, the server reports {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests;
