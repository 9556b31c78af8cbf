//! A client of an Open vSwitch daemon's control socket ("unixctl"): what `ovs-appctl` speaks,
//! without the exec.
//!
//! The protocol, as OVS 3.1 implements it (lib/unixctl.c, lib/jsonrpc.c):
//! - JSON-RPC 1.0 over a unix stream socket, messages back to back with no delimiter (the
//!   framing is the OVSDB client's [`Decoder`]).
//! - A request is `{"id": N, "method": COMMAND, "params": [ARG, …]}`; every argument must be a
//!   string (the server refuses others with `"… command has non-string argument"`).
//! - The reply carries the same id and either `"result"` (the command's output) or `"error"`
//!   (its explanation, e.g. `"foo" is not a valid command (use "list-commands" …)`), both
//!   strings; the server adds a final newline to a non-empty body.
//! - The server handles one request per connection at a time and keeps the connection open,
//!   so one connection serves any number of sequential calls. Anything but a request makes it
//!   drop the connection.
//!
//! A call is bounded in time ([`UnixctlOptions::timeout`], connecting included) and in size
//! ([`UnixctlOptions::max_reply_bytes`]). After a timeout, an oversized or malformed reply, or a
//! dropped connection, the connection is closed and the next call opens a new one, so a reply
//! that arrives late can never be taken for the answer to a later call.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::BytesMut;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::ovsdb::codec::{CodecError, Decoder, Message};

/// How long a call may take, connecting included, unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest reply accepted unless told otherwise (a trace is a few kB; a full
/// `dpctl/dump-flows` of a busy datapath can be megabytes).
pub const DEFAULT_MAX_REPLY: usize = 16 * 1024 * 1024;
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone, Copy)]
pub struct UnixctlOptions {
    /// Upper bound of one call: connecting (when needed), sending, and the whole reply.
    pub timeout: Duration,
    /// Upper bound of one reply message, in bytes.
    pub max_reply_bytes: usize,
}

impl Default for UnixctlOptions {
    fn default() -> UnixctlOptions {
        UnixctlOptions {
            timeout: DEFAULT_TIMEOUT,
            max_reply_bytes: DEFAULT_MAX_REPLY,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UnixctlError {
    #[error(
        "cannot connect to the control socket {path}: {source}{}",
        connect_hint(source)
    )]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no reply to `{command}` within {after:?}")]
    Timeout {
        path: PathBuf,
        command: String,
        after: Duration,
    },
    #[error("{path}: `{command}`: {source}")]
    Io {
        path: PathBuf,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: the daemon closed the connection before replying to `{command}`")]
    Closed { path: PathBuf, command: String },
    #[error("{path}: reply to `{command}`: {source}")]
    Framing {
        path: PathBuf,
        command: String,
        #[source]
        source: CodecError,
    },
    #[error("{path}: malformed reply to `{command}`: {detail}")]
    Protocol {
        path: PathBuf,
        command: String,
        detail: String,
    },
    /// The daemon ran the command and reported an error; `message` is its own text.
    #[error("{path}: `{command}` failed: {message}")]
    Command {
        path: PathBuf,
        command: String,
        message: String,
    },
    #[error("invalid unixctl command {command:?}: {reason}")]
    BadCommand {
        command: String,
        reason: &'static str,
    },
    #[error("cannot find the control socket of {target}: {detail}")]
    Target { target: String, detail: String },
}

fn connect_hint(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::NotFound => {
            " (is the daemon running, and is this the socket it was started with --unixctl=?)"
        }
        std::io::ErrorKind::ConnectionRefused => {
            " (nothing listens there: the daemon that made it has exited)"
        }
        _ => "",
    }
}

impl UnixctlError {
    /// The daemon's own error text, when the command itself failed.
    pub fn command_message(&self) -> Option<&str> {
        match self {
            UnixctlError::Command { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// A connection to one daemon's control socket (connected on the first call, and again after a
/// failed one).
#[derive(Debug)]
pub struct Unixctl {
    path: PathBuf,
    options: UnixctlOptions,
    stream: Option<UnixStream>,
    buffer: BytesMut,
    next_id: u64,
}

impl Unixctl {
    /// A client of the socket at `path`; nothing is opened until the first call.
    pub fn new(path: impl Into<PathBuf>, options: UnixctlOptions) -> Unixctl {
        Unixctl {
            path: path.into(),
            options,
            stream: None,
            buffer: BytesMut::new(),
            next_id: 0,
        }
    }

    /// Opens the connection now, so that a wrong path is reported before any command is built.
    pub async fn connect(
        path: impl Into<PathBuf>,
        options: UnixctlOptions,
    ) -> Result<Unixctl, UnixctlError> {
        let mut client = Unixctl::new(path, options);
        let stream = tokio::time::timeout(options.timeout, open(&client.path))
            .await
            .unwrap_or_else(|_| {
                Err(UnixctlError::Connect {
                    path: client.path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("timed out after {:?}", options.timeout),
                    ),
                })
            })?;
        client.stream = Some(stream);
        Ok(client)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `command` with `args` (as `ovs-appctl COMMAND ARGS…` does) and returns its output.
    /// The daemon's refusal comes back as [`UnixctlError::Command`] with its text.
    pub async fn call(&mut self, command: &str, args: &[&str]) -> Result<String, UnixctlError> {
        check_command(command)?;
        let after = self.options.timeout;
        let outcome = tokio::time::timeout(after, self.exchange(command, args)).await;
        let outcome = outcome.unwrap_or_else(|_| {
            Err(UnixctlError::Timeout {
                path: self.path.clone(),
                command: command.to_string(),
                after,
            })
        });
        match &outcome {
            // The connection stays good: the reply was read to its end.
            Ok(_) | Err(UnixctlError::Command { .. }) => {}
            Err(_) => self.disconnect(),
        }
        outcome
    }

    fn disconnect(&mut self) {
        self.stream = None;
        self.buffer.clear();
    }

    async fn exchange(&mut self, command: &str, args: &[&str]) -> Result<String, UnixctlError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = request_bytes(id, command, args);
        let path = self.path.clone();
        let io_error = |source| UnixctlError::Io {
            path: path.clone(),
            command: command.to_string(),
            source,
        };
        let stream = match self.stream.take() {
            Some(stream) => stream,
            None => open(&self.path).await?,
        };
        let stream = self.stream.insert(stream);
        stream.write_all(&request).await.map_err(io_error)?;
        let mut decoder = Decoder::new(self.options.max_reply_bytes);
        loop {
            let decoded =
                decoder
                    .decode(&mut self.buffer)
                    .map_err(|source| UnixctlError::Framing {
                        path: self.path.clone(),
                        command: command.to_string(),
                        source,
                    })?;
            match decoded {
                Some(message) => {
                    if let Some(outcome) = outcome(&self.path, id, command, message) {
                        return outcome;
                    }
                }
                None => {
                    self.buffer.reserve(READ_CHUNK);
                    let read = stream.read_buf(&mut self.buffer).await.map_err(io_error)?;
                    if read == 0 {
                        return Err(UnixctlError::Closed {
                            path: self.path.clone(),
                            command: command.to_string(),
                        });
                    }
                }
            }
        }
    }
}

/// The outcome of the call when `message` is the reply to request `id`; None for anything else
/// the daemon sent, which is skipped as `ovs-appctl` skips it.
fn outcome(
    path: &Path,
    id: u64,
    command: &str,
    message: Message,
) -> Option<Result<String, UnixctlError>> {
    let Message::Response {
        id: reply_id,
        result,
        error,
    } = message
    else {
        return None;
    };
    if reply_id.as_u64() != Some(id) {
        return None;
    }
    let protocol = |detail: String| UnixctlError::Protocol {
        path: path.to_path_buf(),
        command: command.to_string(),
        detail,
    };
    Some(match (result, error) {
        (Value::String(output), Value::Null) => Ok(output),
        (Value::Null, Value::String(message)) => Err(UnixctlError::Command {
            path: path.to_path_buf(),
            command: command.to_string(),
            message: message.trim_end().to_string(),
        }),
        (Value::Null, Value::Null) => Err(protocol("neither a result nor an error".into())),
        (result, Value::Null) => Err(protocol(format!(
            "the result is {} where a string was expected",
            json_kind(&result)
        ))),
        (Value::Null, error) => Err(protocol(format!(
            "the error is {} where a string was expected",
            json_kind(&error)
        ))),
        (_, _) => Err(protocol("both a result and an error".into())),
    })
}

async fn open(path: &Path) -> Result<UnixStream, UnixctlError> {
    UnixStream::connect(path)
        .await
        .map_err(|source| UnixctlError::Connect {
            path: path.to_path_buf(),
            source,
        })
}

/// A command name as the daemon looks it up: non-empty, no whitespace or control characters
/// (`ovs-appctl` passes argv[1] as it is; a name with a space can only be a mistake).
fn check_command(command: &str) -> Result<(), UnixctlError> {
    let bad = |reason| {
        Err(UnixctlError::BadCommand {
            command: command.to_string(),
            reason,
        })
    };
    if command.is_empty() {
        return bad("empty");
    }
    if command.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("contains whitespace or a control character");
    }
    Ok(())
}

fn request_bytes(id: u64, command: &str, args: &[&str]) -> Vec<u8> {
    let params = args
        .iter()
        .map(|arg| Value::String(arg.to_string()))
        .collect();
    let mut out = Vec::new();
    Message::Request {
        id: Value::from(id),
        method: command.to_string(),
        params: Value::Array(params),
    }
    .encode(&mut out);
    out
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The control socket `ovs-appctl -t TARGET` would use: TARGET itself when it is a path
/// (starts with `/`), else `RUNDIR/TARGET.PID.ctl` with the PID from `RUNDIR/TARGET.pid`
/// (the name a daemon started without `--unixctl=` listens on).
pub fn resolve_target(target: &str, rundir: &Path) -> Result<PathBuf, UnixctlError> {
    if target.starts_with('/') {
        return Ok(PathBuf::from(target));
    }
    let failed = |detail: String| UnixctlError::Target {
        target: target.to_string(),
        detail,
    };
    if target.is_empty() || target.contains('/') {
        return Err(failed(
            "expected a socket path (starting with /) or a daemon name such as ovs-vswitchd".into(),
        ));
    }
    let pidfile = rundir.join(format!("{target}.pid"));
    let text = std::fs::read_to_string(&pidfile)
        .map_err(|e| failed(format!("cannot read pidfile {}: {e}", pidfile.display())))?;
    let pid: u32 = text.trim().parse().map_err(|_| {
        failed(format!(
            "pidfile {} holds {:?}, not a process id",
            pidfile.display(),
            text.trim()
        ))
    })?;
    Ok(rundir.join(format!("{target}.{pid}.ctl")))
}

/// Where ovs-vswitchd's control socket is: the config's `vswitchd_ctl` (a socket path, or a
/// daemon name resolved through its pidfile in the run directory as `ovs-appctl -t` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VswitchdCtl {
    pub target: String,
    pub rundir: PathBuf,
}

/// OVS's default run directory (`OVS_RUNDIR` overrides it, as for OVS's own tools).
pub const DEFAULT_RUNDIR: &str = "/var/run/openvswitch";

impl VswitchdCtl {
    /// `target` when configured, else `ovs-vswitchd` in the bridge's run directory: the
    /// directory of the OVSDB socket the node uses (OVS keeps both there), or OVS's default.
    pub fn new(target: Option<String>, ovsdb: &str) -> VswitchdCtl {
        let rundir = std::env::var_os("OVS_RUNDIR")
            .map(PathBuf::from)
            .or_else(|| {
                let socket = Path::new(ovsdb.strip_prefix("unix:")?);
                Some(socket.parent()?.to_path_buf())
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNDIR));
        VswitchdCtl {
            target: target.unwrap_or_else(|| "ovs-vswitchd".into()),
            rundir,
        }
    }

    /// The socket path now (a restarted ovs-vswitchd has a new pid, so a new socket name).
    pub fn path(&self) -> Result<PathBuf, UnixctlError> {
        resolve_target(&self.target, &self.rundir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_json_rpc_with_string_params() {
        let bytes = request_bytes(7, "ofproto/trace", &["br0", "in_port=1,ip \"x\""]);
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"id": 7, "method": "ofproto/trace",
                               "params": ["br0", "in_port=1,ip \"x\""]})
        );
    }

    #[test]
    fn command_names_are_checked() {
        assert!(check_command("version").is_ok());
        assert!(check_command("").is_err());
        let err = check_command("ofproto/trace br0").unwrap_err().to_string();
        assert!(err.contains("whitespace"), "{err}");
    }

    #[test]
    fn targets_resolve_as_ovs_appctl_resolves_them() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve_target("/x/vswitchd.ctl", dir.path()).unwrap(),
            PathBuf::from("/x/vswitchd.ctl")
        );
        let err = resolve_target("ovs-vswitchd", dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("ovs-vswitchd.pid"), "{err}");
        std::fs::write(dir.path().join("ovs-vswitchd.pid"), "4242\n").unwrap();
        assert_eq!(
            resolve_target("ovs-vswitchd", dir.path()).unwrap(),
            dir.path().join("ovs-vswitchd.4242.ctl")
        );
        std::fs::write(dir.path().join("ovs-vswitchd.pid"), "x").unwrap();
        let err = resolve_target("ovs-vswitchd", dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a process id"), "{err}");
        assert!(resolve_target("a/b", dir.path()).is_err());
    }

    #[test]
    fn the_control_socket_defaults_to_the_ovsdb_sockets_directory() {
        if std::env::var_os("OVS_RUNDIR").is_some() {
            return;
        }
        let ctl = VswitchdCtl::new(None, "unix:/tmp/ovs1/db.sock");
        assert_eq!(ctl.target, "ovs-vswitchd");
        assert_eq!(ctl.rundir, PathBuf::from("/tmp/ovs1"));
        let ctl = VswitchdCtl::new(None, "tcp:127.0.0.1:6640");
        assert_eq!(ctl.rundir, PathBuf::from(DEFAULT_RUNDIR));
        let ctl = VswitchdCtl::new(Some("/x/vswitchd.ctl".into()), "tcp:127.0.0.1:6640");
        assert_eq!(ctl.path().unwrap(), PathBuf::from("/x/vswitchd.ctl"));
    }
}
