//! Carrying out a parsed command line: the daemon, or one typed request to it and its result
//! printed (nothing on success when there is no result, as ovs-vsctl does).

use std::path::{Path, PathBuf};

use super::{
    AdminCommand, Cli, Command, EgressCommand, HostSubnetCommand, LabelChange, MulticastCommand,
    NamespaceCommand, NetpolCommand, NodeCommand, PodCommand, RemotePodCommand, ServiceCommand,
    VnidsCommand, DEFAULT_API,
};
use crate::api::client::{Client, ClientError};
use crate::api::wire;
use crate::sdn::EgressNetworkPolicy;
use crate::value::InvalidInput;

/// Why a CLI command failed; printed as `ofnode: <message>` with exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Daemon(crate::daemon::DaemonError),
    #[error(transparent)]
    Controller(crate::controller::ControllerError),
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
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
    #[error("cannot write the man pages into {dir}: {source}")]
    Manpages {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// A NetworkPolicy's JSON text from a file or (`-`) standard input; the daemon parses it.
fn read_netpol(path: &Path) -> Result<Vec<u8>, CliError> {
    let read = if path == Path::new("-") {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut text).map(|_| text)
    } else {
        std::fs::read(path)
    };
    read.map_err(|source| CliError::PolicyRead {
        path: path.to_path_buf(),
        source,
    })
}

fn labels(pairs: Vec<(String, String)>) -> wire::Labels {
    pairs.into_iter().collect()
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

/// Runs the command line: the daemon for `run`, otherwise one request to it, whose result
/// is printed.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    let Cli { api, command } = cli;
    let client = &Client::new(api.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_API)));
    match command {
        Command::Run(mut args) => {
            args.api = api;
            if args.check_config {
                let summary = crate::daemon::check_config(*args).map_err(CliError::Daemon)?;
                println!("{summary}");
            } else {
                crate::daemon::run(*args).await.map_err(CliError::Daemon)?;
            }
        }
        Command::Controller(args) => crate::controller::run(*args)
            .await
            .map_err(CliError::Controller)?,
        Command::Setup {
            cluster_network,
            service_network,
            local_subnet,
            gateway,
            mode,
        } => {
            let req = wire::SetupRequest {
                cluster_network,
                service_network,
                local_subnet,
                gateway,
                mode,
            };
            let outcome = client.setup(&req).await?;
            // The outcome's name as the API writes it, e.g. `already_set_up`.
            let name = serde_json::to_value(outcome).unwrap_or_default();
            println!("{}", name.as_str().unwrap_or("done"));
        }
        Command::Status { json } => print_status(&client.status().await?, json),
        Command::Pod(cmd) => run_pod(client, cmd).await?,
        Command::Hostsubnet(cmd) => run_hostsubnet(client, cmd).await?,
        Command::Service(cmd) => run_service(client, cmd).await?,
        Command::Multicast(cmd) => run_multicast(client, cmd).await?,
        Command::Egress(EgressCommand::Set {
            vnid,
            namespaces,
            policies,
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
            client.egress_set(&req).await?;
        }
        Command::Namespace(cmd) => run_namespace(client, cmd).await?,
        Command::Netpol(cmd) => run_netpol(client, cmd).await?,
        Command::Node(cmd) => run_node(client, cmd).await?,
        Command::Anp(cmd) => run_admin(client, wire::AdminKind::Anp, cmd).await?,
        Command::Banp(cmd) => run_admin(client, wire::AdminKind::Banp, cmd).await?,
        Command::Vnids(VnidsCommand::Unused) => {
            for vnid in client.unused_vnids().await? {
                println!("{vnid}");
            }
        }
        Command::Trace {
            from,
            to,
            proto,
            dport,
            json,
        } => {
            let query = wire::TraceQuery {
                from,
                to,
                proto,
                dport,
            };
            let trace = client.trace(&query).await?;
            if json {
                let text = serde_json::to_string_pretty(&trace).unwrap_or_default();
                println!("{text}");
            } else {
                print!("{}", trace.render());
            }
        }
        Command::DumpFlows { table } => {
            for flow in client.flows(table).await? {
                println!("{flow}");
            }
        }
        Command::Completions { shell } => {
            use std::io::Write;
            std::io::stdout()
                .write_all(&super::completions(shell))
                .map_err(CliError::Stdout)?;
        }
        Command::Manpages { dir } => {
            let pages = super::manpages(&dir).map_err(|source| CliError::Manpages {
                dir: dir.clone(),
                source,
            })?;
            for page in pages {
                println!("{}", page.display());
            }
        }
    }
    Ok(())
}

async fn run_pod(client: &Client, cmd: PodCommand) -> Result<(), CliError> {
    match cmd {
        PodCommand::Add {
            pod,
            veth,
            ip,
            mac,
            sandbox,
            vnid,
            labels: pairs,
        } => {
            let req = wire::PodAdd {
                pod,
                veth,
                ip,
                mac,
                sandbox,
                vnid: vnid.unwrap_or_default(),
                labels: labels(pairs),
            };
            println!("{}", client.pod_add(&req).await?);
        }
        PodCommand::Label { pod, edits } => {
            let req = wire::PodLabels {
                pod,
                edit: label_edit(edits),
            };
            client.pod_labels(&req).await?;
        }
        PodCommand::Ports { pod, ports } => {
            client.pod_ports(&wire::PodPorts { pod, ports }).await?;
        }
        PodCommand::Remote(RemotePodCommand::Set {
            pod,
            ips,
            labels: pairs,
            ports,
        }) => {
            let req = wire::KnownPod {
                pod,
                info: wire::PodInfo {
                    labels: labels(pairs),
                    ips,
                    ports,
                    ..Default::default()
                },
            };
            client.remote_pod_set(&req).await?;
        }
        PodCommand::Remote(RemotePodCommand::Del { pod }) => {
            client.remote_pod_del(&wire::RemotePodDel { pod }).await?;
        }
        PodCommand::Remote(RemotePodCommand::List { json }) => {
            let pods = client.remote_pods().await?;
            if json {
                print_json(&wire::RemotePods { remote_pods: pods });
            } else {
                for p in pods {
                    let ips: Vec<String> = p.info.ips.iter().map(|ip| ip.to_string()).collect();
                    println!("{} {} {}", p.pod, ips.join(","), label_text(&p.info.labels));
                }
            }
        }
        PodCommand::Update { pod, vnid, sandbox } => {
            client
                .pod_update(&wire::PodUpdate { pod, vnid, sandbox })
                .await?;
        }
        PodCommand::Status { pod, json } => print_pod_status(&client.pod_status(&pod).await?, json),
        PodCommand::List { json } => {
            let pods = client.pods().await?;
            if json {
                print_json(&wire::Pods { pods });
            } else {
                for p in pods {
                    let a = &p.attachment;
                    let veth = a.veth.as_ref().map_or("-".to_string(), |v| v.to_string());
                    println!(
                        "{} ip={} vnid={} ofport={} veth={veth}",
                        p.pod, a.ip, a.vnid, a.ofport
                    );
                }
            }
        }
        PodCommand::Del { pod, veth } => client.pod_del(&wire::PodDel { pod, veth }).await?,
        PodCommand::Bandwidth {
            pod,
            ingress,
            egress,
        } => {
            let req = wire::PodBandwidth {
                pod,
                ingress_bps: ingress,
                egress_bps: egress,
            };
            client.pod_bandwidth(&req).await?;
        }
    }
    Ok(())
}

async fn run_hostsubnet(client: &Client, cmd: HostSubnetCommand) -> Result<(), CliError> {
    match cmd {
        HostSubnetCommand::Add {
            host_ip,
            subnet,
            fixed_vnid,
            vtep_mac,
        } => {
            let req = wire::HostSubnet {
                host_ip,
                subnet,
                fixed_vnid,
                vtep_mac,
            };
            client.hostsubnet_add(&req).await?;
        }
        HostSubnetCommand::Del { host_ip, subnet } => {
            client
                .hostsubnet_del(&wire::HostSubnetDel { host_ip, subnet })
                .await?;
        }
    }
    Ok(())
}

async fn run_service(client: &Client, cmd: ServiceCommand) -> Result<(), CliError> {
    match cmd {
        ServiceCommand::Add { ip, vnid, ports } => {
            client
                .service_add(&wire::Service { ip, vnid, ports })
                .await?;
        }
        ServiceCommand::Del { ip } => client.service_del(&wire::ServiceDel { ip }).await?,
    }
    Ok(())
}

async fn run_multicast(client: &Client, cmd: MulticastCommand) -> Result<(), CliError> {
    match cmd {
        MulticastCommand::Local {
            vnid,
            enable,
            disable: _,
            ofports,
        } => {
            let req = wire::MulticastLocal {
                vnid,
                enabled: enable,
                ofports,
            };
            client.multicast_local(&req).await?;
        }
        MulticastCommand::Vxlan { remotes } => {
            client
                .multicast_vxlan(&wire::MulticastVxlan { remotes })
                .await?;
        }
    }
    Ok(())
}

async fn run_namespace(client: &Client, cmd: NamespaceCommand) -> Result<(), CliError> {
    match cmd {
        NamespaceCommand::Set {
            name,
            vnid,
            labels: pairs,
            audit,
        } => {
            let req = wire::Namespace {
                name,
                vnid,
                labels: labels(pairs),
                audit,
            };
            client.namespace_set(&req).await?;
        }
        NamespaceCommand::Label { name, edits } => {
            let req = wire::NamespaceLabels {
                name,
                edit: label_edit(edits),
            };
            client.namespace_labels(&req).await?;
        }
        NamespaceCommand::Del { name } => {
            client.namespace_del(&wire::NamespaceDel { name }).await?;
        }
        NamespaceCommand::List { json } => {
            let namespaces = client.namespaces().await?;
            if json {
                print_json(&wire::Namespaces { namespaces });
            } else {
                for ns in namespaces {
                    let audit = if ns.audit.is_empty() {
                        String::new()
                    } else {
                        format!(" audit={}", ns.audit)
                    };
                    println!("{} {} {}{audit}", ns.name, ns.vnid, label_text(&ns.labels));
                }
            }
        }
    }
    Ok(())
}

async fn run_node(client: &Client, cmd: NodeCommand) -> Result<(), CliError> {
    match cmd {
        NodeCommand::Set {
            name,
            ips,
            labels: pairs,
        } => {
            let req = wire::ClusterNode {
                name,
                ips,
                labels: labels(pairs),
            };
            client.node_set(&req).await?;
        }
        NodeCommand::Del { name } => client.node_del(&wire::ClusterNodeDel { name }).await?,
        NodeCommand::List { json } => {
            let nodes = client.nodes().await?;
            if json {
                print_json(&wire::ClusterNodes { nodes });
            } else {
                for n in nodes {
                    let ips: Vec<String> = n.ips.iter().map(ToString::to_string).collect();
                    let labels: Vec<String> =
                        n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    println!("{} {} {}", n.name, ips.join(","), labels.join(","));
                }
            }
        }
    }
    Ok(())
}

async fn run_admin(
    client: &Client,
    kind: wire::AdminKind,
    cmd: AdminCommand,
) -> Result<(), CliError> {
    match cmd {
        AdminCommand::Apply { file } => client.admin_policy_apply(read_netpol(&file)?).await?,
        AdminCommand::Del { name } => {
            client
                .admin_policy_del(&wire::AdminPolicyDel { kind, name })
                .await?;
        }
        AdminCommand::List { json } => {
            let admin_policies: Vec<_> = client
                .admin_policies()
                .await?
                .into_iter()
                .filter(|p| p.kind == kind.short())
                .collect();
            if json {
                print_json(&wire::AdminPolicies { admin_policies });
            } else {
                for p in admin_policies {
                    let priority = p
                        .priority
                        .map(|n| format!(" priority={n}"))
                        .unwrap_or_default();
                    println!(
                        "{}/{}{} ingress_rules={} egress_rules={} selected_pods={} flows={}",
                        p.kind,
                        p.name,
                        priority,
                        p.ingress_rules,
                        p.egress_rules,
                        p.selected_pods,
                        p.flows
                    );
                }
            }
        }
    }
    Ok(())
}

async fn run_netpol(client: &Client, cmd: NetpolCommand) -> Result<(), CliError> {
    match cmd {
        NetpolCommand::Apply { file } => client.netpol_apply(read_netpol(&file)?).await?,
        NetpolCommand::Del { namespace, name } => {
            client
                .netpol_del(&wire::NetPolDel { namespace, name })
                .await?;
        }
        NetpolCommand::List { json, stats } => {
            let reply = client.netpols_with(&wire::NetPolsQuery { stats }).await?;
            if json {
                print_json(&reply);
                return Ok(());
            }
            for p in &reply.netpols {
                println!(
                    "{}/{} types={} selected_pods={} flows={}",
                    p.namespace,
                    p.name,
                    p.policy_types.join(","),
                    p.selected_pods,
                    p.flows
                );
            }
            if let Some(rule_stats) = &reply.rule_stats {
                println!();
                print!("{}", rule_stats_table(rule_stats));
            }
        }
        NetpolCommand::Explain {
            from,
            to,
            port,
            json,
        } => {
            let query = wire::ExplainQuery {
                from,
                to,
                port: port.to_string(),
            };
            let explanation = client.netpol_explain(&query).await?;
            if json {
                print_json(&explanation);
            } else {
                print!("{}", explanation.render());
            }
        }
    }
    Ok(())
}

/// `kubectl label`'s changes as the API takes them.
fn label_edit(changes: Vec<LabelChange>) -> wire::LabelEdit {
    let mut edit = wire::LabelEdit::default();
    for change in changes {
        match change {
            LabelChange::Set(k, v) => {
                edit.set.insert(k, v);
            }
            LabelChange::Remove(k) => edit.remove.push(k),
        }
    }
    edit
}

/// A reply as the API gave it, indented.
/// The rule counters as a table: one rule a line, in the order the tiers judge.
pub(crate) fn rule_stats_table(stats: &wire::RuleSnapshot) -> String {
    let header = ["TIER", "POLICY", "RULE", "VERDICT", "PACKETS", "BYTES"].map(String::from);
    let rows: Vec<[String; 6]> = stats
        .rules
        .iter()
        .map(|r| {
            let n = &r.names;
            let mut policy = n.policy_label();
            if let Some(p) = n.priority {
                policy.push_str(&format!(" (priority {p})"));
            }
            let mut rule = match n.policy {
                None if n.is_named() => format!("{} {}", n.direction.as_str(), n.rule),
                _ => n.rule.clone(),
            };
            if let Some(name) = &n.rule_name {
                rule.push_str(&format!(" {name:?}"));
            }
            [
                n.tier.as_str().to_string(),
                policy,
                rule,
                n.verdict.as_str().to_string(),
                r.traffic.packets.to_string(),
                r.traffic.bytes.to_string(),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if rows.is_empty() {
        out.push_str("(no policy rule has a verdict flow on the switch)\n");
    }
    out
}

fn print_json(value: &impl serde::Serialize) {
    let value = serde_json::to_value(value).unwrap_or_default();
    println!(
        "{}",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    );
}

/// `k=v,k2=v2` (`-` for none).
fn label_text(labels: &wire::Labels) -> String {
    if labels.is_empty() {
        return "-".to_string();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn print_pod_status(status: &wire::PodStatus, json: bool) {
    if json {
        print_json(status);
        return;
    }
    let pod = &status.pod;
    println!("sandbox: {}", pod.sandbox);
    if let Some(veth) = &pod.veth {
        println!("veth: {veth}");
    }
    println!("ip: {}\nmac: {}\nvnid: {}", pod.ip, pod.mac, pod.vnid);
    println!("ofport: {}\nport: {}", pod.ofport, status.port);
    for flow in &status.missing_flows {
        println!("missing flow: {flow}");
    }
    match &status.counters {
        Some(c) => {
            let t = &c.traffic;
            println!("rx: {} packets, {} bytes", t.rx_packets, t.rx_bytes);
            println!("tx: {} packets, {} bytes", t.tx_packets, t.tx_bytes);
            println!("counters polled at: {}", polled_at(c.polled_at_unix_ms));
        }
        None => println!("counters: not polled yet (or pod_counters_interval = 0)"),
    }
}

/// A poll time as seconds since the epoch and how long ago it was.
fn polled_at(unix_ms: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let ago = now.saturating_sub(unix_ms) as f64 / 1e3;
    format!("{:.3} (unix seconds; {ago:.1} s ago)", unix_ms as f64 / 1e3)
}

fn print_status(status: &wire::StatusReply, json: bool) {
    if json {
        print_json(status);
        return;
    }
    let kubernetes = status.kubernetes.as_ref().map(|k| k.render_text());
    let status = serde_json::to_value(status).unwrap_or_default();
    if let Some(fields) = status.as_object() {
        for (key, value) in fields {
            match value {
                _ if key == "kubernetes" => print!("{}", kubernetes.as_deref().unwrap_or_default()),
                serde_json::Value::String(text) => println!("{key}: {text}"),
                other => println!("{key}: {other}"),
            }
        }
    }
}
