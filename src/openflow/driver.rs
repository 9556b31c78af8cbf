//! The task that owns one established connection. Each turn of its loop: read and route what
//! the switch sent (replies by xid, echo requests answered at once, asynchronous messages to
//! the event channel), take callers' commands while the write queue has room, write, and probe
//! an idle peer. When it returns, every route dies with it, so every waiting caller learns that
//! the connection is gone.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ofnode_proto::{Header, Message, OFP_VERSION};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use super::config::SwitchConfig;
use super::error::Error;
use super::event::EventSink;
use super::handshake::{offer_async, Established};
use super::routes::{Delivery, Route, Routes};
use super::writeq::WriteQueue;
use super::xid::XidAllocator;

/// Frames from a caller, and the route for their replies, registered before the frames leave.
#[derive(Debug)]
pub(crate) struct Submit {
    /// The connection the caller means; frames for an older connection are dropped (their
    /// bundle, say, died with it) and their route with them.
    pub(crate) epoch: u64,
    pub(crate) route: Option<Route>,
    pub(crate) frames: Bytes,
}

/// Why a connection stopped.
#[derive(Debug)]
pub(crate) enum Ended {
    /// It failed or the peer closed it.
    Lost(Error),
    /// The same switch (same datapath id) dialled in again (passive mode, e.g. after a
    /// restart); the new session replaces this one.
    Replaced(Established),
    /// Every `Switch` handle was dropped.
    Shutdown,
}

pub(crate) struct Driver<'a> {
    session: Established,
    epoch: u64,
    cfg: &'a SwitchConfig,
    xids: &'a XidAllocator,
    events: &'a EventSink,
    routes: Routes,
    queue: WriteQueue,
    keepalive: Keepalive,
}

impl<'a> Driver<'a> {
    pub(crate) fn new(
        session: Established,
        epoch: u64,
        cfg: &'a SwitchConfig,
        xids: &'a XidAllocator,
        events: &'a EventSink,
    ) -> Driver<'a> {
        Driver {
            session,
            epoch,
            cfg,
            xids,
            events,
            routes: Routes::new(cfg.max_reply_bytes),
            queue: WriteQueue::default(),
            keepalive: Keepalive::new(cfg.echo_interval, cfg.echo_timeout),
        }
    }

    pub(crate) async fn run(
        mut self,
        commands: &mut mpsc::Receiver<Submit>,
        mut newer: Option<&mut mpsc::Receiver<Established>>,
    ) -> Ended {
        let timer = sleep_until(self.keepalive.deadline());
        tokio::pin!(timer);
        loop {
            let room = self.has_room();
            // Unbiased: a flood in one direction (packet-ins, a huge dump) cannot starve the
            // other. Commands already queued are taken together in `on_submit`, so they still
            // leave in one write.
            tokio::select! {
                frame = self.session.reader.next() => match frame {
                    Some(Ok(frame)) => {
                        if let Err(error) = self.on_frame(frame) {
                            return Ended::Lost(error);
                        }
                    }
                    Some(Err(error)) => return Ended::Lost(error.into()),
                    None => return Ended::Lost(Error::Protocol(format!(
                        "{} closed the connection", self.session.peer))),
                },
                command = commands.recv(), if room => match command {
                    Some(submit) => self.on_submit(submit, commands),
                    None => return Ended::Shutdown,
                },
                written = self.queue.write_some(&mut self.session.writer), if !self.queue.is_empty() => {
                    if let Err(error) = written {
                        return Ended::Lost(Error::io(format!("writing to {}", self.session.peer), error));
                    }
                }
                Some(session) = next_session(&mut newer) => {
                    if session.datapath_id == self.session.datapath_id {
                        return Ended::Replaced(session);
                    }
                    tracing::error!(peer = %session.peer,
                        dpid = %format_args!("{:016x}", session.datapath_id),
                        "dropping a second switch: this controller serves datapath {:016x}",
                        self.session.datapath_id);
                }
                () = &mut timer => {
                    if let Err(error) = self.on_timer() {
                        return Ended::Lost(error);
                    }
                    timer.as_mut().reset(self.keepalive.deadline());
                }
            }
        }
    }

    fn on_frame(&mut self, frame: Bytes) -> Result<(), Error> {
        self.keepalive.heard_from_peer();
        let (xid, msg) = match Message::decode(&frame) {
            Ok(decoded) => decoded,
            Err(error) => return self.on_undecodable(&frame, error),
        };
        match msg {
            Message::EchoRequest(data) => self.queue_message(xid, &Message::EchoReply(data))?,
            msg @ (Message::PortStatus(_) | Message::PacketIn(_) | Message::PacketIn2(_)) => {
                offer_async(self.events, msg)
            }
            msg => match self.routes.deliver(xid, msg, frame.len()) {
                Delivery::Delivered => {}
                Delivery::FollowUp(bytes) => self.queue.push(bytes),
                // The reply to our own keepalive probe needs no one.
                Delivery::Unrouted(Message::EchoReply(_)) => {}
                Delivery::Unrouted(msg) => offer_async(self.events, msg),
            },
        }
        Ok(())
    }

    /// A frame that is not valid OpenFlow 1.3: a peer speaking another version (or garbage) is
    /// dropped; one bad 1.3 message fails only the request it answers.
    fn on_undecodable(
        &mut self,
        frame: &[u8],
        error: ofnode_proto::DecodeError,
    ) -> Result<(), Error> {
        let header = Header::parse(frame)?;
        if header.version != OFP_VERSION {
            return Err(Error::Protocol(format!(
                "{} sent a message with version {:#04x} on an OpenFlow 1.3 session",
                self.session.peer, header.version
            )));
        }
        tracing::warn!(peer = %self.session.peer, xid = header.xid, msg_type = header.msg_type,
            %error, "malformed message from the switch");
        self.routes.fail(header.xid, Error::Decode(error));
        Ok(())
    }

    fn on_submit(&mut self, submit: Submit, commands: &mut mpsc::Receiver<Submit>) {
        self.accept(submit);
        // Take whatever else is already queued so that it leaves in the same write.
        while self.has_room() {
            match commands.try_recv() {
                Ok(submit) => self.accept(submit),
                Err(_) => break,
            }
        }
    }

    /// Whether another command may be taken: the write queue is below `max_write_buffer` and
    /// fewer than `max_pending` requests await replies (callers that gave up are swept first).
    /// Commands beyond that wait in the command channel, so a switch that stops answering
    /// costs bounded memory. Transactions are not counted: one sent in several chunks holds its
    /// route while its later chunks wait in the channel, so counting it could stall them for
    /// ever; they are bounded by `max_bundle_msgs` and the write buffer instead.
    fn has_room(&mut self) -> bool {
        let max_pending = self.cfg.max_pending.max(1);
        if self.routes.requests() >= max_pending {
            self.routes.sweep();
        }
        self.queue.len() < self.cfg.max_write_buffer && self.routes.requests() < max_pending
    }

    fn accept(&mut self, submit: Submit) {
        if submit.epoch != self.epoch {
            // Dropping the route fails its caller with Disconnected.
            return;
        }
        if let Some(route) = submit.route {
            self.routes.insert(route);
        }
        self.queue.push(submit.frames);
    }

    fn on_timer(&mut self) -> Result<(), Error> {
        self.routes.sweep();
        match self.keepalive.check(Instant::now()) {
            Probe::Idle => {}
            Probe::Send => {
                let xid = self.xids.next();
                self.queue_message(xid, &Message::EchoRequest(Bytes::new()))?;
            }
            Probe::Dead => {
                return Err(Error::timeout(
                    format!(
                        "an echo reply from {} (peer presumed dead)",
                        self.session.peer
                    ),
                    self.cfg.echo_timeout,
                ))
            }
        }
        Ok(())
    }

    fn queue_message(&mut self, xid: u32, msg: &Message) -> Result<(), Error> {
        self.queue.push(msg.to_bytes(xid)?.freeze());
        Ok(())
    }
}

async fn next_session(newer: &mut Option<&mut mpsc::Receiver<Established>>) -> Option<Established> {
    match newer {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Probe {
    Idle,
    Send,
    Dead,
}

/// Echo keepalive: probe after `interval` of silence; dead after `timeout` more.
#[derive(Debug)]
struct Keepalive {
    interval: Duration,
    timeout: Duration,
    last_heard: Instant,
    probe_sent: Option<Instant>,
}

impl Keepalive {
    fn new(interval: Duration, timeout: Duration) -> Keepalive {
        Keepalive {
            interval,
            timeout,
            last_heard: Instant::now(),
            probe_sent: None,
        }
    }

    fn heard_from_peer(&mut self) {
        self.last_heard = Instant::now();
        self.probe_sent = None;
    }

    /// When `check` next has something to decide.
    fn deadline(&self) -> Instant {
        match self.probe_sent {
            Some(sent) => sent + self.timeout,
            None => self.last_heard + self.interval,
        }
    }

    fn check(&mut self, now: Instant) -> Probe {
        match self.probe_sent {
            Some(sent) if now >= sent + self.timeout => Probe::Dead,
            Some(_) => Probe::Idle,
            None if now >= self.last_heard + self.interval => {
                self.probe_sent = Some(now);
                Probe::Send
            }
            None => Probe::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keepalive_probes_when_idle_and_gives_up_without_answer() {
        let mut ka = Keepalive::new(Duration::from_secs(5), Duration::from_secs(3));
        let start = Instant::now();
        assert_eq!(ka.check(start + Duration::from_secs(4)), Probe::Idle);
        assert_eq!(ka.check(start + Duration::from_secs(5)), Probe::Send);
        assert_eq!(ka.deadline(), start + Duration::from_secs(8));
        assert_eq!(ka.check(start + Duration::from_secs(7)), Probe::Idle);
        assert_eq!(ka.check(start + Duration::from_secs(8)), Probe::Dead);
    }

    #[tokio::test(start_paused = true)]
    async fn any_traffic_answers_a_probe() {
        let mut ka = Keepalive::new(Duration::from_secs(5), Duration::from_secs(3));
        let start = Instant::now();
        assert_eq!(ka.check(start + Duration::from_secs(5)), Probe::Send);
        tokio::time::advance(Duration::from_secs(6)).await;
        ka.heard_from_peer();
        assert_eq!(ka.check(Instant::now()), Probe::Idle);
        assert_eq!(ka.deadline(), Instant::now() + Duration::from_secs(5));
    }
}
