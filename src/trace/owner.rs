//! Which object of the node a matched flow belongs to, and the names of the bridge's ports.
//!
//! The trace engine asks through [`Attribution`], which the node implements from its desired
//! state (it knows which pod, service, host subnet or policy wants each flow). [`OwnerIndex`]
//! is a ready implementation: flows (typed, or in the seed's text) with their owner, keyed the
//! way OpenFlow identifies a flow (table, priority, match) and compared in ovs-ofctl's
//! canonical text, so a flow written as `table=20, priority=100, in_port=3, ip, nw_src=…` is
//! found from the trace's `ip,in_port=3,nw_src=…, priority 100`.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use ofnode_proto::{text, Field, FlowMod, FlowModCommand, OFP_DEFAULT_PRIORITY};
use serde::{Deserialize, Serialize};

use super::parse::{Matched, Step};
use crate::sdn::audit::{AuditTier, Dir, RuleRef, Verdict};
use crate::sdn::core::audit_names::{RuleNamer, RuleNames};
use crate::sdn::core::{all_entities, entity_flows};
use crate::sdn::layout::{TUN_OFPORT, TUN_PORT, VXLAN_OFPORT, VXLAN_PORT};
use crate::sdn::policy;
use crate::sdn::state::{Entity, NodeState};
use crate::sdn::Error;

/// The object a flow exists for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Owner {
    /// Setup: the base tables every node has.
    Base,
    /// A pod, by its sandbox (container) id.
    Pod {
        /// `namespace/name`.
        pod: String,
        sandbox: String,
        ip: Ipv4Addr,
        vnid: u32,
    },
    Service {
        ip: Ipv4Addr,
        vnid: u32,
    },
    /// Another node's subnet, reached through the tunnel to its host.
    HostSubnet {
        host_ip: Ipv4Addr,
        subnet: String,
    },
    /// A tenant's egress network policy (table 100).
    EgressPolicy {
        vnid: u32,
    },
    /// The network policy of a tenant (multitenant mode's per-VNID delivery rule).
    NetworkPolicy {
        vnid: u32,
    },
    /// Local multicast of a tenant.
    Multicast {
        vnid: u32,
    },
    /// Multicast to the other nodes.
    VxlanMulticast,
    /// A policy rule's verdict flow (any tier: AdminNetworkPolicy, NetworkPolicy and its
    /// isolation, the baseline), i.e. the rule that decided, named as the audit names it.
    PolicyRule(RuleNames),
    /// The admin tiers' jumps and defaults.
    AdminTier {
        what: String,
    },
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Base => write!(f, "base"),
            Owner::Pod {
                pod,
                sandbox,
                ip,
                vnid,
            } => {
                let short = sandbox.get(..12).unwrap_or(sandbox);
                write!(f, "pod {pod} {ip} (sandbox {short}…, VNID {vnid})")
            }
            Owner::Service { ip, vnid } => write!(f, "service {ip} (VNID {vnid})"),
            Owner::HostSubnet { host_ip, subnet } => write!(f, "host subnet {subnet} on {host_ip}"),
            Owner::EgressPolicy { vnid } => write!(f, "egress policy of VNID {vnid}"),
            Owner::NetworkPolicy { vnid } => write!(f, "network policy of VNID {vnid}"),
            Owner::Multicast { vnid } => write!(f, "multicast of VNID {vnid}"),
            Owner::VxlanMulticast => write!(f, "multicast to other nodes"),
            Owner::PolicyRule(names) => write!(f, "{names}"),
            Owner::AdminTier { what } => write!(f, "admin tiers: {what}"),
        }
    }
}

/// A flow's identity on the switch: table, priority and match in canonical ovs-ofctl text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub table: u8,
    pub priority: u16,
    pub match_: String,
}

impl FlowKey {
    /// The key of the flow a step matched; None when no flow matched.
    pub fn of_step(step: &Step) -> Option<FlowKey> {
        let Matched::Flow {
            priority, match_, ..
        } = &step.matched
        else {
            return None;
        };
        Some(FlowKey {
            table: step.table,
            priority: *priority,
            match_: canonical_match(match_),
        })
    }

    /// The key of a flow in `ovs-ofctl add-flow` syntax.
    pub fn of_flow_text(flow: &str) -> Result<FlowKey, text::ParseError> {
        Ok(FlowKey::of_flow_mod(&text::parse_flow(
            flow,
            FlowModCommand::Add,
        )?))
    }

    /// The key of a flow.
    pub fn of_flow_mod(fm: &FlowMod) -> FlowKey {
        FlowKey {
            table: fm.table_id,
            priority: fm.priority,
            match_: text::format_match(&fm.match_, OFP_DEFAULT_PRIORITY),
        }
    }
}

/// The match as the proto crate prints it, which is how ovs-ofctl prints it; the text as OVS
/// gave it when it holds a field the proto crate does not know (`ct_state`, …).
fn canonical_match(match_: &str) -> String {
    text::parse_match(match_)
        .map(|m| text::format_match(&m, OFP_DEFAULT_PRIORITY))
        .unwrap_or_else(|_| match_.to_string())
}

/// What the trace engine asks the node.
pub trait Attribution {
    /// The objects that want this flow on the switch; empty for a flow the node did not put
    /// there.
    fn owners(&self, flow: &FlowKey) -> Vec<Owner>;

    /// The name of a port of the bridge, when known.
    fn port_name(&self, _ofport: u32) -> Option<String> {
        None
    }
}

/// Nothing is known: a trace without attribution.
impl Attribution for () {
    fn owners(&self, _flow: &FlowKey) -> Vec<Owner> {
        Vec::new()
    }
}

/// Owners and port names, looked up by key.
#[derive(Debug, Clone, Default)]
pub struct OwnerIndex {
    owners: HashMap<FlowKey, Vec<Owner>>,
    ports: HashMap<u32, String>,
}

impl OwnerIndex {
    pub fn new() -> OwnerIndex {
        OwnerIndex::default()
    }

    /// Records `owner` for each flow (seed text); a flow may have several owners.
    pub fn add_flows<'a>(
        &mut self,
        owner: &Owner,
        flows: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), text::ParseError> {
        for flow in flows {
            self.add_owner(FlowKey::of_flow_text(flow)?, owner);
        }
        Ok(())
    }

    /// Records `owner` for the flow with this key.
    fn add_owner(&mut self, key: FlowKey, owner: &Owner) {
        let owners = self.owners.entry(key).or_default();
        if !owners.contains(owner) {
            owners.push(owner.clone());
        }
    }

    pub fn name_port(&mut self, ofport: u32, name: impl Into<String>) {
        self.ports.insert(ofport, name.into());
    }

    /// The owners of every flow the node's desired state wants, and the names of its ports
    /// (the seed's vxlan0 and tun0, each pod's veth).
    pub fn from_state(state: &NodeState) -> Result<OwnerIndex, Error> {
        let mut index = OwnerIndex::new();
        let Some(setup) = &state.setup else {
            return Ok(index);
        };
        index.name_port(u32::from(VXLAN_OFPORT), VXLAN_PORT);
        index.name_port(u32::from(TUN_OFPORT), TUN_PORT);
        for entity in all_entities(state) {
            let flows = entity_flows(state, &entity);
            // The per-VNID rule pods and services bring along is their tenant's policy.
            let (owner, vnid) = match entity {
                // The NetworkPolicy mode's merged flows belong to no one policy: the mode's (base).
                Entity::Base | Entity::Ovsdb | Entity::Everything | Entity::NetPol => {
                    (Owner::Base, None)
                }
                Entity::Pod(key) => match state.pods.get(&key) {
                    Some(pod) => {
                        if let Some(veth) = &pod.veth {
                            index.name_port(u32::from(pod.ofport), veth.as_str());
                        }
                        let owner = Owner::Pod {
                            pod: key.to_string(),
                            sandbox: pod.sandbox.to_string(),
                            ip: pod.ip,
                            vnid: pod.vnid.get(),
                        };
                        (owner, Some(pod.vnid))
                    }
                    None => continue,
                },
                Entity::Service(ip) => match state.services.get(&ip) {
                    Some(svc) => {
                        let owner = Owner::Service {
                            ip,
                            vnid: svc.vnid.get(),
                        };
                        (owner, Some(svc.vnid))
                    }
                    None => continue,
                },
                Entity::HostSubnet(subnet) => match state.host_subnets.get(&subnet) {
                    Some(hs) => (
                        Owner::HostSubnet {
                            host_ip: hs.host_ip,
                            subnet: subnet.to_string(),
                        },
                        None,
                    ),
                    None => continue,
                },
                Entity::Multicast(vnid) => (Owner::Multicast { vnid: vnid.get() }, None),
                Entity::VxlanMulticast => (Owner::VxlanMulticast, None),
                Entity::Egress(vnid) => (Owner::EgressPolicy { vnid: vnid.get() }, None),
            };
            // The policy plugin's per-VNID flows belong to the tenant's policy, not the pod or
            // service that made them live.
            let policy_flows: Vec<(FlowMod, Owner)> = vnid
                .map(|vnid| {
                    let owner = Owner::NetworkPolicy { vnid: vnid.get() };
                    policy::of(setup.mode)
                        .vnid_flows(vnid)
                        .into_iter()
                        .map(|flow| (flow, owner.clone()))
                        .collect()
                })
                .unwrap_or_default();
            for flow in &flows {
                let flow_owner = policy_flows
                    .iter()
                    .find(|(policy_flow, _)| policy_flow == flow)
                    .map_or(&owner, |(_, policy_owner)| policy_owner);
                index.add_owner(FlowKey::of_flow_mod(flow), flow_owner);
            }
        }
        index.add_admin_tiers(state);
        Ok(index)
    }

    /// The admin tiers' flows: each rule's verdict flow (found by its match, so that it is
    /// named whatever its cookie), and the jumps and defaults.
    fn add_admin_tiers(&mut self, state: &NodeState) {
        use crate::sdn::policy::admin::{Action, Tier};
        use crate::sdn::produce::admin::{tier_flow_meaning, tier_flows, verdict_flows};
        let namer = RuleNamer::of_state(state);
        for policy in state.admin_policies.values() {
            for (fm, dir, index) in verdict_flows(policy) {
                let rules = match dir {
                    Dir::Ingress => &policy.ingress,
                    Dir::Egress => &policy.egress,
                };
                let (Some(rule), Some(id)) = (rules.get(index), fm.match_.exact(Field::ConjId))
                else {
                    continue;
                };
                let rule = RuleRef {
                    tier: match policy.tier {
                        Tier::Admin { .. } => AuditTier::Admin,
                        Tier::Baseline => AuditTier::Baseline,
                    },
                    dir,
                    verdict: match rule.action {
                        Action::Allow => Verdict::Allow,
                        Action::Deny => Verdict::Deny,
                        Action::Pass => Verdict::Pass,
                    },
                    id: u32::try_from(id).unwrap_or(u32::MAX),
                };
                if let Some(names) = namer.rule(rule) {
                    self.add_owner(FlowKey::of_flow_mod(&fm), &Owner::PolicyRule(names));
                }
            }
        }
        let admin = state
            .admin_policies
            .values()
            .any(|p| matches!(p.tier, Tier::Admin { .. }));
        let baseline = state
            .admin_policies
            .values()
            .any(|p| p.tier == Tier::Baseline);
        for fm in tier_flows(admin, baseline) {
            let what = tier_flow_meaning(fm.table_id, fm.priority).to_string();
            self.add_owner(FlowKey::of_flow_mod(&fm), &Owner::AdminTier { what });
        }
    }
}

impl Attribution for OwnerIndex {
    fn owners(&self, flow: &FlowKey) -> Vec<Owner> {
        self.owners.get(flow).cloned().unwrap_or_default()
    }

    fn port_name(&self, ofport: u32) -> Option<String> {
        self.ports.get(&ofport).cloned()
    }
}
