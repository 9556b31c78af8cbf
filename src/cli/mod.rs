//! The `ofnode` command line: `ofnode run` starts the daemon, every other subcommand is a client
//! of its control socket (`--api PATH`, before or after the subcommand, or `OFNODE_API`).
//! This file defines the commands and their arguments; `run.rs` carries them out.

mod docs;
mod run;
#[cfg(test)]
mod tests;

pub use docs::{completions, manpages};
pub use run::{run, CliError};

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Parser, Subcommand, ValueEnum};

use crate::controller::ControllerArgs;
use crate::daemon::RunArgs;
use crate::sdn::{Mode, NamedPort, ServicePort};
use crate::trace::Proto;
use crate::value::{parse_ipv4, Cidr, IfName, InvalidInput, MacAddr, PodKey, SandboxId, Vnid};

pub const DEFAULT_API: &str = "/run/ofnode/ofnode.sock";

#[derive(Debug, Parser)]
#[command(
    name = "ofnode",
    version,
    about = "Native OpenFlow 1.3 node controller for Open vSwitch"
)]
pub struct Cli {
    /// The daemon's control socket [default: /run/ofnode/ofnode.sock; `run`: the config file's `api`].
    #[arg(long, global = true, env = "OFNODE_API", value_name = "PATH")]
    pub api: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon.
    Run(Box<RunArgs>),
    /// Run the cluster's allocator (leader-elected): a HostSubnet per Node and, in the
    /// multitenant and networkpolicy modes, a NetNamespace (VNID) per Namespace.
    Controller(Box<ControllerArgs>),
    /// Build br0 and its base flows (the seed's SetupOVS + SetupSDN); a no-op when already set up
    /// with the same parameters.
    Setup {
        /// The whole cluster's pod network.
        #[arg(long, value_name = "CIDR")]
        cluster_network: Cidr,
        /// The services' cluster IP network.
        #[arg(long, value_name = "CIDR")]
        service_network: Cidr,
        /// This node's pod subnet (inside the cluster network).
        #[arg(long, value_name = "CIDR")]
        local_subnet: Cidr,
        /// The gateway address on tun0 (a host of the local subnet).
        #[arg(long, value_name = "IP", value_parser = ipv4("gateway"))]
        gateway: Ipv4Addr,
        /// The network policy mode (the seed's policy plugin).
        #[arg(long, value_enum, default_value_t = Mode::Subnet)]
        mode: Mode,
    },
    /// Show whether the switch and OVSDB are connected, whether br0 is set up, and counts.
    Status {
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pods: their OVS port and flows.
    #[command(subcommand)]
    Pod(PodCommand),
    /// Other nodes' subnets (VXLAN destinations).
    #[command(subcommand)]
    Hostsubnet(HostSubnetCommand),
    /// Service IPs and ports.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Multicast delivery.
    #[command(subcommand)]
    Multicast(MulticastCommand),
    /// Egress network policy.
    #[command(subcommand)]
    Egress(EgressCommand),
    /// VNIDs.
    #[command(subcommand)]
    Vnids(VnidsCommand),
    /// Namespaces: VNIDs and labels (networkpolicy mode).
    #[command(subcommand)]
    Namespace(NamespaceCommand),
    /// Kubernetes NetworkPolicies (networkpolicy mode).
    #[command(subcommand)]
    Netpol(NetpolCommand),
    /// The cluster's nodes as AdminNetworkPolicy node peers see them (networkpolicy mode).
    #[command(subcommand)]
    Node(NodeCommand),
    /// The cluster admin's AdminNetworkPolicies (networkpolicy mode): judged before NetworkPolicy.
    #[command(subcommand)]
    Anp(AdminCommand),
    /// The BaselineAdminNetworkPolicy `default` (networkpolicy mode): judged after NetworkPolicy.
    #[command(subcommand)]
    Banp(AdminCommand),
    /// Trace a packet from a pod through br0 (ovs-vswitchd's ofproto/trace, each flow's owner).
    Trace {
        /// The pod it leaves: its NAMESPACE/NAME, IP, sandbox id (or a unique prefix), or host veth.
        #[arg(long, value_name = "POD|IP")]
        from: String,
        /// Its destination [default: the node's gateway].
        #[arg(long, value_name = "IP", value_parser = ipv4("destination"))]
        to: Option<Ipv4Addr>,
        /// Its protocol [default: tcp with --dport, else icmp (an echo request)].
        #[arg(long, value_enum)]
        proto: Option<Proto>,
        /// Its destination port (tcp, udp).
        #[arg(long, value_name = "N")]
        dport: Option<u16>,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print br0's flows as `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` does.
    DumpFlows {
        /// Only this table's flows.
        #[arg(long, value_name = "N")]
        table: Option<u8>,
    },
    /// Print a shell completion script for ofnode (no daemon needed).
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write ofnode's man pages (ofnode.1, one per subcommand) into DIR (no daemon needed).
    Manpages {
        /// The directory the pages are written to (created when missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// `--mode` takes the modes' own names (`Mode`'s `FromStr`/`Display`).
impl ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &Mode::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

#[derive(Debug, Subcommand)]
pub enum PodCommand {
    /// Attach a pod's host veth to br0 and install its flows; prints the OpenFlow port.
    Add {
        /// The pod, NAMESPACE/NAME (its key in every other pod command).
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// The host end of the pod's veth.
        #[arg(long, value_name = "NAME")]
        veth: IfName,
        /// The pod's IPv4 address.
        #[arg(long, value_name = "IP", value_parser = ipv4("pod IP"))]
        ip: Ipv4Addr,
        /// The pod's MAC address.
        #[arg(long, value_name = "MAC")]
        mac: MacAddr,
        /// The sandbox (container) id: 64 hex digits.
        #[arg(long, value_name = "HEX64")]
        sandbox: SandboxId,
        /// The pod's VNID (0: the global network; networkpolicy mode: its namespace's) [default: 0].
        #[arg(long, value_name = "N")]
        vnid: Option<Vnid>,
        /// A label of the pod, k=v (repeat for more; networkpolicy mode only).
        #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
        labels: Vec<(String, String)>,
    },
    /// Set and remove a pod's labels, as `kubectl label` does (k=v sets, k- removes).
    Label {
        /// The pod, NAMESPACE/NAME (of this node or another).
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// Labels to set (k=v) and to remove (k-).
        #[arg(value_name = "K=V|K-", required = true, value_parser = parse_label_edit)]
        edits: Vec<LabelChange>,
    },
    /// Set a pod's named container ports (what a policy's named port resolves to on it),
    /// replacing the old ones; none clears them.
    Ports {
        /// The pod, NAMESPACE/NAME (of this node or another).
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// A named port, NAME=PORT[/TCP|UDP|SCTP] (TCP when no protocol is given).
        #[arg(value_name = "NAME=PORT[/PROTO]")]
        ports: Vec<NamedPort>,
    },
    /// Pods of other nodes (selectable as NetworkPolicy peers).
    #[command(subcommand)]
    Remote(RemotePodCommand),
    /// Move a pod to another VNID (the seed's UpdatePod).
    Update {
        /// The pod, NAMESPACE/NAME.
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// The pod's new VNID.
        #[arg(long, value_name = "N")]
        vnid: Vnid,
        /// Its sandbox id, to take over a pod this node does not know from its flows' note.
        #[arg(long, value_name = "HEX64")]
        sandbox: Option<SandboxId>,
    },
    /// Show a pod: its port, missing flows and traffic counters.
    Status {
        /// The pod, NAMESPACE/NAME.
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the pods of this node.
    List {
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a pod's flows, bandwidth limits and port.
    Del {
        /// The pod, NAMESPACE/NAME.
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// Its host veth, removed from the bridge even when the node does not know the pod.
        #[arg(long, value_name = "NAME")]
        veth: Option<IfName>,
    },
    /// Limit a pod's bandwidth (bits per second; k/M/G suffixes are powers of 1000; 0 clears).
    Bandwidth {
        /// The pod, NAMESPACE/NAME.
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// What the pod may receive, in bits per second.
        #[arg(long, value_name = "BPS", value_parser = parse_rate)]
        ingress: Option<u64>,
        /// What the pod may send, in bits per second.
        #[arg(long, value_name = "BPS", value_parser = parse_rate)]
        egress: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum HostSubnetCommand {
    /// Route a remote node's subnet through the VXLAN to its host IP.
    Add {
        /// The remote node's underlay IP (its VTEP).
        #[arg(long, value_name = "IP", value_parser = ipv4("host IP"))]
        host_ip: Ipv4Addr,
        /// The remote node's pod subnet.
        #[arg(long, value_name = "CIDR")]
        subnet: Cidr,
        /// Send all traffic to this subnet with a fixed VNID (the fixed-VNID host annotation).
        #[arg(long, value_name = "N")]
        fixed_vnid: Option<Vnid>,
        /// The remote node's VTEP MAC (for the kernel VXLAN device's FDB/neighbour entries).
        #[arg(long, value_name = "MAC")]
        vtep_mac: Option<MacAddr>,
    },
    /// Forget a remote node's subnet.
    Del {
        /// The remote node's underlay IP.
        #[arg(long, value_name = "IP", value_parser = ipv4("host IP"))]
        host_ip: Ipv4Addr,
        /// The remote node's pod subnet.
        #[arg(long, value_name = "CIDR")]
        subnet: Cidr,
    },
}

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Add a service IP with its ports (PROTO/PORT, tcp or udp).
    Add {
        /// The service's cluster IP.
        #[arg(long, value_name = "IP", value_parser = ipv4("service IP"))]
        ip: Ipv4Addr,
        /// The service's VNID.
        #[arg(long, value_name = "N")]
        vnid: Vnid,
        /// A port of the service, e.g. tcp/80 (repeat for more).
        #[arg(long = "port", required = true, value_name = "PROTO/PORT")]
        ports: Vec<ServicePort>,
    },
    /// Remove a service IP and all its ports.
    Del {
        /// The service's cluster IP.
        #[arg(long, value_name = "IP", value_parser = ipv4("service IP"))]
        ip: Ipv4Addr,
    },
}

#[derive(Debug, Subcommand)]
pub enum MulticastCommand {
    /// Enable or disable multicast for a VNID's local pods.
    #[command(group(clap::ArgGroup::new("state").required(true).args(["enable", "disable"])))]
    Local {
        /// The VNID whose pods' multicast this is.
        #[arg(long, value_name = "N")]
        vnid: Vnid,
        /// Deliver the VNID's multicast to the given ports.
        #[arg(long, requires = "ofports")]
        enable: bool,
        /// Stop delivering the VNID's multicast.
        #[arg(long, conflicts_with = "ofports")]
        disable: bool,
        /// An OpenFlow port of one of the VNID's local pods (repeat for more).
        #[arg(long = "ofport", value_name = "N")]
        ofports: Vec<u16>,
    },
    /// Set the remote nodes multicast is sent to over the VXLAN (none: local only).
    Vxlan {
        /// A remote node's underlay IP (repeat for more).
        #[arg(long = "remote", value_name = "IP", value_parser = ipv4("remote IP"))]
        remotes: Vec<Ipv4Addr>,
    },
}

#[derive(Debug, Subcommand)]
pub enum EgressCommand {
    /// Replace a VNID's egress policy (no --policy: remove it).
    Set {
        /// The VNID the policy applies to.
        #[arg(long, value_name = "N")]
        vnid: Vnid,
        /// A namespace that has this VNID (repeat for shared namespaces).
        #[arg(long = "namespace", value_name = "NS", required = true)]
        namespaces: Vec<String>,
        /// A JSON file holding one EgressNetworkPolicy (repeat for more).
        #[arg(long = "policy", value_name = "FILE.json")]
        policies: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum RemotePodCommand {
    /// Create or replace a pod of another node.
    Set {
        /// The pod, NAMESPACE/NAME.
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
        /// The pod's address (in another node's subnet; repeat for IPv4 and IPv6).
        #[arg(long = "ip", value_name = "IP", required = true)]
        ips: Vec<IpAddr>,
        /// A label of the pod, k=v (repeat for more).
        #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
        labels: Vec<(String, String)>,
        /// A named container port, NAME=PORT[/TCP|UDP|SCTP] (repeat for more).
        #[arg(long = "port", value_name = "NAME=PORT[/PROTO]")]
        ports: Vec<NamedPort>,
    },
    /// Forget a pod of another node.
    Del {
        /// The pod, NAMESPACE/NAME.
        #[arg(long, value_name = "NS/NAME")]
        pod: PodKey,
    },
    /// List the pods of other nodes.
    List {
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Create or replace a namespace (its labels replace the old ones).
    Set {
        /// The namespace's name.
        #[arg(long, value_name = "NS")]
        name: String,
        /// The namespace's VNID: 1 to 16777215, one per namespace.
        #[arg(long, value_name = "N")]
        vnid: Vnid,
        /// A label of the namespace, k=v (repeat for more).
        #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
        labels: Vec<(String, String)>,
        /// The verdicts its policies audit (ofnode.io/audit): allow,deny,pass or none.
        #[arg(long, value_name = "VERDICTS", default_value = "none")]
        audit: crate::sdn::audit::AuditSet,
    },
    /// Set and remove a namespace's labels, as `kubectl label` does (k=v sets, k- removes).
    Label {
        /// The namespace's name.
        #[arg(long, value_name = "NS")]
        name: String,
        /// Labels to set (k=v) and to remove (k-).
        #[arg(value_name = "K=V|K-", required = true, value_parser = parse_label_edit)]
        edits: Vec<LabelChange>,
    },
    /// Delete a namespace (refused while pods or policies of it exist).
    Del {
        /// The namespace's name.
        #[arg(long, value_name = "NS")]
        name: String,
    },
    /// List the namespaces.
    List {
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Create or replace a node: its addresses and labels (as its Node object has them).
    Set {
        /// The node's name.
        #[arg(long, value_name = "NAME")]
        name: String,
        /// An address of the node (repeat for more).
        #[arg(long = "ip", value_name = "IP", required = true)]
        ips: Vec<Ipv4Addr>,
        /// A label of the node, k=v (repeat for more).
        #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
        labels: Vec<(String, String)>,
    },
    /// Forget a node.
    Del {
        /// The node's name.
        #[arg(long, value_name = "NAME")]
        name: String,
    },
    /// List the nodes.
    List {
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create or replace one from its YAML or JSON (as `kubectl apply -f` takes it).
    Apply {
        /// The YAML or JSON file (`-`: standard input).
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
    /// Delete one.
    Del {
        /// Its name (a baseline's is `default`).
        #[arg(long, value_name = "NAME", default_value = "default")]
        name: String,
    },
    /// List them (ANPs by priority) with the local pods they select and their flows.
    List {
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum NetpolCommand {
    /// Create or replace a NetworkPolicy from its JSON (as `kubectl get networkpolicy -o json` prints one).
    Apply {
        /// The JSON file (`-`: standard input).
        #[arg(long, value_name = "FILE.json")]
        file: PathBuf,
    },
    /// Delete a NetworkPolicy.
    Del {
        /// The policy's namespace.
        #[arg(long, value_name = "NS")]
        namespace: String,
        /// The policy's name.
        #[arg(long, value_name = "NAME")]
        name: String,
    },
    /// List the NetworkPolicies with the local pods they select and their flows.
    List {
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also show every policy rule's packets and bytes (all tiers), read from the switch now.
        #[arg(long)]
        stats: bool,
    },
    /// Explain, from the node's state (no packet sent), which policy rules judge a connection,
    /// in which order, and which one decides: the source's egress, then the destination's ingress.
    Explain {
        /// The source pod: NAMESPACE/NAME (of this node or one it knows of).
        #[arg(long, value_name = "POD")]
        from: PodKey,
        /// The destination: a pod NAMESPACE/NAME, or an IPv4 address.
        #[arg(long, value_name = "POD|IP")]
        to: String,
        /// The destination port and protocol, e.g. 80/tcp (tcp, udp or sctp).
        #[arg(long, value_name = "PORT/PROTO", value_parser = parse_port_proto)]
        port: crate::sdn::core::explain::PortProto,
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn parse_port_proto(text: &str) -> Result<crate::sdn::core::explain::PortProto, String> {
    text.parse()
        .map_err(|e: crate::sdn::labels::FieldError| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum VnidsCommand {
    /// VNIDs with table 80 rules but no pod or service left.
    Unused,
}

fn ipv4(what: &'static str) -> impl Fn(&str) -> Result<Ipv4Addr, InvalidInput> + Clone {
    move |text| parse_ipv4(what, text)
}

/// Parses a label `key=value` (the daemon checks the key's and value's syntax).
pub fn parse_label(text: &str) -> Result<(String, String), InvalidInput> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(InvalidInput::new("label", text, "expected key=value")),
    }
}

/// One label change as `kubectl label` writes it: `key=value` sets, `key-` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelChange {
    Set(String, String),
    Remove(String),
}

pub fn parse_label_edit(text: &str) -> Result<LabelChange, InvalidInput> {
    if let Some(key) = text
        .strip_suffix('-')
        .filter(|k| !k.is_empty() && !k.contains('='))
    {
        return Ok(LabelChange::Remove(key.to_string()));
    }
    parse_label(text)
        .map(|(k, v)| LabelChange::Set(k, v))
        .map_err(|_| InvalidInput::new("label", text, "expected key=value (set) or key- (remove)"))
}

/// Parses a rate in bits per second: `1000000`, `10k`, `10M`, `1G` (SI: powers of 1000).
pub fn parse_rate(text: &str) -> Result<u64, InvalidInput> {
    let invalid = || {
        InvalidInput::new(
            "rate",
            text,
            "expected bits per second, e.g. 1000000, 500k, 10M, 1G",
        )
    };
    let (digits, scale) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1_000),
        Some((i, 'M')) => (&text[..i], 1_000_000),
        Some((i, 'G')) => (&text[..i], 1_000_000_000),
        _ => (text, 1),
    };
    let value: u64 = digits.parse().map_err(|_| invalid())?;
    value.checked_mul(scale).ok_or_else(invalid)
}
