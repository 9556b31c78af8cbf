//! Pods: attach (the seed's SetUpPod), move (UpdatePod), detach (TearDownPod), bandwidth
//! (SetPodBandwidth), and the port numbers ovs-vswitchd gives their veths.

use std::time::Duration;

use ofnode_proto::FlowStatsRequest;
use tokio::sync::mpsc;

use super::{invalid, Node};
use crate::ovsdb;
use crate::sdn::bridge::pod_port;
use crate::sdn::core::ports::Bandwidth;
use crate::sdn::core::Core;
use crate::sdn::error::Error;
use crate::sdn::layout::FROM_POD;
use crate::sdn::readback;
use crate::sdn::request::{self, Edit, Envelope, Request};
use crate::sdn::types::Pod;
use crate::sdn::types::PodAdd;
use crate::value::{IfName, PodKey, SandboxId, Vnid};

impl Node {
    /// Attaches a pod (the seed's SetUpPod): its port gets its OpenFlow number, then its four
    /// flows (and in multitenant mode its VNID's rule, when it is the first user) go in one
    /// bundle with the journal record behind it, then the port goes into OVSDB (the core's
    /// port step, carried out by the writer): the bundle meets an ovs-vswitchd that is not
    /// reconfiguring for the new port, and flows on a port that does not exist yet match
    /// nothing until it does. A port OVSDB does not take takes the whole add back. Returns the
    /// port's OpenFlow number; ovs-vswitchd applies the port in the background (its failure
    /// is logged and counted in `port_errors`).
    pub async fn pod_add(&self, req: &PodAdd) -> Result<u16, Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        // Refused before anything changes.
        let (key, mut vnid, labels, ip) = (req.pod.clone(), req.vnid, req.labels.clone(), req.ip);
        self.read(move |core| Ok(core.check_local_pod(&key, &mut vnid, &labels, ip)?))
            .await?;
        self.require_device(&req.veth).await?;
        // Held until the port is in OVSDB: concurrent adds choose other numbers meanwhile.
        let number = self
            .inner
            .ovsdb
            .choose_ofport(&pod_port(&self.inner.cfg.bridge, req.veth.as_str()))?;
        let ofport = number.ofport();
        let pod = pod_of(req, ofport);
        let (key, labels) = (req.pod.clone(), req.labels.clone());
        self.edit_port(pod.veth.clone(), move |core| {
            core.pod_attach(key, pod, labels)
        })
        .await?;
        drop(number);
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

    /// Moves a pod to another VNID (the seed's UpdatePod). A pod the node does not know is
    /// looked up, as the seed did, through the note of sandbox `sandbox` on its table 20 flow
    /// on the switch, and taken over as `key`.
    pub async fn pod_update(
        &self,
        key: &PodKey,
        sandbox: Option<SandboxId>,
        vnid: Vnid,
    ) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        let pod_key = key.clone();
        let known = self
            .edit(move |core| core.pod_update(&pod_key, vnid))
            .await?;
        if known {
            return Ok(());
        }
        let Some(sandbox) = sandbox else {
            return Err(Error::not_found(format!(
                "pod {key} (give its sandbox id to take it over from the switch's flows)"
            )));
        };
        let pod = Pod {
            vnid,
            ..self.find_pod_by_note(&sandbox).await?
        };
        let key = key.clone();
        self.edit(move |core| core.pod_adopt(key, pod)).await
    }

    /// The seed's getPodDetailsByContainerID, on the switch's table 20.
    async fn find_pod_by_note(&self, sandbox: &SandboxId) -> Result<Pod, Error> {
        let filter = FlowStatsRequest {
            table_id: FROM_POD,
            ..FlowStatsRequest::default()
        };
        let flows = self.inner.switch.dump_flows(filter).await?;
        readback::pod_by_note(&flows, sandbox).ok_or_else(|| {
            Error::not_found(format!(
                "pod with sandbox id {sandbox} (no table 20 flow carries its note)"
            ))
        })
    }

    /// Detaches a pod (the seed's TearDownPod): its flows go (and its VNID's rule with its last
    /// user), and in the same journal record its port becomes one OVSDB must not hold; then the
    /// port goes (with its QoS: the core's port step). Should OVSDB not take the removal (no
    /// session, or a refusal), the delete still succeeds: the OVSDB reconciler (`ports.rs`)
    /// retries it until the port is gone. A pod the node does not know still has its port
    /// removed, so a repeated delete succeeds.
    pub async fn pod_del(&self, key: &PodKey, veth: Option<IfName>) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        let (key, port) = (key.clone(), veth.clone());
        self.edit_port(port, move |core| core.pod_del(&key, veth))
            .await
    }

    /// The pods of the node, with their attachments.
    pub async fn pods(&self) -> Result<Vec<(PodKey, Pod)>, Error> {
        self.read(|core| {
            let pods = &core.state().pods;
            Ok(pods.iter().map(|(k, p)| (k.clone(), p.clone())).collect())
        })
        .await
    }

    /// Removes the port of a pod setup dropped (its intent is journaled by setup); a failure
    /// is left to the OVSDB reconciler, woken now.
    pub(super) async fn remove_pod_port(&self, veth: &str) {
        if let Err(e) = self
            .inner
            .ovsdb
            .delete_port(&self.inner.cfg.bridge, veth)
            .await
        {
            tracing::warn!(veth, error = %e, "deleting the pod's port failed; retrying until it is gone");
            self.inner.ports_retry.notify_one();
        }
    }

    /// Limits a pod's bandwidth (the seed's SetPodBandwidth); see [`Bandwidth`]. None (or 0)
    /// removes a limit. The limits are desired state: journaled first, then written to OVSDB
    /// in one transaction (the core's port step). Limits OVSDB refuses are taken back and the
    /// error returned; when its answer never comes (no session, a timeout) they stand, and the
    /// OVSDB reconciler (`ports.rs`) makes OVSDB hold them.
    pub async fn pod_bandwidth(
        &self,
        key: &PodKey,
        ingress_bps: Option<u64>,
        egress_bps: Option<u64>,
    ) -> Result<(), Error> {
        self.require_active()?;
        let _shared = self.inner.gate.read().await;
        let pod_key = key.clone();
        let veth = self
            .read(move |core| Ok(core.state().pods.get(&pod_key).and_then(|p| p.veth.clone())))
            .await?
            .ok_or_else(|| Error::not_found(format!("pod {key} (or its veth)")))?;
        let port_exists = self
            .inner
            .ovsdb
            .with_cache(|c| c.find("Port", veth.as_str()).is_some());
        let bandwidth = Bandwidth::of(ingress_bps, egress_bps);
        let port = veth.clone();
        self.edit_port(Some(port), move |core| {
            core.pod_bandwidth(veth, bandwidth, port_exists)
        })
        .await?;
        Ok(())
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
        let follow = move |core: &mut Core| {
            cache.with_cache(|cache| core.follow_ports(|veth| cache.ofport(veth)))
        };
        let sent = request::send_weak(&requests, |reply| {
            Request::Edit(Edit::new(None, follow, reply))
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
