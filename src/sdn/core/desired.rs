//! Which flows each part of the desired state contributes. The desired table is the sum of
//! these; a change of one entity swaps that entity's old flows for its new ones.

use ofnode_proto::FlowMod;

use crate::sdn::egress::egress_flows;
use crate::sdn::flows;
use crate::sdn::policy;
use crate::sdn::state::{Entity, NodeState};
use crate::sdn::types::SetupRequest;

/// The node's setup when its mode enforces NetworkPolicy (the one place the core asks).
pub fn enforcing_setup(state: &NodeState) -> Option<&SetupRequest> {
    state
        .setup
        .as_ref()
        .filter(|setup| policy::of(setup.mode).enforces_network_policy())
}

/// The flows `entity` contributes in `state` (none before setup: an unset node wants nothing).
pub fn entity_flows(state: &NodeState, entity: &Entity) -> Vec<FlowMod> {
    let Some(setup) = &state.setup else {
        return Vec::new();
    };
    match entity {
        Entity::Pod(key) => state
            .pods
            .get(key)
            .map(|pod| {
                let mode = policy::of(setup.mode);
                let mut out = flows::pod_flows(pod);
                out.extend(mode.pod_flows(pod));
                out.extend(mode.vnid_flows(pod.vnid));
                out
            })
            .unwrap_or_default(),
        Entity::HostSubnet(subnet) => state
            .host_subnets
            .get(subnet)
            .map(flows::host_subnet_flows)
            .unwrap_or_default(),
        Entity::Service(ip) => state
            .services
            .get(ip)
            .map(|svc| {
                let mut out = flows::service_flows(svc);
                out.extend(policy::of(setup.mode).vnid_flows(svc.vnid));
                out
            })
            .unwrap_or_default(),
        Entity::Multicast(vnid) => state
            .multicast
            .get(vnid)
            .map(|m| flows::local_multicast_flows(*vnid, &m.ofports))
            .unwrap_or_default(),
        Entity::VxlanMulticast => vec![flows::vxlan_multicast_flow(&state.vxlan_multicast)],
        Entity::Egress(vnid) => state
            .egress
            .get(vnid)
            .map(|entry| egress_flows(*vnid, entry).flows)
            .unwrap_or_default(),
        // The NetworkPolicy mode's flows are its engine's (`produce/netpol`).
        Entity::NetPol => Vec::new(),
        Entity::Base => {
            let mut out = flows::base_flows(setup);
            out.push(flows::version_flow(setup.mode));
            out
        }
        Entity::Ovsdb => Vec::new(),
        Entity::Everything => all_entities(state)
            .flat_map(|entity| entity_flows(state, &entity))
            .collect(),
    }
}

/// Every entity of the state that contributes flows, setup's first.
pub fn all_entities(state: &NodeState) -> impl Iterator<Item = Entity> + '_ {
    std::iter::once(Entity::Base)
        .chain(state.pods.keys().map(|key| Entity::Pod(key.clone())))
        .chain(state.host_subnets.keys().map(|s| Entity::HostSubnet(*s)))
        .chain(state.services.keys().map(|ip| Entity::Service(*ip)))
        .chain(state.multicast.keys().map(|v| Entity::Multicast(*v)))
        .chain(std::iter::once(Entity::VxlanMulticast))
        .chain(state.egress.keys().map(|v| Entity::Egress(*v)))
}
