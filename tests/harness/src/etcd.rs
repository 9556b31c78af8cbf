//! A private etcd (one member; Debian's `etcd-server` unless a caller names another binary) on
//! one address, its data in a state directory the reaper knows; stopped on drop.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::netns::Netns;
use crate::process::{run_ok, tail_lines, terminate_child, CommandError};

const ETCD: &str = "/usr/bin/etcd";
const ETCDCTL: &str = "/usr/bin/etcdctl";

/// A running etcd. `endpoint()` is its client URL.
#[derive(Debug)]
pub struct Etcd {
    program: PathBuf,
    child: Option<Child>,
    /// The namespace it runs in (None: the test's own, on loopback).
    netns: Option<String>,
    ip: Ipv4Addr,
    client_port: u16,
    peer_port: u16,
    dir: PathBuf,
    /// Removed on drop when the directory is not inside a namespace's own state directory.
    own_dir: bool,
    /// Serves clients over TLS and asks them for a certificate (see [`Etcd::tls_files`]).
    tls: bool,
}

/// PEM files of a TLS etcd: the CA that signed both sides, and a client certificate and key.
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Etcd {
    /// Starts etcd inside `netns`, listening on `ip` (an address of that namespace), ports 2379
    /// and 2380. Its state lives in the namespace's state directory.
    pub fn start_in(netns: &Netns, ip: Ipv4Addr) -> Result<Etcd, CommandError> {
        let dir = crate::process::state_dir_for(netns.name()).join("etcd");
        Etcd::start_program_in(Path::new(ETCD), netns, ip, dir)
    }

    /// Starts the etcd binary `program` inside `netns` on `ip`, ports 2379 and 2380, its state
    /// in `dir` (inside the namespace's state directory, where the reaper finds its PID).
    pub(crate) fn start_program_in(
        program: &Path,
        netns: &Netns,
        ip: Ipv4Addr,
        dir: PathBuf,
    ) -> Result<Etcd, CommandError> {
        Etcd::launch(
            program,
            Some(netns.name().to_string()),
            ip,
            (2379, 2380),
            dir,
            false,
            false,
        )
    }

    /// Starts etcd in this process's namespace on 127.0.0.1, on two free ports.
    pub fn start_on_loopback() -> Result<Etcd, CommandError> {
        crate::init();
        let ports = (free_port()?, free_port()?);
        let dir = crate::process::state_dir_for(&crate::unique_name("etcd"));
        Etcd::launch(
            Path::new(ETCD),
            None,
            Ipv4Addr::LOCALHOST,
            ports,
            dir,
            true,
            false,
        )
    }

    /// Like [`Etcd::start_on_loopback`], serving `https://` with a fresh CA (made with
    /// `openssl`) and requiring a client certificate signed by it.
    pub fn start_on_loopback_tls() -> Result<Etcd, CommandError> {
        crate::init();
        let ports = (free_port()?, free_port()?);
        let dir = crate::process::state_dir_for(&crate::unique_name("etcd"));
        make_certificates(&dir, Ipv4Addr::LOCALHOST)?;
        Etcd::launch(
            Path::new(ETCD),
            None,
            Ipv4Addr::LOCALHOST,
            ports,
            dir,
            true,
            true,
        )
    }

    /// The CA and a client certificate, for a TLS etcd.
    pub fn tls_files(&self) -> EtcdTlsFiles {
        EtcdTlsFiles {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join("client.pem"),
            key: self.dir.join("client-key.pem"),
        }
    }

    fn launch(
        program: &Path,
        netns: Option<String>,
        ip: Ipv4Addr,
        (client_port, peer_port): (u16, u16),
        dir: PathBuf,
        own_dir: bool,
        tls: bool,
    ) -> Result<Etcd, CommandError> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| CommandError::Other(format!("create {}: {e}", dir.display())))?;
        let mut etcd = Etcd {
            program: program.to_path_buf(),
            child: None,
            netns,
            ip,
            client_port,
            peer_port,
            dir,
            own_dir,
            tls,
        };
        etcd.spawn()?;
        Ok(etcd)
    }

    /// `http://IP:PORT` (`https://` with TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.ip, self.client_port)
    }

    /// etcd's own flags for serving clients over TLS.
    fn tls_flags(&self) -> Vec<String> {
        if !self.tls {
            return Vec::new();
        }
        let file = |name: &str| self.dir.join(name).display().to_string();
        vec![
            format!("--cert-file={}", file("server.pem")),
            format!("--key-file={}", file("server-key.pem")),
            format!("--trusted-ca-file={}", file("ca.pem")),
            "--client-cert-auth".into(),
        ]
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn command(&self, program: &Path) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns]).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    /// (Re)starts etcd on its data directory and waits until it answers.
    pub fn spawn(&mut self) -> Result<(), CommandError> {
        let log_path = self.dir.join("etcd.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| CommandError::Other(format!("open {}: {e}", log_path.display())))?;
        let log_err = log
            .try_clone()
            .map_err(|e| CommandError::Other(format!("dup log: {e}")))?;
        let client = self.endpoint();
        let peer = format!("http://{}:{}", self.ip, self.peer_port);
        // `ip netns exec` execs etcd: the child's PID is etcd's own.
        let child = self
            .command(&self.program)
            .arg("--name=harness")
            .arg(format!("--data-dir={}", self.dir.join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=harness={peer}"))
            .args(self.tls_flags())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|source| CommandError::Spawn {
                command: self.program.display().to_string(),
                source,
            })?;
        // Where the reaper finds it if this process dies before its guard runs.
        let _ = std::fs::write(self.dir.join("etcd.pid"), child.id().to_string());
        self.child = Some(child);
        self.wait_healthy(Duration::from_secs(20))
    }

    fn wait_healthy(&mut self, timeout: Duration) -> Result<(), CommandError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.etcdctl(&["endpoint", "health"]).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(CommandError::Other(format!(
                    "etcd exited ({status}); log:\n{}",
                    self.log_tail(20)
                )));
            }
            if Instant::now() >= deadline {
                return Err(CommandError::Other(format!(
                    "etcd {} not healthy within {timeout:?}; log:\n{}",
                    self.endpoint(),
                    self.log_tail(20)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `etcdctl --endpoints URL ARGS…` (API v3) and returns its stdout.
    pub fn etcdctl(&self, args: &[&str]) -> Result<String, CommandError> {
        let mut cmd = self.command(Path::new(ETCDCTL));
        cmd.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint()))
            .arg("--dial-timeout=2s")
            .arg("--command-timeout=3s");
        if self.tls {
            let files = self.tls_files();
            cmd.arg(format!("--cacert={}", files.ca.display()))
                .arg(format!("--cert={}", files.cert.display()))
                .arg(format!("--key={}", files.key.display()));
        }
        run_ok(cmd.args(args))
    }

    /// SIGTERM and wait: an orderly stop; `spawn` starts it again on the same data.
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            terminate_child(child, Duration::from_secs(10));
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail_lines(&self.dir.join("etcd.log"), lines)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.own_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A CA, a server certificate for `ip` and a client certificate (P-256 keys, valid one day) in
/// `dir`: ca.pem, server.pem + server-key.pem, client.pem + client-key.pem.
fn make_certificates(dir: &Path, ip: Ipv4Addr) -> Result<(), CommandError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CommandError::Other(format!("create {}: {e}", dir.display())))?;
    let openssl = |args: &[&str]| run_ok(Command::new("openssl").current_dir(dir).args(args));
    let new_key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &new_key,
            &["-keyout", "ca-key.pem", "-out", "ca.pem"],
        ]
        .concat()
        .into_iter()
        .chain(["-days", "1", "-subj", "/CN=ofnode-harness-ca"])
        .collect::<Vec<_>>(),
    )?;
    for (name, usage) in [
        (
            "server",
            format!("subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth\n"),
        ),
        ("client", "extendedKeyUsage=clientAuth\n".to_string()),
    ] {
        let (key, csr, cert, ext) = (
            format!("{name}-key.pem"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&ext), usage)
            .map_err(|e| CommandError::Other(format!("write {ext}: {e}")))?;
        let subject = format!("/CN=ofnode-harness-{name}");
        openssl(
            &[
                &["req"][..],
                &new_key,
                &["-keyout", &key, "-out", &csr, "-subj", &subject],
            ]
            .concat(),
        )?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "1",
            "-extfile",
            &ext,
        ])?;
    }
    Ok(())
}

/// A port nobody listens on now (the kernel's pick, released at once).
fn free_port() -> Result<u16, CommandError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| CommandError::Other(format!("find a free port: {e}")))
}
