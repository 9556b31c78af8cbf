//! TEMPORARY compile stub of the Node API contract (replaced by the sdn branch at merge).
#![allow(dead_code, unused_variables)]
use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::types::*;

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub bridge: String,
    pub ovsdb: String,
    pub openflow: String,
    pub state_dir: PathBuf,
    pub datapath_type: Option<String>,
    pub mtu: u32,
    pub manage_host_network: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Subnet,
    Multitenant,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetupRequest {
    pub cluster_network: Cidr,
    pub service_network: Cidr,
    pub local_subnet: Cidr,
    pub gateway: Ipv4Addr,
    pub mode: Mode,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub enum SetupOutcome {
    AlreadySetUp,
    Built,
    Rebuilt,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodAdd {
    pub veth: IfName,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub sandbox: SandboxId,
    pub vnid: Vnid,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostSubnet {
    pub host_ip: Ipv4Addr,
    pub subnet: Cidr,
    pub fixed_vnid: Option<Vnid>,
    pub vtep_mac: Option<MacAddr>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Service {
    pub ip: Ipv4Addr,
    pub vnid: Vnid,
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Status {
    pub switch_connected: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("not set up")]
    NotSetUp,
}

impl Error {
    pub fn http_status(&self) -> u16 {
        match self {
            Error::Invalid(_) => 400,
            Error::NotSetUp => 409,
        }
    }
}

#[derive(Clone)]
pub struct Node;

impl Node {
    pub async fn start(cfg: NodeConfig) -> Result<Node, Error> {
        Ok(Node)
    }
    pub async fn setup(&self, req: &SetupRequest) -> Result<SetupOutcome, Error> {
        Err(Error::NotSetUp)
    }
    pub async fn already_set_up(&self) -> Result<bool, Error> {
        Ok(false)
    }
    pub async fn pod_add(&self, req: &PodAdd) -> Result<u16, Error> {
        Err(Error::NotSetUp)
    }
    pub async fn pod_update(&self, sandbox: &SandboxId, vnid: Vnid) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn pod_del(&self, veth: &IfName, ip: Ipv4Addr) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn pod_bandwidth(
        &self,
        veth: &IfName,
        ingress_bps: Option<u64>,
        egress_bps: Option<u64>,
    ) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn hostsubnet_add(&self, hs: &HostSubnet) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn hostsubnet_del(&self, host_ip: Ipv4Addr, subnet: Cidr) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn service_add(&self, svc: &Service) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn service_del(&self, ip: Ipv4Addr) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn multicast_local(
        &self,
        vnid: Vnid,
        enabled: bool,
        ofports: &[u16],
    ) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn multicast_vxlan(&self, remotes: &[Ipv4Addr]) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn egress_set(
        &self,
        vnid: Vnid,
        namespaces: &[String],
        policies: &[EgressNetworkPolicy],
    ) -> Result<(), Error> {
        Err(Error::NotSetUp)
    }
    pub async fn unused_vnids(&self) -> Result<Vec<Vnid>, Error> {
        Ok(vec![])
    }
    pub async fn dump_flows(&self, table: Option<u8>) -> Result<Vec<String>, Error> {
        Ok(vec![])
    }
    pub fn status(&self) -> Status {
        Status::default()
    }
}
impl Node {
    pub fn metrics_text(&self) -> String {
        String::new()
    }
}
