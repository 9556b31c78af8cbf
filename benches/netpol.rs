//! Issue 14's scale bench for the networkpolicy mode, one node, in one run:
//! - 1,000 pods in 50 namespaces (200 local: 2 in namespaces of their own with TCP servers for
//!   the probe, 198 as br0 ports; 800 remote pods of two other nodes' subnets, given with
//!   `pod remote set`), 500 policies (10 per namespace, each selecting one app label, peers by
//!   namespace label and pod label, a TCP port range and a UDP port);
//! - the time to install all 500 (`ofnode netpol apply`, one after another), the flows br0 then
//!   holds (and per policy), ofnode's RSS;
//! - the latency from `netpol apply` of one policy to enforced (the first probe that sees it);
//! - the same change the seed's way: the flows that policy added, sent with `ovs-ofctl bundle`
//!   to a second private OVS holding the same table.
//!
//! Run: `cargo bench --bench netpol` (as root). Written against /work/notes/netpol-contract.md.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use ofnode_harness::cluster::{labels, Cluster, ClusterOptions, Control, Endpoint, Mode};
use ofnode_harness::reachability::{probe_once, Probe, Servers};
use ofnode_harness::Ovs;
use serde_json::json;

const NAMESPACES: usize = 50;
const POLICIES_PER_NAMESPACE: usize = 10;
const LOCAL_PORTS: usize = 198;
const REMOTE_PODS: usize = 800;
const APPS: usize = 10;
const TEAMS: usize = 5;
const CHANGES: usize = 20;

fn namespace(i: usize) -> String {
    format!("ns{i}")
}

fn bench_policy(ns: usize, k: usize, variant: usize) -> serde_json::Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": format!("p{k}"), "namespace": namespace(ns)},
        "spec": {
            "podSelector": {"matchLabels": {"app": format!("a{k}")}},
            "ingress": [{
                "from": [{
                    "namespaceSelector": {"matchLabels": {"team": format!("t{}", (k + variant) % TEAMS)}},
                    "podSelector": {"matchLabels": {"app": format!("a{}", (k + 1) % APPS)}}
                }],
                "ports": [
                    {"protocol": "TCP", "port": 8000, "endPort": 8080 + variant},
                    {"protocol": "UDP", "port": 53}
                ]
            }]
        }
    })
}

fn apply(cluster: &Cluster, policy: &serde_json::Value) -> Duration {
    let started = Instant::now();
    cluster.netpol_apply(policy).expect("netpol apply");
    started.elapsed()
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"netpol".contains(&arg))
    {
        return;
    }
    let cluster = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .expect("one node in networkpolicy mode (run as root)");
    let node = cluster.node(0);
    for ns in 0..NAMESPACES {
        let team = format!("t{}", ns % TEAMS);
        cluster
            .namespace_set(&namespace(ns), 100 + ns as u32, &labels(&[("team", &team)]))
            .expect("namespace set");
    }
    // The probe pair: a client in ns0 and a server in ns1, not selected by any bench policy.
    let client = cluster
        .add_pod_in(0, &namespace(0), 100, &labels(&[("app", "client")]))
        .expect("client pod");
    let server = cluster
        .add_pod_in(0, &namespace(1), 101, &labels(&[("app", "probe")]))
        .expect("server pod");
    let _servers = Servers::start(server.netns(), "probe".into()).expect("servers");
    add_local_ports(&cluster);
    add_remote_pods(&cluster);
    let flows_before = node.flows().expect("dump-flows").len();

    let started = Instant::now();
    for ns in 0..NAMESPACES {
        for k in 0..POLICIES_PER_NAMESPACE {
            cluster
                .netpol_apply(&bench_policy(ns, k, 0))
                .expect("netpol apply");
        }
    }
    let install = started.elapsed();
    let flows = node.flows().expect("dump-flows");
    let pid = node.daemon().and_then(|d| d.pid()).unwrap_or(0);
    let policies = NAMESPACES * POLICIES_PER_NAMESPACE;
    println!(
        "netpol install: {policies} policies over 1000 pods in {NAMESPACES} namespaces in {:.2} s ({:.1} ms each, `ofnode netpol apply` CLI); {} flows ({} for policies, {:.1} per policy); ofnode RSS {:.1} MB (goal <= 96 MB)",
        install.as_secs_f64(),
        install.as_secs_f64() * 1000.0 / policies as f64,
        flows.len(),
        flows.len().saturating_sub(flows_before),
        flows.len().saturating_sub(flows_before) as f64 / policies as f64,
        rss_mb(pid),
    );

    // One change at a time: replace a policy (its TCP range grows), ofnode against the seed's
    // way with exactly the flows that change added.
    let seed = Ovs::start().expect("OVS for the seed's way");
    seed.add_bridge("br0").expect("seed br0");
    load_flows(&seed, &flows);
    let (mut ours, mut exec) = (Vec::new(), Vec::new());
    for change in 0..CHANGES {
        let before = node.flows().expect("dump-flows");
        ours.push(apply(&cluster, &bench_policy(change % NAMESPACES, 0, change + 1)).as_secs_f64());
        let after = node.flows().expect("dump-flows");
        let added: Vec<&String> = after.iter().filter(|f| !before.contains(f)).collect();
        exec.push(seed_bundle(&seed, &added).as_secs_f64());
    }
    let (ours, exec) = (median(ours) * 1000.0, median(exec) * 1000.0);
    println!(
        "netpol one policy change: ofnode `netpol apply` median {ours:.2} ms; seed way (`ovs-ofctl bundle` of the same added flows) median {exec:.2} ms; ratio {:.1}x (goal >= 10x)",
        exec / ours.max(f64::MIN_POSITIVE)
    );

    enforced_latency(&cluster, &client, server.ip);
}

/// Denies ingress to the probe server and times `netpol apply` to the first probe refused,
/// then deletes it and times to the first probe answered.
fn enforced_latency(cluster: &Cluster, client: &ofnode_harness::cluster::Pod, server: Ipv4Addr) {
    let deny = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "deny-probe", "namespace": namespace(1)},
        "spec": {"podSelector": {"matchLabels": {"app": "probe"}}, "policyTypes": ["Ingress"]}
    });
    let path = client.netns().path();
    let probe = |want: bool| -> Duration {
        let started = Instant::now();
        loop {
            let path = path.clone();
            let seen = std::thread::spawn(move || {
                probe_once(
                    &path,
                    server,
                    "probe",
                    Probe::TCP80,
                    Duration::from_millis(100),
                )
            })
            .join()
            .unwrap_or(!want);
            if seen == want || started.elapsed() > Duration::from_secs(10) {
                return started.elapsed();
            }
        }
    };
    let (mut deny_ms, mut allow_ms) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let started = Instant::now();
        cluster.netpol_apply(&deny).expect("apply deny");
        probe(false);
        deny_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let started = Instant::now();
        cluster
            .netpol_del(&namespace(1), "deny-probe")
            .expect("del deny");
        probe(true);
        allow_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "netpol apply -> enforced (first TCP probe refused, 100 ms probes): median {:.1} ms; delete -> first probe answered: median {:.1} ms",
        median(deny_ms),
        median(allow_ms)
    );
}

/// 198 veths in the node's namespace, each a pod of its namespace (`ofnode pod add`).
fn add_local_ports(cluster: &Cluster) {
    let node = cluster.node(0);
    node.netns()
        .add_veth_pairs("bp", 0..LOCAL_PORTS)
        .expect("creating veths");
    for i in 0..LOCAL_PORTS {
        let ip = Ipv4Addr::from(u32::from(node.subnet) + 100 + i as u32).to_string();
        let ns = i % NAMESPACES;
        let (vnid, app) = ((100 + ns).to_string(), format!("app=a{}", i % APPS));
        node.cli(&[
            "pod",
            "add",
            "--veth",
            &format!("bp{i}"),
            "--ip",
            &ip,
            "--mac",
            &format!("0a:58:00:00:{:02x}:{:02x}", i >> 8, i & 0xff),
            "--sandbox",
            &format!("{:064x}", 0xb000 + i),
            "--vnid",
            &vnid,
            "--namespace",
            &namespace(ns),
            "--label",
            &app,
        ])
        .expect("pod add");
    }
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
        let app = format!("app=a{}", i % APPS);
        node.cli(&[
            "pod",
            "remote",
            "set",
            "--ip",
            &ip,
            "--namespace",
            &namespace(i % NAMESPACES),
            "--label",
            &app,
        ])
        .expect("pod remote set");
    }
}

fn load_flows(seed: &Ovs, flows: &[String]) {
    let path = seed.dir().join("all-flows.txt");
    std::fs::write(&path, flows.join("\n") + "\n").expect("write flows");
    seed.ofctl("add-flows", "br0", &[&path.display().to_string()])
        .expect("ovs-ofctl add-flows");
}

/// The seed's way of one change: write the flows to a file and exec `ovs-ofctl bundle`.
fn seed_bundle(seed: &Ovs, flows: &[&String]) -> Duration {
    let path = seed.dir().join("change.txt");
    let started = Instant::now();
    let text: String = flows.iter().map(|f| format!("flow add {f}\n")).collect();
    std::fs::write(&path, text).expect("write change");
    seed.ofctl("bundle", "br0", &[&path.display().to_string()])
        .expect("ovs-ofctl bundle");
    started.elapsed()
}
