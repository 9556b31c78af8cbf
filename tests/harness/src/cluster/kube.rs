//! A cluster whose nodes follow the Kubernetes API server (`[kubernetes]` in each daemon's
//! config): no `ofnode setup`, no `hostsubnet add`, no `pod remote set`. The harness plays the
//! parts no process here plays: the controller (a HostSubnet per Node, a NetNamespace per
//! Namespace) and the kubelet (the Pod object bound to its node, the pod's network namespace,
//! `ofnode-cni ADD` as a container runtime runs it, the pod's IP written to its status).

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::{
    add_service_address, Cluster, ClusterError, ClusterOptions, Context, Control, DaemonOpenflow,
    Endpoint, Mode, Node, Pod, CLUSTER_NETWORK, SERVICE_NETWORK, SUBNET_PREFIX, UNDERLAY_BRIDGE,
};
use crate::daemon::Daemon;
use crate::kube::{manifests_dir, KubeApiServer, KubeOptions, Kubectl, PodObject, API_SERVER_IP};
use crate::netns::Netns;

/// Where Debian's reference CNI plugins (the `static` IPAM plugin) are.
const CNI_PATH: &str = "/usr/lib/cni";
/// Each node's config file, in its OVS directory.
const KUBE_CONFIG: &str = "ofnode-kube.toml";
/// How long a CNI ADD may wait for the pod's objects to reach the node.
const POD_WAIT_SECS: u64 = 10;

/// A pod the harness ran as a kubelet would: its Pod object, its sandbox, its interface made by
/// `ofnode-cni`.
#[derive(Debug)]
pub struct KubePod {
    /// The pod (its key is the Pod object's `namespace/name`).
    pub pod: Pod,
    /// The sandbox (container) id CNI was called with.
    pub container_id: String,
}

impl Endpoint for KubePod {
    fn netns(&self) -> &Netns {
        self.pod.netns()
    }
    fn ip(&self) -> Ipv4Addr {
        self.pod.ip
    }
}

impl Cluster {
    /// Builds the underlay with a real kube-apiserver on it, applies the CRDs and RBAC of
    /// `dist/kubernetes/`, registers every node (its Node) and gives it its HostSubnet (what
    /// the controller does), then starts each node's daemon with only a `[kubernetes]` section
    /// and the node service account's credentials. Returns once every node is set up from its
    /// HostSubnet, routes every other node's and has applied all it listed.
    pub fn start_following_kube(options: ClusterOptions) -> Result<Cluster, ClusterError> {
        let Control::Ofnode(binary) = options.control.clone() else {
            return Err(ClusterError::Invalid(
                "a cluster following the API server needs ofnode daemons".into(),
            ));
        };
        let underlay = Netns::new("u").context(|| "create the underlay namespace".into())?;
        underlay
            .exec_ok(&["ip", "link", "add", UNDERLAY_BRIDGE, "type", "bridge"])
            .and_then(|_| underlay.exec_ok(&["ip", "link", "set", UNDERLAY_BRIDGE, "up"]))
            .context(|| "create the underlay bridge".into())?;
        add_service_address(&underlay)?;
        let api = KubeApiServer::start_in(&underlay, API_SERVER_IP, KubeOptions::default())?;
        let mut cluster = Cluster {
            mode: options.mode,
            // The nodes are built bare; their daemons start below, with their config.
            control: Control::SeedFlows,
            openflow: DaemonOpenflow::Passive,
            echo: options.echo,
            membership: None,
            nodes: Vec::new(),
            kube_api: Some(api),
            etcd: None,
            _underlay_links: Vec::new(),
            underlay,
        };
        for index in 0..options.nodes {
            let (node, link) = cluster.start_node(index)?;
            cluster._underlay_links.push(link);
            cluster.nodes.push(node);
        }
        cluster.control = Control::Ofnode(binary.clone());
        let admin = cluster.kube_admin()?.clone();
        let api = cluster
            .kube_api
            .as_ref()
            .ok_or_else(|| ClusterError::Invalid("no API server".into()))?;
        api.install_crds()?;
        admin.apply_file(&manifests_dir().join("rbac.yaml"))?;
        cluster.register_kube_nodes()?;
        for node in &cluster.nodes {
            admin.apply(&host_subnet(node).to_string())?;
        }
        let kubeconfig = api.kubeconfig_for_service_account("ofnode", "ofnode-node")?;
        for index in 0..cluster.nodes.len() {
            let config = write_config(&cluster.nodes[index], &kubeconfig, cluster.mode)?;
            let target = cluster.openflow.target(&cluster.nodes[index].ovs);
            let config = config.display().to_string();
            let daemon = Daemon::start_with_openflow(
                &cluster.nodes[index].ovs,
                &binary,
                &target,
                &["--config", &config],
            )
            .context(|| format!("node {index}: start ofnode"))?;
            cluster.nodes[index].daemon = Some(daemon);
        }
        cluster.wait_kube_synced(Duration::from_secs(60))?;
        cluster.seed_tunnel_arp()?;
        Ok(cluster)
    }

    /// Restarts node `index`'s daemon with `top_level` (config keys outside any section, e.g.
    /// `audit_log = "…"`) ahead of its `[kubernetes]` section; waits until every node is
    /// synced again.
    pub fn restart_kube_node_with(
        &mut self,
        index: usize,
        top_level: &str,
    ) -> Result<(), ClusterError> {
        let node = self
            .nodes
            .get_mut(index)
            .ok_or_else(|| ClusterError::Invalid(format!("no node {index}")))?;
        let path = node.ovs.dir().join(KUBE_CONFIG);
        let read = |e: std::io::Error| ClusterError::Invalid(format!("{}: {e}", path.display()));
        let kube = std::fs::read_to_string(&path).map_err(read)?;
        std::fs::write(&path, format!("{top_level}\n{kube}")).map_err(read)?;
        node.daemon
            .as_mut()
            .ok_or_else(|| ClusterError::Invalid(format!("node {index} has no daemon")))?
            .restart_with(&[])
            .context(|| format!("node {index}: restart ofnode"))?;
        self.wait_kube_synced(Duration::from_secs(60))
    }

    /// kubectl as the cluster admin.
    pub fn kube_admin(&self) -> Result<&Kubectl, ClusterError> {
        self.kube_api
            .as_ref()
            .map(KubeApiServer::admin)
            .ok_or_else(|| ClusterError::Invalid("the cluster has no API server".into()))
    }

    /// Waits until every node follows the API server, is set up, routes every other node's
    /// subnet and has applied everything it was told (no edit pending, nothing to retry).
    pub fn wait_kube_synced(&self, timeout: Duration) -> Result<(), ClusterError> {
        let others = self.nodes.len() as u64 - 1;
        for node in &self.nodes {
            node.wait_for(timeout, "kubernetes synced", |node| {
                let status = node.status()?;
                let kube = &status["kubernetes"];
                let ready = kube["synced"] == true
                    && kube["pending_edits"] == 0
                    && status["host_subnets"].as_u64() == Some(others)
                    && status["in_sync"] == true;
                Ok(ready.then_some(()))
            })?;
        }
        Ok(())
    }

    /// Waits until every node has applied the events of `kind` up to resourceVersion `rv` (an
    /// object's, as `kubectl … -o json` printed it) and has nothing pending.
    pub fn wait_kube_applied(
        &self,
        kind: &str,
        rv: &str,
        timeout: Duration,
    ) -> Result<(), ClusterError> {
        let wanted: u64 = rv.parse().map_err(|_| {
            ClusterError::Invalid(format!("resourceVersion {rv:?} is not a number"))
        })?;
        for node in &self.nodes {
            node.wait_for(
                timeout,
                &format!("{kind} applied through resourceVersion {rv}"),
                |node| {
                    let status = node.status()?;
                    let kube = &status["kubernetes"];
                    let applied = kube["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|r| r["kind"] == kind)
                        .and_then(|r| r["resource_version"].as_str())
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    let ready = applied >= wanted
                        && kube["pending_edits"] == 0
                        && status["in_sync"] == true;
                    Ok(ready.then_some(()))
                },
            )?;
        }
        Ok(())
    }

    /// `kubectl apply -f -` of `object` as the admin; waits until every node applied it. The
    /// applied object's resourceVersion.
    pub fn kube_apply(&self, kind: &str, object: &Value) -> Result<String, ClusterError> {
        let admin = self.kube_admin()?;
        let applied = admin.run_with_input(
            &["apply", "-f", "-", "-o", "json"],
            Some(&object.to_string()),
        )?;
        let rv = resource_version(&applied)?;
        self.wait_kube_applied(kind, &rv, Duration::from_secs(30))?;
        Ok(rv)
    }

    /// `kubectl ARGS… -o json` (a change: label, delete, patch) as the admin; waits until every
    /// node applied the changed object's events of `kind`.
    pub fn kube_change(&self, kind: &str, args: &[&str]) -> Result<(), ClusterError> {
        let admin = self.kube_admin()?;
        let mut full: Vec<&str> = args.to_vec();
        full.extend(["-o", "json"]);
        let out = admin.run(&full)?;
        let rv = resource_version(&out)?;
        self.wait_kube_applied(kind, &rv, Duration::from_secs(30))
    }

    /// Creates Namespace `name` with `labels` and its NetNamespace with VNID `vnid` (the
    /// controller's part).
    pub fn create_kube_namespace(
        &self,
        name: &str,
        vnid: u32,
        labels: &[(&str, &str)],
    ) -> Result<(), ClusterError> {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
            {"apiVersion": "network.openshift.io/v1", "kind": "NetNamespace",
             "metadata": {"name": name}, "netname": name, "netid": vnid},
        ]});
        self.kube_admin()?.apply(&objects.to_string())?;
        Ok(())
    }

    /// Runs pod `object` on its node as a kubelet would: creates the Pod object (bound to the
    /// node), the sandbox's network namespace, calls `ofnode-cni ADD` with the pod's
    /// `K8S_POD_NAMESPACE`/`K8S_POD_NAME` (static IPAM: the node's next address), and writes
    /// the address CNI reported to the pod's status.
    pub fn start_kube_pod(&self, node: usize, object: PodObject) -> Result<KubePod, ClusterError> {
        let admin = self.kube_admin()?;
        let node_ref = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::Invalid(format!("no node {node}")))?;
        let object = PodObject {
            node: node_ref.name(),
            ..object
        };
        admin.create_pod(&object)?;
        let pod = self.run_sandbox(node_ref, &object)?;
        admin.report_pod_ip(&object.namespace, &object.name, pod.pod.ip)?;
        Ok(pod)
    }

    /// The sandbox of a pod the API server has no object of: `ofnode-cni ADD` alone (what a
    /// node must refuse after waiting for the object).
    pub fn start_kube_pod_without_object(
        &self,
        node: usize,
        namespace: &str,
        name: &str,
    ) -> Result<KubePod, ClusterError> {
        let node_ref = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::Invalid(format!("no node {node}")))?;
        self.run_sandbox(node_ref, &PodObject::new(namespace, name, &node_ref.name()))
    }

    /// The pod's network namespace and `ofnode-cni ADD` (static IPAM: the node's next address).
    fn run_sandbox(&self, node_ref: &Node, object: &PodObject) -> Result<KubePod, ClusterError> {
        let node = node_ref.index;
        let number = node_ref.allocate_pod_number()?;
        let ip = Ipv4Addr::from(u32::from(node_ref.subnet) + 10 + u32::from(number));
        let netns = Netns::new("p").context(|| format!("node {node}: pod namespace"))?;
        // The host veth is named by the id's first 11 characters: they tell the pods apart.
        let container_id = format!(
            "{:011x}{:053x}",
            (node << 8) + usize::from(number),
            0xc0ffee_u32
        );
        let result = self.cni(node_ref, "ADD", &container_id, &netns, object, Some(ip))?;
        let host_veth = result["interfaces"][0]["name"]
            .as_str()
            .ok_or_else(|| {
                ClusterError::Invalid(format!("CNI ADD printed no host interface: {result}"))
            })?
            .to_string();
        let mac = result["interfaces"][1]["mac"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // As for every harness pod: only tun0 answers the pod's ARP for the gateway.
        node_ref.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.conf.{host_veth}.arp_ignore=1"),
        ])?;
        let labels = object
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let pod = Pod::made_by_cni(
            node,
            ip,
            mac,
            host_veth,
            container_id.clone(),
            0,
            0,
            (&object.namespace, &object.name),
            labels,
            netns,
        );
        Ok(KubePod { pod, container_id })
    }

    /// Stops a pod as a kubelet does: `ofnode-cni DEL`, then the Pod object goes.
    pub fn stop_kube_pod(&self, pod: KubePod) -> Result<(), ClusterError> {
        let node = &self.nodes[pod.pod.node];
        let object = PodObject::new(&pod.pod.namespace, &pod.pod.name, &node.name());
        self.cni(
            node,
            "DEL",
            &pod.container_id,
            pod.pod.netns(),
            &object,
            None,
        )?;
        self.kube_admin()?.run(&[
            "delete",
            "pod",
            &pod.pod.name,
            "-n",
            &pod.pod.namespace,
            // Its kubelet's last word: the sandbox is gone, the object may go at once (without
            // a kubelet a graceful delete would leave it Terminating for good).
            "--grace-period=0",
            "--force",
        ])?;
        Ok(())
    }

    /// Runs `ofnode-cni COMMAND` in the node's namespace as a container runtime does; ADD's
    /// result, parsed (DEL prints nothing).
    fn cni(
        &self,
        node: &Node,
        command: &str,
        container_id: &str,
        netns: &Netns,
        pod: &PodObject,
        ip: Option<Ipv4Addr>,
    ) -> Result<Value, ClusterError> {
        let daemon = node
            .daemon()
            .ok_or_else(|| ClusterError::Invalid(format!("node {} runs no daemon", node.index)))?;
        let addresses: Vec<Value> = ip
            .map(|ip| json!({"address": format!("{ip}/{SUBNET_PREFIX}"), "gateway": node.gateway.to_string()}))
            .into_iter()
            .collect();
        let config = json!({
            "cniVersion": "1.0.0",
            "name": "ofnode",
            "type": "ofnode",
            "api": daemon.api,
            "mtu": super::POD_MTU,
            "disableTxChecksum": true,
            "ipam": {"type": "static", "addresses": addresses,
                     "routes": [{"dst": CLUSTER_NETWORK}]},
        });
        let args = format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={container_id}",
            pod.namespace, pod.name
        );
        let what = || {
            format!(
                "node {}: ofnode-cni {command} {}/{}",
                node.index, pod.namespace, pod.name
            )
        };
        let mut child = Command::new("ip")
            .args(["netns", "exec", node.netns().name()])
            .arg(cni_binary(&self.control)?)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", container_id)
            .env("CNI_NETNS", netns.path())
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", CNI_PATH)
            .env("CNI_ARGS", args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ClusterError::Invalid(format!("{}: {e}", what())))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(config.to_string().as_bytes())
                .map_err(|e| ClusterError::Invalid(format!("{}: {e}", what())))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| ClusterError::Invalid(format!("{}: {e}", what())))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(ClusterError::Invalid(format!(
                "{} failed ({}): {stdout}{}\n--- ofnode log ---\n{}",
                what(),
                out.status,
                String::from_utf8_lossy(&out.stderr),
                daemon.log_tail(20)
            )));
        }
        if stdout.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&stdout)
            .map_err(|e| ClusterError::Invalid(format!("{}: {e}: {stdout}", what())))
    }
}

/// The `metadata.resourceVersion` of the object (or the last of a list) kubectl printed.
fn resource_version(printed: &str) -> Result<String, ClusterError> {
    let value: Value = serde_json::from_str(printed)
        .map_err(|e| ClusterError::Invalid(format!("kubectl printed no JSON ({e}): {printed}")))?;
    let object = match value["items"].as_array() {
        Some(items) => items.last().cloned().unwrap_or(Value::Null),
        None => value,
    };
    object["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ClusterError::Invalid(format!("no resourceVersion in {printed}")))
}

/// `ofnode-cni`, built beside the `ofnode` the cluster runs.
fn cni_binary(control: &Control) -> Result<PathBuf, ClusterError> {
    match control {
        Control::Ofnode(binary) => Ok(binary.with_file_name("ofnode-cni")),
        Control::SeedFlows => Err(ClusterError::Invalid("no ofnode binaries".into())),
    }
}

/// Node `node`'s HostSubnet, as the controller allocates it.
fn host_subnet(node: &Node) -> Value {
    json!({
        "apiVersion": "network.openshift.io/v1",
        "kind": "HostSubnet",
        "metadata": {"name": node.name()},
        "host": node.name(),
        "hostIP": node.underlay_ip.to_string(),
        "subnet": node.subnet_cidr(),
    })
}

/// The daemon's config: only `[kubernetes]`.
fn write_config(node: &Node, kubeconfig: &Path, mode: Mode) -> Result<PathBuf, ClusterError> {
    let text = format!(
        "[kubernetes]\nkubeconfig = \"{}\"\nnode_name = \"{}\"\ncluster_network = \"{CLUSTER_NETWORK}\"\n\
         service_network = \"{SERVICE_NETWORK}\"\nmode = \"{}\"\npod_wait_secs = {POD_WAIT_SECS}\n",
        kubeconfig.display(),
        node.name(),
        mode.as_str(),
    );
    let path = node.ovs.dir().join(KUBE_CONFIG);
    std::fs::write(&path, text)
        .map_err(|e| ClusterError::Invalid(format!("write {}: {e}", path.display())))?;
    Ok(path)
}
