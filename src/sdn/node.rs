//! `Node`: the seed's ovsController operations as one cheap, cloneable handle.
//!
//! Each operation validates its input (bad input changes nothing), does its OVSDB part, then
//! hands the state change to the writer (see `writer.rs`), which makes it one bundle on the
//! switch and one journal record on disk before answering. OVSDB parts run concurrently, and a
//! pod add does not wait for ovs-vswitchd to apply its port (its outcome is checked in the
//! background); setup runs alone.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ofnode_proto::{FlowStatsRequest, OFPTT_ALL};
use tokio::sync::{mpsc, Notify, RwLock};

use super::config::{detect_datapath_type, NodeConfig, SetupOutcome, Status};
use super::dns::Dns;
use super::drift::{SharedDriftStatus, Watcher};
use super::egress::{egress_flows, global_vnid_error};
use super::error::Error;
use super::flows::{pod_flows, version_note};
use super::ha::{Agent, HaShared};
use super::host::setup_host_network;
use super::layout::{
    FROM_POD, TUN_OFPORT, TUN_PORT as TUN, VERSION_NOTE, VXLAN_OFPORT, VXLAN_PORT as VXLAN,
};
use super::metrics::Metrics;
use super::readback;
use super::state::{Change, EgressState, LocalMulticast, NodeState, Pod, PodStatus};
use super::store::Store;
use super::table::{parse_flow, Flow};
use super::types::{
    Cidr, EgressNetworkPolicy, HostSubnet, IfName, InvalidInput, PodAdd, SandboxId, Service,
    SetupRequest, Vnid,
};
use super::writer::{Op, Output, Plan, Planned, Published, Request, Writer};
use crate::openflow::{Switch, SwitchConfig, Target};
use crate::ovsdb::{self, BridgeSpec, PortSpec};

/// How soon a failed read of the host subnets for the VXLAN device is tried again.
const VXLAN_SYNC_RETRY: Duration = Duration::from_secs(1);

/// A handle on the node controller. Clones share one node; its background tasks stop when the
/// last clone is dropped.
#[derive(Clone, Debug)]
pub struct Node {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: NodeConfig,
    datapath_type: String,
    switch: Switch,
    ovsdb: ovsdb::Client,
    netlink: Option<crate::netlink::Handle>,
    vxlan: Option<crate::netlink::VxlanManager>,
    /// Makes host-subnet syncs of the VXLAN device take turns.
    vxlan_turn: tokio::sync::Mutex<()>,
    requests: mpsc::Sender<Request>,
    /// Setup holds it exclusively; every other operation shares it.
    gate: RwLock<()>,
    published: Arc<Mutex<Published>>,
    drift: SharedDriftStatus,
    ha: Option<Arc<HaShared>>,
    metrics: Arc<Metrics>,
    dns: Arc<Dns>,
    dns_wakeup: Arc<Notify>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("bridge", &self.cfg.bridge)
            .field("openflow", &self.cfg.openflow)
            .finish()
    }
}

fn invalid(what: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::Invalid(InvalidInput::new(what, value, reason))
}

impl Node {
    /// Loads the persisted state, connects to OVSDB and the switch, and starts reconciling the
    /// switch with the state (at every connect of the switch, this one included).
    pub async fn start(cfg: NodeConfig) -> Result<Node, Error> {
        check_ha(&cfg)?;
        let (store, state) = Store::open(&cfg.state_dir)?;
        let datapath_type = datapath_type(&cfg);
        let switch_cfg = switch_config(&cfg)?;
        let ovsdb_options = ovsdb::ClientOptions {
            tls: cfg.tls.clone(),
            ..ovsdb::ClientOptions::default()
        };
        let ovsdb = ovsdb::Client::connect(&cfg.ovsdb, ovsdb_options).await?;
        let netlink = netlink_handle(&cfg)?;
        let vxlan = match (&cfg.vxlan, &netlink) {
            (Some(settings), Some(handle)) => Some(start_vxlan(settings, handle, &state).await?),
            _ => None,
        };
        let dns = Arc::new(Dns::new(cfg.dns.clone()));
        // Names resolved before the restart are resolved again soon (in the background: a
        // slow DNS server must not hold up the start), and then kept fresh.
        for (name, ips) in state.egress.values().flat_map(|e| e.dns.iter()) {
            dns.remember(name, ips);
        }
        let (switch, events) = Switch::start(switch_cfg);
        let metrics = Arc::new(Metrics::default());
        let (requests, requests_rx) = mpsc::channel(4096);
        let mut writer = Writer::new(
            state,
            store,
            switch.clone(),
            metrics.clone(),
            requests_rx,
            cfg.max_batch,
            cfg.connect_timeout,
        )?;
        let ha = match &cfg.ha {
            Some(ha_cfg) => Some(Arc::new(HaShared::new(
                ha_cfg.id,
                ovsdb.clone(),
                cfg.bridge.clone(),
            ))),
            None => None,
        };
        writer.ha = ha.clone();
        let dns_wakeup = Arc::new(Notify::new());
        let node = Node {
            inner: Arc::new(Inner {
                cfg,
                datapath_type,
                switch,
                ovsdb,
                netlink,
                vxlan,
                vxlan_turn: tokio::sync::Mutex::new(()),
                requests: requests.clone(),
                gate: RwLock::new(()),
                published: writer.published.clone(),
                drift: writer.drift.clone(),
                ha: ha.clone(),
                metrics: metrics.clone(),
                dns: dns.clone(),
                dns_wakeup: dns_wakeup.clone(),
            }),
        };
        tokio::spawn(writer.run());
        let new_session = Arc::new(Notify::new());
        if let (Some(shared), Some(ha_cfg)) = (&ha, &node.inner.cfg.ha) {
            let agent = Agent {
                cfg: ha_cfg.clone(),
                switch: node.inner.switch.clone(),
                shared: shared.clone(),
                requests: requests.downgrade(),
                new_session: new_session.clone(),
            };
            tokio::spawn(agent.run());
        }
        let watcher = Watcher {
            events,
            requests: requests.downgrade(),
            switch: node.inner.switch.clone(),
            metrics: metrics.clone(),
            status: node.inner.drift.clone(),
            timing: node.inner.cfg.drift,
            ha: ha.map(|shared| (shared, new_session)),
        };
        tokio::spawn(watcher.run());
        tokio::spawn(refresh_dns(dns, dns_wakeup, requests.downgrade(), metrics));
        tokio::spawn(follow_pod_ports(
            node.inner.ovsdb.clone(),
            requests.downgrade(),
        ));
        // Only the Node holds the channel strongly: the writer stops when the last one goes.
        drop(requests);
        if node.passive() {
            node.point_controller_here().await?;
        }
        Ok(node)
    }

    fn passive(&self) -> bool {
        self.inner
            .cfg
            .openflow
            .parse::<Target>()
            .is_ok_and(|t| t.is_passive())
    }

    /// In passive mode, makes the bridge (if it exists) connect to this node.
    async fn point_controller_here(&self) -> Result<(), Error> {
        let bridge = &self.inner.cfg.bridge;
        let exists = self
            .inner
            .ovsdb
            .with_cache(|c| c.find("Bridge", bridge).is_some());
        if !exists {
            return Ok(());
        }
        if let Some(ha) = &self.inner.cfg.ha {
            // Every peer sets the same list: the switch dials all of them.
            self.inner
                .ovsdb
                .set_controller(bridge, &ha.controllers)
                .await?;
            return Ok(());
        }
        let Some(target) = self
            .inner
            .cfg
            .openflow
            .parse::<Target>()
            .ok()
            .and_then(|target| target.switch_side())
        else {
            return Ok(());
        };
        self.inner.ovsdb.set_controller(bridge, &[target]).await?;
        Ok(())
    }

    /// The counters the daemon exports.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The switch connection (for the daemon's own diagnostics).
    pub fn switch(&self) -> &Switch {
        &self.inner.switch
    }

    fn published(&self) -> Published {
        self.inner
            .published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn status(&self) -> Status {
        let p = self.published();
        let switch_connected = self.inner.switch.is_connected();
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
            vxlan: self.inner.vxlan.as_ref().map(|v| v.status()),
            drift: self
                .inner
                .drift
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            ha: self.inner.ha.as_ref().map(|ha| ha.status()),
        }
    }

    async fn submit(&self, op: Op) -> Result<Output, Error> {
        let (request, reply) = Request::new(op);
        self.inner
            .requests
            .send(request)
            .await
            .map_err(|_| Error::Shutdown)?;
        reply.await.map_err(|_| Error::Shutdown)?
    }

    async fn plan(
        &self,
        plan: impl FnOnce(&NodeState) -> Result<Planned, Error> + Send + 'static,
    ) -> Result<Output, Error> {
        let plan: Plan = Box::new(plan);
        self.submit(Op::Plan(plan)).await
    }

    /// A copy of the desired state.
    pub async fn state(&self) -> Result<NodeState, Error> {
        let output = self
            .plan(|state| {
                Ok(Planned {
                    changes: Vec::new(),
                    output: Output::State(Box::new(state.clone())),
                })
            })
            .await?;
        match output {
            Output::State(state) => Ok(*state),
            _ => Ok(NodeState::default()),
        }
    }

    fn require_setup(&self) -> Result<SetupRequest, Error> {
        self.require_active()?;
        self.published().setup.ok_or(Error::NotSetUp)
    }

    /// High availability: a standby refuses operations before touching anything (OVSDB
    /// included); the writer refuses them too, for the operations that go straight to it.
    fn require_active(&self) -> Result<(), Error> {
        match &self.inner.ha {
            Some(ha) if !ha.is_active() => Err(ha.standby_error()),
            _ => Ok(()),
        }
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
        self.setup_ovsdb().await?;
        self.inner
            .switch
            .wait_connected(self.inner.cfg.connect_timeout)
            .await?;
        let output = self.submit(Op::Setup(*req)).await?;
        let Output::Setup(outcome, dropped_pods) = output else {
            return Err(Error::Shutdown);
        };
        for pod in dropped_pods {
            if let Some(veth) = pod.veth {
                self.remove_port(veth.as_str()).await;
            }
        }
        self.setup_host(req).await?;
        tracing::info!(?outcome, setup = ?req, "node set up");
        Ok(outcome)
    }

    /// The bridge and its two fixed ports, as the seed's SetupOVS makes them.
    async fn setup_ovsdb(&self) -> Result<(), Error> {
        let bridge = self.inner.cfg.bridge.clone();
        let ovsdb = &self.inner.ovsdb;
        ovsdb
            .ensure_bridge(&BridgeSpec {
                name: bridge.clone(),
                fail_mode: Some("secure".into()),
                protocols: vec!["OpenFlow13".into()],
                datapath_type: Some(self.inner.datapath_type.clone()),
            })
            .await?;
        if self.passive() {
            self.point_controller_here().await?;
        }
        ovsdb.delete_port(&bridge, VXLAN).await?;
        let options = [("remote_ip", "flow"), ("key", "flow")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ovsdb
            .add_port(&PortSpec {
                bridge: bridge.clone(),
                name: VXLAN.into(),
                iface_type: Some("vxlan".into()),
                options,
                ofport_request: Some(VXLAN_OFPORT),
            })
            .await?;
        ovsdb.delete_port(&bridge, TUN).await?;
        ovsdb
            .add_port(&PortSpec {
                bridge,
                name: TUN.into(),
                iface_type: Some("internal".into()),
                options: BTreeMap::new(),
                ofport_request: Some(TUN_OFPORT),
            })
            .await?;
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

    /// Attaches a pod (the seed's SetUpPod): its veth becomes a port of the bridge, then its
    /// four flows (and in multitenant mode its VNID's rule, when it is the first user) go in
    /// one bundle. Returns the port's OpenFlow number.
    pub async fn pod_add(&self, req: &PodAdd) -> Result<u16, Error> {
        let _shared = self.inner.gate.read().await;
        self.require_setup()?;
        self.require_device(&req.veth).await?;
        // The port gets its number now and ovs-vswitchd applies it while the flows go in:
        // waiting for ovs-vswitchd's reconfiguration would be most of the pod add's time.
        let port = self
            .inner
            .ovsdb
            .add_port_pending(&PortSpec {
                bridge: self.inner.cfg.bridge.clone(),
                name: req.veth.to_string(),
                ..PortSpec::default()
            })
            .await?;
        let ofport = port.ofport();
        let pod = Pod {
            veth: Some(req.veth.clone()),
            ip: req.ip,
            mac: req.mac,
            sandbox: req.sandbox,
            vnid: req.vnid,
            ofport,
        };
        self.plan(move |state| {
            state.setup.ok_or(Error::NotSetUp)?;
            if let Some(old) = state.pods.get(&pod.ip).filter(|old| old.sandbox != pod.sandbox) {
                tracing::warn!(ip = %pod.ip, old = %old.sandbox, new = %pod.sandbox, "pod IP reused before its old pod was deleted; replacing it");
            }
            Ok(Planned::changes(vec![Change::Pod {
                ip: pod.ip,
                pod: Some(pod),
            }]))
        })
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
            .plan(move |state| {
                let Some(pod) = state.pod_by_sandbox(&sandbox) else {
                    return Ok(Planned {
                        changes: Vec::new(),
                        output: Output::Found(false),
                    });
                };
                let pod = Pod {
                    vnid,
                    ..pod.clone()
                };
                Ok(Planned {
                    changes: vec![Change::Pod {
                        ip: pod.ip,
                        pod: Some(pod),
                    }],
                    output: Output::Found(true),
                })
            })
            .await?;
        if matches!(known, Output::Found(true)) {
            return Ok(());
        }
        let pod = self.find_pod_by_note(&sandbox).await?;
        let pod = Pod { vnid, ..pod };
        self.plan(move |_| {
            Ok(Planned::changes(vec![Change::Pod {
                ip: pod.ip,
                pod: Some(pod),
            }]))
        })
        .await?;
        Ok(())
    }

    /// The seed's getPodDetailsByContainerID: the table 20 ARP flow whose note starts with the
    /// sandbox id gives the pod's port, IP and MAC.
    async fn find_pod_by_note(&self, sandbox: &SandboxId) -> Result<Pod, Error> {
        let filter = FlowStatsRequest {
            table_id: FROM_POD,
            ..FlowStatsRequest::default()
        };
        let flows = self.inner.switch.dump_flows(filter).await?;
        let found = readback::pod_by_note(&flows, sandbox);
        found.ok_or_else(|| Error::NotFound {
            what: format!("pod with sandbox id {sandbox} (no table 20 flow carries its note)"),
        })
    }

    /// Detaches a pod (the seed's TearDownPod): its flows go (and its VNID's rule with its last
    /// user), then its bandwidth limits and its port. A pod the node does not know still has
    /// its port removed, so a repeated delete succeeds.
    pub async fn pod_del(&self, veth: &IfName, ip: Ipv4Addr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.plan(move |state| {
            let changes = if state.pods.contains_key(&ip) {
                vec![Change::Pod { ip, pod: None }]
            } else {
                Vec::new()
            };
            Ok(Planned::changes(changes))
        })
        .await?;
        self.remove_port(veth.as_str()).await;
        Ok(())
    }

    /// What the node knows about the pod with this sandbox id, checked against the switch and
    /// OVSDB: whether its port exists and which of its flows the switch lacks (for a CNI CHECK).
    pub async fn pod_status(&self, sandbox: &SandboxId) -> Result<PodStatus, Error> {
        let sandbox = *sandbox;
        let output = self
            .plan(move |state| {
                Ok(Planned {
                    changes: Vec::new(),
                    output: Output::Pod(state.pod_by_sandbox(&sandbox).cloned().map(Box::new)),
                })
            })
            .await?;
        let Output::Pod(Some(pod)) = output else {
            return Err(Error::NotFound {
                what: format!("pod with sandbox id {sandbox}"),
            });
        };
        let port = pod.veth.as_ref().is_some_and(|veth| {
            self.inner
                .ovsdb
                .with_cache(|c| c.find("Port", veth.as_str()).is_some())
        });
        let missing_flows = self.missing_flows(&pod_flows(&pod)).await?;
        Ok(PodStatus {
            pod: *pod,
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

    /// Clears a port's QoS and deletes it; failures are logged (the seed ignored them too).
    async fn remove_port(&self, veth: &str) {
        let ovsdb = &self.inner.ovsdb;
        let exists = ovsdb.with_cache(|c| c.find("Port", veth).is_some());
        if exists {
            if let Err(e) = ovsdb.set_port_qos_max_rate(veth, None).await {
                tracing::warn!(veth, error = %e, "clearing the pod's QoS failed");
            }
        }
        if let Err(e) = ovsdb.delete_port(&self.inner.cfg.bridge, veth).await {
            tracing::warn!(veth, error = %e, "deleting the pod's port failed");
        }
    }

    /// Limits a pod's bandwidth (the seed's SetPodBandwidth); pod ingress is the port's egress
    /// (QoS max-rate) and vice versa (ingress policing, in kbit/s). None removes a limit.
    pub async fn pod_bandwidth(
        &self,
        veth: &IfName,
        ingress_bps: Option<u64>,
        egress_bps: Option<u64>,
    ) -> Result<(), Error> {
        self.require_active()?;
        let _shared = self.inner.gate.read().await;
        let ovsdb = &self.inner.ovsdb;
        let veth = veth.as_str();
        if !ovsdb.with_cache(|c| c.find("Port", veth).is_some()) {
            return Err(Error::NotFound {
                what: format!("port {veth}"),
            });
        }
        ovsdb
            .set_port_qos_max_rate(veth, ingress_bps.filter(|bps| *bps > 0))
            .await?;
        let kbps = egress_bps.map_or(0, |bps| u32::try_from(bps / 1024).unwrap_or(u32::MAX));
        ovsdb.set_ingress_policing_rate(veth, kbps).await?;
        Ok(())
    }

    /// Routes another node's subnet over VXLAN (the seed's AddHostSubnetRules). A subnet that
    /// is already routed is replaced. The VXLAN device, if any, is then reconciled with the
    /// state (see [`Node::sync_vxlan`]).
    pub async fn hostsubnet_add(&self, hs: &HostSubnet) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        let hs = *hs;
        self.plan(move |state| {
            state.setup.ok_or(Error::NotSetUp)?;
            Ok(Planned::changes(vec![Change::HostSubnet {
                subnet: hs.subnet,
                host_subnet: Some(hs),
            }]))
        })
        .await?;
        self.sync_vxlan().await;
        Ok(())
    }

    /// Stops routing a subnet (the seed's DeleteHostSubnetRules). Deleting what is not there
    /// succeeds.
    pub async fn hostsubnet_del(&self, host_ip: Ipv4Addr, subnet: Cidr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.plan(move |state| {
            let changes = match state.host_subnets.get(&subnet) {
                Some(hs) if hs.host_ip == host_ip => vec![Change::HostSubnet {
                    subnet,
                    host_subnet: None,
                }],
                Some(hs) => {
                    return Err(Error::NotFound {
                        what: format!(
                            "host subnet {subnet} of host {host_ip} (it belongs to host {})",
                            hs.host_ip
                        ),
                    })
                }
                None => Vec::new(),
            };
            Ok(Planned::changes(changes))
        })
        .await?;
        self.sync_vxlan().await;
        Ok(())
    }

    /// [`Node::sync_vxlan`] again after [`VXLAN_SYNC_RETRY`], unless the node is gone by then.
    fn sync_vxlan_later(&self) {
        let node = Arc::downgrade(&self.inner);
        // Boxed: this future is part of `sync_vxlan`'s own.
        let retry: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move {
                tokio::time::sleep(VXLAN_SYNC_RETRY).await;
                if let Some(inner) = node.upgrade() {
                    Node { inner }.sync_vxlan().await;
                }
            });
        tokio::spawn(retry);
    }

    /// Reconciles the VXLAN device's entries with the host subnets now (a background repair
    /// also does it every `repair_secs`, and retries failures); without a device, nothing.
    pub async fn vxlan_reprogram(&self) -> Result<(), Error> {
        match &self.inner.vxlan {
            Some(vxlan) => Ok(vxlan.reprogram().await?),
            None => Ok(()),
        }
    }

    /// Hands the VXLAN device every host subnet of the journaled state, which is the truth:
    /// the manager adds what is missing and removes what is no longer wanted. The change that
    /// led here is already journaled and on the switch, so a failure here does not fail it: it
    /// is logged and counted, shown in `status` (`vxlan.last_error`), and retried in the
    /// background until it succeeds. Callers take turns, so an older set never lands last.
    async fn sync_vxlan(&self) {
        let Some(vxlan) = &self.inner.vxlan else {
            return;
        };
        let _turn = self.inner.vxlan_turn.lock().await;
        let read = self
            .plan(|state| {
                Ok(Planned {
                    changes: Vec::new(),
                    output: Output::HostSubnets(state.host_subnets.values().copied().collect()),
                })
            })
            .await;
        let host_subnets = match read {
            Ok(Output::HostSubnets(host_subnets)) => host_subnets,
            Ok(_) => return,
            Err(e) => {
                // The read shares a batch with other operations and fails with it; the set
                // it would have brought must still reach the device.
                tracing::warn!(error = %e, "reading the host subnets for the VXLAN device failed; trying again in {VXLAN_SYNC_RETRY:?}");
                self.sync_vxlan_later();
                return;
            }
        };
        // The manager logs, counts and retries a failure itself.
        let _ = vxlan
            .set_hosts(host_subnets.iter().filter_map(known_host))
            .await;
    }

    /// Adds a service's flows (the seed's AddServiceRules); an existing service of the same IP
    /// is replaced.
    pub async fn service_add(&self, svc: &Service) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        let svc = svc.clone();
        self.plan(move |state| {
            state.setup.ok_or(Error::NotSetUp)?;
            Ok(Planned::changes(vec![Change::Service {
                ip: svc.ip,
                service: Some(svc),
            }]))
        })
        .await?;
        Ok(())
    }

    /// Removes a service's flows (the seed's DeleteServiceRules).
    pub async fn service_del(&self, ip: Ipv4Addr) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        self.plan(move |state| {
            let changes = if state.services.contains_key(&ip) {
                vec![Change::Service { ip, service: None }]
            } else {
                Vec::new()
            };
            Ok(Planned::changes(changes))
        })
        .await?;
        Ok(())
    }

    /// The seed's UpdateLocalMulticastFlows.
    pub async fn multicast_local(
        &self,
        vnid: Vnid,
        enabled: bool,
        ofports: &[u16],
    ) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        if let Some(bad) = ofports.iter().find(|p| **p == 0 || **p > 0xfeff) {
            return Err(invalid("OpenFlow port", bad.to_string(), "must be 1-65279"));
        }
        let multicast = enabled.then(|| LocalMulticast {
            ofports: ofports.to_vec(),
        });
        self.plan(move |state| {
            state.setup.ok_or(Error::NotSetUp)?;
            Ok(Planned::changes(vec![Change::Multicast {
                vnid,
                multicast,
            }]))
        })
        .await?;
        Ok(())
    }

    /// The seed's UpdateVXLANMulticastFlows.
    pub async fn multicast_vxlan(&self, remotes: &[Ipv4Addr]) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        let remotes = remotes.to_vec();
        self.plan(move |state| {
            state.setup.ok_or(Error::NotSetUp)?;
            Ok(Planned::changes(vec![Change::VxlanMulticast { remotes }]))
        })
        .await?;
        Ok(())
    }

    /// The seed's UpdateEgressNetworkPolicyRules, in one atomic bundle. Policies that cannot be
    /// honoured are the seed's input errors: `Error::Policy` says what was done instead.
    pub async fn egress_set(
        &self,
        vnid: Vnid,
        namespaces: &[String],
        policies: &[EgressNetworkPolicy],
    ) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        for policy in policies {
            policy.validate()?;
        }
        if !policies.is_empty() && vnid == Vnid::GLOBAL {
            return Err(Error::Policy {
                message: global_vnid_error(policies),
                applied: false,
            });
        }
        if !policies.is_empty() && namespaces.is_empty() {
            return Err(invalid(
                "egress policy namespaces",
                "",
                "the VNID's namespaces are needed (at least one)",
            ));
        }
        let entry = if policies.is_empty() {
            None
        } else {
            Some(self.egress_entry(namespaces, policies).await)
        };
        let dns = self.inner.dns.clone();
        let output = self
            .plan(move |state| {
                state.setup.ok_or(Error::NotSetUp)?;
                let mut names: HashSet<String> = state
                    .egress
                    .iter()
                    .filter(|(v, _)| **v != vnid)
                    .flat_map(|(_, e)| e.dns_names().map(str::to_string))
                    .collect();
                let mut output = Output::None;
                if let Some(entry) = &entry {
                    names.extend(entry.dns_names().map(str::to_string));
                    if let Some(message) = egress_flows(vnid, entry).1 {
                        output = Output::PolicyError(message);
                    }
                }
                dns.retain(&names);
                Ok(Planned {
                    changes: vec![Change::Egress {
                        vnid,
                        egress: entry,
                    }],
                    output,
                })
            })
            .await?;
        self.inner.dns_wakeup.notify_one();
        match output {
            Output::PolicyError(message) => Err(Error::Policy {
                message,
                applied: true,
            }),
            _ => Ok(()),
        }
    }

    /// The stored form of a VNID's policies, with its DNS names resolved when the policy will
    /// use them (one policy in an unshared namespace).
    async fn egress_entry(
        &self,
        namespaces: &[String],
        policies: &[EgressNetworkPolicy],
    ) -> EgressState {
        let mut entry = EgressState {
            namespaces: namespaces.to_vec(),
            policies: policies.to_vec(),
            dns: BTreeMap::new(),
            resolver_error: None,
        };
        let uses_dns = namespaces.len() == 1 && policies.len() == 1;
        if uses_dns && entry.dns_names().next().is_some() {
            let dns = &self.inner.dns;
            match dns.check() {
                Err(reason) => entry.resolver_error = Some(reason),
                Ok(()) => {
                    let names: Vec<String> = entry.dns_names().map(str::to_string).collect();
                    entry.dns = dns.resolve_all(names.iter().map(String::as_str)).await;
                }
            }
        }
        entry
    }

    /// The seed's FindUnusedVNIDs, from the switch's flows: VNIDs with a table 80 rule but no
    /// pod (table 70) or service (table 60) loading them.
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

    /// Stops the node: operations already queued finish, later ones fail with
    /// `Error::Shutdown`, and the connections close once the writer has stopped.
    pub async fn shutdown(&self) {
        let _ = self.submit(Op::Shutdown).await;
    }

    /// Makes the switch's table equal to the desired one now (the node also does this by itself
    /// at every connect); `force` re-installs the whole table.
    pub async fn resync(&self, force: bool) -> Result<(), Error> {
        self.submit(Op::Resync { force }).await.map(|_| ())
    }
}

/// A high availability configuration that can work: valid timings, a passive OpenFlow
/// target (the switch enforces roles only on the controllers it connects to), and no kernel
/// VXLAN device (both peers would program it).
fn check_ha(cfg: &NodeConfig) -> Result<(), Error> {
    let Some(ha) = &cfg.ha else {
        return Ok(());
    };
    ha.validate()
        .map_err(|reason| invalid("[ha] config", format!("{ha:?}"), reason))?;
    if !cfg.openflow.parse::<Target>().is_ok_and(|t| t.is_passive()) {
        return Err(invalid(
            "OpenFlow target",
            &cfg.openflow,
            "high availability needs a passive target (ptcp: or punix:) listed in ha.controllers",
        ));
    }
    if cfg.vxlan.is_some() {
        // Both peers would keep the one kernel device, the standby from its stale state.
        return Err(invalid(
            "[vxlan] config",
            "present with [ha]",
            "a kernel VXLAN device cannot be kept by an HA pair (both daemons would program it); use the switch's vxlan0 port, or run without [ha]",
        ));
    }
    Ok(())
}

/// The configured datapath type, or the one this machine supports (logged).
fn datapath_type(cfg: &NodeConfig) -> String {
    if let Some(kind) = &cfg.datapath_type {
        return kind.clone();
    }
    let kind = detect_datapath_type();
    let why = if kind == "system" {
        "the openvswitch kernel module is loaded"
    } else {
        "no openvswitch kernel module: userspace datapath"
    };
    tracing::info!(datapath_type = kind, "datapath type chosen: {why}");
    kind.to_string()
}

/// The OpenFlow connection: the node's target, fragments matched as nx-match (the seed's
/// SetFrags, sent again at every connect), quick reconnects.
fn switch_config(cfg: &NodeConfig) -> Result<SwitchConfig, Error> {
    let target: Target = cfg
        .openflow
        .parse()
        .map_err(|e: crate::openflow::TargetError| {
            invalid("OpenFlow target", &cfg.openflow, e.reason)
        })?;
    let mut switch_cfg = SwitchConfig::new(target);
    switch_cfg.frag_mode = ofnode_proto::OFPC_FRAG_NX_MATCH;
    switch_cfg.reconnect_backoff_max = cfg.reconnect_max;
    switch_cfg.tls = cfg.tls.clone();
    Ok(switch_cfg)
}

/// A netlink handle in the configured namespace, when the node manages anything there.
/// The netlink socket of the node's network namespace. The host network and the VXLAN device
/// need it; without them it only checks that pods' devices exist, so failing to open it is
/// then a warning.
fn netlink_handle(cfg: &NodeConfig) -> Result<Option<crate::netlink::Handle>, Error> {
    let handle = match &cfg.netns {
        Some(path) => crate::netlink::Handle::in_netns(path),
        None => crate::netlink::Handle::new(),
    };
    match handle {
        Ok(handle) => Ok(Some(handle)),
        Err(e) if !cfg.manage_host_network && cfg.vxlan.is_none() => {
            tracing::warn!(error = %e, "no netlink socket: pods' devices are not checked before their ports are added");
            Ok(None)
        }
        Err(e) => Err(e.into()),
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
async fn follow_pod_ports(ovsdb: ovsdb::Client, requests: mpsc::WeakSender<Request>) {
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
        let Some(requests) = requests.upgrade() else {
            return;
        };
        let cache = ovsdb.clone();
        let plan: Plan =
            Box::new(move |state| Ok(Planned::changes(cache.with_cache(|c| moved_pods(state, c)))));
        let (request, reply) = Request::new(Op::Plan(plan));
        if requests.send(request).await.is_err() {
            return;
        }
        drop(requests);
        if let Ok(Err(e)) = reply.await {
            // Checked again at the next OVSDB change, or at the next reconnect of the switch
            // (which re-installs the state).
            tracing::warn!(error = %e, "moving pods' flows to their ports' new numbers failed");
        }
    }
}

/// The pods whose interface ovs-vswitchd has given another OpenFlow port than their flows use.
fn moved_pods(state: &NodeState, cache: &ovsdb::Cache) -> Vec<Change> {
    state
        .pods
        .values()
        .filter_map(|pod| {
            let veth = pod.veth.as_ref()?;
            let now = cache
                .ofport(veth.as_str())
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port > 0 && *port != pod.ofport)?;
            tracing::info!(ip = %pod.ip, %veth, from = pod.ofport, to = now, "the pod's port has a new OpenFlow number; its flows follow");
            Some(Change::Pod {
                ip: pod.ip,
                pod: Some(Pod {
                    ofport: now,
                    ..pod.clone()
                }),
            })
        })
        .collect()
}

/// The VXLAN device of `settings`, with entries for the host subnets of `state`. A device
/// that cannot be made fails the start; entries that cannot be programmed yet are retried in
/// the background (see [`Node::sync_vxlan`]).
async fn start_vxlan(
    settings: &crate::netlink::VxlanSettings,
    handle: &crate::netlink::Handle,
    state: &NodeState,
) -> Result<crate::netlink::VxlanManager, Error> {
    let options = settings.to_options(handle).await?;
    let manager = crate::netlink::VxlanManager::start(handle, options).await?;
    // The manager logs, counts and retries a failure itself.
    let _ = manager
        .set_hosts(state.host_subnets.values().filter_map(known_host))
        .await;
    Ok(manager)
}

/// A host subnet as the VXLAN device knows it; only those with a VTEP MAC can be reached.
fn known_host(hs: &HostSubnet) -> Option<crate::netlink::KnownHost> {
    Some(crate::netlink::KnownHost {
        host_ip: hs.host_ip,
        subnet: hs.subnet.into(),
        vtep_mac: hs.vtep_mac?,
    })
}

/// Resolves egress DNS names again when their answers expire, and updates the flows of every
/// policy whose addresses changed (one bundle per refresh).
async fn refresh_dns(
    dns: Arc<Dns>,
    wakeup: Arc<Notify>,
    requests: mpsc::WeakSender<Request>,
    metrics: Arc<Metrics>,
) {
    const IDLE: Duration = Duration::from_secs(60);
    loop {
        if requests.upgrade().is_none() {
            return;
        }
        let sleep = match dns.next_refresh() {
            Some(at) => tokio::time::sleep_until(at),
            None => tokio::time::sleep(IDLE),
        };
        tokio::select! {
            () = sleep => {}
            () = wakeup.notified() => continue,
        }
        let changed = dns.refresh_due().await;
        if changed.is_empty() {
            continue;
        }
        metrics
            .dns_changes
            .fetch_add(changed.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let Some(requests) = requests.upgrade() else {
            return;
        };
        let plan: Plan = Box::new(move |state| Ok(Planned::changes(dns_changes(state, &changed))));
        let (request, _) = Request::new(Op::Plan(plan));
        if requests.send(request).await.is_err() {
            return;
        }
    }
}

/// New egress entries for the VNIDs whose DNS names got new addresses.
fn dns_changes(state: &NodeState, changed: &BTreeMap<String, Vec<Ipv4Addr>>) -> Vec<Change> {
    state
        .egress
        .iter()
        .filter(|(_, e)| e.dns.keys().any(|name| changed.contains_key(name)))
        .map(|(vnid, e)| {
            let mut entry = e.clone();
            for (name, ips) in &mut entry.dns {
                if let Some(new) = changed.get(name) {
                    ips.clone_from(new);
                }
            }
            Change::Egress {
                vnid: *vnid,
                egress: Some(entry),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::ha::HaConfig;
    use super::*;

    fn ha_config() -> NodeConfig {
        let mut cfg = NodeConfig::new("unix:/db.sock", "ptcp:6653:127.0.0.1", "/state");
        cfg.ha = Some(HaConfig {
            id: 1,
            controllers: vec!["tcp:127.0.0.1:6653".into()],
            heartbeat_ms: 200,
            takeover_ms: 1000,
        });
        cfg
    }

    #[test]
    fn ha_needs_a_passive_target_and_no_kernel_vxlan_device() {
        assert!(check_ha(&ha_config()).is_ok());
        let mut active = ha_config();
        active.openflow = "unix:/run/openvswitch/br0.mgmt".into();
        assert!(check_ha(&active)
            .unwrap_err()
            .to_string()
            .contains("passive target"));
        let mut vxlan = ha_config();
        vxlan.vxlan =
            Some(serde_json::from_str(r#"{"address": "10.128.0.1/14"}"#).expect("vxlan settings"));
        let err = check_ha(&vxlan).unwrap_err().to_string();
        assert!(err.contains("[vxlan]") && err.contains("HA pair"), "{err}");
    }
}
