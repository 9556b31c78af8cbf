//! decode(encode(m)) == m for one value of every message kind, and every strict prefix of each
//! encoding is rejected with an error (never a panic).

use bytes::Bytes;
use ofnode_proto::*;

fn sample_match() -> Match {
    Match::new()
        .with(Field::InPort, 7)
        .with(Field::EthType, 0x0800)
        .with_masked(Field::Ipv4Src, 0x0a80_0000, 0xfffc_0000)
        .with(Field::IpProto, 17)
        .with(Field::UdpDst, 4789)
        .with_masked(Field::Reg(3), 0x10, 0xf0)
        .with(Field::TunId, 0x1234_5678_9abc)
}

fn sample_actions() -> Vec<Action> {
    vec![
        Action::RegLoad {
            dst: FieldRange::bits(Field::Reg(1), 0, 15),
            value: 0xbeef,
        },
        Action::RegMove {
            src: FieldRange::whole(Field::Reg(0)),
            dst: FieldRange::bits(Field::TunId, 0, 31),
        },
        Action::SetField {
            field: Field::TunDst,
            value: 0xc000_0202,
        },
        Action::SetField {
            field: Field::EthDst,
            value: 0x0a58_0a81_0001,
        },
        Action::OutputReg {
            src: FieldRange::whole(Field::Reg(2)),
            max_len: 0xffff,
        },
        Action::note(b"hello"),
        Action::output(OFPP_CONTROLLER),
        Action::Controller(Controller {
            userdata: b"rule 7".to_vec(),
            meter_id: Some(7),
            ..Controller::default()
        }),
        Action::Controller(Controller {
            reason: OFPR_NO_MATCH,
            controller_id: 3,
            ..Controller::default()
        }),
        Action::Unknown(vec![0, 18, 0, 8, 0, 0, 0, 0]),
    ]
}

fn all_messages() -> Vec<Message> {
    let mut fm = FlowMod::new(FlowModCommand::ModifyStrict);
    fm.cookie = 0xdead_beef;
    fm.cookie_mask = u64::MAX;
    fm.table_id = 30;
    fm.idle_timeout = 10;
    fm.hard_timeout = 20;
    fm.flags = OFPFF_SEND_FLOW_REM | OFPFF_CHECK_OVERLAP;
    fm.match_ = sample_match();
    fm.instructions = vec![
        Instruction::Meter(7),
        Instruction::ApplyActions(sample_actions()),
        Instruction::ClearActions,
        Instruction::WriteActions(vec![Action::output(3)]),
        Instruction::GotoTable(40),
    ];
    let stats = FlowStats {
        table_id: 30,
        duration_sec: 5,
        duration_nsec: 6,
        priority: 100,
        idle_timeout: 1,
        hard_timeout: 2,
        flags: 0,
        cookie: 9,
        packet_count: 10,
        byte_count: 11,
        match_: sample_match(),
        instructions: fm.instructions.clone(),
    };
    let port = Port {
        port_no: 3,
        hw_addr: [1, 2, 3, 4, 5, 6],
        name: "veth0a1b2c3d".into(),
        config: 1,
        state: 4,
        curr: 0x840,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 0,
    };
    vec![
        Message::Hello(Hello {
            versions: vec![1, 4, 6],
        }),
        Message::Error(ErrorMsg {
            kind: ErrorKind::Standard {
                err_type: 2,
                code: 4,
            },
            data: Bytes::from_static(&[4, 14, 0, 8, 0, 0, 0, 1]),
        }),
        Message::Error(ErrorMsg {
            kind: ErrorKind::from_name("OFPBFC_MSG_FAILED").unwrap(),
            data: Bytes::new(),
        }),
        Message::EchoRequest(Bytes::from_static(b"ping")),
        Message::EchoReply(Bytes::new()),
        Message::FeaturesRequest,
        Message::FeaturesReply(SwitchFeatures {
            datapath_id: 1,
            n_buffers: 2,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: 0x4f,
        }),
        Message::GetConfigRequest,
        Message::GetConfigReply(SwitchConfig::with_frag_mode(OFPC_FRAG_NORMAL)),
        Message::SetConfig(SwitchConfig::with_frag_mode(OFPC_FRAG_NX_MATCH)),
        Message::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 60,
            reason: OFPR_ACTION,
            table_id: 5,
            cookie: 1,
            match_: Match::new().with(Field::InPort, 2),
            data: Bytes::from_static(&[0xff; 60]),
        }),
        Message::PortStatus(PortStatus {
            reason: OFPPR_ADD,
            port: port.clone(),
        }),
        Message::PacketOut(PacketOut {
            buffer_id: NO_BUFFER,
            in_port: OFPP_CONTROLLER,
            actions: vec![Action::output(OFPP_TABLE)],
            data: Bytes::from_static(&[1, 2, 3]),
        }),
        Message::FlowMod(fm.clone()),
        Message::FlowMod(FlowMod::new(FlowModCommand::Delete)),
        Message::MultipartRequest(MultipartRequest::Flow(FlowStatsRequest {
            table_id: 20,
            out_port: 3,
            out_group: OFPG_ANY,
            cookie: 1,
            cookie_mask: 1,
            match_: sample_match(),
        })),
        Message::MultipartRequest(MultipartRequest::PortDesc),
        Message::MultipartRequest(MultipartRequest::Desc),
        Message::MultipartRequest(MultipartRequest::Other {
            mp_type: 12,
            flags: 0,
            body: Bytes::new(),
        }),
        Message::MultipartReply(MultipartReply {
            flags: OFPMPF_REPLY_MORE,
            body: MultipartReplyBody::Flow(vec![stats.clone(), stats]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::PortDesc(vec![port.clone(), port]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::Desc(Desc {
                mfr_desc: "Nicira, Inc.".into(),
                hw_desc: "Open vSwitch".into(),
                sw_desc: "3.1.0".into(),
                serial_num: "None".into(),
                dp_desc: "br0".into(),
            }),
        }),
        Message::MultipartRequest(MultipartRequest::FlowMonitor(vec![
            FlowMonitorRequest::all_changes(1),
            FlowMonitorRequest {
                id: 2,
                flags: NXFMF_DELETE,
                out_port: 3,
                table_id: 20,
                match_: sample_match(),
            },
        ])),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::FlowMonitor(vec![
                FlowUpdate::Abbrev { xid: 0x1234 },
                FlowUpdate::Full(FlowChange {
                    event: FlowEvent::Modified,
                    reason: 0,
                    priority: 100,
                    idle_timeout: 1,
                    hard_timeout: 2,
                    table_id: 30,
                    cookie: 0xdead,
                    match_: sample_match(),
                    instructions: vec![Instruction::GotoTable(40)],
                }),
            ]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::Other {
                mp_type: 4,
                body: Bytes::from_static(&[0; 16]),
            },
        }),
        Message::BarrierRequest,
        Message::BarrierReply,
        Message::RoleRequest(RoleMsg {
            role: Role::Master,
            generation_id: 7,
        }),
        Message::RoleReply(RoleMsg {
            role: Role::Slave,
            generation_id: 8,
        }),
        Message::GetAsyncRequest,
        Message::SetAsync(AsyncConfig {
            packet_in_mask: [0x7, 1 << OFPR_ACTION],
            port_status_mask: [0x7, 0x7],
            flow_removed_mask: [0xf, 0],
        }),
        Message::GetAsyncReply(AsyncConfig::default()),
        Message::BundleControl(BundleControl {
            bundle_id: 42,
            ctrl_type: BundleCtrlType::DiscardRequest,
            flags: BundleFlags::ATOMIC,
            properties: Bytes::new(),
        }),
        Message::BundleAdd(BundleAdd {
            bundle_id: 42,
            flags: BundleFlags::ATOMIC | BundleFlags::ORDERED,
            message: Box::new(Message::FlowMod(fm)),
        }),
        Message::Experimenter {
            experimenter: NX_VENDOR_ID,
            exp_type: 20,
            data: Bytes::from_static(&[0, 0, 0, 1]),
        },
        Message::Unknown {
            msg_type: 22,
            body: Bytes::from_static(&[0; 8]),
        },
        Message::MeterMod(MeterMod::add(
            7,
            OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS,
            vec![
                MeterBand::drop(100, 10),
                MeterBand {
                    band_type: BandType::DscpRemark { prec_level: 2 },
                    rate: 200,
                    burst_size: 20,
                },
            ],
        )),
        Message::MeterMod(MeterMod::delete(OFPM_ALL)),
        Message::MultipartRequest(MultipartRequest::MeterStats(OFPM_ALL)),
        Message::MultipartRequest(MultipartRequest::MeterConfig(7)),
        Message::MultipartRequest(MultipartRequest::MeterFeatures),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::MeterConfig(vec![MeterConfig {
                meter_id: 7,
                flags: OFPMF_KBPS,
                bands: vec![MeterBand::drop(1000, 0)],
            }]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::MeterStats(vec![MeterStats {
                meter_id: 7,
                flow_count: 2,
                packet_in_count: 30,
                byte_in_count: 3000,
                duration_sec: 4,
                duration_nsec: 5,
                bands: vec![MeterBandStats {
                    packet_count: 10,
                    byte_count: 1000,
                }],
            }]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::MeterFeatures(MeterFeatures {
                max_meter: 262_144,
                band_types: 1 << OFPMBT_DROP,
                capabilities: 0xf,
                max_bands: 8,
                max_color: 0,
            }),
        }),
        Message::PacketIn2(PacketIn2 {
            full_len: Some(1500),
            table_id: Some(21),
            cookie: Some(0xc0ffee),
            reason: Some(OFPR_ACTION),
            metadata: Some(Match::new().with(Field::InPort, 3).with(Field::Reg(0), 42)),
            userdata: Some(Bytes::from_static(b"rule 7")),
            continuation: Some(Bytes::from_static(&[0x80, 0, 0, 8, 0, 0, 0, 0])),
            unknown: vec![RawProperty {
                prop_type: 0x40,
                payload: Bytes::from_static(b"kept"),
            }],
            ..PacketIn2::new(Bytes::from_static(&[0xaa; 60]))
        }),
        Message::SetPacketInFormat(PacketInFormat::Nxt2),
    ]
}

#[test]
fn every_message_round_trips() {
    for (i, msg) in all_messages().into_iter().enumerate() {
        let xid = 1000 + i as u32;
        let bytes = msg.to_bytes(xid).unwrap();
        assert_eq!(message_length(&bytes), Some(bytes.len()), "{msg:?}");
        let (got_xid, decoded) = Message::decode(&bytes).unwrap_or_else(|e| panic!("{msg:?}: {e}"));
        assert_eq!(got_xid, xid);
        assert_eq!(decoded, msg);
        assert_eq!(decoded.msg_type(), bytes[1]);
    }
}

#[test]
fn truncations_and_extensions_are_errors() {
    for msg in all_messages() {
        let bytes = msg.to_bytes(1).unwrap().to_vec();
        for cut in 0..bytes.len() {
            // Fix up the length field so the frame is self-consistent but short.
            let mut short = bytes[..cut].to_vec();
            if short.len() >= 4 {
                short[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
            }
            let result = Message::decode(&short);
            // A shorter body can still be a valid message for variable-length kinds (echo
            // data, trailing raw bytes); it just must not panic. Fixed layouts must fail.
            if matches!(
                msg,
                Message::FeaturesReply(_) | Message::RoleRequest(_) | Message::PortStatus(_)
            ) {
                assert!(result.is_err(), "{msg:?} cut at {cut}");
            }
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(
            Message::decode(&long).is_err(),
            "frame longer than its header: {msg:?}"
        );
    }
}

#[test]
fn borrowed_bundle_add_encodes_like_the_owned_one() {
    let inner = Message::FlowMod(FlowMod::new(FlowModCommand::Add));
    let flags = BundleFlags::ATOMIC;
    let owned = Message::BundleAdd(BundleAdd {
        bundle_id: 3,
        flags,
        message: Box::new(inner.clone()),
    })
    .to_bytes(9)
    .unwrap();
    let mut borrowed = bytes::BytesMut::new();
    BundleAdd::encode_borrowed(3, flags, &inner, 9, &mut borrowed).unwrap();
    assert_eq!(borrowed, owned);
}

#[test]
fn framed_bundle_add_encodes_like_the_borrowed_one() {
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::ApplyActions(vec![Action::output(7)])];
    let inner = Message::FlowMod(fm);
    let flags = BundleFlags::ATOMIC;
    let mut borrowed = bytes::BytesMut::new();
    BundleAdd::encode_borrowed(3, flags, &inner, 9, &mut borrowed).unwrap();
    // The stored frame has some other xid; the add gives it its own.
    let frame = inner.to_bytes(0).unwrap();
    let mut framed = bytes::BytesMut::new();
    BundleAdd::encode_framed(3, flags, &frame, 9, &mut framed).unwrap();
    assert_eq!(framed, borrowed);
    // A frame that is not exactly one message is refused and nothing is written.
    let mut out = bytes::BytesMut::new();
    assert!(BundleAdd::encode_framed(3, flags, &frame[..frame.len() - 1], 9, &mut out).is_err());
    assert!(BundleAdd::encode_framed(3, flags, &frame[..4], 9, &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn wrong_version_is_rejected() {
    let mut bytes = Message::BarrierRequest.to_bytes(1).unwrap().to_vec();
    bytes[0] = 1;
    assert_eq!(Message::decode(&bytes), Err(DecodeError::BadVersion(1)));
}

#[test]
fn too_long_message_is_refused_by_try_encode_and_to_bytes() {
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::ApplyActions(vec![Action::output(1); 5000])];
    let msg = Message::FlowMod(fm);
    let mut out = bytes::BytesMut::new();
    assert!(msg.try_encode(1, &mut out).is_err());
    assert!(out.is_empty());
    assert!(matches!(msg.to_bytes(1), Err(EncodeError::TooLong { .. })));
}

/// A flow mod of exactly `len` bytes (a multiple of 8): an empty match and one note.
fn flow_mod_of(len: usize) -> Message {
    // Header 8 + fixed part 40 + empty match 8 + apply-actions header 8 + note header 10.
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::ApplyActions(vec![Action::note(&vec![
        0x5a;
        len - 74
    ])])];
    let msg = Message::FlowMod(fm);
    assert_eq!(
        msg.to_bytes(1).unwrap().len(),
        len,
        "test flow of the wanted size"
    );
    msg
}

fn length_field(frame: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([frame[2], frame[3]]))
}

/// The 65,535-byte edge: a flow mod of 65,512 to 65,535 bytes is a valid message on its own,
/// but a bundle add around it (24 bytes more) has no honest 16-bit length; every encoder
/// refuses it and writes nothing. 65,504 bytes (the longest multiple of 8 that fits) travels
/// in a 65,528-byte add whose length field says exactly that.
#[test]
fn bundle_add_frames_at_the_65535_byte_edge() {
    let flags = BundleFlags::ATOMIC | BundleFlags::ORDERED;
    let fits = flow_mod_of(65_504);
    let mut out = bytes::BytesMut::new();
    BundleAdd::encode_borrowed(1, flags, &fits, 9, &mut out).unwrap();
    assert_eq!((out.len(), length_field(&out)), (65_528, 65_528));
    assert!(matches!(
        Message::decode(&out),
        Ok((9, Message::BundleAdd(_)))
    ));

    for len in [65_512, 65_520, 65_528] {
        let inner = flow_mod_of(len);
        let frame = inner.to_bytes(0).unwrap();
        assert_eq!(length_field(&frame), len, "the flow mod alone is fine");
        let too_long = Err(EncodeError::TooLong {
            what: "bundle add message",
            length: len + 24,
            max: 65_535,
        });
        let mut out = bytes::BytesMut::from(&b"kept"[..]);
        assert_eq!(
            BundleAdd::encode_borrowed(1, flags, &inner, 9, &mut out),
            too_long
        );
        assert_eq!(
            BundleAdd::encode_framed(1, flags, &frame, 9, &mut out),
            too_long
        );
        let add = Message::BundleAdd(BundleAdd {
            bundle_id: 1,
            flags,
            message: Box::new(inner),
        });
        assert_eq!(add.try_encode(9, &mut out), too_long);
        assert_eq!(add.to_bytes(9).map(|_| ()), too_long);
        assert_eq!(
            &out[..],
            b"kept",
            "nothing written after the bytes already there"
        );
    }

    // One note byte past 65,535 and the flow mod itself is refused.
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::ApplyActions(vec![Action::note(
        &[0; 65_535 - 74 + 1],
    )])];
    let mut out = bytes::BytesMut::new();
    assert!(matches!(
        Message::FlowMod(fm).try_encode(1, &mut out),
        Err(EncodeError::TooLong { .. })
    ));
    assert!(out.is_empty());
}

/// Values whose wire field cannot hold them are refused with a typed error naming them, never
/// cut or wrapped into another value (a 32-bit port in the 16 bits of a resubmit, conjunction
/// clause 0 sent as 255, a range or value wider than its field); the output is left as it was,
/// in a flow mod and in a group bucket alike.
#[test]
fn values_the_wire_cannot_hold_are_refused_not_cut() {
    let whole = |field| FieldRange::whole(field);
    let cases: Vec<(Action, &str)> = vec![
        (
            Action::Resubmit(Resubmit {
                in_port: 0x1_0005,
                table: Some(30),
                ct: false,
                legacy: false,
            }),
            "resubmit port: 0x10005",
        ),
        (
            Action::Conjunction(Conjunction {
                id: 7,
                clause: 0,
                n_clauses: 3,
            }),
            "conjunction(7,0/3)",
        ),
        (
            Action::Conjunction(Conjunction {
                id: 7,
                clause: 4,
                n_clauses: 3,
            }),
            "conjunction(7,4/3)",
        ),
        (
            Action::Conjunction(Conjunction {
                id: 7,
                clause: 1,
                n_clauses: 65,
            }),
            "conjunction(7,1/65)",
        ),
        (
            Action::SetField {
                field: Field::Reg(0),
                value: 1 << 40,
            },
            "set_field value: 0x10000000000",
        ),
        (
            Action::SetField {
                field: Field::InPort,
                value: 70_000,
            },
            "set_field of in_port: 0x11170",
        ),
        (
            Action::RegLoad {
                dst: whole(Field::CtLabel),
                value: 1,
            },
            "load action: `NXM_NX_CT_LABEL[]`",
        ),
        (
            Action::RegLoad {
                dst: FieldRange::bits(Field::Reg(0), 0, 3),
                value: 0x1f,
            },
            "load value: 0x1f",
        ),
        (
            Action::RegLoad {
                dst: FieldRange {
                    field: Field::Reg(0),
                    ofs: 30,
                    n_bits: 4,
                },
                value: 1,
            },
            "load action: `NXM_NX_REG0[30..33]`",
        ),
        (
            Action::RegMove {
                src: FieldRange::bits(Field::Reg(0), 0, 15),
                dst: whole(Field::Reg(1)),
            },
            "move destination: `NXM_NX_REG1[]`",
        ),
        (
            Action::OutputReg {
                src: FieldRange {
                    field: Field::Reg(2),
                    ofs: 0,
                    n_bits: 0,
                },
                max_len: 0,
            },
            "output:REG action",
        ),
        (
            Action::Ct(Ct {
                zone: CtZone::Field(FieldRange::bits(Field::Reg(0), 0, 7)),
                ..Ct::default()
            }),
            "ct zone: `NXM_NX_REG0[0..7]`",
        ),
        (
            Action::Unknown(vec![0, 18, 0, 16, 0, 0, 0, 0]),
            "unknown action: its length field says 16 but it is 8 bytes",
        ),
        (
            Action::Controller(Controller {
                meter_id: Some(0),
                ..Controller::default()
            }),
            "controller action meter_id: 0x0",
        ),
        (
            Action::Controller(Controller {
                userdata: vec![7; 65_520],
                ..Controller::default()
            }),
            "controller action would be",
        ),
    ];
    for (action, names) in cases {
        let mut fm = FlowMod::new(FlowModCommand::Add);
        fm.instructions = vec![Instruction::ApplyActions(vec![
            Action::output(1),
            action.clone(),
        ])];
        let mut out = bytes::BytesMut::from(&b"kept"[..]);
        let err = Message::FlowMod(fm)
            .try_encode(1, &mut out)
            .expect_err(names);
        assert!(
            err.to_string().contains(names),
            "{action:?}: `{err}` does not say `{names}`"
        );
        assert_eq!(&out[..], b"kept", "{action:?}: something was written");

        let mut gm = GroupMod::delete(1);
        gm.command = GroupCommand::Add;
        gm.group_type = GroupType::All;
        gm.buckets = vec![Bucket::new(GroupType::All, vec![action.clone()])];
        let mut out = bytes::BytesMut::new();
        assert!(
            Message::GroupMod(gm).try_encode(1, &mut out).is_err(),
            "{action:?} in a bucket"
        );
        assert!(out.is_empty());
    }

    // An unknown instruction whose length field lies.
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::Unknown(vec![0, 6, 0, 8, 0, 0, 0, 1, 0, 0])];
    let err = Message::FlowMod(fm)
        .try_encode(1, &mut bytes::BytesMut::new())
        .unwrap_err();
    assert_eq!(
        err,
        EncodeError::RawLength {
            what: "unknown instruction",
            stated: 8,
            actual: 10
        }
    );

    // A meter a flow cannot use (0, or a virtual meter), a meter delete with bands (the
    // switch would not read them).
    for (msg, names) in [
        (Instruction::Meter(0), "meter instruction: 0x0"),
        (
            Instruction::Meter(OFPM_CONTROLLER),
            "meter instruction: 0xfffffffe",
        ),
    ]
    .map(|(inst, names)| {
        let mut fm = FlowMod::new(FlowModCommand::Add);
        fm.instructions = vec![inst];
        (Message::FlowMod(fm), names)
    })
    .into_iter()
    .chain([(
        Message::MeterMod(MeterMod {
            bands: vec![MeterBand::drop(1, 0)],
            ..MeterMod::delete(3)
        }),
        "meter delete",
    )]) {
        let err = msg.try_encode(1, &mut bytes::BytesMut::new()).unwrap_err();
        assert!(
            err.to_string().contains(names),
            "`{err}` does not say `{names}`"
        );
    }

    // The edges that do fit: reserved ports go in OpenFlow 1.0 numbers, and the last clause.
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::ApplyActions(vec![
        Action::Resubmit(Resubmit {
            in_port: OFPP_LOCAL,
            table: None,
            ct: false,
            legacy: false,
        }),
        Action::SetField {
            field: Field::InPort,
            value: 0xfeff,
        },
    ])];
    let mut conj = FlowMod::new(FlowModCommand::Add);
    conj.instructions = vec![Instruction::ApplyActions(vec![Action::Conjunction(
        Conjunction {
            id: 7,
            clause: 64,
            n_clauses: 64,
        },
    )])];
    for msg in [Message::FlowMod(fm), Message::FlowMod(conj)] {
        assert_eq!(Message::decode(&msg.to_bytes(1).unwrap()), Ok((1, msg)));
    }
}
