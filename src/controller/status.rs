//! What the controller shows over HTTP: `/status` (JSON: leader or not, who holds the lease,
//! allocations, what waits and why, conflicts), `/metrics` (Prometheus text) and `/healthz`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use super::config::Settings;
use super::state::Summary;
use crate::sdn::{counter, gauge, Histogram};

/// The controller's status, shared by the election, the leader's loop and the HTTP server.
#[derive(Debug)]
pub struct Status {
    identity: String,
    lease: String,
    mode: String,
    cluster_network: String,
    subnet_length: u8,
    view: Mutex<View>,
    /// Writes sent to the API server (past the fence), and writes the fence stopped.
    attempts: AtomicU64,
    fenced: AtomicU64,
    /// Writes answered ok, by verb; writes that failed; times this controller became the
    /// leader; watch errors.
    creates: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
    write_errors: AtomicU64,
    terms: AtomicU64,
    watch_errors: AtomicU64,
    write_latency: Histogram,
}

/// What changes as the controller runs.
#[derive(Debug, Clone, Default, Serialize)]
struct View {
    leader: bool,
    holder: Option<String>,
    synced: bool,
    summary: Summary,
    last_error: Option<String>,
}

/// `/status` as JSON.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub identity: &'a str,
    pub lease: &'a str,
    pub mode: &'a str,
    pub cluster_network: &'a str,
    pub subnet_length: u8,
    pub leader: bool,
    /// Who holds the lease, as last seen.
    pub holder: Option<String>,
    /// The leader has listed everything and allocates.
    pub synced: bool,
    /// Writes sent to the API server, whatever their answer.
    pub attempts: u64,
    /// Writes the fence stopped (decided while the lease was lost or overdue).
    pub fenced: u64,
    /// Writes the API server accepted.
    pub writes: u64,
    pub write_errors: u64,
    pub terms: u64,
    pub last_error: Option<String>,
    #[serde(flatten)]
    pub summary: Summary,
}

impl Status {
    pub fn new(settings: &Settings) -> Status {
        Status {
            identity: settings.identity.clone(),
            lease: format!("{}/{}", settings.lease_namespace, settings.lease_name),
            mode: settings.mode.to_string(),
            cluster_network: settings.cluster_network.to_string(),
            subnet_length: settings.subnet_len,
            view: Mutex::default(),
            attempts: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            creates: AtomicU64::new(0),
            updates: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            terms: AtomicU64::new(0),
            watch_errors: AtomicU64::new(0),
            write_latency: Histogram::default(),
        }
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_holder(&self, holder: Option<String>) {
        self.view().holder = holder;
    }

    /// Became the leader (`true`) or stopped being it.
    pub fn set_leader(&self, leader: bool) {
        if leader {
            self.terms.fetch_add(1, Ordering::Relaxed);
        }
        let mut view = self.view();
        view.leader = leader;
        view.synced = false;
        if !leader {
            view.summary = Summary::default();
        }
    }

    pub fn set_synced(&self, summary: Summary) {
        let mut view = self.view();
        view.synced = true;
        view.summary = summary;
    }

    /// A write was decided: sent (`true`) or stopped by the fence.
    pub fn write_attempted(&self, sent: bool) {
        let counter = if sent { &self.attempts } else { &self.fenced };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn wrote(&self, verb: &str, took: Duration) {
        let counter = match verb {
            "create" => &self.creates,
            "update" => &self.updates,
            _ => &self.deletes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.write_latency.observe(took);
    }

    pub fn write_failed(&self, error: String) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        self.view().last_error = Some(error);
    }

    pub fn watch_failed(&self, error: String) {
        self.watch_errors.fetch_add(1, Ordering::Relaxed);
        self.view().last_error = Some(error);
    }

    pub fn writes(&self) -> u64 {
        [&self.creates, &self.updates, &self.deletes]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    pub fn report(&self) -> Report<'_> {
        let view = self.view().clone();
        Report {
            identity: &self.identity,
            lease: &self.lease,
            mode: &self.mode,
            cluster_network: &self.cluster_network,
            subnet_length: self.subnet_length,
            leader: view.leader,
            holder: view.holder,
            synced: view.synced,
            attempts: self.attempts.load(Ordering::Relaxed),
            fenced: self.fenced.load(Ordering::Relaxed),
            writes: self.writes(),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            terms: self.terms.load(Ordering::Relaxed),
            last_error: view.last_error,
            summary: view.summary,
        }
    }

    /// The metrics in Prometheus text exposition format.
    pub fn metrics(&self) -> String {
        let view = self.view().clone();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        gauge(
            &mut out,
            "ofnode_controller_leader",
            "1 while this controller holds the lease.",
            u64::from(view.leader),
        );
        gauge(
            &mut out,
            "ofnode_controller_synced",
            "1 once the leader has listed everything and allocates.",
            u64::from(view.synced),
        );
        counter(
            &mut out,
            "ofnode_controller_terms_total",
            "Times this controller became the leader.",
            load(&self.terms),
        );
        let name = "ofnode_controller_writes_total";
        let _ = writeln!(
            out,
            "# HELP {name} Writes the API server accepted, by verb."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (verb, n) in [
            ("create", &self.creates),
            ("update", &self.updates),
            ("delete", &self.deletes),
        ] {
            let _ = writeln!(out, "{name}{{verb=\"{verb}\"}} {}", load(n));
        }
        counter(
            &mut out,
            "ofnode_controller_write_errors_total",
            "Writes that failed (see the log).",
            load(&self.write_errors),
        );
        counter(
            &mut out,
            "ofnode_controller_watch_errors_total",
            "Errors of the watches (each is retried).",
            load(&self.watch_errors),
        );
        let s = &view.summary;
        for (name, help, value) in [
            ("ofnode_controller_nodes", "Nodes the leader knows.", s.nodes),
            ("ofnode_controller_namespaces", "Namespaces the leader knows.", s.namespaces),
            ("ofnode_controller_host_subnets", "HostSubnets the API server holds.", s.host_subnets),
            ("ofnode_controller_net_namespaces", "NetNamespaces the API server holds.", s.net_namespaces),
            ("ofnode_controller_subnets_used", "Subnets of the cluster network in use.", s.subnets_used),
            ("ofnode_controller_subnets_total", "Subnets the cluster network has.", s.subnets_total),
            ("ofnode_controller_netids_allocated", "Netids from 10 up in use.", s.netids_allocated),
            ("ofnode_controller_nodes_waiting", "Nodes without a HostSubnet that cannot get one yet (see /status).", s.nodes_waiting),
            ("ofnode_controller_namespaces_waiting", "Namespaces without a NetNamespace that cannot get one yet.", s.namespaces_waiting),
            ("ofnode_controller_conflicts", "Problems with existing objects: overlapping subnets, netids nodes refuse (see /status).", s.conflicts.len()),
        ] {
            gauge(&mut out, name, help, value as u64);
        }
        self.write_latency.render(
            &mut out,
            "ofnode_controller_write_duration_seconds",
            "Latency of the controller's writes.",
        );
        out
    }
}

/// Serves `/status`, `/metrics` and `/healthz` until the process ends.
pub async fn serve(
    address: SocketAddr,
    status: Arc<Status>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/status", get(report))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(status);
    let task = tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!("status server: {err}");
        }
    });
    Ok((bound, task))
}

async fn report(State(status): State<Arc<Status>>) -> impl IntoResponse {
    Json(serde_json::to_value(status.report()).unwrap_or_default())
}

async fn metrics(State(status): State<Arc<Status>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        status.metrics(),
    )
}
