//! The NetworkPolicy mode in the core: the incremental recompute gives the very table a full
//! build gives, and (printed, not asserted) what a change costs at the issue's scale.

use std::net::Ipv4Addr;
use std::time::Instant;

use super::*;
use crate::sdn::policy::networkpolicy::model::{Namespace, PodMeta, RemotePod};
use crate::sdn::policy::networkpolicy::parse_netpol;

const NAMESPACES: usize = 50;
const APPS: usize = 10;
const TEAMS: usize = 5;

fn labels(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn namespace(ns: usize) -> Namespace {
    Namespace {
        name: format!("ns{ns}"),
        vnid: vnid(100 + ns as u32),
        labels: labels(&[("team", format!("t{}", ns % TEAMS))]),
    }
}

/// Local pod `i` (10.128.0.10 + i, port 10 + i) of namespace `i % 50`, labelled
/// app=a{(i / 50) % 10} (so each namespace has pods of several apps).
fn local_pod(i: usize) -> (Pod, PodMeta) {
    let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 10)) + i as u32);
    let pod = Pod {
        veth: Some(format!("bp{i}").parse().unwrap()),
        ip,
        mac: MacAddr([0x0a, 0x58, 0, 0, (i >> 8) as u8, i as u8]),
        sandbox: format!("{:064x}", 0xb000 + i).parse().unwrap(),
        vnid: Vnid::GLOBAL,
        ofport: 10 + i as u16,
    };
    let meta = PodMeta {
        namespace: format!("ns{}", i % NAMESPACES),
        labels: labels(&[("app", format!("a{}", (i / NAMESPACES) % APPS))]),
    };
    (pod, meta)
}

fn remote_pod(i: usize) -> RemotePod {
    RemotePod {
        ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 2, 10)) + i as u32),
        namespace: format!("ns{}", i % NAMESPACES),
        labels: labels(&[("app", format!("a{}", (i / NAMESPACES + 3) % APPS))]),
    }
}

/// The bench's policy (benches/netpol.rs): one app label selected, peers by namespace label
/// and pod label, a TCP port range and a UDP port.
fn bench_policy(
    ns: usize,
    k: usize,
    variant: usize,
) -> crate::sdn::policy::networkpolicy::model::NetPol {
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"p{k}","namespace":"ns{ns}"}},
            "spec":{{"podSelector":{{"matchLabels":{{"app":"a{k}"}}}},
              "ingress":[{{"from":[{{"namespaceSelector":{{"matchLabels":{{"team":"t{team}"}}}},
                                     "podSelector":{{"matchLabels":{{"app":"a{peer}"}}}}}}],
                           "ports":[{{"protocol":"TCP","port":8000,"endPort":{end}}},
                                    {{"protocol":"UDP","port":53}}]}}]}}}}"#,
        team = (k + variant) % TEAMS,
        peer = (k + 1) % APPS,
        end = 8080 + variant,
    );
    parse_netpol(json.as_bytes()).unwrap()
}

/// The table a core built afresh from `core`'s state holds, as ovs-ofctl prints it.
fn rebuilt(core: &Core) -> BTreeSet<String> {
    let fresh = Core::new(core.state().clone()).unwrap();
    fresh.flows().iter().map(Flow::describe).collect()
}

fn held(core: &Core) -> BTreeSet<String> {
    core.flows().iter().map(Flow::describe).collect()
}

/// A core in the networkpolicy mode with `locals` local pods, `remotes` remote pods and the
/// bench's 10 policies in each of the 50 namespaces.
fn world(locals: usize, remotes: usize) -> Core {
    let mut core = set_up(Mode::NetworkPolicy);
    for ns in 0..NAMESPACES {
        run(&mut core, |c| c.namespace_set(namespace(ns)).unwrap());
    }
    for i in 0..locals {
        let (pod, meta) = local_pod(i);
        run(&mut core, |c| c.pod_add_with_meta(pod, Some(meta)).unwrap());
    }
    for i in 0..remotes {
        run(&mut core, |c| c.remote_pod_set(remote_pod(i)).unwrap());
    }
    for ns in 0..NAMESPACES {
        for k in 0..10 {
            run(&mut core, |c| {
                c.netpol_apply(bench_policy(ns, k, 0)).unwrap()
            });
        }
    }
    core
}

/// One operation on the core.
type Step = Box<dyn Fn(&mut Core)>;

#[test]
fn every_change_leaves_the_table_a_full_build_gives() {
    let mut core = world(60, 80);
    assert_eq!(held(&core), rebuilt(&core));
    let mut steps: Vec<(&str, Step)> = vec![
        (
            "policy replaced",
            Box::new(|c| c.netpol_apply(bench_policy(3, 2, 4)).unwrap()),
        ),
        (
            "policy deleted",
            Box::new(|c| c.netpol_del("ns3", "p3").unwrap()),
        ),
        (
            "pod relabelled",
            Box::new(|c| {
                let sandbox = local_pod(7).0.sandbox;
                c.pod_labels(&sandbox, labels(&[("app", "a3".into())]))
                    .unwrap()
            }),
        ),
        (
            "pod deleted",
            Box::new(|c| c.pod_del(local_pod(8).0.ip, None).unwrap()),
        ),
        (
            "pod added",
            Box::new(|c| {
                let (pod, meta) = local_pod(70);
                c.pod_add_with_meta(pod, Some(meta)).unwrap()
            }),
        ),
        (
            "namespace relabelled",
            Box::new(|c| {
                let mut ns = namespace(4);
                ns.labels = labels(&[("team", "t0".into())]);
                c.namespace_set(ns).unwrap()
            }),
        ),
        (
            "remote pod deleted",
            Box::new(|c| c.remote_pod_del(remote_pod(5).ip).unwrap()),
        ),
        (
            "remote pod moved",
            Box::new(|c| {
                let mut pod = remote_pod(6);
                pod.namespace = "ns9".into();
                c.remote_pod_set(pod).unwrap()
            }),
        ),
        (
            "all-pods policy",
            Box::new(|c| {
                let json = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
                    "metadata":{"name":"all","namespace":"ns1"},
                    "spec":{"podSelector":{},"policyTypes":["Ingress","Egress"],
                      "ingress":[{"from":[{"podSelector":{}}]}],
                      "egress":[{"to":[{"namespaceSelector":{}}]}]}}"#;
                c.netpol_apply(parse_netpol(json.as_bytes()).unwrap())
                    .unwrap()
            }),
        ),
    ];
    for (what, step) in steps.drain(..) {
        run(&mut core, |c| step(c));
        assert_eq!(held(&core), rebuilt(&core), "after: {what}");
    }
    // A batch rolled back leaves the table (and the next change) as a full build has it.
    core.netpol_apply(bench_policy(5, 5, 9)).unwrap();
    core.pod_del(local_pod(9).0.ip, None).unwrap();
    let _ = core.take_effects();
    core.rollback();
    assert_eq!(held(&core), rebuilt(&core), "after a rollback");
    run(&mut core, |c| {
        c.netpol_apply(bench_policy(5, 6, 3)).unwrap()
    });
    assert_eq!(
        held(&core),
        rebuilt(&core),
        "after a change after a rollback"
    );
}

/// The issue's scale (1,000 pods: 200 local, 800 remote; 50 namespaces; 500 policies): what
/// installing them, one policy change and one pod add cost in the core (printed, never
/// asserted; `cargo test --release --lib scale -- --nocapture` for real numbers).
#[test]
#[ignore = "a timing print, not a test of behaviour (seconds in a debug build): benches/netpol.rs measures the cost; `cargo test --release --lib scale -- --ignored --nocapture` prints the core's part"]
fn the_cost_of_a_change_at_scale_is_printed() {
    let started = Instant::now();
    let mut core = world(200, 800);
    let install = started.elapsed();
    // Each local pod: the seed's four flows and its table 25 flow.
    let base = set_up(Mode::NetworkPolicy).flows().len() + 200 * 5;
    let policy_flows = core.flows().len() - base;
    let mut changes = Vec::new();
    let mut sizes = Vec::new();
    for variant in 1..=20 {
        let started = Instant::now();
        core.netpol_apply(bench_policy(variant % NAMESPACES, 0, variant))
            .unwrap();
        let effects = core.take_effects();
        core.commit();
        changes.push(started.elapsed());
        sizes.push(effects.flows.len());
    }
    changes.sort();
    let started = Instant::now();
    let (pod, meta) = local_pod(300);
    let ((), effects) = run(&mut core, |c| c.pod_add_with_meta(pod, Some(meta)).unwrap());
    let pod_add = started.elapsed();
    eprintln!(
        "networkpolicy core at scale: install of 500 policies {install:?}; {policy_flows} policy flows ({:.1} per policy); one policy change median {:?} ({} flow mods); one pod add {pod_add:?} ({} flow mods)",
        policy_flows as f64 / 500.0,
        changes[changes.len() / 2],
        sizes[sizes.len() / 2],
        effects.flows.len(),
    );
}
