//! Two nodes (namespaces) joined by a veth underlay, each with a VXLAN device configured by
//! ofnode: pings cross the overlay in static mode and in miss mode, the entries ofnode installed
//! are checked with `ip -j neigh` / `bridge -j fdb`, and a miss flood with a tiny receive buffer
//! is survived. Run as root; all traffic stays inside the two namespaces.

mod netlink_common;

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use netlink_common::{blocking, fdb_entry, lladdr_of, Node, Underlay, IP_A, IP_B, VX};
use ofnode::netlink::{
    overlay_address, KnownHost, MissOptions, MissStats, VxlanManager, VxlanManagerOptions,
    VxlanMode,
};

const SUBNET_A: &str = "10.128.0.0/23";
const SUBNET_B: &str = "10.128.2.0/23";
const CLUSTER_PREFIX: u8 = 14;
/// How long a condition the kernel reaches by itself (neighbour probes ~1 s apart) may take.
const SETTLE: Duration = Duration::from_secs(20);

fn options(node: &Node, subnet: &str, mode: VxlanMode, learning: bool) -> VxlanManagerOptions {
    let address = overlay_address(subnet.parse().unwrap());
    VxlanManagerOptions {
        attrs: ofnode::netlink::VxlanAttrs {
            learning,
            ..node.vxlan_attrs()
        },
        address: ofnode::netlink::Ipv4Net::new(address, CLUSTER_PREFIX).unwrap(),
        mode,
        miss: MissOptions::default(),
        repair_interval: ofnode::netlink::REPAIR_INTERVAL,
    }
}

fn known_host(manager: &VxlanManager, host_ip: Ipv4Addr, subnet: &str) -> KnownHost {
    KnownHost {
        host_ip,
        subnet: subnet.parse().unwrap(),
        vtep_mac: manager.device().mac().expect("device MAC"),
    }
}

/// Starts both nodes' managers and tells each about both hosts (its own entry is skipped).
async fn start_pair(
    net: &Underlay,
    mode: VxlanMode,
    learning: bool,
    miss_a: MissOptions,
) -> (VxlanManager, VxlanManager) {
    let a = VxlanManager::start(
        &net.a.handle(),
        VxlanManagerOptions {
            miss: miss_a,
            ..options(&net.a, SUBNET_A, mode, learning)
        },
    )
    .await
    .unwrap();
    let b = VxlanManager::start(&net.b.handle(), options(&net.b, SUBNET_B, mode, learning))
        .await
        .unwrap();
    let hosts = [
        known_host(&a, IP_A, SUBNET_A),
        known_host(&b, IP_B, SUBNET_B),
    ];
    a.set_hosts(hosts).await.unwrap();
    b.set_hosts(hosts).await.unwrap();
    (a, b)
}

/// `ping` from `node` until `count` replies came back, within a generous deadline.
fn ping(node: &Node, target: &str, count: u32) -> bool {
    blocking(|| {
        node.ns.exec_status(&[
            "ping",
            "-n",
            "-q",
            "-c",
            &count.to_string(),
            "-i",
            "0.2",
            "-w",
            "15",
            target,
        ])
    })
}

/// Waits until `done` holds, or gives up after [`SETTLE`]; returns whether it held.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + SETTLE;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    done()
}

fn state_of(entry: &serde_json::Value) -> String {
    match &entry["state"] {
        serde_json::Value::Array(states) => states
            .iter()
            .filter_map(|state| state.as_str())
            .collect::<Vec<_>>()
            .join("|"),
        serde_json::Value::String(state) => state.clone(),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_mode_programs_every_known_host_and_ping_crosses() {
    let net = Underlay::new();
    let (a, b) = start_pair(&net, VxlanMode::Static, true, MissOptions::default()).await;
    let mac_b = b.device().mac().unwrap();
    // An address behind node B outside its device address, reached through the subnet route.
    net.b
        .sh(&["ip", "addr", "add", "10.128.2.5/32", "dev", "lo"]);

    assert!(ping(&net.a, "10.128.2.1", 3), "A -> B's overlay address");
    assert!(
        ping(&net.a, "10.128.2.5", 3),
        "A -> an address in B's subnet"
    );
    assert!(ping(&net.b, "10.128.0.1", 3), "B -> A");

    let neighbours = net.a.neigh_json(VX);
    let entry = neighbours
        .iter()
        .find(|entry| entry["dst"] == "10.128.2.1")
        .unwrap_or_else(|| panic!("no neighbour for B's gateway: {neighbours:?}"));
    assert_eq!(entry["lladdr"], mac_b.to_string(), "{entry}");
    assert_eq!(state_of(entry), "PERMANENT", "{entry}");
    let fdb = fdb_entry(&net.a.fdb_json(VX), mac_b).expect("FDB entry for B's VTEP");
    assert_eq!(fdb["dst"], "192.0.2.2", "{fdb}");
    assert_eq!(state_of(&fdb), "permanent", "{fdb}");
    let route = net.a.sh(&["ip", "-4", "route", "show", SUBNET_B]);
    assert!(
        route.contains(&format!("{SUBNET_B} via 10.128.2.1 dev {VX}")) && route.contains("onlink"),
        "{route}"
    );

    let status = a.status();
    assert_eq!(status.mode, VxlanMode::Static);
    assert_eq!(status.hosts, 1, "its own host is not a remote host");
    assert_eq!(status.device, VX);
    assert!(!status.miss_loop_running);
    assert_eq!(status.misses, MissStats::default());

    // Forgetting B removes everything that was programmed for it.
    a.remove_host(IP_B).await.unwrap();
    assert_eq!(
        lladdr_of(&net.a.neigh_json(VX), Ipv4Addr::new(10, 128, 2, 1)),
        None
    );
    assert!(fdb_entry(&net.a.fdb_json(VX), mac_b).is_none());
    assert!(net
        .a
        .sh(&["ip", "-4", "route", "show", SUBNET_B])
        .trim()
        .is_empty());
    assert!(!blocking(|| net.a.ns.exec_status(&[
        "ping",
        "-c",
        "1",
        "-W",
        "1",
        "10.128.2.1"
    ])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_mode_answers_the_kernels_misses_and_ping_crosses() {
    let net = Underlay::new();
    // Learning off: every FDB entry must come from ofnode's answers, none from received frames.
    let (a, b) = start_pair(&net, VxlanMode::Miss, false, MissOptions::default()).await;
    let (mac_a, mac_b) = (a.device().mac().unwrap(), b.device().mac().unwrap());
    assert!(
        net.a.neigh_json(VX).is_empty(),
        "nothing is programmed up front"
    );
    assert!(fdb_entry(&net.a.fdb_json(VX), mac_b).is_none());

    // The first packets are lost while the misses are answered; then replies come.
    assert!(
        ping(&net.a, "10.128.2.1", 2),
        "A -> B once the misses are answered"
    );

    let on_a = net.a.neigh_json(VX);
    assert_eq!(
        lladdr_of(&on_a, Ipv4Addr::new(10, 128, 2, 1)),
        Some(mac_b.to_string())
    );
    let fdb = fdb_entry(&net.a.fdb_json(VX), mac_b).expect("A's FDB entry for B");
    assert_eq!(fdb["dst"], "192.0.2.2", "{fdb}");
    assert_ne!(state_of(&fdb), "permanent", "miss answers age out: {fdb}");
    let on_b = net.b.neigh_json(VX);
    assert_eq!(
        lladdr_of(&on_b, Ipv4Addr::new(10, 128, 0, 1)),
        Some(mac_a.to_string())
    );
    let fdb = fdb_entry(&net.b.fdb_json(VX), mac_a).expect("B's FDB entry for A");
    assert_eq!(fdb["dst"], "192.0.2.1", "{fdb}");

    for manager in [&a, &b] {
        let status = manager.status();
        assert_eq!(status.mode, VxlanMode::Miss);
        assert!(status.miss_loop_running);
        assert!(status.misses.seen >= 2, "{:?}", status.misses);
        assert!(
            status.misses.answered >= 2,
            "an L3 and an L2 miss: {:?}",
            status.misses
        );
    }

    // An address in no known subnet stays unresolved and is counted as unknown.
    let unknown_before = a.status().misses.unknown;
    assert!(!blocking(|| net.a.ns.exec_status(&[
        "ping",
        "-c",
        "1",
        "-W",
        "1",
        "10.129.0.7"
    ])));
    assert!(eventually(|| a.status().misses.unknown > unknown_before).await);
    assert_eq!(
        lladdr_of(&net.a.neigh_json(VX), Ipv4Addr::new(10, 129, 0, 7)),
        None
    );
}

/// Known addresses of the flood: inside B's subnet (answered with B's VTEP MAC).
fn known_flood_addresses() -> Vec<Ipv4Addr> {
    (10..60)
        .map(|last| Ipv4Addr::new(10, 128, 2, last))
        .collect()
}

/// Sends one datagram to each address from inside `node`: every one starts a neighbour
/// resolution, so the kernel emits a burst of misses faster than any reader takes them.
fn flood(node: &Node, targets: &[Ipv4Addr]) {
    node.run_inside(|| {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("UDP socket");
        for target in targets {
            // A send can fail once the neighbour queue is full; the miss was raised anyway.
            let _ = socket.send_to(b"flood", (*target, 9));
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_flood_with_a_tiny_buffer_overruns_resyncs_and_still_answers() {
    let net = Underlay::new();
    let tiny = MissOptions {
        queue: 8,
        // The kernel raises this to its minimum (a few KiB): a handful of notifications.
        rcvbuf: Some(1),
    };
    let (a, b) = start_pair(&net, VxlanMode::Miss, false, tiny).await;
    let mac_b = b.device().mac().unwrap();
    let known = known_flood_addresses();

    // Bursts of unknown addresses with the known ones spread among them, until the socket
    // overran (the first burst nearly always does; fresh addresses each round).
    for round in 0..5u8 {
        let mut targets = Vec::new();
        for last in 1..=200u8 {
            targets.push(Ipv4Addr::new(10, 129, round, last));
            if last % 4 == 0 {
                if let Some(ip) = known.get(usize::from(last / 4) - 1) {
                    targets.push(*ip);
                }
            }
        }
        flood(&net.a, &targets);
        if a.status().misses.overruns > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stats = a.status().misses;
    assert!(
        stats.overruns > 0,
        "the tiny buffer must overrun: {stats:?}"
    );

    // The loop resynchronises from the tables and every known address ends up answered.
    let all_known_answered = || {
        let neighbours = net.a.neigh_json(VX);
        known
            .iter()
            .all(|ip| lladdr_of(&neighbours, *ip) == Some(mac_b.to_string()))
    };
    assert!(
        eventually(all_known_answered).await,
        "known addresses unanswered after the flood: {:?}",
        a.status().misses
    );
    let stats = a.status().misses;
    assert!(a.status().miss_loop_running, "the loop survived: {stats:?}");
    assert!(stats.resyncs > 0, "{stats:?}");
    assert!(stats.unknown > 0, "{stats:?}");
    assert!(stats.answered > 0, "{stats:?}");
    assert!(
        fdb_entry(&net.a.fdb_json(VX), mac_b).is_some(),
        "the L2 miss for B's MAC was answered too"
    );

    // And it still answers a fresh miss for a known address end to end.
    assert!(ping(&net.a, "10.128.2.1", 2), "A -> B after the flood");
    eprintln!("miss flood stats: {:?}", a.status().misses);
}
