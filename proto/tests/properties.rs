//! Property tests: decode(encode(m)) == m over generated messages; printing then parsing a
//! generated flow gives it back; and no byte string or text, however broken, makes a decoder or
//! the parser panic.

use bytes::Bytes;
use ofnode_proto::text::{
    format_flow_mod, format_group_mod, format_meter_mod, parse_flow, parse_group, parse_meter,
};
use ofnode_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn any_field() -> impl Strategy<Value = Field> {
    // Every row of the field table, so a field added to the table is fuzzed too.
    prop::sample::select(FIELDS.iter().map(|row| row.field).collect::<Vec<_>>())
}

fn width_mask(field: Field) -> u128 {
    field.info().significant
}

/// Any match a switch accepts: a packet type, then fields whose prerequisites it meets (a
/// ct_state implying a connection first, so the ct_nw_*/ct_tp_* fields can follow), values
/// within the field's bits, masks only where the field takes them.
fn any_match() -> impl Strategy<Value = Match> {
    // (eth_type, ip_proto) of the packet, then fields that packet allows.
    let protocol = prop_oneof![
        Just((None, None)),
        Just((Some(0x0800), None)),
        Just((Some(0x0800), Some(6))),
        Just((Some(0x0800), Some(17))),
        Just((Some(0x0800), Some(1))),
        Just((Some(0x0800), Some(47))),
        Just((Some(0x0800), Some(132))),
        Just((Some(0x86dd), Some(6))),
        Just((Some(0x86dd), Some(132))),
        Just((Some(0x0806), None)),
        Just((Some(0x8035), None)),
        Just((Some(0x88cc), None)),
    ];
    let frag = prop::sample::select(vec![(0u128, 3u128), (1, 1), (1, 3), (3, 3), (0, 2)]);
    let ct = prop::option::of((
        prop::sample::select(vec![
            (0x22u128, 0x22u128),
            (0x21, 0xff),
            (0x20, 0x30),
            (0x0a, 0x2f),
        ]),
        prop::option::of(prop::sample::select(vec![1u128, 6, 17])),
    ));
    (
        protocol,
        vec(
            (any_field(), any::<u128>(), any::<u128>(), any::<bool>()),
            0..8,
        ),
        prop::option::of(printable_port()),
        prop::option::of(frag),
        ct,
    )
        .prop_map(|((eth_type, ip_proto), entries, in_port, frag, ct)| {
            let mut m = Match::new();
            if let Some(e) = eth_type {
                m.set(Field::EthType, e);
            }
            if let Some(p) = ip_proto {
                m.set(Field::IpProto, p);
            }
            if let Some(port) = in_port {
                m.set(Field::InPort, u64::from(port));
            }
            if let (Some((v, mask)), true) = (frag, Prereq::IpAny.is_met(&m)) {
                m.set_masked_u128(Field::IpFrag, v, mask);
            }
            if let Some(((state, mask), proto)) = ct {
                m.set_masked_u128(Field::CtState, state, mask);
                if let Some(p) = proto {
                    m.set_masked_u128(Field::CtNwProto, p, u128::MAX);
                }
            }
            for (field, value, mask, exact) in entries {
                let info = field.info();
                let special = matches!(
                    field,
                    Field::InPort
                        | Field::EthType
                        | Field::IpProto
                        | Field::IpFrag
                        | Field::CtState
                        | Field::CtNwProto
                );
                if special || !info.prereq.is_met(&m) {
                    continue;
                }
                if exact || !info.maskable {
                    m.set_masked_u128(field, value & width_mask(field), u128::MAX);
                } else {
                    m.set_masked_u128(field, value, mask);
                }
            }
            m
        })
}

/// A bit range of `field` as NX actions address it: at most 64 bits, which is what the
/// `ofs_nbits` of load and output:REG can say.
fn range_of(field: Field) -> impl Strategy<Value = FieldRange> {
    let bits = FieldRange::whole(field).n_bits;
    (0..bits).prop_flat_map(move |ofs| {
        (1..=(bits - ofs).min(64)).prop_map(move |n_bits| FieldRange { field, ofs, n_bits })
    })
}

/// Fields that actions may write, inside a `ct` or outside it, whose packet-type
/// prerequisites every match meets (so a generated flow is consistent with any match).
fn writable_fields(inside_ct: bool, any_packet: bool) -> Vec<Field> {
    FIELDS
        .iter()
        .filter(|row| row.writable(inside_ct) && (!any_packet || row.prereq == Prereq::None))
        .map(|row| row.field)
        .collect()
}

/// A load of a value that fits its destination.
fn load_of(fields: Vec<Field>) -> impl Strategy<Value = Action> {
    (
        prop::sample::select(fields).prop_flat_map(range_of),
        any::<u64>(),
    )
        .prop_map(|(dst, v)| {
            let value = if dst.n_bits >= 64 {
                v
            } else {
                v & ((1u64 << dst.n_bits) - 1)
            };
            Action::RegLoad { dst, value }
        })
}

/// Fields readable on any packet (no prerequisites).
fn any_packet_fields() -> Vec<Field> {
    FIELDS
        .iter()
        .filter(|row| row.prereq == Prereq::None)
        .map(|row| row.field)
        .collect()
}

/// A move between two ranges of equal width, from a field any packet has into one of
/// `dst_fields`.
fn move_to(dst_fields: Vec<Field>) -> impl Strategy<Value = Action> {
    let src = prop::sample::select(any_packet_fields()).prop_flat_map(range_of);
    (src, prop::sample::select(dst_fields)).prop_flat_map(|(src, dst_field)| {
        let dst_bits = FieldRange::whole(dst_field).n_bits;
        let n = src.n_bits.min(dst_bits);
        let src = FieldRange { n_bits: n, ..src };
        let src = if src.is_valid() {
            src
        } else {
            FieldRange { ofs: 0, ..src }
        };
        (Just(src), 0..=(dst_bits - n)).prop_map(move |(src, ofs)| Action::RegMove {
            src,
            dst: FieldRange {
                field: dst_field,
                ofs,
                n_bits: n,
            },
        })
    })
}

/// A set_field of a whole field among `fields` (a valid port for in_port).
fn set_field_of(fields: Vec<Field>) -> impl Strategy<Value = Action> {
    (
        prop::sample::select(fields),
        any::<u128>(),
        printable_port(),
    )
        .prop_map(|(field, v, port)| {
            let value = if field == Field::InPort {
                u128::from(port)
            } else {
                v & width_mask(field)
            };
            Action::SetField { field, value }
        })
}

fn printable_port() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..0xff00,
        prop::sample::select(RESERVED_PORTS.iter().map(|(p, _)| *p).collect::<Vec<_>>()),
    ]
}

/// A port a packet can be output to (any but OFPP_ANY).
fn output_port() -> impl Strategy<Value = u32> {
    printable_port().prop_filter("ANY is no output port", |p| *p != OFPP_ANY)
}

fn nat_range() -> impl Strategy<Value = NatRange> {
    (
        1u32..0xffff_0000,
        prop::option::of(1u32..0x1000),
        prop::option::of((1u16..0x8000, prop::option::of(1u16..0x1000))),
    )
        .prop_map(|(ip, span, ports)| NatRange {
            ip_min: ip.into(),
            ip_max: span.map(|s| (ip + s).into()),
            port_min: ports.map(|(p, _)| p),
            port_max: ports.and_then(|(p, span)| span.map(|s| p + s)),
        })
}

/// A nat as ovs-ofctl can print it back: flags only with a range (OVS prints them only
/// then), and with `commit` anything but a plain `nat`.
fn printable_nat(commit: bool) -> impl Strategy<Value = Nat> {
    let plain = Just(Nat::default());
    let with_range = (
        prop::sample::select(vec![NX_NAT_F_SRC, NX_NAT_F_DST]),
        prop::sample::select(vec![
            0,
            NX_NAT_F_PERSISTENT,
            NX_NAT_F_PROTO_HASH,
            NX_NAT_F_PROTO_RANDOM | NX_NAT_F_PERSISTENT,
        ]),
        prop::option::of(nat_range()),
    )
        .prop_map(|(dir, flags, range)| Nat {
            flags: dir | if range.is_some() { flags } else { 0 },
            range,
        });
    if commit {
        prop_oneof![plain, with_range].boxed()
    } else {
        plain.boxed()
    }
}

/// A `ct` action ovs-ofctl accepts and prints back as it was.
fn printable_ct() -> impl Strategy<Value = Action> {
    let zone = prop_oneof![
        any::<u16>().prop_map(CtZone::Imm),
        (0u8..16, prop::bool::ANY).prop_map(|(r, upper)| CtZone::Field(FieldRange::bits(
            Field::Reg(r),
            if upper { 16 } else { 0 },
            if upper { 31 } else { 15 }
        ))),
    ];
    let flags = prop::sample::select(vec![0, NX_CT_F_COMMIT, NX_CT_F_COMMIT | NX_CT_F_FORCE]);
    (flags, zone, prop::option::of(0u8..255)).prop_flat_map(|(flags, zone, table)| {
        let commit = flags & NX_CT_F_COMMIT != 0;
        let inside = writable_fields(true, true);
        let exec = if commit {
            vec(
                prop_oneof![
                    set_field_of(inside.clone()),
                    load_of(inside.clone()),
                    move_to(inside)
                ],
                0..3,
            )
            .boxed()
        } else {
            Just(Vec::new()).boxed()
        };
        (prop::option::of(printable_nat(commit)), exec).prop_map(move |(nat, exec)| {
            let mut actions: Vec<Action> = nat.into_iter().map(Action::Nat).collect();
            actions.extend(exec);
            Action::Ct(Ct {
                flags,
                zone,
                table,
                alg: 0,
                actions,
            })
        })
    })
}

fn printable_resubmit(ct_valid: bool) -> impl Strategy<Value = Action> {
    (
        prop::option::of(output_port()),
        prop::option::of(0u8..255),
        any::<bool>(),
    )
        .prop_filter("a port or a table", |(port, table, _)| {
            port.is_some_and(|p| p != OFPP_IN_PORT) || table.is_some()
        })
        .prop_map(move |(port, table, ct)| {
            Action::Resubmit(Resubmit {
                in_port: port.unwrap_or(OFPP_IN_PORT),
                table,
                ct: ct && ct_valid,
                legacy: false,
            })
        })
}

/// A `controller(...)` action that says more than an output to CONTROLLER (which is what
/// ovs-ofctl reads for one that does not), with the reasons ovs-ofctl names.
fn printable_controller() -> impl Strategy<Value = Action> {
    (
        any::<u16>(),
        prop_oneof![Just(0u16), any::<u16>()],
        prop_oneof![Just(OFPR_ACTION), 0u8..=5],
        vec(any::<u8>(), 0..24),
        any::<bool>(),
        prop::option::of(1u32..),
    )
        .prop_map(
            |(max_len, controller_id, reason, userdata, pause, meter_id)| Controller {
                max_len,
                controller_id,
                reason,
                userdata,
                pause,
                meter_id,
                controller2: false,
            },
        )
        .prop_filter("says more than output:CONTROLLER", |c| {
            c.reason != OFPR_ACTION
                || c.controller_id != 0
                || !c.userdata.is_empty()
                || c.pause
                || c.meter_id.is_some()
        })
        .prop_map(Action::Controller)
}

/// Any controller action a switch accepts: any reason, and NXAST_CONTROLLER2 also where
/// NXAST_CONTROLLER would do (as a switch sends back one that came so).
fn any_controller() -> impl Strategy<Value = Action> {
    (
        any::<(u16, u16, u8, bool, bool)>(),
        vec(any::<u8>(), 0..24),
        prop::option::of(1u32..),
    )
        .prop_map(
            |((max_len, controller_id, reason, pause, v2), userdata, meter_id)| {
                let mut c = Controller {
                    max_len,
                    controller_id,
                    reason,
                    userdata,
                    pause,
                    meter_id,
                    controller2: false,
                };
                c.controller2 = v2 && c.userdata.is_empty() && !c.pause && c.meter_id.is_none();
                Action::Controller(c)
            },
        )
}

/// An action ovs-ofctl prints in a form it parses back to the same action, consistent with
/// any match that has `ip` (`ip`: whether it has) and `ct_valid` (a ct_state implying a
/// connection), and whose packet has the `packet_fields` (set and loaded too: the transport
/// ports of a TCP, UDP or SCTP flow).
fn printable_action(ip: bool, ct_valid: bool, packet_fields: Vec<Field>) -> BoxedStrategy<Action> {
    let outside = writable_fields(false, true);
    let mut options: Vec<BoxedStrategy<Action>> = vec![
        output_port().prop_map(Action::output).boxed(),
        any::<u16>()
            .prop_map(|max_len| Action::Output {
                port: OFPP_CONTROLLER,
                max_len,
            })
            .boxed(),
        any_field()
            .prop_filter("readable without prerequisites", |f| {
                f.info().prereq == Prereq::None
            })
            .prop_flat_map(range_of)
            .prop_map(|src| Action::OutputReg {
                src,
                max_len: 0xffff,
            })
            .boxed(),
        load_of(outside.clone()).boxed(),
        move_to(outside.clone()).boxed(),
        set_field_of(outside).boxed(),
        vec(any::<u8>(), 0..40)
            .prop_map(|b| Action::note(&b))
            .boxed(),
        Just(Action::CtClear).boxed(),
        (0u32..=0xffff_ff00).prop_map(Action::Group).boxed(),
        Just(Action::DecTtl).boxed(),
        printable_resubmit(ct_valid).boxed(),
        printable_controller().boxed(),
    ];
    if ip {
        options.push(printable_ct().boxed());
    }
    if !packet_fields.is_empty() {
        options.push(load_of(packet_fields.clone()).boxed());
        options.push(set_field_of(packet_fields).boxed());
    }
    prop::strategy::Union::new(options).boxed()
}

/// Any action a switch accepts in a flow, consistent or not with its match, plus actions this
/// crate does not model (kept raw).
fn any_action() -> BoxedStrategy<Action> {
    prop_oneof![
        4 => printable_action(true, true, writable_fields(false, false)),
        1 => any_controller(),
        1 => unknown_action(),
    ]
    .boxed()
}

/// An action we do not model, kept verbatim: an OpenFlow 1.3 type we do not interpret, or a
/// Nicira subtype we do not interpret.
fn unknown_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (
            prop::sample::select(vec![11u16, 12, 16, 18, 20, 27]),
            any::<u8>()
        )
            .prop_map(|(t, fill)| {
                let mut raw = vec![0, 0, 0, 8, fill, fill, fill, fill];
                raw[..2].copy_from_slice(&t.to_be_bytes());
                Action::Unknown(raw)
            }),
        (
            prop::sample::select(vec![10u16, 16, 17, 19, 29]),
            0usize..3,
            any::<u8>()
        )
            .prop_map(|(subtype, words, fill)| {
                let len = 16 + 8 * words;
                let mut raw = vec![fill; len];
                raw[..4].copy_from_slice(&[0xff, 0xff, 0, len as u8]);
                raw[4..8].copy_from_slice(&0x2320u32.to_be_bytes());
                raw[8..10].copy_from_slice(&subtype.to_be_bytes());
                Action::Unknown(raw)
            }),
    ]
}

fn conjunctions() -> impl Strategy<Value = Vec<Instruction>> {
    (
        vec(
            (any::<u32>(), 2u8..=64).prop_flat_map(|(id, n)| {
                (1..=n).prop_map(move |clause| {
                    Action::Conjunction(Conjunction {
                        id,
                        clause,
                        n_clauses: n,
                    })
                })
            }),
            1..4,
        ),
        prop::option::of(vec(any::<u8>(), 0..8)),
    )
        .prop_map(|(mut actions, note)| {
            actions.extend(note.map(|n| Action::note(&n)));
            vec![Instruction::ApplyActions(actions)]
        })
}

/// Whether OVS takes `action` in an action set (write_actions); it refuses the others.
fn in_action_set(action: &Action) -> bool {
    !matches!(
        action,
        Action::OutputReg { .. }
            | Action::Controller(_)
            | Action::Note(_)
            | Action::Nat(_)
            | Action::Conjunction(_)
    )
}

/// Instructions from `action`: apply, clear, write, goto, or a conjunction set.
fn instructions_of(
    action: BoxedStrategy<Action>,
    unknown: bool,
) -> BoxedStrategy<Vec<Instruction>> {
    let plain = (
        vec(action.clone(), 0..6),
        any::<bool>(),
        prop::option::of(vec(
            action.prop_filter("in an action set", in_action_set),
            1..3,
        )),
        prop::option::of(any::<u8>()),
        prop::option::of(1..=OFPM_MAX),
        prop::option::of(any::<(u64, u64)>()).prop_map(move |m| m.filter(|_| unknown)),
    )
        .prop_map(|(apply, clear, write, goto, meter, metadata)| {
            let mut out: Vec<Instruction> = meter.map(Instruction::Meter).into_iter().collect();
            if let Some((value, mask)) = metadata {
                // Write-metadata, which this crate keeps raw.
                let mut raw = vec![0, 2, 0, 24, 0, 0, 0, 0];
                raw.extend(value.to_be_bytes());
                raw.extend(mask.to_be_bytes());
                out.push(Instruction::Unknown(raw));
            }
            if !apply.is_empty() {
                out.push(Instruction::ApplyActions(apply));
            }
            if clear {
                out.push(Instruction::ClearActions);
            }
            out.extend(write.map(Instruction::WriteActions));
            out.extend(goto.map(Instruction::GotoTable));
            out
        });
    prop_oneof![4 => plain, 1 => conjunctions()].boxed()
}

fn any_command() -> impl Strategy<Value = FlowModCommand> {
    prop::sample::select(vec![
        FlowModCommand::Add,
        FlowModCommand::Modify,
        FlowModCommand::ModifyStrict,
        FlowModCommand::Delete,
        FlowModCommand::DeleteStrict,
    ])
}

fn any_flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        (any::<u64>(), any::<u64>(), any::<u8>(), any_command()),
        (any::<u16>(), any::<u16>(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u16>()),
        any_match(),
        instructions_of(any_action(), true),
    )
        .prop_map(
            |(
                (cookie, cookie_mask, table_id, command),
                (idle, hard, priority, buffer_id),
                (out_port, out_group, flags),
                match_,
                instructions,
            )| FlowMod {
                cookie,
                cookie_mask,
                table_id,
                command,
                idle_timeout: idle,
                hard_timeout: hard,
                priority,
                buffer_id,
                out_port,
                out_group,
                flags,
                match_,
                instructions,
            },
        )
}

fn any_flow_stats() -> impl Strategy<Value = FlowStats> {
    (any_flow_mod(), any::<(u32, u32, u64, u64)>()).prop_map(|(fm, (sec, nsec, packets, bytes))| {
        FlowStats {
            table_id: fm.table_id,
            duration_sec: sec,
            duration_nsec: nsec,
            priority: fm.priority,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            flags: fm.flags,
            cookie: fm.cookie,
            packet_count: packets,
            byte_count: bytes,
            match_: fm.match_,
            instructions: fm.instructions,
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn any_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// A group mod a switch accepts: buckets as the group's type allows them.
fn any_group_mod(action: BoxedStrategy<Action>) -> impl Strategy<Value = GroupMod> {
    let group_type = prop::sample::select(vec![
        GroupType::All,
        GroupType::Select,
        GroupType::Indirect,
        GroupType::FastFailover,
    ]);
    let command = prop::sample::select(vec![
        GroupCommand::Add,
        GroupCommand::Modify,
        GroupCommand::AddOrModify,
        GroupCommand::Delete,
    ]);
    (command, group_type, 0u32..=OFPG_MAX).prop_flat_map(move |(command, group_type, group_id)| {
        let n = match (command, group_type) {
            (GroupCommand::Delete, _) => 0..1,
            (_, GroupType::Indirect) => 1..2,
            _ => 0..4,
        };
        let bucket = (
            vec(action.clone(), 0..3),
            1u16..=u16::MAX,
            prop::option::of(output_port().prop_filter("watchable", |p| *p < 0xff00)),
            prop::option::of(0u32..=OFPG_MAX),
        )
            .prop_map(move |(actions, weight, port, group)| {
                let mut b = Bucket::new(group_type, actions);
                match group_type {
                    GroupType::Select => {
                        b.weight = weight;
                        b.watch_port = port.unwrap_or(OFPP_ANY);
                    }
                    GroupType::FastFailover => {
                        b.watch_port = port.unwrap_or(OFPP_ANY);
                        b.watch_group = group.unwrap_or(if port.is_none() { 1 } else { OFPG_ANY });
                    }
                    _ => {}
                }
                b
            });
        vec(bucket, n).prop_map(move |buckets| GroupMod {
            command,
            group_type: if command == GroupCommand::Delete {
                GroupType::All
            } else {
                group_type
            },
            group_id,
            buckets,
        })
    })
}

fn any_band() -> impl Strategy<Value = MeterBand> {
    (
        prop_oneof![
            Just(BandType::Drop),
            any::<u8>().prop_map(|prec_level| BandType::DscpRemark { prec_level })
        ],
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(band_type, rate, burst_size)| MeterBand {
            band_type,
            rate,
            burst_size,
        })
}

/// A meter mod a switch accepts: a delete of nothing more than its id, or any flags but both
/// rate units with any bands.
fn any_meter_mod() -> impl Strategy<Value = MeterMod> {
    (
        prop::sample::select(vec![
            MeterCommand::Add,
            MeterCommand::Modify,
            MeterCommand::Delete,
        ]),
        any::<u32>(),
        any::<u16>().prop_filter("not both units", |f| {
            f & (OFPMF_KBPS | OFPMF_PKTPS) != OFPMF_KBPS | OFPMF_PKTPS
        }),
        vec(any_band(), 0..4),
    )
        .prop_map(|(command, meter_id, flags, bands)| match command {
            MeterCommand::Delete => MeterMod::delete(meter_id),
            // A meter id an add or modify may name.
            _ => MeterMod {
                command,
                meter_id: if meter_id == 0 || meter_id == OFPM_ALL {
                    OFPM_CONTROLLER
                } else {
                    meter_id.min(OFPM_MAX)
                },
                flags,
                bands,
            },
        })
}

/// A meter as add-meter reads it (and dump-meters prints it): one rate unit, bands with a
/// rate, a burst size exactly when the meter has `burst`, a DSCP band's level non-zero.
fn printable_meter_mod() -> impl Strategy<Value = MeterMod> {
    (
        prop_oneof![1..=OFPM_MAX, Just(OFPM_CONTROLLER), Just(OFPM_SLOWPATH)],
        prop::sample::select(vec![OFPMF_KBPS, OFPMF_PKTPS]),
        any::<(bool, bool, bool)>(),
        vec(any_band(), 1..4),
    )
        .prop_map(|(meter_id, unit, (burst, stats, modify), bands)| {
            let flags =
                unit | if burst { OFPMF_BURST } else { 0 } | if stats { OFPMF_STATS } else { 0 };
            let bands = bands
                .into_iter()
                .map(|b| MeterBand {
                    band_type: match b.band_type {
                        BandType::DscpRemark { prec_level } => BandType::DscpRemark {
                            prec_level: prec_level.max(1),
                        },
                        drop => drop,
                    },
                    rate: b.rate.max(1),
                    burst_size: if burst { b.burst_size.max(1) } else { 0 },
                })
                .collect();
            MeterMod {
                command: if modify {
                    MeterCommand::Modify
                } else {
                    MeterCommand::Add
                },
                meter_id,
                flags,
                bands,
            }
        })
}

/// An NXT_PACKET_IN2 as a switch may send it: a packet, any of the other properties, and
/// properties this crate does not know.
fn any_packet_in2() -> impl Strategy<Value = PacketIn2> {
    (
        vec(any::<u8>(), 1..80).prop_map(Bytes::from),
        (
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u8>()),
            prop::option::of(any::<u64>()),
            prop::option::of(any::<u8>()),
        ),
        prop::option::of(any_match()),
        prop::option::of(any_bytes(24)),
        prop::option::of(any_bytes(40)),
        vec((9u16..0xfff0, any_bytes(20)), 0..3),
    )
        .prop_map(
            |(
                packet,
                (full_len, buffer_id, table_id, cookie, reason),
                metadata,
                userdata,
                continuation,
                unknown,
            )| {
                let full_len = full_len.map(|len| len.max(packet.len() as u32));
                PacketIn2 {
                    packet,
                    full_len,
                    buffer_id,
                    table_id,
                    cookie,
                    reason,
                    metadata,
                    userdata,
                    continuation,
                    unknown: unknown
                        .into_iter()
                        .map(|(prop_type, payload)| RawProperty { prop_type, payload })
                        .collect(),
                }
            },
        )
}

fn any_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        any_meter_mod().prop_map(Message::MeterMod),
        any_packet_in2().prop_map(Message::PacketIn2),
        prop::sample::select(vec![
            PacketInFormat::Standard,
            PacketInFormat::Nxt,
            PacketInFormat::Nxt2
        ])
        .prop_map(Message::SetPacketInFormat),
        prop_oneof![
            any::<u32>().prop_map(MultipartRequest::MeterStats),
            any::<u32>().prop_map(MultipartRequest::MeterConfig),
            Just(MultipartRequest::MeterFeatures),
        ]
        .prop_map(Message::MultipartRequest),
        vec(any_meter_mod(), 0..3).prop_map(|meters| {
            Message::MultipartReply(MultipartReply {
                flags: 0,
                body: MultipartReplyBody::MeterConfig(
                    meters
                        .into_iter()
                        .map(|m| MeterConfig {
                            meter_id: m.meter_id,
                            flags: m.flags,
                            bands: m.bands,
                        })
                        .collect(),
                ),
            })
        }),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..4)
            ),
            0..3
        )
        .prop_map(|meters| {
            let stats = meters
                .into_iter()
                .map(
                    |((meter_id, flow_count, packets, bytes, sec, nsec), bands)| MeterStats {
                        meter_id,
                        flow_count,
                        packet_in_count: packets,
                        byte_in_count: bytes,
                        duration_sec: sec,
                        duration_nsec: nsec,
                        bands: bands
                            .into_iter()
                            .map(|(packet_count, byte_count)| MeterBandStats {
                                packet_count,
                                byte_count,
                            })
                            .collect(),
                    },
                )
                .collect();
            Message::MultipartReply(MultipartReply {
                flags: 1,
                body: MultipartReplyBody::MeterStats(stats),
            })
        }),
        any::<(u32, u32, u32, u8, u8)>().prop_map(
            |(max_meter, band_types, capabilities, max_bands, max_color)| {
                Message::MultipartReply(MultipartReply {
                    flags: 0,
                    body: MultipartReplyBody::MeterFeatures(MeterFeatures {
                        max_meter,
                        band_types,
                        capabilities,
                        max_bands,
                        max_color,
                    }),
                })
            }
        ),
        any_group_mod(any_action()).prop_map(Message::GroupMod),
        vec(any_group_mod(any_action()), 0..3).prop_map(|groups| {
            Message::MultipartReply(MultipartReply {
                flags: 0,
                body: MultipartReplyBody::GroupDesc(
                    groups
                        .into_iter()
                        .map(|g| GroupDesc {
                            group_type: g.group_type,
                            group_id: g.group_id,
                            buckets: g.buckets,
                        })
                        .collect(),
                ),
            })
        }),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..4)
            ),
            0..3
        )
        .prop_map(|groups| {
            let stats = groups
                .into_iter()
                .map(
                    |((group_id, ref_count, packet_count, byte_count, sec, nsec), b)| GroupStats {
                        group_id,
                        ref_count,
                        packet_count,
                        byte_count,
                        duration_sec: sec,
                        duration_nsec: nsec,
                        buckets: b
                            .into_iter()
                            .map(|(packet_count, byte_count)| BucketCounter {
                                packet_count,
                                byte_count,
                            })
                            .collect(),
                    },
                )
                .collect();
            Message::MultipartReply(MultipartReply {
                flags: 1,
                body: MultipartReplyBody::GroupStats(stats),
            })
        }),
        prop_oneof![
            any::<u32>().prop_map(MultipartRequest::GroupStats),
            Just(MultipartRequest::GroupDesc)
        ]
        .prop_map(Message::MultipartRequest),
        (any::<u32>(), any_group_mod(any_action())).prop_map(|(bundle_id, gm)| {
            Message::BundleAdd(BundleAdd {
                bundle_id,
                flags: BundleFlags::ATOMIC | BundleFlags::ORDERED,
                message: Box::new(Message::GroupMod(gm)),
            })
        }),
        prop::collection::btree_set(1u8..=64, 1..4).prop_map(|v| Message::Hello(Hello {
            versions: v.into_iter().collect()
        })),
        (any::<u16>(), any::<u16>(), any_bytes(64)).prop_map(|(t, code, data)| {
            let kind = if t == 0xffff {
                ErrorKind::Experimenter {
                    experimenter: u32::from(code) << 8,
                    exp_code: code,
                }
            } else {
                ErrorKind::Standard { err_type: t, code }
            };
            Message::Error(ErrorMsg { kind, data })
        }),
        any_bytes(32).prop_map(Message::EchoRequest),
        any_flow_mod().prop_map(Message::FlowMod),
        (any::<u16>(), vec(any_flow_stats(), 0..4)).prop_map(|(flags, flows)| {
            Message::MultipartReply(MultipartReply {
                flags,
                body: MultipartReplyBody::Flow(flows),
            })
        }),
        (
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any_match()
        )
            .prop_map(
                |(table_id, out_port, out_group, cookie, cookie_mask, match_)| {
                    Message::MultipartRequest(MultipartRequest::Flow(FlowStatsRequest {
                        table_id,
                        out_port,
                        out_group,
                        cookie,
                        cookie_mask,
                        match_,
                    }))
                }
            ),
        (any::<u32>(), any::<u16>(), any_flow_mod()).prop_map(|(bundle_id, flags, fm)| {
            Message::BundleAdd(BundleAdd {
                bundle_id,
                flags: BundleFlags(flags),
                message: Box::new(Message::FlowMod(fm)),
            })
        }),
        (any::<u32>(), 0u16..8, any::<u16>()).prop_map(|(bundle_id, t, flags)| {
            Message::BundleControl(BundleControl {
                bundle_id,
                ctrl_type: BundleCtrlType::from_u16(t).unwrap(),
                flags: BundleFlags(flags),
                properties: Bytes::new(),
            })
        }),
        (
            any::<u32>(),
            any::<u32>(),
            vec(any_action(), 0..5),
            any_bytes(64)
        )
            .prop_map(|(buffer_id, in_port, actions, data)| {
                Message::PacketOut(PacketOut {
                    buffer_id,
                    in_port,
                    actions,
                    data,
                })
            }),
        (any::<(u32, u16, u8, u8, u64)>(), any_match(), any_bytes(64)).prop_map(
            |((buffer_id, total_len, reason, table_id, cookie), match_, data)| {
                Message::PacketIn(PacketIn {
                    buffer_id,
                    total_len,
                    reason,
                    table_id,
                    cookie,
                    match_,
                    data,
                })
            }
        ),
        (any::<u16>(), any::<u16>()).prop_map(|(flags, miss_send_len)| {
            Message::SetConfig(SwitchConfig {
                flags,
                miss_send_len,
            })
        }),
    ]
}

/// A flow ovs-ofctl could have printed: a match whose fields meet their prerequisites and
/// actions, consistent with the match, in the forms the printer writes.
fn printable_flow() -> impl Strategy<Value = FlowMod> {
    (
        (
            any::<u64>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            0u16..32,
        ),
        any_match(),
    )
        .prop_flat_map(|(header, match_)| {
            let ip = match_.exact(Field::EthType) == Some(0x0800);
            let ct_valid = Prereq::CtValid.is_met(&match_);
            let packet_fields: Vec<Field> = FIELDS
                .iter()
                .filter(|row| row.writable(false) && row.prereq != Prereq::None)
                .filter(|row| row.prereq.is_met(&match_))
                .map(|row| row.field)
                .collect();
            let instructions =
                instructions_of(printable_action(ip, ct_valid, packet_fields), false);
            (Just(header), Just(match_), instructions)
        })
        .prop_map(
            |((cookie, table_id, priority, idle, hard, flags), match_, instructions)| {
                let mut fm = FlowMod::new(FlowModCommand::Add);
                fm.cookie = cookie;
                fm.table_id = table_id;
                fm.priority = priority;
                fm.idle_timeout = idle;
                fm.hard_timeout = hard;
                fm.flags = flags;
                fm.match_ = match_;
                fm.instructions = instructions;
                fm
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_inverts_encode(msg in any_message(), xid in any::<u32>()) {
        let mut out = bytes::BytesMut::new();
        prop_assume!(msg.try_encode(xid, &mut out).is_ok());
        let (got_xid, decoded) = Message::decode(&out).unwrap();
        prop_assert_eq!(got_xid, xid);
        prop_assert_eq!(decoded, msg);
    }

    #[test]
    fn parse_inverts_print(fm in printable_flow()) {
        let text = format_flow_mod(&fm);
        let parsed = parse_flow(&text, FlowModCommand::Add);
        prop_assert_eq!(parsed, Ok(fm), "text: {}", text);
    }

    /// A group as ovs-ofctl prints it parses back to itself (the command word aside).
    #[test]
    fn group_parse_inverts_print(gm in any_group_mod(printable_action(false, false, vec![]))) {
        prop_assume!(gm.command != GroupCommand::AddOrModify);
        let printed = format_group_mod(&gm);
        let (word, text) = printed.split_once(' ').unwrap();
        let command = match word {
            "ADD" => GroupCommand::Add,
            "MOD" => GroupCommand::Modify,
            _ => GroupCommand::Delete,
        };
        let text = if command == GroupCommand::Delete {
            text.split(",type").next().unwrap().to_string()
        } else {
            text.to_string()
        };
        prop_assert_eq!(parse_group(&text, command), Ok(gm), "text: {}", text);
    }

    /// A meter as ofp-print prints it parses back to itself (the command word aside).
    #[test]
    fn meter_parse_inverts_print(mm in printable_meter_mod()) {
        let printed = format_meter_mod(&mm);
        let (word, text) = printed.split_once(' ').unwrap();
        let command = if word == "MOD" { MeterCommand::Modify } else { MeterCommand::Add };
        prop_assert_eq!(parse_meter(text, command), Ok(mm), "text: {}", text);
    }

    #[test]
    fn random_frames_never_panic(msg_type in 0u8..32, body in vec(any::<u8>(), 0..512), xid in any::<u32>()) {
        let mut frame = vec![OFP_VERSION, msg_type, 0, 0];
        frame.extend(xid.to_be_bytes());
        frame.extend(body);
        let len = frame.len() as u16;
        frame[2..4].copy_from_slice(&len.to_be_bytes());
        let _ = Message::decode(&frame);
    }

    #[test]
    fn corrupted_messages_never_panic(msg in any_message(), flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut frame = msg.to_bytes(7).unwrap().to_vec();
        for (at, byte) in flips {
            let i = at.index(frame.len());
            // Keep the outer length truthful so the corruption reaches the body decoders.
            if i != 2 && i != 3 {
                frame[i] = byte;
            }
        }
        let _ = Message::decode(&frame);
    }

    /// Every proper prefix of a frame is refused: its header promises more bytes than arrived.
    #[test]
    fn truncated_messages_are_errors(msg in any_message()) {
        let full = msg.to_bytes(7).unwrap().to_vec();
        for n in 0..full.len() {
            let result = Message::decode(&full[..n]);
            prop_assert!(result.is_err(), "{} of {} bytes decoded: {:?}", n, full.len(), result);
        }
    }

    /// A prefix whose header length is rewritten to match is a frame of its own. Kinds with an
    /// open-ended tail (echo data, error data, packet data, fewer multipart entries or
    /// instructions) legitimately decode from some prefixes; when they do, the message holds
    /// exactly the bytes that arrived: encoding it gives the prefix back. The exception is HELLO,
    /// whose decoder ignores a trailing partial element (as OVS does) and reads a HELLO without
    /// a bitmap as "up to the header's version": it re-encodes to its canonical form, which
    /// decodes to the same value.
    #[test]
    fn relabelled_prefixes_decode_to_what_they_hold(msg in any_message(), cut in any::<prop::sample::Index>()) {
        let full = msg.to_bytes(7).unwrap().to_vec();
        let n = cut.index(full.len());
        let mut short = full[..n].to_vec();
        if short.len() >= 4 {
            short[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        }
        if let Ok((xid, decoded)) = Message::decode(&short) {
            let again = decoded.to_bytes(xid).unwrap();
            if matches!(decoded, Message::Hello(_)) {
                prop_assert_eq!(Message::decode(&again), Ok((xid, decoded)));
            } else {
                prop_assert_eq!(hex(&again), hex(&short), "decoded {:?}", decoded);
            }
        }
    }

    #[test]
    fn random_text_never_panics(text in "[a-z_0-9=:,./\\[\\]()>\\- ]{0,120}") {
        for cmd in [FlowModCommand::Add, FlowModCommand::Delete] {
            let _ = parse_flow(&text, cmd);
        }
    }

    #[test]
    fn mangled_flow_text_never_panics(fm in printable_flow(), cut in any::<prop::sample::Index>(), junk in "[^a-z]{0,4}") {
        let text = format_flow_mod(&fm);
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let mangled = format!("{}{}{}", &text[..at], junk, &text[at..]);
        let _ = parse_flow(&mangled, FlowModCommand::Add);
    }
}
