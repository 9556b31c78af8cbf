//! `Switch`: the cheap, cloneable handle every task uses to talk to one switch.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ofnode_proto::{
    text, FlowStats, FlowStatsRequest, Message, MultipartReply, MultipartReplyBody,
    MultipartRequest,
};
use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::config::SwitchConfig;
use super::driver::Submit;
use super::error::{Error, Result};
use super::event::{EventSink, SwitchEvent, TapSink, TappedPacketIns};
use super::routes::Route;
use super::supervisor::{LinkState, Supervisor};
use super::transaction::Transaction;
use super::transport::Listener;
use super::xid::XidAllocator;
use crate::stream::{no_tls, Target};

/// A handle on the OpenFlow connection to one switch. Clone it freely: all clones share one
/// connection, whose requests are pipelined and whose replies are matched by xid. The
/// connection lives until the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Switch {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    commands: mpsc::Sender<Submit>,
    state: watch::Receiver<LinkState>,
    xids: Arc<XidAllocator>,
    bundle_ids: AtomicU32,
    cfg: Arc<SwitchConfig>,
    /// Passive mode: a target to dial while no peer has dialled in (see `dial_while_unserved`).
    fallback: watch::Sender<Option<Target>>,
    /// Active mode: wakes the supervisor from its backoff wait (see `dial_now`).
    dial_now: Arc<Notify>,
    /// The packet-ins `cfg.packet_in_tap` sets apart, until someone takes them.
    tapped: std::sync::Mutex<Option<TappedPacketIns>>,
}

impl Switch {
    /// Starts connecting (or listening) in the background. Must be called within a tokio
    /// runtime. Events (connected, disconnected, port status, packet-in, errors for
    /// fire-and-forget messages) arrive on the returned channel; drain it or drop it. Data
    /// events are dropped when it is full, but Connected/Disconnected wait for room: a receiver
    /// that is kept and never read stalls the next (re)connect.
    ///
    /// A passive target that cannot be bound is reported as a `Disconnected` event and retried
    /// with backoff.
    pub fn start(cfg: SwitchConfig) -> (Switch, mpsc::Receiver<SwitchEvent>) {
        let (switch, events, supervisor) = Switch::build(cfg);
        if supervisor.cfg.target.is_passive() {
            tokio::spawn(async move {
                if let Some(listener) = bind_with_retry(&supervisor).await {
                    supervisor.run_passive(listener).await;
                }
            });
        } else {
            tokio::spawn(supervisor.run_active());
        }
        (switch, events)
    }

    /// Passive mode on a TCP listener bound by the caller, e.g. on a thread that entered the
    /// switch's network namespace. `cfg.target` only names it in logs.
    pub fn start_with_listener(
        cfg: SwitchConfig,
        listener: std::net::TcpListener,
    ) -> Result<(Switch, mpsc::Receiver<SwitchEvent>)> {
        let context = "adopting the controller listener";
        let tls = match &cfg.tls {
            _ if !cfg.target.is_tls() => None,
            Some(tls) => Some(tls),
            None => return Err(Error::io(context, no_tls(&cfg.target))),
        };
        let listener = Listener::from_std_tcp(listener, tls).map_err(|e| Error::io(context, e))?;
        let (switch, events, supervisor) = Switch::build(cfg);
        tokio::spawn(supervisor.run_passive(listener));
        Ok((switch, events))
    }

    fn build(cfg: SwitchConfig) -> (Switch, mpsc::Receiver<SwitchEvent>, Supervisor) {
        let cfg = Arc::new(cfg);
        let (command_tx, command_rx) = mpsc::channel(cfg.max_queue.max(1));
        let (event_tx, event_rx) = mpsc::channel(cfg.event_queue.max(1));
        let (state_tx, state_rx) = watch::channel(LinkState::Down);
        let xids = Arc::new(XidAllocator::new());
        let (fallback_tx, fallback_rx) = watch::channel(None);
        let dial_now = Arc::new(Notify::new());
        let (tap, tapped) = match &cfg.packet_in_tap {
            Some(tap) => {
                let (sink, tapped) = TapSink::new(tap);
                (Some(sink), Some(tapped))
            }
            None => (None, None),
        };
        let supervisor = Supervisor {
            cfg: cfg.clone(),
            xids: xids.clone(),
            events: EventSink::new(event_tx, tap),
            state: state_tx,
            commands: command_rx,
            fallback: fallback_rx,
            dial_now: dial_now.clone(),
            epoch: 0,
        };
        let inner = Inner {
            commands: command_tx,
            state: state_rx,
            xids,
            bundle_ids: AtomicU32::new(1),
            cfg,
            fallback: fallback_tx,
            dial_now,
            tapped: std::sync::Mutex::new(tapped),
        };
        let switch = Switch {
            inner: Arc::new(inner),
        };
        (switch, event_rx, supervisor)
    }

    /// Passive mode: while no switch has dialled in, dial `target` instead (e.g. the bridge's
    /// management socket `unix:…/br0.mgmt`, which ovs-vswitchd serves even while
    /// `flow-restore-wait` keeps it from dialling its controllers); a switch that dials in
    /// later replaces that session. Every call dials again at once (the backoff starts over);
    /// None stops dialling (a session in use stays). Active targets dial anyway: no effect.
    pub fn dial_while_unserved(&self, target: Option<Target>) {
        self.inner.fallback.send_replace(target);
    }

    /// Active mode: when the connection is waiting out its reconnect backoff, dial now (and
    /// start the backoff over), e.g. because the switch was just seen coming back. A call
    /// while a session is up or a dial is under way makes the next wait end at once. Passive
    /// targets: no effect.
    pub fn dial_now(&self) {
        self.inner.dial_now.notify_one();
    }

    /// The packet-ins the config's `packet_in_tap` sets apart (the first call only; None
    /// without a tap). Until taken, they fill its channel and the rest are dropped.
    pub fn take_packet_in_tap(&self) -> Option<TappedPacketIns> {
        self.inner
            .tapped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The current session's number (each connect gets a higher one), if a session is up.
    pub fn session(&self) -> Option<u64> {
        match *self.inner.state.borrow() {
            LinkState::Up { epoch, .. } => Some(epoch),
            LinkState::Down => None,
        }
    }

    /// A receiver that is told of every connect and loss.
    pub(crate) fn sessions(&self) -> watch::Receiver<LinkState> {
        self.inner.state.clone()
    }

    pub fn is_connected(&self) -> bool {
        matches!(*self.inner.state.borrow(), LinkState::Up { .. })
    }

    /// The datapath id of the current session, if any.
    pub fn datapath_id(&self) -> Option<u64> {
        match *self.inner.state.borrow() {
            LinkState::Up { datapath_id, .. } => Some(datapath_id),
            LinkState::Down => None,
        }
    }

    /// Waits until a session is up (handshake done) and returns its datapath id.
    pub async fn wait_connected(&self, timeout: Duration) -> Result<u64> {
        let (_, datapath_id) = self
            .wait_session(timeout, "a connection to the switch", 0)
            .await?;
        Ok(datapath_id)
    }

    /// Waits until a session newer than `epoch` is up (a session that is being torn down can
    /// still look up for a moment) and returns its number.
    pub async fn wait_session_after(&self, epoch: u64, timeout: Duration) -> Result<u64> {
        let (epoch, _) = self
            .wait_session(
                timeout,
                "a new connection to the switch",
                epoch.saturating_add(1),
            )
            .await?;
        Ok(epoch)
    }

    /// The first session up numbered `first_epoch` or higher: its number and datapath id.
    async fn wait_session(
        &self,
        timeout: Duration,
        what: &str,
        first_epoch: u64,
    ) -> Result<(u64, u64)> {
        let mut state = self.inner.state.clone();
        let wanted =
            |s: &LinkState| matches!(s, LinkState::Up { epoch, .. } if *epoch >= first_epoch);
        let wait = async { state.wait_for(wanted).await.map(|state| *state) };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(LinkState::Up {
                epoch, datapath_id, ..
            })) => Ok((epoch, datapath_id)),
            Ok(Ok(LinkState::Down)) => Err(Error::NotConnected),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::timeout(what, timeout)),
        }
    }

    /// Sends one request and returns its reply. An OpenFlow error from the switch becomes
    /// `Error::Switch`. Only for messages that have a reply (use `send_checked` for others).
    pub async fn request(&self, msg: Message) -> Result<Message> {
        let epoch = self.epoch()?;
        let xid = self.inner.xids.next();
        let (tx, rx) = oneshot::channel();
        self.submit(epoch, Some(Route::Reply { xid, tx }), encode(xid, &msg)?)
            .await?;
        match self.await_reply(rx, "a reply").await? {
            Message::Error(error) => Err(Error::Switch { flow: None, error }),
            reply => Ok(reply),
        }
    }

    /// Sends a message without waiting; an error the switch sends for it arrives as
    /// `SwitchEvent::AsyncError`.
    pub async fn send(&self, msg: Message) -> Result<()> {
        let epoch = self.epoch()?;
        let xid = self.inner.xids.next();
        self.submit(epoch, None, encode(xid, &msg)?).await
    }

    /// Sends a message that has no reply (a flow mod, packet out, ...) followed by a barrier,
    /// and returns the switch's error for it, if any, once the barrier is answered.
    pub async fn send_checked(&self, msg: Message) -> Result<()> {
        let epoch = self.epoch()?;
        let first = self.inner.xids.block(2);
        let barrier = first + 1;
        let mut out = BytesMut::new();
        msg.try_encode(first, &mut out)?;
        Message::BarrierRequest.try_encode(barrier, &mut out)?;
        let (tx, rx) = oneshot::channel();
        let route = Route::Range {
            first,
            last: barrier,
            stop: [barrier, barrier],
            gate: None,
            tx,
        };
        self.submit(epoch, Some(route), out.freeze()).await?;
        let replies = self.await_reply(rx, "a barrier reply").await?;
        for (_, reply) in replies {
            if let Message::Error(error) = reply {
                return Err(Error::Switch { flow: None, error });
            }
        }
        Ok(())
    }

    /// Waits until the switch has processed everything sent before.
    pub async fn barrier(&self) -> Result<()> {
        match self.request(Message::BarrierRequest).await? {
            Message::BarrierReply => Ok(()),
            other => Err(unexpected("BARRIER_REPLY", &other)),
        }
    }

    /// A multipart request; the reply's parts are reassembled across the MORE flag.
    pub async fn multipart(&self, req: MultipartRequest) -> Result<Vec<MultipartReplyBody>> {
        let epoch = self.epoch()?;
        let xid = self.inner.xids.next();
        let (tx, rx) = oneshot::channel();
        let msg = Message::MultipartRequest(req);
        self.submit(
            epoch,
            Some(Route::Multipart { xid, tx }),
            encode(xid, &msg)?,
        )
        .await?;
        let parts: Vec<MultipartReply> = self.await_reply(rx, "a multipart reply").await??;
        Ok(parts.into_iter().map(|part| part.body).collect())
    }

    /// The flows matching `filter` (`FlowStatsRequest::default()` for all), as the switch
    /// reports them.
    pub async fn dump_flows(&self, filter: FlowStatsRequest) -> Result<Vec<FlowStats>> {
        let mut flows = Vec::new();
        for body in self.multipart(MultipartRequest::Flow(filter)).await? {
            match body {
                MultipartReplyBody::Flow(part) => flows.extend(part),
                other => {
                    return Err(Error::Protocol(format!(
                        "flow stats request answered with multipart body {other:?}"
                    )))
                }
            }
        }
        Ok(flows)
    }

    /// `dump_flows`, each flow printed as `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` does.
    pub async fn dump_flows_text(&self, filter: FlowStatsRequest) -> Result<Vec<String>> {
        let flows = self.dump_flows(filter).await?;
        Ok(flows.iter().map(text::format_flow).collect())
    }

    /// An empty atomic transaction on this switch.
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    // ---- crate-internal plumbing used by Transaction ----

    pub(crate) fn config(&self) -> &SwitchConfig {
        &self.inner.cfg
    }

    pub(crate) fn xids(&self) -> &XidAllocator {
        &self.inner.xids
    }

    pub(crate) fn next_bundle_id(&self) -> u32 {
        self.inner.bundle_ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The session a request is meant for, or NotConnected right away.
    pub(crate) fn epoch(&self) -> Result<u64> {
        match *self.inner.state.borrow() {
            LinkState::Up { epoch, .. } => Ok(epoch),
            LinkState::Down => Err(Error::NotConnected),
        }
    }

    pub(crate) async fn submit(
        &self,
        epoch: u64,
        route: Option<Route>,
        frames: Bytes,
    ) -> Result<()> {
        let submit = Submit {
            epoch,
            route,
            frames,
        };
        self.inner
            .commands
            .send(submit)
            .await
            .map_err(|_| Error::Closed)
    }

    /// Fire-and-forget without waiting for queue room (used from `Drop`).
    pub(crate) fn try_submit(&self, epoch: u64, frames: Bytes) {
        let submit = Submit {
            epoch,
            route: None,
            frames,
        };
        let _ = self.inner.commands.try_send(submit);
    }

    async fn await_reply<T>(&self, rx: oneshot::Receiver<T>, what: &str) -> Result<T> {
        let deadline = self.inner.cfg.request_timeout;
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(Error::Disconnected),
            Err(_) => Err(Error::timeout(what, deadline)),
        }
    }
}

/// Waits for the Passive listener; keeps retrying (with backoff) when the address is taken.
async fn bind_with_retry(supervisor: &Supervisor) -> Option<Listener> {
    let mut backoff = crate::stream::Backoff::new(
        supervisor.cfg.reconnect_backoff_min,
        supervisor.cfg.reconnect_backoff_max,
    );
    loop {
        match Listener::bind(&supervisor.cfg.target, supervisor.cfg.tls.as_ref()).await {
            Ok(listener) => return Some(listener),
            Err(error) => {
                let reason = format!("cannot listen on {}: {error}", supervisor.cfg.target);
                tracing::error!(%reason);
                supervisor
                    .events
                    .deliver(SwitchEvent::Disconnected { reason })
                    .await;
            }
        }
        if supervisor.state.is_closed() {
            return None;
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// The message's frame, or `Error::Encode` when it is too long for its length field.
pub(crate) fn encode(xid: u32, msg: &Message) -> Result<Bytes> {
    Ok(msg.to_bytes(xid)?.freeze())
}

pub(crate) fn unexpected(wanted: &str, got: &Message) -> Error {
    Error::Protocol(format!(
        "expected {wanted}, got message type {}",
        got.msg_type()
    ))
}
