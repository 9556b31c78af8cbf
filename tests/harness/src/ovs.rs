//! A private `ovsdb-server` + `ovs-vswitchd` (userspace `netdev` datapath) in a namespace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::netns::Netns;
use crate::process::{pid_alive, read_pidfile, run_ok, stop_process, CommandError};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

#[derive(Debug, Clone)]
pub struct OvsOptions {
    /// Prefix of the namespace name (at most 4 characters keeps names short).
    pub prefix: String,
    /// Start ovs-vswitchd too (an OVSDB-only test needs just ovsdb-server).
    pub vswitchd: bool,
    /// Also serve OVSDB over TLS (`--remote=pssl:PORT:127.0.0.1` inside the namespace).
    pub ovsdb_ssl: Option<OvsdbSsl>,
    /// Also serve OVSDB over plain TCP on this port (`--remote=ptcp:PORT:127.0.0.1` inside the
    /// namespace, reachable as `tcp:127.0.0.1:PORT` from there).
    pub ovsdb_tcp_port: Option<u16>,
}

/// ovsdb-server's `--private-key`, `--certificate`, `--ca-cert` and the port of its `pssl:`
/// remote (on the namespace's loopback: any port is free there).
#[derive(Debug, Clone)]
pub struct OvsdbSsl {
    pub files: crate::PeerFiles,
    pub port: u16,
}

impl OvsdbSsl {
    /// `ssl:127.0.0.1:PORT`, reachable from inside the namespace.
    pub fn target(&self) -> String {
        format!("ssl:127.0.0.1:{}", self.port)
    }

    fn args(&self) -> Vec<String> {
        let files = &self.files;
        vec![
            format!("--private-key={}", files.private_key.display()),
            format!("--certificate={}", files.certificate.display()),
            format!("--ca-cert={}", files.ca_cert.display()),
            format!("--remote=pssl:{}:127.0.0.1", self.port),
        ]
    }
}

impl Default for OvsOptions {
    fn default() -> Self {
        OvsOptions {
            prefix: "ofn".into(),
            vswitchd: true,
            ovsdb_ssl: None,
            ovsdb_tcp_port: None,
        }
    }
}

/// A private Open vSwitch. Dropping it stops both daemons (by the PIDs in their pid files), then
/// deletes the namespace and the state directory.
#[derive(Debug)]
pub struct Ovs {
    dir: PathBuf,
    ovsdb_ssl: Option<OvsdbSsl>,
    ovsdb_tcp_port: Option<u16>,
    // Declared after `dir`'s users; dropped explicitly in `Drop` after the daemons stop.
    netns: Option<Netns>,
}

impl Ovs {
    /// Starts ovsdb-server and ovs-vswitchd in a fresh namespace.
    pub fn start() -> Result<Ovs, CommandError> {
        Ovs::start_with(OvsOptions::default())
    }

    pub fn start_with(options: OvsOptions) -> Result<Ovs, CommandError> {
        let netns = Netns::new(&options.prefix)?;
        let dir = crate::process::state_dir_for(netns.name());
        std::fs::create_dir_all(&dir)
            .map_err(|e| CommandError::Other(format!("create {}: {e}", dir.display())))?;
        let ovs = Ovs {
            dir,
            ovsdb_ssl: options.ovsdb_ssl,
            ovsdb_tcp_port: options.ovsdb_tcp_port,
            netns: Some(netns),
        };
        ovs.start_ovsdb(true)?;
        if options.vswitchd {
            ovs.start_vswitchd()?;
        }
        Ok(ovs)
    }

    pub fn netns(&self) -> &Netns {
        self.netns.as_ref().expect("netns lives until drop")
    }

    /// The state directory (also ovs-vswitchd's OVS_RUNDIR).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn db_sock(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    /// `unix:DIR/db.sock`, as OVS tools and ofnode take it.
    pub fn db_target(&self) -> String {
        format!("unix:{}", self.db_sock().display())
    }

    /// `tcp:127.0.0.1:PORT` when started with `ovsdb_tcp_port`; reachable only from inside the
    /// namespace.
    pub fn tcp_target(&self) -> Option<String> {
        self.ovsdb_tcp_port
            .map(|port| format!("tcp:127.0.0.1:{port}"))
    }

    /// The bridge's OpenFlow management socket, `DIR/<bridge>.mgmt`.
    pub fn mgmt_sock(&self, bridge: &str) -> PathBuf {
        self.dir.join(format!("{bridge}.mgmt"))
    }

    pub fn mgmt_target(&self, bridge: &str) -> String {
        format!("unix:{}", self.mgmt_sock(bridge).display())
    }

    fn pidfile(&self, daemon: &str) -> PathBuf {
        self.dir.join(format!("{daemon}.pid"))
    }

    pub fn ovsdb_pid(&self) -> Option<u32> {
        read_pidfile(&self.pidfile("ovsdb")).filter(|pid| pid_alive(*pid))
    }

    pub fn vswitchd_pid(&self) -> Option<u32> {
        read_pidfile(&self.pidfile("vswitchd")).filter(|pid| pid_alive(*pid))
    }

    /// Stops ovs-vswitchd (SIGSTOP) until the guard is dropped: the database moves on while the
    /// switch applies nothing and answers nothing.
    pub fn pause_vswitchd(&self) -> PausedVswitchd {
        let pid = self.vswitchd_pid();
        if let Some(pid) = pid {
            // SAFETY: kill(2) with a pid this harness started; no memory is involved.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        }
        PausedVswitchd { pid }
    }

    /// Starts ovsdb-server on the existing database (creating it first when `create`).
    pub fn start_ovsdb(&self, create: bool) -> Result<(), CommandError> {
        let db = self.dir.join("conf.db");
        if create {
            run_ok(
                Command::new("ovsdb-tool")
                    .arg("create")
                    .arg(&db)
                    .arg(SCHEMA),
            )?;
        }
        let dir = self.dir.display();
        run_ok(
            self.netns()
                .command("ovsdb-server")
                .args([
                    &db.display().to_string(),
                    &format!("--remote=punix:{dir}/db.sock"),
                    &format!("--pidfile={dir}/ovsdb.pid"),
                    &format!("--unixctl={dir}/ovsdb.ctl"),
                    &format!("--log-file={dir}/ovsdb.log"),
                    "--detach",
                ])
                .args(self.ovsdb_ssl.iter().flat_map(OvsdbSsl::args))
                .args(
                    self.ovsdb_tcp_port
                        .map(|port| format!("--remote=ptcp:{port}:127.0.0.1")),
                ),
        )?;
        if create {
            // What ovs-ctl (the distribution's service) does at every start: the version is in
            // the database for whoever reads it (ofnode's stale-megaflow warning does).
            let version = format!("ovs_version={}", installed_ovs_version()?);
            self.vsctl_no_wait(&["init", "--", "set", "Open_vSwitch", ".", &version])?;
        }
        Ok(())
    }

    /// Has the running ovsdb-server also serve `remote` (e.g. `punix:PATH`) until it stops
    /// (`ovsdb-server/add-remote`: a restarted server serves only its command line's remotes).
    pub fn add_ovsdb_remote(&self, remote: &str) -> Result<(), CommandError> {
        run_ok(
            Command::new("ovs-appctl")
                .arg("-t")
                .arg(self.dir.join("ovsdb.ctl"))
                .args(["ovsdb-server/add-remote", remote]),
        )
        .map(|_| ())
    }

    /// Waits until ovs-vswitchd holds an OVSDB session again (a change made with wait is
    /// applied): without one it serves no OpenFlow connection at all (it runs its bridges only
    /// while it holds its database lock).
    pub fn wait_vswitchd_on_ovsdb(&self) -> Result<(), CommandError> {
        self.vsctl(&[
            "--timeout=30",
            "set",
            "Open_vSwitch",
            ".",
            "external_ids:harness=ready",
        ])
        .map(|_| ())
    }

    /// Starts ovs-vswitchd and waits until it has read the database (cur_cfg caught up).
    pub fn start_vswitchd(&self) -> Result<(), CommandError> {
        let dir = self.dir.display();
        run_ok(
            self.netns()
                .command("env")
                .arg(format!("OVS_RUNDIR={dir}"))
                .arg("ovs-vswitchd")
                .args([
                    &format!("unix:{dir}/db.sock"),
                    &format!("--pidfile={dir}/vswitchd.pid"),
                    &format!("--unixctl={dir}/vswitchd.ctl"),
                    &format!("--log-file={dir}/vswitchd.log"),
                    "--detach",
                ]),
        )?;
        self.wait_for_path(&self.dir.join("vswitchd.ctl"), Duration::from_secs(10))?;
        // A change made without --no-wait returns only once ovs-vswitchd has applied it, which
        // proves it is connected to the database and serving.
        self.wait_vswitchd_on_ovsdb()
    }

    /// Kills ovs-vswitchd with SIGKILL (a crash: flows are lost, OVSDB keeps ports).
    pub fn kill_vswitchd(&self) {
        self.kill_daemon("vswitchd", "ovs-vswitchd");
    }

    /// Kills ovsdb-server with SIGKILL.
    pub fn kill_ovsdb(&self) {
        self.kill_daemon("ovsdb", "ovsdb-server");
    }

    fn kill_daemon(&self, daemon: &str, comm: &str) {
        if let Some(pid) = read_pidfile(&self.pidfile(daemon)) {
            if crate::process::signal_if_ours(pid, comm, crate::process::SIGKILL) {
                crate::process::wait_exit(pid, Duration::from_secs(5));
            }
        }
        let _ = std::fs::remove_file(self.pidfile(daemon));
    }

    /// ovs-vsctl against this instance; waits for ovs-vswitchd to apply changes.
    pub fn vsctl(&self, args: &[&str]) -> Result<String, CommandError> {
        run_ok(
            Command::new("ovs-vsctl")
                .arg(format!("--db={}", self.db_target()))
                .args(args),
        )
    }

    /// ovs-vsctl that does not wait for ovs-vswitchd.
    pub fn vsctl_no_wait(&self, args: &[&str]) -> Result<String, CommandError> {
        run_ok(
            Command::new("ovs-vsctl")
                .arg(format!("--db={}", self.db_target()))
                .arg("--no-wait")
                .args(args),
        )
    }

    /// The OpenFlow port of an interface once ovs-vswitchd has applied it (`ovs-vsctl get
    /// Interface NAME ofport` shows a positive number), or `None` if it has not within `limit`.
    /// ofnode's pod add returns before ovs-vswitchd has applied the port.
    pub fn applied_ofport(&self, iface: &str, limit: Duration) -> Option<u16> {
        let deadline = Instant::now() + limit;
        loop {
            let ofport = self
                .vsctl_no_wait(&["get", "Interface", iface, "ofport"])
                .ok()
                .and_then(|s| s.trim().parse::<u16>().ok())
                .filter(|port| *port > 0);
            if ofport.is_some() || Instant::now() >= deadline {
                return ofport;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `ovs-ofctl -O OpenFlow13 CMD unix:DIR/<bridge>.mgmt ARGS…`.
    pub fn ofctl(&self, cmd: &str, bridge: &str, args: &[&str]) -> Result<String, CommandError> {
        run_ok(
            Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow13", cmd, &self.mgmt_target(bridge)])
                .args(args),
        )
    }

    /// ovs-vswitchd's control socket (`--unixctl=DIR/vswitchd.ctl`), as `ovs-appctl -t` takes it.
    pub fn vswitchd_ctl(&self) -> PathBuf {
        self.dir.join("vswitchd.ctl")
    }

    /// The Open_vSwitch record's `ovs_version` ("3.1.0"; written at start, as ovs-ctl does).
    pub fn ovs_version(&self) -> Result<String, CommandError> {
        let version = self.vsctl(&["get", "Open_vSwitch", ".", "ovs_version"])?;
        Ok(version.trim().trim_matches('"').to_string())
    }

    /// `ovs-appctl -t DIR/ovsdb.ctl ARGS…`: ovsdb-server's control socket.
    pub fn ovsdb_appctl(&self, args: &[&str]) -> Result<String, CommandError> {
        run_ok(
            Command::new("ovs-appctl")
                .arg("-t")
                .arg(self.dir.join("ovsdb.ctl"))
                .args(args),
        )
    }

    /// The transactions ovsdb-server holds blocked (a `wait` not yet satisfied), from its
    /// `memory/show` ("triggers:N", absent when none).
    pub fn ovsdb_blocked_transactions(&self) -> Result<u64, CommandError> {
        let memory = self.ovsdb_appctl(&["memory/show"])?;
        Ok(memory
            .split_whitespace()
            .find_map(|item| item.strip_prefix("triggers:")?.parse().ok())
            .unwrap_or(0))
    }

    /// The total of one of ovs-vswitchd's coverage counters (`coverage/show`; 0 when it never
    /// hit). OVS adds each thread's counts up about once a second.
    pub fn coverage_total(&self, counter: &str) -> Result<u64, CommandError> {
        let shown = self.appctl(&["coverage/show"])?;
        Ok(shown
            .lines()
            .find(|line| line.split_whitespace().next() == Some(counter))
            .and_then(|line| line.rsplit("total:").next()?.trim().parse().ok())
            .unwrap_or(0))
    }

    /// `ovs-appctl -t DIR/vswitchd.ctl ARGS…`.
    pub fn appctl(&self, args: &[&str]) -> Result<String, CommandError> {
        run_ok(
            Command::new("ovs-appctl")
                .arg("-t")
                .arg(self.dir.join("vswitchd.ctl"))
                .args(args),
        )
    }

    /// Adds a bridge the way the seed's node does (netdev datapath, OpenFlow13, fail-mode secure)
    /// and waits for its management socket.
    pub fn add_bridge(&self, bridge: &str) -> Result<(), CommandError> {
        self.vsctl(&[
            "add-br",
            bridge,
            "--",
            "set",
            "bridge",
            bridge,
            "datapath_type=netdev",
            "protocols=OpenFlow13",
            "fail-mode=secure",
        ])?;
        self.wait_for_path(&self.mgmt_sock(bridge), Duration::from_secs(10))
    }

    /// The flows on `bridge` as `ovs-ofctl dump-flows --no-stats` prints them, one per line,
    /// without the reply header lines.
    pub fn dump_flows(&self, bridge: &str) -> Result<Vec<String>, CommandError> {
        let text = self.ofctl("dump-flows", bridge, &["--no-stats"])?;
        Ok(text
            .lines()
            .filter(|line| line.contains("actions="))
            .map(|line| line.trim().to_string())
            .collect())
    }

    /// Polls `bridge` (every 5 ms) until it holds exactly `expected`, in any order, and returns
    /// how long that took; after `limit` an error names the missing and unexpected flows.
    pub fn wait_flows(
        &self,
        bridge: &str,
        expected: &[String],
        limit: Duration,
    ) -> Result<Duration, CommandError> {
        let started = Instant::now();
        let mut expected = expected.to_vec();
        expected.sort();
        loop {
            let mut actual = self.dump_flows(bridge)?;
            actual.sort();
            if actual == expected {
                return Ok(started.elapsed());
            }
            if started.elapsed() >= limit {
                let missing: Vec<&str> = expected
                    .iter()
                    .filter(|e| !actual.contains(e))
                    .map(String::as_str)
                    .collect();
                let extra: Vec<&str> = actual
                    .iter()
                    .filter(|a| !expected.contains(a))
                    .map(String::as_str)
                    .collect();
                return Err(CommandError::Other(format!(
                    "{bridge} did not hold the expected flows within {limit:?}\n  missing ({}):\n    {}\n  unexpected ({}):\n    {}",
                    missing.len(),
                    missing.join("\n    "),
                    extra.len(),
                    extra.join("\n    ")
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until a path exists (a socket a daemon creates).
    pub fn wait_for_path(&self, path: &Path, timeout: Duration) -> Result<(), CommandError> {
        let deadline = Instant::now() + timeout;
        while !path.exists() {
            if Instant::now() >= deadline {
                return Err(CommandError::Other(format!(
                    "{} did not appear within {timeout:?}",
                    path.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// The tail of a daemon's log, for failure messages.
    pub fn log_tail(&self, daemon: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{daemon}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for (daemon, comm) in [("vswitchd", "ovs-vswitchd"), ("ovsdb", "ovsdb-server")] {
            if let Some(pid) = read_pidfile(&self.pidfile(daemon)) {
                stop_process(pid, comm);
            }
        }
        self.netns.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Resumes ovs-vswitchd when dropped (see [`Ovs::pause_vswitchd`]).
#[must_use]
pub struct PausedVswitchd {
    pid: Option<u32>,
}

impl Drop for PausedVswitchd {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            // SAFETY: as in pause_vswitchd.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
        }
    }
}

/// The installed ovs-vswitchd's version, as ovs-ctl reads it: the last word of the line of
/// `ovs-vswitchd --version` that names Open vSwitch.
fn installed_ovs_version() -> Result<String, CommandError> {
    let text = run_ok(Command::new("ovs-vswitchd").arg("--version"))?;
    let version = text
        .lines()
        .find(|line| line.contains("Open vSwitch"))
        .and_then(|line| line.split_whitespace().last())
        .unwrap_or_default();
    Ok(version.to_string())
}
