//! The node's validated inputs: everything a user, the CLI or the API hands the node controller.
//!
//! Each type checks its value once, when it is made (parsing text or deserialising JSON), so that
//! the operations never see an invalid sandbox id, VNID, CIDR, MAC, port or interface name — bad
//! input is refused before anything is sent to the switch or OVSDB.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why an input was refused; the message names the value and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct InvalidInput {
    pub what: &'static str,
    pub value: String,
    pub reason: String,
}

impl InvalidInput {
    pub fn new(what: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidInput {
            what,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// Implements `FromStr`, `Display`, and string (de)serialisation through them.
macro_rules! text_type {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A pod sandbox (container) id: 64 hex digits, i.e. 32 bytes, as the seed's getPodNote demands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SandboxId([u8; 32]);

impl SandboxId {
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The seed's getPodNote: the bytes as dot-separated hex pairs (ovs-ofctl's `note:` text).
    pub fn note(&self) -> String {
        let hex: Vec<String> = self.0.iter().map(|b| format!("{b:02x}")).collect();
        hex.join(".")
    }
}

impl FromStr for SandboxId {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let invalid = |reason: &str| InvalidInput::new("sandbox id", text, reason);
        if text.len() != 64 {
            return Err(invalid(&format!(
                "expected 64 hex digits (32 bytes), got {} characters",
                text.len()
            )));
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            let pair = text
                .get(2 * i..2 * i + 2)
                .ok_or_else(|| invalid("not ASCII hex"))?;
            *byte = u8::from_str_radix(pair, 16)
                .map_err(|_| invalid(&format!("{pair:?} at offset {} is not hex", 2 * i)))?;
        }
        Ok(SandboxId(bytes))
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}
text_type!(SandboxId);

/// A virtual network id: 24 bits, the width of a VXLAN VNI. VNID 0 is the global (admin) network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Vnid(u32);

impl Vnid {
    pub const GLOBAL: Vnid = Vnid(0);
    pub const MAX: u32 = 0x00ff_ffff;

    pub fn new(value: u32) -> Result<Vnid, InvalidInput> {
        if value > Self::MAX {
            return Err(InvalidInput::new(
                "VNID",
                value.to_string(),
                "must fit in 24 bits (0..=16777215)",
            ));
        }
        Ok(Vnid(value))
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl FromStr for Vnid {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let value = parse_u32(text)
            .ok_or_else(|| InvalidInput::new("VNID", text, "not a number (decimal or 0x hex)"))?;
        Vnid::new(value)
    }
}

impl fmt::Display for Vnid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Vnid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for Vnid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vnid::new(u32::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

fn parse_u32(text: &str) -> Option<u32> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// An IPv4 network in CIDR form; host bits must be zero (a typo'd network is refused, not
/// silently widened).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    addr: Ipv4Addr,
    prefix: u8,
}

impl Cidr {
    /// 0.0.0.0/0: every address.
    pub const ANY: Cidr = Cidr {
        addr: Ipv4Addr::UNSPECIFIED,
        prefix: 0,
    };

    /// The /32 network of one address.
    pub fn host(addr: Ipv4Addr) -> Cidr {
        Cidr { addr, prefix: 32 }
    }

    pub fn new(addr: Ipv4Addr, prefix: u8) -> Result<Cidr, InvalidInput> {
        let text = format!("{addr}/{prefix}");
        if prefix > 32 {
            return Err(InvalidInput::new("CIDR", text, "prefix length above 32"));
        }
        let cidr = Cidr { addr, prefix };
        if cidr.network() != addr {
            return Err(InvalidInput::new(
                "CIDR",
                text,
                format!("host bits set (the network is {}/{prefix})", cidr.network()),
            ));
        }
        Ok(cidr)
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn mask(&self) -> Ipv4Addr {
        Ipv4Addr::from(prefix_mask(self.prefix))
    }

    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & prefix_mask(self.prefix))
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & prefix_mask(self.prefix) == u32::from(self.network())
    }

    /// True when the two networks share any address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.network()) || other.contains(self.network())
    }
}

fn prefix_mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

impl FromStr for Cidr {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| InvalidInput::new("CIDR", text, "expected ADDRESS/PREFIX"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| InvalidInput::new("CIDR", text, "address is not IPv4 dotted quad"))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| InvalidInput::new("CIDR", text, "prefix length is not a number"))?;
        Cidr::new(addr, prefix)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}
text_type!(Cidr);

/// An IPv4 address given by a user; parsing refuses IPv6 and names with a clear message.
pub fn parse_ipv4(what: &'static str, text: &str) -> Result<Ipv4Addr, InvalidInput> {
    text.parse().map_err(|_| {
        let reason = if text.contains(':') {
            "IPv6 is not supported here; an IPv4 address is required"
        } else {
            "not an IPv4 dotted quad"
        };
        InvalidInput::new(what, text, reason)
    })
}

/// An Ethernet MAC address, printed lower-case with colons as ovs-ofctl does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl FromStr for MacAddr {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let invalid = || {
            InvalidInput::new(
                "MAC address",
                text,
                "expected six hex octets like 0a:58:0a:80:00:05",
            )
        };
        let mut mac = [0u8; 6];
        let mut parts = text.split(':');
        for byte in mac.iter_mut() {
            let part = parts.next().ok_or_else(invalid)?;
            if part.is_empty() || part.len() > 2 {
                return Err(invalid());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| invalid())?;
        }
        if parts.next().is_some() {
            return Err(invalid());
        }
        Ok(MacAddr(mac))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}
text_type!(MacAddr);

/// A Linux interface name: 1 to 15 bytes, no '/', whitespace or ':' (IFNAMSIZ and dev_valid_name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfName(String);

impl IfName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for IfName {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let invalid = |reason: &str| InvalidInput::new("interface name", text, reason);
        if text.is_empty() || text.len() > 15 {
            return Err(invalid("must be 1 to 15 bytes long"));
        }
        if text == "." || text == ".." {
            return Err(invalid("reserved name"));
        }
        if text
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(invalid(
                "must not contain '/', ':', whitespace or control characters",
            ));
        }
        Ok(IfName(text.to_string()))
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
text_type!(IfName);

/// A transport protocol a service port can use. The seed refuses anything but TCP and UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl FromStr for Protocol {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        match text.to_ascii_lowercase().as_str() {
            "tcp" => Ok(Protocol::Tcp),
            "udp" => Ok(Protocol::Udp),
            _ => Err(InvalidInput::new(
                "protocol",
                text,
                "unhandled protocol; only TCP and UDP are supported",
            )),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        })
    }
}
text_type!(Protocol);

/// A service port, written `PROTO/PORT` (e.g. `tcp/80`), port 1–65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServicePort {
    pub protocol: Protocol,
    pub port: u16,
}

impl FromStr for ServicePort {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let (protocol, port) = text.split_once('/').ok_or_else(|| {
            InvalidInput::new("service port", text, "expected PROTO/PORT, e.g. tcp/80")
        })?;
        let protocol = protocol.parse()?;
        let port = match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(InvalidInput::new(
                    "service port",
                    text,
                    "port must be a number from 1 to 65535",
                ))
            }
        };
        Ok(ServicePort { protocol, port })
    }
}

impl fmt::Display for ServicePort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.port)
    }
}
text_type!(ServicePort);

/// One EgressNetworkPolicy, as OpenShift wrote it:
/// `{"namespace":"ns1","name":"p1","spec":{"egress":[{"type":"Allow","to":{"cidrSelector":"…"}}]}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressNetworkPolicy {
    pub namespace: String,
    pub name: String,
    pub spec: EgressNetworkPolicySpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressNetworkPolicySpec {
    pub egress: Vec<EgressRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressRule {
    #[serde(rename = "type")]
    pub rule_type: EgressRuleType,
    pub to: EgressPeer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EgressRuleType {
    Allow,
    Deny,
}

/// Exactly one of a CIDR or a DNS name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressPeer {
    #[serde(
        rename = "cidrSelector",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cidr_selector: Option<Cidr>,
    #[serde(rename = "dnsName", default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<String>,
}

impl EgressNetworkPolicy {
    /// Checks what serde cannot: each rule names exactly one peer, and DNS names are names.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let who = format!("{}:{}", self.namespace, self.name);
        for (i, rule) in self.spec.egress.iter().enumerate() {
            match (&rule.to.cidr_selector, &rule.to.dns_name) {
                (Some(_), None) => {}
                (None, Some(name)) => validate_dns_name(name).map_err(|reason| {
                    InvalidInput::new(
                        "EgressNetworkPolicy",
                        who.clone(),
                        format!("rule {i}: {reason}"),
                    )
                })?,
                _ => {
                    return Err(InvalidInput::new(
                        "EgressNetworkPolicy",
                        who,
                        format!("rule {i}: `to` must have exactly one of cidrSelector or dnsName"),
                    ))
                }
            }
        }
        Ok(())
    }
}

fn validate_dns_name(name: &str) -> Result<(), String> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.is_empty() || trimmed.len() > 253 {
        return Err(format!("dnsName {name:?} must be 1 to 253 characters"));
    }
    for label in trimmed.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !ok {
            return Err(format!("dnsName {name:?} has an invalid label {label:?}"));
        }
    }
    Ok(())
}

/// The policy mode of the node's table 80 (the seed's policy plugins); its plugin id is part of
/// the version note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Subnet,
    Multitenant,
}

impl Mode {
    /// The seed's pluginId: 0 for the subnet plugin, 1 for the multitenant plugin.
    pub fn plugin_id(self) -> u8 {
        match self {
            Mode::Subnet => 0,
            Mode::Multitenant => 1,
        }
    }
}

impl FromStr for Mode {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        match text {
            "subnet" => Ok(Mode::Subnet),
            "multitenant" => Ok(Mode::Multitenant),
            _ => Err(InvalidInput::new(
                "mode",
                text,
                "expected subnet or multitenant",
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Subnet => "subnet",
            Mode::Multitenant => "multitenant",
        })
    }
}

/// The node's network parameters (the seed's SetupOVS/SetupSDN arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupRequest {
    pub cluster_network: Cidr,
    pub service_network: Cidr,
    pub local_subnet: Cidr,
    pub gateway: Ipv4Addr,
    #[serde(default)]
    pub mode: Mode,
}

impl SetupRequest {
    /// Checks how the networks relate: the gateway is a host of the local subnet, the local
    /// subnet lies inside the cluster network, and the service network is apart from it.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let invalid = |reason: String| InvalidInput::new("setup request", self.summary(), reason);
        if !self.local_subnet.contains(self.gateway) || self.gateway == self.local_subnet.network()
        {
            return Err(invalid(format!(
                "gateway {} must be a host address inside the local subnet {}",
                self.gateway, self.local_subnet
            )));
        }
        if !self.cluster_network.contains(self.local_subnet.network())
            || self.local_subnet.prefix() < self.cluster_network.prefix()
        {
            return Err(invalid(format!(
                "local subnet {} must lie inside the cluster network {}",
                self.local_subnet, self.cluster_network
            )));
        }
        if self.service_network.overlaps(&self.cluster_network) {
            return Err(invalid(format!(
                "service network {} overlaps the cluster network {}",
                self.service_network, self.cluster_network
            )));
        }
        Ok(())
    }

    fn summary(&self) -> String {
        format!(
            "cluster {} service {} local {} gateway {} mode {}",
            self.cluster_network, self.service_network, self.local_subnet, self.gateway, self.mode
        )
    }
}

/// A pod to attach (the seed's SetUpPod arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodAdd {
    pub veth: IfName,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub sandbox: SandboxId,
    pub vnid: Vnid,
}

/// Another node's pod subnet, reached over VXLAN (the seed's HostSubnet). `fixed_vnid` is the
/// fixed-VNID annotation; `vtep_mac` is kept for the VXLAN device (not used by flows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSubnet {
    pub host_ip: Ipv4Addr,
    pub subnet: Cidr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_vnid: Option<Vnid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep_mac: Option<MacAddr>,
}

/// A service's cluster IP, its VNID and its ports (the seed's AddServiceRules arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    pub ip: Ipv4Addr,
    pub vnid: Vnid,
    pub ports: Vec<ServicePort>,
}

/// `pod update`: move the pod with this sandbox id to another VNID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodUpdate {
    pub sandbox: SandboxId,
    pub vnid: Vnid,
}

/// `pod del`: detach the pod with this veth and IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodDel {
    pub veth: IfName,
    pub ip: Ipv4Addr,
}

/// `pod bandwidth`: limits in bits per second; absent means unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodBandwidth {
    pub veth: IfName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_bps: Option<u64>,
}

/// `hostsubnet del`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSubnetDel {
    pub host_ip: Ipv4Addr,
    pub subnet: Cidr,
}

/// `service del`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceDel {
    pub ip: Ipv4Addr,
}

/// `multicast local`: enable (delivering to `ofports`) or disable a VNID's local multicast.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastLocalSet {
    pub vnid: Vnid,
    pub enabled: bool,
    #[serde(default)]
    pub ofports: Vec<u16>,
}

/// `multicast vxlan`: the nodes multicast goes to over VXLAN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastVxlanSet {
    #[serde(default)]
    pub remotes: Vec<Ipv4Addr>,
}

/// `egress set`: a VNID's namespaces and its egress policies (none removes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSet {
    pub vnid: Vnid,
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub policies: Vec<EgressNetworkPolicy>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_id_needs_64_hex_digits() {
        let good = "ab".repeat(32);
        assert_eq!(good.parse::<SandboxId>().unwrap().to_string(), good);
        assert!("ab".repeat(31).parse::<SandboxId>().is_err());
        assert!(format!("zz{}", "ab".repeat(31))
            .parse::<SandboxId>()
            .is_err());
        assert!("é".repeat(32).parse::<SandboxId>().is_err());
    }

    #[test]
    fn vnid_is_24_bits() {
        assert_eq!("0x10".parse::<Vnid>().unwrap().get(), 16);
        assert_eq!("16777215".parse::<Vnid>().unwrap().get(), Vnid::MAX);
        assert!("16777216".parse::<Vnid>().is_err());
        assert!("-1".parse::<Vnid>().is_err());
        assert!(serde_json::from_str::<Vnid>("16777216").is_err());
    }

    #[test]
    fn cidr_refuses_host_bits_and_ipv6() {
        let c: Cidr = "10.128.0.0/14".parse().unwrap();
        assert!(c.contains("10.131.255.1".parse().unwrap()));
        assert!(!c.contains("10.132.0.1".parse().unwrap()));
        assert!("10.128.0.1/14".parse::<Cidr>().is_err());
        assert!("10.128.0.0/33".parse::<Cidr>().is_err());
        assert!("fd00::/8".parse::<Cidr>().is_err());
        assert_eq!(
            "0.0.0.0/0".parse::<Cidr>().unwrap().mask(),
            Ipv4Addr::UNSPECIFIED
        );
    }

    #[test]
    fn mac_needs_six_octets() {
        let mac: MacAddr = "0A:58:0a:80:00:05".parse().unwrap();
        assert_eq!(mac.to_string(), "0a:58:0a:80:00:05");
        assert!("0a:58:0a:80:00".parse::<MacAddr>().is_err());
        assert!("0a:58:0a:80:00:05:06".parse::<MacAddr>().is_err());
        assert!("0a:58:0a:80:00:5g".parse::<MacAddr>().is_err());
    }

    #[test]
    fn ifname_limits() {
        assert!("veth1234567890a".parse::<IfName>().is_ok());
        assert!("veth1234567890ab".parse::<IfName>().is_err());
        assert!("a/b".parse::<IfName>().is_err());
        assert!("".parse::<IfName>().is_err());
    }

    #[test]
    fn service_ports() {
        let p: ServicePort = "TCP/80".parse().unwrap();
        assert_eq!(p.to_string(), "tcp/80");
        assert!("sctp/80".parse::<ServicePort>().is_err());
        assert!("tcp/0".parse::<ServicePort>().is_err());
        assert!("tcp/65536".parse::<ServicePort>().is_err());
    }

    #[test]
    fn egress_policy_json() {
        let text = r#"{"namespace":"ns1","name":"p1","spec":
            {"egress":[{"type":"Allow","to":{"cidrSelector":"192.168.0.0/16"}},
                       {"type":"Deny","to":{"dnsName":"example.com"}}]}}"#;
        let policy: EgressNetworkPolicy = serde_json::from_str(text).unwrap();
        policy.validate().unwrap();
        assert_eq!(policy.spec.egress.len(), 2);
        let both = r#"{"namespace":"a","name":"b","spec":{"egress":[{"type":"Deny","to":{}}]}}"#;
        let policy: EgressNetworkPolicy = serde_json::from_str(both).unwrap();
        assert!(policy.validate().is_err());
        let bad_type = r#"{"namespace":"a","name":"b","spec":{"egress":[{"type":"Maybe","to":{"dnsName":"x"}}]}}"#;
        assert!(serde_json::from_str::<EgressNetworkPolicy>(bad_type).is_err());
    }
}
