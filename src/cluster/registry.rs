//! How a subnet lease looks in etcd: the key `<prefix>/subnets/<a.b.c.d>-<len>` (flannel's
//! layout) and a JSON value naming the node that holds it.

use std::future::Future;
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::ClusterError;
use crate::sdn::HostSubnet;
use crate::value::{Cidr, MacAddr};

/// The value of a subnet key: who holds the subnet and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub node: String,
    pub host_ip: Ipv4Addr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep_mac: Option<MacAddr>,
}

impl Holder {
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<Holder, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// What the node routes for this holder's subnet.
    pub fn host_subnet(&self, subnet: Cidr) -> HostSubnet {
        HostSubnet {
            host_ip: self.host_ip,
            subnet,
            fixed_vnid: None,
            vtep_mac: self.vtep_mac,
        }
    }
}

/// One subnet lease as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub subnet: Cidr,
    pub holder: Holder,
    /// The etcd lease the key is attached to (0: none).
    pub lease_id: i64,
    pub mod_revision: i64,
}

/// The keys' common prefix, with its trailing '/'.
pub fn subnets_prefix(prefix: &str) -> String {
    format!("{prefix}/subnets/")
}

pub fn subnet_key(prefix: &str, subnet: Cidr) -> String {
    format!(
        "{}{}-{}",
        subnets_prefix(prefix),
        subnet.addr(),
        subnet.prefix()
    )
}

/// The subnet a key names, or None for a key that is not a subnet lease.
pub fn parse_key(prefix: &str, key: &[u8]) -> Option<Cidr> {
    let key = std::str::from_utf8(key).ok()?;
    let name = key.strip_prefix(&subnets_prefix(prefix))?;
    let (addr, len) = name.split_once('-')?;
    Cidr::new(addr.parse().ok()?, len.parse().ok()?).ok()
}

/// A key-value of the prefix as an entry; keys that are not well-formed leases are logged and
/// skipped (another writer's junk must not stop the node).
pub fn parse_entry(prefix: &str, kv: &etcd_client::KeyValue) -> Option<Entry> {
    let subnet = parse_key(prefix, kv.key())?;
    match Holder::decode(kv.value()) {
        Ok(holder) => Some(Entry {
            subnet,
            holder,
            lease_id: kv.lease(),
            mod_revision: kv.mod_revision(),
        }),
        Err(err) => {
            tracing::warn!(key = %String::from_utf8_lossy(kv.key()), "ignoring a subnet lease whose value is not valid: {err}");
            None
        }
    }
}

/// Every lease under the prefix, and the revision they were read at.
pub async fn list(
    client: &mut etcd_client::Client,
    prefix: &str,
) -> Result<(i64, Vec<Entry>), ClusterError> {
    let options = etcd_client::GetOptions::new().with_prefix();
    let response = timed(client.get(subnets_prefix(prefix), Some(options))).await?;
    let revision = response.header().map_or(0, |h| h.revision());
    let entries = response
        .kvs()
        .iter()
        .filter_map(|kv| parse_entry(prefix, kv))
        .collect();
    Ok((revision, entries))
}

/// How long one etcd request may take before the node treats etcd as unreachable.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(5);

/// An etcd request bounded by [`RPC_TIMEOUT`].
pub async fn timed<T>(
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, ClusterError> {
    match tokio::time::timeout(RPC_TIMEOUT, request).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(ClusterError::Timeout(RPC_TIMEOUT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_junk_is_refused() {
        let subnet: Cidr = "10.128.2.0/23".parse().unwrap();
        let key = subnet_key("/ofnode", subnet);
        assert_eq!(key, "/ofnode/subnets/10.128.2.0-23");
        assert_eq!(parse_key("/ofnode", key.as_bytes()), Some(subnet));
        for junk in [
            "/ofnode/subnets/10.128.2.1-23",
            "/ofnode/subnets/10.128.2.0",
            "/ofnode/subnets/10.128.2.0-99",
            "/other/subnets/10.128.2.0-23",
            "/ofnode/subnets/x-23",
        ] {
            assert_eq!(parse_key("/ofnode", junk.as_bytes()), None, "{junk}");
        }
        assert_eq!(parse_key("/ofnode", &[0xff, 0xfe]), None);
    }

    #[test]
    fn values_round_trip() {
        let holder = Holder {
            node: "n1".into(),
            host_ip: Ipv4Addr::new(192, 0, 2, 11),
            vtep_mac: Some("0a:58:0a:80:02:01".parse().unwrap()),
        };
        assert_eq!(Holder::decode(&holder.encode()).unwrap(), holder);
        assert!(Holder::decode(b"{\"node\":1}").is_err());
    }
}
