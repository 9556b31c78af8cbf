//! The daemon and its CLI as an operator uses them: `ofnode run` in the namespace of a private
//! Open vSwitch, driven by `ofnode setup / pod add / …`, checked with ovs-ofctl and ovs-vsctl.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use ofnode_harness::{Daemon, Ovs, Pki, Tmpfs, ONE_NODE_SETUP};

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");

fn sandbox(n: u32) -> String {
    format!("{n:08x}{}", "ab".repeat(28))
}

/// Creates host veths `vethN` (peer `vpN`) in the OVS namespace, as a CNI plugin would.
fn make_veths(ovs: &Ovs, count: u32) {
    for n in 0..count {
        let (host, peer) = (format!("veth{n}"), format!("vp{n}"));
        ovs.netns()
            .exec_ok(&[
                "ip", "link", "add", &host, "type", "veth", "peer", "name", &peer,
            ])
            .unwrap();
        ovs.netns()
            .exec_ok(&["ip", "link", "set", &host, "up"])
            .unwrap();
    }
}

fn pod_add_args(n: u32) -> Vec<String> {
    vec![
        "pod".into(),
        "add".into(),
        "--veth".into(),
        format!("veth{n}"),
        "--ip".into(),
        format!("10.128.0.{}", n + 10),
        "--mac".into(),
        format!("0a:58:0a:80:00:{:02x}", n + 10),
        "--sandbox".into(),
        sandbox(n),
        "--vnid".into(),
        "0".into(),
    ]
}

fn cli(daemon: &Daemon, args: &[String]) -> Result<String, String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    daemon.cli(&args).map_err(|e| e.to_string())
}

/// One raw HTTP/1.1 exchange on the API socket: (status code, body).
fn http(socket: &Path, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = UnixStream::connect(socket).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: ofnode\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The server may answer (413) and close before it has read an oversized body: a failed
    // write or a reset after the reply is not the test's concern, the reply is.
    let _ = stream.write_all(request.as_bytes());
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let reply = String::from_utf8_lossy(&raw);
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cli_drives_the_daemon_and_refuses_bad_input() {
    let ovs = Ovs::start().unwrap();
    let daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();

    let mode = std::fs::metadata(&daemon.api).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the API socket is root-only");

    let outcome = daemon.cli(ONE_NODE_SETUP).unwrap();
    assert_eq!(outcome.trim(), "built", "{}", daemon.log_tail(20));
    let again = daemon.cli(ONE_NODE_SETUP).unwrap();
    assert_eq!(again.trim(), "already_set_up");
    let base = ovs.dump_flows("br0").unwrap();
    assert!(
        base.iter()
            .any(|f| f.contains("table=253") && f.contains("note:00.03")),
        "{base:#?}"
    );

    make_veths(&ovs, 1);
    let ofport = cli(&daemon, &pod_add_args(0)).unwrap();
    let oracle_ofport = ovs.applied_ofport("veth0", Duration::from_secs(10));
    assert_eq!(ofport.trim().parse().ok(), oracle_ofport);
    let with_pod = ovs.dump_flows("br0").unwrap();
    assert_eq!(with_pod.len(), base.len() + 4);

    // `ofnode dump-flows` prints what ovs-ofctl prints.
    let ours: Vec<String> = daemon.dump_flows().unwrap();
    assert_eq!(ours, with_pod);
    let table70 = daemon.cli(&["dump-flows", "--table", "70"]).unwrap();
    assert_eq!(table70.lines().count(), 2, "{table70}");

    // Bad input: a clear error, exit status 1, and nothing changes.
    let mut bad = pod_add_args(1);
    bad[9] = "not-hex".into();
    let err = cli(&daemon, &bad).unwrap_err();
    assert!(err.contains("sandbox id"), "{err}");
    let err = daemon
        .cli(&[
            "service",
            "add",
            "--ip",
            "172.30.0.9",
            "--vnid",
            "1",
            "--port",
            "sctp/9",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("only TCP and UDP"), "{err}");
    let err = daemon
        .cli(&[
            "pod",
            "del",
            "--veth",
            "veth-name-too-long",
            "--ip",
            "10.128.0.10",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("interface name"), "{err}");
    assert_eq!(ovs.dump_flows("br0").unwrap(), with_pod);

    // The same at the API: JSON errors with the right status.
    let (status, body) = http(&daemon.api, "POST", "/v1/pods", r#"{"veth":"veth1"}"#);
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("\"error\""), "{body}");
    let (status, body) = http(&daemon.api, "POST", "/v1/pods", "{not json");
    assert_eq!(status, 400, "{body}");
    let (status, _) = http(&daemon.api, "GET", "/v1/nothing", "");
    assert_eq!(status, 404);
    let huge = format!(r#"{{"veth":"{}"}}"#, "x".repeat(2 << 20));
    let (status, _) = http(&daemon.api, "POST", "/v1/pods", &huge);
    assert_eq!(status, 413);
    assert_eq!(ovs.dump_flows("br0").unwrap(), with_pod);

    // Status and metrics.
    let status = daemon.status_json().unwrap();
    assert_eq!(status["switch_connected"], true, "{status}");
    assert_eq!(status["set_up"], true, "{status}");
    assert_eq!(status["pods"], 1, "{status}");
    let (code, metrics) = http(&daemon.api, "GET", "/metrics", "");
    assert_eq!(code, 200);
    assert!(metrics.contains("ofnode_transactions_total"), "{metrics}");

    // Teardown restores the table exactly.
    daemon
        .cli(&["pod", "del", "--veth", "veth0", "--ip", "10.128.0.10"])
        .unwrap();
    assert_eq!(ovs.dump_flows("br0").unwrap(), base);
    let ports = ovs.vsctl(&["list-ports", "br0"]).unwrap();
    assert!(!ports.lines().any(|p| p == "veth0"), "{ports}");
}

/// kill -9 of the daemon during a stream of pod adds: after a restart every pod whose add was
/// acknowledged is on the switch, and the switch holds exactly the flows of the pods the daemon
/// knows (nothing stale, nothing half-done).
#[test]
fn daemon_killed_mid_stream_loses_no_acknowledged_pod() {
    const PODS: u32 = 40;
    let ovs = Ovs::start().unwrap();
    let mut daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    make_veths(&ovs, PODS);

    let api = daemon.api.clone();
    let adder = std::thread::spawn(move || {
        let mut acknowledged = Vec::new();
        for n in 0..PODS {
            let out = std::process::Command::new(OFNODE)
                .args(pod_add_args(n))
                .arg("--api")
                .arg(&api)
                .output()
                .unwrap();
            if out.status.success() {
                acknowledged.push(n);
            }
        }
        acknowledged
    });
    // Let some adds land, then crash the daemon while the stream goes on.
    wait_for("the first pods", Duration::from_secs(30), || {
        ovs.dump_flows("br0")
            .unwrap()
            .iter()
            .filter(|f| f.contains("table=70"))
            .count()
            >= 6
    });
    daemon.kill9();
    let acknowledged = adder.join().unwrap();
    assert!(!acknowledged.is_empty());
    assert!(
        (acknowledged.len() as u32) < PODS,
        "the crash came too late to test anything"
    );

    daemon.spawn().unwrap();
    // ovs-vswitchd reconnects to the new daemon after its own controller backoff.
    wait_for("the switch to reconnect", Duration::from_secs(15), || {
        daemon.status_json().unwrap()["switch_connected"] == true
    });
    let status = daemon.status_json().unwrap();
    let known = status["pods"].as_u64().unwrap() as usize;
    assert!(known >= acknowledged.len(), "{status}");
    wait_for("the reconciled table", Duration::from_secs(10), || {
        let flows = ovs.dump_flows("br0").unwrap();
        let pods_on_switch = flows
            .iter()
            .filter(|f| f.contains("table=70, priority=100"))
            .count();
        pods_on_switch == known
    });
    let flows = ovs.dump_flows("br0").unwrap();
    for n in &acknowledged {
        let ip = format!("nw_dst=10.128.0.{}", n + 10);
        assert!(
            flows
                .iter()
                .any(|f| f.contains("table=70") && f.contains(&ip)),
            "acknowledged pod {n} lost:\n{flows:#?}"
        );
    }
    // Every pod the daemon knows has exactly its four flows (tables 20 ×2, 40, 70).
    let pod_flows = flows
        .iter()
        .filter(|f| {
            f.contains("priority=100")
                && ["table=20", "table=40", "table=70"]
                    .iter()
                    .any(|t| f.contains(t))
        })
        .count();
    assert_eq!(pod_flows, 4 * known, "{flows:#?}");
    // What ofnode believes is what the switch holds.
    let ours: Vec<String> = daemon.dump_flows().unwrap();
    assert_eq!(ours, flows);
}

/// The state directory's disk fills up: the daemon refuses new pods with an error naming the
/// journal and the cause, keeps serving, takes the refused pod's flows back off the switch, and
/// after a restart with space again has every pod it acknowledged.
#[test]
fn a_full_state_disk_refuses_new_work_and_loses_nothing_acknowledged() {
    const PODS: u32 = 40;
    let ovs = Ovs::start().unwrap();
    // Mounted before the daemon starts (it sees the mount table of that moment); dropped
    // (unmounted) before `ovs`, which removes the directory.
    let disk = Tmpfs::mount(&ovs.dir().join("ofnode/state"), 256).unwrap();
    let mut daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    make_veths(&ovs, PODS);
    let filler = disk.fill().unwrap();

    // The journal's last page may still have room for a few records: add pods until refused.
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for n in 0..PODS {
        match cli(&daemon, &pod_add_args(n)) {
            Ok(_) => acknowledged.push(n),
            Err(error) => {
                refusal = Some((n, error));
                break;
            }
        }
    }
    let (refused, error) = refusal.expect("a full disk never refused a pod");
    assert!(error.contains("No space left on device"), "{error}");
    assert!(error.contains("journal"), "names the file: {error}");
    // Still serving; and the refused pod's flows are taken back off the switch.
    daemon.cli(&["status"]).unwrap();
    let refused_ip = format!("nw_dst=10.128.0.{}", refused + 10);
    wait_for(
        "the refused pod's flows to go",
        Duration::from_secs(15),
        || {
            !ovs.dump_flows("br0")
                .unwrap()
                .iter()
                .any(|f| f.contains(&refused_ip))
        },
    );

    // Space again, and a crash-restart: everything acknowledged is there.
    std::fs::remove_file(filler).unwrap();
    daemon.kill9();
    daemon.spawn().unwrap();
    let status = daemon.status_json().unwrap();
    assert_eq!(
        status["pods"].as_u64(),
        Some(acknowledged.len() as u64),
        "{status}"
    );
    wait_for("the switch to reconnect", Duration::from_secs(15), || {
        daemon.status_json().unwrap()["switch_connected"] == true
    });
    wait_for(
        "every acknowledged pod's flows",
        Duration::from_secs(15),
        || {
            let flows = ovs.dump_flows("br0").unwrap();
            acknowledged.iter().all(|n| {
                let ip = format!("nw_dst=10.128.0.{}", n + 10);
                flows
                    .iter()
                    .any(|f| f.contains("table=70") && f.contains(&ip))
            })
        },
    );
    // The refused pod can be added now; the journal was not left damaged.
    cli(&daemon, &pod_add_args(refused)).unwrap();
    daemon.kill9();
    daemon.spawn().unwrap();
    let status = daemon.status_json().unwrap();
    assert_eq!(
        status["pods"].as_u64(),
        Some(acknowledged.len() as u64 + 1),
        "{status}"
    );
    drop(daemon);
    drop(disk);
}

/// The daemon end to end over TLS: `--openflow pssl:` with `--private-key/--certificate/
/// --ca-cert`; `setup` points br0's controller at `ssl:127.0.0.1:6653` and ovs-vswitchd (with
/// `ovs-vsctl set-ssl`, certificates from the same CA) connects and gets the node's table.
#[test]
fn daemon_serves_the_switch_over_tls() {
    let pki = Pki::new("ofnode test CA").unwrap();
    let switch = pki.issue("br0-switch").unwrap();
    let ours = pki.issue("ofnode").unwrap();
    let ovs = Ovs::start().unwrap();
    let path = |p: &Path| p.display().to_string();
    ovs.vsctl(&[
        "set-ssl",
        &path(&switch.private_key),
        &path(&switch.certificate),
        &path(&switch.ca_cert),
    ])
    .unwrap();
    let daemon = Daemon::start_with_openflow(
        &ovs,
        Path::new(OFNODE),
        "pssl:6653:127.0.0.1",
        &[
            "--private-key",
            &path(&ours.private_key),
            "--certificate",
            &path(&ours.certificate),
            "--ca-cert",
            &path(&ours.ca_cert),
        ],
    )
    .unwrap();
    let outcome = daemon.cli(ONE_NODE_SETUP).unwrap();
    assert_eq!(outcome.trim(), "built", "{}", daemon.log_tail(20));
    let controller = ovs.vsctl(&["get-controller", "br0"]).unwrap();
    assert_eq!(controller.trim(), "ssl:127.0.0.1:6653");
    let flows = ovs.dump_flows("br0").unwrap();
    assert!(
        flows
            .iter()
            .any(|f| f.contains("table=253") && f.contains("note:00.03")),
        "{flows:#?}"
    );
}
