//! The JSON of the CNI specification 1.0.0 that this plugin reads and writes: its network
//! configuration, the result of ADD (also what an IPAM plugin answers, and the `prevResult` of
//! CHECK and DEL), the error object and the VERSION answer.
//!
//! Unknown keys are ignored, as the specification asks: runtimes add their own (`capabilities`,
//! `runtimeConfig` entries for other plugins, `args`).

use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};

/// The versions of the specification this plugin implements.
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

/// The plugin's own network configuration (`"type": "ofnode"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    pub cni_version: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The daemon's control socket.
    #[serde(default = "default_api")]
    pub api: String,
    /// MTU of both veth ends.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// The VNID of every pod of this network unless `CNI_ARGS` carries `OFNODE_VNID`.
    #[serde(default)]
    pub vnid: u32,
    /// Turns transmit checksum offload off on the pod's interface (for OVS's userspace
    /// datapath, where TCP needs real checksums). Off by default.
    #[serde(default)]
    pub disable_tx_checksum: bool,
    pub ipam: Option<IpamConf>,
    #[serde(default)]
    pub runtime_config: RuntimeConfig,
    pub prev_result: Option<CniResult>,
}

fn default_api() -> String {
    "/run/ofnode/ofnode.sock".to_string()
}

fn default_mtu() -> u32 {
    1450
}

/// The `ipam` section: only its `type` matters here, the rest is the IPAM plugin's.
#[derive(Debug, Clone, Deserialize)]
pub struct IpamConf {
    #[serde(rename = "type")]
    pub kind: String,
}

/// What the runtime passes for the capabilities this plugin declares.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RuntimeConfig {
    pub bandwidth: Option<Bandwidth>,
}

/// The `bandwidth` capability (rates in bits per second; bursts are not supported by the
/// daemon's QoS and are ignored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bandwidth {
    pub ingress_rate: Option<u64>,
    pub egress_rate: Option<u64>,
}

/// The result of ADD, an IPAM plugin's answer, and the `prevResult` of CHECK and DEL.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CniResult {
    pub cni_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// Passed through from the IPAM plugin unchanged.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub dns: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The namespace path for an interface inside the container; absent for the host end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    pub address: IpNet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Index into `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub dst: IpNet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
}

impl CniResult {
    /// The first IPv4 address and its gateway (the daemon's pods are IPv4).
    pub fn ipv4(&self) -> Option<(Ipv4Net, Option<Ipv4Addr>)> {
        self.ips
            .iter()
            .find_map(|ip| match (ip.address, ip.gateway) {
                (IpNet::V4(net), Some(IpAddr::V4(gw))) => Some((net, Some(gw))),
                (IpNet::V4(net), _) => Some((net, None)),
                _ => None,
            })
    }
}

/// The specification's error object, printed on stdout with a non-zero exit status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorObject {
    #[serde(default)]
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

/// The answer to VERSION.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    pub cni_version: String,
    pub supported_versions: Vec<String>,
}

impl VersionInfo {
    pub fn this_plugin() -> VersionInfo {
        VersionInfo {
            cni_version: SUPPORTED_VERSIONS[SUPPORTED_VERSIONS.len() - 1].to_string(),
            supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_local_result_parses_and_gives_its_ipv4() {
        // What host-local 1.1.1 prints for a /23 range with a gateway.
        let text = r#"{"cniVersion":"1.0.0","ips":[{"address":"10.128.0.2/23","gateway":"10.128.0.1"}],"dns":{}}"#;
        let result: CniResult = serde_json::from_str(text).unwrap();
        assert_eq!(
            result.ipv4(),
            Some((
                "10.128.0.2/23".parse().unwrap(),
                Some(Ipv4Addr::new(10, 128, 0, 1))
            ))
        );
    }

    #[test]
    fn config_defaults_and_runtime_bandwidth() {
        let text = r#"{"cniVersion":"1.0.0","name":"n","type":"ofnode","capabilities":{"bandwidth":true},
            "runtimeConfig":{"bandwidth":{"ingressRate":1000000,"egressRate":2000000,"ingressBurst":5}},
            "ipam":{"type":"host-local","ranges":[]}}"#;
        let conf: NetConf = serde_json::from_str(text).unwrap();
        assert_eq!(conf.api, "/run/ofnode/ofnode.sock");
        assert_eq!(conf.mtu, 1450);
        assert!(!conf.disable_tx_checksum);
        assert_eq!(conf.ipam.unwrap().kind, "host-local");
        assert_eq!(
            conf.runtime_config.bandwidth,
            Some(Bandwidth {
                ingress_rate: Some(1_000_000),
                egress_rate: Some(2_000_000)
            })
        );
    }

    #[test]
    fn error_object_has_the_spec_field_names() {
        let error = ErrorObject {
            cni_version: "1.0.0".into(),
            code: 7,
            msg: "bad".into(),
            details: String::new(),
        };
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"cniVersion":"1.0.0","code":7,"msg":"bad"}"#
        );
    }
}
