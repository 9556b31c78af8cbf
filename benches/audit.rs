//! Issue 30's bench for the policy audit, on real private Open vSwitch instances, in one run:
//! - events per second logged end to end (packet-in → a JSON line in the audit log file) with
//!   ONE busy rule metered at 5,000/s, and with TEN busy rules metered at 600/s each. A busy
//!   rule is a namespace's ingress isolation (a deny-all NetworkPolicy, the namespace audited
//!   `deny`: one isolation key, one meter, per namespace); a pod of another namespace floods it
//!   with denied UDP from fresh source ports (a denied connection is never committed, so
//!   every datagram is a new connection and a packet-in candidate). Reported: the rate offered
//!   (datagrams sent), the events logged per rule (their `count`s, over the flood's steady
//!   middle: its first and last second left out, so the meters' bursts do not count), the
//!   same as a % of the meter's rate, what the meters let through and dropped
//!   (`ovs-ofctl meter-stats`, the oracle), and ofnode's own drops (/metrics
//!   `ofnode_audit_dropped_total{where}`);
//! - the CPU time that cost: ofnode's (every thread, /proc/PID/stat) per 1,000 events logged,
//!   and ovs-vswitchd's and the generator's (this process) in the same window. The machine's
//!   cores are shared by the three: a shortfall is attributed with these;
//! - a per-rule stats dump at 5,000 policies (the store world of benches/scale.rs):
//!   `GET /v1/netpols?stats=true` against the seed's way of getting the same numbers, `ovs-ofctl
//!   dump-flows` of the verdict flows by their cookie tag, on the same bridge (median of 20).
//!
//! Run: `cargo bench --bench audit` (as root; under a minute). `AUDIT_BENCH_WORLD=2000x5000`
//! builds a smaller world for the stats dump (`PODSxPOLICIES`; default 10000x5000).

#[path = "common/api_world.rs"]
mod api_world;
#[path = "common/store_world.rs"]
mod store_world;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use api_world::{all, build_pods};
use ofnode::api::client::Client;
use ofnode::api::wire;
use ofnode::sdn::audit::{AuditTier, Dir, RuleRef, Verdict};
use ofnode::sdn::audit_log::line::rfc3339;
use ofnode_harness::cluster::{labels, Cluster, ClusterOptions, Control, Endpoint, Mode, Pod};
use ofnode_harness::cpu::{own_cpu, process_cpu};
use ofnode_harness::probe::flood;
use ofnode_harness::seed_way::{median, ms};
use serde_json::{json, Value};
use store_world::{policy_json, World, POLICIES_PER_NAMESPACE};

/// How long each flood runs; its first and last second are not counted.
const FLOOD: Duration = Duration::from_secs(6);
const EDGE: Duration = Duration::from_secs(1);
const SAMPLES: usize = 20;
/// The flood's destination port (any: the target is isolated).
const PORT: u16 = 9;
/// The verdict flows' cookie tag, as `ovs-ofctl` takes a cookie match.
const VERDICT_COOKIES: &str = "cookie=0x4f41000000000000/0xffff000000000000";

/// One scenario: `rules` busy rules, each metered at `rate`/s (burst `burst`), flooded by
/// `threads_per_rule` generator threads at `per_thread`/s each.
struct Scenario {
    rules: usize,
    rate: u32,
    burst: u32,
    threads_per_rule: usize,
    per_thread: u32,
}

/// One node in networkpolicy mode whose daemon writes the audit log, a flooding pod in
/// namespace `src`, and `rules` isolated target pods in namespaces `t0`, `t1`, …, each
/// audited `deny`.
struct AuditedNode {
    cluster: Cluster,
    source: Pod,
    targets: Vec<(Pod, u32)>,
    log: PathBuf,
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl AuditedNode {
    fn start(scenario: &Scenario) -> AuditedNode {
        let mut cluster = Cluster::start(ClusterOptions {
            nodes: 1,
            mode: Mode::NetworkPolicy,
            control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
            echo: false,
        })
        .expect("one node in networkpolicy mode (run as root)");
        let dir = cluster.node(0).ovs().dir().join("audit");
        std::fs::create_dir_all(&dir).expect("the audit directory");
        let log = dir.join("audit.log");
        let config = dir.join("ofnode.toml");
        std::fs::write(
            &config,
            format!(
                "audit_log = \"{}\"\naudit_log_max_bytes = 1073741824\naudit_rate = {}\naudit_burst = {}\n",
                log.display(),
                scenario.rate,
                scenario.burst
            ),
        )
        .expect("the daemon's config");
        let daemon = cluster.node_mut(0).daemon_mut().expect("an ofnode daemon");
        daemon
            .restart_with(&["--config", config.to_str().expect("a UTF-8 path")])
            .expect("restart with the audit log");
        let client = Client::new(&daemon.api);
        cluster
            .namespace_set("src", 200, &labels(&[("ns", "src")]))
            .expect("namespace src");
        let source = cluster
            .add_named_pod(0, ("src", "flooder"), 200, &labels(&[("app", "flooder")]))
            .expect("the flooding pod");
        let targets = (0..scenario.rules)
            .map(|t| {
                let (ns, vnid) = (format!("t{t}"), 201 + t as u32);
                cluster
                    .node(0)
                    .cli(&[
                        "namespace",
                        "set",
                        "--name",
                        &ns,
                        "--vnid",
                        &vnid.to_string(),
                        "--audit",
                        "deny",
                    ])
                    .expect("namespace set --audit deny");
                let pod = cluster
                    .add_named_pod(0, (&ns, "target"), vnid, &labels(&[("app", "target")]))
                    .expect("a target pod");
                let deny_all = json!({
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": {"name": "deny-all", "namespace": ns},
                    "spec": {"podSelector": {}, "ingress": []}
                });
                cluster.netpol_apply(&deny_all).expect("netpol apply");
                let isolation = RuleRef {
                    tier: AuditTier::NetworkPolicy,
                    dir: Dir::Ingress,
                    verdict: Verdict::Deny,
                    id: vnid,
                };
                (pod, isolation.key())
            })
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        AuditedNode {
            cluster,
            source,
            targets,
            log,
            client,
            runtime,
        }
    }

    fn daemon_pid(&self) -> u32 {
        let daemon = self.cluster.node(0).daemon().expect("the daemon");
        daemon.pid().expect("the daemon's pid")
    }

    fn vswitchd_pid(&self) -> u32 {
        self.cluster
            .node(0)
            .ovs()
            .vswitchd_pid()
            .expect("ovs-vswitchd's pid")
    }

    fn meters(&self) -> BTreeMap<u32, MeterStats> {
        let text = self
            .cluster
            .node(0)
            .ovs()
            .ofctl("meter-stats", "br0", &[])
            .expect("ovs-ofctl meter-stats");
        parse_meter_stats(&text)
    }

    fn metrics(&self) -> String {
        self.runtime
            .block_on(self.client.metrics())
            .expect("GET /metrics")
    }

    /// The audit log's lines about the flood to `target`.
    fn flood_lines(&self, target: &Pod) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let (src, dst) = (self.source.ip.to_string(), target.ip.to_string());
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|l| l["src_ip"] == src.as_str() && l["dst_ip"] == dst.as_str())
            .filter(|l| l["dst_port"] == PORT)
            .collect()
    }
}

/// One meter's counters: packets that reached it and packets its drop band dropped.
#[derive(Debug, Default, Clone, Copy)]
struct MeterStats {
    packets_in: u64,
    dropped: u64,
}

/// `ovs-ofctl meter-stats`: `meter:N flow_count:… packet_in_count:P … bands:` then
/// `0: packet_count:D …` for its band.
fn parse_meter_stats(text: &str) -> BTreeMap<u32, MeterStats> {
    let number = |line: &str, name: &str| -> Option<u64> {
        let rest = &line[line.find(name)? + name.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let mut meters = BTreeMap::new();
    let mut current = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with("meter:") {
            let id = number(line, "meter:").and_then(|id| u32::try_from(id).ok());
            current = id;
            if let Some(id) = id {
                meters.insert(
                    id,
                    MeterStats {
                        packets_in: number(line, "packet_in_count:").unwrap_or(0),
                        dropped: 0,
                    },
                );
            }
        } else if let (Some(id), Some(dropped)) = (current, number(line, "packet_count:")) {
            if let Some(stats) = meters.get_mut(&id) {
                stats.dropped += dropped;
            }
        }
    }
    meters
}

/// A metric's value in /metrics text (0 when absent).
fn metric(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// What one rule got in a scenario.
struct RuleResult {
    offered: u64,
    logged: u64,
    steady: u64,
    meter: MeterStats,
}

/// What a scenario measured.
struct Outcome {
    rules: Vec<RuleResult>,
    rate: u32,
    steady_secs: f64,
    dropped_channel: u64,
    dropped_queue: u64,
    ofnode_cpu: Duration,
    vswitchd_cpu: Duration,
    generator_cpu: Duration,
    window: Duration,
}

impl Outcome {
    fn logged(&self) -> u64 {
        self.rules.iter().map(|r| r.logged).sum()
    }

    fn steady_per_second(&self) -> f64 {
        self.rules.iter().map(|r| r.steady).sum::<u64>() as f64 / self.steady_secs
    }

    fn offered_per_second(&self) -> f64 {
        self.rules.iter().map(|r| r.offered).sum::<u64>() as f64 / FLOOD.as_secs_f64()
    }

    /// Each rule's steady events/s as a % of its meter's rate: the lowest and the highest.
    fn share_range(&self) -> (f64, f64) {
        let shares = self
            .rules
            .iter()
            .map(|r| 100.0 * r.steady as f64 / self.steady_secs / f64::from(self.rate));
        shares.fold((f64::MAX, 0.0_f64), |(lo, hi), s| (lo.min(s), hi.max(s)))
    }

    fn cpu_share(&self, cpu: Duration) -> f64 {
        100.0 * cpu.as_secs_f64() / self.window.as_secs_f64()
    }

    fn ofnode_ms_per_thousand(&self) -> f64 {
        ms(self.ofnode_cpu) * 1000.0 / self.logged().max(1) as f64
    }
}

fn run_scenario(scenario: &Scenario) -> Outcome {
    let node = AuditedNode::start(scenario);
    let keys: Vec<u32> = node.targets.iter().map(|(_, key)| *key).collect();
    wait_for_meters(&node, &keys);
    let (daemon, vswitchd) = (node.daemon_pid(), node.vswitchd_pid());
    let meters_before = node.meters();
    let metrics_before = node.metrics();
    let cpu_before = (process_cpu(daemon), process_cpu(vswitchd), own_cpu());
    let started = SystemTime::now();
    let window_started = Instant::now();
    let offered: Vec<u64> = std::thread::scope(|scope| {
        let floods: Vec<Vec<_>> = node
            .targets
            .iter()
            .map(|(target, _)| {
                (0..scenario.threads_per_rule)
                    .map(|_| {
                        let netns = node.source.netns();
                        scope.spawn(move || {
                            flood(netns, target.ip, PORT, scenario.per_thread, FLOOD)
                        })
                    })
                    .collect()
            })
            .collect();
        floods
            .into_iter()
            .map(|threads| {
                threads
                    .into_iter()
                    .map(|t| t.join().expect("a flood"))
                    .sum()
            })
            .collect()
    });
    let generator_cpu = own_cpu().saturating_sub(cpu_before.2);
    let meters_after = node.meters();
    settle(&node);
    let window = window_started.elapsed();
    let ofnode_cpu = process_cpu(daemon).saturating_sub(cpu_before.0);
    let vswitchd_cpu = process_cpu(vswitchd).saturating_sub(cpu_before.1);
    let metrics_after = node.metrics();
    let dropped = |place: &str| {
        let series = format!("ofnode_audit_dropped_total{{where=\"{place}\"}}");
        metric(&metrics_after, &series).saturating_sub(metric(&metrics_before, &series))
    };
    let (from, to) = (
        rfc3339(started + EDGE),
        rfc3339(started + FLOOD.saturating_sub(EDGE)),
    );
    let rules = node
        .targets
        .iter()
        .zip(offered)
        .map(|((target, key), offered)| {
            let lines = node.flood_lines(target);
            let count = |l: &Value| l["count"].as_u64().unwrap_or(0);
            let in_window = |l: &&Value| {
                let time = l["time"].as_str().unwrap_or_default();
                from.as_str() <= time && time < to.as_str()
            };
            let (before, after) = (
                meters_before.get(key).copied().unwrap_or_default(),
                meters_after.get(key).copied().unwrap_or_default(),
            );
            RuleResult {
                offered,
                logged: lines.iter().map(count).sum(),
                steady: lines.iter().filter(in_window).map(count).sum(),
                meter: MeterStats {
                    packets_in: after.packets_in.saturating_sub(before.packets_in),
                    dropped: after.dropped.saturating_sub(before.dropped),
                },
            }
        })
        .collect();
    Outcome {
        rules,
        rate: scenario.rate,
        steady_secs: FLOOD.saturating_sub(EDGE * 2).as_secs_f64(),
        dropped_channel: dropped("switch_channel"),
        dropped_queue: dropped("queue"),
        ofnode_cpu,
        vswitchd_cpu,
        generator_cpu,
        window,
    }
}

/// Until the switch holds a meter for every key (the policies are in, their meters first).
fn wait_for_meters(node: &AuditedNode, keys: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let meters = node.meters();
        if keys.iter().all(|key| meters.contains_key(key)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no meters {keys:?} on the switch; it holds {:?}",
            meters.keys().collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Until the daemon's event count has not moved for 1.5 s (its lines are flushed each second).
fn settle(node: &AuditedNode) {
    let events = || {
        metric(
            &node.metrics(),
            "ofnode_audit_events_total{verdict=\"deny\"}",
        )
    };
    let (mut last, mut still_since) = (events(), Instant::now());
    let deadline = Instant::now() + Duration::from_secs(15);
    while still_since.elapsed() < Duration::from_millis(1500) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        let now = events();
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
    }
}

fn print_outcome(name: &str, scenario: &Scenario, outcome: &Outcome) {
    println!(
        "audit {name}: {} rule(s), meter {}/s burst {} each; {} generator thread(s) per rule at {}/s each for {} s",
        scenario.rules,
        scenario.rate,
        scenario.burst,
        scenario.threads_per_rule,
        scenario.per_thread,
        FLOOD.as_secs()
    );
    for (i, rule) in outcome.rules.iter().enumerate() {
        let per_second = rule.steady as f64 / outcome.steady_secs;
        println!(
            "audit {name}: rule t{i}: offered {} ({:.0}/s); meter saw {} and its band dropped {} (passed {}); logged {} events in all, {per_second:.0}/s over the steady {} s = {:.1}% of the meter's rate",
            rule.offered,
            rule.offered as f64 / FLOOD.as_secs_f64(),
            rule.meter.packets_in,
            rule.meter.dropped,
            rule.meter.packets_in.saturating_sub(rule.meter.dropped),
            rule.logged,
            outcome.steady_secs,
            100.0 * per_second / f64::from(outcome.rate),
        );
    }
    println!(
        "audit {name}: ofnode dropped {} on the switch channel, {} at the log queue; CPU over {:.1} s (flood + flush): ofnode {:.2} s ({:.0}% of a core; {:.1} ms per 1,000 events), ovs-vswitchd {:.2} s ({:.0}%), generator {:.2} s ({:.0}% over the flood)",
        outcome.dropped_channel,
        outcome.dropped_queue,
        outcome.window.as_secs_f64(),
        outcome.ofnode_cpu.as_secs_f64(),
        outcome.cpu_share(outcome.ofnode_cpu),
        outcome.ofnode_ms_per_thousand(),
        outcome.vswitchd_cpu.as_secs_f64(),
        outcome.cpu_share(outcome.vswitchd_cpu),
        outcome.generator_cpu.as_secs_f64(),
        100.0 * outcome.generator_cpu.as_secs_f64() / FLOOD.as_secs_f64(),
    );
}

/// The stats dump at `world`: ofnode's answer and the seed's dump, median of `SAMPLES` each.
struct StatsDump {
    world: World,
    build: Duration,
    ours_ms: f64,
    seed_ms: f64,
    rules: usize,
    verdict_flows: usize,
    /// The policies the answer listed: the world was built whole when it is `world.policies`.
    listed: usize,
}

fn stats_dump(world: World) -> StatsDump {
    let started = Instant::now();
    let cluster = Cluster::start(ClusterOptions {
        nodes: 1,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .expect("one node in networkpolicy mode");
    let node = cluster.node(0);
    let client = Arc::new(Client::new(&node.daemon().expect("the daemon").api));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    build_pods(world, node, &client, &runtime);
    let policies = (0..world.policies)
        .map(|p| {
            let (ns, k) = (p / POLICIES_PER_NAMESPACE, p % POLICIES_PER_NAMESPACE);
            let body = policy_json(ns, world.namespaces(), k, k, 0).into_bytes();
            let client = client.clone();
            async move { client.netpol_apply(body).await }
        })
        .collect();
    all(&runtime, policies);
    let build = started.elapsed();
    let query = wire::NetPolsQuery { stats: true };
    let (mut ours, mut seed) = (Vec::new(), Vec::new());
    let (mut rules, mut verdict_flows, mut listed) = (0, 0, 0);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let answer = runtime
            .block_on(client.netpols_with(&query))
            .expect("GET /v1/netpols?stats=true");
        ours.push(ms(started.elapsed()));
        listed = answer.netpols.len();
        rules = answer.rule_stats.map_or(0, |s| s.rules.len());
        let started = Instant::now();
        let dump = node
            .ovs()
            .ofctl("dump-flows", "br0", &[VERDICT_COOKIES])
            .expect("ovs-ofctl dump-flows");
        seed.push(ms(started.elapsed()));
        verdict_flows = dump.lines().filter(|l| l.contains("cookie=")).count();
    }
    StatsDump {
        world,
        build,
        ours_ms: median(ours),
        seed_ms: median(seed),
        rules,
        verdict_flows,
        listed,
    }
}

fn world() -> World {
    let given = std::env::var("AUDIT_BENCH_WORLD").unwrap_or_else(|_| "10000x5000".into());
    let (pods, policies) = given
        .split_once('x')
        .and_then(|(p, n)| Some((p.parse().ok()?, n.parse().ok()?)))
        .unwrap_or_else(|| panic!("AUDIT_BENCH_WORLD={given:?} is not PODSxPOLICIES"));
    World { pods, policies }
}

fn main() {
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"audit".contains(&arg))
    {
        return;
    }
    let one = Scenario {
        rules: 1,
        rate: 5_000,
        burst: 500,
        threads_per_rule: 2,
        per_thread: 4_000,
    };
    let ten = Scenario {
        rules: 10,
        rate: 600,
        burst: 60,
        threads_per_rule: 1,
        per_thread: 900,
    };
    let one_outcome = run_scenario(&one);
    print_outcome("one busy rule", &one, &one_outcome);
    let ten_outcome = run_scenario(&ten);
    print_outcome("ten busy rules", &ten, &ten_outcome);
    let dump = stats_dump(world());
    println!(
        "audit stats dump at {} pods / {} policies in {} namespaces of {} teams (world built in {:.0} s): ofnode GET /v1/netpols?stats=true median {:.2} ms ({} policies listed, {} rules with counters); seed way `ovs-ofctl dump-flows br0 {VERDICT_COOKIES}` median {:.2} ms ({} verdict flows); ratio {:.1}x",
        dump.world.pods,
        dump.world.policies,
        dump.world.namespaces(),
        dump.world.teams(),
        dump.build.as_secs_f64(),
        dump.ours_ms,
        dump.listed,
        dump.rules,
        dump.seed_ms,
        dump.verdict_flows,
        dump.seed_ms / dump.ours_ms.max(f64::MIN_POSITIVE),
    );

    println!();
    println!("| audit | offered | events logged/s (steady) | goal | each rule, % of its meter rate | goal | meters: in / dropped by band | ofnode drops (channel / queue) | ofnode CPU per 1,000 events | ofnode / ovs-vswitchd CPU |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, scenario, outcome) in [
        ("1 rule at 5,000/s", &one, &one_outcome),
        ("10 rules at 600/s", &ten, &ten_outcome),
    ] {
        let (lo, hi) = outcome.share_range();
        let (meter_in, meter_dropped) = outcome.rules.iter().fold((0, 0), |(i, d), r| {
            (i + r.meter.packets_in, d + r.meter.dropped)
        });
        println!(
            "| {name} | {:.0}/s | {:.0}/s | >= {} | {lo:.1}%..{hi:.1}% | >= 90% | {meter_in} / {meter_dropped} | {} / {} | {:.1} ms | {:.0}% / {:.0}% of a core |",
            outcome.offered_per_second(),
            outcome.steady_per_second(),
            if scenario.rules == 1 { "5,000/s" } else { "5,000/s in all" },
            outcome.dropped_channel,
            outcome.dropped_queue,
            outcome.ofnode_ms_per_thousand(),
            outcome.cpu_share(outcome.ofnode_cpu),
            outcome.cpu_share(outcome.vswitchd_cpu),
        );
    }
    println!();
    println!("| stats dump | world | ofnode `GET /v1/netpols?stats=true` (median of {SAMPLES}) | seed way `ovs-ofctl dump-flows` by cookie (median of {SAMPLES}) | ratio | rules with counters / verdict flows |");
    println!("| --- | --- | --- | --- | --- | --- |");
    println!(
        "| per-rule counters | {} pods, {} policies | {:.2} ms | {:.2} ms | {:.1}x | {} / {} |",
        dump.world.pods,
        dump.world.policies,
        dump.ours_ms,
        dump.seed_ms,
        dump.seed_ms / dump.ours_ms.max(f64::MIN_POSITIVE),
        dump.rules,
        dump.verdict_flows,
    );
}
