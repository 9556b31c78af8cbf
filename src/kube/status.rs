//! What `ofnode status` and /metrics show of the node's following: the API server reached or
//! not, each kind listed and applied (synced), the resourceVersion of the last event applied,
//! how long since the last event, relists, and every bad object with its reason.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::input::{Kind, ObjectRef};

/// The node's following, as `ofnode status` shows it (`kubernetes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeStatus {
    /// The API server's URL.
    pub server: String,
    /// This node's name (its Node, its HostSubnet).
    pub node: String,
    /// The last request to the API server succeeded (a watch that fails turns it false).
    pub connected: bool,
    /// Why the last request failed, while it is not connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Every kind was listed and what it said applied (after a relist, again once applied).
    pub synced: bool,
    /// Edits sent to the node that have not been applied yet.
    pub pending_edits: usize,
    /// Objects whose edit failed for a reason of the moment, to be sent again.
    pub retrying: usize,
    pub resources: Vec<ResourceStatus>,
    /// Objects the API accepted that the node cannot implement (or only in part).
    pub bad_objects: Vec<BadObject>,
}

/// One kind's following.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceStatus {
    pub kind: String,
    /// Listed (the last relist included) and applied.
    pub synced: bool,
    /// Objects of the kind the node holds.
    pub objects: usize,
    /// The resourceVersion of the last event of this kind the node applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Seconds since the last event of this kind (None: none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_age_secs: Option<f64>,
    pub events: u64,
    /// Lists after the first (a watch that expired: 410 Gone).
    pub relists: u64,
    pub bad: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadObject {
    pub kind: String,
    /// `name` or `namespace/name`.
    pub name: String,
    pub reason: String,
}

/// The follower's live view, shared with the API server (status, metrics).
#[derive(Debug, Default)]
pub struct Tracker {
    inner: Mutex<Live>,
}

#[derive(Debug, Default)]
struct Live {
    server: String,
    node: String,
    connected: bool,
    last_error: Option<String>,
    pending_edits: usize,
    retrying: usize,
    /// Every edit up to this one is applied.
    applied_through: u64,
    kinds: BTreeMap<Kind, KindLive>,
    bad: BTreeMap<ObjectRef, String>,
}

#[derive(Debug, Default)]
struct KindLive {
    listed: bool,
    /// The last edit the list sent: synced once every edit up to it is applied.
    awaited: u64,
    objects: usize,
    resource_version: Option<String>,
    last_event: Option<Instant>,
    events: u64,
    lists: u64,
}

impl Tracker {
    pub fn new(server: &str, node: &str) -> Arc<Tracker> {
        let tracker = Tracker::default();
        {
            let mut live = tracker.lock();
            live.server = server.to_string();
            live.node = node.to_string();
            for kind in Kind::ALL {
                live.kinds.insert(kind, KindLive::default());
            }
        }
        Arc::new(tracker)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn connected(&self) {
        let mut live = self.lock();
        live.connected = true;
        live.last_error = None;
    }

    pub fn failed(&self, error: &str) {
        let mut live = self.lock();
        live.connected = false;
        live.last_error = Some(error.to_string());
    }

    pub fn is_connected(&self) -> bool {
        self.lock().connected
    }

    /// A request failed and none succeeded since.
    pub fn is_failing(&self) -> bool {
        self.lock().last_error.is_some()
    }

    /// A (re)list of `kind` began: it is not synced until it is done and applied.
    pub fn listing(&self, kind: Kind) {
        let mut live = self.lock();
        let k = live.kinds.entry(kind).or_default();
        k.listed = false;
        k.lists += 1;
    }

    /// The list of `kind` is done; its edits up to `seq` must be applied for it to be synced.
    pub fn listed(&self, kind: Kind, seq: u64) {
        let mut live = self.lock();
        let k = live.kinds.entry(kind).or_default();
        k.listed = true;
        k.awaited = seq;
    }

    /// An event of `kind` (its object's resourceVersion) arrived.
    pub fn event(&self, kind: Kind, objects: usize) {
        let mut live = self.lock();
        let k = live.kinds.entry(kind).or_default();
        k.events += 1;
        k.objects = objects;
        k.last_event = Some(Instant::now());
    }

    /// An edit of `kind` carrying `resource_version` is applied; every edit up to `through`
    /// is.
    pub fn applied(&self, kind: Option<Kind>, through: u64, resource_version: Option<String>) {
        let mut live = self.lock();
        live.applied_through = live.applied_through.max(through);
        if let (Some(kind), Some(rv)) = (kind, resource_version) {
            live.kinds.entry(kind).or_default().resource_version = Some(rv);
        }
    }

    /// Edits sent and not applied; objects waiting to be sent again.
    pub fn set_pending(&self, pending: usize, retrying: usize) {
        let mut live = self.lock();
        live.pending_edits = pending;
        live.retrying = retrying;
    }

    /// `object`'s outcome: bad for `reason`, or (None) fine.
    pub fn judge(&self, object: &ObjectRef, reason: Option<String>) {
        let mut live = self.lock();
        match reason {
            Some(reason) => {
                if live.bad.get(object) != Some(&reason) {
                    tracing::warn!(object = %object, %reason, "the node cannot implement this object");
                }
                live.bad.insert(object.clone(), reason);
            }
            None => {
                live.bad.remove(object);
            }
        }
    }

    /// Whether every kind is synced.
    pub fn synced(&self) -> bool {
        self.snapshot().synced
    }

    pub fn snapshot(&self) -> KubeStatus {
        let live = self.lock();
        let now = Instant::now();
        let resources: Vec<ResourceStatus> = live
            .kinds
            .iter()
            .map(|(kind, k)| ResourceStatus {
                kind: kind.name().to_string(),
                synced: k.listed && live.applied_through >= k.awaited,
                objects: k.objects,
                resource_version: k.resource_version.clone(),
                last_event_age_secs: k.last_event.map(|at| (now - at).as_secs_f64()),
                events: k.events,
                relists: k.lists.saturating_sub(1),
                bad: live.bad.keys().filter(|o| o.kind == *kind).count(),
            })
            .collect();
        KubeStatus {
            server: live.server.clone(),
            node: live.node.clone(),
            connected: live.connected,
            last_error: live.last_error.clone(),
            synced: live.retrying == 0 && resources.iter().all(|r| r.synced),
            pending_edits: live.pending_edits,
            retrying: live.retrying,
            resources,
            bad_objects: live
                .bad
                .iter()
                .map(|(object, reason)| BadObject {
                    kind: object.kind.name().to_string(),
                    name: object.key.clone(),
                    reason: reason.clone(),
                })
                .collect(),
        }
    }
}

impl KubeStatus {
    /// What `ofnode status` prints of it: the connection, then one line per kind (synced,
    /// objects, the resourceVersion applied, the age of the last event, relists, bad objects),
    /// then each bad object with its reason.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let connection = match (self.connected, &self.last_error) {
            (true, _) => "connected".to_string(),
            (false, Some(error)) => format!("NOT connected ({error})"),
            (false, None) => "NOT connected (no answer yet)".to_string(),
        };
        let synced = if self.synced { "synced" } else { "NOT synced" };
        let _ = writeln!(
            out,
            "kubernetes: {} as node {}: {connection}, {synced}, {} edits pending, {} retrying",
            self.server, self.node, self.pending_edits, self.retrying
        );
        for r in &self.resources {
            let age = r
                .last_event_age_secs
                .map_or("none".to_string(), |secs| format!("{secs:.1} s ago"));
            let _ = writeln!(
                out,
                "  {:<20} {:<10} objects {:<6} resourceVersion {:<10} last event {:<12} relists {} bad {}",
                r.kind,
                if r.synced { "synced" } else { "NOT synced" },
                r.objects,
                r.resource_version.as_deref().unwrap_or("-"),
                age,
                r.relists,
                r.bad
            );
        }
        for bad in &self.bad_objects {
            let _ = writeln!(out, "  bad {} {}: {}", bad.kind, bad.name, bad.reason);
        }
        out
    }

    /// The Prometheus text of this status (appended to the node's /metrics).
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP ofnode_kube_connected Whether the last request to the Kubernetes API server succeeded.\n# TYPE ofnode_kube_connected gauge\nofnode_kube_connected {}",
            u8::from(self.connected)
        );
        let _ = writeln!(
            out,
            "# HELP ofnode_kube_synced Whether the kind was listed and applied.\n# TYPE ofnode_kube_synced gauge"
        );
        for r in &self.resources {
            let _ = writeln!(
                out,
                "ofnode_kube_synced{{kind=\"{}\"}} {}",
                r.kind,
                u8::from(r.synced)
            );
        }
        let families = [
            (
                "ofnode_kube_objects",
                "gauge",
                "Objects of the kind the node holds.",
            ),
            (
                "ofnode_kube_events_total",
                "counter",
                "Watch events of the kind.",
            ),
            (
                "ofnode_kube_relists_total",
                "counter",
                "Lists of the kind after the first (410 Gone).",
            ),
            (
                "ofnode_kube_bad_objects",
                "gauge",
                "Objects of the kind the node cannot implement.",
            ),
            (
                "ofnode_kube_applied_resource_version",
                "gauge",
                "The resourceVersion of the last event of the kind the node applied.",
            ),
            (
                "ofnode_kube_last_event_age_seconds",
                "gauge",
                "Seconds since the last event of the kind.",
            ),
        ];
        for (name, kind, help) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for r in &self.resources {
                let value = match name {
                    "ofnode_kube_objects" => Some(r.objects as f64),
                    "ofnode_kube_events_total" => Some(r.events as f64),
                    "ofnode_kube_relists_total" => Some(r.relists as f64),
                    "ofnode_kube_bad_objects" => Some(r.bad as f64),
                    "ofnode_kube_applied_resource_version" => r
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse::<f64>().ok()),
                    _ => r.last_event_age_secs,
                };
                if let Some(value) = value {
                    let _ = writeln!(out, "{name}{{kind=\"{}\"}} {value}", r.kind);
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP ofnode_kube_pending_edits Edits sent to the node not applied yet.\n# TYPE ofnode_kube_pending_edits gauge\nofnode_kube_pending_edits {}",
            self.pending_edits
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_says_connection_sync_versions_ages_and_bad_objects() {
        let status = KubeStatus {
            server: "https://192.0.2.1:6443/".into(),
            node: "node-0".into(),
            connected: false,
            last_error: Some("connection refused".into()),
            synced: false,
            pending_edits: 2,
            retrying: 1,
            resources: vec![ResourceStatus {
                kind: "NetworkPolicy".into(),
                synced: true,
                objects: 3,
                resource_version: Some("1234".into()),
                last_event_age_secs: Some(4.25),
                events: 9,
                relists: 1,
                bad: 1,
            }],
            bad_objects: vec![BadObject {
                kind: "NetworkPolicy".into(),
                name: "x/too-big".into(),
                reason: "spec.ingress: 101 rules".into(),
            }],
        };
        let text = status.render_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "kubernetes: https://192.0.2.1:6443/ as node node-0: NOT connected (connection refused), NOT synced, 2 edits pending, 1 retrying"
        );
        let kind: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            kind,
            [
                "NetworkPolicy",
                "synced",
                "objects",
                "3",
                "resourceVersion",
                "1234",
                "last",
                "event",
                "4.2",
                "s",
                "ago",
                "relists",
                "1",
                "bad",
                "1"
            ]
        );
        assert_eq!(
            lines[2],
            "  bad NetworkPolicy x/too-big: spec.ingress: 101 rules"
        );
    }
}
