//! Which waiting caller a reply belongs to, by xid.
//!
//! Requests register a route before their bytes leave, in the connection task, so a reply can
//! never overtake its route. A dropped connection drops every route, and with it every sender:
//! callers then see `Error::Disconnected` instead of waiting forever.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ofnode_proto::{Message, MultipartReply, OFPMPF_REPLY_MORE};
use tokio::sync::oneshot;

use super::error::{Error, Result};

/// What a caller registers for the reply (or replies) it expects.
#[derive(Debug)]
pub(crate) enum Route {
    /// The first message with this xid (a reply or an error).
    Reply {
        xid: u32,
        tx: oneshot::Sender<Message>,
    },
    /// Every part of a multipart reply until one without the MORE flag, or an error.
    Multipart {
        xid: u32,
        tx: oneshot::Sender<Result<Vec<MultipartReply>>>,
    },
    /// The messages whose xids fall in `first..=last` (a transaction: bundle replies and errors
    /// for individual bundle adds), handed over together once one with an xid in `stop`
    /// arrives. At most one message per xid is kept, so memory is bounded by the range.
    Range {
        first: u32,
        last: u32,
        stop: [u32; 2],
        gate: Option<Gate>,
        tx: oneshot::Sender<Vec<(u32, Message)>>,
    },
}

/// A decision the connection takes for a caller the moment a barrier is answered, saving the
/// round trip to the caller's task: send `if_clean` when no error arrived in the range before
/// the barrier reply (and the caller still waits), else `if_failed`. Used to commit a bundle
/// only when every add was accepted, or discard it. Only errors and the stop replies are kept
/// for the caller of a gated range; acknowledgements (bundle OPEN reply, the barrier reply)
/// tell it nothing.
#[derive(Debug)]
pub(crate) struct Gate {
    pub(crate) barrier_xid: u32,
    pub(crate) if_clean: Bytes,
    pub(crate) if_failed: Bytes,
    /// Set when `if_clean` (the COMMIT) is queued for the switch: from then on a caller whose
    /// reply never comes cannot know whether the switch applied it.
    pub(crate) clean_sent: Arc<AtomicBool>,
}

#[derive(Debug)]
enum Pending {
    Reply(oneshot::Sender<Message>),
    Multipart {
        parts: Vec<MultipartReply>,
        bytes: usize,
        tx: oneshot::Sender<Result<Vec<MultipartReply>>>,
    },
}

#[derive(Debug)]
struct RangeRoute {
    last: u32,
    stop: [u32; 2],
    gate: Option<Gate>,
    /// Had a gate: only errors and the stop replies are kept.
    gated: bool,
    /// An error arrived for some xid of the range.
    failed: bool,
    collected: Vec<(u32, Message)>,
    /// Most messages kept: one per xid of the range.
    capacity: usize,
    tx: oneshot::Sender<Vec<(u32, Message)>>,
}

impl RangeRoute {
    /// What the gate (if any) sends now that `msg` arrived for `xid`.
    fn follow_up(&mut self, xid: u32, msg: &Message) -> Option<Bytes> {
        if matches!(msg, Message::Error(_)) {
            self.failed = true;
        }
        let opens = self
            .gate
            .as_ref()
            .is_some_and(|gate| gate.barrier_xid == xid && matches!(msg, Message::BarrierReply));
        if !opens {
            return None;
        }
        let gate = self.gate.take()?;
        // A caller that gave up gets its bundle discarded, not committed behind its back. The
        // flag is raised before looking whether the caller still waits: a caller that gives up
        // and then finds it lowered gave up before the look, so its bundle is discarded.
        if !self.failed {
            gate.clean_sent.store(true, Ordering::SeqCst);
        }
        let clean = !self.failed && !self.tx.is_closed();
        if !clean {
            gate.clean_sent.store(false, Ordering::SeqCst);
        }
        Some(if clean { gate.if_clean } else { gate.if_failed })
    }

    fn keep(&mut self, xid: u32, msg: Message) {
        if self.collected.len() < self.capacity {
            self.collected.push((xid, msg));
        } else {
            // Only a peer answering one xid several times gets here.
            tracing::warn!(xid, "dropping an extra message for a transaction");
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Routes {
    single: HashMap<u32, Pending>,
    ranges: BTreeMap<u32, RangeRoute>,
    max_reply_bytes: usize,
}

/// Where `deliver` put a message.
#[derive(Debug)]
pub(crate) enum Delivery {
    Delivered,
    /// Delivered, and a gate opened: these bytes go to the switch now.
    FollowUp(Bytes),
    /// Nobody waits for this xid: an asynchronous message or a reply to a caller that gave up.
    Unrouted(Message),
}

impl Routes {
    pub(crate) fn new(max_reply_bytes: usize) -> Routes {
        Routes {
            max_reply_bytes,
            ..Routes::default()
        }
    }

    pub(crate) fn insert(&mut self, route: Route) {
        match route {
            Route::Reply { xid, tx } => {
                self.single.insert(xid, Pending::Reply(tx));
            }
            Route::Multipart { xid, tx } => {
                let pending = Pending::Multipart {
                    parts: Vec::new(),
                    bytes: 0,
                    tx,
                };
                self.single.insert(xid, pending);
            }
            Route::Range {
                first,
                last,
                stop,
                gate,
                tx,
            } => {
                let range = RangeRoute {
                    last,
                    stop,
                    gated: gate.is_some(),
                    gate,
                    failed: false,
                    collected: Vec::new(),
                    capacity: last.saturating_sub(first) as usize + 1,
                    tx,
                };
                self.ranges.insert(first, range);
            }
        }
    }

    /// Hands `msg` (which arrived as `frame_len` bytes) to whoever waits for `xid`.
    pub(crate) fn deliver(&mut self, xid: u32, msg: Message, frame_len: usize) -> Delivery {
        if self.single.contains_key(&xid) {
            self.deliver_single(xid, msg, frame_len);
            return Delivery::Delivered;
        }
        let Some((first, range)) = self.range_for(xid) else {
            return Delivery::Unrouted(msg);
        };
        let follow_up = range.follow_up(xid, &msg);
        let stops = range.stop.contains(&xid);
        if !range.gated || stops || matches!(msg, Message::Error(_)) {
            range.keep(xid, msg);
        }
        if stops {
            if let Some(range) = self.ranges.remove(&first) {
                let _ = range.tx.send(range.collected);
            }
        }
        follow_up.map_or(Delivery::Delivered, Delivery::FollowUp)
    }

    fn range_for(&mut self, xid: u32) -> Option<(u32, &mut RangeRoute)> {
        let (first, range) = self.ranges.range_mut(..=xid).next_back()?;
        (xid <= range.last).then_some((*first, range))
    }

    fn deliver_single(&mut self, xid: u32, msg: Message, frame_len: usize) {
        let Some(pending) = self.single.remove(&xid) else {
            return;
        };
        match pending {
            Pending::Reply(tx) => {
                let _ = tx.send(msg);
            }
            Pending::Multipart {
                mut parts,
                bytes,
                tx,
            } => {
                let reply = match msg {
                    Message::MultipartReply(reply) => reply,
                    Message::Error(error) => {
                        let _ = tx.send(Err(Error::Switch { flow: None, error }));
                        return;
                    }
                    other => {
                        let _ = tx.send(Err(Error::Protocol(format!(
                            "expected a multipart reply for xid {xid:#x}, got message type {}",
                            other.msg_type()
                        ))));
                        return;
                    }
                };
                let bytes = bytes.saturating_add(frame_len);
                if bytes > self.max_reply_bytes {
                    let _ = tx.send(Err(Error::ReplyTooLarge {
                        max: self.max_reply_bytes,
                    }));
                    return;
                }
                let more = reply.flags & OFPMPF_REPLY_MORE != 0;
                parts.push(reply);
                if more {
                    self.single
                        .insert(xid, Pending::Multipart { parts, bytes, tx });
                } else {
                    let _ = tx.send(Ok(parts));
                }
            }
        }
    }

    /// Fails the caller waiting for `xid` (a reply that could not be decoded).
    pub(crate) fn fail(&mut self, xid: u32, error: Error) {
        match self.single.remove(&xid) {
            Some(Pending::Multipart { tx, .. }) => {
                let _ = tx.send(Err(error));
            }
            // Dropping the sender: the caller sees the request fail.
            Some(Pending::Reply(_)) | None => {}
        }
    }

    /// Forgets routes whose callers have gone (timed out or cancelled) — except a range whose
    /// gate has yet to discard its bundle.
    pub(crate) fn sweep(&mut self) {
        self.single.retain(|_, pending| match pending {
            Pending::Reply(tx) => !tx.is_closed(),
            Pending::Multipart { tx, .. } => !tx.is_closed(),
        });
        self.ranges
            .retain(|_, range| !range.tx.is_closed() || range.gate.is_some());
    }

    /// Single requests awaiting replies (transactions not counted: see `Driver::has_room`).
    pub(crate) fn requests(&self) -> usize {
        self.single.len()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.single.len() + self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofnode_proto::{ErrorKind, ErrorMsg};

    fn echo(data: &'static [u8]) -> Message {
        Message::EchoReply(Bytes::from_static(data))
    }

    fn error() -> Message {
        Message::Error(ErrorMsg {
            kind: ErrorKind::Standard {
                err_type: 4,
                code: 9,
            },
            data: Bytes::new(),
        })
    }

    fn follow_up(delivery: Delivery) -> Option<Bytes> {
        match delivery {
            Delivery::FollowUp(bytes) => Some(bytes),
            _ => None,
        }
    }

    fn range(routes: &mut Routes, gate: Option<Gate>) -> oneshot::Receiver<Vec<(u32, Message)>> {
        let (tx, rx) = oneshot::channel();
        routes.insert(Route::Range {
            first: 10,
            last: 15,
            stop: [14, 15],
            gate,
            tx,
        });
        rx
    }

    fn gate() -> Option<Gate> {
        Some(Gate {
            barrier_xid: 13,
            if_clean: Bytes::from_static(b"commit"),
            if_failed: Bytes::from_static(b"discard"),
            clean_sent: Arc::default(),
        })
    }

    #[test]
    fn a_reply_goes_to_its_xid_once() {
        let mut routes = Routes::new(1 << 20);
        let (tx, mut rx) = oneshot::channel();
        routes.insert(Route::Reply { xid: 7, tx });
        assert!(matches!(
            routes.deliver(8, echo(b"x"), 9),
            Delivery::Unrouted(_)
        ));
        assert!(matches!(
            routes.deliver(7, echo(b"y"), 9),
            Delivery::Delivered
        ));
        assert_eq!(rx.try_recv().unwrap(), echo(b"y"));
        assert!(matches!(
            routes.deliver(7, echo(b"z"), 9),
            Delivery::Unrouted(_)
        ));
        assert_eq!(routes.len(), 0);
    }

    #[test]
    fn a_range_collects_its_xids_until_a_stop_xid() {
        let mut routes = Routes::new(1 << 20);
        let mut rx = range(&mut routes, None);
        for xid in [9, 10, 12, 16] {
            let routed = !matches!(routes.deliver(xid, echo(b""), 8), Delivery::Unrouted(_));
            assert_eq!(routed, (10..=15).contains(&xid), "xid {xid}");
        }
        assert!(rx.try_recv().is_err(), "not complete before a stop xid");
        routes.deliver(15, echo(b"end"), 8);
        let got: Vec<u32> = rx.try_recv().unwrap().into_iter().map(|(x, _)| x).collect();
        assert_eq!(got, vec![10, 12, 15]);
        assert_eq!(routes.len(), 0, "a completed range is forgotten");
    }

    #[test]
    fn a_range_keeps_at_most_one_message_per_xid() {
        let mut routes = Routes::new(1 << 20);
        let mut rx = range(&mut routes, None);
        for _ in 0..100 {
            routes.deliver(11, error(), 8);
        }
        routes.deliver(14, echo(b""), 8);
        assert_eq!(rx.try_recv().unwrap().len(), 6);
    }

    #[test]
    fn a_gate_commits_when_nothing_failed_before_the_barrier() {
        let mut routes = Routes::new(1 << 20);
        let mut rx = range(&mut routes, gate());
        assert_eq!(follow_up(routes.deliver(10, echo(b"open"), 8)), None);
        let sent = follow_up(routes.deliver(13, Message::BarrierReply, 8));
        assert_eq!(sent.as_deref(), Some(&b"commit"[..]));
        // Opens once.
        assert_eq!(
            follow_up(routes.deliver(13, Message::BarrierReply, 8)),
            None
        );
        routes.deliver(14, echo(b"committed"), 8);
        // Acknowledgements before the gate opened are not handed over.
        assert_eq!(rx.try_recv().unwrap(), vec![(14, echo(b"committed"))]);
    }

    #[test]
    fn a_gate_discards_after_an_error_or_when_the_caller_left() {
        let mut routes = Routes::new(1 << 20);
        let mut rx = range(&mut routes, gate());
        routes.deliver(11, error(), 8);
        let sent = follow_up(routes.deliver(13, Message::BarrierReply, 8));
        assert_eq!(sent.as_deref(), Some(&b"discard"[..]));
        routes.deliver(15, echo(b"discarded"), 8);
        assert_eq!(
            rx.try_recv().unwrap(),
            vec![(11, error()), (15, echo(b"discarded"))]
        );

        let mut routes = Routes::new(1 << 20);
        drop(range(&mut routes, gate()));
        routes.sweep();
        let sent = follow_up(routes.deliver(13, Message::BarrierReply, 8));
        assert_eq!(
            sent.as_deref(),
            Some(&b"discard"[..]),
            "kept by sweep until it fired"
        );
        routes.sweep();
        assert_eq!(routes.len(), 0);
    }

    #[test]
    fn the_gate_says_whether_the_commit_went_out() {
        let sent = |failed_first: bool, caller_left: bool| {
            let mut routes = Routes::new(1 << 20);
            let flag = Arc::new(AtomicBool::new(false));
            let mut gate = gate();
            if let Some(gate) = gate.as_mut() {
                gate.clean_sent = flag.clone();
            }
            let rx = range(&mut routes, gate);
            if failed_first {
                routes.deliver(11, error(), 8);
            }
            if caller_left {
                drop(rx);
            }
            routes.deliver(13, Message::BarrierReply, 8);
            flag.load(Ordering::SeqCst)
        };
        assert!(sent(false, false), "committed");
        assert!(!sent(true, false), "discarded after an error");
        assert!(!sent(false, true), "discarded for a caller that left");
    }

    #[test]
    fn sweep_forgets_abandoned_callers() {
        let mut routes = Routes::new(1 << 20);
        let (tx, rx) = oneshot::channel();
        routes.insert(Route::Reply { xid: 1, tx });
        let rx2 = range(&mut routes, None);
        routes.sweep();
        assert_eq!(routes.len(), 2);
        drop((rx, rx2));
        routes.sweep();
        assert_eq!(routes.len(), 0);
    }
}

#[cfg(test)]
mod multipart_tests {
    use super::*;
    use ofnode_proto::MultipartReplyBody;

    fn part(more: bool) -> Message {
        Message::MultipartReply(MultipartReply {
            flags: if more { OFPMPF_REPLY_MORE } else { 0 },
            body: MultipartReplyBody::Flow(Vec::new()),
        })
    }

    #[test]
    fn parts_are_reassembled_across_the_more_flag() {
        let mut routes = Routes::new(1 << 20);
        let (tx, mut rx) = oneshot::channel();
        routes.insert(Route::Multipart { xid: 3, tx });
        routes.deliver(3, part(true), 100);
        routes.deliver(3, part(true), 100);
        assert!(rx.try_recv().is_err(), "incomplete");
        routes.deliver(3, part(false), 100);
        assert_eq!(rx.try_recv().unwrap().unwrap().len(), 3);
        assert_eq!(routes.len(), 0);
    }

    #[test]
    fn a_reply_beyond_the_bound_fails_instead_of_growing() {
        let mut routes = Routes::new(250);
        let (tx, mut rx) = oneshot::channel();
        routes.insert(Route::Multipart { xid: 3, tx });
        routes.deliver(3, part(true), 100);
        routes.deliver(3, part(true), 100);
        routes.deliver(3, part(true), 100);
        let result = rx.try_recv().unwrap();
        assert!(
            matches!(result, Err(Error::ReplyTooLarge { max: 250 })),
            "{result:?}"
        );
        assert_eq!(routes.len(), 0);
    }

    #[test]
    fn an_error_or_a_wrong_message_ends_the_multipart_request() {
        let mut routes = Routes::new(1 << 20);
        let (tx, mut rx) = oneshot::channel();
        routes.insert(Route::Multipart { xid: 3, tx });
        routes.deliver(3, part(true), 100);
        routes.deliver(3, Message::BarrierReply, 8);
        assert!(matches!(rx.try_recv().unwrap(), Err(Error::Protocol(_))));
    }
}
