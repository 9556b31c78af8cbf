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

/// Stateful flows as openshift-sdn's NetworkPolicy plugin and its conntrack mode write them
/// (origin pkg/sdn/plugin/networkpolicy.go, openshift/sdn pkg/network/node/networkpolicy.go
/// and ovscontroller.go), an EgressIP and a NAT'd service through select groups (see
/// [`stateful_groups`]), a 3-dimension conjunction, and the other new fields and actions.
pub fn stateful_add_flows() -> Vec<String> {
    let (c, s, l) = (CLUSTER, SERVICE, LOCAL_SUBNET);
    vec![
        // origin: conntrack in table 21, isolation in tables 80/81.
        format!("table=21, priority=200, ip, nw_dst={s}, actions=goto_table:30"),
        "table=21, priority=100, ip, actions=ct(commit,table=30)".into(),
        "table=80, priority=50, ip, actions=ct(commit,table=81)".into(),
        "table=81, priority=100, ip, ct_state=+trk+est, actions=output:NXM_NX_REG2[]".into(),
        "table=81, priority=0, actions=drop".into(),
        // openshift/sdn: SNAT through conntrack for the cluster network, replies pass.
        format!("table=21, priority=200, ip, nw_dst={c}, ct_state=-rpl, actions=ct(commit,nat(src=0.0.0.0),table=30)"),
        "table=80, priority=200, ip, ct_state=+rpl, actions=output:NXM_NX_REG2[]".into(),
        // A NetworkPolicy allowing tcp/8080 from one pod of VNID 42 to another, isolating it.
        format!("table=80, priority=150, reg1=42, ip, nw_dst={POD_IP}, reg0=42, ip, nw_src=10.129.0.6, tcp, tp_dst=8080, actions=output:NXM_NX_REG2[]"),
        format!("table=80, priority=100, reg1=42, ip, nw_dst={POD_IP}, actions=drop"),
        "table=80, priority=50, reg1=42, actions=output:NXM_NX_REG2[]".into(),
        // useConnTrack: track first, replies back to pods through NAT, egress replies out.
        "table=0, priority=1000, ip, ct_state=-trk, actions=ct(table=0)".into(),
        format!("table=30, priority=250, ip, nw_dst={l}, ct_state=+rpl, actions=ct(nat,table=70)"),
        "table=101, priority=150, ct_state=+rpl, actions=output:2".into(),
        // EgressIP: VNID 42 leaves through select group 42.
        "table=101, priority=100, ip, reg0=42, actions=group:42".into(),
        // A NAT'd service: its backends behind select group 100, replies un-NATed.
        format!("table=60, priority=150, tcp, nw_dst={SERVICE_IP}, tp_dst=80, actions=group:100"),
        format!("table=30, priority=260, ip, nw_dst={l}, ct_state=+trk+est+dnat, actions=ct(nat,table=70)"),
        // A 3-dimension conjunction (sources x destination x ports) and its conj_id flow.
        "table=80, priority=200, ip, reg1=42, nw_src=10.129.0.6, actions=conjunction(1000,1/3)".into(),
        "table=80, priority=200, ip, reg1=42, nw_src=10.129.0.7, actions=conjunction(1000,1/3)".into(),
        format!("table=80, priority=200, ip, reg1=43, nw_dst={POD_IP}, actions=conjunction(1000,2/3),note:0a.0b"),
        "table=80, priority=200, tcp, reg1=44, tp_dst=8080, actions=conjunction(1000,3/3)".into(),
        "table=80, priority=200, tcp, reg1=44, tp_dst=8443, actions=conjunction(1000,3/3)".into(),
        "table=80, priority=200, conj_id=1000, ip, actions=output:NXM_NX_REG2[]".into(),
        // Multicast and failover groups in use.
        "table=120, priority=100, reg0=6, actions=group:7".into(),
        "table=120, priority=100, reg0=7, actions=group:8".into(),
        "table=120, priority=100, reg0=8, actions=group:9".into(),
        // The other new fields and actions.
        "table=82, priority=10, ip, ct_state=+trk+new, ct_zone=5, ct_mark=0x1/0xf, ct_label=0x1/0xff, actions=ct(commit,zone=NXM_NX_REG0[0..15],exec(load:0x1->NXM_NX_CT_MARK[],set_field:0x2->ct_label)),ct_clear,resubmit(,30),resubmit(3,30,ct)".into(),
        "table=82, priority=11, tcp, tcp_flags=+syn-ack, actions=dec_ttl,mod_dl_src:0a:58:0a:81:00:01,mod_dl_dst:0a:58:0a:81:00:02,output:3".into(),
        "table=82, priority=12, ip, ct_state=+trk+est, ct_nw_src=10.129.0.0/23, ct_nw_dst=172.30.0.10, ct_nw_proto=6, ct_tp_dst=80, actions=set_field:0x5/0xf->pkt_mark,move:NXM_NX_CT_MARK[]->NXM_NX_REG3[],goto_table:90".into(),
        "table=82, priority=13, pkt_mark=0x1a/0xff, xreg2=0x100000002, actions=set_field:0x1->xreg3,load:1->NXM_NX_REG9[0..3],output:NXM_NX_REG9[0..3]".into(),
        "table=82, priority=14, ip, actions=ct(commit,force,exec(set_field:0x1/0x1->ct_mark,load:0x100000000000000000->NXM_NX_CT_LABEL[])),ct(commit,nat(dst=10.0.0.128-10.0.0.254:80-90,persistent,hash))".into(),
        "table=82, priority=15, tcp, actions=ct(commit,alg=ftp,table=83)".into(),
        "table=82, priority=16, udp, actions=ct(alg=tftp)".into(),
        "table=82, priority=17, ip, ct_state=+trk+est, actions=ct(nat),write_actions(ct_clear,output:2)".into(),
        // A range of one (ovs-ofctl sends both ends, prints one).
        "table=82, priority=18, ip, actions=ct(commit,nat(dst=10.0.0.128-10.0.0.128:80-80))".into(),
        "table=82, priority=18, tcp, tcp_flags=0x12, ct_state=0x21, actions=set_field:5->in_port,resubmit:3,resubmit(LOCAL,40)".into(),
        "table=82, priority=19, rarp, arp_op=3, actions=drop".into(),
        // A NetworkPolicy allowing an SCTP port; SCTP ports set, loaded and moved; port names
        // of one transport protocol read as the flow's own (OVS keeps them in one slot).
        format!("table=80, priority=150, reg1=42, ip, nw_dst={POD_IP}, sctp, tp_dst=5000, actions=output:NXM_NX_REG2[]"),
        "table=82, priority=20, ip, nw_proto=132, sctp_src=1/0xff, sctp_dst=80, actions=set_field:80->sctp_dst,load:1->OXM_OF_SCTP_SRC[0..3],move:OXM_OF_SCTP_SRC[]->NXM_NX_REG0[0..15]".into(),
        "table=82, priority=21, sctp6, udp_src=5000, actions=drop".into(),
        "table=82, priority=22, tcp, sctp_dst=80, actions=drop".into(),
    ]
}

/// The groups [`stateful_add_flows`] use, in `add-group` text: openshift-sdn's EgressIP
/// select group (one remote egress node, ct(commit) and the tunnel; the local one with the
/// egress IP's pkt_mark), a NAT'd service's backends, multicast (all), failover (ff) and an
/// indirect group.
pub fn stateful_groups() -> Vec<String> {
    vec![
        "group_id=42,type=select,bucket=actions=ct(commit),move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.5->tun_dst,output:1,bucket=actions=set_field:0a:58:0a:81:00:01->eth_dst,set_field:0x1a->pkt_mark,output:2".into(),
        "group_id=100,type=select,bucket=weight:100,actions=ct(commit,nat(dst=10.129.0.5:8080),table=70),bucket=weight:50,actions=ct(commit,nat(dst=10.129.0.6:8080),table=70)".into(),
        "group_id=7,type=all,bucket=actions=output:3,bucket=actions=output:4".into(),
        "group_id=8,type=ff,bucket=watch_port:3,actions=output:3,bucket=watch_port:4,actions=output:4".into(),
        "group_id=9,type=indirect,bucket=actions=group:7".into(),
    ]
}

/// The meters [`audit_add_flows`] use, in `add-meter` text: a per-rule packet-in limit as an
/// audit log would set it (pktps, a burst, statistics), a kbps meter, one of two drop bands.
/// Open vSwitch's userspace datapath has drop bands only (a DSCP-remark band is checked
/// offline, see `audit_dscp_meter`).
pub fn audit_meters() -> Vec<String> {
    vec![
        "meter=1 pktps burst stats bands=type=drop rate=100 burst_size=10".into(),
        "meter=2 kbps bands=type=drop rate=1000".into(),
        "meter=3,pktps,stats,bands=type=drop,rate=5,type=drop,rate=50".into(),
    ]
}

/// A meter with a DSCP-remark band, which ovs-ofctl sends and prints but the userspace
/// datapath refuses (OFPMMFC_BAD_BAND): for the offline oracles only.
pub fn audit_dscp_meter() -> String {
    "meter=4 kbps burst bands=type=dscp_remark rate=1000 burst_size=100 prec_level=2".into()
}

/// Flows an audit log writes: the first packet of a connection copied to the controller
/// with the rule in its userdata and a meter per rule, and every other form of
/// `controller(...)` and `meter:N` (including those ovs-ofctl sends as a plain output to
/// CONTROLLER).
pub fn audit_add_flows() -> Vec<String> {
    vec![
        "table=90, priority=100, ip, reg0=7, ct_state=+trk+new, actions=controller(userdata=00.00.00.07.01,meter_id=1),goto_table:91".into(),
        "table=90, priority=90, ip, ct_state=+trk+new, actions=meter:2,controller(userdata=01.02.03,meter_id=2),goto_table:91".into(),
        "table=91, priority=10, ip, actions=meter:3,output:2".into(),
        "table=92, priority=10, ip, actions=controller(reason=no_match,max_len=100,id=3)".into(),
        "table=92, priority=11, udp, actions=controller(pause,userdata=0a0b)".into(),
        "table=92, priority=12, tcp, actions=controller(max_len=100),controller,controller:55".into(),
        "table=92, priority=13, arp, actions=controller(reason=invalid_ttl)".into(),
        "table=92, priority=14, icmp, actions=controller(id=7,userdata=01.02.03.04.05.06.07.08.09)".into(),
        "table=92, priority=15, reg1=1, actions=controller(reason=action_set,meter_id=3),controller(reason=group),controller(reason=packet_out)".into(),
        "table=92, priority=16, reg1=2, actions=meter:1,controller(userdata=ff,meter_id=1),write_actions(output:2),goto_table:93".into(),
        "table=92, priority=17, reg1=3, actions=CONTROLLER:0,controller(meter_id=0),controller(reason=action,id=0)".into(),
    ]
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
        msg.try_encode(xid, &mut out).unwrap();
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
