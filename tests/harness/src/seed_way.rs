//! The seed's way of a change, for the benches that put ofnode side by side with it: the flows a
//! change made on ofnode's br0 (two dumps compared), written to a second node's br0 the way the
//! seed wrote flows (`ovs-ofctl bundle` exec'd on a file); and the numbers the benches print.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;

/// `table=…, priority=…,match` of a dump-flows line: what identifies an OpenFlow flow.
pub fn flow_key(line: &str) -> &str {
    let line = line.split(" actions=").next().unwrap_or(line);
    match line.strip_prefix("cookie=") {
        Some(rest) => rest.split_once(", ").map_or(line, |(_, rest)| rest),
        None => line,
    }
}

/// The flows a change made on br0: lines to add (new or changed) and flows (table, priority,
/// match) that are gone.
#[derive(Debug, Default)]
pub struct FlowDiff {
    pub add: Vec<String>,
    pub delete: Vec<String>,
}

impl FlowDiff {
    /// What turns dump `before` into dump `after`.
    pub fn between(before: &[String], after: &[String]) -> FlowDiff {
        let before_lines: HashSet<&str> = before.iter().map(String::as_str).collect();
        let after_keys: HashSet<&str> = after.iter().map(|f| flow_key(f)).collect();
        FlowDiff {
            add: after
                .iter()
                .filter(|f| !before_lines.contains(f.as_str()))
                .cloned()
                .collect(),
            delete: before
                .iter()
                .map(|f| flow_key(f))
                .filter(|key| !after_keys.contains(key))
                // dump-flows leaves out table 0; a delete without a table means every table.
                .map(|key| match key.starts_with("table=") {
                    true => key.to_string(),
                    false => format!("table=0, {key}"),
                })
                .collect(),
        }
    }

    /// Flow mods it takes.
    pub fn len(&self) -> usize {
        self.add.len() + self.delete.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `ovs-ofctl bundle` file's lines: deletes first, then adds.
    pub fn bundle_lines(&self) -> Vec<String> {
        self.delete
            .iter()
            .map(|f| format!("flow delete_strict {f}"))
            .chain(self.add.iter().map(|f| format!("flow add {f}")))
            .collect()
    }
}

/// The seed's way of one change on node 0 of `seed`: `lines` (an `ovs-ofctl bundle` file)
/// written to a file and `ovs-ofctl bundle` exec'd; how long that took.
pub fn seed_bundle(seed: &Cluster, lines: &[String]) -> Duration {
    let ovs = seed.node(0).ovs();
    let path = ovs.dir().join("change.txt");
    let started = Instant::now();
    std::fs::write(&path, lines.join("\n") + "\n").expect("write change");
    ovs.ofctl("bundle", "br0", &[&path.display().to_string()])
        .expect("ovs-ofctl bundle");
    started.elapsed()
}

/// One change through ofnode on node 0 of `ours` (`change`, timed) and the same flows the
/// seed's way on `seed` (timed): both durations and what changed.
pub fn side_by_side(
    ours: &Cluster,
    seed: &Cluster,
    change: impl FnOnce(),
) -> (Duration, Duration, FlowDiff) {
    let before = ours.node(0).flows().expect("dump-flows");
    let started = Instant::now();
    change();
    let ours_took = started.elapsed();
    let after = ours.node(0).flows().expect("dump-flows");
    let diff = FlowDiff::between(&before, &after);
    let seed_took = seed_bundle(seed, &diff.bundle_lines());
    (ours_took, seed_took, diff)
}

/// Node 0 of `seed` takes `flows` as its whole table (`ovs-ofctl replace-flows`).
pub fn replace_flows(seed: &Cluster, flows: &[String]) {
    let ovs = seed.node(0).ovs();
    let path = ovs.dir().join("all-flows.txt");
    std::fs::write(&path, flows.join("\n") + "\n").expect("write flows");
    ovs.ofctl("replace-flows", "br0", &[&path.display().to_string()])
        .expect("ovs-ofctl replace-flows");
}

/// The resident memory of process `pid`, in MB (0 when it cannot be read).
pub fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(0.0)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
