//! The harness itself: a private OVS starts, holds a bridge, and leaves nothing behind.

use std::process::Command;

use ofnode_harness::Ovs;

fn netns_exists(name: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|line| line.split_whitespace().next() == Some(name))
}

#[test]
fn private_ovs_runs_a_bridge_and_cleans_up() {
    let ovs = Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs.ofctl("add-flow", "br0", &["table=0,priority=5,ip,actions=drop"])
        .unwrap();
    let flows = ovs.dump_flows("br0").unwrap();
    assert_eq!(flows, vec!["priority=5,ip actions=drop".to_string()]);

    let ns = ovs.netns().name().to_string();
    let dir = ovs.dir().to_path_buf();
    let pids = [ovs.ovsdb_pid().unwrap(), ovs.vswitchd_pid().unwrap()];
    assert!(netns_exists(&ns));
    drop(ovs);
    assert!(!netns_exists(&ns), "namespace {ns} left behind");
    assert!(!dir.exists(), "state dir {} left behind", dir.display());
    for pid in pids {
        assert!(
            !ofnode_harness::pid_alive(pid),
            "daemon {pid} still running"
        );
    }
}

#[test]
fn vswitchd_can_be_killed_and_restarted() {
    let ovs = Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs.ofctl("add-flow", "br0", &["priority=5,ip,actions=drop"])
        .unwrap();
    ovs.kill_vswitchd();
    assert!(ovs.vswitchd_pid().is_none());
    ovs.start_vswitchd().unwrap();
    ovs.wait_for_path(&ovs.mgmt_sock("br0"), std::time::Duration::from_secs(10))
        .unwrap();
    // Flows do not survive a vswitchd restart; the bridge (in OVSDB) does.
    assert!(ovs.dump_flows("br0").unwrap().is_empty());
}
