//! The seed's own objects of `network.openshift.io/v1` as the API serves them, typed: HostSubnet
//! (a node's pod subnet), NetNamespace (a namespace's VNID), EgressNetworkPolicy (a namespace's
//! egress rules); and the cluster admin tiers of `policy.networking.k8s.io/v1alpha1`
//! (AdminNetworkPolicy, BaselineAdminNetworkPolicy), whose spec stays JSON for the admin
//! parser to judge field by field. Their CustomResourceDefinitions are `dist/kubernetes/crds/` — the truth;
//! `tests/kube_node.rs` checks that these types name the same group, version, plural, scope
//! and fields as the definitions the API server serves.
//!
//! Unknown fields are tolerated (a newer schema must not stop a node); every field ofnode
//! programs from is typed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "network.openshift.io";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "network.openshift.io/v1";

pub const ADMIN_GROUP: &str = "policy.networking.k8s.io";
pub const ADMIN_VERSION: &str = "v1alpha1";
pub const ADMIN_API_VERSION: &str = "policy.networking.k8s.io/v1alpha1";

/// Implements what kube's `Api` needs of a resource type (through k8s-openapi's traits, so
/// `kube::Resource` follows).
macro_rules! resource {
    ($ty:ident, $kind:literal, $plural:literal, $scope:ty) => {
        resource!($ty, $kind, $plural, $scope, GROUP, VERSION, API_VERSION);
    };
    ($ty:ident, $kind:literal, $plural:literal, $scope:ty, $group:ident, $version:ident, $api_version:ident) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = $api_version;
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = concat!($kind, "List");
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// The pod subnet of one node (cluster-scoped, named after its Node). The controller writes
/// it (`controller/objects.rs`), so it carries its `apiVersion` and `kind`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostSubnet {
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub host: String,
    #[serde(rename = "hostIP", default)]
    pub host_ip: String,
    #[serde(default)]
    pub subnet: String,
    #[serde(rename = "egressIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub egress_ips: Vec<String>,
    #[serde(rename = "egressCIDRs", default, skip_serializing_if = "Vec::is_empty")]
    pub egress_cidrs: Vec<String>,
}
resource!(
    HostSubnet,
    "HostSubnet",
    "hostsubnets",
    k8s_openapi::ClusterResourceScope
);

/// The VNID of one namespace (cluster-scoped, named after its Namespace); the controller
/// writes it too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetNamespace {
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub netname: String,
    /// i64 as the CRD's `format: int64`: an out-of-range value is reported, not a parse failure.
    #[serde(default)]
    pub netid: i64,
    #[serde(rename = "egressIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub egress_ips: Vec<String>,
}
resource!(
    NetNamespace,
    "NetNamespace",
    "netnamespaces",
    k8s_openapi::ClusterResourceScope
);

/// One namespace's egress rules, first match wins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EgressNetworkPolicy {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: EgressNetworkPolicySpec,
}
resource!(
    EgressNetworkPolicy,
    "EgressNetworkPolicy",
    "egressnetworkpolicies",
    k8s_openapi::NamespaceResourceScope
);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EgressNetworkPolicySpec {
    #[serde(default)]
    pub egress: Vec<EgressRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EgressRule {
    #[serde(rename = "type", default)]
    pub rule_type: String,
    #[serde(default)]
    pub to: EgressPeer,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr_selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<String>,
}

/// An AdminNetworkPolicy: its spec is read by `sdn/policy/admin/parse.rs`, which refuses
/// what ofnode cannot enforce by field name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdminNetworkPolicy {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: serde_json::Value,
}
resource!(
    AdminNetworkPolicy,
    "AdminNetworkPolicy",
    "adminnetworkpolicies",
    k8s_openapi::ClusterResourceScope,
    ADMIN_GROUP,
    ADMIN_VERSION,
    ADMIN_API_VERSION
);

/// The BaselineAdminNetworkPolicy (the one named `default`), read as the above.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineAdminNetworkPolicy {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: serde_json::Value,
}
resource!(
    BaselineAdminNetworkPolicy,
    "BaselineAdminNetworkPolicy",
    "baselineadminnetworkpolicies",
    k8s_openapi::ClusterResourceScope,
    ADMIN_GROUP,
    ADMIN_VERSION,
    ADMIN_API_VERSION
);

/// Every field name the seed's types above read, by kind, as `a.b.c` paths below the object: what
/// the test compares with the CRDs' schemas.
pub const FIELDS: &[(&str, &[&str])] = &[
    (
        "HostSubnet",
        &["host", "hostIP", "subnet", "egressIPs", "egressCIDRs"],
    ),
    ("NetNamespace", &["netname", "netid", "egressIPs"]),
    (
        "EgressNetworkPolicy",
        &[
            "spec",
            "spec.egress",
            "spec.egress.type",
            "spec.egress.to",
            "spec.egress.to.cidrSelector",
            "spec.egress.to.dnsName",
        ],
    ),
];
