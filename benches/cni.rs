//! CNI benchmark (`cargo bench --bench cni`): the median time of `ofnode-cni` ADD, run as a
//! runtime runs it (a child process with the CNI environment, `host-local` IPAM from
//! /usr/lib/cni), from exec to exit — by then the veth, the address, the routes, the OVS port and
//! the pod's flows are in place (ADD answers only after the daemon's bundle is acknowledged).
//! One node (`ofnode run` on a private OVS, userspace datapath), pods added one after another.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::Netns;
use serde_json::json;

const PODS: u32 = 50;

fn main() {
    let cluster = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::Subnet,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .expect("start a one-node cluster");
    let node = cluster.node(0);
    let data_dir = tempfile::tempdir().expect("temp dir");
    let config = serde_json::to_vec(&json!({
        "cniVersion": "1.0.0",
        "name": "ofnode-bench",
        "type": "ofnode",
        "api": node.daemon().expect("daemon").api,
        "mtu": 1450,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": node.subnet_cidr(), "gateway": node.gateway.to_string()}]],
            "dataDir": data_dir.path(),
        }
    }))
    .expect("config");
    // CNI_ARGS as kubelet passes them (the plugin names the pod by them).
    let cni = |command: &str, (id, netns, args): &(String, Netns, String)| -> Duration {
        let started = Instant::now();
        let mut child = node
            .netns()
            .command(env!("CARGO_BIN_EXE_ofnode-cni"))
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", id)
            .env("CNI_NETNS", netns.path())
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/usr/lib/cni")
            .env("CNI_ARGS", args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run ofnode-cni");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&config).expect("write the config");
        }
        let out = child.wait_with_output().expect("wait for ofnode-cni");
        let elapsed = started.elapsed();
        assert!(
            out.status.success(),
            "{command} failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        elapsed
    };

    let pods: Vec<(String, Netns, String)> = (0..PODS)
        .map(|n| {
            let id = format!("b{n:010x}{:053x}", std::process::id());
            let args = format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=bench-{n}");
            (id, Netns::new("cb").expect("pod namespace"), args)
        })
        .collect();
    let mut adds: Vec<Duration> = pods.iter().map(|pod| cni("ADD", pod)).collect();
    let mut dels: Vec<Duration> = pods.iter().map(|pod| cni("DEL", pod)).collect();
    adds.sort();
    dels.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = |v: &[Duration]| ms(v[v.len() / 2]);
    let p90 = |v: &[Duration]| ms(v[v.len() * 9 / 10]);
    println!(
        "cni: ADD to ready (veth + host-local IPAM + port + flows), {PODS} pods one after another: median {:.1} ms, p90 {:.1} ms",
        median(&adds),
        p90(&adds)
    );
    println!(
        "cni: DEL (port + flows + veth + IPAM release): median {:.1} ms, p90 {:.1} ms",
        median(&dels),
        p90(&dels)
    );
}
