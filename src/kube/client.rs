//! A Kubernetes API client from a kubeconfig file, or from the in-cluster service account
//! (`/var/run/secrets/kubernetes.io/serviceaccount`, `KUBERNETES_SERVICE_HOST`/`_PORT`), with
//! rustls (ring). Whoever talks to the API server (the node following it, `ofnode controller`)
//! builds its client here.

use std::path::{Path, PathBuf};

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no kubeconfig given and not in a pod (the in-cluster service account is unusable: \
         {0}); give a kubeconfig"
    )]
    InCluster(#[source] kube::config::InClusterError),
    #[error("cannot make a Kubernetes client for {url}: {source}")]
    Client {
        url: String,
        #[source]
        source: kube::Error,
    },
}

/// The client configuration: from `kubeconfig` when given (its current context), else in-cluster.
pub async fn config(kubeconfig: Option<&Path>) -> Result<Config, KubeClientError> {
    match kubeconfig {
        Some(path) => {
            let failed = |source| KubeClientError::Kubeconfig {
                path: path.to_path_buf(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(failed)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(failed)
        }
        None => Config::incluster().map_err(KubeClientError::InCluster),
    }
}

/// A client for `config`.
pub fn client(config: Config) -> Result<kube::Client, KubeClientError> {
    let url = config.cluster_url.to_string();
    kube::Client::try_from(config).map_err(|source| KubeClientError::Client { url, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_or_broken_kubeconfig_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = config(Some(&missing)).await.unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("kubeconfig {}: ", missing.display())),
            "{err}"
        );
        let broken = dir.path().join("broken");
        std::fs::write(&broken, "clusters: [").unwrap();
        let err = config(Some(&broken)).await.unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("kubeconfig {}: ", broken.display())),
            "{err}"
        );
    }
}
