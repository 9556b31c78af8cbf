//! What the controller's tests and benchmark share: a real API server with the CRDs and the
//! RBAC of `dist/kubernetes/`, the controller's service-account kubeconfig, and an admin
//! client (kube-rs) driven inside the server's namespace to create and read objects in bulk.
#![allow(dead_code)]

use std::future::Future;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, NodeAddress, NodeStatus};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use ofnode::controller::objects::{allocated_by, HostSubnet, NetNamespace};
use ofnode_harness::kube::{self as harness, ControllerOptions, ControllerProcess, KubeApiServer};

pub struct Setup {
    pub api: KubeApiServer,
    /// The `ofnode-controller` service account's kubeconfig (the RBAC of rbac.yaml).
    pub controller_kubeconfig: PathBuf,
}

impl Setup {
    pub fn start() -> Setup {
        let api = KubeApiServer::start().unwrap();
        api.install_crds().unwrap();
        api.admin()
            .apply_file(&harness::manifests_dir().join("rbac.yaml"))
            .unwrap();
        let controller_kubeconfig = api
            .kubeconfig_for_service_account("ofnode", "ofnode-controller")
            .unwrap();
        Setup {
            api,
            controller_kubeconfig,
        }
    }

    pub fn controller(&self, options: &ControllerOptions) -> ControllerProcess {
        self.api
            .start_controller(binary(), &self.controller_kubeconfig, options)
            .unwrap()
    }

    /// Runs `f` with an admin client inside the API server's namespace.
    pub fn admin<F, Fut, R>(&self, f: F) -> R
    where
        F: FnOnce(kube::Client) -> Fut + Send,
        Fut: Future<Output = R>,
        R: Send,
    {
        let kubeconfig = self.api.admin_kubeconfig().to_path_buf();
        harness::in_netns(self.api.netns(), move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move { f(client(&kubeconfig).await).await })
        })
        .unwrap()
    }
}

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ofnode"))
}

pub async fn client(kubeconfig: &Path) -> kube::Client {
    let config = ofnode::kube::client::config(Some(kubeconfig))
        .await
        .unwrap();
    ofnode::kube::client::client(config).unwrap()
}

/// The underlay address of node `i` (192.0.2.11, .12, … then 198.51.100.x).
pub fn node_ip(i: usize) -> Ipv4Addr {
    match i {
        0..=243 => Ipv4Addr::new(192, 0, 2, 11 + i as u8),
        _ => Ipv4Addr::new(198, 51, 100, (i - 243) as u8),
    }
}

/// Registers a Node as its kubelet would: the object, then its addresses in the status.
pub async fn create_node(client: &kube::Client, name: &str, ip: Option<Ipv4Addr>) {
    let nodes = Api::<Node>::all(client.clone());
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    if let Some(ip) = ip {
        set_node_ip(client, name, ip).await;
    }
}

pub async fn set_node_ip(client: &kube::Client, name: &str, ip: Ipv4Addr) {
    let status = NodeStatus {
        addresses: Some(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: ip.to_string(),
        }]),
        ..NodeStatus::default()
    };
    let patch = serde_json::json!({ "status": status });
    Api::<Node>::all(client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

pub async fn delete_node(client: &kube::Client, name: &str) {
    Api::<Node>::all(client.clone())
        .delete(name, &Default::default())
        .await
        .unwrap();
}

pub async fn create_namespace(client: &kube::Client, name: &str) {
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(name.to_string());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

pub async fn host_subnets(client: &kube::Client) -> Vec<HostSubnet> {
    Api::<HostSubnet>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub async fn net_namespaces(client: &kube::Client) -> Vec<NetNamespace> {
    Api::<NetNamespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub fn name<T: kube::Resource>(object: &T) -> String {
    object.meta().name.clone().unwrap_or_default()
}

pub fn writer<T: kube::Resource>(object: &T) -> String {
    allocated_by(object.meta()).unwrap_or("").to_string()
}

/// Polls `check` (which reads through the admin client) until it returns Some.
pub fn wait_for<T: Send>(
    setup: &Setup,
    timeout: Duration,
    what: &str,
    check: impl Fn(Vec<HostSubnet>, Vec<NetNamespace>) -> Option<T> + Sync,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let (subnets, netns) =
            setup.admin(|c| async move { (host_subnets(&c).await, net_namespaces(&c).await) });
        let summary = format!(
            "{} HostSubnets, {} NetNamespaces",
            subnets.len(),
            netns.len()
        );
        if let Some(found) = check(subnets, netns) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?} ({summary})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
