//! What a CNI call can fail with, and the specification's error code for each.

use std::path::PathBuf;

use super::spec::{ErrorObject, SUPPORTED_VERSIONS};
use crate::api::client::ClientError;

/// Error codes of the specification (0–99) and this plugin's own (100 and up).
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const CONTAINER_UNKNOWN: u32 = 3;
    pub const INVALID_ENV: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// The ofnode daemon refused or failed an operation.
    pub const DAEMON: u32 = 100;
    /// CHECK found the pod's network not as ADD left it.
    pub const CHECK_FAILED: u32 = 101;
    /// The IPAM plugin could not be run or answered something that is not a result.
    pub const IPAM_EXEC: u32 = 102;
    /// ADD for a container whose network is already there.
    pub const ALREADY_ADDED: u32 = 103;
}

#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error(
        "CNI version {requested:?} is not supported (this plugin supports {SUPPORTED_VERSIONS:?})"
    )]
    IncompatibleVersion { requested: String },
    #[error("environment variable {name}: {reason}")]
    Env { name: &'static str, reason: String },
    #[error("cannot decode the network configuration on stdin: {0}")]
    Decode(String),
    #[error("network configuration: {0}")]
    Config(String),
    #[error("network namespace {path} cannot be used: {source}")]
    Netns {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("IPAM plugin {plugin:?} not found in CNI_PATH {path:?}")]
    IpamNotFound { plugin: String, path: Vec<PathBuf> },
    /// The IPAM plugin's own error object, passed on.
    #[error("IPAM plugin {plugin:?}: {}", .error.msg)]
    Ipam { plugin: String, error: ErrorObject },
    #[error("IPAM plugin {plugin:?}: {reason}")]
    IpamExec { plugin: String, reason: String },
    #[error("{0}")]
    Netlink(#[from] crate::netlink::Error),
    #[error("ofnode daemon: {0}")]
    Daemon(#[from] ClientError),
    #[error("{0}")]
    Check(String),
    #[error("{0}")]
    Io(String),
    #[error("this container already has its network (host veth {veth} exists); DEL it first")]
    AlreadyAdded { veth: String },
}

impl CniError {
    pub fn code(&self) -> u32 {
        match self {
            CniError::IncompatibleVersion { .. } => code::INCOMPATIBLE_VERSION,
            CniError::Env { .. } => code::INVALID_ENV,
            CniError::Decode(_) => code::DECODE,
            CniError::Config(_) | CniError::IpamNotFound { .. } => code::INVALID_CONFIG,
            CniError::Netns { .. } => code::CONTAINER_UNKNOWN,
            CniError::Ipam { error, .. } => error.code,
            CniError::IpamExec { .. } => code::IPAM_EXEC,
            CniError::Netlink(_) | CniError::Io(_) => code::IO_FAILURE,
            // Not running (or restarting): the runtime should retry.
            CniError::Daemon(ClientError::Connect { .. }) => code::TRY_AGAIN_LATER,
            CniError::Daemon(_) => code::DAEMON,
            CniError::Check(_) => code::CHECK_FAILED,
            CniError::AlreadyAdded { .. } => code::ALREADY_ADDED,
        }
    }

    /// The error object for stdout. `details` gets the IPAM plugin's details and what a
    /// rollback could not undo.
    pub fn to_object(&self, cni_version: &str, rollback_failures: &[String]) -> ErrorObject {
        let mut details: Vec<String> = Vec::new();
        if let CniError::Ipam { error, .. } = self {
            if !error.details.is_empty() {
                details.push(error.details.clone());
            }
        }
        if !rollback_failures.is_empty() {
            details.push(format!(
                "rollback left behind: {}",
                rollback_failures.join("; ")
            ));
        }
        ErrorObject {
            cni_version: cni_version.to_string(),
            code: self.code(),
            msg: self.to_string(),
            details: details.join("; "),
        }
    }
}
