//! Drift repair against a real Open vSwitch: whatever `ovs-ofctl` changes behind the node's back
//! (del-flows, a foreign add-flow, mod-flows) is noticed through the switch's flow monitor and
//! undone, reported in status and metrics; the node's own operations are never taken for drift;
//! the monitor is renewed after ovs-vswitchd restarts.

mod sdn_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ofnode::sdn::{Detection, Mode, Node};
use sdn_common::*;

/// Only keeps a broken run from hanging; the repair itself takes a fraction of a second.
const RESTORED_WITHIN: Duration = Duration::from_secs(5);

/// Log lines of the whole test process (every thread), for a test to look for one.
#[derive(Clone, Default)]
struct GlobalLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl GlobalLogs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for GlobalLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs a process-wide subscriber (the node's tasks run on the runtime's worker threads)
/// writing into the returned buffer. Once per test binary: only one test here uses it, and its
/// assertions name what only that test does.
fn capture_global_logs() -> GlobalLogs {
    let logs = GlobalLogs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("ofnode=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
    logs
}

/// Waits until the node watches the switch through the flow monitor.
async fn wait_monitoring(node: &Node) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.status().drift.detection != Detection::FlowMonitor {
        assert!(
            Instant::now() < deadline,
            "no flow monitor: {:?}",
            node.status().drift
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A node set up in subnet mode with one pod, watched by the flow monitor.
async fn watched() -> (Fixture, Vec<String>) {
    let f = Fixture::set_up(Mode::Subnet).await;
    f.veth("vethA");
    f.node.pod_add(&pod_a(0)).await.unwrap();
    let expected = f
        .ovs
        .dump_flows("br0")
        .expect("dump-flows after the pod add");
    assert!(expected.len() > base_flows(Mode::Subnet).len());
    wait_monitoring(&f.node).await;
    (f, expected)
}

/// Waits (off the runtime's threads) until the switch holds `expected` again, and returns how
/// long that took.
async fn restored(f: &Fixture, expected: &[String]) -> Duration {
    tokio::task::block_in_place(|| f.ovs.wait_flows("br0", expected, RESTORED_WITHIN))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits until the node has recorded `n` drift repairs.
async fn wait_repairs(node: &Node, n: u64) {
    let deadline = Instant::now() + RESTORED_WITHIN;
    while node.status().drift.repairs < n {
        assert!(
            Instant::now() < deadline,
            "drift repairs: {:?}",
            node.status().drift
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The node reaches the switch through the harness's OpenFlow proxy, which shows what the
/// repair sent; ovs-ofctl changes the table behind its back on the management socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_deleted_behind_the_nodes_back_are_restored_and_reported() {
    let logs = capture_global_logs();
    let (f, proxy) = Fixture::start_through_proxy().await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    f.veth("vethA");
    f.node.pod_add(&pod_a(0)).await.unwrap();
    let expected = f.ovs.dump_flows("br0").expect("dump-flows");
    wait_monitoring(&f.node).await;
    let mark = proxy.mark();
    f.ovs
        .ofctl("del-flows", "br0", &["table=30"])
        .expect("del-flows table=30");
    let took = restored(&f, &expected).await;
    eprintln!("table 30 restored {took:?} after del-flows returned");
    wait_repairs(&f.node, 1).await;
    let table_30 = expected
        .iter()
        .filter(|l| l.starts_with("table=30,"))
        .count();

    // At the switch: the repair was one bundle holding exactly the missing flows.
    let traffic = proxy.traffic_since(mark);
    let bundles = traffic.committed_bundles();
    assert_eq!(bundles.len(), 1, "{}", traffic.describe());
    assert_eq!(bundles[0].flow_mods, table_30, "{}", traffic.describe());
    assert_eq!(traffic.loose_flow_mods(), 0);
    // And it was logged, naming what was seen and what was repaired.
    let logged = logs.text();
    assert!(
        logged.lines().any(|l| l.contains("WARN")
            && l.contains("drifted from the desired one: repaired")
            && l.contains("deleted (table 30: ")
            && l.contains("restored ")),
        "no repair log line:\n{logged}"
    );

    let drift = f.node.status().drift;
    let last = drift.last.expect("the repair is described");
    assert!(last.seen.contains("deleted (table 30: "), "{last:?}");
    assert!(
        last.repaired.starts_with("restored ") && last.repaired.contains("(table 30: "),
        "{last:?}"
    );
    assert_eq!(f.node.metrics().drift_repairs.load(Ordering::Relaxed), 1);
    let metrics = f.node.metrics().render(&f.node.status());
    assert!(
        metrics.contains("ofnode_drift_repairs_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "ofnode_drift_flows_total{{table=\"30\",kind=\"restored\"}} {table_30}"
        )),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_every_flow_gets_the_whole_table_back() {
    let (f, expected) = watched().await;
    f.ovs.ofctl("del-flows", "br0", &[]).expect("del-flows");
    let took = restored(&f, &expected).await;
    eprintln!("whole table restored {took:?} after del-flows returned");
    wait_repairs(&f.node, 1).await;
    let last = f.node.status().drift.last.expect("the repair is described");
    assert!(
        last.repaired.starts_with("re-installed the whole table"),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_flow_is_removed_and_a_modified_one_reverted() {
    let (f, expected) = watched().await;
    f.ovs
        .ofctl(
            "add-flow",
            "br0",
            &["table=30,priority=999,ip,nw_dst=192.0.2.9,actions=drop"],
        )
        .expect("add-flow");
    let took = restored(&f, &expected).await;
    eprintln!("foreign flow removed {took:?} after add-flow returned");
    wait_repairs(&f.node, 1).await;
    let last = f.node.status().drift.last.expect("the repair is described");
    assert_eq!(last.seen, "1 added (table 30: 1)");
    assert_eq!(last.repaired, "removed 1 foreign flows (table 30: 1)");

    // table=100's only flow outputs to tun0; make it drop instead.
    f.ovs
        .ofctl("mod-flows", "br0", &["table=100,actions=drop"])
        .expect("mod-flows");
    restored(&f, &expected).await;
    wait_repairs(&f.node, 2).await;
    let last = f.node.status().drift.last.expect("the repair is described");
    assert_eq!(last.seen, "1 modified (table 100: 1)");
    assert_eq!(
        last.repaired,
        "restored 1 missing or altered flows (table 100: 1)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_own_operations_are_not_drift() {
    let (f, _) = watched().await;
    for i in 0..10u8 {
        let (name, veth) = (format!("default/pod-{i}"), format!("vethP{i}"));
        f.veth(&veth);
        let ip = format!("10.128.0.{}", 20 + i);
        let mac = format!("0a:58:0a:80:00:{:02x}", 20 + i);
        f.node
            .pod_add(&pod(&name, &veth, &ip, &mac, SANDBOX, 0))
            .await
            .unwrap();
        if i % 2 == 0 {
            f.node.pod_del(&key(&name), None).await.unwrap();
        }
    }
    // The switch reported none of them as someone else's change: no comparison was made.
    assert_eq!(f.node.metrics().drift_checks.load(Ordering::Relaxed), 0);
    // A foreign change after them is the first and only drift.
    let expected = f.ovs.dump_flows("br0").expect("dump-flows");
    f.ovs
        .ofctl("del-flows", "br0", &["table=70"])
        .expect("del-flows");
    restored(&f, &expected).await;
    wait_repairs(&f.node, 1).await;
    let drift = f.node.status().drift;
    assert_eq!(drift.repairs, 1, "{drift:?}");
    assert_eq!(f.node.metrics().drift_checks.load(Ordering::Relaxed), 1);
    assert!(
        drift
            .last
            .as_ref()
            .is_some_and(|l| l.seen.contains("deleted (table 70: ")),
        "{drift:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitor_is_renewed_when_vswitchd_restarts() {
    let (f, expected) = watched().await;
    f.ovs.kill_vswitchd();
    f.ovs.start_vswitchd().expect("restart ovs-vswitchd");
    restored(&f, &expected).await;
    wait_monitoring(&f.node).await;
    let before = f.node.status().drift.repairs;
    f.ovs
        .ofctl("del-flows", "br0", &["table=0"])
        .expect("del-flows");
    restored(&f, &expected).await;
    wait_repairs(&f.node, before + 1).await;
}

/// Relays OpenFlow between the node (dialling `listen`) and br0's management socket, but
/// answers every flow monitor request itself with OFPBRC_BAD_STAT, as a switch without flow
/// monitoring would.
async fn refusing_relay(listen: tokio::net::UnixListener, switch: std::path::PathBuf) {
    use futures::{SinkExt, StreamExt};
    use ofnode::openflow::codec::OfFramer;
    use ofnode_proto::{ErrorKind, ErrorMsg, Message, MultipartRequest};
    use tokio_util::codec::{FramedRead, FramedWrite};

    loop {
        let Ok((node, _)) = listen.accept().await else {
            return;
        };
        // Before setup there is no br0: the node retries.
        let Ok(ovs) = tokio::net::UnixStream::connect(&switch).await else {
            continue;
        };
        let (node_rx, node_tx) = node.into_split();
        let (ovs_rx, ovs_tx) = ovs.into_split();
        let mut from_node = FramedRead::new(node_rx, OfFramer::default());
        let mut from_ovs = FramedRead::new(ovs_rx, OfFramer::default());
        let to_node = std::sync::Arc::new(tokio::sync::Mutex::new(FramedWrite::new(
            node_tx,
            tokio_util::codec::BytesCodec::new(),
        )));
        let mut to_ovs = FramedWrite::new(ovs_tx, tokio_util::codec::BytesCodec::new());
        let replies = to_node.clone();
        tokio::spawn(async move {
            while let Some(Ok(frame)) = from_ovs.next().await {
                if replies.lock().await.send(frame).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(Ok(frame)) = from_node.next().await {
                if let Ok((xid, Message::MultipartRequest(MultipartRequest::FlowMonitor(_)))) =
                    Message::decode(&frame)
                {
                    let refusal = Message::Error(ErrorMsg {
                        // OFPET_BAD_REQUEST / OFPBRC_BAD_STAT
                        kind: ErrorKind::Standard {
                            err_type: 1,
                            code: 2,
                        },
                        data: frame.slice(..frame.len().min(64)),
                    });
                    let bytes = refusal.to_bytes(xid).unwrap().freeze();
                    if to_node.lock().await.send(bytes).await.is_err() {
                        return;
                    }
                    continue;
                }
                if to_ovs.send(frame).await.is_err() {
                    return;
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_refusing_the_monitor_gets_periodic_comparisons() {
    let ovs = ofnode_harness::Ovs::start().expect("private OVS");
    let relay_path = ovs.dir().join("relay.sock");
    let listener = tokio::net::UnixListener::bind(&relay_path).expect("relay socket");
    // br0 appears at setup; the relay dials its management socket per connection.
    tokio::spawn(refusing_relay(listener, ovs.mgmt_sock("br0")));
    let state = tempfile::tempdir().unwrap();
    let mut cfg = node_config(&ovs, state.path());
    cfg.openflow = format!("unix:{}", relay_path.display());
    cfg.drift.poll_interval = Duration::from_millis(300);
    let node = Node::start(cfg).await.expect("start node");
    node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    let expected = base_flows(Mode::Subnet);
    tokio::task::block_in_place(|| wait_for_flows(&ovs, &expected, RESTORED_WITHIN));
    let deadline = Instant::now() + RESTORED_WITHIN;
    while node.status().drift.detection != Detection::Polling {
        assert!(Instant::now() < deadline, "{:?}", node.status().drift);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    ovs.ofctl("del-flows", "br0", &["table=30"]).unwrap();
    tokio::task::block_in_place(|| wait_for_flows(&ovs, &expected, RESTORED_WITHIN));
    wait_repairs(&node, 1).await;
    let last = node.status().drift.last.expect("the repair is described");
    assert_eq!(last.seen, "periodic comparison (no flow monitor)");
    assert!(last.repaired.contains("(table 30: "), "{last:?}");
    node.shutdown().await;
}
