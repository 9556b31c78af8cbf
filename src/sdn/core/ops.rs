//! The seed's operations on the core: each checks what it needs of the state, then changes the
//! state (and so the table) as one all-or-nothing step of the open batch. What a pod operation
//! asks of OVSDB is a [`PortStep`] of the batch, carried out by the shell after the bundle and
//! the journal; what other operations do outside the desired state (DNS, the host network) is
//! the shell's, before or after them. The checks of the input that need no state are the
//! functions at the end.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use super::desired::enforcing_setup;
use super::ports::{Bandwidth, PortStep, TakeBack};
use super::CoreError as Error;
use super::{Core, Notice};
use crate::sdn::egress::{egress_flows, global_vnid_error};
use crate::sdn::flows::{local_multicast_delivery_flow, vxlan_multicast_flow};
use crate::sdn::labels::Labels;
use crate::sdn::layout::MAX_OFPORT;
use crate::sdn::objects::PodInfo;
use crate::sdn::state::{Change, EgressState, LocalMulticast, PortIntent};
use crate::sdn::table;
use crate::sdn::types::{EgressNetworkPolicy, HostSubnet, Pod, Service};
use crate::value::PodKey;
use crate::value::{Cidr, IfName, InvalidInput, Vnid};

fn invalid(what: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::Invalid(InvalidInput::new(what, value, reason))
}

impl Core {
    /// The seed's SetUpPod for pod `key`: its four flows (and its VNID's rule when it is the
    /// first user), then its port on `pod.ofport` (the port step); in the NetworkPolicy mode
    /// also what selectors see of it (`labels`, its address). A pod of the same key is
    /// replaced, as is another pod at the same address (a [`Notice`] says so). The batch's
    /// port step asks OVSDB for the veth's port on the number the flows use, and says how to
    /// take the add back should OVSDB not take the port.
    pub fn pod_attach(&mut self, key: PodKey, mut pod: Pod, labels: Labels) -> Result<(), Error> {
        self.check_local_pod(&key, &mut pod.vnid, &labels, pod.ip)?;
        let mark = self.batch.undo.len();
        let (changes, notices) = self.pod_add_changes(&key, pod.clone(), labels);
        self.apply_saying(changes, notices)?;
        let Some(veth) = pod.veth.clone() else {
            return Ok(());
        };
        let undo = self.batch.undo[mark..].iter().rev().cloned().collect();
        let added = self.state().pods.get(&key).cloned().unwrap_or(pod);
        self.batch.ports.push(PortStep::Add {
            veth,
            ofport: added.ofport,
            take_back: TakeBack {
                key,
                pod: added,
                undo,
            },
        });
        Ok(())
    }

    /// Takes back a pod add whose port OVSDB did not take (see [`TakeBack`]): its changes are
    /// undone unless the pod changed since (another operation replaced or deleted it; nothing
    /// is then left to take back). With `port_may_exist` (OVSDB's answer never came), the port
    /// becomes one OVSDB must not hold, unless a pod of the restored state uses it. Returns
    /// whether the add was taken back.
    pub fn take_back(&mut self, take_back: TakeBack, port_may_exist: bool) -> Result<bool, Error> {
        let TakeBack { key, pod, undo } = take_back;
        if self.state().pods.get(&key) != Some(&pod) {
            return Ok(false);
        }
        let mut changes = undo;
        if let Some(veth) = pod.veth.filter(|_| port_may_exist) {
            let uses = |p: &Pod| p.veth.as_ref() == Some(&veth);
            let used = self.state().pods.iter().any(|(k, p)| *k != key && uses(p))
                || changes.iter().any(
                    |c| matches!(c, Change::LocalPod { key: k, pod: Some(p) } if *k == key && uses(p)),
                );
            let intent = changes
                .iter()
                .rev()
                .find_map(|c| match c {
                    Change::PortIntent { veth: v, intent } if *v == veth => Some(*intent),
                    _ => None,
                })
                .unwrap_or_else(|| self.state().port_intents.get(&veth).copied());
            if !used && intent != Some(PortIntent::Removed) {
                changes.push(Change::PortIntent {
                    veth,
                    intent: Some(PortIntent::Removed),
                });
            }
        }
        self.apply(changes)?;
        Ok(true)
    }

    /// The changes that attach `pod` as `key` (its flows; its port's old intent goes; in the
    /// NetworkPolicy mode what selectors see of it), and what is worth saying: a pod of
    /// another key at its address is replaced.
    pub(super) fn pod_add_changes(
        &self,
        key: &PodKey,
        pod: Pod,
        labels: Labels,
    ) -> (Vec<Change>, Vec<Notice>) {
        let mut changes = Vec::new();
        let mut notices = Vec::new();
        if let Some((old_key, old)) = self.store.local_pod_at(pod.ip).filter(|(k, _)| *k != key) {
            notices.push(Notice::PodIpReused {
                ip: pod.ip,
                old: old_key.clone(),
                new: key.clone(),
            });
            changes.extend(self.pod_removal(old_key, old.veth.clone()));
        }
        // A port of this name deleted before (or limited for an older pod) starts afresh.
        if let Some(veth) = pod
            .veth
            .as_ref()
            .filter(|v| self.state().port_intents.contains_key(*v))
        {
            changes.push(Change::PortIntent {
                veth: veth.clone(),
                intent: None,
            });
        }
        let ip = pod.ip;
        changes.push(Change::LocalPod {
            key: key.clone(),
            pod: Some(pod),
        });
        if enforcing_setup(self.state()).is_some() {
            let known = self.state().pod_infos.get(key);
            let info = PodInfo {
                labels,
                ips: vec![IpAddr::V4(ip)],
                local: true,
                ports: known.map(|i| i.ports.clone()).unwrap_or_default(),
            };
            if known != Some(&info) {
                changes.push(Change::PodInfo {
                    key: key.clone(),
                    info: Some(info),
                });
            }
        }
        (changes, notices)
    }

    /// The changes that take local pod `key` away: what selectors see of it, its flows, and
    /// its port `veth` (which becomes one OVSDB must not hold).
    fn pod_removal(&self, key: &PodKey, veth: Option<IfName>) -> Vec<Change> {
        let mut changes = Vec::new();
        if self.state().pod_infos.get(key).is_some_and(|i| i.local) {
            changes.push(Change::PodInfo {
                key: key.clone(),
                info: None,
            });
        }
        if self.state().pods.contains_key(key) {
            changes.push(Change::LocalPod {
                key: key.clone(),
                pod: None,
            });
        }
        if let Some(veth) = veth {
            if self.state().port_intents.get(&veth) != Some(&PortIntent::Removed) {
                changes.push(Change::PortIntent {
                    veth,
                    intent: Some(PortIntent::Removed),
                });
            }
        }
        changes
    }

    /// The seed's UpdatePod for a pod the node knows: false when it knows none of this key
    /// (the shell then looks on the switch, see [`Core::pod_adopt`]).
    pub fn pod_update(&mut self, key: &PodKey, vnid: Vnid) -> Result<bool, Error> {
        self.require_setup()?;
        let Some(pod) = self.state().pods.get(key) else {
            return Ok(false);
        };
        let pod = Pod {
            vnid,
            ..pod.clone()
        };
        self.apply(vec![Change::LocalPod {
            key: key.clone(),
            pod: Some(pod),
        }])?;
        Ok(true)
    }

    /// Takes over a pod the node did not know, as its flows on the switch describe it (the
    /// seed's UpdatePod through getPodDetailsByContainerID), as pod `key`.
    pub fn pod_adopt(&mut self, key: PodKey, pod: Pod) -> Result<(), Error> {
        self.apply(vec![Change::LocalPod {
            key,
            pod: Some(pod),
        }])
    }

    /// The seed's TearDownPod: the pod's flows go (and its VNID's rule with its last user), and
    /// its port (with its QoS) becomes a port that must be gone from the bridge, in the same
    /// journal record: the port step removes it, and the OVSDB reconciler whenever that
    /// failed. A pod the node does not know is no error: `veth` (the pod's, when its caller
    /// knows it) is still removed.
    pub fn pod_del(&mut self, key: &PodKey, veth: Option<IfName>) -> Result<(), Error> {
        let veth = self
            .state()
            .pods
            .get(key)
            .and_then(|p| p.veth.clone())
            .or(veth);
        let changes = self.pod_removal(key, veth.clone());
        self.apply(changes)?;
        if let Some(veth) = veth {
            self.batch.ports.push(PortStep::Remove { veth });
        }
        Ok(())
    }

    /// The seed's SetPodBandwidth as desired state: the limits OVSDB must hold for `veth`'s
    /// port, and the port step that writes them (also when they are the acknowledged ones
    /// already: OVSDB is made to hold them). The port must be a pod's (or, `port_exists`, one
    /// OVSDB shows) and not one of a deleted pod. Returns the intent it replaced (the step puts
    /// it back if OVSDB refuses the limits).
    pub fn pod_bandwidth(
        &mut self,
        veth: IfName,
        bandwidth: Bandwidth,
        port_exists: bool,
    ) -> Result<Option<PortIntent>, Error> {
        let limits = PortIntent::from(bandwidth);
        let previous = self.state().port_intents.get(&veth).copied();
        let a_pods = self
            .state()
            .pods
            .values()
            .any(|p| p.veth.as_ref() == Some(&veth));
        if previous == Some(PortIntent::Removed) || !(a_pods || port_exists) {
            return Err(Error::NotFound {
                what: format!("port {veth}"),
            });
        }
        if previous != Some(limits) {
            self.apply(vec![Change::PortIntent {
                veth: veth.clone(),
                intent: Some(limits),
            }])?;
        }
        self.batch.ports.push(PortStep::Limit {
            veth,
            bandwidth,
            previous,
        });
        Ok(previous)
    }

    /// Puts back a port's intent that `pod_bandwidth` replaced, unless it changed since.
    pub fn restore_port_intent(
        &mut self,
        veth: IfName,
        set: PortIntent,
        back: Option<PortIntent>,
    ) -> Result<(), Error> {
        if self.state().port_intents.get(&veth) != Some(&set) {
            return Ok(());
        }
        self.apply(vec![Change::PortIntent { veth, intent: back }])
    }

    /// Forgets deleted pods' ports OVSDB confirmed gone (those still marked removed).
    pub fn forget_removed_ports(&mut self, gone: &[IfName]) -> Result<(), Error> {
        let changes = gone
            .iter()
            .filter(|veth| self.state().port_intents.get(*veth) == Some(&PortIntent::Removed))
            .map(|veth| Change::PortIntent {
                veth: veth.clone(),
                intent: None,
            })
            .collect();
        self.apply(changes)
    }

    /// Moves pods' flows to the OpenFlow port their interface has now: `ofport_of` is OVSDB's
    /// view of the interface (ovs-vswitchd may give a port another number than ofnode chose).
    pub fn follow_ports(&mut self, ofport_of: impl Fn(&str) -> Option<i64>) -> Result<(), Error> {
        let (changes, notices): (Vec<Change>, Vec<Notice>) = self
            .state()
            .pods
            .iter()
            .filter_map(|(key, pod)| {
                let veth = pod.veth.as_ref()?;
                let now = ofport_of(veth.as_str())
                    .and_then(|port| u16::try_from(port).ok())
                    .filter(|port| *port > 0 && *port != pod.ofport)?;
                let moved = Notice::PortMoved {
                    pod: key.clone(),
                    veth: veth.clone(),
                    from: pod.ofport,
                    to: now,
                };
                let change = Change::LocalPod {
                    key: key.clone(),
                    pod: Some(Pod {
                        ofport: now,
                        ..pod.clone()
                    }),
                };
                Some((change, moved))
            })
            .unzip();
        self.apply_saying(changes, notices)
    }

    /// The seed's AddHostSubnetRules; a subnet that is already routed is replaced.
    pub fn hostsubnet_add(&mut self, hs: HostSubnet) -> Result<(), Error> {
        self.require_setup()?;
        self.apply(vec![Change::HostSubnet {
            subnet: hs.subnet,
            host_subnet: Some(hs),
        }])
    }

    /// The seed's DeleteHostSubnetRules. Deleting what is not there succeeds; a subnet of
    /// another host is not this one's to delete.
    pub fn hostsubnet_del(&mut self, host_ip: Ipv4Addr, subnet: Cidr) -> Result<(), Error> {
        match self.state().host_subnets.get(&subnet) {
            None => Ok(()),
            Some(hs) if hs.host_ip == host_ip => self.apply(vec![Change::HostSubnet {
                subnet,
                host_subnet: None,
            }]),
            Some(hs) => Err(Error::NotFound {
                what: format!(
                    "host subnet {subnet} of host {host_ip} (it belongs to host {})",
                    hs.host_ip
                ),
            }),
        }
    }

    /// The seed's AddServiceRules; a service of the same IP is replaced.
    pub fn service_add(&mut self, svc: Service) -> Result<(), Error> {
        self.require_setup()?;
        self.apply(vec![Change::Service {
            ip: svc.ip,
            service: Some(svc),
        }])
    }

    /// The seed's DeleteServiceRules.
    pub fn service_del(&mut self, ip: Ipv4Addr) -> Result<(), Error> {
        if !self.state().services.contains_key(&ip) {
            return Ok(());
        }
        self.apply(vec![Change::Service { ip, service: None }])
    }

    /// The seed's UpdateLocalMulticastFlows; None disables the VNID's local multicast.
    pub fn multicast_local(
        &mut self,
        vnid: Vnid,
        multicast: Option<LocalMulticast>,
    ) -> Result<(), Error> {
        self.require_setup()?;
        self.apply(vec![Change::Multicast { vnid, multicast }])
    }

    /// The seed's UpdateVXLANMulticastFlows.
    pub fn multicast_vxlan(&mut self, remotes: Vec<Ipv4Addr>) -> Result<(), Error> {
        self.require_setup()?;
        self.apply(vec![Change::VxlanMulticast { remotes }])
    }

    /// The seed's UpdateEgressNetworkPolicyRules for one VNID (None removes its policies).
    /// Returns the seed's input error when the policy cannot be honoured: the flows then do what
    /// the message says (drop all of the VNID's traffic).
    pub fn egress_set(
        &mut self,
        vnid: Vnid,
        egress: Option<EgressState>,
    ) -> Result<Option<String>, Error> {
        self.require_setup()?;
        let policy_error = egress
            .as_ref()
            .and_then(|entry| egress_flows(vnid, entry).error);
        self.apply(vec![Change::Egress { vnid, egress }])?;
        Ok(policy_error)
    }

    /// New addresses for egress DNS names: every policy using one of them gets its flows
    /// recomputed.
    pub fn egress_dns_changed(
        &mut self,
        changed: &BTreeMap<String, Vec<Ipv4Addr>>,
    ) -> Result<(), Error> {
        let changes = self
            .state()
            .egress
            .iter()
            .filter(|(_, e)| e.dns.keys().any(|name| changed.contains_key(name)))
            .map(|(vnid, e)| {
                let mut entry = e.clone();
                for (name, ips) in &mut entry.dns {
                    if let Some(new) = changed.get(name) {
                        ips.clone_from(new);
                    }
                }
                Change::Egress {
                    vnid: *vnid,
                    egress: Some(entry),
                }
            })
            .collect();
        self.apply(changes)
    }
}

/// Checks egress policies before anything is done (resolving their DNS names included): each
/// policy is valid, none is in the global VNID (the seed ignores those: nothing changes), and
/// a VNID with policies names its namespaces.
pub fn check_egress(
    vnid: Vnid,
    namespaces: &[String],
    policies: &[EgressNetworkPolicy],
) -> Result<(), Error> {
    for policy in policies {
        policy.validate()?;
    }
    if policies.is_empty() {
        return Ok(());
    }
    if vnid == Vnid::GLOBAL {
        return Err(Error::Policy {
            message: global_vnid_error(policies),
            applied: false,
        });
    }
    if namespaces.is_empty() {
        return Err(invalid(
            "egress policy namespaces",
            "",
            "the VNID's namespaces are needed (at least one)",
        ));
    }
    Ok(())
}

/// The most ports one VNID's local multicast can be delivered to: table 120's flow outputs to
/// each, and it must fit one OpenFlow message inside a bundle add.
pub fn max_multicast_ports() -> Result<usize, Error> {
    let vnid = Vnid::new(Vnid::MAX).unwrap_or_default();
    // Every port number encodes to the same width; the highest real one stands for all.
    table::max_repeats(|n| local_multicast_delivery_flow(vnid, &vec![MAX_OFPORT; n]))
        .map_err(Error::from)
}

/// Checks `multicast local`'s ports before anything is done: real OpenFlow port numbers, and
/// no more than one flow can output to.
pub fn check_multicast_local(ofports: &[u16]) -> Result<(), Error> {
    if let Some(bad) = ofports.iter().find(|p| **p == 0 || **p > MAX_OFPORT) {
        let range = format!("must be 1-{MAX_OFPORT}");
        return Err(invalid("OpenFlow port", bad.to_string(), range));
    }
    let max = max_multicast_ports()?;
    if ofports.len() > max {
        return Err(invalid(
            "multicast ports",
            format!("{} ports", ofports.len()),
            format!("at most {max} fit in one flow (one OpenFlow message)"),
        ));
    }
    Ok(())
}

/// Checks `multicast vxlan`'s remotes before anything is done: no more than table 111's one
/// flow can send to.
pub fn check_multicast_vxlan(remotes: &[Ipv4Addr]) -> Result<(), Error> {
    let max = table::max_repeats(|n| vxlan_multicast_flow(&vec![Ipv4Addr::BROADCAST; n]))?;
    if remotes.len() > max {
        return Err(invalid(
            "multicast remotes",
            format!("{} remotes", remotes.len()),
            format!("at most {max} fit in one flow (one OpenFlow message)"),
        ));
    }
    Ok(())
}
