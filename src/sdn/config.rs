//! How a node is configured, and what it reports about itself.

use std::path::PathBuf;
use std::time::Duration;

use super::dns::DnsConfig;
use crate::unixctl::VswitchdCtl;

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The bridge (the seed's `br0`).
    pub bridge: String,
    /// OVSDB target, `unix:/run/openvswitch/db.sock` or `tcp:HOST:PORT`.
    pub ovsdb: String,
    /// OpenFlow target: `unix:/run/openvswitch/br0.mgmt` (active), or `ptcp:PORT[:IP]` /
    /// `punix:PATH` (passive: the node points the bridge's controller at itself).
    pub openflow: String,
    /// Where the desired state is kept.
    pub state_dir: PathBuf,
    /// The bridge's datapath; None picks `system` when the openvswitch kernel module is loaded,
    /// `netdev` (userspace) otherwise.
    pub datapath_type: Option<String>,
    /// tun0's MTU.
    pub mtu: u32,
    /// Configure tun0's address and MTU, routes and forwarding at setup (the seed's SetupSDN).
    pub manage_host_network: bool,
    /// The network namespace the host network part acts in (`/run/netns/NAME`); None is the
    /// daemon's own (it runs in ovs-vswitchd's).
    pub netns: Option<PathBuf>,
    /// How egress policy DNS names are resolved.
    pub dns: DnsConfig,
    /// How long setup waits for the switch to accept the OpenFlow connection.
    pub connect_timeout: Duration,
    /// Upper bound of the delay between reconnect attempts to the switch.
    pub reconnect_max: Duration,
    /// How long any one OpenFlow request may wait for its reply (a bundle counts each step).
    /// A COMMIT answered later is an unknown outcome, settled from the switch's table.
    pub request_timeout: Duration,
    /// An idle OpenFlow connection is probed with an echo request after this long.
    pub echo_interval: Duration,
    /// The switch is declared dead (and dialled again) when a probe had no answer, nor any
    /// other traffic, for this long.
    pub echo_timeout: Duration,
    /// Most operations merged into one bundle and one journal write.
    pub max_batch: usize,
    /// A kernel VXLAN device kept in line with the host subnets (issue 6): its entries for
    /// every host subnet that names a VTEP MAC, programmed up front or on the kernel's misses.
    pub vxlan: Option<crate::netlink::VxlanSettings>,
    /// When flow table drift is repaired (debounce after a reported change; polling period
    /// when the switch refuses the flow monitor).
    pub drift: super::drift::DriftTiming,
    /// High availability with peers on the same bridge (see `ha.rs`); None: this daemon alone.
    pub ha: Option<super::ha::HaConfig>,
    /// Key, certificate and CA for `ssl:`/`pssl:` OpenFlow and `ssl:` OVSDB targets.
    pub tls: Option<crate::tls::TlsConfig>,
    /// How often the per-pod traffic counters are read from the switch (`counters.rs`);
    /// zero: never.
    pub pod_counters_interval: Duration,
    /// Most pods whose counters /metrics exports (the rest are counted as omitted).
    pub pod_metrics_max: usize,
    /// How often /metrics' per-policy-rule counters are read from the switch
    /// (`rule_counters.rs`); zero: never (`netpol list --stats` still asks on demand).
    pub rule_counters_interval: Duration,
    /// Most policy rule series /metrics exports (the rest are summed into `policy="(other)"`).
    pub rule_metrics_max: usize,
    /// ovs-vswitchd's control socket (the stale-megaflow purge; `ofnode trace` has its own).
    pub vswitchd_ctl: VswitchdCtl,
    /// Purge the datapath's cached flows after every change when Open vSwitch has the
    /// stale-megaflow bug (`megaflows.rs`); off for a package with the fix backported.
    pub stale_megaflow_purge: bool,
    /// The policy audit log: where its lines go (`audit_log/config.rs`).
    pub audit_log: super::audit_log::AuditLogConfig,
    /// The meter of every audited policy rule (`audit_rate`, `audit_burst`).
    pub audit: AuditRate,
}

impl NodeConfig {
    /// The defaults for a node whose OVS sockets and state live at the given places.
    pub fn new(
        ovsdb: impl Into<String>,
        openflow: impl Into<String>,
        state_dir: impl Into<PathBuf>,
    ) -> NodeConfig {
        let ovsdb = ovsdb.into();
        NodeConfig {
            bridge: "br0".to_string(),
            vswitchd_ctl: VswitchdCtl::new(None, &ovsdb),
            stale_megaflow_purge: true,
            ovsdb,
            openflow: openflow.into(),
            state_dir: state_dir.into(),
            datapath_type: None,
            mtu: 1450,
            manage_host_network: true,
            netns: None,
            dns: DnsConfig::default(),
            connect_timeout: Duration::from_secs(10),
            reconnect_max: Duration::from_millis(500),
            request_timeout: Duration::from_secs(60),
            echo_interval: Duration::from_secs(5),
            echo_timeout: Duration::from_secs(5),
            max_batch: 256,
            vxlan: None,
            drift: super::drift::DriftTiming {
                repair: true,
                debounce: Duration::from_millis(100),
                poll_interval: Duration::from_secs(10),
            },
            ha: None,
            tls: None,
            pod_counters_interval: Duration::from_secs(10),
            pod_metrics_max: super::counters::DEFAULT_POD_METRICS_MAX,
            audit_log: super::audit_log::AuditLogConfig::default(),
            rule_counters_interval: super::rule_counters::DEFAULT_RULE_COUNTERS_INTERVAL,
            rule_metrics_max: super::rule_counters::DEFAULT_RULE_METRICS_MAX,
            audit: AuditRate::default(),
        }
    }
}

/// The rate of every audited rule's meter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditRate {
    /// Packet-ins per second per rule.
    pub rate: u32,
    /// Packets the meter lets through at once above the rate.
    pub burst: u32,
}

impl AuditRate {
    /// The default burst of `rate`: a tenth of it, at least 1.
    pub fn default_burst(rate: u32) -> u32 {
        (rate / 10).max(1)
    }
}

impl Default for AuditRate {
    fn default() -> AuditRate {
        AuditRate {
            rate: 100,
            burst: AuditRate::default_burst(100),
        }
    }
}

/// `system` where the openvswitch kernel module is loaded, else `netdev`.
pub fn detect_datapath_type() -> &'static str {
    if std::path::Path::new("/sys/module/openvswitch").exists() {
        "system"
    } else {
        "netdev"
    }
}

#[cfg(test)]
mod audit_rate_tests {
    use super::AuditRate;

    #[test]
    fn the_default_burst_is_a_tenth_of_the_rate_and_never_zero() {
        assert_eq!(AuditRate::default_burst(100), 10);
        assert_eq!(AuditRate::default_burst(5), 1);
        assert_eq!(
            AuditRate::default(),
            AuditRate {
                rate: 100,
                burst: 10
            }
        );
    }
}
