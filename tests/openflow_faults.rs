//! Faults on the OpenFlow session, shown against a REAL ovs-vswitchd behind the harness's
//! fault-injecting proxy (`ofnode_harness::OfProxy`): the switch refuses a flow, the connection
//! drops in the middle of a bundle or right after its COMMIT, a reply is held past the request
//! timeout, multipart parts are interleaved with other replies, unsolicited messages of every
//! type are injected into the live session, replies are held so requests pile up. ofnode returns
//! typed errors (and says when the switch may have applied a transaction), never hangs, and keeps
//! the session wherever the protocol allows. What reached the switch is counted by the proxy;
//! what the switch holds is read with ovs-ofctl.

mod openflow_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ofnode::openflow::{Error, Switch, SwitchEvent, Unanswered};
use ofnode_harness::ofproxy::{msg_type, BundleCtrl, BundleEnd, Frame};
use ofnode_proto::{
    BundleControl, BundleCtrlType, BundleFlags, ErrorKind, ErrorMsg, Field, FlowStatsRequest,
    Instruction, Match, Message, MultipartReply, MultipartReplyBody, PacketIn, Port, PortStatus,
    Role, RoleMsg, SwitchFeatures,
};
use openflow_common::*;

/// A request must end (with a result or an error) within this; longer means it hung.
const HANG_GUARD: Duration = Duration::from_secs(60);
/// `request_timeout` of the tests that wait for one to pass.
const SHORT_TIMEOUT: Duration = Duration::from_secs(2);

async fn finish<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG_GUARD, future)
        .await
        .expect("the request hung")
}

/// A transaction of `n` flows `reg_flow(0, 100, base + i, 0, 1)`.
async fn commit_flows(switch: &Switch, base: u64, n: u64) -> Result<(), Error> {
    let mut tx = switch.transaction();
    for i in 0..n {
        tx.add(reg_flow(0, 100, base + i, 0, 1));
    }
    finish(tx.commit()).await
}

fn flows_line(base: u64, n: u64) -> Vec<String> {
    sorted(
        (0..n)
            .map(|i| reg_flow_line(0, 100, base + i, 0, 1))
            .collect(),
    )
}

fn is_commit_reply(frame: &Frame) -> bool {
    frame.is_bundle_ctrl(BundleCtrl::CommitReply)
}

/// Matches the `n`-th bundle add (1-based) the controller sends after this is made.
fn nth_bundle_add(n: usize) -> impl Fn(&Frame) -> bool + Send + 'static {
    let seen = AtomicUsize::new(0);
    move |frame| frame.bundle_add().is_some() && seen.fetch_add(1, Ordering::SeqCst) + 1 == n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transaction_is_one_bundle_at_the_switch() {
    let Proxied {
        switch, proxy, ovs, ..
    } = proxied_br0(|_| {}).await;
    for n in [1, 4, 300] {
        let mark = proxy.mark();
        commit_flows(&switch, 1000 * n, n).await.unwrap();
        let traffic = proxy.traffic_since(mark);
        let bundles = traffic.bundles();
        assert_eq!(bundles.len(), 1, "{}", traffic.describe());
        assert_eq!(bundles[0].flow_mods, n as usize);
        assert_eq!(bundles[0].end, BundleEnd::Committed);
        assert!(bundles[0].commit_replied);
        assert_eq!(traffic.loose_flow_mods(), 0);
    }
    assert_eq!(oracle_flows(&ovs).len(), 305);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_refused_in_a_bundle_fails_the_commit_typed_and_the_bundle_is_discarded() {
    let Proxied {
        switch, proxy, ovs, ..
    } = proxied_br0(|_| {}).await;
    let mark = proxy.mark();
    // The second flow jumps backwards: OVS refuses it when it is added (OFPBIC_BAD_TABLE_ID).
    let mut backwards = reg_flow(3, 99, 0x63, 0x63, 1);
    backwards.instructions = vec![Instruction::GotoTable(2)];
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 50, 1, 1, 1));
    tx.add(backwards);
    tx.add(reg_flow(0, 51, 2, 2, 2));
    let err = finish(tx.commit()).await.unwrap_err();
    let Error::Switch {
        flow: Some(flow),
        error,
    } = &err
    else {
        panic!("expected the switch's error naming the flow, got {err:?}")
    };
    assert_eq!(error.kind.name(), "OFPBIC_BAD_TABLE_ID", "{err}");
    assert!(
        flow.contains("goto_table:2"),
        "names the second flow: {flow}"
    );
    assert!(!err.may_have_applied(), "{err}");
    // At the switch: one bundle, discarded, never committed; nothing of it applied.
    let traffic = proxy.traffic_since(mark);
    let bundles = traffic.bundles();
    assert_eq!(bundles.len(), 1, "{}", traffic.describe());
    assert_eq!(
        (bundles[0].flow_mods, bundles[0].end),
        (3, BundleEnd::Discarded)
    );
    assert!(oracle_flows(&ovs).is_empty());
    // The session is intact.
    finish(switch.barrier()).await.unwrap();
    assert_eq!(proxy.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_mid_bundle_fails_the_commit_and_the_next_one_succeeds() {
    let Proxied {
        switch,
        proxy,
        ovs,
        mut events,
    } = proxied_br0(|_| {}).await;
    let mark = proxy.mark();
    // The switch gets the OPEN and the first add, then the connection is gone.
    proxy.cut_before(nth_bundle_add(2));
    let err = commit_flows(&switch, 0, 3).await.unwrap_err();
    assert!(matches!(err, Error::Disconnected), "{err:?}");
    assert!(
        !err.may_have_applied(),
        "an unfinished bundle dies with its connection"
    );
    let traffic = proxy.traffic_since(mark);
    let bundles = traffic.bundles();
    assert_eq!(bundles.len(), 1, "{}", traffic.describe());
    assert_eq!(
        (bundles[0].flow_mods, bundles[0].end),
        (1, BundleEnd::Unfinished)
    );
    assert!(oracle_flows(&ovs).is_empty(), "nothing of it applied");

    // ofnode dials again (through the proxy) by itself; the next transaction goes through.
    next_event(&mut events, "Connected again", |e| {
        matches!(e, SwitchEvent::Connected { .. })
    })
    .await;
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    commit_flows(&switch, 10, 3).await.unwrap();
    assert_eq!(oracle_flows(&ovs), flows_line(10, 3));
    assert_eq!(proxy.connections(), 2);
}

/// The commit reply is held past the request timeout: the caller learns that the switch may
/// have applied the transaction, and here it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_reply_never_comes_is_an_unknown_outcome_not_a_failure() {
    let Proxied {
        switch, proxy, ovs, ..
    } = proxied_br0(|cfg| cfg.request_timeout = SHORT_TIMEOUT).await;
    proxy.hold(is_commit_reply);
    let err = commit_flows(&switch, 0, 4).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutcomeUnknown {
                cause: Unanswered::Timeout(after)
            } if after == SHORT_TIMEOUT
        ),
        "{err:?}"
    );
    assert!(err.may_have_applied());
    assert!(err.to_string().contains("may have applied"), "{err}");
    assert_eq!(
        oracle_flows(&ovs),
        flows_line(0, 4),
        "the switch applied it"
    );
    // The reply arriving now is ignored; the session carries on.
    assert_eq!(proxy.release_held(), 1);
    commit_flows(&switch, 100, 1).await.unwrap();
    finish(switch.barrier()).await.unwrap();
    assert_eq!(proxy.connections(), 1);
}

/// The connection drops right after the COMMIT reached the switch: unknown outcome too; the
/// switch holds all of the transaction or none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_after_the_commit_is_an_unknown_outcome() {
    let Proxied {
        switch, proxy, ovs, ..
    } = proxied_br0(|_| {}).await;
    proxy.cut_after(|f: &Frame| f.is_bundle_ctrl(BundleCtrl::CommitRequest));
    let err = commit_flows(&switch, 0, 4).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutcomeUnknown {
                cause: Unanswered::Disconnected
            }
        ),
        "{err:?}"
    );
    assert!(err.may_have_applied());
    let flows = oracle_flows(&ovs);
    assert!(
        flows.is_empty() || flows == flows_line(0, 4),
        "all or nothing: {flows:#?}"
    );
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    commit_flows(&switch, 100, 1).await.unwrap();
}

/// The barrier that precedes the COMMIT is answered too late: the caller's timeout says
/// "not applied", and the bundle is indeed discarded when the late barrier reply comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_whose_barrier_reply_is_late_is_discarded_not_committed() {
    let Proxied {
        switch, proxy, ovs, ..
    } = proxied_br0(|cfg| cfg.request_timeout = SHORT_TIMEOUT).await;
    let mark = proxy.mark();
    proxy.hold(Frame::is_barrier_reply);
    let err = commit_flows(&switch, 0, 3).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(!err.may_have_applied(), "{err}");
    proxy.release_held();
    eventually("the DISCARD at the switch", || {
        proxy
            .traffic_since(mark)
            .bundles()
            .first()
            .is_some_and(|b| b.end == BundleEnd::Discarded)
    })
    .await;
    finish(switch.barrier()).await.unwrap();
    assert!(oracle_flows(&ovs).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_later_than_the_request_timeout_is_a_timeout_and_the_session_stays() {
    let Proxied {
        switch,
        proxy,
        ovs: _ovs,
        ..
    } = proxied_br0(|cfg| cfg.request_timeout = SHORT_TIMEOUT).await;
    proxy.hold_once(Frame::is_barrier_reply);
    match finish(switch.barrier()).await {
        Err(Error::Timeout { what, after }) => {
            assert_eq!(after, SHORT_TIMEOUT);
            assert!(!what.is_empty());
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The reply arriving now is ignored; the next request is answered normally.
    assert_eq!(proxy.release_held(), 1);
    finish(switch.barrier()).await.unwrap();
    assert!(switch.is_connected());
    assert_eq!(proxy.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_parts_interleaved_with_other_replies_are_reassembled() {
    const FLOWS: u64 = 3000;
    let Proxied {
        switch, proxy, ovs, ..
    } = proxied_br0(|_| {}).await;
    commit_flows(&switch, 0, FLOWS).await.unwrap();
    // The switch's flow stats reply comes in parts; every part after the first is held until
    // the reply to a barrier sent after the request has overtaken it.
    let parts = Arc::new(AtomicUsize::new(0));
    let counted = parts.clone();
    proxy.reorder(
        move |f: &Frame| {
            f.multipart_more().is_some() && counted.fetch_add(1, Ordering::SeqCst) >= 1
        },
        Frame::is_barrier_reply,
    );
    let mark = proxy.mark();
    let dump = {
        let switch = switch.clone();
        tokio::spawn(async move { switch.dump_flows(FlowStatsRequest::default()).await })
    };
    eventually("the dump request at the switch", || {
        proxy
            .traffic_since(mark)
            .count_to_switch(msg_type::MULTIPART_REQUEST)
            == 1
    })
    .await;
    finish(switch.barrier()).await.unwrap();
    let flows = finish(dump).await.unwrap().unwrap();
    assert!(
        parts.load(Ordering::SeqCst) >= 3,
        "the dump came in {} parts",
        parts.load(Ordering::SeqCst)
    );
    // The barrier reply really came between the parts.
    let delivered: Vec<u8> = proxy
        .traffic_since(mark)
        .to_controller()
        .map(Frame::msg_type)
        .collect();
    let barrier_at = delivered
        .iter()
        .position(|t| *t == msg_type::BARRIER_REPLY)
        .expect("barrier reply");
    assert_eq!(delivered[..barrier_at], [msg_type::MULTIPART_REPLY]);
    let mut keys: Vec<(u64, u64)> = flows
        .iter()
        .map(|f| {
            let reg = |n| f.match_.exact(Field::Reg(n)).expect("register matched");
            (reg(0), reg(1))
        })
        .collect();
    keys.sort_unstable();
    let want: Vec<(u64, u64)> = (0..FLOWS).map(|i| (i, 0)).collect();
    assert_eq!(keys, want, "every flow once, as the switch holds them");
    assert_eq!(oracle_flows(&ovs).len() as u64, FLOWS);
}

fn port(port_no: u32) -> Port {
    Port {
        port_no,
        name: format!("p{port_no}"),
        ..Port::default()
    }
}

/// Every message OVS 3.1 sent in the captured seeds, as if unsolicited: replies to nothing,
/// asynchronous messages, requests a switch never sends, unknown types.
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
        Message::EchoRequest(Bytes::from_static(b"ping")),
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

/// Xids ofnode never uses (its own start at 1): nothing injected can answer a real request.
const INJECTED_XIDS: u32 = 0x7000_0000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsolicited_messages_of_every_type_leave_the_session_up() {
    let Proxied {
        switch,
        proxy,
        ovs,
        mut events,
    } = proxied_br0(|_| {}).await;
    let messages = every_message_type();
    let kinds: std::collections::BTreeSet<u8> = messages.iter().map(Message::msg_type).collect();
    assert!(kinds.len() >= 15, "only types {kinds:?}");
    let mark = proxy.mark();
    let mut echo_xids = Vec::new();
    for (n, msg) in messages.iter().enumerate() {
        let xid = INJECTED_XIDS + u32::try_from(n).unwrap();
        if matches!(msg, Message::EchoRequest(_)) {
            echo_xids.push(xid);
        }
        proxy.inject(&msg.to_bytes(xid).unwrap()).unwrap();
    }
    // Still one session with the real switch: a transaction and a barrier go through on it.
    commit_flows(&switch, 0, 2).await.unwrap();
    finish(switch.barrier()).await.unwrap();
    assert!(switch.is_connected());
    assert_eq!(proxy.connections(), 1);
    assert_eq!(oracle_flows(&ovs), flows_line(0, 2));
    // Injected echo requests were answered (to the switch, which ignores them), with their xid.
    let answered: Vec<u32> = proxy
        .traffic_since(mark)
        .to_switch()
        .filter(|f| f.msg_type() == msg_type::ECHO_REPLY)
        .map(Frame::xid)
        .collect();
    for xid in &echo_xids {
        assert!(
            answered.contains(xid),
            "echo {xid:#x} unanswered: {answered:x?}"
        );
    }
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

/// Replies are held at the proxy, so requests pile up: never more than `max_pending` are
/// outstanding at the switch, and every one completes once replies flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_max_pending_requests_are_in_flight_on_a_connection() {
    const MAX_PENDING: usize = 3;
    const REQUESTS: usize = 8;
    let Proxied {
        switch,
        proxy,
        ovs: _ovs,
        ..
    } = proxied_br0(|cfg| cfg.max_pending = MAX_PENDING).await;
    let mark = proxy.mark();
    proxy.hold(Frame::is_barrier_reply);
    let barriers: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let switch = switch.clone();
            tokio::spawn(async move { switch.barrier().await })
        })
        .collect();
    let at_switch = |proxy: &ofnode_harness::OfProxy| {
        proxy
            .traffic_since(mark)
            .count_to_switch(msg_type::BARRIER_REQUEST)
    };
    eventually("the first barriers at the switch", || {
        at_switch(&proxy) == MAX_PENDING && proxy.held().len() == MAX_PENDING
    })
    .await;
    // Nothing more goes out while no reply comes back. Evidence, not a wait: an echo request
    // injected as if from the switch is answered on the same connection, after whatever the
    // client had written; once its reply has passed the proxy, so has any barrier sent before.
    // (Over the whole exchange, below, one in flight beyond the bound at any time fails too.)
    let marker = INJECTED_XIDS + 1;
    proxy
        .inject(
            &Message::EchoRequest(Bytes::from_static(b"marker"))
                .to_bytes(marker)
                .expect("an echo encodes"),
        )
        .unwrap();
    eventually("the marker echo answered", || {
        proxy
            .traffic_since(mark)
            .to_switch()
            .any(|f| f.msg_type() == msg_type::ECHO_REPLY && f.xid() == marker)
    })
    .await;
    assert_eq!(at_switch(&proxy), MAX_PENDING);
    proxy.release_held();
    for barrier in barriers {
        finish(barrier).await.unwrap().unwrap();
    }
    // Over the whole exchange, at most MAX_PENDING requests were ever unanswered.
    let mut outstanding = 0usize;
    for frame in &proxy.traffic_since(mark).frames {
        if frame.is_barrier_request() {
            outstanding += 1;
            assert!(outstanding <= MAX_PENDING, "{outstanding} in flight");
        } else if frame.is_barrier_reply() {
            outstanding -= 1;
        }
    }
    assert_eq!(at_switch(&proxy), REQUESTS);
}
