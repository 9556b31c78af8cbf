//! The NetworkPolicy mode (the seed's third plugin, id 2): Kubernetes NetworkPolicy enforced
//! with conntrack. Table 0 tracks every IP packet once; table 21 judges a local pod's egress,
//! table 80 a local pod's ingress; table 81 (local deliveries, after ingress) and table 30
//! (everything else, after egress) commit a connection once, after its node's last check.
//! Replies (`+rpl`) and related ICMP (`+rel`) pass both checks; original-direction packets are
//! judged on every packet, so a change that stops allowing a connection cuts it.
//!
//! Every Kubernetes rule is one `conjunction(id, k/n)` over the dimensions it constrains
//! (targets, peers, ports), so P pods, S peers and K ports cost P+S+K+1 flows. Clause flows
//! with the same (table, priority, match) are one OpenFlow flow: they are merged here, into
//! one flow with one `conjunction` action per rule, before they reach the desired table.
//! Conjunction ids are allocated per rule when a policy is applied and kept in the node state,
//! so a restart, resync or HA take-over computes the very same flows.
//!
//! Everything here is pure: the node state in, flow texts out.

pub mod model;
mod ranges;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::Policy;
use crate::sdn::layout::{
    CLASSIFY, EGRESS_POLICY, POLICY, POLICY_COMMIT, POLICY_CONNTRACK, ROUTING, TO_REMOTE,
    TO_SERVICE, TUN_OFPORT,
};
use crate::sdn::types::SetupRequest;
use crate::value::{Cidr, Vnid};
use model::{Labels, Namespace, NetPol, Peer, PodMeta, Port, RemotePod, Rule};

pub use model::{parse_netpol, NetPolError};

/// The conntrack zone of the mode (origin's value; non-zero keeps it apart from netfilter's
/// zone 0 should the bridge ever run on the kernel datapath).
pub const ZONE: u16 = 13877;

/// Priorities in tables 21 and 80, chosen so that no two flows that can match one packet share
/// a priority unless they are clauses of conjunctions.
const PRIO_REPLY: u16 = 400;
const PRIO_RELATED: u16 = 390;
const PRIO_PLAIN_ALLOW: u16 = 210;
const PRIO_CONJUNCTION: u16 = 200;
const PRIO_ISOLATION: u16 = 100;

pub struct NetworkPolicy;

impl Policy for NetworkPolicy {
    fn plugin_id(&self) -> u8 {
        2
    }

    fn base_flows(&self, setup: &SetupRequest) -> Vec<String> {
        let (gw, cluster, service, tun) = (
            setup.gateway,
            setup.cluster_network,
            setup.service_network,
            TUN_OFPORT,
        );
        let commit = format!("ct(commit,zone={ZONE})");
        vec![
            // Track every IP packet exactly once.
            format!("table={CLASSIFY}, priority=1000, ip, ct_state=-trk, actions=ct(zone={ZONE},table={CLASSIFY})"),
            // Egress: replies and related ICMP skip policy; the rest is per policy (0: seed's).
            format!("table={POLICY_CONNTRACK}, priority={PRIO_REPLY}, ip, ct_state=+trk+rpl, actions=goto_table:{ROUTING}"),
            format!("table={POLICY_CONNTRACK}, priority={PRIO_RELATED}, ip, ct_state=+trk+rel, actions=goto_table:{ROUTING}"),
            // Commit what leaves without passing table 80, after its egress check.
            format!("table={ROUTING}, priority=301, ip, nw_dst={gw}, ct_state=+trk+new, actions={commit},output:{tun}"),
            format!("table={ROUTING}, priority=150, ip, nw_dst={cluster}, ct_state=+trk+new, actions={commit},goto_table:{TO_REMOTE}"),
            format!("table={ROUTING}, priority=101, ip, nw_dst={service}, ct_state=+trk+new, actions={commit},goto_table:{TO_SERVICE}"),
            format!("table={ROUTING}, priority=1, ip, ct_state=+trk+new, actions={commit},goto_table:{EGRESS_POLICY}"),
            // Services go to tun0 (kube-proxy); policy judges them after the DNAT.
            format!("table={TO_SERVICE}, priority=150, ip, actions=output:{tun}"),
            // Ingress: replies, related, the local node (kubelet probes), non-isolated pods.
            format!("table={POLICY}, priority={PRIO_REPLY}, ip, ct_state=+trk+rpl, actions=output:NXM_NX_REG2[]"),
            format!("table={POLICY}, priority={PRIO_RELATED}, ip, ct_state=+trk+rel, actions=output:NXM_NX_REG2[]"),
            format!("table={POLICY}, priority=310, ip, nw_src={gw}, actions=goto_table:{POLICY_COMMIT}"),
            format!("table={POLICY}, priority=50, ip, actions=goto_table:{POLICY_COMMIT}"),
            // The one commit of local deliveries.
            format!("table={POLICY_COMMIT}, priority=10, ip, ct_state=+trk+new, actions={commit},output:NXM_NX_REG2[]"),
            format!("table={POLICY_COMMIT}, priority=0, ip, actions=output:NXM_NX_REG2[]"),
        ]
    }

    /// Isolation comes from policies, not VNIDs.
    fn vnid_flows(&self, _vnid: Vnid) -> Vec<String> {
        Vec::new()
    }

    /// Its own table 80 flow for the gateway (which also commits) replaces the seed's.
    fn replaces_gateway_exemption(&self) -> bool {
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

/// What the flows are computed from: the mode's part of the node state.
pub struct View<'a> {
    pub setup: &'a SetupRequest,
    pub namespaces: &'a BTreeMap<String, Namespace>,
    /// Local pods (their namespace and labels), by IP.
    pub local: Vec<(Ipv4Addr, &'a PodMeta)>,
    pub remote: &'a BTreeMap<Ipv4Addr, RemotePod>,
    pub netpols: &'a BTreeMap<String, StoredNetPol>,
}

/// A pod either side, as selectors see it.
struct PodRef<'a> {
    ip: Ipv4Addr,
    namespace: &'a str,
    labels: &'a Labels,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Ingress,
    Egress,
}

impl Dir {
    fn table(self) -> u8 {
        match self {
            Dir::Ingress => POLICY,
            Dir::Egress => POLICY_CONNTRACK,
        }
    }

    /// Where an allowed packet goes next.
    fn allow(self) -> String {
        match self {
            Dir::Ingress => format!("goto_table:{POLICY_COMMIT}"),
            Dir::Egress => format!("goto_table:{ROUTING}"),
        }
    }

    /// The field holding the target's own address (ingress: destination; egress: source).
    fn target_ip(self) -> &'static str {
        match self {
            Dir::Ingress => "nw_dst",
            Dir::Egress => "nw_src",
        }
    }

    fn peer_ip(self) -> &'static str {
        match self {
            Dir::Ingress => "nw_src",
            Dir::Egress => "nw_dst",
        }
    }

    /// The register holding the target namespace's VNID (ingress: reg1, egress: reg0).
    fn target_vnid(self) -> &'static str {
        match self {
            Dir::Ingress => "reg1",
            Dir::Egress => "reg0",
        }
    }
}

/// `10.0.0.5` for a host, `10.0.0.0/24` otherwise: one spelling per network, so that equal
/// matches are equal strings (and merge).
fn net(cidr: Cidr) -> String {
    if cidr.prefix() == 32 {
        cidr.network().to_string()
    } else {
        format!("{}/{}", cidr.network(), cidr.prefix())
    }
}

/// The flow set being built: one body per OpenFlow identity (table, priority, match).
#[derive(Default)]
struct Flows {
    flows: BTreeMap<(u8, u16, String), Body>,
}

enum Body {
    /// Clause flows of conjunctions: (id, clause k, of n), sorted.
    Conjunctions(BTreeSet<(u32, u8, u8)>),
    Actions(String),
}

impl Flows {
    fn add(&mut self, table: u8, priority: u16, match_: String, actions: String) {
        // Equal identities from several rules carry equal actions (allow or drop at one priority).
        self.flows
            .entry((table, priority, match_))
            .or_insert(Body::Actions(actions));
    }

    fn clause(&mut self, table: u8, match_: String, id: u32, k: u8, n: u8) {
        let body = self
            .flows
            .entry((table, PRIO_CONJUNCTION, match_))
            .or_insert_with(|| Body::Conjunctions(BTreeSet::new()));
        if let Body::Conjunctions(set) = body {
            set.insert((id, k, n));
        }
    }

    fn texts(self) -> Vec<String> {
        self.flows
            .into_iter()
            .map(|((table, priority, match_), body)| {
                let actions = match body {
                    Body::Actions(a) => a,
                    Body::Conjunctions(set) => set
                        .iter()
                        .map(|(id, k, n)| format!("conjunction({id},{k}/{n})"))
                        .collect::<Vec<_>>()
                        .join(","),
                };
                format!("table={table}, priority={priority}, {match_}, actions={actions}")
            })
            .collect()
    }
}

impl<'a> View<'a> {
    fn pods(&self) -> impl Iterator<Item = PodRef<'a>> + '_ {
        let local = self.local.iter().map(|(ip, meta)| PodRef {
            ip: *ip,
            namespace: &meta.namespace,
            labels: &meta.labels,
        });
        let remote = self.remote.values().map(|p| PodRef {
            ip: p.ip,
            namespace: &p.namespace,
            labels: &p.labels,
        });
        local.chain(remote)
    }

    /// The local pods `policy` selects.
    pub fn targets(&self, policy: &NetPol) -> Vec<Ipv4Addr> {
        self.local
            .iter()
            .filter(|(_, m)| {
                m.namespace == policy.namespace && policy.pod_selector.matches(&m.labels)
            })
            .map(|(ip, _)| *ip)
            .collect()
    }

    fn target_matches(&self, dir: Dir, policy: &NetPol, vnid: Vnid) -> BTreeSet<String> {
        let pods = self.targets(policy);
        if pods.is_empty() {
            return BTreeSet::new();
        }
        if policy.pod_selector.is_empty() {
            return BTreeSet::from([format!("ip, {}={vnid}", dir.target_vnid())]);
        }
        let field = dir.target_ip();
        pods.iter().map(|ip| format!("ip, {field}={ip}")).collect()
    }

    fn peer_matches(&self, dir: Dir, policy: &NetPol, vnid: Vnid, peer: &Peer) -> Vec<String> {
        let field = dir.peer_ip();
        let cluster = net(self.setup.cluster_network);
        match peer {
            Peer::Ipv6Block { .. } => Vec::new(),
            Peer::Block { cidr, except } => ranges::subtract(*cidr, except)
                .into_iter()
                .map(|c| format!("ip, {field}={}", net(c)))
                .collect(),
            Peer::Select {
                pods,
                namespaces: None,
            } => {
                let pods = pods.clone().unwrap_or_default();
                if dir == Dir::Ingress && pods.is_empty() {
                    return vec![format!("ip, reg0={vnid}")];
                }
                self.pods()
                    .filter(|p| p.namespace == policy.namespace && pods.matches(p.labels))
                    .map(|p| match dir {
                        Dir::Ingress => format!("ip, reg0={vnid}, nw_src={}", p.ip),
                        Dir::Egress => format!("ip, nw_dst={}", p.ip),
                    })
                    .collect()
            }
            Peer::Select {
                pods,
                namespaces: Some(nss),
            } => {
                let all_pods = pods.as_ref().is_none_or(|s| s.is_empty());
                if nss.is_empty() && all_pods {
                    return vec![format!("ip, {field}={cluster}")];
                }
                let chosen: BTreeMap<&str, Vnid> = self
                    .namespaces
                    .values()
                    .filter(|ns| nss.matches(&ns.effective_labels()))
                    .map(|ns| (ns.name.as_str(), ns.vnid))
                    .collect();
                if dir == Dir::Ingress && all_pods {
                    return chosen.values().map(|w| format!("ip, reg0={w}")).collect();
                }
                self.pods()
                    .filter_map(|p| {
                        let w = chosen.get(p.namespace)?;
                        let wanted = pods.as_ref().is_none_or(|s| s.matches(p.labels));
                        wanted.then(|| match dir {
                            Dir::Ingress => format!("ip, reg0={w}, nw_src={}", p.ip),
                            Dir::Egress => format!("ip, nw_dst={}", p.ip),
                        })
                    })
                    .collect()
            }
        }
    }

    /// The flows of one policy, added to `out`.
    fn policy_flows(&self, stored: &StoredNetPol, out: &mut Flows) {
        let policy = &stored.policy;
        let Some(ns) = self.namespaces.get(&policy.namespace) else {
            return;
        };
        let sides = [
            (Dir::Ingress, &policy.ingress, &stored.ingress_ids),
            (Dir::Egress, &policy.egress, &stored.egress_ids),
        ];
        for (dir, rules, ids) in sides {
            let Some(rules) = rules else { continue };
            let targets = self.target_matches(dir, policy, ns.vnid);
            for t in &targets {
                out.add(dir.table(), PRIO_ISOLATION, t.clone(), "drop".into());
            }
            for (rule, id) in rules.iter().zip(ids.iter()) {
                self.rule_flows(dir, policy, ns.vnid, rule, *id, &targets, out);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rule_flows(
        &self,
        dir: Dir,
        policy: &NetPol,
        vnid: Vnid,
        rule: &Rule,
        id: u32,
        targets: &BTreeSet<String>,
        out: &mut Flows,
    ) {
        let peers: Option<BTreeSet<String>> = rule.peers.as_ref().map(|peers| {
            peers
                .iter()
                .flat_map(|p| self.peer_matches(dir, policy, vnid, p))
                .collect()
        });
        let ports: BTreeSet<String> = rule.ports.iter().flat_map(port_matches).collect();
        // A dimension that selects nothing allows nothing: no flows (the isolation stays).
        if targets.is_empty() || peers.as_ref().is_some_and(|p| p.is_empty()) {
            return;
        }
        let mut dims: Vec<&BTreeSet<String>> = Vec::new();
        match dir {
            Dir::Ingress => dims.extend(peers.as_ref().into_iter().chain([targets])),
            Dir::Egress => dims.extend(std::iter::once(targets).chain(peers.as_ref())),
        }
        if !ports.is_empty() {
            dims.push(&ports);
        }
        let table = dir.table();
        if dims.len() == 1 {
            for t in targets {
                out.add(table, PRIO_PLAIN_ALLOW, t.clone(), dir.allow());
            }
            return;
        }
        let n = dims.len() as u8;
        for (k, dim) in dims.iter().enumerate() {
            for m in dim.iter() {
                out.clause(table, m.clone(), id, k as u8 + 1, n);
            }
        }
        out.add(
            table,
            PRIO_CONJUNCTION,
            format!("conj_id={id}, ip"),
            dir.allow(),
        );
    }

    /// Every flow of every policy, merged.
    pub fn flows(&self) -> Vec<String> {
        let mut out = Flows::default();
        for stored in self.netpols.values() {
            self.policy_flows(stored, &mut out);
        }
        out.texts()
    }

    /// The flows `stored` alone would contribute (what `netpol list` counts).
    pub fn flows_of(&self, stored: &StoredNetPol) -> usize {
        let mut out = Flows::default();
        self.policy_flows(stored, &mut out);
        out.flows.len()
    }
}

fn port_matches(port: &Port) -> Vec<String> {
    let proto = port.protocol.name();
    match port.range {
        None => vec![proto.to_string()],
        Some((first, last)) if first == last => vec![format!("{proto}, {proto}_dst={first}")],
        Some((first, last)) => ranges::port_masks(first, last)
            .into_iter()
            .map(|(value, mask)| match mask {
                0xffff => format!("{proto}, {proto}_dst={value}"),
                _ => format!("{proto}, {proto}_dst={value:#x}/{mask:#x}"),
            })
            .collect(),
    }
}

/// Conjunction ids for a policy's rules: the old policy's by position where it had one, new
/// ones the lowest ids no other policy uses (from 1: 0 would be "no conjunction").
pub fn allocate_ids(
    policy: NetPol,
    old: Option<&StoredNetPol>,
    others: impl Iterator<Item = u32>,
) -> StoredNetPol {
    let count = |rules: &Option<Vec<Rule>>| rules.as_ref().map_or(0, Vec::len);
    let mut used: BTreeSet<u32> = others.collect();
    let keep = |old_ids: Option<&Vec<u32>>, n: usize, used: &BTreeSet<u32>| -> Vec<Option<u32>> {
        (0..n)
            .map(|i| {
                old_ids
                    .and_then(|ids| ids.get(i))
                    .copied()
                    .filter(|id| !used.contains(id))
            })
            .collect()
    };
    let kept_in = keep(old.map(|o| &o.ingress_ids), count(&policy.ingress), &used);
    used.extend(kept_in.iter().flatten());
    let kept_eg = keep(old.map(|o| &o.egress_ids), count(&policy.egress), &used);
    used.extend(kept_eg.iter().flatten());
    let mut fill = |kept: Vec<Option<u32>>| -> Vec<u32> {
        kept.into_iter()
            .map(|id| {
                id.unwrap_or_else(|| {
                    let id = (1..u32::MAX)
                        .find(|id| !used.contains(id))
                        .unwrap_or(u32::MAX);
                    used.insert(id);
                    id
                })
            })
            .collect()
    };
    let ingress_ids = fill(kept_in);
    let egress_ids = fill(kept_eg);
    StoredNetPol {
        policy,
        ingress_ids,
        egress_ids,
    }
}
