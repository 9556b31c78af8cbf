//! The trace as text for a person: one table per line (number, the seed's name, the flow that
//! matched in ovs-ofctl text, the actions it ran, its owner), then the verdict.
//!
//! ```text
//! packet: tcp,in_port=3,…,nw_src=10.128.0.10,nw_dst=10.128.2.10,…,tp_dst=80
//!   0 classify       table=0, priority=100,ip  actions=goto_table:20  [base]
//!  20 from pod       table=20, priority=100,ip,in_port=3,nw_src=10.128.0.10  actions=…  [pod …]
//!  …
//! verdict: tunnel to 192.0.2.12 (tun_id 0xa) through port 1 (vxlan0) via br-phy, by table 90
//! policy: networkpolicy ns1/web egress[0]: allow
//! ```
//!
//! The `policy:` line names the policy rules whose verdict flows the packet met, in order.

use std::fmt::Write;

use super::parse::{Matched, Step, Trace};
use super::verdict::{Output, OutputTo, Verdict};

const NAME_WIDTH: usize = 14;

impl Trace {
    pub fn render(&self) -> String {
        let mut out = String::new();
        for pass in &self.passes {
            match &pass.recirculation {
                None => {
                    let _ = writeln!(out, "packet: {}", pass.flow);
                }
                Some(recirc) => {
                    let _ = writeln!(out, "recirculation {:#x}: {}", recirc.id, recirc.note);
                }
            }
            for step in &pass.steps {
                out.push_str(&self.step_line(step));
                out.push('\n');
            }
            for note in &pass.notes {
                let _ = writeln!(out, "     note: {note}");
            }
        }
        let _ = writeln!(out, "verdict: {}", self.verdict_text());
        let rules: Vec<String> = self
            .policy_rules()
            .iter()
            .map(ToString::to_string)
            .collect();
        if !rules.is_empty() {
            let _ = writeln!(out, "policy: {}", rules.join("; then "));
        }
        out
    }

    fn step_line(&self, step: &Step) -> String {
        let name = if step.bridge == self.bridge {
            step.table_name.clone().unwrap_or_default()
        } else {
            format!("[{}]", step.bridge)
        };
        let mut line = format!("{:>3} {name:<NAME_WIDTH$} ", step.table);
        match (&step.matched, step.flow_text()) {
            (_, Some(flow)) => line.push_str(&flow),
            (Matched::NoMatch, None) => line.push_str("no flow matched"),
            (Matched::MissToController, None) => {
                line.push_str("no flow matched: to the controller")
            }
            (Matched::FragmentDropped, None) => line.push_str("IP fragment dropped (frag mode)"),
            (Matched::Flow { .. }, None) => {}
        }
        let actions = step.actions_text();
        if !actions.is_empty() {
            let _ = write!(line, "  actions={actions}");
        }
        if !step.owners.is_empty() {
            let owners: Vec<String> = step.owners.iter().map(ToString::to_string).collect();
            let _ = write!(line, "  [{}]", owners.join("; "));
        }
        if step.resumed {
            line.push_str("  (resumed after recirculation)");
        }
        line
    }

    /// One sentence: where the packet went, or what dropped it.
    pub fn verdict_text(&self) -> String {
        match &self.verdict {
            Verdict::Delivered { outputs } => {
                let outputs: Vec<String> = outputs.iter().map(output_text).collect();
                outputs.join("; ")
            }
            Verdict::Dropped { at, reason, failed } => {
                let mut text = String::from("dropped");
                if let Some(step) = at.and_then(|at| self.step(at)) {
                    let _ = write!(text, " in table {}", step.table);
                    if let Some(name) = &step.table_name {
                        let _ = write!(text, " ({name})");
                    }
                    if let Some(flow) = step.flow_text() {
                        let _ = write!(text, " by {flow}");
                    }
                    if !step.owners.is_empty() {
                        let owners: Vec<String> =
                            step.owners.iter().map(ToString::to_string).collect();
                        let _ = write!(text, " [{}]", owners.join("; "));
                    }
                }
                let _ = write!(text, ": {reason}");
                for output in failed {
                    let _ = write!(text, "; tried: {}", output_text(output));
                }
                text
            }
        }
    }
}

/// Where an output went; a failed one's problem is the drop's reason, said once there.
fn output_text(output: &Output) -> String {
    let port = |port: u32| match &output.port_name {
        Some(name) => format!("port {port} ({name})"),
        None => format!("port {port}"),
    };
    let mut text = match &output.to {
        OutputTo::Port { port: p } => format!("output to {}", port(*p)),
        OutputTo::Tunnel {
            port: p,
            tun_dst,
            tun_id,
            via,
        } => {
            let mut text = match tun_dst {
                Some(dst) => format!("tunnel to {dst}"),
                None => "tunnel (destination not set)".to_string(),
            };
            if let Some(id) = tun_id {
                let _ = write!(text, " (tun_id {id:#x})");
            }
            let _ = write!(text, " through {}", port(*p));
            if let Some(via) = via {
                let _ = write!(text, " via {via}");
            }
            text
        }
        OutputTo::Reserved { name } => format!("output to {name}"),
    };
    let _ = write!(text, ", by table {}", output.table);
    text
}
