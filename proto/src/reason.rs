//! Packet-in reasons (`enum ofp_packet_in_reason`): what a packet-in carries and a
//! `controller(reason=...)` action sets, with the names ovs-ofctl gives them.

/// Packet-in reasons (`enum ofp_packet_in_reason`).
pub const OFPR_NO_MATCH: u8 = 0;
pub const OFPR_ACTION: u8 = 1;
pub const OFPR_INVALID_TTL: u8 = 2;
pub const OFPR_ACTION_SET: u8 = 3;
pub const OFPR_GROUP: u8 = 4;
pub const OFPR_PACKET_OUT: u8 = 5;
/// OVS's own reasons 6 and 7 (explicit and implicit miss) have no name; 8 and up none either.
pub(crate) const OFPR_N_REASONS: u8 = 8;

/// A packet-in reason as ovs-ofctl prints it (ofputil_packet_in_reason_to_string): its name,
/// nothing for OVS's internal miss reasons, else the number.
pub fn packet_in_reason_name(reason: u8) -> String {
    match reason {
        OFPR_NO_MATCH => "no_match".into(),
        OFPR_ACTION => "action".into(),
        OFPR_INVALID_TTL => "invalid_ttl".into(),
        OFPR_ACTION_SET => "action_set".into(),
        OFPR_GROUP => "group".into(),
        OFPR_PACKET_OUT => "packet_out".into(),
        6 | 7 => String::new(),
        other => other.to_string(),
    }
}
