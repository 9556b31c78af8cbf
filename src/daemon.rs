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
use crate::sdn::{Node, NodeConfig};
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
    /// Seconds between polls of the per-pod traffic counters (0: off) [default: 10].
    #[arg(long, value_name = "SECS")]
    pub pod_counters_interval: Option<u64>,
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
    /// Seconds between polls of the per-pod traffic counters; 0 turns them off (default 10).
    pub pod_counters_interval: Option<u64>,
    /// Most pods whose counters /metrics exports (default 1000).
    pub pod_metrics_max: Option<usize>,
    /// Membership of a cluster through etcd: `[cluster]` with `endpoints`, `network`,
    /// `subnet_prefix_len`, `service_network`, `public_ip`, ….
    pub cluster: Option<ClusterSettings>,
    /// `[tls]` with `private_key`, `certificate`, `ca_cert` (PEM files), for ssl:/pssl: targets.
    pub tls: Option<TlsFiles>,
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
        let vswitchd_ctl = VswitchdCtl::new(args.vswitchd_ctl.or(file.vswitchd_ctl), &ovsdb);
        let mut node = NodeConfig {
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
        if let Some(secs) = args.pod_counters_interval.or(file.pod_counters_interval) {
            node.pod_counters_interval = pod_counters_interval(secs)?;
        }
        if let Some(max) = file.pod_metrics_max {
            node.pod_metrics_max = max;
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
        })
    }
}

/// The longest poll interval accepted: a day (a longer one is a typo more likely than a wish).
const MAX_POD_COUNTERS_INTERVAL: u64 = 86_400;

fn pod_counters_interval(secs: u64) -> Result<Duration, DaemonError> {
    if secs > MAX_POD_COUNTERS_INTERVAL {
        return Err(DaemonError::ConfigInvalid(format!(
            "pod_counters_interval {secs} is above {MAX_POD_COUNTERS_INTERVAL} seconds (0 turns the counters off)"
        )));
    }
    Ok(Duration::from_secs(secs))
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
    let lines = [
        format!("{source}: ok"),
        format!("bridge: {}", node.bridge),
        format!("ovsdb: {}", node.ovsdb),
        format!("openflow: {}", node.openflow),
        format!("api: {}", settings.api.socket.display()),
        format!("state_dir: {}", node.state_dir.display()),
        format!("mtu: {}", node.mtu),
    ];
    Ok(lines.join("\n"))
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
        membership,
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

async fn shutdown_signal() {
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
mod tests {
    use super::*;

    #[test]
    fn pod_counter_keys_are_read_flags_win_and_a_bad_interval_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ofnode.toml");
        std::fs::write(&path, "pod_counters_interval = 0\npod_metrics_max = 5\n").unwrap();
        let file = |flag: Option<u64>| {
            Settings::resolve(RunArgs {
                config: Some(path.clone()),
                pod_counters_interval: flag,
                ..RunArgs::default()
            })
        };
        let settings = file(None).unwrap();
        assert_eq!(settings.node.pod_counters_interval, Duration::ZERO);
        assert_eq!(settings.node.pod_metrics_max, 5);
        let flag = file(Some(2)).unwrap();
        assert_eq!(flag.node.pod_counters_interval, Duration::from_secs(2));
        let defaults = Settings::resolve(RunArgs::default()).unwrap();
        assert_eq!(defaults.node.pod_counters_interval, Duration::from_secs(10));
        assert_eq!(defaults.node.pod_metrics_max, 1_000);
        let err = file(Some(86_401)).unwrap_err().to_string();
        assert!(err.contains("pod_counters_interval 86401"), "{err}");
    }

    #[test]
    fn tls_targets_need_tls_files() {
        let args = RunArgs {
            openflow: Some("pssl:6653".into()),
            ..RunArgs::default()
        };
        let err = Settings::resolve(args).unwrap_err().to_string();
        assert!(err.contains("pssl:6653 needs TLS files"), "{err}");
        let args = RunArgs {
            ovsdb: Some("ssl:127.0.0.1:6640".into()),
            ..RunArgs::default()
        };
        let err = Settings::resolve(args).unwrap_err().to_string();
        assert!(err.contains("ssl:127.0.0.1:6640 needs TLS files"), "{err}");
    }

    #[test]
    fn tls_section_is_read_and_its_files_checked() {
        let pki = ofnode_harness::Pki::new("config CA").unwrap();
        let peer = pki.issue("node").unwrap();
        let path = pki.dir().join("ofnode.toml");
        let toml = format!(
            "openflow = \"pssl:6653\"\n[tls]\nprivate_key = {:?}\ncertificate = {:?}\nca_cert = {:?}\n",
            peer.private_key, peer.certificate, peer.ca_cert
        );
        std::fs::write(&path, toml).unwrap();
        let settings = Settings::resolve(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
        .unwrap();
        let tls = settings.node.tls.expect("TLS configured");
        assert_eq!(tls.files().certificate, peer.certificate);
        // A flag set wins over the file; a bad file in it is named.
        let err = Settings::resolve(RunArgs {
            config: Some(path),
            private_key: Some(pki.dir().join("missing-key.pem")),
            certificate: Some(peer.certificate.clone()),
            ca_cert: Some(peer.ca_cert.clone()),
            ..RunArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("missing-key.pem"), "{err}");
    }

    #[test]
    fn flags_override_file_and_defaults_fill_in() {
        let dir = std::env::temp_dir().join(format!("ofnode-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ofnode.toml");
        std::fs::write(
            &path,
            "bridge = \"br-int\"\nmtu = 1400\nstate_dir = \"/tmp/x\"\n",
        )
        .unwrap();
        let args = RunArgs {
            config: Some(path.clone()),
            mtu: Some(9000),
            ..RunArgs::default()
        };
        let settings = Settings::resolve(args).unwrap();
        assert_eq!(settings.node.bridge, "br-int");
        assert_eq!(settings.node.mtu, 9000);
        assert_eq!(settings.node.ovsdb, DEFAULT_OVSDB);
        assert_eq!(settings.node.state_dir, PathBuf::from("/tmp/x"));
        std::fs::write(
            &path,
            "[vxlan]\naddress = \"10.128.0.1/14\"\nvni = 7\nmode = \"miss\"\n",
        )
        .unwrap();
        let settings = Settings::resolve(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
        .unwrap();
        let vxlan = settings.node.vxlan.expect("the [vxlan] section");
        assert_eq!(vxlan.vni, 7);
        std::fs::write(
            &path,
            "[ha]\nid = 2\ncontrollers = [\"tcp:192.0.2.1:6653\", \"tcp:192.0.2.2:6653\"]\n",
        )
        .unwrap();
        let settings = Settings::resolve(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
        .unwrap();
        let ha = settings.node.ha.expect("the [ha] section");
        assert_eq!((ha.id, ha.controllers.len()), (2, 2));
        assert_eq!((ha.heartbeat_ms, ha.takeover_ms), (200, 1000));
        let cluster = "[cluster]\nendpoints = [\"http://192.0.2.1:2379\"]\n\
                       network = \"10.128.0.0/14\"\nservice_network = \"172.30.0.0/16\"\n\
                       public_ip = \"192.0.2.11\"\n";
        std::fs::write(&path, format!("{cluster}subnet_prefix_len = 23\n")).unwrap();
        let settings = Settings::resolve(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
        .unwrap();
        assert_eq!(settings.cluster.expect("[cluster]").subnet_prefix_len, 23);
        std::fs::write(&path, format!("{cluster}subnet_prefix_len = 8\n")).unwrap();
        let err = Settings::resolve(RunArgs {
            config: Some(path.clone()),
            ..RunArgs::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("cluster.subnet_prefix_len 8"),
            "{err}"
        );
        std::fs::write(&path, "brige = \"typo\"\n").unwrap();
        let err = Settings::resolve(RunArgs {
            config: Some(path),
            ..RunArgs::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
