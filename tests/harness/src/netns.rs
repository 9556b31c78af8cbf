//! Network namespaces and veth pairs owned by a test.

use std::process::Command;

use crate::process::{run, run_ok, CommandError};

/// A network namespace this test created; deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace with a unique name (`<prefix><pid>x<n>`) and brings its loopback up.
    pub fn new(prefix: &str) -> Result<Netns, CommandError> {
        crate::init();
        Netns::with_name(crate::unique_name(prefix))
    }

    /// Creates a namespace with exactly this name. A marker directory
    /// `STATE_ROOT/<our pid>-<name>` lets `reap_stale` delete it if this process is killed
    /// before its guard runs.
    pub fn with_name(name: String) -> Result<Netns, CommandError> {
        let marker = crate::process::state_dir_for(&name);
        std::fs::create_dir_all(&marker)
            .map_err(|e| CommandError::Other(format!("create {}: {e}", marker.display())))?;
        run_ok(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns { name };
        ns.exec_ok(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs inside this namespace (`ip netns exec NAME program …`).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// Runs `argv` inside the namespace and returns its stdout, or an error with its stderr.
    pub fn exec_ok(&self, argv: &[&str]) -> Result<String, CommandError> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| CommandError::Other("empty command".into()))?;
        run_ok(self.command(program).args(args))
    }

    /// Runs `argv` inside the namespace; true when it exited 0.
    pub fn exec_status(&self, argv: &[&str]) -> bool {
        let Some((program, args)) = argv.split_first() else {
            return false;
        };
        run(self.command(program).args(args)).is_ok_and(|out| out.status.success())
    }

    /// Creates the veth pair `name` / `<name>p`, `name` up (a pod's host end, its peer left
    /// where it is).
    pub fn add_veth(&self, name: &str) -> Result<(), CommandError> {
        let peer = format!("{name}p");
        self.exec_ok(&[
            "ip", "link", "add", name, "type", "veth", "peer", "name", &peer,
        ])?;
        self.exec_ok(&["ip", "link", "set", name, "up"]).map(|_| ())
    }

    /// Creates the veth pairs `<prefix><i>` / `<prefix><i>p` (up) for every `i` in `indices`,
    /// with one `ip -batch` rather than an exec per pair (benchmarks create thousands).
    pub fn add_veth_pairs(
        &self,
        prefix: &str,
        indices: impl IntoIterator<Item = usize>,
    ) -> Result<(), CommandError> {
        use std::io::Write;
        use std::process::Stdio;
        let batch: String = indices
            .into_iter()
            .map(|i| format!("link add {prefix}{i} up type veth peer name {prefix}{i}p\n"))
            .collect();
        let failed =
            |e: std::io::Error| CommandError::Other(format!("ip -batch in {}: {e}", self.name));
        let mut ip = Command::new("ip")
            .args(["-n", &self.name, "-batch", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(failed)?;
        if let Some(mut stdin) = ip.stdin.take() {
            stdin.write_all(batch.as_bytes()).map_err(failed)?;
        }
        let status = ip.wait().map_err(failed)?;
        if !status.success() {
            return Err(CommandError::Other(format!(
                "ip -batch in {}: creating {prefix}* veths failed ({status})",
                self.name
            )));
        }
        Ok(())
    }

    /// The path of the namespace handle, for `setns(2)`.
    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    /// Runs `f` on a thread of its own that has entered this namespace, so the sockets it opens
    /// (say, through a current-thread tokio runtime it drives) live here. Panics in `f` propagate.
    pub fn run_in<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R, CommandError> {
        run_in_named(&self.name, f)
    }
}

/// [`Netns::run_in`] for a namespace known by name (one a guard of someone else owns).
pub fn run_in_named<R: Send>(name: &str, f: impl FnOnce() -> R + Send) -> Result<R, CommandError> {
    use std::os::fd::AsRawFd;
    let path = format!("/run/netns/{name}");
    let handle =
        std::fs::File::open(&path).map_err(|e| CommandError::Other(format!("open {path}: {e}")))?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: setns on a valid namespace fd changes only this thread, which ends
                // when `f` returns.
                let rc = unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(CommandError::Other(format!("setns {name}: {e}")));
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(Command::new("ip").args(["netns", "del", &self.name]));
        let _ = std::fs::remove_dir_all(crate::process::state_dir_for(&self.name));
    }
}

/// A veth pair whose ends live in the given namespaces; deleting one end deletes both, and
/// deleting a namespace deletes the ends inside it, so dropping the pair after its namespaces is
/// harmless.
#[derive(Debug)]
pub struct Veth {
    pub a: String,
    pub b: String,
    netns_a: String,
}

impl Veth {
    /// Creates `a` in namespace `ns_a` and `b` in namespace `ns_b`, both up.
    pub fn new(a: &str, ns_a: &Netns, b: &str, ns_b: &Netns) -> Result<Veth, CommandError> {
        ns_a.exec_ok(&[
            "ip", "link", "add", a, "type", "veth", "peer", "name", b, "netns", &ns_b.name,
        ])?;
        let veth = Veth {
            a: a.to_string(),
            b: b.to_string(),
            netns_a: ns_a.name.clone(),
        };
        ns_a.exec_ok(&["ip", "link", "set", a, "up"])?;
        ns_b.exec_ok(&["ip", "link", "set", b, "up"])?;
        Ok(veth)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = run(Command::new("ip").args(["-n", &self.netns_a, "link", "del", &self.a]));
    }
}
