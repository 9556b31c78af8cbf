//! Losing ovsdb-server: requests in flight get a typed error, nothing hangs, the client
//! reconnects by itself and rebuilds its cache from a fresh monitor.

mod ovsdb_common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ofnode::ovsdb::txn::{Condition, Operation, Until};
use ofnode::ovsdb::{ClientOptions, Datum, Error, PortSpec, Uuid};
use ofnode_harness::Ovs;
use ovsdb_common::*;

/// An upper bound for "this did not hang"; far above any normal completion.
const NO_HANG: Duration = Duration::from_secs(45);

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn restart_ovsdb(ovs: &Arc<Ovs>) {
    let ovs = ovs.clone();
    blocking(move || {
        ovs.kill_ovsdb();
        ovs.start_ovsdb(false).expect("ovsdb-server restarts");
    })
    .await;
}

async fn wait_for_generation(client: &ofnode::ovsdb::Client, generation: u64) {
    let mut status = client.watch();
    tokio::time::timeout(
        NO_HANG,
        status.wait_for(|s| s.connected && s.generation >= generation),
    )
    .await
    .expect("client reconnected")
    .unwrap();
}

/// Polls until the cache equals `ovs-vsctl list` (ovs-vswitchd may still be catching up after
/// the restart); fails with the differences if it never does.
async fn assert_cache_converges(ovs: &Arc<Ovs>, client: &ofnode::ovsdb::Client) {
    let mut differences = Vec::new();
    for _ in 0..100 {
        let (o, c) = (ovs.clone(), client.clone());
        differences = blocking(move || cache_differences(&o, &c)).await;
        if differences.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "cache differs from ovs-vsctl list:\n{}",
        differences.join("\n")
    );
}

/// A transaction that blocks in ovsdb-server until a bridge named "never" exists.
fn blocking_wait() -> Operation {
    Operation::Wait {
        table: "Bridge".into(),
        conditions: vec![Condition::eq("name", "never")],
        columns: vec!["name".into()],
        until: Until::NotEqual,
        rows: vec![],
        timeout_ms: 60_000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_in_flight_gets_disconnected_and_client_reconnects() {
    let Setup { client, ovs } = start().await;
    let ovs = Arc::new(ovs);
    assert_eq!(client.status().generation, 1);

    let in_flight = {
        let client = client.clone();
        tokio::spawn(async move { client.transact(&[blocking_wait()]).await })
    };
    // The request reached the server before it dies: the server says it holds one blocked
    // transaction (an OVSDB round trip on its control socket, not a wait that hopes so).
    let held = ovs.clone();
    let blocked = blocking(move || {
        let deadline = std::time::Instant::now() + NO_HANG;
        loop {
            let blocked = held.ovsdb_blocked_transactions().unwrap();
            if blocked > 0 || std::time::Instant::now() > deadline {
                return blocked;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
    .await;
    assert_eq!(blocked, 1, "ovsdb-server should hold the blocked wait");
    assert!(
        !in_flight.is_finished(),
        "the wait should block in ovsdb-server"
    );
    let ovs_kill = ovs.clone();
    blocking(move || ovs_kill.kill_ovsdb()).await;

    let outcome = tokio::time::timeout(NO_HANG, in_flight)
        .await
        .expect("no hang")
        .unwrap();
    assert!(
        matches!(outcome, Err(Error::Disconnected { .. })),
        "{outcome:?}"
    );

    // While the server is down: not connected, and requests fail at once with a typed error.
    let mut status = client.watch();
    tokio::time::timeout(NO_HANG, status.wait_for(|s| !s.connected))
        .await
        .unwrap()
        .unwrap();
    assert!(!client.connected());
    let down = tokio::time::timeout(NO_HANG, client.echo())
        .await
        .expect("no hang");
    assert!(matches!(down, Err(Error::Disconnected { .. })), "{down:?}");
    let down = client
        .add_port(&PortSpec {
            bridge: "br0".into(),
            name: "x".into(),
            ..PortSpec::default()
        })
        .await;
    assert!(matches!(down, Err(Error::Disconnected { .. })), "{down:?}");

    let ovs_start = ovs.clone();
    blocking(move || ovs_start.start_ovsdb(false).unwrap()).await;
    wait_for_generation(&client, 2).await;
    assert!(client.connected());
    client.echo().await.unwrap();
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    assert_cache_converges(&ovs, &client).await;
}

fn internal_port(name: &str) -> PortSpec {
    PortSpec {
        bridge: "br0".into(),
        name: name.into(),
        iface_type: Some("internal".into()),
        ..PortSpec::default()
    }
}

/// Changes the database file of a stopped ovsdb-server with `ovsdb-tool transact`: removes
/// port `gone` (row `gone_uuid`) from br0, Port and Interface rows too, and adds a bridge
/// `added`.
fn change_offline(ovs: &Ovs, gone: &str, gone_uuid: Uuid, added: &str) {
    let transaction = serde_json::json!([
        "Open_vSwitch",
        {"op": "mutate", "table": "Bridge", "where": [["name", "==", "br0"]],
         "mutations": [["ports", "delete", ["uuid", gone_uuid.to_string()]]]},
        {"op": "delete", "table": "Port", "where": [["name", "==", gone]]},
        {"op": "delete", "table": "Interface", "where": [["name", "==", gone]]},
        {"op": "insert", "table": "Bridge", "uuid-name": "added",
         "row": {"name": added, "datapath_type": "netdev"}},
        {"op": "mutate", "table": "Open_vSwitch", "where": [],
         "mutations": [["bridges", "insert", ["named-uuid", "added"]]]},
    ]);
    let output = Command::new("ovsdb-tool")
        .arg("transact")
        .arg(ovs.dir().join("conf.db"))
        .arg(transaction.to_string())
        .output()
        .expect("ovsdb-tool runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && !stdout.contains("\"error\""),
        "ovsdb-tool transact: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The database changes while the client is disconnected, so a client that kept its old cache
/// would differ from `ovs-vsctl list` afterwards: the cache must come from the new monitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_is_rebuilt_with_changes_made_while_disconnected() {
    let Setup { client, ovs } = start().await;
    let ovs = Arc::new(ovs);
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    client.add_port(&internal_port("gone0")).await.unwrap();
    client.add_port(&internal_port("kept0")).await.unwrap();
    let gone_uuid = client
        .cache_snapshot()
        .find("Port", "gone0")
        .map(|(uuid, _)| uuid)
        .expect("gone0 cached");
    assert!(client.cache_snapshot().find("Bridge", "brdown0").is_none());

    let o = ovs.clone();
    blocking(move || {
        o.kill_ovsdb();
        change_offline(&o, "gone0", gone_uuid, "brdown0");
        o.start_ovsdb(false).expect("ovsdb-server restarts");
    })
    .await;
    wait_for_generation(&client, 2).await;
    assert_cache_converges(&ovs, &client).await;

    let cache = client.cache_snapshot();
    assert!(cache.find("Bridge", "brdown0").is_some(), "added bridge");
    assert!(cache.find("Port", "gone0").is_none(), "removed port");
    assert!(
        cache.find("Interface", "gone0").is_none(),
        "removed interface"
    );
    assert!(cache.rows("Port").all(|(uuid, _)| uuid != gone_uuid));
    assert!(cache.find("Port", "kept0").is_some(), "untouched port");
    let bridges = vsctl(&ovs, &["list-br"]);
    assert_eq!(bridges.lines().collect::<Vec<_>>(), ["br0", "brdown0"]);
    assert_eq!(vsctl(&ovs, &["list-ports", "br0"]), "kept0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_during_a_stream_of_operations() {
    let Setup { client, ovs } = start().await;
    let ovs = Arc::new(ovs);
    client.ensure_bridge(&seed_bridge()).await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let stream = {
        let (client, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("s{}", i % 4);
                let op = async {
                    match i % 3 {
                        0 => client
                            .add_port(&PortSpec {
                                bridge: "br0".into(),
                                name: name.clone(),
                                iface_type: Some("internal".into()),
                                ..PortSpec::default()
                            })
                            .await
                            .map(|_| ()),
                        1 => {
                            client
                                .set_columns(
                                    "Bridge",
                                    "br0",
                                    &[("external_ids", Datum::map([("i", i.to_string())]))],
                                )
                                .await
                        }
                        _ => {
                            client
                                .delete_port("br0", &format!("s{}", (i + 2) % 4))
                                .await
                        }
                    }
                };
                let outcome = tokio::time::timeout(NO_HANG, op).await;
                if matches!(outcome, Ok(Err(_))) {
                    // As the node controller would: retry after a pause, not in a hot loop.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                outcomes.push((client.status().generation, outcome));
                i += 1;
            }
            outcomes
        })
    };

    tokio::time::sleep(Duration::from_millis(500)).await;
    restart_ovsdb(&ovs).await;
    wait_for_generation(&client, 2).await;
    // Let the stream run on the new session until several operations succeeded there.
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if stream.is_finished() {
            break;
        }
        let status = client.status();
        if status.generation >= 2 && status.connected {
            // Checked after the stream stops; give it time to do work.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let outcomes = stream.await.unwrap();

    let mut ok_before = 0;
    let mut ok_after = 0;
    let mut errors = Vec::new();
    for (generation, outcome) in &outcomes {
        match outcome {
            Err(_) => panic!("an operation hung (> {NO_HANG:?})"),
            Ok(Ok(())) if *generation >= 2 => ok_after += 1,
            Ok(Ok(())) => ok_before += 1,
            Ok(Err(err)) => errors.push(err.to_string()),
        }
    }
    for (_, outcome) in &outcomes {
        if let Ok(Err(err)) = outcome {
            assert!(
                err.is_transient(),
                "untyped failure during the restart: {err}"
            );
        }
    }
    // Robust, not timing-dependent: the stream never idles (it pauses only after an error),
    // every operation talks to the session (a request, or the wait on cur_cfg, which ends when
    // the session does), and the client stays disconnected at least until ovsdb-server is up
    // again and one backoff has passed; so the operation running at the kill, or the next one,
    // fails with Disconnected.
    assert!(
        outcomes
            .iter()
            .any(|(_, outcome)| matches!(outcome, Ok(Err(Error::Disconnected { .. })))),
        "the restart gave no operation a Disconnected error: {errors:?}"
    );
    assert!(
        ok_before > 0,
        "no operation succeeded before the restart: {errors:?}"
    );
    assert!(
        ok_after > 0,
        "no operation succeeded after reconnecting: {errors:?}"
    );
    assert_eq!(client.status().generation, 2, "exactly one reconnection");
    eprintln!(
        "stream: {ok_before} ok before the restart, {ok_after} after, {} transient errors",
        errors.len()
    );

    // One more change that waits for ovs-vswitchd, then the cache must equal the database.
    client
        .add_port(&PortSpec {
            bridge: "br0".into(),
            name: "final0".into(),
            iface_type: Some("internal".into()),
            ..PortSpec::default()
        })
        .await
        .unwrap();
    assert_cache_converges(&ovs, &client).await;
}

/// Resumes a process stopped with SIGSTOP, even when the test fails.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inactivity_probe_drops_a_silent_server() {
    let opts = ClientOptions {
        probe_interval: Some(Duration::from_millis(300)),
        // Far longer than the probe: a Disconnected (not a Timeout) shows the probe fired.
        request_timeout: Duration::from_secs(60),
        ..test_options()
    };
    let Setup { client, ovs } = start_with(opts).await;
    let pid = ovs.ovsdb_pid().expect("ovsdb-server runs");
    let stopped = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let resume = Resume(pid);

    let outcome = tokio::time::timeout(NO_HANG, client.echo())
        .await
        .expect("no hang");
    assert!(
        matches!(&outcome, Err(Error::Disconnected { reason }) if reason.contains("probe")),
        "{outcome:?}"
    );

    drop(resume);
    wait_for_generation(&client, 2).await;
    client.echo().await.unwrap();
}
