//! The `ovs-ofctl` flow text syntax: a parser (text → [`crate::FlowMod`]) and a printer
//! (flows → the text `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` prints).

pub(crate) mod error;
mod group;
pub(crate) mod lexer;
mod meter;
pub(crate) mod parse;
mod print;
pub(crate) mod value;

pub use error::ParseError;
pub use group::{format_group_desc, format_group_mod, format_group_stats, parse_group};
pub use meter::{
    format_meter_config, format_meter_features, format_meter_mod, format_meter_stats, parse_meter,
};
pub use parse::{parse_actions, parse_flow, parse_match};
pub use print::{
    format_action, format_action_list, format_actions, format_flow, format_flow_mod, format_match,
};
pub use value::{format_port, parse_port};
