//! The seed's flows, as typed flow-mods computed from validated inputs.
//!
//! Every function here is pure and mirrors one part of the seed's `ovsController` line for
//! line (with the tables and ports named by `layout.rs`, and the seed's words spelled by
//! `flowmod.rs`), so that a review against ../shared/seeds/ovscontroller.go.txt is a
//! side-by-side read. The policy mode's own flows are `policy/`'s. `readback.rs` reads flows
//! the switch holds back into values.

use std::net::Ipv4Addr;

use ofnode_proto::{Field, FieldRange, FlowMod};

use super::flowmod::{table, Actions, FlowBuilder, Transport};
use super::layout::*;
use super::policy;
use super::types::{HostSubnet, Mode, Pod, Protocol, Service, SetupRequest};
use crate::value::{Cidr, Vnid};

/// The seed's rule version; bump it whenever the flows change.
pub const RULE_VERSION: u8 = 3;

/// The version note's bytes: the policy plugin id and the rule version.
pub fn version_note_bytes(mode: Mode) -> [u8; 2] {
    [policy::of(mode).plugin_id(), RULE_VERSION]
}

/// `"PP.VV"`, as the seed's getVersionNote writes it.
pub fn version_note(mode: Mode) -> String {
    let [plugin, version] = version_note_bytes(mode);
    format!("{plugin:02X}.{version:02X}")
}

/// The rule-version flow; the last flow a setup writes, so a half-done setup never looks done.
/// `table=253, actions=note:PP.VV`
pub fn version_flow(mode: Mode) -> FlowMod {
    table(VERSION_NOTE).note(&version_note_bytes(mode)).build()
}

/// The seed's SetupOVS flows, without table 111 (owned by [`vxlan_multicast_flow`]) and the
/// version note (see [`version_flow`]), followed by the policy mode's flows. One flow a line,
/// as the seed writes them.
#[rustfmt::skip]
pub fn base_flows(setup: &SetupRequest) -> Vec<FlowMod> {
    let cluster = setup.cluster_network;
    let service = setup.service_network;
    let local = setup.local_subnet;
    let gateway = setup.gateway;
    let (vxlan, tun) = (VXLAN_OFPORT, TUN_OFPORT);
    let multicast = Cidr::MULTICAST;
    let source_vnid = FieldRange::whole(REG_SOURCE_VNID);
    let mut flows = vec![
        // Table 0: initial dispatch based on in_port; vxlan0 first.
        table(CLASSIFY).priority(200).in_port(vxlan).arp().nw_src(cluster).nw_dst(local).move_bits(TUNNEL_VNID, source_vnid).goto(VXLAN_INGRESS),
        table(CLASSIFY).priority(200).in_port(vxlan).ip().nw_src(cluster).nw_dst(local).move_bits(TUNNEL_VNID, source_vnid).goto(VXLAN_INGRESS),
        table(CLASSIFY).priority(200).in_port(vxlan).ip().nw_src(cluster).nw_dst(multicast).move_bits(TUNNEL_VNID, source_vnid).goto(VXLAN_INGRESS),
        table(CLASSIFY).priority(150).in_port(vxlan).drop(),
        // tun0
        table(CLASSIFY).priority(250).in_port(tun).ip().nw_dst(multicast).drop(),
        table(CLASSIFY).priority(200).in_port(tun).arp().nw_src(gateway).nw_dst(cluster).goto(ROUTING),
        table(CLASSIFY).priority(200).in_port(tun).ip().goto(ROUTING),
        table(CLASSIFY).priority(150).in_port(tun).drop(),
        // else, from a container
        table(CLASSIFY).priority(100).arp().goto(FROM_POD),
        table(CLASSIFY).priority(100).ip().goto(FROM_POD),
        table(CLASSIFY).priority(0).drop(),
        // Table 10: VXLAN ingress filtering; filled in by host subnets.
        table(VXLAN_INGRESS).priority(0).drop(),
        // Table 20: from a container; validate IP/MAC, assign the VNID; filled in by pods.
        table(FROM_POD).priority(0).drop(),
        // Table 21: from a container; left to connection tracking by network policy.
        table(POLICY_CONNTRACK).priority(0).goto(ROUTING),
        // Table 30: general routing.
        table(ROUTING).priority(300).arp().nw_dst(gateway).output(tun).build(),
        table(ROUTING).priority(200).arp().nw_dst(local).goto(ARP_TO_LOCAL),
        table(ROUTING).priority(100).arp().nw_dst(cluster).goto(ARP_TO_REMOTE),
        table(ROUTING).priority(300).ip().nw_dst(gateway).output(tun).build(),
        table(ROUTING).priority(100).ip().nw_dst(service).goto(TO_SERVICE),
        table(ROUTING).priority(200).ip().nw_dst(local).goto(TO_LOCAL),
        table(ROUTING).priority(100).ip().nw_dst(cluster).goto(TO_REMOTE),
        // Multicast coming from the VXLAN, then from local pods.
        table(ROUTING).priority(50).in_port(vxlan).ip().nw_dst(multicast).goto(MULTICAST_TO_LOCAL),
        table(ROUTING).priority(25).ip().nw_dst(multicast).goto(MULTICAST_OUT),
        table(ROUTING).priority(0).ip().goto(EGRESS_POLICY),
        table(ROUTING).priority(0).arp().drop(),
        // Table 40: ARP to a local container; filled in by pods.
        table(ARP_TO_LOCAL).priority(0).drop(),
        // Table 50: ARP to a remote container; filled in by host subnets.
        table(ARP_TO_REMOTE).priority(0).drop(),
        // Table 60: IP to a service; filled in by services.
        table(TO_SERVICE).priority(200).reg(REG_SOURCE_VNID, 0u32).output(tun).build(),
        table(TO_SERVICE).priority(0).drop(),
        // Table 70: IP to a local container; filled in by pods.
        table(TO_LOCAL).priority(0).drop(),
        // Table 80: IP policy enforcement; the policy mode adds its own below.
        table(POLICY).priority(0).drop(),
        // Table 90: IP to a remote container; filled in by host subnets.
        table(TO_REMOTE).priority(0).drop(),
        // Table 100: egress network policy dispatch; filled in by egress policies.
        table(EGRESS_POLICY).priority(0).output(tun).build(),
        // Table 110: outbound multicast filtering; filled in by local multicast.
        table(MULTICAST_OUT).priority(0).drop(),
        // Table 120: multicast delivery to local pods; filled in by local multicast.
        table(MULTICAST_TO_LOCAL).priority(0).drop(),
    ];
    let mode = policy::of(setup.mode);
    if !mode.replaces_gateway_exemption() {
        // Table 80: all traffic from the local node passes (kubelet probes).
        flows.push(
            table(POLICY)
                .priority(300)
                .ip()
                .nw_src(gateway)
                .output_reg(REG_OUTPUT_PORT)
                .build(),
        );
    }
    flows.extend(mode.base_flows(setup));
    flows
}

/// The seed's setupPodFlows.
#[rustfmt::skip]
pub fn pod_flows(pod: &Pod) -> Vec<FlowMod> {
    let (ofport, ip, mac, vnid) = (pod.ofport, pod.ip, pod.mac, pod.vnid);
    vec![
        // ARP/IP traffic from the container
        table(FROM_POD).priority(100).in_port(ofport).arp().nw_src(ip).arp_sha(mac).load(REG_SOURCE_VNID, vnid).note(pod.sandbox.bytes()).goto(POLICY_CONNTRACK),
        table(FROM_POD).priority(100).in_port(ofport).ip().nw_src(ip).load(REG_SOURCE_VNID, vnid).goto(POLICY_CONNTRACK),
        // ARP request/response to the container (not isolated)
        table(ARP_TO_LOCAL).priority(100).arp().nw_dst(ip).output(ofport).build(),
        // IP traffic to the container
        table(TO_LOCAL).priority(100).ip().nw_dst(ip).load(REG_DESTINATION_VNID, vnid).load(REG_OUTPUT_PORT, ofport).goto(POLICY),
    ]
}

/// The seed's AddHostSubnetRules, with the fixed-VNID annotation variant: the tunnel id is the
/// host subnet's fixed VNID (`load:V->NXM_NX_TUN_ID[0..31]`) or the packet's source VNID
/// (`move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31]`).
pub fn host_subnet_flows(hs: &HostSubnet) -> Vec<FlowMod> {
    let (host, subnet, vxlan) = (hs.host_ip, hs.subnet, VXLAN_OFPORT);
    let to_host = |flow: FlowBuilder| {
        let flow = match hs.fixed_vnid {
            Some(vnid) => flow.load_bits(TUNNEL_VNID, vnid),
            None => flow.move_bits(FieldRange::whole(REG_SOURCE_VNID), TUNNEL_VNID),
        };
        flow.set_field(Field::TunDst, host).output(vxlan).build()
    };
    vec![
        table(VXLAN_INGRESS)
            .priority(100)
            .tun_src(host)
            .goto(ROUTING),
        to_host(table(ARP_TO_REMOTE).priority(100).arp().nw_dst(subnet)),
        to_host(table(TO_REMOTE).priority(100).ip().nw_dst(subnet)),
    ]
}

/// The transport word of a service port's protocol.
fn transport(protocol: Protocol) -> Transport {
    match protocol {
        Protocol::Tcp => Transport::Tcp,
        Protocol::Udp => Transport::Udp,
    }
}

/// The seed's AddServiceRules: a blanket rule for later IP fragments, then one per port.
pub fn service_flows(svc: &Service) -> Vec<FlowMod> {
    let to_service = || table(TO_SERVICE).priority(100);
    let deliver = |flow: FlowBuilder| {
        flow.load(REG_DESTINATION_VNID, svc.vnid)
            .load(REG_OUTPUT_PORT, TUN_OFPORT)
            .goto(POLICY)
    };
    // `ip, nw_dst=IP, ip_frag=later`, then `ip, nw_dst=IP, PROTO, PROTO_dst=PORT`.
    let mut flows = vec![deliver(to_service().ip().nw_dst(svc.ip).later_fragments())];
    flows.extend(svc.ports.iter().map(|port| {
        let flow = to_service().ip().nw_dst(svc.ip);
        deliver(flow.transport(transport(port.protocol)).tp_dst(port.port))
    }));
    flows
}

/// The seed's UpdateLocalMulticastFlows for an enabled VNID (a disabled VNID has no flows):
/// `table=110, reg0=VNID, actions=goto_table:111`, and the delivery to its ports.
pub fn local_multicast_flows(vnid: Vnid, ofports: &[u16]) -> Vec<FlowMod> {
    let mut flows = vec![table(MULTICAST_OUT)
        .reg(REG_SOURCE_VNID, vnid)
        .goto(MULTICAST_TO_VXLAN)];
    if !ofports.is_empty() {
        flows.push(local_multicast_delivery_flow(vnid, ofports));
    }
    flows
}

/// `table=120, priority=100, reg0=VNID, actions=output:P1,output:P2,…`, the outputs sorted as
/// the seed sorts their text ("output:10" < "output:3").
pub fn local_multicast_delivery_flow(vnid: Vnid, ofports: &[u16]) -> FlowMod {
    let mut ports = ofports.to_vec();
    ports.sort_by_key(|port| port.to_string());
    let flow = table(MULTICAST_TO_LOCAL)
        .priority(100)
        .reg(REG_SOURCE_VNID, vnid);
    ports
        .iter()
        .fold(flow.into_actions(), |flow, port| flow.output(*port))
        .build()
}

/// The seed's UpdateVXLANMulticastFlows: table 111's only flow (setup's is the empty case).
/// The remotes are sorted as the seed sorts their `set_field:IP->tun_dst,output:1` text (by
/// the address's text: what follows it is the same for all, and `-` sorts before any digit or
/// dot, so an address that is a prefix of another's text sorts first either way).
pub fn vxlan_multicast_flow(remotes: &[Ipv4Addr]) -> FlowMod {
    let flow = table(MULTICAST_TO_VXLAN).priority(100);
    if remotes.is_empty() {
        return flow.goto(MULTICAST_TO_LOCAL);
    }
    let mut remotes = remotes.to_vec();
    remotes.sort_by_key(|ip| ip.to_string());
    let flow = flow.move_bits(FieldRange::whole(REG_SOURCE_VNID), TUNNEL_VNID);
    remotes
        .iter()
        .fold(flow, |flow, ip| {
            flow.set_field(Field::TunDst, *ip).output(VXLAN_OFPORT)
        })
        .goto(MULTICAST_TO_LOCAL)
}

/// An egress rule's flow (the seed's UpdateEgressNetworkPolicyRules); `dst` None means any.
/// `table=100, reg0=VNID, priority=P, ip[, nw_dst=CIDR], actions=output:2` (allow) or `drop`.
pub fn egress_flow(vnid: Vnid, priority: u16, dst: Option<Cidr>, allow: bool) -> FlowMod {
    let flow = table(EGRESS_POLICY)
        .reg(REG_SOURCE_VNID, vnid)
        .priority(priority)
        .ip();
    let flow = match dst {
        Some(dst) => flow.nw_dst(dst),
        None => flow,
    };
    if allow {
        flow.output(TUN_OFPORT).build()
    } else {
        flow.drop()
    }
}

/// The flow that drops all of a VNID's outgoing traffic when its policy cannot be honoured.
/// `table=100, reg0=VNID, priority=1, actions=drop`
pub fn egress_drop_all_flow(vnid: Vnid) -> FlowMod {
    table(EGRESS_POLICY)
        .reg(REG_SOURCE_VNID, vnid)
        .priority(1)
        .drop()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::core::tests::setup_request;
    use crate::sdn::seed_text::parsed;
    use crate::value::{MacAddr, SandboxId};

    /// Every flow of every kind, with values that exercise each branch (each is checked against
    /// the seed's text in `seed_text.rs`).
    fn every_kind_of_flow() -> Vec<FlowMod> {
        let vnid = Vnid::new(42).unwrap();
        let pod = Pod {
            veth: None,
            ip: Ipv4Addr::new(10, 128, 0, 5),
            mac: "0a:58:0a:80:00:05".parse::<MacAddr>().unwrap(),
            sandbox: "ab".repeat(32).parse::<SandboxId>().unwrap(),
            vnid,
            ofport: 3,
        };
        let hs = HostSubnet {
            host_ip: Ipv4Addr::new(192, 0, 2, 2),
            subnet: "10.128.2.0/23".parse().unwrap(),
            fixed_vnid: Some(vnid),
            vtep_mac: None,
        };
        let svc = Service {
            ip: Ipv4Addr::new(172, 30, 0, 1),
            vnid,
            ports: vec!["tcp/80".parse().unwrap(), "udp/53".parse().unwrap()],
        };
        let mut flows = Vec::new();
        for mode in Mode::ALL {
            flows.extend(base_flows(&setup_request(mode)));
            flows.push(version_flow(mode));
            flows.extend(policy::of(mode).vnid_flows(vnid));
            flows.extend(policy::of(mode).pod_flows(&pod));
        }
        flows.extend(pod_flows(&pod));
        flows.extend(host_subnet_flows(&hs));
        flows.extend(host_subnet_flows(&HostSubnet {
            fixed_vnid: None,
            ..hs
        }));
        flows.extend(service_flows(&svc));
        flows.extend(local_multicast_flows(vnid, &[3, 10]));
        flows.push(vxlan_multicast_flow(&[]));
        flows.push(vxlan_multicast_flow(&[hs.host_ip]));
        flows.push(egress_flow(vnid, 2, Some(hs.subnet), true));
        flows.push(egress_flow(vnid, 1, None, false));
        flows.push(egress_drop_all_flow(vnid));
        flows
    }

    #[test]
    fn every_flow_lives_in_a_table_of_the_layout() {
        for flow in every_kind_of_flow() {
            assert!(
                crate::sdn::layout::table_name(flow.table_id).is_some(),
                "{flow:?} is in a table the layout does not name"
            );
        }
    }

    #[test]
    fn the_version_note_names_the_plugin_and_the_rule_version() {
        assert_eq!(version_note(Mode::Subnet), "00.03");
        assert_eq!(version_note(Mode::Multitenant), "01.03");
        assert_eq!(version_note(Mode::NetworkPolicy), "02.03");
        assert_eq!(
            vec![version_flow(Mode::Multitenant)],
            parsed(&["table=253, actions=note:01.03"])
        );
    }
}
