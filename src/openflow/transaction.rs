//! Atomic transactions: a batch of flow mods and group mods applied all together or not at
//! all, through one ONF bundle (OpenFlow 1.3 extension EXT-230).
//!
//! Wire sequence, in two round trips to the switch and none back to the caller in between:
//! 1. OPEN, one BUNDLE_ADD per message (each with its own xid, which the inner message
//!    repeats) and a BARRIER, written back to back. OVS rejects a bad flow mod when it is
//!    *added*, with an error carrying that add's xid, but keeps the bundle open without it — so
//!    the barrier reply must be seen before deciding: committing blindly would apply the rest.
//! 2. The connection task itself (a gate on the transaction's route) sends COMMIT
//!    (atomic | ordered) as soon as the barrier is answered with no error before it, else
//!    DISCARD. A message that fails only at commit time makes OVS report an error with that
//!    message's add xid, then fail the commit; OVS rolls back everything.
//!
//! Groups go in the order the codec's `BundleOrder` gives (OVS needs it): group adds and
//! modifies before every flow mod (a flow naming a missing group is refused), group deletes
//! after them (deleting a group deletes the flows that use it), the order of pushing kept
//! within each part; a group deleted and then added or modified again in one transaction is
//! refused when pushed (`Error::BundleOrder`).
//!
//! The error names the failing flow (or group mod) in `ovs-ofctl` syntax and carries OVS's
//! error. A transaction larger than `max_bundle_msgs` is refused, never split. A message too
//! long to travel inside a bundle add (more than `MAX_BUNDLED_MESSAGE_LEN` bytes, which a
//! bundle add's 16-bit length could not describe) is refused when it is pushed. A transaction
//! whose COMMIT was sent but never answered (connection lost, reply too late) fails with
//! `Error::OutcomeUnknown`: the switch may have applied it; every other failure means nothing
//! of it was applied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ofnode_proto::{
    text, BundleAdd, BundleControl, BundleCtrlType, BundleFlags, BundleOrder, BundleStage,
    DecodeError, EncodeError, ErrorMsg, FlowMod, FlowModCommand, GroupCommand, GroupMod, Header,
    Message, BUNDLE_ADD_OVERHEAD, MAX_BUNDLED_MESSAGE_LEN, OFPG_ALL, OFPT_FLOW_MOD,
};
use tokio::sync::oneshot;
use tracing::Instrument;

use super::error::{Error, Result, Unanswered};
use super::routes::{Gate, Route};
use super::switch::{encode, Switch};

/// Frames of one transaction are handed to the connection in chunks of about this size, so a
/// huge transaction streams through the bounded queue instead of being copied whole.
const CHUNK_BYTES: usize = 64 * 1024;

/// A batch of flow mods and group mods to apply atomically. Build it with
/// `add`/`delete`/`push` (flows) and `add_group`/`modify_group`/`delete_group`/`push_group`,
/// then `commit`. Messages are kept encoded (a 100,000-flow transaction holds its bytes, not
/// 100,000 typed messages).
#[derive(Debug)]
pub struct Transaction {
    switch: Switch,
    /// One encoded FLOW_MOD message each (their xids are replaced when sent).
    mods: Vec<Bytes>,
    /// Encoded GROUP_MODs that go before the flow mods (adds, modifies) and after them
    /// (deletes), each list in the order pushed.
    groups_in: Vec<Bytes>,
    groups_out: Vec<Bytes>,
    /// Where each group mod goes, and which groups this transaction deletes.
    order: BundleOrder,
    buf: BytesMut,
    /// The first message `push`/`push_group` could not take (see `try_push`); `commit`
    /// returns it and sends nothing.
    refused: Option<Error>,
}

impl Transaction {
    pub(crate) fn new(switch: Switch) -> Transaction {
        Transaction {
            switch,
            mods: Vec::new(),
            groups_in: Vec::new(),
            groups_out: Vec::new(),
            order: BundleOrder::new(),
            buf: BytesMut::new(),
            refused: None,
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

    /// Any flow mod, with the command it carries. A flow mod that cannot be bundled is not
    /// added; the transaction then refuses to commit with that error (use `try_push` to hear
    /// of it at once).
    pub fn push(&mut self, flow: FlowMod) -> &mut Self {
        if let Err(error) = self.try_push(flow) {
            self.refused.get_or_insert(error);
        }
        self
    }

    /// Any flow mod, or `Error::Encode` (the transaction unchanged) when it is too long to
    /// travel inside a bundle add: every length field sent equals the bytes that follow it.
    pub fn try_push(&mut self, flow: FlowMod) -> Result<&mut Self> {
        let frame = self.encode_bundled(&Message::FlowMod(flow))?;
        self.mods.push(frame);
        Ok(self)
    }

    /// Adds a group (OFPGC_ADD; the switch refuses an id it already has).
    pub fn add_group(&mut self, mut group: GroupMod) -> &mut Self {
        group.command = GroupCommand::Add;
        self.push_group(group)
    }

    /// Replaces a group's type and buckets (OFPGC_MODIFY), keeping the flows that use it.
    pub fn modify_group(&mut self, mut group: GroupMod) -> &mut Self {
        group.command = GroupCommand::Modify;
        self.push_group(group)
    }

    /// Deletes group `group_id` (`OFPG_ALL`: every group), and with it every flow that uses
    /// it; it goes after the transaction's flow mods.
    pub fn delete_group(&mut self, group_id: u32) -> &mut Self {
        self.push_group(GroupMod::delete(group_id))
    }

    /// Any group mod, with the command it carries. A group mod that cannot be bundled is not
    /// added; the transaction then refuses to commit with that error (use `try_push_group` to
    /// hear of it at once).
    pub fn push_group(&mut self, group: GroupMod) -> &mut Self {
        if let Err(error) = self.try_push_group(group) {
            self.refused.get_or_insert(error);
        }
        self
    }

    /// Any group mod, placed before the flow mods (add, modify) or after them (delete); or,
    /// the transaction unchanged, `Error::Encode` when it is too long for a bundle add and
    /// `Error::BundleOrder` when it adds or modifies a group this transaction deletes
    /// earlier (send a modify alone, or the delete and the add in two transactions).
    pub fn try_push_group(&mut self, group: GroupMod) -> Result<&mut Self> {
        let frame = self.encode_bundled(&Message::GroupMod(group.clone()))?;
        // After the encoding, so that a refused group mod leaves no trace in `order`.
        match self.order.place_group(group.command, group.group_id)? {
            BundleStage::GroupsOut => self.groups_out.push(frame),
            BundleStage::GroupsIn | BundleStage::Flows => self.groups_in.push(frame),
        }
        Ok(self)
    }

    /// One message encoded on its own (xid 0, replaced when sent), if it fits in a bundle add.
    fn encode_bundled(&mut self, message: &Message) -> Result<Bytes> {
        message.try_encode(0, &mut self.buf)?;
        let frame = self.buf.split().freeze();
        fits_in_bundle_add(frame.len())?;
        Ok(frame)
    }

    /// A flow mod that is already encoded: exactly one OFPT_FLOW_MOD message (its xid does
    /// not matter). Anything else is refused and the transaction is unchanged.
    pub fn push_encoded(&mut self, frame: Bytes) -> std::result::Result<&mut Self, DecodeError> {
        let header = Header::parse(&frame)?;
        if header.msg_type != OFPT_FLOW_MOD {
            return Err(DecodeError::BadValue {
                what: "message type of an encoded flow mod",
                value: u64::from(header.msg_type),
            });
        }
        if usize::from(header.length) != frame.len() {
            return Err(DecodeError::BadLength {
                what: "encoded flow mod",
                length: frame.len(),
                reason: "is not exactly the one message its header describes",
            });
        }
        if fits_in_bundle_add(frame.len()).is_err() {
            return Err(DecodeError::BadLength {
                what: "encoded flow mod",
                length: frame.len(),
                reason: "is longer than a bundle add can carry (65,511 bytes)",
            });
        }
        self.mods.push(frame);
        Ok(self)
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

    /// Parses `ovs-ofctl add-group` text and adds the group.
    pub fn add_group_text(
        &mut self,
        group: &str,
    ) -> std::result::Result<&mut Self, text::ParseError> {
        let group = text::parse_group(group, GroupCommand::Add)?;
        Ok(self.push_group(group))
    }

    /// Messages in the transaction: flow mods and group mods.
    pub fn len(&self) -> usize {
        self.groups_in.len() + self.mods.len() + self.groups_out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies every flow and group mod atomically, or none. An empty transaction succeeds at
    /// once.
    pub async fn commit(mut self) -> Result<()> {
        if let Some(error) = self.refused.take() {
            return Err(error);
        }
        if self.is_empty() {
            return Ok(());
        }
        let cfg = self.switch.config();
        if self.len() > cfg.max_bundle_msgs {
            return Err(Error::BundleTooLarge {
                flows: self.len(),
                max: cfg.max_bundle_msgs,
            });
        }
        let span = tracing::debug_span!(
            "of_transaction",
            flows = self.len(),
            bytes = tracing::field::Empty,
            bundle_id = tracing::field::Empty
        );
        Commit::start(self)?.run().instrument(span).await
    }

    /// The switch and the encoded messages in bundle order: group adds and modifies, flow
    /// mods, group deletes.
    fn into_bundle(self) -> (Switch, Vec<Bytes>) {
        let Transaction {
            switch,
            mut mods,
            groups_in,
            groups_out,
            ..
        } = self;
        if groups_in.is_empty() && groups_out.is_empty() {
            return (switch, mods);
        }
        let mut all = Vec::with_capacity(groups_in.len() + mods.len() + groups_out.len());
        all.extend(groups_in);
        all.append(&mut mods);
        all.extend(groups_out);
        (switch, all)
    }
}

/// The xids of one transaction, all in one block so a single route catches every reply:
/// `open`, then one per message (flow or group mod), then `barrier`, `commit`, `discard`.
#[derive(Debug, Clone, Copy)]
struct Xids {
    open: u32,
    messages: usize,
}

impl Xids {
    const EXTRA: usize = 4;

    fn add(self, index: usize) -> u32 {
        self.open + 1 + index as u32
    }
    fn barrier(self) -> u32 {
        self.add(self.messages)
    }
    fn commit(self) -> u32 {
        self.barrier() + 1
    }
    fn discard(self) -> u32 {
        self.barrier() + 2
    }
    /// Which message an add xid belongs to.
    fn message_index(self, xid: u32) -> Option<usize> {
        let index = xid.checked_sub(self.open + 1)? as usize;
        (index < self.messages).then_some(index)
    }
}

struct Commit {
    switch: Switch,
    /// The encoded messages in bundle order, also kept to name a failing one.
    mods: Vec<Bytes>,
    epoch: u64,
    bundle_id: u32,
    flags: BundleFlags,
    xids: Xids,
    replies: Option<oneshot::Receiver<Vec<(u32, Message)>>>,
    /// The route, until the first chunk registers it.
    route: Option<Route>,
    /// Discards the bundle if the commit future is dropped before the barrier went out (after
    /// that, the gate discards it for a caller that left).
    guard: DiscardGuard,
    /// Raised by the gate once it has queued the COMMIT.
    commit_sent: Arc<AtomicBool>,
}

impl Commit {
    fn start(tx: Transaction) -> Result<Commit> {
        let (switch, mods) = tx.into_bundle();
        let epoch = switch.epoch()?;
        let flags = switch.config().bundle_flags;
        // Bounded by max_bundle_msgs, which the caller checked.
        let count = u32::try_from(mods.len() + Xids::EXTRA).map_err(|_| Error::BundleTooLarge {
            flows: mods.len(),
            max: switch.config().max_bundle_msgs,
        })?;
        let xids = Xids {
            open: switch.xids().block(count),
            messages: mods.len(),
        };
        let bundle_id = switch.next_bundle_id();
        let control = |ctrl_type| bundle_control(bundle_id, ctrl_type, flags);
        let discard = encode(xids.discard(), &control(BundleCtrlType::DiscardRequest))?;
        let commit_sent = Arc::new(AtomicBool::new(false));
        let gate = Gate {
            barrier_xid: xids.barrier(),
            if_clean: encode(xids.commit(), &control(BundleCtrlType::CommitRequest))?,
            if_failed: discard.clone(),
            clean_sent: commit_sent.clone(),
        };
        let (route_tx, replies) = oneshot::channel();
        let route = Route::Range {
            first: xids.open,
            last: xids.discard(),
            stop: [xids.commit(), xids.discard()],
            gate: Some(gate),
            tx: route_tx,
        };
        let guard = DiscardGuard {
            switch: switch.clone(),
            epoch,
            frames: discard,
            armed: false,
        };
        Ok(Commit {
            switch,
            mods,
            epoch,
            bundle_id,
            flags,
            xids,
            replies: Some(replies),
            route: Some(route),
            guard,
            commit_sent,
        })
    }

    async fn run(mut self) -> Result<()> {
        let started = Instant::now();
        tracing::Span::current().record("bundle_id", self.bundle_id);
        let bytes = self.send_bundle().await?;
        tracing::Span::current().record("bytes", bytes);
        let result = self.await_outcome().await;
        tracing::debug!(
            latency_us = started.elapsed().as_micros() as u64,
            ok = result.is_ok(),
            "transaction finished"
        );
        result
    }

    /// OPEN, every add, BARRIER — streamed in chunks, the route registered with the first chunk
    /// so no reply can arrive before it.
    async fn send_bundle(&mut self) -> Result<usize> {
        // A pod-sized transaction needs far less than a chunk.
        let estimate = 64 + self.mods.len() * 256;
        let mut out = BytesMut::with_capacity(estimate.min(CHUNK_BYTES));
        bundle_control(self.bundle_id, BundleCtrlType::OpenRequest, self.flags)
            .try_encode(self.xids.open, &mut out)?;
        self.guard.armed = true;
        let mut total = 0;
        for index in 0..self.mods.len() {
            let xid = self.xids.add(index);
            // Every frame was checked when it was pushed (one message that fits a bundle add).
            BundleAdd::encode_framed(self.bundle_id, self.flags, &self.mods[index], xid, &mut out)?;
            if out.len() >= CHUNK_BYTES {
                total += out.len();
                let chunk = out.split().freeze();
                self.switch
                    .submit(self.epoch, self.route.take(), chunk)
                    .await?;
            }
        }
        Message::BarrierRequest.try_encode(self.xids.barrier(), &mut out)?;
        total += out.len();
        self.switch
            .submit(self.epoch, self.route.take(), out.freeze())
            .await?;
        // From here on the gate commits or discards.
        self.guard.armed = false;
        Ok(total)
    }

    /// Waits for the COMMIT or DISCARD answer the gate provoked and explains the outcome.
    async fn await_outcome(&mut self) -> Result<()> {
        let deadline = self.switch.config().request_timeout;
        let (commit, discard) = (self.xids.commit(), self.xids.discard());
        let mut replies = self.replies.take().ok_or(Error::Disconnected)?;
        let waited = tokio::time::timeout(deadline, &mut replies).await;
        // Given up (or the route is gone) before the COMMIT flag is read: see `Gate`.
        drop(replies);
        let replies = match waited {
            Ok(Ok(replies)) => replies,
            Ok(Err(_)) => return Err(self.unanswered(Unanswered::Disconnected)),
            Err(_) => return Err(self.unanswered(Unanswered::Timeout(deadline))),
        };
        let mut flow_failure = None;
        let mut rejected = 0usize;
        let mut final_error = None;
        for (xid, msg) in replies {
            match msg {
                Message::BundleControl(reply)
                    if xid == commit && reply.ctrl_type == BundleCtrlType::CommitReply =>
                {
                    return Ok(());
                }
                Message::Error(error) if xid == commit || xid == discard => {
                    final_error = Some(error);
                }
                Message::Error(error) => {
                    rejected += 1;
                    flow_failure.get_or_insert_with(|| self.switch_error(xid, error));
                }
                _ => {}
            }
        }
        if rejected > 1 {
            tracing::warn!(
                rejected,
                "switch rejected several messages of the transaction"
            );
        }
        // A flow's own error says more than the commit's OFPBFC_MSG_FAILED.
        if let Some(failure) = flow_failure {
            return Err(failure);
        }
        match final_error {
            Some(error) => Err(Error::Switch { flow: None, error }),
            None => Err(Error::Protocol(
                "bundle was discarded although the switch reported no error".into(),
            )),
        }
    }

    /// A transaction whose answer never came: unknown if the COMMIT went out, else certainly
    /// not applied.
    fn unanswered(&self, cause: Unanswered) -> Error {
        if self.commit_sent.load(Ordering::SeqCst) {
            return Error::OutcomeUnknown { cause };
        }
        match cause {
            Unanswered::Disconnected => Error::Disconnected,
            Unanswered::Timeout(after) => Error::timeout("the bundle's BARRIER reply", after),
        }
    }

    /// The error for `xid`, naming its flow or group mod when it is one of ours.
    fn switch_error(&self, xid: u32, error: ErrorMsg) -> Error {
        let flow = self
            .xids
            .message_index(xid)
            .and_then(|index| self.mods.get(index))
            .and_then(|frame| Message::decode_lenient(frame).ok())
            .and_then(|(_, msg)| message_text(&msg));
        Error::Switch { flow, error }
    }
}

/// Whether a flow mod of `len` bytes fits in a bundle add, whose length counts it too.
fn fits_in_bundle_add(len: usize) -> std::result::Result<(), EncodeError> {
    if len <= MAX_BUNDLED_MESSAGE_LEN {
        Ok(())
    } else {
        Err(EncodeError::TooLong {
            what: "bundle add message",
            length: len + BUNDLE_ADD_OVERHEAD,
            max: usize::from(u16::MAX),
        })
    }
}

fn bundle_control(bundle_id: u32, ctrl_type: BundleCtrlType, flags: BundleFlags) -> Message {
    Message::BundleControl(BundleControl {
        bundle_id,
        ctrl_type,
        flags,
        properties: Default::default(),
    })
}

/// A flow mod in `ovs-ofctl` syntax (as dump-flows prints it), a group mod as a line of an
/// `ovs-ofctl bundle` file (`group add group_id=5,type=select,bucket=...`).
fn message_text(msg: &Message) -> Option<String> {
    match msg {
        Message::FlowMod(flow) => Some(text::format_flow_mod(flow)),
        Message::GroupMod(group) => Some(group_text(group)),
        _ => None,
    }
}

fn group_text(group: &GroupMod) -> String {
    let verb = match group.command {
        GroupCommand::Add => "add",
        GroupCommand::Modify => "modify",
        GroupCommand::AddOrModify => "add_or_mod",
        GroupCommand::Delete if group.group_id == OFPG_ALL => {
            return "group delete group_id=all".into()
        }
        GroupCommand::Delete => return format!("group delete group_id={}", group.group_id),
    };
    // format_group_mod prints what ofp-print does: `ADD group_id=...`.
    let printed = text::format_group_mod(group);
    let body = printed.split_once(' ').map_or("", |(_, body)| body);
    format!("group {verb} {body}")
}

struct DiscardGuard {
    switch: Switch,
    epoch: u64,
    frames: bytes::Bytes,
    armed: bool,
}

impl Drop for DiscardGuard {
    fn drop(&mut self) {
        if self.armed {
            self.switch.try_submit(self.epoch, self.frames.clone());
        }
    }
}

#[cfg(test)]
mod tests;
