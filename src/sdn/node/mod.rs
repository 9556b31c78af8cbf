//! `Node`: the seed's ovsController operations as one cheap, cloneable handle: the async
//! shell's front. Each operation validates its input (bad input changes nothing), then hands
//! its edit of the desired state to the writer (`writer.rs`), which makes it one bundle on the
//! switch and one journal record on disk, then carries out what it asks of OVSDB for pods'
//! ports (`port_steps.rs`) before answering. A pod add does not wait for ovs-vswitchd to apply
//! its port (its outcome is checked in the background); setup does its OVSDB part itself, and
//! runs alone.
//!
//! - `setup.rs`: setup, its OVSDB plan and the host network; `pods.rs`: pods and their ports;
//!   `routes.rs`: host subnets, services, multicast; `egress.rs`: egress policies and their DNS
//!   names; `vxlan.rs`: the kernel VXLAN device; `status.rs`: what the node reports;
//!   `ports.rs`: OVSDB made to hold the desired ports at every OVSDB session; `counters.rs`:
//!   the per-pod traffic counter poll.

mod counters;
mod egress;
mod netpol;
mod pods;
mod ports;
mod routes;
mod setup;
mod status;
mod vxlan;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch, Notify, RwLock};

use super::audit::USERDATA_MAGIC;
use super::audit_log;
use super::config::{detect_datapath_type, NodeConfig};
use super::core::{Core, CoreError};
use super::dns::Dns;
use super::drift::{SharedDriftStatus, Watcher};
use super::error::Error;
use super::ha::{Agent, HaShared};
use super::journal::Journal;
use super::megaflows::Megaflows;
use super::metrics::Metrics;
use super::port_steps::PortSteps;
use super::request::{self, Envelope, Reply, Request};
use super::restore::{management_target, FlowRestoreWait};
use super::state::NodeState;
use super::types::{HostSubnet, SetupRequest};
use super::writer::{Published, Writer};
use crate::openflow::{PacketInTap, Switch, SwitchConfig, Target};
use crate::ovsdb;
use crate::value::{IfName, InvalidInput};

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
    /// The host subnets as last committed (the writer keeps it current).
    vxlan_hosts: watch::Receiver<Arc<Vec<HostSubnet>>>,
    requests: mpsc::Sender<Envelope>,
    /// Setup holds it exclusively; every other operation shares it.
    gate: RwLock<()>,
    /// Wakes the OVSDB reconciler (`ports.rs`) to retry an OVSDB step that failed.
    ports_retry: Arc<Notify>,
    published: Arc<Mutex<Published>>,
    drift: SharedDriftStatus,
    ha: Option<Arc<HaShared>>,
    metrics: Arc<Metrics>,
    dns: Arc<Dns>,
    dns_wakeup: Arc<Notify>,
    /// The stale-megaflow warning was logged (once per daemon start: `status.rs`).
    stale_megaflows_warned: AtomicBool,
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
    InvalidInput::new(what, value, reason).into()
}

impl Node {
    /// What [`Node::start`] refuses before it touches anything: the OVSDB and OpenFlow
    /// targets' syntax and the `[ha]` section (`ofnode run --check-config`).
    pub fn check_config(cfg: &NodeConfig) -> Result<(), Error> {
        ovsdb::parse_target(&cfg.ovsdb)?;
        switch_config(cfg)?;
        cfg.audit_log
            .check()
            .map_err(|reason| invalid("audit log", cfg.audit_log.describe(), reason))?;
        check_ha(cfg)
    }

    /// Loads the persisted state, connects to OVSDB and the switch, and starts reconciling the
    /// switch with the state (at every connect of the switch, this one included).
    pub async fn start(cfg: NodeConfig) -> Result<Node, Error> {
        Node::check_config(&cfg)?;
        let (store, state) = Journal::open(&cfg.state_dir)?;
        let datapath_type = datapath_type(&cfg);
        let switch_cfg = switch_config(&cfg)?;
        let ovsdb_options = ovsdb::ClientOptions {
            tls: cfg.tls.clone(),
            ..ovsdb::ClientOptions::default()
        };
        let ovsdb = ovsdb::Client::connect(&cfg.ovsdb, ovsdb_options).await?;
        let netlink = netlink_handle(&cfg)?;
        let vxlan = match (&cfg.vxlan, &netlink) {
            (Some(settings), Some(handle)) => {
                Some(vxlan::start_vxlan(settings, handle, &state).await?)
            }
            _ => None,
        };
        let dns = Arc::new(Dns::new(cfg.dns.clone()));
        // Names resolved before the restart are resolved again soon (in the background: a
        // slow DNS server must not hold up the start), and then kept fresh.
        for (name, ips) in state.egress.values().flat_map(|e| e.dns.iter()) {
            dns.remember(name, ips);
        }
        let (switch, events) = Switch::start(switch_cfg);
        let metrics = Arc::new(Metrics::new(cfg.pod_metrics_max, cfg.rule_metrics_max));
        let (requests, requests_rx) = mpsc::channel(4096);
        if let Some(tapped) = switch.take_packet_in_tap() {
            audit_log::start(
                &cfg.audit_log,
                tapped,
                requests.downgrade(),
                metrics.audit.clone(),
            )
            .map_err(|e| {
                invalid(
                    "audit_log",
                    cfg.audit_log.describe(),
                    format!("cannot open: {e}"),
                )
            })?;
        }
        let mut writer = Writer::new(
            state,
            store,
            switch.clone(),
            metrics.clone(),
            dns.clone(),
            requests_rx,
            &cfg,
        )?;
        let ha = cfg
            .ha
            .as_ref()
            .map(|ha| Arc::new(HaShared::new(ha.id, ovsdb.clone(), cfg.bridge.clone())));
        writer.ha = ha.clone();
        let ports_retry = Arc::new(Notify::new());
        writer.port_steps = Some(PortSteps::new(
            ovsdb.clone(),
            cfg.bridge.clone(),
            requests.downgrade(),
            metrics.clone(),
            ports_retry.clone(),
        ));
        writer.purge_megaflows(Megaflows::new(
            cfg.vswitchd_ctl.clone(),
            ovsdb.clone(),
            datapath_type.clone(),
            cfg.stale_megaflow_purge,
            metrics.clone(),
        ));
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
                vxlan_hosts: writer.vxlan_hosts.subscribe(),
                requests: requests.clone(),
                gate: RwLock::new(()),
                ports_retry,
                published: writer.published.clone(),
                drift: writer.drift.clone(),
                ha: ha.clone(),
                metrics: metrics.clone(),
                dns: dns.clone(),
                dns_wakeup: dns_wakeup.clone(),
                stale_megaflows_warned: AtomicBool::new(false),
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
        tokio::spawn(egress::refresh_dns(
            dns,
            dns_wakeup,
            requests.downgrade(),
            metrics,
        ));
        tokio::spawn(flow_restore_wait(&node, requests.downgrade()).run());
        tokio::spawn(pods::follow_pod_ports(
            node.inner.ovsdb.clone(),
            requests.downgrade(),
        ));
        tokio::spawn(ports::reconcile_ovsdb(
            Arc::downgrade(&node.inner),
            node.inner.ovsdb.watch(),
            node.inner.ports_retry.clone(),
        ));
        counters::start(&node);
        // Only the Node holds the channel strongly: the writer stops when the last one goes.
        drop(requests);
        node.point_controller_here().await?;
        Ok(node)
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

    /// Sends a request to the writer and waits for its answer.
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, Error> {
        request::call(&self.inner.requests, make).await
    }

    /// An edit of the desired state (a step on the core), answered once it is on the switch
    /// and on disk.
    async fn edit<T, F, E>(&self, step: F) -> Result<T, Error>
    where
        F: FnOnce(&mut Core) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Into<Error> + 'static,
    {
        request::edit(&self.inner.requests, None, step).await
    }

    /// Sends an edit of the desired state without waiting for it (a source that follows
    /// another's truth: edits sent together coalesce into few batches). The receiver gets the
    /// answer once its batch is on the switch and on disk; None when the node has stopped.
    pub async fn send_edit<T, F>(
        &self,
        step: F,
    ) -> Option<tokio::sync::oneshot::Receiver<Result<T, Error>>>
    where
        F: FnOnce(&mut Core) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        request::send(&self.inner.requests, |reply| {
            Request::Edit(request::Edit::new(None, step, reply))
        })
        .await
    }

    /// An edit that may give pod port `port` a port step (see `request::Edit::new`).
    async fn edit_port<T, F, E>(&self, port: Option<IfName>, step: F) -> Result<T, Error>
    where
        F: FnOnce(&mut Core) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Into<Error> + 'static,
    {
        request::edit(&self.inner.requests, port, step).await
    }

    /// A look at the desired state.
    async fn read<T, F>(&self, look: F) -> Result<T, Error>
    where
        F: FnOnce(&Core) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        request::read(&self.inner.requests, look).await
    }

    /// A copy of the desired state.
    pub async fn state(&self) -> Result<NodeState, Error> {
        self.read(|core| Ok(core.state().clone())).await
    }

    fn require_setup(&self) -> Result<SetupRequest, Error> {
        self.require_active()?;
        self.published().setup.ok_or(CoreError::NotSetUp.into())
    }

    /// High availability: a standby refuses operations before touching anything (OVSDB
    /// included); the writer refuses them too, for the operations that go straight to it.
    fn require_active(&self) -> Result<(), Error> {
        match &self.inner.ha {
            Some(ha) if !ha.is_active() => Err(ha.standby_error()),
            _ => Ok(()),
        }
    }

    /// Stops the node: operations already queued finish, later ones fail with
    /// `Error::Shutdown`, and the connections close once the writer has stopped.
    pub async fn shutdown(&self) {
        let _ = self.call(Request::Shutdown).await;
    }

    /// Makes the switch's table equal to the desired one now (the node also does this by itself
    /// at every connect); `force` re-installs the whole table.
    pub async fn resync(&self, force: bool) -> Result<(), Error> {
        self.call(|reply| Request::Resync { force, reply }).await
    }
}

/// The task that restores the table under `other_config:flow-restore-wait` and removes the key;
/// with a passive target it has the switch dial the bridge's management socket meanwhile (an
/// active target dials its own, told to dial again at every OVSDB change).
fn flow_restore_wait(node: &Node, requests: mpsc::WeakSender<Envelope>) -> FlowRestoreWait {
    let cfg = &node.inner.cfg;
    let passive = cfg.openflow.parse::<Target>().is_ok_and(|t| t.is_passive());
    let management = passive
        .then(|| {
            management_target(&cfg.ovsdb, &cfg.bridge)
                .parse::<Target>()
                .ok()
        })
        .flatten();
    FlowRestoreWait {
        ovsdb: node.inner.ovsdb.clone(),
        switch: node.inner.switch.clone(),
        bridge: cfg.bridge.clone(),
        management,
        requests,
        published: node.inner.published.clone(),
        ha: node.inner.ha.clone(),
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
/// SetFrags, sent again at every connect), quick reconnects, the configured request timeout
/// and echo probe.
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
    switch_cfg.request_timeout = cfg.request_timeout;
    switch_cfg.echo_interval = cfg.echo_interval;
    switch_cfg.echo_timeout = cfg.echo_timeout;
    switch_cfg.tls = cfg.tls.clone();
    // The audit flows' packet-ins carry their rule in the userdata, which only NXT_PACKET_IN2
    // has; they go to the audit task's own channel, not the event channel (flow monitor).
    switch_cfg.packet_in_format = ofnode_proto::PacketInFormat::Nxt2;
    switch_cfg.packet_in_tap = Some(PacketInTap {
        userdata_prefix: bytes::Bytes::from_static(&USERDATA_MAGIC),
        capacity: cfg.audit_log.switch_queue,
    });
    Ok(switch_cfg)
}

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
    fn the_switch_gets_the_configured_timing() {
        let mut cfg = NodeConfig::new("unix:/db.sock", "unix:/run/br0.mgmt", "/state");
        cfg.request_timeout = std::time::Duration::from_millis(700);
        cfg.echo_interval = std::time::Duration::from_millis(2000);
        cfg.echo_timeout = std::time::Duration::from_millis(3000);
        let switch = switch_config(&cfg).expect("a valid target");
        assert_eq!(switch.request_timeout, cfg.request_timeout);
        assert_eq!(switch.echo_interval, cfg.echo_interval);
        assert_eq!(switch.echo_timeout, cfg.echo_timeout);
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
