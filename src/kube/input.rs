//! What the API's objects become for the store: [`Input`]s, each the state one store entry
//! should have now (None: absent), applied idempotently by `apply.rs`; and the names of the
//! API objects they come from, to whom their outcome belongs.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::convert::PolicyFacts;
use crate::sdn::labels::Labels;
use crate::sdn::objects::{NamedPort, Namespace};
use crate::sdn::policy::admin::{AdminPolicy, Tier};
use crate::sdn::state::EgressState;
use crate::sdn::types::{HostSubnet, Service};
use crate::value::{Cidr, PodKey, Vnid};

/// The kinds of API objects a node watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Namespace,
    NetNamespace,
    Pod,
    NetworkPolicy,
    Service,
    HostSubnet,
    EgressNetworkPolicy,
    AdminNetworkPolicy,
    BaselineAdminNetworkPolicy,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::HostSubnet,
        Kind::Namespace,
        Kind::NetNamespace,
        Kind::Pod,
        Kind::NetworkPolicy,
        Kind::Service,
        Kind::EgressNetworkPolicy,
        Kind::AdminNetworkPolicy,
        Kind::BaselineAdminNetworkPolicy,
    ];

    /// The kind of an admin policy of `tier`.
    pub fn of_admin(tier: Tier) -> Kind {
        match tier {
            Tier::Admin { .. } => Kind::AdminNetworkPolicy,
            Tier::Baseline => Kind::BaselineAdminNetworkPolicy,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::NetNamespace => "NetNamespace",
            Kind::Pod => "Pod",
            Kind::NetworkPolicy => "NetworkPolicy",
            Kind::Service => "Service",
            Kind::HostSubnet => "HostSubnet",
            Kind::EgressNetworkPolicy => "EgressNetworkPolicy",
            Kind::AdminNetworkPolicy => "AdminNetworkPolicy",
            Kind::BaselineAdminNetworkPolicy => "BaselineAdminNetworkPolicy",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One API object: its kind and key (`name`, or `namespace/name`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: Kind,
    pub key: String,
}

impl ObjectRef {
    pub fn new(kind: Kind, key: impl Into<String>) -> ObjectRef {
        ObjectRef {
            kind,
            key: key.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.key)
    }
}

/// What the store should know of a pod, as the API says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodWant {
    pub labels: Labels,
    pub ips: Vec<IpAddr>,
    pub ports: Vec<NamedPort>,
    /// Its namespace's VNID.
    pub vnid: Vnid,
}

/// The state one store entry should have now; None: absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A namespace with its VNID and labels (the NetworkPolicy mode keeps them).
    Namespace {
        name: String,
        want: Option<Namespace>,
        /// Why its audit annotation was refused (`want` then keeps the namespace's previous setting).
        refused: Option<String>,
    },
    /// A pod: on this node (`local`: its attachment comes from CNI, its labels and ports from
    /// here) or another (what selectors see of it).
    Pod {
        key: PodKey,
        local: bool,
        want: Option<PodWant>,
    },
    /// A NetworkPolicy (or its fail-closed stand-in), keyed `namespace/name`.
    NetPol {
        key: String,
        want: Option<PolicyFacts>,
    },
    /// Another node's subnet; `old` is what the HostSubnet said before (its routes go).
    HostSubnet {
        name: String,
        old: Option<HostSubnet>,
        want: Option<HostSubnet>,
    },
    /// A service, keyed `namespace/name`; `old_ip` is its cluster IP before, if it had one.
    Service {
        name: String,
        old_ip: Option<Ipv4Addr>,
        want: Option<Service>,
    },
    /// Every egress policy of one VNID's namespaces (`objects`: theirs, `namespace/name`).
    Egress {
        vnid: Vnid,
        objects: Vec<String>,
        want: Option<EgressState>,
    },
    /// An AdminNetworkPolicy or the BaselineAdminNetworkPolicy (cluster-scoped: `name`);
    /// None: absent, also when the object is refused.
    Admin {
        kind: Kind,
        name: String,
        want: Option<AdminPolicy>,
    },
    /// Everything the store holds from the API beyond `Expected` goes: a node that restarts
    /// with its journaled state, once the API was listed, drops what was deleted meanwhile.
    Sweep(Expected),
}

/// What the store may hold of the API's objects (all else is swept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    pub namespaces: BTreeSet<String>,
    /// Other nodes' pods (with addresses, in known namespaces).
    pub remote_pods: BTreeSet<PodKey>,
    pub netpols: BTreeSet<String>,
    pub service_ips: BTreeSet<Ipv4Addr>,
    pub subnets: BTreeSet<Cidr>,
    /// VNIDs with egress policies.
    pub egress: BTreeSet<Vnid>,
    /// Admin policies by their store key (`anp/NAME`, `banp/default`).
    pub admin: BTreeSet<String>,
}
