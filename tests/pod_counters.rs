//! Issue 15: per-pod traffic counters on real Open vSwitch. Two nodes (subnet mode), a pod on
//! each; N pings from A to B must grow A's and B's tx and rx by at least N, as both the API
//! (`GET /v1/pods?pod=NS/NAME`) and /metrics (labelled by the pod's namespace and name) show
//! them; a deleted pod's series go. The oracle for
//! the traffic is the kernel: ping's own count of requests sent and replies received.

mod daemon_common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use daemon_common::http;
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Mode, Pod};

const PINGS: u32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `GET /v1/pods?pod=NS/NAME` of the pod.
fn status_path(pod: &Pod) -> String {
    format!("/v1/pods?pod={}", pod.key())
}

/// The pod's counters from `GET /v1/pods?pod=NS/NAME`, once a poll that started after
/// `after_ms` has run.
fn api_counts(api: &Path, pod: &Pod, after_ms: u64) -> Counts {
    let path = status_path(pod);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = http(api, "GET", &path, "");
        assert_eq!(code, 200, "{path}: {body}");
        let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let c = &status["counters"];
        if c["polled_at_unix_ms"]
            .as_u64()
            .is_some_and(|t| t > after_ms)
        {
            let get = |key: &str| c[key].as_u64().unwrap_or_else(|| panic!("{key}: {body}"));
            return Counts {
                rx_packets: get("rx_packets"),
                rx_bytes: get("rx_bytes"),
                tx_packets: get("tx_packets"),
                tx_bytes: get("tx_bytes"),
            };
        }
        assert!(
            Instant::now() < deadline,
            "no poll after {after_ms}: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn metrics(api: &Path) -> String {
    let (code, text) = http(api, "GET", "/metrics", "");
    assert_eq!(code, 200, "{text}");
    text
}

/// The pod's four series on /metrics, if it has them.
fn metric_counts(text: &str, pod: &Pod) -> Option<Counts> {
    let value = |name: &str| -> Option<u64> {
        let prefix = format!(
            "{name}{{namespace=\"{}\",pod=\"{}\"}} ",
            pod.namespace, pod.name
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|v| v.trim().parse().expect("a counter value"))
    };
    Some(Counts {
        rx_packets: value("ofnode_pod_rx_packets_total")?,
        rx_bytes: value("ofnode_pod_rx_bytes_total")?,
        tx_packets: value("ofnode_pod_tx_packets_total")?,
        tx_bytes: value("ofnode_pod_tx_bytes_total")?,
    })
}

fn grew(before: Counts, after: Counts, n: u64) -> bool {
    // An echo request or reply is at least 84 bytes (20 IP + 8 ICMP + 56 data; OVS counts the
    // Ethernet frame, 98).
    after.tx_packets >= before.tx_packets + n
        && after.rx_packets >= before.rx_packets + n
        && after.tx_bytes >= before.tx_bytes + 84 * n
        && after.rx_bytes >= before.rx_bytes + 84 * n
}

/// The pod's counters once they stopped moving: two polls in a row agree. ovs-vswitchd
/// credits its datapath's packets to the OpenFlow flows in the background (its revalidators,
/// about every 500 ms), so a poll right after traffic may not see all of it yet.
fn settled_counts(api: &Path, pod: &Pod) -> Counts {
    let mut last = api_counts(api, pod, unix_ms());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let next = api_counts(api, pod, unix_ms());
        if next == last {
            return next;
        }
        assert!(
            Instant::now() < deadline,
            "counters never settled: {next:?}"
        );
        last = next;
    }
}

/// The pod's counters once they have grown by `n` packets both ways since `before` (they
/// lag the traffic by up to the revalidator period plus the poll interval).
fn grown_counts(name: &str, api: &Path, pod: &Pod, before: Counts, n: u64) -> Counts {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = api_counts(api, pod, unix_ms());
        if grew(before, now, n) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {before:?} -> {now:?}, expected each packet count to grow by >= {n}"
        );
    }
}

#[test]
fn pings_grow_both_pods_counters_in_the_api_and_metrics_and_a_deleted_pod_goes() {
    let mut cluster = Cluster::start(ClusterOptions {
        nodes: 2,
        mode: Mode::Subnet,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap();
    for node in 0..2 {
        cluster
            .node_mut(node)
            .daemon_mut()
            .expect("an ofnode daemon")
            .restart_with(&["--pod-counters-interval", "1"])
            .unwrap();
    }
    let a = cluster.add_pod(0, 0).unwrap();
    let b = cluster.add_pod(1, 0).unwrap();
    let api = |node: usize| cluster.node(node).daemon().expect("daemon").api.clone();
    let (api_a, api_b) = (api(0), api(1));

    // A first exchange (ARP resolved on both sides), then the baseline.
    let warm = a.ping(b.ip, 1).unwrap();
    assert_eq!(warm.received, 1, "{}", cluster.diagnostics());
    let before_a = settled_counts(&api_a, &a);
    let before_b = settled_counts(&api_b, &b);
    let exported = metric_counts(&metrics(&api_a), &a).expect("A's series");
    assert!(
        grew(before_a, exported, 0),
        "API {before_a:?}, /metrics {exported:?}"
    );

    let stats = a.ping(b.ip, PINGS).unwrap();
    assert_eq!(stats.transmitted, PINGS, "{stats:?}");
    assert_eq!(stats.received, stats.transmitted, "{stats:?}");
    let n = u64::from(PINGS);
    let after_a = grown_counts("A (API)", &api_a, &a, before_a, n);
    let after_b = grown_counts("B (API)", &api_b, &b, before_b, n);
    // /metrics shows the same polls (the counters only grow, so at least what the API saw).
    for (name, api, pod, seen) in [("A", &api_a, &a, after_a), ("B", &api_b, &b, after_b)] {
        let exported = metric_counts(&metrics(api), pod).expect("the pod's series");
        assert!(
            grew(seen, exported, 0),
            "{name}: API {seen:?}, /metrics {exported:?}"
        );
    }

    let text = cluster
        .node(0)
        .cli(&["pod", "status", "--pod", &a.key()])
        .unwrap();
    assert!(
        text.contains("rx: ") && text.contains("tx: ") && text.contains("counters polled at: "),
        "{text}"
    );

    // A deleted pod's series disappear at the next poll.
    cluster
        .node(1)
        .cli(&["pod", "del", "--pod", &b.key(), "--veth", &b.host_veth])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric_counts(&metrics(&api_b), &b).is_some() {
        assert!(
            Instant::now() < deadline,
            "B's series stayed after its delete"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = metrics(&api_b);
    assert!(!text.contains(&format!("pod=\"{}\"", b.name)), "{text}");
    assert!(text.contains("\nofnode_pod_metrics_omitted 0\n"), "{text}");
    let (code, _) = http(&api_b, "GET", &status_path(&b), "");
    assert_eq!(code, 404);
    // A is still polled.
    assert!(metric_counts(&metrics(&api_a), &a).is_some());
}
