//! `make demo`: a three-node cluster on this machine, inside network namespaces, programmed
//! through the ofnode CLI exactly as an operator would; then real packets between pods, the flow
//! counts, `ofnode status`, and a cleanup that leaves nothing behind.
//!
//! Every result is compared with what it should be and printed with `ok` or `UNEXPECTED` in
//! front; the demo exits 1 (after cleaning up) when any result was unexpected or anything it
//! made was left behind, and 0 otherwise.
//!
//! Needs root, Open vSwitch, iproute2, ethtool and ping (`make deps`). The ofnode binary is taken
//! from next to this example (`cargo build --release --bins --examples`), or from `OFNODE_BIN`.
//! `OFNODE_E2E_CONTROL=seed` runs it with the seed's flows instead of ofnode.
//!
//! Then a second cluster, in the NetworkPolicy mode, follows a real kube-apiserver: nothing is
//! typed on any node; `kubectl apply` of a default-deny and an allow, pings across nodes blocked
//! and reached, and a `kubectl label` that moves a pod out of the allow and back in.

use std::error::Error;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ofnode_harness::cluster::{
    tcp_transfer, Cluster, ClusterOptions, Control, Endpoint, Inventory, Mode, Node, Pod,
};

const NODES: usize = 3;
const TRANSFER_BYTES: u64 = 8 * 1024 * 1024;
const PINGS: u32 = 3;
/// The service the demo adds on every node.
const SERVICE_IP: &str = "172.30.0.10";

fn main() -> ExitCode {
    match run() {
        Ok(0) => {
            println!("\nall results as expected, nothing left behind");
            ExitCode::SUCCESS
        }
        Ok(unexpected) => {
            println!("\n{unexpected} UNEXPECTED result(s): see the lines marked UNEXPECTED above");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("demo failed: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Prints each result beside its verdict and counts the unexpected ones.
#[derive(Default)]
struct Report {
    unexpected: usize,
}

impl Report {
    fn check(&mut self, as_expected: bool, line: &str) {
        if !as_expected {
            self.unexpected += 1;
        }
        let verdict = if as_expected { "ok" } else { "UNEXPECTED" };
        println!("  {verdict:<10} {line}");
    }
}

/// What a ping should find.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Every echo request answered.
    Reach,
    /// No echo request answered.
    Blocked,
}

/// Builds the cluster, runs every step, cleans up; returns the number of unexpected results.
fn run() -> Result<usize, Box<dyn Error>> {
    let control = Control::from_env(ofnode_binary()?);
    println!("Each result below starts with `ok` (as expected) or `UNEXPECTED`.");
    heading(&format!(
        "building a {NODES}-node cluster ({})",
        match &control {
            Control::Ofnode(path) => format!("ofnode daemons, {}", path.display()),
            Control::SeedFlows => "the seed's flows, no ofnode".to_string(),
        }
    ));
    let started = Instant::now();
    // A failure here has already removed what was built (the harness's guards).
    let cluster = Cluster::start(ClusterOptions {
        nodes: NODES,
        mode: Mode::Multitenant,
        control,
        echo: true,
    })?;
    let mut made = Inventory::of_cluster(&cluster);
    let mut report = Report::default();
    if let Err(err) = show(&cluster, &mut made, &mut report, started) {
        report.check(false, &format!("the demo stopped early: {err}"));
        eprintln!("{}", cluster.diagnostics());
    }

    heading("cleaning up (pods, then each node's ofnode, ovs-vswitchd and ovsdb-server, then the underlay)");
    drop(cluster);
    // Waits for the processes to be gone, not just signalled (ovs-vswitchd and ovsdb-server
    // exit a moment after their SIGTERM).
    let left = made.left_behind_after(std::time::Duration::from_secs(15));
    report.check(
        left.is_empty(),
        &format!(
            "{} namespaces removed and {} processes stopped; expected: nothing left behind",
            made.namespaces().len(),
            made.processes().len()
        ),
    );
    for thing in left {
        report.check(false, &format!("left behind: {thing}"));
    }
    if let Control::Ofnode(binary) = control_again()? {
        following_kubernetes(binary, &mut report)?;
    }
    Ok(report.unexpected)
}

/// The control of the first part, again (it was moved into the cluster).
fn control_again() -> Result<Control, Box<dyn Error>> {
    Ok(Control::from_env(ofnode_binary()?))
}

/// The second part: three nodes in the NetworkPolicy mode that follow a kube-apiserver.
fn following_kubernetes(binary: PathBuf, report: &mut Report) -> Result<(), Box<dyn Error>> {
    heading("a 3-node cluster in networkpolicy mode following a real kube-apiserver (https://192.0.2.1:6443)");
    println!("  each node's config is only [kubernetes]: its subnet, the other nodes, pods and policies come from the API");
    let started = Instant::now();
    let mut cluster = Cluster::start_following_kube(ClusterOptions {
        nodes: NODES,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(binary),
        echo: false,
    })?;
    let mut made = Inventory::of_cluster(&cluster);
    if let Err(err) = kube_steps(&mut cluster, &mut made, report, started) {
        report.check(false, &format!("the Kubernetes part stopped early: {err}"));
        eprintln!("{}", cluster.diagnostics());
    }
    heading("cleaning up (pods, nodes, the API server and its etcd, the underlay)");
    drop(cluster);
    let left = made.left_behind_after(std::time::Duration::from_secs(15));
    report.check(
        left.is_empty(),
        &format!(
            "{} namespaces removed and {} processes stopped; expected: nothing left behind",
            made.namespaces().len(),
            made.processes().len()
        ),
    );
    for thing in left {
        report.check(false, &format!("left behind: {thing}"));
    }
    Ok(())
}

fn kube_steps(
    cluster: &mut Cluster,
    made: &mut Inventory,
    report: &mut Report,
    started: Instant,
) -> Result<(), Box<dyn Error>> {
    use ofnode_harness::kube::PodObject;
    heading("$ kubectl apply: namespace shop (VNID 21 in its NetNamespace) and other (22)");
    cluster.create_kube_namespace("shop", 21, &[])?;
    cluster.create_kube_namespace("other", 22, &[])?;
    heading("pods, run as a kubelet would (Pod object, ofnode-cni ADD, status IP)");
    let web = cluster.start_kube_pod(0, PodObject::new("shop", "web", "").label("app", "web"))?;
    let db = cluster.start_kube_pod(1, PodObject::new("shop", "db", "").label("app", "db"))?;
    let client = cluster.start_kube_pod(
        2,
        PodObject::new("other", "client", "").label("app", "client"),
    )?;
    for pod in [&web, &db, &client] {
        made.add_endpoint(pod);
        println!(
            "  pod {}/{:<7} node {} ip {}",
            pod.pod.namespace, pod.pod.name, pod.pod.node, pod.pod.ip
        );
    }
    cluster.wait_kube_synced(std::time::Duration::from_secs(30))?;
    println!("cluster ready in {:.1} s", started.elapsed().as_secs_f64());
    let kube_pings = |report: &mut Report,
                      cases: &[(&str, &ofnode_harness::cluster::KubePod, Ipv4Addr, Expect)]|
     -> Result<(), Box<dyn Error>> {
        for (name, from, to, expect) in cases {
            let stats = from.ping(*to, PINGS)?;
            let (got, as_expected) = match expect {
                Expect::Reach => ("reached", stats.received == stats.transmitted),
                Expect::Blocked => ("blocked", stats.received == 0),
            };
            report.check(
                as_expected,
                &format!(
                    "{name:<22} {}/{} replies, expected {got}",
                    stats.received, stats.transmitted
                ),
            );
        }
        Ok(())
    };
    use Expect::{Blocked, Reach};
    heading("no policy: every pod reaches every pod");
    kube_pings(
        report,
        &[
            ("web -> db (node 0->1)", &web, db.pod.ip, Reach),
            ("client -> db (node 2->1)", &client, db.pod.ip, Reach),
        ],
    )?;
    let deny = serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": "shop"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}});
    heading("$ kubectl apply -f default-deny.yaml   (shop: no ingress)");
    cluster.kube_apply("NetworkPolicy", &deny)?;
    kube_pings(
        report,
        &[
            ("web -> db", &web, db.pod.ip, Blocked),
            ("client -> db", &client, db.pod.ip, Blocked),
        ],
    )?;
    let allow = serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "web-to-db", "namespace": "shop"},
        "spec": {"podSelector": {"matchLabels": {"app": "db"}},
                 "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]}});
    heading("$ kubectl apply -f web-to-db.yaml   (shop: app=db takes ingress from app=web)");
    cluster.kube_apply("NetworkPolicy", &allow)?;
    kube_pings(
        report,
        &[
            ("web -> db", &web, db.pod.ip, Reach),
            ("client -> db", &client, db.pod.ip, Blocked),
        ],
    )?;
    heading("$ kubectl label pod web -n shop app=frontend --overwrite   (web leaves the allow)");
    cluster.kube_change(
        "Pod",
        &[
            "label",
            "pod",
            "web",
            "-n",
            "shop",
            "app=frontend",
            "--overwrite",
        ],
    )?;
    kube_pings(report, &[("web -> db", &web, db.pod.ip, Blocked)])?;
    heading("$ kubectl label pod web -n shop app=web --overwrite   (back in)");
    cluster.kube_change(
        "Pod",
        &[
            "label",
            "pod",
            "web",
            "-n",
            "shop",
            "app=web",
            "--overwrite",
        ],
    )?;
    kube_pings(report, &[("web -> db", &web, db.pod.ip, Reach)])?;
    audit_steps(cluster, report, (&web, &db, &client))?;
    heading("each node's `ofnode status` (kubernetes) and `ofnode netpol list`");
    for node in cluster.nodes() {
        let status = status_json(node)?;
        let kube = &status["kubernetes"];
        report.check(
            kube["connected"] == true && kube["synced"] == true && kube["bad_objects"] == serde_json::json!([]),
            &format!(
                "node {}: connected {}, synced {}, {} bad objects, {} policies; expected connected, synced, none bad",
                node.index, kube["connected"], kube["synced"],
                kube["bad_objects"].as_array().map_or(0, Vec::len), status["netpols"]
            ),
        );
        print!("{}", node.cli(&["netpol", "list"])?);
    }
    println!("$ ofnode status   (node 1, its kubernetes part)");
    let text = cluster.node(1).cli(&["status"])?;
    for line in text
        .lines()
        .skip_while(|line| !line.starts_with("kubernetes:"))
        .take_while(|line| line.starts_with("kubernetes:") || line.starts_with("  "))
    {
        println!("{line}");
    }
    let refused = cluster.node(0).cli(&[
        "netpol",
        "del",
        "--namespace",
        "shop",
        "--name",
        "web-to-db",
    ]);
    report.check(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("follows the Kubernetes API server")),
        "`ofnode netpol del` on a node is refused: the truth lives in the API server",
    );
    Ok(())
}

/// Issue 30: node 1 (db's) writes the policy audit log; `kubectl annotate` turns the audit on
/// for shop; a denied and an allowed ping are logged with the rule that decided; `netpol
/// explain` and `netpol list --stats` say the same from the node's state and the switch.
fn audit_steps(
    cluster: &mut Cluster,
    report: &mut Report,
    (web, db, client): (
        &ofnode_harness::cluster::KubePod,
        &ofnode_harness::cluster::KubePod,
        &ofnode_harness::cluster::KubePod,
    ),
) -> Result<(), Box<dyn Error>> {
    let log = cluster.node(1).ovs().dir().join("policy-audit.log");
    heading("node 1 restarted with `audit_log` and `audit_log_format = \"text\"` in its config");
    cluster.restart_kube_node_with(
        1,
        &format!(
            "audit_log = \"{}\"\naudit_log_format = \"text\"",
            log.display()
        ),
    )?;
    heading("$ kubectl annotate namespace shop ofnode.io/audit=allow,deny");
    cluster.kube_change(
        "Namespace",
        &[
            "annotate",
            "namespace",
            "shop",
            "ofnode.io/audit=allow,deny",
            "--overwrite",
        ],
    )?;
    cluster.wait_kube_synced(std::time::Duration::from_secs(30))?;
    let denied = client.ping(db.pod.ip, PINGS)?;
    let allowed = web.ping(db.pod.ip, PINGS)?;
    report.check(
        denied.received == 0 && allowed.received == allowed.transmitted,
        &format!(
            "with the audit on: client -> db {}/{} replies, web -> db {}/{}; expected the same verdicts as without it",
            denied.received, denied.transmitted, allowed.received, allowed.transmitted
        ),
    );
    let wants = [
        (client.pod.ip, "default-deny deny"),
        (web.pod.ip, "shop/web-to-db ingress[0] allow"),
    ];
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let found = wants.iter().all(|(src, rule)| {
            text.lines()
                .any(|l| l.contains(&format!(" {src} ")) && l.contains(rule))
        });
        if found || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    println!("$ tail {}   (node 1's audit log)", log.display());
    for line in lines.lines() {
        println!("  {line}");
    }
    for (src, rule) in wants {
        report.check(
            lines
                .lines()
                .any(|l| l.contains(&format!(" {src} ")) && l.contains(rule)),
            &format!("the audit log has the ping from {src} by `{rule}`"),
        );
    }
    let from = format!("{}/{}", client.pod.namespace, client.pod.name);
    let to = format!("{}/{}", db.pod.namespace, db.pod.name);
    let explain = [
        "netpol", "explain", "--from", &from, "--to", &to, "--port", "80/tcp",
    ];
    println!("$ ofnode {}   (node 1)", explain.join(" "));
    print!("{}", cluster.node(1).cli(&explain)?);
    println!("$ ofnode netpol list --stats   (node 1)");
    print!("{}", cluster.node(1).cli(&["netpol", "list", "--stats"])?);
    Ok(())
}

/// The pods, the pings, the TCP transfer, the flows and the status; pods are removed on return.
fn show(
    cluster: &Cluster,
    made: &mut Inventory,
    report: &mut Report,
    started: Instant,
) -> Result<(), Box<dyn Error>> {
    heading("adding pods, named NAMESPACE/NAME (tenant = VNID, one per namespace; VNID 0 is the global tenant)");
    let web = cluster.add_named_pod(0, ("shop", "web"), 10, &[])?;
    let db = cluster.add_named_pod(0, ("billing", "db"), 11, &[])?;
    let api = cluster.add_named_pod(1, ("shop", "api"), 10, &[])?;
    let admin = cluster.add_named_pod(2, ("default", "admin"), 0, &[])?;
    let pods = [("web", &web), ("db", &db), ("api", &api), ("admin", &admin)];
    for (_, pod) in pods {
        made.add_endpoint(pod);
    }
    if cluster.node(0).daemon().is_some() {
        heading(&format!(
            "a service ({SERVICE_IP}, tenant 10, tcp/80) on every node"
        ));
        for node in cluster.nodes() {
            node.cli(&[
                "service", "add", "--ip", SERVICE_IP, "--vnid", "10", "--port", "tcp/80",
            ])?;
        }
    }
    println!("cluster ready in {:.1} s", started.elapsed().as_secs_f64());

    heading("the cluster");
    print!("{}", cluster.describe());
    for (_, pod) in pods {
        println!(
            "  pod {:<13} node {} ip {:<13} mac {} vnid {:<2} br0 port {} ({})",
            pod.key(),
            pod.node,
            pod.ip,
            pod.mac,
            pod.vnid,
            pod.ofport,
            pod.host_veth
        );
    }

    pings(cluster, report, &web, &db, &api, &admin)?;
    transfer(report, &web, &api)?;
    flows(cluster, report, &pods)?;
    status(cluster, report, &pods)?;
    Ok(())
}

fn pings(
    cluster: &Cluster,
    report: &mut Report,
    web: &Pod,
    db: &Pod,
    api: &Pod,
    admin: &Pod,
) -> Result<(), Box<dyn Error>> {
    use Expect::{Blocked, Reach};
    heading(&format!(
        "pings ({PINGS} echo requests each; `reached` = all answered, `blocked` = none)"
    ));
    let gateway0 = cluster.node(0).gateway;
    let pings: [(&str, &Pod, Ipv4Addr, Expect, &str); 6] = [
        ("web -> db", web, db.ip, Blocked, "same node, other tenant"),
        (
            "web -> api",
            web,
            api.ip,
            Reach,
            "node 0 -> node 1, same tenant",
        ),
        (
            "api -> db",
            api,
            db.ip,
            Blocked,
            "node 1 -> node 0, other tenant",
        ),
        (
            "admin -> web",
            admin,
            web.ip,
            Reach,
            "node 2 -> node 0, VNID 0 reaches all",
        ),
        (
            "admin -> db",
            admin,
            db.ip,
            Reach,
            "node 2 -> node 0, VNID 0 reaches all",
        ),
        ("web -> gateway", web, gateway0, Reach, "node 0's tun0"),
    ];
    for (name, from, to, expect, why) in pings {
        let stats = from.ping(to, PINGS)?;
        let (got, as_expected) = match expect {
            Reach => ("reached", stats.received == stats.transmitted),
            Blocked => ("blocked", stats.received == 0),
        };
        report.check(
            as_expected,
            &format!(
                "{name:<15} {:<12} {}/{} replies, expected {got:<7} ({why})",
                to.to_string(),
                stats.received,
                stats.transmitted,
            ),
        );
    }
    Ok(())
}

fn transfer(report: &mut Report, from: &Pod, to: &Pod) -> Result<(), Box<dyn Error>> {
    heading("TCP across nodes (pseudo-random bytes, CRC-32 computed on both sides)");
    let start = Instant::now();
    let transfer = tcp_transfer(from, to, TRANSFER_BYTES)?;
    let seconds = start.elapsed().as_secs_f64();
    let intact = transfer.bytes_sent == TRANSFER_BYTES
        && transfer.bytes_received == TRANSFER_BYTES
        && transfer.sent_crc32 == transfer.received_crc32;
    report.check(
        intact,
        &format!(
            "web -> api: {} bytes sent (crc32 {:08x}), {} received (crc32 {:08x}), \
             expected all {TRANSFER_BYTES} intact; {:.0} Mbit/s",
            transfer.bytes_sent,
            transfer.sent_crc32,
            transfer.bytes_received,
            transfer.received_crc32,
            transfer.bytes_received as f64 * 8.0 / seconds / 1e6
        ),
    );
    Ok(())
}

/// The flow counts per table, and on each node the flows a packet needs: table 70 delivers to
/// every local pod, table 90 sends to every other node's subnet.
fn flows(
    cluster: &Cluster,
    report: &mut Report,
    pods: &[(&str, &Pod)],
) -> Result<(), Box<dyn Error>> {
    heading("flows on br0 (ovs-ofctl dump-flows), per table as table:count");
    for node in cluster.nodes() {
        let flows = node.flows()?;
        println!(
            "  node {}: {} flows  [{}]",
            node.index,
            flows.len(),
            per_table(&flows)
        );
    }
    for node in cluster.nodes() {
        let flows = node.flows()?;
        let local: Vec<String> = pods
            .iter()
            .filter(|(_, pod)| pod.node == node.index)
            .map(|(_, pod)| pod.ip.to_string())
            .collect();
        let remote: Vec<String> = cluster
            .nodes()
            .iter()
            .filter(|other| other.index != node.index)
            .map(Node::subnet_cidr)
            .collect();
        let missing: Vec<String> = local
            .iter()
            .map(|ip| (70, ip))
            .chain(remote.iter().map(|subnet| (90, subnet)))
            .filter(|(table, dst)| !has_flow(&flows, *table, &format!("nw_dst={dst}")))
            .map(|(table, dst)| format!("table {table} nw_dst={dst}"))
            .collect();
        report.check(
            missing.is_empty(),
            &format!(
                "node {}: table 70 delivers to its pods [{}], table 90 routes to the other \
                 nodes' subnets [{}]{}",
                node.index,
                local.join(" "),
                remote.join(" "),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!("; MISSING {}", missing.join(", "))
                }
            ),
        );
    }
    println!("  node 0, table 90 (IP to remote subnets):");
    for flow in cluster
        .node(0)
        .flows()?
        .iter()
        .filter(|f| table_of(f) == 90)
    {
        println!("    {flow}");
    }
    Ok(())
}

/// `ofnode status` of every node, checked against what the demo did: in sync with the switch,
/// its own pods, the other nodes' subnets, and as many flows as the switch holds.
fn status(
    cluster: &Cluster,
    report: &mut Report,
    pods: &[(&str, &Pod)],
) -> Result<(), Box<dyn Error>> {
    if cluster.node(0).daemon().is_none() {
        return Ok(());
    }
    heading("ofnode status");
    for node in cluster.nodes() {
        for line in node.cli(&["status"])?.lines() {
            println!("    {line}");
        }
    }
    for node in cluster.nodes() {
        let listed = node.cli(&["pod", "list"])?;
        let mut listed: Vec<&str> = listed
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        listed.sort_unstable();
        let mut local: Vec<String> = pods
            .iter()
            .filter(|(_, pod)| pod.node == node.index)
            .map(|(_, pod)| pod.key())
            .collect();
        local.sort_unstable();
        report.check(
            listed == local,
            &format!(
                "node {}: `ofnode pod list` shows [{}]; expected its own pods [{}]",
                node.index,
                listed.join(" "),
                local.join(" ")
            ),
        );
    }
    for node in cluster.nodes() {
        let status = status_json(node)?;
        let on_switch = node.flows()?.len();
        let local = pods
            .iter()
            .filter(|(_, pod)| pod.node == node.index)
            .count();
        let number = |key: &str| status[key].as_u64().unwrap_or(u64::MAX);
        let as_expected = status["in_sync"] == true
            && number("pods") == local as u64
            && number("host_subnets") == (NODES - 1) as u64
            && number("flows") == on_switch as u64;
        report.check(
            as_expected,
            &format!(
                "node {}: in_sync {}, {} pods, {} host subnets, {} flows; expected in_sync true, \
                 {local} pods, {} host subnets, {on_switch} flows (the switch's count)",
                node.index,
                status["in_sync"],
                status["pods"],
                status["host_subnets"],
                status["flows"],
                NODES - 1,
            ),
        );
    }
    Ok(())
}

/// `ofnode status --json`, asked of the daemon directly (not echoed as an operator command: the
/// text form above is what an operator reads).
fn status_json(node: &Node) -> Result<serde_json::Value, Box<dyn Error>> {
    let daemon = node
        .daemon()
        .ok_or_else(|| format!("node {} runs no ofnode daemon", node.index))?;
    let text = daemon.cli(&["status", "--json"])?;
    Ok(serde_json::from_str(&text)?)
}

/// True when a flow of `table` has the match `term` (e.g. `nw_dst=10.128.0.10`), compared as a
/// whole term so that `.1` does not match `.10`.
fn has_flow(flows: &[String], table: u32, term: &str) -> bool {
    flows
        .iter()
        .filter(|flow| table_of(flow) == table)
        .any(|flow| flow.split([',', ' ']).any(|part| part == term))
}

/// The table of a flow in ovs-ofctl text ("table=" is absent for table 0).
fn table_of(flow: &str) -> u32 {
    flow.split_once("table=")
        .and_then(|(_, rest)| rest.split([',', ' ']).next()?.parse().ok())
        .unwrap_or(0)
}

/// "table:count" for every table, in table order.
fn per_table(flows: &[String]) -> String {
    let mut counts = std::collections::BTreeMap::<u32, usize>::new();
    for flow in flows {
        *counts.entry(table_of(flow)).or_default() += 1;
    }
    counts
        .iter()
        .map(|(table, count)| format!("{table}:{count}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn heading(text: &str) {
    println!("\n== {text}");
}

fn ofnode_binary() -> Result<PathBuf, Box<dyn Error>> {
    if let Some(path) = std::env::var_os("OFNODE_BIN") {
        return Ok(PathBuf::from(path));
    }
    // target/<profile>/examples/demo -> target/<profile>/ofnode
    let exe = std::env::current_exe()?;
    let binary = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("ofnode"))
        .ok_or("cannot locate the ofnode binary; set OFNODE_BIN")?;
    if !binary.exists() {
        return Err(format!(
            "{} does not exist: run `cargo build --release --bins` first, or set OFNODE_BIN",
            binary.display()
        )
        .into());
    }
    Ok(binary)
}
