//! The policy → flows computation, pure: shapes, counts, merging, ids, validation.

mod limits;
pub(crate) mod reference;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ofnode_proto::FlowMod;

use super::model::*;
use super::*;
use crate::sdn::core::tests::setup_request;
use crate::sdn::labels::*;
use crate::sdn::objects::*;
use crate::sdn::produce::netpol::Engine;
use crate::sdn::state::NodeState;
use crate::sdn::store::Store;
use crate::sdn::table::parse_flow;
use crate::sdn::types::Mode;
use crate::value::PodKey;

fn ns(name: &str, vnid: u32, pairs: &[(&str, &str)]) -> Namespace {
    Namespace {
        name: name.into(),
        vnid: Vnid::new(vnid).unwrap(),
        labels: labels(pairs),
        audit: Default::default(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A pod's namespace and labels.
struct PodMeta {
    namespace: String,
    labels: Labels,
}

fn meta(namespace: &str, pairs: &[(&str, &str)]) -> PodMeta {
    PodMeta {
        namespace: namespace.into(),
        labels: labels(pairs),
    }
}

/// A pod of another node.
struct RemotePod {
    ip: Ipv4Addr,
    namespace: String,
    labels: Labels,
}

fn policy(json: &str) -> NetPol {
    parse_netpol(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

fn wrap(namespace: &str, name: &str, spec: &str) -> String {
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"{name}","namespace":"{namespace}","uid":"u","resourceVersion":"1",
              "annotations":{{"kubectl.kubernetes.io/last-applied-configuration":"{{}}"}}}},
            "spec":{spec}}}"#
    )
}

/// The mode's inputs; its flows come from a store and an engine built from them.
struct World {
    setup: SetupRequest,
    namespaces: BTreeMap<String, Namespace>,
    local: Vec<(Ipv4Addr, PodMeta)>,
    remote: BTreeMap<Ipv4Addr, RemotePod>,
    netpols: BTreeMap<String, StoredNetPol>,
}

fn info(ip: Ipv4Addr, labels: &Labels, local: bool) -> (crate::sdn::objects::PodInfo, Ipv4Addr) {
    let info = crate::sdn::objects::PodInfo {
        labels: labels.clone(),
        ips: vec![std::net::IpAddr::V4(ip)],
        local,
        ports: Vec::new(),
    };
    (info, ip)
}

impl World {
    fn new() -> World {
        let mut namespaces = BTreeMap::new();
        for n in [
            ns("x", 11, &[("ns", "x")]),
            ns("y", 12, &[("ns", "y")]),
            ns("z", 13, &[]),
        ] {
            namespaces.insert(n.name.clone(), n);
        }
        World {
            setup: setup_request(Mode::NetworkPolicy),
            namespaces,
            local: Vec::new(),
            remote: BTreeMap::new(),
            netpols: BTreeMap::new(),
        }
    }

    fn pod(&mut self, ip: [u8; 4], m: PodMeta) {
        self.local.push((Ipv4Addr::from(ip), m));
    }

    fn apply(&mut self, p: NetPol) {
        let key = netpol_key(&p.namespace, &p.name);
        let held = self
            .netpols
            .values()
            .flat_map(|s| s.ingress_ids.iter().chain(&s.egress_ids).copied());
        let stored = allocate_ids(p, self.netpols.get(&key), &ConjIds::of(held));
        self.netpols.insert(key, stored);
    }

    /// The store of these inputs, and its engine with every policy applied.
    fn engine(&self) -> (Store, Engine) {
        let pods = self
            .local
            .iter()
            .map(|(ip, m)| (&m.namespace, info(*ip, &m.labels, true)))
            .chain(
                self.remote
                    .values()
                    .map(|r| (&r.namespace, info(r.ip, &r.labels, false))),
            )
            .map(|(namespace, (info, ip))| {
                let name = format!("pod-{}", ip.to_string().replace('.', "-"));
                (PodKey::new(namespace, &name).unwrap(), info)
            })
            .collect();
        let state = NodeState {
            setup: Some(self.setup),
            namespaces: self.namespaces.clone(),
            pod_infos: pods,
            netpols: self.netpols.clone(),
            ..NodeState::default()
        };
        let mut store = Store::new(state);
        let mut engine = Engine::new(self.setup.cluster_network);
        for (key, stored) in &self.netpols {
            let ns = self.namespaces.get(&stored.policy.namespace);
            let (groups, world) = store.groups_and_world();
            engine
                .apply_policy(key, Some(stored), ns, groups, world)
                .unwrap();
        }
        (store, engine)
    }

    /// The flows, each printed as `table=T, priority=P, MATCH, actions=ACTIONS`.
    fn flows(&self) -> Vec<String> {
        let (_, engine) = self.engine();
        let mut flows: Vec<String> = engine.flow_mods().map(|fm| text_of(&fm)).collect();
        flows.sort();
        flows
    }

    /// The flows the policy stored under `key` alone has.
    fn flows_of(&self, key: &str) -> usize {
        let (store, engine) = self.engine();
        engine.summary(key, store.groups(), store.world()).1
    }

    /// Whether `stored` (not applied) fits the flow limit now.
    fn check_flow_limit(&self, stored: &StoredNetPol) -> Result<(), FieldError> {
        let (store, engine) = self.engine();
        let ns = &self.namespaces[&stored.policy.namespace];
        engine.check_policy(
            stored,
            ns,
            store.groups(),
            store.world(),
            super::limits::MAX_FLOWS,
        )
    }
}

/// A flow of the mode in the spelling these tests match against: the match's fields in a
/// fixed order, values as the policy names them.
fn text_of(fm: &FlowMod) -> String {
    use ofnode_proto::{Action, Field, Instruction};
    let entry = |field: Field| fm.match_.get(field);
    let proto = entry(Field::IpProto).map(|e| match e.value {
        6 => "tcp",
        17 => "udp",
        _ => "sctp",
    });
    let mut parts: Vec<String> = Vec::new();
    if entry(Field::ConjId).is_none() {
        parts.push(proto.unwrap_or("ip").to_string());
    }
    for (field, name) in [(Field::Reg(0), "reg0"), (Field::Reg(1), "reg1")] {
        if let Some(e) = entry(field) {
            parts.push(format!("{name}={}", e.value));
        }
    }
    for (field, name) in [(Field::Ipv4Src, "nw_src"), (Field::Ipv4Dst, "nw_dst")] {
        if let Some(e) = entry(field) {
            let ip = Ipv4Addr::from(e.value as u32);
            match e.mask {
                None => parts.push(format!("{name}={ip}")),
                Some(m) => parts.push(format!("{name}={ip}/{}", (m as u32).count_ones())),
            }
        }
    }
    for field in [Field::TcpDst, Field::UdpDst, Field::SctpDst] {
        if let Some(e) = entry(field) {
            let name = format!("{}_dst", proto.unwrap_or("tcp"));
            match e.mask {
                None => parts.push(format!("{name}={}", e.value)),
                Some(m) => parts.push(format!("{name}={:#x}/{:#x}", e.value, m)),
            }
        }
    }
    if let Some(e) = entry(Field::ConjId) {
        parts.push(format!("conj_id={}", e.value));
        parts.push("ip".into());
    }
    let actions = match fm.instructions.first() {
        None => "drop".to_string(),
        Some(Instruction::GotoTable(t)) => format!("goto_table:{t}"),
        Some(Instruction::ApplyActions(actions)) => actions
            .iter()
            .map(|a| match a {
                Action::Conjunction(c) => {
                    format!("conjunction({},{}/{})", c.id, c.clause, c.n_clauses)
                }
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => format!("{other:?}"),
    };
    format!(
        "table={}, priority={}, {}, actions={actions}",
        fm.table_id,
        fm.priority,
        parts.join(", ")
    )
}

fn with<'a>(flows: &'a [String], needle: &str) -> Vec<&'a String> {
    flows.iter().filter(|f| f.contains(needle)).collect()
}

#[test]
fn the_mode_writes_its_own_gateway_flow_and_the_note_is_02_03() {
    let setup = setup_request(Mode::NetworkPolicy);
    assert_eq!(
        crate::sdn::flows::version_note(Mode::NetworkPolicy),
        "02.03"
    );
    let base: Vec<String> = crate::sdn::flows::base_flows(&setup)
        .iter()
        .map(ofnode_proto::format_flow_mod)
        .collect();
    // The seed's own gateway exemption would shadow the mode's committing one.
    assert!(!base.iter().any(|f| f.contains("priority=300,ip,nw_src=")));
    // No flow of the mode drops without `ip` (ARP walks 20 → 21 too).
    assert!(base
        .iter()
        .filter(|f| f.starts_with("table=21,"))
        .all(|f| f.contains("ip") || f.contains("priority=0")));
}

/// P targets, S peers, K ports: P+S+K clause flows and one conj_id flow, never P·S·K.
#[test]
fn one_rule_costs_p_plus_s_plus_k_plus_one() {
    let mut w = World::new();
    for i in 0..5u8 {
        w.pod([10, 128, 0, 10 + i], meta("x", &[("app", "web")]));
    }
    for i in 0..7u8 {
        w.remote.insert(
            Ipv4Addr::new(10, 129, 0, 10 + i),
            RemotePod {
                ip: Ipv4Addr::new(10, 129, 0, 10 + i),
                namespace: "x".into(),
                labels: labels(&[("app", "db")]),
            },
        );
    }
    w.apply(policy(&wrap(
        "x",
        "p",
        r#"{"podSelector":{"matchLabels":{"app":"web"}},
        "ingress":[{"from":[{"podSelector":{"matchLabels":{"app":"db"}}}],
                    "ports":[{"port":80},{"port":81},{"protocol":"UDP","port":53}]}]}"#,
    )));
    let flows = w.flows();
    let clauses = with(&flows, "conjunction(");
    assert_eq!(clauses.len(), 7 + 5 + 3, "{flows:#?}");
    assert_eq!(
        with(&clauses_of(&flows, "1/3"), "reg0=11, nw_src=10.129.0.").len(),
        7
    );
    assert_eq!(
        with(&clauses_of(&flows, "2/3"), "nw_dst=10.128.0.").len(),
        5
    );
    assert_eq!(clauses_of(&flows, "3/3").len(), 3);
    assert_eq!(
        with(&flows, "conj_id=1, ip, actions=goto_table:81").len(),
        1
    );
    // Isolation: one drop per selected pod, below the allows.
    assert_eq!(with(&flows, "priority=100").len(), 5);
    assert_eq!(flows.len(), 7 + 5 + 3 + 1 + 5);
    assert_eq!(w.flows_of("x/p"), flows.len());
}

fn clauses_of(flows: &[String], k_n: &str) -> Vec<String> {
    flows
        .iter()
        .filter(|f| f.contains(&format!(",{k_n})")))
        .cloned()
        .collect()
}

/// Two rules sharing a clause match are one flow with two conjunction actions; deleting one
/// leaves the other's. `10.0.0.5` and `10.0.0.5/32` are one match.
#[test]
fn shared_clause_matches_merge_into_one_flow() {
    let mut w = World::new();
    w.pod([10, 128, 0, 5], meta("x", &[("pod", "a")]));
    let spec = |port: u16| {
        format!(
            r#"{{"podSelector":{{"matchLabels":{{"pod":"a"}}}},"policyTypes":["Egress"],
            "egress":[{{"to":[{{"ipBlock":{{"cidr":"10.128.0.9/32"}}}},{{"podSelector":{{"matchLabels":{{"pod":"b"}}}}}}],"ports":[{{"port":{port}}}]}}]}}"#
        )
    };
    w.pod([10, 128, 0, 9], meta("x", &[("pod", "b")]));
    w.apply(policy(&wrap("x", "p1", &spec(80))));
    w.apply(policy(&wrap("x", "p2", &spec(81))));
    let flows = w.flows();
    // The target clause and the peer clause (ipBlock /32 and the pod's IP) are shared.
    let target = with(&flows, "table=21, priority=200, ip, nw_src=10.128.0.5,");
    assert_eq!(target.len(), 1, "{flows:#?}");
    assert!(
        target[0].ends_with("actions=conjunction(1,1/3),conjunction(2,1/3)"),
        "{}",
        target[0]
    );
    let peer = with(&flows, "ip, nw_dst=10.128.0.9,");
    assert_eq!(peer.len(), 1, "{flows:#?}");
    assert!(
        peer[0].ends_with("conjunction(1,2/3),conjunction(2,2/3)"),
        "{}",
        peer[0]
    );
    w.netpols.remove("x/p1");
    let flows = w.flows();
    let target = with(&flows, "table=21, priority=200, ip, nw_src=10.128.0.5,");
    assert!(
        target[0].ends_with("actions=conjunction(2,1/3)"),
        "{}",
        target[0]
    );
    assert!(with(&flows, "conj_id=1,").is_empty());
}

#[test]
fn a_rule_of_targets_only_is_plain_flows_and_an_empty_peer_set_allows_nothing() {
    let mut w = World::new();
    w.pod([10, 128, 0, 5], meta("x", &[("pod", "a")]));
    w.apply(policy(&wrap(
        "x",
        "allow-all",
        r#"{"podSelector":{},"ingress":[{}]}"#,
    )));
    w.apply(policy(&wrap("x", "nobody", r#"{"podSelector":{},"ingress":[{"from":[{"podSelector":{"matchLabels":{"pod":"nope"}}}]}]}"#)));
    let flows = w.flows();
    assert!(with(&flows, "conjunction(").is_empty(), "{flows:#?}");
    assert_eq!(
        with(
            &flows,
            "table=80, priority=210, ip, reg1=11, actions=goto_table:81"
        )
        .len(),
        1
    );
    assert_eq!(
        with(&flows, "table=80, priority=100, ip, reg1=11, actions=drop").len(),
        1
    );
    assert_eq!(flows.len(), 2);
    // Without local targets a policy costs nothing on this node.
    w.local.clear();
    assert!(w.flows().is_empty());
}

#[test]
fn peers_by_namespace_by_both_and_by_block() {
    let mut w = World::new();
    w.pod([10, 128, 0, 5], meta("x", &[("pod", "a")]));
    w.pod([10, 128, 0, 6], meta("y", &[("pod", "a")]));
    w.pod([10, 128, 0, 7], meta("y", &[("pod", "b")]));
    w.apply(policy(&wrap("x", "p", r#"{"podSelector":{"matchLabels":{"pod":"a"}},"ingress":[
        {"from":[{"namespaceSelector":{"matchLabels":{"ns":"y"}}}]},
        {"from":[{"namespaceSelector":{"matchExpressions":[{"key":"ns","operator":"NotIn","values":["x"]}]},
                  "podSelector":{"matchLabels":{"pod":"b"}}}]},
        {"from":[{"namespaceSelector":{}}]},
        {"from":[{"ipBlock":{"cidr":"192.0.2.0/24","except":["192.0.2.128/25"]}}]}]}"#)));
    let flows = w.flows();
    assert!(
        with(&flows, "ip, reg0=12, actions=conjunction(1,1/2)").len() == 1,
        "{flows:#?}"
    );
    // NotIn matches namespaces without the key too (z), but z has no pod b.
    assert_eq!(
        with(
            &flows,
            "ip, reg0=12, nw_src=10.128.0.7, actions=conjunction(2,1/2)"
        )
        .len(),
        1
    );
    assert_eq!(
        with(&flows, "nw_src=10.128.0.0/14, actions=conjunction(3,1/2)").len(),
        1
    );
    assert_eq!(
        with(
            &flows,
            "ip, nw_src=192.0.2.0/25, actions=conjunction(4,1/2)"
        )
        .len(),
        1
    );
    // The target clause carries all four rules.
    let target = with(&flows, "table=80, priority=200, ip, nw_dst=10.128.0.5,");
    assert!(
        target[0].ends_with(
            "conjunction(1,2/2),conjunction(2,2/2),conjunction(3,2/2),conjunction(4,2/2)"
        ),
        "{}",
        target[0]
    );
}

#[test]
fn egress_peers_are_destination_ips_and_ports_ranges_are_masks() {
    let mut w = World::new();
    w.pod([10, 128, 0, 5], meta("x", &[("pod", "a")]));
    w.remote.insert(
        Ipv4Addr::new(10, 129, 0, 6),
        RemotePod {
            ip: Ipv4Addr::new(10, 129, 0, 6),
            namespace: "y".into(),
            labels: labels(&[("pod", "b")]),
        },
    );
    w.apply(policy(&wrap(
        "x",
        "p",
        r#"{"podSelector":{},"policyTypes":["Egress"],"egress":[
        {"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"y"}}}],
         "ports":[{"protocol":"UDP","port":80,"endPort":81},{"protocol":"SCTP"}]}]}"#,
    )));
    let flows = w.flows();
    assert_eq!(
        with(
            &flows,
            "table=21, priority=200, ip, reg0=11, actions=conjunction(1,1/3)"
        )
        .len(),
        1,
        "{flows:#?}"
    );
    assert_eq!(
        with(&flows, "ip, nw_dst=10.129.0.6, actions=conjunction(1,2/3)").len(),
        1
    );
    assert_eq!(
        with(
            &flows,
            "udp, udp_dst=0x50/0xfffe, actions=conjunction(1,3/3)"
        )
        .len(),
        1
    );
    assert_eq!(
        with(&flows, "priority=200, sctp, actions=conjunction(1,3/3)").len(),
        1
    );
    assert_eq!(
        with(&flows, "table=21, priority=100, ip, reg0=11, actions=drop").len(),
        1
    );
    assert_eq!(
        with(&flows, "conj_id=1, ip, actions=goto_table:30").len(),
        1
    );
}

/// Ids start at 1, survive a replace by position, and a new policy never renumbers others.
#[test]
fn conjunction_ids_are_stable() {
    let mut w = World::new();
    let two = r#"{"podSelector":{},"ingress":[{"ports":[{"port":80}]},{"ports":[{"port":81}]}]}"#;
    w.apply(policy(&wrap("x", "b", two)));
    assert_eq!(w.netpols["x/b"].ingress_ids, vec![1, 2]);
    w.apply(policy(&wrap("x", "a", two)));
    assert_eq!(w.netpols["x/a"].ingress_ids, vec![3, 4]);
    assert_eq!(w.netpols["x/b"].ingress_ids, vec![1, 2]);
    let three = r#"{"podSelector":{},"ingress":[{"ports":[{"port":80}]},{"ports":[{"port":81}]},{}],
        "egress":[{}],"policyTypes":["Ingress","Egress"]}"#;
    w.apply(policy(&wrap("x", "b", three)));
    assert_eq!(w.netpols["x/b"].ingress_ids, vec![1, 2, 5]);
    assert_eq!(w.netpols["x/b"].egress_ids, vec![6]);
    // The stored form round-trips (journal, HA) to the same ids.
    let text = serde_json::to_string(&w.netpols["x/b"]).unwrap();
    assert_eq!(
        serde_json::from_str::<StoredNetPol>(&text).unwrap(),
        w.netpols["x/b"]
    );
}

#[test]
fn policy_types_default_as_the_api_server_does() {
    let p = policy(&wrap("x", "p", r#"{"podSelector":{}}"#));
    assert_eq!(p.policy_types(), vec!["Ingress"]);
    assert_eq!(p.ingress, Some(vec![]));
    let p = policy(&wrap("x", "p", r#"{"podSelector":{},"egress":[{}]}"#));
    assert_eq!(p.policy_types(), vec!["Ingress", "Egress"]);
    let p = policy(&wrap(
        "x",
        "p",
        r#"{"podSelector":{},"policyTypes":["Egress"]}"#,
    ));
    assert_eq!(p.policy_types(), vec!["Egress"]);
    let p = policy(&wrap(
        "x",
        "p",
        r#"{"podSelector":{},"ingress":[{"ports":[{"port":"80"}]}]}"#,
    ));
    assert_eq!(
        p.ingress.unwrap()[0].ports[0],
        Port {
            protocol: L4::Tcp,
            range: Some((80, 80)),
            name: None,
        }
    );
    let p = policy(&wrap(
        "x",
        "p",
        r#"{"podSelector":{},"ingress":[{"ports":[{"port":"http"}]}]}"#,
    ));
    assert_eq!(
        p.ingress.unwrap()[0].ports[0],
        Port {
            protocol: L4::Tcp,
            range: None,
            name: Some("http".into()),
        }
    );
}

/// Each refusal names the field.
#[test]
fn bad_policies_are_refused_naming_the_field() {
    let cases = [
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"port":80},{"port":"HTTP_1"}]}]}"#,
            "spec.ingress[0].ports[1].port",
            "is not a port name",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"port":"http","endPort":90}]}]}"#,
            "spec.ingress[0].ports[0].endPort",
            "named",
        ),
        (
            r#"{"podSelector":{},"bogus":1}"#,
            "spec.bogus",
            "unknown field",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"from":[{"podSelector":{},"ipBlock":{"cidr":"10.0.0.0/8"}}]}]}"#,
            "spec.ingress[0].from[0]",
            "ipBlock and another",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"from":[{}]}]}"#,
            "spec.ingress[0].from[0]",
            "must specify one of",
        ),
        (
            r#"{"podSelector":{"matchExpressions":[{"key":"a","operator":"Near","values":["b"]}]}}"#,
            "spec.podSelector.matchExpressions[0].operator",
            "Near",
        ),
        (
            r#"{"podSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}}"#,
            "spec.podSelector.matchExpressions[0].values",
            "non-empty",
        ),
        (
            r#"{"podSelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["b"]}]}}"#,
            "spec.podSelector.matchExpressions[0].values",
            "must be empty",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"protocol":"ICMP","port":1}]}]}"#,
            "spec.ingress[0].ports[0].protocol",
            "ICMP",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"port":0}]}]}"#,
            "spec.ingress[0].ports[0].port",
            "1 to 65535",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"port":65536}]}]}"#,
            "spec.ingress[0].ports[0].port",
            "1 to 65535",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"endPort":90}]}]}"#,
            "spec.ingress[0].ports[0].endPort",
            "not specified",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"port":90,"endPort":80}]}]}"#,
            "spec.ingress[0].ports[0].endPort",
            "greater than or equal",
        ),
        (
            r#"{"podSelector":{},"ingress":[{"ports":[{"port":90,"endPort":65536}]}]}"#,
            "spec.ingress[0].ports[0].endPort",
            "1 to 65535",
        ),
        (
            r#"{"podSelector":{},"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/16"]}}]}]}"#,
            "spec.egress[0].to[0].ipBlock.except[0]",
            "strict subset",
        ),
        (
            r#"{"podSelector":{},"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.0.0.0/8"]}}]}]}"#,
            "spec.egress[0].to[0].ipBlock.except[0]",
            "strict subset",
        ),
        (
            r#"{"podSelector":{},"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.1/8"}}]}]}"#,
            "spec.egress[0].to[0].ipBlock.cidr",
            "host bits",
        ),
        (
            r#"{"podSelector":{},"policyTypes":["Sideways"]}"#,
            "spec.policyTypes[0]",
            "Sideways",
        ),
        (
            r#"{"podSelector":{"matchLabels":{"-bad":"x"}}}"#,
            "spec.podSelector.matchLabels.-bad",
            "label key",
        ),
    ];
    for (spec, path, reason) in cases {
        let err = parse_netpol(wrap("x", "p", spec).as_bytes()).expect_err(spec);
        assert_eq!(err.path, path, "{spec}: {err}");
        assert!(err.reason.contains(reason), "{spec}: {err}");
    }
    let no_ns = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p"},"spec":{}}"#;
    assert_eq!(
        parse_netpol(no_ns.as_bytes()).unwrap_err().path,
        "metadata.namespace"
    );
    let kind = r#"{"apiVersion":"networking.k8s.io/v1","kind":"Pod","metadata":{"name":"p","namespace":"x"}}"#;
    assert_eq!(parse_netpol(kind.as_bytes()).unwrap_err().path, "kind");
    // status and metadata extras are tolerated.
    let full = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"x",
        "generation":1,"creationTimestamp":"2024-01-01T00:00:00Z","managedFields":[{"manager":"kubectl"}]},"spec":{"podSelector":{}},"status":{}}"#;
    parse_netpol(full.as_bytes()).unwrap();
}

#[test]
fn namespaces_carry_their_name_label() {
    let n = ns("x", 11, &[("kubernetes.io/metadata.name", "x")])
        .validated()
        .unwrap();
    assert!(n.labels.is_empty());
    assert_eq!(n.effective_labels()["kubernetes.io/metadata.name"], "x");
    let err = ns("x", 11, &[("kubernetes.io/metadata.name", "y")])
        .validated()
        .unwrap_err();
    assert_eq!(err.path, "labels.kubernetes.io/metadata.name");
    assert_eq!(ns("X", 1, &[]).validated().unwrap_err().path, "name");
}

/// A namespace of VNID 0 would make `reg0=0` peers, which the nodes' own traffic carries too.
#[test]
fn a_namespace_of_vnid_0_is_refused() {
    let err = ns("x", 0, &[]).validated().unwrap_err();
    assert_eq!(err.path, "vnid");
    assert!(err.reason.contains("nodes' own traffic"), "{err}");
    ns("x", 1, &[]).validated().unwrap();
}

/// SCTP ports and endPort ranges are matched as TCP's and UDP's are (sctp_dst, masks).
#[test]
fn sctp_port_numbers_and_ranges_are_matched() {
    let mut w = World::new();
    w.pod([10, 128, 0, 5], meta("x", &[]));
    w.apply(policy(&wrap(
        "x",
        "p",
        r#"{"podSelector":{},"ingress":[{"ports":[
            {"protocol":"SCTP","port":5000},{"protocol":"SCTP","port":80,"endPort":83}]}]}"#,
    )));
    let flows = w.flows();
    for wanted in [
        "table=80, priority=200, sctp, sctp_dst=5000, actions=conjunction(1,2/2)",
        "table=80, priority=200, sctp, sctp_dst=0x50/0xfffc, actions=conjunction(1,2/2)",
        "table=80, priority=200, ip, reg1=11, actions=conjunction(1,1/2)",
    ] {
        assert_eq!(with(&flows, wanted).len(), 1, "{wanted}: {flows:#?}");
    }
    // As ovs-ofctl prints them: the port is tp_dst, as for TCP and UDP.
    let printed = parse_flow("table=80, priority=200, sctp, sctp_dst=0x50/0xfffc, actions=drop")
        .unwrap()
        .describe();
    assert!(printed.contains("sctp,tp_dst=0x50/0xfffc"), "{printed}");
}
