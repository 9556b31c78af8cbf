//! What the node reports: its status, a pod checked against the switch and OVSDB (CNI CHECK),
//! the seed's FindUnusedVNIDs, and the switch's flows.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use ofnode_proto::{format_flow_mod, FlowMod, FlowStatsRequest, OFPTT_ALL};

use super::Node;
use crate::sdn::audit::RuleRef;
use crate::sdn::core::held_flow;
use crate::sdn::error::Error;
use crate::sdn::flows::{pod_flows, version_note};
use crate::sdn::megaflows::Exposure;
use crate::sdn::policy;
use crate::sdn::readback;
use crate::sdn::report::PodStatus;
use crate::sdn::report::{AuditMeterStatus, RefusedMeter, Status};
use crate::sdn::table::Flow;
use crate::value::{PodKey, Vnid};

impl Node {
    pub fn status(&self) -> Status {
        let p = self.published();
        let stale_megaflows = self.stale_megaflows();
        let switch_connected = self.inner.switch.is_connected();
        let networkpolicy = p
            .setup
            .is_some_and(|s| policy::of(s.mode).enforces_network_policy());
        Status {
            switch_connected,
            ovsdb_connected: self.inner.ovsdb.connected(),
            set_up: p.setup.is_some(),
            version_note: p.setup.map(|s| version_note(s.mode)),
            mode: p.setup.map(|s| s.mode),
            setup: p.setup,
            in_sync: p.in_sync && switch_connected,
            datapath_id: self
                .inner
                .switch
                .datapath_id()
                .map(|id| format!("{id:016x}")),
            datapath_type: self.inner.datapath_type.clone(),
            bridge: self.inner.cfg.bridge.clone(),
            pods: p.pods,
            host_subnets: p.host_subnets,
            services: p.services,
            multicast_vnids: p.multicast_vnids,
            egress_vnids: p.egress_vnids,
            flows: p.flows,
            netpols: networkpolicy.then_some(p.netpols),
            namespaces: networkpolicy.then_some(p.namespaces),
            vxlan: self.inner.vxlan.as_ref().map(|v| v.status()),
            drift: self
                .inner
                .drift
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            ha: self.inner.ha.as_ref().map(|ha| ha.status()),
            warnings: stale_megaflows.warning().into_iter().collect(),
            stale_megaflows: Some(stale_megaflows.status(&self.inner.metrics.megaflow_purges)),
            audit: Some(
                self.inner
                    .metrics
                    .audit
                    .status(self.inner.cfg.audit_log.describe()),
            ),
            audit_meters: networkpolicy.then(|| AuditMeterStatus {
                rate: self.inner.cfg.audit.rate,
                burst: self.inner.cfg.audit.burst,
                rules: p.audited_rules,
                refused: p
                    .refused_meters
                    .iter()
                    .map(|(meter, error)| RefusedMeter {
                        meter: *meter,
                        rule: RuleRef::of_key(*meter).map_or_else(String::new, |r| r.to_string()),
                        error: error.clone(),
                    })
                    .collect(),
            }),
        }
    }

    /// Logs the stale-megaflow warning, once per daemon start (it is in `ofnode status` for as
    /// long as it applies). Called where OVSDB's view is known: after a setup, and at every
    /// OVSDB session (a restarted daemon may never be set up again).
    pub(super) fn warn_stale_megaflows_once(&self) {
        let Some(text) = self.stale_megaflows().warning() else {
            return;
        };
        if !self
            .inner
            .stale_megaflows_warned
            .swap(true, Ordering::Relaxed)
        {
            tracing::warn!("{text}");
        }
    }

    /// Open vSwitch's stale-megaflow bug on this node's switch, in every mode: each has
    /// changes that narrow what is allowed (policies, isolation, a pod deleted).
    fn stale_megaflows(&self) -> Exposure {
        Exposure::now(
            &self.inner.ovsdb,
            &self.inner.datapath_type,
            self.inner.cfg.stale_megaflow_purge,
        )
    }

    /// What the node knows about pod `key`, checked against the switch and OVSDB: whether
    /// its port exists and which of its flows the switch lacks (for a CNI CHECK).
    pub async fn pod_status(&self, key: &PodKey) -> Result<PodStatus, Error> {
        let pod_key = key.clone();
        let pod = self
            .read(move |core| Ok(core.state().pods.get(&pod_key).cloned()))
            .await?
            .ok_or_else(|| Error::not_found(format!("pod {key}")))?;
        let port = pod.veth.as_ref().is_some_and(|veth| {
            self.inner
                .ovsdb
                .with_cache(|c| c.find("Port", veth.as_str()).is_some())
        });
        let mut wanted = pod_flows(&pod);
        if let Some(setup) = self.published().setup {
            wanted.extend(policy::of(setup.mode).pod_flows(&pod));
        }
        let missing_flows = self.missing_flows(&wanted).await?;
        Ok(PodStatus {
            counters: self.pod_counters(key),
            pod,
            port,
            missing_flows,
        })
    }

    /// The flows of `wanted` that the switch does not hold exactly, as ovs-ofctl prints them.
    async fn missing_flows(&self, wanted: &[FlowMod]) -> Result<Vec<String>, Error> {
        let wanted = wanted
            .iter()
            .map(|fm| Ok((fm, held_flow(fm)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        // Only the tables the flows are in: a pod's flows are a handful among many thousands.
        let tables: BTreeSet<u8> = wanted.iter().map(|(_, flow)| flow.table()).collect();
        let mut held = Vec::new();
        for table_id in tables {
            let filter = FlowStatsRequest {
                table_id,
                ..FlowStatsRequest::default()
            };
            let stats = self.inner.switch.dump_flows(filter).await?;
            for stats in &stats {
                held.push(Flow::from_stats(stats)?);
            }
        }
        Ok(wanted
            .into_iter()
            .filter(|(_, flow)| !held.iter().any(|h| h.same(flow)))
            .map(|(fm, _)| format_flow_mod(fm))
            .collect())
    }

    /// The seed's FindUnusedVNIDs, from the switch's flows (see `readback::unused_vnids`).
    pub async fn unused_vnids(&self) -> Result<Vec<Vnid>, Error> {
        let flows = self
            .inner
            .switch
            .dump_flows(FlowStatsRequest::default())
            .await?;
        Ok(readback::unused_vnids(&flows))
    }

    /// The switch's flows as `ovs-ofctl dump-flows --no-stats` prints them.
    pub async fn dump_flows(&self, table: Option<u8>) -> Result<Vec<String>, Error> {
        let filter = FlowStatsRequest {
            table_id: table.unwrap_or(OFPTT_ALL),
            ..FlowStatsRequest::default()
        };
        Ok(self.inner.switch.dump_flows_text(filter).await?)
    }
}
