//! Every typed OVSDB operation against a private ovsdb-server + ovs-vswitchd, each checked
//! afterwards with ovs-vsctl (the oracle).

mod ovsdb_common;

use std::collections::BTreeMap;

use ofnode::ovsdb::{BridgeSpec, Datum, Error, PortSpec};
use ofnode_common::*;
use ovsdb_common as ofnode_common;

fn port(name: &str) -> PortSpec {
    PortSpec {
        bridge: "br0".into(),
        name: name.into(),
        ..PortSpec::default()
    }
}

fn vxlan0() -> PortSpec {
    PortSpec {
        iface_type: Some("vxlan".into()),
        options: BTreeMap::from([
            ("remote_ip".to_string(), "flow".to_string()),
            ("key".to_string(), "flow".to_string()),
        ]),
        ofport_request: Some(1),
        ..port("vxlan0")
    }
}

fn tun0() -> PortSpec {
    PortSpec {
        iface_type: Some("internal".into()),
        ofport_request: Some(2),
        ..port("tun0")
    }
}

fn list_ports(ovs: &ofnode_harness::Ovs) -> Vec<String> {
    vsctl(ovs, &["list-ports", "br0"])
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_gets_the_seed_columns_and_converges() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();

    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", "br0", "fail_mode"]),
        "secure"
    );
    assert_eq!(
        vsctl_column(&ovs, "Bridge", "br0", "protocols"),
        Datum::set(["OpenFlow13"])
    );
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", "br0", "datapath_type"]),
        "netdev"
    );
    // ovs-vswitchd applied it before ensure_bridge returned: the bridge's management socket
    // exists and its local port has its OpenFlow number.
    assert!(ovs.mgmt_sock("br0").exists());
    assert_eq!(vsctl(&ovs, &["get", "Interface", "br0", "ofport"]), "65534");
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "br0", "type"]),
        "internal"
    );

    // Idempotent, and it converges changed columns.
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    assert_eq!(vsctl(&ovs, &["list-br"]), "br0");
    let mut changed = seed_bridge();
    changed.fail_mode = Some("standalone".into());
    changed.protocols = vec!["OpenFlow10".into(), "OpenFlow13".into()];
    client.ensure_bridge(&changed).await.unwrap();
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", "br0", "fail_mode"]),
        "standalone"
    );
    assert_eq!(
        vsctl_column(&ovs, "Bridge", "br0", "protocols"),
        Datum::set(["OpenFlow10", "OpenFlow13"])
    );
    assert!(cache_differences(&ovs, &client).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_ports_get_their_requested_ofports() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    // A port someone else added must survive: Bridge.ports is mutated, never rewritten.
    vsctl(
        &ovs,
        &[
            "add-port",
            "br0",
            "other0",
            "--",
            "set",
            "Interface",
            "other0",
            "type=internal",
            "ofport_request=10",
        ],
    );

    assert_eq!(client.add_port(&vxlan0()).await.unwrap(), 1);
    assert_eq!(client.add_port(&tun0()).await.unwrap(), 2);

    assert_eq!(vsctl(&ovs, &["get", "Interface", "vxlan0", "ofport"]), "1");
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "vxlan0", "type"]),
        "vxlan"
    );
    assert_eq!(
        vsctl_column(&ovs, "Interface", "vxlan0", "options"),
        Datum::map([("key", "flow"), ("remote_ip", "flow")])
    );
    assert_eq!(vsctl(&ovs, &["get", "Interface", "tun0", "ofport"]), "2");
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "tun0", "type"]),
        "internal"
    );
    assert_eq!(list_ports(&ovs), ["other0", "tun0", "vxlan0"]);
    assert_eq!(client.ofport("vxlan0"), Some(1));
    assert_eq!(client.ofport("tun0"), Some(2));

    // --may-exist: adding again returns the same port and changes nothing.
    assert_eq!(client.add_port(&vxlan0()).await.unwrap(), 1);
    assert_eq!(list_ports(&ovs), ["other0", "tun0", "vxlan0"]);
    assert_eq!(vsctl_rows(&ovs, "Port", None, &["name"]).len(), 4);

    // A port that asks for a number another port holds gets a different one: an error.
    let mut clash = tun0();
    clash.name = "tun1".into();
    clash.ofport_request = Some(1);
    match client.add_port(&clash).await {
        Err(Error::OfportMismatch {
            requested: 1,
            assigned,
            ..
        }) => {
            assert_eq!(
                vsctl(&ovs, &["get", "Interface", "tun1", "ofport"]),
                assigned.to_string()
            );
        }
        other => panic!("expected an ofport mismatch, got {other:?}"),
    }
    assert!(cache_differences(&ovs, &client).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veth_without_request_gets_its_ofport_and_is_deleted() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    // The veth lives in the OVS namespace, where ovs-vswitchd can open it; deleting the
    // namespace (when `ovs` drops) deletes it.
    ovs.netns()
        .exec_ok(&[
            "ip", "link", "add", "vethp0", "type", "veth", "peer", "name", "vethp0b",
        ])
        .unwrap();
    ovs.netns()
        .exec_ok(&["ip", "link", "set", "vethp0", "up"])
        .unwrap();

    let ofport = client.add_port(&port("vethp0")).await.unwrap();
    assert!(ofport >= 1);
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "vethp0", "ofport"]),
        ofport.to_string()
    );
    assert_eq!(vsctl(&ovs, &["get", "Interface", "vethp0", "error"]), "[]");
    assert_eq!(client.ofport("vethp0"), Some(i64::from(ofport)));
    assert_eq!(list_ports(&ovs), ["vethp0"]);
    let ofctl_ports = ovs.ofctl("show", "br0", &[]).unwrap();
    assert!(
        ofctl_ports.contains(&format!(" {ofport}(vethp0)")),
        "{ofctl_ports}"
    );

    client.delete_port("br0", "vethp0").await.unwrap();
    assert!(list_ports(&ovs).is_empty());
    assert!(vsctl_rows(&ovs, "Interface", None, &["name"])
        .values()
        .all(|row| row["name"].as_str() != Some("vethp0")));
    assert_eq!(client.ofport("vethp0"), None);
    // --if-exists: deleting a missing port is fine.
    client.delete_port("br0", "vethp0").await.unwrap();
    assert!(cache_differences(&ovs, &client).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_device_returns_the_error_ovs_vswitchd_wrote() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    let err = client.add_port(&port("nosuchdev0")).await.unwrap_err();
    let Error::Interface { name, error } = &err else {
        panic!("expected an interface error, got {err:?}")
    };
    assert_eq!(name, "nosuchdev0");
    let written = vsctl_column(&ovs, "Interface", "nosuchdev0", "error");
    assert_eq!(Some(error.as_str()), written.as_str(), "{err}");
    assert!(error.contains("No such device"), "{error}");
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "nosuchdev0", "ofport"]),
        "-1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qos_create_replace_remove_leaves_no_orphans() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    client.add_port(&tun0()).await.unwrap();
    let qos_rows = || vsctl_rows(&ovs, "QoS", None, &["type", "other_config"]);

    client
        .set_port_qos_max_rate("tun0", Some(1_000_000))
        .await
        .unwrap();
    let rows = qos_rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (uuid, qos) = rows.iter().next().unwrap();
    assert_eq!(qos["type"].as_str(), Some("linux-htb"));
    assert_eq!(qos["other_config"], Datum::map([("max-rate", "1000000")]));
    assert_eq!(
        vsctl_column(&ovs, "Port", "tun0", "qos").as_uuid(),
        Some(*uuid)
    );

    // Replace: the old row is destroyed with the change.
    client
        .set_port_qos_max_rate("tun0", Some(2_000_000))
        .await
        .unwrap();
    let rows = qos_rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (new_uuid, qos) = rows.iter().next().unwrap();
    assert_ne!(new_uuid, uuid);
    assert_eq!(qos["other_config"], Datum::map([("max-rate", "2000000")]));
    assert_eq!(
        vsctl_column(&ovs, "Port", "tun0", "qos").as_uuid(),
        Some(*new_uuid)
    );
    // The same rate again changes nothing.
    client
        .set_port_qos_max_rate("tun0", Some(2_000_000))
        .await
        .unwrap();
    assert_eq!(qos_rows().keys().collect::<Vec<_>>(), [new_uuid]);

    // Remove: cleared and destroyed.
    client.set_port_qos_max_rate("tun0", None).await.unwrap();
    assert_eq!(vsctl(&ovs, &["get", "Port", "tun0", "qos"]), "[]");
    assert!(qos_rows().is_empty());
    assert_eq!(vsctl(&ovs, &["list", "qos"]), "");

    // Deleting a port takes its QoS row with it.
    client
        .set_port_qos_max_rate("tun0", Some(5_000))
        .await
        .unwrap();
    assert_eq!(qos_rows().len(), 1);
    client.delete_port("br0", "tun0").await.unwrap();
    assert_eq!(vsctl(&ovs, &["list", "qos"]), "");
    assert!(cache_differences(&ovs, &client).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_policing_is_set_and_read_back() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    client.add_port(&tun0()).await.unwrap();

    client
        .set_ingress_policing_rate("tun0", 1953)
        .await
        .unwrap();
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "tun0", "ingress_policing_rate"]),
        "1953"
    );
    let read = client
        .get_column("interface", "tun0", "ingress_policing_rate")
        .await
        .unwrap();
    assert_eq!(read.as_i64(), Some(1953));

    client.set_ingress_policing_rate("tun0", 0).await.unwrap();
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "tun0", "ingress_policing_rate"]),
        "0"
    );
    assert!(matches!(
        client.set_ingress_policing_rate("nope0", 10).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_is_set_out_of_band_and_replaced() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    let controllers = || vsctl_rows(&ovs, "Controller", None, &["target", "connection_mode"]);

    client
        .set_controller("br0", &["tcp:127.0.0.1:6653"])
        .await
        .unwrap();
    assert_eq!(
        vsctl(&ovs, &["get-controller", "br0"]),
        "tcp:127.0.0.1:6653"
    );
    let rows = controllers();
    assert_eq!(rows.len(), 1);
    let row = rows.values().next().unwrap();
    assert_eq!(row["connection_mode"].as_str(), Some("out-of-band"));

    client
        .set_controller("br0", &["tcp:127.0.0.1:6654", "unix:/tmp/nonexistent.sock"])
        .await
        .unwrap();
    let targets: Vec<String> = vsctl(&ovs, &["get-controller", "br0"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        targets,
        ["tcp:127.0.0.1:6654", "unix:/tmp/nonexistent.sock"]
    );
    // The old Controller row went with its last reference.
    assert_eq!(controllers().len(), 2);

    client.set_controller::<&str>("br0", &[]).await.unwrap();
    assert_eq!(vsctl(&ovs, &["get-controller", "br0"]), "");
    assert!(controllers().is_empty());
    assert!(cache_differences(&ovs, &client).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_set_clear_of_columns() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    client
        .set_columns(
            "bridge",
            "br0",
            &[(
                "external_ids",
                Datum::map([("owner", "ofnode"), ("x", "1")]),
            )],
        )
        .await
        .unwrap();
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", "br0", "external_ids:owner"]),
        "ofnode"
    );
    let read = client
        .get_column("Bridge", "br0", "external_ids")
        .await
        .unwrap();
    assert_eq!(read, vsctl_column(&ovs, "Bridge", "br0", "external_ids"));

    client
        .clear_column("Bridge", "br0", "external_ids")
        .await
        .unwrap();
    assert_eq!(vsctl(&ovs, &["get", "Bridge", "br0", "external_ids"]), "{}");
    // The Open_vSwitch row is ".", as in ovs-vsctl.
    let cur_cfg = client
        .get_column("Open_vSwitch", ".", "cur_cfg")
        .await
        .unwrap();
    assert_eq!(
        cur_cfg.as_i64().map(|n| n.to_string()),
        Some(vsctl(&ovs, &["get", "Open_vSwitch", ".", "cur_cfg"]))
    );

    assert!(matches!(
        client.get_column("Bridge", "nope", "name").await,
        Err(Error::NotFound { .. })
    ));
    // The server's own words come back for a column that does not exist.
    match client.get_column("Bridge", "br0", "no_such_column").await {
        Err(Error::Server { error, details, .. }) => {
            assert_eq!(error, "syntax error", "{details}");
            assert!(details.contains("no_such_column"), "{details}");
        }
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// `add_port_pending` commits ports without ovs-vswitchd (stopped here): concurrent adds get
/// distinct numbers, the lowest free ones on the bridge, which ovs-vswitchd then applies; a
/// missing device is reported by `applied`, with ovs-vswitchd's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_ports_choose_distinct_free_numbers() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    client.add_port(&vxlan0()).await.unwrap();
    client.add_port(&tun0()).await.unwrap();
    for name in ["pa", "pb", "pc"] {
        ovs.netns()
            .exec_ok(&["ip", "link", "add", name, "up", "type", "veth"])
            .unwrap();
    }
    let paused = ovs.pause_vswitchd();
    let specs = ["pa", "pb", "pc", "nosuch"].map(port);
    let (a, b, c, missing) = tokio::join!(
        client.add_port_pending(&specs[0]),
        client.add_port_pending(&specs[1]),
        client.add_port_pending(&specs[2]),
        client.add_port_pending(&specs[3]),
    );
    let pending = [a.unwrap(), b.unwrap(), c.unwrap(), missing.unwrap()];
    let mut numbers: Vec<u16> = pending.iter().map(|p| p.ofport()).collect();
    numbers.sort();
    assert_eq!(numbers, [3, 4, 5, 6]);
    drop(paused);
    for port in pending {
        let (name, chosen) = (port.name().to_string(), port.ofport());
        match port.applied().await {
            Ok(ofport) => {
                assert_eq!(ofport, chosen);
                assert_eq!(
                    vsctl(&ovs, &["get", "Interface", &name, "ofport"]),
                    chosen.to_string()
                );
            }
            Err(Error::Interface { name, error }) => {
                assert_eq!(name, "nosuch");
                assert!(!error.is_empty());
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    // An applied port comes back as it is, without a transaction.
    let again = client.add_port_pending(&port("pa")).await.unwrap();
    let ofport = again.ofport();
    assert_eq!(again.applied().await.unwrap(), ofport);

    // Adds that share a transaction do not share a failure: a port that exists on another
    // bridge fails alone, the other is added.
    client
        .ensure_bridge(&BridgeSpec {
            name: "br1".into(),
            ..seed_bridge()
        })
        .await
        .unwrap();
    ovs.netns()
        .exec_ok(&["ip", "link", "add", "pd", "up", "type", "veth"])
        .unwrap();
    vsctl(&ovs, &["--no-wait", "add-port", "br1", "onbr1"]);
    let specs = [port("pd"), port("onbr1")];
    let (good, bad) = tokio::join!(
        client.add_port_pending(&specs[0]),
        client.add_port_pending(&specs[1]),
    );
    assert_eq!(good.unwrap().applied().await.unwrap(), 7);
    assert!(matches!(bad, Err(Error::Conflict(_))), "{bad:?}");
    assert!(cache_differences(&ovs, &client).is_empty());
}

/// Numbers chosen before the port goes in (a pod add puts its flows on the number first): two
/// choices never get the same number while both are held, a number is free again once its
/// choice is dropped without a port, the port then gets the number it asks for, and a port on
/// the bridge already keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chosen_port_numbers_are_distinct_until_the_port_is_in() {
    let Setup { client, ovs } = start().await;
    client.ensure_bridge(&seed_bridge()).await.unwrap();
    client.add_port(&vxlan0()).await.unwrap();
    client.add_port(&tun0()).await.unwrap();
    let (a, b) = (
        client.choose_ofport(&port("qa")).unwrap(),
        client.choose_ofport(&port("qb")).unwrap(),
    );
    assert_eq!((a.ofport(), b.ofport()), (3, 4));
    drop(a);
    let again = client.choose_ofport(&port("qc")).unwrap();
    assert_eq!(again.ofport(), 3, "a dropped choice frees its number");
    ovs.netns()
        .exec_ok(&["ip", "link", "add", "qc", "up", "type", "veth"])
        .unwrap();
    let spec = PortSpec {
        ofport_request: Some(again.ofport()),
        ..port("qc")
    };
    let added = client.add_port_pending(&spec).await.unwrap();
    drop(again);
    assert_eq!(added.applied().await.unwrap(), 3);
    // The port holds its number now: the next choice skips it, and qc keeps it.
    assert_eq!(client.choose_ofport(&port("qd")).unwrap().ofport(), 5);
    assert_eq!(client.choose_ofport(&port("qc")).unwrap().ofport(), 3);
    drop(b);
}

/// `tcp:HOST:PORT` against a real ovsdb-server: a `ptcp:` remote on the loopback of the test's
/// namespace, the client connecting from inside that namespace, and a typed operation (with
/// the wait for ovs-vswitchd) checked through the unix socket with ovs-vsctl.
#[test]
fn tcp_target_reaches_a_real_ovsdb_server() {
    let ovs = ofnode_harness::Ovs::start_with(ofnode_harness::OvsOptions {
        // Nothing else listens in the test's own namespace.
        ovsdb_tcp_port: Some(6640),
        ..ofnode_harness::OvsOptions::default()
    })
    .expect("private OVS with a ptcp: remote starts");
    let target = ovs.tcp_target().expect("a tcp: target");
    assert!(target.starts_with("tcp:127.0.0.1:"), "{target}");
    let outcome = connected_in_netns(&ovs, &target, test_options(), async |client| {
        client.ensure_bridge(&seed_bridge()).await?;
        client.add_port(&tun0()).await
    });
    assert_eq!(
        outcome.and_then(|added| added).expect("add_port over tcp:"),
        2
    );
    assert_eq!(vsctl(&ovs, &["list-br"]), "br0");
    assert_eq!(list_ports(&ovs), ["tun0"]);
    assert_eq!(vsctl(&ovs, &["get", "Interface", "tun0", "ofport"]), "2");
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "tun0", "type"]),
        "internal"
    );
}
