//! Reading the switch's flows back into values: the inverse of `flows.rs`, in one place. The
//! seed read its own flows back in three places: AlreadySetUp (the version note), UpdatePod's
//! getPodDetailsByContainerID (a pod from its table 20 note) and FindUnusedVNIDs; ofnode adds
//! a fourth: which pod a flow's counters belong to (`counters.rs`).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ofnode_proto::{Action, Field, FlowStats, Instruction};

use super::flows::version_note_bytes;
use super::layout::{
    ARP_TO_LOCAL, FROM_POD, POLICY, REG_DESTINATION_VNID, REG_SOURCE_VNID, TO_LOCAL, TO_SERVICE,
    VERSION_NOTE,
};
use super::types::Mode;
use super::types::Pod;
use crate::value::{MacAddr, SandboxId, Vnid};

/// The seed's AlreadySetUp: the flows hold the version note of `mode`'s setup.
pub fn holds_version_note(flows: &[FlowStats], mode: Mode) -> bool {
    let note = version_note_bytes(mode);
    flows
        .iter()
        .filter(|f| f.table_id == VERSION_NOTE)
        .any(|f| notes(&f.instructions).any(|n| n.starts_with(&note)))
}

/// The seed's getPodDetailsByContainerID: the table 20 ARP flow whose note starts with the
/// sandbox id gives the pod's port, IP, MAC and VNID. Its veth name is not in any flow.
pub fn pod_by_note(flows: &[FlowStats], sandbox: &SandboxId) -> Option<Pod> {
    flows
        .iter()
        .filter(|f| f.table_id == FROM_POD)
        .filter(|f| notes(&f.instructions).any(|n| n.starts_with(sandbox.bytes())))
        .find_map(|f| {
            let ofport = f.match_.exact(Field::InPort)?;
            let ip = f.match_.exact(Field::ArpSpa)?;
            let mac = f.match_.exact(Field::ArpSha)?;
            let vnid = loaded(&f.instructions, REG_SOURCE_VNID).unwrap_or(0);
            Some(Pod {
                veth: None,
                ip: Ipv4Addr::from(u32::try_from(ip).ok()?),
                mac: MacAddr::try_from(mac.to_be_bytes().get(2..8)?).ok()?,
                sandbox: *sandbox,
                vnid: Vnid::new(u32::try_from(vnid).ok()?).ok()?,
                ofport: u16::try_from(ofport).ok()?,
            })
        })
}

/// The seed's FindUnusedVNIDs: VNIDs with a table 80 rule comparing reg1 to them, but no pod
/// (table 70) or service (table 60) loading them into reg1. VNID 0 is always in use.
pub fn unused_vnids(flows: &[FlowStats]) -> Vec<Vnid> {
    let mut in_use = BTreeSet::from([0u64]);
    let mut policed = BTreeSet::from([0u64]);
    for flow in flows {
        if flow.table_id == TO_SERVICE || flow.table_id == TO_LOCAL {
            in_use.extend(loaded(&flow.instructions, REG_DESTINATION_VNID));
        }
        if flow.table_id == POLICY {
            policed.extend(flow.match_.exact(REG_DESTINATION_VNID));
        }
    }
    policed
        .difference(&in_use)
        .filter_map(|v| u32::try_from(*v).ok().and_then(|v| Vnid::new(v).ok()))
        .collect()
}

/// A flow of a pod's own (`flows::pod_flows`), by the direction its packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodFlow {
    /// Table 20: from the pod's port with its source address (ARP or IP).
    FromPod { ofport: u16, ip: Ipv4Addr },
    /// Table 40 (ARP) or 70 (IP) to the pod's address.
    ToPod { ip: Ipv4Addr },
}

/// Which pod flow `flow` is, if it is one: the match fields `pod_flows` writes, read back.
/// The tables' other flows (their priority 0 drops) match none of these fields.
pub fn pod_flow(flow: &FlowStats) -> Option<PodFlow> {
    let ip = |field| {
        let value = flow.match_.exact(field)?;
        Some(Ipv4Addr::from(u32::try_from(value).ok()?))
    };
    match flow.table_id {
        FROM_POD => {
            let ofport = u16::try_from(flow.match_.exact(Field::InPort)?).ok()?;
            let ip = ip(Field::ArpSpa).or_else(|| ip(Field::Ipv4Src))?;
            Some(PodFlow::FromPod { ofport, ip })
        }
        ARP_TO_LOCAL => Some(PodFlow::ToPod {
            ip: ip(Field::ArpTpa)?,
        }),
        TO_LOCAL => Some(PodFlow::ToPod {
            ip: ip(Field::Ipv4Dst)?,
        }),
        _ => None,
    }
}

/// The notes among a flow's actions.
fn notes(instructions: &[Instruction]) -> impl Iterator<Item = &[u8]> {
    actions(instructions).filter_map(|a| match a {
        Action::Note(note) => Some(note.as_bytes()),
        _ => None,
    })
}

/// The value a flow's actions load into `field`, if they load one.
fn loaded(instructions: &[Instruction], field: Field) -> Option<u64> {
    actions(instructions).find_map(|a| match a {
        Action::RegLoad { dst, value } if dst.field == field => Some(*value),
        _ => None,
    })
}

fn actions(instructions: &[Instruction]) -> impl Iterator<Item = &Action> {
    instructions
        .iter()
        .filter_map(|i| match i {
            Instruction::ApplyActions(actions) | Instruction::WriteActions(actions) => {
                Some(actions)
            }
            _ => None,
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::flows::{pod_flows, service_flows, version_flow};
    use crate::sdn::policy;
    use crate::sdn::table::installed as stats;
    use crate::sdn::types::Service;

    /// A flow as the switch reports it after `ovs-ofctl add-flow TEXT`.
    fn stats_of_text(flow: &str) -> FlowStats {
        crate::sdn::table::parse_flow(flow)
            .expect("our flows parse")
            .as_stats()
    }

    fn pod(ip: [u8; 4], vnid: u32, ofport: u16, sandbox: &str) -> Pod {
        Pod {
            veth: Some("veth1".parse().unwrap()),
            ip: Ipv4Addr::from(ip),
            mac: "0a:58:0a:80:00:05".parse().unwrap(),
            sandbox: sandbox.repeat(32).parse().unwrap(),
            vnid: Vnid::new(vnid).unwrap(),
            ofport,
        }
    }

    #[test]
    fn the_version_note_of_the_mode_is_found() {
        let flows = [stats(&version_flow(Mode::Multitenant))];
        assert!(holds_version_note(&flows, Mode::Multitenant));
        assert!(!holds_version_note(&flows, Mode::Subnet));
        assert!(!holds_version_note(&[], Mode::Multitenant));
    }

    #[test]
    fn a_pods_flows_are_read_back_by_direction() {
        let p = pod([10, 128, 0, 5], 42, 7, "ab");
        let found: Vec<Option<PodFlow>> =
            pod_flows(&p).iter().map(|f| pod_flow(&stats(f))).collect();
        let from = Some(PodFlow::FromPod {
            ofport: 7,
            ip: p.ip,
        });
        let to = Some(PodFlow::ToPod { ip: p.ip });
        assert_eq!(found, [from, from, to, to]);
        let drop = stats_of_text("table=20, priority=0, actions=drop");
        assert_eq!(pod_flow(&drop), None);
        let routing = stats_of_text(
            "table=30, priority=200, ip, nw_dst=10.128.0.0/23, actions=goto_table:70",
        );
        assert_eq!(pod_flow(&routing), None);
    }

    #[test]
    fn a_pod_is_read_back_from_its_flows_without_its_veth() {
        let wanted = pod([10, 128, 0, 5], 42, 7, "ab");
        let other = pod([10, 128, 0, 6], 1, 8, "cd");
        let flows: Vec<FlowStats> = pod_flows(&other)
            .iter()
            .chain(&pod_flows(&wanted))
            .map(stats)
            .collect();
        let found = pod_by_note(&flows, &wanted.sandbox).expect("found by its note");
        assert_eq!(
            found,
            Pod {
                veth: None,
                ..wanted
            }
        );
        let unknown: SandboxId = "ef".repeat(32).parse().unwrap();
        assert_eq!(pod_by_note(&flows, &unknown), None);
    }

    #[test]
    fn vnids_with_a_rule_but_no_pod_or_service_are_unused() {
        let rule = |vnid| policy::of(Mode::Multitenant).vnid_flows(Vnid::new(vnid).unwrap());
        let service = Service {
            ip: Ipv4Addr::new(172, 30, 0, 1),
            vnid: Vnid::new(5).unwrap(),
            ports: vec!["tcp/80".parse().unwrap()],
        };
        let mut wanted = pod_flows(&pod([10, 128, 0, 5], 3, 7, "ab"));
        wanted.extend(service_flows(&service));
        for vnid in [3, 5, 9, 12] {
            wanted.extend(rule(vnid));
        }
        let flows: Vec<FlowStats> = wanted.iter().map(stats).collect();
        let unused: Vec<u32> = unused_vnids(&flows).iter().map(|v| v.get()).collect();
        assert_eq!(unused, vec![9, 12]);
    }
}
