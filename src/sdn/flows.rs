//! The seed's flows, as text in `ovs-ofctl add-flow` syntax, computed from validated inputs.
//!
//! Every function here is pure and mirrors one part of the seed's `ovsController` line for
//! line (with the tables and ports named by `layout.rs`), so that a review against
//! ../shared/seeds/ovscontroller.go.txt is a side-by-side read. The policy mode's own flows
//! are `policy/`'s. The text is parsed once by `ofnode_proto` when a flow enters the desired
//! table; `readback.rs` reads flows the switch holds back into values.

use std::net::Ipv4Addr;

use super::layout::*;
use super::policy;
use super::types::{HostSubnet, Mode, Pod, Service, SetupRequest};
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
pub fn version_flow(mode: Mode) -> String {
    format!("table={VERSION_NOTE}, actions=note:{}", version_note(mode))
}

/// The seed's SetupOVS flows, without table 111 (owned by [`vxlan_multicast_flow`]) and the
/// version note (see [`version_flow`]), followed by the policy mode's flows.
pub fn base_flows(setup: &SetupRequest) -> Vec<String> {
    let cluster = setup.cluster_network;
    let service = setup.service_network;
    let local = setup.local_subnet;
    let gateway = setup.gateway;
    let (vxlan, tun) = (VXLAN_OFPORT, TUN_OFPORT);
    let mut flows = vec![
        // Table 0: initial dispatch based on in_port; vxlan0 first.
        format!("table={CLASSIFY}, priority=200, in_port={vxlan}, arp, nw_src={cluster}, nw_dst={local}, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:{VXLAN_INGRESS}"),
        format!("table={CLASSIFY}, priority=200, in_port={vxlan}, ip, nw_src={cluster}, nw_dst={local}, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:{VXLAN_INGRESS}"),
        format!("table={CLASSIFY}, priority=200, in_port={vxlan}, ip, nw_src={cluster}, nw_dst=224.0.0.0/4, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:{VXLAN_INGRESS}"),
        format!("table={CLASSIFY}, priority=150, in_port={vxlan}, actions=drop"),
        // tun0
        format!("table={CLASSIFY}, priority=250, in_port={tun}, ip, nw_dst=224.0.0.0/4, actions=drop"),
        format!("table={CLASSIFY}, priority=200, in_port={tun}, arp, nw_src={gateway}, nw_dst={cluster}, actions=goto_table:{ROUTING}"),
        format!("table={CLASSIFY}, priority=200, in_port={tun}, ip, actions=goto_table:{ROUTING}"),
        format!("table={CLASSIFY}, priority=150, in_port={tun}, actions=drop"),
        // else, from a container
        format!("table={CLASSIFY}, priority=100, arp, actions=goto_table:{FROM_POD}"),
        format!("table={CLASSIFY}, priority=100, ip, actions=goto_table:{FROM_POD}"),
        format!("table={CLASSIFY}, priority=0, actions=drop"),
        // Table 10: VXLAN ingress filtering; filled in by host subnets.
        format!("table={VXLAN_INGRESS}, priority=0, actions=drop"),
        // Table 20: from a container; validate IP/MAC, assign the VNID; filled in by pods.
        format!("table={FROM_POD}, priority=0, actions=drop"),
        // Table 21: from a container; left to connection tracking by network policy.
        format!("table={POLICY_CONNTRACK}, priority=0, actions=goto_table:{ROUTING}"),
        // Table 30: general routing.
        format!("table={ROUTING}, priority=300, arp, nw_dst={gateway}, actions=output:{tun}"),
        format!("table={ROUTING}, priority=200, arp, nw_dst={local}, actions=goto_table:{ARP_TO_LOCAL}"),
        format!("table={ROUTING}, priority=100, arp, nw_dst={cluster}, actions=goto_table:{ARP_TO_REMOTE}"),
        format!("table={ROUTING}, priority=300, ip, nw_dst={gateway}, actions=output:{tun}"),
        format!("table={ROUTING}, priority=100, ip, nw_dst={service}, actions=goto_table:{TO_SERVICE}"),
        format!("table={ROUTING}, priority=200, ip, nw_dst={local}, actions=goto_table:{TO_LOCAL}"),
        format!("table={ROUTING}, priority=100, ip, nw_dst={cluster}, actions=goto_table:{TO_REMOTE}"),
        // Multicast coming from the VXLAN, then from local pods.
        format!("table={ROUTING}, priority=50, in_port={vxlan}, ip, nw_dst=224.0.0.0/4, actions=goto_table:{MULTICAST_TO_LOCAL}"),
        format!("table={ROUTING}, priority=25, ip, nw_dst=224.0.0.0/4, actions=goto_table:{MULTICAST_OUT}"),
        format!("table={ROUTING}, priority=0, ip, actions=goto_table:{EGRESS_POLICY}"),
        format!("table={ROUTING}, priority=0, arp, actions=drop"),
        // Table 40: ARP to a local container; filled in by pods.
        format!("table={ARP_TO_LOCAL}, priority=0, actions=drop"),
        // Table 50: ARP to a remote container; filled in by host subnets.
        format!("table={ARP_TO_REMOTE}, priority=0, actions=drop"),
        // Table 60: IP to a service; filled in by services.
        format!("table={TO_SERVICE}, priority=200, reg0=0, actions=output:{tun}"),
        format!("table={TO_SERVICE}, priority=0, actions=drop"),
        // Table 70: IP to a local container; filled in by pods.
        format!("table={TO_LOCAL}, priority=0, actions=drop"),
        // Table 80: IP policy enforcement; the policy mode adds its own below.
        format!("table={POLICY}, priority=0, actions=drop"),
        // Table 90: IP to a remote container; filled in by host subnets.
        format!("table={TO_REMOTE}, priority=0, actions=drop"),
        // Table 100: egress network policy dispatch; filled in by egress policies.
        format!("table={EGRESS_POLICY}, priority=0, actions=output:{tun}"),
        // Table 110: outbound multicast filtering; filled in by local multicast.
        format!("table={MULTICAST_OUT}, priority=0, actions=drop"),
        // Table 120: multicast delivery to local pods; filled in by local multicast.
        format!("table={MULTICAST_TO_LOCAL}, priority=0, actions=drop"),
    ];
    let mode = policy::of(setup.mode);
    if !mode.replaces_gateway_exemption() {
        // Table 80: all traffic from the local node passes (kubelet probes).
        flows.push(format!(
            "table={POLICY}, priority=300, ip, nw_src={gateway}/32, actions=output:NXM_NX_REG2[]"
        ));
    }
    flows.extend(mode.base_flows(setup));
    flows
}

/// The seed's setupPodFlows.
pub fn pod_flows(pod: &Pod) -> Vec<String> {
    let (ofport, ip, mac, vnid) = (pod.ofport, pod.ip, pod.mac, pod.vnid);
    let note = pod.sandbox.note();
    vec![
        // ARP/IP traffic from the container
        format!("table={FROM_POD}, priority=100, in_port={ofport}, arp, nw_src={ip}, arp_sha={mac}, actions=load:{vnid}->NXM_NX_REG0[], note:{note}, goto_table:{POLICY_CONNTRACK}"),
        format!("table={FROM_POD}, priority=100, in_port={ofport}, ip, nw_src={ip}, actions=load:{vnid}->NXM_NX_REG0[], goto_table:{POLICY_CONNTRACK}"),
        // ARP request/response to the container (not isolated)
        format!("table={ARP_TO_LOCAL}, priority=100, arp, nw_dst={ip}, actions=output:{ofport}"),
        // IP traffic to the container
        format!("table={TO_LOCAL}, priority=100, ip, nw_dst={ip}, actions=load:{vnid}->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:{POLICY}"),
    ]
}

/// The seed's AddHostSubnetRules, with the fixed-VNID annotation variant.
pub fn host_subnet_flows(hs: &HostSubnet) -> Vec<String> {
    let (host, subnet, vxlan) = (hs.host_ip, hs.subnet, VXLAN_OFPORT);
    let tunnel_id = match hs.fixed_vnid {
        Some(vnid) => format!("load:{vnid}->NXM_NX_TUN_ID[0..31]"),
        None => "move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31]".to_string(),
    };
    vec![
        format!("table={VXLAN_INGRESS}, priority=100, tun_src={host}, actions=goto_table:{ROUTING}"),
        format!("table={ARP_TO_REMOTE}, priority=100, arp, nw_dst={subnet}, actions={tunnel_id},set_field:{host}->tun_dst,output:{vxlan}"),
        format!("table={TO_REMOTE}, priority=100, ip, nw_dst={subnet}, actions={tunnel_id},set_field:{host}->tun_dst,output:{vxlan}"),
    ]
}

/// The seed's AddServiceRules: a blanket rule for later IP fragments, then one per port.
pub fn service_flows(svc: &Service) -> Vec<String> {
    let base = format!("table={TO_SERVICE}, ip, nw_dst={}", svc.ip);
    let action = format!(
        ", priority=100, actions=load:{}->NXM_NX_REG1[], load:{TUN_OFPORT}->NXM_NX_REG2[], goto_table:{POLICY}",
        svc.vnid
    );
    let mut flows = vec![format!("{base}, ip_frag=later{action}")];
    flows.extend(svc.ports.iter().map(|port| {
        let proto = port.protocol;
        format!("{base}, {proto}, {proto}_dst={}{action}", port.port)
    }));
    flows
}

/// The seed's UpdateLocalMulticastFlows for an enabled VNID (a disabled VNID has no flows).
/// The outputs are sorted as strings, exactly as the seed sorts them ("output:10" < "output:3").
pub fn local_multicast_flows(vnid: Vnid, ofports: &[u16]) -> Vec<String> {
    let mut flows = vec![format!(
        "table={MULTICAST_OUT}, reg0={vnid}, actions=goto_table:{MULTICAST_TO_VXLAN}"
    )];
    if !ofports.is_empty() {
        let mut outputs: Vec<String> = ofports.iter().map(|p| format!("output:{p}")).collect();
        outputs.sort();
        flows.push(format!(
            "table={MULTICAST_TO_LOCAL}, priority=100, reg0={vnid}, actions={}",
            outputs.join(",")
        ));
    }
    flows
}

/// The seed's UpdateVXLANMulticastFlows: table 111's only flow (setup's is the empty case).
pub fn vxlan_multicast_flow(remotes: &[Ipv4Addr]) -> String {
    if remotes.is_empty() {
        return format!(
            "table={MULTICAST_TO_VXLAN}, priority=100, actions=goto_table:{MULTICAST_TO_LOCAL}"
        );
    }
    let mut actions: Vec<String> = remotes
        .iter()
        .map(|ip| format!("set_field:{ip}->tun_dst,output:{VXLAN_OFPORT}"))
        .collect();
    actions.sort();
    format!(
        "table={MULTICAST_TO_VXLAN}, priority=100, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],{},goto_table:{MULTICAST_TO_LOCAL}",
        actions.join(",")
    )
}

/// An egress rule's flow (the seed's UpdateEgressNetworkPolicyRules); `dst` None means any.
pub fn egress_flow(vnid: Vnid, priority: usize, dst: Option<Cidr>, allow: bool) -> String {
    let dst = dst.map(|d| format!(", nw_dst={d}")).unwrap_or_default();
    let action = if allow {
        format!("output:{TUN_OFPORT}")
    } else {
        "drop".to_string()
    };
    format!("table={EGRESS_POLICY}, reg0={vnid}, priority={priority}, ip{dst}, actions={action}")
}

/// The flow that drops all of a VNID's outgoing traffic when its policy cannot be honoured.
pub fn egress_drop_all_flow(vnid: Vnid) -> String {
    format!("table={EGRESS_POLICY}, reg0={vnid}, priority=1, actions=drop")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::core::tests::setup_request;
    use crate::sdn::table::parse_flow;
    use crate::value::{MacAddr, SandboxId};

    /// Every flow of every kind, with values that exercise each branch.
    fn every_kind_of_flow() -> Vec<String> {
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
    fn every_flow_parses_and_lives_in_a_table_of_the_layout() {
        for text in every_kind_of_flow() {
            let flow = parse_flow(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(
                crate::sdn::layout::table_name(flow.table()).is_some(),
                "{text} is in a table the layout does not name"
            );
        }
    }

    #[test]
    fn the_version_note_names_the_plugin_and_the_rule_version() {
        assert_eq!(version_note(Mode::Subnet), "00.03");
        assert_eq!(version_note(Mode::Multitenant), "01.03");
        assert_eq!(version_note(Mode::NetworkPolicy), "02.03");
        assert_eq!(
            version_flow(Mode::Multitenant),
            "table=253, actions=note:01.03"
        );
    }
}
