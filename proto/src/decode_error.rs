//! The error every decoder returns for bytes it cannot accept.

/// Why a byte string is not a valid OpenFlow 1.3 message (or part of one). Each variant names
/// the structure being read so a log line says where the peer's bytes went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{what}: needs {needed} more bytes but only {available} remain")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("{what}: length {length} is invalid: {reason}")]
    BadLength {
        what: &'static str,
        length: usize,
        reason: &'static str,
    },
    #[error("{what}: {count} bytes left over after the last element")]
    TrailingBytes { what: &'static str, count: usize },
    #[error("unsupported OpenFlow version {0:#04x}: ofnode speaks only 0x04 (OpenFlow 1.3)")]
    BadVersion(u8),
    #[error("{what}: invalid value {value:#x}")]
    BadValue { what: &'static str, value: u64 },
    #[error("instructions: type {inst_type} appears twice")]
    DuplicateInstruction { inst_type: u16 },
    #[error("match: field {field} appears twice")]
    DuplicateField { field: crate::Field },
    #[error("match: field {field} has 1-bits in its value where its mask has 0-bits")]
    BadWildcards { field: crate::Field },
    #[error("match: field {field} cannot be matched under mask {mask:#x} (it is matched exactly or not at all)")]
    BadMask { field: crate::Field, mask: u128 },
    #[error("{what}: {value:#x} is not a valid value of {field}")]
    BadFieldValue {
        what: &'static str,
        field: crate::Field,
        value: u128,
    },
    #[error("match: field {field} needs `{needs}` before it in the match (prerequisite)")]
    MissingPrerequisite {
        field: crate::Field,
        needs: &'static str,
    },
    #[error("{what}: bit range offset {ofs} + {n_bits} bits does not fit field {field}")]
    BadFieldRange {
        what: &'static str,
        field: crate::Field,
        ofs: u16,
        n_bits: u16,
    },
    #[error(
        "bundle add: inner message xid {inner:#x} differs from the add message's xid {outer:#x}"
    )]
    BundleXidMismatch { outer: u32, inner: u32 },
    #[error("bundle add: a bundle message cannot be nested inside another bundle message")]
    NestedBundle,
}
