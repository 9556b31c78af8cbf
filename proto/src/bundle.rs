//! ONF EXT-230 bundles for OpenFlow 1.3: experimenter messages ONFT_BUNDLE_CONTROL (2300) and
//! ONFT_BUNDLE_ADD_MESSAGE (2301) of experimenter 0x4F4E4600, with the OpenFlow 1.4 bodies.

use std::ops::{BitAnd, BitOr};

use bytes::{BufMut, Bytes, BytesMut};

use crate::wire::{put_zeros, Reader};
use crate::{DecodeError, EncodeError, Message};

pub const ONF_EXPERIMENTER_ID: u32 = 0x4f4e_4600;
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;

/// Bundle flags (OFPBF_*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BundleFlags(pub u16);

impl BundleFlags {
    pub const NONE: BundleFlags = BundleFlags(0);
    pub const ATOMIC: BundleFlags = BundleFlags(1);
    pub const ORDERED: BundleFlags = BundleFlags(2);

    pub fn contains(self, other: BundleFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for BundleFlags {
    type Output = BundleFlags;
    fn bitor(self, rhs: BundleFlags) -> BundleFlags {
        BundleFlags(self.0 | rhs.0)
    }
}

impl BitAnd for BundleFlags {
    type Output = BundleFlags;
    fn bitand(self, rhs: BundleFlags) -> BundleFlags {
        BundleFlags(self.0 & rhs.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BundleCtrlType {
    OpenRequest,
    OpenReply,
    CloseRequest,
    CloseReply,
    CommitRequest,
    CommitReply,
    DiscardRequest,
    DiscardReply,
}

/// The control types in wire order (OFPBCT_* values are the indexes).
const CTRL_TYPES: [BundleCtrlType; 8] = [
    BundleCtrlType::OpenRequest,
    BundleCtrlType::OpenReply,
    BundleCtrlType::CloseRequest,
    BundleCtrlType::CloseReply,
    BundleCtrlType::CommitRequest,
    BundleCtrlType::CommitReply,
    BundleCtrlType::DiscardRequest,
    BundleCtrlType::DiscardReply,
];

impl BundleCtrlType {
    pub fn to_u16(self) -> u16 {
        CTRL_TYPES.iter().position(|t| *t == self).unwrap_or(0) as u16
    }

    pub fn from_u16(v: u16) -> Option<Self> {
        CTRL_TYPES.get(usize::from(v)).copied()
    }

    /// The reply a switch sends to this request (`None` for replies).
    pub fn reply(self) -> Option<BundleCtrlType> {
        let v = self.to_u16();
        (v % 2 == 0).then(|| CTRL_TYPES[usize::from(v) + 1])
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleControl {
    pub bundle_id: u32,
    pub ctrl_type: BundleCtrlType,
    pub flags: BundleFlags,
    /// Bundle properties, raw (none are needed for OVS).
    pub properties: Bytes,
}

impl BundleControl {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_u32(ONF_EXPERIMENTER_ID);
        out.put_u32(ONFT_BUNDLE_CONTROL);
        out.put_u32(self.bundle_id);
        out.put_u16(self.ctrl_type.to_u16());
        out.put_u16(self.flags.0);
        out.put_slice(&self.properties);
    }

    /// Decodes the body after the experimenter id and type.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let bundle_id = r.u32()?;
        let raw_type = r.u16()?;
        let ctrl_type = BundleCtrlType::from_u16(raw_type).ok_or(DecodeError::BadValue {
            what: "bundle control type",
            value: u64::from(raw_type),
        })?;
        Ok(BundleControl {
            bundle_id,
            ctrl_type,
            flags: BundleFlags(r.u16()?),
            properties: Bytes::copy_from_slice(r.rest()),
        })
    }
}

fn encode_add_body(
    bundle_id: u32,
    flags: BundleFlags,
    message: &Message,
    xid: u32,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    put_add_prefix(bundle_id, flags, out);
    message.try_encode(xid, out)
}

/// A whole OFPT_EXPERIMENTER message: the header (its length filled in at the end) and `body`.
/// Refused, with `out` as it was, when the frame does not fit its 16-bit length: the inner
/// message may fit on its own while the add around it (16 bytes more) does not.
fn encode_experimenter_frame(
    xid: u32,
    out: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let slot = crate::wire::LengthSlot::new(out, 2, "bundle add message");
    crate::Header {
        version: crate::OFP_VERSION,
        msg_type: crate::OFPT_EXPERIMENTER,
        length: 0,
        xid,
    }
    .encode(out);
    let result = body(out).and_then(|()| slot.finish(out, false).map(|_| ()));
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Bytes a bundle add puts around its inner message: the OpenFlow header, experimenter id
/// and type, bundle id, padding and flags.
pub const BUNDLE_ADD_OVERHEAD: usize = crate::OFP_HEADER_LEN + 16;

/// The longest message a bundle add can carry (its frame is then exactly 65535 bytes).
pub const MAX_BUNDLED_MESSAGE_LEN: usize = u16::MAX as usize - BUNDLE_ADD_OVERHEAD;

/// What a bundle add carries before its inner message.
fn put_add_prefix(bundle_id: u32, flags: BundleFlags, out: &mut BytesMut) {
    out.put_u32(ONF_EXPERIMENTER_ID);
    out.put_u32(ONFT_BUNDLE_ADD_MESSAGE);
    out.put_u32(bundle_id);
    put_zeros(out, 2);
    out.put_u16(flags.0);
}

/// Adds `message` to bundle `bundle_id`. On the wire the inner message carries the add
/// message's own xid, as OVS requires; bytes after the inner message (properties) are not kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: BundleFlags,
    pub message: Box<Message>,
}

impl BundleAdd {
    pub(crate) fn encode(&self, xid: u32, out: &mut BytesMut) -> Result<(), EncodeError> {
        encode_add_body(self.bundle_id, self.flags, &self.message, xid, out)
    }

    /// Encodes a whole bundle add message (header included) around a borrowed inner message,
    /// without building a `BundleAdd`: the same bytes as
    /// `Message::BundleAdd(BundleAdd { bundle_id, flags, message }).try_encode(xid, out)`.
    pub fn encode_borrowed(
        bundle_id: u32,
        flags: BundleFlags,
        message: &Message,
        xid: u32,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        encode_experimenter_frame(xid, out, |out| {
            encode_add_body(bundle_id, flags, message, xid, out)
        })
    }

    /// Encodes a whole bundle add message around an inner message that is already encoded
    /// (`frame`: exactly one OpenFlow message), giving it the add's own xid: the same bytes as
    /// [`BundleAdd::encode_borrowed`] with `frame` decoded, without decoding it.
    pub fn encode_framed(
        bundle_id: u32,
        flags: BundleFlags,
        frame: &[u8],
        xid: u32,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        let stated = crate::Header::parse(frame)
            .ok()
            .map(|h| usize::from(h.length));
        let (Some(body), true) = (
            frame.get(crate::OFP_HEADER_LEN..),
            stated == Some(frame.len()),
        ) else {
            return Err(EncodeError::NotOneMessage {
                length: frame.len(),
                stated,
            });
        };
        encode_experimenter_frame(xid, out, |out| {
            put_add_prefix(bundle_id, flags, out);
            // The header with the add's xid, then the body as it is.
            out.put_slice(&frame[..4]);
            out.put_u32(xid);
            out.put_slice(body);
            Ok(())
        })
    }

    /// Decodes the body after the experimenter id and type; `xid` is the outer message's.
    pub(crate) fn decode(r: &mut Reader<'_>, xid: u32) -> Result<Self, DecodeError> {
        let bundle_id = r.u32()?;
        r.skip(2)?;
        let flags = BundleFlags(r.u16()?);
        let inner = crate::Header::parse(r.peek_rest())?;
        let frame = r.take(usize::from(inner.length))?;
        r.rest();
        let (inner_xid, message) = crate::message::decode_inner(frame, r.is_lenient())?;
        if inner_xid != xid {
            return Err(DecodeError::BundleXidMismatch {
                outer: xid,
                inner: inner_xid,
            });
        }
        Ok(BundleAdd {
            bundle_id,
            flags,
            message: Box::new(message),
        })
    }
}
