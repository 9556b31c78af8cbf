//! The policy audit log: packet-ins sent by audited rules' `controller(userdata=ofA1…)`
//! flows (table 24, `sdn/audit.rs`), one line per event.
//!
//! The connection sets these packet-ins apart in a bounded channel of their own (its packet-in
//! tap: a flood of them never starves the flow monitor's updates, and what overflows is
//! counted). The audit task decodes each (`packet.rs`), folds identical events of the same
//! second (`window.rs`), and once a second resolves the names of the rules and addresses of
//! the second's events in one Read on the core (`names.rs`), formats the
//! lines (`line.rs`) and queues them for the writer thread (`writer.rs`: the file with its
//! rotation, `file.rs`, and syslog, `syslog.rs`). Nothing here waits on the connection or
//! holds up the node's writer for long: the Read is one quick look, given up after a second.
//! `counters.rs`: what /metrics and `ofnode status` show.

pub mod config;
pub mod counters;
mod file;
pub mod line;
pub mod names;
pub mod packet;
mod syslog;
mod window;
mod writer;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use self::names::Names;
use self::window::{Event, Folded, Window};
use self::writer::{LineQueue, Record};
use super::audit::{RuleRef, Verdict};
use super::request::{self, Envelope};
use crate::openflow::{PacketInEvent, TappedPacketIns};

pub use self::config::{AuditLogConfig, LineFormat, SyslogTarget};
pub use self::counters::{AuditCounters, AuditStatus};

/// How often the window is flushed: identical events within it share a line.
const WINDOW: Duration = Duration::from_secs(1);
/// Longest wait for the names of one flush; the lines go without them after it.
const NAMES_TIMEOUT: Duration = Duration::from_secs(1);
/// Distinct events one window holds.
const WINDOW_CAPACITY: usize = 10_000;

/// The audit task: from the connection's packet-in tap to the queue of lines.
pub struct AuditTask {
    packet_ins: mpsc::Receiver<PacketInEvent>,
    requests: mpsc::WeakSender<Envelope>,
    counters: Arc<AuditCounters>,
    window: Window,
    lines: LineQueue,
    format: LineFormat,
    node: String,
}

/// Starts the writer thread and the audit task. The file is opened now: one that cannot be
/// is an error here, not a silent loss later.
pub fn start(
    cfg: &AuditLogConfig,
    tapped: TappedPacketIns,
    requests: mpsc::WeakSender<Envelope>,
    counters: Arc<AuditCounters>,
) -> std::io::Result<()> {
    counters.follow_switch_channel(tapped.dropped.clone());
    let lines = writer::start(cfg, counters.clone())?;
    let task = AuditTask {
        packet_ins: tapped.packet_ins,
        requests,
        counters,
        window: Window::new(WINDOW_CAPACITY),
        lines,
        format: cfg.format,
        node: cfg.node_name.clone(),
    };
    tokio::spawn(task.run());
    Ok(())
}

impl AuditTask {
    async fn run(mut self) {
        let mut tick = tokio::time::interval(WINDOW);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                packet_in = self.packet_ins.recv() => match packet_in {
                    Some(packet_in) => self.on_packet_in(&packet_in, SystemTime::now()),
                    None => break,
                },
                _ = tick.tick() => {
                    if !self.flush().await {
                        return;
                    }
                }
            }
        }
        self.flush().await;
    }

    fn on_packet_in(&mut self, packet_in: &PacketInEvent, now: SystemTime) {
        match decode(packet_in) {
            Ok(event) => {
                self.counters.event(event.rule.verdict);
                if !self.window.add(event, now) {
                    self.counters.dropped(counters::DropPlace::Queue);
                }
            }
            Err(error) => {
                self.counters.bad_packet();
                let bad = self.counters.bad_packets();
                if bad.is_power_of_two() {
                    tracing::warn!(%error, bad, "audit log: a packet-in could not be read");
                }
            }
        }
    }

    /// Writes the window's lines; false when the writer is gone.
    async fn flush(&mut self) -> bool {
        if self.window.is_empty() {
            return true;
        }
        let folded = self.window.take();
        let names = self.resolve(&folded).await;
        folded.iter().all(|f| {
            let line = line::Line {
                folded: f,
                names: &names,
                node: &self.node,
            };
            self.lines.push(Record {
                line: line.render(self.format),
                severity: severity(f.event.rule.verdict),
            })
        })
    }

    /// The names of the rules and addresses of `folded`, in one Read on the core (none when
    /// the node is gone, refuses, or takes too long).
    async fn resolve(&self, folded: &[Folded]) -> Names {
        let Some(requests) = self.requests.upgrade() else {
            return Names::default();
        };
        let rules: Vec<RuleRef> = folded
            .iter()
            .map(|f| f.event.rule)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let ips: Vec<Ipv4Addr> = folded
            .iter()
            .flat_map(|f| [f.event.tuple.src, f.event.tuple.dst])
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let look = move |core: &super::core::Core| {
            Ok::<_, super::error::Error>(names::resolve(core, &rules, &ips))
        };
        match tokio::time::timeout(NAMES_TIMEOUT, request::read(&requests, look)).await {
            Ok(Ok(names)) => names,
            Ok(Err(error)) => {
                tracing::debug!(%error, "audit log: names not resolved");
                Names::default()
            }
            Err(_) => {
                tracing::debug!("audit log: names not resolved in time");
                Names::default()
            }
        }
    }
}

/// The rule and 5-tuple a packet-in reports.
fn decode(packet_in: &PacketInEvent) -> Result<Event, packet::BadPacket> {
    let view = packet_in.view();
    let rule = RuleRef::of_userdata(view.userdata).ok_or(packet::BadPacket::NoRule)?;
    let tuple = packet::parse(view.packet)?;
    Ok(Event { rule, tuple })
}

fn severity(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Deny => syslog::SEVERITY_WARNING,
        Verdict::Allow | Verdict::Pass => syslog::SEVERITY_NOTICE,
    }
}
