//! The counter polls. Per pod (issue 15): every `pod_counters_interval`, the flow stats of the
//! three tables that hold the pods' counted flows (`counters::COUNTED_TABLES`), asked
//! together on the node's OpenFlow connection, then the pods from the writer, tallied into the
//! snapshot the pod lookup and /metrics show. Per policy rule (issue 30): every
//! `rule_counters_interval`, and on demand, one request for every verdict flow
//! (`rule_counters.rs`), named in one read of the core.
//!
//! It never holds up the writer: the requests are three multipart messages pipelined on the
//! connection (their replies are matched by xid beside the writer's bundles), and the writer
//! only answers one read of its pods (a copy of the pod list), between two batches.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use futures::future::try_join_all;
use ofnode_proto::{FlowStats, FlowStatsRequest};

use super::{Inner, Node};
use crate::sdn::counters::{PodCounters, Snapshot, COUNTED_TABLES};
use crate::sdn::error::Error;
use crate::sdn::metrics::Metrics;
use crate::sdn::rule_counters::{named, tally, unix_ms, verdict_flows_request, RuleSnapshot};
use crate::sdn::types::Pod;
use crate::value::PodKey;

/// How often a waiting poller looks whether its node is gone.
const ALIVE_CHECK: Duration = Duration::from_secs(1);

/// Runs `poll` every `interval` (an interval after the last one ended, so a slow poll never
/// piles up) until the node is gone, counting each outcome in the counter `outcome` picks
/// (success or failure).
async fn poll_every<F, Fut>(
    node: Weak<Inner>,
    interval: Duration,
    what: &'static str,
    poll: F,
    outcome: fn(&Metrics, bool) -> &AtomicU64,
) where
    F: Fn(Node) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let mut next = Instant::now() + interval;
    loop {
        // Sleep in steps, so a node that stops is not kept waiting for a long interval.
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if node.strong_count() == 0 {
                return;
            }
            tokio::time::sleep(left.min(ALIVE_CHECK)).await;
        }
        let Some(inner) = node.upgrade() else {
            return;
        };
        let metrics = Arc::clone(&inner.metrics);
        let result = poll(Node { inner }).await;
        Metrics::inc(outcome(&metrics, result.is_ok()));
        if let Err(e) = result {
            tracing::debug!(error = %e, "{what} poll failed; trying at the next interval");
        }
        next = Instant::now() + interval;
    }
}

impl Node {
    /// One poll: the flows first, then the pods, so a pod deleted meanwhile is left out.
    async fn poll_counters(&self) -> Result<(), Error> {
        let started = Instant::now();
        let polled_at = SystemTime::now();
        let flows = self.counted_flows().await?;
        let pods: Vec<(PodKey, Pod)> = self
            .read(|core| {
                let pods = &core.state().pods;
                Ok(pods.iter().map(|(k, p)| (k.clone(), p.clone())).collect())
            })
            .await?;
        let snapshot = Snapshot::new(
            pods.iter().map(|(k, p)| (k, p)),
            &flows,
            polled_at,
            started.elapsed(),
        );
        self.inner.metrics.pod_counters.replace(snapshot);
        Ok(())
    }

    /// The flows of the counted tables, their requests sent at once on the one connection.
    async fn counted_flows(&self) -> Result<Vec<FlowStats>, Error> {
        let switch = &self.inner.switch;
        let dumps = COUNTED_TABLES.map(|table_id| {
            switch.dump_flows(FlowStatsRequest {
                table_id,
                ..FlowStatsRequest::default()
            })
        });
        Ok(try_join_all(dumps).await?.concat())
    }

    /// Every policy rule's counters, from one dump of the verdict flows (any table, by their
    /// cookie's tag) named in one read of the core.
    pub async fn rule_counters(&self) -> Result<RuleSnapshot, Error> {
        let polled_at = SystemTime::now();
        let flows = self
            .inner
            .switch
            .dump_flows(verdict_flows_request())
            .await?;
        let tallied = tally(&flows);
        let rules = self
            .read(move |core| Ok(named(&tallied, &core.rule_namer())))
            .await?;
        Ok(RuleSnapshot {
            polled_at_unix_ms: unix_ms(polled_at),
            rules,
        })
    }

    /// The pod's counters as of the last poll; None when counters are off or it has not
    /// been polled since it was added.
    pub(super) fn pod_counters(&self, key: &PodKey) -> Option<PodCounters> {
        self.inner.metrics.pod_counters.pod(key)
    }
}

/// Starts the polls whose interval is not zero.
pub(super) fn start(node: &Node) {
    let interval = node.inner.cfg.pod_counters_interval;
    if !interval.is_zero() {
        tokio::spawn(poll_every(
            Arc::downgrade(&node.inner),
            interval,
            "pod counter",
            |node| async move { node.poll_counters().await },
            |m, ok| {
                if ok {
                    &m.pod_counter_polls
                } else {
                    &m.pod_counter_poll_errors
                }
            },
        ));
    }
    let interval = node.inner.cfg.rule_counters_interval;
    if !interval.is_zero() {
        tokio::spawn(poll_every(
            Arc::downgrade(&node.inner),
            interval,
            "policy rule counter",
            |node| async move {
                let snapshot = node.rule_counters().await?;
                node.inner.metrics.rule_counters.replace(snapshot);
                Ok(())
            },
            |m, ok| {
                if ok {
                    &m.rule_counter_polls
                } else {
                    &m.rule_counter_poll_errors
                }
            },
        ));
    }
}
