//! An acknowledged OVSDB side effect is carried out in full: `pod del` and `pod bandwidth`
//! while ovsdb-server is down (killed -9) succeed, and once it is back the node's reconciler
//! leaves no port and no QoS row of a deleted pod, and the live pod's limits as acknowledged.
//! Against a real Open vSwitch (ovs-vsctl as the oracle).

mod sdn_common;

use std::time::{Duration, Instant};

use ofnode::sdn::Mode;
use sdn_common::*;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "unfinished: in this fixture the OpenFlow session to ovs-vswitchd drops when ovsdb-server is killed -9 and does not come back until it restarts, so the pod del is refused (changes nothing) instead of reaching the OVSDB gap; needs a fixture whose OpenFlow path survives (see the report)"]
async fn pod_del_and_bandwidth_without_ovsdb_are_carried_out_when_it_is_back() {
    let f = Fixture::set_up(Mode::Subnet).await;
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

    f.ovs.kill_ovsdb();
    // ovs-vswitchd may drop its OpenFlow connection when its database goes: let it come back.
    // An operation it refused then changed nothing; the caller (the CNI) tries again.
    let deadline = Instant::now() + LIMIT;
    loop {
        f.node.switch().wait_connected(LIMIT).await.unwrap();
        match f.node.pod_del(&va, "10.128.0.5".parse().unwrap()).await {
            Ok(()) => break,
            Err(e)
                if Instant::now() < deadline
                    && (e.to_string().contains("isconnected")
                        || e.to_string().contains("was lost")) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("a pod del without OVSDB is acknowledged: {e}"),
        }
    }
    f.node
        .pod_bandwidth(&vb, Some(3_000_000), Some(1_024_000))
        .await
        .expect("a pod's limits without OVSDB are acknowledged");
    f.ovs.start_ovsdb(false).expect("ovsdb-server starts again");

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
