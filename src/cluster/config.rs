//! The `[cluster]` config section: where etcd is and what this node leases from it.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::error::ClusterError;
use crate::sdn::Mode;
use crate::value::{Cidr, MacAddr};

/// `[cluster]`: this node takes its pod subnet from a lease in etcd and routes every other
/// node's leased subnet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSettings {
    /// etcd client URLs, `http://IP:2379` or `https://…` (with `[cluster.tls]`).
    pub endpoints: Vec<String>,
    /// Client TLS files; without them the connection is plain.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Every key ofnode writes lives under it: `<prefix>/subnets/<a.b.c.d>-<len>`.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// The cluster network the subnets are cut from (e.g. 10.128.0.0/14).
    pub network: Cidr,
    /// Each node's subnet prefix length (e.g. 23).
    pub subnet_prefix_len: u8,
    /// The service network the node is set up with.
    pub service_network: Cidr,
    #[serde(default)]
    pub mode: Mode,
    /// This node's underlay (VXLAN endpoint) address, published with its lease.
    pub public_ip: Ipv4Addr,
    /// The name a restarted node finds its own lease by; default: the public IP.
    #[serde(default)]
    pub node_name: Option<String>,
    /// The VTEP MAC published with the lease; default: the `[vxlan]` device's MAC, if any.
    #[serde(default)]
    pub vtep_mac: Option<MacAddr>,
    /// Seconds the lease outlives this node's last keep-alive.
    #[serde(default = "default_ttl")]
    pub lease_ttl: u64,
}

/// PEM files for a TLS connection to etcd.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The CA that signed etcd's server certificate.
    pub ca: PathBuf,
    /// A client certificate and key, when etcd asks for one.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    #[serde(default)]
    pub key: Option<PathBuf>,
}

fn default_prefix() -> String {
    "/ofnode".into()
}

fn default_ttl() -> u64 {
    10
}

const MAX_TTL: u64 = 3600;

impl ClusterSettings {
    /// Refuses settings that cannot work, naming the key.
    pub fn validate(&self) -> Result<(), ClusterError> {
        let bad = |reason: String| Err(ClusterError::Config(reason));
        if self.endpoints.is_empty() {
            return bad("cluster.endpoints is empty: name at least one etcd URL".into());
        }
        if let Some(e) = self
            .endpoints
            .iter()
            .find(|e| !(e.starts_with("http://") || e.starts_with("https://")))
        {
            return bad(format!(
                "cluster.endpoints: {e:?} is not an http:// or https:// URL"
            ));
        }
        if !self.prefix.starts_with('/') || self.prefix.ends_with('/') {
            return bad(format!(
                "cluster.prefix {:?} must start with '/' and not end with one",
                self.prefix
            ));
        }
        let len = self.subnet_prefix_len;
        if len < self.network.prefix() || len > 30 {
            return bad(format!(
                "cluster.subnet_prefix_len {len} must be between the network's {} and 30",
                self.network.prefix()
            ));
        }
        if self.service_network.overlaps(&self.network) {
            return bad(format!(
                "cluster.service_network {} overlaps cluster.network {}",
                self.service_network, self.network
            ));
        }
        if self.public_ip.is_unspecified() {
            return bad("cluster.public_ip is 0.0.0.0".into());
        }
        if !(2..=MAX_TTL).contains(&self.lease_ttl) {
            return bad(format!(
                "cluster.lease_ttl {} is outside 2..={MAX_TTL} seconds",
                self.lease_ttl
            ));
        }
        if let Some(tls) = &self.tls {
            if tls.cert.is_some() != tls.key.is_some() {
                return bad("cluster.tls: cert and key go together".into());
            }
        }
        Ok(())
    }

    pub fn node_name(&self) -> String {
        self.node_name
            .clone()
            .unwrap_or_else(|| self.public_ip.to_string())
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl)
    }

    /// Reads the TLS files into the client's options.
    pub fn connect_options(&self) -> Result<etcd_client::ConnectOptions, ClusterError> {
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        if let Some(tls) = &self.tls {
            let read = |path: &PathBuf| {
                std::fs::read(path).map_err(|source| ClusterError::TlsFile {
                    path: path.clone(),
                    source,
                })
            };
            let mut config = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)?));
            if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
                config = config.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
            }
            options = options.with_tls(config);
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &str) -> Result<ClusterSettings, String> {
        let text = format!(
            "endpoints = [\"http://192.0.2.1:2379\"]\nnetwork = \"10.128.0.0/14\"\n\
             subnet_prefix_len = 23\nservice_network = \"172.30.0.0/16\"\n\
             public_ip = \"192.0.2.11\"\n{extra}"
        );
        let s: ClusterSettings = toml::from_str(&text).map_err(|e| e.to_string())?;
        s.validate().map_err(|e| e.to_string())?;
        Ok(s)
    }

    #[test]
    fn defaults_fill_in_and_bad_values_are_named() {
        let s = settings("").unwrap();
        assert_eq!(s.prefix, "/ofnode");
        assert_eq!(s.lease_ttl, 10);
        assert_eq!(s.node_name(), "192.0.2.11");
        let err = settings("lease_ttl = 1").unwrap_err();
        assert!(err.contains("cluster.lease_ttl 1"), "{err}");
        let err = settings("prefix = \"ofnode/\"").unwrap_err();
        assert!(err.contains("cluster.prefix"), "{err}");
        let err = settings("typo = 1").unwrap_err();
        assert!(err.contains("unknown field"), "{err}");
        let err = settings("[tls]\nca = \"/x\"\ncert = \"/y\"").unwrap_err();
        assert!(err.contains("cert and key"), "{err}");
    }

    #[test]
    fn subnet_length_must_fit_the_network() {
        let mut s = settings("").unwrap();
        s.subnet_prefix_len = 12;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("between the network's 14 and 30"), "{err}");
        s.subnet_prefix_len = 23;
        s.service_network = "10.129.0.0/16".parse().unwrap();
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("overlaps"), "{err}");
    }
}
