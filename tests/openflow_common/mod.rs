//! Shared by the `openflow_*` integration tests: a private OVS with `br0`, a connected
//! `Switch`, flows built by hand and the text `ovs-ofctl` (the oracle) prints for them.
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ofnode::openflow::{Switch, SwitchConfig, SwitchEvent};
use ofnode_harness::Ovs;
use ofnode_proto::{
    Action, Field, FlowMod, FlowModCommand, Instruction, Match, OFPC_FRAG_NX_MATCH,
};
use tokio::sync::mpsc;

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A private OVS holding `br0` (netdev, OpenFlow13, fail-mode secure).
pub fn ovs_with_br0() -> Ovs {
    let ovs = Ovs::start().expect("start private OVS");
    ovs.add_bridge("br0").expect("add br0");
    ovs
}

/// The node's settings, with quick reconnects for tests.
pub fn config(target: &str) -> SwitchConfig {
    let mut cfg = SwitchConfig::from_target(target).expect("valid target");
    cfg.frag_mode = OFPC_FRAG_NX_MATCH;
    cfg.reconnect_backoff_min = Duration::from_millis(50);
    cfg.reconnect_backoff_max = Duration::from_millis(500);
    cfg.request_timeout = Duration::from_secs(30);
    cfg
}

/// Connects actively to br0's management socket and waits for the handshake.
pub async fn connect_br0(ovs: &Ovs) -> (Switch, mpsc::Receiver<SwitchEvent>) {
    let (switch, events) = Switch::start(config(&ovs.mgmt_target("br0")));
    switch
        .wait_connected(CONNECT_TIMEOUT)
        .await
        .expect("connect to br0");
    (switch, events)
}

/// `table=T, priority=P, reg0=A, reg1=B, actions=output:PORT`, built without the text parser.
pub fn reg_flow(table: u8, priority: u16, reg0: u64, reg1: u64, port: u32) -> FlowMod {
    let mut flow = FlowMod::new(FlowModCommand::Add);
    flow.table_id = table;
    flow.priority = priority;
    flow.match_ = Match::new()
        .with(Field::Reg(0), reg0)
        .with(Field::Reg(1), reg1);
    flow.instructions = vec![Instruction::ApplyActions(vec![Action::output(port)])];
    flow
}

/// A strict delete of exactly the flow `reg_flow` builds.
pub fn reg_flow_delete(table: u8, priority: u16, reg0: u64, reg1: u64) -> FlowMod {
    let mut flow = reg_flow(table, priority, reg0, reg1, 0);
    flow.command = FlowModCommand::DeleteStrict;
    flow.instructions.clear();
    flow
}

/// How `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` prints `reg_flow(...)` (checked by hand
/// against ovs-ofctl 3.1: table 0 is not printed, registers are hex).
pub fn reg_flow_line(table: u8, priority: u16, reg0: u64, reg1: u64, port: u32) -> String {
    let table = if table == 0 {
        String::new()
    } else {
        format!("table={table}, ")
    };
    let (reg0, reg1) = (ofctl_hex(reg0), ofctl_hex(reg1));
    format!("{table}priority={priority},reg0={reg0},reg1={reg1} actions=output:{port}")
}

/// ovs-ofctl prints register values in hex, but zero as `0`.
pub fn ofctl_hex(value: u64) -> String {
    if value == 0 {
        "0".into()
    } else {
        format!("{value:#x}")
    }
}

/// Asserts two sets of flow lines are equal, showing only the differences.
#[track_caller]
pub fn assert_same_flows(got: &[String], want: &[String]) {
    let got_set: std::collections::BTreeSet<&String> = got.iter().collect();
    let want_set: std::collections::BTreeSet<&String> = want.iter().collect();
    let missing: Vec<_> = want_set.difference(&got_set).take(10).collect();
    let extra: Vec<_> = got_set.difference(&want_set).take(10).collect();
    assert!(
        missing.is_empty() && extra.is_empty() && got.len() == want.len(),
        "flows differ: {} got, {} wanted; missing (first 10): {missing:#?}; unexpected (first 10): {extra:#?}",
        got.len(),
        want.len()
    );
}

/// br0's flows as ovs-ofctl prints them, sorted.
pub fn oracle_flows(ovs: &Ovs) -> Vec<String> {
    let mut flows = ovs.dump_flows("br0").expect("ovs-ofctl dump-flows");
    flows.sort();
    flows
}

/// br0's groups as `ovs-ofctl -O OpenFlow13 dump-groups` prints them, sorted.
pub fn oracle_groups(ovs: &Ovs) -> Vec<String> {
    let dump = ovs
        .ofctl("dump-groups", "br0", &[])
        .expect("ovs-ofctl dump-groups");
    sorted(
        dump.lines()
            .filter(|l| l.contains("group_id="))
            .map(|l| l.trim().to_string())
            .collect(),
    )
}

pub fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

/// A tracing subscriber for this test thread whose output the test can read, to check that an
/// error was logged. Returns the guard (keep it alive) and the captured text.
pub fn capture_logs() -> (tracing::subscriber::DefaultGuard, Arc<Mutex<Vec<u8>>>) {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let writer = CaptureWriter(buffer.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("ofnode=debug")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (tracing::subscriber::set_default(subscriber), buffer)
}

pub fn logged(buffer: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned()
}

#[derive(Clone)]
struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        std::io::stdout().write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Waits for the next event matching `pred`, skipping others.
pub async fn next_event(
    events: &mut mpsc::Receiver<SwitchEvent>,
    what: &str,
    pred: impl Fn(&SwitchEvent) -> bool,
) -> SwitchEvent {
    let wait = async {
        loop {
            match events.recv().await {
                Some(event) if pred(&event) => return event,
                Some(_) => continue,
                None => panic!("event channel closed while waiting for {what}"),
            }
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, wait)
        .await
        .unwrap_or_else(|_| panic!("no {what} event within {CONNECT_TIMEOUT:?}"))
}

/// A TCP listener on 127.0.0.1 (ephemeral port) inside the network namespace at `netns_path`,
/// where ovs-vswitchd runs and dials its controller. The socket is created on a short-lived
/// thread that entered the namespace; once made, it stays in that namespace whichever thread
/// uses it.
pub fn tcp_listener_in_netns(netns_path: &str) -> std::net::TcpListener {
    let path = netns_path.to_string();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns handle");
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a valid namespace fd affects only this thread, which ends below.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        std::net::TcpListener::bind("127.0.0.1:0").expect("bind in netns")
    })
    .join()
    .expect("netns thread")
}

/// A scripted peer on a unix socket: plays the switch (or a misbehaving client) in tests.
pub struct FakePeer {
    pub stream: tokio::net::UnixStream,
    buffer: bytes::BytesMut,
}

impl FakePeer {
    pub fn new(stream: tokio::net::UnixStream) -> FakePeer {
        FakePeer {
            stream,
            buffer: bytes::BytesMut::new(),
        }
    }

    pub async fn connect(path: &std::path::Path) -> FakePeer {
        FakePeer::new(
            tokio::net::UnixStream::connect(path)
                .await
                .expect("connect"),
        )
    }

    pub async fn send(&mut self, xid: u32, msg: &ofnode_proto::Message) {
        use tokio::io::AsyncWriteExt;
        self.stream
            .write_all(&msg.to_bytes(xid).unwrap())
            .await
            .expect("send");
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stream.write_all(bytes).await.expect("send raw");
    }

    /// The next whole message, or `None` when the other side closed the connection.
    pub async fn recv(&mut self) -> Option<(u32, ofnode_proto::Message)> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(len) = ofnode_proto::message_length(&self.buffer) {
                if self.buffer.len() >= len {
                    let frame = self.buffer.split_to(len);
                    return Some(ofnode_proto::Message::decode(&frame).expect("valid message"));
                }
            }
            match self.stream.read_buf(&mut self.buffer).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Reads until the other side closes (bounded by CONNECT_TIMEOUT): proves we were dropped.
    pub async fn expect_closed(&mut self) {
        let closed = async { while self.recv().await.is_some() {} };
        tokio::time::timeout(CONNECT_TIMEOUT, closed)
            .await
            .expect("the peer is disconnected");
    }

    /// Answers ofnode's handshake as a switch with this datapath id would.
    pub async fn act_as_switch(&mut self, datapath_id: u64) {
        use ofnode_proto::{Hello, Message, SwitchFeatures};
        let (_, hello) = self.recv().await.expect("HELLO from ofnode");
        assert!(matches!(hello, Message::Hello(_)), "{hello:?}");
        self.send(1, &Message::Hello(Hello::default())).await;
        let mut config = None;
        loop {
            let (xid, msg) = self.recv().await.expect("handshake request");
            match msg {
                Message::FeaturesRequest => {
                    let features = SwitchFeatures {
                        datapath_id,
                        n_tables: 254,
                        ..SwitchFeatures::default()
                    };
                    self.send(xid, &Message::FeaturesReply(features)).await;
                }
                Message::SetConfig(wanted) => config = Some(wanted),
                Message::GetConfigRequest => {
                    let reply = config.expect("SET_CONFIG before GET_CONFIG");
                    self.send(xid, &Message::GetConfigReply(reply)).await;
                    return;
                }
                other => panic!("unexpected handshake message {other:?}"),
            }
        }
    }
}

/// Waits (without blocking the runtime) until `path` exists.
pub async fn wait_for_path(path: &std::path::Path) {
    let wait = async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, wait)
        .await
        .unwrap_or_else(|_| panic!("{} did not appear", path.display()));
}

/// A private OVS with br0, a fault-injecting proxy in front of its management socket, and a
/// `Switch` connected through the proxy (no keepalive probes unless `tune` sets them: they would
/// mix with what a test counts). Bind `ovs` when destructuring (`ovs: _ovs`): a field left to
/// `..` is dropped at once, and the switch with it.
pub struct Proxied {
    pub switch: Switch,
    pub events: mpsc::Receiver<SwitchEvent>,
    pub proxy: ofnode_harness::OfProxy,
    pub ovs: Ovs,
}

pub async fn proxied_br0(tune: impl FnOnce(&mut SwitchConfig)) -> Proxied {
    let ovs = ovs_with_br0();
    let proxy = ofnode_harness::OfProxy::in_front_of(&ovs, "br0").expect("start the proxy");
    let mut cfg = config(&proxy.target());
    cfg.echo_interval = Duration::from_secs(24 * 3600);
    tune(&mut cfg);
    let (switch, events) = Switch::start(cfg);
    switch
        .wait_connected(CONNECT_TIMEOUT)
        .await
        .expect("connect to br0 through the proxy");
    Proxied {
        switch,
        events,
        proxy,
        ovs,
    }
}

/// Polls `ready` (every 10 ms, without blocking the runtime) until it holds; panics naming
/// `what` after CONNECT_TIMEOUT.
pub async fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let wait = async {
        while !ready() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, wait)
        .await
        .unwrap_or_else(|_| panic!("no {what} within {CONNECT_TIMEOUT:?}"));
}
