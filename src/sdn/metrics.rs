//! Counters and a latency histogram the daemon exports in Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::prometheus::{counter, gauge, header};

/// Upper bounds (seconds) of the operation latency histogram's buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A Prometheus histogram with fixed buckets, updated without locks.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            if seconds <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The total of all observations.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed))
    }

    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            let n = bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// The node's counters; one instance per node, shared with the daemon through `Node::metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Operations that succeeded / failed.
    pub operations: AtomicU64,
    pub operation_errors: AtomicU64,
    /// Bundles committed, and the flow mods they carried.
    pub transactions: AtomicU64,
    pub flow_mods: AtomicU64,
    /// Bundles that failed (the operations in them were undone).
    pub transaction_errors: AtomicU64,
    /// Sessions with the switch that came up (the first connect and every reconnect).
    pub switch_connects: AtomicU64,
    /// Whole-table re-installs (after a vswitchd restart or at setup), and partial repairs.
    pub full_reinstalls: AtomicU64,
    pub repairs: AtomicU64,
    /// Pod ports ovs-vswitchd could not set up after their add had returned.
    pub port_errors: AtomicU64,
    /// Passes of the OVSDB reconciler (pods' ports) that failed, each tried again later.
    pub ovsdb_reconcile_errors: AtomicU64,
    /// Egress DNS names whose answers changed.
    pub dns_changes: AtomicU64,
    /// Repairs of drift (someone else changed the switch's flows), and the flows they
    /// removed (foreign) or restored (missing or altered), by table.
    pub drift_repairs: AtomicU64,
    /// Comparisons with the desired table made because the switch reported changes (or, with
    /// no flow monitor, periodically); most find drift, a few find the change already undone.
    pub drift_checks: AtomicU64,
    /// Key: table (None: the whole table), kind.
    drift_flows: Mutex<BTreeMap<(Option<u8>, &'static str), u64>>,
    /// Time from a request's arrival to its answer.
    pub operation_latency: Histogram,
    /// Time of one bundle commit.
    pub transaction_latency: Histogram,
    /// Per-pod traffic counter polls that succeeded / failed, and what the last one found.
    pub pod_counter_polls: AtomicU64,
    pub pod_counter_poll_errors: AtomicU64,
    pub pod_counters: super::counters::PodCounterStore,
    /// Per-policy-rule counter polls that succeeded / failed, and what the last one found.
    pub rule_counter_polls: AtomicU64,
    pub rule_counter_poll_errors: AtomicU64,
    pub rule_counters: super::rule_counters::RuleCounterStore,
    /// Purges of the datapath's cached flows (Open vSwitch's stale-megaflow bug).
    pub megaflow_purges: PurgeCounters,
    /// The policy audit log (`audit_log/`).
    pub audit: std::sync::Arc<super::audit_log::AuditCounters>,
    /// Audited rules' meters the switch refused (their packet-ins then go unmetered).
    pub audit_meter_refusals: AtomicU64,
}

/// What the purges of the datapath's cached flows (`megaflows.rs`) cost so far, for /metrics
/// and `ofnode status`.
#[derive(Debug, Default)]
pub struct PurgeCounters {
    /// Purges that succeeded, and the time each took (count and sum).
    latency: Histogram,
    errors: AtomicU64,
    last_nanos: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl PurgeCounters {
    /// A purge that succeeded in `took` (it clears the last error).
    pub fn purged(&self, took: Duration) {
        self.latency.observe(took);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.last_nanos.store(nanos, Ordering::Relaxed);
        *self.lock_last_error() = None;
    }

    /// A purge that failed with `error`.
    pub fn failed(&self, error: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.lock_last_error() = Some(error);
    }

    pub fn purges(&self) -> u64 {
        self.latency.count()
    }

    /// The time the successful purges took, together.
    pub fn total_time(&self) -> Duration {
        self.latency.sum()
    }

    /// The time the last successful purge took; None before the first.
    pub fn last_time(&self) -> Option<Duration> {
        (self.purges() > 0).then(|| Duration::from_nanos(self.last_nanos.load(Ordering::Relaxed)))
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// The error of the last purge, while purges fail.
    pub fn last_error(&self) -> Option<String> {
        self.lock_last_error().clone()
    }

    fn lock_last_error(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Prometheus series: purges, failures, and the time spent purging.
    fn render(&self, out: &mut String) {
        counter(
            out,
            "ofnode_stale_megaflow_purges_total",
            "Purges of the datapath's cached flows after a committed bundle (Open vSwitch's stale-megaflow bug).",
            self.purges(),
        );
        counter(
            out,
            "ofnode_stale_megaflow_purge_errors_total",
            "Purges of the datapath's cached flows that failed (see the log and ofnode status).",
            self.errors(),
        );
        counter(
            out,
            "ofnode_stale_megaflow_purge_seconds_total",
            "Time spent in successful purges of the datapath's cached flows.",
            self.total_time().as_secs_f64(),
        );
    }
}

/// The policy audit log's series.
fn render_audit(audit: &super::audit_log::AuditCounters, out: &mut String) {
    use super::audit::Verdict;
    use super::audit_log::counters::DropPlace;
    let name = "ofnode_audit_events_total";
    header(
        out,
        name,
        "Packet-ins of audited policy rules (new connections), by verdict, before dedup.",
        "counter",
    );
    for verdict in [Verdict::Allow, Verdict::Deny, Verdict::Pass] {
        let n = audit.events(verdict);
        let _ = writeln!(out, "{name}{{verdict=\"{}\"}} {n}", verdict.as_str());
    }
    counter(
        out,
        "ofnode_audit_lines_total",
        "Lines written to the audit log (events folded per second, and dropped-event lines).",
        audit.lines(),
    );
    let name = "ofnode_audit_dropped_total";
    header(
        out,
        name,
        "Audit events or lines lost: switch_channel (the packet-in channel was full), queue (the dedup window or the line queue was full), file, syslog (could not be written).",
        "counter",
    );
    for place in DropPlace::ALL {
        let n = audit.drops(place);
        let _ = writeln!(out, "{name}{{where=\"{}\"}} {n}", place.as_str());
    }
    counter(
        out,
        "ofnode_audit_bad_packets_total",
        "Audit packet-ins whose packet or userdata could not be read.",
        audit.bad_packets(),
    );
}

impl Metrics {
    /// Counts an operation answered, and its latency since `started`.
    pub fn count_operation(&self, started: std::time::Instant, ok: bool) {
        self.operation_latency.observe(started.elapsed());
        Metrics::inc(if ok {
            &self.operations
        } else {
            &self.operation_errors
        });
    }

    /// The node's metrics, exporting the counters of at most `pod_metrics_max` pods and
    /// `rule_metrics_max` policy rules.
    pub fn new(pod_metrics_max: usize, rule_metrics_max: usize) -> Metrics {
        Metrics {
            pod_counters: super::counters::PodCounterStore::new(pod_metrics_max),
            rule_counters: super::rule_counters::RuleCounterStore::new(rule_metrics_max),
            ..Metrics::default()
        }
    }

    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a drift repair's flows to the per-table counters.
    pub(crate) fn count_drift(&self, repaired: &super::core::Repaired) {
        let mut flows = self.drift_flows.lock().unwrap_or_else(|e| e.into_inner());
        match repaired {
            super::core::Repaired::Nothing => {}
            super::core::Repaired::Reinstalled { flows: n } => {
                // Which tables lost what is unknown: everything was installed again.
                *flows.entry((None, "reinstalled")).or_default() += *n as u64;
            }
            super::core::Repaired::Patched { removed, restored } => {
                for (kind, per_table) in [("removed", removed), ("restored", restored)] {
                    for (table, n) in per_table.tables() {
                        *flows.entry((Some(table), kind)).or_default() += n as u64;
                    }
                }
            }
        }
    }

    fn render_drift_flows(&self, out: &mut String) {
        let name = "ofnode_drift_flows_total";
        let _ = writeln!(
            out,
            "# HELP {name} Flows a drift repair removed (foreign), restored (missing or altered) or reinstalled (whole table), by table."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        let flows = self.drift_flows.lock().unwrap_or_else(|e| e.into_inner());
        for ((table, kind), n) in flows.iter() {
            let table = table.map_or_else(|| "all".to_string(), |t| t.to_string());
            let _ = writeln!(out, "{name}{{table=\"{table}\",kind=\"{kind}\"}} {n}");
        }
    }

    /// The metrics (and the gauges of `status`) in Prometheus text exposition format.
    pub fn render(&self, status: &super::report::Status) -> String {
        let mut out = String::new();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        counter(
            &mut out,
            "ofnode_operations_total",
            "Node operations that succeeded.",
            load(&self.operations),
        );
        counter(
            &mut out,
            "ofnode_operation_errors_total",
            "Node operations that failed.",
            load(&self.operation_errors),
        );
        counter(
            &mut out,
            "ofnode_transactions_total",
            "OpenFlow bundles committed.",
            load(&self.transactions),
        );
        counter(
            &mut out,
            "ofnode_flow_mods_total",
            "Flow mods sent in committed bundles.",
            load(&self.flow_mods),
        );
        counter(
            &mut out,
            "ofnode_transaction_errors_total",
            "OpenFlow bundles that failed.",
            load(&self.transaction_errors),
        );
        counter(
            &mut out,
            "ofnode_port_errors_total",
            "Pod ports ovs-vswitchd could not set up (see the log for the device and error).",
            load(&self.port_errors),
        );
        counter(
            &mut out,
            "ofnode_ovsdb_reconcile_errors_total",
            "Passes of the OVSDB reconciler (pods' ports) that failed and are tried again (see the log).",
            load(&self.ovsdb_reconcile_errors),
        );
        counter(
            &mut out,
            "ofnode_switch_connects_total",
            "OpenFlow sessions established (connects and reconnects).",
            load(&self.switch_connects),
        );
        counter(
            &mut out,
            "ofnode_audit_meter_refusals_total",
            "METER_MODs of audited rules' meters the switch refused (see the log and status).",
            load(&self.audit_meter_refusals),
        );
        counter(
            &mut out,
            "ofnode_full_reinstalls_total",
            "Whole flow table re-installs in one bundle.",
            load(&self.full_reinstalls),
        );
        counter(
            &mut out,
            "ofnode_repairs_total",
            "Partial repairs of the switch's flow table.",
            load(&self.repairs),
        );
        counter(
            &mut out,
            "ofnode_egress_dns_changes_total",
            "Egress policy DNS names whose addresses changed.",
            load(&self.dns_changes),
        );
        counter(
            &mut out,
            "ofnode_drift_repairs_total",
            "Repairs of flows someone else changed on the switch.",
            load(&self.drift_repairs),
        );
        counter(
            &mut out,
            "ofnode_drift_checks_total",
            "Comparisons of the switch's table made because it reported foreign changes (or periodically without a flow monitor).",
            load(&self.drift_checks),
        );
        self.render_drift_flows(&mut out);
        counter(
            &mut out,
            "ofnode_pod_counter_polls_total",
            "Polls of the pods' flow counters that succeeded.",
            load(&self.pod_counter_polls),
        );
        counter(
            &mut out,
            "ofnode_pod_counter_poll_errors_total",
            "Polls of the pods' flow counters that failed (see the log).",
            load(&self.pod_counter_poll_errors),
        );
        self.pod_counters.render(&mut out);
        counter(
            &mut out,
            "ofnode_policy_rule_counter_polls_total",
            "Polls of the policy rules' verdict flow counters that succeeded.",
            load(&self.rule_counter_polls),
        );
        counter(
            &mut out,
            "ofnode_policy_rule_counter_poll_errors_total",
            "Polls of the policy rules' verdict flow counters that failed (see the log).",
            load(&self.rule_counter_poll_errors),
        );
        self.rule_counters.render(&mut out);
        self.megaflow_purges.render(&mut out);
        render_audit(&self.audit, &mut out);
        self.operation_latency.render(
            &mut out,
            "ofnode_operation_duration_seconds",
            "Latency of node operations.",
        );
        self.transaction_latency.render(
            &mut out,
            "ofnode_transaction_duration_seconds",
            "Latency of OpenFlow bundle commits.",
        );
        gauge(
            &mut out,
            "ofnode_switch_connected",
            "1 when the OpenFlow session is up.",
            u64::from(status.switch_connected),
        );
        gauge(
            &mut out,
            "ofnode_ovsdb_connected",
            "1 when the OVSDB session is up.",
            u64::from(status.ovsdb_connected),
        );
        gauge(
            &mut out,
            "ofnode_set_up",
            "1 when the node is set up.",
            u64::from(status.set_up),
        );
        gauge(
            &mut out,
            "ofnode_pods",
            "Pods attached.",
            status.pods as u64,
        );
        gauge(
            &mut out,
            "ofnode_host_subnets",
            "Remote host subnets.",
            status.host_subnets as u64,
        );
        gauge(
            &mut out,
            "ofnode_services",
            "Services.",
            status.services as u64,
        );
        gauge(
            &mut out,
            "ofnode_flows",
            "Flows in the desired table.",
            status.flows as u64,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_count_purges_failures_and_time() {
        let counters = PurgeCounters::default();
        assert_eq!(counters.last_time(), None);
        counters.purged(Duration::from_millis(2));
        counters.failed("no answer".into());
        assert_eq!(counters.last_error().as_deref(), Some("no answer"));
        let mut out = String::new();
        counters.render(&mut out);
        assert!(
            out.contains("ofnode_stale_megaflow_purges_total 1\n"),
            "{out}"
        );
        assert!(
            out.contains("ofnode_stale_megaflow_purge_errors_total 1\n"),
            "{out}"
        );
        assert!(
            out.contains("ofnode_stale_megaflow_purge_seconds_total 0.002\n"),
            "{out}"
        );
        assert!(
            out.contains("# TYPE ofnode_stale_megaflow_purges_total counter"),
            "{out}"
        );
        counters.purged(Duration::from_millis(1));
        assert_eq!(counters.last_time(), Some(Duration::from_millis(1)));
        assert_eq!(counters.last_error(), None, "a success clears the error");
    }

    #[test]
    fn the_audit_series_have_their_labels() {
        use crate::sdn::audit::Verdict;
        use crate::sdn::audit_log::counters::DropPlace;
        let audit = crate::sdn::audit_log::AuditCounters::default();
        audit.event(Verdict::Deny);
        audit.event(Verdict::Deny);
        audit.line();
        audit.dropped(DropPlace::Queue);
        audit.bad_packet();
        let tap = std::sync::Arc::new(AtomicU64::new(5));
        audit.follow_switch_channel(tap);
        let mut out = String::new();
        render_audit(&audit, &mut out);
        for series in [
            "ofnode_audit_events_total{verdict=\"deny\"} 2\n",
            "ofnode_audit_events_total{verdict=\"allow\"} 0\n",
            "ofnode_audit_lines_total 1\n",
            "ofnode_audit_dropped_total{where=\"queue\"} 1\n",
            "ofnode_audit_dropped_total{where=\"switch_channel\"} 5\n",
            "ofnode_audit_bad_packets_total 1\n",
        ] {
            assert!(out.contains(series), "{series} in {out}");
        }
    }
}
