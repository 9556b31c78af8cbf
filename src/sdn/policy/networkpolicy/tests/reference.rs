//! A reference computation of the mode's flows, for the tests: every policy recomputed from
//! the whole state by scans, as text (the node's first implementation, kept as the oracle
//! the incremental engine is checked against). Nothing here is fast, and it need not be.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::super::model::{NetPol, Peer, Port, Rule};
use super::super::{ranges, StoredNetPol};
use super::super::{PRIO_CONJUNCTION, PRIO_ISOLATION, PRIO_PLAIN_ALLOW};
use crate::sdn::audit::{AuditTier, Dir as AuditDir, RuleRef, Verdict};
use crate::sdn::labels::Labels;
use crate::sdn::layout::{POLICY, POLICY_COMMIT, POLICY_CONNTRACK, ROUTING};
use crate::sdn::objects::{NamedPort, Namespace, L4};
use crate::sdn::policy::admin::reference::audit_flow_text;
use crate::sdn::produce::netpol::band_priority;
use crate::sdn::types::SetupRequest;
use crate::value::{Cidr, Vnid};

/// What the flows are computed from: the mode's part of the node state.
pub struct View<'a> {
    pub setup: &'a SetupRequest,
    pub namespaces: &'a BTreeMap<String, Namespace>,
    pub pods: &'a BTreeMap<crate::value::PodKey, crate::sdn::objects::PodInfo>,
    pub netpols: &'a BTreeMap<String, StoredNetPol>,
}

/// A pod either side, as selectors see it.
struct PodRef<'a> {
    ip: Ipv4Addr,
    namespace: &'a str,
    labels: &'a Labels,
    ports: &'a [NamedPort],
}

/// The numbers `named` ports resolve to on a pod with `ports`.
fn numbers(ports: &[NamedPort], named: &[(String, L4)]) -> Vec<(L4, u16)> {
    named
        .iter()
        .flat_map(|(name, protocol)| {
            ports
                .iter()
                .filter(move |p| p.name == *name && p.protocol == *protocol)
                .map(|p| (p.protocol, p.port))
        })
        .collect()
}

/// `ip, FIELD=ADDRESS` narrowed to one destination port: `tcp, FIELD=ADDRESS, tcp_dst=80`.
fn on_port(by_address: &str, (protocol, port): (L4, u16)) -> String {
    let proto = protocol.name();
    let rest = by_address.strip_prefix("ip, ").unwrap_or(by_address);
    format!("{proto}, {rest}, {proto}_dst={port}")
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

/// A flow's OpenFlow identity: table, priority, match.
type Key = (u8, u16, String);

/// The flow set being built: one body per OpenFlow identity (table, priority, match), up to
/// `limit` flows (a computation that passes it stops with [`Exceeded`]).
struct Flows {
    flows: BTreeMap<Key, Body>,
    limit: usize,
    /// The rule whose flows are being added: its first id, and whether its policy audits
    /// allow (what its verdict flows are named by).
    rule: (u32, bool),
}

/// A policy needs more flows than the limit it was computed with.
#[derive(Debug)]
struct Exceeded;

impl Flows {
    fn unlimited() -> Flows {
        Flows::within(usize::MAX)
    }

    fn within(limit: usize) -> Flows {
        Flows {
            flows: BTreeMap::new(),
            limit,
            rule: (0, false),
        }
    }

    /// Fails once `n` (flows, or matches of one dimension) passes the limit.
    fn check(&self, n: usize) -> Result<(), Exceeded> {
        if n > self.limit {
            return Err(Exceeded);
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    /// Clause flows of conjunctions: (id, clause k, of n), sorted.
    Conjunctions(BTreeSet<(u32, u8, u8)>),
    /// A verdict flow: its actions, its verdict, and who contributes it: (rule id or VNID,
    /// audited).
    Verdict(String, Verdict, BTreeSet<(u32, bool)>),
}

impl Flows {
    /// A verdict flow, contributed by `by` (rule id or VNID, audited).
    fn add(
        &mut self,
        (table, priority, match_): Key,
        verdict: Verdict,
        by: (u32, bool),
        actions: String,
    ) {
        // Equal identities from several rules carry equal actions (allow or drop at one priority).
        let body = self
            .flows
            .entry((table, priority, match_))
            .or_insert_with(|| Body::Verdict(actions, verdict, BTreeSet::new()));
        if let Body::Verdict(_, _, contributors) = body {
            contributors.insert(by);
        }
    }

    fn clause(&mut self, table: u8, match_: String, id: u32, k: u8, n: u8) {
        let body = self
            .flows
            .entry((table, band(id), match_))
            .or_insert_with(|| Body::Conjunctions(BTreeSet::new()));
        if let Body::Conjunctions(set) = body {
            set.insert((id, k, n));
        }
    }
}

impl<'a> View<'a> {
    fn pods(&self) -> impl Iterator<Item = PodRef<'a>> + '_ {
        self.pods.iter().flat_map(|(key, info)| {
            info.ipv4s().map(move |ip| PodRef {
                ip,
                namespace: key.namespace(),
                labels: &info.labels,
                ports: &info.ports,
            })
        })
    }

    /// The local pods `policy` selects (one per address).
    pub fn targets(&self, policy: &NetPol) -> Vec<Ipv4Addr> {
        self.pods
            .iter()
            .filter(|(key, info)| {
                info.local
                    && key.namespace() == policy.namespace
                    && policy.pod_selector.matches(&info.labels)
            })
            .flat_map(|(_, info)| info.ipv4s())
            .collect()
    }

    /// Whether `policy` selects a local pod at all (a pod without an address counts).
    fn selects_any(&self, policy: &NetPol) -> bool {
        self.pods.iter().any(|(key, info)| {
            info.local
                && key.namespace() == policy.namespace
                && policy.pod_selector.matches(&info.labels)
        })
    }

    fn target_matches(&self, dir: Dir, policy: &NetPol, vnid: Vnid) -> BTreeSet<String> {
        if policy.pod_selector.is_empty() {
            if !self.selects_any(policy) {
                return BTreeSet::new();
            }
            return BTreeSet::from([format!("ip, {}={vnid}", dir.target_vnid())]);
        }
        let pods = self.targets(policy);
        let field = dir.target_ip();
        pods.iter().map(|ip| format!("ip, {field}={ip}")).collect()
    }

    /// The named part's targets: each local target's addresses on the numbers `named`
    /// resolves to on it.
    fn named_targets(&self, dir: Dir, policy: &NetPol, named: &[(String, L4)]) -> BTreeSet<String> {
        let field = dir.target_ip();
        self.pods
            .iter()
            .filter(|(key, info)| {
                info.local
                    && key.namespace() == policy.namespace
                    && policy.pod_selector.matches(&info.labels)
            })
            .flat_map(|(_, info)| {
                let numbers = numbers(&info.ports, named);
                info.ipv4s().flat_map(move |ip| {
                    let by_address = format!("ip, {field}={ip}");
                    numbers
                        .clone()
                        .into_iter()
                        .map(move |n| on_port(&by_address, n))
                })
            })
            .collect()
    }

    /// The pods an egress peer picks, each address on its own (none for a network).
    fn peer_pods(&self, policy: &NetPol, peer: &Peer) -> Vec<PodRef<'a>> {
        match peer {
            Peer::Ipv6Block { .. } | Peer::Block { .. } => Vec::new(),
            Peer::Select {
                pods,
                namespaces: None,
            } => self
                .pods()
                .filter(|p| {
                    p.namespace == policy.namespace
                        && pods.as_ref().is_none_or(|s| s.matches(p.labels))
                })
                .collect(),
            Peer::Select {
                pods,
                namespaces: Some(nss),
            } => {
                let chosen: BTreeSet<&str> = self
                    .namespaces
                    .values()
                    .filter(|ns| nss.matches(&ns.effective_labels()))
                    .map(|ns| ns.name.as_str())
                    .collect();
                self.pods()
                    .filter(|p| {
                        chosen.contains(p.namespace)
                            && pods.as_ref().is_none_or(|s| s.matches(p.labels))
                    })
                    .collect()
            }
        }
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

    /// The flows of one policy, added to `out` (up to its limit).
    fn policy_flows(&self, stored: &StoredNetPol, out: &mut Flows) -> Result<(), Exceeded> {
        let policy = &stored.policy;
        let Some(ns) = self.namespaces.get(&policy.namespace) else {
            return Ok(());
        };
        let sides = [
            (Dir::Ingress, &policy.ingress, &stored.ingress_ids),
            (Dir::Egress, &policy.egress, &stored.egress_ids),
        ];
        for (dir, rules, ids) in sides {
            let Some(rules) = rules else { continue };
            let audit = policy.audit.unwrap_or(ns.audit);
            let targets = self.target_matches(dir, policy, ns.vnid);
            for t in &targets {
                let key = (dir.table(), PRIO_ISOLATION, t.clone());
                let by = (ns.vnid.get(), audit.deny);
                out.add(key, Verdict::Deny, by, "drop".into());
            }
            out.check(out.flows.len())?;
            let mut ids = ids.iter().copied();
            for rule in rules {
                // Both parts of a rule are named by its first id.
                out.rule = (ids.clone().next().unwrap_or_default(), audit.allow);
                if rule.has_numbered_part() {
                    let id = ids.next().unwrap_or_default();
                    self.rule_flows(dir, policy, ns.vnid, rule, id, &targets, out)?;
                    out.check(out.flows.len())?;
                }
                let named = rule.named_ports();
                if !named.is_empty() {
                    let id = ids.next().unwrap_or_default();
                    self.named_flows(dir, policy, ns.vnid, rule, id, &named, &targets, out)?;
                    out.check(out.flows.len())?;
                }
            }
        }
        Ok(())
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
    ) -> Result<(), Exceeded> {
        // No target here: the rule allows nothing on this node (and costs nothing).
        if targets.is_empty() {
            return Ok(());
        }
        let peers = self.peer_set(dir, policy, vnid, rule, out)?;
        let ports: BTreeSet<String> = rule.numbered_ports().flat_map(port_matches).collect();
        // A dimension that selects nothing allows nothing: no flows (the isolation stays).
        if peers.as_ref().is_some_and(|p| p.is_empty()) {
            return Ok(());
        }
        let mut dims: Vec<&BTreeSet<String>> = Vec::new();
        match dir {
            Dir::Ingress => dims.extend(peers.as_ref().into_iter().chain([targets])),
            Dir::Egress => dims.extend(std::iter::once(targets).chain(peers.as_ref())),
        }
        if !ports.is_empty() {
            dims.push(&ports);
        }
        conjunction(dir, id, &dims, out);
        Ok(())
    }

    /// The matches of a rule's peers (None without `from`/`to`).
    fn peer_set(
        &self,
        dir: Dir,
        policy: &NetPol,
        vnid: Vnid,
        rule: &Rule,
        out: &Flows,
    ) -> Result<Option<BTreeSet<String>>, Exceeded> {
        let Some(peers) = &rule.peers else {
            return Ok(None);
        };
        let mut matches = BTreeSet::new();
        for peer in peers {
            matches.extend(self.peer_matches(dir, policy, vnid, peer));
            out.check(matches.len())?;
        }
        Ok(Some(matches))
    }

    /// The flows of a rule's named ports: resolved on each target (ingress) or each peer
    /// (egress, where only pods can be peers and no `to` means every pod), conjunction `id`.
    /// Like the numbered part, it is there while the rule has targets and peers (pods with
    /// addresses, resolved or not).
    #[allow(clippy::too_many_arguments)]
    fn named_flows(
        &self,
        dir: Dir,
        policy: &NetPol,
        vnid: Vnid,
        rule: &Rule,
        id: u32,
        named: &[(String, L4)],
        targets: &BTreeSet<String>,
        out: &mut Flows,
    ) -> Result<(), Exceeded> {
        if targets.is_empty() {
            return Ok(());
        }
        let (targets, peers) = match dir {
            Dir::Ingress => {
                let peers = self.peer_set(dir, policy, vnid, rule, out)?;
                if peers.as_ref().is_some_and(|p| p.is_empty()) {
                    return Ok(());
                }
                (self.named_targets(dir, policy, named), peers)
            }
            Dir::Egress => {
                let everyone = [Peer::Select {
                    pods: None,
                    namespaces: Some(Default::default()),
                }];
                let peers = rule.peers.as_deref().unwrap_or(&everyone);
                let pods: Vec<PodRef> = peers
                    .iter()
                    .flat_map(|p| self.peer_pods(policy, p))
                    .collect();
                if pods.is_empty() {
                    return Ok(());
                }
                let matches: BTreeSet<String> = pods
                    .iter()
                    .flat_map(|p| {
                        numbers(p.ports, named)
                            .into_iter()
                            .map(move |n| on_port(&format!("ip, nw_dst={}", p.ip), n))
                    })
                    .collect();
                out.check(matches.len())?;
                (targets.clone(), Some(matches))
            }
        };
        let mut dims: Vec<&BTreeSet<String>> = Vec::new();
        match dir {
            Dir::Ingress => dims.extend(peers.as_ref().into_iter().chain([&targets])),
            Dir::Egress => dims.extend(std::iter::once(&targets).chain(peers.as_ref())),
        }
        conjunction(dir, id, &dims, out);
        Ok(())
    }

    /// Every flow of every policy, merged, as text.
    pub fn flows(&self) -> Vec<String> {
        let mut out = Flows::unlimited();
        for stored in self.netpols.values() {
            // Never exceeded: there is no limit.
            let _ = self.policy_flows(stored, &mut out);
        }
        let mut audited = BTreeSet::new();
        let mut flows: Vec<String> = out
            .flows
            .into_iter()
            .map(|((table, priority, match_), body)| match body {
                Body::Conjunctions(set) => {
                    let actions = set
                        .iter()
                        .map(|(id, k, n)| format!("conjunction({id},{k}/{n})"))
                        .collect::<Vec<_>>()
                        .join(",");
                    format!("table={table}, priority={priority}, {match_}, actions={actions}")
                }
                Body::Verdict(actions, verdict, contributors) => {
                    // Named by the smallest audited contributor, else the smallest.
                    let (id, is_audited) = contributors
                        .iter()
                        .filter(|(_, a)| *a)
                        .chain(&contributors)
                        .copied()
                        .next()
                        .unwrap_or_default();
                    let dir = if table == POLICY {
                        AuditDir::Ingress
                    } else {
                        AuditDir::Egress
                    };
                    let rule = RuleRef {
                        tier: AuditTier::NetworkPolicy,
                        dir,
                        verdict,
                        id,
                    };
                    let actions = if is_audited {
                        audited.insert(rule.key());
                        let key = rule.key();
                        match actions.as_str() {
                            "drop" => format!("load:{key:#x}->NXM_NX_REG4[],resubmit(,24)"),
                            _ => format!("load:{key:#x}->NXM_NX_REG4[],resubmit(,24),{actions}"),
                        }
                    } else {
                        actions
                    };
                    format!(
                        "cookie={:#x}, table={table}, priority={priority}, {match_}, actions={actions}",
                        rule.cookie()
                    )
                }
            })
            .collect();
        flows.extend(audited.into_iter().map(audit_flow_text));
        flows
    }
}

/// Conjunction `id` over `dims` (its clauses, and the flow a match goes to), or, with one
/// dimension, its matches allowed outright.
fn conjunction(dir: Dir, id: u32, dims: &[&BTreeSet<String>], out: &mut Flows) {
    let table = dir.table();
    let by = out.rule;
    if dims.len() == 1 {
        for t in dims[0] {
            let key = (table, PRIO_PLAIN_ALLOW, t.clone());
            out.add(key, Verdict::Allow, by, dir.allow());
        }
        return;
    }
    let n = dims.len() as u8;
    for (k, dim) in dims.iter().enumerate() {
        for m in dim.iter() {
            out.clause(table, m.clone(), id, k as u8 + 1, n);
        }
    }
    let key = (table, band(id), format!("conj_id={id}, ip"));
    out.add(key, Verdict::Allow, by, dir.allow());
}

/// The priority of conjunction `id`'s flows (as the engine bands them).
fn band(id: u32) -> u16 {
    band_priority(id).unwrap_or(PRIO_CONJUNCTION)
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
