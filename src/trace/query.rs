//! The question an operator asks (`ofnode trace --from POD --to IP …`, `GET /v1/trace`) turned
//! into the packet to trace, from what the node knows: the pod's port, MAC and IP.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::packet::{IpProto, Packet, Payload, DEFAULT_TTL};
use crate::sdn::state::NodeState;
use crate::sdn::types::Pod;
use crate::value::PodKey;

/// The source port of a traced TCP or UDP packet (any ephemeral port: no flow of br0 matches
/// on it).
pub const SOURCE_PORT: u16 = 40000;

/// `GET /v1/trace?from=…&to=…&proto=…&dport=…`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceQuery {
    /// A pod of this node: its IP, its sandbox id (or a unique prefix of it, 6 hex digits at
    /// least), or its host veth's name.
    pub from: String,
    /// The destination; the node's gateway (tun0) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Ipv4Addr>,
    /// tcp, udp or icmp (an echo request); tcp when `dport` is given, else icmp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<Proto>,
    /// The destination port (tcp and udp only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
}

/// The shortest sandbox id prefix taken (as `docker` takes short ids, but long enough not to
/// be matched by a pod IP or a veth name by accident).
const MIN_SANDBOX_PREFIX: usize = 6;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the node is not set up: there is nothing to trace")]
    NotSetUp,
    #[error(
        "--from {0:?} is not a pod of this node (give its IP, its sandbox id or a unique prefix \
         of it of 6 hex digits or more, or its host veth)"
    )]
    UnknownPod(String),
    #[error("--from {from:?} matches {count} pods by sandbox id prefix: give more digits")]
    Ambiguous { from: String, count: usize },
    #[error("--dport {0} needs --proto tcp or udp (an ICMP packet has no ports)")]
    PortWithIcmp(u16),
    #[error("--proto {0} needs --dport N (the service or pod port the packet goes to)")]
    NoPort(&'static str),
}

impl TraceQuery {
    /// The packet the query describes, leaving its pod.
    pub fn packet(&self, state: &NodeState) -> Result<Packet, QueryError> {
        let setup = state.setup.as_ref().ok_or(QueryError::NotSetUp)?;
        let pod = self.source_pod(state)?;
        let dst = self.to.unwrap_or(setup.gateway);
        let proto = match (self.proto, self.dport) {
            (None | Some(Proto::Icmp), None) => IpProto::PING,
            (Some(Proto::Icmp), Some(port)) => return Err(QueryError::PortWithIcmp(port)),
            (None | Some(Proto::Tcp), Some(dst_port)) => IpProto::Tcp {
                src_port: SOURCE_PORT,
                dst_port,
            },
            (Some(Proto::Udp), Some(dst_port)) => IpProto::Udp {
                src_port: SOURCE_PORT,
                dst_port,
            },
            (Some(Proto::Tcp), None) => return Err(QueryError::NoPort("tcp")),
            (Some(Proto::Udp), None) => return Err(QueryError::NoPort("udp")),
        };
        Ok(Packet {
            in_port: u32::from(pod.ofport),
            dl_src: Some(pod.mac),
            dl_dst: None,
            tunnel: None,
            payload: Payload::Ip {
                src: pod.ip,
                dst,
                ttl: DEFAULT_TTL,
                proto,
            },
        })
    }

    /// The pod `from` names: by `namespace/name`, IP, veth name, or sandbox id (prefix).
    fn source_pod<'a>(&self, state: &'a NodeState) -> Result<&'a Pod, QueryError> {
        let from = self.from.trim();
        let pods = || state.pods.values();
        if let Ok(key) = from.parse::<PodKey>() {
            return state
                .pods
                .get(&key)
                .ok_or_else(|| QueryError::UnknownPod(from.to_string()));
        }
        if let Ok(ip) = from.parse::<Ipv4Addr>() {
            return pods()
                .find(|pod| pod.ip == ip)
                .ok_or_else(|| QueryError::UnknownPod(from.to_string()));
        }
        if let Some(pod) = pods().find(|pod| pod.veth.as_ref().is_some_and(|v| v.as_str() == from))
        {
            return Ok(pod);
        }
        let hex = from.to_ascii_lowercase();
        let is_prefix =
            hex.len() >= MIN_SANDBOX_PREFIX && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_prefix {
            return Err(QueryError::UnknownPod(from.to_string()));
        }
        let matching: Vec<&Pod> = pods()
            .filter(|pod| pod.sandbox.to_string().starts_with(&hex))
            .collect();
        match matching[..] {
            [pod] => Ok(pod),
            [] => Err(QueryError::UnknownPod(from.to_string())),
            _ => Err(QueryError::Ambiguous {
                from: from.to_string(),
                count: matching.len(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> NodeState {
        let pod = |n: u8, sandbox: &str| {
            json!({"veth": format!("veth{n}"), "ip": format!("10.128.0.{n}"),
                   "mac": format!("0a:58:0a:80:00:{n:02x}"), "sandbox": sandbox.repeat(32),
                   "vnid": 10, "ofport": n})
        };
        serde_json::from_value(json!({
            "setup": {"cluster_network": "10.128.0.0/14", "service_network": "172.30.0.0/16",
                      "local_subnet": "10.128.0.0/23", "gateway": "10.128.0.1",
                      "mode": "multitenant"},
            "pods": {"10.128.0.3": pod(3, "ab"), "10.128.0.4": pod(4, "ac")},
        }))
        .unwrap()
    }

    fn query(from: &str) -> TraceQuery {
        TraceQuery {
            from: from.into(),
            ..TraceQuery::default()
        }
    }

    #[test]
    fn a_pod_is_found_by_ip_veth_or_sandbox_prefix() {
        let state = state();
        for from in ["10.128.0.3", "veth3", "ababab", &"ab".repeat(32), "ABABAB"] {
            let packet = query(from).packet(&state).unwrap();
            assert_eq!(packet.in_port, 3, "{from}");
            assert_eq!(packet.dl_src, Some("0a:58:0a:80:00:03".parse().unwrap()));
        }
        let err = query("a").packet(&state).unwrap_err();
        assert_eq!(err, QueryError::UnknownPod("a".into()));
        for unknown in ["10.128.0.9", "veth9", "abcdef", "a"] {
            let err = query(unknown).packet(&state).unwrap_err().to_string();
            assert!(err.contains("is not a pod of this node"), "{err}");
        }
    }

    #[test]
    fn a_short_prefix_or_two_matches_is_refused() {
        let mut state = state();
        let mut twin = state
            .pods
            .values()
            .find(|p| p.ip == std::net::Ipv4Addr::new(10, 128, 0, 3))
            .unwrap()
            .clone();
        twin.sandbox = format!("abab{}", "cd".repeat(30)).parse().unwrap();
        twin.ip = "10.128.0.5".parse().unwrap();
        state.pods.insert("x/twin".parse().unwrap(), twin);
        // abab… then cd: only the first pod's id starts with ababab.
        assert_eq!(query("ababab").packet(&state).unwrap().in_port, 3);
        let err = query("abab").packet(&state).unwrap_err();
        assert_eq!(err, QueryError::UnknownPod("abab".into()));
        let mut third = state
            .pods
            .values()
            .find(|p| p.ip == std::net::Ipv4Addr::new(10, 128, 0, 5))
            .unwrap()
            .clone();
        third.sandbox = format!("ababab{}", "ef".repeat(29)).parse().unwrap();
        third.ip = "10.128.0.6".parse().unwrap();
        state.pods.insert("x/third".parse().unwrap(), third);
        let err = query("ababab").packet(&state).unwrap_err();
        assert_eq!(
            err,
            QueryError::Ambiguous {
                from: "ababab".into(),
                count: 2
            }
        );
    }

    #[test]
    fn the_protocol_follows_the_port_and_defaults_to_a_ping_to_the_gateway() {
        let state = state();
        let packet = query("veth3").packet(&state).unwrap();
        let Payload::Ip { dst, proto, .. } = packet.payload else {
            panic!("{packet:?}");
        };
        assert_eq!(dst, Ipv4Addr::new(10, 128, 0, 1));
        assert_eq!(proto, IpProto::PING);
        let with = |proto, dport| TraceQuery {
            to: Some(Ipv4Addr::new(172, 30, 0, 10)),
            proto,
            dport,
            ..query("veth3")
        };
        let proto_of = |q: TraceQuery| match q.packet(&state).map(|p| p.payload) {
            Ok(Payload::Ip { proto, .. }) => Ok(proto),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            proto_of(with(None, Some(80))),
            Ok(IpProto::Tcp {
                src_port: SOURCE_PORT,
                dst_port: 80
            })
        );
        assert_eq!(
            proto_of(with(Some(Proto::Udp), Some(53))),
            Ok(IpProto::Udp {
                src_port: SOURCE_PORT,
                dst_port: 53
            })
        );
        assert_eq!(
            proto_of(with(Some(Proto::Icmp), Some(53))),
            Err(QueryError::PortWithIcmp(53))
        );
        assert_eq!(
            proto_of(with(Some(Proto::Udp), None)),
            Err(QueryError::NoPort("udp"))
        );
        let not_set_up = NodeState::default();
        assert_eq!(
            query("veth3").packet(&not_set_up),
            Err(QueryError::NotSetUp)
        );
    }
}
