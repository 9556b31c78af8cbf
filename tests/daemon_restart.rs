//! Restarting ofnode itself, by kill -9 and by SIGTERM, each followed by a new process of the
//! binary: every flow stays on the switch while ofnode is away, and the new process changes
//! NOTHING on the switch. Shown at the switch: ofnode reaches br0 through the harness's OpenFlow
//! proxy, which counts every flow mod and bundle the new process sends (none), and the flows'
//! statistics (packet counters, durations) carry on instead of starting again.

mod daemon_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use daemon_common::*;
use ofnode_harness::ofproxy::msg_type;
use ofnode_harness::{Daemon, OfProxy, Ovs, ONE_NODE_SETUP};

const PODS: u32 = 3;
/// Flows must be older than this before the restart, so a re-added one (whose duration starts
/// again from 0) cannot pass for one that stayed.
const AGE: Duration = Duration::from_secs(3);

/// One flow's statistics, by the flow (as `--no-stats` prints it).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stats {
    packets: u64,
    duration: f64,
}

/// br0's flows with their statistics, from `ovs-ofctl dump-flows`.
fn flow_stats(ovs: &Ovs) -> BTreeMap<String, Stats> {
    let text = ovs.ofctl("dump-flows", "br0", &[]).unwrap();
    text.lines()
        .filter(|l| l.contains("actions="))
        .map(|line| {
            let mut flow = Vec::new();
            let (mut packets, mut duration) = (None, None);
            for field in line.trim().split(", ") {
                if let Some(v) = field.strip_prefix("n_packets=") {
                    packets = v.parse().ok();
                } else if let Some(v) = field.strip_prefix("duration=") {
                    duration = v.trim_end_matches('s').parse().ok();
                } else if !["cookie=", "n_bytes=", "idle_age=", "hard_age="]
                    .iter()
                    .any(|p| field.starts_with(p))
                {
                    flow.push(field);
                }
            }
            let stats = Stats {
                packets: packets.unwrap_or_else(|| panic!("no n_packets in {line}")),
                duration: duration.unwrap_or_else(|| panic!("no duration in {line}")),
            };
            (flow.join(", "), stats)
        })
        .collect()
}

/// An ARP request from a pod address, sent into br0's pipeline as if it came from the
/// controller: it counts on table 0's ARP flow and table 20's drop.
fn send_traffic(ovs: &Ovs) {
    let arp =
        "ffffffffffff0a580a80000a080600010800060400010a580a80000a0a80000a0000000000000a800001";
    for _ in 0..5 {
        ovs.ofctl(
            "packet-out",
            "br0",
            &[&format!("in_port=controller packet={arp} actions=table")],
        )
        .unwrap();
    }
}

/// A daemon that reaches br0 through `proxy`, set up with pods and some traffic counted.
fn running_node(ovs: &Ovs, proxy: &OfProxy) -> Daemon {
    // The bridge exists before the daemon, as on a node; setup adopts it.
    ovs.add_bridge("br0").unwrap();
    let daemon = Daemon::start_with_openflow(ovs, Path::new(OFNODE), &proxy.target(), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    make_veths(ovs, PODS);
    for n in 0..PODS {
        cli(&daemon, &pod_add_args(n)).unwrap();
    }
    send_traffic(ovs);
    daemon
}

/// Stops the daemon with `stop`, checks the switch while it is away, starts a new process and
/// checks that it changed nothing.
fn restart_changes_nothing(stop: impl FnOnce(&mut Daemon)) {
    let ovs = Ovs::start().unwrap();
    let proxy = OfProxy::in_front_of(&ovs, "br0").unwrap();
    let mut daemon = running_node(&ovs, &proxy);
    std::thread::sleep(AGE);
    let before = flow_stats(&ovs);
    assert!(
        before.values().any(|s| s.packets > 0),
        "no flow counted the traffic: {before:#?}"
    );
    assert!(before.len() > 4 * PODS as usize, "{before:#?}");

    stop(&mut daemon);
    let away = flow_stats(&ovs);
    assert_eq!(
        away.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "the switch lost or gained flows while ofnode was away"
    );

    let mark = proxy.mark();
    let connections = proxy.connections();
    daemon.spawn().unwrap();
    wait_for("the new process in sync", Duration::from_secs(30), || {
        daemon.status_json().unwrap()["in_sync"] == true
    });
    // In sync means it read the table (a flow dump) and found nothing to change. Evidence that
    // nothing else follows: `pod status` is a read through the daemon's writer, after whatever
    // it had queued, then flow dumps on its switch connection, after whatever it had sent.
    // When it returns, all the new process decided to send has passed the proxy; the window
    // stays open to the end of the test, where it is checked again.
    daemon
        .cli(&["pod", "status", "--sandbox", &sandbox(0)])
        .unwrap();
    let traffic = proxy.traffic_since(mark);
    assert!(
        proxy.connections() > connections,
        "the new process did not dial"
    );
    assert!(
        traffic.count_to_switch(msg_type::MULTIPART_REQUEST) >= 1,
        "it never read the table: {}",
        traffic.describe()
    );
    let unchanged = |traffic: &ofnode_harness::ofproxy::Traffic| {
        assert!(
            traffic.bundles().is_empty() && traffic.loose_flow_mods() == 0,
            "the new process changed the switch: {}",
            traffic.describe()
        );
    };
    unchanged(&traffic);
    let after = flow_stats(&ovs);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (flow, old) in &before {
        let new = after[flow];
        assert!(
            new.packets >= old.packets && new.duration >= old.duration,
            "{flow}: statistics restarted ({old:?} before, {new:?} after)"
        );
    }
    assert_eq!(daemon.status_json().unwrap()["pods"], PODS);
    unchanged(&proxy.traffic_since(mark));
}

#[test]
fn kill_9_and_a_new_process_leave_every_flow_and_change_nothing() {
    restart_changes_nothing(Daemon::kill9);
}

#[test]
fn sigterm_and_a_new_process_leave_every_flow_and_change_nothing() {
    restart_changes_nothing(|daemon| {
        let status = daemon.terminate(Duration::from_secs(30)).unwrap();
        assert!(status.success(), "{status}");
    });
}
