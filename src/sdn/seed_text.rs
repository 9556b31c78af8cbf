//! The node's flows as `ovs-ofctl` text, exactly as flows.rs, egress.rs and policy/ wrote them
//! before they were typed: the seed's flows line for line (../shared/seeds/ovscontroller.go.txt)
//! and the policy modes' own. Kept as the oracle the typed producers are checked against:
//! each typed flow must equal `ofnode_proto::parse_flow` of its line here.

use std::net::Ipv4Addr;

use ofnode_proto::{parse_flow, FlowMod, FlowModCommand};

use super::flows::version_note;
use super::layout::*;
use super::policy::networkpolicy::ZONE;
use super::types::Pod;
use super::types::{HostSubnet, Mode, Service, SetupRequest};
use crate::value::{Cidr, Vnid};

/// Each text as `ovs-ofctl add-flow` reads it.
pub(crate) fn parsed<S: AsRef<str>>(texts: &[S]) -> Vec<FlowMod> {
    texts
        .iter()
        .map(|t| {
            let t = t.as_ref();
            parse_flow(t, FlowModCommand::Add).unwrap_or_else(|e| panic!("{t}: {e}"))
        })
        .collect()
}

pub(crate) fn version_flow(mode: Mode) -> String {
    format!("table={VERSION_NOTE}, actions=note:{}", version_note(mode))
}

/// The seed's SetupOVS flows, without table 111 (owned by [`vxlan_multicast_flow`]) and the
/// version note (see [`version_flow`]), followed by the policy mode's flows.
pub(crate) fn base_flows(setup: &SetupRequest) -> Vec<String> {
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
    // The NetworkPolicy mode writes its own gateway flow.
    if setup.mode != Mode::NetworkPolicy {
        // Table 80: all traffic from the local node passes (kubelet probes).
        flows.push(format!(
            "table={POLICY}, priority=300, ip, nw_src={gateway}/32, actions=output:NXM_NX_REG2[]"
        ));
    }
    flows.extend(mode_base_flows(setup));
    flows
}

/// The seed's setupPodFlows.
pub(crate) fn pod_flows(pod: &Pod) -> Vec<String> {
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
pub(crate) fn host_subnet_flows(hs: &HostSubnet) -> Vec<String> {
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
pub(crate) fn service_flows(svc: &Service) -> Vec<String> {
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
pub(crate) fn local_multicast_flows(vnid: Vnid, ofports: &[u16]) -> Vec<String> {
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
pub(crate) fn vxlan_multicast_flow(remotes: &[Ipv4Addr]) -> String {
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
pub(crate) fn egress_flow(vnid: Vnid, priority: usize, dst: Option<Cidr>, allow: bool) -> String {
    let dst = dst.map(|d| format!(", nw_dst={d}")).unwrap_or_default();
    let action = if allow {
        format!("output:{TUN_OFPORT}")
    } else {
        "drop".to_string()
    };
    format!("table={EGRESS_POLICY}, reg0={vnid}, priority={priority}, ip{dst}, actions={action}")
}

/// The flow that drops all of a VNID's outgoing traffic when its policy cannot be honoured.
pub(crate) fn egress_drop_all_flow(vnid: Vnid) -> String {
    format!("table={EGRESS_POLICY}, reg0={vnid}, priority=1, actions=drop")
}

/// The policy modes' flows at setup (their `Policy::base_flows`).
fn mode_base_flows(setup: &SetupRequest) -> Vec<String> {
    match setup.mode {
        Mode::Subnet => vec![format!(
            "table={POLICY}, priority=200, actions=output:NXM_NX_REG2[]"
        )],
        Mode::Multitenant => vec![
            format!("table={POLICY}, priority=200, reg0=0, actions=output:NXM_NX_REG2[]"),
            format!("table={POLICY}, priority=200, reg1=0, actions=output:NXM_NX_REG2[]"),
        ],
        Mode::NetworkPolicy => networkpolicy_base_flows(setup),
    }
}

/// The policy modes' per-VNID rules (their `Policy::vnid_flows`).
pub(crate) fn mode_vnid_flows(mode: Mode, vnid: Vnid) -> Vec<String> {
    match mode {
        Mode::Multitenant if vnid != Vnid::GLOBAL => vec![format!(
            "table={POLICY}, priority=100, reg0={vnid}, reg1={vnid}, actions=output:NXM_NX_REG2[]"
        )],
        _ => Vec::new(),
    }
}

/// The policy modes' flows of a local pod (their `Policy::pod_flows`).
pub(crate) fn mode_pod_flows(mode: Mode, pod: &Pod) -> Vec<String> {
    let (ip, vnid) = (pod.ip, pod.vnid);
    match mode {
        Mode::NetworkPolicy => vec![format!(
            "table={FROM_SERVICE}, priority=100, ip, nw_src={ip}, actions=load:{vnid}->NXM_NX_REG0[], resubmit(,{POLICY_CONNTRACK})"
        )],
        _ => Vec::new(),
    }
}

fn networkpolicy_base_flows(setup: &SetupRequest) -> Vec<String> {
    let (gw, cluster, service, local, tun) = (
        setup.gateway,
        setup.cluster_network,
        setup.service_network,
        setup.local_subnet,
        TUN_OFPORT,
    );
    let commit = format!("ct(commit,zone={ZONE})");
    vec![
        format!("table={CLASSIFY}, priority=1000, ip, ct_state=-trk, actions=ct(zone={ZONE},table={CLASSIFY})"),
        format!("table={POLICY_CONNTRACK}, priority=400, ip, ct_state=+trk+rpl, actions=goto_table:{ROUTING}"),
        format!("table={POLICY_CONNTRACK}, priority=390, ip, ct_state=+trk+rel, actions=goto_table:{ROUTING}"),
        format!("table={ROUTING}, priority=301, ip, nw_dst={gw}, ct_state=+trk+new, actions={commit},output:{tun}"),
        format!("table={ROUTING}, priority=150, ip, nw_dst={cluster}, ct_state=+trk+new, actions={commit},goto_table:{TO_REMOTE}"),
        format!("table={ROUTING}, priority=101, ip, nw_dst={service}, ct_state=+trk+new, actions={commit},goto_table:{TO_SERVICE}"),
        format!("table={ROUTING}, priority=1, ip, ct_state=+trk+new, actions={commit},goto_table:{EGRESS_POLICY}"),
        format!("table={POLICY_CONNTRACK}, priority=300, ip, nw_dst={service}, actions=goto_table:{ROUTING}"),
        format!("table={TO_SERVICE}, priority=150, ip, actions=output:{tun}"),
        format!("table={CLASSIFY}, priority=300, in_port={tun}, ip, nw_src={local}, nw_dst={cluster}, actions=goto_table:{FROM_SERVICE}"),
        format!("table={FROM_SERVICE}, priority=0, actions=goto_table:{ROUTING}"),
        format!("table={POLICY}, priority=400, ip, ct_state=+trk+rpl, actions=output:NXM_NX_REG2[]"),
        format!("table={POLICY}, priority=390, ip, ct_state=+trk+rel, actions=output:NXM_NX_REG2[]"),
        format!("table={POLICY}, priority=310, ip, nw_src={gw}, actions=goto_table:{POLICY_COMMIT}"),
        format!("table={POLICY}, priority=50, ip, actions=goto_table:{POLICY_COMMIT}"),
        format!("table={POLICY_COMMIT}, priority=10, ip, ct_state=+trk+new, actions={commit},output:NXM_NX_REG2[]"),
        format!("table={POLICY_COMMIT}, priority=0, ip, actions=output:NXM_NX_REG2[]"),
    ]
}

#[cfg(test)]
mod tests {
    use ofnode_proto::format_flow_mod;

    use super::*;
    use crate::sdn::core::tests::setup_request;
    use crate::sdn::flows;
    use crate::sdn::policy;

    /// The typed flows and the seed's lines, one by one: equal values that print alike.
    fn same<S: AsRef<str>>(what: &str, typed: Vec<FlowMod>, texts: &[S]) {
        let wanted = parsed(texts);
        assert_eq!(typed.len(), wanted.len(), "{what}: number of flows");
        for ((typed, wanted), text) in typed.iter().zip(&wanted).zip(texts) {
            let text = text.as_ref();
            assert_eq!(typed, wanted, "{what}: {text}");
            assert_eq!(format_flow_mod(typed), format_flow_mod(wanted), "{what}");
        }
    }

    fn vnids() -> [Vnid; 3] {
        [
            Vnid::GLOBAL,
            Vnid::new(42).unwrap(),
            Vnid::new(Vnid::MAX).unwrap(),
        ]
    }

    fn pod(vnid: Vnid, ofport: u16, last: u8) -> Pod {
        Pod {
            ofport,
            ..crate::sdn::core::tests::pod(last, vnid.get())
        }
    }

    #[test]
    fn setup_flows_of_every_mode_are_the_seeds() {
        for mode in Mode::ALL {
            let setup = setup_request(mode);
            let what = format!("{mode:?}");
            same(&what, flows::base_flows(&setup), &base_flows(&setup));
            same(
                &what,
                vec![flows::version_flow(mode)],
                &[version_flow(mode)],
            );
            for vnid in vnids() {
                let typed = policy::of(mode).vnid_flows(vnid);
                same(&what, typed, &mode_vnid_flows(mode, vnid));
            }
        }
    }

    #[test]
    fn pod_flows_are_the_seeds() {
        for (vnid, ofport) in vnids().into_iter().zip([3, 100, 0xfeff]) {
            let pod = pod(vnid, ofport, 5);
            same("pod", flows::pod_flows(&pod), &pod_flows(&pod));
            for mode in Mode::ALL {
                let typed = policy::of(mode).pod_flows(&pod);
                same(&format!("{mode:?} pod"), typed, &mode_pod_flows(mode, &pod));
            }
        }
    }

    #[test]
    fn host_subnet_flows_are_the_seeds_with_and_without_a_fixed_vnid() {
        let fixed = vnids().map(Some);
        for fixed_vnid in fixed.into_iter().chain([None]) {
            let hs = HostSubnet {
                host_ip: Ipv4Addr::new(192, 0, 2, 2),
                subnet: "10.128.2.0/23".parse().unwrap(),
                fixed_vnid,
                vtep_mac: None,
            };
            same(
                "host subnet",
                flows::host_subnet_flows(&hs),
                &host_subnet_flows(&hs),
            );
        }
    }

    #[test]
    fn service_flows_are_the_seeds_for_every_protocol() {
        let port_sets: [&[&str]; 4] = [
            &[],
            &["tcp/80"],
            &["udp/53"],
            &["tcp/443", "udp/53", "tcp/65535", "udp/1"],
        ];
        for (vnid, ports) in vnids().into_iter().cycle().zip(port_sets) {
            let svc = Service {
                ip: Ipv4Addr::new(172, 30, 0, 1),
                vnid,
                ports: ports.iter().map(|p| p.parse().unwrap()).collect(),
            };
            same("service", flows::service_flows(&svc), &service_flows(&svc));
        }
    }

    #[test]
    fn multicast_flows_are_the_seeds_with_none_one_and_many() {
        let port_sets: [&[u16]; 4] = [&[], &[3], &[3, 10, 2, 65279, 100], &[0xfeff; 3]];
        for vnid in vnids() {
            for ports in port_sets {
                let typed = flows::local_multicast_flows(vnid, ports);
                same(
                    "local multicast",
                    typed,
                    &local_multicast_flows(vnid, ports),
                );
            }
        }
        let ip = |a, b, c, d| Ipv4Addr::new(a, b, c, d);
        let remote_sets: [&[Ipv4Addr]; 3] = [
            &[],
            &[ip(192, 0, 2, 2)],
            &[
                ip(192, 0, 2, 45),
                ip(10, 0, 0, 1),
                ip(192, 0, 2, 4),
                ip(9, 1, 1, 1),
                ip(192, 0, 2, 4),
            ],
        ];
        for remotes in remote_sets {
            let typed = vec![flows::vxlan_multicast_flow(remotes)];
            same("VXLAN multicast", typed, &[vxlan_multicast_flow(remotes)]);
        }
    }

    #[test]
    fn egress_flows_are_the_seeds_allow_and_deny_with_and_without_a_cidr() {
        let cidrs: [Option<Cidr>; 4] = [
            None,
            Some("192.0.2.0/24".parse().unwrap()),
            Some(Cidr::host(Ipv4Addr::new(198, 51, 100, 7))),
            Some(Cidr::ANY),
        ];
        for vnid in vnids() {
            for (dst, priority) in cidrs.into_iter().zip([1, 2, 1000, u16::MAX]) {
                for allow in [true, false] {
                    let typed = flows::egress_flow(vnid, priority, dst, allow);
                    let text = egress_flow(vnid, usize::from(priority), dst, allow);
                    same("egress rule", vec![typed], &[text]);
                }
            }
            let typed = vec![flows::egress_drop_all_flow(vnid)];
            same("egress drop all", typed, &[egress_drop_all_flow(vnid)]);
        }
    }

    /// One pod's flows as `entity_flows` makes them (the seed's four and the mode's), typed.
    fn typed_pod_flows(mode: Mode, pod: &Pod) -> Vec<FlowMod> {
        let mut flows = flows::pod_flows(pod);
        flows.extend(policy::of(mode).pod_flows(pod));
        flows.extend(policy::of(mode).vnid_flows(pod.vnid));
        flows
    }

    /// The same flows the way they were made before: text, parsed.
    fn parsed_pod_flows(mode: Mode, pod: &Pod) -> Vec<FlowMod> {
        let mut texts = pod_flows(pod);
        texts.extend(mode_pod_flows(mode, pod));
        texts.extend(mode_vnid_flows(mode, pod.vnid));
        parsed(&texts)
    }

    /// Each pod's flows, as the desired table holds them (encoded).
    #[inline(never)]
    fn held_pod_flows(pods: &[Pod], mode: Mode, make: fn(Mode, &Pod) -> Vec<FlowMod>) -> usize {
        let mut bytes = 0;
        for pod in pods {
            for fm in make(mode, pod) {
                let flow = crate::sdn::table::Flow::from_flow_mod(&fm).unwrap();
                bytes += std::hint::black_box(flow).encoded().len();
            }
        }
        bytes
    }

    #[inline(never)]
    fn typed_work(pods: &[Pod], mode: Mode) -> usize {
        held_pod_flows(pods, mode, typed_pod_flows)
    }

    #[inline(never)]
    fn text_work(pods: &[Pod], mode: Mode) -> usize {
        held_pod_flows(pods, mode, parsed_pod_flows)
    }

    /// What producing one pod's flows costs, typed against text parsed, per mode: the flow-mods
    /// alone, and encoded as the desired table holds them. Prints; asserts nothing about time.
    /// `cargo test --release --lib pod_flows_cost -- --ignored --nocapture`; under
    /// `valgrind --tool=callgrind` compare the inclusive cost of `typed_work` and `text_work`.
    #[test]
    #[ignore]
    fn pod_flows_cost_typed_against_text() {
        use std::hint::black_box;
        use std::time::Instant;
        let n: usize = std::env::var("PODS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000);
        let pods: Vec<Pod> = (0..n)
            .map(|i| {
                let mut p = pod(
                    Vnid::new(1 + (i as u32 % 1000)).unwrap(),
                    3 + (i % 60_000) as u16,
                    (i % 250) as u8,
                );
                p.ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + i as u32);
                p
            })
            .collect();
        let per_pod = |start: Instant| start.elapsed().as_nanos() as f64 / n as f64 / 1000.0;
        for mode in Mode::ALL {
            let each = |make: fn(Mode, &Pod) -> Vec<FlowMod>| {
                let start = Instant::now();
                for pod in &pods {
                    black_box(make(mode, pod));
                }
                per_pod(start)
            };
            let (typed, text) = (each(typed_pod_flows), each(parsed_pod_flows));
            let start = Instant::now();
            black_box(typed_work(&pods, mode));
            let typed_held = per_pod(start);
            let start = Instant::now();
            black_box(text_work(&pods, mode));
            let text_held = per_pod(start);
            let flows = typed_pod_flows(mode, &pods[1]).len();
            println!(
                "{mode:?} ({flows} flows/pod): flow-mods typed {typed:.2} µs, text parsed {text:.2} µs ({:.1}x); \
                 encoded for the table: typed {typed_held:.2} µs, text {text_held:.2} µs ({:.1}x)",
                text / typed,
                text_held / typed_held
            );
        }
    }
}
