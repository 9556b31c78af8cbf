//! What the connection tells its owner without being asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ofnode_proto::{ErrorMsg, FlowChange, Message, PacketIn, PacketIn2, PacketInView, PortStatus};
use tokio::sync::mpsc;

use super::config::PacketInTap;

#[derive(Debug, Clone)]
pub enum SwitchEvent {
    /// A connection finished its handshake (HELLO, FEATURES, SET_CONFIG). Everything the switch
    /// held may be gone (ovs-vswitchd restarted): a higher layer resyncs its flows here.
    Connected {
        datapath_id: u64,
    },
    /// The connection ended; requests in flight failed with `Error::Disconnected`.
    Disconnected {
        reason: String,
    },
    PortStatus(PortStatus),
    PacketIn(PacketInEvent),
    /// An error for a message nobody waits on (a fire-and-forget `Switch::send`).
    AsyncError(ErrorMsg),
    /// A flow monitor (`Switch::monitor_flows`) saw flows change. Changes made by this
    /// connection itself are left out (the switch abbreviates them).
    FlowsChanged(Vec<FlowChange>),
    /// The switch paused (`resumed: false`) or resumed a flow monitor: while paused it sends
    /// no updates, so changes may have gone unreported.
    FlowMonitorPaused {
        resumed: bool,
    },
}

impl SwitchEvent {
    /// A short name for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            SwitchEvent::Connected { .. } => "connected",
            SwitchEvent::Disconnected { .. } => "disconnected",
            SwitchEvent::PortStatus(_) => "port status",
            SwitchEvent::PacketIn(_) => "packet-in",
            SwitchEvent::AsyncError(_) => "async error",
            SwitchEvent::FlowsChanged(_) => "flows changed",
            SwitchEvent::FlowMonitorPaused { .. } => "flow monitor paused",
        }
    }
}

/// A packet-in, in whichever message the switch sent it (the connection's `packet_in_format`
/// asks for one): read it through [`PacketInEvent::view`].
#[derive(Debug, Clone)]
pub enum PacketInEvent {
    /// OpenFlow 1.3 PACKET_IN.
    Standard(PacketIn),
    /// NXT_PACKET_IN2 (the only one carrying a `controller(userdata=...)` action's userdata).
    Nx2(PacketIn2),
}

impl PacketInEvent {
    /// The message if it is a packet-in of either kind.
    pub fn of_message(msg: Message) -> Option<PacketInEvent> {
        match msg {
            Message::PacketIn(packet_in) => Some(PacketInEvent::Standard(packet_in)),
            Message::PacketIn2(packet_in) => Some(PacketInEvent::Nx2(packet_in)),
            _ => None,
        }
    }

    pub fn view(&self) -> PacketInView<'_> {
        match self {
            PacketInEvent::Standard(packet_in) => packet_in.view(),
            PacketInEvent::Nx2(packet_in) => packet_in.view(),
        }
    }
}

/// The packet-ins a [`PacketInTap`] set apart (`Switch::take_packet_in_tap`), and how many
/// did not fit in its channel.
#[derive(Debug)]
pub struct TappedPacketIns {
    pub packet_ins: mpsc::Receiver<PacketInEvent>,
    pub dropped: Arc<AtomicU64>,
}

/// The sending side of a [`PacketInTap`].
#[derive(Debug, Clone)]
pub(crate) struct TapSink {
    prefix: Bytes,
    tx: mpsc::Sender<PacketInEvent>,
    dropped: Arc<AtomicU64>,
}

impl TapSink {
    pub(crate) fn new(tap: &PacketInTap) -> (TapSink, TappedPacketIns) {
        let (tx, rx) = mpsc::channel(tap.capacity.max(1));
        let dropped = Arc::<AtomicU64>::default();
        let sink = TapSink {
            prefix: tap.userdata_prefix.clone(),
            tx,
            dropped: dropped.clone(),
        };
        let tapped = TappedPacketIns {
            packet_ins: rx,
            dropped,
        };
        (sink, tapped)
    }

    /// Takes the packet-in when its userdata has the tap's prefix (dropping and counting it
    /// when the channel is full); gives it back otherwise.
    fn take(&self, event: PacketInEvent) -> Option<PacketInEvent> {
        if !event.view().userdata.starts_with(&self.prefix) {
            return Some(event);
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(event) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(dropped, "packet-in tap full: dropping packet-ins");
            }
        }
        None
    }
}

/// The sending side of the event channel. Data events are dropped (and counted) when the owner
/// does not keep up, so a packet-in storm cannot stall the connection; connection events are
/// always delivered.
#[derive(Debug, Clone)]
pub(crate) struct EventSink {
    tx: mpsc::Sender<SwitchEvent>,
    dropped: Arc<AtomicU64>,
    tap: Option<TapSink>,
}

impl EventSink {
    pub(crate) fn new(tx: mpsc::Sender<SwitchEvent>, tap: Option<TapSink>) -> EventSink {
        EventSink {
            tx,
            dropped: Arc::default(),
            tap,
        }
    }

    /// A packet-in: to the tap when it is the tap's, else to the event channel.
    pub(crate) fn offer_packet_in(&self, event: PacketInEvent) {
        let event = match &self.tap {
            Some(tap) => tap.take(event),
            None => Some(event),
        };
        if let Some(event) = event {
            self.offer(SwitchEvent::PacketIn(event));
        }
    }

    /// A packet-in, port status, async error or flow monitor update: best effort.
    pub(crate) fn offer(&self, event: SwitchEvent) {
        if let Err(mpsc::error::TrySendError::Full(event)) = self.tx.try_send(event) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Logged at 1, 2, 4, 8, ... drops: a storm cannot flood the log.
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    kind = event.kind(),
                    "event channel full: dropping events"
                );
            }
        }
    }

    /// Connected / Disconnected: waits for room (a closed channel just means nobody listens).
    pub(crate) async fn deliver(&self, event: SwitchEvent) {
        let _ = self.tx.send(event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofnode_proto::PacketIn2;

    fn packet_in(userdata: &'static [u8]) -> PacketInEvent {
        let mut pin = PacketIn2::new(Bytes::from_static(b"\0\0\0\0"));
        pin.userdata = Some(Bytes::from_static(userdata));
        PacketInEvent::Nx2(pin)
    }

    #[test]
    fn the_tap_takes_its_packet_ins_counts_its_overflow_and_leaves_the_rest() {
        let (tx, mut events) = mpsc::channel(8);
        let tap = PacketInTap {
            userdata_prefix: Bytes::from_static(b"ofA1"),
            capacity: 2,
        };
        let (tap_sink, mut tapped) = TapSink::new(&tap);
        let sink = EventSink::new(tx, Some(tap_sink));
        for _ in 0..5 {
            sink.offer_packet_in(packet_in(b"ofA1\0\0\0\x07"));
        }
        sink.offer_packet_in(packet_in(b"other"));
        let standard = PacketInEvent::of_message(Message::PacketIn(ofnode_proto::PacketIn {
            buffer_id: u32::MAX,
            total_len: 4,
            reason: 1,
            table_id: 0,
            cookie: 0,
            match_: ofnode_proto::Match::new(),
            data: Bytes::from_static(b"\0\0\0\0"),
        }));
        sink.offer_packet_in(standard.expect("a packet-in"));
        assert_eq!(tapped.dropped.load(Ordering::Relaxed), 3);
        let mut taken = 0;
        while let Ok(event) = tapped.packet_ins.try_recv() {
            assert!(event.view().userdata.starts_with(b"ofA1"));
            taken += 1;
        }
        assert_eq!(taken, 2);
        let mut rest = Vec::new();
        while let Ok(SwitchEvent::PacketIn(event)) = events.try_recv() {
            rest.push(event.view().userdata.to_vec());
        }
        assert_eq!(rest, vec![b"other".to_vec(), Vec::new()]);
        assert!(PacketInEvent::of_message(Message::BarrierReply).is_none());
    }
}
