//! What the node reports about itself: `ofnode status` and the drift part of it. Plain data,
//! so that the metrics, the drift watcher and the node's handles can all use it.

use serde::{Deserialize, Serialize};

use super::types::{Mode, Pod, SetupRequest};

/// A snapshot of the node for `ofnode status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub switch_connected: bool,
    pub ovsdb_connected: bool,
    /// Setup has been done (its version note is in the desired table).
    pub set_up: bool,
    /// The version note the node writes in table 253 (`"00.03"`), once set up.
    pub version_note: Option<String>,
    pub mode: Option<Mode>,
    pub setup: Option<SetupRequest>,
    /// The switch's table was last found (or made) equal to the desired table, and the
    /// session has not dropped since.
    pub in_sync: bool,
    pub datapath_id: Option<String>,
    pub datapath_type: String,
    pub bridge: String,
    pub pods: usize,
    pub host_subnets: usize,
    pub services: usize,
    pub multicast_vnids: usize,
    pub egress_vnids: usize,
    /// Flows in the desired table.
    pub flows: usize,
    /// NetworkPolicies and namespaces held (in the networkpolicy mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netpols: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<usize>,
    /// The VXLAN device, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vxlan: Option<crate::netlink::VxlanStatus>,
    /// How flow table drift is detected, and the repairs so far.
    #[serde(default)]
    pub drift: DriftStatus,
    /// High availability, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<super::ha::HaStatus>,
    /// What the operator should act on: an Open vSwitch bug that applies to this node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Open vSwitch's stale-megaflow bug on this switch and ofnode's mitigation of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_megaflows: Option<StaleMegaflowStatus>,
    /// The policy audit log: where it goes, events, lines, what was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<super::audit_log::AuditStatus>,
    /// The audited policy rules' meters (in the networkpolicy mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_meters: Option<AuditMeterStatus>,
}

/// The audited rules' meters: one per rule, at the configured rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditMeterStatus {
    /// Packet-ins per second per rule, and the burst.
    pub rate: u32,
    pub burst: u32,
    /// Audited rules (each has a meter on the switch, unless refused).
    pub rules: usize,
    /// Meters the switch refused: those rules' audit packet-ins are unmetered (the policy is
    /// enforced all the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedMeter>,
}

/// A meter the switch refused, and its error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RefusedMeter {
    pub meter: u32,
    /// The rule, as `tier direction verdict #id`.
    pub rule: String,
    pub error: String,
}

/// The bug and the mitigation, as `ofnode status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StaleMegaflowStatus {
    pub bug: String,
    pub upstream_fix: String,
    pub affected_versions: String,
    /// This switch: affected or not, and why.
    pub switch: String,
    /// Whether ofnode purges the datapath's flows after each change on this switch.
    pub mitigation: String,
    /// Successful purges, their total and last time, and failed ones.
    pub purges: u64,
    pub purge_time_total_ms: f64,
    pub last_purge_ms: Option<f64>,
    pub purge_errors: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_purge_error: Option<String>,
}

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

/// A pod as the node holds it, checked against the switch and OVSDB (the API's pod lookup,
/// whose body of it is `api::wire::PodStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStatus {
    pub pod: Pod,
    /// Its veth is a port of the bridge (false when the veth name is unknown).
    pub port: bool,
    /// Its flows that the switch does not hold exactly, as `ovs-ofctl dump-flows` prints them;
    /// empty when all are in.
    pub missing_flows: Vec<String>,
    /// Its traffic at the last counter poll (`counters.rs`); absent when counters are off or
    /// it has not been polled yet.
    pub counters: Option<super::counters::PodCounters>,
}
