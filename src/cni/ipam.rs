//! Delegation to the IPAM plugin named in the configuration's `ipam.type` (specification
//! section "Delegated plugins"): found in `CNI_PATH`, run with this process's environment
//! (`CNI_COMMAND` possibly replaced, for a rollback) and the network configuration on stdin.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::error::CniError;
use super::spec::{CniResult, ErrorObject};

/// The most a delegated plugin may print; a result is a few hundred bytes.
const MAX_OUTPUT: u64 = 1 << 20;

/// An IPAM plugin found in `CNI_PATH`.
#[derive(Debug, Clone)]
pub struct Ipam {
    name: String,
    binary: PathBuf,
}

impl Ipam {
    /// Finds `name` in the first directory of `path` that holds an executable of that name.
    pub fn find(name: &str, path: &[PathBuf]) -> Result<Ipam, CniError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(CniError::Config(format!(
                "ipam.type {name:?} is not a plugin name"
            )));
        }
        path.iter()
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
            .map(|binary| Ipam {
                name: name.to_string(),
                binary,
            })
            .ok_or_else(|| CniError::IpamNotFound {
                plugin: name.to_string(),
                path: path.to_vec(),
            })
    }

    /// ADD: the addresses it allocated.
    pub async fn add(&self, config: &[u8]) -> Result<CniResult, CniError> {
        let out = self.exec("ADD", config).await?;
        serde_json::from_slice(&out)
            .map_err(|e| self.exec_error(format!("ADD printed no result: {e}")))
    }

    /// DEL: releases what ADD allocated; the plugin succeeds when there is nothing to release.
    pub async fn del(&self, config: &[u8]) -> Result<(), CniError> {
        self.exec("DEL", config).await.map(drop)
    }

    /// CHECK: the allocation still exists.
    pub async fn check(&self, config: &[u8]) -> Result<(), CniError> {
        self.exec("CHECK", config).await.map(drop)
    }

    async fn exec(&self, command: &str, config: &[u8]) -> Result<Vec<u8>, CniError> {
        let mut child = Command::new(&self.binary)
            .env("CNI_COMMAND", command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.exec_error(format!("cannot run {}: {e}", self.binary.display())))?;
        let (mut stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(stdin), Some(stdout)) => (stdin, stdout),
            _ => return Err(self.exec_error("its stdin/stdout pipes were not opened".into())),
        };
        let write = async move {
            // A plugin that exits without reading its stdin closes the pipe: not our error.
            let _ = stdin.write_all(config).await;
        };
        let mut out = Vec::new();
        let mut stdout = stdout.take(MAX_OUTPUT);
        let ((), read) = tokio::join!(write, stdout.read_to_end(&mut out));
        read.map_err(|e| self.exec_error(format!("reading its output: {e}")))?;
        let status = child
            .wait()
            .await
            .map_err(|e| self.exec_error(format!("waiting for it: {e}")))?;
        if status.success() {
            return Ok(out);
        }
        match serde_json::from_slice::<ErrorObject>(&out) {
            Ok(error) => Err(CniError::Ipam {
                plugin: self.name.clone(),
                error,
            }),
            Err(_) => Err(self.exec_error(format!(
                "{command} failed ({status}): {}",
                String::from_utf8_lossy(&out).trim()
            ))),
        }
    }

    fn exec_error(&self, reason: String) -> CniError {
        CniError::IpamExec {
            plugin: self.name.clone(),
            reason,
        }
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_name_is_never_a_path() {
        for name in ["", "../host-local", "/usr/lib/cni/host-local", ".."] {
            assert!(matches!(
                Ipam::find(name, &[PathBuf::from("/usr/lib/cni")]),
                Err(CniError::Config(_))
            ));
        }
    }

    #[test]
    fn a_missing_plugin_names_the_search_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = Ipam::find("no-such-ipam", &[dir.path().to_path_buf()]).unwrap_err();
        assert!(matches!(err, CniError::IpamNotFound { .. }));
        assert!(err.to_string().contains("no-such-ipam"), "{err}");
    }
}
