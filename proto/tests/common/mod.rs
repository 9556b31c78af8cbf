//! Shared by the oracle tests: the seed's flows with realistic values, a blocking OpenFlow
//! session over a unix socket, and a fake switch that records what ovs-ofctl sends.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ofnode_harness::cluster::seed_flows::{
    egress_rule_flow, host_subnet_flows, mode_flows, pod_flows, setup_flows, version_note,
    vnid_rule, SeedNet,
};
use ofnode_harness::Mode;
use ofnode_proto::*;

const CLUSTER: &str = "10.128.0.0/14";
const SERVICE: &str = "172.30.0.0/16";
const LOCAL_SUBNET: &str = "10.129.0.0/23";
const GATEWAY: &str = "10.129.0.1";
const POD_IP: &str = "10.129.0.5";
const POD_MAC: &str = "0a:58:0a:81:00:05";
const REMOTE_NODE: &str = "192.0.2.3";
const REMOTE_SUBNET: &str = "10.130.0.0/23";
const SERVICE_IP: &str = "172.30.0.10";

/// The container-ID note of setupPodFlows (32 bytes, dot-separated hex).
fn pod_note() -> String {
    (0..32u8)
        .map(|b| format!("{:02x}", b.wrapping_mul(7).wrapping_add(0x11)))
        .collect::<Vec<_>>()
        .join(".")
}

/// Every flow the seed's SetupOVS, setupPodFlows, AddHostSubnetRules (both forms),
/// AddServiceRules, UpdateEgressNetworkPolicyRules, the multicast updates and the policy
/// plugins' table 80 rules add, with the values a small cluster would use; plus ofnode's own
/// table 80 flows and every `ip_frag` value. The seed's texts come from the harness
/// (`ofnode_harness::cluster::seed_flows`), which also programs br0 with them.
pub fn seed_add_flows() -> Vec<String> {
    let net = SeedNet {
        cluster: CLUSTER,
        service: SERVICE,
        local_subnet: LOCAL_SUBNET,
        gateway: GATEWAY,
    };
    let mut flows = setup_flows(&net);
    flows.push(version_note(Mode::Subnet));
    let (vnid, ofport) = (42, 3);
    flows.extend(pod_flows(ofport, POD_IP, POD_MAC, vnid, &pod_note()));
    flows.extend(host_subnet_flows(REMOTE_NODE, REMOTE_SUBNET, None));
    // The fixed-VNID form, on another remote subnet.
    flows.extend(host_subnet_flows("192.0.2.4", "10.131.0.0/23", Some(7)));
    let action = format!(
        ", priority=100, actions=load:{vnid}->NXM_NX_REG1[], load:2->NXM_NX_REG2[], goto_table:80"
    );
    let base = format!("table=60, ip, nw_dst={SERVICE_IP}");
    flows.extend([
        format!("{base}, ip_frag=later{action}"),
        format!("{base}, tcp, tcp_dst=443{action}"),
        format!("{base}, udp, udp_dst=53{action}"),
    ]);
    // The other ip_frag values ovs-ofctl knows (the seed writes only `later`), each a service
    // flow of its own so all of them are installed side by side.
    flows.extend(
        ["no", "yes", "first", "not_later"].map(|frag| format!("{base}, ip_frag={frag}{action}")),
    );
    // Table 80: the seed's per-VNID rule (EnsureVNIDRules; ofnode's vnid_flow), both policy
    // modes' rules (ofnode's mode_flows, src/sdn/flows.rs).
    flows.push(vnid_rule(vnid));
    flows.extend(mode_flows(Mode::Multitenant));
    flows.extend(mode_flows(Mode::Subnet));
    let r = REMOTE_NODE;
    flows.extend([
        "table=100, reg0=5, priority=1, actions=drop".into(),
        "table=100, reg0=6, cookie=1, priority=65535, actions=drop".into(),
        egress_rule_flow(6, 3, Some("198.51.100.0/24"), true),
        egress_rule_flow(6, 2, Some("198.51.100.77"), false),
        egress_rule_flow(6, 1, None, true),
        "table=110, reg0=5, actions=goto_table:111".into(),
        "table=120, priority=100, reg0=5, actions=output:3,output:4".into(),
        format!("table=111, priority=100, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:{r}->tun_dst,output:1,set_field:192.0.2.4->tun_dst,output:1,goto_table:120"),
    ]);
    flows
}

/// Every delete the seed issues (cleanupPodFlows, DeleteHostSubnetRules, egress policy,
/// DeleteServiceRules, multicast), with the same values.
pub fn seed_delete_flows() -> Vec<String> {
    let p = POD_IP;
    vec![
        format!("ip, nw_dst={p}"),
        format!("ip, nw_src={p}"),
        format!("arp, nw_dst={p}"),
        format!("arp, nw_src={p}"),
        format!("table=10, tun_src={REMOTE_NODE}"),
        format!("table=50, arp, nw_dst={REMOTE_SUBNET}"),
        format!("table=90, ip, nw_dst={REMOTE_SUBNET}"),
        "table=100, reg0=5".into(),
        "table=100, reg0=6, cookie=0/1".into(),
        "table=100, reg0=6, cookie=1/1".into(),
        format!("table=60, ip, nw_dst={SERVICE_IP}"),
        "table=110, reg0=5".into(),
        "table=120, reg0=5".into(),
        // A VNID's table 80 rule, once no pod or service uses the VNID.
        "table=80, reg0=42, reg1=42".into(),
    ]
}

/// Flow-mod options the seed never writes but ovs-ofctl users do: timeouts and flags on adds
/// (kept apart from the seed's flows so each oracle can say which it checks).
pub fn option_add_flows() -> Vec<String> {
    vec![
        "table=100, priority=9, reg0=7, send_flow_rem, check_overlap, reset_counts, actions=drop".into(),
        "table=100, priority=9, reg0=8, idle_timeout=60, hard_timeout=120, no_packet_counts, no_byte_counts, actions=output:2".into(),
        "table=100, priority=9, reg0=9, send_flow_rem, cookie=0x5, actions=output:3".into(),
    ]
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A blocking OpenFlow 1.3 session over a unix socket (the test side of the wire).
pub struct Session {
    stream: UnixStream,
    next_xid: u32,
}

impl Session {
    pub fn new(stream: UnixStream) -> Session {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Session {
            stream,
            next_xid: 1,
        }
    }

    /// Connects to a switch's management socket and exchanges HELLOs.
    pub fn connect(path: &std::path::Path) -> Session {
        let mut s = Session::new(UnixStream::connect(path).unwrap());
        s.send(&Message::Hello(Hello::default()), 0);
        let (_, hello) = s.recv().expect("switch closed before HELLO");
        assert!(
            matches!(hello, Message::Hello(ref h) if h.supports_of13()),
            "{hello:?}"
        );
        s
    }

    pub fn xid(&mut self) -> u32 {
        self.next_xid += 1;
        self.next_xid
    }

    pub fn send(&mut self, msg: &Message, xid: u32) {
        let mut out = BytesMut::new();
        msg.encode(xid, &mut out);
        self.stream.write_all(&out).unwrap();
    }

    /// Reads one frame; `None` at end of stream.
    pub fn recv_frame(&mut self) -> Option<Vec<u8>> {
        let mut header = [0u8; OFP_HEADER_LEN];
        if self.stream.read_exact(&mut header).is_err() {
            return None;
        }
        let len = message_length(&header).expect("bad header from peer");
        let mut frame = header.to_vec();
        frame.resize(len, 0);
        self.stream.read_exact(&mut frame[OFP_HEADER_LEN..]).ok()?;
        Some(frame)
    }

    pub fn recv(&mut self) -> Option<(u32, Message)> {
        self.recv_frame()
            .map(|f| Message::decode(&f).unwrap_or_else(|e| panic!("{e}: {}", hex(&f))))
    }

    /// Sends a request and returns the first message with its xid (errors included).
    pub fn request(&mut self, msg: &Message) -> Message {
        let xid = self.xid();
        self.send(msg, xid);
        loop {
            let (got, reply) = self.recv().expect("switch closed the connection");
            if got == xid {
                return reply;
            }
        }
    }

    /// All flows of the switch, from a flow stats request (following REPLY_MORE parts).
    pub fn dump_flows(&mut self) -> Vec<FlowStats> {
        let xid = self.xid();
        let request = MultipartRequest::Flow(FlowStatsRequest::default());
        self.send(&Message::MultipartRequest(request), xid);
        let mut flows = Vec::new();
        loop {
            let (got, reply) = self.recv().expect("switch closed the connection");
            if got != xid {
                continue;
            }
            let Message::MultipartReply(MultipartReply {
                flags,
                body: MultipartReplyBody::Flow(part),
            }) = reply
            else {
                panic!("unexpected reply {reply:?}");
            };
            flows.extend(part);
            if flags & OFPMPF_REPLY_MORE == 0 {
                return flows;
            }
        }
    }
}

/// Kills and reaps the ovs-ofctl child (by its own PID) when the test ends, and removes the
/// socket file.
pub struct ChildGuard {
    child: Child,
    socket: PathBuf,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// What ovs-ofctl sent, in order (HELLO and handshake traffic excluded).
pub struct Captured {
    pub messages: Vec<(u32, Message)>,
    /// Raw frames of the same messages.
    pub frames: Vec<Vec<u8>>,
}

/// Runs `ovs-ofctl -O OpenFlow13 --no-names ARGS…` against a fake switch listening on a unix
/// socket (`SOCK` in `args` is replaced by its `unix:` target), answering HELLO, FEATURES,
/// barriers, echo and bundle control the way OVS does, and returns what it sent.
pub fn capture_ofctl(args: &[&str]) -> Captured {
    let socket = std::env::temp_dir().join(format!(
        "ofnode-proto-{}-{}.sock",
        std::process::id(),
        CAPTURE_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).unwrap();
    let target = format!("unix:{}", socket.display());
    let args: Vec<String> = args.iter().map(|a| a.replace("SOCK", &target)).collect();
    let child = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--no-names"])
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ovs-ofctl (apt package openvswitch-switch) must be installed");
    let mut guard = ChildGuard {
        child,
        socket: socket.clone(),
    };
    let stream = accept_within(&listener, Duration::from_secs(10));
    let mut session = Session::new(stream);
    let captured = serve(&mut session);
    drop(session);
    let status = guard.child.wait().unwrap();
    let mut stderr = String::new();
    if let Some(mut e) = guard.child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(status.success(), "ovs-ofctl {args:?} failed: {stderr}");
    captured
}

static CAPTURE_SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn accept_within(listener: &UnixListener, limit: Duration) -> UnixStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + limit;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "ovs-ofctl never connected");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Plays the switch until ovs-ofctl hangs up.
fn serve(session: &mut Session) -> Captured {
    let mut captured = Captured {
        messages: Vec::new(),
        frames: Vec::new(),
    };
    while let Some(frame) = session.recv_frame() {
        let (xid, msg) = Message::decode(&frame).unwrap_or_else(|e| panic!("{e}: {}", hex(&frame)));
        let reply = match &msg {
            Message::Hello(_) => Some(Message::Hello(Hello::default())),
            Message::FeaturesRequest => Some(Message::FeaturesReply(SwitchFeatures {
                datapath_id: 1,
                n_buffers: 0,
                n_tables: 254,
                auxiliary_id: 0,
                capabilities: 0x4f,
            })),
            Message::BarrierRequest => Some(Message::BarrierReply),
            Message::EchoRequest(data) => Some(Message::EchoReply(data.clone())),
            Message::GetConfigRequest => Some(Message::GetConfigReply(
                SwitchConfig::with_frag_mode(OFPC_FRAG_NX_MATCH),
            )),
            Message::BundleControl(control) => control.ctrl_type.reply().map(|reply_type| {
                Message::BundleControl(BundleControl {
                    ctrl_type: reply_type,
                    flags: BundleFlags::NONE,
                    properties: Bytes::new(),
                    ..control.clone()
                })
            }),
            _ => None,
        };
        if let Some(reply) = reply {
            session.send(&reply, xid);
        }
        if !matches!(
            msg,
            Message::Hello(_) | Message::FeaturesRequest | Message::EchoRequest(_)
        ) {
            captured.messages.push((xid, msg));
            captured.frames.push(frame);
        }
    }
    captured
}

/// Runs `ovs-ofctl ARGS…` and returns stdout (panics with stderr on failure).
pub fn ofctl(args: &[&str]) -> String {
    let out = Command::new("ovs-ofctl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A temporary file removed when dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(contents: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "ofnode-proto-{}-{}.tmp",
            std::process::id(),
            CAPTURE_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
