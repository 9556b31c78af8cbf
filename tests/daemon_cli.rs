//! The daemon and its CLI as an operator uses them: `ofnode run` in the namespace of a private
//! Open vSwitch, driven by `ofnode setup / pod add / …`, checked with ovs-ofctl and ovs-vsctl;
//! bad input at the CLI and the API.

mod daemon_common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use daemon_common::*;
use ofnode_harness::{Daemon, Ovs, ONE_NODE_SETUP};

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

    // The node's pods, by their keys.
    let list = daemon.cli(&["pod", "list"]).unwrap();
    assert_eq!(
        list,
        format!(
            "default/pod-0 ip=10.128.0.10 vnid=0 ofport={ofport} veth=veth0\n",
            ofport = ofport.trim()
        ),
    );
    let json: serde_json::Value =
        serde_json::from_str(&daemon.cli(&["pod", "list", "--json"]).unwrap()).unwrap();
    assert_eq!(json["pods"][0]["pod"], "default/pod-0", "{json}");
    assert_eq!(json["pods"][0]["veth"], "veth0", "{json}");
    let status = daemon
        .cli(&["pod", "status", "--pod", "default/pod-0", "--json"])
        .unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["pod"]["ip"], "10.128.0.10", "{status}");
    assert_eq!(status["missing_flows"], serde_json::json!([]), "{status}");

    // Bad input: a clear error, exit status 1, and nothing changes.
    let mut bad = pod_add_args(1);
    let sandbox_at = bad.iter().position(|a| a == "--sandbox").unwrap() + 1;
    bad[sandbox_at] = "not-hex".into();
    let err = cli(&daemon, &bad).unwrap_err();
    assert!(err.contains("sandbox id"), "{err}");
    // A pod is named NAMESPACE/NAME, as Kubernetes names it.
    for key in ["pod-1", "Default/pod-1", "default/pod_1"] {
        let mut bad = pod_add_args(1);
        bad[3] = key.into();
        let err = cli(&daemon, &bad).unwrap_err();
        assert!(err.contains("invalid pod"), "{key}: {err}");
    }
    let err = daemon
        .cli(&["pod", "status", "--pod", "default/nosuch"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("default/nosuch"), "{err}");
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
            "--pod",
            "default/pod-0",
            "--veth",
            "veth-name-too-long",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("interface name"), "{err}");
    assert_eq!(ovs.dump_flows("br0").unwrap(), with_pod);

    // The same at the API: JSON errors with the right status.
    let (status, body) = http(&daemon.api, "POST", "/v1/pods", r#"{"veth":"veth1"}"#);
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("\"error\""), "{body}");
    let pod: serde_json::Value = serde_json::json!({
        "pod": "default/pod-1", "veth": "veth1", "ip": "10.128.0.11",
        "mac": "0a:58:0a:80:00:0b", "sandbox": sandbox(1),
    });
    // A bad key, and the namespace field pods had before they were named by it.
    for (field, value, named) in [
        ("pod", "pod-1", "invalid pod"),
        ("pod", "x/Pod", "invalid pod"),
        ("namespace", "default", "unknown field `namespace`"),
    ] {
        let mut bad = pod.clone();
        bad[field] = value.into();
        let (status, body) = http(&daemon.api, "POST", "/v1/pods", &bad.to_string());
        assert_eq!(status, 422, "{field} {value}: {body}");
        assert!(body.contains(named), "{field} {value}: {body}");
    }
    let (status, body) = http(&daemon.api, "GET", "/v1/pods?pod=pod-1", "");
    assert_eq!(status, 400, "{body}");
    let old_query = format!("/v1/pods?sandbox={}", sandbox(0));
    let (status, body) = http(&daemon.api, "GET", &old_query, "");
    assert_eq!(status, 400, "{body}");
    let (status, body) = http(&daemon.api, "GET", "/v1/pods?pod=default/pod-1", "");
    assert_eq!(status, 404, "{body}");
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
        .cli(&["pod", "del", "--pod", "default/pod-0"])
        .unwrap();
    assert_eq!(ovs.dump_flows("br0").unwrap(), base);
    let ports = ovs.vsctl(&["list-ports", "br0"]).unwrap();
    assert!(!ports.lines().any(|p| p == "veth0"), "{ports}");
}

/// `--api` as ovs-vsctl's `--db`: before the subcommand, after it, or from `OFNODE_API`, all
/// reaching the same daemon; the flag wins over the environment; a socket nobody serves is
/// named in the error.
#[test]
fn the_api_socket_goes_before_or_after_the_subcommand_or_in_the_environment() {
    let ovs = Ovs::start().unwrap();
    let daemon = Daemon::start(&ovs, Path::new(OFNODE), &[]).unwrap();
    let run = |args: &[&str], env: Option<&Path>| {
        let mut command = std::process::Command::new(OFNODE);
        command.args(args).env_remove("OFNODE_API");
        if let Some(path) = env {
            command.env("OFNODE_API", path);
        }
        let out = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stdout, stderr)
    };
    let api = daemon.api.to_str().unwrap();
    let before = run(&["--api", api, "status"], None);
    let after = run(&["status", "--api", api], None);
    let from_env = run(&["status"], Some(&daemon.api));
    for (how, (ok, stdout, stderr)) in [("before", &before), ("after", &after), ("env", &from_env)]
    {
        assert!(ok, "{how}: {stderr}");
        assert!(stdout.contains("bridge: br0\n"), "{how}: {stdout}");
    }
    let missing = ovs.dir().join("nobody.sock");
    let (ok, _, stderr) = run(&["status"], Some(&missing));
    assert!(!ok);
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    let (ok, stdout, stderr) = run(&["status", "--api", api], Some(&missing));
    assert!(ok, "the flag wins over OFNODE_API: {stderr}");
    assert!(stdout.contains("bridge: br0\n"), "{stdout}");
}
