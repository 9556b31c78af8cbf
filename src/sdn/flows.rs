//! The seed's flows, as text in `ovs-ofctl add-flow` syntax, computed from validated inputs.
//!
//! Every function here is pure and mirrors one part of the seed's `ovsController` line for
//! line, so that a review against ../shared/seeds/ovscontroller.go.txt is a side-by-side read.
//! The text is parsed once by `ofnode_proto` when a flow enters the desired table.

use std::net::Ipv4Addr;

use super::state::Pod;
use super::types::{Cidr, HostSubnet, Mode, Service, SetupRequest, Vnid};

/// The VXLAN port's OpenFlow port number (the seed's `vxlan0`, ofport_request 1).
pub const VXLAN_OFPORT: u16 = 1;
/// The node's gateway port (the seed's `tun0`, ofport_request 2).
pub const TUN_OFPORT: u16 = 2;
/// The table that holds the rule-version note.
pub const VERSION_TABLE: u8 = 253;
/// The seed's rule version; bump it whenever the flows change.
pub const VERSION: u8 = 3;

/// The tables a pod's flows live in (the seed's setupPodFlows).
pub const POD_TABLES: [u8; 3] = [20, 40, 70];

/// `"PP.VV"`: the policy plugin id and rule version, as the seed's getVersionNote writes it.
pub fn version_note(mode: Mode) -> String {
    format!("{:02X}.{:02X}", mode.plugin_id(), VERSION)
}

/// The rule-version flow; the last flow a setup writes, so a half-done setup never looks done.
pub fn version_flow(mode: Mode) -> String {
    format!("table={VERSION_TABLE}, actions=note:{}", version_note(mode))
}

/// The seed's SetupOVS flows, without table 111 (owned by [`vxlan_multicast_flow`]) and the
/// version note (see [`version_flow`]), followed by the mode's table 80 flows.
pub fn base_flows(setup: &SetupRequest) -> Vec<String> {
    let cluster = setup.cluster_network;
    let service = setup.service_network;
    let local = setup.local_subnet;
    let gateway = setup.gateway;
    let mut flows = vec![
        // Table 0: initial dispatch based on in_port; vxlan0 first.
        format!("table=0, priority=200, in_port=1, arp, nw_src={cluster}, nw_dst={local}, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10"),
        format!("table=0, priority=200, in_port=1, ip, nw_src={cluster}, nw_dst={local}, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10"),
        format!("table=0, priority=200, in_port=1, ip, nw_src={cluster}, nw_dst=224.0.0.0/4, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10"),
        "table=0, priority=150, in_port=1, actions=drop".to_string(),
        // tun0
        "table=0, priority=250, in_port=2, ip, nw_dst=224.0.0.0/4, actions=drop".to_string(),
        format!("table=0, priority=200, in_port=2, arp, nw_src={gateway}, nw_dst={cluster}, actions=goto_table:30"),
        "table=0, priority=200, in_port=2, ip, actions=goto_table:30".to_string(),
        "table=0, priority=150, in_port=2, actions=drop".to_string(),
        // else, from a container
        "table=0, priority=100, arp, actions=goto_table:20".to_string(),
        "table=0, priority=100, ip, actions=goto_table:20".to_string(),
        "table=0, priority=0, actions=drop".to_string(),
        // Table 10: VXLAN ingress filtering; filled in by host subnets.
        "table=10, priority=0, actions=drop".to_string(),
        // Table 20: from a container; validate IP/MAC, assign the VNID; filled in by pods.
        "table=20, priority=0, actions=drop".to_string(),
        // Table 21: from a container; left to connection tracking by network policy.
        "table=21, priority=0, actions=goto_table:30".to_string(),
        // Table 30: general routing.
        format!("table=30, priority=300, arp, nw_dst={gateway}, actions=output:2"),
        format!("table=30, priority=200, arp, nw_dst={local}, actions=goto_table:40"),
        format!("table=30, priority=100, arp, nw_dst={cluster}, actions=goto_table:50"),
        format!("table=30, priority=300, ip, nw_dst={gateway}, actions=output:2"),
        format!("table=30, priority=100, ip, nw_dst={service}, actions=goto_table:60"),
        format!("table=30, priority=200, ip, nw_dst={local}, actions=goto_table:70"),
        format!("table=30, priority=100, ip, nw_dst={cluster}, actions=goto_table:90"),
        // Multicast coming from the VXLAN, then from local pods.
        "table=30, priority=50, in_port=1, ip, nw_dst=224.0.0.0/4, actions=goto_table:120".to_string(),
        "table=30, priority=25, ip, nw_dst=224.0.0.0/4, actions=goto_table:110".to_string(),
        "table=30, priority=0, ip, actions=goto_table:100".to_string(),
        "table=30, priority=0, arp, actions=drop".to_string(),
        // Table 40: ARP to a local container; filled in by pods.
        "table=40, priority=0, actions=drop".to_string(),
        // Table 50: ARP to a remote container; filled in by host subnets.
        "table=50, priority=0, actions=drop".to_string(),
        // Table 60: IP to a service; filled in by services.
        "table=60, priority=200, reg0=0, actions=output:2".to_string(),
        "table=60, priority=0, actions=drop".to_string(),
        // Table 70: IP to a local container; filled in by pods.
        "table=70, priority=0, actions=drop".to_string(),
        // Table 80: IP policy enforcement.
        format!("table=80, priority=300, ip, nw_src={gateway}/32, actions=output:NXM_NX_REG2[]"),
        "table=80, priority=0, actions=drop".to_string(),
        // Table 90: IP to a remote container; filled in by host subnets.
        "table=90, priority=0, actions=drop".to_string(),
        // Table 100: egress network policy dispatch; filled in by egress policies.
        "table=100, priority=0, actions=output:2".to_string(),
        // Table 110: outbound multicast filtering; filled in by local multicast.
        "table=110, priority=0, actions=drop".to_string(),
        // Table 120: multicast delivery to local pods; filled in by local multicast.
        "table=120, priority=0, actions=drop".to_string(),
    ];
    flows.extend(mode_flows(setup.mode));
    flows
}

/// Table 80's flows that belong to the network policy mode (the seed's policy plugins' Start).
pub fn mode_flows(mode: Mode) -> Vec<String> {
    match mode {
        Mode::Subnet => vec!["table=80, priority=200, actions=output:NXM_NX_REG2[]".to_string()],
        Mode::Multitenant => vec![
            "table=80, priority=200, reg0=0, actions=output:NXM_NX_REG2[]".to_string(),
            "table=80, priority=200, reg1=0, actions=output:NXM_NX_REG2[]".to_string(),
        ],
    }
}

/// The multitenant delivery rule for a VNID (the seed's EnsureVNIDRules); none for the global
/// VNID 0, which setup's `reg0=0`/`reg1=0` flows already cover, and none in subnet mode.
pub fn vnid_flow(mode: Mode, vnid: Vnid) -> Option<String> {
    (mode == Mode::Multitenant && vnid != Vnid::GLOBAL).then(|| {
        format!("table=80, priority=100, reg0={vnid}, reg1={vnid}, actions=output:NXM_NX_REG2[]")
    })
}

/// The seed's setupPodFlows.
pub fn pod_flows(pod: &Pod) -> Vec<String> {
    let (ofport, ip, mac, vnid) = (pod.ofport, pod.ip, pod.mac, pod.vnid);
    let note = pod.sandbox.note();
    vec![
        // ARP/IP traffic from the container
        format!("table=20, priority=100, in_port={ofport}, arp, nw_src={ip}, arp_sha={mac}, actions=load:{vnid}->NXM_NX_REG0[], note:{note}, goto_table:21"),
        format!("table=20, priority=100, in_port={ofport}, ip, nw_src={ip}, actions=load:{vnid}->NXM_NX_REG0[], goto_table:21"),
        // ARP request/response to the container (not isolated)
        format!("table=40, priority=100, arp, nw_dst={ip}, actions=output:{ofport}"),
        // IP traffic to the container
        format!("table=70, priority=100, ip, nw_dst={ip}, actions=load:{vnid}->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:80"),
    ]
}

/// The seed's AddHostSubnetRules, with the fixed-VNID annotation variant.
pub fn host_subnet_flows(hs: &HostSubnet) -> Vec<String> {
    let (host, subnet) = (hs.host_ip, hs.subnet);
    let tunnel_id = match hs.fixed_vnid {
        Some(vnid) => format!("load:{vnid}->NXM_NX_TUN_ID[0..31]"),
        None => "move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31]".to_string(),
    };
    vec![
        format!("table=10, priority=100, tun_src={host}, actions=goto_table:30"),
        format!("table=50, priority=100, arp, nw_dst={subnet}, actions={tunnel_id},set_field:{host}->tun_dst,output:1"),
        format!("table=90, priority=100, ip, nw_dst={subnet}, actions={tunnel_id},set_field:{host}->tun_dst,output:1"),
    ]
}

/// The seed's AddServiceRules: a blanket rule for later IP fragments, then one per port.
pub fn service_flows(svc: &Service) -> Vec<String> {
    let base = format!("table=60, ip, nw_dst={}", svc.ip);
    let action = format!(
        ", priority=100, actions=load:{}->NXM_NX_REG1[], load:2->NXM_NX_REG2[], goto_table:80",
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
    let mut flows = vec![format!("table=110, reg0={vnid}, actions=goto_table:111")];
    if !ofports.is_empty() {
        let mut outputs: Vec<String> = ofports.iter().map(|p| format!("output:{p}")).collect();
        outputs.sort();
        flows.push(format!(
            "table=120, priority=100, reg0={vnid}, actions={}",
            outputs.join(",")
        ));
    }
    flows
}

/// The seed's UpdateVXLANMulticastFlows: table 111's only flow (setup's is the empty case).
pub fn vxlan_multicast_flow(remotes: &[Ipv4Addr]) -> String {
    if remotes.is_empty() {
        return "table=111, priority=100, actions=goto_table:120".to_string();
    }
    let mut actions: Vec<String> = remotes
        .iter()
        .map(|ip| format!("set_field:{ip}->tun_dst,output:1"))
        .collect();
    actions.sort();
    format!(
        "table=111, priority=100, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],{},goto_table:120",
        actions.join(",")
    )
}

/// An egress rule's flow (the seed's UpdateEgressNetworkPolicyRules); `dst` None means any.
pub fn egress_flow(vnid: Vnid, priority: usize, dst: Option<Cidr>, allow: bool) -> String {
    let dst = dst.map(|d| format!(", nw_dst={d}")).unwrap_or_default();
    let action = if allow { "output:2" } else { "drop" };
    format!("table=100, reg0={vnid}, priority={priority}, ip{dst}, actions={action}")
}

/// The flow that drops all of a VNID's outgoing traffic when its policy cannot be honoured.
pub fn egress_drop_all_flow(vnid: Vnid) -> String {
    format!("table=100, reg0={vnid}, priority=1, actions=drop")
}
