//! The stale-megaflow mitigation: on a switch with Open vSwitch's dpif-netdev stale-megaflow
//! bug (`ovs_bugs.rs`), the datapath forgets the flows it cached after every bundle ofnode
//! commits, before the operation is answered. The next packet of every flow is then translated
//! through the tables the bundle left, so a change is enforced for the next new connection in
//! both directions: what it denies no cached flow still allows, and what it allows no cached
//! flow still drops.
//!
//! How: `revalidator/purge` on ovs-vswitchd's control socket (`unixctl.rs`), one request on a
//! connection kept open. It deletes every datapath flow by its UFID together with the
//! revalidator's record of it (the "ukey"), so the next packet is an upcall that installs a
//! fresh flow. Measured against the alternatives on this machine's 3.1.0:
//! - `dpctl/del-flows` empties the datapath but leaves the ukeys: the next packet's upcall
//!   cannot install its flow over the ukey ("upcall_cb failure: ukey installation fails"), so a
//!   flow with steady traffic stays in the slow path, every packet an upcall, for as long as
//!   its ukey lives (`benches/netpol.rs` counts a busy flow's slow-path packets after each).
//! - Deleting only the megaflows that overlap the changed OpenFlow flows (`dpctl/del-flow`) has
//!   the same ukey problem for each flow it deletes, needs a dump of every megaflow per change,
//!   and cannot be proven safe: the datapath key holds the packet as it arrived, while the
//!   tables match registers and fields set earlier in the pipeline.
//! - `revalidator/pause` around the purge would keep the revalidator from racing it, but if
//!   ofnode died between pause and resume the switch's revalidators would stay paused.
//!
//! The purge skips a ukey that a revalidator thread holds at that instant (it runs beside
//! them); the one such race it could lose needs a revalidator rewriting an overlapping flow at
//! the same moment. `tests/netpol_e2e_megaflows.rs`, which makes the overlap every time, never
//! saw a stale flow get through with the purge on.
//!
//! So the purge is targeted in what it can be: only on an affected switch (the kernel
//! datapath and fixed versions never purge), only after a bundle (one per batch of
//! operations), and never when turned off (`stale_megaflow_purge = false`, for a package with
//! the fix backported). A purge that fails is logged and counted; the change itself stands.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::metrics::{counter, Histogram, Metrics};
use super::ovs_bugs::{self, StaleMegaflows};
use super::report::StaleMegaflowStatus;
use crate::ovsdb;
use crate::unixctl::{Unixctl, UnixctlError, UnixctlOptions, VswitchdCtl};

/// The unixctl command that forgets the datapath's cached flows.
const PURGE: &str = "revalidator/purge";

/// How long a purge may take (a datapath with hundreds of thousands of flows takes a while; a
/// stuck ovs-vswitchd must not hold the node's operations for the unixctl default's 10 s).
const PURGE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the purges cost so far, kept in [`Metrics`] for /metrics and `ofnode status`.
#[derive(Debug, Default)]
pub struct PurgeCounters {
    /// Purges that succeeded, and the time each took (count and sum).
    latency: Histogram,
    errors: AtomicU64,
    last_nanos: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl PurgeCounters {
    fn record(&self, took: Duration, result: &Result<(), UnixctlError>) {
        let mut last_error = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(()) => {
                self.latency.observe(took);
                let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                self.last_nanos.store(nanos, Ordering::Relaxed);
                *last_error = None;
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                *last_error = Some(e.to_string());
            }
        }
    }

    pub fn purges(&self) -> u64 {
        self.latency.count()
    }

    /// The Prometheus series: purges, failures, and the time spent purging.
    pub fn render(&self, out: &mut String) {
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
            self.errors.load(Ordering::Relaxed),
        );
        counter(
            out,
            "ofnode_stale_megaflow_purge_seconds_total",
            "Time spent in successful purges of the datapath's cached flows.",
            self.latency.sum().as_secs_f64(),
        );
    }
}

/// What the node knows of the bug on its switch: the verdict from the version ovs-vswitchd
/// wrote into OVSDB and the datapath type, and whether the mitigation is turned on.
#[derive(Debug, Clone)]
pub struct Exposure {
    pub verdict: StaleMegaflows,
    pub ovs_version: Option<String>,
    pub datapath_type: String,
    /// The config's `stale_megaflow_purge`.
    pub purge_enabled: bool,
}

impl Exposure {
    /// The exposure of a bridge of `datapath_type` on the switch OVSDB describes now.
    pub fn now(ovsdb: &ovsdb::Client, datapath_type: &str, purge_enabled: bool) -> Exposure {
        let ovs_version = ovsdb.with_cache(|c| c.ovs_version().map(str::to_string));
        Exposure {
            verdict: StaleMegaflows::of(ovs_version.as_deref(), datapath_type),
            ovs_version,
            datapath_type: datapath_type.to_string(),
            purge_enabled,
        }
    }

    /// Whether the datapath's flows are purged after a change.
    pub fn purges(&self) -> bool {
        self.purge_enabled && self.verdict.affects_switch()
    }

    /// The operator's warning (log and status), when the bug applies.
    pub fn warning(&self) -> Option<String> {
        ovs_bugs::stale_megaflow_warning(
            self.verdict,
            self.ovs_version.as_deref(),
            &self.datapath_type,
            self.purge_enabled,
        )
    }

    /// `ofnode status`'s section, with the cost of the purges so far.
    pub fn status(&self, counters: &PurgeCounters) -> StaleMegaflowStatus {
        let mitigation = match (self.verdict.affects_switch(), self.purge_enabled) {
            (true, true) => "on: revalidator/purge after every committed bundle, before the answer",
            (true, false) => "off (stale_megaflow_purge = false): changes can be ignored by cached datapath flows",
            (false, true) => "not needed on this switch (stale_megaflow_purge = true purges only on an affected one)",
            (false, false) => "off (stale_megaflow_purge = false); not needed on this switch",
        };
        let last_nanos = counters.last_nanos.load(Ordering::Relaxed);
        StaleMegaflowStatus {
            bug: "Open vSwitch's dpif-netdev stale megaflows: after a flow change the userspace \
                  datapath can keep a cached flow with its old actions for as long as traffic \
                  hits it"
                .into(),
            upstream_fix: ovs_bugs::STALE_MEGAFLOWS_FIX.into(),
            affected_versions: ovs_bugs::STALE_MEGAFLOWS_AFFECTED.into(),
            switch: self
                .verdict
                .describe(self.ovs_version.as_deref(), &self.datapath_type),
            mitigation: mitigation.into(),
            purges: counters.purges(),
            purge_time_total_ms: millis(counters.latency.sum()),
            last_purge_ms: (counters.purges() > 0)
                .then(|| millis(Duration::from_nanos(last_nanos))),
            purge_errors: counters.errors.load(Ordering::Relaxed),
            last_purge_error: counters
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The writer's purger: decides after each committed bundle whether the datapath must forget
/// its flows, and makes it.
#[derive(Debug)]
pub struct Megaflows {
    ctl: VswitchdCtl,
    ovsdb: ovsdb::Client,
    datapath_type: String,
    purge_enabled: bool,
    metrics: Arc<Metrics>,
    /// The control socket's connection, kept between purges (reopened when ovs-vswitchd
    /// restarts: its socket's name carries its pid).
    client: Option<Unixctl>,
    /// The last purge failed: the next failures are counted, not logged again.
    failing: bool,
}

impl Megaflows {
    pub fn new(
        ctl: VswitchdCtl,
        ovsdb: ovsdb::Client,
        datapath_type: String,
        purge_enabled: bool,
        metrics: Arc<Metrics>,
    ) -> Megaflows {
        Megaflows {
            ctl,
            ovsdb,
            datapath_type,
            purge_enabled,
            metrics,
            client: None,
            failing: false,
        }
    }

    /// After a bundle the switch committed (or may have): on an affected switch, purges the
    /// datapath's cached flows. A failure is logged and counted, never returned: the bundle
    /// stands whatever the cache does.
    pub async fn after_commit(&mut self) {
        if !Exposure::now(&self.ovsdb, &self.datapath_type, self.purge_enabled).purges() {
            return;
        }
        let started = Instant::now();
        let result = self.purge().await;
        let took = started.elapsed();
        self.metrics.megaflow_purges.record(took, &result);
        let failed = result.is_err();
        match (result, self.failing) {
            (Ok(()), false) => tracing::debug!(?took, "purged the datapath's cached flows"),
            (Ok(()), true) => tracing::info!("purging the datapath's cached flows works again"),
            (Err(e), false) => tracing::warn!(
                error = %e,
                "could not purge the datapath's cached flows after a change: on this switch \
                 (Open vSwitch's stale-megaflow bug) a cached flow may keep its old actions \
                 while traffic hits it; further failures are counted \
                 (ofnode_stale_megaflow_purge_errors_total, ofnode status) until one succeeds"
            ),
            (Err(e), true) => tracing::debug!(error = %e, "purge failed again"),
        }
        self.failing = failed;
    }

    async fn purge(&mut self) -> Result<(), UnixctlError> {
        match self.call_purge().await {
            // A connection kept from before ovs-vswitchd restarted: once more, on a new one.
            Err(UnixctlError::Closed { .. } | UnixctlError::Io { .. }) => {
                self.client = None;
                self.call_purge().await
            }
            other => other,
        }
    }

    async fn call_purge(&mut self) -> Result<(), UnixctlError> {
        let path = self.ctl.path()?;
        let client = match &mut self.client {
            Some(client) if client.path() == path => client,
            _ => self.client.insert(Unixctl::new(
                path,
                UnixctlOptions {
                    timeout: PURGE_TIMEOUT,
                    ..UnixctlOptions::default()
                },
            )),
        };
        client.call(PURGE, &[]).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposure(version: Option<&str>, datapath_type: &str, purge_enabled: bool) -> Exposure {
        Exposure {
            verdict: StaleMegaflows::of(version, datapath_type),
            ovs_version: version.map(str::to_string),
            datapath_type: datapath_type.into(),
            purge_enabled,
        }
    }

    #[test]
    fn only_an_affected_switch_with_the_mitigation_on_is_purged() {
        assert!(exposure(Some("3.1.0"), "netdev", true).purges());
        assert!(exposure(None, "netdev", true).purges());
        assert!(!exposure(Some("3.1.0"), "netdev", false).purges());
        assert!(!exposure(Some("3.1.3"), "netdev", true).purges());
        assert!(!exposure(Some("3.1.0"), "system", true).purges());
    }

    #[test]
    fn the_status_names_the_bug_the_fix_the_versions_the_switch_and_the_cost() {
        let counters = PurgeCounters::default();
        let status = exposure(Some("3.1.0"), "netdev", true).status(&counters);
        assert!(status.mitigation.starts_with("on:"), "{status:?}");
        assert!(status.upstream_fix.contains("21410ff800cc"), "{status:?}");
        assert!(
            status.affected_versions.contains("3.1.0 to 3.1.2"),
            "{status:?}"
        );
        assert!(
            status.switch.starts_with("affected: Open vSwitch 3.1.0"),
            "{status:?}"
        );
        assert_eq!((status.purges, status.last_purge_ms), (0, None));

        counters.record(Duration::from_micros(1500), &Ok(()));
        counters.record(Duration::from_micros(500), &Ok(()));
        let failed = Err(UnixctlError::Closed {
            path: "/run/openvswitch/ovs-vswitchd.1.ctl".into(),
            command: PURGE.into(),
        });
        counters.record(Duration::from_millis(7), &failed);
        let status = exposure(Some("3.1.0"), "netdev", true).status(&counters);
        assert_eq!(status.purges, 2);
        assert_eq!(status.purge_time_total_ms, 2.0);
        assert_eq!(status.last_purge_ms, Some(0.5));
        assert_eq!(status.purge_errors, 1);
        let error = status.last_purge_error.expect("the failure");
        assert!(error.contains("revalidator/purge"), "{error}");

        let off = exposure(Some("3.1.0"), "netdev", false).status(&counters);
        assert!(
            off.mitigation.contains("stale_megaflow_purge = false"),
            "{off:?}"
        );
        let kernel = exposure(Some("3.1.0"), "system", true).status(&counters);
        assert!(kernel.mitigation.starts_with("not needed"), "{kernel:?}");
    }

    #[test]
    fn the_metrics_count_purges_failures_and_time() {
        let counters = PurgeCounters::default();
        counters.record(Duration::from_millis(2), &Ok(()));
        let mut out = String::new();
        counters.render(&mut out);
        assert!(
            out.contains("ofnode_stale_megaflow_purges_total 1\n"),
            "{out}"
        );
        assert!(
            out.contains("ofnode_stale_megaflow_purge_errors_total 0\n"),
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
    }
}
