//! Destroying a QoS row races with other clients: the decision "no other port uses this QoS"
//! is made from the cache, and another client may attach the row to a port (the delete would
//! then fail referential integrity) or detach it from one (the row would leak: QoS is a root
//! table) before the transaction commits. The transaction carries a `wait` guard on the row's
//! users, so the server refuses a stale plan and the client plans again.
//!
//! To make the cache stale on purpose, the client talks to the real ovsdb-server through a
//! small proxy that holds back the server's `update` notifications while told to, and lets
//! them through just before the next reply: the same order the server keeps (updates before
//! the reply), but the client plans before it has seen the other client's change.

mod ovsdb_common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ofnode::ovsdb::{Client, ClientOptions, PortSpec, Uuid};
use ofnode_harness::Ovs;
use ovsdb_common::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

/// What the proxy shares with the test.
#[derive(Default)]
struct Hold {
    /// Keep back `update` notifications until the next reply.
    on: AtomicBool,
    /// How many notifications were kept back (the race really happened).
    held: AtomicUsize,
}

/// Forwards one client's session to ovsdb-server's unix socket. Dropping it ends the tasks.
struct Proxy {
    path: PathBuf,
    hold: Arc<Hold>,
    task: JoinHandle<()>,
}

impl Proxy {
    fn start(dir: &Path, server: PathBuf) -> Proxy {
        let path = dir.join("proxy.sock");
        let listener = UnixListener::bind(&path).expect("bind the proxy socket");
        let hold = Arc::new(Hold::default());
        let shared = hold.clone();
        let task = tokio::spawn(async move {
            // One session is all these tests make (the client does not reconnect here).
            let (client, _) = listener.accept().await.expect("client connects");
            let upstream = UnixStream::connect(&server).await.expect("ovsdb-server");
            let (mut client_rx, client_tx) = client.into_split();
            let (upstream_rx, mut upstream_tx) = upstream.into_split();
            let to_server = async move {
                tokio::io::copy(&mut client_rx, &mut upstream_tx)
                    .await
                    .map(drop)
            };
            let to_client = forward_holding(upstream_rx, client_tx, shared);
            let _ = tokio::try_join!(to_server, to_client);
        });
        Proxy { path, hold, task }
    }

    fn target(&self) -> String {
        format!("unix:{}", self.path.display())
    }

    fn hold_updates(&self) {
        self.hold.on.store(true, Ordering::SeqCst);
    }

    fn held(&self) -> usize {
        self.hold.held.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Server to client, one JSON-RPC message at a time.
async fn forward_holding(
    mut from: tokio::net::unix::OwnedReadHalf,
    mut to: OwnedWriteHalf,
    hold: Arc<Hold>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = from.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        let mut consumed = 0;
        let mut messages = serde_json::Deserializer::from_slice(&buffer).into_iter::<Value>();
        let mut complete = Vec::new();
        while let Some(message) = messages.next() {
            match message {
                Ok(message) => {
                    complete.push(message);
                    consumed = messages.byte_offset();
                }
                Err(e) if e.is_eof() => break,
                Err(e) => panic!("ovsdb-server sent something that is not JSON: {e}"),
            }
        }
        buffer.drain(..consumed);
        for message in complete {
            let bytes = serde_json::to_vec(&message).expect("re-encode");
            let holding = hold.on.load(Ordering::SeqCst);
            if holding && message["method"] == "update" {
                held.push(bytes);
                hold.held.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            // A reply (to the client's transact) has no method; notifications and requests do.
            if holding && message.get("method").is_none() {
                hold.on.store(false, Ordering::SeqCst);
                for update in held.drain(..) {
                    to.write_all(&update).await?;
                }
            }
            to.write_all(&bytes).await?;
        }
    }
}

struct Race {
    client: Client,
    proxy: Proxy,
    // Dropped last: stops the daemons and removes the namespace.
    ovs: Ovs,
}

/// br0 with internal ports p1 and p2, p1 limited by a QoS row; returns that row.
async fn setup() -> (Race, Uuid) {
    let ovs = tokio::task::spawn_blocking(|| Ovs::start().expect("private OVS starts"))
        .await
        .unwrap();
    let proxy = Proxy::start(ovs.dir(), ovs.db_sock());
    let options = ClientOptions {
        // A probe's reply would release held updates early.
        probe_interval: None,
        ..test_options()
    };
    let client = Client::connect(&proxy.target(), options)
        .await
        .expect("client connects through the proxy");
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    for name in ["p1", "p2"] {
        client
            .add_port(&PortSpec {
                bridge: "br0".into(),
                name: name.into(),
                iface_type: Some("internal".into()),
                ..PortSpec::default()
            })
            .await
            .unwrap();
    }
    client
        .set_port_qos_max_rate("p1", Some(1_000_000))
        .await
        .unwrap();
    let qos = port_qos(&client, "p1").expect("p1 has a QoS row");
    (Race { client, proxy, ovs }, qos)
}

fn port_qos(client: &Client, port: &str) -> Option<Uuid> {
    client
        .cache_snapshot()
        .find("Port", port)
        .and_then(|(_, row)| row.get("qos")?.as_uuid())
}

fn qos_rows(ovs: &Ovs) -> Vec<Uuid> {
    vsctl_rows(ovs, "QoS", None, &["type"])
        .into_keys()
        .collect()
}

/// Another client attaches p1's QoS row to p2 just before we delete p1: the row must stay
/// (p2 uses it) and the delete must succeed, not fail referential integrity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qos_attached_concurrently_is_not_destroyed_under_the_new_user() {
    let (Race { client, proxy, ovs }, qos) = setup().await;
    proxy.hold_updates();
    vsctl(
        &ovs,
        &["--no-wait", "set", "Port", "p2", &format!("qos={qos}")],
    );
    assert_eq!(port_qos(&client, "p2"), None, "the cache must be stale");

    client
        .delete_port("br0", "p1")
        .await
        .expect("delete_port plans again instead of failing");
    assert!(proxy.held() >= 1, "the attach was not held back: no race");

    assert_eq!(vsctl(&ovs, &["list-ports", "br0"]), "p2");
    assert_eq!(vsctl(&ovs, &["get", "Port", "p2", "qos"]), qos.to_string());
    assert_eq!(qos_rows(&ovs), [qos]);
    assert!(cache_differences(&ovs, &client).is_empty());
}

/// Another client detaches the shared QoS row from p2 just before we delete p1, its last
/// user: the row must be destroyed with p1, not left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qos_detached_concurrently_is_destroyed_with_its_last_user() {
    let (Race { client, proxy, ovs }, qos) = setup().await;
    vsctl(
        &ovs,
        &["--no-wait", "set", "Port", "p2", &format!("qos={qos}")],
    );
    for _ in 0..100 {
        if port_qos(&client, "p2") == Some(qos) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        port_qos(&client, "p2"),
        Some(qos),
        "the cache saw the attach"
    );

    proxy.hold_updates();
    vsctl(&ovs, &["--no-wait", "clear", "Port", "p2", "qos"]);
    assert_eq!(
        port_qos(&client, "p2"),
        Some(qos),
        "the cache must be stale"
    );

    client.delete_port("br0", "p1").await.unwrap();
    assert!(proxy.held() >= 1, "the detach was not held back: no race");

    assert_eq!(vsctl(&ovs, &["list-ports", "br0"]), "p2");
    assert_eq!(qos_rows(&ovs), Vec::<Uuid>::new(), "no orphan QoS row");
    assert!(cache_differences(&ovs, &client).is_empty());
}
