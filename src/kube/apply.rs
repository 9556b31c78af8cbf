//! Inputs onto the core: each input is made true with the core's own operations, written once
//! there (`sdn/core/`), each one all-or-nothing; an input already true changes nothing (no
//! bundle, no journal record). The same function drives a node's writer (one edit per API
//! event, `sink.rs`) and a bare core (the simulated nodes of the scale bench).

use crate::sdn::core::{check_egress, Core, CoreError};
use crate::sdn::objects::check_named_ports;
use crate::sdn::policy::admin::{AdminPolicy, Tier};
use crate::sdn::policy::networkpolicy::model::NetPol;
use crate::sdn::types::{Mode, Service};
use crate::sdn::{Error, LabelEdit, PodInfo};
use crate::value::PodKey;

use super::convert::PolicyFacts;
use super::input::{Expected, Input, Kind, ObjectRef, PodWant};

/// What became of one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The store holds what the API says.
    Applied,
    /// Applied, but not all of it could be: the object is bad (a NetworkPolicy ofnode cannot
    /// implement, enforced by its fail-closed stand-in; a pod whose reported address is not the
    /// one CNI gave it; an egress policy the seed refuses, enforced as the seed does).
    Complaint(String),
    /// Not applied: the object cannot be implemented (nothing of it was applied).
    Refused(String),
    /// Not applied for a reason of the moment (the node not set up yet, the writer stopping):
    /// tried again.
    Retry(String),
}

impl Outcome {
    fn of<E: Into<Error>>(result: Result<(), E>) -> Outcome {
        match result {
            Ok(()) => Outcome::Applied,
            Err(e) => Outcome::failed(e),
        }
    }

    fn failed(e: impl Into<Error>) -> Outcome {
        let e: Error = e.into();
        let transient = matches!(
            e,
            Error::Core(CoreError::NotSetUp)
                | Error::Shutdown
                | Error::Standby { .. }
                | Error::Switch(_)
                | Error::Ovsdb(_)
                | Error::State(_)
                | Error::Replication { .. }
        );
        if transient {
            Outcome::Retry(e.to_string())
        } else {
            Outcome::Refused(e.to_string())
        }
    }
}

/// One event's inputs applied in order; the outcome of each, with the objects it belongs to.
pub fn apply_all(core: &mut Core, inputs: &[Input]) -> Vec<(Vec<ObjectRef>, Outcome)> {
    inputs
        .iter()
        .map(|input| (input.objects(), apply(core, input)))
        .collect()
}

/// Makes `input` true in the core.
pub fn apply(core: &mut Core, input: &Input) -> Outcome {
    let Some(setup) = core.state().setup else {
        return Outcome::Retry(CoreError::NotSetUp.to_string());
    };
    let networkpolicy = setup.mode == Mode::NetworkPolicy;
    match input {
        // Only the NetworkPolicy mode keeps namespaces (the others take VNIDs per pod).
        Input::Namespace { .. } if !networkpolicy => Outcome::Applied,
        Input::Namespace {
            want: Some(ns),
            refused,
            ..
        } => match (core.namespace_set(ns.clone()), refused) {
            (Ok(()), Some(why)) => Outcome::Complaint(format!(
                "{why}: the namespace keeps its audit setting ({}) until the annotation is fixed",
                ns.audit
            )),
            (result, _) => Outcome::of(result),
        },
        Input::Namespace {
            name, want: None, ..
        } => Outcome::of(core.namespace_del(name)),
        Input::Pod {
            key,
            local: true,
            want,
        } => local_pod(core, setup.mode, key, want.as_ref()),
        Input::Pod { .. } if !networkpolicy => Outcome::Applied,
        Input::Pod {
            key,
            local: false,
            want,
        } => remote_pod(core, key, want.as_ref()),
        // NetworkPolicies are the NetworkPolicy mode's (openshift-sdn's other modes ignore them).
        Input::NetPol { .. } if !networkpolicy => Outcome::Applied,
        Input::NetPol { key, want: None } => {
            let (namespace, name) = key.split_once('/').unwrap_or((key, ""));
            match core.netpol_del(namespace, name) {
                Err(CoreError::NotFound { .. }) => Outcome::Applied,
                result => Outcome::of(result),
            }
        }
        Input::NetPol {
            want: Some(facts), ..
        } => netpol(core, facts),
        // The admin tiers are the NetworkPolicy mode's, as NetworkPolicies are.
        Input::Admin { .. } if !networkpolicy => Outcome::Applied,
        Input::Admin {
            kind,
            name,
            want: None,
        } => admin_del(core, *kind, name),
        Input::Admin {
            kind,
            name,
            want: Some(policy),
        } => admin(core, *kind, name, policy),
        Input::HostSubnet { old, want, .. } => host_subnet(core, old.as_ref(), want.as_ref()),
        Input::Service { old_ip, want, .. } => service(core, *old_ip, want.as_ref()),
        Input::Sweep(expected) => sweep(core, expected),
        Input::Egress { vnid, want, .. } => {
            let now = core.state().egress.get(vnid);
            if now == want.as_ref() {
                return Outcome::Applied;
            }
            if let Some(state) = want {
                if let Err(e) = check_egress(*vnid, &state.namespaces, &state.policies) {
                    return Outcome::failed(e);
                }
            }
            match core.egress_set(*vnid, want.clone()) {
                Ok(None) => Outcome::Applied,
                Ok(Some(seed_says)) => Outcome::Complaint(seed_says),
                Err(e) => Outcome::failed(e),
            }
        }
    }
}

/// A pod of this node: its attachment is CNI's (added and deleted through the socket); what
/// the API adds is its labels and named ports (NetworkPolicy mode) or its VNID (multitenant:
/// the seed's UpdatePod when its namespace's NetNamespace changes). One not attached yet
/// takes them when CNI adds it.
fn local_pod(core: &mut Core, mode: Mode, key: &PodKey, want: Option<&PodWant>) -> Outcome {
    let (Some(want), Some(attached)) = (want, core.state().pods.get(key)) else {
        return Outcome::Applied;
    };
    let address = std::net::IpAddr::V4(attached.ip);
    let disagrees = !want.ips.is_empty() && !want.ips.contains(&address);
    let outcome = match mode {
        Mode::NetworkPolicy => Outcome::of(local_pod_meta(core, key, want)),
        Mode::Multitenant if attached.vnid != want.vnid => {
            Outcome::of(core.pod_update(key, want.vnid).map(|_| ()))
        }
        _ => Outcome::Applied,
    };
    match outcome {
        Outcome::Applied if disagrees => Outcome::Complaint(format!(
            "status.podIPs {:?} do not include {address}, the address CNI gave the pod: the node keeps {address}",
            want.ips
        )),
        other => other,
    }
}

/// What selectors see of a local pod as the API says: its labels and named ports replaced
/// (one batch, so one bundle); its address stays its attachment's.
fn local_pod_meta(core: &mut Core, key: &PodKey, want: &PodWant) -> Result<(), CoreError> {
    // Checked before the labels change, so that bad ports leave the labels as they were.
    check_named_ports("ports", &want.ports)?;
    let now = core
        .state()
        .pod_infos
        .get(key)
        .map(|info| info.labels.clone())
        .unwrap_or_default();
    core.pod_labels(key, &LabelEdit::between(&now, &want.labels))?;
    core.pod_ports(key, want.ports.clone())
}

/// A pod of another node: what selectors see of it, once it has an address.
fn remote_pod(core: &mut Core, key: &PodKey, want: Option<&PodWant>) -> Outcome {
    if core.state().pods.contains_key(key) {
        // The API says another node; this node's attachment is CNI's to delete.
        return Outcome::Refused(format!(
            "pod {key} is attached on this node but scheduled on another"
        ));
    }
    match want.filter(|want| !want.ips.is_empty()) {
        Some(want) => {
            let info = PodInfo {
                labels: want.labels.clone(),
                ips: want.ips.clone(),
                local: false,
                ports: want.ports.clone(),
            };
            Outcome::of(core.remote_pod_set(key.clone(), info))
        }
        None => Outcome::of(core.remote_pod_del(key)),
    }
}

/// A NetworkPolicy: applied whole, or else its fail-closed stand-in (nothing allowed, what it
/// selects isolated) and the object is bad.
fn netpol(core: &mut Core, facts: &PolicyFacts) -> Outcome {
    match core.netpol_apply(facts.policy.clone()) {
        Ok(()) => match &facts.refused {
            None => Outcome::Applied,
            Some(why) => Outcome::Complaint(format!("{why}: its pods are isolated instead")),
        },
        Err(e @ (CoreError::Field(_) | CoreError::Invalid(_) | CoreError::Flow { .. })) => {
            match core.netpol_apply(isolation_only(&facts.policy)) {
                Ok(()) => Outcome::Complaint(format!("{e}: its pods are isolated instead")),
                Err(_) => Outcome::Refused(e.to_string()),
            }
        }
        Err(e) => Outcome::failed(e),
    }
}

/// `policy` with no rule: what it selects isolated in the directions it names.
fn isolation_only(policy: &NetPol) -> NetPol {
    NetPol {
        ingress: policy.ingress.as_ref().map(|_| Vec::new()),
        egress: policy.egress.as_ref().map(|_| Vec::new()),
        ..policy.clone()
    }
}

/// `anp` or `banp`: how the core names the tier of `kind`.
fn admin_short(kind: Kind) -> &'static str {
    match kind {
        Kind::BaselineAdminNetworkPolicy => Tier::Baseline.short(),
        _ => Tier::Admin { priority: 0 }.short(),
    }
}

fn admin_del(core: &mut Core, kind: Kind, name: &str) -> Outcome {
    match core.admin_del(admin_short(kind), name) {
        Err(CoreError::NotFound { .. }) => Outcome::Applied,
        result => Outcome::of(result),
    }
}

/// An admin policy: applied whole, or refused with nothing of it enforced (a version applied
/// before goes too). Unlike a NetworkPolicy's, an admin policy's stand-in could not be
/// narrower than what it meant: its Deny and Pass rules override what namespace owners allow.
fn admin(core: &mut Core, kind: Kind, name: &str, policy: &AdminPolicy) -> Outcome {
    match core.admin_apply(policy.clone()) {
        Ok(()) => Outcome::Applied,
        Err(e @ (CoreError::Field(_) | CoreError::Invalid(_) | CoreError::Flow { .. })) => {
            match admin_del(core, kind, name) {
                Outcome::Applied => Outcome::Refused(format!("{e}: nothing of it is enforced")),
                other => other,
            }
        }
        Err(e) => Outcome::failed(e),
    }
}

/// Another node's subnet: the old routes go when the subnet moved; one that overlaps this
/// node's own subnet is refused (it would route this node's pods away).
fn host_subnet(
    core: &mut Core,
    old: Option<&crate::sdn::HostSubnet>,
    want: Option<&crate::sdn::HostSubnet>,
) -> Outcome {
    let state = core.state();
    if let (Some(want), Some(setup)) = (want, state.setup) {
        if want.subnet.overlaps(&setup.local_subnet) {
            return Outcome::Refused(format!(
                "subnet {} overlaps this node's subnet {}",
                want.subnet, setup.local_subnet
            ));
        }
    }
    if let Some(old) = old.filter(|old| want.is_none_or(|w| w.subnet != old.subnet)) {
        if let Err(e) = core.hostsubnet_del(old.host_ip, old.subnet) {
            return Outcome::failed(e);
        }
    }
    match want {
        Some(want) if core.state().host_subnets.get(&want.subnet) != Some(want) => {
            Outcome::of(core.hostsubnet_add(*want))
        }
        _ => Outcome::Applied,
    }
}

/// A service: the old cluster IP's rules go when the IP changed (or the service went).
fn service(core: &mut Core, old_ip: Option<std::net::Ipv4Addr>, want: Option<&Service>) -> Outcome {
    if let Some(old) = old_ip.filter(|old| want.is_none_or(|w| w.ip != *old)) {
        if let Err(e) = core.service_del(old) {
            return Outcome::failed(e);
        }
    }
    match want {
        Some(want) if core.state().services.get(&want.ip) != Some(want) => {
            Outcome::of(core.service_add(want.clone()))
        }
        _ => Outcome::Applied,
    }
}

/// Removes what the store holds beyond `expected`, dependents before their namespaces (each
/// removal is its own all-or-nothing step; the ones refused are listed).
fn sweep(core: &mut Core, expected: &Expected) -> Outcome {
    let state = core.state();
    let mut gone = Vec::new();
    for (key, info) in &state.pod_infos {
        if !info.local && !expected.remote_pods.contains(key) {
            gone.push(Input::Pod {
                key: key.clone(),
                local: false,
                want: None,
            });
        }
    }
    for key in state
        .netpols
        .keys()
        .filter(|k| !expected.netpols.contains(*k))
    {
        gone.push(Input::NetPol {
            key: key.clone(),
            want: None,
        });
    }
    for ip in state
        .services
        .keys()
        .filter(|ip| !expected.service_ips.contains(*ip))
    {
        gone.push(Input::Service {
            name: ip.to_string(),
            old_ip: Some(*ip),
            want: None,
        });
    }
    for hs in state
        .host_subnets
        .values()
        .filter(|hs| !expected.subnets.contains(&hs.subnet))
    {
        gone.push(Input::HostSubnet {
            name: hs.subnet.to_string(),
            old: Some(*hs),
            want: None,
        });
    }
    for vnid in state
        .egress
        .keys()
        .filter(|v| !expected.egress.contains(*v))
    {
        gone.push(Input::Egress {
            vnid: *vnid,
            objects: Vec::new(),
            want: None,
        });
    }
    for policy in state
        .admin_policies
        .iter()
        .filter(|(k, _)| !expected.admin.contains(*k))
        .map(|(_, p)| p)
    {
        gone.push(Input::Admin {
            kind: Kind::of_admin(policy.tier),
            name: policy.name.clone(),
            want: None,
        });
    }
    for name in state
        .namespaces
        .keys()
        .filter(|n| !expected.namespaces.contains(*n))
    {
        gone.push(Input::Namespace {
            name: name.clone(),
            want: None,
            refused: None,
        });
    }
    if !gone.is_empty() {
        tracing::info!(entries = gone.len(), "removing what the API no longer has");
    }
    let refused: Vec<String> = gone
        .iter()
        .filter_map(|input| match apply(core, input) {
            Outcome::Applied => None,
            Outcome::Complaint(why) | Outcome::Refused(why) | Outcome::Retry(why) => Some(why),
        })
        .collect();
    if refused.is_empty() {
        Outcome::Applied
    } else {
        Outcome::Complaint(format!("not removed: {}", refused.join("; ")))
    }
}
