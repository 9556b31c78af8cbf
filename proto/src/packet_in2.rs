//! Nicira packet-ins: NXT_PACKET_IN2, the property-based packet-in Open vSwitch sends (it is
//! the only one that carries a `controller(userdata=...)` action's userdata), and
//! NXT_SET_PACKET_IN_FORMAT, with which a connection asks for it (lib/ofp-packet.c). And
//! [`PacketInView`]: what a packet-in says, whichever message carried it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::oxm::Match;
use crate::packet::PacketIn;
use crate::property::{self, RawProperty};
use crate::reason::OFPR_NO_MATCH;
use crate::wire::Reader;
use crate::{DecodeError, EncodeError, NO_BUFFER};

/// Nicira message subtypes (`exp_type` of an OFPT_EXPERIMENTER of NX_VENDOR_ID).
pub const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
pub const NXT_PACKET_IN2: u32 = 30;

/// NXT_PACKET_IN2 property types (`enum nx_packet_in2_prop_type`).
const NXPINT_PACKET: u16 = 0;
const NXPINT_FULL_LEN: u16 = 1;
const NXPINT_BUFFER_ID: u16 = 2;
const NXPINT_TABLE_ID: u16 = 3;
const NXPINT_COOKIE: u16 = 4;
const NXPINT_REASON: u16 = 5;
const NXPINT_METADATA: u16 = 6;
const NXPINT_USERDATA: u16 = 7;
const NXPINT_CONTINUATION: u16 = 8;

/// The cookie of a packet-in that came from no flow (OVS writes no cookie then).
const NO_COOKIE: u64 = u64::MAX;

/// NXT_PACKET_IN2. Each property is kept as it came (present or not), so a message encodes to
/// the bytes it was decoded from when they are in the order OVS writes them: packet, full_len,
/// buffer_id, table_id, cookie, reason, metadata, continuation, userdata, then properties this
/// crate does not know, verbatim and in their order. The accessors give OVS's defaults for
/// what is absent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketIn2 {
    /// The packet (its first bytes when `full_len` says it was longer); never empty.
    pub packet: Bytes,
    /// The packet's length when `packet` holds only its first bytes.
    pub full_len: Option<u32>,
    pub buffer_id: Option<u32>,
    /// The table of the flow that sent the packet.
    pub table_id: Option<u8>,
    /// The cookie of the flow that sent the packet.
    pub cookie: Option<u64>,
    /// `OFPR_*` (OVS writes `action` for the reasons OpenFlow 1.3 does not have).
    pub reason: Option<u8>,
    /// The packet's metadata: in_port, registers, metadata, tunnel, pkt_mark, conntrack fields
    /// (with eth_type when conntrack fields are there).
    pub metadata: Option<Match>,
    /// The `userdata` of the `controller(...)` action that sent the packet.
    pub userdata: Option<Bytes>,
    /// The switch's private state for NXT_RESUME (after `pause`): the nested properties,
    /// verbatim.
    pub continuation: Option<Bytes>,
    /// Properties this crate does not interpret.
    pub unknown: Vec<RawProperty>,
}

impl PacketIn2 {
    /// A packet-in of `packet` with nothing else said (for tests and fakes).
    pub fn new(packet: Bytes) -> PacketIn2 {
        PacketIn2 {
            packet,
            full_len: None,
            buffer_id: None,
            table_id: None,
            cookie: None,
            reason: None,
            metadata: None,
            userdata: None,
            continuation: None,
            unknown: Vec::new(),
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        property::put(out, NXPINT_PACKET, &self.packet)?;
        if let Some(len) = self.full_len {
            property::put_u32(out, NXPINT_FULL_LEN, len)?;
        }
        if let Some(id) = self.buffer_id {
            property::put_u32(out, NXPINT_BUFFER_ID, id)?;
        }
        if let Some(table) = self.table_id {
            property::put_u8(out, NXPINT_TABLE_ID, table)?;
        }
        if let Some(cookie) = self.cookie {
            property::put_u64(out, NXPINT_COOKIE, cookie)?;
        }
        if let Some(reason) = self.reason {
            property::put_u8(out, NXPINT_REASON, reason)?;
        }
        if let Some(metadata) = &self.metadata {
            let slot = property::start(out, NXPINT_METADATA);
            metadata.encode_tlvs(out);
            property::finish(out, slot)?;
        }
        if let Some(continuation) = &self.continuation {
            property::put_nested(out, NXPINT_CONTINUATION, continuation)?;
        }
        if let Some(userdata) = &self.userdata {
            property::put(out, NXPINT_USERDATA, userdata)?;
        }
        self.unknown.iter().try_for_each(|p| p.encode(out))
    }

    /// decode_nx_packet_in2: a later property of a type replaces an earlier one, as in OVS; a
    /// packet must be there, and a full length must not be less than it.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<PacketIn2, DecodeError> {
        let mut pin = PacketIn2::new(Bytes::new());
        while let Some(prop) = property::next(r, "NXT_PACKET_IN2 property")? {
            match prop.prop_type {
                NXPINT_PACKET => pin.packet = Bytes::copy_from_slice(prop.payload),
                NXPINT_FULL_LEN => pin.full_len = Some(prop.u32()?),
                NXPINT_BUFFER_ID => pin.buffer_id = Some(prop.u32()?),
                NXPINT_TABLE_ID => pin.table_id = Some(prop.u8()?),
                NXPINT_COOKIE => pin.cookie = Some(prop.u64()?),
                NXPINT_REASON => pin.reason = Some(prop.u8()?),
                NXPINT_METADATA => {
                    let mut tlvs = r.child(prop.payload, "NXT_PACKET_IN2 metadata");
                    pin.metadata = Some(Match::decode_tlvs(&mut tlvs)?);
                }
                NXPINT_USERDATA => pin.userdata = Some(Bytes::copy_from_slice(prop.payload)),
                NXPINT_CONTINUATION => {
                    pin.continuation = Some(Bytes::copy_from_slice(prop.nested()?));
                }
                _ => pin.unknown.push(prop.raw()),
            }
        }
        if pin.packet.is_empty() {
            return Err(DecodeError::BadValue {
                what: "NXT_PACKET_IN2 without a packet (OFPBRC_BAD_LEN)",
                value: 0,
            });
        }
        if pin
            .full_len
            .is_some_and(|len| len != 0 && (len as usize) < pin.packet.len())
        {
            return Err(DecodeError::BadValue {
                what: "NXT_PACKET_IN2 full_len less than the packet it carries (OFPBRC_BAD_LEN)",
                value: u64::from(pin.full_len.unwrap_or(0)),
            });
        }
        Ok(pin)
    }

    /// What the packet-in says, with OVS's defaults for what it left out.
    pub fn view(&self) -> PacketInView<'_> {
        static NO_METADATA: Match = Match::new();
        PacketInView {
            packet: &self.packet,
            total_len: match self.full_len {
                Some(len) if len != 0 => len as usize,
                _ => self.packet.len(),
            },
            buffer_id: self.buffer_id.filter(|&id| id != NO_BUFFER),
            table_id: self.table_id.unwrap_or(0),
            cookie: self.cookie.filter(|&c| c != NO_COOKIE),
            reason: self.reason.unwrap_or(OFPR_NO_MATCH),
            metadata: self.metadata.as_ref().unwrap_or(&NO_METADATA),
            userdata: self.userdata.as_deref().unwrap_or_default(),
        }
    }
}

impl PacketIn {
    /// What the packet-in says (an OpenFlow 1.3 packet-in carries no userdata).
    pub fn view(&self) -> PacketInView<'_> {
        PacketInView {
            packet: &self.data,
            total_len: usize::from(self.total_len),
            buffer_id: Some(self.buffer_id).filter(|&id| id != NO_BUFFER),
            table_id: self.table_id,
            cookie: Some(self.cookie).filter(|&c| c != NO_COOKIE),
            reason: self.reason,
            metadata: &self.match_,
            userdata: &[],
        }
    }
}

/// A packet the switch sent to the controller, whichever packet-in message carried it (an
/// OpenFlow 1.3 PACKET_IN or an NXT_PACKET_IN2): see [`crate::Message::packet_in`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInView<'a> {
    /// The packet, from its Ethernet header (its first bytes when `total_len` is more).
    pub packet: &'a [u8],
    pub total_len: usize,
    /// The switch's buffer holding the packet, if it kept one (OVS does not).
    pub buffer_id: Option<u32>,
    /// The table of the flow that sent it.
    pub table_id: u8,
    /// The cookie of the flow that sent it (none when it came from no flow).
    pub cookie: Option<u64>,
    /// `OFPR_*`: `OFPR_ACTION` for an output or controller action.
    pub reason: u8,
    /// The packet's metadata: in_port, registers (`metadata.exact(Field::Reg(0))`), tunnel,
    /// pkt_mark, conntrack state and tuple.
    pub metadata: &'a Match,
    /// The sending `controller(userdata=...)` action's userdata (empty in other packet-ins).
    pub userdata: &'a [u8],
}

/// The packet-in message a connection asks for (NXT_SET_PACKET_IN_FORMAT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketInFormat {
    /// OFPT_PACKET_IN of the connection's OpenFlow version (the default).
    Standard,
    /// NXT_PACKET_IN (OVS 1.1's Nicira packet-in).
    Nxt,
    /// NXT_PACKET_IN2: needed for `controller(userdata=...)` and `pause`.
    Nxt2,
}

impl PacketInFormat {
    pub fn to_u32(self) -> u32 {
        match self {
            PacketInFormat::Standard => 0,
            PacketInFormat::Nxt => 1,
            PacketInFormat::Nxt2 => 2,
        }
    }

    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => PacketInFormat::Standard,
            1 => PacketInFormat::Nxt,
            2 => PacketInFormat::Nxt2,
            _ => return None,
        })
    }

    pub(crate) fn encode(self, out: &mut BytesMut) {
        out.put_u32(self.to_u32());
    }

    /// OVS refuses a format it does not know (OFPBRC_EPERM).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<PacketInFormat, DecodeError> {
        let raw = r.u32()?;
        PacketInFormat::from_u32(raw).ok_or(DecodeError::BadValue {
            what: "packet-in format (OFPBRC_EPERM)",
            value: u64::from(raw),
        })
    }
}
