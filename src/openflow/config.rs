//! How a `Switch` connects and behaves.

use std::time::Duration;

use bytes::Bytes;
use ofnode_proto::{BundleFlags, PacketInFormat, OFPCML_NO_BUFFER, OFPC_FRAG_NORMAL};

use super::codec::MAX_FRAME_LEN;
use crate::stream::{Target, TargetError};
use crate::tls::TlsConfig;

#[derive(Debug, Clone)]
pub struct SwitchConfig {
    pub target: Target,
    /// Sent in SET_CONFIG at every (re)connect (`OFPC_FRAG_*`; the node uses
    /// `OFPC_FRAG_NX_MATCH`): the mode is switch-wide and ovs-vswitchd forgets it when restarted.
    pub frag_mode: u16,
    pub miss_send_len: u16,
    /// The packet-in message asked for at every (re)connect (NXT_SET_PACKET_IN_FORMAT; a
    /// restarted ovs-vswitchd forgets it). `Nxt2` is needed for `controller(userdata=...)`.
    /// Whichever arrives, `SwitchEvent::PacketIn` reads it through `PacketInEvent::view`.
    pub packet_in_format: PacketInFormat,
    /// Packet-ins to set apart from the event channel (see [`PacketInTap`]).
    pub packet_in_tap: Option<PacketInTap>,
    /// Probe an idle connection with an echo request after this long without traffic.
    pub echo_interval: Duration,
    /// Declare the peer dead when a probe has had no answer (nor any other traffic) this long.
    pub echo_timeout: Duration,
    /// Upper bound for HELLO + FEATURES + config exchange.
    pub handshake_timeout: Duration,
    /// Upper bound for any one request (a transaction counts each phase).
    pub request_timeout: Duration,
    /// Capacity of the command queue into the connection task (backpressure on callers).
    pub max_queue: usize,
    /// Bytes queued for the socket beyond which no new commands are taken.
    pub max_write_buffer: usize,
    /// Requests (not transactions) awaiting replies on one connection beyond which no new
    /// commands are taken.
    pub max_pending: usize,
    /// Largest OpenFlow message accepted from the peer.
    pub max_frame_len: usize,
    /// Largest reassembled multipart reply (sum of parts).
    pub max_reply_bytes: usize,
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    /// Flags of every bundle: atomic | ordered unless changed.
    pub bundle_flags: BundleFlags,
    /// Most flow mods one transaction may carry; larger transactions are refused, not split.
    pub max_bundle_msgs: usize,
    /// Capacity of the event channel returned by `Switch::start`.
    pub event_queue: usize,
    /// Key, certificate and CA for `ssl:`/`pssl:` targets (required by them, unused otherwise).
    pub tls: Option<TlsConfig>,
}

impl SwitchConfig {
    pub fn new(target: Target) -> SwitchConfig {
        SwitchConfig {
            target,
            frag_mode: OFPC_FRAG_NORMAL,
            miss_send_len: OFPCML_NO_BUFFER,
            packet_in_format: PacketInFormat::Standard,
            packet_in_tap: None,
            echo_interval: Duration::from_secs(5),
            echo_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_queue: 1024,
            max_write_buffer: 1 << 20,
            max_pending: 4096,
            max_frame_len: MAX_FRAME_LEN,
            max_reply_bytes: 1 << 30,
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(8),
            bundle_flags: BundleFlags(BundleFlags::ATOMIC.0 | BundleFlags::ORDERED.0),
            max_bundle_msgs: 1_000_000,
            event_queue: 1024,
            tls: None,
        }
    }

    /// Parses a target such as `unix:/run/openvswitch/br0.mgmt` or `ptcp:6653`.
    pub fn from_target(target: &str) -> Result<SwitchConfig, TargetError> {
        Ok(SwitchConfig::new(target.parse()?))
    }
}

/// Packet-ins whose userdata starts with `userdata_prefix` go to a channel of their own
/// (`Switch::take_packet_in_tap`) holding at most `capacity`; what does not fit is dropped and
/// counted. The event channel, which carries flow monitor updates, is then never starved by
/// a flood of them, nor they by it.
#[derive(Debug, Clone)]
pub struct PacketInTap {
    pub userdata_prefix: Bytes,
    pub capacity: usize,
}
