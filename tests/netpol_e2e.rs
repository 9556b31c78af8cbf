//! Issue 14: Kubernetes NetworkPolicy enforced on real packets, in the upstream netpol e2e
//! design (namespaces x, y, z; pods a, b, c in each over both nodes; TCP and UDP on 80 and 81;
//! every ordered pair probed and compared with the case's table, printed on failure). The
//! cases share one cluster; each removes its policies and checks everything connects again
//! before the next.

mod netpol_common;

use netpol_common::{policy, start, Session};
use ofnode_harness::reachability::{ModelPod, Probe};
use serde_json::json;

fn id(pod: &ModelPod) -> String {
    pod.id()
}

#[test]
fn policy_cases() {
    let (cluster, model) = start();
    let mut session = Session::new(&cluster, &model);
    let node1_subnet = cluster.node(1).subnet_cidr();
    let y_a = model.pod("y/a");
    assert_eq!(y_a.node(), 1, "the ipBlock case excepts a pod of node 1");
    let y_a_32 = format!("{}/32", y_a.ip());

    session.case_all("no policy", &[], model.all_connected());

    session.case_all(
        "default-deny ingress",
        &[policy(
            "x",
            "deny-ingress",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        )],
        model.expect(|_, to| to.namespace != "x"),
    );

    session.case_all(
        "default-deny egress",
        &[policy(
            "x",
            "deny-egress",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        )],
        model.expect(|from, _| from.namespace != "x"),
    );

    session.case_all(
        "allow from the same namespace",
        &[policy(
            "x",
            "allow-same-namespace",
            json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}),
        )],
        model.expect(|from, to| to.namespace != "x" || from.namespace == "x"),
    );

    session.case_all(
        "allow from a namespace by label",
        &[policy(
            "x",
            "allow-from-y",
            json!({"podSelector": {}, "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"ns": "y"}}}
            ]}]}),
        )],
        model.expect(|from, to| to.namespace != "x" || from.namespace == "y"),
    );

    session.case_all(
        "allow from pods by label in another namespace (both selectors)",
        &[policy(
            "x",
            "allow-y-b-to-a",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [{
                "namespaceSelector": {"matchLabels": {"ns": "y"}},
                "podSelector": {"matchLabels": {"pod": "b"}}
            }]}]}),
        )],
        model.expect(|from, to| id(to) != "x/a" || id(from) == "y/b"),
    );

    session.case_all(
        "matchExpressions In and NotIn",
        &[policy(
            "x",
            "allow-expressions",
            json!({"podSelector": {}, "ingress": [{"from": [{
                "namespaceSelector": {"matchExpressions": [
                    {"key": "ns", "operator": "In", "values": ["y", "z"]}
                ]},
                "podSelector": {"matchExpressions": [
                    {"key": "pod", "operator": "NotIn", "values": ["c"]}
                ]}
            }]}]}),
        )],
        model.expect(|from, to| to.namespace != "x" || (from.namespace != "x" && from.name != "c")),
    );

    session.case_all(
        "matchExpressions Exists and DoesNotExist",
        &[policy(
            "x",
            "expressions-exist",
            json!({
                "podSelector": {"matchExpressions": [{"key": "pod", "operator": "Exists"}]},
                "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [
                    {"key": "ns", "operator": "DoesNotExist"}
                ]}}, {"podSelector": {"matchExpressions": [
                    {"key": "pod", "operator": "In", "values": ["b"]},
                    {"key": "role", "operator": "DoesNotExist"}
                ]}}]}]
            }),
        )],
        // No namespace lacks `ns`; of x's own pods only b has pod=b and no role.
        model.expect(|from, to| to.namespace != "x" || id(from) == "x/b"),
    );

    session.case_all(
        "ipBlock with except",
        &[policy(
            "x",
            "allow-node1-but-y-a",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
                {"ipBlock": {"cidr": node1_subnet, "except": [y_a_32]}}
            ]}]}),
        )],
        model.expect(|from, to| id(to) != "x/a" || (from.node() == 1 && id(from) != "y/a")),
    );

    let into_x_denied = model.expect(|_, to| to.namespace != "x");
    session.case(
        "a port range (endPort)",
        &[policy(
            "x",
            "allow-tcp-81-90",
            json!({"podSelector": {}, "ingress": [{"ports": [
                {"protocol": "TCP", "port": 81, "endPort": 90}
            ]}]}),
        )],
        &[
            (Probe::TCP80, into_x_denied.clone()),
            (Probe::TCP81, model.all_connected()),
            (Probe::UDP80, into_x_denied.clone()),
            (Probe::UDP81, into_x_denied.clone()),
        ],
    );

    session.case(
        "ports by protocol: UDP 80 only",
        &[policy(
            "x",
            "allow-udp-80",
            json!({"podSelector": {}, "ingress": [{"ports": [{"protocol": "UDP", "port": 80}]}]}),
        )],
        &[
            (Probe::TCP80, into_x_denied.clone()),
            (Probe::TCP81, into_x_denied.clone()),
            (Probe::UDP80, model.all_connected()),
            (Probe::UDP81, into_x_denied),
        ],
    );

    session.case_all(
        "egress to a CIDR",
        &[policy(
            "x",
            "egress-to-node1",
            json!({
                "podSelector": {"matchLabels": {"pod": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"ipBlock": {"cidr": node1_subnet}}]}]
            }),
        )],
        model.expect(|from, to| id(from) != "x/a" || to.node() == 1),
    );

    session.case_all(
        "two policies add up",
        &[
            policy(
                "x",
                "a-from-y",
                json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
                    {"namespaceSelector": {"matchLabels": {"ns": "y"}}}
                ]}]}),
            ),
            policy(
                "x",
                "a-from-z",
                json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
                    {"namespaceSelector": {"matchLabels": {"ns": "z"}}}
                ]}]}),
            ),
        ],
        model.expect(|from, to| id(to) != "x/a" || from.namespace != "x"),
    );

    // x/a takes no new connection in, y/b opens none out; x/a -> y/b is allowed and its replies
    // cross both: into the ingress-isolated x/a and out of the egress-isolated y/b.
    session.case_all(
        "replies of allowed connections",
        &[
            policy(
                "x",
                "a-no-ingress",
                json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"]}),
            ),
            policy(
                "y",
                "b-no-egress",
                json!({"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Egress"]}),
            ),
        ],
        model.expect(|from, to| id(to) != "x/a" && id(from) != "y/b"),
    );

    session.finish();
}
