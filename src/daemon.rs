//! `ofnode run`: configuration, logging, the node controller and its control socket.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use tokio::sync::Notify;
use tracing::{error, info, warn};

use crate::api::server::{self, ApiOptions};
use crate::cluster::{ClusterSettings, Membership};
use crate::sdn::audit_log::AuditLogConfig;
use crate::sdn::{AuditRate, Node, NodeConfig};
use crate::tls::{TlsConfig, TlsFiles};
use crate::trace::VswitchdCtl;

/// `ofnode run` flags; each overrides the same key of the config file.
#[derive(Debug, Args, Default)]
pub struct RunArgs {
    /// A TOML file with any of the keys below (flags win over the file).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// OVSDB server: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT.
    #[arg(long, value_name = "TARGET")]
    pub ovsdb: Option<String>,
    /// The integration bridge.
    #[arg(long, value_name = "NAME")]
    pub bridge: Option<String>,
    /// OpenFlow: ptcp:PORT[:IP], pssl:PORT[:IP] or punix:PATH (the switch connects; ofnode sets
    /// the bridge's controller to it), or unix:PATH / tcp:HOST:PORT / ssl:HOST:PORT (ofnode
    /// connects, e.g. to br0.mgmt).
    #[arg(long, value_name = "TARGET")]
    pub openflow: Option<String>,
    /// The control socket: the command line's global `--api` (or `OFNODE_API`).
    #[arg(skip)]
    pub api: Option<PathBuf>,
    /// Where the desired state is persisted.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// ovs-vswitchd's control socket for traces: a path, or a daemon name in the OVS run dir [default: ovs-vswitchd].
    #[arg(long, value_name = "PATH|NAME")]
    pub vswitchd_ctl: Option<String>,
    /// br0's datapath: system (kernel module) or netdev (userspace). Default: system when the
    /// openvswitch kernel module is loaded, netdev otherwise.
    #[arg(long, value_name = "TYPE", value_parser = ["system", "netdev"])]
    pub datapath_type: Option<String>,
    /// MTU of tun0 (the cluster MTU).
    #[arg(long, value_name = "BYTES")]
    pub mtu: Option<u32>,
    /// Leave tun0's address, routes and IP forwarding alone (the host network is managed elsewhere).
    #[arg(long)]
    pub no_host_network: bool,
    /// Never purge the datapath's cached flows after a change, even on an Open vSwitch with
    /// the stale-megaflow bug (a package with the fix backported).
    #[arg(long)]
    pub no_stale_megaflow_purge: bool,
    /// Seconds between polls of the per-pod traffic counters (0: off) [default: 10].
    #[arg(long, value_name = "SECS")]
    pub pod_counters_interval: Option<u64>,
    /// Seconds between polls of the per-policy-rule counters /metrics shows (0: off) [default: 60].
    #[arg(long, value_name = "SECS")]
    pub rule_counters_interval: Option<u64>,
    /// Milliseconds an OpenFlow request may wait for its reply, 100 to 3600000 [default: 60000].
    #[arg(long, value_name = "MS")]
    pub openflow_request_timeout_ms: Option<u64>,
    /// Our TLS private key (PEM), for ssl:/pssl: targets (as ovs-vswitchd's --private-key).
    #[arg(long, value_name = "FILE", requires_all = ["certificate", "ca_cert"])]
    pub private_key: Option<PathBuf>,
    /// Our TLS certificate (PEM), signed by a CA the peers trust.
    #[arg(long, value_name = "FILE", requires_all = ["private_key", "ca_cert"])]
    pub certificate: Option<PathBuf>,
    /// The CA certificate (PEM) peers' certificates must be signed by.
    #[arg(long, value_name = "FILE", requires_all = ["private_key", "certificate"])]
    pub ca_cert: Option<PathBuf>,
    /// Check the config file and flags, print what the daemon would use, and exit (0: valid).
    #[arg(long)]
    pub check_config: bool,
}

/// The config file. Unknown keys are an error: a typo must not silently fall back to a default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub ovsdb: Option<String>,
    pub bridge: Option<String>,
    pub openflow: Option<String>,
    pub api: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    /// ovs-vswitchd's control socket (traces): a path, or a daemon name whose pidfile is in
    /// the OVS run directory (`OVS_RUNDIR`, else the OVSDB socket's directory).
    pub vswitchd_ctl: Option<String>,
    pub datapath_type: Option<String>,
    pub mtu: Option<u32>,
    pub manage_host_network: Option<bool>,
    /// Largest control API request body, in bytes.
    pub api_max_body: Option<usize>,
    /// An optional kernel VXLAN device (flannel-style) kept in line with the host subnets:
    /// `[vxlan]` with `address`, `vni`, `vtep_device`, `mode = "static" | "miss"`, ….
    pub vxlan: Option<crate::netlink::VxlanSettings>,
    /// High availability with peers on the same bridge: `[ha]` with `id`, `controllers`
    /// (every peer's target as the switch dials it), `heartbeat_ms`, `takeover_ms`.
    pub ha: Option<crate::sdn::HaConfig>,
    /// Watch br0 for flow changes made behind ofnode's back and undo them (default true).
    pub drift_repair: Option<bool>,
    /// Purge the datapath's cached flows after every change on an Open vSwitch with the
    /// stale-megaflow bug (default true).
    pub stale_megaflow_purge: Option<bool>,
    /// Seconds between polls of the per-pod traffic counters; 0 turns them off (default 10).
    pub pod_counters_interval: Option<u64>,
    /// Most pods whose counters /metrics exports (default 1000).
    pub pod_metrics_max: Option<usize>,
    /// Seconds between polls of the per-policy-rule counters /metrics shows; 0 turns the poll
    /// off (`netpol list --stats` still asks the switch) (default 60).
    pub rule_counters_interval: Option<u64>,
    /// Most policy rule series /metrics exports; the other rules are summed into one series
    /// labelled `policy="(other)"` (default 1000).
    pub rule_metrics_max: Option<usize>,
    /// Audit packet-ins per second per audited policy rule: each rule's meter (default 100).
    pub audit_rate: Option<u32>,
    /// The audit meters' burst, in packets (default a tenth of `audit_rate`, at least 1).
    pub audit_burst: Option<u32>,
    /// Milliseconds any one OpenFlow request may wait for its reply (default 60000).
    pub openflow_request_timeout_ms: Option<u64>,
    /// Milliseconds of silence after which the switch is probed with an echo (default 5000).
    pub openflow_echo_interval_ms: Option<u64>,
    /// Milliseconds a probe may go unanswered before the switch is declared dead (default 5000).
    pub openflow_echo_timeout_ms: Option<u64>,
    /// Membership of a cluster through etcd: `[cluster]` with `endpoints`, `network`,
    /// `subnet_prefix_len`, `service_network`, `public_ip`, ….
    pub cluster: Option<ClusterSettings>,
    /// `[tls]` with `private_key`, `certificate`, `ca_cert` (PEM files), for ssl:/pssl: targets.
    pub tls: Option<TlsFiles>,
    /// Following a Kubernetes cluster: `[kubernetes]` with `kubeconfig` (absent: in-cluster),
    /// `node_name`, `cluster_network`, `service_network`, `mode`, `pod_wait_secs`.
    pub kubernetes: Option<crate::kube::KubeSettings>,
    /// The policy audit log's file (absent: events are counted, not written to a file).
    pub audit_log: Option<PathBuf>,
    /// Size in bytes at which the audit log is rotated (default 104857600, at least 4096).
    pub audit_log_max_bytes: Option<u64>,
    /// Rotated audit log files kept, `PATH.1` … (default 5, at most 100).
    pub audit_log_keep: Option<u32>,
    /// `json` (default) or `text`.
    pub audit_log_format: Option<String>,
    /// Also send each audit line to syslog (RFC 5424): `unix:/dev/log` or `udp:IP:PORT`.
    pub audit_syslog: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot read config file {path}: {source}")]
    ConfigRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {source}")]
    ConfigParse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("config: {0}")]
    ConfigInvalid(String),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("node controller: {0}")]
    Node(#[from] crate::sdn::Error),
    #[error(transparent)]
    Api(#[from] server::ServeError),
    #[error("cluster: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error("kubernetes: {0}")]
    Kube(#[from] crate::kube::KubeError),
}

pub const DEFAULT_OVSDB: &str = "unix:/run/openvswitch/db.sock";
pub const DEFAULT_OPENFLOW: &str = "ptcp:6653:127.0.0.1";
pub const DEFAULT_STATE_DIR: &str = "/var/lib/ofnode";

/// What the daemon runs with, after flags, file and defaults are merged.
#[derive(Debug)]
pub struct Settings {
    pub node: NodeConfig,
    pub api: ApiOptions,
    pub cluster: Option<ClusterSettings>,
    pub kubernetes: Option<crate::kube::KubeSettings>,
}

pub fn load_config(path: &Path) -> Result<ConfigFile, DaemonError> {
    let text = std::fs::read_to_string(path).map_err(|source| DaemonError::ConfigRead {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| DaemonError::ConfigParse {
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

impl Settings {
    pub fn resolve(args: RunArgs) -> Result<Settings, DaemonError> {
        let file = match &args.config {
            Some(path) => load_config(path)?,
            None => ConfigFile::default(),
        };
        let mtu = args.mtu.or(file.mtu).unwrap_or(1450);
        if !(576..=65_535).contains(&mtu) {
            return Err(DaemonError::ConfigInvalid(format!(
                "mtu {mtu} is outside 576..=65535"
            )));
        }
        if let Some(kind) = file.datapath_type.as_deref() {
            if kind != "system" && kind != "netdev" {
                return Err(DaemonError::ConfigInvalid(format!(
                    "datapath_type {kind:?} is neither \"system\" nor \"netdev\""
                )));
            }
        }
        if let Some(cluster) = &file.cluster {
            cluster.validate()?;
        }
        if let Some(kubernetes) = &file.kubernetes {
            if file.cluster.is_some() {
                return Err(DaemonError::ConfigInvalid(
                    "[cluster] and [kubernetes] both say where the node's subnet comes from: keep one"
                        .into(),
                ));
            }
            kubernetes
                .validate()
                .map_err(|e| DaemonError::Kube(e.into()))?;
        }
        let ovsdb = args
            .ovsdb
            .clone()
            .or(file.ovsdb.clone())
            .unwrap_or_else(|| DEFAULT_OVSDB.into());
        let openflow = args
            .openflow
            .clone()
            .or(file.openflow.clone())
            .unwrap_or_else(|| DEFAULT_OPENFLOW.into());
        let tls = match tls_files(&args, file.tls.clone()) {
            Some(files) => Some(TlsConfig::load(&files)?),
            None => {
                refuse_tls_targets_without_files(&[&ovsdb, &openflow])?;
                None
            }
        };
        let defaults = ApiOptions::default();
        let audit_log = audit_log(&file)?;
        let vswitchd_ctl = VswitchdCtl::new(args.vswitchd_ctl.or(file.vswitchd_ctl), &ovsdb);
        let mut node = NodeConfig {
            vswitchd_ctl: vswitchd_ctl.clone(),
            bridge: args.bridge.or(file.bridge).unwrap_or_else(|| "br0".into()),
            datapath_type: args.datapath_type.or(file.datapath_type),
            mtu,
            manage_host_network: !args.no_host_network && file.manage_host_network.unwrap_or(true),
            vxlan: file.vxlan,
            ha: file.ha,
            tls,
            ..NodeConfig::new(
                ovsdb,
                openflow,
                args.state_dir
                    .or(file.state_dir)
                    .unwrap_or_else(|| DEFAULT_STATE_DIR.into()),
            )
        };
        node.drift.repair = file.drift_repair.unwrap_or(true);
        node.stale_megaflow_purge =
            !args.no_stale_megaflow_purge && file.stale_megaflow_purge.unwrap_or(true);
        if let Some(secs) = args.pod_counters_interval.or(file.pod_counters_interval) {
            node.pod_counters_interval = poll_interval("pod_counters_interval", secs)?;
        }
        if let Some(secs) = args.rule_counters_interval.or(file.rule_counters_interval) {
            node.rule_counters_interval = poll_interval("rule_counters_interval", secs)?;
        }
        if let Some(max) = file.rule_metrics_max {
            node.rule_metrics_max = max;
        }
        if let Some(max) = file.pod_metrics_max {
            node.pod_metrics_max = max;
        }
        node.audit_log = audit_log;
        node.audit = audit_rate(file.audit_rate, file.audit_burst)?;
        let timing = [
            (
                "openflow_request_timeout_ms",
                args.openflow_request_timeout_ms
                    .or(file.openflow_request_timeout_ms),
                &mut node.request_timeout,
            ),
            (
                "openflow_echo_interval_ms",
                file.openflow_echo_interval_ms,
                &mut node.echo_interval,
            ),
            (
                "openflow_echo_timeout_ms",
                file.openflow_echo_timeout_ms,
                &mut node.echo_timeout,
            ),
        ];
        for (key, value, setting) in timing {
            if let Some(ms) = value {
                *setting = openflow_millis(key, ms)?;
            }
        }
        Ok(Settings {
            node,
            api: ApiOptions {
                socket: args.api.or(file.api).unwrap_or(defaults.socket),
                max_body: file.api_max_body.unwrap_or(defaults.max_body),
                mode: defaults.mode,
                vswitchd_ctl,
            },
            cluster: file.cluster,
            kubernetes: file.kubernetes,
        })
    }
}

/// The audit log's settings from the file's `audit_*` keys; the node's name in its lines is
/// the one the node has in its `[kubernetes]` or `[cluster]` section, else `$NODE_NAME` or
/// the host name.
fn audit_log(file: &ConfigFile) -> Result<AuditLogConfig, DaemonError> {
    let defaults = AuditLogConfig::default();
    let node_name = file
        .kubernetes
        .as_ref()
        .and_then(|kube| kube.node_name().ok())
        .or_else(|| file.cluster.as_ref().map(ClusterSettings::node_name))
        .unwrap_or(defaults.node_name.clone());
    let cfg = AuditLogConfig {
        path: file.audit_log.clone(),
        max_bytes: file.audit_log_max_bytes.unwrap_or(defaults.max_bytes),
        keep: file.audit_log_keep.unwrap_or(defaults.keep),
        format: match &file.audit_log_format {
            Some(format) => format.parse().map_err(DaemonError::ConfigInvalid)?,
            None => defaults.format,
        },
        syslog: match &file.audit_syslog {
            Some(target) => Some(target.parse().map_err(DaemonError::ConfigInvalid)?),
            None => None,
        },
        node_name,
        ..defaults
    };
    cfg.check().map_err(DaemonError::ConfigInvalid)?;
    Ok(cfg)
}

/// The longest poll interval accepted: a day (a longer one is a typo more likely than a wish).
const MAX_POLL_INTERVAL: u64 = 86_400;

/// A counter poll's interval (`key`, in seconds).
fn poll_interval(key: &str, secs: u64) -> Result<Duration, DaemonError> {
    if secs > MAX_POLL_INTERVAL {
        return Err(DaemonError::ConfigInvalid(format!(
            "{key} {secs} is above {MAX_POLL_INTERVAL} seconds (0 turns the counters off)"
        )));
    }
    Ok(Duration::from_secs(secs))
}

/// The most audit packet-ins per second per rule: the switch delivers a few thousand in all,
/// so more is a typo more likely than a wish.
const MAX_AUDIT_RATE: u32 = 1_000_000;

/// The audit meters' rate and burst from the config's `audit_rate` and `audit_burst`.
fn audit_rate(rate: Option<u32>, burst: Option<u32>) -> Result<AuditRate, DaemonError> {
    let rate = rate.unwrap_or(AuditRate::default().rate);
    if !(1..=MAX_AUDIT_RATE).contains(&rate) {
        return Err(DaemonError::ConfigInvalid(format!(
            "audit_rate {rate}: must be from 1 to {MAX_AUDIT_RATE} packet-ins per second per rule"
        )));
    }
    let burst = burst.unwrap_or(AuditRate::default_burst(rate));
    if !(1..=MAX_AUDIT_RATE).contains(&burst) {
        return Err(DaemonError::ConfigInvalid(format!(
            "audit_burst {burst}: must be from 1 to {MAX_AUDIT_RATE} packets"
        )));
    }
    Ok(AuditRate { rate, burst })
}

/// The range of the OpenFlow timing keys: at least 100 ms (less fails on any busy machine), at
/// most an hour (more is a typo more likely than a wish).
const OPENFLOW_MILLIS: std::ops::RangeInclusive<u64> = 100..=3_600_000;

fn openflow_millis(key: &str, ms: u64) -> Result<Duration, DaemonError> {
    if !OPENFLOW_MILLIS.contains(&ms) {
        return Err(DaemonError::ConfigInvalid(format!(
            "{key} {ms} is outside {}..={} milliseconds",
            OPENFLOW_MILLIS.start(),
            OPENFLOW_MILLIS.end()
        )));
    }
    Ok(Duration::from_millis(ms))
}

/// The TLS files from the flags (all three: clap checks) or else the `[tls]` section.
fn tls_files(args: &RunArgs, file: Option<TlsFiles>) -> Option<TlsFiles> {
    let from_flags = match (&args.private_key, &args.certificate, &args.ca_cert) {
        (Some(key), Some(cert), Some(ca)) => Some(TlsFiles {
            private_key: key.clone(),
            certificate: cert.clone(),
            ca_cert: ca.clone(),
        }),
        _ => None,
    };
    from_flags.or(file)
}

/// An `ssl:`/`pssl:` target without TLS files is refused before anything starts.
fn refuse_tls_targets_without_files(targets: &[&str]) -> Result<(), DaemonError> {
    match targets
        .iter()
        .find(|t| t.starts_with("ssl:") || t.starts_with("pssl:"))
    {
        Some(target) => Err(DaemonError::ConfigInvalid(format!(
            "{target} needs TLS files: give --private-key, --certificate and --ca-cert \
             (or a [tls] section with private_key, certificate, ca_cert)"
        ))),
        None => Ok(()),
    }
}

/// `ofnode run --check-config`: everything the daemon would refuse before it starts (the
/// config file, the flags, the TLS files, the targets' syntax, `[ha]`, `[cluster]`), without
/// touching a socket; the settings it would run with, one `key: value` a line.
pub fn check_config(args: RunArgs) -> Result<String, DaemonError> {
    let source = match &args.config {
        Some(path) => format!("config file {}", path.display()),
        None => "no config file (flags and defaults)".to_string(),
    };
    let settings = Settings::resolve(args)?;
    Node::check_config(&settings.node).map_err(|e| DaemonError::ConfigInvalid(e.to_string()))?;
    let node = &settings.node;
    let kubernetes = match &settings.kubernetes {
        Some(kube) => {
            let name = kube.node_name().map_err(|e| DaemonError::Kube(e.into()))?;
            let source = match &kube.kubeconfig {
                Some(path) => format!("kubeconfig {}", path.display()),
                None => "in-cluster service account".to_string(),
            };
            vec![format!(
                "kubernetes: {source}, node {name}, mode {:?}, cluster network {}, service network {}, pod_wait_secs {}",
                kube.mode, kube.cluster_network, kube.service_network, kube.pod_wait_secs
            )]
        }
        None => Vec::new(),
    };
    let lines = [
        format!("{source}: ok"),
        format!("bridge: {}", node.bridge),
        format!("ovsdb: {}", node.ovsdb),
        format!("openflow: {}", node.openflow),
        format!("api: {}", settings.api.socket.display()),
        format!("state_dir: {}", node.state_dir.display()),
        format!("mtu: {}", node.mtu),
        format!("stale_megaflow_purge: {}", node.stale_megaflow_purge),
        format!(
            "audit_log: {} (node name {})",
            node.audit_log.describe(),
            node.audit_log.node_name
        ),
        format!(
            "pod_counters_interval: {}",
            node.pod_counters_interval.as_secs()
        ),
        format!("pod_metrics_max: {}", node.pod_metrics_max),
        format!(
            "rule_counters_interval: {}",
            node.rule_counters_interval.as_secs()
        ),
        format!("rule_metrics_max: {}", node.rule_metrics_max),
        format!(
            "audit_rate: {} packet-ins/s per audited rule, audit_burst: {}",
            node.audit.rate, node.audit.burst
        ),
        format!(
            "openflow_request_timeout_ms: {}",
            node.request_timeout.as_millis()
        ),
        format!(
            "openflow_echo_interval_ms: {}",
            node.echo_interval.as_millis()
        ),
        format!(
            "openflow_echo_timeout_ms: {}",
            node.echo_timeout.as_millis()
        ),
    ];
    Ok(lines
        .into_iter()
        .chain(kubernetes)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// How long requests in flight at SIGTERM may take to finish. An operation waits at most
/// `connect_timeout` (10 s) for the switch, so this is reached only by a request that hangs;
/// its client then sees its connection closed without an answer.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Runs the daemon until SIGINT or SIGTERM, then stops in order: the API socket is removed
/// (a new client is told no daemon runs), requests in flight finish (up to
/// [`SHUTDOWN_GRACE`]), the node finishes what is queued (each batch is journaled with fsync
/// before it is answered, so the journal is complete when the node has stopped), and `run`
/// returns `Ok`: exit status 0. The switch keeps every flow (a secure-mode bridge does not
/// flush them when its controller goes away), and the next start changes nothing on it.
pub async fn run(args: RunArgs) -> Result<(), DaemonError> {
    let settings = Settings::resolve(args)?;
    info!(
        bridge = %settings.node.bridge,
        ovsdb = %settings.node.ovsdb,
        openflow = %settings.node.openflow,
        api = %settings.api.socket.display(),
        state_dir = %settings.node.state_dir.display(),
        "ofnode starting"
    );
    // Bind first: a second daemon on the same socket must fail before it touches the switch.
    let listener = server::bind(&settings.api).await?;
    let state_dir = settings.node.state_dir.clone();
    let node = Node::start(settings.node).await?;
    let membership = match settings.cluster {
        Some(cluster) => Some(Membership::join(&node, cluster, &state_dir).await?),
        None => None,
    };
    let following = match &settings.kubernetes {
        Some(kube) => Some(crate::kube::Following::start(&node, kube).await?),
        None => None,
    };
    info!(api = %settings.api.socket.display(), "control API listening");
    let signalled = Arc::new(Notify::new());
    let stop_serving = {
        let (signalled, socket) = (signalled.clone(), settings.api.socket.clone());
        async move {
            shutdown_signal().await;
            remove_socket(&socket);
            info!("not taking new requests; finishing those in flight");
            signalled.notify_one();
        }
    };
    let serving = server::serve(
        listener,
        node.clone(),
        server::Sources {
            membership,
            following,
        },
        &settings.api,
        stop_serving,
    );
    let result = tokio::select! {
        result = serving => result,
        () = grace_after(&signalled) => {
            warn!(grace = ?SHUTDOWN_GRACE, "requests still in flight after the grace period: abandoning them");
            Ok(())
        }
    };
    remove_socket(&settings.api.socket);
    node.shutdown().await;
    if let Err(err) = &result {
        error!("{err}");
    }
    info!("ofnode stopped");
    result.map_err(DaemonError::from)
}

/// Resolves `SHUTDOWN_GRACE` after the stop signal.
async fn grace_after(signalled: &Notify) {
    signalled.notified().await;
    tokio::time::sleep(SHUTDOWN_GRACE).await;
}

fn remove_socket(socket: &Path) {
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => warn!(socket = %socket.display(), error = %e, "cannot remove the API socket"),
    }
}

/// Resolves on SIGTERM or SIGINT: the daemon's and the controller's orderly stop.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            error!("cannot watch SIGTERM: {err}; stopping only on SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
    }
}

#[cfg(test)]
mod tests;
