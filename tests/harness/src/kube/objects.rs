//! Pods and Nodes as the harness makes them, playing the parts of the scheduler (a pod is bound
//! to its node when created) and the kubelet (it registers the Node and reports the pod's IP
//! through the `status` subresource). No container ever runs: the pod's network namespace is
//! the harness's own (see `cluster::Pod`).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde_json::{json, Value};

use super::kubectl::parse_json;
use super::{KubeError, Kubectl};

/// A Pod bound to `node` from the start (`spec.nodeName`).
#[derive(Debug, Clone)]
pub struct PodObject {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub labels: BTreeMap<String, String>,
    /// Named container ports (name, port, protocol), the targets of NetworkPolicy named ports.
    pub ports: Vec<(String, u16, String)>,
}

impl PodObject {
    pub fn new(namespace: &str, name: &str, node: &str) -> PodObject {
        PodObject {
            namespace: namespace.to_string(),
            name: name.to_string(),
            node: node.to_string(),
            labels: BTreeMap::new(),
            ports: Vec::new(),
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> PodObject {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// A named container port (`protocol`: TCP, UDP or SCTP).
    pub fn port(mut self, name: &str, port: u16, protocol: &str) -> PodObject {
        self.ports
            .push((name.to_string(), port, protocol.to_string()));
        self
    }

    /// The Pod object: one container (its image is never pulled), no service account token.
    pub fn manifest(&self) -> Value {
        let ports: Vec<Value> = self
            .ports
            .iter()
            .map(|(name, port, protocol)| {
                json!({"name": name, "containerPort": port, "protocol": protocol})
            })
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "namespace": self.namespace,
                "name": self.name,
                "labels": self.labels,
            },
            "spec": {
                "nodeName": self.node,
                "automountServiceAccountToken": false,
                "containers": [{
                    "name": "main",
                    "image": "ofnode.invalid/never-pulled",
                    "ports": ports,
                }],
            },
        })
    }
}

/// A Node as its kubelet registers it: its InternalIP (the underlay address other nodes tunnel
/// to) and, optionally, its pod CIDR.
#[derive(Debug, Clone)]
pub struct NodeObject {
    pub name: String,
    pub internal_ip: Ipv4Addr,
    pub pod_cidr: Option<String>,
    pub labels: BTreeMap<String, String>,
}

impl NodeObject {
    pub fn new(name: &str, internal_ip: Ipv4Addr) -> NodeObject {
        NodeObject {
            name: name.to_string(),
            internal_ip,
            pod_cidr: None,
            labels: BTreeMap::new(),
        }
    }

    pub fn manifest(&self) -> Value {
        let mut spec = json!({});
        if let Some(cidr) = &self.pod_cidr {
            spec = json!({"podCIDR": cidr, "podCIDRs": [cidr]});
        }
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": spec,
        })
    }

    /// The status a kubelet reports: Ready, with the node's addresses.
    fn status(&self) -> Value {
        json!({"status": {
            "addresses": [
                {"type": "InternalIP", "address": self.internal_ip.to_string()},
                {"type": "Hostname", "address": self.name},
            ],
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "ofnode test harness",
            }],
        }})
    }
}

impl Kubectl {
    /// Creates the Pod (bound to its node) and returns the object the API server stored.
    pub fn create_pod(&self, pod: &PodObject) -> Result<Value, KubeError> {
        self.create_object(&pod.manifest())
    }

    /// Reports the pod running with `ip` (`status.podIP`, `status.podIPs`, phase Running), as a
    /// kubelet does once the CNI plugin gave the pod its address. Returns the updated Pod.
    pub fn report_pod_ip(
        &self,
        namespace: &str,
        name: &str,
        ip: Ipv4Addr,
    ) -> Result<Value, KubeError> {
        let status = json!({"status": {
            "phase": "Running",
            "podIP": ip.to_string(),
            "podIPs": [{"ip": ip.to_string()}],
            "conditions": [{"type": "Ready", "status": "True"}],
        }});
        self.patch_status(&["pod", name, "-n", namespace], &status)
    }

    /// Registers the Node and reports its status (addresses, Ready), as a kubelet does on start.
    /// Returns the Node as stored.
    pub fn create_node(&self, node: &NodeObject) -> Result<Value, KubeError> {
        self.create_object(&node.manifest())?;
        self.patch_status(&["node", &node.name], &node.status())
    }

    /// `kubectl create -f - -o json` of one object.
    fn create_object(&self, object: &Value) -> Result<Value, KubeError> {
        let args = ["create", "-f", "-", "-o", "json"];
        let text = self.run_with_input(&args, Some(&object.to_string()))?;
        parse_json(&args, text)
    }

    /// A merge patch of the `status` subresource of `object` (`KIND NAME [-n NS]`).
    fn patch_status(&self, object: &[&str], patch: &Value) -> Result<Value, KubeError> {
        let patch = patch.to_string();
        let mut args = vec!["patch"];
        args.extend_from_slice(object);
        args.extend_from_slice(&[
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
            "-o",
            "json",
        ]);
        let text = self.run(&args)?;
        parse_json(&args, text)
    }
}
