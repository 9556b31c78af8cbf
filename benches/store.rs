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
//! smallest world (for a smoke run); `STORE_BENCH_WORLD=50000x5000` one world alone (for a
//! profiler).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use ofnode::sdn::core::{Core, LabelEdit};
use ofnode::sdn::policy::networkpolicy::parse_netpol;
use ofnode::sdn::{Labels, Mode, Namespace, NodeState, Pod, PodInfo, PodKey, SetupRequest, Vnid};

const PODS_PER_NAMESPACE: usize = 100;
const LOCAL_PODS: usize = 200;
const POLICIES_PER_NAMESPACE: usize = 10;
const APPS: usize = 10;
/// Namespaces per team (per value of the `team` label).
const NAMESPACES_PER_TEAM: usize = 10;
/// Changes of each kind measured per world.
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

fn labels(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn namespace(n: usize) -> Namespace {
    Namespace {
        name: format!("ns{n}"),
        vnid: Vnid::new(100 + n as u32).unwrap(),
        labels: labels(&[("team", format!("t{}", n / NAMESPACES_PER_TEAM))]),
    }
}

/// Pod `i` of a world of `namespaces`: local for the first `LOCAL_PODS`.
fn pod_key(i: usize, namespaces: usize) -> PodKey {
    PodKey::new(&format!("ns{}", i % namespaces), &format!("pod-{i}")).unwrap()
}

/// Pod `i`'s labels in a world of `namespaces`: the pods of one namespace have several apps.
fn pod_labels(i: usize, namespaces: usize, variant: usize) -> Labels {
    labels(&[("app", format!("a{}", (i / namespaces + variant) % APPS))])
}

fn local_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 10)) + i as u32)
}

fn remote_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 129, 0, 0)) + i as u32)
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

fn remote_info(i: usize, namespaces: usize, variant: usize) -> PodInfo {
    PodInfo {
        labels: pod_labels(i, namespaces, variant),
        ips: vec![IpAddr::V4(remote_ip(i))],
        local: false,
        ports: Vec::new(),
    }
}

/// Policy `name` of namespace `ns` (of `namespaces`), for the pods of app `k`: peers of its
/// own team's namespaces (variant 0) or a neighbour team's.
fn policy_json(ns: usize, namespaces: usize, name: usize, k: usize, variant: usize) -> String {
    let teams = namespaces.div_ceil(NAMESPACES_PER_TEAM);
    let app = k % APPS;
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"p{name}","namespace":"ns{ns}"}},
            "spec":{{"podSelector":{{"matchLabels":{{"app":"a{app}"}}}},
              "ingress":[{{"from":[{{"namespaceSelector":{{"matchLabels":{{"team":"t{team}"}}}},
                                     "podSelector":{{"matchLabels":{{"app":"a{peer}"}}}}}}],
                           "ports":[{{"protocol":"TCP","port":8000,"endPort":{end}}},
                                    {{"protocol":"UDP","port":53}}]}}]}}}}"#,
        team = (ns / NAMESPACES_PER_TEAM + variant) % teams,
        peer = (k + 1 + variant) % APPS,
        end = 8080 + variant,
    )
}

/// Runs one operation as a batch of its own; the flow mods it made.
fn step(core: &mut Core, op: impl FnOnce(&mut Core)) -> usize {
    op(core);
    let effects = core.take_effects();
    core.commit();
    effects.flows.len()
}

struct World {
    pods: usize,
    policies: usize,
}

impl World {
    fn namespaces(&self) -> usize {
        self.pods
            .div_ceil(PODS_PER_NAMESPACE)
            .max(self.policies.div_ceil(POLICIES_PER_NAMESPACE))
    }

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

/// (median, p99, mean flow mods) of `samples` runs of `op(i)`.
fn measure(core: &mut Core, mut op: impl FnMut(&mut Core, usize)) -> (Duration, Duration, f64) {
    let mut times = Vec::with_capacity(SAMPLES);
    let mut mods = 0;
    for i in 0..SAMPLES {
        let started = Instant::now();
        mods += step(core, |c| op(c, i));
        times.push(started.elapsed());
    }
    times.sort();
    let p = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    (p(0.5), p(0.99), mods as f64 / SAMPLES as f64)
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
    let teams = namespaces.div_ceil(NAMESPACES_PER_TEAM);
    let remote = |i: usize| LOCAL_PODS + (i * 7919) % (world.pods - LOCAL_PODS);
    let mut rows: Vec<(&str, (Duration, Duration, f64))> = Vec::new();
    rows.push((
        "policy replaced (new peers and ports)",
        measure(&mut core, |c, i| {
            let p = (i * 31) % world.policies;
            let (ns, k) = (p / POLICIES_PER_NAMESPACE, p % POLICIES_PER_NAMESPACE);
            let json = policy_json(ns, namespaces, k, k, 1 + i % 3);
            c.netpol_apply(parse_netpol(json.as_bytes()).unwrap())
                .unwrap();
        }),
    ));
    rows.push((
        "policy added",
        measure(&mut core, |c, i| {
            let json = policy_json(i % namespaces, namespaces, 100 + i, i, 0);
            c.netpol_apply(parse_netpol(json.as_bytes()).unwrap())
                .unwrap();
        }),
    ));
    rows.push((
        "policy deleted",
        measure(&mut core, |c, i| {
            c.netpol_del(&format!("ns{}", i % namespaces), &format!("p{}", 100 + i))
                .unwrap();
        }),
    ));
    rows.push((
        "remote pod relabelled",
        measure(&mut core, |c, i| {
            let edit = LabelEdit {
                set: pod_labels(remote(i), namespaces, 1 + i % 5),
                remove: Vec::new(),
            };
            c.pod_labels(&pod_key(remote(i), namespaces), &edit)
                .unwrap();
        }),
    ));
    rows.push((
        "local pod relabelled",
        measure(&mut core, |c, i| {
            let local = i % LOCAL_PODS;
            let edit = LabelEdit {
                set: pod_labels(local, namespaces, 1 + i % 5),
                remove: Vec::new(),
            };
            c.pod_labels(&pod_key(local, namespaces), &edit).unwrap();
        }),
    ));
    rows.push((
        "remote pod deleted",
        measure(&mut core, |c, i| {
            c.remote_pod_del(&pod_key(remote(i), namespaces)).unwrap()
        }),
    ));
    rows.push((
        "remote pod added",
        measure(&mut core, |c, i| {
            c.remote_pod_set(
                pod_key(remote(i), namespaces),
                remote_info(remote(i), namespaces, 0),
            )
            .unwrap()
        }),
    ));
    rows.push((
        "namespace relabelled",
        measure(&mut core, |c, i| {
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
    println!("| change | median | p99 | flow mods (mean) |");
    println!("| --- | --- | --- | --- |");
    for (what, (median, p99, mods)) in rows {
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
