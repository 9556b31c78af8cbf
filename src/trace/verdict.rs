//! What became of the traced packet: where it left the bridge, or which flow dropped it.
//!
//! Read from the actions of the traced bridge's steps in every pass (a recirculated pass is the
//! same packet further along): each output action, with the port OVS resolved for
//! `output:NXM_NX_REG2[]` (`-> output port is N`), and for the VXLAN port the tunnel
//! destination the actions set (`set_field:IP->tun_dst`, or OVS's `-> tunneling to IP via
//! BRIDGE`) and the tunnel id. An output OVS could not carry out (`>> native tunnel routing
//! failed`, …) is kept with its reason but delivers nothing. Steps of other bridges (the
//! underlay bridge a tunnelled packet crosses) are the tunnel's business, not br0's.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::parse::{Action, Level, Matched, Pass, Step};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// At least one copy of the packet leaves the bridge.
    Delivered { outputs: Vec<Output> },
    /// Nothing leaves the bridge.
    Dropped {
        /// The step that dropped it: (pass, step) indexes into [`super::Trace::passes`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<StepRef>,
        reason: String,
        /// Outputs that were tried and failed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<Output>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRef {
    pub pass: usize,
    pub step: usize,
    pub table: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// The table whose action sent it.
    pub table: u8,
    pub to: OutputTo,
    /// Why OVS could not carry it out, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The port's name (filled in by [`super::Trace::attribute`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputTo {
    Port {
        port: u32,
    },
    /// Through a tunnel port to another node.
    Tunnel {
        port: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tun_dst: Option<Ipv4Addr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tun_id: Option<u64>,
        /// The underlay bridge OVS sends the encapsulated packet through.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    /// A reserved port: NORMAL, FLOOD, ALL, LOCAL, IN_PORT, CONTROLLER, …
    Reserved {
        name: String,
    },
}

impl OutputTo {
    pub fn port(&self) -> Option<u32> {
        match self {
            OutputTo::Port { port } | OutputTo::Tunnel { port, .. } => Some(*port),
            OutputTo::Reserved { .. } => None,
        }
    }
}

const RESERVED_PORTS: &[&str] = &[
    "IN_PORT",
    "TABLE",
    "NORMAL",
    "FLOOD",
    "ALL",
    "CONTROLLER",
    "LOCAL",
];

impl Verdict {
    pub(super) fn of(bridge: &str, passes: &[Pass]) -> Verdict {
        let mut outputs = Vec::new();
        for pass in passes {
            let mut tunnel = TunnelState::default();
            for step in pass.steps.iter().filter(|s| s.bridge == bridge) {
                for action in &step.actions {
                    tunnel.follow(action);
                    if let Some(output) = output_of(step, action, &tunnel) {
                        outputs.push(output);
                    }
                }
            }
        }
        let (delivered, failed): (Vec<_>, Vec<_>) =
            outputs.into_iter().partition(|o| o.problem.is_none());
        let datapath_drops = passes.iter().all(|p| p.datapath_actions == "drop");
        if !delivered.is_empty() && !datapath_drops {
            return Verdict::Delivered { outputs: delivered };
        }
        let (at, mut reason) = dropping_step(bridge, passes);
        if let Some(error) = passes.iter().find_map(|p| p.translation_error.as_ref()) {
            reason = format!("translation failed: {error}");
        } else if !failed.is_empty() {
            reason = failed
                .iter()
                .filter_map(|o| o.problem.clone())
                .collect::<Vec<_>>()
                .join("; ");
        } else if !delivered.is_empty() {
            reason = "the datapath drops it (datapath actions: drop)".into();
        }
        let mut failed = failed;
        failed.extend(delivered);
        Verdict::Dropped { at, reason, failed }
    }

    pub fn outputs(&self) -> &[Output] {
        match self {
            Verdict::Delivered { outputs } => outputs,
            Verdict::Dropped { .. } => &[],
        }
    }
}

/// The step of the last pass that dropped the packet: the last one of the traced bridge whose
/// lookup or actions end the packet, else simply its last step.
fn dropping_step(bridge: &str, passes: &[Pass]) -> (Option<StepRef>, String) {
    let Some((pass_index, pass)) = passes.iter().enumerate().next_back() else {
        return (None, "no pass".into());
    };
    let steps = pass
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.bridge == bridge);
    let found = steps
        .clone()
        .rev()
        .find_map(|(index, step)| drop_reason(step).map(|reason| (index, step, reason)))
        .or_else(|| {
            let (index, step) = steps.clone().next_back()?;
            Some((index, step, "no action sends it on".to_string()))
        });
    match found {
        Some((index, step, reason)) => (
            Some(StepRef {
                pass: pass_index,
                step: index,
                table: step.table,
            }),
            reason,
        ),
        None => (None, "no table was visited".into()),
    }
}

fn drop_reason(step: &Step) -> Option<String> {
    match step.matched {
        Matched::NoMatch => return Some("no flow matched".into()),
        Matched::MissToController => {
            return Some("no flow matched (sent to the controller)".into())
        }
        Matched::FragmentDropped => {
            return Some("an IP fragment, and the fragment mode is \"drop\"".into())
        }
        Matched::Flow { .. } => {}
    }
    let drops = step.actions.is_empty() || step.actions.iter().any(|a| a.text == "drop");
    drops.then(|| "the flow's actions drop it".into())
}

/// The tunnel fields the actions of a pass have set so far.
#[derive(Debug, Default)]
struct TunnelState {
    dst: Option<Ipv4Addr>,
    id: Option<u64>,
}

impl TunnelState {
    fn follow(&mut self, action: &Action) {
        let text = action.text.as_str();
        if let Some(value) = text
            .strip_prefix("set_field:")
            .and_then(|rest| rest.strip_suffix("->tun_dst"))
        {
            self.dst = value.parse().ok().or(self.dst);
        }
        if let Some(value) = text
            .strip_prefix("set_field:")
            .and_then(|rest| rest.strip_suffix("->tun_id"))
            .or_else(|| {
                text.strip_prefix("load:")
                    .and_then(|rest| rest.split_once("->NXM_NX_TUN_ID"))
                    .map(|(value, _)| value)
            })
        {
            self.id = parse_number(value).or(self.id);
        }
        // `move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31]` says its result in a detail.
        for detail in &action.details {
            if let Some(value) = detail
                .text
                .strip_prefix("NXM_NX_TUN_ID")
                .and_then(|rest| rest.split_once(" is now "))
                .map(|(_, value)| value)
            {
                self.id = parse_number(value).or(self.id);
            }
        }
    }
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn output_of(step: &Step, action: &Action, tunnel: &TunnelState) -> Option<Output> {
    let text = action.text.as_str();
    let target = text.strip_prefix("output:").unwrap_or(text);
    let reserved = RESERVED_PORTS
        .iter()
        .find(|name| target == **name || target.starts_with(&format!("{name}:")))
        .or_else(|| text.starts_with("controller(").then_some(&"CONTROLLER"));
    let port = match (target.parse::<u32>(), reserved) {
        (Ok(port), _) if text.starts_with("output:") => Some(port),
        _ if reserved.is_some() => None,
        // output:NXM_NX_REG2[], output:reg2: OVS says which port it was.
        _ if text.starts_with("output:") => action
            .details
            .iter()
            .find_map(|d| d.text.strip_prefix("output port is "))
            .and_then(|port| port.parse().ok()),
        _ => return None,
    };
    let problem = action
        .details
        .iter()
        .find(|d| {
            d.level != Level::Note
                || d.text.starts_with("skipping output")
                || d.text.starts_with("output to input port")
        })
        .map(|d| d.text.clone());
    let to = match (port, reserved) {
        (_, Some(name)) => OutputTo::Reserved {
            name: (*name).to_string(),
        },
        (Some(port), None) => tunnel_output(port, action, tunnel),
        (None, None) => {
            return Some(Output {
                table: step.table,
                to: OutputTo::Reserved {
                    name: target.to_string(),
                },
                problem: Some(problem.unwrap_or_else(|| "OVS named no output port".into())),
                port_name: None,
            })
        }
    };
    Some(Output {
        table: step.table,
        to,
        problem,
        port_name: None,
    })
}

/// A port output is a tunnel when OVS says so (`-> output to native tunnel`, `-> output to
/// kernel tunnel`).
fn tunnel_output(port: u32, action: &Action, tunnel: &TunnelState) -> OutputTo {
    let is_tunnel = action.details.iter().any(|d| {
        d.text.starts_with("output to native tunnel")
            || d.text.starts_with("output to kernel tunnel")
    });
    if !is_tunnel {
        return OutputTo::Port { port };
    }
    // `-> tunneling to 192.0.2.12 via br-phy`
    let route = action.details.iter().find_map(|d| {
        let rest = d.text.strip_prefix("tunneling to ")?;
        let (dst, via) = rest.split_once(" via ")?;
        Some((dst.parse().ok(), via.to_string()))
    });
    let (routed_dst, via) = match route {
        Some((dst, via)) => (dst, Some(via)),
        None => (None, None),
    };
    OutputTo::Tunnel {
        port,
        tun_dst: routed_dst.or(tunnel.dst),
        tun_id: tunnel.id,
        via,
    }
}
