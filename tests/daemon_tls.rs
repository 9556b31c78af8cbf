//! The daemon serving the switch over TLS.

mod daemon_common;

use std::path::Path;

use daemon_common::*;
use ofnode_harness::{Daemon, Ovs, Pki, ONE_NODE_SETUP};

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
