//! The VXLAN device and the generic link/address/route/sysctl/neighbour operations, checked
//! against the kernel with `ip -j`, `bridge -j` and /proc inside a namespace the test makes.
//! Run as root.

mod netlink_common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use netlink_common::{fdb_entry, lladdr_of, single_node, Node, IP_A, PORT, UNDERLAY_A, VNI, VX};
use ofnode::netlink::{
    EnsureOutcome, Error, KnownHost, MacAddr, Route, VxlanAttrs, VxlanMode, VxlanSettings,
};

/// A tracing writer that keeps what was logged, to check the reason a device was recreated.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn capture_logs() -> (LogBuffer, tracing::subscriber::DefaultGuard) {
    let buffer = LogBuffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    (buffer, tracing::subscriber::set_default(subscriber))
}

fn vxlan_info(node: &Node) -> serde_json::Value {
    let link = node.link_json(VX);
    assert_eq!(link["linkinfo"]["info_kind"], "vxlan", "{link}");
    link["linkinfo"]["info_data"].clone()
}

#[tokio::test]
async fn ensure_creates_the_device_the_attributes_describe() {
    let node = single_node();
    let handle = node.handle();
    let attrs = VxlanAttrs {
        learning: false,
        l3miss: true,
        ..node.vxlan_attrs()
    };
    let device = handle.ensure_vxlan(&attrs).await.unwrap();
    assert_eq!(device.outcome(), &EnsureOutcome::Created);

    let info = vxlan_info(&node);
    assert_eq!(info["id"], VNI, "{info}");
    assert_eq!(info["local"], "192.0.2.1", "{info}");
    assert_eq!(info["port"], PORT, "{info}");
    assert_eq!(info["link"], UNDERLAY_A, "{info}");
    assert_eq!(info["learning"], false, "{info}");
    assert_eq!(info["proxy"], true, "{info}");
    assert_eq!(info["l2miss"], true, "{info}");
    assert_eq!(info["l3miss"], true, "{info}");
    assert_eq!(device.index(), node.ifindex(VX));
    assert_eq!(device.mac(), Some(node.mac(VX)));
    assert_eq!(
        device.mtu(),
        node.link_json(VX)["mtu"].as_u64().map(|mtu| mtu as u32)
    );
    // The seed writes app_solicit=3 so that misses reach userspace.
    assert_eq!(
        node.sh(&["cat", &format!("/proc/sys/net/ipv4/neigh/{VX}/app_solicit")])
            .trim(),
        "3"
    );

    // Asked again: the same device, untouched.
    let again = handle.ensure_vxlan(&attrs).await.unwrap();
    assert_eq!(again.outcome(), &EnsureOutcome::Reused);
    assert_eq!(again.index(), device.index());

    again.destroy().await.unwrap();
    assert!(!node.link_exists(VX));
}

#[tokio::test]
async fn compatible_existing_device_is_left_alone() {
    let node = single_node();
    // Made by someone else, with settings the seed does not compare (nolearning, noproxy).
    node.sh(&[
        "ip",
        "link",
        "add",
        VX,
        "type",
        "vxlan",
        "id",
        "42",
        "dev",
        UNDERLAY_A,
        "local",
        "192.0.2.1",
        "dstport",
        "4789",
        "nolearning",
        "l2miss",
    ]);
    let before = node.ifindex(VX);
    let (logs, _guard) = capture_logs();

    let device = node
        .handle()
        .ensure_vxlan(&node.vxlan_attrs())
        .await
        .unwrap();

    assert_eq!(device.outcome(), &EnsureOutcome::Reused);
    assert_eq!(node.ifindex(VX), before, "the device must not be recreated");
    let info = vxlan_info(&node);
    assert_eq!(
        info["learning"], false,
        "left alone, so still nolearning: {info}"
    );
    // ip prints "proxy" only when it is on.
    assert_ne!(info["proxy"], true, "{info}");
    assert!(!logs.text().contains("recreating"), "{}", logs.text());
}

#[tokio::test]
async fn incompatible_existing_device_is_recreated_with_the_reason_logged() {
    let node = single_node();
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "type",
                "vxlan",
                "id",
                "7",
                "dev",
                UNDERLAY_A,
                "local",
                "192.0.2.1",
                "dstport",
                "4789",
                "l2miss",
            ],
            "vni: 42 vs 7",
        ),
        (
            &[
                "type",
                "vxlan",
                "id",
                "42",
                "dev",
                UNDERLAY_A,
                "local",
                "192.0.2.1",
                "dstport",
                "8472",
                "l2miss",
            ],
            "port: 4789 vs 8472",
        ),
        (
            &["type", "veth", "peer", "name", "vxpeer"],
            "link type: vxlan vs veth",
        ),
    ];
    for (ip_args, reason) in cases {
        let mut argv = vec!["ip", "link", "add", VX];
        argv.extend_from_slice(ip_args);
        node.sh(&argv);
        let before = node.ifindex(VX);
        let (logs, guard) = capture_logs();

        let device = node
            .handle()
            .ensure_vxlan(&node.vxlan_attrs())
            .await
            .unwrap();
        drop(guard);

        assert_eq!(
            device.outcome(),
            &EnsureOutcome::Recreated {
                reason: reason.to_string()
            }
        );
        let logged = logs.text();
        assert!(
            logged.contains(&format!(
                "\"{VX}\" already exists with incompatible configuration: {reason}; recreating device"
            )),
            "log: {logged}"
        );
        assert_ne!(node.ifindex(VX), before, "a new device, not the old one");
        let info = vxlan_info(&node);
        assert_eq!(info["id"], VNI, "{info}");
        assert_eq!(info["port"], PORT, "{info}");
        device.destroy().await.unwrap();
    }
}

#[tokio::test]
async fn configure_leaves_one_address_sets_up_and_routes() {
    let node = single_node();
    let handle = node.handle();
    let device = handle.ensure_vxlan(&node.vxlan_attrs()).await.unwrap();
    // Addresses from an earlier life of the device must go.
    node.sh(&["ip", "addr", "add", "10.130.0.9/16", "dev", VX]);
    node.sh(&["ip", "addr", "add", "10.131.0.9/16", "dev", VX]);

    let net = "10.128.0.1/14".parse().unwrap();
    device.configure(net).await.unwrap();
    // Twice: the route is already there (EEXIST) and the address is kept, not re-added.
    device.configure(net).await.unwrap();

    let addrs = node.ip_json(&["-4", "addr", "show", "dev", VX]);
    let infos = addrs[0]["addr_info"].as_array().unwrap().clone();
    let found: Vec<String> = infos
        .iter()
        .map(|info| format!("{}/{}", info["local"].as_str().unwrap(), info["prefixlen"]))
        .collect();
    assert_eq!(found, vec!["10.128.0.1/14"]);
    let flags = node.link_json(VX)["flags"].clone();
    assert!(
        flags.as_array().unwrap().iter().any(|flag| flag == "UP"),
        "{flags}"
    );
    let routes = node.ip_json(&["-4", "route", "show", "dev", VX]);
    assert!(
        routes
            .as_array()
            .unwrap()
            .iter()
            .any(|route| route["dst"] == "10.128.0.0/14"),
        "{routes}"
    );
    assert_eq!(handle.ipv4_addrs(device.index()).await.unwrap(), vec![net]);
}

#[tokio::test]
async fn fdb_and_neighbour_entries_are_installed_replaced_and_removed() {
    let node = single_node();
    let handle = node.handle();
    let device = handle.ensure_vxlan(&node.vxlan_attrs()).await.unwrap();
    device
        .configure("10.128.0.1/14".parse().unwrap())
        .await
        .unwrap();
    let mac: MacAddr = "02:00:0a:80:02:01".parse().unwrap();
    let other: MacAddr = "02:00:0a:80:02:02".parse().unwrap();
    let vtep = Ipv4Addr::new(192, 0, 2, 2);
    let overlay = Ipv4Addr::new(10, 128, 2, 1);

    device.add_l2(mac, vtep).await.unwrap();
    let entry = fdb_entry(&node.fdb_json(VX), mac).expect("FDB entry installed");
    assert_eq!(entry["dst"], "192.0.2.2", "{entry}");
    assert!(
        entry["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "self"),
        "{entry}"
    );
    let listed = device.list_fdb().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|entry| entry.mac == mac && entry.dst == Some(vtep)),
        "{listed:?}"
    );
    // Another VTEP for the same MAC replaces the entry.
    device
        .add_l2(mac, Ipv4Addr::new(192, 0, 2, 3))
        .await
        .unwrap();
    let entry = fdb_entry(&node.fdb_json(VX), mac).unwrap();
    assert_eq!(entry["dst"], "192.0.2.3", "{entry}");

    assert!(device
        .del_l2(mac, Ipv4Addr::new(192, 0, 2, 3))
        .await
        .unwrap());
    assert!(fdb_entry(&node.fdb_json(VX), mac).is_none());
    assert!(!device
        .del_l2(mac, Ipv4Addr::new(192, 0, 2, 3))
        .await
        .unwrap());

    device.add_l3(overlay, mac).await.unwrap();
    let neighbours = node.neigh_json(VX);
    assert_eq!(lladdr_of(&neighbours, overlay), Some(mac.to_string()));
    // NeighSet semantics: replacing the MAC is fine.
    device.add_l3(overlay, other).await.unwrap();
    assert_eq!(
        lladdr_of(&node.neigh_json(VX), overlay),
        Some(other.to_string())
    );
    let listed = device.list_neigh().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|entry| entry.ip == overlay && entry.mac == Some(other)),
        "{listed:?}"
    );
    handle
        .add_l3_permanent(device.index(), overlay, mac)
        .await
        .unwrap();
    let neighbours = node.neigh_json(VX);
    let entry = neighbours
        .iter()
        .find(|entry| entry["dst"] == overlay.to_string())
        .unwrap();
    assert_eq!(entry["state"][0], "PERMANENT", "{entry}");
    assert!(handle.del_l3(device.index(), overlay).await.unwrap());
    assert_eq!(lladdr_of(&node.neigh_json(VX), overlay), None);
}

#[tokio::test]
async fn handle_manages_any_link_address_mtu_routes_and_forwarding() {
    let node = single_node();
    let handle = node.handle();
    // The node controller's tun0 is an OVS internal port; a veth end stands in for it here.
    node.sh(&[
        "ip", "link", "add", "tun0", "type", "veth", "peer", "name", "tun0peer",
    ]);
    let host_forwarding = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    let index = handle.link_index("tun0").await.unwrap();

    handle
        .replace_ipv4_addrs(index, "10.128.0.1/23".parse().unwrap())
        .await
        .unwrap();
    handle.set_mtu(index, 1450).await.unwrap();
    handle.set_link_up(index).await.unwrap();
    let service = Route::link_scope("172.30.0.0/16".parse().unwrap(), index);
    assert!(handle.add_route(&service).await.unwrap());
    assert!(
        !handle.add_route(&service).await.unwrap(),
        "already there is fine"
    );
    handle.set_ipv4_forwarding(true).unwrap();
    handle.set_ipv4_forwarding_on("tun0", true).unwrap();

    let link = node.link_json("tun0");
    assert_eq!(link["mtu"], 1450, "{link}");
    assert!(
        link["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
        "{link}"
    );
    let routes = node.ip_json(&["-4", "route", "show", "dev", "tun0"]);
    let route = routes
        .as_array()
        .unwrap()
        .iter()
        .find(|route| route["dst"] == "172.30.0.0/16")
        .cloned()
        .unwrap_or_else(|| panic!("no service route: {routes}"));
    assert_eq!(route["scope"], "link", "{route}");
    assert_eq!(
        node.sh(&["sysctl", "-n", "net.ipv4.ip_forward"]).trim(),
        "1"
    );
    assert_eq!(
        node.sh(&["sysctl", "-n", "net.ipv4.conf.tun0.forwarding"])
            .trim(),
        "1"
    );
    assert_eq!(handle.read_sysctl("net/ipv4/ip_forward").unwrap(), "1");
    // Only the namespace changed: the host's value is what it was.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap(),
        host_forwarding
    );

    // A route through a gateway, onlink, then deleted; deleting it again says it was gone.
    let via = Route::via(
        "10.128.2.0/23".parse().unwrap(),
        Ipv4Addr::new(10, 128, 2, 1),
        index,
    )
    .onlink();
    assert!(handle.add_route(&via).await.unwrap());
    let shown = node.sh(&["ip", "-4", "route", "show", "10.128.2.0/23"]);
    assert!(
        shown.contains("10.128.2.0/23 via 10.128.2.1 dev tun0") && shown.contains(" onlink"),
        "{shown}"
    );
    assert!(handle.delete_route(&via).await.unwrap());
    assert!(handle.delete_route(&service).await.unwrap());
    assert!(!handle.delete_route(&service).await.unwrap());
    let routes = node.ip_json(&["-4", "route", "show", "dev", "tun0"]);
    assert!(
        !routes
            .as_array()
            .unwrap()
            .iter()
            .any(|route| route["dst"] == "172.30.0.0/16" || route["dst"] == "10.128.2.0/23"),
        "{routes}"
    );
}

#[tokio::test]
async fn bad_input_gives_a_clear_error_and_changes_nothing() {
    let node = single_node();
    let handle = node.handle();

    let long = VxlanAttrs::new("vxlan-name-too-long", VNI);
    let err = handle.ensure_vxlan(&long).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "interface name \"vxlan-name-too-long\" is 19 bytes; Linux allows at most 15"
    );
    assert!(!node.link_exists("vxlan-name-too-long"));
    assert!(!node.link_exists("vxlan-name-too-"));

    let err = handle
        .ensure_vxlan(&VxlanAttrs::new(VX, 1 << 24))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "VNI 16777216 does not fit in 24 bits (at most 16777215)"
    );
    assert!(!node.link_exists(VX));

    let device = handle.ensure_vxlan(&node.vxlan_attrs()).await.unwrap();
    let mac: MacAddr = "02:00:00:00:00:02".parse().unwrap();
    let v6: IpAddr = "2001:db8::2".parse().unwrap();
    let err = device.add_l2(mac, v6).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "VTEP address 2001:db8::2 is not IPv4: the VXLAN device and its tables carry IPv4 only"
    );
    let err = device.add_l3(v6, mac).await.unwrap_err();
    assert!(matches!(err, Error::NotIpv4 { .. }), "{err}");
    assert!(node
        .fdb_json(VX)
        .iter()
        .all(|entry| entry["mac"] != mac.to_string()));

    let err = "02:00:00:00:02".parse::<MacAddr>().unwrap_err();
    assert!(err.to_string().contains("expected 6 groups"), "{err}");
    let err = MacAddr::try_from(&[2u8, 0, 0, 0, 0, 0, 2][..]).unwrap_err();
    assert_eq!(err.to_string(), "a MAC address has 6 bytes, this one has 7");
    let err = KnownHost::parse("2001:db8::2", "10.128.2.0/23", "02:00:00:00:00:02").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("host IP 2001:db8::2 is not IPv4"),
        "{err}"
    );

    // What the kernel refuses comes back with the operation and the errno's text.
    let err = handle.add_l2(999_999, mac, IP_A).await.unwrap_err();
    assert_eq!(err.errno(), Some(19), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("add FDB entry 02:00:00:00:00:02 dst 192.0.2.1 (REACHABLE) on link index 999999: kernel said: No such device"),
        "{text}"
    );
    let err = handle.link_index("nosuchlink").await.unwrap_err();
    assert_eq!(err.to_string(), "link \"nosuchlink\" does not exist");
}

#[tokio::test]
async fn settings_resolve_the_underlay_device_by_name() {
    let node = single_node();
    let handle = node.handle();
    let settings: VxlanSettings = serde_json::from_value(serde_json::json!({
        "address": "10.128.0.1/14",
        "vtep_device": UNDERLAY_A,
        "vtep_addr": "192.0.2.1",
        "port": 4789,
        "mode": "miss",
    }))
    .unwrap();
    let options = settings.to_options(&handle).await.unwrap();
    assert_eq!(options.attrs.vtep_index, Some(node.ifindex(UNDERLAY_A)));
    assert_eq!(options.attrs.name, "ofnode.1");
    assert_eq!(options.mode, VxlanMode::Miss);

    let missing = VxlanSettings {
        vtep_device: Some("nosuchdev".into()),
        ..settings
    };
    let err = missing.to_options(&handle).await.unwrap_err();
    assert_eq!(err.to_string(), "link \"nosuchdev\" does not exist");
}
