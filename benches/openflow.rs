//! `cargo bench --bench openflow` (`make bench`): the seed's 4-flow pod transaction and one
//! 100,000-flow bundle, through (1) ofnode, (2) `ovs-ofctl -O OpenFlow13 bundle br0 FILE` with
//! and without `--no-names`, (3) os-ken (`benches/osken_bundle.py` under osken-manager), all on
//! the same private Open vSwitch, printed side by side with ratios. Every run is checked against
//! the switch (flow counts, identical flows) so a fast wrong answer cannot pass as a result.
//!
//! Knobs (environment): OFNODE_BENCH_POD_ITERS (ofnode and os-ken, default 2000),
//! OFNODE_BENCH_OFCTL_ITERS (default 200), OFNODE_BENCH_BULK_FLOWS (default 100000),
//! OFNODE_BENCH_BULK_RUNS (ofnode, default 3), OFNODE_BENCH_SKIP_OSKEN=1,
//! OFNODE_BENCH_RUNTIME=current (ofnode on a current-thread runtime instead of multi-thread).

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofnode::openflow::{Switch, SwitchConfig};
use ofnode_harness::cpu::{own_cpu, process_cpu};
use ofnode_harness::Ovs;
use ofnode_proto::{text, FlowMod, FlowModCommand, OFPC_FRAG_NX_MATCH};

// The seed's pod (ovscontroller.go setupPodFlows): ofport 3, 10.128.0.5, vnid 10.
const POD_OFPORT: u32 = 3;
const POD_IP: &str = "10.128.0.5";
const POD_MAC: &str = "0a:58:0a:80:00:05";
const POD_VNID: u32 = 10;
const SANDBOX_ID: &str = "4e8c5e2ab3f1d7c9e0a2b4c6d8f0e1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5";
/// The bulk flows' destinations start here (inside 10.128.0.0/14, away from the pod).
const BULK_BASE_IP: Ipv4Addr = Ipv4Addr::new(10, 129, 0, 0);
const OSKEN_PORT: u16 = 6653;

struct Params {
    pod_iters: usize,
    pod_warmup: usize,
    ofctl_iters: usize,
    bulk_flows: usize,
    bulk_runs: usize,
    osken: bool,
}

impl Params {
    fn from_env() -> Params {
        let num = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Params {
            pod_iters: num("OFNODE_BENCH_POD_ITERS", 2000),
            pod_warmup: 200,
            ofctl_iters: num("OFNODE_BENCH_OFCTL_ITERS", 200),
            bulk_flows: num("OFNODE_BENCH_BULK_FLOWS", 100_000),
            bulk_runs: num("OFNODE_BENCH_BULK_RUNS", 3).max(1),
            osken: std::env::var("OFNODE_BENCH_SKIP_OSKEN").is_err(),
        }
    }
}

/// The note the seed derives from a 64-hex sandbox id: its 32 bytes, dot-separated.
fn pod_note() -> String {
    SANDBOX_ID
        .as_bytes()
        .chunks(2)
        .map(|pair| std::str::from_utf8(pair).expect("hex is ascii"))
        .collect::<Vec<_>>()
        .join(".")
}

/// setupPodFlows, in the seed's own words.
fn pod_flow_texts() -> Vec<String> {
    let (port, ip, mac, vnid, note) = (POD_OFPORT, POD_IP, POD_MAC, POD_VNID, pod_note());
    vec![
        format!("table=20, priority=100, in_port={port}, arp, nw_src={ip}, arp_sha={mac}, actions=load:{vnid}->NXM_NX_REG0[], note:{note}, goto_table:21"),
        format!("table=20, priority=100, in_port={port}, ip, nw_src={ip}, actions=load:{vnid}->NXM_NX_REG0[], goto_table:21"),
        format!("table=40, priority=100, arp, nw_dst={ip}, actions=output:{port}"),
        format!("table=70, priority=100, ip, nw_dst={ip}, actions=load:{vnid}->NXM_NX_REG1[], load:{port}->NXM_NX_REG2[], goto_table:80"),
    ]
}

/// Pod-style table 70 flows, one per destination address.
fn bulk_flow_texts(count: usize) -> Vec<String> {
    let base = u32::from(BULK_BASE_IP);
    (0..count as u32)
        .map(|i| {
            let ip = Ipv4Addr::from(base + i);
            format!("table=70, priority=100, ip, nw_dst={ip}, actions=load:{POD_VNID}->NXM_NX_REG1[], load:{POD_OFPORT}->NXM_NX_REG2[], goto_table:80")
        })
        .collect()
}

fn parse_all(texts: &[String]) -> Vec<FlowMod> {
    texts
        .iter()
        .map(|t| text::parse_flow(t, FlowModCommand::Add).unwrap_or_else(|e| panic!("{t}: {e}")))
        .collect()
}

// ---------- measurement helpers ----------

#[derive(Debug, Clone, Copy)]
struct Latency {
    median: Duration,
    p99: Duration,
}

fn latency(mut samples: Vec<Duration>) -> Latency {
    assert!(!samples.is_empty());
    samples.sort_unstable();
    let at =
        |q: f64| samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    Latency {
        median: at(0.5),
        p99: at(0.99),
    }
}

/// CPU time ovs-vswitchd (all threads) has used.
fn vswitchd_cpu(ovs: &Ovs) -> Duration {
    process_cpu(ovs.vswitchd_pid().expect("ovs-vswitchd runs"))
}

/// Flows in `table`, counted by the switch (ovs-ofctl dump-aggregate).
fn flow_count(ovs: &Ovs, table: u8) -> usize {
    let out = ovs
        .ofctl("dump-aggregate", "br0", &[&format!("table={table}")])
        .expect("dump-aggregate");
    out.split("flow_count=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no flow_count in {out}"))
}

fn clear_flows(ovs: &Ovs) {
    ovs.ofctl("del-flows", "br0", &[]).expect("del-flows");
}

/// The switch's flows for the pod (each names its address), as ovs-ofctl prints them.
fn pod_tables(ovs: &Ovs) -> Vec<String> {
    let mut lines: Vec<String> = ovs
        .dump_flows("br0")
        .expect("dump-flows")
        .into_iter()
        .filter(|l| l.contains(&format!("={POD_IP} ")) || l.contains(&format!("={POD_IP},")))
        .collect();
    lines.sort();
    lines
}

// ---------- (1) ofnode ----------

struct OfnodeResult {
    pod: Latency,
    pod_cpu_per_flow_mod: Duration,
    pod_vswitchd_cpu: Duration,
    /// Text to committed: parse, encode and commit, as ovs-ofctl's figure is.
    bulk: Vec<Duration>,
    /// Of that, the commit alone (send, switch, reply).
    bulk_commit: Vec<Duration>,
    bulk_cpu_per_flow_mod: Duration,
    bulk_vswitchd_cpu: Duration,
    pod_flows: Vec<String>,
}

fn bench_ofnode(ovs: &Ovs, p: &Params, pod: &[FlowMod], bulk: &[String]) -> OfnodeResult {
    let mut builder = if std::env::var("OFNODE_BENCH_RUNTIME").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = builder.enable_all().build().expect("tokio runtime");
    runtime.block_on(async {
        let mut cfg = SwitchConfig::from_target(&ovs.mgmt_target("br0")).expect("target");
        cfg.frag_mode = OFPC_FRAG_NX_MATCH;
        let (switch, _events) = Switch::start(cfg);
        switch
            .wait_connected(Duration::from_secs(10))
            .await
            .expect("ofnode connects");

        // Measured inside a task, as the node controller's own code runs, not on the thread
        // that blocks on the runtime.
        let measure = tokio::spawn(pod_loop(
            switch.clone(),
            ovs.vswitchd_pid().expect("ovs-vswitchd runs"),
            pod.to_vec(),
            p.pod_warmup,
            p.pod_iters,
        ));
        let (samples, pod_cpu, pod_vswitchd_cpu) = measure.await.expect("pod task");
        let pod_flows = pod_tables(ovs);

        let (mut bulk_times, mut bulk_commit_times) = (Vec::new(), Vec::new());
        let (mut bulk_cpu, mut vs_cpu) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..p.bulk_runs {
            clear_flows(ovs);
            let (cpu, vs) = (own_cpu(), vswitchd_cpu(ovs));
            // From text, as `ovs-ofctl bundle` starts from its file: parse, encode, commit.
            let start = Instant::now();
            let mut tx = switch.transaction();
            for text in bulk {
                tx.add_text(text).expect("bulk flow parses");
            }
            let encoded = start.elapsed();
            tx.commit().await.expect("bulk transaction");
            bulk_times.push(start.elapsed());
            bulk_commit_times.push(start.elapsed() - encoded);
            bulk_cpu += own_cpu() - cpu;
            vs_cpu += vswitchd_cpu(ovs) - vs;
            assert_eq!(
                flow_count(ovs, 70),
                bulk.len(),
                "ofnode bulk landed completely"
            );
        }
        let runs = p.bulk_runs as u32;
        OfnodeResult {
            pod: latency(samples),
            pod_cpu_per_flow_mod: pod_cpu / (p.pod_iters * pod.len()) as u32,
            pod_vswitchd_cpu: pod_vswitchd_cpu / p.pod_iters as u32,
            bulk: bulk_times,
            bulk_commit: bulk_commit_times,
            bulk_cpu_per_flow_mod: bulk_cpu / runs / bulk.len() as u32,
            bulk_vswitchd_cpu: vs_cpu / runs,
            pod_flows,
        }
    })
}

/// Warm-up, then `iters` timed pod transactions one after another; returns their latencies,
/// the CPU time this process spent on them and the CPU time ovs-vswitchd spent meanwhile.
async fn pod_loop(
    switch: Switch,
    vswitchd_pid: u32,
    pod: Vec<FlowMod>,
    warmup: usize,
    iters: usize,
) -> (Vec<Duration>, Duration, Duration) {
    let commit = || async {
        let mut tx = switch.transaction();
        for flow in &pod {
            tx.add(flow.clone());
        }
        tx.commit().await.expect("pod transaction");
    };
    for _ in 0..warmup {
        commit().await;
    }
    let mut samples = Vec::with_capacity(iters);
    let (cpu, switch_cpu) = (own_cpu(), process_cpu(vswitchd_pid));
    for _ in 0..iters {
        let start = Instant::now();
        commit().await;
        samples.push(start.elapsed());
    }
    (
        samples,
        own_cpu() - cpu,
        process_cpu(vswitchd_pid) - switch_cpu,
    )
}

// ---------- (2) ovs-ofctl bundle ----------

struct OfctlResult {
    pod: Latency,
    pod_vswitchd_cpu: Duration,
    bulk: Duration,
    bulk_vswitchd_cpu: Duration,
    pod_flows: Vec<String>,
}

fn write_bundle_file(path: &Path, flows: &[String]) {
    let body: String = flows.iter().map(|f| format!("flow add {f}\n")).collect();
    std::fs::write(path, body).expect("write bundle file");
}

fn ofctl_bundle(ovs: &Ovs, file: &Path, names: bool) {
    let mut cmd = Command::new("ovs-ofctl");
    if !names {
        cmd.arg("--no-names");
    }
    // `br0` resolves to OVS_RUNDIR/br0.mgmt, as on a node.
    let out = cmd
        .env("OVS_RUNDIR", ovs.dir())
        .args(["-O", "OpenFlow13", "bundle", "br0"])
        .arg(file)
        .output()
        .expect("run ovs-ofctl");
    // Its stderr (e.g. coverage counters after a long poll interval) is shown only on failure.
    assert!(
        out.status.success(),
        "ovs-ofctl bundle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn bench_ofctl(ovs: &Ovs, p: &Params, pod: &[String], bulk: &[String], names: bool) -> OfctlResult {
    let pod_file = ovs.dir().join("pod.bundle");
    let bulk_file = ovs.dir().join("bulk.bundle");
    write_bundle_file(&pod_file, pod);
    write_bundle_file(&bulk_file, bulk);
    clear_flows(ovs);
    for _ in 0..p.ofctl_iters.min(20) {
        ofctl_bundle(ovs, &pod_file, names);
    }
    let vs = vswitchd_cpu(ovs);
    let samples = (0..p.ofctl_iters)
        .map(|_| {
            let start = Instant::now();
            ofctl_bundle(ovs, &pod_file, names);
            start.elapsed()
        })
        .collect();
    let pod_vswitchd_cpu = (vswitchd_cpu(ovs) - vs) / p.ofctl_iters.max(1) as u32;
    let pod_flows = pod_tables(ovs);
    clear_flows(ovs);
    let vs = vswitchd_cpu(ovs);
    let start = Instant::now();
    ofctl_bundle(ovs, &bulk_file, names);
    let elapsed = start.elapsed();
    let bulk_vswitchd_cpu = vswitchd_cpu(ovs) - vs;
    assert_eq!(
        flow_count(ovs, 70),
        bulk.len(),
        "ovs-ofctl bulk landed completely"
    );
    OfctlResult {
        pod: latency(samples),
        pod_vswitchd_cpu,
        bulk: elapsed,
        bulk_vswitchd_cpu,
        pod_flows,
    }
}

// ---------- (3) os-ken ----------

struct OskenResult {
    pod: Latency,
    bulk: Duration,
    bulk_vswitchd_cpu: Duration,
    pod_flows: Vec<String>,
}

fn bench_osken(ovs: &Ovs, p: &Params) -> Result<OskenResult, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/osken_bundle.py");
    let config_path = ovs.dir().join("osken-bench.json");
    let out_path = ovs.dir().join("osken-result.json");
    let log_path = ovs.dir().join("osken.log");
    let config = serde_json::json!({
        "pod": { "ofport": POD_OFPORT, "ip": POD_IP, "mac": POD_MAC, "vnid": POD_VNID,
                 "note_hex": SANDBOX_ID },
        "bulk": { "flows": p.bulk_flows, "base_ip": BULK_BASE_IP.to_string(),
                  "vnid": POD_VNID, "ofport": POD_OFPORT },
        "pod_iters": p.pod_iters,
        "pod_warmup": p.pod_warmup,
        "out": out_path,
    });
    std::fs::write(&config_path, config.to_string()).map_err(|e| e.to_string())?;
    clear_flows(ovs);
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let mut child = ovs
        .netns()
        .command("/usr/bin/python3")
        .args([
            "/usr/bin/osken-manager",
            "--ofp-listen-host",
            "127.0.0.1",
            "--ofp-tcp-listen-port",
            &OSKEN_PORT.to_string(),
            script,
        ])
        .env("OFNODE_BENCH_CONFIG", &config_path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("start osken-manager: {e}"))?;
    let controller = format!("tcp:127.0.0.1:{OSKEN_PORT}");
    let setup = ovs
        .vsctl(&["set-controller", "br0", &controller])
        .and_then(|_| {
            // Retry quickly until osken-manager listens; no inactivity probe, which a Python
            // controller busy building 100k flow objects might not answer in time.
            ovs.vsctl(&[
                "set",
                "controller",
                "br0",
                "max_backoff=1000",
                "inactivity_probe=0",
            ])
        });
    // The pod phase writes nothing to measure on the switch side; sample vswitchd CPU around
    // the whole run and attribute it to the bulk bundle after subtracting nothing (an upper bound).
    let vs = vswitchd_cpu(ovs);
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline && setup.is_ok() => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                break Err("os-ken did not finish (killed)".to_string());
            }
            Err(e) => break Err(e.to_string()),
        }
    };
    let vswitchd = vswitchd_cpu(ovs) - vs;
    let pod_flows = pod_tables(ovs);
    let bulk_count = flow_count(ovs, 70);
    let _ = ovs.vsctl(&["del-controller", "br0"]);
    setup.map_err(|e| e.to_string())?;
    status?;
    let text = std::fs::read_to_string(&out_path).map_err(|e| {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        format!("no os-ken result ({e}); log:\n{log}")
    })?;
    let result: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if let Some(error) = result.get("error") {
        return Err(format!("os-ken benchmark failed: {error}"));
    }
    let secs = |v: &serde_json::Value| Duration::from_secs_f64(v.as_f64().unwrap_or(f64::NAN));
    let samples: Vec<Duration> = result["pod_latencies_s"]
        .as_array()
        .ok_or("no pod latencies")?
        .iter()
        .map(secs)
        .collect();
    // Pod flows live in tables 20/40/70; the bulk replaced table 70's contents afterwards.
    if bulk_count != p.bulk_flows + 1 {
        return Err(format!(
            "os-ken bulk: switch holds {bulk_count} table-70 flows, expected {}",
            p.bulk_flows + 1
        ));
    }
    Ok(OskenResult {
        pod: latency(samples),
        bulk: secs(&result["bulk_s"]),
        bulk_vswitchd_cpu: vswitchd,
        pod_flows,
    })
}

// ---------- report ----------

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn ratio(peer: Duration, ours: Duration) -> String {
    format!("{:.1}x", peer.as_secs_f64() / ours.as_secs_f64())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is expected.
    let p = Params::from_env();
    eprintln!("host load average at the start: {}", load_average());
    let ovs = Ovs::start().expect("private OVS");
    ovs.add_bridge("br0").expect("br0");
    let pod_texts = pod_flow_texts();
    let bulk_texts = bulk_flow_texts(p.bulk_flows);
    let pod = parse_all(&pod_texts);

    eprintln!("benchmarking ofnode ...");
    let ofnode = bench_ofnode(&ovs, &p, &pod, &bulk_texts);
    eprintln!("benchmarking ovs-ofctl ...");
    let ofctl = bench_ofctl(&ovs, &p, &pod_texts, &bulk_texts, true);
    eprintln!("benchmarking ovs-ofctl --no-names ...");
    let ofctl_nn = bench_ofctl(&ovs, &p, &pod_texts, &bulk_texts, false);
    let osken = if p.osken {
        eprintln!("benchmarking os-ken ...");
        Some(bench_osken(&ovs, &p))
    } else {
        None
    };

    let best_bulk = *ofnode.bulk.iter().min().expect("bulk runs");
    let median_bulk = latency(ofnode.bulk.clone()).median;
    println!();
    println!(
        "OpenFlow benchmark: one private Open vSwitch ({}), userspace datapath, br0 via unix socket",
        ovs_version()
    );
    println!(
        "pod transaction = the seed's setupPodFlows (4 flow mods, one ONF bundle); bulk = {} flows in one bundle, timed from their ovs-ofctl text (parse + encode + commit) for every peer",
        p.bulk_flows
    );
    println!();
    println!(
        "{:<24} {:>14} {:>14} {:>12} {:>16} {:>10}",
        "", "pod median", "pod p99", "bulk", "vswitchd CPU", "samples"
    );
    println!(
        "{:<24} {:>14} {:>14} {:>12} {:>16} {:>10}",
        "ofnode",
        ms(ofnode.pod.median),
        ms(ofnode.pod.p99),
        secs(median_bulk),
        secs(ofnode.bulk_vswitchd_cpu),
        p.pod_iters
    );
    let peers: Vec<(&str, Latency, Duration, Duration, usize)> = {
        let mut rows = vec![
            (
                "ovs-ofctl bundle",
                ofctl.pod,
                ofctl.bulk,
                ofctl.bulk_vswitchd_cpu,
                p.ofctl_iters,
            ),
            (
                "ovs-ofctl --no-names",
                ofctl_nn.pod,
                ofctl_nn.bulk,
                ofctl_nn.bulk_vswitchd_cpu,
                p.ofctl_iters,
            ),
        ];
        if let Some(Ok(osken)) = &osken {
            rows.push((
                "os-ken",
                osken.pod,
                osken.bulk,
                osken.bulk_vswitchd_cpu,
                p.pod_iters,
            ));
        }
        rows
    };
    for (name, pod, bulk, vs, n) in &peers {
        println!(
            "{:<24} {:>14} {:>14} {:>12} {:>16} {:>10}",
            name,
            ms(pod.median),
            ms(pod.p99),
            secs(*bulk),
            secs(*vs),
            n
        );
    }
    if let Some(Err(error)) = &osken {
        println!("os-ken: FAILED: {error}");
    }
    println!();
    println!("ratios (peer time / ofnode time):");
    for (name, pod, bulk, _, _) in &peers {
        println!(
            "  {:<22} pod median {:>7}  pod p99 {:>7}  bulk {:>7}",
            name,
            ratio(pod.median, ofnode.pod.median),
            ratio(pod.p99, ofnode.pod.p99),
            ratio(*bulk, median_bulk)
        );
    }
    println!();
    println!(
        "ofnode bulk runs, from text to committed (parse + encode + commit, as ovs-ofctl's): {} (best {}); of which the commit alone: {}",
        ofnode
            .bulk
            .iter()
            .map(|d| secs(*d))
            .collect::<Vec<_>>()
            .join(", "),
        secs(best_bulk),
        ofnode
            .bulk_commit
            .iter()
            .map(|d| secs(*d))
            .collect::<Vec<_>>()
            .join(", "),
    );
    println!(
        "ofnode CPU per flow_mod: {:.2} us in pod transactions, {:.2} us in the bulk bundle (getrusage of this process)",
        ofnode.pod_cpu_per_flow_mod.as_secs_f64() * 1e6,
        ofnode.bulk_cpu_per_flow_mod.as_secs_f64() * 1e6
    );
    println!(
        "vswitchd CPU column: during the bulk bundle (os-ken: its whole run, pod phase included)"
    );
    println!(
        "vswitchd CPU per pod transaction: {:.1} us under ofnode, {:.1} us under ovs-ofctl, {:.1} us under ovs-ofctl --no-names",
        ofnode.pod_vswitchd_cpu.as_secs_f64() * 1e6,
        ofctl.pod_vswitchd_cpu.as_secs_f64() * 1e6,
        ofctl_nn.pod_vswitchd_cpu.as_secs_f64() * 1e6
    );
    let mut same = vec![
        ("ovs-ofctl", &ofctl.pod_flows),
        ("ovs-ofctl --no-names", &ofctl_nn.pod_flows),
    ];
    if let Some(Ok(osken)) = &osken {
        same.push(("os-ken", &osken.pod_flows));
    }
    for (name, flows) in same {
        let verdict = if *flows == ofnode.pod_flows {
            "identical"
        } else {
            "DIFFERENT"
        };
        println!("pod flows installed by {name} vs ofnode: {verdict}");
    }
    println!(
        "host load average (1/5/15 min) at the end: {}",
        load_average()
    );
    println!(
        "targets: pod median <= 0.200 ms: {}, pod p99 <= 0.500 ms: {}, bulk <= 1.1 s: {}",
        verdict(ofnode.pod.median <= Duration::from_micros(200)),
        verdict(ofnode.pod.p99 <= Duration::from_micros(500)),
        verdict(median_bulk <= Duration::from_millis(1100))
    );
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

/// Other work on the machine inflates every number above; say how busy it was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn ovs_version() -> String {
    Command::new("ovs-vswitchd")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "ovs-vswitchd".into())
}
