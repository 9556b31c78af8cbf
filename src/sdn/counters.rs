//! Per-pod traffic counters (issue 15), the pure part: which of the switch's flows count for
//! which pod, the snapshot a poll leaves, and its Prometheus series with their bound. The
//! poll itself (three flow-stats requests on the node's OpenFlow connection) is
//! `node/counters.rs`.
//!
//! A pod's counters are the OpenFlow packet and byte counts of its own flows
//! (`flows::pod_flows`), read back by [`readback::pod_flow`]:
//! - **tx** (sent by the pod): its two table 20 flows (`in_port` = its port, ARP with its IP
//!   and MAC, IP with its source IP). Every packet the pod sends that the node lets in passes
//!   exactly one of them, and nothing else does: a spoofed source falls to table 20's drop.
//! - **rx** (received by the pod): its table 40 flow (ARP to its IP, output to its port) and
//!   its table 70 flow (IP to its IP, from local pods, tun0 and VXLAN alike). These are the
//!   only flows that deliver unicast to it.
//!
//! What they do not count: multicast delivered to the pod (table 120 outputs to many ports at
//! once), and packets a policy drops after table 70 (table 80, multitenant isolation) are
//! counted as rx although they never arrive. They restart from zero when the switch's flows
//! are replaced (a pod update or port change, a drift repair, a whole-table re-install after
//! ovs-vswitchd restarted): Prometheus' `rate()` treats that as a counter reset.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ofnode_proto::FlowStats;
use serde::{Deserialize, Serialize};

use super::layout::{ARP_TO_LOCAL, FROM_POD, TO_LOCAL};
use super::prometheus::{escape, gauge, header};
use super::readback::{pod_flow, PodFlow};
use super::types::Pod;
use crate::value::PodKey;

/// The tables holding the counted flows: a poll asks for these three, never per pod.
pub const COUNTED_TABLES: [u8; 3] = [FROM_POD, ARP_TO_LOCAL, TO_LOCAL];

/// How many pods /metrics exports at most, unless `pod_metrics_max` says otherwise.
pub const DEFAULT_POD_METRICS_MAX: usize = 1_000;

/// Packets and bytes a pod received (rx) and sent (tx).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// A pod's counters as the API shows them: the traffic at the last poll, and when that was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodCounters {
    #[serde(flatten)]
    pub traffic: Traffic,
    /// The poll's time, in milliseconds since the Unix epoch.
    pub polled_at_unix_ms: u64,
}

/// The labels of a pod's series: its namespace and name (the one place they come from).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodLabels {
    pub namespace: String,
    pub pod: String,
}

pub fn labels(key: &PodKey) -> PodLabels {
    PodLabels {
        namespace: key.namespace().to_string(),
        pod: key.name().to_string(),
    }
}

/// Each pod's traffic from the flows of [`COUNTED_TABLES`]. A flow counts for the pod whose
/// address (and, from the pod, port) it matches; flows of no pod in `pods` are ignored (a pod
/// added or deleted while the poll ran).
pub fn tally<'a>(
    pods: impl IntoIterator<Item = (&'a PodKey, &'a Pod)>,
    flows: &[FlowStats],
) -> BTreeMap<PodKey, Traffic> {
    let by_ip: HashMap<Ipv4Addr, (&PodKey, &Pod)> =
        pods.into_iter().map(|(k, p)| (p.ip, (k, p))).collect();
    let mut traffic: BTreeMap<PodKey, Traffic> = by_ip
        .values()
        .map(|(k, _)| ((*k).clone(), Traffic::default()))
        .collect();
    for flow in flows {
        let (ip, ofport, tx) = match pod_flow(flow) {
            Some(PodFlow::FromPod { ofport, ip }) => (ip, Some(ofport), true),
            Some(PodFlow::ToPod { ip }) => (ip, None, false),
            None => continue,
        };
        let Some((key, pod)) = by_ip.get(&ip) else {
            continue;
        };
        if ofport.is_some_and(|port| port != pod.ofport) {
            continue;
        }
        let Some(t) = traffic.get_mut(*key) else {
            continue;
        };
        let (packets, bytes) = if tx {
            (&mut t.tx_packets, &mut t.tx_bytes)
        } else {
            (&mut t.rx_packets, &mut t.rx_bytes)
        };
        *packets = packets.saturating_add(flow.packet_count);
        *bytes = bytes.saturating_add(flow.byte_count);
    }
    traffic
}

/// One of a pod's four series: its name, help and value.
struct Series {
    name: &'static str,
    help: &'static str,
    value: fn(&Traffic) -> u64,
}

const SERIES: [Series; 4] = [
    Series {
        name: "ofnode_pod_rx_packets_total",
        help: "Packets received by the pod (its table 40 and 70 flows).",
        value: |t| t.rx_packets,
    },
    Series {
        name: "ofnode_pod_rx_bytes_total",
        help: "Bytes received by the pod (its table 40 and 70 flows).",
        value: |t| t.rx_bytes,
    },
    Series {
        name: "ofnode_pod_tx_packets_total",
        help: "Packets sent by the pod (its table 20 flows).",
        value: |t| t.tx_packets,
    },
    Series {
        name: "ofnode_pod_tx_bytes_total",
        help: "Bytes sent by the pod (its table 20 flows).",
        value: |t| t.tx_bytes,
    },
];

/// What one poll found.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub polled_at: Option<SystemTime>,
    /// How long the poll took (its requests and the tally).
    pub took: Duration,
    pub pods: BTreeMap<PodKey, (PodLabels, Traffic)>,
}

impl Snapshot {
    pub fn new<'a>(
        pods: impl IntoIterator<Item = (&'a PodKey, &'a Pod)>,
        flows: &[FlowStats],
        polled_at: SystemTime,
        took: Duration,
    ) -> Snapshot {
        let pods = tally(pods, flows)
            .into_iter()
            .map(|(key, t)| {
                let labels = labels(&key);
                (key, (labels, t))
            })
            .collect();
        Snapshot {
            polled_at: Some(polled_at),
            took,
            pods,
        }
    }

    fn polled_at_unix_ms(&self) -> Option<u64> {
        unix_ms(self.polled_at?)
    }

    /// The pod's counters, if the last poll saw it.
    pub fn pod(&self, key: &PodKey) -> Option<PodCounters> {
        let (_, traffic) = self.pods.get(key)?;
        Some(PodCounters {
            traffic: *traffic,
            polled_at_unix_ms: self.polled_at_unix_ms()?,
        })
    }

    /// The pods' series in Prometheus text format: the first `max` pods in label order (so
    /// the same pods stay exported from one poll to the next), and a gauge of how many were
    /// left out. A pod the last poll did not see (deleted) has no series.
    pub fn render(&self, max: usize, out: &mut String) {
        let mut exported: Vec<&(PodLabels, Traffic)> = self.pods.values().collect();
        exported.sort_by(|a, b| a.0.cmp(&b.0));
        let omitted = exported.len().saturating_sub(max);
        exported.truncate(max);
        for Series { name, help, value } in SERIES {
            header(out, name, help, "counter");
            for (labels, traffic) in &exported {
                let _ = writeln!(
                    out,
                    "{name}{{namespace=\"{}\",pod=\"{}\"}} {}",
                    escape(&labels.namespace),
                    escape(&labels.pod),
                    value(traffic)
                );
            }
        }
        gauge(
            out,
            "ofnode_pod_metrics_omitted",
            "Pods whose counters are not exported: more pods than pod_metrics_max.",
            omitted,
        );
        if let Some(ms) = self.polled_at_unix_ms() {
            gauge(
                out,
                "ofnode_pod_counters_polled_timestamp_seconds",
                "When the pod counters were last polled.",
                ms as f64 / 1e3,
            );
        }
    }
}

/// Milliseconds since the Unix epoch (None before it).
pub fn unix_ms(at: SystemTime) -> Option<u64> {
    let since = at.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// The last poll's snapshot, shared by the poller, the pod lookup and /metrics.
#[derive(Debug)]
pub struct PodCounterStore {
    max_exported: usize,
    last: Mutex<Snapshot>,
}

impl Default for PodCounterStore {
    fn default() -> Self {
        PodCounterStore::new(DEFAULT_POD_METRICS_MAX)
    }
}

impl PodCounterStore {
    pub fn new(max_exported: usize) -> PodCounterStore {
        PodCounterStore {
            max_exported,
            last: Mutex::new(Snapshot::default()),
        }
    }

    pub fn replace(&self, snapshot: Snapshot) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = snapshot;
    }

    pub fn pod(&self, key: &PodKey) -> Option<PodCounters> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).pod(key)
    }

    /// How long the last poll took.
    pub fn last_poll_took(&self) -> Duration {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).took
    }

    pub fn render(&self, out: &mut String) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .render(self.max_exported, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::flows::{base_flows, pod_flows};
    use crate::sdn::table::installed;
    use crate::sdn::types::{Mode, SetupRequest};
    use crate::value::Vnid;

    fn key(i: u8) -> PodKey {
        PodKey::new("ns", &format!("pod-{i}")).unwrap()
    }

    fn pod(i: u8) -> Pod {
        Pod {
            veth: Some(format!("veth{i}").parse().unwrap()),
            ip: Ipv4Addr::new(10, 128, 0, 10 + i),
            mac: format!("0a:58:0a:80:00:{i:02x}").parse().unwrap(),
            sandbox: format!("{i:064x}").parse().unwrap(),
            vnid: Vnid::new(0).unwrap(),
            ofport: 3 + u16::from(i),
        }
    }

    /// The pod's flows as the switch reports them, flow k having counted (k+1)*n packets of
    /// 100 bytes.
    fn counted(pod: &Pod, n: u64) -> Vec<FlowStats> {
        pod_flows(pod)
            .iter()
            .zip(1..)
            .map(|(fm, k)| FlowStats {
                packet_count: k * n,
                byte_count: k * n * 100,
                ..installed(fm)
            })
            .collect()
    }

    #[test]
    fn tx_is_table_20_and_rx_tables_40_and_70() {
        let (a, b) = (pod(1), pod(2));
        let mut flows = counted(&a, 1);
        flows.extend(counted(&b, 10));
        // Base flows (table 20/40/70 drops) count for nobody.
        let setup = SetupRequest {
            cluster_network: "10.128.0.0/14".parse().unwrap(),
            service_network: "172.30.0.0/16".parse().unwrap(),
            local_subnet: "10.128.0.0/23".parse().unwrap(),
            gateway: "10.128.0.1".parse().unwrap(),
            mode: Mode::Multitenant,
        };
        flows.extend(base_flows(&setup).iter().map(|fm| FlowStats {
            packet_count: 1_000,
            byte_count: 1_000_000,
            ..installed(fm)
        }));
        let (ka, kb) = (key(1), key(2));
        let traffic = tally([(&ka, &a), (&kb, &b)], &flows);
        // pod_flows: table 20 ARP (1), table 20 IP (2), table 40 ARP (3), table 70 IP (4).
        let expect = |n: u64| Traffic {
            tx_packets: 3 * n,
            tx_bytes: 300 * n,
            rx_packets: 7 * n,
            rx_bytes: 700 * n,
        };
        assert_eq!(traffic[&ka], expect(1));
        assert_eq!(traffic[&kb], expect(10));
    }

    #[test]
    fn flows_of_other_pods_or_ports_are_ignored_and_a_pod_without_flows_is_zero() {
        let (a, b) = (pod(1), pod(2));
        let mut moved = a.clone();
        moved.ofport = 99;
        // Flows left from a's old port (a renumbered port) and of b, who is not in the pods.
        let mut flows = counted(&moved, 1);
        flows.extend(counted(&b, 1));
        let ka = key(1);
        let traffic = tally([(&ka, &a)], &flows);
        assert_eq!(traffic.len(), 1);
        let t = traffic[&ka];
        assert_eq!((t.tx_packets, t.rx_packets), (0, 7), "{t:?}");
        let nothing = tally([(&key(3), &pod(3))], &[]);
        assert_eq!(nothing[&key(3)], Traffic::default());
    }

    fn snapshot(n: u8) -> Snapshot {
        let pods: Vec<(PodKey, Pod)> = (0..n).map(|i| (key(i), pod(i))).collect();
        let flows: Vec<FlowStats> = pods.iter().flat_map(|(_, p)| counted(p, 1)).collect();
        Snapshot::new(
            pods.iter().map(|(k, p)| (k, p)),
            &flows,
            UNIX_EPOCH + Duration::from_secs(5),
            Duration::ZERO,
        )
    }

    fn series(text: &str, name: &str) -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn metrics_are_capped_at_max_pods_and_say_how_many_were_left_out() {
        let snap = snapshot(5);
        let mut out = String::new();
        snap.render(3, &mut out);
        for name in [
            "ofnode_pod_rx_packets_total",
            "ofnode_pod_rx_bytes_total",
            "ofnode_pod_tx_packets_total",
            "ofnode_pod_tx_bytes_total",
        ] {
            assert_eq!(series(&out, name).len(), 3, "{name}:\n{out}");
        }
        assert!(out.contains("\nofnode_pod_metrics_omitted 2\n"), "{out}");
        // The first pods in label order are the ones kept.
        let first = labels(&key(0)).pod;
        assert!(out.contains(&format!(
            "ofnode_pod_tx_packets_total{{namespace=\"ns\",pod=\"{first}\"}} 3\n"
        )));
        assert!(!out.contains(&labels(&key(4)).pod), "{out}");
        assert!(out.contains("ofnode_pod_counters_polled_timestamp_seconds 5\n"));

        let mut all = String::new();
        snap.render(5, &mut all);
        assert_eq!(series(&all, "ofnode_pod_rx_bytes_total").len(), 5);
        assert!(all.contains("\nofnode_pod_metrics_omitted 0\n"), "{all}");
        let mut none = String::new();
        snap.render(0, &mut none);
        assert!(series(&none, "ofnode_pod_rx_bytes_total").is_empty());
        assert!(none.contains("\nofnode_pod_metrics_omitted 5\n"));
    }

    #[test]
    fn a_pod_the_last_poll_did_not_see_has_no_counters() {
        let snap = snapshot(2);
        let seen = snap.pod(&key(1)).expect("polled");
        assert_eq!(seen.polled_at_unix_ms, 5_000);
        assert_eq!(seen.traffic.rx_packets, 7);
        assert_eq!(snap.pod(&key(2)), None);
        assert_eq!(Snapshot::default().pod(&key(1)), None);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
    }
}
