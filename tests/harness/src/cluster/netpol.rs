//! The networkpolicy mode's inputs (issue 14), given to every
//! node through the ofnode CLI as an operator (or a Kubernetes agent) would: namespaces with
//! labels, pods with a namespace and labels, the other nodes' pods (`pod remote set`), and
//! NetworkPolicy objects as `kubectl get networkpolicy -o json` prints them.

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
    /// Creates a pod in Kubernetes namespace `namespace` (VNID `vnid`, which must be the
    /// namespace's in networkpolicy mode) with `labels`, attached with `ofnode pod add
    /// --namespace NS --label k=v…`.
    pub fn add_pod_in(
        &self,
        node: usize,
        namespace: &str,
        vnid: u32,
        labels: &[(String, String)],
    ) -> Result<Pod, ClusterError> {
        let mut pod = self.create_pod(node, vnid)?;
        pod.namespace = Some(namespace.to_string());
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

    /// Tells every node but the pod's own about it: `ofnode pod remote set --ip IP --namespace
    /// NS --label k=v…` with the pod's labels (the pod must have a namespace).
    pub fn announce_remote_pod(&self, pod: &Pod) -> Result<(), ClusterError> {
        self.announce_remote_labels(pod, &pod.labels)
    }

    /// Replaces a pod's labels where it lives (`ofnode pod labels`) and on every other node
    /// (`pod remote set`), as an agent watching the API server would. `pod.labels` is left as
    /// it was created (the pod may be borrowed by a running probe loop).
    pub fn set_pod_labels(
        &self,
        pod: &Pod,
        labels: &[(String, String)],
    ) -> Result<(), ClusterError> {
        let mut args = vec!["pod", "labels", "--sandbox", pod.sandbox.as_str()];
        let label_args = label_args(labels);
        args.extend(label_args.iter().map(String::as_str));
        self.node(pod.node).cli(&args)?;
        self.announce_remote_labels(pod, labels)
    }

    fn announce_remote_labels(
        &self,
        pod: &Pod,
        labels: &[(String, String)],
    ) -> Result<(), ClusterError> {
        let namespace = pod.namespace.as_deref().ok_or_else(|| {
            ClusterError::Invalid(format!("pod {} has no namespace to announce", pod.ip))
        })?;
        let ip = pod.ip.to_string();
        let mut args = vec![
            "pod",
            "remote",
            "set",
            "--ip",
            &ip,
            "--namespace",
            namespace,
        ];
        let labels = label_args(labels);
        args.extend(labels.iter().map(String::as_str));
        for node in self.nodes.iter().filter(|node| node.index != pod.node) {
            node.cli(&args)?;
        }
        Ok(())
    }

    /// `ofnode netpol apply --file F.json` of one NetworkPolicy object on every node.
    pub fn netpol_apply(&self, policy: &serde_json::Value) -> Result<(), ClusterError> {
        self.on_every_node(|node| node.netpol_apply(policy).map(drop))
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
