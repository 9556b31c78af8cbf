//! How fast ofnode puts things right after a fault, against a real Open vSwitch: the numbers the
//! README's drift repair and high availability paragraphs state.
//! 1. Drift repair: one `ofnode run` daemon set up with a pod and watching br0 through the flow
//!    monitor; `ovs-ofctl` changes br0 behind its back on the management socket (del-flows of
//!    table 30, a foreign add-flow, a mod-flows, del-flows of everything); the time from the
//!    command's return to br0 holding the desired table again (`ovs-ofctl dump-flows`, polled
//!    every 5 ms: each poll itself takes a few ms), `DRIFT_ROUNDS` per kind.
//! 2. HA takeover: two `ofnode run` daemons with `[ha]` (heartbeat 200 ms, takeover 1000 ms) on
//!    one switch; `kill -9` of the active one; the time until the standby reports itself active
//!    (`ofnode status`, polled every 20 ms), and until a pod add through it is answered; then
//!    the killed one starts again and stands by, and the next round kills the other.
//!
//! Run: `cargo bench --bench faults` (as root).

use std::path::Path;
use std::time::{Duration, Instant};

use ofnode_harness::{ha, Daemon, Ovs, ONE_NODE_SETUP};

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");
/// Rounds per kind of drift.
const DRIFT_ROUNDS: usize = 10;
/// Kill -9 rounds of the HA pair.
const HA_ROUNDS: usize = 6;
/// Past this a round counts as "never recovered" and the run stops.
const GIVE_UP: Duration = Duration::from_secs(20);
/// Quiet time between rounds, so that one repair's debounce never covers the next change.
const SETTLE: Duration = Duration::from_millis(300);

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means "not me".
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"faults".contains(&arg))
    {
        return;
    }
    drift_repair();
    ha_takeover();
}

/// The pod of round `n` (0-based): `default/pod-<n>` on veth `vethF<n>`, 10.128.0.(10+n), its
/// own sandbox id.
struct TestPod {
    pod: String,
    veth: String,
    ip: String,
    mac: String,
    sandbox: String,
}

fn test_pod(n: usize) -> TestPod {
    TestPod {
        pod: format!("default/pod-{n}"),
        veth: format!("vethF{n}"),
        ip: format!("10.128.0.{}", 10 + n),
        mac: format!("0a:58:0a:80:00:{:02x}", 10 + n),
        sandbox: format!("{:064x}", n + 1),
    }
}

fn add_pod(ovs: &Ovs, daemon: &Daemon, n: usize) -> Result<u16, String> {
    let pod = test_pod(n);
    ovs.netns()
        .add_veth(&pod.veth)
        .map_err(|e| format!("veth {}: {e}", pod.veth))?;
    daemon
        .pod_add(&pod.pod, &pod.veth, &pod.ip, &pod.mac, &pod.sandbox, 10)
        .map_err(|e| e.to_string())
}

/// One kind of change made behind the daemon's back: `ovs-ofctl CMD br0 ARGS`.
struct Drift {
    name: &'static str,
    command: &'static str,
    args: &'static [&'static str],
}

const DRIFTS: &[Drift] = &[
    Drift {
        name: "del-flows table=30",
        command: "del-flows",
        args: &["table=30"],
    },
    Drift {
        name: "a foreign add-flow",
        command: "add-flow",
        args: &["table=30,priority=999,ip,nw_dst=192.0.2.9,actions=drop"],
    },
    Drift {
        name: "mod-flows table=100",
        command: "mod-flows",
        args: &["table=100,actions=drop"],
    },
    Drift {
        name: "del-flows (every flow)",
        command: "del-flows",
        args: &[],
    },
];

fn drift_repair() {
    let ovs = Ovs::start().expect("a private OVS (run as root)");
    let daemon =
        Daemon::start(&ovs, Path::new(OFNODE), &["--no-host-network"]).expect("ofnode run");
    daemon.cli(ONE_NODE_SETUP).expect("ofnode setup");
    add_pod(&ovs, &daemon, 0).expect("pod add");
    daemon
        .wait_status(GIVE_UP, "flow monitor", |s| {
            s["drift"]["detection"] == "flow_monitor" && s["in_sync"] == true
        })
        .expect("the daemon watches br0");
    let expected = ovs.dump_flows("br0").expect("dump-flows");
    let mut all = Vec::new();
    for drift in DRIFTS {
        let mut took = Vec::with_capacity(DRIFT_ROUNDS);
        for round in 0..DRIFT_ROUNDS {
            std::thread::sleep(SETTLE);
            ovs.ofctl(drift.command, "br0", drift.args)
                .unwrap_or_else(|e| panic!("{}: {e}", drift.name));
            let back = ovs
                .wait_flows("br0", &expected, GIVE_UP)
                .unwrap_or_else(|e| panic!("{}, round {round}: {e}", drift.name));
            took.push(back.as_secs_f64());
        }
        let repairs = daemon.status_json().expect("status")["drift"]["repairs"].clone();
        let stats = Stats::of(&took);
        println!(
            "faults drift repair, {}: the desired table back {} after ovs-ofctl returned \
             ({DRIFT_ROUNDS} rounds; repairs counted so far: {repairs})",
            drift.name,
            stats.describe()
        );
        all.extend(took);
    }
    println!(
        "faults drift repair, all kinds: {} ({} rounds; the flow monitor reports the change, \
         ofnode waits out its 100 ms debounce, reads the table and repairs it in one bundle; \
         polled with ovs-ofctl dump-flows every 5 ms)",
        Stats::of(&all).describe(),
        all.len()
    );
}

fn ha_takeover() {
    let ovs = Ovs::start().expect("a private OVS (run as root)");
    ovs.add_bridge("br0").expect("br0");
    let binary = Path::new(OFNODE);
    let mut peers = [
        ha::start_peer(&ovs, binary, 1).expect("peer 1"),
        ha::start_peer(&ovs, binary, 2).expect("peer 2"),
    ];
    ha::wait_role(&peers[0], "active", GIVE_UP).expect("peer 1 active");
    ha::wait_hears(&peers[1], 1, GIVE_UP).expect("peer 2 stands by");
    peers[0].cli(ONE_NODE_SETUP).expect("setup");
    add_pod(&ovs, &peers[0], 0).expect("the first pod");

    let (mut active_at, mut pod_adds) = (Vec::new(), Vec::new());
    for round in 0..HA_ROUNDS {
        let (dying, standby) = if round % 2 == 0 { (0, 1) } else { (1, 0) };
        let started = Instant::now();
        peers[dying].kill9();
        ha::wait_role(&peers[standby], "active", GIVE_UP)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let active = started.elapsed();
        add_pod(&ovs, &peers[standby], round + 1)
            .unwrap_or_else(|e| panic!("round {round}: pod add through the new active: {e}"));
        let pod_add = started.elapsed();
        active_at.push(active.as_secs_f64());
        pod_adds.push(pod_add.as_secs_f64());
        println!(
            "faults ha round {round}: peer {} killed -9; peer {} active after {:.3} s, a pod add \
             through it answered after {:.3} s",
            dying + 1,
            standby + 1,
            active.as_secs_f64(),
            pod_add.as_secs_f64()
        );
        peers[dying]
            .spawn()
            .unwrap_or_else(|e| panic!("round {round}: restart peer {}: {e}", dying + 1));
        let standby_id = u16::try_from(standby + 1).unwrap_or(0);
        ha::wait_hears(&peers[dying], standby_id, GIVE_UP)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        std::thread::sleep(SETTLE);
    }
    println!(
        "faults ha takeover after kill -9 of the active daemon ({} rounds, heartbeat {} ms, \
         takeover {} ms): the standby active after {}; a pod add through it answered after {}",
        active_at.len(),
        ha::HEARTBEAT_MS,
        ha::TAKEOVER_MS,
        Stats::of(&active_at).describe(),
        Stats::of(&pod_adds).describe()
    );
}

/// Median, 90th percentile and maximum of a sample, in seconds.
struct Stats {
    median: f64,
    p90: f64,
    max: f64,
}

impl Stats {
    fn of(samples: &[f64]) -> Stats {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((sorted.len() as f64 * q).ceil() as usize).saturating_sub(1);
            sorted.get(i).copied().unwrap_or(f64::NAN)
        };
        Stats {
            median: at(0.5),
            p90: at(0.9),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }

    fn describe(&self) -> String {
        format!(
            "median {:.3} s, p90 {:.3} s, max {:.3} s",
            self.median, self.p90, self.max
        )
    }
}
