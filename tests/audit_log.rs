//! The policy audit log against a real Open vSwitch.
//!
//! Not ignored: the log's own path, end to end on a real switch. ovs-vswitchd sends the
//! daemon NXT_PACKET_IN2s carrying `ofA1` userdata (this test makes them with packet-outs
//! whose action is `controller(userdata=…)`, through a second OpenFlow connection of ofnode's
//! own library on the bridge's management socket — no flow is added, so nothing is foreign to
//! the daemon's table); the daemon's audit task decodes them, folds identical ones, names the
//! namespace, policy, rule and pods from its state, and writes JSON lines to the file and RFC
//! 5424 messages to a unix datagram socket; a bad packet is counted; `ofnode status` and
//! /metrics say so.
//!
//! Ignored until the audit flows are merged (`needs audit-flows`): real packets between pods
//! judged by real policies with `ofnode.io/audit` set — a denied probe logged once, an allowed
//! connection logged when allow is audited, a burst folded with its count, a flood on one
//! rule not stopping another rule's events within the second, and the truth tables identical
//! with the audit on and off.

mod daemon_common;

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use daemon_common::http;
use ofnode::openflow::{Switch, SwitchConfig};
use ofnode::sdn::audit::{AuditTier, Dir, RuleRef, Verdict};
use ofnode_harness::{Daemon, Netns, Ovs, ONE_NODE_SETUP};
use ofnode_proto::{Action, Controller, Message, PacketOut, NO_BUFFER};
use serde_json::Value;

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");
/// Only keeps a broken run from hanging.
const LIMIT: Duration = Duration::from_secs(20);
/// OFPP_CONTROLLER: a packet-out's packet comes from the controller.
const OFPP_CONTROLLER: u32 = 0xffff_fffd;

// ---- harness: the log file, a syslog receiver, a flood of new connections ----

/// The audit log file, read as JSON lines.
struct LogFile {
    path: PathBuf,
}

impl LogFile {
    fn lines(&self) -> Vec<Value> {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.path) {
            let _ = file.read_to_string(&mut text);
        }
        text.lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON: {e}: {line}"))
            })
            .collect()
    }

    /// Waits until `done` accepts the lines written so far; returns them.
    fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + LIMIT;
        loop {
            let lines = self.lines();
            if done(&lines) {
                return lines;
            }
            assert!(
                Instant::now() < deadline,
                "waited {LIMIT:?} for {what}; the log holds:\n{}",
                lines
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The lines about connections from `src` to `dst:dst_port`.
fn lines_between<'a>(lines: &'a [Value], src: &str, dst: &str, dst_port: u16) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["src_ip"] == src && l["dst_ip"] == dst && l["dst_port"] == dst_port)
        .collect()
}

/// The events folded into `lines`.
fn events(lines: &[&Value]) -> u64 {
    lines.iter().filter_map(|l| l["count"].as_u64()).sum()
}

/// A syslog daemon's `/dev/log`: a unix datagram socket the test reads.
struct SyslogReceiver {
    socket: UnixDatagram,
    path: PathBuf,
}

impl SyslogReceiver {
    fn bind(path: &Path) -> SyslogReceiver {
        let socket = UnixDatagram::bind(path).expect("bind the syslog socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        SyslogReceiver {
            socket,
            path: path.to_path_buf(),
        }
    }

    /// Messages until `enough` of them arrived or `LIMIT` passed.
    fn receive(&self, enough: usize) -> Vec<String> {
        let deadline = Instant::now() + LIMIT;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < enough && Instant::now() < deadline {
            if let Ok(n) = self.socket.recv(&mut buf) {
                got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
        got
    }
}

/// New UDP connections from inside `netns` to `dst:port`, each from a fresh source port, at
/// about `per_second` for `duration`; returns how many were sent. Blocks: run it on a thread
/// of its own beside the rest of the test.
#[allow(dead_code)]
fn flood(netns: &Netns, dst: Ipv4Addr, port: u16, per_second: u32, duration: Duration) -> u64 {
    netns
        .run_in(|| {
            let gap = Duration::from_secs(1) / per_second.max(1);
            let start = Instant::now();
            let mut sent = 0;
            let mut n: u32 = 0;
            while start.elapsed() < duration {
                if let Ok(socket) = UdpSocket::bind("0.0.0.0:0") {
                    if socket
                        .send_to(b"flood", SocketAddrV4::new(dst, port))
                        .is_ok()
                    {
                        sent += 1;
                    }
                }
                n += 1;
                if let Some(wait) = (start + gap * n).checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            sent
        })
        .expect("flood from the pod's namespace")
}

// ---- packets made for the switch ----

/// An Ethernet + IPv4 + TCP SYN frame.
fn tcp_frame(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Bytes {
    let mut f = vec![0x0a, 0x58, 0, 0, 0, 2, 0x0a, 0x58, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0];
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    Bytes::from(f)
}

/// A packet-out whose action sends `frame` back to the controllers with `userdata`.
fn controller_packet_out(frame: Bytes, userdata: &[u8]) -> Message {
    Message::PacketOut(PacketOut {
        buffer_id: NO_BUFFER,
        in_port: OFPP_CONTROLLER,
        actions: vec![Action::Controller(Controller {
            max_len: 128,
            userdata: userdata.to_vec(),
            ..Controller::default()
        })],
        data: frame,
    })
}

fn metric(metrics: &str, series: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn packet_ins_of_audited_rules_become_named_lines_in_the_file_and_syslog() {
    let ovs = Ovs::start().expect("start Open vSwitch");
    ovs.add_bridge("br0").expect("br0");
    let dir = ovs.dir().join("audit");
    std::fs::create_dir_all(&dir).unwrap();
    let syslog = SyslogReceiver::bind(&dir.join("log.sock"));
    let log = LogFile {
        path: dir.join("audit.log"),
    };
    let config = dir.join("ofnode.toml");
    std::fs::write(
        &config,
        format!(
            "audit_log = \"{}\"\naudit_syslog = \"unix:{}\"\n",
            log.path.display(),
            syslog.path.display()
        ),
    )
    .unwrap();
    let daemon = Daemon::start(
        &ovs,
        Path::new(OFNODE),
        &["--config", config.to_str().unwrap()],
    )
    .expect("start ofnode");
    let setup: Vec<&str> = ONE_NODE_SETUP
        .iter()
        .copied()
        .chain(["--mode", "networkpolicy"])
        .collect();
    daemon.cli(&setup).expect("setup");
    for (ns, vnid) in [("ns1", "11"), ("ns2", "12")] {
        daemon
            .cli(&["namespace", "set", "--name", ns, "--vnid", vnid])
            .expect("namespace set");
    }
    for (pod, ip) in [("ns1/a", "10.128.2.5"), ("ns2/b", "10.128.2.7")] {
        daemon
            .cli(&["pod", "remote", "set", "--pod", pod, "--ip", ip])
            .expect("pod remote set");
    }
    let policy = serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "web", "namespace": "ns2"},
        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}
    });
    let policy_file = dir.join("web.json");
    std::fs::write(&policy_file, policy.to_string()).unwrap();
    daemon
        .cli(&["netpol", "apply", "--file", policy_file.to_str().unwrap()])
        .expect("netpol apply");

    let (a, b) = (Ipv4Addr::new(10, 128, 2, 5), Ipv4Addr::new(10, 128, 2, 7));
    // ns2/web's first (only) rule holds conjunction id 1; ns2's isolation is keyed by VNID 12.
    let allow = RuleRef {
        tier: AuditTier::NetworkPolicy,
        dir: Dir::Ingress,
        verdict: Verdict::Allow,
        id: 1,
    };
    let isolation = RuleRef {
        verdict: Verdict::Deny,
        id: 12,
        ..allow
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (switch, _events) =
            Switch::start(SwitchConfig::from_target(&ovs.mgmt_target("br0")).unwrap());
        switch
            .wait_connected(LIMIT)
            .await
            .expect("the management connection");
        let mut sent = Vec::new();
        // A burst of one denied connection's packet-ins, another connection, an allowed one.
        for _ in 0..20 {
            sent.push(controller_packet_out(
                tcp_frame(a, 34567, b, 81),
                &isolation.userdata(),
            ));
        }
        sent.push(controller_packet_out(
            tcp_frame(a, 34568, b, 81),
            &isolation.userdata(),
        ));
        sent.push(controller_packet_out(
            tcp_frame(a, 40000, b, 80),
            &allow.userdata(),
        ));
        // An ARP frame is no 5-tuple: counted as bad; a packet-in without the audit userdata
        // is not the audit's.
        let mut arp = tcp_frame(a, 1, b, 2).to_vec();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        sent.push(controller_packet_out(
            Bytes::from(arp),
            &isolation.userdata(),
        ));
        sent.push(controller_packet_out(tcp_frame(a, 2, b, 3), b"other"));
        for msg in sent {
            switch.send_checked(msg).await.expect("packet-out");
        }
    });

    let lines = log.wait_for("21 denied and 1 allowed events", |lines| {
        events(&lines_between(lines, "10.128.2.5", "10.128.2.7", 81)) == 21
            && events(&lines_between(lines, "10.128.2.5", "10.128.2.7", 80)) == 1
    });
    let denied = lines_between(&lines, "10.128.2.5", "10.128.2.7", 81);
    let burst: Vec<&&Value> = denied.iter().filter(|l| l["src_port"] == 34567).collect();
    // One line, unless the burst straddled a second's flush.
    assert!(
        (1..=2).contains(&burst.len()),
        "the burst is folded: {burst:?}"
    );
    let first = burst[0];
    for (field, want) in [
        ("direction", "ingress"),
        ("tier", "networkpolicy"),
        ("namespace", "ns2"),
        ("rule", "default-deny"),
        ("verdict", "deny"),
        ("protocol", "tcp"),
        ("src_pod", "ns1/a"),
        ("dst_pod", "ns2/b"),
    ] {
        assert_eq!(first[field], want, "{field} in {first}");
    }
    assert_eq!(first["policy"], Value::Null, "{first}");
    assert_eq!(
        first["isolated_by"],
        serde_json::json!(["ns2/web"]),
        "{first}"
    );
    assert!(!first["node"].as_str().unwrap_or_default().is_empty());
    let allowed = lines_between(&lines, "10.128.2.5", "10.128.2.7", 80)[0];
    for (field, want) in [
        ("namespace", "ns2"),
        ("policy", "web"),
        ("rule", "ingress[0]"),
        ("verdict", "allow"),
    ] {
        assert_eq!(allowed[field], want, "{field} in {allowed}");
    }
    assert_eq!(allowed["src_port"], 40000);
    assert!(
        !lines.iter().any(|l| l["dst_port"] == 3),
        "a packet-in without audit userdata is not logged"
    );

    let messages = syslog.receive(3);
    assert!(messages.len() >= 3, "syslog got {messages:?}");
    let warning = messages
        .iter()
        .find(|m| m.contains("\"verdict\":\"deny\""))
        .expect("a deny message");
    assert!(warning.starts_with("<132>1 "), "local0.warning: {warning}");
    assert!(
        warning.contains(" ofnode ") && warning.contains(" audit - {"),
        "{warning}"
    );
    let notice = messages
        .iter()
        .find(|m| m.contains("\"verdict\":\"allow\""))
        .expect("an allow message");
    assert!(notice.starts_with("<133>1 "), "local0.notice: {notice}");

    let status = daemon.status_json().expect("status");
    let audit = &status["audit"];
    assert_eq!(audit["events_deny"], 21, "{audit}");
    assert_eq!(audit["events_allow"], 1, "{audit}");
    assert_eq!(audit["bad_packets"], 1, "{audit}");
    assert!(
        audit["log"]
            .as_str()
            .unwrap_or_default()
            .contains(log.path.to_str().unwrap()),
        "{audit}"
    );
    let (code, metrics) = http(&daemon.api, "GET", "/metrics", "");
    assert_eq!(code, 200);
    assert_eq!(
        metric(&metrics, "ofnode_audit_events_total{verdict=\"deny\"}"),
        Some(21)
    );
    assert_eq!(metric(&metrics, "ofnode_audit_bad_packets_total"), Some(1));
    assert_eq!(
        metric(
            &metrics,
            "ofnode_audit_dropped_total{where=\"switch_channel\"}"
        ),
        Some(0)
    );
    assert!(metric(&metrics, "ofnode_audit_lines_total").unwrap_or(0) >= 3);
}
