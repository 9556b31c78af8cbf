//! `ofnode-proto`: a sans-IO codec for OpenFlow 1.3 with the Nicira (NXM, NX actions) and ONF
//! (bundles) extensions Open vSwitch speaks, plus the `ovs-ofctl` flow text syntax.
//!
//! Bytes in, values out; values in, bytes out. Decoders return [`DecodeError`] for any input
//! they cannot accept and never panic; encoders cannot fail.

mod action;
mod bundle;
mod decode_error;
mod error;
mod field;
mod flow_mod;
pub mod fuzz_check;
mod header;
mod instruction;
mod message;
mod monitor;
mod multipart;
mod oxm;
mod packet;
mod port;
mod switch;
pub mod text;
mod wire;

#[cfg(test)]
mod test_util;

pub use action::*;
pub use bundle::*;
pub use decode_error::DecodeError;
pub use error::{ErrorKind, ErrorMsg, NX_EXPERIMENTER_ID, OFPET_EXPERIMENTER};
pub use field::*;
pub use flow_mod::*;
pub use header::*;
pub use instruction::*;
pub use message::{EncodeError, Message};
pub use monitor::*;
pub use multipart::*;
pub use oxm::*;
pub use packet::*;
pub use port::*;
pub use switch::*;
pub use text::{format_actions, format_flow, format_flow_mod, parse_flow, ParseError};
