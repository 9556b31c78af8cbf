//! Issue 30: per-rule counters on real Open vSwitch. One node in networkpolicy mode; x/b may
//! reach x/a on TCP 80 (policy `web`, ingress[0]); y/c is denied by x's isolation. Real
//! connections from both must show as packets on the right rules in `ofnode netpol list
//! --stats` (the switch's verdict flow counters, read on demand) and in /metrics'
//! `ofnode_policy_rule_packets_total` (the slow poll). The oracle for the verdicts is the
//! probes themselves: the allowed connection answered, the denied one did not.
//!
//! The verdict flows carry their rule's cookie once the audit's flows are in (branch
//! audit-flows); until then no flow is counted, hence the `ignore`.

mod daemon_common;

use std::path::Path;
use std::time::{Duration, Instant};

use daemon_common::http;
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Mode, Pod};
use ofnode_harness::reachability::{probe_once, Probe, Servers, PROBE_TIMEOUT};
use serde_json::{json, Value};

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A TCP probe to port 80 of `to` from `from`'s namespace: whether `to`'s server answered.
fn tcp80(from: &Pod, to: &Pod) -> bool {
    let path = from.netns().path();
    let (ip, expect) = (to.ip, to.key());
    std::thread::spawn(move || probe_once(&path, ip, &expect, Probe::TCP80, PROBE_TIMEOUT))
        .join()
        .unwrap_or(false)
}

/// The packets `netpol list --stats --json` shows on the rule named by `matches`.
fn listed_packets(cluster: &Cluster, matches: impl Fn(&Value) -> bool) -> Option<u64> {
    let text = cluster
        .node(0)
        .cli(&["netpol", "list", "--stats", "--json"])
        .expect("netpol list --stats");
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    reply["rule_stats"]["rules"]
        .as_array()
        .expect("rule_stats.rules")
        .iter()
        .find(|rule| matches(rule))
        .and_then(|rule| rule["packets"].as_u64())
}

/// The value of the series `line_prefix` on /metrics (None: no such series).
fn metric(api: &Path, series: &str) -> Option<u64> {
    let (code, text) = http(api, "GET", "/metrics", "");
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .map(|v| v.trim().parse().expect("a counter value"))
}

/// Waits until `read` gives a count of at least `min` (the switch credits its datapath's
/// packets to the flows every half second or so; /metrics waits for its poll too).
fn wait_at_least(what: &str, min: u64, read: impl Fn() -> Option<u64>) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = read();
        if seen.is_some_and(|n| n >= min) {
            return seen.unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {seen:?}, expected at least {min}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs audit-flows"]
fn real_connections_count_on_the_rule_that_decided_them() {
    let mut cluster = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap();
    cluster
        .node_mut(0)
        .daemon_mut()
        .expect("an ofnode daemon")
        .restart_with(&["--rule-counters-interval", "1"])
        .unwrap();
    cluster
        .namespace_set("x", 11, &labels(&[("ns", "x")]))
        .unwrap();
    cluster
        .namespace_set("y", 12, &labels(&[("ns", "y")]))
        .unwrap();
    let a = cluster
        .add_named_pod(0, ("x", "a"), 11, &labels(&[("pod", "a")]))
        .unwrap();
    let b = cluster
        .add_named_pod(0, ("x", "b"), 11, &labels(&[("pod", "b")]))
        .unwrap();
    let c = cluster
        .add_named_pod(0, ("y", "c"), 12, &labels(&[("pod", "c")]))
        .unwrap();
    let _servers = Servers::start(a.netns(), a.key()).unwrap();
    cluster
        .netpol_apply(&json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "web", "namespace": "x"},
            "spec": {
                "podSelector": {"matchLabels": {"pod": "a"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}],
                             "ports": [{"protocol": "TCP", "port": 80}]}]
            }
        }))
        .unwrap();

    const CONNECTIONS: u64 = 5;
    for _ in 0..CONNECTIONS {
        assert!(
            tcp80(&b, &a),
            "x/b -> x/a allowed\n{}",
            cluster.diagnostics()
        );
        assert!(
            !tcp80(&c, &a),
            "y/c -> x/a denied\n{}",
            cluster.diagnostics()
        );
    }

    // Each allowed connection's forward packets (SYN, ACK, FIN/ACK at least) meet ingress[0];
    // each denied one's SYN (and its retransmissions) meets x's isolation.
    let allowed = |rule: &Value| {
        rule["tier"] == "networkpolicy"
            && rule["namespace"] == "x"
            && rule["policy"] == "web"
            && rule["rule"] == "ingress[0]"
            && rule["verdict"] == "allow"
    };
    let isolated = |rule: &Value| {
        rule["tier"] == "networkpolicy"
            && rule["namespace"] == "x"
            && rule["rule"] == "default-deny"
            && rule["direction"] == "ingress"
            && rule["verdict"] == "deny"
    };
    wait_at_least("ingress[0] in netpol list --stats", 3 * CONNECTIONS, || {
        listed_packets(&cluster, allowed)
    });
    wait_at_least("isolation in netpol list --stats", CONNECTIONS, || {
        listed_packets(&cluster, isolated)
    });
    let text = cluster.node(0).cli(&["netpol", "list", "--stats"]).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("networkpolicy")
            && l.contains("x/web")
            && l.contains("ingress[0]")),
        "{text}"
    );

    let api = cluster.node(0).daemon().expect("daemon").api.clone();
    wait_at_least("ingress[0] on /metrics", 3 * CONNECTIONS, || {
        metric(
            &api,
            r#"ofnode_policy_rule_packets_total{namespace="x",policy="web",rule="ingress[0]",verdict="allow"} "#,
        )
    });
    wait_at_least("isolation on /metrics", CONNECTIONS, || {
        metric(
            &api,
            r#"ofnode_policy_rule_packets_total{namespace="x",policy="",rule="ingress:default-deny",verdict="deny"} "#,
        )
    });
    let bytes = metric(
        &api,
        r#"ofnode_policy_rule_bytes_total{namespace="x",policy="web",rule="ingress[0]",verdict="allow"} "#,
    );
    assert!(
        bytes.is_some_and(|b| b >= 3 * CONNECTIONS * 54),
        "{bytes:?}"
    );
}
