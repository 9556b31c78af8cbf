//! `ofnode controller` processes run by a test against the API server, inside its namespace
//! (where the server's address is), each with its status served on a loopback port there.
//! Killed by PID on drop; their PID files let the reaper of killed runs stop them too.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use super::{KubeApiServer, KubeError};
use crate::process::{pid_alive, tail_lines};

/// How a controller is started beyond the API server and its credentials.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    pub identity: String,
    pub mode: String,
    pub cluster_network: String,
    pub host_subnet_length: u8,
    /// Lease duration (whole seconds), renew deadline and retry period.
    pub lease: (u64, Duration, Duration),
    pub extra: Vec<String>,
}

impl ControllerOptions {
    /// The cluster's usual networks (10.128.0.0/14 in /23s), a short lease for tests: 4 s,
    /// renew deadline 2 s, retry period 500 ms.
    pub fn new(identity: &str, mode: &str) -> ControllerOptions {
        ControllerOptions {
            identity: identity.to_string(),
            mode: mode.to_string(),
            cluster_network: crate::cluster::CLUSTER_NETWORK.to_string(),
            host_subnet_length: 9,
            lease: (4, Duration::from_secs(2), Duration::from_millis(500)),
            extra: Vec::new(),
        }
    }
}

/// Status ports handed out, one per controller (all inside API servers' own namespaces).
static NEXT_PORT: AtomicU16 = AtomicU16::new(19446);

/// A running `ofnode controller`.
#[derive(Debug)]
pub struct ControllerProcess {
    child: Option<Child>,
    pub identity: String,
    netns: String,
    port: u16,
    pub log: PathBuf,
    pidfile: PathBuf,
}

impl KubeApiServer {
    /// Starts `binary controller` in the API server's namespace with `kubeconfig`'s
    /// credentials; its log is `<state dir>/controller-<identity>.log`.
    pub fn start_controller(
        &self,
        binary: &Path,
        kubeconfig: &Path,
        options: &ControllerOptions,
    ) -> Result<ControllerProcess, KubeError> {
        let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let log = self
            .dir()
            .join(format!("controller-{}.log", options.identity));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| KubeError::Other(format!("open {}: {e}", log.display())))?;
        let stderr = file
            .try_clone()
            .map_err(|e| KubeError::Other(format!("open {}: {e}", log.display())))?;
        let (duration, deadline, retry) = options.lease;
        let child = Command::new("ip")
            .args(["netns", "exec", self.netns()])
            .arg(binary)
            .arg("controller")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--identity", &options.identity])
            .args(["--mode", &options.mode])
            .args(["--cluster-network", &options.cluster_network])
            .args([
                "--host-subnet-length",
                &options.host_subnet_length.to_string(),
            ])
            .args(["--service-network", super::SERVICE_CLUSTER_IP_RANGE])
            .args(["--lease-duration", &format!("{duration}s")])
            .args(["--renew-deadline", &format!("{}ms", deadline.as_millis())])
            .args(["--retry-period", &format!("{}ms", retry.as_millis())])
            .args(["--status-address", &format!("127.0.0.1:{port}")])
            .args(&options.extra)
            .env("OFNODE_LOG", "info,ofnode=debug")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .spawn()
            .map_err(|e| KubeError::Other(format!("run {}: {e}", binary.display())))?;
        let pidfile = self
            .dir()
            .join(format!("controller-{}.pid", options.identity));
        let _ = std::fs::write(&pidfile, child.id().to_string());
        Ok(ControllerProcess {
            child: Some(child),
            identity: options.identity.clone(),
            netns: self.netns().to_string(),
            port,
            log,
            pidfile,
        })
    }
}

impl ControllerProcess {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `GET PATH` of its status server: the body, or why not.
    pub fn get(&self, path: &str) -> Result<String, KubeError> {
        let port = self.port;
        let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        let answer = in_netns(&self.netns, move || -> std::io::Result<String> {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            stream.write_all(request.as_bytes())?;
            let mut text = String::new();
            stream.read_to_string(&mut text)?;
            Ok(text)
        })?
        .map_err(|e| KubeError::Other(format!("GET {path} of {}: {e}", self.identity)))?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return Err(KubeError::Other(format!("GET {path}: {head}")));
        }
        Ok(body.to_string())
    }

    /// `/status` as JSON.
    pub fn status(&self) -> Result<serde_json::Value, KubeError> {
        let body = self.get("/status")?;
        serde_json::from_str(&body).map_err(|e| KubeError::Other(format!("/status: {e}: {body}")))
    }

    /// Polls `/status` until `done` says so; the last status, or the log's tail on timeout.
    pub fn wait_status(
        &self,
        timeout: Duration,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> Result<serde_json::Value, KubeError> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status();
            if let Ok(status) = &status {
                if done(status) {
                    return Ok(status.clone());
                }
            }
            if Instant::now() >= deadline {
                return Err(KubeError::Other(format!(
                    "controller {}: not there within {timeout:?}; last status {status:?}; log:\n{}",
                    self.identity,
                    self.log_tail(40)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until it leads and has listed everything.
    pub fn wait_leading(&self, timeout: Duration) -> Result<serde_json::Value, KubeError> {
        self.wait_status(timeout, |s| s["leader"] == true && s["synced"] == true)
    }

    /// SIGKILL (a crash: nothing released) and reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGTERM …) to the running process.
    pub fn signal(&self, signal: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on the PID of a child this guard owns and has not reaped.
            unsafe { libc::kill(pid as i32, signal) };
        }
    }

    /// SIGTERM and wait for the exit (at most `limit`, then SIGKILL).
    pub fn terminate(&mut self, limit: Duration) -> Result<ExitStatus, KubeError> {
        self.signal(libc::SIGTERM);
        let mut child = self
            .child
            .take()
            .ok_or_else(|| KubeError::Other("not running".into()))?;
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(KubeError::Other(format!(
                    "controller {} did not stop within {limit:?} of SIGTERM; log:\n{}",
                    self.identity,
                    self.log_tail(30)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&self) -> bool {
        self.pid().is_some_and(pid_alive)
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail_lines(&self.log, lines)
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill9();
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

/// Runs `f` on a thread that entered the network namespace `name`.
pub fn in_netns<R: Send>(name: &str, f: impl FnOnce() -> R + Send) -> Result<R, KubeError> {
    crate::netns::run_in_named(name, f)
        .map_err(|e| KubeError::Other(format!("enter namespace {name}: {e}")))
}
