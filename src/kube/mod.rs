//! Following a Kubernetes cluster: the node learns its subnet, the other nodes' subnets, every
//! pod, namespace (with its VNID), NetworkPolicy, Service, EgressNetworkPolicy and the cluster
//! admin tiers (AdminNetworkPolicy, BaselineAdminNetworkPolicy) from the API server, and
//! programs its switch from them through the same core operations the control socket uses.
//! Design and guarantees: docs/kubernetes.md.
//!
//! - `config.rs`: the `[kubernetes]` section; `client.rs`: the API client (the controller's
//!   too); `crd.rs`: the seed's own objects, typed (the controller writes two of them);
//! - `convert.rs`: API objects → facts; `mirror.rs`: the joins, facts → [`Input`]s;
//! - `apply.rs`: inputs → core operations (one function for a node and a bare core);
//! - `watch.rs`: kube-runtime watchers; `follow.rs`: the one task that orders it all;
//! - `sink.rs`: a node's writer or a bare core; `status.rs`: what status and /metrics show.

mod apply;
pub mod client;
pub mod config;
pub mod convert;
pub mod crd;
mod follow;
pub mod input;
pub mod mirror;
pub mod sink;
pub mod status;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use apply::{apply, apply_all, Outcome};
pub use config::{ConfigError, KubeSettings};
pub use follow::{Command, Follower, Networks, Shared};
pub use input::{Input, Kind, ObjectRef};
pub use sink::{CoreSink, NodeSink, Sink};
pub use status::{KubeStatus, Tracker};

use crate::sdn::core::CoreError;
use crate::sdn::labels::Labels;
use crate::sdn::types::Mode;
use crate::sdn::{Error, Node};
use crate::value::{PodKey, Vnid};

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("[kubernetes] {0}")]
    Client(#[from] client::KubeClientError),
}

/// Starts following with `sink`: the follower's task, what it shares (CNI waits on it), its
/// status, and where to send it commands.
pub fn follow<S: Sink>(
    client: kube::Client,
    sink: S,
    node: &str,
    networks: Networks,
    server: &str,
) -> (
    JoinHandle<()>,
    Arc<Shared>,
    Arc<Tracker>,
    mpsc::UnboundedSender<Command>,
) {
    let shared = Shared::new(node, networks.mode);
    let tracker = Tracker::new(server, node);
    let (commands, receiver) = mpsc::unbounded_channel();
    let follower = Follower::new(sink, shared.clone(), tracker.clone(), networks, receiver);
    let task = tokio::spawn(follower.run(client));
    (task, shared, tracker, commands)
}

/// A node that follows the API server. Its task stops when this is dropped.
#[derive(Debug)]
pub struct Following {
    server: String,
    node: String,
    pod_wait: Duration,
    shared: Arc<Shared>,
    tracker: Arc<Tracker>,
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<()>,
}

/// What CNI needs of a pod from the API: its namespace's VNID and its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniPod {
    pub vnid: Vnid,
    pub labels: Labels,
}

impl Following {
    /// Connects (the client only: the first requests are the watches) and starts following.
    pub async fn start(node: &Node, settings: &KubeSettings) -> Result<Following, KubeError> {
        settings.validate()?;
        let name = settings.node_name()?;
        let config = client::config(settings.kubeconfig.as_deref()).await?;
        let server = config.cluster_url.to_string();
        let client = client::client(config)?;
        let networks = Networks {
            cluster_network: settings.cluster_network,
            service_network: settings.service_network,
            mode: settings.mode,
        };
        tracing::info!(%server, node = %name, mode = ?settings.mode, "following the Kubernetes API server");
        let (task, shared, tracker, commands) =
            follow(client, NodeSink(node.clone()), &name, networks, &server);
        Ok(Following {
            server,
            node: name,
            pod_wait: settings.pod_wait(),
            shared,
            tracker,
            commands,
            task,
        })
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn status(&self) -> KubeStatus {
        self.tracker.snapshot()
    }

    /// Why the socket refuses an input the API owns: where the truth lives, and how to change
    /// it there.
    pub fn refusal(&self, how: &str) -> String {
        format!(
            "this node follows the Kubernetes API server at {}: {how}",
            self.server
        )
    }

    /// The VNID and labels of local pod `key`, once the API has told the node about the pod
    /// and its namespace, and the node applied what it was told before: waits up to
    /// `pod_wait_secs`.
    pub async fn pod_for_cni(&self, key: &PodKey) -> Result<CniPod, Error> {
        let deadline = tokio::time::Instant::now() + self.pod_wait;
        loop {
            let changed = self.shared.changed.notified();
            let found = self.lookup(key);
            match found {
                Ok(pod) => {
                    let target = self.shared.sent.load(std::sync::atomic::Ordering::Relaxed);
                    let mut applied = self.shared.applied.subscribe();
                    let caught_up =
                        tokio::time::timeout_at(deadline, applied.wait_for(|a| *a >= target)).await;
                    return match caught_up {
                        Ok(Ok(_)) => Ok(pod),
                        _ => Err(self
                            .not_in_time(key, "the node applying what the API server said before")),
                    };
                }
                Err(waiting_for) => {
                    if tokio::time::timeout_at(deadline, changed).await.is_err() {
                        return Err(self.not_in_time(key, &waiting_for));
                    }
                }
            }
        }
    }

    fn not_in_time(&self, key: &PodKey, waiting_for: &str) -> Error {
        Error::Core(CoreError::Conflict {
            what: format!(
                "pod {key}: waited {} s for {waiting_for} (this node follows the Kubernetes API server at {}; `ofnode status` shows whether it is connected)",
                self.pod_wait.as_secs(),
                self.server
            ),
        })
    }

    /// The pod's VNID and labels, or what is still missing.
    fn lookup(&self, key: &PodKey) -> Result<CniPod, String> {
        let mirror = self.shared.mirror();
        let Some(facts) = mirror.pod(key) else {
            return Err(format!("the Pod object {key}"));
        };
        match facts.node.as_deref() {
            Some(node) if node == self.node => {}
            Some(other) => {
                return Err(format!(
                    "pod {key} to be scheduled on this node {:?} (it is on {other:?})",
                    self.node
                ))
            }
            None => {
                return Err(format!(
                    "pod {key} to be scheduled on this node {:?}",
                    self.node
                ))
            }
        }
        let vnid = match self.shared.mode {
            Mode::Subnet => Vnid::GLOBAL,
            _ => mirror.vnid(key.namespace()).ok_or_else(|| {
                format!(
                    "the VNID of namespace {:?} (its Namespace and NetNamespace objects)",
                    key.namespace()
                )
            })?,
        };
        Ok(CniPod {
            vnid,
            labels: facts.labels.clone(),
        })
    }

    /// A local pod was attached: it takes what the API says of it (its named ports).
    pub fn attached(&self, key: &PodKey) {
        let object = ObjectRef::new(Kind::Pod, key.as_str());
        let _ = self.commands.send(Command::Resend(vec![object]));
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}
