//! The values every layer shares: MAC addresses, interface names, VNIDs, IPv4 networks and
//! addresses, sandbox ids, pod keys, DNS names. sdn, netlink, api, cni and cluster take them from here, so each rule
//! (what a MAC address or an interface name may look like) is written once.
//!
//! Each type checks its value when it is made (parsing text, deserialising JSON, or from bytes),
//! so nothing above ever holds an invalid one. Text input that does not parse is an
//! [`InvalidInput`] naming the value and what was expected.

mod cidr;
pub mod dns;
mod ifname;
mod ipv4;
mod mac;
mod podkey;
mod sandbox;
mod vnid;

pub use cidr::Cidr;
pub use ifname::{IfName, IfNameError, MAX_IFNAME_LEN};
pub use ipv4::{ipv4_from_text, parse_ipv4, NotIpv4};
pub use mac::{MacAddr, MacLength};
pub use podkey::PodKey;
pub use sandbox::SandboxId;
pub use vnid::Vnid;

/// Why an input was refused; the message names the value and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct InvalidInput {
    pub what: &'static str,
    pub value: String,
    pub reason: String,
}

impl InvalidInput {
    pub fn new(what: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidInput {
            what,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// Implements string (de)serialisation through `Display` and `FromStr`.
macro_rules! text_serde {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use text_serde;
