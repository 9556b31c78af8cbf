//! End to end on a two-node cluster (ofnode daemons, subnet mode) in namespaces, a pod on node 0
//! pinging a pod on node 1:
//! 1. issue 7's recovery target: the ping recovers within 2 s of ovs-vswitchd coming back after
//!    a crash (kill -9 and restart, node 1 and node 0 in turn; ping every 50 ms, times from
//!    `ping -D` stamps);
//! 2. issue 18's hitless restarts, with `ping -i 0.01` (100 echo requests a second) and the
//!    requests that got no reply counted: (a) the ofnode daemon killed -9 and started again,
//!    (b) it restarted with SIGTERM (goal for both: 0 lost), (c) node 1's ovs-vswitchd
//!    restarted the way OVS's hot restart does, with `other_config:flow-restore-wait=true`
//!    (ofnode installs its table through the management socket and removes the key), and for
//!    comparison restarted plainly (kill -9, started again at once), each with the daemons'
//!    OpenFlow target passive (`ptcp:`, a Controller row on br0: ovs-vswitchd flushes br0 when
//!    the key goes, and ofnode installs the table again) and active (`unix:DIR/br0.mgmt`, no
//!    Controller row: no flush). The userspace datapath loses its flows with the process, so
//!    some loss is unavoidable in (c). For the passive flow-restore-wait rounds the daemon's
//!    log also tells how soon after the key's removal the table was back, against when the
//!    bridge's own controller session came up (whose resync would otherwise re-install it).
//!
//! Run: `cargo bench --bench e2e` (as root).

use std::time::Duration;

use ofnode_harness::cluster::{
    unix_now, Cluster, ClusterError, CrossNodePing, DaemonOpenflow, DaemonStop, Endpoint, Loss,
    Node, Pinger, Recovery,
};

const ROUNDS: usize = 5;
/// How long the switch stays down each round.
const OUTAGE: Duration = Duration::from_secs(1);
/// Past this a round counts as "never recovered" and the run stops.
const GIVE_UP: Duration = Duration::from_secs(15);
/// The target, from the switch serving again to the first reply.
const TARGET_SECONDS: f64 = 2.0;

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means "not me".
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"e2e".contains(&arg))
    {
        return;
    }
    let ping = CrossNodePing::start(env!("CARGO_BIN_EXE_ofnode"))
        .expect("two nodes with a pod each and a ping between them (run as root)");
    let (cluster, pinger) = (&ping.cluster, &ping.pinger);
    if !ping.replies_within(Duration::from_secs(5)) {
        panic!(
            "no echo reply before any restart\n{}",
            cluster.diagnostics()
        );
    }

    let mut rounds: Vec<Recovery> = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        // The remote node first, then the pinging pod's own, alternating.
        let node = if round % 2 == 0 { 1 } else { 0 };
        let recovery = cluster
            .node(node)
            .restart_vswitchd_while_pinging(pinger, OUTAGE, GIVE_UP)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        println!("e2e restart round {round}: {}", recovery.describe());
        // Start the next round from a steady ping, not from the first reply after a restart.
        if pinger
            .wait_reply_after(recovery.first_reply_at + 0.5, Duration::from_secs(5))
            .is_none()
        {
            panic!("round {round}: replies stopped again after recovering");
        }
        rounds.push(recovery);
    }
    report(&rounds);

    let CrossNodePing {
        pinger,
        from,
        to,
        mut cluster,
    } = ping;
    drop(pinger);
    let pinger = from
        .start_pinger_every(to.ip, FAST_PING)
        .expect("ping -i 0.01");
    if pinger
        .wait_reply_after(unix_now(), Duration::from_secs(5))
        .is_none()
    {
        panic!("no reply to the fast ping\n{}", cluster.diagnostics());
    }
    for (name, how) in [
        (
            "(a) ofnode daemon killed -9 and started again",
            DaemonStop::Kill9,
        ),
        (
            "(b) ofnode daemon restarted with SIGTERM",
            DaemonStop::Sigterm,
        ),
    ] {
        let losses: Vec<Loss> = (0..LOSS_ROUNDS)
            .map(|round| {
                let node = if round % 2 == 0 { 1 } else { 0 };
                loss_during(&pinger, || {
                    cluster.node_mut(node).restart_daemon(how, DAEMON_AWAY)
                })
                .unwrap_or_else(|e| panic!("{name}, round {round}: {e}"))
            })
            .collect();
        report_loss(name, &losses);
    }
    vswitchd_restarts(&pinger, &cluster, DaemonOpenflow::Passive);
    drop(pinger);
    drop((from, to));
    drop(cluster);

    let ping =
        CrossNodePing::start_with_openflow(env!("CARGO_BIN_EXE_ofnode"), DaemonOpenflow::Active)
            .expect("the cluster again, with active OpenFlow targets");
    let pinger = ping
        .from
        .start_pinger_every(ping.to.ip, FAST_PING)
        .expect("ping -i 0.01");
    if pinger
        .wait_reply_after(unix_now(), Duration::from_secs(5))
        .is_none()
    {
        panic!("no reply to the fast ping\n{}", ping.cluster.diagnostics());
    }
    vswitchd_restarts(&pinger, &ping.cluster, DaemonOpenflow::Active);
    drop(pinger);
    drop(ping);
}

/// `ping -i 0.01`.
const FAST_PING: Duration = Duration::from_millis(10);
/// Rounds per hitless-restart scenario, nodes alternating (the pinged pod's node first).
const LOSS_ROUNDS: usize = 4;
/// How long the daemon stays away in each round.
const DAEMON_AWAY: Duration = Duration::from_secs(1);
/// Steady ping before and after each event, so every loss falls inside the counted window.
const MARGIN: Duration = Duration::from_secs(1);

/// Echo requests lost around `event`: counted from `MARGIN` before it to `MARGIN` after the
/// first reply that follows it.
fn loss_during(
    pinger: &Pinger,
    event: impl FnOnce() -> Result<(), ClusterError>,
) -> Result<Loss, ClusterError> {
    let start = unix_now();
    std::thread::sleep(MARGIN);
    event()?;
    let after = unix_now();
    let first = pinger.wait_reply_after(after, GIVE_UP).ok_or_else(|| {
        ClusterError::Invalid(format!("no echo reply within {GIVE_UP:?} of the event"))
    })?;
    std::thread::sleep(MARGIN);
    let end = unix_now().max(first.at + MARGIN.as_secs_f64());
    Ok(pinger.loss_between(start, end))
}

fn report_loss(name: &str, losses: &[Loss]) {
    let lost: u32 = losses.iter().map(|l| l.lost).sum();
    let sent: u32 = losses.iter().map(|l| l.sent).sum();
    let rounds: Vec<String> = losses.iter().map(|l| l.lost.to_string()).collect();
    let verdict = if lost == 0 { "goal met" } else { "GOAL MISSED" };
    println!(
        "e2e hitless restart {name}: {lost} echo replies lost of {sent} requests over {} rounds \
         (per round: {}; ping -i 0.01 across nodes; goal 0): {verdict}",
        losses.len(),
        rounds.join(", ")
    );
}

/// (c): node 1's ovs-vswitchd (the pinged pod's) restarted `LOSS_ROUNDS` times plainly, then
/// `LOSS_ROUNDS` times with flow-restore-wait, with the daemons' OpenFlow target `openflow`.
/// Counted: the echo requests lost around each restart; each round ends when node 1's table is
/// whole again, in sync, and (with the key) ofnode has removed the key (nothing else does
/// here).
fn vswitchd_restarts(pinger: &Pinger, cluster: &Cluster, openflow: DaemonOpenflow) {
    let node = cluster.node(1);
    let mut desired = node.flows().expect("flows");
    desired.sort();
    let back = |node: &Node| {
        node.wait_for(GIVE_UP, "the table back and no flow-restore-wait", |node| {
            let key_set = node.flow_restore_wait()?;
            let mut flows = node.flows()?;
            flows.sort();
            let whole = flows == desired;
            if !key_set && whole && node.status()?["in_sync"] == true {
                return Ok(Some(()));
            }
            Err(ClusterError::Invalid(format!(
                "table whole: {whole}, flow-restore-wait still set: {key_set}"
            )))
        })
    };
    let log_mark = daemon_log(node).len();
    for with_key in [false, true] {
        let losses: Vec<Loss> = (0..LOSS_ROUNDS)
            .map(|round| {
                loss_during(pinger, || {
                    if with_key {
                        node.restart_vswitchd_with_flow_restore_wait()?;
                    } else {
                        node.restart_vswitchd()?;
                    }
                    back(node)
                })
                .unwrap_or_else(|e| panic!("(c), round {round}: {e}\n{}", cluster.diagnostics()))
            })
            .collect();
        let lost: u32 = losses.iter().map(|l| l.lost).sum();
        let sent: u32 = losses.iter().map(|l| l.sent).sum();
        let rounds: Vec<String> = losses.iter().map(|l| l.lost.to_string()).collect();
        let how = if with_key {
            "with flow-restore-wait=true (ofnode installs through br0.mgmt, then removes the key)"
        } else {
            "plainly (kill -9, started again at once; ofnode re-installs when the switch is back)"
        };
        println!(
            "e2e (c) ovs-vswitchd restarted {how}, OpenFlow {}: {lost} echo replies lost of \
             {sent} requests over {} rounds (per round: {}; ping -i 0.01 across nodes)",
            openflow.name(),
            losses.len(),
            rounds.join(", ")
        );
    }
    if openflow == DaemonOpenflow::Passive {
        let log = daemon_log(node);
        report_flush_gap(log.get(log_mark..).unwrap_or_default());
    }
}

fn daemon_log(node: &Node) -> String {
    node.daemon()
        .and_then(|d| std::fs::read_to_string(&d.log).ok())
        .unwrap_or_default()
}

/// Passive target: after each removal of the key (ovs-vswitchd has flushed br0 by then), when
/// ofnode had the table back through the session it had, against when the bridge's own
/// controller session came up (whose connect resync would otherwise have re-installed it).
fn report_flush_gap(log: &str) {
    let lines: Vec<&str> = log.lines().collect();
    let removals: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("removed other_config:flow-restore-wait"))
        .collect();
    let mut gaps = Vec::new();
    for (n, &i) in removals.iter().enumerate() {
        let Some(removed) = log_seconds(lines[i]) else {
            continue;
        };
        let round = &lines[i + 1..removals.get(n + 1).copied().unwrap_or(lines.len())];
        let after = |needle: &dyn Fn(&str) -> bool| {
            round
                .iter()
                .find(|l| needle(l))
                .and_then(|l| log_seconds(l))
                .map(|t| format!("{:.1}", (t - removed) * 1000.0))
        };
        let back = after(&|l: &str| l.contains("the table is back after the flush"))
            .or_else(|| {
                after(&|l: &str| l.contains("installing the table after the flush failed"))
                    .map(|t| format!("failed at {t}"))
            })
            .unwrap_or_else(|| "-".into());
        let bridge =
            after(&|l: &str| l.contains("supervisor: connected") && l.contains("peer=tcp:"))
                .unwrap_or_else(|| "-".into());
        gaps.push(format!("{back} / {bridge}"));
    }
    println!(
        "e2e (c) passive, flow-restore-wait: after each removal of the key, ms until ofnode had \
         the table back through the session it had / until the bridge's own controller session \
         came up (whose resync would have re-installed it): {}",
        gaps.join(", ")
    );
}

/// The time of day of a log line (`2026-01-02T03:04:05.678901Z …`), in seconds.
fn log_seconds(line: &str) -> Option<f64> {
    let (_, time) = line.split_whitespace().next()?.split_once('T')?;
    let mut parts = time.trim_end_matches('Z').split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

fn report(rounds: &[Recovery]) {
    let serving: Vec<f64> = rounds.iter().map(|r| r.after_serving).collect();
    let start: Vec<f64> = rounds.iter().map(|r| r.after_start).collect();
    let startup: Vec<f64> = rounds.iter().map(|r| r.startup).collect();
    let (serving_median, serving_max) = median_max(&serving);
    let (start_median, start_max) = median_max(&start);
    let (startup_median, _) = median_max(&startup);
    println!(
        "e2e ping recovery after kill -9 + restart of ovs-vswitchd ({} rounds, nodes alternating): \
         first reply after the switch serves median {serving_median:.3} s, max {serving_max:.3} s; \
         after its start median {start_median:.3} s, max {start_max:.3} s \
         (its own startup median {startup_median:.3} s)",
        rounds.len()
    );
    println!(
        "  (\"serves\": ovs-vswitchd has applied an OVSDB change after its start; a negative time \
         means the first reply came before that check returned)"
    );
    let verdict = if serving_max <= TARGET_SECONDS {
        "PASS"
    } else {
        "NOT MET"
    };
    println!(
        "e2e recovery target: first reply within {TARGET_SECONDS:.0} s of the switch serving, \
         worst round {serving_max:.3} s: {verdict}"
    );
}

/// The median and the maximum of a non-empty sample.
fn median_max(samples: &[f64]) -> (f64, f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    let max = sorted.last().copied().unwrap_or(f64::NAN);
    (median, max)
}
