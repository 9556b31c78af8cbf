//! Issue 27 through the API, on a real Open vSwitch: what one change costs a node that holds
//! 1,000, 10,000 or 50,000 pods and 500 or 5,000 policies, side by side with the seed's way
//! (`ovs-ofctl bundle` of exactly the flows the change made, exec'd on a second node whose br0
//! holds the same table), in one run.
//!
//! Each world is the store bench's (`benches/store.rs`): 200 local pods (veths on br0, added
//! through the API) and the rest on other nodes (`POST /v1/remote-pods`), in namespaces of at
//! most 100 pods; teams of 10 namespaces; 10 policies per namespace, each selecting an app and
//! allowing one app of one team's namespaces on a TCP range and UDP 53. For each world:
//! - installing the policies through `POST /v1/netpols`, half one at a time and half as a burst
//!   (as a watch's relist delivers them), against the seed's way (the policies' flows as one
//!   `ovs-ofctl bundle` exec per policy), and the flows per policy;
//! - each kind of change (policy replaced, added, deleted; remote pod added, deleted,
//!   relabelled; local pod relabelled; namespace relabelled), 20 of each: the API's answer
//!   (median), ofnode's own CPU for it (every thread of the daemon, from
//!   /proc/PID/task/*/schedstat), ovs-vswitchd's part (the OpenFlow bundle and the
//!   stale-megaflow purge ofnode waits for, from the daemon's /metrics: the bound any
//!   controller that waits for the switch has), the seed's way for the same flows, and the
//!   flow mods made;
//! - the daemon's RSS.
//!
//! Run: `cargo bench --bench scale` (as root; about 10 minutes). `SCALE_BENCH_WORLDS=1000x500`
//! runs the worlds given (comma-separated `PODSxPOLICIES`); `SCALE_BENCH_ONLY=relabel` only the
//! changes so named, `SCALE_BENCH_SAMPLES=200` more samples of each (for a profiler).

#[path = "common/api_world.rs"]
mod api_world;
#[path = "common/store_world.rs"]
mod store_world;

use std::sync::Arc;
use std::time::{Duration, Instant};

use api_world::{all, build_pods, remote_pod, IN_FLIGHT};
use ofnode::api::client::Client;
use ofnode::api::wire;
use ofnode::sdn::LabelEdit;
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::seed_way::{median, ms, replace_flows, rss_mb, seed_bundle, FlowDiff};
use ofnode_harness::{OperationTotals, PurgeTotals};
use store_world::*;

const SAMPLES: usize = 20;

impl World {
    /// The namespace and app of the `i`th local pod a change picks: a policy for them has
    /// flows on this node (most of a big world's policies select no pod here).
    fn local_app(&self, i: usize) -> (usize, usize) {
        let pod = (i * 7) % LOCAL_PODS;
        (pod % self.namespaces(), (pod / self.namespaces()) % APPS)
    }

    /// The `i`th remote pod a change picks (spread over the world).
    fn remote(&self, i: usize) -> usize {
        LOCAL_PODS + (i * 7919) % (self.pods - LOCAL_PODS)
    }
}

/// The daemon's CPU time so far (every thread), from the scheduler's own accounting.
fn cpu_time(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the daemon's threads");
    let nanos: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// One node in the networkpolicy mode holding `world`, and the seed's node beside it.
struct Bench {
    world: World,
    ours: Cluster,
    seed: Cluster,
    client: Arc<Client>,
    runtime: tokio::runtime::Runtime,
    pid: u32,
}

impl Bench {
    fn start(world: World) -> Bench {
        let ours = Cluster::start(ClusterOptions {
            nodes: 1,
            mode: Mode::NetworkPolicy,
            control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
            echo: false,
        })
        .expect("one node in networkpolicy mode (run as root)");
        let seed = Cluster::start(ClusterOptions {
            nodes: 1,
            mode: Mode::Subnet,
            control: Control::SeedFlows,
            echo: false,
        })
        .expect("the seed's node");
        let daemon = ours.node(0).daemon().expect("the node's daemon");
        let client = Arc::new(Client::new(&daemon.api));
        let pid = daemon.pid().expect("the daemon's pid");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        Bench {
            world,
            ours,
            seed,
            client,
            runtime,
            pid,
        }
    }

    fn flows(&self) -> Vec<String> {
        self.ours.node(0).flows().expect("dump-flows")
    }

    fn build_pods(&self) {
        build_pods(self.world, self.ours.node(0), &self.client, &self.runtime);
    }

    /// Installs the policies (timed, one request at a time) and the same flows the seed's way.
    fn install(&self) {
        let world = self.world;
        let before = self.flows();
        let body = |p: usize| {
            let (ns, k) = (p / POLICIES_PER_NAMESPACE, p % POLICIES_PER_NAMESPACE);
            policy_json(ns, world.namespaces(), k, k, 0).into_bytes()
        };
        // The first half one request at a time (as a script would), the second as a burst (as
        // a Kubernetes watch delivers a relist, `IN_FLIGHT` at a time).
        let half = world.policies / 2;
        let started = Instant::now();
        for p in 0..half {
            self.runtime
                .block_on(self.client.netpol_apply(body(p)))
                .expect("POST /v1/netpols");
        }
        let one_at_a_time = started.elapsed();
        let started = Instant::now();
        let burst = (half..world.policies)
            .map(|p| {
                let (client, body) = (self.client.clone(), body(p));
                async move { client.netpol_apply(body).await }
            })
            .collect();
        all(&self.runtime, burst);
        let in_a_burst = started.elapsed();
        let after = self.flows();
        // The seed's node starts from ofnode's table without the policies, then takes their
        // flows as one bundle exec per policy (the flows split evenly between them).
        replace_flows(&self.seed, &before);
        let lines = FlowDiff::between(&before, &after).bundle_lines();
        let per_policy = lines.len().div_ceil(world.policies).max(1);
        let started = Instant::now();
        for chunk in lines.chunks(per_policy) {
            seed_bundle(&self.seed, chunk);
        }
        let seed = started.elapsed();
        let seed_flows = self.seed.node(0).flows().expect("seed dump-flows");
        assert_eq!(
            sorted(seed_flows),
            sorted(after.clone()),
            "the seed's node does not hold ofnode's table"
        );
        let added = after.len().saturating_sub(before.len());
        let seed_each = ms(seed) / world.policies as f64;
        let ours_each = |took: Duration| ms(took) / half.max(1) as f64;
        println!(
            "scale install {} policies at {} pods: ofnode (POST /v1/netpols) one at a time {:.2} ms each, ratio {:.1}x; in a burst of {IN_FLIGHT} in flight {:.3} ms each, ratio {:.1}x; seed way ({} `ovs-ofctl bundle` execs of the same flows, one per policy with flows here) {seed_each:.2} ms per policy (goal >= 10x at 50,000 pods / 5,000 policies); {} flows on br0, {added} for the policies ({:.2} per policy); ofnode RSS {:.1} MB",
            world.policies,
            world.pods,
            ours_each(one_at_a_time),
            seed_each / ours_each(one_at_a_time).max(f64::MIN_POSITIVE),
            ours_each(in_a_burst),
            seed_each / ours_each(in_a_burst).max(f64::MIN_POSITIVE),
            lines.chunks(per_policy).len(),
            after.len(),
            added as f64 / world.policies as f64,
            rss_mb(self.pid),
        );
    }

    fn totals(&self) -> (OperationTotals, PurgeTotals) {
        let metrics = self
            .runtime
            .block_on(self.client.metrics())
            .expect("GET /metrics");
        (
            OperationTotals::from_metrics(&metrics).expect("the daemon's totals"),
            PurgeTotals::from_metrics(&metrics).expect("the daemon's purge totals"),
        )
    }

    /// `SAMPLES` changes of one kind (or `SCALE_BENCH_SAMPLES`), each timed through the API and replayed the seed's way.
    fn measure(&self, what: &str, change: impl Fn(usize) -> Request) -> Row {
        let mut row = Row::default();
        let samples = std::env::var("SCALE_BENCH_SAMPLES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(SAMPLES);
        for i in 0..samples {
            let request = change(i);
            let before = self.flows();
            let (totals, purges) = self.totals();
            let cpu = cpu_time(self.pid);
            let started = Instant::now();
            self.runtime
                .block_on(request.send(&self.client))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let api = started.elapsed();
            let cpu = cpu_time(self.pid).saturating_sub(cpu);
            let (totals_after, purges_after) = self.totals();
            let lines = FlowDiff::between(&before, &self.flows()).bundle_lines();
            row.api.push(ms(api));
            row.flow_mods.push(lines.len() as f64);
            row.seed.push(ms(seed_bundle(&self.seed, &lines)));
            // Only when this change was the one operation the daemon finished meanwhile.
            if let Some((_, bundle)) = totals_after.one_operation_since(&totals) {
                let purge = purges_after.seconds - purges.seconds;
                row.switch.push(ms(bundle) + purge * 1000.0);
                // The CPU the daemon spent on metrics' two answers is not the change's.
                row.cpu.push(ms(cpu));
            }
        }
        row
    }

    fn changes(&self) {
        let world = self.world;
        let teams = world.teams();
        println!(
            "| {} pods, {} policies: change | API answer (median) | ofnode CPU | ovs-vswitchd: bundle + purge | seed way | ratio | flow mods |",
            world.pods, world.policies
        );
        println!("| --- | --- | --- | --- | --- | --- | --- |");
        let kinds: Vec<(&str, Kind)> = vec![
            (
                "policy replaced",
                Box::new(move |i| {
                    let (ns, k) = world.local_app(i);
                    Request::NetPol(policy_json(ns, world.namespaces(), k, k, 1 + i % 3))
                }),
            ),
            (
                "policy added",
                Box::new(move |i| {
                    let (ns, k) = world.local_app(i);
                    Request::NetPol(policy_json(ns, world.namespaces(), 100 + i, k, 0))
                }),
            ),
            (
                "policy deleted",
                Box::new(move |i| {
                    Request::NetPolDel(wire::NetPolDel {
                        namespace: format!("ns{}", world.local_app(i).0),
                        name: format!("p{}", 100 + i),
                    })
                }),
            ),
            (
                "remote pod relabelled",
                Box::new(move |i| {
                    Request::PodLabels(wire::PodLabels {
                        pod: pod_key(world.remote(i), world.namespaces()),
                        edit: LabelEdit {
                            set: pod_labels(world.remote(i), world.namespaces(), 1 + i % 5),
                            remove: Vec::new(),
                        },
                    })
                }),
            ),
            (
                "local pod relabelled",
                Box::new(move |i| {
                    Request::PodLabels(wire::PodLabels {
                        pod: pod_key(i, world.namespaces()),
                        edit: LabelEdit {
                            set: pod_labels(i, world.namespaces(), 1 + i % 5),
                            remove: Vec::new(),
                        },
                    })
                }),
            ),
            (
                "remote pod deleted",
                Box::new(move |i| {
                    Request::RemoteDel(wire::RemotePodDel {
                        pod: pod_key(world.remote(i), world.namespaces()),
                    })
                }),
            ),
            (
                "remote pod added",
                Box::new(move |i| Request::Remote(remote_pod(&world, world.remote(i), 0))),
            ),
            (
                "namespace relabelled",
                Box::new(move |i| {
                    Request::NamespaceLabels(wire::NamespaceLabels {
                        name: format!("ns{i}"),
                        edit: LabelEdit {
                            set: labels(&[(
                                "team",
                                format!("t{}", (i / NAMESPACES_PER_TEAM + 1 + i) % teams),
                            )]),
                            remove: Vec::new(),
                        },
                    })
                }),
            ),
        ];
        // `SCALE_BENCH_ONLY=TEXT` measures only the changes whose name contains TEXT.
        let only = std::env::var("SCALE_BENCH_ONLY").unwrap_or_default();
        for (what, change) in kinds {
            if what.contains(only.as_str()) {
                self.measure(what, change).print(what);
            }
        }
    }
}

/// A kind of change: its `i`th sample.
type Kind = Box<dyn Fn(usize) -> Request>;

/// One change as the API takes it.
enum Request {
    NetPol(String),
    NetPolDel(wire::NetPolDel),
    PodLabels(wire::PodLabels),
    Remote(wire::KnownPod),
    RemoteDel(wire::RemotePodDel),
    NamespaceLabels(wire::NamespaceLabels),
}

impl Request {
    async fn send(self, client: &Client) -> Result<(), ofnode::api::client::ClientError> {
        match self {
            Request::NetPol(json) => client.netpol_apply(json.into_bytes()).await,
            Request::NetPolDel(del) => client.netpol_del(&del).await,
            Request::PodLabels(edit) => client.pod_labels(&edit).await,
            Request::Remote(pod) => client.remote_pod_set(&pod).await,
            Request::RemoteDel(del) => client.remote_pod_del(&del).await,
            Request::NamespaceLabels(edit) => client.namespace_labels(&edit).await,
        }
    }
}

/// Milliseconds of each sample of one kind of change.
#[derive(Default)]
struct Row {
    api: Vec<f64>,
    cpu: Vec<f64>,
    switch: Vec<f64>,
    seed: Vec<f64>,
    flow_mods: Vec<f64>,
}

impl Row {
    fn print(self, what: &str) {
        let (api, seed) = (median(self.api), median(self.seed));
        println!(
            "| {what} | {api:.2} ms | {:.2} ms | {:.2} ms | {seed:.2} ms | {:.1}x | {} |",
            median(self.cpu),
            median(self.switch),
            seed / api.max(f64::MIN_POSITIVE),
            median(self.flow_mods),
        );
    }
}

fn sorted(mut flows: Vec<String>) -> Vec<String> {
    flows.sort();
    flows
}

fn worlds() -> Vec<World> {
    let given = std::env::var("SCALE_BENCH_WORLDS").unwrap_or_default();
    if given.is_empty() {
        return [(1_000, 500), (10_000, 500), (50_000, 5_000)]
            .into_iter()
            .map(|(pods, policies)| World { pods, policies })
            .collect();
    }
    given
        .split(',')
        .map(|w| {
            let parsed = w
                .split_once('x')
                .and_then(|(p, q)| Some((p.parse().ok()?, q.parse().ok()?)));
            match parsed {
                Some((pods, policies)) if pods > LOCAL_PODS && policies > 100 => {
                    World { pods, policies }
                }
                _ => {
                    eprintln!(
                        "SCALE_BENCH_WORLDS: {w:?} is not PODSxPOLICIES with more than {LOCAL_PODS} pods and 100 policies"
                    );
                    std::process::exit(2);
                }
            }
        })
        .collect()
}

fn main() {
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"scale".contains(&arg))
    {
        return;
    }
    for world in worlds() {
        let started = Instant::now();
        let bench = Bench::start(world);
        bench.build_pods();
        bench.install();
        bench.changes();
        println!(
            "scale world {} pods / {} policies took {:.0} s; ofnode RSS at the end {:.1} MB",
            world.pods,
            world.policies,
            started.elapsed().as_secs_f64(),
            rss_mb(bench.pid),
        );
    }
}
