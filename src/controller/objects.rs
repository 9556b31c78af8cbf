//! What the controller writes of the seed's `network.openshift.io/v1` objects: HostSubnets and
//! NetNamespaces (typed once, in `kube/crd.rs`, which the nodes read them with), made with the
//! annotation that says which controller allocated them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kube::crd::API_VERSION;
pub use crate::kube::crd::{HostSubnet, NetNamespace};

/// Who allocated (or adopted) an object: the identity of the controller that was leader then.
/// The controller deletes only objects that carry it; one without it and without its Node or
/// Namespace is someone else's (openshift-sdn's F5 HostSubnets were such) and is left alone.
pub const ALLOCATED_BY: &str = "ofnode.io/allocated-by";

/// The field manager of every write (`managedFields` shows it).
pub const FIELD_MANAGER: &str = "ofnode-controller";

/// The metadata of an object the controller creates: its name and who allocated it.
fn allocated_meta(name: &str, identity: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        annotations: Some([(ALLOCATED_BY.to_string(), identity.to_string())].into()),
        ..ObjectMeta::default()
    }
}

impl HostSubnet {
    pub fn allocated(node: &str, host_ip: &str, subnet: &str, identity: &str) -> HostSubnet {
        HostSubnet {
            api_version: API_VERSION.into(),
            kind: "HostSubnet".into(),
            metadata: allocated_meta(node, identity),
            host: node.into(),
            host_ip: host_ip.into(),
            subnet: subnet.into(),
            ..HostSubnet::default()
        }
    }
}

impl NetNamespace {
    pub fn allocated(namespace: &str, netid: u32, identity: &str) -> NetNamespace {
        NetNamespace {
            api_version: API_VERSION.into(),
            kind: "NetNamespace".into(),
            metadata: allocated_meta(namespace, identity),
            netname: namespace.into(),
            netid: i64::from(netid),
            ..NetNamespace::default()
        }
    }
}

/// The controller's annotation on an object, if any.
pub fn allocated_by(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(ALLOCATED_BY)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    use kube::Resource;

    #[test]
    fn a_host_subnet_is_written_as_the_crd_has_it_and_read_back_whatever_is_missing() {
        let subnet = HostSubnet::allocated("node-1", "192.0.2.12", "10.128.2.0/23", "ctl-a");
        let json = serde_json::to_value(&subnet).unwrap();
        assert_eq!(json["apiVersion"], "network.openshift.io/v1");
        assert_eq!(json["kind"], "HostSubnet");
        assert_eq!(json["hostIP"], "192.0.2.12");
        assert_eq!(json["metadata"]["annotations"][ALLOCATED_BY], "ctl-a");
        assert!(json.get("egressIPs").is_none());
        let back: HostSubnet = serde_json::from_value(json).unwrap();
        assert_eq!(back, subnet);
        assert_eq!(allocated_by(&back.metadata), Some("ctl-a"));
        // A stranger's object with fields missing still reads (and is judged later).
        let odd: HostSubnet = serde_json::from_str(r#"{"metadata":{"name":"x"}}"#).unwrap();
        assert_eq!(odd.subnet, "");
        assert_eq!(allocated_by(&odd.metadata), None);
        assert_eq!(
            HostSubnet::url_path(&(), None),
            "/apis/network.openshift.io/v1/hostsubnets"
        );
    }

    #[test]
    fn a_net_namespace_carries_its_netid_as_a_number() {
        let netns = NetNamespace::allocated("tenant-a", 4242, "ctl-a");
        let json = serde_json::to_value(&netns).unwrap();
        assert_eq!(json["netid"], 4242);
        assert_eq!(json["netname"], "tenant-a");
        let negative: NetNamespace =
            serde_json::from_str(r#"{"metadata":{"name":"x"},"netname":"x","netid":-1}"#).unwrap();
        assert_eq!(negative.netid, -1);
    }
}
