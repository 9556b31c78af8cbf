//! The networkpolicy mode's inputs (issue 14), given to every
//! node through the ofnode CLI as an operator (or a Kubernetes agent) would: namespaces with
//! labels, pods named `NAMESPACE/NAME` with labels, the other nodes' pods (`pod remote set`),
//! label changes as `kubectl label` makes them, and NetworkPolicy objects as `kubectl get
//! networkpolicy -o json` prints them.

use super::{Cluster, ClusterError, Node, Pod};

impl Node {
    /// `ofnode netpol apply --file F.json` of one NetworkPolicy object (any JSON: refused
    /// inputs are tested through here too), the file written in the node's OVS directory.
    pub fn netpol_apply(&self, policy: &serde_json::Value) -> Result<String, ClusterError> {
        let text = serde_json::to_string_pretty(policy)
            .map_err(|e| ClusterError::Invalid(format!("policy JSON: {e}")))?;
        let path = self.ovs().dir().join("netpol-apply.json");
        std::fs::write(&path, &text)
            .map_err(|e| ClusterError::Invalid(format!("write {}: {e}", path.display())))?;
        self.cli(&["netpol", "apply", "--file", &path.display().to_string()])
    }
}

/// `--label k=v` for each label, as the CLI takes them.
pub(crate) fn label_args(labels: &[(String, String)]) -> Vec<String> {
    labels
        .iter()
        .flat_map(|(key, value)| ["--label".to_string(), format!("{key}={value}")])
        .collect()
}

/// `&[("k", "v")]` as owned pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Cluster {
    /// Creates pod `namespace/name` (VNID `vnid`, which must be the namespace's in
    /// networkpolicy mode) with `labels` (networkpolicy mode only), attached with `ofnode pod
    /// add --pod NS/NAME --label k=v…`.
    pub fn add_named_pod(
        &self,
        node: usize,
        (namespace, name): (&str, &str),
        vnid: u32,
        labels: &[(String, String)],
    ) -> Result<Pod, ClusterError> {
        let mut pod = self.create_pod(node, vnid)?;
        pod.namespace = namespace.to_string();
        pod.name = name.to_string();
        pod.labels = labels.to_vec();
        self.attach_pod(&mut pod)?;
        Ok(pod)
    }

    /// `ofnode namespace set --name NS --vnid N --label k=v…` on every node.
    pub fn namespace_set(
        &self,
        name: &str,
        vnid: u32,
        labels: &[(String, String)],
    ) -> Result<(), ClusterError> {
        let vnid = vnid.to_string();
        let mut args = vec!["namespace", "set", "--name", name, "--vnid", &vnid];
        let labels = label_args(labels);
        args.extend(labels.iter().map(String::as_str));
        self.on_every_node(|node| node.cli(&args).map(drop))
    }

    /// Tells every node but the pod's own about it: `ofnode pod remote set --pod NS/NAME --ip
    /// IP --label k=v…` with the pod's labels.
    pub fn announce_remote_pod(&self, pod: &Pod) -> Result<(), ClusterError> {
        let (key, ip) = (pod.key(), pod.ip.to_string());
        let mut args = vec!["pod", "remote", "set", "--pod", &key, "--ip", &ip];
        let labels = label_args(&pod.labels);
        args.extend(labels.iter().map(String::as_str));
        for node in self.nodes.iter().filter(|node| node.index != pod.node) {
            node.cli(&args)?;
        }
        Ok(())
    }

    /// Sets and removes a pod's labels as `kubectl label` does (`k=v` sets, `k-` removes) on
    /// every node, where it lives and where it is known (`ofnode pod label --pod NS/NAME`
    /// takes both), as an agent watching the API server would. `pod.labels` is left as it was
    /// created (the pod may be borrowed by a running probe loop).
    pub fn label_pod(&self, pod: &Pod, changes: &[&str]) -> Result<(), ClusterError> {
        let key = pod.key();
        let mut args = vec!["pod", "label", "--pod", &key];
        args.extend(changes);
        self.on_every_node(|node| node.cli(&args).map(drop))
    }

    /// Sets and removes a namespace's labels as `kubectl label` does, keeping the others and
    /// its VNID (`ofnode namespace label --name NS k=v k2-` on every node).
    pub fn label_namespace(&self, name: &str, changes: &[&str]) -> Result<(), ClusterError> {
        let mut args = vec!["namespace", "label", "--name", name];
        args.extend(changes);
        self.on_every_node(|node| node.cli(&args).map(drop))
    }

    /// `ofnode netpol apply --file F.json` of one NetworkPolicy object on every node.
    pub fn netpol_apply(&self, policy: &serde_json::Value) -> Result<(), ClusterError> {
        self.on_every_node(|node| node.netpol_apply(policy).map(drop))
    }

    /// `ofnode anp apply --file F` (or `banp`, by the object's kind) of one
    /// AdminNetworkPolicy or BaselineAdminNetworkPolicy (YAML or JSON text) on every node.
    pub fn admin_apply(&self, text: &str) -> Result<(), ClusterError> {
        self.on_every_node(|node| node.admin_apply(text).map(drop))
    }

    /// `ofnode anp|banp del --name N` on every node (`kind`: `anp` or `banp`).
    pub fn admin_del(&self, kind: &str, name: &str) -> Result<(), ClusterError> {
        self.on_every_node(|node| node.cli(&[kind, "del", "--name", name]).map(drop))
    }

    /// `ofnode pod ports --pod NS/NAME NAME=PORT/PROTO…` on every node (where the pod lives
    /// and where it is known).
    pub fn pod_ports(&self, pod: &Pod, ports: &[&str]) -> Result<(), ClusterError> {
        let key = pod.key();
        let mut args = vec!["pod", "ports", "--pod", &key];
        args.extend(ports);
        self.on_every_node(|node| node.cli(&args).map(drop))
    }

    /// `ofnode node set --name N --ip IP --label k=v…` on every node: a node of the cluster
    /// as admin policies' node peers see it.
    pub fn cluster_node_set(
        &self,
        name: &str,
        ip: std::net::Ipv4Addr,
        labels: &[(String, String)],
    ) -> Result<(), ClusterError> {
        let ip = ip.to_string();
        let mut args = vec!["node", "set", "--name", name, "--ip", &ip];
        let labels = label_args(labels);
        args.extend(labels.iter().map(String::as_str));
        self.on_every_node(|node| node.cli(&args).map(drop))
    }

    /// `ofnode netpol del --namespace NS --name N` on every node.
    pub fn netpol_del(&self, namespace: &str, name: &str) -> Result<(), ClusterError> {
        self.on_every_node(|node| {
            node.cli(&["netpol", "del", "--namespace", namespace, "--name", name])
                .map(drop)
        })
    }

    /// Runs a policy-relevant change on every node. Nothing else: what the nodes enforce once
    /// their daemons have answered is what the tests see.
    fn on_every_node(
        &self,
        step: impl FnMut(&Node) -> Result<(), ClusterError>,
    ) -> Result<(), ClusterError> {
        self.nodes.iter().try_for_each(step)
    }
}

impl Node {
    /// `ofnode anp apply --file F` of one admin policy's text (the kind inside decides the
    /// tier; `banp apply` posts to the same place).
    pub fn admin_apply(&self, text: &str) -> Result<String, ClusterError> {
        let path = self.ovs().dir().join("admin-apply.yaml");
        std::fs::write(&path, text)
            .map_err(|e| ClusterError::Invalid(format!("write {}: {e}", path.display())))?;
        self.cli(&["anp", "apply", "--file", &path.display().to_string()])
    }

    /// Whether `ofnode status` carries the stale-megaflow warning (`src/sdn/ovs_bugs.rs`).
    pub fn warns_of_stale_megaflows(&self) -> Result<bool, ClusterError> {
        let status = self.status()?;
        let warnings = status["warnings"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        Ok(warnings
            .iter()
            .filter_map(|w| w.as_str())
            .any(|w| w.contains("stale-megaflow bug")))
    }
}
