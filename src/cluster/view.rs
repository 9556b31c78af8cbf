//! The cluster as this node last saw it in etcd, for `ofnode status`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::lease::Acquired;
use super::registry::Entry;
use crate::value::{Cidr, MacAddr};

/// Shared between the lease keeper, the watcher and the status handler.
#[derive(Debug)]
pub struct View {
    node: String,
    connected: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    own: Option<Acquired>,
    revision: i64,
    leases: BTreeMap<Cidr, Entry>,
}

/// `ofnode status`'s `cluster` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// This node's name in etcd.
    pub node: String,
    /// The subnet this node holds.
    pub subnet: Option<Cidr>,
    /// The last keep-alive or watch request reached etcd.
    pub etcd_connected: bool,
    /// The etcd revision the node's view is at.
    pub revision: i64,
    /// Every subnet lease under the prefix, this node's included.
    pub nodes: Vec<NodeLease>,
}

/// One node's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLease {
    pub node: String,
    pub host_ip: Ipv4Addr,
    pub subnet: Cidr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep_mac: Option<MacAddr>,
    /// The etcd lease id, in hex as etcdctl prints it.
    pub lease: String,
    /// Seconds left before the lease expires (None: etcd did not say).
    pub ttl: Option<i64>,
    /// This node's own lease.
    pub local: bool,
}

impl View {
    pub fn new(node: String, own: Acquired) -> View {
        View {
            node,
            connected: AtomicBool::new(true),
            inner: Mutex::new(Inner {
                own: Some(own),
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Relaxed);
    }

    pub fn own(&self) -> Option<Acquired> {
        self.lock().own
    }

    pub fn set_own(&self, own: Acquired) {
        self.lock().own = Some(own);
    }

    /// Replaces the whole view with a fresh listing.
    pub fn replace(&self, revision: i64, entries: &[Entry]) {
        let mut inner = self.lock();
        inner.revision = revision;
        inner.leases = entries.iter().map(|e| (e.subnet, e.clone())).collect();
    }

    /// One watch event: a lease written (Some) or gone (None).
    pub fn update(&self, revision: i64, subnet: Cidr, entry: Option<Entry>) {
        let mut inner = self.lock();
        inner.revision = inner.revision.max(revision);
        match entry {
            Some(entry) => inner.leases.insert(subnet, entry),
            None => inner.leases.remove(&subnet),
        };
    }

    /// Every lease, as last seen.
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().leases.values().cloned().collect()
    }

    /// The status without TTLs, and the lease id of each of its nodes (to ask etcd for them).
    pub fn snapshot(&self) -> (ClusterStatus, Vec<i64>) {
        let inner = self.lock();
        let own = inner.own.map(|a| a.subnet);
        let status = ClusterStatus {
            node: self.node.clone(),
            subnet: own,
            etcd_connected: self.connected.load(Ordering::Relaxed),
            revision: inner.revision,
            nodes: inner
                .leases
                .values()
                .map(|e| NodeLease {
                    node: e.holder.node.clone(),
                    host_ip: e.holder.host_ip,
                    subnet: e.subnet,
                    vtep_mac: e.holder.vtep_mac,
                    lease: format!("{:x}", e.lease_id),
                    ttl: None,
                    local: Some(e.subnet) == own,
                })
                .collect(),
        };
        (status, inner.leases.values().map(|e| e.lease_id).collect())
    }
}
