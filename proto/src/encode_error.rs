//! The error every encoder returns for a value the wire cannot carry.

/// Why a value cannot be encoded. OpenFlow lengths are 16-bit: a structure (a whole message,
/// an instruction, an action, a bucket) longer than 65535 bytes has no honest length field, so
/// it is refused rather than sent with a length that lies about the bytes that follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("{what} would be {length} bytes; its 16-bit length field holds at most {max}")]
    TooLong {
        what: &'static str,
        length: usize,
        max: usize,
    },
    #[error(
        "bundled message: {length} bytes given, but they are not the one OpenFlow message \
         their header describes (header length {stated:?})"
    )]
    NotOneMessage {
        length: usize,
        stated: Option<usize>,
    },
}
