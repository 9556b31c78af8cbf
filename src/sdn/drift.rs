//! Drift repair: noticing that someone changed the switch's flows behind ofnode's back
//! (`ovs-ofctl del-flows`, a foreign `add-flow`, `mod-flows`) and having the writer restore the
//! desired table.
//!
//! At every connect the watcher subscribes to the switch's flow changes (ONF flow monitor).
//! The switch reports ofnode's own bundles abbreviated, and those are ignored; any other
//! change schedules one comparison of the switch's table with the desired one, a short
//! debounce later so that a burst (`del-flows` deleting 40 flows) costs one repair. Only when
//! the switch refuses the monitor does the watcher fall back to comparing periodically.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ofnode_proto::{FlowChange, FlowMonitorRequest};
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::core::{PerTable, Repaired};
use super::metrics::Metrics;
pub use super::report::{Detection, DriftReport, DriftStatus};
use super::request::{self, Envelope, Request};
use crate::openflow::{Switch, SwitchEvent};

/// The id of ofnode's one flow monitor per session.
const MONITOR_ID: u32 = 1;

pub type SharedDriftStatus = Arc<Mutex<DriftStatus>>;

fn lock(status: &SharedDriftStatus) -> std::sync::MutexGuard<'_, DriftStatus> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records a repair that changed the switch's table: counter, per-table metrics, status, log.
pub fn record_repair(
    status: &SharedDriftStatus,
    metrics: &Metrics,
    seen: &str,
    repaired: &Repaired,
    now: SystemTime,
) {
    Metrics::inc(&metrics.drift_repairs);
    metrics.count_drift(repaired);
    let report = DriftReport {
        at_unix: now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        seen: seen.to_string(),
        repaired: repaired.to_string(),
    };
    tracing::warn!(seen = %report.seen, repaired = %report.repaired,
        "the switch's flow table drifted from the desired one: repaired");
    let mut status = lock(status);
    status.repairs += 1;
    status.last = Some(report);
}

/// What the switch reported since the last repair was scheduled.
#[derive(Debug, Default)]
struct Seen {
    by_event: BTreeMap<&'static str, PerTable>,
    paused: bool,
}

impl Seen {
    fn add(&mut self, changes: &[FlowChange]) {
        for change in changes {
            self.by_event
                .entry(change.event.name())
                .or_default()
                .add(change.table_id);
        }
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .by_event
            .iter()
            .map(|(event, tables)| format!("{} {event} ({tables})", tables.total()))
            .collect();
        if self.paused {
            parts.push("the flow monitor paused (changes may be unreported)".into());
        }
        parts.join("; ")
    }
}

/// Settings of the watcher.
#[derive(Debug, Clone, Copy)]
pub struct DriftTiming {
    /// Watch for drift and repair it (default). Off, the switch's table is reconciled only at
    /// (re)connects, setup and explicit resyncs, as before drift repair existed.
    pub repair: bool,
    /// How long after the first reported change the comparison runs (changes arriving
    /// meanwhile join it).
    pub debounce: Duration,
    /// How often the table is compared when the switch refuses the flow monitor.
    pub poll_interval: Duration,
}

/// What the switch's events call for.
enum Due {
    /// A session came up: make its table the desired one.
    Resync,
    /// Foreign changes (described) were reported: compare and repair.
    Repair(String),
}

/// Reacts to the switch's events: a resync at every (re)connect, after (re)subscribing to
/// its flow changes; a drift repair shortly after foreign changes.
pub(crate) struct Watcher {
    pub(crate) events: mpsc::Receiver<SwitchEvent>,
    pub(crate) requests: mpsc::WeakSender<Envelope>,
    pub(crate) switch: Switch,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) status: SharedDriftStatus,
    pub(crate) timing: DriftTiming,
    /// High availability: heartbeats arrive as packet-ins, and every new session needs its
    /// role set up by the agent (notified here).
    pub(crate) ha: Option<(Arc<super::ha::HaShared>, Arc<tokio::sync::Notify>)>,
}

impl Watcher {
    pub(crate) async fn run(mut self) {
        let mut seen = Seen::default();
        let mut repair_at: Option<Instant> = None;
        let mut poll: Option<Interval> = None;
        loop {
            let due = tokio::select! {
                event = self.events.recv() => {
                    let Some(event) = event else { return };
                    self.on_event(event, &mut seen, &mut repair_at, &mut poll).await
                }
                () = sleep_until(repair_at) => {
                    repair_at = None;
                    let seen = std::mem::take(&mut seen).describe();
                    Some(Due::Repair(seen))
                }
                () = tick(&mut poll) => Some(Due::Repair(
                    "periodic comparison (no flow monitor)".into(),
                )),
            };
            if let Some(due) = due {
                if !self.send(due).await {
                    return;
                }
            }
        }
    }

    /// The writer request an event calls for, if any.
    async fn on_event(
        &mut self,
        event: SwitchEvent,
        seen: &mut Seen,
        repair_at: &mut Option<Instant>,
        poll: &mut Option<Interval>,
    ) -> Option<Due> {
        match event {
            SwitchEvent::Connected { datapath_id } => {
                Metrics::inc(&self.metrics.switch_connects);
                if let Some((_, new_session)) = &self.ha {
                    new_session.notify_one();
                }
                tracing::info!(
                    datapath_id = format!("{datapath_id:016x}"),
                    "switch connected; reconciling its flow table"
                );
                // Subscribe before comparing, so that no change falls between the two.
                *poll = if self.timing.repair {
                    self.subscribe().await
                } else {
                    lock(&self.status).detection = Detection::Off;
                    None
                };
                *seen = Seen::default();
                *repair_at = None;
                Some(Due::Resync)
            }
            SwitchEvent::Disconnected { reason } => {
                tracing::warn!(%reason, "switch disconnected");
                if self.timing.repair {
                    lock(&self.status).detection = Detection::Down;
                }
                *poll = None;
                None
            }
            SwitchEvent::AsyncError(error) => {
                tracing::warn!(%error, "switch reported an error");
                None
            }
            SwitchEvent::FlowsChanged(changes) => {
                tracing::debug!(
                    changes = changes.len(),
                    "the switch reports flow changes made by someone else"
                );
                seen.add(&changes);
                repair_at.get_or_insert_with(|| Instant::now() + self.timing.debounce);
                None
            }
            SwitchEvent::FlowMonitorPaused { resumed } => {
                tracing::warn!(
                    resumed,
                    "the switch paused or resumed the flow monitor; comparing tables"
                );
                seen.paused = true;
                repair_at.get_or_insert_with(|| Instant::now() + self.timing.debounce);
                None
            }
            SwitchEvent::PacketIn(packet_in) => {
                if let Some((shared, _)) = &self.ha {
                    shared.on_packet_in(&packet_in.view());
                }
                None
            }
            SwitchEvent::PortStatus(_) => None,
        }
    }

    /// Subscribes to the switch's flow changes; returns the polling timer when the switch
    /// refuses.
    async fn subscribe(&self) -> Option<Interval> {
        match self
            .switch
            .monitor_flows(FlowMonitorRequest::all_changes(MONITOR_ID))
            .await
        {
            Ok(_) => {
                tracing::info!("watching the switch's flow table (flow monitor)");
                lock(&self.status).detection = Detection::FlowMonitor;
                None
            }
            Err(crate::openflow::Error::Switch { error, .. }) => {
                let every = self.timing.poll_interval;
                tracing::warn!(%error, ?every,
                    "the switch refused the flow monitor: comparing its table periodically instead");
                lock(&self.status).detection = Detection::Polling;
                let mut interval = tokio::time::interval_at(Instant::now() + every, every);
                interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
                Some(interval)
            }
            Err(error) => {
                // The session went away meanwhile; the next connect subscribes again.
                tracing::warn!(%error, "subscribing to the switch's flow changes failed");
                None
            }
        }
    }

    /// False when the writer has gone (the node shut down). Nobody waits for the answer: a
    /// failure is logged by the writer, and the next event tries again.
    async fn send(&self, due: Due) -> bool {
        let sent = request::send_weak(&self.requests, |reply| match due {
            Due::Resync => Request::Resync {
                force: false,
                reply,
            },
            Due::Repair(seen) => Request::RepairDrift { seen, reply },
        });
        sent.await.is_some()
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofnode_proto::{FlowEvent, Match};

    fn change(event: FlowEvent, table_id: u8) -> FlowChange {
        FlowChange {
            event,
            reason: 0,
            priority: 100,
            idle_timeout: 0,
            hard_timeout: 0,
            table_id,
            cookie: 0,
            match_: Match::new(),
            instructions: vec![],
        }
    }

    #[test]
    fn what_was_seen_is_described_per_event_and_table() {
        let mut seen = Seen::default();
        seen.add(&[
            change(FlowEvent::Deleted, 10),
            change(FlowEvent::Deleted, 0),
            change(FlowEvent::Deleted, 10),
        ]);
        seen.add(&[change(FlowEvent::Added, 30)]);
        assert_eq!(
            seen.describe(),
            "1 added (table 30: 1); 3 deleted (table 0: 1, table 10: 2)"
        );
    }
}
