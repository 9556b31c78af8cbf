//! The NetworkPolicy mode (the seed's third plugin, id 2): Kubernetes NetworkPolicy enforced
//! with conntrack. Table 0 tracks every IP packet once; table 21 judges a local pod's egress,
//! table 80 a local pod's ingress; table 81 (local deliveries, after ingress) and table 30
//! (everything else, after egress) commit a connection once, after its node's last check.
//! Replies (`+rpl`) and related ICMP (`+rel`) pass both checks; original-direction packets are
//! judged on every packet, so a change that stops allowing a connection cuts it. Traffic to a
//! service leaves through tun0 unjudged and is judged when kube-proxy's DNAT sends it back in
//! through tun0: table 25 gives it its pod's VNID again.
//!
//! Every Kubernetes rule is one `conjunction(id, k/n)` over the dimensions it constrains
//! (targets, peers, ports), so P pods, S peers and K ports cost P+S+K+1 flows. Clause flows
//! with the same (table, priority, match) are one OpenFlow flow: they are merged here, into
//! one flow with one `conjunction` action per rule, before they reach the desired table.
//! Conjunction ids are allocated per rule when a policy is applied and kept in the node state,
//! so a restart, resync or HA take-over computes the very same flows.
//!
//! Everything here is pure: the node state in, flows out (the mode's own as typed flow-mods;
//! the policies' as text, until their engine is typed).

mod ids;
pub mod limits;
pub mod model;
pub(crate) mod parse;
pub(crate) mod ranges;
#[cfg(test)]
pub(crate) mod tests;

use ofnode_proto::FlowMod;
use serde::{Deserialize, Serialize};

use super::Policy;
use crate::sdn::flowmod::{table, Actions, FlowBuilder, CT_NEW, CT_REL, CT_RPL, CT_TRK};
use crate::sdn::layout::{
    CLASSIFY, EGRESS_POLICY, FROM_SERVICE, POLICY, POLICY_COMMIT, POLICY_CONNTRACK,
    REG_OUTPUT_PORT, REG_SOURCE_VNID, ROUTING, TO_REMOTE, TO_SERVICE, TUN_OFPORT,
};
use crate::sdn::types::Pod;
use crate::sdn::types::SetupRequest;
use crate::value::Vnid;
use model::NetPol;

pub use ids::{allocate_ids, ConjIds};
pub use parse::parse_netpol;

/// The conntrack zone of the mode (origin's value; non-zero keeps it apart from netfilter's
/// zone 0 should the bridge ever run on the kernel datapath).
pub const ZONE: u16 = 13877;

/// Priorities in tables 21 and 80, chosen so that no two flows that can match one packet share
/// a priority unless they are clauses of conjunctions.
const PRIO_REPLY: u16 = 400;
const PRIO_RELATED: u16 = 390;
/// Table 21: traffic to a service passes here; its egress is judged after the DNAT.
const PRIO_SERVICE: u16 = 300;
pub(crate) const PRIO_PLAIN_ALLOW: u16 = 210;
pub(crate) const PRIO_CONJUNCTION: u16 = 200;
pub(crate) const PRIO_ISOLATION: u16 = 100;

pub struct NetworkPolicy;

impl Policy for NetworkPolicy {
    fn plugin_id(&self) -> u8 {
        2
    }

    /// One flow a line, as the seed writes them.
    #[rustfmt::skip]
    fn base_flows(&self, setup: &SetupRequest) -> Vec<FlowMod> {
        let (gw, cluster, service, local, tun) = (
            setup.gateway,
            setup.cluster_network,
            setup.service_network,
            setup.local_subnet,
            TUN_OFPORT,
        );
        // `ip, ct_state=+trk+new` (a new connection), `+trk+rpl` (a reply), `+trk+rel` (related).
        let new = |flow: FlowBuilder| flow.ip().ct_state(CT_TRK | CT_NEW, 0);
        let replies = |flow: FlowBuilder| flow.ip().ct_state(CT_TRK | CT_RPL, 0);
        let related = |flow: FlowBuilder| flow.ip().ct_state(CT_TRK | CT_REL, 0);
        vec![
            // Track every IP packet exactly once.
            table(CLASSIFY).priority(1000).ip().ct_state(0, CT_TRK).ct_track(ZONE, CLASSIFY).build(),
            // Egress: replies and related ICMP skip policy; the rest is per policy (0: seed's).
            replies(table(POLICY_CONNTRACK).priority(PRIO_REPLY)).goto(ROUTING),
            related(table(POLICY_CONNTRACK).priority(PRIO_RELATED)).goto(ROUTING),
            // Commit what leaves without passing table 80, after its egress check.
            new(table(ROUTING).priority(301)).nw_dst(gw).ct_commit(ZONE).output(tun).build(),
            new(table(ROUTING).priority(150)).nw_dst(cluster).ct_commit(ZONE).goto(TO_REMOTE),
            new(table(ROUTING).priority(101)).nw_dst(service).ct_commit(ZONE).goto(TO_SERVICE),
            new(table(ROUTING).priority(1)).ct_commit(ZONE).goto(EGRESS_POLICY),
            // Services go to tun0 (kube-proxy); policy judges them after the DNAT: the packet
            // comes back in through tun0 with the pod's address, table 25 loads its VNID again
            // (per pod, `pod_flows`; other sources keep reg0=0, the node's) and table 21 judges
            // its egress towards the real destination.
            table(POLICY_CONNTRACK).priority(PRIO_SERVICE).ip().nw_dst(service).goto(ROUTING),
            table(TO_SERVICE).priority(150).ip().output(tun).build(),
            table(CLASSIFY).priority(300).in_port(tun).ip().nw_src(local).nw_dst(cluster).goto(FROM_SERVICE),
            table(FROM_SERVICE).priority(0).goto(ROUTING),
            // Ingress: replies, related, the local node (kubelet probes), non-isolated pods.
            replies(table(POLICY).priority(PRIO_REPLY)).output_reg(REG_OUTPUT_PORT).build(),
            related(table(POLICY).priority(PRIO_RELATED)).output_reg(REG_OUTPUT_PORT).build(),
            table(POLICY).priority(310).ip().nw_src(gw).goto(POLICY_COMMIT),
            table(POLICY).priority(50).ip().goto(POLICY_COMMIT),
            // The one commit of local deliveries.
            new(table(POLICY_COMMIT).priority(10)).ct_commit(ZONE).output_reg(REG_OUTPUT_PORT).build(),
            table(POLICY_COMMIT).priority(0).ip().output_reg(REG_OUTPUT_PORT).build(),
        ]
    }

    /// Isolation comes from policies, not VNIDs.
    fn vnid_flows(&self, _vnid: Vnid) -> Vec<FlowMod> {
        Vec::new()
    }

    /// The pod's service traffic, back from the DNAT through tun0, carries its VNID again
    /// (openshift-sdn's table 25), so that policies see the pod, not the node; its egress is
    /// judged by table 21 (a resubmit: goto_table only goes forward).
    /// `table=25, priority=100, ip, nw_src=IP, actions=load:VNID->NXM_NX_REG0[], resubmit(,21)`
    fn pod_flows(&self, pod: &Pod) -> Vec<FlowMod> {
        vec![table(FROM_SERVICE)
            .priority(100)
            .ip()
            .nw_src(pod.ip)
            .load(REG_SOURCE_VNID, pod.vnid)
            .resubmit(POLICY_CONNTRACK)
            .build()]
    }

    /// Its own table 80 flow for the gateway (which also commits) replaces the seed's.
    fn replaces_gateway_exemption(&self) -> bool {
        true
    }

    fn enforces_network_policy(&self) -> bool {
        true
    }
}

/// A policy as the node keeps it: the validated policy and its rules' conjunction ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredNetPol {
    pub policy: NetPol,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress_ids: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_ids: Vec<u32>,
}

/// The key of a policy in the node state: `namespace/name`.
pub fn netpol_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}
