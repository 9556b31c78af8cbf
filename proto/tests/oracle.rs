//! Oracle tests against the real ovs-ofctl / ovs-vswitchd 3.1 over every flow the seed writes:
//! (a) our encoder's bytes, decoded by `ovs-ofctl ofp-parse`, read exactly as ovs-ofctl's own
//!     parse of the same text;
//! (b) the bytes ovs-ofctl itself sends (captured on a fake switch socket) decode to the typed
//!     flow our parser builds from the same text, and our encoding is byte-identical;
//! (c) on a real bridge, flows installed from our bytes dump (with ovs-ofctl) exactly as our
//!     printer prints them, and our decoded flow stats print exactly as ovs-ofctl dumps them;
//!     the PORT_STATUS ovs-vswitchd sends for a new port decodes and re-encodes byte for byte.
//!
//! Besides the seed's flows: ofnode's table 80 flows, every ip_frag value, the flow-mod
//! options (modify, strict forms, out_port/out_group on deletes, timeouts and flags), and the
//! stateful pipelines (`common::stateful_add_flows`: openshift-sdn's NetworkPolicy conntrack
//! flows, a 3-dimension conjunction set, a NAT'd service, every new field and action) with the
//! groups they use (`common::stateful_groups`: an EgressIP select group setting pkt_mark, a
//! NAT'd service's select group, all/fast-failover/indirect groups), which must also be
//! ordered in a bundle as OVS needs (groups before the flows that use them); and the OVS test
//! vectors of tests/ovs_vectors.rs must still be what this ovs-ofctl says.
//!
//! Needs Debian's `openvswitch-switch` (ovs-ofctl, ovs-vswitchd, ovsdb-server) and root (the
//! private OVS runs in a network namespace of its own).

mod common;
mod hex;
mod vectors;

use bytes::{Bytes, BytesMut};
use common::*;
use ofnode_proto::text::{
    format_flow, format_flow_mod, format_group_desc, format_group_mod, format_match,
    format_meter_config, format_meter_features, format_meter_mod, format_meter_stats, parse_flow,
    parse_group, parse_meter,
};
use ofnode_proto::*;

/// `ovs-ofctl ofp-parse` over a file of our encoded messages; one line per flow_mod.
fn ofp_parse(messages: &[(u32, Message)]) -> Vec<String> {
    let mut out = BytesMut::new();
    for (xid, msg) in messages {
        msg.try_encode(*xid, &mut out).unwrap();
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
    flows.extend(stateful_add_flows());
    flows.extend(audit_add_flows());
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
        .chain(stateful_add_flows())
        .chain(audit_add_flows())
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
        let encoded = Message::FlowMod(parsed.clone()).to_bytes(*xid).unwrap();
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
        assert_eq!(hex(&msg.to_bytes(*xid).unwrap()), hex(frame));
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Sends messages in one atomic bundle; the first error the switch reports, if any.
fn try_commit_bundle(session: &mut Session, messages: Vec<Message>) -> Result<(), ErrorMsg> {
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
    let mut first_error = None;
    for message in messages {
        let xid = session.xid();
        let add = Message::BundleAdd(BundleAdd {
            bundle_id: 7,
            flags: BundleFlags::ATOMIC | BundleFlags::ORDERED,
            message: Box::new(message),
        });
        session.send(&add, xid);
    }
    let commit_xid = session.xid();
    session.send(&control(BundleCtrlType::CommitRequest), commit_xid);
    loop {
        let (xid, reply) = session.recv().expect("switch closed the connection");
        match reply {
            Message::Error(e) if xid != commit_xid => {
                first_error.get_or_insert(e);
            }
            Message::Error(e) => return Err(first_error.unwrap_or(e)),
            Message::BundleControl(c) if xid == commit_xid => {
                assert_eq!(c.ctrl_type, BundleCtrlType::CommitReply);
                return first_error.map_or(Ok(()), Err);
            }
            _ => {}
        }
    }
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
        .chain(&stateful_add_flows())
        .map(|t| parse_flow(t, FlowModCommand::Add).unwrap())
        .collect();
    // The groups the stateful flows use travel in the same bundle, put first.
    let groups: Vec<GroupMod> = stateful_groups()
        .iter()
        .map(|t| parse_group(t, GroupCommand::Add).unwrap())
        .collect();
    let mut messages: Vec<Message> = adds.iter().cloned().map(Message::FlowMod).collect();
    messages.extend(groups.iter().cloned().map(Message::GroupMod));
    try_commit_bundle(&mut session, order_for_bundle(messages).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {:?}", Message::decode_lenient(&e.data)));
    check_groups_on_the_bridge(&ovs, &mut session, &groups);

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
        Message::FlowMod(fm.clone())
            .to_bytes(err.offending_xid().unwrap())
            .unwrap()
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
        hex(&msg.to_bytes(xid).unwrap()),
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

/// dump-groups prints exactly what our printer prints for the groups we installed, and our
/// group description decoder reads the switch's reply as ovs-ofctl does.
fn check_groups_on_the_bridge(
    ovs: &ofnode_harness::Ovs,
    session: &mut Session,
    groups: &[GroupMod],
) {
    let dumped = sorted(
        ovs.ofctl("dump-groups", "br0", &[])
            .unwrap()
            .lines()
            .filter(|l| l.contains("group_id="))
            .map(|l| l.trim().to_string())
            .collect(),
    );
    let expected = sorted(
        groups
            .iter()
            .map(|g| {
                format_group_desc(&GroupDesc {
                    group_type: g.group_type,
                    group_id: g.group_id,
                    buckets: g.buckets.clone(),
                })
            })
            .collect(),
    );
    assert_eq!(dumped, expected);
    let mut ours = Vec::new();
    for (frame, part) in multipart(session, MultipartRequest::GroupDesc) {
        let MultipartReplyBody::GroupDesc(descs) = &part.body else {
            panic!("unexpected reply {part:?}");
        };
        eprintln!("captured group desc reply: {}", hex(&frame));
        ours.extend(descs.iter().map(format_group_desc));
    }
    assert_eq!(sorted(ours), dumped);
}

/// The group commands of OVS's `add-groups`/`del-groups` files, as ovs-ofctl reads them.
fn group_lines() -> Vec<(GroupCommand, String)> {
    let mut lines: Vec<(GroupCommand, String)> = stateful_groups()
        .into_iter()
        .map(|g| (GroupCommand::Add, g))
        .collect();
    lines.extend([
        (
            GroupCommand::Modify,
            "group_id=7,type=all,bucket=actions=output:3".into(),
        ),
        (GroupCommand::Delete, "group_id=9".into()),
        (GroupCommand::Delete, "".into()),
    ]);
    lines
}

/// `ovs-ofctl ofp-parse` of one message.
fn ofp_parse_one(xid: u32, msg: &Message) -> String {
    let file = TempFile::new(&msg.to_bytes(xid).unwrap());
    ofctl(&["ofp-parse", file.path()]).trim().to_string()
}

#[test]
fn a_ovs_ofctl_reads_our_group_mods_as_its_own_parse() {
    for (cmd, text) in group_lines() {
        let ours =
            Message::GroupMod(parse_group(&text, cmd).unwrap_or_else(|e| panic!("{text}: {e}")));
        let verb = match cmd {
            GroupCommand::Add => "add-group",
            GroupCommand::Modify => "mod-group",
            _ => "del-groups",
        };
        let mut args = vec![verb, "SOCK"];
        if !text.is_empty() {
            args.push(&text);
        }
        let captured = capture_ofctl(&args);
        let Some((xid, theirs)) = captured
            .messages
            .iter()
            .find(|(_, m)| matches!(m, Message::GroupMod(_)))
        else {
            panic!("ovs-ofctl {verb} sent no group mod");
        };
        assert_eq!(
            ofp_parse_one(*xid, &ours),
            ofp_parse_one(*xid, theirs),
            "group: {verb} {text}"
        );
        if cmd == GroupCommand::Add {
            let parsed = ofctl(&["-O", "OpenFlow13", "parse-group", &text]);
            let line = parsed.lines().find(|l| l.starts_with(' ')).unwrap().trim();
            let Message::GroupMod(gm) = &ours else {
                unreachable!()
            };
            assert_eq!(format_group_mod(gm), line, "group: {text}");
        }
    }
}

#[test]
fn b_group_mods_from_ovs_ofctl() {
    for (args, cmd, texts) in [
        (vec!["add-groups"], GroupCommand::Add, stateful_groups()),
        (
            vec!["mod-group"],
            GroupCommand::Modify,
            vec!["group_id=7,type=all,bucket=actions=output:3".to_string()],
        ),
        (
            vec!["del-groups"],
            GroupCommand::Delete,
            vec!["group_id=9".to_string()],
        ),
        (vec!["del-groups"], GroupCommand::Delete, vec![]),
    ] {
        let file = TempFile::new(texts.join("\n").as_bytes());
        let mut ofctl_args = vec![args[0], "SOCK"];
        match (args[0], texts.as_slice()) {
            ("add-groups", _) => ofctl_args.push(file.path()),
            (_, [one]) => ofctl_args.push(one.as_str()),
            _ => {}
        }
        let captured = capture_ofctl(&ofctl_args);
        let mods: Vec<(u32, &GroupMod, &Vec<u8>)> = captured
            .messages
            .iter()
            .zip(&captured.frames)
            .filter_map(|((xid, msg), frame)| match msg {
                Message::GroupMod(gm) => Some((*xid, gm, frame)),
                _ => None,
            })
            .collect();
        let expected: Vec<GroupMod> = if texts.is_empty() {
            vec![parse_group("", cmd).unwrap()]
        } else {
            texts.iter().map(|t| parse_group(t, cmd).unwrap()).collect()
        };
        assert_eq!(mods.len(), expected.len(), "{args:?}");
        for ((xid, theirs, frame), ours) in mods.iter().zip(&expected) {
            assert_eq!(*theirs, ours);
            let encoded = Message::GroupMod(ours.clone()).to_bytes(*xid).unwrap();
            assert_eq!(hex(&encoded), hex(frame), "bytes differ for {ours:?}");
        }
    }
}

/// `ovs-ofctl bundle`: groups and flows in one ONF bundle, as the lines of the file order them
/// (the order `order_for_bundle` gives); each add decodes to our parse and re-encodes byte for
/// byte.
#[test]
fn b_groups_and_flows_in_one_bundle_from_ovs_ofctl() {
    let groups = stateful_groups();
    let flows = stateful_add_flows();
    let mut lines: Vec<String> = groups.iter().map(|g| format!("group add {g}")).collect();
    lines.extend(flows.iter().map(|f| format!("flow add {f}")));
    lines.push("flow delete table=120, reg0=8".into());
    lines.push("group delete group_id=9".into());
    let file = TempFile::new(lines.join("\n").as_bytes());
    let captured = capture_ofctl(&["bundle", "SOCK", file.path()]);
    let adds: Vec<(u32, &BundleAdd, &Vec<u8>)> = captured
        .messages
        .iter()
        .zip(&captured.frames)
        .filter_map(|((xid, msg), frame)| match msg {
            Message::BundleAdd(add) => Some((*xid, add, frame)),
            _ => None,
        })
        .collect();
    let mut expected: Vec<Message> = groups
        .iter()
        .map(|g| Message::GroupMod(parse_group(g, GroupCommand::Add).unwrap()))
        .collect();
    expected.extend(
        flows
            .iter()
            .map(|f| Message::FlowMod(parse_flow(f, FlowModCommand::Add).unwrap())),
    );
    expected.push(Message::FlowMod(
        parse_flow("table=120, reg0=8", FlowModCommand::Delete).unwrap(),
    ));
    expected.push(Message::GroupMod(
        parse_group("group_id=9", GroupCommand::Delete).unwrap(),
    ));
    assert_eq!(
        order_for_bundle(expected.clone()),
        Ok(expected.clone()),
        "the file is in bundle order"
    );
    assert_eq!(adds.len(), expected.len());
    for ((xid, add, frame), ours) in adds.iter().zip(&expected) {
        assert_eq!(add.message.as_ref(), ours);
        let msg = Message::BundleAdd(BundleAdd {
            bundle_id: add.bundle_id,
            flags: add.flags,
            message: Box::new(ours.clone()),
        });
        assert_eq!(hex(&msg.to_bytes(*xid).unwrap()), hex(frame));
    }
}

/// On a real bridge: a flow that names a group before the group exists fails the whole bundle
/// (OFPBAC_BAD_OUT_GROUP); the same messages in `order_for_bundle`'s order commit; removing
/// the group after the flows that use it leaves neither behind.
#[test]
fn c_groups_go_before_the_flows_that_use_them() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut session = Session::connect(&ovs.mgmt_sock("br0"));
    let group = parse_group(
        "group_id=42,type=select,bucket=actions=ct(commit),move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.5->tun_dst,output:1",
        GroupCommand::Add,
    )
    .unwrap();
    let flow = parse_flow(
        "table=101, priority=100, ip, reg0=42, actions=group:42",
        FlowModCommand::Add,
    )
    .unwrap();
    let wrong = vec![
        Message::FlowMod(flow.clone()),
        Message::GroupMod(group.clone()),
    ];
    let err = try_commit_bundle(&mut session, wrong.clone()).unwrap_err();
    assert_eq!(err.kind.name(), "OFPBAC_BAD_OUT_GROUP", "{err}");
    assert!(ovs.dump_flows("br0").unwrap().is_empty());
    try_commit_bundle(&mut session, order_for_bundle(wrong).unwrap()).unwrap();
    assert_eq!(ovs.dump_flows("br0").unwrap(), vec![format_flow_mod(&flow)]);
    let mut delete = flow.clone();
    delete.command = FlowModCommand::DeleteStrict;
    delete.instructions.clear();
    let removal = vec![
        Message::GroupMod(GroupMod::delete(42)),
        Message::FlowMod(delete),
    ];
    try_commit_bundle(&mut session, order_for_bundle(removal).unwrap()).unwrap();
    assert!(ovs.dump_flows("br0").unwrap().is_empty());
    let groups = ovs.ofctl("dump-groups", "br0", &[]).unwrap();
    assert!(!groups.contains("group_id="), "{groups}");
}

/// Why `order_for_bundle` refuses a group deleted and added again in one bundle, on a real
/// bridge: moved to the front (as group adds go), the add fails with OFPGMFC_GROUP_EXISTS and
/// nothing applies; in the caller's order OVS replaces the group but also deletes every flow
/// that used it; a modify changes the group (its type too) and keeps them, which is what the
/// error suggests.
#[test]
fn c_a_group_deleted_and_added_in_one_bundle() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut session = Session::connect(&ovs.mgmt_sock("br0"));
    let group = |text: &str, command| parse_group(text, command).unwrap();
    let all = group(
        "group_id=5,type=all,bucket=actions=output:1",
        GroupCommand::Add,
    );
    let select = group(
        "group_id=5,type=select,bucket=actions=output:2",
        GroupCommand::Add,
    );
    let flow = parse_flow(
        "table=1, priority=5, reg0=5, actions=group:5",
        FlowModCommand::Add,
    )
    .unwrap();
    let dump_groups = |ovs: &ofnode_harness::Ovs| -> Vec<String> {
        ovs.ofctl("dump-groups", "br0", &[])
            .unwrap()
            .lines()
            .filter(|l| l.contains("group_id="))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let install = vec![
        Message::GroupMod(all.clone()),
        Message::FlowMod(flow.clone()),
    ];
    try_commit_bundle(&mut session, order_for_bundle(install.clone()).unwrap()).unwrap();
    let flows_before = ovs.dump_flows("br0").unwrap();
    assert_eq!(flows_before, vec![format_flow_mod(&flow)]);

    let replace = vec![
        Message::GroupMod(GroupMod::delete(5)),
        Message::GroupMod(select.clone()),
    ];
    assert_eq!(
        order_for_bundle(replace.clone()),
        Err(BundleOrderError::GroupReusedAfterDelete {
            group_id: 5,
            after_delete_all: false
        })
    );
    // Group adds first, deletes last (what a reordering without the check sent).
    let reordered = vec![replace[1].clone(), replace[0].clone()];
    let err = try_commit_bundle(&mut session, reordered).unwrap_err();
    assert_eq!(err.kind.name(), "OFPGMFC_GROUP_EXISTS", "{err}");
    assert_eq!(ovs.dump_flows("br0").unwrap(), flows_before);
    assert_eq!(
        dump_groups(&ovs),
        vec!["group_id=5,type=all,bucket=actions=output:1"]
    );

    // The caller's order: the group is replaced, and the flow that used it is gone.
    try_commit_bundle(&mut session, replace).unwrap();
    assert_eq!(
        dump_groups(&ovs),
        vec!["group_id=5,type=select,bucket=actions=output:2"]
    );
    assert!(ovs.dump_flows("br0").unwrap().is_empty());

    // A modify changes the group, its type included, and keeps the flows that use it.
    try_commit_bundle(&mut session, vec![Message::FlowMod(flow.clone())]).unwrap();
    let mut modify = all;
    modify.command = GroupCommand::Modify;
    try_commit_bundle(
        &mut session,
        order_for_bundle(vec![Message::GroupMod(modify)]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        dump_groups(&ovs),
        vec!["group_id=5,type=all,bucket=actions=output:1"]
    );
    assert_eq!(ovs.dump_flows("br0").unwrap(), flows_before);
}

/// Runs ovs-ofctl over `input` (one item a line) and returns the lines it prints.
fn ofctl_stdin(args: &[&str], input: &str) -> Vec<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("ovs-ofctl")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ovs-ofctl (apt package openvswitch-switch) must be installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The verdicts in tests/data/ovs are what this ovs-ofctl 3.1 says, so tests/ovs_vectors.rs
/// holds our codec to OVS itself, not to a copy that could drift.
#[test]
fn ovs_vectors_are_what_ovs_ofctl_says() {
    let oxm = vectors::read_vectors(&vectors::data("oxm.txt"));
    let input: Vec<&str> = oxm.iter().map(|v| v.symbolic.as_deref().unwrap()).collect();
    let said = ofctl_stdin(
        &["--strict", "parse-oxm", "OpenFlow13"],
        &(input.join("\n") + "\n"),
    );
    let stored: Vec<&str> = oxm.iter().map(|v| v.ovs_line.as_deref().unwrap()).collect();
    assert_eq!(said, stored);
    for (file, command) in [
        ("actions.txt", "parse-actions"),
        ("instructions.txt", "parse-instructions"),
    ] {
        let vectors = vectors::read_vectors(&vectors::data(file));
        let input: Vec<String> = vectors.iter().map(|v| hex(&v.input)).collect();
        let said: Vec<String> = ofctl_stdin(&[command, "OpenFlow13"], &(input.join("\n") + "\n"))
            .into_iter()
            .filter(|l| l.starts_with("actions=") || l.starts_with("bad "))
            .map(|l| match l.strip_prefix("bad ") {
                Some(bad) => bad.rsplit(": ").next().unwrap_or(bad).to_string(),
                None => l,
            })
            .collect();
        let stored: Vec<String> = vectors
            .iter()
            .map(|v| v.verdict.clone().unwrap_or_else(|e| e))
            .collect();
        assert_eq!(said, stored, "{file}");
    }
}

/// `ovs-ofctl ofp-parse` of one message: what it prints after the message's name and xid
/// (`ADD meter=1 ...`, with its continuation lines).
fn ofp_print_body(xid: u32, msg: &Message) -> String {
    let printed = ofp_parse_one(xid, msg);
    match printed.split_once("): ") {
        Some((_, body)) => body.trim_end().to_string(),
        None => printed,
    }
}

/// The meter commands of `add-meter`, `mod-meter` and `del-meters`, as ovs-ofctl reads them.
fn meter_lines() -> Vec<(MeterCommand, String)> {
    let mut lines: Vec<(MeterCommand, String)> = audit_meters()
        .into_iter()
        .chain([audit_dscp_meter()])
        .map(|m| (MeterCommand::Add, m))
        .collect();
    lines.extend([
        (
            MeterCommand::Modify,
            "meter=2 pktps bands=type=drop rate=10".to_string(),
        ),
        (
            MeterCommand::Add,
            "meter=controller pktps bands=type=drop rate=1000".to_string(),
        ),
        (MeterCommand::Delete, "meter=2".to_string()),
        (MeterCommand::Delete, String::new()),
    ]);
    lines
}

/// (a) and (b) for meters: what ovs-ofctl sends for add-meter, mod-meter and del-meters
/// decodes to our parse of the same text and is byte for byte our encoding; ofp-print prints
/// our message as it prints its own, and as our printer does.
#[test]
fn ab_meter_mods_from_ovs_ofctl() {
    for (command, text) in meter_lines() {
        let verb = match command {
            MeterCommand::Add => "add-meter",
            MeterCommand::Modify => "mod-meter",
            MeterCommand::Delete => "del-meters",
        };
        let mut args = vec![verb, "SOCK"];
        if !text.is_empty() {
            args.push(&text);
        }
        let captured = capture_ofctl(&args);
        let Some(((xid, theirs), frame)) = captured
            .messages
            .iter()
            .zip(&captured.frames)
            .find(|((_, m), _)| matches!(m, Message::MeterMod(_)))
        else {
            panic!("ovs-ofctl {verb} sent no meter mod");
        };
        let ours = Message::MeterMod(
            parse_meter(&text, command).unwrap_or_else(|e| panic!("{verb} {text}: {e}")),
        );
        assert_eq!(theirs, &ours, "{verb} {text}");
        assert_eq!(
            hex(&ours.to_bytes(*xid).unwrap()),
            hex(frame),
            "{verb} {text}"
        );
        let printed = ofp_print_body(*xid, &ours);
        assert_eq!(printed, ofp_print_body(*xid, theirs));
        let Message::MeterMod(mm) = &ours else {
            unreachable!()
        };
        assert_eq!(format_meter_mod(mm), printed, "{verb} {text}");
        eprintln!("{verb} {text}: {}", hex(frame));
    }
}

/// Sends `msg` and a barrier; the switch's error for `msg`, if it sent one.
fn send_checked(session: &mut Session, msg: &Message) -> Result<(), ErrorMsg> {
    let xid = session.xid();
    session.send(msg, xid);
    let barrier = session.xid();
    session.send(&Message::BarrierRequest, barrier);
    let mut error = None;
    loop {
        let (got, reply) = session.recv().expect("switch closed the connection");
        match reply {
            Message::Error(e) if got == xid => error = Some(e),
            Message::BarrierReply if got == barrier => return error.map_or(Ok(()), Err),
            _ => {}
        }
    }
}

/// The parts of the switch's reply to a multipart request: each frame as received and decoded.
fn multipart(session: &mut Session, request: MultipartRequest) -> Vec<(Vec<u8>, MultipartReply)> {
    let xid = session.xid();
    session.send(&Message::MultipartRequest(request), xid);
    let mut parts = Vec::new();
    loop {
        let frame = session.recv_frame().expect("switch closed the connection");
        let (got, reply) =
            Message::decode(&frame).unwrap_or_else(|e| panic!("{e}: {}", hex(&frame)));
        if got != xid {
            continue;
        }
        assert_eq!(
            hex(&reply.to_bytes(xid).unwrap()),
            hex(&frame),
            "re-encoding {reply:?}"
        );
        let Message::MultipartReply(part) = reply else {
            panic!("unexpected reply {reply:?}")
        };
        let more = part.more();
        parts.push((frame, part));
        if !more {
            return parts;
        }
    }
}

/// What ovs-ofctl prints for each entry of a multipart reply (dump-meters, meter-stats): the
/// lines after the header, one entry a block, blocks separated by blank lines.
fn entries_printed(output: &str) -> Vec<String> {
    let body: Vec<&str> = output
        .lines()
        .filter(|l| !l.starts_with("OFPST_"))
        .collect();
    sorted(
        body.join("\n")
            .split("\n\n")
            .map(|block| block.trim().to_string())
            .filter(|block| !block.is_empty())
            .collect(),
    )
}

/// On a real bridge: meters installed from our bytes dump (ovs-ofctl dump-meters) as our
/// printer prints them, and our decoders read the switch's meter configuration, features and
/// statistics replies as ovs-ofctl prints them; the audit flows that use the meters install
/// and dump as our printer prints them; a flow naming a missing meter and a meter mod inside
/// a bundle are refused as `order_for_bundle` and our parser say.
#[test]
fn c_meters_and_controller_flows_on_a_real_bridge() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut session = Session::connect(&ovs.mgmt_sock("br0"));

    let meters: Vec<MeterMod> = audit_meters()
        .iter()
        .map(|t| parse_meter(t, MeterCommand::Add).unwrap())
        .collect();
    // OVS takes no meter mod in a bundle; order_for_bundle says so before the switch does.
    let first = Message::MeterMod(meters[0].clone());
    assert!(matches!(
        order_for_bundle(vec![first.clone()]),
        Err(BundleOrderError::NotBundlable { .. })
    ));
    let err = try_commit_bundle(&mut session, vec![first]).unwrap_err();
    assert_eq!(err.kind.name(), "OFPBFC_MSG_UNSUP", "{err}");
    for mm in &meters {
        send_checked(&mut session, &Message::MeterMod(mm.clone()))
            .unwrap_or_else(|e| panic!("{mm:?}: {e}"));
    }
    // The userspace datapath has no DSCP-remark bands: the switch's error names it.
    let dscp = parse_meter(&audit_dscp_meter(), MeterCommand::Add).unwrap();
    let err = send_checked(&mut session, &Message::MeterMod(dscp)).unwrap_err();
    assert_eq!(err.kind.name(), "OFPMMFC_BAD_BAND", "{err}");

    let configs: Vec<MeterConfig> = meters
        .iter()
        .map(|m| MeterConfig {
            meter_id: m.meter_id,
            flags: m.flags,
            bands: m.bands.clone(),
        })
        .collect();
    let dumped = entries_printed(&ovs.ofctl("dump-meters", "br0", &[]).unwrap());
    assert_eq!(
        dumped,
        sorted(configs.iter().map(format_meter_config).collect())
    );
    let read: Vec<MeterConfig> = multipart(&mut session, MultipartRequest::MeterConfig(OFPM_ALL))
        .into_iter()
        .flat_map(|(frame, part)| {
            eprintln!("captured meter config reply: {}", hex(&frame));
            match part.body {
                MultipartReplyBody::MeterConfig(configs) => configs,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    // The switch reports a meter without `burst` with burst sizes equal to the rates, which
    // neither ovs-ofctl nor our printer prints.
    assert_eq!(
        sorted(read.iter().map(format_meter_config).collect()),
        dumped
    );
    let unburst = |c: &MeterConfig| MeterConfig {
        bands: c
            .bands
            .iter()
            .map(|b| MeterBand {
                burst_size: if c.flags & OFPMF_BURST != 0 {
                    b.burst_size
                } else {
                    0
                },
                ..*b
            })
            .collect(),
        ..c.clone()
    };
    let mut read: Vec<MeterConfig> = read.iter().map(unburst).collect();
    read.sort_by_key(|c| c.meter_id);
    assert_eq!(read, configs);

    let features = multipart(&mut session, MultipartRequest::MeterFeatures);
    let [(
        frame,
        MultipartReply {
            body: MultipartReplyBody::MeterFeatures(f),
            ..
        },
    )] = features.as_slice()
    else {
        panic!("{features:?}")
    };
    eprintln!("captured meter features reply: {}", hex(frame));
    let printed = ovs.ofctl("meter-features", "br0", &[]).unwrap();
    assert_eq!(
        printed.lines().skip(1).collect::<Vec<_>>().join("\n"),
        format_meter_features(f)
    );
    assert!(f.max_meter > 0 && f.band_types == 1 << OFPMBT_DROP, "{f:?}");

    // The audit flows, in one bundle after their meters.
    let flows: Vec<FlowMod> = audit_add_flows()
        .iter()
        .map(|t| parse_flow(t, FlowModCommand::Add).unwrap())
        .collect();
    let messages = flows.iter().cloned().map(Message::FlowMod).collect();
    try_commit_bundle(&mut session, order_for_bundle(messages).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {:?}", Message::decode_lenient(&e.data)));
    let dumped = sorted(ovs.dump_flows("br0").unwrap());
    assert_eq!(dumped, sorted(flows.iter().map(format_flow_mod).collect()));
    let ours = sorted(session.dump_flows().iter().map(format_flow).collect());
    assert_eq!(ours, dumped);

    // A flow naming a meter the switch does not have.
    let missing = parse_flow(
        "table=93, ip, actions=meter:99,output:2",
        FlowModCommand::Add,
    )
    .unwrap();
    let err = send_checked(&mut session, &Message::FlowMod(missing)).unwrap_err();
    assert_eq!(err.kind.name(), "OFPMMFC_INVALID_METER", "{err}");

    // An action set takes no controller, note or output:REG action: the switch refuses them
    // (ovs-ofctl sends them all the same), and so do our parser and decoder.
    for (action, text) in [
        (
            Action::Controller(Controller {
                userdata: vec![0xff],
                ..Controller::default()
            }),
            "controller(userdata=ff)",
        ),
        (Action::note(&[1]), "note:01"),
        (
            Action::OutputReg {
                src: FieldRange::whole(Field::Reg(2)),
                max_len: 0xffff,
            },
            "output:NXM_NX_REG2[]",
        ),
    ] {
        let text = format!("table=93, ip, actions=write_actions({text})");
        assert!(parse_flow(&text, FlowModCommand::Add).is_err(), "{text}");
        let mut fm = parse_flow("table=93, ip, actions=drop", FlowModCommand::Add).unwrap();
        fm.instructions = vec![Instruction::WriteActions(vec![action])];
        let err = send_checked(&mut session, &Message::FlowMod(fm)).unwrap_err();
        assert_eq!(err.kind.name(), "OFPBAC_BAD_TYPE", "{text}: {err}");
        assert!(Message::decode(&err.data).is_err(), "{text}");
    }

    // Meter statistics: our decoder and printer read the reply as ovs-ofctl prints it.
    for (frame, part) in multipart(&mut session, MultipartRequest::MeterStats(OFPM_ALL)) {
        eprintln!("captured meter stats reply: {}", hex(&frame));
        let MultipartReplyBody::MeterStats(stats) = &part.body else {
            panic!("{part:?}")
        };
        let file = TempFile::new(&frame);
        let printed = entries_printed(&ofctl(&["ofp-parse", file.path()]));
        assert_eq!(
            printed,
            sorted(stats.iter().map(format_meter_stats).collect())
        );
        let by_id = |id| stats.iter().find(|s| s.meter_id == id).unwrap();
        // meter:3 is used by one flow's instruction.
        assert!(by_id(3).flow_count >= 1, "{stats:?}");
    }
}

/// The next packet-in the switch sends on `session` (an OFPT_PACKET_IN or an NXT_PACKET_IN2),
/// as received.
fn next_packet_in(session: &mut Session) -> Vec<u8> {
    loop {
        let frame = session
            .recv_frame()
            .expect("the switch sent no packet-in within the read timeout");
        let (_, msg) = Message::decode(&frame).unwrap_or_else(|e| panic!("{e}: {}", hex(&frame)));
        if msg.packet_in().is_some() {
            return frame;
        }
    }
}

/// A UDP datagram from the pod's network namespace to `dst`:5000, from a new source port.
fn send_udp(pod: &ofnode_harness::Netns, dst: &str) {
    pod.exec_ok(&["bash", "-c", &format!("echo audit > /dev/udp/{dst}/5000")])
        .expect("sending a datagram from the pod");
}

/// A REAL packet-in: a UDP datagram sent from a pod's namespace through a veth port of a
/// private bridge hits an audit flow (`controller(userdata=...,meter_id=...)` behind
/// conntrack), and the NXT_PACKET_IN2 ovs-vswitchd sends decodes to the packet, table, cookie,
/// registers, conntrack metadata and userdata, re-encodes byte for byte, and is what
/// `ovs-ofctl ofp-parse` reads in the same bytes; asked for the standard format, the same
/// flow's OFPT_PACKET_IN reads alike (without userdata); the rule's meter counted both.
#[test]
fn c_a_real_packet_in_from_ovs_vswitchd() {
    ofnode_harness::init();
    let ovs = ofnode_harness::Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    let pod = ofnode_harness::Netns::new("audpod").unwrap();
    let port = ofnode_harness::unique_name("aud");
    let _veth = ofnode_harness::Veth::new(&port, ovs.netns(), "eth0", &pod).unwrap();
    ovs.vsctl(&[
        "add-port",
        "br0",
        &port,
        "--",
        "set",
        "interface",
        &port,
        "ofport_request=1",
    ])
    .unwrap();
    pod.exec_ok(&["ip", "addr", "add", "10.128.0.2/24", "dev", "eth0"])
        .unwrap();
    pod.exec_ok(&[
        "ip",
        "neigh",
        "replace",
        "10.128.0.3",
        "lladdr",
        "0a:58:0a:80:00:03",
        "dev",
        "eth0",
        "nud",
        "permanent",
    ])
    .unwrap();
    // Userspace conntrack checks checksums: a veth's offloaded (partial) UDP checksum would
    // make the connection +inv.
    pod.exec_ok(&["ethtool", "-K", "eth0", "tx", "off"])
        .unwrap();

    let mut session = Session::connect(&ovs.mgmt_sock("br0"));
    // A management connection gets packet-ins once it sets a miss_send_len; the userdata
    // travels only in NXT_PACKET_IN2.
    session.send(
        &Message::SetConfig(SwitchConfig {
            flags: 0,
            miss_send_len: OFPCML_NO_BUFFER,
        }),
        2,
    );
    session.send(&Message::SetPacketInFormat(PacketInFormat::Nxt2), 3);
    let meter = parse_meter(&audit_meters()[0], MeterCommand::Add).unwrap();
    send_checked(&mut session, &Message::MeterMod(meter)).unwrap();
    let flows = [
        "table=0, priority=100, ip, actions=load:0x7->NXM_NX_REG0[],ct(table=1)",
        "table=1, priority=100, cookie=0x2a, udp, reg0=7, ct_state=+trk+new, actions=controller(userdata=00.00.00.07.01,meter_id=1),ct(commit)",
    ];
    let messages = flows
        .iter()
        .map(|t| Message::FlowMod(parse_flow(t, FlowModCommand::Add).unwrap()))
        .collect();
    try_commit_bundle(&mut session, messages).unwrap();

    send_udp(&pod, "10.128.0.3");
    let frame = next_packet_in(&mut session);
    eprintln!("captured NXT_PACKET_IN2: {}", hex(&frame));
    let (xid, msg) = Message::decode(&frame).unwrap();
    assert!(matches!(msg, Message::PacketIn2(_)), "{msg:?}");
    assert_eq!(hex(&msg.to_bytes(xid).unwrap()), hex(&frame), "re-encoding");
    let view = msg.packet_in().unwrap();
    assert_eq!(view.userdata, [0, 0, 0, 7, 1]);
    check_audit_packet_in(&view, &frame);

    // The standard format: an OpenFlow 1.3 PACKET_IN of the same flow, without the userdata.
    session.send(&Message::SetPacketInFormat(PacketInFormat::Standard), 4);
    send_udp(&pod, "10.128.0.3");
    let frame = next_packet_in(&mut session);
    eprintln!("captured OFPT_PACKET_IN: {}", hex(&frame));
    let (xid, msg) = Message::decode(&frame).unwrap();
    assert!(matches!(msg, Message::PacketIn(_)), "{msg:?}");
    assert_eq!(hex(&msg.to_bytes(xid).unwrap()), hex(&frame), "re-encoding");
    let view = msg.packet_in().unwrap();
    assert!(view.userdata.is_empty());
    check_audit_packet_in(&view, &frame);

    // The rule's meter saw both packet-ins.
    let stats = multipart(&mut session, MultipartRequest::MeterStats(1));
    let [(
        _,
        MultipartReply {
            body: MultipartReplyBody::MeterStats(stats),
            ..
        },
    )] = stats.as_slice()
    else {
        panic!("{stats:?}")
    };
    assert_eq!(stats[0].packet_in_count, 2, "{stats:?}");
}

/// What both packet-ins of `c_a_real_packet_in_from_ovs_vswitchd` say: the datagram, the
/// flow's table and cookie, the packet's port, register and conntrack state and tuple — as
/// ovs-ofctl reads the same bytes.
fn check_audit_packet_in(view: &PacketInView<'_>, frame: &[u8]) {
    let p = view.packet;
    assert_eq!(view.total_len, p.len());
    assert_eq!(&p[12..14], &[0x08, 0x00], "an IPv4 packet");
    assert_eq!(p[23], 17, "UDP");
    assert_eq!(&p[26..30], &[10, 128, 0, 2]);
    assert_eq!(&p[30..34], &[10, 128, 0, 3]);
    assert_eq!(&p[36..38], &5000u16.to_be_bytes());
    assert!(p.ends_with(b"audit\n"));
    assert_eq!((view.table_id, view.cookie), (1, Some(0x2a)));
    assert_eq!(view.reason, OFPR_ACTION);
    let m = view.metadata;
    assert_eq!(m.exact(Field::InPort), Some(1));
    assert_eq!(m.exact(Field::Reg(0)), Some(7));
    assert_eq!(m.exact(Field::CtState), Some(0x21), "+new+trk");
    assert_eq!(m.exact(Field::CtNwSrc), Some(0x0a80_0002));
    assert_eq!(m.exact(Field::CtNwDst), Some(0x0a80_0003));
    assert_eq!(m.exact(Field::CtNwProto), Some(17));
    assert_eq!(m.exact(Field::CtTpDst), Some(5000));

    let file = TempFile::new(frame);
    let printed = ofctl(&["ofp-parse", file.path()]);
    let summary = format!(
        "total_len={} {} (via action) data_len={} (unbuffered)",
        view.total_len,
        format_match(m, OFP_DEFAULT_PRIORITY),
        p.len()
    );
    assert!(
        printed.contains(&summary) && printed.contains("table_id=1 cookie=0x2a"),
        "ovs-ofctl reads otherwise:\n{printed}\nwe read: {summary}"
    );
    if !view.userdata.is_empty() {
        assert!(printed.contains(" userdata=00.00.00.07.01\n"), "{printed}");
    }
}
