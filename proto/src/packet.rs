//! PACKET_IN and PACKET_OUT.

use bytes::{BufMut, Bytes, BytesMut};

use crate::action::{decode_actions, encode_actions, Action};
use crate::oxm::Match;
use crate::wire::{put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Match,
    pub data: Bytes,
}

impl PacketIn {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u32(self.buffer_id);
        out.put_u16(self.total_len);
        out.put_u8(self.reason);
        out.put_u8(self.table_id);
        out.put_u64(self.cookie);
        self.match_.encode(out)?;
        put_zeros(out, 2);
        out.put_slice(&self.data);
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let match_ = Match::decode(r)?;
        r.skip(2)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            match_,
            data: Bytes::copy_from_slice(r.rest()),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Bytes,
}

impl PacketOut {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u32(self.buffer_id);
        out.put_u32(self.in_port);
        let slot = LengthSlot::new(out, 0, "packet_out actions");
        out.put_u16(0);
        put_zeros(out, 6);
        let actions_start = out.len();
        encode_actions(&self.actions, out)?;
        slot.patch(out, out.len() - actions_start)?;
        out.put_slice(&self.data);
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let buffer_id = r.u32()?;
        let in_port = r.u32()?;
        let actions_len = usize::from(r.u16()?);
        r.skip(6)?;
        let mut actions = r.sub(actions_len, "packet_out actions")?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            actions: decode_actions(&mut actions)?,
            data: Bytes::copy_from_slice(r.rest()),
        })
    }
}
