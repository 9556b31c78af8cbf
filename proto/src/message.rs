//! The OpenFlow 1.3 message enum: dispatch of encode and decode on the header's type.

use bytes::{BufMut, Bytes, BytesMut};

use crate::bundle::{
    BundleAdd, BundleControl, ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL, ONF_EXPERIMENTER_ID,
};
use crate::error::ErrorMsg;
use crate::flow_mod::FlowMod;
use crate::group::GroupMod;
use crate::header::*;
use crate::meter::MeterMod;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::packet::{PacketIn, PacketOut};
use crate::packet_in2::{
    PacketIn2, PacketInFormat, PacketInView, NXT_PACKET_IN2, NXT_SET_PACKET_IN_FORMAT,
};
use crate::port::PortStatus;
use crate::switch::{AsyncConfig, Hello, RoleMsg, SwitchConfig, SwitchFeatures};
use crate::wire::{LengthSlot, Reader};
use crate::{DecodeError, EncodeError, NX_VENDOR_ID};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    Hello(Hello),
    Error(ErrorMsg),
    EchoRequest(Bytes),
    EchoReply(Bytes),
    FeaturesRequest,
    FeaturesReply(SwitchFeatures),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    PortStatus(PortStatus),
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    MeterMod(MeterMod),
    MultipartRequest(MultipartRequest),
    MultipartReply(MultipartReply),
    BarrierRequest,
    BarrierReply,
    RoleRequest(RoleMsg),
    RoleReply(RoleMsg),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    SetAsync(AsyncConfig),
    BundleControl(BundleControl),
    BundleAdd(BundleAdd),
    /// NXT_PACKET_IN2: the packet-in OVS sends once asked with [`Message::SetPacketInFormat`].
    PacketIn2(PacketIn2),
    /// NXT_SET_PACKET_IN_FORMAT.
    SetPacketInFormat(PacketInFormat),
    /// An experimenter message this crate does not interpret.
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Bytes,
    },
    /// A message type this crate does not interpret, kept with its body.
    Unknown {
        msg_type: u8,
        body: Bytes,
    },
}

impl Message {
    pub fn msg_type(&self) -> u8 {
        match self {
            Message::Hello(_) => OFPT_HELLO,
            Message::Error(_) => OFPT_ERROR,
            Message::EchoRequest(_) => OFPT_ECHO_REQUEST,
            Message::EchoReply(_) => OFPT_ECHO_REPLY,
            Message::FeaturesRequest => OFPT_FEATURES_REQUEST,
            Message::FeaturesReply(_) => OFPT_FEATURES_REPLY,
            Message::GetConfigRequest => OFPT_GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => OFPT_GET_CONFIG_REPLY,
            Message::SetConfig(_) => OFPT_SET_CONFIG,
            Message::PacketIn(_) => OFPT_PACKET_IN,
            Message::PortStatus(_) => OFPT_PORT_STATUS,
            Message::PacketOut(_) => OFPT_PACKET_OUT,
            Message::FlowMod(_) => OFPT_FLOW_MOD,
            Message::GroupMod(_) => OFPT_GROUP_MOD,
            Message::MeterMod(_) => OFPT_METER_MOD,
            Message::MultipartRequest(_) => OFPT_MULTIPART_REQUEST,
            Message::MultipartReply(_) => OFPT_MULTIPART_REPLY,
            Message::BarrierRequest => OFPT_BARRIER_REQUEST,
            Message::BarrierReply => OFPT_BARRIER_REPLY,
            Message::RoleRequest(_) => OFPT_ROLE_REQUEST,
            Message::RoleReply(_) => OFPT_ROLE_REPLY,
            Message::GetAsyncRequest => OFPT_GET_ASYNC_REQUEST,
            Message::GetAsyncReply(_) => OFPT_GET_ASYNC_REPLY,
            Message::SetAsync(_) => OFPT_SET_ASYNC,
            Message::BundleControl(_)
            | Message::BundleAdd(_)
            | Message::PacketIn2(_)
            | Message::SetPacketInFormat(_)
            | Message::Experimenter { .. } => OFPT_EXPERIMENTER,
            Message::Unknown { msg_type, .. } => *msg_type,
        }
    }

    /// Appends the message, header included, to `out`, or refuses (leaving `out` as it was) a
    /// message whose length, or the length of any structure inside it, does not fit its 16-bit
    /// length field. Every length written equals the bytes that follow it.
    pub fn try_encode(&self, xid: u32, out: &mut BytesMut) -> Result<(), EncodeError> {
        let start = out.len();
        let result = self.encode_frame(xid, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// The encoded bytes of this message (see [`Message::try_encode`]).
    pub fn to_bytes(&self, xid: u32) -> Result<BytesMut, EncodeError> {
        let mut out = BytesMut::new();
        self.try_encode(xid, &mut out)?;
        Ok(out)
    }

    fn encode_frame(&self, xid: u32, out: &mut BytesMut) -> Result<(), EncodeError> {
        let version = match self {
            Message::Hello(hello) => hello.header_version(),
            _ => OFP_VERSION,
        };
        let what = match self {
            Message::BundleAdd(_) => "bundle add message",
            _ => message_name(self.msg_type()),
        };
        let slot = LengthSlot::new(out, 2, what);
        Header {
            version,
            msg_type: self.msg_type(),
            length: 0,
            xid,
        }
        .encode(out);
        self.encode_body(xid, out)?;
        slot.finish(out, false)?;
        Ok(())
    }

    fn encode_body(&self, xid: u32, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Message::Hello(hello) => hello.encode(out),
            Message::Error(err) => err.encode(out),
            Message::EchoRequest(data) | Message::EchoReply(data) => out.put_slice(data),
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply
            | Message::GetAsyncRequest => {}
            Message::GetAsyncReply(config) | Message::SetAsync(config) => config.encode(out),
            Message::FeaturesReply(features) => features.encode(out),
            Message::GetConfigReply(config) | Message::SetConfig(config) => config.encode(out),
            Message::PacketIn(packet_in) => packet_in.encode(out)?,
            Message::PortStatus(status) => status.encode(out),
            Message::PacketOut(packet_out) => packet_out.encode(out)?,
            Message::FlowMod(flow_mod) => flow_mod.encode(out)?,
            Message::GroupMod(group_mod) => group_mod.encode(out)?,
            Message::MeterMod(meter_mod) => meter_mod.encode(out)?,
            Message::MultipartRequest(request) => request.encode(out)?,
            Message::MultipartReply(reply) => reply.encode(out)?,
            Message::RoleRequest(role) | Message::RoleReply(role) => role.encode(out),
            Message::BundleControl(control) => control.encode(out),
            Message::BundleAdd(add) => add.encode(xid, out)?,
            Message::PacketIn2(packet_in) => {
                put_nx_header(out, NXT_PACKET_IN2);
                packet_in.encode(out)?;
            }
            Message::SetPacketInFormat(format) => {
                put_nx_header(out, NXT_SET_PACKET_IN_FORMAT);
                format.encode(out);
            }
            Message::Experimenter {
                experimenter,
                exp_type,
                data,
            } => {
                out.put_u32(*experimenter);
                out.put_u32(*exp_type);
                out.put_slice(data);
            }
            Message::Unknown { body, .. } => out.put_slice(body),
        }
        Ok(())
    }

    /// The packet a PACKET_IN or NXT_PACKET_IN2 carries, with its table, cookie, metadata and
    /// userdata; `None` for any other message.
    pub fn packet_in(&self) -> Option<PacketInView<'_>> {
        match self {
            Message::PacketIn(packet_in) => Some(packet_in.view()),
            Message::PacketIn2(packet_in) => Some(packet_in.view()),
            _ => None,
        }
    }

    /// Decodes one whole frame (header included; its length must equal `frame.len()`).
    /// Returns the xid and the message.
    pub fn decode(frame: &[u8]) -> Result<(u32, Message), DecodeError> {
        decode_frame(frame, true, false)
    }

    /// Like [`Message::decode`], but checking the structure only, not what it means: a match
    /// field without its prerequisite, a value OVS refuses or an action it refuses (kept raw)
    /// are taken as they are. For naming a message this side built itself when the switch
    /// refused it (the refusal is the point); never for reading what a peer sent.
    pub fn decode_lenient(frame: &[u8]) -> Result<(u32, Message), DecodeError> {
        decode_frame(frame, true, true)
    }
}

/// Decodes the message inside a bundle add, where another bundle message is not allowed.
pub(crate) fn decode_inner(frame: &[u8], lenient: bool) -> Result<(u32, Message), DecodeError> {
    decode_frame(frame, false, lenient)
}

fn decode_frame(
    frame: &[u8],
    allow_bundle: bool,
    lenient: bool,
) -> Result<(u32, Message), DecodeError> {
    let header = Header::parse(frame)?;
    let length = usize::from(header.length);
    if length != frame.len() {
        return Err(DecodeError::BadLength {
            what: "OpenFlow message",
            length,
            reason: "header length differs from the frame's size",
        });
    }
    // HELLO and ERROR may come in another version during negotiation.
    let any_version = matches!(header.msg_type, OFPT_HELLO | OFPT_ERROR);
    if header.version != OFP_VERSION && !any_version {
        return Err(DecodeError::BadVersion(header.version));
    }
    let mut r = Reader::new(&frame[OFP_HEADER_LEN..], message_name(header.msg_type));
    if lenient {
        r = r.lenient();
    }
    let message = decode_body(&header, &mut r, allow_bundle)?;
    r.finish()?;
    Ok((header.xid, message))
}

fn decode_body(
    header: &Header,
    r: &mut Reader<'_>,
    allow_bundle: bool,
) -> Result<Message, DecodeError> {
    let copy_rest = |r: &mut Reader<'_>| Bytes::copy_from_slice(r.rest());
    Ok(match header.msg_type {
        OFPT_HELLO => Message::Hello(Hello::decode(r, header.version)?),
        OFPT_ERROR => Message::Error(ErrorMsg::decode(r)?),
        OFPT_ECHO_REQUEST => Message::EchoRequest(copy_rest(r)),
        OFPT_ECHO_REPLY => Message::EchoReply(copy_rest(r)),
        OFPT_EXPERIMENTER => decode_experimenter(header.xid, r, allow_bundle)?,
        OFPT_FEATURES_REQUEST => Message::FeaturesRequest,
        OFPT_FEATURES_REPLY => Message::FeaturesReply(SwitchFeatures::decode(r)?),
        OFPT_GET_CONFIG_REQUEST => Message::GetConfigRequest,
        OFPT_GET_CONFIG_REPLY => Message::GetConfigReply(SwitchConfig::decode(r)?),
        OFPT_SET_CONFIG => Message::SetConfig(SwitchConfig::decode(r)?),
        OFPT_PACKET_IN => Message::PacketIn(PacketIn::decode(r)?),
        OFPT_PORT_STATUS => Message::PortStatus(PortStatus::decode(r)?),
        OFPT_PACKET_OUT => Message::PacketOut(PacketOut::decode(r)?),
        OFPT_FLOW_MOD => Message::FlowMod(FlowMod::decode(r)?),
        OFPT_GROUP_MOD => Message::GroupMod(GroupMod::decode(r)?),
        OFPT_METER_MOD => Message::MeterMod(MeterMod::decode(r)?),
        OFPT_MULTIPART_REQUEST => Message::MultipartRequest(MultipartRequest::decode(r)?),
        OFPT_MULTIPART_REPLY => Message::MultipartReply(MultipartReply::decode(r)?),
        OFPT_BARRIER_REQUEST => Message::BarrierRequest,
        OFPT_BARRIER_REPLY => Message::BarrierReply,
        OFPT_ROLE_REQUEST => Message::RoleRequest(RoleMsg::decode(r)?),
        OFPT_ROLE_REPLY => Message::RoleReply(RoleMsg::decode(r)?),
        OFPT_GET_ASYNC_REQUEST => Message::GetAsyncRequest,
        OFPT_GET_ASYNC_REPLY => Message::GetAsyncReply(AsyncConfig::decode(r)?),
        OFPT_SET_ASYNC => Message::SetAsync(AsyncConfig::decode(r)?),
        msg_type => Message::Unknown {
            msg_type,
            body: copy_rest(r),
        },
    })
}

fn decode_experimenter(
    xid: u32,
    r: &mut Reader<'_>,
    allow_bundle: bool,
) -> Result<Message, DecodeError> {
    let experimenter = r.u32()?;
    let exp_type = r.u32()?;
    let is_bundle = experimenter == ONF_EXPERIMENTER_ID
        && matches!(exp_type, ONFT_BUNDLE_CONTROL | ONFT_BUNDLE_ADD_MESSAGE);
    if is_bundle && !allow_bundle {
        return Err(DecodeError::NestedBundle);
    }
    Ok(match (experimenter, exp_type) {
        (ONF_EXPERIMENTER_ID, ONFT_BUNDLE_CONTROL) => {
            Message::BundleControl(BundleControl::decode(r)?)
        }
        (ONF_EXPERIMENTER_ID, ONFT_BUNDLE_ADD_MESSAGE) => {
            Message::BundleAdd(BundleAdd::decode(r, xid)?)
        }
        (NX_VENDOR_ID, NXT_PACKET_IN2) => Message::PacketIn2(PacketIn2::decode(r)?),
        (NX_VENDOR_ID, NXT_SET_PACKET_IN_FORMAT) => {
            Message::SetPacketInFormat(PacketInFormat::decode(r)?)
        }
        _ => Message::Experimenter {
            experimenter,
            exp_type,
            data: Bytes::copy_from_slice(r.rest()),
        },
    })
}

/// The experimenter header of a Nicira message: its vendor id and subtype.
fn put_nx_header(out: &mut BytesMut, subtype: u32) {
    out.put_u32(NX_VENDOR_ID);
    out.put_u32(subtype);
}

/// A name for error messages about a message body.
pub(crate) fn message_name(msg_type: u8) -> &'static str {
    match msg_type {
        OFPT_HELLO => "hello",
        OFPT_ERROR => "error",
        OFPT_EXPERIMENTER => "experimenter message",
        OFPT_FEATURES_REPLY => "features reply",
        OFPT_GET_CONFIG_REPLY | OFPT_SET_CONFIG => "switch config",
        OFPT_PACKET_IN => "packet_in",
        OFPT_PORT_STATUS => "port status",
        OFPT_PACKET_OUT => "packet_out",
        OFPT_FLOW_MOD => "flow_mod",
        OFPT_GROUP_MOD => "group_mod",
        OFPT_PORT_MOD => "port_mod",
        OFPT_METER_MOD => "meter_mod",
        OFPT_MULTIPART_REQUEST => "multipart request",
        OFPT_MULTIPART_REPLY => "multipart reply",
        OFPT_ROLE_REQUEST | OFPT_ROLE_REPLY => "role message",
        OFPT_GET_ASYNC_REPLY | OFPT_SET_ASYNC => "async config",
        _ => "message",
    }
}
