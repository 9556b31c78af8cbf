//! SIGTERM during a stream of pod adds: the daemon finishes (or refuses) what is in flight,
//! flushes its journal, removes its socket and exits 0; every pod it acknowledged survives the
//! restart, and every request it did not acknowledge got a clear error.

mod daemon_common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use daemon_common::*;
use ofnode_harness::{Daemon, Ovs, ONE_NODE_SETUP};

const PODS: u32 = 60;
/// Clients adding pods at the same time, so that several requests are in flight at the signal.
const CLIENTS: u32 = 3;

/// What one `ofnode pod add` ended with.
struct Outcome {
    pod: u32,
    ok: bool,
    stderr: String,
}

#[test]
fn sigterm_during_pod_adds_keeps_every_acknowledged_pod_and_exits_zero() {
    let ovs = Ovs::start().unwrap();
    let mut daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    make_veths(&ovs, PODS);

    let acked = Arc::new(AtomicUsize::new(0));
    let adders: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (api, acked) = (daemon.api.clone(), acked.clone());
            std::thread::spawn(move || {
                (client..PODS)
                    .step_by(CLIENTS as usize)
                    .map(|n| {
                        let out = Command::new(OFNODE)
                            .args(pod_add_args(n))
                            .arg("--api")
                            .arg(&api)
                            .output()
                            .unwrap();
                        if out.status.success() {
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                        Outcome {
                            pod: n,
                            ok: out.status.success(),
                            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                        }
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    wait_for("the first pods", Duration::from_secs(60), || {
        acked.load(Ordering::SeqCst) >= 10
    });
    let status = daemon.terminate(Duration::from_secs(60)).unwrap();
    let outcomes: Vec<Outcome> = adders.into_iter().flat_map(|a| a.join().unwrap()).collect();

    assert!(status.success(), "exit status after SIGTERM: {status}");
    assert!(!daemon.api.exists(), "the API socket is left behind");
    let log = std::fs::read_to_string(&daemon.log).unwrap();
    for line in ["SIGTERM: shutting down", "ofnode stopped"] {
        assert!(log.contains(line), "log lacks {line:?}:\n{log}");
    }
    let acknowledged: Vec<u32> = outcomes.iter().filter(|o| o.ok).map(|o| o.pod).collect();
    println!(
        "{} of {PODS} pod adds acknowledged before the daemon stopped; first refusal: {:?}",
        acknowledged.len(),
        outcomes.iter().find(|o| !o.ok).map(|o| &o.stderr)
    );
    assert!(
        (acknowledged.len() as u32) < PODS,
        "the signal came too late to test anything"
    );
    // Every request that was not acknowledged was told so, clearly: no daemon at the socket,
    // or the node shutting down.
    for refused in outcomes.iter().filter(|o| !o.ok) {
        let clear = ["cannot reach the ofnode daemon", "shutting down"]
            .iter()
            .any(|reason| refused.stderr.contains(reason));
        assert!(
            refused.stderr.starts_with("ofnode: ") && clear,
            "pod {}: unclear error {:?}",
            refused.pod,
            refused.stderr
        );
    }
    // While no daemon runs, the switch keeps every acknowledged pod's flows.
    let flows = ovs.dump_flows("br0").unwrap();
    for n in &acknowledged {
        assert!(
            has_pod_flow(&flows, *n),
            "pod {n}'s flows gone while ofnode was away"
        );
    }

    // The journal has every acknowledged pod: a new process of the binary knows them all.
    daemon.spawn().unwrap();
    let status = daemon.status_json().unwrap();
    let known = status["pods"].as_u64().unwrap() as usize;
    assert_eq!(
        known,
        acknowledged.len(),
        "pods after the restart: {status}"
    );
    wait_for("the switch to reconnect", Duration::from_secs(20), || {
        daemon.status_json().unwrap()["in_sync"] == true
    });
    let flows = ovs.dump_flows("br0").unwrap();
    assert_eq!(pods_on_switch(&flows), known, "{flows:#?}");
    assert_eq!(daemon.dump_flows().unwrap(), flows);
}
