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
