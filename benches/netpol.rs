//! Issue 14's scale bench for the networkpolicy mode, one node, in one run, every step side by
//! side with the seed's way (the same flows written with `ovs-ofctl bundle`) on a second node
//! whose br0 holds the same table and the same two probe pods at the same ports and addresses:
//! - 1,000 pods in 50 namespaces (200 local: 2 in namespaces of their own with TCP servers for
//!   the probe, 198 as br0 ports; 800 remote pods of two other nodes' subnets, given with
//!   `pod remote set`), 500 policies (10 per namespace, each selecting one app label, peers by
//!   namespace label and pod label, a TCP port range and a UDP port);
//! - the time to install all 500 (`ofnode netpol apply`, one after another) against the seed's
//!   way (one `ovs-ofctl bundle` per policy of exactly what that apply changed on br0), the flows
//!   br0 then holds (and per policy), ofnode's RSS; the seed node's table must then equal
//!   ofnode's, which shows both sides wrote the same flows;
//! - one policy change (replace) at a time, both ways: through the CLI (`ofnode netpol apply`,
//!   a process per change as the seed's way) and through the API (POST /v1/netpols from this
//!   process, as an agent sends it), with the daemon's own time and its OpenFlow bundle apart
//!   (ovs-vswitchd taking the flows, which bounds any controller that waits for the switch);
//! - the latency from `netpol apply` of one policy to enforced (the first probe that sees it),
//!   and from the seed's bundle of the same flows to enforced on its node; and the same from
//!   its `netpol del` (issue 26: ofnode purges the datapath's cached flows after each change on
//!   an Open vSwitch with the stale-megaflow bug; measured with the purge on, the default, and
//!   again with the daemon restarted with `--no-stale-megaflow-purge`);
//! - what a purge costs: its time (from the daemon's /metrics), and what a busy pod (a UDP flow
//!   of one datagram every 2 ms, allowed throughout) loses across the changes with the purge
//!   on and off; and why the purge is `revalidator/purge` and not `dpctl/del-flows`: the busy
//!   flow's packets that go through the slow path (upcalls that cannot install a datapath
//!   flow, OVS's `handler_duplicate_upcall`) in the 2 s after each.
//!
//! What the seed side does not include: computing the flows (it replays ofnode's diff).
//!
//! Run: `cargo bench --bench netpol` (as root).

#[path = "common/netpol_world.rs"]
mod netpol_world;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use netpol_world::*;
use ofnode_harness::cluster::{labels, Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::probe::{UdpEcho, UdpStream};
use ofnode_harness::reachability::Servers;
use ofnode_harness::seed_way::{
    median, ms, replace_flows, rss_mb, seed_bundle, side_by_side, FlowDiff,
};
use ofnode_harness::{OperationTotals, PurgeTotals};
use serde_json::json;

const REMOTE_PODS: usize = 800;
const CHANGES: usize = 20;
/// Rounds of the apply -> enforced measurement.
const ROUNDS: usize = 10;
/// The busy pod's flow: its UDP port, one datagram every BUSY_INTERVAL, across BUSY_CHANGES
/// changes (a deny applied and deleted); and how long a busy flow is watched after one purge.
const BUSY_PORT: u16 = 5353;
const BUSY_INTERVAL: Duration = Duration::from_millis(2);
const BUSY_CHANGES: usize = 10;
const SLOW_PATH_WATCH: Duration = Duration::from_secs(2);

/// The daemon's running totals (`/metrics`).
async fn daemon_totals(client: &ofnode::api::client::Client) -> OperationTotals {
    let metrics = client.metrics().await.expect("GET /metrics");
    OperationTotals::from_metrics(&metrics).expect("the daemon's totals")
}

fn main() {
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"netpol".contains(&arg))
    {
        return;
    }
    let mut ours = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .expect("one node in networkpolicy mode (run as root)");
    let node = ours.node(0);
    for ns in 0..NAMESPACES {
        let team = format!("t{}", ns % TEAMS);
        ours.namespace_set(&namespace(ns), 100 + ns as u32, &labels(&[("team", &team)]))
            .expect("namespace set");
    }
    let client = ours
        .add_named_pod(
            0,
            (&namespace(0), "client"),
            100,
            &labels(&[("app", "client")]),
        )
        .expect("client pod");
    let server = ours
        .add_named_pod(
            0,
            (&namespace(1), "probe"),
            101,
            &labels(&[("app", "probe")]),
        )
        .expect("server pod");
    let ours_pair = ProbePair {
        _servers: Servers::start(server.netns(), "probe".into()).expect("servers"),
        client,
        server,
    };
    add_local_ports(&ours);
    add_remote_pods(&ours);
    let flows_before = node.flows().expect("dump-flows").len();

    // The seed's node: the same two pods (same ports, addresses, MACs), then ofnode's table.
    let seed = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::Subnet,
        control: Control::SeedFlows,
        echo: false,
    })
    .expect("the seed's node");
    let (seed_client, seed_server) = (
        seed.add_pod(0, 0).expect("seed client"),
        seed.add_pod(0, 0).expect("seed server"),
    );
    for (a, b) in [
        (&ours_pair.client, &seed_client),
        (&ours_pair.server, &seed_server),
    ] {
        assert_eq!(
            (a.ofport, a.ip, &a.mac),
            (b.ofport, b.ip, &b.mac),
            "the seed's node must have the probe pods where ofnode's has them"
        );
    }
    let seed_pair = ProbePair {
        _servers: Servers::start(seed_server.netns(), "probe".into()).expect("seed servers"),
        client: seed_client,
        server: seed_server,
    };
    replace_flows(&seed, &node.flows().expect("dump-flows"));

    let (mut install_ours, mut install_seed) = (Duration::ZERO, Duration::ZERO);
    for ns in 0..NAMESPACES {
        for k in 0..POLICIES_PER_NAMESPACE {
            let (o, s, _) = side_by_side(&ours, &seed, || {
                ours.netpol_apply(&bench_policy(ns, k, 0))
                    .expect("netpol apply")
            });
            install_ours += o;
            install_seed += s;
        }
    }
    let flows = node.flows().expect("dump-flows");
    let same = sorted(seed.node(0).flows().expect("seed dump-flows")) == sorted(flows.clone());
    assert!(same, "the seed's node does not hold ofnode's table");
    let pid = node.daemon().and_then(|d| d.pid()).unwrap_or(0);
    let policies = NAMESPACES * POLICIES_PER_NAMESPACE;
    let added = flows.len().saturating_sub(flows_before);
    println!(
        "netpol install: {policies} policies over 1000 pods in {NAMESPACES} namespaces: ofnode `netpol apply` {:.2} s ({:.1} ms each); seed way (`ovs-ofctl bundle` of each apply's changes) {:.2} s ({:.1} ms each); ratio {:.1}x",
        install_ours.as_secs_f64(),
        ms(install_ours) / policies as f64,
        install_seed.as_secs_f64(),
        ms(install_seed) / policies as f64,
        install_seed.as_secs_f64() / install_ours.as_secs_f64().max(f64::MIN_POSITIVE),
    );
    println!(
        "netpol flows: {} on br0 ({added} for the policies, {:.1} per policy); the seed's node holds the same table; ofnode RSS {:.1} MB (goal <= 96 MB)",
        flows.len(),
        added as f64 / policies as f64,
        rss_mb(pid),
    );

    // One change at a time: replace a policy (its TCP range grows).
    let (mut ours_ms, mut seed_ms, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    for change in 0..CHANGES {
        let policy = bench_policy(change % NAMESPACES, 0, change + 1);
        let (o, s, diff) = side_by_side(&ours, &seed, || {
            ours.netpol_apply(&policy).expect("netpol apply")
        });
        ours_ms.push(ms(o));
        seed_ms.push(ms(s));
        changed.push(diff.len() as f64);
    }
    let (o, s) = (median(ours_ms), median(seed_ms));
    println!(
        "netpol one policy change ({CHANGES} replaces, median {} flows changed): ofnode `netpol apply` median {o:.2} ms; seed way median {s:.2} ms; ratio {:.1}x (goal >= 10x)",
        median(changed),
        s / o.max(f64::MIN_POSITIVE)
    );

    // The same through the API, as an agent would send it (no process per change).
    let api = node
        .daemon()
        .map(|d| d.api.clone())
        .expect("the node's daemon");
    let client = ofnode::api::client::Client::new(&api);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let totals = || runtime.block_on(daemon_totals(&client));
    let (mut ours_ms, mut seed_ms, mut op_ms, mut bundle_ms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for change in 0..CHANGES {
        let policy = bench_policy(change % NAMESPACES, 0, CHANGES + change + 1);
        let body = serde_json::to_vec(&policy).expect("policy JSON");
        let before = totals();
        let (o, s, _) = side_by_side(&ours, &seed, || {
            runtime
                .block_on(client.netpol_apply(body))
                .expect("POST /v1/netpols")
        });
        let after = totals();
        ours_ms.push(ms(o));
        seed_ms.push(ms(s));
        // Only when this change was the one operation the daemon finished meanwhile.
        if let Some((operation, bundle)) = after.one_operation_since(&before) {
            op_ms.push(ms(operation));
            bundle_ms.push(ms(bundle));
        }
    }
    let (o, s) = (median(ours_ms), median(seed_ms));
    println!(
        "netpol one policy change through the API (POST /v1/netpols from this process, {CHANGES} replaces): ofnode median {o:.2} ms; seed way median {s:.2} ms; ratio {:.1}x (goal >= 10x)",
        s / o.max(f64::MIN_POSITIVE)
    );
    println!(
        "netpol   of which the daemon's operation median {:.2} ms, its OpenFlow bundle (ovs-vswitchd taking the flows: the bound) median {:.2} ms ({} changes with no other operation meanwhile)",
        median(op_ms.clone()),
        median(bundle_ms.clone()),
        op_ms.len()
    );

    let purges = || {
        let metrics = runtime.block_on(client.metrics()).expect("GET /metrics");
        PurgeTotals::from_metrics(&metrics).expect("the daemon's purge totals")
    };
    let before = purges();
    let with_purge = enforced_latency(&ours, &ours_pair, &seed, &seed_pair);
    let busy_with_purge = busy_pod(&ours, &ours_pair);
    let after = purges();
    let count = after.purges - before.purges;
    println!(
        "netpol stale-megaflow purge (revalidator/purge after each committed bundle on this affected switch): {count} purges during the runs above, mean {:.3} ms each, {} failed",
        (after.seconds - before.seconds) * 1000.0 / count.max(1.0),
        after.errors - before.errors,
    );
    let (purged, flushed) = slow_path_after_flush(&ours, &ours_pair);
    println!(
        "netpol busy flow after one flush of the datapath (a UDP datagram every {BUSY_INTERVAL:?}, watched {SLOW_PATH_WATCH:?}): revalidator/purge (ofnode's way): {purged} packets in the slow path; dpctl/del-flows: {flushed} packets in the slow path (its datapath flow cannot come back while the revalidator's record of it stays)"
    );

    let node = ours.node_mut(0);
    node.daemon_mut()
        .expect("the node's daemon")
        .restart_with(&["--no-stale-megaflow-purge"])
        .expect("restart without the purge");
    node.daemon()
        .expect("the node's daemon")
        .wait_status(Duration::from_secs(30), "in sync", |s| s["in_sync"] == true)
        .expect("in sync after the restart");
    let without_purge = enforced_latency(&ours, &ours_pair, &seed, &seed_pair);
    let busy_without_purge = busy_pod(&ours, &ours_pair);
    for (what, latency, busy) in [
        ("purge on (default)", with_purge, busy_with_purge),
        ("purge off", without_purge, busy_without_purge),
    ] {
        println!(
            "netpol apply -> enforced (a narrowing change: the first TCP probe refused, {PROBE_MS} ms probes, median of {ROUNDS}), ofnode {what}: {:.1} ms, seed way {:.1} ms, ratio {:.1}x; delete -> first probe answered: ofnode {:.1} ms, seed way {:.1} ms, ratio {:.1}x; a busy pod lost {} of {} datagrams across {BUSY_CHANGES} applies and deletes",
            latency.deny_ours,
            latency.deny_seed,
            latency.deny_seed / latency.deny_ours.max(f64::MIN_POSITIVE),
            latency.allow_ours,
            latency.allow_seed,
            latency.allow_seed / latency.allow_ours.max(f64::MIN_POSITIVE),
            busy.0,
            busy.1,
        );
    }
}

/// Medians of [`enforced_latency`], in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Enforced {
    deny_ours: f64,
    allow_ours: f64,
    deny_seed: f64,
    allow_seed: f64,
}

/// The probe server's deny-all-ingress policy (the bench's narrowing change).
fn deny_probe() -> serde_json::Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "deny-probe", "namespace": namespace(1)},
        "spec": {"podSelector": {"matchLabels": {"app": "probe"}}, "policyTypes": ["Ingress"]}
    })
}

/// A busy pod across changes: the probe server sends the client one UDP datagram every
/// BUSY_INTERVAL (echoed back) while the deny policy is applied and deleted BUSY_CHANGES times.
/// The flow is allowed throughout (the deny is the server's ingress; this is its egress and
/// its replies), so every datagram without an echo is lost to the changes. Returns (lost,
/// sent).
fn busy_pod(ours: &Cluster, pair: &ProbePair) -> (usize, usize) {
    let _echo = UdpEcho::start(&pair.client, BUSY_PORT).expect("UDP echo");
    let stream = UdpStream::start(&pair.server, pair.client.ip, BUSY_PORT, BUSY_INTERVAL)
        .expect("UDP stream");
    let started = Instant::now();
    while stream.log().answered() < 50 {
        assert!(started.elapsed() < Duration::from_secs(10), "no echo");
        std::thread::sleep(Duration::from_millis(5));
    }
    let from = Instant::now();
    for _ in 0..BUSY_CHANGES {
        ours.netpol_apply(&deny_probe()).expect("apply deny");
        ours.netpol_del(&namespace(1), "deny-probe")
            .expect("del deny");
    }
    let log = stream.stop();
    let sent = log.sent_since(from);
    (sent - log.answered_since(from), sent)
}

/// A busy flow's packets that go through the slow path in the SLOW_PATH_WATCH after one flush
/// of the datapath, by `revalidator/purge` (ofnode's) and by `dpctl/del-flows`.
fn slow_path_after_flush(ours: &Cluster, pair: &ProbePair) -> (u64, u64) {
    let ovs = ours.node(0).ovs();
    let _echo = UdpEcho::start(&pair.client, BUSY_PORT).expect("UDP echo");
    let stream = UdpStream::start(&pair.server, pair.client.ip, BUSY_PORT, BUSY_INTERVAL)
        .expect("UDP stream");
    let after = |command: &str| {
        // Counts are added up about once a second: settle before and after.
        std::thread::sleep(Duration::from_millis(1500));
        let before = ovs
            .coverage_total("handler_duplicate_upcall")
            .expect("coverage");
        ovs.appctl(&[command]).expect(command);
        std::thread::sleep(SLOW_PATH_WATCH);
        let now = ovs
            .coverage_total("handler_duplicate_upcall")
            .expect("coverage");
        now - before
    };
    let purged = after("revalidator/purge");
    let flushed = after("dpctl/del-flows");
    drop(stream);
    // The flow's record (ukey) left by dpctl/del-flows goes with a purge.
    ovs.appctl(&["revalidator/purge"])
        .expect("revalidator/purge");
    (purged, flushed)
}

/// Denies ingress to the probe server and times the change to the first probe refused, then
/// deletes it and times to the first probe answered: ofnode (`netpol apply`/`del`) against
/// the seed's way (`ovs-ofctl bundle` of the same flows) on the seed's node.
fn enforced_latency(
    ours: &Cluster,
    ours_pair: &ProbePair,
    seed: &Cluster,
    seed_pair: &ProbePair,
) -> Enforced {
    let deny = deny_probe();
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..ROUNDS {
        // ofnode: the change and the probes, timed together.
        let before = ours.node(0).flows().expect("dump-flows");
        let started = Instant::now();
        ours.netpol_apply(&deny).expect("apply deny");
        samples[0].push(ms(first_probe_seeing(ours_pair, false, started)));
        let denied = ours.node(0).flows().expect("dump-flows");
        let started = Instant::now();
        ours.netpol_del(&namespace(1), "deny-probe")
            .expect("del deny");
        samples[1].push(ms(first_probe_seeing(ours_pair, true, started)));
        // The seed's way: the same flows, bundled, and the same probes on its node.
        let started = Instant::now();
        seed_bundle(seed, &FlowDiff::between(&before, &denied).bundle_lines());
        samples[2].push(ms(first_probe_seeing(seed_pair, false, started)));
        let started = Instant::now();
        seed_bundle(seed, &FlowDiff::between(&denied, &before).bundle_lines());
        samples[3].push(ms(first_probe_seeing(seed_pair, true, started)));
    }
    let [deny_ours, allow_ours, deny_seed, allow_seed] = samples.map(median);
    Enforced {
        deny_ours,
        allow_ours,
        deny_seed,
        allow_seed,
    }
}

fn sorted(mut flows: Vec<String>) -> Vec<String> {
    flows.sort();
    flows
}

/// 800 pods of two other nodes (10.128.2.0/23 and 10.128.4.0/23), `pod remote set`.
fn add_remote_pods(cluster: &Cluster) {
    let node = cluster.node(0);
    for (host, subnet) in [
        ("192.0.2.21", "10.128.2.0/23"),
        ("192.0.2.22", "10.128.4.0/23"),
    ] {
        node.cli(&["hostsubnet", "add", "--host-ip", host, "--subnet", subnet])
            .expect("hostsubnet add");
    }
    for i in 0..REMOTE_PODS {
        let base = if i < REMOTE_PODS / 2 {
            Ipv4Addr::new(10, 128, 2, 10)
        } else {
            Ipv4Addr::new(10, 128, 4, 10)
        };
        let ip = Ipv4Addr::from(u32::from(base) + (i % (REMOTE_PODS / 2)) as u32).to_string();
        let app = format!("app=a{}", (i / NAMESPACES) % APPS);
        node.cli(&[
            "pod",
            "remote",
            "set",
            "--pod",
            &format!("{}/remote-{i}", namespace(i % NAMESPACES)),
            "--ip",
            &ip,
            "--label",
            &app,
        ])
        .expect("pod remote set");
    }
}
