//! ADD, DEL and CHECK: the pod's veth and addresses over rtnetlink, its port and flows through
//! the daemon, its address through the delegated IPAM plugin.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use hyper::StatusCode;
use ipnet::{IpNet, Ipv4Net};

use super::env::CniEnv;
use super::error::CniError;
use super::ipam::Ipam;
use super::spec::{Bandwidth, CniResult, Interface, IpConfig, NetConf, Route};
use crate::api::client::{Client, ClientError};
use crate::api::wire::{self, PodAdd, PodStatus};
use crate::netlink::{self, Handle, VethPair};
use crate::value::{IfName, MacAddr, PodKey, SandboxId, Vnid};

/// One call's inputs: the environment, the parsed configuration and its raw bytes (what the
/// IPAM plugin gets on stdin).
pub struct Call<'a> {
    pub env: &'a CniEnv,
    pub conf: &'a NetConf,
    pub raw: &'a [u8],
}

/// The host end of the pod's veth: `veth` + the first 11 hex digits of the container id, so
/// DEL finds it from the id alone.
pub fn host_veth_name(container: &SandboxId) -> Result<IfName, CniError> {
    let id = container.to_string();
    let prefix = id.get(..11).unwrap_or(&id);
    format!("veth{prefix}")
        .parse()
        .map_err(|e| CniError::Config(format!("host veth name: {e}")))
}

/// The pod's MAC: 0a:58 and the IPv4 address (as OpenShift SDN derived it), so the same IP
/// always gets the same MAC and ARP caches stay right across pod restarts.
pub fn pod_mac(ip: Ipv4Addr) -> MacAddr {
    let [a, b, c, d] = ip.octets();
    MacAddr([0x0a, 0x58, a, b, c, d])
}

/// What ADD has done so far, undone in reverse order when a later step fails.
enum Done {
    Ipam(Ipam),
    Veth(IfName),
    Pod { veth: IfName },
}

impl Call<'_> {
    fn client(&self) -> Client {
        Client::new(&self.conf.api)
    }

    fn ipam(&self) -> Result<Ipam, CniError> {
        let kind = self
            .conf
            .ipam
            .as_ref()
            .map(|ipam| ipam.kind.as_str())
            .ok_or_else(|| CniError::Config("no `ipam` section".into()))?;
        Ipam::find(kind, &self.env.path)
    }

    /// The pod's namespace, which ADD and CHECK need to exist.
    fn netns(&self) -> Result<&Path, CniError> {
        let path = self.env.netns.as_deref().ok_or_else(|| CniError::Env {
            name: "CNI_NETNS",
            reason: "not set".into(),
        })?;
        std::fs::metadata(path).map_err(|source| CniError::Netns {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(path)
    }

    /// ADD. On failure everything done so far is undone; the second value lists what the undo
    /// itself could not remove.
    pub async fn add(&self) -> Result<CniResult, (CniError, Vec<String>)> {
        let mut done = Vec::new();
        match self.add_steps(&mut done).await {
            Ok(result) => Ok(result),
            Err(err) => Err((err, self.undo(done).await)),
        }
    }

    async fn add_steps(&self, done: &mut Vec<Done>) -> Result<CniResult, CniError> {
        // Everything that can be refused without touching anything comes first.
        let pod = self.env.pod()?;
        let vnid = self.env.vnid(self.conf.vnid)?;
        let netns = self.netns()?;
        let ipam = self.ipam()?;
        let host = Handle::new()?;
        let pod_ns = Handle::in_netns(netns)?;
        let veth = host_veth_name(&self.env.container_id)?;
        // A repeated ADD must fail before IPAM: undoing it would release (host-local releases
        // by container id) the address the first ADD gave the pod.
        if host.link_by_name(veth.as_str()).await?.is_some() {
            return Err(CniError::AlreadyAdded {
                veth: veth.to_string(),
            });
        }

        done.push(Done::Ipam(ipam.clone()));
        let allocated = ipam.add(self.raw).await?;
        let (address, gateway) = allocated
            .ipv4()
            .ok_or_else(|| CniError::Config(format!("IPAM gave no IPv4 address: {allocated:?}")))?;
        let gateway = gateway
            .ok_or_else(|| CniError::Config(format!("IPAM gave {address} without a gateway")))?;
        let mac = pod_mac(address.addr());

        host.create_veth(&VethPair {
            host: veth.as_str(),
            peer: self.env.ifname.as_str(),
            peer_netns: netns,
            mtu: self.conf.mtu,
            peer_mac: Some(mac),
        })
        .await?;
        done.push(Done::Veth(veth.clone()));
        let routes = pod_routes(&allocated, gateway);
        self.configure_pod_interface(&pod_ns, netns, address, &routes)
            .await?;

        done.push(Done::Pod { veth: veth.clone() });
        self.attach(&pod, &veth, address.addr(), mac, vnid).await?;
        Ok(self.result(&veth, mac, address, gateway, routes, allocated.dns))
    }

    async fn configure_pod_interface(
        &self,
        pod_ns: &Handle,
        netns: &Path,
        address: Ipv4Net,
        routes: &[(Ipv4Net, Option<Ipv4Addr>)],
    ) -> Result<(), CniError> {
        let ifname = self.env.ifname.as_str();
        let index = pod_ns.link_index(ifname).await?;
        pod_ns.replace_ipv4_addrs(index, address).await?;
        pod_ns.set_link_up(index).await?;
        for (dst, gw) in routes {
            let route = match gw {
                Some(gw) => netlink::Route::via(*dst, *gw, index),
                None => netlink::Route::link_scope(*dst, index),
            };
            pod_ns.add_route(&route).await?;
        }
        if self.conf.disable_tx_checksum {
            netlink::disable_tx_checksum(Some(netns), ifname)?;
        }
        Ok(())
    }

    /// The daemon's part: port and flows, then the bandwidth the runtime asked for.
    async fn attach(
        &self,
        pod: &PodKey,
        veth: &IfName,
        ip: Ipv4Addr,
        mac: MacAddr,
        vnid: Vnid,
    ) -> Result<(), CniError> {
        let client = self.client();
        let request = PodAdd {
            pod: pod.clone(),
            veth: veth.clone(),
            ip,
            mac,
            sandbox: self.env.container_id,
            vnid,
            labels: Default::default(),
        };
        client.pod_add(&request).await?;
        if let Some(Bandwidth {
            ingress_rate,
            egress_rate,
        }) = self.conf.runtime_config.bandwidth
        {
            let request = wire::PodBandwidth {
                pod: pod.clone(),
                ingress_bps: ingress_rate,
                egress_bps: egress_rate,
            };
            client.pod_bandwidth(&request).await?;
        }
        Ok(())
    }

    fn result(
        &self,
        veth: &IfName,
        mac: MacAddr,
        address: Ipv4Net,
        gateway: Ipv4Addr,
        routes: Vec<(Ipv4Net, Option<Ipv4Addr>)>,
        dns: serde_json::Value,
    ) -> CniResult {
        let netns = self.env.netns.as_ref().map(|p| p.display().to_string());
        CniResult {
            cni_version: self.conf.cni_version.clone(),
            interfaces: vec![
                Interface {
                    name: veth.to_string(),
                    mac: String::new(),
                    mtu: Some(self.conf.mtu),
                    sandbox: None,
                },
                Interface {
                    name: self.env.ifname.to_string(),
                    mac: mac.to_string(),
                    mtu: Some(self.conf.mtu),
                    sandbox: netns,
                },
            ],
            ips: vec![IpConfig {
                address: IpNet::V4(address),
                gateway: Some(IpAddr::V4(gateway)),
                interface: Some(1),
            }],
            routes: routes
                .into_iter()
                .map(|(dst, gw)| Route {
                    dst: IpNet::V4(dst),
                    gw: gw.map(IpAddr::V4),
                })
                .collect(),
            dns,
        }
    }

    /// Undoes ADD's steps in reverse; returns what could not be undone.
    async fn undo(&self, done: Vec<Done>) -> Vec<String> {
        let mut failures = Vec::new();
        for step in done.into_iter().rev() {
            let outcome = match step {
                Done::Pod { veth } => self.detach(&veth).await,
                Done::Veth(name) => delete_link_named(&name).await,
                Done::Ipam(ipam) => ipam.del(self.raw).await,
            };
            if let Err(err) = outcome {
                failures.push(err.to_string());
            }
        }
        failures
    }

    async fn detach(&self, veth: &IfName) -> Result<(), CniError> {
        let request = wire::PodDel {
            pod: self.env.pod()?,
            veth: Some(veth.clone()),
        };
        self.client().pod_del(&request).await?;
        Ok(())
    }

    /// The daemon's record of this container's pod; None when it has none.
    async fn pod_status(&self) -> Result<Option<PodStatus>, CniError> {
        match self.client().pod_status(&self.env.pod()?).await {
            Ok(status) => Ok(Some(status)),
            Err(ClientError::Api { status, .. }) if status == StatusCode::NOT_FOUND => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// DEL: every step runs even when the one before failed or found nothing; the first
    /// failure is returned. A pod, veth or namespace already gone is success.
    pub async fn del(&self) -> Result<(), CniError> {
        let veth = host_veth_name(&self.env.container_id)?;
        let mut first_error = self.detach(&veth).await.err();
        if let Err(err) = delete_link_named(&veth).await {
            first_error.get_or_insert(err);
        }
        let released = match self.ipam() {
            Ok(ipam) => ipam.del(self.raw).await,
            Err(err) => Err(err),
        };
        if let Err(err) = released {
            first_error.get_or_insert(err);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// CHECK: the interface, its address and the pod's port and flows are as ADD left them
    /// (per `prevResult`), and the IPAM plugin still holds the allocation.
    pub async fn check(&self) -> Result<(), CniError> {
        let prev = self
            .conf
            .prev_result
            .as_ref()
            .ok_or_else(|| CniError::Config("CHECK needs prevResult".into()))?;
        let (address, _) = prev
            .ipv4()
            .ok_or_else(|| CniError::Config("prevResult has no IPv4 address".into()))?;
        let netns = self.netns()?;
        let ensure = |ok: bool, what: String| {
            if ok {
                Ok(())
            } else {
                Err(CniError::Check(what))
            }
        };

        let pod_ns = Handle::in_netns(netns)?;
        let ifname = self.env.ifname.as_str();
        let link = pod_ns.link_by_name(ifname).await?;
        let link =
            link.ok_or_else(|| CniError::Check(format!("no {ifname} in {}", netns.display())))?;
        ensure(link.up, format!("{ifname} is down"))?;
        let addrs = pod_ns.ipv4_addrs(link.index).await?;
        ensure(
            addrs.contains(&address),
            format!("{ifname} has {addrs:?}, not {address}"),
        )?;
        let veth = host_veth_name(&self.env.container_id)?;
        let host_link = Handle::new()?.link_by_name(veth.as_str()).await?;
        ensure(host_link.is_some(), format!("host veth {veth} is gone"))?;

        let status = self
            .pod_status()
            .await?
            .ok_or_else(|| CniError::Check("the daemon has no pod for this container".into()))?;
        ensure(
            status.pod.ip == address.addr(),
            format!(
                "the daemon has the pod at {}, not {}",
                status.pod.ip,
                address.addr()
            ),
        )?;
        ensure(status.port, format!("{veth} is not a port of the bridge"))?;
        ensure(
            status.missing_flows.is_empty(),
            format!(
                "the switch lacks the pod's flows: {:?}",
                status.missing_flows
            ),
        )?;
        self.ipam()?.check(self.raw).await
    }
}

/// The default route via the gateway, then the IPAM plugin's IPv4 routes. A route without a
/// `gw` is on-link (`scope link`), as openshift-sdn's pods had the cluster network: a pod ARPs
/// for every pod address itself, and br0 answers or carries the ARP (tables 40 and 50 of the
/// seed) — through a gateway, a packet to another node's pod would arrive there addressed to
/// this node's tun0 MAC, which that pod drops.
fn pod_routes(allocated: &CniResult, gateway: Ipv4Addr) -> Vec<(Ipv4Net, Option<Ipv4Addr>)> {
    let mut routes = vec![(Ipv4Net::default(), Some(gateway))];
    for route in &allocated.routes {
        let IpNet::V4(dst) = route.dst else { continue };
        let gw = match route.gw {
            Some(IpAddr::V4(gw)) => Some(gw),
            Some(IpAddr::V6(_)) => continue,
            None if dst == Ipv4Net::default() => Some(gateway),
            None => None,
        };
        if !routes.contains(&(dst, gw)) {
            routes.push((dst, gw));
        }
    }
    routes
}

/// Deletes the host end (and with it the pod end) if it still exists.
async fn delete_link_named(name: &IfName) -> Result<(), CniError> {
    let host = Handle::new()?;
    if let Some(link) = host.link_by_name(name.as_str()).await? {
        match host.delete_link(link.index).await {
            // Gone in between (its namespace was deleted): what DEL wanted.
            Err(err) if err.is_errno(nix::errno::Errno::ENODEV) => {}
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_macs_come_from_the_container_and_the_address() {
        let id: SandboxId = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            .parse()
            .unwrap();
        assert_eq!(host_veth_name(&id).unwrap().as_str(), "veth0123456789a");
        assert_eq!(
            pod_mac(Ipv4Addr::new(10, 128, 0, 5)).to_string(),
            "0a:58:0a:80:00:05"
        );
    }

    #[test]
    fn routes_start_with_the_default_route_and_take_ipam_routes() {
        let allocated: CniResult = serde_json::from_str(
            r#"{"cniVersion":"1.0.0","routes":[{"dst":"10.128.0.0/14"},{"dst":"0.0.0.0/0"},
                {"dst":"172.30.0.0/16","gw":"10.128.0.3"},{"dst":"fd00::/8"}]}"#,
        )
        .unwrap();
        let gw = Ipv4Addr::new(10, 128, 0, 1);
        assert_eq!(
            pod_routes(&allocated, gw),
            vec![
                (Ipv4Net::default(), Some(gw)),
                ("10.128.0.0/14".parse().unwrap(), None),
                (
                    "172.30.0.0/16".parse().unwrap(),
                    Some(Ipv4Addr::new(10, 128, 0, 3))
                ),
            ]
        );
    }
}
