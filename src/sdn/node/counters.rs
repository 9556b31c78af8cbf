//! The per-pod counter poll (issue 15): every `pod_counters_interval`, the flow stats of the
//! three tables that hold the pods' counted flows (`counters::COUNTED_TABLES`), asked
//! together on the node's OpenFlow connection, then the pods from the writer, tallied into the
//! snapshot the pod lookup and /metrics show.
//!
//! It never holds up the writer: the requests are three multipart messages pipelined on the
//! connection (their replies are matched by xid beside the writer's bundles), and the writer
//! only answers one read of its pods (a copy of the pod list), between two batches.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use futures::future::try_join_all;
use ofnode_proto::{FlowStats, FlowStatsRequest};

use super::{Inner, Node};
use crate::sdn::counters::{PodCounters, Snapshot, COUNTED_TABLES};
use crate::sdn::error::Error;
use crate::sdn::metrics::Metrics;
use crate::sdn::types::Pod;
use crate::value::PodKey;

/// How often a waiting poller looks whether its node is gone.
const ALIVE_CHECK: Duration = Duration::from_secs(1);

pub(super) async fn poll_pod_counters(node: Weak<Inner>, interval: Duration) {
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
        let node_now = Node { inner };
        match node_now.poll_counters().await {
            Ok(()) => Metrics::inc(&node_now.inner.metrics.pod_counter_polls),
            Err(e) => {
                Metrics::inc(&node_now.inner.metrics.pod_counter_poll_errors);
                tracing::debug!(error = %e, "pod counter poll failed; trying at the next interval");
            }
        }
        drop(node_now);
        // The next poll an interval after this one ended: a slow poll never piles up.
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

    /// The pod's counters as of the last poll; None when counters are off or it has not
    /// been polled since it was added.
    pub(super) fn pod_counters(&self, key: &PodKey) -> Option<PodCounters> {
        self.inner.metrics.pod_counters.pod(key)
    }
}

/// Starts the poll unless the interval is zero.
pub(super) fn start(node: &Node) {
    let interval = node.inner.cfg.pod_counters_interval;
    if !interval.is_zero() {
        tokio::spawn(poll_pod_counters(Arc::downgrade(&node.inner), interval));
    }
}
