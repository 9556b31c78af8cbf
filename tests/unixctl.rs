//! The unixctl client against a real ovs-vswitchd's control socket, with `ovs-appctl` as the
//! oracle; a scripted peer only for what a real daemon never does (garbage, wrong types).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ofnode::unixctl::{Unixctl, UnixctlError, UnixctlOptions};
use ofnode_harness::Ovs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn options(timeout: Duration) -> UnixctlOptions {
    UnixctlOptions {
        timeout,
        ..UnixctlOptions::default()
    }
}

fn ovs_with_bridge() -> Ovs {
    ofnode_harness::init();
    let ovs = Ovs::start().expect("private OVS");
    ovs.add_bridge("br0").expect("br0");
    ovs.ofctl(
        "add-flow",
        "br0",
        &["table=0, priority=10, in_port=1, ip, actions=goto_table:5"],
    )
    .expect("flow");
    ovs.ofctl("add-flow", "br0", &["table=5, priority=0, actions=drop"])
        .expect("flow");
    ovs
}

/// What `ovs-appctl -t SOCKET ARGS…` prints on stdout, or its stderr when it fails.
fn appctl(ovs: &Ovs, args: &[&str]) -> Result<String, String> {
    let out = Command::new("ovs-appctl")
        .arg("-t")
        .arg(ovs.vswitchd_ctl())
        .args(args)
        .output()
        .expect("ovs-appctl runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test]
async fn commands_answer_exactly_as_ovs_appctl_prints_them() {
    let ovs = ovs_with_bridge();
    let mut ctl = Unixctl::connect(ovs.vswitchd_ctl(), UnixctlOptions::default())
        .await
        .expect("connects");
    let version = ctl.call("version", &[]).await.expect("version");
    assert!(
        version.starts_with("ovs-vswitchd (Open vSwitch) "),
        "{version:?}"
    );
    assert_eq!(version, appctl(&ovs, &["version"]).unwrap());
    // ofproto/trace with the flow in one argument, as ovs-appctl passes it.
    let flow = "in_port=1,ip,nw_src=192.0.2.1,nw_dst=192.0.2.2";
    let trace = ctl
        .call("ofproto/trace", &["br0", flow])
        .await
        .expect("trace");
    assert!(trace.contains("goto_table:5"), "{trace}");
    assert_eq!(
        trace,
        appctl(&ovs, &["ofproto/trace", "br0", flow]).unwrap()
    );
    // The same connection serves any number of calls in a row.
    for _ in 0..20 {
        assert_eq!(ctl.call("version", &[]).await.unwrap(), version);
    }
}

#[tokio::test]
async fn refusals_carry_the_daemons_own_text_and_keep_the_connection() {
    let ovs = ovs_with_bridge();
    let mut ctl = Unixctl::new(ovs.vswitchd_ctl(), UnixctlOptions::default());
    let cases: [(&str, &[&str]); 4] = [
        ("no-such/command", &[]),
        ("version", &["extra"]),
        ("ofproto/trace", &["br0", "in_port=1,no_such_field=1"]),
        ("ofproto/trace", &["br9", "in_port=1"]),
    ];
    for (command, args) in cases {
        let err = ctl.call(command, args).await.unwrap_err();
        let message = err.command_message().unwrap_or_else(|| panic!("{err}"));
        // ovs-appctl prints the daemon's text, then its own line.
        let mut argv = vec![command];
        argv.extend_from_slice(args);
        let stderr = appctl(&ovs, &argv).unwrap_err();
        assert_eq!(stderr.lines().next(), Some(message), "{command}");
        let text = err.to_string();
        assert!(text.contains("vswitchd.ctl"), "names the socket: {text}");
        assert!(text.contains(command), "names the command: {text}");
        // The refusal was a complete reply: the next call on the connection works.
        assert!(ctl.call("version", &[]).await.is_ok());
    }
    let err = ctl.call("no-such/command", &[]).await.unwrap_err();
    assert_eq!(
        err.command_message(),
        Some(
            "\"no-such/command\" is not a valid command (use \"list-commands\" to see a list \
             of valid commands)"
        )
    );
    let err = ctl.call("bad command", &[]).await.unwrap_err();
    assert!(matches!(err, UnixctlError::BadCommand { .. }), "{err}");
}

#[tokio::test]
async fn a_missing_socket_is_named_with_what_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("vswitchd.ctl");
    let err = Unixctl::connect(&missing, UnixctlOptions::default())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, UnixctlError::Connect { .. }), "{text}");
    assert!(text.contains(&missing.display().to_string()), "{text}");
    assert!(text.contains("--unixctl"), "{text}");
    // A socket file nobody listens on any more (the daemon died without removing it).
    let stale = dir.path().join("stale.ctl");
    bind_without_listening(&stale);
    let mut ctl = Unixctl::new(&stale, UnixctlOptions::default());
    let err = ctl.call("version", &[]).await.unwrap_err();
    assert!(err.to_string().contains("has exited"), "{err}");
}

#[tokio::test]
async fn a_stopped_daemon_times_out_and_the_next_call_after_it_resumes_works() {
    let ovs = ovs_with_bridge();
    let mut ctl = Unixctl::connect(ovs.vswitchd_ctl(), options(Duration::from_millis(500)))
        .await
        .unwrap();
    let started = Instant::now();
    let err = {
        let _paused = ovs.pause_vswitchd();
        ctl.call("version", &[]).await.unwrap_err()
    };
    assert!(matches!(err, UnixctlError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("vswitchd.ctl"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "bounded");
    // The late reply to the timed-out call is never taken for this one's.
    let trace = ctl
        .call("ofproto/trace", &["br0", "in_port=1,ip"])
        .await
        .expect("works again once resumed");
    assert!(trace.starts_with("Flow: "), "{trace}");
}

#[tokio::test]
async fn a_restarted_daemon_is_reached_again_by_the_next_call() {
    let ovs = ovs_with_bridge();
    let mut ctl = Unixctl::connect(ovs.vswitchd_ctl(), UnixctlOptions::default())
        .await
        .unwrap();
    ctl.call("version", &[]).await.unwrap();
    ovs.kill_vswitchd();
    let err = ctl.call("version", &[]).await.unwrap_err();
    assert!(
        matches!(
            err,
            UnixctlError::Closed { .. } | UnixctlError::Io { .. } | UnixctlError::Connect { .. }
        ),
        "{err}"
    );
    ovs.start_vswitchd().expect("restart");
    let version = ctl.call("version", &[]).await.expect("reconnected");
    assert!(version.starts_with("ovs-vswitchd"), "{version}");
}

#[tokio::test]
async fn a_reply_over_the_size_limit_is_refused_and_the_client_recovers() {
    let ovs = ovs_with_bridge();
    let mut ctl = Unixctl::new(
        ovs.vswitchd_ctl(),
        UnixctlOptions {
            max_reply_bytes: 256,
            ..UnixctlOptions::default()
        },
    );
    let listing = appctl(&ovs, &["list-commands"]).unwrap();
    assert!(listing.len() > 1000, "list-commands is long");
    let err = ctl.call("list-commands", &[]).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("256-byte limit"), "{text}");
    assert!(text.contains("list-commands"), "{text}");
    // A fresh connection serves the next (small) reply.
    assert!(ctl.call("version", &[]).await.is_ok());
}

/// A peer that answers the first request of each connection with `reply` (the request's id
/// substituted for `ID`), then keeps the connection open.
async fn scripted_peer(reply: &'static str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.ctl");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let Ok(n) = stream.read(&mut buf).await else {
                continue;
            };
            let request: serde_json::Value = match serde_json::from_slice(&buf[..n]) {
                Ok(value) => value,
                Err(_) => continue,
            };
            let id = request["id"].to_string();
            let _ = stream.write_all(reply.replace("ID", &id).as_bytes()).await;
            open.push(stream);
        }
    });
    (dir, path)
}

#[tokio::test]
async fn malformed_replies_are_protocol_errors_not_results() {
    let cases = [
        (r#"{"id":ID,"result":{"a":1},"error":null}"#, "an object"),
        (r#"{"id":ID,"result":null,"error":7}"#, "a number"),
        (r#"{"id":ID,"result":null,"error":null}"#, "neither"),
        (r#"{"id":ID,"result":"x","error":"y"}"#, "both"),
        (r#"[1,2,3]"#, "JSON object"),
        (r#"{"id":ID,"result":"unterminated"#, "no reply"),
    ];
    for (reply, expected) in cases {
        let (_dir, path) = scripted_peer(reply).await;
        let mut ctl = Unixctl::new(&path, options(Duration::from_secs(1)));
        let err = ctl.call("version", &[]).await.unwrap_err();
        assert!(err.to_string().contains(expected), "{reply}: {err}");
    }
    // A reply to another request is skipped, as ovs-appctl skips it; the call then times out.
    let (_dir, path) = scripted_peer(r#"{"id":999,"result":"not yours","error":null}"#).await;
    let mut ctl = Unixctl::new(&path, options(Duration::from_millis(300)));
    let err = ctl.call("version", &[]).await.unwrap_err();
    assert!(matches!(err, UnixctlError::Timeout { .. }), "{err}");
}

/// Leaves a socket file at `path` that refuses every connection. A listener bound and dropped
/// would do only in a process that never forks: another test's fork can hold a copy of its
/// descriptor for a moment, and a connection made then is accepted into the backlog and reset
/// (ECONNRESET, not ECONNREFUSED). A socket that never listened refuses in every copy.
fn bind_without_listening(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: a plain socket(2)/bind(2)/close(2) on a zeroed sockaddr_un whose path fits
    // (asserted) and is NUL-terminated by the zeroing.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        assert!(bytes.len() < addr.sun_path.len(), "{}", path.display());
        for (slot, byte) in addr.sun_path.iter_mut().zip(bytes) {
            *slot = *byte as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let bound = libc::bind(fd, std::ptr::addr_of!(addr).cast(), len);
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        libc::close(fd);
    }
}
