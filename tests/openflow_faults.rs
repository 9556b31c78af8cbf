//! Fault injection with a scripted switch (`FakePeer` from openflow_common): it answers with
//! errors, answers late, drops the connection in the middle of a bundle, interleaves multipart
//! parts with other replies, sends unsolicited messages of every type, and leaves requests
//! unanswered. ofnode returns typed errors, never hangs, and keeps the session wherever the
//! protocol allows. Most tests run on a paused clock: "nothing more happened" is decided when
//! every task is blocked, not after a wall-clock delay.

mod openflow_common;

use std::time::Duration;

use bytes::Bytes;
use ofnode::openflow::{Error, Switch, SwitchConfig, SwitchEvent};
use ofnode_proto::{
    BundleControl, BundleCtrlType, BundleFlags, ErrorKind, ErrorMsg, Match, Message,
    MultipartReply, MultipartReplyBody, MultipartRequest, PacketIn, Port, PortStatus, Role,
    RoleMsg, SwitchFeatures,
};
use openflow_common::*;
use tokio::net::UnixListener;
use tokio::sync::mpsc;

/// A request must end (with a result or an error) within this; longer means it hung.
const HANG_GUARD: Duration = Duration::from_secs(60);
const DPID: u64 = 0x0f;

struct Bench {
    switch: Switch,
    events: mpsc::Receiver<SwitchEvent>,
    peer: FakePeer,
    listener: UnixListener,
    _dir: tempfile::TempDir,
}

/// A `Switch` dialling a fake switch that has answered its handshake. No keepalive probes
/// (they would interleave with the scripted exchange).
async fn bench(tune: impl FnOnce(&mut SwitchConfig)) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.mgmt");
    let listener = UnixListener::bind(&path).unwrap();
    let mut cfg = config(&format!("unix:{}", path.display()));
    cfg.echo_interval = Duration::from_secs(24 * 3600);
    tune(&mut cfg);
    let (switch, events) = Switch::start(cfg);
    let mut peer = FakePeer::new(listener.accept().await.unwrap().0);
    peer.act_as_switch(DPID).await;
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    Bench {
        switch,
        events,
        peer,
        listener,
        _dir: dir,
    }
}

fn spawn_barrier(switch: &Switch) -> tokio::task::JoinHandle<Result<(), Error>> {
    let switch = switch.clone();
    tokio::spawn(async move { switch.barrier().await })
}

fn spawn_commit(switch: &Switch, flows: u64) -> tokio::task::JoinHandle<Result<(), Error>> {
    let mut tx = switch.transaction();
    for n in 0..flows {
        tx.add(reg_flow(0, 100, n, 0, 1));
    }
    tokio::spawn(tx.commit())
}

async fn finish<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(HANG_GUARD, task)
        .await
        .expect("the request hung")
        .expect("task")
}

fn control(bundle: &BundleControl, ctrl_type: BundleCtrlType) -> Message {
    Message::BundleControl(BundleControl {
        ctrl_type,
        ..bundle.clone()
    })
}

/// Reads one bundle (open, adds, barrier) and returns the open request, the add xids and the
/// barrier xid.
async fn read_bundle(peer: &mut FakePeer) -> ((u32, BundleControl), Vec<u32>, u32) {
    let (open_xid, open) = peer.recv().await.expect("bundle open");
    let Message::BundleControl(open) = open else {
        panic!("expected a bundle open, got {open:?}")
    };
    assert_eq!(open.ctrl_type, BundleCtrlType::OpenRequest);
    let mut adds = Vec::new();
    loop {
        match peer.recv().await.expect("bundle message") {
            (xid, Message::BundleAdd(_)) => adds.push(xid),
            (xid, Message::BarrierRequest) => return ((open_xid, open), adds, xid),
            (_, other) => panic!("unexpected {other:?} in a bundle"),
        }
    }
}

/// Plays OVS for a bundle that goes through: open reply, barrier reply, commit reply.
async fn answer_bundle_cleanly(peer: &mut FakePeer) {
    let ((open_xid, open), _, barrier) = read_bundle(peer).await;
    peer.send(open_xid, &control(&open, BundleCtrlType::OpenReply))
        .await;
    peer.send(barrier, &Message::BarrierReply).await;
    let (commit_xid, commit) = peer.recv().await.expect("commit");
    assert_eq!(commit, control(&open, BundleCtrlType::CommitRequest));
    peer.send(commit_xid, &control(&open, BundleCtrlType::CommitReply))
        .await;
}

/// Answers the next request, which must be a barrier.
async fn answer_barrier(peer: &mut FakePeer) {
    let (xid, msg) = peer.recv().await.expect("barrier");
    assert_eq!(msg, Message::BarrierRequest);
    peer.send(xid, &Message::BarrierReply).await;
}

#[tokio::test(start_paused = true)]
async fn a_flow_refused_in_a_bundle_fails_the_commit_typed_and_the_bundle_is_discarded() {
    let Bench {
        switch, mut peer, ..
    } = bench(|_| {}).await;
    let commit = spawn_commit(&switch, 3);
    let ((open_xid, open), adds, barrier) = read_bundle(&mut peer).await;
    peer.send(open_xid, &control(&open, BundleCtrlType::OpenReply))
        .await;
    // OFPET_BAD_MATCH / OFPBMC_BAD_FIELD for the second flow.
    let refused = ErrorMsg {
        kind: ErrorKind::Standard {
            err_type: 4,
            code: 6,
        },
        data: Bytes::new(),
    };
    peer.send(adds[1], &Message::Error(refused.clone())).await;
    peer.send(barrier, &Message::BarrierReply).await;
    let (discard_xid, discard) = peer.recv().await.expect("discard");
    assert_eq!(discard, control(&open, BundleCtrlType::DiscardRequest));
    peer.send(discard_xid, &control(&open, BundleCtrlType::DiscardReply))
        .await;
    match finish(commit).await {
        Err(Error::Switch {
            flow: Some(flow),
            error,
        }) => {
            assert_eq!(error, refused);
            assert!(flow.contains("reg0=0x1"), "names the second flow: {flow}");
        }
        other => panic!("expected the switch's error, got {other:?}"),
    }
    // The session is intact.
    let barrier = spawn_barrier(&switch);
    answer_barrier(&mut peer).await;
    finish(barrier).await.unwrap();
    assert!(switch.is_connected());
}

#[tokio::test(start_paused = true)]
async fn a_connection_dropped_mid_bundle_fails_the_commit_and_the_next_one_succeeds() {
    // `_dir` holds the socket path ofnode redials.
    let Bench {
        switch,
        peer,
        listener,
        _dir,
        ..
    } = bench(|_| {}).await;
    let commit = spawn_commit(&switch, 2);
    let mut peer = peer;
    let ((open_xid, open), _, _) = read_bundle(&mut peer).await;
    peer.send(open_xid, &control(&open, BundleCtrlType::OpenReply))
        .await;
    drop(peer);
    let outcome = finish(commit).await;
    assert!(matches!(outcome, Err(Error::Disconnected)), "{outcome:?}");

    // ofnode dials again; the next transaction goes through on the new session.
    let mut peer = FakePeer::new(listener.accept().await.unwrap().0);
    peer.act_as_switch(DPID).await;
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    let commit = spawn_commit(&switch, 2);
    answer_bundle_cleanly(&mut peer).await;
    finish(commit).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reply_later_than_the_request_timeout_is_a_timeout_and_the_session_stays() {
    let Bench {
        switch, mut peer, ..
    } = bench(|cfg| cfg.request_timeout = Duration::from_secs(5)).await;
    let late = spawn_barrier(&switch);
    let (late_xid, msg) = peer.recv().await.expect("barrier");
    assert_eq!(msg, Message::BarrierRequest);
    // No answer: the caller gets a typed timeout (the paused clock runs ahead).
    match finish(late).await {
        Err(Error::Timeout { what, after }) => {
            assert_eq!(after, Duration::from_secs(5));
            assert!(!what.is_empty());
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The reply arriving now is ignored; the next request is answered normally.
    peer.send(late_xid, &Message::BarrierReply).await;
    let next = spawn_barrier(&switch);
    answer_barrier(&mut peer).await;
    finish(next).await.unwrap();
    assert!(switch.is_connected());
}

fn port(port_no: u32) -> Port {
    Port {
        port_no,
        name: format!("p{port_no}"),
        ..Port::default()
    }
}

#[tokio::test(start_paused = true)]
async fn multipart_parts_interleaved_with_other_replies_are_reassembled() {
    let Bench {
        switch, mut peer, ..
    } = bench(|_| {}).await;
    let dump = {
        let switch = switch.clone();
        tokio::spawn(async move { switch.multipart(MultipartRequest::PortDesc).await })
    };
    let (dump_xid, msg) = peer.recv().await.expect("port-desc request");
    assert!(matches!(msg, Message::MultipartRequest(_)), "{msg:?}");
    let barrier = spawn_barrier(&switch);
    let (barrier_xid, msg) = peer.recv().await.expect("barrier");
    assert_eq!(msg, Message::BarrierRequest);
    let part = |more: bool, ports: Vec<Port>| {
        Message::MultipartReply(MultipartReply {
            flags: u16::from(more),
            body: MultipartReplyBody::PortDesc(ports),
        })
    };
    // First part, then the barrier's reply, then the last part: out of request order.
    peer.send(dump_xid, &part(true, vec![port(1), port(2)]))
        .await;
    peer.send(barrier_xid, &Message::BarrierReply).await;
    peer.send(dump_xid, &part(false, vec![port(3)])).await;
    finish(barrier).await.unwrap();
    let bodies = finish(dump).await.unwrap();
    let ports: Vec<u32> = bodies
        .iter()
        .flat_map(|body| match body {
            MultipartReplyBody::PortDesc(ports) => {
                ports.iter().map(|p| p.port_no).collect::<Vec<u32>>()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ports, vec![1, 2, 3]);
}

/// Every message OVS 3.1 sent in the captured seeds, as if unsolicited: replies to nothing,
/// asynchronous messages, requests a switch never sends. Xids are ones ofnode never used.
fn every_message_type() -> Vec<Message> {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/decode_message");
    let mut files: Vec<_> = std::fs::read_dir(&seeds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut messages: Vec<Message> = files
        .iter()
        .filter_map(|file| Message::decode(&std::fs::read(file).unwrap()).ok())
        .map(|(_, msg)| msg)
        .collect();
    messages.extend([
        Message::Hello(Default::default()),
        Message::Error(ErrorMsg {
            kind: ErrorKind::Standard {
                err_type: 1,
                code: 1,
            },
            data: Bytes::new(),
        }),
        Message::EchoReply(Bytes::new()),
        Message::FeaturesReply(SwitchFeatures::default()),
        Message::GetConfigReply(ofnode_proto::SwitchConfig {
            flags: 0,
            miss_send_len: 128,
        }),
        Message::PortStatus(PortStatus {
            reason: 0,
            port: port(9),
        }),
        Message::PacketIn(PacketIn {
            buffer_id: u32::MAX,
            total_len: 4,
            reason: 1,
            table_id: 0,
            cookie: 0,
            match_: Match::new(),
            data: Bytes::from_static(b"\0\0\0\0"),
        }),
        Message::MultipartReply(MultipartReply {
            flags: 0,
            body: MultipartReplyBody::PortDesc(vec![port(1)]),
        }),
        Message::RoleReply(RoleMsg {
            role: Role::Master,
            generation_id: 1,
        }),
        Message::BundleControl(BundleControl {
            bundle_id: 77,
            ctrl_type: BundleCtrlType::CommitReply,
            flags: BundleFlags::ATOMIC,
            properties: Bytes::new(),
        }),
        Message::BarrierReply,
        Message::FeaturesRequest,
        Message::GetConfigRequest,
        Message::BarrierRequest,
        Message::Experimenter {
            experimenter: 0x2320,
            exp_type: 99,
            data: Bytes::from_static(b"?"),
        },
        Message::Unknown {
            msg_type: 99,
            body: Bytes::from_static(b"unknown"),
        },
    ]);
    messages
}

#[tokio::test(start_paused = true)]
async fn unsolicited_messages_of_every_type_leave_the_session_up() {
    let Bench {
        switch,
        mut peer,
        mut events,
        ..
    } = bench(|_| {}).await;
    let messages = every_message_type();
    let kinds: std::collections::BTreeSet<u8> = messages.iter().map(Message::msg_type).collect();
    assert!(kinds.len() >= 15, "only types {kinds:?}");
    for (n, msg) in messages.iter().enumerate() {
        let xid = 0x7000_0000 + u32::try_from(n).unwrap();
        peer.send(xid, msg).await;
    }
    // Still one session: a request sent after all of that is answered on it. Echo requests
    // among the messages were answered; anything else ofnode sends first is read past.
    let barrier = spawn_barrier(&switch);
    loop {
        match peer.recv().await.expect("ofnode closed the session") {
            (xid, Message::BarrierRequest) => {
                peer.send(xid, &Message::BarrierReply).await;
                break;
            }
            (_, Message::EchoReply(_)) => {}
            (_, other) => panic!("ofnode sent {other:?} in answer to unsolicited messages"),
        }
    }
    finish(barrier).await.unwrap();
    assert!(switch.is_connected());
    // Asynchronous messages reached the owner; the connection was never reported lost.
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event.kind());
    }
    assert!(!seen.contains(&"disconnected"), "{seen:?}");
    for kind in ["port status", "packet-in", "async error"] {
        assert!(seen.contains(&kind), "no {kind} event: {seen:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn at_most_max_pending_requests_are_in_flight_on_a_connection() {
    let Bench {
        switch, mut peer, ..
    } = bench(|cfg| cfg.max_pending = 3).await;
    let barriers: Vec<_> = (0..6).map(|_| spawn_barrier(&switch)).collect();
    let mut xids = Vec::new();
    for _ in 0..3 {
        let (xid, msg) = peer.recv().await.expect("barrier");
        assert_eq!(msg, Message::BarrierRequest);
        xids.push(xid);
    }
    // Paused clock: the timeout fires only once every task is blocked, i.e. ofnode has sent
    // all it is going to send.
    let fourth = tokio::time::timeout(Duration::from_secs(1), peer.recv()).await;
    assert!(fourth.is_err(), "a 4th request went out: {fourth:?}");
    // Each reply frees one slot for one more request.
    while let Some(xid) = xids.pop() {
        peer.send(xid, &Message::BarrierReply).await;
        if let Ok(Some((xid, msg))) =
            tokio::time::timeout(Duration::from_secs(1), peer.recv()).await
        {
            assert_eq!(msg, Message::BarrierRequest);
            xids.insert(0, xid);
        }
    }
    for barrier in barriers {
        finish(barrier).await.unwrap();
    }
}
