//! Oracle tests against the real ovs-ofctl / ovs-vswitchd 3.1 over every flow the seed writes:
//! (a) our encoder's bytes, decoded by `ovs-ofctl ofp-parse`, read exactly as ovs-ofctl's own
//!     parse of the same text;
//! (b) the bytes ovs-ofctl itself sends (captured on a fake switch socket) decode to the typed
//!     flow our parser builds from the same text, and our encoding is byte-identical;
//! (c) on a real bridge, flows installed from our bytes dump (with ovs-ofctl) exactly as our
//!     printer prints them, and our decoded flow stats print exactly as ovs-ofctl dumps them;
//!     the PORT_STATUS ovs-vswitchd sends for a new port decodes and re-encodes byte for byte.
//!
//! Besides the seed's flows: ofnode's table 80 flows, every ip_frag value, and the flow-mod
//! options (modify, strict forms, out_port/out_group on deletes, timeouts and flags).
//!
//! Needs Debian's `openvswitch-switch` (ovs-ofctl, ovs-vswitchd, ovsdb-server) and root (the
//! private OVS runs in a network namespace of its own).

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use ofnode_proto::text::{format_flow, format_flow_mod, parse_flow};
use ofnode_proto::*;

/// `ovs-ofctl ofp-parse` over a file of our encoded messages; one line per flow_mod.
fn ofp_parse(messages: &[(u32, Message)]) -> Vec<String> {
    let mut out = BytesMut::new();
    for (xid, msg) in messages {
        msg.encode(*xid, &mut out);
    }
    let file = TempFile::new(&out);
    ofctl(&["ofp-parse", file.path()])
        .lines()
        .filter(|l| l.starts_with("OFPT_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_ovs_ofctl_reads_our_bytes_as_its_own_parse() {
    let mut flows = seed_add_flows();
    flows.extend(option_add_flows());
    let ours: Vec<(u32, Message)> = flows
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let fm =
                parse_flow(text, FlowModCommand::Add).unwrap_or_else(|e| panic!("{text}: {e}"));
            (i as u32 + 1, Message::FlowMod(fm))
        })
        .collect();
    let printed = ofp_parse(&ours);

    let text_file = TempFile::new(flows.join("\n").as_bytes());
    let theirs: Vec<String> = ofctl(&["-O", "OpenFlow13", "parse-flows", text_file.path()])
        .lines()
        .filter(|l| l.starts_with("OFPT_FLOW_MOD"))
        .map(str::to_string)
        .collect();
    assert_eq!(printed.len(), flows.len());
    for ((ours, theirs), text) in printed.iter().zip(&theirs).zip(&flows) {
        assert_eq!(ours, theirs, "flow: {text}");
    }
}

/// `add`/`delete` lines for `ovs-ofctl add-flows`, with the command each stands for.
fn add_and_delete_lines() -> Vec<(FlowModCommand, String)> {
    let adds = seed_add_flows()
        .into_iter()
        .map(|f| (FlowModCommand::Add, f));
    let deletes = seed_delete_flows()
        .into_iter()
        .map(|f| (FlowModCommand::Delete, f));
    let options = option_add_flows()
        .into_iter()
        .map(|f| (FlowModCommand::Add, f));
    let mut lines: Vec<_> = adds.chain(options).chain(deletes).collect();
    lines.extend(
        [
            (FlowModCommand::DeleteStrict, "table=100, priority=1, reg0=5"),
            (
                FlowModCommand::DeleteStrict,
                "table=80, priority=100, reg0=42, reg1=42",
            ),
            (
                FlowModCommand::ModifyStrict,
                "table=70, priority=100, ip, nw_dst=10.129.0.5, actions=load:43->NXM_NX_REG1[], load:3->NXM_NX_REG2[], goto_table:80",
            ),
            // Non-strict modify: every flow the match covers, whatever its priority.
            (
                FlowModCommand::Modify,
                "table=70, ip, nw_dst=10.129.0.5, actions=load:43->NXM_NX_REG1[], load:3->NXM_NX_REG2[], goto_table:80",
            ),
            (
                FlowModCommand::Modify,
                "table=100, reg0=6, cookie=1/1, actions=drop",
            ),
            (
                FlowModCommand::Modify,
                "table=100, reg0=7, send_flow_rem, reset_counts, idle_timeout=5, actions=output:2",
            ),
            (
                FlowModCommand::ModifyStrict,
                "table=100, priority=9, reg0=7, check_overlap, actions=output:3",
            ),
            // out_port / out_group narrow a delete to flows that output there.
            (FlowModCommand::Delete, "table=100, out_port=2"),
            (FlowModCommand::Delete, "reg0=6, out_port=LOCAL"),
            (FlowModCommand::Delete, "table=100, out_group=5"),
            (
                FlowModCommand::DeleteStrict,
                "table=100, priority=3, reg0=6, ip, nw_dst=198.51.100.0/24, out_port=2",
            ),
        ]
        .map(|(cmd, text)| (cmd, text.to_string())),
    );
    lines
}

fn command_word(cmd: FlowModCommand) -> &'static str {
    match cmd {
        FlowModCommand::Add => "add",
        FlowModCommand::Modify => "modify",
        FlowModCommand::ModifyStrict => "modify_strict",
        FlowModCommand::Delete => "delete",
        FlowModCommand::DeleteStrict => "delete_strict",
    }
}

fn flow_file(lines: &[(FlowModCommand, String)]) -> TempFile {
    let text: Vec<String> = lines
        .iter()
        .map(|(cmd, flow)| format!("{} {flow}", command_word(*cmd)))
        .collect();
    TempFile::new(text.join("\n").as_bytes())
}

#[test]
fn b_what_ovs_ofctl_sends_decodes_to_our_parse() {
    let lines = add_and_delete_lines();
    let file = flow_file(&lines);
    let captured = capture_ofctl(&["add-flows", "SOCK", file.path()]);
    let flow_mods: Vec<(u32, &FlowMod, &Vec<u8>)> = captured
        .messages
        .iter()
        .zip(&captured.frames)
        .filter_map(|((xid, msg), frame)| match msg {
            Message::FlowMod(fm) => Some((*xid, fm, frame)),
            _ => None,
        })
        .collect();
    assert_eq!(flow_mods.len(), lines.len());
    let mut ours = Vec::new();
    for ((xid, theirs, frame), (cmd, text)) in flow_mods.iter().zip(&lines) {
        let parsed = parse_flow(text, *cmd).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(*theirs, &parsed, "flow: {text}");
        let encoded = Message::FlowMod(parsed.clone()).to_bytes(*xid);
        assert_eq!(hex(&encoded), hex(frame), "bytes differ for: {text}");
        ours.push((*xid, Message::FlowMod(parsed)));
    }
    // (a) for the deletes too: ovs-ofctl prints our bytes as it prints its own.
    let theirs: Vec<(u32, Message)> = flow_mods
        .iter()
        .map(|(xid, fm, _)| (*xid, Message::FlowMod((*fm).clone())))
        .collect();
    assert_eq!(ofp_parse(&ours), ofp_parse(&theirs));
}

#[test]
fn b_bundle_from_ovs_ofctl() {
    let lines = add_and_delete_lines();
    let file = flow_file(&lines);
    let captured = capture_ofctl(&["--bundle", "add-flows", "SOCK", file.path()]);
    let mut msgs = captured.messages.iter();
    let Some((_, Message::BundleControl(open))) = msgs.next() else {
        panic!(
            "bundle did not start with a control message: {:?}",
            captured.messages.first()
        );
    };
    assert_eq!(open.ctrl_type, BundleCtrlType::OpenRequest);
    assert_eq!(open.flags, BundleFlags::ATOMIC | BundleFlags::ORDERED);
    let adds: Vec<&BundleAdd> = captured
        .messages
        .iter()
        .filter_map(|(_, m)| match m {
            Message::BundleAdd(add) => Some(add),
            _ => None,
        })
        .collect();
    assert_eq!(adds.len(), lines.len());
    for (add, (cmd, text)) in adds.iter().zip(&lines) {
        assert_eq!(add.bundle_id, open.bundle_id);
        let Message::FlowMod(fm) = add.message.as_ref() else {
            panic!("{add:?}")
        };
        assert_eq!(fm, &parse_flow(text, *cmd).unwrap(), "flow: {text}");
    }
    let commit = captured.messages.iter().rev().find_map(|(_, m)| match m {
        Message::BundleControl(c) => Some(c),
        _ => None,
    });
    assert_eq!(
        commit.map(|c| c.ctrl_type),
        Some(BundleCtrlType::CommitRequest)
    );
    // Our encoding of each add is byte-identical to ovs-ofctl's.
    for ((xid, msg), frame) in captured.messages.iter().zip(&captured.frames) {
        assert_eq!(hex(&msg.to_bytes(*xid)), hex(frame));
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Sends flow_mods in one atomic bundle; panics on any error reply.
fn commit_bundle(session: &mut Session, flow_mods: Vec<FlowMod>) {
    let control = |ctrl_type| {
        Message::BundleControl(BundleControl {
            bundle_id: 7,
            ctrl_type,
            flags: BundleFlags::ATOMIC | BundleFlags::ORDERED,
            properties: Bytes::new(),
        })
    };
    let reply = session.request(&control(BundleCtrlType::OpenRequest));
    assert!(
        matches!(reply, Message::BundleControl(ref c) if c.ctrl_type == BundleCtrlType::OpenReply),
        "{reply:?}"
    );
    for fm in flow_mods {
        let xid = session.xid();
        let add = Message::BundleAdd(BundleAdd {
            bundle_id: 7,
            flags: BundleFlags::ATOMIC | BundleFlags::ORDERED,
            message: Box::new(Message::FlowMod(fm)),
        });
        session.send(&add, xid);
    }
    let reply = session.request(&control(BundleCtrlType::CommitRequest));
    assert!(
        matches!(reply, Message::BundleControl(ref c) if c.ctrl_type == BundleCtrlType::CommitReply),
        "{reply:?}"
    );
}

#[test]
fn c_printer_matches_ovs_ofctl_dump_on_a_real_bridge() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut session = Session::connect(&ovs.mgmt_sock("br0"));
    let reply = session.request(&Message::FeaturesRequest);
    assert!(matches!(reply, Message::FeaturesReply(_)), "{reply:?}");
    session.send(
        &Message::SetConfig(SwitchConfig::with_frag_mode(OFPC_FRAG_NX_MATCH)),
        2,
    );
    let Message::GetConfigReply(config) = session.request(&Message::GetConfigRequest) else {
        panic!("no config reply")
    };
    assert_eq!(config.frag_mode(), OFPC_FRAG_NX_MATCH);

    let adds: Vec<FlowMod> = seed_add_flows()
        .iter()
        .chain(&option_add_flows())
        .map(|t| parse_flow(t, FlowModCommand::Add).unwrap())
        .collect();
    commit_bundle(&mut session, adds.clone());

    // The printer's text for what we sent is what ovs-ofctl dumps from the switch.
    let dumped = sorted(ovs.dump_flows("br0").unwrap());
    // A later add of the same (table, priority, match) replaces the earlier flow.
    let mut installed: Vec<&FlowMod> = Vec::new();
    for fm in &adds {
        installed.retain(|f| {
            (f.table_id, f.priority, &f.match_) != (fm.table_id, fm.priority, &fm.match_)
        });
        installed.push(fm);
    }
    let expected = sorted(installed.into_iter().map(format_flow_mod).collect());
    assert_eq!(dumped, expected);
    // Our flow stats decoder + printer read the switch exactly as ovs-ofctl does.
    let ours = sorted(session.dump_flows().iter().map(format_flow).collect());
    assert_eq!(ours, dumped);

    // Deletes, sent one by one and fenced by a barrier.
    for text in seed_delete_flows() {
        let fm = parse_flow(&text, FlowModCommand::Delete).unwrap();
        let xid = session.xid();
        session.send(&Message::FlowMod(fm), xid);
    }
    assert_eq!(
        session.request(&Message::BarrierRequest),
        Message::BarrierReply
    );
    let dumped = sorted(ovs.dump_flows("br0").unwrap());
    let ours = sorted(session.dump_flows().iter().map(format_flow).collect());
    assert_eq!(ours, dumped);
    assert!(dumped.len() < expected.len(), "the deletes removed nothing");
    assert!(
        !dumped.iter().any(|f| f.contains("10.129.0.5")),
        "pod flows survived: {dumped:#?}"
    );
}

#[test]
fn c_switch_errors_decode_with_their_names() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut session = Session::connect(&ovs.mgmt_sock("br0"));
    // Output to 0xffffff50 is neither a port nor a reserved port.
    let mut fm = parse_flow("table=0, actions=output:1", FlowModCommand::Add).unwrap();
    fm.instructions = vec![Instruction::ApplyActions(vec![Action::output(0xffff_ff50)])];
    let Message::Error(err) = session.request(&Message::FlowMod(fm.clone())) else {
        panic!("no error")
    };
    assert_eq!(err.kind.name(), "OFPBAC_BAD_OUT_PORT");
    // The offending flow comes back as we sent it; we refuse such a port ourselves when a
    // peer sends it, and read it leniently to name it.
    assert_eq!(
        err.data,
        Message::FlowMod(fm.clone()).to_bytes(err.offending_xid().unwrap())
    );
    assert!(Message::decode(&err.data).is_err());
    let (_, offending) = Message::decode_lenient(&err.data).unwrap();
    assert!(matches!(offending, Message::FlowMod(_)));

    // A commit of a bundle that was never opened.
    let commit = Message::BundleControl(BundleControl {
        bundle_id: 99,
        ctrl_type: BundleCtrlType::CommitRequest,
        flags: BundleFlags::ATOMIC,
        properties: Bytes::new(),
    });
    let Message::Error(err) = session.request(&commit) else {
        panic!("no error")
    };
    assert_eq!(err.kind.name(), "OFPBFC_BAD_ID");
}

#[test]
fn c_port_status_from_a_real_bridge() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut session = Session::connect(&ovs.mgmt_sock("br0"));
    // A management (service) connection gets no asynchronous messages until it asks.
    let all_reasons = (1 << OFPPR_ADD) | (1 << OFPPR_DELETE) | (1 << OFPPR_MODIFY);
    let config = AsyncConfig {
        port_status_mask: [all_reasons, all_reasons],
        ..AsyncConfig::default()
    };
    session.send(&Message::SetAsync(config), 2);
    assert_eq!(
        session.request(&Message::GetAsyncRequest),
        Message::GetAsyncReply(config)
    );

    ovs.vsctl(&[
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=internal",
        "ofport_request=5",
    ])
    .unwrap();
    // The first PORT_STATUS announces the new port (state changes may follow as MODIFY).
    let frame = loop {
        let frame = session
            .recv_frame()
            .expect("switch closed before announcing the port");
        if frame[1] == OFPT_PORT_STATUS {
            break frame;
        }
    };
    let (xid, msg) = Message::decode(&frame).unwrap_or_else(|e| panic!("{e}: {}", hex(&frame)));
    let Message::PortStatus(status) = &msg else {
        panic!("{msg:?}")
    };
    assert_eq!(status.reason, OFPPR_ADD, "{status:?}");
    assert_eq!((status.port.port_no, status.port.name.as_str()), (5, "p1"));
    assert_eq!(
        hex(&msg.to_bytes(xid)),
        hex(&frame),
        "re-encoding differs from what ovs-vswitchd sent"
    );
    // What ovs-ofctl itself makes of the same bytes names the same port.
    let file = TempFile::new(&frame);
    let printed = ofctl(&["ofp-parse", file.path()]);
    assert!(
        printed.contains("OFPT_PORT_STATUS") && printed.contains("ADD: 5(p1)"),
        "{printed}"
    );
    eprintln!("captured PORT_STATUS: {}", hex(&frame));
}
