//! `ofnode controller` against a real kube-apiserver (issue 28 item 3): the numbers the README's
//! controller section states.
//! 1. Allocation latency: one controller (networkpolicy mode, the default lease timing) leads;
//!    the bench creates `OBJECTS` Nodes (each: create, then its InternalIP through the status
//!    subresource, as a kubelet registers) and `OBJECTS` Namespaces, one request after the other
//!    from one client, and watches HostSubnets and NetNamespaces itself: the time from sending
//!    the create to the watch showing the allocation, p50 / p99 / max.
//! 2. Failover: two controllers with the default timing (lease 15 s, renew deadline 10 s, retry
//!    2 s); `kill -9` of the leader; the time until the standby's `/status` (polled every 20 ms)
//!    says it leads, and until it has listed everything and allocates; `ROUNDS` rounds, the
//!    killed one started again as the next standby.
//!
//! Run: `cargo bench --bench controller` (as root).

#[path = "../tests/controller_common/mod.rs"]
mod controller_common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use controller_common::*;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;
use ofnode::controller::objects::{HostSubnet, NetNamespace};
use ofnode_harness::kube::ControllerOptions;

/// Nodes and namespaces created for the latency figures.
const OBJECTS: usize = 300;
/// Kill -9 rounds.
const ROUNDS: usize = 5;
const GIVE_UP: Duration = Duration::from_secs(120);

fn main() {
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"controller".contains(&arg))
    {
        return;
    }
    allocation_latency();
    failover();
}

/// The default timing, as `ofnode controller` runs without flags.
fn defaults(identity: &str) -> ControllerOptions {
    let mut options = ControllerOptions::new(identity, "networkpolicy");
    options.lease = (15, Duration::from_secs(10), Duration::from_secs(2));
    options
}

fn allocation_latency() {
    let setup = Setup::start();
    let controller = setup.controller(&defaults("bench-a"));
    controller.wait_leading(GIVE_UP).unwrap();
    let (nodes, namespaces, took) = setup.admin(|client| async move {
        let seen: std::sync::Arc<std::sync::Mutex<HashMap<String, Instant>>> = Default::default();
        let watch = |kind: &'static str| {
            let seen = seen.clone();
            let client = client.clone();
            async move {
                let mark = |name: String| {
                    seen.lock()
                        .unwrap()
                        .entry(format!("{kind}/{name}"))
                        .or_insert_with(Instant::now);
                };
                if kind == "node" {
                    let mut events = std::pin::pin!(watcher::watcher(
                        Api::<HostSubnet>::all(client),
                        Default::default()
                    ));
                    while let Some(Ok(event)) = events.next().await {
                        if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = event {
                            mark(name(&o));
                        }
                    }
                } else {
                    let mut events = std::pin::pin!(watcher::watcher(
                        Api::<NetNamespace>::all(client),
                        Default::default()
                    ));
                    while let Some(Ok(event)) = events.next().await {
                        if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = event {
                            mark(name(&o));
                        }
                    }
                }
            }
        };
        let watches = futures::future::join(watch("node"), watch("namespace"));
        let create = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let started = Instant::now();
            let mut sent = Vec::new();
            for i in 0..OBJECTS {
                let node = format!("bench-node-{i}");
                sent.push((format!("node/{node}"), Instant::now()));
                create_node(&client, &node, Some(node_ip(i))).await;
                let namespace = format!("bench-ns-{i}");
                sent.push((format!("namespace/{namespace}"), Instant::now()));
                create_namespace(&client, &namespace).await;
            }
            let created_in = started.elapsed();
            let deadline = Instant::now() + GIVE_UP;
            loop {
                let done = {
                    let seen = seen.lock().unwrap();
                    sent.iter().all(|(key, _)| seen.contains_key(key))
                };
                if done || Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let seen = seen.lock().unwrap();
            let mut nodes = Vec::new();
            let mut namespaces = Vec::new();
            for (key, at) in &sent {
                let latency = seen.get(key).map(|t| t.duration_since(*at));
                let latency =
                    latency.unwrap_or_else(|| panic!("{key}: no allocation within {GIVE_UP:?}"));
                if key.starts_with("node/") {
                    nodes.push(latency);
                } else {
                    namespaces.push(latency);
                }
            }
            (nodes, namespaces, created_in)
        };
        tokio::select! {
            result = create => result,
            _ = watches => unreachable!("watchers do not end"),
        }
    });
    println!(
        "allocation latency, {OBJECTS} Nodes and {OBJECTS} Namespaces created one after the other \
         ({:.1} s for all {} creates, {:.0} objects/s), create sent -> allocation seen on a watch:",
        took.as_secs_f64(),
        2 * OBJECTS,
        (2 * OBJECTS) as f64 / took.as_secs_f64()
    );
    for (what, latencies) in [
        ("Node -> HostSubnet", nodes),
        ("Namespace -> NetNamespace", namespaces),
    ] {
        let (p50, p99, max) = percentiles(latencies);
        println!(
            "  {what:<26} p50 {} ms  p99 {} ms  max {} ms",
            ms(p50),
            ms(p99),
            ms(max)
        );
    }
    let status = controller.status().unwrap();
    println!(
        "  the controller: {} writes, {} errors, {} conflicts",
        status["writes"],
        status["write_errors"],
        status["conflicts"].as_array().map_or(0, Vec::len)
    );
}

fn failover() {
    let setup = Setup::start();
    setup.admin(|c| async move {
        for i in 0..20 {
            create_node(&c, &format!("node-{i}"), Some(node_ip(i))).await;
            create_namespace(&c, &format!("ns-{i}")).await;
        }
    });
    let mut generation = 0;
    let mut next = |setup: &Setup| {
        generation += 1;
        setup.controller(&defaults(&format!("bench-{generation}")))
    };
    let mut leader = next(&setup);
    leader.wait_leading(GIVE_UP).unwrap();
    let mut standby = next(&setup);
    let mut leading = Vec::new();
    let mut allocating = Vec::new();
    for round in 0..ROUNDS {
        standby
            .wait_status(GIVE_UP, |s| s["holder"] == leader.identity.as_str())
            .unwrap();
        // Kill at a random point of the renewal cycle, as a crash would.
        std::thread::sleep(Duration::from_millis(500 + 300 * round as u64));
        let killed = Instant::now();
        leader.kill9();
        let mut led = None;
        loop {
            let status = standby.status().unwrap_or_default();
            if status["leader"] == true && led.is_none() {
                led = Some(killed.elapsed());
            }
            if status["leader"] == true && status["synced"] == true {
                break;
            }
            assert!(killed.elapsed() < GIVE_UP, "no takeover within {GIVE_UP:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let synced = killed.elapsed();
        leading.push(led.unwrap_or(synced));
        allocating.push(synced);
        println!(
            "  round {round}: {} leads {:.2} s after kill -9 of {}, allocates at {:.2} s",
            standby.identity,
            leading.last().unwrap().as_secs_f64(),
            leader.identity,
            synced.as_secs_f64()
        );
        leader = std::mem::replace(&mut standby, next(&setup));
    }
    let (med, _, max) = percentiles(leading.clone());
    let (med_sync, _, max_sync) = percentiles(allocating);
    println!(
        "failover after kill -9 of the leader ({ROUNDS} rounds, lease duration 15 s, renew \
         deadline 10 s, retry 2 s): the standby leads after median {:.2} s, max {:.2} s; \
         allocates after median {:.2} s, max {:.2} s",
        med.as_secs_f64(),
        max.as_secs_f64(),
        med_sync.as_secs_f64(),
        max_sync.as_secs_f64()
    );
}

fn percentiles(mut values: Vec<Duration>) -> (Duration, Duration, Duration) {
    values.sort();
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), at(1.0))
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}
