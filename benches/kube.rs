//! Issue 28, scale (the node's half): one real kube-apiserver, the 3 real nodes of the harness
//! cluster (private OVS each, following the API server), plus N simulated nodes — ofnode's own
//! follower (watchers, mirror, apply) over a bare core whose committed batches go to a
//! recorder instead of a switch — in this process, for each N of `OFNODE_KUBE_BENCH_NODES`
//! (default `100,500`).
//!
//! Measured: a NetworkPolicy created (and a pod label changed) → applied on every node (a real
//! node: its bundle committed, seen as the policy's resourceVersion in its status; a simulated
//! one: its core applied), p50 / p99 over every (node, change); the CPU and RSS of the API
//! server, each real daemon and the simulated nodes' process; the watch events each node got
//! (no periodic resync: after the list, only changes travel). Then the kube-burner shape (240
//! namespaces × 20 policies × 10 pods created as fast as the API server takes them, with
//! `OFNODE_KUBE_BENCH_BURNER_NODES` simulated nodes, default 100) and a relist after 410 at
//! 10,000 pods / 1,000 policies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, Patch, PatchParams, PostParams};
use ofnode::kube::{CoreSink, Networks, Tracker};
use ofnode::sdn::core::Core;
use ofnode::sdn::{Mode, NodeState};
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control};
use ofnode_harness::kube::PodObject;
use serde_json::json;

const CHANGES: usize = 20;
const CLUSTER_NETWORK: &str = "10.128.0.0/14";
const SERVICE_NETWORK: &str = "172.30.0.0/16";

fn main() {
    raise_fd_limit();
    let sizes: Vec<usize> = std::env::var("OFNODE_KUBE_BENCH_NODES")
        .unwrap_or_else(|_| "100,500".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let mut cluster = Cluster::start_following_kube(ClusterOptions {
        nodes: 3,
        mode: ofnode_harness::cluster::Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .expect("a 3-node cluster following the API server");
    cluster
        .create_kube_namespace("bench", 21, &[("team", "bench")])
        .expect("namespace");
    let _pods: Vec<_> = (0..3)
        .map(|node| {
            let object = PodObject::new("bench", &format!("web-{node}"), "").label("app", "web");
            cluster.start_kube_pod(node, object).expect("pod")
        })
        .collect();
    cluster
        .wait_kube_synced(Duration::from_secs(60))
        .expect("synced");
    let api = cluster.kube_api().expect("API server");
    let admin = api.admin_kubeconfig().to_path_buf();
    let node_kubeconfig = api
        .kubeconfig_for_service_account("ofnode", "ofnode-node")
        .expect("node credentials");
    let underlay = cluster.underlay();
    // The 3 real nodes have the first three subnets.
    let first_sim = 3;
    println!("kube scale bench: 3 real nodes + N simulated, {CHANGES} changes each");
    let daemons: Vec<u32> = cluster
        .nodes()
        .iter()
        .filter_map(|n| n.daemon()?.pid())
        .collect();
    let apiserver = api.pid().unwrap_or(0);
    let sockets: Vec<_> = cluster
        .nodes()
        .iter()
        .map(|n| n.daemon().unwrap().api.clone())
        .collect();
    for n in sizes {
        add_simulated_host_subnets(&cluster, first_sim..first_sim + n);
        let range = first_sim..first_sim + n;
        let (sockets, daemons) = (sockets.clone(), daemons.clone());
        let (admin, node_kubeconfig) = (admin.clone(), node_kubeconfig.clone());
        in_underlay(
            underlay,
            scale(
                n,
                range,
                admin,
                node_kubeconfig,
                sockets,
                daemons,
                apiserver,
            ),
        );
        remove_simulated_host_subnets(&cluster);
    }
    let burner_nodes: usize = std::env::var("OFNODE_KUBE_BENCH_BURNER_NODES")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(100);
    add_simulated_host_subnets(&cluster, first_sim..first_sim + burner_nodes);
    in_underlay(
        underlay,
        burner(
            first_sim..first_sim + burner_nodes,
            admin.clone(),
            node_kubeconfig.clone(),
            sockets,
            daemons,
            apiserver,
        ),
    );
    remove_simulated_host_subnets(&cluster);
    relist_after_410(&mut cluster, admin, node_kubeconfig);
}

/// Runs `part` to its end on a runtime of 2 threads inside the underlay namespace, where the
/// API server's address is.
fn in_underlay(
    underlay: &ofnode_harness::Netns,
    part: impl std::future::Future<Output = ()> + Send,
) {
    underlay
        .run_in(move || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(part)
        })
        .expect("a part of the bench, in the underlay");
}

/// The HostSubnets of simulated nodes `range` (their subnets follow the 3 real nodes').
fn add_simulated_host_subnets(cluster: &Cluster, range: std::ops::Range<usize>) {
    let items: Vec<serde_json::Value> = range
        .map(|i| {
            let subnet = format!("10.{}.{}.0/23", 128 + (2 * i) / 256, (2 * i) % 256);
            json!({"apiVersion": "network.openshift.io/v1", "kind": "HostSubnet",
                "metadata": {"name": format!("sim-{i}"), "labels": {"ofnode-bench": "sim"}},
                "host": format!("sim-{i}"),
                "hostIP": format!("198.51.100.{}", 1 + i % 250), "subnet": subnet})
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    cluster
        .kube_admin()
        .unwrap()
        .apply(&list.to_string())
        .expect("HostSubnets");
}

/// The simulated nodes leave: the next part starts from the same subnets.
fn remove_simulated_host_subnets(cluster: &Cluster) {
    cluster
        .kube_admin()
        .unwrap()
        .run(&["delete", "hostsubnet", "-l", "ofnode-bench=sim"])
        .expect("delete the simulated nodes' HostSubnets");
}

/// A relist after 410 at `OFNODE_KUBE_BENCH_RELIST` pods and policies (default 10000,1000):
/// the objects created, one simulated node synced with them, then the API server restarted
/// (a restarted server's watch cache starts later: the node's watches get 410 and list again);
/// the time from the server answering again until the node is synced again, and whether its
/// flows are the same.
fn relist_after_410(
    cluster: &mut Cluster,
    admin: std::path::PathBuf,
    node_kubeconfig: std::path::PathBuf,
) {
    let sizes = std::env::var("OFNODE_KUBE_BENCH_RELIST").unwrap_or_else(|_| "10000,1000".into());
    let mut sizes = sizes
        .split(',')
        .filter_map(|n| n.trim().parse::<usize>().ok());
    let (Some(pods), Some(policies)) = (sizes.next(), sizes.next()) else {
        return;
    };
    let hs = json!({"apiVersion": "network.openshift.io/v1", "kind": "HostSubnet",
        "metadata": {"name": "sim-3"}, "host": "sim-3", "hostIP": "198.51.100.3",
        "subnet": "10.128.6.0/23"});
    cluster
        .kube_admin()
        .unwrap()
        .apply(&hs.to_string())
        .expect("HostSubnet");
    let underlay = cluster.underlay().path();
    let (restart_tx, restart_rx) = std::sync::mpsc::channel::<()>();
    let (restarted_tx, restarted_rx) = std::sync::mpsc::channel::<()>();
    let api = cluster.kube_api_mut().expect("API server");
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let netns = std::fs::File::open(&underlay).expect("the underlay");
            // SAFETY: setns on a valid namespace fd changes only this thread (and the runtime's
            // threads it starts, which inherit it).
            let rc =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&netns), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns into the underlay");
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(relist(
                pods,
                policies,
                admin,
                node_kubeconfig,
                restart_tx,
                restarted_rx,
            ));
        });
        for () in restart_rx {
            api.kill();
            api.spawn().expect("the API server again");
            let _ = restarted_tx.send(());
        }
    });
}

async fn relist(
    pods: usize,
    policies: usize,
    admin: std::path::PathBuf,
    node_kubeconfig: std::path::PathBuf,
    restart: std::sync::mpsc::Sender<()>,
    restarted: std::sync::mpsc::Receiver<()>,
) {
    let admin = client(admin).await;
    let created = Instant::now();
    let namespaces = 100;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let nets: Api<kube::core::DynamicObject> = Api::all_with(
        admin.clone(),
        &kube::core::ApiResource::erase::<ofnode::kube::crd::NetNamespace>(&()),
    );
    for i in 0..namespaces {
        let name = format!("r{i}");
        let ns = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"group": format!("g{}", i % 10)}}}),
        )
        .unwrap();
        nss.create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        let net = serde_json::from_value(
            json!({"apiVersion": "network.openshift.io/v1", "kind": "NetNamespace",
            "metadata": {"name": name}, "netname": name, "netid": 1000 + i}),
        )
        .unwrap();
        nets.create(&PostParams::default(), &net)
            .await
            .expect("NetNamespace");
    }
    let creates = (0..pods).map(|i| {
        let admin = admin.clone();
        async move {
            let ns = format!("r{}", i % namespaces);
            let api: Api<Pod> = Api::namespaced(admin, &ns);
            let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}"),
                "labels": {"app": format!("a{}", i % 20), "tier": format!("t{}", i % 3)}},
                "spec": {"nodeName": "elsewhere", "containers": [{"name": "c", "image": "ofnode.invalid/x"}]}})).unwrap();
            let made = api.create(&PostParams::default(), &pod).await.expect("pod");
            let ip = format!("10.129.{}.{}", (i / 250) % 256, 2 + i % 250);
            let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
            api.patch_status(&made.metadata.name.unwrap(), &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("pod status");
        }
    });
    futures::stream::iter(creates)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let policy_creates = (0..policies).map(|i| {
        let admin = admin.clone();
        async move {
            let ns = format!("r{}", i % namespaces);
            let api: Api<NetworkPolicy> = Api::namespaced(admin, &ns);
            let policy: NetworkPolicy = serde_json::from_value(json!({"metadata": {"name": format!("np{i}")},
                "spec": {"podSelector": {"matchLabels": {"app": format!("a{}", i % 20)}},
                         "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"group": format!("g{}", i % 10)}},
                                                "podSelector": {"matchLabels": {"tier": format!("t{}", i % 3)}}}],
                                      "ports": [{"port": 8000 + (i % 100) as i32}]}]}})).unwrap();
            api.create(&PostParams::default(), &policy).await.expect("policy");
        }
    });
    futures::stream::iter(policy_creates)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    println!(
        "relist: {pods} pods (with addresses) and {policies} policies in {namespaces} namespaces created in {:.1} s",
        created.elapsed().as_secs_f64()
    );
    let networks = Networks {
        cluster_network: CLUSTER_NETWORK.parse().unwrap(),
        service_network: SERVICE_NETWORK.parse().unwrap(),
        mode: Mode::NetworkPolicy,
    };
    let flows = Arc::new(AtomicU64::new(0));
    let counted = flows.clone();
    let sink = CoreSink::new(
        Core::new(NodeState::default()).expect("a core"),
        Box::new(move |diff| {
            counted.fetch_add(
                (diff.adds.len() + diff.deletes.len()) as u64,
                Ordering::Relaxed,
            );
        }),
    );
    let started = Instant::now();
    let (task, _shared, tracker, _commands) = ofnode::kube::follow(
        client(node_kubeconfig).await,
        sink,
        "sim-3",
        networks,
        "bench",
    );
    wait_synced(&tracker, Duration::from_secs(300)).await;
    println!(
        "relist: one node listed {pods} pods / {policies} policies and applied them in {:.2} s (first list, empty store)",
        started.elapsed().as_secs_f64()
    );
    let before = flows.load(Ordering::Relaxed);
    // A change of another kind after the last pod and policy: the restarted server's watch
    // cache starts past every watch's resourceVersion, so the pods' and policies' expire too.
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), "default");
    let marker = serde_json::from_value(json!({"metadata": {"name": "relist-marker"}})).unwrap();
    config_maps
        .create(&PostParams::default(), &marker)
        .await
        .expect("ConfigMap");
    restart.send(()).expect("restart request");
    tokio::task::spawn_blocking(move || restarted.recv())
        .await
        .expect("join")
        .expect("restarted");
    // From the moment the server answers again: its watches get 410 and list again.
    let back = Instant::now();
    let relists = |t: &Tracker| {
        t.snapshot()
            .resources
            .iter()
            .filter(|r| r.relists > 0)
            .count()
    };
    let relisted = |t: &Tracker, kind: &str| {
        t.snapshot()
            .resources
            .iter()
            .any(|r| r.kind == kind && r.relists > 0)
    };
    while !(relisted(&tracker, "Pod") && relisted(&tracker, "NetworkPolicy"))
        && back.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let relisting = back.elapsed();
    wait_synced(&tracker, Duration::from_secs(300)).await;
    println!(
        "relist: after the API server restarted, the node's watches got 410 and listed again ({} kinds, Pods and NetworkPolicies among them), the last of those two starting {:.2} s after it answered (kube-runtime's backoff); {pods} pods / {policies} policies listed and applied {:.2} s after that (goal ≤ 2 s); flow changes meanwhile: {} (the same flows)",
        relists(&tracker),
        relisting.as_secs_f64(),
        (back.elapsed() - relisting).as_secs_f64(),
        flows.load(Ordering::Relaxed) - before,
    );
    task.abort();
}

async fn wait_synced(tracker: &Tracker, limit: Duration) {
    let started = Instant::now();
    while !tracker.synced() {
        assert!(
            started.elapsed() < limit,
            "not synced within {limit:?}: {:?}",
            tracker.snapshot()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The kube-burner shape of OVN-Kubernetes' policy test: 240 namespaces (fewer with
/// `OFNODE_KUBE_BENCH_BURNER_NAMESPACES`, for a quick try), this many policies and pods in each.
const BURNER_NAMESPACES: usize = 240;
const BURNER_POLICIES: usize = 20;
const BURNER_PODS: usize = 10;
/// Requests the bench keeps in flight to the API server ("as fast as it takes them").
const IN_FLIGHT: usize = 16;

/// The applied resourceVersions of one node over time: (when, NetworkPolicy's, Pod's).
type Timeline = Vec<(Instant, u64, u64)>;

/// The kube-burner shape: with the 3 real nodes and the simulated nodes of `range` synced,
/// 240 namespaces (each with its NetNamespace), then 10 pods each (with their addresses: on
/// no node of the bench, so every node has them as other nodes' pods) and 20 policies each,
/// created with 16 requests in flight. Measured: the time from the first create until every
/// node applied all of it, and for each policy the time from its create until every node
/// applied it (a node's applied NetworkPolicy resourceVersion reached the policy's), p50/p99.
async fn burner(
    range: std::ops::Range<usize>,
    admin: std::path::PathBuf,
    node_kubeconfig: std::path::PathBuf,
    sockets: Vec<std::path::PathBuf>,
    daemons: Vec<u32>,
    apiserver: u32,
) {
    let n = range.len();
    let namespaces: usize = std::env::var("OFNODE_KUBE_BENCH_BURNER_NAMESPACES")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(BURNER_NAMESPACES);
    let flows = Arc::new(AtomicU64::new(0));
    let sims = Simulated::start(range, &node_kubeconfig, &flows).await;
    let trackers = sims.trackers.clone();
    let cpu_before = (
        cpu_seconds(apiserver),
        cpu_seconds(std::process::id()),
        daemons
            .iter()
            .map(|pid| cpu_seconds(*pid))
            .collect::<Vec<_>>(),
    );
    let admin = client(admin).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = tokio::spawn(record_applied(
        trackers.clone(),
        sockets.clone(),
        stop.clone(),
    ));

    let started = Instant::now();
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let nets: Api<kube::core::DynamicObject> = Api::all_with(
        admin.clone(),
        &kube::core::ApiResource::erase::<ofnode::kube::crd::NetNamespace>(&()),
    );
    let namespace_creates = (0..namespaces).map(|i| {
        let (nss, nets) = (nss.clone(), nets.clone());
        async move {
            let name = format!("burner-{i}");
            let ns = serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {"group": format!("g{}", i % 10)}}}),
            )
            .unwrap();
            nss.create(&PostParams::default(), &ns)
                .await
                .expect("namespace");
            let net = serde_json::from_value(json!({"apiVersion": "network.openshift.io/v1",
                "kind": "NetNamespace", "metadata": {"name": name}, "netname": name,
                "netid": 3000 + i}))
            .unwrap();
            nets.create(&PostParams::default(), &net)
                .await
                .expect("NetNamespace");
        }
    });
    in_flight(namespace_creates).await;
    let pod_creates = (0..namespaces * BURNER_PODS).map(|i| {
        let api: Api<Pod> = Api::namespaced(admin.clone(), &format!("burner-{}", i / BURNER_PODS));
        async move {
            let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}"),
                "labels": {"app": format!("a{}", i % BURNER_POLICIES), "tier": format!("t{}", i % 3)}},
                "spec": {"nodeName": "elsewhere", "containers": [{"name": "c", "image": "ofnode.invalid/x"}]}}))
            .unwrap();
            let made = api.create(&PostParams::default(), &pod).await.expect("pod");
            let ip = format!("10.{}.{}.{}", 130 + i / 62500, (i / 250) % 250, 2 + i % 250);
            let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
            let patched = api
                .patch_status(&made.metadata.name.unwrap(), &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("pod status");
            rv_of(&patched.metadata)
        }
    });
    let pod_rv = in_flight(pod_creates).await.into_iter().max().unwrap_or(0);
    let policy_creates = (0..namespaces * BURNER_POLICIES).map(|i| {
        let api: Api<NetworkPolicy> =
            Api::namespaced(admin.clone(), &format!("burner-{}", i / BURNER_POLICIES));
        async move {
            let policy: NetworkPolicy = serde_json::from_value(json!({"metadata": {"name": format!("np{i}")},
                "spec": {"podSelector": {"matchLabels": {"app": format!("a{}", i % BURNER_POLICIES)}},
                         "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"group": format!("g{}", i % 10)}},
                                                "podSelector": {"matchLabels": {"tier": format!("t{}", i % 3)}}}],
                                      "ports": [{"port": 8000 + (i % 100) as i32}]}]}}))
            .unwrap();
            let sent = Instant::now();
            let made = api.create(&PostParams::default(), &policy).await.expect("policy");
            (sent, rv_of(&made.metadata))
        }
    });
    let policies = in_flight(policy_creates).await;
    let created = started.elapsed();
    let policy_rv = policies.iter().map(|(_, rv)| *rv).max().unwrap_or(0);
    let all_applied = |timeline: &Timeline| {
        timeline
            .iter()
            .find(|(_, np, pod)| *np >= policy_rv && *pod >= pod_rv)
            .map(|(at, _, _)| *at)
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = applied_now(&trackers, &sockets).await;
        let everyone = now
            .iter()
            .all(|(_, np, pod)| *np >= policy_rv && *pod >= pod_rv);
        if everyone || Instant::now() > deadline {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let recorded = watcher.await.expect("the recorder");
    let finished: Vec<Option<Instant>> = recorded.iter().map(all_applied).collect();
    let missing = finished.iter().filter(|f| f.is_none()).count();
    let everything = finished.iter().flatten().max().map(|at| *at - started);
    // Per policy, until every node of `nodes` (timelines) applied it.
    let per_policy = |nodes: &[Timeline]| -> Vec<Duration> {
        policies
            .iter()
            .map(|(sent, rv)| {
                nodes
                    .iter()
                    .map(|timeline| {
                        timeline
                            .iter()
                            .find(|(_, np, _)| np >= rv)
                            .map_or(Duration::from_secs(900), |(at, _, _)| {
                                at.saturating_duration_since(*sent)
                            })
                    })
                    .max()
                    .unwrap_or_default()
            })
            .collect()
    };
    let mut everywhere = per_policy(&recorded);
    // The real nodes are recorded after the simulated ones.
    let mut on_real_nodes = per_policy(&recorded[trackers.len()..]);
    let total = namespaces * BURNER_POLICIES;
    let pods = namespaces * BURNER_PODS;
    println!(
        "burner: {namespaces} namespaces × {BURNER_POLICIES} policies × {BURNER_PODS} pods ({total} policies, {pods} pods) created with {IN_FLIGHT} requests in flight in {:.1} s; 3 real + {n} simulated nodes",
        created.as_secs_f64()
    );
    match everything {
        Some(all) if missing == 0 => println!(
            "burner: every node had all of it {:.1} s after the first create",
            all.as_secs_f64()
        ),
        _ => println!(
            "burner: {missing} of {} nodes did not have all of it within 900 s",
            recorded.len()
        ),
    }
    println!(
        "burner: a policy created → applied on every node, {total} policies: p50 {} / p99 {} / max {}",
        ms(percentile(&mut everywhere, 0.5)),
        ms(percentile(&mut everywhere, 0.99)),
        ms(percentile(&mut everywhere, 1.0)),
    );
    println!(
        "burner: a policy created → applied on the 3 real nodes (bundle committed), {total} policies: p50 {} / p99 {} / max {}",
        ms(percentile(&mut on_real_nodes, 0.5)),
        ms(percentile(&mut on_real_nodes, 0.99)),
        ms(percentile(&mut on_real_nodes, 1.0)),
    );
    println!(
        "burner: RSS: kube-apiserver {} MB, real ofnode daemons {} MB, the simulated nodes' process {} MB ({:.2} MB per node); CPU over the part: kube-apiserver {:.1} s, real ofnode daemons {} s, the simulated nodes' process {:.1} s; flows recorded on the simulated nodes {}",
        rss_mb(apiserver),
        daemons.iter().map(|pid| format!("{}", rss_mb(*pid))).collect::<Vec<_>>().join("/"),
        rss_mb(std::process::id()),
        rss_mb(std::process::id()) as f64 / n.max(1) as f64,
        cpu_seconds(apiserver) - cpu_before.0,
        daemons
            .iter()
            .zip(&cpu_before.2)
            .map(|(pid, before)| format!("{:.1}", cpu_seconds(*pid) - before))
            .collect::<Vec<_>>()
            .join("/"),
        cpu_seconds(std::process::id()) - cpu_before.1,
        flows.load(Ordering::Relaxed),
    );
    drop(sims);
    // The relist part that follows lists what is left: the pods and policies go.
    for i in 0..namespaces {
        let ns = format!("burner-{i}");
        let delete = kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let lists = kube::api::ListParams::default();
        let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
        pods.delete_collection(&delete, &lists)
            .await
            .expect("delete pods");
        let policies: Api<NetworkPolicy> = Api::namespaced(admin.clone(), &ns);
        policies
            .delete_collection(&delete, &lists)
            .await
            .expect("delete policies");
    }
}

/// `creates` run with [`IN_FLIGHT`] at a time; their results in any order.
async fn in_flight<T>(
    creates: impl Iterator<Item = impl std::future::Future<Output = T>>,
) -> Vec<T> {
    futures::stream::iter(creates)
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await
}

fn rv_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// Each node's applied (NetworkPolicy, Pod) resourceVersions now: simulated, then real.
async fn applied_now(
    trackers: &[Arc<Tracker>],
    sockets: &[std::path::PathBuf],
) -> Vec<(Instant, u64, u64)> {
    let mut now = Vec::new();
    for tracker in trackers {
        now.push(applied_versions(&tracker.snapshot()));
    }
    for socket in sockets {
        let status = real_status(socket).await.unwrap_or_default();
        now.push(applied_versions(&status));
    }
    now
}

fn applied_versions(status: &ofnode::kube::KubeStatus) -> (Instant, u64, u64) {
    let of = |kind: &str| {
        status
            .resources
            .iter()
            .find(|r| r.kind == kind)
            .and_then(|r| r.resource_version.as_deref()?.parse().ok())
            .unwrap_or(0)
    };
    (Instant::now(), of("NetworkPolicy"), of("Pod"))
}

/// Records every node's applied resourceVersions whenever they change (polled every 5 ms)
/// until `stop`.
async fn record_applied(
    trackers: Vec<Arc<Tracker>>,
    sockets: Vec<std::path::PathBuf>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<Timeline> {
    let mut timelines: Vec<Timeline> = vec![Vec::new(); trackers.len() + sockets.len()];
    while !stop.load(Ordering::Relaxed) {
        for (timeline, now) in timelines
            .iter_mut()
            .zip(applied_now(&trackers, &sockets).await)
        {
            if timeline
                .last()
                .is_none_or(|last| (last.1, last.2) != (now.1, now.2))
            {
                timeline.push(now);
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    timelines
}

/// One size: N simulated nodes started and synced, then the changes timed.
async fn scale(
    n: usize,
    range: std::ops::Range<usize>,
    admin: std::path::PathBuf,
    node_kubeconfig: std::path::PathBuf,
    sockets: Vec<std::path::PathBuf>,
    daemons: Vec<u32>,
    apiserver: u32,
) {
    let flows = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu_seconds(std::process::id());
    let started = Instant::now();
    let sims = Simulated::start(range, &node_kubeconfig, &flows).await;
    let trackers = sims.trackers.clone();
    println!(
        "N={n}: {n} simulated nodes listed and synced in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let admin = client(admin).await;
    let policies: Api<NetworkPolicy> = Api::namespaced(admin.clone(), "bench");
    let pods: Api<Pod> = Api::namespaced(admin, "bench");
    let mut policy_latency = Vec::new();
    let mut label_latency = Vec::new();
    for k in 0..CHANGES {
        let policy: NetworkPolicy = serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": format!("p-{n}-{k}"), "namespace": "bench"},
            "spec": {"podSelector": {"matchLabels": {"app": "web"}},
                     "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": format!("r{k}")}}}],
                                  "ports": [{"port": 8000 + k as i32}]}]}}))
        .unwrap();
        let sent = Instant::now();
        let created = policies
            .create(&PostParams::default(), &policy)
            .await
            .expect("create");
        let rv = created.metadata.resource_version.unwrap_or_default();
        policy_latency.extend(wait_applied("NetworkPolicy", &rv, sent, &trackers, &sockets).await);
        let patch = json!({"metadata": {"labels": {"role": format!("r{k}")}}});
        let sent = Instant::now();
        let patched = pods
            .patch(
                &format!("web-{}", k % 3),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .expect("label");
        let rv = patched.metadata.resource_version.unwrap_or_default();
        label_latency.extend(wait_applied("Pod", &rv, sent, &trackers, &sockets).await);
    }
    let cpu = cpu_seconds(std::process::id()) - cpu_before;
    println!(
        "N={n}: NetworkPolicy created → applied on every node (3 real + {n} simulated), {} samples: p50 {} / p99 {} (goal at N=500: p50 ≤ 200 ms, p99 ≤ 1 s)",
        policy_latency.len(),
        ms(percentile(&mut policy_latency, 0.5)),
        ms(percentile(&mut policy_latency, 0.99)),
    );
    println!(
        "N={n}: pod label changed → applied on every node, {} samples: p50 {} / p99 {}",
        label_latency.len(),
        ms(percentile(&mut label_latency, 0.5)),
        ms(percentile(&mut label_latency, 0.99)),
    );
    let events: u64 = trackers
        .iter()
        .map(|t| t.snapshot().resources.iter().map(|r| r.events).sum::<u64>())
        .sum();
    println!(
        "N={n}: watch events per simulated node {:.1} (listed objects + {} changes: no resync); flows recorded {}",
        events as f64 / n as f64,
        2 * CHANGES,
        flows.load(Ordering::Relaxed)
    );
    println!(
        "N={n}: RSS: kube-apiserver {} MB, real ofnode daemons {} MB, the simulated nodes' process {} MB ({:.2} MB per node); CPU of the simulated nodes' process {cpu:.1} s",
        rss_mb(apiserver),
        daemons.iter().map(|pid| format!("{}", rss_mb(*pid))).collect::<Vec<_>>().join("/"),
        rss_mb(std::process::id()),
        rss_mb(std::process::id()) as f64 / n as f64,
    );
    println!(
        "N={n}: CPU so far: kube-apiserver {:.1} s, real ofnode daemons {} s",
        cpu_seconds(apiserver),
        daemons
            .iter()
            .map(|pid| format!("{:.1}", cpu_seconds(*pid)))
            .collect::<Vec<_>>()
            .join("/"),
    );
    drop(sims);
}

/// Simulated nodes: ofnode's follower over a bare core each, their batches counted as flows.
struct Simulated {
    trackers: Vec<Arc<Tracker>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    // Each follower runs while its command sender lives.
    _commands: Vec<tokio::sync::mpsc::UnboundedSender<ofnode::kube::Command>>,
}

impl Simulated {
    /// Simulated nodes `sim-<i>` for every i of `range`, each with its own client, listed and
    /// synced (within 10 minutes).
    async fn start(
        range: std::ops::Range<usize>,
        node_kubeconfig: &std::path::Path,
        flows: &Arc<AtomicU64>,
    ) -> Simulated {
        let networks = Networks {
            cluster_network: CLUSTER_NETWORK.parse().unwrap(),
            service_network: SERVICE_NETWORK.parse().unwrap(),
            mode: Mode::NetworkPolicy,
        };
        let started = Instant::now();
        let mut sims = Simulated {
            trackers: Vec::new(),
            tasks: Vec::new(),
            _commands: Vec::new(),
        };
        let n = range.len();
        for i in range {
            let counted = flows.clone();
            let sink = CoreSink::new(
                Core::new(NodeState::default()).expect("a core"),
                Box::new(move |diff| {
                    counted.fetch_add(
                        (diff.adds.len() + diff.deletes.len()) as u64,
                        Ordering::Relaxed,
                    );
                }),
            );
            let c = client(node_kubeconfig.to_path_buf()).await;
            let (task, _shared, tracker, commands) =
                ofnode::kube::follow(c, sink, &format!("sim-{i}"), networks, "bench");
            sims.tasks.push(task);
            sims.trackers.push(tracker);
            sims._commands.push(commands);
        }
        while !sims.trackers.iter().all(|t| t.synced()) {
            if started.elapsed() > Duration::from_secs(600) {
                panic!("{n} simulated nodes not synced in 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        sims
    }
}

impl Drop for Simulated {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A client with `kubeconfig`'s credentials.
async fn client(kubeconfig: std::path::PathBuf) -> kube::Client {
    let config = ofnode::kube::client::config(Some(&kubeconfig))
        .await
        .expect("kubeconfig");
    ofnode::kube::client::client(config).expect("client")
}

/// When every node has applied `kind` through `rv`: one latency per node, from `sent`.
async fn wait_applied(
    kind: &str,
    rv: &str,
    sent: Instant,
    trackers: &[Arc<Tracker>],
    sockets: &[std::path::PathBuf],
) -> Vec<Duration> {
    let wanted: u64 = rv.parse().unwrap_or(u64::MAX);
    let applied = |status: &ofnode::kube::KubeStatus| {
        status
            .resources
            .iter()
            .find(|r| r.kind == kind)
            .and_then(|r| r.resource_version.as_deref()?.parse::<u64>().ok())
            .is_some_and(|v| v >= wanted)
            && status.pending_edits == 0
    };
    let mut done: Vec<Option<Duration>> = vec![None; trackers.len() + sockets.len()];
    let deadline = sent + Duration::from_secs(60);
    while done.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, tracker) in trackers.iter().enumerate() {
            if done[i].is_none() && applied(&tracker.snapshot()) {
                done[i] = Some(sent.elapsed());
            }
        }
        for (j, socket) in sockets.iter().enumerate() {
            let i = trackers.len() + j;
            if done[i].is_none() {
                if let Some(status) = real_status(socket).await {
                    if applied(&status) {
                        done[i] = Some(sent.elapsed());
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    done.into_iter()
        .map(|d| d.unwrap_or(Duration::from_secs(60)))
        .collect()
}

/// A real node's `kubernetes` status, through its control socket.
async fn real_status(socket: &std::path::Path) -> Option<ofnode::kube::KubeStatus> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(socket).await.ok()?;
    stream
        .write_all(b"GET /v1/status HTTP/1.0\r\nHost: ofnode\r\n\r\n")
        .await
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await.ok()?;
    let body = text.split_once("\r\n\r\n")?.1;
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    serde_json::from_value(value["kubernetes"].clone()).ok()
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index.min(samples.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn rss_mb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

/// CPU seconds of process `pid` so far (all threads), as the harness reads them.
fn cpu_seconds(pid: u32) -> f64 {
    ofnode_harness::cpu::process_cpu(pid).as_secs_f64()
}

/// Every simulated node holds 7 watch connections: raise the open-file limit to the hard one.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
