//! Codec benchmarks: encoding the seed's 4-flow pod transaction (setupPodFlows) as an ONF
//! bundle, decoding a 1,000-flow stats reply, and the text parser/printer on the same flows;
//! and for the stateful pipelines, encoding conjunction-heavy flow_mods (NetworkPolicy-style
//! clauses, each flow in several conjunctions) in a bundle and decoding a 10,000-flow dump
//! with conntrack fields and actions. Prints ns per flow_mod / per flow at the end.
//! Run: `cargo bench -p ofnode-proto --bench codec`; instruction counts per flow (independent
//! of the machine's load): `scripts/codec-instructions.sh` (callgrind over
//! `codec --instructions WORKLOAD RUNS`).

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
    control(BundleCtrlType::OpenRequest)
        .try_encode(xid, out)
        .expect("a bundle control fits");
    for fm in flows {
        xid += 1;
        BundleAdd::encode_borrowed(1, flags, fm, xid, out).expect("a pod flow fits");
    }
    control(BundleCtrlType::CommitRequest)
        .try_encode(xid + 1, out)
        .expect("a bundle control fits");
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
            flows.push(installed(fm));
        }
    }
    encode_reply_stream(&flows)
}

/// A conjunction-heavy flow: one NetworkPolicy peer (a source pod of a VNID) that is a clause
/// of eight conjunctions, as a policy set with many rules sharing peers compiles to.
fn conjunction_flow(n: u32) -> Message {
    let actions: Vec<String> = (0..8)
        .map(|k| format!("conjunction({},1/3)", 1000 + 8 * (n % 64) + k))
        .collect();
    let text = format!(
        "table=80, priority=200, ip, reg1={}, reg0={}, nw_src=10.129.{}.{}, actions={},note:0a.0b",
        42 + n % 16,
        7 + n % 5,
        n / 200,
        n % 200 + 2,
        actions.join(",")
    );
    Message::FlowMod(parse_flow(&text, FlowModCommand::Add).unwrap())
}

fn conjunction_flows() -> Vec<Message> {
    (0..64).map(conjunction_flow).collect()
}

/// A 10,000-flow dump of a node in NetworkPolicy mode with conntrack: per pod, the policy's
/// allow rule with ct_state (an est connection from a peer to a port) and the NAT'd service
/// and conntrack entry flows, in replies of at most ~64 KiB as OVS sends them.
fn ct_stats_reply_stream() -> Vec<u8> {
    let texts = |pod: u32| {
        let ip = format!("10.129.{}.{}", pod / 200, pod % 200 + 2);
        let vnid = 42 + pod % 16;
        vec![
            format!("table=80, priority=150, reg1={vnid}, ct_state=+trk+est, ip, nw_dst={ip}, reg0={vnid}, nw_src=10.130.0.7, tcp, tp_dst=8080, actions=output:NXM_NX_REG2[]"),
            format!("table=21, priority=200, ip, nw_dst={ip}, ct_state=-rpl, actions=ct(commit,nat(src=0.0.0.0),table=30)"),
            format!("table=30, priority=250, ip, nw_dst={ip}, ct_state=+trk+rpl, ct_mark=0x1/0x1, actions=ct(nat,table=70)"),
            format!("table=60, priority=150, tcp, nw_dst=172.30.{}.{}, tp_dst=80, ct_state=+trk+new, actions=ct(commit,exec(set_field:0x1->ct_mark),nat(dst={ip}:8080),table=70)", pod / 250, pod % 250 + 1),
        ]
    };
    let mut flows = Vec::new();
    for pod in 0..2500u32 {
        for fm in texts(pod)
            .iter()
            .map(|t| parse_flow(t, FlowModCommand::Add).unwrap())
        {
            flows.push(installed(fm));
        }
    }
    encode_reply_stream(&flows)
}

/// A flow as a stats reply describes it once installed, with some counters.
fn installed(fm: FlowMod) -> FlowStats {
    FlowStats {
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
    }
}

/// Flow stats replies of at most ~64 KiB, REPLY_MORE on all but the last.
fn encode_reply_stream(flows: &[FlowStats]) -> Vec<u8> {
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

    let conj = conjunction_flows();
    let mut group = c.benchmark_group("conjunction_flows_64");
    group.throughput(Throughput::Elements(conj.len() as u64));
    group.bench_function("encode_bundle", |b| {
        let mut out = BytesMut::with_capacity(64 * 1024);
        b.iter(|| {
            out.clear();
            encode_transaction(black_box(&conj), &mut out);
            black_box(out.len())
        })
    });
    group.finish();

    let ct_stream = ct_stats_reply_stream();
    assert_eq!(decode_stream(&ct_stream).len(), 10_000);
    let mut group = c.benchmark_group("ct_flow_stats_10000");
    group.throughput(Throughput::Elements(10_000));
    group.sample_size(20);
    group.bench_function("decode", |b| {
        b.iter(|| black_box(decode_stream(black_box(&ct_stream))))
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

    let conj = conjunction_flows();
    let runs = 20_000u32;
    let start = Instant::now();
    for _ in 0..runs {
        out.clear();
        encode_transaction(black_box(&conj), &mut out);
    }
    let per_conj = start.elapsed().as_nanos() as f64 / f64::from(runs) / conj.len() as f64;
    println!(
        "summary: conjunction-heavy bundle (64 flow_mods of 8 conjunctions each, {} bytes): {per_conj:.0} ns per flow_mod encoded",
        out.len()
    );
    let ct_stream = ct_stats_reply_stream();
    let runs = 50u32;
    let start = Instant::now();
    for _ in 0..runs {
        black_box(decode_stream(black_box(&ct_stream)));
    }
    let per_ct_flow = start.elapsed().as_nanos() as f64 / f64::from(runs) / 10_000.0;
    println!(
        "summary: 10,000-flow stats reply with ct fields and actions ({} bytes in {} messages): {per_ct_flow:.0} ns per flow decoded",
        ct_stream.len(),
        count_frames(&ct_stream)
    );
}

/// The first `n` messages of a stream.
fn first_messages(stream: &[u8], n: usize) -> Vec<u8> {
    let mut len = 0;
    for _ in 0..n {
        match message_length(&stream[len..]) {
            Some(l) => len += l,
            None => break,
        }
    }
    stream[..len].to_vec()
}

fn count_frames(mut rest: &[u8]) -> usize {
    let mut n = 0;
    while let Some(len) = message_length(rest) {
        rest = &rest[len..];
        n += 1;
    }
    n
}

/// `codec --instructions WORKLOAD RUNS`: runs one workload RUNS times and nothing else, for
/// counting instructions with `valgrind --tool=callgrind` (load-independent, unlike time): the
/// difference between two run counts, divided by the runs and the flows per run, is the
/// instructions per flow. Prints the flows per run.
fn instructions(workload: &str, runs: u32) {
    // (flows per run, bytes per run, one run)
    type Run = Box<dyn FnMut()>;
    let (flows, bytes, mut run): (usize, usize, Run) = match workload {
        "pod_encode" | "conj_encode" => {
            let flows = if workload == "pod_encode" {
                pod_flow_mods()
            } else {
                conjunction_flows()
            };
            let mut out = BytesMut::with_capacity(64 * 1024);
            encode_transaction(&flows, &mut out);
            let (n, bytes) = (flows.len(), out.len());
            let run = move || {
                out.clear();
                encode_transaction(black_box(&flows), &mut out);
            };
            (n, bytes, Box::new(run))
        }
        "pod_decode" | "ct_decode" | "ct_decode_1000" => {
            let stream = match workload {
                "pod_decode" => stats_reply_stream(),
                "ct_decode" => ct_stats_reply_stream(),
                // The first 1,000 flows of the same dump (5 messages, as the pod dump): the
                // per-flow cost at the pod dump's size, without the larger working set.
                _ => first_messages(&ct_stats_reply_stream(), 5),
            };
            let (n, bytes) = (decode_stream(&stream).len(), stream.len());
            let run = move || {
                black_box(decode_stream(black_box(&stream)));
            };
            (n, bytes, Box::new(run))
        }
        other => panic!(
            "unknown workload {other}: pod_encode, conj_encode, pod_decode, ct_decode, ct_decode_1000"
        ),
    };
    for _ in 0..runs {
        run();
    }
    println!("{workload}: {runs} runs of {flows} flows, {bytes} bytes");
}

criterion_group!(codec, benches);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--instructions") {
        let workload = args.get(at + 1).map_or("", String::as_str);
        let runs = args.get(at + 2).and_then(|r| r.parse().ok()).unwrap_or(1);
        instructions(workload, runs);
        return;
    }
    // `codec --summary`: the plain averages alone, without criterion's runs.
    if args.iter().any(|a| a == "--summary") {
        summary();
        return;
    }
    codec();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
