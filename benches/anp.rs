//! Issue 29's bench for the admin tiers, one node, in one run, side by side with the seed's way
//! (the same flows written with `ovs-ofctl bundle`) on a second node whose br0 holds the same
//! table and the same two probe pods:
//! - 10,000 pods in 50 namespaces (200 local: 2 probe pods and 198 br0 ports; 9,800 pods of 20
//!   other nodes' subnets, given through the API as an agent would), the NetworkPolicy bench's
//!   500 policies, then 100 AdminNetworkPolicies (priorities 1–100, each with a Deny and a Pass
//!   ingress rule over the shared selector groups and an Allow egress rule to a network);
//! - the time to install the 100 ANPs (POST /v1/admin-policies each) against the seed's way
//!   (one `ovs-ofctl bundle` of exactly what each changed), the flows they add (per ANP, per
//!   rule);
//! - one ANP priority change at a time, both ways, and the flows it touched: all of them must
//!   be that ANP's (tables 22 and 82, its old and new priority bands);
//! - a priority change → enforced: an ANP allowing the probe pair moved above one denying it,
//!   until the first probe connects, and back until the first probe is dropped; the seed's way
//!   the same with its bundle of the same flows.
//!
//! What the seed side does not include: computing the flows (it replays ofnode's diff).
//!
//! Run: `cargo bench --bench anp` (as root).

#[path = "common/netpol_world.rs"]
mod netpol_world;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use netpol_world::*;
use ofnode::api::client::Client;
use ofnode::api::wire;
use ofnode_harness::cluster::{labels, Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::reachability::Servers;
use ofnode_harness::seed_way::{
    median, ms, replace_flows, rss_mb, seed_bundle, side_by_side, FlowDiff,
};
use serde_json::{json, Value};

const REMOTE_SUBNETS: usize = 20;
const REMOTE_PER_SUBNET: usize = 490;
const ANPS: usize = 100;
const CHANGES: usize = 20;
const ROUNDS: usize = 10;

/// ANP `k`: the namespaces of team t{k%5}; ingress Deny from app a{k%10} pods on TCP 80, Pass
/// from team t{(k+1)%5}; egress Allow to 192.0.2.0/24 on UDP 53.
fn anp(k: usize, priority: usize) -> Value {
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": format!("anp{k}")},
        "spec": {
            "priority": priority,
            "subject": {"namespaces": {"matchLabels": {"team": format!("t{}", k % TEAMS)}}},
            "ingress": [
                {"name": "deny-app-80", "action": "Deny",
                 "from": [{"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": format!("a{}", k % APPS)}}}}],
                 "ports": [{"portNumber": {"protocol": "TCP", "port": 80}}]},
                {"name": "pass-team", "action": "Pass",
                 "from": [{"namespaces": {"matchLabels": {"team": format!("t{}", (k + 1) % TEAMS)}}}]}
            ],
            "egress": [
                {"name": "allow-docs-dns", "action": "Allow", "to": [{"networks": ["192.0.2.0/24"]}],
                 "ports": [{"portNumber": {"protocol": "UDP", "port": 53}}]}
            ]
        }
    })
}

/// An ANP over the probe pair only (ns0/client → ns1/probe, TCP 80): `action` at `priority`.
fn probe_anp(name: &str, action: &str, priority: usize) -> Value {
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": priority,
            "subject": {"pods": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace(1)}},
                                 "podSelector": {"matchLabels": {"app": "probe"}}}},
            "ingress": [{"name": format!("{action}-client"), "action": action,
                         "from": [{"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "client"}}}}]}]
        }
    })
}

/// The value of `name` (`table=`, `priority=`) in a dump-flows line or flow key.
fn field<T: std::str::FromStr>(line: &str, name: &str) -> Option<T> {
    line.split([',', ' '])
        .find_map(|f| f.trim().strip_prefix(name))
        .and_then(|v| v.parse().ok())
}

/// The table and priority of a dump-flows line or flow key.
fn table_priority(line: &str) -> (u8, u16) {
    (
        field(line, "table=").unwrap_or(0),
        field(line, "priority=").unwrap_or(32768),
    )
}

/// Whether a flow is ANP priority `p`'s: tables 22/82 at 65000 − 64p − (0..64).
fn of_priority(line: &str, p: usize) -> bool {
    let (table, prio) = table_priority(line);
    let top = 65_000 - 64 * p as u32;
    matches!(table, 22 | 82) && (top - 63..=top).contains(&u32::from(prio))
}

fn main() {
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"anp".contains(&arg))
    {
        return;
    }
    let ours = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .expect("one node in networkpolicy mode (run as root)");
    let node = ours.node(0);
    let client = Client::new(node.daemon().map(|d| d.api.clone()).expect("the daemon"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    for ns in 0..NAMESPACES {
        let team = format!("t{}", ns % TEAMS);
        ours.namespace_set(&namespace(ns), 100 + ns as u32, &labels(&[("team", &team)]))
            .expect("namespace set");
    }
    let probe_client = ours
        .add_named_pod(
            0,
            (&namespace(0), "client"),
            100,
            &labels(&[("app", "client")]),
        )
        .expect("client pod");
    let probe_server = ours
        .add_named_pod(
            0,
            (&namespace(1), "probe"),
            101,
            &labels(&[("app", "probe")]),
        )
        .expect("server pod");
    let ours_pair = ProbePair {
        _servers: Servers::start(probe_server.netns(), "probe".into()).expect("servers"),
        client: probe_client,
        server: probe_server,
    };
    add_local_ports(&ours);
    add_remote_pods(&ours, &client, &runtime);
    for ns in 0..NAMESPACES {
        for k in 0..POLICIES_PER_NAMESPACE {
            let body = serde_json::to_vec(&bench_policy(ns, k, 0)).expect("JSON");
            runtime
                .block_on(client.netpol_apply(body))
                .expect("POST /v1/netpols");
        }
    }
    let pods = 2 + LOCAL_PORTS + REMOTE_SUBNETS * REMOTE_PER_SUBNET;
    let flows_before = node.flows().expect("dump-flows").len();

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
            "probe pods alike"
        );
    }
    let seed_pair = ProbePair {
        _servers: Servers::start(seed_server.netns(), "probe".into()).expect("seed servers"),
        client: seed_client,
        server: seed_server,
    };
    replace_flows(&seed, &node.flows().expect("dump-flows"));

    let apply = |object: &Value| {
        let body = serde_json::to_vec(object).expect("JSON");
        runtime
            .block_on(client.admin_policy_apply(body))
            .expect("POST /v1/admin-policies");
    };
    let (mut install_ours, mut install_seed) = (Duration::ZERO, Duration::ZERO);
    for k in 0..ANPS {
        let (o, s, _) = side_by_side(&ours, &seed, || apply(&anp(k, k + 1)));
        install_ours += o;
        install_seed += s;
    }
    let flows = node.flows().expect("dump-flows");
    let mut same = seed.node(0).flows().expect("seed dump-flows");
    same.sort();
    let mut sorted = flows.clone();
    sorted.sort();
    assert!(
        same == sorted,
        "the seed's node does not hold ofnode's table"
    );
    let summaries = runtime
        .block_on(client.admin_policies())
        .expect("GET /v1/admin-policies");
    let anp_flows: usize = summaries.iter().map(|s| s.flows).sum();
    let rules: usize = summaries
        .iter()
        .map(|s| s.ingress_rules + s.egress_rules)
        .sum();
    println!(
        "anp install: {ANPS} ANPs over {pods} pods and {} NetworkPolicies: ofnode (POST /v1/admin-policies) {:.2} s ({:.1} ms each); seed way (`ovs-ofctl bundle` of each apply's changes) {:.2} s ({:.1} ms each); ratio {:.1}x",
        NAMESPACES * POLICIES_PER_NAMESPACE,
        install_ours.as_secs_f64(),
        ms(install_ours) / ANPS as f64,
        install_seed.as_secs_f64(),
        ms(install_seed) / ANPS as f64,
        install_seed.as_secs_f64() / install_ours.as_secs_f64().max(f64::MIN_POSITIVE),
    );
    println!(
        "anp flows: {} on br0, {} added by the ANPs (their own {anp_flows} plus the tiers' jumps and defaults): {:.1} per ANP, {:.1} per rule ({rules} rules); ofnode RSS {:.1} MB",
        flows.len(),
        flows.len() - flows_before,
        anp_flows as f64 / ANPS as f64,
        anp_flows as f64 / rules as f64,
        rss_mb(node.daemon().and_then(|d| d.pid()).unwrap_or(0)),
    );

    // One priority change at a time: ANP k moves to a free priority and back (two changes);
    // every flow a change touched must be that ANP's.
    let (mut ours_ms, mut seed_ms, mut touched, mut foreign) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    for change in 0..CHANGES / 2 {
        let k = (change * 7) % ANPS;
        let (home, away) = (k + 1, 200 + change);
        for (from, to) in [(home, away), (away, home)] {
            let (o, s, diff) = side_by_side(&ours, &seed, || apply(&anp(k, to)));
            ours_ms.push(ms(o));
            seed_ms.push(ms(s));
            touched.push(diff.len() as f64);
            foreign += diff
                .add
                .iter()
                .chain(&diff.delete)
                .filter(|f| !of_priority(f, from) && !of_priority(f, to))
                .count();
        }
    }
    let (o, s) = (median(ours_ms), median(seed_ms));
    println!(
        "anp one priority change ({CHANGES} changes, median {} flows touched, {foreign} of them not the changed ANP's): ofnode (POST /v1/admin-policies) median {o:.2} ms; seed way median {s:.2} ms; ratio {:.1}x",
        median(touched),
        s / o.max(f64::MIN_POSITIVE)
    );
    let mut same = seed.node(0).flows().expect("seed dump-flows");
    same.sort();
    let mut now = node.flows().expect("dump-flows");
    now.sort();
    assert!(
        same == now,
        "the seed's node does not hold ofnode's table after the changes"
    );

    // Priority change → enforced: deny at 900, allow at 950 (denied); allow moves to 850.
    apply(&probe_anp("probe-deny", "Deny", 900));
    apply(&probe_anp("probe-allow", "Allow", 950));
    replace_flows(&seed, &node.flows().expect("dump-flows"));
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..ROUNDS {
        let denied = node.flows().expect("dump-flows");
        let started = Instant::now();
        apply(&probe_anp("probe-allow", "Allow", 850));
        samples[0].push(ms(first_probe_seeing(&ours_pair, true, started)));
        let allowed = node.flows().expect("dump-flows");
        let started = Instant::now();
        apply(&probe_anp("probe-allow", "Allow", 950));
        samples[1].push(ms(first_probe_seeing(&ours_pair, false, started)));
        let started = Instant::now();
        seed_bundle(&seed, &FlowDiff::between(&denied, &allowed).bundle_lines());
        samples[2].push(ms(first_probe_seeing(&seed_pair, true, started)));
        let started = Instant::now();
        seed_bundle(&seed, &FlowDiff::between(&allowed, &denied).bundle_lines());
        samples[3].push(ms(first_probe_seeing(&seed_pair, false, started)));
    }
    let [allow_ours, deny_ours, allow_seed, deny_seed] = samples.map(median);
    println!(
        "anp priority change -> enforced (median of {ROUNDS}): allow moved above deny: ofnode {allow_ours:.1} ms, seed way {allow_seed:.1} ms ({:.1}x); moved back: ofnode {deny_ours:.1} ms, seed way {deny_seed:.1} ms ({:.1}x)",
        allow_seed / allow_ours.max(f64::MIN_POSITIVE),
        deny_seed / deny_ours.max(f64::MIN_POSITIVE),
    );
}

/// 9,800 pods of 20 other nodes (10.128.2.0/23, 10.128.4.0/23, …), through the API.
fn add_remote_pods(cluster: &Cluster, client: &Client, runtime: &tokio::runtime::Runtime) {
    let node = cluster.node(0);
    for s in 0..REMOTE_SUBNETS {
        let subnet = format!("10.128.{}.0/23", 2 * (s + 1));
        let host = format!("192.0.2.{}", 21 + s);
        node.cli(&["hostsubnet", "add", "--host-ip", &host, "--subnet", &subnet])
            .expect("hostsubnet add");
        for j in 0..REMOTE_PER_SUBNET {
            let i = s * REMOTE_PER_SUBNET + j;
            let base = u32::from(Ipv4Addr::new(10, 128, 2 * (s as u8 + 1), 10));
            let ip = Ipv4Addr::from(base + j as u32);
            let key = format!("{}/remote-{i}", namespace(i % NAMESPACES))
                .parse()
                .expect("pod key");
            let info = ofnode::sdn::PodInfo {
                labels: [("app".to_string(), format!("a{}", (i / NAMESPACES) % APPS))].into(),
                ips: vec![IpAddr::V4(ip)],
                local: false,
                ports: Vec::new(),
            };
            runtime
                .block_on(client.remote_pod_set(&wire::KnownPod::new(&key, &info)))
                .expect("POST /v1/remote-pods");
        }
    }
}
