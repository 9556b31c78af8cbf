//! Issue 15: the trace engine against real ovs-vswitchd instances of the two-node cluster
//! harness (multitenant mode), asked over their control sockets. `OFNODE_E2E_CONTROL=seed`
//! runs the same checks against the seed's flows written by ovs-ofctl.

use std::net::Ipv4Addr;

use ofnode::sdn::NodeState;
use ofnode::trace::{
    self, ArpOp, IpProto, OutputTo, Owner, OwnerIndex, Packet, Payload, Step, Trace, TraceError,
    Tunnel, Verdict,
};
use ofnode::unixctl::{Unixctl, UnixctlOptions};
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode, Pod, VXLAN_OFPORT};
use ofnode_harness::cluster::{Endpoint, CLUSTER_NETWORK, SERVICE_NETWORK};
use ofnode_harness::Ovs;
use serde_json::json;

const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(172, 30, 0, 10);

/// Two nodes; on node 0 pods `shop/a` and `shop/a2` of tenant 10 and `billing/b` of tenant 11;
/// on node 1 pod `shop/c` of tenant 10; service 172.30.0.10 (tcp/80) of tenant 10.
struct Scenario {
    a: Pod,
    a2: Pod,
    b: Pod,
    c: Pod,
    cluster: Cluster,
}

impl Scenario {
    fn start() -> Scenario {
        let cluster = Cluster::start(ClusterOptions {
            nodes: 2,
            mode: Mode::Multitenant,
            control: Control::from_env(env!("CARGO_BIN_EXE_ofnode")),
            echo: false,
        })
        .unwrap();
        let a = cluster.add_named_pod(0, ("shop", "a"), 10, &[]).unwrap();
        let a2 = cluster.add_named_pod(0, ("shop", "a2"), 10, &[]).unwrap();
        let b = cluster.add_named_pod(0, ("billing", "b"), 11, &[]).unwrap();
        let c = cluster.add_named_pod(1, ("shop", "c"), 10, &[]).unwrap();
        cluster.add_service(SERVICE_IP, 10, &["tcp/80"]).unwrap();
        Scenario {
            a,
            a2,
            b,
            c,
            cluster,
        }
    }

    fn unixctl(&self, node: usize) -> Unixctl {
        Unixctl::new(
            self.cluster.node(node).ovs().vswitchd_ctl(),
            UnixctlOptions::default(),
        )
    }
}

fn tcp_from(pod: &Pod, dst: Ipv4Addr, dst_port: u16) -> Packet {
    Packet {
        in_port: pod.ofport,
        dl_src: Some(pod.mac.parse().unwrap()),
        dl_dst: None,
        tunnel: None,
        payload: Payload::Ip {
            src: pod.ip,
            dst,
            ttl: 64,
            proto: IpProto::Tcp {
                src_port: 40000,
                dst_port,
            },
        },
    }
}

fn icmp_from(pod: &Pod, dst: Ipv4Addr) -> Packet {
    Packet {
        payload: Payload::Ip {
            src: pod.ip,
            dst,
            ttl: 64,
            proto: IpProto::PING,
        },
        ..tcp_from(pod, dst, 0)
    }
}

fn arp_from(pod: &Pod, target: Ipv4Addr) -> Packet {
    Packet {
        payload: Payload::Arp {
            op: ArpOp::Request,
            sender_ip: pod.ip,
            target_ip: target,
            sender_mac: None,
        },
        ..tcp_from(pod, target, 0)
    }
}

/// A packet from node 0's pod `from` to `to` as node 1 receives it through the tunnel.
fn tunnelled(cluster: &Cluster, from: &Pod, to: &Pod) -> Packet {
    Packet {
        in_port: VXLAN_OFPORT,
        tunnel: Some(Tunnel {
            src: cluster.node(from.node).underlay_ip,
            dst: cluster.node(to.node).underlay_ip,
            id: from.vnid,
        }),
        ..tcp_from(from, to.ip, 80)
    }
}

/// What node `index` was asked to do, as its desired state: the attribution ofnode's node
/// will use.
fn node_state(s: &Scenario, index: usize) -> NodeState {
    let node = s.cluster.node(index);
    let remote = s.cluster.node(1 - index);
    let pods: serde_json::Map<String, serde_json::Value> = [&s.a, &s.a2, &s.b, &s.c]
        .into_iter()
        .filter(|pod| pod.node == index)
        .map(|pod| {
            let value = json!({"veth": pod.host_veth, "ip": pod.ip, "mac": pod.mac,
                               "sandbox": pod.sandbox, "vnid": pod.vnid, "ofport": pod.ofport});
            (pod.key(), value)
        })
        .collect();
    serde_json::from_value(json!({
        "setup": {"cluster_network": CLUSTER_NETWORK, "service_network": SERVICE_NETWORK,
                  "local_subnet": node.subnet_cidr(), "gateway": node.gateway,
                  "mode": "multitenant"},
        "pods": pods,
        "host_subnets": {remote.subnet_cidr():
                         {"host_ip": remote.underlay_ip, "subnet": remote.subnet_cidr()}},
        "services": {SERVICE_IP.to_string():
                     {"ip": SERVICE_IP, "vnid": 10, "ports": ["tcp/80"]}},
    }))
    .expect("a valid node state")
}

async fn traced(s: &Scenario, node: usize, packet: &Packet) -> Trace {
    let owners = OwnerIndex::from_state(&node_state(s, node)).unwrap();
    let trace = trace::trace(&mut s.unixctl(node), "br0", packet, &owners)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.cluster.diagnostics()));
    println!("{}", trace.render());
    trace
}

/// Whether `owners` is `pod` alone, named by its key and sandbox id.
fn is_pod(owners: &[Owner], pod: &Pod) -> bool {
    let key = pod.key();
    matches!(owners, [Owner::Pod { pod: owner, sandbox, ip, .. }]
        if *owner == key && *sandbox == pod.sandbox && *ip == pod.ip)
}

fn step_of(trace: &Trace, table: u8) -> &Step {
    trace.bridge_steps().find(|s| s.table == table).unwrap()
}

#[tokio::test]
async fn a_pod_to_a_pod_on_the_other_node_is_tunnelled_to_that_node() {
    let s = Scenario::start();
    let trace = traced(&s, 0, &tcp_from(&s.a, s.c.ip, 80)).await;
    assert_eq!(trace.tables(), [0, 20, 21, 30, 90]);
    let node1 = s.cluster.node(1);
    let outputs = trace.verdict.outputs();
    assert_eq!(outputs.len(), 1, "{:?}", trace.verdict);
    assert_eq!(
        outputs[0].to,
        OutputTo::Tunnel {
            port: VXLAN_OFPORT,
            tun_dst: Some(node1.underlay_ip),
            tun_id: Some(10),
            via: Some("br-phy".into()),
        }
    );
    assert_eq!(outputs[0].port_name.as_deref(), Some("vxlan0"));
    assert_eq!(
        step_of(&trace, 90).owners,
        [Owner::HostSubnet {
            host_ip: node1.underlay_ip,
            subnet: node1.subnet_cidr()
        }]
    );
    assert!(is_pod(&step_of(&trace, 20).owners, &s.a));
    let text = trace.render();
    let owner = format!(
        "pod {} {} (sandbox {}…, VNID 10)",
        s.a.key(),
        s.a.ip,
        &s.a.sandbox[..12]
    );
    assert!(text.contains(&owner), "{text}");
    let expected = format!(
        "verdict: tunnel to {} (tun_id 0xa) through port 1 (vxlan0)",
        node1.underlay_ip
    );
    assert!(text.contains(&expected), "{text}");
    // What the trace says is what packets do.
    assert!(s.a.reaches(s.c.ip).unwrap(), "{}", s.cluster.diagnostics());
    // And the other way round, as node 1 receives it from the tunnel.
    let packet = tunnelled(&s.cluster, &s.a, &s.c);
    let back = traced(&s, 1, &packet).await;
    assert_eq!(back.tables(), [0, 10, 30, 70, 80]);
    let delivered = &back.verdict.outputs()[0];
    assert_eq!(delivered.to, OutputTo::Port { port: s.c.ofport });
    assert_eq!(delivered.port_name.as_deref(), Some(s.c.host_veth.as_str()));
}

#[tokio::test]
async fn a_pod_of_another_tenant_ends_in_a_drop_at_table_80_naming_the_flow() {
    let s = Scenario::start();
    let trace = traced(&s, 0, &tcp_from(&s.a, s.b.ip, 80)).await;
    assert_eq!(trace.tables(), [0, 20, 21, 30, 70, 80]);
    let Verdict::Dropped { at: Some(at), .. } = &trace.verdict else {
        panic!("{:?}", trace.verdict);
    };
    let step = trace.step(*at).unwrap();
    assert_eq!(step.table, 80);
    assert_eq!(step.flow_text().as_deref(), Some("table=80, priority=0"));
    assert_eq!(step.owners, [Owner::Base]);
    assert_eq!(
        trace.verdict_text(),
        "dropped in table 80 (policy) by table=80, priority=0 [base]: the flow's actions drop it"
    );
    // The same tenant on the same node passes table 80 by its VNID's rule.
    let same = traced(&s, 0, &tcp_from(&s.a, s.a2.ip, 80)).await;
    assert_eq!(
        step_of(&same, 80).owners,
        [Owner::NetworkPolicy { vnid: 10 }]
    );
    assert_eq!(
        same.verdict.outputs()[0].to,
        OutputTo::Port { port: s.a2.ofport }
    );
    assert!(
        !s.a.reaches(s.b.ip).unwrap(),
        "the other tenant is blocked for real"
    );
}

#[tokio::test]
async fn a_service_goes_through_table_60() {
    let s = Scenario::start();
    let trace = traced(&s, 0, &tcp_from(&s.a, SERVICE_IP, 80)).await;
    assert_eq!(trace.tables(), [0, 20, 21, 30, 60, 80]);
    assert_eq!(
        step_of(&trace, 60).owners,
        [Owner::Service {
            ip: SERVICE_IP,
            vnid: 10
        }]
    );
    let outputs = trace.verdict.outputs();
    assert_eq!(outputs[0].to, OutputTo::Port { port: 2 });
    assert_eq!(outputs[0].port_name.as_deref(), Some("tun0"));
    // A port the service does not have meets table 60's default drop. (UDP also checks that
    // the flow argument's transport fields suit ovs-vswitchd's parser.)
    let mut udp = tcp_from(&s.a, SERVICE_IP, 80);
    udp.payload = Payload::Ip {
        src: s.a.ip,
        dst: SERVICE_IP,
        ttl: 64,
        proto: IpProto::Udp {
            src_port: 5353,
            dst_port: 80,
        },
    };
    let trace = traced(&s, 0, &udp).await;
    let text = trace.verdict_text();
    assert!(
        text.starts_with("dropped in table 60 (service) by table=60, priority=0 [base]"),
        "{text}"
    );
}

#[tokio::test]
async fn malformed_trace_input_gets_a_clear_error_and_changes_nothing() {
    let s = Scenario::start();
    let node = s.cluster.node(0);
    let before = node.flows().unwrap();
    let mut ctl = s.unixctl(0);
    let bad_port = Packet {
        in_port: 0,
        ..tcp_from(&s.a, s.c.ip, 80)
    };
    let err = trace::trace(&mut ctl, "br0", &bad_port, &())
        .await
        .unwrap_err();
    assert!(matches!(err, TraceError::Packet(_)), "{err}");
    assert!(err.to_string().contains("in_port 0"), "{err}");
    let packet = tcp_from(&s.a, s.c.ip, 80);
    let err = trace::trace(&mut ctl, "br9", &packet, &())
        .await
        .unwrap_err();
    assert!(matches!(err, TraceError::Refused { .. }), "{err}");
    assert!(err.to_string().ends_with("br9: unknown bridge"), "{err}");
    let flow = "in_port=3,ip,no_such_field=1";
    let err = trace::trace_flow(&mut ctl, "br0", flow, &())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("refused to trace `in_port=3,ip,no_such_field=1` on br0"),
        "{text}"
    );
    assert!(text.contains("Bad openflow flow syntax"), "{text}");
    assert!(text.contains("unknown field no_such_field"), "{text}");
    // The connection serves the next trace, and nothing changed on the switch.
    let trace = trace::trace(&mut ctl, "br0", &packet, &()).await.unwrap();
    assert_eq!(trace.tables(), [0, 20, 21, 30, 90]);
    assert_eq!(node.flows().unwrap(), before);
}

/// `ofnode trace … --api SOCK` against node `index`'s daemon: (exit status 0, stdout, stderr).
fn cli_trace(s: &Scenario, index: usize, args: &[&str]) -> (bool, String, String) {
    let daemon = s.cluster.node(index).daemon().expect("an ofnode daemon");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ofnode"))
        .arg("trace")
        .args(args)
        .arg("--api")
        .arg(&daemon.api)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), stdout, stderr)
}

/// The traced bridge's tables in `ofnode trace`'s text: the lines `NNN name  flow…` (other
/// bridges' steps are named `[br-phy]`).
fn text_tables(text: &str) -> Vec<u8> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let table = words.next()?.parse().ok()?;
            (!words.next()?.starts_with('[')).then_some(table)
        })
        .collect()
}

/// `GET PATH` on node `index`'s API socket: (status, body).
fn api_get(s: &Scenario, index: usize, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let daemon = s.cluster.node(index).daemon().expect("an ofnode daemon");
    let mut stream = std::os::unix::net::UnixStream::connect(&daemon.api).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: ofnode\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    let (_, body) = raw.split_once("\r\n\r\n").unwrap_or_default();
    (status.unwrap_or(0), body.to_string())
}

/// The daemon answers the operator's question (`ofnode trace`, its `--json`, `GET
/// /v1/trace`) from what it knows: the pod by key, IP, veth or sandbox prefix, its port and MAC.
#[tokio::test]
async fn the_cli_and_the_api_trace_through_the_daemon() {
    let s = Scenario::start();
    if s.cluster.node(0).daemon().is_none() {
        println!("seed control: no ofnode daemon to ask");
        return;
    }
    let node1 = s.cluster.node(1);
    let (c_ip, b_ip, service) = (
        s.c.ip.to_string(),
        s.b.ip.to_string(),
        SERVICE_IP.to_string(),
    );

    // To a pod on the other node: through the tunnel to that node.
    // (The harness's sandbox ids share their first digits: the whole id.)
    let sandbox = s.a.sandbox.as_str();
    let (ok, text, err) = cli_trace(&s, 0, &["--from", sandbox, "--to", &c_ip, "--dport", "80"]);
    assert!(ok, "{err}\n{}", s.cluster.diagnostics());
    println!("$ ofnode trace --from {sandbox} --to {c_ip} --dport 80\n{text}");
    assert_eq!(text_tables(&text), [0, 20, 21, 30, 90], "{text}");
    let verdict = format!(
        "verdict: tunnel to {} (tun_id 0xa) through port 1 (vxlan0)",
        node1.underlay_ip
    );
    assert!(text.contains(&verdict), "{text}");
    assert!(
        text.contains(&format!("[host subnet {}", node1.subnet_cidr())),
        "{text}"
    );

    // The same as JSON, and from the API: the typed trace.
    let (ok, json, err) = cli_trace(
        &s,
        0,
        &[
            "--from",
            &s.a.host_veth,
            "--to",
            &c_ip,
            "--dport",
            "80",
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let from_cli: Trace = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let path = format!("/v1/trace?from={}&to={c_ip}&dport=80", s.a.ip);
    let (status, body) = api_get(&s, 0, &path);
    assert_eq!(status, 200, "{body}");
    let from_api: Trace = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    for trace in [&from_cli, &from_api] {
        assert_eq!(trace.tables(), [0, 20, 21, 30, 90]);
        let outputs = trace.verdict.outputs();
        assert_eq!(outputs.len(), 1, "{:?}", trace.verdict);
        assert!(
            matches!(outputs[0].to, OutputTo::Tunnel { tun_dst: Some(ip), .. } if ip == node1.underlay_ip),
            "{:?}",
            outputs[0]
        );
        assert!(is_pod(&step_of(trace, 20).owners, &s.a));
    }

    // Another tenant: dropped at table 80, by the flow named.
    let (ok, text, err) = cli_trace(
        &s,
        0,
        &[
            "--from",
            &s.a.ip.to_string(),
            "--to",
            &b_ip,
            "--dport",
            "80",
        ],
    );
    assert!(ok, "{err}");
    println!(
        "$ ofnode trace --from {} --to {b_ip} --dport 80\n{text}",
        s.a.ip
    );
    assert_eq!(text_tables(&text), [0, 20, 21, 30, 70, 80], "{text}");
    assert!(
        text.contains("verdict: dropped in table 80 (policy) by table=80, priority=0 [base]"),
        "{text}"
    );

    // A service: through table 60, to tun0 (the pod named by its key).
    let a_key = s.a.key();
    let (ok, text, err) = cli_trace(
        &s,
        0,
        &[
            "--from", &a_key, "--to", &service, "--proto", "tcp", "--dport", "80",
        ],
    );
    assert!(ok, "{err}");
    println!("$ ofnode trace --from {a_key} --to {service} --proto tcp --dport 80\n{text}");
    assert_eq!(text_tables(&text), [0, 20, 21, 30, 60, 80], "{text}");
    assert!(text.contains(&format!("[service {service}")), "{text}");
    assert!(text.contains("(tun0)"), "{text}");

    // Unknown inputs: a non-zero exit and an error naming what is wrong; the CLI refuses a
    // bad IP before asking, the daemon what it cannot build a packet from.
    let before = s.cluster.node(0).flows().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["--from", "10.128.0.99"],
            "--from \"10.128.0.99\" is not a pod of this node",
        ),
        (
            &["--from", "default/no-such-pod"],
            "--from \"default/no-such-pod\" is not a pod of this node",
        ),
        (&["--from", "no-such-veth"], "is not a pod of this node"),
        (
            &["--from", &s.a.sandbox[..8]],
            "matches 3 pods by sandbox id prefix",
        ),
        (
            &["--from", &s.a.host_veth, "--to", "10.128.0.300"],
            "destination",
        ),
        (
            &["--from", &s.a.host_veth, "--proto", "udp"],
            "--proto udp needs --dport N",
        ),
        (
            &["--from", &s.a.host_veth, "--proto", "icmp", "--dport", "53"],
            "--dport 53 needs --proto tcp or udp",
        ),
        (&["--from", &s.a.host_veth, "--dport", "http"], "--dport"),
    ];
    for (args, expected) in cases {
        let (ok, stdout, stderr) = cli_trace(&s, 0, args);
        assert!(!ok, "{args:?} succeeded: {stdout}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
    let (status, body) = api_get(&s, 0, "/v1/trace?from=10.128.0.99");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("is not a pod of this node"), "{body}");
    let (status, body) = api_get(&s, 0, "/v1/trace?from=veth0&to=nowhere");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        s.cluster.node(0).flows().unwrap(),
        before,
        "a trace changes nothing"
    );
}

const CAPTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/trace");

/// Writes `ovs-appctl ofproto/trace`'s answer with a header saying how it was made.
async fn capture(ctl: &mut Unixctl, name: &str, setup: &str, flow: &str) {
    let text = ctl.call("ofproto/trace", &["br0", flow]).await.unwrap();
    let header = format!(
        "# Captured from ovs-vswitchd 3.1 by `cargo test --test trace -- --ignored capture_trace_outputs`:\n\
         # {setup}\n\
         # ovs-appctl -t vswitchd.ctl ofproto/trace br0 '{flow}'\n"
    );
    std::fs::write(format!("{CAPTURE_DIR}/{name}.txt"), header + &text).unwrap();
}

/// Rewrites tests/data/trace/*.txt, the captured outputs the parser's unit tests read.
#[tokio::test]
#[ignore = "rewrites the captured trace outputs; run by hand after an OVS upgrade"]
async fn capture_trace_outputs() {
    ofnode_harness::init();
    let s = Scenario::start();
    let node0 = "node 0 of the two-node multitenant cluster harness (ofnode's flows); pods \
                 10.128.0.10 (port 3) and 10.128.0.11 (port 4) of VNID 10, 10.128.0.12 (port 5) \
                 of VNID 11; node 1 (192.0.2.12) has 10.128.2.10 of VNID 10; service \
                 172.30.0.10 tcp/80 of VNID 10";
    let mut ctl = s.unixctl(0);
    let cases = [
        ("pod_to_remote_pod", tcp_from(&s.a, s.c.ip, 80)),
        ("pod_to_other_tenant", tcp_from(&s.a, s.b.ip, 80)),
        ("pod_to_service", tcp_from(&s.a, SERVICE_IP, 80)),
        ("pod_to_local_pod", icmp_from(&s.a, s.a2.ip)),
        ("arp_to_gateway", arp_from(&s.a, s.cluster.node(0).gateway)),
        (
            "spoofed_source",
            Packet {
                payload: Payload::Ip {
                    src: Ipv4Addr::new(10, 128, 0, 99),
                    dst: s.a2.ip,
                    ttl: 64,
                    proto: IpProto::PING,
                },
                ..icmp_from(&s.a, s.a2.ip)
            },
        ),
    ];
    for (name, packet) in cases {
        capture(&mut ctl, name, node0, &packet.to_flow().unwrap()).await;
    }
    let node1 = "node 1 of the same cluster: 10.128.2.10 (port 3) of VNID 10";
    let packet = tunnelled(&s.cluster, &s.a, &s.c);
    capture(
        &mut s.unixctl(1),
        "from_tunnel",
        node1,
        &packet.to_flow().unwrap(),
    )
    .await;

    // Conntrack and a resubmit followed by more actions (which OVS prints nested), on a bridge
    // of its own: the seed has no conntrack flows.
    let ovs = Ovs::start().unwrap();
    ovs.add_bridge("br0").unwrap();
    for (port, ofport) in [("p1", 1), ("p2", 2)] {
        ovs.vsctl(&[
            "add-port",
            "br0",
            port,
            "--",
            "set",
            "interface",
            port,
            "type=internal",
            &format!("ofport_request={ofport}"),
        ])
        .unwrap();
    }
    ovs.vsctl(&[
        "add-port",
        "br0",
        "vxlan0",
        "--",
        "set",
        "interface",
        "vxlan0",
        "type=vxlan",
        "options:remote_ip=flow",
        "options:key=flow",
        "ofport_request=3",
    ])
    .unwrap();
    let flows = [
        "table=0, priority=10, in_port=1, ip, actions=ct(table=1)",
        "table=0, priority=10, in_port=2, udp, actions=set_field:0x5->tun_id,set_field:192.0.2.99->tun_dst,output:3",
        "table=1, priority=10, ct_state=+trk+new, ip, actions=ct(commit),resubmit(,2),resubmit(,3),output:2",
        "table=2, priority=5, ip, actions=load:0x7->NXM_NX_REG3[]",
    ];
    for flow in flows {
        ovs.ofctl("add-flow", "br0", &[flow]).unwrap();
    }
    let setup = format!(
        "a bridge with ports 1 and 2, vxlan0 (port 3, no route to 192.0.2.99), and the flows: {}",
        flows.join(" / ")
    );
    let mut ctl = Unixctl::new(ovs.vswitchd_ctl(), UnixctlOptions::default());
    let flow = "in_port=1,tcp,nw_src=192.0.2.1,nw_dst=192.0.2.2,nw_ttl=64,tcp_src=1,tcp_dst=2";
    capture(&mut ctl, "conntrack_resubmit", &setup, flow).await;
    capture(
        &mut ctl,
        "no_match",
        &setup,
        "in_port=2,ip,nw_src=192.0.2.2,nw_dst=192.0.2.1,nw_ttl=64",
    )
    .await;
    let flow = "in_port=2,udp,nw_src=192.0.2.2,nw_dst=192.0.2.1,nw_ttl=64,udp_src=1,udp_dst=2";
    capture(&mut ctl, "tunnel_unroutable", &setup, flow).await;
}
