//! The node controller: every operation of the seed's ovsController (../shared/seeds/
//! ovscontroller.go.txt), each one atomic, over native OpenFlow, OVSDB and rtnetlink.
//!
//! - [`types`]: validated inputs; [`flows`]: the seed's flows as text; [`egress`]: the egress
//!   policy branches; [`desired`]: which flows each part of the state wants.
//! - [`state`] and [`store`]: the desired state and its journal on disk.
//! - [`table`]: the desired flow table and its diffs; `writer`: the one task that changes them.
//! - [`Node`]: the operations; [`dns`]: egress DNS names; [`host`]: tun0, routes, forwarding.

mod config;
pub mod desired;
pub mod dns;
pub mod drift;
pub mod egress;
mod error;
pub mod flows;
pub mod ha;
pub mod host;
pub mod layout;
mod metrics;
mod node;
pub mod policy;
pub mod readback;
pub mod state;
pub mod store;
pub mod table;
pub mod types;
mod writer;

pub use crate::value::{Cidr, IfName, InvalidInput, MacAddr, SandboxId, Vnid};
pub use config::{detect_datapath_type, NodeConfig, SetupOutcome, Status};
pub use dns::DnsConfig;
pub use drift::{Detection, DriftReport, DriftStatus, DriftTiming};
pub use error::Error;
pub use ha::{HaConfig, HaRole, HaStatus};
pub use metrics::{Histogram, Metrics};
pub use node::Node;
pub use state::{EgressState, LocalMulticast, NodeState, Pod, PodStatus};
pub use types::{
    EgressNetworkPolicy, EgressPeer, EgressRule, EgressRuleType, HostSubnet, Mode, PodAdd,
    Protocol, Service, ServicePort, SetupRequest,
};
