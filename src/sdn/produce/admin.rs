//! The cluster admin tiers' flows (AdminNetworkPolicy, BaselineAdminNetworkPolicy), in tables
//! of their own joined to NetworkPolicy's by jumps, so that an admin change never touches a
//! NetworkPolicy flow:
//!
//! ```text
//! egress:  21 ─(reply/related/service: pass)─ jump ─▶ 22 ANP ── Allow ─▶ 30 routing
//!           ▲                                          │ Deny: drop
//!           └───────────── Pass / no match ◀───────────┘ (reg3 bit 0 set, resubmit 21)
//!          21 NetworkPolicy (unchanged) ── no NetworkPolicy isolates the pod ─▶ 23 BANP
//! ingress: 80 ─(reply/related/node: pass)─ jump ─▶ 82 ANP ── Allow ─▶ 81 commit
//!           ▲                                          │ Deny: drop
//!           └───────────── Pass / no match ◀───────────┘ (reg3 bit 1 set, resubmit 80)
//!          80 NetworkPolicy (unchanged) ── no NetworkPolicy isolates the pod ─▶ 83 BANP
//! ```
//!
//! Replies and related packets skip every tier (tables 21 and 80 pass them before the jump),
//! so a reply is never judged against the other direction's rules.
//!
//! Each rule is a `conjunction` of its subject (local pods), its peers and, when it has them,
//! its ports, at an OpenFlow priority fixed by the policy's priority and the rule's index
//! ([`rule_priority`]): an ANP's flows depend on nothing but itself and its groups' members, so
//! changing its priority rewrites its flows alone. The groups are the store's, shared with
//! NetworkPolicy; a member that joins or leaves one recomputes the policies using it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use ofnode_proto::{
    Action as OfAction, Conjunction, Field, FlowMod, FlowModCommand, Instruction, Match,
};

use super::audit;
use super::netpol::matches::{self, Dir};
use super::netpol::{FlowChange, FlowKey};
use crate::sdn::audit::{AuditTier, RuleRef, Verdict};
use crate::sdn::flowmod::{table, Actions};
use crate::sdn::labels::Selector;
use crate::sdn::layout::{
    ADMIN_EGRESS, ADMIN_EGRESS_DONE, ADMIN_INGRESS, ADMIN_INGRESS_DONE, BASELINE_EGRESS,
    BASELINE_INGRESS, POLICY, POLICY_COMMIT, POLICY_CONNTRACK, ROUTING,
};
use crate::sdn::objects::{NodeInfo, L4};
use crate::sdn::policy::admin::{
    Action, AdminPeer, AdminPolicy, AdminRule, Subject, Tier, MAX_PRIORITY, MAX_RULES,
};
use crate::sdn::policy::networkpolicy::model::Port;
use crate::sdn::store::{Delta, GroupId, GroupKey, Groups, Member, Scope, World};
use crate::value::{Cidr, Vnid};

/// OpenFlow priority of ANP priority 0's first rule; each ANP priority has [`MAX_RULES`]
/// below it (ANP priority 1000's last rule: 65000 − 64063 = 937).
const ADMIN_TOP: u16 = 65_000;
/// OpenFlow priority of the baseline's first rule.
const BASELINE_TOP: u16 = 1_000;
/// Table 21: the jump to the ANP tier, below replies (400), related (390) and services (300),
/// above NetworkPolicy's allows (210).
const PRIO_ADMIN_JUMP_EGRESS: u16 = 250;
/// Table 80: the jump, below the node's own traffic (310).
const PRIO_ADMIN_JUMP_INGRESS: u16 = 305;
/// Table 21: below NetworkPolicy's isolation (100), above the seed's last resort (0).
const PRIO_BASELINE_JUMP_EGRESS: u16 = 1;
/// Table 80: below isolation (100), above the non-isolated pods' pass (50).
const PRIO_BASELINE_JUMP_INGRESS: u16 = 60;

/// The OpenFlow priority of rule `index` of a policy in `tier`.
pub fn rule_priority(tier: Tier, index: usize) -> u16 {
    let index = index.min(MAX_RULES - 1) as u16;
    match tier {
        Tier::Admin { priority } => ADMIN_TOP - (priority * MAX_RULES as u16 + index),
        Tier::Baseline => BASELINE_TOP - index,
    }
}

/// The conjunction id of part `part` (0: numbered, 1: named) of rule `index`: fixed by the
/// policy itself (conjunction ids are per table; the tiers' tables are their own).
fn conjunction_id(tier: Tier, index: usize, part: u32) -> u32 {
    let base = match tier {
        Tier::Admin { priority } => u32::from(priority) * 2 * MAX_RULES as u32,
        Tier::Baseline => 0,
    };
    base + 2 * index as u32 + part + 1
}

/// The tier (with its priority) and rule index whose conjunction id is `id` in the admin tier
/// (`baseline` false) or the baseline: [`conjunction_id`] read back (None: no rule's id).
pub fn rule_of_conjunction_id(baseline: bool, id: u32) -> Option<(Tier, usize)> {
    let slot = id.checked_sub(1)?;
    let per_priority = 2 * MAX_RULES as u32;
    let (tier, within) = if baseline {
        (Tier::Baseline, slot)
    } else {
        let priority = u16::try_from(slot / per_priority)
            .ok()
            .filter(|p| *p <= MAX_PRIORITY)?;
        (Tier::Admin { priority }, slot % per_priority)
    };
    let index = (within / 2) as usize;
    (index < MAX_RULES).then_some((tier, index))
}

fn tables(tier: Tier, dir: Dir) -> u8 {
    match (tier, dir) {
        (Tier::Admin { .. }, Dir::Egress) => ADMIN_EGRESS,
        (Tier::Admin { .. }, Dir::Ingress) => ADMIN_INGRESS,
        (Tier::Baseline, Dir::Egress) => BASELINE_EGRESS,
        (Tier::Baseline, Dir::Ingress) => BASELINE_INGRESS,
    }
}

/// What a satisfied rule does: Allow leaves the policy stages (egress to routing, ingress to
/// the commit), Deny drops, Pass goes back to NetworkPolicy with its direction marked judged.
fn verdict(action: Action, dir: Dir, at: u8, priority: u16, m: Match) -> FlowMod {
    let flow = table(at).priority(priority);
    let mut fm = match (action, dir) {
        (Action::Allow, Dir::Egress) => flow.goto(ROUTING),
        (Action::Allow, Dir::Ingress) => flow.resubmit(POLICY_COMMIT).build(),
        (Action::Deny, _) => flow.drop(),
        (Action::Pass, Dir::Egress) => flow
            .load_bits(ADMIN_EGRESS_DONE, 1u32)
            .resubmit(POLICY_CONNTRACK)
            .build(),
        (Action::Pass, Dir::Ingress) => flow
            .load_bits(ADMIN_INGRESS_DONE, 1u32)
            .resubmit(POLICY)
            .build(),
    };
    fm.match_ = m;
    fm
}

/// The flows joining the tiers to NetworkPolicy's tables: present while any ANP (`admin`),
/// or the baseline (`baseline`), exists.
pub fn tier_flows(admin: bool, baseline: bool) -> Vec<FlowMod> {
    let ip = || Match::new().with(Field::EthType, 0x0800);
    let not_done = |bit: u64| ip().with_masked(Field::Reg(3), 0, bit);
    let mut flows = Vec::new();
    if admin {
        let mut jump_egress = table(POLICY_CONNTRACK)
            .priority(PRIO_ADMIN_JUMP_EGRESS)
            .goto(ADMIN_EGRESS);
        jump_egress.match_ = not_done(1);
        let mut jump_ingress = table(POLICY)
            .priority(PRIO_ADMIN_JUMP_INGRESS)
            .goto(ADMIN_INGRESS);
        jump_ingress.match_ = not_done(2);
        flows.extend([
            jump_egress,
            jump_ingress,
            verdict(Action::Pass, Dir::Egress, ADMIN_EGRESS, 0, ip()),
            verdict(Action::Pass, Dir::Ingress, ADMIN_INGRESS, 0, ip()),
        ]);
    }
    if baseline {
        let mut jump_egress = table(POLICY_CONNTRACK)
            .priority(PRIO_BASELINE_JUMP_EGRESS)
            .goto(BASELINE_EGRESS);
        jump_egress.match_ = ip();
        let mut jump_ingress = table(POLICY)
            .priority(PRIO_BASELINE_JUMP_INGRESS)
            .goto(BASELINE_INGRESS);
        jump_ingress.match_ = ip();
        flows.extend([
            jump_egress,
            jump_ingress,
            verdict(Action::Allow, Dir::Egress, BASELINE_EGRESS, 0, ip()),
            verdict(Action::Allow, Dir::Ingress, BASELINE_INGRESS, 0, ip()),
        ]);
    }
    flows
}

/// The flow each rule's satisfied conjunction runs (its verdict), with the rule's direction
/// and index: what `trace` names when a packet meets it.
pub fn verdict_flows(policy: &AdminPolicy) -> Vec<(FlowMod, Dir, usize)> {
    Plan::of(policy)
        .parts
        .iter()
        .map(|part| (part.verdict_flow(), part.dir, part.index))
        .collect()
}

/// What a flow of [`tier_flows`] does, in words.
pub fn tier_flow_meaning(table: u8, priority: u16) -> &'static str {
    match (table, priority) {
        (POLICY_CONNTRACK, PRIO_ADMIN_JUMP_EGRESS) => "egress: to the AdminNetworkPolicies first",
        (POLICY, PRIO_ADMIN_JUMP_INGRESS) => "ingress: to the AdminNetworkPolicies first",
        (ADMIN_EGRESS, 0) => "no AdminNetworkPolicy rule matched egress: on to NetworkPolicy",
        (ADMIN_INGRESS, 0) => "no AdminNetworkPolicy rule matched ingress: on to NetworkPolicy",
        (POLICY_CONNTRACK, PRIO_BASELINE_JUMP_EGRESS) => {
            "egress: no NetworkPolicy isolates the pod: to the baseline"
        }
        (POLICY, PRIO_BASELINE_JUMP_INGRESS) => {
            "ingress: no NetworkPolicy isolates the pod: to the baseline"
        }
        (BASELINE_EGRESS, 0) => "no baseline rule matched egress: allowed",
        (BASELINE_INGRESS, 0) => "no baseline rule matched ingress: allowed",
        _ => "admin tiers",
    }
}

/// A flow's OpenFlow identity.
fn key_of(fm: &FlowMod) -> FlowKey {
    FlowKey {
        table: fm.table_id,
        priority: fm.priority,
        match_: fm.match_.clone(),
    }
}

/// Where a rule's peers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PeerPlan {
    Group(GroupKey),
    Fixed(Vec<Match>),
    /// The addresses of the nodes whose labels the selector selects.
    Nodes(Selector),
}

/// One conjunction of a rule: its numbered part (ports a dimension of their own, or none), or
/// its named part (ports resolved on the pods a packet goes to).
#[derive(Debug, Clone)]
struct PartPlan {
    dir: Dir,
    /// The rule's index in its direction.
    index: usize,
    table: u8,
    priority: u16,
    id: u32,
    action: Action,
    /// The rule its verdict flow names (both parts alike), and whether its verdict is audited.
    rule: RuleRef,
    audited: bool,
    peers: Vec<PeerPlan>,
    /// Numbered part: the port matches (empty: no port dimension).
    ports: Vec<Match>,
    /// Named part: the names.
    named: Vec<String>,
}

impl PartPlan {
    /// The flow its satisfied conjunction runs, named by its rule (audited or not).
    fn verdict_flow(&self) -> FlowMod {
        let fm = verdict(
            self.action,
            self.dir,
            self.table,
            self.priority,
            matches::conjunction(self.id),
        );
        audit::verdict_flow(fm, self.rule, self.audited)
    }
}

/// The rule `index` of a policy in `tier` as the audit names it: its first part's id.
fn rule_ref(tier: Tier, dir: Dir, index: usize, action: Action) -> RuleRef {
    RuleRef {
        tier: match tier {
            Tier::Admin { .. } => AuditTier::Admin,
            Tier::Baseline => AuditTier::Baseline,
        },
        dir,
        verdict: match action {
            Action::Allow => Verdict::Allow,
            Action::Deny => Verdict::Deny,
            Action::Pass => Verdict::Pass,
        },
        id: conjunction_id(tier, index, 0),
    }
}

/// What a policy selects, as group keys and fixed matches.
#[derive(Debug, Clone)]
struct Plan {
    subject: GroupKey,
    /// The subject is whole namespaces: matched by their VNID (`reg1` ingress, `reg0`
    /// egress), one flow per namespace with pods here, except where ports are named on it.
    by_namespace: bool,
    parts: Vec<PartPlan>,
}

fn subject_key(subject: &Subject) -> GroupKey {
    match subject {
        Subject::Namespaces(ns) => GroupKey::pods(Scope::Selected(ns.clone()), None, true),
        Subject::Pods { namespaces, pods } => {
            GroupKey::pods(Scope::Selected(namespaces.clone()), Some(pods), true)
        }
    }
}

fn peer_plan(dir: Dir, peer: &AdminPeer, named: bool) -> PeerPlan {
    match peer {
        // Ingress: whole namespaces by their VNID (reg0: what the source carries, from the
        // pod's flow or the tunnel id). Egress needs the addresses.
        AdminPeer::Namespaces(ns) if dir == Dir::Ingress => {
            PeerPlan::Group(GroupKey::namespaces(ns))
        }
        AdminPeer::Namespaces(ns) => {
            PeerPlan::Group(GroupKey::pods(Scope::Selected(ns.clone()), None, false))
        }
        AdminPeer::Pods { namespaces, pods } => PeerPlan::Group(GroupKey::pods(
            Scope::Selected(namespaces.clone()),
            Some(pods),
            false,
        )),
        // Networks and nodes have no named ports (refused with them; matching nothing here).
        AdminPeer::Networks { .. } | AdminPeer::Nodes(_) if named => PeerPlan::Fixed(Vec::new()),
        AdminPeer::Nodes(selector) => PeerPlan::Nodes(selector.clone()),
        AdminPeer::Networks { ipv4, .. } => PeerPlan::Fixed(
            ipv4.iter()
                .map(|cidr| matches::peer_network(dir, *cidr))
                .collect(),
        ),
    }
}

fn port_matches(numbered: &[(L4, u16, u16)]) -> Vec<Match> {
    let mut out: Vec<Match> = Vec::new();
    for &(protocol, first, last) in numbered {
        let port = Port {
            protocol,
            range: Some((first, last)),
            name: None,
        };
        for m in matches::ports(&port) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    out
}

impl Plan {
    fn of(policy: &AdminPolicy) -> Plan {
        let mut parts = Vec::new();
        let sides = [
            (Dir::Ingress, &policy.ingress),
            (Dir::Egress, &policy.egress),
        ];
        for (dir, rules) in sides {
            for (index, rule) in rules.iter().enumerate() {
                parts.extend(Self::rule_parts(policy, dir, index, rule));
            }
        }
        Plan {
            subject: subject_key(&policy.subject),
            by_namespace: matches!(policy.subject, Subject::Namespaces(_)),
            parts,
        }
    }

    fn rule_parts(policy: &AdminPolicy, dir: Dir, index: usize, rule: &AdminRule) -> Vec<PartPlan> {
        let tier = policy.tier;
        let named_rule = rule_ref(tier, dir, index, rule.action);
        let part = |id_part: u32, named: Vec<String>, ports: Vec<Match>| PartPlan {
            dir,
            index,
            table: tables(tier, dir),
            priority: rule_priority(tier, index),
            id: conjunction_id(tier, index, id_part),
            action: rule.action,
            rule: named_rule,
            audited: policy.audit.audits(named_rule.verdict),
            peers: rule
                .peers
                .iter()
                .map(|p| peer_plan(dir, p, !named.is_empty()))
                .collect(),
            ports,
            named,
        };
        let mut parts = Vec::new();
        if rule.has_numbered_part() {
            parts.push(part(0, Vec::new(), port_matches(&rule.numbered_ports())));
        }
        let named = rule.named_ports();
        if !named.is_empty() {
            parts.push(part(1, named, Vec::new()));
        }
        parts
    }

    /// Every group key it reads, once each.
    fn keys(&self) -> HashSet<GroupKey> {
        let mut keys = HashSet::from([self.subject.clone()]);
        for part in &self.parts {
            for peer in &part.peers {
                if let PeerPlan::Group(key) = peer {
                    keys.insert(key.clone());
                }
            }
        }
        keys
    }

    /// Whether a node peer is among its peers (it follows the nodes).
    fn reads_nodes(&self) -> bool {
        self.parts.iter().any(|p| {
            p.peers
                .iter()
                .any(|peer| matches!(peer, PeerPlan::Nodes(_)))
        })
    }

    /// Its flows, with the members `members` gives each group and the cluster's `nodes`.
    fn flows(
        &self,
        members: impl Fn(&GroupKey) -> Vec<Member>,
        nodes: &BTreeMap<String, NodeInfo>,
    ) -> HashMap<FlowKey, FlowMod> {
        let subject = members(&self.subject);
        let mut clauses: HashMap<FlowKey, BTreeSet<(u32, u8, u8)>> = HashMap::new();
        let mut flows: HashMap<FlowKey, FlowMod> = HashMap::new();
        for part in &self.parts {
            let (on_subject, on_peers): (&[String], &[String]) = match part.dir {
                Dir::Ingress => (&part.named, &[]),
                Dir::Egress => (&[], &part.named),
            };
            let subjects: Vec<Match> = if self.by_namespace && on_subject.is_empty() {
                let vnids: BTreeSet<Vnid> = subject
                    .iter()
                    .filter_map(|m| match m {
                        Member::Pod { vnid, .. } => Some(*vnid),
                        Member::Namespace { .. } => None,
                    })
                    .collect();
                vnids
                    .into_iter()
                    .map(|vnid| matches::target_namespace(part.dir, vnid))
                    .collect()
            } else {
                subject
                    .iter()
                    .flat_map(|m| pod_matches(m, on_subject, |ip, _| matches::target(part.dir, ip)))
                    .collect()
            };
            let peers: Vec<Match> = part
                .peers
                .iter()
                .flat_map(|p| match p {
                    PeerPlan::Fixed(m) => m.clone(),
                    PeerPlan::Nodes(selector) => nodes
                        .values()
                        .filter(|node| selector.matches(&node.labels))
                        .flat_map(|node| &node.ips)
                        .map(|ip| matches::peer_network(part.dir, Cidr::host(*ip)))
                        .collect(),
                    PeerPlan::Group(key) => members(key)
                        .iter()
                        .flat_map(|m| match m {
                            Member::Namespace { vnid, .. } => {
                                vec![matches::peer_namespace(*vnid)]
                            }
                            Member::Pod { .. } => pod_matches(m, on_peers, |ip, vnid| {
                                matches::peer_pod(part.dir, ip, vnid)
                            }),
                        })
                        .collect(),
                })
                .collect();
            if subjects.is_empty() || peers.is_empty() {
                continue;
            }
            let n = if part.ports.is_empty() { 2 } else { 3 };
            let dims = [(1u8, &subjects), (2, &peers), (3, &part.ports)];
            for (k, dim) in dims {
                for m in dim.iter() {
                    let key = FlowKey {
                        table: part.table,
                        priority: part.priority,
                        match_: m.clone(),
                    };
                    clauses.entry(key).or_default().insert((part.id, k, n));
                }
            }
            let fm = part.verdict_flow();
            flows.insert(key_of(&fm), fm);
            if part.audited {
                let fm = audit::audit_flow(part.rule);
                flows.insert(key_of(&fm), fm);
            }
        }
        for (key, conj) in clauses {
            let actions = conj
                .into_iter()
                .map(|(id, clause, n_clauses)| {
                    OfAction::Conjunction(Conjunction {
                        id,
                        clause,
                        n_clauses,
                    })
                })
                .collect();
            let fm = FlowMod {
                table_id: key.table,
                priority: key.priority,
                match_: key.match_.clone(),
                instructions: vec![Instruction::ApplyActions(actions)],
                ..FlowMod::new(FlowModCommand::Add)
            };
            flows.insert(key, fm);
        }
        flows
    }
}

/// A pod member's matches (none for a namespace), by address; with `named`, each narrowed to
/// the numbers those names have on it (none when it has none of them).
fn pod_matches(
    member: &Member,
    named: &[String],
    by_address: impl Fn(std::net::Ipv4Addr, crate::value::Vnid) -> Match,
) -> Vec<Match> {
    let Member::Pod {
        ipv4s, vnid, ports, ..
    } = member
    else {
        return Vec::new();
    };
    let base = ipv4s.iter().map(|ip| by_address(*ip, *vnid));
    if named.is_empty() {
        return base.collect();
    }
    let numbers: Vec<(L4, u16)> = ports
        .iter()
        .filter(|p| named.contains(&p.name))
        .map(|p| (p.protocol, p.port))
        .collect();
    base.flat_map(|m| {
        numbers
            .iter()
            .map(move |(protocol, port)| matches::with_port(m.clone(), *protocol, *port))
    })
    .collect()
}

#[derive(Debug)]
struct Applied {
    policy: AdminPolicy,
    plan: Plan,
    groups: HashMap<GroupKey, GroupId>,
    flows: HashMap<FlowKey, FlowMod>,
}

/// The admin tiers' flows.
#[derive(Debug, Default)]
pub struct AdminEngine {
    policies: BTreeMap<String, Applied>,
    /// Which policies read each group.
    uses: HashMap<GroupId, BTreeSet<String>>,
    /// The jumps and tier defaults in place.
    tier: HashMap<FlowKey, FlowMod>,
    /// Flows changed since the last [`AdminEngine::take_changes`]: as they were.
    touched: HashMap<FlowKey, Option<FlowMod>>,
    /// Every flow it holds, by identity (no two policies share one: their priorities differ).
    flows: HashMap<FlowKey, FlowMod>,
}

impl AdminEngine {
    pub fn new() -> AdminEngine {
        AdminEngine::default()
    }

    /// Every flow it holds.
    pub fn flow_mods(&self) -> impl Iterator<Item = &FlowMod> + '_ {
        self.flows.values()
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    fn set(&mut self, key: FlowKey, fm: Option<FlowMod>) {
        let before = match &fm {
            Some(fm) => self.flows.insert(key.clone(), fm.clone()),
            None => self.flows.remove(&key),
        };
        self.touched.entry(key).or_insert(before);
    }

    /// The flows that changed since the last call, each once, as before and after.
    pub fn take_changes(&mut self) -> Vec<FlowChange> {
        std::mem::take(&mut self.touched)
            .into_iter()
            .filter_map(|(key, before)| {
                let after = self.flows.get(&key).cloned();
                (before != after).then_some(FlowChange { before, after })
            })
            .collect()
    }

    /// Replaces a policy's flows by `new`.
    fn replace_flows(&mut self, old: &HashMap<FlowKey, FlowMod>, new: &HashMap<FlowKey, FlowMod>) {
        for key in old.keys() {
            if !new.contains_key(key) {
                self.set(key.clone(), None);
            }
        }
        for (key, fm) in new {
            if old.get(key) != Some(fm) {
                self.set(key.clone(), Some(fm.clone()));
            }
        }
    }

    /// Applies the policy stored under `key` anew (None: deleted): its old flows go, its new
    /// ones come; no other policy's flow is touched.
    pub fn apply_policy(
        &mut self,
        key: &str,
        policy: Option<&AdminPolicy>,
        groups: &mut Groups,
        world: World,
    ) {
        let old = self.policies.remove(key);
        let old_flows = old.as_ref().map(|a| a.flows.clone()).unwrap_or_default();
        let mut new_flows = HashMap::new();
        if let Some(policy) = policy {
            let plan = Plan::of(policy);
            let mut held = HashMap::new();
            for gk in plan.keys() {
                let id = groups.acquire(gk.clone(), world);
                self.uses.entry(id).or_default().insert(key.to_string());
                held.insert(gk, id);
            }
            new_flows = plan.flows(
                |gk| {
                    held.get(gk)
                        .map(|id| groups.members(*id, world))
                        .unwrap_or_default()
                },
                world.nodes,
            );
            self.policies.insert(
                key.to_string(),
                Applied {
                    policy: policy.clone(),
                    plan,
                    groups: held,
                    flows: new_flows.clone(),
                },
            );
        }
        if let Some(old) = old {
            for id in old.groups.values() {
                let still = self
                    .policies
                    .get(key)
                    .is_some_and(|a| a.groups.values().any(|g| g == id));
                if !still {
                    if let Some(users) = self.uses.get_mut(id) {
                        users.remove(key);
                        if users.is_empty() {
                            self.uses.remove(id);
                        }
                    }
                }
                groups.release(*id);
            }
        }
        self.replace_flows(&old_flows, &new_flows);
        self.refresh_tier();
    }

    /// The jumps follow whether any ANP, and the baseline, exist.
    fn refresh_tier(&mut self) {
        let admin = self
            .policies
            .values()
            .any(|a| matches!(a.policy.tier, Tier::Admin { .. }));
        let baseline = self
            .policies
            .values()
            .any(|a| a.policy.tier == Tier::Baseline);
        let new: HashMap<FlowKey, FlowMod> = tier_flows(admin, baseline)
            .into_iter()
            .map(|fm| (key_of(&fm), fm))
            .collect();
        let old = std::mem::take(&mut self.tier);
        self.replace_flows(&old, &new);
        self.tier = new;
    }

    /// Follows the members that joined and left groups: each policy reading such a group is
    /// computed again (its flows alone).
    pub fn on_deltas(&mut self, deltas: &[Delta], groups: &Groups, world: World) {
        let keys: BTreeSet<String> = deltas
            .iter()
            .filter_map(|d| self.uses.get(&d.group))
            .flatten()
            .cloned()
            .collect();
        for key in keys {
            self.recompute(&key, groups, world);
        }
    }

    /// Computes the policies with node peers again (a node came, went or changed).
    pub fn on_nodes(&mut self, groups: &Groups, world: World) {
        let keys: Vec<String> = self
            .policies
            .iter()
            .filter(|(_, a)| a.plan.reads_nodes())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.recompute(&key, groups, world);
        }
    }

    /// Computes every policy again (a namespace's VNID changed: ingress peers carry it).
    pub fn recompute_all(&mut self, groups: &Groups, world: World) {
        let keys: Vec<String> = self.policies.keys().cloned().collect();
        for key in keys {
            self.recompute(&key, groups, world);
        }
    }

    fn recompute(&mut self, key: &str, groups: &Groups, world: World) {
        let Some(applied) = self.policies.get(key) else {
            return;
        };
        let new = applied.plan.flows(
            |gk| {
                applied
                    .groups
                    .get(gk)
                    .map(|id| groups.members(*id, world))
                    .unwrap_or_default()
            },
            world.nodes,
        );
        let old = applied.flows.clone();
        self.replace_flows(&old, &new);
        if let Some(applied) = self.policies.get_mut(key) {
            applied.flows = new;
        }
    }

    /// The local pods the policy under `key` selects, and its flows.
    pub fn summary(&self, key: &str, groups: &Groups) -> (usize, usize) {
        let Some(applied) = self.policies.get(key) else {
            return (0, 0);
        };
        let selected = applied
            .groups
            .get(&applied.plan.subject)
            .map_or(0, |id| groups.len_of(*id));
        (selected, applied.flows.len())
    }
}
