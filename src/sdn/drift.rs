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
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ofnode_proto::{FlowChange, FlowMonitorRequest};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::metrics::Metrics;
use super::table::{Diff, Flow};
use super::writer::{Op, Request};
use crate::openflow::{Switch, SwitchEvent};

/// The id of ofnode's one flow monitor per session.
const MONITOR_ID: u32 = 1;

/// How drift is being detected right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detection {
    /// No session with the switch (the reconnect resync covers what happens meanwhile).
    #[default]
    Down,
    /// The switch reports every flow change as it happens.
    FlowMonitor,
    /// The switch refused the flow monitor: the table is compared periodically.
    Polling,
    /// Drift repair is switched off (`DriftTiming::repair`).
    Off,
}

/// One repair of drift, for `ofnode status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftReport {
    /// When it was repaired (seconds since the Unix epoch).
    pub at_unix: u64,
    /// What the switch reported, e.g. `"40 deleted (table 0: 3, table 10: 37)"`.
    pub seen: String,
    /// What the repair changed, e.g. `"restored 40 flows (table 0: 3, table 10: 37)"`.
    pub repaired: String,
}

/// Drift detection and repair, as `ofnode status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftStatus {
    pub detection: Detection,
    /// Repairs that changed the switch's table (also `ofnode_drift_repairs_total`).
    pub repairs: u64,
    pub last: Option<DriftReport>,
}

pub type SharedDriftStatus = Arc<Mutex<DriftStatus>>;

fn lock(status: &SharedDriftStatus) -> std::sync::MutexGuard<'_, DriftStatus> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts per table, printed as `table 0: 3, table 10: 37`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerTable(BTreeMap<u8, usize>);

impl PerTable {
    fn add(&mut self, table: u8) {
        *self.0.entry(table).or_default() += 1;
    }

    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    pub fn tables(&self) -> impl Iterator<Item = (u8, usize)> + '_ {
        self.0.iter().map(|(t, n)| (*t, *n))
    }

    fn of_flows(flows: &[Flow]) -> PerTable {
        let mut counts = PerTable::default();
        flows.iter().for_each(|f| counts.add(f.table()));
        counts
    }
}

impl fmt::Display for PerTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(table, n)| format!("table {table}: {n}"))
            .collect();
        write!(f, "{}", parts.join(", "))
    }
}

/// What a comparison of the switch's table with the desired one changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repaired {
    /// The tables were equal.
    Nothing,
    /// The version note was gone (everything deleted, or ovs-vswitchd restarted): the whole
    /// table was installed again in one bundle.
    Reinstalled { flows: usize },
    /// Foreign flows removed; missing or altered flows restored.
    Patched {
        removed: PerTable,
        restored: PerTable,
    },
}

impl Repaired {
    pub fn from_diff(diff: &Diff) -> Repaired {
        if diff.is_empty() {
            return Repaired::Nothing;
        }
        Repaired::Patched {
            removed: PerTable::of_flows(&diff.deletes),
            restored: PerTable::of_flows(&diff.adds),
        }
    }
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repaired::Nothing => write!(f, "nothing"),
            Repaired::Reinstalled { flows } => {
                write!(
                    f,
                    "re-installed the whole table ({flows} flows): its version note was gone"
                )
            }
            Repaired::Patched { removed, restored } => {
                let mut parts = Vec::new();
                if removed.total() > 0 {
                    parts.push(format!(
                        "removed {} foreign flows ({removed})",
                        removed.total()
                    ));
                }
                if restored.total() > 0 {
                    parts.push(format!(
                        "restored {} missing or altered flows ({restored})",
                        restored.total()
                    ));
                }
                write!(f, "{}", parts.join("; "))
            }
        }
    }
}

/// Records a repair that changed the switch's table: counter, per-table metrics, status, log.
pub fn record_repair(
    status: &SharedDriftStatus,
    metrics: &Metrics,
    seen: &str,
    repaired: &Repaired,
) {
    Metrics::inc(&metrics.drift_repairs);
    metrics.count_drift(repaired);
    let report = DriftReport {
        at_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
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

/// Reacts to the switch's events: a resync at every (re)connect, after (re)subscribing to
/// its flow changes; a drift repair shortly after foreign changes.
pub(crate) struct Watcher {
    pub(crate) events: mpsc::Receiver<SwitchEvent>,
    pub(crate) requests: mpsc::WeakSender<Request>,
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
            let op = tokio::select! {
                event = self.events.recv() => {
                    let Some(event) = event else { return };
                    self.on_event(event, &mut seen, &mut repair_at, &mut poll).await
                }
                () = sleep_until(repair_at) => {
                    repair_at = None;
                    let seen = std::mem::take(&mut seen).describe();
                    Some(Op::RepairDrift { seen })
                }
                () = tick(&mut poll) => Some(Op::RepairDrift {
                    seen: "periodic comparison (no flow monitor)".into(),
                }),
            };
            if let Some(op) = op {
                if !self.send(op).await {
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
    ) -> Option<Op> {
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
                Some(Op::Resync { force: false })
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
                    shared.on_packet_in(&packet_in);
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

    /// False when the writer has gone (the node shut down).
    async fn send(&self, op: Op) -> bool {
        let Some(requests) = self.requests.upgrade() else {
            return false;
        };
        let (request, _) = Request::new(op);
        requests.send(request).await.is_ok()
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

    #[test]
    fn a_repair_names_tables_and_counts() {
        let flow = |text: &str| super::super::table::parse_flow(text).unwrap();
        let diff = Diff {
            deletes: vec![flow("table=30, priority=5, ip, actions=drop")],
            adds: vec![
                flow("table=0, priority=100, arp, actions=drop"),
                flow("table=10, priority=100, arp, actions=drop"),
                flow("table=10, priority=50, arp, actions=drop"),
            ],
        };
        assert_eq!(
            Repaired::from_diff(&diff).to_string(),
            "removed 1 foreign flows (table 30: 1); \
             restored 3 missing or altered flows (table 0: 1, table 10: 2)"
        );
        assert_eq!(Repaired::from_diff(&Diff::default()), Repaired::Nothing);
    }
}
