//! Pods' ports in OVSDB as data the shell carries out: a batch's pod ports and bandwidth
//! limits ([`PortStep`], part of the batch's `Effects`, carried out by the writer after the
//! bundle and the journal), and the reconciler's plan ([`PortFix`]) from what OVSDB shows
//! ([`Observed`], read by the shell, `bridge.rs`) to the desired state. Written from the
//! operation and the state alone, so a reconciler derives the same steps from the desired
//! state when an OVSDB session comes back. No OVSDB type is named here.

use std::collections::BTreeMap;

use crate::sdn::state::{Change, NodeState, PortIntent};
use crate::sdn::store::PodKey;
use crate::sdn::types::Pod;
use crate::value::IfName;

/// What OVSDB must do for one pod's port once its operation's flows are on the switch and its
/// journal record on disk (crash in between, and the OVSDB reconciler does it at the next
/// start from the journaled state). A batch holds at most one step per port; the shell carries
/// out each port's steps in the order of their batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortStep {
    /// A pod's port, asking for the number its flows use (flows on a port that does not exist
    /// yet match nothing until it does). Should OVSDB not take it, the pod add is taken back
    /// ([`TakeBack`]) and fails.
    Add {
        veth: IfName,
        ofport: u16,
        take_back: TakeBack,
    },
    /// A deleted pod's port goes (with its QoS row). The `Removed` intent is journaled already:
    /// should OVSDB not take it, the reconciler removes the port.
    Remove { veth: IfName },
    /// The limits the operation journaled. Refused, `previous` is put back and the operation
    /// fails; with no answer (the outcome unknown), the journaled limits stand and the
    /// reconciler makes OVSDB hold them.
    Limit {
        veth: IfName,
        bandwidth: Bandwidth,
        previous: Option<PortIntent>,
    },
}

impl PortStep {
    /// The pod's port (its veth) the step is for.
    pub fn veth(&self) -> &IfName {
        match self {
            PortStep::Add { veth, .. }
            | PortStep::Remove { veth }
            | PortStep::Limit { veth, .. } => veth,
        }
    }
}

/// How to take back a pod add whose port OVSDB did not take: the add's changes undone, as long
/// as the pod is still the one it added (`Core::take_back`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeBack {
    /// The pod's key, and the pod as the add left it in the state.
    pub(super) key: PodKey,
    pub(super) pod: Pod,
    /// The changes that undo the add, in the order to apply them.
    pub(super) undo: Vec<Change>,
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

impl From<Bandwidth> for PortIntent {
    fn from(b: Bandwidth) -> PortIntent {
        PortIntent::Limited {
            qos_max_rate: b.qos_max_rate,
            ingress_policing_kbps: b.ingress_policing_kbps,
        }
    }
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

/// A port's QoS as OVSDB holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedQos {
    None,
    /// A `linux-htb` QoS with only `max-rate` (what ofnode writes).
    MaxRate(u64),
    /// Anything else (another type, queues, other keys).
    Other,
}

/// One port of the bridge as OVSDB shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservedPort {
    pub qos: ObservedQos,
    pub ingress_policing_kbps: i64,
}

/// The bridge's ports by name (empty when the bridge does not exist).
pub type Observed = BTreeMap<String, ObservedPort>;

/// What the OVSDB reconciler does to make the bridge hold the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortFix {
    /// A deleted pod's port (its QoS row goes with it).
    Remove(String),
    /// A live pod's port that is missing, asked for on the number its flows use.
    Add { veth: String, ofport: u16 },
    /// A port whose limits differ from the acknowledged ones.
    Limit { veth: String, bandwidth: Bandwidth },
}

/// The plan from `observed` to the desired state: deleted pods' ports removed, live pods'
/// ports present, acknowledged limits held. Ports ofnode knows nothing of are left alone.
pub fn port_fixes(state: &NodeState, observed: &Observed) -> Vec<PortFix> {
    let mut fixes = Vec::new();
    if state.setup.is_none() {
        return fixes;
    }
    for (veth, intent) in &state.port_intents {
        let name = veth.as_str();
        match (intent, observed.get(name)) {
            (PortIntent::Removed, Some(_)) => fixes.push(PortFix::Remove(name.to_string())),
            (PortIntent::Limited { .. }, Some(port)) => {
                let bandwidth = bandwidth_of(intent);
                if !holds(port, &bandwidth) {
                    fixes.push(PortFix::Limit {
                        veth: name.to_string(),
                        bandwidth,
                    });
                }
            }
            _ => {}
        }
    }
    for pod in state.pods.values() {
        let Some(veth) = &pod.veth else { continue };
        if observed.contains_key(veth.as_str()) {
            continue;
        }
        fixes.push(PortFix::Add {
            veth: veth.to_string(),
            ofport: pod.ofport,
        });
        if let Some(intent @ PortIntent::Limited { .. }) = state.port_intents.get(veth) {
            fixes.push(PortFix::Limit {
                veth: veth.to_string(),
                bandwidth: bandwidth_of(intent),
            });
        }
    }
    fixes
}

/// Deleted pods' ports that `observed` shows gone: their intent can be forgotten.
pub fn removed_ports_gone(state: &NodeState, observed: &Observed) -> Vec<IfName> {
    state
        .port_intents
        .iter()
        .filter(|(veth, intent)| {
            **intent == PortIntent::Removed && !observed.contains_key(veth.as_str())
        })
        .map(|(veth, _)| veth.clone())
        .collect()
}

fn bandwidth_of(intent: &PortIntent) -> Bandwidth {
    match *intent {
        PortIntent::Limited {
            qos_max_rate,
            ingress_policing_kbps,
        } => Bandwidth {
            qos_max_rate,
            ingress_policing_kbps,
        },
        PortIntent::Removed => Bandwidth::of(None, None),
    }
}

fn holds(port: &ObservedPort, bandwidth: &Bandwidth) -> bool {
    let qos = match bandwidth.qos_max_rate {
        Some(rate) => ObservedQos::MaxRate(rate),
        None => ObservedQos::None,
    };
    port.qos == qos && port.ingress_policing_kbps == i64::from(bandwidth.ingress_policing_kbps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::core::tests::setup_request;
    use crate::sdn::types::Mode;
    use crate::sdn::types::Pod;

    fn veth(name: &str) -> IfName {
        name.parse().unwrap()
    }

    fn pod(n: u8) -> Pod {
        Pod {
            veth: Some(veth(&format!("veth{n}"))),
            ip: std::net::Ipv4Addr::new(10, 128, 0, n),
            mac: "0a:58:0a:80:00:05".parse().unwrap(),
            sandbox: format!("{n:02x}").repeat(32).parse().unwrap(),
            vnid: crate::value::Vnid::new(0).unwrap(),
            ofport: u16::from(n) + 2,
        }
    }

    fn set_up(pods: &[Pod], intents: &[(&str, PortIntent)]) -> NodeState {
        NodeState {
            setup: Some(setup_request(Mode::default())),
            pods: pods
                .iter()
                .map(|p| (crate::sdn::core::tests::key_of(p), p.clone()))
                .collect(),
            port_intents: intents.iter().map(|(v, i)| (veth(v), *i)).collect(),
            ..NodeState::default()
        }
    }

    fn port(qos: ObservedQos, kbps: i64) -> ObservedPort {
        ObservedPort {
            qos,
            ingress_policing_kbps: kbps,
        }
    }

    fn observed(ports: &[(&str, ObservedPort)]) -> Observed {
        ports.iter().map(|(n, p)| (n.to_string(), *p)).collect()
    }

    const LIMITED: PortIntent = PortIntent::Limited {
        qos_max_rate: Some(1_000_000),
        ingress_policing_kbps: 500,
    };

    #[test]
    fn a_deleted_pods_port_is_removed_and_then_forgotten() {
        let state = set_up(&[], &[("veth3", PortIntent::Removed)]);
        let before = observed(&[("veth3", port(ObservedQos::MaxRate(8), 0))]);
        assert_eq!(
            port_fixes(&state, &before),
            vec![PortFix::Remove("veth3".into())]
        );
        assert!(removed_ports_gone(&state, &before).is_empty());
        let after = Observed::new();
        assert!(port_fixes(&state, &after).is_empty());
        assert_eq!(removed_ports_gone(&state, &after), vec![veth("veth3")]);
    }

    #[test]
    fn acknowledged_limits_are_put_back_and_held_ones_left_alone() {
        let state = set_up(&[pod(3)], &[("veth3", LIMITED)]);
        let held = observed(&[("veth3", port(ObservedQos::MaxRate(1_000_000), 500))]);
        assert!(port_fixes(&state, &held).is_empty());
        let expected = vec![PortFix::Limit {
            veth: "veth3".into(),
            bandwidth: Bandwidth {
                qos_max_rate: Some(1_000_000),
                ingress_policing_kbps: 500,
            },
        }];
        for wrong in [
            port(ObservedQos::None, 500),
            port(ObservedQos::Other, 500),
            port(ObservedQos::MaxRate(1_000_000), 0),
        ] {
            let now = observed(&[("veth3", wrong)]);
            assert_eq!(port_fixes(&state, &now), expected, "{wrong:?}");
        }
    }

    #[test]
    fn a_limit_taken_off_is_cleared() {
        let none = PortIntent::from(Bandwidth::of(None, None));
        let state = set_up(&[pod(3)], &[("veth3", none)]);
        let now = observed(&[("veth3", port(ObservedQos::MaxRate(5), 7))]);
        assert_eq!(
            port_fixes(&state, &now),
            vec![PortFix::Limit {
                veth: "veth3".into(),
                bandwidth: Bandwidth::of(None, None),
            }]
        );
    }

    #[test]
    fn a_live_pods_missing_port_is_added_on_its_number_with_its_limits() {
        let state = set_up(&[pod(3), pod(4)], &[("veth4", LIMITED)]);
        let now = observed(&[("veth3", port(ObservedQos::None, 0))]);
        let fixes = port_fixes(&state, &now);
        assert_eq!(fixes.len(), 2, "{fixes:?}");
        assert_eq!(
            fixes[0],
            PortFix::Add {
                veth: "veth4".into(),
                ofport: 6
            }
        );
        assert!(matches!(&fixes[1], PortFix::Limit { veth, .. } if veth == "veth4"));
    }

    #[test]
    fn ports_ofnode_does_not_know_and_an_unset_node_are_left_alone() {
        let state = set_up(&[pod(3)], &[]);
        let now = observed(&[
            ("veth3", port(ObservedQos::MaxRate(9), 9)),
            ("someone-elses", port(ObservedQos::Other, 1)),
        ]);
        assert!(port_fixes(&state, &now).is_empty());
        let unset = NodeState {
            setup: None,
            ..set_up(&[pod(3)], &[("veth9", PortIntent::Removed)])
        };
        let with_veth9 = observed(&[("veth9", port(ObservedQos::None, 0))]);
        assert!(port_fixes(&unset, &with_veth9).is_empty());
    }
}
