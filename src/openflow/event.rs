//! What the connection tells its owner without being asked.

use ofnode_proto::{ErrorMsg, PacketIn, PortStatus};
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
}

/// The sending side of the event channel. Data events are dropped (and counted) when the owner
/// does not keep up, so a packet-in storm cannot stall the connection; connection events are
/// always delivered.
#[derive(Debug, Clone)]
pub(crate) struct EventSink {
    tx: mpsc::Sender<SwitchEvent>,
}

impl EventSink {
    pub(crate) fn new(tx: mpsc::Sender<SwitchEvent>) -> EventSink {
        EventSink { tx }
    }

    /// A packet-in, port status or async error: best effort.
    pub(crate) fn offer(&self, event: SwitchEvent) {
        match self.tx.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                tracing::warn!(?event, "event channel full: dropping event");
            }
        }
    }

    /// Connected / Disconnected: waits for room (a closed channel just means nobody listens).
    pub(crate) async fn deliver(&self, event: SwitchEvent) {
        let _ = self.tx.send(event).await;
    }
}
