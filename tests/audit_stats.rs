//! Issue 30: per-rule counters on real Open vSwitch. One node in networkpolicy mode; x/b may
//! reach x/a on TCP 80 (policy `web`, ingress[0]); y/c is denied by x's isolation. Real
//! connections from both must show as packets on the right rules in `ofnode netpol list
//! --stats` (the switch's verdict flow counters, read on demand) and in /metrics'
//! `ofnode_policy_rule_packets_total` (the slow poll). The oracle for the verdicts is the
//! probes themselves: the allowed connection answered, the denied one did not.
//!
//! `ofnode trace` names the rule of the verdict flow a packet meets, by that flow's cookie: on
//! the same world, the allowed and denied packets' rules.
//!
//! `ofnode netpol explain` answers from the node's state without a packet: on the same world,
//! its verdict for every ordered pair of pods and probe must be what real packets get.

mod daemon_common;

use std::path::Path;
use std::time::{Duration, Instant};

use daemon_common::http;
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Mode, Pod};
use ofnode_harness::reachability::{probe_once, Probe, Servers, PROBE_TIMEOUT};
use serde_json::{json, Value};

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `probe` to `to` from `from`'s namespace: whether `to`'s server answered.
fn probe(from: &Pod, to: &Pod, probe: Probe) -> bool {
    let path = from.netns().path();
    let (ip, expect) = (to.ip, to.key());
    std::thread::spawn(move || probe_once(&path, ip, &expect, probe, PROBE_TIMEOUT))
        .join()
        .unwrap_or(false)
}

fn tcp80(from: &Pod, to: &Pod) -> bool {
    probe(from, to, Probe::TCP80)
}

/// The packets `netpol list --stats --json` shows on the rule named by `matches`.
fn listed_packets(cluster: &Cluster, matches: impl Fn(&Value) -> bool) -> Option<u64> {
    let text = cluster
        .node(0)
        .cli(&["netpol", "list", "--stats", "--json"])
        .expect("netpol list --stats");
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    reply["rule_stats"]["rules"]
        .as_array()
        .expect("rule_stats.rules")
        .iter()
        .find(|rule| matches(rule))
        .and_then(|rule| rule["packets"].as_u64())
}

/// The value of the series `line_prefix` on /metrics (None: no such series).
fn metric(api: &Path, series: &str) -> Option<u64> {
    let (code, text) = http(api, "GET", "/metrics", "");
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .map(|v| v.trim().parse().expect("a counter value"))
}

/// Waits until `read` gives a count of at least `min` (the switch credits its datapath's
/// packets to the flows every half second or so; /metrics waits for its poll too).
fn wait_at_least(what: &str, min: u64, read: impl Fn() -> Option<u64>) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = read();
        if seen.is_some_and(|n| n >= min) {
            return seen.unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {seen:?}, expected at least {min}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One node in networkpolicy mode: x/a, x/b (namespace x, VNID 11) and y/c (y, 12), each
/// serving TCP and UDP on 80 and 81; x/web admits x/b to x/a on TCP 80; y/out lets y's pods
/// reach namespace x on UDP 81 only.
struct World {
    cluster: Cluster,
    pods: Vec<Pod>,
    _servers: Vec<Servers>,
}

impl World {
    fn start(extra_flags: &[&str]) -> World {
        let mut cluster = Cluster::start(ClusterOptions {
            nodes: 1,
            mode: Mode::NetworkPolicy,
            control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
            echo: false,
        })
        .unwrap();
        if !extra_flags.is_empty() {
            cluster
                .node_mut(0)
                .daemon_mut()
                .expect("an ofnode daemon")
                .restart_with(extra_flags)
                .unwrap();
        }
        cluster
            .namespace_set("x", 11, &labels(&[("ns", "x")]))
            .unwrap();
        cluster
            .namespace_set("y", 12, &labels(&[("ns", "y")]))
            .unwrap();
        let pods: Vec<Pod> = [("x", "a", 11), ("x", "b", 11), ("y", "c", 12)]
            .into_iter()
            .map(|(ns, name, vnid)| {
                cluster
                    .add_named_pod(0, (ns, name), vnid, &labels(&[("pod", name)]))
                    .unwrap()
            })
            .collect();
        let servers = pods
            .iter()
            .map(|pod| Servers::start(pod.netns(), pod.key()).unwrap())
            .collect();
        for (namespace, name, spec) in [
            (
                "x",
                "web",
                json!({
                    "podSelector": {"matchLabels": {"pod": "a"}},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}],
                                 "ports": [{"protocol": "TCP", "port": 80}]}]
                }),
            ),
            (
                "y",
                "out",
                json!({
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "x"}}}],
                                "ports": [{"protocol": "UDP", "port": 81}]}]
                }),
            ),
        ] {
            cluster
                .netpol_apply(&json!({
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": spec
                }))
                .unwrap();
        }
        World {
            cluster,
            pods,
            _servers: servers,
        }
    }

    fn pod(&self, key: &str) -> &Pod {
        self.pods
            .iter()
            .find(|p| p.key() == key)
            .expect("a pod of the world")
    }
}

#[test]
fn real_connections_count_on_the_rule_that_decided_them() {
    let world = World::start(&["--rule-counters-interval", "1"]);
    let cluster = &world.cluster;
    let (a, b, c) = (world.pod("x/a"), world.pod("x/b"), world.pod("y/c"));
    const CONNECTIONS: u64 = 5;
    for _ in 0..CONNECTIONS {
        assert!(tcp80(b, a), "x/b -> x/a allowed\n{}", cluster.diagnostics());
        assert!(!tcp80(c, a), "y/c -> x/a denied\n{}", cluster.diagnostics());
    }

    // Each allowed connection's forward packets (SYN, ACK, FIN/ACK at least) meet ingress[0];
    // each denied one's SYN (and its retransmissions) meets y's egress isolation (y/out lets
    // y's pods out to x on UDP 81 only, so TCP 80 is dropped as it leaves y/c).
    let allowed = |rule: &Value| {
        rule["tier"] == "networkpolicy"
            && rule["namespace"] == "x"
            && rule["policy"] == "web"
            && rule["rule"] == "ingress[0]"
            && rule["verdict"] == "allow"
    };
    let isolated = |rule: &Value| {
        rule["tier"] == "networkpolicy"
            && rule["namespace"] == "y"
            && rule["rule"] == "default-deny"
            && rule["direction"] == "egress"
            && rule["verdict"] == "deny"
    };
    wait_at_least("ingress[0] in netpol list --stats", 3 * CONNECTIONS, || {
        listed_packets(cluster, allowed)
    });
    wait_at_least("isolation in netpol list --stats", CONNECTIONS, || {
        listed_packets(cluster, isolated)
    });
    let text = cluster.node(0).cli(&["netpol", "list", "--stats"]).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("networkpolicy")
            && l.contains("x/web")
            && l.contains("ingress[0]")),
        "{text}"
    );

    let api = cluster.node(0).daemon().expect("daemon").api.clone();
    wait_at_least("ingress[0] on /metrics", 3 * CONNECTIONS, || {
        metric(
            &api,
            r#"ofnode_policy_rule_packets_total{namespace="x",policy="web",rule="ingress[0]",verdict="allow"} "#,
        )
    });
    wait_at_least("isolation on /metrics", CONNECTIONS, || {
        metric(
            &api,
            r#"ofnode_policy_rule_packets_total{namespace="y",policy="",rule="egress:default-deny",verdict="deny"} "#,
        )
    });
    let bytes = metric(
        &api,
        r#"ofnode_policy_rule_bytes_total{namespace="x",policy="web",rule="ingress[0]",verdict="allow"} "#,
    );
    assert!(
        bytes.is_some_and(|b| b >= 3 * CONNECTIONS * 54),
        "{bytes:?}"
    );
}

/// Every ordered pair of pods and probe where explain's verdict is not what real packets get,
/// with explain's text.
fn disagreements(world: &World) -> Vec<String> {
    let node = world.cluster.node(0);
    let mut out = Vec::new();
    for from in &world.pods {
        for to in &world.pods {
            for p in Probe::ALL {
                let port = p.to_string();
                let (proto, number) = port.split_once('/').expect("proto/port");
                let question = format!("{number}/{proto}");
                let (from_key, to_key) = (from.key(), to.key());
                let ask = |json: &[&str]| {
                    let mut args = vec![
                        "netpol", "explain", "--from", &from_key, "--to", &to_key, "--port",
                        &question,
                    ];
                    args.extend_from_slice(json);
                    node.cli(&args).unwrap()
                };
                let answer: Value = serde_json::from_str(&ask(&["--json"])).expect("JSON");
                let explained = answer["verdict"] == "allow";
                let observed = probe(from, to, p);
                if explained != observed {
                    out.push(format!(
                        "{from_key} -> {to_key} {question}: explain says {}, packets {}\n{}",
                        answer["verdict"],
                        if observed { "pass" } else { "are dropped" },
                        ask(&[])
                    ));
                }
            }
        }
    }
    out
}

/// An AdminNetworkPolicy over every namespace (y denied TCP 81 in, x passed on to
/// NetworkPolicy, UDP 80 out to y's pods allowed) and a baseline denying x's egress to y.
const TIERS: &str = "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: tiers}
spec:
  priority: 5
  subject: {namespaces: {}}
  ingress:
  - {name: deny-y-81, action: Deny, from: [{namespaces: {matchLabels: {ns: y}}}], ports: [{portNumber: {protocol: TCP, port: 81}}]}
  - {name: pass-x, action: Pass, from: [{namespaces: {matchLabels: {ns: x}}}]}
  egress:
  - {name: udp80-to-y, action: Allow, to: [{pods: {namespaceSelector: {matchLabels: {ns: y}}, podSelector: {}}}], ports: [{portNumber: {protocol: UDP, port: 80}}]}
";

const BASELINE: &str = "apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {ns: x}}}
  egress:
  - {name: deny-to-y, action: Deny, to: [{namespaces: {matchLabels: {ns: y}}}]}
";

/// With the admin tiers too, explain's verdict for every pair and probe is still what real
/// packets get, and it names the admin rules that decide.
#[test]
fn explain_agrees_with_real_packets_through_the_admin_tiers() {
    let world = World::start(&[]);
    world.cluster.admin_apply(TIERS).unwrap();
    world.cluster.admin_apply(BASELINE).unwrap();
    let disagreements = disagreements(&world);
    assert!(
        disagreements.is_empty(),
        "{}\n{}",
        disagreements.join("\n"),
        world.cluster.diagnostics()
    );
    let node = world.cluster.node(0);
    let ask = |from: &str, to: &str, port: &str| {
        node.cli(&[
            "netpol", "explain", "--from", from, "--to", to, "--port", port,
        ])
        .unwrap()
    };
    let text = ask("x/a", "y/c", "81/tcp");
    assert!(
        text.contains("=> deny by baseline banp/default egress[0] \"deny-to-y\": deny"),
        "{text}"
    );
    let text = ask("x/a", "y/c", "80/udp");
    assert!(
        text.contains("=> allow by admin anp/tiers (priority 5) egress[0] \"udp80-to-y\": allow"),
        "{text}"
    );
}

/// Explain's verdict for every ordered pair of pods and probe is what real packets get, and
/// its rules are the ones the policies say; bad questions are refused with a message.
#[test]
fn explain_agrees_with_real_packets_and_refuses_bad_questions() {
    let world = World::start(&[]);
    let node = world.cluster.node(0);
    let disagreements = disagreements(&world);
    assert!(
        disagreements.is_empty(),
        "{}\n{}",
        disagreements.join("\n"),
        world.cluster.diagnostics()
    );

    let text = node
        .cli(&[
            "netpol", "explain", "--from", "x/b", "--to", "x/a", "--port", "80/tcp",
        ])
        .unwrap();
    assert!(
        text.contains("=> allow by networkpolicy x/web ingress[0]: allow"),
        "{text}"
    );
    let text = node
        .cli(&[
            "netpol", "explain", "--from", "y/c", "--to", "x/a", "--port", "81/udp",
        ])
        .unwrap();
    assert!(
        text.contains("=> allow by networkpolicy y/out egress[0]: allow"),
        "{text}"
    );
    assert!(
        text.contains("=> deny by networkpolicy x ingress default-deny: deny (isolated by x/web)"),
        "{text}"
    );
    let err = node
        .cli(&[
            "netpol", "explain", "--from", "x/nope", "--to", "x/a", "--port", "80/tcp",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("pod x/nope"), "{err}");
    let err = node
        .cli(&[
            "netpol", "explain", "--from", "x/a", "--to", "x/b", "--port", "80/icmp",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("tcp, udp or sctp"), "{err}");
    let api = node.daemon().expect("daemon").api.clone();
    let (code, body) = http(
        &api,
        "GET",
        "/v1/netpols/explain?from=x%2Fa&to=x%2Fb&port=80",
        "",
    );
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("expected PORT/PROTOCOL"), "{body}");
}

/// The policy rules `ofnode trace --json` names, in the order the packet met them.
fn traced_rules(trace: &Value) -> Vec<&Value> {
    trace["passes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|pass| pass["steps"].as_array().into_iter().flatten())
        .flat_map(|step| step["owners"].as_array().into_iter().flatten())
        .filter(|owner| owner["kind"] == "policy_rule")
        .collect()
}

/// `ofnode trace` on the real switch names the NetworkPolicy rule that decided, by the cookie
/// of the verdict flow the packet met: in its text's `policy:` line and in its JSON.
#[test]
fn trace_names_the_networkpolicy_rule_that_decided_on_real_ovs() {
    let world = World::start(&[]);
    let node = world.cluster.node(0);
    let a_ip = world.pod("x/a").ip.to_string();
    let trace = |from: &str, proto: &str, port: &str| {
        let args = [
            "trace", "--from", from, "--to", &a_ip, "--proto", proto, "--dport", port,
        ];
        let text = node.cli(&args).unwrap();
        println!("$ ofnode {}\n{text}", args.join(" "));
        let json = node.cli(&[&args[..], &["--json"]].concat()).unwrap();
        (text, serde_json::from_str::<Value>(&json).expect("JSON"))
    };
    let named = |rule: &Value, want: &[(&str, Value)]| {
        for (field, value) in want {
            assert_eq!(&rule[*field], value, "{field} in {rule}");
        }
    };

    // Allowed: x/web's ingress rule admits x/b.
    let (text, json) = trace("x/b", "tcp", "80");
    assert!(
        text.contains("policy: networkpolicy x/web ingress[0]: allow\n"),
        "{text}"
    );
    let rules = traced_rules(&json);
    assert_eq!(rules.len(), 1, "{json}");
    named(
        rules[0],
        &[
            ("tier", json!("networkpolicy")),
            ("direction", json!("ingress")),
            ("namespace", json!("x")),
            ("policy", json!("web")),
            ("rule", json!("ingress[0]")),
            ("verdict", json!("allow")),
        ],
    );

    // Denied as it leaves y/c: y/out lets y out to x on UDP 81 only.
    let (text, json) = trace("y/c", "tcp", "80");
    assert!(
        text.contains("policy: networkpolicy y egress default-deny: deny (isolated by y/out)\n"),
        "{text}"
    );
    let rules = traced_rules(&json);
    assert_eq!(rules.len(), 1, "{json}");
    named(
        rules[0],
        &[
            ("direction", json!("egress")),
            ("namespace", json!("y")),
            ("policy", Value::Null),
            ("rule", json!("default-deny")),
            ("verdict", json!("deny")),
            ("isolated_by", json!(["y/out"])),
        ],
    );

    // Let out by y/out, then denied into x/a by x's isolation (x/web admits only x/b).
    let (text, json) = trace("y/c", "udp", "81");
    assert!(
        text.contains(
            "policy: networkpolicy y/out egress[0]: allow; \
             then networkpolicy x ingress default-deny: deny (isolated by x/web)\n"
        ),
        "{text}"
    );
    let rules = traced_rules(&json);
    assert_eq!(rules.len(), 2, "{json}");
    named(
        rules[0],
        &[
            ("direction", json!("egress")),
            ("policy", json!("out")),
            ("rule", json!("egress[0]")),
        ],
    );
    named(
        rules[1],
        &[
            ("direction", json!("ingress")),
            ("namespace", json!("x")),
            ("rule", json!("default-deny")),
            ("verdict", json!("deny")),
            ("isolated_by", json!(["x/web"])),
        ],
    );
}
