//! A scripted ovsdb-server on a unix socket in a temporary directory, for unit tests of what
//! sits on the client (no root, no Open vSwitch). The test plays the server: it reads the
//! client's requests and writes the replies and monitor updates it wants the client to see.

use std::time::Duration;

use bytes::BytesMut;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::codec::{Decoder, Message};
use super::{Client, ClientOptions};

/// The UUID of the one Open_vSwitch row the fake's database holds.
pub(crate) const OVS_ROW: &str = "00000000-0000-4000-8000-000000000001";

/// Long enough for any step of a test on a loaded machine; a hang fails instead of blocking.
pub(crate) const NO_HANG: Duration = Duration::from_secs(20);

/// The part of the Open_vSwitch schema the fake serves: enough for the cache, `cur_cfg` and
/// `next_cfg`, and a map column (whose empty value differs from a set's).
pub(crate) fn schema() -> Value {
    json!({"name": "Open_vSwitch", "version": "8.3.1", "tables": {
        "Open_vSwitch": {"columns": {
            "cur_cfg": {"type": "integer"},
            "next_cfg": {"type": "integer"},
        }},
        "Bridge": {"columns": {
            "name": {"type": "string"},
            "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
            "fail_mode": {"type": {"key": "string", "min": 0, "max": 1}},
        }},
    }})
}

pub(crate) struct FakeServer {
    _dir: tempfile::TempDir,
    listener: UnixListener,
    pub(crate) target: String,
}

/// The server's side of one client session.
pub(crate) struct Peer {
    stream: UnixStream,
    buf: BytesMut,
    decoder: Decoder,
}

/// Test options: short timeouts, no probe (the test decides what the server says).
pub(crate) fn options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(10),
        probe_interval: None,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        reconfigure_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    }
}

impl FakeServer {
    pub(crate) fn bind() -> FakeServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("db.sock");
        let listener = UnixListener::bind(&path).expect("binding the fake server's socket");
        let target = format!("unix:{}", path.display());
        FakeServer {
            _dir: dir,
            listener,
            target,
        }
    }

    /// A client with `opts` connected to this server, its cache loaded with `cur_cfg` as the
    /// Open_vSwitch row's, and the server's side of the session.
    pub(crate) async fn connect(&self, opts: ClientOptions, cur_cfg: i64) -> (Client, Peer) {
        let (client, peer) = tokio::join!(
            async { Client::connect(&self.target, opts).await },
            self.accept(cur_cfg)
        );
        (client.expect("the client connects to the fake"), peer)
    }

    /// Accepts a client and answers its get_schema and monitor.
    pub(crate) async fn accept(&self, cur_cfg: i64) -> Peer {
        let (stream, _) = self.listener.accept().await.expect("accepting the client");
        let mut peer = Peer {
            stream,
            buf: BytesMut::new(),
            decoder: Decoder::default(),
        };
        let (schema_id, _) = peer.request("get_schema").await;
        let (monitor_id, _) = peer.request("monitor").await;
        let initial = json!({"Open_vSwitch": {OVS_ROW: {"new": {"cur_cfg": cur_cfg}}}});
        peer.reply(schema_id, schema()).await;
        peer.reply(monitor_id, initial).await;
        peer
    }
}

impl Peer {
    /// The client's next message.
    pub(crate) async fn next(&mut self) -> Message {
        let read = async {
            loop {
                if let Some(message) = self.decoder.decode(&mut self.buf).expect("valid JSON-RPC") {
                    return message;
                }
                let n = self.stream.read_buf(&mut self.buf).await.expect("reading");
                assert!(n > 0, "the client closed the connection");
            }
        };
        tokio::time::timeout(NO_HANG, read)
            .await
            .expect("the client sends a message")
    }

    /// The client's next message, which must be a `method` request: its id and params.
    pub(crate) async fn request(&mut self, method: &str) -> (Value, Value) {
        match self.next().await {
            Message::Request {
                id,
                method: m,
                params,
            } if m == method => (id, params),
            other => panic!("expected a {method} request, got {other:?}"),
        }
    }

    pub(crate) async fn send(&mut self, message: Message) {
        let mut out = Vec::new();
        message.encode(&mut out);
        self.stream.write_all(&out).await.expect("writing");
    }

    pub(crate) async fn reply(&mut self, id: Value, result: Value) {
        self.send(Message::Response {
            id,
            result,
            error: Value::Null,
        })
        .await;
    }

    /// A monitor update of the Open_vSwitch row's `cur_cfg`.
    pub(crate) async fn set_cur_cfg(&mut self, cur_cfg: i64) {
        self.send(Message::Notification {
            method: "update".into(),
            params: json!(["ofnode", {"Open_vSwitch": {OVS_ROW: {"new": {"cur_cfg": cur_cfg}}}}]),
        })
        .await;
    }

    /// Answers every further request with an error (echo with its params), until the client
    /// goes: a server that takes no part in the test.
    pub(crate) async fn refuse_the_rest(mut self) {
        loop {
            let mut read = [0u8; 4096];
            let message = match self.decoder.decode(&mut self.buf) {
                Ok(Some(message)) => message,
                Ok(None) => match self.stream.read(&mut read).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        self.buf.extend_from_slice(&read[..n]);
                        continue;
                    }
                },
                Err(_) => return,
            };
            if let Message::Request { id, method, params } = message {
                let (result, error) = match method.as_str() {
                    "echo" => (params, Value::Null),
                    _ => (Value::Null, json!({"error": "not supported by the fake"})),
                };
                self.send(Message::Response { id, result, error }).await;
            }
        }
    }
}
