//! Which waiting caller a reply belongs to, by xid.
//!
//! Requests register a route before their bytes leave, in the connection task, so a reply can
//! never overtake its route. A dropped connection drops every route, and with it every sender:
//! callers then see `Error::Disconnected` instead of waiting forever.

use std::collections::{BTreeMap, HashMap};

use ofnode_proto::{Message, MultipartReply, OFPMPF_REPLY_MORE};
use tokio::sync::{mpsc, oneshot};

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
    /// Every message whose xid falls in `first..=last` (a transaction: bundle control replies
    /// and errors for individual bundle adds). The channel holds one slot per xid in the range,
    /// so an honest switch never fills it.
    Range {
        first: u32,
        last: u32,
        tx: mpsc::Sender<(u32, Message)>,
    },
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
    tx: mpsc::Sender<(u32, Message)>,
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
            Route::Range { first, last, tx } => {
                self.ranges.insert(first, RangeRoute { last, tx });
            }
        }
    }

    /// Hands `msg` (which arrived as `frame_len` bytes) to whoever waits for `xid`.
    pub(crate) fn deliver(&mut self, xid: u32, msg: Message, frame_len: usize) -> Delivery {
        if self.single.contains_key(&xid) {
            self.deliver_single(xid, msg, frame_len);
            return Delivery::Delivered;
        }
        match self.range_for(xid) {
            Some(range) => {
                // Full only if the peer sent more than one message per xid; dropping the excess
                // keeps memory bounded and the transaction still ends at its own xids.
                if range.tx.try_send((xid, msg)).is_err() {
                    tracing::warn!(xid, "dropping an extra message for a transaction");
                }
                Delivery::Delivered
            }
            None => Delivery::Unrouted(msg),
        }
    }

    fn range_for(&self, xid: u32) -> Option<&RangeRoute> {
        let (_, range) = self.ranges.range(..=xid).next_back()?;
        (xid <= range.last).then_some(range)
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

    /// Forgets routes whose callers have gone (timed out or cancelled).
    pub(crate) fn sweep(&mut self) {
        self.single.retain(|_, pending| match pending {
            Pending::Reply(tx) => !tx.is_closed(),
            Pending::Multipart { tx, .. } => !tx.is_closed(),
        });
        self.ranges.retain(|_, range| !range.tx.is_closed());
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.single.len() + self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn echo(data: &'static [u8]) -> Message {
        Message::EchoReply(Bytes::from_static(data))
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
    fn a_range_collects_every_xid_inside_it() {
        let mut routes = Routes::new(1 << 20);
        let (tx, mut rx) = mpsc::channel(8);
        routes.insert(Route::Range {
            first: 10,
            last: 12,
            tx,
        });
        for xid in [9, 10, 11, 12, 13] {
            let delivered = matches!(routes.deliver(xid, echo(b""), 8), Delivery::Delivered);
            assert_eq!(delivered, (10..=12).contains(&xid), "xid {xid}");
        }
        let got: Vec<u32> = std::iter::from_fn(|| rx.try_recv().ok().map(|(x, _)| x)).collect();
        assert_eq!(got, vec![10, 11, 12]);
    }

    #[test]
    fn sweep_forgets_abandoned_callers() {
        let mut routes = Routes::new(1 << 20);
        let (tx, rx) = oneshot::channel();
        routes.insert(Route::Reply { xid: 1, tx });
        let (tx, rx2) = mpsc::channel(1);
        routes.insert(Route::Range {
            first: 2,
            last: 3,
            tx,
        });
        routes.sweep();
        assert_eq!(routes.len(), 2);
        drop((rx, rx2));
        routes.sweep();
        assert_eq!(routes.len(), 0);
    }
}
