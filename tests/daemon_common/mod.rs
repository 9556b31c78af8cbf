//! Shared by the `daemon_*` tests: `ofnode run` in the namespace of a private Open vSwitch,
//! driven through its CLI and API.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use ofnode_harness::{Daemon, Ovs};

pub const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");

pub fn sandbox(n: u32) -> String {
    format!("{n:08x}{}", "ab".repeat(28))
}

/// Creates host veths `vethN` (peer `vpN`) in the OVS namespace, as a CNI plugin would.
pub fn make_veths(ovs: &Ovs, count: u32) {
    for n in 0..count {
        let (host, peer) = (format!("veth{n}"), format!("vp{n}"));
        ovs.netns()
            .exec_ok(&[
                "ip", "link", "add", &host, "type", "veth", "peer", "name", &peer,
            ])
            .unwrap();
        ovs.netns()
            .exec_ok(&["ip", "link", "set", &host, "up"])
            .unwrap();
    }
}

/// Pod `n`'s key.
pub fn pod_key(n: u32) -> String {
    format!("default/pod-{n}")
}

/// `ofnode pod add` of pod `n`: [`pod_key`], veth `vethN`, 10.128.0.(10+n), [`sandbox`].
pub fn pod_add_args(n: u32) -> Vec<String> {
    vec![
        "pod".into(),
        "add".into(),
        "--pod".into(),
        pod_key(n),
        "--veth".into(),
        format!("veth{n}"),
        "--ip".into(),
        format!("10.128.0.{}", n + 10),
        "--mac".into(),
        format!("0a:58:0a:80:00:{:02x}", n + 10),
        "--sandbox".into(),
        sandbox(n),
        "--vnid".into(),
        "0".into(),
    ]
}

pub fn cli(daemon: &Daemon, args: &[String]) -> Result<String, String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    daemon.cli(&args).map_err(|e| e.to_string())
}

/// One raw HTTP/1.1 exchange on the API socket: (status code, body).
pub fn http(socket: &Path, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = UnixStream::connect(socket).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: ofnode\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The server may answer (413) and close before it has read an oversized body: a failed
    // write or a reset after the reply is not the test's concern, the reply is.
    let _ = stream.write_all(request.as_bytes());
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let reply = String::from_utf8_lossy(&raw);
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

pub fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `flows` (ovs-ofctl lines) hold pod `n`'s table 70 flow (`pod_add_args(n)`'s address).
pub fn has_pod_flow(flows: &[String], n: u32) -> bool {
    let ip = format!("nw_dst=10.128.0.{}", n + 10);
    flows
        .iter()
        .any(|f| f.contains("table=70") && f.contains(&ip))
}

/// Pods whose table 70 flow is in `flows`.
pub fn pods_on_switch(flows: &[String]) -> usize {
    flows
        .iter()
        .filter(|f| f.contains("table=70, priority=100"))
        .count()
}
