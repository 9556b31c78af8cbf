//! Which flows each part of the desired state contributes. The desired table is the sum of
//! these; a change of one entity swaps that entity's old flows for its new ones.

use ofnode_proto::{text, FlowMod, FlowModCommand};

use crate::sdn::egress::egress_flows;
use crate::sdn::error::Error;
use crate::sdn::flows;
use crate::sdn::policy;
use crate::sdn::policy::networkpolicy::View;
use crate::sdn::state::{Entity, NodeState};
use crate::sdn::types::SetupRequest;

/// The node's setup when its mode enforces NetworkPolicy (the one place the core asks).
pub fn enforcing_setup(state: &NodeState) -> Option<&SetupRequest> {
    state
        .setup
        .as_ref()
        .filter(|setup| policy::of(setup.mode).enforces_network_policy())
}

/// The NetworkPolicy mode's part of `state`. A pod counts only with both its flows and its
/// namespace (so a pod change alone never changes the mode's flows: pods and their namespace
/// and labels come and go in one operation, the labels' change carrying the recompute).
pub fn netpol_view<'a>(state: &'a NodeState, setup: &'a SetupRequest) -> View<'a> {
    View {
        setup,
        namespaces: &state.namespaces,
        local: state
            .pod_meta
            .iter()
            .filter(|(ip, _)| state.pods.contains_key(ip))
            .map(|(ip, meta)| (*ip, meta))
            .collect(),
        remote: &state.remote_pods,
        netpols: &state.netpols,
    }
}

/// A flow of the NetworkPolicy mode's index, which still writes them as text: the one place
/// the node parses a flow it built (an error names the text: a bug in ofnode).
pub fn parse_netpol_flow(flow: &str) -> Result<FlowMod, Error> {
    text::parse_flow(flow, FlowModCommand::Add).map_err(|e| Error::Flow {
        flow: flow.to_string(),
        reason: e.to_string(),
    })
}

/// The flows `entity` contributes in `state` (none before setup: an unset node wants nothing).
pub fn entity_flows(state: &NodeState, entity: Entity) -> Result<Vec<FlowMod>, Error> {
    let Some(setup) = &state.setup else {
        return Ok(Vec::new());
    };
    Ok(match entity {
        Entity::Pod(ip) => state
            .pods
            .get(&ip)
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
            .get(&subnet)
            .map(flows::host_subnet_flows)
            .unwrap_or_default(),
        Entity::Service(ip) => state
            .services
            .get(&ip)
            .map(|svc| {
                let mut out = flows::service_flows(svc);
                out.extend(policy::of(setup.mode).vnid_flows(svc.vnid));
                out
            })
            .unwrap_or_default(),
        Entity::Multicast(vnid) => state
            .multicast
            .get(&vnid)
            .map(|m| flows::local_multicast_flows(vnid, &m.ofports))
            .unwrap_or_default(),
        Entity::VxlanMulticast => vec![flows::vxlan_multicast_flow(&state.vxlan_multicast)],
        Entity::Egress(vnid) => state
            .egress
            .get(&vnid)
            .map(|entry| egress_flows(vnid, entry).flows)
            .unwrap_or_default(),
        Entity::NetPol => match enforcing_setup(state) {
            Some(setup) => netpol_view(state, setup)
                .flows()
                .iter()
                .map(String::as_str)
                .map(parse_netpol_flow)
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        },
        Entity::Base => {
            let mut out = flows::base_flows(setup);
            out.push(flows::version_flow(setup.mode));
            out
        }
        Entity::Ovsdb => Vec::new(),
        Entity::Everything => {
            let mut flows = Vec::new();
            for entity in all_entities(state) {
                flows.extend(entity_flows(state, entity)?);
            }
            flows
        }
    })
}

/// Every entity of the state that contributes flows, setup's first.
pub fn all_entities(state: &NodeState) -> impl Iterator<Item = Entity> + '_ {
    std::iter::once(Entity::Base)
        .chain(state.pods.keys().map(|ip| Entity::Pod(*ip)))
        .chain(state.host_subnets.keys().map(|s| Entity::HostSubnet(*s)))
        .chain(state.services.keys().map(|ip| Entity::Service(*ip)))
        .chain(state.multicast.keys().map(|v| Entity::Multicast(*v)))
        .chain(std::iter::once(Entity::VxlanMulticast))
        .chain(state.egress.keys().map(|v| Entity::Egress(*v)))
        .chain(std::iter::once(Entity::NetPol))
}
