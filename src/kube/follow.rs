//! The follower: the watch updates of every kind into the mirror, the inputs they make into
//! the sink (one edit per event, sent without waiting), the outcomes back into the status.
//!
//! Consistency rules:
//! - **Order.** One task reads every update and sends every edit; the writer applies edits in
//!   the order sent. Dependencies go first (a namespace before its pods and policies, and out
//!   after them: `mirror.rs`).
//! - **Last state wins.** An input is the whole state an entry should have, not a delta:
//!   edits that coalesce into one batch end at the last one; a retry sends the mirror's state
//!   of the moment, not the failed edit again.
//! - **Relist = mark and sweep.** A watch that expired (410) is listed again; what the new list
//!   does not hold was deleted meanwhile and goes. An object unchanged since it was applied
//!   makes no edit.
//! - **Start = adopt and sweep.** A node that restarts has its journaled state; once every
//!   kind is listed, whatever the store holds that the API no longer has goes (`Input::Sweep`).
//! - **Unreachable = hold.** While the API server cannot be reached, nothing changes: the
//!   store keeps the last state, nothing is flushed.
//! - **Bad objects** are judged by their outcome (`apply.rs`), logged once, counted and shown.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{SelectAll, StreamExt};
use kube::runtime::watcher::Event;
use kube::Client;
use tokio::sync::{mpsc, watch, Notify};

use super::apply::Outcome;
use super::input::{Expected, Input, Kind, ObjectRef};
use super::mirror::Mirror;
use super::sink::{Done, Sink};
use super::status::Tracker;
use super::watch::{watch as watch_kind, Fact, Object, Update};
use crate::sdn::types::{Mode, SetupRequest};
use crate::value::Cidr;

/// What the follower shares with the node's API (CNI waits on it).
#[derive(Debug)]
pub struct Shared {
    pub mirror: Mutex<Mirror>,
    /// The last edit sent.
    pub sent: AtomicU64,
    /// Every edit up to this one has been applied (or failed and is retried).
    pub applied: watch::Sender<u64>,
    /// Woken at every update.
    pub changed: Notify,
    pub mode: Mode,
}

impl Shared {
    pub fn new(node: &str, mode: Mode) -> Arc<Shared> {
        Arc::new(Shared {
            mirror: Mutex::new(Mirror::new(node)),
            sent: AtomicU64::new(0),
            applied: watch::Sender::new(0),
            changed: Notify::new(),
            mode,
        })
    }

    pub fn mirror(&self) -> std::sync::MutexGuard<'_, Mirror> {
        self.mirror.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the node is set up with besides its own subnet.
#[derive(Debug, Clone, Copy)]
pub struct Networks {
    pub cluster_network: Cidr,
    pub service_network: Cidr,
    pub mode: Mode,
}

/// A request to the follower from outside its task.
#[derive(Debug)]
pub enum Command {
    /// Send the current state of these objects again (a pod CNI just attached takes its labels
    /// and ports).
    Resend(Vec<ObjectRef>),
}

/// How long a failed edit waits before its objects are sent again (doubling up to the max).
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// How often an unreachable API server is asked whether it is back.
const PROBE: Duration = Duration::from_secs(1);

pub struct Follower<S: Sink> {
    sink: S,
    shared: Arc<Shared>,
    tracker: Arc<Tracker>,
    networks: Networks,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Edits sent and not done: their kind, resourceVersion and objects.
    outstanding: BTreeMap<u64, Sent>,
    /// What each event makes applied, reported in the order of the events.
    watermark: Watermark,
    /// Kinds being (re)listed, with the keys listed so far.
    listing: HashMap<Kind, HashSet<String>>,
    listed_once: HashSet<Kind>,
    adopted: bool,
    set_up: bool,
    retry: BTreeSet<ObjectRef>,
    retry_delay: Duration,
    retry_at: Option<tokio::time::Instant>,
}

struct Sent {
    applied: Applied,
    objects: Vec<ObjectRef>,
}

/// An event's kind and resourceVersion, reported applied once what it needed is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Applied {
    kind: Option<Kind>,
    resource_version: Option<String>,
}

/// Edits are answered in any order, but an event counts as applied only once every edit sent
/// up to it is: the watermark is the highest edit with all before it done, and each event's
/// resourceVersion is reported when the watermark passes it, in the order of the events (so the
/// status's resourceVersion of a kind never goes back, nor ahead of what the node holds).
#[derive(Debug, Default)]
struct Watermark {
    through: u64,
    /// Done edits above the watermark, with their event.
    done: BTreeMap<u64, Applied>,
    /// Events that needed no edit, by the last edit sent before them.
    after: BTreeMap<u64, Vec<Applied>>,
}

impl Watermark {
    /// An event that needed no edit, after edits up to `last_sent`: applied now when those
    /// are (returned), else with the last of them.
    fn nothing_to_send(&mut self, last_sent: u64, applied: Applied) -> Option<Applied> {
        if last_sent <= self.through {
            return Some(applied);
        }
        self.after.entry(last_sent).or_default().push(applied);
        None
    }

    /// Edit `seq` done: the new watermark and the events applied now, in order.
    fn done(&mut self, seq: u64, applied: Applied) -> (u64, Vec<Applied>) {
        self.done.insert(seq, applied);
        let mut now = Vec::new();
        while let Some(applied) = self.done.remove(&(self.through + 1)) {
            self.through += 1;
            now.push(applied);
            now.extend(self.after.remove(&self.through).unwrap_or_default());
        }
        (self.through, now)
    }
}

impl<S: Sink> Follower<S> {
    pub fn new(
        sink: S,
        shared: Arc<Shared>,
        tracker: Arc<Tracker>,
        networks: Networks,
        commands: mpsc::UnboundedReceiver<Command>,
    ) -> Follower<S> {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Follower {
            sink,
            shared,
            tracker,
            networks,
            done_tx,
            done_rx,
            commands,
            outstanding: BTreeMap::new(),
            watermark: Watermark::default(),
            listing: HashMap::new(),
            listed_once: HashSet::new(),
            adopted: false,
            set_up: false,
            retry: BTreeSet::new(),
            retry_delay: RETRY_FIRST,
            retry_at: None,
        }
    }

    /// Follows the API server until the sink stops. HostSubnets first: the node sets itself up
    /// from its own before anything else is sent; then every other kind.
    pub async fn run(mut self, client: Client) {
        let mut updates: SelectAll<futures::stream::BoxStream<'static, Update>> = SelectAll::new();
        updates.push(watch_kind(&client, Kind::HostSubnet));
        let mut all_watched = false;
        // A watch that resumes says nothing until an object changes: while the last request
        // failed, the server is asked for its version every second to tell it is back.
        let mut probe = tokio::time::interval(PROBE);
        loop {
            if self.set_up && !all_watched {
                for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::HostSubnet) {
                    updates.push(watch_kind(&client, kind));
                }
                all_watched = true;
            }
            let retry_at = self.retry_at;
            let keep_going = tokio::select! {
                Some(update) = updates.next() => self.update(update).await,
                Some(done) = self.done_rx.recv() => {
                    self.done(done);
                    true
                }
                Some(command) = self.commands.recv() => self.command(command).await,
                () = sleep_until(retry_at), if retry_at.is_some() => self.resend_retries().await,
                _ = probe.tick(), if self.tracker.is_failing() => {
                    if client.apiserver_version().await.is_ok() {
                        tracing::info!("the Kubernetes API server answers again");
                        self.tracker.connected();
                    }
                    true
                }
            };
            self.shared.changed.notify_waiters();
            if !keep_going {
                tracing::info!("the node stopped: no longer following the Kubernetes API server");
                return;
            }
        }
    }

    async fn update(&mut self, update: Update) -> bool {
        let kind = update.kind;
        let event = match update.event {
            Ok(event) => {
                self.tracker.connected();
                event
            }
            Err(error) => {
                if self.tracker.is_connected() {
                    tracing::warn!(%kind, %error, "the Kubernetes API server: holding the last state until it answers again");
                }
                self.tracker.failed(&error);
                return true;
            }
        };
        match event {
            Event::Init => {
                self.tracker.listing(kind);
                self.listing.insert(kind, HashSet::new());
                true
            }
            Event::InitApply(object) => {
                if let Some(seen) = self.listing.get_mut(&kind) {
                    seen.insert(object.object.key.clone());
                }
                self.object(object).await
            }
            Event::InitDone => self.listed(kind).await,
            Event::Apply(object) => self.object(object).await,
            Event::Delete(object) => {
                self.tracker.judge(&object.object, None);
                let inputs = self.set(&object.object, None).await;
                self.send(Some(kind), object.resource_version, inputs).await
            }
        }
    }

    /// An object created, changed, or listed.
    async fn object(&mut self, object: Object) -> bool {
        let fact = match object.fact {
            Ok(fact) => {
                self.tracker.judge(&object.object, None);
                fact
            }
            Err(refused) => {
                self.tracker
                    .judge(&object.object, Some(refused.to_string()));
                None
            }
        };
        let inputs = self.set(&object.object, fact).await;
        self.send(Some(object.object.kind), object.resource_version, inputs)
            .await
    }

    /// A list of `kind` is complete: what it did not hold is gone (the sweep of a relist);
    /// once every kind was listed the first time, the store itself is swept.
    async fn listed(&mut self, kind: Kind) -> bool {
        let seen = self.listing.remove(&kind).unwrap_or_default();
        let gone: Vec<String> = self
            .shared
            .mirror()
            .keys(kind)
            .into_iter()
            .filter(|key| !seen.contains(key))
            .collect();
        let mut inputs = Vec::new();
        for key in gone {
            let object = ObjectRef::new(kind, key);
            tracing::info!(%object, "gone while the watch was down: removed");
            self.tracker.judge(&object, None);
            inputs.extend(self.set(&object, None).await);
        }
        let ok = self.send(Some(kind), None, inputs).await;
        self.tracker
            .listed(kind, self.shared.sent.load(Ordering::Relaxed));
        self.listed_once.insert(kind);
        if !self.adopted && self.set_up && self.listed_once.len() == Kind::ALL.len() {
            self.adopted = true;
            let expected = Expected::of(&self.shared.mirror());
            return ok && self.send(None, None, vec![Input::Sweep(expected)]).await;
        }
        ok
    }

    /// The mirror's inputs for `object` now being `fact`; this node's own HostSubnet sets the
    /// node up instead.
    async fn set(&mut self, object: &ObjectRef, fact: Option<Fact>) -> Vec<Input> {
        let key = object.key.as_str();
        let (inputs, own) = {
            let mut mirror = self.shared.mirror();

            let result = match (object.kind, fact) {
                (Kind::Namespace, Some(Fact::Namespace(facts))) => {
                    (mirror.set_namespace(key, Some(facts)), false)
                }
                (Kind::Namespace, _) => (mirror.set_namespace(key, None), false),
                (Kind::NetNamespace, Some(Fact::NetNamespace(vnid))) => {
                    (mirror.set_netnamespace(key, Some(vnid)), false)
                }
                (Kind::NetNamespace, _) => (mirror.set_netnamespace(key, None), false),
                (Kind::Pod, fact) => match key.parse() {
                    Ok(pod) => {
                        let facts = match fact {
                            Some(Fact::Pod(facts)) => Some(facts),
                            _ => None,
                        };
                        (mirror.set_pod(pod, facts), false)
                    }
                    Err(_) => (Vec::new(), false),
                },
                (Kind::NetworkPolicy, Some(Fact::NetPol(facts))) => {
                    (mirror.set_policy(key, Some(facts)), false)
                }
                (Kind::NetworkPolicy, _) => (mirror.set_policy(key, None), false),
                (Kind::Service, Some(Fact::Service(facts))) => {
                    (mirror.set_service(key, Some(facts)), false)
                }
                (Kind::Service, _) => (mirror.set_service(key, None), false),
                (Kind::EgressNetworkPolicy, Some(Fact::Egress(policy))) => {
                    (mirror.set_egress(key, Some(policy)), false)
                }
                (Kind::EgressNetworkPolicy, _) => (mirror.set_egress(key, None), false),
                (kind @ (Kind::AdminNetworkPolicy | Kind::BaselineAdminNetworkPolicy), fact) => {
                    let policy = match fact {
                        Some(Fact::Admin(policy)) => Some(policy),
                        _ => None,
                    };
                    (mirror.set_admin(kind, key, policy), false)
                }
                (Kind::HostSubnet, Some(Fact::HostSubnet(hs))) => {
                    mirror.set_host_subnet(key, Some(hs))
                }
                (Kind::HostSubnet, _) => mirror.set_host_subnet(key, None),
            };
            self.tracker.event(object.kind, mirror.count(object.kind));
            result
        };
        if own {
            self.own_subnet_changed().await;
        }
        inputs
    }

    /// This node's HostSubnet appeared or changed: the node is set up with it. One that goes
    /// leaves the node as it is (its pods keep working; the controller gives it one again).
    async fn own_subnet_changed(&mut self) {
        let own = self.shared.mirror().own_subnet().copied();
        let Some(own) = own else {
            tracing::warn!("this node's HostSubnet was deleted: keeping the node as it is set up");
            return;
        };
        let setup = SetupRequest {
            cluster_network: self.networks.cluster_network,
            service_network: self.networks.service_network,
            local_subnet: own.subnet,
            gateway: std::net::Ipv4Addr::from(u32::from(own.subnet.addr()) + 1),
            mode: self.networks.mode,
        };
        let object = ObjectRef::new(Kind::HostSubnet, self.shared.mirror().node_name());
        match self.sink.setup(setup).await {
            Ok(()) => {
                tracing::info!(subnet = %own.subnet, "set up from this node's HostSubnet");
                self.tracker.judge(&object, None);
                self.set_up = true;
            }
            Err(e) => {
                self.tracker.judge(
                    &object,
                    Some(format!("cannot set the node up with it: {e}")),
                );
                self.schedule_retry();
            }
        }
    }

    fn schedule_retry(&mut self) {
        if self.retry_at.is_none() {
            self.retry_at = Some(tokio::time::Instant::now() + self.retry_delay);
            self.retry_delay = (self.retry_delay * 2).min(RETRY_MAX);
        }
    }

    /// Sends `inputs` as one edit (none: nothing to send; the resourceVersion is applied as of
    /// the edits before).
    async fn send(
        &mut self,
        kind: Option<Kind>,
        resource_version: Option<String>,
        inputs: Vec<Input>,
    ) -> bool {
        let applied = Applied {
            kind,
            resource_version,
        };
        let last_sent = self.shared.sent.load(Ordering::Relaxed);
        if inputs.is_empty() {
            if let Some(applied) = self.watermark.nothing_to_send(last_sent, applied) {
                let through = *self.shared.applied.borrow();
                self.tracker
                    .applied(applied.kind, through, applied.resource_version);
            }
            return true;
        }
        let seq = last_sent + 1;
        let objects = inputs.iter().flat_map(Input::objects).collect();
        self.outstanding.insert(seq, Sent { applied, objects });
        self.shared.sent.store(seq, Ordering::Relaxed);
        self.tracker
            .set_pending(self.outstanding.len(), self.retry.len());
        self.sink.send(seq, inputs, &self.done_tx).await
    }

    /// An edit's outcome: objects judged, failures queued for a retry, the watermark moved.
    fn done(&mut self, done: Done) {
        let Some(sent) = self.outstanding.remove(&done.seq) else {
            return;
        };
        match done.result {
            Ok(outcomes) => {
                for (objects, outcome) in outcomes {
                    for object in objects {
                        match &outcome {
                            Outcome::Applied => self.tracker.judge(&object, None),
                            Outcome::Complaint(why) | Outcome::Refused(why) => {
                                self.tracker.judge(&object, Some(why.clone()))
                            }
                            Outcome::Retry(why) => {
                                tracing::debug!(%object, %why, "retrying");
                                self.retry.insert(object);
                            }
                        }
                    }
                }
            }
            Err(why) => {
                tracing::warn!(edit = done.seq, %why, "an edit from the Kubernetes API failed: its objects are sent again");
                self.retry.extend(sent.objects);
            }
        }
        let (through, applied) = self.watermark.done(done.seq, sent.applied);
        self.shared.applied.send_replace(through);
        for applied in applied {
            self.tracker
                .applied(applied.kind, through, applied.resource_version);
        }
        if self.retry.is_empty() {
            self.retry_delay = RETRY_FIRST;
        } else {
            self.schedule_retry();
        }
        self.tracker
            .set_pending(self.outstanding.len(), self.retry.len());
    }

    async fn resend_retries(&mut self) -> bool {
        self.retry_at = None;
        if !self.set_up && self.shared.mirror().own_subnet().is_some() {
            self.own_subnet_changed().await;
        }
        let objects = std::mem::take(&mut self.retry);
        self.resend(objects.into_iter().collect()).await
    }

    async fn resend(&mut self, objects: Vec<ObjectRef>) -> bool {
        let inputs: Vec<Input> = {
            let mirror = self.shared.mirror();
            objects.iter().flat_map(|o| mirror.input_for(o)).collect()
        };
        self.send(None, None, inputs).await
    }

    async fn command(&mut self, command: Command) -> bool {
        match command {
            Command::Resend(objects) => self.resend(objects).await,
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: Kind, rv: &str) -> Applied {
        Applied {
            kind: Some(kind),
            resource_version: Some(rv.to_string()),
        }
    }

    #[test]
    fn events_are_applied_in_their_order_whatever_order_the_edits_are_answered_in() {
        let mut w = Watermark::default();
        // Edits 1, 2, 3 sent for policies at resourceVersions 10, 11, 13; an event at 12 needed
        // no edit (after edit 2), one at 14 none either (after edit 3).
        assert_eq!(w.nothing_to_send(2, event(Kind::Pod, "12")), None);
        assert_eq!(w.nothing_to_send(3, event(Kind::NetworkPolicy, "14")), None);
        // Edit 3 answered first: nothing is applied yet (1 and 2 are not).
        assert_eq!(w.done(3, event(Kind::NetworkPolicy, "13")), (0, vec![]));
        // Edit 2: still waiting for 1.
        assert_eq!(w.done(2, event(Kind::NetworkPolicy, "11")), (0, vec![]));
        // Edit 1: everything, in the events' order; the last policy version reported is 14.
        let (through, applied) = w.done(1, event(Kind::NetworkPolicy, "10"));
        assert_eq!(through, 3);
        let order: Vec<&str> = applied
            .iter()
            .filter_map(|a| a.resource_version.as_deref())
            .collect();
        assert_eq!(order, ["10", "11", "12", "13", "14"]);
        // With nothing outstanding, an event that needs no edit is applied at once.
        assert_eq!(
            w.nothing_to_send(3, event(Kind::Pod, "15")),
            Some(event(Kind::Pod, "15"))
        );
    }
}
