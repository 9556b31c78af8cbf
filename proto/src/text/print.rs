//! Flows as `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` prints them (lib/ofp-flow.c
//! ofputil_flow_stats_format, lib/match.c match_format, lib/ofp-actions.c format_*).

use crate::action::Action;
use crate::field::Field;
use crate::flow_mod::{FlowMod, OFP_DEFAULT_PRIORITY};
use crate::instruction::Instruction;
use crate::multipart::FlowStats;
use crate::oxm::Match;
use crate::text::value::{format_match_value, protocol_name};
use crate::{
    OFPFF_CHECK_OVERLAP, OFPFF_NO_BYT_COUNTS, OFPFF_NO_PKT_COUNTS, OFPFF_RESET_COUNTS,
    OFPFF_SEND_FLOW_REM,
};

/// The fields of a flow that dump-flows prints, shared by flow stats and flow mods.
struct FlowView<'a> {
    cookie: u64,
    table_id: u8,
    idle_timeout: u16,
    hard_timeout: u16,
    flags: u16,
    priority: u16,
    match_: &'a Match,
    instructions: &'a [Instruction],
}

/// One flow as a line of `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` prints it, without
/// the single leading space ovs-ofctl puts before every flow line.
pub fn format_flow(stats: &FlowStats) -> String {
    format_view(&FlowView {
        cookie: stats.cookie,
        table_id: stats.table_id,
        idle_timeout: stats.idle_timeout,
        hard_timeout: stats.hard_timeout,
        flags: stats.flags,
        priority: stats.priority,
        match_: &stats.match_,
        instructions: &stats.instructions,
    })
}

/// A flow_mod as dump-flows would print the flow once installed (same form as [`format_flow`]).
pub fn format_flow_mod(fm: &FlowMod) -> String {
    format_view(&FlowView {
        cookie: fm.cookie,
        table_id: fm.table_id,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flags: fm.flags,
        priority: fm.priority,
        match_: &fm.match_,
        instructions: &fm.instructions,
    })
}

/// Flag words in the order ovs-ofctl prints them (each followed by a space, no comma).
const FLAG_WORDS: [(u16, &str); 5] = [
    (OFPFF_SEND_FLOW_REM, "send_flow_rem"),
    (OFPFF_CHECK_OVERLAP, "check_overlap"),
    (OFPFF_RESET_COUNTS, "reset_counts"),
    (OFPFF_NO_PKT_COUNTS, "no_packet_counts"),
    (OFPFF_NO_BYT_COUNTS, "no_byte_counts"),
];

fn format_view(f: &FlowView<'_>) -> String {
    let mut s = String::new();
    if f.cookie != 0 {
        s.push_str(&format!("cookie={:#x}, ", f.cookie));
    }
    if f.table_id != 0 {
        s.push_str(&format!("table={}, ", f.table_id));
    }
    if f.idle_timeout != 0 {
        s.push_str(&format!("idle_timeout={}, ", f.idle_timeout));
    }
    if f.hard_timeout != 0 {
        s.push_str(&format!("hard_timeout={}, ", f.hard_timeout));
    }
    for (bit, word) in FLAG_WORDS {
        if f.flags & bit != 0 {
            s.push_str(word);
            s.push(' ');
        }
    }
    let m = format_match(f.match_, f.priority);
    if !m.is_empty() {
        s.push_str(&m);
        s.push(' ');
    }
    s.push_str("actions=");
    s.push_str(&format_actions(f.instructions));
    s
}

/// The match as match_format prints it, with `priority=` first unless it is the default.
pub fn format_match(m: &Match, priority: u16) -> String {
    let mut parts: Vec<String> = Vec::new();
    if priority != OFP_DEFAULT_PRIORITY {
        parts.push(format!("priority={priority}"));
    }
    let eth_type = m.exact_u128(Field::EthType);
    let ip_proto = m.exact_u128(Field::IpProto);
    push_fields(&mut parts, m, &BEFORE_PROTOCOL);
    // The protocol keyword stands for eth_type (and ip_proto, where it names one).
    let (skip_type, skip_proto) = match eth_type {
        Some(e) => match ip_proto.and_then(|p| protocol_name(e, Some(p))) {
            Some(name) => {
                parts.push(name.to_string());
                (true, true)
            }
            None => match protocol_name(e, None) {
                Some(name) => {
                    parts.push(name.to_string());
                    (true, false)
                }
                None => (false, false),
            },
        },
        None => (false, false),
    };
    push_fields(&mut parts, m, &AFTER_PROTOCOL);
    if !skip_type {
        if let Some(e) = eth_type {
            parts.push(format!("dl_type=0x{e:04x}"));
        }
    }
    push_fields(&mut parts, m, &L3);
    if !skip_proto {
        push_field(&mut parts, m, Field::IpProto);
    }
    push_fields(&mut parts, m, &AFTER_IP_PROTO);
    for raw in m.unknown() {
        parts.push(format_raw_oxm(raw));
    }
    parts.join(",")
}

/// The order of match_format (lib/match.c), around the protocol keyword and ip_proto, which
/// it prints only when no keyword names them. Fields of different packet types share a
/// position (nw_src / arp_spa, tp_src / icmp_type): one match never holds both.
const BEFORE_PROTOCOL: [Field; 11] = [
    Field::PktMark,
    Field::ConjId,
    Field::CtState,
    Field::CtZone,
    Field::CtMark,
    Field::CtLabel,
    Field::CtNwSrc,
    Field::CtNwDst,
    Field::CtNwProto,
    Field::CtTpSrc,
    Field::CtTpDst,
];
const AFTER_PROTOCOL: [Field; 23] = [
    Field::Reg(0),
    Field::Reg(1),
    Field::Reg(2),
    Field::Reg(3),
    Field::Reg(4),
    Field::Reg(5),
    Field::Reg(6),
    Field::Reg(7),
    Field::Reg(8),
    Field::Reg(9),
    Field::Reg(10),
    Field::Reg(11),
    Field::Reg(12),
    Field::Reg(13),
    Field::Reg(14),
    Field::Reg(15),
    Field::TunId,
    Field::TunSrc,
    Field::TunDst,
    Field::Metadata,
    Field::InPort,
    Field::EthSrc,
    Field::EthDst,
];
const L3: [Field; 4] = [Field::Ipv4Src, Field::Ipv4Dst, Field::ArpSpa, Field::ArpTpa];
const AFTER_IP_PROTO: [Field; 13] = [
    Field::ArpOp,
    Field::ArpSha,
    Field::ArpTha,
    Field::IpFrag,
    Field::IcmpType,
    Field::IcmpCode,
    Field::TcpSrc,
    Field::TcpDst,
    Field::UdpSrc,
    Field::UdpDst,
    Field::SctpSrc,
    Field::SctpDst,
    Field::TcpFlags,
];

/// A match field this crate does not know, printed so that it cannot be mistaken for an OVS
/// field name (and is refused by the parser): its TLV header and payload in hex.
fn format_raw_oxm(raw: &crate::oxm::RawOxm) -> String {
    let hex: String = raw.payload.iter().map(|b| format!("{b:02x}")).collect();
    format!("oxm_{:#010x}=0x{hex}", raw.header)
}

fn push_fields(parts: &mut Vec<String>, m: &Match, fields: &[Field]) {
    for &field in fields {
        push_field(parts, m, field);
    }
}

fn push_field(parts: &mut Vec<String>, m: &Match, field: Field) {
    if let Some(entry) = m.get(field) {
        let info = field.info();
        let value = format_match_value(info, entry.value, entry.mask);
        parts.push(format!("{}={value}", info.print_name));
    }
}

/// The `actions=` text of a flow: its instructions flattened the way OVS prints them, or
/// `drop` when there are none.
pub fn format_actions(instructions: &[Instruction]) -> String {
    let mut ordered: Vec<&Instruction> = instructions.iter().collect();
    ordered.sort_by_key(|inst| inst.canonical_rank());
    let parts: Vec<String> = ordered.into_iter().filter_map(format_instruction).collect();
    if parts.is_empty() {
        "drop".to_string()
    } else {
        parts.join(",")
    }
}

fn format_instruction(inst: &Instruction) -> Option<String> {
    match inst {
        Instruction::Meter(meter_id) => Some(format!("meter:{meter_id}")),
        Instruction::ApplyActions(actions) if actions.is_empty() => None,
        Instruction::ApplyActions(actions) => Some(format_action_list(actions)),
        Instruction::ClearActions => Some("clear_actions".to_string()),
        // An empty write-actions instruction prints as OVS prints it.
        Instruction::WriteActions(actions) if actions.is_empty() => {
            Some("write_actions(drop)".to_string())
        }
        Instruction::WriteActions(actions) => {
            Some(format!("write_actions({})", format_action_list(actions)))
        }
        Instruction::GotoTable(table) => Some(format!("goto_table:{table}")),
        Instruction::Unknown(raw) => Some(format!("unknown_instruction({})", hex(raw))),
    }
}

/// A list of actions, comma-separated, as in a packet-out or write_actions.
pub fn format_action_list(actions: &[Action]) -> String {
    let mut out = String::new();
    crate::action::format_list(actions, &mut out);
    out
}

/// One action as ovs-ofctl prints it.
pub fn format_action(action: &Action) -> String {
    let mut out = String::new();
    action.format(&mut out);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RARP flow keeps its arp_op when printed (OVS: `rarp,arp_op=3`), as an ARP flow does:
    /// arp_op is printed for both ethertypes, not only for 0x0806. The lines are what
    /// `ovs-ofctl -O OpenFlow13 parse-flow` 3.1 prints for the same matches.
    #[test]
    fn a_rarp_flow_prints_its_arp_op() {
        for (eth_type, printed) in [
            (0x8035, "rarp,arp_spa=192.0.2.1,arp_op=3"),
            (0x0806, "arp,arp_spa=192.0.2.1,arp_op=3"),
        ] {
            let m = Match::new()
                .with(Field::EthType, eth_type)
                .with(Field::ArpOp, 3)
                .with(Field::ArpSpa, 0xc000_0201);
            assert_eq!(format_match(&m, OFP_DEFAULT_PRIORITY), printed);
            let alone = Match::new()
                .with(Field::EthType, eth_type)
                .with(Field::ArpOp, 3);
            let protocol = &printed[..printed.find(',').unwrap_or(0)];
            assert_eq!(
                format_match(&alone, OFP_DEFAULT_PRIORITY),
                format!("{protocol},arp_op=3")
            );
        }
    }
}
