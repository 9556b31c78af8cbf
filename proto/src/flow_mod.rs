//! OFPT_FLOW_MOD.

use bytes::{BufMut, BytesMut};

use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::oxm::Match;
use crate::wire::{put_zeros, Reader};
use crate::{DecodeError, EncodeError, OFPG_ANY, OFPP_ANY};

/// "All tables" for deletes and flow stats requests.
pub const OFPTT_ALL: u8 = 0xff;
/// No buffered packet to apply the flow_mod to.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// The priority ovs-ofctl uses when a flow gives none.
pub const OFP_DEFAULT_PRIORITY: u16 = 0x8000;

pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;
pub const OFPFF_NO_PKT_COUNTS: u16 = 1 << 3;
pub const OFPFF_NO_BYT_COUNTS: u16 = 1 << 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowModCommand {
    Add,
    Modify,
    ModifyStrict,
    Delete,
    DeleteStrict,
}

impl FlowModCommand {
    pub fn to_u8(self) -> u8 {
        match self {
            FlowModCommand::Add => 0,
            FlowModCommand::Modify => 1,
            FlowModCommand::ModifyStrict => 2,
            FlowModCommand::Delete => 3,
            FlowModCommand::DeleteStrict => 4,
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => FlowModCommand::Add,
            1 => FlowModCommand::Modify,
            2 => FlowModCommand::ModifyStrict,
            3 => FlowModCommand::Delete,
            4 => FlowModCommand::DeleteStrict,
            _ => return None,
        })
    }

    pub fn is_delete(self) -> bool {
        matches!(self, FlowModCommand::Delete | FlowModCommand::DeleteStrict)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: FlowModCommand,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

/// Bytes of `ofp_flow_mod` between the header and the match.
const FLOW_MOD_FIXED_LEN: usize = 40;

impl FlowMod {
    /// A flow_mod with ovs-ofctl's defaults: priority 32768, no buffer, out_port/out_group
    /// ANY, table 0 — or all tables (255) for deletes.
    pub fn new(command: FlowModCommand) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: if command.is_delete() { OFPTT_ALL } else { 0 },
            command,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: OFP_DEFAULT_PRIORITY,
            buffer_id: NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            match_: Match::new(),
            instructions: Vec::new(),
        }
    }

    /// Writes the body (everything after the OpenFlow header).
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        out.put_u8(self.table_id);
        out.put_u8(self.command.to_u8());
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.priority);
        out.put_u32(self.buffer_id);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_u16(self.flags);
        put_zeros(out, 2);
        self.match_.encode(out)?;
        encode_instructions(&self.instructions, out)
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<FlowMod, DecodeError> {
        let mut fixed = r.sub(FLOW_MOD_FIXED_LEN, "flow_mod")?;
        let cookie = fixed.u64()?;
        let cookie_mask = fixed.u64()?;
        let table_id = fixed.u8()?;
        let raw_command = fixed.u8()?;
        let command = FlowModCommand::from_u8(raw_command).ok_or(DecodeError::BadValue {
            what: "flow_mod command",
            value: u64::from(raw_command),
        })?;
        let fm = FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout: fixed.u16()?,
            hard_timeout: fixed.u16()?,
            priority: fixed.u16()?,
            buffer_id: fixed.u32()?,
            out_port: fixed.u32()?,
            out_group: fixed.u32()?,
            flags: fixed.u16()?,
            match_: Match::decode(r)?,
            instructions: decode_instructions(r)?,
        };
        Ok(fm)
    }
}
