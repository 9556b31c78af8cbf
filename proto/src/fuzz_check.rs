//! The properties the fuzz targets check, callable without libFuzzer: `fuzz/fuzz_targets/*`
//! run them under the fuzzer and `tests/fuzz_corpus.rs` replays the kept corpora through them in
//! the normal test run. They panic (assert) when a property fails; that is their job.

use crate::text::{
    format_flow_mod, format_group_mod, format_meter_mod, parse_flow, parse_group, parse_meter,
};
use crate::{
    message_length, Action, FlowMod, FlowModCommand, GroupCommand, GroupMod, Instruction, Message,
    MeterCommand, MultipartReply, MultipartReplyBody,
};

/// Messages with fixed-size strings: port names and switch descriptions are decoded lossily
/// (invalid UTF-8) and truncated on encode, so they are only stable after one round.
/// A bundle-add carries any message, so the same holds for what it wraps (found by fuzzing).
fn has_fixed_strings(msg: &Message) -> bool {
    match msg {
        Message::PortStatus(_)
        | Message::MultipartReply(MultipartReply {
            body: MultipartReplyBody::PortDesc(_) | MultipartReplyBody::Desc(_),
            ..
        }) => true,
        Message::BundleAdd(add) => has_fixed_strings(&add.message),
        _ => false,
    }
}

/// Any bytes given to the message decoder give a message or an error, never a panic; a decoded
/// message re-encodes and decodes to itself. `data` is framed as a stream reader would frame it.
pub fn check_decode_message(data: &[u8]) {
    let mut rest = data;
    while let Some(len) = message_length(rest) {
        if len > rest.len() {
            break;
        }
        let (frame, tail) = rest.split_at(len);
        if let Ok((xid, msg)) = Message::decode(frame) {
            check_reencodes(xid, msg);
        }
        rest = tail;
    }
    let _ = Message::decode(data);
}

fn check_reencodes(xid: u32, msg: Message) {
    let again = Message::decode(&reencoded(&msg, xid));
    if has_fixed_strings(&msg) {
        let (_, once) = again.expect("re-encoded message does not decode");
        let twice = Message::decode(&reencoded(&once, xid));
        assert_eq!(twice, Ok((xid, once)), "re-encoding is not stable");
    } else {
        assert_eq!(again, Ok((xid, msg)), "re-encoding changed the message");
    }
}

/// A decoded message's bytes: it came in one frame, so it fits one again.
fn reencoded(msg: &Message, xid: u32) -> bytes::BytesMut {
    msg.to_bytes(xid)
        .unwrap_or_else(|e| panic!("a decoded message does not encode again: {e}"))
}

/// Any text given to the flow, group or meter parser gives a flow (group, meter) or an error,
/// never a panic; a parsed flow, group or meter prints to text that parses back to the same
/// one (up to NAT ranges of one, see [`ranges_of_one_collapsed`]).
pub fn check_parse_flow(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(fm) = parse_flow(text, FlowModCommand::Add) {
        let printed = format_flow_mod(&fm);
        assert_eq!(
            parse_flow(&printed, FlowModCommand::Add).map(flow_ranges_collapsed),
            Ok(flow_ranges_collapsed(fm)),
            "printed: {printed}"
        );
    }
    let _ = parse_flow(text, FlowModCommand::Delete);
    check_parse_group(text);
    check_parse_meter(text);
}

/// A meter as add-meter reads it prints (after the command word, as ofp-print prints it and,
/// with its bands on lines of their own, as dump-meters does) to text that parses back to it.
fn check_parse_meter(text: &str) {
    if let Ok(mm) = parse_meter(text, MeterCommand::Add) {
        let printed = format_meter_mod(&mm);
        let meter = printed.strip_prefix("ADD ").unwrap_or(&printed);
        assert_eq!(
            parse_meter(meter, MeterCommand::Add),
            Ok(mm),
            "printed: {printed}"
        );
    }
    let _ = parse_meter(text, MeterCommand::Delete);
}

/// A group as add-group reads it prints (after the command word) to text that parses back to
/// the same group.
fn check_parse_group(text: &str) {
    if let Ok(gm) = parse_group(text, GroupCommand::Add) {
        let printed = format_group_mod(&gm);
        let group = printed.strip_prefix("ADD ").unwrap_or(&printed);
        assert_eq!(
            parse_group(group, GroupCommand::Add).map(group_ranges_collapsed),
            Ok(group_ranges_collapsed(gm)),
            "printed: {printed}"
        );
    }
    let _ = parse_group(text, GroupCommand::Delete);
}

/// A NAT range of one (`10.0.0.1-10.0.0.1`, `:80-80`) is sent by ovs-ofctl with both ends and
/// printed by it as the single value, which then parses to a range without an upper end: the
/// same range, told apart only by the encoding. This crate does as ovs-ofctl does both ways
/// (the oracle test's `nat(dst=10.0.0.128-10.0.0.128:80-80)` shows it), so the round trip
/// compares flows with such ranges collapsed.
fn ranges_of_one_collapsed(actions: &mut [Action]) {
    for action in actions {
        match action {
            Action::Nat(nat) => {
                if let Some(range) = &mut nat.range {
                    range.ip_max = range.ip_max.filter(|max| *max != range.ip_min);
                    range.port_max = range.port_max.filter(|max| Some(*max) != range.port_min);
                }
            }
            Action::Ct(ct) => ranges_of_one_collapsed(&mut ct.actions),
            _ => {}
        }
    }
}

fn flow_ranges_collapsed(mut fm: FlowMod) -> FlowMod {
    for instruction in &mut fm.instructions {
        if let Instruction::ApplyActions(actions) | Instruction::WriteActions(actions) = instruction
        {
            ranges_of_one_collapsed(actions);
        }
    }
    fm
}

fn group_ranges_collapsed(mut gm: GroupMod) -> GroupMod {
    for bucket in &mut gm.buckets {
        ranges_of_one_collapsed(&mut bucket.actions);
    }
    gm
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BUNDLE_ADD wrapping a PORT_STATUS whose name is invalid UTF-8 (fuzzer crash
    /// 3fe3f596…): the lossy name grows on the first re-encode and is stable after it.
    #[test]
    fn a_port_status_inside_a_bundle_add_is_checked_for_stability_not_identity() {
        let input: &[u8] = &[
            4, 4, 0, 104, 0, 0, 0, 3, 79, 78, 70, 0, 0, 0, 8, 253, 0, 0, 0, 0, 0, 0, 0, 3, 4, 12,
            0, 80, 0, 0, 0, 3, 0, 0, 1, 0, 3, 157, 231, 239, 179, 134, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 128, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0,
            0, 255, 255, 255, 255, 255, 255, 255, 31, 1, 0, 0, 0, 0, 0, 0, 0, 44, 128, 0, 253, 80,
            0, 0, 0, 3, 0, 0, 204, 0, 0, 0, 255, 255, 255, 255, 0, 7, 255, 255, 0, 3, 0, 0, 67, 0,
        ];
        let (_, msg) = Message::decode(&input[..104]).expect("the crash input decodes");
        assert!(matches!(msg, Message::BundleAdd(_)), "{msg:?}");
        assert!(has_fixed_strings(&msg));
        check_decode_message(input);
    }

    /// A NAT port range of one (fuzzer crash 1836e9b0…) prints as its single port, as
    /// ovs-ofctl prints it, and parses back to the same range.
    #[test]
    fn a_nat_range_of_one_prints_as_one_value_and_is_the_same_range() {
        let crash = "table=82, priority=14, ip, actions=ct(commit,force,exec(set_field:0x1/0x1->\
                     ct_mark,load:0x100000000000000000->NXM_NX_CT_LABEL[])),ct(commit,nat(dst=\
                     10.0.0.128-10.0.0.254:80-80,persistent,hash))";
        check_parse_flow(crash.as_bytes());
        let one = "ip,actions=ct(commit,nat(dst=10.0.0.1-10.0.0.1:80-80))";
        let fm = parse_flow(one, FlowModCommand::Add).unwrap();
        assert!(format_flow_mod(&fm).contains("nat(dst=10.0.0.1:80)"));
        check_parse_flow(one.as_bytes());
        // A real range is not collapsed: 80-81 must survive the round trip.
        let two = parse_flow(
            "ip,actions=ct(commit,nat(dst=10.0.0.1:80-81))",
            FlowModCommand::Add,
        );
        assert!(format_flow_mod(&two.unwrap()).contains(":80-81"));
    }

    /// `ip_proto=3` in an ARP flow is arp_op=3, exact (fuzzer crash 438f7aa5…): it used to keep
    /// ip_proto's 8-bit mask, which made a masked arp_op that does not print back.
    #[test]
    fn ip_proto_in_an_arp_flow_is_an_exact_arp_op() {
        let crash = " no_byte_counts priority=100,ip_proto=3, arp,arp_spa=10.129.0.5, \
                     arp_sha=0a:58:0a:81:00:25, actions=load:42->NXM_NX_REG0[], note:.06.21";
        check_parse_flow(crash.as_bytes());
        let fm = parse_flow("arp,ip_proto=3,actions=drop", FlowModCommand::Add).unwrap();
        let arp_op = fm
            .match_
            .entries()
            .iter()
            .find(|e| e.field == crate::Field::ArpOp);
        assert_eq!(arp_op.map(|e| (e.value, e.mask)), Some((3, None)));
        // arp_op in an IP flow is ip_proto, which holds 8 bits: a wider value is refused.
        let err = parse_flow("ip,arp_op=300,actions=drop", FlowModCommand::Add).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        check_parse_flow(b"ip,arp_op=300,actions=drop");
    }
}
