//! CLI pod add benchmark (`cargo bench --bench cli`), issue 15, self-contained.
//!
//! 1. `ofnode pod add` (a process per pod, as an operator or a script runs it) against an
//!    `ofnode run` daemon on a private OVS, interleaved with the seed's way (`ovs-vsctl
//!    add-port` + `ovs-vsctl get … ofport` + `ovs-ofctl bundle` of the 4 flows) on a second
//!    private OVS, each going first every other round: median, p90, ratio. The pod adds that
//!    come right after the same switch's previous one are also shown apart. The same for
//!    `Node::pod_add` called in this process, the API path benches/sdn.rs measures.
//! 2. Where a CLI pod add's time goes, each part measured interleaved with the others against
//!    one daemon: process start (`ofnode --version`: exec, dynamic loading, clap), a client
//!    command the daemon answers at once (`ofnode status`), that request sent by this process
//!    (no process, no runtime), a pod add sent by this process, the daemon's own time in a pod
//!    add (`ofnode_operation_duration_seconds`: the bundle, of which
//!    `ofnode_transaction_duration_seconds`, the journal's fsync and the OVSDB port insert),
//!    and the CLI's own code (`ofnode::cli`) run by this binary with a multi-thread runtime and
//!    with the current-thread one `ofnode`'s main uses for client commands.
//! 3. (gone: a prototype of the pod add with its flows before its port, which the daemon now
//!    is; docs/cli-profile.md keeps its numbers.)
//! 4. What bounds a CLI pod add from below here (a trivial process's start, `ovs-vsctl
//!    add-port` alone), and trace latency: `GET /v1/trace` and `ofnode trace`, median and p90.
//!
//! `CLI_BENCH_PARTS=1,4` runs only those parts (all by default); `CLI_BENCH_OFNODE=PATH` runs
//! part 1's `ofnode` (daemon and CLI) from another build, to compare two versions with the
//! same command on the same machine (docs/cli-profile.md).

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use ofnode::sdn::PodAdd;
use ofnode_harness::{Daemon, OperationTotals, Ovs, ONE_NODE_SETUP};

const PODS: usize = 100;
const BINARY: &str = env!("CARGO_BIN_EXE_ofnode");
/// argv[1] that makes this binary run `ofnode::cli` as the `ofnode` CLI would.
const CLIENT_MODE: &str = "__ofnode-cli";

struct PodArgs {
    pod: String,
    veth: String,
    ip: Ipv4Addr,
    mac: String,
    sandbox: String,
}

fn pod(prefix: &str, i: usize) -> PodArgs {
    PodArgs {
        pod: format!("default/{prefix}-pod-{i}"),
        veth: format!("{prefix}{i}"),
        // 10.128.0.10 up, inside ONE_NODE_SETUP's 10.128.0.0/23.
        ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 10)) + i as u32),
        mac: format!("0a:58:00:00:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff),
        sandbox: format!("{i:064x}"),
    }
}

fn timed(f: impl FnOnce()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

/// Runs `program ARGS…` and checks it succeeded.
fn run(program: &Path, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .output()
        .expect("the program runs");
    assert!(
        out.status.success(),
        "{} {}: {}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pod_add_args(api: &Path, p: &PodArgs) -> Vec<String> {
    [
        "pod",
        "add",
        "--pod",
        &p.pod,
        "--veth",
        &p.veth,
        "--ip",
        &p.ip.to_string(),
        "--mac",
        &p.mac,
        "--sandbox",
        &p.sandbox,
        "--vnid",
        "0",
        "--api",
        &api.display().to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// The `ofnode` binary part 1 runs: this build's, or `CLI_BENCH_OFNODE`.
fn ofnode_binary() -> PathBuf {
    std::env::var_os("CLI_BENCH_OFNODE").map_or_else(|| PathBuf::from(BINARY), PathBuf::from)
}

/// This build's `ofnode`.
fn this_ofnode() -> Cli<'static> {
    Cli::Ofnode(Path::new(BINARY))
}

/// Whether part `n` runs (`CLI_BENCH_PARTS`, all by default).
fn part(n: u32) -> bool {
    std::env::var("CLI_BENCH_PARTS").map_or(true, |parts| {
        parts.split(',').any(|p| p.trim() == n.to_string())
    })
}

/// A client command, by an `ofnode` binary or by this one's CLI mode with a runtime flavor.
#[derive(Clone, Copy)]
enum Cli<'a> {
    Ofnode(&'a Path),
    ThisBinary(&'static str),
}

impl Cli<'_> {
    fn run(self, args: &[String]) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match self {
            Cli::Ofnode(binary) => run(binary, &args),
            Cli::ThisBinary(flavor) => {
                let this = std::env::current_exe().expect("this binary");
                let mut argv = vec![CLIENT_MODE, flavor];
                argv.extend(args);
                run(&this, &argv);
            }
        }
    }
}

/// This binary as the CLI: `ofnode::cli` parses the arguments and runs the command, on a
/// multi-thread runtime or a current-thread one (as `ofnode`'s main for client commands).
fn client_mode(flavor: &str, args: &[String]) -> std::process::ExitCode {
    let cli = ofnode::cli::Cli::parse_from(
        std::iter::once("ofnode".to_string()).chain(args.iter().cloned()),
    );
    let runtime = match flavor {
        "multi-thread" => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .expect("runtime");
    match runtime.block_on(ofnode::cli::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ofnode: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The seed's SetUpPod: three execs.
fn seed_pod_add(ovs: &Ovs, p: &PodArgs, flows_file: &Path) {
    ovs.vsctl(&["--may-exist", "add-port", "br0", &p.veth])
        .expect("ovs-vsctl add-port");
    let ofport = ovs
        .vsctl(&["get", "Interface", &p.veth, "ofport"])
        .expect("ovs-vsctl get");
    let ofport = ofport.trim();
    let note: Vec<String> = p
        .sandbox
        .as_bytes()
        .chunks(2)
        .map(|pair| String::from_utf8_lossy(pair).into_owned())
        .collect();
    let (ip, mac, note) = (p.ip, &p.mac, note.join("."));
    let text = format!(
        "flow add table=20, priority=100, in_port={ofport}, arp, nw_src={ip}, arp_sha={mac}, actions=load:0->NXM_NX_REG0[], note:{note}, goto_table:21\n\
         flow add table=20, priority=100, in_port={ofport}, ip, nw_src={ip}, actions=load:0->NXM_NX_REG0[], goto_table:21\n\
         flow add table=40, priority=100, arp, nw_dst={ip}, actions=output:{ofport}\n\
         flow add table=70, priority=100, ip, nw_dst={ip}, actions=load:0->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:80\n"
    );
    std::fs::write(flows_file, text).expect("write flows");
    ovs.ofctl("bundle", "br0", &[&flows_file.display().to_string()])
        .expect("ovs-ofctl bundle");
}

/// One HTTP/1.1 request on a fresh connection to the daemon's socket; the response body.
fn http(api: &Path, method: &str, path: &str, body: Option<&str>) -> String {
    let mut stream = UnixStream::connect(api).expect("connect to the daemon");
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: ofnode\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("receive");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

fn pod_json(p: &PodArgs) -> String {
    format!(
        r#"{{"pod":"{}","veth":"{}","ip":"{}","mac":"{}","sandbox":"{}","vnid":0}}"#,
        p.pod, p.veth, p.ip, p.mac, p.sandbox
    )
}

/// The daemon's running totals (`/metrics`).
fn daemon_totals(api: &Path) -> OperationTotals {
    OperationTotals::from_metrics(&http(api, "GET", "/metrics", None)).expect("the daemon's totals")
}

/// The daemon's time in the one operation `f` made it do (operation, of which transaction);
/// None when another operation (a drift check, a port renumbering) finished meanwhile.
fn daemon_time(api: &Path, f: impl FnOnce()) -> Option<(Duration, Duration)> {
    let before = daemon_totals(api);
    f();
    daemon_totals(api).one_operation_since(&before)
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(samples: &[Duration]) -> String {
    format!(
        "median {:.2} ms p90 {:.2} ms",
        ms(percentile(samples, 0.5)),
        ms(percentile(samples, 0.9))
    )
}

fn ratio(slow: &[Duration], fast: &[Duration]) -> f64 {
    percentile(slow, 0.5).as_secs_f64() / percentile(fast, 0.5).as_secs_f64()
}

/// Pod adds interleaved with the seed's way as the issue measures them: `PODS` rounds, each
/// going first every other round, the seed's way on a fresh private OVS of its own.
struct Interleaved {
    ours: Vec<Duration>,
    /// The subset of `ours` that came right after our previous pod add on the same switch.
    back_to_back: Vec<Duration>,
    seed: Vec<Duration>,
}

fn against_seed(mut ours: impl FnMut(usize) -> Duration) -> Interleaved {
    let seed_ovs = Ovs::start().expect("OVS for the seed's way");
    seed_ovs.add_bridge("br0").expect("br0");
    seed_ovs
        .netns()
        .add_veth_pairs("sv", 0..PODS)
        .expect("veths");
    let flows_file = seed_ovs.dir().join("seed.flows");
    let mut result = Interleaved {
        ours: Vec::new(),
        back_to_back: Vec::new(),
        seed: Vec::new(),
    };
    for i in 0..PODS {
        let seed = || timed(|| seed_pod_add(&seed_ovs, &pod("sv", i), &flows_file));
        if i % 2 == 0 {
            let t = ours(i);
            if i > 0 {
                result.back_to_back.push(t);
            }
            result.ours.push(t);
            result.seed.push(seed());
        } else {
            result.seed.push(seed());
            result.ours.push(ours(i));
        }
    }
    result
}

impl Interleaved {
    fn print(&self, what: &str) {
        println!(
            "cli   {what}: {}; seed way {}; ratio {:.1}x (target 5x); right after its own previous pod add: {}",
            summary(&self.ours),
            summary(&self.seed),
            ratio(&self.seed, &self.ours),
            summary(&self.back_to_back),
        );
    }
}

/// A node in this process as benches/sdn.rs runs it (br0.mgmt, no host network), set up as
/// the daemons are.
async fn in_process_node(ovs: &Ovs, state: &Path) -> ofnode::sdn::Node {
    let mut cfg = ofnode::sdn::NodeConfig::new(ovs.db_target(), ovs.mgmt_target("br0"), state);
    cfg.datapath_type = Some("netdev".into());
    cfg.vswitchd_ctl =
        ofnode::unixctl::VswitchdCtl::new(Some(ovs.vswitchd_ctl().display().to_string()), "");
    cfg.netns = Some(ovs.netns().path().into());
    cfg.manage_host_network = false;
    cfg.dns.nameservers = Some(Vec::new());
    cfg.connect_timeout = Duration::from_secs(30);
    let node = ofnode::sdn::Node::start(cfg).await.expect("node");
    let setup = ofnode::sdn::SetupRequest {
        cluster_network: "10.128.0.0/14".parse().expect("cidr"),
        service_network: "172.30.0.0/16".parse().expect("cidr"),
        local_subnet: "10.128.0.0/23".parse().expect("cidr"),
        gateway: "10.128.0.1".parse().expect("ip"),
        mode: ofnode::sdn::Mode::Subnet,
    };
    node.setup(&setup).await.expect("setup");
    node
}

fn pod_request(p: &PodArgs) -> PodAdd {
    serde_json::from_str(&pod_json(p)).expect("a valid pod")
}

/// A daemon of `binary` on a fresh private OVS, set up, with `count` veths `<prefix><i>`.
fn fresh_daemon(binary: &Path, prefix: &str, count: usize) -> (Daemon, Ovs) {
    let ovs = Ovs::start().expect("OVS for the daemon");
    let daemon = Daemon::start(&ovs, binary, &[]).expect("ofnode run");
    daemon.cli(ONE_NODE_SETUP).expect("ofnode setup");
    ovs.netns().add_veth_pairs(prefix, 0..count).expect("veths");
    (daemon, ovs)
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CLIENT_MODE) {
        return client_mode(args.get(2).map_or("", String::as_str), &args[3..]);
    }
    ofnode_harness::init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    if part(1) {
        // The CLI, and the node in this process as benches/sdn.rs measures it.
        let binary = ofnode_binary();
        println!(
            "cli pod add ({PODS} each, interleaved, fresh private OVS instances; {}):",
            binary.display()
        );
        {
            let (daemon, _ovs) = fresh_daemon(&binary, "cv", PODS);
            let api = daemon.api.clone();
            let cli = Cli::Ofnode(&binary);
            let (mut operation, mut bundle) = (Vec::new(), Vec::new());
            against_seed(|i| {
                let mut wall = Duration::ZERO;
                let inside = daemon_time(&api, || {
                    wall = timed(|| cli.run(&pod_add_args(&api, &pod("cv", i))));
                });
                if let Some((op, tx)) = inside {
                    operation.push(op);
                    bundle.push(tx);
                }
                wall
            })
            .print("`ofnode pod add`");
            println!(
                "cli     of which the daemon's operation {}, its OpenFlow bundle {} ({} rounds with no other operation meanwhile)",
                summary(&operation),
                summary(&bundle),
                operation.len()
            );
        }
        let ovs = Ovs::start().expect("OVS for the node");
        let state = tempfile::tempdir().expect("tempdir");
        let node = runtime.block_on(in_process_node(&ovs, state.path()));
        ovs.netns().add_veth_pairs("nv", 0..PODS).expect("veths");
        against_seed(|i| {
            let req = pod_request(&pod("nv", i));
            runtime.block_on(async {
                let started = Instant::now();
                node.pod_add(&req).await.expect("pod add");
                started.elapsed()
            })
        })
        .print("Node::pod_add in this process (the API path benches/sdn.rs measures)");
        runtime.block_on(node.shutdown());
    }
    if part(2) {
        // Where the time goes.
        let (daemon, _ovs) = fresh_daemon(Path::new(BINARY), "cv", 4 * PODS);
        breakdown(&daemon.api);
    }
    if part(4) {
        // What bounds a CLI pod add from below, and trace latency.
        lower_bounds();
        let (daemon, _ovs) = fresh_daemon(Path::new(BINARY), "tv", 2);
        trace_latency(&daemon.api);
    }
    drop(runtime);
    std::process::ExitCode::SUCCESS
}

/// Part 4a: what no CLI pod add can beat on this machine: starting a trivial process, and
/// the one OVSDB step the seed's way and ofnode share (`ovs-vsctl add-port` alone, which waits
/// for ovs-vswitchd to take the port, as the seed's way does).
fn lower_bounds() {
    let ovs = Ovs::start().expect("OVS for ovs-vsctl add-port");
    ovs.add_bridge("br0").expect("br0");
    let (mut trivial, mut add_port) = (Vec::new(), Vec::new());
    ovs.netns().add_veth_pairs("lb", 0..PODS).expect("veths");
    for i in 0..PODS {
        trivial.push(timed(|| run(Path::new("/bin/true"), &[])));
        let port = format!("lb{i}");
        add_port.push(timed(|| {
            ovs.vsctl(&["add-port", "br0", &port]).expect("add-port");
        }));
    }
    println!("cli lower bounds ({PODS} rounds, interleaved):");
    println!("cli   process start of /bin/true: {}", summary(&trivial));
    println!("cli   ovs-vsctl add-port alone: {}", summary(&add_port));
}

const TRACES: usize = 50;

/// Part 4b: `GET /v1/trace` (the daemon builds the packet, asks ovs-vswitchd's
/// `ofproto/trace` over its control socket, attributes each flow) and `ofnode trace`,
/// interleaved, for a pod to another pod of the node.
fn trace_latency(api: &Path) {
    let (a, b) = (pod("tv", 0), pod("tv", 1));
    for p in [&a, &b] {
        this_ofnode().run(&pod_add_args(api, p));
    }
    let query = format!("/v1/trace?from={}&to={}&dport=80", a.ip, b.ip);
    let cli_args: Vec<String> = ["trace", "--from", &a.pod, "--to", &b.ip.to_string()]
        .into_iter()
        .map(String::from)
        .chain(["--dport".into(), "80".into(), "--api".into()])
        .chain([api.display().to_string()])
        .collect();
    let answer = http(api, "GET", &query, None);
    assert!(answer.contains("\"verdict\""), "{answer}");
    let (mut through_api, mut through_cli) = (Vec::new(), Vec::new());
    for _ in 0..TRACES {
        through_api.push(timed(|| {
            http(api, "GET", &query, None);
        }));
        through_cli.push(timed(|| this_ofnode().run(&cli_args)));
    }
    println!("cli trace latency ({TRACES} each, interleaved, one daemon, pod to local pod):");
    println!("cli   GET /v1/trace: {}", summary(&through_api));
    println!("cli   ofnode trace: {}", summary(&through_cli));
}

/// Part 2: the pieces of a CLI pod add, interleaved round by round against one daemon.
fn breakdown(api: &Path) {
    let status_args = [
        "status".to_string(),
        "--api".into(),
        api.display().to_string(),
    ];
    let mut parts: Vec<(&str, Vec<Duration>)> = [
        "process start (ofnode --version)",
        "ofnode status (a command the daemon answers at once)",
        "GET /v1/status sent by this process (no process, no runtime)",
        "ofnode pod add",
        "  of which the daemon's operation (bundle, journal fsync, OVSDB port insert)",
        "  of which its OpenFlow bundle",
        "POST /v1/pods sent by this process",
        "  of which the daemon's operation",
        "ofnode::cli pod add, multi-thread runtime",
        "ofnode::cli pod add, current-thread runtime (as ofnode's main)",
        "ofnode::cli status, multi-thread runtime",
        "ofnode::cli status, current-thread runtime (as ofnode's main)",
    ]
    .into_iter()
    .map(|what| (what, Vec::new()))
    .collect();
    let mut next = 0;
    let mut take = || {
        next += 1;
        pod("cv", next - 1)
    };
    let (multi, current) = (
        Cli::ThisBinary("multi-thread"),
        Cli::ThisBinary("current-thread"),
    );
    for _ in 0..PODS {
        parts[0]
            .1
            .push(timed(|| this_ofnode().run(&["--version".to_string()])));
        parts[1].1.push(timed(|| this_ofnode().run(&status_args)));
        parts[2].1.push(timed(|| {
            http(api, "GET", "/v1/status", None);
        }));
        let p = take();
        let mut wall = Duration::ZERO;
        let daemon = daemon_time(api, || {
            wall = timed(|| this_ofnode().run(&pod_add_args(api, &p)));
        });
        parts[3].1.push(wall);
        if let Some((operation, bundle)) = daemon {
            parts[4].1.push(operation);
            parts[5].1.push(bundle);
        }
        let body = pod_json(&take());
        let daemon = daemon_time(api, || {
            wall = timed(|| {
                http(api, "POST", "/v1/pods", Some(&body));
            });
        });
        parts[6].1.push(wall);
        if let Some((operation, _)) = daemon {
            parts[7].1.push(operation);
        }
        parts[8]
            .1
            .push(timed(|| multi.run(&pod_add_args(api, &take()))));
        parts[9]
            .1
            .push(timed(|| current.run(&pod_add_args(api, &take()))));
        parts[10].1.push(timed(|| multi.run(&status_args)));
        parts[11].1.push(timed(|| current.run(&status_args)));
    }
    println!("cli where a CLI pod add's time goes ({PODS} rounds, interleaved, one daemon, back to back):");
    for (what, samples) in &parts {
        let count = match samples.len() {
            PODS => String::new(),
            n => format!(" ({n} rounds with no other operation meanwhile)"),
        };
        println!("cli   {what}: {}{count}", summary(samples));
    }
}
