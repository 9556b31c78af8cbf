//! `ofnode netpol explain`: which policy rules judge a connection, in which order, and which
//! one decides, from the node's state alone (no packet is sent). The egress side of the
//! source (when it is a pod of this node) then the ingress side of the destination (when it
//! is), each as the tiers judge a new connection:
//!
//! 1. the AdminNetworkPolicies selecting the pod, by priority, their rules in order: the first
//!    rule whose peers and ports match decides (Allow, Deny) or passes on (Pass);
//! 2. NetworkPolicy: when policies of the pod's namespace select it for that direction, a
//!    rule of any of them that matches allows; none matching, the isolation denies;
//! 3. when no NetworkPolicy isolates the pod, the baseline's rules in order; none matching,
//!    allowed.
//!
//! Rules are named as the audit log, the counters and `ofnode trace` name them
//! (`audit_names.rs`). Replies of an allowed connection are never judged; traffic from this
//! node's own host to its pods is always allowed (kubelet probes) and is not explained here; a
//! service address is refused (its traffic is judged after kube-proxy's DNAT, towards the
//! backend pod). Where several NetworkPolicy rules allow, the first in (policy, rule) order is
//! named; the switch may credit another of them (the verdict is the same).

use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::audit_names::{admin_rule_names, netpol_rule_names, RuleNamer, RuleNames};
use super::Core;
use super::CoreError as Error;
use crate::sdn::audit::{Dir, Verdict};
use crate::sdn::labels::FieldError;
use crate::sdn::objects::{PodInfo, L4};
use crate::sdn::policy::admin::{
    Action, AdminPeer, AdminPolicy, AdminPort, AdminRule, Subject, Tier,
};
use crate::sdn::policy::networkpolicy::model::{Peer, Port, Rule};
use crate::value::PodKey;

/// A destination port and its protocol, as `80/tcp` (`tcp`, `udp` or `sctp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortProto {
    pub port: u16,
    pub protocol: L4,
}

impl FromStr for PortProto {
    type Err = FieldError;

    fn from_str(text: &str) -> Result<PortProto, FieldError> {
        let refuse = |why: &str| FieldError::new("port", format!("{text:?}: {why}"));
        let (port, protocol) = text
            .split_once('/')
            .ok_or_else(|| refuse("expected PORT/PROTOCOL, e.g. 80/tcp"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| refuse("the port is not a number 1-65535"))?;
        let protocol = match protocol.to_ascii_lowercase().as_str() {
            "tcp" => L4::Tcp,
            "udp" => L4::Udp,
            "sctp" => L4::Sctp,
            _ => return Err(refuse("the protocol is not tcp, udp or sctp")),
        };
        Ok(PortProto { port, protocol })
    }
}

impl std::fmt::Display for PortProto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.port, self.protocol.name())
    }
}

/// One end of the connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// `namespace/name`, when a pod the node knows has the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub ip: Ipv4Addr,
    /// A pod of this node: its side is judged here.
    pub local: bool,
}

/// One rule a side met, in the order the tiers judge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Considered {
    #[serde(flatten)]
    pub rule: RuleNames,
    /// Whether the connection matches the rule's peers and ports.
    pub matches: bool,
}

/// One direction's judgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    pub direction: Dir,
    /// The rules of the policies selecting the pod, in the order they are judged (every
    /// NetworkPolicy rule is listed: any one that matches allows).
    pub rules: Vec<Considered>,
    /// The rule (or isolation) that decided; None: no rule did, the connection is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<RuleNames>,
    pub verdict: Verdict,
}

/// The answer of `netpol explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    pub from: End,
    pub to: End,
    #[serde(flatten)]
    pub port: PortProto,
    /// The source's egress (absent: not a pod of this node, judged where it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Side>,
    /// The destination's ingress (absent: not a pod of this node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Side>,
    /// Allow when every side judged here allows.
    pub verdict: Verdict,
    /// Why no side was judged, when none was (a pod's traffic to itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A pod's traffic to its own address stays inside its network namespace.
const TO_ITSELF: &str = "a pod's traffic to its own address never leaves it: no policy judges it";

impl Explanation {
    /// The text for a person: the question and the verdict, then each side judged here with
    /// the rules it met in order (`match` or `-`) and what decided.
    pub fn render(&self) -> String {
        let end = |end: &End| match &end.pod {
            Some(pod) => format!("{pod} ({})", end.ip),
            None => end.ip.to_string(),
        };
        let mut out = format!(
            "{} -> {} {}: {}\n",
            end(&self.from),
            end(&self.to),
            self.port,
            self.verdict.as_str()
        );
        if let Some(note) = &self.note {
            out.push_str(&format!("{note}\n"));
            return out;
        }
        let sides = [
            (&self.egress, &self.from, Dir::Egress),
            (&self.ingress, &self.to, Dir::Ingress),
        ];
        for (side, at, dir) in sides {
            let whose = at.pod.clone().unwrap_or_else(|| at.ip.to_string());
            let Some(side) = side else {
                out.push_str(&format!(
                    "{} of {whose}: not judged on this node\n",
                    dir.as_str()
                ));
                continue;
            };
            out.push_str(&format!("{} of {whose}:\n", dir.as_str()));
            for considered in &side.rules {
                let mark = if considered.matches { "match" } else { "-" };
                out.push_str(&format!("  {mark:<5} {}\n", considered.rule));
            }
            match &side.decided_by {
                Some(by) => out.push_str(&format!("  => {} by {by}\n", side.verdict.as_str())),
                None => out.push_str("  => allow: no policy rule decides\n"),
            }
        }
        out
    }
}

/// The connection as the rules see it.
struct Conn<'a> {
    /// The judged pod's side: its key and info.
    pod: (&'a PodKey, &'a PodInfo),
    /// The other end: its pod when known, and its address.
    peer: Option<(&'a PodKey, &'a PodInfo)>,
    peer_ip: Ipv4Addr,
    /// The destination pod (whose named ports a rule's names resolve on), when known.
    destination: Option<&'a PodInfo>,
    port: PortProto,
}

impl Core {
    /// Explains a connection from pod `from` to pod `to` (or an address) on `port`.
    pub fn explain(&self, from: &PodKey, to: &str, port: PortProto) -> Result<Explanation, Error> {
        let setup = self.require_enforcing("netpol explain")?;
        let namer = self.rule_namer();
        let (from_key, from_info, from_ip) = self.known_pod(from)?;
        let (to_pod, to_ip) = match to.parse::<Ipv4Addr>() {
            Ok(ip) => (
                namer
                    .pod(ip)
                    .and_then(|key| self.state().pod_infos.get_key_value(key)),
                ip,
            ),
            Err(_) => {
                let key: PodKey = to.parse().map_err(|e: crate::value::InvalidInput| {
                    Error::Field(FieldError::new(
                        "to",
                        format!(
                            "{to:?} is neither a pod (NAMESPACE/NAME) nor an IPv4 address: {e}"
                        ),
                    ))
                })?;
                let (key, info, ip) = self.known_pod(&key)?;
                (Some((key, info)), ip)
            }
        };
        if setup.service_network.contains(to_ip) {
            return Err(Error::Field(FieldError::new(
                "to",
                format!(
                    "{to_ip} is a service address ({}): policies judge a service's traffic after kube-proxy's DNAT, so ask about the backend pod",
                    setup.service_network
                ),
            )));
        }
        let to_itself = to_ip == from_ip;
        let destination = to_pod.map(|(_, info)| info);
        let egress = (from_info.local && !to_itself).then(|| {
            self.judge(
                &namer,
                Dir::Egress,
                &Conn {
                    pod: (from_key, from_info),
                    peer: to_pod,
                    peer_ip: to_ip,
                    destination,
                    port,
                },
            )
        });
        let ingress = to_pod
            .filter(|(_, info)| info.local && !to_itself)
            .map(|to_pod| {
                self.judge(
                    &namer,
                    Dir::Ingress,
                    &Conn {
                        pod: to_pod,
                        peer: Some((from_key, from_info)),
                        peer_ip: from_ip,
                        destination,
                        port,
                    },
                )
            });
        let denied = [&egress, &ingress]
            .into_iter()
            .flatten()
            .any(|side| side.verdict == Verdict::Deny);
        Ok(Explanation {
            from: End {
                pod: Some(from_key.to_string()),
                ip: from_ip,
                local: from_info.local,
            },
            to: End {
                pod: to_pod.map(|(key, _)| key.to_string()),
                ip: to_ip,
                local: to_pod.is_some_and(|(_, info)| info.local),
            },
            port,
            egress,
            ingress,
            verdict: if denied {
                Verdict::Deny
            } else {
                Verdict::Allow
            },
            note: to_itself.then(|| TO_ITSELF.to_string()),
        })
    }

    /// A pod the node knows, with its IPv4 address.
    fn known_pod(&self, key: &PodKey) -> Result<(&PodKey, &PodInfo, Ipv4Addr), Error> {
        let (key, info) =
            self.state()
                .pod_infos
                .get_key_value(key)
                .ok_or_else(|| Error::NotFound {
                    what: format!("pod {key} (neither a pod of this node nor one it knows of)"),
                })?;
        let ip = info.ipv4s().next().ok_or_else(|| {
            Error::Field(FieldError::new(
                "pod",
                format!("pod {key} has no IPv4 address yet"),
            ))
        })?;
        Ok((key, info, ip))
    }

    /// One side, through the tiers.
    fn judge(&self, namer: &RuleNamer, dir: Dir, conn: &Conn) -> Side {
        let mut rules = Vec::new();
        let decided = |rules: Vec<Considered>, by: RuleNames| Side {
            direction: dir,
            rules,
            verdict: by.verdict,
            decided_by: Some(by),
        };
        // 1. AdminNetworkPolicies by priority.
        let mut anps: Vec<(u16, &AdminPolicy)> = self
            .state()
            .admin_policies
            .values()
            .filter_map(|p| match p.tier {
                Tier::Admin { priority } => Some((priority, p)),
                Tier::Baseline => None,
            })
            .filter(|(_, p)| self.subject_selects(&p.subject, conn.pod))
            .collect();
        anps.sort_by_key(|(priority, _)| *priority);
        for (_, policy) in anps {
            if let Some(by) = self.admin_side(policy, dir, conn, &mut rules) {
                if by.verdict != Verdict::Pass {
                    return decided(rules, by);
                }
                break;
            }
        }
        // 2. NetworkPolicy.
        let namespace = conn.pod.0.namespace();
        let prefix = format!("{namespace}/");
        let isolating: Vec<_> = self
            .state()
            .netpols
            .range(prefix.clone()..)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .map(|(_, stored)| stored)
            .filter(|stored| stored.policy.pod_selector.matches(&conn.pod.1.labels))
            .filter_map(|stored| {
                let side = match dir {
                    Dir::Ingress => stored.policy.ingress.as_deref(),
                    Dir::Egress => stored.policy.egress.as_deref(),
                };
                side.map(|side| (stored, side))
            })
            .collect();
        if !isolating.is_empty() {
            let mut allowed_by = None;
            for (stored, side) in isolating {
                for (index, rule) in side.iter().enumerate() {
                    let matches = self.netpol_rule_matches(&stored.policy.namespace, rule, conn);
                    let names = netpol_rule_names(stored, dir, index);
                    if matches && allowed_by.is_none() {
                        allowed_by = Some(names.clone());
                    }
                    rules.push(Considered {
                        rule: names,
                        matches,
                    });
                }
            }
            let by = allowed_by.unwrap_or_else(|| namer.isolation_names(namespace, dir));
            return decided(rules, by);
        }
        // 3. The baseline, for pods no NetworkPolicy isolates.
        let baseline = self
            .state()
            .admin_policies
            .values()
            .find(|p| p.tier == Tier::Baseline && self.subject_selects(&p.subject, conn.pod));
        if let Some(by) = baseline.and_then(|p| self.admin_side(p, dir, conn, &mut rules)) {
            return decided(rules, by);
        }
        Side {
            direction: dir,
            rules,
            decided_by: None,
            verdict: Verdict::Allow,
        }
    }

    /// An admin policy's rules of `dir` in order, each recorded in `rules`; the first that
    /// matches (None: none did).
    fn admin_side(
        &self,
        policy: &AdminPolicy,
        dir: Dir,
        conn: &Conn,
        rules: &mut Vec<Considered>,
    ) -> Option<RuleNames> {
        let side = match dir {
            Dir::Ingress => &policy.ingress,
            Dir::Egress => &policy.egress,
        };
        for (index, rule) in side.iter().enumerate() {
            let verdict = match rule.action {
                Action::Allow => Verdict::Allow,
                Action::Deny => Verdict::Deny,
                Action::Pass => Verdict::Pass,
            };
            let names = admin_rule_names(policy, dir, index, verdict)?;
            let matches = self.admin_rule_matches(rule, dir, conn);
            rules.push(Considered {
                rule: names.clone(),
                matches,
            });
            if matches {
                return Some(names);
            }
        }
        None
    }

    fn namespace_labels_match(
        &self,
        selector: &crate::sdn::labels::Selector,
        namespace: &str,
    ) -> bool {
        self.state()
            .namespaces
            .get(namespace)
            .is_some_and(|ns| selector.matches_with(|k| ns.label(k)))
    }

    fn subject_selects(&self, subject: &Subject, (key, info): (&PodKey, &PodInfo)) -> bool {
        match subject {
            Subject::Namespaces(ns) => self.namespace_labels_match(ns, key.namespace()),
            Subject::Pods { namespaces, pods } => {
                self.namespace_labels_match(namespaces, key.namespace())
                    && pods.matches(&info.labels)
            }
        }
    }

    fn admin_rule_matches(&self, rule: &AdminRule, dir: Dir, conn: &Conn) -> bool {
        let peer_matches = rule.peers.iter().any(|peer| match peer {
            AdminPeer::Namespaces(ns) => conn
                .peer
                .is_some_and(|(key, _)| self.namespace_labels_match(ns, key.namespace())),
            AdminPeer::Pods { namespaces, pods } => conn.peer.is_some_and(|(key, info)| {
                self.namespace_labels_match(namespaces, key.namespace())
                    && pods.matches(&info.labels)
            }),
            AdminPeer::Nodes(selector) => {
                dir == Dir::Egress
                    && self.state().nodes.values().any(|node| {
                        selector.matches(&node.labels) && node.ips.contains(&conn.peer_ip)
                    })
            }
            AdminPeer::Networks { ipv4, .. } => {
                dir == Dir::Egress && ipv4.iter().any(|cidr| cidr.contains(conn.peer_ip))
            }
        });
        let port_matches = match &rule.ports {
            None => true,
            Some(ports) => ports.iter().any(|port| match port {
                AdminPort::Number { protocol, port } => {
                    *protocol == conn.port.protocol && *port == conn.port.port
                }
                AdminPort::Range {
                    protocol,
                    start,
                    end,
                } => *protocol == conn.port.protocol && (*start..=*end).contains(&conn.port.port),
                AdminPort::Named(name) => conn.destination.is_some_and(|info| {
                    info.ports.iter().any(|p| {
                        p.name == *name
                            && p.protocol == conn.port.protocol
                            && p.port == conn.port.port
                    })
                }),
            }),
        };
        peer_matches && port_matches
    }

    fn netpol_rule_matches(&self, namespace: &str, rule: &Rule, conn: &Conn) -> bool {
        let peer_matches = match &rule.peers {
            None => true,
            Some(peers) => peers
                .iter()
                .any(|peer| self.netpol_peer_matches(namespace, peer, conn)),
        };
        let port_matches = rule.ports.is_empty()
            || rule
                .ports
                .iter()
                .any(|port| netpol_port_matches(port, conn));
        peer_matches && port_matches
    }

    fn netpol_peer_matches(&self, namespace: &str, peer: &Peer, conn: &Conn) -> bool {
        match peer {
            Peer::Select { pods, namespaces } => conn.peer.is_some_and(|(key, info)| {
                let ns_ok = match namespaces {
                    Some(selector) => self.namespace_labels_match(selector, key.namespace()),
                    None => key.namespace() == namespace,
                };
                ns_ok && pods.as_ref().is_none_or(|s| s.matches(&info.labels))
            }),
            Peer::Block { cidr, except } => {
                cidr.contains(conn.peer_ip) && !except.iter().any(|e| e.contains(conn.peer_ip))
            }
            Peer::Ipv6Block { .. } => false,
        }
    }
}

/// A NetworkPolicy port: by number or range, by protocol alone, or by a name resolved on the
/// destination pod.
fn netpol_port_matches(port: &Port, conn: &Conn) -> bool {
    if port.protocol != conn.port.protocol {
        return false;
    }
    match (&port.name, port.range) {
        (Some(name), _) => conn.destination.is_some_and(|info| {
            info.ports
                .iter()
                .any(|p| p.name == *name && p.protocol == port.protocol && p.port == conn.port.port)
        }),
        (None, Some((first, last))) => (first..=last).contains(&conn.port.port),
        (None, None) => true,
    }
}

#[cfg(test)]
mod tests;
