//! Test harness: private Open vSwitch instances inside network namespaces.
//!
//! Every resource made here is owned by a guard whose `Drop` removes it, so a failing or panicking
//! test leaves nothing behind. A test process that is killed outright cannot run its guards, so
//! every run first reaps what dead runs left (`reap_stale`): their state directories live under
//! [`STATE_ROOT`] and carry the owner's PID in their name.

mod apifault;
pub mod cluster;
pub mod cpu;
mod daemon;
mod etcd;
pub mod ha;
pub mod kube;
pub mod l4;
mod netns;
pub mod ofproxy;
mod ovs;
mod pki;
pub mod probe;
mod process;
pub mod reachability;
pub mod seed_way;
mod tmpfs;

pub use apifault::ApiFault;
pub use cluster::{
    Cluster, ClusterError, ClusterOptions, Control, Endpoint, EtcdMembership, Mode, Pod, ETCD_IP,
};
pub use daemon::{Daemon, OperationTotals, PurgeTotals, ONE_NODE_SETUP};
pub use etcd::{Etcd, EtcdTlsFiles};
pub use kube::{KubeApiServer, KubeError, Kubectl};
pub use netns::{Netns, Veth};
pub use ofproxy::OfProxy;
pub use ovs::{Ovs, OvsOptions, OvsdbSsl};
pub use pki::{PeerFiles, Pki, Subject};
pub use process::{pid_alive, reap_stale, run, run_ok, CommandError, STATE_ROOT};
pub use tmpfs::Tmpfs;

/// Reaps what killed earlier runs left behind; once per process, before anything is created.
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(reap_stale);
}

/// A name unique across concurrent test processes and threads: `ofn<pid>x<n>`, at most 15 bytes
/// so that it is also a valid interface name prefix.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}x{n}", std::process::id())
}
