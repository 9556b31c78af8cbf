//! What the proxy reads off the wire: whole OpenFlow messages, with just enough decoding to
//! recognise the ones a test asks about (bundle control and add, flow mods, barriers,
//! multipart replies). Deliberately independent of ofnode's codec: the proxy is a witness.

use std::io::Read;

/// OpenFlow 1.3 message types the proxy names (ofp_type).
pub mod msg_type {
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FLOW_MOD: u8 = 14;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
}

const HEADER_LEN: usize = 8;
/// ONF's experimenter id and its bundle message types (EXT-230).
const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;
const ONFT_BUNDLE_CONTROL: u32 = 2300;
const ONFT_BUNDLE_ADD: u32 = 2301;
/// OFPMPF_REPLY_MORE.
const REPLY_MORE: u16 = 1;

/// Which way a message went through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the controller (ofnode) to the switch.
    ToSwitch,
    /// From the switch to the controller.
    ToController,
}

/// ONF bundle control types (OFPBCT_*), in wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleCtrl {
    OpenRequest,
    OpenReply,
    CloseRequest,
    CloseReply,
    CommitRequest,
    CommitReply,
    DiscardRequest,
    DiscardReply,
}

impl BundleCtrl {
    fn from_u16(value: u16) -> Option<BundleCtrl> {
        use BundleCtrl::*;
        [
            OpenRequest,
            OpenReply,
            CloseRequest,
            CloseReply,
            CommitRequest,
            CommitReply,
            DiscardRequest,
            DiscardReply,
        ]
        .get(usize::from(value))
        .copied()
    }
}

/// One OpenFlow message as it passed, with the connection it belongs to (numbered from 1 in
/// the order the proxy accepted them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub conn: usize,
    pub direction: Direction,
    pub bytes: Vec<u8>,
}

impl Frame {
    pub fn msg_type(&self) -> u8 {
        self.bytes[1]
    }

    pub fn xid(&self) -> u32 {
        be32(&self.bytes[4..8])
    }

    /// The bundle id and control type of a bundle control message.
    pub fn bundle_ctrl(&self) -> Option<(u32, BundleCtrl)> {
        let body = self.onf_body(ONFT_BUNDLE_CONTROL)?;
        let ctrl = BundleCtrl::from_u16(be16(body.get(4..6)?))?;
        Some((be32(body.get(0..4)?), ctrl))
    }

    /// The bundle id and the inner message's type of a bundle add message.
    pub fn bundle_add(&self) -> Option<(u32, u8)> {
        let body = self.onf_body(ONFT_BUNDLE_ADD)?;
        let inner_type = *body.get(8 + 1)?;
        Some((be32(body.get(0..4)?), inner_type))
    }

    /// True for a bundle control message of this type.
    pub fn is_bundle_ctrl(&self, ctrl: BundleCtrl) -> bool {
        self.bundle_ctrl().is_some_and(|(_, c)| c == ctrl)
    }

    /// True for an OFPT_FLOW_MOD sent on its own (not inside a bundle).
    pub fn is_flow_mod(&self) -> bool {
        self.msg_type() == msg_type::FLOW_MOD
    }

    pub fn is_barrier_reply(&self) -> bool {
        self.msg_type() == msg_type::BARRIER_REPLY
    }

    pub fn is_barrier_request(&self) -> bool {
        self.msg_type() == msg_type::BARRIER_REQUEST
    }

    /// For a multipart reply: whether more parts follow (OFPMPF_REPLY_MORE).
    pub fn multipart_more(&self) -> Option<bool> {
        (self.msg_type() == msg_type::MULTIPART_REPLY)
            .then(|| self.bytes.get(10..12).map(|f| be16(f) & REPLY_MORE != 0))
            .flatten()
    }

    /// The body after the experimenter header, when this is an ONF message of `exp_type`.
    fn onf_body(&self, exp_type: u32) -> Option<&[u8]> {
        if self.msg_type() != msg_type::EXPERIMENTER {
            return None;
        }
        let experimenter = be32(self.bytes.get(8..12)?);
        let kind = be32(self.bytes.get(12..16)?);
        (experimenter == ONF_EXPERIMENTER && kind == exp_type).then(|| &self.bytes[16..])
    }
}

fn be16(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[0], bytes[1]])
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// Reads one whole message; `None` at a clean end of stream, an error for a broken one (a
/// length below the header's own size counts as broken: the proxy never forwards garbage it
/// did not inject itself).
pub(crate) fn read_message(stream: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; HEADER_LEN];
    match stream.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = usize::from(be16(&header[2..4]));
    if length < HEADER_LEN {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("OpenFlow length {length} is below the 8-byte header"),
        ));
    }
    let mut bytes = vec![0u8; length];
    bytes[..HEADER_LEN].copy_from_slice(&header);
    stream.read_exact(&mut bytes[HEADER_LEN..])?;
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: &[u8]) -> Frame {
        Frame {
            conn: 1,
            direction: Direction::ToSwitch,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn recognises_bundle_messages() {
        // A bundle control COMMIT_REQUEST of bundle 7 (flags atomic|ordered), xid 0x2a.
        let commit = [
            4, 4, 0, 24, 0, 0, 0, 0x2a, 0x4f, 0x4e, 0x46, 0, 0, 0, 0x08, 0xfc, 0, 0, 0, 7, 0, 4, 0,
            3,
        ];
        let commit = frame(&commit);
        assert_eq!(commit.xid(), 0x2a);
        assert_eq!(commit.bundle_ctrl(), Some((7, BundleCtrl::CommitRequest)));
        assert!(commit.bundle_add().is_none());
        // A bundle add of bundle 7 carrying a (truncated for the test) flow mod header.
        let add = [
            4, 4, 0, 32, 0, 0, 0, 0x2b, 0x4f, 0x4e, 0x46, 0, 0, 0, 0x08, 0xfd, 0, 0, 0, 7, 0, 0, 0,
            3, 4, 14, 0, 8, 0, 0, 0, 0x2b,
        ];
        assert_eq!(frame(&add).bundle_add(), Some((7, msg_type::FLOW_MOD)));
    }

    #[test]
    fn reads_whole_messages_and_refuses_short_lengths() {
        let mut two = &[4u8, 21, 0, 8, 0, 0, 0, 1, 4, 20, 0, 8, 0, 0, 0, 2][..];
        assert_eq!(read_message(&mut two).unwrap().unwrap()[1], 21);
        assert_eq!(read_message(&mut two).unwrap().unwrap()[1], 20);
        assert!(read_message(&mut two).unwrap().is_none());
        let mut short = &[4u8, 0, 0, 4, 0, 0, 0, 1][..];
        assert!(read_message(&mut short).is_err());
    }
}
