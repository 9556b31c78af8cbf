//! The `ofnode` command line: `ofnode run` starts the daemon, every other subcommand is a client
//! of its control socket.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use hyper::Method;

use crate::api::client::{Client, ClientError};
use crate::api::wire;
use crate::daemon::RunArgs;
use crate::sdn::types::{
    parse_ipv4, Cidr, EgressNetworkPolicy, IfName, InvalidInput, MacAddr, SandboxId, ServicePort,
    Vnid,
};
use crate::sdn::{HostSubnet, Mode, PodAdd, Service, SetupRequest};

pub const DEFAULT_API: &str = "/run/ofnode/ofnode.sock";

#[derive(Debug, Parser)]
#[command(
    name = "ofnode",
    version,
    about = "Native OpenFlow 1.3 node controller for Open vSwitch"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
pub struct ApiArg {
    /// The daemon's control socket.
    #[arg(long, global = true, default_value = DEFAULT_API, value_name = "PATH")]
    pub api: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon.
    Run(Box<RunArgs>),
    /// Build br0 and its base flows (the seed's SetupOVS + SetupSDN); a no-op when already set up
    /// with the same parameters.
    Setup {
        #[arg(long, value_name = "CIDR")]
        cluster_network: Cidr,
        #[arg(long, value_name = "CIDR")]
        service_network: Cidr,
        #[arg(long, value_name = "CIDR")]
        local_subnet: Cidr,
        #[arg(long, value_name = "IP", value_parser = ipv4("gateway"))]
        gateway: Ipv4Addr,
        #[arg(long, value_enum, default_value = "subnet")]
        mode: ModeArg,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Show whether the switch and OVSDB are connected, whether br0 is set up, and counts.
    Status {
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArg,
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
    /// Print br0's flows as `ovs-ofctl -O OpenFlow13 dump-flows --no-stats` does.
    DumpFlows {
        #[arg(long)]
        table: Option<u8>,
        #[command(flatten)]
        api: ApiArg,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModeArg {
    Subnet,
    Multitenant,
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Mode {
        match mode {
            ModeArg::Subnet => Mode::Subnet,
            ModeArg::Multitenant => Mode::Multitenant,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PodCommand {
    /// Attach a pod's host veth to br0 and install its flows; prints the OpenFlow port.
    Add {
        #[arg(long)]
        veth: IfName,
        #[arg(long, value_parser = ipv4("pod IP"))]
        ip: Ipv4Addr,
        #[arg(long)]
        mac: MacAddr,
        /// The sandbox (container) id: 64 hex digits.
        #[arg(long)]
        sandbox: SandboxId,
        #[arg(long)]
        vnid: Vnid,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Move a pod (found by its sandbox id) to another VNID.
    Update {
        #[arg(long)]
        sandbox: SandboxId,
        #[arg(long)]
        vnid: Vnid,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Remove a pod's flows, bandwidth limits and port.
    Del {
        #[arg(long)]
        veth: IfName,
        #[arg(long, value_parser = ipv4("pod IP"))]
        ip: Ipv4Addr,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Limit a pod's bandwidth (bits per second; k/M/G suffixes are powers of 1000; 0 clears).
    Bandwidth {
        #[arg(long)]
        veth: IfName,
        #[arg(long, value_parser = parse_rate)]
        ingress: Option<u64>,
        #[arg(long, value_parser = parse_rate)]
        egress: Option<u64>,
        #[command(flatten)]
        api: ApiArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum HostSubnetCommand {
    /// Route a remote node's subnet through the VXLAN to its host IP.
    Add {
        #[arg(long, value_parser = ipv4("host IP"))]
        host_ip: Ipv4Addr,
        #[arg(long)]
        subnet: Cidr,
        /// Send all traffic to this subnet with a fixed VNID (the fixed-VNID host annotation).
        #[arg(long)]
        fixed_vnid: Option<Vnid>,
        /// The remote node's VTEP MAC (for the kernel VXLAN device's FDB/neighbour entries).
        #[arg(long)]
        vtep_mac: Option<MacAddr>,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Forget a remote node's subnet.
    Del {
        #[arg(long, value_parser = ipv4("host IP"))]
        host_ip: Ipv4Addr,
        #[arg(long)]
        subnet: Cidr,
        #[command(flatten)]
        api: ApiArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Add a service IP with its ports (PROTO/PORT, tcp or udp).
    Add {
        #[arg(long, value_parser = ipv4("service IP"))]
        ip: Ipv4Addr,
        #[arg(long)]
        vnid: Vnid,
        #[arg(long = "port", required = true, value_name = "PROTO/PORT")]
        ports: Vec<ServicePort>,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Remove a service IP and all its ports.
    Del {
        #[arg(long, value_parser = ipv4("service IP"))]
        ip: Ipv4Addr,
        #[command(flatten)]
        api: ApiArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum MulticastCommand {
    /// Enable or disable multicast for a VNID's local pods.
    #[command(group(clap::ArgGroup::new("state").required(true).args(["enable", "disable"])))]
    Local {
        #[arg(long)]
        vnid: Vnid,
        #[arg(long, requires = "ofports")]
        enable: bool,
        #[arg(long, conflicts_with = "ofports")]
        disable: bool,
        /// The OpenFlow ports of the VNID's local pods.
        #[arg(long = "ofport", value_name = "N")]
        ofports: Vec<u16>,
        #[command(flatten)]
        api: ApiArg,
    },
    /// Set the remote nodes multicast is sent to over the VXLAN (none: local only).
    Vxlan {
        #[arg(long = "remote", value_name = "IP", value_parser = ipv4("remote IP"))]
        remotes: Vec<Ipv4Addr>,
        #[command(flatten)]
        api: ApiArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum EgressCommand {
    /// Replace a VNID's egress policy (no --policy: remove it).
    Set {
        #[arg(long)]
        vnid: Vnid,
        #[arg(long = "namespace", value_name = "NS", required = true)]
        namespaces: Vec<String>,
        /// A JSON file holding one EgressNetworkPolicy.
        #[arg(long = "policy", value_name = "FILE.json")]
        policies: Vec<PathBuf>,
        #[command(flatten)]
        api: ApiArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum VnidsCommand {
    /// VNIDs with table 80 rules but no pod or service left.
    Unused {
        #[command(flatten)]
        api: ApiArg,
    },
}

fn ipv4(what: &'static str) -> impl Fn(&str) -> Result<Ipv4Addr, InvalidInput> + Clone {
    move |text| parse_ipv4(what, text)
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

/// Why a CLI command failed; printed as `ofnode: <message>` with exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Daemon(crate::daemon::DaemonError),
    #[error("cannot read policy file {path}: {source}")]
    PolicyRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("policy file {path} is not one EgressNetworkPolicy: {source}")]
    PolicyParse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("policy file {path}: {source}")]
    PolicyInvalid { path: PathBuf, source: InvalidInput },
}

fn read_policy(path: &Path) -> Result<EgressNetworkPolicy, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::PolicyRead {
        path: path.to_path_buf(),
        source,
    })?;
    let policy: EgressNetworkPolicy =
        serde_json::from_str(&text).map_err(|source| CliError::PolicyParse {
            path: path.to_path_buf(),
            source,
        })?;
    policy
        .validate()
        .map_err(|source| CliError::PolicyInvalid {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(policy)
}

/// Runs one client subcommand and prints its result.
pub async fn run_client(command: Command) -> Result<(), CliError> {
    match command {
        Command::Run(args) => crate::daemon::run(*args).await.map_err(CliError::Daemon)?,
        Command::Setup {
            cluster_network,
            service_network,
            local_subnet,
            gateway,
            mode,
            api,
        } => {
            let req = SetupRequest {
                cluster_network,
                service_network,
                local_subnet,
                gateway,
                mode: mode.into(),
            };
            let reply: serde_json::Value =
                client(&api).send(Method::POST, "/v1/setup", &req).await?;
            println!("{}", reply["outcome"].as_str().unwrap_or("done"));
        }
        Command::Status { json, api } => {
            let status: serde_json::Value = client(&api).get("/v1/status").await?;
            print_status(&status, json);
        }
        Command::Pod(cmd) => run_pod(cmd).await?,
        Command::Hostsubnet(cmd) => run_hostsubnet(cmd).await?,
        Command::Service(cmd) => run_service(cmd).await?,
        Command::Multicast(cmd) => run_multicast(cmd).await?,
        Command::Egress(EgressCommand::Set {
            vnid,
            namespaces,
            policies,
            api,
        }) => {
            let policies = policies
                .iter()
                .map(|path| read_policy(path))
                .collect::<Result<Vec<_>, _>>()?;
            let req = wire::EgressSet {
                vnid,
                namespaces,
                policies,
            };
            ok(client(&api).send(Method::POST, "/v1/egress", &req).await?);
        }
        Command::Vnids(VnidsCommand::Unused { api }) => {
            let reply: wire::UnusedVnids = client(&api).get("/v1/vnids/unused").await?;
            for vnid in reply.vnids {
                println!("{vnid}");
            }
        }
        Command::DumpFlows { table, api } => {
            let path = match table {
                Some(table) => format!("/v1/flows?table={table}"),
                None => "/v1/flows".to_string(),
            };
            let reply: wire::Flows = client(&api).get(&path).await?;
            for flow in reply.flows {
                println!("{flow}");
            }
        }
    }
    Ok(())
}

async fn run_pod(cmd: PodCommand) -> Result<(), CliError> {
    match cmd {
        PodCommand::Add {
            veth,
            ip,
            mac,
            sandbox,
            vnid,
            api,
        } => {
            let req = PodAdd {
                veth,
                ip,
                mac,
                sandbox,
                vnid,
            };
            let reply: wire::PodAdded = client(&api).send(Method::POST, "/v1/pods", &req).await?;
            println!("{}", reply.ofport);
        }
        PodCommand::Update { sandbox, vnid, api } => {
            let req = wire::PodUpdate { sandbox, vnid };
            ok(client(&api)
                .send(Method::POST, "/v1/pods/update", &req)
                .await?);
        }
        PodCommand::Del { veth, ip, api } => {
            let req = wire::PodDel { veth, ip };
            ok(client(&api).send(Method::DELETE, "/v1/pods", &req).await?);
        }
        PodCommand::Bandwidth {
            veth,
            ingress,
            egress,
            api,
        } => {
            let req = wire::PodBandwidth {
                veth,
                ingress_bps: ingress,
                egress_bps: egress,
            };
            ok(client(&api)
                .send(Method::POST, "/v1/pods/bandwidth", &req)
                .await?);
        }
    }
    Ok(())
}

async fn run_hostsubnet(cmd: HostSubnetCommand) -> Result<(), CliError> {
    match cmd {
        HostSubnetCommand::Add {
            host_ip,
            subnet,
            fixed_vnid,
            vtep_mac,
            api,
        } => {
            let req = HostSubnet {
                host_ip,
                subnet,
                fixed_vnid,
                vtep_mac,
            };
            ok(client(&api)
                .send(Method::POST, "/v1/hostsubnets", &req)
                .await?);
        }
        HostSubnetCommand::Del {
            host_ip,
            subnet,
            api,
        } => {
            let req = wire::HostSubnetDel { host_ip, subnet };
            ok(client(&api)
                .send(Method::DELETE, "/v1/hostsubnets", &req)
                .await?);
        }
    }
    Ok(())
}

async fn run_service(cmd: ServiceCommand) -> Result<(), CliError> {
    match cmd {
        ServiceCommand::Add {
            ip,
            vnid,
            ports,
            api,
        } => {
            let req = Service { ip, vnid, ports };
            ok(client(&api)
                .send(Method::POST, "/v1/services", &req)
                .await?);
        }
        ServiceCommand::Del { ip, api } => {
            let req = wire::ServiceDel { ip };
            ok(client(&api)
                .send(Method::DELETE, "/v1/services", &req)
                .await?);
        }
    }
    Ok(())
}

async fn run_multicast(cmd: MulticastCommand) -> Result<(), CliError> {
    match cmd {
        MulticastCommand::Local {
            vnid,
            enable,
            disable: _,
            ofports,
            api,
        } => {
            let req = wire::MulticastLocal {
                vnid,
                enabled: enable,
                ofports,
            };
            ok(client(&api)
                .send(Method::POST, "/v1/multicast/local", &req)
                .await?);
        }
        MulticastCommand::Vxlan { remotes, api } => {
            let req = wire::MulticastVxlan { remotes };
            ok(client(&api)
                .send(Method::POST, "/v1/multicast/vxlan", &req)
                .await?);
        }
    }
    Ok(())
}

fn client(api: &ApiArg) -> Client {
    Client::new(&api.api)
}

/// Successful operations without a result print nothing, as ovs-ofctl and ovs-vsctl do.
fn ok(_: wire::Ok) {}

fn print_status(status: &serde_json::Value, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(status).unwrap_or_default()
        );
        return;
    }
    if let Some(fields) = status.as_object() {
        for (key, value) in fields {
            match value {
                serde_json::Value::String(text) => println!("{key}: {text}"),
                other => println!("{key}: {other}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1000000").unwrap(), 1_000_000);
        assert_eq!(parse_rate("10M").unwrap(), 10_000_000);
        assert_eq!(parse_rate("500k").unwrap(), 500_000);
        assert!(parse_rate("10X").is_err());
        assert!(parse_rate("99999999999999999999G").is_err());
    }

    #[test]
    fn multicast_local_needs_enable_with_ports_or_disable() {
        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
        assert!(parse(&["ofnode", "multicast", "local", "--vnid", "5"]).is_err());
        assert!(parse(&["ofnode", "multicast", "local", "--vnid", "5", "--enable"]).is_err());
        assert!(parse(&[
            "ofnode",
            "multicast",
            "local",
            "--vnid",
            "5",
            "--enable",
            "--ofport",
            "3"
        ])
        .is_ok());
        assert!(parse(&["ofnode", "multicast", "local", "--vnid", "5", "--disable"]).is_ok());
        assert!(parse(&[
            "ofnode",
            "multicast",
            "local",
            "--vnid",
            "5",
            "--disable",
            "--ofport",
            "3"
        ])
        .is_err());
    }

    #[test]
    fn bad_input_is_refused_by_the_cli() {
        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
        let sandbox = "ab".repeat(32);
        let good = [
            "ofnode",
            "pod",
            "add",
            "--veth",
            "veth1",
            "--ip",
            "10.128.0.5",
            "--mac",
            "0a:58:0a:80:00:05",
            "--sandbox",
            &sandbox,
            "--vnid",
            "10",
        ];
        assert!(parse(&good).is_ok());
        let mut bad_ip = good;
        bad_ip[6] = "fd00::5";
        let err = parse(&bad_ip).unwrap_err().to_string();
        assert!(err.contains("IPv6 is not supported"), "{err}");
        let mut bad_vnid = good;
        bad_vnid[12] = "16777216";
        assert!(parse(&bad_vnid).is_err());
        assert!(parse(&[
            "ofnode",
            "service",
            "add",
            "--ip",
            "172.30.0.1",
            "--vnid",
            "1",
            "--port",
            "sctp/80"
        ])
        .is_err());
    }
}
