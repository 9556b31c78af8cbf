//! Per-rule counters (issue 30), the pure part: the policy rules' packets and bytes from their
//! verdict flows' own statistics, the snapshot a poll leaves, and its Prometheus series with
//! their bound. The dump itself (one flow stats request) is `node/rule_counters.rs`.
//!
//! Every verdict flow of the policy tiers carries its rule's cookie ([`RuleRef::cookie`]), so
//! one request filtered by the cookie's tag ([`verdict_flows_request`]) returns them all,
//! whatever their table, and nothing else. A rule's counts are the sum over its flows (a
//! NetworkPolicy rule with numbered and named ports has two; a plain allow shared by several
//! rules counts for the one its cookie names, the smallest key among them).
//!
//! What the counts mean: packets the rule decided, i.e. the packets that met its verdict flow.
//! NetworkPolicy judges every packet of a connection in the original direction (replies pass
//! before any rule), so a rule counts its connections' forward packets, not only their first.
//! Counts restart from zero when the flow is replaced (a policy change that rewrites it, a
//! whole-table re-install): Prometheus' `rate()` treats that as a counter reset.
//!
//! /metrics exports at most `rule_metrics_max` series per counter (the first in label order,
//! so the same rules stay exported from one poll to the next); the other rules are summed into
//! one series labelled `policy="(other)"`, and `ofnode_policy_rule_metrics_omitted` says how
//! many rules it holds.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use ofnode_proto::{FlowStats, FlowStatsRequest};
use serde::{Deserialize, Serialize};

use super::audit::{AuditTier, RuleRef, COOKIE_TAG, COOKIE_TAG_MASK};
use super::core::audit_names::{RuleNamer, RuleNames, ISOLATION_RULE};
pub use super::counters::unix_ms;
use super::prometheus::{escape, gauge, header};

/// How many rule series /metrics exports at most, unless `rule_metrics_max` says otherwise.
pub const DEFAULT_RULE_METRICS_MAX: usize = 1_000;
/// How often /metrics' rule counters are refreshed, unless `rule_counters_interval` says
/// otherwise: a dump of every verdict flow is not free at 5,000 policies.
pub const DEFAULT_RULE_COUNTERS_INTERVAL: Duration = Duration::from_secs(60);
/// The `policy` label of the series that sums the rules past the cap.
pub const OTHER_POLICY: &str = "(other)";

/// The flow stats request that returns every verdict flow (any table) and nothing else.
pub fn verdict_flows_request() -> FlowStatsRequest {
    FlowStatsRequest {
        cookie: COOKIE_TAG,
        cookie_mask: COOKIE_TAG_MASK,
        ..FlowStatsRequest::default()
    }
}

/// What a rule's verdict flows counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleTraffic {
    pub packets: u64,
    pub bytes: u64,
    /// How many of the switch's flows carry the rule's cookie.
    pub flows: usize,
}

impl RuleTraffic {
    fn add(&mut self, packets: u64, bytes: u64, flows: usize) {
        self.packets = self.packets.saturating_add(packets);
        self.bytes = self.bytes.saturating_add(bytes);
        self.flows += flows;
    }
}

/// Each rule's traffic, summed over the flows whose cookie names it (flows without a verdict
/// cookie are ignored: a switch that ignores the cookie filter cannot add to a rule).
pub fn tally(flows: &[FlowStats]) -> BTreeMap<RuleRef, RuleTraffic> {
    let mut rules: BTreeMap<RuleRef, RuleTraffic> = BTreeMap::new();
    for flow in flows {
        if let Some(rule) = RuleRef::of_cookie(flow.cookie) {
            rules
                .entry(rule)
                .or_default()
                .add(flow.packet_count, flow.byte_count, 1);
        }
    }
    rules
}

/// One rule's counters as the API and `netpol list --stats` show them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCounters {
    #[serde(flatten)]
    pub names: RuleNames,
    /// The rule's key: its verdict flows' cookie is `0x4f41 << 48 | key`, its meter id `key`.
    pub key: u32,
    #[serde(flatten)]
    pub traffic: RuleTraffic,
}

/// The tallied rules with their names, in the order the tiers judge (admin, NetworkPolicy,
/// baseline), then by policy and rule; rules the node no longer holds come last.
pub fn named(rules: &BTreeMap<RuleRef, RuleTraffic>, namer: &RuleNamer) -> Vec<RuleCounters> {
    let mut out: Vec<(RuleRef, RuleCounters)> = rules
        .iter()
        .map(|(rule, traffic)| {
            let names = namer
                .rule(*rule)
                .unwrap_or_else(|| RuleNames::unnamed(*rule));
            let counters = RuleCounters {
                names,
                key: rule.key(),
                traffic: *traffic,
            };
            (*rule, counters)
        })
        .collect();
    out.sort_by_cached_key(|(rule, c)| {
        let named = c.names.is_named();
        (!named, rule.tier, c.names.policy_label(), rule.dir, rule.id)
    });
    out.into_iter().map(|(_, counters)| counters).collect()
}

/// The labels of a rule's series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleLabels {
    pub namespace: String,
    pub policy: String,
    pub rule: String,
    pub verdict: String,
}

/// A rule's series labels: a NetworkPolicy's namespace and name; an admin policy as
/// `anp/NAME` or `banp/default` (no namespace); isolation with no policy and the rule
/// `ingress:default-deny` (its direction, which the rule label of the others carries).
pub fn labels(names: &RuleNames) -> RuleLabels {
    let namespace = match names.tier {
        AuditTier::NetworkPolicy => names.namespace.clone().unwrap_or_default(),
        AuditTier::Admin | AuditTier::Baseline => String::new(),
    };
    let policy = match names.tier {
        AuditTier::NetworkPolicy => names.policy.clone().unwrap_or_default(),
        AuditTier::Admin | AuditTier::Baseline => names.policy_label(),
    };
    let rule = if names.rule == ISOLATION_RULE && names.policy.is_none() {
        format!("{}:{ISOLATION_RULE}", names.direction.as_str())
    } else {
        names.rule.clone()
    };
    RuleLabels {
        namespace,
        policy,
        rule,
        verdict: names.verdict.as_str().to_string(),
    }
}

/// What one dump found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSnapshot {
    /// The dump's time, in milliseconds since the Unix epoch (absent: never polled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polled_at_unix_ms: Option<u64>,
    pub rules: Vec<RuleCounters>,
}

/// A series' name, help, and the count it shows.
type Series = (&'static str, &'static str, fn(&RuleTraffic) -> u64);

const SERIES: [Series; 2] = [
    (
        "ofnode_policy_rule_packets_total",
        "Packets a policy rule decided (its verdict flows' packet counts).",
        |t| t.packets,
    ),
    (
        "ofnode_policy_rule_bytes_total",
        "Bytes a policy rule decided (its verdict flows' byte counts).",
        |t| t.bytes,
    ),
];

impl RuleSnapshot {
    /// The series: rules with equal labels summed; the first `max` in label order exported,
    /// the rest (and rules the node no longer holds) summed into one `policy="(other)"` series.
    pub fn render(&self, max: usize, out: &mut String) {
        let mut by_labels: BTreeMap<RuleLabels, RuleTraffic> = BTreeMap::new();
        let mut other = RuleTraffic::default();
        let mut omitted = 0usize;
        for rule in &self.rules {
            let t = rule.traffic;
            if rule.names.is_named() {
                by_labels
                    .entry(labels(&rule.names))
                    .or_default()
                    .add(t.packets, t.bytes, t.flows);
            } else {
                other.add(t.packets, t.bytes, t.flows);
                omitted += 1;
            }
        }
        let exported: Vec<(&RuleLabels, &RuleTraffic)> = by_labels.iter().take(max).collect();
        for (_, t) in by_labels.iter().skip(max) {
            other.add(t.packets, t.bytes, t.flows);
            omitted += 1;
        }
        let other_labels = RuleLabels {
            namespace: String::new(),
            policy: OTHER_POLICY.to_string(),
            rule: String::new(),
            verdict: String::new(),
        };
        for (name, help, value) in SERIES {
            header(out, name, help, "counter");
            for (labels, traffic) in exported.iter().copied().chain([(&other_labels, &other)]) {
                let _ = writeln!(
                    out,
                    "{name}{{namespace=\"{}\",policy=\"{}\",rule=\"{}\",verdict=\"{}\"}} {}",
                    escape(&labels.namespace),
                    escape(&labels.policy),
                    escape(&labels.rule),
                    escape(&labels.verdict),
                    value(traffic)
                );
            }
        }
        gauge(
            out,
            "ofnode_policy_rule_metrics_omitted",
            "Policy rules summed into the policy=\"(other)\" series: more rules than rule_metrics_max, or rules deleted since the poll.",
            omitted,
        );
        if let Some(ms) = self.polled_at_unix_ms {
            gauge(
                out,
                "ofnode_policy_rule_counters_polled_timestamp_seconds",
                "When the policy rule counters were last polled.",
                ms as f64 / 1e3,
            );
        }
    }
}

/// The last poll's snapshot, shared by the poller and /metrics.
#[derive(Debug)]
pub struct RuleCounterStore {
    max_exported: usize,
    last: Mutex<RuleSnapshot>,
}

impl Default for RuleCounterStore {
    fn default() -> Self {
        RuleCounterStore::new(DEFAULT_RULE_METRICS_MAX)
    }
}

impl RuleCounterStore {
    pub fn new(max_exported: usize) -> RuleCounterStore {
        RuleCounterStore {
            max_exported,
            last: Mutex::new(RuleSnapshot::default()),
        }
    }

    pub fn replace(&self, snapshot: RuleSnapshot) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = snapshot;
    }

    pub fn render(&self, out: &mut String) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .render(self.max_exported, out);
    }
}

#[cfg(test)]
mod tests;
