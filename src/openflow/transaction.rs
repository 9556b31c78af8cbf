//! Atomic transactions: a batch of flow mods applied all together or not at all, through one
//! ONF bundle (OpenFlow 1.3 extension EXT-230).
//!
//! Wire sequence, in two round trips to the switch and none back to the caller in between:
//! 1. OPEN, one BUNDLE_ADD per flow mod (each with its own xid, which the inner flow mod repeats)
//!    and a BARRIER, written back to back. OVS rejects a bad flow mod when it is *added*, with an
//!    error carrying that add's xid, but keeps the bundle open without it — so the barrier reply
//!    must be seen before deciding: committing blindly would apply the other flows.
//! 2. The connection task itself (a gate on the transaction's route) sends COMMIT
//!    (atomic | ordered) as soon as the barrier is answered with no error before it, else
//!    DISCARD. A flow that fails only at commit time makes OVS report an error with that flow's
//!    add xid, then fail the commit; OVS rolls back everything.
//!
//! The error names the failing flow in `ovs-ofctl` syntax and carries OVS's error. A transaction
//! larger than `max_bundle_msgs` is refused, never split. A flow mod too long to travel inside
//! a bundle add (more than `MAX_BUNDLED_MESSAGE_LEN` bytes, which a bundle add's 16-bit length
//! could not describe) is refused when it is pushed. A transaction whose COMMIT was sent but
//! never answered (connection lost, reply too late) fails with `Error::OutcomeUnknown`: the
//! switch may have applied it; every other failure means nothing of it was applied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ofnode_proto::{
    text, BundleAdd, BundleControl, BundleCtrlType, BundleFlags, DecodeError, EncodeError,
    ErrorMsg, FlowMod, FlowModCommand, Header, Message, BUNDLE_ADD_OVERHEAD,
    MAX_BUNDLED_MESSAGE_LEN, OFPT_FLOW_MOD,
};
use tokio::sync::oneshot;
use tracing::Instrument;

use super::error::{Error, Result, Unanswered};
use super::routes::{Gate, Route};
use super::switch::{encode, Switch};

/// Frames of one transaction are handed to the connection in chunks of about this size, so a
/// huge transaction streams through the bounded queue instead of being copied whole.
const CHUNK_BYTES: usize = 64 * 1024;

/// A batch of flow mods to apply atomically. Build it with `add`/`delete`/`push`, then `commit`.
/// Flow mods are kept encoded (a 100,000-flow transaction holds its bytes, not 100,000 typed
/// messages).
#[derive(Debug)]
pub struct Transaction {
    switch: Switch,
    /// One encoded FLOW_MOD message each (their xids are replaced when sent).
    mods: Vec<Bytes>,
    buf: BytesMut,
    /// The first flow mod `push` could not take (see `try_push`); `commit` returns it and sends
    /// nothing.
    refused: Option<Error>,
}

impl Transaction {
    pub(crate) fn new(switch: Switch) -> Transaction {
        Transaction {
            switch,
            mods: Vec::new(),
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
        Message::FlowMod(flow).try_encode(0, &mut self.buf)?;
        let frame = self.buf.split().freeze();
        fits_in_bundle_add(frame.len())?;
        self.mods.push(frame);
        Ok(self)
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

    pub fn len(&self) -> usize {
        self.mods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mods.is_empty()
    }

    /// Applies every flow mod atomically, or none. An empty transaction succeeds at once.
    pub async fn commit(mut self) -> Result<()> {
        if let Some(error) = self.refused.take() {
            return Err(error);
        }
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
    /// The encoded flow mods, also kept to name a failing flow.
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
        let Transaction { switch, mods, .. } = tx;
        let epoch = switch.epoch()?;
        let flags = switch.config().bundle_flags;
        // Bounded by max_bundle_msgs, which the caller checked.
        let count = u32::try_from(mods.len() + Xids::EXTRA).map_err(|_| Error::BundleTooLarge {
            flows: mods.len(),
            max: switch.config().max_bundle_msgs,
        })?;
        let xids = Xids {
            open: switch.xids().block(count),
            flows: mods.len(),
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
            .encode(self.xids.open, &mut out);
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
        Message::BarrierRequest.encode(self.xids.barrier(), &mut out);
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

    /// The error for `xid`, naming its flow when it is one of ours.
    fn switch_error(&self, xid: u32, error: ErrorMsg) -> Error {
        let flow = self
            .xids
            .flow_index(xid)
            .and_then(|index| self.mods.get(index))
            .and_then(|frame| Message::decode_lenient(frame).ok())
            .and_then(|(_, msg)| flow_text(&msg));
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

/// A flow mod in `ovs-ofctl` syntax.
fn flow_text(msg: &Message) -> Option<String> {
    match msg {
        Message::FlowMod(flow) => Some(text::format_flow_mod(flow)),
        _ => None,
    }
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
mod tests {
    use super::*;
    use crate::openflow::{SwitchConfig, Target};
    use ofnode_proto::{Action, Instruction};

    /// A flow mod of exactly `len` bytes (a multiple of 8): an empty match and one note.
    fn flow_mod_of(len: usize) -> FlowMod {
        // Header 8 + fixed part 40 + empty match 8 + apply-actions header 8 + note header 10.
        let note = vec![0x5a; len - 74];
        let mut fm = FlowMod::new(FlowModCommand::Add);
        fm.instructions = vec![Instruction::ApplyActions(vec![Action::note(&note)])];
        let encoded = Message::FlowMod(fm.clone()).to_bytes(0);
        assert_eq!(encoded.len(), len, "test flow of the wanted size");
        fm
    }

    fn unconnected_switch() -> Switch {
        let target: Target = "unix:/nonexistent/ofnode-test.mgmt".parse().unwrap();
        Switch::start(SwitchConfig::new(target)).0
    }

    /// 65,511 bytes is the most a bundle add can carry; every longer flow mod (65,512 to
    /// 65,535 bytes, still a valid message on its own) is refused when pushed, before a bundle
    /// add whose length field would lie could be written.
    #[tokio::test]
    async fn a_flow_mod_too_long_for_a_bundle_add_is_refused_when_pushed() {
        let switch = unconnected_switch();
        let mut tx = switch.transaction();
        tx.try_push(flow_mod_of(65_504)).expect("fits a bundle add");
        for len in [65_512, 65_520, 65_528] {
            let err = tx.try_push(flow_mod_of(len)).unwrap_err();
            let Error::Encode(EncodeError::TooLong { length, max, .. }) = err else {
                panic!("{err:?}")
            };
            assert_eq!((length, max), (len + BUNDLE_ADD_OVERHEAD, 65_535));
        }
        assert_eq!(tx.len(), 1, "refused flows are not in the transaction");

        // The same flow already encoded is refused by push_encoded.
        let frame = Message::FlowMod(flow_mod_of(65_512)).to_bytes(0).freeze();
        assert!(tx.push_encoded(frame).is_err());
        assert_eq!(tx.len(), 1);

        // `push` cannot return the error; the transaction refuses to commit with it instead,
        // sending nothing (the switch is not even connected).
        tx.push(flow_mod_of(65_528));
        let err = tx.commit().await.unwrap_err();
        assert!(matches!(err, Error::Encode(_)), "{err:?}");
        assert!(err.to_string().contains("65552"), "{err}");
    }
}
