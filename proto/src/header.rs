//! The 8-byte OpenFlow header and message type numbers.

use bytes::{BufMut, BytesMut};

use crate::wire::Reader;
use crate::DecodeError;

/// OpenFlow 1.3.
pub const OFP_VERSION: u8 = 0x04;
pub const OFP_HEADER_LEN: usize = 8;

pub const OFPT_HELLO: u8 = 0;
pub const OFPT_ERROR: u8 = 1;
pub const OFPT_ECHO_REQUEST: u8 = 2;
pub const OFPT_ECHO_REPLY: u8 = 3;
pub const OFPT_EXPERIMENTER: u8 = 4;
pub const OFPT_FEATURES_REQUEST: u8 = 5;
pub const OFPT_FEATURES_REPLY: u8 = 6;
pub const OFPT_GET_CONFIG_REQUEST: u8 = 7;
pub const OFPT_GET_CONFIG_REPLY: u8 = 8;
pub const OFPT_SET_CONFIG: u8 = 9;
pub const OFPT_PACKET_IN: u8 = 10;
pub const OFPT_FLOW_REMOVED: u8 = 11;
pub const OFPT_PORT_STATUS: u8 = 12;
pub const OFPT_PACKET_OUT: u8 = 13;
pub const OFPT_FLOW_MOD: u8 = 14;
pub const OFPT_GROUP_MOD: u8 = 15;
pub const OFPT_PORT_MOD: u8 = 16;
pub const OFPT_MULTIPART_REQUEST: u8 = 18;
pub const OFPT_MULTIPART_REPLY: u8 = 19;
pub const OFPT_BARRIER_REQUEST: u8 = 20;
pub const OFPT_BARRIER_REPLY: u8 = 21;
pub const OFPT_ROLE_REQUEST: u8 = 24;
pub const OFPT_ROLE_REPLY: u8 = 25;
pub const OFPT_GET_ASYNC_REQUEST: u8 = 26;
pub const OFPT_GET_ASYNC_REPLY: u8 = 27;
pub const OFPT_SET_ASYNC: u8 = 28;
pub const OFPT_METER_MOD: u8 = 29;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    pub version: u8,
    pub msg_type: u8,
    /// Length of the whole message, header included.
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// Parses the first 8 bytes of `buf`; fails if fewer are present or the length field is
    /// smaller than the header itself (which would make framing loop forever).
    pub fn parse(buf: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(buf, "OpenFlow header");
        let header = Header {
            version: r.u8()?,
            msg_type: r.u8()?,
            length: r.u16()?,
            xid: r.u32()?,
        };
        if usize::from(header.length) < OFP_HEADER_LEN {
            return Err(DecodeError::BadLength {
                what: "OpenFlow header",
                length: usize::from(header.length),
                reason: "shorter than the 8-byte header",
            });
        }
        Ok(header)
    }

    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.version);
        out.put_u8(self.msg_type);
        out.put_u16(self.length);
        out.put_u32(self.xid);
    }
}

/// The length of the message at the start of `buf` (from its header), or `None` when fewer
/// than 8 bytes are buffered or the header is invalid — for stream framing.
pub fn message_length(buf: &[u8]) -> Option<usize> {
    Header::parse(buf).ok().map(|h| usize::from(h.length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_length() {
        let h = Header::parse(&[4, 0, 0, 16, 0, 0, 0, 1]).unwrap();
        assert_eq!(
            h,
            Header {
                version: 4,
                msg_type: 0,
                length: 16,
                xid: 1
            }
        );
        assert!(Header::parse(&[4, 0, 0, 7, 0, 0, 0, 1]).is_err());
        assert!(Header::parse(&[4, 0, 0]).is_err());
        assert_eq!(message_length(&[4, 0, 0, 16, 0, 0, 0, 1, 9]), Some(16));
        assert_eq!(message_length(&[4, 0]), None);
    }
}
