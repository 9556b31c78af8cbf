//! Length fields that claim more than the input holds are errors found before anything is
//! allocated for them: a peer that sends a header promising 65535 bytes, or a multipart entry,
//! match, instruction or action claiming a huge length, costs us no more memory than the bytes
//! it really sent.
//!
//! A counting global allocator records, per thread, the largest single allocation and the total
//! allocated while a decode runs, so these tests see allocations the decoder makes, not guesses.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ofnode_proto::*;

use proptest::collection::vec;
use proptest::prelude::*;

mod hex;
use hex::hex;

struct Counting;

thread_local! {
    /// (largest single allocation, total bytes allocated) on this thread since the last reset.
    static USAGE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

fn record(size: usize) {
    // `try_with`: the allocator may run while this thread's locals are being torn down.
    let _ = USAGE.try_with(|u| {
        let (largest, total) = u.get();
        u.set((largest.max(size), total.saturating_add(size)));
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting only reads sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What decoding `frame` allocated on this thread: (largest single allocation, total).
fn allocations_of_decode(frame: &[u8]) -> (Result<(u32, Message), DecodeError>, (usize, usize)) {
    USAGE.with(|u| u.set((0, 0)));
    let result = Message::decode(frame);
    let usage = USAGE.with(Cell::get);
    (result, usage)
}

/// A frame with a truthful outer length around `body` (hex).
fn frame(msg_type: u8, body: &str) -> Vec<u8> {
    let body = hex(body);
    let mut out = vec![OFP_VERSION, msg_type, 0, 0, 0, 0, 0, 9];
    out.extend(body);
    let len = u16::try_from(out.len()).unwrap();
    out[2..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// No allocation while refusing any of these frames may reach what a claimed length asks for:
/// the inputs are at most a few hundred bytes, the claims 64 KiB.
const BOUND: usize = 4096;

fn assert_refused_cheaply(name: &str, frame: &[u8]) {
    assert!(frame.len() < 512, "{name}: test input too long");
    let (result, (largest, total)) = allocations_of_decode(frame);
    assert!(result.is_err(), "{name}: decoded {result:?}");
    assert!(
        largest < BOUND && total < BOUND,
        "{name}: allocated {largest} bytes at once, {total} in all, for a {}-byte input",
        frame.len()
    );
}

#[test]
fn header_claiming_more_than_the_input_errors_without_allocating() {
    // Header says 65535 bytes; 16 arrived.
    let short = hex("0402ffff00000001 0102030405060708");
    let (result, (largest, total)) = allocations_of_decode(&short);
    assert_eq!(
        result,
        Err(DecodeError::BadLength {
            what: "OpenFlow message",
            length: 65535,
            reason: "header length differs from the frame's size",
        })
    );
    assert_eq!(
        (largest, total),
        (0, 0),
        "allocated before checking the length"
    );
    // The counter sees the decoder's allocations: a flow_mod with a match and actions needs some.
    let flow = text::parse_flow("in_port=1, actions=output:2", FlowModCommand::Add).unwrap();
    let valid = Message::FlowMod(flow).to_bytes(9).unwrap();
    let (result, (_, total)) = allocations_of_decode(&valid);
    assert!(result.is_ok(), "{result:?}");
    assert!(total > 0, "the counting allocator saw nothing");
    // A frame cut in the middle of its header.
    let (result, (_, total)) = allocations_of_decode(&hex("0402ffff"));
    assert!(result.is_err());
    assert_eq!(total, 0);
}

#[test]
fn inner_length_fields_claiming_more_than_the_input_error_cheaply() {
    let cases: &[(&str, Vec<u8>)] = &[
        // Flow stats reply whose first entry claims 65535 bytes.
        (
            "flow stats entry length",
            frame(
                OFPT_MULTIPART_REPLY,
                "00010000 00000000 ffff0000 0000000000000000",
            ),
        ),
        // Flow stats entry of the minimum length whose match claims 65535 bytes.
        (
            "flow stats match length",
            frame(
                OFPT_MULTIPART_REPLY,
                "00010000 00000000 0038000000000000000000000000000000000000 \
                 00000000000000000000000000000000000000000000000000000000 0001ffff00000000",
            ),
        ),
        // Port desc reply whose one port is 8 bytes of a 64-byte structure.
        (
            "port desc entry",
            frame(OFPT_MULTIPART_REPLY, "000d0000 00000000 0000000100000000"),
        ),
        // Flow mod whose match claims 65535 bytes.
        (
            "flow_mod match length",
            frame(
                OFPT_FLOW_MOD,
                "0000000000000000 0000000000000000 0000 0000 0000 8000 ffffffff ffffffff \
                 ffffffff 0000 0000 0001ffff 00000000",
            ),
        ),
        // Flow mod whose apply-actions instruction claims 65528 bytes.
        (
            "instruction length",
            frame(
                OFPT_FLOW_MOD,
                "0000000000000000 0000000000000000 0000 0000 0000 8000 ffffffff ffffffff \
                 ffffffff 0000 0000 00010004 00000000 0004fff8 00000000",
            ),
        ),
        // Flow mod whose one action (a note) claims 65528 bytes.
        (
            "action length",
            frame(
                OFPT_FLOW_MOD,
                "0000000000000000 0000000000000000 0000 0000 0000 8000 ffffffff ffffffff \
                 ffffffff 0000 0000 00010004 00000000 00040018 00000000 \
                 fffffff8 00002320 0008 010203040506",
            ),
        ),
        // Packet-out whose action list claims 65535 bytes.
        (
            "packet_out actions_len",
            frame(OFPT_PACKET_OUT, "ffffffff fffffffd ffff 000000000000"),
        ),
        // Hello whose version bitmap element claims 65535 bytes.
        (
            "hello element length",
            frame(OFPT_HELLO, "0001ffff00000010"),
        ),
        // Bundle add whose inner message header claims 65535 bytes.
        (
            "bundle inner message length",
            frame(
                OFPT_EXPERIMENTER,
                "4f4e4600 000008fd 00000001 0000 0003 0414ffff00000009",
            ),
        ),
        // Error message too short for its type and code.
        ("error body", frame(OFPT_ERROR, "00")),
        // Meter mod whose one band claims 65535 bytes.
        (
            "meter band length",
            frame(
                OFPT_METER_MOD,
                "0000 0001 00000001 0001ffff 00000064 00000000 00000000",
            ),
        ),
        // Meter configuration reply whose first entry claims 65535 bytes.
        (
            "meter configuration length",
            frame(OFPT_MULTIPART_REPLY, "000a0000 00000000 ffff0001 00000001"),
        ),
        // Meter statistics reply whose first entry claims 65535 bytes.
        (
            "meter statistics length",
            frame(
                OFPT_MULTIPART_REPLY,
                "00090000 00000000 00000001 ffff 000000000000 00000000",
            ),
        ),
        // NXT_PACKET_IN2 whose packet property claims 65535 bytes.
        (
            "packet-in property length",
            frame(OFPT_EXPERIMENTER, "00002320 0000001e 0000ffff 01020304"),
        ),
        // Flow mod whose controller(...) action's userdata property claims 65535 bytes.
        (
            "controller action property length",
            frame(
                OFPT_FLOW_MOD,
                "0000000000000000 0000000000000000 0000 0000 0000 8000 ffffffff ffffffff \
                 ffffffff 0000 0000 00010004 00000000 00040020 00000000 \
                 ffff0018 00002320 0025 000000000000 0003ffff 00000000",
            ),
        ),
    ];
    for (name, frame) in cases {
        assert_refused_cheaply(name, frame);
    }
}

/// Valid frames of every kind with inner length fields: flow_mod (match, instructions, NX
/// actions, note, controller properties), flow stats reply, packet-out, bundle add, hello,
/// meter mod, meter configuration and statistics replies, NXT_PACKET_IN2.
fn sample_frames() -> Vec<Vec<u8>> {
    let text = "table=20, priority=100, in_port=3, arp, nw_src=10.129.0.5, \
                actions=load:42->NXM_NX_REG0[], note:01.02.03, set_field:192.0.2.3->tun_dst, \
                goto_table:21";
    let flow = text::parse_flow(text, FlowModCommand::Add).unwrap();
    let stats = FlowStats {
        table_id: flow.table_id,
        duration_sec: 1,
        duration_nsec: 2,
        priority: flow.priority,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: 0,
        packet_count: 3,
        byte_count: 4,
        match_: flow.match_.clone(),
        instructions: flow.instructions.clone(),
    };
    let messages = [
        Message::FlowMod(flow.clone()),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::Flow(vec![stats.clone(), stats]),
        }),
        Message::PacketOut(PacketOut {
            buffer_id: 0xffff_ffff,
            in_port: OFPP_CONTROLLER,
            actions: vec![Action::note(&[1, 2]), Action::output(2)],
            data: bytes::Bytes::from_static(&[0; 42]),
        }),
        Message::BundleAdd(BundleAdd {
            bundle_id: 1,
            flags: BundleFlags::ATOMIC,
            message: Box::new(Message::FlowMod(flow)),
        }),
        Message::Hello(Hello::default()),
        Message::FlowMod(
            text::parse_flow(
                "ip, actions=meter:1,controller(userdata=01.02.03,meter_id=1),goto_table:1",
                FlowModCommand::Add,
            )
            .unwrap(),
        ),
        Message::MeterMod(
            text::parse_meter(
                "meter=1 pktps bands=type=drop rate=1,type=drop rate=2",
                MeterCommand::Add,
            )
            .unwrap(),
        ),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::MeterConfig(vec![MeterConfig {
                meter_id: 1,
                flags: OFPMF_KBPS,
                bands: vec![MeterBand::drop(1, 0), MeterBand::drop(2, 0)],
            }]),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::MeterStats(vec![MeterStats {
                meter_id: 1,
                flow_count: 1,
                packet_in_count: 2,
                byte_in_count: 3,
                duration_sec: 4,
                duration_nsec: 5,
                bands: vec![MeterBandStats::default(); 2],
            }]),
        }),
        Message::PacketIn2(PacketIn2 {
            table_id: Some(1),
            metadata: Some(Match::new().with(Field::InPort, 1).with(Field::Reg(0), 7)),
            userdata: Some(bytes::Bytes::from_static(&[1, 2, 3])),
            ..PacketIn2::new(bytes::Bytes::from_static(&[0; 42]))
        }),
    ];
    messages
        .iter()
        .map(|m| m.to_bytes(9).unwrap().to_vec())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Whatever an inner length field of a valid frame is changed to, decoding allocates in
    /// proportion to the frame, never to the field: the largest single allocation stays under
    /// a small multiple of the input (decoded values are larger than their wire form, so not
    /// 1x, but far below the 64 KiB a 16-bit length can claim).
    #[test]
    fn allocation_follows_the_input_not_its_length_fields(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        claim in prop_oneof![Just(0xffffu16), Just(0xfff8), Just(0x8000), Just(0x0400), any::<u16>()],
    ) {
        let frames = sample_frames();
        let mut frame = which.get(&frames).clone();
        // Any 16-bit field after the outer header's length (which must stay truthful).
        let i = 4 + at.index(frame.len() - 5);
        frame[i..i + 2].copy_from_slice(&claim.to_be_bytes());
        let (_, (largest, _)) = allocations_of_decode(&frame);
        prop_assert!(largest <= 16 * frame.len() + 1024,
            "{} bytes at once for a {}-byte frame", largest, frame.len());
    }

    /// The same for random bodies of the kinds that carry inner lengths.
    #[test]
    fn random_bodies_allocate_in_proportion_to_their_size(
        msg_type in prop::sample::select(vec![
            OFPT_HELLO, OFPT_ERROR, OFPT_EXPERIMENTER, OFPT_PACKET_IN, OFPT_PORT_STATUS,
            OFPT_PACKET_OUT, OFPT_FLOW_MOD, OFPT_MULTIPART_REQUEST, OFPT_MULTIPART_REPLY,
            OFPT_METER_MOD,
        ]),
        body in vec(prop_oneof![Just(0xffu8), Just(0u8), any::<u8>()], 0..480),
    ) {
        let mut frame = vec![OFP_VERSION, msg_type, 0, 0, 0, 0, 0, 9];
        frame.extend(body);
        let len = frame.len() as u16;
        frame[2..4].copy_from_slice(&len.to_be_bytes());
        let (_, (largest, _)) = allocations_of_decode(&frame);
        prop_assert!(largest <= 16 * frame.len() + 1024,
            "{} bytes at once for a {}-byte frame", largest, frame.len());
    }
}
