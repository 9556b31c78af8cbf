//! The leader's loop: fresh watches (a quorum list first, so the state is rebuilt from the API
//! after the previous leader's last write), one [`Ledger`] fed by them, and the writes it
//! decides, sent concurrently (each asks the [`Fence`] first and has a deadline). It returns once
//! the fence is revoked and every write in flight has ended.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use futures::stream::{BoxStream, FuturesUnordered, SelectAll};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::config::Settings;
use super::lease::{Fence, NotLeader};
use super::objects::{HostSubnet, NetNamespace, FIELD_MANAGER};
use super::state::{Conflict, Decision, Key, Ledger, Outcome, Write, Written};
use super::status::Status;

/// Writes in flight at once: enough to keep up with nodes and namespaces created in bulk,
/// few enough not to crowd the API server.
const MAX_IN_FLIGHT: usize = 16;
/// How long a write that got no answer may still be applied by the API server (its own
/// request timeout is 60 s): until then, or until the watch shows its object, its value stays
/// reserved.
const IN_DOUBT: Duration = Duration::from_secs(60);
/// How often the status is refreshed and due retries are looked at.
const TICK: Duration = Duration::from_millis(200);

/// One event of one of the watches (boxed: a Node is large, a NetNamespace small).
enum Observed {
    Node(Box<Result<Event<Node>, watcher::Error>>),
    Namespace(Box<Result<Event<Namespace>, watcher::Error>>),
    HostSubnet(Box<Result<Event<HostSubnet>, watcher::Error>>),
    NetNamespace(Box<Result<Event<NetNamespace>, watcher::Error>>),
}

/// The objects of one kind as a relist delivers them, until it is complete.
struct Relist<T> {
    buffer: Vec<T>,
    done: bool,
}

impl<T> Default for Relist<T> {
    fn default() -> Self {
        Relist {
            buffer: Vec::new(),
            done: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl WriteError {
    /// The API server's view moved on (the object exists, changed or went): the watch brings
    /// the news and the key is decided again; nothing failed.
    fn is_unanswered(&self) -> bool {
        // No answer in time, or the connection failed after the request may have gone out.
        !matches!(
            self,
            WriteError::Api(kube::Error::Api(_)) | WriteError::NotLeader(_)
        )
    }

    fn is_stale(&self) -> bool {
        matches!(self, WriteError::Api(kube::Error::Api(s))
            if s.is_already_exists() || s.is_conflict() || s.is_not_found())
    }
}

struct Done {
    key: Key,
    /// A create, kept to be sent again when it got no answer.
    create: Option<Write>,
    verb: &'static str,
    took: Duration,
    result: Result<Written, WriteError>,
}

/// What the loop keeps besides the ledger.
struct Leader<'a> {
    client: Client,
    settings: &'a Settings,
    status: &'a Status,
    ledger: Ledger,
    nodes: Relist<Node>,
    namespaces: Relist<Namespace>,
    host_subnets: Relist<HostSubnet>,
    net_namespaces: Relist<NetNamespace>,
    synced: bool,
    dirty: BTreeSet<Key>,
    retries: Vec<(Instant, Key)>,
    /// Creates that got no answer, to be sent again as they were (same name, same value).
    resends: Vec<(Instant, Key, Write)>,
    /// Resends that are due, for the loop to send.
    due_resends: Vec<(Key, Write)>,
    /// Keys with a request out: nothing more is decided about them until it is answered (an
    /// old answer must never end a newer write's reservation).
    sending: BTreeMap<Key, usize>,
    reported_waiting: BTreeMap<Key, String>,
    reported_conflicts: BTreeSet<Conflict>,
}

/// Leads until `fence` is revoked; then waits for the writes in flight and returns.
pub async fn lead(client: Client, settings: &Settings, fence: &Fence, status: &Status) {
    let mut leader = Leader {
        ledger: Ledger::new(settings),
        client,
        settings,
        status,
        nodes: Relist::default(),
        namespaces: Relist::default(),
        host_subnets: Relist::default(),
        net_namespaces: Relist::default(),
        synced: false,
        dirty: BTreeSet::new(),
        retries: Vec::new(),
        resends: Vec::new(),
        due_resends: Vec::new(),
        sending: BTreeMap::new(),
        reported_waiting: BTreeMap::new(),
        reported_conflicts: BTreeSet::new(),
    };
    let mut events = leader.watches();
    let mut writes = FuturesUnordered::new();
    let mut tick = tokio::time::interval(TICK);
    let mut waiting_again = tokio::time::interval(settings.lease.retry_period);
    let revoked = fence.revoked();
    let mut revoked = std::pin::pin!(revoked);
    loop {
        tokio::select! {
            () = &mut revoked => break,
            Some(done) = writes.next(), if !writes.is_empty() => leader.finished(done),
            Some(event) = events.next() => leader.observe(event),
            _ = tick.tick() => leader.tick(),
            _ = waiting_again.tick() => leader.dirty.extend(leader.ledger.waiting_keys()),
        }
        if leader.synced {
            while writes.len() < MAX_IN_FLIGHT {
                let Some((key, write)) = leader.due_resends.pop().or_else(|| leader.next_decided())
                else {
                    break;
                };
                let allowed = fence.check();
                status.write_attempted(allowed.is_ok());
                let timeout = settings.lease.write_timeout();
                *leader.sending.entry(key.clone()).or_default() += 1;
                writes.push(send(leader.client.clone(), allowed, key, write, timeout));
            }
        }
    }
    // No write starts any more (the fence is closed); the ones in flight end within their
    // deadline, and only then may the lease be given up.
    while let Some(done) = writes.next().await {
        leader.finished(done);
    }
    info!("stopped leading");
}

impl Leader<'_> {
    fn watches(&self) -> SelectAll<BoxStream<'static, Observed>> {
        let config = watcher::Config::default();
        let client = &self.client;
        let mut streams: Vec<BoxStream<'static, Observed>> = vec![
            watcher::watcher(Api::<Node>::all(client.clone()), config.clone())
                .map(|e| Observed::Node(Box::new(e)))
                .boxed(),
            watcher::watcher(Api::<HostSubnet>::all(client.clone()), config.clone())
                .map(|e| Observed::HostSubnet(Box::new(e)))
                .boxed(),
        ];
        if self.ledger.allocates_netids() {
            streams.push(
                watcher::watcher(Api::<Namespace>::all(client.clone()), config.clone())
                    .map(|e| Observed::Namespace(Box::new(e)))
                    .boxed(),
            );
            streams.push(
                watcher::watcher(Api::<NetNamespace>::all(client.clone()), config)
                    .map(|e| Observed::NetNamespace(Box::new(e)))
                    .boxed(),
            );
        }
        futures::stream::select_all(streams)
    }

    fn observe(&mut self, event: Observed) {
        let failed = match event {
            Observed::Node(event) => (*event).map(|e| self.event(e)),
            Observed::Namespace(event) => (*event).map(|e| self.event(e)),
            Observed::HostSubnet(event) => (*event).map(|e| self.event(e)),
            Observed::NetNamespace(event) => (*event).map(|e| self.event(e)),
        };
        if let Err(err) = failed {
            warn!("watch: {err}; retrying");
            self.status.watch_failed(format!("watch: {err}"));
        }
    }

    /// One watch event of kind `K`: the ledger follows it, and the keys it touches are
    /// decided again. A relist (after a start or an expired watch) replaces the kind's objects
    /// only once it is complete, removing those the API server no longer has.
    fn event<K: Watched>(&mut self, event: Event<K>) {
        match event {
            Event::Apply(object) => {
                let name = object.name_any();
                K::set(&mut self.ledger, object);
                self.dirty.insert(K::key(name));
            }
            Event::Delete(object) => {
                let name = object.name_any();
                K::remove(&mut self.ledger, &name);
                self.dirty.insert(K::key(name));
                if K::FREES_VALUES {
                    // A subnet or netid came free: whoever waits for one may get it.
                    self.dirty.extend(self.ledger.waiting_keys());
                }
            }
            Event::Init => K::relist(self).buffer.clear(),
            Event::InitApply(object) => K::relist(self).buffer.push(object),
            Event::InitDone => {
                let listed = std::mem::take(&mut K::relist(self).buffer);
                let kept: BTreeSet<String> = listed.iter().map(ResourceExt::name_any).collect();
                for name in K::known(&self.ledger) {
                    if !kept.contains(&name) {
                        K::remove(&mut self.ledger, &name);
                    }
                }
                for object in listed {
                    K::set(&mut self.ledger, object);
                }
                K::relist(self).done = true;
                self.relisted();
            }
        }
    }

    /// A kind was listed (anew): once every kind was, everything is decided again.
    fn relisted(&mut self) {
        let vnids = self.ledger.allocates_netids();
        let all = self.nodes.done
            && self.host_subnets.done
            && (!vnids || (self.namespaces.done && self.net_namespaces.done));
        if !all {
            return;
        }
        if !self.synced {
            self.ledger.resume();
            self.synced = true;
            let summary = self.ledger.summary();
            info!(
                nodes = summary.nodes,
                host_subnets = summary.host_subnets,
                namespaces = summary.namespaces,
                net_namespaces = summary.net_namespaces,
                "listed everything: allocating"
            );
            self.status.set_synced(summary);
        }
        self.dirty.extend(self.ledger.keys());
    }

    fn finished(&mut self, done: Done) {
        let key = done.key;
        if let Some(n) = self.sending.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.sending.remove(&key);
            }
        }
        let in_doubt = self.ledger.in_doubt(&key);
        let outcome = match done.result {
            Ok(written) => {
                debug!(%key, verb = done.verb, took = ?done.took, "written");
                self.status.wrote(done.verb, done.took);
                Outcome::Written(written)
            }
            // An earlier try of this create may have been applied: only the watch can tell.
            Err(err) if in_doubt => {
                debug!(%key, "{} sent again: {err}", done.verb);
                if !err.is_stale() {
                    self.resend_later(&key, done.create);
                }
                Outcome::Unknown {
                    until: std::time::Instant::now() + IN_DOUBT,
                }
            }
            Err(err) if err.is_stale() => {
                debug!(%key, "{} answered {err}: deciding again with what the watch shows", done.verb);
                Outcome::Refused
            }
            Err(WriteError::NotLeader(_)) => Outcome::Refused,
            Err(err) => {
                warn!(%key, "{} failed: {err}; retrying", done.verb);
                self.status
                    .write_failed(format!("{key}: {} failed: {err}", done.verb));
                match done.create {
                    // Its value stays reserved and it is sent again as it was: were it
                    // applied after all, no other key may have the value meanwhile.
                    Some(create) if err.is_unanswered() => {
                        self.resend_later(&key, Some(create));
                        Outcome::Unknown {
                            until: std::time::Instant::now() + IN_DOUBT,
                        }
                    }
                    _ => {
                        self.ledger.finish(&key, Outcome::Refused);
                        let at = Instant::now() + self.settings.lease.retry_period;
                        self.retries.push((at, key));
                        return;
                    }
                }
            }
        };
        self.ledger.finish(&key, outcome);
        self.dirty.insert(key);
    }

    /// The next dirty key that needs a write, and the write.
    fn next_decided(&mut self) -> Option<(Key, Write)> {
        loop {
            let key = self.dirty.pop_first()?;
            if self.sending.contains_key(&key) {
                continue; // decided again once its answer comes
            }
            if let Decision::Write(write) = self.ledger.decide(&key) {
                return Some((key, write));
            }
        }
    }

    fn resend_later(&mut self, key: &Key, create: Option<Write>) {
        if let Some(create) = create {
            let at = Instant::now() + self.settings.lease.retry_period;
            self.resends.push((at, key.clone(), create));
        }
    }

    fn tick(&mut self) {
        let now = Instant::now();
        let settled = self.ledger.expire_doubts(now.into_std());
        self.dirty.extend(settled);
        let (due, later): (Vec<_>, Vec<_>) =
            self.resends.drain(..).partition(|(at, ..)| *at <= now);
        self.resends = later;
        // Only while still in doubt: the watch may have shown the object meanwhile.
        let still = due
            .into_iter()
            .filter(|(_, key, _)| self.ledger.in_doubt(key));
        self.due_resends
            .extend(still.map(|(_, key, write)| (key, write)));
        let (due, later): (Vec<_>, Vec<_>) = self.retries.drain(..).partition(|(at, _)| *at <= now);
        self.retries = later;
        self.dirty.extend(due.into_iter().map(|(_, key)| key));
        if self.synced {
            let summary = self.ledger.summary();
            self.report_changes(&summary);
            self.status.set_synced(summary);
        }
    }

    /// Logs what started or stopped waiting, and conflicts as they appear and go.
    fn report_changes(&mut self, summary: &super::state::Summary) {
        let waiting: BTreeMap<Key, String> = summary
            .waiting
            .iter()
            .map(|w| (w.key.clone(), w.reason.clone()))
            .collect();
        for (key, reason) in &waiting {
            if self.reported_waiting.get(key) != Some(reason) {
                warn!(%key, "no allocation: {reason}");
            }
        }
        for key in self
            .reported_waiting
            .keys()
            .filter(|k| !waiting.contains_key(*k))
        {
            info!(%key, "no longer waiting");
        }
        self.reported_waiting = waiting;
        let conflicts: BTreeSet<Conflict> = summary.conflicts.iter().cloned().collect();
        for conflict in conflicts.difference(&self.reported_conflicts) {
            warn!(kind = conflict.kind, names = ?conflict.names, "conflict: {}", conflict.problem);
        }
        for conflict in self.reported_conflicts.difference(&conflicts) {
            info!(kind = conflict.kind, names = ?conflict.names, "resolved: {}", conflict.problem);
        }
        self.reported_conflicts = conflicts;
    }
}

/// How the ledger follows one kind of watched object.
trait Watched: ResourceExt + Sized {
    /// A deletion frees a subnet or netid.
    const FREES_VALUES: bool;
    fn key(name: String) -> Key;
    fn relist<'r>(leader: &'r mut Leader<'_>) -> &'r mut Relist<Self>;
    /// The names the ledger holds of this kind.
    fn known(ledger: &Ledger) -> Vec<String>;
    fn set(ledger: &mut Ledger, object: Self);
    fn remove(ledger: &mut Ledger, name: &str);
}

impl Watched for Node {
    const FREES_VALUES: bool = false;
    fn key(name: String) -> Key {
        Key::Node(name)
    }
    fn relist<'r>(leader: &'r mut Leader<'_>) -> &'r mut Relist<Self> {
        &mut leader.nodes
    }
    fn known(ledger: &Ledger) -> Vec<String> {
        ledger.node_names()
    }
    fn set(ledger: &mut Ledger, node: Self) {
        ledger.set_node(&node.name_any(), internal_ip(&node));
    }
    fn remove(ledger: &mut Ledger, name: &str) {
        ledger.remove_node(name);
    }
}

impl Watched for Namespace {
    const FREES_VALUES: bool = false;
    fn key(name: String) -> Key {
        Key::Namespace(name)
    }
    fn relist<'r>(leader: &'r mut Leader<'_>) -> &'r mut Relist<Self> {
        &mut leader.namespaces
    }
    fn known(ledger: &Ledger) -> Vec<String> {
        ledger.namespace_names()
    }
    fn set(ledger: &mut Ledger, namespace: Self) {
        ledger.set_namespace(&namespace.name_any());
    }
    fn remove(ledger: &mut Ledger, name: &str) {
        ledger.remove_namespace(name);
    }
}

impl Watched for HostSubnet {
    const FREES_VALUES: bool = true;
    fn key(name: String) -> Key {
        Key::Node(name)
    }
    fn relist<'r>(leader: &'r mut Leader<'_>) -> &'r mut Relist<Self> {
        &mut leader.host_subnets
    }
    fn known(ledger: &Ledger) -> Vec<String> {
        ledger.host_subnet_names()
    }
    fn set(ledger: &mut Ledger, object: Self) {
        ledger.set_host_subnet(object);
    }
    fn remove(ledger: &mut Ledger, name: &str) {
        ledger.remove_host_subnet(name);
    }
}

impl Watched for NetNamespace {
    const FREES_VALUES: bool = true;
    fn key(name: String) -> Key {
        Key::Namespace(name)
    }
    fn relist<'r>(leader: &'r mut Leader<'_>) -> &'r mut Relist<Self> {
        &mut leader.net_namespaces
    }
    fn known(ledger: &Ledger) -> Vec<String> {
        ledger.net_namespace_names()
    }
    fn set(ledger: &mut Ledger, object: Self) {
        ledger.set_net_namespace(object);
    }
    fn remove(ledger: &mut Ledger, name: &str) {
        ledger.remove_net_namespace(name);
    }
}

/// The Node's first IPv4 InternalIP: the tunnel endpoint other nodes send its pods' traffic to.
fn internal_ip(node: &Node) -> Option<Ipv4Addr> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .find_map(|a| a.address.parse().ok())
}

/// Sends one write if the fence `allowed` it, within `timeout`.
fn send(
    client: Client,
    allowed: Result<(), NotLeader>,
    key: Key,
    write: Write,
    timeout: Duration,
) -> futures::future::BoxFuture<'static, Done> {
    let verb = write.verb();
    let create = matches!(
        write,
        Write::CreateHostSubnet(_) | Write::CreateNetNamespace(_)
    )
    .then(|| write.clone());
    async move {
        let started = Instant::now();
        let result = match allowed {
            Err(not_leader) => Err(WriteError::NotLeader(not_leader)),
            Ok(()) => match tokio::time::timeout(timeout, execute(client, write)).await {
                Ok(result) => result.map_err(WriteError::from),
                Err(_) => Err(WriteError::Timeout(timeout)),
            },
        };
        Done {
            key,
            create,
            verb,
            took: started.elapsed(),
            result,
        }
    }
    .boxed()
}

async fn execute(client: Client, write: Write) -> Result<Written, kube::Error> {
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let delete = |p: &super::state::Precondition| DeleteParams {
        preconditions: Some(Preconditions {
            uid: p.uid.clone(),
            resource_version: p.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let subnets = Api::<HostSubnet>::all(client.clone());
    let netnamespaces = Api::<NetNamespace>::all(client);
    Ok(match write {
        Write::CreateHostSubnet(o) => Written::HostSubnet(subnets.create(&post, &o).await?),
        Write::ReplaceHostSubnet(o) => {
            Written::HostSubnet(subnets.replace(&o.name_any(), &post, &o).await?)
        }
        Write::DeleteHostSubnet(p) => {
            subnets.delete(&p.name, &delete(&p)).await?;
            Written::Deleted
        }
        Write::CreateNetNamespace(o) => {
            Written::NetNamespace(netnamespaces.create(&post, &o).await?)
        }
        Write::ReplaceNetNamespace(o) => {
            Written::NetNamespace(netnamespaces.replace(&o.name_any(), &post, &o).await?)
        }
        Write::DeleteNetNamespace(p) => {
            netnamespaces.delete(&p.name, &delete(&p)).await?;
            Written::Deleted
        }
    })
}
