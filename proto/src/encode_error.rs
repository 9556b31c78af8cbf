//! The error every encoder returns for a value the wire cannot carry.

use crate::field::FieldRange;

/// Why a value cannot be encoded. An encoder never writes a value other than the one it was
/// given: a structure longer than its 16-bit length field can say, a number wider than its
/// wire field, a bit range an NX action cannot address are refused, not cut, wrapped or capped
/// into a different value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// OpenFlow lengths are 16-bit: a structure (a whole message, an instruction, an action, a
    /// bucket) longer than 65535 bytes has no honest length field.
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
    /// A number its wire field cannot hold as it is (a 32-bit port in a 16-bit field, a value
    /// wider than the field it sets): writing it would send another value.
    #[error("{what}: {value:#x} cannot be sent: {reason}")]
    BadValue {
        what: &'static str,
        value: u128,
        reason: &'static str,
    },
    /// A bit range an NX action cannot address: empty, outside its field, wider than the
    /// action's 64 bits, or (move) not as wide as the other end.
    #[error("{what}: `{range}` (offset {}, {} bits) cannot be sent: {reason}", range.ofs, range.n_bits)]
    BadFieldRange {
        what: &'static str,
        range: FieldRange,
        reason: &'static str,
    },
    /// `conjunction(id,k/n)` needs 1 <= k <= n and 2 <= n <= 64 (on the wire k is 0-based, so
    /// k = 0 would go out as clause 256).
    #[error("conjunction({id},{clause}/{n_clauses}) cannot be sent: the clause is 1 to the number of clauses, which is 2 to 64")]
    BadConjunction { id: u32, clause: u8, n_clauses: u8 },
    /// A structure kept verbatim (an unknown action or instruction) whose own length field
    /// does not equal its bytes, or is no multiple of 8.
    #[error("{what}: its length field says {stated} but it is {actual} bytes (a multiple of 8 of at least 8 is needed)")]
    RawLength {
        what: &'static str,
        stated: usize,
        actual: usize,
    },
}
