//! The connection under stress: the switch dies mid-stream, peers send garbage, lie about
//! lengths, speak the wrong version or go silent. Errors, never hangs; the process keeps
//! serving everyone else.

mod openflow_common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ofnode::openflow::{Error, Switch, SwitchEvent};
use ofnode_harness::ofproxy::{msg_type, Frame};
use ofnode_proto::{ErrorKind, Hello, Message};
use openflow_common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;

/// A request must end (with a result or an error) within this; longer means it hung.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// A transaction cut off by the kill: not applied (`Disconnected`, `NotConnected`), or, when the
/// COMMIT had gone out, of unknown outcome.
fn is_connection_loss(error: &Error) -> bool {
    matches!(
        error,
        Error::Disconnected | Error::NotConnected | Error::OutcomeUnknown { .. }
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_vswitchd_mid_stream_gives_errors_then_the_connection_comes_back() {
    let ovs = ovs_with_br0();
    let (switch, mut events) = connect_br0(&ovs).await;
    next_event(&mut events, "Connected", |e| {
        matches!(e, SwitchEvent::Connected { .. })
    })
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for task in 0..8u64 {
        let (switch, stop, committed) = (switch.clone(), stop.clone(), committed.clone());
        writers.push(tokio::spawn(async move {
            let mut losses = 0;
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let mut tx = switch.transaction();
                tx.add(reg_flow(0, 100, task, round, 1));
                round += 1;
                let outcome = tokio::time::timeout(HANG_GUARD, tx.commit())
                    .await
                    .unwrap_or_else(|_| panic!("task {task}: commit hung"));
                match outcome {
                    Ok(()) => {
                        committed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) if is_connection_loss(&error) => {
                        losses += 1;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err(error) => panic!("task {task}: unexpected error {error}"),
                }
            }
            losses
        }));
    }
    // Kill it while transactions are streaming.
    while committed.load(Ordering::Relaxed) < 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    ovs.kill_vswitchd();
    let lost = next_event(&mut events, "Disconnected", |e| {
        matches!(e, SwitchEvent::Disconnected { .. })
    })
    .await;
    assert!(matches!(&lost, SwitchEvent::Disconnected { reason } if !reason.is_empty()));
    assert!(!switch.is_connected());
    // New requests fail at once while the switch is down.
    let err = switch.barrier().await.unwrap_err();
    assert!(is_connection_loss(&err), "{err}");

    ovs.start_vswitchd().unwrap();
    let connected = next_event(&mut events, "Connected again", |e| {
        matches!(e, SwitchEvent::Connected { .. })
    })
    .await;
    assert!(matches!(connected, SwitchEvent::Connected { .. }));
    stop.store(true, Ordering::Relaxed);
    let mut losses = 0;
    for writer in writers {
        losses += writer.await.unwrap();
    }
    assert!(
        losses > 0,
        "in-flight transactions must fail when the switch dies"
    );

    // The new ovs-vswitchd got SET_CONFIG again and takes transactions.
    let frags = ovs.ofctl("get-frags", "br0", &[]).unwrap();
    assert_eq!(frags.trim(), "nx-match");
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 7, 0xabc, 0xdef, 2));
    tx.commit().await.unwrap();
    let flows = oracle_flows(&ovs);
    assert!(
        flows.contains(&reg_flow_line(0, 7, 0xabc, 0xdef, 2)),
        "{flows:?}"
    );
}

/// A test runtime on one thread so that the captured log subscriber sees every task.
#[tokio::test(flavor = "current_thread")]
async fn garbage_and_lying_peers_are_dropped_while_the_switch_keeps_serving() {
    let (_log_guard, logs) = capture_logs();
    let ovs = ovs_with_br0();
    let sock = ovs.dir().join("ctl.sock");
    let mut cfg = config(&format!("punix:{}", sock.display()));
    cfg.handshake_timeout = Duration::from_secs(2);
    let (switch, mut events) = Switch::start(cfg);
    wait_for_path(&sock).await;
    ovs.vsctl(&["set-controller", "br0", &format!("unix:{}", sock.display())])
        .unwrap();
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();

    // 1. Garbage: a header whose length is below the header's own 8 bytes.
    let mut garbage = FakePeer::connect(&sock).await;
    garbage.send_raw(b"\xde\xad\x00\x03garbage!").await;
    garbage.expect_closed().await;

    // 2. A length field larger than the data, then end of stream.
    let mut liar = FakePeer::connect(&sock).await;
    liar.send_raw(&[0x04, 0x00, 0x00, 0xc8, 0, 0, 0, 1, 0, 1, 0, 8])
        .await;
    liar.stream.shutdown().await.unwrap();
    liar.expect_closed().await;

    // 3. A length field larger than the data, and then silence: the handshake times out.
    let mut silent = FakePeer::connect(&sock).await;
    silent.send_raw(&[0x04, 0x00, 0x00, 0xc8, 0, 0, 0, 1]).await;
    silent.expect_closed().await;

    // 4. A peer that speaks only OpenFlow 1.0 is told why, then dropped.
    let mut old = FakePeer::connect(&sock).await;
    old.send(7, &Message::Hello(Hello { versions: vec![1] }))
        .await;
    let (_, hello) = old.recv().await.expect("our HELLO");
    assert!(matches!(hello, Message::Hello(_)));
    let (xid, refusal) = old.recv().await.expect("HELLO_FAILED error");
    assert_eq!(xid, 7);
    let Message::Error(refusal) = refusal else {
        panic!("expected an error, got {refusal:?}")
    };
    assert_eq!(
        refusal.kind,
        ErrorKind::Standard {
            err_type: 0,
            code: 0
        }
    );
    assert!(String::from_utf8_lossy(&refusal.data).contains("OpenFlow 1.0"));
    old.expect_closed().await;

    // The real switch was served throughout, and still is.
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 5, 1, 2, 3));
    tx.commit().await.unwrap();
    assert_eq!(oracle_flows(&ovs), vec![reg_flow_line(0, 5, 1, 2, 3)]);
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, SwitchEvent::Disconnected { .. }),
            "the switch's session must survive the bad peers: {event:?}"
        );
    }

    let logged = logged(&logs);
    let drops = logged
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("dropping OpenFlow peer"))
        .count();
    assert_eq!(drops, 4, "one logged error per bad peer:\n{logged}");
    for reason in [
        "less than the 8-byte header",
        "closed in the middle of a message: have 12 of 200 bytes",
        "timed out",
        "ofnode speaks only OpenFlow 1.3",
    ] {
        assert!(logged.contains(reason), "log lacks `{reason}`:\n{logged}");
    }
}

/// The real switch's session, through the proxy, breaks the protocol: first a length field
/// larger than the data and the end of the stream, then (on the session ofnode dials next) a
/// length below the header. Each time the request in flight fails, the session is dropped
/// with a logged error, and ofnode dials again; the real switch is served on the third session.
#[tokio::test(flavor = "current_thread")]
async fn a_switch_sending_garbage_is_dropped_and_redialled() {
    let (_log_guard, logs) = capture_logs();
    let Proxied {
        switch,
        mut events,
        proxy,
        ovs,
    } = proxied_br0(|_| {}).await;

    // A request in flight when the switch breaks the protocol fails; it does not hang.
    proxy.hold(|f: &Frame| f.is_barrier_reply());
    let pending = tokio::spawn({
        let switch = switch.clone();
        async move { switch.barrier().await }
    });
    eventually("the barrier at the switch", || {
        proxy.traffic().count_to_switch(msg_type::BARRIER_REQUEST) == 1
    })
    .await;
    proxy
        .inject(&[0x04, 0x15, 0x00, 0x64, 0, 0, 0, 9, 1, 2])
        .unwrap();
    proxy.cut_now();
    let outcome = tokio::time::timeout(HANG_GUARD, pending)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(outcome, Err(Error::Disconnected)), "{outcome:?}");
    let lost = next_event(&mut events, "Disconnected", |e| {
        matches!(e, SwitchEvent::Disconnected { .. })
    })
    .await;
    let SwitchEvent::Disconnected { reason } = lost else {
        unreachable!()
    };
    assert!(reason.contains("have 10 of 100 bytes"), "{reason}");

    // It dials again by itself; this time the "switch" sends a length below 8.
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    assert_eq!(proxy.connections(), 2);
    proxy.inject(&[0x04, 0x02, 0x00, 0x04, 0, 0, 0, 1]).unwrap();
    next_event(&mut events, "Disconnected", |e| {
        matches!(e, SwitchEvent::Disconnected { .. })
    })
    .await;

    // The third session serves the real switch as usual.
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    let mut tx = switch.transaction();
    tx.add(reg_flow(2, 9, 8, 7, 6));
    tx.commit().await.unwrap();
    assert_eq!(oracle_flows(&ovs), vec![reg_flow_line(2, 9, 8, 7, 6)]);
    assert_eq!(proxy.connections(), 3);

    let logged = logged(&logs);
    assert!(
        logged.contains("ERROR") && logged.contains("OpenFlow connection lost"),
        "{logged}"
    );
    assert!(logged.contains("less than the 8-byte header"), "{logged}");
}

/// The keepalive protocol, exactly, with a scripted switch on a paused clock (no wall-clock
/// race on a loaded machine): the switch's echo request is answered at once with its xid and
/// payload; our probe comes after `echo_interval` of silence; a probe answered keeps the
/// session, one unanswered for `echo_timeout` drops it.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn echo_requests_are_answered_and_a_silent_peer_is_declared_dead() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.mgmt");
    let listener = UnixListener::bind(&path).unwrap();
    let mut cfg = config(&format!("unix:{}", path.display()));
    cfg.echo_interval = Duration::from_millis(200);
    cfg.echo_timeout = Duration::from_millis(300);
    let (switch, mut events) = Switch::start(cfg);
    let mut peer = FakePeer::new(listener.accept().await.unwrap().0);
    peer.act_as_switch(7).await;
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();

    // The switch's keepalive is answered at once, with its xid and payload.
    peer.send(0x55, &Message::EchoRequest(Bytes::from_static(b"ping")))
        .await;
    let (xid, reply) = peer.recv().await.expect("echo reply");
    assert_eq!(
        (xid, reply),
        (0x55, Message::EchoReply(Bytes::from_static(b"ping")))
    );

    // Our own probe comes when the link is idle; answering it keeps the session.
    let quiet = tokio::time::Instant::now();
    let (xid, probe) = peer.recv().await.expect("echo probe");
    assert!(matches!(probe, Message::EchoRequest(_)), "{probe:?}");
    assert!(
        quiet.elapsed() >= Duration::from_millis(200),
        "probed early"
    );
    peer.send(xid, &Message::EchoReply(Bytes::new())).await;
    let (_, probe) = peer.recv().await.expect("second echo probe");
    assert!(matches!(probe, Message::EchoRequest(_)), "{probe:?}");
    assert!(switch.is_connected());

    // Not answering the probe: the peer is declared dead and dropped.
    let unanswered = tokio::time::Instant::now();
    let lost = next_event(&mut events, "Disconnected", |e| {
        matches!(e, SwitchEvent::Disconnected { .. })
    })
    .await;
    assert!(
        unanswered.elapsed() >= Duration::from_millis(300),
        "gave up early"
    );
    let SwitchEvent::Disconnected { reason } = lost else {
        unreachable!()
    };
    assert!(reason.contains("echo reply"), "{reason}");
    peer.expect_closed().await;
}

/// The real switch goes silent (the proxy holds everything it sends): ofnode's echo probe is
/// not answered, the session is declared dead, and ofnode dials again and is served. The bounds
/// are generous; only the outcome is asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_switch_is_declared_dead_and_the_next_session_is_served() {
    let Proxied {
        switch,
        mut events,
        proxy,
        ovs,
    } = proxied_br0(|cfg| {
        cfg.echo_interval = Duration::from_secs(1);
        cfg.echo_timeout = Duration::from_secs(2);
    })
    .await;
    proxy.hold(|_: &Frame| true);
    let lost = next_event(&mut events, "Disconnected", |e| {
        matches!(e, SwitchEvent::Disconnected { .. })
    })
    .await;
    let SwitchEvent::Disconnected { reason } = lost else {
        unreachable!()
    };
    assert!(reason.contains("echo reply"), "{reason}");
    // The probe reached the real switch (its answer was held until the session ended).
    assert!(proxy
        .traffic()
        .to_switch()
        .any(|f| f.conn == 1 && f.msg_type() == msg_type::ECHO_REQUEST));
    switch.wait_connected(CONNECT_TIMEOUT).await.unwrap();
    let mut tx = switch.transaction();
    tx.add(reg_flow(0, 5, 1, 2, 3));
    tx.commit().await.unwrap();
    assert_eq!(oracle_flows(&ovs), vec![reg_flow_line(0, 5, 1, 2, 3)]);
    assert_eq!(proxy.connections(), 2);
}

/// Backpressure against the real switch: the proxy stops reading what ofnode sends, so callers
/// wait at the bounded queue and memory does not grow with what they try to send; once it reads
/// again, every message reaches the switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_that_stops_reading_blocks_senders_instead_of_buffering_without_bound() {
    const ATTEMPTS: usize = 2000;
    const PAYLOAD: usize = 8 * 1024;
    /// Kernel socket buffers + the write queue + the command queue hold far less than this;
    /// buffering everything would take ATTEMPTS * PAYLOAD = 16 MB.
    const BOUND: usize = 4 << 20;
    let Proxied {
        switch,
        proxy,
        ovs: _ovs,
        ..
    } = proxied_br0(|cfg| {
        cfg.max_queue = 2;
        cfg.max_write_buffer = 64 * 1024;
    })
    .await;
    let mark = proxy.mark();
    proxy.pause_reading_from_controller();

    let sent = Arc::new(AtomicUsize::new(0));
    let sender = tokio::spawn({
        let (switch, sent) = (switch.clone(), sent.clone());
        async move {
            let payload = Bytes::from(vec![0x5a; PAYLOAD]);
            for _ in 0..ATTEMPTS {
                switch
                    .send(Message::EchoRequest(payload.clone()))
                    .await
                    .unwrap();
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // Wait until the sender is stuck: no progress for half a second (a stuck sender stays
    // stuck; one that is merely slow would fail the bound below, not pass it).
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = sent.load(Ordering::Relaxed);
        if now == last || sender.is_finished() {
            break;
        }
        last = now;
    }
    let accepted = sent.load(Ordering::Relaxed);
    assert!(
        !sender.is_finished(),
        "all {ATTEMPTS} sends completed against a switch that reads nothing"
    );
    assert!(
        accepted * PAYLOAD < BOUND,
        "{accepted} messages of {PAYLOAD} bytes accepted while nothing was read"
    );

    // Once it reads again, everything flows to the real switch.
    proxy.resume_reading_from_controller();
    tokio::time::timeout(HANG_GUARD, sender)
        .await
        .expect("the sender finished")
        .unwrap();
    eventually("every echo request at the switch", || {
        proxy
            .traffic_since(mark)
            .count_to_switch(msg_type::ECHO_REQUEST)
            == ATTEMPTS
    })
    .await;
    switch.barrier().await.unwrap();
}
