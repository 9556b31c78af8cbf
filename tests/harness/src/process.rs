//! Running commands, and reaping what killed test runs left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Where every harness-owned state directory lives: `STATE_ROOT/<owner pid>-<name>`.
pub const STATE_ROOT: &str = "/tmp/ofnode-harness";

/// The state directory this process owns for the namespace `netns`.
pub fn state_dir_for(netns: &str) -> PathBuf {
    PathBuf::from(STATE_ROOT).join(format!("{}-{netns}", std::process::id()))
}

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("could not run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Other(String),
}

fn describe(cmd: &Command) -> String {
    let mut text = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs a command and returns its output whatever its exit status.
pub fn run(cmd: &mut Command) -> Result<Output, CommandError> {
    cmd.output().map_err(|source| CommandError::Spawn {
        command: describe(cmd),
        source,
    })
}

/// Runs a command and returns its stdout, or an error carrying its stderr when it failed.
pub fn run_ok(cmd: &mut Command) -> Result<String, CommandError> {
    let out = run(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(CommandError::Failed {
            command: describe(cmd),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// True while `pid` runs (a zombie awaiting its reaper counts as ended).
pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

pub(crate) fn read_pidfile(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Sends `signal` to `pid` if it is still the process we started (its command name starts with
/// `expected_comm`), so a recycled PID is never signalled.
pub(crate) fn signal_if_ours(pid: u32, expected_comm: &str, signal: i32) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if !comm.trim().starts_with(expected_comm) {
        return false;
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, signal) == 0 }
}

pub(crate) const SIGTERM: i32 = libc::SIGTERM;
pub(crate) const SIGKILL: i32 = libc::SIGKILL;

/// Waits until `pid` has exited; true when it did within `timeout`.
pub(crate) fn wait_exit(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while pid_alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Stops a child we spawned: SIGTERM, up to `grace` to exit, then SIGKILL; always reaped.
pub(crate) fn terminate_child(mut child: std::process::Child, grace: Duration) {
    // SAFETY: kill(2) has no memory-safety preconditions; the PID is our own child's, not yet
    // reaped, so it cannot have been recycled.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The last `lines` lines of a log file (empty when it cannot be read).
pub(crate) fn tail_lines(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Stops a process we started: SIGTERM, then SIGKILL if it lingers.
pub(crate) fn stop_process(pid: u32, comm: &str) {
    if !pid_alive(pid) {
        return;
    }
    signal_if_ours(pid, comm, SIGTERM);
    if !wait_exit(pid, Duration::from_secs(3)) {
        signal_if_ours(pid, comm, SIGKILL);
        wait_exit(pid, Duration::from_secs(3));
    }
}

/// Removes state directories, processes and namespaces of harness owners that no longer run.
/// A directory is named `<owner pid>-<netns name>`; its `*.pid` files name the daemons it started.
pub fn reap_stale() {
    let Ok(entries) = std::fs::read_dir(STATE_ROOT) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((owner, netns)) = name.split_once('-') else {
            continue;
        };
        let Ok(owner) = owner.parse::<u32>() else {
            continue;
        };
        if pid_alive(owner) {
            continue;
        }
        reap_dir(&entry.path());
        if !netns.is_empty() {
            let _ = run(Command::new("ip").args(["netns", "del", netns]));
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

fn reap_dir(dir: &Path) {
    let Ok(files) = std::fs::read_dir(dir) else {
        return;
    };
    for file in files.flatten() {
        let path: PathBuf = file.path();
        if path.extension().is_some_and(|ext| ext == "pid") {
            if let Some(pid) = read_pidfile(&path) {
                // Our daemons (ovsdb-server, ovs-vswitchd, etcd, kube-apiserver), ofnode
                // itself, and pingers of e2e tests.
                let ours = [
                    "ovsdb-server",
                    "ovs-vswitchd",
                    "etcd",
                    "kube-apiserver",
                    "ofnode",
                    "ping",
                ];
                for comm in ours {
                    if signal_if_ours(pid, comm, SIGKILL) {
                        wait_exit(pid, Duration::from_secs(3));
                    }
                }
            }
        }
        if path.is_dir() {
            reap_dir(&path);
        }
    }
}
