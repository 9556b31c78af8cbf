//! Kubeconfig files: one cluster, one user (a client certificate or a bearer token), one context.
//! Written as JSON (which is YAML, so kubectl and kube-rs read it), with the certificates
//! embedded so that a file stays valid wherever it is copied to while the API server runs.

use std::path::Path;

use base64::Engine;

use super::KubeError;
use crate::pki::PeerFiles;

/// The cluster and context name in every kubeconfig the harness writes.
pub const CONTEXT: &str = "ofnode-harness";

/// How a kubeconfig's user authenticates.
pub(crate) enum Credentials<'a> {
    /// A client certificate and its key.
    Certificate(&'a PeerFiles),
    /// A bearer token (a service account's).
    Token(&'a str),
}

/// Writes a kubeconfig for `server` (`https://IP:PORT`) that trusts `ca_cert` and authenticates
/// as `user` with `credentials`.
pub(crate) fn write(
    path: &Path,
    server: &str,
    ca_cert: &Path,
    user: &str,
    credentials: Credentials,
) -> Result<(), KubeError> {
    let data = |file: &Path| -> Result<String, KubeError> {
        std::fs::read(file)
            .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes))
            .map_err(|e| KubeError::Other(format!("read {}: {e}", file.display())))
    };
    let user_entry = match credentials {
        Credentials::Certificate(client) => serde_json::json!({
            "client-certificate-data": data(&client.certificate)?,
            "client-key-data": data(&client.private_key)?,
        }),
        Credentials::Token(token) => serde_json::json!({ "token": token }),
    };
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": CONTEXT,
            "cluster": {
                "server": server,
                "certificate-authority-data": data(ca_cert)?,
            },
        }],
        "users": [{ "name": user, "user": user_entry }],
        "contexts": [{
            "name": CONTEXT,
            "context": { "cluster": CONTEXT, "user": user },
        }],
        "current-context": CONTEXT,
    });
    let text = serde_json::to_string_pretty(&config)
        .map_err(|e| KubeError::Other(format!("kubeconfig for {user}: {e}")))?;
    std::fs::write(path, text)
        .map_err(|e| KubeError::Other(format!("write {}: {e}", path.display())))
}
