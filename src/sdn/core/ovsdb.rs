//! The OVSDB part of the node's operations, as data the shell carries out (`node/`): the
//! bridge and its fixed ports at setup, a pod's port, its bandwidth limits, the controllers.
//! Written from the configuration and the operation alone, so a reconciler can derive the same
//! steps from the desired state when an OVSDB session comes back.

use std::collections::BTreeMap;

use crate::ovsdb::{BridgeSpec, PortSpec};
use crate::sdn::layout::{TUN_OFPORT, TUN_PORT, VXLAN_OFPORT, VXLAN_PORT};
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
    /// A pod's port gone: its QoS cleared, the port deleted (the seed's TearDownPod ignored
    /// failures of both; they are logged).
    RemovePodPort { bridge: String, veth: String },
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

/// A pod's bandwidth limits as OVSDB holds them (the seed's SetPodBandwidth): pod ingress is
/// the port's egress, a QoS `max-rate` in bit/s; pod egress is the interface's ingress
/// policing, in kbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bandwidth {
    /// None (or 0 asked): no QoS.
    pub qos_max_rate: Option<u64>,
    /// 0: no policing.
    pub ingress_policing_kbps: u32,
}

impl Bandwidth {
    pub fn of(ingress_bps: Option<u64>, egress_bps: Option<u64>) -> Bandwidth {
        Bandwidth {
            qos_max_rate: ingress_bps.filter(|bps| *bps > 0),
            // The seed divides by 1024.
            ingress_policing_kbps: egress_bps
                .map_or(0, |bps| u32::try_from(bps / 1024).unwrap_or(u32::MAX)),
        }
    }
}
