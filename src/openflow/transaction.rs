//! Atomic transactions: a batch of flow mods applied all together or not at all, through one
//! ONF bundle (OpenFlow 1.3 extension EXT-230).
//!
//! Wire sequence, in two round trips:
//! 1. OPEN, one BUNDLE_ADD per flow mod (each with its own xid, which the inner flow mod repeats)
//!    and a BARRIER, written back to back. OVS rejects a bad flow mod when it is *added*, with an
//!    error carrying that add's xid, but keeps the bundle open without it — so the barrier reply
//!    is awaited before deciding: committing blindly would apply the other flows.
//! 2. COMMIT (atomic | ordered) if nothing failed, else DISCARD. A flow that fails only at
//!    commit time makes OVS report an error with that flow's add xid, then fail the commit; it
//!    rolls back everything.
//!
//! The error names the failing flow in `ovs-ofctl` syntax and carries OVS's error. A transaction
//! larger than `max_bundle_msgs` is refused, never split.

use std::time::Instant;

use bytes::BytesMut;
use ofnode_proto::{
    text, BundleAdd, BundleControl, BundleCtrlType, ErrorMsg, FlowMod, FlowModCommand, Message,
};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::error::{Error, Result};
use super::routes::Route;
use super::switch::{collect_until, Switch};

/// Frames of one transaction are handed to the connection in chunks of about this size, so a
/// huge transaction streams through the bounded queue instead of being copied whole.
const CHUNK_BYTES: usize = 64 * 1024;

/// A batch of flow mods to apply atomically. Build it with `add`/`delete`/`push`, then `commit`.
#[derive(Debug)]
pub struct Transaction {
    switch: Switch,
    mods: Vec<FlowMod>,
}

impl Transaction {
    pub(crate) fn new(switch: Switch) -> Transaction {
        Transaction {
            switch,
            mods: Vec::new(),
        }
    }

    /// Adds (or replaces) a flow.
    pub fn add(&mut self, mut flow: FlowMod) -> &mut Self {
        flow.command = FlowModCommand::Add;
        self.push(flow)
    }

    /// Deletes the flows `flow` matches (non-strict unless it already says DeleteStrict).
    pub fn delete(&mut self, mut flow: FlowMod) -> &mut Self {
        if flow.command != FlowModCommand::DeleteStrict {
            flow.command = FlowModCommand::Delete;
        }
        self.push(flow)
    }

    /// Any flow mod, with the command it carries.
    pub fn push(&mut self, flow: FlowMod) -> &mut Self {
        self.mods.push(flow);
        self
    }

    /// Parses `ovs-ofctl add-flow` text and adds it.
    pub fn add_text(&mut self, flow: &str) -> std::result::Result<&mut Self, text::ParseError> {
        let flow = text::parse_flow(flow, FlowModCommand::Add)?;
        Ok(self.push(flow))
    }

    /// Parses `ovs-ofctl del-flows` text and deletes what it matches.
    pub fn delete_text(&mut self, flow: &str) -> std::result::Result<&mut Self, text::ParseError> {
        let flow = text::parse_flow(flow, FlowModCommand::Delete)?;
        Ok(self.push(flow))
    }

    pub fn len(&self) -> usize {
        self.mods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mods.is_empty()
    }

    /// Applies every flow mod atomically, or none. An empty transaction succeeds at once.
    pub async fn commit(self) -> Result<()> {
        if self.mods.is_empty() {
            return Ok(());
        }
        let cfg = self.switch.config();
        if self.mods.len() > cfg.max_bundle_msgs {
            return Err(Error::BundleTooLarge {
                flows: self.mods.len(),
                max: cfg.max_bundle_msgs,
            });
        }
        let span = tracing::debug_span!(
            "of_transaction",
            flows = self.mods.len(),
            bytes = tracing::field::Empty,
            bundle_id = tracing::field::Empty
        );
        Commit::start(self)?.run().instrument(span).await
    }
}

/// The xids of one transaction, all in one block so a single route catches every reply:
/// `open`, then one per flow mod, then `barrier`, `commit`, `discard`.
#[derive(Debug, Clone, Copy)]
struct Xids {
    open: u32,
    flows: usize,
}

impl Xids {
    const EXTRA: usize = 4;

    fn add(self, index: usize) -> u32 {
        self.open + 1 + index as u32
    }
    fn barrier(self) -> u32 {
        self.add(self.flows)
    }
    fn commit(self) -> u32 {
        self.barrier() + 1
    }
    fn discard(self) -> u32 {
        self.barrier() + 2
    }
    /// Which flow mod an add xid belongs to.
    fn flow_index(self, xid: u32) -> Option<usize> {
        let index = xid.checked_sub(self.open + 1)? as usize;
        (index < self.flows).then_some(index)
    }
}

struct Commit {
    switch: Switch,
    /// Flow mods not yet encoded; moved into `adds` as they are.
    mods: Vec<FlowMod>,
    /// The bundle adds sent, kept to name a failing flow.
    adds: Vec<Message>,
    epoch: u64,
    bundle_id: u32,
    xids: Xids,
    replies: mpsc::Receiver<(u32, Message)>,
    /// The route's sender, until the first chunk registers it.
    route_tx: Option<mpsc::Sender<(u32, Message)>>,
    /// Discards the bundle if the commit future is dropped halfway (timeout, cancellation).
    guard: DiscardGuard,
}

impl Commit {
    fn start(tx: Transaction) -> Result<Commit> {
        let Transaction { switch, mods } = tx;
        let epoch = switch.epoch()?;
        // Bounded by max_bundle_msgs, which the caller checked; u32 is ample for any sane limit.
        let count = u32::try_from(mods.len() + Xids::EXTRA).map_err(|_| Error::BundleTooLarge {
            flows: mods.len(),
            max: switch.config().max_bundle_msgs,
        })?;
        let xids = Xids {
            open: switch.xids().block(count),
            flows: mods.len(),
        };
        let bundle_id = switch.next_bundle_id();
        // One slot per xid in the block: the switch sends at most one message per xid.
        let (route_tx, replies) = mpsc::channel(mods.len() + Xids::EXTRA);
        let guard = DiscardGuard {
            switch: switch.clone(),
            epoch,
            bundle_id,
            xid: xids.discard(),
            armed: false,
        };
        Ok(Commit {
            switch,
            adds: Vec::with_capacity(mods.len()),
            mods,
            epoch,
            bundle_id,
            xids,
            replies,
            route_tx: Some(route_tx),
            guard,
        })
    }

    async fn run(mut self) -> Result<()> {
        let started = Instant::now();
        tracing::Span::current().record("bundle_id", self.bundle_id);
        let bytes = self.send_bundle().await?;
        tracing::Span::current().record("bytes", bytes);
        let staged = self.await_staged().await?;
        let result = match staged {
            Some(failure) => {
                self.discard().await;
                Err(failure)
            }
            None => self.commit().await,
        };
        tracing::debug!(
            latency_us = started.elapsed().as_micros() as u64,
            ok = result.is_ok(),
            "transaction finished"
        );
        result
    }

    fn control(&self, ctrl_type: BundleCtrlType) -> Message {
        Message::BundleControl(BundleControl {
            bundle_id: self.bundle_id,
            ctrl_type,
            flags: self.switch.config().bundle_flags,
            properties: Default::default(),
        })
    }

    /// Phase 1: OPEN, every add, BARRIER — streamed in chunks, the route registered with the
    /// first chunk so no reply can arrive before it.
    async fn send_bundle(&mut self) -> Result<usize> {
        let mut route = self.route_tx.take().map(|tx| Route::Range {
            first: self.xids.open,
            last: self.xids.discard(),
            tx,
        });
        let mut out = BytesMut::with_capacity(CHUNK_BYTES);
        self.control(BundleCtrlType::OpenRequest)
            .encode(self.xids.open, &mut out);
        self.guard.armed = true;
        let mut total = 0;
        let flags = self.switch.config().bundle_flags;
        let mods = std::mem::take(&mut self.mods);
        for (index, flow) in mods.into_iter().enumerate() {
            let add = Message::BundleAdd(BundleAdd {
                bundle_id: self.bundle_id,
                flags,
                message: Box::new(Message::FlowMod(flow)),
            });
            add.encode(self.xids.add(index), &mut out);
            self.adds.push(add);
            if out.len() >= CHUNK_BYTES {
                total += out.len();
                let chunk = out.split().freeze();
                self.switch.submit(self.epoch, route.take(), chunk).await?;
            }
        }
        Message::BarrierRequest.encode(self.xids.barrier(), &mut out);
        total += out.len();
        self.switch
            .submit(self.epoch, route.take(), out.freeze())
            .await?;
        Ok(total)
    }

    /// Waits for the barrier; returns the first failure (open refused, or a flow rejected).
    async fn await_staged(&mut self) -> Result<Option<Error>> {
        let barrier = self.xids.barrier();
        let replies = self.collect(barrier, "the bundle's barrier reply").await?;
        let mut failure = None;
        let mut rejected = 0usize;
        let mut opened = false;
        for (xid, msg) in replies {
            match msg {
                Message::BundleControl(reply)
                    if xid == self.xids.open && reply.ctrl_type == BundleCtrlType::OpenReply =>
                {
                    opened = true;
                }
                Message::Error(error) => {
                    rejected += 1;
                    failure.get_or_insert_with(|| self.switch_error(xid, error));
                }
                Message::BarrierReply if xid == barrier => {}
                other => tracing::warn!(
                    xid,
                    msg_type = other.msg_type(),
                    "unexpected reply in bundle"
                ),
            }
        }
        if rejected > 1 {
            tracing::warn!(rejected, "switch rejected several flows of the transaction");
        }
        if failure.is_none() && !opened {
            failure = Some(Error::Protocol(
                "switch answered the barrier but not the bundle OPEN".into(),
            ));
        }
        Ok(failure)
    }

    /// Phase 2: COMMIT; an error names the flow OVS reported, if any.
    async fn commit(&mut self) -> Result<()> {
        let commit = self.control(BundleCtrlType::CommitRequest);
        let frames = super::switch::encode(self.xids.commit(), &commit);
        self.switch.submit(self.epoch, None, frames).await?;
        let replies = self
            .collect(self.xids.commit(), "the bundle COMMIT reply")
            .await?;
        // OVS discards the bundle whatever the outcome: nothing left to clean up.
        self.guard.armed = false;
        let mut flow_error = None;
        for (xid, msg) in replies {
            match msg {
                Message::BundleControl(reply)
                    if xid == self.xids.commit()
                        && reply.ctrl_type == BundleCtrlType::CommitReply =>
                {
                    return Ok(())
                }
                Message::Error(error) if xid == self.xids.commit() => {
                    return Err(flow_error.unwrap_or(Error::Switch { flow: None, error }));
                }
                Message::Error(error) => {
                    flow_error.get_or_insert_with(|| self.switch_error(xid, error));
                }
                other => tracing::warn!(
                    xid,
                    msg_type = other.msg_type(),
                    "unexpected reply to COMMIT"
                ),
            }
        }
        Err(Error::Protocol("bundle COMMIT got no reply".into()))
    }

    /// DISCARD after a failed phase 1; its own failure (e.g. the open had failed) is moot.
    async fn discard(&mut self) {
        let discard = self.control(BundleCtrlType::DiscardRequest);
        let frames = super::switch::encode(self.xids.discard(), &discard);
        if self.switch.submit(self.epoch, None, frames).await.is_ok() {
            self.guard.armed = false;
            let _ = self
                .collect(self.xids.discard(), "the bundle DISCARD reply")
                .await;
        }
    }

    async fn collect(&mut self, stop_xid: u32, what: &str) -> Result<Vec<(u32, Message)>> {
        let deadline = self.switch.config().request_timeout;
        tokio::time::timeout(deadline, collect_until(&mut self.replies, stop_xid))
            .await
            .map_err(|_| Error::timeout(what, deadline))?
    }

    /// The error for `xid`, naming its flow when it is one of ours.
    fn switch_error(&self, xid: u32, error: ErrorMsg) -> Error {
        let flow = self
            .xids
            .flow_index(xid)
            .and_then(|index| self.adds.get(index))
            .and_then(flow_text);
        Error::Switch { flow, error }
    }
}

/// The flow mod inside a bundle add, in `ovs-ofctl` syntax.
fn flow_text(add: &Message) -> Option<String> {
    match add {
        Message::BundleAdd(BundleAdd { message, .. }) => match message.as_ref() {
            Message::FlowMod(flow) => Some(text::format_flow_mod(flow)),
            _ => None,
        },
        _ => None,
    }
}

struct DiscardGuard {
    switch: Switch,
    epoch: u64,
    bundle_id: u32,
    xid: u32,
    armed: bool,
}

impl Drop for DiscardGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let discard = Message::BundleControl(BundleControl {
            bundle_id: self.bundle_id,
            ctrl_type: BundleCtrlType::DiscardRequest,
            flags: self.switch.config().bundle_flags,
            properties: Default::default(),
        });
        self.switch
            .try_submit(self.epoch, super::switch::encode(self.xid, &discard));
    }
}
