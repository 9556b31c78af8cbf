//! What the connection tells its owner without being asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ofnode_proto::{ErrorMsg, FlowChange, PacketIn, PortStatus};
use tokio::sync::mpsc;

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
    PacketIn(PacketIn),
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

/// The sending side of the event channel. Data events are dropped (and counted) when the owner
/// does not keep up, so a packet-in storm cannot stall the connection; connection events are
/// always delivered.
#[derive(Debug, Clone)]
pub(crate) struct EventSink {
    tx: mpsc::Sender<SwitchEvent>,
    dropped: Arc<AtomicU64>,
}

impl EventSink {
    pub(crate) fn new(tx: mpsc::Sender<SwitchEvent>) -> EventSink {
        EventSink {
            tx,
            dropped: Arc::default(),
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
