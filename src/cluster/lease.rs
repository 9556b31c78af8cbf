//! This node's subnet lease: taken with one compare-and-create transaction, kept alive, and
//! remembered on disk so that a restarted node asks for the same subnet again.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use tracing::{info, warn};

use super::config::ClusterSettings;
use super::error::ClusterError;
use super::registry::{list, subnet_key, timed, Entry, Holder, RPC_TIMEOUT};
use super::subnet::{choose, fits};
use super::view::View;

/// How often a lost transaction race is retried before giving up.
const ATTEMPTS: usize = 16;
/// The wait between attempts to reach etcd again.
pub const RETRY: Duration = Duration::from_millis(500);

/// A subnet this node holds, and the etcd lease that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub subnet: crate::value::Cidr,
    pub lease_id: i64,
}

/// Grants a lease and attaches a subnet key to it: the key this node already holds (from a run
/// whose lease has not expired), else `remembered` if nobody holds it, else the first free
/// subnet. A race lost to another node is retried with a fresh listing.
pub async fn acquire(
    client: &mut Client,
    settings: &ClusterSettings,
    me: &Holder,
    remembered: Option<crate::value::Cidr>,
) -> Result<Acquired, ClusterError> {
    let lease_id = timed(client.lease_grant(ttl_secs(settings), None))
        .await?
        .id();
    match claim(client, settings, me, remembered, lease_id).await {
        Ok(subnet) => {
            info!(%subnet, lease = format!("{lease_id:x}"), "subnet leased in etcd");
            Ok(Acquired { subnet, lease_id })
        }
        Err(err) => {
            let _ = timed(client.lease_revoke(lease_id)).await;
            Err(err)
        }
    }
}

fn ttl_secs(settings: &ClusterSettings) -> i64 {
    i64::try_from(settings.lease_ttl).unwrap_or(i64::MAX)
}

async fn claim(
    client: &mut Client,
    settings: &ClusterSettings,
    me: &Holder,
    remembered: Option<crate::value::Cidr>,
    lease_id: i64,
) -> Result<crate::value::Cidr, ClusterError> {
    let (network, len) = (settings.network, settings.subnet_prefix_len);
    for _ in 0..ATTEMPTS {
        let (_, entries) = list(client, &settings.prefix).await?;
        let held = entries
            .iter()
            .find(|e| e.holder.node == me.node && fits(network, len, e.subnet));
        let (subnet, condition) = match held {
            Some(entry) => (entry.subnet, still_unchanged(&settings.prefix, entry)),
            None => {
                let taken: BTreeSet<_> = entries.iter().map(|e| e.subnet).collect();
                let subnet = choose(network, len, &taken, remembered)?;
                let key = subnet_key(&settings.prefix, subnet);
                (subnet, Compare::version(key, CompareOp::Equal, 0))
            }
        };
        let put = TxnOp::put(
            subnet_key(&settings.prefix, subnet),
            me.encode(),
            Some(PutOptions::new().with_lease(lease_id)),
        );
        let txn = Txn::new().when([condition]).and_then([put]);
        if timed(client.txn(txn)).await?.succeeded() {
            return Ok(subnet);
        }
    }
    Err(ClusterError::Contended(ATTEMPTS))
}

/// The key this node held is still as it was listed (no other node took it meanwhile).
fn still_unchanged(prefix: &str, entry: &Entry) -> Compare {
    Compare::mod_revision(
        subnet_key(prefix, entry.subnet),
        CompareOp::Equal,
        entry.mod_revision,
    )
}

/// Renews the lease every third of its TTL until etcd says it has expired; a lost connection
/// (etcd restarting) is retried, and the lease survives when etcd is back within the TTL.
pub async fn keep_alive(
    mut client: Client,
    lease_id: i64,
    ttl: Duration,
    view: &View,
) -> ClusterError {
    loop {
        match renew_until_error(&mut client, lease_id, ttl / 3, view).await {
            Err(ClusterError::LeaseExpired) => return ClusterError::LeaseExpired,
            Err(err) => {
                warn!(
                    lease = format!("{lease_id:x}"),
                    "keep-alive: {err}; retrying"
                );
                view.set_connected(false);
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

async fn renew_until_error(
    client: &mut Client,
    lease_id: i64,
    interval: Duration,
    view: &View,
) -> Result<Infallible, ClusterError> {
    let (mut keeper, mut stream) = timed(client.lease_keep_alive(lease_id)).await?;
    loop {
        keeper.keep_alive().await?;
        let reply = tokio::time::timeout(RPC_TIMEOUT, stream.message())
            .await
            .map_err(|_| ClusterError::Timeout(RPC_TIMEOUT))??
            .ok_or(ClusterError::WatchEnded)?;
        if reply.ttl() <= 0 {
            return Err(ClusterError::LeaseExpired);
        }
        view.set_connected(true);
        tokio::time::sleep(interval).await;
    }
}

/// Where the node remembers its subnet between runs.
pub fn remembered_path(state_dir: &Path) -> PathBuf {
    state_dir.join("cluster-subnet")
}

/// The subnet a previous run held, if the file says one.
pub fn read_remembered(path: &Path) -> Option<crate::value::Cidr> {
    let text = std::fs::read_to_string(path).ok()?;
    match text.trim().parse() {
        Ok(subnet) => Some(subnet),
        Err(err) => {
            warn!(path = %path.display(), "ignoring the remembered subnet: {err}");
            None
        }
    }
}

/// Writes the subnet durably (write, fsync, rename).
pub fn remember(path: &Path, subnet: crate::value::Cidr) -> Result<(), ClusterError> {
    let persist = |source| ClusterError::Persist {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&tmp).map_err(persist)?;
        file.write_all(format!("{subnet}\n").as_bytes())
            .map_err(persist)?;
        file.sync_all().map_err(persist)?;
    }
    std::fs::rename(&tmp, path).map_err(persist)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remembered_subnet_survives_and_junk_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = remembered_path(dir.path());
        assert_eq!(read_remembered(&path), None);
        let subnet = "10.128.4.0/23".parse().unwrap();
        remember(&path, subnet).unwrap();
        assert_eq!(read_remembered(&path), Some(subnet));
        std::fs::write(&path, "10.128.4.1/23").unwrap();
        assert_eq!(read_remembered(&path), None);
    }
}
