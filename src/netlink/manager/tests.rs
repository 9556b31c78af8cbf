//! The manager's pure parts: host parsing, miss answers, reconcile plans, settings.

use super::steps::host_route;
use super::*;
use crate::netlink::neigh::{FdbEntry, NeighEntry, NudState};
use crate::netlink::Error;

fn host(last: u8, subnet: &str) -> KnownHost {
    KnownHost::parse(
        &format!("192.0.2.{last}"),
        subnet,
        &format!("02:00:00:00:00:{last:02x}"),
    )
    .unwrap()
}

#[test]
fn known_host_parse_names_the_bad_value() {
    let err = KnownHost::parse("2001:db8::2", "10.128.2.0/23", "02:00:00:00:00:02").unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotIpv4 {
                what: "host IP",
                ..
            }
        ),
        "{err}"
    );
    let err = KnownHost::parse("192.0.2.2", "10.128.2.0/23", "02:00:00:00:02").unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let err = KnownHost::parse("192.0.2.2", "fd00::/64", "02:00:00:00:00:02").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid host subnet \"fd00::/64\": IPv6 is not supported here; an IPv4 network is required"
    );
    // As `hostsubnet add` (one parser, `value::Cidr`): a network, not an address inside one.
    let err = KnownHost::parse("192.0.2.2", "10.128.2.7/23", "02:00:00:00:00:02").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid host subnet \"10.128.2.7/23\": host bits set"),
        "{err}"
    );
    assert_eq!(host(2, "10.128.2.0/23").subnet.to_string(), "10.128.2.0/23");
}

#[test]
fn gateway_is_the_first_host_address() {
    assert_eq!(
        host(2, "10.128.2.0/23").gateway(),
        Ipv4Addr::new(10, 128, 2, 1)
    );
    assert_eq!(
        overlay_address("10.128.4.5/32".parse().unwrap()),
        Ipv4Addr::new(10, 128, 4, 5)
    );
}

#[test]
fn misses_are_answered_from_known_hosts() {
    let hosts = by_subnet(&[host(2, "10.128.2.0/23"), host(3, "10.128.4.0/23")]);
    let ip = Ipv4Addr::new(10, 128, 5, 9);
    assert_eq!(
        answer_from(&hosts, &Miss::L3(ip)),
        Some(Answer::Neighbour {
            ip,
            mac: host(3, "10.128.4.0/23").vtep_mac
        })
    );
    assert_eq!(
        answer_from(&hosts, &Miss::L3(Ipv4Addr::new(10, 128, 0, 9))),
        None
    );
    let mac = host(2, "10.128.2.0/23").vtep_mac;
    assert_eq!(
        answer_from(&hosts, &Miss::L2(mac)),
        Some(Answer::Fdb {
            mac,
            vtep: Ipv4Addr::new(192, 0, 2, 2)
        })
    );
    assert_eq!(
        answer_from(&hosts, &Miss::L2(MacAddr([2, 0, 0, 0, 0, 9]))),
        None
    );
}

fn by_subnet(hosts: &[KnownHost]) -> BTreeMap<Ipv4Net, KnownHost> {
    hosts.iter().map(|host| (host.subnet, *host)).collect()
}

fn neigh(ip: &str, mac: MacAddr, state: NudState) -> NeighEntry {
    NeighEntry {
        ip: ip.parse().unwrap(),
        mac: Some(mac),
        state,
    }
}

#[test]
fn a_host_with_two_subnets_keeps_the_one_not_deleted() {
    let (first, second) = (host(2, "10.128.2.0/23"), host(2, "10.128.4.0/23"));
    let mac = first.vtep_mac;
    let kernel = KernelTables {
        fdb: vec![FdbEntry {
            mac,
            dst: Some(first.host_ip),
            state: NudState::PERMANENT,
        }],
        neigh: vec![
            neigh("10.128.2.1", mac, NudState::PERMANENT),
            neigh("10.128.4.1", mac, NudState::PERMANENT),
        ],
        routes: vec![host_route(&first, 7), host_route(&second, 7)],
    };
    // Both wanted: nothing to do.
    let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[first, second]), &kernel);
    assert_eq!(steps, Steps::default());
    // The second subnet deleted: its neighbour and route go, the host's FDB entry stays.
    let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[first]), &kernel);
    assert_eq!(
        steps,
        Steps {
            del_neigh: vec![Ipv4Addr::new(10, 128, 4, 1)],
            del_routes: vec![host_route(&second, 7)],
            ..Steps::default()
        }
    );
}

#[test]
fn a_moved_subnet_points_to_its_new_host_only() {
    let (x, y) = (host(2, "10.128.2.0/23"), host(3, "10.128.2.0/23"));
    let kernel = KernelTables {
        fdb: vec![FdbEntry {
            mac: x.vtep_mac,
            dst: Some(x.host_ip),
            state: NudState::PERMANENT,
        }],
        neigh: vec![
            neigh("10.128.2.1", x.vtep_mac, NudState::PERMANENT),
            // A miss answer of X's, aged: it must go too.
            neigh("10.128.2.9", x.vtep_mac, NudState::STALE),
        ],
        routes: vec![host_route(&x, 7)],
    };
    let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[y]), &kernel);
    assert_eq!(
        steps,
        Steps {
            del_neigh: vec![Ipv4Addr::new(10, 128, 2, 1), Ipv4Addr::new(10, 128, 2, 9)],
            del_fdb: vec![(x.vtep_mac, x.host_ip)],
            add_fdb: vec![(y.vtep_mac, y.host_ip)],
            add_neigh: vec![(Ipv4Addr::new(10, 128, 2, 1), y.vtep_mac)],
            // The same route (the gateway is the subnet's): kept, not re-added.
            ..Steps::default()
        }
    );
    // Miss mode adds nothing up front and removes a static leftover route.
    let steps = Steps::plan(VxlanMode::Miss, 7, &by_subnet(&[y]), &kernel);
    assert_eq!(steps.del_routes, vec![host_route(&x, 7)]);
    assert!(steps.add_fdb.is_empty() && steps.add_neigh.is_empty() && steps.add_routes.is_empty());
}

#[test]
fn flushed_entries_are_added_again_and_foreign_ones_left_alone() {
    let x = host(2, "10.128.2.0/23");
    let kernel = KernelTables {
        // An unresolved entry (no MAC) or a NOARP one belongs to the kernel; a non-permanent FDB entry to
        // the wanted host is made permanent.
        fdb: vec![FdbEntry {
            mac: x.vtep_mac,
            dst: Some(x.host_ip),
            state: NudState::REACHABLE,
        }],
        neigh: vec![
            NeighEntry {
                ip: Ipv4Addr::new(10, 129, 0, 7),
                mac: None,
                state: NudState::INCOMPLETE,
            },
            // The kernel's mapping of a multicast group is not ours either.
            neigh(
                "224.0.0.251",
                MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]),
                NudState::NOARP,
            ),
        ],
        routes: Vec::new(),
    };
    let steps = Steps::plan(VxlanMode::Static, 7, &by_subnet(&[x]), &kernel);
    assert_eq!(
        steps,
        Steps {
            add_fdb: vec![(x.vtep_mac, x.host_ip)],
            add_neigh: vec![(x.gateway(), x.vtep_mac)],
            add_routes: vec![host_route(&x, 7)],
            ..Steps::default()
        }
    );
}

#[test]
fn settings_parse_with_seed_defaults() {
    let settings: VxlanSettings =
        serde_json::from_str(r#"{"address": "10.128.0.1/14", "vtep_addr": "192.0.2.1"}"#).unwrap();
    assert_eq!(settings.device_name(), "ofnode.1");
    assert_eq!(settings.mode, VxlanMode::Static);
    assert!(settings.learning && settings.proxy && settings.l2miss && !settings.l3miss);
    assert_eq!(settings.port, None);
    let err = serde_json::from_str::<VxlanSettings>(
        r#"{"address": "10.128.0.1/14", "vtep_addr": "2001:db8::1"}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("invalid"), "{err}");
    let err =
        serde_json::from_str::<VxlanSettings>(r#"{"address": "10.128.0.1/14", "mdoe": "miss"}"#)
            .unwrap_err();
    assert!(err.to_string().contains("unknown field `mdoe`"), "{err}");
    // Names and the VNI are checked when the settings are read, before anything starts.
    for (bad, named) in [
        (
            r#""name": "a-name-longer-than-15""#,
            "a-name-longer-than-15",
        ),
        (r#""vtep_device": "eth/0""#, "eth/0"),
        (r#""vni": 16777216"#, "16777216"),
    ] {
        let text = format!(r#"{{"address": "10.128.0.1/14", {bad}}}"#);
        let err = serde_json::from_str::<VxlanSettings>(&text).unwrap_err();
        assert!(err.to_string().contains(named), "{bad}: {err}");
    }
    let max = VxlanSettings {
        vni: crate::netlink::MAX_VNI,
        ..settings
    };
    assert!(max.device_name().len() <= 15);
}

#[test]
fn mode_serde_is_lowercase_and_defaults_to_static() {
    assert_eq!(VxlanMode::default(), VxlanMode::Static);
    assert_eq!(serde_json::to_string(&VxlanMode::Miss).unwrap(), "\"miss\"");
    assert_eq!(
        serde_json::from_str::<VxlanMode>("\"static\"").unwrap(),
        VxlanMode::Static
    );
}
