//! Flow monitoring as Open vSwitch offers it over OpenFlow 1.3: ONF extension 187, carried as
//! an experimenter multipart (`ONFST_FLOW_MONITOR`, experimenter `ONF_EXPERIMENTER_ID`, type
//! 1870) whose bodies use the Nicira flow monitor layout (`nx_flow_monitor_request`,
//! `nx_flow_update_*` in OVS's nicira-ext.h) with OXM matches and OpenFlow 1.3 instructions.
//!
//! The switch answers a request with the flows it already has (when `NXFMF_INITIAL` is set),
//! then keeps sending updates as unsolicited multipart replies (xid 0) for as long as the
//! connection lives. Changes made by the monitoring connection itself arrive abbreviated (just
//! the xid of the request that made them) unless `NXFMF_OWN` is set.

use bytes::{BufMut, BytesMut};

use crate::bundle::ONF_EXPERIMENTER_ID;
use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::oxm::Match;
use crate::wire::{put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError, OFPTT_ALL};

/// Multipart type of experimenter statistics.
pub const OFPMP_EXPERIMENTER: u16 = 0xffff;
/// ONF experimenter multipart type of the flow monitor (request and replies).
pub const ONFST_FLOW_MONITOR: u32 = 1870;
/// ONF experimenter messages about a flow monitor: the controller cancels one; the switch
/// says it stopped sending updates because the controller fell behind, and that it resumed.
pub const ONFT_FLOW_MONITOR_CANCEL: u32 = 1870;
pub const ONFT_FLOW_MONITOR_PAUSED: u32 = 1871;
pub const ONFT_FLOW_MONITOR_RESUMED: u32 = 1872;

/// `FlowMonitorRequest::flags`: what the switch reports.
pub const NXFMF_INITIAL: u16 = 1 << 0;
pub const NXFMF_ADD: u16 = 1 << 1;
pub const NXFMF_DELETE: u16 = 1 << 2;
pub const NXFMF_MODIFY: u16 = 1 << 3;
/// Include the instructions of added and modified flows.
pub const NXFMF_ACTIONS: u16 = 1 << 4;
/// Report this connection's own changes in full instead of abbreviated.
pub const NXFMF_OWN: u16 = 1 << 5;

/// "Any port" in a flow monitor request (OpenFlow 1.1+ port numbers).
pub const OFPP_ANY_PORT: u32 = 0xffff_ffff;

/// Fixed part of one request entry, before its match.
const REQUEST_FIXED_LEN: usize = 16;
/// Fixed part of a full update, before its match.
const UPDATE_FULL_FIXED_LEN: usize = 24;
/// An abbreviated update is exactly this long.
const UPDATE_ABBREV_LEN: usize = 8;

/// One flow monitor: which flows to watch and which of their changes to report.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowMonitorRequest {
    /// Chosen by the controller; distinguishes monitors of one connection.
    pub id: u32,
    /// `NXFMF_*`; at least one of ADD, DELETE, MODIFY.
    pub flags: u16,
    /// Only flows with an output to this port, or `OFPP_ANY_PORT`.
    pub out_port: u32,
    /// One table, or `OFPTT_ALL`.
    pub table_id: u8,
    /// Only flows this match covers (non-strictly); empty for all.
    pub match_: Match,
}

impl FlowMonitorRequest {
    /// Every added, deleted or modified flow of every table, with actions; own changes
    /// abbreviated; no initial dump.
    pub fn all_changes(id: u32) -> Self {
        FlowMonitorRequest {
            id,
            flags: NXFMF_ADD | NXFMF_DELETE | NXFMF_MODIFY | NXFMF_ACTIONS,
            out_port: OFPP_ANY_PORT,
            table_id: OFPTT_ALL,
            match_: Match::new(),
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let (match_bytes, match_len) = encoded_match(&self.match_)?;
        out.put_u32(self.id);
        out.put_u16(self.flags);
        out.put_u16(match_len);
        out.put_u32(self.out_port);
        out.put_u8(self.table_id);
        put_zeros(out, 3);
        out.put_slice(&match_bytes);
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = r.u32()?;
        let flags = r.u16()?;
        let match_len = usize::from(r.u16()?);
        let out_port = r.u32()?;
        let table_id = r.u8()?;
        r.skip(3)?;
        let match_ = decode_match(r, match_len, "flow monitor request")?;
        Ok(FlowMonitorRequest {
            id,
            flags,
            out_port,
            table_id,
            match_,
        })
    }
}

/// An encoded `ofp_match` and its own length field (its unpadded length), which the
/// structures around it repeat.
fn encoded_match(m: &Match) -> Result<(BytesMut, u16), EncodeError> {
    let mut bytes = BytesMut::new();
    m.encode(&mut bytes)?;
    let len = match bytes.get(2..4) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
        _ => 0,
    };
    Ok((bytes, len))
}

/// Reads an `ofp_match` whose unpadded length the enclosing structure states as `match_len`.
fn decode_match(
    r: &mut Reader<'_>,
    match_len: usize,
    what: &'static str,
) -> Result<Match, DecodeError> {
    let stated = r
        .peek_rest()
        .get(2..4)
        .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])));
    if stated != Some(match_len) {
        return Err(DecodeError::BadLength {
            what,
            length: match_len,
            reason: "match_len differs from the length in the match's own header",
        });
    }
    Match::decode(r)
}

/// What happened to a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowEvent {
    /// Added (also every flow of the initial dump).
    Added,
    Deleted,
    Modified,
}

const NXFME_ADDED: u16 = 0;
const NXFME_DELETED: u16 = 1;
const NXFME_MODIFIED: u16 = 2;
const NXFME_ABBREV: u16 = 3;

impl FlowEvent {
    fn to_wire(self) -> u16 {
        match self {
            FlowEvent::Added => NXFME_ADDED,
            FlowEvent::Deleted => NXFME_DELETED,
            FlowEvent::Modified => NXFME_MODIFIED,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FlowEvent::Added => "added",
            FlowEvent::Deleted => "deleted",
            FlowEvent::Modified => "modified",
        }
    }
}

/// A flow that was added, deleted or modified, as the switch now holds (or held) it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowChange {
    pub event: FlowEvent,
    /// For deletions, why (`OFPRR_*`: 0 idle timeout, 1 hard timeout, 2 delete, ...).
    pub reason: u16,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Match,
    /// Empty unless the monitor asked for `NXFMF_ACTIONS` (and never for deletions).
    pub instructions: Vec<Instruction>,
}

/// One update of a flow monitor reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FlowUpdate {
    Full(FlowChange),
    /// A change this connection made itself, named by the xid of the message that made it.
    Abbrev {
        xid: u32,
    },
}

impl FlowUpdate {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 0, "flow update");
        out.put_u16(0);
        match self {
            FlowUpdate::Abbrev { xid } => {
                out.put_u16(NXFME_ABBREV);
                out.put_u32(*xid);
            }
            FlowUpdate::Full(change) => {
                let (match_bytes, match_len) = encoded_match(&change.match_)?;
                out.put_u16(change.event.to_wire());
                out.put_u16(change.reason);
                out.put_u16(change.priority);
                out.put_u16(change.idle_timeout);
                out.put_u16(change.hard_timeout);
                out.put_u16(match_len);
                out.put_u8(change.table_id);
                put_zeros(out, 1);
                out.put_u64(change.cookie);
                out.put_slice(&match_bytes);
                encode_instructions(&change.instructions, out)?;
            }
        }
        slot.finish(out, false)?;
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut peek = Reader::new(r.peek_rest(), "flow update");
        let length = usize::from(peek.u16()?);
        let event = peek.u16()?;
        let (min, what) = match event {
            NXFME_ABBREV => (UPDATE_ABBREV_LEN, "abbreviated flow update"),
            _ => (UPDATE_FULL_FIXED_LEN + 8, "flow update"),
        };
        if length < min || (event == NXFME_ABBREV && length != UPDATE_ABBREV_LEN) {
            return Err(DecodeError::BadLength {
                what,
                length,
                reason: "does not fit the update's fixed part (8 bytes abbreviated, 32 full)",
            });
        }
        let mut u = r.sub(length, what)?;
        u.skip(4)?;
        let event = match event {
            NXFME_ABBREV => {
                return Ok(FlowUpdate::Abbrev { xid: u.u32()? });
            }
            NXFME_ADDED => FlowEvent::Added,
            NXFME_DELETED => FlowEvent::Deleted,
            NXFME_MODIFIED => FlowEvent::Modified,
            other => {
                return Err(DecodeError::BadValue {
                    what: "flow update event",
                    value: u64::from(other),
                })
            }
        };
        let reason = u.u16()?;
        let priority = u.u16()?;
        let idle_timeout = u.u16()?;
        let hard_timeout = u.u16()?;
        let match_len = usize::from(u.u16()?);
        let table_id = u.u8()?;
        u.skip(1)?;
        let cookie = u.u64()?;
        let match_ = decode_match(&mut u, match_len, "flow update")?;
        let instructions = decode_instructions(&mut u)?;
        Ok(FlowUpdate::Full(FlowChange {
            event,
            reason,
            priority,
            idle_timeout,
            hard_timeout,
            table_id,
            cookie,
            match_,
            instructions,
        }))
    }
}

/// Writes the experimenter header of a flow monitor multipart body.
pub(crate) fn encode_experimenter_header(out: &mut BytesMut) {
    out.put_u32(ONF_EXPERIMENTER_ID);
    out.put_u32(ONFST_FLOW_MONITOR);
}

/// Whether an experimenter multipart body (after the multipart header) is a flow monitor's.
pub(crate) fn is_flow_monitor_body(body: &[u8]) -> bool {
    let mut r = Reader::new(body, "experimenter multipart");
    matches!(
        (r.u32(), r.u32()),
        (Ok(ONF_EXPERIMENTER_ID), Ok(ONFST_FLOW_MONITOR))
    )
}

/// The request entries of a flow monitor body (experimenter header included).
pub(crate) fn decode_requests(r: &mut Reader<'_>) -> Result<Vec<FlowMonitorRequest>, DecodeError> {
    r.skip(8)?;
    let mut requests = Vec::new();
    while !r.is_empty() {
        if r.remaining() < REQUEST_FIXED_LEN {
            return Err(DecodeError::Truncated {
                what: "flow monitor request",
                needed: REQUEST_FIXED_LEN,
                available: r.remaining(),
            });
        }
        requests.push(FlowMonitorRequest::decode(r)?);
    }
    Ok(requests)
}

/// The updates of a flow monitor reply body (experimenter header included).
pub(crate) fn decode_updates(r: &mut Reader<'_>) -> Result<Vec<FlowUpdate>, DecodeError> {
    r.skip(8)?;
    let mut updates = Vec::new();
    while !r.is_empty() {
        updates.push(FlowUpdate::decode(r)?);
    }
    Ok(updates)
}
