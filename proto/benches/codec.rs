//! Codec benchmarks: encoding the seed's 4-flow pod transaction (setupPodFlows) as an ONF
//! bundle, decoding a 1,000-flow stats reply, and the text parser/printer on the same flows.
//! Prints ns per flow_mod / per flow at the end. Run: `cargo bench -p ofnode-proto --bench codec`.

use std::hint::black_box;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, Criterion, Throughput};
use ofnode_proto::text::{format_flow, parse_flow};
use ofnode_proto::*;

/// setupPodFlows for one pod (ofport 3, VNID 42, 32-byte container-ID note).
fn pod_flow_texts(ofport: u32, ip: &str) -> Vec<String> {
    let note: Vec<String> = (0..32u8)
        .map(|b| format!("{:02x}", b.wrapping_mul(7)))
        .collect();
    let note = note.join(".");
    vec![
        format!("table=20, priority=100, in_port={ofport}, arp, nw_src={ip}, arp_sha=0a:58:0a:81:00:05, actions=load:42->NXM_NX_REG0[], note:{note}, goto_table:21"),
        format!("table=20, priority=100, in_port={ofport}, ip, nw_src={ip}, actions=load:42->NXM_NX_REG0[], goto_table:21"),
        format!("table=40, priority=100, arp, nw_dst={ip}, actions=output:{ofport}"),
        format!("table=70, priority=100, ip, nw_dst={ip}, actions=load:42->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:80"),
    ]
}

fn pod_flow_mods() -> Vec<Message> {
    pod_flow_texts(3, "10.129.0.5")
        .iter()
        .map(|t| Message::FlowMod(parse_flow(t, FlowModCommand::Add).unwrap()))
        .collect()
}

fn control(ctrl_type: BundleCtrlType) -> Message {
    Message::BundleControl(BundleControl {
        bundle_id: 1,
        ctrl_type,
        flags: BundleFlags::ATOMIC | BundleFlags::ORDERED,
        properties: Bytes::new(),
    })
}

/// The whole transaction: open, one add per flow (each its own xid), commit.
fn encode_transaction(flows: &[Message], out: &mut BytesMut) {
    let mut xid = 100;
    let flags = BundleFlags::ATOMIC | BundleFlags::ORDERED;
    control(BundleCtrlType::OpenRequest).encode(xid, out);
    for fm in flows {
        xid += 1;
        BundleAdd::encode_borrowed(1, flags, fm, xid, out).expect("a pod flow fits");
    }
    control(BundleCtrlType::CommitRequest).encode(xid + 1, out);
}

/// A 1,000-flow dump as OVS sends it: flow stats replies of at most ~64 KiB, REPLY_MORE on all
/// but the last. 250 pods × their 4 flows.
fn stats_reply_stream() -> Vec<u8> {
    let mut flows = Vec::new();
    for pod in 0..250u32 {
        let ip = format!("10.129.{}.{}", pod / 200, pod % 200 + 2);
        for fm in pod_flow_texts(pod + 3, &ip)
            .iter()
            .map(|t| parse_flow(t, FlowModCommand::Add).unwrap())
        {
            flows.push(FlowStats {
                table_id: fm.table_id,
                duration_sec: 12,
                duration_nsec: 345_000_000,
                priority: fm.priority,
                idle_timeout: 0,
                hard_timeout: 0,
                flags: 0,
                cookie: 0,
                packet_count: 1_000,
                byte_count: 98_000,
                match_: fm.match_,
                instructions: fm.instructions,
            });
        }
    }
    let mut stream = BytesMut::new();
    let chunks: Vec<&[FlowStats]> = flows.chunks(200).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let more = i + 1 < chunks.len();
        Message::MultipartReply(MultipartReply {
            flags: if more { OFPMPF_REPLY_MORE } else { 0 },
            body: MultipartReplyBody::Flow(chunk.to_vec()),
        })
        .try_encode(9, &mut stream)
        .expect("each part fits in one message");
    }
    stream.to_vec()
}

/// Frames and decodes a reply stream, returning the flows.
fn decode_stream(mut rest: &[u8]) -> Vec<FlowStats> {
    let mut flows = Vec::new();
    while let Some(len) = message_length(rest) {
        let (frame, tail) = rest.split_at(len);
        if let Ok((_, Message::MultipartReply(reply))) = Message::decode(frame) {
            if let MultipartReplyBody::Flow(part) = reply.body {
                flows.extend(part);
            }
        }
        rest = tail;
    }
    flows
}

fn benches(c: &mut Criterion) {
    let pod = pod_flow_mods();
    let mut group = c.benchmark_group("pod_transaction");
    group.throughput(Throughput::Elements(pod.len() as u64));
    group.bench_function("encode_bundle", |b| {
        let mut out = BytesMut::with_capacity(4096);
        b.iter(|| {
            out.clear();
            encode_transaction(black_box(&pod), &mut out);
            black_box(out.len())
        })
    });
    let texts = pod_flow_texts(3, "10.129.0.5");
    group.bench_function("parse_text", |b| {
        b.iter(|| {
            for t in &texts {
                black_box(parse_flow(black_box(t), FlowModCommand::Add).unwrap());
            }
        })
    });
    group.finish();

    let stream = stats_reply_stream();
    assert_eq!(decode_stream(&stream).len(), 1000);
    let mut group = c.benchmark_group("flow_stats_1000");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("decode", |b| {
        b.iter(|| black_box(decode_stream(black_box(&stream))))
    });
    let flows = decode_stream(&stream);
    group.bench_function("format_text", |b| {
        b.iter(|| {
            for f in &flows {
                black_box(format_flow(f));
            }
        })
    });
    group.finish();
}

/// Plain averages over many runs, printed as ns per flow_mod / per flow.
fn summary() {
    let pod = pod_flow_mods();
    let mut out = BytesMut::with_capacity(4096);
    let runs = 200_000u32;
    let start = Instant::now();
    for _ in 0..runs {
        out.clear();
        encode_transaction(black_box(&pod), &mut out);
    }
    let per_flow_mod = start.elapsed().as_nanos() as f64 / f64::from(runs) / pod.len() as f64;
    let stream = stats_reply_stream();
    let runs = 500u32;
    let start = Instant::now();
    for _ in 0..runs {
        black_box(decode_stream(black_box(&stream)));
    }
    let per_flow = start.elapsed().as_nanos() as f64 / f64::from(runs) / 1000.0;
    println!(
        "\nsummary: pod transaction (bundle open + 4 adds + commit, {} bytes): {per_flow_mod:.0} ns per flow_mod encoded",
        { out.clear(); encode_transaction(&pod, &mut out); out.len() }
    );
    println!(
        "summary: 1,000-flow stats reply ({} bytes in {} messages): {per_flow:.0} ns per flow decoded",
        stream.len(),
        count_frames(&stream)
    );
}

fn count_frames(mut rest: &[u8]) -> usize {
    let mut n = 0;
    while let Some(len) = message_length(rest) {
        rest = &rest[len..];
        n += 1;
    }
    n
}

criterion_group!(codec, benches);

fn main() {
    codec();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
