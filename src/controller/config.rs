//! `ofnode controller` flags, and the settings they make once checked: the networks it cuts
//! subnets from, the mode (which decides whether and how namespaces get VNIDs), and the lease's
//! timing, whose margins are what fences a deposed leader (see `lease.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::subnets::subnet_count;
use crate::sdn::Mode;
use crate::value::Cidr;

/// More blocks than this would make the allocator's table (4 bytes a block) needlessly large:
/// a million subnets is far beyond any cluster.
pub const MAX_SUBNETS: u64 = 1 << 20;

/// `ofnode controller` flags.
#[derive(Debug, Clone, Args)]
pub struct ControllerArgs {
    /// A kubeconfig file [default: the in-cluster service account].
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The whole cluster's pod network, cut into one subnet per node.
    #[arg(long, value_name = "CIDR")]
    pub cluster_network: Cidr,
    /// Host bits of each node's subnet, as openshift-sdn's hostSubnetLength: 9 gives /23s
    /// (510 pod addresses and the gateway).
    #[arg(long, value_name = "BITS")]
    pub host_subnet_length: u8,
    /// The services' cluster IP network (no node IP or subnet may lie in it).
    #[arg(long, value_name = "CIDR")]
    pub service_network: Cidr,
    /// The nodes' mode: subnet allocates HostSubnets only; multitenant and networkpolicy also a
    /// NetNamespace (VNID) per Namespace.
    #[arg(long, value_enum, default_value_t = Mode::Subnet)]
    pub mode: Mode,
    /// A namespace given the global VNID 0 (multitenant mode only; repeat for more)
    /// [default: default].
    #[arg(long = "global-namespace", value_name = "NAME")]
    pub global_namespaces: Vec<String>,
    /// This controller's name in the Lease [default: the host name and a random suffix, new
    /// with every start].
    #[arg(long, value_name = "NAME")]
    pub identity: Option<String>,
    /// The namespace of the leader Lease.
    #[arg(long, default_value = "ofnode", value_name = "NAMESPACE")]
    pub lease_namespace: String,
    /// The leader Lease's name.
    #[arg(long, default_value = "ofnode-controller", value_name = "NAME")]
    pub lease_name: String,
    /// How long a standby waits, after the lease last changed, before it takes it over
    /// (whole seconds, as the Lease holds it).
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease_duration: Duration,
    /// How long the leader may go without a successful renewal before it stops writing.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub renew_deadline: Duration,
    /// How often the leader renews, and a standby retries after a failed attempt.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub retry_period: Duration,
    /// Where /status (JSON), /metrics (Prometheus) and /healthz are served over HTTP.
    #[arg(long, default_value = "127.0.0.1:9446", value_name = "ADDRESS")]
    pub status_address: SocketAddr,
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cluster_network: Cidr,
    /// The prefix length of a node's subnet (32 − host bits).
    pub subnet_len: u8,
    pub service_network: Cidr,
    pub mode: Mode,
    /// Namespaces whose NetNamespace gets VNID 0 (empty unless multitenant).
    pub global_namespaces: Vec<String>,
    pub identity: String,
    pub lease: LeaseTiming,
    pub lease_namespace: String,
    pub lease_name: String,
    pub status_address: SocketAddr,
}

/// The lease's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseTiming {
    /// The longest one write may take: half the margin between the renew deadline and the
    /// lease duration; the other half absorbs clocks that run at different rates.
    pub fn write_timeout(&self) -> Duration {
        self.duration.saturating_sub(self.renew_deadline) / 2
    }

    pub fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }

    fn validate(&self) -> Result<(), SettingsError> {
        let invalid = |why: String| Err(SettingsError::Lease(why));
        if self.duration.subsec_nanos() != 0 || self.duration.is_zero() {
            return invalid(format!(
                "the lease duration {:?} must be a whole number of seconds (a Lease holds seconds)",
                self.duration
            ));
        }
        if self.renew_deadline >= self.duration {
            return invalid(format!(
                "the renew deadline {:?} must be shorter than the lease duration {:?}: a leader must \
                 stop writing before a standby may take over",
                self.renew_deadline, self.duration
            ));
        }
        if self.retry_period >= self.renew_deadline || self.retry_period.is_zero() {
            return invalid(format!(
                "the retry period {:?} must be above zero and shorter than the renew deadline {:?} \
                 (a leader renews several times before its deadline)",
                self.retry_period, self.renew_deadline
            ));
        }
        if self.write_timeout() < MIN_WRITE_TIMEOUT {
            return invalid(format!(
                "the lease duration {:?} is less than {:?} above the renew deadline {:?}: writes \
                 would have under {MIN_WRITE_TIMEOUT:?} each",
                self.duration,
                MIN_WRITE_TIMEOUT * 2,
                self.renew_deadline
            ));
        }
        Ok(())
    }
}

const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "--host-subnet-length {bits} does not fit cluster network {network}: it must be 2 to {} \
         (a /{} per node at most, the whole network)",
        32 - u32::from(.network.prefix()), .network.prefix()
    )]
    HostSubnetLength { bits: u8, network: Cidr },
    #[error(
        "cluster network {network} in /{len} subnets is {count} subnets; at most {MAX_SUBNETS} are \
         supported (use a longer --host-subnet-length or a smaller network)"
    )]
    TooManySubnets { network: Cidr, len: u8, count: u64 },
    #[error("cluster network {cluster} and service network {service} overlap")]
    Overlap { cluster: Cidr, service: Cidr },
    #[error(
        "--global-namespace is for multitenant mode only (in {0} mode no namespace has VNID 0)"
    )]
    GlobalOutsideMultitenant(Mode),
    #[error("lease: {0}")]
    Lease(String),
    #[error("--identity must not be empty")]
    EmptyIdentity,
}

impl ControllerArgs {
    /// Checks the flags; the identity defaults to the host name and a random suffix (two
    /// controllers on one host must not share one).
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        let (network, bits) = (self.cluster_network, self.host_subnet_length);
        let max_bits = 32 - network.prefix();
        if !(2..=max_bits).contains(&bits) {
            return Err(SettingsError::HostSubnetLength { bits, network });
        }
        let subnet_len = 32 - bits;
        let count = subnet_count(network, subnet_len);
        if count > MAX_SUBNETS {
            return Err(SettingsError::TooManySubnets {
                network,
                len: subnet_len,
                count,
            });
        }
        if network.overlaps(&self.service_network) {
            return Err(SettingsError::Overlap {
                cluster: network,
                service: self.service_network,
            });
        }
        let lease = LeaseTiming {
            duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        };
        lease.validate()?;
        Ok(Settings {
            cluster_network: network,
            subnet_len,
            service_network: self.service_network,
            mode: self.mode,
            global_namespaces: self.global_namespaces()?,
            identity: self.identity()?,
            lease,
            lease_namespace: self.lease_namespace.clone(),
            lease_name: self.lease_name.clone(),
            status_address: self.status_address,
        })
    }

    /// `default` has VNID 0 in multitenant mode, as in openshift-sdn (and the seed's admin
    /// namespaces were the ones named besides it). In networkpolicy mode VNIDs only tell
    /// namespaces apart (ofnode's node refuses 0 there), and subnet mode has none.
    fn global_namespaces(&self) -> Result<Vec<String>, SettingsError> {
        match (self.mode, self.global_namespaces.is_empty()) {
            (Mode::Multitenant, true) => Ok(vec!["default".into()]),
            (Mode::Multitenant, false) => Ok(self.global_namespaces.clone()),
            (_, true) => Ok(Vec::new()),
            (mode, false) => Err(SettingsError::GlobalOutsideMultitenant(mode)),
        }
    }

    fn identity(&self) -> Result<String, SettingsError> {
        match &self.identity {
            Some(identity) if identity.trim().is_empty() => Err(SettingsError::EmptyIdentity),
            Some(identity) => Ok(identity.clone()),
            None => Ok(format!(
                "{}_{:08x}",
                host_name().unwrap_or_else(|| "ofnode-controller".into()),
                rand::random::<u32>()
            )),
        }
    }
}

fn host_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(text.trim().to_string()).filter(|name| !name.is_empty())
}

/// `15s`, `500ms`, or a number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.strip_suffix("ms") {
        Some(n) => (n, 1_000_000u64),
        None => (text.strip_suffix('s').unwrap_or(text), 1_000_000_000u64),
    };
    let value: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 15s or 500ms"))?;
    value
        .checked_mul(unit)
        .map(Duration::from_nanos)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    /// The settings from the usual flags, with `extra` (flag, value pairs) overriding them.
    fn settings(extra: &[&str]) -> Result<Settings, SettingsError> {
        let mut flags = vec![
            ("--cluster-network", "10.128.0.0/14"),
            ("--host-subnet-length", "9"),
            ("--service-network", "172.30.0.0/16"),
            ("--identity", "ctl-a"),
        ];
        for pair in extra.chunks(2) {
            flags.retain(|(flag, _)| *flag != pair[0]);
            flags.push((pair[0], pair[1]));
        }
        let argv = std::iter::once("ofnode").chain(flags.into_iter().flat_map(|(f, v)| [f, v]));
        Cli::try_parse_from(argv).unwrap().args.settings()
    }

    #[test]
    fn defaults_are_openshift_sdns() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.subnet_len, 23);
        assert_eq!(s.mode, Mode::Subnet);
        assert!(s.global_namespaces.is_empty());
        assert_eq!(s.lease.duration, Duration::from_secs(15));
        assert_eq!(s.lease.write_timeout(), Duration::from_millis(2500));
        let multitenant = settings(&["--mode", "multitenant"]).unwrap();
        assert_eq!(multitenant.global_namespaces, ["default"]);
    }

    #[test]
    fn bad_networks_are_refused_by_name() {
        let err = |extra: &[&str]| settings(extra).unwrap_err().to_string();
        let too_long = err(&["--host-subnet-length", "19"]);
        assert!(too_long.contains("must be 2 to 18"), "{too_long}");
        assert!(err(&["--host-subnet-length", "1"]).contains("must be 2 to 18"));
        let overlap = err(&["--service-network", "10.130.0.0/16"]);
        assert_eq!(
            overlap,
            "cluster network 10.128.0.0/14 and service network 10.130.0.0/16 overlap"
        );
        let many = err(&[
            "--cluster-network",
            "10.0.0.0/8",
            "--host-subnet-length",
            "2",
        ]);
        assert!(many.contains("4194304 subnets"), "{many}");
        let global = err(&["--mode", "networkpolicy", "--global-namespace", "default"]);
        assert!(global.contains("multitenant mode only"), "{global}");
    }

    #[test]
    fn lease_timing_must_leave_a_fence() {
        let err = |extra: &[&str]| settings(extra).unwrap_err().to_string();
        assert!(err(&["--lease-duration", "1500ms"]).contains("whole number of seconds"));
        assert!(err(&["--renew-deadline", "15s"]).contains("must be shorter than the lease"));
        assert!(err(&["--retry-period", "10s"]).contains("shorter than the renew deadline"));
        assert!(
            err(&["--renew-deadline", "14800ms", "--retry-period", "1s"]).contains("under 250ms")
        );
        assert!(settings(&[
            "--lease-duration",
            "4",
            "--renew-deadline",
            "2s",
            "--retry-period",
            "500ms"
        ])
        .is_ok());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("").is_err());
    }
}
