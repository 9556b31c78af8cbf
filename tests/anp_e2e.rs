//! Issue 29: the tiers against NetworkPolicy on real packets (two nodes, the conformance
//! suite's world: `anp_common`), beyond what the upstream suite probes: an ANP Deny over a
//! NetworkPolicy Allow, a Pass falling through to a NetworkPolicy's implicit deny (the
//! baseline is not consulted for a pod a NetworkPolicy isolates), a baseline Deny lifted by a
//! NetworkPolicy Allow, and an ANP priority changed back and forth while a probe loop runs:
//! no probe ever sees a verdict that neither the old nor the new ordering gives.

mod anp_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anp_common::{World, PREFIX};
use ofnode_harness::l4::{probe, L4};
use ofnode_harness::Endpoint;
use serde_json::{json, Value};

const GRYFFINDOR: &str = "gryffindor/harry-potter-1";
const SLYTHERIN: &str = "slytherin/draco-malfoy-0";
const HUFFLEPUFF: &str = "hufflepuff/cedric-diggory-0";
const RAVENCLAW: &str = "ravenclaw/luna-lovegood-1";
const PROTOCOLS: [(L4, u16); 3] = [(L4::Tcp, 80), (L4::Udp, 53), (L4::Sctp, 9003)];

fn house(h: &str) -> Value {
    json!({"namespaces": {"matchLabels": {"conformance-house": h}}})
}

fn admin(kind: &str, name: &str, priority: Option<u16>, ingress: Value) -> Value {
    let mut spec = json!({
        "subject": {"namespaces": {"matchLabels": {"conformance-house": "gryffindor"}}},
        "ingress": ingress,
    });
    if let Some(p) = priority {
        spec["priority"] = json!(p);
    }
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn rule(name: &str, action: &str, from: &str) -> Value {
    json!({"name": name, "action": action, "from": [house(from)]})
}

/// A NetworkPolicy isolating gryffindor's pods for ingress, allowing only from `from`.
fn netpol_allowing(from: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": format!("allow-from-{from}"), "namespace": format!("{PREFIX}gryffindor")},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"conformance-house": from}}}]}],
        },
    })
}

/// Checks `from → GRYFFINDOR` on TCP, UDP and SCTP against `expect`; returns what differs.
fn expect_from(world: &World, case: &str, from: &str, expect: bool) -> Vec<String> {
    PROTOCOLS
        .iter()
        .filter_map(|&(protocol, port)| {
            let tries = world.cell(from, GRYFFINDOR, protocol, port, expect);
            let ok = if expect {
                tries.contains(&true)
            } else {
                !tries.contains(&true)
            };
            (!ok).then(|| format!("{case}: {from} -> {GRYFFINDOR} {protocol}/{port}: expected {expect}, tries {tries:?}"))
        })
        .collect()
}

/// `ofnode trace` on the server's node (from the slytherin pod there) names the tier, policy
/// and rule that decided.
fn trace_names_the_rule(world: &World) -> Option<String> {
    let server = world.pod(GRYFFINDOR);
    let local = world.pod("slytherin/draco-malfoy-1");
    assert_eq!(
        server.node, local.node,
        "the trace starts on the server's node"
    );
    let (from, to) = (local.key(), server.ip.to_string());
    let trace = world
        .cluster
        .node(server.node)
        .cli(&["trace", "--from", &from, "--to", &to, "--dport", "80"])
        .unwrap();
    println!("{trace}");
    let decided = "admin anp/deny-slytherin (priority 10) ingress[0] \"deny-from-slytherin\": deny";
    let jump = "admin tiers: ingress: to the AdminNetworkPolicies first";
    (!trace.contains(decided) || !trace.contains(jump))
        .then(|| format!("the trace does not name the rule that decided:\n{trace}"))
}

fn flush_conntrack(world: &World) {
    for node in world.cluster.nodes() {
        node.ovs().appctl(&["dpctl/flush-conntrack"]).unwrap();
    }
}

#[test]
fn the_tiers_around_networkpolicy() {
    let world = World::start();
    let mut failures = Vec::new();

    // ANP Deny over a NetworkPolicy Allow: the admin's Deny wins.
    let np = netpol_allowing("slytherin");
    world.apply(&np).unwrap();
    failures.extend(expect_from(
        &world,
        "NetworkPolicy allows slytherin",
        SLYTHERIN,
        true,
    ));
    let deny = admin(
        "AdminNetworkPolicy",
        "deny-slytherin",
        Some(10),
        json!([rule("deny-from-slytherin", "Deny", "slytherin")]),
    );
    world.apply(&deny).unwrap();
    failures.extend(expect_from(
        &world,
        "ANP Deny over NP Allow",
        SLYTHERIN,
        false,
    ));
    failures.extend(trace_names_the_rule(&world));
    world.delete(&deny).unwrap();
    world.delete(&np).unwrap();
    flush_conntrack(&world);

    // Pass falls through to the NetworkPolicy, whose implicit deny decides; the baseline's
    // Allow is not consulted for a pod a NetworkPolicy isolates.
    let pass = admin(
        "AdminNetworkPolicy",
        "pass-slytherin",
        Some(10),
        json!([rule("pass-from-slytherin", "Pass", "slytherin")]),
    );
    let banp_allow = admin(
        "BaselineAdminNetworkPolicy",
        "default",
        None,
        json!([rule("allow-from-slytherin", "Allow", "slytherin")]),
    );
    let np = netpol_allowing("ravenclaw");
    for object in [&pass, &banp_allow, &np] {
        world.apply(object).unwrap();
    }
    failures.extend(expect_from(&world, "Pass to an NP deny", SLYTHERIN, false));
    failures.extend(expect_from(&world, "Pass to an NP deny", RAVENCLAW, true));
    world.delete(&np).unwrap();
    failures.extend(expect_from(
        &world,
        "Pass, no NP: the baseline allows",
        SLYTHERIN,
        true,
    ));
    for object in [&pass, &banp_allow] {
        world.delete(object).unwrap();
    }
    flush_conntrack(&world);

    // A baseline Deny, lifted by a NetworkPolicy Allow.
    let banp_deny = admin(
        "BaselineAdminNetworkPolicy",
        "default",
        None,
        json!([rule("deny-from-hufflepuff", "Deny", "hufflepuff")]),
    );
    world.apply(&banp_deny).unwrap();
    failures.extend(expect_from(&world, "baseline Deny", HUFFLEPUFF, false));
    failures.extend(expect_from(
        &world,
        "baseline Deny (others)",
        RAVENCLAW,
        true,
    ));
    let np = netpol_allowing("hufflepuff");
    world.apply(&np).unwrap();
    failures.extend(expect_from(
        &world,
        "baseline Deny lifted by NP Allow",
        HUFFLEPUFF,
        true,
    ));
    // The NetworkPolicy isolates gryffindor now: ravenclaw is denied by it, not the baseline.
    failures.extend(expect_from(&world, "NP isolates", RAVENCLAW, false));
    world.delete(&np).unwrap();
    world.delete(&banp_deny).unwrap();
    failures.extend(bad_input_changes_nothing(&world));

    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        world.cluster.diagnostics()
    );
}

/// Bad objects are refused, the message naming the field, and no node's flows change.
fn bad_input_changes_nothing(world: &World) -> Vec<String> {
    let flows = || -> Vec<Vec<String>> {
        world
            .cluster
            .nodes()
            .iter()
            .map(|n| n.flows().unwrap())
            .collect()
    };
    let holder = admin(
        "AdminNetworkPolicy",
        "holder",
        Some(7),
        json!([rule("x", "Deny", "slytherin")]),
    );
    world.apply(&holder).unwrap();
    let before = flows();
    let mut bad = Vec::new();
    let mut unknown = admin(
        "AdminNetworkPolicy",
        "u",
        Some(8),
        json!([rule("x", "Deny", "slytherin")]),
    );
    unknown["spec"]["ingress"][0]["colour"] = json!("red");
    bad.push((unknown, "spec.ingress[0]"));
    bad.push((
        admin(
            "AdminNetworkPolicy",
            "a",
            Some(8),
            json!([rule("x", "Reject", "slytherin")]),
        ),
        "spec.ingress[0].action",
    ));
    bad.push((
        admin(
            "AdminNetworkPolicy",
            "p",
            Some(1001),
            json!([rule("x", "Deny", "slytherin")]),
        ),
        "spec.priority",
    ));
    bad.push((
        admin(
            "AdminNetworkPolicy",
            "twin",
            Some(7),
            json!([rule("x", "Deny", "slytherin")]),
        ),
        "spec.priority",
    ));
    bad.push((
        admin(
            "BaselineAdminNetworkPolicy",
            "other",
            None,
            json!([rule("x", "Deny", "slytherin")]),
        ),
        "metadata.name",
    ));
    bad.push((
        admin(
            "BaselineAdminNetworkPolicy",
            "default",
            None,
            json!([rule("x", "Pass", "slytherin")]),
        ),
        "spec.ingress[0].action",
    ));
    let mut failures = Vec::new();
    for (object, field) in bad {
        match world.apply(&object) {
            Ok(()) => failures.push(format!("accepted: {object}")),
            Err(e) if !e.contains(field) => failures.push(format!("{field} not named: {e}")),
            Err(_) => {}
        }
    }
    if flows() != before {
        failures.push("a refused object changed a node's flows".into());
    }
    world.delete(&holder).unwrap();
    failures
}

/// One round of the loop: whether each client reached GRYFFINDOR on TCP/80 and UDP/53.
fn round(world: &World, clients: &[&str]) -> Vec<bool> {
    let server = world.pod(GRYFFINDOR);
    std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .flat_map(|c| [(c, L4::Tcp, 80u16), (c, L4::Udp, 53)])
            .map(|(client, protocol, port)| {
                let path = world.pod(client).netns().path();
                let (ip, name) = (server.ip, server.key());
                s.spawn(move || probe(&path, ip, protocol, port, &name, Duration::from_millis(400)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .collect()
    })
}

#[test]
fn a_priority_change_under_traffic_has_no_window() {
    let world = World::start();
    // A (50): Pass from slytherin. B (60, then 40, and back): Deny slytherin, Allow
    // hufflepuff, Deny ravenclaw. Baseline: Deny hufflepuff.
    //   old order (A, B): slytherin passes (nothing below denies) → connects; hufflepuff:
    //     B allows; ravenclaw: B denies.
    //   new order (B, A): slytherin: B denies; hufflepuff: B allows; ravenclaw: B denies.
    // While B's flows were missing, hufflepuff would meet the baseline's Deny and ravenclaw
    // would get through: neither ordering gives those.
    let a = admin(
        "AdminNetworkPolicy",
        "a",
        Some(50),
        json!([rule("pass-from-slytherin", "Pass", "slytherin")]),
    );
    let b = |priority: u16| {
        admin(
            "AdminNetworkPolicy",
            "b",
            Some(priority),
            json!([
                rule("deny-from-slytherin", "Deny", "slytherin"),
                rule("allow-from-hufflepuff", "Allow", "hufflepuff"),
                rule("deny-from-ravenclaw", "Deny", "ravenclaw"),
            ]),
        )
    };
    let banp = admin(
        "BaselineAdminNetworkPolicy",
        "default",
        None,
        json!([rule("deny-from-hufflepuff", "Deny", "hufflepuff")]),
    );
    for object in [&a, &b(60), &banp] {
        world.apply(object).unwrap();
    }
    let clients = [SLYTHERIN, HUFFLEPUFF, RAVENCLAW];
    // Per cell (client × TCP/80, UDP/53): (old, new).
    let expected = [
        (true, false),
        (true, false),
        (true, true),
        (true, true),
        (false, false),
        (false, false),
    ];
    let settled = |order: usize| -> Vec<bool> {
        expected
            .iter()
            .map(|c| if order == 0 { c.0 } else { c.1 })
            .collect()
    };
    let first = round(&world, &clients);
    let retry = round(&world, &clients);
    let seen: Vec<bool> = first.iter().zip(&retry).map(|(a, b)| *a || *b).collect();
    assert_eq!(seen, settled(0), "the old ordering before the change");

    let stop = AtomicBool::new(false);
    let (rounds, changes) = std::thread::scope(|s| {
        let prober = s.spawn(|| {
            let mut rounds = Vec::new();
            while !stop.load(Ordering::Acquire) {
                rounds.push(round(&world, &clients));
            }
            rounds
        });
        let mut changes = 0;
        for _ in 0..5 {
            for priority in [40, 60] {
                std::thread::sleep(Duration::from_millis(300));
                world.apply(&b(priority)).unwrap();
                changes += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Release);
        (prober.join().unwrap_or_default(), changes)
    });
    println!(
        "{changes} priority changes under {} probe rounds",
        rounds.len()
    );
    assert!(
        rounds.len() >= changes / 2,
        "the loop ran across the changes"
    );
    let labels = [
        "slytherin tcp",
        "slytherin udp",
        "hufflepuff tcp",
        "hufflepuff udp",
        "ravenclaw tcp",
        "ravenclaw udp",
    ];
    let mut wrong = Vec::new();
    for (r, seen) in rounds.iter().enumerate() {
        for (i, &(old, new)) in expected.iter().enumerate() {
            if old == new && seen[i] != old {
                wrong.push(format!(
                    "round {r}: {} {}",
                    labels[i],
                    if seen[i] { "connected" } else { "failed" }
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a verdict neither ordering gives:\n{}",
        wrong.join("\n")
    );
    // B is back at 60: the old ordering again, exactly.
    let first = round(&world, &clients);
    let retry = round(&world, &clients);
    let seen: Vec<bool> = first.iter().zip(&retry).map(|(a, b)| *a || *b).collect();
    assert_eq!(seen, settled(0), "the old ordering after the changes");
    world.apply(&b(40)).unwrap();
    let first = round(&world, &clients);
    let retry = round(&world, &clients);
    let seen: Vec<bool> = first.iter().zip(&retry).map(|(a, b)| *a || *b).collect();
    assert_eq!(seen, settled(1), "the new ordering");
}
