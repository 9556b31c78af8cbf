//! Issue 14: changes while traffic flows. A probe loop runs the whole TCP/80 matrix over and
//! over while a policy is updated and while a pod's labels change; no probe that both the old
//! and the new state deny may connect, none that both allow may fail, and afterwards the full
//! matrix (TCP and UDP, 80 and 81) is exactly the new table. And what a change does to a
//! connection that is already established.

mod netpol_common;

use netpol_common::{policy, start};
use ofnode_harness::probe::{Connection, Echo};
use ofnode_harness::reachability::{check_transition, Probe, Reachability};
use serde_json::json;

fn a_from_namespace(namespace: &str) -> serde_json::Value {
    policy(
        "x",
        "a-from",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"ns": namespace}}}
        ]}]}),
    )
}

/// Runs `change` under the probe loop and checks the rounds and the state after it.
fn during(
    model: &ofnode_harness::reachability::Model,
    what: &str,
    before: &Reachability,
    after: &Reachability,
    change: impl FnOnce(),
) {
    let ((), rounds) = model.probe_while(Probe::TCP80, change);
    println!("{what}: {} probe rounds during the change", rounds.len());
    if let Err(report) = check_transition(Probe::TCP80, &rounds, before, after) {
        panic!("{what}: during the change:\n{report}");
    }
    if let Err(report) = model.check_all(after) {
        panic!("{what}: after the change:\n{report}");
    }
}

#[test]
fn policy_update_and_label_change_under_traffic() {
    let (cluster, model) = start();
    let id = |pod: &ofnode_harness::reachability::ModelPod| pod.id();

    cluster.netpol_apply(&a_from_namespace("y")).unwrap();
    let from_y = model.expect(|from, to| id(to) != "x/a" || from.namespace == "y");
    model.check_all(&from_y).unwrap_or_else(|t| panic!("{t}"));

    let from_z = model.expect(|from, to| id(to) != "x/a" || from.namespace == "z");
    during(&model, "policy update y -> z", &from_y, &from_z, || {
        cluster.netpol_apply(&a_from_namespace("z")).unwrap()
    });
    cluster.netpol_del("x", "a-from").unwrap();

    // Only pods labelled role=client, from any namespace, reach x/a.
    cluster
        .netpol_apply(&policy(
            "x",
            "a-from-clients",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [{
                "namespaceSelector": {},
                "podSelector": {"matchLabels": {"role": "client"}}
            }]}]}),
        ))
        .unwrap();
    let nobody = model.expect(|_, to| id(to) != "x/a");
    model.check_all(&nobody).unwrap_or_else(|t| panic!("{t}"));
    let y_b = &model.pod("y/b").pod;
    let y_b_client = model.expect(|from, to| id(to) != "x/a" || id(from) == "y/b");
    during(
        &model,
        "label y/b role=client",
        &nobody,
        &y_b_client,
        || cluster.label_pod(y_b, &["role=client"]).unwrap(),
    );
    during(
        &model,
        "label role removed from y/b",
        &y_b_client,
        &nobody,
        || cluster.label_pod(y_b, &["role-"]).unwrap(),
    );

    // A namespace label change: x/a lets in namespaces labelled team=blue, then z gets it.
    cluster.netpol_del("x", "a-from-clients").unwrap();
    cluster
        .netpol_apply(&policy(
            "x",
            "a-from-blue",
            json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"team": "blue"}}}
            ]}]}),
        ))
        .unwrap();
    model.check_all(&nobody).unwrap_or_else(|t| panic!("{t}"));
    let from_blue_z = model.expect(|from, to| id(to) != "x/a" || from.namespace == "z");
    during(
        &model,
        "namespace z labelled team=blue",
        &nobody,
        &from_blue_z,
        || cluster.label_namespace("z", &["team=blue"]).unwrap(),
    );
}

/// What a policy change does to a connection it no longer allows: ofnode judges every
/// original-direction packet (only replies and related ICMP skip the check), so the next data
/// on an established TCP connection is dropped and gets no answer. The connection is not reset:
/// TCP keeps resending, and once a change allows it again, it carries on where it was.
#[test]
fn an_established_connection_is_cut_when_a_policy_stops_allowing_it() {
    let (cluster, model) = start();
    // y/a on node 1 talks to x/a on node 0: the check is x/a's ingress, across the VXLAN.
    let server = model.pod("x/a");
    let _echo = Echo::start(&server.pod, ECHO_PORT).unwrap();
    let mut connection = Connection::open(&model.pod("y/a").pod, server.ip(), ECHO_PORT).unwrap();
    assert!(
        connection.round_trip(b"one;", ANSWER).unwrap(),
        "no echo while no policy applies"
    );

    // x/a now lets in namespace z only.
    cluster.netpol_apply(&a_from_namespace("z")).unwrap();
    assert!(
        !connection.round_trip(b"two;", DENIED).unwrap(),
        "the established connection still got an answer after the policy denied it"
    );

    // Allowed again: TCP's resent "two;" and the new "three;" are both echoed.
    cluster.netpol_del("x", "a-from").unwrap();
    assert!(
        connection.round_trip(b"three;", RESUMED).unwrap(),
        "the connection did not carry on once allowed again"
    );
}

const ECHO_PORT: u16 = 8080;
/// How long an allowed round trip may take on a loaded machine.
const ANSWER: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a denied round trip is given to (wrongly) come back.
const DENIED: std::time::Duration = std::time::Duration::from_secs(2);
/// TCP resends with a growing backoff: the resent data arrives within a few seconds.
const RESUMED: std::time::Duration = std::time::Duration::from_secs(20);
