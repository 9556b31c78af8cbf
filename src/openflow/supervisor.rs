//! Keeps a session to the switch alive: dial (or accept), handshake, drive, and after a loss
//! retry with exponential backoff and jitter — forever, until every `Switch` handle is gone.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tracing::Instrument;

use super::config::SwitchConfig;
use super::driver::{Driver, Ended, Submit};
use super::error::Error;
use super::event::{EventSink, SwitchEvent};
use super::handshake::{handshake, Established};
use super::transport::{connect, Accepted, Listener, Stream};
use super::xid::XidAllocator;
use crate::stream::{Backoff, Target};

/// What every `Switch` handle reads about the current session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkState {
    Down,
    Up { epoch: u64, datapath_id: u64 },
}

/// At most this many passive peers may be in their handshake at once; more are refused.
const MAX_PENDING_HANDSHAKES: usize = 16;

pub(crate) struct Supervisor {
    pub(crate) cfg: Arc<SwitchConfig>,
    pub(crate) xids: Arc<XidAllocator>,
    pub(crate) events: EventSink,
    pub(crate) state: watch::Sender<LinkState>,
    pub(crate) commands: mpsc::Receiver<Submit>,
    /// Passive mode: what to dial while no peer has dialled in (`Switch::dial_while_unserved`).
    pub(crate) fallback: watch::Receiver<Option<Target>>,
    /// Active mode: ends a backoff wait at once (`Switch::dial_now`).
    pub(crate) dial_now: Arc<Notify>,
    pub(crate) epoch: u64,
}

impl Supervisor {
    pub(crate) async fn run_active(mut self) {
        let mut backoff = Backoff::new(
            self.cfg.reconnect_backoff_min,
            self.cfg.reconnect_backoff_max,
        );
        let target = self.cfg.target.clone();
        // Whether this attempt was asked for (`Switch::dial_now`) rather than due: a hint that
        // the switch may be back, whose failure is expected and logged at debug only.
        let mut asked = false;
        loop {
            let attempt = async {
                let stream = connect(&target, self.cfg.tls.as_ref())
                    .await
                    .map_err(|e| Error::io(format!("connecting to {target}"), e))?;
                handshake(
                    stream,
                    target.to_string(),
                    &self.cfg,
                    &self.xids,
                    &self.events,
                )
                .await
            };
            let Some(outcome) = refuse_commands_while(attempt, &mut self.commands).await else {
                return;
            };
            match outcome {
                Ok(session) => {
                    backoff.reset();
                    match self.drive(session, None).await {
                        Ended::Shutdown => return,
                        Ended::Lost(_) | Ended::Replaced(_) => {}
                    }
                }
                Err(error) if asked => {
                    tracing::debug!(%target, %error, "OpenFlow connection attempt asked for failed")
                }
                Err(error) => {
                    tracing::error!(%target, %error, "OpenFlow connection attempt failed")
                }
            }
            let delay = backoff.next_delay();
            tracing::debug!(%target, ?delay, "reconnecting after backoff");
            let dial_now = self.dial_now.clone();
            let wait = async {
                tokio::select! {
                    () = tokio::time::sleep(delay) => false,
                    () = dial_now.notified() => {
                        backoff.reset();
                        true
                    }
                }
            };
            match refuse_commands_while(wait, &mut self.commands).await {
                Some(kicked) => asked = kicked,
                None => return,
            }
        }
    }

    /// Passive: an acceptor task handshakes every peer that dials in and hands the good ones
    /// over; a peer that fails its handshake is logged and dropped without disturbing the
    /// session in use.
    pub(crate) async fn run_passive(mut self, listener: Listener) {
        let (ready_tx, mut ready_rx) = mpsc::channel(1);
        let acceptor = Acceptor {
            listener,
            ready: ready_tx,
            cfg: self.cfg.clone(),
            xids: self.xids.clone(),
            events: self.events.clone(),
        };
        tokio::spawn(acceptor.run());
        let mut next = None;
        loop {
            let session = match next.take() {
                Some(session) => session,
                None => match self.next_passive_session(&mut ready_rx).await {
                    Some(session) => session,
                    // The acceptor died (cannot happen while we hold the receiver) or shutdown.
                    None => return,
                },
            };
            match self.drive(session, Some(&mut ready_rx)).await {
                Ended::Shutdown => return,
                Ended::Lost(_) => {}
                Ended::Replaced(newer) => next = Some(newer),
            }
        }
    }

    /// The next peer that dials in, or, while a fallback target is set, a session dialled to
    /// it (retried with backoff, from the start whenever the fallback is set again). None at
    /// shutdown.
    async fn next_passive_session(
        &mut self,
        ready: &mut mpsc::Receiver<Established>,
    ) -> Option<Established> {
        loop {
            let target = self.fallback.borrow_and_update().clone();
            let dial = dial_until_served(target, &self.cfg, &self.xids, &self.events);
            let changed = async {
                if self.fallback.changed().await.is_ok() {
                    return;
                }
                std::future::pending::<()>().await
            };
            let next = refuse_commands_while(
                async {
                    tokio::select! {
                        session = ready.recv() => Some(session),
                        session = dial => Some(Some(session)),
                        () = changed => None,
                    }
                },
                &mut self.commands,
            )
            .await?;
            if let Some(session) = next {
                return session;
            }
        }
    }

    async fn drive(
        &mut self,
        session: Established,
        newer: Option<&mut mpsc::Receiver<Established>>,
    ) -> Ended {
        self.epoch += 1;
        let (epoch, datapath_id) = (self.epoch, session.datapath_id);
        let span = tracing::info_span!("openflow", peer = %session.peer, dpid = %format_args!("{datapath_id:016x}"));
        tracing::info!(parent: &span, "connected");
        self.state
            .send_replace(LinkState::Up { epoch, datapath_id });
        self.events
            .deliver(SwitchEvent::Connected { datapath_id })
            .await;

        let driver = Driver::new(session, epoch, &self.cfg, &self.xids, &self.events);
        let ended = driver
            .run(&mut self.commands, newer)
            .instrument(span.clone())
            .await;

        self.state.send_replace(LinkState::Down);
        let reason = match &ended {
            Ended::Lost(error) => error.to_string(),
            Ended::Replaced(_) => {
                "the switch connected again; the new connection replaces this one".into()
            }
            Ended::Shutdown => "shut down".into(),
        };
        match &ended {
            Ended::Lost(_) => tracing::error!(parent: &span, %reason, "OpenFlow connection lost"),
            _ => tracing::info!(parent: &span, %reason, "OpenFlow connection closed"),
        }
        self.events
            .deliver(SwitchEvent::Disconnected { reason })
            .await;
        ended
    }
}

/// Dials `target` until a session is established (never, when there is none); failures are
/// expected while the switch is down and logged at debug.
async fn dial_until_served(
    target: Option<Target>,
    cfg: &SwitchConfig,
    xids: &XidAllocator,
    events: &EventSink,
) -> Established {
    let Some(target) = target else {
        return std::future::pending().await;
    };
    let mut backoff = Backoff::new(cfg.reconnect_backoff_min, cfg.reconnect_backoff_max);
    loop {
        let attempt = async {
            let stream = connect(&target, cfg.tls.as_ref())
                .await
                .map_err(|e| Error::io(format!("connecting to {target}"), e))?;
            handshake(stream, target.to_string(), cfg, xids, events).await
        };
        match attempt.await {
            Ok(session) => {
                tracing::info!(%target, "no switch dialled in: connected to the fallback target");
                return session;
            }
            Err(error) => tracing::debug!(%target, %error, "fallback target not served yet"),
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Runs `work` while failing every command that arrives meanwhile (there is no session to carry
/// it: dropping its route fails the caller). `None` when every handle has been dropped.
async fn refuse_commands_while<F: Future>(
    work: F,
    commands: &mut mpsc::Receiver<Submit>,
) -> Option<F::Output> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            output = &mut work => return Some(output),
            command = commands.recv() => {
                command?;
            }
        }
    }
}

struct Acceptor {
    listener: Listener,
    ready: mpsc::Sender<Established>,
    cfg: Arc<SwitchConfig>,
    xids: Arc<XidAllocator>,
    events: EventSink,
}

impl Acceptor {
    async fn run(self) {
        let local = self.listener.local_description();
        let handshakes = Arc::new(Semaphore::new(MAX_PENDING_HANDSHAKES));
        loop {
            let accepted = tokio::select! {
                () = self.ready.closed() => return,
                accepted = self.listener.accept() => accepted,
            };
            let (accepted, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::error!(%local, %error, "accept failed");
                    // E.g. out of file descriptors: do not spin.
                    tokio::time::sleep(self.cfg.reconnect_backoff_min).await;
                    continue;
                }
            };
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                tracing::error!(%local, %peer, "too many connections in handshake: dropping peer");
                continue;
            };
            let (cfg, xids, events, ready) = (
                self.cfg.clone(),
                self.xids.clone(),
                self.events.clone(),
                self.ready.clone(),
            );
            tokio::spawn(async move {
                let _permit = permit;
                let established = async {
                    let stream = secure(accepted, &peer, &cfg).await?;
                    handshake(stream, peer.clone(), &cfg, &xids, &events).await
                };
                match established.await {
                    Ok(session) => {
                        let _ = ready.send(session).await;
                    }
                    Err(error) => {
                        tracing::error!(%peer, %error, "dropping OpenFlow peer that failed its handshake")
                    }
                }
            });
        }
    }
}

/// The TLS handshake of a `pssl:` peer (nothing for other listeners), bounded like the OpenFlow
/// handshake so a peer that stalls in it cannot hold a handshake slot for ever.
async fn secure(accepted: Accepted, peer: &str, cfg: &SwitchConfig) -> Result<Stream, Error> {
    let context = || format!("TLS handshake with {peer}");
    tokio::time::timeout(cfg.handshake_timeout, accepted.secure())
        .await
        .map_err(|_| Error::Timeout {
            what: context(),
            after: cfg.handshake_timeout,
        })?
        .map_err(|e| Error::io(context(), e))
}
