//! Issue 26: on an Open vSwitch with the stale-megaflow bug (this machine's 3.1.0 on the
//! userspace datapath), every bundle the node commits is followed by one purge of the
//! datapath's cached flows before the operation is answered, whatever committed it (setup, an
//! operation's batch, a forced resync); none when the config turns it off; and a purge that
//! fails is counted and shown, while the change stands. `netpol_e2e_megaflows` shows what the
//! purge is for.

mod sdn_common;

use ofnode::sdn::{Mode, Node, StaleMegaflowStatus};
use ofnode::unixctl::VswitchdCtl;
use sdn_common::*;

fn purges(node: &Node) -> StaleMegaflowStatus {
    node.status()
        .stale_megaflows
        .expect("the status names the stale-megaflow verdict")
}

/// Whether this machine's Open vSwitch has the bug (the verdict the daemon gives).
fn affected(node: &Node) -> bool {
    !node.status().warnings.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bundle_is_followed_by_one_purge_before_the_answer() {
    let f = Fixture::start().await;
    let node = &f.node;
    let expected = u64::from(affected(node));
    let mut seen = purges(node).purges;
    // Right after each answer (no wait): the purge came before it.
    let mut one_more = |what: &str| {
        let now = purges(node);
        assert_eq!(now.purges, seen + expected, "{what}: {now:?}");
        assert_eq!(now.purge_errors, 0, "{what}: {now:?}");
        seen = now.purges;
    };
    node.setup(&setup_request(Mode::Multitenant)).await.unwrap();
    one_more("setup (the whole table)");
    f.veth("vethA");
    node.pod_add(&pod_a(0)).await.unwrap();
    one_more("pod add (a batch)");
    node.resync(true).await.unwrap();
    one_more("forced resync (the whole table again)");
    node.pod_del(&key(POD_A), None).await.unwrap();
    one_more("pod del (a batch)");
    // No bundle, no purge.
    node.resync(false).await.unwrap();
    assert_eq!(purges(node).purges, seen, "a resync that changed nothing");
    if expected == 1 {
        let status = purges(node);
        assert!(status.mitigation.starts_with("on:"), "{status:?}");
        assert!(status.purge_time_total_ms > 0.0, "{status:?}");
        assert!(status.last_purge_ms.is_some(), "{status:?}");
        let metrics = node.metrics().render(&node.status());
        let line = format!("ofnode_stale_megaflow_purges_total {}\n", status.purges);
        assert!(metrics.contains(&line), "{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_nothing_is_purged() {
    let f = Fixture::start_with(|_, cfg| cfg.stale_megaflow_purge = false).await;
    let node = &f.node;
    node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    f.veth("vethA");
    node.pod_add(&pod_a(0)).await.unwrap();
    let status = purges(node);
    assert_eq!((status.purges, status.purge_errors), (0, 0), "{status:?}");
    assert!(status.mitigation.starts_with("off"), "{status:?}");
    if affected(node) {
        let warning = &node.status().warnings[0];
        assert!(
            warning.contains("stale_megaflow_purge = false"),
            "{warning}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_purge_is_counted_and_shown_and_the_change_stands() {
    let f = Fixture::start_with(|ovs, cfg| {
        let gone = ovs.dir().join("no-such-vswitchd.ctl");
        cfg.vswitchd_ctl = VswitchdCtl::new(Some(gone.display().to_string()), "");
    })
    .await;
    let node = &f.node;
    if !affected(node) {
        return;
    }
    node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    f.veth("vethA");
    let ofport = node.pod_add(&pod_a(0)).await.expect("the change stands");
    let pod: Vec<String> = pod_a_flows(ofport, "0");
    let pod: Vec<&str> = pod.iter().map(String::as_str).collect();
    assert_flows(&f.ovs, &with(&base_flows(Mode::Subnet), &pod));
    let status = purges(node);
    assert!(status.purges == 0 && status.purge_errors >= 2, "{status:?}");
    let error = status.last_purge_error.expect("the last failure");
    assert!(error.contains("no-such-vswitchd.ctl"), "{error}");
    let metrics = node.metrics().render(&node.status());
    let line = format!(
        "ofnode_stale_megaflow_purge_errors_total {}\n",
        status.purge_errors
    );
    assert!(metrics.contains(&line), "{metrics}");
}
