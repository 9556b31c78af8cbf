//! The parser, verdict, attribution and rendering on outputs captured from ovs-vswitchd 3.1
//! (tests/data/trace/*.txt; each file's header names the command that produced it).

use std::net::Ipv4Addr;

use serde_json::json;

use super::*;
use crate::sdn::NodeState;

/// A captured output without its `#` header.
fn captured(name: &str) -> String {
    let text = match name {
        "pod_to_remote_pod" => include_str!("../../tests/data/trace/pod_to_remote_pod.txt"),
        "pod_to_other_tenant" => include_str!("../../tests/data/trace/pod_to_other_tenant.txt"),
        "pod_to_service" => include_str!("../../tests/data/trace/pod_to_service.txt"),
        "pod_to_local_pod" => include_str!("../../tests/data/trace/pod_to_local_pod.txt"),
        "arp_to_gateway" => include_str!("../../tests/data/trace/arp_to_gateway.txt"),
        "spoofed_source" => include_str!("../../tests/data/trace/spoofed_source.txt"),
        "from_tunnel" => include_str!("../../tests/data/trace/from_tunnel.txt"),
        "conntrack_resubmit" => include_str!("../../tests/data/trace/conntrack_resubmit.txt"),
        "no_match" => include_str!("../../tests/data/trace/no_match.txt"),
        "tunnel_unroutable" => include_str!("../../tests/data/trace/tunnel_unroutable.txt"),
        other => panic!("no capture {other}"),
    };
    text.lines()
        .skip_while(|line| line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect()
}

fn parsed(name: &str) -> Trace {
    parse(&captured(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Node 0 of the capture's cluster, as its desired state.
fn node0_state() -> NodeState {
    let sandbox = |n: u32| format!("{:032x}{n:032x}", 1);
    serde_json::from_value(json!({
        "setup": {"cluster_network": "10.128.0.0/14", "service_network": "172.30.0.0/16",
                  "local_subnet": "10.128.0.0/23", "gateway": "10.128.0.1",
                  "mode": "multitenant"},
        "pods": {
            "10.128.0.10": {"veth": "veth0", "ip": "10.128.0.10", "mac": "0a:58:0a:80:00:0a",
                            "sandbox": sandbox(1), "vnid": 10, "ofport": 3},
            "10.128.0.11": {"veth": "veth1", "ip": "10.128.0.11", "mac": "0a:58:0a:80:00:0b",
                            "sandbox": sandbox(2), "vnid": 10, "ofport": 4},
            "10.128.0.12": {"veth": "veth2", "ip": "10.128.0.12", "mac": "0a:58:0a:80:00:0c",
                            "sandbox": sandbox(3), "vnid": 11, "ofport": 5},
        },
        "host_subnets": {"10.128.2.0/23": {"host_ip": "192.0.2.12", "subnet": "10.128.2.0/23"}},
        "services": {"172.30.0.10": {"ip": "172.30.0.10", "vnid": 10,
                                     "ports": ["tcp/80"]}},
    }))
    .expect("node 0's state")
}

fn attributed(name: &str) -> Trace {
    let mut trace = parsed(name);
    trace.attribute(&OwnerIndex::from_state(&node0_state()).unwrap());
    trace
}

fn ip(text: &str) -> Ipv4Addr {
    text.parse().unwrap()
}

#[test]
fn a_pod_to_a_pod_on_another_node_goes_through_the_tunnel_to_that_node() {
    let trace = attributed("pod_to_remote_pod");
    assert_eq!(trace.bridge, "br0");
    assert_eq!(trace.tables(), [0, 20, 21, 30, 90]);
    let steps: Vec<&Step> = trace.passes[0].steps.iter().collect();
    assert_eq!(steps.len(), 6, "the five of br0 and br-phy's table 0");
    assert_eq!(
        steps[1].flow_text().unwrap(),
        "table=20, priority=100,ip,in_port=3,nw_src=10.128.0.10"
    );
    assert_eq!(steps[1].table_name.as_deref(), Some("from pod"));
    assert_eq!(
        steps[1].actions_text(),
        "load:0xa->NXM_NX_REG0[],goto_table:21"
    );
    assert_eq!(
        steps[4].actions_text(),
        "move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.12->tun_dst,output:1"
    );
    assert_eq!(
        steps[4].actions[0].details[0].text,
        "NXM_NX_TUN_ID[0..31] is now 0xa"
    );
    assert_eq!(
        (steps[5].bridge.as_str(), steps[5].actions_text().as_str()),
        ("br-phy", "NORMAL")
    );
    assert_eq!(
        trace.verdict,
        Verdict::Delivered {
            outputs: vec![Output {
                table: 90,
                to: OutputTo::Tunnel {
                    port: 1,
                    tun_dst: Some(ip("192.0.2.12")),
                    tun_id: Some(10),
                    via: Some("br-phy".into()),
                },
                problem: None,
                port_name: Some("vxlan0".into()),
            }]
        }
    );
    // Who owns what.
    let owners: Vec<&[Owner]> = steps.iter().map(|s| s.owners.as_slice()).collect();
    assert_eq!(owners[0], [Owner::Base]);
    assert!(
        matches!(owners[1], [Owner::Pod { ip: pod_ip, vnid: 10, .. }] if *pod_ip == ip("10.128.0.10"))
    );
    assert_eq!(owners[2], [Owner::Base]);
    assert_eq!(owners[3], [Owner::Base]);
    assert_eq!(
        owners[4],
        [Owner::HostSubnet {
            host_ip: ip("192.0.2.12"),
            subnet: "10.128.2.0/23".into()
        }]
    );
    assert!(owners[5].is_empty(), "br-phy's flow is not the node's");
}

#[test]
fn a_pod_of_another_tenant_is_dropped_by_table_80s_default_flow() {
    let trace = attributed("pod_to_other_tenant");
    assert_eq!(trace.tables(), [0, 20, 21, 30, 70, 80]);
    let Verdict::Dropped { at, reason, failed } = &trace.verdict else {
        panic!("{:?}", trace.verdict);
    };
    let step = trace.step(at.unwrap()).unwrap();
    assert_eq!(step.table, 80);
    assert_eq!(step.flow_text().unwrap(), "table=80, priority=0");
    assert_eq!(step.owners, [Owner::Base]);
    assert_eq!(reason, "the flow's actions drop it");
    assert!(failed.is_empty());
    let text = trace.verdict_text();
    assert_eq!(
        text,
        "dropped in table 80 (policy) by table=80, priority=0 [base]: the flow's actions drop it"
    );
}

#[test]
fn a_service_goes_through_table_60_and_leaves_by_tun0() {
    let trace = attributed("pod_to_service");
    assert_eq!(trace.tables(), [0, 20, 21, 30, 60, 80]);
    let steps = &trace.passes[0].steps;
    assert_eq!(
        steps[4].flow_text().unwrap(),
        "table=60, priority=100,tcp,nw_dst=172.30.0.10,tp_dst=80"
    );
    assert_eq!(
        steps[4].owners,
        [Owner::Service {
            ip: ip("172.30.0.10"),
            vnid: 10
        }]
    );
    assert_eq!(steps[5].owners, [Owner::NetworkPolicy { vnid: 10 }]);
    let outputs = trace.verdict.outputs();
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].to, OutputTo::Port { port: 2 });
    assert_eq!(outputs[0].port_name.as_deref(), Some("tun0"));
    assert_eq!(outputs[0].table, 80);
}

#[test]
fn local_deliveries_name_the_port() {
    let trace = attributed("pod_to_local_pod");
    assert_eq!(trace.tables(), [0, 20, 21, 30, 70, 80]);
    assert_eq!(
        trace.verdict_text(),
        "output to port 4 (veth1), by table 80"
    );
    let arp = attributed("arp_to_gateway");
    assert_eq!(arp.tables(), [0, 20, 21, 30]);
    assert_eq!(arp.verdict_text(), "output to port 2 (tun0), by table 30");
    let note = &arp.passes[0].steps[1].actions[1].text;
    assert!(note.starts_with("note:00.00."), "{note}");
    let from_tunnel = parsed("from_tunnel");
    assert_eq!(from_tunnel.tables(), [0, 10, 30, 70, 80]);
    assert_eq!(
        from_tunnel.verdict.outputs()[0].to,
        OutputTo::Port { port: 3 }
    );
}

#[test]
fn a_spoofed_source_is_dropped_at_table_20_and_no_match_is_a_drop_too() {
    let trace = attributed("spoofed_source");
    assert_eq!(trace.tables(), [0, 20]);
    assert!(trace
        .verdict_text()
        .starts_with("dropped in table 20 (from pod) by table=20, priority=0 [base]"));
    let trace = parsed("no_match");
    assert_eq!(trace.passes[0].steps[0].matched, Matched::NoMatch);
    assert_eq!(
        trace.verdict_text(),
        "dropped in table 0 (classify): no flow matched"
    );
    assert_eq!(trace.passes[0].final_flow, None, "unchanged");
}

#[test]
fn conntrack_recirculation_and_a_nested_resubmit() {
    let trace = parsed("conntrack_resubmit");
    assert_eq!(trace.passes.len(), 2);
    assert_eq!(trace.passes[0].datapath_actions, "ct,recirc(0x1)");
    let recirc = trace.passes[1].recirculation.as_ref().unwrap();
    assert_eq!(recirc.id, 1);
    assert!(recirc.note.contains("ct_state=trk|new"), "{}", recirc.note);
    assert_eq!(trace.tables(), [0, 1, 2, 3]);
    let resumed = &trace.passes[1].steps;
    assert!(resumed[0].resumed);
    assert!(!resumed[1].resumed);
    // The resubmitted tables print deeper, and table 1's actions go on after them.
    assert_eq!(
        resumed[0].actions_text(),
        "ct(commit),drop,resubmit(,2),resubmit(,3),output:2"
    );
    assert_eq!(resumed[1].actions_text(), "load:0x7->NXM_NX_REG3[]");
    assert_eq!(resumed[2].matched, Matched::NoMatch);
    assert_eq!(
        resumed[0].flow_text().unwrap(),
        "table=1, priority=10,ct_state=+new+trk,ip"
    );
    // The empty table 3 in the middle ends nothing: the packet leaves by table 1's output.
    assert_eq!(trace.verdict_text(), "output to port 2, by table 1");
}

#[test]
fn an_output_ovs_cannot_carry_out_is_a_drop_with_its_reason() {
    let trace = parsed("tunnel_unroutable");
    let Verdict::Dropped { at, reason, failed } = &trace.verdict else {
        panic!("{:?}", trace.verdict);
    };
    assert_eq!(reason, "native tunnel routing failed");
    assert_eq!(at.unwrap().table, 0);
    assert_eq!(
        failed[0].to,
        OutputTo::Tunnel {
            port: 3,
            tun_dst: Some(ip("192.0.2.99")),
            tun_id: Some(5),
            via: None
        }
    );
}

#[test]
fn every_capture_renders_one_line_per_table_and_round_trips_as_json() {
    for name in [
        "pod_to_remote_pod",
        "pod_to_other_tenant",
        "pod_to_service",
        "pod_to_local_pod",
        "arp_to_gateway",
        "spoofed_source",
        "from_tunnel",
        "conntrack_resubmit",
        "no_match",
        "tunnel_unroutable",
    ] {
        let trace = attributed(name);
        let text = trace.render();
        let steps: usize = trace.passes.iter().map(|p| p.steps.len()).sum();
        let table_lines = text
            .lines()
            .filter(|l| l.get(..3).is_some_and(|n| n.trim().parse::<u8>().is_ok()))
            .count();
        assert_eq!(table_lines, steps, "{name}:\n{text}");
        assert!(
            text.lines().last().unwrap().starts_with("verdict: "),
            "{text}"
        );
        let json = serde_json::to_value(&trace).unwrap();
        let back: Trace = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json, "{name}");
    }
    let text = attributed("pod_to_remote_pod").render();
    let line = text.lines().find(|l| l.starts_with(" 90 ")).unwrap();
    assert_eq!(
        line,
        " 90 IP to remote   table=90, priority=100,ip,nw_dst=10.128.2.0/23  \
         actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.12->tun_dst,output:1  \
         [host subnet 10.128.2.0/23 on 192.0.2.12]"
    );
    assert!(text.ends_with(
        "verdict: tunnel to 192.0.2.12 (tun_id 0xa) through port 1 (vxlan0) via br-phy, by table 90\n"
    ));
    let json = serde_json::to_value(attributed("pod_to_other_tenant")).unwrap();
    assert_eq!(json["verdict"]["kind"], "dropped");
    assert_eq!(json["verdict"]["at"]["table"], 80);
    assert_eq!(json["passes"][0]["steps"][1]["owners"][0]["kind"], "pod");
    assert_eq!(json["passes"][0]["steps"][5]["matched"]["match"], "");
}

#[test]
fn owner_keys_match_whatever_the_field_order_of_the_seed_text() {
    let mut index = OwnerIndex::new();
    index
        .add_flows(
            &Owner::EgressPolicy { vnid: 10 },
            ["table=100, reg0=10, priority=1, ip, nw_dst=192.0.2.0/24, actions=drop"],
        )
        .unwrap();
    let key = FlowKey {
        table: 100,
        priority: 1,
        match_: "ip,reg0=0xa,nw_dst=192.0.2.0/24".into(),
    };
    let step_key = |match_: &str| {
        FlowKey::of_step(&Step {
            bridge: "br0".into(),
            table: 100,
            table_name: None,
            matched: Matched::Flow {
                priority: 1,
                match_: match_.into(),
                cookie: 0,
            },
            actions: Vec::new(),
            resumed: false,
            owners: Vec::new(),
            indent: 0,
        })
        .unwrap()
    };
    assert_eq!(step_key("ip,reg0=0xa,nw_dst=192.0.2.0/24"), key);
    assert_eq!(index.owners(&key), [Owner::EgressPolicy { vnid: 10 }]);
    assert!(index
        .owners(&step_key("ip,reg0=0xb,nw_dst=192.0.2.0/24"))
        .is_empty());
    assert!(index
        .add_flows(&Owner::Base, ["table=0, no_such_field=1, actions=drop"])
        .is_err());
}

#[test]
fn a_failed_translation_and_the_slow_path_are_kept() {
    // The no_match capture with what ofproto_trace__ appends when translation fails, and the
    // slow path explanation it prints otherwise (ofproto/ofproto-dpif-trace.c).
    let failed =
        captured("no_match") + "\nTranslation failed (Recursion too deep), packet is dropped.\n";
    let trace = parse(&failed).unwrap();
    assert_eq!(
        trace.passes[0].translation_error.as_deref(),
        Some("Recursion too deep")
    );
    assert_eq!(
        trace.verdict_text(),
        "dropped in table 0 (classify): translation failed: Recursion too deep"
    );
    let slow = captured("arp_to_gateway")
        + "\nThis flow is handled by the userspace slow path because it:\n  - Sends \"packet-in\" messages to the OpenFlow controller.\n";
    let trace = parse(&slow).unwrap();
    assert_eq!(
        trace.passes[0].notes.len(),
        2,
        "{:?}",
        trace.passes[0].notes
    );
    assert_eq!(trace.verdict.outputs().len(), 1);
}

/// A capture's drop in table 80 as the NetworkPolicy mode's isolation flow would report it:
/// the same text with that flow's match, priority and verdict cookie (hand-edited, not
/// captured: the cookie's format is `sdn::audit`'s).
fn isolated_capture(cookie: u64) -> String {
    captured("pod_to_other_tenant").replace(
        "80. priority 0\n",
        &format!("80. ip,reg1=0x65, priority 100, cookie {cookie:#x}\n"),
    )
}

#[test]
fn a_verdict_flows_cookie_names_the_policy_rule_that_decided() {
    use crate::sdn::audit::{AuditTier, Dir, RuleRef, Verdict as RuleVerdict};
    let core = crate::sdn::core::audit_names::tests::world();
    let isolation = RuleRef {
        tier: AuditTier::NetworkPolicy,
        dir: Dir::Ingress,
        verdict: RuleVerdict::Deny,
        id: 101,
    };
    let mut trace = parse(&isolated_capture(isolation.cookie())).unwrap();
    trace.attribute(&OwnerIndex::from_state(core.state()).unwrap());
    trace.name_rules(&core.rule_namer());
    let decided =
        "networkpolicy ns1 ingress default-deny: deny (isolated by ns1/ingress-only, ns1/web)";
    assert_eq!(
        trace.verdict_text(),
        format!(
            "dropped in table 80 (policy) by cookie={:#x}, table=80, priority=100,ip,reg1=0x65 \
             [{decided}]: the flow's actions drop it",
            isolation.cookie()
        )
    );
    assert!(
        trace.render().ends_with(&format!("policy: {decided}\n")),
        "{}",
        trace.render()
    );
    let json = serde_json::to_value(&trace).unwrap();
    let owner = &json["passes"][0]["steps"][5]["owners"][0];
    assert_eq!(owner["kind"], "policy_rule");
    assert_eq!(owner["rule"], "default-deny");
    let back: Trace = serde_json::from_value(json).unwrap();
    assert_eq!(back, trace);

    // A bare copy of the state names it the same; a rule it does not hold is named by its
    // tier, direction, verdict and id; a cookie that is no verdict's names nothing.
    let mut bare = parse(&isolated_capture(isolation.cookie())).unwrap();
    bare.name_rules(&crate::sdn::core::audit_names::RuleNamer::of_state(
        core.state(),
    ));
    assert_eq!(bare.policy_rules(), trace.policy_rules());
    let gone = RuleRef {
        id: 999,
        ..isolation
    };
    let mut unknown = parse(&isolated_capture(gone.cookie())).unwrap();
    unknown.name_rules(&core.rule_namer());
    assert_eq!(
        unknown.policy_rules()[0].to_string(),
        "networkpolicy - #999: deny"
    );
    let mut foreign = parse(&isolated_capture(0x1f)).unwrap();
    foreign.name_rules(&core.rule_namer());
    assert!(foreign.policy_rules().is_empty());
}
