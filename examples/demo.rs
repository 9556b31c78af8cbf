//! `make demo`: a three-node cluster on this machine, inside network namespaces, programmed
//! through the ofnode CLI exactly as an operator would; then real packets between pods, the flow
//! counts, `ofnode status`, and a cleanup that leaves nothing behind.
//!
//! Needs root, Open vSwitch, iproute2, ethtool and ping (`make deps`). The ofnode binary is taken
//! from next to this example (`cargo build --release --bins --examples`), or from `OFNODE_BIN`.
//! `OFNODE_E2E_CONTROL=seed` runs it with the seed's flows instead of ofnode.

use std::error::Error;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

use ofnode_harness::cluster::{
    tcp_transfer, Cluster, ClusterOptions, Control, Endpoint, Mode, Pod,
};

const NODES: usize = 3;
const TRANSFER_BYTES: u64 = 8 * 1024 * 1024;

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

fn heading(text: &str) {
    println!("\n== {text}");
}

fn main() -> Result<(), Box<dyn Error>> {
    let control = Control::from_env(ofnode_binary()?);
    heading(&format!(
        "building a {NODES}-node cluster ({})",
        match &control {
            Control::Ofnode(path) => format!("ofnode daemons, {}", path.display()),
            Control::SeedFlows => "the seed's flows, no ofnode".to_string(),
        }
    ));
    let started = Instant::now();
    let cluster = Cluster::start(ClusterOptions {
        nodes: NODES,
        mode: Mode::Multitenant,
        control,
        echo: true,
    })?;
    let made = namespaces_of(&cluster);
    let outcome = show(&cluster, started);
    if let Err(err) = &outcome {
        eprintln!("demo failed: {err}\n{}", cluster.diagnostics());
    }
    heading("cleaning up");
    drop(cluster);
    let left: Vec<String> = list_namespaces()
        .into_iter()
        .filter(|ns| made.contains(ns))
        .collect();
    if left.is_empty() {
        println!("removed every namespace, switch and daemon the demo made");
    } else {
        println!("left behind: {left:?}");
    }
    outcome
}

fn show(cluster: &Cluster, started: Instant) -> Result<(), Box<dyn Error>> {
    heading("adding pods (tenant = VNID; VNID 0 is the global tenant)");
    let web = cluster.add_pod(0, 10)?;
    let db = cluster.add_pod(0, 11)?;
    let api = cluster.add_pod(1, 10)?;
    let admin = cluster.add_pod(2, 0)?;
    if cluster.node(0).daemon().is_some() {
        heading("a service (tenant 10, tcp/80) on every node");
        for node in cluster.nodes() {
            node.cli(&[
                "service",
                "add",
                "--ip",
                "172.30.0.10",
                "--vnid",
                "10",
                "--port",
                "tcp/80",
            ])?;
        }
    }
    println!("cluster ready in {:.1} s", started.elapsed().as_secs_f64());

    heading("the cluster");
    print!("{}", cluster.describe());
    for (name, pod) in [("web", &web), ("db", &db), ("api", &api), ("admin", &admin)] {
        println!(
            "  pod {name:<5} node {} ip {:<13} mac {} vnid {:<2} br0 port {} ({})",
            pod.node, pod.ip, pod.mac, pod.vnid, pod.ofport, pod.host_veth
        );
    }

    heading("pings (3 echo requests each)");
    let gateway0 = cluster.node(0).gateway;
    let pings: [(&str, &Pod, Ipv4Addr, &str); 6] = [
        ("web -> db", &web, db.ip, "same node, other tenant: blocked"),
        ("web -> api", &web, api.ip, "node 0 -> node 1, same tenant"),
        (
            "api -> db",
            &api,
            db.ip,
            "node 1 -> node 0, other tenant: blocked",
        ),
        (
            "admin -> web",
            &admin,
            web.ip,
            "node 2 -> node 0, VNID 0 reaches all",
        ),
        (
            "admin -> db",
            &admin,
            db.ip,
            "node 2 -> node 0, VNID 0 reaches all",
        ),
        ("web -> gateway", &web, gateway0, "node 0's tun0"),
    ];
    for (name, from, to, note) in pings {
        let stats = from.ping(to, 3)?;
        println!(
            "  {name:<15} {:<15} {}/{} replies   ({note})",
            to.to_string(),
            stats.received,
            stats.transmitted
        );
    }

    heading("TCP across nodes");
    let start = Instant::now();
    let transfer = tcp_transfer(&web, &api, TRANSFER_BYTES)?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "  web -> api: {} bytes sent (crc32 {:08x}), {} received (crc32 {:08x}): {}; {:.0} Mbit/s",
        transfer.bytes_sent,
        transfer.sent_crc32,
        transfer.bytes_received,
        transfer.received_crc32,
        if transfer.sent_crc32 == transfer.received_crc32
            && transfer.bytes_sent == transfer.bytes_received
        {
            "intact"
        } else {
            "CORRUPTED"
        },
        transfer.bytes_received as f64 * 8.0 / seconds / 1e6
    );

    heading("flows on br0 (ovs-ofctl dump-flows), per table");
    for node in cluster.nodes() {
        let flows = node.flows()?;
        println!(
            "  node {}: {} flows  [{}]",
            node.index,
            flows.len(),
            per_table(&flows)
        );
    }
    println!("  node 0, table 90 (IP to remote subnets):");
    for flow in cluster
        .node(0)
        .flows()?
        .iter()
        .filter(|f| f.contains("table=90"))
    {
        println!("    {flow}");
    }

    if cluster.node(0).daemon().is_some() {
        heading("ofnode status");
        for node in cluster.nodes() {
            for line in node.cli(&["status"])?.lines() {
                println!("    {line}");
            }
        }
    }
    Ok(())
}

/// "table:count" for every table, in table order ("table=" is absent for table 0).
fn per_table(flows: &[String]) -> String {
    let mut counts = std::collections::BTreeMap::<u32, usize>::new();
    for flow in flows {
        let table = flow
            .split_once("table=")
            .and_then(|(_, rest)| rest.split([',', ' ']).next()?.parse().ok())
            .unwrap_or(0);
        *counts.entry(table).or_default() += 1;
    }
    counts
        .iter()
        .map(|(table, count)| format!("{table}:{count}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn namespaces_of(cluster: &Cluster) -> Vec<String> {
    let mut names = vec![cluster.underlay().name().to_string()];
    names.extend(cluster.nodes().iter().map(|n| n.netns().name().to_string()));
    names
}

fn list_namespaces() -> Vec<String> {
    std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| line.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
