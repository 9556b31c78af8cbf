//! Issue 7: restart ovs-vswitchd on one node while a pod pings a pod on another node. The
//! switch comes back with no flows; ofnode must notice and re-install them, and the ping must
//! recover by itself, with no operator action. The recovery time (first reply after the switch
//! is back) is measured from `ping -D` timestamps and printed; the test asserts only a generous
//! deadline. The 2 s target is measured by `cargo bench --bench e2e` (`make bench`).
//!
//! Always with ofnode daemons, whatever `OFNODE_E2E_CONTROL` says: with the seed's flows nothing
//! re-installs them after a restart, so there is nothing to compare.

use std::time::Duration;

use ofnode_harness::cluster::{unix_now, CrossNodePing, DaemonOpenflow, Node};

/// Generous: the target is 2 s; this only catches "never recovers".
const RECOVERY_DEADLINE: Duration = Duration::from_secs(15);
/// How long the switch stays down.
const OUTAGE: Duration = Duration::from_secs(1);

#[test]
fn ping_across_nodes_recovers_after_ovs_vswitchd_restarts() {
    let ping = CrossNodePing::start(env!("CARGO_BIN_EXE_ofnode")).unwrap();
    let (cluster, pinger) = (&ping.cluster, &ping.pinger);
    assert!(
        ping.replies_within(Duration::from_secs(5)),
        "no replies before the restart\n{}",
        cluster.diagnostics()
    );

    // The remote node's switch first, then the pinging pod's own.
    for node in [1, 0] {
        let recovery = cluster
            .node(node)
            .restart_vswitchd_while_pinging(pinger, OUTAGE, RECOVERY_DEADLINE)
            .unwrap_or_else(|e| panic!("{e}\n{}", cluster.diagnostics()));
        println!("{}", recovery.describe());
        // And it stays up.
        let later = pinger.wait_reply_after(recovery.first_reply_at + 0.5, Duration::from_secs(5));
        assert!(
            later.is_some(),
            "node {node}: replies stopped again after recovering"
        );
    }
    let replies = ping.pinger.finish();
    assert!(
        replies.len() > 20,
        "only {} replies in total",
        replies.len()
    );
}

/// The daemon's log line when ovs-vswitchd flushed br0 as it configured its controllers.
const FLUSH_LOGGED: &str = "flushed the bridge's flows as it configured its controllers";

/// Issue 18: ovs-vswitchd started with `other_config:flow-restore-wait=true` forwards nothing
/// and dials no controller until the key is removed. With an active target (the daemons dial
/// `unix:DIR/br0.mgmt`; br0 has no Controller row) ofnode installs its whole table on that
/// socket and only then removes the key, and nothing flushes it afterwards: the first look
/// that finds the key gone finds the whole table; the ping comes back by itself.
#[test]
fn vswitchd_started_with_flow_restore_wait_gets_the_table_then_the_key_is_cleared() {
    let ping =
        CrossNodePing::start_with_openflow(env!("CARGO_BIN_EXE_ofnode"), DaemonOpenflow::Active)
            .unwrap();
    let (cluster, pinger) = (&ping.cluster, &ping.pinger);
    let before = node_1_flows_while_pinging(&ping);
    let node = cluster.node(1);

    node.restart_vswitchd_with_flow_restore_wait().unwrap();
    // The first look that finds the key gone must find the whole table already there.
    let mut at_clear = node
        .wait_for(RECOVERY_DEADLINE, "flow-restore-wait removed", |node| {
            if node.flow_restore_wait()? {
                return Ok(None);
            }
            node.flows().map(Some)
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.diagnostics()));
    at_clear.sort();
    assert_eq!(
        at_clear, before,
        "when the key was removed the switch did not hold the node's table"
    );
    assert!(
        pinger
            .wait_reply_after(unix_now(), RECOVERY_DEADLINE)
            .is_some(),
        "no echo reply after flow-restore-wait was removed\n{}",
        cluster.diagnostics()
    );
    let status = node.status().unwrap();
    assert_eq!(status["in_sync"], true, "{status}");
    let mut after = node.flows().unwrap();
    after.sort();
    assert_eq!(after, before, "the table changed after the key was removed");
    assert!(
        !daemon_log(node).contains(FLUSH_LOGGED),
        "a bridge without a Controller row was flushed"
    );
}

/// The same restart with a passive target (br0 has a Controller row pointing at the daemon):
/// ovs-vswitchd configures that controller only once the key is gone, and a bridge that gains
/// its first controller has every flow deleted. ofnode installs its table through br0.mgmt,
/// removes the key (never left set), expects the flush and installs the table again: the
/// switch ends equal to the desired table, in sync, and the ping passes. (Which look sees the
/// flushed table is a race: not asserted; the loss it costs is measured by `make bench`.)
#[test]
fn with_a_controller_row_the_flush_at_key_removal_is_repaired_and_the_key_never_stays() {
    let ping = CrossNodePing::start(env!("CARGO_BIN_EXE_ofnode")).unwrap();
    let (cluster, pinger) = (&ping.cluster, &ping.pinger);
    let before = node_1_flows_while_pinging(&ping);
    let node = cluster.node(1);

    node.restart_vswitchd_with_flow_restore_wait().unwrap();
    node.wait_for(RECOVERY_DEADLINE, "flow-restore-wait removed", |node| {
        Ok((!node.flow_restore_wait()?).then_some(()))
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.diagnostics()));
    node.wait_for(RECOVERY_DEADLINE, "the whole table back, in sync", |node| {
        let mut flows = node.flows()?;
        flows.sort();
        Ok((flows == before && node.status()?["in_sync"] == true).then_some(()))
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.diagnostics()));
    assert!(
        pinger
            .wait_reply_after(unix_now(), RECOVERY_DEADLINE)
            .is_some(),
        "no echo reply after flow-restore-wait was removed\n{}",
        cluster.diagnostics()
    );
    assert!(
        !node.flow_restore_wait().unwrap(),
        "flow-restore-wait is set again"
    );
    let log = daemon_log(node);
    assert!(
        log.contains(FLUSH_LOGGED),
        "the flush was not expected and logged:\n{}",
        cluster.diagnostics()
    );
}

/// Node 1's table, sorted, once the ping crosses the nodes (the table a restart must bring back).
fn node_1_flows_while_pinging(ping: &CrossNodePing) -> Vec<String> {
    assert!(
        ping.replies_within(Duration::from_secs(5)),
        "no replies before the restart\n{}",
        ping.cluster.diagnostics()
    );
    let mut flows = ping.cluster.node(1).flows().unwrap();
    flows.sort();
    flows
}

fn daemon_log(node: &Node) -> String {
    let daemon = node.daemon().expect("the node runs a daemon");
    std::fs::read_to_string(&daemon.log).unwrap_or_default()
}
