//! The client against a scripted server on a unix socket: the server's `echo` is answered,
//! replies split into single bytes or packed several to a write are decoded, and a server that
//! speaks garbage is dropped with a typed error. (ovsdb-server never probes unix-socket clients,
//! so the real server cannot show the echo.)

use std::time::Duration;

use bytes::BytesMut;
use ofnode::ovsdb::codec::{Decoder, Message};
use ofnode::ovsdb::{Client, ClientOptions, Error};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

const NO_HANG: Duration = Duration::from_secs(20);

struct Peer {
    stream: UnixStream,
    buf: BytesMut,
    decoder: Decoder,
}

impl Peer {
    async fn next(&mut self) -> Message {
        loop {
            if let Some(message) = self.decoder.decode(&mut self.buf).unwrap() {
                return message;
            }
            let n = self.stream.read_buf(&mut self.buf).await.unwrap();
            assert!(n > 0, "client closed the connection");
        }
    }

    async fn next_request(&mut self, method: &str) -> Value {
        match self.next().await {
            Message::Request { id, method: m, .. } if m == method => id,
            other => panic!("expected a {method} request, got {other:?}"),
        }
    }
}

fn bytes_of(messages: &[Message]) -> Vec<u8> {
    let mut out = Vec::new();
    for message in messages {
        message.encode(&mut out);
    }
    out
}

fn reply(id: Value, result: Value) -> Message {
    Message::Response {
        id,
        result,
        error: Value::Null,
    }
}

const OVS_ROW: &str = "00000000-0000-4000-8000-000000000001";

/// Accepts the client and answers get_schema and monitor, plus an echo request, one byte per
/// write: every read the client makes holds a fragment.
async fn accept_and_start(listener: &UnixListener) -> Peer {
    let (stream, _) = listener.accept().await.unwrap();
    let mut peer = Peer {
        stream,
        buf: BytesMut::new(),
        decoder: Decoder::default(),
    };
    let schema_id = peer.next_request("get_schema").await;
    let monitor_id = peer.next_request("monitor").await;
    let schema = json!({"name": "Open_vSwitch", "version": "8.3.1", "tables": {
        "Open_vSwitch": {"columns": {"cur_cfg": {"type": "integer"}}}}});
    let initial = json!({"Open_vSwitch": {OVS_ROW: {"new": {"cur_cfg": 7}}}});
    let out = bytes_of(&[reply(schema_id, schema), reply(monitor_id, initial)]);
    for byte in out {
        peer.stream.write_all(&[byte]).await.unwrap();
        peer.stream.flush().await.unwrap();
    }
    peer
}

/// A fake ovsdb-server's socket in a temporary directory.
struct FakeServer {
    _dir: tempfile::TempDir,
    listener: UnixListener,
    target: String,
}

impl FakeServer {
    fn bind() -> FakeServer {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let target = format!("unix:{}", path.display());
        FakeServer {
            _dir: dir,
            listener,
            target,
        }
    }

    /// A client with `opts` connected to this server, and the server's side of the session
    /// (schema and monitor already answered).
    async fn connect(&self, opts: ClientOptions) -> (Client, Peer) {
        tokio::join!(
            async { Client::connect(&self.target, opts).await.unwrap() },
            accept_and_start(&self.listener)
        )
    }

    /// Accepts the client coming back on its own after losing its first session, and checks
    /// it is up again as the second session (a fresh monitor).
    async fn accept_reconnection(&self, client: &Client) -> Peer {
        let peer = tokio::time::timeout(NO_HANG, accept_and_start(&self.listener))
            .await
            .unwrap();
        client.wait_connected(NO_HANG).await.unwrap();
        assert_eq!(client.status().generation, 2);
        peer
    }
}

fn options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(10),
        probe_interval: None,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn echo_is_answered_and_packed_replies_are_split() {
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(options()).await;
    assert_eq!(client.with_cache(|cache| cache.cur_cfg()), Some(7));

    // The server's echo comes back with the same id and params.
    let echo = Message::Request {
        id: json!("echo"),
        method: "echo".into(),
        params: json!(["ping", 1]),
    };
    peer.stream.write_all(&bytes_of(&[echo])).await.unwrap();
    match tokio::time::timeout(NO_HANG, peer.next()).await.unwrap() {
        Message::Response { id, result, error } => {
            assert_eq!(id, json!("echo"));
            assert_eq!(result, json!(["ping", 1]));
            assert!(error.is_null());
        }
        other => panic!("expected the echo reply, got {other:?}"),
    }

    // Two requests in flight; the server answers both, plus a monitor update, in one write.
    let (a, b) = (client.clone(), client.clone());
    let first = tokio::spawn(async move { a.call("list_dbs", json!([])).await });
    let second = tokio::spawn(async move { b.call("list_dbs", json!([])).await });
    let id1 = peer.next_request("list_dbs").await;
    let id2 = peer.next_request("list_dbs").await;
    let update = Message::Notification {
        method: "update".into(),
        params: json!(["ofnode", {"Open_vSwitch": {OVS_ROW: {"new": {"cur_cfg": 8}}}}]),
    };
    let packed = bytes_of(&[
        update,
        reply(id2, json!(["second"])),
        reply(id1, json!(["first"])),
    ]);
    peer.stream.write_all(&packed).await.unwrap();
    assert_eq!(first.await.unwrap().unwrap(), json!(["first"]));
    assert_eq!(second.await.unwrap().unwrap(), json!(["second"]));
    assert_eq!(client.with_cache(|cache| cache.cur_cfg()), Some(8));

    // A server error reply keeps its words.
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.call("transact", json!(["Open_vSwitch"])).await })
    };
    let id = peer.next_request("transact").await;
    let error = Message::Response {
        id,
        result: Value::Null,
        error: json!({"error": "permission error", "details": "not allowed"}),
    };
    peer.stream.write_all(&bytes_of(&[error])).await.unwrap();
    match call.await.unwrap() {
        Err(Error::Server { error, details, .. }) => {
            assert_eq!(
                (error.as_str(), details.as_str()),
                ("permission error", "not allowed")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn garbage_drops_the_session_and_the_client_reconnects() {
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(options()).await;
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.echo().await })
    };
    peer.next_request("echo").await;
    peer.stream.write_all(b"{\"id\": 1, ]").await.unwrap();
    let outcome = tokio::time::timeout(NO_HANG, call).await.unwrap().unwrap();
    match outcome {
        Err(Error::Disconnected { reason }) => assert!(reason.contains("invalid JSON"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // The client comes back on its own, with a fresh monitor.
    let _peer = server.accept_reconnection(&client).await;
}

#[tokio::test]
async fn at_most_max_pending_requests_are_in_flight() {
    let opts = ClientOptions {
        max_pending: 3,
        ..options()
    };
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(opts).await;
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.call("list_dbs", json!([])).await })
        })
        .collect();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(peer.next_request("list_dbs").await);
    }
    // Three in flight, three queued: nothing more reaches the server until a reply frees a slot.
    let fourth = tokio::time::timeout(Duration::from_millis(300), peer.next()).await;
    assert!(fourth.is_err(), "a 4th request was sent: {fourth:?}");
    for _ in 0..3 {
        let id = ids.remove(0);
        peer.stream
            .write_all(&bytes_of(&[reply(id, json!(["db"]))]))
            .await
            .unwrap();
        ids.push(peer.next_request("list_dbs").await);
    }
    for id in ids {
        peer.stream
            .write_all(&bytes_of(&[reply(id, json!(["db"]))]))
            .await
            .unwrap();
    }
    for call in calls {
        let outcome = tokio::time::timeout(NO_HANG, call).await.unwrap().unwrap();
        assert_eq!(outcome.unwrap(), json!(["db"]));
    }
}

#[tokio::test]
async fn a_message_over_the_size_limit_drops_the_session_and_the_client_reconnects() {
    let opts = ClientOptions {
        max_message_size: 4096,
        ..options()
    };
    let server = FakeServer::bind();
    let (client, mut peer) = server.connect(opts).await;
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.echo().await })
    };
    let id = peer.next_request("echo").await;
    let huge = reply(id, json!(["x".repeat(8192)]));
    peer.stream.write_all(&bytes_of(&[huge])).await.unwrap();
    match tokio::time::timeout(NO_HANG, call).await.unwrap().unwrap() {
        Err(Error::Disconnected { reason }) => {
            assert!(reason.contains("4096-byte limit"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let _peer = server.accept_reconnection(&client).await;
}
