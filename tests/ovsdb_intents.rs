//! An acknowledged OVSDB side effect is carried out in full: `pod del` and `pod bandwidth`
//! while the node has no OVSDB session succeed, and once it has one again the node's reconciler
//! leaves no port and no QoS row of a deleted pod, and the live pod's limits as acknowledged.
//! Against a real Open vSwitch (ovs-vsctl as the oracle).
//!
//! ovsdb-server is killed -9 and started again at once on the same database and socket, but the
//! node reaches it on a second socket the restarted server does not serve until the test adds
//! it again: the window the soak found (ovsdb-server restarted, the node not yet back
//! on it). Both cannot be down at once in a test of this: ovs-vswitchd runs its bridges only
//! while it holds its database lock, so without its own OVSDB session it answers no OpenFlow
//! request and no pod del can be carried out (it is refused and changes nothing).

mod sdn_common;

use std::time::{Duration, Instant};

use ofnode::sdn::{Mode, SetupOutcome};
use sdn_common::*;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_del_and_bandwidth_without_ovsdb_are_carried_out_when_it_is_back() {
    let node_remote = |ovs: &ofnode_harness::Ovs| ovs.dir().join("node-db.sock");
    let f = Fixture::start_with(|ovs, cfg| {
        let remote = format!("punix:{}", node_remote(ovs).display());
        ovs.add_ovsdb_remote(&remote).expect("second OVSDB socket");
        cfg.ovsdb = format!("unix:{}", node_remote(ovs).display());
    })
    .await;
    let outcome = f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    assert_eq!(outcome, SetupOutcome::Built);
    f.veth("vethA");
    f.veth("vethB");
    f.node.pod_add(&pod_a(0)).await.unwrap();
    let b = pod(
        "vethB",
        "10.128.0.6",
        "0a:58:0a:80:00:06",
        &"cd".repeat(32),
        0,
    );
    f.node.pod_add(&b).await.unwrap();
    let (va, vb) = ("vethA".parse().unwrap(), "vethB".parse().unwrap());
    f.node
        .pod_bandwidth(&va, Some(2_000_000), None)
        .await
        .unwrap();
    assert!(f.ofport("vethA").is_some() && f.ofport("vethB").is_some());

    f.ovs.kill_ovsdb();
    f.ovs
        .start_ovsdb(false)
        .expect("ovsdb-server starts again (without the node's socket)");
    f.ovs
        .wait_vswitchd_on_ovsdb()
        .expect("ovs-vswitchd back on its database");
    // ovs-vswitchd answered nothing while it had no database: the node's OpenFlow session may
    // have been dropped and made again.
    f.node.switch().wait_connected(LIMIT).await.unwrap();
    let deadline = Instant::now() + LIMIT;
    loop {
        match f.node.pod_del(&va, "10.128.0.5".parse().unwrap()).await {
            Ok(()) => break,
            // Refused while the OpenFlow session was being made again: nothing changed, the
            // caller (the CNI) tries again.
            Err(e)
                if Instant::now() < deadline
                    && (e.to_string().contains("isconnected")
                        || e.to_string().contains("was lost")) =>
            {
                f.node.switch().wait_connected(LIMIT).await.unwrap();
            }
            Err(e) => panic!("a pod del without OVSDB is acknowledged: {e}"),
        }
    }
    assert!(
        !f.node.status().ovsdb_connected,
        "the node had no OVSDB session during the pod del"
    );
    f.node
        .pod_bandwidth(&vb, Some(3_000_000), Some(1_024_000))
        .await
        .expect("a pod's limits without OVSDB are acknowledged");
    assert!(
        f.ovs
            .vsctl_no_wait(&["list-ports", "br0"])
            .unwrap()
            .lines()
            .any(|p| p == "vethA"),
        "vethA's port is still there while the node has no OVSDB session"
    );
    let remote = format!("punix:{}", node_remote(&f.ovs).display());
    f.ovs
        .add_ovsdb_remote(&remote)
        .expect("the node's OVSDB socket is served again");

    let deadline = Instant::now() + LIMIT;
    loop {
        let ports = f.ovs.vsctl_no_wait(&["list-ports", "br0"]).unwrap();
        let qos_rows = f
            .ovs
            .vsctl_no_wait(&["--columns=other_config", "list", "QoS"]);
        let policing = f
            .ovs
            .vsctl_no_wait(&["get", "Interface", "vethB", "ingress_policing_rate"]);
        let qos_b = f.ovs.vsctl_no_wait(&["get", "Port", "vethB", "qos"]);
        let done = !ports.lines().any(|p| p == "vethA")
            && ports.lines().any(|p| p == "vethB")
            && qos_rows
                .as_deref()
                .is_ok_and(|q| q.matches("max-rate").count() == 1 && q.contains("\"3000000\""))
            && policing.as_deref().is_ok_and(|p| p.trim() == "1000")
            && qos_b.is_ok_and(|q| q.trim() != "[]");
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "OVSDB never reached the acknowledged state: ports {ports:?}, QoS {qos_rows:?}, policing {policing:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let flows = f.ovs.dump_flows("br0").unwrap();
    assert!(
        !flows.iter().any(|l| l.contains("10.128.0.5"))
            && flows.iter().any(|l| l.contains("10.128.0.6")),
        "the deleted pod's flows are gone, the live pod's stay: {flows:#?}"
    );
    // The deleted pod is forgotten once OVSDB confirmed its port gone.
    let deadline = Instant::now() + LIMIT;
    while !f
        .node
        .state()
        .await
        .is_ok_and(|s| s.port_intents.keys().all(|v| v.as_str() != "vethA"))
    {
        assert!(
            Instant::now() < deadline,
            "vethA's removal was never forgotten"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
