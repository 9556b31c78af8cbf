//! An `ofnode run` daemon started by a test inside an OVS namespace; killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::ovs::Ovs;
use crate::process::{pid_alive, tail_lines, terminate_child, CommandError};

/// A running `ofnode run`. Its log goes to `<state dir>/ofnode.log`.
#[derive(Debug)]
pub struct Daemon {
    child: Option<Child>,
    binary: PathBuf,
    args: Vec<String>,
    netns: String,
    pub api: PathBuf,
    pub state_dir: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `binary run` in `ovs`'s namespace against its OVSDB, passive OpenFlow on
    /// 127.0.0.1:6653 of that namespace, with the API socket and state under `ovs.dir()/ofnode`.
    /// `extra` is appended to the command line (e.g. `--mtu 1400`).
    pub fn start(ovs: &Ovs, binary: &Path, extra: &[&str]) -> Result<Daemon, CommandError> {
        Daemon::start_named(ovs, binary, "ofnode", "ptcp:6653:127.0.0.1", extra)
    }

    /// As [`Daemon::start`], with another `--openflow` target (e.g. `pssl:6653:127.0.0.1`).
    pub fn start_with_openflow(
        ovs: &Ovs,
        binary: &Path,
        openflow: &str,
        extra: &[&str],
    ) -> Result<Daemon, CommandError> {
        Daemon::start_named(ovs, binary, "ofnode", openflow, extra)
    }

    /// `start` for one of several daemons on the same OVS (high availability): its API
    /// socket, state and log under `ovs.dir()/<name>`, OpenFlow on `openflow`.
    pub fn start_named(
        ovs: &Ovs,
        binary: &Path,
        name: &str,
        openflow: &str,
        extra: &[&str],
    ) -> Result<Daemon, CommandError> {
        let root = ovs.dir().join(name);
        let state_dir = root.join("state");
        std::fs::create_dir_all(&state_dir)
            .map_err(|e| CommandError::Other(format!("create {}: {e}", state_dir.display())))?;
        let api = root.join("ofnode.sock");
        let mut args: Vec<String> = vec![
            "run".into(),
            "--ovsdb".into(),
            ovs.db_target(),
            "--openflow".into(),
            openflow.into(),
            "--api".into(),
            api.display().to_string(),
            "--state-dir".into(),
            state_dir.display().to_string(),
            "--datapath-type".into(),
            "netdev".into(),
            // The private vswitchd's control socket is not at a pidfile-named default path.
            "--vswitchd-ctl".into(),
            ovs.vswitchd_ctl().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut daemon = Daemon {
            child: None,
            binary: binary.to_path_buf(),
            args,
            netns: ovs.netns().name().to_string(),
            api,
            log: root.join("ofnode.log"),
            state_dir,
        };
        daemon.spawn()?;
        Ok(daemon)
    }

    /// (Re)starts the process with the same arguments and waits for its API socket to answer.
    pub fn spawn(&mut self) -> Result<(), CommandError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| CommandError::Other(format!("open {}: {e}", self.log.display())))?;
        let log_err = log
            .try_clone()
            .map_err(|e| CommandError::Other(format!("dup log: {e}")))?;
        let _ = std::fs::remove_file(&self.api);
        // `ip netns exec` execs the program after entering the namespace: the child's PID is
        // the daemon's own.
        let child = Command::new("ip")
            .args(["netns", "exec", &self.netns])
            .arg(&self.binary)
            .args(&self.args)
            .env(
                "OFNODE_LOG",
                std::env::var("OFNODE_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|source| CommandError::Spawn {
                command: format!("ip netns exec {} {}", self.netns, self.binary.display()),
                source,
            })?;
        // Record the PID where the stale-state reaper looks for it.
        if let Some(root) = self.api.parent() {
            let _ = std::fs::write(root.join("ofnode.pid"), child.id().to_string());
        }
        self.child = Some(child);
        self.wait_api(Duration::from_secs(15))
    }

    fn wait_api(&mut self, timeout: Duration) -> Result<(), CommandError> {
        let deadline = Instant::now() + timeout;
        loop {
            if std::os::unix::net::UnixStream::connect(&self.api).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(CommandError::Other(format!(
                        "ofnode exited ({status}) before its API came up; log:\n{}",
                        self.log_tail(30)
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(CommandError::Other(format!(
                    "ofnode API {} not up within {timeout:?}; log:\n{}",
                    self.api.display(),
                    self.log_tail(30)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child
            .as_ref()
            .map(Child::id)
            .filter(|pid| pid_alive(*pid))
    }

    /// SIGKILL, as a crash: no shutdown path runs.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, and the exit status once it has stopped by itself within `limit`; after that
    /// it is killed (SIGKILL) and this is an error.
    pub fn terminate(&mut self, limit: Duration) -> Result<ExitStatus, CommandError> {
        let Some(mut child) = self.child.take() else {
            return Err(CommandError::Other("ofnode is not running".into()));
        };
        // SAFETY: kill(2) has no memory-safety preconditions; the PID is our own child's, not
        // yet reaped, so it cannot have been recycled.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommandError::Other(format!(
                    "ofnode did not stop within {limit:?} of SIGTERM; log:\n{}",
                    self.log_tail(30)
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the daemon (SIGTERM), then starts it again with `extra` flags added to the ones
    /// it ran with; the state on disk carries over.
    pub fn restart_with(&mut self, extra: &[&str]) -> Result<(), CommandError> {
        self.stop();
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self.spawn()
    }

    /// SIGTERM and wait: the orderly stop.
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            terminate_child(child, Duration::from_secs(5));
        }
    }

    /// Runs the CLI (`binary ARGS… --api SOCK`) and returns its stdout, or its stderr as error.
    pub fn cli(&self, args: &[&str]) -> Result<String, CommandError> {
        crate::process::run_ok(
            Command::new(&self.binary)
                .args(args)
                .arg("--api")
                .arg(&self.api),
        )
    }

    /// `ofnode status --json`, parsed.
    pub fn status_json(&self) -> Result<serde_json::Value, CommandError> {
        let text = self.cli(&["status", "--json"])?;
        serde_json::from_str(&text)
            .map_err(|e| CommandError::Other(format!("ofnode status --json: {e}: {text}")))
    }

    /// Polls `ofnode status --json` (every 20 ms) until `ready` accepts it; returns that status
    /// and how long it took. After `limit`, an error with the last status and the log's tail.
    pub fn wait_status(
        &self,
        limit: Duration,
        what: &str,
        ready: impl Fn(&serde_json::Value) -> bool,
    ) -> Result<(serde_json::Value, Duration), CommandError> {
        let started = Instant::now();
        loop {
            let status = self.status_json();
            if let Ok(status) = &status {
                if ready(status) {
                    return Ok((status.clone(), started.elapsed()));
                }
            }
            if started.elapsed() >= limit {
                return Err(CommandError::Other(format!(
                    "no {what} within {limit:?}: {status:?}\n{}",
                    self.log_tail(30)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `ofnode pod add` of pod `pod` (`NAMESPACE/NAME`) on `veth` (a port-to-be in the
    /// daemon's namespace) with `ip`, `mac`, `sandbox` (64 hex digits) in `vnid`; its OpenFlow
    /// port.
    pub fn pod_add(
        &self,
        pod: &str,
        veth: &str,
        ip: &str,
        mac: &str,
        sandbox: &str,
        vnid: u32,
    ) -> Result<u16, CommandError> {
        let vnid = vnid.to_string();
        let out = self.cli(&[
            "pod",
            "add",
            "--pod",
            pod,
            "--veth",
            veth,
            "--ip",
            ip,
            "--mac",
            mac,
            "--sandbox",
            sandbox,
            "--vnid",
            &vnid,
        ])?;
        out.trim().parse().map_err(|_| {
            CommandError::Other(format!("`ofnode pod add` printed {out:?}, not an ofport"))
        })
    }

    /// `ofnode dump-flows`: the switch's flows as ofnode prints them, one per line.
    pub fn dump_flows(&self) -> Result<Vec<String>, CommandError> {
        let out = self.cli(&["dump-flows"])?;
        Ok(out.lines().map(str::to_string).collect())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail_lines(&self.log, lines)
    }
}

/// `ofnode setup` of a one-node test: subnet mode, the first /23 of 10.128.0.0/14.
pub const ONE_NODE_SETUP: &[&str] = &[
    "setup",
    "--cluster-network",
    "10.128.0.0/14",
    "--service-network",
    "172.30.0.0/16",
    "--local-subnet",
    "10.128.0.0/23",
    "--gateway",
    "10.128.0.1",
];

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A daemon's running totals, read from its `/metrics` text: operations finished, seconds spent
/// in them, of which in OpenFlow bundles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OperationTotals {
    operations: f64,
    seconds: f64,
    bundle_seconds: f64,
}

/// One counter of the daemon's /metrics text.
fn metric(metrics: &str, name: &str) -> Result<f64, String> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("no {name} in /metrics"))
}

/// The daemon's purges of the datapath's cached flows so far (the stale-megaflow mitigation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PurgeTotals {
    pub purges: f64,
    pub seconds: f64,
    pub errors: f64,
}

impl PurgeTotals {
    pub fn from_metrics(metrics: &str) -> Result<PurgeTotals, String> {
        Ok(PurgeTotals {
            purges: metric(metrics, "ofnode_stale_megaflow_purges_total")?,
            seconds: metric(metrics, "ofnode_stale_megaflow_purge_seconds_total")?,
            errors: metric(metrics, "ofnode_stale_megaflow_purge_errors_total")?,
        })
    }
}

impl OperationTotals {
    pub fn from_metrics(metrics: &str) -> Result<OperationTotals, String> {
        let value = |name: &str| metric(metrics, name);
        Ok(OperationTotals {
            operations: value("ofnode_operations_total")?,
            seconds: value("ofnode_operation_duration_seconds_sum")?,
            bundle_seconds: value("ofnode_transaction_duration_seconds_sum")?,
        })
    }

    /// The one operation finished between `before` and these totals: its time, and of that its
    /// OpenFlow bundle's. None when another operation (a drift check, a port renumbering)
    /// finished meanwhile, or none did.
    pub fn one_operation_since(&self, before: &OperationTotals) -> Option<(Duration, Duration)> {
        let secs = |d: f64| Duration::from_secs_f64(d.max(0.0));
        (self.operations - before.operations == 1.0).then(|| {
            (
                secs(self.seconds - before.seconds),
                secs(self.bundle_seconds - before.bundle_seconds),
            )
        })
    }
}
