//! The fault-injecting OpenFlow proxy against a real ovs-vswitchd: it relays what ovs-ofctl
//! sends (and counts it at the switch side), holds and releases replies, and cuts connections.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use ofnode_harness::ofproxy::{msg_type, BundleEnd, Frame};
use ofnode_harness::{OfProxy, Ovs};

fn ovs_with_br0() -> Ovs {
    let ovs = Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs
}

fn ofctl_via(proxy: &OfProxy, args: &[&str]) -> String {
    let out = std::process::Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", args[0], &proxy.target()])
        .args(&args[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An OpenFlow 1.3 message with an empty body.
fn bare(kind: u8, xid: u32) -> Vec<u8> {
    let mut bytes = vec![4, kind, 0, 8];
    bytes.extend(xid.to_be_bytes());
    bytes
}

/// A raw OpenFlow client of the proxy that has said HELLO and read the switch's.
fn raw_client(proxy: &OfProxy) -> UnixStream {
    let mut stream = UnixStream::connect(proxy.path()).unwrap();
    stream.write_all(&bare(0, 1)).unwrap();
    let hello = read_one(&mut stream).expect("the switch's HELLO");
    assert_eq!(hello[1], 0);
    stream
}

fn read_one(stream: &mut UnixStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).ok()?;
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    let mut body = vec![0u8; length - 8];
    stream.read_exact(&mut body).ok()?;
    Some([header.to_vec(), body].concat())
}

#[test]
fn relays_ovs_ofctl_and_counts_what_reached_the_switch() {
    let ovs = ovs_with_br0();
    let proxy = OfProxy::in_front_of(&ovs, "br0").unwrap();

    let mark = proxy.mark();
    ofctl_via(&proxy, &["add-flow", "table=0,priority=5,ip,actions=drop"]);
    let traffic = proxy.traffic_since(mark);
    assert_eq!(traffic.loose_flow_mods(), 1, "{}", traffic.describe());
    assert!(traffic.bundles().is_empty());

    let file = ovs.dir().join("three.bundle");
    std::fs::write(
        &file,
        "flow add table=1,priority=1,ip,actions=drop\n\
         flow add table=1,priority=2,ip,actions=drop\n\
         flow add table=1,priority=3,ip,actions=drop\n",
    )
    .unwrap();
    let mark = proxy.mark();
    ofctl_via(&proxy, &["bundle", &file.display().to_string()]);
    let traffic = proxy.traffic_since(mark);
    let bundles = traffic.bundles();
    assert_eq!(bundles.len(), 1, "{}", traffic.describe());
    assert_eq!(bundles[0].flow_mods, 3);
    assert_eq!(bundles[0].end, BundleEnd::Committed);
    assert!(bundles[0].commit_replied);
    assert_eq!(traffic.loose_flow_mods(), 0);
    // The switch has what passed; the proxy reads it back like any client.
    assert_eq!(ovs.dump_flows("br0").unwrap().len(), 4);
    let dumped = ofctl_via(&proxy, &["dump-flows", "--no-stats"]);
    assert_eq!(dumped.lines().filter(|l| l.contains("actions=")).count(), 4);
    // ovs-ofctl also dials once more per command to learn port names.
    assert!(proxy.connections() >= 3);
}

#[test]
fn holds_replies_until_released_and_cuts_connections() {
    let ovs = ovs_with_br0();
    let proxy = OfProxy::in_front_of(&ovs, "br0").unwrap();
    let mut client = raw_client(&proxy);
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();

    // A held echo reply does not arrive; released, it does.
    proxy.hold(|f: &Frame| f.msg_type() == msg_type::ECHO_REPLY);
    client.write_all(&bare(msg_type::ECHO_REQUEST, 7)).unwrap();
    assert!(proxy.wait_until(Duration::from_secs(10), |v| !v.held.is_empty()));
    assert!(read_one(&mut client).is_none(), "a held reply arrived");
    assert_eq!(proxy.release_held(), 1);
    client.set_read_timeout(None).unwrap();
    let reply = read_one(&mut client).expect("the released echo reply");
    assert_eq!(
        (reply[1], &reply[4..8]),
        (msg_type::ECHO_REPLY, &7u32.to_be_bytes()[..])
    );

    // A delayed reply arrives, late (a lower bound only: the proxy sleeps before delivering).
    proxy.delay(
        |f: &Frame| f.msg_type() == msg_type::ECHO_REPLY,
        Duration::from_millis(300),
    );
    let sent = std::time::Instant::now();
    client.write_all(&bare(msg_type::ECHO_REQUEST, 10)).unwrap();
    let reply = read_one(&mut client).expect("the delayed echo reply");
    assert_eq!(&reply[4..8], &10u32.to_be_bytes()[..]);
    assert!(sent.elapsed() >= Duration::from_millis(300), "not delayed");

    // Cut before a barrier: the client sees the end of its connection and the switch never
    // got the barrier.
    proxy.cut_before(Frame::is_barrier_request);
    client
        .write_all(&bare(msg_type::BARRIER_REQUEST, 8))
        .unwrap();
    assert!(read_one(&mut client).is_none(), "the connection was cut");
    assert_eq!(
        proxy.traffic().count_to_switch(msg_type::BARRIER_REQUEST),
        0
    );
    // The next connection is clean.
    let mut next = raw_client(&proxy);
    next.write_all(&bare(msg_type::BARRIER_REQUEST, 9)).unwrap();
    let reply = read_one(&mut next).expect("barrier reply");
    assert_eq!(reply[1], msg_type::BARRIER_REPLY);
}
