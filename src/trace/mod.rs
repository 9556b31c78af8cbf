//! Packet tracing through br0: why does (or doesn't) a packet get where it should?
//!
//! ovs-vswitchd simulates the packet (`ofproto/trace`, asked over its control socket by
//! [`crate::unixctl`]); this module builds the question and reads the answer:
//! - [`packet`]: the packet described by its fields, and the flow argument that describes it;
//! - [`parse`]: the trace text as passes (one per recirculation) of steps (one per table
//!   visited: the flow that matched, in ovs-ofctl text, and the actions it ran);
//! - [`verdict`]: where the packet leaves the bridge (a port, a tunnel to another node) or
//!   which flow dropped it;
//! - [`owner`]: which object of the node each matched flow belongs to;
//! - [`tables`]: the seed's table names; [`render`]: the text form, one table per line
//!   (the JSON form is the types' serde form).

pub mod owner;
pub mod packet;
pub mod parse;
pub mod query;
pub mod render;
pub mod tables;
pub mod verdict;

pub use crate::unixctl::VswitchdCtl;
pub use owner::{Attribution, FlowKey, Owner, OwnerIndex};
pub use packet::{ArpOp, IpProto, Packet, PacketError, Payload, Tunnel};
pub use parse::{
    parse, Action, Detail, Level, Matched, ParseError, Pass, Recirculation, Step, Trace,
};
pub use query::{Proto, QueryError, TraceQuery};
pub use tables::{table_name, TABLES};
pub use verdict::{Output, OutputTo, StepRef, Verdict};

use crate::sdn::audit::RuleRef;
use crate::sdn::core::audit_names::{RuleNamer, RuleNames};
use crate::sdn::state::NodeState;
use crate::unixctl::{Unixctl, UnixctlError, UnixctlOptions};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot trace this packet: {0}")]
    Packet(#[from] PacketError),
    /// ovs-vswitchd refused the trace (an unknown bridge, a flow it cannot parse); `message` is
    /// its own text.
    #[error("ovs-vswitchd refused to trace `{flow}` on {bridge}: {message}")]
    Refused {
        bridge: String,
        flow: String,
        message: String,
    },
    #[error(transparent)]
    Unixctl(UnixctlError),
    #[error("cannot read ovs-vswitchd's trace: {0}")]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A flow of the desired state that the owner index cannot read: a bug of ofnode's.
    #[error("cannot attribute the flows: {0}")]
    Owners(String),
}

/// Answers an operator's question (`ofnode trace`, `GET /v1/trace`): the packet built from the
/// node's desired `state`, traced on `bridge` through the control socket `ctl` names, each
/// matched flow attributed to the object of `state` that wants it.
pub async fn trace_query(
    state: &NodeState,
    bridge: &str,
    ctl: &VswitchdCtl,
    query: &TraceQuery,
) -> Result<Trace, TraceError> {
    let packet = query.packet(state)?;
    let owners = OwnerIndex::from_state(state).map_err(|e| TraceError::Owners(e.to_string()))?;
    let path = ctl.path().map_err(TraceError::Unixctl)?;
    let mut unixctl = Unixctl::new(path, UnixctlOptions::default());
    let mut trace = trace(&mut unixctl, bridge, &packet, &owners).await?;
    trace.name_rules(&RuleNamer::of_state(state));
    Ok(trace)
}

/// Traces `packet` entering `bridge`, and attributes what it matched.
pub async fn trace(
    ctl: &mut Unixctl,
    bridge: &str,
    packet: &Packet,
    attribution: &(dyn Attribution + Sync),
) -> Result<Trace, TraceError> {
    trace_flow(ctl, bridge, &packet.to_flow()?, attribution).await
}

/// Traces a packet given as an `ofproto/trace` flow argument (ovs-ofctl flow syntax).
pub async fn trace_flow(
    ctl: &mut Unixctl,
    bridge: &str,
    flow: &str,
    attribution: &(dyn Attribution + Sync),
) -> Result<Trace, TraceError> {
    let text = ctl
        .call("ofproto/trace", &[bridge, flow])
        .await
        .map_err(|err| match err {
            UnixctlError::Command { message, .. } => TraceError::Refused {
                bridge: bridge.to_string(),
                flow: flow.to_string(),
                message,
            },
            other => TraceError::Unixctl(other),
        })?;
    let mut trace = parse(&text)?;
    trace.attribute(attribution);
    Ok(trace)
}

impl Trace {
    /// Fills in the owners of each step of the traced bridge (another bridge's flows, such as
    /// the underlay bridge a tunnelled packet crosses, are not the node's) and each output's
    /// port name.
    pub fn attribute(&mut self, attribution: &dyn Attribution) {
        let bridge = self.bridge.clone();
        let steps = self
            .passes
            .iter_mut()
            .flat_map(|pass| pass.steps.iter_mut());
        for step in steps.filter(|step| step.bridge == bridge) {
            if let Some(key) = FlowKey::of_step(step) {
                step.owners = attribution.owners(&key);
            }
        }
        let outputs = match &mut self.verdict {
            Verdict::Delivered { outputs } => outputs,
            Verdict::Dropped { failed, .. } => failed,
        };
        for output in outputs {
            output.port_name = output.to.port().and_then(|p| attribution.port_name(p));
        }
    }

    /// Names the policy rule of each verdict flow the packet met, by the rule its cookie names
    /// ([`RuleRef::of_cookie`]): that rule is the flow's owner (a rule the state no longer
    /// holds is named by its tier, direction, verdict and id).
    pub fn name_rules(&mut self, namer: &RuleNamer) {
        let bridge = self.bridge.clone();
        let steps = self
            .passes
            .iter_mut()
            .flat_map(|pass| pass.steps.iter_mut())
            .filter(|step| step.bridge == bridge);
        for step in steps {
            let Matched::Flow { cookie, .. } = step.matched else {
                continue;
            };
            if let Some(rule) = RuleRef::of_cookie(cookie) {
                let names = namer.rule(rule).unwrap_or_else(|| RuleNames::unnamed(rule));
                step.owners = vec![Owner::PolicyRule(names)];
            }
        }
    }

    /// The policy rules that decided the packet's fate, in the order it met them (an
    /// AdminNetworkPolicy's Pass, then the NetworkPolicy rule that allowed it, …).
    pub fn policy_rules(&self) -> Vec<&RuleNames> {
        self.bridge_steps()
            .flat_map(|step| &step.owners)
            .filter_map(|owner| match owner {
                Owner::PolicyRule(names) => Some(names),
                _ => None,
            })
            .collect()
    }

    /// The traced bridge's steps of every pass, in the order visited.
    pub fn bridge_steps(&self) -> impl Iterator<Item = &Step> {
        self.passes
            .iter()
            .flat_map(|pass| pass.steps.iter())
            .filter(|step| step.bridge == self.bridge)
    }

    /// The tables of the traced bridge, in the order visited.
    pub fn tables(&self) -> Vec<u8> {
        self.bridge_steps().map(|step| step.table).collect()
    }

    /// The step a [`StepRef`] points at.
    pub fn step(&self, at: StepRef) -> Option<&Step> {
        self.passes.get(at.pass)?.steps.get(at.step)
    }
}

#[cfg(test)]
mod tests;
