//! Bringing a fresh byte stream up to a usable OpenFlow 1.3 session: HELLO and version
//! negotiation, FEATURES (the datapath id), and SET_CONFIG — sent at every connect because
//! ovs-vswitchd forgets the frag mode when it restarts — checked with GET_CONFIG.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ofnode_proto::{
    ErrorKind, ErrorMsg, FlowUpdate, Header, Hello, Message, MultipartReply, MultipartReplyBody,
    PacketInFormat, SwitchConfig as ConfigBody, OFPC_FRAG_MASK, OFPT_HELLO, OFP_VERSION,
    ONFT_FLOW_MONITOR_PAUSED, ONFT_FLOW_MONITOR_RESUMED, ONF_EXPERIMENTER_ID,
};
use tokio::io::AsyncWriteExt;
use tokio_util::codec::FramedRead;

use super::codec::OfFramer;
use super::config::SwitchConfig;
use super::error::{Error, Result};
use super::event::{EventSink, PacketInEvent, SwitchEvent};
use super::transport::{ReadHalf, Stream, WriteHalf};
use super::xid::XidAllocator;

/// OFPET_HELLO_FAILED / OFPHFC_INCOMPATIBLE.
const HELLO_FAILED_INCOMPATIBLE: ErrorKind = ErrorKind::Standard {
    err_type: 0,
    code: 0,
};

/// A session past its handshake, ready for the connection driver.
pub(crate) struct Established {
    pub(crate) reader: FramedRead<ReadHalf, OfFramer>,
    pub(crate) writer: WriteHalf,
    pub(crate) datapath_id: u64,
    pub(crate) peer: String,
}

impl std::fmt::Debug for Established {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Established")
            .field("datapath_id", &format_args!("{:016x}", self.datapath_id))
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// Runs the whole handshake within `cfg.handshake_timeout`.
pub(crate) async fn handshake(
    stream: Stream,
    peer: String,
    cfg: &SwitchConfig,
    xids: &XidAllocator,
    events: &EventSink,
) -> Result<Established> {
    let (read, writer) = stream.into_split();
    let mut session = Handshake {
        reader: FramedRead::new(read, OfFramer::new(cfg.max_frame_len)),
        writer,
        cfg,
        events,
        peer: &peer,
    };
    let datapath_id = tokio::time::timeout(cfg.handshake_timeout, session.run(xids))
        .await
        .map_err(|_| {
            Error::timeout(
                format!("the OpenFlow handshake with {peer}"),
                cfg.handshake_timeout,
            )
        })??;
    let Handshake { reader, writer, .. } = session;
    Ok(Established {
        reader,
        writer,
        datapath_id,
        peer,
    })
}

struct Handshake<'a> {
    reader: FramedRead<ReadHalf, OfFramer>,
    writer: WriteHalf,
    cfg: &'a SwitchConfig,
    events: &'a EventSink,
    peer: &'a str,
}

/// The xids of the requests whose replies finish the handshake.
struct Awaited {
    features: u32,
    set_config: u32,
    get_config: u32,
    /// NXT_SET_PACKET_IN_FORMAT, when a format other than the standard one is asked for.
    packet_in_format: Option<u32>,
}

impl Handshake<'_> {
    async fn run(&mut self, xids: &XidAllocator) -> Result<u64> {
        self.send(&[(xids.next(), Message::Hello(Hello::default()))])
            .await?;
        let hello = self.next_frame("HELLO").await?;
        self.negotiate(&hello).await?;

        let format = self.cfg.packet_in_format;
        let awaited = Awaited {
            features: xids.next(),
            set_config: xids.next(),
            packet_in_format: (format != PacketInFormat::Standard).then(|| xids.next()),
            get_config: xids.next(),
        };
        let wanted = ConfigBody {
            flags: self.cfg.frag_mode & OFPC_FRAG_MASK,
            miss_send_len: self.cfg.miss_send_len,
        };
        let mut requests = vec![
            (awaited.features, Message::FeaturesRequest),
            (awaited.set_config, Message::SetConfig(wanted)),
        ];
        // Before GET_CONFIG: the switch answers in order, so a refusal arrives before the
        // handshake ends.
        if let Some(xid) = awaited.packet_in_format {
            requests.push((xid, Message::SetPacketInFormat(format)));
        }
        requests.push((awaited.get_config, Message::GetConfigRequest));
        self.send(&requests).await?;
        self.await_replies(&awaited, wanted).await
    }

    async fn send(&mut self, messages: &[(u32, Message)]) -> Result<()> {
        let mut out = BytesMut::new();
        for (xid, msg) in messages {
            msg.try_encode(*xid, &mut out)?;
        }
        self.writer
            .write_all(&out)
            .await
            .map_err(|e| Error::io(format!("sending handshake to {}", self.peer), e))
    }

    async fn next_frame(&mut self, expecting: &str) -> Result<Bytes> {
        match self.reader.next().await {
            Some(frame) => Ok(frame?),
            None => Err(Error::Protocol(format!(
                "{} closed the connection while we waited for {expecting}",
                self.peer
            ))),
        }
    }

    /// Accepts a peer whose HELLO offers OpenFlow 1.3; tells any other peer why it is refused.
    async fn negotiate(&mut self, frame: &[u8]) -> Result<()> {
        let header = Header::parse(frame)?;
        if header.msg_type != OFPT_HELLO {
            return Err(Error::Protocol(format!(
                "{} sent message type {} where HELLO must come first",
                self.peer, header.msg_type
            )));
        }
        let offered = match Message::decode(frame)? {
            (_, Message::Hello(hello)) => hello.versions,
            (_, other) => {
                return Err(Error::Protocol(format!(
                    "{} sent message type {} where HELLO must come first",
                    self.peer,
                    other.msg_type()
                )))
            }
        };
        if offered.contains(&OFP_VERSION) {
            return Ok(());
        }
        let reason = format!(
            "{} offers OpenFlow {}; ofnode speaks only OpenFlow 1.3",
            self.peer,
            describe_versions(&offered)
        );
        let refusal = Message::Error(ErrorMsg {
            kind: HELLO_FAILED_INCOMPATIBLE,
            data: Bytes::from(reason.clone()),
        });
        // Best effort: the peer learns why before we hang up.
        let _ = self.send(&[(header.xid, refusal)]).await;
        Err(Error::Incompatible(reason))
    }

    async fn await_replies(&mut self, awaited: &Awaited, wanted: ConfigBody) -> Result<u64> {
        let mut datapath_id = None;
        let mut config_ok = false;
        while datapath_id.is_none() || !config_ok {
            let frame = self
                .next_frame("FEATURES_REPLY and GET_CONFIG_REPLY")
                .await?;
            let (xid, msg) = Message::decode(&frame)?;
            match msg {
                Message::FeaturesReply(features) if xid == awaited.features => {
                    datapath_id = Some(features.datapath_id);
                }
                Message::GetConfigReply(config) if xid == awaited.get_config => {
                    check_config(wanted, config)?;
                    config_ok = true;
                }
                // A switch that cannot send the packet-in asked for still serves the flows; what
                // needed it (the policy audit log's userdata) is then missing, and said so.
                Message::Error(error) if Some(xid) == awaited.packet_in_format => {
                    tracing::error!(peer = self.peer, format = ?self.cfg.packet_in_format, %error,
                        "the switch refused the packet-in format: packet-ins come as OpenFlow 1.3 PACKET_IN, without userdata");
                }
                Message::Error(error)
                    if [awaited.features, awaited.set_config, awaited.get_config]
                        .contains(&xid) =>
                {
                    return Err(Error::Switch { flow: None, error });
                }
                Message::EchoRequest(data) => {
                    self.send(&[(xid, Message::EchoReply(data))]).await?;
                }
                other => offer_async(self.events, other),
            }
        }
        datapath_id.ok_or_else(|| Error::Protocol("no datapath id".into()))
    }
}

fn check_config(wanted: ConfigBody, got: ConfigBody) -> Result<()> {
    let (want, have) = (wanted.flags & OFPC_FRAG_MASK, got.flags & OFPC_FRAG_MASK);
    if want == have {
        Ok(())
    } else {
        Err(Error::Protocol(format!(
            "switch kept fragment mode {have} after SET_CONFIG asked for {want}"
        )))
    }
}

/// Asynchronous messages that arrive while the session is being set up still reach the owner.
pub(crate) fn offer_async(events: &EventSink, msg: Message) {
    match msg {
        Message::PortStatus(status) => events.offer(SwitchEvent::PortStatus(status)),
        msg @ (Message::PacketIn(_) | Message::PacketIn2(_)) => {
            if let Some(event) = PacketInEvent::of_message(msg) {
                events.offer_packet_in(event);
            }
        }
        Message::Error(error) => events.offer(SwitchEvent::AsyncError(error)),
        Message::MultipartReply(MultipartReply {
            body: MultipartReplyBody::FlowMonitor(updates),
            ..
        }) => offer_flow_updates(events, updates),
        Message::Experimenter {
            experimenter: ONF_EXPERIMENTER_ID,
            exp_type: exp_type @ (ONFT_FLOW_MONITOR_PAUSED | ONFT_FLOW_MONITOR_RESUMED),
            ..
        } => events.offer(SwitchEvent::FlowMonitorPaused {
            resumed: exp_type == ONFT_FLOW_MONITOR_RESUMED,
        }),
        other => tracing::debug!(msg_type = other.msg_type(), "ignoring unsolicited message"),
    }
}

/// Flow monitor updates: this connection's own changes come abbreviated and are left out.
fn offer_flow_updates(events: &EventSink, updates: Vec<FlowUpdate>) {
    let changes: Vec<_> = updates
        .into_iter()
        .filter_map(|update| match update {
            FlowUpdate::Full(change) => Some(change),
            FlowUpdate::Abbrev { .. } => None,
        })
        .collect();
    if !changes.is_empty() {
        events.offer(SwitchEvent::FlowsChanged(changes));
    }
}

/// "1.0, 1.1" for wire versions 1 and 2.
fn describe_versions(versions: &[u8]) -> String {
    if versions.is_empty() {
        return "no version".into();
    }
    versions
        .iter()
        .map(|v| match v {
            1..=6 => format!("1.{}", v - 1),
            other => format!("wire version {other:#04x}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_named_as_people_know_them() {
        assert_eq!(describe_versions(&[1, 2]), "1.0, 1.1");
        assert_eq!(describe_versions(&[9]), "wire version 0x09");
        assert_eq!(describe_versions(&[]), "no version");
    }
}
