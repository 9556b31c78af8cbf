//! The node controller: every operation of the seed's ovsController (../shared/seeds/
//! ovscontroller.go.txt), each one atomic, over native OpenFlow, OVSDB and rtnetlink.
//!
//! - [`types`]: validated inputs; [`layout`]: tables, ports and registers named once;
//!   [`flowmod`]: typed flows in the seed's words; [`flows`]: the seed's flows; [`policy`]:
//!   the policy modes (the seed's osdnPolicy); [`egress`]: the egress policy branches;
//!   [`readback`]: flows read back into values; [`counters`]: per-pod traffic counters from
//!   the pods' flows.
//! - [`state`] and [`journal`]: the desired state and its journal on disk; [`table`]: the
//!   desired flow table and its diffs.
//! - [`core`]: the pure node core (operations on the state and table, and their effects).
//! - `request`: what the node asks of the writer; `writer`: the shell that owns the core and
//!   carries its effects out (`port_steps`: their OVSDB half, pods' ports); [`drift`], [`ha`]:
//!   drift repair and high availability.
//! - [`Node`] (`node/`): the operations' async front; [`dns`]: egress DNS names; [`host`]:
//!   tun0, routes, forwarding; [`report`]: what the node reports; `ovs_bugs`: Open vSwitch
//!   bugs the operator is told about; `megaflows`: the purge of the datapath's cached flows
//!   on a switch with the stale-megaflow bug.

pub mod audit;
pub mod audit_log;
mod bridge;
mod config;
pub mod core;
pub mod counters;
pub mod dns;
pub mod drift;
pub mod egress;
mod error;
pub mod flowmod;
pub mod flows;
pub mod ha;
pub mod host;
pub mod journal;
pub mod labels;
pub mod layout;
mod megaflows;
mod metrics;
mod node;
pub mod objects;
mod ovs_bugs;
pub mod policy;
mod port_steps;
pub mod produce;
mod prometheus;
pub mod readback;
mod replica;
pub mod report;
mod request;
pub mod restore;
pub mod rule_counters;
#[cfg(test)]
pub(crate) mod seed_text;
pub mod state;
pub mod store;
pub mod table;
pub mod types;
mod writer;

pub use self::core::{AdminSummary, CoreError, LabelEdit, NetPolSummary, SetupOutcome};
pub use crate::value::{Cidr, IfName, InvalidInput, MacAddr, PodKey, SandboxId, Vnid};
pub use config::{detect_datapath_type, AuditRate, NodeConfig};
pub use dns::DnsConfig;
pub use drift::DriftTiming;
pub use error::Error;
pub use ha::{HaConfig, HaRole, HaStatus};
pub use labels::{FieldError, Labels};
pub use metrics::{Histogram, Metrics};
pub use node::Node;
pub use objects::{KnownPod, NamedPort, Namespace, NodeInfo, PodInfo, L4};
pub use ovs_bugs::StaleMegaflows;
pub(crate) use prometheus::{counter, gauge};
pub use report::PodStatus;
pub use report::{Detection, DriftReport, DriftStatus, StaleMegaflowStatus, Status};
pub use state::{EgressState, LocalMulticast, NodeState};
pub use types::{
    EgressNetworkPolicy, EgressPeer, EgressRule, EgressRuleType, HostSubnet, Mode, Pod, PodAdd,
    Protocol, Service, ServicePort, SetupRequest,
};
