//! A reference computation of the admin tiers' flows, for the tests: every policy computed
//! from the whole state by scans, as flow text (no groups, no incremental state), the oracle
//! `produce/admin.rs` is checked against.

use std::collections::{BTreeMap, BTreeSet};

use super::{Action, AdminPeer, AdminPolicy, AdminRule, Subject, Tier};
use crate::sdn::audit::{AuditTier, Dir as AuditDir, RuleRef, Verdict};
use crate::sdn::labels::Selector;
use crate::sdn::objects::{Namespace, NodeInfo, PodInfo};
use crate::sdn::policy::networkpolicy::ranges;
use crate::value::{Cidr, PodKey};

/// What the flows are computed from.
pub struct View<'a> {
    pub namespaces: &'a BTreeMap<String, Namespace>,
    pub pods: &'a BTreeMap<PodKey, PodInfo>,
    pub policies: &'a BTreeMap<String, AdminPolicy>,
    pub nodes: &'a BTreeMap<String, NodeInfo>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Ingress,
    Egress,
}

/// The tables of a tier: (egress, ingress).
fn tables(tier: Tier) -> (u8, u8) {
    match tier {
        Tier::Admin { .. } => (22, 82),
        Tier::Baseline => (23, 83),
    }
}

fn priority(tier: Tier, index: usize) -> u32 {
    match tier {
        Tier::Admin { priority } => 65_000 - (u32::from(priority) * 64 + index as u32),
        Tier::Baseline => 1_000 - index as u32,
    }
}

fn conj_id(tier: Tier, index: usize, part: usize) -> usize {
    let base = match tier {
        Tier::Admin { priority } => usize::from(priority) * 128,
        Tier::Baseline => 0,
    };
    base + 2 * index + part + 1
}

fn verdict(action: Action, dir: Dir) -> &'static str {
    match (action, dir) {
        (Action::Allow, Dir::Egress) => "goto_table:30",
        (Action::Allow, Dir::Ingress) => "resubmit(,81)",
        (Action::Deny, _) => "drop",
        (Action::Pass, Dir::Egress) => "load:0x1->NXM_NX_REG3[0],resubmit(,21)",
        (Action::Pass, Dir::Ingress) => "load:0x1->NXM_NX_REG3[1],resubmit(,80)",
    }
}

/// The rule `index` as the audit names it: its first part's id.
fn rule_ref(tier: Tier, dir: Dir, index: usize, action: Action) -> RuleRef {
    RuleRef {
        tier: match tier {
            Tier::Admin { .. } => AuditTier::Admin,
            Tier::Baseline => AuditTier::Baseline,
        },
        dir: match dir {
            Dir::Ingress => AuditDir::Ingress,
            Dir::Egress => AuditDir::Egress,
        },
        verdict: match action {
            Action::Allow => Verdict::Allow,
            Action::Deny => Verdict::Deny,
            Action::Pass => Verdict::Pass,
        },
        id: conj_id(tier, index, 0) as u32,
    }
}

/// Table 24's flow of the audited rule `key`, as text.
pub fn audit_flow_text(key: u32) -> String {
    let userdata: Vec<String> = b"ofA1"
        .iter()
        .chain(&key.to_be_bytes())
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "table=24, priority=100, ct_state=+new+trk, reg4={key:#x}, \
         actions=controller(max_len=128,userdata={},meter_id={key})",
        userdata.join(".")
    )
}

/// A flow's table, priority and match text.
type Identity = (u8, u32, String);
/// A conjunction clause: (id, k, n).
type Clause = (usize, usize, usize);

/// A pod as selectors see it.
struct PodRef<'a> {
    info: &'a PodInfo,
    ns: &'a Namespace,
}

impl View<'_> {
    fn selected(
        &self,
        namespaces: &Selector,
        pods: Option<&Selector>,
        local: bool,
    ) -> Vec<PodRef<'_>> {
        self.pods
            .iter()
            .filter(|(_, info)| info.local || !local)
            .filter_map(|(key, info)| {
                let ns = self.namespaces.get(key.namespace())?;
                let ns_ok = namespaces.matches_with(|k| ns.label(k));
                let pod_ok = pods.is_none_or(|s| s.matches(&info.labels));
                (ns_ok && pod_ok).then_some(PodRef { info, ns })
            })
            .collect()
    }

    fn subject(&self, subject: &Subject) -> Vec<PodRef<'_>> {
        match subject {
            Subject::Namespaces(ns) => self.selected(ns, None, true),
            Subject::Pods { namespaces, pods } => self.selected(namespaces, Some(pods), true),
        }
    }

    /// Every flow of the tiers, as text.
    pub fn flows(&self) -> Vec<String> {
        let mut clauses: BTreeMap<Identity, BTreeSet<Clause>> = BTreeMap::new();
        let mut out = Vec::new();
        let mut audited_keys = BTreeSet::new();
        for policy in self.policies.values() {
            let (egress_table, ingress_table) = tables(policy.tier);
            let sides = [
                (Dir::Ingress, ingress_table, &policy.ingress),
                (Dir::Egress, egress_table, &policy.egress),
            ];
            let subject = self.subject(&policy.subject);
            for (dir, table, rules) in sides {
                for (index, rule) in rules.iter().enumerate() {
                    let prio = priority(policy.tier, index);
                    for (part, named) in parts(rule) {
                        let id = conj_id(policy.tier, index, part);
                        let on_subject: &[String] = if dir == Dir::Ingress { &named } else { &[] };
                        let on_peers: &[String] = if dir == Dir::Egress { &named } else { &[] };
                        let whole = matches!(policy.subject, Subject::Namespaces(_));
                        let subjects: Vec<String> = if whole && on_subject.is_empty() {
                            let vnids: BTreeSet<u32> =
                                subject.iter().map(|p| p.ns.vnid.get()).collect();
                            vnids
                                .iter()
                                .map(|v| match dir {
                                    Dir::Ingress => format!("ip, reg1={v}"),
                                    Dir::Egress => format!("ip, reg0={v}"),
                                })
                                .collect()
                        } else {
                            subject
                                .iter()
                                .flat_map(|p| {
                                    pod_texts(p, on_subject, |ip, _| match dir {
                                        Dir::Ingress => format!("ip, nw_dst={ip}"),
                                        Dir::Egress => format!("ip, nw_src={ip}"),
                                    })
                                })
                                .collect()
                        };
                        let peers: Vec<String> = rule
                            .peers
                            .iter()
                            .flat_map(|peer| self.peer_texts(dir, peer, on_peers))
                            .collect();
                        if subjects.is_empty() || peers.is_empty() {
                            continue;
                        }
                        let ports = if named.is_empty() {
                            port_texts(rule)
                        } else {
                            Vec::new()
                        };
                        let n = if ports.is_empty() { 2 } else { 3 };
                        for (k, dim) in [(1, &subjects), (2, &peers), (3, &ports)] {
                            for m in dim {
                                clauses
                                    .entry((table, prio, m.clone()))
                                    .or_default()
                                    .insert((id, k, n));
                            }
                        }
                        let rule_ref = rule_ref(policy.tier, dir, index, rule.action);
                        let key = rule_ref.key();
                        let audited = policy.audit.audits(rule_ref.verdict);
                        let prefix = if audited {
                            audited_keys.insert(key);
                            format!("load:{key:#x}->NXM_NX_REG4[],resubmit(,24),")
                        } else {
                            String::new()
                        };
                        let actions = match verdict(rule.action, dir) {
                            "drop" if audited => prefix.trim_end_matches(',').to_string(),
                            v => format!("{prefix}{v}"),
                        };
                        out.push(format!(
                            "cookie={:#x}, table={table}, priority={prio}, conj_id={id}, ip, actions={actions}",
                            rule_ref.cookie()
                        ));
                    }
                }
            }
        }
        out.extend(audited_keys.into_iter().map(audit_flow_text));
        for ((table, prio, m), set) in clauses {
            let actions: Vec<String> = set
                .iter()
                .map(|(id, k, n)| format!("conjunction({id},{k}/{n})"))
                .collect();
            out.push(format!(
                "table={table}, priority={prio}, {m}, actions={}",
                actions.join(",")
            ));
        }
        let admin = self
            .policies
            .values()
            .any(|p| matches!(p.tier, Tier::Admin { .. }));
        let baseline = self.policies.values().any(|p| p.tier == Tier::Baseline);
        if admin {
            out.extend([
                "table=21, priority=250, ip, reg3=0/0x1, actions=goto_table:22".to_string(),
                "table=80, priority=305, ip, reg3=0/0x2, actions=goto_table:82".to_string(),
                "table=22, priority=0, ip, actions=load:0x1->NXM_NX_REG3[0],resubmit(,21)"
                    .to_string(),
                "table=82, priority=0, ip, actions=load:0x1->NXM_NX_REG3[1],resubmit(,80)"
                    .to_string(),
            ]);
        }
        if baseline {
            out.extend([
                "table=21, priority=1, ip, actions=goto_table:23".to_string(),
                "table=80, priority=60, ip, actions=goto_table:83".to_string(),
                "table=23, priority=0, ip, actions=goto_table:30".to_string(),
                "table=83, priority=0, ip, actions=resubmit(,81)".to_string(),
            ]);
        }
        out
    }

    fn peer_texts(&self, dir: Dir, peer: &AdminPeer, named: &[String]) -> Vec<String> {
        let by_pod = |p: &PodRef| {
            pod_texts(p, named, |ip, vnid| match dir {
                Dir::Ingress => format!("ip, reg0={vnid}, nw_src={ip}"),
                Dir::Egress => format!("ip, nw_dst={ip}"),
            })
        };
        match peer {
            AdminPeer::Namespaces(ns) if dir == Dir::Ingress => self
                .namespaces
                .values()
                .filter(|n| ns.matches_with(|k| n.label(k)))
                .map(|n| format!("ip, reg0={}", n.vnid.get()))
                .collect(),
            AdminPeer::Namespaces(ns) => self
                .selected(ns, None, false)
                .iter()
                .flat_map(by_pod)
                .collect(),
            AdminPeer::Pods { namespaces, pods } => self
                .selected(namespaces, Some(pods), false)
                .iter()
                .flat_map(by_pod)
                .collect(),
            AdminPeer::Networks { .. } | AdminPeer::Nodes(_) if !named.is_empty() => Vec::new(),
            AdminPeer::Nodes(selector) => self
                .nodes
                .values()
                .filter(|n| selector.matches(&n.labels))
                .flat_map(|n| n.ips.iter().map(|ip| format!("ip, nw_dst={ip}")))
                .collect(),
            AdminPeer::Networks { ipv4, .. } => ipv4.iter().map(|c| network(*c)).collect(),
        }
    }
}

/// The numbered part (part 0, when the rule has one) and the named part (1, when it names).
fn parts(rule: &AdminRule) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    if rule.has_numbered_part() {
        out.push((0, Vec::new()));
    }
    let named = rule.named_ports();
    if !named.is_empty() {
        out.push((1, named));
    }
    out
}

fn network(cidr: Cidr) -> String {
    match cidr.prefix() {
        0 => "ip".to_string(),
        32 => format!("ip, nw_dst={}", cidr.network()),
        n => format!("ip, nw_dst={}/{n}", cidr.network()),
    }
}

/// A pod's texts by address; with `named`, one per number those names have on it.
fn pod_texts(
    p: &PodRef,
    named: &[String],
    text: impl Fn(std::net::Ipv4Addr, u32) -> String,
) -> Vec<String> {
    let vnid = p.ns.vnid.get();
    let base: Vec<String> = p.info.ipv4s().map(|ip| text(ip, vnid)).collect();
    if named.is_empty() {
        return base;
    }
    base.iter()
        .flat_map(|b| {
            p.info
                .ports
                .iter()
                .filter(|port| named.contains(&port.name))
                .map(move |port| {
                    let proto = port.protocol.name();
                    let rest = b.strip_prefix("ip, ").unwrap_or(b);
                    format!("{proto}, {rest}, {proto}_dst={}", port.port)
                })
        })
        .collect()
}

fn port_texts(rule: &AdminRule) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (protocol, first, last) in rule.numbered_ports() {
        let proto = protocol.name();
        if first == last {
            out.insert(format!("{proto}, {proto}_dst={first}"));
            continue;
        }
        for (value, mask) in ranges::port_masks(first, last) {
            out.insert(match mask {
                0xffff => format!("{proto}, {proto}_dst={value}"),
                _ => format!("{proto}, {proto}_dst={value:#x}/{mask:#x}"),
            });
        }
    }
    out.into_iter().collect()
}
