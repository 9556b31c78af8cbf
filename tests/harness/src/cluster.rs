//! A small cluster on one machine: nodes, an underlay joining them, pods, and external hosts, all
//! inside network namespaces this process creates and removes.
//!
//! ```text
//!   pod ns ─ veth ─┐                       underlay ns (Linux bridge brU)
//!                  br0 ─ vxlan0 ··· br-phy ─ ul0 ═══ uN ─┤
//!   tun0 (gateway) ┘        node ns (private OVS)         ├─ other nodes
//! ```
//!
//! Each node is one [`Ovs`] (its own namespace, userspace datapath). Userspace VXLAN needs the
//! tunnel endpoint on an OVS bridge: `br-phy` (standalone) holds the underlay veth `ul0` and the
//! node's underlay IP, and `ul0` has `arp_ignore=1` so the kernel does not answer ARP for that IP
//! with `ul0`'s own MAC. `br0` is built and programmed by the chosen [`Control`]: the ofnode
//! daemon through its CLI, exactly as an operator would, or the seed's flows written with
//! `ovs-ofctl` (the reference that proves the plumbing without ofnode).
//!
//! Addressing (only the documentation and cluster ranges): node `i` has underlay IP
//! `192.0.2.(11+i)`, local subnet `10.128.(2i).0/23` with gateway `.1`, pods from `.10` up; an
//! external host behind node `i` is `198.51.100.(4i+2)`, reached through the node at `(4i+1)`.
//!
//! [`Cluster::start_with_etcd`] builds the same cluster with an etcd on the underlay bridge
//! ([`ETCD_IP`]) and starts each daemon with only a `[cluster]` section: the nodes lease their
//! subnets there (node `i`'s is whatever it leased; started one at a time they get
//! `10.128.(2i).0/23` as above) and learn each other's from etcd.
//!
//! [`Cluster::start_with_kube_api`] starts a real kube-apiserver (and its own etcd) on the same
//! underlay address, `https://192.0.2.1:6443`, before the nodes (see [`crate::kube`]).
//!
//! Drop order is the cleanup order: pods and external hosts are owned by the caller and drop
//! first (their namespaces take their veths with them), then nodes (daemon, then OVS and the node
//! namespace), then the API server, then etcd, then the underlay namespace.

mod inventory;
mod kube;
mod netpol;
mod pod;
mod restart;
pub mod seed_flows;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::daemon::Daemon;
use crate::etcd::Etcd;
use crate::kube::{KubeApiServer, KubeError, KubeOptions, NodeObject};
use crate::netns::{Netns, Veth};
use crate::ovs::{Ovs, OvsOptions};
use crate::process::CommandError;

pub use inventory::Inventory;
pub use kube::KubePod;
pub use netpol::labels;
pub use pod::{
    reachability, tcp_transfer, unix_now, Endpoint, ExternalHost, Loss, PingStats, Pinger, Pod,
    Reply, Transfer,
};
pub use restart::{CrossNodePing, DaemonOpenflow, DaemonStop, Recovery};

pub const CLUSTER_NETWORK: &str = "10.128.0.0/14";
pub const SERVICE_NETWORK: &str = "172.30.0.0/16";
/// Pod and tun0 MTU: the 1500-byte underlay minus the 50 bytes of VXLAN encapsulation.
pub const POD_MTU: u32 = 1450;
/// The prefix length of every node's pod subnet.
pub const SUBNET_PREFIX: u8 = 23;
/// br0's VXLAN port, where setup puts it.
pub const VXLAN_OFPORT: u32 = 1;
const UNDERLAY_BRIDGE: &str = "brU";
const UNDERLAY_PORT: &str = "ul0";
const PHYS_BRIDGE: &str = "br-phy";
const MAX_PODS_PER_NODE: u8 = 200;
/// The underlay bridge's own address, where the services every node reaches live: etcd (when
/// the nodes lease their subnets there) and the kube-apiserver.
pub const ETCD_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

/// Nodes that take their subnets from etcd (`[cluster]`) instead of `setup` and
/// `hostsubnet add`.
#[derive(Debug, Clone, Copy)]
pub struct EtcdMembership {
    /// Seconds a node's lease outlives its daemon.
    pub lease_ttl: u64,
}

/// How br0 is programmed.
#[derive(Debug, Clone)]
pub enum Control {
    /// An `ofnode run` daemon per node, driven by the ofnode CLI (`setup`, `hostsubnet add`,
    /// `pod add`, `egress set`). The path is the `ofnode` binary.
    Ofnode(PathBuf),
    /// The seed's flows written with ovs-vsctl/ovs-ofctl and tun0 configured with `ip`: no
    /// ofnode involved. Proves the cluster plumbing and is what ofnode's table must behave like.
    SeedFlows,
}

impl Control {
    /// ofnode (this binary) unless the environment asks for the reference: `OFNODE_E2E_CONTROL=seed`
    /// runs the same tests against the seed's flows, which tells a plumbing failure from an
    /// ofnode one.
    pub fn from_env(ofnode: impl Into<PathBuf>) -> Control {
        match std::env::var("OFNODE_E2E_CONTROL").as_deref() {
            Ok("seed") => Control::SeedFlows,
            _ => Control::Ofnode(ofnode.into()),
        }
    }
}

/// The network policy mode of every node (`ofnode setup --mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Subnet,
    Multitenant,
    /// Kubernetes NetworkPolicy (issue 14): namespaces, labels and policies through the CLI.
    /// Only with `Control::Ofnode` (the seed has no such plugin in this form).
    NetworkPolicy,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Subnet => "subnet",
            Mode::Multitenant => "multitenant",
            Mode::NetworkPolicy => "networkpolicy",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of nodes (1 to 8).
    pub nodes: usize,
    pub mode: Mode,
    pub control: Control,
    /// Print every ofnode CLI command before running it, as an operator would type it.
    pub echo: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{what}: {source}")]
    Step {
        what: String,
        #[source]
        source: CommandError,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("the cluster's API server: {0}")]
    Kube(#[from] KubeError),
}

/// Adds "what was being done" to a failed command.
pub(crate) trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, ClusterError>;
}

impl<T> Context<T> for Result<T, CommandError> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, ClusterError> {
        self.map_err(|source| ClusterError::Step {
            what: what(),
            source,
        })
    }
}

/// One node: a private OVS in its own namespace, and its ofnode daemon when the cluster has one.
#[derive(Debug)]
pub struct Node {
    pub index: usize,
    pub underlay_ip: Ipv4Addr,
    /// The node's pod subnet, `10.128.(2i).0`, prefix length 23.
    pub subnet: Ipv4Addr,
    pub gateway: Ipv4Addr,
    // Field order is drop order: the daemon stops before its switch.
    daemon: Option<Daemon>,
    ovs: Ovs,
    next_pod: AtomicU8,
    has_external: std::sync::atomic::AtomicBool,
    echo: bool,
}

impl Node {
    pub fn ovs(&self) -> &Ovs {
        &self.ovs
    }

    pub fn netns(&self) -> &Netns {
        self.ovs.netns()
    }

    pub fn daemon(&self) -> Option<&Daemon> {
        self.daemon.as_ref()
    }

    pub fn daemon_mut(&mut self) -> Option<&mut Daemon> {
        self.daemon.as_mut()
    }

    /// The node's name: `node-<index>` (its etcd lease and its Node object use it).
    pub fn name(&self) -> String {
        format!("node-{}", self.index)
    }

    /// `10.128.(2i).0/23`.
    pub fn subnet_cidr(&self) -> String {
        format!("{}/{SUBNET_PREFIX}", self.subnet)
    }

    /// Runs a command inside the node's namespace.
    pub fn exec(&self, argv: &[&str]) -> Result<String, ClusterError> {
        self.netns()
            .exec_ok(argv)
            .context(|| format!("node {}: {}", self.index, argv.join(" ")))
    }

    /// Runs the ofnode CLI against this node's daemon (`ofnode ARGS… --api SOCK`).
    pub fn cli(&self, args: &[&str]) -> Result<String, ClusterError> {
        let daemon = self.daemon.as_ref().ok_or_else(|| {
            ClusterError::Invalid(format!("node {} runs no ofnode daemon", self.index))
        })?;
        if self.echo {
            println!("  [node {}] $ ofnode {}", self.index, args.join(" "));
        }
        daemon.cli(args).context(|| {
            format!(
                "node {}: ofnode {}\n--- ofnode log ---\n{}",
                self.index,
                args.join(" "),
                daemon.log_tail(20)
            )
        })
    }

    /// br0's flows as `ovs-ofctl dump-flows --no-stats` prints them (the oracle).
    pub fn flows(&self) -> Result<Vec<String>, ClusterError> {
        self.ovs
            .dump_flows("br0")
            .context(|| format!("node {}: dump-flows br0", self.index))
    }

    /// Packets br0's port `ofport` received and transmitted, as `ovs-ofctl dump-ports` counts
    /// them.
    pub fn port_packets(&self, ofport: u32) -> Result<PortPackets, ClusterError> {
        let text = self
            .ovs
            .ofctl("dump-ports", "br0", &[&ofport.to_string()])
            .context(|| format!("node {}: dump-ports br0 {ofport}", self.index))?;
        let count = |direction: &str| -> Option<u64> {
            let (_, rest) = text.split_once(&format!("{direction} pkts="))?;
            rest.split(',').next()?.trim().parse().ok()
        };
        match (count("rx"), count("tx")) {
            (Some(rx), Some(tx)) => Ok(PortPackets { rx, tx }),
            _ => Err(ClusterError::Invalid(format!(
                "node {}: no packet counts in dump-ports:\n{text}",
                self.index
            ))),
        }
    }

    /// The MAC of br-phy, the node's tunnel endpoint.
    pub fn vtep_mac(&self) -> Result<String, ClusterError> {
        let text = self.exec(&["cat", &format!("/sys/class/net/{PHYS_BRIDGE}/address")])?;
        Ok(text.trim().to_string())
    }

    /// Everything useful when a packet did not arrive: br0's flows with statistics, its ports,
    /// the node's addresses and routes, and the daemon's log.
    pub fn diagnostics(&self) -> String {
        let mut text = format!("===== node {} ({})\n", self.index, self.netns().name());
        let mut add = |title: &str, body: String| {
            text.push_str(&format!("--- {title}\n{body}\n"));
        };
        add(
            "dump-flows br0",
            self.ovs
                .ofctl("dump-flows", "br0", &[])
                .unwrap_or_else(|e| e.to_string()),
        );
        add(
            // What the datapath caches: where packets did something the OpenFlow tables do
            // not say, a stale megaflow shows here (Open vSwitch's stale-megaflow bug, which
            // ofnode's purge after each change is there for: src/sdn/megaflows.rs).
            "dpctl/dump-flows",
            self.ovs
                .appctl(&["dpctl/dump-flows"])
                .unwrap_or_else(|e| e.to_string()),
        );
        add(
            "dump-ports-desc br0",
            self.ovs
                .ofctl("dump-ports-desc", "br0", &[])
                .unwrap_or_else(|e| e.to_string()),
        );
        add(
            "ip addr / route",
            self.netns()
                .exec_ok(&["sh", "-c", "ip -br addr; ip route"])
                .unwrap_or_else(|e| e.to_string()),
        );
        add("ovs-vswitchd log", self.ovs.log_tail("vswitchd", 15));
        if let Some(daemon) = &self.daemon {
            add("ofnode log", daemon.log_tail(30));
        }
        text
    }

    /// Writes the daemon's config file: only the `[cluster]` section (etcd and this node's
    /// underlay identity).
    fn write_cluster_config(&self, membership: EtcdMembership) -> Result<PathBuf, ClusterError> {
        let text = format!(
            "[cluster]\nendpoints = [\"http://{ETCD_IP}:2379\"]\nnetwork = \"{CLUSTER_NETWORK}\"\n\
             subnet_prefix_len = {SUBNET_PREFIX}\nservice_network = \"{SERVICE_NETWORK}\"\n\
             public_ip = \"{}\"\nnode_name = \"{}\"\nvtep_mac = \"{}\"\nlease_ttl = {}\n",
            self.underlay_ip,
            self.name(),
            self.vtep_mac()?,
            membership.lease_ttl,
        );
        let path = self.ovs.dir().join("ofnode-cluster.toml");
        std::fs::write(&path, text)
            .map_err(|e| ClusterError::Invalid(format!("write {}: {e}", path.display())))?;
        Ok(path)
    }

    /// `ofnode status --json` as JSON.
    pub fn status(&self) -> Result<serde_json::Value, ClusterError> {
        let text = self.cli(&["status", "--json"])?;
        serde_json::from_str(&text)
            .map_err(|e| ClusterError::Invalid(format!("node {}: status: {e}: {text}", self.index)))
    }

    /// The subnet this node leased in etcd, as its status says.
    pub fn leased_subnet(&self) -> Result<Option<String>, ClusterError> {
        Ok(self.status()?["cluster"]["subnet"]
            .as_str()
            .map(str::to_string))
    }

    /// Waits for the daemon to lease a subnet and takes it as this node's (pods are numbered
    /// from it).
    fn adopt_leased_subnet(&mut self, timeout: Duration) -> Result<(), ClusterError> {
        let subnet = self.wait_for(timeout, "a leased subnet", |node| node.leased_subnet())?;
        let addr = subnet
            .split_once('/')
            .and_then(|(addr, _)| addr.parse::<Ipv4Addr>().ok())
            .ok_or_else(|| ClusterError::Invalid(format!("leased subnet {subnet:?}")))?;
        self.subnet = addr;
        self.gateway = Ipv4Addr::from(u32::from(addr) + 1);
        Ok(())
    }

    /// Waits until the node routes exactly `count` other nodes' subnets.
    pub fn wait_host_subnets(&self, count: usize, timeout: Duration) -> Result<(), ClusterError> {
        self.wait_for(timeout, &format!("{count} host subnets"), |node| {
            let status = node.status()?;
            let have = status["host_subnets"].as_u64().unwrap_or(u64::MAX);
            Ok((have == count as u64 && status["in_sync"] == true).then_some(()))
        })
    }

    /// Polls `probe` until it returns Some, or fails with the daemon's log after `timeout`.
    pub fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut probe: impl FnMut(&Node) -> Result<Option<T>, ClusterError>,
    ) -> Result<T, ClusterError> {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        loop {
            match probe(self) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(err) => last = err.to_string(),
            }
            if Instant::now() >= deadline {
                return Err(ClusterError::Invalid(format!(
                    "node {}: no {what} within {timeout:?} ({last})\n{}",
                    self.index,
                    self.diagnostics()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn allocate_pod_number(&self) -> Result<u8, ClusterError> {
        let n = self.next_pod.fetch_add(1, Ordering::Relaxed);
        if n >= MAX_PODS_PER_NODE {
            return Err(ClusterError::Invalid(format!(
                "node {}: more than {MAX_PODS_PER_NODE} pods",
                self.index
            )));
        }
        Ok(n)
    }
}

/// A br0 port's packet counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortPackets {
    pub rx: u64,
    pub tx: u64,
}

/// The cluster. Create pods with [`Cluster::add_pod`]; they are dropped by the caller.
#[derive(Debug)]
pub struct Cluster {
    pub mode: Mode,
    control: Control,
    openflow: DaemonOpenflow,
    echo: bool,
    membership: Option<EtcdMembership>,
    // Field order is drop order: nodes, the API server, etcd, then the underlay links and
    // namespace.
    nodes: Vec<Node>,
    kube_api: Option<KubeApiServer>,
    etcd: Option<Etcd>,
    _underlay_links: Vec<Veth>,
    underlay: Netns,
}

impl Cluster {
    /// Builds the underlay and every node, sets each node up and tells it about every other
    /// node's subnet, and seeds the tunnel ARP caches so the first packet is not lost.
    pub fn start(options: ClusterOptions) -> Result<Cluster, ClusterError> {
        Cluster::build(options, None, DaemonOpenflow::Passive, false)
    }

    /// [`Cluster::start`] with a real kube-apiserver on the underlay, started before the nodes:
    /// `https://192.0.2.1:6443` ([`crate::kube::API_SERVER_IP`]) from every node's namespace.
    /// The nodes are built and programmed as [`Cluster::start`] does.
    pub fn start_with_kube_api(options: ClusterOptions) -> Result<Cluster, ClusterError> {
        Cluster::build(options, None, DaemonOpenflow::Passive, true)
    }

    /// [`Cluster::start`] with the daemons' OpenFlow connection made the `openflow` way.
    pub fn start_with_openflow(
        options: ClusterOptions,
        openflow: DaemonOpenflow,
    ) -> Result<Cluster, ClusterError> {
        Cluster::build(options, None, openflow, false)
    }

    /// Builds the underlay with an etcd on it ([`ETCD_IP`]) and starts every node's daemon
    /// with only a `[cluster]` section: each leases its subnet and learns the others' from
    /// etcd, with no `setup` or `hostsubnet add`. Waits until every node routes every other
    /// node's subnet. Needs `Control::Ofnode`.
    pub fn start_with_etcd(
        options: ClusterOptions,
        membership: EtcdMembership,
    ) -> Result<Cluster, ClusterError> {
        if !matches!(options.control, Control::Ofnode(_)) {
            return Err(ClusterError::Invalid(
                "etcd membership needs ofnode daemons".into(),
            ));
        }
        Cluster::build(options, Some(membership), DaemonOpenflow::Passive, false)
    }

    fn build(
        options: ClusterOptions,
        membership: Option<EtcdMembership>,
        openflow: DaemonOpenflow,
        kube_api: bool,
    ) -> Result<Cluster, ClusterError> {
        if options.mode == Mode::NetworkPolicy && matches!(options.control, Control::SeedFlows) {
            return Err(ClusterError::Invalid(
                "networkpolicy mode needs ofnode daemons (the seed's flows have no such plugin)"
                    .into(),
            ));
        }
        if !(1..=8).contains(&options.nodes) {
            return Err(ClusterError::Invalid(format!(
                "a cluster has 1 to 8 nodes, not {}",
                options.nodes
            )));
        }
        let underlay = Netns::new("u").context(|| "create the underlay namespace".into())?;
        underlay
            .exec_ok(&["ip", "link", "add", UNDERLAY_BRIDGE, "type", "bridge"])
            .and_then(|_| underlay.exec_ok(&["ip", "link", "set", UNDERLAY_BRIDGE, "up"]))
            .context(|| "create the underlay bridge".into())?;
        if membership.is_some() || kube_api {
            add_service_address(&underlay)?;
        }
        let etcd = match membership {
            Some(_) => Some(
                Etcd::start_in(&underlay, ETCD_IP)
                    .context(|| "start etcd on the underlay".into())?,
            ),
            None => None,
        };
        let kube_api = match kube_api {
            true => Some(KubeApiServer::start_in(
                &underlay,
                ETCD_IP,
                KubeOptions::default(),
            )?),
            false => None,
        };
        let mut cluster = Cluster {
            mode: options.mode,
            control: options.control,
            openflow,
            echo: options.echo,
            membership,
            nodes: Vec::new(),
            kube_api,
            etcd,
            _underlay_links: Vec::new(),
            underlay,
        };
        for index in 0..options.nodes {
            let (mut node, link) = cluster.start_node(index)?;
            cluster._underlay_links.push(link);
            if cluster.membership.is_some() {
                // One at a time: the node's subnet is whatever it leased.
                node.adopt_leased_subnet(Duration::from_secs(30))?;
            }
            cluster.nodes.push(node);
        }
        if cluster.membership.is_some() {
            let others = cluster.nodes.len() - 1;
            for node in &cluster.nodes {
                node.wait_host_subnets(others, Duration::from_secs(30))?;
            }
        } else {
            for node in &cluster.nodes {
                cluster.setup_node(node)?;
            }
            for node in &cluster.nodes {
                for remote in cluster.nodes.iter().filter(|r| r.index != node.index) {
                    cluster.add_host_subnet(node, remote)?;
                }
            }
        }
        cluster.seed_tunnel_arp()?;
        Ok(cluster)
    }

    /// The API server (with [`Cluster::start_with_kube_api`]).
    pub fn kube_api(&self) -> Option<&KubeApiServer> {
        self.kube_api.as_ref()
    }

    pub fn kube_api_mut(&mut self) -> Option<&mut KubeApiServer> {
        self.kube_api.as_mut()
    }

    /// Registers every node with the API server as its kubelet would: a Node named
    /// [`Node::name`] with its underlay IP as InternalIP and its subnet as pod CIDR, Ready.
    pub fn register_kube_nodes(&self) -> Result<(), ClusterError> {
        let api = self.kube_api.as_ref().ok_or_else(|| {
            ClusterError::Invalid("the cluster has no API server (start_with_kube_api)".into())
        })?;
        for node in &self.nodes {
            let mut object = NodeObject::new(&node.name(), node.underlay_ip);
            object.pod_cidr = Some(node.subnet_cidr());
            api.admin().create_node(&object)?;
        }
        Ok(())
    }

    /// The etcd the nodes lease their subnets in (with [`Cluster::start_with_etcd`]).
    pub fn etcd(&self) -> Option<&Etcd> {
        self.etcd.as_ref()
    }

    pub fn etcd_mut(&mut self) -> Option<&mut Etcd> {
        self.etcd.as_mut()
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, index: usize) -> &Node {
        &self.nodes[index]
    }

    pub fn node_mut(&mut self, index: usize) -> &mut Node {
        &mut self.nodes[index]
    }

    pub fn control(&self) -> &Control {
        &self.control
    }

    pub fn underlay(&self) -> &Netns {
        &self.underlay
    }

    fn start_node(&self, index: usize) -> Result<(Node, Veth), ClusterError> {
        let octet = |base: usize| -> Result<u8, ClusterError> {
            u8::try_from(base).map_err(|_| ClusterError::Invalid(format!("node {index}")))
        };
        let subnet_octet = octet(2 * index)?;
        let ovs = Ovs::start_with(OvsOptions {
            prefix: "n".into(),
            vswitchd: true,
            ..OvsOptions::default()
        })
        .context(|| format!("node {index}: start Open vSwitch"))?;
        let node = Node {
            index,
            underlay_ip: Ipv4Addr::new(192, 0, 2, octet(11 + index)?),
            subnet: Ipv4Addr::new(10, 128, subnet_octet, 0),
            gateway: Ipv4Addr::new(10, 128, subnet_octet, 1),
            daemon: None,
            ovs,
            next_pod: AtomicU8::new(0),
            has_external: Default::default(),
            echo: self.echo,
        };
        let link = self.attach_underlay(&node)?;
        let node = match &self.control {
            Control::Ofnode(binary) => {
                let config = match self.membership {
                    Some(membership) => Some(node.write_cluster_config(membership)?),
                    None => None,
                };
                let extra: Vec<&str> = match &config {
                    Some(path) => vec!["--config", path.to_str().unwrap_or_default()],
                    None => Vec::new(),
                };
                let target = self.openflow.target(&node.ovs);
                let daemon = Daemon::start_with_openflow(&node.ovs, binary, &target, &extra)
                    .context(|| format!("node {index}: start ofnode"))?;
                Node {
                    daemon: Some(daemon),
                    ..node
                }
            }
            Control::SeedFlows => node,
        };
        Ok((node, link))
    }

    /// Joins the node to the underlay bridge and puts its underlay IP on br-phy.
    fn attach_underlay(&self, node: &Node) -> Result<Veth, ClusterError> {
        let underlay_end = format!("u{}", node.index);
        let link = Veth::new(&underlay_end, &self.underlay, UNDERLAY_PORT, node.netns())
            .context(|| format!("node {}: underlay veth", node.index))?;
        self.underlay
            .exec_ok(&[
                "ip",
                "link",
                "set",
                &underlay_end,
                "master",
                UNDERLAY_BRIDGE,
            ])
            .context(|| format!("node {}: attach to the underlay bridge", node.index))?;
        node.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.conf.{UNDERLAY_PORT}.arp_ignore=1"),
        ])?;
        node.ovs
            .vsctl(&[
                "add-br",
                PHYS_BRIDGE,
                "--",
                "set",
                "bridge",
                PHYS_BRIDGE,
                "datapath_type=netdev",
                "fail-mode=standalone",
                "--",
                "add-port",
                PHYS_BRIDGE,
                UNDERLAY_PORT,
            ])
            .context(|| format!("node {}: create {PHYS_BRIDGE}", node.index))?;
        let address = format!("{}/24", node.underlay_ip);
        node.exec(&["ip", "addr", "add", &address, "dev", PHYS_BRIDGE])?;
        node.exec(&["ip", "link", "set", PHYS_BRIDGE, "up"])?;
        Ok(link)
    }

    fn setup_node(&self, node: &Node) -> Result<(), ClusterError> {
        match &self.control {
            Control::Ofnode(_) => {
                node.cli(&[
                    "setup",
                    "--cluster-network",
                    CLUSTER_NETWORK,
                    "--service-network",
                    SERVICE_NETWORK,
                    "--local-subnet",
                    &node.subnet_cidr(),
                    "--gateway",
                    &node.gateway.to_string(),
                    "--mode",
                    self.mode.as_str(),
                ])?;
                Ok(())
            }
            Control::SeedFlows => seed_flows::setup(node, self.mode),
        }
    }

    fn add_host_subnet(&self, node: &Node, remote: &Node) -> Result<(), ClusterError> {
        match &self.control {
            Control::Ofnode(_) => {
                node.cli(&[
                    "hostsubnet",
                    "add",
                    "--host-ip",
                    &remote.underlay_ip.to_string(),
                    "--subnet",
                    &remote.subnet_cidr(),
                ])?;
                Ok(())
            }
            Control::SeedFlows => seed_flows::host_subnet(node, remote),
        }
    }

    /// OVS resolves a tunnel's next hop by ARP from br-phy and drops the packet that triggered
    /// it; seeding every remote endpoint's MAC makes the first packet of a test arrive.
    fn seed_tunnel_arp(&self) -> Result<(), ClusterError> {
        let macs = self
            .nodes
            .iter()
            .map(Node::vtep_mac)
            .collect::<Result<Vec<_>, _>>()?;
        for node in &self.nodes {
            for (remote, mac) in self.nodes.iter().zip(&macs) {
                if remote.index == node.index {
                    continue;
                }
                let ip = remote.underlay_ip.to_string();
                node.ovs
                    .appctl(&["tnl/arp/set", PHYS_BRIDGE, &ip, mac])
                    .context(|| format!("node {}: tnl/arp/set {ip}", node.index))?;
            }
        }
        Ok(())
    }

    /// Creates a pod on `node` in tenant `vnid`: a namespace whose `eth0` (MTU 1450, MAC
    /// 0a:58:<ip>, transmit checksum offload off) is a veth to the node, default route via the
    /// node's gateway and the cluster network on-link (as OpenShift's IPAM config did), then
    /// attaches it to br0 (`ofnode pod add`, or the seed's port + flows).
    pub fn add_pod(&self, node: usize, vnid: u32) -> Result<Pod, ClusterError> {
        let mut pod = self.create_pod(node, vnid)?;
        self.attach_pod(&mut pod)?;
        Ok(pod)
    }

    /// A pod as [`Cluster::add_pod`] makes it, whose veth is a port of br0 (`ovs-vsctl
    /// add-port`, so ovs-vswitchd gives it a number and forwards on it) but which nobody told
    /// the node about: br0 has no flow for it. [`Cluster::attach_pod`] adds it later.
    pub fn add_unattached_pod(&self, node: usize, vnid: u32) -> Result<Pod, ClusterError> {
        let mut pod = self.create_pod(node, vnid)?;
        let node = &self.nodes[pod.node];
        let veth = pod.host_veth.as_str();
        let what = || format!("node {}: add-port br0 {veth}", node.index);
        node.ovs.vsctl(&["add-port", "br0", veth]).context(what)?;
        let ofport = node
            .ovs
            .vsctl(&["get", "interface", veth, "ofport"])
            .context(what)?;
        pod.ofport = ofport
            .trim()
            .parse()
            .map_err(|_| ClusterError::Invalid(format!("{}: ofport {ofport:?}", what())))?;
        Ok(pod)
    }

    pub(crate) fn create_pod(&self, node: usize, vnid: u32) -> Result<Pod, ClusterError> {
        let node = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::Invalid(format!("no node {node}")))?;
        let number = node.allocate_pod_number()?;
        Pod::create(node, number, vnid)
    }

    /// Tells the pod's node about it, as the container runtime would: `ofnode pod add` (which
    /// takes over a port that is already on br0), or the seed's port + flows. Sets its ofport.
    pub fn attach_pod(&self, pod: &mut Pod) -> Result<(), ClusterError> {
        let node = self
            .nodes
            .get(pod.node)
            .ok_or_else(|| ClusterError::Invalid(format!("no node {}", pod.node)))?;
        pod.ofport = match &self.control {
            Control::Ofnode(_) => {
                let (key, ip, vnid) = (pod.key(), pod.ip.to_string(), pod.vnid.to_string());
                let mut args = vec![
                    "pod",
                    "add",
                    "--pod",
                    &key,
                    "--veth",
                    &pod.host_veth,
                    "--ip",
                    &ip,
                    "--mac",
                    &pod.mac,
                    "--sandbox",
                    &pod.sandbox,
                    "--vnid",
                    &vnid,
                ];
                let labels = netpol::label_args(&pod.labels);
                args.extend(labels.iter().map(String::as_str));
                let out = node.cli(&args)?;
                out.trim().parse().map_err(|_| {
                    ClusterError::Invalid(format!(
                        "`ofnode pod add` printed {out:?}, not an ofport"
                    ))
                })?
            }
            Control::SeedFlows => seed_flows::pod_add(node, self.mode, pod)?,
        };
        Ok(())
    }

    /// Creates a host outside the cluster reached through `node` (its namespace routes to it):
    /// traffic from pods to it leaves br0 through tun0, passing table 100 (egress policy).
    pub fn add_external_host(&self, node: usize) -> Result<ExternalHost, ClusterError> {
        let node = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::Invalid(format!("no node {node}")))?;
        if node.has_external.swap(true, Ordering::Relaxed) {
            return Err(ClusterError::Invalid(format!(
                "node {} already has its external host",
                node.index
            )));
        }
        ExternalHost::create(node)
    }

    /// Sets the egress policy of tenant `vnid` (namespace `namespace`) on every node: one rule,
    /// Deny to `cidr`.
    pub fn egress_deny(&self, vnid: u32, namespace: &str, cidr: &str) -> Result<(), ClusterError> {
        for node in &self.nodes {
            match &self.control {
                Control::Ofnode(_) => {
                    let policy = deny_policy_json(namespace, cidr);
                    let path = node.ovs.dir().join(format!("egress-{vnid}.json"));
                    std::fs::write(&path, policy).map_err(|e| {
                        ClusterError::Invalid(format!("write {}: {e}", path.display()))
                    })?;
                    node.cli(&[
                        "egress",
                        "set",
                        "--vnid",
                        &vnid.to_string(),
                        "--namespace",
                        namespace,
                        "--policy",
                        &path.display().to_string(),
                    ])?;
                }
                Control::SeedFlows => seed_flows::egress_deny(node, vnid, cidr)?,
            }
        }
        Ok(())
    }

    /// Removes the egress policy of tenant `vnid` on every node.
    pub fn egress_clear(&self, vnid: u32, namespace: &str) -> Result<(), ClusterError> {
        for node in &self.nodes {
            match &self.control {
                Control::Ofnode(_) => {
                    node.cli(&[
                        "egress",
                        "set",
                        "--vnid",
                        &vnid.to_string(),
                        "--namespace",
                        namespace,
                    ])?;
                }
                Control::SeedFlows => seed_flows::egress_clear(node, vnid)?,
            }
        }
        Ok(())
    }

    /// Adds service `ip` of tenant `vnid` with `ports` (`"tcp/80"`, …) on every node:
    /// `ofnode service add`, or the seed's AddServiceRules.
    pub fn add_service(&self, ip: Ipv4Addr, vnid: u32, ports: &[&str]) -> Result<(), ClusterError> {
        for node in &self.nodes {
            match &self.control {
                Control::Ofnode(_) => {
                    let (ip, vnid) = (ip.to_string(), vnid.to_string());
                    let mut args = vec!["service", "add", "--ip", &ip, "--vnid", &vnid];
                    for port in ports {
                        args.extend(["--port", port]);
                    }
                    node.cli(&args)?;
                }
                Control::SeedFlows => seed_flows::service_add(node, self.mode, ip, vnid, ports)?,
            }
        }
        Ok(())
    }

    /// Every node's diagnostics, for a failing test's message.
    pub fn diagnostics(&self) -> String {
        self.nodes.iter().map(Node::diagnostics).collect()
    }

    /// A human-readable description of the cluster, for the demo.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "cluster network {CLUSTER_NETWORK}, service network {SERVICE_NETWORK}, mode {}, underlay bridge {UNDERLAY_BRIDGE} in namespace {}\n",
            self.mode.as_str(),
            self.underlay.name()
        );
        for node in &self.nodes {
            text.push_str(&format!(
                "  node {} (namespace {}): underlay {} on {PHYS_BRIDGE}, subnet {}, gateway {} on tun0{}\n",
                node.index,
                node.netns().name(),
                node.underlay_ip,
                node.subnet_cidr(),
                node.gateway,
                match node.daemon() {
                    Some(d) => format!(", ofnode pid {}", d.pid().unwrap_or(0)),
                    None => String::new(),
                },
            ));
        }
        text
    }
}

/// Puts [`ETCD_IP`] on the underlay bridge, where every node reaches it through its br-phy.
fn add_service_address(underlay: &Netns) -> Result<(), ClusterError> {
    underlay
        .exec_ok(&[
            "ip",
            "addr",
            "add",
            &format!("{ETCD_IP}/24"),
            "dev",
            UNDERLAY_BRIDGE,
        ])
        .context(|| "put the service address on the underlay bridge".into())?;
    // Replies to the nodes go through OVS's userspace datapath, which passes a partially
    // checksummed packet on as it is: let the kernel checksum them in full.
    underlay
        .exec_ok(&["ethtool", "-K", UNDERLAY_BRIDGE, "tx", "off"])
        .context(|| "turn off checksum offload on the underlay bridge".into())?;
    Ok(())
}

/// One EgressNetworkPolicy with a single Deny CIDR rule, as the ofnode CLI reads it.
fn deny_policy_json(namespace: &str, cidr: &str) -> String {
    format!(
        r#"{{"namespace":"{namespace}","name":"deny-{}","spec":{{"egress":[{{"type":"Deny","to":{{"cidrSelector":"{cidr}"}}}}]}}}}"#,
        cidr.replace(['/', '.'], "-")
    )
}
