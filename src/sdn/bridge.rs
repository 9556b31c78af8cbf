//! The bridge as OVSDB holds it, in OVSDB's own terms: the steps of the seed's SetupOVS (the
//! bridge, its controllers, vxlan0 and tun0), a pod's port row, and what OVSDB's cache shows of
//! the bridge's ports (the core's [`Observed`], from which it plans its fixes, `core/ports.rs`).

use std::collections::BTreeMap;

use super::core::ports::{Observed, ObservedPort, ObservedQos};
use super::layout::{TUN_OFPORT, TUN_PORT, VXLAN_OFPORT, VXLAN_PORT};
use crate::ovsdb::{BridgeSpec, Cache, Datum, PortSpec};
use crate::stream::Target;

/// One thing for ovsdb-server to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OvsdbStep {
    /// The bridge with the seed's settings (AddBridge `fail-mode=secure`,
    /// `protocols=OpenFlow13`), created or updated.
    EnsureBridge(BridgeSpec),
    /// The bridge's controllers (what `ovs-vsctl set-controller` sets).
    SetController {
        bridge: String,
        targets: Vec<String>,
    },
    /// The port deleted if present, then added as specified (the seed's DeletePort + AddPort).
    ReplacePort(PortSpec),
}

/// The controllers the bridge must dial: every HA peer, or this daemon when it listens (a
/// passive OpenFlow target); None when ofnode dials the switch itself.
pub fn controllers(openflow: &str, ha_peers: Option<&[String]>) -> Option<Vec<String>> {
    if let Some(peers) = ha_peers {
        return Some(peers.to_vec());
    }
    let target = openflow.parse::<Target>().ok()?;
    target.switch_side().map(|side| vec![side])
}

/// The seed's SetupOVS in OVSDB: the bridge, its controllers, and vxlan0 (port 1) and tun0
/// (port 2) made anew.
pub fn setup_steps(
    bridge: &str,
    datapath_type: &str,
    controllers: Option<Vec<String>>,
) -> Vec<OvsdbStep> {
    let mut steps = vec![OvsdbStep::EnsureBridge(BridgeSpec {
        name: bridge.to_string(),
        fail_mode: Some("secure".into()),
        protocols: vec!["OpenFlow13".into()],
        datapath_type: Some(datapath_type.to_string()),
    })];
    if let Some(targets) = controllers {
        steps.push(OvsdbStep::SetController {
            bridge: bridge.to_string(),
            targets,
        });
    }
    let flow_options = [("remote_ip", "flow"), ("key", "flow")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    steps.push(OvsdbStep::ReplacePort(PortSpec {
        bridge: bridge.to_string(),
        name: VXLAN_PORT.into(),
        iface_type: Some("vxlan".into()),
        options: flow_options,
        ofport_request: Some(VXLAN_OFPORT),
    }));
    steps.push(OvsdbStep::ReplacePort(PortSpec {
        bridge: bridge.to_string(),
        name: TUN_PORT.into(),
        iface_type: Some("internal".into()),
        options: BTreeMap::new(),
        ofport_request: Some(TUN_OFPORT),
    }));
    steps
}

/// A pod's port: its veth on the bridge, numbered by ofnode (`ofport_request`).
pub fn pod_port(bridge: &str, veth: &str) -> PortSpec {
    PortSpec {
        bridge: bridge.to_string(),
        name: veth.to_string(),
        ..PortSpec::default()
    }
}

/// The ports of `bridge` in OVSDB's cache, with their limits.
pub fn observe(cache: &Cache, bridge: &str) -> Observed {
    let Some((_, bridge_row)) = cache.find("Bridge", bridge) else {
        return Observed::new();
    };
    let ports = bridge_row
        .get("ports")
        .map(|d| d.uuids().collect::<Vec<_>>());
    let mut observed = Observed::new();
    for uuid in ports.unwrap_or_default() {
        let Some(port) = cache.row("Port", uuid) else {
            continue;
        };
        let Some(name) = port.get("name").and_then(Datum::as_str) else {
            continue;
        };
        let qos = observe_qos(cache, port.get("qos"));
        let ingress_policing_kbps = cache
            .column("Interface", name, "ingress_policing_rate")
            .and_then(Datum::as_i64)
            .unwrap_or(0);
        observed.insert(
            name.to_string(),
            ObservedPort {
                qos,
                ingress_policing_kbps,
            },
        );
    }
    observed
}

fn observe_qos(cache: &Cache, qos: Option<&Datum>) -> ObservedQos {
    let Some(uuid) = qos.and_then(Datum::as_uuid) else {
        return ObservedQos::None;
    };
    let Some(row) = cache.row("QoS", uuid) else {
        return ObservedQos::Other;
    };
    let config = row
        .get("other_config")
        .map(Datum::string_map)
        .unwrap_or_default();
    let only_max_rate = config.len() == 1
        && row.get("type").and_then(Datum::as_str) == Some("linux-htb")
        && row.get("queues").is_none_or(Datum::is_empty);
    match config.get("max-rate").and_then(|r| r.parse().ok()) {
        Some(rate) if only_max_rate => ObservedQos::MaxRate(rate),
        _ => ObservedQos::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ovsdb_plan_of_setup_is_the_seeds_bridge_and_ports() {
        let steps = setup_steps("br0", "netdev", Some(vec!["tcp:127.0.0.1:6653".into()]));
        let [OvsdbStep::EnsureBridge(bridge), OvsdbStep::SetController { targets, .. }, OvsdbStep::ReplacePort(vxlan), OvsdbStep::ReplacePort(tun)] =
            steps.as_slice()
        else {
            panic!("{steps:?}");
        };
        assert_eq!(bridge.fail_mode.as_deref(), Some("secure"));
        assert_eq!(bridge.protocols, vec!["OpenFlow13".to_string()]);
        assert_eq!(bridge.datapath_type.as_deref(), Some("netdev"));
        assert_eq!(targets, &vec!["tcp:127.0.0.1:6653".to_string()]);
        assert_eq!(
            (
                vxlan.name.as_str(),
                vxlan.iface_type.as_deref(),
                vxlan.ofport_request
            ),
            ("vxlan0", Some("vxlan"), Some(1))
        );
        assert_eq!(
            vxlan.options.get("remote_ip").map(String::as_str),
            Some("flow")
        );
        assert_eq!(vxlan.options.get("key").map(String::as_str), Some("flow"));
        assert_eq!(
            (
                tun.name.as_str(),
                tun.iface_type.as_deref(),
                tun.ofport_request
            ),
            ("tun0", Some("internal"), Some(2))
        );
        // Without controllers to set (ofnode dials the switch) there is no such step.
        assert_eq!(setup_steps("br0", "system", None).len(), 3);
    }

    #[test]
    fn the_bridge_dials_this_daemon_or_every_ha_peer() {
        assert_eq!(
            controllers("ptcp:6653:127.0.0.1", None),
            Some(vec!["tcp:127.0.0.1:6653".to_string()])
        );
        assert_eq!(
            controllers("punix:/run/ofnode/of.sock", None),
            Some(vec!["unix:/run/ofnode/of.sock".to_string()])
        );
        assert_eq!(controllers("unix:/run/openvswitch/br0.mgmt", None), None);
        let peers = [
            "tcp:192.0.2.1:6653".to_string(),
            "tcp:192.0.2.2:6653".to_string(),
        ];
        assert_eq!(controllers("ptcp:6653", Some(&peers)), Some(peers.to_vec()));
    }
}
