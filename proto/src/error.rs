//! OFPT_ERROR messages and the table of error names OVS uses.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::wire::Reader;
use crate::DecodeError;

/// `ofp_error_msg.type` of experimenter errors (followed by exp_code and experimenter).
pub const OFPET_EXPERIMENTER: u16 = 0xffff;
/// Experimenter id of ONF extensions (bundles in OpenFlow 1.3).
pub const ONF_EXPERIMENTER_ID: u32 = 0x4f4e_4600;
/// Experimenter id of Nicira extensions.
pub const NX_EXPERIMENTER_ID: u32 = 0x0000_2320;

/// What went wrong, as the switch encodes it in OpenFlow 1.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Standard { err_type: u16, code: u16 },
    Experimenter { experimenter: u32, exp_code: u16 },
}

use ErrorKind::{Experimenter as X, Standard as S};

const fn s(err_type: u16, code: u16) -> ErrorKind {
    S { err_type, code }
}
const fn onf(exp_code: u16) -> ErrorKind {
    X {
        experimenter: ONF_EXPERIMENTER_ID,
        exp_code,
    }
}
const fn nx(exp_code: u16) -> ErrorKind {
    X {
        experimenter: NX_EXPERIMENTER_ID,
        exp_code,
    }
}

/// OpenFlow 1.3 error codes and their names, as include/openvswitch/ofp-errors.h assigns them
/// for OpenFlow 1.3 (standard, ONF and Nicira experimenter errors).
#[rustfmt::skip]
static ERROR_NAMES: &[(ErrorKind, &str)] = &[
    (s(0, 0), "OFPHFC_INCOMPATIBLE"), (s(0, 1), "OFPHFC_EPERM"),
    (s(1, 0), "OFPBRC_BAD_VERSION"), (s(1, 1), "OFPBRC_BAD_TYPE"), (s(1, 2), "OFPBRC_BAD_STAT"),
    (s(1, 3), "OFPBRC_BAD_VENDOR"), (s(1, 4), "OFPBRC_BAD_SUBTYPE"), (s(1, 5), "OFPBRC_EPERM"),
    (s(1, 6), "OFPBRC_BAD_LEN"), (s(1, 7), "OFPBRC_BUFFER_EMPTY"), (s(1, 8), "OFPBRC_BUFFER_UNKNOWN"),
    (s(1, 9), "OFPBRC_BAD_TABLE_ID"), (s(1, 10), "OFPBRC_IS_SLAVE"), (s(1, 11), "OFPBRC_BAD_PORT"),
    (s(1, 12), "OFPBRC_BAD_PACKET"), (s(1, 13), "OFPBRC_MULTIPART_BUFFER_OVERFLOW"),
    (nx(2), "NXBRC_NXM_INVALID"), (nx(3), "NXBRC_NXM_BAD_TYPE"), (nx(4), "NXBRC_MUST_BE_ZERO"),
    (nx(5), "NXBRC_BAD_REASON"), (nx(9), "NXBRC_FM_BAD_EVENT"), (nx(10), "NXBRC_UNENCODABLE_ERROR"),
    (s(2, 0), "OFPBAC_BAD_TYPE"), (s(2, 1), "OFPBAC_BAD_LEN"), (s(2, 2), "OFPBAC_BAD_VENDOR"),
    (s(2, 3), "OFPBAC_BAD_VENDOR_TYPE"), (s(2, 4), "OFPBAC_BAD_OUT_PORT"), (s(2, 5), "OFPBAC_BAD_ARGUMENT"),
    (s(2, 6), "OFPBAC_EPERM"), (s(2, 7), "OFPBAC_TOO_MANY"), (s(2, 8), "OFPBAC_BAD_QUEUE"),
    (s(2, 9), "OFPBAC_BAD_OUT_GROUP"), (s(2, 10), "OFPBAC_MATCH_INCONSISTENT"),
    (s(2, 11), "OFPBAC_UNSUPPORTED_ORDER"), (s(2, 12), "OFPBAC_BAD_TAG"), (s(2, 13), "OFPBAC_BAD_SET_TYPE"),
    (s(2, 14), "OFPBAC_BAD_SET_LEN"), (s(2, 15), "OFPBAC_BAD_SET_ARGUMENT"), (onf(4250), "OFPBAC_BAD_SET_MASK"),
    (nx(11), "NXBAC_MUST_BE_ZERO"), (nx(15), "NXBAC_BAD_CONJUNCTION"),
    (s(3, 0), "OFPBIC_UNKNOWN_INST"), (s(3, 1), "OFPBIC_UNSUP_INST"), (s(3, 2), "OFPBIC_BAD_TABLE_ID"),
    (s(3, 3), "OFPBIC_UNSUP_METADATA"), (s(3, 4), "OFPBIC_UNSUP_METADATA_MASK"),
    (s(3, 5), "OFPBIC_BAD_EXPERIMENTER"), (s(3, 6), "OFPBIC_BAD_EXP_TYPE"), (s(3, 7), "OFPBIC_BAD_LEN"),
    (s(3, 8), "OFPBIC_EPERM"), (onf(2600), "OFPBIC_DUP_INST"),
    (s(4, 0), "OFPBMC_BAD_TYPE"), (s(4, 1), "OFPBMC_BAD_LEN"), (s(4, 2), "OFPBMC_BAD_TAG"),
    (s(4, 3), "OFPBMC_BAD_DL_ADDR_MASK"), (s(4, 4), "OFPBMC_BAD_NW_ADDR_MASK"), (s(4, 5), "OFPBMC_BAD_WILDCARDS"),
    (s(4, 6), "OFPBMC_BAD_FIELD"), (s(4, 7), "OFPBMC_BAD_VALUE"), (s(4, 8), "OFPBMC_BAD_MASK"),
    (s(4, 9), "OFPBMC_BAD_PREREQ"), (s(4, 10), "OFPBMC_DUP_FIELD"), (s(4, 11), "OFPBMC_EPERM"),
    (s(5, 0), "OFPFMFC_UNKNOWN"), (s(5, 1), "OFPFMFC_TABLE_FULL"), (s(5, 2), "OFPFMFC_BAD_TABLE_ID"),
    (s(5, 3), "OFPFMFC_OVERLAP"), (s(5, 4), "OFPFMFC_EPERM"), (s(5, 5), "OFPFMFC_BAD_TIMEOUT"),
    (s(5, 6), "OFPFMFC_BAD_COMMAND"), (s(5, 7), "OFPFMFC_BAD_FLAGS"),
    (nx(12), "NXFMFC_HARDWARE"), (nx(13), "NXFMFC_BAD_TABLE_ID"),
    (s(6, 0), "OFPGMFC_GROUP_EXISTS"), (s(6, 1), "OFPGMFC_INVALID_GROUP"), (s(6, 2), "OFPGMFC_WEIGHT_UNSUPPORTED"),
    (s(6, 3), "OFPGMFC_OUT_OF_GROUPS"), (s(6, 4), "OFPGMFC_OUT_OF_BUCKETS"), (s(6, 5), "OFPGMFC_CHAINING_UNSUPPORTED"),
    (s(6, 6), "OFPGMFC_WATCH_UNSUPPORTED"), (s(6, 7), "OFPGMFC_LOOP"), (s(6, 8), "OFPGMFC_UNKNOWN_GROUP"),
    (s(6, 9), "OFPGMFC_CHAINED_GROUP"), (s(6, 10), "OFPGMFC_BAD_TYPE"), (s(6, 11), "OFPGMFC_BAD_COMMAND"),
    (s(6, 12), "OFPGMFC_BAD_BUCKET"), (s(6, 13), "OFPGMFC_BAD_WATCH"), (s(6, 14), "OFPGMFC_EPERM"),
    (s(7, 0), "OFPPMFC_BAD_PORT"), (s(7, 1), "OFPPMFC_BAD_HW_ADDR"), (s(7, 2), "OFPPMFC_BAD_CONFIG"),
    (s(7, 3), "OFPPMFC_BAD_ADVERTISE"), (s(7, 4), "OFPPMFC_EPERM"),
    (s(8, 0), "OFPTMFC_BAD_TABLE"), (s(8, 1), "OFPTMFC_BAD_CONFIG"), (s(8, 2), "OFPTMFC_EPERM"),
    (s(9, 0), "OFPQOFC_BAD_PORT"), (s(9, 1), "OFPQOFC_BAD_QUEUE"), (s(9, 2), "OFPQOFC_EPERM"),
    (s(10, 0), "OFPSCFC_BAD_FLAGS"), (s(10, 1), "OFPSCFC_BAD_LEN"), (s(10, 2), "OFPSCFC_EPERM"),
    (s(11, 0), "OFPRRFC_STALE"), (s(11, 1), "OFPRRFC_UNSUP"), (s(11, 2), "OFPRRFC_BAD_ROLE"),
    (s(12, 0), "OFPMMFC_UNKNOWN"), (s(12, 1), "OFPMMFC_METER_EXISTS"), (s(12, 2), "OFPMMFC_INVALID_METER"),
    (s(12, 3), "OFPMMFC_UNKNOWN_METER"), (s(12, 4), "OFPMMFC_BAD_COMMAND"), (s(12, 5), "OFPMMFC_BAD_FLAGS"),
    (s(12, 6), "OFPMMFC_BAD_RATE"), (s(12, 7), "OFPMMFC_BAD_BURST"), (s(12, 8), "OFPMMFC_BAD_BAND"),
    (s(12, 9), "OFPMMFC_BAD_BAND_VALUE"), (s(12, 10), "OFPMMFC_OUT_OF_METERS"), (s(12, 11), "OFPMMFC_OUT_OF_BANDS"),
    (s(13, 0), "OFPTFFC_BAD_TABLE"), (s(13, 1), "OFPTFFC_BAD_METADATA"), (s(13, 2), "OFPBPC_BAD_TYPE"),
    (s(13, 3), "OFPBPC_BAD_LEN"), (s(13, 4), "OFPBPC_BAD_VALUE"), (s(13, 5), "OFPTFFC_EPERM"),
    (onf(4443), "OFPBPC_TOO_MANY"), (onf(4444), "OFPBPC_DUP_TYPE"), (onf(4445), "OFPBPC_BAD_EXPERIMENTER"),
    (onf(4446), "OFPBPC_BAD_EXP_TYPE"), (onf(4447), "OFPBPC_BAD_EXP_VALUE"), (onf(4448), "OFPBPC_EPERM"),
    (onf(2300), "OFPBFC_UNKNOWN"), (onf(2301), "OFPBFC_EPERM"), (onf(2302), "OFPBFC_BAD_ID"),
    (onf(2303), "OFPBFC_BUNDLE_EXIST"), (onf(2304), "OFPBFC_BUNDLE_CLOSED"), (onf(2305), "OFPBFC_OUT_OF_BUNDLES"),
    (onf(2306), "OFPBFC_BAD_TYPE"), (onf(2307), "OFPBFC_BAD_FLAGS"), (onf(2308), "OFPBFC_MSG_BAD_LEN"),
    (onf(2309), "OFPBFC_MSG_BAD_XID"), (onf(2310), "OFPBFC_MSG_UNSUP"), (onf(2311), "OFPBFC_MSG_CONFLICT"),
    (onf(2312), "OFPBFC_MSG_TOO_MANY"), (onf(2313), "OFPBFC_MSG_FAILED"), (onf(2314), "OFPBFC_TIMEOUT"),
    (onf(2315), "OFPBFC_BUNDLE_IN_PROGRESS"),
    (nx(6), "OFPMOFC_MONITOR_EXISTS"), (nx(7), "OFPMOFC_BAD_FLAGS"), (nx(8), "OFPMOFC_UNKNOWN_MONITOR"),
    (nx(16), "NXTTMFC_BAD_COMMAND"), (nx(17), "NXTTMFC_BAD_OPT_LEN"), (nx(18), "NXTTMFC_BAD_FIELD_IDX"),
    (nx(19), "NXTTMFC_TABLE_FULL"), (nx(20), "NXTTMFC_ALREADY_MAPPED"), (nx(21), "NXTTMFC_DUP_ENTRY"),
    (nx(34), "NXR_NOT_SUPPORTED"), (nx(35), "NXR_STALE"), (nx(36), "NXST_NOT_CONFIGURED"),
];

impl ErrorKind {
    /// The OVS name (`OFPBAC_BAD_OUT_PORT`, `OFPBFC_MSG_FAILED`), or `"UNKNOWN_ERROR"`.
    pub fn name(&self) -> &'static str {
        ERROR_NAMES
            .iter()
            .find(|(kind, _)| kind == self)
            .map_or("UNKNOWN_ERROR", |(_, name)| name)
    }

    /// The error with this OVS name, if known (`OFPERR_` prefix optional).
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        let name = name.strip_prefix("OFPERR_").unwrap_or(name);
        ERROR_NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(kind, _)| *kind)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            S { err_type, code } => write!(f, "{} (type {err_type} code {code})", self.name()),
            X {
                experimenter,
                exp_code,
            } => write!(
                f,
                "{} (experimenter {experimenter:#010x} code {exp_code})",
                self.name()
            ),
        }
    }
}

/// OFPT_ERROR: `data` holds (the start of) the offending message, or text for HELLO_FAILED.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    pub kind: ErrorKind,
    pub data: Bytes,
}

impl fmt::Display for ErrorMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.kind, f)
    }
}

impl ErrorMsg {
    /// The xid of the offending message, when `data` holds at least its header.
    pub fn offending_xid(&self) -> Option<u32> {
        crate::Header::parse(&self.data).ok().map(|h| h.xid)
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) {
        match self.kind {
            S { err_type, code } => {
                out.put_u16(err_type);
                out.put_u16(code);
            }
            X {
                experimenter,
                exp_code,
            } => {
                out.put_u16(OFPET_EXPERIMENTER);
                out.put_u16(exp_code);
                out.put_u32(experimenter);
            }
        }
        out.put_slice(&self.data);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let err_type = r.u16()?;
        let code = r.u16()?;
        let kind = if err_type == OFPET_EXPERIMENTER {
            X {
                experimenter: r.u32()?,
                exp_code: code,
            }
        } else {
            S { err_type, code }
        };
        Ok(ErrorMsg {
            kind,
            data: Bytes::copy_from_slice(r.rest()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_display() {
        let bad_port = s(2, 4);
        assert_eq!(bad_port.name(), "OFPBAC_BAD_OUT_PORT");
        assert_eq!(bad_port.to_string(), "OFPBAC_BAD_OUT_PORT (type 2 code 4)");
        assert_eq!(onf(2313).name(), "OFPBFC_MSG_FAILED");
        assert_eq!(
            ErrorKind::from_name("OFPERR_OFPBFC_BAD_ID"),
            Some(onf(2302))
        );
        assert_eq!(s(99, 1).name(), "UNKNOWN_ERROR");
    }

    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for (kind, name) in ERROR_NAMES {
            assert!(seen.insert(*kind), "{name}");
        }
    }
}
