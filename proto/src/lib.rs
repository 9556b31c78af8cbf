//! `ofnode-proto`: a sans-IO codec for OpenFlow 1.3 with the Nicira (NXM, NX actions) and ONF
//! (bundles) extensions Open vSwitch speaks, plus the `ovs-ofctl` flow text syntax.
//!
//! Bytes in, values out; values in, bytes out. Decoders return [`DecodeError`] for any input
//! they cannot accept and never panic; encoders return [`EncodeError`] for a value whose
//! length does not fit its 16-bit length field or whose number does not fit its wire field,
//! and never write a length that lies or a value other than the one given.
//!
//! From ovs-ofctl text to wire bytes and back:
//!
//! ```
//! use ofnode_proto::{format_flow_mod, parse_flow, FlowModCommand, Message};
//!
//! let text = "table=30, priority=200, ip, nw_dst=10.129.0.0/23, actions=goto_table:70";
//! let flow_mod = parse_flow(text, FlowModCommand::Add)?;
//! let bytes = Message::FlowMod(flow_mod.clone()).to_bytes(7)?; // an OFPT_FLOW_MOD frame
//! let (xid, decoded) = Message::decode(&bytes)?;
//! assert_eq!((xid, decoded), (7, Message::FlowMod(flow_mod.clone())));
//! // The line `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` prints once it is installed:
//! let dumped = "table=30, priority=200,ip,nw_dst=10.129.0.0/23 actions=goto_table:70";
//! assert_eq!(format_flow_mod(&flow_mod), dumped);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod action;
mod bundle;
mod bundle_order;
mod decode_error;
mod encode_error;
mod error;
mod field;
mod flow_mod;
pub mod fuzz_check;
mod group;
mod header;
mod instruction;
mod message;
mod meter;
mod monitor;
mod multipart;
mod oxm;
mod packet;
mod packet_in2;
mod port;
mod property;
mod reason;
mod switch;
pub mod text;
mod wire;

#[cfg(test)]
mod test_util;

pub use action::*;
pub use bundle::*;
pub use bundle_order::*;
pub use decode_error::DecodeError;
pub use encode_error::EncodeError;
pub use error::{ErrorKind, ErrorMsg, NX_EXPERIMENTER_ID, OFPET_EXPERIMENTER};
pub use field::*;
pub use flow_mod::*;
pub use group::*;
pub use header::*;
pub use instruction::*;
pub use message::Message;
pub use meter::*;
pub use monitor::*;
pub use multipart::*;
pub use oxm::*;
pub use packet::*;
pub use packet_in2::*;
pub use port::*;
pub use property::RawProperty;
pub use reason::*;
pub use switch::*;
pub use text::{format_actions, format_flow, format_flow_mod, parse_flow, ParseError};
