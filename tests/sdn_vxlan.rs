//! The node keeps a kernel VXLAN device (issue 6's VxlanManager) in line with its host
//! subnets: static mode programs each remote host's FDB and neighbour entries and its route;
//! deleting the host subnet retracts them. Checked with `bridge`/`ip` inside the namespace.

mod sdn_common;

use ofnode::sdn::{HostSubnet, Mode, Vnid};
use sdn_common::*;

fn in_ns(f: &Fixture, argv: &[&str]) -> String {
    f.ovs
        .netns()
        .exec_ok(argv)
        .expect("command in the OVS namespace")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_subnets_program_the_vxlan_device() {
    let settings: ofnode::netlink::VxlanSettings =
        serde_json::from_str(r#"{"address": "10.128.0.1/14", "port": 4789, "mode": "static"}"#)
            .unwrap();
    let mut f = Fixture::start_with(|_, cfg| {
        cfg.vxlan = Some(settings.clone());
    })
    .await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    let link = in_ns(&f, &["ip", "-d", "link", "show", "dev", "ofnode.1"]);
    assert!(link.contains("vxlan id 1"), "{link}");

    let host = HostSubnet {
        host_ip: "192.0.2.3".parse().unwrap(),
        subnet: "10.130.2.0/23".parse().unwrap(),
        fixed_vnid: Some(Vnid::new(77).unwrap()),
        vtep_mac: Some("0a:00:00:00:00:03".parse().unwrap()),
    };
    f.node.hostsubnet_add(&host).await.unwrap();
    let fdb = in_ns(&f, &["bridge", "fdb", "show", "dev", "ofnode.1"]);
    assert!(fdb.contains("0a:00:00:00:00:03 dst 192.0.2.3"), "{fdb}");
    let neigh = in_ns(&f, &["ip", "neigh", "show", "dev", "ofnode.1"]);
    assert!(
        neigh.contains("10.130.2.1 lladdr 0a:00:00:00:00:03"),
        "{neigh}"
    );
    let routes = in_ns(&f, &["ip", "route", "show", "10.130.2.0/23"]);
    assert!(routes.contains("via 10.130.2.1 dev ofnode.1"), "{routes}");
    let status = f.node.status().vxlan.unwrap();
    assert_eq!((status.device.as_str(), status.hosts), ("ofnode.1", 1));

    // A restarted node programs the device from its state.
    f.restart_node_with(|_, cfg| {
        cfg.vxlan = Some(settings.clone());
    })
    .await;
    assert_eq!(f.node.status().vxlan.unwrap().hosts, 1);

    f.node
        .hostsubnet_del(host.host_ip, host.subnet)
        .await
        .unwrap();
    let fdb = in_ns(&f, &["bridge", "fdb", "show", "dev", "ofnode.1"]);
    assert!(!fdb.contains("0a:00:00:00:00:03"), "{fdb}");
    let neigh = in_ns(&f, &["ip", "neigh", "show", "dev", "ofnode.1"]);
    assert!(!neigh.contains("0a:00:00:00:00:03"), "{neigh}");
    assert_eq!(f.node.status().vxlan.unwrap().hosts, 0);
    assert_flows(&f.ovs, &base_flows(Mode::Subnet));
}

const DEV: &str = "ofnode.1";

fn static_settings() -> ofnode::netlink::VxlanSettings {
    serde_json::from_str(r#"{"address": "10.128.0.1/14", "port": 4789}"#).unwrap()
}

fn host_subnet(host_ip: &str, subnet: &str, mac: &str) -> HostSubnet {
    HostSubnet {
        host_ip: host_ip.parse().unwrap(),
        subnet: subnet.parse().unwrap(),
        fixed_vnid: None,
        vtep_mac: Some(mac.parse().unwrap()),
    }
}

/// A set-up node whose VXLAN device runs with `settings`.
async fn vxlan_node(settings: ofnode::netlink::VxlanSettings) -> Fixture {
    let f = Fixture::start_with(|_, cfg| cfg.vxlan = Some(settings)).await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    f
}

/// `bridge fdb`, `ip neigh` and the gateway routes of the device, as the kernel shows them.
struct Tables {
    fdb: String,
    neigh: String,
    routes: String,
}

fn tables(f: &Fixture) -> Tables {
    Tables {
        fdb: in_ns(f, &["bridge", "fdb", "show", "dev", DEV]),
        neigh: in_ns(f, &["ip", "-4", "neigh", "show", "dev", DEV]),
        routes: in_ns(f, &["ip", "-4", "route", "show", "dev", DEV]),
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "fdb:\n{}neigh:\n{}routes:\n{}",
            self.fdb, self.neigh, self.routes
        )
    }
}

/// Polls `done` for up to 20 s (a deadline against hangs, not a timing assertion).
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    done()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_with_two_subnets_keeps_the_other_when_one_is_deleted() {
    let f = vxlan_node(static_settings()).await;
    let first = host_subnet("192.0.2.3", "10.130.2.0/23", "0a:00:00:00:00:03");
    let second = host_subnet("192.0.2.3", "10.130.4.0/23", "0a:00:00:00:00:03");
    f.node.hostsubnet_add(&first).await.unwrap();
    f.node.hostsubnet_add(&second).await.unwrap();
    // The node itself listed among the host subnets (its own subnet holds the device's
    // address): nothing is programmed for it.
    let own = host_subnet("192.0.2.1", "10.128.0.0/23", "0a:00:00:00:00:01");
    f.node.hostsubnet_add(&own).await.unwrap();
    let t = tables(&f);
    assert!(t.routes.contains("10.130.2.0/23 via 10.130.2.1"), "{t:?}");
    assert!(t.routes.contains("10.130.4.0/23 via 10.130.4.1"), "{t:?}");
    assert!(
        t.neigh.contains("10.130.4.1 lladdr 0a:00:00:00:00:03"),
        "{t:?}"
    );
    assert!(
        !t.fdb.contains("0a:00:00:00:00:01"),
        "no entry to itself: {t:?}"
    );
    assert!(
        !t.neigh.contains("10.128.0.1 "),
        "no entry to itself: {t:?}"
    );
    let status = f.node.status().vxlan.unwrap();
    assert_eq!((status.hosts, status.subnets), (1, 2), "{status:?}");

    f.node
        .hostsubnet_del(second.host_ip, second.subnet)
        .await
        .unwrap();
    let t = tables(&f);
    assert!(t.routes.contains("10.130.2.0/23 via 10.130.2.1"), "{t:?}");
    assert!(
        t.neigh.contains("10.130.2.1 lladdr 0a:00:00:00:00:03"),
        "{t:?}"
    );
    assert!(t.fdb.contains("0a:00:00:00:00:03 dst 192.0.2.3"), "{t:?}");
    assert!(!t.routes.contains("10.130.4.0/23"), "{t:?}");
    assert!(!t.neigh.contains("10.130.4.1 "), "{t:?}");
    let status = f.node.status().vxlan.unwrap();
    assert_eq!((status.hosts, status.subnets), (1, 1), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_moved_to_another_host_points_there_only() {
    let f = vxlan_node(static_settings()).await;
    let x = host_subnet("192.0.2.3", "10.130.2.0/23", "0a:00:00:00:00:03");
    let y = host_subnet("192.0.2.4", "10.130.2.0/23", "0a:00:00:00:00:04");
    f.node.hostsubnet_add(&x).await.unwrap();
    f.node.hostsubnet_add(&y).await.unwrap();
    let t = tables(&f);
    assert!(t.fdb.contains("0a:00:00:00:00:04 dst 192.0.2.4"), "{t:?}");
    assert!(!t.fdb.contains("0a:00:00:00:00:03"), "X is gone: {t:?}");
    assert!(
        t.neigh.contains("10.130.2.1 lladdr 0a:00:00:00:00:04"),
        "{t:?}"
    );
    assert!(!t.neigh.contains("0a:00:00:00:00:03"), "{t:?}");
    assert!(t.routes.contains("10.130.2.0/23 via 10.130.2.1"), "{t:?}");
    assert_eq!(f.node.status().vxlan.unwrap().hosts, 1);

    // Removing the subnet as X's is refused and leaves Y's route alone.
    let err = f
        .node
        .hostsubnet_del(x.host_ip, x.subnet)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("belongs to host 192.0.2.4"),
        "{err}"
    );
    let t = tables(&f);
    assert!(t.routes.contains("10.130.2.0/23 via 10.130.2.1"), "{t:?}");
    assert!(
        t.neigh.contains("10.130.2.1 lladdr 0a:00:00:00:00:04"),
        "{t:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reconcile_is_reported_and_retried_until_it_succeeds() {
    let f = vxlan_node(static_settings()).await;
    // A device that is down refuses the subnet's onlink route (ENETDOWN).
    in_ns(&f, &["ip", "link", "set", DEV, "down"]);
    let host = host_subnet("192.0.2.3", "10.130.2.0/23", "0a:00:00:00:00:03");
    // The change is journaled and on the switch: the call succeeds, the device lags.
    f.node.hostsubnet_add(&host).await.unwrap();
    let status = f.node.status().vxlan.unwrap();
    assert!(status.reconcile_failures >= 1, "{status:?}");
    let error = status.last_error.expect("the failure is shown");
    assert!(error.contains("10.130.2.0/23"), "{error}");
    assert!(f.node.status().host_subnets == 1);

    // The background retry re-applies the device's configuration (link up) and the entries.
    let repaired = eventually(|| {
        f.node.status().vxlan.unwrap().last_error.is_none()
            && tables(&f).routes.contains("10.130.2.0/23 via 10.130.2.1")
    })
    .await;
    assert!(repaired, "{:?} {:?}", f.node.status().vxlan, tables(&f));
    let t = tables(&f);
    assert!(
        t.neigh.contains("10.130.2.1 lladdr 0a:00:00:00:00:03"),
        "{t:?}"
    );
    assert!(
        t.routes.contains("10.128.0.0/14"),
        "the cluster route is back: {t:?}"
    );

    // Entries flushed behind ofnode's back come back with the next repair (here asked for).
    in_ns(
        &f,
        &["ip", "neigh", "flush", "dev", DEV, "nud", "permanent"],
    );
    in_ns(&f, &["ip", "route", "del", "10.130.2.0/23"]);
    let t = tables(&f);
    assert!(!t.neigh.contains("10.130.2.1 "), "{t:?}");
    f.node.vxlan_reprogram().await.unwrap();
    let t = tables(&f);
    assert!(
        t.neigh.contains("10.130.2.1 lladdr 0a:00:00:00:00:03"),
        "{t:?}"
    );
    assert!(t.routes.contains("10.130.2.0/23 via 10.130.2.1"), "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_mode_through_the_node_answers_an_l3_miss() {
    let settings: ofnode::netlink::VxlanSettings =
        serde_json::from_str(r#"{"address": "10.128.0.1/14", "port": 4789, "mode": "miss"}"#)
            .unwrap();
    let f = vxlan_node(settings).await;
    let host = host_subnet("192.0.2.3", "10.130.2.0/23", "0a:00:00:00:00:03");
    f.node.hostsubnet_add(&host).await.unwrap();
    let t = tables(&f);
    assert!(!t.neigh.contains("lladdr"), "nothing up front: {t:?}");
    assert!(!t.routes.contains("10.130.2.0/23"), "{t:?}");

    // A packet to an address of the remote subnet makes the kernel ask for its neighbour.
    let answered = miss_answered(&f, "10.130.2.7", "0a:00:00:00:00:03").await;
    assert!(answered, "{:?} {:?}", tables(&f), f.node.status().vxlan);
    let status = f.node.status().vxlan.unwrap();
    assert_eq!(status.mode, ofnode::netlink::VxlanMode::Miss);
    assert!(status.miss_loop_running);
    assert!(status.misses.seen >= 1, "{:?}", status.misses);
    assert!(status.misses.answered >= 1, "{:?}", status.misses);

    // The subnet moves to another host: the old answer goes, the next miss gets the new one.
    let moved = host_subnet("192.0.2.4", "10.130.2.0/23", "0a:00:00:00:00:04");
    f.node.hostsubnet_add(&moved).await.unwrap();
    assert!(
        !tables(&f).neigh.contains("0a:00:00:00:00:03"),
        "{:?}",
        tables(&f)
    );
    let answered = miss_answered(&f, "10.130.2.7", "0a:00:00:00:00:04").await;
    assert!(answered, "{:?}", tables(&f));
}

/// Pings `ip` from the node's namespace until the kernel's neighbour miss for it has been
/// answered with `mac` (the first packets are lost while the miss is answered).
async fn miss_answered(f: &Fixture, ip: &str, mac: &str) -> bool {
    let entry = format!("{ip} lladdr {mac}");
    eventually(|| {
        let _ = f
            .ovs
            .netns()
            .exec_status(&["ping", "-n", "-c", "1", "-W", "1", ip]);
        tables(f).neigh.contains(&entry)
    })
    .await
}

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");

/// The daemon with a `[vxlan]` section, driven by the CLI: `ofnode status --json` shows the
/// device, its mode and counters; a bad `--vtep-mac` and a bad `[vxlan]` section are refused
/// with a message naming the value.
#[test]
fn the_cli_shows_the_vxlan_device_and_refuses_bad_vxlan_input() {
    use ofnode_harness::{Daemon, Ovs, ONE_NODE_SETUP};
    let ovs = Ovs::start().unwrap();
    let config = ovs.dir().join("vxlan.toml");
    std::fs::write(
        &config,
        "[vxlan]\naddress = \"10.128.0.1/14\"\nport = 4789\nmode = \"static\"\n",
    )
    .unwrap();
    let config_arg = config.display().to_string();
    let daemon = Daemon::start(
        &ovs,
        std::path::Path::new(OFNODE),
        &["--config", &config_arg],
    )
    .unwrap();
    daemon.cli(ONE_NODE_SETUP).unwrap();
    daemon
        .cli(&[
            "hostsubnet",
            "add",
            "--host-ip",
            "192.0.2.3",
            "--subnet",
            "10.130.2.0/23",
            "--vtep-mac",
            "0a:00:00:00:00:03",
        ])
        .unwrap();
    let status = daemon.status_json().unwrap();
    let vxlan = &status["vxlan"];
    assert_eq!(vxlan["device"], DEV, "{status}");
    assert_eq!(vxlan["mode"], "static", "{status}");
    assert_eq!(vxlan["hosts"], 1, "{status}");
    assert_eq!(vxlan["subnets"], 1, "{status}");
    assert_eq!(vxlan["reconcile_failures"], 0, "{status}");
    assert!(vxlan["last_error"].is_null(), "{status}");
    for counter in ["seen", "answered", "unknown", "overruns"] {
        assert_eq!(vxlan["misses"][counter], 0, "{counter}: {status}");
    }
    let routes = ovs
        .netns()
        .exec_ok(&["ip", "-4", "route", "show", "dev", DEV])
        .unwrap();
    assert!(routes.contains("10.130.2.0/23 via 10.130.2.1"), "{routes}");

    let err = daemon
        .cli(&[
            "hostsubnet",
            "add",
            "--host-ip",
            "192.0.2.4",
            "--subnet",
            "10.130.4.0/23",
            "--vtep-mac",
            "0a:00:00:00:04",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("0a:00:00:00:04"), "{err}");
    let status = daemon.status_json().unwrap();
    assert_eq!(status["vxlan"]["subnets"], 1, "nothing changed: {status}");
    drop(daemon);

    // A bad [vxlan] section stops the daemon at start with a message naming the value.
    for (section, named) in [
        ("address = \"fd00::1/64\"", "fd00::1/64"),
        (
            "address = \"10.128.0.1/14\"\nmode = \"sometimes\"",
            "sometimes",
        ),
        (
            "address = \"10.128.0.1/14\"\nname = \"a-name-longer-than-15\"",
            "a-name-longer-than-15",
        ),
    ] {
        std::fs::write(&config, format!("[vxlan]\n{section}\n")).unwrap();
        let err = Daemon::start_named(
            &ovs,
            std::path::Path::new(OFNODE),
            "bad",
            "ptcp:6654:127.0.0.1",
            &["--config", &config_arg],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(named), "{section}: {err}");
    }
}
