//! The `[kubernetes]` section: where the API server is and who this node is.
//!
//! ```toml
//! [kubernetes]
//! kubeconfig = "/etc/ofnode/kubeconfig"   # absent: in-cluster (the pod's service account)
//! node_name = "node-1"                    # absent: $NODE_NAME, else the host name
//! cluster_network = "10.128.0.0/14"
//! service_network = "172.30.0.0/16"
//! mode = "networkpolicy"                  # subnet | multitenant | networkpolicy
//! pod_wait_secs = 10                      # CNI ADD waits this long for the pod's objects
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::sdn::types::Mode;
use crate::value::Cidr;

/// Where the in-cluster service account's files are (what a pod of the DaemonSet has).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The longest a CNI ADD may wait for the pod's objects (kubelet's own CNI timeout is minutes;
/// an hour is a typo).
const MAX_POD_WAIT_SECS: u64 = 3600;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeSettings {
    /// A kubeconfig file; absent: in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT and
    /// the service account's token and CA under [`SERVICE_ACCOUNT_DIR`]).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name: its Node and its HostSubnet. Absent: `$NODE_NAME` (the downward API
    /// of the DaemonSet), else the host name.
    #[serde(default)]
    pub node_name: Option<String>,
    pub cluster_network: Cidr,
    pub service_network: Cidr,
    #[serde(default = "default_mode")]
    pub mode: Mode,
    /// Seconds a CNI ADD waits for the pod (and its namespace's VNID) to reach the node.
    #[serde(default = "default_pod_wait")]
    pub pod_wait_secs: u64,
}

fn default_mode() -> Mode {
    Mode::NetworkPolicy
}

fn default_pod_wait() -> u64 {
    10
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("[kubernetes] {0}")]
    Invalid(String),
    #[error("[kubernetes] kubeconfig {path}: {reason}")]
    Kubeconfig { path: PathBuf, reason: String },
}

impl KubeSettings {
    /// What can be checked without the API server.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cluster_network.overlaps(&self.service_network) {
            return Err(ConfigError::Invalid(format!(
                "cluster_network {} overlaps service_network {}",
                self.cluster_network, self.service_network
            )));
        }
        if !(1..=MAX_POD_WAIT_SECS).contains(&self.pod_wait_secs) {
            return Err(ConfigError::Invalid(format!(
                "pod_wait_secs {} is outside 1..={MAX_POD_WAIT_SECS}",
                self.pod_wait_secs
            )));
        }
        if let Some(name) = &self.node_name {
            crate::sdn::labels::check_dns_subdomain("node_name", name)
                .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        }
        if let Some(path) = &self.kubeconfig {
            std::fs::metadata(path).map_err(|e| ConfigError::Kubeconfig {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    pub fn pod_wait(&self) -> Duration {
        Duration::from_secs(self.pod_wait_secs)
    }

    /// This node's name: the key, `$NODE_NAME`, or the host name (lowercased, as kubelet
    /// names its Node).
    pub fn node_name(&self) -> Result<String, ConfigError> {
        if let Some(name) = &self.node_name {
            return Ok(name.clone());
        }
        if let Some(name) = std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()) {
            return Ok(name);
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(|e| {
            ConfigError::Invalid(format!(
                "no node_name, no $NODE_NAME, and the host name cannot be read: {e}"
            ))
        })?;
        Ok(host.trim().to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &str) -> Result<KubeSettings, String> {
        let text = format!(
            "cluster_network = \"10.128.0.0/14\"\nservice_network = \"172.30.0.0/16\"\n{extra}"
        );
        let settings: KubeSettings = toml::from_str(&text).map_err(|e| e.to_string())?;
        settings.validate().map_err(|e| e.to_string())?;
        Ok(settings)
    }

    #[test]
    fn defaults_and_refusals_name_the_key() {
        let ok = settings("node_name = \"node-1\"").expect("valid");
        assert_eq!(ok.mode, Mode::NetworkPolicy);
        assert_eq!(ok.pod_wait(), Duration::from_secs(10));
        assert_eq!(ok.node_name().unwrap(), "node-1");
        assert!(settings("pod_wait_secs = 0")
            .unwrap_err()
            .contains("pod_wait_secs"));
        assert!(settings("node_name = \"Node_1\"")
            .unwrap_err()
            .contains("node_name"));
        assert!(settings("kubeconfig = \"/nonexistent/kubeconfig\"")
            .unwrap_err()
            .contains("/nonexistent/kubeconfig"));
        assert!(settings("color = \"blue\"").unwrap_err().contains("color"));
        let overlap: Result<KubeSettings, _> = toml::from_str(
            "cluster_network = \"10.128.0.0/14\"\nservice_network = \"10.128.0.0/16\"",
        );
        assert!(overlap
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
            .contains("overlaps"));
    }
}
