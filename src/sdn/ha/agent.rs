//! The task that keeps this daemon's HA role: heartbeats while active, a claim when the
//! active peer falls silent, and the take-over of its desired state.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ofnode_proto::{
    Action, AsyncConfig, ErrorKind, Message, PacketOut, Role, RoleMsg, NO_BUFFER, OFPP_CONTROLLER,
    OFPR_ACTION,
};
use tokio::sync::mpsc;

use super::heartbeat::{heartbeat_frame, next_generation};
use super::{HaConfig, HaRole, HaShared};
use crate::openflow::Switch;
use crate::sdn::error::Error;
use crate::sdn::request::{self, Envelope, Request};

/// OFPET_ROLE_REQUEST_FAILED / OFPRRFC_STALE.
const ROLE_STALE: ErrorKind = ErrorKind::Standard {
    err_type: 11,
    code: 0,
};

/// The task that keeps this daemon's role: heartbeats when active, claims when the active
/// peer falls silent.
pub(crate) struct Agent {
    pub(crate) cfg: HaConfig,
    pub(crate) switch: Switch,
    pub(crate) shared: Arc<HaShared>,
    pub(crate) requests: mpsc::WeakSender<Envelope>,
    /// Set by the switch watcher at every connect: the new session needs SET_ASYNC and a role.
    pub(crate) new_session: Arc<tokio::sync::Notify>,
}

impl Agent {
    pub(crate) async fn run(self) {
        let mut tick = tokio::time::interval(self.cfg.heartbeat());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut generation = 0u64;
        loop {
            tokio::select! {
                // A new session is set up before any role decision is taken on it.
                biased;
                () = self.new_session.notified() => {
                    if let Err(e) = self.set_up_session(generation).await {
                        tracing::warn!(error = %e, "HA: setting up the new switch session failed");
                    }
                }
                _ = tick.tick() => {}
            }
            if self.requests.upgrade().is_none() {
                return;
            }
            if !self.switch.is_connected() {
                continue;
            }
            let result = if self.shared.is_active() {
                self.keep_active(generation).await
            } else if self.shared.silence() >= self.cfg.claim_after() {
                self.claim(&mut generation).await
            } else {
                Ok(())
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "HA: role upkeep failed");
            }
        }
    }

    /// Async config (hear heartbeats as slave) and the role this daemon holds.
    async fn set_up_session(&self, generation: u64) -> Result<(), crate::openflow::Error> {
        let hear_heartbeats = AsyncConfig {
            packet_in_mask: [1 << OFPR_ACTION, 1 << OFPR_ACTION],
            port_status_mask: [0x7, 0x7],
            flow_removed_mask: [0, 0],
        };
        self.switch
            .send_checked(Message::SetAsync(hear_heartbeats))
            .await?;
        // Silence counts on this session only: a standby listens a whole `claim_after` on it
        // before it may claim (the switch may have dialled it long after it started).
        self.shared.reset_silence();
        if self.shared.is_active() {
            match self.role_request(Role::Master, generation).await {
                Ok(_) => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "HA: could not keep the master role after reconnecting");
                    self.step_down();
                }
            }
        }
        self.become_slave().await
    }

    async fn role_request(
        &self,
        role: Role,
        generation_id: u64,
    ) -> Result<RoleMsg, crate::openflow::Error> {
        match self
            .switch
            .request(Message::RoleRequest(RoleMsg {
                role,
                generation_id,
            }))
            .await?
        {
            Message::RoleReply(reply) => Ok(reply),
            other => Err(crate::openflow::Error::Protocol(format!(
                "ROLE_REQUEST answered with message type {}",
                other.msg_type()
            ))),
        }
    }

    /// Slave at the switch's current generation (a fresh connection is "equal" and could
    /// write).
    async fn become_slave(&self) -> Result<(), crate::openflow::Error> {
        let current = self.role_request(Role::NoChange, 0).await?;
        self.role_request(Role::Slave, current.generation_id)
            .await?;
        self.shared
            .update(|s| s.generation = s.generation.max(current.generation_id));
        Ok(())
    }

    /// Active: still master at the switch? Then tell the standbys.
    async fn keep_active(&self, generation: u64) -> Result<(), crate::openflow::Error> {
        let reply = self.role_request(Role::NoChange, 0).await?;
        if reply.role != Role::Master {
            tracing::warn!(
                generation = reply.generation_id,
                "HA: another peer took the master role; this daemon is standby now"
            );
            self.step_down();
            return Ok(());
        }
        let heartbeat = PacketOut {
            buffer_id: NO_BUFFER,
            in_port: OFPP_CONTROLLER,
            actions: vec![Action::output(OFPP_CONTROLLER)],
            data: heartbeat_frame(self.cfg.id, generation),
        };
        self.switch.send(Message::PacketOut(heartbeat)).await
    }

    fn step_down(&self) {
        self.shared.active.store(false, Ordering::Release);
        self.shared.reset_silence();
        self.shared.update(|s| {
            s.role = HaRole::Standby;
            s.active_peer = None;
        });
    }

    /// The active peer is silent: ask for the master role, then take the desired state over.
    async fn claim(&self, generation: &mut u64) -> Result<(), crate::openflow::Error> {
        let current = self.role_request(Role::NoChange, 0).await?;
        if current.generation_id > self.shared.max_generation().max(*generation) {
            // A peer claimed since we last heard one: give it a whole silence to show up.
            tracing::info!(
                generation = current.generation_id,
                "HA: a peer claimed the master role recently; waiting for its heartbeats"
            );
            self.shared.saw_generation(current.generation_id);
            return Ok(());
        }
        let seen = current
            .generation_id
            .max(self.shared.max_generation())
            .max(*generation);
        let claim = next_generation(seen, self.cfg.id);
        match self.role_request(Role::Master, claim).await {
            Ok(_) => {}
            Err(crate::openflow::Error::Switch { error, .. }) if error.kind == ROLE_STALE => {
                tracing::info!("HA: another peer claimed first; staying standby");
                self.shared.reset_silence();
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        *generation = claim;
        self.shared.update(|s| s.generation = claim);
        tracing::warn!(
            id = self.cfg.id,
            generation = claim,
            silent_for = ?self.shared.silence(),
            "HA: the active peer is silent; taking over"
        );
        match self.take_over().await {
            Ok(()) => {
                self.shared.active.store(true, Ordering::Release);
                self.shared.update(|s| {
                    s.role = HaRole::Active;
                    s.generation = claim;
                    s.active_peer = Some(self.cfg.id);
                    s.takeovers += 1;
                });
                tracing::info!(id = self.cfg.id, "HA: this daemon is active");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "HA: taking the desired state over failed; back to standby");
                self.shared.reset_silence();
                self.become_slave().await
            }
        }
    }

    async fn take_over(&self) -> Result<(), Error> {
        let Some(requests) = self.requests.upgrade() else {
            return Err(Error::Shutdown);
        };
        let generation = self.shared.status().generation;
        request::call(&requests, |reply| Request::TakeOver { generation, reply }).await
    }
}
