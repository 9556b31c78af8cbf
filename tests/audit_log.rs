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
//! And real packets between pods
//! judged by real policies with `ofnode.io/audit` set — a denied probe logged once, an allowed
//! connection logged when allow is audited, a burst folded with its count, a flood on one
//! rule not stopping another rule's events within the second, the truth tables identical
//! with the audit on and off, and an AdminNetworkPolicy's Deny logged with its rule's name.

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
use ofnode_harness::probe::{flood, Connection};
use ofnode_harness::reachability::{Model, Probe, Reachability};
use ofnode_harness::{
    Cluster, ClusterOptions, Control, Daemon, Endpoint, Mode, Ovs, Pod, ONE_NODE_SETUP,
};
use ofnode_proto::{Action, Controller, Message, PacketOut, NO_BUFFER};
use serde_json::Value;

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");
/// Only keeps a broken run from hanging.
const LIMIT: Duration = Duration::from_secs(20);
/// OFPP_CONTROLLER: a packet-out's packet comes from the controller.
const OFPP_CONTROLLER: u32 = 0xffff_fffd;

// ---- harness: the log file, a syslog receiver ----

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

/// A daemon on a fresh OVS writing its audit log (JSON) and syslog to the OVS directory, set
/// up in networkpolicy mode with namespaces ns1 (VNID 11) and ns2 (VNID 12), pods ns1/a
/// (10.128.2.5) and ns2/b (10.128.2.7) known, and policy ns2/web allowing ingress on port 80.
struct Audited {
    ovs: Ovs,
    daemon: Daemon,
    log: LogFile,
    syslog: SyslogReceiver,
}

const POD_A: Ipv4Addr = Ipv4Addr::new(10, 128, 2, 5);
const POD_B: Ipv4Addr = Ipv4Addr::new(10, 128, 2, 7);

fn audited_daemon() -> Audited {
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
    for (pod, ip) in [("ns1/a", POD_A), ("ns2/b", POD_B)] {
        daemon
            .cli(&[
                "pod",
                "remote",
                "set",
                "--pod",
                pod,
                "--ip",
                &ip.to_string(),
            ])
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
    Audited {
        ovs,
        daemon,
        log,
        syslog,
    }
}

/// ns2/web's first (only) rule: its conjunction id is 1.
const WEB_INGRESS_0: RuleRef = RuleRef {
    tier: AuditTier::NetworkPolicy,
    dir: Dir::Ingress,
    verdict: Verdict::Allow,
    id: 1,
};
/// ns2's isolation (ingress), keyed by its VNID.
const NS2_ISOLATION: RuleRef = RuleRef {
    tier: AuditTier::NetworkPolicy,
    dir: Dir::Ingress,
    verdict: Verdict::Deny,
    id: 12,
};

/// Sends `messages` through a connection of ofnode's library to the bridge's management
/// socket (the daemon's own connection is another one).
fn send_to_switch(ovs: &Ovs, messages: Vec<Message>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let cfg = SwitchConfig::from_target(&ovs.mgmt_target("br0")).unwrap();
        let (switch, _events) = Switch::start(cfg);
        switch
            .wait_connected(LIMIT)
            .await
            .expect("the management connection");
        for msg in messages {
            switch.send_checked(msg).await.expect("packet-out");
        }
    });
}

#[test]
fn packet_ins_of_audited_rules_become_named_lines_in_the_file_and_syslog() {
    let Audited {
        ovs,
        daemon,
        log,
        syslog,
    } = audited_daemon();
    let (a, b) = (POD_A, POD_B);
    let (isolation, allow) = (NS2_ISOLATION, WEB_INGRESS_0);
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
    // An ARP frame is no 5-tuple: counted as bad; a packet-in without the audit userdata is
    // not the audit's.
    let mut arp = tcp_frame(a, 1, b, 2).to_vec();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    sent.push(controller_packet_out(
        Bytes::from(arp),
        &isolation.userdata(),
    ));
    sent.push(controller_packet_out(tcp_frame(a, 2, b, 3), b"other"));
    send_to_switch(&ovs, sent);

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

#[test]
fn an_audit_log_that_cannot_be_opened_stops_the_start_with_the_reason() {
    let ovs = Ovs::start().expect("start Open vSwitch");
    ovs.add_bridge("br0").expect("br0");
    let dir = ovs.dir().join("audit");
    std::fs::create_dir_all(&dir).unwrap();
    // A file where the log's directory should be.
    std::fs::write(dir.join("not-a-dir"), "").unwrap();
    let config = dir.join("ofnode.toml");
    std::fs::write(
        &config,
        format!(
            "audit_log = \"{}\"\n",
            dir.join("not-a-dir/audit.log").display()
        ),
    )
    .unwrap();
    // The API socket is bound before the node starts: the daemon may answer, then exit.
    let started = Daemon::start(
        &ovs,
        Path::new(OFNODE),
        &["--config", config.to_str().unwrap()],
    );
    let log = match started {
        Err(err) => err.to_string(),
        Ok(daemon) => {
            let deadline = Instant::now() + LIMIT;
            while daemon.pid().is_some_and(ofnode_harness::pid_alive) {
                assert!(Instant::now() < deadline, "the daemon must not start");
                std::thread::sleep(Duration::from_millis(50));
            }
            daemon.log_tail(30)
        }
    };
    assert!(
        log.contains("audit_log") && log.contains("cannot open"),
        "{log}"
    );
}

// ---- real packets between pods, judged by audited policies (needs the audit flows) ----

/// One node in networkpolicy mode with the x, y, z × a, b, c model, its daemon restarted
/// with the audit log written to its OVS directory. Returns the cluster, the model and the
/// log.
fn audited_cluster() -> (Cluster, Model, LogFile) {
    let mut cluster = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(OFNODE.into()),
        echo: false,
    })
    .expect("cluster");
    let dir = cluster.node(0).ovs().dir().join("audit");
    std::fs::create_dir_all(&dir).unwrap();
    let log = LogFile {
        path: dir.join("audit.log"),
    };
    let config = dir.join("ofnode.toml");
    std::fs::write(&config, format!("audit_log = \"{}\"\n", log.path.display())).unwrap();
    cluster
        .node_mut(0)
        .daemon_mut()
        .expect("an ofnode daemon")
        .restart_with(&["--config", config.to_str().unwrap()])
        .expect("restart with the audit log");
    let model = Model::create(&cluster, vnid).expect("model");
    (cluster, model, log)
}

fn vnid(namespace: &str) -> u32 {
    match namespace {
        "x" => 11,
        "y" => 12,
        _ => 13,
    }
}

/// `ofnode namespace set --name NS --vnid N --label ns=NS --audit SETTING` (its labels kept).
fn audit_namespace(cluster: &Cluster, namespace: &str, setting: &str) {
    let vnid = vnid(namespace).to_string();
    let label = format!("ns={namespace}");
    cluster
        .node(0)
        .cli(&[
            "namespace",
            "set",
            "--name",
            namespace,
            "--vnid",
            &vnid,
            "--label",
            &label,
            "--audit",
            setting,
        ])
        .expect("namespace set --audit");
}

/// A NetworkPolicy as kubectl prints it, with `ofnode.io/audit` when `audit` is given.
fn netpol(namespace: &str, name: &str, audit: Option<&str>, spec: Value) -> Value {
    let mut policy = serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec
    });
    if let Some(audit) = audit {
        policy["metadata"]["annotations"] = serde_json::json!({ "ofnode.io/audit": audit });
    }
    policy
}

/// One UDP datagram from `from` (source port `sport`) to `to:port`: one new connection.
fn udp_once(from: &Pod, to: Ipv4Addr, sport: u16, port: u16) {
    from.netns()
        .run_in(|| {
            let socket = UdpSocket::bind(("0.0.0.0", sport)).expect("bind the source port");
            socket
                .send_to(b"probe", SocketAddrV4::new(to, port))
                .expect("send");
        })
        .expect("in the pod's namespace");
}

fn pod<'a>(model: &'a Model, id: &str) -> &'a Pod {
    &model.pod(id).pod
}

#[test]
fn a_denied_probe_is_logged_once_with_its_rule_and_5_tuple() {
    let (cluster, model, log) = audited_cluster();
    let isolate_a = netpol(
        "x",
        "isolate-a",
        None,
        serde_json::json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": []}),
    );
    cluster.netpol_apply(&isolate_a).expect("apply");
    audit_namespace(&cluster, "x", "deny");
    let (from, to) = (pod(&model, "y/b"), pod(&model, "x/a"));
    udp_once(from, to.ip, 40001, 80);
    let src = from.ip.to_string();
    let dst = to.ip.to_string();
    log.wait_for("the denied probe", |lines| {
        !lines_between(lines, &src, &dst, 80).is_empty()
    });
    // Later flushes add nothing: the probe was one new connection.
    std::thread::sleep(Duration::from_secs(2));
    let lines = log.lines();
    let denied = lines_between(&lines, &src, &dst, 80);
    assert_eq!(denied.len(), 1, "{denied:?}");
    let line = denied[0];
    for (field, want) in [
        ("direction", "ingress"),
        ("tier", "networkpolicy"),
        ("namespace", "x"),
        ("rule", "default-deny"),
        ("verdict", "deny"),
        ("protocol", "udp"),
        ("src_pod", "y/b"),
        ("dst_pod", "x/a"),
    ] {
        assert_eq!(line[field], want, "{field} in {line}");
    }
    assert_eq!(line["src_port"], 40001);
    assert_eq!(line["count"], 1);
    assert_eq!(line["isolated_by"], serde_json::json!(["x/isolate-a"]));
}

#[test]
fn an_allowed_connection_is_logged_when_allow_is_audited() {
    let (cluster, model, log) = audited_cluster();
    let allow_y = netpol(
        "x",
        "allow-y",
        Some("allow"),
        serde_json::json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}],
                         "ports": [{"port": 80, "protocol": "TCP"}]}]
        }),
    );
    cluster.netpol_apply(&allow_y).expect("apply");
    let (from, to) = (pod(&model, "y/b"), pod(&model, "x/a"));
    let _connection = Connection::open(from, to.ip, 80).expect("allowed: connects");
    let (src, dst) = (from.ip.to_string(), to.ip.to_string());
    let lines = log.wait_for("the allowed connection", |lines| {
        !lines_between(lines, &src, &dst, 80).is_empty()
    });
    let line = lines_between(&lines, &src, &dst, 80)[0];
    for (field, want) in [
        ("namespace", "x"),
        ("policy", "allow-y"),
        ("rule", "ingress[0]"),
        ("verdict", "allow"),
        ("protocol", "tcp"),
    ] {
        assert_eq!(line[field], want, "{field} in {line}");
    }
    assert_eq!(line["count"], 1, "one connection, one event: {line}");
}

#[test]
fn a_burst_of_one_denied_connection_is_folded_into_a_line_with_its_count() {
    let (cluster, model, log) = audited_cluster();
    let isolate_a = netpol(
        "x",
        "isolate-a",
        Some("deny"),
        serde_json::json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": []}),
    );
    cluster.netpol_apply(&isolate_a).expect("apply");
    let (from, to) = (pod(&model, "z/b"), pod(&model, "x/a"));
    // The same 5-tuple again and again: each is a new (uncommitted, dropped) connection.
    from.netns()
        .run_in(|| {
            let socket = UdpSocket::bind(("0.0.0.0", 40002)).unwrap();
            for _ in 0..8 {
                let _ = socket.send_to(b"burst", SocketAddrV4::new(to.ip, 81));
            }
        })
        .unwrap();
    let (src, dst) = (from.ip.to_string(), to.ip.to_string());
    let lines = log.wait_for("the burst", |lines| {
        events(&lines_between(lines, &src, &dst, 81)) >= 8
    });
    let burst = lines_between(&lines, &src, &dst, 81);
    assert!(
        (1..=2).contains(&burst.len()),
        "8 identical events within a second fold into one line (two if a flush fell between): {burst:?}"
    );
    assert_eq!(events(&burst), 8);
}

#[test]
fn a_flood_on_one_rule_does_not_stop_another_rules_events_within_the_second() {
    let (cluster, model, log) = audited_cluster();
    let isolate_a = netpol(
        "x",
        "isolate-a",
        Some("deny"),
        serde_json::json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": []}),
    );
    let allow_z = netpol(
        "x",
        "allow-z",
        Some("allow"),
        serde_json::json!({
            "podSelector": {"matchLabels": {"pod": "c"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "z"}}}]}]
        }),
    );
    cluster.netpol_apply(&isolate_a).expect("apply");
    cluster.netpol_apply(&allow_z).expect("apply");
    let (flooder, victim) = (pod(&model, "y/a"), pod(&model, "x/a"));
    let (other_src, other_dst) = (pod(&model, "z/b"), pod(&model, "x/c"));
    let flood_secs = Duration::from_secs(4);
    let (sent, probe_at) = std::thread::scope(|scope| {
        let flood = scope.spawn(|| flood(flooder.netns(), victim.ip, 80, 3_000, flood_secs));
        std::thread::sleep(Duration::from_millis(1500));
        let at = std::time::SystemTime::now();
        udp_once(other_src, other_dst.ip, 40003, 81);
        (flood.join().expect("flood"), at)
    });
    assert!(sent > 6_000, "the flood sent {sent} new connections");
    let (src, dst) = (other_src.ip.to_string(), other_dst.ip.to_string());
    let lines = log.wait_for("the other rule's event", |lines| {
        !lines_between(lines, &src, &dst, 81).is_empty()
    });
    let line = lines_between(&lines, &src, &dst, 81)[0];
    assert_eq!(line["policy"], "allow-z", "{line}");
    // Its line carries the time its packet-in arrived: within the second of the probe.
    let logged = line["time"].as_str().unwrap_or_default().to_string();
    let probe = ofnode::sdn::audit_log::line::rfc3339(probe_at);
    assert!(
        logged[..19] == probe[..19] || seconds_apart(&logged, &probe) <= 1,
        "logged at {logged}, sent at {probe}"
    );
    // The flood's rule was metered: far fewer events than connections.
    let (fsrc, fdst) = (flooder.ip.to_string(), victim.ip.to_string());
    let flooded = events(&lines_between(&lines, &fsrc, &fdst, 80));
    assert!(
        flooded > 0 && flooded < sent / 4,
        "{flooded} of {sent} logged"
    );
}

/// Seconds between two RFC 3339 times of the same day.
fn seconds_apart(a: &str, b: &str) -> i64 {
    let secs = |t: &str| -> i64 {
        let hms = &t[11..19];
        hms.split(':')
            .map(|p| p.parse::<i64>().unwrap_or(0))
            .fold(0, |acc, p| acc * 60 + p)
    };
    (secs(a) - secs(b)).abs()
}

#[test]
fn the_truth_tables_are_identical_with_the_audit_on_and_off() {
    let (cluster, model, log) = audited_cluster();
    let policies = [
        netpol(
            "x",
            "allow-y-80",
            None,
            serde_json::json!({
                "podSelector": {},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}],
                             "ports": [{"port": 80}]}]
            }),
        ),
        netpol(
            "z",
            "egress-to-x",
            None,
            serde_json::json!({
                "podSelector": {"matchLabels": {"pod": "b"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "x"}}}]}]
            }),
        ),
    ];
    for policy in &policies {
        cluster.netpol_apply(policy).expect("apply");
    }
    // The tables with the audit off, observed and then confirmed (a denied pair denied on
    // every try), are what the probes must find with it on.
    let off = model.observe(&Probe::ALL, Duration::from_secs(1));
    let expected: Vec<(Probe, &Reachability)> = Probe::ALL.iter().copied().zip(&off).collect();
    model
        .check(&expected)
        .expect("the tables with the audit off are stable");
    assert!(log.lines().is_empty(), "nothing audited yet");
    for namespace in ["x", "y", "z"] {
        audit_namespace(&cluster, namespace, "allow,deny");
    }
    model
        .check(&expected)
        .expect("the same tables with the audit on");
    log.wait_for("lines of the audited probes", |lines| !lines.is_empty());
}

#[test]
fn the_packet_in_format_is_asked_for_again_after_ovs_vswitchd_restarts() {
    let Audited {
        ovs, daemon, log, ..
    } = audited_daemon();
    let denied = |sport: u16| {
        controller_packet_out(
            tcp_frame(POD_A, sport, POD_B, 81),
            &NS2_ISOLATION.userdata(),
        )
    };
    send_to_switch(&ovs, vec![denied(1001)]);
    log.wait_for("the first event", |lines| {
        lines.iter().any(|l| l["src_port"] == 1001)
    });
    let connects = |daemon: &Daemon| -> u64 {
        let (_, metrics) = http(&daemon.api, "GET", "/metrics", "");
        metric(&metrics, "ofnode_switch_connects_total").unwrap_or(0)
    };
    let before = connects(&daemon);
    ovs.kill_vswitchd();
    ovs.start_vswitchd().expect("restart ovs-vswitchd");
    let deadline = Instant::now() + LIMIT;
    while connects(&daemon) <= before {
        assert!(Instant::now() < deadline, "the daemon did not reconnect");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A restarted ovs-vswitchd sends OpenFlow 1.3 PACKET_INs (no userdata) until asked again.
    send_to_switch(&ovs, vec![denied(1002)]);
    let lines = log.wait_for("the event after the restart", |lines| {
        lines.iter().any(|l| l["src_port"] == 1002)
    });
    let after = lines.iter().find(|l| l["src_port"] == 1002).unwrap();
    assert_eq!(after["rule"], "default-deny", "{after}");
    let status = daemon.status_json().expect("status");
    assert_eq!(status["audit"]["bad_packets"], 0, "{status}");
}

#[test]
fn an_admin_tier_deny_is_logged_with_its_policy_and_rule_name() {
    let (cluster, model, log) = audited_cluster();
    let anp = serde_json::json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": "no-z", "annotations": {"ofnode.io/audit": "deny"}},
        "spec": {
            "priority": 10,
            "subject": {"namespaces": {"matchLabels": {"ns": "x"}}},
            "ingress": [{"name": "deny-from-z", "action": "Deny",
                         "from": [{"namespaces": {"matchLabels": {"ns": "z"}}}]}]
        }
    });
    cluster
        .node(0)
        .admin_apply(&anp.to_string())
        .expect("anp apply");
    let (from, to) = (pod(&model, "z/c"), pod(&model, "x/b"));
    udp_once(from, to.ip, 40004, 80);
    let (src, dst) = (from.ip.to_string(), to.ip.to_string());
    let lines = log.wait_for("the admin tier's deny", |lines| {
        !lines_between(lines, &src, &dst, 80).is_empty()
    });
    let line = lines_between(&lines, &src, &dst, 80)[0];
    for (field, want) in [
        ("direction", serde_json::json!("ingress")),
        ("tier", serde_json::json!("admin")),
        ("namespace", Value::Null),
        ("policy", serde_json::json!("no-z")),
        ("verdict", serde_json::json!("deny")),
        ("src_pod", serde_json::json!("z/c")),
        ("dst_pod", serde_json::json!("x/b")),
    ] {
        assert_eq!(line[field], want, "{field} in {line}");
    }
    assert_eq!(
        line["rule"], "deny-from-z",
        "the rule by its own name: {line}"
    );
    // A pod of y is not the ANP's: it is not denied, and nothing is logged for it.
    let other = pod(&model, "y/c");
    udp_once(other, to.ip, 40005, 80);
    std::thread::sleep(Duration::from_secs(2));
    let lines = log.lines();
    assert!(
        lines_between(&lines, &other.ip.to_string(), &dst, 80).is_empty(),
        "{lines:?}"
    );
}
