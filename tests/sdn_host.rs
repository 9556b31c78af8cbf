//! Setup's host network part (the seed's SetupSDN) over rtnetlink, inside the OVS namespace:
//! tun0's address, MTU and state, the routes, and IPv4 forwarding, checked with `ip` and
//! /proc/sys inside the namespace as the oracle.

mod sdn_common;

use ofnode::sdn::{Mode, SetupOutcome};
use sdn_common::*;

fn in_ns(f: &Fixture, argv: &[&str]) -> String {
    f.ovs
        .netns()
        .exec_ok(argv)
        .expect("command in the OVS namespace")
}

fn routes(f: &Fixture) -> Vec<String> {
    in_ns(f, &["ip", "-4", "route", "show"])
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_configures_tun0_routes_and_forwarding() {
    let f = Fixture::start_with(|_, cfg| {
        cfg.manage_host_network = true;
        cfg.mtu = 1400;
    })
    .await;
    let node = &f.node;
    assert_eq!(
        in_ns(&f, &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(),
        "0"
    );

    let outcome = node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    assert_eq!(outcome, SetupOutcome::Built);
    assert_flows(&f.ovs, &base_flows(Mode::Subnet));

    let addr = in_ns(&f, &["ip", "-4", "-o", "addr", "show", "dev", "tun0"]);
    assert!(addr.contains("inet 10.128.0.1/23"), "{addr}");
    assert_eq!(addr.lines().count(), 1, "only the gateway address: {addr}");
    let link = in_ns(&f, &["ip", "-o", "link", "show", "dev", "tun0"]);
    assert!(link.contains("mtu 1400"), "{link}");
    assert!(link.contains(",UP"), "{link}");

    let table = routes(&f);
    assert!(
        table
            .iter()
            .any(|r| r.starts_with("10.128.0.0/14 dev tun0") && r.contains("scope link")),
        "cluster network route missing: {table:?}"
    );
    assert!(
        table
            .iter()
            .any(|r| r.starts_with("172.30.0.0/16 dev tun0") && r.contains("scope link")),
        "service network route missing: {table:?}"
    );
    assert!(
        !table.iter().any(|r| r.starts_with("10.128.0.0/23")),
        "the local subnet route on tun0 must be gone: {table:?}"
    );
    assert_eq!(
        in_ns(&f, &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(),
        "1"
    );
    assert_eq!(
        in_ns(&f, &["cat", "/proc/sys/net/ipv4/conf/tun0/forwarding"]).trim(),
        "1"
    );

    // Again with the same parameters: nothing changes, on the host either.
    let before = (
        routes(&f),
        in_ns(&f, &["ip", "-4", "-o", "addr", "show", "dev", "tun0"]),
    );
    let outcome = node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    assert_eq!(outcome, SetupOutcome::AlreadySetUp);
    let after = (
        routes(&f),
        in_ns(&f, &["ip", "-4", "-o", "addr", "show", "dev", "tun0"]),
    );
    assert_eq!(before, after);
}
