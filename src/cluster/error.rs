//! What can go wrong between a node and etcd.

use std::path::PathBuf;

use crate::value::Cidr;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("config: {0}")]
    Config(String),
    #[error("cannot read TLS file {path}: {source}")]
    TlsFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("etcd did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// Every subnet of the cluster network is leased by another node.
    #[error(
        "cluster network {network} is exhausted: all {total} /{len} subnets are leased by other nodes"
    )]
    Exhausted { network: Cidr, len: u8, total: u64 },
    /// Other nodes kept taking the subnet this node tried to lease.
    #[error("could not lease a subnet after {0} attempts (other nodes kept taking them)")]
    Contended(usize),
    #[error(
        "the etcd watch was cancelled: {reason} (compacted up to revision {compact_revision})"
    )]
    WatchCancelled {
        reason: String,
        compact_revision: i64,
    },
    #[error("the etcd watch stream ended")]
    WatchEnded,
    #[error("the lease expired in etcd")]
    LeaseExpired,
    #[error("cannot keep the leased subnet in {path}: {source}")]
    Persist {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("node controller: {0}")]
    Node(#[from] crate::sdn::Error),
}
