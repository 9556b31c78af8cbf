//! The state directory's disk fills up under the daemon.

mod daemon_common;

use std::path::Path;
use std::time::Duration;

use daemon_common::*;
use ofnode_harness::{Daemon, Ovs, Tmpfs, ONE_NODE_SETUP};

/// The state directory's disk fills up: the daemon refuses new pods with an error naming the
/// journal and the cause, keeps serving, takes the refused pod's flows back off the switch, and
/// after a restart with space again has every pod it acknowledged.
#[test]
fn a_full_state_disk_refuses_new_work_and_loses_nothing_acknowledged() {
    const PODS: u32 = 40;
    let ovs = Ovs::start().unwrap();
    // Mounted before the daemon starts (it sees the mount table of that moment); dropped
    // (unmounted) before `ovs`, which removes the directory.
    let disk = Tmpfs::mount(&ovs.dir().join("ofnode/state"), 256).unwrap();
    let mut daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    make_veths(&ovs, PODS);
    let filler = disk.fill().unwrap();

    // The journal's last page may still have room for a few records: add pods until refused.
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for n in 0..PODS {
        match cli(&daemon, &pod_add_args(n)) {
            Ok(_) => acknowledged.push(n),
            Err(error) => {
                refusal = Some((n, error));
                break;
            }
        }
    }
    let (refused, error) = refusal.expect("a full disk never refused a pod");
    assert!(error.contains("No space left on device"), "{error}");
    assert!(error.contains("journal"), "names the file: {error}");
    // Still serving; and the refused pod's flows are taken back off the switch.
    daemon.cli(&["status"]).unwrap();
    let refused_ip = format!("nw_dst=10.128.0.{}", refused + 10);
    wait_for(
        "the refused pod's flows to go",
        Duration::from_secs(15),
        || {
            !ovs.dump_flows("br0")
                .unwrap()
                .iter()
                .any(|f| f.contains(&refused_ip))
        },
    );

    // Space again, and a crash-restart: everything acknowledged is there.
    std::fs::remove_file(filler).unwrap();
    daemon.kill9();
    daemon.spawn().unwrap();
    let status = daemon.status_json().unwrap();
    assert_eq!(
        status["pods"].as_u64(),
        Some(acknowledged.len() as u64),
        "{status}"
    );
    wait_for("the switch to reconnect", Duration::from_secs(15), || {
        daemon.status_json().unwrap()["switch_connected"] == true
    });
    wait_for(
        "every acknowledged pod's flows",
        Duration::from_secs(15),
        || {
            let flows = ovs.dump_flows("br0").unwrap();
            acknowledged.iter().all(|n| {
                let ip = format!("nw_dst=10.128.0.{}", n + 10);
                flows
                    .iter()
                    .any(|f| f.contains("table=70") && f.contains(&ip))
            })
        },
    );
    // The refused pod can be added now; the journal was not left damaged.
    cli(&daemon, &pod_add_args(refused)).unwrap();
    daemon.kill9();
    daemon.spawn().unwrap();
    let status = daemon.status_json().unwrap();
    assert_eq!(
        status["pods"].as_u64(),
        Some(acknowledged.len() as u64 + 1),
        "{status}"
    );
    drop(daemon);
    drop(disk);
}
