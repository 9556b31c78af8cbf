//! The mode's flows, kept incrementally from selector groups.
//!
//! Every Kubernetes rule is one `conjunction(id, k/n)` over the dimensions it constrains:
//! its targets (the local pods the policy selects), its peers, its ports. A dimension whose
//! members are a selector group's follows the group: a member that joins adds its clause
//! contributions, one that leaves removes them; conjunction clauses are independent, so no
//! policy is recomputed when a pod or namespace changes. A policy change recomputes that
//! policy alone ([`Plan`]: what its rules select, as group keys; then its flows).
//!
//! Clause flows with the same (table, priority, match) are one OpenFlow flow carrying one
//! `conjunction` action per rule: each flow counts its contributions, and goes with its last.
//! So that one flow always fits an OpenFlow message, the clause flows of conjunction ids
//! `[2048·b + 1, 2048·(b + 1)]` sit at priority `200 − b` (a packet that completes no
//! conjunction at one priority falls through to the next).
//!
//! A rule is *active* (has flows) while it has targets on this node and, when it names
//! peers, at least one peer: a rule that can allow nothing here costs nothing.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use ofnode_proto::{Action, Conjunction, FlowMod, FlowModCommand, Instruction, Match};
use slab::Slab;

pub(crate) mod matches;

pub use matches::Dir;

use super::audit;
use crate::sdn::audit::{AuditSet, AuditTier, RuleRef, Verdict};
use crate::sdn::labels::FieldError;
use crate::sdn::layout::{POLICY, POLICY_COMMIT, POLICY_CONNTRACK, ROUTING};
use crate::sdn::objects::{Namespace, L4};
use crate::sdn::policy::networkpolicy::limits::too_many_flows;
use crate::sdn::policy::networkpolicy::model::{Peer, Rule};
use crate::sdn::policy::networkpolicy::{
    StoredNetPol, PRIO_CONJUNCTION, PRIO_ISOLATION, PRIO_PLAIN_ALLOW,
};
use crate::sdn::store::{Delta, GroupId, GroupKey, Groups, Member, Scope, World};
use crate::value::{Cidr, Vnid};

/// Conjunction ids per priority band: 2048 `conjunction` actions of 16 bytes fit one flow.
pub const IDS_PER_BAND: u32 = 2048;
/// Bands between the plain allows (210) and the isolation drops (100), ten kept apart.
pub const BANDS: u32 = (PRIO_CONJUNCTION - PRIO_ISOLATION) as u32 - 10;

/// The priority of conjunction `id`'s flows (None past the last band).
pub fn band_priority(id: u32) -> Option<u16> {
    let band = id.saturating_sub(1) / IDS_PER_BAND;
    u16::try_from(band)
        .ok()
        .filter(|b| u32::from(*b) < BANDS)
        .map(|b| PRIO_CONJUNCTION - b)
}

/// The priority of conjunction `id`'s flows (a checked policy's ids are all in a band).
fn conjunction_priority(id: u32) -> u16 {
    band_priority(id).unwrap_or(PRIO_CONJUNCTION)
}

/// The highest conjunction id a node can hold.
pub fn max_conjunction_id() -> u32 {
    BANDS * IDS_PER_BAND
}

impl Dir {
    fn table(self) -> u8 {
        match self {
            Dir::Ingress => POLICY,
            Dir::Egress => POLICY_CONNTRACK,
        }
    }

    /// Where an allowed packet goes next.
    fn next_table(self) -> u8 {
        match self {
            Dir::Ingress => POLICY_COMMIT,
            Dir::Egress => ROUTING,
        }
    }

    fn of_table(table: u8) -> Dir {
        if table == POLICY {
            Dir::Ingress
        } else {
            Dir::Egress
        }
    }
}

/// A flow's OpenFlow identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub table: u8,
    pub priority: u16,
    pub match_: Match,
}

impl FlowKey {
    fn new(table: u8, priority: u16, match_: Match) -> FlowKey {
        FlowKey {
            table,
            priority,
            match_,
        }
    }
}

/// What rules contribute to one flow: conjunction clauses, isolation drops (by the VNID of
/// the isolated pods' namespace, and whether the isolating policy audits deny) or allows (by
/// the rule's id, and whether its policy audits allow), each with the number of its
/// contributors.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Contributions {
    clauses: BTreeMap<(u32, u8, u8), u32>,
    drops: BTreeMap<(u32, bool), u32>,
    allows: BTreeMap<(u32, bool), u32>,
}

/// One contributor more (`add`) or fewer under `key`; a key with none left goes.
fn count_in<K: Ord>(map: &mut BTreeMap<K, u32>, key: K, add: bool) {
    match map.entry(key) {
        Entry::Occupied(count) if !add && *count.get() <= 1 => drop(count.remove()),
        Entry::Occupied(mut count) if !add => *count.get_mut() -= 1,
        Entry::Occupied(mut count) => *count.get_mut() += 1,
        Entry::Vacant(slot) if add => drop(slot.insert(1)),
        Entry::Vacant(_) => {}
    }
}

/// The rule a verdict flow's contributors name, and whether any audits it: among audited
/// contributors the smallest id, else the smallest of all (a plain allow is shared by every
/// rule that allows its target outright; the log then names one of them).
fn named_rule(contributors: &BTreeMap<(u32, bool), u32>) -> Option<(u32, bool)> {
    let audited = contributors
        .keys()
        .filter(|(_, a)| *a)
        .map(|(id, _)| *id)
        .min();
    match audited {
        Some(id) => Some((id, true)),
        None => contributors.keys().map(|(id, _)| (*id, false)).min(),
    }
}

impl Contributions {
    fn is_empty(&self) -> bool {
        self.clauses.is_empty() && self.drops.is_empty() && self.allows.is_empty()
    }

    fn count(&mut self, part: Part, add: bool) {
        match part {
            Part::Clause { id, k, n } => count_in(&mut self.clauses, (id, k, n), add),
            Part::Drop { vnid, audited } => count_in(&mut self.drops, (vnid, audited), add),
            Part::Allow { id, audited } => count_in(&mut self.allows, (id, audited), add),
        }
    }

    /// The rule whose verdict the flow is (None: a clause flow), and whether it is audited.
    fn verdict(&self, dir: Dir) -> Option<(RuleRef, bool)> {
        if !self.clauses.is_empty() {
            return None;
        }
        let rule = |verdict, id| RuleRef {
            tier: AuditTier::NetworkPolicy,
            dir,
            verdict,
            id,
        };
        if let Some((id, audited)) = named_rule(&self.allows) {
            return Some((rule(Verdict::Allow, id), audited));
        }
        named_rule(&self.drops).map(|(vnid, audited)| (rule(Verdict::Deny, vnid), audited))
    }

    /// The audited rule the flow hands to table 24, if any.
    fn audited(&self, dir: Dir) -> Option<RuleRef> {
        self.verdict(dir)
            .and_then(|(rule, audited)| audited.then_some(rule))
    }

    fn flow_mod(&self, key: &FlowKey) -> Option<FlowMod> {
        let instructions = if !self.clauses.is_empty() {
            let actions = self
                .clauses
                .keys()
                .map(|&(id, clause, n_clauses)| {
                    Action::Conjunction(Conjunction {
                        id,
                        clause,
                        n_clauses,
                    })
                })
                .collect();
            vec![Instruction::ApplyActions(actions)]
        } else if !self.allows.is_empty() {
            vec![Instruction::GotoTable(
                Dir::of_table(key.table).next_table(),
            )]
        } else if !self.drops.is_empty() {
            Vec::new()
        } else {
            return None;
        };
        let fm = FlowMod {
            table_id: key.table,
            priority: key.priority,
            match_: key.match_.clone(),
            instructions,
            ..FlowMod::new(FlowModCommand::Add)
        };
        Some(match self.verdict(Dir::of_table(key.table)) {
            Some((rule, audited)) => audit::verdict_flow(fm, rule, audited),
            None => fm,
        })
    }
}

/// What one contribution is: a clause, an isolation drop of a pod of the namespace with
/// VNID `vnid`, an allow of the rule with (first conjunction) id `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Clause { id: u32, k: u8, n: u8 },
    Drop { vnid: u32, audited: bool },
    Allow { id: u32, audited: bool },
}

/// One flow of the mode changed: as it was and as it is (None: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowChange {
    pub before: Option<FlowMod>,
    pub after: Option<FlowMod>,
}

/// Named container ports (name, protocol) a conjunction resolves on each pod a packet goes
/// to: the targets' for ingress, the peers' for egress. Empty for a rule's numbered part.
type NamedPorts = [(String, L4)];

/// A pod's matches by address, each with the numbers its named ports resolve to on it (none
/// when it has none of them; just the addresses when no port is named).
fn with_named_ports(by_address: Vec<Match>, member: &Member, named: &NamedPorts) -> Vec<Match> {
    let Member::Pod { ports, .. } = member else {
        return Vec::new();
    };
    if named.is_empty() {
        return by_address;
    }
    let numbers: Vec<(L4, u16)> = named
        .iter()
        .flat_map(|(name, protocol)| {
            ports
                .iter()
                .filter(move |p| p.name == *name && p.protocol == *protocol)
                .map(|p| (p.protocol, p.port))
        })
        .collect();
    by_address
        .iter()
        .flat_map(|m| {
            numbers
                .iter()
                .map(move |(protocol, port)| matches::with_port(m.clone(), *protocol, *port))
        })
        .collect()
}

fn member_targets(dir: Dir, member: &Member, named: &NamedPorts) -> Vec<Match> {
    match member {
        Member::Pod { ipv4s, .. } => {
            let by_address = ipv4s.iter().map(|ip| matches::target(dir, *ip)).collect();
            with_named_ports(by_address, member, named)
        }
        Member::Namespace { .. } => Vec::new(),
    }
}

fn member_peers(dir: Dir, member: &Member, named: &NamedPorts) -> Vec<Match> {
    match member {
        Member::Pod { ipv4s, vnid, .. } => {
            let by_address = ipv4s
                .iter()
                .map(|ip| matches::peer_pod(dir, *ip, *vnid))
                .collect();
            with_named_ports(by_address, member, named)
        }
        // A namespace has no ports of its own: a named-port part never takes such peers.
        Member::Namespace { vnid, .. } if named.is_empty() => {
            vec![matches::peer_namespace(*vnid)]
        }
        Member::Namespace { .. } => Vec::new(),
    }
}

/// Targets as a plan names them: the local pods of the policy's namespace its pod selector
/// takes, each by address, or (an empty pod selector) the whole namespace by VNID while any
/// pod of it is here.
#[derive(Debug, Clone)]
struct TargetPlan {
    key: GroupKey,
    namespace_vnid: Option<Vnid>,
}

#[derive(Debug, Clone)]
enum PeerPlan {
    /// Fixed matches: networks, the cluster, the policy's own namespace.
    Fixed(Vec<Match>),
    /// The members of a group of pods or namespaces.
    Group(GroupKey),
}

/// Clause numbers (1-based) of a rule's dimensions (0: absent), and their count.
#[derive(Debug, Clone, Copy)]
struct Clauses {
    targets: u8,
    peers: u8,
    ports: u8,
    n: u8,
}

impl Clauses {
    /// Ingress: peers, targets, ports; egress: targets, peers, ports (absent ones skipped).
    fn of(dir: Dir, has_peers: bool, has_ports: bool) -> Clauses {
        let mut n = 0u8;
        let mut next = |present: bool| {
            if present {
                n += 1;
                n
            } else {
                0
            }
        };
        let (targets, peers) = match dir {
            Dir::Ingress => {
                let peers = next(has_peers);
                (next(true), peers)
            }
            Dir::Egress => {
                let targets = next(true);
                (targets, next(has_peers))
            }
        };
        let ports = next(has_ports);
        Clauses {
            targets,
            peers,
            ports,
            n,
        }
    }
}

/// One conjunction of a rule: its numbered part (ports a dimension of their own), or its
/// named part (the ports resolved on each destination pod, `named`).
#[derive(Debug, Clone)]
struct RulePlan {
    id: u32,
    /// What its verdict flows count (the rule's first id, both parts alike).
    allow: Part,
    priority: u16,
    peers: Option<Vec<PeerPlan>>,
    ports: Vec<Match>,
    named: Vec<(String, L4)>,
    clauses: Clauses,
}

impl RulePlan {
    /// The named ports resolved on the targets (ingress) and on the peers (egress).
    fn named_on(&self, dir: Dir) -> (&NamedPorts, &NamedPorts) {
        named_on(dir, &self.named)
    }
}

fn named_on(dir: Dir, named: &NamedPorts) -> (&NamedPorts, &NamedPorts) {
    match dir {
        Dir::Ingress => (named, &[]),
        Dir::Egress => (&[], named),
    }
}

#[derive(Debug, Clone)]
struct SidePlan {
    dir: Dir,
    /// What its isolation drops count.
    drop: Part,
    targets: TargetPlan,
    rules: Vec<RulePlan>,
}

/// What a policy selects, as group keys and fixed matches: computed from the policy and its
/// namespace alone, before any group is looked at.
#[derive(Debug, Clone)]
struct Plan {
    sides: Vec<SidePlan>,
}

/// A computation that passed its limit of flows.
#[derive(Debug)]
struct Exceeded;

impl Plan {
    fn of(cluster: Cidr, stored: &StoredNetPol, ns: &Namespace) -> Plan {
        let policy = &stored.policy;
        let sides = [
            (Dir::Ingress, &policy.ingress, &stored.ingress_ids),
            (Dir::Egress, &policy.egress, &stored.egress_ids),
        ];
        let sides = sides
            .into_iter()
            .filter_map(|(dir, rules, ids)| {
                let rules = rules.as_ref()?;
                let audit = policy.audit.unwrap_or(ns.audit);
                let targets = TargetPlan {
                    key: GroupKey::pods(
                        Scope::Named(policy.namespace.clone()),
                        Some(&policy.pod_selector),
                        true,
                    ),
                    namespace_vnid: policy.pod_selector.is_empty().then_some(ns.vnid),
                };
                let mut ids = ids.iter().copied();
                let rules = rules
                    .iter()
                    .flat_map(|rule| {
                        RulePlan::of(cluster, dir, &policy.namespace, ns, rule, &mut ids, audit)
                    })
                    .collect();
                Some(SidePlan {
                    dir,
                    drop: Part::Drop {
                        vnid: ns.vnid.get(),
                        audited: audit.deny,
                    },
                    targets,
                    rules,
                })
            })
            .collect();
        Plan { sides }
    }

    /// The flows the policy alone has, with the members `members` gives each group, up to
    /// `limit` of them.
    fn flows(
        &self,
        members: impl Fn(&GroupKey) -> Vec<Member>,
        limit: usize,
    ) -> Result<HashSet<FlowKey>, Exceeded> {
        let mut flows = HashSet::new();
        let mut put = |key: FlowKey| {
            flows.insert(key);
            if flows.len() > limit {
                Err(Exceeded)
            } else {
                Ok(())
            }
        };
        for side in &self.sides {
            let dir = side.dir;
            let target_members = members(&side.targets.key);
            let targets = target_matches(
                dir,
                side.targets.namespace_vnid,
                target_members.clone(),
                &[],
            );
            if targets.is_empty() {
                // No target here: no isolation and no rule flows (no peer is looked at).
                continue;
            }
            for m in &targets {
                put(FlowKey::new(dir.table(), PRIO_ISOLATION, m.clone()))?;
            }
            for rule in &side.rules {
                let (on_targets, on_peers) = rule.named_on(dir);
                let peers = rule.peers.as_ref().map(|peers| {
                    peers
                        .iter()
                        .flat_map(|p| match p {
                            PeerPlan::Fixed(m) => m.clone(),
                            PeerPlan::Group(key) => members(key)
                                .iter()
                                .flat_map(|m| member_peers(dir, m, on_peers))
                                .collect(),
                        })
                        .collect::<Vec<_>>()
                });
                if peers.as_ref().is_some_and(Vec::is_empty) {
                    continue;
                }
                let rule_targets = if on_targets.is_empty() {
                    targets.clone()
                } else {
                    target_matches(dir, None, target_members.clone(), on_targets)
                };
                for (key, _) in rule_parts(
                    dir,
                    rule.id,
                    rule.allow,
                    rule.clauses,
                    &rule_targets,
                    peers.as_deref(),
                    &rule.ports,
                ) {
                    put(key)?;
                }
            }
        }
        Ok(flows)
    }
}

impl RulePlan {
    /// A rule's conjunctions, each taking its id from `ids` (its numbered part first); its
    /// verdict flows are audited when `audit` has allow.
    fn of(
        cluster: Cidr,
        dir: Dir,
        namespace: &str,
        ns: &Namespace,
        rule: &Rule,
        ids: &mut impl Iterator<Item = u32>,
        audit: AuditSet,
    ) -> Vec<RulePlan> {
        let peers_of = |named: bool| {
            rule.peers.as_ref().map(|peers| {
                peers
                    .iter()
                    .map(|peer| peer_plan(cluster, dir, namespace, ns, peer, named))
                    .collect::<Vec<_>>()
            })
        };
        let plan = |id: u32, peers: Option<Vec<PeerPlan>>, ports: Vec<Match>, named| RulePlan {
            id,
            allow: Part::Allow {
                id,
                audited: audit.allow,
            },
            priority: conjunction_priority(id),
            clauses: Clauses::of(dir, peers.is_some(), !ports.is_empty()),
            peers,
            ports,
            named,
        };
        let mut parts = Vec::new();
        if rule.has_numbered_part() {
            let mut ports: Vec<Match> = Vec::new();
            for m in rule.numbered_ports().flat_map(matches::ports) {
                if !ports.contains(&m) {
                    ports.push(m);
                }
            }
            if let Some(id) = ids.next() {
                parts.push(plan(id, peers_of(false), ports, Vec::new()));
            }
        }
        let named = rule.named_ports();
        if !named.is_empty() {
            // Egress resolves the names on the destinations: every pod when `to` is absent.
            let peers = match (dir, peers_of(true)) {
                (Dir::Egress, None) => Some(vec![PeerPlan::Group(all_pods())]),
                (_, peers) => peers,
            };
            if let Some(id) = ids.next() {
                parts.push(plan(id, peers, Vec::new(), named));
            }
        }
        // Both parts of a rule are one rule to the audit: named by its first id.
        if let Some(first) = parts.first().map(|p| p.allow) {
            for part in &mut parts {
                part.allow = first;
            }
        }
        parts
    }
}

/// Every pod of every namespace.
fn all_pods() -> GroupKey {
    GroupKey::pods(Scope::Selected(Default::default()), None, false)
}

/// Where a peer's matches come from. With `by_pod` (an egress part whose ports are named on
/// the destinations), only pods can be peers: networks give none, and the whole cluster is
/// every pod.
fn peer_plan(
    cluster: Cidr,
    dir: Dir,
    namespace: &str,
    ns: &Namespace,
    peer: &Peer,
    by_pod: bool,
) -> PeerPlan {
    let by_pod = by_pod && dir == Dir::Egress;
    match peer {
        Peer::Ipv6Block { .. } => PeerPlan::Fixed(Vec::new()),
        Peer::Block { .. } if by_pod => PeerPlan::Fixed(Vec::new()),
        Peer::Block { cidr, except } => PeerPlan::Fixed(matches::peer_block(dir, *cidr, except)),
        Peer::Select {
            pods,
            namespaces: None,
        } => {
            let all = pods.as_ref().is_none_or(|s| s.is_empty());
            if dir == Dir::Ingress && all {
                return PeerPlan::Fixed(vec![matches::peer_namespace(ns.vnid)]);
            }
            PeerPlan::Group(GroupKey::pods(
                Scope::Named(namespace.to_string()),
                pods.as_ref(),
                false,
            ))
        }
        Peer::Select {
            pods,
            namespaces: Some(nss),
        } => {
            let all = pods.as_ref().is_none_or(|s| s.is_empty());
            if nss.is_empty() && all && by_pod {
                return PeerPlan::Group(all_pods());
            }
            if nss.is_empty() && all {
                return PeerPlan::Fixed(vec![matches::peer_network(dir, cluster)]);
            }
            if dir == Dir::Ingress && all {
                PeerPlan::Group(GroupKey::namespaces(nss))
            } else {
                PeerPlan::Group(GroupKey::pods(
                    Scope::Selected(nss.clone()),
                    pods.as_ref(),
                    false,
                ))
            }
        }
    }
}

/// The target matches of a group with `members`, by address or (`namespace_vnid`) by the
/// namespace's VNID; by address and port when ports are `named` on the targets.
fn target_matches(
    dir: Dir,
    namespace_vnid: Option<Vnid>,
    members: Vec<Member>,
    named: &NamedPorts,
) -> Vec<Match> {
    match namespace_vnid {
        Some(vnid) if named.is_empty() && !members.is_empty() => {
            vec![matches::target_namespace(dir, vnid)]
        }
        Some(_) if named.is_empty() => Vec::new(),
        _ => members
            .iter()
            .flat_map(|m| member_targets(dir, m, named))
            .collect(),
    }
}

/// The contributions of an active rule: its targets, peers and ports as clauses (or, with
/// targets alone, plain allows), and the flow its satisfied conjunction goes to.
fn rule_parts(
    dir: Dir,
    id: u32,
    allow: Part,
    clauses: Clauses,
    targets: &[Match],
    peers: Option<&[Match]>,
    ports: &[Match],
) -> Vec<(FlowKey, Part)> {
    let (table, priority) = (dir.table(), conjunction_priority(id));
    if clauses.n == 1 {
        return targets
            .iter()
            .map(|m| (FlowKey::new(table, PRIO_PLAIN_ALLOW, m.clone()), allow))
            .collect();
    }
    let clause = |k: u8| Part::Clause {
        id,
        k,
        n: clauses.n,
    };
    let dims = [
        (clauses.targets, targets),
        (clauses.peers, peers.unwrap_or_default()),
        (clauses.ports, ports),
    ];
    let mut parts: Vec<(FlowKey, Part)> = dims
        .into_iter()
        .filter(|(k, _)| *k > 0)
        .flat_map(|(k, matches)| {
            matches
                .iter()
                .map(move |m| (FlowKey::new(table, priority, m.clone()), clause(k)))
        })
        .collect();
    parts.push((
        FlowKey::new(table, priority, matches::conjunction(id)),
        allow,
    ));
    parts
}

/// A rule's or side's targets, as applied.
#[derive(Debug, Clone, Copy)]
struct Targets {
    group: GroupId,
    namespace_vnid: Option<Vnid>,
}

impl Targets {
    /// How many target matches there are now.
    fn count(&self, groups: &Groups) -> usize {
        match self.namespace_vnid {
            Some(_) => usize::from(groups.len_of(self.group) > 0),
            None => groups.matches_of(self.group),
        }
    }

    fn matches(&self, dir: Dir, groups: &Groups, world: World) -> Vec<Match> {
        target_matches(
            dir,
            self.namespace_vnid,
            groups.members(self.group, world),
            &[],
        )
    }
}

/// Where an applied rule's peers come from.
#[derive(Debug, Clone)]
enum PeerSource {
    Fixed(Vec<Match>),
    Group(GroupId),
}

#[derive(Debug)]
struct RuleState {
    dir: Dir,
    id: u32,
    /// What its verdict flows count.
    allow: Part,
    priority: u16,
    targets: Targets,
    /// What its peers are (None: every peer), as keys; kept for when it has targets.
    peer_plan: Option<Vec<PeerPlan>>,
    /// Its peers, while it has targets here (their groups are held only then: a rule that
    /// selects no local pod costs no group), else none.
    peers: Vec<PeerSource>,
    armed: bool,
    ports: Vec<Match>,
    /// Ports named on the pods a packet goes to (this is the rule's named part), or none.
    named: Vec<(String, L4)>,
    clauses: Clauses,
    active: bool,
}

impl RuleState {
    /// The named ports resolved on the targets (ingress) and on the peers (egress).
    fn named_on(&self) -> (&NamedPorts, &NamedPorts) {
        named_on(self.dir, &self.named)
    }

    /// Whether its targets are matched pod by pod (by address, with named ports), not by
    /// their namespace's VNID.
    fn targets_by_pod(&self) -> bool {
        self.targets.namespace_vnid.is_none() || !self.named_on().0.is_empty()
    }

    fn peer_count(&self, groups: &Groups) -> Option<usize> {
        self.peer_plan.as_ref().map(|_| {
            self.peers
                .iter()
                .map(|s| match s {
                    PeerSource::Fixed(m) => m.len(),
                    PeerSource::Group(g) => groups.matches_of(*g),
                })
                .sum()
        })
    }

    fn should_be_active(&self, groups: &Groups) -> bool {
        self.targets.count(groups) > 0 && self.peer_count(groups).is_none_or(|n| n > 0)
    }

    /// Where a target match of this rule goes, and what it contributes.
    fn target_part(&self) -> (u16, Part) {
        if self.clauses.n == 1 {
            (PRIO_PLAIN_ALLOW, self.allow)
        } else {
            let part = Part::Clause {
                id: self.id,
                k: self.clauses.targets,
                n: self.clauses.n,
            };
            (self.priority, part)
        }
    }

    fn peer_part(&self) -> Part {
        Part::Clause {
            id: self.id,
            k: self.clauses.peers,
            n: self.clauses.n,
        }
    }

    /// Every contribution of the rule while it is active, from the groups as they are. Its
    /// namespace-wide target is in for as long as it is active (it became active with it),
    /// even when the last target left a moment ago.
    fn parts(&self, groups: &Groups, world: World) -> Vec<(FlowKey, Part)> {
        let (on_targets, on_peers) = self.named_on();
        let targets = match self.targets.namespace_vnid {
            Some(vnid) if !self.targets_by_pod() => {
                vec![matches::target_namespace(self.dir, vnid)]
            }
            _ => target_matches(
                self.dir,
                None,
                groups.members(self.targets.group, world),
                on_targets,
            ),
        };
        let peers = self.peer_plan.as_ref().map(|_| {
            self.peers
                .iter()
                .flat_map(|s| match s {
                    PeerSource::Fixed(m) => m.clone(),
                    PeerSource::Group(g) => groups
                        .members(*g, world)
                        .iter()
                        .flat_map(|m| member_peers(self.dir, m, on_peers))
                        .collect(),
                })
                .collect::<Vec<_>>()
        });
        rule_parts(
            self.dir,
            self.id,
            self.allow,
            self.clauses,
            &targets,
            peers.as_deref(),
            &self.ports,
        )
    }
}

/// A policy side's isolation: every target is dropped unless a rule allows it.
#[derive(Debug)]
struct SideState {
    dir: Dir,
    /// What its isolation drops count.
    drop: Part,
    targets: Targets,
    /// Its drops are in: the namespace-wide one while it has targets (targets by VNID), or
    /// one per target since it was applied (targets by address).
    present: bool,
}

/// Who uses a group, for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Side(usize),
    RuleTargets(usize),
    RulePeers(usize),
}

/// A policy as applied: its sides, rules and the groups it holds.
#[derive(Debug, Default)]
struct Applied {
    sides: Vec<usize>,
    rules: Vec<usize>,
    groups: Vec<GroupId>,
}

/// The mode's flows.
#[derive(Debug)]
pub struct Engine {
    cluster: Cidr,
    policies: HashMap<String, Applied>,
    rules: Slab<RuleState>,
    sides: Slab<SideState>,
    uses: HashMap<GroupId, Vec<Use>>,
    flows: HashMap<FlowKey, Contributions>,
    /// The flows touched since the last [`Engine::take_changes`], as they were.
    touched: HashMap<FlowKey, Option<FlowMod>>,
    /// The audited rules, by key, with the number of verdict flows handing packets to each:
    /// table 24 has one flow per rule here.
    audits: HashMap<u32, (RuleRef, u32)>,
    /// The audited rules touched since the last [`Engine::take_changes`], and whether each
    /// had its table 24 flow then.
    touched_audits: HashMap<u32, bool>,
}

impl Engine {
    /// An engine with no policy, for a node whose cluster network is `cluster`.
    pub fn new(cluster: Cidr) -> Engine {
        Engine {
            cluster,
            policies: HashMap::new(),
            rules: Slab::new(),
            sides: Slab::new(),
            uses: HashMap::new(),
            flows: HashMap::new(),
            touched: HashMap::new(),
            audits: HashMap::new(),
            touched_audits: HashMap::new(),
        }
    }

    /// How many flows it holds.
    pub fn len(&self) -> usize {
        self.flows.len() + self.audits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.audits.is_empty()
    }

    /// Every flow it holds.
    pub fn flow_mods(&self) -> impl Iterator<Item = FlowMod> + '_ {
        let audit_flows = self
            .audits
            .values()
            .map(|(rule, _)| audit::audit_flow(*rule));
        self.flows
            .iter()
            .filter_map(|(key, c)| c.flow_mod(key))
            .chain(audit_flows)
    }

    fn contribute(&mut self, key: FlowKey, part: Part, add: bool) {
        let dir = Dir::of_table(key.table);
        let entry = self.flows.entry(key.clone()).or_default();
        if !self.touched.contains_key(&key) {
            let before = entry.flow_mod(&key);
            self.touched.insert(key.clone(), before);
        }
        let was = entry.audited(dir);
        entry.count(part, add);
        let now = entry.audited(dir);
        if entry.is_empty() {
            self.flows.remove(&key);
        }
        if was != now {
            if let Some(rule) = was {
                self.audit_use(rule, false);
            }
            if let Some(rule) = now {
                self.audit_use(rule, true);
            }
        }
    }

    /// One more (or one fewer) verdict flow hands packets to `rule`'s table 24 flow.
    fn audit_use(&mut self, rule: RuleRef, add: bool) {
        let key = rule.key();
        let present = self.audits.contains_key(&key);
        self.touched_audits.entry(key).or_insert(present);
        let count = &mut self.audits.entry(key).or_insert((rule, 0)).1;
        if add {
            *count += 1;
        } else {
            *count = count.saturating_sub(1);
        }
        if *count == 0 {
            self.audits.remove(&key);
        }
    }

    /// The flows that changed since the last call, each once, as before and after.
    pub fn take_changes(&mut self) -> Vec<FlowChange> {
        let audits = std::mem::take(&mut self.touched_audits)
            .into_iter()
            .filter_map(|(key, was)| {
                let now = self.audits.contains_key(&key);
                let flow = || RuleRef::of_key(key).map(audit::audit_flow);
                (was != now).then(|| FlowChange {
                    before: if was { flow() } else { None },
                    after: if now { flow() } else { None },
                })
            });
        let audits: Vec<FlowChange> = audits.collect();
        std::mem::take(&mut self.touched)
            .into_iter()
            .filter_map(|(key, before)| {
                let after = self.flows.get(&key).and_then(|c| c.flow_mod(&key));
                (before != after).then_some(FlowChange { before, after })
            })
            .chain(audits)
            .collect()
    }

    /// Applies the policy stored under `key` anew: its old flows go, and `policy`'s (None:
    /// deleted) come, computed in `namespace` (None: it does not exist, the policy has no
    /// flows). Fails, changing nothing, when a rule's conjunction id is past the last band.
    pub fn apply_policy(
        &mut self,
        key: &str,
        policy: Option<&StoredNetPol>,
        namespace: Option<&Namespace>,
        groups: &mut Groups,
        world: World,
    ) -> Result<(), FieldError> {
        if let Some(stored) = policy {
            check_ids(stored)?;
        }
        if let Some(applied) = self.policies.remove(key) {
            self.unapply(applied, groups, world);
        }
        if let (Some(stored), Some(ns)) = (policy, namespace) {
            let plan = Plan::of(self.cluster, stored, ns);
            let applied = self.build(plan, groups, world);
            self.policies.insert(key.to_string(), applied);
        }
        Ok(())
    }

    /// Refuses `stored` when it alone would need more than `limit` flows here now (counted
    /// from the groups as they are, without making any), or has a conjunction id past the
    /// last band.
    pub fn check_policy(
        &self,
        stored: &StoredNetPol,
        namespace: &Namespace,
        groups: &Groups,
        world: World,
        limit: usize,
    ) -> Result<(), FieldError> {
        check_ids(stored)?;
        Plan::of(self.cluster, stored, namespace)
            .flows(|key| groups.preview(key, world), limit)
            .map(drop)
            .map_err(|Exceeded| too_many_flows())
    }

    fn build(&mut self, plan: Plan, groups: &mut Groups, world: World) -> Applied {
        let mut applied = Applied::default();
        for side_plan in plan.sides {
            let group = groups.acquire(side_plan.targets.key, world);
            applied.groups.push(group);
            let targets = Targets {
                group,
                namespace_vnid: side_plan.targets.namespace_vnid,
            };
            let side = self.sides.insert(SideState {
                dir: side_plan.dir,
                drop: side_plan.drop,
                targets,
                present: false,
            });
            self.use_group(group, Use::Side(side));
            self.refresh_side(side, groups, world);
            applied.sides.push(side);
            for rule in side_plan.rules {
                let state = RuleState {
                    dir: side_plan.dir,
                    id: rule.id,
                    allow: rule.allow,
                    priority: rule.priority,
                    targets,
                    peer_plan: rule.peers,
                    peers: Vec::new(),
                    armed: false,
                    ports: rule.ports,
                    named: rule.named,
                    clauses: rule.clauses,
                    active: false,
                };
                let index = self.rules.insert(state);
                // Its targets are its side's group; its peers' are acquired once it has any.
                self.use_group(group, Use::RuleTargets(index));
                let release = self.refresh_rule(index, groups, world);
                release_all(groups, release);
                applied.rules.push(index);
            }
        }
        applied
    }

    fn use_group(&mut self, group: GroupId, used: Use) {
        self.uses.entry(group).or_default().push(used);
    }

    fn unuse_group(&mut self, group: GroupId, used: Use) {
        if let Some(list) = self.uses.get_mut(&group) {
            if let Some(i) = list.iter().position(|u| *u == used) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                self.uses.remove(&group);
            }
        }
    }

    fn unapply(&mut self, applied: Applied, groups: &mut Groups, world: World) {
        let mut release = Vec::new();
        for index in applied.rules {
            if self.rules[index].active {
                self.rule_flows(index, false, groups, world);
            }
            release.extend(self.disarm(index));
            let rule = self.rules.remove(index);
            self.unuse_group(rule.targets.group, Use::RuleTargets(index));
        }
        release_all(groups, release);
        for index in applied.sides {
            let side = self.sides.remove(index);
            let (dir, drop) = (side.dir, side.drop);
            match side.targets.namespace_vnid {
                Some(vnid) if side.present => {
                    self.drop_flow(dir, drop, matches::target_namespace(dir, vnid), false)
                }
                Some(_) => {}
                None => {
                    for m in side.targets.matches(dir, groups, world) {
                        self.drop_flow(dir, drop, m, false);
                    }
                }
            }
            self.unuse_group(side.targets.group, Use::Side(index));
        }
        for group in applied.groups {
            groups.release(group);
        }
    }

    fn drop_flow(&mut self, dir: Dir, drop: Part, m: Match, add: bool) {
        self.contribute(FlowKey::new(dir.table(), PRIO_ISOLATION, m), drop, add);
    }

    /// A side's drops follow whether it has targets (namespace-wide), or are all put in
    /// when it is applied (by address; later member by member).
    fn refresh_side(&mut self, index: usize, groups: &Groups, world: World) {
        let side = &self.sides[index];
        let (dir, drop, targets, present) = (side.dir, side.drop, side.targets, side.present);
        let now = match targets.namespace_vnid {
            Some(_) => groups.len_of(targets.group) > 0,
            None => true,
        };
        if now == present {
            return;
        }
        match targets.namespace_vnid {
            Some(vnid) => self.drop_flow(dir, drop, matches::target_namespace(dir, vnid), now),
            None => {
                for m in targets.matches(dir, groups, world) {
                    self.drop_flow(dir, drop, m, true);
                }
            }
        }
        self.sides[index].present = now;
    }

    /// A rule's groups and flows follow whether it can allow anything here: it holds its
    /// peers' groups while it has targets, and has flows while it also has peers. Returns the
    /// groups it let go, for the caller to release once no delta can name them any more.
    fn refresh_rule(&mut self, index: usize, groups: &mut Groups, world: World) -> Vec<GroupId> {
        let has_targets = self.rules[index].targets.count(groups) > 0;
        if has_targets && !self.rules[index].armed {
            self.arm(index, groups, world);
        }
        let rule = &self.rules[index];
        let now = rule.should_be_active(groups);
        if now != rule.active {
            self.rule_flows(index, now, groups, world);
            self.rules[index].active = now;
        }
        if !has_targets && self.rules[index].armed {
            return self.disarm(index);
        }
        Vec::new()
    }

    /// Acquires a rule's peer groups (it has targets now).
    fn arm(&mut self, index: usize, groups: &mut Groups, world: World) {
        let plan = self.rules[index].peer_plan.clone().unwrap_or_default();
        let peers: Vec<PeerSource> = plan
            .into_iter()
            .map(|p| match p {
                PeerPlan::Fixed(m) => PeerSource::Fixed(m),
                PeerPlan::Group(key) => PeerSource::Group(groups.acquire(key, world)),
            })
            .collect();
        for source in &peers {
            if let PeerSource::Group(g) = source {
                self.use_group(*g, Use::RulePeers(index));
            }
        }
        let rule = &mut self.rules[index];
        rule.peers = peers;
        rule.armed = true;
    }

    /// Lets go of an inactive rule's peer groups; returns them, to be released.
    fn disarm(&mut self, index: usize) -> Vec<GroupId> {
        let rule = &mut self.rules[index];
        rule.armed = false;
        let gone: Vec<GroupId> = std::mem::take(&mut rule.peers)
            .into_iter()
            .filter_map(|s| match s {
                PeerSource::Group(g) => Some(g),
                PeerSource::Fixed(_) => None,
            })
            .collect();
        for g in &gone {
            self.unuse_group(*g, Use::RulePeers(index));
        }
        gone
    }

    /// Adds or removes every flow of a rule, from the groups as they are.
    fn rule_flows(&mut self, index: usize, add: bool, groups: &Groups, world: World) {
        for (key, part) in self.rules[index].parts(groups, world) {
            self.contribute(key, part, add);
        }
    }

    /// Follows the members that joined and left groups (the store's [`Delta`]s of a change):
    /// each adds or removes its own matches' contributions; rules and sides whose emptiness
    /// changed add or remove all of theirs.
    pub fn on_deltas(&mut self, deltas: &[Delta], groups: &mut Groups, world: World) {
        let mut rules = BTreeSet::new();
        let mut sides = BTreeSet::new();
        for delta in deltas {
            let Some(uses) = self.uses.get(&delta.group).cloned() else {
                continue;
            };
            for used in uses {
                match used {
                    Use::Side(index) => {
                        sides.insert(index);
                        let side = &self.sides[index];
                        if side.targets.namespace_vnid.is_none() && side.present {
                            let (dir, drop) = (side.dir, side.drop);
                            for m in member_targets(dir, &delta.member, &[]) {
                                self.drop_flow(dir, drop, m, delta.joined);
                            }
                        }
                    }
                    Use::RuleTargets(index) => {
                        rules.insert(index);
                        let rule = &self.rules[index];
                        if rule.active && rule.targets_by_pod() {
                            let (table, dir) = (rule.dir.table(), rule.dir);
                            let (priority, part) = rule.target_part();
                            let targets = member_targets(dir, &delta.member, rule.named_on().0);
                            for m in targets {
                                self.contribute(
                                    FlowKey::new(table, priority, m),
                                    part,
                                    delta.joined,
                                );
                            }
                        }
                    }
                    Use::RulePeers(index) => {
                        rules.insert(index);
                        let rule = &self.rules[index];
                        if rule.active {
                            let (dir, priority, part) = (rule.dir, rule.priority, rule.peer_part());
                            for m in member_peers(dir, &delta.member, rule.named_on().1) {
                                self.contribute(
                                    FlowKey::new(dir.table(), priority, m),
                                    part,
                                    delta.joined,
                                );
                            }
                        }
                    }
                }
            }
        }
        for index in sides {
            self.refresh_side(index, groups, world);
        }
        // Released only now: a group's id may be given to a new group, which no delta names.
        let mut release = Vec::new();
        for index in rules {
            release.extend(self.refresh_rule(index, groups, world));
        }
        release_all(groups, release);
    }

    /// The local pods the policy stored under `key` selects, and the flows it alone has
    /// (what `netpol list` shows).
    pub fn summary(&self, key: &str, groups: &Groups, world: World) -> (usize, usize) {
        let Some(applied) = self.policies.get(key) else {
            return (0, 0);
        };
        let selected = applied
            .sides
            .first()
            .map_or(0, |s| groups.len_of(self.sides[*s].targets.group));
        let mut flows = HashSet::new();
        for &s in &applied.sides {
            let side = &self.sides[s];
            for m in side.targets.matches(side.dir, groups, world) {
                flows.insert(FlowKey::new(side.dir.table(), PRIO_ISOLATION, m));
            }
        }
        for &r in &applied.rules {
            let rule = &self.rules[r];
            if rule.active {
                flows.extend(rule.parts(groups, world).into_iter().map(|(key, _)| key));
            }
        }
        (selected, flows.len())
    }
}

fn release_all(groups: &mut Groups, release: Vec<GroupId>) {
    for group in release {
        groups.release(group);
    }
}

/// Refuses a policy with a conjunction id past the last priority band.
fn check_ids(stored: &StoredNetPol) -> Result<(), FieldError> {
    let max = max_conjunction_id();
    if stored
        .ingress_ids
        .iter()
        .chain(&stored.egress_ids)
        .any(|id| *id > max)
    {
        return Err(FieldError::new(
            "spec",
            format!("the node holds at most {max} NetworkPolicy rules; delete some first"),
        ));
    }
    Ok(())
}
