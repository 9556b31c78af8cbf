//! Setup (the seed's SetupOVS and SetupSDN): the OVSDB plan, the table, the host network.

use super::Node;
use crate::sdn::core::ovsdb::{controllers, setup_steps, OvsdbStep};
use crate::sdn::core::SetupOutcome;
use crate::sdn::error::Error;
use crate::sdn::host::setup_host_network;
use crate::sdn::layout::VERSION_NOTE;
use crate::sdn::readback;
use crate::sdn::request::Request;
use crate::sdn::types::SetupRequest;
use ofnode_proto::FlowStatsRequest;

impl Node {
    /// Sets the node up (the seed's SetupOVS and SetupSDN). With the parameters it is set up
    /// with already, nothing changes; with others, the table is rebuilt from scratch.
    pub async fn setup(&self, req: &SetupRequest) -> Result<SetupOutcome, Error> {
        req.validate()?;
        self.require_active()?;
        let _exclusive = self.inner.gate.write().await;
        let current = self.published().setup;
        if current == Some(*req) && self.switch_has_version_note(req).await.unwrap_or(false) {
            self.setup_host(req).await?;
            return Ok(SetupOutcome::AlreadySetUp);
        }
        let steps = setup_steps(
            &self.inner.cfg.bridge,
            &self.inner.datapath_type,
            self.controllers(),
        );
        for step in &steps {
            self.execute(step).await?;
        }
        self.inner
            .switch
            .wait_connected(self.inner.cfg.connect_timeout)
            .await?;
        let done = self.call(|reply| Request::Setup(*req, reply)).await?;
        for pod in done.dropped {
            if let Some(veth) = pod.veth {
                self.remove_pod_port(veth.as_str()).await;
            }
        }
        self.setup_host(req).await?;
        tracing::info!(outcome = ?done.outcome, setup = ?req, "node set up");
        self.warn_stale_megaflows_once();
        Ok(done.outcome)
    }

    /// The seed's AlreadySetUp: the switch holds the version note of this node's setup.
    pub async fn already_set_up(&self) -> Result<bool, Error> {
        let Some(setup) = self.published().setup else {
            return Ok(false);
        };
        self.switch_has_version_note(&setup).await
    }

    async fn switch_has_version_note(&self, setup: &SetupRequest) -> Result<bool, Error> {
        let filter = FlowStatsRequest {
            table_id: VERSION_NOTE,
            ..FlowStatsRequest::default()
        };
        let flows = self.inner.switch.dump_flows(filter).await?;
        Ok(readback::holds_version_note(&flows, setup.mode))
    }

    /// The controllers the bridge must dial (this daemon when it listens, every HA peer).
    fn controllers(&self) -> Option<Vec<String>> {
        let cfg = &self.inner.cfg;
        controllers(
            &cfg.openflow,
            cfg.ha.as_ref().map(|ha| ha.controllers.as_slice()),
        )
    }

    /// At start, when the switch dials this node: makes the bridge (if it exists) dial it.
    pub(super) async fn point_controller_here(&self) -> Result<(), Error> {
        let Some(targets) = self.controllers() else {
            return Ok(());
        };
        let bridge = self.inner.cfg.bridge.clone();
        if !self
            .inner
            .ovsdb
            .with_cache(|c| c.find("Bridge", &bridge).is_some())
        {
            return Ok(());
        }
        self.execute(&OvsdbStep::SetController { bridge, targets })
            .await
    }

    /// Carries out one OVSDB step of the core's plans.
    pub(super) async fn execute(&self, step: &OvsdbStep) -> Result<(), Error> {
        let ovsdb = &self.inner.ovsdb;
        match step {
            OvsdbStep::EnsureBridge(spec) => ovsdb.ensure_bridge(spec).await?,
            OvsdbStep::SetController { bridge, targets } => {
                ovsdb.set_controller(bridge, targets).await?
            }
            OvsdbStep::ReplacePort(spec) => {
                ovsdb.delete_port(&spec.bridge, &spec.name).await?;
                ovsdb.add_port(spec).await?;
            }
        }
        Ok(())
    }

    async fn setup_host(&self, req: &SetupRequest) -> Result<(), Error> {
        if !self.inner.cfg.manage_host_network {
            return Ok(());
        }
        if let Some(handle) = &self.inner.netlink {
            setup_host_network(handle, req, self.inner.cfg.mtu).await?;
        }
        Ok(())
    }
}
