//! What a cluster run made: its namespaces and processes, written down while they exist, so that
//! after cleanup a test or the demo can check that none of them is left.

use std::path::Path;

use super::{Cluster, Endpoint, Pinger};
use crate::process::pid_alive;

/// The namespaces and processes of a cluster and of what ran in it.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    namespaces: Vec<String>,
    processes: Vec<(String, u32)>,
}

impl Inventory {
    /// The underlay and node namespaces, and every node's ovsdb-server, ovs-vswitchd and ofnode
    /// daemon (and etcd, when there is one). A process that is not running now is not recorded:
    /// it cannot be left behind by the cleanup.
    pub fn of_cluster(cluster: &Cluster) -> Inventory {
        let mut inventory = Inventory::default();
        inventory.add_namespace(cluster.underlay().name());
        if let Some(pid) = cluster.etcd().and_then(|etcd| etcd.pid()) {
            inventory.add_process("etcd", pid);
        }
        if let Some(api) = cluster.kube_api() {
            if let Some(pid) = api.pid() {
                inventory.add_process("kube-apiserver", pid);
            }
            if let Some(pid) = api.etcd().pid() {
                inventory.add_process("the API server's etcd", pid);
            }
        }
        for node in cluster.nodes() {
            inventory.add_namespace(node.netns().name());
            let ovs = node.ovs();
            let daemon = node.daemon().and_then(|d| d.pid());
            for (what, pid) in [
                ("ovsdb-server", ovs.ovsdb_pid()),
                ("ovs-vswitchd", ovs.vswitchd_pid()),
                ("ofnode", daemon),
            ] {
                if let Some(pid) = pid {
                    inventory.add_process(&format!("node {} {what}", node.index), pid);
                }
            }
        }
        inventory
    }

    /// A pod's or external host's namespace.
    pub fn add_endpoint(&mut self, endpoint: &dyn Endpoint) {
        self.add_namespace(endpoint.netns().name());
    }

    /// A running `ping`.
    pub fn add_pinger(&mut self, pinger: &Pinger) {
        if let Some(pid) = pinger.pid() {
            self.add_process("ping", pid);
        }
    }

    pub fn add_namespace(&mut self, name: &str) {
        self.namespaces.push(name.to_string());
    }

    pub fn add_process(&mut self, what: &str, pid: u32) {
        self.processes.push((what.to_string(), pid));
    }

    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// `(what, pid)` of every recorded process.
    pub fn processes(&self) -> &[(String, u32)] {
        &self.processes
    }

    /// [`Inventory::left_behind`] once nothing is, or after `limit`: stopped daemons (OVS's
    /// detach from their starter) take a moment to exit after their signal, and a check made at
    /// once would call them left behind, or miss one that never goes.
    pub fn left_behind_after(&self, limit: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = self.left_behind();
            if left.is_empty() || std::time::Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// One line for every recorded namespace that still exists and every recorded process that
    /// still runs; empty when the cleanup was complete.
    pub fn left_behind(&self) -> Vec<String> {
        let namespaces = self
            .namespaces
            .iter()
            .filter(|name| namespace_exists(name))
            .map(|name| format!("namespace {name}"));
        let processes = self
            .processes
            .iter()
            .filter(|(_, pid)| pid_alive(*pid))
            .map(|(what, pid)| format!("{what} (pid {pid})"));
        namespaces.chain(processes).collect()
    }
}

/// `ip netns add` makes `/run/netns/NAME`, and `ip netns del` removes it.
fn namespace_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}
