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
//! (no periodic resync: after the list, only changes travel).

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
    for n in sizes {
        for i in first_sim..first_sim + n {
            let subnet = format!("10.{}.{}.0/23", 128 + (2 * i) / 256, (2 * i) % 256);
            let hs = json!({"apiVersion": "network.openshift.io/v1", "kind": "HostSubnet",
                "metadata": {"name": format!("sim-{i}"), "labels": {"ofnode-bench": "sim"}},
                "host": format!("sim-{i}"),
                "hostIP": format!("198.51.100.{}", 1 + i % 250), "subnet": subnet});
            cluster
                .kube_admin()
                .unwrap()
                .apply(&hs.to_string())
                .expect("HostSubnet");
        }
        let range = first_sim..first_sim + n;
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
        let (admin, node_kubeconfig) = (admin.clone(), node_kubeconfig.clone());
        underlay
            .run_in(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(scale(
                    n,
                    range,
                    admin,
                    node_kubeconfig,
                    sockets,
                    daemons,
                    apiserver,
                ));
            })
            .expect("the simulated nodes, in the underlay");
        // The next size starts from the same subnets: this size's simulated nodes leave.
        cluster
            .kube_admin()
            .unwrap()
            .run(&["delete", "hostsubnet", "-l", "ofnode-bench=sim"])
            .expect("delete the simulated nodes' HostSubnets");
    }
    relist_after_410(&mut cluster, admin, node_kubeconfig);
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
    let client = |path: std::path::PathBuf| async move {
        let file = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    };
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
    let client = |path: std::path::PathBuf| async move {
        let file = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    };
    let networks = Networks {
        cluster_network: CLUSTER_NETWORK.parse().unwrap(),
        service_network: SERVICE_NETWORK.parse().unwrap(),
        mode: Mode::NetworkPolicy,
    };
    let flows = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu_seconds(std::process::id());
    let started = Instant::now();
    let mut sims = Vec::new();
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
        let c = client(node_kubeconfig.clone()).await;
        let (task, _shared, tracker, commands) =
            ofnode::kube::follow(c, sink, &format!("sim-{i}"), networks, "bench");
        sims.push((task, tracker, commands));
    }
    let trackers: Vec<Arc<Tracker>> = sims.iter().map(|(_, t, _)| t.clone()).collect();
    while !trackers.iter().all(|t| t.synced()) {
        if started.elapsed() > Duration::from_secs(600) {
            panic!("{n} simulated nodes not synced in 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    for (task, _, _) in sims {
        task.abort();
    }
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

fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of /proc/PID/stat (11 and 12 after the name).
    (ticks(11) + ticks(12)) / 100.0
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
