//! Node controller benchmark (`cargo bench --bench sdn`), on private OVS instances:
//! 1. median pod add (port + flows) through `Node` vs the seed's way (`ovs-vsctl add-port`,
//!    `ovs-vsctl get … ofport`, `ovs-ofctl bundle` of the 4 flows);
//! 2. 1,000 pods added by 16 concurrent clients (pods/s);
//! 3. 10,000 pods: whole-table install at setup, and re-install after ovs-vswitchd is killed
//!    and restarted (seconds), and the process RSS holding them;
//! 4. the cost of high availability at 10,000 pods: a pod add through the daemon's API with
//!    `[ha]` (which replicates the whole desired state to OVSDB with every batch) against the
//!    same daemon without it, on the same 10,000-pod state;
//! 5. the per-pod counter poll's cost to pod adds: pod add latency at 10,000 pods with the poll
//!    off and polling every second (each poll: flow stats of tables 20, 40 and 70, 40,000
//!    flows).

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ofnode::sdn::journal::Journal;
use ofnode::sdn::state::{Change, NodeState};
use ofnode::sdn::Pod;
use ofnode::sdn::{Mode, Node, NodeConfig, PodAdd, SetupRequest, Vnid};
use ofnode_harness::cpu::{own_cpu, process_cpu};
use ofnode_harness::Ovs;

const SINGLE_PODS: usize = 100;
const CONCURRENT_PODS: usize = 1000;
const CLIENTS: usize = 16;
const BIG_PODS: u32 = 10_000;

fn setup_request() -> SetupRequest {
    SetupRequest {
        cluster_network: "10.128.0.0/14".parse().unwrap(),
        service_network: "172.30.0.0/16".parse().unwrap(),
        local_subnet: "10.128.0.0/18".parse().unwrap(),
        gateway: "10.128.0.1".parse().unwrap(),
        mode: Mode::Subnet,
    }
}

fn config(ovs: &Ovs, state: &std::path::Path) -> NodeConfig {
    let mut cfg = NodeConfig::new(ovs.db_target(), ovs.mgmt_target("br0"), state);
    cfg.datapath_type = Some("netdev".into());
    cfg.vswitchd_ctl =
        ofnode::unixctl::VswitchdCtl::new(Some(ovs.vswitchd_ctl().display().to_string()), "");
    cfg.netns = Some(ovs.netns().path().into());
    cfg.manage_host_network = false;
    cfg.dns.nameservers = Some(Vec::new());
    cfg.connect_timeout = Duration::from_secs(30);
    cfg
}

fn pod_ip(i: usize) -> Ipv4Addr {
    let n = u32::from(Ipv4Addr::new(10, 128, 1, 0)) + i as u32;
    Ipv4Addr::from(n)
}

fn pod_add(prefix: &str, i: usize) -> PodAdd {
    let mac = format!("0a:58:00:00:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff);
    PodAdd {
        pod: format!("default/{prefix}-pod-{i}").parse().unwrap(),
        veth: format!("{prefix}{i}").parse().unwrap(),
        ip: pod_ip(i),
        mac: mac.parse().unwrap(),
        sandbox: format!("{i:064x}").parse().unwrap(),
        vnid: Vnid::new(0).unwrap(),
        labels: Default::default(),
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The seed's SetUpPod: `ovs-vsctl --may-exist add-port`, `ovs-vsctl get Interface ofport`,
/// then `ovs-ofctl bundle` of its four flows.
fn seed_pod_add(ovs: &Ovs, pod: &PodAdd, flows_file: &std::path::Path) -> Duration {
    let started = Instant::now();
    let veth = pod.veth.to_string();
    ovs.vsctl(&["--may-exist", "add-port", "br0", &veth])
        .expect("ovs-vsctl add-port");
    let ofport = ovs
        .vsctl(&["get", "Interface", &veth, "ofport"])
        .expect("ovs-vsctl get");
    let ofport = ofport.trim();
    let note = pod.sandbox.note();
    let (ip, mac) = (pod.ip, pod.mac);
    let text = format!(
        "flow add table=20, priority=100, in_port={ofport}, arp, nw_src={ip}, arp_sha={mac}, actions=load:0->NXM_NX_REG0[], note:{}, goto_table:21\n\
         flow add table=20, priority=100, in_port={ofport}, ip, nw_src={ip}, actions=load:0->NXM_NX_REG0[], goto_table:21\n\
         flow add table=40, priority=100, arp, nw_dst={ip}, actions=output:{ofport}\n\
         flow add table=70, priority=100, ip, nw_dst={ip}, actions=load:0->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:80\n",
        note
    );
    std::fs::write(flows_file, text).expect("write flows");
    ovs.ofctl("bundle", "br0", &[&flows_file.display().to_string()])
        .expect("ovs-ofctl bundle");
    started.elapsed()
}

async fn single_pod_adds() {
    let ovs = Ovs::start().expect("OVS");
    let state = tempfile::tempdir().expect("tempdir");
    let node = Node::start(config(&ovs, state.path())).await.expect("node");
    node.setup(&setup_request()).await.expect("setup");
    ovs.netns()
        .add_veth_pairs("bp", 0..2 * SINGLE_PODS)
        .expect("veths");
    let mut ofnode_times = Vec::new();
    for i in 0..SINGLE_PODS {
        let pod = pod_add("bp", i);
        let started = Instant::now();
        node.pod_add(&pod).await.expect("pod add");
        ofnode_times.push(started.elapsed());
    }
    // Where the time goes: the OVSDB part alone (the same client code, waiting for
    // ovs-vswitchd to assign the port) and a flows-only operation (bundle + journal sync).
    let ovsdb = ofnode::ovsdb::Client::connect(&ovs.db_target(), Default::default())
        .await
        .expect("ovsdb");
    ovs.netns()
        .add_veth_pairs("bq", 0..SINGLE_PODS)
        .expect("veths");
    let mut port_times = Vec::new();
    for i in 0..SINGLE_PODS {
        let spec = ofnode::ovsdb::PortSpec {
            bridge: "br0".into(),
            name: format!("bq{i}"),
            ..Default::default()
        };
        let started = Instant::now();
        ovsdb.add_port(&spec).await.expect("add_port");
        port_times.push(started.elapsed());
    }
    let mut flow_times = Vec::new();
    for i in 0..SINGLE_PODS {
        let hs = ofnode::sdn::HostSubnet {
            host_ip: Ipv4Addr::new(192, 0, 2, 10),
            subnet: ofnode::sdn::Cidr::new(Ipv4Addr::new(10, 129, i as u8, 0), 24).expect("cidr"),
            fixed_vnid: None,
            vtep_mac: None,
        };
        let started = Instant::now();
        node.hostsubnet_add(&hs).await.expect("hostsubnet add");
        flow_times.push(started.elapsed());
    }
    println!(
        "sdn where a pod add goes: OVSDB add-port with the wait for ovs-vswitchd median {:.2} ms; a flows-only operation (bundle + journal fsync) median {:.2} ms",
        ms(percentile(&mut port_times, 0.5)),
        ms(percentile(&mut flow_times, 0.5)),
    );
    let flows_file = state.path().join("seed.flows");
    let seed_times: Vec<Duration> = (SINGLE_PODS..2 * SINGLE_PODS)
        .map(|i| seed_pod_add(&ovs, &pod_add("bp", i), &flows_file))
        .collect();
    let (mut a, mut b) = (ofnode_times, seed_times);
    let (a50, a99) = (percentile(&mut a, 0.5), percentile(&mut a, 0.99));
    let (b50, b99) = (percentile(&mut b, 0.5), percentile(&mut b, 0.99));
    println!(
        "sdn pod add ({SINGLE_PODS} each, port + 4 flows): ofnode median {:.2} ms p99 {:.2} ms; seed way (ovs-vsctl add-port + get + ovs-ofctl bundle) median {:.2} ms p99 {:.2} ms; ratio {:.1}x",
        ms(a50), ms(a99), ms(b50), ms(b99), b50.as_secs_f64() / a50.as_secs_f64()
    );
    node.shutdown().await;
}

async fn concurrent_pod_adds() {
    let ovs = Ovs::start().expect("OVS");
    let state = tempfile::tempdir().expect("tempdir");
    let node = Node::start(config(&ovs, state.path())).await.expect("node");
    node.setup(&setup_request()).await.expect("setup");
    ovs.netns()
        .add_veth_pairs("cp", 0..CONCURRENT_PODS)
        .expect("veths");
    let vswitchd = ovs.vswitchd_pid().expect("ovs-vswitchd runs");
    let ovsdb = ovs.ovsdb_pid().expect("ovsdb-server runs");
    let cpu_before = (own_cpu(), process_cpu(vswitchd), process_cpu(ovsdb));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            for i in (client..CONCURRENT_PODS).step_by(CLIENTS) {
                node.pod_add(&pod_add("cp", i)).await.expect("pod add");
            }
        }));
    }
    for task in tasks {
        task.await.expect("client");
    }
    let elapsed = started.elapsed();
    let cpu = |now: Duration, before: Duration| (now - before).as_secs_f64();
    let (ours, switch, db) = (
        cpu(own_cpu(), cpu_before.0),
        cpu(process_cpu(vswitchd), cpu_before.1),
        cpu(process_cpu(ovsdb), cpu_before.2),
    );
    let m = node.metrics();
    println!(
        "sdn concurrent pod adds: {CONCURRENT_PODS} pods by {CLIENTS} clients in {:.2} s = {:.0} pods/s ({} bundles, {} flow mods); CPU meanwhile: ovs-vswitchd {switch:.2} s, ovsdb-server {db:.2} s, this process {ours:.2} s",
        elapsed.as_secs_f64(),
        CONCURRENT_PODS as f64 / elapsed.as_secs_f64(),
        m.transactions.load(Ordering::Relaxed),
        m.flow_mods.load(Ordering::Relaxed),
    );
    node.shutdown().await;
}

/// The same 1,000 pods the seed's way (ovs-vsctl + ovs-ofctl exec per pod) from 16 threads.
fn seed_concurrent_pod_adds() {
    let ovs = Ovs::start().expect("OVS");
    let state = tempfile::tempdir().expect("tempdir");
    ovs.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
        "protocols=OpenFlow13",
    ])
    .expect("add-br");
    ovs.netns()
        .add_veth_pairs("sp", 0..CONCURRENT_PODS)
        .expect("veths");
    let started = Instant::now();
    std::thread::scope(|scope| {
        for client in 0..CLIENTS {
            let (ovs, dir) = (&ovs, state.path());
            scope.spawn(move || {
                let file = dir.join(format!("client{client}.flows"));
                for i in (client..CONCURRENT_PODS).step_by(CLIENTS) {
                    seed_pod_add(ovs, &pod_add("sp", i), &file);
                }
            });
        }
    });
    let elapsed = started.elapsed();
    println!(
        "sdn concurrent pod adds the seed's way: {CONCURRENT_PODS} pods by {CLIENTS} threads in {:.2} s = {:.0} pods/s",
        elapsed.as_secs_f64(),
        CONCURRENT_PODS as f64 / elapsed.as_secs_f64(),
    );
}

/// Returns what building the state freed, so the node's own footprint shows.
fn release_memory() {
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn rss_mb() -> f64 {
    status_mb("VmRSS:")
}

fn status_mb(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A state with 10,000 pods without a known veth: their flows need no port, and a pod with a
/// veth would have the node's OVSDB reconciler add its port (10,000 ports of devices that do
/// not exist, which is not what these benchmarks measure).
fn big_state(dir: &std::path::Path) {
    let (mut store, _) = Journal::open(dir).expect("store");
    let mut state = NodeState {
        setup: Some(setup_request()),
        ..NodeState::default()
    };
    for i in 0..BIG_PODS as usize {
        let add = pod_add("x", i);
        state.pods.insert(
            add.pod,
            Pod {
                veth: None,
                ip: add.ip,
                mac: add.mac,
                sandbox: add.sandbox,
                vnid: add.vnid,
                ofport: 3 + i as u16,
            },
        );
    }
    store
        .append(&[Change::Replace {
            state: Box::new(state),
        }])
        .expect("journal");
}

fn switch_flow_count(ovs: &Ovs) -> usize {
    ovs.dump_flows("br0").map(|f| f.len()).unwrap_or(0)
}

async fn ten_thousand_pods() {
    let ovs = Ovs::start().expect("OVS");
    let state = tempfile::tempdir().expect("tempdir");
    big_state(state.path());
    release_memory();
    let rss_before = rss_mb();
    let node = Node::start(config(&ovs, state.path())).await.expect("node");
    let flows = node.status().flows;
    let started = Instant::now();
    node.setup(&setup_request()).await.expect("setup");
    let install = started.elapsed();
    assert_eq!(switch_flow_count(&ovs), flows, "switch lacks flows");
    let bundle = node.metrics().transaction_latency.count();
    println!(
        "sdn {BIG_PODS} pods: {flows} flows; setup with the whole table (bridge, ports, one bundle) {:.2} s; {bundle} bundles",
        install.as_secs_f64()
    );

    let reinstalls = node.metrics().full_reinstalls.load(Ordering::Relaxed);
    let connects = node.metrics().switch_connects.load(Ordering::Relaxed);
    ovs.kill_vswitchd();
    ovs.start_vswitchd().expect("restart vswitchd");
    let restarted = Instant::now();
    let deadline = restarted + Duration::from_secs(120);
    while node.metrics().switch_connects.load(Ordering::Relaxed) == connects {
        assert!(Instant::now() < deadline, "no reconnect after the restart");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let reconnected = Instant::now();
    while node.metrics().full_reinstalls.load(Ordering::Relaxed) == reinstalls {
        assert!(Instant::now() < deadline, "no re-install after the restart");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let reinstalled = reconnected.elapsed();
    assert_eq!(switch_flow_count(&ovs), flows, "re-install incomplete");
    println!(
        "sdn re-install of {BIG_PODS} pods ({flows} flows) after kill -9 + restart of ovs-vswitchd: {:.2} s from the reconnect to the bundle committed (target <= 1 s); {:.2} s from vswitchd ready",
        reinstalled.as_secs_f64(),
        (reconnected + reinstalled - restarted).as_secs_f64()
    );
    let committing = node.metrics().transaction_latency.sum();
    let started = Instant::now();
    node.resync(true).await.expect("forced re-install");
    let commit = node.metrics().transaction_latency.sum() - committing;
    println!(
        "sdn forced whole-table re-install (delete all + add {flows} in one bundle): {:.2} s, of which the bundle commit {:.2} s",
        started.elapsed().as_secs_f64(),
        commit.as_secs_f64()
    );
    println!(
        "sdn RSS with {BIG_PODS} pods: {:.1} MB at rest, {:.1} MB peak (bench process; {:.1} MB before the node started; target <= 64 MB)",
        rss_mb(),
        status_mb("VmHWM:"),
        rss_before
    );
    node.shutdown().await;
}

/// Pod adds timed in each variant of the HA comparison.
const HA_PODS: usize = 40;

/// One `POST /v1/pods` on the daemon's API socket; the HTTP status.
fn api_pod_add(api: &std::path::Path, pod: &PodAdd) -> u16 {
    use std::io::{Read, Write as _};
    let body = serde_json::to_string(pod).expect("pod add JSON");
    let mut stream = std::os::unix::net::UnixStream::connect(api).expect("API socket");
    let request = format!(
        "POST /v1/pods HTTP/1.1\r\nHost: ofnode\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("reply");
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// Median and p90 of `HA_PODS` pod adds through an `ofnode run` daemon holding 10,000 pods,
/// with the `[ha]` section `ha` (a single peer, which becomes active) or without.
fn daemon_pod_adds_at_ten_thousand(ha: Option<&str>) -> (Duration, Duration) {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_ofnode"));
    let ovs = Ovs::start().expect("OVS");
    ovs.add_bridge("br0").expect("br0");
    let name = if ha.is_some() { "ha" } else { "plain" };
    let state_dir = ovs.dir().join(name).join("state");
    std::fs::create_dir_all(&state_dir).expect("state dir");
    big_state(&state_dir);
    let mut extra = vec!["--no-host-network".to_string()];
    if let Some(section) = ha {
        let path = ovs.dir().join("ha.toml");
        std::fs::write(&path, section).expect("config");
        extra.extend(["--config".into(), path.display().to_string()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let daemon =
        ofnode_harness::Daemon::start_named(&ovs, binary, name, "ptcp:6653:127.0.0.1", &extra)
            .expect("ofnode run");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let status = daemon.status_json().expect("status");
        let active = ha.is_none() || status["ha"]["role"] == "active";
        if active && status["in_sync"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "never in sync: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
    ovs.netns().add_veth_pairs("hp", 0..HA_PODS).expect("veths");
    let mut times: Vec<Duration> = (0..HA_PODS)
        .map(|i| {
            // Address, MAC and sandbox past the 10,000 pods of the state.
            let mut pod = pod_add("x", BIG_PODS as usize + i);
            pod.veth = format!("hp{i}").parse().expect("veth name");
            let started = Instant::now();
            let status = api_pod_add(&daemon.api, &pod);
            assert_eq!(status, 200, "pod add: {}", daemon.log_tail(10));
            started.elapsed()
        })
        .collect();
    (percentile(&mut times, 0.5), percentile(&mut times, 0.9))
}

fn ha_cost_at_ten_thousand_pods() {
    let (plain50, plain90) = daemon_pod_adds_at_ten_thousand(None);
    let ha = "[ha]\nid = 1\ncontrollers = [\"tcp:127.0.0.1:6653\"]\n";
    let (ha50, ha90) = daemon_pod_adds_at_ten_thousand(Some(ha));
    let ratio = ha50.as_secs_f64() / plain50.as_secs_f64();
    println!(
        "sdn HA cost at {BIG_PODS} pods: pod add through the daemon API ({HA_PODS} each) with [ha] median {:.1} ms p90 {:.1} ms; without median {:.1} ms p90 {:.1} ms; ratio {ratio:.1}x (the issue's bound: 2x){}",
        ms(ha50),
        ms(ha90),
        ms(plain50),
        ms(plain90),
        if ratio > 2.0 { ": OVER" } else { "" }
    );
}

/// Pod adds timed with the counter poll off and on.
const COUNTER_ADDS: usize = 300;

/// Median, p90, p99 and max of `COUNTER_ADDS` pod adds (10 ms apart, so several polls fall
/// among them) on a node holding 10,000 pods whose counters are polled every `interval`
/// (zero: never); and the polls made, with the last one's duration.
async fn pod_adds_while_polling(interval: Duration) -> ([Duration; 4], u64, Duration) {
    let ovs = Ovs::start().expect("OVS");
    let state = tempfile::tempdir().expect("tempdir");
    big_state(state.path());
    let mut cfg = config(&ovs, state.path());
    cfg.pod_counters_interval = interval;
    let node = Node::start(cfg).await.expect("node");
    node.setup(&setup_request()).await.expect("setup");
    ovs.netns()
        .add_veth_pairs("cp", 0..COUNTER_ADDS)
        .expect("veths");
    let mut times = Vec::new();
    for i in 0..COUNTER_ADDS {
        let mut pod = pod_add("x", BIG_PODS as usize + i);
        pod.veth = format!("cp{i}").parse().expect("veth name");
        let started = Instant::now();
        node.pod_add(&pod).await.expect("pod add");
        times.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let polls = node.metrics().pod_counter_polls.load(Ordering::Relaxed);
    let took = node.metrics().pod_counters.last_poll_took();
    node.shutdown().await;
    let quantiles = [0.5, 0.9, 0.99, 1.0].map(|p| percentile(&mut times, p));
    (quantiles, polls, took)
}

async fn counter_poll_cost() {
    let (off, _, _) = pod_adds_while_polling(Duration::ZERO).await;
    let (on, polls, took) = pod_adds_while_polling(Duration::from_secs(1)).await;
    let show = |q: [Duration; 4]| {
        format!(
            "median {:.2} ms p90 {:.2} ms p99 {:.2} ms max {:.2} ms",
            ms(q[0]),
            ms(q[1]),
            ms(q[2]),
            ms(q[3])
        )
    };
    println!(
        "sdn pod counters at {BIG_PODS} pods: pod add ({COUNTER_ADDS} each) without polling {}; polling every 1 s {} ({polls} polls, the last {:.1} ms)",
        show(off),
        show(on),
        ms(took)
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // SDN_BENCH=single|concurrent|big|ha|counters runs one part only.
    let only = std::env::var("SDN_BENCH").ok();
    let run = |part: &str| only.as_deref().is_none_or(|o| o == part);
    runtime.block_on(async {
        if run("single") {
            single_pod_adds().await;
        }
        if run("concurrent") {
            concurrent_pod_adds().await;
            seed_concurrent_pod_adds();
        }
        if run("big") {
            ten_thousand_pods().await;
        }
        if run("counters") {
            counter_poll_cost().await;
        }
    });
    if run("ha") {
        ha_cost_at_ten_thousand_pods();
    }
}
