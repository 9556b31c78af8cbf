//! OFPT_MULTIPART_REQUEST / OFPT_MULTIPART_REPLY: flow stats, group and meter statistics and
//! descriptions, meter features, port descriptions, switch description, the ONF flow monitor;
//! other kinds are carried as raw bodies.

use bytes::{BufMut, Bytes, BytesMut};

use crate::group::{GroupDesc, GroupStats};
use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::meter::{MeterConfig, MeterFeatures, MeterStats};
use crate::monitor::{
    decode_requests, decode_updates, encode_experimenter_header, is_flow_monitor_body,
    FlowMonitorRequest, FlowUpdate, OFPMP_EXPERIMENTER,
};
use crate::oxm::Match;
use crate::port::{Port, OFP_PORT_LEN};
use crate::wire::{put_fixed_str, put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError, OFPG_ANY, OFPP_ANY, OFPTT_ALL};

pub const OFPMP_DESC: u16 = 0;
pub const OFPMP_FLOW: u16 = 1;
pub const OFPMP_GROUP: u16 = 6;
pub const OFPMP_GROUP_DESC: u16 = 7;
pub const OFPMP_METER: u16 = 9;
pub const OFPMP_METER_CONFIG: u16 = 10;
pub const OFPMP_METER_FEATURES: u16 = 11;
pub const OFPMP_PORT_DESC: u16 = 13;

/// Set in a reply's flags when more parts of the same reply follow.
pub const OFPMPF_REPLY_MORE: u16 = 1;
/// Set in a request's flags when more parts of the same request follow.
pub const OFPMPF_REQ_MORE: u16 = 1;

/// Flow stats request (OFPMP_FLOW): the flows of `table_id` (OFPTT_ALL for all) that match
/// `match_` non-strictly and whose cookie equals `cookie` under `cookie_mask`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub match_: Match,
}

impl Default for FlowStatsRequest {
    /// Every flow of every table, as `ovs-ofctl dump-flows` asks.
    fn default() -> Self {
        FlowStatsRequest {
            table_id: OFPTT_ALL,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::new(),
        }
    }
}

impl FlowStatsRequest {
    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u8(self.table_id);
        put_zeros(out, 3);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        put_zeros(out, 4);
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        self.match_.encode(out)
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            match_: Match::decode(r)?,
        })
    }
}

/// A multipart request. Kinds this crate does not interpret — and interpreted kinds sent with
/// non-zero flags — are `Other`, kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartRequest {
    Flow(FlowStatsRequest),
    /// Statistics of one group, or of all (`OFPG_ALL`).
    GroupStats(u32),
    /// The description of every group (`dump-groups`).
    GroupDesc,
    /// Statistics of one meter, or of all (`OFPM_ALL`; `meter-stats`).
    MeterStats(u32),
    /// The configuration of one meter, or of all (`OFPM_ALL`; `dump-meters`).
    MeterConfig(u32),
    /// What meters the switch has (`meter-features`).
    MeterFeatures,
    PortDesc,
    Desc,
    /// ONF flow monitor (see `monitor.rs`): one or more monitors.
    FlowMonitor(Vec<FlowMonitorRequest>),
    Other {
        mp_type: u16,
        flags: u16,
        body: Bytes,
    },
}

impl MultipartRequest {
    pub fn mp_type(&self) -> u16 {
        match self {
            MultipartRequest::Flow(_) => OFPMP_FLOW,
            MultipartRequest::GroupStats(_) => OFPMP_GROUP,
            MultipartRequest::GroupDesc => OFPMP_GROUP_DESC,
            MultipartRequest::MeterStats(_) => OFPMP_METER,
            MultipartRequest::MeterConfig(_) => OFPMP_METER_CONFIG,
            MultipartRequest::MeterFeatures => OFPMP_METER_FEATURES,
            MultipartRequest::PortDesc => OFPMP_PORT_DESC,
            MultipartRequest::Desc => OFPMP_DESC,
            MultipartRequest::FlowMonitor(_) => OFPMP_EXPERIMENTER,
            MultipartRequest::Other { mp_type, .. } => *mp_type,
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u16(self.mp_type());
        let flags = match self {
            MultipartRequest::Other { flags, .. } => *flags,
            _ => 0,
        };
        out.put_u16(flags);
        put_zeros(out, 4);
        match self {
            MultipartRequest::Flow(req) => req.encode(out)?,
            MultipartRequest::GroupStats(id)
            | MultipartRequest::MeterStats(id)
            | MultipartRequest::MeterConfig(id) => {
                out.put_u32(*id);
                put_zeros(out, 4);
            }
            MultipartRequest::GroupDesc
            | MultipartRequest::MeterFeatures
            | MultipartRequest::PortDesc
            | MultipartRequest::Desc => {}
            MultipartRequest::FlowMonitor(monitors) => {
                encode_experimenter_header(out);
                for monitor in monitors {
                    monitor.encode(out)?;
                }
            }
            MultipartRequest::Other { body, .. } => out.put_slice(body),
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mp_type = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        if flags != 0 {
            let body = Bytes::copy_from_slice(r.rest());
            return Ok(MultipartRequest::Other {
                mp_type,
                flags,
                body,
            });
        }
        let req = match mp_type {
            OFPMP_FLOW => MultipartRequest::Flow(FlowStatsRequest::decode(r)?),
            OFPMP_GROUP => MultipartRequest::GroupStats(decode_id(r)?),
            OFPMP_GROUP_DESC => MultipartRequest::GroupDesc,
            OFPMP_METER => MultipartRequest::MeterStats(decode_id(r)?),
            OFPMP_METER_CONFIG => MultipartRequest::MeterConfig(decode_id(r)?),
            OFPMP_METER_FEATURES => MultipartRequest::MeterFeatures,
            OFPMP_PORT_DESC => MultipartRequest::PortDesc,
            OFPMP_DESC => MultipartRequest::Desc,
            OFPMP_EXPERIMENTER if is_flow_monitor_body(r.peek_rest()) => {
                MultipartRequest::FlowMonitor(decode_requests(r)?)
            }
            _ => MultipartRequest::Other {
                mp_type,
                flags,
                body: Bytes::copy_from_slice(r.rest()),
            },
        };
        Ok(req)
    }
}

/// The group or meter a request asks about, and 4 bytes of padding.
fn decode_id(r: &mut Reader<'_>) -> Result<u32, DecodeError> {
    let id = r.u32()?;
    r.skip(4)?;
    Ok(id)
}

/// One flow of a flow stats reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 0, "flow stats entry");
        out.put_u16(0);
        out.put_u8(self.table_id);
        put_zeros(out, 1);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.priority);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.flags);
        put_zeros(out, 4);
        out.put_u64(self.cookie);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        self.match_.encode(out)?;
        encode_instructions(&self.instructions, out)?;
        slot.finish(out, false)?;
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut peek = Reader::new(r.peek_rest(), "flow stats");
        let length = usize::from(peek.u16()?);
        if length < 56 {
            return Err(DecodeError::BadLength {
                what: "flow stats entry",
                length,
                reason: "shorter than its fixed part and empty match (56 bytes)",
            });
        }
        let mut e = r.sub(length, "flow stats entry")?;
        e.skip(2)?;
        let table_id = e.u8()?;
        e.skip(1)?;
        let duration_sec = e.u32()?;
        let duration_nsec = e.u32()?;
        let priority = e.u16()?;
        let idle_timeout = e.u16()?;
        let hard_timeout = e.u16()?;
        let flags = e.u16()?;
        e.skip(4)?;
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie: e.u64()?,
            packet_count: e.u64()?,
            byte_count: e.u64()?,
            match_: Match::decode(&mut e)?,
            instructions: decode_instructions(&mut e)?,
        })
    }
}

/// The switch description (OFPMP_DESC reply).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Desc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

const DESC_STR_LEN: usize = 256;
const SERIAL_NUM_LEN: usize = 32;

impl Desc {
    fn encode(&self, out: &mut BytesMut) {
        put_fixed_str(out, &self.mfr_desc, DESC_STR_LEN);
        put_fixed_str(out, &self.hw_desc, DESC_STR_LEN);
        put_fixed_str(out, &self.sw_desc, DESC_STR_LEN);
        put_fixed_str(out, &self.serial_num, SERIAL_NUM_LEN);
        put_fixed_str(out, &self.dp_desc, DESC_STR_LEN);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Desc {
            mfr_desc: r.fixed_str(DESC_STR_LEN)?,
            hw_desc: r.fixed_str(DESC_STR_LEN)?,
            sw_desc: r.fixed_str(DESC_STR_LEN)?,
            serial_num: r.fixed_str(SERIAL_NUM_LEN)?,
            dp_desc: r.fixed_str(DESC_STR_LEN)?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartReplyBody {
    Flow(Vec<FlowStats>),
    GroupStats(Vec<GroupStats>),
    GroupDesc(Vec<GroupDesc>),
    MeterStats(Vec<MeterStats>),
    MeterConfig(Vec<MeterConfig>),
    MeterFeatures(MeterFeatures),
    PortDesc(Vec<Port>),
    Desc(Desc),
    /// ONF flow monitor updates (the initial dump, or changes as they happen).
    FlowMonitor(Vec<FlowUpdate>),
    Other {
        mp_type: u16,
        body: Bytes,
    },
}

/// One part of a multipart reply; `flags & OFPMPF_REPLY_MORE` says more parts follow.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartReply {
    pub flags: u16,
    pub body: MultipartReplyBody,
}

impl MultipartReply {
    pub fn more(&self) -> bool {
        self.flags & OFPMPF_REPLY_MORE != 0
    }

    pub fn mp_type(&self) -> u16 {
        match &self.body {
            MultipartReplyBody::Flow(_) => OFPMP_FLOW,
            MultipartReplyBody::GroupStats(_) => OFPMP_GROUP,
            MultipartReplyBody::GroupDesc(_) => OFPMP_GROUP_DESC,
            MultipartReplyBody::MeterStats(_) => OFPMP_METER,
            MultipartReplyBody::MeterConfig(_) => OFPMP_METER_CONFIG,
            MultipartReplyBody::MeterFeatures(_) => OFPMP_METER_FEATURES,
            MultipartReplyBody::PortDesc(_) => OFPMP_PORT_DESC,
            MultipartReplyBody::Desc(_) => OFPMP_DESC,
            MultipartReplyBody::FlowMonitor(_) => OFPMP_EXPERIMENTER,
            MultipartReplyBody::Other { mp_type, .. } => *mp_type,
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u16(self.mp_type());
        out.put_u16(self.flags);
        put_zeros(out, 4);
        match &self.body {
            MultipartReplyBody::Flow(flows) => flows.iter().try_for_each(|f| f.encode(out))?,
            MultipartReplyBody::GroupStats(groups) => {
                groups.iter().try_for_each(|g| g.encode(out))?
            }
            MultipartReplyBody::GroupDesc(groups) => {
                groups.iter().try_for_each(|g| g.encode(out))?
            }
            MultipartReplyBody::MeterStats(meters) => {
                meters.iter().try_for_each(|m| m.encode(out))?
            }
            MultipartReplyBody::MeterConfig(meters) => {
                meters.iter().try_for_each(|m| m.encode(out))?
            }
            MultipartReplyBody::MeterFeatures(features) => features.encode(out),
            MultipartReplyBody::PortDesc(ports) => ports.iter().for_each(|p| p.encode(out)),
            MultipartReplyBody::Desc(desc) => desc.encode(out),
            MultipartReplyBody::FlowMonitor(updates) => {
                encode_experimenter_header(out);
                for update in updates {
                    update.encode(out)?;
                }
            }
            MultipartReplyBody::Other { body, .. } => out.put_slice(body),
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mp_type = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let body = match mp_type {
            OFPMP_FLOW => {
                // A flow is rarely under 100 bytes: room for the part's flows without
                // regrowing, bounded by the bytes present.
                let mut flows = Vec::with_capacity(r.remaining() / 128);
                while !r.is_empty() {
                    flows.push(FlowStats::decode(r)?);
                }
                MultipartReplyBody::Flow(flows)
            }
            OFPMP_GROUP => MultipartReplyBody::GroupStats(entries(r, GroupStats::decode)?),
            OFPMP_GROUP_DESC => MultipartReplyBody::GroupDesc(entries(r, GroupDesc::decode)?),
            OFPMP_METER => MultipartReplyBody::MeterStats(entries(r, MeterStats::decode)?),
            OFPMP_METER_CONFIG => MultipartReplyBody::MeterConfig(entries(r, MeterConfig::decode)?),
            OFPMP_METER_FEATURES => MultipartReplyBody::MeterFeatures(MeterFeatures::decode(r)?),
            OFPMP_PORT_DESC => {
                if r.remaining() % OFP_PORT_LEN != 0 {
                    return Err(DecodeError::BadLength {
                        what: "port description reply",
                        length: r.remaining(),
                        reason: "not a multiple of the 64-byte port description",
                    });
                }
                let mut ports = Vec::new();
                while !r.is_empty() {
                    ports.push(Port::decode(r)?);
                }
                MultipartReplyBody::PortDesc(ports)
            }
            OFPMP_DESC => MultipartReplyBody::Desc(Desc::decode(r)?),
            OFPMP_EXPERIMENTER if is_flow_monitor_body(r.peek_rest()) => {
                MultipartReplyBody::FlowMonitor(decode_updates(r)?)
            }
            _ => MultipartReplyBody::Other {
                mp_type,
                body: Bytes::copy_from_slice(r.rest()),
            },
        };
        Ok(MultipartReply { flags, body })
    }
}

/// The entries of a reply body, each read by `decode`, until the body is exhausted.
fn entries<T>(
    r: &mut Reader<'_>,
    decode: fn(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(decode(r)?);
    }
    Ok(out)
}
