//! Framing: split a byte stream into whole OpenFlow messages.
//!
//! Every OpenFlow message starts with the 8-byte header whose big-endian u16 at offset 2 is the
//! length of the whole message, header included. The framer only looks at that length; decoding
//! the message is the proto crate's job. A length below 8 can never be valid and one above the
//! configured maximum is refused before any byte of it is buffered, so a peer cannot make us
//! allocate more than `max_frame_len`.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// The size of the OpenFlow header every message starts with.
pub const HEADER_LEN: usize = 8;

/// Where the big-endian u16 length sits in the header.
const LENGTH_OFFSET: usize = 2;

/// The largest frame a u16 length can describe.
pub const MAX_FRAME_LEN: usize = u16::MAX as usize;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("OpenFlow header claims length {length}, less than the {HEADER_LEN}-byte header itself (header bytes {header:02x?})")]
    TooShort {
        length: usize,
        header: [u8; HEADER_LEN],
    },
    #[error("OpenFlow message length {length} exceeds the limit of {max} bytes")]
    TooLong { length: usize, max: usize },
    #[error("connection closed in the middle of a message: have {have} of {length} bytes")]
    Truncated { have: usize, length: usize },
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// A `tokio_util` decoder yielding each OpenFlow message as one `Bytes` (header included).
#[derive(Debug, Clone)]
pub struct OfFramer {
    max_frame_len: usize,
}

impl OfFramer {
    /// `max_frame_len` is clamped to what the u16 length can express and to at least a header.
    pub fn new(max_frame_len: usize) -> OfFramer {
        OfFramer {
            max_frame_len: max_frame_len.clamp(HEADER_LEN, MAX_FRAME_LEN),
        }
    }
}

impl Default for OfFramer {
    fn default() -> Self {
        OfFramer::new(MAX_FRAME_LEN)
    }
}

/// The length field of a header; `None` while fewer than 8 bytes are buffered.
fn frame_length(buf: &[u8]) -> Option<(usize, [u8; HEADER_LEN])> {
    let header: [u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
    let length = u16::from_be_bytes([header[LENGTH_OFFSET], header[LENGTH_OFFSET + 1]]);
    Some((usize::from(length), header))
}

impl Decoder for OfFramer {
    type Item = Bytes;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some((length, header)) = frame_length(src) else {
            src.reserve(HEADER_LEN);
            return Ok(None);
        };
        if length < HEADER_LEN {
            return Err(FrameError::TooShort { length, header });
        }
        if length > self.max_frame_len {
            return Err(FrameError::TooLong {
                length,
                max: self.max_frame_len,
            });
        }
        if src.len() < length {
            // Bounded by the checks above: at most max_frame_len.
            src.reserve(length - src.len());
            return Ok(None);
        }
        Ok(Some(src.split_to(length).freeze()))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Truncated {
                have: src.len(),
                length: frame_length(src).map_or(HEADER_LEN, |(length, _)| length),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OFPT_HELLO with no elements, as ovs-ofctl sends it (`ovs-ofctl ofp-print 0400000800000001`).
    const HELLO: [u8; 8] = [0x04, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01];
    /// An OFPT_ECHO_REQUEST carrying 4 bytes of payload.
    const ECHO: [u8; 12] = [0x04, 0x02, 0x00, 0x0c, 0, 0, 0, 2, 0xde, 0xad, 0xbe, 0xef];

    fn decode_all(framer: &mut OfFramer, bytes: &[u8]) -> Result<Vec<Bytes>, FrameError> {
        let mut buf = BytesMut::from(bytes);
        let mut frames = Vec::new();
        while let Some(frame) = framer.decode(&mut buf)? {
            frames.push(frame);
        }
        if let Some(frame) = framer.decode_eof(&mut buf)? {
            frames.push(frame);
        }
        Ok(frames)
    }

    #[test]
    fn splits_back_to_back_messages() {
        let mut stream = HELLO.to_vec();
        stream.extend_from_slice(&ECHO);
        stream.extend_from_slice(&HELLO);
        let frames = decode_all(&mut OfFramer::default(), &stream).unwrap();
        assert_eq!(frames, vec![&HELLO[..], &ECHO[..], &HELLO[..]]);
    }

    #[test]
    fn waits_for_the_rest_of_a_message_fed_byte_by_byte() {
        let mut framer = OfFramer::default();
        let mut buf = BytesMut::new();
        for (i, byte) in ECHO.iter().enumerate() {
            assert!(
                framer.decode(&mut buf).unwrap().is_none(),
                "early frame at {i}"
            );
            buf.extend_from_slice(&[*byte]);
        }
        assert_eq!(framer.decode(&mut buf).unwrap().unwrap(), &ECHO[..]);
        assert!(buf.is_empty());
    }

    #[test]
    fn refuses_a_length_below_the_header() {
        let mut bad = HELLO;
        bad[3] = 7;
        let err = decode_all(&mut OfFramer::default(), &bad).unwrap_err();
        assert!(
            matches!(err, FrameError::TooShort { length: 7, .. }),
            "{err}"
        );
        bad[3] = 0;
        let err = decode_all(&mut OfFramer::default(), &bad).unwrap_err();
        assert!(
            matches!(err, FrameError::TooShort { length: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn refuses_a_length_above_the_limit_before_buffering_it() {
        let mut framer = OfFramer::new(1024);
        let mut buf = BytesMut::from(&[0x04, 0x0a, 0x04, 0x01, 0, 0, 0, 9][..]);
        let err = framer.decode(&mut buf).unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::TooLong {
                    length: 1025,
                    max: 1024
                }
            ),
            "{err}"
        );
        assert!(buf.capacity() < 1025, "reserved {} bytes", buf.capacity());
    }

    #[test]
    fn a_length_larger_than_the_data_is_an_error_at_eof() {
        let mut stream = ECHO.to_vec();
        stream[3] = 200;
        let err = decode_all(&mut OfFramer::default(), &stream).unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::Truncated {
                    have: 12,
                    length: 200
                }
            ),
            "{err}"
        );
        let err = decode_all(&mut OfFramer::default(), &ECHO[..5]).unwrap_err();
        assert!(
            matches!(err, FrameError::Truncated { have: 5, length: 8 }),
            "{err}"
        );
    }

    #[test]
    fn limit_is_clamped_to_what_a_header_can_say() {
        assert_eq!(OfFramer::new(0).max_frame_len, HEADER_LEN);
        assert_eq!(OfFramer::new(1 << 20).max_frame_len, MAX_FRAME_LEN);
    }
}
