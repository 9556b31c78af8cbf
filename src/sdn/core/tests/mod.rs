//! Unit tests of the node core: every seed operation's flow diff, the VNID rule lifecycle,
//! batches, setup, resync and drift repair plans, the OVSDB plans — pure, no switch, no root.
//!
//! Expected flows are written as the seed writes them (ovs-ofctl add-flow text, copied from
//! ../shared/seeds/ovscontroller.go.txt with values filled in), not built with `flows.rs`, so
//! a test fails when `flows.rs` drifts from the seed. Both sides are compared as ovs-ofctl
//! prints them.

mod admin;
mod audit;
mod egress;
mod flow_limits;
mod netpol;
mod netpol_inputs;
mod netpol_service;
mod ops;
mod port_steps;
mod ports;
mod sync;

use std::collections::BTreeMap;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use super::{Core, Effects};
use crate::sdn::labels::Labels;
use crate::sdn::state::NodeState;
use crate::sdn::table::{parse_flow, Diff, Flow};
pub(crate) use crate::sdn::types::Pod;
use crate::sdn::types::{HostSubnet, Mode, SetupRequest};
use crate::value::{MacAddr, PodKey, SandboxId, Vnid};

pub(crate) fn setup_request(mode: Mode) -> SetupRequest {
    SetupRequest {
        cluster_network: "10.128.0.0/14".parse().unwrap(),
        service_network: "172.30.0.0/16".parse().unwrap(),
        local_subnet: "10.128.0.0/23".parse().unwrap(),
        gateway: Ipv4Addr::new(10, 128, 0, 1),
        mode,
    }
}

/// A core set up in `mode`, its setup committed.
pub(super) fn set_up(mode: Mode) -> Core {
    let state = NodeState {
        setup: Some(setup_request(mode)),
        ..NodeState::default()
    };
    Core::new(state).unwrap()
}

pub(super) fn vnid(v: u32) -> Vnid {
    Vnid::new(v).unwrap()
}

/// Pod `last` (10.128.0.`last`, port `last`, sandbox of `last` repeated) in `vnid`.
pub(crate) fn pod(last: u8, v: u32) -> Pod {
    Pod {
        veth: Some(format!("veth{last}").parse().unwrap()),
        ip: Ipv4Addr::new(10, 128, 0, last),
        mac: MacAddr([0x0a, 0x58, 0x0a, 0x80, 0x00, last]),
        sandbox: format!("{last:02x}")
            .repeat(32)
            .parse::<SandboxId>()
            .unwrap(),
        vnid: vnid(v),
        ofport: u16::from(last),
    }
}

/// The key tests give a pod of namespace `namespace` at `ip`: `NAMESPACE/pod-A-B-C-D`.
pub(crate) fn key_in(namespace: &str, ip: Ipv4Addr) -> PodKey {
    let name = format!("pod-{}", ip.to_string().replace('.', "-"));
    PodKey::new(namespace, &name).unwrap()
}

/// The key of a pod of namespace `default`, by its address (the seed's modes name no
/// namespace).
pub(crate) fn key_of(pod: &Pod) -> PodKey {
    key_in("default", pod.ip)
}

impl Core {
    /// The seed's SetUpPod as the tests use it: `pod` named by its address, no labels.
    pub(crate) fn pod_add(&mut self, pod: Pod) -> Result<(), crate::sdn::core::CoreError> {
        self.pod_attach(key_of(&pod), pod, Labels::new())
    }

    /// A pod of `namespace` with `labels` (the NetworkPolicy mode's pod add).
    pub(crate) fn pod_add_in(
        &mut self,
        namespace: &str,
        pod: Pod,
        labels: Labels,
    ) -> Result<(), crate::sdn::core::CoreError> {
        self.pod_attach(key_in(namespace, pod.ip), pod, labels)
    }
}

pub(super) fn host_subnet(host: u8, subnet: &str, fixed: Option<u32>) -> HostSubnet {
    HostSubnet {
        host_ip: Ipv4Addr::new(192, 0, 2, host),
        subnet: subnet.parse().unwrap(),
        fixed_vnid: fixed.map(vnid),
        vtep_mac: None,
    }
}

/// Runs `op` as a batch of its own and commits it; the batch's effects.
pub(crate) fn run<T>(core: &mut Core, op: impl FnOnce(&mut Core) -> T) -> (T, Effects) {
    let result = op(core);
    let effects = core.take_effects();
    core.commit();
    (result, effects)
}

/// Flows as ovs-ofctl prints them.
pub(super) fn printed(flows: &[Flow]) -> BTreeSet<String> {
    flows.iter().map(Flow::describe).collect()
}

/// The seed's flow text, as ovs-ofctl prints it once installed.
pub(super) fn seed(texts: &[&str]) -> BTreeSet<String> {
    texts
        .iter()
        .map(|t| {
            parse_flow(t)
                .unwrap_or_else(|e| panic!("{t}: {e}"))
                .describe()
        })
        .collect()
}

/// The diff as (deletes, adds), each as ovs-ofctl prints the flows.
pub(super) fn diff(d: &Diff) -> (BTreeSet<String>, BTreeSet<String>) {
    (printed(&d.deletes), printed(&d.adds))
}

pub(super) fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

/// The seed's SetUpPod flows of the pod at 10.128.0.`last` (MAC 0a:58:0a:80:00:`last`) on port
/// `ofport`, whose sandbox id is the byte `sandbox` repeated (its note), in `vnid`.
pub(super) fn seed_pod_flows(last: u8, ofport: u16, sandbox: u8, vnid: u32) -> Vec<String> {
    let note = vec![format!("{sandbox:02x}"); 32].join(".");
    vec![
        format!("table=20, priority=100, in_port={ofport}, arp, nw_src=10.128.0.{last}, arp_sha=0a:58:0a:80:00:{last:02x}, actions=load:{vnid}->NXM_NX_REG0[], note:{note}, goto_table:21"),
        format!("table=20, priority=100, in_port={ofport}, ip, nw_src=10.128.0.{last}, actions=load:{vnid}->NXM_NX_REG0[], goto_table:21"),
        format!("table=40, priority=100, arp, nw_dst=10.128.0.{last}, actions=output:{ofport}"),
        format!("table=70, priority=100, ip, nw_dst=10.128.0.{last}, actions=load:{vnid}->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:80"),
    ]
}

/// The flows of [`pod`]`(3, vnid)`.
pub(super) fn pod_3_flows(vnid: u32) -> Vec<String> {
    seed_pod_flows(3, 3, 3, vnid)
}

/// The multitenant mode's table 80 rule of a VNID in use.
pub(super) fn vnid_rule(v: u32) -> String {
    format!("table=80, priority=100, reg0={v}, reg1={v}, actions=output:NXM_NX_REG2[]")
}

/// [`seed`] of owned texts.
pub(super) fn seed_of(texts: &[String]) -> BTreeSet<String> {
    seed(&texts.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The seed's AddHostSubnetRules table 10 flow of host 192.0.2.`host` (one per host).
pub(super) fn seed_tunnel_flow(host: u8) -> String {
    format!("table=10, priority=100, tun_src=192.0.2.{host}, actions=goto_table:30")
}

/// The seed's AddHostSubnetRules table 50 and 90 flows of host 192.0.2.`host`'s `subnet`: the
/// fixed VNID's, or the packet's own.
pub(super) fn seed_subnet_flows(host: u8, subnet: &str, fixed: Option<u32>) -> Vec<String> {
    let vnid = match fixed {
        Some(v) => format!("load:{v}->NXM_NX_TUN_ID[0..31]"),
        None => "move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31]".to_string(),
    };
    let to = format!("{vnid},set_field:192.0.2.{host}->tun_dst,output:1");
    vec![
        format!("table=50, priority=100, arp, nw_dst={subnet}, actions={to}"),
        format!("table=90, priority=100, ip, nw_dst={subnet}, actions={to}"),
    ]
}
