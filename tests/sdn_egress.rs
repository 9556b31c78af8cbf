//! Egress network policy: every branch of the seed's UpdateEgressNetworkPolicyRules and its
//! errors, DNS names resolved through a DNS server the test runs on loopback (never the host's
//! resolver), and flows that follow changed DNS answers. The seed's temporary cookie=1 drop
//! flow must never show up: each update is one atomic bundle.

mod sdn_common;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};
use ofnode::api::server::status_of;
use ofnode::sdn::{CoreError, EgressNetworkPolicy, Error, Mode, Vnid};
use sdn_common::*;

fn vnid(v: u32) -> Vnid {
    Vnid::new(v).unwrap()
}

fn policy(namespace: &str, name: &str, rules: &str) -> EgressNetworkPolicy {
    let text =
        format!(r#"{{"namespace":"{namespace}","name":"{name}","spec":{{"egress":[{rules}]}}}}"#);
    serde_json::from_str(&text).unwrap()
}

fn ns(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

const CIDR_RULES: &str = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.0/24"}},
    {"type":"Deny","to":{"cidrSelector":"198.51.100.0/24"}},
    {"type":"Allow","to":{"cidrSelector":"0.0.0.0/0"}},
    {"type":"Deny","to":{"cidrSelector":"0.0.0.0/32"}}"#;

/// CIDR_RULES for VNID 42, as ovs-ofctl prints the seed's flows.
const CIDR_FLOWS_42: &[&str] = &[
    "table=100, priority=4,ip,reg0=0x2a,nw_dst=192.0.2.0/24 actions=output:2",
    "table=100, priority=3,ip,reg0=0x2a,nw_dst=198.51.100.0/24 actions=drop",
    "table=100, priority=2,ip,reg0=0x2a actions=output:2",
    "table=100, priority=1,ip,reg0=0x2a actions=drop",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cidr_rules_replacement_and_removal() {
    let f = Fixture::set_up(Mode::Multitenant).await;
    let base = base_flows(Mode::Multitenant);
    f.node
        .egress_set(vnid(42), &ns(&["ns1"]), &[policy("ns1", "p1", CIDR_RULES)])
        .await
        .unwrap();
    let with_42 = with(&base, CIDR_FLOWS_42);
    assert_flows(&f.ovs, &with_42);

    // Another VNID's policy lives beside it.
    let other = r#"{"type":"Deny","to":{"cidrSelector":"203.0.113.0/24"}}"#;
    f.node
        .egress_set(vnid(43), &ns(&["ns2"]), &[policy("ns2", "p", other)])
        .await
        .unwrap();
    let other_flow = "table=100, priority=1,ip,reg0=0x2b,nw_dst=203.0.113.0/24 actions=drop";
    assert_flows(&f.ovs, &with(&with_42, &[other_flow]));

    // A new policy for VNID 42 replaces the old flows in one bundle (no cookie=1 drop left).
    let replacement = r#"{"type":"Allow","to":{"cidrSelector":"192.0.2.128/25"}},
        {"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;
    f.node
        .egress_set(vnid(42), &ns(&["ns1"]), &[policy("ns1", "p2", replacement)])
        .await
        .unwrap();
    let replaced = [
        "table=100, priority=2,ip,reg0=0x2a,nw_dst=192.0.2.128/25 actions=output:2",
        "table=100, priority=1,ip,reg0=0x2a actions=drop",
        other_flow,
    ];
    assert_flows(&f.ovs, &with(&base, &replaced));

    // No policies: the VNID's flows go.
    f.node
        .egress_set(vnid(42), &ns(&["ns1"]), &[])
        .await
        .unwrap();
    assert_flows(&f.ovs, &with(&base, &[other_flow]));
    f.node
        .egress_set(vnid(43), &ns(&["ns2"]), &[])
        .await
        .unwrap();
    assert_flows(&f.ovs, &base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_policies_and_their_errors() {
    let f = Fixture::set_up(Mode::Multitenant).await;
    let base = base_flows(Mode::Multitenant);
    let rules = r#"{"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;

    // The global VNID: refused, nothing changes.
    let err = f
        .node
        .egress_set(vnid(0), &ns(&["default"]), &[policy("default", "p", rules)])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "EgressNetworkPolicy in global network namespace is not allowed (default:p); ignoring"
    );
    assert!(matches!(
        err,
        Error::Core(CoreError::Policy { applied: false, .. })
    ));
    assert_eq!(status_of(&err).as_u16(), 422);
    assert_flows(&f.ovs, &base);

    // Shared namespaces: all traffic of the VNID dropped, and the error says so.
    let err = f
        .node
        .egress_set(vnid(7), &ns(&["a", "b"]), &[policy("a", "p", rules)])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "EgressNetworkPolicy not allowed in shared NetNamespace (a, b); dropping all traffic"
    );
    assert!(matches!(
        err,
        Error::Core(CoreError::Policy { applied: true, .. })
    ));
    let drop_7 = "table=100, priority=1,reg0=0x7 actions=drop";
    assert_flows(&f.ovs, &with(&base, &[drop_7]));

    // Several policies in one namespace: the same.
    let err = f
        .node
        .egress_set(
            vnid(8),
            &ns(&["c"]),
            &[policy("c", "p1", rules), policy("c", "p2", rules)],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "multiple EgressNetworkPolicies in same network namespace (c:p1, c:p2) is not allowed; dropping all traffic"
    );
    let drop_8 = "table=100, priority=1,reg0=0x8 actions=drop";
    assert_flows(&f.ovs, &with(&base, &[drop_7, drop_8]));

    // A valid policy then replaces the drop.
    f.node
        .egress_set(vnid(7), &ns(&["a"]), &[policy("a", "p", rules)])
        .await
        .unwrap();
    let deny_7 = "table=100, priority=1,ip,reg0=0x7 actions=drop";
    assert_flows(&f.ovs, &with(&base, &[deny_7, drop_8]));

    // A policy whose rule names both a CIDR and a DNS name is bad input: nothing changes.
    let both = r#"{"type":"Deny","to":{"cidrSelector":"0.0.0.0/0","dnsName":"x.test"}}"#;
    let err = f
        .node
        .egress_set(vnid(9), &ns(&["d"]), &[policy("d", "p", both)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Core(CoreError::Invalid(_))), "{err}");
    assert_flows(&f.ovs, &with(&base, &[deny_7, drop_8]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_dns_resolver_drops_all_traffic() {
    // The fixture's resolver has no servers: the seed's CheckDNSResolver failure.
    let f = Fixture::set_up(Mode::Subnet).await;
    let base = base_flows(Mode::Subnet);
    let rules = r#"{"type":"Allow","to":{"dnsName":"allowed.ofnode.test"}},
        {"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;
    let err = f
        .node
        .egress_set(vnid(5), &ns(&["ns5"]), &[policy("ns5", "p", rules)])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "DNS resolver failed: no name servers are configured, dropping all traffic for namespace: \"ns5\""
    );
    assert_flows(
        &f.ovs,
        &with(&base, &["table=100, priority=1,reg0=0x5 actions=drop"]),
    );
    // Without DNS names the resolver is not needed.
    let cidr_only = r#"{"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;
    f.node
        .egress_set(vnid(5), &ns(&["ns5"]), &[policy("ns5", "p", cidr_only)])
        .await
        .unwrap();
    assert_flows(
        &f.ovs,
        &with(&base, &["table=100, priority=1,ip,reg0=0x5 actions=drop"]),
    );
}

/// A DNS server on 127.0.0.1 answering A queries from a table the test changes, with a TTL of
/// one second; unknown names get NXDOMAIN.
struct FakeDns {
    addr: SocketAddr,
    answers: Arc<Mutex<HashMap<String, Vec<Ipv4Addr>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeDns {
    async fn start() -> FakeDns {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let answers: Arc<Mutex<HashMap<String, Vec<Ipv4Addr>>>> = Arc::default();
        let table = answers.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 1500];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let reply = answer(&query, &table.lock().unwrap());
                let _ = socket.send_to(&reply.to_vec().unwrap(), peer).await;
            }
        });
        FakeDns {
            addr,
            answers,
            task,
        }
    }

    fn set(&self, name: &str, ips: &[&str]) {
        let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
        self.answers.lock().unwrap().insert(name.to_string(), ips);
    }
}

impl Drop for FakeDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(query: &Message, table: &HashMap<String, Vec<Ipv4Addr>>) -> Message {
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_recursion_desired(true)
        .set_recursion_available(true);
    for q in query.queries() {
        reply.add_query(q.clone());
        let name = q.name().to_ascii().trim_end_matches('.').to_string();
        match table.get(&name) {
            Some(ips) if q.query_type() == RecordType::A => {
                for ip in ips {
                    reply.add_answer(Record::from_rdata(q.name().clone(), 1, RData::A(A(*ip))));
                }
            }
            Some(_) => {}
            None => {
                reply.set_response_code(ResponseCode::NXDomain);
            }
        }
    }
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_names_resolve_and_follow_changes() {
    let dns = FakeDns::start().await;
    dns.set("allowed.ofnode.test", &["198.51.100.7", "198.51.100.8"]);
    let server = dns.addr;
    let dns_config = move |_: &ofnode_harness::Ovs, cfg: &mut ofnode::sdn::NodeConfig| {
        cfg.dns.nameservers = Some(vec![server]);
        cfg.dns.min_refresh = Duration::from_secs(1);
    };
    let mut f = Fixture::start_with(dns_config).await;
    f.node.setup(&setup_request(Mode::Subnet)).await.unwrap();
    let base = base_flows(Mode::Subnet);
    let rules = r#"{"type":"Allow","to":{"dnsName":"allowed.ofnode.test"}},
        {"type":"Allow","to":{"dnsName":"missing.ofnode.test"}},
        {"type":"Deny","to":{"cidrSelector":"0.0.0.0/0"}}"#;
    f.node
        .egress_set(vnid(42), &ns(&["ns1"]), &[policy("ns1", "p", rules)])
        .await
        .unwrap();
    // A name that does not resolve contributes no flow (as in the seed).
    let first = [
        "table=100, priority=3,ip,reg0=0x2a,nw_dst=198.51.100.7 actions=output:2",
        "table=100, priority=3,ip,reg0=0x2a,nw_dst=198.51.100.8 actions=output:2",
        "table=100, priority=1,ip,reg0=0x2a actions=drop",
    ];
    assert_flows(&f.ovs, &with(&base, &first));

    // The answer changes: after the TTL the flows follow, in one bundle.
    dns.set("allowed.ofnode.test", &["198.51.100.9"]);
    dns.set("missing.ofnode.test", &["203.0.113.5"]);
    let second = [
        "table=100, priority=3,ip,reg0=0x2a,nw_dst=198.51.100.9 actions=output:2",
        "table=100, priority=2,ip,reg0=0x2a,nw_dst=203.0.113.5 actions=output:2",
        "table=100, priority=1,ip,reg0=0x2a actions=drop",
    ];
    wait_for_flows(&f.ovs, &with(&base, &second), Duration::from_secs(30));
    assert!(
        f.node
            .metrics()
            .dns_changes
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    // The new answers are part of the durable state.
    let state = f.node.state().await.unwrap();
    let entry = &state.egress[&vnid(42)];
    assert_eq!(
        entry.dns["allowed.ofnode.test"],
        vec!["198.51.100.9".parse::<Ipv4Addr>().unwrap()]
    );

    // ofnode restarts; meanwhile the answer changed again. The flows of before come back at
    // once (from the state), then follow the new answer.
    f.node.shutdown().await;
    dns.set("allowed.ofnode.test", &["198.51.100.10"]);
    f.restart_node_with(dns_config).await;
    let third = [
        "table=100, priority=3,ip,reg0=0x2a,nw_dst=198.51.100.10 actions=output:2",
        "table=100, priority=2,ip,reg0=0x2a,nw_dst=203.0.113.5 actions=output:2",
        "table=100, priority=1,ip,reg0=0x2a actions=drop",
    ];
    wait_for_flows(&f.ovs, &with(&base, &third), Duration::from_secs(30));
}
