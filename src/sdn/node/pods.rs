//! Pods: attach (the seed's SetUpPod), move (UpdatePod), detach (TearDownPod), bandwidth
//! (SetPodBandwidth), and the port numbers ovs-vswitchd gives their veths.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use ofnode_proto::FlowStatsRequest;
use tokio::sync::mpsc;

use super::{invalid, Node};
use crate::ovsdb;
use crate::sdn::core::ovsdb::{pod_port, Bandwidth};
use crate::sdn::error::Error;
use crate::sdn::layout::FROM_POD;
use crate::sdn::metrics::Metrics;
use crate::sdn::policy::networkpolicy::model::PodMeta;
use crate::sdn::policy::networkpolicy::NetPolError;
use crate::sdn::policy::require_network_policy;
use crate::sdn::readback;
use crate::sdn::request::{self, Edit, Envelope, PortEdit, Read, Request};
use crate::sdn::state::{Pod, PortIntent};
use crate::sdn::types::PodAdd;
use crate::value::{IfName, SandboxId, Vnid};

impl Node {
    /// Attaches a pod (the seed's SetUpPod): its veth becomes a port of the bridge, then its
    /// four flows (and in multitenant mode its VNID's rule, when it is the first user) go in
    /// one bundle. Returns the port's OpenFlow number.
    pub async fn pod_add(&self, req: &PodAdd) -> Result<u16, Error> {
        let _shared = self.inner.gate.read().await;
        let setup = self.require_setup()?;
        if req.namespace.is_some() || !req.labels.is_empty() {
            require_network_policy(setup.mode, "a pod's namespace and labels")?;
        }
        let meta = req.namespace.as_ref().map(|namespace| PodMeta {
            namespace: namespace.clone(),
            labels: req.labels.clone(),
        });
        if meta.is_none() && !req.labels.is_empty() {
            return Err(Error::NetPol(NetPolError::new(
                "namespace",
                "required with labels",
            )));
        }
        // Refused before the port is made, so that a refused pod changes nothing.
        let (check, pod_meta) = (pod_of(req, 0), meta.clone());
        self.call(|reply| Request::Read(Read::CheckPodMeta(check, pod_meta, reply)))
            .await?;
        self.require_device(&req.veth).await?;
        // The port gets its number now and ovs-vswitchd applies it while the flows go in:
        // waiting for ovs-vswitchd's reconfiguration would be most of the pod add's time.
        let port = self
            .inner
            .ovsdb
            .add_port_pending(&pod_port(&self.inner.cfg.bridge, req.veth.as_str()))
            .await?;
        let ofport = port.ofport();
        let pod = pod_of(req, ofport);
        self.edit(|reply| Edit::PodAddWithMeta { pod, meta, reply })
            .await?;
        tokio::spawn(confirm_pod_port(port, req.ip, self.inner.metrics.clone()));
        Ok(ofport)
    }

    /// Fails, as ovs-vsctl add-port would have, when the pod's host-side device does not exist
    /// (checked over rtnetlink; without a netlink socket ovs-vswitchd's verdict is only logged).
    async fn require_device(&self, veth: &IfName) -> Result<(), Error> {
        let Some(netlink) = &self.inner.netlink else {
            return Ok(());
        };
        match netlink.link_by_name(veth.as_str()).await? {
            Some(_) => Ok(()),
            None => Err(invalid(
                "veth",
                veth.as_str(),
                "no such network device on this node",
            )),
        }
    }

    /// Moves a pod to another VNID (the seed's UpdatePod). The pod is found by its sandbox id;
    /// one the node does not know is looked up, as the seed did, through the note on its table
    /// 20 flow on the switch.
    pub async fn pod_update(&self, sandbox: &SandboxId, vnid: Vnid) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let sandbox = *sandbox;
        let known = self
            .edit(|reply| Edit::PodUpdate {
                sandbox,
                vnid,
                reply,
            })
            .await?;
        if known {
            return Ok(());
        }
        let pod = Pod {
            vnid,
            ..self.find_pod_by_note(&sandbox).await?
        };
        self.edit(|reply| Edit::PodAdopt(pod, reply)).await
    }

    /// The seed's getPodDetailsByContainerID, on the switch's table 20.
    async fn find_pod_by_note(&self, sandbox: &SandboxId) -> Result<Pod, Error> {
        let filter = FlowStatsRequest {
            table_id: FROM_POD,
            ..FlowStatsRequest::default()
        };
        let flows = self.inner.switch.dump_flows(filter).await?;
        readback::pod_by_note(&flows, sandbox).ok_or_else(|| Error::NotFound {
            what: format!("pod with sandbox id {sandbox} (no table 20 flow carries its note)"),
        })
    }

    /// Detaches a pod (the seed's TearDownPod): its flows go (and its VNID's rule with its last
    /// user), and in the same journal record its port becomes one OVSDB must not hold; then the
    /// port goes (with its QoS). Without an OVSDB session the delete still succeeds: the port
    /// goes when the session is back (`ports.rs`). A pod the node does not know still has its
    /// port removed, so a repeated delete succeeds.
    pub async fn pod_del(&self, veth: &IfName, ip: Ipv4Addr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.edit(|reply| Edit::PodDel {
            ip,
            veth: Some(veth.clone()),
            reply,
        })
        .await?;
        self.remove_pod_port(veth.as_str()).await;
        Ok(())
    }

    /// Removes a deleted pod's port (its QoS row goes with it) and, once OVSDB confirmed it,
    /// forgets it (in the background: the delete is journaled already). A failure is left to
    /// the reconciler at the next OVSDB session.
    pub(super) async fn remove_pod_port(&self, veth: &str) {
        let ovsdb = &self.inner.ovsdb;
        match ovsdb.delete_port(&self.inner.cfg.bridge, veth).await {
            Ok(()) => {
                let Ok(veth) = veth.parse::<IfName>() else {
                    return;
                };
                let requests = self.inner.requests.downgrade();
                tokio::spawn(async move {
                    let edit = |reply| {
                        Request::Edit(Edit::Ports(PortEdit::ForgetRemoved(vec![veth]), reply))
                    };
                    if let Some(answer) = request::send_weak(&requests, edit).await {
                        // Not forgotten now: the reconciler forgets it at the next session.
                        let _ = answer.await;
                    }
                });
            }
            Err(e) => {
                tracing::warn!(veth, error = %e, "deleting the pod's port failed; it is deleted when the OVSDB session is back");
            }
        }
    }

    /// Limits a pod's bandwidth (the seed's SetPodBandwidth); see [`Bandwidth`]. None (or 0)
    /// removes a limit. The limits are desired state: journaled first, then written to OVSDB
    /// in one transaction; without an OVSDB session they are written when it is back
    /// (`ports.rs`), and a limit OVSDB refuses is taken back and the error returned.
    pub async fn pod_bandwidth(
        &self,
        veth: &IfName,
        ingress_bps: Option<u64>,
        egress_bps: Option<u64>,
    ) -> Result<(), Error> {
        self.require_active()?;
        let _shared = self.inner.gate.read().await;
        let ovsdb = &self.inner.ovsdb;
        let port_exists = ovsdb.with_cache(|c| c.find("Port", veth.as_str()).is_some());
        let bandwidth = Bandwidth::of(ingress_bps, egress_bps);
        let limits = PortIntent::from(bandwidth);
        let edit = PortEdit::Bandwidth {
            veth: veth.clone(),
            limits,
            port_exists,
        };
        let previous = self.edit(|reply| Edit::Ports(edit, reply)).await?;
        let written = ovsdb
            .set_port_bandwidth(
                veth.as_str(),
                bandwidth.qos_max_rate,
                bandwidth.ingress_policing_kbps,
            )
            .await;
        match written {
            Ok(()) => Ok(()),
            Err(e @ ovsdb::Error::Disconnected { .. }) => {
                tracing::warn!(veth = %veth, error = %e, "no OVSDB session: the pod's limits are written when it is back");
                Ok(())
            }
            Err(e) => {
                let back = PortEdit::Restore {
                    veth: veth.clone(),
                    set: limits,
                    back: previous,
                };
                self.edit(|reply| Edit::Ports(back, reply)).await?;
                Err(e.into())
            }
        }
    }
}

/// The pod `req` attaches, on port `ofport`.
fn pod_of(req: &PodAdd, ofport: u16) -> Pod {
    Pod {
        veth: Some(req.veth.clone()),
        ip: req.ip,
        mac: req.mac,
        sandbox: req.sandbox,
        vnid: req.vnid,
        ofport,
    }
}

/// Waits until ovs-vswitchd has set up a pod's port and logs and counts it when it could not.
/// A port that got another number than the one chosen is not an error: [`follow_pod_ports`]
/// moves the pod's flows to it.
async fn confirm_pod_port(port: ovsdb::PendingPort, ip: Ipv4Addr, metrics: Arc<Metrics>) {
    let name = port.name().to_string();
    match port.applied().await {
        Ok(_) => {}
        Err(ovsdb::Error::OfportMismatch {
            requested,
            assigned,
            ..
        }) => {
            tracing::warn!(port = %name, %ip, requested, assigned, "the pod's port got another OpenFlow number; its flows follow it");
        }
        // Deleted before ovs-vswitchd got to it (a pod del right after the add).
        Err(ovsdb::Error::NotFound { .. }) => {}
        Err(e) => {
            Metrics::inc(&metrics.port_errors);
            tracing::error!(port = %name, %ip, error = %e, "ovs-vswitchd did not set up the pod's port");
        }
    }
}

/// Keeps every pod's flows on the OpenFlow port its interface has now. ovs-vswitchd may give a
/// port another number than ofnode chose (someone else's `ofport_request`, a port re-created
/// behind ofnode's back), and flows on a stale number black-hole the pod. Runs after each burst
/// of OVSDB cache changes; a check finds nothing to do in one lookup per pod.
pub(super) async fn follow_pod_ports(ovsdb: ovsdb::Client, requests: mpsc::WeakSender<Envelope>) {
    // Changes come in bursts while pods are added; one check after the burst is enough.
    const SETTLE: Duration = Duration::from_millis(50);
    // How often a quiet follower looks whether its node is gone.
    const ALIVE_CHECK: Duration = Duration::from_secs(1);
    let mut changes = ovsdb.cache_changes();
    // A port renumbered while ofnode was down is caught by a first check at start.
    changes.mark_changed();
    loop {
        match tokio::time::timeout(ALIVE_CHECK, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                if requests.upgrade().is_none() {
                    return;
                }
                continue;
            }
        }
        tokio::time::sleep(SETTLE).await;
        changes.borrow_and_update();
        let cache = ovsdb.clone();
        let sent = request::send_weak(&requests, |reply| {
            Request::Edit(Edit::FollowPorts(cache, reply))
        });
        let Some(answer) = sent.await else {
            return;
        };
        if let Ok(Err(e)) = answer.await {
            // Checked again at the next OVSDB change, or at the next reconnect of the switch
            // (which re-installs the state).
            tracing::warn!(error = %e, "moving pods' flows to their ports' new numbers failed");
        }
    }
}
