//! The API without a switch: the status of every node error and trace error, and requests a
//! node refuses before it does anything (bad bodies, queries, routes) through the real socket,
//! against a node whose OVSDB is the scripted fake (`ovsdb/fake.rs`) and whose switch is away.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::UnixStream;

use super::*;
use crate::ovsdb::fake::FakeServer;
use crate::sdn::NodeConfig;
use crate::trace::QueryError;

#[test]
fn node_errors_map_to_their_http_class() {
    let invalid = sdn::Error::from(crate::value::InvalidInput::new("VNID", "x", "no"));
    let refused = |e: sdn::CoreError| sdn::Error::Core(e);
    let cases = [
        (invalid, 400),
        (sdn::Error::not_found("pod"), 404),
        (refused(sdn::CoreError::NotSetUp), 409),
        (
            refused(sdn::CoreError::WrongMode {
                what: "NetworkPolicy objects".into(),
                mode: sdn::Mode::Subnet,
                accepted_in: "networkpolicy".into(),
            }),
            409,
        ),
        (
            refused(sdn::CoreError::Conflict {
                what: "in use".into(),
            }),
            409,
        ),
        (sdn::FieldError::new("spec", "bad").into(), 422),
        (
            refused(sdn::CoreError::Policy {
                message: "m".into(),
                applied: true,
            }),
            422,
        ),
        (crate::openflow::Error::Disconnected.into(), 502),
        (sdn::Error::Replication { reason: "r".into() }, 502),
        (sdn::Error::Shutdown, 503),
        (
            sdn::Error::Standby {
                id: 2,
                active: None,
            },
            503,
        ),
        (
            refused(sdn::CoreError::Flow {
                flow: "f".into(),
                reason: "r".into(),
            }),
            500,
        ),
    ];
    for (err, status) in cases {
        assert_eq!(status_of(&err).as_u16(), status, "{err}");
    }
}

#[test]
fn trace_errors_map_to_the_questions_fault_the_switchs_or_ours() {
    let cases = [
        (TraceError::Query(QueryError::NotSetUp), 409),
        (TraceError::Query(QueryError::UnknownPod("x".into())), 404),
        (TraceError::Query(QueryError::PortWithIcmp(80)), 400),
        (
            TraceError::Packet(crate::trace::PacketError::Vni(1 << 24)),
            400,
        ),
        (
            TraceError::Refused {
                bridge: "br0".into(),
                flow: "f".into(),
                message: "m".into(),
            },
            502,
        ),
        (
            TraceError::Parse(crate::trace::ParseError {
                line: 1,
                text: "t".into(),
                reason: "r",
            }),
            500,
        ),
        (TraceError::Owners("o".into()), 500),
    ];
    for (err, status) in cases {
        assert_eq!(trace_status(&err).as_u16(), status, "{err}");
    }
}

/// A node whose OVSDB is the fake and whose switch never answers, served on a socket.
struct Api {
    _dir: tempfile::TempDir,
    _ovsdb: FakeServer,
    socket: PathBuf,
}

impl Api {
    async fn start(max_body: usize) -> Api {
        let dir = tempfile::tempdir().unwrap();
        let ovsdb = FakeServer::bind();
        let mut cfg = NodeConfig::new(
            ovsdb.target.clone(),
            "unix:/nonexistent/ofnode-api-test.mgmt",
            dir.path().join("state"),
        );
        cfg.manage_host_network = false;
        cfg.pod_counters_interval = Duration::ZERO;
        cfg.connect_timeout = Duration::from_millis(200);
        let (node, peer) = tokio::join!(Node::start(cfg), ovsdb.accept(1));
        let node = node.expect("a node starts against the fake OVSDB");
        tokio::spawn(peer.refuse_the_rest());
        let options = ApiOptions {
            socket: dir.path().join("api.sock"),
            max_body,
            ..ApiOptions::default()
        };
        let listener = bind(&options).await.unwrap();
        let app = router(node, Sources::default(), &options);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Api {
            socket: options.socket,
            _dir: dir,
            _ovsdb: ovsdb,
        }
    }

    /// The status and the JSON body (or the text, when it is not JSON) of one request.
    async fn request(&self, method: &str, path: &str, json: Option<&str>) -> (u16, Value) {
        let stream = UnixStream::connect(&self.socket).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "ofnode");
        if json.is_some() {
            request = request.header("content-type", "application/json");
        }
        let body = Full::new(Bytes::from(json.unwrap_or_default().to_string()));
        let response = sender
            .send_request(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, body)
    }
}

/// The `error` text of an API error body.
fn error_of(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {body}"))
}

const POD: &str = r#"{"veth": "veth3", "ip": "10.128.0.3", "mac": "0a:58:0a:80:00:03",
    "sandbox": "0303030303030303030303030303030303030303030303030303030303030303"}"#;

#[tokio::test]
async fn bad_bodies_are_refused_with_the_field_and_a_json_error() {
    let api = Api::start(4096).await;
    let (status, body) = api.request("POST", route::PODS, Some("{")).await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).starts_with("bad request body: "), "{body}");
    // A value of the wrong kind: the field is named.
    let (status, body) = api
        .request(
            "POST",
            route::PODS,
            Some(&POD.replace("10.128.0.3", "10.128.0.300")),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(error_of(&body).contains("ip"), "{body}");
    // A veth name the kernel would refuse.
    let bad_veth = r#"{"veth": "a name with spaces", "ip": "10.128.0.3"}"#;
    let (status, body) = api.request("DELETE", route::PODS, Some(bad_veth)).await;
    assert_eq!(status, 422, "{body}");
    assert!(error_of(&body).contains("veth"), "{body}");
    // A field the request does not have.
    let (status, body) = api
        .request(
            "POST",
            route::SERVICES,
            Some(r#"{"ip": "172.30.0.1", "vnid": 0, "ports": [], "extra": 1}"#),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(error_of(&body).contains("extra"), "{body}");
    // No JSON content type, and a body over the limit.
    let (status, body) = api.request("POST", route::PODS, None).await;
    assert_eq!(status, 415, "{body}");
    let huge = format!(r#"{{"name": "{}"}}"#, "n".repeat(8192));
    let (status, body) = api.request("POST", route::NAMESPACES, Some(&huge)).await;
    assert_eq!(status, 413, "{body}");
    assert!(error_of(&body).starts_with("bad request body: "), "{body}");
    // A NetworkPolicy is parsed by the mode's model, which names the field by its path.
    let policy = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                        "metadata": {"namespace": "a", "name": "p"},
                        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 0}]}]}});
    let (status, body) = api
        .request("POST", route::NETPOLS, Some(&policy.to_string()))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        error_of(&body).starts_with("spec.ingress[0].ports[0].port"),
        "{body}"
    );
}

#[tokio::test]
async fn bad_queries_and_unknown_routes_are_refused() {
    let api = Api::start(4096).await;
    let (status, body) = api
        .request("GET", &format!("{}?sandbox=xyz", route::PODS), None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).starts_with("bad query: "), "{body}");
    let (status, body) = api
        .request("GET", &format!("{}?table=300", route::FLOWS), None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).starts_with("bad query: "), "{body}");
    let (status, body) = api.request("GET", "/v1/nothing", None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(error_of(&body), "no such endpoint: GET /v1/nothing");
    let (status, _) = api.request("PUT", route::PODS, Some(POD)).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn a_node_not_set_up_answers_status_and_refuses_operations_with_409() {
    let api = Api::start(4096).await;
    let (status, body) = api.request("GET", route::STATUS, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["node"]["setup"], Value::Null, "{body}");
    let service = r#"{"ip": "172.30.0.1", "vnid": 0, "ports": ["tcp/80"]}"#;
    let (status, body) = api.request("POST", route::SERVICES, Some(service)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        error_of(&body),
        "the node is not set up yet; run setup first"
    );
}
