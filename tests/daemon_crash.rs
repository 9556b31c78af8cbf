//! The daemon killed with SIGKILL during a stream of pod adds loses no pod it acknowledged.

mod daemon_common;

use std::path::Path;
use std::time::Duration;

use daemon_common::*;
use ofnode_harness::{Daemon, Ovs, ONE_NODE_SETUP};

/// kill -9 of the daemon during a stream of pod adds: after a restart every pod whose add was
/// acknowledged is on the switch, and the switch holds exactly the flows of the pods the daemon
/// knows (nothing stale, nothing half-done).
#[test]
fn daemon_killed_mid_stream_loses_no_acknowledged_pod() {
    const PODS: u32 = 40;
    let ovs = Ovs::start().unwrap();
    let mut daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    make_veths(&ovs, PODS);

    let api = daemon.api.clone();
    let adder = std::thread::spawn(move || {
        let mut acknowledged = Vec::new();
        for n in 0..PODS {
            let out = std::process::Command::new(OFNODE)
                .args(pod_add_args(n))
                .arg("--api")
                .arg(&api)
                .output()
                .unwrap();
            if out.status.success() {
                acknowledged.push(n);
            }
        }
        acknowledged
    });
    // Let some adds land, then crash the daemon while the stream goes on.
    wait_for("the first pods", Duration::from_secs(30), || {
        ovs.dump_flows("br0")
            .unwrap()
            .iter()
            .filter(|f| f.contains("table=70"))
            .count()
            >= 6
    });
    daemon.kill9();
    let acknowledged = adder.join().unwrap();
    assert!(!acknowledged.is_empty());
    assert!(
        (acknowledged.len() as u32) < PODS,
        "the crash came too late to test anything"
    );

    daemon.spawn().unwrap();
    // ovs-vswitchd reconnects to the new daemon after its own controller backoff.
    wait_for("the switch to reconnect", Duration::from_secs(15), || {
        daemon.status_json().unwrap()["switch_connected"] == true
    });
    let status = daemon.status_json().unwrap();
    let known = status["pods"].as_u64().unwrap() as usize;
    assert!(known >= acknowledged.len(), "{status}");
    wait_for("the reconciled table", Duration::from_secs(10), || {
        pods_on_switch(&ovs.dump_flows("br0").unwrap()) == known
    });
    let flows = ovs.dump_flows("br0").unwrap();
    for n in &acknowledged {
        assert!(
            has_pod_flow(&flows, *n),
            "acknowledged pod {n} lost:\n{flows:#?}"
        );
    }
    // Every pod the daemon knows has exactly its four flows (tables 20 ×2, 40, 70).
    let pod_flows = flows
        .iter()
        .filter(|f| {
            f.contains("priority=100")
                && ["table=20", "table=40", "table=70"]
                    .iter()
                    .any(|t| f.contains(t))
        })
        .count();
    assert_eq!(pod_flows, 4 * known, "{flows:#?}");
    // What ofnode believes is what the switch holds.
    let ours: Vec<String> = daemon.dump_flows().unwrap();
    assert_eq!(ours, flows);
}
