//! Issue 27: what one change costs the node's core (the store, its groups and the
//! NetworkPolicy engine, ofnode's own CPU without the switch) as the cluster grows, and its
//! memory. No Open vSwitch: the core is pure, so this measures exactly ofnode's share.
//!
//! Worlds: 1,000 / 10,000 / 50,000 pods (200 on this node, the rest on others) spread over
//! namespaces of at most 100 pods, with 500 or 5,000 policies (10 per namespace), each
//! selecting an app label, peers by namespace label and pod label, a TCP port range and a UDP
//! port. A team owns 10 namespaces (their `team` label) and a policy's peers are one app of
//! one team's namespaces: about 100 pods, whatever the cluster's size, so that a bigger world
//! adds pods a change does not touch (what "flat" is measured against). For each world: installing the policies, and the median and p99 of each kind of
//! change (policy add, replace, delete; pod add, delete, relabel; namespace relabel) with the
//! flow mods it makes. Then a relist: 10,000 pods and 1,000 policies applied as one diff to a
//! core that had none, and the process's RSS at 50,000 pods / 5,000 policies (in a child
//! process of its own, so earlier worlds do not count).
//!
//! Run: `cargo bench --bench store` (no root needed). `STORE_BENCH_QUICK=1` runs only the
//! smallest world (for a smoke run); `STORE_BENCH_WORLD=50000x5000` one world alone, `STORE_BENCH_ONLY=relabel` only the
//! changes so named, `STORE_BENCH_SAMPLES=5000` more samples of each (for a profiler).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use ofnode::sdn::core::{Core, LabelEdit};
use ofnode::sdn::policy::networkpolicy::parse_netpol;
use ofnode::sdn::{Labels, Mode, Namespace, NodeState, Pod, PodInfo, PodKey, SetupRequest, Vnid};

#[path = "common/store_world.rs"]
mod store_world;
use store_world::*;

/// Changes of each kind measured per world, unless `STORE_BENCH_SAMPLES` says otherwise.
const SAMPLES: usize = 200;

fn setup() -> SetupRequest {
    SetupRequest {
        cluster_network: "10.128.0.0/14".parse().unwrap(),
        service_network: "172.30.0.0/16".parse().unwrap(),
        local_subnet: "10.128.0.0/23".parse().unwrap(),
        gateway: Ipv4Addr::new(10, 128, 0, 1),
        mode: Mode::NetworkPolicy,
    }
}

fn local_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 10)) + i as u32)
}

fn attachment(i: usize) -> Pod {
    Pod {
        veth: Some(format!("veth{i}").parse().unwrap()),
        ip: local_ip(i),
        mac: format!("0a:58:00:00:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff)
            .parse()
            .unwrap(),
        sandbox: format!("{:064x}", i + 1).parse().unwrap(),
        vnid: Vnid::GLOBAL,
        ofport: 10 + i as u16,
    }
}

/// Runs one operation as a batch of its own; the flow mods it made.
fn step(core: &mut Core, op: impl FnOnce(&mut Core)) -> usize {
    op(core);
    let effects = core.take_effects();
    core.commit();
    effects.flows.len()
}

impl World {
    /// The core holding the world, and how long installing its policies took.
    fn build(&self) -> (Core, Duration) {
        let mut core = Core::new(NodeState {
            setup: Some(setup()),
            ..NodeState::default()
        })
        .unwrap();
        let n = self.namespaces();
        for ns in 0..n {
            step(&mut core, |c| c.namespace_set(namespace(ns)).unwrap());
        }
        for i in 0..self.pods {
            if i < LOCAL_PODS {
                step(&mut core, |c| {
                    c.pod_attach(pod_key(i, n), attachment(i), pod_labels(i, n, 0))
                        .unwrap()
                });
            } else {
                step(&mut core, |c| {
                    c.remote_pod_set(pod_key(i, n), remote_info(i, n, 0))
                        .unwrap()
                });
            }
        }
        let started = Instant::now();
        for p in 0..self.policies {
            let (ns, k) = (p / POLICIES_PER_NAMESPACE, p % POLICIES_PER_NAMESPACE);
            let policy = parse_netpol(policy_json(ns, n, k, k, 0).as_bytes()).unwrap();
            step(&mut core, |c| c.netpol_apply(policy).unwrap());
        }
        (core, started.elapsed())
    }
}

/// One kind of change: its `i`th sample.
type Change<'a> = Box<dyn FnMut(&mut Core, usize) + 'a>;

/// Samples of each kind of change: `STORE_BENCH_SAMPLES`, or 200 (a profiler wants more).
fn samples() -> usize {
    std::env::var("STORE_BENCH_SAMPLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(SAMPLES)
}

/// (median, p99, mean flow mods) of `samples()` runs of `op(i)`.
fn measure(core: &mut Core, op: &mut Change) -> (Duration, Duration, f64) {
    let samples = samples();
    let mut times = Vec::with_capacity(samples);
    let mut mods = 0;
    for i in 0..samples {
        let started = Instant::now();
        mods += step(core, |c| op(c, i));
        times.push(started.elapsed());
    }
    times.sort();
    let p = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    (p(0.5), p(0.99), mods as f64 / samples as f64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run_world(world: &World) {
    let (mut core, install) = world.build();
    println!(
        "## {} pods ({} local), {} policies, {} namespaces: {} flows; installing the policies {:.0} ms ({:.3} ms each)",
        world.pods,
        LOCAL_PODS,
        world.policies,
        world.namespaces(),
        core.flows().len(),
        ms(install),
        ms(install) / world.policies as f64,
    );
    let namespaces = world.namespaces();
    let teams = world.teams();
    let remote = |i: usize| LOCAL_PODS + (i * 7919) % (world.pods - LOCAL_PODS);
    let mut changes: Vec<(&str, Change)> = Vec::new();
    changes.push((
        "policy replaced (new peers and ports)",
        Box::new(|c, i| {
            let p = (i * 31) % world.policies;
            let (ns, k) = (p / POLICIES_PER_NAMESPACE, p % POLICIES_PER_NAMESPACE);
            let json = policy_json(ns, namespaces, k, k, 1 + i % 3);
            c.netpol_apply(parse_netpol(json.as_bytes()).unwrap())
                .unwrap();
        }),
    ));
    changes.push((
        "policy added",
        Box::new(|c, i| {
            let json = policy_json(i % namespaces, namespaces, 100 + i, i, 0);
            c.netpol_apply(parse_netpol(json.as_bytes()).unwrap())
                .unwrap();
        }),
    ));
    changes.push((
        "policy deleted",
        Box::new(|c, i| {
            c.netpol_del(&format!("ns{}", i % namespaces), &format!("p{}", 100 + i))
                .unwrap();
        }),
    ));
    changes.push((
        "remote pod relabelled",
        Box::new(|c, i| {
            let edit = LabelEdit {
                set: pod_labels(remote(i), namespaces, 1 + i % 5),
                remove: Vec::new(),
            };
            c.pod_labels(&pod_key(remote(i), namespaces), &edit)
                .unwrap();
        }),
    ));
    changes.push((
        "local pod relabelled",
        Box::new(|c, i| {
            let local = i % LOCAL_PODS;
            let edit = LabelEdit {
                set: pod_labels(local, namespaces, 1 + (i / LOCAL_PODS) % 5),
                remove: Vec::new(),
            };
            c.pod_labels(&pod_key(local, namespaces), &edit).unwrap();
        }),
    ));
    changes.push((
        "remote pod deleted",
        Box::new(|c, i| c.remote_pod_del(&pod_key(remote(i), namespaces)).unwrap()),
    ));
    changes.push((
        "remote pod added",
        Box::new(|c, i| {
            c.remote_pod_set(
                pod_key(remote(i), namespaces),
                remote_info(remote(i), namespaces, 0),
            )
            .unwrap()
        }),
    ));
    changes.push((
        "namespace relabelled",
        Box::new(|c, i| {
            let n = i % namespaces;
            let edit = LabelEdit {
                set: labels(&[(
                    "team",
                    format!("t{}", (n / NAMESPACES_PER_TEAM + 1 + i) % teams),
                )]),
                remove: Vec::new(),
            };
            c.namespace_labels(&format!("ns{n}"), &edit).unwrap();
        }),
    ));
    // `STORE_BENCH_ONLY=TEXT` measures only the changes whose name contains TEXT.
    let only = std::env::var("STORE_BENCH_ONLY").unwrap_or_default();
    println!("| change | median | p99 | flow mods (mean) |");
    println!("| --- | --- | --- | --- |");
    for (what, mut change) in changes {
        if !what.contains(only.as_str()) {
            continue;
        }
        let (median, p99, mods) = measure(&mut core, &mut change);
        println!(
            "| {what} | {:.3} ms | {:.3} ms | {mods:.1} |",
            ms(median),
            ms(p99)
        );
    }
}

/// 10,000 pods and 1,000 policies given to a core that had only the namespaces and its own
/// pods, as one batch: what a relist of the API costs the core.
fn relist() {
    let world = World {
        pods: 10_000,
        policies: 1_000,
    };
    let mut core = Core::new(NodeState {
        setup: Some(setup()),
        ..NodeState::default()
    })
    .unwrap();
    let n = world.namespaces();
    for ns in 0..n {
        step(&mut core, |c| c.namespace_set(namespace(ns)).unwrap());
    }
    let policies: Vec<_> = (0..world.policies)
        .map(|p| {
            let (ns, k) = (p / POLICIES_PER_NAMESPACE, p % POLICIES_PER_NAMESPACE);
            parse_netpol(policy_json(ns, n, k, k, 0).as_bytes()).unwrap()
        })
        .collect();
    let started = Instant::now();
    for i in 0..world.pods {
        if i < LOCAL_PODS {
            core.pod_attach(pod_key(i, n), attachment(i), pod_labels(i, n, 0))
                .unwrap();
        } else {
            core.remote_pod_set(pod_key(i, n), remote_info(i, n, 0))
                .unwrap();
        }
    }
    for policy in policies {
        core.netpol_apply(policy).unwrap();
    }
    let effects = core.take_effects();
    core.commit();
    println!(
        "## relist: 10,000 pods and 1,000 policies as one batch: {:.0} ms, {} flow mods",
        ms(started.elapsed()),
        effects.flows.len()
    );
}

/// openshift-sdn's NetworkPolicy shape: 200 pods of namespace `a` on this node let in 200 pods
/// of namespace `b` (on other nodes) by one policy. openshift-sdn wrote a flow per pair of
/// pods (40,000 here); ofnode's conjunction needs one per pod of each side and one per port.
fn openshift_sdn_shape() {
    let mut core = Core::new(NodeState {
        setup: Some(setup()),
        ..NodeState::default()
    })
    .unwrap();
    for (name, vnid) in [("a", 10), ("b", 11)] {
        let ns = Namespace {
            name: name.into(),
            vnid: Vnid::new(vnid).unwrap(),
            labels: Labels::new(),
            audit: Default::default(),
        };
        step(&mut core, |c| c.namespace_set(ns).unwrap());
    }
    let before = core.flows().len();
    let app = |v: &str| labels(&[("app", v.to_string())]);
    for i in 0..LOCAL_PODS {
        let key = PodKey::new("a", &format!("server-{i}")).unwrap();
        step(&mut core, |c| {
            c.pod_attach(key, attachment(i), app("server")).unwrap()
        });
        let key = PodKey::new("b", &format!("client-{i}")).unwrap();
        let info = PodInfo {
            labels: app("client"),
            ips: vec![IpAddr::V4(remote_ip(i))],
            local: false,
            ports: Vec::new(),
        };
        step(&mut core, |c| c.remote_pod_set(key, info).unwrap());
    }
    let with_pods = core.flows().len();
    let policy = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
        "metadata":{"name":"clients","namespace":"a"},
        "spec":{"podSelector":{"matchLabels":{"app":"server"}},
          "ingress":[{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"b"}},
                               "podSelector":{"matchLabels":{"app":"client"}}}],
                      "ports":[{"protocol":"TCP","port":8080}]}]}}"#;
    step(&mut core, |c| {
        c.netpol_apply(parse_netpol(policy.as_bytes()).unwrap())
            .unwrap()
    });
    println!(
        "## openshift-sdn's shape (200 x 200 pods in one namespace pair, one policy, one port): openshift-sdn 40,000 flows for it; ofnode {} ({} flows before any pod, {} with the pods)",
        core.flows().len() - with_pods,
        before,
        with_pods,
    );
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    // The RSS of the largest world, alone in a child process.
    if std::env::var_os("STORE_BENCH_RSS").is_some() {
        let (core, _) = World {
            pods: 50_000,
            policies: 5_000,
        }
        .build();
        println!(
            "## RSS at 50,000 pods / 5,000 policies ({} flows): {:.1} MB",
            core.flows().len(),
            rss_mb()
        );
        return;
    }
    // One world alone (`PODSxPOLICIES`, e.g. 50000x5000): what a profiler is pointed at.
    if let Ok(one) = std::env::var("STORE_BENCH_WORLD") {
        let parsed = one
            .split_once('x')
            .and_then(|(p, q)| Some((p.parse().ok()?, q.parse().ok()?)));
        let Some((pods, policies)) = parsed else {
            eprintln!("STORE_BENCH_WORLD={one:?}: expected PODSxPOLICIES, e.g. 50000x5000");
            std::process::exit(2);
        };
        run_world(&World { pods, policies });
        return;
    }
    let quick = std::env::var_os("STORE_BENCH_QUICK").is_some();
    let worlds: &[(usize, usize)] = if quick {
        &[(1_000, 500)]
    } else {
        &[
            (1_000, 500),
            (10_000, 500),
            (50_000, 500),
            (10_000, 5_000),
            (50_000, 5_000),
        ]
    };
    for &(pods, policies) in worlds {
        run_world(&World { pods, policies });
    }
    openshift_sdn_shape();
    if !quick {
        relist();
        let me = std::env::current_exe().expect("the bench's own path");
        let child = std::process::Command::new(me)
            .env("STORE_BENCH_RSS", "1")
            .output()
            .expect("the RSS run");
        print!("{}", String::from_utf8_lossy(&child.stdout));
    }
}
