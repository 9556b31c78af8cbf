//! The client side of the control socket (the CLI's and the CNI plugin's): one typed method per
//! endpoint of `wire::route`, one HTTP/1.1 request per connection over a unix socket.

use std::path::{Path, PathBuf};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::UnixStream;

use super::wire::{self, route, ErrorBody};
use crate::value::Vnid;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the ofnode daemon at {path}: {source} (is `ofnode run` running, and is --api right?)")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("HTTP exchange with the daemon failed: {0}")]
    Http(#[from] hyper::Error),
    /// The daemon took the connection but closed it without an answer: it was stopping (a
    /// request still in the listen queue when it closed its socket) or died mid-request.
    #[error("the ofnode daemon at {path} closed the connection without answering ({source}): it was probably shutting down or stopped; whether the request took effect is unknown (`ofnode status` tells)")]
    NoAnswer { path: PathBuf, source: hyper::Error },
    #[error("could not build the request: {0}")]
    Request(#[from] hyper::http::Error),
    #[error("could not encode the request: {0}")]
    Encode(serde_json::Error),
    #[error("could not encode the query: {0}")]
    Query(serde_urlencoded::ser::Error),
    #[error("the daemon's reply is not what this CLI expects ({status}): {source}: {body}")]
    Decode {
        status: StatusCode,
        source: serde_json::Error,
        body: String,
    },
    /// The daemon refused or failed the operation; `message` is its explanation.
    #[error("{message}")]
    Api { status: StatusCode, message: String },
}

pub struct Client {
    socket: PathBuf,
}

impl Client {
    pub fn new(socket: impl AsRef<Path>) -> Client {
        Client {
            socket: socket.as_ref().to_path_buf(),
        }
    }

    pub async fn setup(&self, req: &wire::SetupRequest) -> Result<wire::SetupOutcome, ClientError> {
        let reply: wire::SetupReply = self.send(Method::POST, route::SETUP, req).await?;
        Ok(reply.outcome)
    }

    pub async fn status(&self) -> Result<wire::StatusReply, ClientError> {
        self.get(route::STATUS).await
    }

    /// Attaches a pod; returns its OpenFlow port.
    pub async fn pod_add(&self, req: &wire::PodAdd) -> Result<u16, ClientError> {
        let reply: wire::PodAdded = self.send(Method::POST, route::PODS, req).await?;
        Ok(reply.ofport)
    }

    pub async fn pod_status(&self, pod: &wire::PodKey) -> Result<wire::PodStatus, ClientError> {
        let query = serde_urlencoded::to_string(wire::PodQuery {
            pod: Some(pod.clone()),
        })
        .map_err(ClientError::Query)?;
        self.get(&format!("{}?{query}", route::PODS)).await
    }

    pub async fn pod_update(&self, req: &wire::PodUpdate) -> Result<(), ClientError> {
        self.act(Method::POST, route::POD_UPDATE, req).await
    }

    pub async fn pod_del(&self, req: &wire::PodDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::PODS, req).await
    }

    pub async fn pod_bandwidth(&self, req: &wire::PodBandwidth) -> Result<(), ClientError> {
        self.act(Method::POST, route::POD_BANDWIDTH, req).await
    }

    pub async fn hostsubnet_add(&self, req: &wire::HostSubnet) -> Result<(), ClientError> {
        self.act(Method::POST, route::HOST_SUBNETS, req).await
    }

    pub async fn hostsubnet_del(&self, req: &wire::HostSubnetDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::HOST_SUBNETS, req).await
    }

    pub async fn service_add(&self, req: &wire::Service) -> Result<(), ClientError> {
        self.act(Method::POST, route::SERVICES, req).await
    }

    pub async fn service_del(&self, req: &wire::ServiceDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::SERVICES, req).await
    }

    pub async fn multicast_local(&self, req: &wire::MulticastLocal) -> Result<(), ClientError> {
        self.act(Method::POST, route::MULTICAST_LOCAL, req).await
    }

    pub async fn multicast_vxlan(&self, req: &wire::MulticastVxlan) -> Result<(), ClientError> {
        self.act(Method::POST, route::MULTICAST_VXLAN, req).await
    }

    pub async fn egress_set(&self, req: &wire::EgressSet) -> Result<(), ClientError> {
        self.act(Method::POST, route::EGRESS, req).await
    }

    pub async fn unused_vnids(&self) -> Result<Vec<Vnid>, ClientError> {
        let reply: wire::UnusedVnids = self.get(route::UNUSED_VNIDS).await?;
        Ok(reply.vnids)
    }

    /// The switch's flows as ovs-ofctl prints them, of one table or all.
    pub async fn flows(&self, table: Option<u8>) -> Result<Vec<String>, ClientError> {
        let path = match table {
            Some(table) => format!("{}?table={table}", route::FLOWS),
            None => route::FLOWS.to_string(),
        };
        let reply: wire::Flows = self.get(&path).await?;
        Ok(reply.flows)
    }

    /// ovs-vswitchd's trace of the packet `query` describes, attributed by the daemon.
    pub async fn trace(&self, query: &wire::TraceQuery) -> Result<wire::Trace, ClientError> {
        let query = serde_urlencoded::to_string(query).map_err(ClientError::Query)?;
        self.get(&format!("{}?{query}", route::TRACE)).await
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> Result<String, ClientError> {
        self.get_text(route::METRICS).await
    }

    pub async fn namespace_set(&self, req: &wire::Namespace) -> Result<(), ClientError> {
        self.act(Method::POST, route::NAMESPACES, req).await
    }

    pub async fn namespace_del(&self, req: &wire::NamespaceDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::NAMESPACES, req).await
    }

    pub async fn namespaces(&self) -> Result<Vec<wire::Namespace>, ClientError> {
        let reply: wire::Namespaces = self.get(route::NAMESPACES).await?;
        Ok(reply.namespaces)
    }

    pub async fn pod_labels(&self, req: &wire::PodLabels) -> Result<(), ClientError> {
        self.act(Method::POST, route::POD_LABELS, req).await
    }

    pub async fn pod_ports(&self, req: &wire::PodPorts) -> Result<(), ClientError> {
        self.act(Method::POST, route::POD_PORTS, req).await
    }

    /// The pods of the node.
    pub async fn pods(&self) -> Result<Vec<wire::LocalPod>, ClientError> {
        let reply: wire::Pods = self.get(route::PODS).await?;
        Ok(reply.pods)
    }

    pub async fn namespace_labels(&self, req: &wire::NamespaceLabels) -> Result<(), ClientError> {
        self.act(Method::POST, route::NAMESPACE_LABELS, req).await
    }

    pub async fn remote_pod_set(&self, req: &wire::KnownPod) -> Result<(), ClientError> {
        self.act(Method::POST, route::REMOTE_PODS, req).await
    }

    pub async fn remote_pod_del(&self, req: &wire::RemotePodDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::REMOTE_PODS, req).await
    }

    pub async fn remote_pods(&self) -> Result<Vec<wire::KnownPod>, ClientError> {
        let reply: wire::RemotePods = self.get(route::REMOTE_PODS).await?;
        Ok(reply.remote_pods)
    }

    /// Applies one NetworkPolicy given as its JSON text (the daemon parses it: its errors name
    /// the field).
    pub async fn netpol_apply(&self, json: Vec<u8>) -> Result<(), ClientError> {
        let bytes = self
            .exchange(Method::POST, route::NETPOLS, Some(json))
            .await?;
        let _: wire::Ok = decode(StatusCode::OK, &bytes)?;
        Ok(())
    }

    pub async fn netpol_del(&self, req: &wire::NetPolDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::NETPOLS, req).await
    }

    /// Applies one AdminNetworkPolicy or BaselineAdminNetworkPolicy given as its JSON or YAML
    /// text (the daemon parses it: its errors name the field).
    pub async fn admin_policy_apply(&self, text: Vec<u8>) -> Result<(), ClientError> {
        let bytes = self
            .exchange(Method::POST, route::ADMIN_POLICIES, Some(text))
            .await?;
        let _: wire::Ok = decode(StatusCode::OK, &bytes)?;
        Ok(())
    }

    pub async fn admin_policy_del(&self, req: &wire::AdminPolicyDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::ADMIN_POLICIES, req).await
    }

    pub async fn admin_policies(&self) -> Result<Vec<wire::AdminSummary>, ClientError> {
        let reply: wire::AdminPolicies = self.get(route::ADMIN_POLICIES).await?;
        Ok(reply.admin_policies)
    }

    pub async fn node_set(&self, req: &wire::ClusterNode) -> Result<(), ClientError> {
        self.act(Method::POST, route::NODES, req).await
    }

    pub async fn node_del(&self, req: &wire::ClusterNodeDel) -> Result<(), ClientError> {
        self.act(Method::DELETE, route::NODES, req).await
    }

    pub async fn nodes(&self) -> Result<Vec<wire::ClusterNode>, ClientError> {
        let reply: wire::ClusterNodes = self.get(route::NODES).await?;
        Ok(reply.nodes)
    }

    pub async fn netpols(&self) -> Result<Vec<wire::NetPolSummary>, ClientError> {
        Ok(self
            .netpols_with(&wire::NetPolsQuery::default())
            .await?
            .netpols)
    }

    /// Which policy rules judge a connection, and which one decides.
    pub async fn netpol_explain(
        &self,
        query: &wire::ExplainQuery,
    ) -> Result<wire::Explanation, ClientError> {
        let query = serde_urlencoded::to_string(query).map_err(ClientError::Query)?;
        self.get(&format!("{}?{query}", route::NETPOL_EXPLAIN))
            .await
    }

    /// The policies, and with `stats` every policy rule's counters.
    pub async fn netpols_with(
        &self,
        query: &wire::NetPolsQuery,
    ) -> Result<wire::NetPols, ClientError> {
        let query = serde_urlencoded::to_string(query).map_err(ClientError::Query)?;
        self.get(&format!("{}?{query}", route::NETPOLS)).await
    }

    /// An operation whose success carries nothing (`{"ok": true}`).
    async fn act<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<(), ClientError> {
        let _: wire::Ok = self.send(method, path, body).await?;
        Ok(())
    }

    pub async fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R, ClientError> {
        let bytes = self.exchange(Method::GET, path, None).await?;
        decode(StatusCode::OK, &bytes)
    }

    /// The raw text of a GET (for /metrics).
    pub async fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let bytes = self.exchange(Method::GET, path, None).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub async fn send<B: Serialize, R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<R, ClientError> {
        let json = serde_json::to_vec(body).map_err(ClientError::Encode)?;
        let bytes = self.exchange(method, path, Some(json)).await?;
        decode(StatusCode::OK, &bytes)
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, ClientError> {
        let stream =
            UnixStream::connect(&self.socket)
                .await
                .map_err(|source| ClientError::Connect {
                    path: self.socket.clone(),
                    source,
                })?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "ofnode");
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let no_answer = |source| ClientError::NoAnswer {
            path: self.socket.clone(),
            source,
        };
        let response = sender.send_request(request).await.map_err(no_answer)?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(no_answer)?
            .to_bytes();
        driver.abort();
        if status.is_success() {
            return Ok(bytes);
        }
        let message = match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(err) => err.error,
            Err(_) => String::from_utf8_lossy(&bytes).trim().to_string(),
        };
        Err(ClientError::Api { status, message })
    }
}

fn decode<R: DeserializeOwned>(status: StatusCode, bytes: &[u8]) -> Result<R, ClientError> {
    serde_json::from_slice(bytes).map_err(|source| ClientError::Decode {
        status,
        source,
        body: String::from_utf8_lossy(bytes).into_owned(),
    })
}
