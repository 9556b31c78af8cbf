//! DNS names in egress policies: resolved to IPv4 addresses with their TTLs (the seed used
//! `dig` for the TTL, then `getent ahostsv4`), and resolved again when the TTL runs out.
//!
//! The resolver is hickory's, reading /etc/resolv.conf (and /etc/hosts first) unless the
//! configuration names the servers. When it cannot be built the error is kept and reported the
//! way the seed's CheckDNSResolver failure was: the policy then drops all traffic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use hickory_resolver::config::{
    NameServerConfig, NameServerConfigGroup, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::TokioResolver;
use tokio::time::Instant;

/// How egress DNS names are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// Name servers to ask; None reads the system's configuration (/etc/resolv.conf).
    pub nameservers: Option<Vec<SocketAddr>>,
    /// Answers are resolved again no sooner than this after they arrive, whatever their TTL.
    pub min_refresh: Duration,
    /// ... and no later than this (the seed's default TTL when none is known).
    pub max_refresh: Duration,
    /// How long one query may take.
    pub timeout: Duration,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            nameservers: None,
            min_refresh: Duration::from_secs(5),
            max_refresh: Duration::from_secs(30 * 60),
            timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone)]
struct Answer {
    ips: Vec<Ipv4Addr>,
    refresh_at: Instant,
}

/// The node's resolver and the answers it holds for the names policies use.
pub struct Dns {
    config: DnsConfig,
    resolver: Result<TokioResolver, String>,
    answers: Mutex<HashMap<String, Answer>>,
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dns")
            .field("config", &self.config)
            .field("usable", &self.resolver.is_ok())
            .finish()
    }
}

fn build_resolver(config: &DnsConfig) -> Result<TokioResolver, String> {
    let (resolver_config, mut opts) = match &config.nameservers {
        None => hickory_resolver::system_conf::read_system_conf()
            .map_err(|e| format!("cannot read the system resolver configuration: {e}"))?,
        Some(servers) => {
            let mut group = NameServerConfigGroup::new();
            for addr in servers {
                group.push(NameServerConfig::new(*addr, Protocol::Udp));
                group.push(NameServerConfig::new(*addr, Protocol::Tcp));
            }
            (
                ResolverConfig::from_parts(None, Vec::new(), group),
                ResolverOpts::default(),
            )
        }
    };
    if resolver_config.name_servers().is_empty() {
        return Err("no name servers are configured".to_string());
    }
    opts.use_hosts_file = ResolveHosts::Always;
    opts.timeout = config.timeout;
    // The node asks again when an answer expires: the resolver's cache must not hold a
    // "no such name" longer than that, nor an answer longer than the longest refresh.
    opts.negative_max_ttl = Some(config.min_refresh);
    opts.positive_max_ttl = Some(config.max_refresh);
    let provider = TokioConnectionProvider::default();
    Ok(
        hickory_resolver::Resolver::builder_with_config(resolver_config, provider)
            .with_options(opts)
            .build(),
    )
}

impl Dns {
    pub fn new(config: DnsConfig) -> Dns {
        let resolver = build_resolver(&config);
        if let Err(reason) = &resolver {
            tracing::warn!(%reason, "DNS resolver unusable; egress policies with DNS names will drop all traffic");
        }
        Dns {
            config,
            resolver,
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// Why names cannot be resolved at all, if they cannot (the seed's CheckDNSResolver).
    pub fn check(&self) -> Result<(), String> {
        self.resolver.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// Resolves each name now and remembers the answers. A name that does not resolve gets no
    /// addresses (its rule matches nothing, as in the seed) and is tried again soon.
    pub async fn resolve_all<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> BTreeMap<String, Vec<Ipv4Addr>> {
        let mut result = BTreeMap::new();
        for name in names {
            if result.contains_key(name) {
                continue;
            }
            let answer = self.query(name).await;
            result.insert(name.to_string(), answer.ips.clone());
            self.lock().insert(name.to_string(), answer);
        }
        result
    }

    async fn query(&self, name: &str) -> Answer {
        let now = Instant::now();
        let retry = Answer {
            ips: Vec::new(),
            refresh_at: now + self.config.min_refresh,
        };
        let Ok(resolver) = &self.resolver else {
            return retry;
        };
        match resolver.ipv4_lookup(name).await {
            Ok(lookup) => {
                let mut ips: Vec<Ipv4Addr> = lookup.iter().map(|a| a.0).collect();
                ips.sort();
                ips.dedup();
                let ttl = lookup
                    .valid_until()
                    .saturating_duration_since(std::time::Instant::now());
                let ttl = ttl.clamp(self.config.min_refresh, self.config.max_refresh);
                Answer {
                    ips,
                    refresh_at: now + ttl,
                }
            }
            Err(e) => {
                tracing::warn!(name, error = %e, "egress policy DNS name did not resolve");
                retry
            }
        }
    }

    /// Takes answers from before a restart as they were, due to be resolved again at once.
    pub fn remember(&self, name: &str, ips: &[Ipv4Addr]) {
        let answer = Answer {
            ips: ips.to_vec(),
            refresh_at: Instant::now(),
        };
        self.lock().insert(name.to_string(), answer);
    }

    /// Forgets the answers of names no policy uses any more.
    pub fn retain(&self, names: &HashSet<String>) {
        self.lock().retain(|name, _| names.contains(name));
    }

    /// When the earliest answer is due to be resolved again.
    pub fn next_refresh(&self) -> Option<Instant> {
        self.lock().values().map(|a| a.refresh_at).min()
    }

    /// Resolves every due name again; returns the names whose addresses changed, with the new
    /// addresses.
    pub async fn refresh_due(&self) -> BTreeMap<String, Vec<Ipv4Addr>> {
        let now = Instant::now();
        let due: Vec<(String, Vec<Ipv4Addr>)> = self
            .lock()
            .iter()
            .filter(|(_, a)| a.refresh_at <= now)
            .map(|(name, a)| (name.clone(), a.ips.clone()))
            .collect();
        let mut changed = BTreeMap::new();
        for (name, old) in due {
            let answer = self.query(&name).await;
            if answer.ips != old {
                tracing::info!(name, old = ?old, new = ?answer.ips, "egress DNS answer changed");
                changed.insert(name.clone(), answer.ips.clone());
            }
            let mut answers = self.lock();
            // A name dropped by `retain` while it was being resolved stays dropped.
            if let Some(slot) = answers.get_mut(&name) {
                *slot = answer;
            }
        }
        changed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Answer>> {
        // The map holds plain data; a panic elsewhere cannot leave it inconsistent.
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }
}
