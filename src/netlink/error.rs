//! The errors of the netlink module: each names the operation that failed and, for a kernel
//! refusal, the errno and its text.

use std::io;
use std::net::IpAddr;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel answered a request with an error (`NLMSG_ERROR` with a non-zero code).
    #[error("{op}: kernel said: {source}")]
    Kernel {
        op: String,
        errno: i32,
        #[source]
        source: io::Error,
    },
    /// The netlink connection task ended (its socket failed or the runtime shut down).
    #[error("{op}: the netlink connection is closed")]
    ConnectionClosed { op: String },
    /// The kernel answered with a message this request cannot produce.
    #[error("{op}: unexpected reply from the kernel: {detail}")]
    UnexpectedReply { op: String, detail: String },
    #[error("opening a netlink socket ({context}): {source}")]
    Socket {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("entering network namespace {path}: {source}")]
    Netns {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("netlink::Handle needs a tokio runtime: create it from inside one")]
    NoRuntime,
    #[error("link {0:?} does not exist")]
    LinkNotFound(String),
    #[error("link {name:?} is a {kind} device, not vxlan")]
    NotVxlan { name: String, kind: String },
    #[error("sysctl {path}: {source}")]
    Sysctl {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A value given as text did not parse (a MAC address, say).
    #[error(transparent)]
    Invalid(#[from] crate::value::InvalidInput),
    #[error(transparent)]
    MacLength(#[from] crate::value::MacLength),
    #[error("{what} {addr} is not IPv4: the VXLAN device and its tables carry IPv4 only")]
    NotIpv4 { what: &'static str, addr: IpAddr },
    #[error("{what} {text:?} is not a valid address: {reason}")]
    BadAddress {
        what: &'static str,
        text: String,
        reason: String,
    },
    #[error("interface name {name:?} is {len} bytes; Linux allows at most 15")]
    NameTooLong { name: String, len: usize },
    #[error("interface name {name:?} is invalid: {reason}")]
    BadName { name: String, reason: String },
    #[error("ethtool on {ifname:?}: {source}")]
    Ethtool {
        ifname: String,
        #[source]
        source: io::Error,
    },
    #[error("VNI {vni} does not fit in 24 bits (at most 16777215)")]
    VniOutOfRange { vni: u32 },
}

impl Error {
    /// The kernel's errno when the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// True when the kernel refused the request with `errno`.
    pub fn is_errno(&self, errno: nix::errno::Errno) -> bool {
        self.errno() == Some(errno as i32)
    }

    pub(crate) fn from_error_message(op: String, msg: &netlink_packet_core::ErrorMessage) -> Error {
        // The kernel sends the negated errno; an ErrorMessage without a code is an ACK and
        // never reaches here, but keep a defined value rather than a panic.
        let errno = msg
            .code
            .map(|code| code.get().saturating_neg())
            .unwrap_or(0);
        Error::Kernel {
            op,
            errno,
            source: io::Error::from_raw_os_error(errno),
        }
    }
}
