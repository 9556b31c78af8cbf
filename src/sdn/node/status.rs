//! What the node reports: its status, a pod checked against the switch and OVSDB (CNI CHECK),
//! the seed's FindUnusedVNIDs, and the switch's flows.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use ofnode_proto::{FlowStatsRequest, OFPTT_ALL};

use super::Node;
use crate::sdn::error::Error;
use crate::sdn::flows::{pod_flows, version_note};
use crate::sdn::megaflows::Exposure;
use crate::sdn::policy;
use crate::sdn::readback;
use crate::sdn::report::Status;
use crate::sdn::request::{Read, Request};
use crate::sdn::state::PodStatus;
use crate::sdn::table::{parse_flow, Flow};
use crate::value::{SandboxId, Vnid};

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

    /// What the node knows about the pod with this sandbox id, checked against the switch and
    /// OVSDB: whether its port exists and which of its flows the switch lacks (for a CNI CHECK).
    pub async fn pod_status(&self, sandbox: &SandboxId) -> Result<PodStatus, Error> {
        let sandbox = *sandbox;
        let pod = self
            .call(|reply| Request::Read(Read::PodBySandbox(sandbox, reply)))
            .await?
            .ok_or_else(|| Error::NotFound {
                what: format!("pod with sandbox id {sandbox}"),
            })?;
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
            counters: self.pod_counters(&pod.sandbox),
            pod,
            port,
            missing_flows,
        })
    }

    /// The flows of `wanted` (ovs-ofctl text) that the switch does not hold exactly.
    async fn missing_flows(&self, wanted: &[String]) -> Result<Vec<String>, Error> {
        let wanted = wanted
            .iter()
            .map(|text| {
                parse_flow(text)
                    .map(|flow| (text, flow))
                    .map_err(|e| Error::Flow {
                        flow: text.clone(),
                        reason: e.to_string(),
                    })
            })
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
            held.extend(stats.iter().map(Flow::from_stats));
        }
        Ok(wanted
            .into_iter()
            .filter(|(_, flow)| !held.iter().any(|h| h.same(flow)))
            .map(|(text, _)| text.clone())
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
