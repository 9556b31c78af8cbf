//! The control socket: HTTP/1.1 + JSON on a unix socket, one endpoint per node operation.
//!
//! Usable with `curl --unix-socket /run/ofnode/ofnode.sock http://ofnode/v1/status`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::net::UnixListener;

use super::wire::{self, route, ErrorBody, HostSubnet, PodAdd, Service, SetupRequest};
use crate::cluster::Membership;
use crate::kube::Following;
use crate::sdn::{self, Node};
use crate::trace::{self, TraceError, VswitchdCtl};

/// Limits on what a client can make the daemon do.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    pub socket: PathBuf,
    /// Largest request body accepted, in bytes.
    pub max_body: usize,
    /// Permission bits of the socket file (0600: only root may program the node).
    pub mode: u32,
    /// ovs-vswitchd's control socket, which traces are asked of.
    pub vswitchd_ctl: VswitchdCtl,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            socket: PathBuf::from("/run/ofnode/ofnode.sock"),
            max_body: 1 << 20,
            mode: 0o600,
            vswitchd_ctl: VswitchdCtl::new(None, ""),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot create the API socket directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the API socket {path} is in use by a running daemon")]
    InUse { path: PathBuf },
    #[error("cannot bind the API socket {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("API server failed: {0}")]
    Serve(std::io::Error),
}

/// Where the node's inputs come from besides its socket.
#[derive(Debug, Default)]
pub struct Sources {
    /// Present when the node is a member of a cluster through etcd.
    pub membership: Option<Membership>,
    /// Present when the node follows a Kubernetes API server: the inputs it owns are refused
    /// on the socket, and CNI's pods take their VNID and labels from it.
    pub following: Option<Following>,
}

struct AppState {
    node: Node,
    membership: Option<Membership>,
    following: Option<Following>,
    vswitchd_ctl: VswitchdCtl,
}

impl AppState {
    /// Refuses an input the Kubernetes API owns while the node follows it (409, naming where
    /// the truth lives and how to change it there).
    fn owned_by_the_api(&self, how: &str) -> Result<(), ApiError> {
        match &self.following {
            Some(following) => Err(ApiError {
                status: StatusCode::CONFLICT,
                message: following.refusal(how),
            }),
            None => Ok(()),
        }
    }
}

type Shared = State<Arc<AppState>>;

/// Binds the socket (refusing to steal one a live daemon serves) and returns the listener.
pub async fn bind(options: &ApiOptions) -> Result<UnixListener, ServeError> {
    let path = &options.socket;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ServeError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    remove_stale_socket(path).await?;
    let listener = UnixListener::bind(path).map_err(|source| ServeError::Bind {
        path: path.clone(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(options.mode)).map_err(
        |source| ServeError::Bind {
            path: path.clone(),
            source,
        },
    )?;
    Ok(listener)
}

/// A socket file left by a dead daemon is removed; one that answers belongs to a live daemon.
async fn remove_stale_socket(path: &Path) -> Result<(), ServeError> {
    if !path.exists() {
        return Ok(());
    }
    if tokio::net::UnixStream::connect(path).await.is_ok() {
        return Err(ServeError::InUse {
            path: path.to_path_buf(),
        });
    }
    std::fs::remove_file(path).map_err(|source| ServeError::Bind {
        path: path.to_path_buf(),
        source,
    })
}

/// Serves the API until `shutdown` resolves.
pub async fn serve(
    listener: UnixListener,
    node: Node,
    sources: Sources,
    options: &ApiOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = router(node, sources, options);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServeError::Serve)
}

fn router(node: Node, sources: Sources, options: &ApiOptions) -> Router {
    let state = Arc::new(AppState {
        node,
        membership: sources.membership,
        following: sources.following,
        vswitchd_ctl: options.vswitchd_ctl.clone(),
    });
    Router::new()
        .route(route::SETUP, post(setup))
        .route(route::STATUS, get(status))
        .route(route::PODS, get(pods).post(pod_add).delete(pod_del))
        .route(route::POD_UPDATE, post(pod_update))
        .route(route::POD_BANDWIDTH, post(pod_bandwidth))
        .route(
            route::HOST_SUBNETS,
            post(hostsubnet_add).delete(hostsubnet_del),
        )
        .route(route::SERVICES, post(service_add).delete(service_del))
        .route(route::MULTICAST_LOCAL, post(multicast_local))
        .route(route::MULTICAST_VXLAN, post(multicast_vxlan))
        .route(route::EGRESS, post(egress_set))
        .route(route::UNUSED_VNIDS, get(unused_vnids))
        .route(route::FLOWS, get(dump_flows))
        .route(route::TRACE, get(trace_packet))
        .route(route::METRICS, get(render_metrics))
        .route(
            route::NAMESPACES,
            get(namespaces).post(namespace_set).delete(namespace_del),
        )
        .route(route::POD_LABELS, post(pod_labels))
        .route(route::POD_PORTS, post(pod_ports))
        .route(route::NAMESPACE_LABELS, post(namespace_labels))
        .route(
            route::REMOTE_PODS,
            get(remote_pods).post(remote_pod_set).delete(remote_pod_del),
        )
        .route(
            route::NETPOLS,
            get(netpols).post(netpol_apply).delete(netpol_del),
        )
        .route(route::NETPOL_EXPLAIN, get(netpol_explain))
        .route(route::NODES, get(nodes).post(node_set).delete(node_del))
        .route(
            route::ADMIN_POLICIES,
            get(admin_policies)
                .post(admin_policy_apply)
                .delete(admin_policy_del),
        )
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(options.max_body))
        .with_state(state)
}

/// The API's error response: a status and `{"error": "…"}`.
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

/// The HTTP status the API answers a node error with: its class, for clients that act on it.
pub fn status_of(err: &sdn::Error) -> StatusCode {
    use sdn::Error;
    match err {
        Error::Core(refused) => status_of_refusal(refused),
        // A peer (the switch, OVSDB) refused or failed it.
        Error::Switch(_) | Error::Ovsdb(_) | Error::Replication { .. } => StatusCode::BAD_GATEWAY,
        Error::Shutdown | Error::Standby { .. } => StatusCode::SERVICE_UNAVAILABLE,
        Error::Netlink(_) | Error::State(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The HTTP status of what the node's core refused.
fn status_of_refusal(err: &sdn::CoreError) -> StatusCode {
    use sdn::CoreError;
    match err {
        CoreError::Invalid(_) => StatusCode::BAD_REQUEST,
        CoreError::NotFound { .. } => StatusCode::NOT_FOUND,
        // The request is sound but the node is not in a state (or mode) to take it.
        CoreError::NotSetUp | CoreError::WrongMode { .. } | CoreError::Conflict { .. } => {
            StatusCode::CONFLICT
        }
        CoreError::Field(_) => StatusCode::UNPROCESSABLE_ENTITY,
        // Applied (or refused) with the seed's input error: the request was understood.
        CoreError::Policy { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        CoreError::Flow { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<sdn::Error> for ApiError {
    fn from(err: sdn::Error) -> Self {
        ApiError {
            status: status_of(&err),
            message: err.to_string(),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        ApiError {
            status: rejection.status(),
            message: format!("bad request body: {}", rejection.body_text()),
        }
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

/// A JSON body extractor whose rejection is an [`ApiError`] (so bad JSON also gets `{"error"}`).
pub struct Body<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S> for Body<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(Body(value))
    }
}

fn done() -> ApiResult<wire::Ok> {
    Ok(Json(wire::Ok { ok: true }))
}

async fn setup(State(s): Shared, Body(req): Body<SetupRequest>) -> ApiResult<wire::SetupReply> {
    s.owned_by_the_api("the node sets itself up from its HostSubnet")?;
    let outcome = s.node.setup(&req).await?;
    Ok(Json(wire::SetupReply { outcome }))
}

async fn status(State(s): Shared) -> Json<wire::StatusReply> {
    let cluster = match &s.membership {
        Some(membership) => Some(membership.status().await),
        None => None,
    };
    Json(wire::StatusReply {
        node: s.node.status(),
        cluster,
        kubernetes: s.following.as_ref().map(Following::status),
    })
}

/// A pod added by CNI (or by hand). While the node follows the API, its VNID and labels are
/// the API's (waiting a bounded time for them); a VNID or labels given too must agree.
async fn pod_add(State(s): Shared, Body(mut req): Body<PodAdd>) -> ApiResult<wire::PodAdded> {
    if let Some(following) = &s.following {
        let from_api = following.pod_for_cni(&req.pod).await?;
        if req.vnid != sdn::Vnid::GLOBAL && req.vnid != from_api.vnid {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                message: following.refusal(&format!(
                    "pod {}'s VNID is {} (its namespace's NetNamespace), not {}",
                    req.pod, from_api.vnid, req.vnid
                )),
            });
        }
        if !req.labels.is_empty() && req.labels != from_api.labels {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                message: following.refusal(&format!(
                    "pod {}'s labels are its Pod object's: change them with kubectl label",
                    req.pod
                )),
            });
        }
        req.vnid = from_api.vnid;
        req.labels = from_api.labels;
    }
    let pod = req.pod.clone();
    let ofport = s.node.pod_add(&req.into()).await?;
    if let Some(following) = &s.following {
        following.attached(&pod);
    }
    Ok(Json(wire::PodAdded { ofport }))
}

/// One pod's status (`?pod=NS/NAME`), or every pod of the node.
async fn pods(
    State(s): Shared,
    query: Result<Query<wire::PodQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let Query(query) = query.map_err(bad_query)?;
    Ok(match query.pod {
        Some(pod) => Json(wire::PodStatus::from(s.node.pod_status(&pod).await?)).into_response(),
        None => {
            let pods = s
                .node
                .pods()
                .await?
                .into_iter()
                .map(|(pod, attachment)| wire::LocalPod { pod, attachment })
                .collect();
            Json(wire::Pods { pods }).into_response()
        }
    })
}

async fn pod_update(State(s): Shared, Body(req): Body<wire::PodUpdate>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api(
        "a pod's VNID is its namespace's NetNamespace: change the NetNamespace with kubectl",
    )?;
    s.node.pod_update(&req.pod, req.sandbox, req.vnid).await?;
    done()
}

async fn pod_del(State(s): Shared, Body(req): Body<wire::PodDel>) -> ApiResult<wire::Ok> {
    s.node.pod_del(&req.pod, req.veth).await?;
    done()
}

async fn pod_bandwidth(
    State(s): Shared,
    Body(req): Body<wire::PodBandwidth>,
) -> ApiResult<wire::Ok> {
    s.node
        .pod_bandwidth(&req.pod, req.ingress_bps, req.egress_bps)
        .await?;
    done()
}

async fn hostsubnet_add(State(s): Shared, Body(req): Body<HostSubnet>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change HostSubnets with kubectl")?;
    s.node.hostsubnet_add(&req).await?;
    done()
}

async fn hostsubnet_del(
    State(s): Shared,
    Body(req): Body<wire::HostSubnetDel>,
) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change HostSubnets with kubectl")?;
    s.node.hostsubnet_del(req.host_ip, req.subnet).await?;
    done()
}

async fn service_add(State(s): Shared, Body(req): Body<Service>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change Services with kubectl")?;
    s.node.service_add(&req).await?;
    done()
}

async fn service_del(State(s): Shared, Body(req): Body<wire::ServiceDel>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change Services with kubectl")?;
    s.node.service_del(req.ip).await?;
    done()
}

async fn multicast_local(
    State(s): Shared,
    Body(req): Body<wire::MulticastLocal>,
) -> ApiResult<wire::Ok> {
    s.node
        .multicast_local(req.vnid, req.enabled, &req.ofports)
        .await?;
    done()
}

async fn multicast_vxlan(
    State(s): Shared,
    Body(req): Body<wire::MulticastVxlan>,
) -> ApiResult<wire::Ok> {
    s.node.multicast_vxlan(&req.remotes).await?;
    done()
}

async fn egress_set(State(s): Shared, Body(req): Body<wire::EgressSet>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change EgressNetworkPolicies with kubectl")?;
    s.node
        .egress_set(req.vnid, &req.namespaces, &req.policies)
        .await?;
    done()
}

async fn namespace_set(State(s): Shared, Body(req): Body<wire::Namespace>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change Namespaces (labels) and NetNamespaces (VNIDs) with kubectl")?;
    s.node.namespace_set(req).await?;
    done()
}

async fn namespace_del(
    State(s): Shared,
    Body(req): Body<wire::NamespaceDel>,
) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change Namespaces and NetNamespaces with kubectl")?;
    s.node.namespace_del(&req.name).await?;
    done()
}

async fn namespaces(State(s): Shared) -> ApiResult<wire::Namespaces> {
    let namespaces = s.node.namespaces().await?;
    Ok(Json(wire::Namespaces { namespaces }))
}

async fn pod_labels(State(s): Shared, Body(req): Body<wire::PodLabels>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change pods' labels with kubectl label")?;
    s.node.pod_labels(req.pod, req.edit).await?;
    done()
}

async fn pod_ports(State(s): Shared, Body(req): Body<wire::PodPorts>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("pods' named ports come from their containers' ports in the Pod object")?;
    s.node.pod_ports(req.pod, req.ports).await?;
    done()
}

async fn namespace_labels(
    State(s): Shared,
    Body(req): Body<wire::NamespaceLabels>,
) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change namespaces' labels with kubectl label")?;
    s.node.namespace_labels(&req.name, req.edit).await?;
    done()
}

async fn remote_pod_set(State(s): Shared, Body(req): Body<wire::KnownPod>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("other nodes' pods come from their Pod objects")?;
    s.node.remote_pod_set(req.pod, req.info).await?;
    done()
}

async fn remote_pod_del(
    State(s): Shared,
    Body(req): Body<wire::RemotePodDel>,
) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("other nodes' pods come from their Pod objects")?;
    s.node.remote_pod_del(req.pod).await?;
    done()
}

async fn remote_pods(State(s): Shared) -> ApiResult<wire::RemotePods> {
    let remote_pods = s.node.remote_pods().await?;
    Ok(Json(wire::RemotePods { remote_pods }))
}

/// The body is parsed by the policy model itself, so that every refusal names its field
/// (`spec.ingress[0].ports[1].port: …`).
async fn netpol_apply(State(s): Shared, body: axum::body::Bytes) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change NetworkPolicies with kubectl")?;
    let policy = sdn::policy::networkpolicy::parse_netpol(&body).map_err(sdn::Error::from)?;
    s.node.netpol_apply(policy).await?;
    done()
}

async fn netpol_del(State(s): Shared, Body(req): Body<wire::NetPolDel>) -> ApiResult<wire::Ok> {
    s.owned_by_the_api("change NetworkPolicies with kubectl")?;
    s.node.netpol_del(&req.namespace, &req.name).await?;
    done()
}

const ADMIN_POLICIES_WITH_KUBECTL: &str =
    "change AdminNetworkPolicies and the BaselineAdminNetworkPolicy with kubectl";

async fn admin_policy_apply(State(s): Shared, body: axum::body::Bytes) -> ApiResult<wire::Ok> {
    s.owned_by_the_api(ADMIN_POLICIES_WITH_KUBECTL)?;
    let policy = sdn::policy::admin::parse_admin_policy(&body).map_err(sdn::Error::from)?;
    s.node.admin_apply(policy).await?;
    done()
}

async fn admin_policy_del(
    State(s): Shared,
    Body(req): Body<wire::AdminPolicyDel>,
) -> ApiResult<wire::Ok> {
    s.owned_by_the_api(ADMIN_POLICIES_WITH_KUBECTL)?;
    s.node.admin_del(req.kind.short(), &req.name).await?;
    done()
}

async fn node_set(State(s): Shared, Body(req): Body<wire::ClusterNode>) -> ApiResult<wire::Ok> {
    let node = sdn::NodeInfo {
        ips: req.ips,
        labels: req.labels,
    };
    s.node.node_set(req.name, node).await?;
    done()
}

async fn node_del(State(s): Shared, Body(req): Body<wire::ClusterNodeDel>) -> ApiResult<wire::Ok> {
    s.node.node_del(&req.name).await?;
    done()
}

async fn nodes(State(s): Shared) -> ApiResult<wire::ClusterNodes> {
    let nodes = s
        .node
        .nodes()
        .await?
        .into_iter()
        .map(|(name, info)| wire::ClusterNode {
            name,
            ips: info.ips,
            labels: info.labels,
        })
        .collect();
    Ok(Json(wire::ClusterNodes { nodes }))
}

async fn admin_policies(State(s): Shared) -> ApiResult<wire::AdminPolicies> {
    let admin_policies = s.node.admin_policies().await?;
    Ok(Json(wire::AdminPolicies { admin_policies }))
}

async fn netpols(
    State(s): Shared,
    query: Result<Query<wire::NetPolsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<wire::NetPols> {
    let Query(query) = query.map_err(bad_query)?;
    let netpols = s.node.netpols().await?;
    let rule_stats = if query.stats {
        Some(s.node.rule_counters().await?)
    } else {
        None
    };
    Ok(Json(wire::NetPols {
        netpols,
        rule_stats,
    }))
}

async fn netpol_explain(
    State(s): Shared,
    query: Result<Query<wire::ExplainQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<wire::Explanation> {
    let Query(query) = query.map_err(bad_query)?;
    let port: wire::PortProto = query
        .port
        .parse()
        .map_err(|e: sdn::labels::FieldError| sdn::Error::from(sdn::CoreError::Field(e)))?;
    let explanation = s.node.explain(query.from, query.to, port).await?;
    Ok(Json(explanation))
}

async fn unused_vnids(State(s): Shared) -> ApiResult<wire::UnusedVnids> {
    let vnids = s.node.unused_vnids().await?;
    Ok(Json(wire::UnusedVnids { vnids }))
}

async fn dump_flows(
    State(s): Shared,
    query: Result<Query<wire::FlowsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<wire::Flows> {
    let Query(query) = query.map_err(bad_query)?;
    let flows = s.node.dump_flows(query.table).await?;
    Ok(Json(wire::Flows { flows }))
}

async fn trace_packet(
    State(s): Shared,
    query: Result<Query<wire::TraceQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<wire::Trace> {
    let Query(query) = query.map_err(bad_query)?;
    let state = s.node.state().await?;
    let bridge = s.node.status().bridge;
    let trace = trace::trace_query(&state, &bridge, &s.vswitchd_ctl, &query)
        .await
        .map_err(|err| ApiError {
            status: trace_status(&err),
            message: err.to_string(),
        })?;
    Ok(Json(trace))
}

/// The HTTP status of a failed trace: the question's fault, or ovs-vswitchd's, or ours.
fn trace_status(err: &TraceError) -> StatusCode {
    use trace::QueryError;
    match err {
        TraceError::Query(QueryError::NotSetUp) => StatusCode::CONFLICT,
        TraceError::Query(QueryError::UnknownPod(_)) => StatusCode::NOT_FOUND,
        TraceError::Query(_) | TraceError::Packet(_) => StatusCode::BAD_REQUEST,
        TraceError::Refused { .. } | TraceError::Unixctl(_) => StatusCode::BAD_GATEWAY,
        TraceError::Parse(_) | TraceError::Owners(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn bad_query(rejection: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError {
        status: StatusCode::BAD_REQUEST,
        message: format!("bad query: {}", rejection.body_text()),
    }
}

async fn render_metrics(State(s): Shared) -> Response {
    let mut text = s.node.metrics().render(&s.node.status());
    if let Some(following) = &s.following {
        text.push_str(&following.status().render_metrics());
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn not_found(request: Request) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: format!(
            "no such endpoint: {} {}",
            request.method(),
            request.uri().path()
        ),
    }
}

#[cfg(test)]
mod tests;
